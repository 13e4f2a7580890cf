//! Distributed mode (`group.id`): Kafka is the cluster's store, as in Kafka Connect.
//!
//! - Connector configs and target states live in the compacted `config.storage.topic` (one
//!   partition), under Connect's keys and shapes: `connector-<name>` -> `{"properties":{...}}`,
//!   `target-state-<name>` -> `{"state":..,"state.v2":..}`, `restart-connector-<name>`. A REST
//!   call on any worker writes there; every worker reads the whole topic, so any worker answers
//!   with the cluster's configs.
//! - Statuses live in the compacted `status.storage.topic`: `status-connector-<name>` and
//!   `status-task-<name>-0`, written by the worker running the connector, so any worker answers
//!   with the cluster's statuses.
//! - Who runs what comes from Kafka's group coordinator, not from a protocol of ours: every worker
//!   is a member of the consumer group `group.id` subscribed to `offset.storage.topic` with the
//!   round-robin assignor. Each connector has a slot number, written in its config record
//!   (`pgoutbox.slot`, beside Connect's `properties`): a create takes the lowest slot no connector
//!   has, an update keeps it. The connector belongs to the worker assigned partition
//!   `slot mod P` (P = that topic's partitions): round-robin deals partitions out one by one, so
//!   with up to P connectors no worker has more than its share, and creating or deleting a
//!   connector moves no other (its slot is its own, whatever else comes and goes). A record
//!   without a slot (written by Connect, or by an older pgoutbox) takes one from a hash of the
//!   connector's name, the same on every worker. A worker that
//!   dies stops heartbeating; after `session.timeout.ms` the coordinator rebalances and the
//!   survivors take its partitions, hence its connectors.
//! - Writes are linearizable through the config topic's order, without a leader: every worker
//!   applies the same records in the same order, so a record's outcome (was the connector there
//!   before it? did its condition hold?) is the same on every worker, and its writer learns it by
//!   reading its own record back. A create is a conditional record ("only if absent"), a PATCH one
//!   conditioned on the config it edited: of two concurrent creates of one name through two
//!   workers, the first in the topic wins (201) and the other is answered 409. A losing
//!   conditional record would, once compaction removed the older records of its key, be the one
//!   left; its writer therefore writes the current config again after it (conditioned on it still
//!   being current), and a condition on a record that compaction removed holds.
//! - The replication slot stays the lock: while an assignment moves, the old owner stops its
//!   pipeline gracefully (acknowledgements awaited, position confirmed) and the new one stands by
//!   until the slot is free, so a connector never streams twice.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use serde_json::{json, Value};
use tokio::sync::{watch, Notify};

use super::{State, Target, WorkerError};
use crate::config::{ConfigError, KafkaConfig};
use crate::error::RelayError;

/// How long a REST write waits to read itself back from the config topic.
const SYNC_TIMEOUT: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(200);

/// The worker keys of distributed mode.
#[derive(Debug, Clone)]
pub struct Settings {
    pub group_id: String,
    pub config_topic: String,
    pub status_topic: String,
    pub offset_topic: String,
    pub config_replication: i32,
    pub status_replication: i32,
    pub offset_replication: i32,
    pub status_partitions: i32,
    pub offset_partitions: i32,
    pub session_timeout_ms: u32,
    pub heartbeat_interval_ms: u32,
    pub rebalance_timeout_ms: u32,
}

/// Keys of a distributed worker that are the worker's alone: they never reach a connector's
/// configuration (`heartbeat.interval.ms` would otherwise turn on Debezium's heartbeats).
pub fn is_worker_key(key: &str) -> bool {
    const EXACT: &[&str] = &[
        "group.id",
        "session.timeout.ms",
        "heartbeat.interval.ms",
        "rebalance.timeout.ms",
        "worker.sync.timeout.ms",
        "worker.unsync.backoff.ms",
        "scheduled.rebalance.max.delay.ms",
        "connect.protocol",
        "offset.storage.partitions",
        "offset.storage.replication.factor",
        "inter.worker.key.generation.algorithm",
        "inter.worker.key.size",
        "inter.worker.key.ttl.ms",
        "inter.worker.signature.algorithm",
        "inter.worker.verification.algorithms",
    ];
    EXACT.contains(&key) || key.starts_with("config.storage.") || key.starts_with("status.storage.")
}

impl Settings {
    /// `None` for a standalone worker (no `group.id`).
    pub fn from_props(props: &BTreeMap<String, String>) -> Result<Option<Settings>, ConfigError> {
        let get = |k: &str| props.get(k).map(|v| v.trim()).filter(|v| !v.is_empty());
        let Some(group_id) = get("group.id") else { return Ok(None) };
        let required = |k: &str, what: &str| {
            get(k).map(str::to_string).ok_or_else(|| ConfigError::Missing {
                key: k.to_string(),
                hint: format!("a distributed worker (group.id={group_id}) keeps {what} there, as Connect does"),
            })
        };
        let int = |k: &str, default: i64, min: i64| -> Result<i64, ConfigError> {
            let Some(v) = get(k) else { return Ok(default) };
            match v.parse::<i64>() {
                Ok(n) if n >= min && n <= i64::from(i32::MAX) => Ok(n),
                _ => Err(ConfigError::invalid(k, format!("is not an integer of at least {min}"))),
            }
        };
        // Connect's defaults; -1 asks the broker for its own replication factor.
        let replication = |k: &str| -> Result<i32, ConfigError> {
            let n = int(k, 3, -1)?;
            if n == 0 {
                return Err(ConfigError::invalid(k, "must be at least 1, or -1 for the broker's default"));
            }
            Ok(n as i32)
        };
        let settings = Settings {
            group_id: group_id.to_string(),
            config_topic: required("config.storage.topic", "connector configurations")?,
            status_topic: required("status.storage.topic", "connector statuses")?,
            offset_topic: required("offset.storage.topic", "source offsets")?,
            config_replication: replication("config.storage.replication.factor")?,
            status_replication: replication("status.storage.replication.factor")?,
            offset_replication: replication("offset.storage.replication.factor")?,
            status_partitions: int("status.storage.partitions", 5, 1)? as i32,
            offset_partitions: int("offset.storage.partitions", 25, 1)? as i32,
            session_timeout_ms: int("session.timeout.ms", 10_000, 1)? as u32,
            heartbeat_interval_ms: int("heartbeat.interval.ms", 3_000, 1)? as u32,
            rebalance_timeout_ms: int("rebalance.timeout.ms", 60_000, 1)? as u32,
        };
        let topics = [&settings.config_topic, &settings.status_topic, &settings.offset_topic];
        if topics.iter().enumerate().any(|(i, t)| topics[..i].contains(t)) {
            return Err(ConfigError::invalid(
                "config.storage.topic",
                "config.storage.topic, status.storage.topic and offset.storage.topic must be three different topics",
            ));
        }
        if settings.heartbeat_interval_ms >= settings.session_timeout_ms {
            return Err(ConfigError::invalid("heartbeat.interval.ms", "must be lower than session.timeout.ms"));
        }
        Ok(Some(settings))
    }
}

