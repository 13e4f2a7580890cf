//! The Outbox Event Router's options (`transforms.<alias>.*`) and the connector options its records
//! depend on, owned and parsed here. Errors name the key to fix.

use regex::Regex;

use crate::connect::{ConfigError, Converter, Reader};
use crate::debezium::{JsonEmptyArrayBehavior, JsonNullBehavior, TypeModes};

/// Router options that would change the records produced and are not implemented yet: refused
/// rather than ignored, so nobody gets different bytes silently.
pub const UNSUPPORTED: &[&str] = &[
    // Debezium's avro name sanitising of expanded JSON field names is not implemented.
    "field.name.adjustment.mode",
];

/// `table.op.invalid.behavior`: what an UPDATE or DELETE of the outbox table does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InvalidOpBehavior {
    Warn,
    Error,
    Fatal,
}

impl InvalidOpBehavior {
    /// What an UPDATE of an outbox row does: logged and dropped, or (`fatal`) the error that stops
    /// the connector.
    pub fn on_update(self) -> Result<(), String> {
        let what = "UPDATE of an outbox row: outbox tables are insert-only, the event was already published when the row was inserted";
        match self {
            InvalidOpBehavior::Warn => tracing::warn!("{what}; dropped (table.op.invalid.behavior=warn)"),
            InvalidOpBehavior::Error => tracing::error!("{what}; dropped (table.op.invalid.behavior=error)"),
            InvalidOpBehavior::Fatal => {
                return Err(format!(
                    "{what}; stopping because table.op.invalid.behavior=fatal (use warn or error to drop updates)"
                ))
            }
        }
        Ok(())
    }
}

/// Where `table.fields.additional.placement` puts a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    Header,
    Envelope,
    Partition,
}

/// One `column:placement[:alias]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdditionalField {
    pub column: String,
    pub placement: Placement,
    /// The header or envelope field name (the column's own name by default).
    pub alias: String,
}

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
    /// `table.field.additional.missing=ignore`: placements of absent columns are skipped.
    pub additional_missing_ignore: bool,
    pub field_event_timestamp: Option<String>,
    pub field_event_schema_version: Option<String>,
    /// `table.expand.json.payload`.
    pub expand_json_payload: bool,
    pub json_null_behavior: JsonNullBehavior,
    /// `table.json.payload.empty.array.behavior` (Debezium 3.7).
    pub json_empty_array_behavior: JsonEmptyArrayBehavior,
    /// `topic.prefix`: names the envelope struct's schema.
    pub topic_prefix: String,
    /// `schema.name.adjustment.mode`: how the envelope struct's schema name is adjusted.
    pub schema_name_adjustment: crate::debezium::schema_name::SchemaNameAdjustment,
    /// `topic.delimiter`: joins the topic prefix, schema and table of a change event's topic.
    pub topic_delimiter: String,
    /// `topic.naming.strategy`: how that topic is made a legal topic name.
    pub topic_naming: crate::debezium::schema_name::TopicNaming,
    /// The connector's type options: how the router's columns are typed.
    pub type_modes: TypeModes,
    /// `column.propagate.source.type`, `datatype.propagate.source.type`.
    pub column_mappers: crate::debezium::mappers::ColumnMappers,
    /// `header.converter`; `None` is SimpleHeaderConverter.
    pub header_converter: Option<Converter>,
    /// The transforms before and after the router.
    pub chain: super::chain::Chain,
}

impl RouterConfig {
    /// A table's data-change topic (`topic.prefix`, schema and table as Debezium's topic naming
    /// strategy joins them).
    pub fn data_change_topic(&self, schema: &str, table: &str) -> String {
        crate::debezium::schema_name::data_change_topic(
            &self.topic_prefix,
            schema,
            table,
            &self.topic_delimiter,
            self.topic_naming,
        )
    }

