//! The connector configuration an operator already runs on Kafka Connect, turned into a typed `Config`
//! once, at start-up. This module assembles the sections: the Event Router's options are parsed by
//! `outbox::options`, the type modes by `debezium::modes`, the converters by `connect::converter`,
//! all through `connect::Reader`; what is read here is the connector's own (database, slot,
//! publication, Kafka clients and their security, heartbeats, errors). Every validation error names
//! the key to fix. Keys pgoutbox accepts but does not act on are returned as `ignored`, with the
//! reason, so `run` can list them once.

pub mod env;
pub mod exactly_once;
mod keys;
pub mod messages;
pub use keys::reason_for as ignored_reason;
pub mod polling;
pub mod producer;
mod properties;
pub mod providers;
pub mod prune;
pub mod security;

use std::time::Duration;

use regex::Regex;

pub use keys::IgnoredKey;
pub use properties::{parse_json, parse_properties, RawConfig};
pub use security::ClientSettings;

pub use crate::connect::{ConfigError, Converter};
pub use crate::outbox::options::{AdditionalField, InvalidOpBehavior, Placement, RouterConfig};
pub use crate::outbox::EVENT_ROUTER_CLASS;

use crate::connect::Reader;

fn invalid(key: &str, message: impl Into<String>) -> ConfigError {
    ConfigError::invalid(key, message)
}

/// A secret string: never shown by `Debug` or `Display`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: String) -> Self {
        Secret(s)
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("\"***\"")
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    Disable,
    Allow,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

#[derive(Debug, Clone)]
pub struct DatabaseConfig {
    pub hostname: String,
    pub port: u16,
    pub user: String,
    pub password: Option<Secret>,
    pub dbname: String,
    pub sslmode: SslMode,
    pub sslrootcert: Option<String>,
    pub sslcert: Option<String>,
    pub sslkey: Option<String>,
    pub connect_timeout: Duration,
    /// `database.tcpKeepAlive` (Debezium's default: true).
    pub tcp_keepalive: bool,
    /// `database.channelBinding` (pgjdbc's key; libpq's `channel_binding`).
    pub channel_binding: ChannelBinding,
    /// `database.requireAuth` (pgjdbc's key; libpq's `require_auth`): `None` answers any request.
    pub require_auth: Option<RequireAuth>,
}

/// Whether SCRAM binds to the TLS channel (SCRAM-SHA-256-PLUS, `tls-server-end-point`), as pgjdbc's
/// `channelBinding` and libpq's `channel_binding` say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelBinding {
    Disable,
    /// Bind when the connection is TLS and the server offers it (the default).
    Prefer,
    /// Refuse any authentication that is not SCRAM-SHA-256-PLUS completed over TLS.
    Require,
}

/// The authentication requests the client answers (libpq's `require_auth`, pgjdbc's
/// `requireAuth`): a request of another kind is refused before it is answered, on the replication
/// connection by its own framing, on the SQL connection by `postgres::auth_guard`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequireAuth {
    pub password: bool,
    pub md5: bool,
    pub scram: bool,
    /// The server may let the client in without authenticating it (trust, cert).
    pub none: bool,
}

impl RequireAuth {
    /// libpq's list: `password`, `md5`, `gss`, `sspi`, `scram-sha-256`, `none`, all plain or all
    /// negated with `!`, each at most once.
    pub fn parse(list: &str) -> Result<RequireAuth, String> {
        let methods: Vec<&str> = list.split(',').map(str::trim).filter(|m| !m.is_empty()).collect();
        let negated = methods.first().is_some_and(|m| m.starts_with('!'));
        if methods.iter().any(|m| m.starts_with('!') != negated) {
            return Err("mixes negated (!) and plain methods; use one kind".into());
        }
        let mut r = RequireAuth { password: negated, md5: negated, scram: negated, none: negated };
        let mut seen = std::collections::BTreeSet::new();
        for m in &methods {
            let name = m.trim_start_matches('!');
            if !seen.insert(name.to_ascii_lowercase()) {
                return Err("names a method more than once".into());
            }
            let slot = match name.to_ascii_lowercase().as_str() {
                "password" => &mut r.password,
                "md5" => &mut r.md5,
                "scram-sha-256" => &mut r.scram,
                "none" => &mut r.none,
                // pgoutbox speaks neither GSSAPI nor SSPI: allowing them allows nothing more.
                "gss" | "sspi" => continue,
                _ => {
                    return Err("names a method that is not one of password, md5, gss, sspi, scram-sha-256, none".into())
                }
            };
            *slot = !negated;
        }
        if methods.is_empty() {
            return Err("is empty; list the methods to allow, e.g. scram-sha-256".into());
        }
        Ok(r)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AutocreateMode {
    Disabled,
    AllTables,
    Filtered,
    NoTables,
}

/// `snapshot.mode`: whether the rows already in the outbox table are published.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotMode {
    /// Stream only (also `never`, removed in Debezium 3.3 but still found in configs).
    NoData,
    /// Snapshot when the slot is new (Debezium: when there are no offsets), then stream.
    Initial,
    /// Snapshot when the slot is new, then stop.
    InitialOnly,
    /// Snapshot at every start, then stream.
    Always,
    /// Like `Initial`: pgoutbox's position lives in the slot, so "offsets missing" means "slot missing".
    WhenNeeded,
}

/// Anchored include/exclude regexes over `schema.table`, as Debezium applies them.
#[derive(Debug, Clone, Default)]
pub struct TableFilter {
    pub table_include: Vec<Regex>,
    pub table_exclude: Vec<Regex>,
    pub schema_include: Vec<Regex>,
    pub schema_exclude: Vec<Regex>,
    /// A messages-only connector: no table is captured.
    pub none: bool,
}

impl TableFilter {
    /// The `schema.table` names the include list spells out (entries that are plain names, not
    /// patterns), for checks at start.
    pub fn literal_tables(&self) -> Vec<String> {
        let plain = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        self.table_include
            .iter()
            .filter_map(|re| {
                let inner = re.as_str().strip_prefix("(?i)^(?:")?.strip_suffix(")$")?.replace("\\.", ".");
                let (schema, table) = inner.split_once('.')?;
                (plain(schema) && plain(table)).then_some(inner)
            })
            .collect()
    }

