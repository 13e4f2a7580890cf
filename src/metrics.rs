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
    /// Transactions read from the stream (Debezium's NumberOfCommittedTransactions).
    pub transactions_seen: AtomicU64,
    /// When the last event was read, in milliseconds since the epoch (0: none yet).
    pub last_event_ms: AtomicU64,
    /// How far behind its commit the last transaction with events was read, in milliseconds
    /// (Debezium's MilliSecondsBehindSource).
    pub behind_source_ms: AtomicU64,
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

    #[test]
    fn windows_reset_on_read() {
        let m = Metrics::default();
        m.record_latency_us(5);
        assert_eq!(m.take_window().0.count, 1);
        assert_eq!(m.take_window().0.count, 0);
        assert_eq!(m.total().count, 1);
    }
}
