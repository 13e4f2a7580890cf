//! Ordinary SQL around replication: checks that logical decoding can work, the publication (created
//! before the slot, or the slot would decode changes no publication covers yet), slot state, and the
//! catalog facts pgoutput does not send (NOT NULL).

use std::collections::HashMap;

use tokio_postgres::{Client, NoTls};

use super::replication::quote_ident;
use super::{ConnectParams, PgError};
use crate::config::{AutocreateMode, Config};

/// An operator-fixable problem found while setting up, by what has to be fixed. Each message says
/// how; the relay stops on every kind (none is retried).
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// The server cannot decode logically as configured (wal_level, version, a standby).
    #[error("{0}")]
    Server(String),
    /// The publication is missing, does not cover a captured table, or cannot be made to.
    #[error("{0}")]
    Publication(String),
    /// Rows were committed where the publication did not cover them: their events were never decoded.
    #[error("{0}")]
    EventsMissed(String),
    /// The replication slot cannot serve this connector.
    #[error("{0}")]
    Slot(String),
    /// The database user lacks a privilege; the server's refusal is the source.
    #[error("cannot create publication `{publication}`: {source}; {fix}")]
    Privilege {
        publication: String,
        fix: String,
        #[source]
        source: tokio_postgres::Error,
    },
}

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
    connect_sql_notified(p, None).await
}

/// [`connect_sql`], passing every NOTIFY the session receives (after a LISTEN) to `notices`.
pub async fn connect_sql_notified(
    p: &ConnectParams,
    notices: Option<tokio::sync::mpsc::Sender<()>>,
) -> Result<Client, PgError> {
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
    // tokio-postgres refuses an AuthenticationOk before SCRAM's final message on its own, and with
    // channel binding required it refuses cleartext and md5 requests too. It has no require_auth:
    // with database.requireAuth the connection goes through `auth_guard` (below).
    c.channel_binding(match p.channel_binding {
        crate::config::ChannelBinding::Disable => tokio_postgres::config::ChannelBinding::Disable,
        crate::config::ChannelBinding::Prefer => tokio_postgres::config::ChannelBinding::Prefer,
        crate::config::ChannelBinding::Require => tokio_postgres::config::ChannelBinding::Require,
    });
    let map_err = |e: tokio_postgres::Error| {
        if let Some(refusal) = guard_refusal(&e) {
            PgError::AuthRefused(refusal)
        } else if let Some(tls) = tls_failure(&e) {
            PgError::Tls(tls)
        } else if e.code().is_none() && e.as_db_error().is_none() {
            PgError::Connect { addr: format!("{}:{}", p.host, p.port), source: std::io::Error::other(e.to_string()) }
        } else {
            PgError::Sql(e)
        }
    };
    let (want, must) = super::tls::wants_tls(p.sslmode);
    if let Some(policy) = p.require_auth {
        return connect_guarded(p, &c, policy, want, must, notices).await.map_err(|e| match e {
            Guarded::Pg(e) => map_err(e),
            Guarded::Other(e) => e,
        });
    }
    if !want {
        let (client, connection) = c.connect(NoTls).await.map_err(map_err)?;
        tokio::spawn(drive(connection, notices));
        return Ok(client);
    }
    let config = p
        .tls
        .clone()
        .ok_or_else(|| PgError::Tls("the TLS configuration could not be built (see the error above)".into()))?;
    c.ssl_mode(if must { tokio_postgres::config::SslMode::Require } else { tokio_postgres::config::SslMode::Prefer });
    let tls = tokio_postgres_rustls::MakeRustlsConnect::new((*config).clone());
    let (client, connection) = c.connect(tls).await.map_err(map_err)?;
    tokio::spawn(drive(connection, notices));
    Ok(client)
}

enum Guarded {
    Pg(tokio_postgres::Error),
    Other(PgError),
}

