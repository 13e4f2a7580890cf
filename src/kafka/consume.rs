//! Reading records back from topics, from the beginning: for the demo, the tests and operators who
//! want to look at what was produced (kcat cannot talk to every broker pgoutbox can).

use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumedRecord {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub timestamp: Option<i64>,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
}

impl ConsumedRecord {
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers.iter().rev().find(|(n, _)| n == name).and_then(|(_, v)| v.as_deref())
    }
}

/// Reads every partition of `topics` from the beginning until `expected` records were read, or
/// until `idle` passes with nothing new (after at least `min_wait`), or `deadline` passes.
pub fn consume_all(
    bootstrap: &str,
    topics: &[&str],
    expected: Option<usize>,
    idle: Duration,
    deadline: Duration,
) -> Result<Vec<ConsumedRecord>, rdkafka::error::KafkaError> {
    consume_all_with(bootstrap, &[], topics, expected, idle, deadline)
}

/// [`consume_all`] with extra librdkafka settings (security, for a secured cluster).
pub fn consume_all_with(
    bootstrap: &str,
    settings: &[(&str, &str)],
    topics: &[&str],
    expected: Option<usize>,
    idle: Duration,
    deadline: Duration,
) -> Result<Vec<ConsumedRecord>, rdkafka::error::KafkaError> {
    let mut config = ClientConfig::new();
    for (k, v) in settings {
        config.set(*k, *v);
    }
    let consumer: BaseConsumer = config
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "pgoutbox-inspect")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "false")
        .create()?;
    let mut tpl = TopicPartitionList::new();
    for topic in topics {
        let md = consumer.fetch_metadata(Some(topic), Duration::from_secs(10))?;
        for t in md.topics() {
            for p in t.partitions() {
                tpl.add_partition_offset(t.name(), p.id(), Offset::Beginning)?;
            }
        }
    }
    consumer.assign(&tpl)?;
    let start = Instant::now();
    let mut last = Instant::now();
    let mut out = Vec::new();
    while start.elapsed() < deadline {
        if expected.is_some_and(|n| out.len() >= n) {
            break;
        }
        if expected.is_none() && last.elapsed() > idle {
            break;
        }
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                last = Instant::now();
                out.push(ConsumedRecord {
                    topic: m.topic().to_string(),
                    partition: m.partition(),
                    offset: m.offset(),
                    timestamp: m.timestamp().to_millis(),
                    key: m.key().map(<[u8]>::to_vec),
                    value: m.payload().map(<[u8]>::to_vec),
                    headers: m
                        .headers()
                        .map(|h| h.iter().map(|h| (h.key.to_string(), h.value.map(<[u8]>::to_vec))).collect())
                        .unwrap_or_default(),
                });
            }
            Some(Err(e)) => tracing::debug!(error = %e, "consumer error"),
            None => {}
        }
    }
    Ok(out)
}