    /// The router's options under `transforms.<alias>.`, with `topic.prefix`, the type modes and
    /// the header converter given by the connector.
    pub fn parse(r: &mut Reader<'_>, alias: &str, topic_prefix: &str) -> Result<RouterConfig, ConfigError> {
        let p = |k: &str| format!("transforms.{alias}.{k}");
        for option in UNSUPPORTED {
            if r.str(&p(option)).is_some() {
                return Err(ConfigError::invalid(&p(option), "this Event Router option is not supported yet; remove it (pgoutbox would otherwise produce different records than Debezium)"));
            }
        }
        // Defined by Debezium but unused by its router since 1.2; accepted the same way.
        r.str(&p("table.field.event.type"));
        let regex_key = p("route.topic.regex");
        let regex_src = r.string_or(&regex_key, "(?<routedByValue>.*)");
        // Java's Matcher.matches() is a full match: anchor the pattern.
        let route_topic_regex = Regex::new(&format!("^(?:{regex_src})$")).map_err(|e| {
            ConfigError::invalid(
                &regex_key,
                format!("is not a valid regex: {}", crate::connect::config::regex_problem(&e)),
            )
        })?;
        let placement_key = p("table.fields.additional.placement");
        Ok(RouterConfig {
            route_by_field: r.string_or(&p("route.by.field"), "aggregatetype"),
            route_topic_regex,
            route_topic_replacement: r.string_or(&p("route.topic.replacement"), "outbox.event.${routedByValue}"),
            field_event_id: r.string_or(&p("table.field.event.id"), "id"),
            field_event_key: event_key(r, alias),
            field_event_payload: r.string_or(&p("table.field.event.payload"), "payload"),
            tombstone_on_empty_payload: r.bool_or(&p("route.tombstone.on.empty.payload"), false)?,
            op_invalid_behavior: legacy_choice(
                r,
                &p("table.op.invalid.behavior"),
                &p("debezium.op.invalid.behavior"),
                InvalidOpBehavior::Warn,
                &[
                    ("warn", InvalidOpBehavior::Warn),
                    ("error", InvalidOpBehavior::Error),
                    ("fatal", InvalidOpBehavior::Fatal),
                ],
            )?,
            additional: parse_placements(r.str(&placement_key), &placement_key)?,
            additional_missing_ignore: r.choice(
                &p("table.field.additional.missing"),
                false,
                &[("error", false), ("ignore", true)],
            )?,
            field_event_timestamp: r.str(&p("table.field.event.timestamp")).map(str::to_string),
            field_event_schema_version: r.str(&p("table.field.event.schema.version")).map(str::to_string),
            expand_json_payload: expand_json_payload(r, alias)?,
            json_null_behavior: r.choice(
                &p("table.json.payload.null.behavior"),
                JsonNullBehavior::Ignore,
                &[("ignore", JsonNullBehavior::Ignore), ("optional_bytes", JsonNullBehavior::OptionalBytes)],
            )?,
            json_empty_array_behavior: r.choice(
                &p("table.json.payload.empty.array.behavior"),
                JsonEmptyArrayBehavior::Ignore,
                &[
                    ("ignore", JsonEmptyArrayBehavior::Ignore),
                    ("optional_string", JsonEmptyArrayBehavior::OptionalString),
                ],
            )?,
            topic_prefix: topic_prefix.to_string(),
            schema_name_adjustment: schema_name_adjustment(r)?,
            topic_delimiter: topic_delimiter(r)?,
            topic_naming: topic_naming(r)?,
            type_modes: TypeModes::parse(r)?,
            column_mappers: crate::debezium::mappers::ColumnMappers::parse(r)?,
            header_converter: Converter::parse_header(r)?,
            chain: Default::default(),
        })
    }
}

/// `table.field.event.key`; without it, Debezium 1.x's `table.field.event.payload.id`, which 1.x
/// used as the key column when no key column was set.
fn event_key(r: &mut Reader<'_>, alias: &str) -> String {
    let key = format!("transforms.{alias}.table.field.event.key");
    let legacy = format!("transforms.{alias}.table.field.event.payload.id");
    if !r.has(&key) && r.has(&legacy) {
        let column = r.str(&legacy).unwrap_or_default().to_string();
        r.warn(format!(
            "`{legacy}` is Debezium 1.x's key column (removed in 2.0): its column is used as {key}, rename the key"
        ));
        return column;
    }
    r.string_or(&key, "aggregateid")
}

