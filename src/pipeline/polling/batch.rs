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
//!
//! While it waits for the sink (for room in its queue, or for the barrier) the batch keeps its
//! session alive: a `SELECT 1` at least every `heartbeat()`, or the server would end a session idle
//! in its transaction, and another instance would publish the batch again while this one's producer
//! still delivers it. While its rows are still arriving the connection cannot take a statement (the
//! answer would queue behind the rows), so a batch whose sink has no room for a heartbeat's time
//! stops reading there: it publishes and marks the rows it read, the others stay unpublished for the
//! next batch (a slow broker makes batches smaller, never silent).
//!
//! A batch holds a transaction, with an xid (`FOR UPDATE`), and so the database's xmin horizon, and
//! its partitions: it waits for Kafka only as long as Kafka acknowledges its records. After
//! `pgoutbox.polling.ack.timeout.ms` without an acknowledgement it is rolled back (nothing is
//! marked, so nothing is lost; what the producer still delivers of it is a duplicate) and ends the
//! session with [`Unacknowledged`]: the relay lets its partitions go and takes them again only once
//! the Kafka cluster answers it (see `pipeline::polling`).

use std::time::{Duration, Instant};

use futures_util::TryStreamExt;
use tokio::sync::{mpsc, oneshot};
use tokio_postgres::Client;

use crate::config::Config;
use crate::error::RelayError;
use crate::outbox::{RoutePlan, Router};
use crate::pipeline::Item;
use crate::postgres::polling::PolledTable;
use crate::postgres::PgError;

/// Records handed to the sink at a time.
const CHUNK: usize = 1024;

/// Bound on one SQL step of a batch: a connection that stops answering (a cut network) must not hold
/// the relay, which then reconnects and finds out whether it still owns its partitions.
const SQL_STEP: Duration = Duration::from_secs(60);

/// How long a batch waits for a row another session holds locked before it says so and starts over.
const ROW_LOCK_WAIT: Duration = Duration::from_secs(30);

pub struct Batch<'a> {
    pub cfg: &'a Config,
    pub sql: &'a Client,
    pub router: &'a mut Router,
    pub tx: &'a mpsc::Sender<Vec<Item>>,
    pub metrics: &'a crate::metrics::Metrics,
    /// `PGOUTBOX_POLLING_HOLD_MS` (tests only): how long to keep a batch read and locked before
    /// publishing it, to force interleavings between instances.
    pub hold: Duration,
    /// `PGOUTBOX_POLLING_HOLD_MARK_MS` (tests only): how long to wait between the acknowledgement of
    /// a batch and its marking, to crash the relay there.
    pub hold_mark: Duration,
    /// The producer's and the topics' record size limits, when a record above one stops the relay.
    pub limit: Option<&'a mut super::limits::RecordLimit>,
    /// `pgoutbox.polling.ack.timeout.ms`: how long the batch waits for Kafka without an acknowledgement.
    pub ack_timeout: Duration,
}

/// Kafka acknowledged none of a batch's records for `pgoutbox.polling.ack.timeout.ms`: the batch was
/// rolled back, and the instance must let its partitions go (see the module's doc).
#[derive(Debug, thiserror::Error)]
#[error(
    "Kafka acknowledged no record for {} s (pgoutbox.polling.ack.timeout.ms); the batch was rolled back",
    .0.as_secs()
)]
pub struct Unacknowledged(pub Duration);

/// Whether `e` ended a batch that Kafka left without acknowledgements ([`Unacknowledged`]).
pub fn abandoned(e: &RelayError) -> bool {
    matches!(e, RelayError::Kafka(crate::kafka::Error::Transient { source, .. }) if source.is::<Unacknowledged>())
}

/// What a batch watches while it waits for the sink: when it last gave the polling connection a
/// statement (the next heartbeat is due `heartbeat` after it), and when Kafka last acknowledged a
/// record (the sink counts them in `Metrics::events_acked`).
struct Waiting {
    heartbeat: Duration,
    ack_timeout: Duration,
    last_statement: Instant,
    acked: u64,
    acked_at: Instant,
}

