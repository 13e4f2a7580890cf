//! Helpers of the fault suite (`tests/faults.rs`): the pieces a fault needs that the shared
//! `tests/support` does not have.
//!
//! - `bed`: an outbox table, its business table, slot, publication and topics on any PostgreSQL and
//!   broker (the fault scenarios run some of their own), plus probes that time a recovery end to end;
//! - `crash`: the application dying between its writes and its COMMIT;
//! - `load`: the application: concurrent writers committing business rows with outbox rows;
//! - `proxy`: a TCP proxy that can reset, stall or throttle the connections it carries;
//! - `procs`: the relay as a child process (pid, RSS), and PostgreSQL and broker instances of a
//!   scenario's own, started and stopped through `scripts/services.sh`;
//! - `verify`: what the broker holds against what PostgreSQL committed;
//! - `scenario`: running a scenario alone with a deadline, settling and checking it;
//! - `registry`: a schema registry of the scenario's own, to stop and resume.
#![allow(dead_code)]

pub mod bed;
pub mod crash;
pub mod load;
pub mod procs;
pub mod proxy;
pub mod registry;
pub mod scenario;
pub mod verify;

use std::time::Duration;

/// A small deterministic PRNG (xorshift64*): the scenarios need "random" moments and choices, and a
/// printed seed makes a failing run repeatable (`PGOUTBOX_FAULTS_SEED`).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    /// The run's seed: `PGOUTBOX_FAULTS_SEED`, or the clock.
    pub fn seed() -> u64 {
        std::env::var("PGOUTBOX_FAULTS_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(42)
        })
    }

    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// Uniform in `lo..hi` milliseconds.
    pub fn millis(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.below(hi.saturating_sub(lo).max(1)))
    }
}

/// An integer from the environment, for sizes CI may want to shrink.
pub fn env_usize(key: &str, default: usize) -> usize {
    std::env::var(key).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}
