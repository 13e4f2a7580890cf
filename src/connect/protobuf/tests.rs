//! Schemas and bytes recorded from Confluent's ProtobufConverter 7.0.16 (its ProtobufData, with
//! wire-schema 4.9 and protobuf-java 3.25, as Debezium's runner ships them) through a registry
//! client, with the converter's default options: the text it registered and the record after the
//! magic byte and the 4-byte id.

use bytes::Bytes;

use super::*;
use crate::connect::java::date::GREGORIAN_CUTOVER_DAYS;

fn text(s: &str) -> Value {
    Value::String(Bytes::copy_from_slice(s.as_bytes()))
}

fn req(ty: Type) -> Schema {
    Schema::primitive(ty, false)
}

fn opt(ty: Type) -> Schema {
    Schema::optional(ty)
}

fn strukt(name: Option<&str>, optional: bool, fields: Vec<(&str, Schema)>) -> Schema {
    Schema::Struct {
        name: name.map(str::to_string),
        fields: fields.into_iter().map(|(n, s)| (n.to_string(), s)).collect(),
        optional,
        version: None,
        doc: None,
    }
}

fn array(items: Schema) -> Schema {
    Schema::Array { items: Box::new(items), optional: true }
}

/// The registered text, and the record after the registry id, in hex.
fn converted(schema: &Schema, value: &Value) -> (String, String) {
    let proto = schema_of(schema).unwrap();
    let mut out = Vec::new();
    write(schema, value, &mut out).unwrap();
    (proto.text, hex::encode(out))
}

#[test]
fn a_primitive_at_the_top_is_a_message_of_wrappers_proto() {
    for (schema, value, bytes, record) in [
        (req(Type::String), text("hello"), "020e0a0568656c6c6f", "google.protobuf.StringValue"),
        (opt(Type::String), text("hello"), "020e0a0568656c6c6f", "google.protobuf.StringValue"),
        (req(Type::Int64), Value::Int(42), "0204082a", "google.protobuf.Int64Value"),
        (
            Schema::named(Type::Int64, false, "io.debezium.time.Timestamp"),
            Value::Int(5),
            "02040805",
            "google.protobuf.Int64Value",
        ),
        (req(Type::Int32), Value::Int(-5), "020808fbffffffffffffffff01", "google.protobuf.Int32Value"),
        (req(Type::Int8), Value::Int(5), "02080805", "google.protobuf.Int32Value"),
        (req(Type::Int16), Value::Int(5), "02080805", "google.protobuf.Int32Value"),
        (
            req(Type::Bytes),
            Value::Bytes(Bytes::from_static(&[1, 2, 3])),
            "02100a03010203",
            "google.protobuf.BytesValue",
        ),
        (req(Type::Boolean), Value::Bool(true), "020c0801", "google.protobuf.BoolValue"),
        (req(Type::Float32), Value::Float(2.5), "02020d00002040", "google.protobuf.FloatValue"),
    ] {
        let (t, b) = converted(&schema, &value);
        assert_eq!(t, WRAPPERS);
        assert_eq!(b, bytes, "{schema:?}");
        assert_eq!(schema_of(&schema).unwrap().record_name, record);
    }
    // The first message of the file: its index list is the single byte 0.
    assert_eq!(converted(&req(Type::Float64), &Value::Float(1.5)).1, "0009000000000000f83f");
}

fn order() -> (Schema, Value) {
    let nested = strukt(Some("io.x.Nested"), true, vec![("a", req(Type::Int32)), ("b", opt(Type::String))]);
    let schema = strukt(
        Some("outbox.event.Order"),
        false,
        vec![
            ("id", req(Type::String)),
            ("n", opt(Type::Int64)),
            ("flag", req(Type::Boolean)),
            ("d", opt(Type::Float64)),
            ("f", opt(Type::Float32)),
            ("i8", opt(Type::Int8)),
            ("i16", opt(Type::Int16)),
            ("nested", nested),
            ("arr", array(req(Type::String))),
            ("bin", opt(Type::Bytes)),
            ("ts", Schema::named(Type::Int64, true, "io.debezium.time.MicroTimestamp")),
        ],
    );
    let value = Value::Struct(vec![
        text("e1"),
        Value::Int(5),
        Value::Bool(true),
        Value::Float(2.5),
        Value::Float(1.25),
        Value::Int(3),
        Value::Int(-4),
        Value::Struct(vec![Value::Int(7), text("x")]),
        Value::Array(vec![text("p"), text("q")]),
        Value::Bytes(Bytes::from_static(&[9])),
        Value::Int(1_704_164_645_678_000),
    ]);
    (schema, value)
}

