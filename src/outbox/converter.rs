//! Kafka Connect's converters, byte for byte: how a (schema, value) pair becomes record bytes.

use bytes::Bytes;

use super::json;
use super::schema::{FieldSchema, FieldValue};
use crate::config::Converter;

/// Serialises one value as the converter would. `None` is a Kafka null (no bytes at all).
pub fn encode(converter: Converter, schema: &FieldSchema, value: &FieldValue) -> Option<Bytes> {
    match converter {
        // StringConverter: `value.toString()` in UTF-8; null stays null. Strings are passed through
        // without a copy.
        Converter::String => match value {
            FieldValue::Null => None,
            FieldValue::String(s) | FieldValue::Bytes(s) => Some(s.clone()),
            FieldValue::Boolean(b) => Some(Bytes::from_static(if *b { b"true" } else { b"false" })),
            FieldValue::Int(i) => Some(Bytes::from(i.to_string())),
            FieldValue::Float32(f) => Some(Bytes::from(super::connect::java_float_to_string(f64::from(*f), true))),
            FieldValue::Float64(f) => Some(Bytes::from(super::connect::java_float_to_string(*f, false))),
            // Debezium's Struct.toString shows the bytes' identity hash here (`[B@1b6d3586`); the
            // number is more use.
            FieldValue::Decimal { text, .. } | FieldValue::VariableDecimal { text, .. } => Some(text.clone()),
            FieldValue::JavaDate { millis, .. } => Some(Bytes::from(super::schema::java_date_to_string(*millis))),
        },
        // JsonConverter without schemas: the bare JSON value; a null with a schema is the JSON
        // literal `null`, not a Kafka null.
        Converter::Json { schemas: false } => {
            let mut out = Vec::with_capacity(value_len_hint(value));
            json::write_value(&mut out, value);
            Some(Bytes::from(out))
        }
        // BinaryDataConverter: the bytes themselves; the router only plans it for BYTES columns.
        Converter::Binary => match value {
            FieldValue::Null => None,
            FieldValue::Bytes(b) | FieldValue::String(b) => Some(b.clone()),
            FieldValue::Boolean(_)
            | FieldValue::Int(_)
            | FieldValue::Float32(_)
            | FieldValue::Float64(_)
            | FieldValue::Decimal { .. }
            | FieldValue::VariableDecimal { .. }
            | FieldValue::JavaDate { .. } => None,
        },
        Converter::Json { schemas: true } => {
            let mut out = Vec::with_capacity(value_len_hint(value) + 96);
            out.extend_from_slice(b"{\"schema\":");
            json::write_schema(&mut out, schema);
            out.extend_from_slice(b",\"payload\":");
            json::write_value(&mut out, value);
            out.push(b'}');
            Some(Bytes::from(out))
        }
    }
}

fn value_len_hint(value: &FieldValue) -> usize {
    match value {
        FieldValue::String(s) => s.len() + s.len() / 8 + 2,
        FieldValue::Bytes(b) => b.len() * 4 / 3 + 4,
        _ => 8,
    }
}

/// SimpleHeaderConverter: `Values.convertToString` in UTF-8, without quotes or schema; bytes as
/// base64.
pub fn header_value(value: &FieldValue) -> Option<Bytes> {
    if let FieldValue::Bytes(b) = value {
        let mut out = Vec::new();
        super::json::base64(&mut out, b);
        return Some(Bytes::from(out));
    }
    if let FieldValue::JavaDate { millis, .. } = value {
        return Some(Bytes::from(super::schema::java_date_values_string(*millis)));
    }
    encode(Converter::String, &FieldSchema::new(super::schema::SchemaType::String, true, None), value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outbox::schema::{oid, schema_for};

    fn enc(c: Converter, type_oid: u32, optional: bool, v: FieldValue) -> Option<String> {
        encode(c, &schema_for(type_oid, optional).unwrap(), &v).map(|b| String::from_utf8(b.to_vec()).unwrap())
    }

    fn st(s: &'static str) -> FieldValue {
        FieldValue::String(Bytes::from_static(s.as_bytes()))
    }

    // The records of debezium.md section 1.3, default outbox table.
    #[test]
    fn key_bytes_match_connect_converters() {
        assert_eq!(enc(Converter::String, oid::VARCHAR, false, st("1")).unwrap(), "1");
        assert_eq!(enc(Converter::Json { schemas: false }, oid::VARCHAR, false, st("1")).unwrap(), "\"1\"");
        assert_eq!(
            enc(Converter::Json { schemas: true }, oid::VARCHAR, false, st("1")).unwrap(),
            r#"{"schema":{"type":"string","optional":false},"payload":"1"}"#
        );
    }

    #[test]
    fn value_bytes_match_connect_converters() {
        let p = r#"{"id": 1}"#;
        assert_eq!(enc(Converter::String, oid::JSONB, true, st(p)).unwrap(), p);
        assert_eq!(enc(Converter::Json { schemas: false }, oid::JSONB, true, st(p)).unwrap(), r#""{\"id\": 1}""#);
        assert_eq!(
            enc(Converter::Json { schemas: true }, oid::JSONB, true, st(p)).unwrap(),
            r#"{"schema":{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1},"payload":"{\"id\": 1}"}"#
        );
    }

    #[test]
    fn null_values_follow_each_converter() {
        assert_eq!(enc(Converter::String, oid::JSONB, true, FieldValue::Null), None);
        assert_eq!(enc(Converter::Json { schemas: false }, oid::JSONB, true, FieldValue::Null).unwrap(), "null");
        assert_eq!(
            enc(Converter::Json { schemas: true }, oid::JSONB, true, FieldValue::Null).unwrap(),
            r#"{"schema":{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1},"payload":null}"#
        );
    }

    #[test]
    fn numbers_and_bytes_follow_json_converter() {
        assert_eq!(
            enc(Converter::Json { schemas: true }, oid::INT8, false, FieldValue::Int(7)).unwrap(),
            r#"{"schema":{"type":"int64","optional":false},"payload":7}"#
        );
        assert_eq!(enc(Converter::String, oid::INT4, false, FieldValue::Int(-3)).unwrap(), "-3");
        assert_eq!(
            enc(Converter::Json { schemas: false }, oid::BYTEA, true, FieldValue::Bytes(Bytes::from_static(b"hi")))
                .unwrap(),
            "\"aGk=\""
        );
    }
}

#[cfg(test)]
mod header_tests {
    use super::*;

    #[test]
    fn bytea_headers_are_base64_like_simple_header_converter() {
        assert_eq!(header_value(&FieldValue::Bytes(Bytes::from_static(b"hi"))).as_deref(), Some(&b"aGk="[..]));
        assert_eq!(header_value(&FieldValue::Int(5)).as_deref(), Some(&b"5"[..]));
        assert_eq!(header_value(&FieldValue::Null), None);
    }
}
