//! The polling relay (`pgoutbox.relay=polling`) against real PostgreSQL and Kafka: the same records as
//! the log-tailing relay, rows marked only once acknowledged, late commits never skipped, and the
//! order it keeps (and, with unpartitioned workers, the order it does not).

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

fn polling_config(o: &Outbox, extra: &[&str]) -> String {
    let mut lines = vec!["pgoutbox.relay=polling", "poll.interval.ms=50"];
    lines.extend_from_slice(extra);
    o.config(&lines)
}

fn start_polling(config: &str, envs: &[(&str, &str)]) -> Relay {
    let r = Relay::start_with_env(config, &[], envs);
    r.wait_for_log("polling: publishing unpublished rows", Duration::from_secs(30));
    r
}

async fn unpublished(o: &Outbox) -> i64 {
    o.env
        .sql()
        .await
        .query_one(&format!("SELECT count(*) FROM public.{} WHERE published_at IS NULL", o.table), &[])
        .await
        .unwrap()
        .get(0)
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

/// Rows are marked only after the broker acknowledged them: with the broker unreachable nothing is
/// marked; once it is back, everything is published and marked.
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
    let mut relay = start_polling(&config, &[]);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(unpublished(&o).await, 20, "nothing marked without acknowledgements");
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
