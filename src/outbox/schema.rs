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
        }
    }
}

/// A Connect schema of a column: type, optionality, and Debezium's semantic name and version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldSchema {
    pub ty: SchemaType,
    pub optional: bool,
    pub name: Option<&'static str>,
    pub version: Option<i32>,
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
    pub const JSON: Oid = 114;
    pub const XML: Oid = 142;
    pub const BPCHAR: Oid = 1042;
    pub const VARCHAR: Oid = 1043;
    pub const UUID: Oid = 2950;
    pub const JSONB: Oid = 3802;
    pub const DATE: Oid = 1082;
    pub const TIMESTAMP: Oid = 1114;
    pub const TIMESTAMPTZ: Oid = 1184;
}

/// Debezium's semantic names for temporal columns (time.precision.mode=adaptive).
pub const TIMESTAMP_MILLIS: &str = "io.debezium.time.Timestamp";
pub const TIMESTAMP_MICROS: &str = "io.debezium.time.MicroTimestamp";
pub const TIMESTAMP_NANOS: &str = "io.debezium.time.NanoTimestamp";
pub const ZONED_TIMESTAMP: &str = "io.debezium.time.ZonedTimestamp";
pub const DATE_DAYS: &str = "io.debezium.time.Date";

/// Debezium's schema for a column of this type (and type modifier: a timestamp's precision), or
/// `None` for types pgoutbox cannot route yet.
pub fn schema_for_column(type_oid: Oid, type_modifier: i32, optional: bool) -> Option<FieldSchema> {
    let (ty, name) = match type_oid {
        // adaptive: timestamp(0..=3) is milliseconds, timestamp(4..=6) and plain timestamp microseconds.
        oid::TIMESTAMP if (0..=3).contains(&type_modifier) => (SchemaType::Int64, Some(TIMESTAMP_MILLIS)),
        oid::TIMESTAMP => (SchemaType::Int64, Some(TIMESTAMP_MICROS)),
        oid::TIMESTAMPTZ => (SchemaType::String, Some(ZONED_TIMESTAMP)),
        oid::DATE => (SchemaType::Int32, Some(DATE_DAYS)),
        _ => return schema_for(type_oid, optional),
    };
    Some(FieldSchema { ty, optional, version: name.map(|_| 1), name })
}

/// Debezium's schema for a column of this type, or `None` for types pgoutbox cannot route yet.
pub fn schema_for(type_oid: Oid, optional: bool) -> Option<FieldSchema> {
    let (ty, name) = match type_oid {
        oid::BOOL => (SchemaType::Boolean, None),
        oid::BYTEA => (SchemaType::Bytes, None),
        oid::INT2 => (SchemaType::Int16, None),
        oid::INT4 => (SchemaType::Int32, None),
        oid::INT8 => (SchemaType::Int64, None),
        oid::TEXT | oid::VARCHAR | oid::BPCHAR | oid::NAME | oid::CHAR => (SchemaType::String, None),
        oid::JSON | oid::JSONB => (SchemaType::String, Some("io.debezium.data.Json")),
        oid::UUID => (SchemaType::String, Some("io.debezium.data.Uuid")),
        oid::XML => (SchemaType::String, Some("io.debezium.data.Xml")),
        _ => return None,
    };
    Some(FieldSchema { ty, optional, version: name.map(|_| 1), name })
}

/// A column value, typed by its schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldValue {
    Null,
    /// UTF-8 text, shared with the replication buffer.
    String(Bytes),
    Bytes(Bytes),
    Boolean(bool),
    Int(i64),
}

/// Reads a pgoutput text value as the given schema. `None` when the text is not of the type.
pub fn parse_value(schema: &FieldSchema, text: &Bytes) -> Option<FieldValue> {
    match schema.name {
        Some(TIMESTAMP_MILLIS) => {
            timestamp_micros(std::str::from_utf8(text).ok()?).map(|us| FieldValue::Int(us.div_euclid(1000)))
        }
        Some(TIMESTAMP_MICROS) => timestamp_micros(std::str::from_utf8(text).ok()?).map(FieldValue::Int),
        Some(DATE_DAYS) => date_days(std::str::from_utf8(text).ok()?).map(FieldValue::Int),
        _ => parse_text(schema.ty, text),
    }
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
    Some(((days * 24 + h) * 60 + mi) * 60_000_000 + s * 1_000_000 + micros)
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
        let ms = schema_for_column(oid::TIMESTAMP, 3, true).unwrap();
        assert_eq!(ms.name, Some(TIMESTAMP_MILLIS));
        assert_eq!(parse_value(&ms, &Bytes::from_static(b"1970-01-01 00:00:01.234")), Some(FieldValue::Int(1234)));
        assert_eq!(schema_for_column(oid::TIMESTAMP, -1, true).unwrap().name, Some(TIMESTAMP_MICROS));
        assert_eq!(schema_for_column(oid::TIMESTAMPTZ, -1, true).unwrap().name, Some(ZONED_TIMESTAMP));
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
}
