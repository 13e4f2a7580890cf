//! Turning an outbox INSERT into a Kafka record, following `EventRouterDelegate.apply`:
//! the route-by column picks the topic (through `RegexRouter`), the key column becomes the key, the
//! payload column the value, the event id column the `id` header after Debezium's context headers.
//!
//! Column positions and schemas are resolved once per pgoutput Relation message (`RoutePlan`), so the
//! per-row work is slicing the tuple and writing bytes.

use std::collections::HashMap;
use std::sync::Arc;

use super::converter::{encode, header_value};
use super::schema::{self, parse_value, schema_for_column, FieldSchema, FieldValue, SchemaType};
use super::{topic, Header, OutboxRecord};
use crate::config::{Converter, Placement, RouterConfig};
use crate::pgoutput::{Oid, TupleData, Value};

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
}

#[derive(Debug, Clone)]
struct PlannedColumn {
    index: usize,
    name: String,
    schema: FieldSchema,
}

/// Where the router's columns sit in a table's tuples, or why the table cannot be routed.
#[derive(Debug, Clone)]
pub struct RoutePlan {
    table: String,
    plan: Result<Columns, RouteError>,
}

impl RoutePlan {
    /// Why rows of this table cannot be routed, if they cannot.
    pub fn problem(&self) -> Option<&RouteError> {
        self.plan.as_ref().err()
    }
}

#[derive(Debug, Clone)]
struct Columns {
    id: PlannedColumn,
    key: PlannedColumn,
    payload: PlannedColumn,
    route_by: PlannedColumn,
    /// `table.field.event.timestamp`, and the divisor that turns its value into milliseconds.
    timestamp: Option<(PlannedColumn, i64)>,
    /// `table.fields.additional.placement`, in config order (absent columns skipped under `ignore`).
    additional: Vec<(PlannedColumn, Placement, Arc<str>)>,
    /// `table.field.event.schema.version`: the envelope struct's schema version.
    schema_version: Option<PlannedColumn>,
    /// `<topic.prefix>.<schema>.<table>`: the envelope's schema name is this, the route-by value, `Value`.
    envelope_base: String,
}

pub struct Router {
    cfg: RouterConfig,
    key_converter: Converter,
    value_converter: Converter,
    /// Headers that start every record (the context headers), built once.
    leading_headers: Vec<Header>,
    id_header: Arc<str>,
    /// Route-by value -> topic, so the regex runs once per distinct aggregate type.
    topics: HashMap<String, Arc<str>>,
}

/// Above this many distinct route-by values the cache is cleared rather than grown without bound.
const TOPIC_CACHE_LIMIT: usize = 10_000;

impl Router {
    pub fn new(
        cfg: RouterConfig,
        key_converter: Converter,
        value_converter: Converter,
        context: Option<ContextHeaders>,
    ) -> Self {
        let leading_headers = context
            .map(|c| {
                [
                    ("__debezium.context.connectorLogicalName", c.connector_logical_name),
                    ("__debezium.context.taskId", c.task_id),
                    ("__debezium.context.connectorName", c.connector_name),
                    ("__debezium.context.runId", c.run_id),
                ]
                .into_iter()
                .map(|(n, v)| {
                    // Debezium adds them as Connect headers with a required STRING schema.
                    let v = FieldValue::String(bytes::Bytes::from(v));
                    Header {
                        name: Arc::from(n),
                        value: header_bytes(
                            cfg.header_converter,
                            &FieldSchema::new(SchemaType::String, false, None),
                            &v,
                        ),
                    }
                })
                .collect()
            })
            .unwrap_or_default();
        Router {
            cfg,
            key_converter,
            value_converter,
            leading_headers,
            id_header: Arc::from("id"),
            topics: HashMap::new(),
        }
    }

