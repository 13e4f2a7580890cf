//! Watches the partition counts of the topics the relay produces to. Events are partitioned by the
//! murmur2 hash of their key modulo the partition count, so when an operator adds partitions to a
//! topic, an aggregate's later events may land on another partition than its earlier ones, and a
//! consumer can read them out of order. Nothing in the producer notices; this says so, loudly, once
//! per change: a warning naming the topic and both counts, and `pgoutbox_topic_partition_changes`.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer};
use tokio_util::sync::CancellationToken;

use crate::config::KafkaConfig;
use crate::metrics::Metrics;

/// How often the counts are read (one metadata request per topic sent to).
pub const EVERY: Duration = Duration::from_secs(10);

/// Runs until `stop`: every `every`, compares each sent-to topic's partition count with the count
/// first seen for it.
pub async fn watch(kafka: KafkaConfig, metrics: Arc<Metrics>, stop: CancellationToken, every: Duration) {
    let client: BaseConsumer = match crate::kafka::client_config(&kafka).create() {
        Ok(c) => c,
        Err(e) => {
            tracing::debug!(error = %e, "no client for watching partition counts");
            return;
        }
    };
    let client = Arc::new(client);
    let mut known: HashMap<String, usize> = HashMap::new();
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
        let topics = metrics.topics_sent();
        if topics.is_empty() {
            continue;
        }
        let c = client.clone();
        // A consumer's metadata request never has the broker auto-create a topic; these exist anyway.
        let fetch = tokio::task::spawn_blocking(move || -> Option<HashMap<String, usize>> {
            let mut counts = HashMap::new();
            for topic in topics {
                let md = c.fetch_metadata(Some(&topic), Duration::from_secs(10)).ok()?;
                if let Some(t) = md.topics().iter().find(|t| t.name() == topic && t.error().is_none()) {
                    if !t.partitions().is_empty() {
                        counts.insert(topic, t.partitions().len());
                    }
                }
            }
            Some(counts)
        });
        // A stop does not wait for metadata from a broker that is away (10 s a topic): the fetch is
        // left to finish on its own.
        let counts = tokio::select! {
            () = stop.cancelled() => return,
            fetched = fetch => fetched.ok().flatten(),
        };
        let Some(counts) = counts else { continue };
        for (topic, now) in counts {
            match known.insert(topic.clone(), now) {
                Some(before) if before != now => {
                    metrics.partition_changes.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(
                        topic = %topic,
                        before,
                        now,
                        "the topic's partition count changed from {before} to {now}: from now on an aggregate's events may go to another partition than its earlier ones, so a consumer can read them out of order across the change. Let consumers drain the old partitions first (or route to a new topic) when adding partitions; see docs/operations.md"
                    );
                }
                _ => {}
            }
        }
    }
}
