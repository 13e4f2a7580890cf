//! The SQL of pruning (seed step 5): which outbox rows may go, and taking them away in short batches.
//!
//! Which rows: for the polling relay, rows whose published column was set more than the retention
//! ago (an unpublished row is never pruned); for the log-tailing relay, any committed row (its insert
//! is in the WAL, which is all the relay reads), dated by a timestamp column when the retention is
//! not 0.
//!
//! How: each batch is one statement, `DELETE ... WHERE ctid = ANY(ARRAY(SELECT ctid ... LIMIT n FOR
//! UPDATE SKIP LOCKED))`, so it holds row locks only for that statement and steps around rows
//! another transaction holds; with an archive table the same statement inserts what it deleted. A
//! partitioned outbox is pruned partition by partition, and a partition whose every row may go (and
//! that does not hold the newest row, which new rows are going to) is detached, and dropped unless
//! `pgoutbox.prune.partition.action=detach`.

use tokio_postgres::Client;

use super::replication::quote_ident;
use super::setup::{SetupError, SetupFailure};
use super::PgError;
use crate::config::prune::{PartitionAction, PruneConfig};
use crate::config::Config;

/// One outbox table, ready to be pruned.
#[derive(Debug, Clone)]
pub struct PruneTarget {
    /// The table, quoted and qualified.
    pub table: String,
    partitioned: bool,
    /// `true` for rows that may go (over alias `o`).
    condition: String,
    /// What dates a row (over alias `o`), to find the partition holding the newest row.
    dated_by: Option<String>,
    /// `INSERT INTO <archive> (<columns>) SELECT <columns> FROM moved`, when archiving.
    archive: Option<String>,
    batch_size: i64,
    action: PartitionAction,
}

impl PruneTarget {
    /// Checks what pruning `schema.table` needs (the dating column, the archive table) and builds
    /// its statements.
    pub async fn plan(
        sql: &Client,
        schema: &str,
        table: &str,
        cfg: &Config,
        p: &PruneConfig,
    ) -> Result<PruneTarget, SetupFailure> {
        let columns = super::setup::table_columns(sql, schema, table).await?;
        let qualified = format!("{}.{}", quote_ident(schema), quote_ident(table));
        let find = |name: &str| columns.iter().find(|c| c.name == name);
        let ms = p.retention.as_millis();
        let (condition, dated_by) = match &cfg.polling {
            Some(polling) => {
                let col = format!("o.{}", quote_ident(&polling.published_column));
                (format!("{col} IS NOT NULL AND {col} < clock_timestamp() - interval '{ms} milliseconds'"), Some(col))
            }
            None => match p.timestamp_column.as_deref().or(cfg.router.field_event_timestamp.as_deref()) {
                None if ms == 0 => ("true".to_string(), None),
                None => {
                    return Err(fail(format!(
                        "pgoutbox.prune.retention.ms={ms} needs a column dating each row of {qualified}: set pgoutbox.prune.timestamp.column (or table.field.event.timestamp), or set the retention to 0 to prune every committed row"
                    )))
                }
                Some(name) => match find(name) {
                    None => {
                        return Err(fail(format!(
                            "pgoutbox.prune.timestamp.column names `{name}`, which {qualified} does not have"
                        )))
                    }
                    Some(c) if [20, 21, 23].contains(&c.type_oid) => {
                        let col = format!("o.{}", quote_ident(name));
                        (format!("{col} < extract(epoch FROM clock_timestamp()) * 1000 - {ms}"), Some(col))
                    }
                    Some(_) => {
                        let col = format!("o.{}", quote_ident(name));
                        (format!("{col} < clock_timestamp() - interval '{ms} milliseconds'"), Some(col))
                    }
                },
            },
        };
        let archive = match &p.archive_table {
            None => None,
            Some(name) => {
                let exists: Option<String> =
                    sql.query_one("SELECT to_regclass($1)::text", &[name]).await.map_err(PgError::Sql)?.get(0);
                let Some(archive) = exists else {
                    return Err(fail(format!(
                        "pgoutbox.prune.archive.table names `{name}`, which does not exist; create it with CREATE TABLE {name} (LIKE {qualified} INCLUDING ALL)"
                    )));
                };
                let names = columns.iter().map(|c| quote_ident(&c.name)).collect::<Vec<_>>().join(", ");
                Some(format!("INSERT INTO {archive} ({names}) SELECT {names} FROM moved"))
            }
        };
        let partitioned: bool = sql
            .query_one("SELECT relkind = 'p' FROM pg_class WHERE oid = $1::text::regclass", &[&qualified])
            .await
            .map_err(PgError::Sql)?
            .get(0);
        Ok(PruneTarget {
            table: qualified,
            partitioned,
            condition,
            dated_by,
            archive,
            batch_size: p.batch_size,
            action: p.partition_action,
        })
    }

