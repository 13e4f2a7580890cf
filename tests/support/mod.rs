//! Shared helpers for the integration tests. They talk to a real PostgreSQL 15 and a real
//! Kafka-protocol broker (tansu) over sockets, started by `scripts/test.sh`, and run the real
//! `pgoutbox` binary as a child process. Every test gets its own table, publication, slot and topics,
//! so tests run in parallel.
#![allow(dead_code)]

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use pgoutbox::kafka::consume::{consume_all, ConsumedRecord};
use tokio_postgres::{Client, NoTls};

pub mod oauth;

pub struct Env {
    pub pg_host: String,
    pub pg_port: u16,
    pub broker: String,
}

impl Env {
    pub fn get() -> Env {
        let var = |k: &str| {
            std::env::var(k).unwrap_or_else(|_| {
                panic!("{k} is not set: run the integration tests through scripts/test.sh, which starts PostgreSQL and the broker")
            })
        };
        Env {
            pg_host: "127.0.0.1".into(),
            pg_port: var("PGOUTBOX_TEST_PG_PORT").parse().expect("PGOUTBOX_TEST_PG_PORT is a port"),
            broker: var("PGOUTBOX_TEST_BROKER"),
        }
    }

    pub async fn sql(&self) -> Client {
        self.sql_as("postgres", None).await
    }

    pub async fn sql_as(&self, user: &str, password: Option<&str>) -> Client {
        let mut c = tokio_postgres::Config::new();
        c.host(&self.pg_host).port(self.pg_port).user(user).dbname("postgres");
        if let Some(p) = password {
            c.password(p);
        }
        let (client, conn) = c.connect(NoTls).await.expect("connect to test PostgreSQL");
        tokio::spawn(async move {
            let _ = conn.await;
        });
        client
    }
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A name unique to this test run: lower-case, safe for tables, slots and topics.
pub fn unique(prefix: &str) -> String {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_micros() % 1_000_000_000;
    format!("{prefix}_{}_{t}_{n}", std::process::id())
}

/// One outbox table with its own publication, slot and aggregate-type namespace.
pub struct Outbox {
    pub env: Env,
    pub table: String,
    pub slot: String,
    pub publication: String,
    /// Prefix of this test's aggregate types, so its topics are its own.
    pub agg_prefix: String,
}

impl Outbox {
    pub async fn new(name: &str) -> Outbox {
        let env = Env::get();
        let u = unique(name);
        let o = Outbox {
            table: format!("outbox_{u}"),
            slot: format!("slot_{u}"),
            publication: format!("pub_{u}"),
            agg_prefix: format!("T{u}"),
            env,
        };
        o.env
            .sql()
            .await
            .batch_execute(&format!(
                "CREATE TABLE public.{t} (id uuid PRIMARY KEY, aggregatetype varchar(255) NOT NULL, aggregateid varchar(255) NOT NULL, \
                 type varchar(255) NOT NULL, payload jsonb, seq bigserial, created_at timestamptz NOT NULL DEFAULT now())",
                t = o.table
            ))
            .await
            .expect("create outbox table");
        o
    }

    pub fn agg(&self, kind: &str) -> String {
        format!("{}_{kind}", self.agg_prefix)
    }

    pub fn topic(&self, kind: &str) -> String {
        format!("outbox.event.{}", self.agg(kind))
    }

    /// The connector config for this outbox, plus `extra` lines.
    pub fn config(&self, extra: &[&str]) -> String {
        let mut c = format!(
            "name=test-connector\nconnector.class=io.debezium.connector.postgresql.PostgresConnector\n\
             database.hostname={}\ndatabase.port={}\ndatabase.user=postgres\ndatabase.dbname=postgres\n\
             database.sslmode=disable\ntopic.prefix=testserver\nplugin.name=pgoutput\nslot.name={}\n\
             publication.name={}\npublication.autocreate.mode=filtered\ntable.include.list=public.{}\n\
             transforms=outbox\ntransforms.outbox.type=io.debezium.transforms.outbox.EventRouter\n\
             bootstrap.servers={}\nstatus.update.interval.ms=500\n",
            self.env.pg_host, self.env.pg_port, self.slot, self.publication, self.table, self.env.broker
        );
        for e in extra {
            c.push_str(e);
            c.push('\n');
        }
        c
    }

