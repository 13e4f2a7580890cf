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

use tokio_util::sync::CancellationToken;

/// Runs the relay until `shutdown` is cancelled (a graceful stop: outstanding acknowledgements are
/// awaited, bounded, and the final position is confirmed) or a definite error.
pub async fn run(
    config: Config,
    shutdown: CancellationToken,
    metrics: std::sync::Arc<metrics::Metrics>,
) -> Result<(), RelayError> {
    pipeline::run(config, shutdown, metrics).await
}