    pub fn plan(&self, rel: &RelationInfo) -> RoutePlan {
        let table = format!("{}.{}", rel.schema, rel.table);
        let find = |col: &str, option: &str| -> Result<PlannedColumn, RouteError> {
            let (index, c) = rel.columns.iter().enumerate().find(|(_, c)| c.name == col).ok_or_else(|| RouteError {
                what: format!("rows of `{table}`"),
                problem: format!("the table has no column `{col}`"),
                fix: format!("add the column or set transforms.<name>.{option} to the column that holds it"),
            })?;
            let schema = schema_for_column(c.type_oid, c.type_modifier, !c.not_null, self.cfg.type_modes).ok_or_else(|| RouteError {
                what: format!("rows of `{table}`"),
                problem: format!("column `{col}` has a type (oid {}) pgoutbox cannot route yet", c.type_oid),
                fix: "use text, varchar, uuid, jsonb, json, bytea, an integer or floating-point type, numeric(p,s), boolean, date, time, timetz, timestamp, timestamptz, interval, or a one-dimensional array of text, varchar, bpchar, uuid, boolean, an integer or floating-point type for this column"
                    .to_string(),
            })?;
            Ok(PlannedColumn { index, name: col.to_string(), schema })
        };
        let plan = (|| {
            let route_by = find(&self.cfg.route_by_field, "route.by.field")?;
            if route_by.schema.ty != SchemaType::String {
                return Err(RouteError {
                    what: format!("rows of `{table}`"),
                    problem: format!("route-by column `{}` is not a string column", route_by.name),
                    fix:
                        "the Event Router reads the topic from a text/varchar column; change its type or route.by.field"
                            .to_string(),
                });
            }
            let timestamp = match &self.cfg.field_event_timestamp {
                None => None,
                Some(col) => {
                    let c = find(col, "table.field.event.timestamp")?;
                    let divisor = match c.schema.name {
                        Some(schema::TIMESTAMP_MILLIS) => 1,
                        Some(schema::TIMESTAMP_MICROS) => 1_000,
                        Some(schema::TIMESTAMP_NANOS) => 1_000_000,
                        _ => {
                            return Err(RouteError {
                                what: format!("rows of `{table}`"),
                                problem: format!("timestamp column `{col}` is not a timestamp without time zone (Debezium accepts only io.debezium.time.Timestamp, MicroTimestamp or NanoTimestamp; timestamptz is a string)"),
                                fix: "use a `timestamp` column, or unset table.field.event.timestamp".to_string(),
                            })
                        }
                    };
                    Some((c, divisor))
                }
            };
            let mut additional = Vec::new();
            for a in &self.cfg.additional {
                if self.cfg.additional_missing_ignore && !rel.columns.iter().any(|c| c.name == a.column) {
                    continue;
                }
                let c = find(&a.column, "table.fields.additional.placement")?;
                if a.placement == Placement::Partition && (c.schema.ty != SchemaType::Int32 || is_java_date(&c.schema))
                {
                    return Err(RouteError {
                        what: format!("rows of `{table}`"),
                        problem: format!("partition column `{}` is not an integer (int4) column", a.column),
                        fix: "a partition placement needs an `integer` column holding the partition number".to_string(),
                    });
                }
                additional.push((c, a.placement, Arc::from(a.alias.as_str())));
            }
            let key = find(&self.cfg.field_event_key, "table.field.event.key")?;
            let payload = find(&self.cfg.field_event_payload, "table.field.event.payload")?;
            for (conv, col, which) in [(self.key_converter, &key, "key"), (self.value_converter, &payload, "value")] {
                if conv == Converter::Binary
                    && (col.schema.ty != SchemaType::Bytes || col.schema.form != schema::TextForm::Plain)
                {
                    return Err(RouteError {
                        what: format!("rows of `{table}`"),
                        problem: format!("{which}.converter is BinaryDataConverter but column `{}` is not bytea (Debezium fails the same way: only BYTES is supported)", col.name),
                        fix: format!("make `{}` a bytea column, or use another {which}.converter", col.name),
                    });
                }
            }
            Ok(Columns {
                id: find(&self.cfg.field_event_id, "table.field.event.id")?,
                key,
                payload,
                route_by,
                timestamp,
                additional,
                // Only the envelope struct carries a schema version: without one Debezium never reads it.
                schema_version: match &self.cfg.field_event_schema_version {
                    Some(col) if self.cfg.additional.iter().any(|a| a.placement == Placement::Envelope) => {
                        let c = find(col, "table.field.event.schema.version")?;
                        // Debezium reads it with getInt32, which a java.util.Date value fails.
                        if is_java_date(&c.schema) {
                            return Err(RouteError {
                                what: format!("rows of `{table}`"),
                                problem: format!("schema version column `{col}` is a {} under time.precision.mode=connect, not an integer", c.schema.name.unwrap_or_default()),
                                fix: "use an integer column for table.field.event.schema.version".to_string(),
                            });
                        }
                        Some(c)
                    }
                    _ => None,
                },
                envelope_base: format!("{}.{}.{}", self.cfg.topic_prefix, rel.schema, rel.table),
            })
        })();
        RoutePlan { table, plan }
    }

