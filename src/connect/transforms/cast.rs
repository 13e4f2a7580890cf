//! `Cast` and `MaskField`: values converted (or masked) with Java's number semantics.

use std::sync::Arc;

use bytes::Bytes;

use super::structs::{class_name, require_struct, Basics};
use super::{Options, Part, TransformError};
use crate::connect::config::ConfigError;
use crate::connect::java::date::java_date_values_string;
use crate::connect::java::float::java_float_to_string;
use crate::connect::record::{Data, Record};
use crate::connect::{Schema, Type, Value};

const OUTPUT_TYPES: &str = "[INT8, INT16, INT32, INT64, FLOAT32, FLOAT64, BOOLEAN, STRING]";
const INPUT_TYPES: &str = "[INT8, INT16, INT32, INT64, FLOAT32, FLOAT64, BOOLEAN, STRING, BYTES]";
const DATE: &str = "org.apache.kafka.connect.data.Date";
const TIME: &str = "org.apache.kafka.connect.data.Time";
const TIMESTAMP: &str = "org.apache.kafka.connect.data.Timestamp";

/// `spec`: one type for the whole key or value, or `field:type,...`.
#[derive(Debug, Clone)]
pub struct Cast {
    part: Part,
    whole: Option<Type>,
    fields: Vec<(String, Type)>,
}

fn target_type(name: &str) -> Result<Type, String> {
    Ok(match name.trim().to_ascii_uppercase().as_str() {
        "INT8" => Type::Int8,
        "INT16" => Type::Int16,
        "INT32" => Type::Int32,
        "INT64" => Type::Int64,
        "FLOAT32" => Type::Float32,
        "FLOAT64" => Type::Float64,
        "BOOLEAN" => Type::Boolean,
        "STRING" => Type::String,
        t @ ("BYTES" | "ARRAY" | "MAP" | "STRUCT") => {
            return Err(format!(
                "Cast transformation does not support casting to {t}; supported types are {OUTPUT_TYPES}"
            ))
        }
        t => return Err(format!("Invalid type found in casting spec: {t}")),
    })
}

impl Cast {
    pub(super) fn parse(mut o: Options<'_, '_>, part: Part) -> Result<Self, ConfigError> {
        let spec = o.list("spec");
        if spec.is_empty() {
            return Err(o.invalid("spec", "Must specify at least one field to cast."));
        }
        let mut whole = None;
        let mut fields: Vec<(String, Type)> = Vec::new();
        for mapping in &spec {
            let parts: Vec<&str> = mapping.split(':').collect();
            match parts[..] {
                [t] => whole = Some(target_type(t).map_err(|e| o.invalid("spec", e))?),
                [f, t] => {
                    let t = target_type(t).map_err(|e| o.invalid("spec", e))?;
                    fields.retain(|(g, _)| g != f.trim());
                    fields.push((f.trim().to_string(), t));
                }
                _ => {
                    return Err(o.invalid("spec", "has an entry that is not of the form field:type (or a single type)"))
                }
            }
        }
        if whole.is_some() && spec.len() > 1 {
            return Err(o.invalid(
                "spec",
                "Cast transformations that specify a type to cast the entire value to may only specify a single cast in their spec",
            ));
        }
        Ok(Cast { part, whole, fields })
    }

    pub(super) fn apply(&self, r: &mut Record) -> Result<(), TransformError> {
        let data = self.part.of(r);
        if data.value == Value::Null {
            return Ok(());
        }
        let Some(schema) = data.schema() else {
            return Err(TransformError(format!(
                "Only Map objects supported in absence of schema for [cast types], found: {}",
                class_name(&data.value)
            )));
        };
        let out = match self.whole {
            Some(t) => {
                let value = cast(schema, &data.value, t)?;
                Data::new(Arc::new(retyped(schema, t)), value)
            }
            None => {
                let (fields, values) = require_struct(Some(schema), &data.value, "cast types")?;
                let mut new_fields = Vec::with_capacity(fields.len());
                let mut new_values = Vec::with_capacity(fields.len());
                for ((name, s), v) in fields.iter().zip(values) {
                    match self.fields.iter().find(|(f, _)| f == name) {
                        Some((_, t)) => {
                            new_fields.push((name.clone(), Schema::primitive(*t, s.is_optional())));
                            new_values.push(cast(s, v, *t)?);
                        }
                        None => {
                            new_fields.push((name.clone(), s.clone()));
                            new_values.push(v.clone());
                        }
                    }
                }
                let mut schema = Basics::of(schema).with(new_fields);
                if let (Schema::Struct { optional, .. }, true) =
                    (&mut schema, data.schema().is_some_and(Schema::is_optional))
                {
                    *optional = true;
                }
                Data::new(Arc::new(schema), Value::Struct(new_values))
            }
        };
        *self.part.of_mut(r) = out;
        Ok(())
    }
}

