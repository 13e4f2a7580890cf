//! The converters against a fake registry (a unit test's stand-in; tests/faults.rs runs one against
//! a real Apicurio Registry): what is asked, how often, and the bytes written.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use super::*;
use crate::connect::{Schema, Type, Value};

/// A registry answering every request with `status` and `body`, keeping the requests it saw.
struct Fake {
    url: String,
    seen: Arc<Mutex<Vec<String>>>,
}

fn fake(status: u16, body: &'static str) -> Fake {
    fake_routes(&[("", status, body)])
}

/// A fake registry answering each request with the first route whose path prefix the request's
/// path starts with.
fn fake_routes(routes: &[(&'static str, u16, &'static str)]) -> Fake {
    let routes = routes.to_vec();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut head = String::new();
            let mut length = 0;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap();
                }
                head.push_str(&line);
            }
            let mut body_in = vec![0; length];
            reader.read_exact(&mut body_in).unwrap();
            log.lock().unwrap().push(format!("{head}\n{}", String::from_utf8_lossy(&body_in)));
            let path = head.split_whitespace().nth(1).unwrap_or("").to_string();
            let (_, status, body) =
                routes.iter().find(|(p, _, _)| path.starts_with(p)).copied().unwrap_or(("", 404, "{}"));
            let answer = format!(
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(answer.as_bytes());
        }
    });
    Fake { url, seen }
}

/// `props` without the keys ending in `suffix`.
fn without<'a>(props: &[(&'a str, &'a str)], suffix: &str) -> Vec<(&'a str, &'a str)> {
    props.iter().copied().filter(|(key, _)| !key.ends_with(suffix)).collect()
}

fn converter(which: &str, props: &[(&str, &str)]) -> Result<RegistryConverter, ConfigError> {
    let entries: BTreeMap<String, String> = props.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let mut r = Reader::new(&entries);
    let class = entries[&format!("{which}.converter")].clone();
    RegistryConverter::parse(&mut r, which, &class)
}

/// As Connect's worker calls a converter: with the record's headers.
fn encode_h(
    c: &RegistryConverter,
    topic: &str,
    schema: Option<&Schema>,
    value: &Value,
    headers: &mut Vec<(Arc<str>, Option<Bytes>)>,
) -> Result<Option<Bytes>, ConvertError> {
    c.encode(topic, schema, value, Some(headers))
}

/// Confluent's AvroConverter as the value converter, against `url`.
fn confluent_at(url: &str) -> RegistryConverter {
    converter("value", &[("value.converter", CONFLUENT_AVRO), ("value.converter.schema.registry.url", url)]).unwrap()
}

fn json_payload() -> Schema {
    Schema::named(Type::String, true, "io.debezium.data.Json")
}

fn text(s: &str) -> Value {
    Value::String(Bytes::copy_from_slice(s.as_bytes()))
}