/// A connector this worker should run: its name, its own configuration and its target state.
pub type Owned = (String, BTreeMap<String, String>, Target);

/// A connector's status as the status topic has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub state: State,
    pub worker_id: Option<String>,
}

/// What a config-topic record did, as every worker applies it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Outcome {
    /// The connector existed just before the record.
    existed: bool,
    /// The record's condition held (always, for unconditional records).
    applied: bool,
}

/// How many outcomes are kept for writers to read back (they read theirs within a second).
const OUTCOMES_KEPT: usize = 10_000;

/// A conditional connector-config record: pgoutbox's field beside Connect's `properties`, which
/// Connect's readers ignore.
const CONDITION: &str = "pgoutbox.condition";
/// The connector's slot number, likewise beside `properties`.
const SLOT: &str = "pgoutbox.slot";
/// A record that changes nothing (a restore where the connector is absent): skipped by every
/// reader, and the last of its key leaves the connector absent.
const NOOP: &str = "pgoutbox.noop";
/// A create's initial target state (KIP-980's `initial_state`), beside `properties`: applied with
/// the create itself, so a connector created STOPPED never streams, and a create that loses writes
/// no target over the winner's.
const INITIAL: &str = "pgoutbox.initial_state";
/// Connect's key prefix for a cluster-wide log level (KIP-976): `logger-cluster-<namespace>` ->
/// `{"level": "DEBUG"}`.
const LOGGER_PREFIX: &str = "logger-cluster-";

#[derive(Default)]
struct View {
    configs: BTreeMap<String, BTreeMap<String, String>>,
    /// Each connector's slot number (see the module doc).
    slots: BTreeMap<String, u32>,
    /// The offset of the record each connector's config came from, and every offset at which a
    /// config record of the connector was read (a condition on an offset never read refers to a
    /// record compaction removed).
    config_offsets: BTreeMap<String, i64>,
    seen_offsets: BTreeSet<i64>,
    /// Outcomes of the records read since the initial load, by offset, for their writers.
    outcomes: BTreeMap<i64, Outcome>,
    targets: BTreeMap<String, Target>,
    /// `status-connector-*` (state, worker id) and `status-task-*-0` (state, trace) records, by
    /// connector.
    connector_status: BTreeMap<String, (String, Option<String>)>,
    task_status: BTreeMap<String, (String, Option<String>)>,
    /// Restart requests read after the initial load, for the owner to carry out.
    restarts: Vec<(String, bool)>,
    /// The topics each connector has produced to (`status-topic-<topic>:connector-<name>`, Connect's
    /// records, KIP-558).
    topics: BTreeMap<String, BTreeSet<String>>,
    loaded: bool,
}

/// Connect's key of an active-topic record: `status-topic-<topic>:connector-<connector>`.
const TOPIC_PREFIX: &str = "status-topic-";
const TOPIC_SEPARATOR: &str = ":connector-";

/// What a worker does when an active-topic record is deleted: (connector, topic).
pub type TopicResetHook = Box<dyn Fn(&str, &str) + Send + Sync>;

pub struct Cluster {
    /// See [`Cluster::on_topic_reset`].
    topic_reset_hook: std::sync::OnceLock<TopicResetHook>,
    pub settings: Settings,
    worker_id: String,
    producer: FutureProducer,
    view: Mutex<View>,
    /// The next config-topic offset to be read: a write is visible once this passes it.
    applied: watch::Sender<i64>,
    /// Configs, target states, restarts or the assignment changed.
    pub changed: Notify,
    /// The partitions of `offset.storage.topic` the group assigned this worker.
    assignment: Mutex<Option<BTreeSet<i32>>>,
    generation: std::sync::atomic::AtomicU64,
    /// Rebalances as this member saw them, and its consumer's statistics, for the metrics.
    rebalances: Mutex<Rebalances>,
    member_stats: crate::metrics::SharedClientStats,
    /// Partitions of `offset.storage.topic`: the slots connectors are dealt into.
    partitions: i32,
    stop: AtomicBool,
    threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
}

fn kafka_error(what: &str) -> impl Fn(rdkafka::error::KafkaError) -> RelayError + '_ {
    move |e| RelayError::Kafka(crate::kafka::Error::transient(what.to_string(), e))
}

