//! Migrating a live outbox from Debezium to pgoutbox, as README "Migrating from Kafka Connect +
//! Debezium" describes it: Debezium streams from a slot while a writer commits events, Debezium is
//! stopped mid-stream (SIGTERM), pgoutbox starts on the same slot, publication and broker, and the
//! writer finishes. The broker must then hold every committed event; the only duplicates allowed are
//! the tail of Debezium's output that it had not yet confirmed to PostgreSQL (its offset-flush window),
//! re-sent by pgoutbox with identical bytes; and every aggregate stays on one partition.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pgoutbox::kafka::consume::ConsumedRecord;

use super::broker::Broker;
use super::case::{insert, tx};
use super::compare::{describe, diff_records, event_id, is_uuid_v7, Checks, RUN_ID_HEADER};
use super::debezium::{tail, Debezium};
use super::harness::{properties, read_all, scenario, Names, DEBEZIUM_DEADLINE, PGOUTBOX_DEADLINE};
use crate::support::{create_topics, java_partition, Env, Relay};

/// Debezium is stopped once it has produced this many records.
const STOP_DEBEZIUM_AFTER: u64 = 400;
/// The writer keeps going until pgoutbox has been streaming for this many more events.
const EVENTS_AFTER_SWITCH: usize = 400;
/// Upper bound on the writer's transactions, in case the relays never get going.
const MAX_TRANSACTIONS: usize = 20_000;
const AGGREGATES: usize = 40;
const PARTITIONS: i32 = 3;

pub async fn run() {
    scenario("migration", "migration", execute, String::new).await;
}

pub(super) struct Writer {
    pub(super) stop: Arc<AtomicBool>,
    pub(super) written: Arc<AtomicUsize>,
    pub(super) task: tokio::task::JoinHandle<Result<(), String>>,
}