const ORDER: &str = r#"syntax = "proto3";
package outbox.event;

message Order {
  string id = 1;
  int64 n = 2;
  bool flag = 3;
  double d = 4;
  float f = 5;
  int32 i8 = 6 [(confluent.field_meta) = {
    params: [
      {
        key: "connect.type",
        value: "int8"
      }
    ]
  }];
  int32 i16 = 7 [(confluent.field_meta) = {
    params: [
      {
        key: "connect.type",
        value: "int16"
      }
    ]
  }];
  Nested nested = 8;
  repeated string arr = 9;
  bytes bin = 10;
  int64 ts = 11;

  message Nested {
    int32 a = 1;
    string b = 2;
  }
}
"#;

#[test]
fn a_struct_is_a_message_in_its_namespace_with_its_structs_nested() {
    let (schema, value) = order();
    let (t, b) = converted(&schema, &value);
    assert_eq!(t, ORDER);
    assert_eq!(
        b,
        "000a026531100518012100000000000004402d0000a03f300338fcffffffffffffffff01420508071201784a01704a017152010958b0d7e082dcbd8303"
    );
    assert_eq!(schema_of(&schema).unwrap().record_name, "outbox.event.Order");
    // Nulls, zeros, false and "" write nothing.
    let Value::Struct(mut empty) = value else { unreachable!() };
    empty.iter_mut().for_each(|v| *v = Value::Null);
    (empty[0], empty[2]) = (text(""), Value::Bool(false));
    assert_eq!(converted(&schema, &Value::Struct(empty)).1, "00");
}

#[test]
fn unnamed_structs_are_connect_defaults_in_the_order_met() {
    let y = strukt(None, false, vec![("z", req(Type::Int64))]);
    let schema = strukt(None, false, vec![("x", req(Type::String)), ("y", y)]);
    let value = Value::Struct(vec![text("a"), Value::Struct(vec![Value::Int(1)])]);
    let (t, b) = converted(&schema, &value);
    assert_eq!(
        t,
        "syntax = \"proto3\";\n\nmessage ConnectDefault1 {\n  string x = 1;\n  ConnectDefault2 y = 2;\n\n  message ConnectDefault2 {\n    int64 z = 1;\n  }\n}\n"
    );
    assert_eq!(b, "000a016112020801");
    assert_eq!(schema_of(&schema).unwrap().record_name, "ConnectDefault1");
}

#[test]
fn connects_logical_types_are_googles_and_confluents_messages() {
    let mut decimal = Schema::named(Type::Bytes, true, "org.apache.kafka.connect.data.Decimal");
    if let Schema::Primitive { parameters, .. } = &mut decimal {
        parameters.push(("scale".into(), "2".into()));
    }
    let schema = strukt(
        Some("L"),
        false,
        vec![
            ("ts", Schema::named(Type::Int64, true, TIMESTAMP)),
            ("date", Schema::named(Type::Int32, true, DATE)),
            ("time", Schema::named(Type::Int32, true, TIME)),
            ("dec", decimal),
        ],
    );
    let date = |millis: i64, number: i64| Value::JavaDate { millis, number };
    let value = Value::Struct(vec![
        date(1_704_164_645_678, 1_704_164_645_678),
        date(19_724 * 86_400_000, 19_724),
        date(11_045_678, 11_045_678),
        Value::Decimal { unscaled: Bytes::from_static(&[0x04, 0xd2]), text: Bytes::from_static(b"12.34") },
    ]);
    let (t, b) = converted(&schema, &value);
    assert_eq!(
        t,
        r#"syntax = "proto3";

import "google/protobuf/timestamp.proto";
import "google/type/date.proto";
import "google/type/timeofday.proto";
import "confluent/type/decimal.proto";

message L {
  google.protobuf.Timestamp ts = 1;
  google.type.Date date = 2;
  google.type.TimeOfDay time = 3;
  confluent.type.Decimal dec = 4 [(confluent.field_meta) = {
    params: [
      {
        value: "2",
        key: "scale"
      }
    ]
  }];
}
"#
    );
    assert_eq!(b, "000a0c08a5facdac061080eba5c302120708e80f100118021a0c0803100418052080eba5c30222080a0204d210041802");
    // Before the epoch: seconds round down, nanos stay positive.
    let ts = strukt(Some("T"), false, vec![("ts", Schema::named(Type::Int64, false, TIMESTAMP))]);
    assert_eq!(converted(&ts, &Value::Struct(vec![date(-1500, -1500)])).1, "000a1108feffffffffffffffff011080cab5ee01");
    assert_eq!(digits(&[0xff, 0x6a]), 3, "-150");
    assert_eq!(digits(&[]), 1);
    assert_eq!(digits(&[0x00, 0x80]), 3, "128");
}

