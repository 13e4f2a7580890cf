//! A connector's offsets through Connect's REST API (`/connectors/{name}/offsets`, KIP-875), where
//! the log-tailing relay's position is its replication slot:
//!
//! - `GET` answers the slot's live `confirmed_flush_lsn` as Debezium's PostgreSQL offset (the record
//!   kept in the offsets topic when the database cannot be reached);
//! - `PATCH` moves the slot forward (`pg_replication_slot_advance`): what Debezium does with an offset
//!   ahead of its slot, skipping what lies between. Back is refused: the server keeps no WAL before
//!   the confirmed position, so Debezium's slot would silently stay where it is;
//! - `DELETE` drops the slot and the record, so the next start creates a slot and snapshots as
//!   `snapshot.mode` says: refused while outbox events wait in the slot, as they would be lost.
//!
//! The polling relay's progress is each row's `published_at`: it has no offsets to move.

use serde_json::{json, Value};
use tokio_postgres::Client;

use crate::config::Config;
use crate::kafka::offsets::OffsetStore;
use crate::lsn::Lsn;
use crate::postgres::{setup, ConnectParams};

/// A refusal, with Connect's status code (400: the request cannot be done as asked).
#[derive(Debug)]
pub struct Refused(pub u16, pub String);

fn bad(message: impl Into<String>) -> Refused {
    Refused(400, message.into())
}

fn failed(e: impl std::fmt::Display) -> Refused {
    Refused(500, e.to_string())
}

/// How long an offsets call waits for the database.
const SQL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

async fn sql(cfg: &Config) -> Result<Client, Refused> {
    let params = ConnectParams::from_config(&cfg.database);
    match tokio::time::timeout(SQL_TIMEOUT, setup::connect_sql(&params)).await {
        Ok(Ok(c)) => Ok(c),
        Ok(Err(e)) => Err(failed(format!("cannot connect to the database: {e}"))),
        Err(_) => Err(failed("cannot connect to the database: no answer within 10 s")),
    }
}

/// The offset as Debezium's PostgreSQL connector records it, for the partition `{server}`.
fn entry(cfg: &Config, lsn: Lsn, ts_usec: Option<i64>) -> Value {
    json!({
        "partition": {"server": cfg.topic_prefix},
        "offset": {"lsn": lsn.0, "lsn_proc": lsn.0, "lsn_commit": lsn.0, "txId": Value::Null, "ts_usec": ts_usec}
    })
}

/// `GET`: the slot's confirmed position; the record when the database does not answer; none
/// before the first session.
pub async fn show(cfg: &Config) -> Result<Value, Refused> {
    let store = OffsetStore::for_connector(cfg);
    let recorded = store.load().await.map_err(failed)?;
    let ts = recorded.as_ref().map(|o| o.ts_usec);
    if cfg.polling.is_none() {
        if let Ok(sql) = sql(cfg).await {
            let state = crate::postgres::slot::state(&sql, &cfg.slot_name).await.map_err(failed)?;
            if let Some(lsn) = state.and_then(|s| s.confirmed_flush) {
                return Ok(json!({"offsets": [entry(cfg, lsn, ts)]}));
            }
        }
    }
    Ok(json!({"offsets": recorded.map(|o| vec![entry(cfg, o.lsn, Some(o.ts_usec))]).unwrap_or_default()}))
}

fn log_tailing(cfg: &Config) -> Result<(), Refused> {
    match cfg.polling {
        Some(_) => Err(bad(format!(
            "connector {} runs the polling relay: its progress is each outbox row's published column, not an offset; mark or unmark rows in the table instead",
            cfg.connector_name
        ))),
        None => Ok(()),
    }
}

/// The outbox events the slot holds from its confirmed position up to `upto` (all when `None`):
/// events not yet published. They are the INSERTs of the publication's tables and, for a connector
/// that relays logical decoding messages, the messages it would publish.
async fn pending_events(sql: &Client, cfg: &Config, upto: Option<Lsn>) -> Result<i64, Refused> {
    let upto = upto.map(|l| l.to_string());
    let unreadable = |e: tokio_postgres::Error| {
        failed(format!("cannot read slot {} to count the events it holds: {e}", cfg.slot_name))
    };
    // One peek, grouped in the server: all INSERTs (`I`) fall into a few groups by their relation,
    // messages (`M`) by their flags and their first bytes after the LSN (the prefix, then content).
    // The `messages` option only when messages are relayed: servers before 14 do not know it.
    let messages = if cfg.messages.is_some() { ", 'messages', 'true'" } else { "" };
    let groups = sql
        .query(
            &format!("SELECT get_byte(data, 0), get_byte(data, 1), CASE WHEN get_byte(data, 0) = 77 THEN substring(data from 11 for 1024) END, count(*) FROM pg_logical_slot_peek_binary_changes($1, $2::text::pg_lsn, NULL, 'proto_version', '1', 'publication_names', $3{messages}) WHERE get_byte(data, 0) IN (73, 77) GROUP BY 1, 2, 3"),
            &[&cfg.slot_name, &upto, &cfg.publication_name],
        )
        .await
        .map_err(unreadable)?;
    let mut events = 0i64;
    for g in &groups {
        let (kind, n): (i32, i64) = (g.get(0), g.get(3));
        let counted = match (&cfg.messages, kind) {
            (_, 73) => true,
            (Some(capture), _) => message_is_event(capture, g.get(1), g.get::<_, Option<&[u8]>>(2).unwrap_or_default()),
            (None, _) => false,
        };
        if counted {
            events += n;
        }
    }
    Ok(events)
}

