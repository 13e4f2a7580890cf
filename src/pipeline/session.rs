//! One replication session: set up, start streaming from the slot's confirmed position, run the reader
//! and the sink until stop or failure.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio_postgres::Client;
use tokio_util::sync::CancellationToken;

use super::checkpoint::{Position, Resume};
use super::reader::{Handoff, Reader, Source};
use super::{sink::Sink, snapshot};
use crate::config::{Config, SnapshotMode};
use crate::error::RelayError;
use crate::kafka::offsets::{OffsetStore, SourceOffset, Written};
use crate::kafka::Producer;
use crate::lsn::Lsn;
use crate::metrics::Metrics;
use crate::metrics::RelayState;
use crate::outbox::{ContextHeaders, Router};
use crate::postgres::replication::{ReplicationConnection, SystemIdentity};
use crate::postgres::{setup, slot, ConnectParams, PgError};

/// Batches the reader may run ahead of the sink. With batches of up to `reader::BATCH_MAX` events this
/// bounds what sits between the two stages.
const CHANNEL_BATCHES: usize = 8;

/// What carries over between sessions of one process.
#[derive(Default)]
pub struct SessionState {
    /// At least once: the producer, handed from each session to the next (see
    /// [`Producer::new_session`]) and replaced only when it failed for good.
    pub producer: KeptProducer,
    /// Whether a session has streamed from the slot: if the slot disappears after that, it was dropped
    /// under us, and silently recreating it could skip events.
    pub streamed: bool,
    /// The server process of the previous session's SQL connection: after a network stall it may
    /// still be alive on the server, holding the slot lock for a client that is gone.
    pub previous_sql_pid: Option<i32>,
    /// Whether this process has taken its snapshot: `snapshot.mode=always` snapshots once per start
    /// of the process, not again on every reconnect.
    pub snapshot_taken: bool,
    /// Whether the pruner (`pgoutbox.prune.*`) runs: it starts once the first session streams: before that a
    /// snapshot may still need the rows.
    pub pruning: bool,
    /// How far this process's sessions confirmed, and on which server: the next session starts
    /// there when the server forgot it (see [`remembered_start`]).
    pub reached: Option<Reached>,
    /// Exactly once: since when sessions have found the offsets topic missing (see [`offsets_kept`]).
    pub offsets_missing_since: Option<std::time::Instant>,
}

/// A position every event before which Kafka acknowledged (committed, under exactly once), on the
/// WAL history of `system_id` at `timeline`, through slot `slot`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reached {
    /// When the session that reached it ended: a memory older than [`REMEMBERED_FOR`] is not used.
    pub at: std::time::Instant,
    pub slot: String,
    pub system_id: String,
    pub timeline: u32,
    pub lsn: Lsn,
}

/// The at-least-once producer the sessions of one relay share: created when a session first needs
/// one, so a standby builds none.
///
/// It is kept only while this relay is the slot's one writer, or soon back: a relay that stands by
/// (another process holds the slot) closes it at once, and one whose sessions have not streamed for
/// [`KEEP_IDLE`] (PostgreSQL away, perhaps the slot taken over from another host) closes it then. A
/// kept producer still delivers what its last session left queued, which the slot's next holder
/// sends again; closing it bounds how late those copies can land after the new holder's records.
#[derive(Default)]
pub struct KeptProducer(std::sync::Mutex<Kept>);

#[derive(Default)]
struct Kept {
    producer: Option<Arc<Producer>>,
    /// When the last session that used it ended (`None` while one runs).
    idle_since: Option<std::time::Instant>,
}

/// The producer's `client.id`, as Connect names a source task's: `connector-producer-<name>-0`.
fn producer_client_id(cfg: &Config) -> String {
    format!("connector-producer-{}-0", cfg.connector_name)
}

/// How long a producer is kept for the next session once no session uses it.
pub const KEEP_IDLE: Duration = Duration::from_secs(30);

impl KeptProducer {
    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The kept producer, or a new one if there is none or it failed for good; either way started on
    /// a new session.
    pub(super) fn for_session(&self, cfg: &Config) -> Result<Arc<Producer>, RelayError> {
        let mut kept = self.lock();
        kept.idle_since = None;
        let producer = match kept.producer.as_ref() {
            Some(p) if !p.is_fatal() => p.clone(),
            _ => {
                // A fatal producer delivers nothing more (librdkafka failed what it held); its drop
                // can block, so it happens off the runtime's threads.
                if let Some(old) = kept.producer.take() {
                    tokio::task::spawn_blocking(move || drop(old));
                }
                let p =
                    Arc::new(Producer::new(&cfg.kafka, &producer_client_id(cfg)).map_err(crate::kafka::Error::Create)?);
                kept.producer = Some(p.clone());
                p
            }
        };
        producer.new_session();
        Ok(producer)
    }

    /// A session ended (its sink has stopped): the producer waits for the next one.
    pub(super) fn session_ended(&self) {
        let mut kept = self.lock();
        if kept.producer.is_some() {
            kept.idle_since.get_or_insert_with(std::time::Instant::now);
        }
    }

    /// Closes the producer if no session has used it for [`KEEP_IDLE`].
    pub async fn expire(&self) {
        let idle = self.lock().idle_since.is_some_and(|at| at.elapsed() >= KEEP_IDLE);
        if idle {
            tracing::info!(
                "no session streamed for {} s: closing the Kafka producer (a new one is made when one streams again)",
                KEEP_IDLE.as_secs()
            );
            self.close().await;
        }
    }

