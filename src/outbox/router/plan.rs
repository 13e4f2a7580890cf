//! Resolving a table's columns for the router once per pgoutput Relation message: where each of the
//! router's columns sits in the tuple and how Debezium types it, or why the table cannot be routed.

use std::sync::Arc;

use crate::connect::{Converter, Type};
use crate::debezium::column::Unit;
use crate::debezium::{ColumnType, TextForm};
use crate::outbox::options::{Placement, RouterConfig};

use super::{RelationInfo, RouteError};

#[derive(Debug, Clone)]
pub(super) struct PlannedColumn {
    pub index: usize,
    pub name: String,
    pub column: ColumnType,
    /// The column's Connect schema, shared by every record that carries it; its default is what
    /// a NULL in this column is read as (Connect's `Struct.get`).
    pub schema: Arc<crate::connect::Schema>,
}

#[derive(Debug, Clone)]
pub(super) struct Columns {
    pub id: PlannedColumn,
    pub key: PlannedColumn,
    pub payload: PlannedColumn,
    pub route_by: PlannedColumn,
    /// `table.field.event.timestamp`, and the divisor that turns its value into milliseconds.
    pub timestamp: Option<(PlannedColumn, i64)>,
    /// `table.fields.additional.placement`, in config order (absent columns skipped under `ignore`).
    pub additional: Vec<(PlannedColumn, Placement, Arc<str>)>,
    /// `table.field.event.schema.version`: the envelope struct's schema version.
    pub schema_version: Option<PlannedColumn>,
    /// `<topic.prefix>.<schema>.<table>`: the envelope's schema name is this, the route-by value, `Value`.
    pub envelope_base: String,
}

const ROUTABLE_TYPES: &str = "use text, varchar, uuid, jsonb, json, bytea, an integer or floating-point type, numeric(p,s), boolean, date, time, timetz, timestamp, timestamptz, interval, or a one-dimensional array of text, varchar, bpchar, uuid, boolean, an integer or floating-point type for this column";

/// Plans the router's columns in `rel` under `cfg` and the record converters.
pub(super) struct Planner<'a> {
    pub cfg: &'a RouterConfig,
    pub rel: &'a RelationInfo,
    pub table: &'a str,
    /// The table's data-change topic, which the envelope's schema name is built from.
    pub topic: &'a str,
    pub key_converter: Converter,
    pub value_converter: Converter,
}

