use bytes::Bytes;

use super::*;
use crate::connect::converter::Delegate;
use crate::connect::Type;

fn enc(c: Converter, schema: &Schema, v: Value) -> Option<String> {
    c.encode(Some(schema), &v).unwrap().map(|b| String::from_utf8(b.to_vec()).unwrap())
}

fn json_schema() -> Schema {
    Schema::named(Type::String, true, "io.debezium.data.Json")
}

// The records of debezium.md section 1.3, default outbox table.
#[test]
fn key_bytes_match_connect_converters() {
    let key = Schema::primitive(Type::String, false);
    assert_eq!(enc(Converter::String, &key, Value::text("1")).unwrap(), "1");
    assert_eq!(enc(Converter::json(false), &key, Value::text("1")).unwrap(), "\"1\"");
    assert_eq!(
        enc(Converter::json(true), &key, Value::text("1")).unwrap(),
        r#"{"schema":{"type":"string","optional":false},"payload":"1"}"#
    );
}

#[test]
fn value_bytes_match_connect_converters() {
    let p = r#"{"id": 1}"#;
    let v = || Value::String(Bytes::from_static(p.as_bytes()));
    assert_eq!(enc(Converter::String, &json_schema(), v()).unwrap(), p);
    assert_eq!(enc(Converter::json(false), &json_schema(), v()).unwrap(), r#""{\"id\": 1}""#);
    assert_eq!(
        enc(Converter::json(true), &json_schema(), v()).unwrap(),
        r#"{"schema":{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1},"payload":"{\"id\": 1}"}"#
    );
}

#[test]
fn null_values_follow_each_converter() {
    assert_eq!(enc(Converter::String, &json_schema(), Value::Null), None);
    assert_eq!(enc(Converter::json(false), &json_schema(), Value::Null).unwrap(), "null");
    assert_eq!(
        enc(Converter::json(true), &json_schema(), Value::Null).unwrap(),
        r#"{"schema":{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1},"payload":null}"#
    );
    assert_eq!(Converter::Binary.encode(Some(&Schema::optional(Type::Bytes)), &Value::Null).unwrap(), None);
}

#[test]
fn numbers_and_bytes_follow_json_converter() {
    let int8 = Schema::primitive(Type::Int64, false);
    assert_eq!(
        enc(Converter::json(true), &int8, Value::Int(7)).unwrap(),
        r#"{"schema":{"type":"int64","optional":false},"payload":7}"#
    );
    assert_eq!(enc(Converter::String, &Schema::primitive(Type::Int32, false), Value::Int(-3)).unwrap(), "-3");
    let bytes = Schema::optional(Type::Bytes);
    assert_eq!(enc(Converter::json(false), &bytes, Value::Bytes(Bytes::from_static(b"hi"))).unwrap(), "\"aGk=\"");
    assert_eq!(enc(Converter::Binary, &bytes, Value::Bytes(Bytes::from_static(b"hi"))).unwrap(), "hi");
}

#[test]
fn binary_converters_refuse_what_is_not_bytes() {
    let err = Converter::Binary.encode(Some(&Schema::optional(Type::String)), &Value::text("x")).unwrap_err();
    assert_eq!(err.to_string(), "BinaryDataConverter only supports BYTES");
}

/// An array as the whole value (StringConverter: `List.toString`; JsonConverter with its schema) and
/// in a header (`Values.convertToString`).
#[test]
fn arrays_as_value_and_header() {
    let schema = Schema::Array { items: Box::new(Schema::optional(Type::String)), optional: true };
    let v = Value::Array(vec![Value::text("a"), Value::Null, Value::text("q\"x")]);
    let text = |b: Option<Bytes>| String::from_utf8(b.unwrap().to_vec()).unwrap();
    assert_eq!(text(Converter::String.encode(Some(&schema), &v).unwrap()), "[a, null, q\"x]");
    let data = crate::connect::record::Data::new(std::sync::Arc::new(schema.clone()), v.clone());
    assert_eq!(text(Converter::encode_header(None, &data).unwrap()), r#"["a",null,"q\"x"]"#);
    assert_eq!(
        text(Converter::json(true).encode(Some(&schema), &v).unwrap()),
        r#"{"schema":{"type":"array","items":{"type":"string","optional":true},"optional":true},"payload":["a",null,"q\"x"]}"#
    );
    assert!(Converter::Binary.encode(Some(&schema), &v).is_err());
}

/// BinaryDataConverter with a delegate: BYTES as they are, anything else through the delegate
/// (a string key, a heartbeat struct), as Debezium's converter does.
#[test]
fn binary_data_converter_delegates_what_is_not_bytes() {
    let c = Converter::BinaryOr(Delegate::Json { schemas: false, decimals: crate::connect::json::Decimals::Base64 });
    let bytes = Schema::optional(Type::Bytes);
    assert_eq!(
        c.encode(Some(&bytes), &Value::Bytes(Bytes::from_static(b"\x00\x01"))).unwrap().as_deref(),
        Some(&b"\x00\x01"[..])
    );
    assert_eq!(c.encode(Some(&bytes), &Value::Null).unwrap(), None);
    let key = Schema::primitive(Type::String, false);
    assert_eq!(c.encode(Some(&key), &Value::text("k")).unwrap().as_deref(), Some(&b"\"k\""[..]));
    let s = Converter::BinaryOr(Delegate::String);
    assert_eq!(s.encode(Some(&key), &Value::text("k")).unwrap().as_deref(), Some(&b"k"[..]));
}

/// `decimal.format=NUMERIC`: a Decimal as a JSON number (`BigDecimal.toString`, the scale kept)
/// under the same Decimal schema; BASE64 (the default) as its unscaled bytes.
#[test]
fn json_converter_writes_decimals_as_decimal_format_says() {
    let schema = Schema::Struct {
        name: Some("e.Value".into()),
        fields: vec![(
            "amount".into(),
            Schema::Primitive {
                ty: Type::Bytes,
                optional: true,
                name: Some(crate::connect::avro::DECIMAL.into()),
                version: Some(1),
                parameters: vec![("scale".into(), "2".into()), ("connect.decimal.precision".into(), "10".into())],
                default: None,
            },
        )],
        optional: false,
        version: None,
        doc: None,
    };
    let v = |unscaled: &'static [u8], text: &'static [u8]| {
        Value::Struct(vec![Value::Decimal { unscaled: Bytes::from_static(unscaled), text: Bytes::from_static(text) }])
    };
    let numeric = Converter::Json { schemas: false, decimals: crate::connect::json::Decimals::Numeric };
    assert_eq!(enc(numeric.clone(), &schema, v(&[0x04, 0xd2], b"12.34")).unwrap(), r#"{"amount":12.34}"#);
    assert_eq!(enc(numeric.clone(), &schema, v(&[0xfb], b"-0.05")).unwrap(), r#"{"amount":-0.05}"#);
    assert_eq!(enc(numeric, &schema, Value::Struct(vec![Value::Null])).unwrap(), r#"{"amount":null}"#);
    assert_eq!(enc(Converter::json(false), &schema, v(&[0x04, 0xd2], b"12.34")).unwrap(), r#"{"amount":"BNI="}"#);
    let with_schema = Converter::Json { schemas: true, decimals: crate::connect::json::Decimals::Numeric };
    assert!(enc(with_schema, &schema, v(&[0x04, 0xd2], b"12.34"))
        .unwrap()
        .contains(r#""name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"2","connect.decimal.precision":"10"}"#));
}