/// The SQL connection under `database.requireAuth`: our own socket, each layer guarded (see
/// `auth_guard`), so that a request the operator did not allow is refused before it is answered.
async fn connect_guarded(
    p: &ConnectParams,
    c: &tokio_postgres::Config,
    policy: crate::config::RequireAuth,
    want: bool,
    must: bool,
    notices: Option<tokio::sync::mpsc::Sender<()>>,
) -> Result<Client, Guarded> {
    use super::auth_guard::{AuthGuard, GuardedTls};
    use tokio_postgres::tls::MakeTlsConnect;
    let addr = format!("{}:{}", p.host, p.port);
    let stream = tokio::time::timeout(p.connect_timeout, tokio::net::TcpStream::connect((p.host.as_str(), p.port)))
        .await
        .map_err(|_| Guarded::Other(PgError::ConnectTimeout { addr: addr.clone(), after: p.connect_timeout }))?
        .map_err(|source| Guarded::Other(PgError::Connect { addr, source }))?;
    let _ = stream.set_nodelay(true);
    // As tokio-postgres does on the sockets it opens (its keepalives default on).
    let _ = socket2::SockRef::from(&stream).set_keepalive(true);
    let stream = AuthGuard::plain(stream, policy, want);
    if !want {
        let mut c = c.clone();
        c.ssl_mode(tokio_postgres::config::SslMode::Disable);
        let (client, connection) = c.connect_raw(stream, NoTls).await.map_err(Guarded::Pg)?;
        tokio::spawn(drive(connection, notices));
        return Ok(client);
    }
    let config = p.tls.clone().ok_or_else(|| {
        Guarded::Other(PgError::Tls("the TLS configuration could not be built (see the error above)".into()))
    })?;
    let mut c = c.clone();
    c.ssl_mode(if must { tokio_postgres::config::SslMode::Require } else { tokio_postgres::config::SslMode::Prefer });
    let mut make = tokio_postgres_rustls::MakeRustlsConnect::new((*config).clone());
    let tls = MakeTlsConnect::<AuthGuard<tokio::net::TcpStream>>::make_tls_connect(&mut make, &p.host)
        .map_err(|e| Guarded::Other(PgError::Tls(e.to_string())))?;
    let (client, connection) = c.connect_raw(stream, GuardedTls { inner: tls, policy }).await.map_err(Guarded::Pg)?;
    tokio::spawn(drive(connection, notices));
    Ok(client)
}

/// The guard's refusal somewhere in the error's causes.
fn guard_refusal(e: &tokio_postgres::Error) -> Option<String> {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(c) = cause {
        if let Some(r) = c.downcast_ref::<super::auth_guard::Refusal>() {
            return Some(r.0.clone());
        }
        if let Some(r) = c
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .and_then(|i| i.downcast_ref::<super::auth_guard::Refusal>())
        {
            return Some(r.0.clone());
        }
        cause = c.source();
    }
    None
}

/// Runs a SQL connection until it ends; with `notices`, each notification it receives is signalled
/// there (a full channel already holds a wake-up, so more are dropped).
async fn drive<S, T>(mut connection: tokio_postgres::Connection<S, T>, notices: Option<tokio::sync::mpsc::Sender<()>>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let Some(notices) = notices else {
        if let Err(e) = connection.await {
            tracing::debug!(error = %e, "SQL connection ended");
        }
        return;
    };
    loop {
        match std::future::poll_fn(|cx| connection.poll_message(cx)).await {
            Some(Ok(tokio_postgres::AsyncMessage::Notification(_))) => {
                let _ = notices.try_send(());
            }
            Some(Ok(_)) => {}
            Some(Err(e)) => {
                tracing::debug!(error = %e, "SQL connection ended");
                return;
            }
            None => return,
        }
    }
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
        return Err(SetupError::Server(format!(
            "wal_level is `{level}`, but logical decoding needs `logical`; set wal_level = logical in postgresql.conf (or ALTER SYSTEM SET wal_level = logical) and restart PostgreSQL"
        ))
        .into());
    }
    Ok(())
}

/// A table the include/exclude lists select. A partition whose partitioned parent (or any ancestor)
/// is selected is not one: the parent stands for it, in the publication and in the snapshot, and its
/// changes are routed as the parent's.
#[derive(Debug, Clone)]
pub struct CapturedTable {
    pub oid: u32,
    pub schema: String,
    pub table: String,
    namespace: u32,
    /// The partition's ancestors (empty for a table that is not a partition).
    ancestors: Vec<u32>,
    /// A partitioned table (its changes arrive under its partitions' names, without
    /// publish_via_partition_root).
    pub partitioned: bool,
}

impl CapturedTable {
    pub fn qualified(&self) -> String {
        format!("{}.{}", quote_ident(&self.schema), quote_ident(&self.table))
    }
}

