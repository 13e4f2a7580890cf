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
            // List.toString: `[a, b c, null]`.
            FieldValue::Array(items) => {
                let text: Vec<String> = items
                    .iter()
                    .map(|i| {
                        encode(converter, schema, i).map_or("null".into(), |b| String::from_utf8_lossy(&b).into_owned())
                    })
                    .collect();
                Some(Bytes::from(format!("[{}]", text.join(", "))))
            }
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
            | FieldValue::JavaDate { .. }
            | FieldValue::Array(_) => None,
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
    if let FieldValue::Array(items) = value {
        // Values.convertToString of a list: `["a","b c",null,1]`, strings quoted and escaped.
        let mut out = String::from("[");
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            match item {
                FieldValue::Null => out.push_str("null"),
                FieldValue::String(s) => {
                    out.push('"');
                    for c in String::from_utf8_lossy(s).chars() {
                        if c == '"' || c == '\\' {
                            out.push('\\');
                        }
                        out.push(c);
                    }
                    out.push('"');
                }
                other => out
                    .push_str(&header_value(other).map_or(String::new(), |b| String::from_utf8_lossy(&b).into_owned())),
            }
        }
        out.push(']');
        return Some(Bytes::from(out));
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

    /// An array column as the whole value (StringConverter: `List.toString`; JsonConverter with its
    /// schema) and in a header (`Values.convertToString`); the envelope and header forms are also
    /// compared with Debezium (differential case placement_arrays*).
    #[test]
    fn arrays_as_value_and_header() {
        use crate::outbox::schema::{schema_for_column, TypeModes};
        let schema = schema_for_column(1009 /* text[] */, -1, true, TypeModes::default()).unwrap();
        let s = |t: &'static str| FieldValue::String(Bytes::from_static(t.as_bytes()));
        let v = FieldValue::Array(vec![s("a"), FieldValue::Null, s("q\"x")]);
        let text = |b: Option<Bytes>| String::from_utf8(b.unwrap().to_vec()).unwrap();
        assert_eq!(text(encode(Converter::String, &schema, &v)), "[a, null, q\"x]");
        assert_eq!(text(header_value(&v)), r#"["a",null,"q\"x"]"#);
        assert_eq!(
            text(encode(Converter::Json { schemas: true }, &schema, &v)),
            r#"{"schema":{"type":"array","items":{"type":"string","optional":true},"optional":true},"payload":["a",null,"q\"x"]}"#
        );
        assert_eq!(encode(Converter::Binary, &schema, &v), None);
    }
}
