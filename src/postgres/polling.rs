//! The SQL of the polling relay: which rows are unpublished, how they are read, marked and owned.
//!
//! A batch is one transaction on one connection: `SELECT ... FOR NO KEY UPDATE` the oldest
//! unpublished rows (`SKIP LOCKED` under `ordering=none`), publish them, then `UPDATE ... SET published_at` on exactly those rows (by
//! `ctid`, which cannot change while the transaction holds their row locks), then `COMMIT`. The
//! same connection holds the advisory locks that say which aggregate partitions this instance owns:
//! when it dies, its locks, its row locks and its open batch go together.

pub mod order;

use tokio_postgres::Client;

use super::replication::quote_ident;
use super::setup::{SetupError, SetupFailure};
use super::PgError;
use crate::config::polling::PollingConfig;
use crate::outbox::ColumnInfo;
use crate::pgoutput::{TupleData, Value};

/// Integer types: a timestamp column of one of them holds epoch milliseconds.
const INTEGER_TYPES: [u32; 3] = [20, 21, 23];

/// The Event Router's columns the polling relay uses besides its own.
pub struct EventColumns<'a> {
    /// `table.field.event.id`: the default order when it is an integer.
    pub id: &'a str,
    /// `table.field.event.key`: what the aggregates are partitioned by.
    pub key: &'a str,
    /// `table.field.event.timestamp`, when set: dates the rows when no polling timestamp column is.
    pub timestamp: Option<&'a str>,
}

/// One outbox table as the polling relay reads it.
#[derive(Debug, Clone)]
pub struct PolledTable {
    pub schema: String,
    pub table: String,
    pub columns: Vec<ColumnInfo>,
    /// `SELECT ctid-and-relation, every column as text ... FOR NO KEY UPDATE [SKIP LOCKED]`, with `$1` the
    /// owned partitions (when partitioned) and `$2` the batch size.
    select: String,
    /// The published column, quoted.
    published: String,
    /// The column a partial index on unpublished rows should lead with (the order column, quoted).
    pub index_column: String,
    /// What the operator should know about the order although it is accepted (see `order`).
    pub order_note: Option<String>,
    /// The unpublished rows' count, the oldest one's age in seconds when the rows are dated (else
    /// null), and which row is the oldest (to date the rows by sighting when they carry no date).
    backlog: String,
}

/// The unpublished rows, as `backlog` measures them.
pub struct BacklogRow {
    pub count: i64,
    pub oldest_age_s: Option<f64>,
    pub oldest_key: Option<String>,
}

/// What a poll read: each row's relation (for a partitioned outbox, the partition holding it) and
/// `ctid`, with its values.
pub struct PolledRow {
    pub relation: String,
    pub ctid: String,
    pub tuple: TupleData,
}

impl PolledTable {
    pub fn qualified(&self) -> String {
        format!("{}.{}", self.schema, self.table)
    }

