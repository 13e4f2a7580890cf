//! Pruning (seed step 5), for both relays: every `pgoutbox.prune.interval.ms`, the outbox rows that
//! may go (see `postgres::prune`) are deleted or archived in short batches, on a connection of the
//! pruner's own, so that a slow prune never holds the relay.
//!
//! What vacuum needs: every pruned row (and, with the polling relay, every mark) leaves a dead row
//! version that only (auto)vacuum reclaims. docs/operations.md gives the table settings for a busy
//! outbox.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::config::prune::PruneConfig;
use crate::config::Config;
use crate::error::RelayError;
use crate::metrics::Metrics;
use crate::postgres::prune::PruneTarget;
use crate::postgres::{setup, ConnectParams};

/// Batches per table and round: a round that finds more stops there and the next round goes on, so
/// that one round never runs for long.
const MAX_BATCHES_PER_ROUND: usize = 1000;

/// Checks what pruning needs (a definite error stops the relay at start, naming the key), then
/// starts the task that prunes until `stop` (nothing when pruning is off).
pub async fn start(cfg: &Config, metrics: Arc<Metrics>, stop: CancellationToken) -> Result<(), RelayError> {
    let Some(p) = cfg.prune.clone() else { return Ok(()) };
    let params = ConnectParams::from_config(&cfg.database);
    let sql = setup::connect_sql(&params).await?;
    let mut targets = Vec::new();
    for (schema, table) in setup::captured_tables(&sql, cfg).await? {
        targets.push(PruneTarget::plan(&sql, &schema, &table, cfg, &p).await?);
    }
    drop(sql);
    tokio::spawn(run(params, targets, p, metrics, stop));
    Ok(())
}

async fn run(
    params: ConnectParams,
    targets: Vec<PruneTarget>,
    p: PruneConfig,
    metrics: Arc<Metrics>,
    stop: CancellationToken,
) {
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = round(&params, &targets, &metrics, &stop) => {}
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(p.interval) => {}
        }
    }
}

async fn round(params: &ConnectParams, targets: &[PruneTarget], metrics: &Metrics, stop: &CancellationToken) {
    let sql = match setup::connect_sql(params).await {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "pruning: cannot connect; trying again at the next interval");
            return;
        }
    };
    for target in targets {
        match prune_table(&sql, target, metrics, stop).await {
            Ok((0, removed)) if removed.is_empty() => {}
            Ok((rows, removed)) => {
                tracing::info!(table = %target.table, rows, partitions = ?removed, "pruning: removed outbox rows that no longer need keeping")
            }
            Err(e) => {
                tracing::warn!(table = %target.table, error = %e, "pruning failed; trying again at the next interval")
            }
        }
    }
}

async fn prune_table(
    sql: &tokio_postgres::Client,
    target: &PruneTarget,
    metrics: &Metrics,
    stop: &CancellationToken,
) -> Result<(u64, Vec<String>), crate::postgres::PgError> {
    let removed = target.remove_partitions(sql).await?;
    let mut rows = 0;
    for leaf in target.leaves(sql).await? {
        for _ in 0..MAX_BATCHES_PER_ROUND {
            if stop.is_cancelled() {
                return Ok((rows, removed));
            }
            let n = target.prune_batch(sql, &leaf).await?;
            rows += n;
            metrics.pruned_rows.fetch_add(n, Ordering::Relaxed);
            if n < target.batch_size() {
                break;
            }
        }
    }
    Ok((rows, removed))
}
