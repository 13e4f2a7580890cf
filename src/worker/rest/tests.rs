//! The REST boundary, called as an outside caller would (no broker or database is reached: the
//! connectors these tests create are stopped, or fail to connect in the background).

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use super::super::{auth, Worker};
use super::{version_error, version_matches};

const MARK: &str = "Zq9SecretMark";

fn dir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("pgoutbox-rest-{}-{}", std::process::id(), uuid::Uuid::now_v7()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn worker_with(extra: &[(&str, &str)]) -> Arc<Worker> {
    let mut props: BTreeMap<String, String> = [
        ("bootstrap.servers", "127.0.0.1:1"),
        ("key.converter", "org.apache.kafka.connect.storage.StringConverter"),
        ("value.converter", "org.apache.kafka.connect.storage.StringConverter"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    props.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    Arc::new(Worker::new(props, "w:8083".into(), CancellationToken::new(), None).unwrap())
}

fn connector(extra: &[(&str, &str)]) -> serde_json::Value {
    let mut c = serde_json::json!({
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "database.hostname": "127.0.0.1", "database.port": "1", "database.user": "u",
        "database.password": "pw", "database.dbname": "app", "topic.prefix": "t",
        "table.include.list": "public.outbox",
        "transforms": "outbox", "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
    });
    for (k, v) in extra {
        c[*k] = serde_json::Value::String(v.to_string());
    }
    c
}

/// A connector config as the worker stores it.
fn as_map(v: serde_json::Value) -> BTreeMap<String, String> {
    v.as_object().unwrap().iter().map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string())).collect()
}

async fn call(
    app: &axum::Router,
    method: Method,
    uri: &str,
    body: Option<serde_json::Value>,
    user: Option<&str>,
) -> (StatusCode, String) {
    let mut req = Request::builder().method(method).uri(uri);
    if body.is_some() {
        req = req.header("content-type", "application/json");
    }
    if let Some(u) = user {
        use base64::Engine;
        req = req.header("authorization", format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(u)));
    }
    let req = req.body(body.map_or_else(Body::empty, |b| Body::from(b.to_string()))).unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20).await.unwrap();
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

/// The reproduction of the review: a caller declares its own directory provider and reads the
/// worker's environment through a rejected value. Providers are the worker's alone now, and no
/// error repeats a value, so nothing of the environment comes back.
#[tokio::test]
async fn rest_callers_cannot_declare_providers_or_read_values_back() {
    std::env::set_var("PGOUTBOX_TEST_ENV_SECRET", MARK);
    let d = dir();
    std::fs::write(d.join("db.properties"), format!("secret={MARK}\n")).unwrap();
    let w = worker_with(&[
        ("config.providers", "file"),
        ("config.providers.file.class", "org.apache.kafka.common.config.provider.FileConfigProvider"),
    ]);
    let app = super::router(w, None);
    let declared = connector(&[
        ("config.providers", "d"),
        ("config.providers.d.class", "org.apache.kafka.common.config.provider.DirectoryConfigProvider"),
        ("database.port", "${d:/proc/self:environ}"),
    ]);
    let (status, body) =
        call(&app, Method::PUT, "/connector-plugins/PostgresConnector/config/validate", Some(declared.clone()), None)
            .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body.contains("config.providers") && body.contains("declared by the worker"), "{body}");
    assert!(!body.contains(MARK) && !body.contains("PATH="), "{body}");
    let (status, body) =
        call(&app, Method::POST, "/connectors", Some(serde_json::json!({"name": "c", "config": declared})), None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(!body.contains(MARK), "{body}");
    // The worker's own provider resolves, and a value that fails to parse is not repeated.
    let path = d.join("db.properties");
    let reference = format!("${{file:{}:secret}}", path.display());
    for key in [
        "database.port",
        "snapshot.mode",
        "transforms.outbox.route.topic.regex",
        "value.converter",
        "status.update.interval.ms",
    ] {
        let config = connector(&[(key, &reference)]);
        let (_, body) =
            call(&app, Method::PUT, "/connector-plugins/PostgresConnector/config/validate", Some(config.clone()), None)
                .await;
        assert!(!body.contains(MARK), "{key}: {body}");
        let (_, body) = call(
            &app,
            Method::POST,
            "/connectors",
            Some(serde_json::json!({"name": format!("c-{key}"), "config": config})),
            None,
        )
        .await;
        assert!(!body.contains(MARK), "{key}: {body}");
    }
    let _ = std::fs::remove_dir_all(d);
}

