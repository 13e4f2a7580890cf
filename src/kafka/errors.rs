//! Kafka's errors by consequence, and which of librdkafka's codes can never succeed on retry.
//! Everything else is transient: librdkafka retries it itself (the idempotent producer keeps order),
//! and if it still surfaces, the relay resumes from the confirmed position.

use rdkafka::error::{KafkaError, RDKafkaErrorCode};

/// A failure of the Kafka side of a session, classified by what the relay does next: only
/// [`Error::Transient`] (and a fatal producer error that is not a missing permission) is retried, and
/// that decision comes from the kind, never from the message.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// librdkafka refused the client's settings before connecting.
    #[error("cannot create the Kafka producer: {0}; check bootstrap.servers and producer settings")]
    Create(#[source] KafkaError),
    /// The cluster refused the client's credentials, certificates or permissions; the message names
    /// the setting or the grant to fix.
    #[error("the Kafka cluster refused this client: {0}")]
    Refused(String),
    /// The idempotent producer failed fatally; nothing queued in it will be delivered.
    #[error("the Kafka producer failed fatally: {reason}; grant this client IDEMPOTENT_WRITE (and WRITE on the topics) if it is an authorization error")]
    Fatal { reason: String, code: Option<RDKafkaErrorCode> },
    /// A Kafka operation failed for a passing reason (the cluster is unreachable, a broker went away).
    #[error("{what} failed: {source}; resuming from the confirmed position")]
    Transient {
        what: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl Error {
    /// A transient failure of `what`, keeping its cause.
    pub fn transient(what: impl Into<String>, source: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Error::Transient { what: what.into(), source: source.into() }
    }

    /// Whether a new session can succeed: a fresh producer recovers from a lost idempotence state,
    /// not from a missing permission.
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Transient { .. } => true,
            Error::Fatal { code, .. } => !code.is_some_and(is_authorization),
            Error::Create(_) | Error::Refused(_) => false,
        }
    }
}

/// A failed step of a Kafka transaction (exactly once), by consequence: a producer another
/// instance fenced, or one the cluster may not use transactionally, stops with what to do; anything
/// else ends the session, which resumes after the last committed transaction.
pub fn transaction(what: &str, transactional_id: &str, error: KafkaError) -> Error {
    use RDKafkaErrorCode as C;
    let fatal = matches!(&error, KafkaError::Transaction(e) if e.is_fatal());
    match error.rdkafka_error_code() {
        Some(C::ProducerFenced | C::InvalidProducerEpoch | C::Fenced) => Error::Fatal {
            reason: format!("{what}: another producer with transactional.id `{transactional_id}` fenced this one (another instance of this connector started; each connector must run once per group.id)"),
            code: error.rdkafka_error_code(),
        },
        Some(C::TransactionalIdAuthorizationFailed | C::ClusterAuthorizationFailed) => Error::Refused(format!(
            "{what}: {error}; grant this client WRITE and DESCRIBE on transactional id `{transactional_id}` (and IDEMPOTENT_WRITE on the cluster), or turn exactly once off (exactly.once.source.support)"
        )),
        Some(C::UnsupportedVersion | C::UnsupportedForMessageFormat) => Error::Refused(format!(
            "{what}: {error}; the Kafka cluster does not support transactions, which exactly.once.source.support=enabled needs: use Kafka 0.11 or later with its transaction state log, or turn exactly once off"
        )),
        _ if fatal => Error::Fatal { reason: format!("{what}: {error}"), code: error.rdkafka_error_code() },
        _ => Error::transient(format!("{what} (transactional.id `{transactional_id}`)"), error),
    }
}

/// A record the broker refused for good, with what the operator needs to fix it.
#[derive(Debug, Clone, thiserror::Error)]
#[error("the broker refused event `{event_id}` for topic `{topic}`: {error}; {fix}")]
pub struct DeliveryFailure {
    pub event_id: String,
    pub topic: String,
    #[source]
    pub error: KafkaError,
    pub fix: &'static str,
}