impl Waiting {
    fn new(metrics: &crate::metrics::Metrics, ack_timeout: Duration, last_statement: Instant) -> Self {
        Waiting {
            heartbeat: super::heartbeat(),
            ack_timeout,
            last_statement,
            acked: metrics.events_acked.load(std::sync::atomic::Ordering::Relaxed),
            acked_at: Instant::now(),
        }
    }

    /// When the next heartbeat or look at the acknowledgements is due.
    fn due(&self) -> tokio::time::Instant {
        (self.last_statement + self.heartbeat).min(self.acked_at + self.ack_timeout).into()
    }

    /// Does what is due: the heartbeat, and the look at the acknowledgements, which ends the batch
    /// when there was none for `ack_timeout`.
    async fn tick(&mut self, sql: &Client, metrics: &crate::metrics::Metrics) -> Result<(), RelayError> {
        let now = Instant::now();
        let acked = metrics.events_acked.load(std::sync::atomic::Ordering::Relaxed);
        if acked != self.acked {
            (self.acked, self.acked_at) = (acked, now);
        } else if now >= self.acked_at + self.ack_timeout {
            let waited = now - self.acked_at;
            return Err(crate::kafka::Error::transient(
                "waiting for Kafka to acknowledge a polling batch",
                Unacknowledged(waited),
            )
            .into());
        }
        if now >= self.last_statement + self.heartbeat {
            step(async { sql.batch_execute("SELECT 1").await.map_err(PgError::Sql) }).await?;
            self.last_statement = Instant::now();
        }
        Ok(())
    }
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
        // A row something else holds locked is waited for (see `PolledTable::select`), but not for
        // ever without a word.
        let begin = format!("BEGIN; SET LOCAL lock_timeout = {}", ROW_LOCK_WAIT.as_millis());
        step(async { self.sql.batch_execute(&begin).await.map_err(PgError::Sql) }).await?;
        let result = self.publish(table, plan, partitions, limit).await;
        if let Err(RelayError::Postgres(e)) = &result {
            if e.sqlstate() == Some("55P03") {
                tracing::warn!(
                    table = %table.qualified(),
                    waited = ?ROW_LOCK_WAIT,
                    "polling: an unpublished row has been locked by another session for {ROW_LOCK_WAIT:?} (a SELECT … FOR UPDATE or FOR SHARE, an UPDATE or DELETE of the row, in a transaction still open): its aggregate's later rows wait behind it so that they stay in order; find the session in pg_locks and pg_stat_activity and end its transaction. Trying again"
                );
            }
        }
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
        let began = Instant::now();
        // What to mark once acknowledged: only the rows' identities are kept, the records go on to
        // the sink as they are routed, in chunks (so a batch of large rows is never all in memory).
        let mut read: Vec<(String, String)> = Vec::new();
        let mut items = Vec::with_capacity(CHUNK);
        // The fetch is the last statement the server saw until the rows are all read.
        let fetched = Instant::now();
        let (stop, unsent) = {
            // Dropped before the next statement: the rows the batch stopped before are left unread
            // (tokio-postgres discards them), and stay locked until the commit.
            let rows = step(table.fetch(self.sql, partitions, limit)).await?;
            futures_util::pin_mut!(rows);
            let mut bytes = 0;
            loop {
                let Some(row) = step(rows.try_next()).await? else { break (None, None) };
                if read.is_empty() && !self.hold.is_zero() {
                    tracing::info!(hold = ?self.hold, "polling: holding a batch before publishing it (PGOUTBOX_POLLING_HOLD_MS)");
                    tokio::time::sleep(self.hold).await;
                }
                let record = match self.route(table, plan, &row.tuple) {
                    Ok(record) => record,
                    Err(e) => break (Some(e), None),
                };
                if let (Some(limit), Some(r)) = (self.limit.as_deref_mut(), &record) {
                    limit.learn(&self.cfg.kafka, &r.topic).await;
                    if let Err(size) = limit.check(r) {
                        break (Some(limit.refused(&table.qualified(), r, size, read.len())), None);
                    }
                }
                read.push((row.relation, row.ctid));
                bytes += record.as_ref().map_or(0, |r| r.size());
                items.extend(record.map(Item::Event));
                if items.len() >= CHUNK || bytes >= crate::pipeline::BATCH_MAX_BYTES {
                    let chunk = std::mem::replace(&mut items, Vec::with_capacity(CHUNK));
                    bytes = 0;
                    if let Some(chunk) = self.offer(chunk, fetched + super::heartbeat()).await? {
                        tracing::debug!(
                            rows = read.len(),
                            "polling: the sink is full; the batch ends at the rows read so far"
                        );
                        break (None, Some(chunk));
                    }
                }
            }
        };
        if read.is_empty() {
            return Ok(Published { rows: 0, stop });
        }
        tracing::debug!(rows = read.len(), ?partitions, "polling: batch read");
        self.metrics.events_seen.fetch_add(read.len() as u64, std::sync::atomic::Ordering::Relaxed);
        self.metrics.records_polled.fetch_add(read.len() as u64, std::sync::atomic::Ordering::Relaxed);
        self.metrics.record_batch(read.len() as u64, began.elapsed());
        let mut waiting = Waiting::new(self.metrics, self.ack_timeout, fetched);
        if let Some(chunk) = unsent {
            self.send(chunk, &mut waiting).await?;
        }
        let (done, acked) = oneshot::channel();
        items.push(Item::Barrier(done));
        self.send(items, &mut waiting).await?;
        // The sink fires the barrier once everything before it is acknowledged, or drops it when it
        // stops (its own error is then the one reported).
        self.wait_for(acked, &mut waiting).await?;
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
    /// stops the relay at this row.
    fn route(
        &mut self,
        table: &PolledTable,
        plan: &RoutePlan,
        tuple: &crate::pgoutput::TupleData,
    ) -> Result<Option<crate::outbox::OutboxRecord>, RelayError> {
        let record = match self.router.route(plan, tuple, crate::pipeline::now_ms()) {
            Ok(record) => record,
            Err(e) => {
                let names: Vec<String> = table.columns.iter().map(|c| c.name.clone()).collect();
                let letter = crate::pipeline::tolerate_route_error(self.cfg, &table.qualified(), &names, tuple, e)?;
                self.metrics.route_errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                self.metrics.record_error(self.cfg.errors.log);
                if letter.is_some() {
                    self.metrics.dead_letters.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                letter
            }
        };
        Ok(record)
    }

    /// Waits for the sink's barrier, with the heartbeat and the watch on acknowledgements.
    async fn wait_for(&self, mut acked: oneshot::Receiver<()>, waiting: &mut Waiting) -> Result<(), RelayError> {
        loop {
            tokio::select! {
                r = &mut acked => {
                    return r.map_err(|_| RelayError::TaskStopped("the sink stopped before the broker acknowledged the batch".into()));
                }
                _ = tokio::time::sleep_until(waiting.due()) => waiting.tick(self.sql, self.metrics).await?,
            }
        }
    }

    /// Hands `items` to the sink, waiting for room with the heartbeat and the watch on
    /// acknowledgements.
    async fn send(&self, items: Vec<Item>, waiting: &mut Waiting) -> Result<(), RelayError> {
        if items.is_empty() {
            return Ok(());
        }
        loop {
            tokio::select! {
                permit = self.tx.reserve() => {
                    permit.map_err(|_| RelayError::TaskStopped("the sink stopped".into()))?.send(items);
                    return Ok(());
                }
                _ = tokio::time::sleep_until(waiting.due()) => waiting.tick(self.sql, self.metrics).await?,
            }
        }
    }

    /// Hands `items` to the sink while the batch's rows are still arriving, if it has room by
    /// `until` (no heartbeat can be sent meanwhile); otherwise gives them back.
    async fn offer(&self, items: Vec<Item>, until: Instant) -> Result<Option<Vec<Item>>, RelayError> {
        tokio::select! {
            biased;
            permit = self.tx.reserve() => {
                permit.map_err(|_| RelayError::TaskStopped("the sink stopped".into()))?.send(items);
                Ok(None)
            }
            _ = tokio::time::sleep_until(until.into()) => Ok(Some(items)),
        }
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
