//! The connector configuration an operator already runs on Kafka Connect, turned into a typed `Config`
//! once, at start-up. Every validation error names the key to fix. Keys pgoutbox accepts but does not
//! act on are returned as `ignored`, with the reason, so `main` can list them once.

pub mod env;
mod keys;
mod producer;
mod properties;
pub mod providers;
pub mod security;

use std::time::Duration;

use regex::Regex;

pub use keys::IgnoredKey;
pub use properties::{parse_json, parse_properties, RawConfig};
pub use security::ClientSettings;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {message}")]
    File { path: String, message: String },
    /// Holds only what precedes a `=` (nothing, if there is none): the argument may be a secret.
    #[error("a `--set` argument is not of the form key=value (the argument is not shown: it may hold a secret)")]
    Override(String),
    #[error("config key `{key}`: {message}")]
    Invalid { key: String, message: String },
    #[error("config key `{key}` is required: {hint}")]
    Missing { key: String, hint: String },
}

fn invalid(key: &str, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid { key: key.to_string(), message: message.into() }
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InvalidOpBehavior {
    Warn,
    Error,
    Fatal,
}

/// Kafka Connect converters pgoutbox reproduces byte for byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Converter {
    /// `org.apache.kafka.connect.storage.StringConverter`
    String,
    /// `org.apache.kafka.connect.json.JsonConverter` with `schemas.enable`.
    Json { schemas: bool },
    /// `io.debezium.converters.BinaryDataConverter`: BYTES values as they are (the Avro-in-outbox
    /// recipe with a bytea payload column).
    Binary,
}

/// Anchored include/exclude regexes over `schema.table`, as Debezium applies them.
#[derive(Debug, Clone, Default)]
pub struct TableFilter {
    pub table_include: Vec<Regex>,
    pub table_exclude: Vec<Regex>,
    pub schema_include: Vec<Regex>,
    pub schema_exclude: Vec<Regex>,
}

impl TableFilter {
    pub fn matches(&self, schema: &str, table: &str) -> bool {
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

#[derive(Debug, Clone, Default)]
pub struct SkippedOps {
    pub insert: bool,
    pub update: bool,
    pub delete: bool,
    pub truncate: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    Header,
    Envelope,
    Partition,
}

/// One entry of `table.fields.additional.placement`: `column:placement[:alias]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdditionalField {
    pub column: String,
    pub placement: Placement,
    /// The header or envelope field name; the column name when no alias is given.
    pub alias: String,
}

/// The Outbox Event Router's options (`transforms.<name>.*`), with Debezium's defaults.
#[derive(Debug, Clone)]
pub struct RouterConfig {
    pub route_by_field: String,
    pub route_topic_regex: Regex,
    pub route_topic_replacement: String,
    pub field_event_id: String,
    pub field_event_key: String,
    pub field_event_payload: String,
    pub tombstone_on_empty_payload: bool,
    pub op_invalid_behavior: InvalidOpBehavior,
    pub additional: Vec<AdditionalField>,
    /// `table.field.additional.missing=ignore`: skip listed columns the table lacks.
    pub additional_missing_ignore: bool,
    pub field_event_timestamp: Option<String>,
    pub field_event_schema_version: Option<String>,
    /// `table.expand.json.payload`, with `table.json.payload.null.behavior`.
    pub expand_json_payload: bool,
    pub json_null_behavior: crate::outbox::expand::JsonNullBehavior,
    /// `topic.prefix`: the envelope struct's schema name starts with it.
    pub topic_prefix: String,
    /// `decimal.handling.mode`, `binary.handling.mode`, `time.precision.mode` and
    /// `interval.handling.mode` (connector options): how routed columns of those types are written.
    pub type_modes: crate::outbox::TypeModes,
    /// `header.converter`: `None` for Connect's default SimpleHeaderConverter.
    pub header_converter: Option<Converter>,
}

/// Connect-style error tolerance: with `errors.tolerance=all`, an event that cannot be published as
/// configured goes to `errors.deadletterqueue.topic.name` (if set) with the error in its headers, and
/// the relay moves on. The default (`none`) stops the relay with the position before the event.
#[derive(Debug, Clone, Default)]
pub struct ErrorTolerance {
    pub tolerate: bool,
    pub dead_letter_topic: Option<String>,
}

/// `heartbeat.interval.ms` > 0: heartbeat records to `<topic.heartbeat.prefix>.<topic.prefix>`, and
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
    /// `offset.storage.topic`: where the relay records the slot it streams from (see
    /// `kafka::offsets`), so that a slot lost while the relay was stopped is noticed.
    pub offset_topic: String,
    pub heartbeat: Option<Heartbeat>,
    pub snapshot_mode: SnapshotMode,
    pub errors: ErrorTolerance,
    /// `pgoutbox.commit.lsn.header` (off by default, so records stay Debezium's): a header with the
    /// LSN of the event's commit record, which orders events across aggregates and restarts.
    pub commit_lsn_header: Option<String>,
    pub ignored: Vec<IgnoredKey>,
    /// Keys whose values keep a `${alias:...}` reference to a config provider the config does not
    /// declare (key, alias): used literally, as Connect would, and worth a warning.
    pub undeclared_providers: Vec<(String, String)>,
}

