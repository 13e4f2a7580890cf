//! The polling relay (`pgoutbox.relay=polling`) against real PostgreSQL and Kafka: the same records as
//! the log-tailing relay, rows marked only once acknowledged, late commits never skipped, and the
//! order it keeps (and, with unpartitioned workers, the order it does not).

#[allow(dead_code)]
#[path = "faults_support/proxy.rs"]
mod proxy;
mod support;

use std::collections::HashMap;
use std::time::Duration;

use pgoutbox::kafka::consume::ConsumedRecord;
use support::*;

/// An outbox with the polling relay's column and index.
async fn polled_outbox(name: &str) -> Outbox {
    let o = Outbox::new(name).await;
    o.env
        .sql()
        .await
        .batch_execute(&format!(
            "ALTER TABLE public.{t} ADD COLUMN published_at timestamptz; \
             CREATE INDEX ON public.{t} (seq) WHERE published_at IS NULL",
            t = o.table
        ))
        .await
        .unwrap();
    o
}

/// The polling relay over `o`, publishing in `seq` order (the outbox's id is a uuid, which gives
/// none) unless `extra` names another order.
fn polling_config(o: &Outbox, extra: &[&str]) -> String {
    let mut lines = vec!["pgoutbox.relay=polling", "poll.interval.ms=50"];
    if !extra.iter().any(|l| l.starts_with("pgoutbox.polling.order.column=")) {
        lines.push("pgoutbox.polling.order.column=seq");
    }
    lines.extend_from_slice(extra);
    o.config(&lines)
}

/// The polling relay over `o` with no order named: the default order.
fn default_order_config(o: &Outbox) -> String {
    o.config(&["pgoutbox.relay=polling", "poll.interval.ms=50"])
}

fn start_polling(config: &str, envs: &[(&str, &str)]) -> Relay {
    let r = Relay::start_with_env(config, &[], envs);
    r.wait_for_log("polling: publishing unpublished rows", Duration::from_secs(30));
    r
}

async fn unpublished(o: &Outbox) -> i64 {
    o.count_where("published_at IS NULL").await
}

fn id_of(r: &ConsumedRecord) -> String {
    String::from_utf8_lossy(r.header("id").expect("id header")).into_owned()
}

/// Each aggregate's event ids in the order their first copies sit in the topic.
fn first_copies_per_aggregate(records: &[ConsumedRecord]) -> HashMap<Vec<u8>, Vec<String>> {
    let mut sorted: Vec<&ConsumedRecord> = records.iter().collect();
    sorted.sort_by_key(|r| (r.topic.clone(), r.partition, r.offset));
    let mut seen = std::collections::HashSet::new();
    let mut out: HashMap<Vec<u8>, Vec<String>> = HashMap::new();
    for r in sorted {
        let id = id_of(r);
        if seen.insert(id.clone()) {
            out.entry(r.key.clone().unwrap_or_default()).or_default().push(id);
        }
    }
    out
}

