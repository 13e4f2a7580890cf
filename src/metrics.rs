//! Counters and the commit-to-acknowledgement latency of the relay, for the `/metrics`, `/health` and
//! `/latency` endpoints (see `http`).
//!
//! Latency is measured per transaction with outbox events: from its commit time (pgoutput's Begin
//! carries it, on the server's clock) to the moment the broker acknowledged the last of its events and
//! everything before them, i.e. when the checkpoint could confirm it. The first part of that path,
//! from the commit to the moment the relay has read the transaction's Commit message (decoding and
//! transfer by the server), is measured too, so the `/latency` window shows where the time goes.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Mutex;

mod lag;
pub use lag::{LagFigures, LagStatistics};

/// What the relay is doing, for the health endpoints: liveness (`/health`) holds in every state, as
/// a standby or a long snapshot is not a dead process; readiness (`/ready`) only while streaming.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum RelayState {
    Starting = 0,
    /// Another instance holds the slot; this one takes over when it is released.
    StandingBy = 1,
    Snapshotting = 2,
    Streaming = 3,
    /// A session ended on a transient failure; waiting to reconnect.
    Reconnecting = 4,
}

impl RelayState {
    pub fn name(self) -> &'static str {
        match self {
            RelayState::Starting => "starting",
            RelayState::StandingBy => "standing_by",
            RelayState::Snapshotting => "snapshotting",
            RelayState::Streaming => "streaming",
            RelayState::Reconnecting => "reconnecting",
        }
    }

    fn from_u8(v: u8) -> Self {
        match v {
            1 => RelayState::StandingBy,
            2 => RelayState::Snapshotting,
            3 => RelayState::Streaming,
            4 => RelayState::Reconnecting,
            _ => RelayState::Starting,
        }
    }
}