#[test]
fn nested_messages_nest_where_used_and_repeated_numbers_are_packed() {
    let inner = strukt(Some("a.b.Inner"), false, vec![("q", req(Type::Int64))]);
    let mid = strukt(Some("Mid"), true, vec![("inner", inner), ("s", req(Type::String))]);
    let item = strukt(None, true, vec![("k", opt(Type::String))]);
    let vsd = Schema::Struct {
        name: Some("io.debezium.data.VariableScaleDecimal".into()),
        fields: vec![("scale".into(), req(Type::Int32)), ("value".into(), req(Type::Bytes))],
        optional: true,
        version: Some(1),
        doc: Some("Variable scaled decimal".into()),
    };
    let schema = strukt(
        Some("dbserver1.public.outbox.Order.Value"),
        false,
        vec![
            ("mid", mid),
            ("second", strukt(Some("Second"), true, vec![("z", req(Type::Boolean))])),
            ("items", array(item)),
            ("nums", array(req(Type::Int64))),
            ("dbls", array(req(Type::Float64))),
            ("bools", array(opt(Type::Boolean))),
            ("neg", req(Type::Int64)),
            ("uni", opt(Type::String)),
            ("vsd", vsd),
            ("zdt", Schema::named(Type::String, true, "io.debezium.time.ZonedTimestamp")),
            ("json", Schema::named(Type::String, true, "io.debezium.data.Json")),
        ],
    );
    let value = Value::Struct(vec![
        Value::Struct(vec![Value::Struct(vec![Value::Int(1)]), text("s")]),
        Value::Null,
        Value::Array(vec![Value::Struct(vec![text("a")]), Value::Struct(vec![Value::Null])]),
        Value::Array(vec![Value::Int(1), Value::Int(-1), Value::Int(300)]),
        Value::Array(vec![Value::Float(0.5)]),
        Value::Array(vec![Value::Bool(true), Value::Bool(false)]),
        Value::Int(-2),
        text("\u{e9}\u{4e2d}"),
        Value::Struct(vec![Value::Int(2), Value::Bytes(Bytes::from_static(&[4, 0xd2]))]),
        text("2024-01-02T03:04:05.678Z"),
        text("{\"a\":1}"),
    ]);
    let (t, b) = converted(&schema, &value);
    assert_eq!(
        t,
        r#"syntax = "proto3";
package dbserver1.public.outbox.Order;

message Value {
  Mid mid = 1;
  Second second = 2;
  repeated ConnectDefault1 items = 3;
  repeated int64 nums = 4;
  repeated double dbls = 5;
  repeated bool bools = 6;
  int64 neg = 7;
  string uni = 8;
  VariableScaleDecimal vsd = 9;
  string zdt = 10;
  string json = 11;

  message Mid {
    Inner inner = 1;
    string s = 2;
  
    message Inner {
      int64 q = 1;
    }
  }
  message Second {
    bool z = 1;
  }
  message ConnectDefault1 {
    string k = 1;
  }
  message VariableScaleDecimal {
    int32 scale = 1;
    bytes value = 2;
  }
}
"#
    );
    assert_eq!(
        b,
        "000a070a0208011201731a030a01611a00220d01ffffffffffffffffff01ac022a08000000000000e03f3202010038feffffffffffffffff014205c3a9e4b8ad4a060802120204d25218323032342d30312d30325430333a30343a30352e3637385a5a077b2261223a317d"
    );
    assert_eq!(schema_of(&schema).unwrap().record_name, "dbserver1.public.outbox.Order.Value");
}

#[test]
fn a_struct_used_twice_is_declared_once() {
    let r = strukt(Some("R"), false, vec![("a", req(Type::Int32))]);
    let schema = strukt(Some("X"), false, vec![("r", r.clone()), ("r2", r)]);
    let value = Value::Struct(vec![Value::Struct(vec![Value::Int(0)]), Value::Struct(vec![Value::Int(1)])]);
    let (t, b) = converted(&schema, &value);
    assert_eq!(
        t,
        "syntax = \"proto3\";\n\nmessage X {\n  R r = 1;\n  R r2 = 2;\n\n  message R {\n    int32 a = 1;\n  }\n}\n"
    );
    assert_eq!(b, "000a0012020801");
}

