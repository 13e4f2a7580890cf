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
        assert_eq!((s.ty, s.name, s.version, s.optional), (SchemaType::String, Some("io.debezium.data.Uuid"), Some(1), false));
        let s = schema_for(oid::JSONB, true).unwrap();
        assert_eq!((s.name, s.version), (Some("io.debezium.data.Json"), Some(1)));
        assert_eq!(schema_for(oid::VARCHAR, false).unwrap().name, None);
        assert!(schema_for(1700 /* numeric */, true).is_none());
    }

    #[test]
    fn parse_text_reads_each_type() {
        let b = |s: &'static str| Bytes::from_static(s.as_bytes());
        assert_eq!(parse_text(SchemaType::Int64, &b("-42")), Some(FieldValue::Int(-42)));
        assert_eq!(parse_text(SchemaType::Boolean, &b("t")), Some(FieldValue::Boolean(true)));
        assert_eq!(parse_text(SchemaType::Bytes, &b("\\x00fF")), Some(FieldValue::Bytes(Bytes::from_static(&[0, 255]))));
        assert_eq!(parse_text(SchemaType::Bytes, &b("\\x0")), None);
        assert_eq!(parse_text(SchemaType::Int32, &b("x")), None);
    }
}