/// Reads keys off a `RawConfig`, remembering which were consumed so the rest can be reported.
struct Reader<'a> {
    raw: &'a RawConfig,
    used: std::collections::BTreeSet<String>,
}

impl<'a> Reader<'a> {
    fn str(&mut self, key: &str) -> Option<&'a str> {
        self.used.insert(key.to_string());
        self.raw.entries.get(key).map(|s| s.trim()).filter(|s| !s.is_empty())
    }

    fn string_or(&mut self, key: &str, default: &str) -> String {
        self.str(key).unwrap_or(default).to_string()
    }

    fn required(&mut self, key: &str, hint: &str) -> Result<String, ConfigError> {
        self.str(key)
            .map(str::to_string)
            .ok_or_else(|| ConfigError::Missing { key: key.to_string(), hint: hint.to_string() })
    }

    fn bool_or(&mut self, key: &str, default: bool) -> Result<bool, ConfigError> {
        match self.str(key) {
            None => Ok(default),
            Some(v) if v.eq_ignore_ascii_case("true") => Ok(true),
            Some(v) if v.eq_ignore_ascii_case("false") => Ok(false),
            Some(v) => Err(invalid(key, format!("`{v}` is not a boolean; use true or false"))),
        }
    }

    fn int_or<T: std::str::FromStr>(&mut self, key: &str, default: T, what: &str) -> Result<T, ConfigError> {
        match self.str(key) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|_| invalid(key, format!("`{v}` is not {what}"))),
        }
    }

    fn millis_or(&mut self, key: &str, default_ms: u64) -> Result<Duration, ConfigError> {
        Ok(Duration::from_millis(self.int_or(key, default_ms, "a number of milliseconds")?))
    }

    fn choice<T: Copy>(&mut self, key: &str, default: T, options: &[(&str, T)]) -> Result<T, ConfigError> {
        let Some(v) = self.str(key) else { return Ok(default) };
        options.iter().find(|(name, _)| name.eq_ignore_ascii_case(v)).map(|(_, t)| *t).ok_or_else(|| {
            let names: Vec<_> = options.iter().map(|(n, _)| *n).collect();
            invalid(key, format!("`{v}` is not one of {}", names.join(", ")))
        })
    }

    fn regex_list(&mut self, key: &str) -> Result<Vec<Regex>, ConfigError> {
        let Some(v) = self.str(key) else { return Ok(Vec::new()) };
        v.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            // Debezium matches these lists case-insensitively.
            .map(|p| {
                Regex::new(&format!("(?i)^(?:{p})$"))
                    .map_err(|e| invalid(key, format!("`{p}` is not a valid regex: {e}")))
            })
            .collect()
    }
}

pub const EVENT_ROUTER_CLASS: &str = "io.debezium.transforms.outbox.EventRouter";
pub const POSTGRES_CONNECTOR_CLASS: &str = "io.debezium.connector.postgresql.PostgresConnector";

