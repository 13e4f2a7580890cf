//! An idempotent rdkafka producer whose delivery reports feed the checkpoint.
//!
//! Records are handed to librdkafka without waiting for earlier deliveries; its broker threads batch,
//! send and retry them. Delivery reports are served on the caller's thread (the sink's), not on a
//! polling thread of their own: librdkafka writes a byte to a pipe when its event queue gets work,
//! the sink wakes on it and calls [`Producer::serve`]. This saves a thread hop per acknowledgement,
//! and librdkafka's messages are freed on the thread that allocated them, which keeps glibc's malloc
//! on its fast path (the cross-thread frees of a polling thread cost ~20% of the CPU when measured).
//! What can wait to be served is bounded by librdkafka's queue limits (`queue.buffering.max.*`),
//! which are what makes the sink wait.
//!
//! Settings that carry guarantees (the first three cannot be overridden; the others are defaults a
//! `producer.*` key may change):
//! - `enable.idempotence=true`, `acks=all`: no duplicates or reordering from producer retries;
//! - `partitioner=murmur2_random`: the Java client's murmur2 of the key bytes, so each aggregate lands on
//!   the partition Debezium's Java producer chose;
//! - `message.timeout.ms=0`: never give up on a record because the broker is away (Kafka Connect sets
//!   `delivery.timeout.ms` to Integer.MAX_VALUE for the same reason); the reader is backpressured
//!   instead while keepalives keep the PostgreSQL connection alive.

use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::{ClientContext, DefaultClientContext};
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, Headers, Message, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer as _, ProducerContext};
use rdkafka::util::IntoOpaque;
use tokio::net::unix::pipe;

use crate::config::KafkaConfig;

/// What the producer reports to the sink.
#[derive(Debug)]
pub enum Ack {
    /// The broker acknowledged the record with this sequence number.
    Delivered(u64),
    /// The record failed for good: the error, its topic and event id, and its size as a record of a
    /// batch (at most; see [`record_size`]).
    Failed { seq: u64, error: KafkaError, topic: String, event_id: String, size: usize },
    /// The producer itself failed fatally (e.g. the idempotent producer lost its state, or the client
    /// may not write idempotently); nothing queued in it will be delivered. `code` is the
    /// underlying error librdkafka records for it, filled in by [`Producer::serve`].
    Fatal { reason: String, code: Option<RDKafkaErrorCode> },
    /// The broker refused the client's credentials or certificates (see `kafka::security`):
    /// no retry will help.
    Refused(String),
}

pub struct ReportingContext {
    /// The session whose reports are wanted (see [`Producer::new_session`]); reports of records an
    /// earlier session sent are dropped.
    session: std::sync::atomic::AtomicUsize,
    /// Reports of the events served so far, taken by [`Producer::serve`]. Only the serving thread
    /// touches it, so the lock is never contended.
    acks: Mutex<Vec<Ack>>,
    /// When each kind of connection error was last logged, and how many were not logged since:
    /// librdkafka reports a broker that is away every second or so.
    warned: Mutex<std::collections::HashMap<String, (Instant, u64)>>,
    /// The client's figures from librdkafka's statistics, for the metrics.
    stats: crate::metrics::SharedClientStats,
}

/// At most one warning per kind of connection error in this long.
const CLIENT_ERROR_LOG_EVERY: Duration = Duration::from_secs(30);

/// A record's opaque holds its session in the bits above `SEQ_BITS`, its sequence number below.
const SEQ_BITS: u32 = 48;
const SEQ_MASK: usize = (1 << SEQ_BITS) - 1;

impl ReportingContext {
    fn report(&self, ack: Ack) {
        self.acks.lock().unwrap_or_else(|e| e.into_inner()).push(ack);
    }

    /// The sequence number of a record the current session sent; `None` for an earlier session's.
    fn own(&self, opaque: usize) -> Option<usize> {
        if opaque == super::offsets::OFFSET_RECORD {
            return Some(opaque);
        }
        (opaque >> SEQ_BITS == self.session.load(Ordering::Relaxed)).then_some(opaque & SEQ_MASK)
    }

