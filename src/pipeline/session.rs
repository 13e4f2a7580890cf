//! One replication session: set up, start streaming from the slot's confirmed position, run the reader
//! and the sink until stop or failure.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio_postgres::Client;
use tokio_util::sync::CancellationToken;

use super::{reader::Reader, sink::Sink};
use crate::config::Config;
use crate::error::RelayError;
use crate::kafka::Producer;
use crate::lsn::Lsn;
use crate::metrics::Metrics;
use crate::postgres::replication::ReplicationConnection;
use crate::postgres::{setup, ConnectParams, PgError};

/// Batches the reader may run ahead of the sink. With batches of up to `reader::BATCH_MAX` events this
/// bounds what sits between the two stages.
const CHANNEL_BATCHES: usize = 8;

/// What carries over between sessions of one process.
#[derive(Debug, Default)]
pub struct SessionState {
    /// Whether a session has streamed from the slot: if the slot disappears after that, it was dropped
    /// under us, and silently recreating it could skip events.
    pub streamed: bool,
}

/// Everything a session needs once the server streams.
struct Started {
    conn: ReplicationConnection,
    sql: Client,
    start: Lsn,
    peer_timeout: Option<Duration>,
}

pub async fn run(cfg: &Config, shutdown: &CancellationToken, state: &mut SessionState, metrics: &Arc<Metrics>) -> Result<(), RelayError> {
    // The producer connects to the brokers while PostgreSQL is set up.
    let producer = Producer::new(&cfg.kafka).map_err(|e| RelayError::KafkaConfig(e.to_string()))?;
    let started = tokio::select! {
        // Setup has no business outliving a stop request (it can wait on a long transaction while
        // creating the slot, or on an unresponsive server).
        _ = shutdown.cancelled() => return Ok(()),
        s = start(cfg, state) => s?,
    };
    state.streamed = true;
    metrics.sessions.fetch_add(1, Ordering::Relaxed);
    metrics.streaming.store(true, Ordering::Relaxed);
    tracing::info!(slot = %cfg.slot_name, publication = %cfg.publication_name, from = %started.start, "streaming");

    let (tx, rx) = mpsc::channel(CHANNEL_BATCHES);
    let (confirmed_tx, confirmed_rx) = watch::channel(started.start);
    let sink = Sink::new(producer, started.start, confirmed_tx, cfg.kafka.clone(), metrics.clone());
    let sink = tokio::spawn(sink.run(rx, shutdown.clone(), cfg.shutdown_timeout));
    let reader = Reader::new(started.conn, started.sql, cfg, tx, confirmed_rx, started.peer_timeout, metrics.clone());
    let reader_result = reader.run(shutdown).await;
    let sink_result = match sink.await {
        Ok(r) => r,
        Err(e) => Err(RelayError::KafkaTransient(format!("the sink task failed: {e}"))),
    };
    let result = match (reader_result, sink_result) {
        // A definite error wins: it is what the operator must act on.
        (Err(r), _) if !r.is_retryable() => Err(r),
        (_, Err(s)) => Err(s),
        (r, Ok(())) => r,
    };
    if result.is_ok() && shutdown.is_cancelled() && cfg.slot_drop_on_stop {
        drop_slot(cfg).await;
    }
    result
}

/// `slot.drop.on.stop`: drop the slot after a graceful stop (its walsender may need a moment to
/// release it).
async fn drop_slot(cfg: &Config) {
    let params = ConnectParams::from_config(&cfg.database);
    let Ok(sql) = setup::connect_sql(&params).await else {
        tracing::warn!(slot = %cfg.slot_name, "slot.drop.on.stop: cannot connect to drop the slot");
        return;
    };
    for _ in 0..50 {
        match sql.execute("SELECT pg_drop_replication_slot($1)", &[&cfg.slot_name]).await {
            Ok(_) => {
                tracing::info!(slot = %cfg.slot_name, "dropped replication slot (slot.drop.on.stop=true)");
                return;
            }
            Err(e) if e.code().is_some_and(|c| c.code() == "55006") => tokio::time::sleep(Duration::from_millis(100)).await,
            Err(e) => {
                tracing::warn!(slot = %cfg.slot_name, error = %PgError::Sql(e), "slot.drop.on.stop: could not drop the slot");
                return;
            }
        }
    }
}

async fn start(cfg: &Config, state: &SessionState) -> Result<Started, RelayError> {
    let params = ConnectParams::from_config(&cfg.database);
    let sql = setup::connect_sql(&params).await?;
    setup::check_wal_level(&sql).await?;
    setup::ensure_publication(&sql, cfg).await?;
    let mut conn = ReplicationConnection::connect(&params).await?;
    let slot = match setup::slot_state(&sql, &cfg.slot_name).await? {
        Some(s) => s,
        None if state.streamed => return Err(RelayError::SlotDropped(cfg.slot_name.clone())),
        None => {
            match conn.create_slot(&cfg.slot_name).await {
                Ok(lsn) => tracing::info!(slot = %cfg.slot_name, consistent_point = %lsn, "created replication slot"),
                // Another instance created it first: fine, use it.
                Err(e) if e.sqlstate() == Some("42710") => {}
                Err(e) => return Err(e.into()),
            }
            setup::slot_state(&sql, &cfg.slot_name).await?.ok_or_else(|| RelayError::SlotDropped(cfg.slot_name.clone()))?
        }
    };
    setup::validate_slot(&slot, cfg)?;
    let requested = slot.confirmed_flush.unwrap_or(Lsn::ZERO);
    conn.start_replication(&cfg.slot_name, requested, &cfg.publication_name).await.map_err(|e| match e {
        PgError::Server(ref s) if s.code == "42704" && s.message.contains("publication") => RelayError::Setup(setup::SetupError(format!(
            "{s}; create publication `{}` or set publication.autocreate.mode=filtered",
            cfg.publication_name
        ))),
        e => e.into(),
    })?;
    // The slot is ours now and cannot move; a previous holder may have confirmed further between our
    // read and START_REPLICATION. Never start (and so never report) below what the slot has.
    let now = setup::slot_state(&sql, &cfg.slot_name).await?.and_then(|s| s.confirmed_flush).unwrap_or(requested);
    let peer_timeout = setup::wal_sender_timeout(&sql).await?.map(|t| t + cfg.status_interval);
    Ok(Started { conn, sql, start: requested.max(now), peer_timeout })
}
