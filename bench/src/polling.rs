//! `--polling`: the polling relay beside the log-tailing relay, in one run, on the same PostgreSQL and
//! the same broker:
//! - drain rate of one backlog (the same rows: the log-tailing relay reads them from a slot created
//!   before they were written, the polling relay from the table), with the CPU of the relay and of
//!   PostgreSQL (every `postgres` process) over the drain;
//! - steady state at each of `--rates`: end-to-end latency (application send to consumer read) for
//!   both, the relay's and PostgreSQL's CPU;
//! - the application's commit latency at the highest rate with and without the NOTIFY trigger that
//!   `pgoutbox.polling.notify.channel` needs;
//! - the table's size and the poll query's time as the table grows to `--polling-table-rows` rows
//!   without pruning.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::workload::{self, Shape};
use crate::{e2e, env, procstat, Args};

/// CPU seconds of every `postgres` process (the server's share of the work).
pub(crate) fn postgres_cpu() -> f64 {
    let Ok(dir) = std::fs::read_dir("/proc") else { return 0.0 };
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
        .filter(|pid| std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "postgres"))
        .map(|pid| procstat::usage(pid).cpu_seconds)
        .sum()
}

pub(crate) struct Drain {
    pub relay: &'static str,
    pub events: usize,
    pub seconds: f64,
    pub relay_cpu: f64,
    /// `None` where it could not be read: an ended walsender's CPU leaves /proc with it.
    pub pg_cpu: Option<f64>,
}

impl Drain {
    /// The drain's line of a report table, its label `label` wide.
    pub(crate) fn row(&self, label: usize) -> String {
        format!(
            "{:<label$} {:>10} {:>9.2} {:>10.0} {:>13.2} {:>18}\n",
            self.relay,
            self.events,
            self.seconds,
            self.events as f64 / self.seconds,
            self.relay_cpu,
            self.pg_cpu.map_or("-".to_string(), |c| format!("{c:.2}"))
        )
    }
}

struct Latency {
    relay: &'static str,
    rate: usize,
    delivered: usize,
    p50_ms: f64,
    p99_ms: f64,
    relay_cpu: f64,
    pg_cpu: f64,
}

fn config(svc: &env::Services, broker: &str, polling: bool) -> anyhow::Result<std::path::PathBuf> {
    let path = crate::write_config(svc, if polling { "polling" } else { "log-tailing" }, broker, "bench_pgoutbox")?;
    if polling {
        let mut text = std::fs::read_to_string(&path)?;
        text.push_str("pgoutbox.relay=polling\npgoutbox.polling.order.column=seq\n");
        std::fs::write(&path, text)?;
    }
    Ok(path)
}

pub(crate) async fn drain(
    relay: &'static str,
    bin: &Path,
    cfg: &Path,
    events: usize,
) -> anyhow::Result<(Drain, std::process::Child, String)> {
    let addr = crate::free_addr()?;
    let log = cfg.with_extension("log");
    let pg_before = postgres_cpu();
    let mut child = crate::spawn_relay(bin, cfg, &addr, &log)?;
    let start = Instant::now();
    let mut first: Option<Instant> = None;
    loop {
        anyhow::ensure!(
            start.elapsed() < Duration::from_secs(900),
            "{relay} did not drain in 900s; log {}",
            log.display()
        );
        if let Ok(Some(s)) = child.try_wait() {
            anyhow::bail!("{relay} exited ({s}); log:\n{}", std::fs::read_to_string(&log).unwrap_or_default());
        }
        let acked = crate::metric(&addr, "pgoutbox_events_acked_total").unwrap_or(0) as usize;
        if first.is_none() && acked > 0 {
            first = Some(Instant::now());
        }
        if acked >= events {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // From the start of the process: both relays pay their start-up.
    let _ = first;
    let seconds = start.elapsed().as_secs_f64();
    let d = Drain {
        relay,
        events,
        seconds,
        relay_cpu: procstat::usage(child.id()).cpu_seconds,
        pg_cpu: Some(postgres_cpu() - pg_before),
    };
    Ok((d, child, addr))
}

/// Steady writes at `rate` for `seconds`, each transaction's SQL from `txn`, with per-transaction
/// commit latencies (µs).
pub(crate) async fn write_steadily(
    port: u16,
    shape: &Shape,
    rate: usize,
    seconds: u64,
    txn: fn(&Shape, usize) -> String,
) -> anyhow::Result<(usize, Vec<u64>)> {
    let writers = (rate / 5000).clamp(2, 8);
    let period = Duration::from_secs_f64(writers as f64 * shape.per_txn as f64 / rate as f64);
    let mut tasks = Vec::new();
    for w in 0..writers {
        let client = workload::connect(port).await?;
        let shape = shape.clone();
        tasks.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval(period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
            let end = Instant::now() + Duration::from_secs(seconds);
            let (mut n, mut lat) = (0usize, Vec::new());
            while Instant::now() < end {
                tick.tick().await;
                let t = Instant::now();
                client.batch_execute(&txn(&shape, (n * writers + w) * shape.per_txn)).await?;
                lat.push(t.elapsed().as_micros() as u64);
                n += 1;
            }
            anyhow::Ok((n * shape.per_txn, lat))
        }));
    }
    let (mut total, mut all) = (0, Vec::new());
    for t in tasks {
        let (n, lat) = t.await??;
        total += n;
        all.extend(lat);
    }
    Ok((total, all))
}