    /// `seq` tagged with the current session.
    fn tag(&self, seq: usize) -> usize {
        if seq == super::offsets::OFFSET_RECORD {
            return seq;
        }
        (self.session.load(Ordering::Relaxed) << SEQ_BITS) | (seq & SEQ_MASK)
    }
}

impl ClientContext for ReportingContext {
    fn stats(&self, statistics: rdkafka::Statistics) {
        let mut stats = self.stats.lock().unwrap_or_else(|e| e.into_inner());
        client_stats(&mut stats, &statistics, Instant::now());
    }

    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        match level {
            RDKafkaLogLevel::Emerg | RDKafkaLogLevel::Alert | RDKafkaLogLevel::Critical | RDKafkaLogLevel::Error => {
                tracing::error!(target: "librdkafka", facility = fac, "{message}")
            }
            // Initialising transactions while the broker still aborts the previous instance's open
            // one is answered "concurrent transactions, retrying" until it is done: expected after
            // every crash, not a warning.
            RDKafkaLogLevel::Warning if fac == "GETPID" && message.contains("concurrent operation") => {
                tracing::info!(target: "librdkafka", facility = fac, "{message}")
            }
            RDKafkaLogLevel::Warning => tracing::warn!(target: "librdkafka", facility = fac, "{message}"),
            RDKafkaLogLevel::Notice | RDKafkaLogLevel::Info => {
                tracing::info!(target: "librdkafka", facility = fac, "{message}")
            }
            RDKafkaLogLevel::Debug => tracing::debug!(target: "librdkafka", facility = fac, "{message}"),
        }
    }

    fn error(&self, error: KafkaError, reason: &str) {
        if error.rdkafka_error_code() == Some(RDKafkaErrorCode::Fatal) {
            self.report(Ack::Fatal { reason: reason.to_string(), code: None });
            return;
        }
        if let Some(r) = super::security::refusal(&error, reason) {
            if super::security::confirmed(&r) {
                self.report(Ack::Refused(r));
            } else {
                tracing::warn!(target: "librdkafka", "{r}; confirming in {} s before stopping (a broker being restarted can refuse one handshake)", super::security::CONFIRM_AFTER.as_secs());
            }
            return;
        }
        // Broker connection problems land here; librdkafka keeps retrying them.
        let kind = error.rdkafka_error_code().map_or_else(|| error.to_string(), |c| format!("{c:?}"));
        let mut warned = self.warned.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        match warned.get_mut(&kind) {
            Some((at, suppressed)) if now.duration_since(*at) < CLIENT_ERROR_LOG_EVERY => *suppressed += 1,
            Some((at, suppressed)) => {
                tracing::warn!(target: "librdkafka", %error, repeated = *suppressed, "Kafka client error: {reason}; waiting for the broker");
                *at = now;
                *suppressed = 0;
            }
            None => {
                tracing::warn!(target: "librdkafka", %error, "Kafka client error: {reason}; waiting for the broker");
                warned.insert(kind, (now, 0));
            }
        }
    }
}

impl ProducerContext for ReportingContext {
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, opaque: usize) {
        let Some(seq) = self.own(opaque) else {
            // An earlier session's record, which that session's successor sends again: its fate no
            // longer moves any position.
            if let Err((e, msg)) = result {
                tracing::debug!(topic = msg.topic(), error = %e, "a record of an earlier session failed; this session sends it again");
            }
            return;
        };
        let report = match result {
            Ok(_) => Ack::Delivered(seq as u64),
            Err((e, msg)) => {
                let event_id = msg
                    .headers()
                    .and_then(|h| h.iter().filter(|h| h.key == "id").last().and_then(|h| h.value))
                    .map(|v| String::from_utf8_lossy(v).into_owned())
                    .unwrap_or_else(|| "<no id>".to_string());
                let size = record_size(msg);
                Ack::Failed { seq: seq as u64, error: e.clone(), topic: msg.topic().to_string(), event_id, size }
            }
        };
        self.report(report);
    }
}