/// Tables in the database that the include/exclude lists select, ordered by schema and name.
pub async fn captured(sql: &Client, cfg: &Config) -> Result<Vec<CapturedTable>, SetupFailure> {
    let rows = sql
        .query(
            "SELECT c.oid, c.relnamespace, n.nspname::text, c.relname::text, \
               CASE WHEN c.relispartition THEN ARRAY(SELECT a.relid FROM pg_partition_ancestors(c.oid) a WHERE a.relid <> c.oid) ELSE '{}'::oid[] END, \
               CASE WHEN c.relispartition THEN ARRAY(SELECT an.nspname::text FROM pg_partition_ancestors(c.oid) a JOIN pg_class ac ON ac.oid = a.relid JOIN pg_namespace an ON an.oid = ac.relnamespace WHERE a.relid <> c.oid) ELSE '{}'::text[] END, \
               CASE WHEN c.relispartition THEN ARRAY(SELECT ac.relname::text FROM pg_partition_ancestors(c.oid) a JOIN pg_class ac ON ac.oid = a.relid WHERE a.relid <> c.oid) ELSE '{}'::text[] END, \
               c.relkind = 'p' \
             FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE c.relkind IN ('r', 'p') AND n.nspname NOT IN ('pg_catalog', 'information_schema') \
             AND n.nspname NOT LIKE 'pg_toast%' AND n.nspname NOT LIKE 'pg_temp%' ORDER BY 3, 4",
            &[],
        )
        .await?;
    let mut out = Vec::new();
    for r in &rows {
        let (schema, table): (String, String) = (r.get(2), r.get(3));
        if !cfg.tables.matches(&schema, &table) {
            continue;
        }
        let (ancestor_schemas, ancestor_names): (Vec<String>, Vec<String>) = (r.get(5), r.get(6));
        if ancestor_schemas.iter().zip(&ancestor_names).any(|(s, t)| cfg.tables.matches(s, t)) {
            continue;
        }
        out.push(CapturedTable {
            oid: r.get(0),
            namespace: r.get(1),
            schema,
            table,
            ancestors: r.get(4),
            partitioned: r.get(7),
        });
    }
    Ok(out)
}

/// Tables in the database that the include/exclude lists select, as `(schema, table)`.
pub async fn captured_tables(sql: &Client, cfg: &Config) -> Result<Vec<(String, String)>, SetupFailure> {
    Ok(captured(sql, cfg).await?.into_iter().map(|t| (t.schema, t.table)).collect())
}

/// For a relation pgoutput reports under its own name that the lists do not select: the captured
/// ancestor it is a partition of, as `(schema, table)`. Without `publish_via_partition_root` every
/// change of a partitioned outbox arrives under a partition's name; it belongs to the parent.
pub async fn captured_ancestor(sql: &Client, relation: u32, cfg: &Config) -> Result<Option<(String, String)>, PgError> {
    let rows = relation_query(
        sql,
        "SELECT an.nspname::text, ac.relname::text FROM pg_partition_ancestors($1::oid) WITH ORDINALITY AS a(relid, level) \
         JOIN pg_class ac ON ac.oid = a.relid JOIN pg_namespace an ON an.oid = ac.relnamespace \
         WHERE a.relid <> $1::oid ORDER BY a.level",
        relation,
    )
    .await?;
    Ok(rows.iter().map(|r| (r.get::<_, String>(0), r.get::<_, String>(1))).find(|(s, t)| cfg.tables.matches(s, t)))
}

