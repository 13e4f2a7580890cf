//! The checkpoint: the one place that moves the LSN pgoutbox confirms to PostgreSQL.
//!
//! **Invariant.** The confirmed LSN is the end LSN of the newest transaction whose events, and all
//! events before them, the broker has acknowledged. Nothing else moves it.
//!
//! Events get consecutive sequence numbers in commit order as they are handed to the producer.
//! Acknowledgements arrive in any order (different partitions, retries), so the checkpoint tracks the
//! contiguous acknowledged prefix: `acked_below` is the first sequence number not yet acknowledged,
//! and `acked_ahead` remembers acknowledgements past that gap. Each commit is queued with the number of
//! events sent before it; it becomes confirmable once `acked_below` reaches that number.
//! A transaction with no outbox events (other tables, dropped updates) is thereby acknowledged as soon
//! as everything before it is, in order.
//!
//! **Idle.** When no transaction is open and nothing is in flight, the server's keepalive WAL end can
//! be confirmed directly: every transaction that commits later has a commit record beyond it, so the
//! server will still send it after a restart. This is what keeps a quiet outbox from holding WAL.
//!
//! The confirmed LSN never goes backwards: PostgreSQL 15 accepts a smaller confirmed position and
//! would then resend, so the checkpoint starts at the slot's `confirmed_flush_lsn` and only rises.

use std::collections::VecDeque;

use crate::lsn::Lsn;

#[derive(Debug)]
pub struct Checkpoint {
    next_seq: u64,
    acked_below: u64,
    /// `acked_ahead[i]` is whether `acked_below + i` is acknowledged. Its front is always `false`
    /// (otherwise `acked_below` would have moved), and its length is bounded by the in-flight window.
    acked_ahead: VecDeque<bool>,
    /// Commits not yet confirmable: (events sent before the commit, commit end LSN, commit time,
    /// whether the transaction had events).
    commits: VecDeque<(u64, Lsn, i64, bool)>,
    confirmed: Lsn,
    /// Commit times of transactions with events confirmed since the last `take_confirmed`, for the
    /// latency metric.
    confirmed_commit_times: Vec<i64>,
    /// Events sent before the latest commit, to tell whether the next transaction had any.
    sent_at_last_commit: u64,
}

impl Checkpoint {
    /// Starts at the position the slot has already confirmed.
    pub fn new(start: Lsn) -> Self {
        Checkpoint {
            next_seq: 0,
            acked_below: 0,
            acked_ahead: VecDeque::new(),
            commits: VecDeque::new(),
            confirmed: start,
            confirmed_commit_times: Vec::new(),
            sent_at_last_commit: 0,
        }
    }

