//! `pgoutbox connect`: a standalone Connect worker driven through Connect's REST API, against real
//! PostgreSQL and a real broker: connectors from files and from REST, statuses, pause and resume,
//! validation errors, masked secrets, deletes, and what REST created surviving a restart.

mod support;

use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::*;

/// One HTTP/1.1 request; the status and the JSON body (`Null` when empty).
fn call(addr: &str, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    let mut s = std::net::TcpStream::connect(addr).expect("connect to the REST API");
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\naccept: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let code = text.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let payload = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    (code, serde_json::from_str(payload).unwrap_or(Value::Null))
}

fn wait_state(addr: &str, name: &str, state: &str) {
    let start = Instant::now();
    loop {
        let (code, v) = call(addr, "GET", &format!("/connectors/{name}/status"), None);
        if code == 200 && v["connector"]["state"] == state && (state == "STOPPED" || v["tasks"][0]["state"] == state) {
            return;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "{name} never reached {state}: {code} {v}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

struct Worker {
    child: Option<Child>,
    log: std::path::PathBuf,
}

impl Worker {
    fn start(dir: &std::path::Path, files: &[&std::path::Path]) -> Worker {
        let log = dir.join("worker.log");
        let out = std::fs::OpenOptions::new().create(true).append(true).open(&log).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_pgoutbox"))
            .args(["connect", "--worker"])
            .arg(dir.join("worker.properties"))
            .args(files)
            .stdout(Stdio::null())
            .stderr(out)
            .spawn()
            .unwrap();
        Worker { child: Some(child), log }
    }

    fn stop(&mut self) {
        let mut c = self.child.take().unwrap();
        unsafe_sigterm(c.id());
        let status = wait_exit(&mut c, Duration::from_secs(40)).expect("worker stops on SIGTERM");
        assert!(status.success(), "{}", std::fs::read_to_string(&self.log).unwrap_or_default());
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The connector keys of `o` (its config minus the worker-level ones) as a JSON map.
fn connector_json(o: &Outbox, name: &str) -> Value {
    let mut map = serde_json::Map::new();
    for line in
        o.config(&[&format!("name={name}"), "database.password=hunter2", &format!("topic.prefix={name}server")]).lines()
    {
        if let Some((k, v)) = line.split_once('=') {
            if k != "bootstrap.servers" {
                map.insert(k.to_string(), Value::String(v.to_string()));
            }
        }
    }
    Value::Object(map)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_worker_runs_connectors_from_files_and_rest() {
    let a = Outbox::new("wrka").await;
    let b = Outbox::new("wrkb").await;
    a.create_topics(&["Order"], 1).await;
    b.create_topics(&["Order"], 1).await;
    let dir = std::env::temp_dir().join(format!("pgoutbox-worker-{}-{}", std::process::id(), a.slot));
    std::fs::create_dir_all(&dir).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let addr = format!("127.0.0.1:{port}");
    std::fs::write(
        dir.join("worker.properties"),
        format!(
            "bootstrap.servers={}\nlisteners=http://127.0.0.1:{port}\noffset.storage.file.filename={}\nkey.converter=org.apache.kafka.connect.storage.StringConverter\n",
            a.env.broker,
            dir.join("offsets.dat").display()
        ),
    )
    .unwrap();
    let file = dir.join("orders.properties");
    let file_config: String = a
        .config(&["name=orders"])
        .lines()
        .filter(|l| !l.starts_with("bootstrap.servers"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&file, file_config).unwrap();
    let mut worker = Worker::start(&dir, &[&file]);
    let start = Instant::now();
    while std::net::TcpStream::connect(&addr).is_err() {
        assert!(start.elapsed() < Duration::from_secs(30), "REST API never came up");
        std::thread::sleep(Duration::from_millis(100));
    }

    let (code, root) = call(&addr, "GET", "/", None);
    assert_eq!((code, root["version"].is_string()), (200, true), "{root}");
    assert_eq!(call(&addr, "GET", "/connectors", None), (200, json!(["orders"])));
    wait_state(&addr, "orders", "RUNNING");
    let sql = a.env.sql().await;
    sql.batch_execute(&a.insert_sql("Order", "a-1", Some("{}"))).await.unwrap();
    assert_eq!(consume(&a.env.broker, &[a.topic("Order")], 1, Duration::from_secs(30)).len(), 1);

    // A second connector through REST; the worker's converter applies to it too.
    let body = json!({"name": "billing", "config": connector_json(&b, "billing")});
    let (code, created) = call(&addr, "POST", "/connectors", Some(&body));
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["tasks"], json!([{"connector": "billing", "task": 0}]));
    assert_eq!(created["config"]["database.password"], "[hidden]", "secrets are masked");
    let (code, dup) = call(&addr, "POST", "/connectors", Some(&body));
    assert_eq!((code, dup["error_code"].as_u64()), (409, Some(409)), "{dup}");
    wait_state(&addr, "billing", "RUNNING");
    let (code, expanded) = call(&addr, "GET", "/connectors?expand=status&expand=info", None);
    assert_eq!(code, 200);
    assert_eq!(expanded["billing"]["status"]["connector"]["state"], "RUNNING", "{expanded}");
    assert_eq!(expanded["orders"]["info"]["type"], "source", "{expanded}");
    assert_eq!(call(&addr, "GET", "/connectors/billing/tasks/0/status", None).1["state"], "RUNNING");
    let metrics = http_get(&addr, "/metrics").expect("metrics").1;
    assert!(metrics.contains("pgoutbox_events_acked_total{connector=\"orders\"} 1"), "{metrics}");
    assert!(
        metrics
            .contains("debezium_metrics_Connected{context=\"streaming\",name=\"billingserver\",plugin=\"postgres\"}"),
        "{metrics}"
    );

    assert!(metrics.contains("kafka_connect_worker_connector_count 2"), "{metrics}");

    // Pause: no events flow; resume: they do.
    assert_eq!(call(&addr, "PUT", "/connectors/orders/pause", None).0, 202);
    wait_state(&addr, "orders", "PAUSED");
    // Connect's task status metric follows the state, as the dashboards on Strimzi's rules read it.
    let metrics = http_get(&addr, "/metrics").expect("metrics").1;
    assert!(
        metrics.contains("kafka_connect_connector_status{connector=\"orders\",task=\"0\",status=\"paused\"} 1"),
        "{metrics}"
    );
    sql.batch_execute(&a.insert_sql("Order", "a-2", Some("{}"))).await.unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(consume_until_idle(&a.env.broker, &[a.topic("Order")], Duration::from_secs(1)).len(), 1, "paused");
    assert_eq!(call(&addr, "PUT", "/connectors/orders/resume", None).0, 202);
    wait_state(&addr, "orders", "RUNNING");
    assert_eq!(consume(&a.env.broker, &[a.topic("Order")], 2, Duration::from_secs(30)).len(), 2, "resumed");
    // The event streamed after the resume counts in Debezium's streaming metrics (the first one
    // came with the initial snapshot).
    let metrics = http_get(&addr, "/metrics").expect("metrics").1;
    assert!(
        metrics.contains(
            "debezium_metrics_TotalNumberOfEventsSeen{context=\"streaming\",name=\"testserver\",plugin=\"postgres\"} 1"
        ),
        "{metrics}"
    );

    // Validation errors name the key, in Connect's error body and in validate's shape.
    let mut bad = connector_json(&b, "broken");
    bad.as_object_mut().unwrap().remove("database.hostname");
    let (code, err) = call(&addr, "POST", "/connectors", Some(&json!({"name": "broken", "config": bad})));
    assert_eq!((code, err["error_code"].as_u64()), (400, Some(400)), "{err}");
    assert!(err["message"].as_str().unwrap().contains("database.hostname"), "{err}");
    let (code, v) = call(
        &addr,
        "PUT",
        "/connector-plugins/io.debezium.connector.postgresql.PostgresConnector/config/validate",
        Some(&bad),
    );
    assert_eq!((code, v["error_count"].as_u64()), (200, Some(1)), "{v}");
    let (_, plugins) = call(&addr, "GET", "/connector-plugins", None);
    assert_eq!(plugins[0]["class"], "io.debezium.connector.postgresql.PostgresConnector");

    // Stop, then the offsets; delete; 404 afterwards.
    assert_eq!(call(&addr, "PUT", "/connectors/billing/stop", None).0, 204);
    wait_state(&addr, "billing", "STOPPED");
    let (code, offsets) = call(&addr, "GET", "/connectors/orders/offsets", None);
    assert_eq!(code, 200, "{offsets}");
    assert_eq!(offsets["offsets"][0]["partition"]["server"], "testserver", "{offsets}");
    let (code, _) = call(&addr, "PATCH", "/connectors/orders/offsets", Some(&json!({"offsets": []})));
    assert_eq!(code, 400, "moving a slot is refused");

    // What REST created survives a restart of the worker, in its target state.
    worker.stop();
    let mut worker = Worker::start(&dir, &[&file]);
    let start = Instant::now();
    while std::net::TcpStream::connect(&addr).is_err() {
        assert!(start.elapsed() < Duration::from_secs(30), "REST API never came back");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(call(&addr, "GET", "/connectors", None), (200, json!(["billing", "orders"])));
    wait_state(&addr, "billing", "STOPPED");
    assert_eq!(call(&addr, "DELETE", "/connectors/billing", None).0, 204);
    let (code, gone) = call(&addr, "GET", "/connectors/billing", None);
    assert_eq!((code, gone["error_code"].as_u64()), (404, Some(404)), "{gone}");
    worker.stop();
    a.drop_slot().await;
    b.drop_slot().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// One HTTPS GET, trusting only the CA in `ca_pem`: the status and body, or why it failed.
async fn https_get(addr: &str, ca_pem: &std::path::Path, path: &str) -> Result<(u16, String), String> {
    https_get_as(addr, ca_pem, None, path).await
}

/// [`https_get`], presenting the client certificate and key in `identity` (PEM files).
async fn https_get_as(
    addr: &str,
    ca_pem: &std::path::Path,
    identity: Option<(&std::path::Path, &std::path::Path)>,
    path: &str,
) -> Result<(u16, String), String> {
    use rustls::pki_types::pem::PemObject;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls::pki_types::CertificateDer::pem_file_iter(ca_pem).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let config = match identity {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => {
            let chain = rustls::pki_types::CertificateDer::pem_file_iter(cert).unwrap().map(Result::unwrap).collect();
            let key = rustls::pki_types::PrivateKeyDer::from_pem_file(key).unwrap();
            builder.with_client_auth_cert(chain, key).unwrap()
        }
    };
    let tcp = tokio::net::TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let mut tls = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
        .connect(name, tcp)
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    let req = format!("GET {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\r\n");
    tls.write_all(req.as_bytes()).await.map_err(|e| e.to_string())?;
    let mut text = Vec::new();
    let _ = tls.read_to_end(&mut text).await;
    let text = String::from_utf8_lossy(&text).to_string();
    let code = text.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    Ok((code, text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default()))
}

/// Connect's `listeners=https://...` with `listeners.https.ssl.*`: the same API over TLS from a
/// PKCS12 keystore; a client that does not trust the worker's CA fails at the handshake, plain HTTP
/// on the port gets no answer, and a JKS keystore stops the worker at start with the keytool fix.
#[tokio::test(flavor = "multi_thread")]
async fn an_https_listener_serves_the_api_from_a_pkcs12_keystore() {
    let tls = std::path::PathBuf::from(std::env::var("PGOUTBOX_TEST_TLS_DIR").expect("PGOUTBOX_TEST_TLS_DIR"));
    let dir = std::env::temp_dir().join(format!("pgoutbox-worker-https-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cert = openssl::x509::X509::from_pem(&std::fs::read(tls.join("server.crt")).unwrap()).unwrap();
    let key = openssl::pkey::PKey::private_key_from_pem(&std::fs::read(tls.join("server.key")).unwrap()).unwrap();
    let p12 = openssl::pkcs12::Pkcs12::builder().name("worker").pkey(&key).cert(&cert).build2("changeit").unwrap();
    std::fs::write(dir.join("worker.p12"), p12.to_der().unwrap()).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let addr = format!("127.0.0.1:{port}");
    let props = |store: &str| {
        format!(
            "bootstrap.servers=127.0.0.1:9\nlisteners=https://127.0.0.1:{port}\noffset.storage.file.filename={}\n\
             listeners.https.ssl.keystore.location={}\nlisteners.https.ssl.keystore.password=changeit\n",
            dir.join("offsets.dat").display(),
            dir.join(store).display()
        )
    };
    std::fs::write(dir.join("worker.properties"), props("worker.p12")).unwrap();
    let mut worker = Worker::start(&dir, &[]);
    let start = Instant::now();
    while std::net::TcpStream::connect(&addr).is_err() {
        assert!(start.elapsed() < Duration::from_secs(30), "REST API never came up");
        std::thread::sleep(Duration::from_millis(100));
    }
    let (code, body) = https_get(&addr, &tls.join("ca.crt"), "/").await.expect("an HTTPS answer");
    assert_eq!(code, 200, "{body}");
    assert!(serde_json::from_str::<Value>(&body).unwrap()["version"].is_string(), "{body}");
    let (code, body) = https_get(&addr, &tls.join("ca.crt"), "/connectors").await.unwrap();
    assert_eq!((code, body.trim()), (200, "[]"));
    let untrusted = https_get(&addr, &tls.join("other-ca.crt"), "/").await;
    assert!(untrusted.as_ref().is_err_and(|e| e.starts_with("handshake")), "{untrusted:?}");
    assert_eq!(http_get(&addr, "/"), None, "plain HTTP gets no HTTP answer on the TLS port");
    worker.stop();

    // ssl.client.auth=required: only a client with a certificate the truststore's CA signed is answered.
    let required = format!(
        "{}listeners.https.ssl.client.auth=required\nlisteners.https.ssl.truststore.location={}\n",
        props("worker.p12"),
        tls.join("ca.crt").display()
    );
    std::fs::write(dir.join("worker.properties"), required).unwrap();
    let mut worker = Worker::start(&dir, &[]);
    let start = Instant::now();
    while std::net::TcpStream::connect(&addr).is_err() {
        assert!(start.elapsed() < Duration::from_secs(30), "REST API never came up");
        std::thread::sleep(Duration::from_millis(100));
    }
    let anonymous = https_get(&addr, &tls.join("ca.crt"), "/").await;
    assert!(!matches!(anonymous, Ok((200, _))), "a client without a certificate is refused: {anonymous:?}");
    let identity = Some((tls.join("client.crt"), tls.join("client.key")));
    let identity = identity.as_ref().map(|(c, k)| (c.as_path(), k.as_path()));
    let (code, _) = https_get_as(&addr, &tls.join("ca.crt"), identity, "/").await.expect("answered");
    assert_eq!(code, 200);
    worker.stop();

    // A JKS store (its magic number) is refused at start, naming the key and the conversion.
    std::fs::write(dir.join("worker.jks"), [0xFE, 0xED, 0xFE, 0xED, 0, 0, 0, 2]).unwrap();
    std::fs::write(dir.join("worker.properties"), props("worker.jks")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_pgoutbox"))
        .args(["connect", "--worker"])
        .arg(dir.join("worker.properties"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("listeners.https.ssl.keystore.location") && stderr.contains("keytool"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}