    pub fn matches(&self, schema: &str, table: &str) -> bool {
        if self.none {
            return false;
        }
        let full = format!("{schema}.{table}");
        let any = |res: &[Regex], s: &str| res.iter().any(|r| r.is_match(s));
        if !self.schema_include.is_empty() && !any(&self.schema_include, schema) {
            return false;
        }
        if any(&self.schema_exclude, schema) {
            return false;
        }
        if !self.table_include.is_empty() && !any(&self.table_include, &full) {
            return false;
        }
        !any(&self.table_exclude, &full)
    }
}

/// `skipped.operations`: the operations the connector does not emit. Two matter to the Event
/// Router: skipped inserts publish nothing, skipped updates are not even checked against
/// `table.op.invalid.behavior`. Deletes and truncates never become outbox events; a skipped delete
/// is left out of Debezium's event counters, as Debezium leaves out every skipped operation.
#[derive(Debug, Clone, Default)]
pub struct SkippedOps {
    pub insert: bool,
    pub update: bool,
    pub delete: bool,
}

#[derive(Debug, Clone, Default)]
pub struct ErrorTolerance {
    pub tolerate: bool,
    pub dead_letter_topic: Option<String>,
    /// `errors.log.enable`: Connect counts the errors it logs (task-error-metrics'
    /// total-errors-logged) only with it; pgoutbox logs every skipped record either way.
    pub log: bool,
}

/// `heartbeat.interval.ms` > 0: heartbeat records to `<topic.heartbeat.prefix>.<topic.prefix>` (joined
/// by `topic.delimiter`), and
/// optionally `heartbeat.action.query` run on the database at the same interval.
#[derive(Debug, Clone)]
pub struct Heartbeat {
    pub interval: Duration,
    pub topic: String,
    pub action_query: Option<String>,
}

#[derive(Debug, Clone)]
pub struct TopicCreation {
    pub partitions: i32,
    pub replication_factor: i32,
}

#[derive(Debug, Clone)]
pub struct KafkaConfig {
    pub bootstrap_servers: String,
    /// The producer's librdkafka settings (from `producer.*` and `producer.override.*`, Java names
    /// mapped), security included.
    pub producer_overrides: ClientSettings,
    /// The security settings of the other clients (admin, offset store, verify).
    pub client_security: ClientSettings,
    pub topic_creation: Option<TopicCreation>,
}

#[derive(Debug, Clone)]
pub struct Config {
    /// Connect's connector `name` (the `__debezium.context.connectorName` header is the connector type,
    /// `postgresql`, not this).
    pub connector_name: String,
    pub database: DatabaseConfig,
    pub topic_prefix: String,
    pub slot_name: String,
    pub publication_name: String,
    pub publication_autocreate: AutocreateMode,
    pub tables: TableFilter,
    pub skipped: SkippedOps,
    pub status_interval: Duration,
    /// `offset.flush.interval.ms`: at least once, how often the slot's confirmed position is
    /// recorded in `offset.storage.topic` (besides at session start and end), so that Debezium,
    /// rolled back to, finds an offset as recent as the slot.
    pub offset_flush_interval: Duration,
    pub router: RouterConfig,
    pub key_converter: Converter,
    pub value_converter: Converter,
    pub extended_headers: bool,
    pub kafka: KafkaConfig,
    /// How long a graceful stop waits for outstanding acknowledgements.
    pub shutdown_timeout: Duration,
    pub slot_drop_on_stop: bool,
    /// `publish.via.partition.root`: the publication reports a partitioned outbox's changes under the
    /// parent's name. Without it they arrive under each partition's name, and are routed as the
    /// parent's all the same.
    pub publish_via_partition_root: bool,
    /// `slot.failover` (Debezium 3.0.5+, PostgreSQL 17+): the slot is a failover slot, synchronised
    /// to standbys, so it survives a failover.
    pub slot_failover: bool,
    /// `offset.mismatch.strategy`.
    pub offset_mismatch: OffsetMismatch,
    /// `internal.log.position.check.enable` (Debezium's, default true): at start, a committed
    /// offset the slot's `restart_lsn` has passed stops the relay (see `pipeline::session`).
    pub log_position_check: bool,
    /// `lsn.flush.mode=manual`: the relay never confirms a position to the slot (the operator
    /// advances it) and resumes from the offsets topic, where it records every acknowledged
    /// position; see `pipeline::session`.
    pub lsn_flush_manual: bool,
    /// `lsn.flush.timeout.ms` (default 30 s): how long a status update, which confirms a position
    /// to the server, may take to be written before `lsn_flush_timeout_action` applies.
    pub lsn_flush_timeout: Duration,
    /// `lsn.flush.timeout.action` (default `fail`).
    pub lsn_flush_timeout_action: FlushTimeoutAction,
    /// `offset.storage.topic`: where the relay records the slot it streams from (see
    /// `kafka::offsets`), so that a slot lost while the relay was stopped is noticed.
    pub offset_topic: String,
    /// `offset.storage.partitions` (Connect's default, 25) and `offset.storage.replication.factor`:
    /// used when pgoutbox creates `offset_topic`. `None` for the replication factor when the key is
    /// not set: 3, or the cluster's broker count where it has fewer (see `kafka::offsets`).
    pub offset_partitions: i32,
    pub offset_replication: Option<i32>,
    pub heartbeat: Option<Heartbeat>,
    pub snapshot_mode: SnapshotMode,
    pub errors: ErrorTolerance,
    /// `pgoutbox.commit.lsn.header` (off by default, so records stay Debezium's): a header with the
    /// LSN of the event's commit record, which orders events across aggregates and restarts.
    pub commit_lsn_header: Option<String>,
    /// `pgoutbox.relay`: the log-tailing relay (the default) or the polling relay, whose options
    /// `polling` holds (`Some` exactly when `relay` is `Polling`).
    pub relay: polling::RelayKind,
    pub polling: Option<polling::PollingConfig>,
    /// `pgoutbox.stall.threshold.ms` (default 300000): the oldest unpublished event's age past which
    /// the relay reports itself stalled (log, metric, `/health`).
    pub stall_threshold: Duration,
    /// The message outbox: which logical decoding messages are events (`None`: none, and the
    /// stream does not ask for them).
    pub messages: Option<messages::MessageCapture>,
    /// The message prefix lists, parsed whether or not messages are relayed (for the metrics).
    pub message_prefixes: messages::Prefixes,
    /// `pgoutbox.prune.*`: `None` unless `pgoutbox.prune.retention.ms` is set.
    pub prune: Option<prune::PruneConfig>,
    /// Connect's exactly-once keys (`exactly.once.source.support=enabled`): `None` publishes at
    /// least once.
    pub exactly_once: Option<exactly_once::ExactlyOnce>,
    pub ignored: Vec<IgnoredKey>,
    /// Keys whose values keep a `${alias:...}` reference to a config provider the config does not
    /// declare (key, alias): used literally, as Connect would, and worth a warning.
    pub undeclared_providers: Vec<(String, String)>,
    /// What works but should change: Debezium 1.x keys and class names read as 1.x did, the
    /// tracing transform passing records through. Logged at start, listed by `check`.
    pub warnings: Vec<String>,
}

pub const POSTGRES_CONNECTOR_CLASS: &str = "io.debezium.connector.postgresql.PostgresConnector";

/// The Debezium release whose behaviour pgoutbox matches: the connector's version in Connect's REST
/// API and metrics.
pub const DEBEZIUM_VERSION: &str = "3.6.3.Final";

/// Where the relay records the slot it streams from when `offset.storage.topic` is not set.
pub const DEFAULT_OFFSET_TOPIC: &str = "pgoutbox-offsets";

impl Config {
    /// The typed configuration, each section read by the module that owns it; every key that is
    /// not read is reported in `ignored` with the reason.
    pub fn from_raw(raw: &RawConfig) -> Result<Config, ConfigError> {
        Config::from_resolved(providers::resolve(raw)?)
    }