    /// Ends the kept producer, waiting for it: what it still holds is purged, and its connections
    /// are closed before the caller goes on. A sink task that was cut short may still hold a
    /// reference for a moment: the close waits for it (bounded), so that it is the last.
    pub async fn close(&self) {
        let taken = {
            let mut kept = self.lock();
            kept.idle_since = None;
            kept.producer.take()
        };
        let Some(mut p) = taken else { return };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        let last = loop {
            match Arc::try_unwrap(p) {
                Ok(last) => break Some(last),
                Err(shared) if tokio::time::Instant::now() < deadline => {
                    p = shared;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(_) => {
                    tracing::debug!("the Kafka producer is still shared; its last holder ends it");
                    break None;
                }
            }
        };
        if let Some(last) = last {
            let _ = tokio::task::spawn_blocking(move || drop(last)).await;
        }
    }
}

/// Everything a session needs once the server streams.
struct Started {
    conn: ReplicationConnection,
    sql: Client,
    start: Lsn,
    peer_timeout: Option<Duration>,
    /// What the newest committed offset says is published beyond the slot's position.
    resume: Option<Resume>,
    /// Exactly once: the transactional producer, its transactions initialised (which fenced any
    /// older instance) before the committed offset was read.
    producer: Option<Arc<Producer>>,
    /// The server's system and timeline, for [`SessionState::reached`].
    identity: SystemIdentity,
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
    Router::new(
        cfg.router.clone(),
        crate::outbox::Converters { key: cfg.key_converter.clone(), value: cfg.value_converter.clone() },
        context,
    )
}

pub async fn run(
    cfg: &Config,
    shutdown: &CancellationToken,
    state: &mut SessionState,
    metrics: &Arc<Metrics>,
) -> Result<(), RelayError> {
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
    // Only now, with the slot ours: a standby builds no producer.
    let producer = match started.producer {
        Some(p) => p,
        None => state.producer.for_session(cfg)?,
    };
    state.streamed = true;
    if !state.pruning {
        super::prune::start(cfg, metrics.clone(), shutdown.child_token()).await?;
        state.pruning = true;
    }
    metrics.sessions.fetch_add(1, Ordering::Relaxed);
    metrics.set_state(RelayState::Streaming);
    tracing::info!(slot = %cfg.slot_name, publication = %cfg.publication_name, from = %started.start, exactly_once = cfg.exactly_once.is_some(), "streaming");
    if let Some(Resume(p)) = started.resume {
        tracing::info!(after = %p.commit, inside = ?p.partial, "resuming after the committed offset: what it holds is not published again");
    }

    let (tx, rx) = mpsc::channel(CHANNEL_BATCHES);
    let queue = tx.downgrade();
    metrics.set_queue(move || queue.upgrade().map(|q| (q.max_capacity(), q.capacity())));
    let (confirmed_tx, confirmed_rx) = watch::channel(started.start);
    let confirmed_seen = confirmed_rx.clone();
    let identity = started.identity.clone();
    let mut sink = Sink::new(producer, started.start, confirmed_tx, cfg.kafka.clone(), metrics.clone())
        .with_tolerance(cfg.errors.clone(), &cfg.connector_name)
        .with_backlog(cfg.stall_threshold);
    let offsets = OffsetStore::for_connector(cfg);
    // At least once the offsets topic holds the slot's confirmed position, recorded as it moves;
    // under exactly once every Kafka transaction carries it instead.
    let recorder_stop = CancellationToken::new();
    let recorder = cfg.exactly_once.is_none().then(|| {
        let recorded = started.resume.map_or(started.start, |Resume(p)| p.commit.max(started.start));
        let recorder = OffsetRecorder {
            offsets: offsets.clone(),
            slot: cfg.slot_name.clone(),
            recorded,
            manual: cfg.lsn_flush_manual,
            metrics: metrics.clone(),
        };
        tokio::spawn(recorder.run(confirmed_seen.clone(), cfg.offset_flush_interval, recorder_stop.clone()))
    });
    if let Some(eos) = &cfg.exactly_once {
        sink = sink.transactional(super::sink::ExactlyOnce {
            config: eos,
            offsets: &offsets,
            slot: &cfg.slot_name,
            resume: started.resume,
            manual: cfg.lsn_flush_manual,
        });
    }
    // The sink stops taking work when the reader says so (a stop inside a transaction reads on to
    // its commit first), or with the process when the reader is not streaming yet.
    let sink_stop = CancellationToken::new();
    let sink = tokio::spawn(sink.run(rx, sink_stop.clone(), cfg.shutdown_timeout));
    let watch_stop = CancellationToken::new();
    let partition_watch = tokio::spawn(super::partitions::watch(
        cfg.kafka.clone(),
        metrics.clone(),
        watch_stop.clone(),
        partition_watch_interval(),
    ));
    let source = Source { conn: started.conn, sql: started.sql, peer_timeout: started.peer_timeout };
    let handoff = Handoff { tx, confirmed: confirmed_rx };
    let reader = Reader::new(source, cfg, router(cfg, context), handoff, metrics.clone())
        .resuming(started.resume)
        .stopping_sink(sink_stop.clone());
    let reader_result = reader.run(shutdown).await;
    sink_stop.cancel();
    let sink_result = match sink.await {
        Ok(r) => r,
        Err(e) => Err(RelayError::TaskStopped(format!("the sink task failed: {e}"))),
    };
    recorder_stop.cancel();
    if let Some(task) = recorder {
        if let Ok(mut recorder) = task.await {
            // The session's last confirmed position, for whoever starts next (Debezium after a
            // rollback checks its offset against the slot). Bounded: a broker that is away costs a
            // stop this much at most, and the next session writes it anyway.
            let last = *confirmed_seen.borrow();
            let _ = tokio::time::timeout(FINAL_OFFSET_WITHIN, recorder.record(last)).await;
        }
    }
    state.producer.session_ended();
    state.reached = Some(Reached {
        at: std::time::Instant::now(),
        slot: cfg.slot_name.clone(),
        system_id: identity.system_id,
        timeline: identity.timeline,
        lsn: *confirmed_seen.borrow(),
    });
    watch_stop.cancel();
    let _ = partition_watch.await;
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

/// How long the end of a session waits to record its last confirmed position.
const FINAL_OFFSET_WITHIN: Duration = Duration::from_secs(2);

/// At least once: records the slot's confirmed position in the offsets topic every
/// `offset.flush.interval.ms` while it moves, and at the end of the session.
///
/// Without it the topic held only the position the session started from. Debezium, rolled back to
/// on the same slot, resumes from its offset (and pgoutbox's record is its offset) and first checks
/// that the slot's `restart_lsn` is not past it: once the slot had moved on, it refused to start
/// ("... this is no longer available on the server"). A position recorded here is always one the
/// slot was confirmed to (every event before it acknowledged), never past the broker.
struct OffsetRecorder {
    offsets: OffsetStore,
    slot: String,
    /// The position the topic holds for this slot: the session's start, or a committed offset
    /// beyond it (Debezium's, on a migration), which must not be taken back.
    recorded: Lsn,
    /// `lsn.flush.mode=manual`: the slot is not confirmed, so what is recorded is the acknowledged
    /// position itself, a record the next start resumes after (not a copy of the slot's, which the
    /// next start reads past).
    manual: bool,
    metrics: Arc<Metrics>,
}

impl OffsetRecorder {
    async fn run(mut self, confirmed: watch::Receiver<Lsn>, every: Duration, stop: CancellationToken) -> Self {
        let mut tick = tokio::time::interval(every.max(Duration::from_secs(1)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tokio::select! {
                _ = stop.cancelled() => return self,
                _ = tick.tick() => {}
            }
            let at = *confirmed.borrow();
            // A write the stop overtakes is dropped: the end of the session writes again.
            tokio::select! {
                _ = stop.cancelled() => return self,
                _ = self.record(at) => {}
            }
        }
    }

    /// Records `at` when it is past what the topic holds; a failure is logged and left to the
    /// next write (the slot, not this record, is the position).
    async fn record(&mut self, at: Lsn) {
        if at <= self.recorded {
            return;
        }
        let started = std::time::Instant::now();
        let offset =
            if self.manual { SourceOffset::manual(&self.slot, at) } else { SourceOffset::slot_copy(&self.slot, at) };
        match self.offsets.store(&offset).await {
            Ok(()) => {
                self.recorded = at;
                self.metrics.record_offset_commit(started.elapsed());
            }
            Err(e) => tracing::warn!(
                topic = %self.offsets.topic(),
                position = %at,
                "could not record the confirmed position in the offsets topic; the next attempt records it: {e}"
            ),
        }
    }
}

/// `PGOUTBOX_PARTITION_WATCH_MS` shortens the watch's interval (tests).
fn partition_watch_interval() -> Duration {
    super::millis_from_env("PGOUTBOX_PARTITION_WATCH_MS", super::partitions::EVERY)
}

/// What every step of starting a session shares.
struct Ctx<'a> {
    cfg: &'a Config,
    producer: &'a KeptProducer,
    params: ConnectParams,
    context: &'a Option<ContextHeaders>,
    shutdown: &'a CancellationToken,
    metrics: &'a Arc<Metrics>,
}

/// Sets up and starts streaming; `None` when `snapshot.mode=initial_only` ends the run after the
/// snapshot.
///
/// The order matters. First the per-slot lock, so a standby stops there having cost one SQL
/// connection (no producer, no DDL, nothing logged on the server). Then the slot's state, before any
/// snapshot, so an instance that cannot have the slot never publishes. Then the checks and the
/// publication, and, only when the slot is missing, the durable record of whether this connector
/// streamed from it before.
async fn start(
    cfg: &Config,
    state: &mut SessionState,
    context: &Option<ContextHeaders>,
    shutdown: &CancellationToken,
    metrics: &Arc<Metrics>,
) -> Result<Option<Started>, RelayError> {
    let ctx = Ctx {
        cfg,
        producer: &state.producer,
        params: ConnectParams::from_config(&cfg.database),
        context,
        shutdown,
        metrics,
    };
    let sql = setup::connect_sql(&ctx.params).await?;
    state.previous_sql_pid = Some(slot::take_lock(&sql, &cfg.slot_name, state.previous_sql_pid).await?);
    let slot::Inspection { existing, on_standby } = slot::inspect(&sql, cfg).await?;
    setup::check_wal_level(&sql).await?;
    let wal_sender_timeout = setup::wal_sender_timeout(&sql).await?;
    check_status_interval(cfg, wal_sender_timeout)?;
    metrics.set_state(RelayState::Starting);
    kafka_preflight(cfg).await?;
    setup::ensure_publication(&sql, cfg, existing.is_some()).await?;
    let mut conn = ReplicationConnection::connect(&ctx.params).await?;
    if existing.is_none() && on_standby {
        tracing::info!(slot = %cfg.slot_name, "creating the slot on a standby: it waits for the primary's next standby snapshot (logged every 15 s while the primary is busy; SELECT pg_log_standby_snapshot() on the primary makes one at once)");
    }
    let offsets = OffsetStore::for_connector(cfg);
    if existing.is_none() {
        check_not_lost(cfg, state, &offsets).await?;
    }
    if cfg.exactly_once.is_some() {
        offsets_kept(cfg, &mut state.offsets_missing_since, &offsets, existing.is_some()).await?;
    }
    // At least once the committed offset of an existing slot is read before the slot is used, so
    // that Debezium's start-up check stops the relay, or takes a snapshot, before anything is
    // published.
    let mut loaded = None;
    let mut resnapshot = false;
    if let (None, Some(s)) = (&cfg.exactly_once, &existing) {
        let o = offsets.load_for_slot_unconfirmed(&cfg.slot_name).await.map_err(|e| offset_error(e, &offsets))?;
        if let Some(o) = &o {
            resnapshot = log_position_lost(cfg, s, o, &offsets)?;
        }
        loaded = Some(o.filter(|_| !resnapshot));
    }
    let snapshot_wanted = resnapshot
        || match cfg.snapshot_mode {
            SnapshotMode::NoData => false,
            SnapshotMode::Initial | SnapshotMode::InitialOnly | SnapshotMode::WhenNeeded => existing.is_none(),
            SnapshotMode::Always => !state.snapshot_taken,
        };
    if !snapshot_wanted {
        // Debezium's SnapshotSkipped, unless this task already took one.
        let mut snap = ctx.metrics.snapshot.lock().unwrap_or_else(|e| e.into_inner());
        snap.skipped = !snap.completed && !snap.aborted;
    }
    let slot = obtain_slot(&ctx, &sql, &mut conn, existing, snapshot_wanted).await?;
    state.snapshot_taken |= snapshot_wanted;
    slot::validate(&slot, cfg)?;
    ensure_failover(cfg, &sql, &mut conn, &slot).await?;
    let identity = conn.identify_system().await?;
    let requested = remembered_start(cfg, state, &identity, slot.confirmed_flush.unwrap_or(Lsn::ZERO));
    let producer = match &cfg.exactly_once {
        Some(eos) => Some(transactional_producer(cfg, &eos.transactional_id, &offsets).await?),
        None => None,
    };
    let resume = committed_offset(cfg, &sql, &offsets, requested, loaded).await?;
    let requested = match resume {
        Some(Resume(p)) if cfg.offset_mismatch.advances_slot() => advance_slot(cfg, &sql, requested, p.commit).await?,
        _ => requested,
    };
    record_offset(cfg, &offsets, requested, resume, producer.as_ref()).await?;
    if cfg.snapshot_mode == SnapshotMode::InitialOnly {
        return Ok(None);
    }
    start_replication(cfg, &sql, &mut conn, requested).await?;
    // The slot is ours now and cannot move; a previous holder may have confirmed further between our
    // read and START_REPLICATION. Never start (and so never report) below what the slot has.
    let now = slot::state(&sql, &cfg.slot_name).await?.and_then(|s| s.confirmed_flush).unwrap_or(requested);
    let start = requested.max(now);
    let peer_timeout = wal_sender_timeout.map(|t| t + cfg.status_interval);
    // An offset the slot has passed since says nothing more.
    let resume = resume.filter(|r| r.beyond(start));
    Ok(Some(Started { conn, sql, start, peer_timeout, resume, producer, identity }))
}

/// How long after its session ended a confirmed position is used to start from (see
/// [`remembered_start`]): a server restart, not an outage or a restore.
const REMEMBERED_FOR: Duration = Duration::from_secs(600);

/// Where to ask the server to start: the slot's confirmed position, or further where this process
/// confirmed further on the same WAL history.
///
/// PostgreSQL before 17 writes a logical slot's confirmed position to disk only when the slot's
/// restart point moves (every running-transactions record, about every 15 s under load), and even
/// a fast shutdown does not write it: a restart of the server takes the slot back by up to that
/// much confirmed work, which would all be published again (1.2 copies of each event under a
/// restart-heavy load). A relay that outlived the restart knows how far it confirmed. On the same
/// system and timeline, WAL up to that point is the same history it read, and the server decodes
/// from the later of the slot's position and the one asked for; a position past the server's WAL
/// (a standby behind, a restore) is not used.
///
/// The same system and timeline do not prove the same history: a server restored from a volume
/// snapshot keeps both. So the memory serves only a restart of the server (a session that ended
/// less than [`REMEMBERED_FOR`] ago, the slot's only writer since: standing by forgets it); past
/// that, the slot's position rules and the replay is duplicates only.
fn remembered_start(cfg: &Config, state: &SessionState, id: &SystemIdentity, slot: Lsn) -> Lsn {
    match &state.reached {
        // Under lsn.flush.mode=manual the slot is the operator's and the offsets topic holds the
        // relay's position.
        Some(r)
            if !cfg.lsn_flush_manual
                && r.at.elapsed() < REMEMBERED_FOR
                && r.slot == cfg.slot_name
                && r.system_id == id.system_id
                && r.timeline == id.timeline
                && r.lsn > slot
                && r.lsn <= id.xlog_pos =>
        {
            tracing::info!(
                slot = %cfg.slot_name,
                slot_confirmed = %slot,
                confirmed = %r.lsn,
                "the server's slot is behind what this relay confirmed before (PostgreSQL keeps a slot's confirmed position on disk only now and then, and was restarted): starting from the relay's position, so that nothing confirmed is published again"
            );
            r.lsn
        }
        _ => slot,
    }
}

/// `offset.mismatch.strategy=trust_offset` or `trust_greater_lsn`: a slot behind the committed
/// offset is moved up to the offset's last commit before streaming, as Debezium does
/// (`pg_replication_slot_advance`), so the WAL between is released at once. What the offset holds
/// inside the next transaction is still skipped by the reader. A server that cannot (no privilege,
/// a slot it will not move) leaves the slot where it is, with a warning, as Debezium's `warn` does:
/// the events between are skipped by the reader either way. The position to stream from.
async fn advance_slot(cfg: &Config, sql: &Client, slot_at: Lsn, to: Lsn) -> Result<Lsn, RelayError> {
    if to <= slot_at {
        return Ok(slot_at);
    }
    tracing::info!(slot = %cfg.slot_name, from = %slot_at, to = %to, "offset.mismatch.strategy: seeking the replication slot to the committed offset");
    match slot::advance(sql, &cfg.slot_name, to).await {
        Ok(_) => Ok(to),
        Err(e) => {
            tracing::warn!(
                slot = %cfg.slot_name,
                to = %to,
                "could not seek the replication slot to the committed offset ({e}); it stays where it is, and what the offset holds is skipped while reading instead"
            );
            Ok(slot_at)
        }
    }
}

/// Exactly once: the transactional producer. Initialising its transactions fences any older
/// producer with the same id (a zombie instance) and aborts the transaction it left open, so the
/// committed offset read after this is final.
async fn transactional_producer(cfg: &Config, id: &str, offsets: &OffsetStore) -> Result<Arc<Producer>, RelayError> {
    offsets.ensure_topic().await.map_err(|e| offset_error(e, offsets))?;
    let producer =
        Producer::transactional(&cfg.kafka, id, &producer_client_id(cfg)).map_err(crate::kafka::Error::Create)?;
    let producer = Arc::new(producer);
    let p = producer.clone();
    let timeout = crate::kafka::transaction_timeout(&cfg.kafka);
    tokio::task::spawn_blocking(move || p.init_transactions(timeout))
        .await
        .map_err(|e| RelayError::TaskStopped(format!("initialising Kafka transactions failed: {e}")))?
        .map_err(|e| crate::kafka::errors::transaction("initialising Kafka transactions", id, e))?;
    tracing::info!(transactional_id = %id, "Kafka transactions initialised (exactly once)");
    Ok(producer)
}

/// What the newest committed offset of this connector holds beyond the slot's position (`None`
/// when it holds nothing more): pgoutbox's own under exactly once, or the one Debezium left in the
/// Connect offsets topic it used. An offset ahead of the server's WAL was written for another
/// server: skipping up to it would skip events, so the relay stops instead.
///
/// `loaded`: the record already read at this start, if it was.
async fn committed_offset(
    cfg: &Config,
    sql: &Client,
    offsets: &OffsetStore,
    slot_position: Lsn,
    loaded: Option<Option<SourceOffset>>,
) -> Result<Option<Resume>, RelayError> {
    // The slot exists here. At least once, a stale "no offsets topic" can only make the relay
    // publish again what the slot already passed, so the first answer is believed (saving a second
    // of rechecks at every first start); exactly once, a missed record would mean duplicates.
    let load = match loaded {
        Some(o) => Ok(o),
        None if cfg.exactly_once.is_some() => offsets.load_for_slot(&cfg.slot_name).await,
        None => offsets.load_for_slot_unconfirmed(&cfg.slot_name).await,
    };
    let Some(o) = load.map_err(|e| offset_error(e, offsets))? else {
        return Ok(None);
    };
    let resume = Resume(Position { commit: o.lsn, partial: o.partial.map(Into::into) });
    // A copy of the slot's position says nothing beyond the slot: where it is ahead (a server
    // restart took the slot back, a failover to a standby that was behind), the slot's own
    // position rules at least once, and what lies between is published again rather than trusted
    // across a WAL history that may have changed.
    if o.written == Written::SlotCopy || !resume.beyond(slot_position) {
        return Ok(None);
    }
    let wal = setup::current_wal_lsn(sql).await?;
    if o.lsn > wal {
        return Err(crate::kafka::Error::Refused(format!(
            "the committed offset of connector `{}` in `{}` is at {}, beyond this server's WAL ({wal}): it was written against another server or cluster, and resuming after it would skip events; point offsets.storage.topic (or the connector's name) elsewhere, or delete the offset (DELETE /connectors/{}/offsets while it is stopped)",
            cfg.connector_name,
            offsets.topic(),
            o.lsn,
            cfg.connector_name
        ))
        .into());
    }
    Ok(Some(resume))
}

/// Debezium's start-up check (`PostgresConnection.validateLogPosition`, before streaming): a
/// committed offset whose last wholly handled change (`lsn_proc`) lies before the slot's
/// `restart_lsn` names WAL the slot no longer holds. The slot was dropped and created again under
/// the same name, or moved past the offset, while nothing streamed from it: what was committed in
/// between was never decoded. Debezium checks under `offset.mismatch.strategy` `no_validation` and
/// `trust_offset` (the other two trust the slot) unless `internal.log.position.check.enable=false`,
/// and not for `snapshot.mode=initial_only`, which does not stream. `when_needed` takes a new
/// snapshot and streams from the slot (`true`); every other mode stops.
///
/// Only records that are the published position itself are checked: Debezium's (no slot name) and
/// pgoutbox's under `lsn.flush.mode=manual`, whose slot only the operator moves. pgoutbox's
/// at-least-once records copy a slot it confirms ahead of them, and under exactly once an idle
/// slot is confirmed past the last Kafka transaction's record: checking those would stop healthy
/// relays.
fn log_position_lost(
    cfg: &Config,
    slot: &slot::SlotState,
    o: &SourceOffset,
    offsets: &OffsetStore,
) -> Result<bool, RelayError> {
    let Some((restart, processed)) = position_unavailable(cfg, slot.restart_lsn, o) else {
        return Ok(false);
    };
    if cfg.snapshot_mode == SnapshotMode::WhenNeeded {
        tracing::warn!(
            slot = %cfg.slot_name,
            offset = %processed,
            restart_lsn = %restart,
            "the last recorded offset is no longer available on the server (the slot's restart_lsn is past it: the slot was created again or moved); events committed in between may not have been published: taking a new snapshot of the outbox table (snapshot.mode=when_needed), then streaming from the slot"
        );
        return Ok(true);
    }
    Err(RelayError::OffsetUnavailable {
        slot: cfg.slot_name.clone(),
        offset: processed,
        restart,
        topic: offsets.topic().to_string(),
    })
}

/// The slot's `restart_lsn` and the offset's `lsn_proc` when the first has passed the second and
/// [`log_position_lost`] checks this record.
pub fn position_unavailable(cfg: &Config, restart: Option<Lsn>, o: &SourceOffset) -> Option<(Lsn, Lsn)> {
    use crate::config::OffsetMismatch;
    let checked = cfg.log_position_check
        && matches!(cfg.offset_mismatch, OffsetMismatch::NoValidation | OffsetMismatch::TrustOffset)
        && cfg.snapshot_mode != SnapshotMode::InitialOnly
        && (o.slot.is_none() || o.written == Written::Manual);
    match (restart, o.processed) {
        (Some(restart), Some(processed)) if checked && restart > processed => Some((restart, processed)),
        _ => None,
    }
}

/// A missing slot this connector streamed from before (in this process, or as recorded in Kafka)
/// was lost: creating a new one would skip events.
async fn check_not_lost(cfg: &Config, state: &SessionState, offsets: &OffsetStore) -> Result<(), RelayError> {
    if state.streamed {
        return Err(RelayError::SlotDropped(cfg.slot_name.clone()));
    }
    let reading = std::time::Instant::now();
    let recorded = offsets.load_for_slot(&cfg.slot_name).await.map_err(|e| offset_error(e, offsets))?;
    tracing::info!(
        slot = %cfg.slot_name,
        recorded = recorded.is_some(),
        took_ms = reading.elapsed().as_millis() as u64,
        "no slot: read the offsets topic to its end for the slot's record"
    );
    if let Some(recorded) = recorded {
        slot_lost(cfg, offsets, &recorded)?;
    }
    Ok(())
}

/// The slot to stream from: the existing one (after an `always` snapshot if wanted), a new one
/// after the initial snapshot, or a new one without.
async fn obtain_slot(
    ctx: &Ctx<'_>,
    sql: &Client,
    conn: &mut ReplicationConnection,
    existing: Option<slot::SlotState>,
    snapshot_wanted: bool,
) -> Result<slot::SlotState, RelayError> {
    let cfg = ctx.cfg;
    match existing {
        Some(s) => {
            // A staging slot left by a crash between the copy and its drop is stale now.
            slot::drop(sql, &slot::staging_name(&cfg.slot_name)).await;
            if snapshot_wanted {
                // `always` with an existing slot: a snapshot of its own, then the stream from the
                // slot's position; rows changed in between arrive twice (as with Debezium).
                ctx.metrics.set_state(RelayState::Snapshotting);
                run_snapshot(ctx, None).await?;
            }
            Ok(s)
        }
        None if snapshot_wanted => {
            ctx.metrics.set_state(RelayState::Snapshotting);
            snapshot_into_new_slot(ctx, sql, conn).await
        }
        None => {
            match conn.create_slot(&cfg.slot_name).await {
                Ok(lsn) => tracing::info!(slot = %cfg.slot_name, consistent_point = %lsn, "created replication slot"),
                // Another instance created it first: fine, use it.
                Err(e) if e.sqlstate() == Some("42710") => {}
                Err(e) => return Err(e.into()),
            }
            slot::state(sql, &cfg.slot_name).await?.ok_or_else(|| RelayError::SlotDropped(cfg.slot_name.clone()))
        }
    }
}

async fn start_replication(
    cfg: &Config,
    sql: &Client,
    conn: &mut ReplicationConnection,
    from: Lsn,
) -> Result<(), RelayError> {
    let relayed = cfg.messages.is_some();
    // With message prefix lists but nothing relayed, messages are read only to be counted as
    // Debezium counts those its lists leave out (filtered); where the server cannot send them,
    // there is nothing to count.
    let counted = cfg.message_prefixes.is_set();
    let mut messages = relayed;
    if relayed || counted {
        let major = setup::server_major(sql).await?;
        messages = major >= 14;
        if relayed && major < 14 {
            return Err(RelayError::Setup(setup::SetupError::Publication(format!(
                "transforms has DecodeLogicalDecodingMessageContent, but PostgreSQL {major} cannot stream logical decoding messages (pgoutput's `messages` option needs PostgreSQL 14 or later); upgrade the server, or remove the transform and use an outbox table"
            ))));
        }
    }
    conn.start_replication(&cfg.slot_name, from, &cfg.publication_name, messages).await.map_err(|e| match e {
        PgError::Server(ref s) if s.code == "42704" && s.message.contains("publication") => {
            RelayError::Setup(setup::SetupError::Publication(format!(
                "{s}; create publication `{}` or set publication.autocreate.mode=filtered",
                cfg.publication_name
            )))
        }
        e => e.into(),
    })
}

/// `slot.failover=true`: the slot is made a failover slot (PostgreSQL 17+), whichever way it was
/// created (a slot copied after the snapshot loses the flag: pg_copy_logical_replication_slot does
/// not carry it over). Before 17 there are no failover slots; Debezium ignores the key there too.
async fn ensure_failover(
    cfg: &Config,
    sql: &Client,
    conn: &mut ReplicationConnection,
    slot: &slot::SlotState,
) -> Result<(), RelayError> {
    if !cfg.slot_failover || slot.failover == Some(true) {
        return Ok(());
    }
    let major = setup::server_major(sql).await?;
    if major < 17 {
        tracing::warn!(slot = %cfg.slot_name, "slot.failover=true needs PostgreSQL 17 or later (this server is {major}); the slot is not a failover slot");
        return Ok(());
    }
    conn.set_failover(&cfg.slot_name).await?;
    tracing::info!(slot = %cfg.slot_name, "made the replication slot a failover slot (slot.failover=true)");
    Ok(())
}

/// The server drops a walsender that is silent for `wal_sender_timeout`. While the pipeline is
/// backpressured the status updates are all the server hears, so they must come more often.
fn check_status_interval(cfg: &Config, wal_sender_timeout: Option<Duration>) -> Result<(), RelayError> {
    match wal_sender_timeout {
        Some(t) if cfg.status_interval >= t => Err(RelayError::Config(crate::config::ConfigError::Invalid {
            key: "status.update.interval.ms".into(),
            message: format!(
                "{} ms is not below the server's wal_sender_timeout ({} ms): the server would drop the connection whenever Kafka is slow; set it to at most half of wal_sender_timeout (Debezium's default is 10000)",
                cfg.status_interval.as_millis(),
                t.as_millis()
            ),
        })),
        _ => Ok(()),
    }
}

/// The slot is gone although this connector streamed from it: events committed since the recorded
/// position were never decoded, and a new slot would start after them. Debezium takes a new
/// snapshot in this case under `when_needed` and `always`; every other mode stops.
fn slot_lost(cfg: &Config, offsets: &OffsetStore, recorded: &SourceOffset) -> Result<(), RelayError> {
    match cfg.snapshot_mode {
        SnapshotMode::WhenNeeded | SnapshotMode::Always => {
            tracing::warn!(
                slot = %cfg.slot_name,
                recorded = %recorded.lsn,
                "replication slot `{}` is gone although pgoutbox streamed from it up to {}; events committed since may not have been published: taking a new snapshot of the outbox table (snapshot.mode={}) and creating the slot again",
                cfg.slot_name,
                recorded.lsn,
                if cfg.snapshot_mode == SnapshotMode::Always { "always" } else { "when_needed" }
            );
            Ok(())
        }
        _ => Err(RelayError::SlotLost {
            slot: cfg.slot_name.clone(),
            lsn: recorded.lsn,
            topic: offsets.topic().to_string(),
        }),
    }
}

/// Exactly once: the committed offsets are what say which of the slot's transactions Kafka holds.
/// A slot that exists without its offsets topic lost them (the topic was deleted, or
/// `offset.storage.topic` changed): resuming from the slot would publish again what it holds.
/// For a slot still to be created, the topic is created first, so that a slot never exists
/// without it (a crash between the two would otherwise look like that loss).
///
/// "Missing" is believed only once sessions have found it so for [`OFFSETS_MISSING_FOR`]: a broker
/// that just restarted answers from a stale metadata cache, and reconnecting sessions ask it first.
/// Until then the session ends as a retryable Kafka failure.
async fn offsets_kept(
    cfg: &Config,
    missing_since: &mut Option<std::time::Instant>,
    offsets: &OffsetStore,
    slot_exists: bool,
) -> Result<(), RelayError> {
    if !slot_exists {
        return offsets.ensure_topic().await.map_err(|e| offset_error(e, offsets));
    }
    if offsets.exists().await.map_err(|e| offset_error(e, offsets))? {
        *missing_since = None;
        return Ok(());
    }
    let since = *missing_since.get_or_insert_with(std::time::Instant::now);
    if since.elapsed() < offsets_missing_for() {
        return Err(crate::kafka::Error::transient(
            "finding the offsets topic",
            format!(
                "Kafka says `{}` does not exist (missing for {} s): asking again before concluding that the committed offsets are gone",
                offsets.topic(),
                since.elapsed().as_secs()
            ),
        )
        .into());
    }
    Err(RelayError::OffsetsLost { slot: cfg.slot_name.clone(), topic: offsets.topic().to_string() })
}

/// How long sessions must find the offsets topic missing before the relay stops on it.
const OFFSETS_MISSING_FOR: Duration = Duration::from_secs(30);

/// [`OFFSETS_MISSING_FOR`], or `PGOUTBOX_OFFSETS_MISSING_MS` (tests).
fn offsets_missing_for() -> Duration {
    super::millis_from_env("PGOUTBOX_OFFSETS_MISSING_MS", OFFSETS_MISSING_FOR)
}

/// Remembers, before streaming, that this connector streams from the slot (see `kafka::offsets`).
/// A committed offset beyond the slot is left as it is: it says more. Under exactly once the record
/// goes through the transactional producer, so it is one of the connector's committed offsets.
async fn record_offset(
    cfg: &Config,
    offsets: &OffsetStore,
    lsn: Lsn,
    resume: Option<Resume>,
    producer: Option<&Arc<Producer>>,
) -> Result<(), RelayError> {
    if resume.is_some() {
        return Ok(());
    }
    let offset = if cfg.lsn_flush_manual {
        SourceOffset::manual(&cfg.slot_name, lsn)
    } else {
        SourceOffset::at_commit(&cfg.slot_name, lsn)
    };
    let Some(producer) = producer else {
        return offsets.store(&offset).await.map_err(|e| offset_error(e, offsets));
    };
    let id = cfg.exactly_once.as_ref().map_or(String::new(), |e| e.transactional_id.clone());
    let timeout = crate::kafka::transaction_timeout(&cfg.kafka);
    let (p, offsets, value) = (producer.clone(), offsets.clone(), offset.value());
    let written = tokio::task::spawn_blocking(move || {
        p.begin_transaction().map_err(|e| ("beginning a Kafka transaction", e))?;
        p.send(offsets.record(&value)).map_err(|(e, _)| ("recording the slot's offset", e))?;
        p.commit_transaction(timeout).map_err(|e| ("committing the slot's offset", e))
    })
    .await
    .map_err(|e| RelayError::TaskStopped(format!("recording the slot's offset failed: {e}")))?;
    written.map_err(|(what, e)| crate::kafka::errors::transaction(what, &id, e))?;
    // Its delivery report is of no use: served and dropped.
    producer.serve(&mut Vec::new());
    Ok(())
}

/// Refused credentials or certificates stop the relay here, naming the setting, before any DDL or
/// snapshot; an unreachable cluster is retried like any other session failure.
pub(super) async fn kafka_preflight(cfg: &Config) -> Result<(), RelayError> {
    use crate::kafka::security::{preflight, PreflightError};
    let kafka = cfg.kafka.clone();
    match tokio::task::spawn_blocking(move || preflight(&kafka, Duration::from_secs(10))).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(PreflightError::Refused(why))) => Err(crate::kafka::Error::Refused(why).into()),
        Ok(Err(e)) => Err(crate::kafka::Error::transient("reaching the Kafka cluster", e).into()),
        Err(e) => Err(RelayError::TaskStopped(format!("the Kafka preflight failed: {e}"))),
    }
}

