//! `lsn.flush.mode` (Debezium 3.4) against Kafka Connect + Debezium 3.7.1: where each side leaves its
//! replication slot, read from `pg_replication_slots`, under each mode.
//!
//! One connector per mode on each side, each on its own slot, all on one outbox table. Under
//! `manual` neither side ever moves its slot (the operator does), whatever happens:
//! 1. while only a table outside the publication changes (nothing reaches the connectors but the
//!    server's keepalives), `connector_and_driver` moves the slot past those writes on both sides.
//!    Under `connector` Debezium leaves the slot behind (its known pain point: an idle outbox holds
//!    WAL), and pgoutbox moves it (docs/compatibility.md, B-2);
//! 2. after an event, pgoutbox confirms its commit under both modes; Debezium's slots stay before it
//!    under all three (it flushes the commit before the last transaction, and the driver flushes only
//!    when nothing is pending), until another transaction comes (B-1).
//!
//! pgoutbox's positions are asserted; Debezium's are reported, and asserted as observed (so that a
//! release that changes them fails) with `PGOUTBOX_FLUSH_STRICT=1`, which needs a database nothing
//! else streams from: the other tests' logical decoding messages reach Debezium's slots too.

use std::time::{Duration, Instant};

use super::connect::Connect;
use super::sides::{connector_config, free_port, logs, slots_exist, Worker};
use crate::support::{call, create_topics, unique, Env};

const MODES: &[&str] = &["connector", "connector_and_driver", "manual"];