    /// [`Config::from_raw`] of a config whose provider references are already resolved, by
    /// [`providers::resolve_for`] the audience its errors go to.
    pub fn from_resolved(resolved: providers::Resolved) -> Result<Config, ConfigError> {
        let undeclared = resolved.undeclared.clone();
        Config::from_resolved_inner(resolved).map_err(|e| match e {
            // A value the key refused may be a reference left literal: say so beside the error.
            ConfigError::Invalid { key, message } => match undeclared.iter().find(|(k, _)| *k == key) {
                Some((_, alias)) => {
                    // The alias is part of the value: named only when it is a plain name.
                    let plain = !alias.is_empty()
                        && alias.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
                    let provider = if plain { format!("config provider `{alias}`") } else { "a config provider".into() };
                    ConfigError::Invalid {
                        message: format!("{message} (its value refers to {provider}, which is not declared, so it was read literally: add the provider to config.providers with its config.providers.<name>.class, in the worker's properties when a Connect worker runs the connector)"),
                        key,
                    }
                }
                None => ConfigError::Invalid { key, message },
            },
            other => other,
        })
    }

    fn from_resolved_inner(resolved: providers::Resolved) -> Result<Config, ConfigError> {
        let source_name = resolved.raw.source_name.clone();
        let raw = &resolved.raw;
        let mut r = Reader::new(&raw.entries);
        for k in raw.entries.keys().filter(|k| providers::is_provider_key(k)) {
            r.consume(k);
        }
        let LsnFlush { manual: lsn_flush_manual, timeout: lsn_flush_timeout, timeout_action: lsn_flush_timeout_action } =
            check_connector(&mut r)?;
        let database = parse_database(&mut r)?;
        let stream = parse_stream(&mut r)?;
        let topic_prefix = parse_topic_prefix(&mut r)?;
        let router = parse_router(&mut r, &topic_prefix)?;
        let key_converter = Converter::parse(&mut r, "key")?;
        let value_converter = Converter::parse(&mut r, "value")?;
        let extended_headers = r.bool_or("extended.headers.enabled", true)?;
        let (kafka, producer_ignored) = parse_kafka(&mut r, raw)?;
        let heartbeat = parse_heartbeat(&mut r, &topic_prefix, &router.topic_delimiter)?;
        let errors = parse_errors(&mut r)?;
        let commit_lsn_header = parse_commit_lsn_header(&mut r);
        let (relay, polling) = polling::parse(&mut r)?;
        let stall_threshold = r.millis_or("pgoutbox.stall.threshold.ms", 300_000)?;
        let prune = prune::parse(&mut r)?;
        let (messages, message_prefixes) = messages::parse(&mut r, router.chain.decode.is_some(), relay)?;
        let mut stream = stream;
        // A messages-only connector (Debezium's `publication.autocreate.mode=no_tables` with no
        // table list) captures no table, not every table as an empty list otherwise means.
        if messages.is_some()
            && stream.publication_autocreate == AutocreateMode::NoTables
            && stream.tables.table_include.is_empty()
            && stream.tables.schema_include.is_empty()
        {
            stream.tables.none = true;
        }
        router.chain.check_gates(
            &topic_prefix,
            &|schema, table| router.data_change_topic(schema, table),
            &stream.tables.literal_tables(),
        )?;
        if relay == polling::RelayKind::Polling && commit_lsn_header.is_some() {
            return Err(invalid(
                "pgoutbox.commit.lsn.header",
                "needs the log-tailing relay: the polling relay reads rows, not commit records; remove the key or set pgoutbox.relay=log_tailing",
            ));
        }
        // A bare config map (no `name`): named after its file, as the deployment named it.
        let connector_name = r.str("name").map(str::to_string).or(source_name).unwrap_or_else(|| "pgoutbox".into());
        let shutdown_timeout = r.millis_or("task.shutdown.graceful.timeout.ms", 30_000)?;
        let exactly_once = exactly_once::parse(&mut r, &connector_name, relay == polling::RelayKind::Polling)?;
        // Under exactly once a record given up aborts its Kafka transaction, and nothing of it is read.
        if exactly_once.is_none() {
            if let Some(ms) = kafka.producer_overrides.get("message.timeout.ms").filter(|v| v.trim() != "0") {
                r.warn(format!(
                    "the producer gives up on a record Kafka has not acknowledged within {ms} ms (delivery.timeout.ms or message.timeout.ms): \
                     later records of its partition may be written meanwhile, and the relay then publishes it again after them, out of its \
                     aggregate's commit order. Remove the key to keep the order through a broker outage (pgoutbox then never gives up on a \
                     record, as Connect's delivery.timeout.ms=2147483647 does)"
                ));
            }
        }
        let warnings = r.take_warnings();
        let mut ignored = keys::ignored(raw, r.used());
        ignored.extend(producer_ignored);
        Ok(Config {
            connector_name,
            database,
            topic_prefix,
            slot_name: stream.slot_name,
            publication_name: stream.publication_name,
            publication_autocreate: stream.publication_autocreate,
            tables: stream.tables,
            skipped: stream.skipped,
            status_interval: stream.status_interval,
            offset_flush_interval: stream.offset_flush_interval,
            router,
            key_converter,
            value_converter,
            extended_headers,
            kafka,
            shutdown_timeout,
            slot_drop_on_stop: stream.slot_drop_on_stop,
            publish_via_partition_root: stream.publish_via_partition_root,
            slot_failover: stream.slot_failover,
            offset_mismatch: stream.offset_mismatch,
            log_position_check: stream.log_position_check,
            lsn_flush_manual,
            lsn_flush_timeout,
            lsn_flush_timeout_action,
            offset_topic: stream.offset_topic,
            offset_partitions: stream.offset_partitions,
            offset_replication: stream.offset_replication,
            heartbeat,
            snapshot_mode: stream.snapshot_mode,
            errors,
            commit_lsn_header,
            relay,
            polling,
            stall_threshold,
            prune,
            messages,
            message_prefixes,
            exactly_once,
            ignored,
            undeclared_providers: resolved.undeclared,
            warnings,
        })
    }
}

fn parse_topic_prefix(r: &mut Reader<'_>) -> Result<String, ConfigError> {
    r.str_or_legacy("topic.prefix", "database.server.name").map(str::to_string).ok_or_else(|| ConfigError::Missing {
        key: "topic.prefix".into(),
        hint: "Debezium's logical server name, e.g. topic.prefix=dbserver1".into(),
    })
}

/// `pgoutbox.commit.lsn.header`: `true` for the default header name, a name, or off.
fn parse_commit_lsn_header(r: &mut Reader<'_>) -> Option<String> {
    match r.str("pgoutbox.commit.lsn.header")? {
        v if v.eq_ignore_ascii_case("false") => None,
        v if v.eq_ignore_ascii_case("true") => Some("__pgoutbox.commit_lsn".to_string()),
        name => Some(name.to_string()),
    }
}

/// The transform chain and the Event Router's options (its warnings become the config's).
fn parse_router(r: &mut Reader<'_>, topic_prefix: &str) -> Result<RouterConfig, ConfigError> {
    let chain = crate::outbox::chain::Chain::parse(r)?;
    let mut router = RouterConfig::parse(r, &chain.router_alias, topic_prefix)?;
    for w in &chain.warnings {
        r.warn(w.clone());
    }
    router.chain = chain;
    Ok(router)
}

/// `errors.tolerance` and its dead-letter topic; the logging keys change nothing pgoutbox writes
/// (`errors.log.enable` only what its metrics count).
fn parse_errors(r: &mut Reader<'_>) -> Result<ErrorTolerance, ConfigError> {
    let errors = ErrorTolerance {
        tolerate: r.choice("errors.tolerance", false, &[("none", false), ("all", true)])?,
        dead_letter_topic: r.str("errors.deadletterqueue.topic.name").map(str::to_string),
        log: r.str("errors.log.enable").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")),
    };
    for k in ["errors.deadletterqueue.context.headers.enable", "errors.log.enable", "errors.log.include.messages"] {
        r.consume(k);
    }
    Ok(errors)
}

/// `connector.class` and `plugin.name`: pgoutbox is the PostgreSQL connector on pgoutput.
/// A plugin version requirement (KIP-891) as Connect reads it, a version or a Maven range such as
/// `[3.0,4.0)`, against `version`.
pub fn version_matches(spec: &str, version: &str) -> bool {
    let parts = |v: &str| -> Vec<u64> { v.split(['.', '-']).map_while(|p| p.trim().parse().ok()).collect() };
    let spec = spec.trim();
    let (Some(open), Some(close)) = (spec.chars().next(), spec.chars().last()) else { return true };
    if !matches!(open, '[' | '(') || !matches!(close, ']' | ')') {
        return spec == version;
    }
    let inner = &spec[1..spec.len() - 1];
    let (low, high) = inner.split_once(',').unwrap_or((inner, inner));
    let v = parts(version);
    let above = low.trim().is_empty() || if open == '[' { v >= parts(low) } else { v > parts(low) };
    let below = high.trim().is_empty() || if close == ']' { v <= parts(high) } else { v < parts(high) };
    above && below
}

/// Whether `lsn.flush.mode` (or the deprecated `flush.lsn.source`) is `manual`.
fn check_connector(r: &mut Reader<'_>) -> Result<LsnFlush, ConfigError> {
    if let Some(class) = r.str("connector.class") {
        if class != POSTGRES_CONNECTOR_CLASS && class != "PostgresConnector" {
            return Err(invalid(
                "connector.class",
                format!("pgoutbox replaces {POSTGRES_CONNECTOR_CLASS}, not the class given"),
            ));
        }
    }
    // KIP-891: a connector may ask for a version of its plugin; pgoutbox is one.
    if let Some(spec) = r.str("connector.plugin.version").filter(|s| !s.trim().is_empty()) {
        // The message does not repeat the value (no config error does: it may be a secret put in
        // the wrong key).
        if !version_matches(spec, DEBEZIUM_VERSION) {
            return Err(invalid(
                "connector.plugin.version",
                format!("asks for a version of {POSTGRES_CONNECTOR_CLASS} this worker does not have; available versions: [{DEBEZIUM_VERSION}]"),
            ));
        }
    }
    // Debezium's custom converters (`converters=<names>`, `<name>.type=<class>`) are Java classes
    // that change how columns are converted: left out, the records could differ from Debezium's.
    if r.str("converters").is_some_and(|v| !v.trim().is_empty()) {
        return Err(invalid(
            "converters",
            "names Debezium custom converters, Java classes pgoutbox cannot run (they change how a column's value and schema are written, so the records could differ from Debezium's); remove the key and its converters' options if none of them applies to the outbox table's columns, or keep Kafka Connect for this connector",
        ));
    }
    let plugin = r.string_or("plugin.name", "pgoutput");
    if plugin != "pgoutput" {
        return Err(invalid(
            "plugin.name",
            "is not supported; pgoutbox decodes only `pgoutput` (set plugin.name=pgoutput and use a pgoutput slot)",
        ));
    }
    // lsn.flush.mode (Debezium 3.4) as Debezium reads it: case-insensitive; the deprecated
    // flush.lsn.source only when lsn.flush.mode is not given (given both, lsn.flush.mode wins,
    // silently, as in Debezium).
    let flush_mode = match r.str("lsn.flush.mode") {
        Some(v) => {
            r.consume("flush.lsn.source");
            v.to_ascii_lowercase()
        }
        None => match r.str("flush.lsn.source") {
            None => "connector".to_string(),
            Some(v) => {
                r.warn("Property 'flush.lsn.source' is deprecated and replaced by 'lsn.flush.mode' and will be removed in a future build.");
                match v.to_ascii_lowercase().as_str() {
                    "true" => "connector".to_string(),
                    "false" => "manual".to_string(),
                    _ => {
                        return Err(invalid(
                            "flush.lsn.source",
                            "is not a boolean; use true or false (or lsn.flush.mode)",
                        ))
                    }
                }
            }
        },
    };
    let manual = match flush_mode.as_str() {
        "connector" | "connector_and_driver" => false,
        "manual" => true,
        _ => return Err(invalid("lsn.flush.mode", "is not one of connector, manual, connector_and_driver")),
    };
    // lsn.flush.timeout.ms and .action (Debezium 3.2): how long a status update may take to be
    // written, and what happens when it takes longer (see `pipeline::reader`).
    let timeout = r.millis_or("lsn.flush.timeout.ms", 30_000)?;
    if timeout.is_zero() {
        return Err(invalid("lsn.flush.timeout.ms", "must be greater than 0"));
    }
    let timeout_action = r.choice(
        "lsn.flush.timeout.action",
        FlushTimeoutAction::Fail,
        &[
            ("fail", FlushTimeoutAction::Fail),
            ("warn", FlushTimeoutAction::Warn),
            ("ignore", FlushTimeoutAction::Ignore),
        ],
    )?;
    Ok(LsnFlush { manual, timeout, timeout_action })
}

/// `lsn.flush.mode` and `lsn.flush.timeout.*`, as `check_connector` reads them.
struct LsnFlush {
    manual: bool,
    timeout: Duration,
    timeout_action: FlushTimeoutAction,
}

/// `lsn.flush.timeout.action` (Debezium 3.2+): what a status update that the server has not taken
/// within `lsn.flush.timeout.ms` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushTimeoutAction {
    /// Stop the relay, naming the slot and the key (Debezium fails the task).
    Fail,
    /// Log a warning and keep waiting for the server to take it.
    Warn,
    /// Keep waiting, logging at debug level only.
    Ignore,
}