impl Cluster {
    /// Creates the three topics when missing, joins the group and reads the config topic to its
    /// end before returning, so the first REST answer already has the cluster's connectors.
    pub async fn start(settings: Settings, kafka: KafkaConfig, worker_id: String) -> Result<Arc<Cluster>, RelayError> {
        create_topics(&settings, &kafka).await?;
        let (config_end, partitions) = {
            let kafka = kafka.clone();
            let s = settings.clone();
            tokio::task::spawn_blocking(move || layout(&kafka, &s))
                .await
                .map_err(|e| RelayError::TaskStopped(format!("reading the cluster topics' layout: {e}")))??
        };
        if partitions < 2 {
            tracing::warn!(topic = %settings.offset_topic, partitions, "offset.storage.topic has one partition: one worker runs every connector (Connect's default is 25; connectors spread over at most as many workers as it has partitions)");
        }
        let producer: FutureProducer = crate::kafka::client_config(&kafka)
            .set("acks", "all")
            .set("enable.idempotence", "true")
            .create()
            .map_err(kafka_error("the worker's config producer"))?;
        let cluster = Arc::new(Cluster {
            settings,
            worker_id,
            producer,
            view: Mutex::new(View { loaded: config_end == 0, ..View::default() }),
            applied: watch::channel(0).0,
            changed: Notify::new(),
            assignment: Mutex::new(None),
            generation: Default::default(),
            rebalances: Default::default(),
            member_stats: Default::default(),
            partitions,
            stop: AtomicBool::new(false),
            threads: Mutex::new(Vec::new()),
            topic_reset_hook: std::sync::OnceLock::new(),
        });
        // Off the runtime's thread: it waits for metadata, and the REST API answers meanwhile.
        let reader = {
            let (kafka, s) = (kafka.clone(), cluster.settings.clone());
            tokio::task::spawn_blocking(move || stores_consumer(&kafka, &s))
                .await
                .map_err(|e| RelayError::TaskStopped(format!("reading the cluster topics' metadata: {e}")))??
        };
        let member = membership_consumer(&kafka, &cluster)?;
        let c = cluster.clone();
        let t1 = std::thread::Builder::new()
            .name("cluster-stores".into())
            .spawn(move || c.read_stores(reader, config_end))
            .map_err(|e| RelayError::TaskStopped(format!("cannot start the config reader: {e}")))?;
        let c = cluster.clone();
        let t2 = std::thread::Builder::new()
            .name("cluster-member".into())
            .spawn(move || c.stay_member(member))
            .map_err(|e| RelayError::TaskStopped(format!("cannot start the group member: {e}")))?;
        cluster.threads.lock().unwrap_or_else(|e| e.into_inner()).extend([t1, t2]);
        let mut applied = cluster.applied.subscribe();
        let loaded = tokio::time::timeout(SYNC_TIMEOUT, applied.wait_for(|a| *a >= config_end)).await;
        if loaded.is_err() {
            return Err(RelayError::Kafka(crate::kafka::Error::transient(
                format!("reading config.storage.topic `{}` to its end", cluster.settings.config_topic),
                std::io::Error::new(std::io::ErrorKind::TimedOut, "not done in 30 s"),
            )));
        }
        Ok(cluster)
    }

    fn view(&self) -> std::sync::MutexGuard<'_, View> {
        self.view.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn names(&self) -> Vec<String> {
        self.view().configs.keys().cloned().collect()
    }

    pub fn config(&self, name: &str) -> Option<BTreeMap<String, String>> {
        self.view().configs.get(name).cloned()
    }

    pub fn target(&self, name: &str) -> Target {
        self.view().targets.get(name).copied().unwrap_or(Target::Running)
    }

    /// What the status topic says of `name` (`None`: no worker has reported it).
    pub fn status(&self, name: &str) -> Option<Status> {
        let v = self.view();
        let (connector_state, worker) = v.connector_status.get(name)?.clone();
        let state = match (connector_state.as_str(), v.task_status.get(name)) {
            ("STOPPED", _) => State::Stopped,
            ("PAUSED", _) => State::Paused,
            ("UNASSIGNED", _) => State::Unassigned,
            (_, Some((task, trace))) if task == "FAILED" => State::Failed(trace.clone().unwrap_or_default()),
            (_, Some((task, _))) if task == "UNASSIGNED" => State::Unassigned,
            ("FAILED", _) => State::Failed(String::new()),
            _ => State::Running,
        };
        Some(Status { state, worker_id: worker })
    }

    /// The connectors this worker should run, with their configs and targets; `None` until the
    /// config topic is read and the group has assigned this worker its partitions.
    pub fn owned(&self) -> Option<Vec<Owned>> {
        let mine = self.assignment.lock().unwrap_or_else(|e| e.into_inner()).clone()?;
        let v = self.view();
        if !v.loaded {
            return None;
        }
        Some(
            v.configs
                .iter()
                .filter(|(n, _)| {
                    let slot = v.slots.get(*n).copied().unwrap_or_else(|| name_slot(n));
                    mine.contains(&((i64::from(slot) % i64::from(self.partitions)) as i32))
                })
                .map(|(n, c)| (n.clone(), c.clone(), v.targets.get(n).copied().unwrap_or(Target::Running)))
                .collect(),
        )
    }

    /// The slot a config record of `name` carries: the connector's own when it has one, else the
    /// lowest no connector has.
    fn slot_for(&self, name: &str) -> u32 {
        let v = self.view();
        if let Some(slot) = v.slots.get(name) {
            return *slot;
        }
        let taken: BTreeSet<u32> = v.slots.values().copied().collect();
        (0..).find(|s| !taken.contains(s)).unwrap_or(0)
    }

    /// A connector config record: Connect's `properties`, pgoutbox's slot, and a condition if any.
    fn config_record(&self, name: &str, config: &BTreeMap<String, String>, condition: Option<Value>) -> Value {
        let mut record = json!({ "properties": config, SLOT: self.slot_for(name) });
        if let Some(c) = condition {
            record[CONDITION] = c;
        }
        record
    }

    /// The topics `connector` has produced to, as the status topic records them (every worker's).
    pub fn topics(&self, connector: &str) -> Vec<String> {
        self.view().topics.get(connector).map(|t| t.iter().cloned().collect()).unwrap_or_default()
    }

    /// Called with (connector, topic) as each active-topic record's deletion (a reset) is read, so
    /// that the worker running the connector counts what it sends from that moment.
    pub fn on_topic_reset(&self, hook: TopicResetHook) {
        let _ = self.topic_reset_hook.set(hook);
    }