/// The most bytes `msg` takes in a v2 record batch: its key, value and headers with their lengths,
/// and the record's own fields at their longest (librdkafka's `RD_KAFKAP_MESSAGE_V2_MAX_OVERHEAD`).
fn record_size(msg: &impl Message) -> usize {
    const V2_MAX_OVERHEAD: usize = 5 + 1 + 10 + 5 + 5 + 5 + 5;
    let headers: usize =
        msg.headers().map_or(0, |h| h.iter().map(|h| 10 + h.key.len() + h.value.map_or(0, <[u8]>::len)).sum());
    V2_MAX_OVERHEAD + msg.key().map_or(0, <[u8]>::len) + msg.payload().map_or(0, <[u8]>::len) + headers
}

/// A reference to librdkafka's main event queue (where delivery reports and errors go), to read its
/// length.
struct MainQueue(*mut rdkafka::bindings::rd_kafka_queue_t);

// SAFETY: librdkafka queue handles are thread-safe; the handle is only used for `rd_kafka_queue_length`
// and released once.
unsafe impl Send for MainQueue {}
unsafe impl Sync for MainQueue {}

impl Drop for MainQueue {
    fn drop(&mut self) {
        // SAFETY: obtained from rd_kafka_queue_get_main, released exactly once, before the client.
        unsafe { rdkafka::bindings::rd_kafka_queue_destroy(self.0) }
    }
}

/// A record for [`Producer::send`]; its opaque is the event's sequence number.
pub type Record<'a> = BaseRecord<'a, [u8], [u8], usize>;

/// Fields drop in order: the queue reference before the client, the client (which purges and
/// serves its last reports) before the pipe librdkafka writes to.
pub struct Producer {
    queue: MainQueue,
    /// When [`serve`](Self::serve) last ran, in nanoseconds since `epoch`: `ready` resolves at the
    /// latest `SERVE_AT_LEAST_EVERY` after it, however often the caller's loop goes round.
    served_at: AtomicU64,
    epoch: Instant,
    inner: BaseProducer<ReportingContext>,
    wake: pipe::Receiver,
    _wake_tx: pipe::Sender,
}

/// The longest the sink goes without serving librdkafka's event queue.
const SERVE_AT_LEAST_EVERY: Duration = Duration::from_millis(100);

use crate::config::producer::{JAVA_MAX_REQUEST_SIZE, QUEUE_MAX_KBYTES};
const QUEUE_MAX_MESSAGES: &str = "100000";
/// How often librdkafka reports its statistics (the producer metrics' resolution).
pub const STATISTICS_INTERVAL_MS: &str = "5000";

/// Folds one statistics report into `stats`: totals and averages over the brokers that are nodes
/// (not the bootstrap entries), rates over the time since the previous report.
/// A mean over several windows, each given as its average and sample count.
#[derive(Default)]
struct Mean {
    sum: f64,
    count: f64,
}

impl Mean {
    fn add(&mut self, avg: i64, count: i64) {
        if count > 0 {
            self.sum += avg as f64 * count as f64;
            self.count += count as f64;
        }
    }

    fn value(&self) -> f64 {
        if self.count > 0.0 {
            self.sum / self.count
        } else {
            0.0
        }
    }
}