    /// The sequence number the next event will get.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Registers an event handed to the producer; returns its sequence number for the ack.
    pub fn event_sent(&mut self) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        seq
    }

    /// Registers a transaction's commit, after all its events were registered. `commit_time` is the
    /// server's commit timestamp (microseconds since 2000-01-01), used only for the latency metric.
    pub fn commit(&mut self, end_lsn: Lsn, commit_time: i64) {
        let had_events = self.next_seq > self.sent_at_last_commit;
        self.sent_at_last_commit = self.next_seq;
        match self.commits.back_mut() {
            // A transaction without events waits on exactly what the previous commit waits on: fold
            // it into that entry, so the queue grows only with transactions that have events (which
            // the producer's queue bounds) even while the broker is away.
            Some(last) if !had_events && last.0 == self.next_seq => last.1 = last.1.max(end_lsn),
            _ => self.commits.push_back((self.next_seq, end_lsn, commit_time, had_events)),
        }
        self.advance();
    }

    /// Commits waiting for acknowledgements (for tests of the memory bound).
    pub fn pending_commits(&self) -> usize {
        self.commits.len()
    }

    /// Commit times of the transactions with events confirmed since the previous call.
    /// The commit time of the oldest transaction not yet confirmable (`None` when every commit
    /// seen is confirmed).
    pub fn oldest_unconfirmed_commit(&self) -> Option<i64> {
        self.commits.front().map(|c| c.2)
    }

    pub fn take_confirmed(&mut self) -> std::vec::Drain<'_, i64> {
        self.confirmed_commit_times.drain(..)
    }

    /// Registers a broker acknowledgement of event `seq`. Acknowledging twice, or a sequence number never
    /// sent, is ignored: neither may move the position.
    pub fn acked(&mut self, seq: u64) {
        if seq < self.acked_below || seq >= self.next_seq {
            return;
        }
        let offset = (seq - self.acked_below) as usize;
        if self.acked_ahead.len() <= offset {
            self.acked_ahead.resize(offset + 1, false);
        }
        self.acked_ahead[offset] = true;
        while self.acked_ahead.front() == Some(&true) {
            self.acked_ahead.pop_front();
            self.acked_below += 1;
        }
        self.advance();
    }

    /// The server's WAL end from a keepalive received outside any transaction. Confirmed only when
    /// nothing is in flight, so it can never pass an unacknowledged event.
    pub fn idle_wal_end(&mut self, wal_end: Lsn) {
        if self.in_flight() == 0 && self.commits.is_empty() && wal_end > self.confirmed {
            self.confirmed = wal_end;
        }
    }

    fn advance(&mut self) {
        while let Some(&(needed, end_lsn, commit_time, had_events)) = self.commits.front() {
            if needed > self.acked_below {
                break;
            }
            self.commits.pop_front();
            if had_events {
                self.confirmed_commit_times.push(commit_time);
            }
            if end_lsn > self.confirmed {
                self.confirmed = end_lsn;
            }
        }
    }

    pub fn confirmed(&self) -> Lsn {
        self.confirmed
    }

    /// The first event not yet acknowledged: it moves only when the oldest waiting event is.
    pub fn acked_below(&self) -> u64 {
        self.acked_below
    }

    /// Events handed to the producer and not yet acknowledged.
    pub fn in_flight(&self) -> u64 {
        self.next_seq - self.acked_below - self.acked_ahead.iter().filter(|&&a| a).count() as u64
    }

    /// Whether every event sent so far has been acknowledged.
    pub fn drained(&self) -> bool {
        self.acked_below == self.next_seq
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(n: u64) -> Lsn {
        Lsn(n)
    }

    #[test]
    fn checkpoint_starts_at_the_slot_position() {
        let c = Checkpoint::new(l(100));
        assert_eq!(c.confirmed(), l(100));
        assert!(c.drained());
    }

    #[test]
    fn checkpoint_never_passes_unacked_event() {
        let mut c = Checkpoint::new(l(0));
        let a = c.event_sent();
        let b = c.event_sent();
        c.commit(l(10), 0);
        let d = c.event_sent();
        c.commit(l(20), 0);
        // Later acks first: nothing may be confirmed while `a` is outstanding.
        c.acked(d);
        c.acked(b);
        assert_eq!(c.confirmed(), l(0));
        c.acked(a);
        assert_eq!(c.confirmed(), l(20));
    }

    /// The slot's lag in time is measured from the oldest commit still waiting to be confirmed.
    #[test]
    fn checkpoint_names_the_oldest_unconfirmed_commit() {
        let mut c = Checkpoint::new(l(0));
        assert_eq!(c.oldest_unconfirmed_commit(), None);
        let a = c.event_sent();
        c.commit(l(10), 1_000);
        let b = c.event_sent();
        c.commit(l(20), 2_000);
        assert_eq!(c.oldest_unconfirmed_commit(), Some(1_000));
        c.acked(a);
        assert_eq!(c.oldest_unconfirmed_commit(), Some(2_000));
        c.acked(b);
        assert_eq!(c.oldest_unconfirmed_commit(), None);
    }

    #[test]
    fn checkpoint_confirms_each_transaction_as_its_prefix_completes() {
        let mut c = Checkpoint::new(l(0));
        let a = c.event_sent();
        c.commit(l(10), 0);
        let b = c.event_sent();
        c.commit(l(20), 0);
        c.acked(a);
        assert_eq!(c.confirmed(), l(10), "first transaction done, second not");
        c.acked(b);
        assert_eq!(c.confirmed(), l(20));
    }

    #[test]
    fn checkpoint_transactions_without_events_follow_in_order() {
        let mut c = Checkpoint::new(l(0));
        let a = c.event_sent();
        c.commit(l(10), 0);
        c.commit(l(15), 0); // a transaction on another table
        assert_eq!(c.confirmed(), l(0), "the empty transaction waits behind the unacked one");
        c.acked(a);
        assert_eq!(c.confirmed(), l(15));
        c.commit(l(30), 0);
        assert_eq!(c.confirmed(), l(30), "with nothing in flight an empty transaction confirms at once");
    }

    #[test]
    fn checkpoint_reports_confirmed_transactions_with_events() {
        let mut c = Checkpoint::new(l(0));
        let a = c.event_sent();
        c.commit(l(10), 111);
        c.commit(l(20), 222); // no events: not a latency sample
        assert_eq!(c.take_confirmed().count(), 0);
        c.acked(a);
        assert_eq!(c.take_confirmed().collect::<Vec<_>>(), [111]);
    }

    #[test]
    fn checkpoint_commit_queue_stays_bounded_while_an_event_is_unacked() {
        let mut c = Checkpoint::new(l(0));
        let a = c.event_sent();
        c.commit(l(10), 0);
        for i in 0..100_000 {
            c.commit(l(20 + i), 0); // transactions on other tables during a broker outage
        }
        assert_eq!(c.pending_commits(), 1);
        assert_eq!(c.confirmed(), l(0));
        c.acked(a);
        assert_eq!(c.confirmed(), l(20 + 99_999));
    }

    #[test]
    fn checkpoint_ignores_bogus_and_duplicate_acks() {
        let mut c = Checkpoint::new(l(0));
        let a = c.event_sent();
        let b = c.event_sent();
        c.commit(l(10), 0);
        c.acked(b);
        c.acked(b);
        c.acked(99); // never sent
        assert_eq!(c.confirmed(), l(0));
        assert_eq!(c.in_flight(), 1);
        c.acked(a);
        c.acked(a);
        assert_eq!(c.confirmed(), l(10));
        assert!(c.drained());
    }

    #[test]
    fn checkpoint_keepalive_only_moves_when_idle() {
        let mut c = Checkpoint::new(l(5));
        c.idle_wal_end(l(50));
        assert_eq!(c.confirmed(), l(50));
        let a = c.event_sent();
        c.commit(l(60), 0);
        c.idle_wal_end(l(70));
        assert_eq!(c.confirmed(), l(50), "keepalive cannot pass an unacked event");
        c.acked(a);
        assert_eq!(c.confirmed(), l(60));
        c.idle_wal_end(l(70));
        assert_eq!(c.confirmed(), l(70));
        c.idle_wal_end(l(65));
        assert_eq!(c.confirmed(), l(70), "never backwards");
    }

    #[test]
    fn checkpoint_never_moves_backwards_from_start() {
        let mut c = Checkpoint::new(l(100));
        c.commit(l(50), 0); // a replayed transaction that ends before the slot position
        assert_eq!(c.confirmed(), l(100));
    }

    /// Exhaustive small-case check: every order of acknowledgements, every prefix of them. After each
    /// step the confirmed LSN must equal the end of the newest commit all of whose predecessors'
    /// events are acked, computed the slow obvious way.
    #[test]
    fn checkpoint_holds_under_every_ack_order() {
        // Transactions with 2, 0, 1, 3 events.
        let sizes = [2usize, 0, 1, 3];
        let total: usize = sizes.iter().sum();
        let mut orders = vec![vec![]];
        for _ in 0..total {
            let mut next = Vec::new();
            for o in &orders {
                for s in 0..total {
                    if !o.contains(&s) {
                        let mut o2 = o.clone();
                        o2.push(s);
                        next.push(o2);
                    }
                }
            }
            orders = next;
        }
        for order in orders {
            let mut c = Checkpoint::new(l(0));
            let mut ends = Vec::new(); // (events before commit, end lsn)
            let mut sent = 0u64;
            for (i, &n) in sizes.iter().enumerate() {
                for _ in 0..n {
                    c.event_sent();
                    sent += 1;
                }
                let end = l(10 * (i as u64 + 1));
                c.commit(end, 0);
                ends.push((sent, end));
            }
            let mut acked = std::collections::HashSet::new();
            for &seq in &order {
                c.acked(seq as u64);
                acked.insert(seq as u64);
                let prefix = (0..).take_while(|s| acked.contains(s)).count() as u64;
                let expect = ends.iter().filter(|(before, _)| *before <= prefix).map(|(_, e)| *e).max().unwrap_or(l(0));
                assert_eq!(c.confirmed(), expect, "order {order:?}");
            }
            assert!(c.drained());
        }
    }
}