impl Config {
    pub fn from_raw(raw: &RawConfig) -> Result<Config, ConfigError> {
        let resolved = providers::resolve(raw)?;
        let raw = &resolved.raw;
        let mut r = Reader { raw, used: Default::default() };
        for k in raw.entries.keys().filter(|k| providers::is_provider_key(k)) {
            r.used.insert(k.clone());
        }

        if let Some(class) = r.str("connector.class") {
            if class != POSTGRES_CONNECTOR_CLASS && class != "PostgresConnector" {
                return Err(invalid(
                    "connector.class",
                    format!("pgoutbox replaces {POSTGRES_CONNECTOR_CLASS}, not `{class}`"),
                ));
            }
        }
        let plugin = r.string_or("plugin.name", "pgoutput");
        if plugin != "pgoutput" {
            return Err(invalid("plugin.name", format!("`{plugin}` is not supported; pgoutbox decodes only `pgoutput` (set plugin.name=pgoutput and use a pgoutput slot)")));
        }

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
            connect_timeout: Duration::from_millis(r.int_or(
                "database.connect.timeout.ms",
                30_000u64,
                "a number of milliseconds",
            )?),
            tcp_keepalive: r.bool_or("database.tcpKeepAlive", true)?,
        };
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
        match r.str("lsn.flush.mode") {
            None | Some("connector") | Some("connector_and_driver") => {}
            Some(other) => return Err(invalid("lsn.flush.mode", format!("`{other}` is not supported: pgoutbox always confirms the acknowledged position (connector); it never leaves the slot to be advanced by hand"))),
        }
        if r.str("flush.lsn.source").is_some_and(|v| v.eq_ignore_ascii_case("false")) {
            return Err(invalid(
                "flush.lsn.source",
                "false (manual flushing) is not supported: pgoutbox always confirms the acknowledged position",
            ));
        }
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

        let topic_prefix = r.required("topic.prefix", "Debezium's logical server name, e.g. topic.prefix=dbserver1")?;
        let slot_name = r.string_or("slot.name", "debezium");
        if !slot_name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_') || slot_name.len() > 63
        {
            return Err(invalid(
                "slot.name",
                format!(
                    "`{slot_name}` is not a valid slot name: use at most 63 lower-case letters, digits and underscores"
                ),
            ));
        }
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
        let tables = TableFilter {
            table_include: r.regex_list("table.include.list")?,
            table_exclude: r.regex_list("table.exclude.list")?,
            schema_include: r.regex_list("schema.include.list")?,
            schema_exclude: r.regex_list("schema.exclude.list")?,
        };
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

