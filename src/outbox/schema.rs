//! Kafka Connect schemas of PostgreSQL columns, as Debezium's PostgreSQL connector assigns them, and
//! typed column values read from pgoutput's text format.

use bytes::Bytes;

use crate::pgoutput::Oid;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaType {
    String,
    Bytes,
    Boolean,
    Int16,
    Int32,
    Int64,
    Float32,
    Float64,
    /// Debezium's VariableScaleDecimal: a struct `{scale: int32, value: bytes}`.
    VariableDecimal,
    /// An ARRAY of optional elements, their type in `TextForm::Array`.
    Array,
}

impl SchemaType {
    pub fn connect_name(self) -> &'static str {
        match self {
            SchemaType::String => "string",
            SchemaType::Bytes => "bytes",
            SchemaType::Boolean => "boolean",
            SchemaType::Int16 => "int16",
            SchemaType::Int32 => "int32",
            SchemaType::Int64 => "int64",
            SchemaType::Float32 => "float",
            SchemaType::Float64 => "double",
            SchemaType::VariableDecimal => "struct",
            SchemaType::Array => "array",
        }
    }
}

/// `decimal.handling.mode`: how a `numeric` column is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DecimalHandling {
    /// A Connect Decimal for `numeric(p,s)`; Debezium's VariableScaleDecimal struct for a `numeric`
    /// without a declared precision.
    #[default]
    Precise,
    /// FLOAT64.
    Double,
    /// STRING, `BigDecimal.toPlainString`.
    String,
}

/// `binary.handling.mode`: how a `bytea` column is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BinaryHandling {
    /// BYTES.
    #[default]
    Bytes,
    /// STRING: standard base64 with padding.
    Base64,
    /// STRING: URL-safe base64 with padding.
    Base64UrlSafe,
    /// STRING: hexadecimal digits.
    Hex,
}

/// `time.precision.mode`: how `date`, `time` and `timestamp` columns are written (Debezium's
/// TemporalPrecisionMode; `timestamptz` is a ZonedTimestamp string in every mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TemporalPrecision {
    /// The column's precision decides: `timestamp(0..=3)` Timestamp (ms), else MicroTimestamp;
    /// `time(0..=3)` Time (ms), else MicroTime; `date` Date (days).
    #[default]
    Adaptive,
    /// As `adaptive`, but `time` is always MicroTime.
    AdaptiveTimeMicroseconds,
    /// MicroTimestamp and MicroTime whatever the precision.
    Microseconds,
    /// NanoTimestamp and NanoTime whatever the precision.
    Nanoseconds,
    /// Kafka Connect's logical types (Timestamp, Time, Date), milliseconds: finer digits are cut.
    Connect,
    /// ISO-8601 strings with a `Z` (IsoDate, IsoTime, IsoTimestamp).
    IsoString,
}

/// `interval.handling.mode`: how an `interval` column is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IntervalHandling {
    /// MicroDuration: INT64 microseconds, a month counted as 30.4375 days.
    #[default]
    Numeric,
    /// Interval: an ISO-8601 duration STRING, `P1Y2M3DT4H5M6.78S`.
    String,
}

/// The connector options that decide how column types are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TypeModes {
    pub decimals: DecimalHandling,
    pub binary: BinaryHandling,
    pub temporal: TemporalPrecision,
    pub intervals: IntervalHandling,
}

/// A Connect schema of a column: type, optionality, and Debezium's semantic name and version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldSchema {
    pub ty: SchemaType,
    pub optional: bool,
    pub name: Option<&'static str>,
    pub version: Option<i32>,
    /// How the column's text becomes the value, where more than its type and name decide.
    pub form: TextForm,
}

/// The conversions of a column's pgoutput text that depend on more than its schema type and name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TextForm {
    #[default]
    Plain,
    /// A ZonedTimestamp with this many fraction digits: the column's precision (6 when it has none);
    /// 0 writes them only when not zero.
    Zoned(u8),
    /// A ZonedTime (a `timetz`).
    ZonedTime,
    /// A Connect Decimal (a `numeric(p,s)` column); its schema carries both as parameters.
    Decimal { precision: u16, scale: u16 },
    /// A `numeric` written as a STRING (`decimal.handling.mode=string`): `BigDecimal.toPlainString`.
    DecimalText,
    /// A `bytea` written as a STRING (`binary.handling.mode` other than `bytes`), in this encoding.
    ByteaText(BinaryHandling),
    /// A `date`, `time` or `timestamp` written as an ISO-8601 STRING (`time.precision.mode=isostring`).
    IsoText,
    /// An `interval` written as an ISO-8601 duration STRING (`interval.handling.mode=string`).
    IntervalText,
    /// A one-dimensional array column: its elements' type and semantic name (elements are optional).
    Array { elem: SchemaType, elem_name: Option<&'static str> },
}

impl FieldSchema {
    /// A schema of this type, named or not (a named one is version 1), without special handling.
    pub fn new(ty: SchemaType, optional: bool, name: Option<&'static str>) -> FieldSchema {
        FieldSchema { ty, optional, name, version: name.map(|_| 1), form: TextForm::Plain }
    }
}

pub mod oid {
    use crate::pgoutput::Oid;
    pub const BOOL: Oid = 16;
    pub const BYTEA: Oid = 17;
    pub const CHAR: Oid = 18;
    pub const NAME: Oid = 19;
    pub const INT8: Oid = 20;
    pub const INT2: Oid = 21;
    pub const INT4: Oid = 23;
    pub const TEXT: Oid = 25;
    pub const FLOAT4: Oid = 700;
    pub const FLOAT8: Oid = 701;
    pub const NUMERIC: Oid = 1700;
    pub const JSON: Oid = 114;
    pub const XML: Oid = 142;
    pub const BPCHAR: Oid = 1042;
    pub const VARCHAR: Oid = 1043;
    pub const UUID: Oid = 2950;
    pub const JSONB: Oid = 3802;
    pub const DATE: Oid = 1082;
    pub const TIME: Oid = 1083;
    pub const TIMESTAMP: Oid = 1114;
    pub const TIMESTAMPTZ: Oid = 1184;
    pub const TIMETZ: Oid = 1266;
    pub const INTERVAL: Oid = 1186;
}

/// Debezium's semantic names for temporal columns (time.precision.mode=adaptive).
pub const TIMESTAMP_MILLIS: &str = "io.debezium.time.Timestamp";
pub const TIMESTAMP_MICROS: &str = "io.debezium.time.MicroTimestamp";
pub const TIMESTAMP_NANOS: &str = "io.debezium.time.NanoTimestamp";
pub const ZONED_TIMESTAMP: &str = "io.debezium.time.ZonedTimestamp";
pub const ZONED_TIME: &str = "io.debezium.time.ZonedTime";
pub const MICRO_DURATION: &str = "io.debezium.time.MicroDuration";
pub const INTERVAL_TEXT: &str = "io.debezium.time.Interval";
pub const DATE_DAYS: &str = "io.debezium.time.Date";
pub const TIME_MILLIS: &str = "io.debezium.time.Time";
pub const TIME_MICROS: &str = "io.debezium.time.MicroTime";
pub const TIME_NANOS: &str = "io.debezium.time.NanoTime";
/// Kafka Connect's logical types (time.precision.mode=connect), `java.util.Date` values in Java.
pub const CONNECT_TIMESTAMP: &str = "org.apache.kafka.connect.data.Timestamp";
pub const CONNECT_TIME: &str = "org.apache.kafka.connect.data.Time";
pub const CONNECT_DATE: &str = "org.apache.kafka.connect.data.Date";
pub const ISO_DATE: &str = "io.debezium.time.IsoDate";
pub const ISO_TIME: &str = "io.debezium.time.IsoTime";
pub const ISO_TIMESTAMP: &str = "io.debezium.time.IsoTimestamp";
pub const DECIMAL: &str = "org.apache.kafka.connect.data.Decimal";
pub const VARIABLE_SCALE_DECIMAL: &str = "io.debezium.data.VariableScaleDecimal";

