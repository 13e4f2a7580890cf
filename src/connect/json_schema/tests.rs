//! The schema texts and bodies, worked out from Confluent's JsonSchemaData and everit's
//! ToStringVisitor; the member orders of hash maps were printed by Java 17 (see java::hashmap).

use bytes::Bytes;

use super::*;

fn decimal(optional: bool) -> Schema {
    Schema::Primitive {
        ty: Type::Bytes,
        optional,
        name: Some(DECIMAL.into()),
        version: Some(1),
        parameters: vec![("scale".into(), "2".into()), ("connect.decimal.precision".into(), "10".into())],
        default: None,
    }
}

/// id, name, active, price, tags: HashMap order price, name, active, id, tags.
fn order(optional: bool) -> Schema {
    Schema::Struct {
        name: Some("shop.Order".into()),
        fields: vec![
            ("id".into(), Schema::primitive(Type::Int32, false)),
            ("name".into(), Schema::optional(Type::String)),
            ("active".into(), Schema::primitive(Type::Boolean, false)),
            ("price".into(), decimal(true)),
            ("tags".into(), Schema::Array { items: Box::new(Schema::primitive(Type::String, false)), optional: false }),
        ],
        optional,
        version: None,
        doc: None,
    }
}

fn text(schema: &Schema, o: Options) -> String {
    schema_of(schema, o).unwrap().text
}

const PRICE: &str = r#"{"connect.index":3,"oneOf":[{"type":"null"},{"type":"string","title":"org.apache.kafka.connect.data.Decimal","connect.version":1,"connect.type":"bytes","connect.parameters":{"scale":"2","connect.decimal.precision":"10"}}]}"#;