#[derive(Default)]
pub struct Metrics {
    pub events_acked: AtomicU64,
    pub transactions_confirmed: AtomicU64,
    /// Exactly once: Kafka transactions committed.
    pub kafka_transactions: AtomicU64,
    pub confirmed_lsn: AtomicU64,
    pub received_lsn: AtomicU64,
    pub sessions: AtomicU64,
    /// Times a topic this connector produces to was seen with another partition count than when
    /// it first produced to it (see `pipeline::partitions`).
    pub partition_changes: AtomicU64,
    /// How long the oldest unacknowledged event has waited (0 when none waits).
    pub unacknowledged_wait_ms: AtomicU64,
    /// The slot's lag in time: how long ago the oldest transaction read but not yet confirmed
    /// committed, in milliseconds (0 when everything read is confirmed).
    pub slot_lag_ms: AtomicU64,
    /// Outbox events read from the stream (Debezium's TotalNumberOfEventsSeen).
    pub events_seen: AtomicU64,
    /// Transactions read from the stream with a change Debezium's event counters count (its
    /// NumberOfCommittedTransactions: a transaction of skipped operations only is not one).
    pub transactions_seen: AtomicU64,
    /// When the last event was read, in milliseconds since the epoch (0: none yet).
    pub last_event_ms: AtomicU64,
    /// How far behind its commit the last transaction with events was read, in milliseconds
    /// (Debezium's MilliSecondsBehindSource).
    pub behind_source_ms: AtomicU64,
    /// Its minimum, maximum, average and percentiles over every event since the task started
    /// (Debezium 3.6's MilliSecondsBehindSource{Min,Max,Average}Value and P50/P95/P99).
    pub behind_source_stats: Mutex<LagStatistics>,
    /// Rows the Event Router could not turn into a record, skipped under errors.tolerance=all.
    pub route_errors: AtomicU64,
    /// Records the broker refused for good, skipped under errors.tolerance=all.
    pub delivery_errors: AtomicU64,
    /// Dead letters queued for the dead-letter topic.
    pub dead_letters: AtomicU64,
    /// Outbox events committed but not yet acknowledged by the broker, as far as the relay can
    /// know (see `pipeline::backlog`).
    pub unpublished_events: AtomicU64,
    /// The age of the oldest of them, in milliseconds (0: none).
    pub oldest_unpublished_ms: AtomicU64,
    /// 1 while that age is past `pgoutbox.stall.threshold.ms`.
    pub stalled: AtomicU8,
    /// Outbox rows deleted or archived by pruning (`pipeline::prune`).
    pub pruned_rows: AtomicU64,
    /// Changes the connector itself filtered out, as Debezium's NumberOfEventsFiltered counts them:
    /// changes of tables the lists do not capture that the publication still sent, and logical
    /// decoding messages left out. What transforms drop (the Event Router's ignored UPDATEs and
    /// DELETEs, a Filter) is not counted: in Connect that happens after the connector.
    pub events_filtered: AtomicU64,
    /// INSERTs, UPDATEs and DELETEs read, filtered ones included and skipped operations
    /// (`skipped.operations`) left out (Debezium's TotalNumberOf{Create,Update,Delete}EventsSeen).
    pub inserts_seen: AtomicU64,
    pub updates_seen: AtomicU64,
    pub deletes_seen: AtomicU64,
    /// Records the connector's task produced before transforms, as Connect's source-record-poll
    /// counts them: a snapshot row, a captured INSERT, UPDATE or logical decoding message one each,
    /// a DELETE two (its change event and its tombstone, Debezium's `tombstones.on.delete=true`),
    /// a polled row one.
    pub records_polled: AtomicU64,
    /// Logical decoding messages the prefix lists leave out: Debezium 3.7 counts them as seen and
    /// filtered.
    pub messages_filtered: AtomicU64,
    /// Logical decoding messages read (Debezium 3.7's TotalNumberOfLogicalMessageEventsSeen).
    pub messages_seen: AtomicU64,
    /// When the task last met an error under `errors.tolerance` (Connect's last-error-timestamp),
    /// in milliseconds since the epoch (0: none).
    pub last_error_ms: AtomicU64,
    /// Those errors met with `errors.log.enable=true` (Connect's total-errors-logged).
    pub errors_logged: AtomicU64,
    /// How long each write of the connector's offset took (Connect's offset-commit time), over
    /// Connect's metrics window.
    pub offset_commits: Mutex<Window>,
    /// Records read and not yet acknowledged, as sampled at each batch and each scrape (Connect's
    /// source-record-active-count-avg and -max).
    pub active_counts: Mutex<Window>,
    /// Records written by the connector's task since it started: batches polled from the source
    /// and the time each took, for Connect's source-task and connector-task metrics.
    pub batches: Mutex<Batches>,
    /// The initial snapshot (Debezium's snapshot metrics).
    pub snapshot: Mutex<Snapshot>,
    /// The producer's figures from librdkafka's statistics (the current producer's).
    pub producer: Mutex<Option<SharedClientStats>>,
    /// The bounded queue between the source and the sink: its capacity and what is free in it, in
    /// batches (Debezium's QueueTotalCapacity / QueueRemainingCapacity count records).
    queue: Mutex<Option<QueueProbe>>,
    /// How long the task has been in each state, for Connect's running and pause ratios.
    pub task_clock: Mutex<TaskClock>,
    /// Records polled and written as sampled at each scrape, for Connect's per-second rates.
    pub throughput: Mutex<Throughput>,
    state: AtomicU8,
    latency: Mutex<Latencies>,
    /// Records and bytes (key, value and headers) handed to the producer, per topic.
    topics: Mutex<std::collections::HashMap<std::sync::Arc<str>, (u64, u64)>>,
}

#[derive(Default)]
struct Latencies {
    total: Histogram,
    /// Since the last `/latency` read.
    window: Histogram,
    /// Commit to the relay's receipt of the Commit message, since the last `/latency` read.
    received_window: Histogram,
}

