//! PostgreSQL: the replication connection (`replication`, `wire`) and the ordinary SQL that sets up
//! and inspects publications and slots (`setup`, over tokio-postgres).

pub mod auth_guard;
pub mod polling;
pub mod prune;
pub mod replication;
pub mod setup;
pub mod slot;
pub mod tls;
pub mod wire;

use std::time::Duration;

use crate::config::{DatabaseConfig, Secret, SslMode};
use wire::{ServerError, WireError};

/// Where and as whom to connect. Built from `database.*`.
#[derive(Debug, Clone)]
pub struct ConnectParams {
    pub host: String,
    pub port: u16,
    pub user: String,
    pub password: Option<Secret>,
    pub dbname: String,
    pub application_name: String,
    pub connect_timeout: Duration,
    pub sslmode: SslMode,
    pub tcp_keepalive: bool,
    pub channel_binding: crate::config::ChannelBinding,
    pub require_auth: Option<crate::config::RequireAuth>,
    /// Built once from `database.ssl*`; `None` when TLS is off.
    pub tls: Option<std::sync::Arc<rustls::ClientConfig>>,
}

impl ConnectParams {
    pub fn from_config(db: &DatabaseConfig) -> Self {
        let tls = match tls::wants_tls(db.sslmode) {
            (false, _) => None,
            (true, _) => match tls::client_config(db) {
                Ok(c) => Some(std::sync::Arc::new(c)),
                Err(e) => {
                    // Reported when connecting, where the error has a place to go.
                    tracing::error!("{e}");
                    None
                }
            },
        };
        ConnectParams {
            sslmode: db.sslmode,
            tcp_keepalive: db.tcp_keepalive,
            channel_binding: db.channel_binding,
            require_auth: db.require_auth,
            tls,
            host: db.hostname.clone(),
            port: db.port,
            user: db.user.clone(),
            password: db.password.clone(),
            dbname: db.dbname.clone(),
            application_name: "pgoutbox".to_string(),
            connect_timeout: db.connect_timeout,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PgError {
    #[error("cannot connect to PostgreSQL at {addr}: {source}; check database.hostname and database.port, and that the server is running")]
    Connect { addr: String, source: std::io::Error },
    #[error("connecting to PostgreSQL at {addr} timed out after {after:?}; check database.hostname, database.port and the network")]
    ConnectTimeout { addr: String, after: Duration },
    #[error("I/O error on the PostgreSQL connection: {0}")]
    Io(#[source] std::io::Error),
    #[error("PostgreSQL closed the connection")]
    ConnectionClosed,
    #[error("PostgreSQL ended the replication stream")]
    StreamEnded,
    /// The server ended the relay's SQL session (a shutdown, a restart or an administrator). The slot
    /// lock went with it, and a shutting-down server waits for the replication stream to end.
    #[error("PostgreSQL ended this relay's SQL session (a shutdown, a restart or pg_terminate_backend); ending the replication stream and reconnecting")]
    SqlSessionEnded,
    #[error("no message from PostgreSQL for {0:?} although a reply was requested; assuming the connection is dead")]
    PeerTimeout(Duration),
    #[error("the status update confirming {lsn} was not written to PostgreSQL within lsn.flush.timeout.ms ({} ms): the server has stopped reading the replication connection (a stuck walsender, or a stalled network or proxy). Stopping, as lsn.flush.timeout.action=fail says (Debezium fails its task here); nothing past the last acknowledged event is confirmed. Check the server and the network, then restart; to keep waiting instead, set lsn.flush.timeout.action=warn or raise lsn.flush.timeout.ms", .after.as_millis())]
    FlushTimeout { lsn: crate::lsn::Lsn, after: Duration },
    #[error("stop requested while a status update waited for PostgreSQL to take it")]
    StoppedWhileFlushing,
    #[error("PostgreSQL asks for a password for user `{user}`; set database.password")]
    PasswordRequired { user: String },
    #[error("PostgreSQL asks for {method}, which pgoutbox does not support; allow scram-sha-256, md5, password or trust for this user in pg_hba.conf")]
    UnsupportedAuth { method: String },
    #[error("SCRAM authentication failed: {0}")]
    Scram(#[source] std::io::Error),
    /// The server asked for, or settled on, authentication the configuration does not allow.
    #[error("{0}")]
    AuthRefused(String),
    #[error("protocol error on the replication connection: {0}")]
    Protocol(#[source] WireError),
    #[error("PostgreSQL: {0}")]
    Server(ServerError),
    #[error("PostgreSQL: {}", sql_error_text(.0))]
    Sql(#[source] tokio_postgres::Error),
    #[error("{0}; standing by")]
    SlotBusy(String),
    /// Another instance changed the same object at the same moment: the next attempt sees its work.
    #[error("{0}; retrying")]
    Concurrent(String),
    #[error("TLS: {0}; check database.sslmode, database.sslrootcert, database.sslcert and database.sslkey")]
    Tls(String),
    #[error("the server at {0} does not accept TLS, but database.sslmode requires it; enable ssl on the server or lower database.sslmode")]
    TlsRefused(String),
}

/// tokio-postgres displays a server error as just "db error": show the server's own words.
fn sql_error_text(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => {
            let mut s = format!("{}: {} (SQLSTATE {})", db.severity(), db.message(), db.code().code());
            if let Some(d) = db.detail() {
                s.push_str(&format!("; detail: {d}"));
            }
            if let Some(h) = db.hint() {
                s.push_str(&format!("; hint: {h}"));
            }
            s
        }
        None => e.to_string(),
    }
}

/// SQLSTATEs after which retrying cannot help: the operator has to change something.
fn definite_sqlstate(code: &str) -> bool {
    matches!(&code[..code.len().min(2)], "28" | "42" | "3D" | "0A" | "22" | "23") || matches!(code, "55000" | "42704")
}

impl PgError {
    pub fn from_server(e: ServerError) -> Self {
        PgError::Server(e)
    }

    pub fn sqlstate(&self) -> Option<&str> {
        match self {
            PgError::Server(e) => Some(e.code.as_str()),
            PgError::Sql(e) => e.code().map(|c| c.code()),
            _ => None,
        }
    }

    /// Whether reconnecting may succeed without the operator changing anything.
    pub fn is_retryable(&self) -> bool {
        match self {
            PgError::PasswordRequired { .. }
            | PgError::UnsupportedAuth { .. }
            | PgError::Scram(_)
            | PgError::AuthRefused(_)
            | PgError::Tls(_)
            | PgError::TlsRefused(_)
            | PgError::FlushTimeout { .. }
            | PgError::StoppedWhileFlushing => false,
            PgError::Server(_) | PgError::Sql(_) => !self.sqlstate().is_some_and(definite_sqlstate),
            _ => true,
        }
    }

    /// A status update the server did not take in time (or before a stop).
    pub fn is_unwritten_status(&self) -> bool {
        matches!(self, PgError::FlushTimeout { .. } | PgError::PeerTimeout(_) | PgError::StoppedWhileFlushing)
    }

    /// The replication slot is in use by another process (SQLSTATE 55006 object_in_use).
    pub fn is_slot_in_use(&self) -> bool {
        matches!(self, PgError::SlotBusy(_)) || self.sqlstate() == Some("55006")
    }
}

#[cfg(test)]
mod fuzz;
