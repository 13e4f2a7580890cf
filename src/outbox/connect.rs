//! Kafka Connect's data model, as much of it as the Event Router produces, and the bytes
//! `org.apache.kafka.connect.json.JsonConverter` writes for it.
//!
//! JsonConverter builds a Jackson tree and serialises it with a default `ObjectMapper` (UTF-8
//! generator), so the bytes follow Jackson, not JSON in general:
//! - schema objects list `type`, then `items` (arrays) or `fields` (structs, each field's schema
//!   followed by `"field":"<name>"`), then `optional`, `name`, `version` (`JsonConverter.asJsonSchema`).
//!   FLOAT32 is called `"float"` and FLOAT64 `"double"`.
//! - strings escape `"`, `\` and control characters like `json::write_string`, and additionally every
//!   UTF-16 surrogate: a character outside the BMP (an emoji) is written as two upper-case `\uD83D\uDE00`
//!   escapes, not as four UTF-8 bytes (`UTF8JsonGenerator._outputMultiByteChar`; combining them is the
//!   opt-in `COMBINE_UNICODE_SURROGATES_IN_UTF8`). Observed with Debezium 3.6.3, see `expand` tests.
//! - doubles as `Double.toString` (`1.0`, `1.0E20`, `1.0E-4`, `-0.0`), floats as `Float.toString`;
//!   NaN and infinities as the strings `"NaN"`, `"Infinity"`, `"-Infinity"` (`QUOTE_NON_NUMERIC_NUMBERS`).
//!   This is the JDK 19+ algorithm (JDK-4511638: the shortest decimal that reads back, the closest
//!   of those, ties to even, at least two digits considered), checked equal to JDK 25 on 1.33 million
//!   doubles and 1 million floats. JDK 17, which the reference runner uses, prints a longer form for
//!   about 0.3% of arbitrary doubles, all in E notation (`9.999999999999999E22` for `1.0E23`,
//!   `2.6814475343671142E18` for `2.681447534367114E18`); none between 10^-3 and 10^7 in our samples.
//! - BYTES as base64 with padding.
//! - `schemas.enable=true` wraps the value as `{"schema":...,"payload":...}`; a missing schema is `null`.

use bytes::Bytes;

use super::json;
use super::schema::FieldValue;

/// The primitive Connect schema types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Type {
    Int8,
    Int16,
    Int32,
    Int64,
    Float32,
    Float64,
    Boolean,
    String,
    Bytes,
}

impl Type {
    /// The name JsonConverter writes in `"type"`.
    fn json_name(self) -> &'static str {
        match self {
            Type::Int8 => "int8",
            Type::Int16 => "int16",
            Type::Int32 => "int32",
            Type::Int64 => "int64",
            Type::Float32 => "float",
            Type::Float64 => "double",
            Type::Boolean => "boolean",
            Type::String => "string",
            Type::Bytes => "bytes",
        }
    }

    /// `Schema.Type` as Java prints it in error messages.
    fn java_name(self) -> &'static str {
        match self {
            Type::Int8 => "INT8",
            Type::Int16 => "INT16",
            Type::Int32 => "INT32",
            Type::Int64 => "INT64",
            Type::Float32 => "FLOAT32",
            Type::Float64 => "FLOAT64",
            Type::Boolean => "BOOLEAN",
            Type::String => "STRING",
            Type::Bytes => "BYTES",
        }
    }
}

/// A Connect schema. Equality is Connect's (`ConnectSchema.equals`): same type, optionality, name,
/// version, fields in the same order.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Schema {
    Primitive {
        ty: Type,
        optional: bool,
        name: Option<String>,
        version: Option<i32>,
        /// Schema parameters in insertion order (a Decimal's `scale` and `connect.decimal.precision`).
        parameters: Vec<(String, String)>,
    },
    Array {
        items: Box<Schema>,
        optional: bool,
    },
    /// E.g. an envelope placement's `dbserver1.public.outbox.Order.Value`, or the struct
    /// `table.expand.json.payload` infers, named after the payload column.
    Struct {
        name: Option<String>,
        fields: Vec<(String, Schema)>,
        optional: bool,
        version: Option<i32>,
        /// Written after the version (Debezium's VariableScaleDecimal has one).
        doc: Option<String>,
    },
}

impl Schema {
    /// `Schema.OPTIONAL_<TYPE>_SCHEMA`.
    pub fn optional(ty: Type) -> Schema {
        Schema::Primitive { ty, optional: true, name: None, version: None, parameters: Vec::new() }
    }

