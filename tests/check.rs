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

/// The message outbox: a messages-only connector captures no table, and `check` says so instead of
/// asking for an outbox table; with a table beside it, both are checked.
#[tokio::test(flavor = "multi_thread")]
async fn check_understands_the_message_outbox() {
    let o = Outbox::new("checkmsg").await;
    let decode = [
        "transforms=decode,outbox",
        "transforms.decode.type=io.debezium.connector.postgresql.transforms.DecodeLogicalDecodingMessageContent",
    ];
    let alone = o.config(&[&["publication.autocreate.mode=no_tables"][..], &decode[..]].concat());
    let alone = alone.replace(&format!("table.include.list=public.{}\n", o.table), "");
    let (code, out) = check(&alone);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("a messages-only connector (no table is captured)"), "{out}");
    assert!(!out.contains("no table matches"), "{out}");
    let (code, out) = check(&o.config(&[&decode[..], &["message.prefix.include.list=orders"][..]].concat()));
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("prefix matches message.prefix.include.list"), "{out}");
    assert!(out.contains("has the columns the Event Router needs"), "the table is checked too: {out}");
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

/// Config providers: an undeclared provider's reference stays literal and `check` warns about it;
/// a declared provider's reference that does not resolve stops `check` (exit 2) naming the key.
#[tokio::test(flavor = "multi_thread")]
async fn check_warns_about_undeclared_providers_and_refuses_unresolved_references() {
    let o = Outbox::new("checkprov").await;
    let (code, out) = check(&o.config(&["heartbeat.action.query=${vault:secret/db:query}"]));
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("WARNING") && out.contains("heartbeat.action.query") && out.contains("`vault`"), "{out}");
    let dir = std::env::temp_dir().join(unique("checkprov"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("db.properties"), "password=hunter2-from-file\n").unwrap();
    let file = dir.join("db.properties").display().to_string();
    let (code, out) = check(&o.config(&[
        "config.providers=file",
        "config.providers.file.class=org.apache.kafka.common.config.provider.FileConfigProvider",
        &format!("database.password=${{file:{file}:passwd}}"),
    ]));
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("database.password") && out.contains("no key `passwd`") && !out.contains("hunter2"), "{out}");
    let (code, out) = check(&o.config(&[
        "config.providers=file",
        "config.providers.file.class=org.apache.kafka.common.config.provider.FileConfigProvider",
        &format!("database.password=${{file:{file}:password}}"),
    ]));
    assert_eq!(code, 0, "the resolved password is sent (trust auth accepts it): {out}");
    assert!(!out.contains("hunter2"), "{out}");
}

/// `check` for the polling relay: no replication needed; the published column, the partial index and
/// the privileges are checked, and an outbox whose rows are deleted as they are inserted is named.
#[tokio::test(flavor = "multi_thread")]
async fn check_validates_the_polling_table() {
    let o = Outbox::new("checkpoll").await;
    let sql = o.env.sql().await;
    let polling = |extra: &[&str]| {
        let mut lines = vec!["pgoutbox.relay=polling", "pgoutbox.polling.order.column=seq"];
        lines.extend_from_slice(extra);
        o.config(&lines)
    };
    let (code, out) = check(&polling(&[]));
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("no column `published_at`") && out.contains("ADD COLUMN \"published_at\" timestamptz"),
        "{out}"
    );
    assert!(!out.contains("wal_level") && !out.contains("slot"), "no replication checks: {out}");

    sql.batch_execute(&format!("ALTER TABLE public.{} ADD COLUMN published_at timestamptz", o.table)).await.unwrap();
    let (code, out) = check(&polling(&[]));
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("WARNING") && out.contains("WHERE \"published_at\" IS NULL"), "no partial index: {out}");

    sql.batch_execute(&format!("CREATE INDEX ON public.{} (seq) WHERE published_at IS NULL", o.table)).await.unwrap();
    let (code, out) = check(&polling(&[]));
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("a partial index covers the unpublished rows") && !out.contains("WARNING"), "{out}");

    let role = unique("poll_ro");
    sql.batch_execute(&format!("CREATE ROLE {role} LOGIN; GRANT SELECT ON public.{} TO {role}", o.table))
        .await
        .unwrap();
    let (code, out) = check(&polling(&[]).replace("database.user=postgres", &format!("database.user={role}")));
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!("GRANT UPDATE (\"published_at\") ON public.{} TO {role}", o.table))
            || out.contains("lacks UPDATE"),
        "{out}"
    );

    // Debezium's pattern: insert and delete in one transaction.
    for _ in 0..3 {
        sql.batch_execute(&format!("BEGIN; {}; DELETE FROM public.{}; COMMIT", o.insert_sql("x", "a", None), o.table))
            .await
            .unwrap();
    }
    // The statistics reach the cumulative views when the session flushes them (PostgreSQL 15+ can
    // be asked to at once; older ones within their stats interval).
    let _ = sql.batch_execute("SELECT pg_stat_force_next_flush()").await;
    let _ = sql.batch_execute("SELECT 1").await;
    support::wait_for_async("table statistics", std::time::Duration::from_secs(30), || async {
        check(&polling(&[])).1.contains("delete each outbox row in the transaction that inserts it")
    })
    .await;
}