    /// Records that `connector` produces to `topic`, as Connect's task does on its first record
    /// there; `false` when the status topic did not take it (the caller tries again).
    pub async fn publish_topic(&self, connector: &str, topic: &str) -> bool {
        let now =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
        let value = json!({"topic": {"name": topic, "connector": connector, "task": 0, "discoverTimestamp": now}});
        let key = format!("{TOPIC_PREFIX}{topic}{TOPIC_SEPARATOR}{connector}");
        match self.send_status(&key, Some(value.to_string())).await {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(connector, topic = %self.settings.status_topic, error = %e, "cannot record the connector's active topic; trying again");
                false
            }
        }
    }

    /// Forgets the topics `connector` has produced to (`PUT .../topics/reset`): their records are
    /// deleted; a topic comes back when the connector produces to it again.
    pub async fn reset_topics(&self, connector: &str) -> Result<(), WorkerError> {
        for topic in self.topics(connector) {
            let key = format!("{TOPIC_PREFIX}{topic}{TOPIC_SEPARATOR}{connector}");
            if let Err(e) = self.send_status(&key, None).await {
                tracing::warn!(connector, topic = %self.settings.status_topic, error = %e, "cannot delete the connector's active topic");
                return Err(WorkerError {
                    status: 500,
                    message: format!(
                        "cannot write to status.storage.topic `{}`; try again",
                        self.settings.status_topic
                    ),
                });
            }
        }
        Ok(())
    }

    /// One record to `status.storage.topic` (`None`: a tombstone); the caller says what failed.
    async fn send_status(&self, key: &str, payload: Option<String>) -> Result<(), rdkafka::error::KafkaError> {
        let mut record = FutureRecord::<str, str>::to(&self.settings.status_topic).key(key);
        if let Some(p) = &payload {
            record = record.payload(p);
        }
        self.producer.send(record, Duration::from_secs(30)).await.map(|_| ()).map_err(|(e, _)| e)
    }

    /// Restart requests for connectors, taken once.
    pub fn take_restarts(&self) -> Vec<(String, bool)> {
        std::mem::take(&mut self.view().restarts)
    }

    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Relaxed)
    }

    /// The config of `name` and the offset of the record it came from.
    pub fn versioned_config(&self, name: &str) -> Option<(BTreeMap<String, String>, i64)> {
        let v = self.view();
        Some((v.configs.get(name)?.clone(), *v.config_offsets.get(name)?))
    }

    /// Creates a connector unless one of that name exists by the time the record is in the
    /// topic: `Ok(false)` when another create or PUT came first (409 for the caller).
    /// `initial`: the target it starts in (running when `None`).
    pub async fn create(
        &self,
        name: &str,
        config: &BTreeMap<String, String>,
        initial: Option<Target>,
    ) -> Result<bool, WorkerError> {
        let mut record = self.config_record(name, config, Some(json!({"absent": true})));
        if let Some(t) = initial {
            record[INITIAL] = target_value(t);
        }
        let created = self.write_conditional(name, record).await?;
        if let (true, Some(t)) = (created, initial) {
            // Connect's own record of it too, for Connect workers and tools reading the topic.
            self.write(&format!("target-state-{name}"), Some(target_value(t))).await?;
        }
        Ok(created)
    }

    /// Sets a log level on every worker of the cluster, this one included (Connect's
    /// `PUT /admin/loggers/{namespace}?scope=cluster`): each applies it when it reads the record.
    pub async fn set_logger_level(&self, namespace: &str, level: &str) -> Result<(), WorkerError> {
        self.write_and_read_back(&format!("{LOGGER_PREFIX}{namespace}"), Some(json!({ "level": level }))).await?;
        Ok(())
    }

    /// Replaces a connector's config if it is still the one read at `version` (a PATCH's base):
    /// `Ok(false)` when another write came between.
    pub async fn replace_if(
        &self,
        name: &str,
        config: &BTreeMap<String, String>,
        version: i64,
    ) -> Result<bool, WorkerError> {
        let record = self.config_record(name, config, Some(json!({"offset": version})));
        self.write_conditional(name, record).await
    }

    async fn write_conditional(&self, name: &str, record: Value) -> Result<bool, WorkerError> {
        let key = format!("connector-{name}");
        let offset = self.write(&key, Some(record)).await?;
        let outcome = match self.sync(offset).await {
            Ok(()) => self.view().outcomes.remove(&offset),
            Err(e) => {
                // Not read back: whether it won is unknown, so it is treated as lost (restored
                // over), and the caller told.
                self.restore(name).await?;
                return Err(e);
            }
        };
        match outcome {
            Some(o) if o.applied => Ok(true),
            Some(_) => {
                self.restore(name).await?;
                Ok(false)
            }
            None => {
                self.restore(name).await?;
                Err(WorkerError { status: 500, message: format!("the write to config.storage.topic `{}` could not be confirmed; check the connector and try again", self.settings.config_topic) })
            }
        }
    }

    /// After a losing conditional record: the connector's current state again, so that the losing
    /// record is never the last of its key (see the module doc). Conditioned on the state still
    /// being current; a restore that loses too (another write came between) is written again, until
    /// one is last. Where the connector is absent the restore is a record that applies nothing,
    /// never a tombstone (which would delete a connector created meanwhile).
    async fn restore(&self, name: &str) -> Result<(), WorkerError> {
        let key = format!("connector-{name}");
        for _ in 0..20 {
            let record = match self.versioned_config(name) {
                Some((config, version)) => self.config_record(name, &config, Some(json!({"offset": version}))),
                None => json!({ CONDITION: {"absent": true}, NOOP: true }),
            };
            let offset = self.write(&key, Some(record)).await?;
            self.sync(offset).await?;
            if self.view().outcomes.remove(&offset).is_some_and(|o| o.applied) {
                return Ok(());
            }
        }
        Err(WorkerError {
            status: 500,
            message: format!("connector {name} is being changed by too many requests at once; try again"),
        })
    }

    /// Writes a connector's configuration (a PUT): `Ok(true)` when it did not exist before.
    pub async fn put(&self, name: &str, config: &BTreeMap<String, String>) -> Result<bool, WorkerError> {
        let outcome = self
            .write_and_read_back(&format!("connector-{name}"), Some(self.config_record(name, config, None)))
            .await?;
        Ok(!outcome.existed)
    }

    /// `Ok(false)` when the connector did not exist (404 for the caller).
    pub async fn delete(&self, name: &str) -> Result<bool, WorkerError> {
        self.write(&format!("target-state-{name}"), None).await?;
        Ok(self.write_and_read_back(&format!("connector-{name}"), None).await?.existed)
    }

    /// `Ok(false)` when the connector did not exist; the target state written for it is then
    /// taken back, so that a connector created later under the name does not inherit it.
    pub async fn set_target(&self, name: &str, target: Target) -> Result<bool, WorkerError> {
        let key = format!("target-state-{name}");
        let existed = self.write_and_read_back(&key, Some(target_value(target))).await?.existed;
        if !existed {
            self.write(&key, None).await?;
        }
        Ok(existed)
    }

    /// Asks the connector's owner, wherever it runs, to restart it. `Ok(false)` when the
    /// connector did not exist.
    pub async fn request_restart(&self, name: &str, only_failed: bool) -> Result<bool, WorkerError> {
        let value = json!({"include-tasks": true, "only-failed": only_failed});
        Ok(self.write_and_read_back(&format!("restart-connector-{name}"), Some(value)).await?.existed)
    }

    /// Writes a config-topic record and waits until this worker has applied it: what it did.
    async fn write_and_read_back(&self, key: &str, value: Option<Value>) -> Result<Outcome, WorkerError> {
        let offset = self.write(key, value).await?;
        self.sync(offset).await?;
        // Every record read after the initial load leaves its outcome; one missing was pruned,
        // which a writer that waited for it cannot see happen.
        Ok(self.view().outcomes.remove(&offset).unwrap_or(Outcome { existed: true, applied: true }))
    }

    /// Publishes the status of a connector this worker runs (`None`: it is gone from the cluster).
    /// `false` when the status topic did not take it (the caller tries again).
    pub async fn publish_status(&self, name: &str, state: Option<&State>) -> bool {
        let (connector, task) = match state {
            None => (None, None),
            Some(s) => {
                let generation = self.generation();
                let trace = match s {
                    State::Failed(t) => Value::String(t.clone()),
                    _ => Value::Null,
                };
                // As Connect reports a failed task: the connector itself still runs.
                let connector_state = if matches!(s, State::Failed(_)) { "RUNNING" } else { s.name() };
                (
                    Some(
                        json!({"state": connector_state, "trace": Value::Null, "worker_id": self.worker_id, "generation": generation}),
                    ),
                    Some(
                        json!({"state": s.name(), "trace": trace, "worker_id": self.worker_id, "generation": generation}),
                    ),
                )
            }
        };
        for (key, value) in [(format!("status-connector-{name}"), connector), (format!("status-task-{name}-0"), task)] {
            if let Err(e) = self.send_status(&key, value.map(|v| v.to_string())).await {
                tracing::warn!(connector = name, topic = %self.settings.status_topic, error = %e, "cannot write the connector's status; trying again");
                return false;
            }
        }
        true
    }

    async fn write(&self, key: &str, value: Option<Value>) -> Result<i64, WorkerError> {
        let payload = value.map(|v| v.to_string());
        let mut record = FutureRecord::<str, str>::to(&self.settings.config_topic).key(key);
        if let Some(p) = &payload {
            record = record.payload(p);
        }
        match self.producer.send(record, Duration::from_secs(30)).await {
            Ok(delivery) => Ok(delivery.offset),
            Err((e, _)) => Err(WorkerError {
                status: 500,
                message: format!("cannot write to config.storage.topic `{}`: {e}", self.settings.config_topic),
            }),
        }
    }

    /// Waits until the config topic has been read past `offset`.
    async fn sync(&self, offset: i64) -> Result<(), WorkerError> {
        let mut applied = self.applied.subscribe();
        let read_back =
            tokio::time::timeout(SYNC_TIMEOUT, applied.wait_for(|a| *a > offset)).await.is_ok_and(|r| r.is_ok());
        match read_back {
            true => Ok(()),
            false => Err(WorkerError {
                status: 500,
                message: format!(
                    "the write to config.storage.topic `{}` was not read back in {} s",
                    self.settings.config_topic,
                    SYNC_TIMEOUT.as_secs()
                ),
            }),
        }
    }

    /// Reads the config and status topics from their beginnings, for as long as the worker runs.
    fn read_stores(self: Arc<Self>, consumer: BaseConsumer, config_end: i64) {
        let mut loaded = config_end == 0;
        while !self.stop.load(Ordering::Relaxed) {
            match consumer.poll(POLL) {
                Some(Ok(m)) => {
                    let key = m.key().map(|k| String::from_utf8_lossy(k).into_owned()).unwrap_or_default();
                    let value = match m.payload().map(serde_json::from_slice::<Value>) {
                        None => Ok(None),
                        Some(Ok(v)) => Ok(Some(v)),
                        Some(Err(e)) => {
                            // Not a deletion: what was last read stays (a slot is never dropped,
                            // a stopped connector never started, on data that could not be read).
                            tracing::error!(topic = %m.topic(), offset = m.offset(), key = %key, error = %e, "a record of the worker's cluster topics is not JSON; it is skipped and the last good state of its key kept (fix or remove the record)");
                            Err(())
                        }
                    };
                    if m.topic() == self.settings.config_topic {
                        if let Ok(value) = value {
                            self.apply_config(&key, value, loaded, m.offset());
                        }
                        if !loaded && m.offset() + 1 >= config_end {
                            loaded = true;
                            self.view().loaded = true;
                        }
                        self.applied.send_replace(m.offset() + 1);
                        self.changed.notify_one();
                    } else if let Ok(value) = value {
                        self.apply_status(&key, value);
                    }
                }
                Some(Err(e)) => tracing::debug!(error = %e, "reading the cluster's topics"),
                None => {
                    // Compaction can leave the end past the last record still there.
                    if !loaded {
                        if let Ok(Offset::Offset(p)) = position(&consumer, &self.settings.config_topic) {
                            if p >= config_end {
                                loaded = true;
                                self.view().loaded = true;
                                self.applied.send_replace(p);
                                self.changed.notify_one();
                            }
                        }
                    }
                }
            }
        }
    }

    fn apply_config(&self, key: &str, value: Option<Value>, loaded: bool, offset: i64) {
        let mut v = self.view();
        let name = ["connector-", "target-state-", "restart-connector-"].iter().find_map(|p| key.strip_prefix(p));
        let existed = name.is_some_and(|n| v.configs.contains_key(n));
        let mut applied = true;
        if let Some(name) = key.strip_prefix("connector-") {
            v.seen_offsets.insert(offset);
            let properties = value.as_ref().map(|v| v.get("properties").and_then(Value::as_object));
            let noop = value.as_ref().and_then(|v| v.get(NOOP)).is_some();
            match properties {
                Some(None) if noop => applied = !v.configs.contains_key(name),
                Some(None) => {
                    tracing::error!(key, offset, "a connector record of config.storage.topic has no `properties` object; it is skipped and the last good config kept");
                    applied = false;
                }
                Some(Some(props)) => {
                    let condition = value.as_ref().and_then(|r| r.get(CONDITION));
                    let create = condition.and_then(|c| c.get("absent")).is_some();
                    applied = condition_holds(&v, name, condition);
                    if applied {
                        let config: BTreeMap<String, String> = props
                            .iter()
                            .map(|(k, v)| (k.clone(), v.as_str().map_or_else(|| v.to_string(), str::to_string)))
                            .collect();
                        v.configs.insert(name.to_string(), config);
                        v.config_offsets.insert(name.to_string(), offset);
                        let slot = value.as_ref().and_then(|r| r.get(SLOT)).and_then(Value::as_u64);
                        match slot.and_then(|s| u32::try_from(s).ok()) {
                            Some(s) => v.slots.insert(name.to_string(), s),
                            None => v.slots.remove(name),
                        };
                        if create {
                            // A target state written for the name before pgoutbox's create (a
                            // pause that raced a delete) is not the new connector's. (Connect
                            // writes a create's initial state before its config: kept.)
                            v.targets.remove(name);
                            let initial = value.as_ref().and_then(|r| r.get(INITIAL)).and_then(target_of);
                            if let Some(t) = initial {
                                v.targets.insert(name.to_string(), t);
                            }
                        }
                    }
                }
                None => {
                    v.configs.remove(name);
                    v.config_offsets.remove(name);
                    v.slots.remove(name);
                    v.targets.remove(name);
                }
            }
        } else if let Some(name) = key.strip_prefix("target-state-") {
            match (value.as_ref().map(target_of), &value) {
                (Some(Some(t)), _) => v.targets.insert(name.to_string(), t),
                (_, None) => v.targets.remove(name),
                (_, Some(_)) => {
                    tracing::error!(key, offset, "a target-state record of config.storage.topic names no state pgoutbox knows (STARTED, PAUSED, STOPPED); it is skipped and the last good target kept");
                    applied = false;
                    None
                }
            };
        } else if let Some(namespace) = key.strip_prefix(LOGGER_PREFIX) {
            // As Connect: levels written before this worker had read the topic are history, not
            // orders (the worker starts at its configured levels).
            let level = value.as_ref().and_then(|v| v.get("level")).and_then(Value::as_str);
            match level {
                Some(level) if loaded => {
                    if let Err(e) = crate::logging::levels().set_level(namespace, level) {
                        tracing::error!(
                            key,
                            offset,
                            "a cluster log level of config.storage.topic was not applied: {e}"
                        );
                    }
                }
                Some(_) => {}
                None => tracing::error!(
                    key,
                    offset,
                    "a logger-cluster record of config.storage.topic has no `level` string; it is skipped"
                ),
            }
        } else if let Some(name) = key.strip_prefix("restart-connector-") {
            if loaded {
                let only_failed = value.as_ref().and_then(|v| v.get("only-failed")).and_then(Value::as_bool);
                v.restarts.push((name.to_string(), only_failed.unwrap_or(false)));
            }
        }
        if loaded && name.is_some() {
            v.outcomes.insert(offset, Outcome { existed, applied });
            while v.outcomes.len() > OUTCOMES_KEPT {
                v.outcomes.pop_first();
            }
        }
    }

    fn apply_status(&self, key: &str, value: Option<Value>) {
        if let Some((topic, connector)) = key.strip_prefix(TOPIC_PREFIX).and_then(|r| r.split_once(TOPIC_SEPARATOR)) {
            let removed = {
                let mut v = self.view();
                match value {
                    Some(_) => {
                        v.topics.entry(connector.to_string()).or_default().insert(topic.to_string());
                        false
                    }
                    None => v.topics.get_mut(connector).is_some_and(|t| t.remove(topic)),
                }
            };
            // Outside the view's lock: the hook takes the worker's.
            if let (true, Some(hook)) = (removed, self.topic_reset_hook.get()) {
                hook(connector, topic);
            }
            return;
        }
        let mut v = self.view();
        let field = |f: &str| value.as_ref().and_then(|v| v.get(f)).and_then(Value::as_str).map(str::to_string);
        if let Some(name) = key.strip_prefix("status-connector-") {
            match field("state") {
                Some(state) => v.connector_status.insert(name.to_string(), (state, field("worker_id"))),
                None => v.connector_status.remove(name),
            };
        } else if let Some(rest) = key.strip_prefix("status-task-") {
            let Some(name) = rest.strip_suffix("-0") else { return };
            match field("state") {
                Some(state) => v.task_status.insert(name.to_string(), (state, field("trace"))),
                None => v.task_status.remove(name),
            };
        }
    }

    /// Keeps this worker in the group (heartbeats, rebalances) until the worker stops, then
    /// leaves it, so the others take its connectors at once rather than after a session timeout.
    fn stay_member(self: Arc<Self>, consumer: BaseConsumer<Member>) {
        while !self.stop.load(Ordering::Relaxed) {
            // Offset records are not what this member is for.
            let _ = consumer.poll(POLL);
        }
        consumer.unsubscribe();
        drop(consumer);
    }

    /// The group's state for the metrics: this worker runs `connectors` connectors with `tasks` tasks.
    pub fn figures(&self, connectors: usize, tasks: usize) -> crate::exposition::WorkerFigures {
        let r = self.rebalances.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let stats = self.member_stats.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let group = crate::exposition::Group {
            client_id: if stats.client_id.is_empty() { self.worker_id.clone() } else { stats.client_id.clone() },
            epoch: self.generation(),
            completed_rebalances: r.completed,
            rebalancing: r.since.is_some(),
            since_last_rebalance_ms: r.last.map_or(-1, |t| t.elapsed().as_millis() as i64),
            rebalance_avg_ms: if r.completed > 0 { r.total_ms / r.completed as f64 } else { 0.0 },
            rebalance_max_ms: r.max_ms,
            assigned_connectors: connectors as u64,
            assigned_tasks: tasks as u64,
        };
        let consumers = if stats.reported { vec![stats] } else { Vec::new() };
        crate::exposition::WorkerFigures { group: Some(group), consumers, startups: None }
    }

    fn assigned(&self, partitions: BTreeSet<i32>) {
        self.generation.fetch_add(1, Ordering::Relaxed);
        self.rebalances.lock().unwrap_or_else(|e| e.into_inner()).done(std::time::Instant::now());
        tracing::info!(worker_id = %self.worker_id, partitions = ?partitions, "the group assigned this worker its share");
        let mut assignment = self.assignment.lock().unwrap_or_else(|e| e.into_inner());
        *assignment = Some(partitions);
        drop(assignment);
        self.changed.notify_one();
    }

    /// Leaves the group and stops reading; the worker's connectors must be stopped first.
    pub fn leave(&self) {
        self.stop.store(true, Ordering::Relaxed);
        let threads: Vec<_> = std::mem::take(&mut *self.threads.lock().unwrap_or_else(|e| e.into_inner()));
        for t in threads {
            let _ = t.join();
        }
    }
}

