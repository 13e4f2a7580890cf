//! The reader: owns the replication connection. Decodes pgoutput, routes outbox INSERTs into records,
//! hands them to the sink in batches, and keeps the server informed with standby status updates.

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::{mpsc, watch};
use tokio::time::MissedTickBehavior;
use tokio_postgres::Client;
use tokio_util::sync::CancellationToken;

use super::checkpoint::{Partial, Resume};
use super::Item;
use crate::config::Config;
use crate::error::RelayError;
use crate::lsn::Lsn;
use crate::outbox::{ColumnInfo, RelationInfo, RoutePlan, Router};
use crate::pgoutput::{self, LogicalMessage, Oid};
use crate::postgres::replication::ReplicationConnection;
use crate::postgres::setup;
use crate::postgres::wire::ReplicationMessage;
use crate::postgres::PgError;

mod message;

/// Items per batch handed to the sink: large enough to amortise the channel, small enough to keep
/// latency and memory low.
pub const BATCH_MAX: usize = 1024;
/// Bytes of records per batch: with `session::CHANNEL_BATCHES` batches in the channel this bounds the
/// memory between reader and sink by bytes too, not only by count (a batch of 1,024 one-megabyte
/// events would otherwise be a gigabyte). A single larger event still makes a batch of its own.
pub const BATCH_MAX_BYTES: usize = 4 << 20;

/// How often the reader checks that the publication still covers every captured table (an outbox
/// table dropped and created again falls out of a `FOR TABLE` publication, silently).
const PUBLICATION_CHECK: Duration = Duration::from_secs(5);
/// How often the reader looks whether the server ended its SQL session (a cheap flag check).
const SQL_SESSION_WATCH: Duration = Duration::from_secs(1);
/// Bound on that check: the reader neither reads nor sends status updates meanwhile, so a dead SQL
/// connection must not hold it (a stalled network is noticed within this, then the session restarts).
const PUBLICATION_CHECK_TIMEOUT: Duration = Duration::from_secs(5);

/// The quickest two status updates that confirm a new position follow each other. An acknowledged
/// position goes out within this (instead of at the next `status.update.interval.ms`), which is what
/// a crash republishes; at most five updates a second do not flood the server.
const PROMPT_CONFIRM: Duration = Duration::from_millis(200);

/// [`PROMPT_CONFIRM`], or `PGOUTBOX_PROMPT_CONFIRM_MS` (benchmarks compare against confirming at the
/// status interval only, as before: a value of 0 turns prompt confirmation off).
fn prompt_confirm() -> Duration {
    match std::env::var("PGOUTBOX_PROMPT_CONFIRM_MS").ok().and_then(|v| v.parse::<u64>().ok()) {
        Some(0) => Duration::from_secs(3600 * 24),
        Some(ms) => Duration::from_millis(ms),
        None => PROMPT_CONFIRM,
    }
}

/// How long `finish` waits beyond the sink's drain timeout before giving up on it.
const FINISH_MARGIN: Duration = Duration::from_secs(5);

/// How long a stop that arrives inside a transaction reads on to its commit: half the drain timeout
/// (the other half is for the drain), at most 10 s. `PGOUTBOX_STOP_READ_ON_MS` sets it (tests: 0
/// stops inside the transaction, as a transaction too large to finish in time does).
fn read_on_limit(shutdown_timeout: Duration) -> Duration {
    crate::pipeline::millis_from_env("PGOUTBOX_STOP_READ_ON_MS", (shutdown_timeout / 2).min(Duration::from_secs(10)))
}

