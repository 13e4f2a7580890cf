//! Migrating both ways between Kafka Connect + Debezium and pgoutbox through Connect's offsets topic,
//! under exactly once, with crashes at both hand-overs.
//!
//! The reference is Apache Kafka Connect itself (the suite's Kafka release, a distributed worker with
//! `exactly.once.source.support=enabled`) running the Debezium PostgreSQL connector from Maven Central
//! with the Outbox Event Router and `exactly.once.support=required`, on the suite's Apache Kafka. While
//! an application commits events:
//! 1. Connect publishes (with `flush.lsn.source=false`, so the slot stays behind Debezium's committed
//!    offset, as after a crash between the two), and its worker is killed with SIGKILL (an open Kafka
//!    transaction may be left);
//! 2. pgoutbox starts on the same slot with Connect's `group.id` (so the same `transactional.id`, which
//!    fences Connect's task), its `offset.storage.topic`, connector name and `topic.prefix`: it resumes
//!    exactly after Debezium's last committed offset. It is killed with SIGKILL too, with prompt
//!    confirmation off and a long status interval, so that the slot lags its committed offsets (the
//!    test checks that it does);
//! 3. Connect's worker starts again; Debezium reads pgoutbox's offset record and resumes after it.
//!
//! A consumer at `read_committed` must then see every committed event exactly once, each aggregate on
//! one partition in commit order; at `read_uncommitted` nothing is missing (aborted copies may show).

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use pgoutbox::config::parse_properties;
use pgoutbox::kafka::consume::{consume_all_with, ConsumedRecord};

use super::compare::{event_id, RUN_ID_HEADER};
use super::connect::Connect;
use super::debezium::tail;
use super::harness::{properties, scenario, Names};
use super::migration::{start_writer, wait_until};
use crate::support::{create_topics, java_partition, unique, Env, Relay};

/// Each relay publishes at least this many events before it is killed or the writer stops.
pub(super) const EVENTS_PER_PHASE: usize = 300;
pub(super) const PARTITIONS: i32 = 3;
/// Connect's JVM start plus the connector's (slot, publication, schema) on 2 busy cores.
pub(super) const CONNECT_DEADLINE: Duration = Duration::from_secs(240);

pub async fn run() {
    scenario("migration through Connect", "migration-connect", execute, broker_log_section).await;
}

/// The broker's log, as a failure report's last section.
pub(super) fn broker_log_section() -> String {
    format!("\n--- the broker's log:\n{}", broker_log())
}

/// The last lines of the suite's Kafka broker's log (warnings, and the transaction coordinator's
/// decisions: who was fenced, which transaction was rolled back).
fn broker_log() -> String {
    let Ok(dir) = std::env::var("PGOUTBOX_TEST_KAFKA") else { return "(PGOUTBOX_TEST_KAFKA is not set)".into() };
    let path = std::path::Path::new(&dir).join("node1").join("server.log");
    match std::fs::read_to_string(&path) {
        Ok(text) => tail(&text, 60),
        Err(e) => format!("({}: {e})", path.display()),
    }
}

/// The connector's properties, the harness's with this test's name and topics, and exactly once
/// when asked; the same for Connect and pgoutbox.
pub(super) fn connector(names: &Names, name: &str, prefix: &str, exactly_once: bool) -> String {
    let mut extra = vec![
        format!("name={name}"),
        "tasks.max=1".to_string(),
        format!("transforms.outbox.route.topic.replacement={prefix}.${{routedByValue}}"),
    ];
    if exactly_once {
        extra.push("exactly.once.support=required".to_string());
    }
    properties(names, &names.debezium_slot, &Env::get().broker, &extra)
}