async fn steady(
    relay: &'static str,
    pid: u32,
    svc: &env::Services,
    shape: &Shape,
    args: &Args,
    broker: &str,
) -> anyhow::Result<Vec<Latency>> {
    let topics: Vec<String> = workload::TYPES.iter().map(|t| format!("outbox.event.{t}")).collect();
    let e2e = e2e::EndToEnd::start(broker, &topics, args.partitions)?;
    let mut out = Vec::new();
    for &rate in &args.rates {
        eprintln!("{relay}: {rate} events/s for {}s", args.steady_seconds);
        write_steadily(svc.pg_port, shape, rate, 2, workload::txn_sql).await?;
        tokio::time::sleep(Duration::from_millis(500)).await;
        e2e.take();
        let (relay_before, pg_before) = (procstat::usage(pid).cpu_seconds, postgres_cpu());
        let (written, _) = write_steadily(svc.pg_port, shape, rate, args.steady_seconds, workload::txn_sql).await?;
        tokio::time::sleep(Duration::from_secs(1)).await;
        let mut samples = e2e.take();
        out.push(Latency {
            relay,
            rate,
            delivered: samples.len().min(written),
            p50_ms: e2e::quantile_ms(&mut samples, 0.5),
            p99_ms: e2e::quantile_ms(&mut samples, 0.99),
            relay_cpu: procstat::usage(pid).cpu_seconds - relay_before,
            pg_cpu: postgres_cpu() - pg_before,
        });
    }
    Ok(out)
}

/// The trigger docs/operations.md gives for `pgoutbox.polling.notify.channel`.
const NOTIFY_TRIGGER: &str = "CREATE FUNCTION public.outbox_notify() RETURNS trigger LANGUAGE plpgsql \
     AS $$ BEGIN PERFORM pg_notify('outbox_events', ''); RETURN NULL; END $$; \
     CREATE TRIGGER outbox_notify AFTER INSERT ON public.outbox FOR EACH STATEMENT EXECUTE FUNCTION public.outbox_notify()";
const DROP_NOTIFY_TRIGGER: &str = "DROP TRIGGER outbox_notify ON public.outbox; DROP FUNCTION public.outbox_notify()";

/// The application's commit latency at `rate`, with or without a NOTIFY trigger on the outbox.
async fn commit_latency(svc: &env::Services, shape: &Shape, rate: usize, seconds: u64) -> anyhow::Result<Vec<String>> {
    let sql = workload::connect(svc.pg_port).await?;
    let mut lines = Vec::new();
    for notify in [false, true] {
        if notify {
            sql.batch_execute(NOTIFY_TRIGGER).await?;
        }
        let (written, mut lat) = write_steadily(svc.pg_port, shape, rate, seconds, workload::txn_sql).await?;
        let mut us = |q: f64| e2e::quantile_ms(&mut lat, q);
        lines.push(format!(
            "{:<28} {:>8.0} {:>10.2} {:>10.2} {:>10.2}",
            if notify { "with the NOTIFY trigger" } else { "without NOTIFY" },
            written as f64 / seconds as f64,
            us(0.5),
            us(0.99),
            us(0.999)
        ));
    }
    sql.batch_execute(DROP_NOTIFY_TRIGGER).await?;
    Ok(lines)
}