pub struct Reader<'a> {
    conn: ReplicationConnection,
    sql: Client,
    cfg: &'a Config,
    router: Router,
    /// Per relation: `None` when the table is not captured, else where its router columns are (and
    /// the table's name and column names, for dead-letter records).
    relations: HashMap<Oid, Option<(RoutePlan, String, Vec<String>)>>,
    in_transaction: bool,
    /// Whether the transaction being read has produced a record (for the latency breakdown).
    /// Events routed from the current transaction.
    transaction_events: u64,
    /// The changes counted in Debezium's event counters when the transaction began: Debezium
    /// counts a committed transaction only when it dispatched one of its changes.
    changes_at_begin: u64,
    /// The commit LSN of the transaction being read (Begin's final LSN), for the optional header.
    commit_lsn: Option<std::sync::Arc<str>>,
    /// Highest WAL position received, reported as the write position.
    received: Lsn,
    batch: Vec<Item>,
    /// Bytes of the records in `batch`.
    batch_bytes: usize,
    /// When the batch being filled got its first item, and the events in it (the source-task batch
    /// metrics).
    batch_began: Option<Instant>,
    batch_events: u64,
    /// The server asked for a reply and got the position confirmed then; the next confirmed
    /// position goes out at once too, so a server waiting for it (a fast shutdown, a switchover waits
    /// for its walsenders to be confirmed) does not wait for the status timer.
    reply_owed: bool,
    /// The confirmed position moved since the last status update: the next goes out within
    /// [`PROMPT_CONFIRM`].
    confirm_due: bool,
    /// The sink dropped its side of the confirmed position (it stopped).
    sink_gone: bool,
    /// The transaction being read: its id, whether a committed offset already holds all of it, and
    /// its last change (LSN, and how many changes share that LSN so far).
    xid: u32,
    skip_transaction: bool,
    change: (Lsn, u64),
    /// What a committed Kafka transaction (or Debezium's offset) already published.
    resume: Option<Resume>,
    /// Stops the sink taking work. Cancelled when the reader stops reading, except after a stop
    /// that read on to a transaction's commit: the sink then takes the rest of the transaction
    /// from the channel and stops when the channel closes.
    sink_stop: CancellationToken,
    /// Exactly once: each event is followed by its position, so the sink can end a Kafka transaction
    /// inside a large PostgreSQL transaction.
    positions: bool,
    /// `None` once the reader has stopped handing over work (the sink then drains).
    tx: Option<mpsc::Sender<Vec<Item>>>,
    confirmed: watch::Receiver<Lsn>,
    /// `lsn.flush.mode=manual`: the flush position every status update reports, the slot's own at
    /// the start, so that the server never moves the slot (the operator does).
    pinned_flush: Option<Lsn>,
    /// Silence from the server longer than this (while we read) means the connection is dead: the
    /// server's wal_sender_timeout plus a status interval, `None` when the server has no timeout.
    peer_timeout: Option<Duration>,
    /// The stop the reader runs until (set by `run`): it ends a status update the server does not take.
    stop: CancellationToken,
    metrics: std::sync::Arc<crate::metrics::Metrics>,
}

/// The database side of a session: the replication stream, the SQL session beside it, and how long
/// the server may stay silent before the connection counts as dead.
pub struct Source {
    pub conn: ReplicationConnection,
    pub sql: Client,
    /// The server's wal_sender_timeout plus a status interval, `None` when the server has no timeout.
    pub peer_timeout: Option<Duration>,
}

/// The reader's two channels with the sink: batches out, the confirmed position back.
pub struct Handoff {
    pub tx: mpsc::Sender<Vec<Item>>,
    pub confirmed: watch::Receiver<Lsn>,
}

/// The stream loop's timers; none fires at once except the status timer.
struct Timers {
    status: tokio::time::Interval,
    prompt: tokio::time::Interval,
    heartbeat_tick: tokio::time::Interval,
    coverage: tokio::time::Interval,
    session_watch: tokio::time::Interval,
}

impl Timers {
    fn new(cfg: &Config) -> Timers {
        let every = |period: Duration, now: bool| {
            let mut t = tokio::time::interval(period);
            t.set_missed_tick_behavior(MissedTickBehavior::Delay);
            if !now {
                t.reset();
            }
            t
        };
        Timers {
            status: every(cfg.status_interval, true),
            prompt: every(prompt_confirm(), true),
            heartbeat_tick: every(cfg.heartbeat.as_ref().map_or(Duration::from_secs(3600), |h| h.interval), false),
            coverage: every(PUBLICATION_CHECK, false),
            session_watch: every(SQL_SESSION_WATCH, true),
        }
    }
}

impl<'a> Reader<'a> {
    pub fn new(
        source: Source,
        cfg: &'a Config,
        router: Router,
        handoff: Handoff,
        metrics: std::sync::Arc<crate::metrics::Metrics>,
    ) -> Self {
        let Source { conn, sql, peer_timeout } = source;
        let Handoff { tx, confirmed } = handoff;
        let received = *confirmed.borrow();
        Reader {
            conn,
            sql,
            cfg,
            router,
            relations: HashMap::new(),
            in_transaction: false,
            transaction_events: 0,
            changes_at_begin: 0,
            commit_lsn: None,
            received,
            batch: Vec::with_capacity(BATCH_MAX),
            batch_bytes: 0,
            batch_began: None,
            batch_events: 0,
            reply_owed: false,
            confirm_due: false,
            sink_gone: false,
            xid: 0,
            skip_transaction: false,
            change: (Lsn::ZERO, 0),
            resume: None,
            sink_stop: CancellationToken::new(),
            positions: cfg.exactly_once.is_some(),
            tx: Some(tx),
            confirmed,
            pinned_flush: cfg.lsn_flush_manual.then_some(received),
            peer_timeout,
            stop: CancellationToken::new(),
            metrics,
        }
    }

