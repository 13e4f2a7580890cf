//! Exactly once: where the sink ends its Kafka transactions (`transaction.boundary`), and the
//! offset record each one carries.
//!
//! A Kafka transaction ends only where the stream's position is known exactly: after a commit, or
//! after an event followed by its position inside a large PostgreSQL transaction (the reader sends
//! one after every event when exactly once is on). Every boundary mode also ends a transaction
//! that grew past [`MAX_EVENTS`] or [`MAX_BYTES`], or has been open for half of
//! `transaction.timeout.ms`, so a transaction of a million rows becomes several Kafka transactions
//! and none is aborted by the broker for taking too long.

use std::time::{Duration, Instant};

use crate::config::exactly_once::{Boundary, ExactlyOnce};

/// Events per Kafka transaction before one ends inside a PostgreSQL transaction.
/// `PGOUTBOX_TXN_MAX_EVENTS` lowers it (tests).
pub const MAX_EVENTS: u64 = 200_000;
/// Bytes of records per Kafka transaction before one ends inside a PostgreSQL transaction.
pub const MAX_BYTES: u64 = 256 << 20;
/// `poll`: a transaction also ends at the first PostgreSQL commit after this long, so that a stream
/// that never runs dry (catching up, or a sustained high rate) still makes its events visible
/// every two seconds. Each commit drains the producer first: at 500 ms catching up ran at 0.72-0.75x
/// of at least once, without this bound at 0.87x (measured, `pgoutbox-bench --exactly-once`).
pub const POLL_MAX_AGE: Duration = Duration::from_secs(2);

/// The state of the sink's open Kafka transaction.
#[derive(Debug)]
pub struct Transactions {
    boundary: Boundary,
    /// Half of `transaction.timeout.ms`: a transaction open this long ends at the next point.
    max_age: Duration,
    max_events: u64,
    /// When the open transaction began; `None` when none is open.
    began: Option<Instant>,
    events: u64,
    bytes: u64,
    /// Whether the position of everything handed over is known exactly (after a commit, or after an
    /// event's position): a transaction can end here.
    at_point: bool,
    /// Whether the last point was a PostgreSQL commit (not inside a transaction).
    at_commit: bool,
}

/// Why a transaction ends now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// `transaction.boundary` says so.
    Boundary,
    /// It grew too large or too old.
    Size,
}

impl Transactions {
    pub fn new(eos: &ExactlyOnce, transaction_timeout: Duration) -> Self {
        let max_events =
            std::env::var("PGOUTBOX_TXN_MAX_EVENTS").ok().and_then(|v| v.parse().ok()).unwrap_or(MAX_EVENTS);
        Transactions {
            boundary: eos.boundary,
            max_age: transaction_timeout / 2,
            max_events,
            began: None,
            events: 0,
            bytes: 0,
            at_point: true,
            at_commit: true,
        }
    }

    pub fn is_open(&self) -> bool {
        self.began.is_some()
    }

    /// An event is about to be sent; `true` when a transaction must begin first.
    pub fn event(&mut self, bytes: usize, now: Instant) -> bool {
        let begin = self.began.is_none();
        if begin {
            self.began = Some(now);
        }
        self.events += 1;
        self.bytes += bytes as u64;
        self.at_point = false;
        begin
    }

    /// The position after the last event is known: inside a PostgreSQL transaction, or
    /// (`between`) between two.
    pub fn point(&mut self, between: bool) {
        self.at_point = true;
        self.at_commit = between;
    }

    /// Whether the position of everything handed over is known exactly.
    pub fn at_point(&self) -> bool {
        self.at_point
    }

    /// A PostgreSQL transaction committed.
    pub fn commit(&mut self) {
        self.point(true);
    }

    /// Whether the open transaction ends here. `drained` says the reader has nothing more ready
    /// (the end of a `poll`).
    pub fn ends(&self, drained: bool, now: Instant) -> Option<End> {
        let began = self.began?;
        if !self.at_point {
            return None;
        }
        if self.events >= self.max_events || self.bytes >= MAX_BYTES || now.duration_since(began) >= self.max_age {
            return Some(End::Size);
        }
        if !self.at_commit {
            return None;
        }
        let due = match self.boundary {
            Boundary::Poll => drained || now.duration_since(began) >= POLL_MAX_AGE,
            Boundary::Interval(every) => now.duration_since(began) >= every,
            Boundary::Connector => true,
        };
        due.then_some(End::Boundary)
    }