impl Metrics {
    pub fn set_state(&self, state: RelayState) {
        self.state.store(state as u8, Ordering::Relaxed);
        let task = match state {
            RelayState::Starting | RelayState::StandingBy => "UNASSIGNED",
            _ => "RUNNING",
        };
        self.task_clock.lock().unwrap_or_else(|e| e.into_inner()).tick(task, std::time::Instant::now());
    }

    pub fn state(&self) -> RelayState {
        RelayState::from_u8(self.state.load(Ordering::Relaxed))
    }

    pub fn record_latency_us(&self, us: u64) {
        if let Ok(mut l) = self.latency.lock() {
            l.total.record(us);
            l.window.record(us);
        }
    }

    /// Commit to receipt by the relay, for a transaction with events.
    /// `events` events of one transaction read `ms` milliseconds after its commit.
    pub fn record_behind_source(&self, ms: u64, events: u64) {
        self.behind_source_ms.store(ms, Ordering::Relaxed);
        if let Ok(mut s) = self.behind_source_stats.lock() {
            s.record(ms, events);
        }
    }

    pub fn behind_source_figures(&self) -> Option<LagFigures> {
        self.behind_source_stats.lock().ok().and_then(|s| s.figures())
    }

    pub fn record_received_us(&self, us: u64) {
        if let Ok(mut l) = self.latency.lock() {
            l.received_window.record(us);
        }
    }

    /// Quantiles since the previous call, which starts a new window: commit to acknowledgement, and
    /// commit to receipt.
    pub fn take_window(&self) -> (Summary, Summary) {
        match self.latency.lock() {
            Ok(mut l) => (std::mem::take(&mut l.window).summary(), std::mem::take(&mut l.received_window).summary()),
            Err(_) => Default::default(),
        }
    }

    /// Counts records handed to the producer for `topic`.
    pub fn record_sent(&self, topic: &std::sync::Arc<str>, records: u64, bytes: u64) {
        if let Ok(mut t) = self.topics.lock() {
            let entry = match t.get_mut(topic) {
                Some(e) => e,
                None => t.entry(topic.clone()).or_default(),
            };
            entry.0 += records;
            entry.1 += bytes;
        }
    }

    /// Records and bytes sent per topic, by topic name.
    pub fn sent_by_topic(&self) -> Vec<(std::sync::Arc<str>, u64, u64)> {
        let mut out: Vec<_> = match self.topics.lock() {
            Ok(t) => t.iter().map(|(k, (n, b))| (k.clone(), *n, *b)).collect(),
            Err(_) => Vec::new(),
        };
        out.sort();
        out
    }

    /// The names of the topics records were handed to the producer for, sorted.
    pub fn topics_sent(&self) -> Vec<String> {
        self.sent_by_topic().into_iter().map(|(t, ..)| t.to_string()).collect()
    }

    /// Commit-to-acknowledgement latency since start as Prometheus histogram buckets: the sum and
    /// count in microseconds, and per bucket (upper bounds in microseconds, ascending) the samples in
    /// it and not in the one before; the last count is of the samples above every bound.
    pub fn latency_buckets(&self, bounds_us: &[u64]) -> (u64, u64, Vec<u64>) {
        match self.latency.lock() {
            Ok(l) => l.total.buckets(bounds_us),
            Err(_) => (0, 0, vec![0; bounds_us.len() + 1]),
        }
    }

    pub fn total(&self) -> Summary {
        self.latency.lock().map(|l| l.total.summary()).unwrap_or_default()
    }

    pub fn get(a: &AtomicU64) -> u64 {
        a.load(Ordering::Relaxed)
    }

    /// Where the queue between source and sink is read from: `probe` answers its capacity and free
    /// room, `None` once it is gone.
    pub fn set_queue(&self, probe: impl Fn() -> Option<(usize, usize)> + Send + Sync + 'static) {
        *self.queue.lock().unwrap_or_else(|e| e.into_inner()) = Some(Box::new(probe));
    }

