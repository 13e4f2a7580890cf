//! The schema-registry converters against a real registry (Apicurio Registry, scripts/registry.sh)
//! when it fails: one that stops answering holds the position before the record that needs it, and
//! the relay goes on once it answers; one that refuses a schema as incompatible stops the relay,
//! naming the subject. Each test runs a registry of its own, to stop it.
//!
//! Run through scripts/test.sh (PostgreSQL, Kafka and the registry's build from its install step).

mod support;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use support::{consume, unique, Outbox, Relay};

/// A registry of the test's own: `scripts/registry.sh start DIR`.
struct Registry {
    dir: PathBuf,
    url: String,
}

impl Registry {
    fn start(name: &str) -> Registry {
        let scripts =
            std::env::var("PGOUTBOX_TEST_SCRIPTS").expect("PGOUTBOX_TEST_SCRIPTS: run through scripts/test.sh");
        let dir = std::env::temp_dir().join("pgoutbox-registry-tests").join(unique(name));
        let status = Command::new("bash")
            .arg(format!("{scripts}/registry.sh"))
            .arg("start")
            .arg(&dir)
            .status()
            .expect("run scripts/registry.sh");
        assert!(status.success(), "scripts/registry.sh start failed (log in {})", dir.display());
        let env = std::fs::read_to_string(dir.join("env")).expect("the registry's env file");
        let url = env.lines().find_map(|l| l.strip_prefix("URL=")).expect("URL= in the env file").to_string();
        Registry { dir, url }
    }

    fn signal(&self, signal: &str) {
        let pid = std::fs::read_to_string(self.dir.join("pid")).expect("the registry's pid file");
        let status = Command::new("kill").arg(format!("-{signal}")).arg(pid.trim()).status().unwrap();
        assert!(status.success(), "kill -{signal} the registry");
    }

