//! The compacted topics pgoutbox keeps its own records in (the relay's `offset.storage.topic`, a
//! distributed worker's config, status and offsets topics): created when missing with the
//! replication factor and partitions asked for, and, like Connect's `TopicAdmin`, refused when an
//! existing one is not `cleanup.policy=compact` (its records would expire after `retention.ms`).

use std::sync::Arc;
use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, ResourceSpecifier, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};

use super::producer::client_config;
use crate::config::KafkaConfig;

const TIMEOUT: Duration = Duration::from_secs(30);

/// The replication factor Connect asks for when none is configured.
const DEFAULT_REPLICATION: i32 = 3;

/// Why an internal topic cannot be used. The messages name the keys to change, never their values.
#[derive(Debug, thiserror::Error)]
pub enum TopicError {
    #[error("topic `{topic}` has cleanup.policy={policy}; it must be exactly `compact`, or its records expire after retention.ms and are lost: run `kafka-configs.sh --alter --entity-type topics --entity-name {topic} --add-config cleanup.policy=compact`, or set {key} to a compacted topic")]
    NotCompacted { topic: String, policy: String, key: &'static str },
    #[error("cannot create topic `{topic}` with {partitions} partitions and replication factor {replication}: {code}; set {key_rf} (e.g. -1 for the broker's default.replication.factor) and {key_partitions}, or create the topic, compacted, yourself")]
    Create {
        topic: String,
        partitions: i32,
        replication: i32,
        code: RDKafkaErrorCode,
        key_rf: &'static str,
        key_partitions: &'static str,
    },
    #[error("topic `{topic}`: {source}")]
    Kafka {
        topic: String,
        #[source]
        source: KafkaError,
    },
}

impl TopicError {
    /// A refusal an operator must act on (as opposed to a broker that did not answer).
    pub fn is_permanent(&self) -> bool {
        match self {
            TopicError::NotCompacted { .. } => true,
            TopicError::Create { code, .. } => !matches!(
                code,
                RDKafkaErrorCode::RequestTimedOut
                    | RDKafkaErrorCode::NotController
                    | RDKafkaErrorCode::OperationTimedOut
                    | RDKafkaErrorCode::BrokerTransportFailure
                    | RDKafkaErrorCode::AllBrokersDown
            ),
            TopicError::Kafka { .. } => false,
        }
    }
}

/// What to create when the topic is missing, and the keys that set it (named in errors).
pub struct Compacted<'a> {
    pub topic: &'a str,
    pub partitions: i32,
    /// `None`: Connect's 3, or the broker count where the cluster has fewer brokers.
    pub replication: Option<i32>,
    pub key_topic: &'static str,
    pub key_partitions: &'static str,
    pub key_replication: &'static str,
}

/// Creates the topic when missing; checks an existing one's cleanup policy.
pub async fn ensure_compacted(cfg: &KafkaConfig, t: &Compacted<'_>) -> Result<(), TopicError> {
    let kafka = |source| TopicError::Kafka { topic: t.topic.to_string(), source };
    let admin: Arc<AdminClient<DefaultClientContext>> = Arc::new(client_config(cfg).create().map_err(kafka)?);
    let result = ensure_with(&admin, t).await;
    if let Ok(admin) = Arc::try_unwrap(admin) {
        super::producer::drop_in_background(admin);
    }
    result
}

