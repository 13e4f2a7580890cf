//! Records the producer will refuse, found before they are sent. A batch that handed such a record
//! to the sink would stop with nothing marked, and every restart would publish the rows before it
//! again; instead the batch ends before it, its rows are published and marked, and the relay stops
//! naming the row (see `batch`).
//!
//! librdkafka refuses a record at once when its largest possible encoding (`rd_kafka_msg_max_wire_size`:
//! a v2 record's maximal overhead, the key, the value and the serialized headers) exceeds
//! `message.max.bytes`, which `max.request.size` maps onto. `wire_size` is that formula, so the
//! check here refuses exactly what librdkafka would. The broker refuses a record whose batch of its
//! own (61 bytes more) exceeds the topic's `max.message.bytes`, read once per topic: such a record
//! ends its batch too, instead of failing the batch at the broker, which rolled every row back and
//! published them again at each restart.

use std::collections::HashMap;
use std::sync::Arc;

use crate::config::Config;
use crate::error::RelayError;
use crate::outbox::OutboxRecord;

/// `RD_KAFKAP_MESSAGE_V2_MAX_OVERHEAD`: length (varint, 5), attributes (1), timestamp delta (10),
/// offset delta, key length, value length and header count (5 each).
const V2_MAX_OVERHEAD: usize = 5 + 1 + 10 + 5 + 5 + 5 + 5;

/// The bytes a v2 record batch adds to its records (its header).
const BATCH_OVERHEAD: usize = 61;

/// The producer's largest record, and each topic's, when refusing one stops the relay
/// (`errors.tolerance=none`).
#[derive(Debug, Clone)]
pub struct RecordLimit {
    max: usize,
    /// Each topic's `max.message.bytes` (`None`: not readable), read on its first record.
    topics: HashMap<Arc<str>, Option<usize>>,
}

impl RecordLimit {
    /// `None` with `errors.tolerance=all`: the sink skips (or dead-letters) a refused record itself.
    pub fn of(cfg: &Config) -> Option<RecordLimit> {
        if cfg.errors.tolerate {
            return None;
        }
        let configured = cfg.kafka.producer_overrides.get("message.max.bytes");
        let max = configured.unwrap_or(crate::config::producer::JAVA_MAX_REQUEST_SIZE).trim().parse().ok()?;
        Some(RecordLimit { max, topics: HashMap::new() })
    }

    /// Reads the limit of `topic` the first time one of its records is checked.
    pub async fn learn(&mut self, kafka: &crate::config::KafkaConfig, topic: &Arc<str>) {
        if !self.topics.contains_key(topic) {
            let limit = crate::kafka::topics::max_message_bytes(kafka, topic).await;
            self.topics.insert(topic.clone(), limit);
        }
    }

    /// The largest record `topic` takes: the producer's limit, or the topic's if smaller.
    fn max_for(&self, topic: &str) -> usize {
        match self.topics.get(topic) {
            Some(Some(limit)) => self.max.min(limit.saturating_sub(BATCH_OVERHEAD)),
            _ => self.max,
        }
    }

    /// `Err(size)` when the producer would refuse `record`.
    pub fn check(&self, record: &OutboxRecord) -> Result<(), usize> {
        let size = wire_size(record);
        if size > self.max_for(&record.topic) {
            Err(size)
        } else {
            Ok(())
        }
    }

    /// The error that stops the relay at `record`, after the `published` rows before it.
    pub fn refused(&self, table: &str, record: &OutboxRecord, size: usize, published: usize) -> RelayError {
        let over = match self.topics.get(&*record.topic) {
            Some(Some(limit)) if self.max_for(&record.topic) < self.max => {
                format!("the topic's max.message.bytes of {limit} bytes (with a batch's {BATCH_OVERHEAD}-byte header)")
            }
            _ => format!("the producer's max.request.size of {} bytes", self.max),
        };
        RelayError::InvalidOperation(format!(
            "event `{id}` of {table} (topic `{topic}`) is {size} bytes, larger than {over}, \
             and errors.tolerance=none: stopping before it ({published} rows before it in its batch were published and marked; \
             it and the rows after it stay unpublished). Raise producer.override.max.request.size above {size} (and the topic's \
             max.message.bytes or the broker's message.max.bytes with it), or make the payload smaller, or set errors.tolerance=all \
             with errors.deadletterqueue.topic.name to send it to a dead-letter topic",
            id = record.event_id(),
            topic = record.topic,
        ))
    }
}