pub async fn run() {
    let _turn = super::turn().await;
    let env = Env::get();
    let u = unique("flush");
    let dir = std::env::temp_dir().join("pgoutbox-differential").join(&u);
    std::fs::create_dir_all(&dir).unwrap();
    let (table, other) = (format!("outbox_{u}"), format!("other_{u}"));
    let sql = env.sql().await;
    sql.batch_execute(&format!(
        "CREATE TABLE public.{table} (id uuid PRIMARY KEY, aggregatetype varchar(255) NOT NULL, \
         aggregateid varchar(255) NOT NULL, type varchar(255) NOT NULL, payload jsonb); \
         CREATE TABLE public.{other} (n int, filler text)"
    ))
    .await
    .unwrap();
    // Each connector's records go to a topic of its own: `<u><side><mode index>.outbox.event.order`.
    let prefix = |side: &str, i: usize| format!("{u}{side}{i}");
    let topic = |side: &str, i: usize| format!("{}.outbox.event.order", prefix(side, i));
    let slot = |side: &str, i: usize| format!("slot_{}", prefix(side, i));
    // Each connector has a topic prefix of its own (Debezium names its MBeans after it), and so a
    // heartbeat topic of its own: `connector_and_driver` turns heartbeats on.
    let server = |i: usize| format!("srv{u}{i}");
    let heartbeats = |side: &str, i: usize| format!("{}.__debezium-heartbeat.{}", prefix(side, i), server(i));
    let mut topics: Vec<String> = Vec::new();
    for side in ["d", "p"] {
        for i in 0..MODES.len() {
            topics.push(topic(side, i));
            topics.push(heartbeats(side, i));
        }
    }
    create_topics(&env.broker, &topics, 1).await;

    let connect = tokio::task::block_in_place(|| Connect::start(dir.join(format!("connect-{u}")), &env.broker, ""));
    let worker_addr = format!("127.0.0.1:{}", free_port());
    let mut worker = Worker::start(&dir, &env.broker, &worker_addr, &u);
    let config = |side: &str, i: usize| {
        let pub_name = format!("pub_{}", prefix(side, i));
        let mut c = connector_config(&table, &slot(side, i), &pub_name, &server(i), &prefix(side, i));
        c["lsn.flush.mode"] = serde_json::json!(MODES[i]);
        serde_json::json!({ "name": format!("flush-{}-{u}", MODES[i]), "config": c })
    };
    let mut report = Vec::new();
    for (i, mode) in MODES.iter().enumerate() {
        let (code, answer) = connect.call("POST", "/connectors", &config("d", i).to_string());
        assert_eq!(code, 201, "creating {mode} on Connect: {answer}");
    }
    for (i, mode) in MODES.iter().enumerate() {
        let (code, answer) = call(&worker_addr, "POST", "/connectors", Some(&config("p", i)));
        assert_eq!(code, 201, "creating {mode} on pgoutbox: {answer}");
    }
    // Every slot exists once each connector streams: wait for them before the first event.
    let slots: Vec<String> = ["d", "p"].iter().flat_map(|s| (0..MODES.len()).map(move |i| slot(s, i))).collect();
    slots_exist(&sql, &slots).await.unwrap_or_else(|e| panic!("{e}\n{}", logs(&connect, &worker)));
    let created = lsn_of(&sql, &slot("d", 2)).await;
    // A slot is created at a consistent point; the manual connector never confirms past it.
    let created_p = lsn_of(&sql, &slot("p", 2)).await;

    // 1. Before any event, only a table outside the publication changes: nothing reaches the
    // connectors but the server's keepalives.
    sql.batch_execute(&format!("INSERT INTO {other} SELECT n, repeat('x', 1000) FROM generate_series(1, 200) n"))
        .await
        .unwrap();
    let idle_end = current_lsn(&sql).await;
    for s in [slot("p", 0), slot("p", 1)] {
        wait_until(&format!("{s} confirmed past writes outside the publication"), Duration::from_secs(90), || async {
            lsn_of(&sql, &s).await >= idle_end
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", logs(&connect, &worker)));
    }
    // Debezium's slots depend on what else the database streams (the other tests' logical
    // decoding messages reach every slot and keep Debezium's driver from finding nothing pending):
    // asserted only with `PGOUTBOX_FLUSH_STRICT=1`, on a database nothing else writes to.
    let strict = std::env::var("PGOUTBOX_FLUSH_STRICT").is_ok_and(|v| v == "1");
    let driver_moved = wait_until("", Duration::from_secs(if strict { 90 } else { 20 }), || async {
        lsn_of(&sql, &slot("d", 1)).await >= idle_end
    })
    .await
    .is_ok();
    let held = lsn_of(&sql, &slot("d", 0)).await;
    if strict {
        assert!(driver_moved, "Debezium's connector_and_driver slot never passed {idle_end:X}");
        assert!(
            held < idle_end,
            "Debezium under lsn.flush.mode=connector moved its idle slot to {held:X}, past {idle_end:X}: the B-2 difference is gone"
        );
    }
    assert_eq!(lsn_of(&sql, &slot("p", 2)).await, created_p, "pgoutbox under manual moved its slot on idle writes");
    report.push(format!(
        "idle writes to {idle_end:X}: pgoutbox's slots (both modes) moved past, its manual slot stayed; Debezium's connector slot at {held:X}, connector_and_driver {}",
        if driver_moved { "moved past" } else { "did not move past within 20 s" }
    ));

    // 2. One event: published by all five. pgoutbox confirms its commit once acknowledged, under
    // both modes. Debezium flushes the offset's `lsn_commit`, the commit before the event's
    // transaction, so under `connector` its slot stays a transaction behind until another comes;
    // under `connector_and_driver` the driver's keepalive flush waits for nothing to be pending,
    // and the event stays pending, so it stays behind too. Its records lie past `before_event`.
    let before_event = current_lsn(&sql).await;
    sql.batch_execute(&format!("INSERT INTO {table} VALUES (gen_random_uuid(), 'order', 'a1', 'created', '{{}}')"))
        .await
        .unwrap();
    let broker = env.broker.clone();
    let published: Vec<String> =
        ["d", "p"].iter().flat_map(|s| (0..MODES.len()).map(move |i| (*s, i))).map(|(s, i)| topic(s, i)).collect();
    tokio::task::block_in_place(|| {
        for t in &published {
            let n = crate::support::consume(&broker, std::slice::from_ref(t), 1, Duration::from_secs(120)).len();
            assert_eq!(n, 1, "the event in {t}\n{}", logs(&connect, &worker));
        }
    });
    for s in [slot("p", 0), slot("p", 1)] {
        wait_until(&format!("{s} confirmed past the event"), Duration::from_secs(60), || async {
            lsn_of(&sql, &s).await > before_event
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", logs(&connect, &worker)));
    }
    // Connect commits its offsets every second here (offset.flush.interval.ms=1000); give it five.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let mut behind = Vec::new();
    for (i, mode) in MODES.iter().enumerate() {
        let at = lsn_of(&sql, &slot("d", i)).await;
        // `manual` never confirms anything, whatever else the database streams.
        assert!(
            at <= before_event || !(strict || *mode == "manual"),
            "Debezium under lsn.flush.mode={mode} confirmed {at:X}, past the last transaction (after {before_event:X}): it no longer stays a transaction behind (created at {created:X})"
        );
        behind.push(format!("{mode} {at:X}"));
    }
    let manual_p = lsn_of(&sql, &slot("p", 2)).await;
    assert_eq!(manual_p, created_p, "pgoutbox under manual confirmed {manual_p:X} (created at {created_p:X})");
    report.push(format!(
        "after the event (past {before_event:X}): Connect's slots at {}; pgoutbox's past it under connector and connector_and_driver, at its creation ({created_p:X}) under manual",
        behind.join(", ")
    ));

    for mode in MODES {
        connect.call("DELETE", &format!("/connectors/flush-{mode}-{u}"), "");
    }
    worker.stop();
    drop(connect);
    for side in ["d", "p"] {
        for i in 0..MODES.len() {
            let _ = sql.batch_execute(&format!("SELECT pg_drop_replication_slot('{}')", slot(side, i))).await;
            let _ = sql.batch_execute(&format!("DROP PUBLICATION IF EXISTS pub_{}", prefix(side, i))).await;
        }
    }
    let _ = sql.batch_execute(&format!("DROP TABLE {table}; DROP TABLE {other}")).await;
    eprintln!("[lsn.flush.mode differential] {}", report.join("; "));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The slot's confirmed position (0 when it has none yet).
async fn lsn_of(sql: &tokio_postgres::Client, slot: &str) -> u64 {
    let row = sql
        .query_opt(
            "SELECT (confirmed_flush_lsn - '0/0')::bigint FROM pg_replication_slots WHERE slot_name = $1",
            &[&slot],
        )
        .await
        .unwrap();
    row.and_then(|r| r.get::<_, Option<i64>>(0)).unwrap_or(0) as u64
}

async fn current_lsn(sql: &tokio_postgres::Client) -> u64 {
    sql.query_one("SELECT (pg_current_wal_lsn() - '0/0')::bigint", &[]).await.unwrap().get::<_, i64>(0) as u64
}

async fn wait_until<F, Fut>(what: &str, deadline: Duration, mut cond: F) -> Result<(), String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    while !cond().await {
        if start.elapsed() > deadline {
            return Err(format!("timed out after {deadline:?} waiting for {what}"));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Ok(())
}
