//! Ordinary SQL around replication: checks that logical decoding can work, the publication (created
//! before the slot, or the slot would decode changes no publication covers yet), slot state, and the
//! catalog facts pgoutput does not send (NOT NULL).

use std::collections::HashMap;

use tokio_postgres::{Client, NoTls};

use super::replication::{quote_ident, quote_literal};
use super::{ConnectParams, PgError};
use crate::config::{AutocreateMode, Config};
use crate::lsn::Lsn;

/// An operator-fixable problem found while setting up.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SetupError(pub String);

#[derive(Debug, thiserror::Error)]
pub enum SetupFailure {
    #[error(transparent)]
    Pg(#[from] PgError),
    #[error(transparent)]
    Setup(#[from] SetupError),
}

impl From<tokio_postgres::Error> for SetupFailure {
    fn from(e: tokio_postgres::Error) -> Self {
        SetupFailure::Pg(PgError::Sql(e))
    }
}

pub async fn connect_sql(p: &ConnectParams) -> Result<Client, PgError> {
    let mut c = tokio_postgres::Config::new();
    c.host(&p.host)
        .port(p.port)
        .user(&p.user)
        .dbname(&p.dbname)
        .application_name("pgoutbox-sql")
        .connect_timeout(p.connect_timeout);
    if let Some(pw) = &p.password {
        c.password(pw.expose());
    }
    let map_err = |e: tokio_postgres::Error| {
        if let Some(tls) = tls_failure(&e) {
            PgError::Tls(tls)
        } else if e.code().is_none() && e.as_db_error().is_none() {
            PgError::Connect { addr: format!("{}:{}", p.host, p.port), source: std::io::Error::other(e.to_string()) }
        } else {
            PgError::Sql(e)
        }
    };
    let (want, must) = super::tls::wants_tls(p.sslmode);
    if !want {
        let (client, connection) = c.connect(NoTls).await.map_err(map_err)?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "SQL connection ended");
            }
        });
        return Ok(client);
    }
    let config = p
        .tls
        .clone()
        .ok_or_else(|| PgError::Tls("the TLS configuration could not be built (see the error above)".into()))?;
    c.ssl_mode(if must { tokio_postgres::config::SslMode::Require } else { tokio_postgres::config::SslMode::Prefer });
    let tls = tokio_postgres_rustls::MakeRustlsConnect::new((*config).clone());
    let (client, connection) = c.connect(tls).await.map_err(map_err)?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!(error = %e, "SQL connection ended");
        }
    });
    Ok(client)
}

/// A TLS failure (e.g. an untrusted certificate) somewhere in the error's causes: not worth a retry.
fn tls_failure(e: &tokio_postgres::Error) -> Option<String> {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(c) = cause {
        if let Some(r) = c.downcast_ref::<rustls::Error>() {
            return Some(r.to_string());
        }
        if let Some(r) = c
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .and_then(|i| i.downcast_ref::<rustls::Error>())
        {
            return Some(r.to_string());
        }
        cause = c.source();
    }
    None
}

pub async fn check_wal_level(sql: &Client) -> Result<(), SetupFailure> {
    let level: String = sql.query_one("SHOW wal_level", &[]).await?.get(0);
    if level != "logical" {
        return Err(SetupError(format!(
            "wal_level is `{level}`, but logical decoding needs `logical`; set wal_level = logical in postgresql.conf (or ALTER SYSTEM SET wal_level = logical) and restart PostgreSQL"
        ))
        .into());
    }
    Ok(())
}

/// Tables in the database that the include/exclude lists select, as `(schema, table)`.
pub async fn captured_tables(sql: &Client, cfg: &Config) -> Result<Vec<(String, String)>, SetupFailure> {
    let rows = sql
        .query(
            "SELECT n.nspname::text, c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE c.relkind IN ('r', 'p') AND n.nspname NOT IN ('pg_catalog', 'information_schema') \
             AND n.nspname NOT LIKE 'pg_toast%' AND n.nspname NOT LIKE 'pg_temp%' ORDER BY 1, 2",
            &[],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| (r.get::<_, String>(0), r.get::<_, String>(1)))
        .filter(|(s, t)| cfg.tables.matches(s, t))
        .collect())
}

