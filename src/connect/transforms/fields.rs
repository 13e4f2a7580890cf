//! The struct transforms: `InsertField`, `ReplaceField`, `HoistField`, `ExtractField`,
//! `ValueToKey` and `SetSchemaMetadata`.

use std::sync::Arc;

use bytes::Bytes;

use super::structs::{require_struct, Basics};
use super::{Options, Part, TransformError};
use crate::connect::config::ConfigError;
use crate::connect::record::{Data, Record};
use crate::connect::{Schema, Type, Value};

/// A field InsertField adds: its name and whether it is optional (`name?`, the default) or
/// required (`name!`).
#[derive(Debug, Clone)]
struct Added {
    name: String,
    optional: bool,
}

impl Added {
    fn parse(spec: Option<String>) -> Option<Added> {
        let spec = spec?;
        Some(match (spec.strip_suffix('!'), spec.strip_suffix('?')) {
            (Some(n), _) => Added { name: n.to_string(), optional: false },
            (_, Some(n)) => Added { name: n.to_string(), optional: true },
            _ => Added { name: spec, optional: true },
        })
    }
}

const TIMESTAMP: &str = "org.apache.kafka.connect.data.Timestamp";

/// `topic.field`, `partition.field`, `timestamp.field`, `static.field` with `static.value`.
#[derive(Debug, Clone)]
pub struct InsertField {
    part: Part,
    topic: Option<Added>,
    partition: Option<Added>,
    timestamp: Option<Added>,
    static_field: Option<(Added, String)>,
}

impl InsertField {
    pub(super) fn parse(mut o: Options<'_, '_>, part: Part) -> Result<Self, ConfigError> {
        if o.str("offset.field").is_some() {
            return Err(o.invalid("offset.field", "a source record has no Kafka offset yet (Connect fails every record with `Only SinkRecord supported for [field insertion]`); remove it"));
        }
        let topic = Added::parse(o.str("topic.field"));
        let partition = Added::parse(o.str("partition.field"));
        let timestamp = Added::parse(o.str("timestamp.field"));
        let static_field = Added::parse(o.str("static.field")).map(|f| (f, o.str("static.value").unwrap_or_default()));
        Ok(InsertField { part, topic, partition, timestamp, static_field })
    }

    pub(super) fn apply(&self, r: &mut Record) -> Result<(), TransformError> {
        let data = self.part.of(r);
        if data.value == Value::Null {
            return Ok(());
        }
        let (fields, values) = require_struct(data.schema(), &data.value, "field insertion")?;
        let mut fields = fields.to_vec();
        let mut values = values.to_vec();
        let mut add = |f: &Added, schema: Schema, value: Value| -> Result<(), TransformError> {
            if value == Value::Null && !f.optional {
                return Err(TransformError(format!(
                    "Invalid value: null used for required field: \"{}\", schema type: {}",
                    f.name,
                    schema.java_type()
                )));
            }
            fields.push((f.name.clone(), schema));
            values.push(value);
            Ok(())
        };
        if let Some(f) = &self.topic {
            add(
                f,
                Schema::primitive(Type::String, f.optional),
                Value::String(Bytes::copy_from_slice(r.topic.as_bytes())),
            )?;
        }
        if let Some(f) = &self.partition {
            add(
                f,
                Schema::primitive(Type::Int32, f.optional),
                r.partition.map_or(Value::Null, |p| Value::Int(i64::from(p))),
            )?;
        }
        if let Some(f) = &self.timestamp {
            let schema = Schema::named(Type::Int64, f.optional, TIMESTAMP);
            add(f, schema, Value::JavaDate { millis: r.timestamp_ms, number: r.timestamp_ms })?;
        }
        if let Some((f, v)) = &self.static_field {
            add(f, Schema::primitive(Type::String, f.optional), Value::String(Bytes::copy_from_slice(v.as_bytes())))?;
        }
        let schema = Basics::of(data.schema().unwrap_or(&Schema::optional(Type::String))).with(fields);
        *self.part.of_mut(r) = Data::new(Arc::new(schema), Value::Struct(values));
        Ok(())
    }
}

/// `exclude`, `include` (and their old names `blacklist`, `whitelist`) and `renames` (`old:new`).
#[derive(Debug, Clone)]
pub struct ReplaceField {
    part: Part,
    exclude: Vec<String>,
    include: Vec<String>,
    renames: Vec<(String, String)>,
}

impl ReplaceField {
    pub(super) fn parse(mut o: Options<'_, '_>, part: Part) -> Result<Self, ConfigError> {
        let mut exclude = o.list("exclude");
        exclude.extend(o.list("blacklist"));
        let mut include = o.list("include");
        include.extend(o.list("whitelist"));
        let mut renames = Vec::new();
        for pair in o.list("renames") {
            let Some((from, to)) =
                pair.split_once(':').filter(|(a, b)| !a.is_empty() && !b.is_empty() && !b.contains(':'))
            else {
                return Err(o.invalid("renames", "has an entry that is not of the form old:new"));
            };
            renames.push((from.to_string(), to.to_string()));
        }
        Ok(ReplaceField { part, exclude, include, renames })
    }

    fn kept(&self, name: &str) -> bool {
        !self.exclude.iter().any(|e| e == name) && (self.include.is_empty() || self.include.iter().any(|i| i == name))
    }

    fn renamed(&self, name: &str) -> String {
        self.renames.iter().find(|(f, _)| f == name).map_or_else(|| name.to_string(), |(_, t)| t.clone())
    }