/// The same rows, published once by each relay: topic, partition, key, value and every header but
/// the per-run `runId` are byte for byte the same.
#[tokio::test(flavor = "multi_thread")]
async fn polling_relay_publishes_the_same_records_as_the_log_tailing_relay() {
    let o = polled_outbox("poll_same").await;
    o.create_topics(&["order", "customer"], 3).await;
    let topics = vec![o.topic("order"), o.topic("customer")];
    let mut log = Relay::start_streaming(
        &o.config(&["transforms.outbox.table.fields.additional.placement=type:header:eventType"]),
    );
    let sql = o.env.sql().await;
    let payloads = [
        Some(r#"{"n":1,"s":"é ✓","nested":{"a":[1,2.5,null]}}"#),
        None,
        Some(r#"{"big":12345678901234567890}"#),
        Some(r#""just a string""#),
    ];
    let mut expected = 0;
    for i in 0..12 {
        let kind = if i % 3 == 0 { "customer" } else { "order" };
        sql.batch_execute(&o.insert_sql(kind, &format!("agg-{}", i % 5), payloads[i % payloads.len()])).await.unwrap();
        expected += 1;
    }
    let first = consume(&o.env.broker, &topics, expected, Duration::from_secs(60));
    log.stop();
    o.drop_slot().await;

    let mut poll = start_polling(
        &polling_config(&o, &["transforms.outbox.table.fields.additional.placement=type:header:eventType"]),
        &[],
    );
    let all = consume(&o.env.broker, &topics, 2 * expected, Duration::from_secs(60));
    wait_for_async("every row marked published", Duration::from_secs(30), || async { unpublished(&o).await == 0 })
        .await;
    poll.stop();

    let by = by_id(&all);
    assert_eq!(by.len(), expected, "one id per row");
    let strip = |r: &ConsumedRecord| -> Vec<(String, Option<Vec<u8>>)> {
        r.headers.iter().filter(|(n, _)| n != "__debezium.context.runId").cloned().collect()
    };
    for r in &first {
        let copies = &by[&id_of(r)];
        assert_eq!(copies.len(), 2, "each relay published the row once: {copies:?}");
        let other = copies.iter().find(|c| c.offset != r.offset || c.partition != r.partition).unwrap();
        assert_eq!((&other.topic, other.partition), (&r.topic, r.partition));
        assert_eq!(other.key, r.key);
        assert_eq!(other.value, r.value, "values differ for {}", id_of(r));
        assert_eq!(strip(other), strip(r));
        assert!(other.header("__debezium.context.runId").is_some(), "the polling relay's context headers");
    }
}

/// A transaction that took its sequence number first and commits last: the rows after it are
/// published while it is open, and it is published when it commits, never skipped.
#[tokio::test(flavor = "multi_thread")]
async fn polling_relay_publishes_a_row_whose_transaction_commits_after_later_rows() {
    let o = polled_outbox("poll_late").await;
    o.create_topics(&["order"], 1).await;
    let topics = vec![o.topic("order")];
    let mut relay = start_polling(&polling_config(&o, &["pgoutbox.polling.order.column=seq"]), &[]);
    let late = o.env.sql().await;
    late.batch_execute("BEGIN").await.unwrap();
    late.batch_execute(&o.insert_sql("order", "late", Some(r#"{"late":true}"#))).await.unwrap();
    let sql = o.env.sql().await;
    for i in 0..3 {
        sql.batch_execute(&o.insert_sql("order", &format!("early-{i}"), None)).await.unwrap();
    }
    let early = consume(&o.env.broker, &topics, 3, Duration::from_secs(30));
    let late_id = o.rows().await.into_iter().find(|r| r.aggregateid == "late");
    assert!(late_id.is_none(), "the open transaction's row is not visible yet");
    // Several polls pass over the open transaction's row.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(unpublished(&o).await, 0, "the three visible rows are marked");
    assert_eq!(by_id(&early).len(), 3);
    late.batch_execute("COMMIT").await.unwrap();
    let late_id = o.rows().await.into_iter().find(|r| r.aggregateid == "late").unwrap().id;
    let all = consume(&o.env.broker, &topics, 4, Duration::from_secs(30));
    assert_eq!(by_id(&all).get(&late_id).map(Vec::len), Some(1), "the late row published once");
    wait_for_async("the late row marked", Duration::from_secs(30), || async { unpublished(&o).await == 0 }).await;
    relay.stop();
}

/// An aggregate's rows go out in the order column's order as they become visible: commit order when
/// its transactions do not overlap, and not when a row with a smaller number commits later than a
/// row with a greater one while the relay is not looking (here: stopped).
#[tokio::test(flavor = "multi_thread")]
async fn polling_relay_keeps_commit_order_unless_an_aggregates_transactions_overlap() {
    let o = polled_outbox("poll_order").await;
    o.create_topics(&["order"], 1).await;
    let topics = vec![o.topic("order")];
    let config = polling_config(&o, &["pgoutbox.polling.order.column=seq"]);
    let sql = o.env.sql().await;
    // Overlapping: `first` takes seq 1, `second` takes seq 2 and commits, then `first` commits.
    let first = o.env.sql().await;
    first.batch_execute("BEGIN").await.unwrap();
    first.batch_execute(&o.insert_sql("order", "agg", Some(r#"{"step":"first-numbered"}"#))).await.unwrap();
    sql.batch_execute(&o.insert_sql("order", "agg", Some(r#"{"step":"second-numbered"}"#))).await.unwrap();
    first.batch_execute("COMMIT").await.unwrap();
    // Not overlapping: one after the other.
    for i in 0..5 {
        sql.batch_execute(&o.insert_sql("order", "agg", Some(&format!(r#"{{"step":{i}}}"#)))).await.unwrap();
    }
    let mut relay = start_polling(&config, &[]);
    let records = consume(&o.env.broker, &topics, 7, Duration::from_secs(30));
    relay.stop();
    let rows = o.rows().await;
    let per_aggregate = first_copies_per_aggregate(&records);
    assert_eq!(per_aggregate.len(), 1);
    let order = per_aggregate.values().next().unwrap();
    let by_seq: Vec<String> = rows.iter().map(|r| r.id.clone()).collect();
    assert_eq!(order, &by_seq, "published in seq order");
    // seq order is not commit order for the overlapping pair: the second-numbered row committed first.
    assert!(rows[0].payload.as_deref().unwrap().contains("first-numbered"));
}

/// A row of an aggregate that something outside the relay holds locked is not stepped over. A
/// foreign key from another table to the outbox takes `FOR KEY SHARE` on each referencing insert,
/// which the relay's row lock (`FOR NO KEY UPDATE`, all marking needs) does not wait for: both rows
/// go out at once, in order. An application's `SELECT … FOR UPDATE` makes the relay wait for it
/// (it owns the aggregate's partition, so no other instance takes the rows meanwhile), then
/// publish both in order; with `SKIP LOCKED` the later row went out first.
#[tokio::test(flavor = "multi_thread")]
async fn a_row_locked_outside_the_relay_is_not_stepped_over() {
    let o = polled_outbox("poll_locked").await;
    o.create_topics(&["order"], 1).await;
    let topics = vec![o.topic("order")];
    let sql = o.env.sql().await;
    let mut seen = 0;
    for lock in ["FOR KEY SHARE", "FOR UPDATE"] {
        sql.batch_execute(&o.insert_sql("order", "agg", Some(r#"{"step":"first"}"#))).await.unwrap();
        let locker = o.env.sql().await;
        locker
            .batch_execute(&format!("BEGIN; SELECT 1 FROM public.{} WHERE published_at IS NULL {lock}", o.table))
            .await
            .unwrap();
        sql.batch_execute(&o.insert_sql("order", "agg", Some(r#"{"step":"second"}"#))).await.unwrap();
        let mut relay = start_polling(&polling_config(&o, &[]), &[]);
        if lock == "FOR UPDATE" {
            // Several polls while the first row is locked: nothing goes out ahead of it.
            tokio::time::sleep(Duration::from_secs(1)).await;
            let early = consume_until_idle(&o.env.broker, &topics, Duration::from_millis(500));
            assert_eq!(
                early.len(),
                seen,
                "{lock}: a later row went out while the first was locked: {}",
                relay.log_text()
            );
            locker.batch_execute("COMMIT").await.unwrap();
        }
        let records = consume(&o.env.broker, &topics, seen + 2, Duration::from_secs(30));
        let steps: Vec<String> = records[seen..]
            .iter()
            .map(|r| {
                let v: serde_json::Value = serde_json::from_slice(r.value.as_deref().unwrap()).unwrap();
                v.to_string()
            })
            .collect();
        assert!(
            steps.len() == 2 && steps[0].contains("first") && steps[1].contains("second"),
            "{lock}: in order: {steps:?}\n{}",
            relay.log_text()
        );
        if lock == "FOR KEY SHARE" {
            locker.batch_execute("COMMIT").await.unwrap();
        }
        wait_for_async("both marked", Duration::from_secs(30), || async { unpublished(&o).await == 0 }).await;
        relay.stop();
        seen += 2;
    }
}

/// Rows are marked only after the broker acknowledged them: with the broker unreachable nothing is
/// marked (the relay does not even poll: its session starts with a look at the cluster); once it is
/// back, everything is published and marked. A broker lost in the middle of a batch:
/// `a_poller_cut_off_from_kafka_hands_its_partitions_over`.
#[tokio::test(flavor = "multi_thread")]
async fn polling_relay_marks_nothing_the_broker_did_not_acknowledge() {
    let o = polled_outbox("poll_ack").await;
    o.create_topics(&["order"], 1).await;
    let sql = o.env.sql().await;
    for i in 0..20 {
        sql.batch_execute(&o.insert_sql("order", &format!("a{i}"), None)).await.unwrap();
    }
    // A broker address nothing listens on.
    let dead = format!("127.0.0.1:{}", free_port());
    let config = polling_config(&o, &["task.shutdown.graceful.timeout.ms=1000"])
        .replace(&format!("bootstrap.servers={}", o.env.broker), &format!("bootstrap.servers={dead}"));
    let mut relay = Relay::start(&config);
    relay.wait_for_log("reaching the Kafka cluster failed", Duration::from_secs(30));
    assert_eq!(unpublished(&o).await, 20, "nothing marked without acknowledgements");
    assert!(!relay.log_text().contains("owned=[0]"), "an instance that cannot reach Kafka takes no partition");
    relay.stop();
    let mut relay = start_polling(&polling_config(&o, &[]), &[]);
    let records = consume(&o.env.broker, &[o.topic("order")], 20, Duration::from_secs(30));
    assert_eq!(by_id(&records).len(), 20);
    wait_for_async("all marked", Duration::from_secs(30), || async { unpublished(&o).await == 0 }).await;
    relay.stop();
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The seed's warning, shown: two unpartitioned pollers (`ordering=none`) publish an aggregate's
/// events out of order when one holds its batch while the other publishes; with partitioned
/// ownership (the default) the same interleaving keeps the order.
#[tokio::test(flavor = "multi_thread")]
async fn unpartitioned_pollers_reorder_an_aggregate_and_partitioned_ones_do_not() {
    for (ordering, reorders) in [("none", true), ("per_aggregate", false)] {
        let o = polled_outbox("poll_two").await;
        o.create_topics(&["order"], 1).await;
        let config = polling_config(
            &o,
            &[
                "pgoutbox.polling.order.column=seq",
                "max.batch.size=1",
                "pgoutbox.polling.partitions=4",
                &format!("pgoutbox.polling.ordering={ordering}"),
            ],
        );
        let sql = o.env.sql().await;
        let mut holder = start_polling(&config, &[("PGOUTBOX_POLLING_HOLD_MS", "3000")]);
        sql.batch_execute(&o.insert_sql("order", "agg", Some(r#"{"n":1}"#))).await.unwrap();
        holder.wait_for_log("holding a batch", Duration::from_secs(10));
        sql.batch_execute(&o.insert_sql("order", "agg", Some(r#"{"n":2}"#))).await.unwrap();
        let mut other = start_polling(&config, &[]);
        let records = consume(&o.env.broker, &[o.topic("order")], 2, Duration::from_secs(30));
        wait_for_async("both rows marked", Duration::from_secs(30), || async { unpublished(&o).await == 0 }).await;
        holder.stop();
        other.stop();
        let by_seq: Vec<String> = o.rows().await.into_iter().map(|r| r.id).collect();
        let published = first_copies_per_aggregate(&records).into_values().next().unwrap();
        if reorders {
            assert_eq!(
                published,
                by_seq.iter().rev().cloned().collect::<Vec<_>>(),
                "ordering=none: the second event overtakes the held first"
            );
        } else {
            assert_eq!(published, by_seq, "ordering=per_aggregate: the aggregate's order holds");
        }
    }
}

/// Seed step 4's proof: three partitioned pollers under an application workload, killed (SIGKILL) and
/// restarted at random moments, publishing and marking; application transactions terminated between
/// their write and their commit. Every committed row arrives, no terminated one does, every row ends
/// marked, and each aggregate's first copies keep commit order.
#[tokio::test(flavor = "multi_thread")]
async fn partitioned_pollers_killed_at_random_lose_nothing_and_keep_order() {
    let o = polled_outbox("poll_kill").await;
    o.create_topics(&["order"], 3).await;
    let config = polling_config(
        &o,
        &["pgoutbox.polling.order.column=seq", "max.batch.size=50", "pgoutbox.polling.partitions=6"],
    );
    let mut relays: Vec<Relay> = (0..3).map(|_| start_polling(&config, &[])).collect();
    let writer = {
        let o_sql = o.env.sql().await;
        let victim = o.env.sql().await;
        let inserts: Vec<String> = (0..1500)
            .map(|i| o.insert_sql("order", &format!("agg-{}", i % 20), Some(&format!(r#"{{"i":{i}}}"#))))
            .collect();
        let doomed = o.insert_sql("order", "doomed", Some(r#"{"doomed":true}"#));
        tokio::spawn(async move {
            for (i, insert) in inserts.iter().enumerate() {
                o_sql.batch_execute(insert).await.unwrap();
                if i % 100 == 50 {
                    // The application dies between its write and its commit.
                    victim.batch_execute("BEGIN").await.unwrap();
                    victim.batch_execute(&doomed).await.unwrap();
                    let pid: i32 = victim.query_one("SELECT pg_backend_pid()", &[]).await.unwrap().get(0);
                    o_sql.execute("SELECT pg_terminate_backend($1)", &[&pid]).await.unwrap();
                    return Some(inserts.len() - i - 1);
                }
                if i % 10 == 0 {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
            None
        })
    };
    let mut rng = 0x9e37_79b9_u32;
    for _ in 0..8 {
        tokio::time::sleep(Duration::from_millis(300 + u64::from(rng % 700))).await;
        rng ^= rng << 13;
        rng ^= rng >> 17;
        rng ^= rng << 5;
        let i = (rng % 3) as usize;
        relays[i].kill9();
        relays[i].restart();
    }
    let left = writer.await.unwrap();
    // The writer stopped after the terminated transaction; write the rest on a fresh connection.
    let sql = o.env.sql().await;
    let written = 1500 - left.unwrap_or(0);
    for i in written..1500 {
        sql.batch_execute(&o.insert_sql("order", &format!("agg-{}", i % 20), Some(&format!(r#"{{"i":{i}}}"#))))
            .await
            .unwrap();
    }
    wait_for_async("every row marked", Duration::from_secs(90), || async { unpublished(&o).await == 0 }).await;
    let records = consume_until_idle(&o.env.broker, &[o.topic("order")], Duration::from_secs(3));
    for r in &mut relays {
        r.stop();
    }
    let rows = o.rows().await;
    assert_eq!(rows.len(), 1500, "no terminated transaction left a row");
    let by = by_id(&records);
    let missing: Vec<&String> = rows.iter().map(|r| &r.id).filter(|id| !by.contains_key(*id)).collect();
    assert!(missing.is_empty(), "{} committed rows never published: {missing:?}", missing.len());
    assert_eq!(by.len(), rows.len(), "no record without a committed row");
    let seq_of: HashMap<&str, i64> = rows.iter().map(|r| (r.id.as_str(), r.seq)).collect();
    for (key, ids) in first_copies_per_aggregate(&records) {
        let seqs: Vec<i64> = ids.iter().map(|id| seq_of[id.as_str()]).collect();
        let placed: Vec<(i32, i64, i64)> = records
            .iter()
            .filter(|r| r.key.as_deref() == Some(key.as_slice()))
            .map(|r| (r.partition, r.offset, seq_of[id_of(r).as_str()]))
            .collect();
        assert!(
            seqs.windows(2).all(|w| w[0] < w[1]),
            "aggregate {:?} out of order: {seqs:?}; (partition, offset, seq): {placed:?}",
            String::from_utf8_lossy(&key)
        );
    }
}

/// One poller while the application writes: each aggregate's events in commit order, whether rows
/// are ordered by a sequence column (numerically: 557 before 1017) or, named knowingly, by their
/// inserting transactions (`xmin`, which holds for transactions without savepoints).
#[tokio::test(flavor = "multi_thread")]
async fn polling_relay_keeps_each_aggregates_order_under_a_concurrent_writer() {
    for order in [&["pgoutbox.polling.order.column=seq"][..], &["pgoutbox.polling.order.column=xmin"][..]] {
        let o = polled_outbox("poll_writer").await;
        o.create_topics(&["order"], 2).await;
        let mut extra = vec!["max.batch.size=50"];
        extra.extend_from_slice(order);
        let mut relay = start_polling(&polling_config(&o, &extra), &[]);
        let sql = o.env.sql().await;
        for i in 0..1200 {
            sql.batch_execute(&o.insert_sql("order", &format!("agg-{}", i % 20), Some(&format!(r#"{{"i":{i}}}"#))))
                .await
                .unwrap();
        }
        wait_for_async("every row marked", Duration::from_secs(90), || async { unpublished(&o).await == 0 }).await;
        let records = consume_until_idle(&o.env.broker, &[o.topic("order")], Duration::from_secs(2));
        relay.stop();
        let rows = o.rows().await;
        let seq_of: HashMap<&str, i64> = rows.iter().map(|r| (r.id.as_str(), r.seq)).collect();
        assert_eq!(by_id(&records).len(), 1200);
        for (key, ids) in first_copies_per_aggregate(&records) {
            let seqs: Vec<i64> = ids.iter().map(|id| seq_of[id.as_str()]).collect();
            assert!(
                seqs.windows(2).all(|w| w[0] < w[1]),
                "{order:?}: aggregate {} out of order: {seqs:?}",
                String::from_utf8_lossy(&key)
            );
        }
    }
}

/// Seed step 6: the unpublished rows' count and the oldest one's age are exported, and a relay that
/// cannot publish (here: no broker) reports a stall in the log, the metric and `/health`; once it
/// publishes again the backlog drains to zero and the stall ends.
#[tokio::test(flavor = "multi_thread")]
async fn polling_relay_reports_its_backlog_and_a_stall() {
    let o = polled_outbox("poll_backlog").await;
    o.create_topics(&["order"], 1).await;
    let sql = o.env.sql().await;
    for i in 0..7 {
        sql.batch_execute(&o.insert_sql("order", &format!("a{i}"), None)).await.unwrap();
    }
    let metrics = format!("127.0.0.1:{}", free_port());
    let envs = [("PGOUTBOX_BACKLOG_MS", "200")];
    let extra = [
        "pgoutbox.stall.threshold.ms=1500",
        "pgoutbox.polling.timestamp.column=created_at",
        "task.shutdown.graceful.timeout.ms=500",
    ];
    let dead = format!("bootstrap.servers=127.0.0.1:{}", free_port());
    let config = polling_config(&o, &extra).replace(&format!("bootstrap.servers={}", o.env.broker), &dead);
    let args = ["--metrics-address", metrics.as_str()];
    let mut relay = Relay::start_with_env(&config, &args, &envs);
    let sample = |name: &str| -> Option<f64> {
        let (_, body) = http_get(&metrics, "/metrics")?;
        body.lines().find(|l| l.starts_with(name)).and_then(|l| l.rsplit(' ').next()).and_then(|v| v.parse().ok())
    };
    wait_for("a stall reported", Duration::from_secs(30), || sample("pgoutbox_outbox_stalled") == Some(1.0));
    assert_eq!(sample("pgoutbox_outbox_unpublished_events"), Some(7.0));
    assert!(sample("pgoutbox_outbox_oldest_unpublished_age_seconds").unwrap() > 1.5);
    let (code, body) = http_get(&metrics, "/health").unwrap();
    assert_eq!(code, 503, "{body}");
    assert!(body.contains("stalled: 7 unpublished"), "{body}");
    relay.wait_for_log(
        "stalled: the oldest unpublished outbox event is older than pgoutbox.stall.threshold.ms",
        Duration::from_secs(5),
    );
    relay.stop();

    let mut relay = Relay::start_with_env(&polling_config(&o, &extra), &args, &envs);
    // The rows marked first: a new relay's metrics read 0 until its first measurement, which may
    // still find the backlog (and the stall) after the zeros were sampled.
    wait_for_async("the backlog drained", Duration::from_secs(30), || async {
        unpublished(&o).await == 0
            && sample("pgoutbox_outbox_unpublished_events") == Some(0.0)
            && sample("pgoutbox_outbox_stalled") == Some(0.0)
    })
    .await;
    assert_eq!(http_get(&metrics, "/health").unwrap().0, 200);
    relay.stop();
}

/// `pgoutbox.polling.notify.channel`: a NOTIFY at commit (here from a statement trigger) wakes the
/// poller at once; without it, the row would wait for the next poll a minute later.
#[tokio::test(flavor = "multi_thread")]
async fn a_notify_wakes_the_poller_before_its_interval() {
    let o = polled_outbox("poll_notify").await;
    o.create_topics(&["order"], 1).await;
    let channel = format!("ch_{}", o.table);
    o.env
        .sql()
        .await
        .batch_execute(&format!(
            "CREATE FUNCTION public.{t}_notify() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_notify('{channel}', ''); RETURN NULL; END $$; \
             CREATE TRIGGER {t}_notify AFTER INSERT ON public.{t} FOR EACH STATEMENT EXECUTE FUNCTION public.{t}_notify()",
            t = o.table
        ))
        .await
        .unwrap();
    let config = o.config(&[
        "pgoutbox.relay=polling",
        "pgoutbox.polling.order.column=seq",
        "poll.interval.ms=60000",
        &format!("pgoutbox.polling.notify.channel={channel}"),
    ]);
    let mut relay = start_polling(&config, &[]);
    relay.wait_for_log("woken by NOTIFY", Duration::from_secs(10));
    // Past the first poll, which runs at once.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let started = std::time::Instant::now();
    o.env.sql().await.batch_execute(&o.insert_sql("order", "a", None)).await.unwrap();
    let records = consume(&o.env.broker, &[o.topic("order")], 1, Duration::from_secs(20));
    assert_eq!(records.len(), 1);
    assert!(started.elapsed() < Duration::from_secs(10), "published after {:?}", started.elapsed());
    relay.stop();
}

/// An instance cut off from PostgreSQL behind a proxy that keeps the server's side of the connection
/// open (so TCP alone never tells the server) loses its partition within 30 s: the server ends its
/// silent session (the relay heartbeats its polling connection, and sets idle timeouts on it), and
/// the standby takes over; every event arrives, each aggregate's first copies in order.
#[tokio::test(flavor = "multi_thread")]
async fn a_cut_off_pollers_partitions_are_taken_over_within_30_seconds() {
    let o = polled_outbox("poll_cut").await;
    o.create_topics(&["order"], 1).await;
    let cut_off = proxy::Proxy::start(([127, 0, 0, 1], o.env.pg_port).into()).await;
    let config = polling_config(&o, &["pgoutbox.polling.order.column=seq"]);
    let via_proxy =
        config.replace(&format!("database.port={}", o.env.pg_port), &format!("database.port={}", cut_off.port));
    let mut a = start_polling(&via_proxy, &[]);
    a.wait_for_log("owned=[0]", Duration::from_secs(10));
    let mut b = start_polling(&config, &[]);
    let sql = o.env.sql().await;
    for i in 0..20 {
        sql.batch_execute(&o.insert_sql("order", &format!("agg-{}", i % 4), None)).await.unwrap();
    }
    consume(&o.env.broker, &[o.topic("order")], 20, Duration::from_secs(30));
    assert!(!b.log_text().contains("owned=[0]"), "the standby owns nothing while the first instance is alive");
    let cut = std::time::Instant::now();
    assert!(cut_off.stall_all() > 0);
    for i in 20..40 {
        sql.batch_execute(&o.insert_sql("order", &format!("agg-{}", i % 4), None)).await.unwrap();
    }
    b.wait_for_log("owned=[0]", Duration::from_secs(45));
    let took = cut.elapsed();
    assert!(took < Duration::from_secs(30), "taken over after {took:?}");
    let records = consume_until_idle(&o.env.broker, &[o.topic("order")], Duration::from_secs(3));
    let rows = o.rows().await;
    assert_eq!(by_id(&records).len(), 40, "every event arrived");
    let seq_of: HashMap<&str, i64> = rows.iter().map(|r| (r.id.as_str(), r.seq)).collect();
    for (key, ids) in first_copies_per_aggregate(&records) {
        let seqs: Vec<i64> = ids.iter().map(|id| seq_of[id.as_str()]).collect();
        assert!(
            seqs.windows(2).all(|w| w[0] < w[1]),
            "aggregate {} out of order: {seqs:?}",
            String::from_utf8_lossy(&key)
        );
    }
    eprintln!("cut-off instance's partition taken over after {took:?}");
    b.stop();
    a.kill9();
}

/// An Apache Kafka node of a test's own whose PLAINTEXT listener advertises a proxy's port, so that
/// every PLAINTEXT client reaches it through the proxy, while its SASL_PLAINTEXT listener is reached
/// directly: the network between one instance and the cluster can be cut or slowed while another
/// instance (and the test's reader) reach the same broker. Stopped and removed on drop.
struct ProxiedKafka {
    dir: std::path::PathBuf,
    proxy: proxy::Proxy,
    env: HashMap<String, String>,
}

impl ProxiedKafka {
    async fn start(name: &str) -> ProxiedKafka {
        let port = free_port();
        let proxy = proxy::Proxy::start(([127, 0, 0, 1], port).into()).await;
        let dir = std::env::temp_dir().join(support::unique(name)).join("kafka");
        // The shared cluster's certificates: making new ones would take seconds.
        let tls = dir.join("tls");
        std::fs::create_dir_all(&tls).unwrap();
        for f in std::fs::read_dir(test_kafka("tls/")).unwrap() {
            let f = f.unwrap().path();
            std::fs::copy(&f, tls.join(f.file_name().unwrap())).unwrap();
        }
        let out = tokio::task::block_in_place(|| {
            std::process::Command::new("bash")
                .arg(scripts_dir().join("services.sh"))
                .args(["kafka-start", &dir.to_string_lossy(), "1"])
                .env("KAFKA_PLAIN_PORT", port.to_string())
                .env("KAFKA_ADVERTISED_PORT", proxy.port.to_string())
                .output()
                .expect("run scripts/services.sh")
        });
        assert!(out.status.success(), "kafka-start: {}", String::from_utf8_lossy(&out.stderr));
        let env = std::fs::read_to_string(dir.join("env"))
            .unwrap()
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        ProxiedKafka { dir, proxy, env }
    }

    /// `config` with its Kafka cluster replaced by this one, reached through the proxy.
    fn via_proxy(&self, config: &str) -> String {
        replace_kafka(config, &[format!("bootstrap.servers={}", self.env["PLAINTEXT"])])
    }

    /// `config` with its Kafka cluster replaced by this one, reached directly (SASL_PLAINTEXT).
    fn direct(&self, config: &str) -> String {
        replace_kafka(
            config,
            &[
                format!("bootstrap.servers={}", self.env["SASL_PLAINTEXT"]),
                "security.protocol=SASL_PLAINTEXT".into(),
                "sasl.mechanism=SCRAM-SHA-256".into(),
                format!(
                    r#"sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="bob" password="{}";"#,
                    self.env["BOB_PASSWORD"]
                ),
            ],
        )
    }

    async fn create_topic(&self, topic: &str, partitions: i32) {
        create_topics(&self.env["PLAINTEXT"], &[topic.to_string()], partitions).await;
    }

    /// Every record of `topic`, read directly, until `idle` passes without a new one.
    fn read(&self, topic: &str, idle: Duration) -> Vec<ConsumedRecord> {
        let password = &self.env["BOB_PASSWORD"];
        let settings = [
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanism", "SCRAM-SHA-256"),
            ("sasl.username", "bob"),
            ("sasl.password", password.as_str()),
        ];
        tokio::task::block_in_place(|| {
            pgoutbox::kafka::consume::consume_all_with(
                &self.env["SASL_PLAINTEXT"],
                &settings,
                &[topic],
                None,
                idle,
                Duration::from_secs(60),
            )
            .expect("read the topic back")
        })
    }
}

impl Drop for ProxiedKafka {
    fn drop(&mut self) {
        let _ = std::process::Command::new("bash")
            .arg(scripts_dir().join("services.sh"))
            .args(["kafka-stop", &self.dir.to_string_lossy(), "kill"])
            .output();
        if let Some(scratch) = self.dir.parent() {
            let _ = std::fs::remove_dir_all(scratch);
        }
    }
}

/// `scripts/` of this repository (`PGOUTBOX_TEST_SCRIPTS` when scripts/test.sh runs the tests).
fn scripts_dir() -> std::path::PathBuf {
    std::env::var("PGOUTBOX_TEST_SCRIPTS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts")))
}

/// `config` without its `bootstrap.servers` line, with `keys` instead.
fn replace_kafka(config: &str, keys: &[String]) -> String {
    let mut lines: Vec<&str> = config.lines().filter(|l| !l.starts_with("bootstrap.servers=")).collect();
    lines.extend(keys.iter().map(String::as_str));
    lines.join("\n") + "\n"
}

/// Transactions on `o`'s table that have held an xid (and so the database's xmin horizon) for longer
/// than `longer_than`.
async fn old_transactions(o: &Outbox, longer_than: Duration) -> i64 {
    o.env
        .sql()
        .await
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE backend_xid IS NOT NULL AND pid <> pg_backend_pid() \
             AND xact_start < now() - make_interval(secs => $1) AND query LIKE '%' || $2 || '%'",
            &[&longer_than.as_secs_f64(), &o.table],
        )
        .await
        .unwrap()
        .get(0)
}

/// An instance that reaches PostgreSQL but not Kafka (the network to the broker cut, the broker
/// itself fine for the others) gives its partitions up once Kafka has acknowledged nothing of its
/// batch for `pgoutbox.polling.ack.timeout.ms`: the batch is rolled back (its transaction, which held
/// the database's xmin horizon, ends), another instance takes every partition over and publishes
/// everything, and the cut-off one takes none back until it can reach Kafka again, then its share.
/// Each aggregate's first copies keep their order throughout.
#[tokio::test(flavor = "multi_thread")]
async fn a_poller_cut_off_from_kafka_hands_its_partitions_over() {
    let kafka = ProxiedKafka::start("poll_kcut").await;
    let o = polled_outbox("poll_kcut").await;
    let topic = o.topic("order");
    kafka.create_topic(&topic, 1).await;
    let config = polling_config(
        &o,
        &["pgoutbox.polling.order.column=seq", "pgoutbox.polling.partitions=3", "pgoutbox.polling.ack.timeout.ms=3000"],
    );
    let mut a = start_polling(&kafka.via_proxy(&config), &[]);
    a.wait_for_log("owned=[0, 1, 2]", Duration::from_secs(10));
    let mut b = start_polling(&kafka.direct(&config), &[]);
    b.wait_for_log("owned=[", Duration::from_secs(10));
    let sql = o.env.sql().await;
    let insert = |from: usize, to: usize| {
        let sql = &sql;
        let o = &o;
        async move {
            for i in from..to {
                sql.batch_execute(&o.insert_sql("order", &format!("agg-{}", i % 6), None)).await.unwrap();
            }
        }
    };
    insert(0, 20).await;
    wait_for_async("published before the cut", Duration::from_secs(20), || async { unpublished(&o).await == 0 }).await;
    let cut = std::time::Instant::now();
    assert!(kafka.proxy.cut() > 0);
    insert(20, 40).await;
    b.wait_for_log("owned=[0, 1, 2]", Duration::from_secs(20));
    wait_for_async("published after the cut", Duration::from_secs(20), || async { unpublished(&o).await == 0 }).await;
    let took = cut.elapsed();
    assert!(took < Duration::from_secs(15), "taken over and published after {took:?}");
    assert_eq!(old_transactions(&o, Duration::from_secs(5)).await, 0, "a batch transaction outlived the bound");
    a.wait_for_log("acknowledged no record", Duration::from_secs(5));
    // Until Kafka is back, the cut-off instance takes no partition.
    let log = a.log_text();
    let after = &log[log.find("acknowledged no record").unwrap()..];
    assert!(!after.contains("owned=["), "took partitions back while cut off:\n{after}");
    kafka.proxy.resume_all();
    wait_for("the instance to poll again", Duration::from_secs(30), || {
        a.log_text().matches("publishing unpublished rows").count() >= 2
    });
    insert(40, 50).await;
    wait_for_async("published after the return", Duration::from_secs(20), || async { unpublished(&o).await == 0 })
        .await;
    let records = kafka.read(&topic, Duration::from_secs(2));
    a.stop();
    b.stop();
    assert_eq!(by_id(&records).len(), 50, "every event arrived");
    let seq_of: HashMap<String, i64> = o.rows().await.into_iter().map(|r| (r.id, r.seq)).collect();
    for (key, ids) in first_copies_per_aggregate(&records) {
        let seqs: Vec<i64> = ids.iter().map(|id| seq_of[id]).collect();
        assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{} out of order: {seqs:?}", String::from_utf8_lossy(&key));
    }
    eprintln!("cut-off instance's partitions taken over and its rows published after {took:?}");
}

/// A batch of large rows behind a slow broker: the producer's queue is full, the sink waits, and so
/// does the batch, for longer than the server lets a session sit idle in a transaction (shortened
/// here to 2 s, 20 s in production). The batch keeps its session alive meanwhile, and the first one
/// ends at the rows it could hand over while they arrived (20 MB, more than the sink takes in): no
/// reconnect, so no batch is published twice.
#[tokio::test(flavor = "multi_thread")]
async fn a_batch_waiting_on_a_slow_broker_keeps_its_session() {
    let kafka = ProxiedKafka::start("poll_slow").await;
    let o = polled_outbox("poll_slow").await;
    let topic = o.topic("order");
    kafka.create_topic(&topic, 1).await;
    const ROWS: i64 = 1300;
    o.env
        .sql()
        .await
        .batch_execute(&format!(
            "INSERT INTO public.{} (id, aggregatetype, aggregateid, type, payload) SELECT gen_random_uuid(), '{}', \
             'agg-' || (g % 10), 'Created', jsonb_build_object('g', g, 'pad', repeat('p', 16000)) FROM generate_series(1, {ROWS}) g",
            o.table,
            o.agg("order")
        ))
        .await
        .unwrap();
    kafka.proxy.set_rate(2_500_000);
    let config = polling_config(&o, &["pgoutbox.polling.order.column=seq", "producer.override.buffer.memory=1048576"]);
    let mut relay = start_polling(&kafka.via_proxy(&config), &[("PGOUTBOX_POLLING_SESSION_TIMEOUT_MS", "2000")]);
    let started = std::time::Instant::now();
    wait_for_async("every row marked", Duration::from_secs(60), || async {
        let log = relay.log_text();
        assert!(!log.contains("reconnecting"), "the batch lost its session:\n{log}");
        unpublished(&o).await == 0
    })
    .await;
    eprintln!("{ROWS} rows of 16 KB published through 2.5 MB/s in {:?}", started.elapsed());
    relay.stop();
    let records = kafka.read(&topic, Duration::from_secs(2));
    assert_eq!(by_id(&records).len(), ROWS as usize, "every event arrived");
    assert_eq!(records.len(), ROWS as usize, "no batch was published twice");
}

/// A number from the environment, or `default`.
fn env_or<T: std::str::FromStr>(key: &str, default: T) -> T {
    std::env::var(key).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// By hand, not in CI (minutes, and gigabytes of table, WAL and Kafka log): how fast a backlog of
/// millions of uuid-keyed rows drains, ordered by a sequence column through the partial index
/// docs/operations.md advises (`seq`), and by the inserting transactions (`xmin`, named; `default`
/// leaves the order unset, which a uuid id is refused with under `ordering=per_aggregate`). Prints
/// the figures (docs/operations.md, "A large backlog"); fails if a backlog does not drain within
/// its bound.
///
/// `PGOUTBOX_BACKLOG_ROWS` (5,000,000), `PGOUTBOX_BACKLOG_ORDERS` (`seq,xmin`),
/// `PGOUTBOX_BACKLOG_SECONDS` (the bound on each drain, 1800):
/// `cargo test --test polling a_backlog_of_millions -- --ignored --nocapture`
#[tokio::test(flavor = "multi_thread")]
#[ignore = "by hand: minutes and gigabytes; prints the drain's figures"]
async fn a_backlog_of_millions_of_uuid_keyed_rows_drains() {
    let rows: i64 = env_or("PGOUTBOX_BACKLOG_ROWS", 5_000_000);
    let bound = Duration::from_secs(env_or("PGOUTBOX_BACKLOG_SECONDS", 1800));
    let orders = std::env::var("PGOUTBOX_BACKLOG_ORDERS").unwrap_or_else(|_| "seq,xmin".into());
    for order in orders.split(',') {
        let o = polled_outbox("poll_millions").await;
        let sql = o.env.sql().await;
        let started = std::time::Instant::now();
        // Transactions of 500,000 rows, 10,000 aggregates, ~150-byte payloads.
        for first in (0..rows).step_by(500_000) {
            sql.batch_execute(&format!(
                "INSERT INTO public.{t} (id, aggregatetype, aggregateid, type, payload) SELECT gen_random_uuid(), '{agg}', \
                 'agg-' || (g % 10000), 'Created', jsonb_build_object('g', g, 'note', repeat('x', 120)) \
                 FROM generate_series({}, {}) g",
                first + 1,
                (first + 500_000).min(rows),
                t = o.table,
                agg = o.agg("order"),
            ))
            .await
            .unwrap();
        }
        let inserted = started.elapsed();
        sql.batch_execute(&format!("VACUUM ANALYZE public.{}", o.table)).await.unwrap();
        let size: String = sql
            .query_one(&format!("SELECT pg_size_pretty(pg_total_relation_size('public.{}'))", o.table), &[])
            .await
            .unwrap()
            .get(0);
        // The first poll as the relay runs it: its planner settings, a batch of 2,048 rows.
        let order_by = if order == "seq" { "o.seq" } else { "age(o.xmin) DESC, o.ctid" };
        let poll = std::time::Instant::now();
        let polled = sql
            .simple_query(&format!(
                "BEGIN; SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off; \
                 SELECT o.ctid::text, o.id::text, o.payload::text FROM public.{} AS o WHERE o.published_at IS NULL \
                 ORDER BY {order_by} LIMIT 2048 FOR UPDATE SKIP LOCKED; ROLLBACK",
                o.table
            ))
            .await
            .unwrap()
            .iter()
            .filter(|m| matches!(m, tokio_postgres::SimpleQueryMessage::Row(_)))
            .count();
        let first_poll = poll.elapsed();
        o.create_topics(&["order"], 6).await;
        let mut lines = vec!["pgoutbox.relay=polling", "poll.interval.ms=50"];
        match order {
            "seq" => lines.push("pgoutbox.polling.order.column=seq"),
            "xmin" => lines.push("pgoutbox.polling.order.column=xmin"),
            _ => {}
        }
        let mut relay = Relay::start(&o.config(&lines));
        let t0 = std::time::Instant::now();
        let mut samples: Vec<(Duration, i64)> = Vec::new();
        let mut first_mark = None;
        loop {
            let left = unpublished(&o).await;
            samples.push((t0.elapsed(), left));
            if left < rows && first_mark.is_none() {
                first_mark = Some(t0.elapsed());
            }
            if left == 0 || t0.elapsed() > bound {
                break;
            }
            if let Some(status) = relay.wait(Duration::from_millis(30)) {
                panic!("the relay stopped ({status}):\n{}", relay.log_text());
            }
            let every = if first_mark.is_none() { 250 } else { 5000 };
            tokio::time::sleep(Duration::from_millis(every)).await;
        }
        let drained = t0.elapsed();
        let left = samples.last().map_or(rows, |s| s.1);
        relay.stop();
        // The rate between the samples where `from` and `to` of the rows were published.
        let at = |share: f64| samples.iter().find(|(_, l)| (rows - l) as f64 >= share * rows as f64).copied();
        let rate = |from: f64, to: f64| match (at(from), at(to)) {
            (Some((t1, l1)), Some((t2, l2))) if t2 > t1 => format!("{:.0}", (l1 - l2) as f64 / (t2 - t1).as_secs_f64()),
            _ => "-".to_string(),
        };
        eprintln!(
            "backlog order={order}: {rows} rows inserted in {:.1} s, table {size}; first poll {:.0} ms ({polled} rows); \
             first batch marked after {:.1} s; {} rows published in {:.1} s ({:.0} rows/s overall; rows/s from 1% to 10% \
             published: {}, from 45% to 55%: {}, from 90% to 100%: {}){}",
            inserted.as_secs_f64(),
            first_poll.as_secs_f64() * 1000.0,
            first_mark.map_or(f64::NAN, |t| t.as_secs_f64()),
            rows - left,
            drained.as_secs_f64(),
            (rows - left) as f64 / drained.as_secs_f64(),
            rate(0.01, 0.1),
            rate(0.45, 0.55),
            rate(0.9, 1.0),
            if left > 0 { format!("; NOT DRAINED: {left} left after {bound:?}") } else { String::new() },
        );
        sql.batch_execute(&format!("DROP TABLE public.{}", o.table)).await.unwrap();
        assert_eq!(left, 0, "order={order}: the backlog did not drain within {bound:?}");
    }
}

/// Seed step 4, aimed: SIGKILL while a batch is read and locked but not yet published, and while it is
/// acknowledged but not yet marked. The first loses nothing and duplicates nothing; the second
/// publishes the batch again after the restart (a duplicate, never a gap).
#[tokio::test(flavor = "multi_thread")]
async fn polling_relay_killed_while_publishing_or_marking_loses_nothing() {
    for (hook, held, duplicates) in [
        ("PGOUTBOX_POLLING_HOLD_MS", "holding a batch before publishing it", false),
        ("PGOUTBOX_POLLING_HOLD_MARK_MS", "holding it before marking", true),
    ] {
        let o = polled_outbox("poll_crash").await;
        o.create_topics(&["order"], 1).await;
        let sql = o.env.sql().await;
        for i in 0..10 {
            sql.batch_execute(&o.insert_sql("order", &format!("agg-{}", i % 3), None)).await.unwrap();
        }
        let config = polling_config(&o, &["pgoutbox.polling.order.column=seq"]);
        let mut relay = start_polling(&config, &[(hook, "60000")]);
        relay.wait_for_log(held, Duration::from_secs(20));
        relay.kill9();
        assert_eq!(unpublished(&o).await, 10, "{hook}: nothing marked");
        let mut relay = start_polling(&config, &[]);
        wait_for_async("all marked", Duration::from_secs(30), || async { unpublished(&o).await == 0 }).await;
        let records = consume_until_idle(&o.env.broker, &[o.topic("order")], Duration::from_secs(2));
        relay.stop();
        let by = by_id(&records);
        assert_eq!(by.len(), 10, "{hook}: every event");
        assert_eq!(records.len(), if duplicates { 20 } else { 10 }, "{hook}");
        let seq_of: HashMap<String, i64> = o.rows().await.into_iter().map(|r| (r.id, r.seq)).collect();
        for (key, ids) in first_copies_per_aggregate(&records) {
            let seqs: Vec<i64> = ids.iter().map(|id| seq_of[id]).collect();
            assert!(
                seqs.windows(2).all(|w| w[0] < w[1]),
                "{hook}: {} out of order: {seqs:?}",
                String::from_utf8_lossy(&key)
            );
        }
    }
}

/// Rows whose aggregate id is NULL (a null key, as the log-tailing relay publishes them) with
/// several aggregate partitions and two instances: `hashtext(NULL)` is NULL, so such rows belong to
/// partition 0 like any other key hashed there; every one is published and marked, in seq order.
#[tokio::test(flavor = "multi_thread")]
async fn partitioned_pollers_publish_rows_with_a_null_aggregate_id_in_order() {
    let o = polled_outbox("poll_nullkey").await;
    o.create_topics(&["order"], 1).await;
    let sql = o.env.sql().await;
    sql.batch_execute(&format!("ALTER TABLE public.{} ALTER COLUMN aggregateid DROP NOT NULL", o.table)).await.unwrap();
    let null_row = |n: usize| {
        format!(
            "INSERT INTO public.{} (id, aggregatetype, aggregateid, type, payload) VALUES (gen_random_uuid(), '{}', NULL, 'Created', '{{\"n\":{n}}}')",
            o.table,
            o.agg("order")
        )
    };
    for i in 0..24 {
        let insert = if i % 2 == 0 { null_row(i) } else { o.insert_sql("order", &format!("agg-{}", i % 5), None) };
        sql.batch_execute(&insert).await.unwrap();
    }
    let config =
        polling_config(&o, &["pgoutbox.polling.order.column=seq", "pgoutbox.polling.partitions=4", "max.batch.size=3"]);
    let mut a = start_polling(&config, &[]);
    let mut b = start_polling(&config, &[]);
    wait_for_async("every row marked, NULL aggregate ids included", Duration::from_secs(30), || async {
        unpublished(&o).await == 0
    })
    .await;
    let records = consume_until_idle(&o.env.broker, &[o.topic("order")], Duration::from_secs(2));
    a.stop();
    b.stop();
    assert_eq!(by_id(&records).len(), 24, "every row published");
    // The rows without an aggregate id (their record keys are the key converter's null).
    let seq_of: HashMap<String, i64> = sql
        .query(&format!("SELECT id::text, seq FROM public.{} WHERE aggregateid IS NULL", o.table), &[])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let mut sorted: Vec<&ConsumedRecord> = records.iter().collect();
    sorted.sort_by_key(|r| r.offset);
    let mut seen = std::collections::HashSet::new();
    let null_seqs: Vec<i64> = sorted
        .iter()
        .map(|r| id_of(r))
        .filter(|id| seq_of.contains_key(id) && seen.insert(id.clone()))
        .map(|id| seq_of[&id])
        .collect();
    assert_eq!(null_seqs.len(), 12, "every row without an aggregate id");
    assert!(null_seqs.windows(2).all(|w| w[0] < w[1]), "NULL aggregate ids out of order: {null_seqs:?}");
}

/// A `published_at` of a type the relay cannot mark with a time is refused at start, by the relay
/// (before it publishes anything, so a supervised restart does not publish the same batch again)
/// and by `check`, naming the column, its type and the `ALTER TABLE` that fixes it; `timestamp`
/// (without time zone) is accepted.
#[tokio::test(flavor = "multi_thread")]
async fn polling_relay_refuses_a_published_column_that_is_not_a_timestamp() {
    let o = Outbox::new("poll_pubtype").await;
    o.create_topics(&["order"], 1).await;
    let sql = o.env.sql().await;
    sql.batch_execute(&format!("ALTER TABLE public.{} ADD COLUMN published_at bigint", o.table)).await.unwrap();
    for i in 0..3 {
        sql.batch_execute(&o.insert_sql("order", &format!("a{i}"), None)).await.unwrap();
    }
    let config = polling_config(&o, &[]);
    let path = write_config(&config);
    for (ty, shown) in [("bigint", "bigint"), ("boolean", "boolean"), ("text", "text"), ("date", "date")] {
        sql.batch_execute(&format!(
            "ALTER TABLE public.{t} DROP COLUMN published_at; ALTER TABLE public.{t} ADD COLUMN published_at {ty}",
            t = o.table
        ))
        .await
        .unwrap();
        let (code, out) = pgoutbox(&["check", "--config", path.to_str().unwrap()]);
        assert_eq!(code, Some(1), "{ty}: {out}");
        assert!(
            out.contains(&format!("`published_at` of \"public\".\"{}\" is of type {shown}", o.table))
                && out.contains("ALTER COLUMN \"published_at\" TYPE timestamptz"),
            "{ty}: {out}"
        );
    }
    sql.batch_execute(&format!(
        "ALTER TABLE public.{t} DROP COLUMN published_at; ALTER TABLE public.{t} ADD COLUMN published_at bigint",
        t = o.table
    ))
    .await
    .unwrap();
    let mut relay = Relay::start_with_env(&config, &[], &[]);
    let status =
        relay.wait(Duration::from_secs(30)).unwrap_or_else(|| panic!("the relay kept running: {}", relay.log_text()));
    assert!(!status.success());
    let log = relay.log_text();
    assert!(log.contains("is of type bigint") && log.contains("TYPE timestamptz"), "{log}");
    let records = consume_until_idle(&o.env.broker, &[o.topic("order")], Duration::from_secs(2));
    assert!(records.is_empty(), "published {} records before finding out it cannot mark them", records.len());

    sql.batch_execute(&format!(
        "ALTER TABLE public.{t} DROP COLUMN published_at; ALTER TABLE public.{t} ADD COLUMN published_at timestamp",
        t = o.table
    ))
    .await
    .unwrap();
    let mut relay = start_polling(&config, &[]);
    wait_for_async("all marked", Duration::from_secs(30), || async { unpublished(&o).await == 0 }).await;
    relay.stop();
}

/// A record larger than the producer's `max.request.size`, with `errors.tolerance=none`: the rows
/// before it are published and marked, the relay stops naming the event, its size and the fix, and
/// each restart (a supervisor's) stops at it again without publishing those rows a second time.
#[tokio::test(flavor = "multi_thread")]
async fn a_record_too_large_stops_the_polling_relay_after_marking_the_rows_before_it() {
    record_too_large_stops_after_the_rows_before_it("poll_toolarge", "producer.override.max.request.size=4096", None)
        .await;
}

/// The same for a record within the producer's limit but over its topic's `max.message.bytes`:
/// the broker refused its batch, the batch rolled back and every restart published the rows before
/// it again.
#[tokio::test(flavor = "multi_thread")]
async fn a_record_too_large_for_its_topic_stops_the_polling_relay_after_marking_the_rows_before_it() {
    record_too_large_stops_after_the_rows_before_it("poll_toolargetopic", "max.message.bytes", Some("4096")).await;
}

/// `limit`: a producer setting, or (with `topic_limit`) the topic config to set.
async fn record_too_large_stops_after_the_rows_before_it(name: &str, limit: &str, topic_limit: Option<&str>) {
    let o = polled_outbox(name).await;
    o.create_topics(&["order"], 1).await;
    let mut settings = vec!["pgoutbox.polling.order.column=seq", "task.shutdown.graceful.timeout.ms=2000"];
    match topic_limit {
        Some(value) => set_topic_config(&o.env.broker, &o.topic("order"), limit, value).await,
        None => settings.push(limit),
    }
    let sql = o.env.sql().await;
    for i in 0..5 {
        sql.batch_execute(&o.insert_sql("order", &format!("before-{i}"), None)).await.unwrap();
    }
    let big = format!(r#"{{"blob":"{}"}}"#, "x".repeat(8000));
    sql.batch_execute(&o.insert_sql("order", "big", Some(&big))).await.unwrap();
    for i in 0..3 {
        sql.batch_execute(&o.insert_sql("order", &format!("after-{i}"), None)).await.unwrap();
    }
    let big_id = o.rows().await.into_iter().find(|r| r.aggregateid == "big").unwrap().id;
    let config = polling_config(&o, &settings);
    let mut relay = Relay::start_with_env(&config, &[], &[]);
    for run in 0..3 {
        if run > 0 {
            relay.restart();
        }
        let status = relay
            .wait(Duration::from_secs(30))
            .unwrap_or_else(|| panic!("run {run}: the relay kept running: {}", relay.log_text()));
        assert!(!status.success(), "run {run}");
    }
    let log = relay.log_text();
    let named = topic_limit.map_or("max.request.size", |_| limit);
    assert!(log.contains(&big_id) && log.contains(named) && log.contains("bytes"), "{log}");
    let records = consume_until_idle(&o.env.broker, &[o.topic("order")], Duration::from_secs(3));
    let rows = o.rows().await;
    let by = by_id(&records);
    for r in &rows {
        let copies = by.get(&r.id).map_or(0, Vec::len);
        if r.aggregateid.starts_with("before-") {
            assert_eq!(copies, 1, "{} published {copies} times over three runs", r.aggregateid);
        } else {
            assert_eq!(copies, 0, "{} published past the refused record", r.aggregateid);
        }
    }
    assert_eq!(
        o.count_where("published_at IS NOT NULL AND aggregateid LIKE 'before-%'").await,
        5,
        "the rows before it marked"
    );
    assert_eq!(unpublished(&o).await, 4, "the refused row and the rows after it stay unpublished");
}

/// Instances that would break each other's order refuse to start beside a running one, naming the
/// difference: `ordering=none` beside `per_aggregate`, another partition count, another set of
/// tables (another lock namespace). The running instance goes on; a matching one joins.
#[tokio::test(flavor = "multi_thread")]
async fn polling_instances_that_disagree_refuse_to_start() {
    let o = polled_outbox("poll_disagree").await;
    o.create_topics(&["order"], 1).await;
    let other = format!("{}_other", o.table);
    let sql = o.env.sql().await;
    sql.batch_execute(&format!("CREATE TABLE public.{other} (LIKE public.{} INCLUDING ALL)", o.table)).await.unwrap();
    let base = ["pgoutbox.polling.order.column=seq", "pgoutbox.polling.partitions=4"];
    let mut first = start_polling(&polling_config(&o, &base), &[]);
    let two_tables = polling_config(&o, &base).replace(
        &format!("table.include.list=public.{}", o.table),
        &format!("table.include.list=public.{},public.{other}", o.table),
    );
    let cases = [
        (
            polling_config(&o, &["pgoutbox.polling.order.column=seq", "pgoutbox.polling.ordering=none"]),
            "pgoutbox.polling.ordering",
        ),
        (
            polling_config(&o, &["pgoutbox.polling.order.column=seq", "pgoutbox.polling.partitions=2"]),
            "pgoutbox.polling.partitions",
        ),
        (two_tables, "table.include.list"),
    ];
    for (config, named) in cases {
        let mut late = Relay::start_with_env(&config, &[], &[]);
        let status = late
            .wait(Duration::from_secs(20))
            .unwrap_or_else(|| panic!("{named}: a disagreeing instance kept running: {}", late.log_text()));
        assert!(!status.success(), "{named}");
        let log = late.log_text();
        assert!(log.contains(named) && log.contains("another instance"), "{named}: {log}");
    }
    let mut same = start_polling(&polling_config(&o, &base), &[]);
    sql.batch_execute(&o.insert_sql("order", "a", None)).await.unwrap();
    wait_for_async("published", Duration::from_secs(30), || async { unpublished(&o).await == 0 }).await;
    assert!(!first.log_text().contains("another instance"), "{}", first.log_text());
    same.stop();
    first.stop();
}

/// A pgbouncer in front of the test server, killed on drop; `None` where pgbouncer is not installed.
struct Pgbouncer {
    child: std::process::Child,
    port: u16,
}

impl Pgbouncer {
    fn start(pg_port: u16, pool_mode: &str) -> Option<Pgbouncer> {
        let bin =
            ["/usr/sbin/pgbouncer", "/usr/bin/pgbouncer"].into_iter().find(|p| std::path::Path::new(p).exists())?;
        let dir = std::env::temp_dir().join(unique("pgbouncer"));
        std::fs::create_dir_all(&dir).unwrap();
        let port = free_port();
        std::fs::write(dir.join("users.txt"), "\"postgres\" \"\"\n").unwrap();
        let ini = dir.join("pgbouncer.ini");
        std::fs::write(
            &ini,
            format!(
                "[databases]\npostgres = host=127.0.0.1 port={pg_port} dbname=postgres\n[pgbouncer]\nlisten_addr = 127.0.0.1\n\
                 listen_port = {port}\nauth_type = trust\nauth_file = {}\npool_mode = {pool_mode}\n\
                 ignore_startup_parameters = extra_float_digits,options\nunix_socket_dir =\n",
                dir.join("users.txt").display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        for f in [&dir, &ini, &dir.join("users.txt")] {
            std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let mut cmd = std::process::Command::new(bin);
        // pgbouncer refuses to run as root.
        let root = std::process::Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.starts_with(b"0\n"));
        if root {
            cmd.args(["-u", "postgres"]);
        }
        let child =
            cmd.arg(&ini).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).spawn().ok()?;
        wait_for("pgbouncer listening", Duration::from_secs(10), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        Some(Pgbouncer { child, port })
    }
}

impl Drop for Pgbouncer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Behind pgbouncer with `pool_mode=transaction` the polling connection's session advisory locks
/// would stay with a server connection other clients use: the relay refuses to start, naming the
/// pool mode, before it publishes anything; with `pool_mode=session` it runs. Skipped (with a note)
/// where pgbouncer is not installed (`apt-get install pgbouncer`), except under scripts/test.sh,
/// whose install step installs it.
#[tokio::test(flavor = "multi_thread")]
async fn a_poller_behind_a_transaction_pooler_refuses_to_start() {
    let o = polled_outbox("poll_pooler").await;
    o.create_topics(&["order"], 1).await;
    o.env.sql().await.batch_execute(&o.insert_sql("order", "a", None)).await.unwrap();
    let Some(transaction) = Pgbouncer::start(o.env.pg_port, "transaction") else {
        // scripts/test.sh runs scripts/install.sh, which installs it: there a missing one is a defect.
        assert!(
            std::env::var_os("PGOUTBOX_TEST_SCRIPTS").is_none(),
            "pgbouncer is not installed: scripts/install.sh installs it"
        );
        eprintln!("skipped: pgbouncer is not installed");
        return;
    };
    let via = |port: u16| {
        polling_config(&o, &[]).replace(&format!("database.port={}", o.env.pg_port), &format!("database.port={port}"))
    };
    let mut relay = Relay::start_with_env(&via(transaction.port), &[], &[]);
    let status = relay
        .wait(Duration::from_secs(30))
        .unwrap_or_else(|| panic!("the relay ran behind a transaction pooler: {}", relay.log_text()));
    assert!(!status.success());
    let log = relay.log_text();
    assert!(log.contains("pool_mode=transaction") && log.contains("pool_mode=session"), "{log}");
    assert_eq!(unpublished(&o).await, 1, "nothing published or marked");
    let session = Pgbouncer::start(o.env.pg_port, "session").unwrap();
    let mut relay = start_polling(&via(session.port), &[]);
    wait_for_async("published through a session pool", Duration::from_secs(30), || async {
        unpublished(&o).await == 0
    })
    .await;
    relay.stop();
}

/// The test cluster's `env` file (its listeners and SASL passwords) and its certificates.
fn test_kafka(key: &str) -> String {
    let dir = std::path::PathBuf::from(std::env::var("PGOUTBOX_TEST_KAFKA").expect("PGOUTBOX_TEST_KAFKA"));
    if let Some(file) = key.strip_prefix("tls/") {
        return dir.join("tls").join(file).to_string_lossy().into_owned();
    }
    let env = std::fs::read_to_string(dir.join("env")).expect("the Kafka cluster's env file");
    env.lines().find_map(|l| l.strip_prefix(&format!("{key}="))).unwrap_or_else(|| panic!("{key} in env")).to_string()
}

/// A broker certificate from a CA the client does not trust stops the polling relay at its first
/// session's start, exit 7, naming the truststore, as it stops the log-tailing relay: before it
/// takes a partition or reads a row, without waiting for librdkafka's refusal to be confirmed.
#[tokio::test(flavor = "multi_thread")]
async fn an_untrusted_broker_certificate_stops_the_polling_relay_at_once() {
    let o = polled_outbox("poll_untrusted").await;
    o.env.sql().await.batch_execute(&o.insert_sql("order", "a", None)).await.unwrap();
    let password = test_kafka("ALICE_PASSWORD");
    let config = polling_config(
        &o,
        &[
            "security.protocol=SASL_SSL",
            "sasl.mechanism=SCRAM-SHA-512",
            &format!(
                r#"sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="{password}";"#
            ),
            &format!("ssl.truststore.location={}", test_kafka("tls/other-ca.pem")),
            "ssl.truststore.type=PEM",
        ],
    )
    .replace(&format!("bootstrap.servers={}", o.env.broker), &format!("bootstrap.servers={}", test_kafka("SASL_SSL")));
    let mut relay = Relay::start(&config);
    let status =
        relay.wait(Duration::from_secs(30)).unwrap_or_else(|| panic!("the relay kept running:\n{}", relay.log_text()));
    let log = relay.log_text();
    assert_eq!(status.code(), Some(7), "{log}");
    assert!(log.contains("is not trusted") && log.contains("ssl.truststore.location"), "{log}");
    assert!(!log.contains("confirming in"), "a definite refusal waited for a confirmation:\n{log}");
    assert!(!log.contains("publishing unpublished rows"), "it polled before checking the cluster:\n{log}");
    assert!(!log.contains(&password), "a secret reached the log");
    assert_eq!(unpublished(&o).await, 1);
}

/// What seed step 4's kill test leaves out, measured from outside: the application writes all the
/// time, one transaction at a time (each with one to three events of one aggregate, on whichever
/// connection of its pool is next), so the kills land while batches hold their rows locked, are being
/// published and marked, and partitions change hands under load; one instance stays dead for a
/// while, so the others take its partitions and later give them back. Every committed event
/// arrives, and each aggregate's first copies keep commit order (the order the writer committed,
/// carried in each payload).
#[tokio::test(flavor = "multi_thread")]
async fn partitioned_pollers_killed_under_a_steady_writer_keep_each_aggregates_commit_order() {
    let o = polled_outbox("poll_killw").await;
    o.create_topics(&["order"], 6).await;
    let config = polling_config(&o, &["max.batch.size=200", "pgoutbox.polling.partitions=12"]);
    // Each batch waits a moment between Kafka's acknowledgement and its marks, as batches wait for a
    // replicated cluster's acknowledgements, so that kills land while the broker holds records whose
    // rows are not marked (and the next owner publishes them again).
    let hold = [("PGOUTBOX_POLLING_HOLD_MARK_MS", "150")];
    let mut relays: Vec<Relay> = (0..3).map(|_| start_polling(&config, &hold)).collect();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let pool = [o.env.sql().await, o.env.sql().await, o.env.sql().await];
        let (table, agg) = (o.table.clone(), o.agg("order"));
        let stop = stop.clone();
        tokio::spawn(async move {
            let (mut rng, mut written) = (0x2545_f491_u32, 0u64);
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                rng ^= rng << 13;
                rng ^= rng >> 17;
                rng ^= rng << 5;
                let (aggregate, events, connection) = (rng % 40, 1 + (rng >> 8) % 3, (rng >> 16) as usize % pool.len());
                let mut tx = String::from("BEGIN;");
                for _ in 0..events {
                    tx.push_str(&format!(
                        "INSERT INTO public.{table} (id, aggregatetype, aggregateid, type, payload) \
                         VALUES (gen_random_uuid(), '{agg}', 'agg-{aggregate}', 'Created', '{{\"n\":{written}}}');"
                    ));
                    written += 1;
                }
                tx.push_str("COMMIT");
                pool[connection].batch_execute(&tx).await.unwrap();
                tokio::time::sleep(Duration::from_micros(200)).await;
            }
            written
        })
    };
    let mut rng = 0x9e37_79b9_u32;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 17;
        rng ^= rng << 5;
        rng
    };
    let started = std::time::Instant::now();
    let mut kills = 0;
    // By hand, longer and against the cluster PGOUTBOX_TEST_BROKER names (e.g. three nodes):
    // PGOUTBOX_KILL_SECONDS (14) of kills, the fourth victim dead for PGOUTBOX_DEAD_SECONDS (3).
    let (kill_for, dead_for) = (env_or("PGOUTBOX_KILL_SECONDS", 14), env_or("PGOUTBOX_DEAD_SECONDS", 3));
    while started.elapsed() < Duration::from_secs(kill_for) {
        tokio::time::sleep(Duration::from_millis(400 + u64::from(next() % 800))).await;
        let i = (next() % 3) as usize;
        relays[i].kill9();
        kills += 1;
        // The fourth victim stays dead for a while.
        if kills == 4 {
            tokio::time::sleep(Duration::from_secs(dead_for)).await;
        }
        relays[i].restart();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let written = writer.await.unwrap();
    wait_for_async("every row marked", Duration::from_secs(60), || async { unpublished(&o).await == 0 }).await;
    let records = consume_until_idle(&o.env.broker, &[o.topic("order")], Duration::from_secs(3));
    for r in &mut relays {
        r.stop();
    }
    // Commit order: the writer's count, in each payload.
    let committed: HashMap<String, i64> = o
        .env
        .sql()
        .await
        .query(&format!("SELECT id::text, (payload->>'n')::int8 FROM public.{}", o.table), &[])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(committed.len() as u64, written);
    let by = by_id(&records);
    assert_eq!(by.len(), committed.len(), "every committed row published, nothing else");
    let mut out_of_order = Vec::new();
    for (key, ids) in first_copies_per_aggregate(&records) {
        let order: Vec<i64> = ids.iter().map(|id| committed[id]).collect();
        for w in order.windows(2).filter(|w| w[0] > w[1]) {
            // Each copy of both events: where it sits, and which run published it.
            let copies = |n: i64| -> Vec<(i32, i64, String)> {
                records
                    .iter()
                    .filter(|r| committed[&id_of(r)] == n)
                    .map(|r| {
                        let run = r.header("__debezium.context.runId").map(String::from_utf8_lossy).unwrap_or_default();
                        (r.partition, r.offset, run.into_owned())
                    })
                    .collect()
            };
            out_of_order.push(format!(
                "{}: event {} (committed later) first published before event {}; copies (partition, offset, run): {:?}, {:?}",
                String::from_utf8_lossy(&key),
                w[0],
                w[1],
                copies(w[0]),
                copies(w[1])
            ));
        }
    }
    eprintln!("{written} events, {} records, {kills} kills", records.len());
    assert!(out_of_order.is_empty(), "{} reorderings:\n{}", out_of_order.len(), out_of_order.join("\n"));
    assert!(records.len() as u64 > written, "no kill landed between a batch's acknowledgement and its marks");
}

/// The `step` of each payload, in the order of the aggregate's first copies.
fn steps_in_order(records: &[ConsumedRecord]) -> Vec<String> {
    let mut sorted: Vec<&ConsumedRecord> = records.iter().collect();
    sorted.sort_by_key(|r| (r.partition, r.offset));
    let mut seen = std::collections::HashSet::new();
    sorted
        .into_iter()
        .filter(|r| seen.insert(id_of(r)))
        .map(|r| step_of(&serde_json::from_slice(r.value.as_deref().unwrap_or(b"null")).unwrap()))
        .collect()
}

/// The `step` of an event's payload, through the converter's envelope and a payload sent as a string.
fn step_of(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(s) => serde_json::from_str(s).map(|v| step_of(&v)).unwrap_or_default(),
        v if v.get("step").is_some() => v["step"].as_str().unwrap_or_default().to_string(),
        v => v.get("payload").map(step_of).unwrap_or_default(),
    }
}

/// Starts the relay with the default order (none named) over `o`, whose ids are uuids: it must stop
/// before publishing anything, since no order it could take by itself keeps insertion order. Returns
/// its log; on failure says what it published, in which order.
fn refused_by_default(o: &Outbox) -> String {
    refused(o, &default_order_config(o), "with no order column and a uuid id")
}

/// Starts the relay with `config`, which it must refuse before publishing anything; returns its log.
fn refused(o: &Outbox, config: &str, what: &str) -> String {
    let mut relay = Relay::start_with_env(config, &[], &[]);
    let status = relay.wait(Duration::from_secs(20));
    let records = consume_until_idle(&o.env.broker, &[o.topic("order")], Duration::from_secs(1));
    assert!(
        status.is_some_and(|s| !s.success()) && records.is_empty(),
        "{what} the relay ran ({status:?}) and published the aggregate as {:?}",
        steps_in_order(&records)
    );
    relay.log_text()
}

/// A sequence with `CACHE 20` hands each session a block of numbers: an application that commits one
/// transaction at a time but through a pool of connections gives an aggregate's later transaction a
/// smaller number than an earlier one (here 1, 21, then 2), and the relay published them in number
/// order, not commit order (the same writer under kills, through three connections, measured 502
/// reorderings in 14,743 events). The relay and `check` refuse such a column, naming the
/// `ALTER SEQUENCE`; after it, and new connections, events keep commit order.
#[tokio::test(flavor = "multi_thread")]
async fn polling_relay_refuses_a_sequence_that_hands_out_blocks_of_numbers() {
    let o = polled_outbox("poll_cache").await;
    o.create_topics(&["order"], 1).await;
    let sequence = format!("public.{}_seq_seq", o.table);
    let sql = o.env.sql().await;
    sql.batch_execute(&format!("ALTER SEQUENCE {sequence} CACHE 20")).await.unwrap();
    let insert = |step: &str| o.insert_sql("order", "agg", Some(&format!(r#"{{"step":"{step}"}}"#)));
    let (first, second) = (o.env.sql().await, o.env.sql().await);
    first.batch_execute(&insert("1")).await.unwrap();
    second.batch_execute(&insert("2")).await.unwrap();
    first.batch_execute(&insert("3")).await.unwrap();
    let config = polling_config(&o, &[]);
    let log = refused(&o, &config, "with a sequence of CACHE 20");
    let fix = format!("ALTER SEQUENCE {sequence} CACHE 1");
    assert!(log.contains("CACHE 20") && log.contains(&fix), "{log}");
    let (code, out) = pgoutbox(&["check", "--config", write_config(&config).to_str().unwrap()]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains(&fix), "{out}");

    sql.batch_execute(&fix).await.unwrap();
    let mut relay = start_polling(&config, &[]);
    wait_for_async("the rows written before the fix marked", Duration::from_secs(30), || async {
        unpublished(&o).await == 0
    })
    .await;
    let (third, fourth) = (o.env.sql().await, o.env.sql().await);
    third.batch_execute(&insert("4")).await.unwrap();
    fourth.batch_execute(&insert("5")).await.unwrap();
    third.batch_execute(&insert("6")).await.unwrap();
    wait_for_async("every row marked", Duration::from_secs(30), || async { unpublished(&o).await == 0 }).await;
    let records = consume_until_idle(&o.env.broker, &[o.topic("order")], Duration::from_secs(2));
    relay.stop();
    assert_eq!(steps_in_order(&records)[3..], ["4", "5", "6"]);
}

/// ORMs nest blocks in savepoints: e1, SAVEPOINT, e2, RELEASE, e3. The savepoint's row carries the
/// subtransaction's own, larger xid, so the inserting transactions' order (the old default for a
/// uuid id) published e2 after e3. By default the relay now refuses to start, naming the sequence
/// column the table has; with it, e1, e2, e3 arrive in order, and a rolled-back savepoint's row never.
#[tokio::test(flavor = "multi_thread")]
async fn polling_relay_keeps_an_aggregates_events_written_in_savepoints_in_order() {
    let o = polled_outbox("poll_savepoint").await;
    o.create_topics(&["order"], 1).await;
    let insert = |step: &str| o.insert_sql("order", "agg", Some(&format!(r#"{{"step":"{step}"}}"#)));
    o.env
        .sql()
        .await
        .batch_execute(&format!(
            "BEGIN; {}; SAVEPOINT s1; {}; RELEASE SAVEPOINT s1; {}; SAVEPOINT s2; {}; ROLLBACK TO SAVEPOINT s2; COMMIT",
            insert("e1"),
            insert("e2"),
            insert("e3"),
            insert("rolled-back")
        ))
        .await
        .unwrap();
    let log = refused_by_default(&o);
    assert!(log.contains("savepoint") && log.contains("set pgoutbox.polling.order.column=seq"), "{log}");
    let mut relay = start_polling(&polling_config(&o, &["pgoutbox.polling.order.column=seq"]), &[]);
    wait_for_async("every row marked", Duration::from_secs(30), || async { unpublished(&o).await == 0 }).await;
    let records = consume_until_idle(&o.env.broker, &[o.topic("order")], Duration::from_secs(2));
    relay.stop();
    assert_eq!(steps_in_order(&records), ["e1", "e2", "e3"]);
}

/// `ctid`, the old default's tie-break within one transaction, is a place: once vacuum freed space
/// on an early page, a transaction's later rows can land there, before its earlier ones. Here e1 is
/// too large for the freed space and goes to the end of the table, e2 and e3 fit the freed page; the
/// ctids prove it. By default the relay refuses to start; in the order column's order the events
/// arrive as inserted.
#[tokio::test(flavor = "multi_thread")]
async fn polling_relay_keeps_one_transactions_events_in_order_on_reused_pages() {
    let o = polled_outbox("poll_reuse").await;
    o.create_topics(&["order"], 1).await;
    let sql = o.env.sql().await;
    let t = format!("public.{}", o.table);
    // Payloads stay in the row (no compression, no TOAST), so their sizes decide where rows go.
    sql.batch_execute(&format!(
        "ALTER TABLE {t} ALTER COLUMN payload SET STORAGE PLAIN, SET (autovacuum_enabled = false); \
         INSERT INTO {t} (id, aggregatetype, aggregateid, type, payload, published_at) \
         SELECT gen_random_uuid(), 'filler', 'filler', 'Created', jsonb_build_object('pad', repeat('x', 1000)), now() \
         FROM generate_series(1, 70)"
    ))
    .await
    .unwrap();
    // Free about 4 kB on the first page. VACUUM reclaims it once no snapshot or transaction older
    // than the delete is left (other tests' may be, for a moment).
    let deleter: i64 = sql
        .query_one(
            &format!(
                "WITH d AS (DELETE FROM {t} WHERE ctid = ANY('{{\"(0,1)\",\"(0,2)\",\"(0,3)\",\"(0,4)\"}}'::tid[]) RETURNING 1) \
                 SELECT txid_current() FROM (SELECT count(*) FROM d) x"
            ),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    wait_for_async("no snapshot older than the delete", Duration::from_secs(30), || async {
        let older: i64 = sql
            .query_one(
                "SELECT (SELECT count(*) FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND datname = current_database() \
                 AND (backend_xmin::text::int8 <= $1 OR backend_xid::text::int8 < $1)) \
                 + (SELECT count(*) FROM pg_replication_slots WHERE xmin::text::int8 <= $1)",
                &[&deleter],
            )
            .await
            .unwrap()
            .get(0);
        older == 0
    })
    .await;
    sql.batch_execute(&format!("VACUUM {t}")).await.unwrap();
    let insert = |step: &str, pad: usize| {
        format!(
            "INSERT INTO {t} (id, aggregatetype, aggregateid, type, payload) VALUES (gen_random_uuid(), '{}', 'agg', 'Created', \
             jsonb_build_object('step', '{step}', 'pad', repeat('x', {pad})))",
            o.agg("order")
        )
    };
    sql.batch_execute(&format!("BEGIN; {}; {}; {}; COMMIT", insert("e1", 7000), insert("e2", 3000), insert("e3", 10)))
        .await
        .unwrap();
    let placed: Vec<(String, i64)> = sql
        .query(&format!("SELECT ctid::text, seq FROM {t} WHERE aggregateid = 'agg' ORDER BY seq"), &[])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let reused: i64 = sql
        .query_one(
            &format!(
                "SELECT count(*) FROM (SELECT ctid, lag(ctid) OVER (ORDER BY seq) AS before FROM {t} WHERE aggregateid = 'agg') x \
                 WHERE ctid < before"
            ),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(reused > 0, "no later row landed before an earlier one (ctid, seq): {placed:?}");
    refused_by_default(&o);
    let mut relay = start_polling(&polling_config(&o, &["pgoutbox.polling.order.column=seq"]), &[]);
    wait_for_async("every row marked", Duration::from_secs(30), || async { unpublished(&o).await == 0 }).await;
    let records = consume_until_idle(&o.env.broker, &[o.topic("order")], Duration::from_secs(2));
    relay.stop();
    assert_eq!(steps_in_order(&records), ["e1", "e2", "e3"], "(ctid, seq): {placed:?}");
}

/// An outbox with a uuid id and no sequence column (Debezium's): the relay and `check` refuse the
/// default order before anything is published, giving the statements that add an identity column
/// and its index and the key to set; those statements, run as given, fix it. An order column that
/// does not number rows is refused naming its type; `xmin`, named, runs with a warning.
#[tokio::test(flavor = "multi_thread")]
async fn polling_relay_refuses_an_order_that_cannot_keep_insertion_order() {
    let o = polled_outbox("poll_noorder").await;
    o.create_topics(&["order"], 1).await;
    let sql = o.env.sql().await;
    sql.batch_execute(&format!("ALTER TABLE public.{} DROP COLUMN seq", o.table)).await.unwrap();
    for i in 0..3 {
        sql.batch_execute(&o.insert_sql("order", "agg", Some(&format!(r#"{{"step":"{i}"}}"#)))).await.unwrap();
    }
    let t = format!("\"public\".\"{}\"", o.table);
    let add = format!("ALTER TABLE {t} ADD COLUMN \"seq\" bigint GENERATED BY DEFAULT AS IDENTITY");
    let index = format!("CREATE INDEX CONCURRENTLY ON {t} (\"seq\") WHERE \"published_at\" IS NULL");
    let fix = format!("{add}; {index}; then set pgoutbox.polling.order.column=seq");
    let log = refused_by_default(&o);
    assert!(log.contains(&fix), "{log}");
    assert!(
        log.contains("its event id `id` (table.field.event.id) is a uuid")
            && log.contains("pgoutbox.polling.order.column=xmin")
            && log.contains("pgoutbox.polling.ordering=none"),
        "{log}"
    );
    let checked = |config: &str| pgoutbox(&["check", "--config", write_config(config).to_str().unwrap()]);
    let (code, out) = checked(&default_order_config(&o));
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains(&fix), "check gives the same fix: {out}");

    let (code, out) = checked(&polling_config(&o, &["pgoutbox.polling.order.column=created_at"]));
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("column `created_at`") && out.contains("of type timestamp with time zone"), "{out}");

    let xmin = polling_config(&o, &["pgoutbox.polling.order.column=xmin"]);
    let (code, out) = checked(&xmin);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("WARNING") && out.contains("savepoint"), "{out}");
    let (code, out) = checked(
        &polling_config(&o, &["pgoutbox.polling.ordering=none"]).replace("pgoutbox.polling.order.column=seq\n", ""),
    );
    assert_eq!(code, Some(0), "ordering=none promises no order: {out}");

    sql.batch_execute(&add).await.unwrap();
    sql.batch_execute(&index).await.unwrap();
    let fixed = polling_config(&o, &["pgoutbox.polling.order.column=seq"]);
    let (code, out) = checked(&fixed);
    assert_eq!(code, Some(0), "{out}");
    assert!(!out.contains("WARNING"), "{out}");
    let mut relay = start_polling(&fixed, &[]);
    wait_for_async("every row marked", Duration::from_secs(30), || async { unpublished(&o).await == 0 }).await;
    let records = consume_until_idle(&o.env.broker, &[o.topic("order")], Duration::from_secs(2));
    relay.stop();
    assert_eq!(steps_in_order(&records), ["0", "1", "2"]);
}
