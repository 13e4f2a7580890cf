//! Golden tests: every expected byte string below was captured from the real Debezium 3.6.3 (embedded
//! engine, PostgreSQL connector, Outbox Event Router with `table.expand.json.payload=true`, Kafka
//! Connect 4.3 JsonConverter) reading rows of `public.outbox` (payload `jsonb`) from PostgreSQL 15,
//! through `scripts/debezium.sh run` and `debezium/dump_topics.py`. Inputs are the payload text as
//! PostgreSQL prints it (jsonb normalises key order, spacing and numbers: `1e20` prints as
//! `100000000000000000000`, `-0.0` as `0.0`, `1E2` as `100`).
//! The parser-limit tests at the end were checked against the same jars (JsonSchemaData and
//! JsonConverter driven directly) rather than through PostgreSQL, which cannot store those inputs.

use bytes::Bytes;

use super::*;
use crate::connect::json::json_envelope;

/// The payload column's own schema (jsonb), which Debezium keeps when it does not expand.
fn json_column() -> Schema {
    Schema::named(Type::String, true, "io.debezium.data.Json")
}

/// The value bytes JsonConverter writes for `text` after Debezium's expansion, or the error when
/// Debezium would stop the task.
fn published(text: &str, nulls: JsonNullBehavior, schemas: bool) -> Result<String, ExpandError> {
    let raw = Value::String(Bytes::copy_from_slice(text.as_bytes()));
    let (schema, value) = match expand_json_payload(text, "payload", nulls) {
        Ok(e) => (Some(e.schema), e.value),
        Err(e) if e.debezium_keeps_string() => (Some(json_column()), raw),
        Err(ExpandError::NoSchema) => (None, raw),
        Err(e) => return Err(e),
    };
    let mut out = Vec::new();
    json_envelope(&mut out, schemas, crate::connect::json::Decimals::Base64, schema.as_ref(), &value)
        .expect("inferred schema and value agree");
    Ok(String::from_utf8(out).expect("JsonConverter output is UTF-8"))
}

