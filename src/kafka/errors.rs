//! Which Kafka errors can never succeed on retry. Everything else is transient: librdkafka retries it
//! itself (the idempotent producer keeps order), and if it still surfaces, the relay resumes from the
//! confirmed position.

use rdkafka::error::{KafkaError, RDKafkaErrorCode};

/// A record the broker refused for good, with what the operator needs to fix it.
#[derive(Debug, Clone, thiserror::Error)]
#[error("the broker refused event `{event_id}` for topic `{topic}`: {error}; {fix}")]
pub struct DeliveryFailure {
    pub event_id: String,
    pub topic: String,
    pub error: KafkaError,
    pub fix: &'static str,
}

pub fn is_permanent(error: &KafkaError) -> Option<&'static str> {
    let code = error.rdkafka_error_code()?;
    Some(match code {
        RDKafkaErrorCode::MessageSizeTooLarge | RDKafkaErrorCode::InvalidMessageSize => {
            "the record is larger than the broker or producer accepts; raise the topic's max.message.bytes and message.max.bytes, or make the payload smaller"
        }
        RDKafkaErrorCode::MessageBatchTooLarge => "the batch is larger than the broker accepts; raise the broker's message size limits",
        RDKafkaErrorCode::TopicAuthorizationFailed | RDKafkaErrorCode::ClusterAuthorizationFailed => {
            "grant this client WRITE (and IDEMPOTENT_WRITE) on the topic"
        }
        RDKafkaErrorCode::UnknownTopicOrPartition | RDKafkaErrorCode::UnknownTopic | RDKafkaErrorCode::UnknownPartition => {
            "create the topic, or set topic.creation.default.partitions and topic.creation.default.replication.factor so pgoutbox creates it"
        }
        RDKafkaErrorCode::InvalidTopic => "the routed topic name is not a valid Kafka topic name; check route.topic.replacement and the aggregate type",
        RDKafkaErrorCode::InvalidRecord => "the broker rejected the record as invalid",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permanent_errors_are_classified() {
        let p = |c| is_permanent(&KafkaError::MessageProduction(c));
        assert!(p(RDKafkaErrorCode::MessageSizeTooLarge).is_some());
        assert!(p(RDKafkaErrorCode::TopicAuthorizationFailed).is_some());
        assert!(p(RDKafkaErrorCode::UnknownTopicOrPartition).is_some());
        assert!(p(RDKafkaErrorCode::UnknownTopic).is_some());
        assert!(p(RDKafkaErrorCode::Unknown).is_none(), "unknown server error is transient");
        assert!(p(RDKafkaErrorCode::QueueFull).is_none());
        assert!(p(RDKafkaErrorCode::NotLeaderForPartition).is_none());
        assert!(p(RDKafkaErrorCode::MessageTimedOut).is_none());
        assert!(p(RDKafkaErrorCode::AllBrokersDown).is_none());
    }
}