/// Whether a message (its flags byte and the bytes from its prefix on) is one the relay publishes.
fn message_is_event(capture: &crate::config::messages::MessageCapture, flags: i32, from_prefix: &[u8]) -> bool {
    let prefix = from_prefix.split(|&b| b == 0).next().unwrap_or_default();
    let transactional = flags & 1 == 1;
    capture.captures(&String::from_utf8_lossy(prefix))
        && (transactional || capture.non_transactional == crate::config::messages::NonTransactional::Publish)
}

/// `PATCH`: moves the slot forward to the offset's `lsn`.
pub async fn alter(cfg: &Config, body: &Value) -> Result<Value, Refused> {
    log_tailing(cfg)?;
    let entries = body.get("offsets").and_then(Value::as_array).ok_or_else(|| {
        bad("The request body must contain an 'offsets' field with a list of partitions and their offsets")
    })?;
    let [only] = entries.as_slice() else {
        return Err(bad(format!(
            "the connector has one source partition, {{\"server\": \"{}\"}}: give exactly one offset for it",
            cfg.topic_prefix
        )));
    };
    let server = only.pointer("/partition/server").and_then(Value::as_str);
    if server != Some(cfg.topic_prefix.as_str()) {
        return Err(bad(format!(
            "unknown source partition {}: the connector's only partition is {{\"server\": \"{}\"}}",
            only.get("partition").unwrap_or(&Value::Null),
            cfg.topic_prefix
        )));
    }
    let offset = only.get("offset").unwrap_or(&Value::Null);
    if offset.is_null() {
        return reset(cfg).await;
    }
    let target = offset
        .get("lsn")
        .and_then(Value::as_u64)
        .map(Lsn)
        .ok_or_else(|| bad(format!("the offset must give `lsn` as a number (a WAL position), got {offset}")))?;
    let sql = sql(cfg).await?;
    let state = crate::postgres::slot::state(&sql, &cfg.slot_name).await.map_err(failed)?;
    let Some(confirmed) = state.and_then(|s| s.confirmed_flush) else {
        return Err(bad(format!(
            "slot {} does not exist: there is no position to move; the next start creates the slot",
            cfg.slot_name
        )));
    };
    if target < confirmed {
        return Err(bad(format!(
            "slot {} is confirmed at {confirmed} ({}); an offset can only move it forward: the server keeps no WAL before that position, so {target} ({}) cannot be read again. To publish again what the table still holds, DELETE the offsets and start with snapshot.mode=initial",
            cfg.slot_name, confirmed.0, target.0
        )));
    }
    let current: String = sql
        .query_one(
            "SELECT (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END)::text",
            &[],
        )
        .await
        .map_err(failed)?
        .get(0);
    let current: Lsn =
        current.parse().map_err(|_| failed(format!("the server answered an unreadable WAL position: {current}")))?;
    if target > current {
        return Err(bad(format!(
            "{target} ({}) is past the server's WAL position {current} ({}): an offset cannot point where the server has not written",
            target.0, current.0
        )));
    }
    let skipped = pending_events(&sql, cfg, Some(target)).await?;
    crate::postgres::slot::advance(&sql, &cfg.slot_name, target)
        .await
        .map_err(|e| failed(format!("cannot move slot {} to {target}: {e}", cfg.slot_name)))?;
    tracing::warn!(connector = %cfg.connector_name, slot = %cfg.slot_name, from = %confirmed, to = %target, skipped_events = skipped, "offsets altered through the REST API: the slot moved forward; the outbox events in between are not published");
    Ok(json!({"message": "The offsets for this connector have been altered successfully"}))
}

/// `DELETE`: drops the slot and the record, unless events wait in the slot.
pub async fn reset(cfg: &Config) -> Result<Value, Refused> {
    log_tailing(cfg)?;
    let sql = sql(cfg).await?;
    if crate::postgres::slot::state(&sql, &cfg.slot_name).await.map_err(failed)?.is_some() {
        let pending = pending_events(&sql, cfg, None).await?;
        if pending > 0 {
            return Err(bad(format!(
                "slot {} holds {pending} outbox event(s) not yet published: resetting the offsets drops the slot and they would never be published. Resume the connector until they are, then stop it and reset; or PATCH the offsets forward to skip them on purpose",
                cfg.slot_name
            )));
        }
        crate::postgres::slot::drop(&sql, &cfg.slot_name).await;
        if crate::postgres::slot::state(&sql, &cfg.slot_name).await.map_err(failed)?.is_some() {
            return Err(failed(format!(
                "slot {} is still in use and could not be dropped; is another instance streaming from it?",
                cfg.slot_name
            )));
        }
    }
    OffsetStore::for_connector(cfg).clear().await.map_err(failed)?;
    tracing::info!(connector = %cfg.connector_name, slot = %cfg.slot_name, "offsets reset through the REST API: the slot is dropped; the next start creates it and snapshots as snapshot.mode says");
    Ok(json!({"message": "The offsets for this connector have been reset successfully"}))
}

#[cfg(test)]
mod tests {
    use super::message_is_event;
    use crate::config::messages::{MessageCapture, NonTransactional, Prefixes};

    #[test]
    fn offsets_count_the_messages_the_relay_would_publish() {
        let mut capture = MessageCapture {
            prefixes: Prefixes { include: vec![regex::Regex::new("(?i)^(?:outbox)$").unwrap()], exclude: Vec::new() },
            non_transactional: NonTransactional::Skip,
        };
        assert!(message_is_event(&capture, 1, b"OUTBOX\0\0\0\0\x05{}"));
        assert!(!message_is_event(&capture, 1, b"audit\0{}"), "another prefix");
        assert!(!message_is_event(&capture, 0, b"outbox\0{}"), "non-transactional, skipped");
        capture.non_transactional = NonTransactional::Publish;
        assert!(message_is_event(&capture, 0, b"outbox\0{}"));
    }
}
