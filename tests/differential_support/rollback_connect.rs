//! Rolling back from pgoutbox (at least once) to Kafka Connect + Debezium, as docs/operations.md tells
//! an operator to: stop pgoutbox, start the connector on the same slot and offsets topic.
//!
//! pgoutbox streams on Connect's offsets topic under the connector's name while an application
//! commits events, long enough for the slot's `restart_lsn` to pass the position pgoutbox started
//! from; it is stopped gracefully (SIGTERM), and the connector is created in Apache Kafka Connect
//! (Debezium 3.7.1, its default `offset.mismatch.strategy=no_validation`). Debezium resumes from the
//! offset it finds there (pgoutbox's record) after checking that the slot still holds the WAL from
//! that offset on. It must start, publish what follows, and publish nothing twice: a graceful
//! stop confirmed and recorded every event pgoutbox published.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use pgoutbox::config::parse_properties;

use super::compare::event_id;
use super::connect::Connect;
use super::debezium::tail;
use super::harness::{scenario, Names};
use super::migration::start_writer;
use super::migration_connect::{
    broker_log_section, committed_per_run, connector, last_offset, lsn, read, wait_all_read, wait_for_new_run,
    CONNECT_DEADLINE, EVENTS_PER_PHASE, PARTITIONS,
};
use crate::support::{create_topics, unique, Env, Relay};

pub async fn run() {
    scenario("rollback to Connect", "rollback-connect", execute, broker_log_section).await;
}

/// The slot's `restart_lsn` and `confirmed_flush_lsn`.
async fn slot_positions(slot: &str) -> Result<(u64, u64), String> {
    let row = Env::get()
        .sql()
        .await
        .query_one(
            "SELECT restart_lsn::text, confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1",
            &[&slot],
        )
        .await
        .map_err(|e| e.to_string())?;
    let text = |i: usize| row.get::<_, Option<String>>(i).unwrap_or_default();
    Ok((lsn(&text(0)), lsn(&text(1))))
}

/// The connector's task state in Connect and its trace, when it failed.
fn task_failed(connect: &Connect, name: &str) -> Option<String> {
    let (code, body) = connect.call("GET", &format!("/connectors/{name}/status"), "");
    if code != 200 {
        return None;
    }
    let status: serde_json::Value = serde_json::from_str(&body).ok()?;
    let failed = |s: &serde_json::Value| s["state"] == "FAILED";
    let task = status["tasks"].as_array().and_then(|t| t.iter().find(|t| failed(t)).cloned());
    match task {
        Some(t) => Some(format!("task FAILED: {}", t["trace"].as_str().unwrap_or_default())),
        None if failed(&status["connector"]) => Some(format!("connector FAILED: {}", status["connector"]["trace"])),
        None => None,
    }
}

