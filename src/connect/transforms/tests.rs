use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;

use super::*;
use crate::connect::record::{Converters, Header};
use crate::connect::{Converter, Schema, Type, Value};

fn parse(class: &str, props: &[(&str, &str)]) -> Result<Transform, ConfigError> {
    let entries: BTreeMap<String, String> =
        props.iter().map(|(k, v)| (format!("transforms.t.{k}"), v.to_string())).collect();
    let mut r = Reader::new(&entries);
    Ok(Transform::parse(&format!("{PACKAGE}{class}"), &mut r, "transforms.t.")?.expect("known class"))
}

fn text(s: &str) -> Value {
    Value::String(Bytes::copy_from_slice(s.as_bytes()))
}

/// The Event Router's record of an envelope placement: `{payload, type}` under a named struct.
fn envelope() -> Record {
    let schema = Schema::Struct {
        name: Some("dbserver1.public.outbox.Order.Value".into()),
        fields: vec![
            ("payload".into(), Schema::named(Type::String, true, "io.debezium.data.Json")),
            ("type".into(), Schema::primitive(Type::String, false)),
        ],
        optional: false,
        version: None,
        doc: None,
    };
    Record {
        topic: Arc::from("outbox.event.Order"),
        partition: None,
        key: Data::new(Arc::new(Schema::primitive(Type::String, false)), text("o-1")),
        value: Data::new(Arc::new(schema), Value::Struct(vec![text("{}"), text("Created")])),
        timestamp_ms: 1_709_210_096_789,
        headers: vec![Header {
            key: Arc::from("id"),
            data: Data::new(Arc::new(Schema::primitive(Type::String, false)), text("e-1")),
        }],
    }
}

fn json(d: &Data) -> String {
    let b = Converter::json(true).encode(d.schema(), &d.value).unwrap().unwrap();
    String::from_utf8(b.to_vec()).unwrap()
}

fn headers(r: &Record) -> Vec<(String, String)> {
    let c = Converters { key: Converter::String, value: Converter::String, header: None };
    c.encode(r)
        .unwrap()
        .headers
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.map(|b| String::from_utf8(b.to_vec()).unwrap()).unwrap_or_default()))
        .collect()
}

#[test]
fn regex_router_rewrites_matching_topics_only() {
    let t = parse("RegexRouter", &[("regex", "outbox\\.event\\.(.*)"), ("replacement", "orders-$1")]).unwrap();
    assert_eq!(&*t.apply(envelope()).unwrap().unwrap().topic, "orders-Order");
    let mut other = envelope();
    other.topic = Arc::from("elsewhere");
    assert_eq!(&*t.apply(other).unwrap().unwrap().topic, "elsewhere");
    let bad = parse("RegexRouter", &[("regex", "(.*)"), ("replacement", "$2")]).unwrap();
    assert!(bad.apply(envelope()).is_err(), "a missing group fails the record, as in Java");
}

#[test]
fn timestamp_router_formats_in_utc() {
    let t = parse("TimestampRouter", &[]).unwrap();
    assert_eq!(&*t.apply(envelope()).unwrap().unwrap().topic, "outbox.event.Order-20240229");
    let t =
        parse("TimestampRouter", &[("topic.format", "${timestamp}_${topic}"), ("timestamp.format", "yyyy-MM-dd'T'HH")])
            .unwrap();
    assert_eq!(&*t.apply(envelope()).unwrap().unwrap().topic, "2024-02-29T12_outbox.event.Order");
    assert!(parse("TimestampRouter", &[("timestamp.format", "yyyy-ww")]).is_err());
}