    /// The token the sink stops on (the session's, for this reader to cancel).
    pub fn stopping_sink(mut self, sink_stop: CancellationToken) -> Self {
        self.sink_stop = sink_stop;
        self
    }

    /// Skips what `resume` says is published already.
    pub fn resuming(mut self, resume: Option<Resume>) -> Self {
        self.resume = resume;
        self
    }

    pub async fn run(mut self, shutdown: &CancellationToken) -> Result<(), RelayError> {
        self.stop = shutdown.clone();
        let result = self.stream(shutdown).await;
        match result {
            Ok(()) => self.finish().await,
            // A stop: nothing more can go out on this connection, and nothing more need.
            Err(RelayError::Postgres(PgError::StoppedWhileFlushing)) => {
                tracing::warn!(
                    "stopped while PostgreSQL took no status update: the slot stays where the last update the server took put it; what was published since is published again at the next start"
                );
                self.sink_stop.cancel();
                Ok(())
            }
            // The connection is gone, or the server stopped reading it: nothing more can be
            // confirmed on it.
            Err(e @ RelayError::Postgres(_)) if e.is_retryable() => Err(e),
            Err(e @ RelayError::Postgres(PgError::FlushTimeout { .. })) => Err(e),
            // A definite error found here (bad row, bad bytes, a fatal UPDATE): the events read before
            // it are still published (as Debezium publishes the records before the one that fails its
            // task), then the sink drains and the position is confirmed, which stays before the
            // offending transaction because its commit never reaches the checkpoint.
            Err(e) => {
                let before = std::mem::take(&mut self.batch);
                if let (false, Some(tx)) = (before.is_empty(), &self.tx) {
                    let _ = tx.send(before).await;
                }
                let _ = self.finish().await;
                Err(e)
            }
        }
    }

