//! pgoutbox-bench: measures pgoutbox against Debezium and against the physical ceilings, in one run, on
//! the same WAL.
//!
//! It starts its own PostgreSQL 15 and brokers, creates one slot per contender *before* writing the
//! backlog (so each drains exactly the same WAL), writes the backlog, then runs one after another:
//! - the decoding ceiling: `pg_recvlogical` with pgoutput draining the backlog to /dev/null;
//! - pgoutbox catching up (events/s and MB/s from its first to its last acknowledgement);
//! - the broker ceiling: a plain rdkafka producer sending the very same records with the same settings;
//! - Debezium 3.6 (embedded engine + Event Router, Connect converters and producer defaults);
//! - steady state, pgoutbox then Debezium, each at every rate of `--rates`: relay CPU per event and per
//!   transaction, end-to-end latency from one consumer for both, and pgoutbox's commit-to-ack latency
//!   from its /latency endpoint.
//!
//! Each relay gets a fresh broker. CPU seconds and peak RSS come from /proc.

mod e2e;
mod env;
mod exactly_once;
mod messages;
mod polling;
mod procstat;
mod report;
mod workload;

use std::io::{BufRead, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;

use report::{Contender, Results};
use workload::Shape;

#[derive(Parser, Debug, Clone)]
#[command(about = "Benchmark pgoutbox against Debezium and the decoding and broker ceilings")]
pub struct Args {
    /// Backlog size.
    #[arg(long, default_value_t = 200_000)]
    pub events: usize,
    /// Approximate JSON payload size.
    #[arg(long, default_value_t = 400)]
    pub payload_bytes: usize,
    #[arg(long, default_value_t = 10)]
    pub events_per_txn: usize,
    #[arg(long, default_value_t = 1000)]
    pub aggregates: usize,
    /// Connections writing the backlog.
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// Partitions of each topic.
    #[arg(long, default_value_t = 6)]
    pub partitions: i32,
    /// Steady-state insert rates, events per second, each measured for --steady-seconds.
    #[arg(long, value_delimiter = ',', default_value = "500,5000,50000")]
    pub rates: Vec<usize>,
    #[arg(long, default_value_t = 20)]
    pub steady_seconds: u64,
    #[arg(long)]
    pub skip_debezium: bool,
    #[arg(long)]
    pub skip_steady: bool,
    /// Measure the polling relay beside the log-tailing relay instead (see `polling`); uses
    /// --events, --rates and --steady-seconds.
    #[arg(long)]
    pub polling: bool,
    /// Measure exactly once against at least once instead (see `exactly_once`), on Apache Kafka
    /// (--kafka-nodes brokers); uses --events, --rates and --steady-seconds.
    #[arg(long)]
    pub exactly_once: bool,
    /// Measure the message outbox (logical decoding messages) beside the table outbox instead (see
    /// `messages`): the database's cost per event and the relay's drain; uses --events (give
    /// 1000000 for the table size after a million events), --rates and --steady-seconds.
    #[arg(long)]
    pub messages: bool,
    #[arg(long, default_value_t = 1)]
    pub kafka_nodes: usize,
    /// Run the comparison with Debezium on Apache Kafka (a cluster of --kafka-nodes brokers per
    /// contender, topics replicated min(nodes, 3) times, both producers at acks=all) instead of tansu.
    #[arg(long)]
    pub on_kafka: bool,
    /// Both relays write keys and values with Confluent's AvroConverter through a schema registry
    /// (Apicurio Registry's Confluent-compatible API, started by scripts/registry.sh) instead of
    /// JsonConverter; Debezium's side uses Confluent's converter 7.0.16 from its jars.
    #[arg(long, conflicts_with = "protobuf")]
    pub avro: bool,
    /// As --avro with Confluent's ProtobufConverter (Debezium's side: the converter 7.0.16 from its
    /// jars, with Google's common protos 2.x that scripts/install.sh fetched first on its classpath).
    #[arg(long)]
    pub protobuf: bool,
    /// With --polling: the table size the poll query is timed up to.
    #[arg(long, default_value_t = 1_000_000)]
    pub polling_table_rows: usize,
    /// Where result.json, result.md and chart.svg go.
    #[arg(long, default_value = "target/bench")]
    pub out: PathBuf,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    rt.block_on(run(args))
}

pub(crate) const PUBLICATION: &str = "bench_pub";

async fn run(args: Args) -> anyhow::Result<()> {
    // The repository root: this crate is its `bench/` member.
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let relay_bin = std::env::current_exe()?.with_file_name("pgoutbox");
    anyhow::ensure!(relay_bin.exists(), "{} not found: build with `cargo build --release --bins`", relay_bin.display());
    if args.polling {
        return polling::run(&args, &root, &relay_bin).await;
    }
    if args.exactly_once {
        return exactly_once::run(&args, &root, &relay_bin).await;
    }
    if args.messages {
        return messages::run(&args, &root, &relay_bin).await;
    }
    let mut svc = env::Services::start(root.join("scripts"))?;
    if args.avro {
        svc.registry_converter("io.confluent.connect.avro.AvroConverter")?;
        eprintln!("converters: Confluent's AvroConverter through a schema registry");
    }
    if args.protobuf {
        svc.registry_converter("io.confluent.connect.protobuf.ProtobufConverter")?;
        // Read by scripts/debezium.sh, which Debezium's side runs through.
        std::env::set_var("PGOUTBOX_DEBEZIUM_PROTOBUF", "1");
        eprintln!("converters: Confluent's ProtobufConverter through a schema registry");
    }
    let shape = Shape { payload_bytes: args.payload_bytes, per_txn: args.events_per_txn, aggregates: args.aggregates };
    let sql = workload::connect(svc.pg_port).await?;
    sql.batch_execute(&std::fs::read_to_string(root.join("sql/outbox.sql"))?).await?;
    sql.batch_execute(&format!("CREATE PUBLICATION {PUBLICATION} FOR TABLE public.outbox")).await?;
    for slot in ["bench_recv", "bench_pgoutbox", "bench_debezium"] {
        sql.execute("SELECT pg_create_logical_replication_slot($1, 'pgoutput')", &[&slot]).await?;
    }
    eprintln!(
        "writing a backlog of {} events ({} per transaction, ~{} B payloads, {} aggregates)",
        args.events, args.events_per_txn, args.payload_bytes, args.aggregates
    );
    let write_time = workload::backlog(svc.pg_port, &shape, args.events, args.concurrency).await?;
    let events: i64 = sql.query_one("SELECT count(*) FROM public.outbox", &[]).await?.get(0);
    let payload_bytes: i64 =
        sql.query_one("SELECT sum(octet_length(payload::text))::int8 FROM public.outbox", &[]).await?.get(0);
    let end_lsn: String = sql.query_one("SELECT pg_current_wal_lsn()::text", &[]).await?.get(0);
    let events = events as usize;
    eprintln!(
        "backlog written in {:.1}s ({:.0} events/s); WAL end {end_lsn}",
        write_time.as_secs_f64(),
        events as f64 / write_time.as_secs_f64()
    );
    let mut results = Results::new(&args, events, payload_bytes as u64);

    results.decoding = Some(decoding_ceiling(&svc, &end_lsn, events)?);
    eprintln!("decoding ceiling: {}", results.decoding.as_ref().map(|c| c.line()).unwrap_or_default());

    let replication = if args.on_kafka { args.kafka_nodes.min(3) as i32 } else { 1 };
    let new_broker = |svc: &mut env::Services, name: &str| {
        if args.on_kafka {
            svc.kafka(name, args.kafka_nodes)
        } else {
            svc.broker(name)
        }
    };
    if args.on_kafka {
        eprintln!("Apache Kafka, {} broker(s) per contender, replication factor {replication}", args.kafka_nodes);
    }
    let broker = new_broker(&mut svc, "pgoutbox")?;
    create_topics(&broker, args.partitions, replication).await?;
    let relay_cfg = write_config(&svc, "pgoutbox", &broker, "bench_pgoutbox")?;
    if let Ok(extra) = std::env::var("PGOUTBOX_BENCH_EXTRA") {
        let mut text = std::fs::read_to_string(&relay_cfg)?;
        text.push_str(&extra.replace(';', "\n"));
        text.push('\n');
        std::fs::write(&relay_cfg, text)?;
    }
    results.pgoutbox = Some(pgoutbox_catch_up(&relay_bin, &relay_cfg, events).await?);
    eprintln!("pgoutbox catch-up: {}", results.pgoutbox.as_ref().map(|c| c.line()).unwrap_or_default());

    let ceiling_broker = new_broker(&mut svc, "ceiling")?;
    create_topics(&ceiling_broker, args.partitions, replication).await?;
    results.broker = Some(broker_ceiling(&sql, &ceiling_broker).await?);
    eprintln!("broker ceiling: {}", results.broker.as_ref().map(|c| c.line()).unwrap_or_default());
    svc.stop_broker(&ceiling_broker);

    if !args.skip_debezium {
        let dbz_broker = new_broker(&mut svc, "debezium")?;
        create_topics(&dbz_broker, args.partitions, replication).await?;
        let dbz_cfg = write_config(&svc, "debezium", &dbz_broker, "bench_debezium")?;
        results.debezium = Some(debezium_catch_up(&root, &dbz_cfg, events)?);
        eprintln!("Debezium catch-up: {}", results.debezium.as_ref().map(|c| c.line()).unwrap_or_default());
        svc.stop_broker(&dbz_broker);
    }

    if !args.skip_steady {
        let steady = Steady { pg_port: svc.pg_port, shape: &shape, args: &args, sql: &sql };
        results.steady.push(steady.pgoutbox(&relay_bin, &relay_cfg, &broker).await?);
        if !args.skip_debezium {
            let dbz_broker = new_broker(&mut svc, "debezium-steady")?;
            create_topics(&dbz_broker, args.partitions, replication).await?;
            let dbz_cfg = write_config(&svc, "debezium-steady", &dbz_broker, "bench_debezium")?;
            results.steady.push(steady.debezium(&root, &dbz_cfg, &dbz_broker).await?);
        }
    }

    std::fs::create_dir_all(&args.out)?;
    report::write(&results, &args.out)?;
    println!("{}", report::table(&results));
    Ok(())
}

pub(crate) async fn create_topics(broker: &str, partitions: i32, replication: i32) -> anyhow::Result<()> {
    let cfg = pgoutbox::config::KafkaConfig {
        bootstrap_servers: broker.to_string(),
        producer_overrides: Default::default(),
        client_security: Default::default(),
        topic_creation: None,
    };
    let topics: Vec<String> = workload::TYPES.iter().map(|t| format!("outbox.event.{t}")).collect();
    let refs: Vec<&str> = topics.iter().map(String::as_str).collect();
    pgoutbox::kafka::create_topics(&cfg, &refs, partitions, replication).await?;
    // tansu's metadata lags topic creation: wait until every topic shows all its partitions, so no
    // contender pays for a metadata retry.
    let broker = broker.to_string();
    tokio::task::spawn_blocking(move || -> anyhow::Result<()> {
        use rdkafka::consumer::{BaseConsumer, Consumer};
        let c: BaseConsumer = rdkafka::ClientConfig::new().set("bootstrap.servers", &broker).create()?;
        let deadline = Instant::now() + Duration::from_secs(30);
        for t in &topics {
            loop {
                let md = c.fetch_metadata(Some(t), Duration::from_secs(5))?;
                if md
                    .topics()
                    .first()
                    .is_some_and(|m| m.error().is_none() && m.partitions().len() == partitions as usize)
                {
                    break;
                }
                anyhow::ensure!(Instant::now() < deadline, "topic {t} not visible");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Ok(())
    })
    .await??;
    Ok(())
}

pub(crate) fn write_config(svc: &env::Services, name: &str, broker: &str, slot: &str) -> anyhow::Result<PathBuf> {
    let path = svc.root.join(format!("{name}.properties"));
    std::fs::write(
        &path,
        format!(
            "name=bench-{name}\nconnector.class=io.debezium.connector.postgresql.PostgresConnector\n\
             database.hostname=127.0.0.1\ndatabase.port={}\ndatabase.user=postgres\ndatabase.dbname=postgres\n\
             database.sslmode=disable\ntopic.prefix=bench\nplugin.name=pgoutput\nslot.name={slot}\n\
             publication.name={PUBLICATION}\npublication.autocreate.mode=disabled\ntable.include.list=public.outbox\n\
             snapshot.mode=no_data\ntransforms=outbox\ntransforms.outbox.type=io.debezium.transforms.outbox.EventRouter\n\
             bootstrap.servers={broker}\n{}",
            svc.pg_port,
            svc.converters
        ),
    )?;
    Ok(path)
}

fn decoding_ceiling(svc: &env::Services, end_lsn: &str, events: usize) -> anyhow::Result<Contender> {
    let start = Instant::now();
    let status = Command::new("pg_recvlogical")
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &svc.pg_port.to_string(),
            "-U",
            "postgres",
            "-d",
            "postgres",
            "-S",
            "bench_recv",
            "--start",
        ])
        .args([
            "-o",
            "proto_version=1",
            "-o",
            &format!("publication_names={PUBLICATION}"),
            "-E",
            end_lsn,
            "-f",
            "/dev/null",
            "--no-loop",
        ])
        .status()?;
    anyhow::ensure!(status.success(), "pg_recvlogical failed");
    let wall = start.elapsed();
    Ok(Contender::throughput("pg_recvlogical (decoding ceiling)", events, wall, None, None))
}

fn http_get(addr: &str, path: &str) -> Option<String> {
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    s.write_all(format!("GET {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\r\n").as_bytes()).ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let (head, body) = out.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| body.to_string())
}

