//! The database side of `verify`: which table is the outbox, which column gives commit order, and
//! the rows still in it, over an ordinary SQL connection (read-only queries).
//!
//! Commit order. The relay publishes in commit order, so that is what per-aggregate order is checked
//! against. PostgreSQL records commit times only with `track_commit_timestamp = on`
//! (`pg_xact_commit_timestamp(xmin)`); without it, a column that grows with each insert (`seq`) or
//! its creation time (`created_at`, usually the transaction's *start* time) stands in for it. Those
//! follow commit order only if the application serialises the writes of one aggregate (as aggregate
//! locking or optimistic versioning does), so the report names the source it used.

use std::collections::HashSet;

use futures_util::TryStreamExt;
use tokio_postgres::Client;

use super::compare::{CommitOrder, CommittedEvent};
use super::VerifyError;
use crate::config::{Config, RouterConfig};
use crate::connect::java::replace as topic;
use crate::postgres::replication::quote_ident;
use crate::postgres::setup::{captured_tables, SetupFailure};
use crate::postgres::PgError;

/// Columns that stand in for commit order when none is given and commit timestamps are off, in
/// order of preference.
const ORDER_COLUMNS: &[&str] = &["seq", "sequence", "created_at"];

/// The column `--since` and `--until` select on.
pub const TIME_COLUMN: &str = "created_at";

/// Ids looked up per query when checking orphan candidates.
const LOOKUP_BATCH: usize = 10_000;

/// The outbox table and its columns.
#[derive(Debug, Clone)]
pub struct OutboxTable {
    pub schema: String,
    pub name: String,
    /// (name, type as `format_type` shows it, pg_type.typcategory)
    pub columns: Vec<(String, String, String)>,
}

impl OutboxTable {
    pub fn qualified(&self) -> String {
        format!("{}.{}", quote_ident(&self.schema), quote_ident(&self.name))
    }

    pub fn display(&self) -> String {
        format!("{}.{}", self.schema, self.name)
    }

    pub fn has(&self, column: &str) -> bool {
        self.columns.iter().any(|(n, _, _)| n == column)
    }

    fn category(&self, column: &str) -> Option<&str> {
        self.columns.iter().find(|(n, _, _)| n == column).map(|(_, _, c)| c.as_str())
    }

    fn require(&self, column: &str, option: &str) -> Result<(), VerifyError> {
        if self.has(column) {
            return Ok(());
        }
        Err(VerifyError::Usage(format!(
            "outbox table `{}` has no column `{column}`; set transforms.<name>.{option} to the column that holds it (columns: {})",
            self.display(),
            self.column_names()
        )))
    }

    fn column_names(&self) -> String {
        self.columns.iter().map(|(n, _, _)| n.as_str()).collect::<Vec<_>>().join(", ")
    }
}

/// Where commit order comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OrderSource {
    /// `pg_xact_commit_timestamp(xmin)`: the transaction's commit time (track_commit_timestamp=on).
    CommitTimestamp,
    /// A column of the outbox table; `chosen` when picked by name rather than `--order-column`.
    Column { name: String, chosen: bool },
    /// None found: the order check is skipped.
    None,
}

impl OrderSource {
    fn sql(&self) -> Option<String> {
        match self {
            OrderSource::CommitTimestamp => Some("pg_xact_commit_timestamp(xmin)".to_string()),
            OrderSource::Column { name, .. } => Some(quote_ident(name)),
            OrderSource::None => None,
        }
    }

    /// One line for the report.
    pub fn describe(&self) -> String {
        match self {
            OrderSource::CommitTimestamp => "transaction commit timestamp (track_commit_timestamp=on)".to_string(),
            OrderSource::Column { name, chosen: false } => format!("column `{name}` (--order-column)"),
            OrderSource::Column { name, chosen: true } => {
                format!("column `{name}` (found by name; it follows commit order only if writes of one aggregate are serialised; --order-column picks another)")
            }
            OrderSource::None => "none".to_string(),
        }
    }
}

/// A `--since`/`--until` bound: the text as given and the instant PostgreSQL reads it as.
#[derive(Debug, Clone)]
pub struct Bound {
    pub text: String,
    pub ms: i64,
}

