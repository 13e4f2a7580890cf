//! The polling relay (seed step 3): reads unpublished rows from the outbox table, publishes them
//! through the same stages as the log-tailing relay, and marks them published.
//!
//! ```text
//!  outbox table ──SELECT … FOR NO KEY UPDATE──▶ poller ──batches──▶ sink ──▶ librdkafka ──▶ broker
//!      ▲           (owned partitions, oldest first)   (route)   ◀── barrier: all acknowledged ──┘
//!      └──────── UPDATE … SET published_at; COMMIT ◀──┘
//! ```
//!
//! What differs from the log-tailing relay is the source (`postgres::polling`, the rows) and the
//! progress record (`batch`, the published column, instead of the slot's confirmed position). What
//! they share is everything after the row: the router, converters, transforms, the sink, the producer
//! and dead letters. Ownership of the aggregates (`ownership`) keeps per-aggregate order when several
//! instances run, provided they agree on how (`agreement` refuses one that does not).
//!
//! Backpressure: the poller waits for each batch's acknowledgements before it reads the next, so at
//! most one batch (`max.batch.size` rows) is between the table and the broker.

mod agreement;
mod batch;
mod limits;
mod ownership;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio_postgres::Client;
use tokio_util::sync::CancellationToken;

use crate::config::polling::PollingConfig;
use crate::config::Config;
use crate::error::RelayError;
use crate::lsn::Lsn;
use crate::metrics::{Metrics, RelayState};
use crate::outbox::{RelationInfo, RoutePlan};
use crate::postgres::polling::{event_columns, lock_key, PolledTable};
use crate::postgres::setup::{self, SetupError, SetupFailure};
use crate::postgres::ConnectParams;

/// How long the server lets the polling connection stay silent before it ends the session (its
/// `idle_in_transaction_session_timeout` and `idle_session_timeout`, see `session_settings`);
/// `PGOUTBOX_POLLING_SESSION_TIMEOUT_MS` shortens it (tests).
pub(super) fn session_timeout() -> Duration {
    super::millis_from_env("PGOUTBOX_POLLING_SESSION_TIMEOUT_MS", Duration::from_secs(20))
}

/// The longest the polling connection goes without a statement: a quarter of `session_timeout`
/// (5 s), so that a live instance never comes near it.
pub(super) fn heartbeat() -> Duration {
    session_timeout() / 4
}

/// Server settings of the polling connection, which holds the ownership locks: a client that
/// vanishes (a cut network, a frozen host, a proxy that keeps the server's side open) loses them
/// within about 20 s (`session_timeout`). The relay's own heartbeat does it: it runs a statement on
/// the connection at least every `heartbeat()` (its polls, its ownership checks, or `SELECT 1` while a
/// batch waits for the sink), so a session idle for 20 s, in a transaction or not, belongs to an
/// instance that is gone, and the server ends it (`idle_session_timeout` needs PostgreSQL 14; before
/// it the TCP settings below bound the wait, when TCP can tell). Each is set on its own, and one the
/// server does not know is skipped. The planner settings keep the poll on the partial index: it
/// underestimates how many rows the partition filter keeps, and then prefers reading and sorting the
/// whole table on every poll (measured: the drain rate fell with the table's size).
fn session_settings() -> [String; 9] {
    let idle = session_timeout().as_millis();
    [
        "SET enable_seqscan = off".into(),
        "SET enable_bitmapscan = off".into(),
        format!("SET idle_in_transaction_session_timeout = {idle}"),
        format!("SET idle_session_timeout = {idle}"),
        "SET tcp_keepalives_idle = 10".into(),
        "SET tcp_keepalives_interval = 5".into(),
        "SET tcp_keepalives_count = 3".into(),
        "SET tcp_user_timeout = 25000".into(),
        "SET client_connection_check_interval = 5000".into(),
    ]
}