        let mut router = parse_router(&mut r)?;
        router.topic_prefix = topic_prefix.clone();
        use crate::outbox::{BinaryHandling as B, DecimalHandling as D, IntervalHandling as I, TemporalPrecision as T};
        router.type_modes.decimals = r.choice(
            "decimal.handling.mode",
            D::Precise,
            &[("precise", D::Precise), ("double", D::Double), ("string", D::String)],
        )?;
        router.type_modes.binary = r.choice(
            "binary.handling.mode",
            B::Bytes,
            &[("bytes", B::Bytes), ("base64", B::Base64), ("base64-url-safe", B::Base64UrlSafe), ("hex", B::Hex)],
        )?;
        router.type_modes.temporal = r.choice(
            "time.precision.mode",
            T::Adaptive,
            &[
                ("adaptive", T::Adaptive),
                ("adaptive_time_microseconds", T::AdaptiveTimeMicroseconds),
                ("microseconds", T::Microseconds),
                ("nanoseconds", T::Nanoseconds),
                ("connect", T::Connect),
                ("isostring", T::IsoString),
            ],
        )?;
        router.type_modes.intervals =
            r.choice("interval.handling.mode", I::Numeric, &[("numeric", I::Numeric), ("string", I::String)])?;
        let key_converter = parse_converter(&mut r, "key")?;
        let value_converter = parse_converter(&mut r, "value")?;
        router.header_converter = match r.str("header.converter").map(str::to_string).as_deref() {
            None | Some("org.apache.kafka.connect.storage.SimpleHeaderConverter") => None,
            Some("org.apache.kafka.connect.json.JsonConverter") => {
                Some(Converter::Json { schemas: r.bool_or("header.converter.schemas.enable", true)? })
            }
            Some("org.apache.kafka.connect.storage.StringConverter") => Some(Converter::String),
            Some(h) => {
                return Err(invalid("header.converter", format!("`{h}` is not supported; use org.apache.kafka.connect.storage.SimpleHeaderConverter (Connect's default), org.apache.kafka.connect.json.JsonConverter or org.apache.kafka.connect.storage.StringConverter")));
            }
        };
        let extended_headers = r.bool_or("extended.headers.enabled", true)?;
        let bootstrap_servers = r.required("bootstrap.servers", "the Kafka brokers, host:port[,host:port]")?;
        let clients = producer::collect(&raw.entries)?;
        producer::validate(&clients.producer, &bootstrap_servers)?;
        producer::validate(&clients.security, &bootstrap_servers)?;
        let producer_ignored = clients.ignored;
        for k in raw.entries.keys() {
            let admin_security = ["admin.override.", "admin."]
                .iter()
                .find_map(|p| k.strip_prefix(p))
                .is_some_and(security::is_security_key);
            if k.starts_with("producer.") || security::is_security_key(k) || admin_security {
                r.used.insert(k.clone());
            }
        }
        let creation = parse_topic_creation(&mut r)?;
        let kafka = KafkaConfig {
            bootstrap_servers,
            producer_overrides: clients.producer,
            client_security: clients.security,
            topic_creation: if r.bool_or("topic.creation.enable", true)? { creation } else { None },
        };
        let shutdown_timeout = r.millis_or("task.shutdown.graceful.timeout.ms", 30_000)?;
        let connector_name = r.string_or("name", "pgoutbox");
        let slot_drop_on_stop = r.bool_or("slot.drop.on.stop", false)?;
        let publish_via_partition_root = r.bool_or("publish.via.partition.root", false)?;
        let slot_failover = r.bool_or("slot.failover", false)?;
        let offset_topic = r.string_or("offset.storage.topic", crate::kafka::offsets::DEFAULT_TOPIC);
        let errors = ErrorTolerance {
            tolerate: r.choice("errors.tolerance", false, &[("none", false), ("all", true)])?,
            dead_letter_topic: r.str("errors.deadletterqueue.topic.name").map(str::to_string),
        };
        let commit_lsn_header = match r.str("pgoutbox.commit.lsn.header") {
            None => None,
            Some(v) if v.eq_ignore_ascii_case("false") => None,
            Some(v) if v.eq_ignore_ascii_case("true") => Some("__pgoutbox.commit_lsn".to_string()),
            Some(name) => Some(name.to_string()),
        };
        r.str("errors.deadletterqueue.context.headers.enable");
        r.str("errors.log.enable");
        r.str("errors.log.include.messages");
        let heartbeat_interval = r.millis_or("heartbeat.interval.ms", 0)?;
        let heartbeat_prefix = match r.str("topic.heartbeat.prefix") {
            Some(p) => p.to_string(),
            None => r.string_or("heartbeat.topics.prefix", "__debezium-heartbeat"),
        };
        let heartbeat_topic = r
            .str("topic.heartbeat.name")
            .map(str::to_string)
            .unwrap_or_else(|| format!("{heartbeat_prefix}.{topic_prefix}"));
        let action_query = r.str("heartbeat.action.query").map(str::to_string);
        let heartbeat = (!heartbeat_interval.is_zero()).then_some(Heartbeat {
            interval: heartbeat_interval,
            topic: heartbeat_topic,
            action_query,
        });

