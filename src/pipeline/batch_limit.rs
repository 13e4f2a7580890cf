//! Records the broker refuses as too large, told apart from batches it refuses as too large.
//!
//! A topic takes record batches of at most its `max.message.bytes`. librdkafka fills a batch up to
//! `batch.size` (1,000,000 bytes by default) and, unlike Kafka's Java producer, does not split a batch
//! the broker refuses: every record in it fails with "message size too large", each small enough to
//! go alone. Skipping those under `errors.tolerance=all`, as Connect skips a record too large by
//! itself, would lose events Connect delivers; so a size refusal is the record's own only when the
//! record alone is over the topic's limit, and otherwise stops the relay naming `batch.size`.

use std::collections::HashMap;
use std::sync::Arc;

use crate::config::{ClientSettings, KafkaConfig};

/// The bytes a v2 record batch adds to its records (its header).
const BATCH_OVERHEAD: usize = 61;

/// librdkafka's `batch.size` default.
const BATCH_SIZE: usize = 1_000_000;

/// What the operator does about a batch the broker refused although its records fit alone.
pub const BATCH_FIX: &str = "the record alone fits the topic's max.message.bytes, but librdkafka sent it in a batch of up to batch.size bytes (1,000,000 by default) and, unlike Kafka's Java producer, does not split a batch the broker refuses; set producer.override.batch.size (or producer.batch.size) below the topic's max.message.bytes, or raise the topic's max.message.bytes. Not skipped under errors.tolerance=all: the records of the batch would be lost although each could be delivered";

/// The same where the topic's limit could not be read.
pub const UNKNOWN_FIX: &str = "the broker refused the record, or the batch of up to batch.size bytes (1,000,000 by default) librdkafka sent it in, as larger than the topic's max.message.bytes, which pgoutbox could not read (grant DESCRIBE_CONFIGS on the topic to have the two told apart); librdkafka, unlike Kafka's Java producer, does not split a refused batch. Set producer.override.batch.size below the topic's max.message.bytes, or raise the topic's max.message.bytes, or make the payload smaller. Not skipped under errors.tolerance=all: the other records of the batch may each fit";

/// The largest batch each topic takes, learnt on the first record to it.
pub struct TopicLimits {
    known: HashMap<Arc<str>, Option<usize>>,
    /// The largest batch the producer builds.
    batch: usize,
}

impl TopicLimits {
    /// `producer`: the producer's librdkafka settings.
    pub fn new(producer: &ClientSettings) -> Self {
        let setting = |key: &str| producer.get(key).and_then(|v| v.trim().parse::<usize>().ok());
        let batch = setting("batch.size").unwrap_or(BATCH_SIZE).min(setting("message.max.bytes").unwrap_or(usize::MAX));
        TopicLimits { known: HashMap::new(), batch }
    }

    /// Reads `topic`'s limit the first time a record goes to it, warning when the producer's
    /// batches can be larger than the topic takes.
    pub async fn learn(&mut self, kafka: &KafkaConfig, topic: &Arc<str>) {
        if self.known.contains_key(topic) {
            return;
        }
        let limit = crate::kafka::topics::max_message_bytes(kafka, topic).await;
        if let Some(limit) = limit.filter(|l| *l < self.batch + BATCH_OVERHEAD) {
            tracing::warn!(
                topic = %topic,
                max_message_bytes = limit,
                batch_size = self.batch,
                "topic `{topic}` takes record batches of at most {limit} bytes (max.message.bytes) and the producer builds batches of up to {} bytes (batch.size): under load the broker refuses whole batches and the relay stops. Set producer.override.batch.size to at most {}, or raise the topic's max.message.bytes",
                self.batch,
                limit.saturating_sub(BATCH_OVERHEAD + 100),
            );
        }
        self.known.insert(topic.clone(), limit);
    }

    /// What to do about a size refusal of a record that is not too large alone.
    pub fn fix(&self, topic: &str) -> &'static str {
        match self.known.get(topic) {
            Some(Some(_)) => BATCH_FIX,
            _ => UNKNOWN_FIX,
        }
    }

    /// Whether a record of `size` bytes (as a batch's record) is over `topic`'s limit by itself;
    /// `false` when the limit is not known.
    pub fn too_large_alone(&self, topic: &str, size: usize) -> bool {
        matches!(self.known.get(topic), Some(Some(limit)) if size + BATCH_OVERHEAD > *limit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_too_large_alone_only_over_a_known_limit() {
        let mut limits = TopicLimits { known: HashMap::new(), batch: BATCH_SIZE };
        limits.known.insert(Arc::from("small"), Some(4096));
        limits.known.insert(Arc::from("unreadable"), None);
        assert!(!limits.too_large_alone("small", 4096 - BATCH_OVERHEAD), "a record that fits alone");
        assert!(limits.too_large_alone("small", 4096 - BATCH_OVERHEAD + 1));
        assert!(!limits.too_large_alone("unreadable", 10_000_000), "unknown: never the record's own fault");
        assert!(!limits.too_large_alone("never-seen", 10_000_000));
    }

    #[test]
    fn the_producers_batch_is_the_smaller_of_batch_size_and_message_max_bytes() {
        let mut producer = ClientSettings::default();
        assert_eq!(TopicLimits::new(&producer).batch, BATCH_SIZE);
        producer.set("batch.size", "3000");
        assert_eq!(TopicLimits::new(&producer).batch, 3000);
        producer.set("message.max.bytes", "2000");
        assert_eq!(TopicLimits::new(&producer).batch, 2000);
    }
}