impl Planner<'_> {
    fn error(&self, problem: String, fix: impl Into<String>) -> RouteError {
        RouteError { registry: None, what: format!("rows of `{}`", self.table), problem, fix: fix.into() }
    }

    fn find(&self, col: &str, option: &str) -> Result<PlannedColumn, RouteError> {
        let (index, c) = self.rel.columns.iter().enumerate().find(|(_, c)| c.name == col).ok_or_else(|| {
            self.error(
                format!("the table has no column `{col}`"),
                format!("add the column or set transforms.<name>.{option} to the column that holds it"),
            )
        })?;
        let column =
            ColumnType::of(c.type_oid, c.type_modifier, !c.not_null, self.cfg.type_modes).ok_or_else(|| {
                self.error(
                    format!("column `{col}` has a type (oid {}) pgoutbox cannot route yet", c.type_oid),
                    ROUTABLE_TYPES,
                )
            })?;
        if let Some(key) = self.cfg.column_mappers.unapplied(&self.rel.schema, &self.rel.table, col) {
            return Err(self.error(
                format!("column `{col}` is selected by {key}, which pgoutbox does not apply (Debezium would mask, hash or truncate its values)"),
                format!("mask the value in the application before it is written to the outbox, or take the column out of {key}"),
            ));
        }
        let default =
            c.default.as_deref().and_then(|e| crate::debezium::default::column_default(c.type_oid, e, &column));
        let mut schema = column.schema.clone();
        let source_type =
            self.cfg.column_mappers.parameters(&self.rel.schema, &self.rel.table, col, c.type_oid, c.type_modifier);
        match &mut schema {
            crate::connect::Schema::Primitive { default: d, parameters, .. } => {
                *d = default.map(crate::connect::SchemaDefault);
                parameters.extend(source_type.into_iter().flatten());
            }
            _ if source_type.is_some() => tracing::warn!(
                table = %self.table,
                column = col,
                "column.propagate.source.type / datatype.propagate.source.type select this column, but pgoutbox adds the source type only to plain columns, not to an array or a numeric without a declared scale (Debezium adds it there too)"
            ),
            _ => {}
        }
        Ok(PlannedColumn { index, name: col.to_string(), column, schema: Arc::new(schema) })
    }

    pub fn columns(&self) -> Result<Columns, RouteError> {
        let cfg = self.cfg;
        let route_by = self.find(&cfg.route_by_field, "route.by.field")?;
        if route_by.column.schema.primitive_type() != Some(Type::String) {
            return Err(self.error(
                format!("route-by column `{}` is not a string column", route_by.name),
                "the Event Router reads the topic from a text/varchar column; change its type or route.by.field",
            ));
        }
        let timestamp = self.timestamp()?;
        let additional = self.additional()?;
        let key = self.find(&cfg.field_event_key, "table.field.event.key")?;
        let payload = self.find(&cfg.field_event_payload, "table.field.event.payload")?;
        for (conv, col, which) in [(&self.key_converter, &key, "key"), (&self.value_converter, &payload, "value")] {
            if *conv == Converter::Binary && col.column.form != TextForm::Plain(Type::Bytes) {
                return Err(self.error(
                    format!("{which}.converter is BinaryDataConverter but column `{}` is not bytea (Debezium fails the same way: only BYTES is supported)", col.name),
                    format!("make `{}` a bytea column, or use another {which}.converter", col.name),
                ));
            }
        }
        Ok(Columns {
            id: self.find(&cfg.field_event_id, "table.field.event.id")?,
            key,
            payload,
            route_by,
            timestamp,
            additional,
            schema_version: self.schema_version()?,
            envelope_base: envelope_base(cfg, self.topic),
        })
    }

    fn timestamp(&self) -> Result<Option<(PlannedColumn, i64)>, RouteError> {
        let Some(col) = &self.cfg.field_event_timestamp else { return Ok(None) };
        let c = self.find(col, "table.field.event.timestamp")?;
        let divisor = match c.column.form {
            TextForm::Timestamp(Unit::Millis) => 1,
            TextForm::Timestamp(Unit::Micros) => 1_000,
            TextForm::Timestamp(Unit::Nanos) => 1_000_000,
            _ => return Err(self.error(
                format!("timestamp column `{col}` is not a timestamp without time zone (Debezium accepts only io.debezium.time.Timestamp, MicroTimestamp or NanoTimestamp; timestamptz is a string)"),
                "use a `timestamp` column, or unset table.field.event.timestamp",
            )),
        };
        Ok(Some((c, divisor)))
    }

    fn additional(&self) -> Result<Vec<(PlannedColumn, Placement, Arc<str>)>, RouteError> {
        let mut out = Vec::new();
        for a in &self.cfg.additional {
            if self.cfg.additional_missing_ignore && !self.rel.columns.iter().any(|c| c.name == a.column) {
                continue;
            }
            let c = self.find(&a.column, "table.fields.additional.placement")?;
            let int32 = c.column.schema.primitive_type() == Some(Type::Int32) && !is_java_date(&c.column);
            if a.placement == Placement::Partition && !int32 {
                return Err(self.error(
                    format!("partition column `{}` is not an integer (int4) column", a.column),
                    "a partition placement needs an `integer` column holding the partition number",
                ));
            }
            out.push((c, a.placement, Arc::from(a.alias.as_str())));
        }
        Ok(out)
    }

    /// Only the envelope struct carries a schema version: without one Debezium never reads it.
    fn schema_version(&self) -> Result<Option<PlannedColumn>, RouteError> {
        let cfg = self.cfg;
        let Some(col) = &cfg.field_event_schema_version else { return Ok(None) };
        if !cfg.additional.iter().any(|a| a.placement == Placement::Envelope) {
            return Ok(None);
        }
        let c = self.find(col, "table.field.event.schema.version")?;
        // Debezium reads it with getInt32, which a java.util.Date value fails.
        if is_java_date(&c.column) {
            return Err(self.error(
                format!(
                    "schema version column `{col}` is a {} under time.precision.mode=connect, not an integer",
                    c.column.schema.name().unwrap_or_default()
                ),
                "use an integer column for table.field.event.schema.version",
            ));
        }
        Ok(Some(c))
    }
}

/// A Connect Date/Time/Timestamp column (time.precision.mode=connect): an INT32 or INT64 schema whose
/// Java value is a `java.util.Date`, which Debezium's `getInt32` cannot read.
fn is_java_date(c: &ColumnType) -> bool {
    matches!(c.form, TextForm::JavaDate | TextForm::JavaTime | TextForm::JavaTimestamp)
}

/// The first part of the envelope struct's schema name: the table's value schema name
/// (`<data-change topic>.Value`, adjusted by `schema.name.adjustment.mode`) up to its last dot, as
/// Debezium's router takes it.
fn envelope_base(cfg: &RouterConfig, topic: &str) -> String {
    let value = format!("{topic}.Value");
    let adjusted = cfg.schema_name_adjustment.adjust(&value);
    adjusted.strip_suffix(".Value").unwrap_or(&adjusted).to_string()
}
