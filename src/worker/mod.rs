//! A Kafka Connect worker for outbox connectors (`pgoutbox connect`): any number of connectors in
//! one process, each with its own slot, publication, producer and pipeline, one failing without
//! stopping the others, driven through Connect's REST API (`rest`).
//!
//! Standalone mode: connector configs come from the files named on the command line and from REST.
//! What REST creates, changes or deletes is kept in a state file next to
//! `offset.storage.file.filename` (Connect's standalone worker forgets it), so a restarted worker
//! runs the same connectors in the same target states.
//!
//! A connector's effective configuration is the worker's properties overlaid with its own, as a
//! Connect worker passes its converters, `bootstrap.servers` and client settings to its connectors.

pub mod rest;
pub mod tls;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

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

pub struct Worker {
    props: BTreeMap<String, String>,
    pub worker_id: String,
    state_file: Option<PathBuf>,
    connectors: Mutex<BTreeMap<String, Connector>>,
    shutdown: CancellationToken,
}

impl Worker {
    pub fn new(props: BTreeMap<String, String>, worker_id: String, shutdown: CancellationToken) -> Worker {
        let state_file = props
            .get("offset.storage.file.filename")
            .filter(|f| !f.trim().is_empty())
            .map(|f| PathBuf::from(format!("{}.connectors.json", f.trim())));
        Worker { props, worker_id, state_file, connectors: Mutex::new(BTreeMap::new()), shutdown }
    }

    /// The worker's and the connector's keys merged (the connector's win), parsed and checked.
    pub fn effective(&self, config: &BTreeMap<String, String>) -> Result<Config, ConfigError> {
        // The REST server's own keys are the worker's, not its connectors'.
        let rest_key = |k: &str| k == "listeners" || k.starts_with("listeners.") || k.starts_with("rest.");
        let mut entries: BTreeMap<String, String> =
            self.props.iter().filter(|(k, _)| !rest_key(k)).map(|(k, v)| (k.clone(), v.clone())).collect();
        entries.extend(config.iter().map(|(k, v)| (k.clone(), v.clone())));
        Config::from_raw(&RawConfig { entries, source_name: None })
    }