/// For a relation that pgoutput sends but that today's catalog neither selects nor places under a
/// captured table: the captured partitioned table it was a partition of when its changes were
/// written, detached or dropped since. pgoutput decodes with the catalog as it was at the change,
/// so a relation it sends was in the publication then; if the publication does not name it today
/// (directly, through its schema, or as all tables), it was there as a partition of a published
/// partitioned table. `Ok(None)` when the relation is in the publication on its own (a table the
/// operator added: not the outbox), is today a partition of another table, or no captured table is
/// partitioned. An error where it cannot be known whether it was the outbox's: several captured
/// partitioned tables, or a publication that also names tables pgoutbox does not capture (the
/// relation may have been one of those, removed since).
pub async fn former_partition_owner(
    sql: &Client,
    relation: u32,
    cfg: &Config,
) -> Result<Option<(String, String)>, SetupFailure> {
    let Some((oid, all_tables)) = publication(sql, cfg).await? else { return Ok(None) };
    if all_tables {
        return Ok(None);
    }
    let (published, schemas) = publication_members(sql, oid).await?;
    if published.contains(&relation) || !schemas.is_empty() {
        return Ok(None);
    }
    // Still a partition (of a table that is not captured): its changes are that table's.
    let has_ancestors: bool = sql
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_partition_ancestors($1::oid) a WHERE a.relid <> $1::oid)",
            &[&relation],
        )
        .await?
        .get(0);
    if has_ancestors {
        return Ok(None);
    }
    let captured = captured(sql, cfg).await?;
    if published.iter().any(|p| !captured.iter().any(|c| c.oid == *p)) {
        return Err(SetupFailure::Setup(SetupError::Publication(format!(
            "changes of relation {relation} arrive through publication `{}`, which no longer names it nor (today) a table it is a partition of: it was detached, dropped or removed from the publication after its changes were written, and as the publication also names tables pgoutbox does not capture, pgoutbox cannot tell whether they are outbox events; it stops instead of guessing. Set publish.via.partition.root=true for a partitioned outbox (changes then carry the parent's name), or errors.tolerance=all to skip them",
            cfg.publication_name
        ))));
    }
    let partitioned: Vec<(String, String)> =
        captured.into_iter().filter(|t| t.partitioned).map(|t| (t.schema, t.table)).collect();
    match &partitioned[..] {
        [] => Ok(None),
        [one] => Ok(Some(one.clone())),
        _ => Err(SetupFailure::Setup(SetupError::Publication(format!(
            "changes of relation {relation} arrive through the publication, but the table was detached or dropped since, and {} captured partitioned tables could have been its parent; pgoutbox stops instead of guessing: set publish.via.partition.root=true (changes then carry the parent's name) and restart",
            partitioned.len()
        )))),
    }
}

/// The configured publication's oid and whether it is FOR ALL TABLES; `None` when it does not exist.
async fn publication(sql: &Client, cfg: &Config) -> Result<Option<(u32, bool)>, SetupFailure> {
    let row = sql
        .query_opt("SELECT oid, puballtables FROM pg_publication WHERE pubname = $1", &[&cfg.publication_name])
        .await?;
    Ok(row.map(|r| (r.get(0), r.get(1))))
}

/// The tables a publication names (`FOR TABLE`) and the schemas it names (`FOR TABLES IN SCHEMA`,
/// PostgreSQL 15+), by oid.
async fn publication_members(sql: &Client, oid: u32) -> Result<(Vec<u32>, Vec<u32>), SetupFailure> {
    let tables: Vec<u32> = sql
        .query("SELECT prrelid FROM pg_publication_rel WHERE prpubid = $1", &[&oid])
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    let schemas: Vec<u32> =
        if sql.query_one("SELECT to_regclass('pg_catalog.pg_publication_namespace') IS NOT NULL", &[]).await?.get(0) {
            sql.query("SELECT pnnspid FROM pg_publication_namespace WHERE pnpubid = $1", &[&oid])
                .await?
                .iter()
                .map(|r| r.get(0))
                .collect()
        } else {
            Vec::new()
        };
    Ok((tables, schemas))
}

/// Whether the operator named the tables to capture. Without an include list every table is selected,
/// so a publication that leaves some out says nothing about the outbox.
fn tables_named(cfg: &Config) -> bool {
    !cfg.tables.table_include.is_empty() || !cfg.tables.schema_include.is_empty()
}

/// The captured tables the publication does not cover: nothing is decoded for them. `None` when the
/// publication does not exist.
pub async fn uncovered_tables(sql: &Client, cfg: &Config) -> Result<Option<Vec<CapturedTable>>, SetupFailure> {
    let Some((oid, all_tables)) = publication(sql, cfg).await? else { return Ok(None) };
    if all_tables || !tables_named(cfg) {
        return Ok(Some(Vec::new()));
    }
    let (tables, schemas) = publication_members(sql, oid).await?;
    let covered = |t: &CapturedTable| {
        tables.contains(&t.oid) || t.ancestors.iter().any(|a| tables.contains(a)) || schemas.contains(&t.namespace)
    };
    Ok(Some(captured(sql, cfg).await?.into_iter().filter(|t| !covered(t)).collect()))
}

