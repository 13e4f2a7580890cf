//! Config keys from environment variables, for containers (`--env-overrides`), the way the Debezium
//! and Confluent images map theirs. Applied over the config file and under `--set`.
//!
//! | variable                   | key                                                          |
//! |----------------------------|--------------------------------------------------------------|
//! | `PGOUTBOX_<NAME>`          | `<name>` lower-cased, `_` -> `.`, `__` -> `_`, `___` -> `-`  |
//! | `CONNECT_<NAME>`           | the same (worker keys, as in Debezium's `connect` image)     |
//! | `BOOTSTRAP_SERVERS`        | `bootstrap.servers` (Debezium's `connect` image)             |
//! | `OFFSET_STORAGE_TOPIC`     | `offset.storage.topic` (Debezium's `connect` image)          |
//! | `PGOUTBOX_SET_<anything>`  | the value is `key=value`, taken as written (for keys in camelCase, e.g. `database.tcpKeepAlive`) |
//!
//! Variables of the tooling around pgoutbox (`PGOUTBOX_CACHE`, `PGOUTBOX_TEST_*`,
//! `PGOUTBOX_LOG_FORMAT`, ...) are not config keys and are skipped.

use super::ConfigError;

/// Variables with the `PGOUTBOX_` prefix that belong to the command or the scripts.
const NOT_KEYS: &[&str] = &[
    "PGOUTBOX_LOG_FORMAT",
    "PGOUTBOX_CACHE",
    "PGOUTBOX_BIN",
    "PGOUTBOX_CONFIG",
    "PGOUTBOX_WORKER",
    "PGOUTBOX_METRICS_ADDRESS",
    "PGOUTBOX_ENV_OVERRIDES",
    "PGOUTBOX_COMMIT",
];
const NOT_KEY_PREFIXES: &[&str] = &["PGOUTBOX_TEST_", "PGOUTBOX_FAULTS_", "PGOUTBOX_PG_", "PGOUTBOX_BENCH_"];

