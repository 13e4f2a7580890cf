//! Schemas and bytes recorded from Debezium 3.7.1 in Kafka Connect with Apicurio's AvroConverter
//! 2.6.13 (the records of `table.expand.json.payload` included), and from AvroData itself.

use bytes::Bytes;

use super::*;

fn text(s: &str) -> Value {
    Value::String(Bytes::copy_from_slice(s.as_bytes()))
}

fn encoded(schema: &Schema, value: &Value) -> String {
    let mut out = Vec::new();
    write(schema, value, &mut out, Options::default()).unwrap();
    hex::encode(out)
}

fn opt(ty: Type) -> Schema {
    Schema::optional(ty)
}

#[test]
fn the_event_routers_key_and_json_payload_as_debezium_registers_and_writes_them() {
    let key = Schema::primitive(Type::String, false);
    assert_eq!(schema_text(&key, Options::default()).unwrap(), r#""string""#);
    assert_eq!(encoded(&key, &text("A-1")), "06412d31");

    let json = Schema::named(Type::String, true, "io.debezium.data.Json");
    assert_eq!(
        schema_text(&json, Options::default()).unwrap(),
        r#"["null",{"type":"string","connect.version":1,"connect.name":"io.debezium.data.Json"}]"#
    );
    let payload = r#"{"total": 10.5, "orderId": 1}"#;
    assert_eq!(encoded(&json, &text(payload)), format!("023a{}", hex::encode(payload)));
    assert_eq!(encoded(&json, &Value::Null), "00");

    assert_eq!(schema_text(&opt(Type::String), Options::default()).unwrap(), r#"["null","string"]"#);
}

#[test]
fn an_expanded_payload_is_a_record_of_optional_fields_with_null_defaults() {
    let addr = Schema::Struct {
        name: Some("payload.addr".into()),
        fields: vec![("city".into(), opt(Type::String))],
        optional: true,
        version: None,
        doc: None,
    };
    let schema = Schema::Struct {
        name: Some("payload".into()),
        fields: vec![
            ("addr".into(), addr),
            ("items".into(), Schema::Array { items: Box::new(opt(Type::String)), optional: true }),
            ("total".into(), opt(Type::Float64)),
            ("orderId".into(), opt(Type::Int32)),
        ],
        optional: false,
        version: None,
        doc: None,
    };
    assert_eq!(
        schema_text(&schema, Options::default()).unwrap(),
        r#"{"type":"record","name":"payload","fields":[{"name":"addr","type":["null",{"type":"record","name":"addr","namespace":"payload","fields":[{"name":"city","type":["null","string"],"default":null}],"connect.name":"payload.addr"}],"default":null},{"name":"items","type":["null",{"type":"array","items":["null","string"]}],"default":null},{"name":"total","type":["null","double"],"default":null},{"name":"orderId","type":["null","int"],"default":null}],"connect.name":"payload"}"#
    );
    let value = Value::Struct(vec![
        Value::Struct(vec![text("X")]),
        Value::Array(vec![text("a"), text("b")]),
        Value::Float(3.25),
        Value::Int(2),
    ]);
    assert_eq!(encoded(&schema, &value), "02020258020402026102026200020000000000000a400204");

    let flat = Schema::Struct {
        name: Some("payload".into()),
        fields: vec![("total".into(), opt(Type::Float64)), ("orderId".into(), opt(Type::Int32))],
        optional: false,
        version: None,
        doc: None,
    };
    assert_eq!(
        schema_text(&flat, Options::default()).unwrap(),
        r#"{"type":"record","name":"payload","fields":[{"name":"total","type":["null","double"],"default":null},{"name":"orderId","type":["null","int"],"default":null}],"connect.name":"payload"}"#
    );
    assert_eq!(encoded(&flat, &Value::Struct(vec![Value::Float(10.5), Value::Int(1)])), "0200000000000025400202");
}

#[test]
fn numbers_are_zigzag_varints_and_little_endian_floats() {
    let long = |n: i64| {
        let mut out = Vec::new();
        super::long(n, &mut out);
        hex::encode(out)
    };
    assert_eq!(long(0), "00");
    assert_eq!(long(-1), "01");
    assert_eq!(long(1), "02");
    assert_eq!(long(-64), "7f");
    assert_eq!(long(64), "8001");
    assert_eq!(long(i64::MIN), "ffffffffffffffffff01");
    assert_eq!(encoded(&Schema::primitive(Type::Float32, false), &Value::Float(1.5)), "0000c03f");
    assert_eq!(encoded(&Schema::primitive(Type::Boolean, false), &Value::Bool(true)), "01");
}

#[test]
fn a_required_null_and_an_invalid_name_are_refused() {
    let key = Schema::primitive(Type::String, false);
    assert_eq!(write(&key, &Value::Null, &mut Vec::new(), Options::default()), Err(ConvertError::RequiredNull));
    // Avro checks names, not namespaces.
    let ok = Schema::Struct {
        name: Some("my-topic.Value".into()),
        fields: vec![],
        optional: false,
        version: None,
        doc: None,
    };
    assert_eq!(
        schema_text(&ok, Options::default()).unwrap(),
        r#"{"type":"record","name":"Value","namespace":"my-topic","fields":[],"connect.name":"my-topic.Value"}"#
    );
    let bad = Schema::Struct {
        name: Some("t".into()),
        fields: vec![("order-id".into(), opt(Type::Int32))],
        optional: false,
        version: None,
        doc: None,
    };
    let e = schema_text(&bad, Options::default()).unwrap_err().to_string();
    assert!(e.contains("`order-id` is not a valid Avro name"), "{e}");
}

#[test]
fn a_lone_surrogate_is_written_as_java_writes_it() {
    let s = Value::String(Bytes::from_static(b"a\xed\xa0\x80b"));
    assert_eq!(encoded(&Schema::primitive(Type::String, false), &s), "06613f62");
}

fn record(name: Option<&str>, fields: Vec<(&str, Schema)>, optional: bool) -> Schema {
    Schema::Struct {
        name: name.map(String::from),
        fields: fields.into_iter().map(|(n, s)| (n.to_string(), s)).collect(),
        optional,
        version: None,
        doc: None,
    }
}

/// AvroData's vectors (its `fromConnectSchema(..).toString()`, Apicurio 2.6.13 and Confluent 7.0.16).
#[test]
fn unnamed_records_are_numbered_and_a_record_is_defined_once() {
    let inner = |f: &str, ty: Type| record(None, vec![(f, opt(ty))], true);
    let s =
        record(None, vec![("a", Schema::primitive(Type::Int32, false)), ("inner", inner("b", Type::String))], false);
    assert_eq!(
        schema_text(&s, Options::default()).unwrap(),
        r#"{"type":"record","name":"ConnectDefault","namespace":"io.confluent.connect.avro","fields":[{"name":"a","type":"int"},{"name":"inner","type":["null",{"type":"record","name":"ConnectDefault2","fields":[{"name":"b","type":["null","string"],"default":null}]}],"default":null}]}"#
    );
    assert_eq!(encoded(&s, &Value::Struct(vec![Value::Int(1), Value::Struct(vec![text("x")])])), "0202020278");

    let same = record(None, vec![("x", opt(Type::Int32))], false);
    let s = record(None, vec![("first", same.clone()), ("second", same)], false);
    assert_eq!(
        schema_text(&s, Options::default()).unwrap(),
        r#"{"type":"record","name":"ConnectDefault","namespace":"io.confluent.connect.avro","fields":[{"name":"first","type":{"type":"record","name":"ConnectDefault2","fields":[{"name":"x","type":["null","int"],"default":null}]}},{"name":"second","type":"ConnectDefault2"}]}"#
    );

    let d3 = record(None, vec![("z", opt(Type::Int32))], true);
    let s =
        record(None, vec![("d2", record(None, vec![("d3", d3)], true)), ("other", inner("y", Type::String))], false);
    assert_eq!(
        schema_text(&s, Options::default()).unwrap(),
        r#"{"type":"record","name":"ConnectDefault","namespace":"io.confluent.connect.avro","fields":[{"name":"d2","type":["null",{"type":"record","name":"ConnectDefault2","fields":[{"name":"d3","type":["null",{"type":"record","name":"ConnectDefault3","fields":[{"name":"z","type":["null","int"],"default":null}]}],"default":null}]}],"default":null},{"name":"other","type":["null",{"type":"record","name":"ConnectDefault4","fields":[{"name":"y","type":["null","string"],"default":null}]}],"default":null}]}"#
    );

    let s = record(Some("ns.Outer"), vec![("inner", inner("b", Type::String))], false);
    assert_eq!(
        schema_text(&s, Options::default()).unwrap(),
        r#"{"type":"record","name":"Outer","namespace":"ns","fields":[{"name":"inner","type":["null",{"type":"record","name":"ConnectDefault","namespace":"io.confluent.connect.avro","fields":[{"name":"b","type":["null","string"],"default":null}]}],"default":null}],"connect.name":"ns.Outer"}"#
    );
}

#[test]
fn logical_types_and_debezium_names() {
    let decimal = |precision: Option<&str>| Schema::Primitive {
        ty: Type::Bytes,
        optional: false,
        name: Some(DECIMAL.into()),
        version: Some(1),
        parameters: std::iter::once(("scale".to_string(), "2".to_string()))
            .chain(precision.map(|p| ("connect.decimal.precision".to_string(), p.to_string())))
            .collect(),
        default: None,
    };
    assert_eq!(
        schema_text(&decimal(None), Options::default()).unwrap(),
        r#"{"type":"bytes","scale":2,"precision":64,"connect.version":1,"connect.parameters":{"scale":"2"},"connect.name":"org.apache.kafka.connect.data.Decimal","logicalType":"decimal"}"#
    );
    let value = Value::Decimal { unscaled: Bytes::from_static(&[0x04, 0xd2]), text: Bytes::from_static(b"12.34") };
    assert_eq!(encoded(&decimal(Some("10")), &value), "0404d2");
    let envelope = record(
        Some("dbserver1.public.outbox.Order.Value"),
        vec![
            ("id", Schema::primitive(Type::String, false)),
            ("payload", Schema::named(Type::String, true, "io.debezium.data.Json")),
            ("ts", Schema::named(Type::Int64, true, "io.debezium.time.MicroTimestamp")),
        ],
        false,
    );
    assert_eq!(
        schema_text(&envelope, Options::default()).unwrap(),
        r#"{"type":"record","name":"Value","namespace":"dbserver1.public.outbox.Order","fields":[{"name":"id","type":"string"},{"name":"payload","type":["null",{"type":"string","connect.version":1,"connect.name":"io.debezium.data.Json"}],"default":null},{"name":"ts","type":["null",{"type":"long","connect.version":1,"connect.name":"io.debezium.time.MicroTimestamp"}],"default":null}],"connect.name":"dbserver1.public.outbox.Order.Value"}"#
    );
    let v = Value::Struct(vec![text("A-1"), text(r#"{"a":1}"#), Value::Int(1704164645678000)]);
    assert_eq!(encoded(&envelope, &v), "06412d31020e7b2261223a317d02e0aec185b8fb8606");
    let int8 = Schema::primitive(Type::Int8, false);
    assert_eq!(schema_text(&int8, Options::default()).unwrap(), r#"{"type":"int","connect.type":"int8"}"#);
}

#[test]
fn two_different_structs_of_one_name_are_refused() {
    let x1 = record(Some("x"), vec![("p", opt(Type::Int32))], true);
    let x2 = record(Some("x"), vec![("q", opt(Type::String))], true);
    let s = record(Some("payload"), vec![("a", x1), ("b", x2)], false);
    let e = schema_text(&s, Options::default()).unwrap_err().to_string();
    assert!(e.contains("two different structs are both named `x`"), "{e}");
}

/// AvroData with a default: `connect.default` after the parameters, the field's `default`, and an
/// optional schema's union with the null last, so that a value is branch 0.
#[test]
fn a_default_goes_into_the_schema_and_turns_the_union_around() {
    let default = |ty: Type, optional: bool, v: Value| Schema::Primitive {
        ty,
        optional,
        name: None,
        version: None,
        parameters: Vec::new(),
        default: Some(crate::connect::SchemaDefault(v)),
    };
    let schema = Schema::Struct {
        name: Some("e.Value".into()),
        fields: vec![
            ("status".into(), default(Type::String, true, text("new"))),
            ("qty".into(), default(Type::Int32, false, Value::Int(1))),
            ("note".into(), opt(Type::String)),
        ],
        optional: false,
        version: None,
        doc: None,
    };
    assert_eq!(
        schema_text(&schema, Options::default()).unwrap(),
        r#"{"type":"record","name":"Value","namespace":"e","fields":[{"name":"status","type":[{"type":"string","connect.default":"new"},"null"],"default":"new"},{"name":"qty","type":{"type":"int","connect.default":1},"default":1},{"name":"note","type":["null","string"],"default":null}],"connect.name":"e.Value"}"#
    );
    let mut out = Vec::new();
    write(&schema, &Value::Struct(vec![text("x"), Value::Int(2), Value::Null]), &mut out, Options::default()).unwrap();
    assert_eq!(out, vec![0, 2, b'x', 4, 0]);
}