/// Debezium's schema for a column of this type (and type modifier: a timestamp's precision), or
/// `None` for types pgoutbox cannot route yet.
pub fn schema_for_column(type_oid: Oid, type_modifier: i32, optional: bool, modes: TypeModes) -> Option<FieldSchema> {
    if type_oid == oid::BYTEA && modes.binary != BinaryHandling::Bytes {
        return Some(FieldSchema {
            form: TextForm::ByteaText(modes.binary),
            ..FieldSchema::new(SchemaType::String, optional, None)
        });
    }
    let decimals = modes.decimals;
    if type_oid == oid::NUMERIC && decimals != DecimalHandling::Precise {
        let ty = if decimals == DecimalHandling::Double { SchemaType::Float64 } else { SchemaType::String };
        return Some(FieldSchema {
            form: if ty == SchemaType::String { TextForm::DecimalText } else { TextForm::Plain },
            ..FieldSchema::new(ty, optional, None)
        });
    }
    match type_oid {
        oid::DATE | oid::TIME | oid::TIMESTAMP => temporal_schema(type_oid, type_modifier, optional, modes.temporal),
        oid::TIMESTAMPTZ => {
            let digits = if (0..=6).contains(&type_modifier) { type_modifier as u8 } else { 6 };
            Some(FieldSchema {
                form: TextForm::Zoned(digits),
                ..FieldSchema::new(SchemaType::String, optional, Some(ZONED_TIMESTAMP))
            })
        }
        _ if array_element(type_oid).is_some() => {
            let e = schema_for(array_element(type_oid)?, true)?;
            Some(FieldSchema {
                form: TextForm::Array { elem: e.ty, elem_name: e.name },
                ..FieldSchema::new(SchemaType::Array, optional, None)
            })
        }
        oid::INTERVAL => Some(match modes.intervals {
            IntervalHandling::Numeric => FieldSchema::new(SchemaType::Int64, optional, Some(MICRO_DURATION)),
            IntervalHandling::String => FieldSchema {
                form: TextForm::IntervalText,
                ..FieldSchema::new(SchemaType::String, optional, Some(INTERVAL_TEXT))
            },
        }),
        oid::TIMETZ => Some(FieldSchema {
            form: TextForm::ZonedTime,
            ..FieldSchema::new(SchemaType::String, optional, Some(ZONED_TIME))
        }),
        // With Debezium's default decimal.handling.mode=precise: a numeric without a declared
        // precision is a VariableScaleDecimal struct, numeric(p,s) a Connect Decimal.
        oid::NUMERIC if type_modifier < 4 => {
            Some(FieldSchema::new(SchemaType::VariableDecimal, optional, Some(VARIABLE_SCALE_DECIMAL)))
        }
        oid::NUMERIC => {
            let (precision, scale) = (((type_modifier - 4) >> 16) & 0xFFFF, (type_modifier - 4) & 0xFFFF);
            // PostgreSQL 15 allows a negative scale (stored as 11 bits); Debezium's handling of it
            // is not known here: not routed.
            if scale > 1000 {
                return None;
            }
            Some(FieldSchema {
                form: TextForm::Decimal { precision: precision as u16, scale: scale as u16 },
                ..FieldSchema::new(SchemaType::Bytes, optional, Some(DECIMAL))
            })
        }
        _ => schema_for(type_oid, optional),
    }
}

/// A `date`, `time` or `timestamp` column's schema under `time.precision.mode` (the type modifier
/// is the column's precision, -1 without one: 6).
fn temporal_schema(type_oid: Oid, type_modifier: i32, optional: bool, mode: TemporalPrecision) -> Option<FieldSchema> {
    use TemporalPrecision as M;
    let millis = (0..=3).contains(&type_modifier);
    let (ty, name) = match (type_oid, mode) {
        (_, M::IsoString) => {
            let name = match type_oid {
                oid::DATE => ISO_DATE,
                oid::TIME => ISO_TIME,
                _ => ISO_TIMESTAMP,
            };
            return Some(FieldSchema {
                form: TextForm::IsoText,
                ..FieldSchema::new(SchemaType::String, optional, Some(name))
            });
        }
        (oid::DATE, M::Connect) => (SchemaType::Int32, CONNECT_DATE),
        (oid::DATE, _) => (SchemaType::Int32, DATE_DAYS),
        (oid::TIME, M::Adaptive) if millis => (SchemaType::Int32, TIME_MILLIS),
        (oid::TIME, M::Adaptive | M::AdaptiveTimeMicroseconds | M::Microseconds) => (SchemaType::Int64, TIME_MICROS),
        (oid::TIME, M::Nanoseconds) => (SchemaType::Int64, TIME_NANOS),
        (oid::TIME, M::Connect) => (SchemaType::Int32, CONNECT_TIME),
        (_, M::Adaptive | M::AdaptiveTimeMicroseconds) if millis => (SchemaType::Int64, TIMESTAMP_MILLIS),
        (_, M::Adaptive | M::AdaptiveTimeMicroseconds | M::Microseconds) => (SchemaType::Int64, TIMESTAMP_MICROS),
        (_, M::Nanoseconds) => (SchemaType::Int64, TIMESTAMP_NANOS),
        (_, M::Connect) => (SchemaType::Int64, CONNECT_TIMESTAMP),
    };
    Some(FieldSchema::new(ty, optional, Some(name)))
}

/// Debezium's schema for a column of this type, or `None` for types pgoutbox cannot route yet.
pub fn schema_for(type_oid: Oid, optional: bool) -> Option<FieldSchema> {
    let (ty, name) = match type_oid {
        oid::BOOL => (SchemaType::Boolean, None),
        oid::BYTEA => (SchemaType::Bytes, None),
        oid::INT2 => (SchemaType::Int16, None),
        oid::INT4 => (SchemaType::Int32, None),
        oid::INT8 => (SchemaType::Int64, None),
        oid::FLOAT4 => (SchemaType::Float32, None),
        oid::FLOAT8 => (SchemaType::Float64, None),
        oid::TEXT | oid::VARCHAR | oid::BPCHAR | oid::NAME | oid::CHAR => (SchemaType::String, None),
        oid::JSON | oid::JSONB => (SchemaType::String, Some("io.debezium.data.Json")),
        oid::UUID => (SchemaType::String, Some("io.debezium.data.Uuid")),
        oid::XML => (SchemaType::String, Some("io.debezium.data.Xml")),
        _ => return None,
    };
    Some(FieldSchema::new(ty, optional, name))
}

/// A column value, typed by its schema.
#[derive(Debug, Clone, PartialEq)]
pub enum FieldValue {
    Null,
    /// UTF-8 text, shared with the replication buffer.
    String(Bytes),
    Bytes(Bytes),
    Boolean(bool),
    Int(i64),
    Float32(f32),
    Float64(f64),
    /// An array's elements.
    Array(Vec<FieldValue>),
    /// A `java.util.Date` (time.precision.mode=connect): the instant in milliseconds since the epoch
    /// (past midnight for a Time), and the number JsonConverter writes for its logical type (days
    /// for a Date, milliseconds otherwise).
    JavaDate {
        millis: i64,
        number: i64,
    },
    /// A Connect Decimal: the unscaled value as Java's `BigInteger.toByteArray` (two's complement,
    /// big-endian, minimal) and `BigDecimal.toString`.
    Decimal {
        unscaled: Bytes,
        text: Bytes,
    },
    /// A VariableScaleDecimal: the text's own scale, the unscaled bytes as for `Decimal`.
    VariableDecimal {
        scale: i32,
        unscaled: Bytes,
        text: Bytes,
    },
}

