//! The `pgoutbox` command: parses arguments, sets up logging, turns signals into a graceful stop,
//! and maps errors to exit codes. Everything else lives in the library.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use tokio_util::sync::CancellationToken;

use pgoutbox::config::{Config, RawConfig};
use pgoutbox::kafka::consume::consume_all;

static VERSION: std::sync::LazyLock<String> = std::sync::LazyLock::new(pgoutbox::version_text);

#[derive(Parser)]
#[command(
    name = "pgoutbox",
    version = VERSION.as_str(),
    about = "Transactional outbox relay: PostgreSQL logical replication to Kafka, a drop-in for Debezium's Outbox Event Router"
)]
struct Cli {
    /// Log lines as text or as JSON objects (one per line, for log shippers). The level comes from
    /// RUST_LOG (default `info`; e.g. RUST_LOG=pgoutbox=debug,librdkafka=warn).
    #[arg(long, global = true, value_enum, env = "PGOUTBOX_LOG_FORMAT", default_value = "text")]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Relay outbox events until stopped (SIGTERM or Ctrl-C stop gracefully).
    Run {
        /// Connector configuration: Java .properties, or the Connect REST JSON form (.json).
        #[arg(long, env = "PGOUTBOX_CONFIG")]
        config: PathBuf,
        /// Override a key, e.g. --set slot.name=outbox_slot (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// Serve /metrics, /health and /latency on this address, e.g. 127.0.0.1:9187.
        #[arg(long, env = "PGOUTBOX_METRICS_ADDRESS")]
        metrics_address: Option<std::net::SocketAddr>,
        /// Take config keys from environment variables too (PGOUTBOX_<KEY>, CONNECT_<KEY>,
        /// BOOTSTRAP_SERVERS, PGOUTBOX_SET_<n>=key=value; see docs/operations.md), over the file
        /// and under --set. For containers.
        #[arg(long, env = "PGOUTBOX_ENV_OVERRIDES")]
        env_overrides: bool,
    },
    /// Run as a Kafka Connect worker (standalone mode): the connectors of the files, plus what the
    /// REST API (Connect's paths, on `listeners`, default http://:8083) creates.
    Connect {
        /// The worker's properties (bootstrap.servers, converters, listeners,
        /// offset.storage.file.filename, ...); connectors get its Kafka client settings, converters
        /// and config providers, never connector keys (database.*, ...), as in Connect.
        #[arg(long, env = "PGOUTBOX_WORKER", required_unless_present = "env_overrides")]
        worker: Option<PathBuf>,
        /// Take worker keys from the environment as Debezium's `connect` image does (GROUP_ID,
        /// CONFIG_STORAGE_TOPIC, OFFSET_STORAGE_TOPIC, STATUS_STORAGE_TOPIC, BOOTSTRAP_SERVERS,
        /// KEY_CONVERTER, VALUE_CONVERTER, REST_PORT, CONNECT_<KEY>, ...; docs/operations.md), over
        /// the worker file; without a file, with the image's defaults. LOG_LEVEL sets the level when
        /// RUST_LOG is not set.
        #[arg(long, env = "PGOUTBOX_ENV_OVERRIDES")]
        env_overrides: bool,
        /// Connector configurations: Java .properties or Connect's REST JSON form.
        connectors: Vec<PathBuf>,
    },
    /// Check the configuration, database and broker; say what to fix (exit 1 if anything is wrong).
    Check {
        #[arg(long)]
        config: PathBuf,
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// As for `run`.
        #[arg(long)]
        env_overrides: bool,
    },
    /// Print records of topics from the beginning (kcat does not speak to every broker).
    Consume {
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap_servers: String,
        /// Topic to read (repeatable).
        #[arg(long = "topic", required = true)]
        topics: Vec<String>,
        /// Stop after this many records.
        #[arg(long)]
        count: Option<usize>,
        /// Stop after this long without a new record.
        #[arg(long, default_value = "2000")]
        idle_ms: u64,
    },
    /// Show or reset the record of the slot this connector streams from (`offset.storage.topic`).
    /// `reset` accepts that a lost slot's events are gone: the next start creates a new slot.
    Offsets {
        #[arg(value_parser = ["show", "reset"])]
        action: String,
        #[arg(long)]
        config: PathBuf,
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
    },
    /// Compare the outbox table with its topics: missing, orphaned, duplicated and out-of-order events.
    Verify {
        #[command(flatten)]
        args: pgoutbox::verify::cli::VerifyArgs,
    },
}

fn load(config: &std::path::Path, set: &[String]) -> Result<Config, pgoutbox::config::ConfigError> {
    load_with(config, set, false)
}

/// The file, then (with `env_overrides`) the environment's keys, then `--set`.
fn load_with(
    config: &std::path::Path,
    set: &[String],
    env_overrides: bool,
) -> Result<Config, pgoutbox::config::ConfigError> {
    let mut raw = RawConfig::load(config)?;
    if env_overrides {
        for (k, v) in pgoutbox::config::env::overrides(std::env::vars())? {
            raw.entries.insert(k, v);
        }
    }
    for s in set {
        raw.set(s)?;
    }
    Config::from_raw(&raw)
}