fn offset_error(e: crate::kafka::offsets::OffsetError, offsets: &OffsetStore) -> RelayError {
    use crate::kafka::offsets::OffsetError as O;
    use crate::kafka::topics::TopicError as T;
    use rdkafka::error::RDKafkaErrorCode as C;
    let code = match &e {
        O::Kafka { source, .. } | O::Topic(T::Kafka { source, .. }) => crate::kafka::errors::code_of(source),
        O::Metadata { code, .. } | O::Topic(T::Create { code, .. }) => Some(*code),
        _ => None,
    };
    match code {
        Some(C::TopicAuthorizationFailed | C::ClusterAuthorizationFailed | C::GroupAuthorizationFailed) => {
            crate::kafka::Error::Refused(format!(
                "{e}; pgoutbox records the slot it streams from in this topic: grant this client READ, WRITE and CREATE on `{}`, or name another with offset.storage.topic",
                offsets.topic()
            ))
            .into()
        }
        _ if e.is_permanent() => crate::kafka::Error::Refused(e.to_string()).into(),
        _ => crate::kafka::Error::transient("reading or writing the slot's record in offset.storage.topic", e).into(),
    }
}

/// Takes the initial snapshot from a staging slot and creates the real slot as its copy. The caller
/// holds the slot lock, so no other instance shares (and drops) the staging slot, which would lose
/// the events between two snapshots.
async fn snapshot_into_new_slot(
    ctx: &Ctx<'_>,
    sql: &Client,
    conn: &mut ReplicationConnection,
) -> Result<slot::SlotState, RelayError> {
    let cfg = ctx.cfg;
    // Another instance may have finished the snapshot while we waited for the lock.
    if let Some(s) = slot::state(sql, &cfg.slot_name).await? {
        return Ok(s);
    }
    let staging = slot::staging_name(&cfg.slot_name);
    // Under the lock, a staging slot can only be a leftover of a crash.
    slot::drop(sql, &staging).await;
    let (consistent, exported) = conn.create_slot_exporting_snapshot(&staging).await?;
    tracing::info!(slot = %staging, consistent_point = %consistent, "snapshot: created staging slot");
    run_snapshot(ctx, Some(&exported)).await?;
    // Only now does the real slot exist: a crash before this point snapshots again.
    slot::copy(sql, &staging, &cfg.slot_name).await?;
    slot::drop(sql, &staging).await;
    tracing::info!(slot = %cfg.slot_name, consistent_point = %consistent, "created replication slot after the snapshot");
    slot::state(sql, &cfg.slot_name).await?.ok_or_else(|| RelayError::SlotDropped(cfg.slot_name.clone()))
}

