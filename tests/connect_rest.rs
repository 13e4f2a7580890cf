//! The REST differential: `pgoutbox connect` (a distributed worker) and Apache Kafka Connect itself
//! (the connect-runtime of the Kafka release the suite runs on, a distributed worker with the Debezium
//! PostgreSQL connector from Maven Central on its plugin path, `scripts/lib.sh` connect_start) get the
//! same calls, one after the other, and their answers are compared: status codes always, bodies field
//! by field once each side's own names (slot, publication, worker id) are replaced by placeholders.
//!
//! Differences docs/compatibility.md lists as intended are expected here by name (`INTENDED`);
//! any other difference fails the test, and the whole list is printed either way.

mod support;

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::*;

/// Differences that are deliberate, as (step or `*`, field or field suffix), each listed in
/// docs/compatibility.md §3.1 ("Differences from Connect's REST API, measured").
const INTENDED: &[(&str, &str)] = &[
    // Secrets are never shown (Connect shows them in clear, KAFKA-5117).
    ("*", "database.password"),
    // The plugin version pgoutbox reports is the Debezium release its records match, not the
    // reference worker's plugin.
    ("*", "version"),
    // Connect answers 500 with Jackson's parser message; pgoutbox 400, in the same error shape.
    ("invalid JSON", "status"),
    ("invalid JSON", "error_code"),
    ("invalid JSON", "message"),
    // Connect fails with a NullPointerException (500) on a body without `config`; pgoutbox 400.
    ("create without config", "status"),
    ("create without config", "error_code"),
    ("create without config", "message"),
    // pgoutbox records the slot it streams from at each session start; Connect's Debezium commits
    // an offset only after its first record.
    ("offsets", "offsets"),
    // Validate's entries are compared key by key below, with each side's plugin versions and
    // installed plugins told apart, and which keys have errors (the messages are each side's own).
    ("validate", "configs"),
    // The ConfigDef's documentation is pgoutbox's: what it does with each key.
    ("*", "documentation"),
    // The message names each side's plugin version.
    ("plugin config, no such version", "message"),
    // `commit` is pgoutbox's own; `pgoutbox_version` is an addition (docs/compatibility.md §3.1).
    ("root", "commit"),
    ("root", "pgoutbox_version"),
    // The loggers a PUT affects are each side's own: Connect's are its Java classes', pgoutbox's
    // the Connect names it maps and its own modules (docs/operations.md, "Log levels at runtime").
    ("logger set", "body"),
    ("logger set, cluster", "body"),
    // When each side set the level.
    ("logger get", "last_modified"),
    // Connect's message repeats the level sent; pgoutbox's names the levels it takes (no error
    // repeats a value).
    ("logger, bad level", "message"),
];

fn intended(step: &str, field: &str) -> bool {
    INTENDED.iter().any(|(st, f)| {
        (*st == "*" || *st == step)
            && (field == *f
                || field.ends_with(&format!(".{f}"))
                || field.starts_with(&format!("{f}["))
                || field.starts_with(&format!("{f}.")))
    })
}

/// One HTTP/1.1 request: status and body (JSON, or the text as a JSON string).
fn call(addr: &str, method: &str, path: &str, body: Option<&str>, json_type: bool) -> (u16, Value) {
    let mut s = std::net::TcpStream::connect(addr).expect("connect to a REST API");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let body = body.unwrap_or("");
    let ctype = if json_type { "content-type: application/json\r\n" } else { "" };
    let req = format!(
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\n{ctype}accept: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).into_owned();
    let code = text.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let (head, payload) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let payload = if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        dechunk(payload)
    } else {
        payload.to_string()
    };
    let value =
        serde_json::from_str(&payload).unwrap_or(if payload.is_empty() { Value::Null } else { Value::String(payload) });
    (code, value)
}

fn dechunk(body: &str) -> String {
    let mut out = String::new();
    let mut rest = body;
    while let Some((size, tail)) = rest.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || tail.len() < n {
            break;
        }
        out.push_str(&tail[..n]);
        rest = tail[n..].trim_start_matches("\r\n");
    }
    out
}

/// Kafka Connect itself, stopped on drop.
struct Reference {
    dir: PathBuf,
    addr: String,
}

