//! The comparison itself, without I/O: committed outbox rows on one side, consumed records on the
//! other, matched by the record's `id` header.
//!
//! Records are fed one at a time, in the order the consumer delivers them, which within a partition
//! is offset order. That is all the order check needs: per (topic, partition), the *first* copy of
//! each event is compared with the previous first copy of the same aggregate, and its commit-order
//! value must not be smaller. Later copies (redelivery after a relay crash) are duplicates, never
//! order violations: consumers deduplicate them by `id` and keep the first.
//!
//! Memory is one entry per committed row plus one per distinct unmatched id; event ids are shared
//! (`Arc<str>`) between the index and the per-event state.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// How many examples of each finding a report keeps.
pub const EXAMPLES: usize = 10;

/// Copies of one duplicated event whose locations are kept for its example.
const DUPLICATE_LOCATIONS: usize = 5;

/// A committed outbox row, as far as verification needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedEvent {
    pub id: String,
    /// The topic the Event Router sends it to; `None` when its route-by value is NULL (the relay
    /// cannot route such a row, so it can only be missing).
    pub topic: Option<String>,
    /// The aggregate (the key column as text); `None` when NULL, which the order check skips:
    /// records without a key are spread over partitions, so they have no per-aggregate order.
    pub aggregate: Option<String>,
    /// Its place in commit order; `None` when unknown.
    pub order: Option<CommitOrder>,
    /// With the polling relay: whether the row is marked published (`None`: log tailing).
    pub published: Option<bool>,
}

/// A position in commit order: `rank` compares (equal ranks are the same position, e.g. one
/// transaction's commit timestamp), `value` is what the operator sees (the column's text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitOrder {
    pub rank: i64,
    pub value: String,
}

/// One consumed record, as far as verification needs it.
#[derive(Debug, Clone, Copy)]
pub struct ObservedRecord<'a> {
    pub topic: &'a str,
    pub partition: i32,
    pub offset: i64,
    pub timestamp_ms: Option<i64>,
    /// The `id` header's value; `None` when the record has no such header.
    pub id: Option<&'a [u8]>,
    /// The relay's commit-LSN header (`pgoutbox.commit.lsn.header`), when it sets one: the exact
    /// commit order, used for the order check in preference to anything from the database.
    pub commit_lsn: Option<&'a [u8]>,
}

/// Where a record sits in Kafka.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub timestamp_ms: Option<i64>,
}

/// Which records without a committed row count as orphans.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OrphanPolicy {
    /// Only records published within the verified window: from `--since` (or, without it, from the
    /// first record whose row is still in the table) to `--until` (or the end). Records published
    /// before that belong to rows an outbox cleanup may have deleted.
    Window,
    /// Every record without a row: for outboxes that are never cleaned up.
    All,
    /// None: for outboxes whose rows are deleted right after the insert (nothing to compare with).
    Off,
}

/// The time range, in Kafka timestamps (milliseconds since the epoch), within which a record
/// without a row is an orphan. Both ends optional; `from` inclusive, `until` exclusive.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TimeRange {
    pub from_ms: Option<i64>,
    pub until_ms: Option<i64>,
}