    /// The queue's capacity and free room, while a session runs.
    pub fn queue(&self) -> Option<(usize, usize)> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner()).as_ref().and_then(|probe| probe())
    }

    /// The current producer's statistics, once it reported any.
    pub fn producer_stats(&self) -> Option<ClientStats> {
        let shared = self.producer.lock().unwrap_or_else(|e| e.into_inner()).clone()?;
        let stats = shared.lock().unwrap_or_else(|e| e.into_inner()).clone();
        stats.reported.then_some(stats)
    }

    /// Records read and not yet acknowledged, now; sampled into `active_counts`.
    pub fn sample_active_count(&self, now: std::time::Instant) -> u64 {
        let active = Self::get(&self.events_seen).saturating_sub(Self::get(&self.events_acked));
        self.active_counts.lock().unwrap_or_else(|e| e.into_inner()).record(active as f64, now);
        active
    }

    /// An error met under `errors.tolerance=all`, now; `logged` under `errors.log.enable=true`.
    pub fn record_error(&self, logged: bool) {
        if logged {
            self.errors_logged.fetch_add(1, Ordering::Relaxed);
        }
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        self.last_error_ms.store(now.as_millis() as u64, Ordering::Relaxed);
    }

    /// A write of the connector's offset that took `took`.
    pub fn record_offset_commit(&self, took: std::time::Duration) {
        let mut w = self.offset_commits.lock().unwrap_or_else(|e| e.into_inner());
        w.record(took.as_secs_f64() * 1e3, std::time::Instant::now());
    }

    /// A batch of `records` read from the source in `took`, handed to the sink.
    pub fn record_batch(&self, records: u64, took: std::time::Duration) {
        self.sample_active_count(std::time::Instant::now());
        let mut b = self.batches.lock().unwrap_or_else(|e| e.into_inner());
        b.count += 1;
        b.records += records;
        b.max_records = b.max_records.max(records);
        let ms = took.as_secs_f64() * 1e3;
        b.time_sum_ms += ms;
        b.time_max_ms = b.time_max_ms.max(ms);
    }
}

/// The source's batches since the task started.
#[derive(Debug, Default, Clone)]
pub struct Batches {
    pub count: u64,
    pub records: u64,
    pub max_records: u64,
    pub time_sum_ms: f64,
    pub time_max_ms: f64,
}

/// The initial snapshot, as Debezium's snapshot MBean reports it.
#[derive(Debug, Default, Clone)]
pub struct Snapshot {
    /// When it started and ended, in milliseconds since the epoch (0: not yet).
    pub started_ms: u64,
    pub ended_ms: u64,
    pub completed: bool,
    pub aborted: bool,
    /// The task started without one (an existing slot, or `snapshot.mode=no_data`).
    pub skipped: bool,
    pub total_tables: u64,
    pub remaining_tables: u64,
    /// Rows read per table (`schema.table`), in the order the tables were read.
    pub rows_scanned: Vec<(String, u64)>,
    /// Records the snapshot produced.
    pub events: u64,
}

/// A Kafka client's figures from librdkafka's statistics callback, kept as the Java clients' metrics
/// name them (see `exposition`): totals since the client started, averages over librdkafka's last
/// statistics window, rates over the interval between the last two reports.
#[derive(Debug, Default, Clone)]
pub struct ClientStats {
    /// At least one report arrived.
    pub reported: bool,
    pub client_id: String,
    pub connections: u64,
    pub outgoing_bytes: u64,
    pub incoming_bytes: u64,
    pub requests: u64,
    pub responses: u64,
    pub records_sent: u64,
    pub retries: u64,
    pub requests_in_flight: u64,
    pub request_latency_avg_ms: f64,
    pub request_latency_max_ms: f64,
    pub record_queue_time_avg_ms: f64,
    pub batch_size_avg: f64,
    pub records_per_request_avg: f64,
    pub outgoing_byte_rate: f64,
    pub incoming_byte_rate: f64,
    pub record_send_rate: f64,
    pub request_rate: f64,
    /// A transactional producer's state as librdkafka last reported it (`txn_state`, `idemp_state`,
    /// producer id and epoch), for the stall warning; empty otherwise.
    pub transaction_state: String,
    /// When the last report arrived, for the rates.
    pub at: Option<std::time::Instant>,
}

