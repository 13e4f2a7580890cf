//! `snapshot.mode`: publishing the rows already in the outbox table, routed like inserts (Debezium's
//! `op=r` records go through the Event Router the same way).
//!
//! Consistency with the stream: for a new slot, the snapshot reads the very snapshot the slot was
//! created at (`EXPORT_SNAPSHOT` imported with `SET TRANSACTION SNAPSHOT`), so every row is either in
//! the snapshot or in the stream after it, never both or neither.
//!
//! Crash safety: the snapshot is taken from a temporary slot, and the real slot is created as a copy
//! of it (`pg_copy_logical_replication_slot`, same consistent point) only after the broker acknowledged
//! every snapshot record. A relay killed mid-snapshot therefore finds no slot on restart and takes the
//! snapshot again (duplicates, never a gap).

use futures_util::{pin_mut, TryStreamExt};
use tokio::sync::{mpsc, oneshot};
use tokio_postgres::Client;

use super::Item;
use crate::config::Config;
use crate::error::RelayError;
use crate::outbox::{RelationInfo, Router};
use crate::pgoutput::{TupleData, Value};
use crate::postgres::replication::{quote_ident, quote_literal};
use crate::postgres::{setup, PgError};

/// Events per batch handed to the sink.
const BATCH: usize = 1024;

/// Opens the snapshot transaction on `sql`, importing `exported` when given.
pub async fn begin(sql: &Client, exported: Option<&str>) -> Result<(), PgError> {
    sql.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY").await.map_err(PgError::Sql)?;
    if let Some(name) = exported {
        sql.batch_execute(&format!("SET TRANSACTION SNAPSHOT {}", quote_literal(name))).await.map_err(PgError::Sql)?;
    }
    Ok(())
}

/// Routes every row of the captured tables into `tx`, then waits until the sink has every one of them
/// acknowledged. Returns the number of records.
pub async fn publish(
    sql: &Client,
    cfg: &Config,
    router: &mut Router,
    tx: &mpsc::Sender<Vec<Item>>,
    metrics: &crate::metrics::Metrics,
) -> Result<u64, RelayError> {
    let captured = setup::captured_tables(sql, cfg).await?;
    *snapshot_stats(metrics) = crate::metrics::Snapshot {
        started_ms: super::reader::now_ms() as u64,
        total_tables: captured.len() as u64,
        remaining_tables: captured.len() as u64,
        ..Default::default()
    };
    let result: Result<u64, RelayError> = async {
        let mut tables = Tables { sql, cfg, router, tx, metrics, count: 0, events: 0 };
        for (schema, table) in captured {
            tables.publish(&schema, &table).await?;
            snapshot_stats(metrics).remaining_tables -= 1;
        }
        let count = tables.count;
        // Wait until the broker acknowledged every snapshot record.
        let (done, acked) = oneshot::channel();
        send(tx, vec![Item::Barrier(done)]).await?;
        acked.await.map_err(|_| RelayError::TaskStopped("the sink stopped during the snapshot".into()))?;
        Ok(count)
    }
    .await;
    let mut stats = snapshot_stats(metrics);
    stats.ended_ms = super::reader::now_ms() as u64;
    stats.completed = result.is_ok();
    stats.aborted = result.is_err();
    drop(stats);
    let count = result?;
    tracing::info!(records = count, "snapshot: every existing row published");
    Ok(count)
}

fn snapshot_stats(metrics: &crate::metrics::Metrics) -> std::sync::MutexGuard<'_, crate::metrics::Snapshot> {
    metrics.snapshot.lock().unwrap_or_else(|e| e.into_inner())
}

/// Publishes the captured tables' rows one table at a time, counting them.
struct Tables<'a> {
    sql: &'a Client,
    cfg: &'a Config,
    router: &'a mut Router,
    tx: &'a mpsc::Sender<Vec<Item>>,
    metrics: &'a crate::metrics::Metrics,
    count: u64,
    /// Records produced (rows a transform dropped produce none).
    events: u64,
}

