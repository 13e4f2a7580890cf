//! `--messages`: the table outbox and the message outbox side by side, in one run, on the same
//! PostgreSQL and the same broker, with the same events (`--events`, default 1,000,000 here):
//! - the database's cost of writing them: time, WAL bytes per event, PostgreSQL CPU, and the table's
//!   and its indexes' size afterwards (the message outbox has none: its events live in the WAL only);
//! - the relay draining each backlog (events/s, relay CPU), from a slot created just before it;
//!   unless `--skip-debezium`, Debezium (embedded engine, same connector configuration) too, each
//!   backlog from a slot of its own created at the same point, on a broker of its own;
//! - the application's transaction time at a fixed rate (the highest of `--rates`) for each form.

use std::path::Path;
use std::time::Instant;

use crate::polling::{drain, postgres_cpu, write_steadily};
use crate::workload::{self, Shape, TYPES};
use crate::{e2e, env, Args};

const MESSAGE_PUBLICATION: &str = "bench_msg_pub";

/// One transaction's events `first..first + per_txn` as transactional logical decoding messages
/// (the same events `workload::txn_sql` inserts as rows).
pub fn message_txn_sql(shape: &Shape, first: usize) -> String {
    let mut values = Vec::with_capacity(shape.per_txn);
    for n in first..first + shape.per_txn {
        let agg = n % shape.aggregates;
        let sent = e2e::now_us();
        let head = format!(
            r#"{{"seq": {n}, "sent_us": {sent}, "orderId": "agg-{agg}", "customer": {{"id": {agg}, "name": "Customer {agg}"}}, "note": ""#
        );
        let fill = shape.payload_bytes.saturating_sub(head.len() + 2);
        values.push(format!(
            r#"('{{"id": "{}", "aggregatetype": "{}", "aggregateid": "agg-{agg}", "type": "Created", "payload": {head}{}"}}}}')"#,
            uuid::Uuid::now_v7(),
            TYPES[agg % TYPES.len()],
            "x".repeat(fill)
        ));
    }
    format!("SELECT pg_logical_emit_message(true, 'outbox', m) FROM (VALUES {}) AS v(m)", values.join(", "))
}

struct Written {
    form: &'static str,
    events: usize,
    seconds: f64,
    wal_bytes: u64,
    pg_cpu: f64,
    /// Table and index bytes after the writes (`pg_total_relation_size`), 0 for messages.
    relation_bytes: i64,
}

async fn wal_lsn(sql: &tokio_postgres::Client) -> anyhow::Result<u64> {
    let lsn: String = sql.query_one("SELECT pg_current_wal_lsn()::text", &[]).await?.get(0);
    Ok(lsn.parse::<pgoutbox::lsn::Lsn>().map_err(|e| anyhow::anyhow!("{e}"))?.0)
}

/// Writes the backlog as `form`, `concurrency` connections as fast as they go.
async fn write(
    sql: &tokio_postgres::Client,
    port: u16,
    shape: &Shape,
    args: &Args,
    form: &'static str,
    txn: fn(&Shape, usize) -> String,
) -> anyhow::Result<Written> {
    sql.batch_execute("CHECKPOINT").await?;
    let (lsn0, cpu0, start) = (wal_lsn(sql).await?, postgres_cpu(), Instant::now());
    // The connections stay open until the CPU is read: an ended backend's CPU leaves /proc with it.
    let clients = workload::write_backlog(port, shape, args.events, args.concurrency, txn).await?;
    let seconds = start.elapsed().as_secs_f64();
    let (wal_bytes, pg_cpu) = (wal_lsn(sql).await? - lsn0, postgres_cpu() - cpu0);
    drop(clients);
    // Their backends end on their own time: not inside the next measurement (their CPU would leave
    // /proc there and count as negative).
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let relation_bytes: i64 = match form {
        "table" => sql.query_one("SELECT pg_total_relation_size('public.outbox')", &[]).await?.get(0),
        _ => 0,
    };
    Ok(Written {
        form,
        events: args.events.div_ceil(shape.per_txn) * shape.per_txn,
        seconds,
        wal_bytes,
        pg_cpu,
        relation_bytes,
    })
}

/// The messages-only connector: the bench's connector with the message publication, no table and
/// the message transform before the router.
fn message_config(svc: &env::Services, name: &str, broker: &str, slot: &str) -> anyhow::Result<std::path::PathBuf> {
    let path = crate::write_config(svc, name, broker, slot)?;
    let text = std::fs::read_to_string(&path)?
        .replace(
            &format!("publication.name={}\npublication.autocreate.mode=disabled\ntable.include.list=public.outbox\n", crate::PUBLICATION),
            &format!("publication.name={MESSAGE_PUBLICATION}\npublication.autocreate.mode=no_tables\n"),
        )
        .replace(
            "transforms=outbox\n",
            "transforms=decode,outbox\ntransforms.decode.type=io.debezium.connector.postgresql.transforms.DecodeLogicalDecodingMessageContent\n",
        );
    std::fs::write(&path, text)?;
    Ok(path)
}

