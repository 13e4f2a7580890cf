//! Bad input gets a clear error, nothing is lost, and the position does not move past it; with
//! errors.tolerance=all the event goes to the dead-letter topic and the relay moves on.

mod support;

use std::time::Duration;

use pgoutbox::lsn::Lsn;
use support::*;

async fn commit_lsn_after(o: &Outbox, sql: &str) -> Lsn {
    let c = o.env.sql().await;
    c.batch_execute(sql).await.unwrap();
    let l: String = c.query_one("SELECT pg_current_wal_lsn()::text", &[]).await.unwrap().get(0);
    l.parse().unwrap()
}

/// Whether the (inactive) slot still has a change whose data holds `needle` ahead of it: peeked, not
/// consumed. This is the exact form of "the position did not pass the bad row": a bound taken from
/// pg_current_wal_lsn() before the row is not, since the relay may rightly confirm the WAL of other
/// transactions (other tests') committed after that bound and before the bad row.
async fn still_ahead(o: &Outbox, needle: &str) -> bool {
    let c = o.env.sql().await;
    let n: i64 = c
        .query_one(
            "SELECT count(*) FROM pg_logical_slot_peek_binary_changes($1, NULL, NULL, 'proto_version', '1', \
             'publication_names', $2) WHERE position(convert_to($3, 'UTF8') in data) > 0",
            &[&o.slot, &o.publication, &needle],
        )
        .await
        .unwrap()
        .get(0);
    n > 0
}

