//! The application: concurrent writers, each committing transactions that insert a business row and
//! one to three outbox rows, some rolled back.
//!
//! Each writer owns a disjoint set of aggregates and commits sequentially, so within an aggregate the
//! outbox `seq` (a bigserial) increases in commit order: the order check can use `seq`. With
//! writers sharing aggregates, `seq` is taken at INSERT and commit order could differ from it.
//!
//! Writers survive the faults the scenarios inject: a failed transaction (server restarted, connection
//! terminated) is counted as in doubt, and the writer reconnects. What PostgreSQL holds at the end is
//! the truth the scenarios check against.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::bed::Bed;
use super::procs::connect_sql;
use super::Rng;

#[derive(Debug, Clone)]
pub struct LoadSpec {
    pub writers: usize,
    pub aggregates_per_writer: usize,
    /// Pause between a writer's transactions.
    pub pause: Duration,
    /// One transaction in this many is rolled back.
    pub rollback_one_in: u64,
    /// Bytes of padding in each payload.
    pub payload_pad: usize,
    /// Aggregate types the aggregates are spread over.
    pub kinds: Vec<&'static str>,
}

impl Default for LoadSpec {
    fn default() -> Self {
        LoadSpec {
            writers: 4,
            aggregates_per_writer: 6,
            pause: Duration::from_millis(4),
            rollback_one_in: 8,
            payload_pad: 40,
            kinds: vec!["Order", "Customer"],
        }
    }
}

#[derive(Debug, Default)]
pub struct Stats {
    /// Outbox rows inserted by any transaction (committed, rolled back or failed).
    pub written: AtomicU64,
    /// Outbox rows in transactions whose COMMIT succeeded.
    pub committed: AtomicU64,
    pub rolled_back: AtomicU64,
    /// Outbox rows in transactions that failed (in doubt if the COMMIT was sent).
    pub failed: AtomicU64,
    pub transactions: AtomicU64,
    pub reconnects: AtomicU64,
}

impl Stats {
    pub fn get(&self, f: impl Fn(&Stats) -> &AtomicU64) -> u64 {
        f(self).load(Ordering::Relaxed)
    }
}

pub struct Load {
    stop: CancellationToken,
    /// While set, every event gets an aggregate of its own (see `one_event_per_aggregate`).
    fresh_aggregates: Arc<AtomicBool>,
    writers: Vec<JoinHandle<()>>,
    pub stats: Arc<Stats>,
}

impl Load {
    /// Starts the writers against `port` (the application talks to PostgreSQL directly, never
    /// through the relay's proxy).
    pub fn start(bed: &Bed, port: u16, spec: LoadSpec, seed: u64) -> Load {
        let stop = CancellationToken::new();
        let stats = Arc::new(Stats::default());
        let fresh_aggregates = Arc::new(AtomicBool::new(false));
        let writers = (0..spec.writers)
            .map(|w| {
                let ctx = Writer {
                    w,
                    port,
                    table: bed.table.clone(),
                    business: bed.business.clone(),
                    aggs: (0..spec.aggregates_per_writer)
                        .map(|j| (bed.agg(spec.kinds[j % spec.kinds.len()]), format!("w{w}-a{j}")))
                        .collect(),
                    spec: spec.clone(),
                    stats: stats.clone(),
                    rng: Rng::new(seed.wrapping_add(w as u64 * 7919)),
                    fresh_aggregates: fresh_aggregates.clone(),
                };
                tokio::spawn(ctx.run(stop.clone()))
            })
            .collect();
        Load { stop, fresh_aggregates, writers, stats }
    }

    /// While `on`, each event goes to an aggregate no other event has. An initial snapshot reads
    /// the table in physical order, which concurrent writers make differ from commit order; events
    /// a snapshot publishes must not be checked for order, so while one may run they share no
    /// aggregate.
    pub fn one_event_per_aggregate(&self, on: bool) {
        self.fresh_aggregates.store(on, Ordering::Relaxed);
    }

    /// Stops the writers after their current transaction.
    pub async fn stop(self) -> Arc<Stats> {
        self.stop.cancel();
        for w in self.writers {
            let _ = w.await;
        }
        self.stats
    }

    pub fn transactions(&self) -> u64 {
        self.stats.get(|s| &s.transactions)
    }
}

struct Writer {
    w: usize,
    port: u16,
    table: String,
    business: String,
    /// (aggregatetype, aggregateid) this writer owns.
    aggs: Vec<(String, String)>,
    spec: LoadSpec,
    stats: Arc<Stats>,
    rng: Rng,
    fresh_aggregates: Arc<AtomicBool>,
}

impl Writer {
    async fn run(mut self, stop: CancellationToken) {
        let mut client = None;
        let mut n = 0u64;
        while !stop.is_cancelled() {
            let Some(c) = client.take() else {
                match connect_sql(self.port).await {
                    Ok(c) => client = Some(c),
                    Err(_) => {
                        self.stats.reconnects.fetch_add(1, Ordering::Relaxed);
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
                continue;
            };
            let (sql, events, rollback) = self.transaction(n);
            n += 1;
            self.stats.written.fetch_add(events, Ordering::Relaxed);
            self.stats.transactions.fetch_add(1, Ordering::Relaxed);
            match c.batch_execute(&sql).await {
                Ok(()) => {
                    let counter = if rollback { &self.stats.rolled_back } else { &self.stats.committed };
                    counter.fetch_add(events, Ordering::Relaxed);
                    client = Some(c);
                }
                // The connection is gone (or the transaction failed): reconnect.
                Err(_) => {
                    self.stats.failed.fetch_add(events, Ordering::Relaxed);
                }
            }
            tokio::select! {
                _ = stop.cancelled() => {}
                _ = tokio::time::sleep(self.spec.pause) => {}
            }
        }
    }

    /// One transaction's SQL: a business row, then 1-3 outbox rows of this writer's aggregates in
    /// one multi-row INSERT (so `seq` follows the VALUES order).
    fn transaction(&mut self, n: u64) -> (String, u64, bool) {
        let events = 1 + self.rng.below(3);
        let rollback = self.rng.below(self.spec.rollback_one_in) == 0;
        let pad = "x".repeat(self.spec.payload_pad);
        let w = self.w;
        let fresh = self.fresh_aggregates.load(Ordering::Relaxed);
        let values: Vec<String> = (0..events)
            .map(|k| {
                let (kind, owned) = &self.aggs[self.rng.below(self.aggs.len() as u64) as usize];
                let id = if fresh { format!("once-w{w}-n{n}-k{k}") } else { owned.clone() };
                format!("(gen_random_uuid(), '{kind}', '{id}', 'Changed', '{{\"w\": {w}, \"n\": {n}, \"k\": {k}, \"pad\": \"{pad}\"}}')")
            })
            .collect();
        let sql = format!(
            "BEGIN; INSERT INTO public.{b} (writer, n, note) VALUES ({w}, {n}, 'order placed'); \
             INSERT INTO public.{t} (id, aggregatetype, aggregateid, type, payload) VALUES {v}; {end};",
            b = self.business,
            t = self.table,
            v = values.join(", "),
            end = if rollback { "ROLLBACK" } else { "COMMIT" },
        );
        (sql, events, rollback)
    }
}
