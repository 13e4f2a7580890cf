//! Turning an outbox INSERT into a Kafka record, following `EventRouterDelegate.apply`:
//! the route-by column picks the topic (through `RegexRouter`), the key column becomes the key, the
//! payload column the value, the event id column the `id` header after Debezium's context headers.
//!
//! Column positions and types are resolved once per pgoutput Relation message (`RoutePlan`, see
//! `plan`), so the per-row work is slicing the tuple and writing bytes.

mod message;
mod plan;

pub use self::message::Message;

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;

use self::plan::{Columns, PlannedColumn, Planner};
use super::chain;
use super::options::{Placement, RouterConfig};
use super::OutboxRecord;
use crate::connect::record::{Data, Header, Record};
use crate::connect::{header, Converter, Schema, Value};
use crate::debezium::expand::expand_payload;
use crate::pgoutput::{Oid, TupleData};

/// A table as pgoutput describes it, plus NOT NULL from the catalog (pgoutput does not send it, and
/// Debezium's schemas mark NOT NULL columns as not optional).
#[derive(Debug, Clone)]
pub struct RelationInfo {
    pub oid: Oid,
    pub schema: String,
    pub table: String,
    pub columns: Vec<ColumnInfo>,
}

#[derive(Debug, Clone)]
pub struct ColumnInfo {
    pub name: String,
    pub type_oid: Oid,
    /// The type modifier pgoutput reports (a timestamp's precision; -1 when none).
    pub type_modifier: i32,
    pub not_null: bool,
    /// The column's `DEFAULT` as the catalog prints it (`pg_get_expr`), if it has one.
    pub default: Option<String>,
}

/// Debezium 3.2+ context headers, which come before `id` while `extended.headers.enabled=true`.
#[derive(Debug, Clone)]
pub struct ContextHeaders {
    pub connector_logical_name: String,
    pub task_id: String,
    pub connector_name: String,
    pub run_id: String,
}

/// An outbox row that cannot be published as configured. The relay stops on it, position unmoved.
#[derive(Debug, Clone, thiserror::Error)]
#[error("cannot route {what}: {problem}; {fix}")]
pub struct RouteError {
    pub what: String,
    pub problem: String,
    pub fix: String,
    /// Set when the schema registry, not the row, is the cause: the relay must wait for it or stop,
    /// never skip the row (`errors.tolerance=all` does not apply).
    pub registry: Option<Box<crate::connect::registry::RegistryError>>,
}

/// Where the router's columns sit in a table's tuples, or why the table cannot be routed.
#[derive(Debug, Clone)]
pub struct RoutePlan {
    table: String,
    /// The change event's topic before the router (`topic.prefix`, schema and table), which the
    /// transforms before it and their predicates see.
    topic: String,
    plan: Result<Columns, RouteError>,
}

impl RoutePlan {
    /// Why rows of this table cannot be routed, if they cannot.
    pub fn problem(&self) -> Option<&RouteError> {
        self.plan.as_ref().err()
    }
}

/// The converters a record's parts go through.
#[derive(Debug, Clone)]
pub struct Converters {
    pub key: Converter,
    pub value: Converter,
}

pub struct Router {
    cfg: RouterConfig,
    converters: Converters,
    /// Headers that start every record (the context headers), built once.
    leading_headers: Vec<Header>,
    id_header: Arc<str>,
    /// Route-by value -> topic, so the regex runs once per distinct aggregate type.
    topics: HashMap<String, Arc<str>>,
}

/// Above this many distinct route-by values the cache is cleared rather than grown without bound.
const TOPIC_CACHE_LIMIT: usize = 10_000;

/// One row being routed: the table, the tuple and how to name the event in errors.
struct Row<'a> {
    table: &'a str,
    tuple: &'a TupleData,
    event: &'a dyn Fn() -> String,
}