        let mut ignored = keys::ignored(raw, &r.used);
        ignored.extend(producer_ignored);
        Ok(Config {
            connector_name,
            database,
            topic_prefix,
            slot_name,
            publication_name,
            publication_autocreate,
            tables,
            skipped,
            status_interval,
            router,
            key_converter,
            value_converter,
            extended_headers,
            kafka,
            shutdown_timeout,
            slot_drop_on_stop,
            publish_via_partition_root,
            slot_failover,
            offset_topic,
            heartbeat,
            snapshot_mode,
            errors,
            commit_lsn_header,
            ignored,
            undeclared_providers: resolved.undeclared,
        })
    }
}

fn parse_skipped(v: Option<&str>) -> Result<SkippedOps, ConfigError> {
    let mut s = SkippedOps { truncate: true, ..Default::default() };
    let Some(v) = v else { return Ok(s) };
    s.truncate = false;
    for op in v.split(',').map(str::trim).filter(|o| !o.is_empty()) {
        match op {
            "c" => s.insert = true,
            "u" => s.update = true,
            "d" => s.delete = true,
            "t" => s.truncate = true,
            "none" => {}
            other => return Err(invalid("skipped.operations", format!("`{other}` is not one of c, u, d, t, none"))),
        }
    }
    Ok(s)
}

fn parse_router(r: &mut Reader<'_>) -> Result<RouterConfig, ConfigError> {
    let hint = format!("pgoutbox relays the Outbox Event Router's output: set transforms=outbox and transforms.outbox.type={EVENT_ROUTER_CLASS}");
    let names = r.required("transforms", &hint)?;
    let names: Vec<&str> = names.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
    let [name] = names[..] else {
        return Err(invalid(
            "transforms",
            format!("pgoutbox supports exactly one transform, the Outbox Event Router; got `{}`", names.join(",")),
        ));
    };
    let type_key = format!("transforms.{name}.type");
    let class = r.required(&type_key, &hint)?;
    if class != EVENT_ROUTER_CLASS {
        return Err(invalid(&type_key, format!("`{class}` is not supported; {hint}")));
    }
    let p = |k: &str| format!("transforms.{name}.{k}");
    for option in keys::ROUTER_UNSUPPORTED {
        if r.str(&p(option)).is_some() {
            return Err(invalid(&p(option), "this Event Router option is not supported yet; remove it (pgoutbox would otherwise produce different records than Debezium)"));
        }
    }
    // Defined by Debezium but unused by its router since 1.2; accepted the same way.
    r.str(&p("table.field.event.type"));
    let regex_key = p("route.topic.regex");
    let regex_src = r.string_or(&regex_key, "(?<routedByValue>.*)");
    // Java's Matcher.matches() is a full match: anchor the pattern.
    let route_topic_regex = Regex::new(&format!("^(?:{regex_src})$"))
        .map_err(|e| invalid(&regex_key, format!("`{regex_src}` is not a valid regex: {e}")))?;
    Ok(RouterConfig {
        route_by_field: r.string_or(&p("route.by.field"), "aggregatetype"),
        route_topic_regex,
        route_topic_replacement: r.string_or(&p("route.topic.replacement"), "outbox.event.${routedByValue}"),
        field_event_id: r.string_or(&p("table.field.event.id"), "id"),
        field_event_key: r.string_or(&p("table.field.event.key"), "aggregateid"),
        field_event_payload: r.string_or(&p("table.field.event.payload"), "payload"),
        tombstone_on_empty_payload: r.bool_or(&p("route.tombstone.on.empty.payload"), false)?,
        op_invalid_behavior: r.choice(
            &p("table.op.invalid.behavior"),
            InvalidOpBehavior::Warn,
            &[
                ("warn", InvalidOpBehavior::Warn),
                ("error", InvalidOpBehavior::Error),
                ("fatal", InvalidOpBehavior::Fatal),
            ],
        )?,
        additional: parse_placements(
            r.str(&p("table.fields.additional.placement")),
            &p("table.fields.additional.placement"),
        )?,
        additional_missing_ignore: r.choice(
            &p("table.field.additional.missing"),
            false,
            &[("error", false), ("ignore", true)],
        )?,
        field_event_timestamp: r.str(&p("table.field.event.timestamp")).map(str::to_string),
        field_event_schema_version: r.str(&p("table.field.event.schema.version")).map(str::to_string),
        expand_json_payload: r.bool_or(&p("table.expand.json.payload"), false)?,
        json_null_behavior: r.choice(
            &p("table.json.payload.null.behavior"),
            crate::outbox::expand::JsonNullBehavior::Ignore,
            &[
                ("ignore", crate::outbox::expand::JsonNullBehavior::Ignore),
                ("optional_bytes", crate::outbox::expand::JsonNullBehavior::OptionalBytes),
            ],
        )?,
        topic_prefix: String::new(),
        type_modes: Default::default(),
        header_converter: None,
    })
}

