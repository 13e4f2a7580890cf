//! The differential configurations, one `fn` each, named like the test that runs it
//! (`tests/differential.rs` lists them and says which are not enabled yet, and why).

use super::{insert, lit, tx, Case};

const STRING: &str = "org.apache.kafka.connect.storage.StringConverter";
const JSON: &str = "org.apache.kafka.connect.json.JsonConverter";
const ORDER: &str = "outbox.event.Order";
const CUSTOMER: &str = "outbox.event.Customer";

fn converters(key: &str, key_schemas: bool, value: &str, value_schemas: bool) -> Vec<String> {
    vec![
        format!("key.converter={key}"),
        format!("key.converter.schemas.enable={key_schemas}"),
        format!("value.converter={value}"),
        format!("value.converter.schemas.enable={value_schemas}"),
    ]
}

fn with_props(case: Case, props: Vec<String>) -> Case {
    case.props(&props)
}

/// jsonb payloads covering its text forms: nesting, escapes, non-ASCII, number forms, scalars,
/// top-level arrays and JSON null (which is not SQL NULL).
const PAYLOADS: &[&str] = &[
    r#"{"id": 1}"#,
    r#"{"n": 4, "note": "héllo \"q\" \\ back/slash", "items": [1, 2.5, null, true], "nested": {"a": {"b": []}}}"#,
    r#"{"big": 123456789012345678901234567890, "exp": 1.5e300, "neg": -0.0, "small": 1e-7, "int": -42}"#,
    r#"{"ctl": "tab\tnew\nline\u0001\u001f\u007f", "emoji": "😀", "cjk": "日本語", "ls": "\u2028\u2029", "html": "</script>&<>"}"#,
    r#"[1, "two", {"three": 3}]"#,
    r#""just a string""#,
    "42",
    "null",
    "{}",
];

