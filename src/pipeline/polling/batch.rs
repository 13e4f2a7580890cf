//! The polling relay's progress rule, its only owner: a row's published column is set only after the
//! broker acknowledged its record (or its dead letter), and in the transaction that read the row.
//!
//! One batch: `BEGIN`; read the oldest unpublished rows of the owned partitions, locking them; hand
//! their records to the sink; wait until the sink saw every one acknowledged; mark those rows;
//! `COMMIT`. A crash anywhere before the commit leaves the rows unpublished, and the next poll
//! (of this or another instance) publishes them again: a duplicate, never a gap. Each poll starts
//! from the oldest unpublished row, never from the last one seen, so a row whose transaction
//! committed late (after rows with greater ids were published) is published at the next poll.
//!
//! A row that stops the relay (a record the producer would refuse as too large, or one the router
//! cannot build, with `errors.tolerance=none`) ends its batch before it: the rows before it are
//! published, acknowledged, marked and committed as any batch, and only then does the relay stop,
//! naming the row. Were the whole batch rolled back, every restart would publish those rows again
//! and stop at the same row. The refused row and the rows after it stay unpublished, so the marks
//! still cover exactly an acknowledged prefix of the batch, in order.

use futures_util::TryStreamExt;
use tokio::sync::{mpsc, oneshot};
use tokio_postgres::Client;

use crate::config::Config;
use crate::error::RelayError;
use crate::outbox::{RoutePlan, Router};
use crate::pipeline::Item;
use crate::postgres::polling::PolledTable;
use crate::postgres::PgError;

/// Bound on one SQL step of a batch: a connection that stops answering (a cut network) must not hold
/// the relay, which then reconnects and finds out whether it still owns its partitions.
/// Records handed to the sink at a time.
const CHUNK: usize = 1024;

const SQL_STEP: std::time::Duration = std::time::Duration::from_secs(60);

pub struct Batch<'a> {
    pub cfg: &'a Config,
    pub sql: &'a Client,
    pub router: &'a mut Router,
    pub tx: &'a mpsc::Sender<Vec<Item>>,
    pub metrics: &'a crate::metrics::Metrics,
    /// `PGOUTBOX_POLLING_HOLD_MS` (tests only): how long to keep a batch read and locked before
    /// publishing it, to force interleavings between instances.
    pub hold: std::time::Duration,
    /// `PGOUTBOX_POLLING_HOLD_MARK_MS` (tests only): how long to wait between the acknowledgement of
    /// a batch and its marking, to crash the relay there.
    pub hold_mark: std::time::Duration,
    /// The producer's record size limit, when a record above it stops the relay.
    pub limit: Option<super::limits::RecordLimit>,
}

/// What a batch did: the rows it read, published and marked, and the error that stops the relay
/// once they are committed (a row it could not publish; it and the rows after it were not read).
struct Published {
    rows: usize,
    stop: Option<RelayError>,
}