/// The poll's p50 (ms) over ten runs, each in a transaction rolled back after it; with `pending`,
/// 2,048 unpublished rows are inserted first (and rolled back with it).
async fn time_poll(
    sql: &tokio_postgres::Client,
    poll: &tokio_postgres::Statement,
    pending: bool,
) -> anyhow::Result<f64> {
    let mut times = Vec::new();
    for _ in 0..10 {
        sql.batch_execute("BEGIN").await?;
        if pending {
            sql.batch_execute(&workload::txn_sql(&Shape { payload_bytes: 400, per_txn: 2048, aggregates: 1000 }, 0))
                .await?;
        }
        let t = Instant::now();
        let rows = sql.query(poll, &[]).await?;
        times.push(t.elapsed().as_micros() as u64);
        anyhow::ensure!(rows.len() == if pending { 2048 } else { 0 }, "the poll read {} rows", rows.len());
        sql.batch_execute("ROLLBACK").await?;
    }
    Ok(e2e::quantile_ms(&mut times, 0.5))
}

/// Grows the (published) table to `target` rows and times the relay's poll query at each step: on
/// nothing unpublished, and on 2,048 unpublished rows (inserted and rolled back around the poll).
async fn growth(svc: &env::Services, target: usize) -> anyhow::Result<Vec<String>> {
    let sql = workload::connect(svc.pg_port).await?;
    // As the polling connection sets them (see pipeline::polling).
    sql.batch_execute("SET enable_seqscan = off; SET enable_bitmapscan = off").await?;
    let poll = sql
        .prepare(
            "SELECT o.tableoid::regclass::text, o.ctid::text, o.id::text, o.aggregatetype::text, o.aggregateid::text, \
             o.type::text, o.payload::text FROM public.outbox AS o WHERE o.published_at IS NULL ORDER BY o.seq LIMIT 2048 \
             FOR UPDATE SKIP LOCKED",
        )
        .await?;
    let mut lines = Vec::new();
    let mut step = 100_000;
    loop {
        let rows: i64 = sql.query_one("SELECT count(*) FROM public.outbox", &[]).await?.get(0);
        sql.batch_execute("VACUUM ANALYZE public.outbox").await?;
        let size: i64 = sql.query_one("SELECT pg_total_relation_size('public.outbox')", &[]).await?.get(0);
        let empty = time_poll(&sql, &poll, false).await?;
        let full = time_poll(&sql, &poll, true).await?;
        lines.push(format!(
            "{rows:>10} rows {:>9.1} MB   poll p50: {empty:.3} ms on nothing unpublished, {full:.2} ms for 2,048 rows",
            size as f64 / 1e6
        ));
        if rows as usize >= target {
            break;
        }
        let add = (step.min(target - rows as usize)) as i64;
        sql.execute(
            "INSERT INTO public.outbox (id, aggregatetype, aggregateid, type, payload, published_at) \
             SELECT gen_random_uuid(), 'Order', 'agg-' || (g % 1000), 'Created', \
                    jsonb_build_object('seq', g, 'note', repeat('x', 340)), now() FROM generate_series(1, $1::int8) g",
            &[&add],
        )
        .await?;
        step = (step * 2).min(500_000);
    }
    Ok(lines)
}