pub fn client_stats(stats: &mut crate::metrics::ClientStats, s: &rdkafka::Statistics, now: Instant) {
    // This runs inside the producer's poll, on the sink's task: nothing here may panic. librdkafka's
    // windows can hold any value (a broker that is away), so sums are floating point and counts
    // saturate (an overflow panicked the sink once, in the three-broker fault scenario).
    let nodes = s.brokers.values().filter(|b| b.nodeid >= 0);
    let (mut connections, mut retries, mut in_flight, mut requests, mut responses) = (0u64, 0u64, 0u64, 0u64, 0u64);
    let (mut rtt, mut queued) = (Mean::default(), Mean::default());
    let mut rtt_max = 0i64;
    for b in nodes {
        connections = connections.saturating_add(u64::from(b.state == "UP"));
        retries = retries.saturating_add(b.txretries);
        in_flight = in_flight.saturating_add(u64::try_from(b.waitresp_cnt).unwrap_or(0));
        requests = requests.saturating_add(b.tx);
        responses = responses.saturating_add(b.rx);
        // A window's `avg` is of its samples (`sum` is not reliably theirs in every release).
        if let Some(w) = &b.rtt {
            rtt.add(w.avg, w.cnt);
            rtt_max = rtt_max.max(w.max);
        }
        if let Some(w) = &b.int_latency {
            queued.add(w.avg, w.cnt);
        }
    }
    let (mut batch_bytes, mut batch_records) = (Mean::default(), Mean::default());
    for t in s.topics.values() {
        batch_bytes.add(t.batchsize.avg, t.batchsize.cnt);
        batch_records.add(t.batchcnt.avg, t.batchcnt.cnt);
    }
    let outgoing = u64::try_from(s.tx_bytes).unwrap_or(0);
    let incoming = u64::try_from(s.rx_bytes).unwrap_or(0);
    let sent = u64::try_from(s.txmsgs).unwrap_or(0);
    if let Some(at) = stats.at {
        let secs = now.saturating_duration_since(at).as_secs_f64();
        if secs > 0.0 {
            let rate = |now: u64, before: u64| now.saturating_sub(before) as f64 / secs;
            stats.outgoing_byte_rate = rate(outgoing, stats.outgoing_bytes);
            stats.incoming_byte_rate = rate(incoming, stats.incoming_bytes);
            stats.record_send_rate = rate(sent, stats.records_sent);
            stats.request_rate = rate(requests, stats.requests);
        }
    }
    *stats = crate::metrics::ClientStats {
        reported: true,
        client_id: s.client_id.clone(),
        connections,
        outgoing_bytes: outgoing,
        incoming_bytes: incoming,
        requests,
        responses,
        records_sent: sent,
        retries,
        requests_in_flight: in_flight,
        // librdkafka measures in microseconds, the Java client's metrics in milliseconds.
        request_latency_avg_ms: rtt.value() / 1e3,
        request_latency_max_ms: rtt_max as f64 / 1e3,
        record_queue_time_avg_ms: queued.value() / 1e3,
        batch_size_avg: batch_bytes.value(),
        records_per_request_avg: batch_records.value(),
        transaction_state: s
            .eos
            .as_ref()
            .filter(|e| !e.txn_state.is_empty() && e.txn_state != "Init")
            .map(|e| {
                // (Not txn_stateage: librdkafka 2.12 reported the time since boot there, 14 hours.)
                format!(
                    "transaction {} (may send: {}), producer id {} epoch {} ({})",
                    e.txn_state, e.txn_may_enq, e.producer_id, e.producer_epoch, e.idemp_state
                )
            })
            .unwrap_or_default(),
        at: Some(now),
        ..std::mem::take(stats)
    };
}