/// `offset.mismatch.strategy` (Debezium 3.4+): what to do when the connector's committed offset
/// and its slot disagree at start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetMismatch {
    NoValidation,
    TrustOffset,
    TrustSlot,
    TrustGreaterLsn,
}

impl OffsetMismatch {
    /// `trust_offset` and `trust_greater_lsn` move a slot that is behind the committed offset up
    /// to it (`pg_replication_slot_advance`) before streaming.
    pub fn advances_slot(self) -> bool {
        matches!(self, OffsetMismatch::TrustOffset | OffsetMismatch::TrustGreaterLsn)
    }
}

fn parse_offset_mismatch(r: &mut Reader<'_>) -> Result<OffsetMismatch, ConfigError> {
    // Debezium parses it case-insensitively, trimmed.
    let value = r.string_or("offset.mismatch.strategy", "no_validation");
    Ok(match value.trim().to_ascii_lowercase().as_str() {
        "no_validation" => OffsetMismatch::NoValidation,
        "trust_offset" => OffsetMismatch::TrustOffset,
        "trust_slot" => OffsetMismatch::TrustSlot,
        "trust_greater_lsn" => OffsetMismatch::TrustGreaterLsn,
        _ => {
            return Err(invalid(
                "offset.mismatch.strategy",
                "is not one of no_validation, trust_offset, trust_slot, trust_greater_lsn",
            ))
        }
    })
}