/// Makes sure the publication exists as `publication.autocreate.mode` asks, as Debezium does.
pub async fn ensure_publication(sql: &Client, cfg: &Config) -> Result<(), SetupFailure> {
    let name = &cfg.publication_name;
    let existing = sql.query_opt("SELECT puballtables FROM pg_publication WHERE pubname = $1", &[name]).await?;
    let all_tables: Option<bool> = existing.map(|r| r.get(0));
    match (cfg.publication_autocreate, all_tables) {
        (AutocreateMode::Disabled, None) => Err(SetupError(format!(
            "publication `{name}` does not exist and publication.autocreate.mode=disabled; create it (CREATE PUBLICATION {} FOR TABLE <outbox table>) or set publication.autocreate.mode=filtered",
            quote_ident(name)
        ))
        .into()),
        (AutocreateMode::AllTables, None) => {
            tracing::info!(publication = %name, "creating publication FOR ALL TABLES");
            sql.batch_execute(&format!("CREATE PUBLICATION {} FOR ALL TABLES", quote_ident(name))).await.map_err(|e| {
                publication_privilege(e, name, "FOR ALL TABLES needs a superuser; create the publication yourself or use publication.autocreate.mode=filtered")
            })?;
            Ok(())
        }
        (AutocreateMode::NoTables, None) => {
            sql.batch_execute(&format!("CREATE PUBLICATION {}", quote_ident(name))).await.map_err(|e| publication_privilege(e, name, "creating a publication needs CREATE on the database"))?;
            Ok(())
        }
        (AutocreateMode::Filtered, all) => {
            let tables = captured_tables(sql, cfg).await?;
            if tables.is_empty() {
                return Err(SetupError(format!(
                    "no table matches table.include.list for publication `{name}`; create the outbox table (see sql/outbox.sql) or fix table.include.list"
                ))
                .into());
            }
            let list = tables.iter().map(|(s, t)| format!("{}.{}", quote_ident(s), quote_ident(t))).collect::<Vec<_>>().join(", ");
            match all {
                None => {
                    tracing::info!(publication = %name, tables = %list, "creating publication");
                    sql.batch_execute(&format!("CREATE PUBLICATION {} FOR TABLE {list}", quote_ident(name)))
                        .await
                        .map_err(|e| publication_privilege(e, name, "creating a publication FOR TABLE needs ownership of the tables"))?;
                }
                Some(true) => {
                    return Err(SetupError(format!(
                        "publication `{name}` is FOR ALL TABLES, which publication.autocreate.mode=filtered cannot narrow; drop it, use another publication.name, or set publication.autocreate.mode=disabled"
                    ))
                    .into())
                }
                Some(false) => {
                    let current = published_tables(sql, name).await?;
                    let mut wanted = tables.clone();
                    wanted.sort();
                    if current != wanted {
                        tracing::info!(publication = %name, tables = %list, "updating publication tables");
                        sql.batch_execute(&format!("ALTER PUBLICATION {} SET TABLE {list}", quote_ident(name))).await?;
                    }
                }
            }
            Ok(())
        }
        (_, Some(_)) => Ok(()),
    }
}

fn publication_privilege(e: tokio_postgres::Error, name: &str, fix: &str) -> SetupFailure {
    if e.code().is_some_and(|c| c.code() == "42710" || c.code() == "23505") {
        // Another instance created it between our check and our CREATE: reported as retryable, so
        // the next attempt finds it.
        return PgError::Concurrent(format!("publication `{name}` was created by another instance at the same moment"))
            .into();
    }
    if e.code().is_some_and(|c| c.code() == "42501") {
        SetupError(format!("cannot create publication `{name}`: {e}; {fix}")).into()
    } else {
        PgError::Sql(e).into()
    }
}

async fn published_tables(sql: &Client, publication: &str) -> Result<Vec<(String, String)>, SetupFailure> {
    let rows = sql
        .query(
            "SELECT schemaname::text, tablename::text FROM pg_publication_tables WHERE pubname = $1 ORDER BY 1, 2",
            &[&publication],
        )
        .await?;
    Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
}

