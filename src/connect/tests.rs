use bytes::Bytes;

use super::java::float::{write_java_double, write_java_float};
use super::json::{json_converter, write_schema, write_string, write_value};
use super::*;

fn text(s: &'static str) -> Value {
    Value::String(Bytes::from_static(s.as_bytes()))
}

fn schema_json(s: &Schema) -> String {
    let mut out = Vec::new();
    write_schema(&mut out, s, crate::connect::json::Decimals::Base64);
    String::from_utf8(out).unwrap()
}

fn value_json(s: &Schema, v: &Value) -> String {
    let mut out = Vec::new();
    write_value(&mut out, s, v).unwrap();
    String::from_utf8(out).unwrap()
}

fn double(v: f64) -> String {
    let mut out = Vec::new();
    write_java_double(&mut out, v);
    String::from_utf8(out).unwrap()
}

fn float(v: f32) -> String {
    let mut out = Vec::new();
    write_java_float(&mut out, v);
    String::from_utf8(out).unwrap()
}

fn named(ty: Type, optional: bool, name: &str, version: i32) -> Schema {
    Schema::Primitive {
        ty,
        optional,
        name: Some(name.into()),
        version: Some(version),
        parameters: vec![],
        default: None,
    }
}

#[test]
fn schema_json_orders_keys_like_json_converter() {
    assert_eq!(
        schema_json(&named(Type::String, true, "io.debezium.data.Json", 1)),
        r#"{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1}"#
    );
    assert_eq!(schema_json(&Schema::primitive(Type::Float32, false)), r#"{"type":"float","optional":false}"#);
    assert_eq!(schema_json(&Schema::optional(Type::Float64)), r#"{"type":"double","optional":true}"#);
    let items = Schema::Array { items: Box::new(Schema::optional(Type::Int8)), optional: true };
    assert_eq!(schema_json(&items), r#"{"type":"array","items":{"type":"int8","optional":true},"optional":true}"#);
}

// The value schema of an envelope placement (`type:envelope:eventType`), as Debezium 3.6.3 names it.
#[test]
fn schema_json_writes_envelope_struct() {
    let s = Schema::Struct {
        name: Some("dbserver1.public.outbox.Order.Value".into()),
        fields: vec![
            ("payload".into(), named(Type::String, true, "io.debezium.data.Json", 1)),
            ("eventType".into(), Schema::primitive(Type::String, false)),
        ],
        optional: false,
        version: Some(3),
        doc: None,
    };
    assert_eq!(
        schema_json(&s),
        concat!(
            r#"{"type":"struct","fields":[{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1,"field":"payload"},"#,
            r#"{"type":"string","optional":false,"field":"eventType"}],"optional":false,"name":"dbserver1.public.outbox.Order.Value","version":3}"#
        )
    );
    let v = Value::Struct(vec![text("{\"id\": 1}"), text("OrderCreated")]);
    assert_eq!(value_json(&s, &v), r#"{"payload":"{\"id\": 1}","eventType":"OrderCreated"}"#);
}

#[test]
fn values_follow_their_schema() {
    assert_eq!(
        value_json(&Schema::optional(Type::Int64), &Value::Int(-9_223_372_036_854_775_808)),
        "-9223372036854775808"
    );
    assert_eq!(value_json(&Schema::optional(Type::Boolean), &Value::Bool(false)), "false");
    assert_eq!(value_json(&Schema::optional(Type::Bytes), &Value::Bytes(Bytes::from_static(b"hi"))), r#""aGk=""#);
    assert_eq!(value_json(&Schema::optional(Type::Float32), &Value::Float(0.1)), "0.1");
    assert_eq!(value_json(&Schema::optional(Type::Float64), &Value::Float(f64::from(0.1f32))), "0.10000000149011612");
    assert_eq!(value_json(&Schema::optional(Type::String), &Value::Null), "null");
    let arr = Schema::Array { items: Box::new(Schema::optional(Type::String)), optional: true };
    assert_eq!(value_json(&arr, &Value::Array(vec![text("a"), Value::Null])), r#"["a",null]"#);
}

#[test]
fn mismatched_values_fail_like_json_converter() {
    let arr = Schema::Array { items: Box::new(Schema::optional(Type::Int32)), optional: true };
    let err = write_value(&mut Vec::new(), &arr, &text("[1]")).unwrap_err();
    assert_eq!(err.to_string(), "Invalid type for ARRAY: class java.lang.String");
    let required = Schema::primitive(Type::String, false);
    assert_eq!(write_value(&mut Vec::new(), &required, &Value::Null), Err(ConvertError::RequiredNull));
    let s = Schema::Struct {
        name: None,
        fields: vec![("a".into(), Schema::optional(Type::Int32))],
        optional: true,
        version: None,
        doc: None,
    };
    assert_eq!(
        write_value(&mut Vec::new(), &s, &Value::Struct(vec![])),
        Err(ConvertError::StructArity { fields: 1, values: 0 })
    );
}

#[test]
fn strings_escape_surrogates_like_jackson() {
    let mut out = Vec::new();
    write_string(&mut out, "a😀é\u{e000}\"\n".as_bytes());
    assert_eq!(String::from_utf8(out).unwrap(), "\"a\\uD83D\\uDE00é\u{e000}\\\"\\n\"");
    // A lone surrogate from a `json` column's `\ud800`, held as generalised UTF-8.
    let mut out = Vec::new();
    write_string(&mut out, b"x\xED\xA0\x80y");
    assert_eq!(String::from_utf8(out).unwrap(), r#""x\uD800y""#);
    let mut out = Vec::new();
    write_string(&mut out, "𝄞".as_bytes());
    assert_eq!(String::from_utf8(out).unwrap(), r#""\uD834\uDD1E""#);
}

#[test]
fn envelope_with_and_without_schemas() {
    let s = named(Type::String, true, "io.debezium.data.Json", 1);
    let v = text("{\"id\": 1}");
    let bytes = |on, s: Option<&Schema>, v: &Value| {
        json_converter(on, crate::connect::json::Decimals::Base64, s, v)
            .unwrap()
            .map(|b| String::from_utf8(b.to_vec()).unwrap())
    };
    assert_eq!(bytes(false, Some(&s), &v).unwrap(), r#""{\"id\": 1}""#);
    assert_eq!(
        bytes(true, Some(&s), &v).unwrap(),
        r#"{"schema":{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1},"payload":"{\"id\": 1}"}"#
    );
    assert_eq!(
        bytes(true, Some(&s), &Value::Null).unwrap(),
        r#"{"schema":{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1},"payload":null}"#
    );
    assert_eq!(bytes(false, Some(&s), &Value::Null).unwrap(), "null");
    // No schema: the value typed by itself; no schema and no value: a Kafka null.
    assert_eq!(bytes(true, None, &text("[]")).unwrap(), r#"{"schema":null,"payload":"[]"}"#);
    assert_eq!(bytes(false, None, &text("[]")).unwrap(), r#""[]""#);
    assert_eq!(bytes(true, None, &Value::Null), None);
}

// Expected strings printed by Double.toString on JDK 25. JDK 17 agrees on all of them but three:
// 9.999999999999999E22, 1.9999999999999998E23 and 8.409999999999999E21.
#[test]
fn doubles_print_like_java() {
    let cases: &[(f64, &str)] = &[
        (1.0, "1.0"),
        (0.0, "0.0"),
        (-0.0, "-0.0"),
        (1.5, "1.5"),
        (0.1, "0.1"),
        (1e20, "1.0E20"),
        (0.001, "0.001"),
        (0.0001, "1.0E-4"),
        (123456789.0, "1.23456789E8"),
        (1e7, "1.0E7"),
        (9999999.0, "9999999.0"),
        (1234567.125, "1234567.125"),
        (0.000_999_9, "9.999E-4"),
        (100.0, "100.0"),
        (-2.5e-7, "-2.5E-7"),
        (f64::MAX, "1.7976931348623157E308"),
        (f64::MIN_POSITIVE, "2.2250738585072014E-308"),
        (5e-324, "4.9E-324"),
        (1e23, "1.0E23"),
        (2e23, "2.0E23"),
        (8.41e21, "8.41E21"),
        (2147483648.0, "2.147483648E9"),
        (0.30000000000000004, "0.30000000000000004"),
        // 1497898211722073.25, exactly between two 17-digit decimals: the even one.
        (f64::from_bits(0x4315_4952_6b47_0d65), "1.4978982117220732E15"),
    ];
    for &(v, want) in cases {
        assert_eq!(double(v), want, "{v:e}");
    }
    assert_eq!(double(f64::NAN), r#""NaN""#);
    assert_eq!(double(f64::INFINITY), r#""Infinity""#);
    assert_eq!(double(f64::NEG_INFINITY), r#""-Infinity""#);
}

#[test]
fn floats_print_like_java() {
    let cases: &[(f32, &str)] = &[
        (1.0, "1.0"),
        (0.1, "0.1"),
        (-0.0, "-0.0"),
        (1e10, "1.0E10"),
        (3.4028235e38, "3.4028235E38"),
        (1.4e-45, "1.4E-45"),
        (16777216.0, "1.6777216E7"),
        (0.001, "0.001"),
        // 2417552.25, a tie again.
        (f32::from_bits(0x4a13_8e41), "2417552.2"),
    ];
    for &(v, want) in cases {
        assert_eq!(float(v), want, "{v:e}");
    }
}