pub type SharedClientStats = std::sync::Arc<Mutex<ClientStats>>;

/// Answers the queue's capacity and free room while it exists.
type QueueProbe = Box<dyn Fn() -> Option<(usize, usize)> + Send + Sync>;

/// Counts sampled over time, for rates over a window as Connect's metrics keep them (its samples
/// span 30 seconds by default: `metrics.sample.window.ms` times `metrics.num.samples`).
#[derive(Debug, Default)]
pub struct Throughput {
    samples: std::collections::VecDeque<(std::time::Instant, [u64; 2])>,
}

/// The window Connect's rates cover.
pub const RATE_WINDOW: std::time::Duration = std::time::Duration::from_secs(30);

impl Throughput {
    /// Adds `counts` at `now`; returns each count's rate per second over the window (0 until two
    /// samples are at least a second apart).
    pub fn rates(&mut self, counts: [u64; 2], now: std::time::Instant) -> [f64; 2] {
        self.samples.push_back((now, counts));
        while self.samples.len() > 2 && self.samples.get(1).is_some_and(|(t, _)| now.duration_since(*t) >= RATE_WINDOW)
        {
            self.samples.pop_front();
        }
        let Some((first, before)) = self.samples.front() else { return [0.0; 2] };
        let secs = now.duration_since(*first).as_secs_f64();
        if secs < 1.0 {
            return [0.0; 2];
        }
        [0, 1].map(|i| counts[i].saturating_sub(before[i]) as f64 / secs)
    }
}

/// Values over Connect's sample window, for its `-avg` and `-max` metrics: Connect keeps two samples
/// of `metrics.sample.window.ms` (30 s), so a value counts for 30 to 60 seconds; here for 60 (to 61).
/// Values are kept per second, so the window holds at most about 61 buckets however many values
/// are recorded (one per batch, on the hot path).
#[derive(Debug, Default, Clone)]
pub struct Window {
    buckets: std::collections::VecDeque<Bucket>,
}

/// The values recorded in one second: their sum, their number and the largest.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    start: std::time::Instant,
    sum: f64,
    count: u64,
    max: f64,
}

impl Window {
    const SPAN: std::time::Duration = std::time::Duration::from_secs(60);
    const BUCKET: std::time::Duration = std::time::Duration::from_secs(1);

    pub fn record(&mut self, v: f64, now: std::time::Instant) {
        match self.buckets.back_mut() {
            Some(b) if now.duration_since(b.start) < Self::BUCKET => {
                b.sum += v;
                b.count += 1;
                b.max = b.max.max(v);
            }
            _ => self.buckets.push_back(Bucket { start: now, sum: v, count: 1, max: v }),
        }
        self.expire(now);
    }

    fn expire(&mut self, now: std::time::Instant) {
        while self.buckets.front().is_some_and(|b| now.duration_since(b.start) > Self::SPAN) {
            self.buckets.pop_front();
        }
    }

    /// The average and the maximum of the values in the window; NaN for both when it holds none,
    /// as Connect's stats give them.
    pub fn avg_max(&mut self, now: std::time::Instant) -> (f64, f64) {
        self.expire(now);
        let count: u64 = self.buckets.iter().map(|b| b.count).sum();
        if count == 0 {
            return (f64::NAN, f64::NAN);
        }
        let sum: f64 = self.buckets.iter().map(|b| b.sum).sum();
        let max = self.buckets.iter().map(|b| b.max).fold(f64::NEG_INFINITY, f64::max);
        (sum / count as f64, max)
    }
}