pub fn base_config(cfg: &KafkaConfig) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set_log_level(librdkafka_log_level());
    c.set("bootstrap.servers", &cfg.bootstrap_servers)
        .set("client.id", "pgoutbox")
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("max.in.flight.requests.per.connection", "5")
        .set("partitioner", "murmur2_random")
        .set("message.timeout.ms", "0")
        .set("queue.buffering.max.kbytes", QUEUE_MAX_KBYTES)
        .set("queue.buffering.max.messages", QUEUE_MAX_MESSAGES)
        .set("linger.ms", "1")
        .set("socket.keepalive.enable", "true")
        // Connect to the advertised brokers at once: with sparse connections the idempotent producer
        // waits for its 500 ms PID timer (twice, measured) before it asks for a producer id, which
        // delayed the first event of every session by a second.
        .set("enable.sparse.connections", "false")
        // Recover like the Java client: librdkafka backs off reconnects up to 10 s and notices a
        // silently dead broker only after 60 s by default (measured in the fault suite).
        .set("reconnect.backoff.max.ms", "1000")
        .set("socket.timeout.ms", "30000")
        // The Java producer's max.request.size default (1 MiB), which bounds what Debezium delivers;
        // librdkafka's own default (1,000,000) refused records Debezium sends. `producer.max.request.size`
        // maps onto this key and overrides it.
        .set("message.max.bytes", JAVA_MAX_REQUEST_SIZE)
        // The producer metrics (`exposition`) come from librdkafka's statistics: one report every
        // STATISTICS_INTERVAL_MS, a few kilobytes of JSON.
        .set("statistics.interval.ms", STATISTICS_INTERVAL_MS);
    for (k, v) in cfg.producer_overrides.iter() {
        c.set(k, v);
    }
    c
}

/// The most verbose librdkafka level the log filter lets through (`RUST_LOG=librdkafka=debug` with
/// `producer.override.debug=...` shows librdkafka's debug contexts). rdkafka takes it from the `log`
/// crate, which pgoutbox does not use, so without this librdkafka logged errors only.
fn librdkafka_log_level() -> RDKafkaLogLevel {
    use tracing::Level;
    if tracing::enabled!(target: "librdkafka", Level::DEBUG) {
        RDKafkaLogLevel::Debug
    } else if tracing::enabled!(target: "librdkafka", Level::INFO) {
        RDKafkaLogLevel::Info
    } else if tracing::enabled!(target: "librdkafka", Level::WARN) {
        RDKafkaLogLevel::Warning
    } else {
        RDKafkaLogLevel::Error
    }
}

/// `config` with `client.id` set to `client_id` (Connect names a source task's producer
/// `connector-producer-<connector>-<task>`), unless a `producer.override.client.id` set it.
fn named(mut config: ClientConfig, cfg: &KafkaConfig, client_id: &str) -> ClientConfig {
    if cfg.producer_overrides.get("client.id").is_none() {
        config.set("client.id", client_id);
    }
    config
}

/// The Java producer's `transaction.timeout.ms` default, which Connect keeps.
pub const TRANSACTION_TIMEOUT_MS: u64 = 60_000;

/// A transactional producer's settings: `transactional.id`, and `message.timeout.ms` within
/// `transaction.timeout.ms` (librdkafka requires it; a record that cannot be delivered within the
/// transaction fails it, the transaction is aborted and the session resumes from the last committed
/// one).
pub fn transactional_config(cfg: &KafkaConfig, transactional_id: &str) -> ClientConfig {
    let mut c = base_config(cfg);
    let timeout = transaction_timeout(cfg);
    c.set("transactional.id", transactional_id)
        .set("transaction.timeout.ms", timeout.as_millis().to_string())
        .set("message.timeout.ms", timeout.as_millis().to_string());
    // The first request of a transaction that follows a commit meets CONCURRENT_TRANSACTIONS while
    // the broker still writes the commit's markers, and librdkafka retries it after
    // retry.backoff.ms (100 ms by default): every transaction took 100 ms more (measured). The Java
    // producer retries that case after 20 ms (KAFKA-5477); 10 ms here, doubling up to
    // retry.backoff.max.ms for other retries.
    if cfg.producer_overrides.get("retry.backoff.ms").is_none() {
        c.set("retry.backoff.ms", "10");
    }
    c
}

/// `transaction.timeout.ms` (a `producer.override.` key may change it).
pub fn transaction_timeout(cfg: &KafkaConfig) -> Duration {
    let ms = cfg.producer_overrides.get("transaction.timeout.ms").and_then(|v| v.trim().parse().ok());
    Duration::from_millis(ms.unwrap_or(TRANSACTION_TIMEOUT_MS))
}