    pub fn is_optional(&self) -> bool {
        match self {
            Schema::Primitive { optional, .. } | Schema::Array { optional, .. } | Schema::Struct { optional, .. } => {
                *optional
            }
        }
    }

    fn java_type(&self) -> &'static str {
        match self {
            Schema::Primitive { ty, .. } => ty.java_name(),
            Schema::Array { .. } => "ARRAY",
            Schema::Struct { .. } => "STRUCT",
        }
    }
}

/// A Connect value. Structs hold one value per schema field, in field order (absent = `Null`).
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    /// Any of INT8..INT64; the schema says which.
    Int(i64),
    /// FLOAT64, or FLOAT32 (written as the nearest `f32`).
    Float(f64),
    /// UTF-8 text. Strings decoded from a `json` column may also hold lone surrogates (a `\uD800`
    /// escape) in the generalised UTF-8 form (`ED A0 80`); JsonConverter writes them as `\uD800`.
    String(Bytes),
    Bytes(Bytes),
    /// A Connect Decimal: the unscaled value as two's-complement big-endian bytes (what JSON writes,
    /// in base64) and `BigDecimal.toString` (what `toString` gives).
    Decimal {
        unscaled: Bytes,
        text: String,
    },
    /// A `java.util.Date` (Connect's Timestamp, Time and Date logical types): the instant in
    /// milliseconds, and the number JsonConverter writes for it.
    JavaDate {
        millis: i64,
        number: i64,
    },
    Array(Vec<Value>),
    Struct(Vec<Value>),
}

impl Value {
    /// The Java class JsonConverter would have been handed, for its error messages.
    fn java_class(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "class java.lang.Boolean",
            Value::Int(_) => "class java.lang.Long",
            Value::Float(_) => "class java.lang.Double",
            Value::String(_) => "class java.lang.String",
            Value::Bytes(_) => "class [B",
            Value::Decimal { .. } => "class java.math.BigDecimal",
            Value::JavaDate { .. } => "class java.util.Date",
            Value::Array(_) => "class java.util.ArrayList",
            Value::Struct(_) => "class org.apache.kafka.connect.data.Struct",
        }
    }
}

/// A (schema, value) pair JsonConverter would refuse with a `DataException`; the messages are its own.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConvertError {
    #[error("Invalid type for {schema}: {found}")]
    InvalidType { schema: &'static str, found: &'static str },
    #[error("Conversion error: null value for field that is required and has no default value")]
    RequiredNull,
    #[error("struct value has {values} values for {fields} schema fields")]
    StructArity { fields: usize, values: usize },
    /// A struct needs its schema; JsonConverter says "Mismatching schema." for a schemaless one.
    #[error("Mismatching schema.")]
    SchemalessStruct,
}

/// The schema as JsonConverter writes it inside the envelope.
pub fn write_schema(out: &mut Vec<u8>, s: &Schema) {
    let mut params: &[(String, String)] = &[];
    let mut doc = None;
    let (optional, name, version) = match s {
        Schema::Primitive { ty, optional, name, version, parameters } => {
            out.extend_from_slice(b"{\"type\":\"");
            out.extend_from_slice(ty.json_name().as_bytes());
            out.push(b'"');
            params = parameters;
            (*optional, name.as_deref(), *version)
        }
        Schema::Array { items, optional } => {
            out.extend_from_slice(b"{\"type\":\"array\",\"items\":");
            write_schema(out, items);
            (*optional, None, None)
        }
        Schema::Struct { name, fields, optional, version, doc: struct_doc } => {
            doc = struct_doc.as_deref();
            out.extend_from_slice(b"{\"type\":\"struct\",\"fields\":[");
            for (i, (field, schema)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_schema(out, schema);
                // The field's schema object gets one more key, `field`, at its end.
                out.pop();
                out.extend_from_slice(b",\"field\":");
                write_string(out, field.as_bytes());
                out.push(b'}');
            }
            out.push(b']');
            (*optional, name.as_deref(), *version)
        }
    };
    out.extend_from_slice(if optional { b",\"optional\":true" } else { b",\"optional\":false" });
    if let Some(name) = name {
        out.extend_from_slice(b",\"name\":");
        write_string(out, name.as_bytes());
    }
    if let Some(v) = version {
        out.extend_from_slice(b",\"version\":");
        out.extend_from_slice(v.to_string().as_bytes());
    }
    if let Some(doc) = doc {
        out.extend_from_slice(b",\"doc\":");
        write_string(out, doc.as_bytes());
    }
    write_parameters(out, params.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    out.push(b'}');
}

/// `,"parameters":{...}` as JsonConverter writes a schema's parameters (nothing when there are none).
pub fn write_parameters<'a>(out: &mut Vec<u8>, params: impl IntoIterator<Item = (&'a str, &'a str)>) {
    let mut first = true;
    for (k, v) in params {
        out.extend_from_slice(if first { b",\"parameters\":{" } else { b"," });
        first = false;
        write_string(out, k.as_bytes());
        out.push(b':');
        write_string(out, v.as_bytes());
    }
    if !first {
        out.push(b'}');
    }
}