/// Time spent per task state since the task started (Connect's `running-ratio` and `pause-ratio`):
/// each scrape and each change of state adds the time since the previous one to the state then.
#[derive(Debug, Clone)]
pub struct TaskClock {
    started: std::time::Instant,
    last: std::time::Instant,
    state: String,
    running: std::time::Duration,
    paused: std::time::Duration,
}

impl Default for TaskClock {
    fn default() -> Self {
        let now = std::time::Instant::now();
        TaskClock {
            started: now,
            last: now,
            state: "UNASSIGNED".into(),
            running: Default::default(),
            paused: Default::default(),
        }
    }
}

impl TaskClock {
    /// The task is in `state` (Connect's name) at `now`: the time since the last call goes to the
    /// state then. Returns the running and pause ratios since the task started.
    pub fn tick(&mut self, state: &str, now: std::time::Instant) -> (f64, f64) {
        let spent = now.saturating_duration_since(self.last);
        match self.state.as_str() {
            "RUNNING" => self.running += spent,
            "PAUSED" => self.paused += spent,
            _ => {}
        }
        self.last = now;
        if self.state != state {
            self.state = state.to_string();
        }
        let total = now.saturating_duration_since(self.started).as_secs_f64();
        if total <= 0.0 {
            return (f64::from(u8::from(state == "RUNNING")), f64::from(u8::from(state == "PAUSED")));
        }
        (self.running.as_secs_f64() / total, self.paused.as_secs_f64() / total)
    }
}

#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Summary {
    pub count: u64,
    pub p50_us: u64,
    pub p90_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
    pub sum_us: u64,
}

/// A log-linear histogram of microseconds: 32 sub-buckets per power of two (about 3% resolution),
/// fixed size, no allocation per sample.
pub struct Histogram {
    counts: Vec<u64>,
    count: u64,
    max: u64,
    sum: u64,
}

const SUB: u32 = 32;
const BUCKETS: usize = (64 * SUB) as usize;

impl Default for Histogram {
    fn default() -> Self {
        Histogram { counts: vec![0; BUCKETS], count: 0, max: 0, sum: 0 }
    }
}

impl Histogram {
    fn index(v: u64) -> usize {
        if v < u64::from(SUB) {
            return v as usize;
        }
        let exp = 63 - v.leading_zeros(); // >= 5
        let mantissa = (v >> (exp - 5)) as u32 & (SUB - 1);
        ((exp - 4) * SUB + mantissa) as usize
    }

    /// The upper bound of a bucket (the value reported for samples in it).
    fn upper(index: usize) -> u64 {
        let i = index as u32;
        if i < SUB {
            return u64::from(i);
        }
        let exp = i / SUB + 4;
        let mantissa = u128::from((i % SUB) | SUB);
        u64::try_from(((mantissa + 1) << (exp - 5)) - 1).unwrap_or(u64::MAX)
    }

    pub fn record(&mut self, v: u64) {
        self.counts[Self::index(v)] += 1;
        self.count += 1;
        self.max = self.max.max(v);
        self.sum = self.sum.saturating_add(v);
    }

