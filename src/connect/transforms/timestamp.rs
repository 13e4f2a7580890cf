//! `TimestampConverter`: a timestamp (string, Unix number, or Connect's Date/Time/Timestamp) as
//! another of those forms, in UTC.

use std::sync::Arc;

use bytes::Bytes;

use super::structs::{require_struct, Basics};
use super::{Options, Part, TransformError};
use crate::connect::config::ConfigError;
use crate::connect::java::date::{days_from_civil, format_simple, simple_date_format, DatePart};
use crate::connect::record::{Data, Record};
use crate::connect::{Schema, Type, Value};

const DATE: &str = "org.apache.kafka.connect.data.Date";
const TIME: &str = "org.apache.kafka.connect.data.Time";
const TIMESTAMP: &str = "org.apache.kafka.connect.data.Timestamp";
const DAY: i64 = 86_400_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    String,
    Unix,
    Date,
    Time,
    Timestamp,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Precision {
    Nanos,
    Micros,
    Millis,
    Seconds,
}

#[derive(Debug, Clone)]
pub struct TimestampConverter {
    part: Part,
    field: String,
    target: Form,
    format: Option<(String, Vec<DatePart>)>,
    precision: Precision,
}

impl TimestampConverter {
    pub(super) fn parse(mut o: Options<'_, '_>, part: Part) -> Result<Self, ConfigError> {
        let target = match o.required("target.type", "string, unix, Date, Time or Timestamp")?.as_str() {
            "string" => Form::String,
            "unix" => Form::Unix,
            "Date" => Form::Date,
            "Time" => Form::Time,
            "Timestamp" => Form::Timestamp,
            _ => return Err(o.invalid("target.type", "String must be one of: string, unix, Date, Time, Timestamp")),
        };
        let precision = match o.str("unix.precision").as_deref().unwrap_or("milliseconds") {
            "nanoseconds" => Precision::Nanos,
            "microseconds" => Precision::Micros,
            "milliseconds" => Precision::Millis,
            "seconds" => Precision::Seconds,
            _ => {
                return Err(o.invalid(
                    "unix.precision",
                    "String must be one of: nanoseconds, microseconds, milliseconds, seconds",
                ))
            }
        };
        let format = match o.str("format") {
            None if target == Form::String => {
                return Err(o.invalid(
                    "format",
                    "TimestampConverter requires format option to be specified when using string timestamps",
                ))
            }
            None => None,
            Some(p) => {
                let parts = simple_date_format(&p)
                    .map_err(|why| o.invalid("format", format!("is not a date pattern Java accepts: it has {why}")))?;
                Some((p, parts))
            }
        };
        Ok(TimestampConverter { part, field: o.str("field").unwrap_or_default(), target, format, precision })
    }

    fn target_schema(&self, optional: bool) -> Schema {
        let named = |ty, name: &str| Schema::named(ty, optional, name);
        match self.target {
            Form::String => Schema::primitive(Type::String, optional),
            Form::Unix => Schema::primitive(Type::Int64, optional),
            Form::Date => named(Type::Int32, DATE),
            Form::Time => named(Type::Int32, TIME),
            Form::Timestamp => named(Type::Int64, TIMESTAMP),
        }
    }

    pub(super) fn apply(&self, r: &mut Record) -> Result<(), TransformError> {
        let data = self.part.of(r);
        let Some(schema) = data.schema() else {
            return Err(TransformError("TimestampConverter on schemaless data is not implemented in pgoutbox".into()));
        };
        let out = if self.field.is_empty() {
            let from = form_of(schema)?;
            Data::new(Arc::new(self.target_schema(schema.is_optional())), self.convert(&data.value, from)?)
        } else {
            if data.value == Value::Null {
                return Ok(());
            }
            let (fields, values) = require_struct(Some(schema), &data.value, "converting timestamp formats")?;
            let mut new_fields = Vec::with_capacity(fields.len());
            let mut new_values = Vec::with_capacity(fields.len());
            for ((name, s), v) in fields.iter().zip(values) {
                if *name == self.field {
                    let from = form_of(s)?;
                    new_fields.push((name.clone(), self.target_schema(s.is_optional())));
                    new_values.push(self.convert(v, from)?);
                } else {
                    new_fields.push((name.clone(), s.clone()));
                    new_values.push(v.clone());
                }
            }
            let mut schema_out = Basics::of(schema).with(new_fields);
            if let (Schema::Struct { optional, .. }, true) = (&mut schema_out, schema.is_optional()) {
                *optional = true;
            }
            Data::new(Arc::new(schema_out), Value::Struct(new_values))
        };
        *self.part.of_mut(r) = out;
        Ok(())
    }