    /// Streams until stop is requested or the sink goes away.
    async fn stream(&mut self, shutdown: &CancellationToken) -> Result<(), RelayError> {
        let Timers { mut status, mut prompt, mut heartbeat_tick, mut coverage, mut session_watch } =
            Timers::new(self.cfg);
        let mut last_heard = Instant::now();
        // Heartbeats (heartbeat.interval.ms); their timer never fires when they are off.
        let heartbeat = self.cfg.heartbeat.clone();
        let heartbeat_topic: std::sync::Arc<str> =
            std::sync::Arc::from(heartbeat.as_ref().map_or("", |h| h.topic.as_str()));
        // A handle of our own, so a reserved permit does not borrow `self` across the select.
        let Some(tx) = self.tx.clone() else { return Ok(()) };
        // Set once a stop arrived inside a transaction: reading goes on to its commit until then.
        let mut read_on: Option<tokio::time::Instant> = None;
        loop {
            self.handle_buffered().await?;
            let pending = !self.batch.is_empty();
            if let (Some(deadline), false) = (read_on, self.in_transaction) {
                // The transaction the stop fell into is read whole: hand it over (while the sink
                // takes it in time) and stop.
                if pending {
                    let batch = std::mem::take(&mut self.batch);
                    self.metrics.record_batch(std::mem::take(&mut self.batch_events), Duration::ZERO);
                    if tokio::time::timeout_at(deadline, tx.send(batch)).await.is_err() {
                        tracing::warn!("stop: the sink took no more work in time; the transaction in progress will be read again from its start after the restart");
                        self.sink_stop.cancel();
                        return Ok(());
                    }
                }
                tracing::info!("stop: the transaction in progress was read to its commit");
                return Ok(());
            }
            if pending && self.batch_began.is_none() {
                self.batch_began = Some(Instant::now());
            }
            tokio::select! {
                biased;
                // 1. Stop requested. Between transactions: stop reading; what is not handed over is
                //    simply not confirmed. Inside one (its rows are committed and arriving), read on
                //    to its commit for a bounded time, so that the part of it already published is
                //    not published again after the restart.
                _ = shutdown.cancelled(), if read_on.is_none() => {
                    if !self.in_transaction {
                        self.sink_stop.cancel();
                        return Ok(());
                    }
                    let limit = read_on_limit(self.cfg.shutdown_timeout);
                    tracing::info!(?limit, "stop requested inside a transaction: reading on to its commit");
                    read_on = Some(tokio::time::Instant::now() + limit);
                }
                _ = tokio::time::sleep_until(read_on.unwrap_or_else(tokio::time::Instant::now)), if read_on.is_some() => {
                    tracing::warn!("stop: the transaction in progress did not reach its commit in time; it will be read again from its start after the restart");
                    self.sink_stop.cancel();
                    return Ok(());
                }
                // 2. The sink stopped (it failed): nothing more can be published.
                _ = tx.closed() => return Ok(()),
                // 3. Status timer, even while backpressured, so the server never times us out. Each
                //    update asks for a reply, which proves the server is alive while we read.
                _ = status.tick() => self.on_status_tick(pending, last_heard).await?,
                // 3b. The server ended our SQL session: it is shutting down (a fast shutdown ends
                //     every session, then waits for each walsender's client to confirm all it was
                //     sent, which it cannot while Kafka is down), or someone ended it, and the slot
                //     lock went with it. Either way the stream must end now; nothing unacknowledged
                //     was confirmed, so the next session resumes before it.
                _ = session_watch.tick() => self.check_session()?,
                // 4. Heartbeat: between transactions only, so it never splits one.
                _ = heartbeat_tick.tick(), if heartbeat.is_some() && !self.in_transaction && !pending => {
                    if let Some(h) = &heartbeat {
                        self.heartbeat(h, &heartbeat_topic).await;
                    }
                }
                // 5. The confirmed position moved: at once when a reply is owed, else within
                //    PROMPT_CONFIRM (what is confirmed is not published again after a crash).
                changed = self.confirmed.changed(), if !self.confirm_due && !self.sink_gone => match changed {
                    Ok(()) if std::mem::take(&mut self.reply_owed) => self.send_status(false).await?,
                    Ok(()) => self.confirm_due = true,
                    Err(_) => self.sink_gone = true,
                },
                _ = prompt.tick(), if self.confirm_due => {
                    self.confirm_due = false;
                    self.send_status(false).await?;
                }
                // 6. The publication still covers the captured tables (between transactions, so a
                //    stop leaves the position at a transaction's end).
                _ = coverage.tick(), if !self.in_transaction && !pending => self.check_coverage().await?,
                // 7. Hand the batch over once the sink has room.
                permit = tx.reserve(), if pending => {
                    let Ok(permit) = permit else { return Ok(()) };
                    self.batch_bytes = 0;
                    let took = self.batch_began.take().map_or(Duration::ZERO, |t| t.elapsed());
                    self.metrics.record_batch(std::mem::take(&mut self.batch_events), took);
                    permit.send(std::mem::replace(&mut self.batch, Vec::with_capacity(BATCH_MAX)));
                    // Time spent backpressured is not silence from the server.
                    last_heard = Instant::now();
                }
                // 8. Read from the server when there is nothing to hand over.
                r = self.conn.fill(), if !pending => {
                    r?;
                    last_heard = Instant::now();
                }
            }
        }
    }

    fn check_session(&self) -> Result<(), RelayError> {
        match self.sql.is_closed() {
            true => Err(PgError::SqlSessionEnded.into()),
            false => Ok(()),
        }
    }

    /// Handles the messages already read, up to a full batch.
    async fn handle_buffered(&mut self) -> Result<(), RelayError> {
        while self.batch.len() < BATCH_MAX && self.batch_bytes < BATCH_MAX_BYTES {
            match self.conn.try_message()? {
                Some(m) => self.handle(m).await?,
                None => break,
            }
        }
        Ok(())
    }

    /// The status timer: a server silent past its timeout (while nothing waits to be handed over)
    /// is gone; otherwise an update that asks for a reply.
    async fn on_status_tick(&mut self, pending: bool, last_heard: Instant) -> Result<(), RelayError> {
        if let Some(limit) = self.peer_timeout {
            if !pending && last_heard.elapsed() > limit {
                return Err(PgError::PeerTimeout(last_heard.elapsed()).into());
            }
        }
        self.metrics.received_lsn.store(self.received.0, std::sync::atomic::Ordering::Relaxed);
        Ok(self.send_status(true).await?)
    }

