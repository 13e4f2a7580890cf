//! `producer.*` (worker) and `producer.override.*` (connector) keys: Java producer settings, mapped
//! onto librdkafka's names where they differ. Settings that carry pgoutbox's guarantees (acks,
//! idempotence, the partitioner) cannot be overridden; Java keystore settings are ignored; anything
//! else librdkafka does not know is rejected at start-up with its key.

use super::{invalid, ConfigError, IgnoredKey};

/// Java producer key -> librdkafka key, for names that differ.
const RENAMED: &[(&str, &str)] = &[
    ("max.request.size", "message.max.bytes"),
    ("delivery.timeout.ms", "message.timeout.ms"),
    ("max.in.flight.requests.per.connection", "max.in.flight.requests.per.connection"),
    ("retry.backoff.ms", "retry.backoff.ms"),
    ("ssl.truststore.location", ""),
    ("ssl.keystore.location", ""),
];

/// Keys pgoutbox sets itself because its guarantees depend on them.
const PROTECTED: &[(&str, &str)] = &[
    ("acks", "acks=all is required so an acknowledged event survives a broker failure"),
    ("enable.idempotence", "idempotence is required for per-aggregate order under retries"),
    ("partitioner", "murmur2 partitioning is required to match Debezium's partitions"),
    ("partitioner.class", "murmur2 partitioning is required to match Debezium's partitions"),
    ("key.serializer", "records are already bytes"),
    ("value.serializer", "records are already bytes"),
];

/// Collects the producer settings from all `producer.` and `producer.override.` keys (overrides win).
pub fn collect(
    entries: &std::collections::BTreeMap<String, String>,
) -> Result<(Vec<(String, String)>, Vec<IgnoredKey>), ConfigError> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut ignored = Vec::new();
    let worker = entries
        .iter()
        .filter_map(|(k, v)| k.strip_prefix("producer.").filter(|r| !r.starts_with("override.")).map(|r| (k, r, v)));
    let connector = entries.iter().filter_map(|(k, v)| k.strip_prefix("producer.override.").map(|r| (k, r, v)));
    for (full, name, value) in worker.chain(connector) {
        if let Some((_, why)) = PROTECTED.iter().find(|(p, _)| *p == name) {
            ignored.push(IgnoredKey { key: full.clone(), reason: format!("pgoutbox sets it: {why}") });
            continue;
        }
        let (target, value) = match name {
            "buffer.memory" => {
                let bytes: u64 =
                    value.trim().parse().map_err(|_| invalid(full, format!("`{value}` is not a number of bytes")))?;
                ("queue.buffering.max.kbytes".to_string(), (bytes / 1024).max(1).to_string())
            }
            "delivery.timeout.ms" if value.trim() == i32::MAX.to_string() => {
                ("message.timeout.ms".to_string(), "0".to_string())
            }
            _ => {
                match RENAMED.iter().find(|(j, _)| *j == name) {
                    Some((_, "")) => {
                        ignored.push(IgnoredKey { key: full.clone(), reason: "Java keystores do not apply to librdkafka; use ssl.ca.location / ssl.certificate.location".into() });
                        continue;
                    }
                    Some((_, r)) => (r.to_string(), value.trim().to_string()),
                    None => (name.to_string(), value.trim().to_string()),
                }
            }
        };
        out.retain(|(k, _)| *k != target);
        out.push((target, value));
    }
    Ok((out, ignored))
}

/// Checks librdkafka accepts every setting, so a bad one is reported with its key at start-up.
pub fn validate(settings: &[(String, String)], bootstrap: &str) -> Result<(), ConfigError> {
    for (k, v) in settings {
        let mut c = rdkafka::ClientConfig::new();
        c.set("bootstrap.servers", bootstrap).set(k, v);
        if let Err(e) = c.create::<rdkafka::producer::BaseProducer>() {
            return Err(invalid(
                &format!("producer.{k} / producer.override.{k}"),
                format!("librdkafka rejects `{k}={v}` (after mapping Java names): {e}"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> std::collections::BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn producer_keys_map_to_librdkafka() {
        let (s, ignored) = collect(&map(&[
            ("producer.linger.ms", "20"),
            ("producer.override.linger.ms", "10"),
            ("producer.max.request.size", "2097152"),
            ("producer.buffer.memory", "33554432"),
            ("producer.override.acks", "1"),
            ("producer.compression.type", "lz4"),
        ]))
        .unwrap();
        assert!(s.contains(&("linger.ms".into(), "10".into())), "the connector override wins: {s:?}");
        assert!(s.contains(&("message.max.bytes".into(), "2097152".into())));
        assert!(s.contains(&("queue.buffering.max.kbytes".into(), "32768".into())));
        assert!(s.contains(&("compression.type".into(), "lz4".into())));
        assert!(!s.iter().any(|(k, _)| k == "acks"));
        assert_eq!(ignored[0].key, "producer.override.acks");
    }

    #[test]
    fn unknown_producer_keys_are_rejected_with_the_key() {
        let err = validate(&[("no.such.thing".into(), "1".into())], "127.0.0.1:9").unwrap_err();
        assert!(err.to_string().contains("no.such.thing"), "{err}");
        assert!(validate(&[("linger.ms".into(), "5".into())], "127.0.0.1:9").is_ok());
    }
}