/// `table.expand.json.payload`, which Debezium before 1.8 named `debezium.expand.json.payload`.
fn expand_json_payload(r: &mut Reader<'_>, alias: &str) -> Result<bool, ConfigError> {
    let key = format!("transforms.{alias}.table.expand.json.payload");
    match r.str_or_legacy(&key, &format!("transforms.{alias}.debezium.expand.json.payload")) {
        None => Ok(false),
        Some(v) if v.eq_ignore_ascii_case("true") => Ok(true),
        Some(v) if v.eq_ignore_ascii_case("false") => Ok(false),
        Some(_) => Err(ConfigError::invalid(&key, "is not a boolean; use true or false")),
    }
}

/// A choice that Debezium 1.x named `legacy`.
fn legacy_choice<T: Copy>(
    r: &mut Reader<'_>,
    key: &str,
    legacy: &str,
    default: T,
    options: &[(&str, T)],
) -> Result<T, ConfigError> {
    if !r.has(key) && r.has(legacy) {
        let v = r.str_or_legacy(key, legacy).unwrap_or_default();
        return options.iter().find(|(n, _)| n.eq_ignore_ascii_case(v)).map(|(_, t)| *t).ok_or_else(|| {
            ConfigError::invalid(
                legacy,
                format!("is not one of {}", options.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")),
            )
        });
    }
    r.choice(key, default, options)
}

/// Parses `col:placement[:alias],...` as Debezium's AdditionalFieldsValidator accepts it.
fn parse_placements(v: Option<&str>, key: &str) -> Result<Vec<AdditionalField>, ConfigError> {
    let Some(v) = v else { return Ok(Vec::new()) };
    let mut out = Vec::new();
    for entry in v.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let parts: Vec<&str> = entry.split(':').map(str::trim).collect();
        if !(2..=3).contains(&parts.len()) || parts.iter().any(|p| p.is_empty()) {
            return Err(ConfigError::invalid(key, "has an entry that is not of the form column:placement[:alias]"));
        }
        let placement = match parts[1].to_ascii_lowercase().as_str() {
            "header" => Placement::Header,
            "envelope" => Placement::Envelope,
            "partition" => Placement::Partition,
            _ => {
                return Err(ConfigError::invalid(
                    key,
                    "has an entry whose placement is not one of header, envelope, partition",
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

/// The connector's `schema.name.adjustment.mode` (`none`, `avro`, `avro_unicode`; trimmed, any case).
fn schema_name_adjustment(
    r: &mut Reader<'_>,
) -> Result<crate::debezium::schema_name::SchemaNameAdjustment, ConfigError> {
    use crate::debezium::schema_name::SchemaNameAdjustment;
    const KEY: &str = "schema.name.adjustment.mode";
    match r.str(KEY) {
        None => Ok(SchemaNameAdjustment::None),
        Some(v) => SchemaNameAdjustment::parse(v)
            .ok_or_else(|| ConfigError::invalid(KEY, "is not one of none, avro, avro_unicode")),
    }
}

/// `topic.delimiter`, checked as Debezium checks a topic name (`[a-zA-Z0-9._-]+`).
fn topic_delimiter(r: &mut Reader<'_>) -> Result<String, ConfigError> {
    const KEY: &str = "topic.delimiter";
    let delimiter = r.string_or(KEY, ".");
    if !delimiter.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')) {
        return Err(ConfigError::invalid(
            KEY,
            "may hold only the characters of a Kafka topic name (letters, digits, `.`, `_` and `-`), as Debezium requires",
        ));
    }
    Ok(delimiter)
}

/// `topic.naming.strategy`: Debezium's schema or default strategy, or their Unicode variants;
/// another (a regex strategy, a class of one's own) names topics in ways pgoutbox does not.
fn topic_naming(r: &mut Reader<'_>) -> Result<crate::debezium::schema_name::TopicNaming, ConfigError> {
    use crate::debezium::schema_name::TopicNaming;
    const KEY: &str = "topic.naming.strategy";
    match r.str(KEY) {
        None => Ok(TopicNaming::Underscore),
        Some(class) => TopicNaming::parse(class).ok_or_else(|| {
            ConfigError::invalid(KEY, "is not supported: pgoutbox names change-event topics as io.debezium.schema.SchemaTopicNamingStrategy (the default), DefaultTopicNamingStrategy and their Unicode variants do; remove it or keep Kafka Connect for this connector")
        }),
    }
}