impl Producer {
    /// Must be called within the Tokio runtime that will serve the producer.
    pub fn new(cfg: &KafkaConfig, client_id: &str) -> Result<Self, KafkaError> {
        Self::with_config(named(base_config(cfg), cfg, client_id))
    }

    /// A transactional producer (exactly once). [`init_transactions`](Self::init_transactions)
    /// must run before it sends.
    pub fn transactional(cfg: &KafkaConfig, transactional_id: &str, client_id: &str) -> Result<Self, KafkaError> {
        Self::with_config(named(transactional_config(cfg, transactional_id), cfg, client_id))
    }

    /// The client's figures from librdkafka's statistics, updated as reports arrive.
    pub fn stats(&self) -> crate::metrics::SharedClientStats {
        self.inner.context().stats.clone()
    }

    fn with_config(config: ClientConfig) -> Result<Self, KafkaError> {
        let inner: BaseProducer<ReportingContext> = config.create_with_context(ReportingContext {
            session: Default::default(),
            acks: Mutex::new(Vec::new()),
            warned: Mutex::new(Default::default()),
            stats: Default::default(),
        })?;
        let (wake_tx, wake) =
            pipe::pipe().map_err(|e| KafkaError::ClientCreation(format!("cannot create the wake-up pipe: {e}")))?;
        // SAFETY: the client is alive; the handle is released in MainQueue's drop, before the client.
        let queue = MainQueue(unsafe { rdkafka::bindings::rd_kafka_queue_get_main(inner.client().native_ptr()) });
        const BYTE: &[u8] = b"1";
        // SAFETY: the pipe's write end outlives the client (field order); librdkafka copies nothing
        // but writes `BYTE` (static) when the queue gets an event after having been served.
        unsafe {
            rdkafka::bindings::rd_kafka_queue_io_event_enable(
                queue.0,
                wake_tx.as_raw_fd(),
                BYTE.as_ptr().cast(),
                BYTE.len(),
            )
        };
        Ok(Producer { queue, served_at: AtomicU64::new(0), epoch: Instant::now(), inner, wake, _wake_tx: wake_tx })
    }

