//! `pgoutbox connect`: a standalone Connect worker driven through Connect's REST API, against real
//! PostgreSQL and a real broker: connectors from files and from REST, statuses, pause and resume,
//! validation errors, masked secrets, deletes, and what REST created surviving a restart.

mod support;

use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::*;

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

/// A standalone worker in `dir` on a free port, with the connectors of `files`, once its REST API
/// answers; and its address.
fn standalone_worker(dir: &std::path::Path, broker: &str, files: &[&std::path::Path]) -> (Worker, String) {
    standalone_worker_with(dir, broker, "", files)
}

/// [`standalone_worker`] with `extra` lines in its worker.properties.
fn standalone_worker_with(
    dir: &std::path::Path,
    broker: &str,
    extra: &str,
    files: &[&std::path::Path],
) -> (Worker, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let addr = format!("127.0.0.1:{port}");
    std::fs::write(
        dir.join("worker.properties"),
        format!(
            "bootstrap.servers={broker}\nlisteners=http://127.0.0.1:{port}\noffset.storage.file.filename={}\nkey.converter=org.apache.kafka.connect.storage.StringConverter\n{extra}",
            dir.join("offsets.dat").display()
        ),
    )
    .unwrap();
    let worker = Worker::start(dir, files);
    let start = Instant::now();
    while std::net::TcpStream::connect(&addr).is_err() {
        assert!(start.elapsed() < Duration::from_secs(30), "REST API never came up");
        std::thread::sleep(Duration::from_millis(100));
    }
    (worker, addr)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_worker_runs_connectors_from_files_and_rest() {
    let a = Outbox::new("wrka").await;
    let b = Outbox::new("wrkb").await;
    a.create_topics(&["Order"], 1).await;
    b.create_topics(&["Order"], 1).await;
    let dir = std::env::temp_dir().join(format!("pgoutbox-worker-{}-{}", std::process::id(), a.slot));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("orders.properties");
    let file_config: String = a
        .config(&["name=orders"])
        .lines()
        .filter(|l| !l.starts_with("bootstrap.servers"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&file, file_config).unwrap();
    let (mut worker, addr) = standalone_worker(&dir, &a.env.broker, &[&file]);

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
    // As Connect answers a create: the tasks come after.
    assert_eq!(created["tasks"], json!([]));
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
    // Connect's status metrics follow the state, as the dashboards on Strimzi's rules read them.
    let metrics = http_get(&addr, "/metrics").expect("metrics").1;
    assert!(metrics.contains("kafka_connect_connector_status{connector=\"orders\",status=\"paused\"} 1"), "{metrics}");
    assert!(
        metrics.contains("kafka_connect_connector_task_status{connector=\"orders\",task=\"0\",status=\"paused\"} 1"),
        "{metrics}"
    );
    sql.batch_execute(&a.insert_sql("Order", "a-2", Some("{}"))).await.unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(consume_until_idle(&a.env.broker, &[a.topic("Order")], Duration::from_secs(1)).len(), 1, "paused");
    assert_eq!(call(&addr, "PUT", "/connectors/orders/resume", None).0, 202);
    wait_state(&addr, "orders", "RUNNING");
    assert_eq!(consume(&a.env.broker, &[a.topic("Order")], 2, Duration::from_secs(30)).len(), 2, "resumed");
    // Both events were streamed (RUNNING means streaming: the first was inserted after it) and
    // count in Debezium's streaming metrics, across the pause and resume. The consumer can see the
    // record a moment before the relay has counted its acknowledgement.
    let seen =
        "debezium_metrics_TotalNumberOfEventsSeen{context=\"streaming\",name=\"testserver\",plugin=\"postgres\"} 2";
    let start = Instant::now();
    loop {
        let metrics = http_get(&addr, "/metrics").expect("metrics").1;
        if metrics.contains(seen) {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "{metrics}");
        std::thread::sleep(Duration::from_millis(100));
    }

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

/// Per connection: the user of the startup message and the password sent.
type Seen = std::sync::Arc<std::sync::Mutex<Vec<(String, Option<String>)>>>;

/// A PostgreSQL server as far as authentication: it asks every client for a cleartext password and
/// records, per connection, the user of the startup message and the password sent (`None`: the
/// client sent none). Stops on drop.
struct PasswordTrap {
    port: u16,
    seen: Seen,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl PasswordTrap {
    fn start() -> PasswordTrap {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen: Seen = Default::default();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (s, st) = (std::sync::Arc::clone(&seen), std::sync::Arc::clone(&stop));
        std::thread::spawn(move || {
            while !st.load(std::sync::atomic::Ordering::Relaxed) {
                match listener.accept() {
                    Ok((conn, _)) => {
                        if let Some(login) = PasswordTrap::login(conn) {
                            s.lock().unwrap().push(login);
                        }
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        });
        PasswordTrap { port, seen, stop }
    }

    /// One connection: the startup message's user, then the password message's text, if any.
    fn login(mut conn: std::net::TcpStream) -> Option<(String, Option<String>)> {
        conn.set_nonblocking(false).ok()?;
        conn.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        let mut read = |n: usize| -> Option<Vec<u8>> {
            let mut b = vec![0; n];
            conn.read_exact(&mut b).ok()?;
            Some(b)
        };
        let len = u32::from_be_bytes(read(4)?.try_into().ok()?) as usize;
        let startup = read(len.checked_sub(4)?)?;
        // Protocol 3.0, then key\0value\0 pairs.
        let fields: Vec<String> =
            startup.get(4..)?.split(|b| *b == 0).map(|f| String::from_utf8_lossy(f).into_owned()).collect();
        let user = fields.chunks(2).find(|kv| kv[0] == "user").and_then(|kv| kv.get(1).cloned()).unwrap_or_default();
        // AuthenticationCleartextPassword.
        conn.write_all(&[b'R', 0, 0, 0, 8, 0, 0, 0, 3]).ok()?;
        let mut tag = [0u8; 1];
        let password = match conn.read_exact(&mut tag) {
            Ok(()) if tag[0] == b'p' => {
                let mut len = [0u8; 4];
                conn.read_exact(&mut len).ok()?;
                let mut body = vec![0; (u32::from_be_bytes(len) as usize).checked_sub(4)?];
                conn.read_exact(&mut body).ok()?;
                Some(String::from_utf8_lossy(body.strip_suffix(&[0]).unwrap_or(&body)).into_owned())
            }
            _ => None,
        };
        Some((user, password))
    }

    fn seen(&self) -> Vec<(String, Option<String>)> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for PasswordTrap {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// A worker's properties give its connectors no connector keys, as Connect's: with the worker's own
/// database credentials in its file, a connector created over REST and pointed at a server of the
/// caller's choosing sends that server no password (and without its own `database.user` is refused,
/// naming the key), and a connector file on the command line gets none either.
#[tokio::test(flavor = "multi_thread")]
async fn worker_database_credentials_never_reach_a_server_a_connector_names() {
    const SECRET: &str = "Zq9-worker-db-password";
    let trap = PasswordTrap::start();
    let dir = std::env::temp_dir().join(unique("wrkcreds"));
    std::fs::create_dir_all(&dir).unwrap();
    let connector = |name: &str, user: Option<&str>| {
        let mut c = json!({
            "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "database.hostname": "127.0.0.1", "database.port": trap.port.to_string(),
            "database.dbname": "app", "database.sslmode": "disable", "topic.prefix": name,
            "slot.name": name, "table.include.list": "public.outbox",
            "transforms": "outbox", "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
        });
        if let Some(u) = user {
            c["database.user"] = json!(u);
        }
        c
    };
    let file = dir.join("fromfile.properties");
    let file_config: String = connector("fromfile", Some("file_user"))
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| format!("{k}={}\n", v.as_str().unwrap()))
        .collect();
    std::fs::write(&file, format!("name=fromfile\n{file_config}")).unwrap();
    let worker_db = format!(
        "database.hostname=127.0.0.1\ndatabase.port=1\ndatabase.user=worker_user\ndatabase.password={SECRET}\ndatabase.dbname=app\n"
    );
    let (_worker, addr) = standalone_worker_with(&dir, "127.0.0.1:9", &worker_db, &[&file]);
    let chosen = json!({"name": "chosen", "config": connector("chosen", Some("caller"))});
    let (code, body) = call(&addr, "POST", "/connectors", Some(&chosen));
    assert_eq!(code, 201, "{body}");
    let (code, body) =
        call(&addr, "POST", "/connectors", Some(&json!({"name": "nouser", "config": connector("nouser", None)})));
    assert_eq!(code, 400, "the worker's database.user is not the connector's: {body}");
    assert!(body["message"].as_str().unwrap_or_default().contains("database.user"), "{body}");
    wait_for("both connectors to reach the trap", Duration::from_secs(30), || {
        let users: Vec<String> = trap.seen().into_iter().map(|(u, _)| u).collect();
        ["caller", "file_user"].iter().all(|u| users.iter().any(|x| x == u))
    });
    assert!(
        trap.seen().iter().all(|(_, password)| password.is_none()),
        "a password was sent to the server the connector names: {:?}",
        trap.seen()
    );
    let log = std::fs::read_to_string(dir.join("worker.log")).unwrap_or_default();
    assert!(log.contains("hold connector keys") && log.contains("database.password"), "{log}");
    assert!(!log.contains(SECRET), "{log}");
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

/// A distributed worker of the cluster `group` on `port`, with its own directory.
fn cluster_worker(root: &std::path::Path, group: &str, broker: &str, port: u16) -> Worker {
    let dir = root.join(format!("w{port}"));
    std::fs::create_dir_all(&dir).unwrap();
    let addr = format!("127.0.0.1:{port}");
    let extra = "session.timeout.ms=6000\nheartbeat.interval.ms=1000\n";
    std::fs::write(dir.join("worker.properties"), worker_properties(broker, &addr, group, extra)).unwrap();
    let w = Worker::start(&dir, &[]);
    let start = Instant::now();
    while std::net::TcpStream::connect(&addr).is_err() {
        assert!(start.elapsed() < Duration::from_secs(60), "worker {port} never served REST: {}", w.log_text());
        std::thread::sleep(Duration::from_millis(100));
    }
    w
}

impl Worker {
    fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            c.kill().unwrap();
            c.wait().unwrap();
        }
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// Every connector RUNNING, as `asked` reports the cluster, on the live workers only, none with
/// more than `max_each`; and each connector's slot held by exactly one walsender.
async fn wait_balanced(asked: &str, live: &[u16], names: &[String], max_each: usize, outboxes: &[Outbox]) {
    let start = Instant::now();
    let sql = outboxes[0].env.sql().await;
    let slots: Vec<String> = outboxes.iter().map(|o| o.slot.clone()).collect();
    loop {
        let (code, all) = call(asked, "GET", "/connectors?expand=status", None);
        let mut per_worker: std::collections::BTreeMap<String, usize> = Default::default();
        let mut ok = code == 200;
        for name in names {
            let s = &all[name]["status"];
            let worker = s["tasks"][0]["worker_id"].as_str().unwrap_or("").to_string();
            let on_live = live.iter().any(|p| worker == format!("127.0.0.1:{p}"));
            ok &= s["connector"]["state"] == "RUNNING" && s["tasks"][0]["state"] == "RUNNING" && on_live;
            *per_worker.entry(worker).or_default() += 1;
        }
        ok &= per_worker.values().all(|n| *n <= max_each);
        if ok {
            let active: i64 = sql
                .query_one("SELECT count(*) FROM pg_replication_slots WHERE active AND slot_name = ANY($1)", &[&slots])
                .await
                .unwrap()
                .get(0);
            if active == slots.len() as i64 {
                return;
            }
        }
        assert!(start.elapsed() < Duration::from_secs(120), "the cluster never settled on {live:?}: {all}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Five events in each outbox, keyed `w<wave>-<k>`, in one batch.
fn wave(outboxes: &[Outbox], wave: usize) -> String {
    let mut statements = Vec::new();
    for o in outboxes {
        for k in 0..5 {
            statements.push(o.insert_sql("Order", &format!("w{wave}-{k}"), Some("{}")));
        }
    }
    statements.join(";")
}

#[tokio::test(flavor = "multi_thread")]
async fn three_workers_share_six_connectors_through_kills_and_returns() {
    let mut outboxes = Vec::new();
    for i in 0..6 {
        let o = Outbox::new(&format!("dist{i}")).await;
        o.create_topics(&["Order"], 1).await;
        outboxes.push(o);
    }
    let broker = outboxes[0].env.broker.clone();
    let group = unique("pgoutbox-cluster");
    let root = std::env::temp_dir().join(format!("pgoutbox-cluster-{}", std::process::id()));
    let ports: Vec<u16> =
        (0..3).map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()).collect();
    let addr = |i: usize| format!("127.0.0.1:{}", ports[i]);
    let mut workers: Vec<Worker> = ports.iter().map(|p| cluster_worker(&root, &group, &broker, *p)).collect();

    // Six connectors created through one worker; any worker lists all six.
    let names: Vec<String> = (0..6).map(|i| format!("dist{i}")).collect();
    for (o, name) in outboxes.iter().zip(&names) {
        let body = json!({"name": name, "config": connector_json(o, name)});
        let (code, created) = call(&addr(0), "POST", "/connectors", Some(&body));
        assert_eq!(code, 201, "{created}");
    }
    let (code, dup) = call(
        &addr(1),
        "POST",
        "/connectors",
        Some(&json!({"name": "dist0", "config": connector_json(&outboxes[0], "dist0")})),
    );
    assert_eq!(code, 409, "a duplicate is refused by any worker: {dup}");
    // Another worker has them as soon as it has read the config topic that far.
    wait_for("every worker lists the six connectors", Duration::from_secs(20), || {
        call(&addr(2), "GET", "/connectors", None) == (200, json!(names))
    });
    assert_eq!(call(&addr(2), "GET", "/connectors/dist3/config", None).1["database.password"], "[hidden]");
    wait_balanced(&addr(1), &ports, &names, 2, &outboxes).await;
    // Two creates of one name through two workers at the same moment: the config topic's order
    // decides, exactly one is created and the other refused, and every worker has the winner's
    // config (never the loser's written over it). The database port is closed: these connectors
    // never stream. Their names sort before the others': creating and deleting them moves none of
    // the six (each keeps its worker), where dealing out the sorted list moved them all.
    let owners = || -> Vec<Value> {
        names
            .iter()
            .map(|n| {
                call(&addr(0), "GET", &format!("/connectors/{n}/status"), None).1["connector"]["worker_id"].clone()
            })
            .collect()
    };
    let before = owners();
    for round in 0..10 {
        let name = format!("a-race{round}");
        let bodies: Vec<Value> = [1, 2]
            .iter()
            .map(|w| {
                let mut config = connector_json(&outboxes[0], &name);
                config["database.port"] = json!("1");
                config["topic.prefix"] = json!(format!("from-worker-{w}"));
                json!({"name": name, "config": config})
            })
            .collect();
        let answers: Vec<(u16, Value)> = std::thread::scope(|s| {
            let calls: Vec<_> = [1usize, 2]
                .iter()
                .zip(&bodies)
                .map(|(w, body)| s.spawn(move || call(&addr(*w), "POST", "/connectors", Some(body))))
                .collect();
            calls.into_iter().map(|c| c.join().unwrap()).collect()
        });
        let mut codes: Vec<u16> = answers.iter().map(|a| a.0).collect();
        codes.sort();
        assert_eq!(codes, [201, 409], "round {round}: {answers:?}");
        let winner = &answers.iter().find(|a| a.0 == 201).unwrap().1["config"]["topic.prefix"];
        for w in 0..3 {
            wait_for("every worker has the winner's config", Duration::from_secs(20), || {
                call(&addr(w), "GET", &format!("/connectors/{name}/config"), None).1["topic.prefix"] == *winner
            });
        }
        assert_eq!(call(&addr(2), "DELETE", &format!("/connectors/{name}"), None).0, 204);
        assert_eq!(call(&addr(1), "DELETE", &format!("/connectors/{name}"), None).0, 404, "deleted once");
    }
    assert_eq!(owners(), before, "creates and deletes of other connectors moved none of the six");

    let sql = outboxes[0].env.sql().await;
    let mut expected = 0;
    sql.batch_execute(&wave(&outboxes, 1)).await.unwrap();
    expected += 5;

    // A worker killed outright: the group notices, its connectors move to the survivors.
    workers[0].kill9();
    sql.batch_execute(&wave(&outboxes, 2)).await.unwrap();
    expected += 5;
    wait_balanced(&addr(1), &ports[1..], &names, 3, &outboxes).await;

    // It comes back and takes its share; then another is killed.
    workers[0] = cluster_worker(&root, &group, &broker, ports[0]);
    wait_balanced(&addr(0), &ports, &names, 2, &outboxes).await;
    workers[2].kill9();
    sql.batch_execute(&wave(&outboxes, 3)).await.unwrap();
    expected += 5;
    wait_balanced(&addr(0), &ports[..2], &names, 3, &outboxes).await;

    // A graceful stop hands over at once, and the third comes back.
    workers[1].stop();
    workers[2] = cluster_worker(&root, &group, &broker, ports[2]);
    sql.batch_execute(&wave(&outboxes, 4)).await.unwrap();
    expected += 5;
    wait_balanced(&addr(2), &[ports[0], ports[2]], &names, 3, &outboxes).await;

    // Nothing lost: every event of every wave is in its connector's topic (duplicates allowed).
    for o in &outboxes {
        let start = Instant::now();
        loop {
            let records = consume_until_idle(&broker, &[o.topic("Order")], Duration::from_secs(2));
            let keys: std::collections::BTreeSet<String> = records
                .iter()
                .map(|r| String::from_utf8_lossy(r.key.as_deref().unwrap_or_default()).into_owned())
                .collect();
            if keys.len() == expected {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "{}: {} of {expected} events: {keys:?}",
                o.topic("Order"),
                keys.len()
            );
        }
    }
    // Stopping through any worker reaches the connector wherever it runs.
    assert_eq!(call(&addr(2), "PUT", "/connectors/dist4/stop", None).0, 204);
    wait_state(&addr(0), "dist4", "STOPPED");
    assert_eq!(call(&addr(0), "DELETE", "/connectors/dist5", None).0, 204);
    wait_for("the delete reaches every worker", Duration::from_secs(20), || {
        call(&addr(2), "GET", "/connectors/dist5", None).0 == 404
    });
    workers[0].stop();
    workers[2].stop();
    for o in &outboxes {
        o.drop_slot().await;
    }
    let _ = std::fs::remove_dir_all(&root);
}

/// slot.drop.on.stop in a standalone worker: a pause, a restart and a config update stop the
/// pipeline but keep the slot (events committed meanwhile are not lost); only DELETE drops it.
#[tokio::test(flavor = "multi_thread")]
async fn slot_drop_on_stop_drops_the_slot_only_on_delete() {
    let o = Outbox::new("wrkdrop").await;
    o.create_topics(&["Order"], 1).await;
    let dir = std::env::temp_dir().join(format!("pgoutbox-worker-{}-{}", std::process::id(), o.slot));
    std::fs::create_dir_all(&dir).unwrap();
    let (mut worker, addr) = standalone_worker(&dir, &o.env.broker, &[]);
    let mut config = connector_json(&o, "dropper");
    config["slot.drop.on.stop"] = json!("true");
    let (code, body) = call(&addr, "PUT", "/connectors/dropper/config", Some(&config));
    assert_eq!(code, 201, "{body}");
    wait_state(&addr, "dropper", "RUNNING");
    let sql = o.env.sql().await;
    let slot_exists = || async { o.confirmed_flush().await.is_some() };
    // RUNNING is reported when the task starts, as Connect does; the slot follows at its session's start.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !slot_exists().await {
        assert!(std::time::Instant::now() < deadline, "the running connector never created its slot");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    assert_eq!(call(&addr, "PUT", "/connectors/dropper/pause", None).0, 202);
    wait_state(&addr, "dropper", "PAUSED");
    sql.batch_execute(&o.insert_sql("Order", "while-paused", Some("{}"))).await.unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(slot_exists().await, "a pause keeps the slot");
    assert_eq!(call(&addr, "PUT", "/connectors/dropper/resume", None).0, 202);
    wait_state(&addr, "dropper", "RUNNING");
    let got = consume(&o.env.broker, &[o.topic("Order")], 1, Duration::from_secs(30));
    assert_eq!(got.len(), 1, "the event committed while paused is published after the resume");

    assert_eq!(call(&addr, "POST", "/connectors/dropper/restart", None).0, 204);
    config["transforms.outbox.table.expand.json.payload"] = json!("false");
    assert_eq!(call(&addr, "PUT", "/connectors/dropper/config", Some(&config)).0, 200);
    wait_state(&addr, "dropper", "RUNNING");
    assert!(slot_exists().await, "a restart and a config update keep the slot");

    assert_eq!(call(&addr, "DELETE", "/connectors/dropper", None).0, 204);
    wait_for_async("DELETE drops the slot", Duration::from_secs(30), || async { !slot_exists().await }).await;
    worker.stop();
    let _ = std::fs::remove_dir_all(dir);
}

/// Connect's offsets endpoints on the slot: GET shows its live position; PATCH moves it forward only
/// (the events in between are skipped, as asked), within the server's WAL, on the connector's own
/// partition; DELETE starts over (the slot dropped, the table snapshotted again) but not while events
/// wait in the slot; both only on a stopped connector.
#[tokio::test(flavor = "multi_thread")]
async fn offsets_show_the_slot_move_it_forward_and_start_over() {
    let o = Outbox::new("wrkoff").await;
    o.create_topics(&["Order"], 1).await;
    let dir = std::env::temp_dir().join(format!("pgoutbox-worker-{}-{}", std::process::id(), o.slot));
    std::fs::create_dir_all(&dir).unwrap();
    let (mut worker, addr) = standalone_worker(&dir, &o.env.broker, &[]);
    let mut config = connector_json(&o, "offs");
    config["snapshot.mode"] = json!("initial");
    // The message outbox beside the table: waiting messages count as events too.
    let prefix = format!("outbox_{}", o.slot);
    config["transforms"] = json!("decode,outbox");
    config["transforms.decode.type"] =
        json!("io.debezium.connector.postgresql.transforms.DecodeLogicalDecodingMessageContent");
    config["message.prefix.include.list"] = json!(prefix);
    assert_eq!(call(&addr, "PUT", "/connectors/offs/config", Some(&config)).0, 201);
    wait_state(&addr, "offs", "RUNNING");
    let sql = o.env.sql().await;
    for i in 0..2 {
        sql.batch_execute(&o.insert_sql("Order", &format!("first-{i}"), Some("{}"))).await.unwrap();
    }
    assert_eq!(consume(&o.env.broker, &[o.topic("Order")], 2, Duration::from_secs(30)).len(), 2);
    let lsn_of = |text: String| -> u64 {
        let (hi, lo) = text.split_once('/').unwrap();
        (u64::from_str_radix(hi, 16).unwrap() << 32) | u64::from_str_radix(lo, 16).unwrap()
    };
    let offset = || call(&addr, "GET", "/connectors/offs/offsets", None).1["offsets"][0]["offset"]["lsn"].as_u64();
    // GET is the slot's live position, not a record written at the session's start.
    let confirmed = || async { o.confirmed_flush().await.map(lsn_of) };
    wait_for_async("GET offsets shows the slot's position", Duration::from_secs(20), || async {
        offset() == confirmed().await && offset().is_some()
    })
    .await;
    let patch = |lsn: Value, server: &str| {
        let body = json!({"offsets": [{"partition": {"server": server}, "offset": {"lsn": lsn}}]});
        call(&addr, "PATCH", "/connectors/offs/offsets", Some(&body))
    };
    let (code, body) = patch(json!(1), "offsserver");
    assert_eq!(code, 400, "a running connector's offsets are not altered: {body}");
    assert!(body["message"].as_str().unwrap().contains("STOPPED"), "{body}");

    assert_eq!(call(&addr, "PUT", "/connectors/offs/stop", None).0, 204);
    wait_state(&addr, "offs", "STOPPED");
    for i in 0..3 {
        sql.batch_execute(&o.insert_sql("Order", &format!("skipped-{i}"), Some("{}"))).await.unwrap();
    }
    // One message the relay would publish; one of another prefix and one non-transactional (skipped
    // by default) it would not.
    let message = |transactional: bool, prefix: &str| {
        format!(
            r#"SELECT pg_logical_emit_message({transactional}, '{prefix}', '{{"id": "m", "aggregatetype": "{}", "aggregateid": "skipped-m", "payload": {{}}}}')"#,
            o.agg("Order")
        )
    };
    for m in [message(true, &prefix), message(true, "someone_else"), message(false, &prefix)] {
        sql.batch_execute(&m).await.unwrap();
    }
    let (code, body) = call(&addr, "DELETE", "/connectors/offs/offsets", None);
    assert_eq!(code, 400, "{body}");
    assert!(body["message"].as_str().unwrap().contains("holds 4 outbox event(s) not yet published"), "{body}");
    let at = confirmed().await.unwrap();
    let (code, body) = patch(json!(at - 1), "offsserver");
    assert_eq!(code, 400, "{body}");
    assert!(body["message"].as_str().unwrap().contains("only move it forward"), "{body}");
    let (code, body) = patch(json!(at + (1 << 40)), "offsserver");
    assert!(code == 400 && body["message"].as_str().unwrap().contains("past the server's WAL position"), "{body}");
    let (code, body) = patch(json!(at), "otherserver");
    assert!(code == 400 && body["message"].as_str().unwrap().contains("unknown source partition"), "{body}");
    let (code, body) = patch(json!("0/0"), "offsserver");
    assert!(code == 400 && body["message"].as_str().unwrap().contains("`lsn` as a number"), "{body}");
    // Forward to the server's position: the three events are skipped, as asked. The flushed
    // position: a logical slot advances no further than the WAL flushed (a record just inserted,
    // e.g. the checkpointer's running transactions, left it 72 bytes short once).
    let now: String = sql.query_one("SELECT pg_current_wal_flush_lsn()::text", &[]).await.unwrap().get(0);
    let (code, body) = patch(json!(lsn_of(now.clone())), "offsserver");
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["message"], "The offsets for this connector have been altered successfully");
    assert_eq!(confirmed().await, Some(lsn_of(now)));
    assert_eq!(call(&addr, "PUT", "/connectors/offs/resume", None).0, 202);
    wait_state(&addr, "offs", "RUNNING");
    sql.batch_execute(&o.insert_sql("Order", "after", Some("{}"))).await.unwrap();
    let got = consume(&o.env.broker, &[o.topic("Order")], 3, Duration::from_secs(30));
    let keys: Vec<String> =
        got.iter().map(|r| String::from_utf8_lossy(r.key.as_deref().unwrap_or_default()).into_owned()).collect();
    assert_eq!(keys, ["first-0", "first-1", "after"], "the events the PATCH passed over were skipped");

    // DELETE with nothing pending: the slot goes, and the next start snapshots the table again.
    assert_eq!(call(&addr, "PUT", "/connectors/offs/stop", None).0, 204);
    wait_state(&addr, "offs", "STOPPED");
    let (code, body) = call(&addr, "DELETE", "/connectors/offs/offsets", None);
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["message"], "The offsets for this connector have been reset successfully");
    assert_eq!(confirmed().await, None, "the slot is dropped");
    assert_eq!(call(&addr, "PUT", "/connectors/offs/resume", None).0, 202);
    let got = consume(&o.env.broker, &[o.topic("Order")], 3 + 6, Duration::from_secs(30));
    assert_eq!(got.len(), 9, "the snapshot published the table's six rows again");
    worker.stop();
    o.drop_slot().await;
    let _ = std::fs::remove_dir_all(dir);
}

/// A config-topic record that does not parse (a bad write by hand, a tool's bug) is not a
/// deletion: the connector keeps its last good config and target state, and no slot is dropped on
/// it; an unknown target state does not start a stopped connector.
#[tokio::test(flavor = "multi_thread")]
async fn unreadable_config_records_keep_the_last_good_state() {
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
    let o = Outbox::new("wrkcorrupt").await;
    let broker = o.env.broker.clone();
    let group = unique("pgoutbox-corrupt");
    let root = std::env::temp_dir().join(format!("pgoutbox-corrupt-{}", std::process::id()));
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let addr = format!("127.0.0.1:{port}");
    let mut worker = cluster_worker(&root, &group, &broker, port);
    let mut config = connector_json(&o, "keeper");
    config["slot.drop.on.stop"] = json!("true");
    assert_eq!(call(&addr, "PUT", "/connectors/keeper/config", Some(&config)).0, 201);
    wait_state(&addr, "keeper", "RUNNING");
    // RUNNING is reported when the task starts; its session creates the slot just after.
    wait_for_async("the connector made its slot", Duration::from_secs(30), || async {
        o.confirmed_flush().await.is_some()
    })
    .await;
    assert_eq!(call(&addr, "PUT", "/connectors/keeper/stop", None).0, 204);
    wait_state(&addr, "keeper", "STOPPED");
    let producer: BaseProducer = rdkafka::ClientConfig::new().set("bootstrap.servers", &broker).create().unwrap();
    let topic = format!("{group}-configs");
    for (key, value) in [("connector-keeper", "{not json"), ("target-state-keeper", r#"{"state":"BOGUS"}"#)] {
        producer.send(BaseRecord::<str, str>::to(&topic).key(key).payload(value)).map_err(|(e, _)| e).unwrap();
    }
    producer.flush(Duration::from_secs(10)).unwrap();
    // A write after them, read back by the worker, shows it has read past the bad records.
    let mut other = connector_json(&o, "marker");
    other["database.port"] = json!("1");
    assert_eq!(call(&addr, "PUT", "/connectors/marker/config", Some(&other)).0, 201);
    assert_eq!(call(&addr, "GET", "/connectors", None).1, json!(["keeper", "marker"]));
    let (code, kept) = call(&addr, "GET", "/connectors/keeper/config", None);
    assert_eq!((code, &kept["topic.prefix"]), (200, &config["topic.prefix"]), "{kept}");
    wait_state(&addr, "keeper", "STOPPED");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(call(&addr, "GET", "/connectors/keeper/status", None).1["connector"]["state"], "STOPPED");
    assert!(worker.log_text().contains("is not JSON"), "the bad record is reported");
    assert!(o.confirmed_flush().await.is_some(), "the slot is still there");
    assert_eq!(call(&addr, "DELETE", "/connectors/marker", None).0, 204);
    assert_eq!(call(&addr, "DELETE", "/connectors/keeper", None).0, 204);
    worker.stop();
    let _ = std::fs::remove_dir_all(root);
}

/// The polling relay runs under the Connect worker like any connector: created through REST, it
/// publishes the table's unpublished rows and marks them; deleting it stops it.
#[tokio::test(flavor = "multi_thread")]
async fn a_worker_runs_a_polling_connector_created_through_rest() {
    let o = Outbox::new("wrkpoll").await;
    o.create_topics(&["Order"], 1).await;
    let sql = o.env.sql().await;
    sql.batch_execute(&format!("ALTER TABLE public.{} ADD COLUMN published_at timestamptz", o.table)).await.unwrap();
    for n in 0..5 {
        sql.batch_execute(&o.insert_sql("Order", &format!("a-{n}"), None)).await.unwrap();
    }
    let dir = std::env::temp_dir().join(format!("pgoutbox-worker-{}-{}", std::process::id(), o.slot));
    std::fs::create_dir_all(&dir).unwrap();
    let (mut worker, addr) = standalone_worker(&dir, &o.env.broker, &[]);
    let mut config = connector_json(&o, "polled");
    config["pgoutbox.relay"] = json!("polling");
    config["pgoutbox.polling.order.column"] = json!("seq");
    config["poll.interval.ms"] = json!("50");
    let (code, body) = call(&addr, "POST", "/connectors", Some(&json!({"name": "polled", "config": config})));
    assert_eq!(code, 201, "{body}");
    wait_state(&addr, "polled", "RUNNING");
    assert_eq!(by_id(&consume(&o.env.broker, &[o.topic("Order")], 5, Duration::from_secs(30))).len(), 5);
    wait_for_async("rows marked", Duration::from_secs(30), || async {
        o.count_where("published_at IS NULL").await == 0
    })
    .await;
    assert_eq!(call(&addr, "DELETE", "/connectors/polled", None).0, 204);
    worker.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

/// The connector's state as the status topic holds it (what the other workers answer from).
fn state_in_status_topic(broker: &str, topic: &str, name: &str) -> Option<String> {
    let key = format!("status-connector-{name}");
    consume_until_idle(broker, &[topic.to_string()], Duration::from_secs(2))
        .iter()
        .rfind(|r| r.key.as_deref() == Some(key.as_bytes()))
        .and_then(|r| r.value.as_ref())
        .and_then(|v| serde_json::from_slice::<Value>(v).ok())
        .and_then(|v| v["state"].as_str().map(str::to_string))
}

/// Sets the status topic's largest record (Kafka's max.message.bytes), keeping it compacted.
async fn status_topic_max_bytes(broker: &str, topic: &str, bytes: &str) {
    use rdkafka::admin::{AdminClient, AdminOptions, AlterConfig, ResourceSpecifier};
    let admin: AdminClient<rdkafka::client::DefaultClientContext> =
        rdkafka::ClientConfig::new().set("bootstrap.servers", broker).create().unwrap();
    let alter = AlterConfig::new(ResourceSpecifier::Topic(topic))
        .set("cleanup.policy", "compact")
        .set("max.message.bytes", bytes);
    let result = admin.alter_configs(&[alter], &AdminOptions::new()).await.unwrap();
    assert!(result.iter().all(|r| r.is_ok()), "{result:?}");
}

/// Issue 20, item 17: a status write the status topic refuses is written again at a later
/// reconcile, so the other workers (which answer from the topic) do not keep reporting a state the
/// connector left. The topic refuses it here by its record size limit, then takes records again.
#[tokio::test(flavor = "multi_thread")]
async fn a_status_the_status_topic_refused_is_written_once_it_takes_it_again() {
    let o = Outbox::new("wrkstatus").await;
    let broker = o.env.broker.clone();
    let group = unique("pgoutbox-status");
    let root = std::env::temp_dir().join(format!("pgoutbox-status-{}", std::process::id()));
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let addr = format!("127.0.0.1:{port}");
    let mut worker = cluster_worker(&root, &group, &broker, port);
    let status_topic = format!("{group}-status");
    assert_eq!(call(&addr, "PUT", "/connectors/keeper/config", Some(&connector_json(&o, "keeper"))).0, 201);
    wait_state(&addr, "keeper", "RUNNING");
    wait_for("RUNNING in the status topic", Duration::from_secs(30), || {
        state_in_status_topic(&broker, &status_topic, "keeper").as_deref() == Some("RUNNING")
    });
    status_topic_max_bytes(&broker, &status_topic, "16").await;
    // The broker applies a topic's config a moment later: a record of the test's own is refused
    // first, so the pause's status write surely is.
    let probe: rdkafka::producer::FutureProducer =
        rdkafka::ClientConfig::new().set("bootstrap.servers", &broker).create().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let record = rdkafka::producer::FutureRecord::<str, str>::to(&status_topic)
            .key("probe")
            .payload("a record larger than sixteen bytes");
        if probe.send(record, Duration::from_secs(10)).await.is_err() {
            break;
        }
        assert!(Instant::now() < deadline, "the status topic still takes large records");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(call(&addr, "PUT", "/connectors/keeper/pause", None).0, 202);
    wait_state(&addr, "keeper", "PAUSED");
    wait_for("the refused status write", Duration::from_secs(30), || {
        worker.log_text().contains("cannot write the connector's status")
    });
    assert_eq!(state_in_status_topic(&broker, &status_topic, "keeper").as_deref(), Some("RUNNING"));
    status_topic_max_bytes(&broker, &status_topic, "1048588").await;
    wait_for("PAUSED in the status topic after it takes records again", Duration::from_secs(30), || {
        state_in_status_topic(&broker, &status_topic, "keeper").as_deref() == Some("PAUSED")
    });
    assert_eq!(call(&addr, "DELETE", "/connectors/keeper", None).0, 204);
    worker.stop();
    o.drop_slot().await;
    let _ = std::fs::remove_dir_all(root);
}

/// The worker as the container image runs it: no file, only the variables Debezium's `connect` image
/// takes (and LOG_LEVEL); `/health` says `starting` or answers healthy, never anything else, until
/// the worker has joined its cluster. Then a connector through REST: the topic it produces to is in
/// the status topic (KIP-558) as Connect records it, a reset forgets it, the next event brings it
/// back. Without CONFIG_STORAGE_TOPIC the worker refuses to start, naming the variable.
#[tokio::test(flavor = "multi_thread")]
async fn a_worker_configured_by_debeziums_image_variables_alone() {
    let o = Outbox::new("wrkenv").await;
    o.create_topics(&["Order"], 1).await;
    let dir = std::env::temp_dir().join(format!("pgoutbox-worker-{}-{}", std::process::id(), o.slot));
    std::fs::create_dir_all(&dir).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let addr = format!("127.0.0.1:{port}");
    let group = format!("env{}", o.slot);
    let variables = |missing: &str| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_pgoutbox"));
        c.args(["connect", "--env-overrides"]).env_remove("RUST_LOG").env_remove("PGOUTBOX_WORKER");
        for (k, v) in [
            ("BOOTSTRAP_SERVERS", o.env.broker.clone()),
            ("GROUP_ID", group.clone()),
            ("CONFIG_STORAGE_TOPIC", format!("{group}-configs")),
            ("OFFSET_STORAGE_TOPIC", format!("{group}-offsets")),
            ("STATUS_STORAGE_TOPIC", format!("{group}-status")),
            ("KEY_CONVERTER", "org.apache.kafka.connect.storage.StringConverter".into()),
            ("REST_HOST_NAME", "127.0.0.1".into()),
            ("REST_PORT", port.to_string()),
            ("CONNECT_CONFIG_STORAGE_REPLICATION_FACTOR", "1".into()),
            ("CONNECT_OFFSET_STORAGE_REPLICATION_FACTOR", "1".into()),
            ("CONNECT_STATUS_STORAGE_REPLICATION_FACTOR", "1".into()),
            ("LOG_LEVEL", "DEBUG".into()),
        ] {
            if k != missing {
                c.env(k, v);
            }
        }
        c
    };
    let out = variables("CONFIG_STORAGE_TOPIC").output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("CONFIG_STORAGE_TOPIC"), "{stderr}");
    let log = dir.join("worker.log");
    let child = variables("").stdout(Stdio::null()).stderr(std::fs::File::create(&log).unwrap()).spawn().unwrap();
    let mut worker = Worker { child: Some(child), log };
    let start = Instant::now();
    let mut answers = std::collections::BTreeSet::new();
    loop {
        if std::net::TcpStream::connect(&addr).is_ok() {
            let (code, v) = call(&addr, "GET", "/health", None);
            answers.insert(format!("{code} {}", v["status"].as_str().unwrap_or("")));
            if code == 200 {
                break;
            }
        }
        assert!(start.elapsed() < Duration::from_secs(60), "never healthy: {answers:?}\n{}", worker.log_text());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(answers.iter().all(|a| a == "200 healthy" || a == "503 starting"), "{answers:?}");
    let (_, root) = call(&addr, "GET", "/", None);
    assert!(root["kafka_cluster_id"].as_str().is_some_and(|id| !id.is_empty()), "{root}");
    let (_, loggers) = call(&addr, "GET", "/admin/loggers", None);
    assert_eq!(loggers["root"]["level"], "DEBUG", "LOG_LEVEL applies without RUST_LOG: {loggers}");
    let (code, body) =
        call(&addr, "POST", "/connectors", Some(&json!({"name": "env", "config": connector_json(&o, "env")})));
    assert_eq!(code, 201, "{body}");
    wait_state(&addr, "env", "RUNNING");
    let sql = o.env.sql().await;
    let topics = |expected: Value| {
        let start = Instant::now();
        loop {
            let (code, v) = call(&addr, "GET", "/connectors/env/topics", None);
            if code == 200 && v["env"]["topics"] == expected {
                return;
            }
            if start.elapsed() > Duration::from_secs(30) {
                let mut s = std::net::TcpStream::connect(&addr).unwrap();
                s.write_all(format!("GET /metrics HTTP/1.0\r\nhost: {addr}\r\n\r\n").as_bytes()).unwrap();
                let mut text = String::new();
                s.read_to_string(&mut text).unwrap();
                let m: Vec<&str> = text.lines().filter(|l| l.contains("topic") || l.contains("acked")).collect();
                panic!("topics never {expected}: {code} {v}\n{}", m.join("\n"));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    sql.batch_execute(&o.insert_sql("Order", "a-1", Some("{}"))).await.unwrap();
    topics(json!([o.topic("Order")]));
    let key = format!("status-topic-{}:connector-env", o.topic("Order"));
    let status_topic = format!("{group}-status");
    let read = || {
        pgoutbox::kafka::consume::consume_all(
            &o.env.broker,
            &[&status_topic],
            None,
            Duration::from_secs(2),
            Duration::from_secs(20),
        )
    };
    let recorded = tokio::task::block_in_place(read)
        .unwrap()
        .into_iter()
        .rfind(|r| r.key.as_deref() == Some(key.as_bytes()))
        .and_then(|r| r.value)
        .map(|v| serde_json::from_slice::<Value>(&v).unwrap());
    assert_eq!(recorded.as_ref().map(|v| v["topic"]["name"].clone()), Some(json!(o.topic("Order"))), "{recorded:?}");
    assert_eq!(call(&addr, "PUT", "/connectors/env/topics/reset", None).0, 202);
    topics(json!([]));
    sql.batch_execute(&o.insert_sql("Order", "a-2", Some("{}"))).await.unwrap();
    topics(json!([o.topic("Order")]));
    assert_eq!(call(&addr, "DELETE", "/connectors/env", None).0, 204);
    worker.stop();
    let _ = std::fs::remove_dir_all(&dir);
    o.drop_slot().await;
}
