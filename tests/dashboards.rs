//! Kafka Connect + Debezium dashboards and alerts, unchanged, on pgoutbox. A real Prometheus scrapes
//! a `pgoutbox connect` worker (distributed mode, one member, as a KafkaConnect with one replica),
//! labelled as Strimzi's PodMonitor labels a KafkaConnect pod, and a `pgoutbox run`. It then
//! evaluates every PromQL query of Debezium's Grafana dashboard, of Strimzi's Kafka Connect
//! dashboard and of Strimzi's Connect alert rules (tests/fixtures/dashboard-queries.tsv, with the
//! sources). Every query must be answered, except those that read JVM or container series only,
//! and those that Connect answers empty as well. Both /metrics bodies must pass
//! `promtool check metrics` with exactly the findings that docs/prometheus/promtool-warnings.txt
//! lists.
//!
//! The worker runs three connectors, so that the state panels have something to show: `orders`
//! snapshots five rows and then streams a steady insert load, `paused` is paused, and `failing`
//! names a database that does not exist. PostgreSQL refuses that connection with SQLSTATE 3D000,
//! a definite error, so the task ends FAILED (REST reports the connector itself RUNNING, as Connect
//! does when only a task fails).

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::*;

/// The labels Strimzi's PodMonitor (`kafka-resources-metrics`) and Prometheus Operator give a
/// KafkaConnect pod's series. The Strimzi dashboard and alerts select and group by them.
const CLUSTER: &str = "pgoutbox";
const NAMESPACE: &str = "pgoutbox";
const POD: &str = "pgoutbox-connect-0";

/// The Strimzi alerts need five minutes of `for:` to fire, so only their expressions are evaluated.
/// `rate(...[5m])` needs two points: 15 scrapes at 1 s give it more than enough.
const SCRAPES: f64 = 15.0;
const WORKLOAD: Duration = Duration::from_secs(15);

const INSTALL_HINT: &str = "; scripts/install.sh installs it (Debian's prometheus package)";

/// A GET to Prometheus. It is HTTP/1.0 because Go answers HTTP/1.1 with chunked bodies once they
/// pass 2 KiB, and this reader does not undo chunking.
fn prometheus_get(addr: &str, path: &str) -> Option<(u16, String)> {
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    s.write_all(format!("GET {path} HTTP/1.0\r\nhost: {addr}\r\n\r\n").as_bytes()).ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let code = text.split_whitespace().nth(1)?.parse().ok()?;
    Some((code, text.split_once("\r\n\r\n").map_or("", |(_, b)| b).to_string()))
}

/// Percent-encodes everything but RFC 3986's unreserved characters, as a query parameter needs.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn free_addr() -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    format!("127.0.0.1:{port}")
}