    /// An HTTP call to the registry: the status and the body.
    fn call(&self, method: &str, path: &str, body: &str) -> (u16, String) {
        use std::io::{Read, Write};
        let addr = self.url.trim_start_matches("http://");
        let mut s = std::net::TcpStream::connect(addr).expect("connect to the registry");
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let req = format!(
            "{method} {path} HTTP/1.0\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        s.write_all(req.as_bytes()).unwrap();
        let mut raw = String::new();
        let _ = s.read_to_string(&mut raw);
        let code = raw.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
        (code, raw.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default())
    }

    /// The schema a Confluent-format id names, through the Confluent-compatible API.
    fn schema(&self, id: u32) -> String {
        let (code, body) = self.call("GET", &format!("/apis/ccompat/v7/schemas/ids/{id}"), "");
        assert_eq!(code, 200, "schema {id}: {body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        v["schema"].as_str().unwrap().to_string()
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.signal("CONT");
        self.signal("KILL");
    }
}

async fn lsn(outbox: &Outbox) -> String {
    outbox.env.sql().await.query_one("SELECT pg_current_wal_lsn()::text", &[]).await.unwrap().get(0)
}

fn lsn_value(text: &str) -> u64 {
    let (hi, lo) = text.split_once('/').unwrap();
    (u64::from_str_radix(hi, 16).unwrap() << 32) | u64::from_str_radix(lo, 16).unwrap()
}

/// The id of a Confluent-format record (magic byte 0, 4-byte id).
fn confluent_id(value: &[u8]) -> u32 {
    assert_eq!(value[0], 0, "the magic byte");
    u32::from_be_bytes(value[1..5].try_into().unwrap())
}

/// Confluent's AvroConverter through Apicurio's Confluent-compatible API, with expanded payloads so
/// that a new payload shape needs a new schema. The registry stops answering (SIGSTOP: connections
/// hang, as behind a dead load balancer) just before a row of a new shape: nothing from that row on
/// is published, the slot's confirmed position stays before it, the relay logs why and keeps
/// running; once the registry answers (SIGCONT) the rows arrive in order, their ids naming the
/// schemas of their payloads. Then the subject gets a BACKWARD rule and a row whose payload changes
/// a field's type from the latest version's: the relay stops with exit code 6, naming the subject and the registry's reason,
/// and the position stays before that row.
#[tokio::test(flavor = "multi_thread")]
async fn a_registry_that_stops_answering_holds_the_position_and_an_incompatible_schema_stops_the_relay() {
    let registry = Registry::start("down");
    let outbox = Outbox::new("registry_down").await;
    outbox.create_topics(&["Order"], 1).await;
    let topic = outbox.topic("Order");
    let ccompat = format!("{}/apis/ccompat/v7", registry.url);
    let config = outbox.config(&[
        "key.converter=org.apache.kafka.connect.storage.StringConverter",
        "value.converter=io.confluent.connect.avro.AvroConverter",
        &format!("value.converter.schema.registry.url={ccompat}"),
        "transforms.outbox.table.expand.json.payload=true",
    ]);
    let mut relay = Relay::start_streaming(&config);
    let sql = outbox.env.sql().await;
    sql.batch_execute(&outbox.insert_sql("Order", "a-1", Some(r#"{"n": 1}"#))).await.unwrap();
    let first = consume(&outbox.env.broker, std::slice::from_ref(&topic), 1, Duration::from_secs(30));
    assert_eq!(first.len(), 1, "log:\n{}", relay.log_text());
    let n_int = registry.schema(confluent_id(first[0].value.as_deref().unwrap()));
    assert!(n_int.contains(r#"{"name":"n","type":["null","int"],"default":null}"#), "{n_int}");

    // The registry stops answering; a row of a new shape, then one of the known shape.
    registry.signal("STOP");
    let before = lsn(&outbox).await;
    sql.batch_execute(&outbox.insert_sql("Order", "a-1", Some(r#"{"m": "x"}"#))).await.unwrap();
    sql.batch_execute(&outbox.insert_sql("Order", "a-1", Some(r#"{"n": 2}"#))).await.unwrap();
    let stopped = Instant::now();
    relay.wait_for_log("did not answer for subject", Duration::from_secs(60));
    println!("registry down: the relay said so after {:.1} s", stopped.elapsed().as_secs_f64());
    // Long enough for several status intervals (500 ms here) and a retry.
    tokio::time::sleep(Duration::from_secs(15)).await;
    let held = support::consume_until_idle(&outbox.env.broker, std::slice::from_ref(&topic), Duration::from_secs(2));
    assert_eq!(held.len(), 1, "published while the registry was down:\n{}", relay.log_text());
    let confirmed = outbox.confirmed_flush().await.expect("the slot");
    assert!(
        lsn_value(&confirmed) <= lsn_value(&before),
        "the slot was confirmed at {confirmed}, past {before}, where the row waiting for the registry starts"
    );
    assert!(relay.wait(Duration::from_millis(10)).is_none(), "the relay must wait for the registry, not exit");

    registry.signal("CONT");
    let all = consume(&outbox.env.broker, std::slice::from_ref(&topic), 3, Duration::from_secs(90));
    assert_eq!(all.len(), 3, "after the registry came back; log:\n{}", relay.log_text());
    let m = registry.schema(confluent_id(all[1].value.as_deref().unwrap()));
    assert!(m.contains(r#""name":"m""#), "the second record names {m}");
    assert_eq!(registry.schema(confluent_id(all[2].value.as_deref().unwrap())), n_int);
    assert!(relay.log_text().contains("schema registry: schema registered"), "the recovery is logged");

    // An incompatible change under a BACKWARD rule.
    let subject = format!("{topic}-value");
    let (code, body) =
        registry.call("PUT", &format!("/apis/ccompat/v7/config/{subject}"), r#"{"compatibility":"BACKWARD"}"#);
    assert_eq!(code, 200, "setting the rule: {body}");
    let before = lsn(&outbox).await;
    // The latest version is the `m` string shape: `m` as a number cannot read it.
    sql.batch_execute(&outbox.insert_sql("Order", "a-1", Some(r#"{"m": 5}"#))).await.unwrap();
    let Some(exit) = relay.wait(Duration::from_secs(60)) else {
        panic!("the relay kept running after an incompatible schema; log:\n{}", relay.log_text())
    };
    let log = relay.log_text();
    assert_eq!(exit.code(), Some(6), "log:\n{log}");
    assert!(log.contains(&format!("refused subject `{subject}`")) && log.contains("HTTP 409"), "log:\n{log}");
    let confirmed = outbox.confirmed_flush().await.expect("the slot");
    assert!(lsn_value(&confirmed) <= lsn_value(&before), "confirmed {confirmed}, past the refused row at {before}");
    let records = support::consume_until_idle(&outbox.env.broker, std::slice::from_ref(&topic), Duration::from_secs(2));
    assert_eq!(records.len(), 3, "the refused row was published");
    outbox.drop_slot().await;
}
