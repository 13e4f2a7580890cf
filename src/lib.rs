//! pgoutbox: a transactional outbox relay from PostgreSQL logical replication (pgoutput) to Kafka,
//! producing exactly the records of Debezium's Outbox Event Router.
//!
//! `run` is the one entry point; `main` only wires it to the command line and signals.

pub mod check;
pub mod config;
pub mod connect;
pub mod debezium;
pub mod error;
pub mod http;
pub mod kafka;
pub mod lsn;
pub mod metrics;
pub mod outbox;
pub mod pgoutput;
pub mod pipeline;
pub mod postgres;
pub mod verify;

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
        tokio::spawn(http::serve(listener, metrics.clone(), shutdown.clone()));
    }
    pipeline::run(config, shutdown, metrics).await
}