/// Single-statement inserts over two aggregate types, a multi-event transaction and a rolled-back
/// one (which must produce nothing): 12 records.
fn standard_events() -> Vec<String> {
    let mut sql: Vec<String> = PAYLOADS
        .iter()
        .enumerate()
        .map(|(i, p)| insert(if i % 2 == 0 { "Order" } else { "Customer" }, Some(&format!("agg-{}", i % 4)), Some(p)))
        .collect();
    sql.push(tx(&[
        insert("Order", Some("agg-tx"), Some(r#"{"in": "tx", "n": 1}"#)),
        insert("Customer", Some("agg-tx"), Some(r#"{"in": "tx", "n": 2}"#)),
        insert("Order", Some("agg-tx"), Some(r#"{"in": "tx", "n": 3}"#)),
    ]));
    sql.push(format!("BEGIN; {}; ROLLBACK", insert("Order", Some("rolled-back"), Some("{}"))));
    sql
}
const STANDARD_RECORDS: usize = 12;

fn standard(name: &'static str, props: Vec<String>) -> Case {
    with_props(Case::new(name), props).sql(standard_events()).topics(&[ORDER, CUSTOMER]).records(STANDARD_RECORDS)
}

// No converter configured: JsonConverter with schemas, as in the Debezium container image.
pub fn default_converters() -> Case {
    standard("default_converters", vec![])
}

pub fn string_converters() -> Case {
    standard("string_converters", converters(STRING, false, STRING, false))
}

pub fn json_converters_schemas_off() -> Case {
    standard("json_converters_schemas_off", converters(JSON, false, JSON, false))
}

pub fn string_key_json_value_schemas_on() -> Case {
    standard("string_key_json_value_schemas_on", converters(STRING, false, JSON, true))
}

pub fn json_key_schemas_off_string_value() -> Case {
    standard("json_key_schemas_off_string_value", converters(JSON, false, STRING, false))
}

// Every router column renamed; the standard columns hold decoys that must not be used.
pub fn renamed_columns() -> Case {
    let row = |route: &str, key: &str, body: Option<&str>| {
        format!(
            "INSERT INTO {{t}} (id, aggregatetype, aggregateid, type, payload, event_id, agg_key, body, route_to) \
             VALUES (gen_random_uuid(), 'Decoy', 'decoy-key', 'Created', '{{\"decoy\": true}}', gen_random_uuid(), {}, {}, {})",
            lit(key),
            body.map_or("NULL".to_string(), lit),
            lit(route)
        )
    };
    Case::new("renamed_columns")
        .columns(&["event_id uuid NOT NULL", "agg_key text NOT NULL", "body jsonb", "route_to varchar(64) NOT NULL"])
        .router(&[
            "table.field.event.id=event_id",
            "table.field.event.key=agg_key",
            "table.field.event.payload=body",
            "route.by.field=route_to",
        ])
        .sql([
            row("Shipment", "ship-1", Some(r#"{"n": 1}"#)),
            row("Invoice", "inv-1", Some(r#"{"n": 2}"#)),
            row("Shipment", "ship-2", None),
            row("Shipment", "ship-1", Some(r#"{"n": 3}"#)),
        ])
        .topics(&["outbox.event.Shipment", "outbox.event.Invoice", "outbox.event.Decoy"])
        .records(4)
}

// Named and numbered groups; values that do not match in full keep their raw value.
pub fn route_regex_capture_groups() -> Case {
    Case::new("route_regex_capture_groups")
        // `\\.` in the file is `\.` after Java's .properties unescaping.
        .router(&[
            r"route.topic.regex=(?<domain>[a-z]+)\\.(?<entity>[A-Za-z]+)",
            "route.topic.replacement=${domain}-events.$2",
        ])
        .sql([
            insert("sales.Order", Some("o-1"), Some(r#"{"n": 1}"#)),
            insert("sales.Invoice", Some("i-1"), Some(r#"{"n": 2}"#)),
            insert("billing.Payment", Some("p-1"), Some(r#"{"n": 3}"#)),
            insert("sales.Order", Some("o-2"), Some(r#"{"n": 4}"#)),
            insert("Misc", Some("m-1"), Some(r#"{"n": 5}"#)),
            insert("sales.Order.Extra", Some("o-3"), Some(r#"{"n": 6}"#)),
        ])
        .topics(&["sales-events.Order", "sales-events.Invoice", "billing-events.Payment", "Misc", "sales.Order.Extra"])
        .records(6)
}

// A regex that matches some values only partly or not at all: the raw value is the topic.
pub fn route_regex_no_match_uses_raw_value() -> Case {
    Case::new("route_regex_no_match_uses_raw_value")
        .router(&["route.topic.regex=order_(.*)", "route.topic.replacement=orders.$1"])
        .sql([
            insert("order_eu", Some("a"), Some(r#"{"n": 1}"#)),
            insert("Customer", Some("b"), Some(r#"{"n": 2}"#)),
            insert("my_order_eu", Some("c"), Some(r#"{"n": 3}"#)),
            insert("ORDER_us", Some("d"), Some(r#"{"n": 4}"#)),
        ])
        .topics(&["orders.eu", "Customer", "my_order_eu", "ORDER_us"])
        .records(4)
}

// NULL and "empty-looking" jsonb payloads: only SQL NULL is blank for jsonb.
fn jsonb_null_and_empty(name: &'static str, tombstone: bool) -> Case {
    let payloads = [None, Some("{}"), Some(r#""""#), Some("[]"), Some("null"), Some(r#"{"ok": 1}"#), None];
    Case::new(name)
        .props(&[format!("transforms.outbox.route.tombstone.on.empty.payload={tombstone}")])
        .sql(payloads.iter().enumerate().map(|(i, p)| insert("Order", Some(&format!("k-{i}")), *p)))
        .topics(&[ORDER])
        .records(payloads.len())
}

pub fn jsonb_null_and_empty_payloads_tombstone_on() -> Case {
    jsonb_null_and_empty("jsonb_null_and_empty_payloads_tombstone_on", true)
}

pub fn jsonb_null_and_empty_payloads_tombstone_off() -> Case {
    jsonb_null_and_empty("jsonb_null_and_empty_payloads_tombstone_off", false)
}

/// Text payloads around Java's `trim().isEmpty()`: it strips every char <= U+0020 (control
/// characters included) but not U+00A0, U+2003 or U+007F.
const BLANK_TEXT: &[Option<&str>] = &[
    None,
    Some(""),
    Some(" "),
    Some("\t\n\r "),
    Some("\u{1}\u{1f} "),
    Some("\u{a0}"),
    Some("\u{2003}"),
    Some(" x "),
    Some("\u{7f}"),
];

fn text_blank(name: &'static str, tombstone: bool, string_converters: bool) -> Case {
    let mut props = vec![format!("transforms.outbox.route.tombstone.on.empty.payload={tombstone}")];
    if string_converters {
        props.extend(converters(STRING, false, STRING, false));
    }
    with_props(Case::new(name).payload_type("text"), props)
        .sql(BLANK_TEXT.iter().enumerate().map(|(i, p)| insert("Order", Some(&format!("k-{i}")), *p)))
        .topics(&[ORDER])
        .records(BLANK_TEXT.len())
}

pub fn text_blank_payloads_tombstone_on() -> Case {
    text_blank("text_blank_payloads_tombstone_on", true, false)
}

pub fn text_blank_payloads_tombstone_off() -> Case {
    text_blank("text_blank_payloads_tombstone_off", false, false)
}

pub fn text_blank_payloads_string_converter_tombstone_on() -> Case {
    text_blank("text_blank_payloads_string_converter_tombstone_on", true, true)
}

pub fn text_blank_payloads_string_converter_tombstone_off() -> Case {
    text_blank("text_blank_payloads_string_converter_tombstone_off", false, true)
}

// UPDATEs and DELETEs, alone, in transactions with the INSERT, and multi-row: all dropped.
fn update_delete(name: &'static str, behavior: &str) -> Case {
    let set = |agg: &str, v: u32| format!("UPDATE {{t}} SET payload = '{{\"v\": {v}}}' WHERE aggregateid = '{agg}'");
    let delete = |agg: &str| format!("DELETE FROM {{t}} WHERE aggregateid = '{agg}'");
    Case::new(name)
        .props(&[format!("transforms.outbox.table.op.invalid.behavior={behavior}")])
        .sql([
            insert("Order", Some("a1"), Some(r#"{"v": 1}"#)),
            insert("Order", Some("a2"), Some(r#"{"v": 2}"#)),
            set("a1", 10),
            delete("a2"),
            tx(&[insert("Order", Some("a3"), Some(r#"{"v": 3}"#)), delete("a3")]),
            tx(&[insert("Order", Some("a4"), Some(r#"{"v": 4}"#)), set("a4", 40)]),
            "UPDATE {t} SET aggregatetype = 'Customer'".to_string(),
            insert("Customer", Some("a5"), Some(r#"{"v": 5}"#)),
            "DELETE FROM {t}".to_string(),
            insert("Order", Some("a6"), Some(r#"{"v": 6}"#)),
        ])
        .topics(&[ORDER, CUSTOMER])
        .records(6)
}

pub fn update_delete_dropped_under_warn() -> Case {
    update_delete("update_delete_dropped_under_warn", "warn")
}

/// Also with REPLICA IDENTITY FULL, so UPDATE/DELETE carry the whole old row.
pub fn update_delete_dropped_under_error() -> Case {
    update_delete("update_delete_dropped_under_error", "error")
        .before_slots(["ALTER TABLE {t} REPLICA IDENTITY FULL".to_string()])
}

// Topic-legal aggregate types with dots, dashes, underscores and case; ids with anything.
// (Non-ASCII aggregate types cannot be topic names, so non-ASCII is exercised in ids.)
const TYPES: &[&str] = &["Order.Line", "order-item", "MixedCase_Type", "a.b-c_D.9"];
const IDS: &[&str] = &[
    "a.b.c",
    "id-with-dash",
    "MiXeD",
    "héllo-✓-日本",
    "emoji-😀",
    "quote\"back\\slash",
    "with space",
    "",
    "tab\tid",
    "Ω-ümlaut-ß",
];

fn aggregate_names(name: &'static str, props: Vec<String>) -> Case {
    let sql = (0..2 * IDS.len())
        .map(|i| insert(TYPES[i % TYPES.len()], Some(IDS[i % IDS.len()]), Some(&format!(r#"{{"i": {i}}}"#))));
    with_props(Case::new(name), props)
        .sql(sql)
        .topics(&[
            "outbox.event.Order.Line",
            "outbox.event.order-item",
            "outbox.event.MixedCase_Type",
            "outbox.event.a.b-c_D.9",
        ])
        .records(2 * IDS.len())
}

pub fn aggregate_names_with_dots_dashes_case_and_unicode() -> Case {
    aggregate_names("aggregate_names_with_dots_dashes_case_and_unicode", vec![])
}

pub fn aggregate_names_with_dots_dashes_case_and_unicode_string_converters() -> Case {
    aggregate_names(
        "aggregate_names_with_dots_dashes_case_and_unicode_string_converters",
        converters(STRING, false, STRING, false),
    )
}

// Payloads around 1 MB (and over 1 MiB once JSON-escaped), with the request size raised on
// both sides, as an operator would.
pub fn payloads_near_1mb() -> Case {
    let big = |s: String| format!(r#"{{"data": "{s}"}}"#);
    Case::new("payloads_near_1mb")
        .props(&["producer.override.max.request.size=8388608"])
        .sql([
            insert("Order", Some("big-1"), Some(&big("x".repeat(1_000_000)))),
            insert("Order", Some("big-2"), Some(&big("é".repeat(520_000)))),
            insert("Order", Some("big-3"), Some(&big("\\\"".repeat(300_000)))),
            insert("Order", Some("small"), Some(r#"{"n": 1}"#)),
        ])
        .topics(&[ORDER])
        .records(4)
}

// NULL aggregate ids: a Kafka null key with StringConverter (partition free), a JSON null
// with JsonConverter (a real key, so murmur2 decides).
fn null_key(name: &'static str, props: Vec<String>) -> Case {
    let keys = [None, Some("k1"), None, Some("k2"), None, Some("k1"), None, Some("k2"), None];
    with_props(Case::new(name).nullable_key(), props)
        .sql(keys.iter().enumerate().map(|(i, k)| insert("Order", *k, Some(&format!(r#"{{"i": {i}}}"#)))))
        .topics(&[ORDER])
        .records(keys.len())
}

pub fn null_key_string_converter() -> Case {
    null_key("null_key_string_converter", converters(STRING, false, JSON, true))
}

pub fn null_key_json_converter() -> Case {
    null_key("null_key_json_converter", vec![])
}

/// Raw characters in a text payload that JsonConverter (Jackson) must escape, or must not.
pub fn text_payload_json_escapes() -> Case {
    let payloads = [
        "plain",
        "quote \" backslash \\ slash /",
        "ctl \u{1}\u{8}\u{9}\u{a}\u{c}\u{d}\u{1b}\u{1f}\u{7f}",
        "unicode é ✓ 日本 😀 \u{2028}\u{2029} \u{feff} \u{fffd}",
        "<html>&amp;</html>",
        r#"{"looks": "like json"}"#,
    ];
    Case::new("text_payload_json_escapes")
        .payload_type("text")
        .props(&["value.converter.schemas.enable=false"])
        .sql(payloads.iter().enumerate().map(|(i, p)| insert("Order", Some(&format!("k-{i}")), Some(p))))
        .topics(&[ORDER])
        .records(payloads.len())
}

/// bytea through JsonConverter: base64 in the value.
pub fn bytea_payload_json_converter() -> Case {
    let row = |key: &str, expr: &str| {
        format!("INSERT INTO {{t}} (id, aggregatetype, aggregateid, type, payload) VALUES (gen_random_uuid(), 'Order', {}, 'Created', {expr})", lit(key))
    };
    Case::new("bytea_payload_json_converter")
        .payload_type("bytea")
        .sql([
            row("b-1", r"'\x00ff10'::bytea"),
            row("b-2", "''::bytea"),
            row("b-3", "NULL"),
            row("b-4", "decode(repeat('0123456789abcdef', 64), 'hex')"),
            row("b-5", "convert_to('héllo', 'UTF8')"),
        ])
        .topics(&[ORDER])
        .records(5)
}

/// A bigint key column: JsonConverter writes an int64 key, so murmur2 hashes those bytes.
pub fn int64_key_column() -> Case {
    let row = |n: i64| {
        format!("INSERT INTO {{t}} (id, aggregatetype, aggregateid, type, payload, seqno) VALUES (gen_random_uuid(), 'Order', 'unused', 'Created', '{{\"n\": {n}}}', {n})")
    };
    Case::new("int64_key_column")
        .columns(&["seqno bigint NOT NULL"])
        .router(&["table.field.event.key=seqno"])
        .sql([row(1), row(2), row(-3), row(i64::MAX), row(1)])
        .topics(&[ORDER])
        .records(5)
}

/// The uuid primary key as the key: a string key with Debezium's Uuid semantic schema.
pub fn uuid_key_column() -> Case {
    Case::new("uuid_key_column")
        .router(&["table.field.event.key=id"])
        .sql((0..3).map(|i| insert("Order", Some("unused"), Some(&format!(r#"{{"i": {i}}}"#)))))
        .topics(&[ORDER])
        .records(3)
}

// ---- Features added to the Event Router later: placements, BinaryDataConverter, snapshots,
// ---- expansion, `fatal` ----

fn placement(name: &'static str, placement: &str) -> Case {
    let row = |key: &str, ty: &str, part: i32| {
        format!("INSERT INTO {{t}} (id, aggregatetype, aggregateid, type, payload, part) VALUES (gen_random_uuid(), 'Order', {}, {}, '{{\"p\": {part}}}', {part})", lit(key), lit(ty))
    };
    Case::new(name)
        .columns(&["part integer NOT NULL"])
        .props(&[format!("transforms.outbox.table.fields.additional.placement={placement}")])
        .sql([
            row("a", "OrderCreated", 0),
            row("b", "OrderShipped", 2),
            row("a", "OrderPaid", 1),
            row("c", "Ümlaut", 2),
        ])
        .topics(&[ORDER])
        .records(4)
}

pub fn placement_header() -> Case {
    placement("placement_header", "type:header:eventType,aggregateid:header")
}

pub fn placement_envelope() -> Case {
    with_props(
        placement("placement_envelope", "type:envelope:eventType,aggregateid:envelope"),
        converters(JSON, false, JSON, false),
    )
}

/// The envelope's schema name carries the table and the routed value.
pub fn placement_envelope_schemas_on() -> Case {
    placement("placement_envelope_schemas_on", "type:envelope:eventType,aggregateid:envelope,part:envelope:p")
}

/// `schema.name.adjustment.mode` adjusts the part of the envelope's schema name that Debezium
/// builds from the topic prefix, schema and table (here a prefix with a dash and a leading digit),
/// not the routed part.
fn placement_envelope_adjusted(name: &'static str, mode: &str) -> Case {
    with_props(
        placement(name, "type:envelope:eventType"),
        vec!["topic.prefix=9-server".to_string(), format!("schema.name.adjustment.mode={mode}")],
    )
}

/// With `topic.delimiter` and the Unicode topic naming strategy too, which build the name the
/// adjuster then adjusts (`9-server_u005fpublic_u005f<table>` before it).
pub fn placement_envelope_schema_name_avro() -> Case {
    placement_envelope_adjusted("placement_envelope_schema_name_avro", "avro")
        .props(&["topic.delimiter=_", "topic.naming.strategy=io.debezium.schema.SchemaUnicodeTopicNamingStrategy"])
}

/// With `topic.delimiter` too, which joins the parts the name is built from.
pub fn placement_envelope_schema_name_avro_unicode() -> Case {
    placement_envelope_adjusted("placement_envelope_schema_name_avro_unicode", "AVRO_UNICODE")
        .props(&["topic.delimiter=_"])
}

pub fn placement_partition() -> Case {
    placement("placement_partition", "part:partition,type:header:eventType")
}

/// Payloads Debezium 3.6.3 expands without failing (no top-level arrays, no string arrays beside
/// empty ones; see debezium.md 1.3).
fn expand(name: &'static str, schemas: bool) -> Case {
    let payloads = [
        r#"{"id": 1}"#,
        r#"{"a": {"b": 2, "c": "x"}, "n": null, "e": []}"#,
        r#"{"arr": [{"x": 1}, {"x": 2, "y": "z"}]}"#,
        r#"{"big": 12345678901, "f": 1.5, "t": true}"#,
        r#""a plain string""#,
    ];
    with_props(Case::new(name).router(&["table.expand.json.payload=true"]), converters(JSON, false, JSON, schemas))
        .sql(payloads.iter().enumerate().map(|(i, p)| insert("Order", Some(&format!("k-{i}")), Some(p))))
        .topics(&[ORDER])
        .records(payloads.len())
}

pub fn expand_json_payload_schemas_off() -> Case {
    expand("expand_json_payload_schemas_off", false)
}

pub fn expand_json_payload_schemas_on() -> Case {
    expand("expand_json_payload_schemas_on", true)
}

/// Number inference at the int32/int64/float64 edges, merged array
/// elements, nested arrays, unusual field names, deep nesting, empty objects and arrays.
pub fn expand_json_payload_edge_values() -> Case {
    let payloads = [
        r#"{"i32": 2147483647, "i64": 2147483648, "min": -9223372036854775808, "f": 1.0, "g": 0.1, "h": 1e-7, "k": 100000000000000000000.0}"#,
        // (Integers beyond 64 bits are left out: Debezium 3.6 stops its task on them. jsonb writes
        // 1.5e300 as a 301-digit integer, so exponents count too; -1e-300 stays a decimal.)
        r#"{"neg": -2147483649, "tiny": -1e-300, "third": 0.3333333333333333333}"#,
        r#"{"nested": [[1, 2], [3]], "objs": [{"a": 1}, {"b": "x"}, {"a": 2, "c": null}]}"#,
        r#"{"ünï": "cödé", "sp ace": 1, "dash-ed": true, "emoji😀": "😀"}"#,
        r#"{"deep": {"a": {"b": {"c": {"d": [1]}}}}}"#,
        "{}",
        r#"{"arr": []}"#,
    ];
    with_props(
        Case::new("expand_json_payload_edge_values").router(&["table.expand.json.payload=true"]),
        converters(JSON, false, JSON, true),
    )
    .sql(payloads.iter().enumerate().map(|(i, p)| insert("Order", Some(&format!("k-{i}")), Some(p))))
    .topics(&[ORDER])
    .records(payloads.len())
}

/// Debezium 3.7's `table.json.payload.empty.array.behavior=optional_string`: empty arrays kept as
/// optional arrays of optional strings, at any depth. Debezium 3.6.3 has no such option (it drops
/// them), so this case runs against 3.7 in Kafka Connect only (`via_connect::SUITE`).
pub fn expand_json_payload_empty_arrays_optional_string() -> Case {
    let payloads =
        [r#"{"e": [], "f": {"g": []}, "x": 1}"#, r#"{"h": [[]], "t": ["a"]}"#, r#"{"arr": [{"k": []}, {"k": []}]}"#];
    with_props(
        Case::new("expand_json_payload_empty_arrays_optional_string")
            .router(&["table.expand.json.payload=true", "table.json.payload.empty.array.behavior=optional_string"]),
        converters(JSON, false, JSON, true),
    )
    .sql(payloads.iter().enumerate().map(|(i, p)| insert("Order", Some(&format!("k-{i}")), Some(p))))
    .topics(&[ORDER])
    .records(payloads.len())
}

/// The bytea payloads under a value converter that writes BYTES as they are.
fn bytea_raw(name: &'static str, value_converter: &str) -> Case {
    let mut c = bytea_payload_json_converter();
    c.name = name;
    c.props(&[format!("value.converter={value_converter}"), format!("key.converter={STRING}")])
}

pub fn bytea_binary_data_converter() -> Case {
    bytea_raw("bytea_binary_data_converter", "io.debezium.converters.BinaryDataConverter")
}

/// Kafka's own ByteArrayConverter, which Connect users pick for pre-serialised (Avro, Protobuf) payloads.
pub fn bytea_kafka_byte_array_converter() -> Case {
    bytea_raw("bytea_kafka_byte_array_converter", "org.apache.kafka.connect.converters.ByteArrayConverter")
}

/// Rows that exist before the relays start, which create their slots themselves: only a snapshot
/// sees them (as op=r, which the router routes).
pub fn snapshot_initial() -> Case {
    Case::new("snapshot_initial")
        .props(&["snapshot.mode=initial"])
        .relays_create_slots()
        .before_slots((0..5).map(|i| {
            insert(
                if i % 2 == 0 { "Order" } else { "Customer" },
                Some(&format!("pre-{}", i % 3)),
                Some(&format!(r#"{{"i": {i}}}"#)),
            )
        }))
        .topics(&[ORDER, CUSTOMER])
        .records(5)
}

/// `table.field.event.timestamp`: the record timestamp comes from a column, so it is compared.
fn event_timestamp(name: &'static str, column_type: &'static str, values: &[&str]) -> Case {
    let row = |i: usize, ts: &str| {
        format!("INSERT INTO {{t}} (id, aggregatetype, aggregateid, type, payload, ts) VALUES (gen_random_uuid(), 'Order', 'k-{i}', 'Created', '{{\"i\": {i}}}', {})", lit(ts))
    };
    Case::new(name)
        .columns(&[column_type])
        .router(&["table.field.event.timestamp=ts"])
        .sql(values.iter().enumerate().map(|(i, ts)| row(i, ts)))
        .topics(&[ORDER])
        .records(values.len())
        .compare_timestamps()
}

/// timestamp(3): io.debezium.time.Timestamp, milliseconds.
pub fn event_timestamp_millis() -> Case {
    event_timestamp(
        "event_timestamp_millis",
        "ts timestamp(3) NOT NULL",
        // Not exactly 1970-01-01T00:00:00.000: librdkafka treats a record timestamp of 0 as "now", so that
        // one instant cannot be sent (docs/compatibility.md, R-9).
        &[
            "2024-02-29 12:34:56.789",
            "1970-01-01 00:00:01",
            "1970-01-01 00:00:00.001",
            "2038-01-19 03:14:08.5",
            "9999-12-31 23:59:59.999",
        ],
    )
}

/// timestamp (= timestamp(6)): io.debezium.time.MicroTimestamp, divided by 1000 (truncated).
pub fn event_timestamp_micros() -> Case {
    event_timestamp(
        "event_timestamp_micros",
        "ts timestamp NOT NULL",
        &[
            "2024-02-29 12:34:56.789999",
            "2000-01-01 00:00:00.000001",
            "1970-01-01 00:00:01.000999",
            "2024-02-29 12:34:56",
        ],
    )
}

pub fn update_under_fatal_stops_both() -> Case {
    Case::new("update_under_fatal_stops_both")
        .router(&["table.op.invalid.behavior=fatal"])
        .sql([
            insert("Order", Some("a1"), Some(r#"{"v": 1}"#)),
            insert("Order", Some("a2"), Some(r#"{"v": 2}"#)),
            "UPDATE {t} SET payload = '{\"v\": 10}' WHERE aggregateid = 'a1'".to_string(),
            insert("Order", Some("a3"), Some(r#"{"v": 3}"#)),
        ])
        .topics(&[ORDER])
        .fails_after(2)
}

/// `timestamptz` columns placed in a header and in the envelope: Debezium's ZonedTimestamp, an
/// ISO-8601 string in UTC, whatever the offset written and the session's time zone.
pub fn placement_timestamptz() -> Case {
    let values = [
        ("2024-02-29 12:34:56.789+02", "2024-02-29 12:34:56.789+02"),
        ("2024-01-01 00:00:00+00", "2024-01-01 00:00:00.1+00"),
        ("1999-12-31 23:59:59.999999-05:30", "1999-12-31 23:59:59.9995-05:30"),
        ("2000-01-01 00:00:00.000001+00", "1970-01-01 00:00:00+00"),
        ("1900-06-15 08:00:00.12+01", "2262-04-11 23:47:16.854775+00"),
    ];
    let row = |i: usize, (a, b): (&str, &str)| {
        format!(
            "INSERT INTO {{t}} (id, aggregatetype, aggregateid, type, payload, ts, ts3) VALUES (gen_random_uuid(), 'Order', 'k-{i}', 'Created', '{{\"i\": {i}}}', {}, {})",
            lit(a),
            lit(b)
        )
    };
    Case::new("placement_timestamptz")
        .columns(&["ts timestamptz NOT NULL", "ts3 timestamptz(3)"])
        .props(&["transforms.outbox.table.fields.additional.placement=ts:header,ts3:envelope:when".to_string()])
        .sql(values.iter().enumerate().map(|(i, v)| row(i, *v)))
        .topics(&[ORDER])
        .records(values.len())
}

/// A `json` (not `jsonb`) payload column: PostgreSQL keeps the text as written (spacing, key order,
/// duplicate keys), and so must the relays; once with schemas, once expanded.
fn json_column(name: &'static str, expand: bool) -> Case {
    let mut payloads: Vec<&str> = PAYLOADS.to_vec();
    payloads.push("{ \"spaced\" :  [ 1 ,2 ] , \"dup\": 1, \"dup\": 2 }");
    let mut c = Case::new(name).payload_type("json");
    if expand {
        // Expansion stops Debezium 3.6 on top-level arrays and scalars (debezium.md 1.3): objects only.
        payloads.retain(|p| p.starts_with('{') && !p.contains("\"big\"") && !p.contains("items"));
        c = with_props(c.router(&["table.expand.json.payload=true"]), converters(JSON, false, JSON, false));
    }
    let n = payloads.len();
    c.sql(payloads.iter().enumerate().map(|(i, p)| insert("Order", Some(&format!("k-{i}")), Some(p))))
        .topics(&[ORDER])
        .records(n)
}

pub fn json_column_payloads() -> Case {
    json_column("json_column_payloads", false)
}

pub fn json_column_payloads_expanded() -> Case {
    json_column("json_column_payloads_expanded", true)
}

/// The event id from a bigint column and from a text one (`table.field.event.id`): the `id` header
/// as SimpleHeaderConverter writes each type.
fn event_id_column(name: &'static str, column: &'static str, values: &[&str]) -> Case {
    let ty = column.split_whitespace().nth(1).unwrap_or("text");
    let row = |i: usize, v: &str| {
        format!("INSERT INTO {{t}} (id, aggregatetype, aggregateid, type, payload, eid) VALUES (gen_random_uuid(), 'Order', 'k-{i}', 'Created', '{{\"i\": {i}}}', {}::{ty})", lit(v))
    };
    Case::new(name)
        .columns(&[column])
        .router(&["table.field.event.id=eid"])
        .sql(values.iter().enumerate().map(|(i, v)| row(i, v)))
        .topics(&[ORDER])
        .records(values.len())
}

pub fn event_id_bigint_column() -> Case {
    event_id_column("event_id_bigint_column", "eid bigint NOT NULL", &["1", "-7", "9223372036854775807"])
}

pub fn event_id_text_column() -> Case {
    event_id_column("event_id_text_column", "eid text NOT NULL", &["evt-1", "ünïcode ✓", "with \"quotes\""])
}

/// The outbox table changes while the relays stream: a column added (and placed in a header by
/// the router from then on), columns reordered by a drop, a routed column's type widened. Each change
/// reaches the relays as a new Relation message before the next row.
pub fn table_altered_mid_stream() -> Case {
    Case::new("table_altered_mid_stream")
        .props(&["transforms.outbox.table.fields.additional.placement=tenant:header".to_string()])
        .columns(&["tenant text"])
        .sql([
            insert("Order", Some("a"), Some(r#"{"step": 1}"#)),
            "ALTER TABLE {t} ADD COLUMN note text".to_string(),
            "INSERT INTO {t} (id, aggregatetype, aggregateid, type, payload, tenant, note) VALUES (gen_random_uuid(), 'Order', 'a', 'Created', '{\"step\": 2}', 't1', 'n')".to_string(),
            "ALTER TABLE {t} DROP COLUMN note".to_string(),
            "ALTER TABLE {t} ALTER COLUMN tenant TYPE varchar(40)".to_string(),
            "INSERT INTO {t} (id, aggregatetype, aggregateid, type, payload, tenant) VALUES (gen_random_uuid(), 'Order', 'b', 'Created', '{\"step\": 3}', 't2')".to_string(),
            tx(&[insert("Order", Some("a"), Some(r#"{"step": 4}"#)), "ALTER TABLE {t} ADD COLUMN late int".to_string(), insert("Order", Some("b"), Some(r#"{"step": 5}"#))]),
        ])
        .topics(&[ORDER])
        .records(5)
}

/// Floating-point columns in the envelope (JsonConverter with schemas) and in headers: Java's
/// `Double.toString`/`Float.toString` digits and layout, and the non-finite values.
pub fn placement_floats() -> Case {
    let rows = [
        ("0.1", "1.5", "7"),
        ("1e300", "3.4028235e38", "-3"),
        ("'-0'", "1e-7", "0"),
        ("123456789.125", "0.1", "12"),
        ("'NaN'", "'Infinity'", "1"),
        ("'-Infinity'", "16777217", "2"),
        // Not Float.MIN_NORMAL: Java 17 prints 1.17549435E-38, Java 19+ and pgoutbox 1.1754944E-38
        // (docs/compatibility.md, the Java 17 note).
        ("4.9e-324", "0.25", "3"),
    ];
    let row = |(r, s, h): (&str, &str, &str)| {
        format!(
            "INSERT INTO {{t}} (id, aggregatetype, aggregateid, type, payload, ratio, score, half) VALUES (gen_random_uuid(), 'Order', 'k', 'Created', '{{}}', {r}, {s}, {h})"
        )
    };
    Case::new("placement_floats")
        .columns(&["ratio float8", "score real NOT NULL", "half int2"])
        .props(&["transforms.outbox.table.fields.additional.placement=ratio:envelope,score:envelope,half:envelope,ratio:header:r,score:header:s".to_string()])
        .sql(rows.iter().map(|r| row(*r)))
        .topics(&[ORDER])
        .records(rows.len())
}

/// numeric(p,s) columns as Connect Decimals (Debezium's default `decimal.handling.mode=precise`): in
/// the envelope (base64 of the unscaled value, the schema's parameters) and in headers
/// (`BigDecimal.toString`, scientific below 10^-6).
fn numerics(name: &'static str, props: Vec<String>) -> Case {
    let rows = [
        ("12.34", "0.0000000001"),
        ("-0.05", "-123.456"),
        ("99999999.99", "0"),
        ("0", "1000000000.5"),
        ("-1.28", "-0.0000001"),
    ];
    let row = |(a, f): (&str, &str)| {
        format!(
            "INSERT INTO {{t}} (id, aggregatetype, aggregateid, type, payload, amount, fine) VALUES (gen_random_uuid(), 'Order', 'k', 'Created', '{{}}', {a}, {f})"
        )
    };
    let mut props = props;
    props.push("transforms.outbox.table.fields.additional.placement=amount:envelope,fine:envelope,amount:header:a,fine:header:f".to_string());
    with_props(Case::new(name).columns(&["amount numeric(10,2) NOT NULL", "fine numeric(20,10)"]), props)
        .sql(rows.iter().map(|r| row(*r)))
        .topics(&[ORDER])
        .records(rows.len())
}

pub fn placement_numerics() -> Case {
    numerics("placement_numerics", vec![])
}

pub fn placement_numerics_string_converter() -> Case {
    numerics("placement_numerics_string_converter", converters(STRING, false, STRING, false))
}

/// Columns with literal defaults (the key, the payload, envelope fields): Debezium reads them from the
/// catalog and puts them in the fields' schemas, and JsonConverter (`replace.null.with.default`, on
/// by default) writes a NULL under such a schema as the default.
pub fn column_defaults() -> Case {
    defaults("column_defaults", Vec::new())
}

/// `column.propagate.source.type` and `datatype.propagate.source.type`: the source type, length,
/// scale and name in the schemas of the key, the payload and the envelope's fields.
pub fn propagate_source_type() -> Case {
    let row = "INSERT INTO {t} (id, aggregatetype, aggregateid, type, payload, amount, ts, tz, flag, n, code, ch, d, tm, iv, f, big) VALUES (gen_random_uuid(), 'Order', 'k', 'Created', '{}', 12.5, '2024-01-02 03:04:05.678', '2024-01-02 03:04:05+01', true, 7, 'abc', 'xy', '2024-02-29', '12:34:56.5', '1 day 2 hours', 1.5, 42)";
    Case::new("propagate_source_type")
        .columns(&[
            "amount numeric(10,2)",
            "ts timestamp(3)",
            "tz timestamptz",
            "flag boolean",
            "n int4",
            "code varchar(8)",
            "ch char(4)",
            "d date",
            "tm time",
            "iv interval",
            "f float4",
            "big int8",
        ])
        .props(&[
            r"column.propagate.source.type=.*\.amount,.*\.aggregateid,.*\.TS,.*\.tz,.*\.flag,.*\.n,.*\.code,.*\.ch".to_string(),
            r"datatype.propagate.source.type=.+\.jsonb,.+\.date,.+\.time,.+\.interval,.+\.FLOAT4".to_string(),
            "transforms.outbox.table.fields.additional.placement=amount:envelope,ts:envelope,tz:envelope,flag:envelope,n:envelope,code:envelope,ch:envelope,d:envelope,tm:envelope,iv:envelope,f:envelope,big:envelope".to_string(),
        ])
        .sql([row.to_string()])
        .topics(&[ORDER])
        .records(1)
}

/// [`column_defaults`] through Confluent's AvroConverter: the defaults in the registered schemas
/// (`connect.default`, the fields' `default`, an optional field's union with the null last).
pub fn avro_confluent_column_defaults() -> Case {
    defaults("avro_confluent_column_defaults", confluent()).registry(super::registry::Ids::Prefix4Content)
}

/// [`column_defaults`] through Apicurio's AvroConverter, the ids in headers.
pub fn avro_apicurio_column_defaults() -> Case {
    defaults("avro_apicurio_column_defaults", apicurio(&[])).registry(super::registry::Ids::Headers)
}

/// [`column_defaults`] through Confluent's ProtobufConverter.
pub fn protobuf_confluent_column_defaults() -> Case {
    defaults("protobuf_confluent_column_defaults", confluent_protobuf()).registry(super::registry::Ids::Prefix4Content)
}

/// [`column_defaults`] through Apicurio's ExtJsonConverter (JsonConverter's schemas, defaults
/// included, as KCONNECT artifacts).
pub fn ext_json_apicurio_column_defaults() -> Case {
    let mut case =
        defaults("ext_json_apicurio_column_defaults", apicurio_ext_json()).registry(super::registry::Ids::ExtJson);
    case.partitions = 1;
    case
}

fn defaults(name: &'static str, props: Vec<String>) -> Case {
    let rows = [
        "INSERT INTO {t} (id, aggregatetype, aggregateid, type, payload, status, qty, price, flag, note, meta) VALUES (gen_random_uuid(), 'Order', 'k1', 'Created', '{\"a\": 1}', 'paid', 3, 1.5, false, 'n', '[]')",
        "INSERT INTO {t} (id, aggregatetype, type) VALUES (gen_random_uuid(), 'Order', 'Created')",
        "INSERT INTO {t} (id, aggregatetype, aggregateid, type, payload, status, price, flag, note, meta, ref, at, d, ts, f, iv) VALUES (gen_random_uuid(), 'Order', NULL, 'Created', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
    ];
    with_props(Case::new(name), props)
        .nullable_key()
        .columns(&[
            "status varchar(16) DEFAULT 'new'::character varying",
            "qty int4 NOT NULL DEFAULT 1",
            "price numeric(10,2) DEFAULT 9.99",
            "flag boolean DEFAULT true",
            "note text DEFAULT 'it''s'",
            "meta jsonb DEFAULT '{}'::jsonb",
            "made timestamptz DEFAULT now()",
            "ref uuid DEFAULT gen_random_uuid()",
            "at timestamptz DEFAULT CURRENT_TIMESTAMP",
            "d date DEFAULT CURRENT_DATE",
            "ts timestamp DEFAULT '2024-01-02 03:04:05.5'",
            "f float8 DEFAULT -2.5",
            "seq bigserial",
            "iv interval DEFAULT '1 day 02:00:00'",
        ])
        .before_slots([
            "ALTER TABLE {t} ALTER COLUMN aggregateid SET DEFAULT 'none'".to_string(),
            "ALTER TABLE {t} ALTER COLUMN payload SET DEFAULT '{\"empty\": true}'".to_string(),
        ])
        .props(&["transforms.outbox.table.fields.additional.placement=status:envelope,qty:envelope,price:envelope,flag:envelope,note:envelope,meta:envelope,ref:envelope,at:envelope,d:envelope,ts:envelope,f:envelope,seq:envelope,iv:envelope,made:header,status:header,ts:header".to_string()])
        .sql(rows.iter().map(|r| r.to_string()))
        .topics(&[ORDER])
        .records(rows.len())
}

/// JsonConverter's `decimal.format=NUMERIC` (both converters, schemas on): the envelope's Decimals as
/// JSON numbers under the same Decimal schema.
pub fn placement_numerics_decimal_format_numeric() -> Case {
    numerics(
        "placement_numerics_decimal_format_numeric",
        vec!["value.converter.decimal.format=NUMERIC".to_string(), "key.converter.decimal.format=numeric".to_string()],
    )
}

/// The other column types a router reads, in the envelope (JsonConverter with schemas) and in headers:
/// date, timestamp (micro and milli precision), boolean, uuid, int4, varchar(n), bpchar, xml.
pub fn placement_column_types() -> Case {
    let rows = [
        ("2024-02-29", "2024-02-29 12:34:56.789999", "2024-02-29 12:34:56.789", "true", "7", "x"),
        ("1969-12-31", "1969-12-31 23:59:59.999999", "1970-01-01 00:00:00", "false", "-2147483648", "ü"),
        ("0001-01-01", "2262-04-11 23:47:16.854775", "1900-01-01 00:00:00.5", "true", "0", "a b"),
    ];
    let row = |(d, ts, ts3, b, i, c): (&str, &str, &str, &str, &str, &str)| {
        format!(
            "INSERT INTO {{t}} (id, aggregatetype, aggregateid, type, payload, d, ts, ts3, flag, n, u, code, ch, doc) VALUES (gen_random_uuid(), 'Order', 'k', 'Created', '{{}}', '{d}', '{ts}', '{ts3}', {b}, {i}, gen_random_uuid(), {}, {}, '<a>{c}</a>')",
            lit(c),
            lit(c)
        )
    };
    Case::new("placement_column_types")
        .columns(&[
            "d date NOT NULL",
            "ts timestamp",
            "ts3 timestamp(3)",
            "flag boolean",
            "n int4",
            "u uuid",
            "code varchar(8)",
            "ch char(4)",
            "doc xml",
        ])
        .props(&["transforms.outbox.table.fields.additional.placement=d:envelope,ts:envelope,ts3:envelope,flag:envelope,n:envelope,code:envelope,ch:envelope,doc:envelope,d:header,ts:header,ts3:header,flag:header,n:header,code:header,ch:header,doc:header".to_string()])
        .sql(rows.iter().map(|r| row(*r)))
        .topics(&[ORDER])
        .records(rows.len())
}

/// `decimal.handling.mode=double|string`: numerics as FLOAT64 or as text, including a `numeric`
/// without a declared precision (which `precise` cannot route).
fn numerics_as(name: &'static str, mode: &str) -> Case {
    let rows = [
        ("12.34", "0.0000000001"),
        ("-0.05", "-123.456"),
        ("99999999.99", "1e20"),
        ("0", "'NaN'"),
        ("-1.28", "42"),
        ("1", "'Infinity'"),
        ("2", "'-Infinity'"),
    ];
    let row = |(a, f): (&str, &str)| {
        format!(
            "INSERT INTO {{t}} (id, aggregatetype, aggregateid, type, payload, amount, raw) VALUES (gen_random_uuid(), 'Order', 'k', 'Created', '{{}}', {a}, {f})"
        )
    };
    Case::new(name)
        .columns(&["amount numeric(10,2) NOT NULL", "raw numeric"])
        .props(&[
            format!("decimal.handling.mode={mode}"),
            "transforms.outbox.table.fields.additional.placement=amount:envelope,raw:envelope,amount:header:a,raw:header:r"
                .to_string(),
        ])
        .sql(rows.iter().map(|r| row(*r)))
        .topics(&[ORDER])
        .records(rows.len())
}

pub fn numerics_as_double() -> Case {
    numerics_as("numerics_as_double", "double")
}

pub fn numerics_as_string() -> Case {
    numerics_as("numerics_as_string", "string")
}

/// A `numeric` without a declared precision under the default `precise` mode: Debezium's
/// VariableScaleDecimal struct (`scale`, unscaled `value`).
pub fn variable_scale_numerics() -> Case {
    let rows = ["12.34", "-0.05", "0", "1e20", "0.0000000001", "-128"];
    let row = |v: &str| {
        format!(
            "INSERT INTO {{t}} (id, aggregatetype, aggregateid, type, payload, raw) VALUES (gen_random_uuid(), 'Order', 'k', 'Created', '{{}}', {v})"
        )
    };
    Case::new("variable_scale_numerics")
        .columns(&["raw numeric"])
        .props(&["transforms.outbox.table.fields.additional.placement=raw:envelope".to_string()])
        .sql(rows.iter().map(|r| row(r)))
        .topics(&[ORDER])
        .records(rows.len())
}

/// `binary.handling.mode` other than `bytes`: a bytea payload (and header) as a STRING, encoded.
fn bytea_as(name: &'static str, mode: &str) -> Case {
    let row = |key: &str, expr: &str| {
        format!("INSERT INTO {{t}} (id, aggregatetype, aggregateid, type, payload, blob) VALUES (gen_random_uuid(), 'Order', {}, 'Created', {expr}, {expr})", lit(key))
    };
    Case::new(name)
        .payload_type("bytea")
        .columns(&["blob bytea"])
        .props(&[
            format!("binary.handling.mode={mode}"),
            "transforms.outbox.table.fields.additional.placement=blob:header".to_string(),
        ])
        .sql([
            row("b-1", r"'\x00ff10'::bytea"),
            row("b-2", "''::bytea"),
            row("b-3", "NULL"),
            row("b-4", r"'\xfbffbf'::bytea"),
            row("b-5", "convert_to('héllo', 'UTF8')"),
        ])
        .topics(&[ORDER])
        .records(5)
}

pub fn bytea_as_base64() -> Case {
    bytea_as("bytea_as_base64", "base64")
}

pub fn bytea_as_base64_url_safe() -> Case {
    bytea_as("bytea_as_base64_url_safe", "base64-url-safe")
}

pub fn bytea_as_hex() -> Case {
    bytea_as("bytea_as_hex", "hex")
}

/// `date`, `time` and `timestamp` columns under a `time.precision.mode`, in the envelope and in
/// headers: instants before 1970, at midnight and on whole days (Kafka's `Values.convertToString`
/// picks its layout by the value), and a date before the Gregorian cutover (`java.util.Date.toString`
/// of the StringConverter turns Julian there).
fn temporal(name: &'static str, mode: &str, mut props: Vec<String>) -> Case {
    let rows = [
        ("2024-02-29", "12:34:56.789012", "12:34:56.789", "2024-02-29 12:34:56.789999", "2024-02-29 12:34:56.789"),
        ("1969-12-31", "00:00:00", "23:59:59.999", "1969-12-31 23:59:59.999999", "1970-01-01 00:00:00"),
        ("1970-01-02", "23:59:59.999999", "00:00:00.001", "2024-02-29 00:00:00", "1970-01-02 00:00:00"),
        ("0001-01-01", "00:00:00.000001", "12:00:00", "1900-01-01 00:00:00.5", "1677-09-22 00:00:00"),
    ];
    let row = |(d, t, t3, ts, ts3): (&str, &str, &str, &str, &str)| {
        format!(
            "INSERT INTO {{t}} (id, aggregatetype, aggregateid, type, payload, d, t, t3, ts, ts3) VALUES (gen_random_uuid(), 'Order', 'k', 'Created', '{{}}', '{d}', '{t}', '{t3}', '{ts}', '{ts3}')"
        )
    };
    props.push(format!("time.precision.mode={mode}"));
    props.push("transforms.outbox.table.fields.additional.placement=d:envelope,t:envelope,t3:envelope,ts:envelope,ts3:envelope,d:header,t:header,t3:header,ts:header,ts3:header".to_string());
    with_props(
        Case::new(name).columns(&[
            "d date NOT NULL",
            "t time",
            "t3 time(3)",
            "ts timestamp",
            "ts3 timestamp(3) NOT NULL",
        ]),
        props,
    )
    .sql(rows.iter().map(|r| row(*r)))
    .topics(&[ORDER])
    .records(rows.len())
}

/// `time` columns (Time and MicroTime) beside the date and timestamp ones already covered.
pub fn temporal_adaptive() -> Case {
    temporal("temporal_adaptive", "adaptive", vec![])
}

/// Kafka Connect's Timestamp, Time and Date: milliseconds in JSON, `Values` layouts in headers.
pub fn temporal_connect() -> Case {
    temporal("temporal_connect", "connect", vec![])
}

/// The same through StringConverter: the envelope is `Struct.toString`, so `java.util.Date.toString`.
pub fn temporal_connect_string_converter() -> Case {
    temporal("temporal_connect_string_converter", "connect", converters(STRING, false, STRING, false))
}

pub fn temporal_microseconds() -> Case {
    temporal("temporal_microseconds", "microseconds", vec![])
}

/// NanoTimestamp and NanoTime (the timestamps stay within a signed 64-bit count of nanoseconds).
pub fn temporal_nanoseconds() -> Case {
    temporal("temporal_nanoseconds", "nanoseconds", vec![])
}

pub fn temporal_adaptive_time_microseconds() -> Case {
    temporal("temporal_adaptive_time_microseconds", "adaptive_time_microseconds", vec![])
}

/// IsoDate, IsoTime and IsoTimestamp strings.
pub fn temporal_isostring() -> Case {
    temporal("temporal_isostring", "isostring", vec![])
}

/// `timetz` columns (Debezium's ZonedTime, a string) of each precision, with offsets that carry the
/// time across midnight.
pub fn placement_timetz() -> Case {
    let rows = [
        ("12:34:56.789012+02", "12:34:56.789+02", "12:34:56+02"),
        ("23:30:00-01", "00:15:00.5+05:30", "00:00:00+00"),
        ("00:00:00.000001+00", "23:59:59.999-00:30", "23:59:59-12"),
    ];
    let row = |(tz, tz3, tz0): (&str, &str, &str)| {
        format!(
            "INSERT INTO {{t}} (id, aggregatetype, aggregateid, type, payload, tz, tz3, tz0) VALUES (gen_random_uuid(), 'Order', 'k', 'Created', '{{}}', '{tz}', '{tz3}', '{tz0}')"
        )
    };
    Case::new("placement_timetz")
        .columns(&["tz timetz NOT NULL", "tz3 timetz(3)", "tz0 timetz(0)"])
        .props(&["transforms.outbox.table.fields.additional.placement=tz:envelope,tz3:envelope,tz0:envelope,tz:header,tz3:header,tz0:header".to_string()])
        .sql(rows.iter().map(|r| row(*r)))
        .topics(&[ORDER])
        .records(rows.len())
}

/// `interval` columns under `interval.handling.mode` (MicroDuration in floating point, or the ISO
/// duration string): mixed signs, fractions, large values.
fn intervals(name: &'static str, mode: &str) -> Case {
    let rows = [
        ("1 year 2 months 3 days 04:05:06.78", "-00:00:01.5"),
        ("-1 days +02:03:00", "12345678 days 11:11:11.111111"),
        ("00:00:00.000001", "-1 year -2 mons -3 days -04:05:06.789012"),
        ("0", "1 day 100:00:00"),
    ];
    let row = |(a, b): (&str, &str)| {
        format!(
            "INSERT INTO {{t}} (id, aggregatetype, aggregateid, type, payload, span, span2) VALUES (gen_random_uuid(), 'Order', 'k', 'Created', '{{}}', '{a}', '{b}')"
        )
    };
    Case::new(name)
        .columns(&["span interval NOT NULL", "span2 interval"])
        .props(&[
            format!("interval.handling.mode={mode}"),
            "transforms.outbox.table.fields.additional.placement=span:envelope,span2:envelope,span:header,span2:header"
                .to_string(),
        ])
        .sql(rows.iter().map(|r| row(*r)))
        .topics(&[ORDER])
        .records(rows.len())
}

pub fn intervals_numeric() -> Case {
    intervals("intervals_numeric", "numeric")
}

pub fn intervals_string() -> Case {
    intervals("intervals_string", "string")
}

/// `table.field.event.schema.version`: the envelope struct's schema carries the row's version.
pub fn schema_version_envelope() -> Case {
    let row = |i: usize, v: &str| {
        format!(
            "INSERT INTO {{t}} (id, aggregatetype, aggregateid, type, payload, ver) VALUES (gen_random_uuid(), 'Order', 'k-{i}', 'Created', '{{\"i\": {i}}}', {v})"
        )
    };
    let versions = ["1", "7", "2147483647"];
    Case::new("schema_version_envelope")
        .columns(&["ver integer NOT NULL"])
        .router(&["table.field.event.schema.version=ver"])
        .props(&["transforms.outbox.table.fields.additional.placement=type:envelope:eventType".to_string()])
        .sql(versions.iter().enumerate().map(|(i, v)| row(i, v)))
        .topics(&[ORDER])
        .records(versions.len())
}

/// Expansion with `table.json.payload.null.behavior=optional_bytes`: JSON nulls (top level, nested,
/// in arrays) get an optional BYTES schema instead of being left out.
pub fn expand_json_payload_null_optional_bytes() -> Case {
    let payloads = [r#"{"a": null, "b": 1}"#, r#"{"n": {"x": null, "y": "z"}}"#, r#"{"e": [], "k": null}"#];
    with_props(
        Case::new("expand_json_payload_null_optional_bytes")
            .router(&["table.expand.json.payload=true", "table.json.payload.null.behavior=optional_bytes"]),
        converters(JSON, false, JSON, true),
    )
    .sql(payloads.iter().enumerate().map(|(i, p)| insert("Order", Some(&format!("k-{i}")), Some(p))))
    .topics(&[ORDER])
    .records(payloads.len())
}

/// `table.field.additional.missing=ignore`: a placed column the table lacks is skipped, the others
/// are placed.
pub fn additional_missing_ignored() -> Case {
    with_props(
        placement("additional_missing_ignored", "type:header:eventType,nosuchcolumn:header,part:envelope"),
        vec!["transforms.outbox.table.field.additional.missing=ignore".to_string()],
    )
}

/// One-dimensional array columns (Connect ARRAY of optional elements) in the envelope and in headers:
/// quoting, NULL elements, the string "NULL", empty arrays.
fn arrays(name: &'static str, props: Vec<String>) -> Case {
    let rows = [
        (r#"{a,"b c",NULL,"q\"x","","NULL","back\\slash"}"#, "{1,-2,NULL}", "{t,f}", "{1.5,-0.25,NULL}"),
        ("{}", "{2147483647}", "{NULL}", "{}"),
        ("{ü,\"{x}\",\"a,b\"}", "{}", "{}", "{1e+20,0.001}"),
    ];
    let row = |(t, n, b, f): (&str, &str, &str, &str)| {
        format!(
            "INSERT INTO {{t}} (id, aggregatetype, aggregateid, type, payload, tags, nums, flags, ratios) VALUES (gen_random_uuid(), 'Order', 'k', 'Created', '{{}}', {}, '{n}', '{b}', '{f}')",
            lit(t)
        )
    };
    let mut props = props;
    props.push("transforms.outbox.table.fields.additional.placement=tags:envelope,nums:envelope,flags:envelope,ratios:envelope,tags:header,nums:header,flags:header,ratios:header".to_string());
    with_props(
        Case::new(name).columns(&["tags text[] NOT NULL", "nums int4[]", "flags boolean[]", "ratios float8[]"]),
        props,
    )
    .sql(rows.iter().map(|r| row(*r)))
    .topics(&[ORDER])
    .records(rows.len())
}

pub fn placement_arrays() -> Case {
    arrays("placement_arrays", vec![])
}

pub fn placement_arrays_string_converter() -> Case {
    arrays("placement_arrays_string_converter", converters(STRING, false, STRING, false))
}

/// `header.converter`: JsonConverter (with and without schemas) and StringConverter write every
/// header (the id, placed columns of several types, the context headers) through `fromConnectHeader`.
fn header_converter(name: &'static str, props: &[&str]) -> Case {
    let rows = [("7", "2024-02-29 12:34:56.789", "note \"quoted\""), ("-1", "1969-12-31 23:59:59", "ü")];
    let row = |(n, ts, t): (&str, &str, &str)| {
        format!(
            "INSERT INTO {{t}} (id, aggregatetype, aggregateid, type, payload, n, ts, note) VALUES (gen_random_uuid(), 'Order', 'k', 'Created', '{{}}', {n}, '{ts}', {})",
            lit(t)
        )
    };
    let mut props: Vec<String> = props.iter().map(|p| p.to_string()).collect();
    props.push("transforms.outbox.table.fields.additional.placement=type:header:eventType,n:header,ts:header,note:header,aggregateid:header".to_string());
    Case::new(name)
        .columns(&["n integer NOT NULL", "ts timestamp(3)", "note text"])
        .props(&props)
        .sql(rows.iter().map(|r| row(*r)))
        .topics(&[ORDER])
        .records(rows.len())
}

pub fn header_converter_json() -> Case {
    header_converter("header_converter_json", &["header.converter=org.apache.kafka.connect.json.JsonConverter"])
}

pub fn header_converter_json_schemas_off() -> Case {
    header_converter(
        "header_converter_json_schemas_off",
        &["header.converter=org.apache.kafka.connect.json.JsonConverter", "header.converter.schemas.enable=false"],
    )
}

pub fn header_converter_string() -> Case {
    header_converter("header_converter_string", &["header.converter=org.apache.kafka.connect.storage.StringConverter"])
}

/// `infinity` and `-infinity` in date and timestamp columns (PostgreSQL's special values), which
/// Debezium turns into fixed far-away instants.
pub fn temporal_infinities() -> Case {
    infinities("temporal_infinities", "adaptive")
}

pub fn temporal_infinities_connect() -> Case {
    infinities("temporal_infinities_connect", "connect")
}

pub fn temporal_infinities_isostring() -> Case {
    infinities("temporal_infinities_isostring", "isostring")
}

fn infinities(name: &'static str, mode: &str) -> Case {
    let rows = [("infinity", "infinity", "infinity"), ("-infinity", "-infinity", "-infinity")];
    let row = |(d, ts, ts3): (&str, &str, &str)| {
        format!(
            "INSERT INTO {{t}} (id, aggregatetype, aggregateid, type, payload, d, ts, ts3) VALUES (gen_random_uuid(), 'Order', 'k', 'Created', '{{}}', '{d}', '{ts}', '{ts3}')"
        )
    };
    Case::new(name).columns(&["d date", "ts timestamp", "ts3 timestamp(3)"]).props(&[
        format!("time.precision.mode={mode}"),
        "transforms.outbox.table.fields.additional.placement=d:envelope,ts:envelope,ts3:envelope,d:header,ts:header,ts3:header".to_string(),
    ])
        .sql(rows.iter().map(|r| row(*r)))
        .topics(&[ORDER])
        .records(rows.len())
}

/// `24:00:00`, the one `time` PostgreSQL allows past the last second of the day, in each mode family.
fn end_of_day(name: &'static str, mode: &str) -> Case {
    let row = |t: &str| {
        format!(
            "INSERT INTO {{t}} (id, aggregatetype, aggregateid, type, payload, t, t3) VALUES (gen_random_uuid(), 'Order', 'k', 'Created', '{{}}', '{t}', '{t}')"
        )
    };
    Case::new(name)
        .columns(&["t time", "t3 time(3)"])
        .props(&[
            format!("time.precision.mode={mode}"),
            "transforms.outbox.table.fields.additional.placement=t:envelope,t3:envelope,t:header,t3:header".to_string(),
        ])
        .sql(["24:00:00", "23:59:59.999999"].iter().map(|t| row(t)))
        .topics(&[ORDER])
        .records(2)
}

pub fn time_end_of_day_adaptive() -> Case {
    end_of_day("time_end_of_day_adaptive", "adaptive")
}

pub fn time_end_of_day_connect() -> Case {
    end_of_day("time_end_of_day_connect", "connect")
}

pub fn time_end_of_day_isostring() -> Case {
    end_of_day("time_end_of_day_isostring", "isostring")
}

// ---- Transform chains (Kafka's transforms and predicates around the Event Router) ----

const ROUTED_ORDER: &str = "orders.Order";
const ROUTED_CUSTOMER: &str = "orders.Customer";

fn props(lines: &[&str]) -> Vec<String> {
    lines.iter().map(|s| s.to_string()).collect()
}

/// `transforms=outbox,route,tag` with a predicate: RegexRouter renames every topic, InsertHeader
/// tags only the orders (TopicNameMatches on the renamed topic), a third transform (DropHeaders,
/// negated predicate) drops the event id of everything that is not an order.
pub fn chain_router_header_predicates() -> Case {
    with_props(
        Case::new("chain_router_header_predicates"),
        props(&[
            "transforms=outbox,route,tag,untag",
            "transforms.route.type=org.apache.kafka.connect.transforms.RegexRouter",
            "transforms.route.regex=outbox\\.event\\.(.*)",
            "transforms.route.replacement=orders.$1",
            "transforms.tag.type=org.apache.kafka.connect.transforms.InsertHeader",
            "transforms.tag.header=source",
            "transforms.tag.value.literal=pgoutbox",
            "transforms.tag.predicate=isOrder",
            "transforms.untag.type=org.apache.kafka.connect.transforms.DropHeaders",
            "transforms.untag.headers=id",
            "transforms.untag.predicate=isOrder",
            "transforms.untag.negate=true",
            "predicates=isOrder",
            "predicates.isOrder.type=org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
            "predicates.isOrder.pattern=orders\\.Order",
        ]),
    )
    .sql(standard_events())
    .topics(&[ROUTED_ORDER, ROUTED_CUSTOMER])
    .records(STANDARD_RECORDS)
}

/// Debezium 3.6's EnforceRecordSize after the router, with a limit every record passes: it truncates
/// only the `before`/`after` strings of a change event's envelope, and the router's records have
/// none, so both relays publish every record unchanged (none dropped, none truncated).
pub fn chain_enforce_record_size_after_router() -> Case {
    with_props(
        Case::new("chain_enforce_record_size_after_router"),
        props(&[
            "transforms=outbox,size",
            "transforms.size.type=io.debezium.transforms.EnforceRecordSize",
            "transforms.size.max.bytes=64",
            "transforms.size.compression.ratio=2.5",
            "transforms.size.min.field.size=1",
        ]),
    )
    .sql(standard_events())
    .topics(&[ORDER, CUSTOMER])
    .records(STANDARD_RECORDS)
}

/// Before the router: DropHeaders on Debezium's context headers; after it: Filter with a predicate
/// drops the customers (their rows still move the position), under StringConverter.
pub fn chain_filter_and_headers_before_router() -> Case {
    let mut p = converters(STRING, false, STRING, false);
    p.extend(props(&[
        "transforms=drop,outbox,onlyOrders",
        "transforms.drop.type=org.apache.kafka.connect.transforms.DropHeaders",
        "transforms.drop.headers=__debezium.context.taskId,__debezium.context.connectorName",
        "transforms.onlyOrders.type=org.apache.kafka.connect.transforms.Filter",
        "transforms.onlyOrders.predicate=isCustomer",
        "predicates=isCustomer",
        "predicates.isCustomer.type=org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
        "predicates.isCustomer.pattern=outbox\\.event\\.Customer",
    ]));
    with_props(Case::new("chain_filter_and_headers_before_router"), p)
        .sql(standard_events())
        .topics(&[ORDER, CUSTOMER])
        .records(7)
}

/// The envelope through five struct transforms: HeaderFrom (copy), InsertField (topic and a static
/// field), ReplaceField (a rename and an exclusion), SetSchemaMetadata, ValueToKey; JsonConverter
/// with schemas for key and value.
pub fn chain_envelope_struct_transforms() -> Case {
    let row = |i: usize| {
        format!(
            "INSERT INTO {{t}} (id, aggregatetype, aggregateid, type, payload) VALUES (gen_random_uuid(), 'Order', 'k-{i}', 'Created-{i}', '{{\"i\": {i}}}')"
        )
    };
    Case::new("chain_envelope_struct_transforms")
        .props(&props(&[
            "transforms.outbox.table.fields.additional.placement=type:envelope:eventType,aggregateid:envelope:aggregate",
            "transforms=outbox,hf,ins,rep,meta,key",
            "transforms.hf.type=org.apache.kafka.connect.transforms.HeaderFrom$Value",
            "transforms.hf.fields=eventType",
            "transforms.hf.headers=eventType",
            "transforms.hf.operation=copy",
            "transforms.ins.type=org.apache.kafka.connect.transforms.InsertField$Value",
            "transforms.ins.topic.field=topic!",
            "transforms.ins.static.field=origin",
            "transforms.ins.static.value=pg",
            "transforms.rep.type=org.apache.kafka.connect.transforms.ReplaceField$Value",
            "transforms.rep.renames=payload:body",
            "transforms.rep.exclude=aggregate",
            "transforms.meta.type=org.apache.kafka.connect.transforms.SetSchemaMetadata$Value",
            "transforms.meta.schema.name=com.example.OrderEvent",
            "transforms.meta.schema.version=2",
            "transforms.key.type=org.apache.kafka.connect.transforms.ValueToKey",
            "transforms.key.fields=eventType",
        ]))
        .sql((0..4).map(row))
        .topics(&[ORDER])
        .records(4)
}

/// The plain payload hoisted into a struct, then a part of the expanded payload extracted, and the
/// topic by record time (TimestampRouter); JsonConverter without schemas for the value.
pub fn chain_hoist_extract_timestamp_router() -> Case {
    let day = {
        let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
        // The topic Debezium names from the record time: today in UTC (both relays run now).
        let (y, m, d) = pgoutbox::connect::java::date::civil_from_days(secs.div_euclid(86_400));
        format!("{y:04}{m:02}{d:02}")
    };
    let topic: &'static str = Box::leak(format!("{ORDER}-{day}").into_boxed_str());
    let mut p = converters(STRING, false, JSON, false);
    p.extend(props(&[
        "transforms.outbox.table.expand.json.payload=true",
        "transforms=outbox,pick,wrap,daily",
        "transforms.pick.type=org.apache.kafka.connect.transforms.ExtractField$Value",
        "transforms.pick.field=order",
        "transforms.wrap.type=org.apache.kafka.connect.transforms.HoistField$Value",
        "transforms.wrap.field=event",
        "transforms.daily.type=org.apache.kafka.connect.transforms.TimestampRouter",
    ]));
    let payloads = [r#"{"order": {"id": 1, "lines": [1, 2]}, "meta": "x"}"#, r#"{"order": {"id": 2, "lines": []}}"#];
    with_props(Case::new("chain_hoist_extract_timestamp_router"), p)
        .sql(payloads.iter().enumerate().map(|(i, p)| insert("Order", Some(&format!("k-{i}")), Some(p))))
        .topics(&[topic])
        .records(payloads.len())
}

/// RecordIsTombstone and HasHeaderKey (one negated), with tombstones on, under StringConverter
/// values and JsonConverter keys: tombstones get a header, events with a `eventType` header lose
/// it, the others get a `plain` header.
pub fn chain_tombstone_and_header_key_predicates() -> Case {
    let payloads = [None, Some("{}"), Some(r#"{"ok": 1}"#), None];
    let mut p = converters(JSON, true, STRING, false);
    p.extend(props(&[
        "transforms.outbox.route.tombstone.on.empty.payload=true",
        "transforms.outbox.table.fields.additional.placement=type:header:eventType",
        "transforms=outbox,mark,strip,plain",
        "transforms.mark.type=org.apache.kafka.connect.transforms.InsertHeader",
        "transforms.mark.header=tombstone",
        "transforms.mark.value.literal=true",
        "transforms.mark.predicate=isTombstone",
        "transforms.strip.type=org.apache.kafka.connect.transforms.DropHeaders",
        "transforms.strip.headers=eventType",
        "transforms.strip.predicate=isTombstone",
        "transforms.plain.type=org.apache.kafka.connect.transforms.InsertHeader",
        "transforms.plain.header=kept",
        "transforms.plain.value.literal=42",
        "transforms.plain.predicate=hasType",
        "transforms.plain.negate=false",
        "predicates=isTombstone,hasType",
        "predicates.isTombstone.type=org.apache.kafka.connect.transforms.predicates.RecordIsTombstone",
        "predicates.hasType.type=org.apache.kafka.connect.transforms.predicates.HasHeaderKey",
        "predicates.hasType.name=eventType",
    ]));
    with_props(Case::new("chain_tombstone_and_header_key_predicates"), p)
        .sql(payloads.iter().enumerate().map(|(i, p)| insert("Order", Some(&format!("k-{i}")), *p)))
        .topics(&[ORDER])
        .records(payloads.len())
}

/// Debezium's transforms after the router: HeaderToValue moves the event id and a context header
/// into the envelope; PartitionRouting, TimezoneConverter and the tracing transform leave the
/// router's records as they are (they act on change-event envelopes only).
pub fn chain_debezium_transforms() -> Case {
    let row = |i: usize| {
        format!(
            "INSERT INTO {{t}} (id, aggregatetype, aggregateid, type, payload) VALUES (gen_random_uuid(), 'Order', 'k-{i}', 'Created', '{{\"i\": {i}}}')"
        )
    };
    Case::new("chain_debezium_transforms")
        .props(&props(&[
            "transforms.outbox.table.fields.additional.placement=type:envelope:eventType",
            "transforms=outbox,h2v,parts,tz,trace",
            "transforms.h2v.type=io.debezium.transforms.HeaderToValue",
            "transforms.h2v.headers=id,__debezium.context.taskId",
            "transforms.h2v.fields=event_id,task",
            "transforms.h2v.operation=move",
            "transforms.parts.type=io.debezium.transforms.partitions.PartitionRouting",
            "transforms.parts.partition.payload.fields=change.aggregateid",
            "transforms.parts.partition.topic.num=3",
            "transforms.tz.type=io.debezium.transforms.TimezoneConverter",
            "transforms.tz.converted.timezone=Europe/Paris",
            "transforms.trace.type=io.debezium.transforms.tracing.ActivateTracingSpan",
        ]))
        .sql((0..3).map(row))
        .topics(&[ORDER])
        .records(3)
}

/// An expanded payload in an envelope with typed columns, through Flatten, Cast, MaskField and
/// TimestampConverter; JsonConverter with schemas.
pub fn chain_flatten_cast_mask_timestamp() -> Case {
    let row = |i: usize, n: &str, flag: &str, amount: &str, ts: &str| {
        format!(
            "INSERT INTO {{t}} (id, aggregatetype, aggregateid, type, payload, n, flag, amount, ts) VALUES (gen_random_uuid(), 'Order', 'k-{i}', 'Created', '{{\"id\": {i}, \"customer\": {{\"name\": \"c{i}\", \"vip\": true}}}}', {n}, {flag}, {amount}, {ts})"
        )
    };
    Case::new("chain_flatten_cast_mask_timestamp")
        .columns(&["n integer", "flag boolean", "amount numeric(10,2)", "ts timestamp(3)"])
        .props(&props(&[
            "transforms.outbox.table.expand.json.payload=true",
            "transforms.outbox.table.fields.additional.placement=n:envelope,flag:envelope,amount:envelope,ts:envelope,aggregateid:envelope:agg",
            "transforms=outbox,flat,cast,mask,tsc",
            "transforms.flat.type=org.apache.kafka.connect.transforms.Flatten$Value",
            "transforms.flat.delimiter=_",
            "transforms.cast.type=org.apache.kafka.connect.transforms.Cast$Value",
            "transforms.cast.spec=n:string,flag:int8,payload_id:float64,amount:float64",
            "transforms.mask.type=org.apache.kafka.connect.transforms.MaskField$Value",
            "transforms.mask.fields=agg,payload_customer_name",
            "transforms.tsc.type=org.apache.kafka.connect.transforms.TimestampConverter$Value",
            "transforms.tsc.field=ts",
            "transforms.tsc.target.type=string",
            "transforms.tsc.format=yyyy-MM-dd HH:mm:ss.SSS",
        ]))
        .sql([
            row(0, "42", "true", "12.34", "'2024-02-29 12:34:56.789'"),
            row(1, "-7", "false", "0.50", "'1999-12-31 23:59:59.999'"),
            row(2, "NULL", "NULL", "NULL", "NULL"),
        ])
        .topics(&[ORDER])
        .records(3)
}

/// BinaryDataConverter for key and value, the key's string delegated to JsonConverter
/// (`delegate.converter.type`), under a chain: RegexRouter, InsertHeader and HoistField$Key.
pub fn chain_binary_data_converter_with_delegate() -> Case {
    let mut c = bytea_payload_json_converter();
    c.name = "chain_binary_data_converter_with_delegate";
    c.topics.clear();
    c.props(&props(&[
        "value.converter=io.debezium.converters.BinaryDataConverter",
        "key.converter=io.debezium.converters.BinaryDataConverter",
        "key.converter.delegate.converter.type=org.apache.kafka.connect.json.JsonConverter",
        "key.converter.delegate.converter.type.schemas.enable=false",
        "transforms=outbox,route,tag,wrap",
        "transforms.route.type=org.apache.kafka.connect.transforms.RegexRouter",
        "transforms.route.regex=outbox\\.event\\.(.*)",
        "transforms.route.replacement=orders.$1",
        "transforms.tag.type=org.apache.kafka.connect.transforms.InsertHeader",
        "transforms.tag.header=content-type",
        "transforms.tag.value.literal=application/octet-stream",
        "transforms.wrap.type=org.apache.kafka.connect.transforms.HoistField$Key",
        "transforms.wrap.field=aggregate",
    ]))
    .topics(&[ROUTED_ORDER])
}

/// A logical decoding message of an outbox event under the case's own prefix (`{t}`).
fn message(transactional: bool, content: &str) -> String {
    format!("SELECT pg_logical_emit_message({transactional}, '{{t}}', {})", lit(content))
}

const DECODE: [&str; 3] = [
    "transforms=decode,outbox",
    "transforms.decode.type=io.debezium.connector.postgresql.transforms.DecodeLogicalDecodingMessageContent",
    "message.prefix.include.list={t}",
];

/// The message outbox beside the table in one connector, default converters (JsonConverter with
/// schemas): the decoded struct's inferred schemas in key, value and header; a payload object,
/// string, number and nested arrays; JSON nulls dropped; rows and messages interleaved in one
/// transaction; a rolled-back message never published.
pub fn message_outbox_with_the_table() -> Case {
    messages_with_the_table("message_outbox_with_the_table", Vec::new())
}

/// The same under StringConverter (Java's `Struct.toString` of the decoded payload).
pub fn message_outbox_string_converters() -> Case {
    messages_with_the_table("message_outbox_string_converters", converters(STRING, false, STRING, false))
}

/// The same under JsonConverter without schemas, headers through JsonConverter with schemas.
pub fn message_outbox_json_schemas_off_json_headers() -> Case {
    let mut props = converters(JSON, false, JSON, false);
    props.push("header.converter=org.apache.kafka.connect.json.JsonConverter".into());
    props.push("header.converter.schemas.enable=true".into());
    messages_with_the_table("message_outbox_json_schemas_off_json_headers", props)
}

/// The same: JsonConverter without schemas for keys, StringConverter for values and headers.
pub fn message_outbox_json_key_string_value_and_headers() -> Case {
    let mut props = converters(JSON, false, STRING, false);
    props.push(format!("header.converter={STRING}"));
    messages_with_the_table("message_outbox_json_key_string_value_and_headers", props)
}

/// The same with the predicates Debezium's documentation puts on the Event Router (and one on the
/// message transform) to keep them to the outbox's records: both relays route the same events.
pub fn message_outbox_with_router_predicates() -> Case {
    let props = [
        "transforms.outbox.predicate=isOutbox",
        "transforms.decode.predicate=isMessage",
        "predicates=isOutbox,isMessage",
        "predicates.isOutbox.type=org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
        r"predicates.isOutbox.pattern=dbserver1\\.({t}|message)",
        "predicates.isMessage.type=org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
        r"predicates.isMessage.pattern=.*\\.message",
    ];
    messages_with_the_table("message_outbox_with_router_predicates", props.map(String::from).to_vec())
}

fn messages_with_the_table(name: &'static str, converters: Vec<String>) -> Case {
    let m = |id: &str, key: &str, payload: &str| {
        message(
            true,
            &format!(r#"{{"id": "{id}", "aggregatetype": "Order", "aggregateid": "{key}", "payload": {payload}}}"#),
        )
    };
    with_props(Case::new(name).props(&DECODE), converters)
        .sql([
            m("m-1", "k-1", r#"{"sku": "A-1", "qty": 2, "price": 9.5, "tags": ["x", "y"], "gone": null, "none": []}"#),
            m("m-2", "k-2", r#""a JSON string payload""#),
            tx(&[
                insert("Order", Some("k-3"), Some(r#"{"row": 1}"#)),
                m("m-3", "k-3", r#"{"nested": {"deep": {"n": 2147483648}}, "grid": [[1, 2], [3]]}"#),
                insert("Customer", Some("k-3"), Some(r#"{"row": 2}"#)),
            ]),
            format!("BEGIN; {}; ROLLBACK", m("m-rolled-back", "k-4", "{}")),
            m("m-5", "k-5", "42"),
            message(true, r#"{"id": "m-6", "aggregatetype": "Customer", "aggregateid": "k-6", "payload": {"b": true}, "extra": "ignored"}"#),
        ])
        .topics(&[ORDER, CUSTOMER])
        .records(7)
}

/// The message outbox alone, with the router's options on the decoded struct: an expanded string
/// payload, `fields.null.include`, envelope and header placements, the string key converter; and a
/// non-transactional message published as Debezium publishes it (`pgoutbox.messages.non.transactional`).
pub fn message_outbox_placements_and_expansion() -> Case {
    let m = |id: &str, kind: &str, payload: &str| {
        message(
            true,
            &format!(
                r#"{{"id": "{id}", "aggregatetype": "Order", "aggregateid": "k-{id}", "type": "{kind}", "payload": {payload}, "note": null}}"#
            ),
        )
    };
    Case::new("message_outbox_placements_and_expansion")
        .props(&DECODE)
        .props(&[
            "transforms.decode.fields.null.include=true",
            "pgoutbox.messages.non.transactional=publish",
            "transforms.outbox.table.expand.json.payload=true",
            "transforms.outbox.table.fields.additional.placement=type:envelope:eventType,type:header,note:envelope",
            "key.converter=org.apache.kafka.connect.storage.StringConverter",
        ])
        .sql([
            m("1", "Created", r#""{\"a\": {\"b\": 2}, \"n\": null}""#),
            m("2", "Updated", r#"{"already": "an object"}"#),
            m("3", "Deleted", r#""not json at all""#),
            // Non-transactional, in a transaction that rolls back: Debezium publishes it, and so does
            // pgoutbox when asked to.
            format!(
                "BEGIN; {}; ROLLBACK",
                message(false, r#"{"id": "4", "aggregatetype": "Order", "aggregateid": "k-4", "type": "Created", "payload": {}, "note": null}"#)
            ),
        ])
        .topics(&[ORDER])
        .records(4)
}

// The schema-registry converters (through Kafka Connect only: the Debezium 3.6.3 runner has no
// converter plugins). Both sides register in the suite's Apicurio Registry.

const APICURIO: &str = "io.apicurio.registry.utils.converter.AvroConverter";
const CONFLUENT: &str = "io.confluent.connect.avro.AvroConverter";

/// Apicurio's AvroConverter as key and value converter, registering its schemas, with `options`
/// (without the converter prefix) on both.
fn apicurio(options: &[&str]) -> Vec<String> {
    let mut props = Vec::new();
    for part in ["key", "value"] {
        props.push(format!("{part}.converter={APICURIO}"));
        props.push(format!("{part}.converter.apicurio.registry.url={{registry}}/apis/registry/v2"));
        props.push(format!("{part}.converter.apicurio.registry.auto-register=true"));
        props.extend(options.iter().map(|o| format!("{part}.converter.{o}")));
    }
    props
}

/// The standard rows (every jsonb form, a NULL payload among them) with the ids in headers, as
/// Apicurio's converter writes them by default.
pub fn avro_apicurio_ids_in_headers() -> Case {
    standard("avro_apicurio_ids_in_headers", apicurio(&[]))
        .sql([insert("Order", Some("agg-null"), None)])
        .records(STANDARD_RECORDS + 1)
        .registry(super::registry::Ids::Headers)
}

/// Apicurio's artifacts in a group of their own (`apicurio.registry.artifact.group-id`): the
/// subjects are compared in that group, and must be there.
pub fn avro_apicurio_explicit_group() -> Case {
    standard("avro_apicurio_explicit_group", apicurio(&["apicurio.registry.artifact.group-id=outbox-events"]))
        .registry(super::registry::Ids::Headers)
}

/// Apicurio's ExtJsonConverter as key and value converter, registering its schemas, with the
/// options `apicurio` gives its AvroConverter.
fn apicurio_ext_json() -> Vec<String> {
    apicurio(&[])
        .into_iter()
        .map(|p| p.replace(APICURIO, "io.apicurio.registry.utils.converter.ExtJsonConverter"))
        .collect()
}

/// Apicurio's ExtJsonConverter as key and value converter, registering JsonConverter's schemas
/// (artifact type KCONNECT): the standard rows (string keys, every jsonb form).
pub fn ext_json_apicurio_converter() -> Case {
    // No NULL payload: Apicurio's converter fails the task on a null value with a schema (pgoutbox
    // stops, naming it: a unit test).
    let mut case = standard("ext_json_apicurio_converter", apicurio_ext_json()).registry(super::registry::Ids::ExtJson);
    // The id is in the key's bytes: the sides' keys differ, and so would their partitions.
    case.partitions = 1;
    case
}

/// Expanded payloads through ExtJsonConverter: a schema per payload shape, a version each.
pub fn ext_json_apicurio_expanded_payload() -> Case {
    let payloads: Vec<&str> = EXPANDED.iter().copied().chain([r#"{"id": 2}"#]).collect();
    expanded_avro("ext_json_apicurio_expanded_payload", apicurio_ext_json(), super::registry::Ids::ExtJson, &payloads)
}

/// Payload shapes for the registry's expansion cases: flat, nested, arrays of records, numbers.
const EXPANDED: [&str; 4] = [
    r#"{"id": 1}"#,
    r#"{"a": {"b": 2, "c": "x"}, "n": null, "e": []}"#,
    r#"{"arr": [{"x": 1}, {"x": 2, "y": "z"}]}"#,
    r#"{"big": 12345678901, "f": 1.5, "t": true}"#,
];

/// `payloads` expanded (`table.expand.json.payload`) under `converters`: a record schema per payload
/// shape, each a new version of the value subject. One partition: with the id in the key's bytes
/// the sides' keys differ, and so would the partitions they hash to.
fn expanded_avro(name: &'static str, converters: Vec<String>, ids: super::registry::Ids, payloads: &[&str]) -> Case {
    let mut case = Case::new(name);
    case.partitions = 1;
    case.router(&["table.expand.json.payload=true"])
        .props(&converters)
        .sql(payloads.iter().enumerate().map(|(i, p)| insert("Order", Some(&format!("k-{i}")), Some(p))))
        .topics(&[ORDER])
        .records(payloads.len())
        .registry(ids)
}

/// Expanded payloads through Apicurio's converter, the 8-byte globalId before the body.
pub fn avro_apicurio_expanded_payload() -> Case {
    // A shape seen before (the first) comes back last: no new version for it.
    let payloads: Vec<&str> = EXPANDED.iter().copied().chain([r#"{"id": 2}"#]).collect();
    let converters = apicurio(&["apicurio.registry.headers.enabled=false"]);
    expanded_avro("avro_apicurio_expanded_payload", converters, super::registry::Ids::Prefix8Global, &payloads)
}

/// Confluent's wire format: Connect runs Apicurio's converter in its Confluent mode (4-byte
/// contentId, no headers; Confluent's own jars are not served here), pgoutbox runs the config of
/// Confluent's AvroConverter against Apicurio's Confluent-compatible API. Decimals in the envelope.
pub fn avro_confluent_wire_format_numerics() -> Case {
    let mut props = apicurio(&[
        "apicurio.registry.headers.enabled=false",
        "apicurio.registry.as-confluent=true",
        "apicurio.registry.use-id=contentId",
    ]);
    props.push("decimal.handling.mode=precise".into());
    let mut pgoutbox = Vec::new();
    for part in ["key", "value"] {
        pgoutbox.push(format!("{part}.converter={CONFLUENT}"));
        pgoutbox.push(format!("{part}.converter.schema.registry.url={{registry}}/apis/ccompat/v7"));
    }
    numerics("avro_confluent_wire_format_numerics", props)
        .pgoutbox_props(&pgoutbox)
        .registry(super::registry::Ids::Prefix4Content)
}

/// Confluent's AvroConverter (7.0.16, from the Debezium 3.6.3 runner's jars) as key and value
/// converter, against Apicurio's Confluent-compatible API.
fn confluent() -> Vec<String> {
    confluent_converter(CONFLUENT)
}

/// Confluent's `class` (a converter of the Debezium 3.6.3 runner's jars) as key and value converter,
/// against Apicurio's Confluent-compatible API.
fn confluent_converter(class: &str) -> Vec<String> {
    let mut props = Vec::new();
    for part in ["key", "value"] {
        props.push(format!("{part}.converter={class}"));
        props.push(format!("{part}.converter.schema.registry.url={{registry}}/apis/ccompat/v7"));
    }
    props
}

/// `case` with Confluent's AvroConverter for keys and values on both sides (later keys win), on one
/// partition per topic (the ids are in the key's bytes).
pub fn with_confluent_avro(case: Case) -> Case {
    let mut case = case.props(&confluent()).registry(super::registry::Ids::Prefix4Content);
    case.partitions = 1;
    case
}

/// The standard rows through Confluent's AvroConverter on both sides.
pub fn avro_confluent_converter() -> Case {
    standard("avro_confluent_converter", confluent())
        .sql([insert("Order", Some("agg-null"), None)])
        .records(STANDARD_RECORDS + 1)
        .registry(super::registry::Ids::Prefix4Content)
}

/// Expanded payloads through Confluent's AvroConverter: the record schemas and their versions.
pub fn avro_confluent_expanded_payload() -> Case {
    expanded_avro("avro_confluent_expanded_payload", confluent(), super::registry::Ids::Prefix4Content, &EXPANDED)
}

/// Connect's Date, Time and Timestamp as Avro logical types, the ids in headers.
pub fn avro_apicurio_temporal_connect() -> Case {
    temporal("avro_apicurio_temporal_connect", "connect", apicurio(&[])).registry(super::registry::Ids::Headers)
}

/// Debezium's own temporal types (named int64/int32/string schemas), the ids in headers.
pub fn avro_apicurio_temporal_adaptive() -> Case {
    temporal("avro_apicurio_temporal_adaptive", "adaptive", apicurio(&[])).registry(super::registry::Ids::Headers)
}

const CONFLUENT_PROTOBUF: &str = "io.confluent.connect.protobuf.ProtobufConverter";

/// Confluent's ProtobufConverter (7.0.16, from the Debezium 3.6.3 runner's jars) as key and value
/// converter, against Apicurio's Confluent-compatible API.
fn confluent_protobuf() -> Vec<String> {
    confluent_converter(CONFLUENT_PROTOBUF)
}

/// The standard rows through ProtobufConverter: string keys and JSON payloads as
/// google.protobuf.StringValue of wrappers.proto, a null payload as Kafka's null.
pub fn protobuf_confluent_converter() -> Case {
    standard("protobuf_confluent_converter", confluent_protobuf())
        .sql([insert("Order", Some("agg-null"), None)])
        .records(STANDARD_RECORDS + 1)
        .registry(super::registry::Ids::Prefix4Content)
}

/// Expanded payloads through ProtobufConverter: messages with nested messages, repeated fields
/// (packed numbers, messages), proto3 defaults left out, and a version per shape.
pub fn protobuf_confluent_expanded_payload() -> Case {
    let payloads: Vec<&str> = EXPANDED
        .iter()
        .copied()
        .chain([
            r#"{"id": 0, "s": "", "t": false, "nums": [1, -2, 300], "o": {"p": {"q": -1}}}"#,
            // A struct named as the message it is in: taken for that message.
            r#"{"data": {"data": {}}}"#,
            r#"{"id": 2}"#,
        ])
        .collect();
    expanded_avro(
        "protobuf_confluent_expanded_payload",
        confluent_protobuf(),
        super::registry::Ids::Prefix4Content,
        &payloads,
    )
}

/// Additional fields in the envelope: the value a named struct (`<topic>.Value`'s namespace as
/// the package) with an int32 and strings beside the payload.
pub fn protobuf_confluent_envelope() -> Case {
    let mut case =
        placement("protobuf_confluent_envelope", "type:envelope:eventType,aggregateid:envelope,part:envelope:p")
            .props(&confluent_protobuf())
            .registry(super::registry::Ids::Prefix4Content);
    case.partitions = 1;
    case
}

/// Confluent's JsonSchemaConverter has no jar here: its value bodies are compared with what Connect's
/// JsonConverter without schemas writes for the same rows (the converter's body is Jackson's JSON of
/// the same value; `registry::Ids::JsonSchemaBody` takes pgoutbox's magic byte and id off, and the
/// run checks that every value had them). pgoutbox registers its schemas in the suite's registry on
/// the way, so the values must be objects (an envelope): Apicurio 2.4's Confluent-compatible API
/// refuses JSON Schemas without top-level `properties`. Keys are strings on both sides.
fn json_schema_body(name: &'static str, case: Case) -> Case {
    let mut case = case
        .props(&[
            "key.converter=org.apache.kafka.connect.storage.StringConverter",
            "value.converter=org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable=false",
        ])
        .pgoutbox_props(&[
            "value.converter=io.confluent.connect.json.JsonSchemaConverter",
            "value.converter.schema.registry.url={registry}/apis/ccompat/v7",
        ])
        .registry(super::registry::Ids::JsonSchemaBody);
    case.name = name;
    case
}

/// Float8, real and int2 columns in the envelope (NaN, infinities, -0, subnormals).
pub fn json_schema_body_floats() -> Case {
    json_schema_body("json_schema_body_floats", placement_floats())
}

/// Decimals in the envelope, as base64 (the converter's `decimal.format` default).
pub fn json_schema_body_numerics() -> Case {
    json_schema_body("json_schema_body_numerics", numerics("numerics", vec![]))
}

/// Date, timestamps, boolean, uuid, int4, varchar, bpchar and xml columns in the envelope.
pub fn json_schema_body_column_types() -> Case {
    json_schema_body("json_schema_body_column_types", placement_column_types())
}

/// A timestamptz(3) in the envelope (ZonedTimestamp strings), another in a header.
pub fn json_schema_body_timestamptz() -> Case {
    json_schema_body("json_schema_body_timestamptz", placement_timestamptz())
}

/// `case` with Confluent's ProtobufConverter for keys and values on both sides (later keys win), on
/// one partition per topic (the ids are in the key's bytes).
pub fn with_confluent_protobuf(case: Case) -> Case {
    let mut case = case.props(&confluent_protobuf()).registry(super::registry::Ids::Prefix4Content);
    case.partitions = 1;
    case
}
