//! A Kafka Connect worker for outbox connectors (`pgoutbox connect`): any number of connectors in
//! one process, each with its own slot, publication, producer and pipeline, one failing without
//! stopping the others, driven through Connect's REST API (`rest`).
//!
//! Standalone mode: connector configs come from the files named on the command line and from REST.
//! What REST creates, changes or deletes is kept in a state file next to
//! `offset.storage.file.filename` (Connect's standalone worker forgets it), so a restarted worker
//! runs the same connectors in the same target states.
//!
//! Distributed mode (`group.id`, see `cluster`): REST writes go to the cluster's config topic and
//! every worker answers from it; each worker runs the connectors the group assigns it.
//!
//! A connector's effective configuration is its own laid over what a Connect worker passes its
//! connectors (`policy::is_inherited`): the Kafka clients' settings, the converters as defaults, the
//! config providers and the worker-level settings of its run. No connector key (`database.*`,
//! `slot.name`, `transforms`, ...) comes from the worker's properties: a REST caller chooses
//! `database.hostname`, and must not get the worker's `database.password` sent there.

pub mod auth;
pub mod cluster;
pub mod offsets;
pub mod policy;
pub mod rest;
pub mod tls;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

use crate::config::providers::{resolve_for, Audience};
use crate::config::{Config, ConfigError, RawConfig};
use crate::metrics::Metrics;

/// What the operator asked a connector to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Running,
    Paused,
    Stopped,
}

/// A connector's state as Connect reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    Unassigned,
    Running,
    Paused,
    Stopped,
    Failed(String),
}

impl State {
    pub fn name(&self) -> &'static str {
        match self {
            State::Unassigned => "UNASSIGNED",
            State::Running => "RUNNING",
            State::Paused => "PAUSED",
            State::Stopped => "STOPPED",
            State::Failed(_) => "FAILED",
        }
    }
}

/// One connector of the worker.
struct Connector {
    /// Its own configuration, as given (file or REST), `name` included.
    config: BTreeMap<String, String>,
    target: Target,
    state: Arc<Mutex<State>>,
    run: Option<(CancellationToken, tokio::task::JoinHandle<()>)>,
    /// The running pipeline's metrics and its `topic.prefix`.
    metrics: Arc<Metrics>,
    server: String,
}

/// Why a REST call cannot be carried out, with Connect's status code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerError {
    pub status: u16,
    pub message: String,
}

impl WorkerError {
    fn not_found(name: &str) -> WorkerError {
        WorkerError { status: 404, message: format!("Connector {name} not found") }
    }
}

/// What the API shows in place of a secret; sent back by a PUT or PATCH, it keeps the stored one.
pub const HIDDEN: &str = "[hidden]";

pub struct Worker {
    props: BTreeMap<String, String>,
    policy: policy::OverridePolicy,
    pub worker_id: String,
    state_file: Option<PathBuf>,
    connectors: Mutex<BTreeMap<String, Connector>>,
    shutdown: CancellationToken,
    /// Distributed mode: the cluster's store and this worker's membership.
    cluster: Option<Arc<cluster::Cluster>>,
    /// Requests that build Kafka clients or read a topic (validate, offsets) at once: each holds
    /// threads and sockets for up to seconds, so their number is bounded, not the callers'.
    heavy: Arc<tokio::sync::Semaphore>,
    /// Connectors given up (deleted, or moved elsewhere) whose pipeline is still stopping, or whose
    /// slot is still being dropped: a connector of the same name created again starts after it.
    retiring: Mutex<BTreeMap<String, tokio::task::JoinHandle<()>>>,
    /// The Kafka cluster's id (`GET /`), once read; a failed read is tried again after a pause.
    cluster_id: tokio::sync::Mutex<ClusterId>,
    /// Per connector, the records sent to each topic when its active topics were last reset: a topic
    /// is active again once the connector sends to it after that (KIP-558's reset).
    topic_baselines: Mutex<BTreeMap<String, BTreeMap<String, u64>>>,
    /// Distributed mode: the active-topic records this worker wrote, (connector, topic), until a
    /// reset deletes them.
    published_topics: Mutex<std::collections::BTreeSet<(String, String)>>,
    /// Connector and task starts on this worker, for Connect's startup metrics.
    startups: Arc<crate::exposition::Startups>,
}

#[derive(Default)]
struct ClusterId {
    id: Option<String>,
    failed_at: Option<std::time::Instant>,
}

/// How long a failed read of the cluster id is not tried again.
const CLUSTER_ID_RETRY: std::time::Duration = std::time::Duration::from_secs(10);

/// How many Kafka-reading requests run at once, and how long one waits for its turn.
const HEAVY_AT_ONCE: usize = 2;
const HEAVY_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

