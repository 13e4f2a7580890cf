//! `pgoutbox check`: validates the configuration against the database and the broker before the
//! relay runs, and says for each problem exactly what to fix.

mod polling;

use crate::kafka::security::PreflightError;
use std::time::Duration;

use crate::config::{AutocreateMode, Config};
use crate::outbox::{RelationInfo, Router};
use crate::postgres::replication::ReplicationConnection;
use crate::postgres::{setup, ConnectParams};

#[derive(Debug, Clone)]
pub struct Finding {
    pub ok: bool,
    /// Not a problem, but likely a mistake.
    pub warning: bool,
    pub subject: String,
    pub detail: String,
}

fn ok(subject: &str, detail: impl Into<String>) -> Finding {
    Finding { ok: true, warning: false, subject: subject.into(), detail: detail.into() }
}

fn problem(subject: &str, detail: impl Into<String>) -> Finding {
    Finding { ok: false, warning: false, subject: subject.into(), detail: detail.into() }
}

pub async fn check(cfg: &Config) -> Vec<Finding> {
    let mut out = config_findings(cfg);
    let params = ConnectParams::from_config(&cfg.database);
    let sql = match setup::connect_sql(&params).await {
        Ok(s) => s,
        Err(e) => {
            out.push(problem("database", e.to_string()));
            return out;
        }
    };
    out.push(ok(
        "database",
        format!("connected to {}:{} as {}", cfg.database.hostname, cfg.database.port, cfg.database.user),
    ));
    if let Some(p) = &cfg.polling {
        // The polling relay needs no replication: no wal_level, slot or publication to check.
        out.extend(check_tables(&sql, cfg).await);
        out.extend(polling::check(&sql, cfg, p).await);
        out.extend(check_broker(cfg).await);
        return out;
    }
    match setup::check_wal_level(&sql).await {
        Ok(()) => out.push(ok("wal_level", "logical")),
        Err(e) => out.push(problem("wal_level", e.to_string())),
    }
    out.extend(check_privileges(&sql, cfg).await);
    out.extend(check_slot_capacity(&sql, cfg).await);
    out.push(check_replication_connection(&params, cfg).await);
    out.extend(check_tables(&sql, cfg).await);
    out.extend(check_status_interval(&sql, cfg).await);
    if setup::in_recovery(&sql).await.unwrap_or(false) {
        // A standby: the publication is the primary's, and nothing may be created here.
        match setup::ensure_publication(&sql, cfg, true).await {
            Ok(()) => out.push(ok(
                "publication",
                format!(
                    "this server is a standby; `{}` (from the primary) covers the outbox table(s)",
                    cfg.publication_name
                ),
            )),
            Err(e) => out.push(problem("publication", e.to_string())),
        }
    } else {
        out.extend(check_publication(&sql, cfg).await);
    }
    out.extend(check_slot(&sql, cfg).await);
    out.extend(check_broker(cfg).await);
    out
}

/// The keys pgoutbox does not act on, and references to undeclared config providers.
fn config_findings(cfg: &Config) -> Vec<Finding> {
    let mut out = Vec::new();
    for i in &cfg.ignored {
        out.push(ok("config", format!("`{}` is ignored: {}", i.key, i.reason)));
    }
    for w in &cfg.warnings {
        out.push(Finding { ok: true, warning: true, subject: "config".into(), detail: w.clone() });
    }
    for (key, alias) in &cfg.undeclared_providers {
        out.push(Finding {
            ok: true,
            warning: true,
            subject: "config".into(),
            detail: format!("`{key}` refers to config provider `{alias}`, which config.providers does not declare: the reference is used literally (as Connect would); declare the provider or fix the reference"),
        });
    }
    out
}

async fn check_privileges(sql: &tokio_postgres::Client, cfg: &Config) -> Option<Finding> {
    let row = sql
        .query_one("SELECT rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user", &[])
        .await
        .ok()?;
    Some(if row.get::<_, bool>(0) {
        ok("privileges", "the user may replicate")
    } else {
        problem(
            "privileges",
            format!(
                "user `{}` lacks the REPLICATION attribute; run ALTER ROLE {} REPLICATION",
                cfg.database.user, cfg.database.user
            ),
        )
    })
}

async fn check_slot_capacity(sql: &tokio_postgres::Client, cfg: &Config) -> Option<Finding> {
    let row = sql
        .query_one("SELECT current_setting('max_replication_slots')::int, (SELECT count(*)::int FROM pg_replication_slots), current_setting('max_wal_senders')::int", &[])
        .await
        .ok()?;
    let (max, used, senders): (i32, i32, i32) = (row.get(0), row.get(1), row.get(2));
    let slot_exists = matches!(crate::postgres::slot::state(sql, &cfg.slot_name).await, Ok(Some(_)));
    Some(if !slot_exists && used + 2 > max {
        problem("slots", format!("{used} of max_replication_slots={max} are used and pgoutbox needs one more (two during a snapshot); raise max_replication_slots"))
    } else {
        ok("slots", format!("{used} of {max} replication slots used; max_wal_senders={senders}"))
    })
}

