//! `producer.*` (worker) and `producer.override.*` (connector) keys: Java producer settings, mapped
//! onto librdkafka's names where they differ, and the security keys of every client (see
//! `security`). Settings that carry pgoutbox's guarantees (acks, idempotence, the partitioner)
//! cannot be overridden; anything else librdkafka does not know is rejected at start-up with its key.

use super::security::{self, ClientSettings};
use super::{invalid, ConfigError, IgnoredKey};

/// Java producer key -> librdkafka key, for names that differ.
const RENAMED: &[(&str, &str)] =
    &[("max.request.size", "message.max.bytes"), ("delivery.timeout.ms", "message.timeout.ms")];

/// Keys pgoutbox sets itself because its guarantees depend on them.
const PROTECTED: &[(&str, &str)] = &[
    ("acks", "acks=all is required so an acknowledged event survives a broker failure"),
    ("enable.idempotence", "idempotence is required for per-aggregate order under retries"),
    ("partitioner", "murmur2 partitioning is required to match Debezium's partitions"),
    ("partitioner.class", "murmur2 partitioning is required to match Debezium's partitions"),
    ("transactional.id", "Connect derives it per task, <group.id>-<connector>-0 (exactly.once.source.support=enabled)"),
    ("key.serializer", "records are already bytes"),
    ("value.serializer", "records are already bytes"),
];

/// Java producer keys librdkafka has no counterpart for, and why leaving them out changes nothing
/// the relay writes.
const JAVA_ONLY: &[(&str, &str)] = &[
    ("max.block.ms", "librdkafka's send never blocks; the relay waits for room in the producer's queue itself, for as long as it takes"),
    ("metadata.max.idle.ms", "librdkafka keeps the metadata of the topics it writes to by itself"),
    ("socket.connection.setup.timeout.max.ms", "librdkafka bounds a connection's setup by socket.connection.setup.timeout.ms alone"),
    ("metric.reporters", "a Java metrics reporter; pgoutbox serves its metrics itself (/metrics)"),
    ("auto.include.jmx.reporter", "a Java metrics reporter; pgoutbox serves its metrics itself (/metrics)"),
    ("metrics.sample.window.ms", "Java client metrics; pgoutbox serves its metrics itself (/metrics)"),
    ("metrics.num.samples", "Java client metrics; pgoutbox serves its metrics itself (/metrics)"),
    ("metrics.recording.level", "Java client metrics; pgoutbox serves its metrics itself (/metrics)"),
    ("partitioner.adaptive.partitioning.enable", "it only places records without a key, which librdkafka spreads at random"),
    ("partitioner.availability.timeout.ms", "it only places records without a key, which librdkafka spreads at random"),
];

/// Java's per-codec compression levels (KIP-390), each honoured as librdkafka's `compression.level`
/// when its codec is the one in use.
const LEVELS: &[(&str, &str)] =
    &[("compression.gzip.level", "gzip"), ("compression.lz4.level", "lz4"), ("compression.zstd.level", "zstd")];

/// The librdkafka settings of pgoutbox's Kafka clients.
#[derive(Debug, Default)]
pub struct Clients {
    /// The producer: its tuning and its security.
    pub producer: ClientSettings,
    /// Admin, offset-store and verify clients: security only.
    pub security: ClientSettings,
    pub ignored: Vec<IgnoredKey>,
}

/// The keys of `entries` under `prefix` (`""` for top-level keys), by name, with their full key.
fn layer<'a>(
    entries: &'a std::collections::BTreeMap<String, String>,
    prefix: &'a str,
    skip: &'a [&'a str],
) -> impl Iterator<Item = (String, (String, String))> + 'a {
    entries.iter().filter_map(move |(k, v)| {
        let name = k.strip_prefix(prefix)?;
        if skip.iter().any(|s| name.starts_with(s)) {
            return None;
        }
        Some((name.to_string(), (k.clone(), v.clone())))
    })
}

/// Collects the client settings as Connect builds its clients: the producer from `producer.` then
/// `producer.override.` keys (overrides win), the admin client from the worker's top-level keys,
/// then `admin.`, then `admin.override.`. Top-level security keys also serve the producer, and the
/// producer's serve the admin client when no worker-level ones are given: every client talks to
/// one cluster, and Connect's own would otherwise fail.
/// Bytes of records librdkafka may hold before `send` says QueueFull (the memory bound of the sink).
pub const QUEUE_MAX_KBYTES: &str = "16384";
/// The Java producer's `max.request.size` default.
pub const JAVA_MAX_REQUEST_SIZE: &str = "1048576";