    /// The record for one inserted row.
    pub fn route(&mut self, plan: &RoutePlan, row: &TupleData, timestamp_ms: i64) -> Result<OutboxRecord, RouteError> {
        let cols = plan.plan.as_ref().map_err(Clone::clone)?;
        let table = &plan.table;
        let id = column_value(table, row, &cols.id, None)?;
        let id_text = header_value(&id);
        let event = || match &id_text {
            Some(t) => format!("event `{}` of `{table}`", String::from_utf8_lossy(t)),
            None => format!("an event of `{table}`"),
        };
        if id == FieldValue::Null {
            return Err(RouteError {
                what: event(),
                problem: format!("its event id column `{}` is NULL", cols.id.name),
                fix: "give every outbox row an id (consumers deduplicate by it)".to_string(),
            });
        }
        let route_by = column_value(table, row, &cols.route_by, Some(&event))?;
        let FieldValue::String(route_text) = &route_by else {
            return Err(RouteError {
                what: event(),
                problem: format!("its route-by column `{}` is NULL", cols.route_by.name),
                fix: "set the aggregate type on every outbox row; it names the topic".to_string(),
            });
        };
        let topic = self.topic(std::str::from_utf8(route_text).unwrap_or_default(), &event)?;
        let key_value = column_value(table, row, &cols.key, Some(&event))?;
        let key = encode(self.key_converter, &cols.key.schema, &key_value);
        let payload = column_value(table, row, &cols.payload, Some(&event))?;
        let tombstone = self.cfg.tombstone_on_empty_payload && is_blank(&payload);
        let envelope = cols.additional.iter().any(|(_, p, _)| *p == Placement::Envelope);
        let value = if tombstone {
            None
        } else if envelope || self.cfg.expand_json_payload {
            self.structured_value(table, row, cols, &payload, route_text, &event)?
        } else {
            encode(self.value_converter, &cols.payload.schema, &payload)
        };
        let mut headers = Vec::with_capacity(self.leading_headers.len() + 1 + cols.additional.len());
        headers.extend(self.leading_headers.iter().cloned());
        let id_header = match self.cfg.header_converter {
            None => id_text.clone(),
            converter => header_bytes(converter, &cols.id.schema, &id),
        };
        headers.push(Header { name: self.id_header.clone(), value: id_header });
        let mut partition = None;
        for (col, placement, alias) in &cols.additional {
            let v = column_value(table, row, col, Some(&event))?;
            match placement {
                Placement::Header => headers.push(Header {
                    name: alias.clone(),
                    value: header_bytes(self.cfg.header_converter, &col.schema, &v),
                }),
                Placement::Partition => {
                    partition = match v {
                        FieldValue::Int(p) => Some(p as i32),
                        _ => None,
                    }
                }
                Placement::Envelope => {}
            }
        }
        let timestamp_ms = match &cols.timestamp {
            Some((col, divisor)) => match column_value(table, row, col, Some(&event))? {
                // Java's long division truncates toward zero, as Rust's does.
                FieldValue::Int(t) => t / divisor,
                _ => timestamp_ms,
            },
            None => timestamp_ms,
        };
        Ok(OutboxRecord { topic, key, value, headers, partition, timestamp_ms })
    }

