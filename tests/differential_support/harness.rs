//! Runs one `Case` through Debezium and pgoutbox side by side and compares what they produced.
//!
//! Per case: a fresh outbox table and publication, then two slots (one per relay) created before any row
//! is written, so both relays decode exactly the same transactions; two fresh brokers (one per relay)
//! with the same topics and partition counts; the case's SQL; both relays run concurrently until each
//! produced the expected records (or failed, for failure cases) and are stopped with SIGTERM; every
//! record of both brokers is read back and compared (see `compare.rs`). Slots, publication and table are
//! dropped afterwards, whatever happened.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use pgoutbox::kafka::consume::{consume_all, ConsumedRecord};

use super::broker::{list_topics, Broker};
use super::case::{Case, Expect};
use super::compare::{compare, RUN_ID_HEADER};
use super::debezium::{tail, Debezium};
use crate::support::{create_topics, unique, Env, Relay};

/// Bound on Debezium reaching its records: a JVM start competes for 2 cores with the other test.
pub const DEBEZIUM_DEADLINE: Duration = Duration::from_secs(240);
/// Bound on pgoutbox reaching its records, and on reading a broker back.
pub const PGOUTBOX_DEADLINE: Duration = Duration::from_secs(120);
/// A broker read is complete when nothing new arrived for this long (the relays are stopped by then).
// Both relays have stopped when the brokers are read: every record is there already, and a broker
// on loopback that has sent none for 1.5 s has no more (3 s cost the suite 70 s over its cases).
const READ_IDLE: Duration = Duration::from_millis(1500);
/// Shown in a failure report, per side.
const REPORTED_PROBLEMS: usize = 12;
const LOG_TAIL: usize = 40;

/// Database object names and the working directory of one case.
#[derive(Debug, Clone)]
pub struct Names {
    /// `public.outbox_…`
    pub table: String,
    pub publication: String,
    pub debezium_slot: String,
    pub pgoutbox_slot: String,
    pub dir: PathBuf,
}

impl Names {
    pub fn new() -> Names {
        let u = unique("d");
        Names {
            table: format!("public.outbox_{u}"),
            publication: format!("pub_{u}"),
            debezium_slot: format!("dbz_{u}"),
            pgoutbox_slot: format!("pgo_{u}"),
            dir: std::env::temp_dir().join("pgoutbox-differential").join(&u),
        }
    }

    fn bare_table(&self) -> &str {
        self.table.trim_start_matches("public.")
    }
}

/// The connector configuration both relays get, differing only in slot, broker and, on Debezium's
/// side, the message filter below. Later keys win in both parsers, so a case's properties can
/// override these.
pub fn properties(names: &Names, slot: &str, broker: &str, extra: &[String]) -> String {
    let env = Env::get();
    let mut lines = vec![
        "name=pgoutbox-differential".to_string(),
        "connector.class=io.debezium.connector.postgresql.PostgresConnector".to_string(),
        format!("database.hostname={}", env.pg_host),
        format!("database.port={}", env.pg_port),
        "database.user=postgres".to_string(),
        "database.dbname=postgres".to_string(),
        "database.sslmode=disable".to_string(),
        "topic.prefix=dbserver1".to_string(),
        "plugin.name=pgoutput".to_string(),
        format!("slot.name={slot}"),
        format!("publication.name={}", names.publication),
        "publication.autocreate.mode=disabled".to_string(),
        format!("table.include.list=public.{}", names.bare_table()),
        "snapshot.mode=no_data".to_string(),
        "transforms=outbox".to_string(),
        "transforms.outbox.type=io.debezium.transforms.outbox.EventRouter".to_string(),
        format!("bootstrap.servers={broker}"),
        "offset.flush.interval.ms=1000".to_string(),
    ];
    // `{t}` stands for the case's table here too (a message prefix of its own).
    lines.extend(extra.iter().map(|l| super::registry::fill(&l.replace("{t}", &names.table))));
    // Debezium reads every logical decoding message of the database whatever the publication (B-17),
    // and cases run side by side in one database: a case that does not filter messages itself keeps
    // the other cases' messages out of its Debezium's records. pgoutbox does not read them there.
    if slot == names.debezium_slot && !extra.iter().any(|l| l.starts_with("message.prefix.")) {
        lines.push("message.prefix.exclude.list=.*".to_string());
    }
    lines.join("\n") + "\n"
}