    pub fn names(&self) -> Vec<String> {
        self.lock().keys().cloned().collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Connector>> {
        self.connectors.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The connector's own configuration.
    pub fn config(&self, name: &str) -> Result<BTreeMap<String, String>, WorkerError> {
        self.lock().get(name).map(|c| c.config.clone()).ok_or_else(|| WorkerError::not_found(name))
    }

    pub fn state(&self, name: &str) -> Result<State, WorkerError> {
        let c = self.lock();
        let c = c.get(name).ok_or_else(|| WorkerError::not_found(name))?;
        let state = c.state.lock().unwrap_or_else(|e| e.into_inner()).clone();
        Ok(state)
    }

    /// Creates a connector (or, with `replace`, replaces its configuration and restarts it).
    /// `Ok(true)` when it was created.
    pub fn put(&self, name: &str, mut config: BTreeMap<String, String>, replace: bool) -> Result<bool, WorkerError> {
        config.insert("name".to_string(), name.to_string());
        let parsed = self.effective(&config).map_err(|e| WorkerError {
            status: 400,
            message: format!("Connector configuration is invalid and contains the following 1 error(s):\n{e}\nYou can also find the above list of errors at the endpoint `/connector-plugins/{{connectorType}}/config/validate`"),
        })?;
        let mut connectors = self.lock();
        let created = !connectors.contains_key(name);
        if !created && !replace {
            return Err(WorkerError { status: 409, message: format!("Connector {name} already exists") });
        }
        let target = match connectors.remove(name) {
            Some(mut old) => {
                stop(&mut old);
                old.target
            }
            None => Target::Running,
        };
        let server = parsed.topic_prefix.clone();
        let mut c = Connector {
            config,
            target,
            state: Arc::new(Mutex::new(State::Unassigned)),
            run: None,
            metrics: Arc::new(Metrics::default()),
            server,
        };
        if target == Target::Running {
            self.start(&mut c, parsed);
        } else {
            set(&c.state, if target == Target::Paused { State::Paused } else { State::Stopped });
        }
        connectors.insert(name.to_string(), c);
        drop(connectors);
        self.save();
        Ok(created)
    }

    pub fn delete(&self, name: &str) -> Result<(), WorkerError> {
        let mut c = self.lock().remove(name).ok_or_else(|| WorkerError::not_found(name))?;
        stop(&mut c);
        self.save();
        Ok(())
    }

    /// Pause, resume or stop: the pipeline stops (its position stays in the slot) or starts again.
    pub fn set_target(&self, name: &str, target: Target) -> Result<(), WorkerError> {
        let mut connectors = self.lock();
        let c = connectors.get_mut(name).ok_or_else(|| WorkerError::not_found(name))?;
        c.target = target;
        match target {
            Target::Running => {
                if c.run.is_none() {
                    let parsed =
                        self.effective(&c.config).map_err(|e| WorkerError { status: 400, message: e.to_string() })?;
                    self.start(c, parsed);
                }
            }
            Target::Paused | Target::Stopped => {
                stop(c);
                set(&c.state, if target == Target::Paused { State::Paused } else { State::Stopped });
            }
        }
        drop(connectors);
        self.save();
        Ok(())
    }

    /// Restarts the connector (only when it failed, with `only_failed`).
    pub fn restart(&self, name: &str, only_failed: bool) -> Result<(), WorkerError> {
        let mut connectors = self.lock();
        let c = connectors.get_mut(name).ok_or_else(|| WorkerError::not_found(name))?;
        let failed = matches!(*c.state.lock().unwrap_or_else(|e| e.into_inner()), State::Failed(_));
        if (only_failed && !failed) || c.target != Target::Running {
            return Ok(());
        }
        stop(c);
        let parsed = self.effective(&c.config).map_err(|e| WorkerError { status: 400, message: e.to_string() })?;
        self.start(c, parsed);
        Ok(())
    }

    fn start(&self, c: &mut Connector, config: Config) {
        let token = self.shutdown.child_token();
        let state = c.state.clone();
        set(&state, State::Running);
        // The same counters across restarts, resumes and config updates: Prometheus counters must
        // never go back (a reset between two scrapes would hide what happened in between).
        let metrics = c.metrics.clone();
        let run_token = token.clone();
        let handle = tokio::spawn(async move {
            let name = config.connector_name.clone();
            match crate::pipeline::run(config, run_token, metrics).await {
                Ok(()) => {}
                Err(e) => {
                    tracing::error!(connector = %name, "connector failed: {e}");
                    set(&state, State::Failed(e.to_string()));
                }
            }
        });
        c.run = Some((token, handle));
    }

    /// Every connector's metrics in the Prometheus exposition.
    pub fn metrics_text(&self) -> String {
        let connectors = self.lock();
        let states: Vec<&'static str> =
            connectors.values().map(|c| c.state.lock().unwrap_or_else(|e| e.into_inner()).name()).collect();
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
        crate::exposition::render(&sources, now)
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
        if let Err(e) = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, path)) {
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

    /// Stops every connector (a graceful stop of each pipeline) and waits for them.
    pub async fn stop_all(&self) {
        let handles: Vec<_> = self.lock().values_mut().filter_map(|c| c.run.take()).collect();
        for (token, handle) in handles {
            token.cancel();
            let _ = handle.await;
        }
    }
}

fn set(state: &Mutex<State>, s: State) {
    *state.lock().unwrap_or_else(|e| e.into_inner()) = s;
}

/// Cancels the connector's pipeline; it stops gracefully in its task (outstanding
/// acknowledgements awaited, final position confirmed).
fn stop(c: &mut Connector) {
    if let Some((token, _handle)) = c.run.take() {
        token.cancel();
    }
}
