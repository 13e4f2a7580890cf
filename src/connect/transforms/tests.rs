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
    let b = Converter::Json { schemas: true }.encode(d.schema(), &d.value).unwrap().unwrap();
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