/// The slot of a connector whose record carries none: from its name (FNV-1a), the same on every
/// worker whatever the topic's history.
fn name_slot(name: &str) -> u32 {
    name.bytes().fold(0x811c_9dc5u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193))
}

/// Whether a connector-config record's condition holds where it stands in the topic: "absent"
/// (a create), or "offset" (the config is still the one read at that offset; a PATCH, a restore).
/// A condition on a record compaction removed holds: a newer record of the key exists.
fn condition_holds(v: &View, name: &str, condition: Option<&Value>) -> bool {
    let Some(condition) = condition else { return true };
    if condition.get("absent").and_then(Value::as_bool) == Some(true) {
        return !v.configs.contains_key(name);
    }
    match condition.get("offset").and_then(Value::as_i64) {
        Some(version) => v.config_offsets.get(name) == Some(&version) || !v.seen_offsets.contains(&version),
        None => true,
    }
}

/// The target a `target-state` value (or a create's initial state) names: `state.v2` first, as
/// Connect reads it.
fn target_of(value: &Value) -> Option<Target> {
    match value.get("state.v2").or_else(|| value.get("state")).and_then(Value::as_str)? {
        "PAUSED" => Some(Target::Paused),
        "STOPPED" => Some(Target::Stopped),
        "STARTED" => Some(Target::Running),
        _ => None,
    }
}