    /// The publication still covers the captured tables; a check the server does not answer in
    /// time counts as a dead connection.
    async fn check_coverage(&self) -> Result<(), RelayError> {
        match tokio::time::timeout(PUBLICATION_CHECK_TIMEOUT, setup::repair_coverage(&self.sql, self.cfg, true)).await {
            Ok(result) => Ok(result?),
            Err(_) => Err(PgError::PeerTimeout(PUBLICATION_CHECK_TIMEOUT).into()),
        }
    }

    /// After streaming: let the sink drain, then confirm its final position and close.
    async fn finish(mut self) -> Result<(), RelayError> {
        self.tx = None;
        let mut status = tokio::time::interval(self.cfg.status_interval);
        status.tick().await;
        // Bounded: the sink gives up on acknowledgements after its drain timeout. So are the status
        // updates meanwhile: one the server does not take (lsn.flush.timeout.action=warn) does not
        // hold the stop past it.
        let until = tokio::time::Instant::now() + self.cfg.shutdown_timeout + FINISH_MARGIN;
        let deadline = tokio::time::sleep_until(until);
        tokio::pin!(deadline);
        // Set once an update was not taken in time: none is tried again, and the drain is waited
        // for on its own.
        let mut stalled = false;
        loop {
            tokio::select! {
                // Every move goes out at once: the server may be waiting for it to shut down.
                changed = self.confirmed.changed() => match changed {
                    Ok(()) if !stalled => stalled = !self.final_status_taken(until).await,
                    Ok(()) => {}
                    Err(_) => break,
                },
                _ = status.tick(), if !stalled => stalled = !self.final_status_taken(until).await,
                _ = &mut deadline => {
                    tracing::warn!("the sink did not finish in time; confirming what it acknowledged so far");
                    self.sink_stop.cancel();
                    break;
                }
            }
        }
        let confirmed = *self.confirmed.borrow();
        let result = match stalled {
            true => Err(PgError::StoppedWhileFlushing),
            false => match tokio::time::timeout(FINISH_MARGIN, self.send_status(false)).await {
                Ok(sent) => sent,
                Err(_) => Err(PgError::StoppedWhileFlushing),
            },
        };
        if let Err(e) = &result {
            if e.is_unwritten_status() {
                tracing::warn!(
                    confirmed = %confirmed,
                    "PostgreSQL took no final status update: the slot stays where the last update it took put it; what was published since is published again at the next start"
                );
                self.conn.terminate().await;
                return Ok(());
            }
        }
        self.conn.end_copy(Duration::from_secs(5)).await;
        match self.pinned_flush {
            None => tracing::info!(confirmed = %confirmed, "confirmed final position"),
            Some(slot) => {
                tracing::info!(acknowledged = %confirmed, slot = %slot, "final position acknowledged, recorded in the offsets topic; the slot is left where it was (lsn.flush.mode=manual)")
            }
        }
        self.conn.terminate().await;
        result.map_err(Into::into)
    }