/// Bytes in a table's heap, all partitions included: 0 means no row was ever inserted into it (or
/// only into pages a VACUUM truncated since).
async fn heap_bytes(sql: &Client, table: &CapturedTable) -> Result<i64, SetupFailure> {
    Ok(sql
        .query_one(
            // pg_partition_tree lists a partitioned table's tree (itself, of size 0, included) and
            // nothing for a plain table.
            "SELECT (pg_relation_size($1::oid) + COALESCE((SELECT sum(pg_relation_size(relid)) FROM pg_partition_tree($1::oid) WHERE relid <> $1::oid), 0))::bigint",
            &[&table.oid],
        )
        .await?
        .get(0))
}

/// Captured tables the publication leaves out are a silent loss: every INSERT into them is dropped by
/// pgoutput (an outbox table dropped and created again leaves a `FOR TABLE` publication, and the new
/// table is not in it). Under `publication.autocreate.mode=filtered` the relay repairs the publication;
/// if the table already holds rows written while it was not covered, their events were never decoded,
/// and it stops with what to do. In the other modes the publication is the operator's, so it stops.
///
/// `streamed`: whether the slot existed (so this is a restart or a running relay, not a first start,
/// where the rows already in a table are the snapshot's business).
pub async fn repair_coverage(sql: &Client, cfg: &Config, streamed: bool) -> Result<(), SetupFailure> {
    let name = &cfg.publication_name;
    let Some(uncovered) = uncovered_tables(sql, cfg).await? else {
        return Err(SetupError::Publication(format!(
            "publication `{name}` does not exist any more; nothing would be decoded. Create it again (CREATE PUBLICATION {} FOR TABLE <outbox table>) or set publication.autocreate.mode=filtered, then restart pgoutbox",
            quote_ident(name)
        ))
        .into());
    };
    if uncovered.is_empty() {
        return Ok(());
    }
    let list = uncovered.iter().map(CapturedTable::qualified).collect::<Vec<_>>().join(", ");
    if in_recovery(sql).await? {
        return check_publication_on_standby(sql, cfg).await;
    }
    if cfg.publication_autocreate != AutocreateMode::Filtered {
        return Err(SetupError::Publication(format!(
            "publication `{name}` does not include {list}, which table.include.list captures: pgoutput decodes nothing for it (was the table dropped and created again?). Run ALTER PUBLICATION {} ADD TABLE {list}, or set publication.autocreate.mode=filtered so pgoutbox maintains the publication; events already committed into it were not published (see `pgoutbox verify`)",
            quote_ident(name)
        ))
        .into());
    }
    tracing::warn!(publication = %name, tables = %list, "the publication does not cover captured tables (dropped and created again?); adding them");
    sql.batch_execute(&format!("ALTER PUBLICATION {} ADD TABLE {list}", quote_ident(name))).await?;
    if !streamed {
        return Ok(());
    }
    let mut written = Vec::new();
    for t in &uncovered {
        if heap_bytes(sql, t).await? > 0 {
            written.push(t.qualified());
        }
    }
    if written.is_empty() {
        tracing::warn!(publication = %name, tables = %list, "publication repaired before anything was written to the tables: nothing was missed");
        return Ok(());
    }
    Err(SetupError::EventsMissed(format!(
        "{} received rows while publication `{name}` did not cover it (the table was dropped and created again, or added to table.include.list): their events were never decoded and cannot be re-read from the slot. The publication covers it again now. To publish the rows still in the table, start once with snapshot.mode=always (duplicates of the rest are possible); rows already deleted are lost (`pgoutbox verify` lists what is missing). Starting again as is goes on from here",
        written.join(", ")
    ))
    .into())
}