/// (payload text, value with `schemas.enable=true`, value with `schemas.enable=false`), nulls ignored.
const CAPTURED: &[(&str, &str, &str)] = &[
    // nested
    (r#"{"id": 1, "flag": true, "tags": ["a", "b"], "customer": {"name": "Ann", "address": {"zip": "8001", "city": "Zürich"}}}"#, r#"{"schema":{"type":"struct","fields":[{"type":"int32","optional":true,"field":"id"},{"type":"boolean","optional":true,"field":"flag"},{"type":"array","items":{"type":"string","optional":true},"optional":true,"field":"tags"},{"type":"struct","fields":[{"type":"string","optional":true,"field":"name"},{"type":"struct","fields":[{"type":"string","optional":true,"field":"zip"},{"type":"string","optional":true,"field":"city"}],"optional":true,"name":"payload.customer.address","field":"address"}],"optional":true,"name":"payload.customer","field":"customer"}],"optional":true,"name":"payload"},"payload":{"id":1,"flag":true,"tags":["a","b"],"customer":{"name":"Ann","address":{"zip":"8001","city":"Zürich"}}}}"#, r#"{"id":1,"flag":true,"tags":["a","b"],"customer":{"name":"Ann","address":{"zip":"8001","city":"Zürich"}}}"#),
    // merge
    (r#"{"items": [{"qty": 1, "sku": "A"}, {"sku": "B", "price": 9.99}]}"#, r#"{"schema":{"type":"struct","fields":[{"type":"array","items":{"type":"struct","fields":[{"type":"int32","optional":true,"field":"qty"},{"type":"string","optional":true,"field":"sku"},{"type":"double","optional":true,"field":"price"}],"optional":false,"name":"payload.items"},"optional":true,"field":"items"}],"optional":true,"name":"payload"},"payload":{"items":[{"qty":1,"sku":"A","price":null},{"qty":null,"sku":"B","price":9.99}]}}"#, r#"{"items":[{"qty":1,"sku":"A","price":null},{"qty":null,"sku":"B","price":9.99}]}"#),
    // same
    (r#"{"items": [{"qty": 1, "sku": "A"}, {"qty": 2, "sku": "B"}, null]}"#, r#"{"schema":{"type":"struct","fields":[{"type":"array","items":{"type":"struct","fields":[{"type":"int32","optional":true,"field":"qty"},{"type":"string","optional":true,"field":"sku"}],"optional":true,"name":"payload.items"},"optional":true,"field":"items"}],"optional":true,"name":"payload"},"payload":{"items":[{"qty":1,"sku":"A"},{"qty":2,"sku":"B"},null]}}"#, r#"{"items":[{"qty":1,"sku":"A"},{"qty":2,"sku":"B"},null]}"#),
    // nulls
    (r#"{"a": null, "b": 1, "c": [null, 1], "d": {"e": null}}"#, r#"{"schema":{"type":"struct","fields":[{"type":"int32","optional":true,"field":"b"},{"type":"array","items":{"type":"int32","optional":true},"optional":true,"field":"c"},{"type":"struct","fields":[],"optional":true,"name":"payload.d","field":"d"}],"optional":true,"name":"payload"},"payload":{"b":1,"c":[null,1],"d":{}}}"#, r#"{"b":1,"c":[null,1],"d":{}}"#),
    // empty
    (r#"{"e": [], "f": {}, "g": [[1], []], "h": "x"}"#, r#"{"schema":{"type":"struct","fields":[{"type":"struct","fields":[],"optional":true,"name":"payload.f","field":"f"},{"type":"array","items":{"type":"array","items":{"type":"int32","optional":true},"optional":true},"optional":true,"field":"g"},{"type":"string","optional":true,"field":"h"}],"optional":true,"name":"payload"},"payload":{"f":{},"g":[[1],[]],"h":"x"}}"#, r#"{"f":{},"g":[[1],[]],"h":"x"}"#),
    // unicode
    ("{\"q\": \"\\\"\\\\/\", \"é\": \"ü€\", \"ctl\": \"\\u0001\\t\\n\", \"del\": \"\u{7f}\", \"clef\": \"𝄞\", \"emoji\": \"😀\"}", "{\"schema\":{\"type\":\"struct\",\"fields\":[{\"type\":\"string\",\"optional\":true,\"field\":\"q\"},{\"type\":\"string\",\"optional\":true,\"field\":\"é\"},{\"type\":\"string\",\"optional\":true,\"field\":\"ctl\"},{\"type\":\"string\",\"optional\":true,\"field\":\"del\"},{\"type\":\"string\",\"optional\":true,\"field\":\"clef\"},{\"type\":\"string\",\"optional\":true,\"field\":\"emoji\"}],\"optional\":true,\"name\":\"payload\"},\"payload\":{\"q\":\"\\\"\\\\/\",\"é\":\"ü€\",\"ctl\":\"\\u0001\\t\\n\",\"del\":\"\u{7f}\",\"clef\":\"\\uD834\\uDD1E\",\"emoji\":\"\\uD83D\\uDE00\"}}", "{\"q\":\"\\\"\\\\/\",\"é\":\"ü€\",\"ctl\":\"\\u0001\\t\\n\",\"del\":\"\u{7f}\",\"clef\":\"\\uD834\\uDD1E\",\"emoji\":\"\\uD83D\\uDE00\"}"),
    // numbers
    (r#"{"f": 1.5, "e2": 100, "big": 12345678.9, "one": 1.0, "nine": 9999999.0, "prec": 0.30000000000000004, "tiny": 0.0000001, "milli": 0.001, "small": 0.0001, "tenth": 0.1, "i32max": 2147483647, "i32min": -2147483648, "i64max": 9223372036854775807, "i64min": -9223372036854775808, "i32over": 2147483648, "negzero": 0.0, "i32under": -2147483649}"#, r#"{"schema":{"type":"struct","fields":[{"type":"double","optional":true,"field":"f"},{"type":"int32","optional":true,"field":"e2"},{"type":"double","optional":true,"field":"big"},{"type":"double","optional":true,"field":"one"},{"type":"double","optional":true,"field":"nine"},{"type":"double","optional":true,"field":"prec"},{"type":"double","optional":true,"field":"tiny"},{"type":"double","optional":true,"field":"milli"},{"type":"double","optional":true,"field":"small"},{"type":"double","optional":true,"field":"tenth"},{"type":"int32","optional":true,"field":"i32max"},{"type":"int32","optional":true,"field":"i32min"},{"type":"int64","optional":true,"field":"i64max"},{"type":"int64","optional":true,"field":"i64min"},{"type":"int64","optional":true,"field":"i32over"},{"type":"double","optional":true,"field":"negzero"},{"type":"int64","optional":true,"field":"i32under"}],"optional":true,"name":"payload"},"payload":{"f":1.5,"e2":100,"big":1.23456789E7,"one":1.0,"nine":9999999.0,"prec":0.30000000000000004,"tiny":1.0E-7,"milli":0.001,"small":1.0E-4,"tenth":0.1,"i32max":2147483647,"i32min":-2147483648,"i64max":9223372036854775807,"i64min":-9223372036854775808,"i32over":2147483648,"negzero":0.0,"i32under":-2147483649}}"#, r#"{"f":1.5,"e2":100,"big":1.23456789E7,"one":1.0,"nine":9999999.0,"prec":0.30000000000000004,"tiny":1.0E-7,"milli":0.001,"small":1.0E-4,"tenth":0.1,"i32max":2147483647,"i32min":-2147483648,"i64max":9223372036854775807,"i64min":-9223372036854775808,"i32over":2147483648,"negzero":0.0,"i32under":-2147483649}"#),
    // mixed
    (r#"{"m": [1, "a"]}"#, r#"{"schema":{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1},"payload":"{\"m\": [1, \"a\"]}"}"#, r#""{\"m\": [1, \"a\"]}""#),
    // mixednum
    (r#"{"m": [1, 2147483648]}"#, r#"{"schema":{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1},"payload":"{\"m\": [1, 2147483648]}"}"#, r#""{\"m\": [1, 2147483648]}""#),
    // inner
    (r#"{"m": [[], [1]]}"#, r#"{"schema":{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1},"payload":"{\"m\": [[], [1]]}"}"#, r#""{\"m\": [[], [1]]}""#),
    // emptykey
    (r#"{"": 1, "a": 2}"#, r#"{"schema":{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1},"payload":"{\"\": 1, \"a\": 2}"}"#, r#""{\"\": 1, \"a\": 2}""#),
    // toparrayempty
    (r#"[]"#, r#"{"schema":null,"payload":"[]"}"#, r#""[]""#),
    // strbesideempty
    (r#"["a", []]"#, r#"{"schema":{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1},"payload":"[\"a\", []]"}"#, r#""[\"a\", []]""#),
    // scalar
    (r#""hello""#, r#"{"schema":{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1},"payload":"\"hello\""}"#, r#""\"hello\"""#),
    // jsonnull
    (r#"null"#, r#"{"schema":{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1},"payload":"null"}"#, r#""null""#),
    // nestedarr
    (r#"{"x": [[{"a": {"b": 1}}], [{"a": {"c": 2}}]], "y": [{"z": [{"k": 1}]}]}"#, r#"{"schema":{"type":"struct","fields":[{"type":"array","items":{"type":"array","items":{"type":"struct","fields":[{"type":"struct","fields":[{"type":"int32","optional":true,"field":"b"}],"optional":true,"name":"a","field":"a"}],"optional":true},"optional":true},"optional":true,"field":"x"},{"type":"array","items":{"type":"struct","fields":[{"type":"array","items":{"type":"struct","fields":[{"type":"int32","optional":true,"field":"k"}],"optional":true,"name":"payload.y.z"},"optional":true,"field":"z"}],"optional":true,"name":"payload.y"},"optional":true,"field":"y"}],"optional":true,"name":"payload"},"payload":{"x":[[{"a":{"b":1}}],[{"a":{"b":null}}]],"y":[{"z":[{"k":1}]}]}}"#, r#"{"x":[[{"a":{"b":1}}],[{"a":{"b":null}}]],"y":[{"z":[{"k":1}]}]}"#),
    // emptyobj
    (r#"{}"#, r#"{"schema":{"type":"struct","fields":[],"optional":true,"name":"payload"},"payload":{}}"#, r#"{}"#),
    // blankkey
    (r#"{" ": {"x": 1}, "a.b": {"c": true}}"#, r#"{"schema":{"type":"struct","fields":[{"type":"struct","fields":[{"type":"int32","optional":true,"field":"x"}],"optional":true,"name":"payload. ","field":" "},{"type":"struct","fields":[{"type":"boolean","optional":true,"field":"c"}],"optional":true,"name":"payload.a.b","field":"a.b"}],"optional":true,"name":"payload"},"payload":{" ":{"x":1},"a.b":{"c":true}}}"#, r#"{" ":{"x":1},"a.b":{"c":true}}"#),
    // allnull
    (r#"{"n": [null, null]}"#, r#"{"schema":{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1},"payload":"{\"n\": [null, null]}"}"#, r#""{\"n\": [null, null]}""#),
    // floatexp
    (r#"{"x": 0.0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000015, "y": 0.000025, "z": 123456789.125}"#, r#"{"schema":{"type":"struct","fields":[{"type":"double","optional":true,"field":"x"},{"type":"double","optional":true,"field":"y"},{"type":"double","optional":true,"field":"z"}],"optional":true,"name":"payload"},"payload":{"x":1.5E-300,"y":2.5E-5,"z":1.23456789125E8}}"#, r#"{"x":1.5E-300,"y":2.5E-5,"z":1.23456789125E8}"#),
];

/// Rows whose bytes differ under `table.json.payload.null.behavior=optional_bytes` (schemas on);
/// every other row of `CAPTURED` came out the same as with `ignore`.
const CAPTURED_OPTIONAL_BYTES: &[(&str, &str)] = &[
    // nulls
    (
        r#"{"a": null, "b": 1, "c": [null, 1], "d": {"e": null}}"#,
        r#"{"schema":{"type":"struct","fields":[{"type":"bytes","optional":true,"field":"a"},{"type":"int32","optional":true,"field":"b"},{"type":"array","items":{"type":"int32","optional":true},"optional":true,"field":"c"},{"type":"struct","fields":[{"type":"bytes","optional":true,"field":"e"}],"optional":true,"name":"payload.d","field":"d"}],"optional":true,"name":"payload"},"payload":{"a":null,"b":1,"c":[null,1],"d":{"e":null}}}"#,
    ),
    // allnull
    (
        r#"{"n": [null, null]}"#,
        r#"{"schema":{"type":"struct","fields":[{"type":"array","items":{"type":"bytes","optional":true},"optional":true,"field":"n"}],"optional":true,"name":"payload"},"payload":{"n":[null,null]}}"#,
    ),
];

#[test]
fn expansion_matches_debezium_captures() {
    for &(text, with_schema, without) in CAPTURED {
        assert_eq!(published(text, JsonNullBehavior::Ignore, true).unwrap(), with_schema, "{text}");
        assert_eq!(published(text, JsonNullBehavior::Ignore, false).unwrap(), without, "{text}");
    }
}

#[test]
fn expansion_matches_debezium_captures_with_optional_bytes() {
    for &(text, with_schema, _) in CAPTURED {
        let want = CAPTURED_OPTIONAL_BYTES.iter().find(|(t, _)| *t == text).map_or(with_schema, |(_, w)| *w);
        assert_eq!(published(text, JsonNullBehavior::OptionalBytes, true).unwrap(), want, "{text}");
    }
}

/// Each of these stopped the Debezium 3.6.3 task with the quoted `DataException` (one run per row).
#[test]
fn payloads_that_stop_debezium_are_reported_not_expanded() {
    let cases = [
        (r#"[1, 2]"#, INVALID_ARRAY),
        (r#"[["a"], []]"#, INVALID_ARRAY),
        // Beyond 64 bits: Jackson's BigInteger, a BigDecimal value for a float64 schema.
        (r#"{"big": 100000000000000000000}"#, INVALID_STRUCT),
        // Differing elements make the merged element schema required; the null element then fails.
        (r#"{"items": [{"a": 1}, {"b": 2}, null]}"#, INVALID_STRUCT),
        // `p` is int32 in one element and float64 in the other.
        (r#"{"items": [{"p": 1}, {"p": 1.5}]}"#, INVALID_STRUCT),
    ];
    for (text, debezium_error) in cases {
        match expand_json_payload(text, "payload", JsonNullBehavior::Ignore) {
            Err(ExpandError::StopsDebezium { debezium_error: e, .. }) => assert_eq!(e, debezium_error, "{text}"),
            other => panic!("{text}: {other:?}"),
        }
    }
    assert_eq!(INVALID_ARRAY, "Invalid type for ARRAY: class java.lang.String");
}

#[test]
fn empty_top_level_array_keeps_the_string_without_schema() {
    // Debezium 3.6.3 published `{"schema":null,"payload":"[]"}` without an envelope placement and
    // stopped (NullPointerException in getValueSchema) with `type:envelope:eventType`.
    assert_eq!(expand_json_payload("[]", "payload", JsonNullBehavior::Ignore), Err(ExpandError::NoSchema));
    assert!(!ExpandError::NoSchema.debezium_keeps_string());
}

/// Debezium merges the element schemas of an array of objects in `HashSet` order, which differs
/// between JVMs; pgoutbox uses document order: the same fields and values, in another order. The
/// Debezium 3.6.3 run wrote `{"items":[{"b":null,"a":null},{"b":null,"a":"x"},{"b":1,"a":null}]}`.
#[test]
fn merged_array_elements_use_document_order() {
    let text = r#"{"items": [{"a": null}, {"a": "x"}, {"b": 1}]}"#;
    assert_eq!(
        published(text, JsonNullBehavior::Ignore, false).unwrap(),
        r#"{"items":[{"a":null,"b":null},{"a":"x","b":null},{"a":null,"b":1}]}"#
    );
    // A merged element schema is required (Debezium's `copySchemaBasics` drops optionality).
    let with_schema = published(text, JsonNullBehavior::Ignore, true).unwrap();
    assert!(with_schema.contains(r#""optional":false,"name":"payload.items""#), "{with_schema}");
}

/// `type:envelope:eventType`: the expanded struct becomes the `payload` field of the value struct.
#[test]
fn envelope_placement_wraps_the_expanded_payload() {
    for (text, aggregate, want) in [
        (
            r#"{"id": 1, "flag": true, "tags": ["a", "b"], "customer": {"name": "Ann", "address": {"zip": "8001", "city": "Zürich"}}}"#,
            "nested",
            r#"{"schema":{"type":"struct","fields":[{"type":"struct","fields":[{"type":"int32","optional":true,"field":"id"},{"type":"boolean","optional":true,"field":"flag"},{"type":"array","items":{"type":"string","optional":true},"optional":true,"field":"tags"},{"type":"struct","fields":[{"type":"string","optional":true,"field":"name"},{"type":"struct","fields":[{"type":"string","optional":true,"field":"zip"},{"type":"string","optional":true,"field":"city"}],"optional":true,"name":"payload.customer.address","field":"address"}],"optional":true,"name":"payload.customer","field":"customer"}],"optional":true,"name":"payload","field":"payload"},{"type":"string","optional":false,"field":"eventType"}],"optional":false,"name":"dbserver1.public.outbox.nested.Value"},"payload":{"payload":{"id":1,"flag":true,"tags":["a","b"],"customer":{"name":"Ann","address":{"zip":"8001","city":"Zürich"}}},"eventType":"t"}}"#,
        ),
        (
            r#"{"items": [{"qty": 1, "sku": "A"}, {"sku": "B", "price": 9.99}]}"#,
            "merge",
            r#"{"schema":{"type":"struct","fields":[{"type":"struct","fields":[{"type":"array","items":{"type":"struct","fields":[{"type":"int32","optional":true,"field":"qty"},{"type":"string","optional":true,"field":"sku"},{"type":"double","optional":true,"field":"price"}],"optional":false,"name":"payload.items"},"optional":true,"field":"items"}],"optional":true,"name":"payload","field":"payload"},{"type":"string","optional":false,"field":"eventType"}],"optional":false,"name":"dbserver1.public.outbox.merge.Value"},"payload":{"payload":{"items":[{"qty":1,"sku":"A","price":null},{"qty":null,"sku":"B","price":9.99}]},"eventType":"t"}}"#,
        ),
    ] {
        let e = expand_json_payload(text, "payload", JsonNullBehavior::Ignore).unwrap();
        let schema = Schema::Struct {
            name: Some(format!("dbserver1.public.outbox.{aggregate}.Value")),
            fields: vec![("payload".into(), e.schema), ("eventType".into(), Schema::primitive(Type::String, false))],
            optional: false,
            version: None,
            doc: None,
        };
        let value = Value::Struct(vec![e.value, Value::String(Bytes::from_static(b"t"))]);
        let mut out = Vec::new();
        json_envelope(&mut out, true, crate::connect::json::Decimals::Base64, Some(&schema), &value).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), want);
    }
}

/// Without expansion JsonConverter writes the jsonb text as a JSON string, surrogates escaped.
#[test]
fn unexpanded_payload_string_matches_debezium_capture() {
    for (text, want) in [
        (r#"{"m": [1, "😀"]}"#, r#""{\"m\": [1, \"\uD83D\uDE00\"]}""#),
        ("{\"q\": \"\\\"\\\\/\", \"é\": \"ü€\", \"ctl\": \"\\u0001\\t\\n\", \"del\": \"\u{7f}\", \"clef\": \"𝄞\", \"emoji\": \"😀\"}", "\"{\\\"q\\\": \\\"\\\\\\\"\\\\\\\\/\\\", \\\"é\\\": \\\"ü€\\\", \\\"ctl\\\": \\\"\\\\u0001\\\\t\\\\n\\\", \\\"del\\\": \\\"\u{7f}\\\", \\\"clef\\\": \\\"\\uD834\\uDD1E\\\", \\\"emoji\\\": \\\"\\uD83D\\uDE00\\\"}\""),
    ] {
        let mut out = Vec::new();
        json_envelope(&mut out, false, crate::connect::json::Decimals::Base64, Some(&json_column()), &Value::String(Bytes::copy_from_slice(text.as_bytes()))).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), want);
    }
}

fn outcome(text: &str) -> Result<String, ExpandError> {
    published(text, JsonNullBehavior::Ignore, false)
}

fn kept(text: &str) -> bool {
    matches!(expand_json_payload(text, "payload", JsonNullBehavior::Ignore), Err(e) if e.debezium_keeps_string())
}

// Jackson's StreamReadConstraints: past them readTree throws and Debezium keeps the string.
// Expanding 1000 levels takes about 0.8 MiB of stack in a release build but over 2 MiB (a test
// thread's default) in a debug build, hence the thread.
#[test]
fn parser_limits_match_jackson() {
    std::thread::Builder::new().stack_size(16 << 20).spawn(parser_limits).expect("spawn").join().expect("limits hold");
}

fn parser_limits() {
    let nested = |depth: usize| format!("{{\"a\":{}1{}}}", "[".repeat(depth - 1), "]".repeat(depth - 1));
    assert!(outcome(&nested(1000)).is_ok());
    assert!(kept(&nested(1001)));
    let digits = |n: usize| format!("{{\"a\":-{}}}", "1".repeat(n));
    assert!(matches!(outcome(&digits(1000)), Err(ExpandError::StopsDebezium { .. })));
    assert!(kept(&digits(1001)));
    // Fraction and exponent digits count, signs and the point do not.
    assert_eq!(outcome(&format!("{{\"a\":{}.5e1}}", "1".repeat(998))).unwrap(), r#"{"a":"Infinity"}"#);
    assert!(kept(&format!("{{\"a\":{}.5e12}}", "1".repeat(998))));
    let name = |n: usize| format!("{{\"{}\":1}}", "k".repeat(n));
    assert!(outcome(&name(50_000)).is_ok());
    assert!(kept(&name(50_001)));
}

#[test]
fn jackson_reading_quirks_are_kept() {
    // One root value is read; what follows is ignored.
    assert_eq!(outcome(r#"{"a":1}xyz"#).unwrap(), r#"{"a":1}"#);
    // A repeated key keeps its first position and its last value (a `json` column can repeat keys).
    assert_eq!(outcome(r#"{"a":1,"b":2,"a":3}"#).unwrap(), r#"{"a":3,"b":2}"#);
    // A lone surrogate escape (accepted by `json`) is written back as Jackson does.
    assert_eq!(outcome(r#"{"a":"\ud800"}"#).unwrap(), r#"{"a":"\uD800"}"#);
    assert_eq!(outcome(r#"{"a":"\ud83d\ude00"}"#).unwrap(), r#"{"a":"\uD83D\uDE00"}"#);
    // Overflowing doubles are infinite, which Jackson writes as a string.
    assert_eq!(outcome(r#"{"a":1.0e400,"b":-1e400}"#).unwrap(), r#"{"a":"Infinity","b":"-Infinity"}"#);
    assert_eq!(outcome(r#"{"a":-0,"b":-0.0,"c":1E2,"d":1e-7}"#).unwrap(), r#"{"a":0,"b":-0.0,"c":100.0,"d":1.0E-7}"#);
    for bad in [
        r#"{"a":tru}"#,
        r#"{"a":[1,]}"#,
        r#"{"a":01}"#,
        r#"{"a":1.}"#,
        "{\"a\":\"\u{1}\"}",
        r#"{"a":"\x"}"#,
        r#"{"a":1"#,
    ] {
        assert!(kept(bad), "{bad}");
    }
    assert_eq!(expand_json_payload(r#" {"a":1}"#, "payload", JsonNullBehavior::Ignore), Err(ExpandError::NotJson));
    assert_eq!(expand_json_payload("", "payload", JsonNullBehavior::Ignore), Err(ExpandError::NotJson));
}

#[test]
fn schema_names_follow_the_payload_column_and_path() {
    let e = expand_json_payload(r#"{"o": {"p": {"q": 1}}}"#, "body", JsonNullBehavior::Ignore).unwrap();
    let mut out = Vec::new();
    crate::connect::json::write_schema(&mut out, &e.schema, crate::connect::json::Decimals::Base64);
    let schema = String::from_utf8(out).unwrap();
    assert!(schema.ends_with(r#""optional":true,"name":"body"}"#), "{schema}");
    assert!(schema.contains(r#""name":"body.o.p","field":"p""#), "{schema}");
    // A lone surrogate in a key cannot be a Rust field name; Debezium would expand it.
    assert_eq!(
        expand_json_payload(r#"{"\udc00":1}"#, "payload", JsonNullBehavior::Ignore),
        Err(ExpandError::Unsupported)
    );
    assert_eq!(JsonNullBehavior::parse(" OPTIONAL_bytes "), Some(JsonNullBehavior::OptionalBytes));
    assert_eq!(JsonNullBehavior::parse("drop"), None);
}

/// Debezium 3.7's `table.json.payload.empty.array.behavior=optional_string`: an empty array is an
/// optional array of optional strings, at any depth, written `[]`; `ignore` drops it (3.6's only
/// behaviour). The bytes against Debezium 3.7.1 itself: the Connect differential's
/// `expand_json_payload_empty_arrays_optional_string`.
#[test]
fn empty_arrays_are_kept_as_optional_string_arrays_when_asked() {
    let keep = Expansion { nulls: JsonNullBehavior::Ignore, empty_arrays: JsonEmptyArrayBehavior::OptionalString };
    let value = |text: &str, options: Expansion| {
        let e = expand_json_payload(text, "payload", options).expect("expands");
        let mut out = Vec::new();
        json_envelope(&mut out, false, crate::connect::json::Decimals::Base64, Some(&e.schema), &e.value).unwrap();
        String::from_utf8(out).unwrap()
    };
    let text = r#"{"e": [], "f": {"g": []}, "x": 1}"#;
    assert_eq!(value(text, JsonNullBehavior::Ignore.into()), r#"{"f":{},"x":1}"#);
    assert_eq!(value(text, keep), r#"{"e":[],"f":{"g":[]},"x":1}"#);
    assert_eq!(value(r#"{"h": [[]], "t": ["a"]}"#, keep), r#"{"h":[[]],"t":["a"]}"#);
    let e = expand_json_payload(r#"{"e": []}"#, "payload", keep).unwrap();
    let Schema::Struct { fields, .. } = &e.schema else { panic!("{:?}", e.schema) };
    assert_eq!(
        fields[0].1,
        Schema::Array { items: Box::new(Schema::optional(Type::String)), optional: true },
        "an optional array of optional strings"
    );
}