fn sql_error(e: tokio_postgres::Error) -> VerifyError {
    VerifyError::Postgres(PgError::Sql(e))
}

/// The one table `table.include.list` (and the other filters) select.
pub async fn outbox_table(sql: &Client, config: &Config) -> Result<OutboxTable, VerifyError> {
    let tables = captured_tables(sql, config).await.map_err(|e| match e {
        SetupFailure::Pg(e) => VerifyError::Postgres(e),
        SetupFailure::Setup(e) => VerifyError::Usage(e.to_string()),
    })?;
    let (schema, name) = match &tables[..] {
        [one] => one.clone(),
        [] => {
            return Err(VerifyError::Usage(format!(
                "table.include.list selects no table in database `{}`; verify needs the outbox table (e.g. --set table.include.list=public.outbox)",
                config.database.dbname
            )))
        }
        many => {
            let names: Vec<String> = many.iter().take(10).map(|(s, t)| format!("{s}.{t}")).collect();
            return Err(VerifyError::Usage(format!(
                "table.include.list selects {} tables ({}{}); verify checks one outbox table: narrow it, e.g. --set table.include.list=public.outbox",
                many.len(),
                names.join(", "),
                if many.len() > 10 { ", ..." } else { "" }
            )));
        }
    };
    let qualified = format!("{}.{}", quote_ident(&schema), quote_ident(&name));
    let columns = sql
        .query(
            "SELECT a.attname::text, format_type(a.atttypid, a.atttypmod), t.typcategory::text \
             FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid \
             WHERE a.attrelid = $1::text::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
            &[&qualified],
        )
        .await
        .map_err(sql_error)?
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    Ok(OutboxTable { schema, name, columns })
}

/// Checks the router's columns exist, and that `--since`/`--until` have a time column to select on.
pub fn check_columns(table: &OutboxTable, router: &RouterConfig, windowed: bool) -> Result<(), VerifyError> {
    table.require(&router.field_event_id, "table.field.event.id")?;
    table.require(&router.route_by_field, "route.by.field")?;
    table.require(&router.field_event_key, "table.field.event.key")?;
    if windowed {
        match table.category(TIME_COLUMN) {
            Some("D") => {}
            Some(_) => {
                return Err(VerifyError::Usage(format!(
                    "column `{TIME_COLUMN}` of `{}` is not a date/time column, so --since/--until cannot select on it",
                    table.display()
                )))
            }
            None => {
                return Err(VerifyError::Usage(format!(
                    "outbox table `{}` has no `{TIME_COLUMN}` column, so --since/--until cannot select a time window; drop them to verify every row",
                    table.display()
                )))
            }
        }
    }
    Ok(())
}

/// `--order-column` if given, else commit timestamps if recorded, else a column found by name.
pub async fn order_source(
    sql: &Client,
    table: &OutboxTable,
    requested: Option<&str>,
) -> Result<OrderSource, VerifyError> {
    if let Some(name) = requested {
        if !table.has(name) {
            return Err(VerifyError::Usage(format!(
                "--order-column `{name}`: outbox table `{}` has no such column (columns: {})",
                table.display(),
                table.column_names()
            )));
        }
        return Ok(OrderSource::Column { name: name.to_string(), chosen: false });
    }
    let tracked: String = sql.query_one("SHOW track_commit_timestamp", &[]).await.map_err(sql_error)?.get(0);
    if tracked == "on" {
        return Ok(OrderSource::CommitTimestamp);
    }
    Ok(ORDER_COLUMNS
        .iter()
        .find(|c| table.has(c))
        .map_or(OrderSource::None, |c| OrderSource::Column { name: c.to_string(), chosen: true }))
}