/// Publishes the existing rows through a sink of its own and waits for every acknowledgement.
async fn run_snapshot(ctx: &Ctx<'_>, exported: Option<&str>) -> Result<(), RelayError> {
    let (cfg, params, context, shutdown, metrics) = (ctx.cfg, &ctx.params, ctx.context, ctx.shutdown, ctx.metrics);
    let sql = setup::connect_sql(params).await?;
    snapshot::begin(&sql, exported).await?;
    let producer = ctx.producer.for_session(cfg)?;
    let (tx, rx) = mpsc::channel(CHANNEL_BATCHES);
    let (confirmed_tx, _confirmed_rx) = watch::channel(Lsn::ZERO);
    let sink = Sink::new(producer, Lsn::ZERO, confirmed_tx, cfg.kafka.clone(), metrics.clone())
        .with_tolerance(cfg.errors.clone(), &cfg.connector_name)
        .with_backlog(cfg.stall_threshold);
    let sink = tokio::spawn(sink.run(rx, shutdown.clone(), cfg.shutdown_timeout));
    let published = snapshot::publish(&sql, cfg, &mut router(cfg, context.clone()), &tx, metrics).await;
    drop(tx);
    let sink_result = sink.await.map_err(|e| RelayError::TaskStopped(format!("the snapshot sink failed: {e}")));
    ctx.producer.session_ended();
    let sink_result = sink_result?;
    sink_result?;
    published?;
    sql.batch_execute("COMMIT").await.map_err(PgError::Sql)?;
    Ok(())
}

