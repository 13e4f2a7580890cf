//! The Kafka producer: configuration, delivery reports, error classification, topic creation.

mod certificate;
pub mod consume;
pub mod errors;
pub mod offsets;
mod producer;
pub mod security;
pub mod topics;

pub use errors::{is_permanent, DeliveryFailure, Error};
pub use producer::{
    base_config, base_record, client_config, client_stats, create_topics, topic_exists, transaction_timeout, Ack,
    Producer, Record, STATISTICS_INTERVAL_MS,
};