impl Tables<'_> {
    async fn publish(&mut self, schema: &str, table: &str) -> Result<(), RelayError> {
        let columns = setup::table_columns(self.sql, schema, table).await?;
        let relation = RelationInfo { oid: 0, schema: schema.into(), table: table.into(), columns: columns.clone() };
        let plan = self.router.plan(&relation);
        let qualified = format!("{schema}.{table}");
        let names: Vec<String> = columns.iter().map(|c| c.name.clone()).collect();
        tracing::info!(table = %qualified, "snapshot: reading existing rows");
        snapshot_stats(self.metrics).rows_scanned.push((qualified.clone(), 0));
        let mut scanned = 0u64;
        let select = select_all(schema, table, &names);
        let rows = self.sql.query_raw(select.as_str(), std::iter::empty::<&str>()).await.map_err(PgError::Sql)?;
        pin_mut!(rows);
        let mut batch = Vec::with_capacity(BATCH);
        // Bounded by bytes as the streaming batches are (reader::BATCH_MAX_BYTES): rows of a
        // megabyte would otherwise make batches of a gigabyte, several of them in the channel.
        let mut batch_bytes = 0;
        while let Some(row) = rows.try_next().await.map_err(PgError::Sql)? {
            let values = (0..columns.len())
                .map(|i| row.get::<_, Option<String>>(i).map_or(Value::Null, |t| Value::Text(bytes::Bytes::from(t))))
                .collect();
            let tuple = TupleData { values };
            let record = match self.router.route(&plan, &tuple, super::reader::now_ms()) {
                Ok(record) => record,
                Err(e) => {
                    let letter = super::reader::tolerate_route_error(self.cfg, &qualified, &names, &tuple, e)?;
                    self.metrics.route_errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    self.metrics.record_error(self.cfg.errors.log);
                    if letter.is_some() {
                        self.metrics.dead_letters.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    letter
                }
            };
            batch_bytes += record.as_ref().map_or(0, |r| r.size());
            scanned += 1;
            self.metrics.records_polled.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.events += u64::from(record.is_some());
            batch.extend(record.map(Item::Event));
            if batch.len() == BATCH || batch_bytes >= super::reader::BATCH_MAX_BYTES {
                self.scanned(scanned);
                send(self.tx, std::mem::replace(&mut batch, Vec::with_capacity(BATCH))).await?;
                batch_bytes = 0;
            }
            self.count += 1;
            if self.count % 100_000 == 0 {
                tracing::info!(records = self.count, "snapshot: progress");
            }
        }
        self.scanned(scanned);
        send(self.tx, batch).await
    }

    /// The table being read has had `rows` read so far.
    fn scanned(&self, rows: u64) {
        let mut stats = snapshot_stats(self.metrics);
        stats.events = self.events;
        if let Some(last) = stats.rows_scanned.last_mut() {
            last.1 = rows;
        }
    }
}

/// Every column as text. Heap order is not commit order (rows move after deletes and vacuum).
/// Inserting transactions' age, oldest first, then physical order within one, is the closest order
/// the table keeps; frozen rows all have the same age and fall back to physical order.
fn select_all(schema: &str, table: &str, columns: &[String]) -> String {
    format!(
        "SELECT {} FROM {}.{} ORDER BY age(xmin) DESC, ctid",
        columns.iter().map(|c| format!("{}::text", quote_ident(c))).collect::<Vec<_>>().join(", "),
        quote_ident(schema),
        quote_ident(table)
    )
}

async fn send(tx: &mpsc::Sender<Vec<Item>>, batch: Vec<Item>) -> Result<(), RelayError> {
    if batch.is_empty() {
        return Ok(());
    }
    tx.send(batch).await.map_err(|_| RelayError::TaskStopped("the sink stopped during the snapshot".into()))
}