pub(crate) fn metric(addr: &str, name: &str) -> Option<u64> {
    let body = http_get(addr, "/metrics")?;
    // `name value` or `name{labels} value`.
    body.lines()
        .find_map(|l| {
            let rest = l.strip_prefix(name)?;
            let rest = if rest.starts_with('{') { &rest[rest.find('}')? + 1..] } else { rest };
            rest.trim().parse::<f64>().ok()
        })
        .map(|v| v as u64)
}

pub(crate) fn free_addr() -> anyhow::Result<String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.to_string())
}

pub(crate) fn spawn_relay(bin: &Path, cfg: &Path, metrics: &str, log: &Path) -> anyhow::Result<Child> {
    Ok(Command::new(bin)
        .args(["run", "--config"])
        .arg(cfg)
        .args(["--metrics-address", metrics])
        .env("RUST_LOG", std::env::var("PGOUTBOX_BENCH_LOG").unwrap_or_else(|_| "warn".into()))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log)?)
        .spawn()?)
}

pub(crate) fn stop(child: &mut Child) {
    let _ = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

pub(crate) async fn pgoutbox_catch_up(bin: &Path, cfg: &Path, events: usize) -> anyhow::Result<Contender> {
    let addr = free_addr()?;
    let log = std::path::PathBuf::from("target/bench/pgoutbox-catch-up.log");
    let _ = std::fs::create_dir_all("target/bench");
    let start = Instant::now();
    let mut child = spawn_relay(bin, cfg, &addr, &log)?;
    let mut streaming = None;
    let mut first = None;
    let mut peak = procstat::Usage::default();
    let deadline = start + Duration::from_secs(600);
    loop {
        anyhow::ensure!(Instant::now() < deadline, "pgoutbox did not drain the backlog in 600s; log {}", log.display());
        if let Ok(Some(s)) = child.try_wait() {
            anyhow::bail!("pgoutbox exited ({s}); log:\n{}", std::fs::read_to_string(&log).unwrap_or_default());
        }
        if streaming.is_none() && http_get(&addr, "/health").is_some() {
            streaming = Some(start.elapsed());
        }
        let acked = metric(&addr, "pgoutbox_events_acked_total").unwrap_or(0) as usize;
        if first.is_none() && acked > 0 {
            first = Some(start.elapsed());
        }
        let u = procstat::usage(child.id());
        peak.peak_rss_mb = peak.peak_rss_mb.max(u.peak_rss_mb);
        peak.cpu_seconds = u.cpu_seconds;
        if acked >= events {
            break;
        }
        tokio::time::sleep(Duration::from_millis(if streaming.is_none() { 2 } else { 10 })).await;
    }
    let done = start.elapsed();
    let usage = procstat::usage(child.id());
    stop(&mut child);
    let first = first.unwrap_or(done);
    let streaming = streaming.unwrap_or(first);
    let mut c = Contender::throughput("pgoutbox", events, done - streaming, Some(usage), Some(first));
    c.startup = Some(streaming);
    Ok(c)
}

async fn broker_ceiling(sql: &tokio_postgres::Client, broker: &str) -> anyhow::Result<Contender> {
    use pgoutbox::outbox::{ColumnInfo, ContextHeaders, RelationInfo, Router};
    use pgoutbox::pgoutput::{TupleData, Value};
    let rows = sql
        .query(
            "SELECT id::text, aggregatetype, aggregateid, type, payload::text FROM public.outbox ORDER BY created_at",
            &[],
        )
        .await?;
    let config = pgoutbox::config::Config::from_raw(&pgoutbox::config::parse_properties(
        "database.hostname=x\ndatabase.user=x\ndatabase.dbname=x\ntopic.prefix=bench\ntransforms=outbox\n\
         transforms.outbox.type=io.debezium.transforms.outbox.EventRouter\nbootstrap.servers=x\npublication.autocreate.mode=disabled\n",
    ))?;
    let ctx = ContextHeaders {
        connector_logical_name: "bench".into(),
        task_id: "0".into(),
        connector_name: "postgresql".into(),
        run_id: "r".into(),
    };
    let mut router = Router::new(
        config.router.clone(),
        pgoutbox::outbox::Converters { key: config.key_converter.clone(), value: config.value_converter.clone() },
        Some(ctx),
    );
    let col = |name: &str, type_oid, not_null| ColumnInfo {
        name: name.into(),
        type_oid,
        type_modifier: -1,
        not_null,
        default: None,
    };
    let plan = router.plan(&RelationInfo {
        oid: 1,
        schema: "public".into(),
        table: "outbox".into(),
        columns: vec![
            col("id", 2950, true),
            col("aggregatetype", 1043, true),
            col("aggregateid", 1043, true),
            col("type", 1043, true),
            col("payload", 3802, false),
        ],
    });
    let mut records = Vec::with_capacity(rows.len());
    for r in &rows {
        let text = |i: usize| Value::Text(bytes::Bytes::from(r.get::<_, String>(i)));
        let tuple = TupleData { values: vec![text(0), text(1), text(2), text(3), text(4)] };
        records.extend(router.route(&plan, &tuple, 0)?);
    }
    drop(rows);
    let kafka = pgoutbox::config::KafkaConfig {
        bootstrap_servers: broker.to_string(),
        producer_overrides: Default::default(),
        client_security: Default::default(),
        topic_creation: None,
    };
    let events = records.len();
    let wall = tokio::task::spawn_blocking(move || -> anyhow::Result<Duration> {
        use rdkafka::producer::{BaseProducer, Producer};
        let p: BaseProducer = pgoutbox::kafka::base_config(&kafka).create()?;
        let start = Instant::now();
        for rec in &records {
            loop {
                match p.send(pgoutbox::kafka::base_record(rec, ())) {
                    Ok(()) => break,
                    Err((
                        rdkafka::error::KafkaError::MessageProduction(rdkafka::types::RDKafkaErrorCode::QueueFull),
                        _,
                    )) => {
                        p.poll(Duration::from_millis(5));
                    }
                    Err((e, _)) => anyhow::bail!("produce failed: {e}"),
                }
            }
            p.poll(Duration::ZERO);
        }
        p.flush(Duration::from_secs(120))?;
        Ok(start.elapsed())
    })
    .await??;
    Ok(Contender::throughput("rdkafka producer (broker ceiling)", events, wall, None, None))
}

type Lines = std::sync::mpsc::Receiver<(Duration, String)>;

/// Starts Debezium (scripts/debezium.sh runs it with `exec java`, so the pid is the JVM's); its
/// stdout lines arrive timed from `start`.
fn spawn_debezium(root: &Path, cfg: &Path, extra: &[&str], start: Instant) -> anyhow::Result<(Child, Lines)> {
    let script = root.join("scripts/debezium.sh");
    let install = Command::new("bash").arg(&script).arg("install").status()?;
    anyhow::ensure!(install.success(), "scripts/debezium.sh install failed");
    let mut child = Command::new("bash")
        .arg(&script)
        .args(["run", "--config"])
        .arg(cfg)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(cfg.with_extension("log"))?)
        .spawn()?;
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send((start.elapsed(), line)).is_err() {
                break;
            }
        }
    });
    Ok((child, rx))
}

