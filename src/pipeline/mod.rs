//! The relay: a replication session per connection, retried with capped backoff.
//!
//! ```text
//!  PostgreSQL ──CopyBoth──▶ reader ──bounded channel of batches──▶ sink ──▶ librdkafka ──▶ broker
//!      ▲   (decode pgoutput, route rows)        (checkpoint)   ◀── delivery reports ──┘
//!      └──────── standby status: flush = checkpoint.confirmed() ◀── watch ──┘
//! ```
//!
//! Backpressure: a slow broker fills librdkafka's bounded queue, so the sink waits on delivery reports;
//! the channel fills, so the reader stops reading the socket; the server's send buffer fills, so WAL
//! waits on the server, where it is durable. Meanwhile the reader keeps sending status updates on its
//! timer, so the server never times the connection out.
//!
//! Shutdown: the reader stops reading and closes the channel; the sink waits (bounded) for outstanding
//! acknowledgements and drops its watch; the reader sends the final confirmed position and closes.

mod backlog;
mod batch_limit;
mod checkpoint;
mod partitions;
mod polling;
mod prune;
mod reader;
mod session;
mod sink;
mod snapshot;
mod stall;
mod transaction;

use std::time::Duration;

use tokio_util::sync::CancellationToken;

pub use checkpoint::Checkpoint;
pub(crate) use reader::{now_ms, tolerate_route_error, BATCH_MAX_BYTES};
pub use session::{drop_slot, position_unavailable};

use crate::config::Config;
use crate::error::RelayError;
use crate::lsn::Lsn;
use crate::metrics::Metrics;
use crate::outbox::OutboxRecord;
use std::sync::Arc;

/// What flows from the reader to the sink, in commit order.
#[derive(Debug)]
pub enum Item {
    Event(OutboxRecord),
    /// A transaction ended here (its commit record's end), committed at `commit_time` (microseconds
    /// since 2000-01-01, the server's clock).
    Commit {
        end_lsn: Lsn,
        commit_time: i64,
    },
    /// Exactly once: the position after the event before it, where a Kafka transaction may end:
    /// inside a transaction (a large one is split there), or `None` between two (after a heartbeat).
    Progress(Option<checkpoint::Partial>),
    /// A keepalive's WAL end, received outside any transaction.
    IdleWalEnd(Lsn),
    /// Fired once every event handed over before it has been acknowledged.
    Barrier(tokio::sync::oneshot::Sender<()>),
}

const INITIAL_BACKOFF: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// While another process holds the slot, about how often to try to take it over (jittered, so that
/// several standbys do not knock together). A try costs one SQL connection and one query.
const STANDBY_POLL: Duration = Duration::from_secs(1);
/// A session that streamed this long resets the backoff.
const HEALTHY_SESSION: Duration = Duration::from_secs(30);

/// Capped exponential backoff between the sessions of a relay, reset by a session that lasted.
pub(crate) struct Backoff(Duration);

impl Backoff {
    pub(crate) fn new() -> Self {
        Backoff(INITIAL_BACKOFF)
    }

    /// The wait before the next session, after one that lasted `lasted` and ended for a passing
    /// reason.
    pub(crate) fn next(&mut self, lasted: Duration) -> Duration {
        if lasted > HEALTHY_SESSION {
            self.0 = INITIAL_BACKOFF;
        }
        let wait = self.0;
        self.0 = (self.0 * 2).min(MAX_BACKOFF);
        wait
    }
}

/// `base` scaled by a factor between 0.5 and 1.5, from the clock's low bits (no crate needed for this).
/// `default`, or the milliseconds the environment variable `name` gives: the tests' way to shorten
/// an interval or a timeout without a configuration key.
fn millis_from_env(name: &str, default: Duration) -> Duration {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).map_or(default, Duration::from_millis)
}

fn jittered(base: Duration) -> Duration {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    base.mul_f64(0.5 + f64::from(nanos % 1000) / 1000.0)
}

/// Runs the relay until `shutdown` is cancelled (then returns `Ok`) or a definite error.
pub async fn run(config: Config, shutdown: CancellationToken, metrics: Arc<Metrics>) -> Result<(), RelayError> {
    if config.relay == crate::config::polling::RelayKind::Polling {
        return polling::run(&config, shutdown, metrics).await;
    }
    let mut state = session::SessionState::default();
    let result = sessions(&config, &shutdown, &metrics, &mut state).await;
    // The next pipeline of this process (a restarted connector) starts after this producer ended.
    state.producer.close().await;
    result
}

/// The log-tailing relay's sessions, one after the other, until a stop or a definite error.
async fn sessions(
    config: &Config,
    shutdown: &CancellationToken,
    metrics: &Arc<Metrics>,
    state: &mut session::SessionState,
) -> Result<(), RelayError> {
    let mut backoff = Backoff::new();
    let mut standing_by = false;
    loop {
        let started = std::time::Instant::now();
        let result = session::run(config, shutdown, state, metrics).await;
        metrics.set_state(crate::metrics::RelayState::Reconnecting);
        if shutdown.is_cancelled() {
            return result;
        }
        let wait = match result {
            Ok(()) => return Ok(()),
            Err(e) if e.is_slot_in_use() => {
                // Another process writes from the slot now: what this relay's producer still holds
                // must not land after its records, and how far this relay confirmed says nothing
                // about the slot once another process moves it.
                state.producer.close().await;
                state.reached = None;
                if !standing_by {
                    tracing::info!(slot = %config.slot_name, reason = %e, "replication slot is in use by another process; standing by to take over when it is released");
                    standing_by = true;
                }
                metrics.set_state(crate::metrics::RelayState::StandingBy);
                jittered(STANDBY_POLL)
            }
            Err(e) if e.is_retryable() => {
                standing_by = false;
                state.producer.expire().await;
                let wait = backoff.next(started.elapsed());
                tracing::warn!(error = %e, retry_in = ?wait, "replication session ended; reconnecting and resuming from the slot's confirmed position");
                wait
            }
            Err(e) => return Err(e),
        };
        tokio::select! {
            _ = shutdown.cancelled() => return Ok(()),
            _ = tokio::time::sleep(wait) => {}
        }
    }
}