/// Every record of `topics`, read from the beginning at `isolation`.
pub(super) fn read(broker: &str, topics: &[String], isolation: &str) -> Vec<ConsumedRecord> {
    let refs: Vec<&str> = topics.iter().map(String::as_str).collect();
    consume_all_with(
        broker,
        &[("isolation.level", isolation)],
        &refs,
        None,
        Duration::from_secs(3),
        Duration::from_secs(120),
    )
    .expect("read the broker back")
}

/// Committed records so far, per run id (one run id per relay process).
pub(super) fn committed_per_run(broker: &str, topics: &[String]) -> HashMap<Vec<u8>, usize> {
    let refs: Vec<&str> = topics.iter().map(String::as_str).collect();
    let records = consume_all_with(
        broker,
        &[("isolation.level", "read_committed")],
        &refs,
        None,
        Duration::from_millis(500),
        // While the writer runs the topics never go idle: what is read within this is enough.
        Duration::from_secs(3),
    )
    .unwrap_or_default();
    let mut runs = HashMap::new();
    for r in &records {
        *runs.entry(r.header(RUN_ID_HEADER).unwrap_or_default().to_vec()).or_insert(0) += 1;
    }
    runs
}

/// Waits (up to [`CONNECT_DEADLINE`]) until `total` distinct events can be read from `topics` at
/// `isolation`.
pub(super) async fn wait_all_read(
    broker: &str,
    topics: &[String],
    isolation: &'static str,
    total: usize,
) -> Result<(), String> {
    let (b, t) = (broker.to_string(), topics.to_vec());
    wait_until(&format!("every committed event to be read at {isolation}"), CONNECT_DEADLINE, move || {
        let records = tokio::task::block_in_place(|| read(&b, &t, isolation));
        let seen: std::collections::HashSet<String> = records.iter().map(event_id).collect();
        seen.len() >= total
    })
    .await
}

/// The newest committed offset record of connector `name` in `topic` (Connect's key
/// `["<name>",{"server":"dbserver1"}]`), as JSON.
pub(super) fn last_offset(broker: &str, topic: &str, name: &str) -> Option<serde_json::Value> {
    let records = consume_all_with(
        broker,
        &[("isolation.level", "read_committed")],
        &[topic],
        None,
        Duration::from_secs(2),
        Duration::from_secs(30),
    )
    .ok()?;
    let key = serde_json::json!([name, {"server": "dbserver1"}]);
    let mut ours: Vec<&ConsumedRecord> = records
        .iter()
        .filter(|r| {
            r.key.as_deref().and_then(|k| serde_json::from_slice::<serde_json::Value>(k).ok()) == Some(key.clone())
        })
        .collect();
    ours.sort_by_key(|r| (r.partition, r.offset));
    ours.last().and_then(|r| r.value.as_deref()).and_then(|v| serde_json::from_slice(v).ok())
}

/// `X/Y` as PostgreSQL prints an LSN.
pub(super) fn lsn(text: &str) -> u64 {
    let (hi, lo) = text.split_once('/').unwrap_or(("0", "0"));
    (u64::from_str_radix(hi, 16).unwrap_or(0) << 32) | u64::from_str_radix(lo, 16).unwrap_or(0)
}

pub(super) async fn confirmed_flush(slot: &str) -> Result<String, String> {
    let row = Env::get()
        .sql()
        .await
        .query_one("SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1", &[&slot])
        .await
        .map_err(|e| e.to_string())?;
    Ok(row.get::<_, Option<String>>(0).unwrap_or_default())
}