pub async fn run(args: &Args, root: &Path, bin: &Path) -> anyhow::Result<()> {
    let mut svc = env::Services::start(root.join("scripts"))?;
    let shape = Shape { payload_bytes: args.payload_bytes, per_txn: args.events_per_txn, aggregates: args.aggregates };
    let sql = workload::connect(svc.pg_port).await?;
    sql.batch_execute(&std::fs::read_to_string(root.join("sql/outbox.sql"))?).await?;
    sql.batch_execute(&format!(
        "CREATE PUBLICATION {} FOR TABLE public.outbox; CREATE PUBLICATION {MESSAGE_PUBLICATION}",
        crate::PUBLICATION
    ))
    .await?;
    let broker = svc.broker("relays")?;
    crate::create_topics(&broker, args.partitions, 1).await?;
    let concurrency = args.concurrency;

    // Each slot is created just before its backlog, so each relay drains exactly its own events.
    let debezium = !args.skip_debezium;
    let slots = |form: &str| {
        if debezium {
            vec![format!("bench_{form}"), format!("bench_dbz_{form}")]
        } else {
            vec![format!("bench_{form}")]
        }
    };
    for slot in slots("table") {
        sql.execute("SELECT pg_create_logical_replication_slot($1, 'pgoutput')", &[&slot]).await?;
    }
    eprintln!("writing {} events as outbox rows", args.events);
    let table = write(&sql, svc.pg_port, &shape, args, "table", workload::txn_sql).await?;
    for slot in slots("messages") {
        sql.execute("SELECT pg_create_logical_replication_slot($1, 'pgoutput')", &[&slot]).await?;
    }
    eprintln!("writing {} events as logical decoding messages", args.events);
    let messages = write(&sql, svc.pg_port, &shape, args, "messages", message_txn_sql).await?;

    let table_cfg = crate::write_config(&svc, "table-outbox", &broker, "bench_table")?;
    let message_cfg = message_config(&svc, "message-outbox", &broker, "bench_messages")?;
    let (table_drain, mut child, _) = drain("table outbox", bin, &table_cfg, table.events).await?;
    crate::stop(&mut child);
    eprintln!("the table outbox drained in {:.2}s", table_drain.seconds);
    let (message_drain, mut child, _) = drain("message outbox", bin, &message_cfg, messages.events).await?;
    crate::stop(&mut child);
    eprintln!("the message outbox drained in {:.2}s", message_drain.seconds);
    let mut drains = vec![table_drain, message_drain];
    if debezium {
        for (relay, form, events) in [
            ("Debezium, table outbox", "table", table.events),
            ("Debezium, message outbox", "messages", messages.events),
        ] {
            let dbz_broker = svc.broker(&format!("debezium-{form}"))?;
            crate::create_topics(&dbz_broker, args.partitions, 1).await?;
            let (name, slot) = (format!("debezium-{form}"), format!("bench_dbz_{form}"));
            let cfg = match form {
                "table" => crate::write_config(&svc, &name, &dbz_broker, &slot)?,
                _ => message_config(&svc, &name, &dbz_broker, &slot)?,
            };
            // Its walsender's CPU is not read: the engine stops inside, and the CPU leaves with it.
            let c = crate::debezium_catch_up(root, &cfg, events)?;
            svc.stop_broker(&dbz_broker);
            let relay_cpu = c.usage.as_ref().map_or(0.0, |u| u.cpu_seconds);
            eprintln!("{relay} drained in {:.2}s", c.drain.as_secs_f64());
            drains.push(crate::polling::Drain {
                relay,
                events,
                seconds: c.drain.as_secs_f64(),
                relay_cpu,
                pg_cpu: None,
            });
        }
    }
    // The steady writes below are not relayed: the slots would hold their WAL.
    for slot in slots("table").into_iter().chain(slots("messages")) {
        sql.execute("SELECT pg_drop_replication_slot($1)", &[&slot]).await?;
    }

    let top = args.rates.iter().copied().max().unwrap_or(5000);
    let mut commits = Vec::new();
    for (form, txn) in [("table", workload::txn_sql as fn(&Shape, usize) -> String), ("messages", message_txn_sql)] {
        let (written, mut lat) = write_steadily(svc.pg_port, &shape, top, args.steady_seconds, txn).await?;
        let mut q = |q: f64| e2e::quantile_ms(&mut lat, q);
        commits.push(format!(
            "{form:<28} {:>8.0} {:>10.2} {:>10.2} {:>10.2}",
            written as f64 / args.steady_seconds as f64,
            q(0.5),
            q(0.99),
            q(0.999)
        ));
    }
    svc.stop_broker(&broker);

    let mut out = format!(
        "{} events of ~{} payload bytes, {} per transaction, {} connections\n\n",
        args.events, args.payload_bytes, args.events_per_txn, concurrency
    );
    out.push_str(
        "writing the events          seconds   events/s   WAL bytes/event   PostgreSQL CPU s   table+indexes MB\n",
    );
    for w in [&table, &messages] {
        out.push_str(&format!(
            "{:<24} {:>10.2} {:>10.0} {:>17.0} {:>18.2} {:>18.1}\n",
            w.form,
            w.seconds,
            w.events as f64 / w.seconds,
            w.wal_bytes as f64 / w.events as f64,
            w.pg_cpu,
            w.relation_bytes as f64 / 1e6
        ));
    }
    out.push_str("\nrelay drain                     events   seconds   events/s   relay CPU s   PostgreSQL CPU s\n");
    for d in &drains {
        out.push_str(&d.row(28));
    }
    if debezium {
        out.push_str("(Debezium: from streaming to its last acknowledged record; its CPU includes the JVM's start)\n");
    }
    out.push_str(&format!(
        "\napplication transaction time at {top} events/s   events/s     p50 ms     p99 ms   p99.9 ms\n"
    ));
    for l in commits {
        out.push_str(&l);
        out.push('\n');
    }
    std::fs::create_dir_all(&args.out)?;
    std::fs::write(args.out.join("messages.txt"), &out)?;
    println!("{out}");
    Ok(())
}
