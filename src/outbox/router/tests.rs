use bytes::Bytes;
use regex::Regex;

use super::*;

/// `route` for a record no transform drops.
trait RouteOne {
    fn route1(&mut self, plan: &RoutePlan, row: &TupleData, ts: i64) -> Result<OutboxRecord, RouteError>;
}

impl RouteOne for Router {
    fn route1(&mut self, plan: &RoutePlan, row: &TupleData, ts: i64) -> Result<OutboxRecord, RouteError> {
        self.route(plan, row, ts).map(|r| r.expect("no transform drops it"))
    }
}
use crate::debezium::oid;

fn cfg() -> RouterConfig {
    RouterConfig {
        route_by_field: "aggregatetype".into(),
        route_topic_regex: Regex::new("^(?:(?<routedByValue>.*))$").unwrap(),
        route_topic_replacement: "outbox.event.${routedByValue}".into(),
        field_event_id: "id".into(),
        field_event_key: "aggregateid".into(),
        field_event_payload: "payload".into(),
        tombstone_on_empty_payload: false,
        op_invalid_behavior: crate::outbox::InvalidOpBehavior::Warn,
        additional: vec![],
        additional_missing_ignore: false,
        field_event_timestamp: None,
        field_event_schema_version: None,
        expand_json_payload: false,
        json_null_behavior: crate::debezium::JsonNullBehavior::Ignore,
        json_empty_array_behavior: crate::debezium::JsonEmptyArrayBehavior::Ignore,
        topic_prefix: "dbserver1".into(),
        schema_name_adjustment: Default::default(),
        topic_delimiter: ".".into(),
        topic_naming: Default::default(),
        type_modes: Default::default(),
        column_mappers: Default::default(),
        header_converter: None,
        chain: Default::default(),
    }
}

fn outbox() -> RelationInfo {
    let c = |name: &str, type_oid, not_null| ColumnInfo {
        name: name.into(),
        type_oid,
        type_modifier: -1,
        not_null,
        default: None,
    };
    RelationInfo {
        oid: 1,
        schema: "public".into(),
        table: "outbox".into(),
        columns: vec![
            c("id", oid::UUID, true),
            c("aggregatetype", oid::VARCHAR, true),
            c("aggregateid", oid::VARCHAR, true),
            c("type", oid::VARCHAR, true),
            c("payload", oid::JSONB, false),
        ],
    }
}

fn row(vals: &[Option<&str>]) -> TupleData {
    TupleData {
        values: vals
            .iter()
            .map(|v| {
                v.map_or(crate::pgoutput::Value::Null, |s| {
                    crate::pgoutput::Value::Text(Bytes::copy_from_slice(s.as_bytes()))
                })
            })
            .collect(),
    }
}

const ID: &str = "4d47e190-0402-4048-bc2c-89dd54343cdc";
const PAYLOAD: &str = r#"{"n": 4, "note": "héllo \"q\""}"#;

fn one(router: &mut Router, payload: Option<&str>) -> Result<OutboxRecord, RouteError> {
    let plan = router.plan(&outbox());
    router.route1(&plan, &row(&[Some(ID), Some("Order"), Some("order-4"), Some("OrderCreated"), payload]), 1)
}

fn s(b: &Option<Bytes>) -> Option<&str> {
    b.as_ref().map(|b| std::str::from_utf8(b).unwrap())
}

#[test]
fn router_string_converters_give_raw_text() {
    let ctx = ContextHeaders {
        connector_logical_name: "dbserver1".into(),
        task_id: "0".into(),
        connector_name: "postgresql".into(),
        run_id: "r".into(),
    };
    let mut r = Router::new(cfg(), Converters { key: Converter::String, value: Converter::String }, Some(ctx));
    let rec = one(&mut r, Some(PAYLOAD)).unwrap();
    assert_eq!(&*rec.topic, "outbox.event.Order");
    assert_eq!(s(&rec.key), Some("order-4"));
    assert_eq!(s(&rec.value), Some(PAYLOAD));
    let names: Vec<_> = rec.headers.iter().map(|h| &*h.name).collect();
    assert_eq!(
        names,
        [
            "__debezium.context.connectorLogicalName",
            "__debezium.context.taskId",
            "__debezium.context.connectorName",
            "__debezium.context.runId",
            "id"
        ]
    );
    assert_eq!(s(&rec.headers[0].value), Some("dbserver1"));
    assert_eq!(s(&rec.headers[4].value), Some(ID));
    assert_eq!(rec.event_id(), ID);
}