impl Row<'_> {
    fn error(&self, problem: String, fix: &str) -> RouteError {
        RouteError { registry: None, what: (self.event)(), problem, fix: fix.to_string() }
    }

    fn value(&self, col: &PlannedColumn) -> Result<Value, RouteError> {
        column_value(self.table, self.tuple, col, Some(self.event))
    }

    /// The column's value with its schema.
    fn data(&self, col: &PlannedColumn) -> Result<Data, RouteError> {
        Ok(Data::new(col.schema.clone(), self.value(col)?))
    }
}

impl Router {
    pub fn new(cfg: RouterConfig, converters: Converters, context: Option<ContextHeaders>) -> Self {
        // Debezium adds them as Connect headers with a required STRING schema.
        let string = Arc::new(Schema::primitive(crate::connect::Type::String, false));
        let leading_headers = context
            .map(|c| {
                [
                    ("__debezium.context.connectorLogicalName", c.connector_logical_name),
                    ("__debezium.context.taskId", c.task_id),
                    ("__debezium.context.connectorName", c.connector_name),
                    ("__debezium.context.runId", c.run_id),
                ]
                .into_iter()
                .map(|(n, v)| Header {
                    key: Arc::from(n),
                    data: Data::new(string.clone(), Value::String(Bytes::from(v))),
                })
                .collect()
            })
            .unwrap_or_default();
        Router { cfg, converters, leading_headers, id_header: Arc::from("id"), topics: HashMap::new() }
    }

    pub fn plan(&self, rel: &RelationInfo) -> RoutePlan {
        let table = format!("{}.{}", rel.schema, rel.table);
        let topic = self.cfg.data_change_topic(&rel.schema, &rel.table);
        let planner = Planner {
            cfg: &self.cfg,
            rel,
            table: &table,
            topic: &topic,
            key_converter: self.converters.key.clone(),
            value_converter: self.converters.value.clone(),
        };
        let plan = planner.columns();
        RoutePlan { table, topic, plan }
    }

    /// The converters the records are meant for (transforms and `encode` use them).
    pub fn converters(&self) -> crate::connect::record::Converters {
        crate::connect::record::Converters {
            key: self.converters.key.clone(),
            value: self.converters.value.clone(),
            header: self.cfg.header_converter.clone(),
        }
    }

    /// The record for one inserted row, through the transform chain and the converters; `None`
    /// when a transform drops it (`Filter`).
    pub fn route(
        &mut self,
        plan: &RoutePlan,
        tuple: &TupleData,
        timestamp_ms: i64,
    ) -> Result<Option<OutboxRecord>, RouteError> {
        let mut leading = self.leading_headers.clone();
        let origin = Origin::Table(&plan.table);
        if !self.cfg.chain.before.is_empty() || self.cfg.chain.router_gate.is_some() {
            let topic = plan.topic.clone();
            match self.before_router(topic, leading, origin, None)? {
                Some(headers) => leading = headers,
                None => return Ok(None),
            }
        }
        let record = self.connect_record(plan, tuple, timestamp_ms, leading)?;
        self.finish(record, origin)
    }

    /// The router's record through the transforms after it and the converters; `None` when a
    /// transform drops it. `origin` names where the event comes from, for errors.
    fn finish(&self, record: Record, origin: Origin<'_>) -> Result<Option<OutboxRecord>, RouteError> {
        // The event's description for errors, only built when one happens.
        let id_header = (!self.cfg.chain.after.is_empty())
            .then(|| record.headers.iter().rev().find(|h| &*h.key == "id").cloned())
            .flatten();
        let record = match chain::apply(&self.cfg.chain.after, record) {
            Ok(Some(r)) => r,
            Ok(None) => return Ok(None),
            Err((alias, e)) => {
                return Err(RouteError {
                    registry: None,
                    what: describe(origin, id_header.as_slice()),
                    problem: format!("transform `{alias}` failed: {e}"),
                    fix: format!("check transforms.{alias}.* against the records the Event Router produces"),
                })
            }
        };
        let encoded = self.converters().encode(&record).map_err(|e| RouteError {
            what: describe(origin, &record.headers),
            problem: format!("the record cannot be converted: {e}"),
            fix:
                "check key.converter, value.converter and header.converter against the record's key, value and headers"
                    .into(),
            registry: match e {
                crate::connect::ConvertError::Registry(r) => Some(Box::new(r)),
                _ => None,
            },
        })?;
        Ok(Some(OutboxRecord {
            topic: record.topic,
            key: encoded.key,
            value: encoded.value,
            headers: encoded.headers.into_iter().map(|(name, value)| super::Header { name, value }).collect(),
            partition: record.partition,
            timestamp_ms: record.timestamp_ms,
        }))
    }

