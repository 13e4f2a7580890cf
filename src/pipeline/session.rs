//! One replication session: set up, start streaming from the slot's confirmed position, run the reader
//! and the sink until stop or failure.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio_postgres::Client;
use tokio_util::sync::CancellationToken;

use super::{reader::Reader, sink::Sink, snapshot};
use crate::config::{Config, SnapshotMode};
use crate::error::RelayError;
use crate::kafka::Producer;
use crate::lsn::Lsn;
use crate::metrics::Metrics;
use crate::outbox::{ContextHeaders, Router};
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

/// Debezium's context headers for this run; `runId` is a UUIDv7 per task start, as Debezium's.
pub fn context_headers(cfg: &Config) -> Option<ContextHeaders> {
    cfg.extended_headers.then(|| ContextHeaders {
        connector_logical_name: cfg.topic_prefix.clone(),
        task_id: "0".to_string(),
        connector_name: "postgresql".to_string(),
        run_id: uuid::Uuid::now_v7().to_string(),
    })
}

pub fn router(cfg: &Config, context: Option<ContextHeaders>) -> Router {
    Router::new(cfg.router.clone(), cfg.key_converter, cfg.value_converter, context)
}

pub async fn run(
    cfg: &Config,
    shutdown: &CancellationToken,
    state: &mut SessionState,
    metrics: &Arc<Metrics>,
) -> Result<(), RelayError> {
    // The producer connects to the brokers while PostgreSQL is set up.
    let producer = Producer::new(&cfg.kafka).map_err(|e| RelayError::KafkaConfig(e.to_string()))?;
    let context = context_headers(cfg);
    let started = tokio::select! {
        // Setup has no business outliving a stop request (it can wait on a long transaction while
        // creating the slot, or on an unresponsive server).
        _ = shutdown.cancelled() => return Ok(()),
        s = start(cfg, state, &context, shutdown, metrics) => s?,
    };
    let Some(started) = started else {
        tracing::info!("snapshot.mode=initial_only: snapshot done, not streaming");
        if cfg.slot_drop_on_stop {
            drop_slot(cfg).await;
        }
        return Ok(());
    };
    state.streamed = true;
    metrics.sessions.fetch_add(1, Ordering::Relaxed);
    metrics.streaming.store(true, Ordering::Relaxed);
    tracing::info!(slot = %cfg.slot_name, publication = %cfg.publication_name, from = %started.start, "streaming");

    let (tx, rx) = mpsc::channel(CHANNEL_BATCHES);
    let (confirmed_tx, confirmed_rx) = watch::channel(started.start);
    let sink = Sink::new(producer, started.start, confirmed_tx, cfg.kafka.clone(), metrics.clone())
        .with_tolerance(cfg.errors.clone(), &cfg.connector_name);
    let sink = tokio::spawn(sink.run(rx, shutdown.clone(), cfg.shutdown_timeout));
    let reader = Reader::new(
        started.conn,
        started.sql,
        cfg,
        router(cfg, context),
        tx,
        confirmed_rx,
        started.peer_timeout,
        metrics.clone(),
    );
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

/// Sets up and starts streaming; `None` when `snapshot.mode=initial_only` ends the run after the
/// snapshot.
async fn start(
    cfg: &Config,
    state: &SessionState,
    context: &Option<ContextHeaders>,
    shutdown: &CancellationToken,
    metrics: &Arc<Metrics>,
) -> Result<Option<Started>, RelayError> {
    let params = ConnectParams::from_config(&cfg.database);
    let sql = setup::connect_sql(&params).await?;
    setup::check_wal_level(&sql).await?;
    setup::ensure_publication(&sql, cfg).await?;
    let mut conn = ReplicationConnection::connect(&params).await?;
    let existing = setup::slot_state(&sql, &cfg.slot_name).await?;
    if existing.is_none() && state.streamed {
        return Err(RelayError::SlotDropped(cfg.slot_name.clone()));
    }
    let snapshot_wanted = match cfg.snapshot_mode {
        SnapshotMode::NoData => false,
        SnapshotMode::Initial | SnapshotMode::InitialOnly | SnapshotMode::WhenNeeded => existing.is_none(),
        SnapshotMode::Always => true,
    };
    let slot = match existing {
        Some(s) => {
            // A staging slot left by a crash between the copy and its drop is stale now.
            let _ = sql.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND NOT active", &[&snapshot::staging_slot(&cfg.slot_name)]).await;
            if snapshot_wanted {
                // `always` with an existing slot: a snapshot of its own, then the stream from the
                // slot's position; rows changed in between arrive twice (as with Debezium).
                run_snapshot(cfg, &params, None, context, shutdown, metrics).await?;
            }
            s
        }
        None if snapshot_wanted => {
            // One snapshot at a time per slot: two instances starting together would otherwise share
            // (and drop) one staging slot, and events between their two snapshots would be lost.
            let lock = snapshot::lock_key(&cfg.slot_name);
            let locked: bool =
                sql.query_one("SELECT pg_try_advisory_lock($1)", &[&lock]).await.map_err(PgError::Sql)?.get(0);
            if !locked {
                return Err(PgError::SlotBusy(format!(
                    "another instance is taking the initial snapshot for slot `{}`",
                    cfg.slot_name
                ))
                .into());
            }
            let result = snapshot_into_new_slot(cfg, &params, &sql, &mut conn, context, shutdown, metrics).await;
            let _ = sql.execute("SELECT pg_advisory_unlock($1)", &[&lock]).await;
            result?
        }
        None => {
            match conn.create_slot(&cfg.slot_name).await {
                Ok(lsn) => tracing::info!(slot = %cfg.slot_name, consistent_point = %lsn, "created replication slot"),
                // Another instance created it first: fine, use it.
                Err(e) if e.sqlstate() == Some("42710") => {}
                Err(e) => return Err(e.into()),
            }
            setup::slot_state(&sql, &cfg.slot_name)
                .await?
                .ok_or_else(|| RelayError::SlotDropped(cfg.slot_name.clone()))?
        }
    };
    if cfg.snapshot_mode == SnapshotMode::InitialOnly {
        return Ok(None);
    }
    setup::validate_slot(&slot, cfg)?;
    let requested = slot.confirmed_flush.unwrap_or(Lsn::ZERO);
    conn.start_replication(&cfg.slot_name, requested, &cfg.publication_name).await.map_err(|e| match e {
        PgError::Server(ref s) if s.code == "42704" && s.message.contains("publication") => {
            RelayError::Setup(setup::SetupError(format!(
                "{s}; create publication `{}` or set publication.autocreate.mode=filtered",
                cfg.publication_name
            )))
        }
        e => e.into(),
    })?;
    // The slot is ours now and cannot move; a previous holder may have confirmed further between our
    // read and START_REPLICATION. Never start (and so never report) below what the slot has.
    let now = setup::slot_state(&sql, &cfg.slot_name).await?.and_then(|s| s.confirmed_flush).unwrap_or(requested);
    let peer_timeout = setup::wal_sender_timeout(&sql).await?.map(|t| t + cfg.status_interval);
    Ok(Some(Started { conn, sql, start: requested.max(now), peer_timeout }))
}

/// Takes the initial snapshot from a staging slot and creates the real slot as its copy. The caller
/// holds the snapshot lock.
async fn snapshot_into_new_slot(
    cfg: &Config,
    params: &ConnectParams,
    sql: &Client,
    conn: &mut ReplicationConnection,
    context: &Option<ContextHeaders>,
    shutdown: &CancellationToken,
    metrics: &Arc<Metrics>,
) -> Result<setup::SlotState, RelayError> {
    // Another instance may have finished the snapshot while we waited for the lock.
    if let Some(s) = setup::slot_state(sql, &cfg.slot_name).await? {
        return Ok(s);
    }
    let staging = snapshot::staging_slot(&cfg.slot_name);
    // Under the lock, a staging slot can only be a leftover of a crash.
    drop_slot_named(sql, &staging).await;
    let (consistent, exported) = conn.create_slot_exporting_snapshot(&staging).await?;
    tracing::info!(slot = %staging, consistent_point = %consistent, "snapshot: created staging slot");
    run_snapshot(cfg, params, Some(&exported), context, shutdown, metrics).await?;
    // Only now does the real slot exist: a crash before this point snapshots again.
    sql.execute("SELECT pg_copy_logical_replication_slot($1, $2)", &[&staging, &cfg.slot_name])
        .await
        .map_err(PgError::Sql)?;
    drop_slot_named(sql, &staging).await;
    tracing::info!(slot = %cfg.slot_name, consistent_point = %consistent, "created replication slot after the snapshot");
    setup::slot_state(sql, &cfg.slot_name).await?.ok_or_else(|| RelayError::SlotDropped(cfg.slot_name.clone()))
}

/// Publishes the existing rows through a sink of its own and waits for every acknowledgement.
async fn run_snapshot(
    cfg: &Config,
    params: &ConnectParams,
    exported: Option<&str>,
    context: &Option<ContextHeaders>,
    shutdown: &CancellationToken,
    metrics: &Arc<Metrics>,
) -> Result<(), RelayError> {
    let sql = setup::connect_sql(params).await?;
    snapshot::begin(&sql, exported).await?;
    let producer = Producer::new(&cfg.kafka).map_err(|e| RelayError::KafkaConfig(e.to_string()))?;
    let (tx, rx) = mpsc::channel(CHANNEL_BATCHES);
    let (confirmed_tx, _confirmed_rx) = watch::channel(Lsn::ZERO);
    let sink = tokio::spawn(Sink::new(producer, Lsn::ZERO, confirmed_tx, cfg.kafka.clone(), metrics.clone()).run(
        rx,
        shutdown.clone(),
        cfg.shutdown_timeout,
    ));
    let published = snapshot::publish(&sql, cfg, &mut router(cfg, context.clone()), &tx).await;
    drop(tx);
    let sink_result = sink.await.map_err(|e| RelayError::KafkaTransient(format!("the snapshot sink failed: {e}")))?;
    sink_result?;
    published?;
    sql.batch_execute("COMMIT").await.map_err(PgError::Sql)?;
    Ok(())
}

async fn drop_slot_named(sql: &Client, slot: &str) {
    for _ in 0..50 {
        match sql.execute("SELECT pg_drop_replication_slot($1)", &[&slot]).await {
            Err(e) if e.code().is_some_and(|c| c.code() == "55006") => {
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            _ => return,
        }
    }
}

/// `slot.drop.on.stop`: drop the slot after a graceful stop (its walsender may need a moment to
/// release it).
async fn drop_slot(cfg: &Config) {
    let params = ConnectParams::from_config(&cfg.database);
    let Ok(sql) = setup::connect_sql(&params).await else {
        tracing::warn!(slot = %cfg.slot_name, "slot.drop.on.stop: cannot connect to drop the slot");
        return;
    };
    drop_slot_named(&sql, &cfg.slot_name).await;
    match setup::slot_state(&sql, &cfg.slot_name).await {
        Ok(None) => tracing::info!(slot = %cfg.slot_name, "dropped replication slot (slot.drop.on.stop=true)"),
        _ => tracing::warn!(slot = %cfg.slot_name, "slot.drop.on.stop: could not drop the slot"),
    }
}
