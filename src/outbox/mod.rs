//! The Outbox Event Router: which rows become records, and the exact topic, key, value and headers
//! Debezium's `io.debezium.transforms.outbox.EventRouter` would give them under the configured
//! converters. Its options are parsed here (`options`); the router plans a table's columns once
//! (`router::plan`) and routes each row; `heartbeat` and
//! `dead_letter` are the connector's two other kinds of record.
//!
//! Built on `debezium` (column types and values) and `connect` (converters); knows nothing of the
//! config file, PostgreSQL connections or Kafka.

/// The Outbox Event Router's class, as connector configs name it.
pub const EVENT_ROUTER_CLASS: &str = "io.debezium.transforms.outbox.EventRouter";

pub mod chain;
pub mod dead_letter;
pub mod heartbeat;
pub mod options;
pub mod router;

use std::sync::Arc;

use bytes::Bytes;

pub use options::{AdditionalField, InvalidOpBehavior, Placement, RouterConfig};
pub use router::{ColumnInfo, ContextHeaders, Converters, RelationInfo, RouteError, RoutePlan, Router};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub name: Arc<str>,
    pub value: Option<Bytes>,
}

/// One Kafka record, ready for the producer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxRecord {
    pub topic: Arc<str>,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<Header>,
    /// Set only by a `partition` placement; otherwise the murmur2 partitioner decides.
    pub partition: Option<i32>,
    pub timestamp_ms: i64,
}

impl OutboxRecord {
    /// The event id as text, for logs and errors.
    pub fn event_id(&self) -> String {
        self.headers
            .iter()
            .rev()
            .find(|h| &*h.name == "id")
            .and_then(|h| h.value.as_ref())
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .unwrap_or_else(|| "<none>".to_string())
    }

    /// Bytes this record occupies in the producer's queue, roughly (the reader bounds its batches
    /// by it).
    pub fn size(&self) -> usize {
        self.key.as_ref().map_or(0, Bytes::len)
            + self.value.as_ref().map_or(0, Bytes::len)
            + self.headers.iter().map(|h| h.name.len() + h.value.as_ref().map_or(0, Bytes::len)).sum::<usize>()
            + self.topic.len()
    }
}