/// Runs a case and panics with a full report if pgoutbox's records differ from Debezium's.
pub async fn run(case: Case) {
    let _turn = super::turn().await;
    let names = Names::new();
    std::fs::create_dir_all(&names.dir).expect("create case dir");
    let started = Instant::now();
    prepare(&case, &names).await;
    // In a task of its own so that a panic inside still lets the database objects be dropped below.
    let outcome = tokio::spawn(execute(case.clone(), names.clone())).await;
    cleanup(&names).await;
    match outcome {
        Ok(Ok(summary)) => {
            eprintln!("[differential] {}: PASS, {summary}, {:.1}s", case.name, started.elapsed().as_secs_f64());
            let _ = std::fs::remove_dir_all(&names.dir);
        }
        Ok(Err(report)) => panic!(
            "[differential] {}: FAIL after {:.1}s (logs in {})\n{report}",
            case.name,
            started.elapsed().as_secs_f64(),
            names.dir.display()
        ),
        Err(e) => match e.try_into_panic() {
            Ok(p) => std::panic::resume_unwind(p),
            Err(e) => panic!("case task failed: {e}"),
        },
    }
}

/// Table, publication, then both slots, in that order and in separate transactions: a slot only
/// decodes a publication that existed when the slot's changes were written.
pub async fn prepare(case: &Case, names: &Names) {
    let sql = Env::get().sql().await;
    sql.batch_execute(&case.create_table_sql(&names.table)).await.expect("create outbox table");
    for s in &case.before_slots {
        sql.batch_execute(&s.replace("{t}", &names.table)).await.unwrap_or_else(|e| panic!("{s}: {e}"));
    }
    sql.batch_execute(&format!("CREATE PUBLICATION {} FOR TABLE {}", names.publication, names.table))
        .await
        .expect("create publication");
    if case.relays_create_slots {
        return;
    }
    for slot in [&names.debezium_slot, &names.pgoutbox_slot] {
        sql.execute("SELECT pg_create_logical_replication_slot($1, 'pgoutput')", &[slot]).await.expect("create slot");
    }
}