fn parse_database(r: &mut Reader<'_>) -> Result<DatabaseConfig, ConfigError> {
    let database = DatabaseConfig {
        hostname: r.required("database.hostname", "the PostgreSQL host to replicate from")?,
        port: r.int_or("database.port", 5432u16, "a TCP port number")?,
        user: r.required("database.user", "a user with the REPLICATION attribute")?,
        password: r.str("database.password").map(|s| Secret::new(s.to_string())),
        dbname: r.required("database.dbname", "the database that holds the outbox table")?,
        sslmode: r.choice(
            "database.sslmode",
            SslMode::Prefer,
            &[
                ("disable", SslMode::Disable),
                ("allow", SslMode::Allow),
                ("prefer", SslMode::Prefer),
                ("require", SslMode::Require),
                ("verify-ca", SslMode::VerifyCa),
                ("verify-full", SslMode::VerifyFull),
            ],
        )?,
        sslrootcert: r.str("database.sslrootcert").map(str::to_string),
        sslcert: r.str("database.sslcert").map(str::to_string),
        sslkey: r.str("database.sslkey").map(str::to_string),
        connect_timeout: r.millis_or("database.connect.timeout.ms", 30_000)?,
        tcp_keepalive: r.bool_or("database.tcpKeepAlive", true)?,
        channel_binding: r.choice(
            "database.channelBinding",
            ChannelBinding::Prefer,
            &[
                ("disable", ChannelBinding::Disable),
                ("prefer", ChannelBinding::Prefer),
                ("require", ChannelBinding::Require),
            ],
        )?,
        require_auth: match r.str("database.requireAuth") {
            None => None,
            Some(v) => Some(RequireAuth::parse(v).map_err(|why| invalid("database.requireAuth", why))?),
        },
    };
    if database.channel_binding == ChannelBinding::Require && database.sslmode == SslMode::Disable {
        return Err(invalid(
            "database.channelBinding",
            "require needs TLS: set database.sslmode to require, verify-ca or verify-full",
        ));
    }
    if matches!(database.sslmode, SslMode::VerifyCa | SslMode::VerifyFull) && database.sslrootcert.is_none() {
        return Err(ConfigError::Missing {
            key: "database.sslrootcert".into(),
            hint: "sslmode verify-ca and verify-full verify the server against this CA certificate (PEM)".into(),
        });
    }
    if database.sslcert.is_some() != database.sslkey.is_some() {
        return Err(invalid("database.sslcert", "database.sslcert and database.sslkey go together"));
    }
    if r.str("database.sslpassword").is_some() {
        return Err(invalid(
            "database.sslpassword",
            "encrypted client keys are not supported; give database.sslkey an unencrypted PEM key",
        ));
    }
    Ok(database)
}