    /// The tables rows live in: the partitions of a partitioned outbox, else the table itself.
    pub async fn leaves(&self, sql: &Client) -> Result<Vec<String>, PgError> {
        if !self.partitioned {
            return Ok(vec![self.table.clone()]);
        }
        let rows = sql
            .query(
                "SELECT relid::regclass::text FROM pg_partition_tree($1::text::regclass) WHERE isleaf ORDER BY 1",
                &[&self.table],
            )
            .await
            .map_err(PgError::Sql)?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    /// Detaches (and drops) the partitions whose every row may go, except empty ones and the one
    /// holding the newest row. Returns those it removed.
    pub async fn remove_partitions(&self, sql: &Client) -> Result<Vec<String>, PgError> {
        let Some(dated_by) = self.dated_by.as_deref().filter(|_| self.partitioned) else { return Ok(Vec::new()) };
        let newest: Option<String> = sql
            .query_opt(
                &format!(
                    "SELECT o.tableoid::regclass::text FROM {} AS o ORDER BY {dated_by} DESC NULLS LAST LIMIT 1",
                    self.table
                ),
                &[],
            )
            .await
            .map_err(PgError::Sql)?
            .map(|r| r.get(0));
        let mut removed = Vec::new();
        for leaf in self.leaves(sql).await? {
            if Some(&leaf) == newest.as_ref() {
                continue;
            }
            let all_go: bool = sql
                .query_one(
                    &format!(
                        "SELECT EXISTS (SELECT 1 FROM {leaf} o) AND NOT EXISTS (SELECT 1 FROM {leaf} o WHERE NOT coalesce({}, false))",
                        self.condition
                    ),
                    &[],
                )
                .await
                .map_err(PgError::Sql)?
                .get(0);
            if !all_go {
                continue;
            }
            if self.archive.is_some() {
                // Archiving moves rows; a partition is not dropped with rows that were not moved.
                continue;
            }
            sql.batch_execute(&format!("ALTER TABLE {} DETACH PARTITION {leaf}", self.table))
                .await
                .map_err(PgError::Sql)?;
            if self.action == PartitionAction::Drop {
                sql.batch_execute(&format!("DROP TABLE {leaf}")).await.map_err(PgError::Sql)?;
            }
            removed.push(leaf);
        }
        Ok(removed)
    }

    /// Deletes (or archives) one batch of `leaf`'s rows that may go; returns how many.
    pub async fn prune_batch(&self, sql: &Client, leaf: &str) -> Result<u64, PgError> {
        let delete = format!(
            "DELETE FROM {leaf} WHERE ctid = ANY(ARRAY(SELECT o.ctid FROM {leaf} AS o WHERE {} LIMIT {} FOR UPDATE SKIP LOCKED))",
            self.condition, self.batch_size
        );
        let statement = match &self.archive {
            None => delete,
            Some(insert) => format!("WITH moved AS ({delete} RETURNING *) {insert}"),
        };
        sql.execute(statement.as_str(), &[]).await.map_err(PgError::Sql)
    }

    pub fn batch_size(&self) -> u64 {
        self.batch_size as u64
    }
}

fn fail(message: String) -> SetupFailure {
    SetupFailure::Setup(SetupError::Server(message))
}
