//! The replication slot: every SQL statement about it, and its state as one answer the session acts
//! on. The slot is the lock that makes a hand-over safe (START_REPLICATION fails on a slot another
//! process streams from); the advisory lock here makes standing by cheap. The replication-protocol
//! commands on a slot (create, set failover) are `ReplicationConnection`'s.

use std::time::Duration;

use tokio_postgres::Client;

use super::replication::quote_literal;
use super::setup::{SetupError, SetupFailure};
use super::PgError;
use crate::config::Config;
use crate::lsn::Lsn;

/// What the session needs to know about its slot before it starts, in one answer.
#[derive(Debug, Clone)]
pub struct Inspection {
    /// The slot, when it exists (no process is streaming from it: that is an error).
    pub existing: Option<SlotState>,
    /// The server is a standby: a new slot waits for the primary's next standby snapshot.
    pub on_standby: bool,
}

/// The slot's state, refusing a slot another process streams from.
pub async fn inspect(sql: &Client, cfg: &Config) -> Result<Inspection, SetupFailure> {
    let existing = state(sql, &cfg.slot_name).await?;
    if let Some(pid) = existing.as_ref().and_then(|s| s.active_pid) {
        return Err(
            PgError::SlotBusy(format!("replication slot `{}` is in use by process {pid}", cfg.slot_name)).into()
        );
    }
    let on_standby = super::setup::in_recovery(sql).await?;
    Ok(Inspection { existing, on_standby })
}

/// Makes `to` a copy of `from` (the snapshot's staging slot becomes the real one).
pub async fn copy(sql: &Client, from: &str, to: &str) -> Result<(), PgError> {
    sql.execute("SELECT pg_copy_logical_replication_slot($1, $2)", &[&from, &to]).await.map_err(PgError::Sql)?;
    Ok(())
}

/// Moves slot `slot` forward to `to` (`pg_replication_slot_advance`); the slot must not be in use.
pub async fn advance(sql: &Client, slot: &str, to: Lsn) -> Result<(), PgError> {
    sql.execute("SELECT pg_replication_slot_advance($1, $2::text::pg_lsn)", &[&slot, &to.to_string()])
        .await
        .map_err(PgError::Sql)?;
    Ok(())
}

#[derive(Debug, Clone)]
pub struct SlotState {
    pub plugin: Option<String>,
    pub database: Option<String>,
    pub confirmed_flush: Option<Lsn>,
    /// `restart_lsn`: the oldest WAL the slot still holds for decoding.
    pub restart_lsn: Option<Lsn>,
    pub active_pid: Option<i32>,
    pub wal_status: Option<String>,
    /// `failover` (PostgreSQL 17+; `None` before).
    pub failover: Option<bool>,
}

/// The slot's row in `pg_replication_slots`, `None` when there is no such slot.
pub async fn state(sql: &Client, slot: &str) -> Result<Option<SlotState>, SetupFailure> {
    let row = sql
        .query_opt(
            // The row as JSON for `failover`, a column PostgreSQL 17 added.
            "SELECT plugin::text, database::text, confirmed_flush_lsn::text, active_pid, wal_status, (to_jsonb(s) ->> 'failover')::bool, restart_lsn::text FROM pg_replication_slots s WHERE slot_name = $1",
            &[&slot],
        )
        .await?;
    Ok(row.map(|r| SlotState {
        plugin: r.get(0),
        database: r.get(1),
        confirmed_flush: r.get::<_, Option<String>>(2).and_then(|l| l.parse().ok()),
        restart_lsn: r.get::<_, Option<String>>(6).and_then(|l| l.parse().ok()),
        active_pid: r.get(3),
        wal_status: r.get(4),
        failover: r.get(5),
    }))
}