/// Waits until `name`'s task reports `state`; a timeout shows the last status.
fn wait_task(addr: &str, name: &str, state: &str) {
    let start = Instant::now();
    loop {
        let (code, v) = call(addr, "GET", &format!("/connectors/{name}/status"), None);
        if code == 200 && v["tasks"][0]["state"] == state {
            return;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "{name}'s task never reached {state}: {code} {v}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A child process killed when the test ends, however it ends.
struct Process {
    child: Option<Child>,
    log: PathBuf,
}

impl Process {
    /// Starts `command` with its stderr in `log`; `hint` says what to do when it cannot start.
    fn spawn(mut command: Command, log: PathBuf, hint: &str) -> Process {
        let out = std::fs::File::create(&log).unwrap();
        let child = command
            .stdout(Stdio::null())
            .stderr(out)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {command:?}: {e}{hint}"));
        Process { child: Some(child), log }
    }

    /// SIGTERM, then a bounded wait; no assertion, shutting down is not what this test checks.
    fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            unsafe_sigterm(c.id());
            if wait_exit(&mut c, Duration::from_secs(30)).is_none() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A distributed worker in `dir`, listening on `addr`, alone in its group: Strimzi runs Connect in
/// distributed mode only, and the group's metrics (rebalances, assignments, the consumers of the
/// config, offset and status topics) exist only there, as in Connect.
fn start_worker(dir: &Path, broker: &str, addr: &str) -> Process {
    let group = unique("pgoutbox-dashboards");
    std::fs::write(dir.join("worker.properties"), worker_properties(broker, addr, &group, "")).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_pgoutbox"));
    command.args(["connect", "--worker"]).arg(dir.join("worker.properties"));
    Process::spawn(command, dir.join("worker.log"), "")
}

/// Prometheus on `addr`, scraping the worker's REST port (`connect`) and the relay (`run`) every
/// second, with its storage in `dir`.
fn start_prometheus(dir: &Path, addr: &str, connect: &str, run: &str) -> Process {
    let config = format!(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
         scrape_configs:\n\
         \x20 - job_name: connect\n    static_configs:\n      - targets: [\"{connect}\"]\n        labels:\n\
         \x20         strimzi_io_kind: KafkaConnect\n          strimzi_io_cluster: {CLUSTER}\n\
         \x20         namespace: {NAMESPACE}\n          kubernetes_pod_name: {POD}\n          pod: {POD}\n\
         \x20 - job_name: run\n    static_configs:\n      - targets: [\"{run}\"]\n"
    );
    std::fs::write(dir.join("prometheus.yml"), config).unwrap();
    let mut command = Command::new("prometheus");
    command
        .arg(format!("--config.file={}", dir.join("prometheus.yml").display()))
        .arg(format!("--storage.tsdb.path={}", dir.join("tsdb").display()))
        .arg(format!("--web.listen-address={addr}"))
        .arg("--log.level=warn");
    Process::spawn(command, dir.join("prometheus.log"), INSTALL_HINT)
}

/// The body of `path` on `addr`'s Prometheus API (`data`), or Prometheus' error.
fn api(prometheus: &str, path: &str) -> Result<Value, String> {
    let (code, body) = prometheus_get(prometheus, path).ok_or("Prometheus did not answer")?;
    let v: Value = serde_json::from_str(&body).map_err(|e| format!("{code} {e}: {body}"))?;
    if v["status"] != "success" {
        return Err(format!("{code} {}: {}", v["errorType"], v["error"]));
    }
    Ok(v["data"].clone())
}

/// The number of series an instant query answers (a scalar counts as one).
fn series(prometheus: &str, expr: &str) -> Result<usize, String> {
    let data = api(prometheus, &format!("/api/v1/query?query={}", encode(expr)))?;
    match data["resultType"].as_str() {
        Some("vector" | "matrix") => Ok(data["result"].as_array().map_or(0, Vec::len)),
        Some("scalar" | "string") => Ok(1),
        other => Err(format!("unexpected resultType {other:?}")),
    }
}

/// The first value an instant query answers, if any.
fn value(prometheus: &str, expr: &str) -> Option<f64> {
    let data = api(prometheus, &format!("/api/v1/query?query={}", encode(expr))).ok()?;
    data["result"][0]["value"][1].as_str()?.parse().ok()
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Expectation {
    /// pgoutbox must answer it with at least one series.
    Data,
    /// It reads JVM or container series only, which pgoutbox does not have.
    Jvm,
    /// Connect + Debezium answer it empty in this workload too; the reason.
    None(String),
}

struct Query {
    dashboard: String,
    panel: String,
    expectation: Expectation,
    expr: String,
}

/// The fixture's queries; a malformed line fails the test, naming the line.
fn queries() -> Vec<Query> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/dashboard-queries.tsv");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.starts_with('#') && !l.trim().is_empty()) {
        let fields: Vec<&str> = line.split('\t').collect();
        let [dashboard, panel, expectation, expr] = fields[..] else {
            panic!("{}:{}: want 4 tab-separated fields, got {}", path.display(), n + 1, fields.len())
        };
        assert!(
            ["debezium", "strimzi-connect", "strimzi-alerts"].contains(&dashboard),
            "{}:{}: unknown dashboard {dashboard:?}",
            path.display(),
            n + 1
        );
        let expectation = match expectation {
            "data" => Expectation::Data,
            "jvm" => Expectation::Jvm,
            e => match e.strip_prefix("none: ") {
                Some(reason) if !reason.trim().is_empty() => Expectation::None(reason.to_string()),
                _ => panic!("{}:{}: expectation {e:?} is not data, jvm or `none: <reason>`", path.display(), n + 1),
            },
        };
        out.push(Query { dashboard: dashboard.into(), panel: panel.into(), expectation, expr: expr.into() });
    }
    // Every query of the three sources, none lost in an edit.
    let mut per_dashboard: BTreeMap<&str, usize> = BTreeMap::new();
    for q in &out {
        *per_dashboard.entry(q.dashboard.as_str()).or_default() += 1;
    }
    let expected = BTreeMap::from([("debezium", 19), ("strimzi-alerts", 3), ("strimzi-connect", 25)]);
    assert_eq!(per_dashboard, expected, "queries per dashboard in {}", path.display());
    out
}

/// `expr` with Grafana's template variables set as the dashboards' variable queries would pick
/// them for this test's worker.
fn substitute(expr: &str, connector_name: &str) -> String {
    let vars = [
        ("$connector_type", "postgres"),
        ("$connector_name", connector_name),
        ("$kubernetes_namespace", NAMESPACE),
        ("$strimzi_connect_cluster_name", CLUSTER),
    ];
    let out = vars.iter().fold(expr.to_string(), |e, (var, v)| e.replace(var, v));
    assert!(!out.contains('$'), "a template variable the test does not set: {expr}");
    out
}

/// Whether the series `expr` reads exist. `absent(...)` inverts it: it answers one series exactly
/// when what it reads is missing (ConnectContainersDown, without cAdvisor's container_* series).
fn answered(expr: &str, series: usize) -> bool {
    if expr.starts_with("absent(") {
        series == 0
    } else {
        series > 0
    }
}

/// `promtool check metrics` on `body`: its findings (`<metric> <problem>`), or why it could not lint.
fn promtool_findings(body: &str) -> Result<BTreeSet<String>, String> {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start promtool: {e}{INSTALL_HINT}"));
    // promtool reads all of its input before it writes: no deadlock on the pipes.
    let written = child.stdin.take().expect("stdin is piped").write_all(body.as_bytes());
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    written.map_err(|e| format!("writing to promtool: {e}"))?;
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    // 0: clean; 3: lint findings; anything else (1: the body does not parse) is a failure.
    if !matches!(out.status.code(), Some(0 | 3))
        || text.contains("error while linting")
        || text.contains("parsing error")
    {
        return Err(format!("promtool exited with {:?}: {text}", out.status.code()));
    }
    Ok(text.lines().map(str::trim).filter(|l| !l.is_empty()).map(String::from).collect())
}

/// The lines of docs/prometheus/promtool-warnings.txt, comments and blank lines left out.
fn accepted_findings() -> BTreeSet<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/prometheus/promtool-warnings.txt");
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .collect()
}

/// The connector `name` on `o`'s outbox with `topic.prefix={name}server`, plus `extra` keys, as a
/// REST create body (the worker's `bootstrap.servers` left out).
fn connector(o: &Outbox, name: &str, extra: &[&str]) -> Value {
    let (name_key, prefix) = (format!("name={name}"), format!("topic.prefix={name}server"));
    let mut keys = vec![name_key.as_str(), prefix.as_str()];
    keys.extend_from_slice(extra);
    let config: serde_json::Map<String, Value> = o
        .config(&keys)
        .lines()
        .filter_map(|l| l.split_once('='))
        .filter(|(k, _)| *k != "bootstrap.servers")
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    json!({"name": name, "config": config})
}

/// Evaluates every query; prints the table and the per-dashboard tallies; returns what failed.
fn evaluate(prometheus: &str, connector_name: &str) -> Vec<String> {
    let mut failures = Vec::new();
    // Per dashboard, in the fixture's order: answered, queries, JVM-only queries.
    let mut tally: Vec<(String, usize, usize, usize)> = Vec::new();
    println!("\n{:<15}  {:<44}  {:<6}  {:>6}  query", "dashboard", "panel", "expect", "series");
    for q in queries() {
        let expr = substitute(&q.expr, connector_name);
        let result = series(prometheus, &expr);
        let got = result.as_ref().is_ok_and(|n| answered(&expr, *n));
        let (label, ok) = match &q.expectation {
            Expectation::Data => ("data", got),
            Expectation::Jvm => ("jvm", result.is_ok() && !got),
            // Not asserted: the reason says why Connect answers it empty; pgoutbox may or may not.
            Expectation::None(_) => ("none", result.is_ok()),
        };
        let shown = result.as_ref().map_or_else(|_| "error".to_string(), |n| n.to_string());
        let mark = if ok { "" } else { "FAIL " };
        println!("{:<15}  {:<44}  {label:<6}  {shown:>6}  {mark}{expr}", q.dashboard, q.panel);
        if !ok {
            let why = match &result {
                Err(e) => format!("error: {e}"),
                Ok(_) if q.expectation == Expectation::Jvm => "answered, but it is labelled jvm".into(),
                Ok(_) => "no series".into(),
            };
            failures.push(format!("{} / {} [{label}]: {why}\n    {expr}", q.dashboard, q.panel));
        }
        if tally.last().map(|t| &t.0) != Some(&q.dashboard) {
            tally.push((q.dashboard.clone(), 0, 0, 0));
        }
        let t = tally.last_mut().expect("pushed above");
        t.1 += usize::from(got);
        t.2 += 1;
        t.3 += usize::from(q.expectation == Expectation::Jvm);
    }
    for (dashboard, answered, total, jvm) in tally {
        println!("{dashboard}: answered {answered} of {total} queries ({jvm} read JVM/container series only)");
    }
    failures
}

/// Each scrape job's health as Prometheus last saw it; a failing scrape makes every query empty,
/// so it is reported first, with Prometheus' reason.
fn target_failures(prometheus: &str) -> Vec<String> {
    let targets = match api(prometheus, "/api/v1/targets") {
        Ok(t) => t,
        Err(e) => return vec![format!("GET /api/v1/targets: {e}")],
    };
    let mut failures = Vec::new();
    for t in targets["activeTargets"].as_array().into_iter().flatten() {
        let (job, health) = (&t["labels"]["job"], &t["health"]);
        println!("scrape job {job}: {health} {}", t["lastError"]);
        if health != "up" {
            failures.push(format!("scrape job {job} is {health}: {}", t["lastError"]));
        }
    }
    failures
}

/// promtool's findings on both /metrics bodies (fetched without an Accept header, so in the
/// Prometheus text format) against the accepted list.
fn lint_failures(endpoints: &[(&str, &str)]) -> Vec<String> {
    let mut failures = Vec::new();
    let mut found = BTreeSet::new();
    for (what, addr) in endpoints {
        match http_get(addr, "/metrics") {
            Some((200, body)) => match promtool_findings(&body) {
                Ok(f) => found.extend(f),
                Err(e) => failures.push(format!("{what} /metrics: {e}")),
            },
            other => failures.push(format!("{what} /metrics: {other:?}")),
        }
    }
    let accepted = accepted_findings();
    let unexpected: Vec<&String> = found.difference(&accepted).collect();
    let missing: Vec<&String> = accepted.difference(&found).collect();
    if !unexpected.is_empty() || !missing.is_empty() {
        failures.push(format!(
            "promtool's findings differ from docs/prometheus/promtool-warnings.txt\n  \
             not listed there:\n    {}\n  listed but not found:\n    {}",
            unexpected.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n    "),
            missing.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n    ")
        ));
    }
    failures
}

/// On the worker at `rest`: `orders` on `a`, snapshotted and streaming; `paused` on `b`, paused;
/// `failing`, whose database does not exist, with its task FAILED.
async fn three_connectors(rest: &str, worker: &Process, a: &Outbox, b: &Outbox) {
    wait_for("the worker's REST API", Duration::from_secs(30), || std::net::TcpStream::connect(rest).is_ok());
    let missing_db = unique("no_such_db");
    for body in [
        // A new slot with snapshot.mode=initial: the rows already in the table are snapshotted.
        connector(a, "orders", &["snapshot.mode=initial"]),
        connector(b, "paused", &[]),
        connector(b, "failing", &[&format!("database.dbname={missing_db}"), &format!("slot.name={missing_db}")]),
    ] {
        let (code, created) = call(rest, "POST", "/connectors", Some(&body));
        assert_eq!(code, 201, "{created}\n{}", worker.log_text());
    }
    wait_task(rest, "orders", "RUNNING");
    // The slot is created once the broker has acknowledged the whole snapshot (src/pipeline/snapshot.rs).
    wait_for_async("orders' snapshot", Duration::from_secs(30), || async { a.confirmed_flush().await.is_some() }).await;
    wait_task(rest, "paused", "RUNNING");
    // RUNNING is reported when the task starts, as Connect does; the pause waits until it streams,
    // so its start counts as a success.
    let connected = "debezium_metrics_Connected{context=\"streaming\",name=\"pausedserver\",plugin=\"postgres\"} 1";
    wait_for("paused streams", Duration::from_secs(30), || {
        http_get(rest, "/metrics").is_some_and(|(_, body)| body.contains(connected))
    });
    assert_eq!(call(rest, "PUT", "/connectors/paused/pause", None).0, 202);
    wait_task(rest, "paused", "PAUSED");
    wait_task(rest, "failing", "FAILED");
}

/// What the series say, not only that they exist: the workload's own figures, as Prometheus read
/// them (the worker started three tasks, one failed; orders snapshotted its five rows and streamed
/// the load; the paused connector's pause shows in its ratio).
/// A query, what its value must satisfy, and that condition in words.
type Check = (&'static str, fn(f64) -> bool, &'static str);

fn value_failures(prometheus: &str) -> Vec<String> {
    let checks: [Check; 9] = [
        ("kafka_connect_worker_task_startup_attempts_total{job=\"connect\"}", |v| v >= 3.0, ">= 3"),
        ("kafka_connect_worker_task_startup_success_total{job=\"connect\"}", |v| v >= 2.0, ">= 2"),
        ("kafka_connect_worker_task_startup_failure_total{job=\"connect\"}", |v| v >= 1.0, ">= 1"),
        ("debezium_metrics_SnapshotCompleted{name=\"ordersserver\"}", |v| v == 1.0, "1"),
        ("debezium_metrics_RowsScanned{name=\"ordersserver\"}", |v| v == 5.0, "5"),
        ("kafka_connect_source_task_source_record_write_total{connector=\"orders\"}", |v| v >= 50.0, ">= 50"),
        ("kafka_producer_record_send_total{clientid=\"connector-producer-orders-0\"}", |v| v >= 50.0, ">= 50"),
        ("kafka_connect_connector_task_running_ratio{connector=\"orders\"}", |v| v > 0.5 && v <= 1.0, "in (0.5, 1]"),
        ("kafka_connect_connector_task_pause_ratio{connector=\"paused\"}", |v| v > 0.0 && v < 1.0, "in (0, 1)"),
    ];
    checks
        .iter()
        .filter_map(|(query, ok, expected)| match value(prometheus, query) {
            Some(v) if ok(v) => None,
            other => Some(format!("{query} = {other:?}, expected {expected}")),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn connect_dashboards_and_alerts_read_pgoutbox_metrics() {
    let dir = std::env::temp_dir().join(unique("pgoutbox-dashboards"));
    std::fs::create_dir_all(&dir).unwrap();
    let (rest, run_metrics, prometheus_addr) = (free_addr(), free_addr(), free_addr());
    // Prometheus first: it scrapes the whole run, start-up included, so the 15 scrapes are there
    // when the workload ends.
    let mut prometheus = start_prometheus(&dir, &prometheus_addr, &rest, &run_metrics);

    let (a, b, r) = (Outbox::new("dasha").await, Outbox::new("dashb").await, Outbox::new("dashr").await);
    a.create_topics(&["Order"], 1).await;
    r.create_topics(&["Order"], 1).await;
    let sql = a.env.sql().await;
    for n in 0..5 {
        sql.batch_execute(&a.insert_sql("Order", &format!("before-{n}"), Some("{}"))).await.unwrap();
    }
    let mut worker = start_worker(&dir, &a.env.broker, &rest);
    let relay_config = r.config(&["name=relay", "topic.prefix=relayserver"]);
    let mut relay = Relay::start_with(&relay_config, &["--metrics-address", &run_metrics]);
    three_connectors(&rest, &worker, &a, &b).await;
    relay.wait_for_log("streaming", Duration::from_secs(30));
    let relay_sql = r.env.sql().await;
    for n in 0..3 {
        relay_sql.batch_execute(&r.insert_sql("Order", &format!("run-{n}"), Some("{}"))).await.unwrap();
    }
    wait_for("Prometheus ready", Duration::from_secs(30), || {
        prometheus_get(&prometheus_addr, "/-/ready").is_some_and(|(code, _)| code == 200)
    });

    // A steady insert load on orders, so that rates and counters move between scrapes.
    let start = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    for n in 0.. {
        tick.tick().await;
        if start.elapsed() >= WORKLOAD {
            break;
        }
        sql.batch_execute(&a.insert_sql("Order", &format!("load-{n}"), Some("{}"))).await.unwrap();
    }
    for job in ["connect", "run"] {
        let scrapes = format!("count_over_time(up{{job=\"{job}\"}}[5m])");
        wait_for(&format!("{SCRAPES} scrapes of {job}"), Duration::from_secs(30), || {
            value(&prometheus_addr, &scrapes).is_some_and(|n| n >= SCRAPES)
        });
    }

    let mut failures = target_failures(&prometheus_addr);
    failures.extend(evaluate(&prometheus_addr, "ordersserver"));
    failures.extend(lint_failures(&[("the worker's", rest.as_str()), ("pgoutbox run's", run_metrics.as_str())]));
    failures.extend(value_failures(&prometheus_addr));

    worker.stop();
    relay.stop();
    prometheus.stop();
    for o in [&a, &b, &r] {
        o.drop_slot().await;
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(failures.is_empty(), "{} failure(s):\n{}", failures.len(), failures.join("\n"));
}