/// Parses `col:placement[:alias],...` as Debezium's AdditionalFieldsValidator accepts it.
fn parse_placements(v: Option<&str>, key: &str) -> Result<Vec<AdditionalField>, ConfigError> {
    let Some(v) = v else { return Ok(Vec::new()) };
    let mut out = Vec::new();
    for entry in v.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let parts: Vec<&str> = entry.split(':').map(str::trim).collect();
        if !(2..=3).contains(&parts.len()) || parts.iter().any(|p| p.is_empty()) {
            return Err(invalid(key, format!("`{entry}` is not of the form column:placement[:alias]")));
        }
        let placement = match parts[1].to_ascii_lowercase().as_str() {
            "header" => Placement::Header,
            "envelope" => Placement::Envelope,
            "partition" => Placement::Partition,
            other => {
                return Err(invalid(
                    key,
                    format!("placement `{other}` in `{entry}` is not one of header, envelope, partition"),
                ))
            }
        };
        out.push(AdditionalField {
            column: parts[0].to_string(),
            placement,
            alias: parts.get(2).unwrap_or(&parts[0]).to_string(),
        });
    }
    Ok(out)
}

fn parse_converter(r: &mut Reader<'_>, which: &str) -> Result<Converter, ConfigError> {
    let key = format!("{which}.converter");
    let schemas_key = format!("{which}.converter.schemas.enable");
    // With no converter configured, behave like the Debezium container image: JsonConverter.
    let class = r.string_or(&key, "org.apache.kafka.connect.json.JsonConverter");
    let schemas = r.bool_or(&schemas_key, true)?;
    match class.as_str() {
        "org.apache.kafka.connect.storage.StringConverter" => Ok(Converter::String),
        "org.apache.kafka.connect.json.JsonConverter" => Ok(Converter::Json { schemas }),
        // Kafka's own ByteArrayConverter behaves the same: BYTES as they are, null as null, any other
        // schema refused.
        "io.debezium.converters.BinaryDataConverter"
        | "io.debezium.converters.ByteArrayConverter"
        | "org.apache.kafka.connect.converters.ByteArrayConverter" => Ok(Converter::Binary),
        other => Err(invalid(&key, format!("`{other}` is not supported; use org.apache.kafka.connect.storage.StringConverter, org.apache.kafka.connect.json.JsonConverter, io.debezium.converters.BinaryDataConverter or org.apache.kafka.connect.converters.ByteArrayConverter"))),
    }
}

fn parse_topic_creation(r: &mut Reader<'_>) -> Result<Option<TopicCreation>, ConfigError> {
    let partitions: Option<i32> = match r.str("topic.creation.default.partitions") {
        None => None,
        Some(v) => Some(v.parse().ok().filter(|&n: &i32| n > 0 || n == -1).ok_or_else(|| {
            invalid(
                "topic.creation.default.partitions",
                format!("`{v}` is not a positive number of partitions (or -1 for the broker default)"),
            )
        })?),
    };
    let rf: Option<i32> = match r.str("topic.creation.default.replication.factor") {
        None => None,
        Some(v) => Some(v.parse().ok().filter(|&n: &i32| n > 0 || n == -1).ok_or_else(|| {
            invalid(
                "topic.creation.default.replication.factor",
                format!("`{v}` is not a positive replication factor (or -1 for the broker default)"),
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