    /// Reads the table's columns and checks what polling needs: the published column, nullable,
    /// and (when configured) the order column. Errors say which column to add or which key to fix.
    pub async fn describe(
        sql: &Client,
        schema: &str,
        table: &str,
        cfg: &PollingConfig,
        event: &EventColumns<'_>,
    ) -> Result<PolledTable, SetupFailure> {
        let (id_column, key_column) = (event.id, event.key);
        let columns = super::setup::table_columns(sql, schema, table).await?;
        let qualified = format!("{}.{}", quote_ident(schema), quote_ident(table));
        let find = |name: &str| columns.iter().find(|c| c.name == name);
        // Before anything is published: an order that cannot keep an aggregate's events in commit
        // order is refused here, naming the fix (see `order`).
        let facts = order::facts(sql, &qualified).await?;
        let chosen = order::choose(cfg, id_column, &cfg.published_column, &facts);
        let published = match find(&cfg.published_column) {
            None => {
                let q = quote_ident(&cfg.published_column);
                // One message for a table set up for the first time, the order's fix included.
                let (index, order_fix) = match &chosen {
                    Ok(o) => (format!("; CREATE INDEX ON {qualified} ({}) WHERE {q} IS NULL", o.index_column), String::new()),
                    Err(e) => (String::new(), format!(". Then: {e}")),
                };
                return Err(unpollable(format!(
                    "outbox table {qualified} has no column `{col}`, where the polling relay records what it published; add it: \
                     ALTER TABLE {qualified} ADD COLUMN {q} timestamptz{index} \
                     (or name another column in pgoutbox.polling.published.column){order_fix}",
                    col = cfg.published_column,
                )));
            }
            Some(c) if c.not_null => {
                return Err(unpollable(format!(
                    "column `{}` of {qualified} is NOT NULL, but the polling relay finds unpublished rows by its being null; \
                     ALTER TABLE {qualified} ALTER COLUMN {} DROP NOT NULL",
                    c.name,
                    quote_ident(&c.name)
                )))
            }
            Some(c) => {
                check_published_type(sql, &qualified, &c.name).await?;
                quote_ident(&c.name)
            }
        };
        let order::Order { expr: order, index_column, note: order_note } = chosen.map_err(unpollable)?;
        if find(key_column).is_none() && cfg.ordering == crate::config::polling::Ordering::PerAggregate {
            return Err(unpollable(format!(
                "outbox table {qualified} has no column `{key_column}` (table.field.event.key) to partition the aggregates by"
            )));
        }
        // Every name is qualified with the table's alias: the output columns carry the same names
        // (as text), and an unqualified ORDER BY name would sort by the text ("1017" before "557").
        let dated = match cfg.timestamp_column.as_deref().or(event.timestamp) {
            Some(col) => match find(col) {
                None => {
                    return Err(unpollable(format!(
                        "outbox table {qualified} has no column `{col}` (pgoutbox.polling.timestamp.column or table.field.event.timestamp) to date unpublished rows by"
                    )))
                }
                // Epoch milliseconds.
                Some(c) if INTEGER_TYPES.contains(&c.type_oid) => {
                    format!("extract(epoch FROM clock_timestamp()) - min(o.{}) / 1000.0", quote_ident(col))
                }
                Some(_) => {
                    format!("extract(epoch FROM clock_timestamp() - min(o.{})::timestamptz)", quote_ident(col))
                }
            },
            None => "NULL::float8".to_string(),
        };
        let backlog = format!(
            "SELECT count(*), ({dated})::float8, (SELECT o.tableoid::text || ':' || o.ctid::text FROM {qualified} AS o \
             WHERE o.{published} IS NULL ORDER BY {order} LIMIT 1) FROM {qualified} AS o WHERE o.{published} IS NULL"
        );
        let texts: Vec<String> = columns.iter().map(|c| format!("o.{}::text", quote_ident(&c.name))).collect();
        let partition_filter = match cfg.ordering {
            // One partition holds every aggregate: no filter, which would only mislead the planner.
            crate::config::polling::Ordering::PerAggregate if cfg.partitions > 1 => {
                format!(" AND {} = ANY($1::int4[])", partition_of(key_column, cfg.partitions))
            }
            _ => " AND $1::int4[] IS NOT NULL".to_string(),
        };
        // The row lock marking needs: `FOR NO KEY UPDATE`, which another instance's takes exclude,
        // and which a foreign key's `FOR KEY SHARE` (an insert referencing an outbox row) does not.
        // With aggregate partitions no other instance reads these rows, so a row something else
        // holds locked is waited for, never stepped over: skipping it would publish the
        // aggregate's later rows before it. Unpartitioned, instances share every row and skip
        // each other's.
        let lock = match cfg.ordering {
            crate::config::polling::Ordering::PerAggregate => "FOR NO KEY UPDATE",
            _ => "FOR NO KEY UPDATE SKIP LOCKED",
        };
        let select = format!(
            "SELECT o.tableoid::regclass::text, o.ctid::text, {} FROM {qualified} AS o WHERE o.{published} IS NULL{partition_filter} \
             ORDER BY {order} LIMIT $2 {lock}",
            texts.join(", ")
        );
        Ok(PolledTable {
            schema: schema.into(),
            table: table.into(),
            columns,
            select,
            published,
            index_column,
            order_note,
            backlog,
        })
    }