pub(crate) fn debezium_catch_up(root: &Path, cfg: &Path, events: usize) -> anyhow::Result<Contender> {
    let start = Instant::now();
    let (mut child, rx) = spawn_debezium(root, cfg, &["--progress", "1000"], start)?;
    let pid = child.id();
    let mut first = None;
    let mut streaming = None;
    let mut peak = 0.0f64;
    let deadline = start + Duration::from_secs(1800);
    let done = loop {
        anyhow::ensure!(Instant::now() < deadline, "Debezium did not drain the backlog in 1800s");
        peak = peak.max(procstat::usage(pid).peak_rss_mb);
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok((t, line)) => {
                if line == "DEBEZIUM STREAMING" {
                    streaming = Some(t);
                } else if line == "DEBEZIUM FIRST" {
                    first = Some(t);
                } else if let Some(n) = line.strip_prefix("DEBEZIUM RECORDS ") {
                    if n.trim().parse::<usize>().unwrap_or(0) >= events {
                        break t;
                    }
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                if let Ok(Some(s)) = child.try_wait() {
                    anyhow::bail!("Debezium exited early ({s}); see {}", cfg.with_extension("log").display());
                }
            }
            Err(_) => anyhow::bail!("Debezium's output ended early; see {}", cfg.with_extension("log").display()),
        }
    };
    let mut usage = procstat::usage(pid);
    usage.peak_rss_mb = usage.peak_rss_mb.max(peak);
    stop(&mut child);
    let first = first.unwrap_or(done);
    let streaming = streaming.unwrap_or(first);
    let mut c = Contender::throughput(
        "Debezium 3.6.3 (embedded engine, Connect defaults)",
        events,
        done - streaming,
        Some(usage),
        Some(first),
    );
    c.startup = Some(streaming);
    Ok(c)
}

