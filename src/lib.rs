//! pgoutbox: a transactional outbox relay from PostgreSQL logical replication (pgoutput) to Kafka,
//! producing exactly the records of Debezium's Outbox Event Router.
//!
//! `run` is the one entry point; `main` only wires it to the command line and signals.

/// The commit this binary was built from (`build.rs`).
pub const COMMIT: &str = env!("PGOUTBOX_COMMIT");

/// What `pgoutbox --version` prints after the name: the version, the commit, librdkafka's version
/// and the Kafka Connect REST API it implements.
pub fn version_text() -> String {
    format!(
        "{} (commit {COMMIT}, librdkafka {}, Kafka Connect REST API {})",
        env!("CARGO_PKG_VERSION"),
        rdkafka::util::get_rdkafka_version().1,
        worker::rest::CONNECT_VERSION
    )
}

pub mod check;
pub mod config;
pub mod connect;
pub mod debezium;
pub mod error;
pub mod exposition;
pub mod http;
pub mod kafka;
pub mod logging;
pub mod lsn;
pub mod metrics;
pub mod outbox;
pub mod pgoutput;
pub mod pipeline;
pub mod postgres;
pub mod tls;
pub mod verify;
pub mod worker;

pub use config::Config;
pub use error::RelayError;

use std::net::SocketAddr;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

/// What `run` serves besides the relay.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Where to serve `/metrics` and `/health` (`--metrics-address`); none when `None`.
    pub metrics_address: Option<SocketAddr>,
}

/// Runs the relay until `shutdown` is cancelled (a graceful stop: outstanding acknowledgements are
/// awaited, bounded, and the final position is confirmed) or a definite error. Logs the config keys
/// it does not act on, and serves the HTTP endpoint for as long as it runs.
pub async fn run(config: Config, options: RunOptions, shutdown: CancellationToken) -> Result<(), RelayError> {
    for ignored in &config.ignored {
        tracing::warn!(key = %ignored.key, "ignored config key: {}", ignored.reason);
    }
    for w in &config.warnings {
        tracing::warn!("{w}");
    }
    for (key, alias) in &config.undeclared_providers {
        tracing::warn!(%key, "the value refers to config provider `{alias}`, which config.providers does not declare: it is used literally, as Connect would; declare the provider or fix the reference");
    }
    let metrics = Arc::new(metrics::Metrics::default());
    if let Some(addr) = options.metrics_address {
        let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| {
            RelayError::Config(config::ConfigError::invalid(
                "--metrics-address",
                format!("cannot listen on {addr}: {e}"),
            ))
        })?;
        let relay = http::Relay {
            connector: config.connector_name.clone(),
            server: config.topic_prefix.clone(),
            metrics: metrics.clone(),
        };
        tokio::spawn(http::serve(listener, relay, shutdown.clone()));
    }
    pipeline::run(config, shutdown, metrics).await
}

/// The worker's REST listener: the first entry of Connect's `listeners` (default `http://:8083`,
/// every interface), `http://` or `https://`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestListener {
    pub addr: SocketAddr,
    pub https: bool,
}

pub fn worker_listener(
    props: &std::collections::BTreeMap<String, String>,
) -> Result<RestListener, config::ConfigError> {
    let invalid = |why: String| config::ConfigError::invalid("listeners", why);
    let listeners = props.get("listeners").map(String::as_str).unwrap_or("http://:8083");
    let mut entries = listeners.split(',').map(str::trim).filter(|l| !l.is_empty());
    let first = entries.next().unwrap_or("http://:8083");
    let rest: Vec<&str> = entries.collect();
    if !rest.is_empty() {
        tracing::warn!(serving = first, not_served = ?rest, "listeners: only the first listener is served");
    }
    let (https, hostport) = match first.split_once("://") {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("http") => (false, rest),
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("https") => (true, rest),
        _ => return Err(invalid("its first listener is not http://HOST:PORT or https://HOST:PORT".into())),
    };
    let (host, port) = hostport.rsplit_once(':').ok_or_else(|| invalid("its first listener has no port".into()))?;
    let host = if host.is_empty() { "0.0.0.0" } else { host.trim_start_matches('[').trim_end_matches(']') };
    let port: u16 = port.parse().map_err(|_| invalid("its first listener's port is not a port number".into()))?;
    let ip: std::net::IpAddr = match host {
        "localhost" => std::net::Ipv4Addr::LOCALHOST.into(),
        h => h.parse().map_err(|_| {
            invalid("its first listener's host is not an IP address (use an address or leave the host empty)".into())
        })?,
    };
    Ok(RestListener { addr: SocketAddr::new(ip, port), https })
}

/// The REST listener's TLS configuration; config-provider references (`${file:...}`) in its keys
/// resolve as in a connector's config.
fn rest_tls(
    worker_props: &std::collections::BTreeMap<String, String>,
) -> Result<Arc<rustls::ServerConfig>, RelayError> {
    let raw = config::RawConfig { entries: worker_props.clone(), source_name: None };
    let resolved = config::providers::resolve(&raw)?;
    Ok(Arc::new(worker::tls::server_config(&resolved.raw.entries)?))
}