/// The replication connection itself (pg_hba needs a `replication` entry).
async fn check_replication_connection(params: &ConnectParams, cfg: &Config) -> Finding {
    match ReplicationConnection::connect(params).await {
        Ok(mut conn) => {
            let finding = match conn.identify_system().await {
                Ok(id) => ok(
                    "replication connection",
                    format!("system {}, timeline {}, WAL at {}", id.system_id, id.timeline, id.xlog_pos),
                ),
                Err(e) => problem("replication connection", e.to_string()),
            };
            conn.terminate().await;
            finding
        }
        Err(e) => problem(
            "replication connection",
            format!("{e}; pg_hba.conf needs a `host replication {} ...` line", cfg.database.user),
        ),
    }
}

/// The captured tables, each planned by the Event Router as the relay would.
async fn check_tables(sql: &tokio_postgres::Client, cfg: &Config) -> Vec<Finding> {
    let mut out = Vec::new();
    let tables = match setup::captured_tables(sql, cfg).await {
        Ok(t) => t,
        Err(e) => {
            out.push(problem("tables", e.to_string()));
            Vec::new()
        }
    };
    if let Some(m) = &cfg.messages {
        out.push(check_messages(sql, m, cfg.tables.none).await);
    }
    if tables.is_empty() && !cfg.tables.none {
        out.push(problem("tables", "no table matches table.include.list / schema.include.list; create the outbox table (sql/outbox.sql) or fix the lists"));
    }
    let router = Router::new(
        cfg.router.clone(),
        crate::outbox::Converters { key: cfg.key_converter.clone(), value: cfg.value_converter.clone() },
        None,
    );
    for (schema, table) in &tables {
        let name = format!("{schema}.{table}");
        match setup::table_columns(sql, schema, table).await {
            Ok(columns) => {
                let plan = router.plan(&RelationInfo { oid: 0, schema: schema.clone(), table: table.clone(), columns });
                match plan.problem() {
                    None => out.push(ok("outbox table", format!("`{name}` has the columns the Event Router needs"))),
                    Some(e) => out.push(problem("outbox table", e.to_string())),
                }
            }
            Err(e) => out.push(problem("outbox table", format!("`{name}`: {e}"))),
        }
    }
    out
}

/// The relay refuses a status interval the server would time out (see `pipeline::session`).
async fn check_status_interval(sql: &tokio_postgres::Client, cfg: &Config) -> Option<Finding> {
    let t = setup::wal_sender_timeout(sql).await.ok()??;
    (cfg.status_interval >= t).then(|| problem("status interval", format!("status.update.interval.ms={} is not below the server's wal_sender_timeout ({} ms): the server would drop the connection whenever Kafka is slow, so pgoutbox refuses to start; lower it", cfg.status_interval.as_millis(), t.as_millis())))
}

async fn check_publication(sql: &tokio_postgres::Client, cfg: &Config) -> Vec<Finding> {
    let name = &cfg.publication_name;
    let row =
        match sql.query_opt("SELECT puballtables, pubinsert FROM pg_publication WHERE pubname = $1", &[name]).await {
            Ok(r) => r,
            Err(e) => return vec![problem("publication", e.to_string())],
        };
    let Some(row) = row else {
        return vec![match cfg.publication_autocreate {
            AutocreateMode::Disabled => problem("publication", format!("publication `{name}` does not exist and publication.autocreate.mode=disabled; create it (CREATE PUBLICATION {name} FOR TABLE ...) or set publication.autocreate.mode=filtered")),
            mode => ok("publication", format!("`{name}` does not exist yet; pgoutbox will create it ({mode:?})")),
        }];
    };
    let (all, insert): (bool, bool) = (row.get(0), row.get(1));
    if !insert {
        return vec![problem("publication", format!("publication `{name}` does not publish inserts; run ALTER PUBLICATION {name} SET (publish = 'insert, update, delete')"))];
    }
    if all {
        return vec![ok("publication", format!("`{name}` publishes all tables"))];
    }
    let missing: Vec<String> = match setup::uncovered_tables(sql, cfg).await {
        Ok(Some(uncovered)) => uncovered.iter().map(|t| t.qualified()).collect(),
        Ok(None) => Vec::new(),
        Err(e) => return vec![problem("publication", e.to_string())],
    };
    if missing.is_empty() {
        vec![ok("publication", format!("`{name}` includes the outbox table(s)"))]
    } else if cfg.publication_autocreate == AutocreateMode::Filtered {
        // Not harmless when the relay streamed before: rows written meanwhile were never decoded.
        let streamed = matches!(crate::postgres::slot::state(sql, &cfg.slot_name).await, Ok(Some(_)));
        let detail = format!(
            "`{name}` lacks {}; pgoutbox will add it (publication.autocreate.mode=filtered){}",
            missing.join(", "),
            if streamed {
                ", and stop if the table already holds rows whose events were never decoded (dropped and created again?)"
            } else {
                ""
            }
        );
        vec![if streamed { problem("publication", detail) } else { ok("publication", detail) }]
    } else {
        vec![problem("publication", format!("publication `{name}` does not include {}, so nothing is decoded for it (dropped and created again?); run ALTER PUBLICATION {name} ADD TABLE {} or set publication.autocreate.mode=filtered", missing.join(", "), missing.join(", ")))]
    }
}