    fn convert(&self, v: &Value, from: Form) -> Result<Value, TransformError> {
        if *v == Value::Null {
            return Ok(Value::Null);
        }
        let millis = self.to_millis(v, from)?;
        Ok(match self.target {
            Form::String => {
                let (_, parts) = self.format.as_ref().expect("checked at start");
                Value::String(Bytes::from(format_simple(parts, millis)))
            }
            Form::Unix => Value::Int(match self.precision {
                Precision::Seconds => millis / 1000,
                Precision::Millis => millis,
                Precision::Micros => millis.saturating_mul(1000),
                Precision::Nanos => millis.saturating_mul(1_000_000),
            }),
            Form::Date => {
                let day = millis.div_euclid(DAY);
                Value::JavaDate { millis: day * DAY, number: day }
            }
            Form::Time => {
                let t = millis.rem_euclid(DAY);
                Value::JavaDate { millis: t, number: t }
            }
            Form::Timestamp => Value::JavaDate { millis, number: millis },
        })
    }

    fn to_millis(&self, v: &Value, from: Form) -> Result<i64, TransformError> {
        match (from, v) {
            (Form::String, Value::String(s)) => {
                let text = String::from_utf8_lossy(s);
                let Some((pattern, parts)) = &self.format else {
                    return Err(TransformError(
                        "TimestampConverter requires format option to parse string timestamps".into(),
                    ));
                };
                parse_simple(parts, &text).ok_or_else(|| {
                    TransformError(format!(
                        "Could not parse timestamp: value ({text}) does not match pattern ({pattern})"
                    ))
                })
            }
            (Form::Unix, Value::Int(x)) => Ok(match self.precision {
                Precision::Seconds => x.saturating_mul(1000),
                Precision::Millis => *x,
                Precision::Micros => x / 1000,
                Precision::Nanos => x / 1_000_000,
            }),
            (Form::Date | Form::Time | Form::Timestamp, Value::JavaDate { millis, .. }) => Ok(*millis),
            (_, other) => Err(TransformError(format!(
                "Expected {} to be a {}, but found class {}",
                match from {
                    Form::String => "string timestamp",
                    Form::Unix => "Unix timestamp",
                    Form::Date => "Date",
                    Form::Time => "Time",
                    Form::Timestamp => "Timestamp",
                },
                match from {
                    Form::String => "String",
                    Form::Unix => "Long",
                    _ => "java.util.Date",
                },
                super::structs::class_name(other)
            ))),
        }
    }
}

/// The timestamp form of a schema: by Connect's logical names, else STRING or INT64.
fn form_of(schema: &Schema) -> Result<Form, TransformError> {
    match (schema.name(), schema.primitive_type()) {
        (Some(TIMESTAMP), _) => Ok(Form::Timestamp),
        (Some(DATE), _) => Ok(Form::Date),
        (Some(TIME), _) => Ok(Form::Time),
        (_, Some(Type::String)) => Ok(Form::String),
        (_, Some(Type::Int64)) => Ok(Form::Unix),
        _ => Err(TransformError(format!(
            "Schema Schema{{{}{}}} does not correspond to a known timestamp type format",
            schema.name().map(|n| format!("{n}:")).unwrap_or_default(),
            schema.java_type()
        ))),
    }
}

/// `SimpleDateFormat.parse`, leniently as Java does for numbers: each numeric field takes its
/// digits (as many as the letters when another number follows directly, else all), and fields
/// that overflow roll over (month 13 is January of the next year). Trailing text is ignored.
fn parse_simple(parts: &[DatePart], text: &str) -> Option<i64> {
    let bytes = text.as_bytes();
    let mut at = 0;
    let (mut y, mut mo, mut d, mut h, mut mi, mut s, mut ms) = (1970i64, 1i64, 1i64, 0i64, 0i64, 0i64, 0i64);
    for (i, p) in parts.iter().enumerate() {
        match p {
            DatePart::Literal(l) => {
                if !text[at..].starts_with(l.as_str()) {
                    return None;
                }
                at += l.len();
            }
            DatePart::Field(c, n) => {
                let fixed = matches!(parts.get(i + 1), Some(DatePart::Field(..)));
                let start = at;
                while at < bytes.len() && bytes[at].is_ascii_digit() && (!fixed || at - start < *n) {
                    at += 1;
                }
                if at == start || at - start > 12 {
                    return None;
                }
                let v: i64 = text[start..at].parse().ok()?;
                match c {
                    'y' => y = if *n <= 2 && at - start <= 2 { 2000 + v } else { v },
                    'M' => mo = v,
                    'd' => d = v,
                    'H' => h = v,
                    'm' => mi = v,
                    's' => s = v,
                    _ => ms = v,
                }
            }
        }
    }
    let y = y.checked_add((mo - 1).div_euclid(12))?;
    let mo = (mo - 1).rem_euclid(12) + 1;
    let days = days_from_civil(y, mo, 1).checked_add(d - 1)?;
    days.checked_mul(DAY)?.checked_add(h * 3_600_000 + mi * 60_000 + s * 1000 + ms)
}
