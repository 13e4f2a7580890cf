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
const NOT_KEYS: &[&str] = &["PGOUTBOX_LOG_FORMAT", "PGOUTBOX_CACHE", "PGOUTBOX_BIN", "PGOUTBOX_CONFIG"];
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

#[cfg(test)]
mod tests {
    use super::*;

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