/// A record up to `message.max.bytes` must fit librdkafka's queue (`queue.buffering.max.kbytes`,
/// the Java `buffer.memory`), or it could never be queued: the relay would wait for room forever.
fn check_limits(producer: &ClientSettings) -> Result<(), ConfigError> {
    let number = |k: &str, default: &str| producer.get(k).unwrap_or(default).trim().parse::<u64>().ok();
    let (Some(queue_kb), Some(max_bytes)) =
        (number("queue.buffering.max.kbytes", QUEUE_MAX_KBYTES), number("message.max.bytes", JAVA_MAX_REQUEST_SIZE))
    else {
        return Ok(());
    };
    if max_bytes > queue_kb.saturating_mul(1024) {
        return Err(invalid(
            "producer.buffer.memory / producer.override.buffer.memory",
            format!("the producer's queue ({queue_kb} KiB) is smaller than its largest record (max.request.size, {max_bytes} bytes): a record between the two could never be queued; make buffer.memory at least max.request.size"),
        ));
    }
    Ok(())
}

pub fn collect(entries: &std::collections::BTreeMap<String, String>) -> Result<Clients, ConfigError> {
    let mut clients = Clients::default();
    let top: security::Keys = entries
        .iter()
        .filter(|(k, _)| security::is_security_key(k))
        .map(|(k, v)| (k.clone(), (k.clone(), v.clone())))
        .collect();
    let mut producer_security = top.clone();
    let mut tuning: Vec<(String, (String, String))> = Vec::new();
    for (name, entry) in layer(entries, "producer.", &["override."]).chain(layer(entries, "producer.override.", &[])) {
        if security::is_security_key(&name) {
            producer_security.insert(name, entry);
        } else {
            tuning.retain(|(n, _)| *n != name);
            tuning.push((name, entry));
        }
    }
    let mut admin_security = top;
    for (name, entry) in layer(entries, "admin.", &["override."]).chain(layer(entries, "admin.override.", &[])) {
        if security::is_security_key(&name) {
            admin_security.insert(name, entry);
        }
    }
    if admin_security.is_empty() {
        admin_security = producer_security.clone();
    }
    let producer = security::translate(&producer_security)?;
    let admin = security::translate(&admin_security)?;
    clients.producer = producer.settings;
    clients.security = admin.settings;
    for i in producer.ignored.into_iter().chain(admin.ignored) {
        if !clients.ignored.contains(&i) {
            clients.ignored.push(i);
        }
    }
    let mut levels = Vec::new();
    for (name, (full, value)) in tuning {
        if let Some((_, why)) = PROTECTED.iter().find(|(p, _)| *p == name) {
            clients.ignored.push(IgnoredKey { key: full, reason: format!("pgoutbox sets it: {why}") });
            continue;
        }
        if name == "partitioner.ignore.keys" {
            // true would spread an aggregate's events over partitions in Connect; pgoutbox keeps
            // to the key's partition either way (an intended difference, docs/compatibility.md).
            let reason = if value.trim().eq_ignore_ascii_case("true") {
                "pgoutbox sends each record to its key's murmur2 partition, so that an aggregate's events stay in one partition in commit order (Java's partitioner would ignore the keys)"
            } else {
                "pgoutbox sends each record to its key's murmur2 partition, as Java's default partitioner does"
            };
            clients.ignored.push(IgnoredKey { key: full, reason: reason.into() });
            continue;
        }
        if let Some((_, why)) = JAVA_ONLY.iter().find(|(j, _)| *j == name) {
            clients.ignored.push(IgnoredKey { key: full, reason: format!("a Java producer setting: {why}") });
            continue;
        }
        if let Some((_, codec)) = LEVELS.iter().find(|(l, _)| *l == name) {
            levels.push((full, *codec, value));
            continue;
        }
        let (target, value) = match name.as_str() {
            // Interceptors are Java classes that may add headers or change records: the records
            // would differ from Connect's, so they are refused rather than left out.
            "interceptor.classes" if !value.trim().is_empty() => {
                return Err(invalid(
                    &full,
                    "names Java producer interceptors, which only Kafka's Java client can run (they may add headers to or change each record, as Debezium's tracing interceptor does); remove the key, or keep Kafka Connect for this connector",
                ));
            }
            "interceptor.classes" => continue,
            // Java's -1 (the operating system's size) is librdkafka's 0.
            "send.buffer.bytes" | "receive.buffer.bytes" => {
                let bytes: i64 = value
                    .trim()
                    .parse()
                    .ok()
                    .filter(|b| *b >= -1)
                    .ok_or_else(|| invalid(&full, "is not a number of bytes, or -1 for the system's size"))?;
                (format!("socket.{name}"), bytes.max(0).to_string())
            }
            "buffer.memory" => {
                let bytes: u64 = value.trim().parse().map_err(|_| invalid(&full, "is not a number of bytes"))?;
                ("queue.buffering.max.kbytes".to_string(), (bytes / 1024).max(1).to_string())
            }
            "delivery.timeout.ms" if value.trim() == i32::MAX.to_string() => {
                ("message.timeout.ms".to_string(), "0".to_string())
            }
            _ => match RENAMED.iter().find(|(j, _)| *j == name) {
                Some((_, r)) => (r.to_string(), value.trim().to_string()),
                None => (name.clone(), value.trim().to_string()),
            },
        };
        clients.producer.set(&target, value);
    }
    let codec = clients.producer.get("compression.type").or(clients.producer.get("compression.codec"));
    let codec = codec.map(|c| c.trim().to_ascii_lowercase());
    for (full, level_codec, value) in levels {
        // The ranges the Java producer accepts (KIP-390).
        let (java, range) = match level_codec {
            "gzip" => (-1..=9, "-1 or 1 to 9"),
            "lz4" => (1..=17, "1 to 17"),
            _ => (-131072..=22, "-131072 to 22"),
        };
        let level: i32 = value
            .trim()
            .parse()
            .ok()
            .filter(|l| java.contains(l) && !(level_codec == "gzip" && *l == 0))
            .ok_or_else(|| invalid(&full, format!("is not a {level_codec} compression level ({range})")))?;
        let reason = if codec.as_deref() != Some(level_codec) {
            format!("it applies only with compression.type={level_codec}")
        } else if !(0..=12).contains(&level) {
            // librdkafka's -1 is its default, not zstd's fast level -1.
            format!("librdkafka's levels go from 0 to 12; {level_codec}'s default level is used")
        } else {
            clients.producer.set("compression.level", level.to_string());
            continue;
        };
        clients.ignored.push(IgnoredKey { key: full, reason });
    }
    check_limits(&clients.producer)?;
    Ok(clients)
}