    /// Queues a record; librdkafka copies headers, key and value. A refused record comes back with
    /// the reason (rdkafka's own signature).
    #[allow(clippy::result_large_err)]
    pub fn send<'a>(&self, mut record: Record<'a>) -> Result<(), (KafkaError, Record<'a>)> {
        record.delivery_opaque = self.inner.context().tag(record.delivery_opaque);
        self.inner.send(record)
    }

    /// Starts a new session on this producer: from now on [`serve`](Self::serve) reports only the
    /// records sent after this call, numbered from 0 again, while what earlier sessions left queued
    /// or in flight is still delivered, in order, ahead of them.
    ///
    /// This is why a session that ends for a passing reason hands its producer to the next one
    /// instead of dropping it: a request of a dropped producer can still be in flight (the broker
    /// read it but has not answered), and land after the next producer's resends of the same
    /// events, older after newer. One idempotent producer keeps each partition's records in the
    /// order they were sent, across retries and reconnections.
    pub fn new_session(&self) {
        let s = &self.inner.context().session;
        s.store((s.load(Ordering::Relaxed) + 1) & (usize::MAX >> SEQ_BITS), Ordering::Relaxed);
        // Reports of the old session already taken from librdkafka and not served are dropped too.
        self.inner
            .context()
            .acks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|a| !matches!(a, Ack::Delivered(_) | Ack::Failed { .. }));
    }

    /// Whether librdkafka raised a fatal error on this producer: it delivers nothing more.
    pub fn is_fatal(&self) -> bool {
        self.inner.client().fatal_error().is_some()
    }

    /// Registers the transactional id with its coordinator, which fences any older producer with the
    /// same id and aborts the transaction it left open. Blocks: call it off the runtime's threads.
    pub fn init_transactions(&self, timeout: Duration) -> Result<(), KafkaError> {
        self.inner.init_transactions(timeout)
    }

    /// Opens a transaction (local: no request to the broker).
    pub fn begin_transaction(&self) -> Result<(), KafkaError> {
        self.inner.begin_transaction()
    }

    /// Delivers everything queued and commits the open transaction. Delivery reports are queued
    /// for [`serve`](Self::serve) as usual. Blocks: call it off the runtime's threads.
    pub fn commit_transaction(&self, timeout: Duration) -> Result<(), KafkaError> {
        // Deliver first, waking the broker threads every few milliseconds: a partition's records
        // wait until the coordinator registered it with the transaction, and librdkafka does not
        // wake its broker thread when that happens, so each commit waited ~100 ms for the thread's
        // next wake-up (measured). A flush wakes them (every 5 ms: every 1 ms cost 3x the CPU and no latency, measured).
        let deadline = Instant::now() + timeout;
        while self.inner.in_flight_count() > 0 && Instant::now() < deadline {
            let _ = self.inner.flush(Duration::from_millis(5));
        }
        // The commit gets what is left of `timeout` (not what the flush took: a quick flush left the
        // commit a few milliseconds, and under load it timed out, again at each retry).
        self.inner.commit_transaction(deadline.saturating_duration_since(Instant::now()))
    }

    /// Aborts the open transaction: nothing of it reaches a `read_committed` consumer. Blocks.
    pub fn abort_transaction(&self, timeout: Duration) -> Result<(), KafkaError> {
        self.inner.abort_transaction(timeout)
    }

    /// Records queued or in flight, not yet reported.
    pub fn in_flight(&self) -> i32 {
        self.inner.in_flight_count()
    }

    /// Resolves when librdkafka has events to serve, and at least every `SERVE_AT_LEAST_EVERY` in
    /// any case (as the polling thread of rdkafka's ThreadedProducer did), so that a wake-up
    /// librdkafka does not write can delay reports but never stall them.
    pub async fn ready(&self) -> io::Result<()> {
        let served = self.epoch + Duration::from_nanos(self.served_at.load(Ordering::Relaxed));
        match tokio::time::timeout_at((served + SERVE_AT_LEAST_EVERY).into(), self.wake.readable()).await {
            Ok(ready) => ready,
            Err(_) => Ok(()),
        }
    }

    /// Serves every event librdkafka has queued, on this thread, and moves the resulting reports
    /// into `out`. Call it after [`ready`](Self::ready) resolves; it never blocks.
    pub fn serve(&self, out: &mut Vec<Ack>) {
        // Empty the pipe first: an event queued after this point writes again (librdkafka writes
        // once per period between two serves) or is served by the loop below.
        let mut buf = [0u8; 64];
        while matches!(self.wake.try_read(&mut buf), Ok(n) if n > 0) {}
        // Poll at least once: a poll marks the queue served, which re-arms librdkafka's wake-up
        // write even when the queue turns out to be empty.
        loop {
            self.inner.poll(Duration::ZERO);
            // SAFETY: the queue handle is valid while `self` lives.
            if unsafe { rdkafka::bindings::rd_kafka_queue_length(self.queue.0) } == 0 {
                break;
            }
        }
        let start = out.len();
        out.append(&mut self.inner.context().acks.lock().unwrap_or_else(|e| e.into_inner()));
        for ack in &mut out[start..] {
            if let Ack::Fatal { code: code @ None, .. } = ack {
                *code = self.inner.client().fatal_error().map(|(c, _)| c);
            }
        }
        self.served_at.store(self.epoch.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }
}

