//! The relay's durable memory of the slot it streams from, kept in Kafka as Kafka Connect keeps a
//! source connector's offsets: a compacted topic (`offset.storage.topic`, `pgoutbox-offsets` by
//! default), key `["<connector name>",{"server":"<topic.prefix>"}]`, value Debezium's PostgreSQL
//! offset (`lsn`, `lsn_commit`, `lsn_proc`, `ts_usec`) plus the slot's name.
//!
//! Why Kafka and not the database: the record must outlive the slot, and the usual ways a slot is lost
//! (a failover to a standby before PostgreSQL 17, a restore, `max_slot_wal_keep_size`) are the ones in
//! which the database's own state is suspect; the relay can always write to Kafka (it publishes there),
//! while a replication user often may not create tables (PostgreSQL 15 took CREATE on `public` away
//! from everyone), and a standby it decodes from is read-only. It is also where a Connect operator
//! looks for offsets.
//!
//! What the record is for: when the slot is missing at start but the record names it, the relay has
//! streamed from that slot before, so creating a new slot at the current WAL position would skip every
//! event committed since the recorded position. The session refuses that (or takes a new snapshot when
//! `snapshot.mode` asks for one), instead of silently starting over.

use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer as _, ProducerContext};
use rdkafka::{Offset, TopicPartitionList};
use serde_json::json;

use super::producer::client_config;
use super::topics::{ensure_compacted, Compacted, TopicError};
use crate::config::KafkaConfig;
use crate::lsn::Lsn;

/// Kafka Connect's default for `offset.storage.topic` is `connect-offsets`; pgoutbox keeps its own
/// unless told otherwise, so that a Connect cluster still running beside it is never disturbed.
pub use crate::config::DEFAULT_OFFSET_TOPIC as DEFAULT_TOPIC;

/// How long a read of the offsets topic to its end may take; past it the read is an error (never
/// "nothing recorded": that would recreate a lost slot past committed events without a word).
const READ_DEADLINE: Duration = Duration::from_secs(30);
/// How often, and how far apart, a topic that metadata says does not exist is asked for again
/// before that is believed: a broker that just started (or lost its controller) answers from a stale
/// metadata cache for a moment, and "no topic" must not be read as "nothing recorded".
const MISSING_CONFIRMATIONS: u32 = 3;
const MISSING_RECHECK: Duration = Duration::from_millis(500);
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// What the relay remembers of its slot: Debezium's offset map for the PostgreSQL connector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceOffset {
    /// `None` in a record Debezium wrote (same key, no slot name): that slot is the configured one.
    pub slot: Option<String>,
    /// `lsn_commit`: every transaction whose commit ends at or before it is published.
    pub lsn: Lsn,
    /// When it was written or the transaction committed, microseconds since 1970 (`ts_usec`).
    pub ts_usec: i64,
    /// `txId`: the transaction of the last event, when known.
    pub xid: Option<u32>,
    /// Set when the offset stops inside a transaction (a Kafka transaction held part of a large
    /// one, or Debezium's offset after an event).
    pub partial: Option<Partial>,
    /// `lsn_proc`: the last change handled whole (Debezium's `lastCompletelyProcessedLsn`), which
    /// its start-up check compares with the slot's `restart_lsn`; `None` when the record has none.
    pub processed: Option<Lsn>,
    /// Who wrote it, and so what it can be trusted for.
    pub written: Written,
}

/// What wrote an offset record (`"pgoutbox.mode"`), and so what it says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// The published position itself: Debezium's record, or pgoutbox's under exactly once.
    Position,
    /// A copy of the slot's confirmed position that pgoutbox recorded at least once
    /// (`"at_least_once"`), for Debezium after a rollback: pgoutbox itself trusts the slot, not
    /// this, for where to resume.
    SlotCopy,
    /// The acknowledged position under `lsn.flush.mode=manual` (`"manual"`): the slot is the
    /// operator's and stays behind it, as under Debezium.
    Manual,
}

/// How far into the transaction after `lsn_commit` the published events go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Partial {
    /// `txId`: the transaction.
    pub xid: u32,
    /// `lsn`: the change of the last published event.
    pub lsn: Lsn,
    /// `lsn_events_processed`: changes at `lsn` already handled (several rows can share one LSN,
    /// e.g. a multi-row INSERT ... SELECT or COPY).
    pub events: u64,
}