async fn execute(case: Case, names: Names) -> Result<String, String> {
    let dbz_broker = Broker::start(&names.dir.join("broker-debezium"));
    let pgo_broker = Broker::start(&names.dir.join("broker-pgoutbox"));
    create_topics(&dbz_broker.addr, &case.topics, case.partitions).await;
    create_topics(&pgo_broker.addr, &case.topics, case.partitions).await;

    let sql = Env::get().sql().await;
    for s in &case.sql {
        let s = s.replace("{t}", &names.table);
        sql.batch_execute(&s).await.map_err(|e| format!("case SQL failed: {s}: {e}"))?;
    }

    let dbz_config = names.dir.join("debezium.properties");
    std::fs::write(&dbz_config, properties(&names, &names.debezium_slot, &dbz_broker.addr, &case.props))
        .expect("write config");
    let pgo_config = properties(&names, &names.pgoutbox_slot, &pgo_broker.addr, &case.props);
    std::fs::write(names.dir.join("pgoutbox.properties"), &pgo_config).expect("write config");
    let t0 = Instant::now();
    let mut dbz = Debezium::start(&dbz_config, &names.dir.join("debezium.log"));
    let mut relay = Relay::start(&pgo_config);
    let logs = |dbz: &Debezium, relay: &Relay| {
        format!(
            "--- Debezium log ({}), last lines:\n{}\n--- pgoutbox log ({}), last lines:\n{}",
            dbz.log.display(),
            dbz.log_tail(LOG_TAIL),
            relay.log.display(),
            tail(&relay.log_text(), LOG_TAIL)
        )
    };

    let (n, timings) = match case.expect {
        Expect::Records(n) => {
            dbz.wait_records(n as u64, DEBEZIUM_DEADLINE).await.map_err(|e| format!("{e}\n{}", logs(&dbz, &relay)))?;
            let dbz_time = t0.elapsed();
            let dbz_exit = dbz.stop().await.map_err(|e| format!("{e}\n{}", logs(&dbz, &relay)))?;
            wait_for_pgoutbox(&mut relay, &pgo_broker.addr, &case.topics, n)
                .await
                .map_err(|e| format!("{e}\n{}", logs(&dbz, &relay)))?;
            let pgo_time = t0.elapsed();
            let pgo_exit = tokio::task::block_in_place(|| relay.stop());
            if pgo_exit.code() != Some(0) {
                return Err(format!("pgoutbox exited with {pgo_exit} after SIGTERM\n{}", logs(&dbz, &relay)));
            }
            (
                n,
                format!(
                    "Debezium {:.1}s ({dbz_exit}), pgoutbox {:.1}s",
                    dbz_time.as_secs_f64(),
                    pgo_time.as_secs_f64()
                ),
            )
        }
        Expect::FailsAfter(n) => {
            let dbz_exit = dbz.wait_failure(DEBEZIUM_DEADLINE).await;
            let pgo_exit = tokio::task::block_in_place(|| relay.wait(PGOUTBOX_DEADLINE));
            let (Some(d), Some(p)) = (dbz_exit, pgo_exit) else {
                return Err(format!(
                    "expected both relays to fail; Debezium: {dbz_exit:?}, pgoutbox: {pgo_exit:?}\n{}",
                    logs(&dbz, &relay)
                ));
            };
            if d.success() || p.success() {
                return Err(format!(
                    "expected both relays to fail; Debezium exited {d}, pgoutbox {p}\n{}",
                    logs(&dbz, &relay)
                ));
            }
            (n, format!("both failed as expected: Debezium engine failed ({d}), pgoutbox {p}"))
        }
    };

    // What each broker must hold at least before it is read to idle: after a failure, what Debezium
    // acknowledged, and nothing known for pgoutbox.
    let (dbz_min, pgo_min) = match case.expect {
        Expect::Records(n) => (n, n),
        Expect::FailsAfter(_) => (dbz.records() as usize, 0),
    };
    let (dbz_records, pgo_records) =
        tokio::join!(read_all(dbz_broker.addr.clone(), dbz_min), read_all(pgo_broker.addr.clone(), pgo_min));
    if dbz_records.len() != n {
        return Err(format!(
            "the case expects {n} records but Debezium produced {}: the case's expectation is wrong\n{}",
            dbz_records.len(),
            logs(&dbz, &relay)
        ));
    }
    let mut problems = Vec::new();
    for (side, records) in [("Debezium", &dbz_records), ("pgoutbox", &pgo_records)] {
        // Records without context headers (the message outbox's) carry no run id at all.
        let mut runs: Vec<&[u8]> = records.iter().filter_map(|r| r.header(RUN_ID_HEADER)).collect();
        runs.sort();
        runs.dedup();
        if runs.len() > 1 {
            problems.push(format!("{side}'s records carry {} different {RUN_ID_HEADER} values in one run", runs.len()));
        }
    }
    problems.extend(compare(&dbz_records, &pgo_records, case.compare_timestamps));
    if !problems.is_empty() {
        let shown: Vec<&String> = problems.iter().take(REPORTED_PROBLEMS).collect();
        return Err(format!(
            "{} difference(s) between Debezium ({} records) and pgoutbox ({} records); first {}:\n\n{}\n\n{}",
            problems.len(),
            dbz_records.len(),
            pgo_records.len(),
            shown.len(),
            shown.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n\n"),
            logs(&dbz, &relay)
        ));
    }
    Ok(format!("{n} records identical; {timings}"))
}