/// The librdkafka record for `record`, with `opaque` for its delivery report. Headers are copied by
/// librdkafka; key and value are borrowed until `send` returns.
pub fn base_record<D: IntoOpaque>(record: &crate::outbox::OutboxRecord, opaque: D) -> BaseRecord<'_, [u8], [u8], D> {
    let mut headers = OwnedHeaders::new_with_capacity(record.headers.len());
    for h in &record.headers {
        headers = headers.insert(Header { key: &h.name, value: h.value.as_deref() });
    }
    let mut r = BaseRecord::with_opaque_to(&record.topic, opaque).timestamp(record.timestamp_ms).headers(headers);
    if let Some(k) = &record.key {
        r = r.key(&k[..]);
    }
    if let Some(v) = &record.value {
        r = r.payload(&v[..]);
    }
    if let Some(p) = record.partition {
        r = r.partition(p);
    }
    r
}

/// A client config for admin and metadata clients: the bootstrap servers and the producer's security
/// settings (a SASL/TLS cluster needs them for every client).
pub fn client_config(cfg: &KafkaConfig) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", &cfg.bootstrap_servers);
    for (k, v) in cfg.client_security.iter() {
        c.set(k, v);
    }
    // librdkafka's debug contexts, when asked for, help with every client.
    if let Some(debug) = cfg.producer_overrides.get("debug") {
        c.set("debug", debug);
    }
    c
}

/// Whether `topic` exists, as far as this client may see (the metadata of every topic it may
/// describe: a request naming a missing topic could have the broker auto-create it).
pub async fn topic_exists(cfg: &KafkaConfig, topic: &str) -> Result<bool, KafkaError> {
    let admin: AdminClient<DefaultClientContext> = client_config(cfg).create()?;
    let topic = topic.to_string();
    tokio::task::spawn_blocking(move || {
        let md = admin.inner().fetch_metadata(None, Duration::from_secs(30));
        let found = md.map(|md| md.topics().iter().any(|t| t.name() == topic && t.error().is_none()));
        drop_in_background(admin);
        found
    })
    .await
    .unwrap_or(Err(KafkaError::MetadataFetch(RDKafkaErrorCode::Fail)))
}

/// Drops an admin client on a thread of its own: the drop joins rdkafka's polling thread, which
/// sleeps in 100 ms polls, and waiting for it delayed each session's start (the offsets topic) and
/// the first event to each topic pgoutbox creates by 0.1 s.
pub(super) fn drop_in_background(admin: AdminClient<DefaultClientContext>) {
    let _ = std::thread::Builder::new().name("pgoutbox-admin-drop".into()).spawn(move || drop(admin));
}

/// Creates topics that do not exist yet (an existing topic is fine), as Connect does with
/// `topic.creation.default.*`.
pub async fn create_topics(
    cfg: &KafkaConfig,
    topics: &[&str],
    partitions: i32,
    replication: i32,
) -> Result<(), KafkaError> {
    let admin: AdminClient<DefaultClientContext> = client_config(cfg).create()?;
    let new: Vec<NewTopic<'_>> =
        topics.iter().map(|t| NewTopic::new(t, partitions, TopicReplication::Fixed(replication))).collect();
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let results = admin.create_topics(&new, &opts).await;
    drop_in_background(admin);
    for result in results? {
        match result {
            Ok(_) => {}
            Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((topic, code)) => {
                tracing::warn!(topic, error = %code, "could not create topic");
                return Err(KafkaError::AdminOp(code));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::Mean;

    /// The statistics callback runs inside the producer's poll: windows with any values (a broker
    /// away, counters near their limits) give a finite mean and never panic.
    #[test]
    fn means_of_extreme_windows_never_overflow() {
        let mut m = Mean::default();
        assert_eq!(m.value(), 0.0);
        m.add(i64::MAX, i64::MAX);
        m.add(i64::MAX, i64::MAX);
        m.add(5, -1);
        assert!(m.value().is_finite() && m.value() > 9e18, "{}", m.value());
        let mut m = Mean::default();
        m.add(2_000, 3);
        m.add(1_000, 1);
        assert_eq!(m.value(), 1_750.0);
    }
}