/// A REST caller learns nothing of the files and variables it may not read: a path outside
/// allowed.paths (one that exists, or one that reaches out through a symlink and `..`), a variable
/// outside the allowlist, a missing file, key or variable, all get the same answer from validate and
/// from a create, and no content comes back. (As Kafka's providers, which read nothing outside
/// allowed.paths and answer a missing value and a forbidden one alike.)
#[tokio::test]
async fn unresolved_references_look_alike_to_rest_callers_wherever_they_point() {
    std::env::set_var("PGOUTBOX_TEST_ORACLE_SECRET", MARK);
    let d = dir();
    let (inside, outside) = (d.join("in"), d.join("out"));
    std::fs::create_dir_all(&inside).unwrap();
    std::fs::create_dir_all(outside.join("sub")).unwrap();
    std::os::unix::fs::symlink(outside.join("sub"), inside.join("link")).unwrap();
    std::fs::write(outside.join("secret.properties"), format!("k={MARK}\n")).unwrap();
    std::fs::write(outside.join("token"), MARK).unwrap();
    std::fs::write(inside.join("db.properties"), "other=1\n").unwrap();
    let allowed = inside.display().to_string();
    let w = worker_with(&[
        ("config.providers", "file,dir,env"),
        ("config.providers.file.class", "org.apache.kafka.common.config.provider.FileConfigProvider"),
        ("config.providers.file.param.allowed.paths", &allowed),
        ("config.providers.dir.class", "org.apache.kafka.common.config.provider.DirectoryConfigProvider"),
        ("config.providers.dir.param.allowed.paths", &allowed),
        ("config.providers.env.class", "org.apache.kafka.common.config.provider.EnvVarConfigProvider"),
        ("config.providers.env.param.allowlist.pattern", "PGOUTBOX_TEST_ORACLE_ALLOWED_.*"),
    ]);
    let app = super::router(w, None);
    let out = outside.display();
    let references = [
        format!("${{file:{out}/secret.properties:k}}"),
        format!("${{file:{allowed}/link/../secret.properties:k}}"),
        format!("${{file:{allowed}/missing.properties:k}}"),
        format!("${{file:{allowed}/db.properties:k}}"),
        format!("${{file:{allowed}:k}}"),
        format!("${{dir:{out}:token}}"),
        format!("${{dir:{allowed}/link/..:token}}"),
        format!("${{dir:{allowed}:token}}"),
        "${env:PGOUTBOX_TEST_ORACLE_SECRET}".to_string(),
        "${env:PGOUTBOX_TEST_ORACLE_ALLOWED_UNSET}".to_string(),
    ];
    let mut answers = BTreeMap::new();
    for (i, reference) in references.iter().enumerate() {
        let config = connector(&[("database.password", reference)]);
        let (_, validated) =
            call(&app, Method::PUT, "/connector-plugins/PostgresConnector/config/validate", Some(config.clone()), None)
                .await;
        let create = serde_json::json!({"name": format!("c{i}"), "config": config, "initial_state": "STOPPED"});
        let (status, created) = call(&app, Method::POST, "/connectors", Some(create), None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{reference}: {created}");
        for body in [&validated, &created] {
            assert!(!body.contains(MARK), "{reference}: {body}");
        }
        // The answers with the caller's own reference (and the provider's name in it) taken out.
        let alias = reference[2..].split(':').next().unwrap();
        let neutral = |body: &str| body.replace(reference.as_str(), "REF").replace(&format!("`{alias}`"), "`P`");
        answers.entry((neutral(&validated), neutral(&created))).or_insert_with(Vec::new).push(reference.clone());
    }
    assert_eq!(answers.len(), 1, "the answers tell the cases apart: {answers:#?}");
    let _ = std::fs::remove_dir_all(d);
}

/// Secrets are hidden by what the key holds, under any prefix, in every answer; references are
/// shown as written; `[hidden]` sent back keeps the stored secret.
#[tokio::test]
async fn rest_hides_secrets_everywhere_and_keeps_them_on_get_edit_put() {
    let d = dir();
    let w = worker_with(&[("offset.storage.file.filename", &d.join("offsets").display().to_string())]);
    let app = super::router(w.clone(), None);
    let pem = format!("-----BEGIN PRIVATE KEY-----{MARK}-----END PRIVATE KEY-----");
    let config = connector(&[
        ("producer.override.ssl.keystore.key", &pem),
        ("database.password", "${env:PGOUTBOX_TEST_DB_PASSWORD}"),
        (
            "producer.override.sasl.jaas.config",
            &format!(
                "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\" password=\"{MARK}\";"
            ),
        ),
        ("transforms.outbox.route.by.field", "${file:/s/x.properties:field}"),
    ]);
    let (status, body) = call(&app, Method::PUT, "/connectors/c/config", Some(config), None).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    call(&app, Method::PUT, "/connectors/c/stop", None, None).await;
    for uri in [
        "/connectors/c",
        "/connectors/c/config",
        "/connectors/c/tasks",
        "/connectors?expand=info&expand=status",
        "/connectors/c/status",
    ] {
        let (status, body) = call(&app, Method::GET, uri, None, None).await;
        assert_eq!(status, StatusCode::OK, "{uri}: {body}");
        assert!(!body.contains(MARK), "{uri}: {body}");
    }
    let (_, body) = call(&app, Method::GET, "/connectors/c/config", None, None).await;
    let shown: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(shown["producer.override.sasl.jaas.config"], "[hidden]");
    assert_eq!(shown["producer.override.ssl.keystore.key"], "[hidden]");
    assert_eq!(shown["database.password"], "${env:PGOUTBOX_TEST_DB_PASSWORD}", "a reference is not a secret");
    // GET, edit one key, PUT it all back: the hidden secrets stay what they were.
    let mut edited = shown.clone();
    edited["topic.prefix"] = "t2".into();
    let (status, body) = call(&app, Method::PUT, "/connectors/c/config", Some(edited), None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let stored = w.config("c").unwrap();
    assert!(stored["producer.override.sasl.jaas.config"].contains(MARK));
    assert_eq!(stored["producer.override.ssl.keystore.key"], pem);
    assert_eq!(stored["topic.prefix"], "t2");
    let patch = serde_json::json!({"producer.override.ssl.keystore.key": "[hidden]", "topic.prefix": "t3"});
    let (status, _) = call(&app, Method::PATCH, "/connectors/c/config", Some(patch), None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(w.config("c").unwrap()["producer.override.ssl.keystore.key"], pem);
    // A mask with nothing stored behind it is refused, not stored as the password.
    let (status, body) = call(
        &app,
        Method::PATCH,
        "/connectors/c/config",
        Some(serde_json::json!({"ssl.key.password": "[hidden]"})),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    // The standalone state file holds the secrets: its owner alone reads it.
    let state = d.join("offsets.connectors.json");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&state).unwrap().permissions().mode() & 0o777, 0o600);
    let _ = std::fs::remove_dir_all(d);
}

#[tokio::test]
async fn rest_refuses_connector_names_connect_refuses() {
    let app = super::router(worker_with(&[]), None);
    for name in ["a\"b\nc", "tab\u{7}", "   "] {
        let body = serde_json::json!({"name": name, "config": connector(&[])});
        let (status, body) = call(&app, Method::POST, "/connectors", Some(body), None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{name:?}: {body}");
    }
}

#[tokio::test]
async fn rest_enforces_the_client_override_policy() {
    let app = super::router(worker_with(&[("connector.client.config.override.policy", "Principal")]), None);
    let config = connector(&[("producer.override.bootstrap.servers", "elsewhere:9092")]);
    let (status, body) =
        call(&app, Method::POST, "/connectors", Some(serde_json::json!({"name": "c", "config": config})), None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body.contains("The 'Principal' policy does not allow 'bootstrap.servers' to be overridden"), "{body}");
    let config = connector(&[
        ("producer.override.sasl.mechanism", "PLAIN"),
        ("producer.override.security.protocol", "SASL_PLAINTEXT"),
        (
            "producer.override.sasl.jaas.config",
            "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\" password=\"p\";",
        ),
    ]);
    let (status, body) = call(&app, Method::PUT, "/connectors/c/config", Some(config), None).await;
    assert_eq!(status, StatusCode::CREATED, "the principal keys are allowed: {body}");
}

#[tokio::test]
async fn rest_with_basic_auth_answers_401_without_a_listed_user() {
    let d = dir();
    std::fs::write(d.join("users.properties"), "admin=s3cret\n").unwrap();
    std::fs::write(
        d.join("jaas.conf"),
        format!("KafkaConnect {{ org.apache.kafka.connect.rest.basic.auth.extension.PropertyFileLoginModule required file=\"{}\"; }};", d.join("users.properties").display()),
    )
    .unwrap();
    let props = BTreeMap::from([(auth::EXTENSIONS_KEY.to_string(), auth::BASIC_AUTH_EXTENSION.to_string())]);
    let opts = format!("-Djava.security.auth.login.config={}", d.join("jaas.conf").display());
    let basic = auth::BasicAuth::from_props(&props, Some(&opts)).unwrap();
    let app = super::router(worker_with(&[]), basic);
    for (uri, method) in [
        ("/", Method::GET),
        ("/connectors", Method::GET),
        ("/connectors", Method::POST),
        ("/metrics", Method::GET),
        ("/nowhere", Method::GET),
        ("/admin/loggers", Method::GET),
        ("/admin/loggers/root", Method::PUT),
        ("/health", Method::POST),
    ] {
        let (status, body) = call(&app, method.clone(), uri, None, None).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{method} {uri}");
        assert_eq!(body, "User cannot access the resource.");
        let (status, _) = call(&app, method.clone(), uri, None, Some("admin:wrong")).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{method} {uri} with a wrong password");
    }
    let (status, body) = call(&app, Method::GET, "/connectors", None, Some("admin:s3cret")).await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, "[]"));
    // Probes need no credentials: the answer says whether the worker has started, nothing more.
    let (status, body) = call(&app, Method::GET, "/health", None, None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body.contains("healthy") && !body.contains("connector"), "{body}");
    let _ = std::fs::remove_dir_all(d);
}

/// Exactly once is the worker's to enable, as in Connect: the connector gets Connect's transactional
/// id from the worker's group.id, and a connector cannot turn it on (or off) for itself.
#[tokio::test]
async fn exactly_once_comes_from_the_worker_with_connects_transactional_id() {
    let w = worker_with(&[("exactly.once.source.support", "enabled"), ("group.id", "connect-cluster")]);
    let mut c = as_map(connector(&[("exactly.once.support", "required"), ("transaction.boundary", "connector")]));
    c.insert("name".into(), "orders".into());
    let eos = w.effective(&c).unwrap().exactly_once.expect("on: the worker enables it");
    assert_eq!(eos.transactional_id, "connect-cluster-orders-0");
    assert_eq!(eos.boundary, crate::config::exactly_once::Boundary::Connector);
    c.insert("exactly.once.source.support".into(), "disabled".into());
    assert!(w.effective(&c).unwrap().exactly_once.is_some(), "a connector cannot turn the worker's setting off");
    let w = worker_with(&[]);
    let mut c = as_map(connector(&[("exactly.once.source.support", "enabled")]));
    c.insert("name".into(), "orders".into());
    let parsed = w.effective(&c).unwrap();
    assert!(parsed.exactly_once.is_none(), "nor on");
    assert!(parsed.ignored.iter().any(|k| k.key == "exactly.once.source.support"), "{:?}", parsed.ignored);
    let e = w.effective(&as_map(connector(&[("exactly.once.support", "required")]))).unwrap_err().to_string();
    assert!(e.contains("exactly.once.source.support=enabled"), "{e}");
}

/// Converters as Connect's Worker builds them: `<converter>.*` keys of a connector apply only with its
/// own converter class, and then the worker's `<converter>.*` keys do not.
#[tokio::test]
async fn a_connectors_converter_settings_apply_only_with_its_own_converter_class() {
    use crate::connect::converter::Converter;
    let json = "org.apache.kafka.connect.json.JsonConverter";
    let w = worker_with(&[("value.converter", json), ("value.converter.schemas.enable", "false")]);
    // Only the sub-key: the worker's converter, with the worker's schemas.enable=false.
    let parsed = w.effective(&as_map(connector(&[("value.converter.schemas.enable", "true")]))).unwrap();
    assert_eq!(parsed.value_converter, Converter::json(false));
    assert!(parsed.ignored.iter().any(|k| k.key == "value.converter.schemas.enable"), "{:?}", parsed.ignored);
    // Its own class: configured with its own keys only (JsonConverter's default, schemas on).
    let parsed = w.effective(&as_map(connector(&[("value.converter", json)]))).unwrap();
    assert_eq!(parsed.value_converter, Converter::json(true));
    let parsed = w
        .effective(&as_map(connector(&[("value.converter", json), ("value.converter.schemas.enable", "false")])))
        .unwrap();
    assert_eq!(parsed.value_converter, Converter::json(false));
}

/// Issue 20, item 6: requests that build Kafka clients or read a topic (validate, GET and DELETE
/// offsets) run two at a time; a third waits for a turn at most 10 s, then gets 503 (not a third
/// blocking thread, nor an unbounded queue of them), and is served once a turn is free.
#[tokio::test(start_paused = true)]
async fn kafka_reading_requests_run_two_at_a_time_and_a_third_is_told_to_come_back() {
    let w = worker_with(&[]);
    let app = super::router(w.clone(), None);
    let held = [w.heavy_turn().await.unwrap(), w.heavy_turn().await.unwrap()];
    let validate = "/connector-plugins/PostgresConnector/config/validate";
    let started = tokio::time::Instant::now();
    let (status, body) = call(&app, Method::PUT, validate, Some(connector(&[])), None).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(body.contains("busy") && body.contains("try again"), "{body}");
    assert!(started.elapsed() >= std::time::Duration::from_secs(10), "it waited for a turn first");
    drop(held);
    let (status, body) = call(&app, Method::PUT, validate, Some(connector(&[])), None).await;
    assert_eq!(status, StatusCode::OK, "served once a turn is free: {body}");
}

async fn json_of(
    app: &axum::Router,
    method: Method,
    uri: &str,
    body: Option<serde_json::Value>,
) -> (StatusCode, serde_json::Value) {
    let (status, text) = call(app, method, uri, body, None).await;
    (status, serde_json::from_str(&text).unwrap_or_else(|_| serde_json::Value::String(text)))
}

/// KIP-980: a connector created STOPPED or PAUSED never starts its pipeline (this one would fail at
/// once, its database is port 1); an unknown initial state is refused in Connect's error shape; the
/// 201 names the new connector's URL, as Connect's.
#[tokio::test]
async fn a_connector_created_stopped_never_streams_and_the_201_says_where_it_is() {
    let w = worker_with(&[]);
    let app = super::router(w.clone(), None);
    for (name, initial, state) in [("made-stopped", "STOPPED", "STOPPED"), ("made paused", "paused", "PAUSED")] {
        let body = serde_json::json!({"name": name, "config": connector(&[]), "initial_state": initial});
        let req = Request::builder()
            .method(Method::POST)
            .uri("/connectors")
            .header("host", "worker.example:8083")
            .header("content-type", "application/json")
            .body(Body::from(body.to_string()))
            .unwrap();
        let resp = app.clone().oneshot(req).await.unwrap();
        assert_eq!(resp.status(), StatusCode::CREATED);
        let location = resp.headers().get("location").map(|l| l.to_str().unwrap().to_string());
        let encoded = name.replace(' ', "%20");
        assert_eq!(location, Some(format!("http://worker.example:8083/connectors/{encoded}")));
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        let (status, v) = json_of(&app, Method::GET, &format!("/connectors/{encoded}/status"), None).await;
        assert_eq!(status, StatusCode::OK, "{v}");
        assert_eq!(v["connector"]["state"], state, "{v}");
    }
    let (status, v) = json_of(
        &app,
        Method::POST,
        "/connectors",
        Some(serde_json::json!({"name": "x", "config": connector(&[]), "initial_state": "SLEEPING"})),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{v}");
    assert_eq!(v["error_code"], 400);
    assert!(v["message"].as_str().unwrap().contains("RUNNING, PAUSED or STOPPED"), "{v}");
    assert!(w.config("x").is_err(), "nothing was created");
    // A method a resource does not have: Connect's 405, in its error shape.
    let (status, v) = json_of(&app, Method::DELETE, "/connectors", None).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(v, serde_json::json!({"error_code": 405, "message": "HTTP 405 Method Not Allowed"}));
    // A restart flag that is not `true` is false, as JAX-RS reads it, not a plain-text 400.
    let (status, v) = json_of(&app, Method::POST, "/connectors/made-stopped/restart?includeTasks=maybe", None).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{v}");
}

/// `/admin/loggers` (KIP-495, KIP-976) with Connect's codes and bodies; a standalone worker applies a
/// cluster-wide level itself.
#[tokio::test]
async fn log_levels_change_through_admin_loggers() {
    let app = super::router(worker_with(&[]), None);
    let (status, v) = json_of(&app, Method::GET, "/admin/loggers", None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(v["root"]["level"].is_string(), "{v}");
    let (status, v) = json_of(&app, Method::GET, "/admin/loggers/com.example.Nothing", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(v["message"], "Logger com.example.Nothing not found.");
    let level = |l: &str| Some(serde_json::json!({ "level": l }));
    let (status, v) =
        json_of(&app, Method::PUT, "/admin/loggers/org.apache.kafka.connect.runtime", level("debug")).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v, serde_json::json!(["org.apache.kafka.connect.runtime", "org.apache.kafka.connect.runtime.rest"]));
    let (_, v) = json_of(&app, Method::GET, "/admin/loggers/org.apache.kafka.connect.runtime.rest", None).await;
    assert_eq!(v["level"], "DEBUG");
    assert!(v["last_modified"].as_u64().is_some(), "{v}");
    let (_, v) = json_of(&app, Method::GET, "/admin/loggers", None).await;
    assert_eq!(v["org.apache.kafka.connect.runtime"]["level"], "DEBUG", "{v}");
    let (status, v) =
        json_of(&app, Method::PUT, "/admin/loggers/org.apache.kafka.connect.runtime", level("LOUD")).await;
    assert_eq!((status, v["message"].as_str()), (StatusCode::NOT_FOUND, Some(crate::logging::INVALID_LEVEL)));
    assert!(!v.to_string().contains("LOUD"), "no error repeats a value: {v}");
    let (status, v) =
        json_of(&app, Method::PUT, "/admin/loggers/org.apache.kafka.connect.runtime", Some(serde_json::json!({})))
            .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{v}");
    assert_eq!(v["message"], "Desired 'level' parameter was not specified in request.");
    let (status, _) =
        json_of(&app, Method::PUT, "/admin/loggers/org.apache.kafka.connect.runtime?scope=cluster", level("WARN"))
            .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (_, v) = json_of(&app, Method::GET, "/admin/loggers/org.apache.kafka.connect.runtime", None).await;
    assert_eq!(v["level"], "WARN", "a standalone worker is the whole cluster");
    // `admin.listeners` set takes the admin endpoints off the REST listener, as in Connect.
    for value in ["", "http://:9093"] {
        let off = super::router(worker_with(&[("admin.listeners", value)]), None);
        let (status, _) = json_of(&off, Method::GET, "/admin/loggers", None).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "admin.listeners={value}");
        let (status, _) = json_of(&off, Method::PUT, "/admin/loggers/root", level("TRACE")).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "admin.listeners={value}");
    }
}

/// While the worker starts, `/health` says so at once with Connect's 503, and any other call waits
/// for the start (503 in the error shape if it takes longer than the wait); once it has started, its
/// routes answer, `/health` 200, a call that was waiting included.
#[tokio::test]
async fn health_says_starting_and_calls_wait_until_the_worker_has_started() {
    let (ready, routes) = tokio::sync::watch::channel(None);
    let app = super::front(routes, None, std::time::Duration::from_millis(300));
    let (status, v) = json_of(&app, Method::GET, "/health", None).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(v, serde_json::json!({"status": "starting", "message": "Worker is still starting up."}));
    let (status, v) = json_of(&app, Method::GET, "/connectors", None).await;
    assert_eq!((status, v["error_code"].as_u64()), (StatusCode::SERVICE_UNAVAILABLE, Some(503)), "{v}");
    let waiting = {
        let app = app.clone();
        tokio::spawn(async move { json_of(&app, Method::GET, "/connectors", None).await })
    };
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let _ = ready.send(Some(super::routes(worker_with(&[]))));
    assert_eq!(waiting.await.unwrap(), (StatusCode::OK, serde_json::json!([])), "the waiting call is served");
    let (status, v) = json_of(&app, Method::GET, "/health", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(v["status"], "healthy");
}

/// KIP-558 in a standalone worker: the topics a connector produced to, forgotten by a reset until it
/// produces to them again; both calls 403 in Connect's words when the worker turns tracking off.
#[tokio::test]
async fn active_topics_reset_and_come_back_when_produced_to_again() {
    let w = worker_with(&[]);
    let app = super::router(w.clone(), None);
    let body = serde_json::json!({"name": "t", "config": connector(&[]), "initial_state": "STOPPED"});
    assert_eq!(json_of(&app, Method::POST, "/connectors", Some(body)).await.0, StatusCode::CREATED);
    let metrics = w.lock().get("t").unwrap().metrics.clone();
    metrics.record_sent(&Arc::from("order.events"), 2, 100);
    let (status, v) = json_of(&app, Method::GET, "/connectors/t/topics", None).await;
    assert_eq!((status, v), (StatusCode::OK, serde_json::json!({"t": {"topics": ["order.events"]}})));
    let (status, _) = json_of(&app, Method::PUT, "/connectors/t/topics/reset", None).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let (_, v) = json_of(&app, Method::GET, "/connectors/t/topics", None).await;
    assert_eq!(v, serde_json::json!({"t": {"topics": []}}));
    metrics.record_sent(&Arc::from("order.events"), 1, 50);
    let (_, v) = json_of(&app, Method::GET, "/connectors/t/topics", None).await;
    assert_eq!(v, serde_json::json!({"t": {"topics": ["order.events"]}}), "produced to again");
    // As Connect: a reset of a connector it does not know is accepted and forgets nothing.
    let (status, _) = json_of(&app, Method::PUT, "/connectors/nope/topics/reset", None).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    for (key, get, reset) in [
        ("topic.tracking.enable", "Topic tracking is disabled.", "Topic tracking is disabled."),
        ("topic.tracking.allow.reset", "", "Topic tracking reset is disabled."),
    ] {
        let off = super::router(worker_with(&[(key, "false")]), None);
        let (status, v) = json_of(&off, Method::GET, "/connectors/t/topics", None).await;
        if get.is_empty() {
            assert_eq!(status, StatusCode::OK, "tracking itself is on: {v}");
            assert_eq!(v, serde_json::json!({"t": {"topics": []}}), "unknown here: none, as Connect answers");
        } else {
            assert_eq!((status, v["message"].as_str()), (StatusCode::FORBIDDEN, Some(get)));
        }
        let (status, v) = json_of(&off, Method::PUT, "/connectors/t/topics/reset", None).await;
        assert_eq!((status, v["message"].as_str()), (StatusCode::FORBIDDEN, Some(reset)));
    }
}

/// KIP-891's plugin version requirements: a version, or a Maven range.
#[test]
fn plugin_versions_match_as_connect_reads_a_requirement() {
    let v = "3.6.3.Final";
    assert!(version_matches("3.6.3.Final", v));
    assert!(!version_matches("3.6.2.Final", v));
    assert!(version_matches("[3.0,4.0)", v));
    assert!(version_matches("[3.6.3,3.6.3]", v));
    assert!(!version_matches("(3.6.3,)", v));
    assert!(version_matches("[3.6,)", v));
    assert!(!version_matches("[9.9.9,9.9.9]", v));
    assert!(!version_matches("(,3.6.3)", v));
    assert_eq!(
        version_error("9.9.9").message,
        "Plugin io.debezium.connector.postgresql.PostgresConnector not found that matches the version range [9.9.9,9.9.9], available versions: [3.6.3.Final]"
    );
}