impl SourceOffset {
    /// A position between transactions.
    pub fn at_commit(slot: &str, lsn: Lsn) -> Self {
        SourceOffset {
            slot: Some(slot.to_string()),
            lsn,
            ts_usec: now_usec(),
            xid: None,
            partial: None,
            processed: Some(lsn),
            written: Written::Position,
        }
    }

    /// The slot's confirmed position, recorded at least once as Connect records Debezium's offsets:
    /// what Debezium resumes from after a rollback (see [`Written::SlotCopy`]).
    pub fn slot_copy(slot: &str, lsn: Lsn) -> Self {
        SourceOffset { written: Written::SlotCopy, ..Self::at_commit(slot, lsn) }
    }

    /// The acknowledged position under `lsn.flush.mode=manual` (see [`Written::Manual`]).
    pub fn manual(slot: &str, lsn: Lsn) -> Self {
        SourceOffset { written: Written::Manual, ..Self::at_commit(slot, lsn) }
    }

    /// The record's value, as Debezium's PostgreSQL connector writes it, plus the slot's name.
    /// Inside a transaction `lsn_proc` and `lsn_commit` stay at the last commit and `lsn` names
    /// the last event, as Debezium's offsets do.
    pub fn value(&self) -> Vec<u8> {
        let c = self.lsn.0;
        let mut v = serde_json::Map::new();
        if let Some(p) = self.processed {
            v.insert("lsn_proc".into(), json!(p.0));
        }
        v.insert("lsn_commit".into(), json!(c));
        match self.partial {
            None => {
                v.insert("lsn".into(), json!(c));
                if let Some(x) = self.xid {
                    v.insert("txId".into(), json!(x));
                }
                v.insert("messageType".into(), json!("COMMIT"));
            }
            Some(p) => {
                v.insert("lsn".into(), json!(p.lsn.0));
                v.insert("txId".into(), json!(p.xid));
                v.insert("messageType".into(), json!("INSERT"));
                v.insert("lsn_events_processed".into(), json!(p.events));
            }
        }
        v.insert("ts_usec".into(), json!(self.ts_usec));
        v.insert("pgoutbox.slot".into(), json!(self.slot.as_deref()));
        match self.written {
            Written::Position => {}
            Written::SlotCopy => {
                v.insert("pgoutbox.mode".into(), json!("at_least_once"));
            }
            Written::Manual => {
                v.insert("pgoutbox.mode".into(), json!("manual"));
            }
        }
        serde_json::Value::Object(v).to_string().into_bytes()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum OffsetError {
    #[error("offsets topic `{topic}`: {source}")]
    Kafka {
        topic: String,
        #[source]
        source: rdkafka::error::KafkaError,
    },
    #[error("offsets topic `{topic}`: Kafka did not answer in time")]
    Timeout { topic: String },
    #[error("offsets topic `{topic}`: its metadata says {code}; check the topic and that the principal may describe and read it")]
    Metadata { topic: String, code: rdkafka::types::RDKafkaErrorCode },
    #[error("offsets topic: {0}")]
    Topic(#[from] TopicError),
}

impl OffsetError {
    /// Needs an operator (a topic that is not compacted, a creation the cluster refuses), as
    /// opposed to a broker that did not answer.
    pub fn is_permanent(&self) -> bool {
        matches!(self, OffsetError::Topic(e) if e.is_permanent())
    }
}

/// The delivery opaque of an offset record sent by the relay's own producer.
pub const OFFSET_RECORD: usize = usize::MAX;

#[derive(Clone)]
pub struct OffsetStore {
    kafka: KafkaConfig,
    topic: String,
    key: Vec<u8>,
    partitions: i32,
    replication: Option<i32>,
    /// Set once the topic is known to exist, compacted (checked at the first write).
    ensured: std::sync::Arc<tokio::sync::OnceCell<()>>,
}

impl OffsetStore {
    pub fn new(kafka: &KafkaConfig, topic: &str, connector_name: &str, server: &str) -> Self {
        let key = serde_json::to_vec(&json!([connector_name, { "server": server }]))
            .expect("a JSON array of strings always serialises");
        OffsetStore {
            kafka: kafka.clone(),
            topic: topic.to_string(),
            key,
            partitions: 25,
            replication: None,
            ensured: Default::default(),
        }
    }

    /// The store of `cfg`'s connector: `offset.storage.topic`, keyed by `name` and `topic.prefix`,
    /// created with `offset.storage.partitions` and `offset.storage.replication.factor`.
    pub fn for_connector(cfg: &crate::config::Config) -> Self {
        let mut store = Self::new(&cfg.kafka, &cfg.offset_topic, &cfg.connector_name, &cfg.topic_prefix);
        store.partitions = cfg.offset_partitions;
        store.replication = cfg.offset_replication;
        store
    }

    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// The newest record for this connector, if any (a tombstone clears it). A topic that metadata
    /// says is missing is asked for again before that is believed.
    pub async fn load(&self) -> Result<Option<SourceOffset>, OffsetError> {
        self.load_confirming(true).await
    }

    /// [`OffsetStore::load`], believing the first answer that the topic is missing: for a reader
    /// whose worst outcome of a stale answer is publishing again what the slot already passed (at
    /// least once with an existing slot), not losing anything. It saves the second of rechecks
    /// whenever the topic does not exist yet.
    async fn load_confirming(&self, confirm_missing: bool) -> Result<Option<SourceOffset>, OffsetError> {
        let store = self.clone();
        tokio::task::spawn_blocking(move || store.load_blocking(confirm_missing))
            .await
            .unwrap_or_else(|_| Err(OffsetError::Timeout { topic: self.topic.clone() }))
    }

    fn load_blocking(&self, confirm_missing: bool) -> Result<Option<SourceOffset>, OffsetError> {
        let err = |source| OffsetError::Kafka { topic: self.topic.clone(), source };
        // librdkafka's assign needs a group.id; nothing is committed, so the group needs no grant
        // (a denied coordinator lookup is not logged as an error, see QuietEof).
        let consumer: BaseConsumer<QuietEof> = client_config(&self.kafka)
            .set("group.id", "pgoutbox-offsets-reader")
            .set("enable.auto.commit", "false")
            // Records of aborted (or still open) Kafka transactions are not offsets: under exactly
            // once only a committed transaction's record says what was published.
            .set("isolation.level", "read_committed")
            // The end of each partition as the fetcher sees it (past compaction gaps and
            // transaction markers, which no delivered record shows).
            .set("enable.partition.eof", "true")
            .create_with_context(QuietEof)
            .map_err(err)?;
        let md = consumer.fetch_metadata(Some(&self.topic), Duration::from_secs(10)).map_err(err)?;
        let mut tpl = TopicPartitionList::new();
        // Each partition's end when the read began: the read is complete when it got there.
        let mut ends = Vec::new();
        for t in md.topics() {
            match t.error().map(rdkafka::types::RDKafkaErrorCode::from) {
                None => {}
                // The topic does not exist (asked again, so that stale metadata is not taken for
                // it): nothing was ever recorded, or the topic was deleted. The session tells the
                // two apart where it matters (a slot that exists under exactly once).
                Some(code @ rdkafka::types::RDKafkaErrorCode::UnknownTopicOrPartition) => {
                    if !confirm_missing || !self.exists_blocking(&consumer)? {
                        return Ok(None);
                    }
                    // It exists after all: the metadata was stale; the caller tries again.
                    return Err(OffsetError::Metadata { topic: self.topic.clone(), code });
                }
                // Anything else is an error, never "nothing recorded".
                Some(code) => return Err(OffsetError::Metadata { topic: self.topic.clone(), code }),
            }
            for p in t.partitions() {
                let (low, high) = consumer.fetch_watermarks(t.name(), p.id(), Duration::from_secs(10)).map_err(err)?;
                // An empty partition (never written, or emptied by retention) has nothing to read.
                if high > low {
                    tpl.add_partition_offset(t.name(), p.id(), Offset::Beginning).map_err(err)?;
                    ends.push((p.id(), high));
                }
            }
        }
        if ends.is_empty() {
            return Ok(None);
        }
        consumer.assign(&tpl).map_err(err)?;
        let start = std::time::Instant::now();
        let mut found = None;
        let mut at_end = std::collections::BTreeSet::new();
        loop {
            if start.elapsed() > READ_DEADLINE {
                return Err(OffsetError::Timeout { topic: self.topic.clone() });
            }
            match consumer.poll(Duration::from_millis(100)) {
                Some(Ok(m)) if m.key() == Some(self.key.as_slice()) => found = m.payload().and_then(parse_value),
                Some(Ok(_)) => {}
                Some(Err(rdkafka::error::KafkaError::PartitionEOF(p))) => {
                    at_end.insert(p);
                }
                Some(Err(e)) => tracing::debug!(error = %e, topic = %self.topic, "reading the offsets topic"),
                None => {}
            }
            // Compaction and transaction markers leave offsets no record stands at: the position,
            // not the last record read, says how far the read got.
            let positions = consumer.position().map_err(err)?;
            let done = ends.iter().all(|(p, high)| {
                at_end.contains(p)
                    || matches!(positions.find_partition(&self.topic, *p).map(|e| e.offset()), Some(Offset::Offset(o)) if o >= *high)
            });
            if done {
                return Ok(found);
            }
        }
    }

    /// Whether the topic exists. A metadata answer that it does not is asked again a few times
    /// before it is believed (a stale broker cache says so for a moment after a restart).
    pub async fn exists(&self) -> Result<bool, OffsetError> {
        let store = self.clone();
        tokio::task::spawn_blocking(move || {
            let consumer: BaseConsumer<QuietEof> = client_config(&store.kafka)
                .set("group.id", "pgoutbox-offsets-reader")
                .set("allow.auto.create.topics", "false")
                .create_with_context(QuietEof)
                .map_err(|source| OffsetError::Kafka { topic: store.topic.clone(), source })?;
            store.exists_blocking(&consumer)
        })
        .await
        .unwrap_or_else(|_| Err(OffsetError::Timeout { topic: self.topic.clone() }))
    }

    fn exists_blocking(&self, consumer: &BaseConsumer<QuietEof>) -> Result<bool, OffsetError> {
        use rdkafka::types::RDKafkaErrorCode as C;
        for attempt in 0..MISSING_CONFIRMATIONS {
            if attempt > 0 {
                std::thread::sleep(MISSING_RECHECK);
            }
            let md = consumer
                .fetch_metadata(Some(&self.topic), Duration::from_secs(10))
                .map_err(|source| OffsetError::Kafka { topic: self.topic.clone(), source })?;
            let Some(t) = md.topics().iter().find(|t| t.name() == self.topic) else { continue };
            match t.error().map(C::from) {
                None if !t.partitions().is_empty() => return Ok(true),
                None | Some(C::UnknownTopicOrPartition) => {}
                Some(code) => return Err(OffsetError::Metadata { topic: self.topic.clone(), code }),
            }
        }
        Ok(false)
    }

    /// The newest record, when it speaks for `slot`: one naming another slot was written for a slot
    /// this connector used before `slot.name` changed, and says nothing about this one.
    pub async fn load_for_slot(&self, slot: &str) -> Result<Option<SourceOffset>, OffsetError> {
        Ok(self.load().await?.filter(|o| o.slot.as_deref().map_or(true, |s| s == slot)))
    }

    /// [`OffsetStore::load_for_slot`] believing a first "no such topic" (see `load_confirming`).
    pub async fn load_for_slot_unconfirmed(&self, slot: &str) -> Result<Option<SourceOffset>, OffsetError> {
        Ok(self.load_confirming(false).await?.filter(|o| o.slot.as_deref().map_or(true, |s| s == slot)))
    }

    /// Records `offset` and waits for the broker's acknowledgement. Creates the topic (compacted)
    /// when it is missing, and refuses one that is not compacted.
    pub async fn store(&self, offset: &SourceOffset) -> Result<(), OffsetError> {
        self.write(Some(offset.value())).await
    }

    /// The offset record with `value`, for a transactional producer (exactly once); its opaque,
    /// [`OFFSET_RECORD`], is no event's sequence number.
    pub fn record<'a>(&'a self, value: &'a [u8]) -> crate::kafka::Record<'a> {
        BaseRecord::with_opaque_to(&self.topic, OFFSET_RECORD).key(&self.key[..]).payload(value)
    }

    /// Creates the topic (compacted) when it is missing, and refuses one that is not compacted;
    /// checked once.
    pub async fn ensure_topic(&self) -> Result<(), OffsetError> {
        self.ensured
            .get_or_try_init(|| async {
                let t = Compacted {
                    topic: &self.topic,
                    partitions: self.partitions,
                    replication: self.replication,
                    key_topic: "offset.storage.topic",
                    key_partitions: "offset.storage.partitions",
                    key_replication: "offset.storage.replication.factor",
                };
                ensure_compacted(&self.kafka, &t).await.map_err(OffsetError::from)
            })
            .await
            .map(|_| ())
    }

    /// Forgets this connector's record (a tombstone), e.g. after an operator accepted a lost slot.
    pub async fn clear(&self) -> Result<(), OffsetError> {
        self.write(None).await
    }

    async fn write(&self, value: Option<Vec<u8>>) -> Result<(), OffsetError> {
        self.ensure_topic().await?;
        let store = self.clone();
        tokio::task::spawn_blocking(move || store.write_blocking(value.as_deref()))
            .await
            .unwrap_or_else(|_| Err(OffsetError::Timeout { topic: self.topic.clone() }))
    }

    /// Sends the record and serves the producer on this thread until its delivery report. Not a
    /// FutureProducer: dropping one joins its polling thread, which sleeps in 100 ms polls, and that
    /// delayed every session's first event by 0.1 s.
    fn write_blocking(&self, value: Option<&[u8]>) -> Result<(), OffsetError> {
        let err = |source| OffsetError::Kafka { topic: self.topic.clone(), source };
        let producer: BaseProducer<Delivered> = client_config(&self.kafka)
            .set("acks", "all")
            // One record at a time, each waited for, so nothing can be reordered, and a retried
            // duplicate is the same key and value on a compacted topic. An idempotent producer here
            // first waited for its producer id (librdkafka's 500 ms PID timer, when the broker it
            // learned from the bootstrap one was not up yet), which delayed every session's first
            // event by ~0.5 s.
            .set("enable.idempotence", "false")
            .set("partitioner", "murmur2_random")
            .set("linger.ms", "0")
            .set("message.timeout.ms", WRITE_TIMEOUT.as_millis().to_string())
            .create_with_context(Delivered::default())
            .map_err(err)?;
        let mut record = BaseRecord::<[u8], [u8]>::to(&self.topic).key(&self.key);
        if let Some(v) = value {
            record = record.payload(v);
        }
        producer.send(record).map_err(|(e, _)| err(e))?;
        // Flushing serves the delivery report on this thread. librdkafka fails the record at
        // `message.timeout.ms`; the flush's own bound is only a backstop.
        let timeout = || OffsetError::Timeout { topic: self.topic.clone() };
        producer.flush(WRITE_TIMEOUT + Duration::from_secs(5)).map_err(|_| timeout())?;
        let report = producer.context().0.lock().unwrap_or_else(|e| e.into_inner()).take();
        report.ok_or_else(timeout)?.map_err(err)
    }
}

/// The offsets reader's client context: the end of a partition, which it asks to be told of, and a
/// group coordinator it may not look up (it assigns partitions and commits nothing) are not errors
/// to log; librdkafka reports both through the error callback.
struct QuietEof;

impl rdkafka::ClientContext for QuietEof {
    fn error(&self, error: rdkafka::error::KafkaError, reason: &str) {
        use rdkafka::types::RDKafkaErrorCode as C;
        let code = error.rdkafka_error_code();
        if matches!(error, rdkafka::error::KafkaError::PartitionEOF(_))
            || matches!(code, Some(C::PartitionEOF | C::GroupAuthorizationFailed))
        {
            tracing::debug!(target: "librdkafka", %error, "{reason}");
        } else {
            tracing::error!(target: "librdkafka", %error, "{reason}");
        }
    }
}

impl rdkafka::consumer::ConsumerContext for QuietEof {}

/// The delivery report of the one record [`OffsetStore::write_blocking`] sends.
#[derive(Default)]
struct Delivered(std::sync::Mutex<Option<Result<(), rdkafka::error::KafkaError>>>);

impl rdkafka::ClientContext for Delivered {}

impl ProducerContext for Delivered {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &rdkafka::producer::DeliveryResult<'_>, _: ()) {
        let outcome = result.as_ref().map(|_| ()).map_err(|(e, _)| e.clone());
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(outcome);
    }
}

/// Reads pgoutbox's records and Debezium's. `lsn_commit` is where whole transactions end (Debezium
/// keeps it at the previous commit while inside a transaction); a record with a `txId` and a change
/// as its `messageType` stops inside that transaction, at the change `lsn`. Without
/// `lsn_events_processed` (Debezium before 3.7) one change at `lsn` counts as handled: any others
/// sharing that LSN are published again rather than lost.
fn parse_value(bytes: &[u8]) -> Option<SourceOffset> {
    let v: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    let last = Lsn(v.get("lsn")?.as_u64()?);
    let commit = v.get("lsn_commit").and_then(|c| c.as_u64()).map_or(last, Lsn);
    let xid = v.get("txId").and_then(|x| x.as_u64()).and_then(|x| u32::try_from(x).ok());
    let change = v
        .get("messageType")
        .and_then(|m| m.as_str())
        .is_some_and(|m| matches!(m, "INSERT" | "UPDATE" | "DELETE" | "TRUNCATE"));
    // The event's LSN says nothing about being past `lsn_commit`: a long transaction's changes are
    // written to the WAL before the commits of transactions that ended while it ran.
    let partial = match xid {
        Some(xid) if change => Some(Partial {
            xid,
            lsn: last,
            events: v.get("lsn_events_processed").and_then(|n| n.as_u64()).unwrap_or(1),
        }),
        _ => None,
    };
    Some(SourceOffset {
        slot: v.get("pgoutbox.slot").and_then(|s| s.as_str()).map(str::to_string),
        lsn: commit,
        ts_usec: v.get("ts_usec").and_then(|t| t.as_i64()).unwrap_or(0),
        xid,
        partial,
        processed: v.get("lsn_proc").and_then(|p| p.as_u64()).map(Lsn),
        written: match v.get("pgoutbox.mode").and_then(|m| m.as_str()) {
            Some("at_least_once") => Written::SlotCopy,
            Some("manual") => Written::Manual,
            _ => Written::Position,
        },
    })
}

pub fn now_usec() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_micros() as i64).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_key_is_connects_json_and_the_value_reads_back() {
        let kafka = KafkaConfig {
            bootstrap_servers: "x:1".into(),
            producer_overrides: Default::default(),
            client_security: Default::default(),
            topic_creation: None,
        };
        let s = OffsetStore::new(&kafka, DEFAULT_TOPIC, "inventory-connector", "dbserver1");
        assert_eq!(s.key, br#"["inventory-connector",{"server":"dbserver1"}]"#);
        let v = br#"{"lsn_proc":100,"lsn_commit":100,"lsn":100,"ts_usec":7,"pgoutbox.slot":"debezium"}"#;
        let at = |slot: Option<&str>, lsn, ts_usec| SourceOffset {
            slot: slot.map(str::to_string),
            lsn: Lsn(lsn),
            ts_usec,
            xid: None,
            partial: None,
            processed: Some(Lsn(lsn)),
            written: Written::Position,
        };
        assert_eq!(parse_value(v), Some(at(Some("debezium"), 100, 7)));
        // Debezium's own offset (no slot name) says the same: this connector streamed up to there.
        // Without `lsn_proc` nothing says what was handled whole.
        assert_eq!(parse_value(br#"{"lsn":100}"#), Some(SourceOffset { processed: None, ..at(None, 100, 0) }));
        assert_eq!(parse_value(br#"{"lsn":100,"lsn_proc":80}"#).unwrap().processed, Some(Lsn(80)));
        // Debezium's offset after an event: lsn_commit at the previous commit, lsn at the event.
        let dbz = br#"{"lsn_proc":90,"lsn_commit":90,"lsn":120,"txId":77,"ts_usec":5,"messageType":"INSERT","lsn_events_processed":2}"#;
        let o = parse_value(dbz).unwrap();
        assert_eq!((o.lsn, o.xid), (Lsn(90), Some(77)));
        assert_eq!(o.partial, Some(Partial { xid: 77, lsn: Lsn(120), events: 2 }));
        // Before Debezium 3.7: no count; one change at that LSN counts as handled.
        let old = br#"{"lsn_proc":90,"lsn_commit":90,"lsn":120,"txId":77,"messageType":"INSERT"}"#;
        assert_eq!(parse_value(old).unwrap().partial.map(|p| p.events), Some(1));
        // What pgoutbox writes reads back, inside a transaction and between two.
        // A long transaction's change can lie before the previous commit in the WAL.
        for partial in [
            None,
            Some(Partial { xid: 9, lsn: Lsn(500), events: 3 }),
            Some(Partial { xid: 9, lsn: Lsn(300), events: 1 }),
        ] {
            let o = SourceOffset {
                slot: Some("s".into()),
                lsn: Lsn(400),
                ts_usec: 1,
                xid: Some(9),
                partial,
                processed: Some(Lsn(400)),
                written: Written::Position,
            };
            assert_eq!(parse_value(&o.value()), Some(o));
        }
        // At least once: a copy of the slot's position, marked as such.
        let copy = SourceOffset::slot_copy("s", Lsn(700));
        assert!(String::from_utf8(copy.value()).unwrap().contains(r#""pgoutbox.mode":"at_least_once""#));
        assert_eq!(parse_value(&copy.value()), Some(copy));
        // lsn.flush.mode=manual: the position itself, marked as the operator's slot's.
        let manual = SourceOffset::manual("s", Lsn(800));
        assert!(String::from_utf8(manual.value()).unwrap().contains(r#""pgoutbox.mode":"manual""#));
        assert_eq!(parse_value(&manual.value()), Some(manual));
        assert_eq!(parse_value(b"not json"), None);
    }
}
