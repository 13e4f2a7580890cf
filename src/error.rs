//! The relay's error, classified by consequence: retryable errors make the relay reconnect and resume
//! from the confirmed position; the others stop it with a message that says what to fix, and an exit
//! code per kind so scripts can tell them apart.

use crate::config::ConfigError;
use crate::kafka::DeliveryFailure;
use crate::outbox::RouteError;
use crate::pgoutput::DecodeError;
use crate::postgres::setup::{SetupError, SetupFailure};
use crate::postgres::PgError;

#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Postgres(#[from] PgError),
    #[error(transparent)]
    Setup(#[from] SetupError),
    #[error("undecodable pgoutput message at {lsn}: {source}; the position stays before it (report this with the server version)")]
    Decode { lsn: crate::lsn::Lsn, source: DecodeError },
    #[error(transparent)]
    Route(#[from] RouteError),
    /// The schema registry did not answer (retried) or refused a schema (stops).
    #[error(transparent)]
    Registry(crate::connect::registry::RegistryError),
    #[error("{0}")]
    InvalidOperation(String),
    #[error(transparent)]
    Delivery(Box<DeliveryFailure>),
    #[error("the dead-letter topic refused a dead letter for good ({0}); fix errors.deadletterqueue.topic.name (create the topic, grant WRITE, raise its max.message.bytes) or unset it; the position stays before the event")]
    DeadLetterRefused(Box<DeliveryFailure>),
    #[error(transparent)]
    Kafka(#[from] crate::kafka::Error),
    /// One of the session's own tasks (the sink) stopped unexpectedly; a new session starts over from
    /// the confirmed position.
    #[error("{0}; resuming from the confirmed position")]
    TaskStopped(String),
    #[error("replication slot `{0}` disappeared while pgoutbox was using it; recreating it could skip events, so stopping: check what dropped it, then restart pgoutbox (it creates the slot)")]
    SlotDropped(String),
    #[error("replication slot `{slot}` does not exist, but this connector streamed from it before (up to {lsn}, as recorded in Kafka topic `{topic}`): the slot was dropped, invalidated or lost in a failover while pgoutbox was stopped, and events committed since {lsn} may never have been published. Creating a new slot would silently skip them, so stopping. To publish what is still in the outbox table and go on, start once with snapshot.mode=when_needed; to go on from the current position and accept the loss, run `pgoutbox offsets reset --config <file>`; `pgoutbox verify` shows what is missing")]
    SlotLost { slot: String, lsn: crate::lsn::Lsn, topic: String },
    #[error("the relay is trying to read the change stream starting at {offset}, as the committed offset in Kafka topic `{topic}` says, but this is no longer available on the server: replication slot `{slot}` holds WAL from {restart} on. The slot was dropped and created again, or moved past the offset, while nothing streamed from it, so changes committed in between were never decoded and their events may never have been published (Debezium stops here too, under offset.mismatch.strategy=no_validation or trust_offset). To publish what is still in the outbox table and go on, start once with snapshot.mode=when_needed; to go on from the slot and accept the gap, set offset.mismatch.strategy=trust_slot or run `pgoutbox offsets reset --config <file>`; `pgoutbox verify` shows what is missing")]
    OffsetUnavailable { slot: String, offset: crate::lsn::Lsn, restart: crate::lsn::Lsn, topic: String },
    #[error("exactly once: offsets topic `{topic}` does not exist, but replication slot `{slot}` does: the committed offsets that say which of the slot's transactions Kafka already holds are gone (the topic was deleted, or offset.storage.topic now names another topic). Resuming from the slot would publish those transactions again, so stopping. If offset.storage.topic changed, set it back. To resume from the slot and accept that transactions since its last confirmation may be published twice, start once with exactly.once.source.support=disabled (it records the slot's position in `{topic}`), then enable exactly once again; to start over, run `pgoutbox offsets reset --config <file>`")]
    OffsetsLost { slot: String, topic: String },
}

impl From<SetupFailure> for RelayError {
    fn from(f: SetupFailure) -> Self {
        match f {
            SetupFailure::Pg(e) => RelayError::Postgres(e),
            SetupFailure::Setup(e) => RelayError::Setup(e),
        }
    }
}

impl RelayError {
    pub fn is_retryable(&self) -> bool {
        match self {
            RelayError::Postgres(e) => e.is_retryable(),
            RelayError::Kafka(e) => e.is_retryable(),
            RelayError::TaskStopped(_) => true,
            RelayError::Registry(e) => e.is_retryable(),
            _ => false,
        }
    }

    pub fn is_slot_in_use(&self) -> bool {
        matches!(self, RelayError::Postgres(e) if e.is_slot_in_use())
    }

    /// Process exit code: 2 config, 3 PostgreSQL connection/auth, 4 database setup, 5 bad data in the
    /// stream, 6 broker (or schema registry) refused a record, 7 Kafka client, 8 slot lost.
    pub fn exit_code(&self) -> i32 {
        match self {
            RelayError::Config(_) => 2,
            RelayError::Postgres(_) => 3,
            RelayError::Setup(_) => 4,
            RelayError::Decode { .. } | RelayError::Route(_) | RelayError::InvalidOperation(_) => 5,
            RelayError::Delivery(_) | RelayError::DeadLetterRefused(_) | RelayError::Registry(_) => 6,
            RelayError::Kafka(_) | RelayError::TaskStopped(_) => 7,
            RelayError::SlotDropped(_)
            | RelayError::SlotLost { .. }
            | RelayError::OffsetUnavailable { .. }
            | RelayError::OffsetsLost { .. } => 8,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rdkafka::types::RDKafkaErrorCode as C;

    /// Retryability comes from the error's kind, never from its text.
    #[test]
    fn a_fatal_producer_error_is_retried_unless_a_permission_is_missing() {
        let fatal = |code, reason: &str| RelayError::from(crate::kafka::Error::Fatal { reason: reason.into(), code });
        assert!(fatal(Some(C::OutOfOrderSequenceNumber), "not authorized? no: sequence").is_retryable());
        assert!(fatal(None, "authorization").is_retryable());
        assert!(!fatal(Some(C::TopicAuthorizationFailed), "whatever the text says").is_retryable());
        assert!(!fatal(Some(C::ClusterAuthorizationFailed), "").is_retryable());
        assert_eq!(fatal(None, "x").exit_code(), 7);
        let transient = crate::kafka::Error::transient("creating topic `t`", "the text says not authorized");
        assert!(RelayError::from(transient).is_retryable());
        let refused = crate::kafka::Error::Refused("SASL authentication failed; check sasl.jaas.config".into());
        assert!(!RelayError::from(refused).is_retryable());
    }
}