    /// The oldest unpublished rows of the owned `partitions`, locked for this transaction, as the
    /// server sends them: the caller publishes each while the next is on its way, and holds no more
    /// than its row identities.
    pub async fn fetch(
        &self,
        sql: &Client,
        partitions: &[i32],
        limit: i64,
    ) -> Result<impl futures_util::Stream<Item = Result<PolledRow, PgError>> + '_, PgError> {
        use futures_util::TryStreamExt;
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 2] = [&partitions, &limit];
        let rows = sql.query_raw(self.select.as_str(), params).await.map_err(PgError::Sql)?;
        let width = self.columns.len();
        Ok(rows.map_err(PgError::Sql).map_ok(move |r| PolledRow {
            relation: r.get(0),
            ctid: r.get(1),
            tuple: TupleData {
                values: (0..width)
                    .map(|i| {
                        r.get::<_, Option<String>>(i + 2).map_or(Value::Null, |t| Value::Text(bytes::Bytes::from(t)))
                    })
                    .collect(),
            },
        }))
    }

    /// Counts and dates the unpublished rows (through the partial index on them, when there is one).
    pub async fn backlog(&self, sql: &Client) -> Result<BacklogRow, PgError> {
        let r = sql.query_one(self.backlog.as_str(), &[]).await.map_err(PgError::Sql)?;
        Ok(BacklogRow { count: r.get(0), oldest_age_s: r.get(1), oldest_key: r.get(2) })
    }

    /// Sets the published column on `rows`, `(relation, ctid)` as `fetch` read them in this same
    /// transaction.
    pub async fn mark(&self, sql: &Client, rows: &[(String, String)]) -> Result<u64, PgError> {
        let mut by_relation: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
        for (relation, ctid) in rows {
            by_relation.entry(relation).or_default().push(ctid);
        }
        let mut marked = 0;
        for (relation, ctids) in by_relation {
            // `relation` is the server's own rendering of a regclass: quoted as the server needs it.
            let update = format!(
                "UPDATE {relation} SET {} = clock_timestamp() WHERE ctid = ANY($1::text[]::tid[])",
                self.published
            );
            marked += sql.execute(update.as_str(), &[&ctids]).await.map_err(PgError::Sql)?;
        }
        Ok(marked)
    }
}

/// Refuses a published column that cannot hold the time a row was published: the mark
/// (`SET published = clock_timestamp()`) would fail only after the first batch was published, and
/// every restart would publish that batch again. `timestamptz` and `timestamp` (or a domain over
/// either) hold it; a `date` or a `text` would take it through a cast, but lose the time (pruning
/// compares it with a retention) or sort as text, so they are refused too.
async fn check_published_type(sql: &Client, qualified: &str, column: &str) -> Result<(), SetupFailure> {
    let row = sql
        .query_one(
            "SELECT format_type(a.atttypid, a.atttypmod), CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE t.oid END \
             FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid WHERE a.attrelid = $1::text::regclass AND a.attname = $2",
            &[&qualified, &column],
        )
        .await?;
    let (shown, base): (String, u32) = (row.get(0), row.get(1));
    if TIME_TYPES.contains(&base) {
        return Ok(());
    }
    Err(unpollable(published_type_error(qualified, column, &shown)))
}

/// `timestamp`, `timestamptz`.
const TIME_TYPES: [u32; 2] = [1114, 1184];