/// Makes sure the publication exists as `publication.autocreate.mode` asks, as Debezium does, and
/// covers every captured table (see `repair_coverage`). `slot_exists`: the relay streamed before.
pub async fn ensure_publication(sql: &Client, cfg: &Config, slot_exists: bool) -> Result<(), SetupFailure> {
    if in_recovery(sql).await? {
        return check_publication_on_standby(sql, cfg).await;
    }
    let name = &cfg.publication_name;
    let existing =
        sql.query_opt("SELECT puballtables, pubviaroot FROM pg_publication WHERE pubname = $1", &[name]).await?;
    let via_root = if cfg.publish_via_partition_root { " WITH (publish_via_partition_root = true)" } else { "" };
    match (cfg.publication_autocreate, existing.as_ref().map(|r| r.get::<_, bool>(0))) {
        (AutocreateMode::Disabled, None) => {
            return Err(SetupError::Publication(format!(
                "publication `{name}` does not exist and publication.autocreate.mode=disabled; create it (CREATE PUBLICATION {} FOR TABLE <outbox table>) or set publication.autocreate.mode=filtered",
                quote_ident(name)
            ))
            .into())
        }
        (AutocreateMode::AllTables, None) => {
            tracing::info!(publication = %name, "creating publication FOR ALL TABLES");
            sql.batch_execute(&format!("CREATE PUBLICATION {} FOR ALL TABLES{via_root}", quote_ident(name))).await.map_err(|e| {
                publication_privilege(e, name, "FOR ALL TABLES needs a superuser; create the publication yourself or use publication.autocreate.mode=filtered")
            })?;
            return Ok(());
        }
        (AutocreateMode::NoTables, None) => {
            sql.batch_execute(&format!("CREATE PUBLICATION {}{via_root}", quote_ident(name))).await.map_err(|e| publication_privilege(e, name, "creating a publication needs CREATE on the database"))?;
            return Ok(());
        }
        (AutocreateMode::Filtered, all) => {
            let tables = captured(sql, cfg).await?;
            if tables.is_empty() {
                return Err(SetupError::Publication(format!(
                    "no table matches table.include.list for publication `{name}`; create the outbox table (see sql/outbox.sql) or fix table.include.list"
                ))
                .into());
            }
            let list = tables.iter().map(CapturedTable::qualified).collect::<Vec<_>>().join(", ");
            match all {
                None => {
                    tracing::info!(publication = %name, tables = %list, "creating publication");
                    sql.batch_execute(&format!("CREATE PUBLICATION {} FOR TABLE {list}{via_root}", quote_ident(name)))
                        .await
                        .map_err(|e| publication_privilege(e, name, "creating a publication FOR TABLE needs ownership of the tables"))?;
                    return Ok(());
                }
                Some(true) => {
                    return Err(SetupError::Publication(format!(
                        "publication `{name}` is FOR ALL TABLES, which publication.autocreate.mode=filtered cannot narrow; drop it, use another publication.name, or set publication.autocreate.mode=disabled"
                    ))
                    .into())
                }
                Some(false) => {}
            }
        }
        (_, Some(_)) => {}
    }
    let has_via_root = existing.as_ref().is_some_and(|r| r.get::<_, bool>(1));
    align_via_root(sql, cfg, has_via_root).await?;
    repair_coverage(sql, cfg, slot_exists).await
}

/// `publish.via.partition.root` against the publication's setting: changed when pgoutbox manages
/// the publication, else left and logged (both ways are routed the same).
async fn align_via_root(sql: &Client, cfg: &Config, has_via_root: bool) -> Result<(), SetupFailure> {
    let name = &cfg.publication_name;
    if has_via_root != cfg.publish_via_partition_root {
        if matches!(cfg.publication_autocreate, AutocreateMode::Filtered | AutocreateMode::AllTables) {
            tracing::info!(publication = %name, publish_via_partition_root = cfg.publish_via_partition_root, "updating the publication's publish_via_partition_root");
            sql.batch_execute(&format!(
                "ALTER PUBLICATION {} SET (publish_via_partition_root = {})",
                quote_ident(name),
                cfg.publish_via_partition_root
            ))
            .await?;
        } else {
            // Both ways are routed the same; say which one is in force.
            tracing::info!(publication = %name, "the publication's publish_via_partition_root is {has_via_root}, publish.via.partition.root says {}; the publication is left as it is", cfg.publish_via_partition_root);
        }
    }
    Ok(())
}

fn publication_privilege(e: tokio_postgres::Error, name: &str, fix: &str) -> SetupFailure {
    if e.code().is_some_and(|c| c.code() == "42710" || c.code() == "23505") {
        // Another instance created it between our check and our CREATE: reported as retryable, so
        // the next attempt finds it.
        return PgError::Concurrent(format!("publication `{name}` was created by another instance at the same moment"))
            .into();
    }
    if e.code().is_some_and(|c| c.code() == "42501") {
        SetupError::Privilege { publication: name.to_string(), fix: fix.to_string(), source: e }.into()
    } else {
        PgError::Sql(e).into()
    }
}

