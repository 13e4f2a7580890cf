//! Ordinary production situations in which PostgreSQL would never send an event to the relay, or the
//! relay would throw it away, while it kept running and confirming positions past it. Each test is
//! named after the situation; each one must end with every event delivered, or with the relay
//! stopped loudly (an error naming the cause and the fix, a non-zero exit), never with a silent gap.
//! Against the real PostgreSQL and broker that `scripts/test.sh` starts.

mod support;

use std::collections::HashSet;
use std::time::Duration;

use support::*;

async fn exec(o: &Outbox, sql: &str) {
    o.env.sql().await.batch_execute(sql).await.unwrap_or_else(|e| panic!("{sql}: {e:?}"));
}

/// The outbox table of `o` as Debezium's example has it, partitioned by `by`.
fn partitioned_ddl(o: &Outbox, by: &str, key: &str) -> String {
    format!(
        "DROP TABLE public.{t}; CREATE TABLE public.{t} (id uuid NOT NULL, aggregatetype varchar(255) NOT NULL, \
         aggregateid varchar(255) NOT NULL, type varchar(255) NOT NULL, payload jsonb, seq bigserial, \
         created_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (id, {key})) PARTITION BY {by}",
        t = o.table
    )
}

async fn insert_n(o: &Outbox, kind: &str, n: usize) {
    let mut sql = String::from("BEGIN;");
    for i in 0..n {
        sql.push_str(&o.insert_sql(kind, &format!("{kind}-{i}"), Some(r#"{"n": 1}"#)));
        sql.push(';');
    }
    sql.push_str("COMMIT;");
    exec(o, &sql).await;
}

/// Every row of the outbox arrived (at least once) on its topic.
async fn assert_all_delivered(o: &Outbox, kinds: &[&str], relay: &Relay) {
    let rows = o.rows().await;
    let topics: Vec<String> = kinds.iter().map(|k| o.topic(k)).collect();
    // Duplicates are allowed (a snapshot publishes again what the stream already did): read all.
    let records = consume_until_idle(&o.env.broker, &topics, Duration::from_secs(3));
    let ids = by_id(&records);
    let missing: Vec<&str> = rows.iter().filter(|r| !ids.contains_key(&r.id)).map(|r| r.id.as_str()).collect();
    assert!(missing.is_empty(), "{} of {} events missing; relay log:\n{}", missing.len(), rows.len(), relay.log_text());
}

/// Partitioned by type (LIST), without publish_via_partition_root: every change arrives under a
/// partition's name, and must be routed as the parent's. Also the snapshot of the partitioned table
/// (the rows from before the relay), and a partition created while the relay runs.
#[tokio::test(flavor = "multi_thread")]
async fn partitioned_outbox_by_list_delivers_every_event() {
    let o = Outbox::new("part_list").await;
    let kinds = ["Order", "Customer", "Invoice"];
    o.create_topics(&kinds, 2).await;
    exec(&o, &partitioned_ddl(&o, "LIST (aggregatetype)", "aggregatetype")).await;
    for kind in ["Order", "Customer"] {
        exec(
            &o,
            &format!(
                "CREATE TABLE public.{t}_{k} PARTITION OF public.{t} FOR VALUES IN ('{a}')",
                t = o.table,
                k = kind.to_lowercase(),
                a = o.agg(kind)
            ),
        )
        .await;
    }
    insert_n(&o, "Order", 10).await;
    let mut relay = Relay::start_streaming(&o.config(&[]));
    insert_n(&o, "Order", 50).await;
    insert_n(&o, "Customer", 50).await;
    exec(
        &o,
        &format!(
            "CREATE TABLE public.{t}_invoice PARTITION OF public.{t} FOR VALUES IN ('{a}')",
            t = o.table,
            a = o.agg("Invoice")
        ),
    )
    .await;
    insert_n(&o, "Invoice", 20).await;
    assert_eq!(o.rows().await.len(), 130);
    assert_all_delivered(&o, &kinds, &relay).await;
    assert_eq!(relay.stop().code(), Some(0));
    o.drop_slot().await;
}

/// Partitioned by time (RANGE) with publish.via.partition.root=true: the changes arrive under the
/// parent's name; the publication is created with the option.
#[tokio::test(flavor = "multi_thread")]
async fn partitioned_outbox_by_range_via_partition_root_delivers_every_event() {
    let o = Outbox::new("part_range").await;
    let kinds = ["Order"];
    o.create_topics(&kinds, 2).await;
    exec(&o, &partitioned_ddl(&o, "RANGE (created_at)", "created_at")).await;
    exec(&o, &format!("CREATE TABLE public.{t}_old PARTITION OF public.{t} FOR VALUES FROM (MINVALUE) TO ('2000-01-01'); \
                       CREATE TABLE public.{t}_now PARTITION OF public.{t} FOR VALUES FROM ('2000-01-01') TO ('2100-01-01')", t = o.table)).await;
    insert_n(&o, "Order", 10).await;
    let mut relay = Relay::start_streaming(&o.config(&["publish.via.partition.root=true"]));
    let via_root: bool = o
        .env
        .sql()
        .await
        .query_one("SELECT pubviaroot FROM pg_publication WHERE pubname = $1", &[&o.publication])
        .await
        .unwrap()
        .get(0);
    assert!(via_root, "the publication is created WITH (publish_via_partition_root = true)");
    insert_n(&o, "Order", 50).await;
    exec(
        &o,
        &format!(
            "CREATE TABLE public.{t}_future PARTITION OF public.{t} FOR VALUES FROM ('2100-01-01') TO (MAXVALUE)",
            t = o.table
        ),
    )
    .await;
    exec(&o, &format!("INSERT INTO public.{t} (id, aggregatetype, aggregateid, type, payload, created_at) \
                       SELECT gen_random_uuid(), '{a}', 'late-' || g, 'Created', '{{}}', '2150-01-01' FROM generate_series(1, 20) g", t = o.table, a = o.agg("Order"))).await;
    assert_eq!(o.rows().await.len(), 80);
    assert_all_delivered(&o, &kinds, &relay).await;
    assert_eq!(relay.stop().code(), Some(0));
    o.drop_slot().await;
}

const OUTBOX_DDL: &str =
    "(id uuid PRIMARY KEY, aggregatetype varchar(255) NOT NULL, aggregateid varchar(255) NOT NULL, \
     type varchar(255) NOT NULL, payload jsonb, seq bigserial, created_at timestamptz NOT NULL DEFAULT now())";

/// A migration drops the outbox and creates it again while the relay runs; nothing is written to the
/// new table before the relay notices. The relay adds it back to its FOR TABLE publication
/// (publication.autocreate.mode=filtered) and every later event arrives.
#[tokio::test(flavor = "multi_thread")]
async fn outbox_dropped_and_created_again_is_covered_again() {
    let o = Outbox::new("recreated").await;
    o.create_topics(&["Order"], 2).await;
    let relay = Relay::start_streaming(&o.config(&[]));
    insert_n(&o, "Order", 50).await;
    consume(&o.env.broker, &[o.topic("Order")], 50, Duration::from_secs(30));
    exec(&o, &format!("DROP TABLE public.{t}; CREATE TABLE public.{t} {OUTBOX_DDL}", t = o.table)).await;
    relay.wait_for_log("nothing was missed", Duration::from_secs(30));
    insert_n(&o, "Order", 50).await;
    let records = consume(&o.env.broker, &[o.topic("Order")], 100, Duration::from_secs(30));
    assert_eq!(by_id(&records).len(), 100, "relay log:\n{}", relay.log_text());
    o.drop_slot().await;
}

/// The same, but the application writes into the new table before the relay notices: those inserts
/// were never decoded. The relay must stop with exit 4 naming the table and the fix, and the fix it
/// names (one start with snapshot.mode=always) must publish the rows.
#[tokio::test(flavor = "multi_thread")]
async fn outbox_dropped_and_created_again_with_rows_stops_loudly() {
    let o = Outbox::new("recreated_rows").await;
    o.create_topics(&["Order"], 2).await;
    let mut relay = Relay::start_streaming(&o.config(&[]));
    insert_n(&o, "Order", 50).await;
    consume(&o.env.broker, &[o.topic("Order")], 50, Duration::from_secs(30));
    let mut swap = format!("BEGIN; DROP TABLE public.{t}; CREATE TABLE public.{t} {OUTBOX_DDL};", t = o.table);
    for i in 0..5 {
        swap.push_str(&o.insert_sql("Order", &format!("after-{i}"), Some("{}")));
        swap.push(';');
    }
    swap.push_str("COMMIT;");
    exec(&o, &swap).await;
    let status =
        relay.wait(Duration::from_secs(30)).unwrap_or_else(|| panic!("relay kept running:\n{}", relay.log_text()));
    let log = relay.log_text();
    assert_eq!(status.code(), Some(4), "{log}");
    assert!(log.contains(&format!("public.{}", o.table)) && log.contains("snapshot.mode=always"), "{log}");
    let mut again = Relay::start_streaming(&o.config(&["snapshot.mode=always"]));
    assert_all_delivered(&o, &["Order"], &again).await;
    assert_eq!(again.stop().code(), Some(0));
    o.drop_slot().await;
}

/// Under publication.autocreate.mode=disabled the publication is the operator's: a dropped and
/// recreated outbox stops the relay with the ALTER PUBLICATION to run.
#[tokio::test(flavor = "multi_thread")]
async fn outbox_dropped_and_created_again_under_disabled_publication_stops_loudly() {
    let o = Outbox::new("recreated_disabled").await;
    o.create_topics(&["Order"], 1).await;
    exec(&o, &format!("CREATE PUBLICATION {} FOR TABLE public.{}", o.publication, o.table)).await;
    let mut relay = Relay::start_streaming(&o.config(&["publication.autocreate.mode=disabled"]));
    exec(&o, &format!("DROP TABLE public.{t}; CREATE TABLE public.{t} {OUTBOX_DDL}", t = o.table)).await;
    let status =
        relay.wait(Duration::from_secs(30)).unwrap_or_else(|| panic!("relay kept running:\n{}", relay.log_text()));
    let log = relay.log_text();
    assert_eq!(status.code(), Some(4), "{log}");
    assert!(log.contains("ALTER PUBLICATION"), "{log}");
    o.drop_slot().await;
}

/// The slot is dropped (by hand, by max_slot_wal_keep_size, by a failover) while the relay is stopped,
/// and events are committed meanwhile. A new slot would start after them: the relay must refuse (exit
/// 8), `check` must say so, snapshot.mode=when_needed must publish what is in the table, and
/// `pgoutbox offsets reset` must let an operator accept the loss.
#[tokio::test(flavor = "multi_thread")]
async fn slot_dropped_while_relay_stopped_is_not_silently_recreated() {
    let o = Outbox::new("slot_lost").await;
    o.create_topics(&["Order"], 1).await;
    let offsets = format!("offset.storage.topic=offsets_{}", o.slot);
    let config = o.config(&[&offsets]);
    let mut relay = Relay::start_streaming(&config);
    insert_n(&o, "Order", 10).await;
    consume(&o.env.broker, &[o.topic("Order")], 10, Duration::from_secs(30));
    assert_eq!(relay.stop().code(), Some(0));
    o.drop_slot().await;
    insert_n(&o, "Order", 20).await;

    let mut lost = Relay::start(&config);
    let status =
        lost.wait(Duration::from_secs(60)).unwrap_or_else(|| panic!("relay kept running:\n{}", lost.log_text()));
    let log = lost.log_text();
    assert_eq!(status.code(), Some(8), "{log}");
    assert!(log.contains("streamed from it before") && log.contains("snapshot.mode=when_needed"), "{log}");
    assert!(o.confirmed_flush().await.is_none(), "no slot was created");
    let cfg_file = write_config(&config);
    let cfg_path = cfg_file.to_string_lossy();
    let (code, text) = pgoutbox(&["check", "--config", &cfg_path]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("streamed from it before"), "{text}");

    let mut snapshot = Relay::start_streaming(&o.config(&[&offsets, "snapshot.mode=when_needed"]));
    assert_all_delivered(&o, &["Order"], &snapshot).await;
    assert_eq!(snapshot.stop().code(), Some(0));

    o.drop_slot().await;
    let (code, text) = pgoutbox(&["offsets", "reset", "--config", &cfg_path]);
    assert_eq!(code, Some(0), "{text}");
    let mut accepted = Relay::start_streaming(&o.config(&[&offsets, "snapshot.mode=no_data"]));
    assert_eq!(accepted.stop().code(), Some(0));
    o.drop_slot().await;
}

/// A standby beside an active relay, both with snapshot.mode=always: the standby must publish
/// nothing while it does not hold the slot (it used to re-run the snapshot every second), and its
/// health endpoint says alive, not ready.
#[tokio::test(flavor = "multi_thread")]
async fn standby_with_snapshot_always_publishes_nothing() {
    let o = Outbox::new("standby_always").await;
    o.create_topics(&["Order"], 1).await;
    insert_n(&o, "Order", 100).await;
    let config = o.config(&["snapshot.mode=always"]);
    let mut active = Relay::start_streaming(&config);
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let addr = format!("127.0.0.1:{port}");
    let mut standby = Relay::start_with(&config, &["--metrics-address", &addr]);
    standby.wait_for_log("standing by", Duration::from_secs(30));
    tokio::time::sleep(Duration::from_secs(8)).await;
    let records = consume_until_idle(&o.env.broker, &[o.topic("Order")], Duration::from_secs(3));
    assert_eq!(records.len(), 100, "only the active relay's snapshot; standby log:\n{}", standby.log_text());
    assert!(!standby.log_text().contains("snapshot: reading"), "{}", standby.log_text());
    let live = http_get(&addr, "/health").expect("health endpoint answers");
    assert_eq!((live.0, live.1.trim()), (200, "standing_by"));
    assert_eq!(http_get(&addr, "/ready").map(|r| r.0), Some(503));
    assert_eq!(active.stop().code(), Some(0));
    assert_eq!(standby.stop().code(), Some(0));
    o.drop_slot().await;
}

/// An aggregate type whose topic does not exist (the broker does not create topics): the relay stops
/// once, exit 6, naming the event and the topic; it does not restart and replay in a loop.
#[tokio::test(flavor = "multi_thread")]
async fn mistyped_aggregate_type_stops_once_naming_event_and_topic() {
    let o = Outbox::new("mistyped").await;
    o.create_topics(&["Order"], 1).await;
    let mut relay = Relay::start_streaming(&o.config(&["producer.override.topic.metadata.propagation.max.ms=1000"]));
    insert_n(&o, "Ordr", 1).await;
    let status =
        relay.wait(Duration::from_secs(60)).unwrap_or_else(|| panic!("relay kept running:\n{}", relay.log_text()));
    let log = relay.log_text();
    assert_eq!(status.code(), Some(6), "{log}");
    let id = &o.rows().await[0].id;
    assert!(log.contains(id.as_str()) && log.contains(&o.topic("Ordr")), "{log}");
    assert_eq!(log.matches("streaming").count(), 1, "no restart loop:\n{log}");
    o.drop_slot().await;
}

/// errors.tolerance=all: the mistyped event goes to the dead-letter topic and every other aggregate
/// flows on; a dead-letter topic that refuses for good stops the relay naming it (it used to
/// dead-letter the dead letter, forever).
#[tokio::test(flavor = "multi_thread")]
async fn dead_letter_topic_refusing_for_good_stops_the_relay() {
    let o = Outbox::new("dlq").await;
    o.create_topics(&["Order"], 1).await;
    let dlq = format!("dlq_{}", o.slot);
    create_topics(&o.env.broker, std::slice::from_ref(&dlq), 1).await;
    let tolerant = ["errors.tolerance=all", "producer.override.topic.metadata.propagation.max.ms=1000"];
    let with_dlq = format!("errors.deadletterqueue.topic.name={dlq}");
    let mut relay = Relay::start_streaming(&o.config(&[tolerant[0], tolerant[1], &with_dlq]));
    insert_n(&o, "Ordr", 1).await;
    insert_n(&o, "Order", 5).await;
    let letters = consume(&o.env.broker, std::slice::from_ref(&dlq), 1, Duration::from_secs(60));
    assert_eq!(letters.len(), 1, "{}", relay.log_text());
    assert_eq!(consume(&o.env.broker, &[o.topic("Order")], 5, Duration::from_secs(30)).len(), 5);
    assert_eq!(relay.stop().code(), Some(0));
    o.drop_slot().await;

    let missing_dlq = format!("errors.deadletterqueue.topic.name=missing_{}", o.slot);
    // A slot of its own: the first one was dropped, and the relay refuses to recreate a lost slot.
    // No snapshot: the first phase's mistyped row is still in the table.
    let second_slot = format!("slot.name={}_b", o.slot);
    let mut relay = Relay::start_streaming(&o.config(&[
        tolerant[0],
        tolerant[1],
        &missing_dlq,
        &second_slot,
        "snapshot.mode=no_data",
    ]));
    insert_n(&o, "Ordr", 1).await;
    let status =
        relay.wait(Duration::from_secs(60)).unwrap_or_else(|| panic!("relay kept running:\n{}", relay.log_text()));
    let log = relay.log_text();
    assert_eq!(status.code(), Some(6), "{log}");
    assert!(log.contains("dead-letter topic refused") && log.contains(&format!("missing_{}", o.slot)), "{log}");
    let _ = o.env.sql().await.execute("SELECT pg_drop_replication_slot($1)", &[&format!("{}_b", o.slot)]).await;
}

/// One row the Event Router cannot route in the initial snapshot, under errors.tolerance=all: it is
/// dead-lettered like a streamed one and the snapshot completes (it used to crash-loop).
#[tokio::test(flavor = "multi_thread")]
async fn snapshot_bad_row_under_tolerance_all_is_dead_lettered() {
    let o = Outbox::new("snapshot_bad").await;
    o.create_topics(&["Order"], 1).await;
    let dlq = format!("dlq_{}", o.slot);
    create_topics(&o.env.broker, std::slice::from_ref(&dlq), 1).await;
    exec(&o, &format!("ALTER TABLE public.{} ALTER aggregatetype DROP NOT NULL", o.table)).await;
    insert_n(&o, "Order", 9).await;
    exec(&o, &format!("INSERT INTO public.{} (id, aggregatetype, aggregateid, type, payload) VALUES (gen_random_uuid(), NULL, 'x', 'Created', '{{}}')", o.table)).await;
    let with_dlq = format!("errors.deadletterqueue.topic.name={dlq}");
    let mut relay = Relay::start_streaming(&o.config(&["errors.tolerance=all", &with_dlq]));
    assert_eq!(consume(&o.env.broker, &[o.topic("Order")], 9, Duration::from_secs(30)).len(), 9);
    assert_eq!(consume(&o.env.broker, &[dlq], 1, Duration::from_secs(30)).len(), 1, "{}", relay.log_text());
    assert_eq!(relay.stop().code(), Some(0));
    o.drop_slot().await;
}

/// An event with a 1,020,000-byte payload, which Debezium delivers (the Java producer's
/// max.request.size is 1,048,576), must be delivered, and the events after it too.
#[tokio::test(flavor = "multi_thread")]
async fn event_of_a_megabyte_is_delivered_like_debezium_does() {
    let o = Outbox::new("big").await;
    o.create_topics(&["Order"], 1).await;
    let mut relay = Relay::start_streaming(&o.config(&[]));
    exec(&o, &format!("INSERT INTO public.{} (id, aggregatetype, aggregateid, type, payload) VALUES (gen_random_uuid(), '{}', 'big', 'Created', json_build_object('blob', repeat('x', 1020000))::jsonb)", o.table, o.agg("Order"))).await;
    insert_n(&o, "Order", 3).await;
    let records = consume(&o.env.broker, &[o.topic("Order")], 4, Duration::from_secs(60));
    assert_eq!(records.len(), 4, "{}", relay.log_text());
    assert!(records.iter().any(|r| r.value.as_ref().is_some_and(|v| v.len() > 1_020_000)));
    assert_eq!(relay.stop().code(), Some(0));
    o.drop_slot().await;
}

/// status.update.interval.ms at or above wal_sender_timeout gets the connection killed whenever the
/// pipeline is backpressured: refused at start, naming the key.
#[tokio::test(flavor = "multi_thread")]
async fn status_interval_not_below_wal_sender_timeout_is_refused() {
    let o = Outbox::new("status_interval").await;
    let config = o.config(&[]).replace("status.update.interval.ms=500", "status.update.interval.ms=60000");
    let mut relay = Relay::start(&config);
    let status = relay.wait(Duration::from_secs(30)).expect("relay stops");
    let log = relay.log_text();
    assert_eq!(status.code(), Some(2), "{log}");
    assert!(log.contains("status.update.interval.ms") && log.contains("wal_sender_timeout"), "{log}");
    let ids: HashSet<String> = o.rows().await.into_iter().map(|r| r.id).collect();
    assert!(ids.is_empty());
}

/// slot.failover=true (Debezium 3.0.5+): on PostgreSQL 17 and later the slot is a failover slot, also
/// when it was created as a copy after the initial snapshot (the copy does not carry the flag). Before
/// 17 the relay streams and says the key cannot apply.
#[tokio::test(flavor = "multi_thread")]
async fn slot_failover_makes_a_failover_slot_on_17_and_later() {
    let o = Outbox::new("failover").await;
    let sql = o.env.sql().await;
    let version: String = sql.query_one("SHOW server_version_num", &[]).await.unwrap().get(0);
    let major = version.parse::<i32>().unwrap() / 10_000;
    for (mode, slot) in [("initial", format!("{}_snap", o.slot)), ("no_data", format!("{}_direct", o.slot))] {
        let config = o.config(&["slot.failover=true", &format!("snapshot.mode={mode}"), &format!("slot.name={slot}")]);
        let mut relay = Relay::start_streaming(&config);
        let row = sql
            .query_one(
                "SELECT (to_jsonb(s) ->> 'failover')::bool FROM pg_replication_slots s WHERE slot_name = $1",
                &[&slot],
            )
            .await
            .unwrap();
        let failover: Option<bool> = row.get(0);
        if major >= 17 {
            assert_eq!(failover, Some(true), "snapshot.mode={mode}; log:\n{}", relay.log_text());
        } else {
            assert_eq!(failover, None);
            assert!(relay.log_text().contains("needs PostgreSQL 17"), "{}", relay.log_text());
        }
        assert_eq!(relay.stop().code(), Some(0));
        let _ = sql.execute("SELECT pg_drop_replication_slot($1)", &[&slot]).await;
    }
}

/// The initial snapshot of rows of a megabyte each keeps memory bounded by bytes, as streaming
/// does: 150 such rows were one batch of 150 MB (eight batches of 1,024 rows could be 8 GiB, then
/// an out-of-memory crash loop). The relay's peak RSS stays well under what one such batch needs.
#[tokio::test(flavor = "multi_thread")]
async fn snapshot_of_megabyte_rows_stays_bounded_in_memory() {
    let o = Outbox::new("bigsnap").await;
    o.create_topics(&["Order"], 1).await;
    exec(&o, &format!("INSERT INTO public.{} (id, aggregatetype, aggregateid, type, payload) SELECT gen_random_uuid(), '{}', 'big-' || n, 'Created', json_build_object('blob', repeat('x', 1000000))::jsonb FROM generate_series(1, 150) n", o.table, o.agg("Order"))).await;
    let mut relay = Relay::start(&o.config(&["snapshot.mode=initial"]));
    let records = consume(&o.env.broker, &[o.topic("Order")], 150, Duration::from_secs(180));
    assert_eq!(records.len(), 150, "{}", relay.log_text());
    let peak = relay.peak_rss().expect("the relay runs");
    assert_eq!(relay.stop().code(), Some(0));
    assert!(peak < 140 << 20, "peak RSS {} MB during a snapshot of 150 one-megabyte rows", peak >> 20);
    eprintln!("snapshot of 150 one-megabyte rows: peak RSS {} MB", peak >> 20);
    o.drop_slot().await;
}

/// Rows inserted into a partition that is detached (or dropped) before the relay has read them:
/// pgoutput still sends them (decoding sees the catalog as it was at the change), under the
/// partition's name, but today's catalog no longer says whose partition it was. They must be
/// published as the outbox's, not skipped.
#[tokio::test(flavor = "multi_thread")]
async fn partition_detached_or_dropped_while_the_relay_is_behind_loses_nothing() {
    let o = Outbox::new("part_gone").await;
    let kinds = ["Order", "Customer"];
    o.create_topics(&kinds, 1).await;
    exec(&o, &partitioned_ddl(&o, "LIST (aggregatetype)", "aggregatetype")).await;
    for kind in kinds {
        let (t, k, a) = (&o.table, kind.to_lowercase(), o.agg(kind));
        exec(&o, &format!("CREATE TABLE public.{t}_{k} PARTITION OF public.{t} FOR VALUES IN ('{a}')")).await;
    }
    let mut relay = Relay::start_streaming(&o.config(&[]));
    assert_eq!(relay.stop().code(), Some(0));
    insert_n(&o, "Order", 10).await;
    insert_n(&o, "Customer", 10).await;
    let rows = o.rows().await;
    let t = &o.table;
    exec(&o, &format!("ALTER TABLE public.{t} DETACH PARTITION public.{t}_order")).await;
    exec(&o, &format!("DROP TABLE public.{t}_customer")).await;
    let mut relay = Relay::start_streaming(&o.config(&[]));
    let topics: Vec<String> = kinds.iter().map(|k| o.topic(k)).collect();
    let records = consume(&o.env.broker, &topics, 20, Duration::from_secs(30));
    let ids = by_id(&records);
    let missing = rows.iter().filter(|r| !ids.contains_key(&r.id)).count();
    assert_eq!(missing, 0, "{missing} of 20 missing; relay log:\n{}", relay.log_text());

    // Another partitioned table in the publication, of the outbox's shape: its partitions' rows
    // are that table's, never the outbox's events.
    let other = format!("{t}_other");
    exec(
        &o,
        &format!("CREATE TABLE public.{other} (LIKE public.{t} INCLUDING DEFAULTS) PARTITION BY LIST (aggregatetype)"),
    )
    .await;
    exec(
        &o,
        &format!("CREATE TABLE public.{other}_p PARTITION OF public.{other} FOR VALUES IN ('{}')", o.agg("Order")),
    )
    .await;
    exec(&o, &format!("ALTER PUBLICATION {} ADD TABLE public.{other}", o.publication)).await;
    exec(&o, &format!("INSERT INTO public.{other} (id, aggregatetype, aggregateid, type, payload) VALUES (gen_random_uuid(), '{}', 'not-outbox', 'Created', '{{}}')", o.agg("Order"))).await;
    exec(&o, &format!("CREATE TABLE public.{t}_order2 PARTITION OF public.{t} FOR VALUES IN ('{}')", o.agg("Order")))
        .await;
    exec(&o, &o.insert_sql("Order", "after", Some("{}"))).await;
    let after = consume(&o.env.broker, &topics, 21, Duration::from_secs(30));
    assert_eq!(after.len(), 21, "{}", relay.log_text());
    tokio::time::sleep(Duration::from_secs(2)).await;
    let all = consume_until_idle(&o.env.broker, &topics, Duration::from_secs(2));
    assert!(
        !all.iter().any(|r| r.key.as_deref() == Some(b"not-outbox".as_slice())),
        "a row of another published table was published as an outbox event"
    );
    assert_eq!(relay.stop().code(), Some(0));
    o.drop_slot().await;
}