    pub fn quantile(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = ((q * self.count as f64).ceil() as u64).clamp(1, self.count);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Self::upper(i).min(self.max);
            }
        }
        self.max
    }

    /// See [`Metrics::latency_buckets`]. A fine bucket counts in the first bound at or above its
    /// upper value, so a sample up to ~3% below a bound may count in the next bucket up: a bound
    /// never counts a sample above it.
    fn buckets(&self, bounds_us: &[u64]) -> (u64, u64, Vec<u64>) {
        let mut out = vec![0; bounds_us.len() + 1];
        for (i, &c) in self.counts.iter().enumerate().filter(|(_, c)| **c > 0) {
            let at = bounds_us.iter().position(|&b| Self::upper(i).min(self.max) <= b).unwrap_or(bounds_us.len());
            out[at] += c;
        }
        (self.sum, self.count, out)
    }

    pub fn summary(&self) -> Summary {
        Summary {
            count: self.count,
            p50_us: self.quantile(0.5),
            p90_us: self.quantile(0.9),
            p99_us: self.quantile(0.99),
            p999_us: self.quantile(0.999),
            max_us: self.max,
            sum_us: self.sum,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_keeps_a_bucket_per_second_and_forgets_after_a_minute() {
        let t0 = std::time::Instant::now();
        let mut w = Window::default();
        assert!(w.avg_max(t0).0.is_nan() && w.avg_max(t0).1.is_nan(), "nothing recorded: NaN, as Connect's");
        for i in 0..10_000 {
            w.record((i % 4) as f64, t0 + std::time::Duration::from_micros(i));
        }
        w.record(9.0, t0 + std::time::Duration::from_secs(2));
        assert_eq!(w.buckets.len(), 2, "values within a second share one bucket");
        let (avg, max) = w.avg_max(t0 + std::time::Duration::from_secs(3));
        assert_eq!(max, 9.0);
        assert!((avg - (15_000.0 + 9.0) / 10_001.0).abs() < 1e-9, "{avg}");
        let (avg, max) = w.avg_max(t0 + std::time::Duration::from_secs(61));
        assert_eq!((avg, max), (9.0, 9.0), "the first second's values are gone");
        assert!(w.avg_max(t0 + std::time::Duration::from_secs(70)).0.is_nan());
    }

    #[test]
    fn histogram_quantiles_are_within_three_percent() {
        let mut h = Histogram::default();
        for v in 1..=100_000u64 {
            h.record(v);
        }
        for (q, want) in [(0.5, 50_000.0), (0.99, 99_000.0), (0.999, 99_900.0)] {
            let got = h.quantile(q) as f64;
            assert!((got - want).abs() / want < 0.03, "q{q}: {got} vs {want}");
        }
        assert_eq!(h.summary().max_us, 100_000);
        assert_eq!(h.quantile(0.0001), 10);
    }

    #[test]
    fn histogram_buckets_cover_every_value() {
        for v in [0u64, 1, 31, 32, 33, 63, 64, 1000, 1 << 40, u64::MAX] {
            let i = Histogram::index(v);
            assert!(i < BUCKETS);
            assert!(Histogram::upper(i) >= v, "{v}");
        }
    }

    /// Connect's running and pause ratios: the share of the task's life spent in each state.
    #[test]
    fn task_ratios_are_shares_of_the_time_since_the_task_started() {
        let t0 = std::time::Instant::now();
        let mut clock = TaskClock { started: t0, last: t0, state: "UNASSIGNED".into(), ..TaskClock::default() };
        let at = |s: u64| t0 + std::time::Duration::from_secs(s);
        clock.tick("RUNNING", at(1));
        clock.tick("PAUSED", at(7));
        let (running, paused) = clock.tick("RUNNING", at(9));
        assert!((running - 6.0 / 9.0).abs() < 1e-9 && (paused - 2.0 / 9.0).abs() < 1e-9, "{running} {paused}");
        let (running, _) = clock.tick("RUNNING", at(10));
        assert!((running - 0.7).abs() < 1e-9, "{running}");
    }

    /// Rates over Connect's 30-second window: older samples leave it.
    #[test]
    fn rates_cover_the_last_window() {
        let t0 = std::time::Instant::now();
        let at = |s: u64| t0 + std::time::Duration::from_secs(s);
        let mut t = Throughput::default();
        assert_eq!(t.rates([0, 0], at(0)), [0.0, 0.0]);
        assert_eq!(t.rates([100, 50], at(10)), [10.0, 5.0]);
        t.rates([400, 50], at(35));
        // The sample at 0 s left the window; the one at 10 s is the oldest kept.
        assert_eq!(t.rates([700, 50], at(40)), [20.0, 0.0]);
    }

    #[test]
    fn windows_reset_on_read() {
        let m = Metrics::default();
        m.record_latency_us(5);
        assert_eq!(m.take_window().0.count, 1);
        assert_eq!(m.take_window().0.count, 0);
        assert_eq!(m.total().count, 1);
    }
}