fn published_type_error(qualified: &str, column: &str, shown: &str) -> String {
    let q = quote_ident(column);
    format!(
        "column `{column}` of {qualified} is of type {shown}, but the polling relay records there the time it published each row; \
         make it a timestamptz, keeping which rows are published: ALTER TABLE {qualified} ALTER COLUMN {q} TYPE timestamptz \
         USING CASE WHEN {q} IS NULL THEN NULL ELSE now() END (or name a timestamptz column in pgoutbox.polling.published.column)"
    )
}

/// The partition of an aggregate: its key's hash (the server's `hashtext`) modulo `partitions`. A
/// NULL aggregate id hashes to NULL, which no partition would match (its rows were never read): it
/// belongs to partition 0, read by one instance at a time like any other key, so the rows without an
/// aggregate keep the order column's order among themselves. The only place the expression is
/// built: the poll's filter is the only statement that partitions rows.
fn partition_of(key_column: &str, partitions: i32) -> String {
    format!("COALESCE((hashtext(o.{}::text) & 2147483647) % {partitions}, 0)", quote_ident(key_column))
}

fn unpollable(message: String) -> SetupFailure {
    SetupFailure::Setup(SetupError::Server(message))
}

/// Advisory locks `(key, partition)` say which instance owns which aggregate partition; each instance
/// also holds a shared member lock `(key, MEMBER_BASE + partitions)`, so that instances can count each
/// other (and notice one configured with another partition count). Session-level locks: they go
/// with the connection, and the server drops a vanished client's connection after its keepalives
/// (see `pipeline::polling`).
pub const MEMBER_BASE: i32 = 1_000_000;

/// The advisory lock namespace of the polling relays of these tables: a hash of their names, so that
/// every instance polling the same tables agrees on it, whatever its connector is called.
pub fn lock_key(tables: &[PolledTable]) -> i32 {
    let mut names: Vec<String> = tables.iter().map(|t| t.qualified()).collect();
    names.sort();
    // FNV-1a: stable across builds and platforms, unlike std's hasher.
    let mut h: u32 = 0x811c_9dc5;
    for b in format!("pgoutbox.polling:{}", names.join(",")).bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h as i32
}

/// Joins the instances polling under `key`, announcing `partitions`.
pub async fn join(sql: &Client, key: i32, partitions: i32) -> Result<(), PgError> {
    sql.execute("SELECT pg_advisory_lock_shared($1, $2)", &[&key, &(MEMBER_BASE + partitions)])
        .await
        .map_err(PgError::Sql)?;
    Ok(())
}

const LOCKS: &str = "SELECT objid::int8, pid = pg_backend_pid() FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 2 \
     AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) AND classid::int8 = $1";

/// Who holds what under `key`.
#[derive(Debug, Default)]
pub struct Holders {
    /// The partition counts the live instances announced, one entry per instance.
    pub members: Vec<i32>,
    /// The partitions this session owns.
    pub mine: Vec<i32>,
}

pub async fn holders(sql: &Client, key: i32) -> Result<Holders, PgError> {
    let classid = i64::from(key as u32);
    let rows = sql.query(LOCKS, &[&classid]).await.map_err(PgError::Sql)?;
    let mut h = Holders::default();
    for r in rows {
        let (objid, mine): (i64, bool) = (r.get(0), r.get(1));
        let objid = objid as u32 as i32;
        if objid >= MEMBER_BASE {
            h.members.push(objid - MEMBER_BASE);
        } else if mine {
            h.mine.push(objid);
        }
    }
    h.mine.sort_unstable();
    Ok(h)
}

