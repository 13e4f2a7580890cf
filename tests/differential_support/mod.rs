//! The differential harness: the same rows through the real Debezium 3.6.3 and through pgoutbox, each
//! with its own slot and broker, and the records compared byte for byte (`compare.rs` lists the only
//! tolerated differences). `harness.rs` runs one `Case`; `migration.rs` hands a live slot from
//! Debezium to pgoutbox; `migration_connect.rs` hands it from Kafka Connect + Debezium to pgoutbox and
//! back through Connect's offsets topic, under exactly once.
#![allow(dead_code)]

pub mod broker;
pub mod case;
pub mod cases;
pub mod compare;
pub mod connect;
pub mod debezium;
pub mod flush_connect;
pub mod harness;
pub mod metrics_connect;
pub mod migration;
pub mod migration_connect;
pub mod mismatch_connect;
pub mod registry;
pub mod rollback_connect;
pub mod sides;
pub mod via_connect;

pub use case::{insert, lit, tx, Case};
pub use harness::run;

/// Two runs at a time, whatever the harness's thread count (scripts/test.sh may run other
/// binaries four at a time): each run starts JVMs, and on two cores more of them at once only slow each
/// other down past the cases' deadlines.
static TURNS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(2);

/// Waits for one of the two turns; the turn is held until the returned permit is dropped.
pub async fn turn() -> tokio::sync::SemaphorePermit<'static> {
    TURNS.acquire().await.expect("the semaphore is never closed")
}
