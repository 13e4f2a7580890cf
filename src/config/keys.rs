//! Keys pgoutbox accepts without acting on them, and why. Listed once at start-up so an operator
//! migrating a Connect config sees exactly what is not honoured.

use std::collections::BTreeSet;

use super::RawConfig;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IgnoredKey {
    pub key: String,
    pub reason: String,
}

/// Exact keys and the reason they are ignored.
const KNOWN: &[(&str, &str)] = &[
    ("tasks.max", "PostgreSQL connectors always run a single task"),
    ("offset.storage.file.filename", "pgoutbox keeps its position in the replication slot, confirmed continuously"),
    ("offset.flush.timeout.ms", "pgoutbox confirms acknowledged positions at every status update instead"),
    ("tombstones.on.delete", "the Event Router drops DELETEs and their tombstones"),
    ("max.batch.size", "read by the polling relay only (pgoutbox.relay=polling); the log-tailing relay sizes its pipeline itself"),
    ("max.queue.size", "pgoutbox sizes its pipeline itself"),
    ("max.queue.size.in.bytes", "pgoutbox sizes its pipeline itself"),
    ("poll.interval.ms", "read by the polling relay only (pgoutbox.relay=polling); the log-tailing relay does not poll: events flow as they are decoded"),
    ("slot.max.retries", "pgoutbox retries starting the stream with capped backoff until stopped"),
    ("slot.retry.delay.ms", "while another process holds the slot pgoutbox stands by, trying every second"),
    ("xmin.fetch.interval.ms", "pgoutbox does not track xmin"),
    ("replica.identity.autoset.values", "not needed: outbox tables are insert-only"),
    ("unavailable.value.placeholder", "only affects UPDATEs, which the Event Router drops"),
    ("database.sslfactory", "a Java class; pgoutbox uses database.sslmode / sslrootcert / sslcert / sslkey"),
    ("heartbeat.topics.prefix", "topic.heartbeat.prefix is set and takes precedence"),
    ("slot.stream.params", "not implemented yet"),
    (
        "provide.transaction.metadata",
        "not implemented: Debezium would also publish BEGIN/END records to <topic.prefix>.transaction",
    ),
    ("schema.refresh.mode", "pgoutbox follows the Relation messages of pgoutput"),
    ("snapshot.isolation.mode", "the snapshot always reads the slot's exported snapshot (repeatable read)"),
    ("snapshot.locking.mode", "no locks are needed: the snapshot reads the slot's exported snapshot"),
    ("include.unknown.datatypes", "unknown types are reported as errors when routed"),
    ("event.processing.failure.handling.mode", "not implemented yet: failures stop the relay"),
    ("errors.max.retries", "pgoutbox retries transient failures until stopped"),
    ("retriable.restart.connector.wait.ms", "pgoutbox retries with its own capped backoff"),
    ("database.initial.statements", "not run on the replication connection (as in Debezium)"),
    ("key.converter.replace.null.with.default", "the Event Router already reads a NULL in a column with a default as that default (Connect's Struct.get), so the converter never meets such a null"),
    ("value.converter.replace.null.with.default", "the Event Router already reads a NULL in a column with a default as that default (Connect's Struct.get), so the converter never meets such a null"),
    ("read.only", "pgoutbox writes nothing to the database except the publication and slot it manages"),
    ("plugin.path", "no plugins: pgoutbox is one binary"),
    ("group.id", "a worker key: `pgoutbox connect` joins the Connect cluster it names; `pgoutbox run` runs one connector on its own"),
];

/// Removed or renamed keys and what replaced them.
const LEGACY: &[(&str, &str)] = &[
    ("database.server.name", "removed in Debezium 2.0; use topic.prefix"),
    ("table.whitelist", "removed in Debezium 2.0; use table.include.list"),
    ("table.blacklist", "removed in Debezium 2.0; use table.exclude.list"),
    ("schema.whitelist", "removed in Debezium 2.0; use schema.include.list"),
    ("schema.blacklist", "removed in Debezium 2.0; use schema.exclude.list"),
];