/// The value as JsonConverter writes it under schema `s` (`convertToJson`).
pub fn write_value(out: &mut Vec<u8>, s: &Schema, v: &Value) -> Result<(), ConvertError> {
    let mismatch = || ConvertError::InvalidType { schema: s.java_type(), found: v.java_class() };
    match (s, v) {
        (_, Value::Null) if s.is_optional() => out.extend_from_slice(b"null"),
        (_, Value::Null) => return Err(ConvertError::RequiredNull),
        (Schema::Primitive { ty, .. }, _) => match (ty, v) {
            (
                Type::Int8 | Type::Int16 | Type::Int32 | Type::Int64,
                Value::Int(i) | Value::JavaDate { number: i, .. },
            ) => {
                out.extend_from_slice(i.to_string().as_bytes());
            }
            (Type::Float64, Value::Float(f)) => write_java_double(out, *f),
            (Type::Float32, Value::Float(f)) => write_java_float(out, *f as f32),
            (Type::Boolean, Value::Bool(b)) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
            (Type::String, Value::String(text)) => write_string(out, text),
            (Type::Bytes, Value::Bytes(b) | Value::Decimal { unscaled: b, .. }) => {
                json::write_value(out, &FieldValue::Bytes(b.clone()))
            }
            _ => return Err(mismatch()),
        },
        (Schema::Array { items, .. }, Value::Array(elems)) => {
            out.push(b'[');
            for (i, e) in elems.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(out, items, e)?;
            }
            out.push(b']');
        }
        (Schema::Struct { fields, .. }, Value::Struct(values)) => {
            if fields.len() != values.len() {
                return Err(ConvertError::StructArity { fields: fields.len(), values: values.len() });
            }
            out.push(b'{');
            for (i, ((name, schema), value)) in fields.iter().zip(values).enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_string(out, name.as_bytes());
                out.push(b':');
                write_value(out, schema, value)?;
            }
            out.push(b'}');
        }
        _ => return Err(mismatch()),
    }
    Ok(())
}

/// A value without a schema, typed by its Java class (JsonConverter's `schema == null` path).
pub fn write_schemaless_value(out: &mut Vec<u8>, v: &Value) -> Result<(), ConvertError> {
    match v {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Int(i) | Value::JavaDate { number: i, .. } => out.extend_from_slice(i.to_string().as_bytes()),
        Value::Float(f) => write_java_double(out, *f),
        Value::String(text) => write_string(out, text),
        Value::Bytes(b) | Value::Decimal { unscaled: b, .. } => json::write_value(out, &FieldValue::Bytes(b.clone())),
        Value::Array(elems) => {
            out.push(b'[');
            for (i, e) in elems.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_schemaless_value(out, e)?;
            }
            out.push(b']');
        }
        Value::Struct(_) => return Err(ConvertError::SchemalessStruct),
    }
    Ok(())
}

/// JsonConverter's record bytes: with schemas `{"schema":...,"payload":...}` (a missing schema is
/// `null`), without them the bare value. The caller handles JsonConverter's one Kafka-null case (no
/// schema and a null value, see [`json_converter`]); here it writes `null`.
pub fn json_envelope(
    out: &mut Vec<u8>,
    schemas_enabled: bool,
    schema: Option<&Schema>,
    value: &Value,
) -> Result<(), ConvertError> {
    let write = |out: &mut Vec<u8>| match schema {
        Some(s) => write_value(out, s, value),
        None => write_schemaless_value(out, value),
    };
    if !schemas_enabled {
        return write(out);
    }
    out.extend_from_slice(b"{\"schema\":");
    match schema {
        Some(s) => write_schema(out, s),
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\"payload\":");
    write(out)?;
    out.push(b'}');
    Ok(())
}