fn target_value(target: Target) -> Value {
    match target {
        Target::Running => json!({"state": "STARTED", "state.v2": "STARTED"}),
        Target::Paused => json!({"state": "PAUSED", "state.v2": "PAUSED"}),
        // Connect writes PAUSED for workers that do not know STOPPED.
        Target::Stopped => json!({"state": "PAUSED", "state.v2": "STOPPED"}),
    }
}

fn position(consumer: &BaseConsumer, topic: &str) -> Result<Offset, rdkafka::error::KafkaError> {
    let positions = consumer.position()?;
    Ok(positions.find_partition(topic, 0).map_or(Offset::Invalid, |p| p.offset()))
}

/// Creates the cluster's three topics when missing, compacted, as Connect does, and refuses existing
/// ones that are not compacted (as Connect's worker does).
async fn create_topics(s: &Settings, kafka: &KafkaConfig) -> Result<(), RelayError> {
    use crate::kafka::topics::{ensure_compacted, Compacted};
    for (topic, partitions, rf, key, key_partitions, key_rf) in [
        (
            &s.config_topic,
            1,
            s.config_replication,
            "config.storage.topic",
            "config.storage.topic",
            "config.storage.replication.factor",
        ),
        (
            &s.status_topic,
            s.status_partitions,
            s.status_replication,
            "status.storage.topic",
            "status.storage.partitions",
            "status.storage.replication.factor",
        ),
        (
            &s.offset_topic,
            s.offset_partitions,
            s.offset_replication,
            "offset.storage.topic",
            "offset.storage.partitions",
            "offset.storage.replication.factor",
        ),
    ] {
        let t = Compacted {
            topic,
            partitions,
            replication: Some(rf),
            key_topic: key,
            key_partitions,
            key_replication: key_rf,
        };
        ensure_compacted(kafka, &t).await.map_err(|e| RelayError::Config(ConfigError::invalid(key, e.to_string())))?;
    }
    Ok(())
}