impl Reference {
    fn start(broker: &str) -> Reference {
        let dir = std::env::temp_dir().join(unique("refconnect"));
        let out = Command::new("bash")
            .arg(scripts_dir().join("services.sh"))
            .args(["connect-start", &dir.to_string_lossy(), broker])
            .output()
            .expect("run services.sh connect-start");
        assert!(out.status.success(), "Kafka Connect did not start: {}", String::from_utf8_lossy(&out.stderr));
        let env = std::fs::read_to_string(dir.join("env")).unwrap();
        let addr = env.trim().strip_prefix("REST=").unwrap().to_string();
        Reference { dir, addr }
    }
}

impl Drop for Reference {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(scripts_dir().join("services.sh"))
            .args(["connect-stop", &self.dir.to_string_lossy()])
            .output();
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        } else {
            eprintln!("Kafka Connect's logs kept in {}", self.dir.display());
        }
    }
}

fn scripts_dir() -> PathBuf {
    std::env::var_os("PGOUTBOX_TEST_SCRIPTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts")))
}

/// `pgoutbox connect` as a distributed worker of a group of its own, killed on drop.
struct Pgoutbox {
    child: Child,
    addr: String,
    log: PathBuf,
}

impl Pgoutbox {
    fn start(broker: &str) -> Pgoutbox {
        let dir = std::env::temp_dir().join(unique("pgoconnect"));
        std::fs::create_dir_all(&dir).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let group = format!("pgo-{}", dir.file_name().unwrap().to_string_lossy());
        std::fs::write(
            dir.join("worker.properties"),
            format!(
                "bootstrap.servers={broker}\nlisteners=http://127.0.0.1:{port}\ngroup.id={group}\n\
                 config.storage.topic={group}-configs\nstatus.storage.topic={group}-status\noffset.storage.topic={group}-offsets\n\
                 config.storage.replication.factor=-1\nstatus.storage.replication.factor=-1\noffset.storage.replication.factor=-1\n\
                 key.converter=org.apache.kafka.connect.json.JsonConverter\nvalue.converter=org.apache.kafka.connect.json.JsonConverter\n"
            ),
        )
        .unwrap();
        let log = dir.join("worker.log");
        let child = Command::new(env!("CARGO_BIN_EXE_pgoutbox"))
            .args(["connect", "--worker"])
            .arg(dir.join("worker.properties"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let addr = format!("127.0.0.1:{port}");
        let start = Instant::now();
        while call_ok(&addr).is_none() {
            assert!(start.elapsed() < Duration::from_secs(60), "pgoutbox connect never served REST");
            std::thread::sleep(Duration::from_millis(100));
        }
        Pgoutbox { child, addr, log }
    }
}

fn call_ok(addr: &str) -> Option<()> {
    std::net::TcpStream::connect(addr).ok()?;
    (call(addr, "GET", "/connectors", None, false).0 == 200).then_some(())
}

impl Drop for Pgoutbox {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The two sides, each with the names that are its own (replaced by placeholders before comparing).
struct Sides {
    reference: String,
    pgoutbox: String,
    own: [(String, String); 2],
    differences: Vec<(String, String, String)>,
}

impl Sides {
    /// Replaces each side's own names, and the worker ids (host:port), by placeholders.
    fn normalise(&self, side: usize, v: &Value) -> Value {
        match v {
            Value::String(s) => {
                let mut s = s.replace(&self.own[side].0, "<SLOT>").replace(&self.own[side].1, "<PUBLICATION>");
                for addr in [&self.reference, &self.pgoutbox] {
                    s = s.replace(addr.as_str(), "<WORKER>");
                }
                Value::String(s)
            }
            Value::Array(a) => Value::Array(a.iter().map(|x| self.normalise(side, x)).collect()),
            Value::Object(o) => Value::Object(
                o.iter().filter(|(k, _)| *k != "trace").map(|(k, x)| (k.clone(), self.normalise(side, x))).collect(),
            ),
            other => other.clone(),
        }
    }

    /// Sends one call to both sides and records how their answers differ.
    fn both(&mut self, step: &str, method: &str, path: &str, body: Option<&Value>) -> [(u16, Value); 2] {
        let text = body.map(Value::to_string);
        self.both_raw(step, method, path, text.as_deref(), true)
    }

    fn both_raw(
        &mut self,
        step: &str,
        method: &str,
        path: &str,
        body: Option<&str>,
        json_type: bool,
    ) -> [(u16, Value); 2] {
        self.each(step, method, path, [body, body], json_type)
    }

    /// Sends one call to each side, with a body of its own (`[Connect's, pgoutbox's]`), and records
    /// how their answers differ.
    fn each(
        &mut self,
        step: &str,
        method: &str,
        path: &str,
        bodies: [Option<&str>; 2],
        json_type: bool,
    ) -> [(u16, Value); 2] {
        let (r, p) = (self.reference.clone(), self.pgoutbox.clone());
        let answers = [call(&r, method, path, bodies[0], json_type), call(&p, method, path, bodies[1], json_type)];
        if answers[0].0 != answers[1].0 {
            self.differ(
                step,
                "status",
                format!("Connect {} / pgoutbox {}: {} / {}", answers[0].0, answers[1].0, answers[0].1, answers[1].1),
            );
        }
        let (a, b) = (self.normalise(0, &answers[0].1), self.normalise(1, &answers[1].1));
        self.compare(step, "", &a, &b);
        answers
    }

    fn compare(&mut self, step: &str, at: &str, a: &Value, b: &Value) {
        match (a, b) {
            (Value::Object(x), Value::Object(y)) => {
                for k in x.keys().chain(y.keys().filter(|k| !x.contains_key(*k))) {
                    let field = if at.is_empty() { k.clone() } else { format!("{at}.{k}") };
                    match (x.get(k), y.get(k)) {
                        (Some(u), Some(v)) => self.compare(step, &field, u, v),
                        (u, v) => self.differ(step, &field, format!("Connect {} / pgoutbox {}", show(u), show(v))),
                    }
                }
            }
            (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
                for (i, (u, v)) in x.iter().zip(y).enumerate() {
                    self.compare(step, &format!("{at}[{i}]"), u, v);
                }
            }
            (u, v) if u != v => self.differ(
                step,
                if at.is_empty() { "body" } else { at },
                format!("Connect {} / pgoutbox {}", short(u), short(v)),
            ),
            _ => {}
        }
    }

    fn differ(&mut self, step: &str, field: &str, what: String) {
        self.differences.push((step.to_string(), field.to_string(), what));
    }

    fn wait_state(&self, name: &str, state: &str) {
        for addr in [&self.reference, &self.pgoutbox] {
            let start = Instant::now();
            loop {
                let (code, v) = call(addr, "GET", &format!("/connectors/{name}/status"), None, false);
                // A stopped connector has no tasks (Connect's status drops them a moment later).
                let tasks_ok = if state == "STOPPED" {
                    v["tasks"].as_array().is_some_and(Vec::is_empty)
                } else {
                    v["tasks"].as_array().is_some_and(|t| !t.is_empty() && t.iter().all(|t| t["state"] == state))
                };
                if code == 200 && v["connector"]["state"] == state && tasks_ok {
                    break;
                }
                assert!(start.elapsed() < Duration::from_secs(90), "{addr}: {name} never reached {state}: {code} {v}");
                std::thread::sleep(Duration::from_millis(250));
            }
        }
    }
}

fn show(v: Option<&Value>) -> String {
    v.map_or("(absent)".to_string(), short)
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 300 {
        format!("{}…", &s[..300])
    } else {
        s
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn connect_rest_api_matches_kafka_connect() {
    let env = Env::get();
    let o = Outbox::new("restdiff").await;
    let reference = Reference::start(&env.broker);
    let pgo = Pgoutbox::start(&env.broker);
    let own = |side: &str| (format!("{}_{side}", o.slot), format!("{}_{side}", o.publication));
    let mut s = Sides {
        reference: reference.addr.clone(),
        pgoutbox: pgo.addr.clone(),
        own: [own("c"), own("p")],
        differences: Vec::new(),
    };
    // The same connector for both, each on a slot and publication of its own.
    let config = |side: usize| -> Value {
        json!({
            "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "database.hostname": "127.0.0.1",
            "database.port": env.pg_port.to_string(),
            "database.user": "postgres",
            "database.password": "hunter2",
            "database.dbname": "postgres",
            "topic.prefix": "restdiff",
            "plugin.name": "pgoutput",
            "slot.name": s.own[side].0,
            "publication.name": s.own[side].1,
            "publication.autocreate.mode": "filtered",
            "table.include.list": format!("public.{}", o.table),
            "transforms": "outbox",
            "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
            "tasks.max": "1",
        })
    };
    let (rc, pc) = (config(0), config(1));
    // Side-specific bodies: the configs differ in slot and publication names.
    let pair = |s: &mut Sides, step: &str, method: &str, path: &str, bodies: [&Value; 2]| {
        let (c, p) = (bodies[0].to_string(), bodies[1].to_string());
        s.each(step, method, path, [Some(&c), Some(&p)], true)
    };

    s.both("list, empty", "GET", "/connectors", None);
    pair(
        &mut s,
        "create",
        "POST",
        "/connectors",
        [&json!({"name": "diff", "config": rc}), &json!({"name": "diff", "config": pc})],
    );
    pair(
        &mut s,
        "create, duplicate",
        "POST",
        "/connectors",
        [&json!({"name": "diff", "config": rc}), &json!({"name": "diff", "config": pc})],
    );
    s.wait_state("diff", "RUNNING");
    s.both("get", "GET", "/connectors/diff", None);
    s.both("config", "GET", "/connectors/diff/config", None);
    s.both("status", "GET", "/connectors/diff/status", None);
    s.both("tasks", "GET", "/connectors/diff/tasks", None);
    s.both("task status", "GET", "/connectors/diff/tasks/0/status", None);
    s.both("list, expanded", "GET", "/connectors?expand=status&expand=info", None);
    s.both("topics", "GET", "/connectors/diff/topics", None);
    s.both("topics reset", "PUT", "/connectors/diff/topics/reset", None);
    s.both("topics after reset", "GET", "/connectors/diff/topics", None);
    s.both("topics reset, unknown connector", "PUT", "/connectors/nope/topics/reset", None);
    s.both("topics, unknown connector", "GET", "/connectors/nope/topics", None);
    let mut rc2 = rc.clone();
    let mut pc2 = pc.clone();
    rc2["snapshot.fetch.size"] = json!("5000");
    pc2["snapshot.fetch.size"] = json!("5000");
    pair(&mut s, "config PUT", "PUT", "/connectors/diff/config", [&rc2, &pc2]);
    s.both("config PATCH", "PATCH", "/connectors/diff/config", Some(&json!({"snapshot.fetch.size": "6000"})));
    s.wait_state("diff", "RUNNING");
    s.both("pause", "PUT", "/connectors/diff/pause", None);
    s.wait_state("diff", "PAUSED");
    s.both("status, paused", "GET", "/connectors/diff/status", None);
    s.both("resume", "PUT", "/connectors/diff/resume", None);
    s.wait_state("diff", "RUNNING");
    s.both("restart", "POST", "/connectors/diff/restart", None);
    s.wait_state("diff", "RUNNING");
    s.both("restart with tasks", "POST", "/connectors/diff/restart?includeTasks=true&onlyFailed=false", None);
    s.wait_state("diff", "RUNNING");
    // JAX-RS reads a boolean query parameter that is not `true` as false, never as an error.
    s.both("restart, flag not a boolean", "POST", "/connectors/diff/restart?includeTasks=maybe", None);
    s.wait_state("diff", "RUNNING");
    s.both("stop", "PUT", "/connectors/diff/stop", None);
    s.wait_state("diff", "STOPPED");
    s.both("status, stopped", "GET", "/connectors/diff/status", None);
    s.both("offsets", "GET", "/connectors/diff/offsets", None);
    s.both("delete", "DELETE", "/connectors/diff", None);
    s.both("get, deleted", "GET", "/connectors/diff", None);
    s.both("delete, again", "DELETE", "/connectors/diff", None);

    // Bad input.
    s.both("unknown connector", "GET", "/connectors/nope", None);
    s.both("unknown connector status", "GET", "/connectors/nope/status", None);
    s.both("unknown connector pause", "PUT", "/connectors/nope/pause", None);
    s.both_raw("invalid JSON", "POST", "/connectors", Some("{bad"), true);
    s.both_raw("no content type", "POST", "/connectors", Some("{}"), false);
    s.both("create without config", "POST", "/connectors", Some(&json!({"name": "x"})));
    s.both("create without connector.class", "POST", "/connectors", Some(&json!({"name": "x", "config": {}})));
    let mut bad = rc.clone();
    bad["database.port"] = json!("not-a-port");
    let [r, p] = s.both("validate", "PUT", "/connector-plugins/PostgresConnector/config/validate", Some(&bad));
    s.both("plugins", "GET", "/connector-plugins", None);
    // The connector's ConfigDef (and KIP-891's version requirement on it).
    let configdef = "/connector-plugins/io.debezium.connector.postgresql.PostgresConnector/config";
    s.both("plugin config", "GET", configdef, None);
    s.both("plugin config, simple name", "GET", "/connector-plugins/PostgresConnector/config", None);
    s.both("plugin config, no such version", "GET", &format!("{configdef}?version=9.9.9"), None);
    s.both("plugin config, unknown plugin", "GET", "/connector-plugins/com.example.NoSuchConnector/config", None);
    // Every plugin (KIP-769): each one pgoutbox lists is one Connect, with Debezium on its plugin
    // path, lists too, of the same type (Connect lists more: its other connectors and transforms).
    let listed = |addr: &str| {
        let (code, v) = call(addr, "GET", "/connector-plugins?connectorsOnly=false", None, false);
        assert_eq!(code, 200, "{v}");
        v.as_array()
            .unwrap()
            .iter()
            .map(|p| (p["class"].as_str().unwrap().to_string(), p["type"].as_str().unwrap().to_string()))
            .collect::<Vec<_>>()
    };
    let (theirs, ours) = (listed(&s.reference), listed(&s.pgoutbox));
    let unknown: Vec<_> = ours.iter().filter(|p| !theirs.contains(p)).collect();
    println!("connector-plugins?connectorsOnly=false: Connect lists {}, pgoutbox {}", theirs.len(), ours.len());
    assert!(ours.len() > 30 && unknown.is_empty(), "listed by pgoutbox, not by Connect: {unknown:?}");

    // The worker itself (both on the same Kafka cluster, so the same cluster id).
    let [(_, theirs), (_, ours)] = s.both("root", "GET", "/", None);
    let id = ours["kafka_cluster_id"].as_str();
    assert!(
        id.is_some_and(|id| !id.is_empty()) && theirs["kafka_cluster_id"] == ours["kafka_cluster_id"],
        "{theirs} / {ours}"
    );
    s.both("health", "GET", "/health", None);
    s.both("method not allowed", "DELETE", "/connectors", None);
    // Log levels at runtime (KIP-495, KIP-976).
    let level = json!({"level": "DEBUG"});
    s.both("logger set", "PUT", "/admin/loggers/io.debezium.transforms.outbox", Some(&level));
    s.both("logger get", "GET", "/admin/loggers/io.debezium.transforms.outbox", None);
    s.both("logger, bad level", "PUT", "/admin/loggers/io.debezium", Some(&json!({"level": "LOUD"})));
    s.both("logger, no level", "PUT", "/admin/loggers/io.debezium", Some(&json!({"lvl": "DEBUG"})));
    s.both("logger unknown", "GET", "/admin/loggers/com.example.nothing", None);
    s.both(
        "logger set, cluster",
        "PUT",
        "/admin/loggers/io.debezium.transforms.outbox?scope=cluster",
        Some(&json!({"level": "INFO"})),
    );
    // The lists are each side's own loggers: both list the root, and pgoutbox the one set above.
    for (who, addr) in [("Connect", &s.reference), ("pgoutbox", &s.pgoutbox)] {
        // A cluster-wide level is applied as each worker reads it from the config topic.
        let start = Instant::now();
        let (code, v) = loop {
            let (code, v) = call(addr, "GET", "/admin/loggers", None, false);
            if v["io.debezium.transforms.outbox"]["level"] == "INFO" || start.elapsed() > Duration::from_secs(15) {
                break (code, v);
            }
            std::thread::sleep(Duration::from_millis(200));
        };
        assert_eq!(code, 200, "{who}: {v}");
        assert!(v["root"]["level"].is_string(), "{who} lists the root logger: {v}");
        assert_eq!(v["io.debezium.transforms.outbox"]["level"], "INFO", "{who}: the cluster-wide level applied: {v}");
    }
    // Created stopped (KIP-980): it never runs, and its status says so.
    pair(
        &mut s,
        "create stopped",
        "POST",
        "/connectors",
        [
            &json!({"name": "diffstopped", "config": rc, "initial_state": "STOPPED"}),
            &json!({"name": "diffstopped", "config": pc, "initial_state": "STOPPED"}),
        ],
    );
    s.wait_state("diffstopped", "STOPPED");
    s.both("status, created stopped", "GET", "/connectors/diffstopped/status", None);
    s.both("delete, created stopped", "DELETE", "/connectors/diffstopped", None);

    let mut unexpected = Vec::new();
    println!("connect_rest_api_matches_kafka_connect: {} differences", s.differences.len());
    for (step, field, what) in &s.differences {
        let intended = intended(step, field);
        println!("  [{}] {step} / {field}: {what}", if intended { "intended" } else { "DIFFERENT" });
        if !intended {
            unexpected.push(format!("{step} / {field}: {what}"));
        }
    }
    // Validate, key by key: every key of pgoutbox's answer is in Connect's, with the same definition
    // (documentation aside) and the same value, in the same order, each side's plugin versions
    // aside; the plugins each recommends are its own (pgoutbox's among Connect's). The keys Connect
    // lists besides are the transform's.
    let versions = |addr: &str| {
        let plugin = call(addr, "GET", "/connector-plugins", None, false).1[0]["version"].as_str().unwrap().to_string();
        let kafka = call(addr, "GET", "/", None, false).1["version"].as_str().unwrap().to_string();
        [plugin, kafka]
    };
    let entries = |v: &Value, [plugin, kafka]: [String; 2]| -> Vec<(String, Value)> {
        let text = v
            .to_string()
            .replace(&format!("\"{plugin}\""), "\"<plugin>\"")
            .replace(&format!("\"{kafka}\""), "\"<kafka>\"");
        let v: Value = serde_json::from_str(&text).unwrap();
        v["configs"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                let mut c = c.clone();
                c["definition"].as_object_mut().map(|d| d.remove("documentation"));
                let errors = c["value"]["errors"].as_array().is_some_and(|e| !e.is_empty());
                c["value"]["errors"] = json!(errors);
                (c["definition"]["name"].as_str().unwrap_or_default().to_string(), c)
            })
            .collect()
    };
    let (mut theirs, mut ours) = (entries(&r.1, versions(&s.reference)), entries(&p.1, versions(&s.pgoutbox)));
    for (name, c) in ours.iter_mut().filter(|(n, _)| n.ends_with("converter") || n.ends_with(".type")) {
        let their = &mut theirs.iter_mut().find(|(n, _)| n == name).expect("Connect lists it").1;
        let offered = their["value"]["recommended_values"].take();
        let recommended = c["value"]["recommended_values"].take();
        let missing: Vec<&Value> =
            recommended.as_array().unwrap().iter().filter(|p| !offered.as_array().unwrap().contains(p)).collect();
        assert!(missing.is_empty(), "{name}: pgoutbox recommends plugins Connect does not have: {missing:?}");
    }
    let their_names: Vec<&String> =
        theirs.iter().map(|(n, _)| n).filter(|n| ours.iter().any(|(o, _)| o == *n)).collect();
    let our_names: Vec<&String> = ours.iter().map(|(n, _)| n).collect();
    assert_eq!(their_names, our_names, "validate lists the keys pgoutbox lists in Connect's order");
    let mismatched: Vec<String> = ours
        .iter()
        .filter_map(|(n, c)| {
            let t = &theirs.iter().find(|(tn, _)| tn == n)?.1;
            (t != c).then(|| format!("{n}: Connect {t} / pgoutbox {c}"))
        })
        .collect();
    let extra: Vec<&String> = theirs.iter().map(|(n, _)| n).filter(|n| !our_names.contains(n)).collect();
    println!("validate: {} keys in both, Connect lists {} more: {extra:?}", our_names.len(), extra.len());
    assert!(
        extra.iter().all(|n| n.starts_with("transforms.")),
        "Connect lists non-transform keys pgoutbox does not: {extra:?}"
    );
    assert!(mismatched.is_empty(), "validate entries that differ:\n{}", mismatched.join("\n"));
    // The validation bodies are long: both must find errors, and name database.port among them.
    for (who, (code, v)) in [("Connect", &r), ("pgoutbox", &p)] {
        assert_eq!(*code, 200, "{who}: {v}");
        assert!(v["error_count"].as_u64().unwrap_or(0) > 0, "{who}: {v}");
        let port_errors = v["configs"].as_array().into_iter().flatten().find(|c| c["value"]["name"] == "database.port");
        assert!(
            port_errors.is_some_and(|c| !c["value"]["errors"].as_array().unwrap().is_empty()),
            "{who} names database.port"
        );
    }

    let _ = std::fs::read_to_string(&pgo.log);
    assert!(
        unexpected.is_empty(),
        "{} differences from Kafka Connect not listed as intended:\n{}",
        unexpected.len(),
        unexpected.join("\n")
    );
    drop(pgo);
    drop(reference);
    let sql = env.sql().await;
    for (slot, _) in &s.own {
        let _ = sql.execute("SELECT pg_drop_replication_slot($1)", &[slot]).await;
    }
}