/// Tries to take up to `want` of the partitions `0..partitions` this session does not hold; returns
/// those it took.
pub async fn claim(sql: &Client, key: i32, partitions: i32, mine: &[i32], want: i64) -> Result<Vec<i32>, PgError> {
    // The LIMIT stops the scan once `want` locks are taken, so no more are tried than needed. The
    // held partitions are left out in a fenced subquery (OFFSET 0): were the lock tried first, a
    // held one would be taken a second time (advisory locks count) and a release would not free it.
    let rows = sql
        .query(
            "SELECT p FROM (SELECT p FROM generate_series(0, $2 - 1) p WHERE NOT p = ANY($3) OFFSET 0) free \
             WHERE pg_try_advisory_lock($1, p) LIMIT $4",
            &[&key, &partitions, &mine, &want],
        )
        .await
        .map_err(PgError::Sql)?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

pub async fn release(sql: &Client, key: i32, partition: i32) -> Result<(), PgError> {
    sql.execute("SELECT pg_advisory_unlock($1, $2)", &[&key, &partition]).await.map_err(PgError::Sql)?;
    Ok(())
}

/// The Event Router's columns of `cfg`.
pub fn event_columns(cfg: &crate::config::Config) -> EventColumns<'_> {
    EventColumns {
        id: &cfg.router.field_event_id,
        key: &cfg.router.field_event_key,
        timestamp: cfg.router.field_event_timestamp.as_deref(),
    }
}

/// Every instance announces, for each table it polls, the settings that must agree between
/// instances: a shared advisory lock on the bigint key `(table oid << 32) | signature` (in
/// `pg_locks`: `classid` the table, `objid` the signature, `objsubid` 1), held by the polling
/// connection, so it goes with the session. `ANNOUNCED` is the signature's fixed top 20 bits, which
/// tell these locks from an application's.
pub const ANNOUNCED: i64 = 0x9_0B0C;

/// Announces `signature` (its low 12 bits; see `ANNOUNCED`) for the table `qualified` (quoted);
/// returns the table's oid.
pub async fn announce(sql: &Client, qualified: &str, signature: u32) -> Result<u32, PgError> {
    let key = i64::from(signature & 0xfff) | (ANNOUNCED << 12);
    let row = sql
        .query_one(
            "SELECT t.c::oid, pg_advisory_lock_shared((t.c::oid::int8 << 32) | $2) IS NULL \
             FROM (SELECT $1::text::regclass AS c) t",
            &[&qualified, &key],
        )
        .await
        .map_err(PgError::Sql)?;
    Ok(row.get(0))
}

/// One announcement of another session (see `announce`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Announcement {
    pub pid: i32,
    pub table_oid: u32,
    /// The table, `schema.table`.
    pub table: String,
    /// The low 12 bits of the signature.
    pub signature: u32,
    /// `application_name` and client address, when this user may see them.
    pub client: Option<String>,
}

/// The announcements held by other sessions of this database.
pub async fn announcements(sql: &Client) -> Result<Vec<Announcement>, PgError> {
    let rows = sql
        .query(
            "SELECT l.pid, l.classid, coalesce((SELECT n.nspname || '.' || c.relname FROM pg_class c \
             JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = l.classid), l.classid::text), l.objid::int8 & 4095, \
             nullif(concat_ws(' ', nullif(a.application_name, ''), 'from ' || host(a.client_addr)), '') \
             FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid \
             WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 AND l.pid IS DISTINCT FROM pg_backend_pid() \
             AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) \
             AND l.objid::int8 >> 12 = $1",
            &[&ANNOUNCED],
        )
        .await
        .map_err(PgError::Sql)?;
    Ok(rows
        .iter()
        .map(|r| Announcement {
            pid: r.get(0),
            table_oid: r.get(1),
            table: r.get(2),
            signature: r.get::<_, i64>(3) as u32,
            client: r.get(4),
        })
        .collect())
}

/// The backend answering this statement, and whether it holds this session's announcements (it
/// does unless a pooler handed the statement to another backend).
pub async fn backend(sql: &Client) -> Result<(i32, bool), PgError> {
    let row = sql
        .query_one(
            "SELECT pg_backend_pid(), EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted \
             AND objsubid = 1 AND pid = pg_backend_pid() AND objid::int8 >> 12 = $1)",
            &[&ANNOUNCED],
        )
        .await
        .map_err(PgError::Sql)?;
    Ok((row.get(0), row.get(1)))
}