/// Reads a pgoutput text value as the given schema. `None` when the text is not of the type.
pub fn parse_value(schema: &FieldSchema, text: &Bytes) -> Option<FieldValue> {
    match schema.form {
        // `infinity` and `-infinity` pass as they are, as Debezium writes them.
        TextForm::Zoned(digits) => {
            let text = std::str::from_utf8(text).ok()?;
            Some(FieldValue::String(
                zoned_timestamp(text, digits).map_or_else(|| Bytes::copy_from_slice(text.as_bytes()), Bytes::from),
            ))
        }
        TextForm::ZonedTime => zoned_time(std::str::from_utf8(text).ok()?).map(|s| FieldValue::String(Bytes::from(s))),
        TextForm::Decimal { scale, .. } => {
            let (unscaled, text) = decimal(std::str::from_utf8(text).ok()?, Some(scale))?;
            Some(FieldValue::Decimal { unscaled: Bytes::from(unscaled), text: Bytes::from(text) })
        }
        // decimal.handling.mode=string: `toPlainString`, which is PostgreSQL's own text, and the
        // names of Debezium's special values.
        TextForm::DecimalText => {
            let special: &'static [u8] = match &text[..] {
                b"NaN" => b"NAN",
                b"Infinity" => b"POSITIVE_INFINITY",
                b"-Infinity" => b"NEGATIVE_INFINITY",
                t => {
                    decimal(std::str::from_utf8(t).ok()?, None)?;
                    return Some(FieldValue::String(text.clone()));
                }
            };
            Some(FieldValue::String(Bytes::from_static(special)))
        }
        TextForm::ByteaText(encoding) => {
            let bytes = decode_bytea_hex(text)?;
            let mut out = Vec::with_capacity(bytes.len() * 2);
            match encoding {
                BinaryHandling::Hex => {
                    for b in &bytes {
                        out.extend_from_slice(format!("{b:02x}").as_bytes());
                    }
                }
                BinaryHandling::Base64UrlSafe => {
                    super::json::base64(&mut out, &bytes);
                    for c in &mut out {
                        *c = match *c {
                            b'+' => b'-',
                            b'/' => b'_',
                            c => c,
                        };
                    }
                }
                BinaryHandling::Base64 | BinaryHandling::Bytes => super::json::base64(&mut out, &bytes),
            }
            Some(FieldValue::String(Bytes::from(out)))
        }
        TextForm::Array { elem, .. } => {
            let items = pg_array(std::str::from_utf8(text).ok()?)?;
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                out.push(match item {
                    None => FieldValue::Null,
                    Some(t) => parse_text(elem, &Bytes::from(t))?,
                });
            }
            Some(FieldValue::Array(out))
        }
        TextForm::IntervalText => {
            interval(std::str::from_utf8(text).ok()?).map(|i| FieldValue::String(Bytes::from(i.iso())))
        }
        TextForm::IsoText => {
            let text = std::str::from_utf8(text).ok()?;
            iso_text(schema.name?, text).map(|s| FieldValue::String(Bytes::from(s)))
        }
        TextForm::Plain => match schema.name {
            Some(TIMESTAMP_MILLIS) => {
                timestamp_micros(std::str::from_utf8(text).ok()?).map(|us| FieldValue::Int(us.div_euclid(1000)))
            }
            Some(TIMESTAMP_MICROS) => timestamp_micros(std::str::from_utf8(text).ok()?).map(FieldValue::Int),
            Some(TIMESTAMP_NANOS) => timestamp_micros(std::str::from_utf8(text).ok()?)
                .and_then(|us| us.checked_mul(1000))
                .map(FieldValue::Int),
            Some(DATE_DAYS) => date_days(std::str::from_utf8(text).ok()?).map(FieldValue::Int),
            Some(MICRO_DURATION) => interval(std::str::from_utf8(text).ok()?).map(|i| FieldValue::Int(i.micros())),
            Some(TIME_MILLIS) => time_micros(std::str::from_utf8(text).ok()?).map(|us| FieldValue::Int(us / 1000)),
            Some(TIME_MICROS) => time_micros(std::str::from_utf8(text).ok()?).map(FieldValue::Int),
            Some(TIME_NANOS) => time_micros(std::str::from_utf8(text).ok()?).map(|us| FieldValue::Int(us * 1000)),
            // java.util.Date values: the instant in milliseconds (floored, as Instant.toEpochMilli),
            // and the number JsonConverter writes for the logical type.
            Some(CONNECT_TIMESTAMP) => timestamp_micros(std::str::from_utf8(text).ok()?).map(|us| {
                let millis = us.div_euclid(1000);
                FieldValue::JavaDate { millis, number: millis }
            }),
            Some(CONNECT_TIME) => time_micros(std::str::from_utf8(text).ok()?).map(|us| {
                let millis = us / 1000;
                FieldValue::JavaDate { millis, number: millis }
            }),
            Some(CONNECT_DATE) => date_days(std::str::from_utf8(text).ok()?)
                .map(|days| FieldValue::JavaDate { millis: days * 86_400_000, number: days }),
            Some(VARIABLE_SCALE_DECIMAL) => {
                let text = std::str::from_utf8(text).ok()?;
                let scale = text.split_once('.').map_or(0, |(_, f)| f.len());
                let (unscaled, java) = decimal(text, None)?;
                Some(FieldValue::VariableDecimal {
                    scale: i32::try_from(scale).ok()?,
                    unscaled: Bytes::from(unscaled),
                    text: Bytes::from(java),
                })
            }
            _ => parse_text(schema.ty, text),
        },
    }
}

/// A `timestamptz` as PostgreSQL prints it (`YYYY-MM-DD HH:MM:SS[.ffffff]±HH[:MM[:SS]][ BC]`, in the
/// session's time zone) as Debezium 3.6's ZonedTimestamp: the same instant in UTC, ISO-8601 with
/// seconds always, `digits` digits of fraction (`2024-02-29T10:34:56.789000Z` for 6), and `Z`. With
/// `digits` 0, Java's `ISO_OFFSET_DATE_TIME`: the fraction without trailing zeros, only when not zero
/// (seen from Debezium: the column's precision, 6 without one). `None` when the text is not such a
/// timestamp.
pub fn zoned_timestamp(text: &str, digits: u8) -> Option<String> {
    let (text, bc) = match text.strip_suffix(" BC") {
        Some(t) => (t, " BC"),
        None => (text, ""),
    };
    let (date, rest) = text.split_once(' ')?;
    let (time, offset_secs) = split_offset(rest)?;
    let local = timestamp_micros(&format!("{date} {time}{bc}"))?;
    Some(iso_instant(local.checked_sub(offset_secs * 1_000_000)?, digits))
}

/// Microseconds since 1970 as java.time writes an instant in UTC: `yyyy-MM-ddTHH:MM:SS`, the fraction
/// as [`push_fraction`] writes it with `digits`, and `Z`.
fn iso_instant(micros: i64, digits: u8) -> String {
    let (y, m, d) = civil_from_days(micros.div_euclid(86_400_000_000));
    let mut out = format!("{}-{m:02}-{d:02}T", iso_year(y));
    push_time_of_day(&mut out, micros.rem_euclid(86_400_000_000), digits);
    out.push('Z');
    out
}

/// Microseconds past midnight as java.time writes a time in UTC: `HH:MM:SS`, the fraction without
/// trailing zeros (none when zero), and `Z`.
fn iso_time_of_day(micros: i64) -> String {
    let mut out = String::new();
    push_time_of_day(&mut out, micros, 0);
    out.push('Z');
    out
}