pub(super) async fn wait_for_new_run(
    what: &str,
    broker: &str,
    topics: &[String],
    known: &BTreeSet<Vec<u8>>,
    deadline: Duration,
    mut exited: impl FnMut() -> Option<String>,
) -> Result<Vec<u8>, String> {
    let start = Instant::now();
    loop {
        if let Some(status) = exited() {
            return Err(format!("{what} exited ({status}) before it committed {EVENTS_PER_PHASE} events"));
        }
        let (b, t) = (broker.to_string(), topics.to_vec());
        let runs = tokio::task::spawn_blocking(move || committed_per_run(&b, &t)).await.expect("reader");
        if let Some((run, _)) = runs.iter().find(|(run, n)| !known.contains(*run) && **n >= EVENTS_PER_PHASE) {
            return Ok(run.clone());
        }
        if start.elapsed() > deadline {
            return Err(format!(
                "timed out after {deadline:?} waiting for {what} to commit {EVENTS_PER_PHASE} events: {runs:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

async fn execute(names: Names) -> Result<String, String> {
    let env = Env::get();
    let prefix = unique("mig");
    let topics = vec![format!("{prefix}.Order"), format!("{prefix}.Customer")];
    create_topics(&env.broker, &topics, PARTITIONS).await;
    let name = format!("outbox-{prefix}");
    let text = connector(&names, &name, &prefix, true);

    // 1. Connect + Debezium, exactly once, until SIGKILL.
    let mut connect = tokio::task::block_in_place(|| {
        Connect::start(
            names.dir.join(unique("connect")),
            &env.broker,
            // A restarted worker is a new member: its connector is not held back for the old one.
            "exactly.once.source.support=enabled\nscheduled.rebalance.max.delay.ms=0",
        )
    });
    // Debezium leaves the slot where it is, so that only its offset record says how far it got:
    // pgoutbox must read it or publish Connect's share again.
    let mut keys = parse_properties(&text).entries;
    keys.insert("flush.lsn.source".into(), "false".into());
    tokio::task::block_in_place(|| connect.create(&name, &keys))?;
    let writer = start_writer(names.table.clone()).await;
    let mut known = BTreeSet::new();
    let connect_run = wait_for_new_run("Connect", &env.broker, &topics, &known, CONNECT_DEADLINE, || None)
        .await
        .map_err(|e| format!("{e}\n--- Connect:\n{}", connect.log_tail(60)))?;
    known.insert(connect_run.clone());
    tokio::task::block_in_place(|| connect.kill9());
    let offsets_topic = format!("{}-offsets", connect.group());
    let debezium_offset = tokio::task::block_in_place(|| last_offset(&env.broker, &offsets_topic, &name));
    let slot_after_connect = confirmed_flush(&names.debezium_slot).await?;
    let debezium_lsn = debezium_offset.as_ref().and_then(|o| o["lsn_proc"].as_u64()).unwrap_or(0);
    if debezium_lsn <= lsn(&slot_after_connect) {
        return Err(format!(
            "Debezium's committed offset {debezium_offset:?} is not ahead of the slot ({slot_after_connect}): the way to pgoutbox proves nothing"
        ));
    }

    // 2. pgoutbox, exactly once, on Connect's offsets topic and transactional id, until SIGKILL.
    let config = format!(
        "{text}group.id={}\noffset.storage.topic={offsets_topic}\nexactly.once.source.support=enabled\n\
         status.update.interval.ms=25000\n",
        connect.group()
    );
    // (With prompt confirmation off, the slot moves only at status updates: none after the first.)
    let pgoutbox_started = Instant::now();
    let mut relay = Relay::start_with_env(&config, &[], &[("PGOUTBOX_PROMPT_CONFIRM_MS", "0")]);
    let relay_log = |relay: &Relay| format!("--- pgoutbox:\n{}", tail(&relay.log_text(), 60));
    let pgoutbox_run = wait_for_new_run("pgoutbox", &env.broker, &topics, &known, Duration::from_secs(120), || {
        relay.wait(Duration::ZERO).map(|s| s.to_string())
    })
    .await
    .map_err(|e| format!("{e}\n{}", relay_log(&relay)))?;
    known.insert(pgoutbox_run.clone());
    // Its first confirmation goes out at once; then the slot stays put while pgoutbox goes on.
    let at = committed_per_run(&env.broker, &topics).get(&pgoutbox_run).copied().unwrap_or(0);
    let (b, t, run) = (env.broker.clone(), topics.clone(), pgoutbox_run.clone());
    // Generous: a producer whose acknowledgements stall (seen once in CI, 17 events for over 30 s)
    // fails its transaction after transaction.timeout.ms (60 s) and the next session resumes; what
    // this test checks is that nothing is duplicated or lost across that, not how fast.
    wait_until("pgoutbox to commit more events", Duration::from_secs(150), move || {
        let now = tokio::task::block_in_place(|| committed_per_run(&b, &t)).get(&run).copied().unwrap_or(0);
        now >= at + EVENTS_PER_PHASE
    })
    .await
    .map_err(|e| format!("{e}\n{}", relay_log(&relay)))?;
    let pgoutbox_ran = pgoutbox_started.elapsed();
    tokio::task::block_in_place(|| relay.kill9());
    // The premise of the way back: the slot lags pgoutbox's committed offset (prompt confirmation is
    // off), so a Debezium that ignored the offset record would publish the gap again.
    let pgoutbox_offset = tokio::task::block_in_place(|| last_offset(&env.broker, &offsets_topic, &name));
    let slot_after_pgoutbox = confirmed_flush(&names.debezium_slot).await?;
    let committed_lsn = pgoutbox_offset.as_ref().and_then(|o| o["lsn_commit"].as_u64()).unwrap_or(0);
    if committed_lsn <= lsn(&slot_after_pgoutbox) {
        return Err(format!(
            "pgoutbox's committed offset {pgoutbox_offset:?} is not ahead of the slot ({slot_after_pgoutbox}): the way back proves nothing\n{}",
            relay_log(&relay)
        ));
    }
    let sql = env.sql().await;

    // 3. The same Connect worker again: Debezium resumes from pgoutbox's offset record.
    let restarted = Instant::now();
    tokio::task::block_in_place(|| connect.restart());
    let back_run = wait_for_new_run("Connect after pgoutbox", &env.broker, &topics, &known, CONNECT_DEADLINE, || None)
        .await
        .map_err(|e| format!("{e}\n--- Connect:\n{}\n{}", connect.log_tail(60), relay_log(&relay)))?;
    let connect_back_after = restarted.elapsed();
    writer.stop.store(true, Ordering::SeqCst);
    writer.task.await.expect("writer task")?;
    let rows: Vec<(String, String, i64)> = sql
        .query(&format!("SELECT id::text, aggregateid, seq FROM {} ORDER BY seq", names.table), &[])
        .await
        .map_err(|e| e.to_string())?
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    let total = rows.len();
    wait_all_read(&env.broker, &topics, "read_committed", total)
        .await
        .map_err(|e| format!("{e}\n--- Connect:\n{}\n{}", connect.log_tail(60), relay_log(&relay)))?;
    tokio::task::block_in_place(|| connect.stop());

    let committed = tokio::task::block_in_place(|| read(&env.broker, &topics, "read_committed"));
    let uncommitted = tokio::task::block_in_place(|| read(&env.broker, &topics, "read_uncommitted"));
    let runs = [("Connect", &connect_run), ("pgoutbox", &pgoutbox_run), ("Connect again", &back_run)];
    let report = check(&rows, &committed, &uncommitted, &runs)
        .map_err(|e| format!("{e}\n--- Connect:\n{}\n{}", connect.log_tail(60), relay_log(&relay)))?;
    Ok(format!(
        "{report}; after Connect's kill: slot {slot_after_connect}, Debezium's offset {}; after pgoutbox's kill ({:.1} s after its start): slot {slot_after_pgoutbox}, pgoutbox's offset {}; Connect restarted and committed {EVENTS_PER_PHASE} events within {:.1} s",
        debezium_offset.map(|o| o.to_string()).unwrap_or_else(|| "none".into()),
        pgoutbox_ran.as_secs_f64(),
        pgoutbox_offset.map(|o| o.to_string()).unwrap_or_else(|| "none".into()),
        connect_back_after.as_secs_f64()
    ))
}

fn check(
    rows: &[(String, String, i64)],
    committed: &[ConsumedRecord],
    uncommitted: &[ConsumedRecord],
    runs: &[(&str, &Vec<u8>); 3],
) -> Result<String, String> {
    let seq_of: HashMap<&str, i64> = rows.iter().map(|r| (r.0.as_str(), r.2)).collect();
    let mut problems = Vec::new();
    let mut copies: HashMap<String, usize> = HashMap::new();
    for r in committed {
        *copies.entry(event_id(r)).or_insert(0) += 1;
    }
    let duplicates: Vec<(&String, &usize)> = copies.iter().filter(|(_, n)| **n > 1).collect();
    if !duplicates.is_empty() {
        problems.push(format!(
            "{} events more than once at read_committed, e.g. {:?}",
            duplicates.len(),
            &duplicates[..duplicates.len().min(5)]
        ));
    }
    let missing: Vec<&str> = rows.iter().map(|r| r.0.as_str()).filter(|id| !copies.contains_key(*id)).collect();
    if !missing.is_empty() {
        problems.push(format!(
            "{} committed events missing at read_committed, e.g. {:?}",
            missing.len(),
            &missing[..missing.len().min(5)]
        ));
    }
    let unknown = copies.keys().filter(|id| !seq_of.contains_key(id.as_str())).count();
    if unknown > 0 {
        problems.push(format!("{unknown} records at read_committed are not committed outbox rows"));
    }
    let seen_uncommitted: std::collections::HashSet<String> = uncommitted.iter().map(event_id).collect();
    let missing_uncommitted = rows.iter().filter(|r| !seen_uncommitted.contains(&r.0)).count();
    if missing_uncommitted > 0 {
        problems.push(format!("{missing_uncommitted} committed events missing at read_uncommitted"));
    }
    // Each aggregate on the partition Java's murmur2 picks, in commit order there.
    let mut by_key: HashMap<&[u8], Vec<&ConsumedRecord>> = HashMap::new();
    for r in committed {
        by_key.entry(r.key.as_deref().unwrap_or_default()).or_default().push(r);
    }
    let mut out_of_order = 0;
    for (key, records) in &mut by_key {
        let expected = java_partition(key, PARTITIONS);
        if records.iter().any(|r| r.partition != expected) {
            problems.push(format!("aggregate {:?} is not only on partition {expected}", String::from_utf8_lossy(key)));
        }
        records.sort_by_key(|r| (r.partition, r.offset));
        let seqs: Vec<i64> = records.iter().map(|r| seq_of.get(event_id(r).as_str()).copied().unwrap_or(0)).collect();
        out_of_order += seqs.windows(2).filter(|w| w[0] > w[1]).count();
    }
    if out_of_order > 0 {
        problems.push(format!("{out_of_order} events of an aggregate follow a later one"));
    }
    let per_run: Vec<String> = runs
        .iter()
        .map(|(who, run)| {
            let n = committed.iter().filter(|r| r.header(RUN_ID_HEADER) == Some(run.as_slice())).count();
            format!("{who} {n}")
        })
        .collect();
    let other = committed
        .iter()
        .filter(|r| !runs.iter().any(|(_, run)| r.header(RUN_ID_HEADER) == Some(run.as_slice())))
        .count();
    if !problems.is_empty() {
        return Err(format!(
            "{} problem(s) (published: {}, other runs {other}):\n{}",
            problems.len(),
            per_run.join(", "),
            problems.join("\n")
        ));
    }
    Ok(format!(
        "{} committed events each exactly once at read_committed (published by {}, other runs {other}), none missing at read_uncommitted ({} records there), {} aggregates each on one partition in commit order",
        rows.len(),
        per_run.join(", "),
        uncommitted.len(),
        by_key.len()
    ))
}
