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
//!
//! **Exactly once** ([`Checkpoint::transactional`]). An acknowledged event is not yet published: a
//! `read_committed` consumer sees it only once its Kafka transaction commits, and an aborted one
//! (a crash, a fenced producer, a transaction the broker timed out) never shows it. So the
//! confirmed LSN rises only over events below `committed_below`, which moves when a Kafka
//! transaction commits ([`Checkpoint::kafka_committed`]). Each transaction carries an offset
//! record, the checkpoint's [`Position`] at its end; on restart the newest committed one says what
//! to skip ([`Resume`]), because the slot's confirmed position can be behind it (a crash between the
//! Kafka commit and the next status update) and PostgreSQL then sends those transactions again.

use std::collections::VecDeque;

use crate::lsn::Lsn;

/// How far the events handed to the producer go in the stream: every transaction whose commit
/// ends at or before `commit` and, when `partial` is set, the next transaction's changes up to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    pub commit: Lsn,
    pub partial: Option<Partial>,
}

/// Inside transaction `xid`: every change before `lsn`, and the first `changes` changes at `lsn`
/// (rows of one multi-row statement can share an LSN).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Partial {
    pub xid: u32,
    pub lsn: Lsn,
    pub changes: u64,
}

/// An offset record's `txId`, `lsn` and `lsn_events_processed`.
impl From<crate::kafka::offsets::Partial> for Partial {
    fn from(p: crate::kafka::offsets::Partial) -> Self {
        Partial { xid: p.xid, lsn: p.lsn, changes: p.events }
    }
}

impl From<Partial> for crate::kafka::offsets::Partial {
    fn from(p: Partial) -> Self {
        crate::kafka::offsets::Partial { xid: p.xid, lsn: p.lsn, events: p.changes }
    }
}

/// What a new session skips: what a committed Kafka transaction already holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resume(pub Position);

impl Resume {
    /// Whether it says more than a slot confirmed up to `slot`: whole transactions past it, or how
    /// far into the transaction after it.
    ///
    /// The slot never passes the position's commit while the position is inside a transaction:
    /// both move over whole transactions, and an idle confirmation of the server's WAL end moves
    /// the position too ([`Checkpoint::idle_wal_end`]). A record whose commit is behind the slot
    /// is therefore older than the slot and says nothing; trusting its position inside a
    /// transaction would trust a transaction id on a WAL history that may since have changed (a
    /// failover to a standby that never had it).
    pub fn beyond(&self, slot: Lsn) -> bool {
        self.0.commit > slot || (self.0.commit == slot && self.0.partial.is_some())
    }

    /// A transaction whose commit record (Begin's final LSN) starts before `commit`, the end of
    /// the last published commit, committed at or before it: skip it whole.
    pub fn skips_transaction(&self, final_lsn: Lsn) -> bool {
        final_lsn < self.0.commit
    }

    /// Something that stands alone at `end` (a non-transactional message): published already when
    /// the last published commit ends at or after it.
    pub fn skips_position(&self, end: Lsn) -> bool {
        end <= self.0.commit
    }