/// The steady-state phase: each relay at every rate, measured the same way.
pub(crate) struct Steady<'a> {
    pg_port: u16,
    shape: &'a Shape,
    args: &'a Args,
    sql: &'a tokio_postgres::Client,
}

/// Where a relay under measurement can be asked about itself.
struct Relay<'a> {
    pid: u32,
    /// pgoutbox's metrics address (its /latency endpoint).
    metrics: Option<&'a str>,
    broker: &'a str,
}

impl Steady<'_> {
    /// Moves a stopped relay's slot to the current end of the WAL, so it does not first catch up on
    /// what the other relay's steady state wrote.
    async fn skip_to_now(&self, slot: &str) -> anyhow::Result<()> {
        self.sql.execute("SELECT pg_replication_slot_advance($1, pg_current_wal_lsn())", &[&slot]).await?;
        Ok(())
    }

    async fn pgoutbox(&self, bin: &Path, cfg: &Path, broker: &str) -> anyhow::Result<report::SteadyRun> {
        self.pgoutbox_on("bench_pgoutbox", bin, cfg, broker).await
    }

    async fn pgoutbox_on(&self, slot: &str, bin: &Path, cfg: &Path, broker: &str) -> anyhow::Result<report::SteadyRun> {
        self.skip_to_now(slot).await?;
        let addr = free_addr()?;
        let mut child = spawn_relay(bin, cfg, &addr, &cfg.with_extension("steady.log"))?;
        let start = Instant::now();
        while http_get(&addr, "/health").is_none() {
            anyhow::ensure!(start.elapsed() < Duration::from_secs(30), "pgoutbox did not start streaming");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let windows = self.windows(&Relay { pid: child.id(), metrics: Some(&addr), broker }).await;
        stop(&mut child);
        Ok(report::SteadyRun { relay: "pgoutbox".into(), windows: windows? })
    }

    async fn debezium(&self, root: &Path, cfg: &Path, broker: &str) -> anyhow::Result<report::SteadyRun> {
        self.skip_to_now("bench_debezium").await?;
        let offsets = cfg.with_extension("offsets");
        let _ = std::fs::remove_file(&offsets);
        let offsets = offsets.to_string_lossy().to_string();
        let (mut child, rx) = spawn_debezium(root, cfg, &["--offsets", &offsets], Instant::now())?;
        loop {
            match rx.recv_timeout(Duration::from_secs(120)) {
                Ok((_, line)) if line == "DEBEZIUM STREAMING" => break,
                Ok(_) => {}
                Err(_) => {
                    stop(&mut child);
                    anyhow::bail!("Debezium did not start streaming; see {}", cfg.with_extension("log").display());
                }
            }
        }
        // Keep reading its output so it never blocks on a full pipe.
        std::thread::spawn(move || while rx.recv().is_ok() {});
        let windows = self.windows(&Relay { pid: child.id(), metrics: None, broker }).await;
        stop(&mut child);
        Ok(report::SteadyRun { relay: "Debezium 3.6.3".into(), windows: windows? })
    }

    async fn windows(&self, relay: &Relay<'_>) -> anyhow::Result<Vec<report::Window>> {
        let topics: Vec<String> = workload::TYPES.iter().map(|t| format!("outbox.event.{t}")).collect();
        let e2e = e2e::EndToEnd::start(relay.broker, &topics, self.args.partitions)?;
        let mut out = Vec::new();
        for &rate in &self.args.rates {
            eprintln!("steady state: {rate} events/s for {}s (after 3s warm-up)", self.args.steady_seconds);
            workload::steady(self.pg_port, self.shape, rate, Duration::from_secs(3), 0).await?;
            tokio::time::sleep(Duration::from_millis(500)).await;
            if let Some(addr) = relay.metrics {
                let _ = http_get(addr, "/latency"); // discard the warm-up window
            }
            e2e.take();
            let cpu_before = procstat::usage(relay.pid).cpu_seconds;
            let wall = Instant::now();
            let seconds = Duration::from_secs(self.args.steady_seconds);
            let written = workload::steady(self.pg_port, self.shape, rate, seconds, 0).await?;
            let writing = wall.elapsed();
            // What was written is delivered (or not) within a second more; the CPU counts it.
            tokio::time::sleep(Duration::from_secs(1)).await;
            let usage = procstat::usage(relay.pid);
            let delivered_with_cpu = e2e.count();
            // A relay that fell behind still delivers: wait (up to 60 s) so its late records count
            // in the latencies rather than vanish from them.
            let waiting = Instant::now();
            while e2e.count() < written && waiting.elapsed() < Duration::from_secs(60) {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            let mut latencies = e2e.take();
            let window = report::Window::new(rate, writing, written, &mut latencies, usage, cpu_before, self.shape);
            let window = window.delivered_with_cpu(delivered_with_cpu);
            let window = match relay.metrics.and_then(|a| http_get(a, "/latency")) {
                Some(body) => window.with_commit_to_ack(&serde_json::from_str(&body).unwrap_or_default()),
                None => window,
            };
            eprintln!("  {}", window.line());
            out.push(window);
        }
        Ok(out)
    }
}