#[test]
fn confluent_registers_once_and_writes_magic_byte_and_id() {
    let f = fake(200, r#"{"id":7}"#);
    let c = converter(
        "value",
        &[
            ("value.converter", CONFLUENT_AVRO),
            ("value.converter.schema.registry.url", &format!("http://127.0.0.1:1,{}", f.url)),
            ("value.converter.basic.auth.credentials.source", "USER_INFO"),
            ("value.converter.basic.auth.user.info", "fred:letmein"),
        ],
    )
    .unwrap();
    let shown = format!("{c:?}");
    assert!(!shown.contains("letmein") && !shown.contains("ZnJlZD") && !shown.contains("Basic"), "{shown}");
    let mut headers = Vec::new();
    for _ in 0..3 {
        let bytes =
            encode_h(&c, "outbox.event.order", Some(&json_payload()), &text("{}"), &mut headers).unwrap().unwrap();
        assert_eq!(hex::encode(&bytes), "000000000702047b7d");
    }
    assert!(headers.is_empty());
    let seen = f.seen.lock().unwrap();
    assert_eq!(seen.len(), 1, "one registration for three records: {seen:?}");
    assert!(
        seen[0].starts_with("POST /subjects/outbox.event.order-value/versions?normalize=false HTTP/1.1"),
        "{}",
        seen[0]
    );
    assert!(seen[0].contains("authorization: Basic ZnJlZDpsZXRtZWlu"), "{}", seen[0]);
    assert!(seen[0].ends_with(
        r#"{"schema":"[\"null\",{\"type\":\"string\",\"connect.version\":1,\"connect.name\":\"io.debezium.data.Json\"}]"}"#
    ));
    // A null is Kafka's null, with nothing registered.
    drop(seen);
    assert_eq!(encode_h(&c, "outbox.event.order", Some(&json_payload()), &Value::Null, &mut headers).unwrap(), None);
    assert_eq!(f.seen.lock().unwrap().len(), 1);
}

#[test]
fn the_older_user_info_key_is_honoured_and_wins_as_in_confluents_client() {
    let f = fake(200, r#"{"id":7}"#);
    let base = [
        ("value.converter", CONFLUENT_AVRO),
        ("value.converter.schema.registry.url", f.url.as_str()),
        ("value.converter.basic.auth.credentials.source", "USER_INFO"),
    ];
    let sent = |extra: &[(&str, &str)]| {
        let props: Vec<_> = base.iter().chain(extra).copied().collect();
        let c = converter("value", &props).unwrap();
        encode_h(&c, "outbox.event.order", Some(&json_payload()), &text("{}"), &mut Vec::new()).unwrap();
        f.seen.lock().unwrap().pop().unwrap()
    };
    // Alone (Confluent Cloud's older examples), and beside the newer key, which it outranks.
    let alone = sent(&[("value.converter.schema.registry.basic.auth.user.info", "fred:letmein")]);
    assert!(alone.contains("authorization: Basic ZnJlZDpsZXRtZWlu"), "{alone}");
    let both = sent(&[
        ("value.converter.schema.registry.basic.auth.user.info", "fred:letmein"),
        ("value.converter.basic.auth.user.info", "other:secret"),
    ]);
    assert!(both.contains("authorization: Basic ZnJlZDpsZXRtZWlu"), "{both}");
    // Empty, it is as if unset.
    let empty = sent(&[
        ("value.converter.schema.registry.basic.auth.user.info", ""),
        ("value.converter.basic.auth.user.info", "other:secret"),
    ]);
    assert!(empty.contains("authorization: Basic b3RoZXI6c2VjcmV0"), "{empty}");
    // Neither: the error names both keys.
    let e = converter("value", &base).unwrap_err().to_string();
    assert!(
        e.contains("value.converter.basic.auth.user.info") && e.contains("schema.registry.basic.auth.user.info"),
        "{e}"
    );
}

/// `apicurio.registry.artifact.group-id` puts the artifacts in that group, for every lookup; the
/// other explicit coordinates (artifact id, version) stay refused.
#[test]
fn apicurio_artifacts_go_to_the_group_named() {
    let answer = r#"{"id":"t-value","version":"1","type":"AVRO","globalId":3,"contentId":1}"#;
    for (mode, path) in [
        (
            "auto-register",
            "POST /apis/registry/v2/groups/orders%20team/artifacts?ifExists=RETURN_OR_UPDATE&canonical=false ",
        ),
        ("find-latest", "GET /apis/registry/v2/groups/orders%20team/artifacts/t-value/meta "),
        ("", "POST /apis/registry/v2/groups/orders%20team/artifacts/t-value/meta?canonical=true "),
    ] {
        let f = fake(200, answer);
        let url = format!("{}/apis/registry/v2", f.url);
        let mode_key = format!("value.converter.apicurio.registry.{mode}");
        let mut props = vec![
            ("value.converter", APICURIO_AVRO),
            ("value.converter.apicurio.registry.url", url.as_str()),
            ("value.converter.apicurio.registry.artifact.group-id", "orders team"),
        ];
        if !mode.is_empty() {
            props.push((mode_key.as_str(), "true"));
        }
        let c = converter("value", &props).unwrap();
        // find-latest compares the latest schema with the record's: a string schema both.
        let _ = encode_h(&c, "t", Some(&Schema::primitive(Type::String, false)), &text("x"), &mut Vec::new());
        let seen = f.seen.lock().unwrap();
        assert!(seen[0].starts_with(path), "{mode}: {}", seen[0]);
    }
    for key in ["artifact.artifact-id", "artifact.version"] {
        let full = format!("value.converter.apicurio.registry.{key}");
        let e = converter(
            "value",
            &[
                ("value.converter", APICURIO_AVRO),
                ("value.converter.apicurio.registry.url", "http://r/apis/registry/v2"),
                (&full, "x"),
            ],
        )
        .unwrap_err();
        assert!(e.to_string().contains(&full), "{e}");
    }
}

#[test]
fn apicurio_writes_ids_to_headers_by_default_and_before_the_body_when_told() {
    let answer = r#"{"id":"t-key","version":"1","type":"AVRO","globalId":3,"contentId":1}"#;
    let f = fake(200, answer);
    let url = format!("{}/apis/registry/v2", f.url);
    let c = converter(
        "key",
        &[
            ("key.converter", APICURIO_AVRO),
            ("key.converter.apicurio.registry.url", &url),
            ("key.converter.apicurio.registry.auto-register", "true"),
        ],
    )
    .unwrap();
    let mut headers = Vec::new();
    let bytes = encode_h(&c, "t", Some(&Schema::primitive(Type::String, false)), &text("A-1"), &mut headers).unwrap();
    assert_eq!(hex::encode(bytes.unwrap()), "06412d31");
    let shown: Vec<(String, String)> =
        headers.iter().map(|(k, v)| (k.to_string(), hex::encode(v.as_deref().unwrap()))).collect();
    assert_eq!(
        shown,
        [
            ("apicurio.key.globalId".into(), "0000000000000003".into()),
            ("apicurio.key.encoding".into(), hex::encode("BINARY"))
        ]
    );
    let seen = f.seen.lock().unwrap();
    assert!(
        seen[0].starts_with(
            "POST /apis/registry/v2/groups/default/artifacts?ifExists=RETURN_OR_UPDATE&canonical=false HTTP/1.1"
        ),
        "{}",
        seen[0]
    );
    assert!(seen[0].contains("x-registry-artifactid: t-key"), "{}", seen[0]);
    assert!(seen[0].ends_with("\n\"string\""), "{}", seen[0]);
    drop(seen);

    for (extra, expected) in [
        (vec![], "00000000000000000306412d31"),
        (vec![("key.converter.apicurio.registry.as-confluent", "true")], "000000000306412d31"),
        (
            vec![
                ("key.converter.apicurio.registry.as-confluent", "true"),
                ("key.converter.apicurio.registry.use-id", "contentId"),
            ],
            "000000000106412d31",
        ),
    ] {
        let mut props = vec![
            ("key.converter", APICURIO_AVRO),
            ("key.converter.apicurio.registry.url", url.as_str()),
            ("key.converter.apicurio.registry.auto-register", "true"),
            ("key.converter.apicurio.registry.headers.enabled", "false"),
        ];
        props.extend(extra);
        let c = converter("key", &props).unwrap();
        let mut headers = Vec::new();
        let bytes =
            encode_h(&c, "t", Some(&Schema::primitive(Type::String, false)), &text("A-1"), &mut headers).unwrap();
        assert_eq!(hex::encode(bytes.unwrap()), expected, "{props:?}");
        assert!(headers.is_empty());
    }
}

#[test]
fn a_registry_that_does_not_answer_is_retried_and_one_that_refuses_stops() {
    let c = confluent_at("http://127.0.0.1:1");
    let e = encode_h(&c, "t", Some(&json_payload()), &text("{}"), &mut Vec::new()).unwrap_err();
    let ConvertError::Registry(e) = e else { panic!("{e:?}") };
    assert!(e.is_retryable(), "{e}");
    assert!(e.to_string().contains("value.converter.schema.registry.url"), "{e}");

    let f =
        fake(409, r#"{"error_code":409,"message":"Schema being registered is incompatible with an earlier schema"}"#);
    let c = converter("value", &[("value.converter", CONFLUENT_AVRO), ("value.converter.schema.registry.url", &f.url)])
        .unwrap();
    let ConvertError::Registry(e) = encode_h(&c, "t", Some(&json_payload()), &text("{}"), &mut Vec::new()).unwrap_err()
    else {
        panic!()
    };
    assert!(!e.is_retryable());
    let shown = e.to_string();
    assert!(shown.contains("subject `t-value`") && shown.contains("incompatible with an earlier schema"), "{shown}");

    let f = fake(401, r#"{"error_code":401,"message":"Unauthorized"}"#);
    let c = converter("value", &[("value.converter", CONFLUENT_AVRO), ("value.converter.schema.registry.url", &f.url)])
        .unwrap();
    let ConvertError::Registry(e) = encode_h(&c, "t", Some(&json_payload()), &text("{}"), &mut Vec::new()).unwrap_err()
    else {
        panic!()
    };
    assert!(!e.is_retryable() && e.to_string().contains("basic.auth.user.info"), "{e}");

    let f = fake(503, r#"{"message":"starting"}"#);
    let c = converter("value", &[("value.converter", CONFLUENT_AVRO), ("value.converter.schema.registry.url", &f.url)])
        .unwrap();
    let ConvertError::Registry(e) = encode_h(&c, "t", Some(&json_payload()), &text("{}"), &mut Vec::new()).unwrap_err()
    else {
        panic!()
    };
    assert!(e.is_retryable(), "{e}");
}

#[test]
fn subjects_follow_the_configured_strategy() {
    let f = fake(200, r#"{"id":1}"#);
    let record = Schema::Struct {
        name: Some("io.debezium.connector.common.Heartbeat".into()),
        fields: vec![("ts_ms".into(), Schema::primitive(Type::Int64, false))],
        optional: false,
        version: None,
        doc: None,
    };
    for (strategy, subject) in [
        ("io.confluent.kafka.serializers.subject.TopicNameStrategy", "hb-value"),
        ("io.confluent.kafka.serializers.subject.RecordNameStrategy", "io.debezium.connector.common.Heartbeat"),
        ("io.confluent.kafka.serializers.subject.TopicRecordNameStrategy", "hb-io.debezium.connector.common.Heartbeat"),
    ] {
        let c = converter(
            "value",
            &[
                ("value.converter", CONFLUENT_AVRO),
                ("value.converter.schema.registry.url", &f.url),
                ("value.converter.value.subject.name.strategy", strategy),
            ],
        )
        .unwrap();
        encode_h(&c, "hb", Some(&record), &Value::Struct(vec![Value::Int(1)]), &mut Vec::new()).unwrap();
        let last = f.seen.lock().unwrap().last().cloned().unwrap();
        assert!(last.starts_with(&format!("POST /subjects/{subject}/versions?normalize=false ")), "{strategy}: {last}");
    }
}

#[test]
fn configs_pgoutbox_cannot_honour_are_refused_naming_the_key() {
    let refused = |props: &[(&str, &str)]| converter("value", props).unwrap_err().to_string();
    let e = refused(&[("value.converter", CONFLUENT_AVRO)]);
    assert!(e.contains("value.converter.schema.registry.url"), "{e}");
    let e = refused(&[
        ("value.converter", CONFLUENT_AVRO),
        ("value.converter.schema.registry.url", "https://r:8081"),
        ("value.converter.schema.registry.ssl.truststore.location", "/nonexistent/truststore.p12"),
    ]);
    assert!(e.contains("value.converter.schema.registry.ssl.truststore.location") && e.contains("cannot read"), "{e}");
    let e = refused(&[("value.converter", "io.apicurio.registry.utils.converter.SerdeBasedConverter")]);
    assert!(e.contains("SerdeBasedConverter and its 3.x converters are not"), "{e}");
    let e = refused(&[
        ("value.converter", CONFLUENT_JSON_SCHEMA),
        ("value.converter.schema.registry.url", "http://r:8081"),
        ("value.converter.json.indent.output", "true"),
    ]);
    assert!(e.contains("value.converter.json.indent.output"), "{e}");
    let e = refused(&[
        ("value.converter", CONFLUENT_JSON_SCHEMA),
        ("value.converter.schema.registry.url", "http://r:8081"),
        ("value.converter.decimal.format", "TEXT"),
    ]);
    assert!(e.contains("value.converter.decimal.format"), "{e}");
    let e = refused(&[
        ("value.converter", APICURIO_AVRO),
        ("value.converter.apicurio.registry.url", "http://r:8080/apis/registry/v3"),
    ]);
    assert!(e.contains("v3 API"), "{e}");
    let e = refused(&[
        ("value.converter", APICURIO_AVRO),
        ("value.converter.apicurio.registry.url", "http://r:8080/apis/registry/v2"),
        ("value.converter.apicurio.registry.headers.value.globalId.name", "gid"),
    ]);
    assert!(e.contains("value.converter.apicurio.registry.headers.value.globalId.name"), "{e}");
    let e = refused(&[
        ("value.converter", CONFLUENT_AVRO),
        ("value.converter.schema.registry.url", "http://r:8081"),
        ("value.converter.scrub.invalid.names", "true"),
    ]);
    assert!(e.contains("value.converter.scrub.invalid.names"), "{e}");
}

#[test]
fn a_binary_data_converter_delegates_what_is_not_bytes_to_a_registry_converter() {
    use crate::connect::Converter;
    let f = fake(200, r#"{"id":9}"#);
    let entries: BTreeMap<String, String> = [
        ("value.converter", "io.debezium.converters.BinaryDataConverter"),
        ("value.converter.delegate.converter.type", CONFLUENT_AVRO),
        ("value.converter.delegate.converter.type.schema.registry.url", f.url.as_str()),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let c = Converter::parse(&mut Reader::new(&entries), "value").unwrap();
    let mut headers = Vec::new();
    // Bytes as they are, nothing asked of the registry.
    let bytes = Value::Bytes(Bytes::from_static(b"\x00\x00\x00\x00\x01avro"));
    let schema = Schema::optional(Type::Bytes);
    assert_eq!(
        c.encode_to("t", Some(&schema), &bytes, &mut headers).unwrap().unwrap(),
        &b"\x00\x00\x00\x00\x01avro"[..]
    );
    assert!(f.seen.lock().unwrap().is_empty());
    // A string (a heartbeat's or a key's) through the registry.
    let out = c.encode_to("t", Some(&Schema::primitive(Type::String, false)), &text("k"), &mut headers).unwrap();
    assert_eq!(hex::encode(out.unwrap()), "0000000009026b");
    assert!(f.seen.lock().unwrap()[0].starts_with("POST /subjects/t-value/versions"));
}

#[test]
fn an_apicurio_delegate_of_a_binary_data_converter_writes_the_id_before_the_body() {
    use crate::connect::Converter;
    let f = fake(200, r#"{"globalId":5,"contentId":2}"#);
    let url = format!("{}/apis/registry/v2", f.url);
    let entries: BTreeMap<String, String> = [
        ("key.converter", "io.debezium.converters.BinaryDataConverter"),
        ("key.converter.delegate.converter.type", APICURIO_AVRO),
        ("key.converter.delegate.converter.type.apicurio.registry.url", url.as_str()),
        ("key.converter.delegate.converter.type.apicurio.registry.auto-register", "true"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let c = Converter::parse(&mut Reader::new(&entries), "key").unwrap();
    let mut headers = Vec::new();
    let out = c.encode_to("t", Some(&Schema::primitive(Type::String, false)), &text("k"), &mut headers).unwrap();
    // Debezium's BinaryDataConverter hands its delegate no headers: magic byte and 8-byte globalId.
    assert_eq!(hex::encode(out.unwrap()), "000000000000000005026b");
    assert!(headers.is_empty(), "{headers:?}");
}

#[test]
fn apicurio_find_latest_refuses_a_latest_version_that_is_not_the_records_schema() {
    let routes = [
        ("/apis/registry/v2/groups/default/artifacts/t-value/meta", 200, r#"{"globalId":7,"contentId":3}"#),
        ("/apis/registry/v2/ids/globalIds/7", 200, r#"["null","string"]"#),
    ];
    let f = fake_routes(&routes);
    let url = format!("{}/apis/registry/v2", f.url);
    let props = [
        ("value.converter", APICURIO_AVRO),
        ("value.converter.apicurio.registry.url", url.as_str()),
        ("value.converter.apicurio.registry.find-latest", "true"),
    ];
    let c = converter("value", &props).unwrap();
    let mut headers = Vec::new();
    // The latest version is this very schema: its id is used.
    encode_h(&c, "t", Some(&Schema::optional(Type::String)), &text("x"), &mut headers).unwrap();
    assert_eq!(hex::encode(headers[0].1.as_deref().unwrap()), "0000000000000007");
    // Another schema (the Json-named string) under the same artifact: refused, naming it.
    let ConvertError::Registry(e) = encode_h(&c, "t", Some(&json_payload()), &text("{}"), &mut headers).unwrap_err()
    else {
        panic!()
    };
    assert!(!e.is_retryable() && e.to_string().contains("latest version differs"), "{e}");
}

#[test]
fn a_registry_that_did_not_answer_is_not_asked_again_at_once() {
    let c = confluent_at("http://127.0.0.1:1");
    let first = encode_h(&c, "t", Some(&json_payload()), &text("{}"), &mut Vec::new()).unwrap_err();
    let again = encode_h(&c, "t2", Some(&Schema::optional(Type::String)), &text("x"), &mut Vec::new()).unwrap_err();
    // The same error, for the first subject: the second record did not reach the network.
    assert_eq!(first, again);
}

#[test]
fn credentials_in_a_url_are_refused_without_echoing_it() {
    let e = converter(
        "value",
        &[("value.converter", CONFLUENT_AVRO), ("value.converter.schema.registry.url", "http://u:pa/ss@h:8081")],
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("credentials in the URL") && !e.contains("pa/ss"), "{e}");
}

#[test]
fn a_conflict_between_concurrent_registrations_is_asked_again_then_waited_out() {
    let f =
        fake(409, r#"{"error_code":409,"message":"An artifact with ID 't-value' in group 'null' already exists."}"#);
    let c = confluent_at(&f.url);
    let ConvertError::Registry(e) = encode_h(&c, "t", Some(&json_payload()), &text("{}"), &mut Vec::new()).unwrap_err()
    else {
        panic!()
    };
    assert!(e.is_retryable(), "{e}");
    assert_eq!(f.seen.lock().unwrap().len(), 3, "asked three times");
}

#[test]
fn protobuf_registers_a_protobuf_schema_and_writes_the_message_indexes_before_the_body() {
    let f = fake(200, r#"{"id":9}"#);
    let c = converter(
        "value",
        &[
            ("value.converter", CONFLUENT_PROTOBUF),
            ("value.converter.schema.registry.url", &f.url),
            (
                "value.converter.value.subject.name.strategy",
                "io.confluent.kafka.serializers.subject.RecordNameStrategy",
            ),
        ],
    )
    .unwrap();
    let mut headers = Vec::new();
    // A string payload is google.protobuf.StringValue, the eighth message of wrappers.proto.
    let bytes = encode_h(&c, "outbox.event.order", Some(&json_payload()), &text("{}"), &mut headers).unwrap().unwrap();
    assert_eq!(hex::encode(&bytes), "0000000009020e0a027b7d");
    let seen = f.seen.lock().unwrap();
    assert!(seen[0].starts_with("POST /subjects/google.protobuf.StringValue/versions?normalize=false "), "{}", seen[0]);
    let body: serde_json::Value = serde_json::from_str(seen[0].split("\r\n\n").last().unwrap().trim()).unwrap();
    assert_eq!(body["schemaType"], "PROTOBUF");
    assert_eq!(body["schema"], crate::connect::protobuf::WRAPPERS);
    drop(seen);
    assert_eq!(encode_h(&c, "outbox.event.order", Some(&json_payload()), &Value::Null, &mut headers).unwrap(), None);
    // Even for a required schema: ProtobufConverter writes a null as Kafka's null (AvroData refuses it).
    let required = Schema::primitive(Type::String, false);
    assert_eq!(encode_h(&c, "outbox.event.order", Some(&required), &Value::Null, &mut headers).unwrap(), None);
}

#[test]
fn protobuf_options_that_change_the_bytes_are_refused() {
    for (key, value) in [
        ("wrapper.for.nullables", "true"),
        ("generate.struct.for.nulls", "true"),
        ("scrub.invalid.names", "true"),
        ("skip.known.types", "false"),
    ] {
        let full = format!("value.converter.{key}");
        let e = converter(
            "value",
            &[
                ("value.converter", CONFLUENT_PROTOBUF),
                ("value.converter.schema.registry.url", "http://r:8081"),
                (&full, value),
            ],
        )
        .unwrap_err();
        assert!(e.to_string().contains(&full), "{e}");
    }
    converter(
        "value",
        &[
            ("value.converter", CONFLUENT_PROTOBUF),
            ("value.converter.schema.registry.url", "http://r:8081"),
            ("value.converter.enhanced.protobuf.schema.support", "true"),
            ("value.converter.wrapper.for.nullables", "false"),
        ],
    )
    .unwrap();
}

#[test]
fn json_schema_registers_a_json_schema_and_writes_the_value_after_the_id() {
    let f = fake(200, r#"{"id":11}"#);
    let c = converter(
        "value",
        &[
            ("value.converter", CONFLUENT_JSON_SCHEMA),
            ("value.converter.schema.registry.url", &f.url),
            ("value.converter.decimal.format", "numeric"),
        ],
    )
    .unwrap();
    let mut headers = Vec::new();
    let bytes =
        encode_h(&c, "outbox.event.order", Some(&json_payload()), &text("{\"a\":1}"), &mut headers).unwrap().unwrap();
    assert_eq!(&bytes[..5], &[0, 0, 0, 0, 11]);
    assert_eq!(&bytes[5..], br#""{\"a\":1}""#);
    let seen = f.seen.lock().unwrap();
    assert!(seen[0].starts_with("POST /subjects/outbox.event.order-value/versions?normalize=false "), "{}", seen[0]);
    let body: serde_json::Value = serde_json::from_str(seen[0].split("\r\n\n").last().unwrap().trim()).unwrap();
    assert_eq!(body["schemaType"], "JSON");
    assert_eq!(
        body["schema"],
        r#"{"oneOf":[{"type":"null"},{"type":"string","title":"io.debezium.data.Json","connect.version":1}]}"#
    );
    drop(seen);
    // A null under an optional schema is JSON's null after the id (JsonSchemaData makes it a
    // NullNode, which the serializer writes); under a required one, or without a schema, Kafka's null.
    let bytes = encode_h(&c, "outbox.event.order", Some(&json_payload()), &Value::Null, &mut headers).unwrap().unwrap();
    assert_eq!(&bytes[..], b"\0\0\0\0\x0bnull");
    let required = Schema::primitive(Type::String, false);
    assert_eq!(encode_h(&c, "outbox.event.order", Some(&required), &Value::Null, &mut headers).unwrap(), None);
    assert_eq!(encode_h(&c, "outbox.event.order", None, &Value::Null, &mut headers).unwrap(), None);
    assert!(headers.is_empty());
}

#[test]
fn json_schema_record_names_are_titles() {
    let f = fake(200, r#"{"id":1}"#);
    let c = converter(
        "value",
        &[
            ("value.converter", CONFLUENT_JSON_SCHEMA),
            ("value.converter.schema.registry.url", &f.url),
            (
                "value.converter.value.subject.name.strategy",
                "io.confluent.kafka.serializers.subject.TopicRecordNameStrategy",
            ),
        ],
    )
    .unwrap();
    let mut headers = Vec::new();
    let named = Schema::named(Type::String, false, "io.debezium.data.Json");
    encode_h(&c, "t", Some(&named), &text("{}"), &mut headers).unwrap();
    assert!(f.seen.lock().unwrap()[0].starts_with("POST /subjects/t-io.debezium.data.Json/versions"));
    // An optional schema has no title: refused, as Confluent's strategy refuses it.
    let e = encode_h(&c, "t", Some(&json_payload()), &text("{}"), &mut headers).unwrap_err();
    assert!(e.to_string().contains("use TopicNameStrategy"), "{e}");
}

#[test]
fn apicurio_ext_json_writes_the_global_id_and_the_schemaless_value_in_one_json_object() {
    let answer = r#"{"id":"t-value","version":"1","type":"KCONNECT","globalId":41,"contentId":9}"#;
    let f = fake(200, answer);
    let c = converter(
        "value",
        &[
            ("value.converter", APICURIO_EXT_JSON),
            ("value.converter.apicurio.registry.url", &format!("{}/apis/registry/v2", f.url)),
            ("value.converter.apicurio.registry.auto-register", "true"),
        ],
    )
    .unwrap();
    let mut headers = Vec::new();
    let bytes = encode_h(&c, "t", Some(&json_payload()), &text("{\"a\":1}"), &mut headers).unwrap().unwrap();
    assert_eq!(&bytes[..], br#"{"schemaId":41,"payload":"{\"a\":1}"}"#);
    assert!(headers.is_empty(), "no id headers: {headers:?}");
    let seen = f.seen.lock().unwrap();
    assert!(seen[0].to_ascii_lowercase().contains("x-registry-artifacttype: kconnect"), "{}", seen[0]);
    assert!(
        seen[0].ends_with(r#"{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1}"#),
        "JsonConverter's schema is registered: {}",
        seen[0]
    );
    drop(seen);
    // Apicurio's converter fails on a null with a schema; without one it is Kafka's null.
    let e = encode_h(&c, "t", Some(&json_payload()), &Value::Null, &mut headers).unwrap_err();
    assert!(e.to_string().contains("cannot write a null value"), "{e}");
    assert_eq!(encode_h(&c, "t", None, &Value::Null, &mut headers).unwrap(), None);
    let e = converter(
        "value",
        &[
            ("value.converter", APICURIO_EXT_JSON),
            ("value.converter.apicurio.registry.url", "http://r/apis/registry/v2"),
            ("value.converter.decimal.format", "NUMERIC"),
        ],
    )
    .unwrap_err();
    assert!(e.to_string().contains("value.converter.decimal.format"), "{e}");
}

/// OAUTHBEARER's keys, as Confluent's client reads them: the endpoint, the client's id and secret
/// are required; the scope, the claim names and the cache buffer are optional; the logical cluster
/// and identity pool become headers; the other bearer sources are refused naming the key.
#[test]
fn oauthbearer_reads_the_client_credentials_and_refuses_what_it_cannot_do() {
    let base = [
        ("value.converter", CONFLUENT_AVRO),
        ("value.converter.schema.registry.url", "http://registry:8081"),
        ("value.converter.bearer.auth.credentials.source", "OAUTHBEARER"),
        ("value.converter.bearer.auth.issuer.endpoint.url", "https://idp:8443/oauth2/token"),
        ("value.converter.bearer.auth.client.id", "relay"),
        ("value.converter.bearer.auth.client.secret", "s3cret"),
        ("value.converter.bearer.auth.logical.cluster", "lsrc-1"),
        ("value.converter.bearer.auth.identity.pool.id", "pool-2"),
    ];
    let c = converter("value", &base).unwrap();
    match &c.auth {
        Some(Auth::OAuth(o)) => {
            assert_eq!(o.client_id, "relay");
            assert_eq!(
                o.style,
                oauth::Style::Confluent {
                    scope: None,
                    scope_claim: "scope".into(),
                    sub_claim: "sub".into(),
                    buffer: Duration::from_secs(300)
                }
            );
            assert!(!format!("{c:?}").contains("s3cret"), "Debug shows the secret");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        c.bearer_headers,
        vec![("target-sr-cluster", "lsrc-1".to_string()), ("Confluent-Identity-Pool-Id", "pool-2".to_string())]
    );
    assert!(c.tls.is_some(), "an https token endpoint is reached with the registry's TLS settings");
    let key_of = |props: Vec<(&str, &str)>| match converter("value", &props) {
        Err(ConfigError::Invalid { key, .. } | ConfigError::Missing { key, .. }) => key,
        other => panic!("{other:?}"),
    };
    assert_eq!(key_of(without(&base, "client.secret")), "value.converter.bearer.auth.client.secret");
    assert_eq!(key_of(without(&base, "issuer.endpoint.url")), "value.converter.bearer.auth.issuer.endpoint.url");
    let with = |k: &'static str, v: &'static str| {
        let mut p = without(&base, k);
        p.push((k, v));
        p
    };
    assert_eq!(
        key_of(with("value.converter.bearer.auth.cache.expiry.buffer.seconds", "forever")),
        "value.converter.bearer.auth.cache.expiry.buffer.seconds"
    );
    assert_eq!(
        key_of(with("value.converter.bearer.auth.credentials.source", "SASL_OAUTHBEARER_INHERIT")),
        "value.converter.bearer.auth.credentials.source"
    );
    let static_token = converter(
        "value",
        &[
            ("value.converter", CONFLUENT_AVRO),
            ("value.converter.schema.registry.url", "http://registry:8081"),
            ("value.converter.bearer.auth.credentials.source", "STATIC_TOKEN"),
            ("value.converter.bearer.auth.token", "t0ken"),
            ("value.converter.bearer.auth.logical.cluster", "lsrc-1"),
        ],
    )
    .unwrap();
    assert_eq!(static_token.auth, Some(Auth::Header(Authorization("Bearer t0ken".into()))));
    assert_eq!(static_token.bearer_headers, vec![("target-sr-cluster", "lsrc-1".to_string())]);
}

/// Apicurio 2.x's OAuth: Keycloak's token endpoint under the service URL and realm (which wins over
/// a token endpoint given, as in Apicurio's resolver, and over basic auth), the client's id and
/// secret required.
#[test]
fn apicurio_oauth_finds_the_token_endpoint_as_apicurios_resolver_does() {
    let base = [
        ("value.converter", APICURIO_AVRO),
        ("value.converter.apicurio.registry.url", "http://registry:8080/apis/registry/v2"),
        ("value.converter.apicurio.auth.service.url", "https://keycloak:8443/auth"),
        ("value.converter.apicurio.auth.realm", "registry"),
        ("value.converter.apicurio.auth.service.token.endpoint", "https://elsewhere/token"),
        ("value.converter.apicurio.auth.client.id", "relay"),
        ("value.converter.apicurio.auth.client.secret", "s3cret"),
        ("value.converter.apicurio.auth.username", "user"),
        ("value.converter.apicurio.auth.password", "pw"),
    ];
    let c = converter("value", &base).unwrap();
    match &c.auth {
        Some(Auth::OAuth(o)) => {
            assert_eq!(
                o.endpoint.describe(),
                "https://keycloak:8443/auth/realms/registry/protocol/openid-connect/token"
            );
            assert_eq!(o.style, oauth::Style::Apicurio);
        }
        other => panic!("{other:?}"),
    }
    let c = converter("value", &without(&base, "service.url")).unwrap();
    assert!(matches!(&c.auth, Some(Auth::OAuth(o)) if o.endpoint.describe() == "https://elsewhere:443/token"));
    match converter("value", &without(&base, "auth.realm")) {
        Err(ConfigError::Missing { key, .. }) => assert_eq!(key, "value.converter.apicurio.auth.realm"),
        other => panic!("{other:?}"),
    }
    match converter("value", &without(&base, "client.secret")) {
        Err(ConfigError::Missing { key, .. }) => assert_eq!(key, "value.converter.apicurio.auth.client.secret"),
        other => panic!("{other:?}"),
    }
}
