//! `--exactly-once`: the log-tailing relay with Kafka transactions (exactly.once.source.support=enabled)
//! beside the same relay without them, in one run, on Apache Kafka (transactions need it; tansu has
//! none):
//! - catch-up: the same backlog drained by each (one slot each, created before the backlog was
//!   written), events/s and the relay's CPU, and their ratio;
//! - steady state at each of `--rates`: end-to-end latency (application send to a `read_committed`
//!   consumer) and commit-to-acknowledgement latency (under exactly once, to the Kafka commit that
//!   confirms the transaction) for each.

use std::path::Path;

use crate::report::{Contender, SteadyRun};
use crate::workload::{self, Shape};
use crate::{create_topics, env, pgoutbox_catch_up, write_config, Args, Steady, PUBLICATION};

const SLOTS: [&str; 2] = ["bench_at_least_once", "bench_exactly_once"];

pub async fn run(args: &Args, root: &Path, relay_bin: &Path) -> anyhow::Result<()> {
    let mut svc = env::Services::start(root.join("scripts"))?;
    let kafka = svc.kafka("eos", args.kafka_nodes)?;
    eprintln!("Apache Kafka, {} broker(s): {kafka}", args.kafka_nodes);
    let shape = Shape { payload_bytes: args.payload_bytes, per_txn: args.events_per_txn, aggregates: args.aggregates };
    let sql = workload::connect(svc.pg_port).await?;
    sql.batch_execute(&std::fs::read_to_string(root.join("sql/outbox.sql"))?).await?;
    sql.batch_execute(&format!("CREATE PUBLICATION {PUBLICATION} FOR TABLE public.outbox")).await?;
    for slot in SLOTS.iter().chain(&["bench_warm_up"]) {
        sql.execute("SELECT pg_create_logical_replication_slot($1, 'pgoutput')", &[&slot]).await?;
    }
    create_topics(&kafka, args.partitions, args.kafka_nodes.min(3) as i32).await?;
    eprintln!("writing a backlog of {} events ({} per transaction)", args.events, args.events_per_txn);
    workload::backlog(svc.pg_port, &shape, args.events, args.concurrency).await?;
    let events: i64 = sql.query_one("SELECT count(*) FROM public.outbox", &[]).await?.get(0);
    let events = events as usize;

    let replication = args.kafka_nodes.min(3).to_string();
    let at_least_once = write_config(&svc, "at-least-once", &kafka, SLOTS[0])?;
    let exactly_once = write_config(&svc, "exactly-once", &kafka, SLOTS[1])?;
    let mut text = std::fs::read_to_string(&exactly_once)?;
    text.push_str(&format!(
        "exactly.once.source.support=enabled\nexactly.once.support=required\noffset.storage.replication.factor={replication}\n"
    ));
    std::fs::write(&exactly_once, text)?;
    let mut text = std::fs::read_to_string(&at_least_once)?;
    text.push_str(&format!("offset.storage.replication.factor={replication}\n"));
    std::fs::write(&at_least_once, text)?;

    // The broker's first run pays for its JIT and page cache: a run that is not counted goes first.
    let warm_up = write_config(&svc, "warm-up", &kafka, "bench_warm_up")?;
    pgoutbox_catch_up(relay_bin, &warm_up, events).await?;
    let mut drains: Vec<(&str, Contender)> = Vec::new();
    for (name, cfg) in [("at least once", &at_least_once), ("exactly once", &exactly_once)] {
        let c = pgoutbox_catch_up(relay_bin, cfg, events).await?;
        eprintln!("catch-up, {name}: {}", c.line());
        drains.push((name, c));
    }
    let mut steady: Vec<(&str, SteadyRun)> = Vec::new();
    if !args.skip_steady {
        let s = Steady { pg_port: svc.pg_port, shape: &shape, args, sql: &sql };
        for (name, slot, cfg) in
            [("at least once", SLOTS[0], &at_least_once), ("exactly once", SLOTS[1], &exactly_once)]
        {
            steady.push((name, s.pgoutbox_on(slot, relay_bin, cfg, &kafka).await?));
        }
    }

    println!(
        "\n## Exactly once vs at least once (Apache Kafka, {} broker(s), {} partitions, {} events, {} per transaction, ~{} B payloads)\n",
        args.kafka_nodes, args.partitions, events, args.events_per_txn, args.payload_bytes
    );
    println!("| catch-up | events/s | drain s | relay CPU s | CPU us/event |");
    println!("|---|---|---|---|---|");
    for (name, c) in &drains {
        let cpu = c.usage.as_ref().map_or(0.0, |u| u.cpu_seconds);
        println!(
            "| {name} | {:.0} | {:.2} | {:.2} | {:.1} |",
            c.events_per_sec(),
            c.drain.as_secs_f64(),
            cpu,
            cpu * 1e6 / c.events as f64
        );
    }
    if let [(_, alo), (_, eos)] = &drains[..] {
        println!(
            "\nexactly once / at least once, catch-up throughput: {:.2}x",
            eos.events_per_sec() / alo.events_per_sec()
        );
    }
    for (name, run) in &steady {
        println!("\nsteady state, {name}:");
        for w in &run.windows {
            println!("  {}", w.line());
        }
    }
    Ok(())
}