#[derive(Debug, Clone)]
pub struct SlotState {
    pub plugin: Option<String>,
    pub database: Option<String>,
    pub confirmed_flush: Option<Lsn>,
    pub active_pid: Option<i32>,
    pub wal_status: Option<String>,
}

pub async fn slot_state(sql: &Client, slot: &str) -> Result<Option<SlotState>, SetupFailure> {
    let row = sql
        .query_opt(
            "SELECT plugin::text, database::text, confirmed_flush_lsn::text, active_pid, wal_status FROM pg_replication_slots WHERE slot_name = $1",
            &[&slot],
        )
        .await?;
    Ok(row.map(|r| SlotState {
        plugin: r.get(0),
        database: r.get(1),
        confirmed_flush: r.get::<_, Option<String>>(2).and_then(|l| l.parse().ok()),
        active_pid: r.get(3),
        wal_status: r.get(4),
    }))
}

/// Checks an existing slot can serve this relay.
pub fn validate_slot(state: &SlotState, cfg: &Config) -> Result<(), SetupError> {
    let slot = &cfg.slot_name;
    if state.plugin.as_deref() != Some("pgoutput") {
        return Err(SetupError(format!(
            "replication slot `{slot}` uses the `{}` plugin, not pgoutput; drop it (SELECT pg_drop_replication_slot('{slot}')) or set slot.name to a pgoutput slot",
            state.plugin.as_deref().unwrap_or("physical")
        )));
    }
    if state.database.as_deref() != Some(cfg.database.dbname.as_str()) {
        return Err(SetupError(format!(
            "replication slot `{slot}` belongs to database `{}`, not `{}`; set slot.name to a slot of this database",
            state.database.as_deref().unwrap_or("?"),
            cfg.database.dbname
        )));
    }
    if state.wal_status.as_deref() == Some("lost") {
        return Err(SetupError(format!(
            "replication slot `{slot}` was invalidated (wal_status=lost, max_slot_wal_keep_size exceeded): the WAL it needed is gone, so events may have been missed; check the outbox for events after the last published one, then drop and recreate the slot (SELECT pg_drop_replication_slot({}))",
            quote_literal(slot)
        )));
    }
    Ok(())
}

/// NOT NULL per column of a table, from the catalog.
pub async fn not_null_columns(sql: &Client, relation: u32) -> Result<HashMap<String, bool>, PgError> {
    // Bounded: the SQL connection may have idled for hours and died silently, and the reader must not
    // hang on it while the replication connection waits.
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&relation];
    let query = sql.query(
        "SELECT attname::text, attnotnull FROM pg_attribute WHERE attrelid = $1 AND attnum > 0 AND NOT attisdropped",
        &params,
    );
    let rows = tokio::time::timeout(std::time::Duration::from_secs(30), query)
        .await
        .map_err(|_| PgError::PeerTimeout(std::time::Duration::from_secs(30)))?
        .map_err(PgError::Sql)?;
    Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
}

/// The server's `wal_sender_timeout`, or `None` when it is disabled. While decoding a large
/// transaction that the publication filters out, the walsender reads replies only every half of it,
/// so the relay must allow at least this much silence before declaring the server dead.
pub async fn wal_sender_timeout(sql: &Client) -> Result<Option<std::time::Duration>, SetupFailure> {
    let ms: i32 =
        sql.query_one("SELECT setting::int FROM pg_settings WHERE name = 'wal_sender_timeout'", &[]).await?.get(0);
    Ok((ms > 0).then(|| std::time::Duration::from_millis(ms as u64)))
}

/// A table's columns as the router needs them, from the catalog (for the snapshot, where no
/// pgoutput Relation message describes the table).
pub async fn table_columns(
    sql: &Client,
    schema: &str,
    table: &str,
) -> Result<Vec<crate::outbox::ColumnInfo>, SetupFailure> {
    let rows = sql
        .query(
            "SELECT a.attname::text, a.atttypid, a.atttypmod, a.attnotnull FROM pg_attribute a \
             JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = $1 AND c.relname = $2 AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
            &[&schema, &table],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| crate::outbox::ColumnInfo {
            name: r.get(0),
            type_oid: r.get(1),
            type_modifier: r.get(2),
            not_null: r.get(3),
        })
        .collect())
}