/// `NAME` (after the prefix) as a config key: lower case; `___` is `-`, `__` is `_`, `_` is `.`.
fn key_of(name: &str) -> String {
    let lower = name.to_ascii_lowercase();
    let mut out = String::with_capacity(lower.len());
    let mut rest = lower.as_str();
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("___") {
            out.push('-');
            rest = r;
        } else if let Some(r) = rest.strip_prefix("__") {
            out.push('_');
            rest = r;
        } else if let Some(r) = rest.strip_prefix('_') {
            out.push('.');
            rest = r;
        } else {
            let c = rest.chars().next().expect("not empty");
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

/// The `key=value` overrides the variables stand for, sorted by variable name so the outcome does
/// not depend on the environment's order. A `PGOUTBOX_SET_*` value that is not `key=value` is an
/// error naming the variable (not its value: it may be a secret).
pub fn overrides(vars: impl IntoIterator<Item = (String, String)>) -> Result<Vec<(String, String)>, ConfigError> {
    let mut vars: Vec<(String, String)> = vars.into_iter().collect();
    vars.sort();
    let mut out = Vec::new();
    for (name, value) in vars {
        if NOT_KEYS.contains(&name.as_str()) || NOT_KEY_PREFIXES.iter().any(|p| name.starts_with(p)) {
            continue;
        }
        if name.starts_with("PGOUTBOX_SET_") {
            match value.split_once('=') {
                Some((k, v)) if !k.trim().is_empty() => out.push((k.trim().to_string(), v.trim().to_string())),
                _ => {
                    return Err(ConfigError::Invalid {
                        key: name,
                        message:
                            "the value is not of the form key=value (the value is not shown: it may hold a secret)"
                                .into(),
                    })
                }
            }
            continue;
        }
        let key = match name.as_str() {
            "BOOTSTRAP_SERVERS" => "bootstrap.servers".to_string(),
            "OFFSET_STORAGE_TOPIC" => "offset.storage.topic".to_string(),
            _ => match name.strip_prefix("PGOUTBOX_").or_else(|| name.strip_prefix("CONNECT_")) {
                Some(rest) if !rest.is_empty() => key_of(rest),
                _ => continue,
            },
        };
        out.push((key, value));
    }
    Ok(out)
}

/// The variables of Debezium's `connect` image and the worker keys they set (its entrypoint exports
/// `CONNECT_<KEY>=$<VARIABLE>`, so the short variable wins over a `CONNECT_` one of the same key).
pub const IMAGE_VARIABLES: &[(&str, &str)] = &[
    ("BOOTSTRAP_SERVERS", "bootstrap.servers"),
    ("GROUP_ID", "group.id"),
    ("CONFIG_STORAGE_TOPIC", "config.storage.topic"),
    ("OFFSET_STORAGE_TOPIC", "offset.storage.topic"),
    ("STATUS_STORAGE_TOPIC", "status.storage.topic"),
    ("KEY_CONVERTER", "key.converter"),
    ("VALUE_CONVERTER", "value.converter"),
    ("ADVERTISED_HOST_NAME", "rest.advertised.host.name"),
    ("ADVERTISED_PORT", "rest.advertised.port"),
    ("OFFSET_FLUSH_INTERVAL_MS", "offset.flush.interval.ms"),
    ("OFFSET_FLUSH_TIMEOUT_MS", "offset.flush.timeout.ms"),
    ("SHUTDOWN_TIMEOUT", "task.shutdown.graceful.timeout.ms"),
];

/// The image's defaults, for a worker configured by its environment alone (no worker file):
/// a distributed worker of group `1` with JSON converters, REST on every interface's port 8083.
pub const IMAGE_DEFAULTS: &[(&str, &str)] = &[
    ("group.id", "1"),
    ("key.converter", "org.apache.kafka.connect.json.JsonConverter"),
    ("value.converter", "org.apache.kafka.connect.json.JsonConverter"),
    ("listeners", "http://:8083"),
];

/// `pgoutbox connect --env-overrides`: the worker keys the environment sets, as Debezium's `connect`
/// image reads its variables (`IMAGE_VARIABLES`, `REST_HOST_NAME` and `REST_PORT` as `listeners`,
/// `CONNECT_<KEY>`), plus `PGOUTBOX_<KEY>` and `PGOUTBOX_SET_*` as for `run`. Connect 4 has no
/// `rest.host.name` or `rest.port`: given as `CONNECT_REST_*`, they become `listeners` too.
pub fn worker_overrides(
    vars: impl IntoIterator<Item = (String, String)>,
) -> Result<Vec<(String, String)>, ConfigError> {
    let vars: Vec<(String, String)> = vars.into_iter().collect();
    let image = |n: &str| IMAGE_VARIABLES.iter().any(|(v, _)| *v == n) || n == "REST_HOST_NAME" || n == "REST_PORT";
    let mut out = overrides(vars.iter().filter(|(n, _)| !image(n)).cloned())?;
    let get = |n: &str| vars.iter().find(|(k, _)| k == n).map(|(_, v)| v.trim().to_string()).filter(|v| !v.is_empty());
    let set = |out: &mut Vec<(String, String)>, k: &str, v: String| {
        out.retain(|(x, _)| x != k);
        out.push((k.to_string(), v));
    };
    for (var, key) in IMAGE_VARIABLES {
        if let Some(v) = get(var) {
            set(&mut out, key, v);
        }
    }
    let key = |out: &Vec<(String, String)>, k: &str| out.iter().find(|(x, _)| x == k).map(|(_, v)| v.clone());
    let host = get("REST_HOST_NAME").or_else(|| key(&out, "rest.host.name"));
    let port = get("REST_PORT").or_else(|| key(&out, "rest.port"));
    out.retain(|(k, _)| k != "rest.host.name" && k != "rest.port");
    if (host.is_some() || port.is_some())
        && (get("REST_HOST_NAME").is_some() || get("REST_PORT").is_some() || key(&out, "listeners").is_none())
    {
        let host = host.unwrap_or_default();
        let host = if host.contains(':') && !host.starts_with('[') { format!("[{host}]") } else { host };
        set(&mut out, "listeners", format!("http://{host}:{}", port.unwrap_or_else(|| "8083".into())));
    }
    Ok(out)
}

/// What a worker configured by its environment alone must have, named by the image's variables
/// (Debezium's image refuses to start without them, in the same words).
pub fn check_image_worker(props: &std::collections::BTreeMap<String, String>) -> Result<(), ConfigError> {
    let required = [
        ("bootstrap.servers", "BOOTSTRAP_SERVERS", "must be set to the Kafka brokers, host:port[,host:port]"),
        ("config.storage.topic", "CONFIG_STORAGE_TOPIC", "must be set to the name of the topic where connector configurations will be stored (one partition, compacted)"),
        ("offset.storage.topic", "OFFSET_STORAGE_TOPIC", "must be set to the name of the topic where connector offsets will be stored (compacted, many partitions)"),
    ];
    for (key, var, what) in required {
        if !props.get(key).is_some_and(|v| !v.trim().is_empty()) {
            return Err(ConfigError::Invalid {
                key: var.to_string(),
                message: format!("the variable {what} (or give --worker a file)"),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_debezium_connect_images_variables_configure_the_worker() {
        let o = worker_overrides(env(&[
            ("BOOTSTRAP_SERVERS", "kafka:9092"),
            ("GROUP_ID", "outbox"),
            ("CONFIG_STORAGE_TOPIC", "my_connect_configs"),
            ("OFFSET_STORAGE_TOPIC", "my_connect_offsets"),
            ("STATUS_STORAGE_TOPIC", "my_connect_statuses"),
            ("KEY_CONVERTER", "org.apache.kafka.connect.storage.StringConverter"),
            ("CONNECT_GROUP_ID", "loses"),
            ("CONNECT_CONFIG_STORAGE_REPLICATION_FACTOR", "1"),
            ("REST_PORT", "18083"),
            ("ADVERTISED_HOST_NAME", "connect-0"),
            ("SHUTDOWN_TIMEOUT", "20000"),
            ("PGOUTBOX_SET_X", "exactly.once.source.support=enabled"),
            ("HOME", "/root"),
        ]))
        .unwrap();
        let get = |k: &str| o.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
        assert_eq!(get("bootstrap.servers"), Some("kafka:9092"));
        assert_eq!(get("group.id"), Some("outbox"), "the image's variable wins, as its entrypoint exports it last");
        assert_eq!(get("config.storage.topic"), Some("my_connect_configs"));
        assert_eq!(get("offset.storage.topic"), Some("my_connect_offsets"));
        assert_eq!(get("status.storage.topic"), Some("my_connect_statuses"));
        assert_eq!(get("key.converter"), Some("org.apache.kafka.connect.storage.StringConverter"));
        assert_eq!(get("config.storage.replication.factor"), Some("1"));
        assert_eq!(get("listeners"), Some("http://:18083"));
        assert_eq!(get("rest.advertised.host.name"), Some("connect-0"));
        assert_eq!(get("task.shutdown.graceful.timeout.ms"), Some("20000"));
        assert_eq!(get("exactly.once.source.support"), Some("enabled"));
        assert_eq!(o.iter().filter(|(k, _)| k == "group.id").count(), 1, "{o:?}");
        // Connect 4 has no rest.port: the CONNECT_ form becomes a listener too.
        let o = worker_overrides(env(&[("CONNECT_REST_PORT", "9083"), ("CONNECT_REST_HOST_NAME", "0.0.0.0")])).unwrap();
        assert_eq!(o, vec![("listeners".to_string(), "http://0.0.0.0:9083".to_string())]);
        let mut props: std::collections::BTreeMap<String, String> =
            IMAGE_DEFAULTS.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        props.insert("bootstrap.servers".into(), "kafka:9092".into());
        let e = check_image_worker(&props).unwrap_err().to_string();
        assert!(e.contains("CONFIG_STORAGE_TOPIC"), "{e}");
    }

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn variables_map_to_keys_as_the_debezium_and_confluent_images_map_them() {
        let o = overrides(env(&[
            ("PGOUTBOX_DATABASE_HOSTNAME", "db"),
            ("PGOUTBOX_SLOT_NAME", "outbox_slot"),
            ("PGOUTBOX_TRANSFORMS_OUTBOX_TABLE_FIELD_EVENT_KEY", "aggregate_id"),
            ("PGOUTBOX_TABLE__INCLUDE_LIST", "x"),
            ("PGOUTBOX_SOME___DASHED", "y"),
            ("CONNECT_SECURITY_PROTOCOL", "SASL_SSL"),
            ("CONNECT_PRODUCER_COMPRESSION_TYPE", "lz4"),
            ("BOOTSTRAP_SERVERS", "kafka:9092"),
            ("OFFSET_STORAGE_TOPIC", "my-offsets"),
            ("PGOUTBOX_SET_1", "database.tcpKeepAlive = true"),
            ("HOME", "/root"),
            ("PGOUTBOX_CACHE", "/cache"),
            ("PGOUTBOX_TEST_BROKER", "x"),
            ("PGOUTBOX_LOG_FORMAT", "json"),
        ]))
        .unwrap();
        let get = |k: &str| o.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
        assert_eq!(get("database.hostname"), Some("db"));
        assert_eq!(get("slot.name"), Some("outbox_slot"));
        assert_eq!(get("transforms.outbox.table.field.event.key"), Some("aggregate_id"));
        assert_eq!(get("table_include.list"), Some("x"));
        assert_eq!(get("some-dashed"), Some("y"));
        assert_eq!(get("security.protocol"), Some("SASL_SSL"));
        assert_eq!(get("producer.compression.type"), Some("lz4"));
        assert_eq!(get("bootstrap.servers"), Some("kafka:9092"));
        assert_eq!(get("offset.storage.topic"), Some("my-offsets"));
        assert_eq!(get("database.tcpKeepAlive"), Some("true"));
        assert_eq!(o.len(), 10, "{o:?}");
    }

    #[test]
    fn a_malformed_set_variable_is_named_without_its_value() {
        let e = overrides(env(&[("PGOUTBOX_SET_PW", "hunter2")])).unwrap_err().to_string();
        assert!(e.contains("PGOUTBOX_SET_PW") && !e.contains("hunter2"), "{e}");
    }
}
