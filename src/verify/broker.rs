//! The broker side of `verify`: reads every partition of the routed topics, from the beginning or
//! from a time, until each partition reaches the end it had when reading started, feeding each
//! record to the comparison as it arrives (nothing is kept per record beyond what it needs).
//!
//! When to stop. Reaching the ends (and then nothing more for `QUIET`) is the normal stop. If
//! committed events are still missing there, the relay may just be behind: reading goes on for at
//! most `idle` more, stopping as soon as none is missing. Before the ends, it stops if nothing
//! arrives for `idle` (the broker stopped serving), and the partitions not read to their end are
//! reported.
//!
//! This is blocking code (librdkafka's poll); run it on a blocking thread.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::{Offset, TopicPartitionList};

use super::compare::{Comparison, ObservedRecord};
use super::VerifyError;
use crate::config::KafkaConfig;

/// Bound on each metadata, watermark and offset lookup.
const BROKER_TIMEOUT: Duration = Duration::from_secs(15);

/// Reading from a time starts this much earlier: a record's timestamp is the relay's clock when it
/// published, the window is the database's clock when the row was created; this absorbs skew.
pub const CLOCK_SKEW: Duration = Duration::from_secs(60);

/// Reading stops at the ends only after this long without a record. A broker's reported end can
/// lag behind what it serves (tansu reports the first offset of the newest batch, plus one), so
/// the records after it are read too, until the partition is quiet.
const QUIET: Duration = Duration::from_millis(500);

/// How often progress is reported at most.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// Where reading starts.
#[derive(Debug, Clone, Copy)]
pub enum StartAt {
    Beginning,
    /// The first record with a timestamp at or after this (milliseconds since the epoch).
    Time(i64),
}

/// Reading progress, for an operator watching a large topic.
#[derive(Debug, Clone)]
pub struct Progress {
    pub records: u64,
    pub elapsed: Duration,
    pub partitions: usize,
    pub partitions_done: usize,
    /// Records left before every partition reaches its end, roughly.
    pub remaining: u64,
    /// Committed events not seen yet.
    pub missing: u64,
}

impl Progress {
    pub fn rate(&self) -> f64 {
        self.records as f64 / self.elapsed.as_secs_f64().max(0.001)
    }
}

/// What reading found besides the records themselves.
#[derive(Debug, Clone, Default)]
pub struct ReadSummary {
    /// Topics the broker does not know.
    pub absent_topics: Vec<String>,
    /// Partitions not read to their end (`topic`, partition, next offset, end).
    pub incomplete: Vec<(String, i32, i64, i64)>,
    pub partitions: usize,
}

/// The read position and end of a partition not yet read to its end.
#[derive(Debug, Clone, Copy)]
struct Pending {
    next: i64,
    end: i64,
}

fn broker_error(kafka: &KafkaConfig, what: &str, source: rdkafka::error::KafkaError) -> VerifyError {
    VerifyError::Broker { servers: kafka.bootstrap_servers.clone(), what: what.to_string(), source: Box::new(source) }
}

fn consumer(kafka: &KafkaConfig, isolation: Isolation) -> Result<BaseConsumer, VerifyError> {
    let mut c = crate::kafka::client_config(kafka);
    c.set("group.id", "pgoutbox-verify")
        .set("isolation.level", isolation.name())
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("enable.partition.eof", "false");
    for (k, v) in kafka.producer_overrides.iter() {
        if k == "client.dns.lookup" || k == "client.id" {
            c.set(k, v);
        }
    }
    c.create().map_err(|e| broker_error(kafka, "cannot create a Kafka consumer", e))
}

/// Partitions not yet read to their end, by topic, and how many there are.
#[derive(Debug, Default)]
struct Ends {
    pending: HashMap<String, HashMap<i32, Pending>>,
    count: usize,
}

impl Ends {
    fn add(&mut self, topic: &str, partition: i32, next: i64, end: i64) {
        if next < end
            && self.pending.entry(topic.to_string()).or_default().insert(partition, Pending { next, end }).is_none()
        {
            self.count += 1;
        }
    }

    /// Partitions whose position passed their end without a record there (transaction markers,
    /// records of aborted transactions under `read_committed`).
    fn catch_up(&mut self, consumer: &BaseConsumer) {
        if self.count == 0 {
            return;
        }
        let Ok(positions) = consumer.position() else { return };
        for e in positions.elements() {
            if let Offset::Offset(o) = e.offset() {
                self.advance(e.topic(), e.partition(), o - 1);
            }
        }
    }

    /// Notes that `offset` of a partition was read.
    fn advance(&mut self, topic: &str, partition: i32, offset: i64) {
        let Some(parts) = self.pending.get_mut(topic) else { return };
        let Some(s) = parts.get_mut(&partition) else { return };
        s.next = s.next.max(offset + 1);
        if s.next >= s.end {
            parts.remove(&partition);
            self.count -= 1;
        }
    }

    fn remaining(&self) -> u64 {
        self.pending.values().flat_map(HashMap::values).map(|s| (s.end - s.next).max(0) as u64).sum()
    }

    fn incomplete(&self) -> Vec<(String, i32, i64, i64)> {
        let mut v: Vec<_> = self
            .pending
            .iter()
            .flat_map(|(t, parts)| parts.iter().map(|(&p, s)| (t.clone(), p, s.next, s.end)))
            .collect();
        v.sort();
        v
    }
}