    /// The `nth` change (counted from 1) at `lsn` of transaction `xid`: published already when the
    /// position stops inside that transaction at or after it.
    pub fn skips_change(&self, xid: u32, lsn: Lsn, nth: u64) -> bool {
        match self.0.partial {
            Some(p) if p.xid == xid => lsn < p.lsn || (lsn == p.lsn && nth <= p.changes),
            _ => false,
        }
    }
}

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
    /// Exactly once: events below it are in a committed Kafka transaction (`None`: acknowledged is
    /// published).
    committed_below: Option<u64>,
    /// How far the events handed over go (for the offset record of the next Kafka transaction).
    position: Position,
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
            committed_below: None,
            position: Position { commit: start, partial: None },
        }
    }

    /// Exactly once: starts at the slot's position, or at the committed offset `resume` when that
    /// is further (the stream then skips up to it); events count as published only once their Kafka
    /// transaction committed.
    pub fn transactional(start: Lsn, resume: Option<Resume>) -> Self {
        let mut c = Self::new(start);
        c.committed_below = Some(0);
        if let Some(r) = resume.filter(|r| r.beyond(start)) {
            c.position = r.0;
        }
        c
    }

    /// Where the events handed over so far end in the stream: what the offset record of a Kafka
    /// transaction holding all of them says.
    pub fn position(&self) -> Position {
        self.position
    }

    /// The change `(lsn, nth)` of transaction `xid` has been handed over, with its event if it made
    /// one.
    pub fn progress(&mut self, xid: u32, lsn: Lsn, changes: u64) {
        self.position.partial = Some(Partial { xid, lsn, changes });
    }

    /// Exactly once: the Kafka transaction holding the events below `below` committed.
    pub fn kafka_committed(&mut self, below: u64) {
        if let Some(c) = &mut self.committed_below {
            *c = (*c).max(below.min(self.next_seq));
        }
        self.advance();
    }

    /// The first event not yet published: acknowledged and, under exactly once, committed.
    fn published_below(&self) -> u64 {
        self.committed_below.map_or(self.acked_below, |c| c.min(self.acked_below))
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
        // A commit at or before the position is one the stream skips (resuming after a committed
        // offset): it must not erase how far into the next transaction the position goes.
        if end_lsn > self.position.commit {
            self.position = Position { commit: end_lsn, partial: None };
        }
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
    ///
    /// The position moves with it: a Kafka transaction that later ends inside a transaction records
    /// that commit position, at or past the slot's, so after a restart its record still says more
    /// than the slot (see [`Resume::beyond`]).
    pub fn idle_wal_end(&mut self, wal_end: Lsn) {
        if self.published_below() == self.next_seq && self.commits.is_empty() && wal_end > self.confirmed {
            self.confirmed = wal_end;
            if self.position.partial.is_none() && wal_end > self.position.commit {
                self.position.commit = wal_end;
            }
        }
    }

    fn advance(&mut self) {
        let published = self.published_below();
        while let Some(&(needed, end_lsn, commit_time, had_events)) = self.commits.front() {
            if needed > published {
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

    fn partial(xid: u32, lsn: u64, changes: u64) -> Option<Partial> {
        Some(Partial { xid, lsn: l(lsn), changes })
    }

    /// Exactly once: acknowledged is not published. Only a committed Kafka transaction moves the
    /// confirmed position, so a crash between produce and commit (or an aborted transaction, a
    /// fenced producer, a transaction the broker timed out: none of them ever calls
    /// `kafka_committed`) leaves the slot before every event of that transaction.
    #[test]
    fn transactional_checkpoint_confirms_only_committed_kafka_transactions() {
        let mut c = Checkpoint::transactional(l(100), None);
        let a = c.event_sent();
        c.commit(l(110), 0);
        let b = c.event_sent();
        c.commit(l(120), 0);
        c.acked(a);
        c.acked(b);
        assert_eq!(c.confirmed(), l(100), "acknowledged but not committed");
        c.idle_wal_end(l(130));
        assert_eq!(c.confirmed(), l(100), "a keepalive cannot pass an uncommitted transaction either");
        c.kafka_committed(1);
        assert_eq!(c.confirmed(), l(110), "the Kafka transaction held only the first event");
        c.kafka_committed(0);
        assert_eq!(c.confirmed(), l(110), "never backwards");
        c.kafka_committed(99);
        assert_eq!(c.confirmed(), l(120), "a bound past what was sent counts as all of it");
        c.commit(l(140), 0);
        assert_eq!(c.confirmed(), l(140), "nothing open in Kafka: an empty transaction confirms at once");
        c.idle_wal_end(l(150));
        assert_eq!(c.confirmed(), l(150));
    }

    /// Committed but not yet acknowledged cannot happen (a commit delivers everything first), but
    /// the rule holds either way: both are needed.
    #[test]
    fn transactional_checkpoint_needs_the_acknowledgement_too() {
        let mut c = Checkpoint::transactional(l(0), None);
        let a = c.event_sent();
        c.commit(l(10), 0);
        c.kafka_committed(1);
        assert_eq!(c.confirmed(), l(0));
        c.acked(a);
        assert_eq!(c.confirmed(), l(10));
    }

    /// The position an offset record carries: whole transactions, then how far into the next one.
    #[test]
    fn position_follows_commits_and_changes() {
        let mut c = Checkpoint::transactional(l(100), None);
        assert_eq!(c.position(), Position { commit: l(100), partial: None });
        c.event_sent();
        c.progress(7, l(150), 1);
        c.event_sent();
        c.progress(7, l(150), 2);
        assert_eq!(c.position(), Position { commit: l(100), partial: partial(7, 150, 2) });
        c.commit(l(200), 0);
        assert_eq!(c.position(), Position { commit: l(200), partial: None });
        c.commit(l(150), 0); // never backwards
        assert_eq!(c.position().commit, l(200));
    }

    /// A crash between the Kafka commit and the slot's confirmation: the slot is behind the committed
    /// offset, PostgreSQL sends those transactions again, and the resumed position skips exactly
    /// them, including the skipped transactions' commits passing through without erasing how far into
    /// the next transaction the offset went.
    #[test]
    fn resume_after_a_crash_between_kafka_commit_and_slot_confirmation() {
        // Before the crash: T1 (commit 100..110) and T2 (120..130) whole, and T3 (xid 3, commit
        // record at 170) up to its second change at LSN 150, in one committed Kafka transaction.
        let committed = Position { commit: l(130), partial: partial(3, 150, 2) };
        let resume = Resume(committed);
        // The slot confirmed only up to 110.
        let mut c = Checkpoint::transactional(l(110), Some(resume));
        assert_eq!(c.position(), committed, "the committed offset is further than the slot");
        assert!(resume.skips_transaction(l(120)), "T2 is in the committed transaction");
        assert!(!resume.skips_transaction(l(170)), "T3 is not whole");
        c.commit(l(130), 0); // T2's commit passes through (skipped)
        assert_eq!(c.position(), committed, "a skipped commit keeps the position inside T3");
        assert!(resume.skips_change(3, l(140), 1));
        assert!(resume.skips_change(3, l(150), 1));
        assert!(resume.skips_change(3, l(150), 2));
        assert!(!resume.skips_change(3, l(150), 3), "a third row of the same statement was not published");
        assert!(!resume.skips_change(3, l(160), 1));
        assert!(!resume.skips_change(4, l(140), 1), "another transaction's changes are never skipped");
        // Nothing is in flight: T2's commit confirmed; T3 still waits for its own commit.
        assert_eq!(c.confirmed(), l(130));
        c.event_sent();
        c.progress(3, l(150), 3);
        c.commit(l(180), 0);
        assert_eq!(c.position(), Position { commit: l(180), partial: None });
        assert_eq!(c.confirmed(), l(130), "T3's last event is not in a committed Kafka transaction yet");
        c.acked(0);
        c.kafka_committed(1);
        assert_eq!(c.confirmed(), l(180));
    }

    /// A committed offset behind the slot (the slot was confirmed past it over transactions without
    /// events) is no reason to go back: the slot's position wins.
    #[test]
    fn resume_behind_the_slot_starts_at_the_slot() {
        let c = Checkpoint::transactional(l(500), Some(Resume(Position { commit: l(300), partial: None })));
        assert_eq!(c.position(), Position { commit: l(500), partial: None });
        let same = Position { commit: l(500), partial: partial(9, 510, 1) };
        assert_eq!(Checkpoint::transactional(l(500), Some(Resume(same))).position(), same);
    }

    /// Idle, the slot was confirmed to the server's WAL end, past the last commit the stream
    /// showed; a Kafka transaction then ended inside a large transaction that was already being
    /// written. Its record must not name a commit behind the slot: it says which of the large
    /// transaction's changes are published, and dropping it as older than the slot would publish
    /// them twice.
    #[test]
    fn resume_inside_a_transaction_survives_an_idle_confirmation_past_its_last_commit() {
        // Events up to the commit at 100; idle keepalives confirmed the WAL end, 400.
        let mut c = Checkpoint::transactional(l(100), None);
        let a = c.event_sent();
        c.commit(l(100), 0);
        c.acked(a);
        c.kafka_committed(1);
        c.idle_wal_end(l(400));
        assert_eq!(c.confirmed(), l(400));
        // T (xid 7), whose first change is at 300 and whose commit comes after 400: a Kafka
        // transaction commits after its change at 350.
        c.event_sent();
        c.progress(7, l(350), 1);
        let recorded = c.position();
        assert_eq!(recorded, Position { commit: l(400), partial: partial(7, 350, 1) });
        // Restarted: the slot is at 400, and PostgreSQL sends T again from 300.
        let resume = Resume(recorded);
        assert!(resume.beyond(l(400)), "the record says how far into T the published events go");
        let resumed = Checkpoint::transactional(l(400), Some(resume));
        assert_eq!(resumed.position(), recorded);
        assert!(resume.skips_change(7, l(300), 1) && resume.skips_change(7, l(350), 1));
        assert!(!resume.skips_change(7, l(360), 1));
        assert!(!resume.skips_transaction(l(400)), "T's commit record is after the slot");
        // A record behind the slot is older than the slot: it says nothing, inside a transaction
        // or not.
        assert!(!Resume(Position { commit: l(100), partial: None }).beyond(l(400)));
        assert!(!Resume(Position { commit: l(100), partial: partial(7, 350, 1) }).beyond(l(400)));
    }
}