    /// Runs `heartbeat.action.query` (bounded; a failure is logged, as Debezium does) and queues a
    /// heartbeat record.
    async fn heartbeat(&mut self, h: &crate::config::Heartbeat, topic: &std::sync::Arc<str>) {
        if let Some(q) = &h.action_query {
            match tokio::time::timeout(Duration::from_secs(10), self.sql.batch_execute(q)).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::warn!(error = %PgError::Sql(e), "heartbeat.action.query failed"),
                Err(_) => tracing::warn!("heartbeat.action.query did not finish within 10s"),
            }
        }
        match crate::outbox::heartbeat::record(
            topic,
            &self.cfg.topic_prefix,
            &self.cfg.key_converter,
            &self.cfg.value_converter,
            now_ms(),
        ) {
            Ok(record) => self.push_event(record),
            // No event waits on a heartbeat: skipped, and the next one tries again.
            Err(e) => tracing::warn!(error = %e, "heartbeat skipped"),
        }
        if self.positions {
            self.batch.push(Item::Progress(None));
        }
    }

    fn push_event(&mut self, record: crate::outbox::OutboxRecord) {
        self.batch_bytes += record.size();
        self.batch_events += 1;
        self.batch.push(Item::Event(record));
    }

    /// A status update while finishing, bounded by `until`: whether the server took it (a
    /// connection error counts as taken: the final update reports it).
    async fn final_status_taken(&mut self, until: tokio::time::Instant) -> bool {
        match tokio::time::timeout_at(until, self.send_status(false)).await {
            Ok(Err(e)) => !e.is_unwritten_status(),
            Ok(Ok(())) => true,
            Err(_) => false,
        }
    }

    /// Sends a status update, bounded as Debezium bounds its LSN flush: an update the server has
    /// not taken within `lsn.flush.timeout.ms` (it stopped reading the connection) stops the relay
    /// under `lsn.flush.timeout.action=fail`; under `warn` and `ignore` the relay goes on waiting
    /// for it (a half-written message cannot be taken back), until the server has been silent past
    /// its own timeout, which ends the session as a dead connection.
    async fn send_status(&mut self, reply: bool) -> Result<(), PgError> {
        use crate::config::FlushTimeoutAction as Action;
        let confirmed = *self.confirmed.borrow();
        let flush = self.pinned_flush.unwrap_or(confirmed);
        let (limit, action, peer_timeout) =
            (self.cfg.lsn_flush_timeout, self.cfg.lsn_flush_timeout_action, self.peer_timeout);
        let started = Instant::now();
        let stop = self.stop.clone();
        let dead_at = tokio::time::Instant::from_std(started) + peer_timeout.unwrap_or_default();
        let send = self.conn.send_status(self.received.max(confirmed), flush, reply);
        tokio::pin!(send);
        loop {
            tokio::select! {
                biased;
                sent = &mut send => return sent,
                // A stop is not held by an update the server does not take (one it takes is written
                // at once, above).
                _ = stop.cancelled() => return Err(PgError::StoppedWhileFlushing),
                // A server that took nothing for its own timeout is gone, whatever the action.
                _ = tokio::time::sleep_until(dead_at), if peer_timeout.is_some() => {
                    return Err(PgError::PeerTimeout(started.elapsed()));
                }
                _ = tokio::time::sleep(limit) => {}
            }
            let waited = started.elapsed();
            match action {
                Action::Fail => return Err(PgError::FlushTimeout { lsn: flush, after: limit }),
                Action::Warn => tracing::warn!(
                    lsn = %flush,
                    waited_ms = waited.as_millis() as u64,
                    "the status update confirming this position is not written yet: the server is not reading the replication connection; \
                     waiting on, as lsn.flush.timeout.action=warn says"
                ),
                Action::Ignore => {
                    tracing::debug!(lsn = %flush, waited_ms = waited.as_millis() as u64, "status update not written yet")
                }
            }
        }
    }

    async fn handle(&mut self, msg: ReplicationMessage) -> Result<(), RelayError> {
        match msg {
            ReplicationMessage::XLogData { wal_start, data, .. } => {
                self.received = self.received.max(wal_start);
                let decoded = pgoutput::decode(data).map_err(|source| RelayError::Decode { lsn: wal_start, source })?;
                self.logical(decoded, wal_start).await
            }
            ReplicationMessage::PrimaryKeepalive { wal_end, reply_requested, .. } => {
                self.received = self.received.max(wal_end);
                if !self.in_transaction {
                    self.batch.push(Item::IdleWalEnd(wal_end));
                }
                if reply_requested {
                    self.send_status(false).await?;
                    self.reply_owed = true;
                }
                Ok(())
            }
        }
    }

    async fn logical(&mut self, msg: LogicalMessage, lsn: Lsn) -> Result<(), RelayError> {
        if matches!(msg, LogicalMessage::Insert(_) | LogicalMessage::Update(_) | LogicalMessage::Delete(_))
            && self.published_already(lsn)
        {
            return Ok(());
        }
        match msg {
            LogicalMessage::Begin(b) => {
                self.in_transaction = true;
                self.xid = b.xid;
                self.change = (Lsn::ZERO, 0);
                self.skip_transaction = self.resume.is_some_and(|r| r.skips_transaction(b.final_lsn));
                self.changes_at_begin = self.changes_counted();
                if self.cfg.commit_lsn_header.is_some() {
                    self.commit_lsn = Some(std::sync::Arc::from(b.final_lsn.to_string()));
                }
            }
            LogicalMessage::Commit(c) => {
                self.in_transaction = false;
                if self.changes_counted() > self.changes_at_begin {
                    self.metrics.transactions_seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                let events = std::mem::take(&mut self.transaction_events);
                if events > 0 {
                    let now = crate::postgres::wire::pg_epoch_micros(SystemTime::now());
                    let behind_us = now.saturating_sub(c.commit_time).max(0) as u64;
                    self.metrics.record_received_us(behind_us);
                    self.metrics.record_behind_source(behind_us / 1000, events);
                }
                self.received = self.received.max(c.end_lsn);
                self.batch.push(Item::Commit { end_lsn: c.end_lsn, commit_time: c.commit_time });
            }
            LogicalMessage::Relation(r) => {
                let plan = match self.captured_as(&r).await? {
                    Some((schema, table)) => {
                        let catalog = setup::column_catalog(&self.sql, r.oid).await?;
                        let info = RelationInfo {
                            oid: r.oid,
                            columns: r
                                .columns
                                .iter()
                                .map(|c| {
                                    let (not_null, default) = catalog.get(&c.name).cloned().unwrap_or_default();
                                    ColumnInfo {
                                        name: c.name.clone(),
                                        type_oid: c.type_oid,
                                        type_modifier: c.type_modifier,
                                        not_null,
                                        default,
                                    }
                                })
                                .collect(),
                            schema,
                            table,
                        };
                        let names = info.columns.iter().map(|c| c.name.clone()).collect();
                        Some((self.router.plan(&info), format!("{}.{}", info.schema, info.table), names))
                    }
                    None => None,
                };
                self.relations.insert(r.oid, plan);
            }
            LogicalMessage::Insert(i) => {
                let before = self.batch.len();
                self.on_insert(&i)?;
                if self.positions && self.batch.len() > before {
                    let (lsn, changes) = self.change;
                    self.batch.push(Item::Progress(Some(Partial { xid: self.xid, lsn, changes })));
                }
            }
            LogicalMessage::Update(u) => {
                if self.count_change(u.relation, Op::Update) {
                    self.cfg.router.op_invalid_behavior.on_update().map_err(RelayError::InvalidOperation)?;
                }
            }
            // DELETEs are dropped silently by the Event Router (the usual cleanup of published rows).
            LogicalMessage::Delete(d) => {
                self.count_change(d.relation, Op::Delete);
            }
            LogicalMessage::Truncate(_) => {}
            LogicalMessage::Message(m) => self.on_message(&m, lsn)?,
            LogicalMessage::Origin(_) | LogicalMessage::Type(_) => {}
        }
        Ok(())
    }
}