/// The fix for a record error that cannot succeed on retry, `None` for a transient one (librdkafka
/// retries those itself, and if one still surfaces the relay resumes from the confirmed position).
/// The permanent ones are the codes Kafka's Java producer does not retry either (they are not
/// `RetriableException`s) plus librdkafka's local refusals of the record itself.
pub fn is_permanent(error: &KafkaError) -> Option<&'static str> {
    use RDKafkaErrorCode as C;
    let code = error.rdkafka_error_code()?;
    Some(match code {
        C::MessageSizeTooLarge | C::InvalidMessageSize => {
            "the record is larger than the broker or producer accepts; raise the topic's max.message.bytes and producer.override.max.request.size, or make the payload smaller"
        }
        C::MessageBatchTooLarge => "the batch is larger than the broker accepts; raise the broker's message size limits",
        C::TopicAuthorizationFailed | C::ClusterAuthorizationFailed | C::TransactionalIdAuthorizationFailed => {
            "grant this client WRITE (and IDEMPOTENT_WRITE) on the topic"
        }
        C::UnknownTopicOrPartition | C::UnknownTopic | C::UnknownPartition | C::UnknownTopicId => {
            "the topic does not exist and the broker does not create topics: create it, or set topic.creation.default.partitions and topic.creation.default.replication.factor so pgoutbox creates it (check route.topic.replacement and the aggregate type if the name is not what you expected)"
        }
        C::InvalidTopic => "the routed topic name is not a valid Kafka topic name; check route.topic.replacement and the aggregate type",
        C::PolicyViolation => "the broker's policy refuses the record (a topic or create policy); see the broker's log",
        C::InvalidTimestamp => {
            "the record's timestamp is outside the topic's message.timestamp.difference.max.ms; check table.field.event.timestamp and the topic's timestamp settings"
        }
        C::InvalidRecord => "the broker rejected the record as invalid (e.g. a compacted topic needs a key); check the topic's settings",
        C::InvalidRequiredAcks => "the broker does not accept acks=all; check the broker's version and settings",
        C::UnsupportedForMessageFormat | C::UnsupportedVersion => {
            "the broker's message format or version does not support the record (headers or idempotence need Kafka 0.11+); upgrade the broker or the topic's message.format.version"
        }
        C::UnsupportedCompressionType | C::BadCompression => {
            "the broker does not support the compression type; change producer.override.compression.type"
        }
        C::InvalidConfig => "the broker rejected a setting; check the producer.* and topic.creation.* keys",
        C::BadMessage | C::InvalidArgument | C::KeySerialization | C::ValueSerialization => {
            "librdkafka refused the record as malformed; report this with the event"
        }
        _ => return None,
    })
}

/// The error code of `e`, including an admin operation's (which rdkafka's own accessor leaves out).
pub fn code_of(e: &KafkaError) -> Option<RDKafkaErrorCode> {
    match e {
        KafkaError::AdminOp(code) => Some(*code),
        e => e.rdkafka_error_code(),
    }
}

/// The fix for a topic creation (`topic.creation.default.*`) the cluster refused for good, `None`
/// for one worth retrying (a broker or controller that did not answer).
pub fn creation_fix(code: RDKafkaErrorCode) -> Option<&'static str> {
    use RDKafkaErrorCode as C;
    Some(match code {
        C::TopicAuthorizationFailed | C::ClusterAuthorizationFailed => {
            "the client may not create topics: grant this client CREATE on the topic (or on the cluster), or create the topic beforehand"
        }
        C::InvalidTopic => {
            "the routed topic name is not a valid Kafka topic name (1 to 249 characters of ASCII letters, digits, '.', '_' and '-'); check route.topic.replacement and the aggregate type"
        }
        C::PolicyViolation => "the cluster's topic-creation policy refuses it; see the broker's log, or create the topic beforehand",
        C::InvalidReplicationFactor => {
            "topic.creation.default.replication.factor is more than the cluster's brokers (-1 takes the broker's default.replication.factor)"
        }
        C::InvalidPartitions => "topic.creation.default.partitions is not a partition count the cluster accepts",
        C::InvalidConfig => "the cluster refused a setting of the new topic; check the topic.creation.* keys",
        _ => return None,
    })
}

/// The codes that say the client lacks a permission: no retry helps until an operator grants it.
pub fn is_authorization(code: RDKafkaErrorCode) -> bool {
    use RDKafkaErrorCode as C;
    matches!(
        code,
        C::TopicAuthorizationFailed
            | C::ClusterAuthorizationFailed
            | C::TransactionalIdAuthorizationFailed
            | C::GroupAuthorizationFailed
            | C::DelegationTokenAuthorizationFailed
            | C::SaslAuthenticationFailed
    )
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
        assert!(p(RDKafkaErrorCode::PolicyViolation).is_some());
        assert!(p(RDKafkaErrorCode::InvalidTimestamp).is_some());
        assert!(p(RDKafkaErrorCode::InvalidRecord).is_some());
        assert!(p(RDKafkaErrorCode::UnsupportedForMessageFormat).is_some());
        // Retried by the Java producer too: they pass.
        assert!(p(RDKafkaErrorCode::NotEnoughReplicas).is_none());
        assert!(p(RDKafkaErrorCode::KafkaStorageError).is_none());
        assert!(p(RDKafkaErrorCode::RequestTimedOut).is_none());
        assert!(p(RDKafkaErrorCode::Unknown).is_none(), "unknown server error is transient");
        assert!(p(RDKafkaErrorCode::QueueFull).is_none());
        assert!(p(RDKafkaErrorCode::NotLeaderForPartition).is_none());
        assert!(p(RDKafkaErrorCode::MessageTimedOut).is_none());
        assert!(p(RDKafkaErrorCode::AllBrokersDown).is_none());
    }
}