/// Whether the server is a standby (in recovery): read-only, so the publication is the primary's.
pub async fn in_recovery(sql: &Client) -> Result<bool, SetupFailure> {
    Ok(sql.query_one("SELECT pg_is_in_recovery()", &[]).await?.get(0))
}

/// On a standby nothing can be created or altered: the publication must already be there (it comes
/// from the primary by replication) and cover the captured tables, and decoding needs PostgreSQL 16.
async fn check_publication_on_standby(sql: &Client, cfg: &Config) -> Result<(), SetupFailure> {
    let name = &cfg.publication_name;
    let major = server_major(sql).await?;
    if major < 16 {
        return Err(SetupError::Server(format!(
            "this server is a standby running PostgreSQL {major}; logical decoding on a standby needs PostgreSQL 16 or later: point database.hostname at the primary, or upgrade"
        ))
        .into());
    }
    let Some(uncovered) = uncovered_tables(sql, cfg).await? else {
        return Err(SetupError::Publication(format!(
            "this server is a standby (read-only), where publication `{name}` cannot be created; create it on the primary (CREATE PUBLICATION {} FOR TABLE <outbox table>{}), it reaches the standby by replication",
            quote_ident(name),
            if cfg.publish_via_partition_root { " WITH (publish_via_partition_root = true)" } else { "" }
        ))
        .into());
    };
    if !uncovered.is_empty() {
        let list = uncovered.iter().map(CapturedTable::qualified).collect::<Vec<_>>().join(", ");
        return Err(SetupError::Publication(format!(
            "publication `{name}` does not include {list}, which table.include.list captures, and this server is a standby (read-only): run ALTER PUBLICATION {} ADD TABLE {list} on the primary",
            quote_ident(name)
        ))
        .into());
    }
    Ok(())
}

/// The server's major version (`server_version_num` / 10000).
pub async fn server_major(sql: &Client) -> Result<i32, SetupFailure> {
    let v: String = sql.query_one("SHOW server_version_num", &[]).await?.get(0);
    Ok(v.parse::<i32>().unwrap_or(0) / 10_000)
}

/// The server's WAL position: where it writes, or on a standby where replay has got to.
pub async fn current_wal_lsn(sql: &Client) -> Result<crate::lsn::Lsn, SetupFailure> {
    let v: String = sql
        .query_one(
            "SELECT (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END)::text",
            &[],
        )
        .await?
        .get(0);
    Ok(v.parse().unwrap_or(crate::lsn::Lsn(u64::MAX)))
}

/// NOT NULL and the `DEFAULT` expression (see [`table_columns`]) per column of a table, from the
/// catalog.
pub async fn column_catalog(sql: &Client, relation: u32) -> Result<HashMap<String, (bool, Option<String>)>, PgError> {
    let rows = relation_query(
        sql,
        "SELECT a.attname::text, a.attnotnull, CASE WHEN a.attgenerated = '' THEN pg_get_expr(d.adbin, d.adrelid) END FROM pg_attribute a \
         LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum \
         WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped",
        relation,
    )
    .await?;
    Ok(rows.iter().map(|r| (r.get(0), (r.get(1), r.get(2)))).collect())
}

/// A catalog query about one relation, for the reader while it streams. Bounded: the SQL connection
/// may have idled for hours and died silently, and the reader must not hang on it while the
/// replication connection waits.
async fn relation_query(sql: &Client, query: &str, relation: u32) -> Result<Vec<tokio_postgres::Row>, PgError> {
    const LIMIT: std::time::Duration = std::time::Duration::from_secs(30);
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&relation];
    tokio::time::timeout(LIMIT, sql.query(query, &params))
        .await
        .map_err(|_| PgError::PeerTimeout(LIMIT))?
        .map_err(PgError::Sql)
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
/// pgoutput Relation message describes the table). A column's default is what JDBC's `COLUMN_DEF`
/// gives Debezium (`pg_get_expr`); a generated column's expression is no default.
pub async fn table_columns(
    sql: &Client,
    schema: &str,
    table: &str,
) -> Result<Vec<crate::outbox::ColumnInfo>, SetupFailure> {
    let rows = sql
        .query(
            "SELECT a.attname::text, a.atttypid, a.atttypmod, a.attnotnull, CASE WHEN a.attgenerated = '' THEN pg_get_expr(d.adbin, d.adrelid) END \
             FROM pg_attribute a \
             JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace \
             LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum \
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
            default: r.get(4),
        })
        .collect())
}