impl Worker {
    pub fn new(
        props: BTreeMap<String, String>,
        worker_id: String,
        shutdown: CancellationToken,
        cluster: Option<Arc<cluster::Cluster>>,
    ) -> Result<Worker, ConfigError> {
        let policy = policy::OverridePolicy::from_props(&props)?;
        let connector_keys: Vec<&str> =
            props.keys().map(String::as_str).filter(|k| policy::is_connector_key(k)).collect();
        if !connector_keys.is_empty() {
            tracing::warn!(keys = ?connector_keys, "the worker's properties hold connector keys, which no connector receives (as in Connect, connectors get the worker's Kafka client settings, converters and config providers only): give them in each connector's config");
        }
        // A distributed worker's connectors live in the config topic, not in a file.
        let state_file = props
            .get("offset.storage.file.filename")
            .filter(|f| !f.trim().is_empty() && cluster.is_none())
            .map(|f| PathBuf::from(format!("{}.connectors.json", f.trim())));
        Ok(Worker {
            props,
            policy,
            worker_id,
            state_file,
            connectors: Mutex::new(BTreeMap::new()),
            shutdown,
            cluster,
            heavy: Arc::new(tokio::sync::Semaphore::new(HEAVY_AT_ONCE)),
            retiring: Mutex::new(BTreeMap::new()),
            cluster_id: tokio::sync::Mutex::new(ClusterId::default()),
            topic_baselines: Mutex::new(BTreeMap::new()),
            startups: Default::default(),
            published_topics: Mutex::new(std::collections::BTreeSet::new()),
        })
    }

    /// The id of the Kafka cluster the worker's `bootstrap.servers` name (Connect's
    /// `kafka_cluster_id`); `None` while it cannot be read. One read at a time.
    pub async fn kafka_cluster_id(&self) -> Option<String> {
        let mut cached = self.cluster_id.lock().await;
        if cached.id.is_some() || cached.failed_at.is_some_and(|t| t.elapsed() < CLUSTER_ID_RETRY) {
            return cached.id.clone();
        }
        let props = self.props.clone();
        let read = tokio::task::spawn_blocking(move || {
            use rdkafka::consumer::Consumer;
            let kafka = crate::config::worker_kafka(&props).ok()?;
            let consumer: rdkafka::consumer::BaseConsumer = crate::kafka::client_config(&kafka).create().ok()?;
            consumer.client().fetch_cluster_id(std::time::Duration::from_secs(5))
        });
        let id = read.await.ok().flatten();
        if id.is_none() {
            tracing::warn!("cannot read the Kafka cluster's id for GET / (the worker's bootstrap.servers)");
        }
        *cached = ClusterId { failed_at: id.is_none().then(std::time::Instant::now), id: id.clone() };
        id
    }

    /// Whether `/admin/*` is served on the REST listener: unless `admin.listeners` is set, as in
    /// Connect (empty turns the admin endpoints off; a listener of their own is not served here,
    /// so they are off then too, and a warning says so).
    pub fn admin_endpoints(&self) -> bool {
        match self.props.get("admin.listeners") {
            None => true,
            Some(l) if l.trim().is_empty() => false,
            Some(_) => {
                tracing::warn!("admin.listeners names a listener of its own, which pgoutbox does not serve: the admin endpoints (/admin/loggers) are off; remove the key to serve them on the REST listener");
                false
            }
        }
    }

    /// Whether the REST API is served over TLS (the first of `listeners` is https://).
    pub fn https(&self) -> bool {
        self.props.get("listeners").is_some_and(|l| l.trim_start().to_ascii_lowercase().starts_with("https://"))
    }

    /// A log level for every worker of the cluster (`?scope=cluster`): through the config topic in
    /// distributed mode, this worker's alone in standalone mode (as Connect's standalone herder).
    pub async fn set_cluster_logger_level(&self, namespace: &str, level: &str) -> Result<(), WorkerError> {
        match &self.cluster {
            Some(cluster) => cluster.set_logger_level(namespace, level).await,
            None => crate::logging::levels()
                .set_level(namespace, level)
                .map(|_| ())
                .map_err(|message| WorkerError { status: 500, message }),
        }
    }

    /// A turn for a request that builds Kafka clients or reads a topic; 503 when other such
    /// requests hold every turn for longer than [`HEAVY_WAIT`].
    pub async fn heavy_turn(&self) -> Result<tokio::sync::OwnedSemaphorePermit, WorkerError> {
        match tokio::time::timeout(HEAVY_WAIT, self.heavy.clone().acquire_owned()).await {
            Ok(Ok(permit)) => Ok(permit),
            _ => Err(WorkerError {
                status: 503,
                message: "the worker is busy with other requests that read Kafka (validate, offsets); try again".into(),
            }),
        }
    }

    /// One of the worker's properties.
    pub fn worker_prop(&self, key: &str) -> Option<&str> {
        self.props.get(key).map(String::as_str)
    }