    pub(super) fn apply(&self, r: &mut Record) -> Result<(), TransformError> {
        let data = self.part.of(r);
        if data.value == Value::Null {
            return Ok(());
        }
        let (fields, values) = require_struct(data.schema(), &data.value, "field replacement")?;
        let keep: Vec<usize> = (0..fields.len()).filter(|i| self.kept(&fields[*i].0)).collect();
        let schema = Basics::of(data.schema().unwrap_or(&Schema::optional(Type::String)))
            .with(keep.iter().map(|i| (self.renamed(&fields[*i].0), fields[*i].1.clone())).collect());
        let value = Value::Struct(keep.iter().map(|i| values[*i].clone()).collect());
        *self.part.of_mut(r) = Data::new(Arc::new(schema), value);
        Ok(())
    }
}

/// `field`: the whole key or value becomes the one field of a new struct.
#[derive(Debug, Clone)]
pub struct HoistField {
    part: Part,
    field: String,
}

impl HoistField {
    pub(super) fn parse(mut o: Options<'_, '_>, part: Part) -> Result<Self, ConfigError> {
        Ok(HoistField { part, field: o.required("field", "the name of the field that will hold the data")? })
    }

    pub(super) fn apply(&self, r: &mut Record) {
        let data = self.part.of_mut(r);
        let Some(schema) = data.schema.take() else {
            // Schemaless: a map of one entry, which pgoutbox models as a struct without a schema.
            return;
        };
        let value = std::mem::replace(&mut data.value, Value::Null);
        let hoisted = Schema::Struct {
            name: None,
            fields: vec![(self.field.clone(), (*schema).clone())],
            optional: false,
            version: None,
            doc: None,
        };
        *data = Data::new(Arc::new(hoisted), Value::Struct(vec![value]));
    }
}

/// `field`: the key or value becomes that field of its struct.
#[derive(Debug, Clone)]
pub struct ExtractField {
    part: Part,
    field: String,
}

impl ExtractField {
    pub(super) fn parse(mut o: Options<'_, '_>, part: Part) -> Result<Self, ConfigError> {
        if o.str("field.syntax.version").is_some_and(|v| !v.eq_ignore_ascii_case("v1")) {
            return Err(o.invalid("field.syntax.version", "only V1 (a top-level field name) is supported"));
        }
        Ok(ExtractField { part, field: o.required("field", "the name of the field to extract")? })
    }

    pub(super) fn apply(&self, r: &mut Record) -> Result<(), TransformError> {
        let data = self.part.of(r);
        let Some(Schema::Struct { fields, .. }) = data.schema() else {
            let (_, _) = require_struct(data.schema(), &data.value, "field extraction")?;
            return Ok(());
        };
        let i = fields
            .iter()
            .position(|(f, _)| *f == self.field)
            .ok_or_else(|| TransformError(format!("Unknown field: {}", self.field)))?;
        let schema = Arc::new(fields[i].1.clone());
        let value = match &data.value {
            Value::Struct(values) => values[i].clone(),
            Value::Null => Value::Null,
            v => {
                return Err(TransformError(format!(
                    "Only Struct objects supported for [field extraction], found: {}",
                    super::structs::class_name(v)
                )))
            }
        };
        *self.part.of_mut(r) = Data::new(schema, value);
        Ok(())
    }
}

/// `fields`: the key becomes a struct of these fields of the value.
#[derive(Debug, Clone)]
pub struct ValueToKey {
    fields: Vec<String>,
}

impl ValueToKey {
    pub(super) fn parse(mut o: Options<'_, '_>) -> Result<Self, ConfigError> {
        Ok(ValueToKey { fields: o.required_list("fields", "the value's fields that make the key")? })
    }

    pub(super) fn apply(&self, r: &mut Record) -> Result<(), TransformError> {
        let (fields, values) = require_struct(r.value.schema(), &r.value.value, "copying fields from value to key")?;
        let mut key_fields = Vec::with_capacity(self.fields.len());
        let mut key_values = Vec::with_capacity(self.fields.len());
        for name in &self.fields {
            let i = fields
                .iter()
                .position(|(f, _)| f == name)
                .ok_or_else(|| TransformError(format!("Field does not exist: {name}")))?;
            key_fields.push(fields[i].clone());
            key_values.push(values[i].clone());
        }
        let schema = Schema::Struct { name: None, fields: key_fields, optional: false, version: None, doc: None };
        r.key = Data::new(Arc::new(schema), Value::Struct(key_values));
        Ok(())
    }
}

/// `schema.name` and `schema.version`: the key's or value's schema renamed or re-versioned.
#[derive(Debug, Clone)]
pub struct SetSchemaMetadata {
    part: Part,
    name: Option<String>,
    version: Option<i32>,
}

impl SetSchemaMetadata {
    pub(super) fn parse(mut o: Options<'_, '_>, part: Part) -> Result<Self, ConfigError> {
        let name = o.str("schema.name");
        let version = match o.str("schema.version") {
            None => None,
            Some(v) => Some(v.parse().map_err(|_| o.invalid("schema.version", "is not an integer"))?),
        };
        if name.is_none() && version.is_none() {
            return Err(o.invalid("schema.name", "Neither schema name nor version configured"));
        }
        Ok(SetSchemaMetadata { part, name, version })
    }

    pub(super) fn apply(&self, r: &mut Record) {
        let data = self.part.of_mut(r);
        let Some(schema) = &data.schema else { return };
        let mut schema = (**schema).clone();
        match &mut schema {
            Schema::Primitive { name, version, .. } | Schema::Struct { name, version, .. } => {
                if let Some(n) = &self.name {
                    *name = Some(n.clone());
                }
                if let Some(v) = self.version {
                    *version = Some(v);
                }
            }
            // An array has neither in pgoutbox's model; Connect would set them.
            Schema::Array { .. } => return,
        }
        data.schema = Some(Arc::new(schema));
    }
}