/// The subscriber, with a filter `/admin/loggers` can replace (`pgoutbox::logging`).
/// `image_level`: Debezium's image's LOG_LEVEL, which applies when RUST_LOG is not set.
fn init_logging(format: LogFormat, image_level: Option<String>) {
    use tracing_subscriber::EnvFilter;
    let from_image = image_level.as_deref().and_then(pgoutbox::logging::parse_level).map(pgoutbox::logging::directive);
    let base = match std::env::var("RUST_LOG") {
        Ok(s) if !s.trim().is_empty() && EnvFilter::try_new(&s).is_ok() => s,
        _ => from_image.unwrap_or("info").to_string(),
    };
    let filter = EnvFilter::new(&base);
    let reload = |d: &str| EnvFilter::try_new(d).map_err(|e| format!("the log filter was refused: {e}"));
    match format {
        LogFormat::Text => {
            let builder = tracing_subscriber::fmt()
                .with_env_filter(filter)
                .with_writer(std::io::stderr)
                .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
                .with_filter_reloading();
            let handle = builder.reload_handle();
            builder.init();
            pgoutbox::logging::install(&base, move |d| handle.reload(reload(d)?).map_err(|e| e.to_string()));
        }
        // One JSON object per line: timestamp, level, target, fields (the message among them).
        LogFormat::Json => {
            let builder = tracing_subscriber::fmt()
                .json()
                .flatten_event(true)
                .with_current_span(false)
                .with_env_filter(filter)
                .with_writer(std::io::stderr)
                .with_filter_reloading();
            let handle = builder.reload_handle();
            builder.init();
            pgoutbox::logging::install(&base, move |d| handle.reload(reload(d)?).map_err(|e| e.to_string()));
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let image_level = match &cli.command {
        Command::Connect { env_overrides: true, .. } => std::env::var("LOG_LEVEL").ok(),
        _ => None,
    };
    init_logging(cli.log_format, image_level);
    // One thread runs the reader, the sink and the HTTP endpoint; librdkafka has threads of its own.
    // Measured against the multi-threaded runtime at 5,000 events/s: ~12% less CPU (5.3 vs 6.0 CPU s
    // over 20 s), since a batch no longer wakes another thread on its way from reader to sink; the
    // relay never needs more than one core for its own work.
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let code = match cli.command {
        Command::Run { config, set, metrics_address, env_overrides } => {
            let config = match load_with(&config, &set, env_overrides) {
                Ok(c) => c,
                Err(e) => {
                    tracing::error!("{e}");
                    return ExitCode::from(2);
                }
            };
            runtime.block_on(run(config, pgoutbox::RunOptions { metrics_address }))
        }
        Command::Verify { args } => runtime.block_on(pgoutbox::verify::cli::run(args)),
        Command::Connect { worker, connectors, env_overrides } => {
            connect(&runtime, worker.as_deref(), env_overrides, &connectors)
        }
        Command::Offsets { action, config, set } => {
            let config = match load(&config, &set) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::from(2);
                }
            };
            runtime.block_on(offsets(&action, &config))
        }
        Command::Check { config, set, env_overrides } => {
            let config = match load_with(&config, &set, env_overrides) {
                Ok(c) => c,
                Err(e) => {
                    println!("PROBLEM config                 {e}");
                    return ExitCode::from(2);
                }
            };
            let findings = runtime.block_on(pgoutbox::check::check(&config));
            if pgoutbox::check::print(&findings) {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            }
        }
        Command::Consume { bootstrap_servers, topics, count, idle_ms } => {
            consume(&bootstrap_servers, &topics, count, idle_ms)
        }
    };
    // A blocking call into librdkafka that a stop gave up on (a Kafka commit waiting for an absent
    // broker) must not hold the exit: it is abandoned after this long.
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    code
}

/// `connect`: the worker with the connectors of `files`, until a signal stops it.
fn connect(
    runtime: &tokio::runtime::Runtime,
    worker: Option<&std::path::Path>,
    env_overrides: bool,
    files: &[PathBuf],
) -> ExitCode {
    let worker = match worker_props(worker, env_overrides) {
        Ok(w) => w,
        Err(e) => {
            tracing::error!("{e}");
            return ExitCode::from(2);
        }
    };
    let mut configs = Vec::new();
    for path in files {
        match RawConfig::load(path) {
            Ok(raw) => {
                let name = raw.entries.get("name").cloned().or(raw.source_name.clone()).unwrap_or_default();
                configs.push((name, raw.entries));
            }
            Err(e) => {
                tracing::error!("{e}");
                return ExitCode::from(2);
            }
        }
    }
    runtime.block_on(async move {
        let shutdown = CancellationToken::new();
        tokio::spawn(stop_on_signal(shutdown.clone()));
        match pgoutbox::connect(worker, configs, shutdown).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                tracing::error!("{e}");
                ExitCode::from(e.exit_code() as u8)
            }
        }
    })
}