/// The config topic's end offset (it must have one partition, as Connect requires) and the
/// offsets topic's partition count.
fn layout(kafka: &KafkaConfig, s: &Settings) -> Result<(i64, i32), RelayError> {
    let consumer: BaseConsumer = crate::kafka::client_config(kafka)
        .set("group.id", format!("{}-layout", s.group_id))
        .set("enable.auto.commit", "false")
        .create()
        .map_err(kafka_error("reading the cluster topics' layout"))?;
    let timeout = Duration::from_secs(20);
    let count = |topic: &str| -> Result<i32, RelayError> {
        let md = consumer.fetch_metadata(Some(topic), timeout).map_err(kafka_error("reading topic metadata"))?;
        Ok(md.topics().first().map_or(0, |t| t.partitions().len() as i32))
    };
    let config_partitions = count(&s.config_topic)?;
    if config_partitions != 1 {
        return Err(RelayError::Config(ConfigError::invalid(
            "config.storage.topic",
            format!("topic `{}` has {config_partitions} partitions; the config topic must have exactly one, as Connect requires (create another, or point config.storage.topic at one)", s.config_topic),
        )));
    }
    let (_, end) = consumer
        .fetch_watermarks(&s.config_topic, 0, timeout)
        .map_err(kafka_error("reading config.storage.topic's end"))?;
    Ok((end, count(&s.offset_topic)?.max(1)))
}