/// `slot.drop.on.stop`: drop the slot after a graceful stop (its walsender may need a moment to
/// release it).
pub async fn drop_slot(cfg: &Config) {
    let params = ConnectParams::from_config(&cfg.database);
    let Ok(sql) = setup::connect_sql(&params).await else {
        tracing::warn!(slot = %cfg.slot_name, "slot.drop.on.stop: cannot connect to drop the slot");
        return;
    };
    slot::drop(&sql, &cfg.slot_name).await;
    match slot::state(&sql, &cfg.slot_name).await {
        Ok(None) => {
            // Dropped on purpose: the next start creates a new slot without calling it lost.
            if let Err(e) = OffsetStore::for_connector(cfg).clear().await {
                tracing::warn!(error = %e, "slot.drop.on.stop: could not clear the slot's record; the next start will report the slot as lost");
            }
            tracing::info!(slot = %cfg.slot_name, "dropped replication slot (slot.drop.on.stop=true)")
        }
        _ => tracing::warn!(slot = %cfg.slot_name, "slot.drop.on.stop: could not drop the slot"),
    }
}

#[cfg(test)]
mod kept_tests {
    use super::*;

    fn producer() -> Arc<Producer> {
        let kafka = crate::config::KafkaConfig {
            bootstrap_servers: "127.0.0.1:1".into(),
            producer_overrides: Default::default(),
            client_security: Default::default(),
            topic_creation: None,
        };
        Arc::new(Producer::new(&kafka, "test").unwrap())
    }