#[test]
fn header_transforms() {
    let t = parse("InsertHeader", &[("header", "source"), ("value.literal", "pgoutbox")]).unwrap();
    let r = t.apply(envelope()).unwrap().unwrap();
    assert_eq!(headers(&r), [("id".into(), "e-1".into()), ("source".into(), "pgoutbox".into())]);
    let t = parse("DropHeaders", &[("headers", "id,other")]).unwrap();
    assert!(t.apply(envelope()).unwrap().unwrap().headers.is_empty());
    let t = parse("HeaderFrom$Value", &[("fields", "type"), ("headers", "eventType"), ("operation", "move")]).unwrap();
    let r = t.apply(envelope()).unwrap().unwrap();
    assert_eq!(headers(&r)[1], ("eventType".into(), "Created".into()));
    assert_eq!(
        json(&r.value),
        r#"{"schema":{"type":"struct","fields":[{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1,"field":"payload"}],"optional":false,"name":"dbserver1.public.outbox.Order.Value"},"payload":{"payload":"{}"}}"#
    );
    assert!(parse("HeaderFrom$Value", &[("fields", "a,b"), ("headers", "x"), ("operation", "copy")]).is_err());
}

#[test]
fn field_transforms_on_the_envelope() {
    let t =
        parse("InsertField$Value", &[("topic.field", "topic!"), ("static.field", "origin"), ("static.value", "db")])
            .unwrap();
    let r = t.apply(envelope()).unwrap().unwrap();
    assert!(
        json(&r.value)
            .ends_with(r#""payload":{"payload":"{}","type":"Created","topic":"outbox.event.Order","origin":"db"}}"#),
        "{}",
        json(&r.value)
    );
    let t = parse("ReplaceField$Value", &[("exclude", "type"), ("renames", "payload:body")]).unwrap();
    assert!(json(&t.apply(envelope()).unwrap().unwrap().value).ends_with(r#""payload":{"body":"{}"}}"#));
    let t = parse("ExtractField$Value", &[("field", "payload")]).unwrap();
    let r = t.apply(envelope()).unwrap().unwrap();
    assert_eq!(
        json(&r.value),
        r#"{"schema":{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1},"payload":"{}"}"#
    );
    let t = parse("ExtractField$Value", &[("field", "nope")]).unwrap();
    assert_eq!(t.apply(envelope()).unwrap_err().to_string(), "Unknown field: nope");
    let t = parse("ValueToKey", &[("fields", "type")]).unwrap();
    assert_eq!(
        json(&t.apply(envelope()).unwrap().unwrap().key),
        r#"{"schema":{"type":"struct","fields":[{"type":"string","optional":false,"field":"type"}],"optional":false},"payload":{"type":"Created"}}"#
    );
    let t = parse("SetSchemaMetadata$Value", &[("schema.name", "com.example.Order"), ("schema.version", "3")]).unwrap();
    assert!(json(&t.apply(envelope()).unwrap().unwrap().value)
        .contains(r#""optional":false,"name":"com.example.Order","version":3}"#));
    assert!(parse("InsertField$Value", &[("offset.field", "o")]).is_err(), "no offsets on source records");
}

#[test]
fn struct_transforms_on_a_plain_payload_fail_as_kafka_does() {
    let mut r = envelope();
    r.value = Data::new(Arc::new(Schema::named(Type::String, true, "io.debezium.data.Json")), text("{}"));
    let t = parse("InsertField$Value", &[("topic.field", "topic")]).unwrap();
    assert_eq!(
        t.apply(r.clone()).unwrap_err().to_string(),
        "Only Struct objects supported for [field insertion], found: java.lang.String"
    );
    let t = parse("HoistField$Value", &[("field", "body")]).unwrap();
    assert_eq!(
        json(&t.apply(r).unwrap().unwrap().value),
        r#"{"schema":{"type":"struct","fields":[{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1,"field":"body"}],"optional":false},"payload":{"body":"{}"}}"#
    );
}

#[test]
fn predicates_match_topics_headers_and_tombstones() {
    let entries: BTreeMap<String, String> =
        [("predicates.p.pattern", "outbox\\.event\\..*"), ("predicates.h.name", "id")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
    let mut r = Reader::new(&entries);
    let p = |r: &mut Reader<'_>, class: &str, prefix: &str| {
        Predicate::parse(&format!("org.apache.kafka.connect.transforms.predicates.{class}"), r, prefix)
            .unwrap()
            .unwrap()
    };
    let topic = p(&mut r, "TopicNameMatches", "predicates.p.");
    let header = p(&mut r, "HasHeaderKey", "predicates.h.");
    let tomb = p(&mut r, "RecordIsTombstone", "predicates.t.");
    let rec = envelope();
    assert!(topic.test(&rec) && header.test(&rec) && !tomb.test(&rec));
    let mut other = rec.clone();
    other.topic = Arc::from("xoutbox.event.Order");
    other.headers.clear();
    other.value = Data::null();
    assert!(!topic.test(&other) && !header.test(&other) && tomb.test(&other));
}

/// A record whose value is one field of `schema` holding `v`, for the value conversions.
fn one(schema: Schema, v: Value) -> Record {
    let mut r = envelope();
    let s = Schema::Struct {
        name: Some("S".into()),
        fields: vec![("f".into(), schema)],
        optional: false,
        version: None,
        doc: None,
    };
    r.value = Data::new(Arc::new(s), Value::Struct(vec![v]));
    r
}

fn field(r: &Record) -> (Schema, Value) {
    let (Some(Schema::Struct { fields, .. }), Value::Struct(values)) = (r.value.schema(), &r.value.value) else {
        panic!()
    };
    (fields[0].1.clone(), values[0].clone())
}

/// Java's conversions, as the research on Kafka 4's Cast observed them.
#[test]
fn cast_follows_java_number_semantics() {
    let cast = |from: Schema, v: Value, to: &str| {
        let t = parse("Cast$Value", &[("spec", &format!("f:{to}"))]).unwrap();
        t.apply(one(from, v)).map(|r| field(&r.unwrap()).1)
    };
    let int = |ty| Schema::primitive(ty, false);
    assert_eq!(cast(int(Type::Int32), Value::Int(300), "int8").unwrap(), Value::Int(44));
    assert_eq!(cast(int(Type::Int64), Value::Int(5_000_000_000), "int32").unwrap(), Value::Int(705_032_704));
    assert_eq!(cast(int(Type::Float64), Value::Float(1e20), "int32").unwrap(), Value::Int(2_147_483_647));
    assert_eq!(cast(int(Type::Float64), Value::Float(1e20), "int8").unwrap(), Value::Int(-1));
    assert_eq!(cast(int(Type::Float64), Value::Float(300.7), "int8").unwrap(), Value::Int(44));
    assert_eq!(cast(int(Type::Float64), Value::Float(0.5), "boolean").unwrap(), Value::Bool(false));
    assert_eq!(cast(int(Type::Float64), Value::Float(-1.9), "boolean").unwrap(), Value::Bool(true));
    assert_eq!(cast(int(Type::String), text("TRUE"), "boolean").unwrap(), Value::Bool(true));
    assert_eq!(cast(int(Type::String), text("yes"), "boolean").unwrap(), Value::Bool(false));
    assert_eq!(cast(int(Type::String), text("42"), "int8").unwrap(), Value::Int(42));
    assert_eq!(
        cast(int(Type::String), text("300"), "int8").unwrap_err().to_string(),
        "Value (300) was out of range for requested data type"
    );
    assert_eq!(
        cast(int(Type::Float32), Value::Float(f64::from(1.9f32)), "float64").unwrap(),
        Value::Float(f64::from(1.9f32))
    );
    assert_eq!(cast(int(Type::Float64), Value::Float(1e20), "string").unwrap(), text("1.0E20"));
    let decimal = Schema::Primitive {
        ty: Type::Bytes,
        optional: false,
        name: Some("org.apache.kafka.connect.data.Decimal".into()),
        version: Some(1),
        parameters: vec![("scale".into(), "2".into())],
        default: None,
    };
    let d = Value::Decimal { unscaled: Bytes::from_static(&[0x30, 0x39]), text: Bytes::from_static(b"123.45") };
    assert_eq!(cast(decimal.clone(), d.clone(), "int32").unwrap(), Value::Int(123));
    assert_eq!(cast(decimal, d, "string").unwrap(), text("123.45"));
    let ts = Schema::named(Type::Int64, false, "org.apache.kafka.connect.data.Timestamp");
    assert_eq!(
        cast(ts.clone(), Value::JavaDate { millis: 1_704_198_896_789, number: 1_704_198_896_789 }, "string").unwrap(),
        text("2024-01-02T12:34:56.789Z")
    );
    assert_eq!(
        cast(ts, Value::JavaDate { millis: 172_800_000, number: 172_800_000 }, "string").unwrap(),
        text("1970-01-03")
    );
    let time = Schema::named(Type::Int32, false, "org.apache.kafka.connect.data.Time");
    assert_eq!(
        cast(time.clone(), Value::JavaDate { millis: 3_723_004, number: 3_723_004 }, "string").unwrap(),
        text("01:02:03.004Z")
    );
    assert_eq!(cast(time, Value::JavaDate { millis: 3_723_004, number: 3_723_004 }, "int8").unwrap(), Value::Int(-4));
    assert!(parse("Cast$Value", &[("spec", "f:bytes")]).is_err());
    assert!(parse("Cast$Value", &[("spec", "int8,f:int8")]).is_err());
}

#[test]
fn mask_flatten_and_timestamp_converter() {
    let t = parse("MaskField$Value", &[("fields", "payload")]).unwrap();
    assert!(
        json(&t.apply(envelope()).unwrap().unwrap().value).ends_with(r#""payload":{"payload":"","type":"Created"}}"#)
    );
    let t = parse("MaskField$Value", &[("fields", "payload,type"), ("replacement", "***")]).unwrap();
    assert!(
        json(&t.apply(envelope()).unwrap().unwrap().value).ends_with(r#""payload":{"payload":"***","type":"***"}}"#)
    );
    let t = parse("MaskField$Value", &[("fields", "f"), ("replacement", "x")]).unwrap();
    assert!(t.apply(one(Schema::primitive(Type::Boolean, false), Value::Bool(true))).is_err());

    // Flatten: nested struct under an optional parent; the leaves become optional.
    let inner = Schema::Struct {
        name: Some("I".into()),
        fields: vec![("x".into(), Schema::primitive(Type::Int32, false))],
        optional: true,
        version: None,
        doc: None,
    };
    let mut r = one(inner, Value::Struct(vec![Value::Int(7)]));
    r = parse("Flatten$Value", &[("delimiter", "_")]).unwrap().apply(r).unwrap().unwrap();
    assert_eq!(field(&r), (Schema::primitive(Type::Int32, true), Value::Int(7)));
    assert!(json(&r.value).contains(r#""field":"f_x""#));

    // A Debezium Timestamp (INT64 milliseconds, not Connect's logical type) as text, and back.
    let ts = Schema::named(Type::Int64, false, "io.debezium.time.Timestamp");
    let t = parse(
        "TimestampConverter$Value",
        &[("field", "f"), ("target.type", "string"), ("format", "yyyy-MM-dd HH:mm:ss.SSS")],
    )
    .unwrap();
    let r = t.apply(one(ts, Value::Int(1_709_210_096_789))).unwrap().unwrap();
    assert_eq!(field(&r), (Schema::primitive(Type::String, false), text("2024-02-29 12:34:56.789")));
    let back = parse(
        "TimestampConverter$Value",
        &[("field", "f"), ("target.type", "unix"), ("format", "yyyy-MM-dd HH:mm:ss.SSS")],
    )
    .unwrap();
    assert_eq!(field(&back.apply(r).unwrap().unwrap()).1, Value::Int(1_709_210_096_789));
    let micro = Schema::named(Type::Int64, true, "io.debezium.time.MicroTimestamp");
    let t = parse(
        "TimestampConverter$Value",
        &[("field", "f"), ("target.type", "Timestamp"), ("unix.precision", "microseconds")],
    )
    .unwrap();
    let (s, v) = field(&t.apply(one(micro, Value::Int(-1_500))).unwrap().unwrap());
    assert_eq!(
        (s.name(), v),
        (Some("org.apache.kafka.connect.data.Timestamp"), Value::JavaDate { millis: -1, number: -1 })
    );
    assert!(parse("TimestampConverter$Value", &[("target.type", "date")]).is_err(), "case-sensitive, as in Kafka");
}
