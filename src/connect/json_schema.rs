//! Confluent's `io.confluent.connect.json.JsonSchemaConverter`: the JSON Schema a Connect schema
//! registers as (`JsonSchemaData.fromConnectSchema`) and the JSON body a value is written as
//! (`fromConnectData`), for the schemas the Event Router writes.
//!
//! The schema is an everit `Schema` printed by everit's `ToStringVisitor` and re-read and written
//! compactly by Jackson (`JsonSchema.canonicalString`), so its member order is everit's:
//! - a number or string: `type` first, then `title`, `description`, then the Connect properties;
//!   a boolean: `type` last;
//! - an object (a struct): `type`, `additionalProperties` (only when false), `title`,
//!   `description`, the Connect properties, then `properties` in the order of a Java `HashMap` of
//!   the field names (`connect.index` keeps the field order);
//! - an array: `type`, the Connect properties, then `items`;
//! - an optional schema: `{"connect.index":i,"oneOf":[{"type":"null"},<the schema>]}`, the index
//!   on the outside;
//! - the Connect properties (an everit copy of a `HashMap`, in that order for every subset, on
//!   Java 17 and 21): `connect.index`, `connect.version`, `connect.type`, `connect.parameters`
//!   (itself a `HashMap` printed by org.json's `JSONObject`).
//!
//! The body is Jackson's compact JSON of the value: as JsonConverter's without schemas, except a
//! Decimal under `decimal.format=NUMERIC` (a number) and a null top-level value under an optional
//! schema (the text `null`, with the schema's id before it; see the registry converter).

use super::avro::DECIMAL;
use super::java::hashmap::{self, Made};
use super::json::{write_string, write_value_as, Decimals};
use super::{ConvertError, Schema, Type, Value};

/// The JsonSchemaConverter options that change bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Options {
    /// `decimal.format` (default `BASE64`; `NUMERIC`: a Decimal as a JSON number).
    pub decimals: Decimals,
    /// `object.additional.properties` (default true); false adds `"additionalProperties":false`.
    pub additional_properties: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options { decimals: Decimals::Base64, additional_properties: true }
    }
}

/// JsonSchemaData's own parameter namespace: left out of `connect.parameters`.
const NAMESPACE: &str = "io.confluent.connect.json";

/// The schema text to register, and its `title` (what RecordNameStrategy names the subject after;
/// none for an optional or unnamed top-level schema).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registered {
    pub text: String,
    pub title: Option<String>,
}

/// The JSON Schema of a Connect schema, as JsonSchemaConverter registers it.
pub fn schema_of(schema: &Schema, options: Options) -> Result<Registered, ConvertError> {
    let mut out = Vec::with_capacity(256);
    node(&mut out, schema, None, options)?;
    let title = if schema.is_optional() { None } else { schema.name().map(str::to_string) };
    Ok(Registered { text: String::from_utf8(out).expect("the schema text is UTF-8"), title })
}

/// The members of one JSON object, commas between them.
struct Members<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
}

impl<'a> Members<'a> {
    fn open(out: &'a mut Vec<u8>) -> Members<'a> {
        out.push(b'{');
        Members { out, first: true }
    }

    /// `"name":` (the value is the caller's to write).
    fn key(&mut self, name: &str) -> &mut Vec<u8> {
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
        write_string(self.out, name.as_bytes());
        self.out.push(b':');
        self.out
    }

    fn string(&mut self, name: &str, value: &str) {
        write_string(self.key(name), value.as_bytes());
    }

    fn raw(&mut self, name: &str, value: &str) {
        self.key(name).extend_from_slice(value.as_bytes());
    }

    fn close(self) {
        self.out.push(b'}');
    }
}

/// The Connect properties everit prints after `title` and `description`.
#[derive(Default)]
struct Connect<'s> {
    index: Option<usize>,
    version: Option<i32>,
    ty: Option<&'static str>,
    parameters: &'s [(String, String)],
}

impl Connect<'_> {
    fn write(&self, m: &mut Members<'_>) {
        if let Some(i) = self.index {
            m.raw("connect.index", &i.to_string());
        }
        if let Some(v) = self.version {
            m.raw("connect.version", &v.to_string());
        }
        if let Some(t) = self.ty {
            m.string("connect.type", t);
        }
        let kept: Vec<(String, &str)> = self
            .parameters
            .iter()
            .filter(|(k, _)| !k.starts_with(NAMESPACE))
            .map(|(k, v)| (k.clone(), v.as_str()))
            .collect();
        if !kept.is_empty() {
            // `Collectors.toMap` (a HashMap), then org.json's `new JSONObject(map)`, a HashMap of
            // the map's size filled in the first one's order.
            let n = kept.len();
            let ordered = hashmap::order(hashmap::order(kept, Made::Default), Made::WithCapacity(n));
            let out = m.key("connect.parameters");
            let mut params = Members::open(out);
            for (k, v) in &ordered {
                params.string(k, v);
            }
            params.close();
        }
    }
}

/// `rawSchemaFromConnectSchema(schema, index)`.
fn node(out: &mut Vec<u8>, schema: &Schema, index: Option<usize>, o: Options) -> Result<(), ConvertError> {
    if !schema.is_optional() {
        return required(out, schema, index, o);
    }
    // `oneOf` null or the schema; the field's index goes on the outside.
    let mut m = Members::open(out);
    if let Some(i) = index {
        m.raw("connect.index", &i.to_string());
    }
    let out = m.key("oneOf");
    out.extend_from_slice(b"[{\"type\":\"null\"},");
    required(out, schema, None, o)?;
    out.push(b']');
    m.close();
    Ok(())
}