#[test]
fn what_protobuf_cannot_hold_is_refused_naming_it() {
    let bad = strukt(Some("V"), false, vec![("weird-name", opt(Type::String))]);
    assert!(matches!(schema_of(&bad), Err(ConvertError::Protobuf(m)) if m.contains("`weird-name`")));
    let bad = strukt(Some("my-topic.Value"), false, vec![("a", opt(Type::String))]);
    assert!(matches!(schema_of(&bad), Err(ConvertError::Protobuf(m)) if m.contains("`my-topic`")));
    let nested = strukt(Some("V"), false, vec![("a", array(array(req(Type::String))))]);
    assert!(matches!(schema_of(&nested), Err(ConvertError::Protobuf(m)) if m.contains("Array cannot be nested")));
    assert!(schema_of(&array(req(Type::String))).is_err());
    assert!(schema_of(&Schema::named(Type::Int64, false, TIMESTAMP)).is_err());
    let a = strukt(Some("x.S"), false, vec![("a", req(Type::Int32))]);
    let b = strukt(Some("y.S"), false, vec![("b", req(Type::Int32))]);
    let clash = strukt(Some("V"), false, vec![("a", a), ("b", b)]);
    assert!(
        matches!(schema_of(&clash), Err(ConvertError::Protobuf(m)) if m.contains("two different structs named `S`"))
    );
}

#[test]
fn a_message_named_as_its_field_gets_message_appended() {
    let a = strukt(Some("p.a"), true, vec![("q", req(Type::Int32))]);
    let a_message = strukt(Some("aMessage"), true, vec![("q", req(Type::Int32))]);
    let schema = strukt(Some("T"), false, vec![("a", a.clone()), ("b", a_message)]);
    let (t, b) = converted(&schema, &Value::Struct(vec![Value::Struct(vec![Value::Int(1)]), Value::Null]));
    assert_eq!(
        t,
        "syntax = \"proto3\";\n\nmessage T {\n  aMessage a = 1;\n  aMessage b = 2;\n\n  message aMessage {\n    int32 q = 1;\n  }\n}\n"
    );
    assert_eq!(b, "000a020801");
    let payload = strukt(Some("payload"), true, vec![("q", req(Type::Int32))]);
    let schema = strukt(Some("payload"), false, vec![("payload", payload)]);
    assert_eq!(
        schema_of(&schema).unwrap().text,
        "syntax = \"proto3\";\n\nmessage payload {\n  payloadMessage payload = 1;\n\n  message payloadMessage {\n    int32 q = 1;\n  }\n}\n"
    );
    // A nested message named as another field: Protobuf refuses it ("y" is already defined).
    let y = strukt(Some("y"), true, vec![("q", req(Type::Int32))]);
    let schema = strukt(Some("T"), false, vec![("x", y), ("y", opt(Type::String))]);
    assert!(matches!(schema_of(&schema), Err(ConvertError::Protobuf(m)) if m.contains("both named `y`")));
}

#[test]
fn a_decimals_precision_is_an_option_before_its_scale() {
    let decimal = |scale: &str, precision: Option<&str>, optional: bool| {
        let mut d = Schema::named(Type::Bytes, optional, DECIMAL);
        if let Schema::Primitive { parameters, .. } = &mut d {
            parameters.push(("scale".into(), scale.into()));
            if let Some(p) = precision {
                parameters.push(("connect.decimal.precision".into(), p.into()));
            }
        }
        d
    };
    let schema = strukt(
        Some("N"),
        false,
        vec![
            ("p", decimal("2", Some("10"), true)),
            ("z", decimal("0", None, true)),
            ("n", decimal("3", Some("5"), false)),
        ],
    );
    let value = |unscaled: &'static [u8], text: &'static [u8]| Value::Decimal {
        unscaled: Bytes::from_static(unscaled),
        text: Bytes::from_static(text),
    };
    let (t, b) = converted(
        &schema,
        &Value::Struct(vec![value(&[0x04, 0xd2], b"12.34"), value(&[0], b"0"), value(&[0xff], b"-0.001")]),
    );
    let option = |p: Option<&str>, s: &str| {
        let precision = p.map_or(String::new(), |p| {
            format!("      {{\n        value: \"{p}\",\n        key: \"precision\"\n      }},\n")
        });
        format!(" [(confluent.field_meta) = {{\n    params: [\n{precision}      {{\n        value: \"{s}\",\n        key: \"scale\"\n      }}\n    ]\n  }}]")
    };
    assert_eq!(
        t,
        format!(
            "syntax = \"proto3\";\n\nimport \"confluent/type/decimal.proto\";\n\nmessage N {{\n  confluent.type.Decimal p = 1{};\n  confluent.type.Decimal z = 2{};\n  confluent.type.Decimal n = 3{};\n}}\n",
            option(Some("10"), "2"),
            option(None, "0"),
            option(Some("5"), "3")
        )
    );
    // The precision written is the value's own (BigDecimal.precision()), not the parameter.
    assert_eq!(b, "000a080a0204d21004180212050a010010011a070a01ff10011803");
}