    /// Inserts one event in its own statement; returns its id.
    pub fn insert_sql(&self, kind: &str, aggregate_id: &str, payload: Option<&str>) -> String {
        let payload = payload.map_or("NULL".to_string(), |p| format!("'{}'", p.replace('\'', "''")));
        format!(
            "INSERT INTO public.{} (id, aggregatetype, aggregateid, type, payload) VALUES (gen_random_uuid(), '{}', '{}', 'Created', {payload})",
            self.table,
            self.agg(kind),
            aggregate_id
        )
    }

    /// Every row still in the outbox, in commit order of insertion (`seq`).
    pub async fn rows(&self) -> Vec<Row> {
        self.env
            .sql()
            .await
            .query(
                &format!(
                    "SELECT id::text, aggregatetype, aggregateid, payload::text, seq FROM public.{} ORDER BY seq",
                    self.table
                ),
                &[],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| Row {
                id: r.get(0),
                aggregatetype: r.get(1),
                aggregateid: r.get(2),
                payload: r.get(3),
                seq: r.get(4),
            })
            .collect()
    }

    /// Rows of the outbox that match `filter` (an SQL condition).
    pub async fn count_where(&self, filter: &str) -> i64 {
        self.env
            .sql()
            .await
            .query_one(&format!("SELECT count(*) FROM public.{} WHERE {filter}", self.table), &[])
            .await
            .unwrap()
            .get(0)
    }

    pub async fn confirmed_flush(&self) -> Option<String> {
        self.env
            .sql()
            .await
            .query_opt("SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1", &[&self.slot])
            .await
            .unwrap()
            .and_then(|r| r.get(0))
    }

    pub async fn create_topics(&self, kinds: &[&str], partitions: i32) {
        let topics: Vec<String> = kinds.iter().map(|k| self.topic(k)).collect();
        create_topics(&self.env.broker, &topics, partitions).await;
    }