/// Runs the polling relay until `shutdown` is cancelled (then `Ok`) or a definite error.
pub async fn run(config: &Config, shutdown: CancellationToken, metrics: Arc<Metrics>) -> Result<(), RelayError> {
    let polling = config.polling.as_ref().ok_or_else(|| {
        RelayError::TaskStopped("pgoutbox.relay=polling without polling options (a bug: report it)".into())
    })?;
    let mut kept = Kept::default();
    let result = sessions(config, polling, &shutdown, &metrics, &mut kept).await;
    kept.producer.close().await;
    result
}

/// What outlives the polling relay's sessions.
#[derive(Default)]
struct Kept {
    /// One producer for every session, as the log-tailing relay keeps it (see `Producer::new_session`).
    producer: super::session::KeptProducer,
    /// The backlog watch, started by the first session that found the tables: a relay whose sessions
    /// cannot start (Kafka away) is the one whose backlog matters.
    backlog: Option<BacklogWatch>,
}

/// A running `watch_backlog`, stopped when dropped.
struct BacklogWatch(CancellationToken);

impl Drop for BacklogWatch {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// The polling relay's sessions, one after the other, until a stop or a definite error.
async fn sessions(
    config: &Config,
    polling: &PollingConfig,
    shutdown: &CancellationToken,
    metrics: &Arc<Metrics>,
    kept: &mut Kept,
) -> Result<(), RelayError> {
    let mut backoff = super::Backoff::new();
    let mut pruning = false;
    loop {
        let started = std::time::Instant::now();
        if !pruning {
            // Pruning takes only published rows: it may start at once.
            match super::prune::start(config, metrics.clone(), shutdown.child_token()).await {
                Ok(()) => pruning = true,
                Err(e) if e.is_retryable() => {
                    tracing::warn!(error = %e, "pruning could not start; trying again with the next session")
                }
                Err(e) => return Err(e),
            }
        }
        let result = session(config, polling, shutdown, metrics, kept).await;
        let producer = &kept.producer;
        metrics.set_state(RelayState::Reconnecting);
        if shutdown.is_cancelled() {
            return match result {
                // A batch cut short by the stop: its rows stay unmarked and are published again.
                Err(e) if e.is_retryable() => {
                    tracing::info!(reason = %e, "stopped in the middle of a batch; its rows stay unpublished and are published again at the next start");
                    Ok(())
                }
                other => other,
            };
        }
        let wait = match result {
            Ok(()) => return Ok(()),
            Err(e) if batch::abandoned(&e) => {
                tracing::error!(
                    error = %e,
                    "polling: Kafka acknowledged nothing of this instance's batch for pgoutbox.polling.ack.timeout.ms: its \
                     transaction was rolled back (nothing marked; records of it that still arrive are duplicates), its \
                     aggregate partitions were released for instances that can publish, and its producer was closed (what it \
                     held is dropped). This instance takes partitions again once the Kafka cluster answers it (each session \
                     starts by asking); check the network between it and the brokers"
                );
                producer.close().await;
                backoff.next(started.elapsed())
            }
            Err(e) if e.is_retryable() => {
                producer.expire().await;
                let wait = backoff.next(started.elapsed());
                tracing::warn!(error = %e, retry_in = ?wait, "polling session ended; reconnecting (unmarked rows are published again)");
                wait
            }
            Err(e) => return Err(e),
        };
        tokio::select! {
            _ = shutdown.cancelled() => return Ok(()),
            _ = tokio::time::sleep(wait) => {}
        }
    }
}

async fn session(
    cfg: &Config,
    polling: &PollingConfig,
    shutdown: &CancellationToken,
    metrics: &Arc<Metrics>,
    kept: &mut Kept,
) -> Result<(), RelayError> {
    let params = ConnectParams::from_config(&cfg.database);
    let sql = tokio::select! {
        _ = shutdown.cancelled() => return Ok(()),
        c = setup::connect_sql(&params) => c?,
    };
    for setting in session_settings() {
        if let Err(e) = sql.batch_execute(&setting).await {
            tracing::debug!(setting, error = %e, "skipped a polling session setting");
        }
    }
    let tables = describe(&sql, cfg, polling).await?;
    // Before anything is published: an instance that would break the others' order never starts.
    // Before any other connection too: a pooler is told by the server processes answering this one.
    agreement::join(&sql, &params, &tables, polling).await?;
    if kept.backlog.is_none() {
        let stop = shutdown.child_token();
        tokio::spawn(watch_backlog(params.clone(), tables.clone(), cfg.stall_threshold, metrics.clone(), stop.clone()));
        kept.backlog = Some(BacklogWatch(stop));
    }
    // Before it takes partitions: a refused certificate or login stops the relay here, naming the
    // setting; a cluster it cannot reach ends the session, so an instance that cannot publish takes
    // no partition (the others keep them; see `batch` on a batch Kafka leaves unacknowledged).
    super::session::kafka_preflight(cfg).await?;
    // Before any task starts: an error here leaves nothing running behind.
    let notices = listen(&params, polling).await?;
    let producer = kept.producer.for_session(cfg)?;
    metrics.sessions.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    // The sink's confirmed LSN means nothing here: progress is the published column (see `batch`).
    let (confirmed, _) = watch::channel(Lsn(0));
    let (tx, rx) = mpsc::channel(2);
    let queue = tx.downgrade();
    metrics.set_queue(move || queue.upgrade().map(|q| (q.max_capacity(), q.capacity())));
    let sink = super::sink::Sink::new(producer, Lsn(0), confirmed, cfg.kafka.clone(), metrics.clone())
        .with_tolerance(cfg.errors.clone(), &cfg.connector_name);
    let sink = tokio::spawn(sink.run(rx, shutdown.clone(), cfg.shutdown_timeout));
    let mut router = super::session::router(cfg, super::session::context_headers(cfg));
    let plans: Vec<RoutePlan> = tables
        .iter()
        .map(|t| {
            router.plan(&RelationInfo {
                oid: 0,
                schema: t.schema.clone(),
                table: t.table.clone(),
                columns: t.columns.clone(),
            })
        })
        .collect();
    tracing::info!(
        tables = ?tables.iter().map(PolledTable::qualified).collect::<Vec<_>>(),
        partitions = polling.partitions,
        ordering = ?polling.ordering,
        "polling: publishing unpublished rows"
    );
    let mut poller = Poller { cfg, polling, sql: &sql, tables: &tables, plans: &plans, metrics, notices };
    let poll_result = poller.poll(&mut router, &tx, shutdown).await;
    // The polling connection goes first, and its partitions (and any batch still open) with it: the
    // other instances need not wait for this one's sink.
    drop(poller);
    drop(sql);
    drop(tx);
    if matches!(&poll_result, Err(e) if batch::abandoned(e)) {
        // Kafka took nothing for a while: what the sink holds is given up, not drained.
        sink.abort();
    }
    let sink_result = match sink.await {
        Ok(r) => r,
        Err(e) if e.is_cancelled() => Ok(()),
        Err(e) => Err(RelayError::TaskStopped(format!("the sink task failed: {e}"))),
    };
    kept.producer.session_ended();
    match (poll_result, sink_result) {
        (Err(p), _) if !p.is_retryable() => Err(p),
        (_, Err(s)) => Err(s),
        (p, Ok(())) => p,
    }
}

/// The tables the include lists select, checked for polling.
async fn describe(sql: &Client, cfg: &Config, polling: &PollingConfig) -> Result<Vec<PolledTable>, SetupFailure> {
    let mut tables = Vec::new();
    for (schema, table) in setup::captured_tables(sql, cfg).await? {
        let t = PolledTable::describe(sql, &schema, &table, polling, &event_columns(cfg)).await?;
        if let Some(note) = &t.order_note {
            tracing::warn!(table = %t.qualified(), "{note}");
        }
        tables.push(t);
    }
    if tables.is_empty() {
        return Err(SetupFailure::Setup(SetupError::Server(format!(
            "no table of database `{}` matches table.include.list / schema.include.list: the polling relay has nothing to poll; name the outbox table (e.g. table.include.list=public.outbox)",
            cfg.database.dbname
        ))));
    }
    Ok(tables)
}

/// `PGOUTBOX_POLLING_HOLD_MS` and `PGOUTBOX_POLLING_HOLD_MARK_MS` (tests): see `batch::Batch`.
fn hold(var: &str) -> Duration {
    std::env::var(var).ok().and_then(|v| v.parse().ok()).map_or(Duration::ZERO, Duration::from_millis)
}

/// How often the unpublished rows are counted and dated (`PGOUTBOX_BACKLOG_MS` shortens it, tests).
fn backlog_every() -> Duration {
    super::millis_from_env("PGOUTBOX_BACKLOG_MS", Duration::from_secs(5))
}

/// The age of the oldest unpublished row, where rows carry no date: how long the same row has been
/// seen as the oldest unpublished one. It restarts with every row the relay publishes, so it grows
/// exactly while nothing moves.
#[derive(Default)]
struct Sighting {
    key: Option<String>,
    since: Option<std::time::Instant>,
}

impl Sighting {
    fn age(&mut self, key: Option<String>) -> Duration {
        let now = std::time::Instant::now();
        if key.is_none() || key != self.key {
            self.key = key;
            self.since = Some(now);
        }
        self.since.map_or(Duration::ZERO, |s| now - s)
    }
}

/// Counts and dates the unpublished rows of every table, on a connection of its own so that a batch
/// waiting for acknowledgements (the case worth reporting) does not hold it, and across sessions, so
/// that it goes on while sessions cannot start (Kafka away). Every instance measures the whole table:
/// the backlog is the table's, not an instance's.
async fn watch_backlog(
    params: ConnectParams,
    tables: Vec<PolledTable>,
    threshold: Duration,
    metrics: Arc<Metrics>,
    stop: CancellationToken,
) {
    let mut backlog = super::backlog::Backlog::new(threshold);
    let mut sightings: Vec<Sighting> = tables.iter().map(|_| Sighting::default()).collect();
    let mut sql: Option<Client> = None;
    loop {
        if sql.as_ref().map_or(true, Client::is_closed) {
            sql = setup::connect_sql(&params)
                .await
                .map_err(|e| tracing::debug!(error = %e, "backlog: cannot connect"))
                .ok();
        }
        if let Some(c) = &sql {
            let (mut count, mut oldest, mut measured) = (0u64, Duration::ZERO, true);
            for (table, sighting) in tables.iter().zip(sightings.iter_mut()) {
                match table.backlog(c).await {
                    Ok(b) => {
                        count += b.count.max(0) as u64;
                        let age = match b.oldest_age_s {
                            Some(s) => Duration::from_secs_f64(s.max(0.0)),
                            None => sighting.age(b.oldest_key),
                        };
                        oldest = oldest.max(if b.count > 0 { age } else { Duration::ZERO });
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot count the unpublished rows for the backlog metrics; retrying");
                        measured = false;
                    }
                }
            }
            if measured {
                backlog.report(&metrics, count, oldest);
            }
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(backlog_every()) => {}
        }
    }
}

/// With `pgoutbox.polling.notify.channel`, a connection that LISTENs on it: each NOTIFY wakes the
/// poller at once. The application (or a trigger, docs/operations.md) sends the NOTIFY; that takes a
/// database-wide lock at commit, which is why this is opt-in.
async fn listen(
    params: &ConnectParams,
    polling: &PollingConfig,
) -> Result<Option<(Client, mpsc::Receiver<()>)>, RelayError> {
    let Some(channel) = &polling.notify_channel else { return Ok(None) };
    let (tx, rx) = mpsc::channel(1);
    let client = setup::connect_sql_notified(params, Some(tx)).await?;
    client
        .batch_execute(&format!("LISTEN {}", crate::postgres::replication::quote_ident(channel)))
        .await
        .map_err(crate::postgres::PgError::Sql)?;
    tracing::info!(channel = %channel, "polling: woken by NOTIFY on this channel, and every poll.interval.ms");
    Ok(Some((client, rx)))
}

struct Poller<'a> {
    cfg: &'a Config,
    polling: &'a PollingConfig,
    sql: &'a Client,
    tables: &'a [PolledTable],
    plans: &'a [RoutePlan],
    metrics: &'a Arc<Metrics>,
    /// The LISTEN connection (kept open) and its wake-ups.
    notices: Option<(Client, mpsc::Receiver<()>)>,
}