/// What and how the connector streams: the slot, the publication, the tables, the snapshot.
struct Stream {
    snapshot_mode: SnapshotMode,
    slot_name: String,
    publication_name: String,
    publication_autocreate: AutocreateMode,
    tables: TableFilter,
    skipped: SkippedOps,
    status_interval: Duration,
    offset_flush_interval: Duration,
    slot_drop_on_stop: bool,
    publish_via_partition_root: bool,
    slot_failover: bool,
    offset_mismatch: OffsetMismatch,
    log_position_check: bool,
    offset_topic: String,
    offset_partitions: i32,
    offset_replication: Option<i32>,
}

fn parse_stream(r: &mut Reader<'_>) -> Result<Stream, ConfigError> {
    let snapshot_mode = r.choice(
        "snapshot.mode",
        SnapshotMode::Initial,
        &[
            ("no_data", SnapshotMode::NoData),
            ("never", SnapshotMode::NoData),
            ("initial", SnapshotMode::Initial),
            ("initial_only", SnapshotMode::InitialOnly),
            ("always", SnapshotMode::Always),
            ("when_needed", SnapshotMode::WhenNeeded),
        ],
    )?;
    let slot_name = parse_slot_name(r)?;
    let publication_name = r.string_or("publication.name", "dbz_publication");
    let publication_autocreate = r.choice(
        "publication.autocreate.mode",
        AutocreateMode::AllTables,
        &[
            ("disabled", AutocreateMode::Disabled),
            ("all_tables", AutocreateMode::AllTables),
            ("filtered", AutocreateMode::Filtered),
            ("no_tables", AutocreateMode::NoTables),
        ],
    )?;
    let tables = parse_tables(r)?;
    if publication_autocreate == AutocreateMode::Filtered
        && tables.table_include.is_empty()
        && tables.schema_include.is_empty()
    {
        return Err(invalid("publication.autocreate.mode", "`filtered` needs table.include.list (e.g. table.include.list=public.outbox) to know which tables to publish"));
    }
    let skipped = parse_skipped(r.str("skipped.operations"))?;
    let status_interval = r.millis_or("status.update.interval.ms", 10_000)?;
    if status_interval.is_zero() {
        return Err(invalid("status.update.interval.ms", "must be greater than 0"));
    }
    // 0 (Connect flushes at every commit of offsets then) is taken as "as often as it moves": the
    // recorder writes at most once a second.
    let offset_flush_interval = r.millis_or("offset.flush.interval.ms", 60_000)?;
    Ok(Stream {
        snapshot_mode,
        offset_flush_interval,
        slot_name,
        publication_name,
        publication_autocreate,
        tables,
        skipped,
        status_interval,
        slot_drop_on_stop: r.bool_or("slot.drop.on.stop", false)?,
        publish_via_partition_root: r.bool_or("publish.via.partition.root", false)?,
        slot_failover: r.bool_or("slot.failover", false)?,
        offset_mismatch: parse_offset_mismatch(r)?,
        log_position_check: r.bool_or("internal.log.position.check.enable", true)?,
        // Connect's connector-level `offsets.storage.topic` (KIP-618) wins over the worker's.
        offset_topic: match r.str("offsets.storage.topic") {
            Some(t) => t.to_string(),
            None => r.string_or("offset.storage.topic", DEFAULT_OFFSET_TOPIC),
        },
        offset_partitions: match r.str("offset.storage.partitions") {
            None => 25,
            Some(v) => v
                .parse()
                .ok()
                .filter(|&n: &i32| n > 0)
                .ok_or_else(|| invalid("offset.storage.partitions", "is not a positive number of partitions"))?,
        },
        offset_replication: match r.str("offset.storage.replication.factor") {
            None => None,
            Some(v) => Some(v.parse().ok().filter(|&n: &i32| n > 0 || n == -1).ok_or_else(|| {
                invalid(
                    "offset.storage.replication.factor",
                    "is not a positive replication factor (or -1 for the broker's default)",
                )
            })?),
        },
    })
}