/// Commits transactions of 1-3 events over AGGREGATES aggregates until told to stop.
pub(super) async fn start_writer(table: String) -> Writer {
    let sql = Env::get().sql().await;
    let stop = Arc::new(AtomicBool::new(false));
    let written = Arc::new(AtomicUsize::new(0));
    let (s, w) = (stop.clone(), written.clone());
    let task = tokio::spawn(async move {
        for i in 0..MAX_TRANSACTIONS {
            if s.load(Ordering::SeqCst) {
                break;
            }
            let events = 1 + i % 3;
            let stmts: Vec<String> = (0..events)
                .map(|e| {
                    let agg = (i * 3 + e) % AGGREGATES;
                    let kind = if agg % 2 == 0 { "Order" } else { "Customer" };
                    insert(
                        kind,
                        Some(&format!("agg-{agg}")),
                        Some(&format!(r#"{{"tx": {i}, "e": {e}, "note": "é\"✓"}}"#)),
                    )
                })
                .collect();
            sql.batch_execute(&tx(&stmts).replace("{t}", &table)).await.map_err(|e| format!("writer: {e}"))?;
            w.fetch_add(events, Ordering::SeqCst);
            // Pacing, not waiting: a steady stream of small transactions, as a service would write them.
            tokio::time::sleep(Duration::from_millis(3)).await;
        }
        Ok(())
    });
    Writer { stop, written, task }
}

pub(super) async fn wait_until(what: &str, deadline: Duration, mut cond: impl FnMut() -> bool) -> Result<(), String> {
    let start = Instant::now();
    while !cond() {
        if start.elapsed() > deadline {
            return Err(format!("timed out after {deadline:?} waiting for {what}"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

async fn execute(names: Names) -> Result<String, String> {
    let broker = Broker::start(&names.dir.join("broker"));
    let topics = vec!["outbox.event.Order".to_string(), "outbox.event.Customer".to_string()];
    create_topics(&broker.addr, &topics, PARTITIONS).await;
    let config = properties(&names, &names.debezium_slot, &broker.addr, &[]);
    let config_path = names.dir.join("connector.properties");
    std::fs::write(&config_path, &config).expect("write config");

    let writer = start_writer(names.table.clone()).await;
    let mut dbz = Debezium::start(&config_path, &names.dir.join("debezium.log"));
    let dbz_log = |dbz: &Debezium| format!("--- Debezium log:\n{}", dbz.log_tail(40));
    dbz.wait_records(STOP_DEBEZIUM_AFTER, DEBEZIUM_DEADLINE).await.map_err(|e| format!("{e}\n{}", dbz_log(&dbz)))?;
    let dbz_exit = dbz.stop().await.map_err(|e| format!("{e}\n{}", dbz_log(&dbz)))?;
    let dbz_acked = dbz.records();
    let sql = Env::get().sql().await;
    let flushed: Option<String> = sql
        .query_one(
            "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1",
            &[&names.debezium_slot],
        )
        .await
        .map_err(|e| e.to_string())?
        .get(0);

    let mut relay = Relay::start(&config);
    let relay_log = |relay: &Relay| format!("--- pgoutbox log:\n{}", tail(&relay.log_text(), 40));
    tokio::task::block_in_place(|| relay.wait_for_log("streaming", Duration::from_secs(60)));
    let at_switch = writer.written.load(Ordering::SeqCst);
    let written = writer.written.clone();
    let more = wait_until("the writer to continue under pgoutbox", PGOUTBOX_DEADLINE, || {
        written.load(Ordering::SeqCst) >= at_switch + EVENTS_AFTER_SWITCH
    })
    .await;
    writer.stop.store(true, Ordering::SeqCst);
    writer.task.await.expect("writer task")?;
    more?;

    let rows: Vec<(String, String, i64)> = sql
        .query(&format!("SELECT id::text, aggregateid, seq FROM {} ORDER BY seq", names.table), &[])
        .await
        .map_err(|e| e.to_string())?
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    let all_ids: HashSet<&str> = rows.iter().map(|r| r.0.as_str()).collect();
    // Until every committed event is in the broker (duplicates make the count a lower bound only).
    let start = Instant::now();
    loop {
        let records = read_all(broker.addr.clone(), rows.len()).await;
        let seen: HashSet<String> = records.iter().map(event_id).collect();
        if all_ids.iter().all(|id| seen.contains(*id)) {
            break;
        }
        if start.elapsed() > PGOUTBOX_DEADLINE {
            let missing = all_ids.iter().filter(|id| !seen.contains(**id)).count();
            return Err(format!(
                "{missing} of {} committed events never reached the broker\n{}",
                rows.len(),
                relay_log(&relay)
            ));
        }
    }
    let pgo_exit = tokio::task::block_in_place(|| relay.stop());
    if pgo_exit.code() != Some(0) {
        return Err(format!("pgoutbox exited with {pgo_exit}\n{}", relay_log(&relay)));
    }
    let records = read_all(broker.addr.clone(), rows.len()).await;
    let report = check(&rows, &records).map_err(|e| format!("{e}\n{}\n{}", dbz_log(&dbz), relay_log(&relay)))?;
    Ok(format!(
        "{report}; Debezium acknowledged {dbz_acked} records before SIGTERM ({dbz_exit}), slot confirmed_flush_lsn after it stopped: {}; \
         {at_switch} events were committed when pgoutbox started streaming",
        flushed.unwrap_or_else(|| "none".into())
    ))
}

/// The migration's guarantees, checked on everything in the broker.
fn check(rows: &[(String, String, i64)], records: &[ConsumedRecord]) -> Result<String, String> {
    let seq_of: HashMap<&str, i64> = rows.iter().map(|r| (r.0.as_str(), r.2)).collect();
    // Which relay produced a record: the runId header (a UUIDv7, so the earlier run sorts first).
    let mut runs: Vec<Vec<u8>> = records.iter().filter_map(|r| r.header(RUN_ID_HEADER).map(<[u8]>::to_vec)).collect();
    runs.sort();
    runs.dedup();
    if runs.len() != 2 || !runs.iter().all(|r| is_uuid_v7(r)) {
        return Err(format!(
            "expected two UUIDv7 run ids (Debezium's, then pgoutbox's), got {:?}",
            runs.iter().map(|r| String::from_utf8_lossy(r).into_owned()).collect::<Vec<_>>()
        ));
    }
    let of_run = |run: &[u8]| -> HashMap<String, &ConsumedRecord> {
        records.iter().filter(|r| r.header(RUN_ID_HEADER) == Some(run)).map(|r| (event_id(r), r)).collect()
    };
    let (dbz, pgo) = (of_run(&runs[0]), of_run(&runs[1]));
    let mut problems = Vec::new();
    let per_run = |run: &[u8]| records.iter().filter(|r| r.header(RUN_ID_HEADER) == Some(run)).count();
    for (side, ids, run) in [("Debezium", &dbz, &runs[0]), ("pgoutbox", &pgo, &runs[1])] {
        if ids.len() != per_run(run) {
            problems.push(format!(
                "{side} published {} records for {} distinct events: duplicates within one run",
                per_run(run),
                ids.len()
            ));
        }
    }
    let missing: Vec<&str> =
        rows.iter().map(|r| r.0.as_str()).filter(|id| !dbz.contains_key(*id) && !pgo.contains_key(*id)).collect();
    if !missing.is_empty() {
        problems.push(format!(
            "{} committed events are missing, e.g. {:?}",
            missing.len(),
            &missing[..missing.len().min(5)]
        ));
    }
    let unknown: Vec<&String> = dbz.keys().chain(pgo.keys()).filter(|id| !seq_of.contains_key(id.as_str())).collect();
    if !unknown.is_empty() {
        problems.push(format!(
            "{} records are not committed outbox rows, e.g. {:?}",
            unknown.len(),
            &unknown[..unknown.len().min(5)]
        ));
    }
    // Duplicates: events both relays published. They must be the tail of Debezium's output (what it
    // had sent but not yet confirmed), and pgoutbox's copies must be byte-identical to Debezium's.
    let dups: Vec<&String> = dbz.keys().filter(|id| pgo.contains_key(*id)).collect();
    let seq = |id: &str| seq_of.get(id).copied().unwrap_or(i64::MAX);
    if let Some(first_dup) = dups.iter().map(|id| seq(id)).min() {
        let after_first_dup_not_resent = dbz.keys().filter(|id| seq(id) >= first_dup && !pgo.contains_key(*id)).count();
        if after_first_dup_not_resent > 0 {
            problems.push(format!("{after_first_dup_not_resent} Debezium events after the first re-sent one were not re-sent: duplicates are not one tail"));
        }
    }
    for id in &dups {
        let diffs = diff_records(dbz[*id], pgo[*id], Checks { partition: true, timestamps: false });
        if !diffs.is_empty() {
            problems.push(format!("event {id} differs between Debezium's and pgoutbox's copy:\n{}", diffs.join("\n")));
        }
    }
    // Each relay's own output has no holes: Debezium a prefix of the commit order, pgoutbox a suffix.
    let dbz_max = dbz.keys().map(|id| seq(id)).max().unwrap_or(0);
    let pgo_min = pgo.keys().map(|id| seq(id)).min().unwrap_or(i64::MAX);
    let dbz_holes = rows.iter().filter(|r| r.2 <= dbz_max && !dbz.contains_key(&r.0)).count();
    let pgo_holes = rows.iter().filter(|r| r.2 >= pgo_min && !pgo.contains_key(&r.0)).count();
    if dbz_holes + pgo_holes > 0 {
        problems.push(format!("holes in a relay's output: Debezium {dbz_holes}, pgoutbox {pgo_holes}"));
    }
    // Every aggregate on one partition: the one Java's murmur2 of its key bytes picks.
    let mut partitions: HashMap<&[u8], BTreeSet<i32>> = HashMap::new();
    for r in records {
        partitions.entry(r.key.as_deref().unwrap_or_default()).or_default().insert(r.partition);
    }
    for (key, parts) in &partitions {
        let expected = java_partition(key, PARTITIONS);
        if parts.len() != 1 || !parts.contains(&expected) {
            let example =
                records.iter().find(|r| r.key.as_deref().unwrap_or_default() == *key).map(describe).unwrap_or_default();
            problems.push(format!(
                "aggregate {:?} is on partitions {parts:?}, expected only {expected}: {example}",
                String::from_utf8_lossy(key)
            ));
        }
    }
    if !problems.is_empty() {
        return Err(format!("{} problem(s):\n{}", problems.len(), problems.join("\n")));
    }
    Ok(format!(
        "{} committed events all present; Debezium published {}, pgoutbox {}; {} duplicates (Debezium's unconfirmed tail, re-sent byte-identical); {} aggregates each on one partition",
        rows.len(),
        dbz.len(),
        pgo.len(),
        dups.len(),
        partitions.len()
    ))
}