    /// The kept producer outlives a short pause between sessions, not a long one, and a close
    /// ends it even while a cut-short task still holds it for a moment.
    #[tokio::test]
    async fn a_kept_producer_expires_once_no_session_used_it_for_a_while() {
        let kept = KeptProducer::default();
        kept.lock().producer = Some(producer());
        kept.expire().await;
        assert!(kept.lock().producer.is_some(), "kept while a session uses it");
        kept.session_ended();
        kept.expire().await;
        assert!(kept.lock().producer.is_some(), "kept for the next session");
        kept.lock().idle_since = Some(std::time::Instant::now() - KEEP_IDLE - Duration::from_secs(1));
        kept.expire().await;
        assert!(kept.lock().producer.is_none(), "closed after KEEP_IDLE without a session");

        let p = producer();
        kept.lock().producer = Some(p.clone());
        let holder = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            drop(p);
        });
        let closing = std::time::Instant::now();
        kept.close().await;
        assert!(closing.elapsed() >= Duration::from_millis(150), "the close waited for the other holder to let go");
        holder.await.unwrap();
        assert!(kept.lock().producer.is_none());
    }
}

#[cfg(test)]
mod log_position_tests {
    use super::*;

    fn config(extra: &[&str]) -> Config {
        let mut raw = crate::config::parse_properties(
            "name=c\nconnector.class=io.debezium.connector.postgresql.PostgresConnector\n\
             database.hostname=h\ndatabase.user=u\ndatabase.dbname=d\ntopic.prefix=p\n\
             table.include.list=public.outbox\ntransforms=outbox\n\
             transforms.outbox.type=io.debezium.transforms.outbox.EventRouter\nbootstrap.servers=b:9092\n",
        );
        for e in extra {
            raw.set(e).unwrap();
        }
        Config::from_raw(&raw).unwrap()
    }

