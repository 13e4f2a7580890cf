//! What the differentials that run the same connector on Kafka Connect and on a `pgoutbox connect`
//! worker share (metrics_connect, flush_connect, mismatch_connect): the connector's config both sides
//! get, the pgoutbox worker, and waiting for the connectors' slots.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::connect::Connect;
use super::debezium::tail;
use crate::support::{http_get, unsafe_sigterm, wait_exit, worker_properties, Env};

/// One outbox connector: the Event Router on `table`, on its own `slot` and `publication`, under
/// topic prefix `server`, its records moved into topics named `<side>.<topic>` (a RegexRouter), so
/// that each side's records stay apart on the shared broker. Callers add or replace keys.
pub fn connector_config(table: &str, slot: &str, publication: &str, server: &str, side: &str) -> serde_json::Value {
    serde_json::json!({
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "database.hostname": "127.0.0.1",
        "database.port": Env::get().pg_port.to_string(),
        "database.user": "postgres",
        "database.dbname": "postgres",
        "topic.prefix": server,
        "plugin.name": "pgoutput",
        "slot.name": slot,
        "publication.name": publication,
        "publication.autocreate.mode": "filtered",
        "table.include.list": format!("public.{table}"),
        "status.update.interval.ms": "500",
        // Debezium reads every logical decoding message of the database whatever the publication
        // (B-17), and other tests emit some: keep them out, on both sides alike.
        "message.prefix.exclude.list": ".*",
        "transforms": "outbox,side",
        "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
        "transforms.side.type": "org.apache.kafka.connect.transforms.RegexRouter",
        "transforms.side.regex": "(.*)",
        "transforms.side.replacement": format!("{side}.$1"),
    })
}

/// Waits (up to two minutes) until every slot of `names` exists.
pub async fn slots_exist(sql: &tokio_postgres::Client, names: &[String]) -> Result<(), String> {
    let start = Instant::now();
    loop {
        let n: i64 = sql
            .query_one("SELECT count(*) FROM pg_replication_slots WHERE slot_name = ANY($1)", &[&names])
            .await
            .map_err(|e| e.to_string())?
            .get(0);
        if n == names.len() as i64 {
            return Ok(());
        }
        if start.elapsed() > Duration::from_secs(120) {
            return Err(format!("only {n} of the slots {names:?} exist after two minutes"));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

pub fn logs(connect: &Connect, worker: &Worker) -> String {
    format!("--- Connect, last lines:\n{}\n--- pgoutbox, last lines:\n{}", connect.log_tail(30), worker.log_tail(30))
}

/// A `pgoutbox connect` distributed worker, alone in its group.
pub struct Worker {
    child: Option<Child>,
    log: PathBuf,
}

impl Worker {
    pub fn start(dir: &std::path::Path, broker: &str, addr: &str, u: &str) -> Worker {
        let group = format!("pgoutbox-{u}");
        let props = dir.join("worker.properties");
        std::fs::write(&props, worker_properties(broker, addr, &group, "")).unwrap();
        let log = dir.join("worker.log");
        let child = Command::new(env!("CARGO_BIN_EXE_pgoutbox"))
            .args(["connect", "--worker"])
            .arg(&props)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start pgoutbox connect");
        let start = Instant::now();
        while !http_get(addr, "/connectors").is_some_and(|(code, _)| code == 200) {
            assert!(start.elapsed() < Duration::from_secs(60), "the pgoutbox worker did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        Worker { child: Some(child), log }
    }

    pub fn log_tail(&self, n: usize) -> String {
        tail(&std::fs::read_to_string(&self.log).unwrap_or_default(), n)
    }

    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            unsafe_sigterm(c.id());
            if wait_exit(&mut c, Duration::from_secs(30)).is_none() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