/// A slot that is missing although this connector streamed from it is a loss, not a first start.
async fn check_lost_slot(cfg: &Config) -> Finding {
    let store = crate::kafka::offsets::OffsetStore::for_connector(cfg);
    match store.load_for_slot(&cfg.slot_name).await {
        Ok(Some(o)) => problem(
            "slot",
            crate::RelayError::SlotLost { slot: cfg.slot_name.clone(), lsn: o.lsn, topic: store.topic().to_string() }
                .to_string(),
        ),
        Ok(_) => ok(
            "slot",
            format!(
                "`{}` does not exist yet; pgoutbox will create it (snapshot.mode={:?})",
                cfg.slot_name, cfg.snapshot_mode
            ),
        ),
        Err(e) => problem(
            "slot",
            format!("`{}` does not exist, and whether it existed before cannot be told: {e}", cfg.slot_name),
        ),
    }
}

/// Exactly once: a slot that exists needs its offsets topic (what says which of its transactions
/// Kafka holds); the relay stops without it.
async fn check_offsets_kept(cfg: &Config) -> Option<Finding> {
    let store = crate::kafka::offsets::OffsetStore::for_connector(cfg);
    match store.exists().await {
        Ok(true) => None,
        Ok(false) => Some(problem(
            "offsets",
            crate::RelayError::OffsetsLost { slot: cfg.slot_name.clone(), topic: store.topic().to_string() }
                .to_string(),
        )),
        Err(e) => Some(problem("offsets", format!("whether the offsets topic exists cannot be told: {e}"))),
    }
}

/// At least once: a committed offset the slot's `restart_lsn` has passed (a slot created again)
/// stops the relay at start, as it stops Debezium (`pipeline::session`).
async fn check_log_position(cfg: &Config, s: &crate::postgres::slot::SlotState) -> Option<Finding> {
    let store = crate::kafka::offsets::OffsetStore::for_connector(cfg);
    let o = match store.load_for_slot_unconfirmed(&cfg.slot_name).await {
        Ok(o) => o?,
        Err(e) => return Some(problem("offsets", format!("the committed offset cannot be read: {e}"))),
    };
    let (restart, offset) = crate::pipeline::position_unavailable(cfg, s.restart_lsn, &o)?;
    if cfg.snapshot_mode == crate::config::SnapshotMode::WhenNeeded {
        return Some(ok("offsets", format!("the committed offset ({offset}) is no longer available on the server (slot `{}` holds WAL from {restart} on): pgoutbox will take a new snapshot (snapshot.mode=when_needed), then stream from the slot", cfg.slot_name)));
    }
    let e = crate::RelayError::OffsetUnavailable {
        slot: cfg.slot_name.clone(),
        offset,
        restart,
        topic: store.topic().to_string(),
    };
    Some(problem("offsets", e.to_string()))
}

async fn check_slot(sql: &tokio_postgres::Client, cfg: &Config) -> Vec<Finding> {
    match crate::postgres::slot::state(sql, &cfg.slot_name).await {
        Ok(None) => vec![check_lost_slot(cfg).await],
        Ok(Some(s)) => {
            if let Err(e) = crate::postgres::slot::validate(&s, cfg) {
                return vec![problem("slot", e.to_string())];
            }
            let lag = sql
                .query_one("SELECT ((CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END) - confirmed_flush_lsn)::int8 FROM pg_replication_slots WHERE slot_name = $1", &[&cfg.slot_name])
                .await
                .ok()
                .and_then(|r| r.try_get::<_, Option<i64>>(0).ok())
                .flatten();
            let mut f = vec![ok(
                "slot",
                format!(
                    "`{}` uses pgoutput; confirmed at {}{}",
                    cfg.slot_name,
                    s.confirmed_flush.map(|l| l.to_string()).unwrap_or_default(),
                    lag.map(|l| format!(", {l} bytes of WAL behind")).unwrap_or_default()
                ),
            )];
            if cfg.slot_failover {
                f.push(check_failover(sql, cfg, &s).await);
            }
            if let Some(pid) = s.active_pid {
                f.push(ok("slot", format!("`{}` is in use by PID {pid} (another relay, or Debezium?); pgoutbox will stand by until it is released", cfg.slot_name)));
            }
            if cfg.exactly_once.is_some() {
                f.extend(check_offsets_kept(cfg).await);
            } else {
                f.extend(check_log_position(cfg, &s).await);
            }
            f
        }
        Err(e) => vec![problem("slot", e.to_string())],
    }
}

