//! A column's pgoutput text as the Connect value Debezium's PostgreSQL connector gives it.
//! `None` when the text is not of the column's type (or lies beyond what the value can hold): the
//! router turns that into an error naming the column, and the position does not move past it.

use base64::Engine as _;
use bytes::Bytes;

use super::column::{ColumnType, TextForm, Unit};
use super::{array, interval, temporal};
use crate::connect::java::decimal as numeric;
use crate::connect::{Type, Value};

const MILLIS_PER_DAY: i64 = 86_400_000;

impl ColumnType {
    /// Reads a pgoutput text value as this column type.
    pub fn parse(&self, text: &Bytes) -> Option<Value> {
        let str = || std::str::from_utf8(text).ok();
        match self.form {
            TextForm::Plain(ty) => plain(ty, text),
            TextForm::Timestamp(_)
            | TextForm::Time(_)
            | TextForm::Date
            | TextForm::JavaTimestamp
            | TextForm::JavaTime
            | TextForm::JavaDate
            | TextForm::Zoned(_)
            | TextForm::ZonedTime
            | TextForm::IsoDate
            | TextForm::IsoTime
            | TextForm::IsoTimestamp => temporal_value(&self.form, str()?),
            TextForm::Decimal { scale } => {
                let (unscaled, java) = numeric::decimal(str()?, Some(scale))?;
                Some(Value::Decimal { unscaled: Bytes::from(unscaled), text: Bytes::from(java) })
            }
            TextForm::VariableDecimal => {
                let text = str()?;
                let scale = text.split_once('.').map_or(0, |(_, f)| f.len());
                let (unscaled, java) = numeric::decimal(text, None)?;
                Some(Value::Struct(vec![
                    Value::Int(i64::from(i32::try_from(scale).ok()?)),
                    Value::Decimal { unscaled: Bytes::from(unscaled), text: Bytes::from(java) },
                ]))
            }
            TextForm::DecimalText => numeric::plain_string(text).map(Value::String),
            TextForm::ByteaText(encoding) => Some(string(bytea_text(&bytea(text)?, encoding))),
            TextForm::MicroDuration => interval::parse(str()?).map(|i| Value::Int(i.micros())),
            TextForm::IntervalText => interval::parse(str()?).map(|i| string(i.iso())),
            TextForm::Array(elem) => {
                let items = array::parse(str()?)?;
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    out.push(match item {
                        None => Value::Null,
                        Some(t) => plain(elem, &Bytes::from(t))?,
                    });
                }
                Some(Value::Array(out))
            }
        }
    }
}

/// The temporal forms: Debezium's numbers for the adaptive and connect modes, ISO strings otherwise.
fn temporal_value(form: &TextForm, text: &str) -> Option<Value> {
    match *form {
        TextForm::Timestamp(unit) => {
            let us = temporal::timestamp_micros(text)?;
            Some(Value::Int(match unit {
                Unit::Millis => us.div_euclid(1000),
                Unit::Micros => us,
                Unit::Nanos => us.checked_mul(1000)?,
            }))
        }
        TextForm::Time(unit) => {
            let us = temporal::time_micros(text)?;
            Some(Value::Int(match unit {
                Unit::Millis => us / 1000,
                Unit::Micros => us,
                Unit::Nanos => us.checked_mul(1000)?,
            }))
        }
        TextForm::Date => temporal::date_days(text).map(Value::Int),
        // java.util.Date values: the instant in milliseconds (floored, as Instant.toEpochMilli),
        // and the number JsonConverter writes for the logical type.
        TextForm::JavaTimestamp => {
            let millis = temporal::timestamp_micros(text)?.div_euclid(1000);
            Some(Value::JavaDate { millis, number: millis })
        }
        TextForm::JavaTime => {
            let millis = temporal::time_micros(text)? / 1000;
            Some(Value::JavaDate { millis, number: millis })
        }
        TextForm::JavaDate => {
            let days = temporal::date_days(text)?;
            Some(Value::JavaDate { millis: days.checked_mul(MILLIS_PER_DAY)?, number: days })
        }
        // `infinity` and `-infinity` pass as they are, as Debezium writes them.
        TextForm::Zoned(digits) => Some(Value::String(
            temporal::zoned_timestamp(text, digits)
                .map_or_else(|| Bytes::copy_from_slice(text.as_bytes()), Bytes::from),
        )),
        TextForm::ZonedTime => temporal::zoned_time(text).map(string),
        TextForm::IsoDate => temporal::iso_date(text).map(string),
        TextForm::IsoTime => temporal::iso_time(text).map(string),
        TextForm::IsoTimestamp => temporal::iso_timestamp(text).map(string),
        // `ColumnType::parse` hands only the temporal forms here.
        TextForm::Plain(_)
        | TextForm::Decimal { .. }
        | TextForm::VariableDecimal
        | TextForm::DecimalText
        | TextForm::ByteaText(_)
        | TextForm::MicroDuration
        | TextForm::IntervalText
        | TextForm::Array(_) => None,
    }
}

fn string(s: String) -> Value {
    Value::String(Bytes::from(s))
}

/// Reads a pgoutput text value as the given primitive type.
pub fn plain(ty: Type, text: &Bytes) -> Option<Value> {
    match ty {
        Type::String => std::str::from_utf8(text).ok().map(|_| Value::String(text.clone())),
        Type::Boolean => match &text[..] {
            b"t" => Some(Value::Bool(true)),
            b"f" => Some(Value::Bool(false)),
            _ => None,
        },
        Type::Int8 | Type::Int16 | Type::Int32 | Type::Int64 => {
            std::str::from_utf8(text).ok()?.parse::<i64>().ok().map(Value::Int)
        }
        Type::Bytes => bytea(text).map(|b| Value::Bytes(Bytes::from(b))),
        Type::Float32 => Some(Value::Float(f64::from(match non_finite(text) {
            Some(v) => v as f32,
            None => std::str::from_utf8(text).ok()?.parse::<f32>().ok().filter(|v| v.is_finite())?,
        }))),
        Type::Float64 => Some(Value::Float(match non_finite(text) {
            Some(v) => v,
            None => std::str::from_utf8(text).ok()?.parse::<f64>().ok().filter(|v| v.is_finite())?,
        })),
    }
}

/// float4/float8 text output is shortest round-trip digits, or one of these words.
fn non_finite(text: &[u8]) -> Option<f64> {
    match text {
        b"NaN" => Some(f64::NAN),
        b"Infinity" => Some(f64::INFINITY),
        b"-Infinity" => Some(f64::NEG_INFINITY),
        _ => None,
    }
}

/// bytea's text output in the default `hex` format: `\x` then two hex digits a byte.
fn bytea(text: &[u8]) -> Option<Vec<u8>> {
    hex::decode(text.strip_prefix(b"\\x")?).ok()
}

/// `binary.handling.mode`'s STRING forms of a bytea.
fn bytea_text(bytes: &[u8], encoding: super::BinaryHandling) -> String {
    use base64::engine::general_purpose::{STANDARD, URL_SAFE};
    match encoding {
        super::BinaryHandling::Hex => hex::encode(bytes),
        super::BinaryHandling::Base64UrlSafe => URL_SAFE.encode(bytes),
        super::BinaryHandling::Base64 | super::BinaryHandling::Bytes => STANDARD.encode(bytes),
    }
}