async fn ensure_with(admin: &Arc<AdminClient<DefaultClientContext>>, t: &Compacted<'_>) -> Result<(), TopicError> {
    let kafka = |source| TopicError::Kafka { topic: t.topic.to_string(), source };
    let topic = t.topic.to_string();
    // Every topic's metadata, not this one's: a request naming a missing topic may have the broker
    // auto-create it, with the default (delete) cleanup policy.
    let md = {
        let admin = admin.clone();
        tokio::task::spawn_blocking(move || admin.inner().fetch_metadata(None, TIMEOUT))
            .await
            .map_err(|_| kafka(KafkaError::MetadataFetch(RDKafkaErrorCode::Fail)))?
            .map_err(kafka)?
    };
    let exists = md.topics().iter().any(|m| m.name() == topic && m.error().is_none() && !m.partitions().is_empty());
    if !exists {
        let replication = match t.replication {
            Some(n) => n,
            None => {
                let brokers = md.brokers().len() as i32;
                if brokers > 0 && brokers < DEFAULT_REPLICATION {
                    tracing::warn!(topic = t.topic, brokers, key = t.key_replication, "the cluster has fewer than 3 brokers: creating the topic with one replica per broker; set the key to choose");
                    brokers
                } else {
                    DEFAULT_REPLICATION
                }
            }
        };
        let new =
            NewTopic::new(t.topic, t.partitions, TopicReplication::Fixed(replication)).set("cleanup.policy", "compact");
        let opts = AdminOptions::new().operation_timeout(Some(TIMEOUT));
        for result in admin.create_topics([&new], &opts).await.map_err(kafka)? {
            match result {
                Ok(_) => {
                    tracing::info!(
                        topic = t.topic,
                        partitions = t.partitions,
                        replication,
                        "created the compacted topic"
                    );
                    return Ok(());
                }
                Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                Err((_, code)) => {
                    return Err(TopicError::Create {
                        topic: topic.clone(),
                        partitions: t.partitions,
                        replication,
                        code,
                        key_rf: t.key_replication,
                        key_partitions: t.key_partitions,
                    })
                }
            }
        }
    }
    check_policy(admin, t).await
}

async fn check_policy(admin: &AdminClient<DefaultClientContext>, t: &Compacted<'_>) -> Result<(), TopicError> {
    let opts = AdminOptions::new().request_timeout(Some(TIMEOUT));
    // As Connect: where the policy cannot be read (a principal without DESCRIBE_CONFIGS, a broker
    // without the request), say so and go on; the topic may still be right.
    let unchecked = |why: &dyn std::fmt::Display| {
        tracing::warn!(topic = t.topic, reason = %why, "cannot check that the topic is compacted (grant DESCRIBE_CONFIGS on it to have it checked)");
        Ok(())
    };
    let described = match admin.describe_configs([&ResourceSpecifier::Topic(t.topic)], &opts).await {
        Ok(d) => d,
        Err(e) if super::errors::code_of(&e).is_some_and(unreadable) => return unchecked(&e),
        Err(e) => return Err(TopicError::Kafka { topic: t.topic.to_string(), source: e }),
    };
    for resource in described {
        match resource {
            Ok(r) => {
                let Some(policy) = r.get("cleanup.policy").and_then(|e| e.value.clone()) else {
                    return unchecked(&"the broker reports no cleanup.policy");
                };
                let parts: Vec<&str> = policy.split(',').map(str::trim).filter(|p| !p.is_empty()).collect();
                if parts != ["compact"] {
                    return Err(TopicError::NotCompacted { topic: t.topic.to_string(), policy, key: t.key_topic });
                }
            }
            Err(code) if unreadable(code) => return unchecked(&code),
            Err(code) => {
                return Err(TopicError::Kafka { topic: t.topic.to_string(), source: KafkaError::AdminOp(code) })
            }
        }
    }
    Ok(())
}

/// A topic's `max.message.bytes` (its own setting or the broker's default): the largest record
/// batch the broker takes for it. `None` when it cannot be read (no DESCRIBE_CONFIGS, a broker that
/// does not answer, a topic that does not exist yet).
pub async fn max_message_bytes(cfg: &KafkaConfig, topic: &str) -> Option<usize> {
    let admin: AdminClient<DefaultClientContext> = client_config(cfg).create().ok()?;
    let opts = AdminOptions::new().request_timeout(Some(Duration::from_secs(10)));
    let described = admin.describe_configs([&ResourceSpecifier::Topic(topic)], &opts).await;
    super::producer::drop_in_background(admin);
    let resource = described.ok()?.into_iter().next()?.ok()?;
    resource.get("max.message.bytes")?.value.as_deref()?.trim().parse().ok()
}

fn unreadable(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::TopicAuthorizationFailed
            | RDKafkaErrorCode::ClusterAuthorizationFailed
            | RDKafkaErrorCode::UnsupportedVersion
            | RDKafkaErrorCode::InvalidRequest
    )
}