/// Reads a `--since`/`--until` value the way PostgreSQL reads a timestamptz literal (so anything
/// psql accepts works, in the session's time zone unless it names one).
pub async fn bound(sql: &Client, option: &str, text: &str) -> Result<Bound, VerifyError> {
    let row = sql
        .query_one("SELECT (extract(epoch FROM $1::text::timestamptz) * 1000)::bigint", &[&text])
        .await
        .map_err(|e| match e.code().map(|c| c.code()) {
            Some(code) if code.starts_with("22") => VerifyError::Usage(format!(
                "{option} `{text}` is not a timestamp PostgreSQL understands (e.g. 2024-05-01T12:00:00Z)"
            )),
            _ => sql_error(e),
        })?;
    Ok(Bound { text: text.to_string(), ms: row.get(0) })
}

/// Streams the outbox rows (within the window) to `sink`, routing each to its topic as the
/// Event Router does.
pub async fn read_rows(
    sql: &Client,
    table: &OutboxTable,
    router: &RouterConfig,
    order: &OrderSource,
    window: (Option<&Bound>, Option<&Bound>),
    published: Option<&str>,
    mut sink: impl FnMut(CommittedEvent),
) -> Result<(), VerifyError> {
    let (order_rank, order_text) = match order.sql() {
        Some(o) => (
            format!("CASE WHEN ({o}) IS NULL THEN NULL ELSE dense_rank() OVER (ORDER BY {o}) END"),
            format!("({o})::text"),
        ),
        None => ("NULL::bigint".to_string(), "NULL::text".to_string()),
    };
    let mut conditions = Vec::new();
    let mut params: Vec<&str> = Vec::new();
    for (bound, op) in [(window.0, ">="), (window.1, "<")] {
        if let Some(b) = bound {
            params.push(&b.text);
            conditions.push(format!("{} {op} ${}::text::timestamptz", quote_ident(TIME_COLUMN), params.len()));
        }
    }
    let filter = if conditions.is_empty() { String::new() } else { format!(" WHERE {}", conditions.join(" AND ")) };
    let marked = published.map_or("NULL::bool".to_string(), |c| format!("{} IS NOT NULL", quote_ident(c)));
    let query = format!(
        "SELECT {}::text, {}::text, {}::text, {order_rank}, {order_text}, {marked} FROM {}{filter}",
        quote_ident(&router.field_event_id),
        quote_ident(&router.route_by_field),
        quote_ident(&router.field_event_key),
        table.qualified()
    );
    let rows = sql.query_raw(query.as_str(), params).await.map_err(sql_error)?;
    futures_util::pin_mut!(rows);
    let mut topics: std::collections::HashMap<String, String> = Default::default();
    while let Some(row) = rows.try_next().await.map_err(sql_error)? {
        let Some(id) = row.get::<_, Option<String>>(0) else { continue };
        let route_value: Option<String> = row.get(1);
        let topic = match route_value {
            None => None,
            Some(v) => Some(match topics.get(&v) {
                Some(t) => t.clone(),
                None => {
                    let t = topic::route(&router.route_topic_regex, &router.route_topic_replacement, &v).map_err(|e| {
                        VerifyError::Usage(format!("route.topic.replacement cannot be applied to route-by value `{v}`: {e}; fix transforms.<name>.route.topic.replacement"))
                    })?;
                    topics.insert(v, t.clone());
                    t
                }
            }),
        };
        let order = match (row.get::<_, Option<i64>>(3), row.get::<_, Option<String>>(4)) {
            (Some(rank), Some(value)) => Some(CommitOrder { rank, value }),
            _ => None,
        };
        sink(CommittedEvent { id, topic, aggregate: row.get(2), order, published: row.get(5) });
    }
    Ok(())
}

/// Which of `ids` have a row in the table (any time window).
pub async fn existing_ids(
    sql: &Client,
    table: &OutboxTable,
    id_column: &str,
    ids: &[String],
) -> Result<HashSet<String>, VerifyError> {
    let query = format!(
        "SELECT {c}::text FROM {} WHERE {c}::text = ANY($1::text[])",
        table.qualified(),
        c = quote_ident(id_column)
    );
    let mut found = HashSet::new();
    for batch in ids.chunks(LOOKUP_BATCH) {
        for row in sql.query(query.as_str(), &[&batch]).await.map_err(sql_error)? {
            found.insert(row.get(0));
        }
    }
    Ok(found)
}