fn parse_slot_name(r: &mut Reader<'_>) -> Result<String, ConfigError> {
    let slot_name = r.string_or("slot.name", "debezium");
    if !slot_name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_') || slot_name.len() > 63 {
        return Err(invalid(
            "slot.name",
            "is not a valid slot name: use at most 63 lower-case letters, digits and underscores",
        ));
    }
    Ok(slot_name)
}

/// The table and schema filters, under their current and their 1.x names.
fn parse_tables(r: &mut Reader<'_>) -> Result<TableFilter, ConfigError> {
    Ok(TableFilter {
        table_include: r.regex_list_or_legacy("table.include.list", "table.whitelist")?,
        table_exclude: r.regex_list_or_legacy("table.exclude.list", "table.blacklist")?,
        schema_include: r.regex_list_or_legacy("schema.include.list", "schema.whitelist")?,
        schema_exclude: r.regex_list_or_legacy("schema.exclude.list", "schema.blacklist")?,
        none: false,
    })
}

fn parse_skipped(v: Option<&str>) -> Result<SkippedOps, ConfigError> {
    let mut s = SkippedOps::default();
    for op in v.unwrap_or_default().split(',').map(str::trim).filter(|o| !o.is_empty()) {
        match op {
            "c" => s.insert = true,
            "u" => s.update = true,
            "d" => s.delete = true,
            "t" | "none" => {}
            _ => return Err(invalid("skipped.operations", "lists an operation that is not one of c, u, d, t, none")),
        }
    }
    Ok(s)
}

