//! The record value when it is more than the payload column's bytes: the expanded JSON payload
//! (`table.expand.json.payload`) and/or the envelope struct of `envelope` placements, serialised as
//! each converter would (JsonConverter through `connect`, StringConverter as Connect's
//! `Struct.toString()`).

use bytes::Bytes;

use super::connect::{self, Schema, Type, Value};
use super::expand::{expand_json_payload, ExpandError, JsonNullBehavior};
use super::schema::{FieldSchema, FieldValue, SchemaType, TextForm};
use crate::config::Converter;

pub fn schema_of(f: &FieldSchema) -> Schema {
    if f.ty == SchemaType::VariableDecimal {
        let required =
            |ty| Schema::Primitive { ty, optional: false, name: None, version: None, parameters: Vec::new() };
        return Schema::Struct {
            name: f.name.map(str::to_string),
            fields: vec![("scale".into(), required(Type::Int32)), ("value".into(), required(Type::Bytes))],
            optional: f.optional,
            version: f.version,
            doc: Some("Variable scaled decimal".into()),
        };
    }
    if let (SchemaType::Array, TextForm::Array { elem, elem_name }) = (f.ty, f.form) {
        let items = schema_of(&FieldSchema::new(elem, true, elem_name));
        return Schema::Array { items: Box::new(items), optional: f.optional };
    }
    let ty = match f.ty {
        SchemaType::String => Type::String,
        SchemaType::Bytes => Type::Bytes,
        SchemaType::Boolean => Type::Boolean,
        SchemaType::Int16 => Type::Int16,
        SchemaType::Int32 => Type::Int32,
        SchemaType::Int64 => Type::Int64,
        SchemaType::Float32 => Type::Float32,
        SchemaType::Float64 => Type::Float64,
        SchemaType::VariableDecimal | SchemaType::Array => unreachable!("handled above"),
    };
    let parameters = match f.form {
        TextForm::Decimal { precision, scale } => vec![
            ("scale".to_string(), scale.to_string()),
            ("connect.decimal.precision".to_string(), precision.to_string()),
        ],
        _ => Vec::new(),
    };
    Schema::Primitive { ty, optional: f.optional, name: f.name.map(str::to_string), version: f.version, parameters }
}

pub fn value_of(v: &FieldValue) -> Value {
    match v {
        FieldValue::Null => Value::Null,
        FieldValue::String(s) => Value::String(s.clone()),
        FieldValue::Bytes(b) => Value::Bytes(b.clone()),
        FieldValue::Boolean(b) => Value::Bool(*b),
        FieldValue::Int(i) => Value::Int(*i),
        FieldValue::JavaDate { millis, number } => Value::JavaDate { millis: *millis, number: *number },
        FieldValue::Array(items) => Value::Array(items.iter().map(value_of).collect()),
        FieldValue::Float32(f) => Value::Float(f64::from(*f)),
        FieldValue::Float64(f) => Value::Float(*f),
        FieldValue::VariableDecimal { scale, unscaled, .. } => {
            Value::Struct(vec![Value::Int(i64::from(*scale)), Value::Bytes(unscaled.clone())])
        }
        FieldValue::Decimal { unscaled, text } => {
            Value::Decimal { unscaled: unscaled.clone(), text: String::from_utf8_lossy(text).into_owned() }
        }
    }
}

/// The payload after `table.expand.json.payload`: `(schema, value)`, the schema `None` for a
/// top-level `[]` (Debezium publishes it with no schema). Where Debezium 3.6 would stop its task,
/// pgoutbox keeps the string and says so.
pub fn expand(
    field: &str,
    schema: &FieldSchema,
    payload: &FieldValue,
    nulls: JsonNullBehavior,
    event: &str,
) -> (Option<Schema>, Value) {
    let unexpanded = (Some(schema_of(schema)), value_of(payload));
    let FieldValue::String(text) = payload else {
        return unexpanded;
    };
    let Ok(text) = std::str::from_utf8(text) else { return unexpanded };
    if !(text.starts_with('{') || text.starts_with('[')) {
        return unexpanded;
    }
    match expand_json_payload(text, field, nulls) {
        Ok(e) => (Some(e.schema), e.value),
        Err(ExpandError::NoSchema) => (None, value_of(payload)),
        Err(e) if e.debezium_keeps_string() => {
            tracing::warn!(event, reason = %e, "JSON payload not expanded; published as a string, as Debezium does");
            unexpanded
        }
        Err(e) => {
            tracing::warn!(event, reason = %e, "JSON payload not expanded; published as a string (Debezium 3.6 stops its task on this payload)");
            unexpanded
        }
    }
}

/// Serialises the value with the converter. `schema` is `None` only for a schemaless expanded `[]`.
pub fn encode(converter: Converter, schema: Option<&Schema>, value: &Value) -> Result<Option<Bytes>, String> {
    match converter {
        Converter::Json { schemas } => connect::json_converter(schemas, schema, value).map_err(|e| e.to_string()),
        Converter::String => Ok(match (schema, value) {
            (_, Value::Null) => None,
            (Some(s), v) => Some(Bytes::from(struct_to_string(s, v))),
            (None, v) => Some(Bytes::from(to_java_string(v))),
        }),
        Converter::Binary => match value {
            Value::Null => Ok(None),
            Value::Bytes(b) => Ok(Some(b.clone())),
            _ => Err("BinaryDataConverter only supports BYTES".to_string()),
        },
    }
}

/// `Object.toString()` of Connect data: `Struct{a=1,b=x}` (null fields left out), lists as `[a, b]`.
fn to_java_string(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Int(i) => i.to_string(),
        Value::Float(f) => connect::java_float_to_string(*f, false),
        Value::String(s) => String::from_utf8_lossy(s).into_owned(),
        Value::Bytes(b) => format!("{b:?}"),
        Value::Decimal { text, .. } => text.clone(),
        Value::JavaDate { millis, .. } => super::schema::java_date_to_string(*millis),
        Value::Array(items) => format!("[{}]", items.iter().map(to_java_string).collect::<Vec<_>>().join(", ")),
        Value::Struct(fields) => format!(
            "Struct{{{}}}",
            fields.iter().filter(|f| !matches!(f, Value::Null)).map(to_java_string).collect::<Vec<_>>().join(",")
        ),
    }
}

/// Struct values need their field names for `toString`; this wraps a struct with its schema.
pub fn struct_to_string(schema: &Schema, value: &Value) -> String {
    match (schema, value) {
        (Schema::Struct { fields, .. }, Value::Struct(values)) => {
            let parts: Vec<String> = fields
                .iter()
                .zip(values)
                .filter(|(_, v)| !matches!(v, Value::Null))
                .map(|((name, s), v)| format!("{name}={}", struct_to_string(s, v)))
                .collect();
            format!("Struct{{{}}}", parts.join(","))
        }
        (Schema::Array { items, .. }, Value::Array(vs)) => {
            format!("[{}]", vs.iter().map(|v| struct_to_string(items, v)).collect::<Vec<_>>().join(", "))
        }
        (Schema::Primitive { ty: connect::Type::Float32, .. }, Value::Float(f)) => {
            connect::java_float_to_string(*f, true)
        }
        (_, v) => to_java_string(v),
    }
}