/// A whole-value cast keeps the input's name, version and parameters on the new type.
fn retyped(schema: &Schema, t: Type) -> Schema {
    match schema {
        Schema::Primitive { optional, name, version, parameters, .. } => Schema::Primitive {
            ty: t,
            optional: *optional,
            name: name.clone(),
            version: *version,
            parameters: parameters.clone(),
            default: None,
        },
        other => Schema::primitive(t, other.is_optional()),
    }
}

/// A number as Java holds it before a conversion.
#[derive(Debug, Clone, Copy)]
enum Num {
    Int(i64),
    Float(f64),
}

impl Num {
    fn long_value(self) -> i64 {
        match self {
            Num::Int(i) => i,
            // (long) of a double: truncate, saturate, NaN is 0.
            Num::Float(f) => f as i64,
        }
    }

    fn int_value(self) -> i32 {
        match self {
            Num::Int(i) => i as i32,
            Num::Float(f) => f as i32,
        }
    }

    fn double_value(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }
}

fn unsupported(t: &str) -> TransformError {
    TransformError(format!("Cast transformation does not support casting from {t}; supported types are {INPUT_TYPES}"))
}

fn out_of_range(v: &str) -> TransformError {
    TransformError(format!("Value ({v}) was out of range for requested data type"))
}

/// `castValueToType`: the value of `schema` as type `t`.
fn cast(schema: &Schema, value: &Value, t: Type) -> Result<Value, TransformError> {
    if *value == Value::Null {
        return Ok(Value::Null);
    }
    let Some(from) = schema.primitive_type() else { return Err(unsupported(schema.java_type())) };
    if t == Type::String {
        return Ok(Value::String(Bytes::from(to_string(from, value))));
    }
    // Logical temporal types are encoded to their numbers first (Decimal stays a BigDecimal).
    let num = match (value, schema.name()) {
        (Value::JavaDate { number, .. }, Some(DATE | TIME | TIMESTAMP)) => Some(Num::Int(*number)),
        (Value::Int(i), _) => Some(Num::Int(*i)),
        (Value::Float(f), _) => Some(Num::Float(*f)),
        (Value::Decimal { text, .. }, _) => Some(decimal_num(text, t)),
        _ => None,
    };
    let cast_err = || TransformError(format!("Unexpected type in Cast transformation: class {}", class_name(value)));
    Ok(match (value, num) {
        (Value::Bool(b), _) => match t {
            Type::Boolean => Value::Bool(*b),
            Type::Float32 | Type::Float64 => Value::Float(if *b { 1.0 } else { 0.0 }),
            _ => Value::Int(i64::from(*b)),
        },
        (_, Some(n)) => match t {
            Type::Int8 => Value::Int(i64::from(n.int_value() as i8)),
            Type::Int16 => Value::Int(i64::from(n.int_value() as i16)),
            Type::Int32 => Value::Int(i64::from(n.int_value())),
            Type::Int64 => Value::Int(n.long_value()),
            Type::Float32 => Value::Float(f64::from(n.double_value() as f32)),
            Type::Float64 => Value::Float(n.double_value()),
            Type::Boolean => Value::Bool(n.long_value() != 0),
            Type::String | Type::Bytes => unreachable!("handled above / refused at start"),
        },
        (Value::String(s), None) => string_to(&String::from_utf8_lossy(s), t)?,
        (Value::Bytes(_), None) => return Err(cast_err()),
        _ => return Err(unsupported(schema.java_type())),
    })
}

/// A BigDecimal's `longValue()`/`intValue()` (the integer part's low bits) or `doubleValue()`.
fn decimal_num(text: &[u8], t: Type) -> Num {
    let text = String::from_utf8_lossy(text);
    if matches!(t, Type::Float32 | Type::Float64) {
        return Num::Float(text.parse().unwrap_or(0.0));
    }
    // Plain or scientific (`1E+3`, `1.5E-7`): expand to the integer part, keeping the low 64 bits.
    let (mantissa, exp) = match text.split_once(['E', 'e']) {
        Some((m, e)) => (m, e.parse::<i64>().unwrap_or(0)),
        None => (&text[..], 0),
    };
    let negative = mantissa.starts_with('-');
    let digits = mantissa.trim_start_matches(['-', '+']);
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    let all: String = format!("{int}{frac}");
    let keep = i64::try_from(int.len()).unwrap_or(0).saturating_add(exp);
    let mut v: i64 = 0;
    for (i, c) in all.bytes().chain(std::iter::repeat(b'0')).enumerate() {
        if i64::try_from(i).unwrap_or(i64::MAX) >= keep {
            break;
        }
        v = v.wrapping_mul(10).wrapping_add(i64::from(c - b'0'));
    }
    Num::Int(if negative { v.wrapping_neg() } else { v })
}

