//! Setup problems an operator must fix: each stops the relay with one clear message that says what to
//! do, and a distinct exit code (3 connection/authorisation, 4 database setup). Uses a PostgreSQL of
//! its own, because it changes wal_level and max_slot_wal_keep_size and restarts the server.

mod support;

use std::process::Command;
use std::time::Duration;

use support::*;

struct OwnPg {
    dir: String,
    port: u16,
}

fn services(args: &[&str]) -> String {
    let scripts = std::env::var("PGOUTBOX_TEST_SCRIPTS")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/scripts").to_string());
    let out = Command::new("bash").arg(format!("{scripts}/services.sh")).args(args).output().expect("services.sh");
    assert!(out.status.success(), "services.sh {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

impl OwnPg {
    fn start() -> OwnPg {
        let dir = std::env::temp_dir().join(unique("setuppg")).to_string_lossy().into_owned();
        std::fs::create_dir_all(&dir).unwrap();
        Command::new("chmod").args(["755", &dir]).status().unwrap();
        let port: u16 = services(&["free-port"]).parse().unwrap();
        services(&["pg-start", &dir, &port.to_string()]);
        OwnPg { dir, port }
    }
    fn restart(&self) {
        services(&["pg-stop", &self.dir, "fast"]);
        services(&["pg-start", &self.dir, &self.port.to_string()]);
    }
    async fn sql(&self) -> tokio_postgres::Client {
        let (c, conn) = tokio_postgres::connect(
            &format!("host=127.0.0.1 port={} user=postgres dbname=postgres", self.port),
            tokio_postgres::NoTls,
        )
        .await
        .unwrap();
        tokio::spawn(async move {
            let _ = conn.await;
        });
        c
    }
}

impl Drop for OwnPg {
    fn drop(&mut self) {
        let _ = services(&["pg-stop", &self.dir, "immediate"]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn config(port: u16, extra: &str) -> String {
    let broker = Env::get().broker;
    format!(
        "name=setup\ndatabase.hostname=127.0.0.1\ndatabase.port={port}\ndatabase.user=postgres\ndatabase.dbname=postgres\n\
         database.sslmode=disable\ntopic.prefix=setup\nslot.name=setup_slot\npublication.name=setup_pub\n\
         publication.autocreate.mode=filtered\ntable.include.list=public.outbox\nsnapshot.mode=no_data\n\
         transforms=outbox\ntransforms.outbox.type=io.debezium.transforms.outbox.EventRouter\nbootstrap.servers={broker}\n{extra}\n"
    )
}

fn fails(cfg: &str, code: i32, needles: &[&str]) {
    let mut relay = Relay::start(cfg);
    let status = relay.wait(Duration::from_secs(60)).expect("exits on its own");
    let log = relay.log_text();
    assert_eq!(status.code(), Some(code), "log:\n{log}");
    for n in needles {
        assert!(log.contains(n), "expected {n:?} in:\n{log}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn setup_errors_say_what_to_fix_with_distinct_exit_codes() {
    let pg = OwnPg::start();
    let sql = pg.sql().await;
    // Table missing (filtered publication has nothing to publish).
    fails(&config(pg.port, ""), 4, &["no table matches table.include.list"]);
    sql.batch_execute(include_str!("../sql/outbox.sql")).await.unwrap();
    // Publication missing with autocreate disabled.
    fails(
        &config(pg.port, "publication.autocreate.mode=disabled"),
        4,
        &["publication `setup_pub` does not exist", "publication.autocreate.mode=filtered"],
    );
    // A slot of another plugin.
    sql.batch_execute("SELECT pg_create_logical_replication_slot('other_plugin', 'test_decoding')").await.unwrap();
    fails(&config(pg.port, "slot.name=other_plugin"), 4, &["test_decoding", "not pgoutput"]);
    // A user without the REPLICATION attribute.
    sql.batch_execute(
        "CREATE ROLE norepl LOGIN; GRANT ALL ON SCHEMA public TO norepl; GRANT ALL ON public.outbox TO norepl",
    )
    .await
    .unwrap();
    fails(
        &config(pg.port, "database.user=norepl\nslot.name=norepl_slot").replace("database.user=postgres\n", ""),
        3,
        &["REPLICATION"],
    );
    // A slot invalidated by max_slot_wal_keep_size: the WAL it needed is gone.
    for stmt in [
        "ALTER SYSTEM SET max_slot_wal_keep_size = '1MB'",
        "SELECT pg_reload_conf()",
        "SELECT pg_create_logical_replication_slot('lost_slot', 'pgoutput')",
        "CREATE TABLE filler (x text)",
        "INSERT INTO filler SELECT repeat('x', 1000) FROM generate_series(1, 40000)",
        "SELECT pg_switch_wal()",
        "CHECKPOINT",
        "INSERT INTO filler SELECT repeat('x', 1000) FROM generate_series(1, 40000)",
        "SELECT pg_switch_wal()",
        "CHECKPOINT",
    ] {
        sql.batch_execute(stmt).await.unwrap();
    }
    let status: Option<String> = sql
        .query_one("SELECT wal_status FROM pg_replication_slots WHERE slot_name = 'lost_slot'", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(status.as_deref(), Some("lost"), "the slot must be invalidated for this check");
    fails(&config(pg.port, "slot.name=lost_slot"), 4, &["invalidated", "drop and recreate the slot"]);
    // wal_level not logical.
    // The server refuses to start with wal_level below logical while logical slots exist.
    sql.batch_execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots").await.unwrap();
    sql.batch_execute("ALTER SYSTEM SET wal_level = 'replica'").await.unwrap();
    drop(sql);
    pg.restart();
    fails(&config(pg.port, ""), 4, &["wal_level", "logical", "restart PostgreSQL"]);
}