/// `JsonConverter.fromConnectData`: `None` is a Kafka null (no schema and no value).
pub fn json_converter(
    schemas_enabled: bool,
    schema: Option<&Schema>,
    value: &Value,
) -> Result<Option<Bytes>, ConvertError> {
    if schema.is_none() && *value == Value::Null {
        return Ok(None);
    }
    let mut out = Vec::with_capacity(128);
    json_envelope(&mut out, schemas_enabled, schema, value)?;
    Ok(Some(Bytes::from(out)))
}

pub use super::json::write_string;

/// `JsonGenerator.writeNumber(double)`.
pub fn write_java_double(out: &mut Vec<u8>, v: f64) {
    write_java_number(out, v.abs(), v.is_nan(), v.is_sign_negative());
}

/// `JsonGenerator.writeNumber(float)`: `Float.toString`, the same rules for `f32`.
pub fn write_java_float(out: &mut Vec<u8>, v: f32) {
    write_java_number(out, v.abs(), v.is_nan(), v.is_sign_negative());
}

/// Both writers above, for the magnitude `a` of an `f32` or `f64`.
fn write_java_number<F>(out: &mut Vec<u8>, a: F, nan: bool, negative: bool)
where
    F: std::fmt::LowerExp + std::str::FromStr + PartialEq + Copy,
{
    let shortest = format!("{a:e}");
    if nan || shortest == "inf" {
        return out.extend_from_slice(non_finite(nan, negative));
    }
    // Rust's `{:e}` is a shortest decimal that reads back as `a`; `{:.Ne}` rounds the exact value
    // half-even, which picks the closest of that length as Java does (ties to an even digit).
    let p = significant_digits(&shortest).max(2) - 1;
    let closest = format!("{a:.p$e}");
    let digits = if closest.parse::<F>().ok() == Some(a) { closest } else { shortest };
    java_format(out, negative, &digits);
}

/// `Double.toString`, or `Float.toString` when `single`: as JsonGenerator writes the number, but NaN
/// and the infinities bare (SimpleHeaderConverter, StringConverter, `Struct.toString`).
pub fn java_float_to_string(v: f64, single: bool) -> String {
    let mut out = Vec::new();
    if single {
        write_java_float(&mut out, v as f32);
    } else {
        write_java_double(&mut out, v);
    }
    String::from_utf8_lossy(&out).trim_matches('"').to_string()
}

/// Digits of Rust's `d.ddde±x` form, trailing zeros excluded.
fn significant_digits(sci: &str) -> usize {
    let mantissa = sci.split_once('e').map_or(sci, |(m, _)| m).trim_end_matches('0');
    mantissa.bytes().filter(u8::is_ascii_digit).count().max(1)
}

fn non_finite(nan: bool, negative: bool) -> &'static [u8] {
    match (nan, negative) {
        (true, _) => b"\"NaN\"",
        (false, false) => b"\"Infinity\"",
        (false, true) => b"\"-Infinity\"",
    }
}

/// Lays out Rust's `d.ddde±x` the way Java's `Double.toString` does: plain notation with at least
/// one fraction digit for 10^-3 <= |d| < 10^7, else `d.dddE±x`. Java's spec considers decimals of
/// at least two digits (`4.9E-324`, not `5.0E-324`), hence the caller's minimum precision of two.
fn java_format(out: &mut Vec<u8>, negative: bool, sci: &str) {
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let mut digits: Vec<u8> = mantissa.bytes().filter(u8::is_ascii_digit).collect();
    while digits.len() > 1 && digits.last() == Some(&b'0') {
        digits.pop();
    }
    let d = &digits[..];
    if negative {
        out.push(b'-');
    }
    if d == b"0" {
        out.extend_from_slice(b"0.0");
    } else if (-3..7).contains(&exp) {
        if exp < 0 {
            out.extend_from_slice(b"0.");
            out.resize(out.len() + (-exp - 1) as usize, b'0');
            out.extend_from_slice(d);
        } else {
            let int_len = exp as usize + 1;
            if d.len() <= int_len {
                out.extend_from_slice(d);
                out.resize(out.len() + (int_len - d.len()), b'0');
                out.extend_from_slice(b".0");
            } else {
                out.extend_from_slice(&d[..int_len]);
                out.push(b'.');
                out.extend_from_slice(&d[int_len..]);
            }
        }
    } else {
        out.push(d[0]);
        out.push(b'.');
        out.extend_from_slice(if d.len() > 1 { &d[1..] } else { b"0" });
        out.push(b'E');
        out.extend_from_slice(exp.to_string().as_bytes());
    }
}

#[cfg(test)]
mod tests;