/// Waits until pgoutbox's broker holds `n` records of `topics`; fails at once if pgoutbox exits.
async fn wait_for_pgoutbox(relay: &mut Relay, addr: &str, topics: &[String], n: usize) -> Result<(), String> {
    let start = Instant::now();
    loop {
        let (a, t) = (addr.to_string(), topics.to_vec());
        let got = tokio::task::spawn_blocking(move || {
            let refs: Vec<&str> = t.iter().map(String::as_str).collect();
            consume_all(&a, &refs, Some(n), Duration::ZERO, Duration::from_secs(2)).map(|r| r.len())
        })
        .await
        .expect("consumer task")
        .map_err(|e| format!("reading pgoutbox's broker: {e}"))?;
        if got >= n {
            return Ok(());
        }
        if let Some(status) = tokio::task::block_in_place(|| relay.wait(Duration::from_millis(1))) {
            return Err(format!("pgoutbox exited ({status}) after producing {got} of {n} records"));
        }
        if start.elapsed() > PGOUTBOX_DEADLINE {
            return Err(format!("pgoutbox produced {got} of {n} records within {PGOUTBOX_DEADLINE:?}"));
        }
    }
}

/// Every record of every topic on the broker, read until it has been idle for READ_IDLE and holds at
/// least `min` records (bounded by PGOUTBOX_DEADLINE).
pub async fn read_all(addr: String, min: usize) -> Vec<ConsumedRecord> {
    tokio::task::spawn_blocking(move || {
        let start = Instant::now();
        loop {
            let topics = list_topics(&addr);
            let refs: Vec<&str> = topics.iter().map(String::as_str).collect();
            let records = consume_all(&addr, &refs, None, READ_IDLE, PGOUTBOX_DEADLINE).expect("read broker");
            if records.len() >= min || start.elapsed() > PGOUTBOX_DEADLINE {
                return records;
            }
        }
    })
    .await
    .expect("reader task")
}

/// Drops the slots (retrying while a stopping relay still holds one), the publication and the table.
pub async fn cleanup(names: &Names) {
    let sql = Env::get().sql().await;
    for slot in [&names.debezium_slot, &names.pgoutbox_slot] {
        let start = Instant::now();
        loop {
            let _ = sql.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND NOT active", &[slot]).await;
            let left = sql
                .query_opt("SELECT 1 FROM pg_replication_slots WHERE slot_name = $1", &[slot])
                .await
                .ok()
                .flatten()
                .is_some();
            if !left {
                break;
            }
            if start.elapsed() > Duration::from_secs(30) {
                eprintln!("[differential] slot {slot} still in use after 30s; left behind");
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    let _ = sql
        .batch_execute(&format!(
            "DROP PUBLICATION IF EXISTS {}; DROP TABLE IF EXISTS {}",
            names.publication, names.table
        ))
        .await;
}

/// Runs a long scenario (a migration, a rollback) on a table of its own (with a `seq` column), its
/// publication and one slot (`names.debezium_slot`), created first, and reports it: PASS with the
/// summary `execute` returns, or FAIL with its report, the logs' folder and `after_failure()`.
pub async fn scenario<F, Fut>(label: &str, case: &'static str, execute: F, after_failure: fn() -> String)
where
    F: FnOnce(Names) -> Fut,
    Fut: std::future::Future<Output = Result<String, String>> + Send + 'static,
{
    let _turn = super::turn().await;
    let names = Names::new();
    std::fs::create_dir_all(&names.dir).expect("create case dir");
    let case = Case::new(case).columns(&["seq bigserial"]);
    let sql = Env::get().sql().await;
    sql.batch_execute(&case.create_table_sql(&names.table)).await.expect("create table");
    sql.batch_execute(&format!("CREATE PUBLICATION {} FOR TABLE {}", names.publication, names.table))
        .await
        .expect("publication");
    sql.execute("SELECT pg_create_logical_replication_slot($1, 'pgoutput')", &[&names.debezium_slot])
        .await
        .expect("slot");
    let started = Instant::now();
    let outcome = tokio::spawn(execute(names.clone())).await;
    cleanup(&names).await;
    match outcome {
        Ok(Ok(summary)) => {
            eprintln!("[differential] {label}: PASS, {summary}, {:.1}s", started.elapsed().as_secs_f64());
            let _ = std::fs::remove_dir_all(&names.dir);
        }
        Ok(Err(report)) => {
            panic!("[differential] {label}: FAIL (logs in {})\n{report}{}", names.dir.display(), after_failure())
        }
        Err(e) => match e.try_into_panic() {
            Ok(p) => std::panic::resume_unwind(p),
            Err(e) => panic!("{label}: the scenario's task failed: {e}"),
        },
    }
}