    /// The transforms before the router, on what pgoutbox has of Debezium's change event: its
    /// topic and its headers; then the predicates of `decode` (a message's) and of the router,
    /// which must apply them. `None` when a transform drops the event.
    fn before_router(
        &self,
        topic: String,
        headers: Vec<Header>,
        origin: Origin<'_>,
        decode: Option<&chain::Gate>,
    ) -> Result<Option<Vec<Header>>, RouteError> {
        let change_event = Record {
            topic: Arc::from(topic),
            partition: None,
            key: Data::null(),
            // Not a tombstone: an INSERT's (or a message's) change event always has a value.
            value: Data { schema: None, value: Value::Struct(Vec::new()) },
            timestamp_ms: 0,
            headers,
        };
        let event = match chain::apply(&self.cfg.chain.before, change_event) {
            Ok(Some(r)) => r,
            Ok(None) => return Ok(None),
            Err((alias, e)) => {
                return Err(RouteError {
                    registry: None,
                    what: format!("an event of {origin}"),
                    problem: format!("transform `{alias}` failed: {e}"),
                    fix: format!("check transforms.{alias}.*"),
                })
            }
        };
        if let Some(gate) = decode.into_iter().chain(&self.cfg.chain.router_gate).find(|g| !g.admits(&event)) {
            let (problem, fix) = gate.refusal(&event.topic);
            return Err(RouteError { registry: None, what: format!("an event of {origin}"), problem, fix });
        }
        Ok(Some(event.headers))
    }

    /// The Event Router's record for one inserted row, as Connect data, its headers after
    /// `leading` (the context headers, as the transforms before the router left them).
    pub fn connect_record(
        &mut self,
        plan: &RoutePlan,
        tuple: &TupleData,
        timestamp_ms: i64,
        leading: Vec<Header>,
    ) -> Result<Record, RouteError> {
        let cols = plan.plan.as_ref().map_err(Clone::clone)?;
        let table = &plan.table;
        let id = column_value(table, tuple, &cols.id, None)?;
        let id_text = header::encode(Some(&cols.id.schema), &id);
        let event = || match &id_text {
            Some(t) => format!("event `{}` of `{table}`", String::from_utf8_lossy(t)),
            None => format!("an event of `{table}`"),
        };
        let row = Row { table, tuple, event: &event };
        if id == Value::Null {
            return Err(row.error(
                format!("its event id column `{}` is NULL", cols.id.name),
                "give every outbox row an id (consumers deduplicate by it)",
            ));
        }
        let route_by = row.value(&cols.route_by)?;
        let Value::String(route_text) = &route_by else {
            return Err(row.error(
                format!("its route-by column `{}` is NULL", cols.route_by.name),
                "set the aggregate type on every outbox row; it names the topic",
            ));
        };
        let topic = self.topic(std::str::from_utf8(route_text).unwrap_or_default(), &event)?;
        let key = row.data(&cols.key)?;
        let value = self.value(&row, cols, route_text)?;
        let mut headers = leading;
        headers.reserve(1 + cols.additional.len());
        headers.push(Header { key: self.id_header.clone(), data: Data::new(cols.id.schema.clone(), id) });
        let mut partition = None;
        for (col, placement, alias) in &cols.additional {
            match placement {
                Placement::Header => headers.push(Header { key: alias.clone(), data: row.data(col)? }),
                Placement::Partition => partition = partition_of(&row, col)?,
                Placement::Envelope => {}
            }
        }
        let timestamp_ms = match &cols.timestamp {
            Some((col, divisor)) => match row.value(col)? {
                // Java's long division truncates toward zero, as Rust's does.
                Value::Int(t) => t / divisor,
                _ => timestamp_ms,
            },
            None => timestamp_ms,
        };
        Ok(Record { topic, partition, key, value, timestamp_ms, headers })
    }