impl Poller<'_> {
    /// Waits for the poll interval, a NOTIFY, or `shutdown`, with a heartbeat on the polling
    /// connection at least every `heartbeat()` of a long interval.
    async fn idle(&mut self, shutdown: &CancellationToken) -> Result<(), RelayError> {
        let until = tokio::time::Instant::now() + self.polling.interval;
        let heartbeat = heartbeat();
        loop {
            let slice = until.min(tokio::time::Instant::now() + heartbeat);
            let woken = match &mut self.notices {
                None => tokio::select! {
                    _ = shutdown.cancelled() => true,
                    _ = tokio::time::sleep_until(slice) => false,
                },
                Some((_, rx)) => tokio::select! {
                    _ = shutdown.cancelled() => true,
                    _ = tokio::time::sleep_until(slice) => false,
                    notice = rx.recv() => {
                        if notice.is_none() {
                            tracing::warn!("polling: the LISTEN connection closed; polling every poll.interval.ms until the next session");
                            self.notices = None;
                        }
                        true
                    }
                },
            };
            if woken || slice >= until {
                return Ok(());
            }
            batch::step(async { self.sql.batch_execute("SELECT 1").await.map_err(crate::postgres::PgError::Sql) })
                .await?;
        }
    }

    async fn poll(
        &mut self,
        router: &mut crate::outbox::Router,
        tx: &mpsc::Sender<Vec<crate::pipeline::Item>>,
        shutdown: &CancellationToken,
    ) -> Result<(), RelayError> {
        let mut ownership = ownership::Ownership::join(self.sql, lock_key(self.tables), self.polling).await?;
        let mut limit = limits::RecordLimit::of(self.cfg);
        while !shutdown.is_cancelled() {
            let mut full = false;
            let owned = batch::step(ownership.refresh(self.sql, self.metrics)).await?.map(<[i32]>::to_vec);
            if let Some(partitions) = owned {
                for (table, plan) in self.tables.iter().zip(self.plans) {
                    let mut batch = batch::Batch {
                        cfg: self.cfg,
                        sql: self.sql,
                        router,
                        tx,
                        metrics: self.metrics,
                        hold: hold("PGOUTBOX_POLLING_HOLD_MS"),
                        hold_mark: hold("PGOUTBOX_POLLING_HOLD_MARK_MS"),
                        limit: limit.as_mut(),
                        ack_timeout: self.polling.ack_timeout,
                    };
                    let n = batch.run(table, plan, &partitions, self.polling.batch_size).await?;
                    full |= n as i64 >= self.polling.batch_size;
                }
            }
            if !full {
                self.idle(shutdown).await?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sighting_ages_while_the_same_row_stays_oldest() {
        let mut s = Sighting::default();
        assert_eq!(s.age(Some("a".into())), Duration::ZERO);
        std::thread::sleep(Duration::from_millis(20));
        assert!(s.age(Some("a".into())) >= Duration::from_millis(20));
        assert!(s.age(Some("b".into())) < Duration::from_millis(20), "a newer oldest row: progress");
        assert_eq!(s.age(None), Duration::ZERO, "nothing unpublished");
    }
}