/// The worker's keys: the file's, then (with `env_overrides`) the environment's; without a file, the
/// Debezium image's defaults under them, and its required variables checked.
fn worker_props(
    file: Option<&std::path::Path>,
    env_overrides: bool,
) -> Result<std::collections::BTreeMap<String, String>, pgoutbox::config::ConfigError> {
    use pgoutbox::config::env;
    let mut props = match file {
        Some(f) => RawConfig::load(f)?.entries,
        None => env::IMAGE_DEFAULTS.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
    };
    if env_overrides {
        for (k, v) in env::worker_overrides(std::env::vars())? {
            props.insert(k, v);
        }
    }
    if file.is_none() {
        env::check_image_worker(&props)?;
        if !props.contains_key("status.storage.topic") {
            tracing::warn!("STATUS_STORAGE_TOPIC is not set: connector statuses go to topic connect-status, as in Debezium's image");
            props.insert("status.storage.topic".into(), "connect-status".into());
        }
    }
    Ok(props)
}

/// `run`: the relay until a signal stops it; the exit code names the kind of error.
async fn run(config: Config, options: pgoutbox::RunOptions) -> ExitCode {
    let shutdown = CancellationToken::new();
    tokio::spawn(stop_on_signal(shutdown.clone()));
    match pgoutbox::run(config, options, shutdown).await {
        Ok(()) => {
            tracing::info!("stopped");
            ExitCode::SUCCESS
        }
        Err(e) => {
            tracing::error!("{e}");
            ExitCode::from(e.exit_code() as u8)
        }
    }
}

/// `consume`: prints the records of `topics`, one line each.
fn consume(bootstrap_servers: &str, topics: &[String], count: Option<usize>, idle_ms: u64) -> ExitCode {
    let topics: Vec<&str> = topics.iter().map(String::as_str).collect();
    let records =
        match consume_all(bootstrap_servers, &topics, count, Duration::from_millis(idle_ms), Duration::from_secs(3600))
        {
            Ok(r) => r,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(7);
            }
        };
    let text =
        |b: &Option<Vec<u8>>| b.as_ref().map_or("<null>".to_string(), |b| String::from_utf8_lossy(b).into_owned());
    for r in records {
        let headers: Vec<String> = r.headers.iter().map(|(k, v)| format!("{k}={}", text(v))).collect();
        println!(
            "topic={} partition={} offset={} key={} headers=[{}] value={}",
            r.topic,
            r.partition,
            r.offset,
            text(&r.key),
            headers.join(", "),
            text(&r.value)
        );
    }
    ExitCode::SUCCESS
}

async fn offsets(action: &str, cfg: &Config) -> ExitCode {
    let store = pgoutbox::kafka::offsets::OffsetStore::for_connector(cfg);
    let result = if action == "reset" {
        store
            .clear()
            .await
            .map(|()| println!("cleared the record of connector `{}` in `{}`", cfg.connector_name, store.topic()))
    } else {
        store.load().await.map(|o| match o {
            Some(o) => println!(
                "slot={} lsn={} ts_usec={} (topic `{}`)",
                o.slot.as_deref().unwrap_or(&cfg.slot_name),
                o.lsn,
                o.ts_usec,
                store.topic()
            ),
            None => println!("no record for connector `{}` in `{}`", cfg.connector_name, store.topic()),
        })
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(7)
        }
    }
}

/// SIGTERM, SIGINT and SIGHUP (a closed terminal, a supervisor's reload) all stop gracefully:
/// outstanding deliveries are awaited and the final position confirmed. A second signal while
/// that runs exits at once (exit 130); what was not confirmed is published again on the next start.
async fn stop_on_signal(shutdown: CancellationToken) {
    use tokio::signal::unix::{signal, SignalKind};
    let kinds =
        [(SignalKind::terminate(), "SIGTERM"), (SignalKind::interrupt(), "SIGINT"), (SignalKind::hangup(), "SIGHUP")];
    let mut streams = Vec::new();
    for (kind, name) in kinds {
        match signal(kind) {
            Ok(s) => streams.push((s, name)),
            Err(e) => tracing::warn!(error = %e, signal = name, "cannot listen for the signal"),
        }
    }
    if streams.is_empty() {
        return;
    }
    let first = next_signal(&mut streams).await;
    tracing::info!(signal = first, "stop requested: finishing outstanding deliveries (a second signal exits at once)");
    shutdown.cancel();
    let second = next_signal(&mut streams).await;
    tracing::warn!(
        signal = second,
        "second stop signal: exiting without waiting; what was not confirmed is published again on the next start"
    );
    std::process::exit(130);
}

/// The name of the next signal to arrive.
async fn next_signal(streams: &mut [(tokio::signal::unix::Signal, &'static str)]) -> &'static str {
    let waits: Vec<_> = streams
        .iter_mut()
        .map(|(s, name)| {
            let name = *name;
            Box::pin(async move {
                s.recv().await;
                name
            })
        })
        .collect();
    futures_util::future::select_all(waits).await.0
}
