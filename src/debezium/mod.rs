//! Debezium's PostgreSQL connector, as far as the records depend on it: which Connect schema a
//! column gets (`column`), how its pgoutput text becomes the value (`value`, with the PostgreSQL
//! text readers `temporal`, `interval` and `array`; `numeric` text is `connect::java::decimal`), the options that change both
//! (`modes`), the Event Router's JSON payload expansion (`expand`), and Debezium's transforms that apply
//! after the router (`transforms`).
//!
//! Built on `connect`'s data model; knows nothing of the outbox, the config file or Kafka.

pub mod array;
pub mod column;
pub mod default;
pub mod expand;
pub mod interval;
pub mod mappers;
pub mod message;
pub mod modes;
pub mod schema_name;

pub mod temporal;
pub mod transforms;
pub mod value;

pub use column::{oid, ColumnType, TextForm};
pub use expand::{Expansion, JsonEmptyArrayBehavior, JsonNullBehavior};
pub use modes::{BinaryHandling, DecimalHandling, IntervalHandling, TemporalPrecision, TypeModes};

#[cfg(test)]
mod tests;