/// Checks librdkafka accepts the settings together (a SASL protocol needs its mechanism), so a bad
/// one is reported at start-up, by its key when one key alone is refused, and without its value
/// when that is a secret.
pub fn validate(settings: &ClientSettings, bootstrap: &str) -> Result<(), ConfigError> {
    let create = |pairs: &mut dyn Iterator<Item = (&str, &str)>| {
        let mut c = rdkafka::ClientConfig::new();
        c.set("bootstrap.servers", bootstrap);
        for (k, v) in pairs {
            c.set(k, v);
        }
        c.create::<rdkafka::producer::BaseProducer>().map(|_| ())
    };
    let Err(all) = create(&mut settings.iter()) else { return Ok(()) };
    // The key librdkafka refuses on its own, if there is one.
    for (k, v) in settings.iter() {
        if k == "security.protocol" || k == "sasl.mechanism" {
            continue;
        }
        if let Err(e) = create(&mut std::iter::once((k, v))) {
            // librdkafka's message quotes the value: only the key is named.
            let _ = e;
            return Err(invalid(
                &format!("producer.{k} / producer.override.{k}"),
                format!("librdkafka rejects the value of `{k}` (after mapping Java names); check the key's documented values"),
            ));
        }
    }
    let shown = settings
        .iter()
        .filter(|(k, _)| !security::is_secret(k))
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ");
    Err(invalid(
        "security.protocol",
        format!("librdkafka rejects the client settings together ({shown}, secrets not shown): {all}"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> std::collections::BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn producer_keys_map_to_librdkafka() {
        let c = collect(&map(&[
            ("producer.linger.ms", "20"),
            ("producer.override.linger.ms", "10"),
            ("producer.max.request.size", "2097152"),
            ("producer.buffer.memory", "33554432"),
            ("producer.override.acks", "1"),
            ("producer.compression.type", "lz4"),
        ]))
        .unwrap();
        let (s, ignored) = (&c.producer.0, &c.ignored);
        assert!(s.contains(&("linger.ms".into(), "10".into())), "the connector override wins: {s:?}");
        assert!(s.contains(&("message.max.bytes".into(), "2097152".into())));
        assert!(s.contains(&("queue.buffering.max.kbytes".into(), "32768".into())));
        assert!(s.contains(&("compression.type".into(), "lz4".into())));
        assert!(!s.iter().any(|(k, _)| k == "acks"));
        assert_eq!(ignored[0].key, "producer.override.acks");
    }

    /// Connect configs carry Java producer keys librdkafka does not know: mapped where librdkafka has
    /// the setting, listed as ignored where it changes nothing written, refused where it would.
    #[test]
    fn java_producer_keys_are_mapped_ignored_or_refused() {
        let c = collect(&map(&[
            ("producer.override.max.block.ms", "60000"),
            ("producer.override.send.buffer.bytes", "-1"),
            ("producer.receive.buffer.bytes", "65536"),
            ("producer.override.metric.reporters", "org.apache.kafka.common.metrics.JmxReporter"),
            ("producer.override.partitioner.ignore.keys", "true"),
            ("producer.override.compression.type", "zstd"),
            ("producer.override.compression.zstd.level", "6"),
            ("producer.override.compression.gzip.level", "9"),
            ("producer.override.interceptor.classes", ""),
        ]))
        .unwrap();
        let s = &c.producer;
        assert_eq!(s.get("socket.send.buffer.bytes"), Some("0"), "Java's -1 is librdkafka's 0");
        assert_eq!(s.get("socket.receive.buffer.bytes"), Some("65536"));
        assert_eq!(s.get("compression.level"), Some("6"));
        for k in ["max.block.ms", "metric.reporters", "partitioner", "interceptor.classes"] {
            assert!(!s.0.iter().any(|(n, _)| n.contains(k)), "{k} reached librdkafka: {s:?}");
        }
        let ignored: Vec<_> = c.ignored.iter().map(|i| i.key.as_str()).collect();
        for k in [
            "producer.override.max.block.ms",
            "producer.override.metric.reporters",
            "producer.override.partitioner.ignore.keys",
            "producer.override.compression.gzip.level",
        ] {
            assert!(ignored.contains(&k), "{k} not listed as ignored: {ignored:?}");
        }
        let taken = validate(&c.producer, "127.0.0.1:9");
        assert!(taken.is_ok(), "librdkafka takes the mapped settings: {taken:?}");
        let zstd = collect(&map(&[
            ("producer.override.compression.type", "zstd"),
            ("producer.override.compression.zstd.level", "19"),
        ]))
        .unwrap();
        assert_eq!(zstd.producer.get("compression.level"), None, "beyond librdkafka's range: the default");
        for (k, v) in [
            ("producer.override.compression.gzip.level", "0"),
            ("producer.override.compression.lz4.level", "18"),
            ("producer.override.send.buffer.bytes", "-2"),
        ] {
            let err = collect(&map(&[(k, v)])).unwrap_err().to_string();
            assert!(err.contains(k) && !err.contains(&format!("`{v}`")), "{err}");
        }
        let err = collect(&map(&[(
            "producer.override.interceptor.classes",
            "io.debezium.tracing.DebeziumTracingProducerInterceptor",
        )]))
        .unwrap_err()
        .to_string();
        assert!(err.contains("producer.override.interceptor.classes") && err.contains("Java"), "{err}");
    }

    #[test]
    fn unknown_producer_keys_are_rejected_with_the_key() {
        let one = |k: &str, v: &str| ClientSettings(vec![(k.into(), v.into())]);
        let err = validate(&one("no.such.thing", "1"), "127.0.0.1:9").unwrap_err();
        assert!(err.to_string().contains("no.such.thing"), "{err}");
        assert!(validate(&one("linger.ms", "5"), "127.0.0.1:9").is_ok());
        let err = validate(&one("ssl.key.password.nope", "hunter2"), "127.0.0.1:9").unwrap_err();
        assert!(!err.to_string().contains("hunter2"), "{err}");
    }

    #[test]
    fn security_keys_reach_the_producer_and_the_admin_client_as_connect_layers_them() {
        let jaas = |u: &str| {
            format!(r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="{u}" password="pw";"#)
        };
        let c = collect(&map(&[
            ("producer.override.security.protocol", "SASL_PLAINTEXT"),
            ("producer.override.sasl.mechanism", "SCRAM-SHA-256"),
            ("producer.override.sasl.jaas.config", &jaas("producer-user")),
        ]))
        .unwrap();
        assert_eq!(c.producer.get("sasl.username"), Some("producer-user"));
        assert_eq!(c.security.get("sasl.username"), Some("producer-user"), "no worker-level keys: the producer's");
        let c = collect(&map(&[
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanism", "SCRAM-SHA-512"),
            ("sasl.jaas.config", &jaas("worker")),
            ("producer.sasl.jaas.config", &jaas("producer-user")),
            ("admin.override.sasl.jaas.config", &jaas("admin-user")),
        ]))
        .unwrap();
        assert_eq!(c.producer.get("sasl.username"), Some("producer-user"));
        assert_eq!(c.producer.get("sasl.mechanism"), Some("SCRAM-SHA-512"), "top-level keys serve the producer");
        assert_eq!(c.security.get("sasl.username"), Some("admin-user"));
        assert!(c.security.get("linger.ms").is_none());
    }
}