#[test]
fn primitives_and_logical_types() {
    let o = Options::default();
    assert_eq!(text(&Schema::primitive(Type::String, false), o), r#"{"type":"string"}"#);
    assert_eq!(text(&Schema::optional(Type::String), o), r#"{"oneOf":[{"type":"null"},{"type":"string"}]}"#);
    assert_eq!(
        text(&Schema::named(Type::String, true, "io.debezium.data.Json"), o),
        r#"{"oneOf":[{"type":"null"},{"type":"string","title":"io.debezium.data.Json","connect.version":1}]}"#
    );
    assert_eq!(
        text(&Schema::named(Type::Int64, false, "io.debezium.time.MicroTimestamp"), o),
        r#"{"type":"integer","title":"io.debezium.time.MicroTimestamp","connect.version":1,"connect.type":"int64"}"#
    );
    assert_eq!(text(&Schema::primitive(Type::Float32, false), o), r#"{"type":"number","connect.type":"float32"}"#);
    assert_eq!(text(&Schema::primitive(Type::Int8, false), o), r#"{"type":"integer","connect.type":"int8"}"#);
    // everit prints a boolean's type after everything else.
    assert_eq!(text(&Schema::primitive(Type::Boolean, false), o), r#"{"type":"boolean"}"#);
    assert_eq!(text(&Schema::primitive(Type::Bytes, false), o), r#"{"type":"string","connect.type":"bytes"}"#);
    let numeric = Options { decimals: Decimals::Numeric, ..o };
    assert!(text(&decimal(false), numeric)
        .starts_with(r#"{"type":"number","title":"org.apache.kafka.connect.data.Decimal""#));
    // The title is what RecordNameStrategy names the subject after; an optional schema has none.
    assert_eq!(schema_of(&decimal(false), o).unwrap().title.as_deref(), Some(DECIMAL));
    assert_eq!(schema_of(&decimal(true), o).unwrap().title, None);
}

#[test]
fn a_struct_lists_its_fields_in_hash_order_with_their_index() {
    let want = format!(
        r#"{{"type":"object","title":"shop.Order","properties":{{"price":{PRICE},"name":{{"connect.index":1,"oneOf":[{{"type":"null"}},{{"type":"string"}}]}},"active":{{"connect.index":2,"type":"boolean"}},"id":{{"type":"integer","connect.index":0,"connect.type":"int32"}},"tags":{{"type":"array","connect.index":4,"items":{{"type":"string"}}}}}}}}"#
    );
    assert_eq!(text(&order(false), Options::default()), want);
    // Optional: null or the object, no title outside.
    assert_eq!(text(&order(true), Options::default()), format!(r#"{{"oneOf":[{{"type":"null"}},{want}]}}"#));
    // object.additional.properties=false, after the type.
    let closed = text(&order(false), Options { additional_properties: false, ..Options::default() });
    assert!(
        closed.starts_with(r#"{"type":"object","additionalProperties":false,"title":"shop.Order","properties":"#),
        "{closed}"
    );
    // It is JSON, and a JSON Schema of objects.
    let parsed: serde_json::Value = serde_json::from_str(&want).unwrap();
    assert_eq!(parsed["properties"]["id"]["connect.index"], 0);
}

#[test]
fn a_nested_optional_struct_carries_its_index_outside_and_its_doc_inside() {
    let inner = Schema::Struct {
        name: Some("io.debezium.data.VariableScaleDecimal".into()),
        fields: vec![
            ("scale".into(), Schema::primitive(Type::Int32, false)),
            ("value".into(), Schema::primitive(Type::Bytes, false)),
        ],
        optional: true,
        version: Some(1),
        doc: Some("Variable scaled decimal".into()),
    };
    let outer = Schema::Struct {
        name: Some("v".into()),
        fields: vec![("amount".into(), inner)],
        optional: false,
        version: None,
        doc: None,
    };
    let got = text(&outer, Options::default());
    assert!(
        got.contains(r#""amount":{"connect.index":0,"oneOf":[{"type":"null"},{"type":"object","title":"io.debezium.data.VariableScaleDecimal","description":"Variable scaled decimal","connect.version":1,"properties":{"#),
        "{got}"
    );
}

#[test]
fn bodies_are_jacksons_compact_json() {
    let value = Value::Struct(vec![
        Value::Int(7),
        Value::Null,
        Value::Bool(true),
        Value::Decimal { unscaled: Bytes::from_static(&[0x01, 0x02]), text: Bytes::from_static(b"2.58") },
        Value::Array(vec![Value::text("a")]),
    ]);
    let mut out = Vec::new();
    write(&order(false), &value, &mut out, Options::default()).unwrap();
    assert_eq!(String::from_utf8(out).unwrap(), r#"{"id":7,"name":null,"active":true,"price":"AQI=","tags":["a"]}"#);
    let mut out = Vec::new();
    write(&order(false), &value, &mut out, Options { decimals: Decimals::Numeric, ..Options::default() }).unwrap();
    assert_eq!(String::from_utf8(out).unwrap(), r#"{"id":7,"name":null,"active":true,"price":2.58,"tags":["a"]}"#);
}

#[test]
fn enums_and_unions_are_refused_by_name() {
    let e = schema_of(
        &Schema::Primitive {
            ty: Type::String,
            optional: false,
            name: None,
            version: None,
            parameters: vec![("io.confluent.connect.json.Enum.a".into(), "0".into())],
            default: None,
        },
        Options::default(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("io.confluent.connect.json.Enum.a"), "{e}");
}

/// A column's default goes after the title (everit prints `default` there), as the Java value
/// org.json prints and Jackson re-reads: a double without its zero fraction, strings as they are.
#[test]
fn defaults_follow_the_title() {
    let o = Options::default();
    let with = |s: Schema, v: Value| match s {
        Schema::Primitive { ty, optional, name, version, parameters, .. } => Schema::Primitive {
            ty,
            optional,
            name,
            version,
            parameters,
            default: Some(crate::connect::SchemaDefault(v)),
        },
        other => other,
    };
    assert_eq!(
        text(&with(Schema::optional(Type::String), Value::String(Bytes::from_static(b"new"))), o),
        r#"{"oneOf":[{"type":"null"},{"type":"string","default":"new"}]}"#
    );
    assert_eq!(
        text(&with(Schema::primitive(Type::Int32, false), Value::Int(1)), o),
        r#"{"type":"integer","default":1,"connect.type":"int32"}"#
    );
    assert_eq!(
        text(&with(Schema::primitive(Type::Float64, false), Value::Float(1.0)), o),
        r#"{"type":"number","default":1,"connect.type":"float64"}"#
    );
    assert_eq!(
        text(&with(Schema::primitive(Type::Float64, false), Value::Float(-2.5)), o),
        r#"{"type":"number","default":-2.5,"connect.type":"float64"}"#
    );
    assert_eq!(
        text(&with(Schema::primitive(Type::Boolean, false), Value::Bool(true)), o),
        r#"{"default":true,"type":"boolean"}"#
    );
}