#[test]
fn dates_before_1582_are_julian_as_javas_calendar_gives_them() {
    // 0001-01-01 (proleptic Gregorian, day -719162) is January 3rd of year 1 in the Julian calendar.
    assert_eq!(gregorian_calendar_date(-719_162), (1, 1, 3));
    assert_eq!(gregorian_calendar_date(GREGORIAN_CUTOVER_DAYS), (1582, 10, 15));
    assert_eq!(gregorian_calendar_date(GREGORIAN_CUTOVER_DAYS - 1), (1582, 10, 4));
    assert_eq!(gregorian_calendar_date(0), (1970, 1, 1));
    assert_eq!(gregorian_calendar_date(19_724), (2024, 1, 2));
    assert_eq!(gregorian_calendar_date(2_932_896), (9999, 12, 31));
}

#[test]
fn an_empty_struct_is_an_empty_message_on_one_line() {
    let schema = strukt(Some("payload"), false, vec![]);
    assert_eq!(
        converted(&schema, &Value::Struct(vec![])),
        ("syntax = \"proto3\";\n\nmessage payload {}\n".into(), "00".into())
    );
}

#[test]
fn a_timestamp_outside_0001_to_9999_is_refused() {
    let schema = strukt(Some("T"), false, vec![("ts", Schema::named(Type::Int64, false, TIMESTAMP))]);
    let at = |millis: i64| {
        let mut out = Vec::new();
        write(&schema, &Value::Struct(vec![Value::JavaDate { millis, number: millis }]), &mut out).map(|()| out)
    };
    assert!(
        matches!(at(9_223_372_036_825_200_000), Err(ConvertError::Protobuf(m)) if m.contains("Timestamp is not valid"))
    );
    assert!(at(-62_135_596_800_001).is_err());
    assert!(at(-62_135_596_800_000).is_ok());
    assert!(at(253_402_300_799_999).is_ok());
}

#[test]
fn a_struct_named_as_its_enclosing_message_is_that_message() {
    // {"data": {"data": {}}} expanded: the inner struct is taken for the enclosing dataMessage.
    let inner = strukt(Some("payload.data.data"), true, vec![]);
    let data = strukt(Some("payload.data"), true, vec![("data", inner)]);
    let schema = strukt(Some("payload"), false, vec![("data", data)]);
    let (t, b) = converted(&schema, &Value::Struct(vec![Value::Struct(vec![Value::Struct(vec![])])]));
    assert_eq!(
        t,
        "syntax = \"proto3\";\n\nmessage payload {\n  dataMessage data = 1;\n\n  message dataMessage {\n    dataMessage data = 1;\n  }\n}\n"
    );
    assert_eq!(b, "000a020a00");
    // {"data": {"data": {"id": 1}}}: the converter cannot write the inner struct with the outer's
    // fields, and neither does pgoutbox.
    let inner = strukt(Some("payload.data.data"), true, vec![("id", opt(Type::Int32))]);
    let data = strukt(Some("payload.data"), true, vec![("data", inner)]);
    let schema = strukt(Some("payload"), false, vec![("data", data)]);
    assert!(matches!(schema_of(&schema), Err(ConvertError::Protobuf(m)) if m.contains("also named `dataMessage`")));
}

#[test]
fn nulls_are_left_out_and_mistyped_defaults_refused() {
    let schema = strukt(Some("T"), false, vec![("a", req(Type::String)), ("b", req(Type::Boolean))]);
    assert_eq!(converted(&schema, &Value::Struct(vec![Value::Null, Value::Null])).1, "00");
    let mut out = Vec::new();
    assert!(matches!(
        write(&schema, &Value::Struct(vec![text("x"), Value::Int(0)]), &mut out),
        Err(ConvertError::InvalidType { .. })
    ));
}