/// A standalone worker's saved connectors, then the files (a file's config wins over the saved
/// one). Files given to a distributed worker go to the cluster's config topic, as a PUT would.
async fn load_connectors(
    worker: &worker::Worker,
    connectors: Vec<(String, std::collections::BTreeMap<String, String>)>,
) -> Result<(), RelayError> {
    for (name, config, target) in worker.saved() {
        if connectors.iter().any(|(n, _)| *n == name) {
            continue;
        }
        // In its saved target from the start: a stopped connector does not stream on the way there.
        if let Err(e) = worker.create(&name, config, target).await {
            tracing::error!(connector = %name, "cannot start the saved connector: {}", e.message);
        }
    }
    for (name, config) in connectors {
        worker.put(&name, config, true).await.map_err(|e| {
            RelayError::Config(config::ConfigError::invalid("name", format!("connector `{name}`: {}", e.message)))
        })?;
    }
    Ok(())
}

/// `pgoutbox connect`: a Kafka Connect worker for outbox connectors, with Connect's REST API, until
/// `shutdown`; then every connector stops gracefully. Standalone, or distributed with `group.id`.
pub async fn connect(
    worker_props: std::collections::BTreeMap<String, String>,
    connectors: Vec<(String, std::collections::BTreeMap<String, String>)>,
    shutdown: CancellationToken,
) -> Result<(), RelayError> {
    let distributed = worker::cluster::Settings::from_props(&worker_props)?;
    // Checked before anything starts; the worker keeps its own copy.
    worker::policy::OverridePolicy::from_props(&worker_props)?;
    let auth = worker::auth::BasicAuth::from_props(&worker_props, std::env::var("KAFKA_OPTS").ok().as_deref())?;
    let rest = worker_listener(&worker_props)?;
    let tls = match rest.https {
        true => Some(rest_tls(&worker_props)?),
        false => None,
    };
    let addr = rest.addr;
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| {
        RelayError::Config(config::ConfigError::invalid("listeners", format!("cannot listen on {addr}: {e}")))
    })?;
    let bound = listener.local_addr().unwrap_or(addr);
    // Served from here on: while the worker joins its cluster and loads its connectors, every
    // route answers that it is starting (`/health` 503, as Connect's), then the worker's routes.
    let (app, routes) = tokio::sync::watch::channel(None);
    let serving = shutdown.child_token();
    let front = worker::rest::front(routes, auth.clone(), START_WAIT);
    let server = tokio::spawn(serve(listener, front, tls.clone(), serving.clone()));
    let started = start_worker(worker_props, connectors, shutdown.clone(), bound, distributed).await;
    let (worker, cluster) = match started {
        Ok(w) => w,
        Err(e) => {
            serving.cancel();
            let _ = server.await;
            return Err(e);
        }
    };
    let _ = app.send(Some(worker::rest::routes(worker.clone())));
    let follower = cluster.is_some().then(|| tokio::spawn(worker.clone().follow_cluster()));
    let scheme = if tls.is_some() { "https" } else { "http" };
    tracing::info!(listen = %bound, scheme, worker_id = %worker.worker_id, connectors = ?worker.names(), "Connect REST API listening");
    if auth.is_none() {
        tracing::warn!("the REST API asks for no credentials: anyone who reaches {bound} can create, change and delete connectors; set rest.extension.classes={} with a JAAS users file, or listeners.https.ssl.client.auth=required", worker::auth::BASIC_AUTH_EXTENSION);
    }
    let served = server.await;
    if let Ok(Err(e)) = served {
        tracing::warn!(error = %e, "the REST server stopped");
    }
    if let Some(f) = follower {
        let _ = f.await;
    }
    worker.stop_all().await;
    Ok(())
}

/// How long a REST call made while the worker starts waits for it (Connect's request timeout).
const START_WAIT: std::time::Duration = std::time::Duration::from_secs(90);

/// The worker itself: its id, its cluster (distributed mode) and its connectors.
async fn start_worker(
    worker_props: std::collections::BTreeMap<String, String>,
    connectors: Vec<(String, std::collections::BTreeMap<String, String>)>,
    shutdown: CancellationToken,
    bound: SocketAddr,
    distributed: Option<worker::cluster::Settings>,
) -> Result<(Arc<worker::Worker>, Option<Arc<worker::cluster::Cluster>>), RelayError> {
    let host = worker_props.get("rest.advertised.host.name").cloned().unwrap_or_else(|| bound.ip().to_string());
    let port = worker_props.get("rest.advertised.port").cloned().unwrap_or_else(|| bound.port().to_string());
    let worker_id = format!("{host}:{port}");
    let cluster = match distributed {
        Some(settings) => {
            let kafka = config::worker_kafka(&worker_props)?;
            tracing::info!(group = %settings.group_id, config_topic = %settings.config_topic, status_topic = %settings.status_topic, offset_topic = %settings.offset_topic, "joining the Connect cluster");
            Some(worker::cluster::Cluster::start(settings, kafka, worker_id.clone()).await?)
        }
        None => None,
    };
    let worker = Arc::new(worker::Worker::new(worker_props, worker_id, shutdown, cluster.clone())?);
    load_connectors(&worker, connectors).await?;
    Ok((worker, cluster))
}

/// Serves the REST API on `listener` (through TLS with `tls`) until `shutdown`.
async fn serve(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    tls: Option<Arc<rustls::ServerConfig>>,
    shutdown: CancellationToken,
) -> Result<(), std::io::Error> {
    match tls {
        Some(config) => {
            let listener = worker::tls::TlsListener::new(listener, config, shutdown.clone())?;
            axum::serve(listener, app).with_graceful_shutdown(shutdown.cancelled_owned()).await
        }
        None => axum::serve(listener, app).with_graceful_shutdown(shutdown.cancelled_owned()).await,
    }
}