impl TimeRange {
    /// A record without a timestamp cannot be placed, so it is treated as inside.
    pub fn contains(&self, ts: Option<i64>) -> bool {
        let Some(ts) = ts else { return true };
        self.from_ms.map_or(true, |f| ts >= f) && self.until_ms.map_or(true, |u| ts < u)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingEvent {
    pub id: String,
    pub topic: Option<String>,
    pub aggregate: Option<String>,
    pub order: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Orphan {
    /// `None` for a record without an `id` header.
    pub id: Option<String>,
    pub location: Location,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Duplicate {
    pub id: String,
    pub copies: u64,
    /// The first few copies, first one first.
    pub locations: Vec<Location>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderViolation {
    pub topic: String,
    pub partition: i32,
    pub aggregate: String,
    /// The event that came too late...
    pub id: String,
    pub offset: i64,
    pub order: String,
    /// ...after this one, committed after it.
    pub after_id: String,
    pub after_offset: i64,
    pub after_order: String,
}

/// A count and the first few examples.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tally<T> {
    pub count: u64,
    pub examples: Vec<T>,
}

impl<T> Default for Tally<T> {
    fn default() -> Self {
        Tally { count: 0, examples: Vec::new() }
    }
}

impl<T> Tally<T> {
    fn add(&mut self, example: impl FnOnce() -> T) {
        self.count += 1;
        if self.examples.len() < EXAMPLES {
            self.examples.push(example());
        }
    }
}

/// The result of a comparison.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub events_committed: u64,
    pub records_consumed: u64,
    /// Committed events with no record.
    pub missing: Tally<MissingEvent>,
    /// Distinct ids (and records without an `id` header) with no row, published within `orphan_window`.
    pub orphans: Tally<Orphan>,
    /// The window orphans were counted in (after defaults); `None` when orphans were not checked.
    pub orphan_window: Option<TimeRange>,
    /// Distinct ids without a row published outside the window: not counted as orphans.
    pub unmatched_outside_window: u64,
    /// Distinct ids whose row exists but outside the verified rows (outside --since/--until, or
    /// committed after the rows were read).
    pub rows_outside_window: u64,
    /// Ids seen more than once, with `extra_records` the copies beyond the first.
    pub duplicates: Tally<Duplicate>,
    pub duplicate_records: u64,
    pub order_violations: Tally<OrderViolation>,
    /// First copies whose commit order was known and compared.
    pub order_checked: u64,
    /// Polling relay: rows not marked published and not in the topics yet (waiting to be polled,
    /// not missing).
    pub pending: u64,
    /// Polling relay: rows in the topics but not marked published yet (a batch in flight, or a
    /// crash after acknowledgement: they are published again).
    pub unmarked_published: u64,
}

/// A record's place, compactly: topics are interned.
#[derive(Debug, Clone, Copy)]
struct Loc {
    topic: u32,
    partition: i32,
    offset: i64,
    timestamp_ms: Option<i64>,
}

#[derive(Debug)]
struct EventState {
    id: Arc<str>,
    topic: Option<u32>,
    aggregate: Option<u32>,
    order: Option<CommitOrder>,
    published: Option<bool>,
    copies: u64,
    first: Option<Loc>,
}

#[derive(Debug)]
struct Unmatched {
    copies: u64,
    first: Loc,
}

/// The previous first copy of an aggregate's event in one partition.
#[derive(Debug, Clone, Copy)]
struct Last {
    rank: i64,
    event: u32,
    offset: i64,
}

/// Committed rows and consumed records, compared incrementally.
#[derive(Debug, Default)]
pub struct Comparison {
    events: Vec<EventState>,
    index: HashMap<Arc<str>, u32>,
    topics: Interner,
    aggregates: Interner,
    seen_events: u64,
    records: u64,
    /// Kafka timestamp of the earliest record whose row is among the committed ones.
    first_matched_ms: Option<i64>,
    /// Per (topic, partition): aggregate -> its latest first copy.
    last: HashMap<(u32, i32), HashMap<u32, Last>>,
    /// (event, topic, partition) of copies in another partition than the event's first copy: rare
    /// (a topic whose partition count changed), so first copies need no per-partition set.
    other_partitions: HashSet<(u32, u32, i32)>,
    duplicate_locations: HashMap<u32, Vec<Loc>>,
    unmatched: HashMap<Arc<str>, Unmatched>,
    without_id: Vec<Loc>,
    violations: Tally<OrderViolation>,
    order_checked: u64,
    /// The commit-LSN header's name, when the relay's config sets one.
    commit_lsn_header: Option<String>,
    /// Whether any record carried it.
    commit_lsn_seen: bool,
}

#[derive(Debug, Default)]
struct Interner {
    names: Vec<Arc<str>>,
    index: HashMap<Arc<str>, u32>,
}

impl Interner {
    fn intern(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let name: Arc<str> = Arc::from(s);
        let i = self.names.len() as u32;
        self.names.push(name.clone());
        self.index.insert(name, i);
        i
    }

    fn name(&self, i: u32) -> &str {
        &self.names[i as usize]
    }
}

impl Comparison {
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads commit order from this header of the records (the relay's `pgoutbox.commit.lsn.header`).
    pub fn use_commit_lsn_header(&mut self, name: Option<String>) {
        self.commit_lsn_header = name;
    }

    pub fn commit_lsn_header(&self) -> Option<&str> {
        self.commit_lsn_header.as_deref()
    }

    /// Whether the order check used the records' commit LSNs.
    pub fn ordered_by_commit_lsn(&self) -> bool {
        self.commit_lsn_seen
    }

    /// Adds a committed row. A second row with the same id (impossible with a primary key) is ignored.
    pub fn add_committed(&mut self, event: CommittedEvent) {
        if self.index.contains_key(event.id.as_str()) {
            return;
        }
        let id: Arc<str> = Arc::from(event.id);
        let n = self.events.len() as u32;
        self.events.push(EventState {
            id: id.clone(),
            topic: event.topic.as_deref().map(|t| self.topics.intern(t)),
            aggregate: event.aggregate.as_deref().map(|a| self.aggregates.intern(a)),
            order: event.order,
            published: event.published,
            copies: 0,
            first: None,
        });
        self.index.insert(id, n);
    }

    /// The distinct topics of the committed rows, sorted.
    pub fn committed_topics(&self) -> Vec<String> {
        let mut t: Vec<String> = self
            .events
            .iter()
            .filter_map(|e| e.topic)
            .collect::<HashSet<_>>()
            .into_iter()
            .map(|t| self.topics.name(t).to_string())
            .collect();
        t.sort();
        t
    }

    pub fn events_committed(&self) -> u64 {
        self.events.len() as u64
    }

    /// Committed events not seen (yet).
    pub fn missing_now(&self) -> u64 {
        self.events.len() as u64 - self.seen_events
    }

    pub fn records_consumed(&self) -> u64 {
        self.records
    }

    pub fn observe(&mut self, record: &ObservedRecord<'_>) {
        self.records += 1;
        let loc = Loc {
            topic: self.topics.intern(record.topic),
            partition: record.partition,
            offset: record.offset,
            timestamp_ms: record.timestamp_ms,
        };
        let Some(id) = record.id else {
            self.without_id.push(loc);
            return;
        };
        let id = String::from_utf8_lossy(id);
        let Some(&n) = self.index.get(id.as_ref()) else {
            match self.unmatched.get_mut(id.as_ref()) {
                Some(u) => u.copies += 1,
                None => {
                    self.unmatched.insert(Arc::from(id.as_ref()), Unmatched { copies: 1, first: loc });
                }
            }
            return;
        };
        let event = &mut self.events[n as usize];
        event.copies += 1;
        if event.copies == 1 {
            if let Some(lsn) = record
                .commit_lsn
                .and_then(|l| std::str::from_utf8(l).ok())
                .and_then(|l| l.parse::<crate::lsn::Lsn>().ok())
            {
                event.order = Some(CommitOrder { rank: lsn.0 as i64, value: lsn.to_string() });
                self.commit_lsn_seen = true;
            }
            event.first = Some(loc);
            self.seen_events += 1;
            if let Some(ts) = loc.timestamp_ms {
                self.first_matched_ms = Some(self.first_matched_ms.map_or(ts, |f| f.min(ts)));
            }
        } else {
            let locations = self.duplicate_locations.entry(n).or_insert_with(|| event.first.into_iter().collect());
            if locations.len() < DUPLICATE_LOCATIONS {
                locations.push(loc);
            }
        }
        self.check_order(n, loc);
    }

    /// Whether `loc` holds the first copy of event `n` in its partition (`n` was just counted).
    fn first_in_partition(&mut self, n: u32, loc: Loc) -> bool {
        let event = &self.events[n as usize];
        let Some(first) = event.first.filter(|_| event.copies > 1) else { return true };
        if (first.topic, first.partition) == (loc.topic, loc.partition) {
            return false;
        }
        self.other_partitions.insert((n, loc.topic, loc.partition))
    }

    /// The order check for a copy of event `n`: only a first copy in its partition is checked.
    fn check_order(&mut self, n: u32, loc: Loc) {
        if !self.first_in_partition(n, loc) {
            return;
        }
        let part = self.last.entry((loc.topic, loc.partition)).or_default();
        let event = &self.events[n as usize];
        let (Some(aggregate), Some(order)) = (event.aggregate, &event.order) else { return };
        self.order_checked += 1;
        let current = Last { rank: order.rank, event: n, offset: loc.offset };
        if let Some(prev) = part.insert(aggregate, current) {
            if order.rank < prev.rank {
                let before = &self.events[prev.event as usize];
                let (topics, aggregates) = (&self.topics, &self.aggregates);
                self.violations.add(|| OrderViolation {
                    topic: topics.name(loc.topic).to_string(),
                    partition: loc.partition,
                    aggregate: aggregates.name(aggregate).to_string(),
                    id: event.id.to_string(),
                    offset: loc.offset,
                    order: order.value.clone(),
                    after_id: before.id.to_string(),
                    after_offset: prev.offset,
                    after_order: before.order.as_ref().map_or_else(String::new, |o| o.value.clone()),
                });
            }
        }
    }

    /// The window orphans are counted in, after defaults: without a lower bound, from the first
    /// record whose row is present. `None` when orphans are not counted: `Off`, or `Window` with
    /// neither a lower bound nor any matched record (then every record may belong to a deleted row).
    pub fn orphan_window(&self, policy: OrphanPolicy, window: TimeRange) -> Option<TimeRange> {
        match policy {
            OrphanPolicy::Off => None,
            OrphanPolicy::All => Some(TimeRange::default()),
            OrphanPolicy::Window => window
                .from_ms
                .or(self.first_matched_ms)
                .map(|from| TimeRange { from_ms: Some(from), until_ms: window.until_ms }),
        }
    }

    /// Ids without a committed row that would count as orphans: the caller looks them up in the whole
    /// table (a row outside the verified window, or committed after the rows were read, is not an
    /// orphan) and passes the ones found to `finish`.
    pub fn orphan_candidates(&self, policy: OrphanPolicy, window: TimeRange) -> Vec<String> {
        let Some(range) = self.orphan_window(policy, window) else { return Vec::new() };
        self.unmatched
            .iter()
            .filter(|(_, u)| range.contains(u.first.timestamp_ms))
            .map(|(id, _)| id.to_string())
            .collect()
    }

    /// The outcome, given which unmatched ids have a row after all (`rows_elsewhere`).
    pub fn finish(self, policy: OrphanPolicy, window: TimeRange, rows_elsewhere: &HashSet<String>) -> Outcome {
        let orphan_window = self.orphan_window(policy, window);
        let (orphans, unmatched_outside_window, rows_outside_window) = self.orphans(orphan_window, rows_elsewhere);
        let (duplicates, duplicate_records) = self.duplicates();
        Outcome {
            events_committed: self.events.len() as u64,
            records_consumed: self.records,
            missing: self.missing(),
            orphans,
            orphan_window,
            unmatched_outside_window,
            rows_outside_window,
            duplicates,
            duplicate_records,
            order_violations: self.violations,
            order_checked: self.order_checked,
            pending: self.events.iter().filter(|e| e.copies == 0 && e.published == Some(false)).count() as u64,
            unmarked_published: self.events.iter().filter(|e| e.copies > 0 && e.published == Some(false)).count()
                as u64,
        }
    }

    fn location(&self, l: &Loc) -> Location {
        Location {
            topic: self.topics.name(l.topic).to_string(),
            partition: l.partition,
            offset: l.offset,
            timestamp_ms: l.timestamp_ms,
        }
    }

    fn missing(&self) -> Tally<MissingEvent> {
        let mut missing = Tally::default();
        // A row the polling relay has not marked is waiting for a poll, not missing; one it marked
        // and no topic has is.
        let mut unseen: Vec<&EventState> =
            self.events.iter().filter(|e| e.copies == 0 && e.published != Some(false)).collect();
        // Examples in commit order, so the first one shown is where a gap starts.
        unseen
            .sort_by(|a, b| (a.order.as_ref().map(|o| o.rank), &a.id).cmp(&(b.order.as_ref().map(|o| o.rank), &b.id)));
        for e in unseen {
            missing.add(|| MissingEvent {
                id: e.id.to_string(),
                topic: e.topic.map(|t| self.topics.name(t).to_string()),
                aggregate: e.aggregate.map(|a| self.aggregates.name(a).to_string()),
                order: e.order.as_ref().map(|o| o.value.clone()),
            });
        }
        missing
    }

    /// Unmatched ids in Kafka order of their first copy.
    fn unmatched_sorted(&self) -> Vec<(&Arc<str>, &Unmatched)> {
        let mut unmatched: Vec<(&Arc<str>, &Unmatched)> = self.unmatched.iter().collect();
        unmatched.sort_by(|(a, ua), (b, ub)| {
            (ua.first.topic, ua.first.partition, ua.first.offset, a).cmp(&(
                ub.first.topic,
                ub.first.partition,
                ub.first.offset,
                b,
            ))
        });
        unmatched
    }

    /// Orphans, and the unmatched ids not counted: outside the window, and with a row elsewhere.
    fn orphans(&self, window: Option<TimeRange>, rows_elsewhere: &HashSet<String>) -> (Tally<Orphan>, u64, u64) {
        let mut orphans = Tally::default();
        let (mut outside, mut elsewhere) = (0, 0);
        let in_window = |ts: Option<i64>| window.is_some_and(|w| w.contains(ts));
        for (id, u) in self.unmatched_sorted() {
            if rows_elsewhere.contains(id.as_ref()) {
                elsewhere += 1;
            } else if in_window(u.first.timestamp_ms) {
                orphans.add(|| Orphan { id: Some(id.to_string()), location: self.location(&u.first) });
            } else {
                outside += 1;
            }
        }
        for l in &self.without_id {
            if in_window(l.timestamp_ms) {
                orphans.add(|| Orphan { id: None, location: self.location(l) });
            } else {
                outside += 1;
            }
        }
        (orphans, outside, elsewhere)
    }

    /// Ids seen more than once (committed or not), and the copies beyond the first.
    fn duplicates(&self) -> (Tally<Duplicate>, u64) {
        let mut duplicates = Tally::default();
        let mut extra = 0;
        let mut committed: Vec<(u32, &Vec<Loc>)> = self.duplicate_locations.iter().map(|(&n, l)| (n, l)).collect();
        committed.sort_by_key(|(n, _)| self.events[*n as usize].first.map(|l| (l.topic, l.partition, l.offset)));
        for (n, locs) in committed {
            let e = &self.events[n as usize];
            extra += e.copies - 1;
            duplicates.add(|| Duplicate {
                id: e.id.to_string(),
                copies: e.copies,
                locations: locs.iter().map(|l| self.location(l)).collect(),
            });
        }
        for (id, u) in self.unmatched_sorted().into_iter().filter(|(_, u)| u.copies > 1) {
            extra += u.copies - 1;
            duplicates.add(|| Duplicate {
                id: id.to_string(),
                copies: u.copies,
                locations: vec![self.location(&u.first)],
            });
        }
        (duplicates, extra)
    }
}
