//! `pgoutbox check` against a real database and broker: clean setups pass, broken ones are named
//! with their fix and exit non-zero.

mod support;

use std::process::Command;

use support::*;

fn check(config: &str) -> (i32, String) {
    let dir = std::env::temp_dir().join(unique("check"));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("c.properties");
    std::fs::write(&path, config).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_pgoutbox")).args(["check", "--config"]).arg(&path).output().unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned())
}

#[tokio::test(flavor = "multi_thread")]
async fn check_passes_a_working_setup() {
    let o = Outbox::new("checkok").await;
    let (code, out) = check(&o.config(&[]));
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("has the columns the Event Router needs"), "{out}");
    assert!(out.contains("will create it"), "slot and publication are created on start: {out}");
}

#[tokio::test(flavor = "multi_thread")]
async fn check_names_each_problem_and_its_fix() {
    let o = Outbox::new("checkbad").await;
    o.env.sql().await.batch_execute(&format!("ALTER TABLE public.{} DROP COLUMN payload", o.table)).await.unwrap();
    let (code, out) = check(&o.config(&["publication.autocreate.mode=disabled", "bootstrap.servers=127.0.0.1:1"]));
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("no column `payload`") && out.contains("table.field.event.payload"), "{out}");
    assert!(out.contains("does not exist and publication.autocreate.mode=disabled"), "{out}");
    assert!(out.contains("cannot reach 127.0.0.1:1"), "{out}");
    let (code, out) = check(&o.config(&["database.port=notaport"]));
    assert_eq!(code, 2);
    assert!(out.contains("database.port"), "{out}");
}
