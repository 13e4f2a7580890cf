//! Processes a fault scenario controls: the relay (killed, restarted, its memory sampled), and
//! PostgreSQL and broker instances of the scenario's own (stopped and started again on the same port).
//!
//! PostgreSQL and Apache Kafka go through `scripts/services.sh`, the same code CI uses.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_postgres::{Client, NoTls};

use super::bed::Bed;
use crate::support::unique;

/// `scripts/` of this repository (`PGOUTBOX_TEST_SCRIPTS` when scripts/test.sh runs the tests).
pub fn scripts_dir() -> PathBuf {
    std::env::var("PGOUTBOX_TEST_SCRIPTS")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts")))
}

/// Runs `scripts/services.sh ARGS`, off the async workers (starting PostgreSQL takes seconds).
pub fn services(args: &[&str]) {
    services_with(&[], args);
}

/// [`services`] with extra environment variables (`PG_BINDIR` for another PostgreSQL major).
pub fn services_with(env: &[(&str, &str)], args: &[&str]) {
    let run = || {
        let out = Command::new("bash")
            .arg(scripts_dir().join("services.sh"))
            .args(args)
            .envs(env.iter().copied())
            .output()
            .expect("run scripts/services.sh");
        assert!(
            out.status.success(),
            "services.sh {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    };
    match tokio::runtime::Handle::try_current() {
        Ok(_) => tokio::task::block_in_place(run),
        Err(_) => run(),
    }
}

/// A port nobody listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("bind a free port").port()
}

/// A fresh directory under /tmp that the `postgres` user can enter (its clusters live inside).
pub fn scratch_dir(name: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let dir = PathBuf::from("/tmp").join(format!("pgoutbox-faults-{}", unique(name)));
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("chmod scratch dir");
    dir
}

pub async fn connect_sql(port: u16) -> Result<Client, tokio_postgres::Error> {
    let mut c = tokio_postgres::Config::new();
    c.host("127.0.0.1").port(port).user("postgres").dbname("postgres").connect_timeout(Duration::from_secs(5));
    let (client, conn) = c.connect(NoTls).await?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(client)
}

/// A PostgreSQL 15 cluster of a scenario's own, removed on drop.
pub struct PgCluster {
    pub dir: PathBuf,
    pub port: u16,
}

impl PgCluster {
    pub fn start(name: &str) -> PgCluster {
        let dir = scratch_dir(name);
        let port = free_port();
        services(&["pg-start", &dir.join("pg").to_string_lossy(), &port.to_string()]);
        PgCluster { dir, port }
    }

    /// `pg_ctl stop -m MODE` (`fast` or `immediate`).
    pub fn stop(&self, mode: &str) {
        services(&["pg-stop", &self.dir.join("pg").to_string_lossy(), mode]);
    }

    /// Starts the same cluster again, on the same port.
    pub fn start_again(&self) {
        services(&["pg-start", &self.dir.join("pg").to_string_lossy(), &self.port.to_string()]);
    }

    pub async fn sql(&self) -> Client {
        connect_sql(self.port).await.expect("connect to the scenario's PostgreSQL")
    }

    /// A short wal_sender_timeout makes a dead relay connection visible to the server, and the
    /// relay's dead-peer timeout (wal_sender_timeout + status interval) short.
    pub async fn set_wal_sender_timeout(&self, value: &str) {
        let c = self.sql().await;
        // Two statements: ALTER SYSTEM refuses to run in the implicit transaction of a batch.
        c.batch_execute(&format!("ALTER SYSTEM SET wal_sender_timeout = '{value}'")).await.unwrap();
        c.batch_execute("SELECT pg_reload_conf()").await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let now: String = c.query_one("SHOW wal_sender_timeout", &[]).await.unwrap().get(0);
            if now == value || Instant::now() > deadline {
                assert_eq!(now, value, "wal_sender_timeout did not take effect");
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(scripts_dir().join("services.sh"))
            .args(["pg-stop", &self.dir.join("pg").to_string_lossy(), "immediate"])
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// An Apache Kafka cluster of a scenario's own (KRaft, combined broker+controller nodes, through
/// `scripts/services.sh`), stopped and removed on drop.
pub struct Broker {
    pub dir: PathBuf,
    /// Its PLAINTEXT bootstrap list (a proxy's port, where started behind one).
    addr: String,
    pub nodes: usize,
}

impl Broker {
    /// One node; started again with its data after [`Broker::crash`].
    pub fn start(name: &str) -> Broker {
        Broker::start_nodes(name, 1)
    }

    /// NODES nodes (3: replication factor 3, min.insync.replicas=2).
    pub fn start_nodes(name: &str, nodes: usize) -> Broker {
        Broker::start_with(name, nodes, &[])
    }

    /// One node listening on `port` but advertising `advertised` (a proxy in front of it).
    pub fn start_behind(name: &str, port: u16, advertised: u16) -> Broker {
        Broker::start_with(
            name,
            1,
            &[("KAFKA_PLAIN_PORT", &port.to_string()), ("KAFKA_ADVERTISED_PORT", &advertised.to_string())],
        )
    }

    fn start_with(name: &str, nodes: usize, env: &[(&str, &str)]) -> Broker {
        let dir = scratch_dir(name).join("kafka");
        services_with(env, &["kafka-start", &dir.to_string_lossy(), &nodes.to_string()]);
        let text = std::fs::read_to_string(dir.join("env")).expect("the cluster's env file");
        let addr = text
            .lines()
            .find_map(|l| l.strip_prefix("PLAINTEXT="))
            .expect("PLAINTEXT in the cluster's env file")
            .to_string();
        Broker { dir, addr, nodes }
    }

    /// A value of the cluster's env file (a listener's bootstrap list, a SASL user's password).
    pub fn env(&self, key: &str) -> String {
        let text = std::fs::read_to_string(self.dir.join("env")).expect("the cluster's env file");
        let prefix = format!("{key}=");
        text.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("{key} in the cluster's env file"))
            .to_string()
    }

    /// The bootstrap address clients use.
    pub fn addr(&self) -> String {
        self.addr.clone()
    }

    /// Kills every node at once (SIGKILL), as a crash or a lost machine would.
    pub fn crash(&self) {
        services(&["kafka-stop", &self.dir.to_string_lossy(), "kill"]);
    }

    /// Starts every node again, with its data; returns when each listens.
    pub fn start_again(&self) {
        services(&["kafka-start", &self.dir.to_string_lossy()]);
    }

    /// Stops node ID (1-based): `kill` is SIGKILL, `term` a clean shutdown.
    pub fn stop_node(&self, id: usize, how: &str) {
        services(&["kafka-node-stop", &self.dir.to_string_lossy(), &id.to_string(), how]);
    }

    /// Starts node ID again and waits until it listens.
    pub fn start_node(&self, id: usize) {
        services(&["kafka-node-start", &self.dir.to_string_lossy(), &id.to_string()]);
    }

    /// Moves `topic`'s partition `partition` onto `replicas` (broker ids, the first preferred as
    /// leader) with Kafka's own reassignment tool, and waits until the tool reports it complete.
    pub fn reassign(&self, topic: &str, partition: i32, replicas: &[i32]) {
        let plan = self.dir.join(format!("reassign-{topic}-{partition}.json"));
        let json = serde_json::json!({"version": 1, "partitions": [{"topic": topic, "partition": partition, "replicas": replicas}]});
        std::fs::write(&plan, json.to_string()).expect("write the reassignment plan");
        let class = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand";
        let (dir, plan) = (self.dir.to_string_lossy().into_owned(), plan.to_string_lossy().into_owned());
        let base = ["kafka-tool", &dir, class, "--bootstrap-server", &self.addr, "--reassignment-json-file", &plan];
        services(&[&base[..], &["--execute"]].concat());
        let start = Instant::now();
        loop {
            let out = Command::new("bash")
                .arg(scripts_dir().join("services.sh"))
                .args(base)
                .arg("--verify")
                .output()
                .expect("run the reassignment tool");
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            if out.status.success() && text.contains("is completed") && !text.contains("still in progress") {
                return;
            }
            assert!(start.elapsed() < Duration::from_secs(60), "the reassignment did not complete:\n{text}");
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(scripts_dir().join("services.sh"))
            .args(["kafka-stop", &self.dir.to_string_lossy(), "kill"])
            .output();
        let scratch = self.dir.parent().map(Path::to_path_buf).unwrap_or_else(|| self.dir.clone());
        if std::thread::panicking() {
            eprintln!("broker logs kept under {}", self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&scratch);
        }
    }
}

/// A `pgoutbox run` child process whose pid the scenario needs (signals, /proc). Its stderr (the
/// log) is appended to one file across restarts.
pub struct RelayProc {
    child: Option<Child>,
    pub dir: PathBuf,
    pub log: PathBuf,
    config: PathBuf,
    /// Environment of every start (test knobs).
    env: Vec<(String, String)>,
}

impl RelayProc {
    pub fn start(name: &str, config: &str) -> RelayProc {
        Self::start_with_env(name, config, &[])
    }

    pub fn start_with_env(name: &str, config: &str, env: &[(&str, &str)]) -> RelayProc {
        let dir = std::env::temp_dir().join(unique(&format!("relay_{name}")));
        std::fs::create_dir_all(&dir).unwrap();
        let cfg = dir.join("connector.properties");
        std::fs::File::create(&cfg).unwrap().write_all(config.as_bytes()).unwrap();
        let env = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let mut r = RelayProc { child: None, log: dir.join("relay.log"), dir, config: cfg, env };
        r.restart();
        r
    }

    /// Starts it (again), with the same config and log.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "relay still running");
        let out = std::fs::OpenOptions::new().create(true).append(true).open(&self.log).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_pgoutbox"))
            .args(["run", "--config"])
            .arg(&self.config)
            .env("RUST_LOG", std::env::var("PGOUTBOX_TEST_LOG").unwrap_or_else(|_| "info".into()))
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .stderr(out)
            .spawn()
            .expect("spawn pgoutbox");
        self.child = Some(child);
    }

    pub fn config_path(&self) -> &std::path::Path {
        &self.config
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Whether it is still running (`false` once it exited on its own).
    pub fn running(&mut self) -> bool {
        self.child.as_mut().is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// SIGKILL, reaped.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM, then waits (bounded) for the exit.
    pub fn stop(&mut self) -> ExitStatus {
        let mut c = self.child.take().expect("relay running");
        crate::support::unsafe_sigterm(c.id());
        crate::support::wait_exit(&mut c, Duration::from_secs(45)).unwrap_or_else(|| {
            let _ = c.kill();
            panic!("relay did not stop within 45s after SIGTERM; log tail:\n{}", self.log_tail(40))
        })
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn log_tail(&self, lines: usize) -> String {
        let text = self.log_text();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    pub fn count(&self, needle: &str) -> usize {
        self.log_text().matches(needle).count()
    }

    /// Waits until the log holds `needle` at least `n` times; returns how long that took.
    pub async fn wait_count(&self, needle: &str, n: usize, deadline: Duration) -> Duration {
        let start = Instant::now();
        while self.count(needle) < n {
            assert!(
                start.elapsed() < deadline,
                "timed out after {deadline:?} waiting for {n}x {needle:?} in the relay log; tail:\n{}",
                self.log_tail(30)
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        start.elapsed()
    }
}

impl Drop for RelayProc {
    fn drop(&mut self) {
        self.kill9();
        // A failed scenario keeps the log for a look; a passed one leaves nothing behind.
        if std::thread::panicking() {
            eprintln!("relay log kept at {}", self.log.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// The relay's log line when a session starts streaming.
pub const STREAMING: &str = " streaming slot=";

/// The relay's log lines around the initial snapshot: a kill between them lands mid-snapshot.
pub const SNAPSHOT_STARTED: &str = "snapshot: created staging slot";
pub const SNAPSHOT_DONE: &str = "created replication slot after the snapshot";
/// The log line of a relay that found the slot in use.
pub const STANDING_BY: &str = "standing by";

/// Whether the log ends inside an initial snapshot (the real slot does not exist yet).
pub fn mid_initial_snapshot(log: &str) -> bool {
    log.rfind(SNAPSHOT_STARTED).is_some_and(|started| !matches!(log.rfind(SNAPSHOT_DONE), Some(done) if done > started))
}

/// Starts two relays at once on `bed`; returns them as (active, standby) once one streams and the
/// other stands by, or what went wrong.
pub async fn start_pair_together(bed: &Bed) -> Result<(RelayProc, RelayProc), String> {
    let config = bed.config(&[]);
    let mut relays = [RelayProc::start("relay_a", &config), RelayProc::start("relay_b", &config)];
    let start = Instant::now();
    let active = loop {
        for r in relays.iter_mut() {
            if !r.running() {
                return Err(format!("a relay exited; its log tail:\n{}", r.log_tail(8)));
            }
        }
        let streams: Vec<bool> = relays.iter().map(|r| r.count(STREAMING) > 0).collect();
        let stands_by: Vec<bool> = relays.iter().map(|r| r.count(STANDING_BY) > 0).collect();
        if streams[0] && stands_by[1] {
            break 0;
        }
        if streams[1] && stands_by[0] {
            break 1;
        }
        if start.elapsed() > Duration::from_secs(60) {
            return Err(format!(
                "no relay streams with the other standing by; logs:\n{}\n---\n{}",
                relays[0].log_tail(10),
                relays[1].log_tail(10)
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let [a, b] = relays;
    Ok(if active == 0 { (a, b) } else { (b, a) })
}

/// A field of /proc/PID/status in kB (`VmRSS`, `VmHWM`).
pub fn status_kb(pid: u32, field: &str) -> Option<u64> {
    let text = std::fs::read_to_string(Path::new("/proc").join(pid.to_string()).join("status")).ok()?;
    let line = text.lines().find(|l| l.starts_with(&format!("{field}:")))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Samples a process's resident memory every 100 ms on a thread of its own, keeping the peak (the
/// larger of the sampled VmRSS and the kernel's own high-water mark VmHWM).
pub struct RssWatch {
    peak_kb: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RssWatch {
    pub fn start(pid: u32) -> RssWatch {
        let peak_kb = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (p, s) = (peak_kb.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                let Some(rss) = status_kb(pid, "VmRSS") else { break };
                let hwm = status_kb(pid, "VmHWM").unwrap_or(0);
                p.fetch_max(rss.max(hwm), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        RssWatch { peak_kb, stop, thread: Some(thread) }
    }

    pub fn peak_mb(&self) -> f64 {
        self.peak_kb.load(Ordering::Relaxed) as f64 / 1024.0
    }
}

impl Drop for RssWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Runs the binary with `args` to completion (bounded), returning stdout and stderr together.
pub fn run_to_end(args: &[&str], rust_log: &str, stop_after: Option<Duration>) -> (Option<i32>, String) {
    let dir = std::env::temp_dir().join(unique("pgoutbox_out"));
    std::fs::create_dir_all(&dir).unwrap();
    let (out, err) = (dir.join("stdout"), dir.join("stderr"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_pgoutbox"))
        .args(args)
        .env("RUST_LOG", rust_log)
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .expect("spawn pgoutbox");
    let start = Instant::now();
    let mut terminated = false;
    let status = loop {
        if let Ok(Some(s)) = child.try_wait() {
            break s;
        }
        if !terminated && stop_after.is_some_and(|d| start.elapsed() > d) {
            let _ = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
            terminated = true;
        }
        if start.elapsed() > stop_after.unwrap_or(Duration::ZERO) + Duration::from_secs(40) {
            let _ = child.kill();
            break child.wait().unwrap();
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let text = format!(
        "{}{}",
        std::fs::read_to_string(&out).unwrap_or_default(),
        std::fs::read_to_string(&err).unwrap_or_default()
    );
    let _ = std::fs::remove_dir_all(&dir);
    (status.code(), text)
}