/// Checks an existing slot can serve this relay.
pub fn validate(state: &SlotState, cfg: &Config) -> Result<(), SetupError> {
    let slot = &cfg.slot_name;
    if state.plugin.as_deref() != Some("pgoutput") {
        return Err(SetupError::Slot(format!(
            "replication slot `{slot}` uses the `{}` plugin, not pgoutput; drop it (SELECT pg_drop_replication_slot('{slot}')) or set slot.name to a pgoutput slot",
            state.plugin.as_deref().unwrap_or("physical")
        )));
    }
    if state.database.as_deref() != Some(cfg.database.dbname.as_str()) {
        return Err(SetupError::Slot(format!(
            "replication slot `{slot}` belongs to database `{}`, not `{}`; set slot.name to a slot of this database",
            state.database.as_deref().unwrap_or("?"),
            cfg.database.dbname
        )));
    }
    if state.wal_status.as_deref() == Some("lost") {
        return Err(SetupError::Slot(format!(
            "replication slot `{slot}` was invalidated (wal_status=lost, max_slot_wal_keep_size exceeded): the WAL it needed is gone, so events may have been missed; check the outbox for events after the last published one, then drop and recreate the slot (SELECT pg_drop_replication_slot({}))",
            quote_literal(slot)
        )));
    }
    Ok(())
}

/// The temporary slot a new slot's snapshot is taken from (slot names are at most 63 bytes).
pub fn staging_name(slot: &str) -> String {
    let mut base = slot.to_string();
    base.truncate(63 - "_snapshot".len());
    format!("{base}_snapshot")
}

/// The advisory-lock key that lets one instance at a time use a slot (and take its snapshot).
pub fn lock_key(slot: &str) -> i64 {
    // FNV-1a: stable across processes and versions, unlike std's hasher.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in "pgoutbox.slot:".bytes().chain(slot.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h as i64
}

/// One relay per slot: a session-level advisory lock, held on `sql` for the whole session (the
/// connection's end releases it, also when the process dies). The slot itself stays the lock that
/// makes a hand-over safe (START_REPLICATION fails on a slot another process streams from, Debezium
/// included); this one makes standing by cheap and keeps two instances from snapshotting at once.
pub async fn take_lock(sql: &Client, slot: &str, previous_pid: Option<i32>) -> Result<i32, PgError> {
    let key = lock_key(slot);
    // The server notices a client that vanished (a lost machine, a partition) by TCP keepalives on
    // this session, then ends it and so releases the lock; the defaults would take hours.
    let _ = sql
        .batch_execute("SET tcp_keepalives_idle = 10; SET tcp_keepalives_interval = 5; SET tcp_keepalives_count = 3")
        .await;
    let mut locked = try_lock(sql, key).await?;
    if !locked {
        // Our own previous session, stalled rather than closed, may still hold it: end it.
        if let Some(pid) = previous_pid {
            let holder: Option<i32> = sql
                .query_opt(
                    "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1 \
                     AND ((classid::bigint << 32) | objid::bigint) = $1 AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
                    &[&key],
                )
                .await
                .map_err(PgError::Sql)?
                .map(|r| r.get(0));
            if holder == Some(pid) {
                tracing::info!(
                    pid,
                    "ending this relay's previous session on the server, which still holds the slot lock"
                );
                let _ = sql.execute("SELECT pg_terminate_backend($1)", &[&pid]).await;
                for _ in 0..50 {
                    locked = try_lock(sql, key).await?;
                    if locked {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }
    if !locked {
        return Err(PgError::SlotBusy(format!("another pgoutbox instance holds replication slot `{slot}`")));
    }
    Ok(sql.query_one("SELECT pg_backend_pid()", &[]).await.map_err(PgError::Sql)?.get(0))
}

async fn try_lock(sql: &Client, key: i64) -> Result<bool, PgError> {
    Ok(sql.query_one("SELECT pg_try_advisory_lock($1)", &[&key]).await.map_err(PgError::Sql)?.get(0))
}

/// Drops a slot, waiting up to 5 s for a walsender to release it; a missing slot is fine.
pub async fn drop(sql: &Client, slot: &str) {
    for _ in 0..50 {
        match sql.execute("SELECT pg_drop_replication_slot($1)", &[&slot]).await {
            Err(e) if e.code().is_some_and(|c| c.code() == "55006") => {
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            _ => return,
        }
    }
}