impl Reader<'_> {
    /// Counts the change at `lsn` (rows of one statement can share an LSN) and says whether a
    /// committed offset already holds it.
    fn published_already(&mut self, lsn: Lsn) -> bool {
        self.change = match self.change {
            (at, n) if at == lsn => (at, n + 1),
            _ => (lsn, 1),
        };
        self.skip_transaction || self.resume.is_some_and(|r| r.skips_change(self.xid, lsn, self.change.1))
    }

    /// The changes Debezium's event counters hold so far (skipped operations are not among them).
    fn changes_counted(&self) -> u64 {
        let m = &self.metrics;
        [&m.inserts_seen, &m.updates_seen, &m.deletes_seen, &m.messages_seen]
            .iter()
            .map(|c| crate::metrics::Metrics::get(c))
            .sum()
    }

    /// Counts a change (`op`) of relation `relation` as Debezium's event counters do, and says
    /// whether it is a captured table's change to go on with: a skipped operation
    /// (`skipped.operations`) is not counted at all, a change of a table the lists do not capture
    /// (a publication wider than them) is counted as seen and filtered.
    fn count_change(&self, relation: Oid, op: Op) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        let (m, skipped) = (&self.metrics, &self.cfg.skipped);
        // A DELETE is two records to Connect: its change event and its tombstone.
        let (seen, skipped, records) = match op {
            Op::Insert => (&m.inserts_seen, skipped.insert, 1),
            Op::Update => (&m.updates_seen, skipped.update, 1),
            Op::Delete => (&m.deletes_seen, skipped.delete, 2),
        };
        match self.relations.get(&relation) {
            Some(_) if skipped => false,
            Some(Some(_)) => {
                seen.fetch_add(1, Relaxed);
                m.records_polled.fetch_add(records, Relaxed);
                true
            }
            Some(None) => {
                seen.fetch_add(1, Relaxed);
                self.metrics.events_filtered.fetch_add(1, Relaxed);
                false
            }
            None => false,
        }
    }

    /// An INSERT into a captured table: its record, or under `errors.tolerance=all` its dead letter
    /// (or nothing).
    fn on_insert(&mut self, i: &pgoutput::Insert) -> Result<(), RelayError> {
        if !self.count_change(i.relation, Op::Insert) {
            return Ok(());
        }
        let Some(Some((plan, table, columns))) = self.relations.get(&i.relation) else { return Ok(()) };
        let now = now_ms();
        match self.router.route(plan, &i.new, now) {
            // A transform dropped it (Filter): the position passes it like any row without an event.
            // Not a filtered event to Debezium: in Connect transforms run after the connector.
            Ok(None) => {}
            Ok(Some(record)) => self.push_routed(record, now),
            Err(e) => {
                let letter = tolerate_route_error(self.cfg, table, columns, &i.new, e)?;
                self.metrics.route_errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                self.metrics.record_error(self.cfg.errors.log);
                if let Some(record) = letter {
                    self.metrics.dead_letters.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    self.push_event(record);
                }
            }
        }
        Ok(())
    }

    /// An event the router made, with the commit LSN header when asked for.
    fn push_routed(&mut self, mut record: crate::outbox::OutboxRecord, now: i64) {
        if let (Some(name), Some(lsn)) = (&self.cfg.commit_lsn_header, &self.commit_lsn) {
            record.headers.push(crate::outbox::Header {
                name: std::sync::Arc::from(name.as_str()),
                value: Some(bytes::Bytes::copy_from_slice(lsn.as_bytes())),
            });
        }
        self.transaction_events += 1;
        self.metrics.events_seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.metrics.last_event_ms.store(now as u64, std::sync::atomic::Ordering::Relaxed);
        self.push_event(record)
    }

    /// The captured table a relation's changes belong to: itself when the lists select it, else the
    /// captured partitioned table it is a partition of (without `publish_via_partition_root` the
    /// changes of a partitioned outbox arrive under each partition's name), else none.
    async fn captured_as(&self, r: &pgoutput::Relation) -> Result<Option<(String, String)>, RelayError> {
        if self.cfg.tables.matches(&r.namespace, &r.name) {
            return Ok(Some((r.namespace.clone(), r.name.clone())));
        }
        if let Some(ancestor) = setup::captured_ancestor(&self.sql, r.oid, self.cfg).await? {
            return Ok(Some(ancestor));
        }
        // Today's catalog says nothing; the catalog at the change may have: a partition detached
        // or dropped after its rows were written.
        let former = match setup::former_partition_owner(&self.sql, r.oid, self.cfg).await {
            Err(e) if self.cfg.errors.tolerate => {
                tracing::warn!(relation = %format!("{}.{}", r.namespace, r.name), "skipping its changes (errors.tolerance=all): {e}");
                None
            }
            other => other?,
        };
        if let Some((schema, table)) = &former {
            tracing::warn!(relation = %format!("{}.{}", r.namespace, r.name), outbox = %format!("{schema}.{table}"), "changes of a table that is no longer a partition of the outbox (detached or dropped after they were written) are published as the outbox's, as they were when written");
        }
        Ok(former)
    }
}