/// Event Router keys removed from Debezium, matched on the part after `transforms.<name>.`.
const ROUTER_LEGACY: &[(&str, &str)] = &[
    ("debezium.op.invalid.behavior", "removed in Debezium 2.0; use table.op.invalid.behavior"),
    ("debezium.expand.json.payload", "renamed in Debezium 1.8; use table.expand.json.payload"),
    ("table.field.event.payload.id", "removed in Debezium 2.0; use table.field.event.key"),
];

/// Prefixes of whole key families and why they are ignored.
const PREFIXES: &[(&str, &str)] = &[
    ("consumer.", "pgoutbox runs no consumer"),
    ("admin.", "pgoutbox uses its own admin client settings"),
    ("offset.", "pgoutbox keeps its position in the replication slot"),
    ("config.storage.", "a worker key: `pgoutbox connect` keeps a distributed cluster's connector configs there"),
    ("status.storage.", "a worker key: `pgoutbox connect` keeps a distributed cluster's statuses there"),
    (
        "rest.",
        "a worker key: `pgoutbox connect` reads it from the worker's properties; `pgoutbox run` serves no REST API",
    ),
    (
        "listeners",
        "a worker key: `pgoutbox connect` reads it from the worker's properties; `pgoutbox run` serves no REST API",
    ),
    ("internal.", "no Connect cluster"),
    ("topic.creation.", "only topic.creation.default.partitions and .replication.factor are used"),
    ("errors.", "pgoutbox honours errors.tolerance and errors.deadletterqueue.topic.name only"),
    ("predicates.", "a predicate not listed in `predicates`: no transform can use it"),
    ("key.converter.", "this converter option does not change the bytes pgoutbox produces"),
    ("value.converter.", "this converter option does not change the bytes pgoutbox produces"),
    ("header.converter.", "this converter option does not change the bytes pgoutbox produces"),
];

pub fn ignored(raw: &RawConfig, used: &BTreeSet<String>) -> Vec<IgnoredKey> {
    let mut out = Vec::new();
    for key in raw.entries.keys().filter(|k| !used.contains(*k)) {
        let reason = reason_for(key).unwrap_or_else(|| "not a key pgoutbox knows".to_string());
        out.push(IgnoredKey { key: key.clone(), reason });
    }
    out
}

pub fn reason_for(key: &str) -> Option<String> {
    if let Some((_, r)) = KNOWN.iter().find(|(k, _)| *k == key) {
        return Some(r.to_string());
    }
    if let Some((_, r)) = LEGACY.iter().find(|(k, _)| *k == key) {
        return Some(format!("legacy key: {r}"));
    }
    if let Some(rest) = key.strip_prefix("transforms.") {
        let option = rest.split_once('.').map(|(_, o)| o).unwrap_or("");
        if let Some((_, r)) = ROUTER_LEGACY.iter().find(|(k, _)| *k == option) {
            return Some(format!("legacy key: {r}"));
        }
        if option.starts_with("tracing.") {
            return Some("OpenTelemetry tracing is not supported".to_string());
        }
        if option == "field.name.adjustment.mode" {
            return Some(
                "only `none` (the default) is supported; with `avro` JSON expansion would differ, so set none"
                    .to_string(),
            );
        }
        if option == "negate" {
            return Some("the transform has no predicate, so there is nothing to negate".to_string());
        }
        let alias = rest.split_once('.').map(|(a, _)| a).unwrap_or(rest);
        if !option.is_empty() && !option.starts_with("tracing.") {
            return Some(format!("`{alias}` is not in `transforms`, or `{option}` is not an option of its transform"));
        }
    }
    PREFIXES.iter().find(|(p, _)| key.starts_with(p)).map(|(_, r)| r.to_string())
}