/// `HH:MM:SS` of microseconds past midnight, then the fraction as [`push_fraction`] writes it.
fn push_time_of_day(out: &mut String, micros: i64, digits: u8) {
    let secs = micros / 1_000_000;
    out.push_str(&format!("{:02}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60));
    push_fraction(out, micros, digits);
}

/// java.time's ISO_LOCAL_DATE year: four digits within 0..=9999, a sign beyond.
fn iso_year(y: i64) -> String {
    if (0..=9999).contains(&y) {
        format!("{y:04}")
    } else if y < 0 {
        format!("-{:04}", -y)
    } else {
        format!("+{y}")
    }
}

/// A `timetz` as PostgreSQL prints it (`HH:MM:SS[.ffffff]±HH[:MM[:SS]]`) as Debezium 3.6's
/// ZonedTime: the time in UTC (wrapping around midnight), the fraction without trailing zeros
/// whatever the column's precision (unlike ZonedTimestamp), and `Z`.
pub fn zoned_time(text: &str) -> Option<String> {
    let (time, offset_secs) = split_offset(text)?;
    Some(iso_time_of_day((time_micros(time)? - offset_secs * 1_000_000).rem_euclid(86_400_000_000)))
}

/// Splits `time±HH[:MM[:SS]]` into the time and the offset in seconds (east positive).
fn split_offset(text: &str) -> Option<(&str, i64)> {
    let at = text.rfind(['+', '-'])?;
    let (time, offset) = text.split_at(at);
    let sign: i64 = if offset.starts_with('-') { -1 } else { 1 };
    let mut parts = offset[1..].split(':');
    let mut offset_secs = 0i64;
    for unit in [3600, 60, 1] {
        if let Some(p) = parts.next() {
            if p.len() != 2 || !p.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            offset_secs += p.parse::<i64>().ok()? * unit;
        }
    }
    if parts.next().is_some() {
        return None;
    }
    Some((time, sign * offset_secs))
}

/// The fraction of a second of `micros`: `digits` digits, or with 0 only the digits up to the last
/// non-zero one (none when zero). PostgreSQL has already rounded the value to the column's precision.
fn push_fraction(out: &mut String, micros: i64, digits: u8) {
    let fraction = format!(".{:06}", micros.rem_euclid(1_000_000));
    match digits {
        0 => out.push_str(fraction.trim_end_matches('0').trim_end_matches('.')),
        d => out.push_str(&fraction[..=usize::from(d.min(6))]),
    }
}

/// A `numeric(p,s)` as PostgreSQL prints it (`-12.34`, exactly `scale` fraction digits) as Java's
/// `BigDecimal`: the unscaled value's `BigInteger.toByteArray()` and `toString()` (plain, or
/// scientific when the adjusted exponent is below -6: `1E-7`, `1.0E-7`). `None` for `NaN` or
/// anything else that is not such a number. Without `scale`, the text's own number of fraction
/// digits (a `numeric` without a declared scale).
pub fn decimal(text: &str, scale: Option<u16>) -> Option<(Vec<u8>, String)> {
    let (negative, body) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (int, frac) = body.split_once('.').unwrap_or((body, ""));
    let scale = scale.unwrap_or(frac.len().try_into().ok()?);
    if int.is_empty()
        || frac.len() != usize::from(scale)
        || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let digits: String = format!("{int}{frac}").trim_start_matches('0').to_string();
    let digits = if digits.is_empty() { "0".to_string() } else { digits };
    let negative = negative && digits != "0";
    // The magnitude in base 256, big-endian (schoolbook multiply-add over the decimal digits).
    let mut magnitude: Vec<u8> = vec![0];
    for d in digits.bytes() {
        let mut carry = u32::from(d - b'0');
        for byte in magnitude.iter_mut().rev() {
            let v = u32::from(*byte) * 10 + carry;
            *byte = (v & 0xFF) as u8;
            carry = v >> 8;
        }
        while carry > 0 {
            magnitude.insert(0, (carry & 0xFF) as u8);
            carry >>= 8;
        }
    }
    while magnitude.len() > 1 && magnitude[0] == 0 {
        magnitude.remove(0);
    }
    let bytes = if !negative {
        if magnitude[0] & 0x80 != 0 {
            magnitude.insert(0, 0);
        }
        magnitude
    } else {
        // Two's complement of the magnitude, with a sign byte when the top bit would read positive.
        let mut twos: Vec<u8> = magnitude.iter().map(|b| !b).collect();
        for byte in twos.iter_mut().rev() {
            let (v, overflow) = byte.overflowing_add(1);
            *byte = v;
            if !overflow {
                break;
            }
        }
        if twos[0] & 0x80 == 0 {
            twos.insert(0, 0xFF);
        }
        twos
    };
    let adjusted = digits.len() as i64 - 1 - i64::from(scale);
    let sign = if negative { "-" } else { "" };
    let scale = usize::from(scale);
    let text = if adjusted >= -6 {
        if scale == 0 {
            format!("{sign}{digits}")
        } else if digits.len() > scale {
            format!("{sign}{}.{}", &digits[..digits.len() - scale], &digits[digits.len() - scale..])
        } else {
            format!("{sign}0.{}{digits}", "0".repeat(scale - digits.len()))
        }
    } else {
        let rest = if digits.len() > 1 { format!(".{}", &digits[1..]) } else { String::new() };
        format!("{sign}{}{rest}E{adjusted}", &digits[..1])
    };
    Some((bytes, text))
}

/// The proleptic Gregorian date of a day count from 1970-01-01 (Howard Hinnant's civil_from_days).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// Days from 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's days_from_civil).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `YYYY-MM-DD[ BC]` as PostgreSQL prints a date (DateStyle ISO).
fn date_days(text: &str) -> Option<i64> {
    // Debezium's POSITIVE/NEGATIVE_INFINITY_LOCAL_DATE, as its Date conversion counts their days.
    match text {
        "infinity" => return Some(-2_147_472_692),
        "-infinity" => return Some(-2_147_472_691),
        _ => {}
    }
    let (text, bc) = match text.strip_suffix(" BC") {
        Some(t) => (t, true),
        None => (text, false),
    };
    let mut parts = text.splitn(3, '-');
    let y: i64 = parts.next()?.parse().ok()?;
    let m: i64 = parts.next()?.parse().ok()?;
    let d: i64 = parts.next()?.parse().ok()?;
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    // Year 1 BC is astronomical year 0.
    let y = if bc { 1 - y } else { y };
    Some(days_from_civil(y, m, d))
}

/// `YYYY-MM-DD HH:MM:SS[.ffffff][ BC]` (a timestamp without time zone, DateStyle ISO) as
/// microseconds since the epoch, the way Debezium reads it (the wall-clock value taken as UTC).
pub fn timestamp_micros(text: &str) -> Option<i64> {
    // Debezium's POSITIVE/NEGATIVE_INFINITY_LOCAL_DATE_TIME (+294247-01-10T04:00:25.200 and
    // -290308-12-21T19:59:27.600), in microseconds.
    match text {
        "infinity" => return Some(9_223_372_036_825_200_000),
        "-infinity" => return Some(-9_223_372_036_832_400_000),
        _ => {}
    }
    let (text, bc) = match text.strip_suffix(" BC") {
        Some(t) => (t, true),
        None => (text, false),
    };
    let (date, time) = text.split_once(' ')?;
    let days = date_days(&if bc { format!("{date} BC") } else { date.to_string() })?;
    let (hms, frac) = time.split_once('.').unwrap_or((time, ""));
    let mut t = hms.splitn(3, ':');
    let h: i64 = t.next()?.parse().ok()?;
    let mi: i64 = t.next()?.parse().ok()?;
    let s: i64 = t.next()?.parse().ok()?;
    if frac.len() > 6 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let micros: i64 = if frac.is_empty() { 0 } else { format!("{frac:0<6}").parse().ok()? };
    // PostgreSQL goes up to year 294276, past what an i64 of microseconds since 1970 holds.
    days.checked_mul(24)?
        .checked_add(h)?
        .checked_mul(60)?
        .checked_add(mi)?
        .checked_mul(60_000_000)?
        .checked_add(s * 1_000_000 + micros)
}

const MILLIS_PER_DAY: i64 = 86_400_000;

/// `Values.convertToString` of a `java.util.Date` (SimpleHeaderConverter): Kafka picks the layout by
/// the value, not the schema: under a day since the epoch (so every instant before 1970 too) the
/// time of day, `HH:mm:ss.SSS'Z'`; a whole number of days `yyyy-MM-dd`; otherwise
/// `yyyy-MM-dd'T'HH:mm:ss.SSS'Z'`; all in UTC.
pub fn java_date_values_string(millis: i64) -> String {
    let (days, ms) = (millis.div_euclid(MILLIS_PER_DAY), millis.rem_euclid(MILLIS_PER_DAY));
    let time = format!("{:02}:{:02}:{:02}.{:03}Z", ms / 3_600_000, ms / 60_000 % 60, ms / 1000 % 60, ms % 1000);
    if millis < MILLIS_PER_DAY {
        return time;
    }
    let (y, m, d) = civil_from_days(days);
    if ms == 0 {
        format!("{y:04}-{m:02}-{d:02}")
    } else {
        format!("{y:04}-{m:02}-{d:02}T{time}")
    }
}

/// `java.util.Date.toString()` in a JVM whose time zone is UTC (Connect's `Struct.toString`):
/// `EEE MMM dd HH:mm:ss zzz yyyy`, Julian calendar before 1582-10-15 as `java.util.Date` does.
pub fn java_date_to_string(millis: i64) -> String {
    const WEEKDAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    const GREGORIAN_CUTOVER_DAYS: i64 = -141_427; // 1582-10-15
    let (days, ms) = (millis.div_euclid(MILLIS_PER_DAY), millis.rem_euclid(MILLIS_PER_DAY));
    let (y, m, d) = if days >= GREGORIAN_CUTOVER_DAYS { civil_from_days(days) } else { julian_from_days(days) };
    // The year of the era: 1 BC (astronomical year 0) prints as 1, with no era marker.
    let y = if y <= 0 { 1 - y } else { y };
    format!(
        "{} {} {d:02} {:02}:{:02}:{:02} UTC {y}",
        WEEKDAYS[(days + 4).rem_euclid(7) as usize],
        MONTHS[(m - 1) as usize],
        ms / 3_600_000,
        ms / 60_000 % 60,
        ms / 1000 % 60
    )
}

/// (year, month, day) in the Julian calendar of a day counted from 1970-01-01.
fn julian_from_days(days: i64) -> (i64, i64, i64) {
    let c = days + 2_440_588 + 32_082; // Julian day number, shifted to March-based years from -4800
    let d = (4 * c + 3).div_euclid(1461);
    let e = c - (1461 * d).div_euclid(4);
    let m = (5 * e + 2).div_euclid(153);
    (d - 4800 + m / 10, m + 3 - 12 * (m / 10), e - (153 * m + 2).div_euclid(5) + 1)
}

/// `time.precision.mode=isostring`: PostgreSQL's text of a date, time or timestamp as Debezium's
/// IsoDate, IsoTime or IsoTimestamp string.
fn iso_text(name: &str, text: &str) -> Option<String> {
    // The fraction without trailing zeros, none when zero; a `Z` after every form (DateTimeFormatters
    // of Debezium 3.6, checked against its IsoDate/IsoTime/IsoTimestamp.toIsoString).
    match name {
        ISO_DATE => {
            let (y, m, d) = civil_from_days(date_days(text)?);
            Some(format!("{}-{m:02}-{d:02}Z", iso_year(y)))
        }
        ISO_TIME => {
            // As a java.time LocalTime, `24:00:00` is the next midnight.
            Some(iso_time_of_day(time_micros(text)? % 86_400_000_000))
        }
        _ => Some(iso_instant(timestamp_micros(text)?, 0)),
    }
}

/// The element type of the one-dimensional array types pgoutbox routes.
fn array_element(type_oid: Oid) -> Option<Oid> {
    Some(match type_oid {
        1000 => oid::BOOL,
        1005 => oid::INT2,
        1007 => oid::INT4,
        1016 => oid::INT8,
        1009 => oid::TEXT,
        1015 => oid::VARCHAR,
        1014 => oid::BPCHAR,
        1021 => oid::FLOAT4,
        1022 => oid::FLOAT8,
        2951 => oid::UUID,
        _ => return None,
    })
}

/// A one-dimensional array literal as PostgreSQL prints it (`{a,"b c",NULL,"q\"x"}`): the elements,
/// `None` for an unquoted NULL. `None` for anything else (nested arrays, explicit bounds).
pub fn pg_array(text: &str) -> Option<Vec<Option<String>>> {
    let inner = text.strip_prefix('{')?.strip_suffix('}')?;
    let mut items = Vec::new();
    if inner.is_empty() {
        return Some(items);
    }
    let mut chars = inner.chars().peekable();
    loop {
        if chars.peek() == Some(&'"') {
            chars.next();
            let mut s = String::new();
            loop {
                match chars.next()? {
                    '"' => break,
                    '\\' => s.push(chars.next()?),
                    c => s.push(c),
                }
            }
            items.push(Some(s));
        } else {
            let mut s = String::new();
            while let Some(&c) = chars.peek() {
                if c == ',' {
                    break;
                }
                if c == '{' || c == '"' || c == '\\' {
                    return None;
                }
                s.push(c);
                chars.next();
            }
            items.push(if s == "NULL" { None } else { Some(s) });
        }
        match chars.next() {
            None => return Some(items),
            Some(',') => {}
            Some(_) => return None,
        }
    }
}

/// An `interval` as pgjdbc's PGInterval holds it, which is what Debezium converts from.
#[derive(Debug, PartialEq)]
pub struct Interval {
    years: i32,
    months: i32,
    days: i32,
    hours: i32,
    minutes: i32,
    /// PGInterval's `getSeconds()`: whole seconds plus microseconds / 1e6, in floating point.
    seconds: f64,
}

/// An `interval` in PostgreSQL's default output style (`1 year 2 mons -3 days +04:05:06.78`), read
/// as PGInterval reads it: a signed time applies its sign to hours, minutes and seconds; the seconds
/// are split into whole seconds and rounded microseconds.
pub fn interval(text: &str) -> Option<Interval> {
    let mut i = Interval { years: 0, months: 0, days: 0, hours: 0, minutes: 0, seconds: 0.0 };
    let mut tokens = text.split_ascii_whitespace();
    while let Some(t) = tokens.next() {
        if t.contains(':') {
            let (sign, hms) = match t.as_bytes()[0] {
                b'-' => (-1, &t[1..]),
                b'+' => (1, &t[1..]),
                _ => (1, t),
            };
            let mut parts = hms.splitn(3, ':');
            let (h, m, s) = (parts.next()?, parts.next()?, parts.next().unwrap_or("0"));
            let digits = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit() || b == b'.');
            if !(digits(h) && digits(m) && digits(s)) {
                return None;
            }
            i.hours = sign * h.parse::<i32>().ok()?;
            i.minutes = sign * m.parse::<i32>().ok()?;
            let secs = f64::from(sign) * s.parse::<f64>().ok()?;
            let whole = secs.trunc();
            let micros = ((secs - whole) * 1e6).round();
            i.seconds = whole + micros / 1e6;
        } else {
            let n: i32 = t.parse().ok()?;
            match tokens.next()? {
                "year" | "years" => i.years = n,
                "mon" | "mons" => i.months = n,
                "day" | "days" => i.days = n,
                _ => return None,
            }
        }
    }
    Some(i)
}

impl Interval {
    /// Debezium's MicroDuration.durationMicros with 30.4375 days a month, in its order of double
    /// operations, truncated (and saturated) to a long as Java's `(long)` does.
    pub fn micros(&self) -> i64 {
        let days = f64::from(self.years.wrapping_mul(12).wrapping_add(self.months)) * 30.4375 + f64::from(self.days);
        let seconds = ((days * 24.0 + f64::from(self.hours)) * 60.0 + f64::from(self.minutes)) * 60.0 + self.seconds;
        (seconds * 1_000_000.0 + 0.0) as i64
    }

    /// Debezium's Interval.toIsoString: `P{y}Y{m}M{d}DT{h}H{m}M{s}S`, the seconds as
    /// `BigDecimal.valueOf(double)` without trailing zeros, in plain notation.
    pub fn iso(&self) -> String {
        let seconds = if self.seconds == 0.0 { "0".to_string() } else { format!("{}", self.seconds) };
        format!("P{}Y{}M{}DT{}H{}M{}S", self.years, self.months, self.days, self.hours, self.minutes, seconds)
    }
}

/// A `time` as PostgreSQL prints it (`HH:MM:SS[.ffffff]`, up to `24:00:00`): microseconds past
/// midnight.
pub fn time_micros(text: &str) -> Option<i64> {
    let (hms, frac) = text.split_once('.').unwrap_or((text, ""));
    let mut t = hms.splitn(3, ':');
    let mut part = || -> Option<i64> {
        let p = t.next()?;
        (p.len() == 2 && p.bytes().all(|b| b.is_ascii_digit())).then(|| p.parse().ok())?
    };
    let (h, mi, s) = (part()?, part()?, part()?);
    if frac.len() > 6 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let micros: i64 = if frac.is_empty() { 0 } else { format!("{frac:0<6}").parse().ok()? };
    Some((h * 3600 + mi * 60 + s) * 1_000_000 + micros)
}

/// Reads a pgoutput text value as the given schema type. `None` when the text is not of the type.
pub fn parse_text(ty: SchemaType, text: &Bytes) -> Option<FieldValue> {
    match ty {
        SchemaType::String => std::str::from_utf8(text).ok().map(|_| FieldValue::String(text.clone())),
        SchemaType::Boolean => match &text[..] {
            b"t" => Some(FieldValue::Boolean(true)),
            b"f" => Some(FieldValue::Boolean(false)),
            _ => None,
        },
        SchemaType::Int16 | SchemaType::Int32 | SchemaType::Int64 => {
            std::str::from_utf8(text).ok()?.parse::<i64>().ok().map(FieldValue::Int)
        }
        SchemaType::Bytes => decode_bytea_hex(text).map(|b| FieldValue::Bytes(Bytes::from(b))),
        SchemaType::Float32 => Some(FieldValue::Float32(match non_finite(text) {
            Some(v) => v as f32,
            None => std::str::from_utf8(text).ok()?.parse::<f32>().ok().filter(|v| v.is_finite())?,
        })),
        SchemaType::Float64 => Some(FieldValue::Float64(match non_finite(text) {
            Some(v) => v,
            None => std::str::from_utf8(text).ok()?.parse::<f64>().ok().filter(|v| v.is_finite())?,
        })),
        // Only through its schema name (parse_value).
        SchemaType::VariableDecimal | SchemaType::Array => None,
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
fn decode_bytea_hex(text: &[u8]) -> Option<Vec<u8>> {
    let hex = text.strip_prefix(b"\\x")?;
    if hex.len() % 2 != 0 {
        return None;
    }
    let nibble = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    };
    hex.chunks_exact(2).map(|p| Some(nibble(p[0])? << 4 | nibble(p[1])?)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_for_maps_debezium_semantic_types() {
        let s = schema_for(oid::UUID, false).unwrap();
        assert_eq!(
            (s.ty, s.name, s.version, s.optional),
            (SchemaType::String, Some("io.debezium.data.Uuid"), Some(1), false)
        );
        let s = schema_for(oid::JSONB, true).unwrap();
        assert_eq!((s.name, s.version), (Some("io.debezium.data.Json"), Some(1)));
        assert_eq!(schema_for(oid::VARCHAR, false).unwrap().name, None);
        assert!(schema_for(1700 /* numeric */, true).is_none());
    }

    #[test]
    fn timestamps_follow_debezium_adaptive_precision() {
        assert_eq!(timestamp_micros("1970-01-01 00:00:00"), Some(0));
        assert_eq!(timestamp_micros("2026-11-29 23:59:59.123456"), Some(1_795_996_799_123_456));
        assert_eq!(timestamp_micros("1969-12-31 23:59:59.5"), Some(-500_000));
        assert_eq!(timestamp_micros("2000-02-29 12:00:00.001"), Some(951_825_600_001_000));
        assert_eq!(date_days("1970-01-02"), Some(1));
        assert_eq!(date_days("0001-01-01 BC"), Some(days_from_civil(0, 1, 1)));
        assert_eq!(timestamp_micros("nonsense"), None);
        let ms = schema_for_column(oid::TIMESTAMP, 3, true, TypeModes::default()).unwrap();
        assert_eq!(ms.name, Some(TIMESTAMP_MILLIS));
        assert_eq!(parse_value(&ms, &Bytes::from_static(b"1970-01-01 00:00:01.234")), Some(FieldValue::Int(1234)));
        assert_eq!(
            schema_for_column(oid::TIMESTAMP, -1, true, TypeModes::default()).unwrap().name,
            Some(TIMESTAMP_MICROS)
        );
        assert_eq!(
            schema_for_column(oid::TIMESTAMPTZ, -1, true, TypeModes::default()).unwrap().name,
            Some(ZONED_TIMESTAMP)
        );
    }

    #[test]
    fn timestamptz_becomes_utc_iso_8601_like_debezium() {
        for (text, want) in [
            ("2024-02-29 12:34:56.789+02", "2024-02-29T10:34:56.789Z"),
            ("2024-02-29 12:34:56+02", "2024-02-29T10:34:56Z"),
            ("2024-01-01 00:00:00+00", "2024-01-01T00:00:00Z"),
            ("2024-01-01 00:00:00.1+00", "2024-01-01T00:00:00.1Z"),
            ("1999-12-31 23:59:59.999999-05:30", "2000-01-01T05:29:59.999999Z"),
            ("2000-01-01 00:30:00+01", "1999-12-31T23:30:00Z"),
            ("1900-01-01 00:00:00+00:09:21", "1899-12-31T23:50:39Z"),
            ("1970-01-01 00:00:00+00", "1970-01-01T00:00:00Z"),
            ("0044-03-15 12:00:00+00 BC", "-0043-03-15T12:00:00Z"),
            ("0001-01-01 00:00:00+00 BC", "0000-01-01T00:00:00Z"),
            ("10000-01-01 00:00:00+00", "+10000-01-01T00:00:00Z"),
        ] {
            assert_eq!(zoned_timestamp(text, 0).as_deref(), Some(want), "{text}");
        }
        for text in ["infinity", "-infinity", "2024-01-01 00:00:00", "2024-01-01 00:00:00+1", "x"] {
            assert_eq!(zoned_timestamp(text, 6), None, "{text}");
        }
        // The column's precision fixes the digits (6 without one), as Debezium 3.6.3 writes them.
        let value = |typmod: i32, t: &'static str| {
            let schema = schema_for_column(oid::TIMESTAMPTZ, typmod, true, TypeModes::default()).unwrap();
            parse_value(&schema, &Bytes::from_static(t.as_bytes()))
        };
        let string = |s: &'static str| Some(FieldValue::String(Bytes::from(s)));
        assert_eq!(value(-1, "2024-02-29 12:34:56.789+02"), string("2024-02-29T10:34:56.789000Z"));
        assert_eq!(value(-1, "2024-01-01 00:00:00+00"), string("2024-01-01T00:00:00.000000Z"));
        assert_eq!(value(3, "2024-01-01 00:00:00.1+00"), string("2024-01-01T00:00:00.100Z"));
        assert_eq!(value(0, "2024-01-01 00:00:01+00"), string("2024-01-01T00:00:01Z"));
        assert_eq!(value(-1, "infinity"), string("infinity"));
    }

    #[test]
    fn numerics_become_java_big_decimals() {
        let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        for (text, scale, bytes, java) in [
            // Seen from Debezium 3.6.3 (base64 BNI=, +w==, AlQL4/8=, AA==).
            ("12.34", 2, "04d2", "12.34"),
            ("-0.05", 2, "fb", "-0.05"),
            ("99999999.99", 2, "02540be3ff", "99999999.99"),
            ("0.00", 2, "00", "0.00"),
            // BigInteger.toByteArray at the sign boundaries.
            ("127", 0, "7f", "127"),
            ("128", 0, "0080", "128"),
            ("-128", 0, "80", "-128"),
            ("-129", 0, "ff7f", "-129"),
            ("-256", 0, "ff00", "-256"),
            ("-32768", 0, "8000", "-32768"),
            ("12345678901234567890123456789", 0, "27e41b3246bec9b16e398115", "12345678901234567890123456789"),
            // BigDecimal.toString goes scientific below an adjusted exponent of -6.
            ("0.000001", 6, "01", "0.000001"),
            ("0.0000001", 7, "01", "1E-7"),
            ("-0.00000010", 8, "f6", "-1.0E-7"),
            ("0.00000000", 8, "00", "0E-8"),
        ] {
            let (b, t) = decimal(text, Some(scale)).unwrap_or_else(|| panic!("{text}"));
            assert_eq!((hex(&b), t.as_str()), (bytes.to_string(), java), "{text}");
        }
        assert_eq!(decimal("NaN", Some(2)), None);
        assert_eq!(decimal("1.5", Some(2)), None);
        assert_eq!(decimal("0.0000000001", None).map(|d| d.1).as_deref(), Some("1E-10"));
        let schema = schema_for_column(oid::NUMERIC, ((10 << 16) | 2) + 4, false, TypeModes::default()).unwrap();
        assert_eq!((schema.name, schema.form), (Some(DECIMAL), TextForm::Decimal { precision: 10, scale: 2 }));
        let variable = schema_for_column(oid::NUMERIC, -1, false, TypeModes::default()).unwrap();
        assert_eq!(variable.name, Some(VARIABLE_SCALE_DECIMAL));
        assert_eq!(
            parse_value(&variable, &Bytes::from_static(b"-0.050")),
            Some(FieldValue::VariableDecimal {
                scale: 3,
                unscaled: Bytes::from_static(&[0xCE]),
                text: Bytes::from_static(b"-0.050")
            })
        );
    }

    #[test]
    fn days_round_trip_through_civil_dates() {
        for days in (-800_000..800_000).step_by(997) {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
    }

    #[test]
    fn parse_text_reads_each_type() {
        let b = |s: &'static str| Bytes::from_static(s.as_bytes());
        assert_eq!(parse_text(SchemaType::Int64, &b("-42")), Some(FieldValue::Int(-42)));
        assert_eq!(parse_text(SchemaType::Boolean, &b("t")), Some(FieldValue::Boolean(true)));
        assert_eq!(
            parse_text(SchemaType::Bytes, &b("\\x00fF")),
            Some(FieldValue::Bytes(Bytes::from_static(&[0, 255])))
        );
        assert_eq!(parse_text(SchemaType::Bytes, &b("\\x0")), None);
        assert_eq!(parse_text(SchemaType::Int32, &b("x")), None);
    }

    fn temporal(type_oid: Oid, modifier: i32, mode: TemporalPrecision) -> (SchemaType, &'static str) {
        let modes = TypeModes { temporal: mode, ..TypeModes::default() };
        let s = schema_for_column(type_oid, modifier, true, modes).unwrap();
        (s.ty, s.name.unwrap())
    }

    /// The schemas Debezium 3.6's TemporalPrecisionMode builders give (printed from its jars).
    #[test]
    fn temporal_schemas_follow_time_precision_mode() {
        use TemporalPrecision as M;
        let (i32_, i64_) = (SchemaType::Int32, SchemaType::Int64);
        for (oid, modifier, mode, expected) in [
            (oid::DATE, -1, M::Adaptive, (i32_, DATE_DAYS)),
            (oid::DATE, -1, M::Nanoseconds, (i32_, DATE_DAYS)),
            (oid::DATE, -1, M::Connect, (i32_, CONNECT_DATE)),
            (oid::TIME, 3, M::Adaptive, (i32_, TIME_MILLIS)),
            (oid::TIME, -1, M::Adaptive, (i64_, TIME_MICROS)),
            (oid::TIME, 0, M::AdaptiveTimeMicroseconds, (i64_, TIME_MICROS)),
            (oid::TIME, 0, M::Microseconds, (i64_, TIME_MICROS)),
            (oid::TIME, 6, M::Nanoseconds, (i64_, TIME_NANOS)),
            (oid::TIME, 6, M::Connect, (i32_, CONNECT_TIME)),
            (oid::TIMESTAMP, 0, M::Adaptive, (i64_, TIMESTAMP_MILLIS)),
            (oid::TIMESTAMP, 3, M::AdaptiveTimeMicroseconds, (i64_, TIMESTAMP_MILLIS)),
            (oid::TIMESTAMP, 4, M::Adaptive, (i64_, TIMESTAMP_MICROS)),
            (oid::TIMESTAMP, 0, M::Microseconds, (i64_, TIMESTAMP_MICROS)),
            (oid::TIMESTAMP, 0, M::Nanoseconds, (i64_, TIMESTAMP_NANOS)),
            (oid::TIMESTAMP, 3, M::Connect, (i64_, CONNECT_TIMESTAMP)),
            (oid::TIMESTAMPTZ, 3, M::Connect, (SchemaType::String, ZONED_TIMESTAMP)),
        ] {
            assert_eq!(temporal(oid, modifier, mode), expected, "oid {oid}({modifier}) under {mode:?}");
        }
        for (oid, name) in [(oid::DATE, ISO_DATE), (oid::TIME, ISO_TIME), (oid::TIMESTAMP, ISO_TIMESTAMP)] {
            assert_eq!(temporal(oid, 3, M::IsoString), (SchemaType::String, name));
        }
    }

    #[test]
    fn temporal_values_in_every_unit() {
        let b = |s: &'static str| Bytes::from_static(s.as_bytes());
        let v = |oid: Oid, modifier: i32, mode: TemporalPrecision, text: &'static str| {
            let modes = TypeModes { temporal: mode, ..TypeModes::default() };
            parse_value(&schema_for_column(oid, modifier, true, modes).unwrap(), &b(text)).unwrap()
        };
        use FieldValue::{Int, JavaDate};
        use TemporalPrecision as M;
        assert_eq!(v(oid::TIME, 3, M::Adaptive, "12:34:56.789"), Int(45_296_789));
        assert_eq!(v(oid::TIME, -1, M::Adaptive, "12:34:56.789012"), Int(45_296_789_012));
        assert_eq!(v(oid::TIME, -1, M::Nanoseconds, "00:00:00.000001"), Int(1_000));
        assert_eq!(v(oid::TIME, -1, M::Microseconds, "24:00:00"), Int(86_400_000_000));
        assert_eq!(
            v(oid::TIME, -1, M::Connect, "12:34:56.789999"),
            JavaDate { millis: 45_296_789, number: 45_296_789 }
        );
        assert_eq!(v(oid::TIMESTAMP, -1, M::Nanoseconds, "1970-01-01 00:00:01.000002"), Int(1_000_002_000));
        // Before 1970 the milliseconds are floored, as Instant.toEpochMilli does.
        assert_eq!(v(oid::TIMESTAMP, -1, M::Connect, "1969-12-31 23:59:59.9995"), JavaDate { millis: -1, number: -1 });
        assert_eq!(v(oid::DATE, -1, M::Connect, "1970-01-03"), JavaDate { millis: 172_800_000, number: 2 });
        // Printed by Debezium 3.6.3's IsoDate/IsoTime/IsoTimestamp.toIsoString.
        let iso = |oid: Oid, text: &'static str| match v(oid, -1, M::IsoString, text) {
            FieldValue::String(s) => String::from_utf8(s.to_vec()).unwrap(),
            other => panic!("{other:?}"),
        };
        assert_eq!(iso(oid::DATE, "0001-01-01"), "0001-01-01Z");
        assert_eq!(iso(oid::TIME, "23:59:59.999"), "23:59:59.999Z");
        assert_eq!(iso(oid::TIME, "00:00:00"), "00:00:00Z");
        assert_eq!(iso(oid::TIME, "00:00:00.000001"), "00:00:00.000001Z");
        assert_eq!(iso(oid::TIME, "24:00:00"), "00:00:00Z");
        assert_eq!(iso(oid::TIMESTAMP, "1900-01-01 00:00:00.5"), "1900-01-01T00:00:00.5Z");
        assert_eq!(iso(oid::TIMESTAMP, "1969-12-31 23:59:59.999999"), "1969-12-31T23:59:59.999999Z");
        // java.time's years beyond 0..=9999.
        assert_eq!(iso(oid::DATE, "10000-01-01"), "+10000-01-01Z");
        assert_eq!(iso(oid::DATE, "0044-03-15 BC"), "-0043-03-15Z");
        // Past what an i64 of microseconds holds (PostgreSQL allows up to year 294276): not a value.
        assert_eq!(timestamp_micros("294270-01-01 00:00:00"), None);
        assert!(timestamp_micros("294246-01-01 00:00:00").is_some());
        // Debezium's stand-ins for PostgreSQL's infinities (differential cases temporal_infinities*).
        assert_eq!(v(oid::TIMESTAMP, 3, M::Adaptive, "infinity"), Int(9_223_372_036_825_200));
        assert_eq!(v(oid::TIMESTAMP, -1, M::Adaptive, "-infinity"), Int(-9_223_372_036_832_400_000));
        assert_eq!(v(oid::DATE, -1, M::Adaptive, "infinity"), Int(-2_147_472_692));
        assert_eq!(iso(oid::TIMESTAMP, "infinity"), "+294247-01-10T04:00:25.2Z");
        // ZonedTime, as Debezium 3.6.3 wrote these (differential case placement_timetz).
        assert_eq!(zoned_time("23:30:00-01").as_deref(), Some("00:30:00Z"));
        assert_eq!(zoned_time("00:15:00.5+05:30").as_deref(), Some("18:45:00.5Z"));
        assert_eq!(zoned_time("12:34:56.789012+02").as_deref(), Some("10:34:56.789012Z"));
        assert_eq!(zoned_time("23:59:59-12").as_deref(), Some("11:59:59Z"));
        assert_eq!(zoned_time("12:00:00"), None);
        assert_eq!(time_micros("1:00:00"), None);
        assert_eq!(time_micros("01:00"), None);
        assert_eq!(time_micros("01:00:00.1234567"), None);
    }

    /// Expected strings printed by Kafka 4.3's `Values.convertToString` and JDK 17's
    /// `java.util.Date.toString` (TZ=UTC).
    #[test]
    fn java_dates_print_as_kafka_and_the_jdk_do() {
        for (millis, values) in [
            (1_709_210_096_789, "2024-02-29T12:34:56.789Z"),
            (-1, "23:59:59.999Z"),
            (0, "00:00:00.000Z"),
            (86_400_000, "1970-01-02"),
            (-62_135_596_800_000, "00:00:00.000Z"),
            (1_709_164_800_000, "2024-02-29"),
            (43_200_000, "12:00:00.000Z"),
            (-86_400_000, "00:00:00.000Z"),
        ] {
            assert_eq!(java_date_values_string(millis), values, "{millis}");
        }
        for (millis, text) in [
            (1_709_210_096_789, "Thu Feb 29 12:34:56 UTC 2024"),
            (0, "Thu Jan 01 00:00:00 UTC 1970"),
            (-1, "Wed Dec 31 23:59:59 UTC 1969"),
            (-62_135_596_800_000, "Mon Jan 03 00:00:00 UTC 1"),
            (-12_219_292_800_000, "Fri Oct 15 00:00:00 UTC 1582"),
            (-12_219_292_800_001, "Thu Oct 04 23:59:59 UTC 1582"),
            (-2_208_988_800_000, "Mon Jan 01 00:00:00 UTC 1900"),
            (253_402_300_799_999, "Fri Dec 31 23:59:59 UTC 9999"),
            (86_399_999, "Thu Jan 01 23:59:59 UTC 1970"),
            // Years of the era, without an era marker, before year 1 (JDK 17).
            (-62_198_755_200_000, "Fri Jan 03 00:00:00 UTC 2"),
            (-62_135_769_600_000, "Sat Jan 01 00:00:00 UTC 1"),
            (253_402_300_800_000, "Sat Jan 01 00:00:00 UTC 10000"),
        ] {
            assert_eq!(java_date_to_string(millis), text, "{millis}");
        }
    }

    /// Expected: pgjdbc 42.7.13's PGInterval fed to Debezium 3.6.3's MicroDuration.durationMicros
    /// (30.4375 days a month) and Interval.toIsoString, as PostgresValueConverter calls them; the
    /// texts are PostgreSQL 15's output of the intervals.
    #[test]
    fn intervals_as_debezium_converts_them() {
        for (text, micros, iso) in [
            ("1 year 2 mons 3 days 04:05:06.78", 37_091_106_780_000, "P1Y2M3DT4H5M6.78S"),
            ("-1 days +02:03:00", -79_020_000_000, "P0Y0M-1DT2H3M0S"),
            ("00:00:00.000001", 1, "P0Y0M0DT0H0M0.000001S"),
            ("-00:00:01.5", -1_500_000, "P0Y0M0DT0H0M-1.5S"),
            ("10 mons", 26_298_000_000_000, "P0Y10M0DT0H0M0S"),
            ("00:00:00", 0, "P0Y0M0DT0H0M0S"),
            ("-178000000 years", i64::MIN, "P-178000000Y0M0DT0H0M0S"),
            ("3 days -00:00:00.000001", 259_199_999_999, "P0Y0M3DT0H0M-0.000001S"),
            ("1 mon 00:00:00.5", 2_629_800_500_000, "P0Y1M0DT0H0M0.5S"),
            ("-1 years -2 mons -3 days -04:05:06.789012", -37_091_106_789_012, "P-1Y-2M-3DT-4H-5M-6.789012S"),
            ("00:00:06", 6_000_000, "P0Y0M0DT0H0M6S"),
            ("1 day 100:00:00", 446_400_000_000, "P0Y0M1DT100H0M0S"),
            ("-1 days -00:00:00.5", -86_400_500_000, "P0Y0M-1DT0H0M-0.5S"),
            ("2 years 00:00:00.1", 63_115_200_100_000, "P2Y0M0DT0H0M0.1S"),
            ("12345678 days 11:11:11.111111", 1_066_666_619_471_111_040, "P0Y0M12345678DT11H11M11.111111S"),
        ] {
            let i = interval(text).unwrap_or_else(|| panic!("{text}"));
            assert_eq!((i.micros(), i.iso().as_str()), (micros, iso), "{text}");
        }
        assert_eq!(interval("1 fortnight"), None);
        assert_eq!(interval("1:x:00"), None);
    }

    #[test]
    fn array_literals_as_postgresql_prints_them() {
        let some = |v: &[Option<&str>]| Some(v.iter().map(|o| o.map(str::to_string)).collect::<Vec<_>>());
        assert_eq!(pg_array("{}"), some(&[]));
        assert_eq!(
            pg_array(r#"{a,"b c",NULL,"NULL","q\"x","back\\slash",""}"#),
            some(&[Some("a"), Some("b c"), None, Some("NULL"), Some("q\"x"), Some("back\\slash"), Some("")])
        );
        assert_eq!(pg_array("{1,-2}"), some(&[Some("1"), Some("-2")]));
        assert_eq!(pg_array("{{1,2},{3,4}}"), None);
        assert_eq!(pg_array("[0:1]={1,2}"), None);
        assert_eq!(pg_array(r#"{"unterminated}"#), None);
    }
}