#[test]
fn router_json_converters_follow_connect() {
    let mut r = Router::new(cfg(), Converters { key: Converter::json(true), value: Converter::json(false) }, None);
    let rec = one(&mut r, Some(PAYLOAD)).unwrap();
    assert_eq!(s(&rec.key), Some(r#"{"schema":{"type":"string","optional":false},"payload":"order-4"}"#));
    assert_eq!(s(&rec.value), Some(r#""{\"n\": 4, \"note\": \"héllo \\\"q\\\"\"}""#));
    assert_eq!(rec.headers.len(), 1, "no context headers when extended headers are off");
}

#[test]
fn router_null_payload_and_tombstones() {
    let mut r = Router::new(cfg(), Converters { key: Converter::String, value: Converter::json(false) }, None);
    assert_eq!(s(&one(&mut r, None).unwrap().value), Some("null"));
    assert_eq!(s(&one(&mut r, Some("  ")).unwrap().value), Some("\"  \""));
    let mut c = cfg();
    c.tombstone_on_empty_payload = true;
    let mut r = Router::new(c, Converters { key: Converter::String, value: Converter::json(false) }, None);
    let rec = one(&mut r, None).unwrap();
    assert_eq!((rec.value, s(&rec.key)), (None, Some("order-4")), "tombstone keeps the key");
    assert_eq!(one(&mut r, Some(" \t")).unwrap().value, None);
    assert!(one(&mut r, Some("{}")).unwrap().value.is_some());
}

#[test]
fn router_regex_and_replacement_route_topics() {
    let mut c = cfg();
    c.route_topic_regex = Regex::new("^(?:(?<routedByValue>Ord.*))$").unwrap();
    c.route_topic_replacement = "${routedByValue}.events".into();
    let mut r = Router::new(c, Converters { key: Converter::String, value: Converter::String }, None);
    let plan = r.plan(&outbox());
    let route = |r: &mut Router, t: &str| {
        r.route1(&plan, &row(&[Some(ID), Some(t), Some("k"), Some("x"), None]), 0).unwrap().topic
    };
    assert_eq!(&*route(&mut r, "Order"), "Order.events");
    assert_eq!(&*route(&mut r, "Customer"), "Customer", "no match keeps the raw value");
}

#[test]
fn router_rejects_rows_it_cannot_publish() {
    let mut r = Router::new(cfg(), Converters { key: Converter::String, value: Converter::String }, None);
    let plan = r.plan(&outbox());
    let err = r.route1(&plan, &row(&[None, Some("Order"), Some("k"), Some("t"), None]), 0).unwrap_err();
    assert!(err.to_string().contains("`id` is NULL"), "{err}");
    let err = r.route1(&plan, &row(&[Some(ID), None, Some("k"), Some("t"), None]), 0).unwrap_err();
    assert!(err.to_string().contains(ID) && err.to_string().contains("aggregatetype"), "{err}");
    let mut rel = outbox();
    rel.columns.retain(|c| c.name != "payload");
    let plan = r.plan(&rel);
    let err = r.route1(&plan, &row(&[Some(ID), Some("Order"), Some("k"), Some("t")]), 0).unwrap_err();
    assert!(
        err.to_string().contains("no column `payload`") && err.to_string().contains("table.field.event.payload"),
        "{err}"
    );
}

#[test]
fn router_null_key_follows_converter() {
    let mut rel = outbox();
    rel.columns[2].not_null = false;
    let mut r = Router::new(cfg(), Converters { key: Converter::String, value: Converter::String }, None);
    let plan = r.plan(&rel);
    let rec = r.route1(&plan, &row(&[Some(ID), Some("Order"), None, Some("t"), Some("{}")]), 0).unwrap();
    assert_eq!(rec.key, None);
    let mut r = Router::new(cfg(), Converters { key: Converter::json(true), value: Converter::String }, None);
    let rec = r.route1(&plan, &row(&[Some(ID), Some("Order"), None, Some("t"), Some("{}")]), 0).unwrap();
    assert_eq!(s(&rec.key), Some(r#"{"schema":{"type":"string","optional":true},"payload":null}"#));
}

#[test]
fn router_additional_placements_in_config_order() {
    use crate::outbox::{AdditionalField, Placement};
    let mut rel = outbox();
    rel.columns.push(ColumnInfo {
        name: "part".into(),
        type_oid: oid::INT4,
        type_modifier: -1,
        not_null: false,
        default: None,
    });
    rel.columns.push(ColumnInfo {
        name: "ts".into(),
        type_oid: oid::TIMESTAMP,
        type_modifier: 6,
        not_null: false,
        default: None,
    });
    let mut c = cfg();
    c.additional = vec![
        AdditionalField { column: "type".into(), placement: Placement::Header, alias: "eventType".into() },
        AdditionalField { column: "part".into(), placement: Placement::Partition, alias: "part".into() },
        AdditionalField { column: "aggregateid".into(), placement: Placement::Header, alias: "aggregateid".into() },
    ];
    c.field_event_timestamp = Some("ts".into());
    let mut r = Router::new(c, Converters { key: Converter::String, value: Converter::String }, None);
    let plan = r.plan(&rel);
    let rec = r
        .route1(
            &plan,
            &row(&[
                Some(ID),
                Some("Order"),
                Some("o-1"),
                Some("OrderCreated"),
                Some("{}"),
                Some("2"),
                Some("1970-01-01 00:00:01.5"),
            ]),
            99,
        )
        .unwrap();
    let names: Vec<_> = rec.headers.iter().map(|h| &*h.name).collect();
    assert_eq!(names, ["id", "eventType", "aggregateid"]);
    assert_eq!(s(&rec.headers[1].value), Some("OrderCreated"));
    assert_eq!(rec.partition, Some(2));
    assert_eq!(rec.timestamp_ms, 1500, "micro timestamp / 1000");
    // A NULL timestamp falls back to the processing time.
    let rec =
        r.route1(&plan, &row(&[Some(ID), Some("Order"), Some("o-1"), Some("t"), Some("{}"), None, None]), 99).unwrap();
    assert_eq!((rec.timestamp_ms, rec.partition), (99, None));
}

#[test]
fn router_additional_missing_column_error_or_ignore() {
    use crate::outbox::{AdditionalField, Placement};
    let mut c = cfg();
    c.additional = vec![AdditionalField { column: "nope".into(), placement: Placement::Header, alias: "nope".into() }];
    let mut r = Router::new(c.clone(), Converters { key: Converter::String, value: Converter::String }, None);
    let plan = r.plan(&outbox());
    assert!(r.route1(&plan, &row(&[Some(ID), Some("Order"), Some("k"), Some("t"), None]), 0).is_err());
    c.additional_missing_ignore = true;
    let mut r = Router::new(c, Converters { key: Converter::String, value: Converter::String }, None);
    let plan = r.plan(&outbox());
    assert_eq!(
        r.route1(&plan, &row(&[Some(ID), Some("Order"), Some("k"), Some("t"), None]), 0).unwrap().headers.len(),
        1
    );
}

#[test]
fn router_rejects_timestamptz_event_timestamp() {
    let mut rel = outbox();
    rel.columns.push(ColumnInfo {
        name: "ts".into(),
        type_oid: oid::TIMESTAMPTZ,
        type_modifier: -1,
        not_null: false,
        default: None,
    });
    let mut c = cfg();
    c.field_event_timestamp = Some("ts".into());
    let mut r = Router::new(c, Converters { key: Converter::String, value: Converter::String }, None);
    let plan = r.plan(&rel);
    let err = r
        .route1(&plan, &row(&[Some(ID), Some("Order"), Some("k"), Some("t"), None, Some("2026-01-01 00:00:00+00")]), 0)
        .unwrap_err();
    assert!(err.to_string().contains("timestamptz"), "{err}");
}

#[test]
fn router_envelope_placement_matches_debezium() {
    use crate::outbox::{AdditionalField, Placement};
    let mut c = cfg();
    c.additional =
        vec![AdditionalField { column: "type".into(), placement: Placement::Envelope, alias: "eventType".into() }];
    let mut r = Router::new(c.clone(), Converters { key: Converter::String, value: Converter::json(false) }, None);
    let plan = r.plan(&outbox());
    let rec = r
        .route1(&plan, &row(&[Some(ID), Some("Order"), Some("o-1"), Some("OrderCreated"), Some(r#"{"id": 1}"#)]), 0)
        .unwrap();
    // debezium.md 1.3: envelope placement with JsonConverter, schemas disabled.
    assert_eq!(s(&rec.value), Some(r#"{"payload":"{\"id\": 1}","eventType":"OrderCreated"}"#));
    let mut r = Router::new(c.clone(), Converters { key: Converter::String, value: Converter::json(true) }, None);
    let rec =
        r.route1(&plan, &row(&[Some(ID), Some("Order"), Some("o-1"), Some("OrderCreated"), Some("{}")]), 0).unwrap();
    assert_eq!(
        s(&rec.value),
        Some(
            r#"{"schema":{"type":"struct","fields":[{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1,"field":"payload"},{"type":"string","optional":false,"field":"eventType"}],"optional":false,"name":"dbserver1.public.outbox.Order.Value"},"payload":{"payload":"{}","eventType":"OrderCreated"}}"#
        )
    );
    let mut r = Router::new(c, Converters { key: Converter::String, value: Converter::String }, None);
    let rec =
        r.route1(&plan, &row(&[Some(ID), Some("Order"), Some("o-1"), Some("OrderCreated"), Some("{}")]), 0).unwrap();
    assert_eq!(s(&rec.value), Some("Struct{payload={},eventType=OrderCreated}"));
}

/// `schema.name.adjustment.mode` adjusts the table's part of the envelope's schema name (Debezium
/// adjusts the table's value schema name, which its router then extends with the routed value).
#[test]
fn envelope_schema_name_follows_schema_name_adjustment_mode() {
    use crate::debezium::schema_name::SchemaNameAdjustment;
    use crate::outbox::{AdditionalField, Placement};
    let name = |adjustment| {
        let mut c = cfg();
        c.topic_prefix = "my-server".into();
        c.schema_name_adjustment = adjustment;
        c.additional =
            vec![AdditionalField { column: "type".into(), placement: Placement::Envelope, alias: "eventType".into() }];
        let mut r = Router::new(c, Converters { key: Converter::String, value: Converter::json(true) }, None);
        let plan = r.plan(&outbox());
        let rec = r
            .route1(&plan, &row(&[Some(ID), Some("Order-1"), Some("o-1"), Some("OrderCreated"), Some("{}")]), 0)
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(rec.value.as_deref().unwrap()).unwrap();
        v["schema"]["name"].as_str().unwrap().to_string()
    };
    assert_eq!(name(SchemaNameAdjustment::None), "my-server.public.outbox.Order-1.Value");
    assert_eq!(name(SchemaNameAdjustment::Avro), "my_server.public.outbox.Order-1.Value");
    assert_eq!(name(SchemaNameAdjustment::AvroUnicode), "my_u002dserver.public.outbox.Order-1.Value");
}

#[test]
fn router_expands_json_payloads() {
    let mut c = cfg();
    c.expand_json_payload = true;
    let mut r = Router::new(c, Converters { key: Converter::String, value: Converter::json(false) }, None);
    let plan = r.plan(&outbox());
    let rec = r
        .route1(
            &plan,
            &row(&[Some(ID), Some("Order"), Some("o-1"), Some("t"), Some(r#"{"id": 1, "gone": null, "tags": []}"#)]),
            0,
        )
        .unwrap();
    assert_eq!(s(&rec.value), Some(r#"{"id":1}"#), "nulls and empty arrays dropped, compact, as Debezium");
    let rec = r.route1(&plan, &row(&[Some(ID), Some("Order"), Some("o-1"), Some("t"), Some("[1, 2]")]), 0).unwrap();
    assert_eq!(s(&rec.value), Some(r#""[1, 2]""#), "where Debezium 3.6 stops, the string is kept");
}

/// The chain of `props` (`transforms=…` and the rest), as the config parses it.
fn chain(props: &[&str]) -> crate::outbox::chain::Chain {
    let entries = props.iter().map(|p| p.split_once('=').unwrap()).map(|(k, v)| (k.into(), v.into())).collect();
    crate::outbox::chain::Chain::parse(&mut crate::connect::Reader::new(&entries)).unwrap()
}

/// A predicate on the router decides per event where the start cannot (a header, a table
/// pattern): an event it would leave unrouted in Debezium is an error naming the predicate.
#[test]
fn router_predicate_is_checked_on_each_event() {
    let router = [
        "transforms=tag,outbox",
        "transforms.tag.type=org.apache.kafka.connect.transforms.InsertHeader",
        "transforms.tag.header=routed",
        "transforms.tag.value.literal=yes",
        "transforms.outbox.type=io.debezium.transforms.outbox.EventRouter",
        "transforms.outbox.predicate=p",
        "predicates=p",
    ];
    let has = "predicates.p.type=org.apache.kafka.connect.transforms.predicates.HasHeaderKey";
    let mut c = cfg();
    c.chain = chain(&[&router[..], &[has, "predicates.p.name=routed"]].concat());
    let mut r = Router::new(c.clone(), Converters { key: Converter::String, value: Converter::String }, None);
    assert_eq!(one(&mut r, Some("{}")).unwrap().topic.as_ref(), "outbox.event.Order");
    c.chain = chain(&[&router[..], &[has, "predicates.p.name=other"]].concat());
    let mut r = Router::new(c.clone(), Converters { key: Converter::String, value: Converter::String }, None);
    let e = one(&mut r, Some("{}")).unwrap_err().to_string();
    assert!(e.contains("the predicate `p` of transform `outbox`") && e.contains("`dbserver1.public.outbox`"), "{e}");
    assert!(e.contains("make the transforms before `outbox` add the header `other`"), "{e}");
    let topic = "predicates.p.type=org.apache.kafka.connect.transforms.predicates.TopicNameMatches";
    c.chain = chain(&[&router[..], &[topic, "predicates.p.pattern=dbserver1\\.public\\.out.*"]].concat());
    let mut r = Router::new(c.clone(), Converters { key: Converter::String, value: Converter::String }, None);
    assert!(one(&mut r, Some("{}")).is_ok());
    c.chain = chain(&[&router[..], &[topic, "predicates.p.pattern=dbserver1\\.public\\.orders"]].concat());
    let mut r = Router::new(c, Converters { key: Converter::String, value: Converter::String }, None);
    assert!(one(&mut r, Some("{}")).unwrap_err().to_string().contains("make predicates.p.pattern match"));
}

/// A masking, hashing or truncating mapper that selects a routed column stops the relay naming
/// the key (pgoutbox does not apply them, and the value must not reach Kafka unmasked); one that
/// selects another table's columns changes nothing.
#[test]
fn router_refuses_a_routed_column_selected_by_a_value_mapper() {
    let entries: std::collections::BTreeMap<String, String> = [
        ("column.mask.with.8.chars".to_string(), r"public\.outbox\.payload".to_string()),
        ("column.truncate.to.4.chars".to_string(), r"public\.customers\.name".to_string()),
    ]
    .into_iter()
    .collect();
    let mut reader = crate::connect::Reader::new(&entries);
    let mut c = cfg();
    c.column_mappers = crate::debezium::mappers::ColumnMappers::parse(&mut reader).unwrap();
    let r = Router::new(c, Converters { key: Converter::String, value: Converter::String }, None);
    let e = r.plan(&outbox()).problem().expect("the masked payload is refused").to_string();
    assert!(e.contains("column.mask.with.8.chars") && e.contains("`payload`"), "{e}");
    let mut c = cfg();
    let entries: std::collections::BTreeMap<String, String> =
        [("column.truncate.to.4.chars".to_string(), r"public\.customers\.name".to_string())].into_iter().collect();
    c.column_mappers =
        crate::debezium::mappers::ColumnMappers::parse(&mut crate::connect::Reader::new(&entries)).unwrap();
    let r = Router::new(c, Converters { key: Converter::String, value: Converter::String }, None);
    assert!(r.plan(&outbox()).problem().is_none());
}