    /// The connector's own keys laid over what the worker passes every connector
    /// (`policy::is_inherited`), parsed and checked. The worker's Kafka clients, credentials and
    /// providers stay the worker's (see `policy`): a connector that sets one is told the key is
    /// ignored, as Connect ignores it. Errors are worded for a REST caller: a config-provider
    /// reference without a value does not say whether the file or key exists (see `providers`).
    pub fn effective(&self, config: &BTreeMap<String, String>) -> Result<Config, ConfigError> {
        policy::check(&self.policy, config)?;
        let mut entries: BTreeMap<String, String> =
            self.props.iter().filter(|(k, _)| policy::is_inherited(k)).map(|(k, v)| (k.clone(), v.clone())).collect();
        let mut kept_from_worker = Vec::new();
        // Converters as Connect's Worker builds them: a connector that names a converter class gets
        // that converter configured with its own `<converter>.*` keys only; one that does not gets
        // the worker's, with the worker's keys, and its own `<converter>.*` keys do nothing.
        let mut ignored_converter_keys = Vec::new();
        for prefix in ["key.converter", "value.converter", "header.converter"] {
            let sub = format!("{prefix}.");
            if config.contains_key(prefix) {
                entries.retain(|k, _| !k.starts_with(&sub));
            } else {
                ignored_converter_keys
                    .extend(config.keys().filter(|k| k.starts_with(&sub)).map(|k| (k.clone(), prefix)));
            }
        }
        for (k, v) in config {
            if ignored_converter_keys.iter().any(|(key, _)| key == k) {
                continue;
            }
            if policy::is_worker_client_key(k) {
                if entries.get(k) != Some(v) {
                    kept_from_worker.push(k.clone());
                }
                continue;
            }
            entries.insert(k.clone(), v.clone());
        }
        // Exactly once is the worker's to enable, as in Connect; the transactional id is built from
        // its group.id (a standalone worker has none: `pgoutbox`).
        const EOS: &str = "exactly.once.source.support";
        match self.props.get(EOS) {
            Some(v) => {
                if entries.get(EOS) != Some(v) && config.contains_key(EOS) {
                    kept_from_worker.push(EOS.to_string());
                }
                entries.insert(EOS.to_string(), v.clone());
            }
            None => {
                if entries.remove(EOS).is_some() {
                    kept_from_worker.push(EOS.to_string());
                }
            }
        }
        if let Some(group) = self.props.get("group.id") {
            if entries.get(EOS).is_some_and(|v| v.trim().eq_ignore_ascii_case("enabled")) {
                entries.insert("group.id".to_string(), group.clone());
            }
        }
        let raw = RawConfig { entries, source_name: None };
        let mut parsed = Config::from_resolved(resolve_for(&raw, Audience::RestCaller)?)?;
        parsed.ignored.extend(ignored_converter_keys.into_iter().map(|(key, prefix)| crate::config::IgnoredKey {
            key,
            reason: format!(
                "the connector does not set `{prefix}`, so the worker's converter applies with the worker's settings, as in Connect"
            ),
        }));
        parsed.ignored.extend(kept_from_worker.into_iter().map(|key| crate::config::IgnoredKey {
            key,
            reason: format!("a worker key: the worker's value applies, as in Connect; a connector overrides its producer with producer.override.* keys, as far as the worker's {} allows", policy::POLICY_KEY),
        }));
        Ok(parsed)
    }

    /// A PUT or PATCH that sends back `[hidden]`, as GET showed a secret, keeps the stored secret,
    /// so GET-edit-PUT automation works.
    fn keep_hidden(&self, name: &str, config: &mut BTreeMap<String, String>) -> Result<(), WorkerError> {
        let hidden: Vec<String> = config.iter().filter(|(_, v)| v.as_str() == HIDDEN).map(|(k, _)| k.clone()).collect();
        if hidden.is_empty() {
            return Ok(());
        }
        let stored = self.config(name).unwrap_or_default();
        for k in hidden {
            match stored.get(&k) {
                Some(v) => config.insert(k, v.clone()),
                None => {
                    return Err(WorkerError {
                        status: 400,
                        message: format!("`{k}` is `{HIDDEN}`, the mask the API shows for a secret, and the connector has no stored value for it: send the value itself"),
                    })
                }
            };
        }
        Ok(())
    }

    /// The connectors of the worker, or of the cluster in distributed mode.
    pub fn names(&self) -> Vec<String> {
        match &self.cluster {
            Some(c) => c.names(),
            None => self.local_names(),
        }
    }