    /// The value with an expanded payload and/or an envelope struct (Debezium's steps 8 and 9).
    fn structured_value(
        &self,
        table: &str,
        row: &TupleData,
        cols: &Columns,
        payload: &FieldValue,
        route_text: &[u8],
        event: &dyn Fn() -> String,
    ) -> Result<Option<bytes::Bytes>, RouteError> {
        use super::connect::{Schema, Value as CValue};
        use super::value;
        let (mut schema, mut val) = if self.cfg.expand_json_payload {
            value::expand(&cols.payload.name, &cols.payload.schema, payload, self.cfg.json_null_behavior, &event())
        } else {
            (Some(value::schema_of(&cols.payload.schema)), value::value_of(payload))
        };
        let envelope: Vec<_> = cols.additional.iter().filter(|(_, p, _)| *p == Placement::Envelope).collect();
        if !envelope.is_empty() {
            let Some(payload_schema) = schema else {
                return Err(RouteError {
                    what: event(),
                    problem: "its payload is an empty JSON array, which has no schema to put in an envelope (Debezium 3.6 stops its task here)".into(),
                    fix: "give the event a non-empty payload, or drop the envelope placement".into(),
                });
            };
            let mut fields = vec![("payload".to_string(), payload_schema)];
            let mut values = vec![val];
            for (col, _, alias) in envelope {
                let v = column_value(table, row, col, Some(event))?;
                fields.push((alias.to_string(), value::schema_of(&col.schema)));
                values.push(value::value_of(&v));
            }
            let version = match &cols.schema_version {
                Some(col) => match column_value(table, row, col, Some(event))? {
                    FieldValue::Int(v) => Some(v as i32),
                    _ => None,
                },
                None => None,
            };
            let name = format!("{}.{}.Value", cols.envelope_base, String::from_utf8_lossy(route_text));
            schema = Some(Schema::Struct { name: Some(name), fields, optional: false, version, doc: None });
            val = CValue::Struct(values);
        }
        value::encode(self.value_converter, schema.as_ref(), &val).map_err(|problem| RouteError {
            what: event(),
            problem: format!("the value cannot be converted: {problem}"),
            fix: "check value.converter against the payload column and placements".into(),
        })
    }

    fn topic(&mut self, route_value: &str, event: &dyn Fn() -> String) -> Result<Arc<str>, RouteError> {
        if let Some(t) = self.topics.get(route_value) {
            return Ok(t.clone());
        }
        let t =
            topic::route(&self.cfg.route_topic_regex, &self.cfg.route_topic_replacement, route_value).map_err(|e| {
                RouteError {
                    what: event(),
                    problem: format!("route.topic.replacement cannot be applied: {e}"),
                    fix: "fix transforms.<name>.route.topic.replacement (Java replacement syntax: $1, ${name}, \\$)"
                        .to_string(),
                }
            })?;
        if self.topics.len() >= TOPIC_CACHE_LIMIT {
            self.topics.clear();
        }
        let t: Arc<str> = Arc::from(t);
        self.topics.insert(route_value.to_string(), t.clone());
        Ok(t)
    }
}

/// A Connect Date/Time/Timestamp column (time.precision.mode=connect): an INT32 or INT64 schema whose
/// Java value is a `java.util.Date`, which Debezium's `getInt32` cannot read.
fn is_java_date(s: &FieldSchema) -> bool {
    matches!(s.name, Some(schema::CONNECT_DATE | schema::CONNECT_TIME | schema::CONNECT_TIMESTAMP))
}

/// A header's bytes under `header.converter`: SimpleHeaderConverter's `Values.convertToString`, or
/// another converter's `fromConnectHeader` (which is its `fromConnectData`) with the column's schema.
fn header_bytes(converter: Option<Converter>, schema: &FieldSchema, v: &FieldValue) -> Option<bytes::Bytes> {
    match converter {
        None => header_value(v),
        Some(c) => encode(c, schema, v),
    }
}

/// Java's `toString().trim().isEmpty()`: trim drops every char <= U+0020.
fn is_blank(v: &FieldValue) -> bool {
    match v {
        FieldValue::Null => true,
        FieldValue::String(s) => s.iter().all(|&b| b <= b' '),
        _ => false,
    }
}

fn column_value(
    table: &str,
    row: &TupleData,
    col: &PlannedColumn,
    event: Option<&dyn Fn() -> String>,
) -> Result<FieldValue, RouteError> {
    let what = || event.map_or_else(|| format!("a row of `{table}`"), |e| e());
    match row.values.get(col.index) {
        Some(Value::Null) => Ok(FieldValue::Null),
        Some(Value::Text(t)) => parse_value(&col.schema, t).ok_or_else(|| RouteError {
            what: what(),
            problem: format!(
                "column `{}` holds a value that is not a valid {}",
                col.name,
                col.schema.ty.connect_name()
            ),
            fix: "check the column's type and contents".to_string(),
        }),
        Some(other) => Err(RouteError {
            what: what(),
            problem: format!("column `{}` arrived as {other:?}, not as text", col.name),
            fix: "this is unexpected for an INSERT; report it".to_string(),
        }),
        None => Err(RouteError {
            what: what(),
            problem: format!("the row has no value for column `{}` (the table changed?)", col.name),
            fix: "restart pgoutbox so it reads the table's current definition".to_string(),
        }),
    }
}

#[cfg(test)]
mod tests;