/// Java's `parseByte`/`parseShort`/`parseInt`/`parseLong`/`parseFloat`/`parseDouble`/`parseBoolean`.
fn string_to(s: &str, t: Type) -> Result<Value, TransformError> {
    let int = |min: i64, max: i64| -> Result<Value, TransformError> {
        let body = s.strip_prefix(['+', '-']).unwrap_or(s);
        if body.is_empty() || !body.bytes().all(|b| b.is_ascii_digit()) {
            return Err(out_of_range(s));
        }
        let v: i64 = s.parse().map_err(|_| out_of_range(s))?;
        if v < min || v > max {
            return Err(out_of_range(s));
        }
        Ok(Value::Int(v))
    };
    match t {
        Type::Int8 => int(i64::from(i8::MIN), i64::from(i8::MAX)),
        Type::Int16 => int(i64::from(i16::MIN), i64::from(i16::MAX)),
        Type::Int32 => int(i64::from(i32::MIN), i64::from(i32::MAX)),
        Type::Int64 => int(i64::MIN, i64::MAX),
        Type::Float32 => java_float(s).map(|f| Value::Float(f64::from(f as f32))).ok_or_else(|| out_of_range(s)),
        Type::Float64 => java_float(s).map(Value::Float).ok_or_else(|| out_of_range(s)),
        Type::Boolean => Ok(Value::Bool(s.eq_ignore_ascii_case("true"))),
        Type::String | Type::Bytes => unreachable!("handled by the caller"),
    }
}

/// `Double.parseDouble`: trimmed, `NaN`, `Infinity`, an optional `f`/`d` suffix, decimal or E notation.
fn java_float(s: &str) -> Option<f64> {
    let s = s.trim();
    let unsigned = s.strip_prefix(['+', '-']).unwrap_or(s);
    let negative = s.starts_with('-');
    match unsigned {
        "NaN" => return Some(f64::NAN),
        "Infinity" => return Some(if negative { f64::NEG_INFINITY } else { f64::INFINITY }),
        _ => {}
    }
    let body = s.strip_suffix(['f', 'F', 'd', 'D']).unwrap_or(s);
    let check = body.strip_prefix(['+', '-']).unwrap_or(body);
    if check.is_empty() || !check.bytes().all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-')) {
        return None;
    }
    body.parse().ok()
}

/// `castToString`: Java's `toString()`, dates by `Values` (UTC), bytes as base64.
fn to_string(from: Type, value: &Value) -> String {
    match value {
        Value::Int(i) => i.to_string(),
        Value::Float(f) => java_float_to_string(*f, from == Type::Float32),
        Value::Bool(b) => b.to_string(),
        Value::String(s) => String::from_utf8_lossy(s).into_owned(),
        Value::Bytes(b) => {
            let mut out = Vec::new();
            crate::connect::json::base64(&mut out, b);
            String::from_utf8_lossy(&out).into_owned()
        }
        Value::Decimal { text, .. } => String::from_utf8_lossy(text).into_owned(),
        Value::JavaDate { millis, .. } => java_date_values_string(*millis),
        other => crate::connect::string::to_string(None, other),
    }
}

/// `fields` and `replacement`: masked values, of the same schema.
#[derive(Debug, Clone)]
pub struct MaskField {
    part: Part,
    fields: Vec<String>,
    replacement: Option<String>,
}

impl MaskField {
    pub(super) fn parse(mut o: Options<'_, '_>, part: Part) -> Result<Self, ConfigError> {
        let fields = o.list("fields");
        if fields.is_empty() {
            return Err(match o.str("fields") {
                None => ConfigError::Missing { key: o.key("fields"), hint: "the fields to mask".into() },
                Some(_) => o.invalid("fields", "Empty list"),
            });
        }
        let key = o.key("replacement");
        let replacement = match o.r.raw(&key) {
            Some(r) if r.trim().is_empty() => return Err(o.invalid("replacement", "String must be non-empty")),
            r => r.map(|r| r.trim().to_string()),
        };
        Ok(MaskField { part, fields, replacement })
    }