/// librdkafka's `rd_kafka_msg_max_wire_size` for `record`.
pub fn wire_size(record: &OutboxRecord) -> usize {
    let headers: usize = record
        .headers
        .iter()
        .map(|h| {
            let (name, value) = (h.name.len(), h.value.as_ref().map_or(0, |v| v.len()));
            name + value + zigzag_varint_len(name) + zigzag_varint_len(value)
        })
        .sum();
    V2_MAX_OVERHEAD
        + record.key.as_ref().map_or(0, |k| k.len())
        + record.value.as_ref().map_or(0, |v| v.len())
        + headers
}

/// Bytes of `n` as a zigzag varint (`rd_uvarint_enc_i64`).
fn zigzag_varint_len(n: usize) -> usize {
    let mut v = (n as u64) << 1;
    let mut len = 1;
    while v >= 0x80 {
        v >>= 7;
        len += 1;
    }
    len
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zigzag_varint_lengths_match_librdkafkas() {
        // zigzag(n) = 2n: one byte up to 63, two up to 8191.
        assert_eq!([0, 63, 64, 8191, 8192].map(zigzag_varint_len), [1, 1, 2, 2, 3]);
    }

    /// The librdkafka check itself: a producer with `message.max.bytes` = `wire_size` takes the
    /// record, and one a byte smaller refuses it at once, as `RecordLimit` predicts.
    #[test]
    fn wire_size_is_the_size_librdkafka_refuses_above() {
        use rdkafka::producer::{BaseProducer, Producer as _};
        let record = OutboxRecord {
            topic: std::sync::Arc::from("limits_test"),
            key: Some(bytes::Bytes::from_static(b"order-1")),
            value: Some(bytes::Bytes::from(vec![b'x'; 3000])),
            headers: vec![
                crate::outbox::Header {
                    name: std::sync::Arc::from("id"),
                    value: Some(bytes::Bytes::from_static(b"e-1")),
                },
                crate::outbox::Header { name: std::sync::Arc::from("empty"), value: None },
                crate::outbox::Header {
                    name: std::sync::Arc::from("long"),
                    value: Some(bytes::Bytes::from(vec![b'y'; 200])),
                },
            ],
            partition: Some(0),
            timestamp_ms: 0,
        };
        let size = wire_size(&record);
        for (max, accepted) in [(size, true), (size - 1, false)] {
            let producer: BaseProducer<rdkafka::producer::DefaultProducerContext> = rdkafka::ClientConfig::new()
                .set("bootstrap.servers", "127.0.0.1:9")
                .set("message.max.bytes", max.to_string())
                .create()
                .expect("a producer needs no broker to be created");
            let sent = producer.send(crate::kafka::base_record(&record, ()));
            let refused_too_large = matches!(
                &sent,
                Err((
                    rdkafka::error::KafkaError::MessageProduction(
                        rdkafka::types::RDKafkaErrorCode::MessageSizeTooLarge
                    ),
                    _
                ))
            );
            assert_eq!(
                !refused_too_large,
                accepted,
                "message.max.bytes={max}, wire size {size}: {:?}",
                sent.err().map(|e| e.0)
            );
            assert_eq!(RecordLimit { max, topics: HashMap::new() }.check(&record).is_ok(), accepted);
            producer.purge(rdkafka::producer::PurgeConfig::default().queue());
        }
    }
}
