//! Which aggregate partitions this instance publishes: with `pgoutbox.polling.ordering=per_aggregate`
//! the aggregate ids are hashed into `pgoutbox.polling.partitions` parts, and each part is owned by
//! one live instance at a time (a PostgreSQL advisory lock on the polling connection). An aggregate's
//! rows are therefore read and published by one poller, in order, across instances and hand-overs.
//!
//! Sharing: every instance counts the live ones (their shared member locks) and keeps at most its fair
//! share, `ceil(partitions / instances)`; one that holds more releases the surplus between batches,
//! and the others take it. A partition changes hands only between batches, after its owner marked
//! what it published, so the next owner starts after the last row the previous one published.
//!
//! Hand-over after a failure: the locks live as long as the polling connection. A process that dies
//! closes it at once. One that is cut off goes silent, and the server ends its session after 20 s
//! (the idle timeouts the polling connection sets, against the heartbeat it keeps: see
//! `pipeline::polling`); another instance takes its partitions at its next check, within a second.
//! The cut-off instance cannot mark anything (its connection is gone) and reads no more rows, so it
//! publishes nothing it did not read while it owned them. One that reaches PostgreSQL but not Kafka
//! ends its polling session itself once a batch has gone unacknowledged for
//! `pgoutbox.polling.ack.timeout.ms` (see `batch`), and joins again only once the cluster answers it
//! (each session starts by asking).

use std::time::{Duration, Instant};

use tokio_postgres::Client;

use crate::config::polling::{Ordering, PollingConfig};
use crate::metrics::{Metrics, RelayState};
use crate::postgres::polling as sql_locks;
use crate::postgres::PgError;

/// How often ownership is checked against the live instances.
const CHECK_EVERY: Duration = Duration::from_secs(1);

pub struct Ownership {
    key: i32,
    partitions: i32,
    ordering: Ordering,
    owned: Vec<i32>,
    next_check: Instant,
    /// Another instance announced a different partition count: this one owns nothing meanwhile.
    conflicting: bool,
}

impl Ownership {
    /// Joins the instances polling under `key` (a no-op for `ordering=none`).
    pub async fn join(sql: &Client, key: i32, cfg: &PollingConfig) -> Result<Ownership, PgError> {
        if cfg.ordering == Ordering::PerAggregate {
            sql_locks::join(sql, key, cfg.partitions).await?;
        }
        Ok(Ownership {
            key,
            partitions: cfg.partitions,
            ordering: cfg.ordering,
            owned: Vec::new(),
            next_check: Instant::now(),
            conflicting: false,
        })
    }

    /// The partitions to poll now (`None`: poll nothing; `Some(&[])` with `ordering=none`: every row).
    pub async fn refresh(&mut self, sql: &Client, metrics: &Metrics) -> Result<Option<&[i32]>, PgError> {
        if self.ordering == Ordering::None {
            metrics.set_state(RelayState::Streaming);
            return Ok(Some(&[]));
        }
        if Instant::now() >= self.next_check {
            self.check(sql).await?;
            self.next_check = Instant::now() + CHECK_EVERY;
            metrics.set_state(if self.owned.is_empty() { RelayState::StandingBy } else { RelayState::Streaming });
        }
        Ok((!self.owned.is_empty()).then_some(self.owned.as_slice()))
    }

    async fn check(&mut self, sql: &Client) -> Result<(), PgError> {
        let holders = sql_locks::holders(sql, self.key).await?;
        let before = std::mem::take(&mut self.owned);
        let mut mine = holders.mine;
        let others: Vec<i32> = holders.members.iter().copied().filter(|&n| n != self.partitions).collect();
        if !others.is_empty() {
            if !self.conflicting {
                tracing::warn!(
                    partitions = self.partitions,
                    other = ?others,
                    "another instance polls these tables with a different pgoutbox.polling.partitions; per-aggregate order needs one count everywhere, so this instance publishes nothing until they agree"
                );
                self.conflicting = true;
            }
            for p in mine.drain(..) {
                sql_locks::release(sql, self.key, p).await?;
            }
        } else {
            self.conflicting = false;
            let instances = holders.members.len().max(1) as i32;
            let fair = ((self.partitions + instances - 1) / instances) as usize;
            while mine.len() > fair {
                if let Some(p) = mine.pop() {
                    sql_locks::release(sql, self.key, p).await?;
                }
            }
            if mine.len() < fair {
                let taken = sql_locks::claim(sql, self.key, self.partitions, &mine, (fair - mine.len()) as i64).await?;
                mine.extend(taken);
                mine.sort_unstable();
            }
        }
        if mine != before {
            tracing::info!(owned = ?mine, partitions = self.partitions, instances = holders.members.len(), "polling: aggregate partitions owned by this instance changed");
        }
        self.owned = mine;
        Ok(())
    }
}