    /// When the open transaction is due without more input (`interval`, and the age bound); `None`
    /// when no deadline could end it. Only a point can end a transaction, and inside a PostgreSQL
    /// transaction only the age bound does: a deadline that passed there (`interval`) would wake
    /// the sink at once, again and again, until the commit arrived.
    pub fn deadline(&self) -> Option<Instant> {
        let began = self.began?;
        if !self.at_point {
            return None;
        }
        Some(match self.boundary {
            Boundary::Interval(every) if self.at_commit => began + every.min(self.max_age),
            _ => began + self.max_age,
        })
    }

    /// The transaction committed or was aborted.
    pub fn ended(&mut self) {
        self.began = None;
        self.events = 0;
        self.bytes = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn txns(boundary: Boundary) -> Transactions {
        let eos = ExactlyOnce { boundary, transactional_id: "t".into(), required: true };
        let mut t = Transactions::new(&eos, Duration::from_secs(60));
        t.max_events = 10;
        t
    }

    #[test]
    fn poll_ends_at_a_commit_once_the_reader_has_nothing_ready() {
        let now = Instant::now();
        let mut t = txns(Boundary::Poll);
        assert_eq!(t.ends(true, now), None, "nothing open");
        assert!(t.event(10, now));
        assert!(!t.event(10, now));
        assert_eq!(t.ends(true, now), None, "an event without its position is no place to end");
        t.point(false);
        assert_eq!(t.ends(true, now), None, "inside a PostgreSQL transaction, under the size bound");
        t.commit();
        assert_eq!(t.ends(false, now), None, "the reader has more ready");
        assert_eq!(t.ends(true, now), Some(End::Boundary));
        assert_eq!(t.ends(false, now + POLL_MAX_AGE), Some(End::Boundary), "a stream that never runs dry");
        t.ended();
        assert!(!t.is_open());
    }

    #[test]
    fn interval_and_connector_boundaries() {
        let now = Instant::now();
        let mut t = txns(Boundary::Interval(Duration::from_secs(1)));
        t.event(1, now);
        t.commit();
        assert_eq!(t.ends(true, now), None);
        assert_eq!(t.ends(false, now + Duration::from_secs(1)), Some(End::Boundary));
        assert_eq!(t.deadline(), Some(now + Duration::from_secs(1)));
        let mut t = txns(Boundary::Connector);
        t.event(1, now);
        t.commit();
        assert_eq!(t.ends(false, now), Some(End::Boundary));
    }

    /// Inside a PostgreSQL transaction an interval that has passed ends nothing, so it is no
    /// deadline: the sink would wake on it without pause until the commit (a busy loop).
    #[test]
    fn a_passed_interval_is_no_deadline_inside_a_postgres_transaction() {
        let now = Instant::now();
        let mut t = txns(Boundary::Interval(Duration::from_secs(1)));
        t.event(1, now);
        assert_eq!(t.deadline(), None, "an event without its position: no point to end at");
        t.point(false);
        let later = now + Duration::from_secs(2);
        assert_eq!(t.ends(false, later), None);
        let due = t.deadline().expect("the age bound still ends it");
        assert!(due > later, "a deadline that has passed but ends nothing: {due:?} <= {later:?}");
        assert_eq!(t.ends(false, due), Some(End::Size));
        t.commit();
        assert_eq!(t.deadline(), Some(now + Duration::from_secs(1)), "at a commit the interval is the deadline");
    }

    /// A large PostgreSQL transaction is split at event positions, whatever the boundary.
    #[test]
    fn large_or_old_transactions_end_inside_a_postgres_transaction() {
        let now = Instant::now();
        for boundary in [Boundary::Poll, Boundary::Connector, Boundary::Interval(Duration::from_secs(3600))] {
            let mut t = txns(boundary);
            for _ in 0..10 {
                t.event(1, now);
            }
            assert_eq!(t.ends(false, now), None);
            t.point(false);
            assert_eq!(t.ends(false, now), Some(End::Size), "{boundary:?}");
            let mut t = txns(boundary);
            t.event(1, now);
            t.point(false);
            assert_eq!(t.ends(false, now + Duration::from_secs(30)), Some(End::Size), "half the timeout");
        }
    }
}
