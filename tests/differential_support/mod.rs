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
pub mod harness;
pub mod migration;
pub mod migration_connect;
pub mod via_connect;

pub use case::{insert, lit, tx, Case};
pub use harness::run;