async fn execute(names: Names) -> Result<String, String> {
    let env = Env::get();
    let prefix = unique("rb");
    let topics = vec![format!("{prefix}.Order"), format!("{prefix}.Customer")];
    create_topics(&env.broker, &topics, PARTITIONS).await;
    let name = format!("outbox-{prefix}");
    let text = connector(&names, &name, &prefix, false);
    // Connect's worker first: its offsets topic is the one pgoutbox records in.
    let connect = tokio::task::block_in_place(|| {
        Connect::start(names.dir.join(unique("connect")), &env.broker, "scheduled.rebalance.max.delay.ms=0")
    });
    let offsets_topic = format!("{}-offsets", connect.group());

    // 1. pgoutbox, at least once, until the slot has moved well past where it started.
    let mut relay = Relay::start(&format!("{text}offset.storage.topic={offsets_topic}\n"));
    let relay_log = |relay: &Relay| format!("--- pgoutbox:\n{}", tail(&relay.log_text(), 40));
    let writer = start_writer(names.table.clone()).await;
    let known = BTreeSet::new();
    let pgoutbox_run = wait_for_new_run("pgoutbox", &env.broker, &topics, &known, Duration::from_secs(120), || {
        relay.wait(Duration::ZERO).map(|s| s.to_string())
    })
    .await
    .map_err(|e| format!("{e}\n{}", relay_log(&relay)))?;
    let started_at = last_offset(&env.broker, &offsets_topic, &name)
        .and_then(|o| o["lsn_proc"].as_u64())
        .ok_or_else(|| format!("pgoutbox recorded no offset in `{offsets_topic}`\n{}", relay_log(&relay)))?;
    // A checkpoint logs the running transactions, from which the slot's restart_lsn moves once
    // pgoutbox confirms past them.
    let sql = env.sql().await;
    let moved = Instant::now();
    loop {
        sql.batch_execute("CHECKPOINT").await.map_err(|e| e.to_string())?;
        tokio::time::sleep(Duration::from_secs(1)).await;
        let (restart, _) = slot_positions(&names.debezium_slot).await?;
        if restart > started_at {
            break;
        }
        if moved.elapsed() > Duration::from_secs(90) {
            return Err(format!(
                "the slot's restart_lsn ({restart}) never passed pgoutbox's start ({started_at}): the rollback proves nothing"
            ));
        }
    }

    // 2. A graceful stop, as an operator rolls back.
    let status = tokio::task::block_in_place(|| relay.stop());
    if !status.success() {
        return Err(format!("pgoutbox's stop failed: {status}\n{}", relay_log(&relay)));
    }
    let (restart, confirmed) = slot_positions(&names.debezium_slot).await?;
    let recorded = last_offset(&env.broker, &offsets_topic, &name);
    let recorded_lsn = recorded.as_ref().and_then(|o| o["lsn_proc"].as_u64()).unwrap_or(0);

    // 3. The connector in Connect, on the same slot and offsets topic.
    let rolled_back = Instant::now();
    tokio::task::block_in_place(|| connect.create(&name, &parse_properties(&text).entries))?;
    let mut known = BTreeSet::new();
    known.insert(pgoutbox_run.clone());
    let connect_run =
        wait_for_new_run("Connect after pgoutbox", &env.broker, &topics, &known, CONNECT_DEADLINE, || {
            task_failed(&connect, &name)
        })
        .await
        .map_err(|e| {
            format!(
                "{e}\nafter pgoutbox's stop: slot restart_lsn {restart}, confirmed {confirmed}; pgoutbox's offset record {recorded:?}\n--- Connect:\n{}\n{}",
                connect.log_tail(40),
                relay_log(&relay)
            )
        })?;
    let connect_after = rolled_back.elapsed();
    writer.stop.store(true, Ordering::SeqCst);
    writer.task.await.expect("writer task")?;
    let ids: Vec<String> = sql
        .query(&format!("SELECT id::text FROM {} ORDER BY seq", names.table), &[])
        .await
        .map_err(|e| e.to_string())?
        .iter()
        .map(|r| r.get(0))
        .collect();
    let total = ids.len();
    wait_all_read(&env.broker, &topics, "read_uncommitted", total)
        .await
        .map_err(|e| format!("{e}\n--- Connect:\n{}", connect.log_tail(40)))?;
    tokio::task::block_in_place(|| connect.stop());
    let records = tokio::task::block_in_place(|| read(&env.broker, &topics, "read_uncommitted"));
    let mut copies: HashMap<String, usize> = HashMap::new();
    for r in &records {
        *copies.entry(event_id(r)).or_insert(0) += 1;
    }
    let missing = ids.iter().filter(|id| !copies.contains_key(*id)).count();
    let twice = copies.values().filter(|n| **n > 1).count();
    let runs = committed_per_run(&env.broker, &topics);
    let summary = format!(
        "{total} events, {missing} missing, {twice} published twice (pgoutbox {}, Connect {}); after pgoutbox's stop: slot restart_lsn {restart} > its start {started_at}, confirmed {confirmed}, its offset record at {recorded_lsn}; Connect published {EVENTS_PER_PHASE} events within {:.1} s",
        runs.get(&pgoutbox_run).copied().unwrap_or(0),
        runs.get(&connect_run).copied().unwrap_or(0),
        connect_after.as_secs_f64()
    );
    if missing > 0 || twice > 0 {
        return Err(summary);
    }
    Ok(summary)
}