impl Batch<'_> {
    /// Publishes and marks up to `limit` rows of `table` in `partitions`; returns how many it read.
    pub async fn run(
        &mut self,
        table: &PolledTable,
        plan: &RoutePlan,
        partitions: &[i32],
        limit: i64,
    ) -> Result<usize, RelayError> {
        step(async { self.sql.batch_execute("BEGIN").await.map_err(PgError::Sql) }).await?;
        let result = self.publish(table, plan, partitions, limit).await;
        let end = if result.is_ok() { "COMMIT" } else { "ROLLBACK" };
        match (result, step(async { self.sql.batch_execute(end).await.map_err(PgError::Sql) }).await) {
            (Ok(Published { rows, stop: None }), Ok(())) => Ok(rows),
            // Committed: the rows before the one that stops the relay are marked.
            (Ok(Published { stop: Some(e), .. }), Ok(())) => Err(e),
            (Err(e), _) | (Ok(_), Err(e)) => Err(e),
        }
    }

    async fn publish(
        &mut self,
        table: &PolledTable,
        plan: &RoutePlan,
        partitions: &[i32],
        limit: i64,
    ) -> Result<Published, RelayError> {
        let began = std::time::Instant::now();
        // What to mark once acknowledged: only the rows' identities are kept, the records go on to
        // the sink as they are routed, in chunks (so a batch of large rows is never all in memory).
        let mut read: Vec<(String, String)> = Vec::new();
        let mut items = Vec::with_capacity(CHUNK);
        let stop = {
            // Dropped before the marking statement: the rows the batch stopped before are left
            // unread (tokio-postgres discards them), and stay locked until the commit.
            let rows = step(table.fetch(self.sql, partitions, limit)).await?;
            futures_util::pin_mut!(rows);
            let mut bytes = 0;
            loop {
                let Some(row) = step(rows.try_next()).await? else { break None };
                if read.is_empty() && !self.hold.is_zero() {
                    tracing::info!(hold = ?self.hold, "polling: holding a batch before publishing it (PGOUTBOX_POLLING_HOLD_MS)");
                    tokio::time::sleep(self.hold).await;
                }
                let record = match self.route(table, plan, &row.tuple, read.len()) {
                    Ok(record) => record,
                    Err(e) => break Some(e),
                };
                read.push((row.relation, row.ctid));
                bytes += record.as_ref().map_or(0, |r| r.size());
                items.extend(record.map(Item::Event));
                if items.len() >= CHUNK || bytes >= crate::pipeline::BATCH_MAX_BYTES {
                    self.send(std::mem::replace(&mut items, Vec::with_capacity(CHUNK))).await?;
                    bytes = 0;
                }
            }
        };
        if read.is_empty() {
            return Ok(Published { rows: 0, stop });
        }
        tracing::debug!(rows = read.len(), ?partitions, "polling: batch read");
        self.metrics.events_seen.fetch_add(read.len() as u64, std::sync::atomic::Ordering::Relaxed);
        self.metrics.record_batch(read.len() as u64, began.elapsed());
        let (done, acked) = oneshot::channel();
        items.push(Item::Barrier(done));
        self.send(items).await?;
        // The sink fires the barrier once everything before it is acknowledged, or drops it when it
        // stops (its own error is then the one reported).
        self.wait_for(acked).await?;
        if !self.hold_mark.is_zero() {
            tracing::info!(hold = ?self.hold_mark, "polling: batch acknowledged, holding it before marking (PGOUTBOX_POLLING_HOLD_MARK_MS)");
            tokio::time::sleep(self.hold_mark).await;
        }
        let marked = step(table.mark(self.sql, &read)).await?;
        if marked != read.len() as u64 {
            // The rows were locked by this transaction: a difference means the table changed in a way
            // polling cannot follow (a trigger rewriting the update). Not marking is safe: roll back.
            return Err(RelayError::TaskStopped(format!(
                "marked {marked} of the {} rows just published in {}; rolling back (they will be published again)",
                read.len(),
                table.qualified()
            )));
        }
        self.metrics.transactions_confirmed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if stop.is_some() {
            tracing::info!(rows = read.len(), table = %table.qualified(), "polling: published and marked the rows before the one that stops the relay");
        }
        Ok(Published { rows: read.len(), stop })
    }

    /// The record of one row (`None`: skipped under `errors.tolerance=all`), or the error that
    /// stops the relay at this row, after the `before` rows read before it in the batch.
    fn route(
        &mut self,
        table: &PolledTable,
        plan: &RoutePlan,
        tuple: &crate::pgoutput::TupleData,
        before: usize,
    ) -> Result<Option<crate::outbox::OutboxRecord>, RelayError> {
        let record = match self.router.route(plan, tuple, crate::pipeline::now_ms()) {
            Ok(record) => record,
            Err(e) => {
                let names: Vec<String> = table.columns.iter().map(|c| c.name.clone()).collect();
                let letter = crate::pipeline::tolerate_route_error(self.cfg, &table.qualified(), &names, tuple, e)?;
                self.metrics.route_errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if letter.is_some() {
                    self.metrics.dead_letters.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                letter
            }
        };
        if let (Some(limit), Some(r)) = (&self.limit, &record) {
            if let Err(size) = limit.check(r) {
                return Err(limit.refused(&table.qualified(), r, size, before));
            }
        }
        Ok(record)
    }

    /// Waits for the sink's barrier, keeping the polling session visibly alive meanwhile: the server
    /// ends a session idle in a transaction for `idle_in_transaction_session_timeout` (see
    /// `pipeline::polling`), which is how a vanished instance loses its partitions.
    async fn wait_for(&self, mut acked: oneshot::Receiver<()>) -> Result<(), RelayError> {
        loop {
            tokio::select! {
                r = &mut acked => {
                    return r.map_err(|_| RelayError::TaskStopped("the sink stopped before the broker acknowledged the batch".into()));
                }
                _ = tokio::time::sleep(super::heartbeat()) => {
                    step(async { self.sql.batch_execute("SELECT 1").await.map_err(PgError::Sql) }).await?;
                }
            }
        }
    }

    async fn send(&self, items: Vec<Item>) -> Result<(), RelayError> {
        if items.is_empty() {
            return Ok(());
        }
        self.tx.send(items).await.map_err(|_| RelayError::TaskStopped("the sink stopped".into()))
    }
}

/// One SQL step, bounded by `SQL_STEP`.
pub(super) async fn step<T>(
    f: impl std::future::Future<Output = Result<T, impl Into<RelayError>>>,
) -> Result<T, RelayError> {
    match tokio::time::timeout(SQL_STEP, f).await {
        Ok(r) => r.map_err(Into::into),
        Err(_) => Err(RelayError::Postgres(PgError::Io(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("a polling statement got no answer in {SQL_STEP:?}; reconnecting"),
        )))),
    }
}