/// The Kafka clients a Connect worker itself runs (its config and status stores, its group
/// membership): the worker's `bootstrap.servers` and security keys, config providers resolved.
pub fn worker_kafka(entries: &std::collections::BTreeMap<String, String>) -> Result<KafkaConfig, ConfigError> {
    let resolved = providers::resolve(&RawConfig { entries: entries.clone(), source_name: None })?;
    let mut r = Reader::new(&resolved.raw.entries);
    Ok(parse_kafka(&mut r, &resolved.raw)?.0)
}

/// The Kafka clients' settings, and the client keys pgoutbox does not pass on (with reasons).
fn parse_kafka(r: &mut Reader<'_>, raw: &RawConfig) -> Result<(KafkaConfig, Vec<IgnoredKey>), ConfigError> {
    let bootstrap_servers = r.required("bootstrap.servers", "the Kafka brokers, host:port[,host:port]")?;
    let clients = producer::collect(&raw.entries)?;
    producer::validate(&clients.producer, &bootstrap_servers)?;
    producer::validate(&clients.security, &bootstrap_servers)?;
    for k in raw.entries.keys() {
        let admin_security =
            ["admin.override.", "admin."].iter().find_map(|p| k.strip_prefix(p)).is_some_and(security::is_security_key);
        if k.starts_with("producer.") || security::is_security_key(k) || admin_security {
            r.consume(k);
        }
    }
    let creation = parse_topic_creation(r)?;
    let kafka = KafkaConfig {
        bootstrap_servers,
        producer_overrides: clients.producer,
        client_security: clients.security,
        topic_creation: if r.bool_or("topic.creation.enable", true)? { creation } else { None },
    };
    Ok((kafka, clients.ignored))
}

/// `delimiter`: `topic.delimiter`, as the router read and checked it.
fn parse_heartbeat(r: &mut Reader<'_>, topic_prefix: &str, delimiter: &str) -> Result<Option<Heartbeat>, ConfigError> {
    let mut interval = r.millis_or("heartbeat.interval.ms", 0)?;
    // Debezium 3.6: lsn.flush.mode=connector_and_driver with heartbeats and transaction metadata
    // both off turns heartbeats on, every 10 minutes, with this warning.
    let driver_flush = r.peek("lsn.flush.mode").is_some_and(|m| m.eq_ignore_ascii_case("connector_and_driver"));
    let metadata = r.peek("provide.transaction.metadata").is_some_and(|v| v.eq_ignore_ascii_case("true"));
    if interval.is_zero() && driver_flush && !metadata {
        interval = Duration::from_millis(600_000);
        r.warn("heartbeat.interval.ms was internally set to 600000 ms since lsn.flush.mode=CONNECTOR_AND_DRIVER requires periodic opportunities to propagate LSNs to Kafka. If this behavior is not desired, explicitly set heartbeat.interval.ms to more than 0 or enable provide.transaction.metadata.");
    }
    let prefix = match r.str("topic.heartbeat.prefix") {
        Some(p) => p.to_string(),
        None => r.string_or("heartbeat.topics.prefix", "__debezium-heartbeat"),
    };
    // AbstractTopicNamingStrategy.heartbeatTopic: the prefix and topic.prefix joined by topic.delimiter.
    let topic = r
        .str("topic.heartbeat.name")
        .map(str::to_string)
        .unwrap_or_else(|| format!("{prefix}{delimiter}{topic_prefix}"));
    let action_query = r.str("heartbeat.action.query").map(str::to_string);
    Ok((!interval.is_zero()).then_some(Heartbeat { interval, topic, action_query }))
}

fn parse_topic_creation(r: &mut Reader<'_>) -> Result<Option<TopicCreation>, ConfigError> {
    let partitions: Option<i32> = match r.str("topic.creation.default.partitions") {
        None => None,
        Some(v) => Some(v.parse().ok().filter(|&n: &i32| n > 0 || n == -1).ok_or_else(|| {
            invalid(
                "topic.creation.default.partitions",
                "is not a positive number of partitions (or -1 for the broker default)",
            )
        })?),
    };
    let rf: Option<i32> = match r.str("topic.creation.default.replication.factor") {
        None => None,
        Some(v) => Some(v.parse().ok().filter(|&n: &i32| n > 0 || n == -1).ok_or_else(|| {
            invalid(
                "topic.creation.default.replication.factor",
                "is not a positive replication factor (or -1 for the broker default)",
            )
        })?),
    };
    // Connect creates topics only when both defaults are given.
    Ok(match (partitions, rf) {
        (Some(p), Some(f)) => Some(TopicCreation { partitions: p, replication_factor: f }),
        _ => None,
    })
}

#[cfg(test)]
mod tests;