    fn local_names(&self) -> Vec<String> {
        self.lock().keys().cloned().collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Connector>> {
        self.connectors.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The connector's own configuration.
    pub fn config(&self, name: &str) -> Result<BTreeMap<String, String>, WorkerError> {
        let found = match &self.cluster {
            Some(c) => c.config(name),
            None => self.lock().get(name).map(|c| c.config.clone()),
        };
        found.ok_or_else(|| WorkerError::not_found(name))
    }

    /// The topics this worker's run of `name` has produced to, sorted.
    /// The topics the connector has produced to since its topics were last reset (KIP-558): the
    /// cluster's record of them in distributed mode (whichever worker runs it), else this worker's.
    /// A connector it does not know has none (200 with an empty list, as Connect answers).
    pub fn active_topics(&self, name: &str) -> Result<Vec<String>, WorkerError> {
        self.topic_tracking(false)?;
        if let Some(cluster) = &self.cluster {
            return Ok(cluster.topics(name));
        }
        Ok(self.local_active_topics(name))
    }

    /// The topics this worker's run of `name` sent to after the last reset.
    fn local_active_topics(&self, name: &str) -> Vec<String> {
        let sent = self.lock().get(name).map(|c| c.metrics.sent_by_topic()).unwrap_or_default();
        let baselines = self.topic_baselines.lock().unwrap_or_else(|e| e.into_inner());
        let baseline = baselines.get(name);
        sent.into_iter()
            .filter(|(t, n, _)| *n > baseline.and_then(|b| b.get(&**t)).copied().unwrap_or(0))
            .map(|(t, ..)| t.to_string())
            .collect()
    }

    /// Forgets `topic` (every topic, with `None`) of `name` as sent so far.
    fn note_topic_reset(&self, name: &str, topic: Option<&str>) {
        let sent = self.lock().get(name).map(|c| c.metrics.sent_by_topic()).unwrap_or_default();
        let mut baselines = self.topic_baselines.lock().unwrap_or_else(|e| e.into_inner());
        let baseline = baselines.entry(name.to_string()).or_default();
        for (t, n, _) in sent.into_iter().filter(|(t, ..)| topic.map_or(true, |x| x == &**t)) {
            baseline.insert(t.to_string(), n);
        }
    }

    /// `PUT /connectors/{name}/topics/reset`: the connector's active topics are forgotten; each comes
    /// back when the connector produces to it again.
    pub async fn reset_active_topics(&self, name: &str) -> Result<(), WorkerError> {
        self.topic_tracking(true)?;
        // As Connect: a connector it does not know has no topics to forget (202 all the same).
        if self.config(name).is_err() {
            return Ok(());
        }
        match &self.cluster {
            Some(cluster) => cluster.reset_topics(name).await,
            None => {
                self.note_topic_reset(name, None);
                Ok(())
            }
        }
    }

    /// Connect's worker keys `topic.tracking.enable` and `topic.tracking.allow.reset` (both default
    /// true): 403, in Connect's words, when the call is turned off.
    fn topic_tracking(&self, reset: bool) -> Result<(), WorkerError> {
        let off = |k: &str| self.props.get(k).is_some_and(|v| v.trim().eq_ignore_ascii_case("false"));
        if off("topic.tracking.enable") {
            return Err(WorkerError { status: 403, message: "Topic tracking is disabled.".into() });
        }
        if reset && off("topic.tracking.allow.reset") {
            return Err(WorkerError { status: 403, message: "Topic tracking reset is disabled.".into() });
        }
        Ok(())
    }

    pub fn state(&self, name: &str) -> Result<State, WorkerError> {
        Ok(self.status(name)?.0)
    }

    /// The connector's state and the worker running it (`None` while no worker has reported it).
    pub fn status(&self, name: &str) -> Result<(State, Option<String>), WorkerError> {
        if let Some(state) = self.local_state(name) {
            return Ok((state, Some(self.worker_id.clone())));
        }
        let Some(cluster) = &self.cluster else { return Err(WorkerError::not_found(name)) };
        if cluster.config(name).is_none() {
            return Err(WorkerError::not_found(name));
        }
        Ok(cluster.status(name).map_or((State::Unassigned, None), |s| (s.state, s.worker_id)))
    }

    /// The state of a connector this worker runs. A connector whose slot is still held elsewhere
    /// (a hand-over in progress, another instance streaming from it) is UNASSIGNED, not RUNNING:
    /// RUNNING is the one process that has the slot.
    fn local_state(&self, name: &str) -> Option<State> {
        let c = self.lock();
        let c = c.get(name)?;
        let state = c.state.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let waiting =
            matches!(c.metrics.state(), crate::metrics::RelayState::Starting | crate::metrics::RelayState::StandingBy);
        if state == State::Running && waiting {
            return Some(State::Unassigned);
        }
        Some(state)
    }

    fn invalid(e: ConfigError) -> WorkerError {
        WorkerError {
            status: 400,
            message: format!("Connector configuration is invalid and contains the following 1 error(s):\n{e}\nYou can also find the above list of errors at the endpoint `/connector-plugins/{{connectorType}}/config/validate`"),
        }
    }

    /// Creates a connector (or, with `replace`, replaces its configuration and restarts it).
    /// `Ok(true)` when it was created. In distributed mode the configuration goes to the config
    /// topic, and the worker the group assigns it to runs it.
    pub async fn put(
        &self,
        name: &str,
        mut config: BTreeMap<String, String>,
        replace: bool,
    ) -> Result<bool, WorkerError> {
        validate_name(name)?;
        if replace {
            self.keep_hidden(name, &mut config)?;
        }
        let Some(cluster) = &self.cluster else { return self.put_local(name, config, replace, Target::Running) };
        config.insert("name".to_string(), name.to_string());
        self.effective(&config).map_err(Self::invalid)?;
        if replace {
            return cluster.put(name, &config).await;
        }
        // Another worker may have created it a moment ago: the config topic's order decides.
        if cluster.config(name).is_some() || !cluster.create(name, &config, None).await? {
            return Err(Self::exists(name));
        }
        Ok(true)
    }

    /// Creates a connector that starts in `initial` (KIP-980's `initial_state`): one created
    /// STOPPED or PAUSED never streams before it is resumed. 409 when the name exists.
    pub async fn create(
        &self,
        name: &str,
        config: BTreeMap<String, String>,
        initial: Target,
    ) -> Result<(), WorkerError> {
        if initial == Target::Running {
            return self.put(name, config, false).await.map(|_| ());
        }
        validate_name(name)?;
        let Some(cluster) = &self.cluster else { return self.put_local(name, config, false, initial).map(|_| ()) };
        let mut config = config;
        config.insert("name".to_string(), name.to_string());
        self.effective(&config).map_err(Self::invalid)?;
        if cluster.config(name).is_some() || !cluster.create(name, &config, Some(initial)).await? {
            return Err(Self::exists(name));
        }
        Ok(())
    }

    fn exists(name: &str) -> WorkerError {
        WorkerError { status: 409, message: format!("Connector {name} already exists") }
    }

    /// PATCH: the given keys replace the current ones, `None` removes one. In distributed mode
    /// the new config replaces the one the patch was applied to only if no other write came
    /// between (then the patch is applied again to the newer config).
    pub async fn patch(&self, name: &str, changes: &[(String, Option<String>)]) -> Result<(), WorkerError> {
        let apply = |mut config: BTreeMap<String, String>| {
            for (k, v) in changes {
                match v {
                    Some(v) => config.insert(k.clone(), v.clone()),
                    None => config.remove(k),
                };
            }
            config
        };
        let Some(cluster) = &self.cluster else {
            let config = apply(self.config(name)?);
            return self.put(name, config, true).await.map(|_| ());
        };
        for _ in 0..10 {
            let (current, version) = cluster.versioned_config(name).ok_or_else(|| WorkerError::not_found(name))?;
            let mut config = apply(current);
            validate_name(name)?;
            self.keep_hidden(name, &mut config)?;
            config.insert("name".to_string(), name.to_string());
            self.effective(&config).map_err(Self::invalid)?;
            if cluster.replace_if(name, &config, version).await? {
                return Ok(());
            }
        }
        Err(WorkerError {
            status: 409,
            message: format!("Connector {name} is being changed by other requests; try the PATCH again"),
        })
    }

    pub async fn delete(&self, name: &str) -> Result<(), WorkerError> {
        let Some(cluster) = &self.cluster else { return self.delete_local(name) };
        self.config(name)?;
        match cluster.delete(name).await? {
            true => Ok(()),
            false => Err(WorkerError::not_found(name)),
        }
    }

    pub async fn set_target(&self, name: &str, target: Target) -> Result<(), WorkerError> {
        let Some(cluster) = &self.cluster else { return self.set_target_local(name, target) };
        self.config(name)?;
        match cluster.set_target(name, target).await? {
            true => Ok(()),
            false => Err(WorkerError::not_found(name)),
        }
    }

    /// Restarts the connector (only when it failed, with `only_failed`), wherever it runs.
    pub async fn restart(&self, name: &str, only_failed: bool) -> Result<(), WorkerError> {
        match &self.cluster {
            Some(cluster) if !self.lock().contains_key(name) => {
                self.config(name)?;
                match cluster.request_restart(name, only_failed).await? {
                    true => Ok(()),
                    false => Err(WorkerError::not_found(name)),
                }
            }
            _ => self.restart_local(name, only_failed),
        }
    }

    /// `initial`: the target of a connector that did not exist (an update keeps the current one).
    fn put_local(
        &self,
        name: &str,
        mut config: BTreeMap<String, String>,
        replace: bool,
        initial: Target,
    ) -> Result<bool, WorkerError> {
        config.insert("name".to_string(), name.to_string());
        let parsed = self.effective(&config).map_err(Self::invalid)?;
        // As `pgoutbox run` does: what the connector's own keys ask for and pgoutbox does not do.
        // (The worker's keys are the worker's; they are not the connector's to act on.)
        for ignored in parsed.ignored.iter().filter(|i| config.contains_key(&i.key)) {
            tracing::warn!(connector = %name, key = %ignored.key, "ignored config key: {}", ignored.reason);
        }
        for w in &parsed.warnings {
            tracing::warn!(connector = %name, "{w}");
        }
        let mut connectors = self.lock();
        let created = !connectors.contains_key(name);
        if !created && !replace {
            return Err(Self::exists(name));
        }
        // A config update keeps the target state and the counters (Prometheus counters never go
        // back), and the new pipeline starts once the old one has stopped.
        let (target, metrics, previous) = match connectors.remove(name) {
            Some(mut old) => (old.target, old.metrics.clone(), stop(&mut old)),
            // A connector of this name deleted a moment ago may still be stopping, or having its
            // slot dropped: this one starts after that.
            None => (initial, Arc::new(Metrics::default()), self.retiring_lock().remove(name)),
        };
        let server = parsed.topic_prefix.clone();
        let mut c =
            Connector { config, target, state: Arc::new(Mutex::new(State::Unassigned)), run: None, metrics, server };
        if target == Target::Running {
            self.start(&mut c, parsed, previous);
        } else {
            // The old pipeline may still be draining: a resume must wait for it.
            c.run = previous.map(|handle| (cancelled(), handle));
            c.state = Arc::new(Mutex::new(if target == Target::Paused { State::Paused } else { State::Stopped }));
        }
        connectors.insert(name.to_string(), c);
        drop(connectors);
        self.save();
        Ok(created)
    }

    fn delete_local(&self, name: &str) -> Result<(), WorkerError> {
        if !self.lock().contains_key(name) {
            return Err(WorkerError::not_found(name));
        }
        self.give_up(name, true);
        self.topic_baselines.lock().unwrap_or_else(|e| e.into_inner()).remove(name);
        self.save();
        Ok(())
    }

    /// Pause, resume or stop: the pipeline stops (its position stays in the slot) or starts again.
    fn set_target_local(&self, name: &str, target: Target) -> Result<(), WorkerError> {
        let mut connectors = self.lock();
        let c = connectors.get_mut(name).ok_or_else(|| WorkerError::not_found(name))?;
        c.target = target;
        match target {
            Target::Running => {
                if c.run.as_ref().map_or(true, |r| r.0.is_cancelled()) {
                    let parsed =
                        self.effective(&c.config).map_err(|e| WorkerError { status: 400, message: e.to_string() })?;
                    let previous = stop(c);
                    self.start(c, parsed, previous);
                }
            }
            Target::Paused | Target::Stopped => {
                // The pipeline keeps its handle until a resume, which waits for its end. The state
                // is a new one: the cancelled run, which may end with an error, reports into its own.
                if let Some((token, _)) = &c.run {
                    token.cancel();
                }
                c.state = Arc::new(Mutex::new(if target == Target::Paused { State::Paused } else { State::Stopped }));
            }
        }
        drop(connectors);
        self.save();
        Ok(())
    }

    fn restart_local(&self, name: &str, only_failed: bool) -> Result<(), WorkerError> {
        let mut connectors = self.lock();
        let c = connectors.get_mut(name).ok_or_else(|| WorkerError::not_found(name))?;
        let failed = matches!(*c.state.lock().unwrap_or_else(|e| e.into_inner()), State::Failed(_));
        if (only_failed && !failed) || c.target != Target::Running {
            return Ok(());
        }
        let parsed = self.effective(&c.config).map_err(|e| WorkerError { status: 400, message: e.to_string() })?;
        let previous = stop(c);
        self.start(c, parsed, previous);
        Ok(())
    }

    /// Starts the connector's pipeline, once `previous` (the pipeline it replaces) has ended, so
    /// the two never run at once and the old one's end cannot be reported as the new one's.
    fn start(&self, c: &mut Connector, mut config: Config, previous: Option<tokio::task::JoinHandle<()>>) {
        // In a worker a pipeline stops for a pause, a restart, a config update or a hand-over to
        // another worker: the slot must stay for all of them. Only DELETE drops it, after the
        // stop (see `give_up`).
        config.slot_drop_on_stop = false;
        let token = self.shutdown.child_token();
        // Each run reports into a state of its own: a cancelled run that ends with an error
        // must not mark its successor FAILED.
        let state = Arc::new(Mutex::new(State::Running));
        c.state = state.clone();
        // The same counters across restarts, resumes and config updates: Prometheus counters must
        // never go back (a reset between two scrapes would hide what happened in between).
        let metrics = c.metrics.clone();
        let run_token = token.clone();
        // The connector's start is its configuration's parse, done: Connect's connector startup.
        self.startups.connector.attempt();
        self.startups.connector.succeeded();
        let startups = self.startups.clone();
        let handle = tokio::spawn(async move {
            if let Some(previous) = previous {
                let _ = previous.await;
            }
            let name = config.connector_name.clone();
            // The task's start: its first session reaches the database and the broker (streaming,
            // snapshotting, or standing by for the slot), or the run fails before it does.
            startups.task.attempt();
            metrics.set_state(crate::metrics::RelayState::Starting);
            let sessions = metrics.sessions.load(std::sync::atomic::Ordering::Relaxed);
            // Started: streaming, snapshotting or standing by now, or a session began since (one that
            // already ended between two looks counts too).
            let has_started = || {
                use crate::metrics::RelayState::*;
                matches!(metrics.state(), Streaming | Snapshotting | StandingBy)
                    || metrics.sessions.load(std::sync::atomic::Ordering::Relaxed) > sessions
            };
            let run = crate::pipeline::run(config, run_token, metrics.clone());
            tokio::pin!(run);
            let mut started = false;
            let check = |started: &mut bool| {
                if !*started && has_started() {
                    *started = true;
                    startups.task.succeeded();
                }
            };
            let result = loop {
                tokio::select! {
                    r = &mut run => break r,
                    _ = tokio::time::sleep(std::time::Duration::from_millis(200)), if !started => check(&mut started),
                }
            };
            check(&mut started);
            match result {
                Ok(()) => {}
                Err(e) => {
                    if !started {
                        startups.task.failed();
                    }
                    tracing::error!(connector = %name, "connector failed: {e}");
                    set(&state, State::Failed(e.to_string()));
                }
            }
        });
        c.run = Some((token, handle));
    }

    /// Every connector's metrics, and the worker's, in the Prometheus exposition's `format`.
    pub fn metrics_text(&self, format: crate::exposition::Format) -> String {
        let states: Vec<&'static str> =
            self.local_names().iter().map(|n| self.local_state(n).map_or("UNASSIGNED", |s| s.name())).collect();
        let connectors = self.lock();
        let sources: Vec<crate::exposition::Source<'_>> = connectors
            .iter()
            .zip(&states)
            .map(|((name, c), state)| crate::exposition::Source {
                connector: name,
                server: &c.server,
                metrics: &c.metrics,
                state,
            })
            .collect();
        let now =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
        let tasks = states.iter().filter(|s| **s != "STOPPED").count();
        let mut figures = match &self.cluster {
            Some(cluster) => cluster.figures(sources.len(), tasks),
            None => crate::exposition::WorkerFigures::default(),
        };
        figures.startups = Some(self.startups.clone());
        crate::exposition::render(&sources, Some(&figures), now, format)
    }

    /// The state file: every connector's own configuration and target state.
    fn save(&self) {
        let Some(path) = &self.state_file else { return };
        let connectors = self.lock();
        let doc: serde_json::Map<String, serde_json::Value> = connectors
            .iter()
            .map(|(n, c)| {
                let target = match c.target {
                    Target::Running => "STARTED",
                    Target::Paused => "PAUSED",
                    Target::Stopped => "STOPPED",
                };
                (n.clone(), serde_json::json!({"config": c.config, "target_state": target}))
            })
            .collect();
        let text = serde_json::to_string_pretty(&serde_json::Value::Object(doc)).unwrap_or_default();
        let tmp = path.with_extension("json.tmp");
        if let Err(e) = write_private(&tmp, text.as_bytes()).and_then(|()| std::fs::rename(&tmp, path)) {
            tracing::warn!(file = %path.display(), error = %e, "cannot write the worker's connector state file");
        }
    }

    /// The connectors a previous run of this worker kept in its state file.
    pub fn saved(&self) -> Vec<(String, BTreeMap<String, String>, Target)> {
        let Some(path) = &self.state_file else { return Vec::new() };
        let Ok(text) = std::fs::read_to_string(path) else { return Vec::new() };
        let Ok(serde_json::Value::Object(doc)) = serde_json::from_str::<serde_json::Value>(&text) else {
            tracing::warn!(file = %path.display(), "the worker's connector state file is not valid JSON; ignored");
            return Vec::new();
        };
        doc.into_iter()
            .filter_map(|(name, v)| {
                let config: BTreeMap<String, String> = serde_json::from_value(v.get("config")?.clone()).ok()?;
                let target = match v.get("target_state").and_then(|t| t.as_str()) {
                    Some("PAUSED") => Target::Paused,
                    Some("STOPPED") => Target::Stopped,
                    _ => Target::Running,
                };
                Some((name, config, target))
            })
            .collect()
    }

    /// Stops every connector (a graceful stop of each pipeline) and waits for them. A distributed
    /// worker then reports them UNASSIGNED and leaves the group, so the others take them at once.
    pub async fn stop_all(&self) {
        let handles: Vec<_> = self.lock().values_mut().filter_map(|c| c.run.take()).collect();
        for (token, handle) in handles {
            token.cancel();
            let _ = handle.await;
        }
        if let Some(cluster) = &self.cluster {
            for name in self.local_names() {
                cluster.publish_status(&name, Some(&State::Unassigned)).await;
            }
            let cluster = cluster.clone();
            let _ = tokio::task::spawn_blocking(move || cluster.leave()).await;
        }
    }

    /// Distributed mode: runs what the group assigns this worker, as the config topic describes it,
    /// and reports the statuses, until the worker stops.
    pub async fn follow_cluster(self: Arc<Self>) {
        let Some(cluster) = self.cluster.clone() else { return };
        // A reset read from the status topic: what the connector sent so far no longer counts.
        let worker = Arc::downgrade(&self);
        cluster.on_topic_reset(Box::new(move |connector, topic| {
            if let Some(w) = worker.upgrade() {
                w.note_topic_reset(connector, Some(topic));
                w.published_topics_lock().remove(&(connector.to_string(), topic.to_string()));
            }
        }));
        let mut followed = Followed::default();
        loop {
            tokio::select! {
                _ = self.shutdown.cancelled() => return,
                _ = cluster.changed.notified() => {}
                _ = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
            }
            self.reconcile(&cluster, &mut followed).await;
        }
    }

    async fn reconcile(&self, cluster: &cluster::Cluster, followed: &mut Followed) {
        let Some(owned) = cluster.owned() else { return };
        let all: std::collections::BTreeSet<String> = cluster.names().into_iter().collect();
        for name in self.local_names() {
            if owned.iter().any(|(n, _, _)| *n == name) {
                continue;
            }
            let deleted = !all.contains(&name);
            self.give_up(&name, deleted);
            followed.published.remove(&name);
            if deleted {
                cluster.publish_status(&name, None).await;
                // As Connect: a deleted connector's active topics go with it.
                let _ = cluster.reset_topics(&name).await;
                self.topic_baselines.lock().unwrap_or_else(|e| e.into_inner()).remove(&name);
            } else {
                tracing::info!(connector = %name, "the connector moves to another worker");
            }
        }
        for (name, config, target) in owned {
            let current = self.lock().get(&name).map(|c| (c.config.clone(), c.target));
            let result = match current {
                Some((c, t)) if c == config && t == target => Ok(()),
                Some((c, _)) if c == config => self.set_target_local(&name, target),
                _ if followed.rejected.get(&name) == Some(&config) => Ok(()),
                _ => {
                    tracing::info!(connector = %name, "running the connector here, as the group assigned it");
                    // A connector new here starts in its target: one paused or stopped never
                    // streams on the way there.
                    let put = self.put_local(&name, config.clone(), true, target);
                    match put {
                        Ok(_) if target != Target::Running => self.set_target_local(&name, target),
                        Ok(_) => Ok(()),
                        Err(e) => {
                            followed.rejected.insert(name.clone(), config);
                            Err(e)
                        }
                    }
                }
            };
            if let Err(e) = result {
                tracing::error!(connector = %name, "cannot run the connector: {}", e.message);
                cluster.publish_status(&name, Some(&State::Failed(e.message))).await;
            }
        }
        // Active topics (KIP-558): what the connector sent to a topic after its record was deleted
        // (`follow_cluster`'s hook) records the topic again.
        if self.topic_tracking(false).is_ok() {
            for name in self.local_names() {
                let recorded = cluster.topics(&name);
                for topic in self.local_active_topics(&name) {
                    let key = (name.clone(), topic.clone());
                    if recorded.contains(&topic) || self.published_topics_lock().contains(&key) {
                        continue;
                    }
                    if cluster.publish_topic(&name, &topic).await {
                        self.published_topics_lock().insert(key);
                    }
                }
            }
        }
        for (name, only_failed) in cluster.take_restarts() {
            if self.lock().contains_key(&name) {
                let _ = self.restart_local(&name, only_failed);
            }
        }
        for name in self.local_names() {
            let Some(state) = self.local_state(&name) else { continue };
            // Written until the status topic takes it: other workers answer from it.
            if followed.published.get(&name) != Some(&state) && cluster.publish_status(&name, Some(&state)).await {
                followed.published.insert(name, state);
            }
        }
    }

    /// Stops running a connector here: it moved to another worker, or was deleted (then, with
    /// `slot.drop.on.stop`, its slot is dropped once its pipeline has stopped).
    fn give_up(&self, name: &str, deleted: bool) {
        let Some(mut c) = self.lock().remove(name) else { return };
        let drop_slot = deleted.then(|| self.effective(&c.config).ok()).flatten().filter(|cfg| cfg.slot_drop_on_stop);
        let run = c.run.take();
        let retiring = tokio::spawn(async move {
            if let Some((token, handle)) = run {
                token.cancel();
                let _ = handle.await;
            }
            if let Some(cfg) = drop_slot {
                crate::pipeline::drop_slot(&cfg).await;
            }
        });
        let mut all = self.retiring_lock();
        all.retain(|_, h| !h.is_finished());
        all.insert(name.to_string(), retiring);
    }

    fn published_topics_lock(&self) -> std::sync::MutexGuard<'_, std::collections::BTreeSet<(String, String)>> {
        self.published_topics.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn retiring_lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, tokio::task::JoinHandle<()>>> {
        self.retiring.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// What a distributed worker remembers between two reconciliations.
#[derive(Default)]
struct Followed {
    /// The status last written for each connector this worker runs.
    published: BTreeMap<String, State>,
    /// Configurations this worker could not run, not retried until they change.
    rejected: BTreeMap<String, BTreeMap<String, String>>,
}

fn set(state: &Mutex<State>, s: State) {
    *state.lock().unwrap_or_else(|e| e.into_inner()) = s;
}

/// A token already cancelled: the mark of a run that is stopping.
fn cancelled() -> CancellationToken {
    let t = CancellationToken::new();
    t.cancel();
    t
}

/// Cancels the connector's pipeline; it stops gracefully in its task (outstanding
/// acknowledgements awaited, final position confirmed). Returns its task, for whatever must
/// wait for its end.
fn stop(c: &mut Connector) -> Option<tokio::task::JoinHandle<()>> {
    let (token, handle) = c.run.take()?;
    token.cancel();
    Some(handle)
}

/// Connect's rules for a connector name (`ConnectorConfig`'s name validator): not empty, no ISO
/// control characters. (`/` is allowed, as in Connect since KAFKA-4930: URLs carry it as `%2F`.)
/// The value is not repeated, unlike Connect's message: names reach logs and metric labels.
pub fn validate_name(name: &str) -> Result<(), WorkerError> {
    let bad = |message: String| Err(WorkerError { status: 400, message });
    if name.trim().is_empty() {
        return bad("Connector name is required".into());
    }
    if let Some(c) = name.chars().find(|c| c.is_control()) {
        return bad(format!(
            "Connector configuration is invalid and contains the following 1 error(s):\nInvalid value for configuration name: String may not contain control sequences but had the following ASCII chars: {}\nYou can also find the above list of errors at the endpoint `/connector-plugins/{{connectorType}}/config/validate`",
            c as u32
        ));
    }
    Ok(())
}

/// Writes a file only its owner can read: the state file holds connectors' secrets.
fn write_private(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let _ = std::fs::remove_file(path);
    let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path)?;
    // The mode given at creation is masked by the umask; set it outright.
    f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    f.write_all(bytes)?;
    f.sync_all()
}