/// The schema as if it were required.
fn required(out: &mut Vec<u8>, schema: &Schema, index: Option<usize>, o: Options) -> Result<(), ConvertError> {
    match schema {
        Schema::Primitive { ty, name, version, parameters, .. } => {
            if let Some((k, _)) = parameters.iter().find(|(k, _)| {
                k.starts_with("io.confluent.connect.json.") || k.starts_with("org.apache.kafka.connect.data.Enum")
            }) {
                return Err(ConvertError::JsonSchema(format!(
                    "the schema parameter `{k}` (a JSON Schema enum or id) is not supported by pgoutbox's JsonSchemaConverter"
                )));
            }
            let (json_type, connect_type) = match ty {
                Type::Int8 => (Some("integer"), Some("int8")),
                Type::Int16 => (Some("integer"), Some("int16")),
                Type::Int32 => (Some("integer"), Some("int32")),
                Type::Int64 => (Some("integer"), Some("int64")),
                Type::Float32 => (Some("number"), Some("float32")),
                Type::Float64 => (Some("number"), Some("float64")),
                Type::Boolean => (None, None),
                Type::String => (Some("string"), None),
                Type::Bytes if o.decimals == Decimals::Numeric && name.as_deref() == Some(DECIMAL) => {
                    (Some("number"), Some("bytes"))
                }
                Type::Bytes => (Some("string"), Some("bytes")),
            };
            let mut m = Members::open(out);
            if let Some(t) = json_type {
                m.string("type", t);
            }
            if let Some(n) = name {
                m.string("title", n);
            }
            if let Some(v) = schema.default_value() {
                write_default(m.key("default"), schema, v, o)?;
            }
            Connect { index, version: *version, ty: connect_type, parameters }.write(&mut m);
            if *ty == Type::Boolean {
                m.string("type", "boolean");
            }
            m.close();
        }
        Schema::Array { items, .. } => {
            let mut m = Members::open(out);
            m.string("type", "array");
            Connect { index, ..Connect::default() }.write(&mut m);
            node(m.key("items"), items, None, o)?;
            m.close();
        }
        Schema::Struct { name, fields, version, doc, .. } => {
            if name.as_deref().is_some_and(|n| n == "io.confluent.connect.json.OneOf") {
                return Err(ConvertError::JsonSchema(
                    "a JSON Schema oneOf union (io.confluent.connect.json.OneOf) is not supported by pgoutbox's JsonSchemaConverter".into(),
                ));
            }
            let mut m = Members::open(out);
            m.string("type", "object");
            if !o.additional_properties {
                m.raw("additionalProperties", "false");
            }
            if let Some(n) = name {
                m.string("title", n);
            }
            if let Some(d) = doc {
                m.string("description", d);
            }
            Connect { index, version: *version, ..Connect::default() }.write(&mut m);
            if !fields.is_empty() {
                let indexed: Vec<(String, (usize, &Schema))> =
                    fields.iter().enumerate().map(|(i, (n, s))| (n.clone(), (i, s))).collect();
                let out = m.key("properties");
                let mut props = Members::open(out);
                for (field, (i, s)) in hashmap::order(indexed, Made::Default) {
                    node(props.key(&field), s, Some(i), o)?;
                }
                props.close();
            }
            m.close();
        }
    }
    Ok(())
}

/// A schema's default as it ends up in the registered text: JsonSchemaData hands everit the
/// Jackson value's Java form (`toJsonSchemaValue`), org.json prints a number with
/// `numberToString` (trailing fraction zeros dropped: `1.0` is `1`), and Jackson re-reads and
/// re-writes the text (a fraction as a double).
fn write_default(out: &mut Vec<u8>, schema: &Schema, v: &Value, o: Options) -> Result<(), ConvertError> {
    let mut json = Vec::new();
    write_value_as(&mut json, schema, v, o.decimals)?;
    let number = matches!(v, Value::Int(_) | Value::Float(_) | Value::JavaDate { .. })
        || (matches!(v, Value::Decimal { .. }) && o.decimals == Decimals::Numeric);
    let text = String::from_utf8_lossy(&json).into_owned();
    if !number || text.starts_with('"') {
        // Strings, booleans, base64 bytes (and NaN or infinities, strings in Jackson's JSON).
        out.extend_from_slice(&json);
        return Ok(());
    }
    let trimmed = if text.contains('.') && !text.contains(['e', 'E']) {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    };
    match trimmed.contains(['.', 'e', 'E']).then(|| trimmed.parse::<f64>().ok()).flatten() {
        Some(f) => super::java::float::write_java_double(out, f),
        None => out.extend_from_slice(trimmed.as_bytes()),
    }
    Ok(())
}

/// The record body of a non-null value: Jackson's compact JSON of `fromConnectData`, which is
/// JsonConverter's value with Decimals as `decimal.format` says.
pub fn write(schema: &Schema, value: &Value, out: &mut Vec<u8>, o: Options) -> Result<(), ConvertError> {
    write_value_as(out, schema, value, o.decimals)
}

#[cfg(test)]
mod tests;