#[tokio::test(flavor = "multi_thread")]
async fn unroutable_row_stops_the_relay_before_it_and_again_after_restart() {
    let o = Outbox::new("badrow").await;
    o.create_topics(&["Order"], 1).await;
    let sql = o.env.sql().await;
    sql.batch_execute(&format!("ALTER TABLE public.{} ALTER COLUMN aggregatetype DROP NOT NULL", o.table))
        .await
        .unwrap();
    let mut relay = Relay::start_streaming(&o.config(&[]));
    sql.batch_execute(&o.insert_sql("Order", "good-1", Some("{}"))).await.unwrap();
    assert_eq!(consume(&o.env.broker, &[o.topic("Order")], 1, Duration::from_secs(30)).len(), 1);
    let bad_id = "11111111-2222-3333-4444-555555555555";
    commit_lsn_after(&o, &format!("INSERT INTO public.{} (id, aggregatetype, aggregateid, type, payload) VALUES ('{bad_id}', NULL, 'x', 't', '{{}}')", o.table)).await;
    sql.batch_execute(&o.insert_sql("Order", "good-2", Some("{}"))).await.unwrap();
    let status = relay.wait(Duration::from_secs(30)).expect("stops on the bad row");
    let log = relay.log_text();
    assert_eq!(status.code(), Some(5), "log:\n{log}");
    assert!(
        log.contains(bad_id) && log.contains("aggregatetype") && log.contains("NULL"),
        "names the event, the column and the problem:\n{log}"
    );
    assert!(still_ahead(&o, bad_id).await, "position must not pass the bad row: {:?}", o.confirmed_flush().await);
    assert!(!still_ahead(&o, "no-such-text-in-the-outbox").await, "the check can tell");
    // Restarted, it stops at the same row again: nothing was skipped.
    relay.restart();
    assert_eq!(relay.wait(Duration::from_secs(30)).and_then(|s| s.code()), Some(5));
    assert_eq!(
        consume_until_idle(&o.env.broker, &[o.topic("Order")], Duration::from_secs(1)).len(),
        1,
        "good-2 not published past the bad row"
    );
    // With errors.tolerance=all the bad row goes to the dead-letter topic and good-2 follows.
    let dlq = format!("dlq_{}", o.slot);
    create_topics(&o.env.broker, std::slice::from_ref(&dlq), 1).await;
    let cfg = o.config(&["errors.tolerance=all", &format!("errors.deadletterqueue.topic.name={dlq}")]);
    let mut relay = Relay::start(&cfg);
    let letters = consume(&o.env.broker, std::slice::from_ref(&dlq), 1, Duration::from_secs(30));
    assert_eq!(letters.len(), 1, "log:\n{}", relay.log_text());
    let value = String::from_utf8(letters[0].value.clone().unwrap()).unwrap();
    assert!(value.contains(bad_id), "{value}");
    assert!(letters[0].header("__connect.errors.exception.message").is_some());
    assert_eq!(
        consume(&o.env.broker, &[o.topic("Order")], 2, Duration::from_secs(30)).len(),
        2,
        "good-2 published after the dead letter"
    );
    assert_eq!(relay.stop().code(), Some(0));
    o.drop_slot().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn record_too_large_for_the_producer_is_named_and_not_skipped() {
    let o = Outbox::new("toolarge").await;
    o.create_topics(&["Order"], 1).await;
    let sql = o.env.sql().await;
    let mut relay = Relay::start_streaming(&o.config(&["producer.override.message.max.bytes=10000"]));
    let big = format!(r#"{{"blob": "{}"}}"#, "x".repeat(20_000));
    sql.batch_execute(&o.insert_sql("Order", "big", Some(&big))).await.unwrap();
    let status = relay.wait(Duration::from_secs(30)).expect("stops on the refused record");
    let log = relay.log_text();
    assert_eq!(status.code(), Some(6), "log:\n{log}");
    assert!(log.contains("outbox.event.") && log.contains("larger"), "names the topic and the fix:\n{log}");
    // Tolerated: the dead letter stands for it and the relay goes on.
    let dlq = format!("dlq_{}", o.slot);
    create_topics(&o.env.broker, std::slice::from_ref(&dlq), 1).await;
    let mut relay = Relay::start(&o.config(&[
        "producer.override.message.max.bytes=10000",
        "errors.tolerance=all",
        &format!("errors.deadletterqueue.topic.name={dlq}"),
    ]));
    let letters = consume(&o.env.broker, &[dlq], 1, Duration::from_secs(30));
    assert_eq!(letters.len(), 1, "log:\n{}", relay.log_text());
    assert!(letters[0].header("__connect.errors.topic").is_some());
    sql.batch_execute(&o.insert_sql("Order", "small", Some("{}"))).await.unwrap();
    assert_eq!(consume(&o.env.broker, &[o.topic("Order")], 1, Duration::from_secs(30)).len(), 1);
    assert_eq!(relay.stop().code(), Some(0));
    o.drop_slot().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn fatal_update_publishes_what_came_before_then_stops_before_it() {
    let o = Outbox::new("fatalupd").await;
    o.create_topics(&["Order"], 1).await;
    let cfg = o.config(&["transforms.outbox.table.op.invalid.behavior=fatal"]);
    let mut relay = Relay::start_streaming(&cfg);
    relay.stop();
    let sql = o.env.sql().await;
    sql.batch_execute(&o.insert_sql("Order", "a", Some("{}"))).await.unwrap();
    sql.batch_execute(&format!("UPDATE public.{} SET type = 'changed'", o.table)).await.unwrap();
    relay.restart();
    let status = relay.wait(Duration::from_secs(30)).expect("stops on the UPDATE");
    assert_eq!(status.code(), Some(5), "log:\n{}", relay.log_text());
    assert_eq!(
        consume_until_idle(&o.env.broker, &[o.topic("Order")], Duration::from_secs(1)).len(),
        1,
        "the insert before the UPDATE is published"
    );
    let confirmed: Lsn = o.confirmed_flush().await.unwrap().parse().unwrap();
    assert!(still_ahead(&o, "changed").await, "confirmed {confirmed} must stay before the UPDATE's transaction");
    o.drop_slot().await;
}

/// A transform that fails on a record (InsertField on a plain payload, for one aggregate type only,
/// through a predicate) stops the relay before the event, naming the transform and Kafka's error;
/// under errors.tolerance=all the event becomes a dead letter and the stream goes on.
#[tokio::test(flavor = "multi_thread")]
async fn a_failing_transform_follows_errors_tolerance() {
    let o = Outbox::new("badsmt").await;
    o.create_topics(&["Order", "Audit"], 1).await;
    let sql = o.env.sql().await;
    let audit_topic = o.topic("Audit").replace('.', "\\.");
    let chain = [
        "transforms=outbox,stamp".to_string(),
        "transforms.stamp.type=org.apache.kafka.connect.transforms.InsertField$Value".to_string(),
        "transforms.stamp.topic.field=topic".to_string(),
        "transforms.stamp.predicate=audit".to_string(),
        "predicates=audit".to_string(),
        "predicates.audit.type=org.apache.kafka.connect.transforms.predicates.TopicNameMatches".to_string(),
        format!("predicates.audit.pattern={audit_topic}"),
    ];
    let lines: Vec<&str> = chain.iter().map(String::as_str).collect();
    let mut relay = Relay::start_streaming(&o.config(&lines));
    sql.batch_execute(&o.insert_sql("Order", "good-1", Some("{}"))).await.unwrap();
    assert_eq!(consume(&o.env.broker, &[o.topic("Order")], 1, Duration::from_secs(30)).len(), 1);
    sql.batch_execute(&o.insert_sql("Audit", "bad", Some("{}"))).await.unwrap();
    sql.batch_execute(&o.insert_sql("Order", "good-2", Some("{}"))).await.unwrap();
    let status = relay.wait(Duration::from_secs(30)).expect("stops on the failing transform");
    let log = relay.log_text();
    assert_eq!(status.code(), Some(5), "log:\n{log}");
    assert!(
        log.contains("transform `stamp` failed")
            && log.contains("Only Struct objects supported for [field insertion], found: java.lang.String"),
        "names the transform and Kafka's error:\n{log}"
    );
    assert!(still_ahead(&o, "Audit").await, "position must not pass the failed event: {:?}", o.confirmed_flush().await);
    let dlq = format!("dlq_{}", o.slot);
    create_topics(&o.env.broker, std::slice::from_ref(&dlq), 1).await;
    let mut tolerant = lines.clone();
    let dlq_line = format!("errors.deadletterqueue.topic.name={dlq}");
    tolerant.extend(["errors.tolerance=all", dlq_line.as_str()]);
    let mut relay = Relay::start(&o.config(&tolerant));
    let letters = consume(&o.env.broker, std::slice::from_ref(&dlq), 1, Duration::from_secs(30));
    assert_eq!(letters.len(), 1, "log:\n{}", relay.log_text());
    assert_eq!(
        consume(&o.env.broker, &[o.topic("Order")], 2, Duration::from_secs(30)).len(),
        2,
        "good-2 published after the dead letter"
    );
    assert_eq!(relay.stop().code(), Some(0));
    o.drop_slot().await;
}