    pub async fn drop_slot(&self) {
        let _ = self.env.sql().await.execute("SELECT pg_drop_replication_slot($1)", &[&self.slot]).await;
    }
}

#[derive(Debug, Clone)]
pub struct Row {
    pub id: String,
    pub aggregatetype: String,
    pub aggregateid: String,
    pub payload: Option<String>,
    pub seq: i64,
}

/// Sets one of `topic`'s configs (e.g. `max.message.bytes`).
pub async fn set_topic_config(broker: &str, topic: &str, key: &str, value: &str) {
    use rdkafka::admin::{AdminClient, AdminOptions, AlterConfig, ResourceSpecifier};
    let admin: AdminClient<rdkafka::client::DefaultClientContext> =
        rdkafka::ClientConfig::new().set("bootstrap.servers", broker).create().unwrap();
    let change = AlterConfig::new(ResourceSpecifier::Topic(topic)).set(key, value);
    let altered = admin.alter_configs([&change], &AdminOptions::new()).await.expect("alter topic config");
    assert!(altered.iter().all(Result::is_ok), "{topic} {key}={value}: {altered:?}");
}

/// The relay's Kafka settings for `broker`, with nothing else set.
pub fn kafka_config(broker: &str) -> pgoutbox::config::KafkaConfig {
    pgoutbox::config::KafkaConfig {
        bootstrap_servers: broker.to_string(),
        producer_overrides: Default::default(),
        client_security: Default::default(),
        topic_creation: None,
    }
}

pub async fn create_topics(broker: &str, topics: &[String], partitions: i32) {
    let cfg = kafka_config(broker);
    let refs: Vec<&str> = topics.iter().map(String::as_str).collect();
    pgoutbox::kafka::create_topics(&cfg, &refs, partitions, -1).await.expect("create topics");
    // The broker's metadata can lag creation briefly: wait until every topic is visible.
    tokio::task::block_in_place(|| {
        wait_for("topics visible", Duration::from_secs(20), || {
            refs.iter().all(|t| topic_partitions(broker, t) == partitions)
        })
    });
}

pub fn topic_partitions(broker: &str, topic: &str) -> i32 {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    let c: BaseConsumer = rdkafka::ClientConfig::new().set("bootstrap.servers", broker).create().unwrap();
    c.fetch_metadata(Some(topic), Duration::from_secs(5))
        .ok()
        .and_then(|md| md.topics().first().map(|t| if t.error().is_some() { 0 } else { t.partitions().len() as i32 }))
        .unwrap_or(0)
}

/// Reads `topics` until `expected` records arrived, failing after `deadline`.
pub fn consume(broker: &str, topics: &[String], expected: usize, deadline: Duration) -> Vec<ConsumedRecord> {
    let refs: Vec<&str> = topics.iter().map(String::as_str).collect();
    tokio::task::block_in_place(|| {
        consume_all(broker, &refs, Some(expected), Duration::ZERO, deadline).expect("consume")
    })
}

/// Reads everything in `topics`, stopping after `idle` without new records.
pub fn consume_until_idle(broker: &str, topics: &[String], idle: Duration) -> Vec<ConsumedRecord> {
    let refs: Vec<&str> = topics.iter().map(String::as_str).collect();
    tokio::task::block_in_place(|| consume_all(broker, &refs, None, idle, Duration::from_secs(300)).expect("consume"))
}

pub fn wait_for(what: &str, deadline: Duration, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < deadline, "timed out after {deadline:?} waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub async fn wait_for_async<F, Fut>(what: &str, deadline: Duration, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    while !cond().await {
        assert!(start.elapsed() < deadline, "timed out after {deadline:?} waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A `pgoutbox run` child process.
pub struct Relay {
    child: Option<Child>,
    pub log: PathBuf,
    config: PathBuf,
    args: Vec<String>,
    envs: Vec<(String, String)>,
}

impl Relay {
    pub fn start(config: &str) -> Relay {
        Self::start_with(config, &[])
    }

    /// `pgoutbox run --config FILE ARGS...`
    pub fn start_with(config: &str, args: &[&str]) -> Relay {
        let cfg = write_config(config);
        let log = cfg.with_file_name("relay.log");
        Self::spawn(cfg, log, args.iter().map(|a| a.to_string()).collect(), Vec::new())
    }

    /// [`Relay::start_with`] with extra environment variables.
    pub fn start_with_env(config: &str, args: &[&str], envs: &[(&str, &str)]) -> Relay {
        let cfg = write_config(config);
        let log = cfg.with_file_name("relay.log");
        let envs = envs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Self::spawn(cfg, log, args.iter().map(|a| a.to_string()).collect(), envs)
    }

    /// [`Relay::start_with`] with extra environment variables, waiting until it streams.
    pub fn start_streaming_with_env(config: &str, args: &[&str], envs: &[(&str, &str)]) -> Relay {
        let cfg = write_config(config);
        let log = cfg.with_file_name("relay.log");
        let envs = envs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let r = Self::spawn(cfg, log, args.iter().map(|a| a.to_string()).collect(), envs);
        r.wait_for_log("streaming", Duration::from_secs(30));
        r
    }

    /// Starts a relay and waits until it streams (its slot exists, so later commits are captured).
    pub fn start_streaming(config: &str) -> Relay {
        let r = Self::start(config);
        r.wait_for_log("streaming", Duration::from_secs(30));
        r
    }

    fn spawn(config: PathBuf, log: PathBuf, args: Vec<String>, envs: Vec<(String, String)>) -> Relay {
        let out = std::fs::OpenOptions::new().create(true).append(true).open(&log).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_pgoutbox"))
            .args(["run", "--config"])
            .arg(&config)
            .args(&args)
            .env("RUST_LOG", std::env::var("PGOUTBOX_TEST_LOG").unwrap_or_else(|_| "info".into()))
            .envs(envs.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .stderr(out)
            .spawn()
            .expect("spawn pgoutbox");
        Relay { child: Some(child), log, config, args, envs }
    }

    /// Starts the same relay again (same config, same log).
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "relay still running");
        let mut r = Self::spawn(self.config.clone(), self.log.clone(), self.args.clone(), self.envs.clone());
        self.child = r.child.take();
    }

    /// The relay's peak resident memory so far (VmHWM), in bytes.
    pub fn peak_rss(&self) -> Option<u64> {
        let pid = self.child.as_ref()?.id();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let kb = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))?
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse::<u64>()
            .ok()?;
        Some(kb * 1024)
    }

    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM, then waits for the exit (bounded).
    pub fn stop(&mut self) -> ExitStatus {
        self.stop_with("TERM")
    }

    /// Sends `signal` (a name `kill` takes: TERM, HUP, INT), then waits for the exit (bounded).
    pub fn stop_with(&mut self, signal: &str) -> ExitStatus {
        let mut c = self.child.take().expect("relay running");
        let _ = Command::new("kill").arg(format!("-{signal}")).arg(c.id().to_string()).status();
        wait_exit(&mut c, Duration::from_secs(30)).unwrap_or_else(|| {
            let _ = c.kill();
            panic!("relay did not stop within 30s after SIG{signal}; log:\n{}", self.log_text())
        })
    }

