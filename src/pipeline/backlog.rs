//! What is committed but not yet published, for both relays, and when that means a stall.
//!
//! The polling relay counts the unpublished rows in the table itself, through the partial index on
//! them, and dates the oldest (`pipeline::polling`). The log-tailing relay knows only what it has
//! decoded: the events read but not yet acknowledged, and the age of the oldest transaction read but
//! not yet confirmed. WAL the server has not decoded yet cannot be counted in events; it shows as the
//! slot's lag in bytes (`pgoutbox_slot_lag_bytes`).
//!
//! A stall is the oldest unpublished event older than `pgoutbox.stall.threshold.ms` while the relay
//! runs: logged when it starts and ends, exported as `pgoutbox_outbox_stalled`, and answered on
//! `/health` with 503.

use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::metrics::Metrics;

pub struct Backlog {
    threshold: Duration,
    stalled: bool,
}

impl Backlog {
    pub fn new(threshold: Duration) -> Self {
        Backlog { threshold, stalled: false }
    }

    /// Records the current backlog: `count` events, the oldest `oldest` old.
    pub fn report(&mut self, metrics: &Metrics, count: u64, oldest: Duration) {
        metrics.unpublished_events.store(count, Ordering::Relaxed);
        metrics.oldest_unpublished_ms.store(oldest.as_millis() as u64, Ordering::Relaxed);
        let stalled = !self.threshold.is_zero() && count > 0 && oldest > self.threshold;
        if stalled != self.stalled {
            if stalled {
                tracing::warn!(
                    unpublished = count,
                    oldest_s = oldest.as_secs(),
                    threshold_s = self.threshold.as_secs(),
                    "stalled: the oldest unpublished outbox event is older than pgoutbox.stall.threshold.ms; check the broker and the errors above (the relay keeps retrying)"
                );
            } else {
                tracing::info!(
                    unpublished = count,
                    "no longer stalled: the oldest unpublished event is within pgoutbox.stall.threshold.ms"
                );
            }
            self.stalled = stalled;
        }
        metrics.stalled.store(u8::from(stalled), Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stall_is_an_old_backlog_not_a_large_one() {
        let m = Metrics::default();
        let mut b = Backlog::new(Duration::from_secs(60));
        b.report(&m, 100_000, Duration::from_secs(5));
        assert_eq!(m.stalled.load(Ordering::Relaxed), 0);
        b.report(&m, 1, Duration::from_secs(61));
        assert_eq!(m.stalled.load(Ordering::Relaxed), 1);
        assert_eq!(m.oldest_unpublished_ms.load(Ordering::Relaxed), 61_000);
        b.report(&m, 0, Duration::ZERO);
        assert_eq!(m.stalled.load(Ordering::Relaxed), 0);
        assert_eq!(m.unpublished_events.load(Ordering::Relaxed), 0);
        let mut off = Backlog::new(Duration::ZERO);
        off.report(&m, 1, Duration::from_secs(3600));
        assert_eq!(m.stalled.load(Ordering::Relaxed), 0, "threshold 0 turns stall detection off");
    }
}