    /// Debezium's check compares the slot's restart_lsn with the offset's lsn_proc, under
    /// no_validation (the default) and trust_offset only, and pgoutbox makes it only for records
    /// that are the published position.
    #[test]
    fn a_slot_whose_restart_lsn_passed_the_offset_is_caught_where_debezium_catches_it() {
        let debezium = SourceOffset { slot: None, ..SourceOffset::at_commit("", Lsn(100)) };
        let behind = Some(Lsn(100));
        let past = Some(Lsn(101));
        let default = config(&[]);
        assert_eq!(position_unavailable(&default, past, &debezium), Some((Lsn(101), Lsn(100))));
        assert_eq!(position_unavailable(&default, behind, &debezium), None, "restart_lsn at the offset is fine");
        assert_eq!(position_unavailable(&default, None, &debezium), None);
        let no_proc = SourceOffset { processed: None, ..debezium.clone() };
        assert_eq!(position_unavailable(&default, past, &no_proc), None, "no lsn_proc, nothing to compare");
        assert!(position_unavailable(&config(&["offset.mismatch.strategy=trust_offset"]), past, &debezium).is_some());
        for unchecked in [
            "offset.mismatch.strategy=trust_slot",
            "offset.mismatch.strategy=trust_greater_lsn",
            "internal.log.position.check.enable=false",
            "snapshot.mode=initial_only",
        ] {
            assert_eq!(position_unavailable(&config(&[unchecked]), past, &debezium), None, "{unchecked}");
        }
        // pgoutbox's own: under lsn.flush.mode=manual the record is the position; a copy of the
        // slot's, or a transactional record, may be behind a slot that moved on.
        let manual = config(&["lsn.flush.mode=manual"]);
        assert!(position_unavailable(&manual, past, &SourceOffset::manual("s", Lsn(100))).is_some());
        assert_eq!(position_unavailable(&default, past, &SourceOffset::slot_copy("s", Lsn(100))), None);
        assert_eq!(position_unavailable(&default, past, &SourceOffset::at_commit("s", Lsn(100))), None);
    }
}