/// Assigns every partition of `topics` at its start offset; returns the assignment and the ends.
fn assign(
    consumer: &BaseConsumer,
    kafka: &KafkaConfig,
    topics: &[String],
    start: StartAt,
    summary: &mut ReadSummary,
) -> Result<(TopicPartitionList, Ends), VerifyError> {
    let offset = match start {
        StartAt::Beginning => Offset::Beginning,
        StartAt::Time(ms) => Offset::Offset(ms),
    };
    let mut assignment = TopicPartitionList::new();
    for topic in topics {
        let md = consumer
            .fetch_metadata(Some(topic), BROKER_TIMEOUT)
            .map_err(|e| broker_error(kafka, "cannot fetch topic metadata", e))?;
        let Some(t) = md.topics().iter().find(|t| t.name() == topic) else { continue };
        if t.error().is_some() || t.partitions().is_empty() {
            summary.absent_topics.push(topic.clone());
            continue;
        }
        for p in t.partitions() {
            assignment
                .add_partition_offset(topic, p.id(), offset)
                .map_err(|e| broker_error(kafka, "cannot assign partitions", e))?;
        }
    }
    if assignment.count() == 0 {
        return Ok((assignment, Ends::default()));
    }
    if let StartAt::Time(_) = start {
        assignment = consumer
            .offsets_for_times(assignment, BROKER_TIMEOUT)
            .map_err(|e| broker_error(kafka, "cannot look up offsets by time", e))?;
    }
    let mut ends = Ends::default();
    for e in assignment.elements() {
        let (low, high) = consumer
            .fetch_watermarks(e.topic(), e.partition(), BROKER_TIMEOUT)
            .map_err(|err| broker_error(kafka, "cannot fetch partition offsets", err))?;
        summary.partitions += 1;
        let next = match e.offset() {
            Offset::Offset(o) => o.max(low),
            // offsets_for_times: no record at or after the time.
            Offset::End => high,
            _ => low,
        };
        ends.add(e.topic(), e.partition(), next, high);
    }
    consumer.assign(&assignment).map_err(|e| broker_error(kafka, "cannot assign partitions", e))?;
    Ok((assignment, ends))
}

/// Hands one consumed record to the comparison: where it is, its event id and commit LSN headers.
fn observe(cmp: &mut Comparison, m: &rdkafka::message::BorrowedMessage<'_>) {
    let header = |name: &str| m.headers().and_then(|h| h.iter().filter(|h| h.key == name).last()).and_then(|h| h.value);
    let id = header("id");
    let commit_lsn = cmp.commit_lsn_header().and_then(header);
    cmp.observe(&ObservedRecord {
        topic: m.topic(),
        partition: m.partition(),
        offset: m.offset(),
        timestamp_ms: m.timestamp().to_millis(),
        id,
        commit_lsn,
    });
}

/// What to read: the topics, from where, and how long a silence ends the read.
#[derive(Clone)]
pub struct ReadPlan {
    pub kafka: KafkaConfig,
    pub topics: Vec<String>,
    pub start: StartAt,
    /// How long to wait for missing events after reaching the ends, and for a silent broker before.
    pub idle: Duration,
    pub isolation: Isolation,
}

/// The consumer's `isolation.level`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// Only records of committed Kafka transactions (and records outside transactions).
    ReadCommitted,
    /// Records of aborted Kafka transactions too.
    ReadUncommitted,
}

impl Isolation {
    pub fn name(self) -> &'static str {
        match self {
            Isolation::ReadCommitted => "read_committed",
            Isolation::ReadUncommitted => "read_uncommitted",
        }
    }
}

/// Reads the plan's topics into `cmp`; `progress` is called at most once a second.
pub fn read(
    plan: &ReadPlan,
    cmp: &mut Comparison,
    progress: &mut dyn FnMut(&Progress),
) -> Result<ReadSummary, VerifyError> {
    let ReadPlan { kafka, topics, start, idle, isolation } = plan;
    let (start, idle) = (*start, *idle);
    let consumer = consumer(kafka, *isolation)?;
    let mut summary = ReadSummary::default();
    let (assignment, mut ends) = assign(&consumer, kafka, topics, start, &mut summary)?;
    if assignment.count() == 0 {
        return Ok(summary);
    }
    let started = Instant::now();
    let mut last_record = Instant::now();
    let mut last_progress = Instant::now();
    let mut ends_reached: Option<Instant> = None;
    loop {
        if ends.count == 0 {
            let at = *ends_reached.get_or_insert_with(Instant::now);
            let quiet = last_record.elapsed() >= QUIET;
            if (cmp.missing_now() == 0 && quiet) || at.elapsed() >= idle {
                break;
            }
        } else if last_record.elapsed() >= idle {
            summary.incomplete = ends.incomplete();
            break;
        }
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                last_record = Instant::now();
                observe(cmp, &m);
                ends.advance(m.topic(), m.partition(), m.offset());
            }
            // Transient (a broker restarting, a leader moving): librdkafka retries by itself.
            Some(Err(e)) => tracing::debug!(error = %e, "consumer error"),
            None => ends.catch_up(&consumer),
        }
        if last_progress.elapsed() >= PROGRESS_EVERY {
            last_progress = Instant::now();
            progress(&Progress {
                records: cmp.records_consumed(),
                elapsed: started.elapsed(),
                partitions: summary.partitions,
                partitions_done: summary.partitions - ends.count,
                remaining: ends.remaining(),
                missing: cmp.missing_now(),
            });
        }
    }
    Ok(summary)
}
