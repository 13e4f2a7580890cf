//! `pgoutbox verify` against real PostgreSQL and a real broker: clean after the relay published
//! everything, and each kind of finding named when it is there.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use serde_json::Value;
use support::*;

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Run {
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}\nstderr: {}", self.stdout, self.stderr))
    }
}

fn write_config(o: &Outbox, extra: &[&str]) -> PathBuf {
    let dir = std::env::temp_dir().join(unique("verify"));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("connector.properties");
    std::fs::write(&path, o.config(extra)).unwrap();
    path
}

/// Removes the directory `write_config` made (kept when a test fails, for a look at the config).
fn remove_config(config: &Path) {
    if let Some(dir) = config.parent() {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Runs `pgoutbox verify --config <config> <args>`; `--idle-ms` keeps waits for missing events short.
fn verify(config: &PathBuf, args: &[&str]) -> Run {
    let out = tokio::task::block_in_place(|| {
        Command::new(env!("CARGO_BIN_EXE_pgoutbox"))
            .arg("verify")
            .arg("--config")
            .arg(config)
            .args(["--idle-ms", "1000"])
            .args(args)
            .output()
            .expect("run pgoutbox verify")
    });
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn verify_clean_after_relay_then_names_a_missing_event() {
    let o = Outbox::new("verify").await;
    o.create_topics(&["Order", "Customer"], 2).await;
    let mut relay = Relay::start_streaming(&o.config(&[]));
    let sql = o.env.sql().await;
    for tx in 0..10 {
        let mut batch = String::from("BEGIN;");
        for e in 0..4 {
            let n = tx * 4 + e;
            let kind = if n % 2 == 0 { "Order" } else { "Customer" };
            batch.push_str(&o.insert_sql(kind, &format!("agg-{}", n % 5), Some(&format!(r#"{{"n": {n}}}"#))));
            batch.push(';');
        }
        batch.push_str("COMMIT;");
        sql.batch_execute(&batch).await.unwrap();
    }
    let topics = vec![o.topic("Order"), o.topic("Customer")];
    assert_eq!(
        consume(&o.env.broker, &topics, 40, Duration::from_secs(30)).len(),
        40,
        "relay log:\n{}",
        relay.log_text()
    );
    assert_eq!(relay.stop().code(), Some(0));
    // No slot from here on: a row inserted now is committed but never published.
    o.drop_slot().await;
    let config = write_config(&o, &[]);

    let clean = verify(&config, &["--json"]);
    assert_eq!(clean.code, Some(0), "stdout: {}\nstderr: {}", clean.stdout, clean.stderr);
    let j = clean.json();
    assert_eq!(j["ok"], true);
    assert_eq!(j["events_committed"], 40);
    assert_eq!(j["records_consumed"], 40);
    assert_eq!(j["table"], format!("public.{}", o.table));
    for finding in ["missing", "orphans", "duplicates", "order_violations"] {
        assert_eq!(j[finding]["count"], 0, "{finding}: {j}");
    }
    assert_eq!(j["order_violations"]["checked"], 40);
    assert!(j["order_source"].as_str().unwrap().contains("`seq`"), "{j}");
    let mut expected_topics = topics.clone();
    expected_topics.sort();
    assert_eq!(j["topics"], serde_json::json!(expected_topics));

    let text = verify(&config, &[]);
    assert_eq!(text.code, Some(0), "{}", text.stderr);
    assert!(text.stdout.contains("result: OK") && text.stdout.contains("events committed:  40"), "{}", text.stdout);

    let before: String = sql.query_one("SELECT now()::text", &[]).await.unwrap().get(0);
    tokio::time::sleep(Duration::from_millis(20)).await;
    let missing: String = sql
        .query_one(
            &format!("INSERT INTO public.{} (id, aggregatetype, aggregateid, type, payload) VALUES (gen_random_uuid(), '{}', 'agg-late', 'Created', '{{}}') RETURNING id::text", o.table, o.agg("Order")),
            &[],
        )
        .await
        .unwrap()
        .get(0);

    let found = verify(&config, &["--json"]);
    assert_eq!(found.code, Some(1), "stdout: {}\nstderr: {}", found.stdout, found.stderr);
    let j = found.json();
    assert_eq!(j["ok"], false);
    assert_eq!(j["events_committed"], 41);
    assert_eq!(j["missing"]["count"], 1, "{j}");
    assert_eq!(j["missing"]["examples"][0]["id"], missing.as_str());
    assert_eq!(j["missing"]["examples"][0]["topic"], o.topic("Order"));
    assert_eq!(j["orphans"]["count"], 0);

    let text = verify(&config, &[]);
    assert_eq!(text.code, Some(1));
    assert!(
        text.stdout.contains(&format!("id={missing}")) && text.stdout.contains("result: FAILED"),
        "{}",
        text.stdout
    );

    // A window that holds only the late row: reading starts from that time too.
    let windowed = verify(&config, &["--json", "--since", &before]);
    assert_eq!(windowed.code, Some(1), "stdout: {}\nstderr: {}", windowed.stdout, windowed.stderr);
    let j = windowed.json();
    assert_eq!(j["events_committed"], 1, "{j}");
    assert_eq!(j["missing"]["examples"][0]["id"], missing.as_str());
    assert_eq!(j["orphans"]["count"], 0, "earlier events are not orphans of this window: {j}");
    remove_config(&config);
}

/// Produces records by hand (no relay), each with an `id` header, to partition 0 of `topic`.
fn produce(broker: &str, topic: &str, records: &[(&str, &str)]) {
    let producer: BaseProducer = rdkafka::ClientConfig::new().set("bootstrap.servers", broker).create().unwrap();
    for (key, id) in records {
        let headers = OwnedHeaders::new().insert(Header { key: "id", value: Some(*id) });
        producer
            .send(BaseRecord::to(topic).partition(0).key(*key).payload("{}").headers(headers))
            .map_err(|(e, _)| e)
            .unwrap();
    }
    tokio::task::block_in_place(|| producer.flush(Duration::from_secs(30))).unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn verify_finds_orphans_duplicates_and_order_violations() {
    let o = Outbox::new("verifyhand").await;
    o.create_topics(&["Order"], 1).await;
    let sql = o.env.sql().await;
    for _ in 0..3 {
        sql.batch_execute(&o.insert_sql("Order", "A", Some("{}"))).await.unwrap();
    }
    let ids: Vec<String> = o.rows().await.into_iter().map(|r| r.id).collect();
    let (e1, e2, e3) = (ids[0].as_str(), ids[1].as_str(), ids[2].as_str());
    // e3 before e2 (out of order), e1 twice (a duplicate), and a record no row explains.
    produce(&o.env.broker, &o.topic("Order"), &[("A", e1), ("A", e3), ("A", e2), ("A", e1), ("A", "not-a-row")]);
    let config = write_config(&o, &[]);

    let run = verify(&config, &["--json"]);
    assert_eq!(run.code, Some(1), "stdout: {}\nstderr: {}", run.stdout, run.stderr);
    let j = run.json();
    assert_eq!(j["missing"]["count"], 0, "{j}");
    assert_eq!(j["duplicates"]["count"], 1, "{j}");
    assert_eq!(j["duplicates"]["examples"][0]["id"], e1);
    assert_eq!(j["orphans"]["count"], 1);
    assert_eq!(j["orphans"]["examples"][0]["id"], "not-a-row");
    assert_eq!(j["order_violations"]["count"], 1);
    let v = &j["order_violations"]["examples"][0];
    assert_eq!((v["id"].as_str(), v["after_id"].as_str(), v["aggregate"].as_str()), (Some(e2), Some(e3), Some("A")));

    // Without the orphan and the order check, only the duplicate is left: reported, not failed...
    let lenient = verify(&config, &["--json", "--orphans", "off", "--order-column", "type"]);
    assert_eq!(lenient.code, Some(0), "stdout: {}\nstderr: {}", lenient.stdout, lenient.stderr);
    assert_eq!(lenient.json()["duplicates"]["count"], 1);
    // ...unless asked.
    assert_eq!(verify(&config, &["--orphans", "off", "--order-column", "type", "--fail-on-duplicates"]).code, Some(1));

    // Operator errors exit 2 and say what is wrong; an unreachable database exits 3.
    let bad = verify(&config, &["--order-column", "no_such_column"]);
    assert_eq!(bad.code, Some(2), "{}", bad.stderr);
    assert!(bad.stderr.contains("no_such_column"), "{}", bad.stderr);
    let bad = verify(&config, &["--since", "not a time"]);
    assert_eq!(bad.code, Some(2), "{}", bad.stderr);
    assert!(bad.stderr.contains("--since"), "{}", bad.stderr);
    let unreachable = verify(&config, &["--set", "database.port=1"]);
    assert_eq!(unreachable.code, Some(3), "{}", unreachable.stderr);
    remove_config(&config);
}

/// `verify` with the polling relay: a row not yet marked published and not in a topic is pending,
/// not missing; a row marked published that no topic has is missing (what the relay must never do).
#[tokio::test(flavor = "multi_thread")]
async fn verify_audits_the_polling_relays_marks() {
    let o = Outbox::new("verify_poll").await;
    o.create_topics(&["Order"], 1).await;
    let sql = o.env.sql().await;
    sql.batch_execute(&format!("ALTER TABLE public.{} ADD COLUMN published_at timestamptz", o.table)).await.unwrap();
    for n in 0..10 {
        sql.batch_execute(&o.insert_sql("Order", &format!("agg-{n}"), None)).await.unwrap();
    }
    let polling = ["pgoutbox.relay=polling", "pgoutbox.polling.order.column=seq", "poll.interval.ms=50"];
    let mut relay = Relay::start(&o.config(&polling));
    assert_eq!(consume(&o.env.broker, &[o.topic("Order")], 10, Duration::from_secs(30)).len(), 10);
    wait_for_async("all marked", Duration::from_secs(30), || async {
        o.count_where("published_at IS NULL").await == 0
    })
    .await;
    relay.stop();
    for n in 10..12 {
        sql.batch_execute(&o.insert_sql("Order", &format!("agg-{n}"), None)).await.unwrap();
    }
    let config = write_config(&o, &polling);
    let run = verify(&config, &["--json"]);
    assert_eq!(run.code, Some(0), "stdout: {}\nstderr: {}", run.stdout, run.stderr);
    let j = run.json();
    assert_eq!(j["missing"]["count"], 0, "{j}");
    assert!(j.to_string().contains("2 row(s) not yet published by the polling relay"), "{j}");

    // A row marked published without its record: the loss verify exists to find.
    sql.batch_execute(&format!("UPDATE public.{t} SET published_at = now() WHERE aggregateid = 'agg-11'", t = o.table))
        .await
        .unwrap();
    let run = verify(&config, &["--json"]);
    assert_eq!(run.code, Some(1), "stdout: {}\nstderr: {}", run.stdout, run.stderr);
    assert_eq!(run.json()["missing"]["count"], 1);
    remove_config(&config);
}
