//! `pgoutbox.prune.*`: deleting (or archiving) outbox rows that no longer need to be kept, for both
//! relays (seed step 5). Off unless `pgoutbox.prune.retention.ms` is set.

use std::time::Duration;

use crate::connect::{ConfigError, Reader};

/// What to do with a partition of a partitioned outbox whose every row may be pruned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartitionAction {
    /// `drop` (the default): detach it and drop it.
    Drop,
    /// `detach`: detach it and keep it as a table of its own.
    Detach,
}

#[derive(Debug, Clone)]
pub struct PruneConfig {
    /// `pgoutbox.prune.retention.ms`: how long a row is kept once it may go (polling: after it was
    /// published; log tailing: after the time in its timestamp column). 0 prunes at once.
    pub retention: Duration,
    /// `pgoutbox.prune.interval.ms` (default 60000): how often pruning runs.
    pub interval: Duration,
    /// `pgoutbox.prune.batch.size` (default 1000): rows per DELETE, each its own short transaction.
    pub batch_size: i64,
    /// `pgoutbox.prune.archive.table`: move rows there (a table with the outbox's columns, in its
    /// order) instead of deleting them.
    pub archive_table: Option<String>,
    /// `pgoutbox.prune.timestamp.column`: what dates a row for the log-tailing relay (default:
    /// `table.field.event.timestamp`). Not needed with a retention of 0.
    pub timestamp_column: Option<String>,
    /// `pgoutbox.prune.partition.action` (`drop` or `detach`).
    pub partition_action: PartitionAction,
}

/// `None` when pruning is off.
pub fn parse(r: &mut Reader<'_>) -> Result<Option<PruneConfig>, ConfigError> {
    let retention = match r.str("pgoutbox.prune.retention.ms") {
        None => {
            for k in [
                "pgoutbox.prune.interval.ms",
                "pgoutbox.prune.batch.size",
                "pgoutbox.prune.archive.table",
                "pgoutbox.prune.timestamp.column",
                "pgoutbox.prune.partition.action",
            ] {
                if r.has(k) {
                    r.consume(k);
                    r.warn(format!("{k} is set but pgoutbox.prune.retention.ms is not: nothing is pruned"));
                }
            }
            return Ok(None);
        }
        Some(_) => r.millis_or("pgoutbox.prune.retention.ms", 0)?,
    };
    let interval = r.millis_or("pgoutbox.prune.interval.ms", 60_000)?;
    if interval.is_zero() {
        return Err(ConfigError::invalid("pgoutbox.prune.interval.ms", "must be greater than 0"));
    }
    let batch_size: i64 = r.int_or("pgoutbox.prune.batch.size", 1000, "a number of rows")?;
    if batch_size <= 0 {
        return Err(ConfigError::invalid("pgoutbox.prune.batch.size", "must be at least 1"));
    }
    let text = |r: &mut Reader<'_>, key: &str| r.str(key).map(str::trim).filter(|v| !v.is_empty()).map(str::to_string);
    let archive_table = text(r, "pgoutbox.prune.archive.table");
    let timestamp_column = text(r, "pgoutbox.prune.timestamp.column");
    let partition_action = r.choice(
        "pgoutbox.prune.partition.action",
        PartitionAction::Drop,
        &[("drop", PartitionAction::Drop), ("detach", PartitionAction::Detach)],
    )?;
    Ok(Some(PruneConfig { retention, interval, batch_size, archive_table, timestamp_column, partition_action }))
}