/// A consumer of the whole config topic and status topic, from their beginnings.
fn stores_consumer(kafka: &KafkaConfig, s: &Settings) -> Result<BaseConsumer, RelayError> {
    let consumer: BaseConsumer = crate::kafka::client_config(kafka)
        .set("group.id", format!("{}-stores", s.group_id))
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "false")
        .set("fetch.wait.max.ms", "100")
        .create()
        .map_err(kafka_error("the worker's config reader"))?;
    let timeout = Duration::from_secs(20);
    let md = consumer.fetch_metadata(Some(&s.status_topic), timeout).map_err(kafka_error("reading topic metadata"))?;
    let mut tpl = TopicPartitionList::new();
    let err = kafka_error("assigning the cluster's topics");
    tpl.add_partition_offset(&s.config_topic, 0, Offset::Beginning).map_err(&err)?;
    for t in md.topics() {
        for p in t.partitions() {
            tpl.add_partition_offset(t.name(), p.id(), Offset::Beginning).map_err(&err)?;
        }
    }
    consumer.assign(&tpl).map_err(err)?;
    Ok(consumer)
}

/// The worker's membership: its assigned partitions say which connectors it runs.
pub struct Member {
    cluster: std::sync::Weak<Cluster>,
}

impl ClientContext for Member {
    fn stats(&self, statistics: rdkafka::Statistics) {
        if let Some(c) = self.cluster.upgrade() {
            let mut stats = c.member_stats.lock().unwrap_or_else(|e| e.into_inner());
            crate::kafka::client_stats(&mut stats, &statistics, std::time::Instant::now());
        }
    }
}

/// The group's rebalances as this member saw them (`connect-worker-rebalance-metrics`).
#[derive(Debug, Default, Clone)]
struct Rebalances {
    completed: u64,
    /// Since when one is under way.
    since: Option<std::time::Instant>,
    /// When the last one completed.
    last: Option<std::time::Instant>,
    total_ms: f64,
    max_ms: f64,
}

impl Rebalances {
    fn started(&mut self, now: std::time::Instant) {
        self.since.get_or_insert(now);
    }

    fn done(&mut self, now: std::time::Instant) {
        let ms = self.since.take().map_or(0.0, |t| now.duration_since(t).as_secs_f64() * 1e3);
        self.completed += 1;
        self.total_ms += ms;
        self.max_ms = self.max_ms.max(ms);
        self.last = Some(now);
    }
}

impl ConsumerContext for Member {
    fn pre_rebalance(&self, _consumer: &BaseConsumer<Self>, _rebalance: &Rebalance<'_>) {
        if let Some(c) = self.cluster.upgrade() {
            c.rebalances.lock().unwrap_or_else(|e| e.into_inner()).started(std::time::Instant::now());
        }
    }

    fn post_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Assign(tpl) => {
                if let Some(c) = self.cluster.upgrade() {
                    c.assigned(tpl.elements().iter().map(|e| e.partition()).collect());
                }
            }
            // Eager rebalancing revokes everything before assigning again: connectors keep
            // running until the new assignment says otherwise, so one that stays does not restart.
            Rebalance::Revoke(_) => {}
            Rebalance::Error(e) => tracing::warn!(error = %e, "the worker's group rebalance failed"),
        }
    }
}

/// A consumer in group `group.id` on `offset.storage.topic`, with the round-robin assignor.
fn membership_consumer(kafka: &KafkaConfig, cluster: &Arc<Cluster>) -> Result<BaseConsumer<Member>, RelayError> {
    let s = &cluster.settings;
    let max_poll = s.rebalance_timeout_ms.max(s.session_timeout_ms);
    let consumer: BaseConsumer<Member> = crate::kafka::client_config(kafka)
        .set("group.id", &s.group_id)
        .set("partition.assignment.strategy", "roundrobin")
        .set("session.timeout.ms", s.session_timeout_ms.to_string())
        .set("heartbeat.interval.ms", s.heartbeat_interval_ms.to_string())
        .set("max.poll.interval.ms", max_poll.to_string())
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "latest")
        .set("enable.partition.eof", "false")
        .set("fetch.wait.max.ms", "500")
        .set("statistics.interval.ms", crate::kafka::STATISTICS_INTERVAL_MS)
        .create_with_context(Member { cluster: Arc::downgrade(cluster) })
        .map_err(kafka_error("the worker's group member"))?;
    consumer.subscribe(&[&s.offset_topic]).map_err(kafka_error("joining the worker group"))?;
    Ok(consumer)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn distributed_mode_needs_the_three_topics_and_takes_connects_defaults() {
        assert!(Settings::from_props(&props(&[("bootstrap.servers", "b:9092")])).unwrap().is_none());
        let err = Settings::from_props(&props(&[("group.id", "g"), ("config.storage.topic", "c")])).unwrap_err();
        assert!(err.to_string().contains("status.storage.topic"), "{err}");
        let s = Settings::from_props(&props(&[
            ("group.id", "g"),
            ("config.storage.topic", "c"),
            ("status.storage.topic", "s"),
            ("offset.storage.topic", "o"),
            ("config.storage.replication.factor", "1"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!((s.config_replication, s.status_replication, s.offset_partitions), (1, 3, 25));
        assert_eq!((s.session_timeout_ms, s.heartbeat_interval_ms), (10_000, 3_000));
        let same = Settings::from_props(&props(&[
            ("group.id", "g"),
            ("config.storage.topic", "c"),
            ("status.storage.topic", "c"),
            ("offset.storage.topic", "o"),
        ]));
        assert!(same.unwrap_err().to_string().contains("three different topics"));
    }

    #[test]
    fn worker_keys_never_reach_connectors() {
        for k in ["group.id", "heartbeat.interval.ms", "config.storage.topic", "status.storage.partitions"] {
            assert!(is_worker_key(k), "{k}");
        }
        for k in ["offset.storage.topic", "bootstrap.servers", "topic.prefix", "heartbeat.action.query"] {
            assert!(!is_worker_key(k), "{k}");
        }
    }
}
