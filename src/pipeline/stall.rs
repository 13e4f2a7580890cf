//! Notices deliveries that stop making progress. librdkafka retries a delivery for as long as it
//! takes (`message.timeout.ms=0`, so nothing is ever dropped), and it does so silently: a broker
//! that accepts connections but never acknowledges (a full disk, a broken storage engine, a lost
//! partition leader) would leave the relay stuck without a word. The sink reports after every serve
//! whether the oldest unacknowledged event was acknowledged (progress of other partitions does not
//! move the confirmed position, so it does not count); this says when to warn, and when to say that
//! it moved again.

use std::time::{Duration, Instant};

/// How long the oldest unacknowledged event may wait before the first warning, and the interval
/// between warnings while it lasts.
pub const WARN_AFTER: Duration = Duration::from_secs(30);

#[derive(Debug, PartialEq)]
pub enum Stall {
    /// The oldest unacknowledged event has waited this long.
    Stalled(Duration),
    /// The oldest event of a stall that was warned about was acknowledged after waiting this long.
    Resumed(Duration),
}

pub struct StallWatch {
    every: Duration,
    /// Since when the oldest unacknowledged event has waited (`None`: nothing waits).
    since: Option<Instant>,
    /// When the last warning was given for the current stall.
    warned: Option<Instant>,
}

impl StallWatch {
    pub fn new(every: Duration) -> Self {
        StallWatch { every, since: None, warned: None }
    }

    /// After serving the producer: `progressed` if the oldest unacknowledged event was acknowledged,
    /// `waiting` if events remain unacknowledged. Returns what to log, if anything.
    pub fn observe(&mut self, now: Instant, progressed: bool, waiting: bool) -> Option<Stall> {
        if progressed || !waiting {
            let resumed = match (self.warned, self.since) {
                (Some(_), Some(since)) => Some(Stall::Resumed(now.saturating_duration_since(since))),
                _ => None,
            };
            self.since = waiting.then_some(now);
            self.warned = None;
            return resumed;
        }
        let since = *self.since.get_or_insert(now);
        let waited = now.saturating_duration_since(since);
        let due = match self.warned {
            None => waited >= self.every,
            Some(last) => now.saturating_duration_since(last) >= self.every,
        };
        if due {
            self.warned = Some(now);
            Some(Stall::Stalled(waited))
        } else {
            None
        }
    }

    /// How long the oldest unacknowledged event has waited, as of `now` (zero if none waits).
    pub fn waited(&self, now: Instant) -> Duration {
        self.since.map(|s| now.saturating_duration_since(s)).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn warns_once_per_interval_while_nothing_is_acknowledged() {
        let t0 = Instant::now();
        let mut w = StallWatch::new(30 * S);
        assert_eq!(w.observe(t0, false, true), None);
        assert_eq!(w.observe(t0 + 29 * S, false, true), None);
        assert_eq!(w.waited(t0 + 29 * S), 29 * S);
        assert_eq!(w.observe(t0 + 30 * S, false, true), Some(Stall::Stalled(30 * S)));
        assert_eq!(w.observe(t0 + 45 * S, false, true), None);
        assert_eq!(w.observe(t0 + 60 * S, false, true), Some(Stall::Stalled(60 * S)));
        assert_eq!(w.observe(t0 + 61 * S, true, true), Some(Stall::Resumed(61 * S)));
        // A new wait starts at the acknowledgement.
        assert_eq!(w.observe(t0 + 90 * S, false, true), None);
        assert_eq!(w.observe(t0 + 91 * S, false, true), Some(Stall::Stalled(30 * S)));
    }

    #[test]
    fn steady_acknowledgements_and_idle_time_never_warn() {
        let t0 = Instant::now();
        let mut w = StallWatch::new(30 * S);
        for i in 0..100 {
            assert_eq!(w.observe(t0 + i * S, true, true), None);
        }
        // Nothing waits: however long the quiet, no warning, and no wait is counted.
        assert_eq!(w.observe(t0 + 100 * S, true, false), None);
        assert_eq!(w.observe(t0 + 500 * S, false, false), None);
        assert_eq!(w.waited(t0 + 500 * S), Duration::ZERO);
        // Events sent after a long idle time are measured from when they are first seen waiting.
        assert_eq!(w.observe(t0 + 501 * S, false, true), None);
        assert_eq!(w.observe(t0 + 530 * S, false, true), None);
        assert_eq!(w.observe(t0 + 531 * S, false, true), Some(Stall::Stalled(30 * S)));
    }

    #[test]
    fn a_stall_that_ends_unwarned_says_nothing() {
        let t0 = Instant::now();
        let mut w = StallWatch::new(30 * S);
        assert_eq!(w.observe(t0, false, true), None);
        assert_eq!(w.observe(t0 + 20 * S, true, false), None);
        // The wait that ends with everything acknowledged is over too.
        assert_eq!(w.observe(t0 + 40 * S, false, true), None);
        assert_eq!(w.observe(t0 + 69 * S, false, true), None);
    }
}