    pub(super) fn apply(&self, r: &mut Record) -> Result<(), TransformError> {
        let data = self.part.of(r);
        let (fields, values) = match (data.schema(), &data.value) {
            (Some(_), Value::Null) => {
                return Err(TransformError("Only Struct objects supported for [mask fields], found: null".into()))
            }
            (s, v) => require_struct(s, v, "mask fields")?,
        };
        let mut masked = values.to_vec();
        for (i, (name, schema)) in fields.iter().enumerate() {
            if self.fields.iter().any(|f| f == name) {
                masked[i] = self.mask(schema, &values[i])?;
            }
        }
        let schema = data.schema.clone();
        *self.part.of_mut(r) = Data { schema, value: Value::Struct(masked) };
        Ok(())
    }

    fn mask(&self, schema: &Schema, v: &Value) -> Result<Value, TransformError> {
        let class = java_class(schema, v);
        match (&self.replacement, v) {
            (_, Value::Null) => Ok(Value::Null),
            (None, Value::Bool(_)) => Ok(Value::Bool(false)),
            (None, Value::Int(_)) => Ok(Value::Int(0)),
            (None, Value::Float(_)) => Ok(Value::Float(0.0)),
            (None, Value::String(_)) => Ok(Value::String(Bytes::new())),
            (None, Value::JavaDate { .. }) => Ok(Value::JavaDate { millis: 0, number: 0 }),
            (None, Value::Array(_)) => Ok(Value::Array(Vec::new())),
            // BigDecimal.ZERO has scale 0; a Decimal schema of another scale refuses it at conversion.
            (None, Value::Decimal { .. }) => decimal_for(schema, "0"),
            (None, _) => Err(TransformError(format!("Cannot mask value of type: class {class}"))),
            (Some(r), Value::Int(_)) => {
                let n = decimal_num(r.as_bytes(), Type::Int64).long_value();
                let bad = crate::connect::java::decimal::decimal(r, None).is_none() && java_float(r).is_none();
                if bad {
                    return Err(TransformError(format!("Unable to convert {r} (class java.lang.String) to a number")));
                }
                Ok(Value::Int(match schema.primitive_type() {
                    Some(Type::Int8) => i64::from(n as i8),
                    Some(Type::Int16) => i64::from(n as i16),
                    Some(Type::Int32) => i64::from(n as i32),
                    _ => n,
                }))
            }
            (Some(r), Value::Float(_)) => {
                let f: f64 = r.parse().map_err(|_| {
                    TransformError(format!("Unable to convert {r} (class java.lang.String) to a number"))
                })?;
                Ok(Value::Float(if schema.primitive_type() == Some(Type::Float32) { f64::from(f as f32) } else { f }))
            }
            (Some(r), Value::String(_)) => Ok(Value::String(Bytes::copy_from_slice(r.as_bytes()))),
            (Some(r), Value::Decimal { .. }) => decimal_for(schema, r),
            (Some(_), _) => {
                Err(TransformError(format!("Cannot mask value of type class {class} with custom replacement.")))
            }
        }
    }
}

/// A `BigDecimal` of text `r` for a Decimal schema; its scale must be the schema's, as the
/// converters require ("BigDecimal has mismatching scale value for given Decimal schema").
fn decimal_for(schema: &Schema, r: &str) -> Result<Value, TransformError> {
    let scale = match schema {
        Schema::Primitive { parameters, .. } => {
            parameters.iter().find(|(k, _)| k == "scale").and_then(|(_, v)| v.parse::<u16>().ok()).unwrap_or(0)
        }
        _ => 0,
    };
    let own = r.split_once('.').map_or(0, |(_, f)| f.len());
    let (unscaled, text) = crate::connect::java::decimal::decimal(r, None)
        .ok_or_else(|| TransformError(format!("Unable to convert {r} (class java.lang.String) to number")))?;
    if own != usize::from(scale) {
        return Err(TransformError("BigDecimal has mismatching scale value for given Decimal schema".into()));
    }
    Ok(Value::Decimal { unscaled: Bytes::from(unscaled), text: Bytes::from(text) })
}

/// The Java class a value of this schema has in Connect, for messages.
fn java_class(schema: &Schema, v: &Value) -> &'static str {
    match (schema.primitive_type(), v) {
        (Some(Type::Int8), Value::Int(_)) => "java.lang.Byte",
        (Some(Type::Int16), Value::Int(_)) => "java.lang.Short",
        (Some(Type::Int32), Value::Int(_)) => "java.lang.Integer",
        (Some(Type::Float32), Value::Float(_)) => "java.lang.Float",
        _ => class_name(v),
    }
}