    /// The record value: the payload column as it is, or with an expanded payload and/or an
    /// envelope struct (Debezium's steps 8 and 9); a null without schema for a tombstone.
    fn value(&self, row: &Row<'_>, cols: &Columns, route_text: &[u8]) -> Result<Data, RouteError> {
        let payload = row.value(&cols.payload)?;
        if self.cfg.tombstone_on_empty_payload && is_blank(&payload) {
            return Ok(Data::null());
        }
        let envelope: Vec<_> = cols.additional.iter().filter(|(_, p, _)| *p == Placement::Envelope).collect();
        if envelope.is_empty() && !self.cfg.expand_json_payload {
            return Ok(Data::new(cols.payload.schema.clone(), payload));
        }
        let (schema, val) = if self.cfg.expand_json_payload {
            let event = (row.event)();
            let options = crate::debezium::Expansion {
                nulls: self.cfg.json_null_behavior,
                empty_arrays: self.cfg.json_empty_array_behavior,
            };
            expand_payload(&cols.payload.name, &cols.payload.column, &payload, options, &event)
        } else {
            (Some((*cols.payload.schema).clone()), payload)
        };
        if envelope.is_empty() {
            return Ok(Data { schema: schema.map(Arc::new), value: val });
        }
        let Some(payload_schema) = schema else {
            let (problem, fix) = NO_ENVELOPE_SCHEMA;
            return Err(row.error(problem.into(), fix));
        };
        let mut fields = vec![("payload".to_string(), payload_schema)];
        let mut values = vec![val];
        for (col, _, alias) in envelope {
            values.push(row.value(col)?);
            fields.push((alias.to_string(), (*col.schema).clone()));
        }
        let version = match &cols.schema_version {
            Some(col) => match row.value(col)? {
                Value::Int(v) => Some(i32::try_from(v).map_err(|_| {
                    row.error(
                        format!("its schema version `{v}` (column `{}`) does not fit a Java int", col.name),
                        "keep table.field.event.schema.version values within -2147483648..=2147483647",
                    )
                })?),
                _ => None,
            },
            None => None,
        };
        let name = format!("{}.{}.Value", cols.envelope_base, String::from_utf8_lossy(route_text));
        Ok(envelope_struct(name, fields, values, version))
    }

    fn topic(&mut self, route_value: &str, event: &dyn Fn() -> String) -> Result<Arc<str>, RouteError> {
        if let Some(t) = self.topics.get(route_value) {
            return Ok(t.clone());
        }
        let t = crate::connect::java::replace::route(
            &self.cfg.route_topic_regex,
            &self.cfg.route_topic_replacement,
            route_value,
        )
        .map_err(|e| RouteError {
            registry: None,
            what: event(),
            problem: format!("route.topic.replacement cannot be applied: {e}"),
            fix: "fix transforms.<name>.route.topic.replacement (Java replacement syntax: $1, ${name}, \\$)"
                .to_string(),
        })?;
        if self.topics.len() >= TOPIC_CACHE_LIMIT {
            self.topics.clear();
        }
        let t: Arc<str> = Arc::from(t);
        self.topics.insert(route_value.to_string(), t.clone());
        Ok(t)
    }
}