/// The message outbox: the server must stream logical decoding messages (PostgreSQL 14+).
async fn check_messages(
    sql: &tokio_postgres::Client,
    m: &crate::config::messages::MessageCapture,
    alone: bool,
) -> Finding {
    let Ok(major) = setup::server_major(sql).await else {
        return problem("messages", "cannot read server_version_num");
    };
    if major < 14 {
        return problem("messages", format!("DecodeLogicalDecodingMessageContent needs PostgreSQL 14 or later to stream logical decoding messages; this server is {major}: upgrade it, or use an outbox table"));
    }
    let which = match (m.prefixes.include.is_empty(), m.prefixes.exclude.is_empty()) {
        (false, _) => "messages whose prefix matches message.prefix.include.list",
        (true, false) => "messages whose prefix does not match message.prefix.exclude.list",
        (true, true) => "all logical decoding messages (no message.prefix.include.list)",
    };
    let non_transactional = match m.non_transactional {
        crate::config::messages::NonTransactional::Skip => "skipped with a warning",
        crate::config::messages::NonTransactional::Publish => "published (pgoutbox.messages.non.transactional=publish)",
    };
    let scope = if alone { "a messages-only connector (no table is captured): " } else { "" };
    ok("messages", format!("{scope}{which} are outbox events; non-transactional ones are {non_transactional}"))
}

/// A failover slot protects the events only if logical walsenders wait for the standbys to have them:
/// `synchronized_standby_slots` must name the standbys' physical slots (PostgreSQL 17+).
async fn check_failover(sql: &tokio_postgres::Client, cfg: &Config, s: &crate::postgres::slot::SlotState) -> Finding {
    let Ok(major) = setup::server_major(sql).await else {
        return problem("failover", "cannot read server_version_num");
    };
    if major < 17 {
        return problem("failover", format!("slot.failover=true needs PostgreSQL 17 or later; this server is {major}"));
    }
    let standbys: String = match sql.query_one("SHOW synchronized_standby_slots", &[]).await {
        Ok(r) => r.get(0),
        Err(e) => return problem("failover", e.to_string()),
    };
    if standbys.trim().is_empty() {
        return problem("failover", format!("slot `{}` is {}a failover slot, but synchronized_standby_slots is empty: events can reach Kafka before a standby has them, and after a failover its copy of the slot may be behind; set synchronized_standby_slots to the standbys' physical slots", cfg.slot_name, if s.failover == Some(true) { "" } else { "not yet " }));
    }
    ok(
        "failover",
        format!(
            "slot `{}` failover={}; synchronized_standby_slots = {standbys}",
            cfg.slot_name,
            s.failover.unwrap_or(false)
        ),
    )
}

async fn check_broker(cfg: &Config) -> Vec<Finding> {
    let kafka = cfg.kafka.clone();
    let result =
        tokio::task::spawn_blocking(move || crate::kafka::security::preflight(&kafka, Duration::from_secs(10))).await;
    match result {
        Ok(Ok((brokers, topics))) => vec![ok(
            "broker",
            format!("{} reachable: {brokers} broker(s), {topics} topic(s)", cfg.kafka.bootstrap_servers),
        )],
        Ok(Err(PreflightError::Refused(why))) => vec![problem("broker", why)],
        Ok(Err(e)) => vec![problem("broker", format!("{e}; check bootstrap.servers and security.protocol"))],
        Err(e) => vec![problem("broker", e.to_string())],
    }
}

/// Renders findings; returns whether there was any problem.
pub fn print(findings: &[Finding]) -> bool {
    for f in findings {
        let label = match (f.ok, f.warning) {
            (false, _) => "PROBLEM",
            (true, true) => "WARNING",
            (true, false) => "ok     ",
        };
        println!("{label} {:<22} {}", f.subject, f.detail);
    }
    let problems = findings.iter().filter(|f| !f.ok).count();
    if problems == 0 {
        println!("\nno problems found");
    } else {
        println!("\n{problems} problem(s) found");
    }
    problems > 0
}