pub async fn run(args: &Args, root: &Path, bin: &Path) -> anyhow::Result<()> {
    let mut svc = env::Services::start(root.join("scripts"))?;
    let shape = Shape { payload_bytes: args.payload_bytes, per_txn: args.events_per_txn, aggregates: args.aggregates };
    let sql = workload::connect(svc.pg_port).await?;
    sql.batch_execute(&std::fs::read_to_string(root.join("sql/outbox.sql"))?).await?;
    sql.batch_execute(
        "ALTER TABLE public.outbox ADD COLUMN seq bigserial, ADD COLUMN published_at timestamptz; \
         CREATE INDEX outbox_unpublished ON public.outbox (seq) WHERE published_at IS NULL",
    )
    .await?;
    sql.batch_execute(&format!("CREATE PUBLICATION {} FOR TABLE public.outbox", crate::PUBLICATION)).await?;
    sql.execute("SELECT pg_create_logical_replication_slot('bench_pgoutbox', 'pgoutput')", &[]).await?;
    let broker = svc.broker("relays")?;
    crate::create_topics(&broker, args.partitions, 1).await?;
    eprintln!("writing a backlog of {} events", args.events);
    workload::backlog(svc.pg_port, &shape, args.events, args.concurrency).await?;
    let events: i64 = sql.query_one("SELECT count(*) FROM public.outbox", &[]).await?.get(0);
    let events = events as usize;

    let log_cfg = config(&svc, &broker, false)?;
    let poll_cfg = config(&svc, &broker, true)?;
    if let Ok(extra) = std::env::var("PGOUTBOX_BENCH_POLLING_EXTRA") {
        let mut text = std::fs::read_to_string(&poll_cfg)?;
        text.push_str(&extra.replace(';', "\n"));
        text.push('\n');
        std::fs::write(&poll_cfg, text)?;
    }
    // The same rows, drained by each: the log-tailing relay from the slot created before they were
    // written, the polling relay from the table.
    let (log_drain, mut log_child, _) = drain("log tailing", bin, &log_cfg, events).await?;
    crate::stop(&mut log_child);
    eprintln!("log tailing drained {events} events in {:.2}s", log_drain.seconds);
    let (poll_drain, mut poll_child, _) = drain("polling", bin, &poll_cfg, events).await?;
    crate::stop(&mut poll_child);
    eprintln!("polling drained {events} events in {:.2}s", poll_drain.seconds);

    // Steady state: the log-tailing relay skips the polling relay's marks; the polling relay finds
    // the log-tailing relay's steady writes already published.
    sql.execute("SELECT pg_replication_slot_advance('bench_pgoutbox', pg_current_wal_lsn())", &[]).await?;
    let mut log_child = crate::spawn_relay(bin, &log_cfg, &crate::free_addr()?, &log_cfg.with_extension("steady.log"))?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let log_steady = steady("log tailing", log_child.id(), &svc, &shape, args, &broker).await?;
    crate::stop(&mut log_child);
    sql.execute("UPDATE public.outbox SET published_at = now() WHERE published_at IS NULL", &[]).await?;
    let mut poll_child =
        crate::spawn_relay(bin, &poll_cfg, &crate::free_addr()?, &poll_cfg.with_extension("steady.log"))?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut poll_steady = steady("polling", poll_child.id(), &svc, &shape, args, &broker).await?;
    crate::stop(&mut poll_child);
    // The same with the NOTIFY wake-up (pgoutbox.polling.notify.channel and its trigger).
    sql.execute("UPDATE public.outbox SET published_at = now() WHERE published_at IS NULL", &[]).await?;
    sql.batch_execute(NOTIFY_TRIGGER).await?;
    let notify_cfg = poll_cfg.with_extension("notify.properties");
    std::fs::write(
        &notify_cfg,
        std::fs::read_to_string(&poll_cfg)? + "pgoutbox.polling.notify.channel=outbox_events\n",
    )?;
    let mut notify_child =
        crate::spawn_relay(bin, &notify_cfg, &crate::free_addr()?, &notify_cfg.with_extension("log"))?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    poll_steady.extend(steady("polling + NOTIFY", notify_child.id(), &svc, &shape, args, &broker).await?);
    crate::stop(&mut notify_child);
    sql.batch_execute(DROP_NOTIFY_TRIGGER).await?;

    let top = args.rates.iter().copied().max().unwrap_or(5000);
    let commits = commit_latency(&svc, &shape, top, args.steady_seconds).await?;
    // The commit-latency writes were not published by any relay: mark them, so the table is all
    // published before it grows.
    sql.execute("UPDATE public.outbox SET published_at = now() WHERE published_at IS NULL", &[]).await?;
    let growth = growth(&svc, args.polling_table_rows).await?;
    svc.stop_broker(&broker);

    let mut out = String::new();
    out.push_str("drain of one backlog                 events   seconds   events/s   relay CPU s   PostgreSQL CPU s\n");
    for d in [&log_drain, &poll_drain] {
        out.push_str(&d.row(32));
    }
    out.push_str(&format!(
        "polling / log tailing drain rate {:.2}\n\n",
        (poll_drain.events as f64 / poll_drain.seconds) / (log_drain.events as f64 / log_drain.seconds)
    ));
    out.push_str(
        "steady state (end to end)     events/s   delivered   p50 ms    p99 ms   relay CPU s   PostgreSQL CPU s\n",
    );
    for l in log_steady.iter().chain(&poll_steady) {
        out.push_str(&format!(
            "{:<28} {:>9} {:>11} {:>8.1} {:>9.1} {:>13.2} {:>18.2}\n",
            l.relay, l.rate, l.delivered, l.p50_ms, l.p99_ms, l.relay_cpu, l.pg_cpu
        ));
    }
    out.push_str(&format!(
        "\napplication commit latency at {top} events/s   events/s     p50 ms     p99 ms   p99.9 ms\n"
    ));
    for l in commits {
        out.push_str(&l);
        out.push('\n');
    }
    out.push_str("\nthe outbox table without pruning\n");
    for l in growth {
        out.push_str(&l);
        out.push('\n');
    }
    std::fs::create_dir_all(&args.out)?;
    std::fs::write(args.out.join("polling.txt"), &out)?;
    println!("{out}");
    Ok(())
}