/// An envelope placement with a payload that has no schema (a top-level `[]` expanded): problem, fix.
const NO_ENVELOPE_SCHEMA: (&str, &str) = (
    "its payload is an empty JSON array, which has no schema to put in an envelope (Debezium 3.6 stops its task here)",
    "give the event a non-empty payload, or drop the envelope placement",
);

/// The Event Router's envelope struct (`payload`, then the `envelope` placements), named `name`,
/// with the schema version.
fn envelope_struct(name: String, fields: Vec<(String, Schema)>, values: Vec<Value>, version: Option<i32>) -> Data {
    let schema = Schema::Struct { name: Some(name), fields, optional: false, version, doc: None };
    Data::new(Arc::new(schema), Value::Struct(values))
}

/// Where an event comes from, named in errors (formatted only when one happens).
#[derive(Debug, Clone, Copy)]
enum Origin<'a> {
    Table(&'a str),
    /// The messages of a prefix.
    Messages(&'a str),
}

impl std::fmt::Display for Origin<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::Table(t) => write!(f, "`{t}`"),
            Origin::Messages(p) => write!(f, "the messages of prefix `{p}`"),
        }
    }
}

/// "event `<id>` of <origin>" from the record's `id` header, for errors.
fn describe(origin: Origin<'_>, headers: &[Header]) -> String {
    match headers.iter().rev().find(|h| &*h.key == "id").and_then(|h| header::encode(h.data.schema(), &h.data.value)) {
        Some(t) => format!("event `{}` of {origin}", String::from_utf8_lossy(&t)),
        None => format!("an event of {origin}"),
    }
}

/// A `partition` placement's partition: the column's int4 (planned), `None` for a null.
fn partition_of(row: &Row<'_>, col: &PlannedColumn) -> Result<Option<i32>, RouteError> {
    match row.value(col)? {
        Value::Int(p) => i32::try_from(p).map(Some).map_err(|_| {
            row.error(
                format!("its partition `{p}` (column `{}`) is not a partition number", col.name),
                "keep partition placements within int4",
            )
        }),
        _ => Ok(None),
    }
}

/// Java's `toString().trim().isEmpty()`: trim drops every char <= U+0020.
fn is_blank(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.iter().all(|&b| b <= b' '),
        _ => false,
    }
}

/// The schema's type as JsonConverter names it, for errors.
fn type_name(s: &Schema) -> &'static str {
    match s {
        Schema::Primitive { ty, .. } => ty.json_name(),
        Schema::Array { .. } => "array",
        Schema::Struct { .. } => "struct",
    }
}

fn column_value(
    table: &str,
    row: &TupleData,
    col: &PlannedColumn,
    event: Option<&dyn Fn() -> String>,
) -> Result<Value, RouteError> {
    use crate::pgoutput::Value as Wire;
    let what = || event.map_or_else(|| format!("a row of `{table}`"), |e| e());
    match row.values.get(col.index) {
        // Connect's `Struct.get`: a NULL under a schema with a default reads as the default.
        Some(Wire::Null) => Ok(col.schema.default_value().cloned().unwrap_or(Value::Null)),
        Some(Wire::Text(t)) => col.column.parse(t).ok_or_else(|| RouteError {
            registry: None,
            what: what(),
            problem: format!(
                "column `{}` holds a value that is not a valid {}",
                col.name,
                type_name(&col.column.schema)
            ),
            fix: "check the column's type and contents".to_string(),
        }),
        Some(other) => Err(RouteError {
            registry: None,
            what: what(),
            problem: format!("column `{}` arrived as {other:?}, not as text", col.name),
            fix: "this is unexpected for an INSERT; report it".to_string(),
        }),
        None => Err(RouteError {
            registry: None,
            what: what(),
            problem: format!("the row has no value for column `{}` (the table changed?)", col.name),
            fix: "restart pgoutbox so it reads the table's current definition".to_string(),
        }),
    }
}

#[cfg(test)]
mod tests;