/// `errors.tolerance` for a row the Event Router cannot turn into a record: `Err` stops the relay (the
/// default, `none`); under `all` the row is skipped, and with a dead-letter topic its dead letter is
/// returned, to be published in its place (the position then passes the row only once the letter is
/// acknowledged). The stream and the snapshot both decide here.
pub(crate) fn tolerate_route_error(
    cfg: &Config,
    table: &str,
    columns: &[String],
    row: &pgoutput::TupleData,
    mut e: crate::outbox::RouteError,
) -> Result<Option<crate::outbox::OutboxRecord>, RelayError> {
    // The registry's answer (or silence) is no fault of the row: never skipped.
    if let Some(registry) = e.registry.take() {
        return Err(RelayError::Registry(*registry));
    }
    if !cfg.errors.tolerate {
        return Err(e.into());
    }
    tracing::warn!(error = %e, "skipping an event that cannot be published (errors.tolerance=all)");
    let Some(dlq) = cfg.errors.dead_letter_topic.as_deref().map(std::sync::Arc::<str>::from) else { return Ok(None) };
    let message = e.to_string();
    let failure = crate::outbox::dead_letter::Failure {
        stage: crate::outbox::dead_letter::Stage::Transformation,
        message: &message,
        connector: &cfg.connector_name,
        original_topic: None,
        event_id: None,
        table: Some(table),
    };
    Ok(Some(crate::outbox::dead_letter::record(&dlq, &failure, Some((columns, row)), now_ms())))
}

pub(crate) fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// A row change, for the counters ([`Reader::count_change`]).
#[derive(Clone, Copy)]
enum Op {
    Insert,
    Update,
    Delete,
}