    /// Waits for the relay to exit on its own (bounded).
    pub fn wait(&mut self, deadline: Duration) -> Option<ExitStatus> {
        let mut c = self.child.take()?;
        let r = wait_exit(&mut c, deadline);
        if r.is_none() {
            self.child = Some(c);
        }
        r
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn wait_for_log(&self, needle: &str, deadline: Duration) {
        tokio::task::block_in_place(|| {
            wait_for(&format!("relay log to contain {needle:?}"), deadline, || self.log_text().contains(needle))
        });
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Writes a connector config into a directory of its own; returns the file's path.
pub fn write_config(config: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(unique("relay"));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("connector.properties");
    std::fs::File::create(&cfg).unwrap().write_all(config.as_bytes()).unwrap();
    cfg
}

/// A distributed worker's properties: Kafka at `broker`, REST on `addr` (host:port), the group
/// `group` with its three topics named after it (one replica each), then `extra` lines.
pub fn worker_properties(broker: &str, addr: &str, group: &str, extra: &str) -> String {
    format!(
        "bootstrap.servers={broker}\nlisteners=http://{addr}\ngroup.id={group}\n\
         config.storage.topic={group}-configs\nstatus.storage.topic={group}-status\n\
         offset.storage.topic={group}-offsets\nconfig.storage.replication.factor=1\n\
         status.storage.replication.factor=1\noffset.storage.replication.factor=1\n{extra}"
    )
}

/// Runs `pgoutbox ARGS...` to completion; returns its exit code and its output (stdout and stderr).
pub fn pgoutbox(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_pgoutbox")).args(args).output().expect("run pgoutbox");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code(), text)
}

/// A plain HTTP GET on loopback: the status code and the body.
pub fn http_get(addr: &str, path: &str) -> Option<(u16, String)> {
    use std::io::Read;
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    // One write, as HTTP clients do.
    s.write_all(format!("GET {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\r\n").as_bytes()).ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let code = text.split_whitespace().nth(1)?.parse().ok()?;
    let body = text.split("\r\n\r\n").nth(1).unwrap_or("").to_string();
    Some((code, body))
}

/// Waits up to `deadline` for `c` to exit.
pub fn wait_exit(c: &mut Child, deadline: Duration) -> Option<ExitStatus> {
    let start = Instant::now();
    while start.elapsed() < deadline {
        if let Ok(Some(s)) = c.try_wait() {
            return Some(s);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

pub fn unsafe_sigterm(pid: u32) {
    let _ = Command::new("kill").arg("-TERM").arg(pid.to_string()).status();
}

/// The Java client's murmur2 (org.apache.kafka.common.utils.Utils.murmur2), written independently of
/// librdkafka to check that records land where Debezium's producer would put them.
pub fn java_murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    let len = data.len();
    let mut h: u32 = SEED ^ len as u32;
    for chunk in data.chunks_exact(4) {
        let mut k = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> 24;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = &data[len & !3..];
    if tail.len() == 3 {
        h ^= u32::from(tail[2]) << 16;
    }
    if tail.len() >= 2 {
        h ^= u32::from(tail[1]) << 8;
    }
    if !tail.is_empty() {
        h ^= u32::from(tail[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

pub fn java_partition(key: &[u8], partitions: i32) -> i32 {
    (java_murmur2(key) & 0x7fff_ffff) % partitions
}

/// Records grouped by event id.
pub fn by_id(records: &[ConsumedRecord]) -> HashMap<String, Vec<&ConsumedRecord>> {
    let mut m: HashMap<String, Vec<&ConsumedRecord>> = HashMap::new();
    for r in records {
        let id = String::from_utf8_lossy(r.header("id").expect("id header")).into_owned();
        m.entry(id).or_default().push(r);
    }
    m
}

/// One HTTP/1.1 call to a REST API (Connect's): the status and the JSON body (`Null` when empty).
pub fn call(addr: &str, method: &str, path: &str, body: Option<&serde_json::Value>) -> (u16, serde_json::Value) {
    let mut s = std::net::TcpStream::connect(addr).expect("connect to the REST API");
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\naccept: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut text = String::new();
    std::io::Read::read_to_string(&mut s, &mut text).unwrap();
    let code = text.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let payload = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    (code, serde_json::from_str(payload).unwrap_or(serde_json::Value::Null))
}
