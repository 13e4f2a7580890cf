//! What every fault scenario does around its fault: run alone with a deadline, settle, check, and
//! print its summary line.

use std::future::Future;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::bed::{Bed, PROBE};
use super::load::{Load, Stats};
use super::procs::RelayProc;
use super::verify::{verify, Verdict};

static SERIAL: Mutex<()> = Mutex::new(());

/// One scenario at a time (a failed one poisons the lock; the next still runs).
pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs a scenario alone, with a deadline, and prints its wall time.
// Each test runs its own runtime on a thread of its own: the lock orders tests, not tasks of one
// runtime, so holding it across awaits cannot deadlock.
#[allow(clippy::await_holding_lock)]
pub async fn bounded(name: &str, deadline: Duration, scenario: impl Future<Output = ()>) {
    let _serial = serial();
    let start = Instant::now();
    if tokio::time::timeout(deadline, scenario).await.is_err() {
        panic!("{name} did not finish within {deadline:?}");
    }
    println!("{name}: wall time {:.1}s", start.elapsed().as_secs_f64());
}

pub fn ms(d: Duration) -> String {
    format!("{}ms", d.as_millis())
}

pub fn stats_line(ds: &[Duration]) -> String {
    if ds.is_empty() {
        return "n/a".into();
    }
    let avg = ds.iter().sum::<Duration>() / ds.len() as u32;
    format!("avg {} max {}", ms(avg), ms(*ds.iter().max().unwrap()))
}

/// After the load stopped: waits until the slot confirms the end of WAL (every committed event
/// acknowledged), reads every topic back, prints the summary line and checks it.
pub async fn settle(
    name: &str,
    bed: &Bed,
    kinds: &[&str],
    relay: &mut RelayProc,
    written_by_app: u64,
    extra: &str,
) -> Verdict {
    bed.wait_confirmed_to_wal_end(relay, Duration::from_secs(180)).await;
    let rows = bed.rows().await;
    let probes = rows.iter().filter(|r| r.aggregatetype == bed.agg(PROBE)).count() as u64;
    let records = bed.read_back(kinds, &rows, Duration::from_secs(60));
    let v = verify(&rows, &records, written_by_app + probes);
    println!("{}", v.line(name, extra));
    v.assert_clean(&relay.log_tail(60));
    v
}

/// The end of a load under faults: a second more, the writers stopped, then a probe's round trip
/// (how long the relay takes to publish a new event once everything settled).
pub async fn wind_down(bed: &Bed, load: Load) -> (std::sync::Arc<Stats>, Duration) {
    tokio::time::sleep(Duration::from_secs(1)).await;
    let stats = load.stop().await;
    let last = bed.probe_round_trip(Instant::now(), Duration::from_secs(60)).await;
    (stats, last)
}

pub fn written(stats: &Stats) -> u64 {
    stats.get(|s| &s.written)
}
