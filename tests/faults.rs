//! The fault suite (issue 4): the real `pgoutbox` binary under load while its process, the
//! application, the broker, PostgreSQL and the network fail. Every scenario ends with the same
//! checks against what PostgreSQL committed: nothing missing, no orphans (no record of an event
//! that was not committed), and per aggregate, the first copy of each event in commit order.
//! Duplicates are allowed (crashes yield duplicates, never gaps) and counted.
//!
//! Each scenario prints one summary line (events written, committed, published, missing, orphans,
//! duplicates, order violations, recovery times) and its wall time. They run one at a time even when
//! the test harness runs tests in parallel: they share two cores, and several time recoveries.
//!
//! The scenarios need root (they start PostgreSQL clusters and brokers of their own through
//! `scripts/services.sh`, like scripts/test.sh) and `psql`. The whole file takes about 5 minutes on
//! 2 cores, a third of it the 1,000,000-row transaction (about 60 s, most of it reading the records
//! back). Sizes CI may want to change: `PGOUTBOX_FAULTS_KILLS` (20), `PGOUTBOX_FAULTS_HUGE_ROWS`
//! (1,000,000), `PGOUTBOX_FAULTS_BACKLOG` (30,000), `PGOUTBOX_FAULTS_SNAPSHOT_ROWS` (60,000);
//! `PGOUTBOX_FAULTS_SEED` repeats a run's random moments.

mod faults_support;
mod support;

use std::time::{Duration, Instant};

use faults_support::bed::Bed;
use faults_support::crash;
use faults_support::load::{Load, LoadSpec};
use faults_support::procs::{
    free_port, mid_initial_snapshot, start_pair_together, status_kb, Broker, PgCluster, RelayProc, RssWatch,
    SNAPSHOT_DONE, SNAPSHOT_STARTED, STANDING_BY, STREAMING,
};
use faults_support::proxy::Proxy;
use faults_support::scenario::{bounded, ms, settle, stats_line, wind_down, written};
use faults_support::verify::verify;
use faults_support::{env_usize, Rng};
use support::Env;

/// The relay's resident memory must stay under this, whatever the backlog.
const RSS_LIMIT_MB: f64 = 256.0;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn relay_killed_at_random_moments_loses_nothing() {
    let name = "relay_killed_at_random_moments_loses_nothing";
    bounded(name, Duration::from_secs(300), async {
        let seed = Rng::seed();
        let mut rng = Rng::new(seed);
        let kinds = ["Order", "Customer"];
        let bed = Bed::shared("kill").await;
        bed.create_topics(&kinds, 3).await;
        // Rows from before the relay existed: its first sessions publish them as the initial
        // snapshot, and the first kills land in the middle of it.
        let prefilled = 30_000;
        bed.prefill("Order", prefilled).await;
        let mut relay = RelayProc::start("kill", &bed.config(&[]));
        let load = Load::start(&bed, bed.pg_port, LoadSpec::default(), seed);
        load.one_event_per_aggregate(true);
        let kills = env_usize("PGOUTBOX_FAULTS_KILLS", 20);
        let mut recoveries = Vec::new();
        let mut mid_snapshot = 0;
        for round in 0..kills {
            // The first kills hit the initial snapshot, every fifth one a relay that is starting
            // (connecting, taking the slot, creating the producer); the others a streaming relay.
            let early = round < 3 || round % 5 == 4;
            tokio::time::sleep(if early { rng.millis(0, 600) } else { rng.millis(100, 1500) }).await;
            relay.kill9();
            let killed = Instant::now();
            let log = relay.log_text();
            if mid_initial_snapshot(&log) {
                mid_snapshot += 1;
            }
            if log.contains(SNAPSHOT_DONE) {
                // The slot exists: no snapshot any more, events may share aggregates.
                load.one_event_per_aggregate(false);
            }
            let sessions = relay.count(STREAMING);
            if rng.below(3) == 0 {
                tokio::time::sleep(rng.millis(50, 600)).await;
            }
            relay.restart();
            let next_early = round + 1 < 3 || (round + 1) % 5 == 4;
            if !next_early {
                relay.wait_count(STREAMING, sessions + 1, Duration::from_secs(60)).await;
                recoveries.push(killed.elapsed());
            }
        }
        let (stats, last) = wind_down(&bed, load).await;
        let extra = format!(
            "kills={kills} (mid_snapshot={mid_snapshot}) streaming_again_after_kill=({}) final_probe={} transactions={} seed={seed}",
            stats_line(&recoveries),
            ms(last),
            stats.get(|s| &s.transactions)
        );
        let v = settle(name, &bed, &kinds, &mut relay, written(&stats) + prefilled as u64, &extra).await;
        assert!(v.committed > 1000, "the load committed too little to mean anything: {}", v.committed);
        assert_eq!(bed.other_slots().await, Vec::<String>::new(), "no staging slot left behind to hold WAL");
        assert_eq!(relay.stop().code(), Some(0), "log tail:\n{}", relay.log_tail(30));
        bed.drop_slot().await;
    })
    .await;
}

/// Exactly once (exactly.once.support=required): the relay SIGKILLed at random moments while the
/// application writes, crashes inside its transactions, and commits large transactions whose rows
/// share LSNs (COPY) and are split over several Kafka transactions. In the main run on three Kafka
/// brokers of its own (replication factor 3, `min.insync.replicas=2`) and a PostgreSQL of its own behind
/// a proxy, with more faults between the relay's kills: a broker SIGKILLed and started again later,
/// another killed and restarted at once, PostgreSQL restarted, the relay's PostgreSQL connections cut.
/// (`PGOUTBOX_FAULTS_EOS_KILLS_ONLY=1` kills the relay only, on the shared services: for a run against
/// another PostgreSQL major by hand.) A `read_committed` consumer must see every committed event exactly once, in order;
/// `read_uncommitted` must still miss nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn relay_killed_under_exactly_once_duplicates_nothing() {
    let name = "relay_killed_under_exactly_once_duplicates_nothing";
    let full = std::env::var("PGOUTBOX_FAULTS_EOS_KILLS_ONLY").map_or(true, |v| v != "1");
    bounded(name, Duration::from_secs(if full { 540 } else { 300 }), async {
        let seed = Rng::seed();
        let mut rng = Rng::new(seed);
        let kinds = ["Order", "Customer"];
        let cluster = full.then(|| Broker::start_nodes("eos", 3));
        let pg = full.then(|| PgCluster::start("eos"));
        let proxy = match &pg {
            Some(pg) => Some(Proxy::start(([127, 0, 0, 1], pg.port).into()).await),
            None => None,
        };
        let bed = match (&cluster, &pg) {
            (Some(cluster), Some(pg)) => Bed::new("eos", pg.port, &cluster.addr()).await,
            _ => Bed::shared("eos").await,
        };
        bed.create_topics(&kinds, 3).await;
        let offsets = format!("offsets_{}", bed.slot);
        let mut keys = vec![
            "exactly.once.source.support=enabled".to_string(),
            "exactly.once.support=required".to_string(),
            "snapshot.mode=no_data".to_string(),
            format!("offset.storage.topic={offsets}"),
            "offset.storage.partitions=3".to_string(),
        ];
        if !full {
            keys.push("offset.storage.replication.factor=1".to_string());
        }
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let config = match &proxy {
            Some(proxy) => bed.config_via(proxy.port, &bed.broker, &keys),
            None => bed.config(&keys),
        };
        // Kafka transactions end inside the COPYs' transactions too.
        let mut relay = RelayProc::start_with_env("eos", &config, &[("PGOUTBOX_TXN_MAX_EVENTS", "700")]);
        relay.wait_count(STREAMING, 1, Duration::from_secs(60)).await;
        let load = Load::start(&bed, bed.pg_port, LoadSpec::default(), seed);
        let kills = env_usize("PGOUTBOX_FAULTS_KILLS", 20);
        let (mut recoveries, mut bulk_rows, mut doomed_rows) = (Vec::new(), 0u64, 0u64);
        let mut faults = Vec::new();
        for round in 0..kills {
            if round % 4 == 1 {
                // A large transaction of COPYed rows: several rows per WAL record (one LSN).
                bulk_rows += crash::copy_rows(&bed, 3000, &format!("bulk{round}")).await;
            }
            if round % 5 == 2 {
                let (app, pid, ids) = crash::doomed_transaction(&bed, 500, &format!("eos_doomed_{round}")).await;
                doomed_rows += ids.len() as u64;
                let _ = bed.sql().await.query_one("SELECT pg_terminate_backend($1)", &[&pid]).await;
                drop(app);
            }
            tokio::time::sleep(rng.millis(100, 1500)).await;
            if let (Some(cluster), Some(pg), Some(proxy)) = (&cluster, &pg, &proxy) {
                let at = Instant::now();
                let fault = match round {
                    4 => {
                        cluster.stop_node(2, "kill");
                        Some("broker 2 SIGKILLed")
                    }
                    7 => {
                        cluster.start_node(2);
                        Some("broker 2 started again")
                    }
                    10 => {
                        pg.stop("fast");
                        pg.start_again();
                        Some("PostgreSQL restarted (fast)")
                    }
                    13 => {
                        proxy.reset_all();
                        Some("PostgreSQL connections cut")
                    }
                    16 => {
                        cluster.stop_node(3, "kill");
                        cluster.start_node(3);
                        Some("broker 3 SIGKILLed and started again")
                    }
                    _ => None,
                };
                if let Some(what) = fault {
                    // The relay publishes again before it is killed in the same round.
                    let published = bed.probe_round_trip(at, Duration::from_secs(120)).await;
                    faults.push(format!("{what}: published_again {}", ms(published)));
                }
            }
            let sessions = relay.count(STREAMING);
            relay.kill9();
            let killed = Instant::now();
            if rng.below(3) == 0 {
                tokio::time::sleep(rng.millis(50, 600)).await;
            }
            relay.restart();
            relay.wait_count(STREAMING, sessions + 1, Duration::from_secs(90)).await;
            recoveries.push(killed.elapsed());
        }
        let (stats, last) = wind_down(&bed, load).await;
        let extra = format!(
            "kills={kills} bulk_rows={bulk_rows} doomed_rows={doomed_rows} streaming_again_after_kill=({}) final_probe={} transactions={} seed={seed} isolation=read_committed faults=[{}] in_doubt_rows={}",
            stats_line(&recoveries),
            ms(last),
            stats.get(|s| &s.transactions),
            faults.join("; "),
            stats.get(|s| &s.failed)
        );
        let written_total = written(&stats) + bulk_rows + doomed_rows;
        let v = settle(name, &bed, &kinds, &mut relay, written_total, &extra).await;
        assert!(v.committed > 1000, "the load committed too little to mean anything: {}", v.committed);
        assert_eq!(
            v.duplicates,
            0,
            "exactly once: a read_committed consumer saw duplicates (e.g. {:?}); relay log: {}",
            v.duplicate_samples,
            relay.log.display()
        );
        let rows = bed.rows().await;
        let uncommitted = bed.read_back_with(&kinds, &rows, &[("isolation.level", "read_uncommitted")]);
        let u = verify(&rows, &uncommitted, written_total);
        println!("{}", u.line(name, "isolation=read_uncommitted"));
        assert!(u.missing.is_empty(), "read_uncommitted misses {} events", u.missing.len());
        // `pgoutbox verify` says the same per isolation level (both, since the config is exactly once).
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_pgoutbox"))
            .args(["verify", "--json", "--order-column", "seq", "--config"])
            .arg(relay.config_path())
            .output()
            .expect("run pgoutbox verify");
        let report: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("verify printed no JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)));
        let levels = report["isolation_levels"].as_array().expect("isolation_levels").clone();
        println!("{name}: pgoutbox verify: {}", serde_json::Value::Array(levels.clone()));
        assert_eq!(levels.len(), 2, "{report}");
        assert_eq!((levels[0]["level"].as_str(), levels[0]["missing"].as_u64(), levels[0]["duplicates"].as_u64()), (Some("read_committed"), Some(0), Some(0)), "{report}");
        assert_eq!((levels[1]["level"].as_str(), levels[1]["missing"].as_u64()), (Some("read_uncommitted"), Some(0)), "{report}");
        assert_eq!(relay.stop().code(), Some(0), "log tail:\n{}", relay.log_tail(30));
        bed.drop_slot().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn application_crash_between_write_and_commit_publishes_nothing() {
    let name = "application_crash_between_write_and_commit_publishes_nothing";
    bounded(name, Duration::from_secs(180), async {
        let seed = Rng::seed();
        let kinds = ["Order", "Customer"];
        let bed = Bed::shared("appcrash").await;
        bed.create_topics(&kinds, 2).await;
        let mut relay = RelayProc::start("appcrash", &bed.config(&[]));
        relay.wait_count(STREAMING, 1, Duration::from_secs(30)).await;
        let load = Load::start(&bed, bed.pg_port, LoadSpec { writers: 2, pause: Duration::from_millis(10), ..LoadSpec::default() }, seed);
        let admin = bed.sql().await;
        let mut doomed_rows = 0u64;
        let mut terminated = 0;
        for i in 0..10 {
            let n = if i % 3 == 0 { 2000 } else { 3 };
            let (app, pid, ids) = crash::doomed_transaction(&bed, n, &format!("terminated_{i}")).await;
            doomed_rows += ids.len() as u64;
            // Other transactions commit while this one is open.
            tokio::time::sleep(Duration::from_millis(200)).await;
            let ok: bool = admin.query_one("SELECT pg_terminate_backend($1)", &[&pid]).await.unwrap().get(0);
            assert!(ok, "pg_terminate_backend({pid})");
            assert!(app.batch_execute("COMMIT").await.is_err(), "a terminated backend cannot commit");
            terminated += 1;
        }
        let mut gone_after = Vec::new();
        for i in 0..4 {
            let n = if i % 2 == 0 { 1000 } else { 2 };
            gone_after.push(crash::psql_killed_mid_transaction(&bed, n, &format!("psql_{i}_{}", std::process::id())).await);
            doomed_rows += n as u64;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        let stats = load.stop().await;
        let in_db: i64 = admin
            .query_one(&format!("SELECT (SELECT count(*) FROM public.{} WHERE payload ? 'doomed') + (SELECT count(*) FROM public.{} WHERE note LIKE 'doomed%')", bed.table, bed.business), &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(in_db, 0, "no row of a dead transaction is committed");
        let last = bed.probe_round_trip(Instant::now(), Duration::from_secs(60)).await;
        let extra = format!(
            "doomed_transactions={} doomed_rows={doomed_rows} psql_backend_gone_after_kill=({}) final_probe={}",
            terminated + gone_after.len(),
            stats_line(&gone_after),
            ms(last)
        );
        let v = settle(name, &bed, &kinds, &mut relay, written(&stats) + doomed_rows, &extra).await;
        let rows = bed.rows().await;
        let records = bed.read_back(&kinds, &rows, Duration::from_secs(10));
        let doomed: Vec<_> = records.iter().filter(|r| r.value.as_deref().is_some_and(|v| String::from_utf8_lossy(v).contains("doomed"))).collect();
        assert!(doomed.is_empty(), "{} records of dead transactions were published", doomed.len());
        assert!(v.committed > 100);
        assert_eq!(relay.stop().code(), Some(0));
        bed.drop_slot().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn broker_restarted_under_load_loses_nothing() {
    let name = "broker_restarted_under_load_loses_nothing";
    bounded(name, Duration::from_secs(240), async {
        let seed = Rng::seed();
        let kinds = ["Order", "Customer"];
        let broker = Broker::start("brokerrestart");
        let bed = Bed::new("brokerrestart", Env::get().pg_port, &broker.addr()).await;
        bed.create_topics(&kinds, 2).await;
        // A short graceful timeout: the relay is also stopped while the broker is down.
        let mut relay = RelayProc::start("brokerrestart", &bed.config(&["task.shutdown.graceful.timeout.ms=5000"]));
        relay.wait_count(STREAMING, 1, Duration::from_secs(30)).await;
        let load = Load::start(&bed, bed.pg_port, LoadSpec { writers: 3, pause: Duration::from_millis(5), ..LoadSpec::default() }, seed);
        let mut recoveries = Vec::new();
        for _ in 0..2 {
            tokio::time::sleep(Duration::from_secs(3)).await;
            broker.crash();
            let down = Instant::now();
            tokio::time::sleep(Duration::from_secs(3)).await;
            assert!(relay.running(), "the relay exited while the broker was down; log tail:\n{}", relay.log_tail(30));
            broker.start_again();
            let up = Instant::now();
            recoveries.push(bed.probe_round_trip(up, Duration::from_secs(90)).await);
            println!("{name}: broker down {:.1}s, relay published again {} after it came back", (up - down).as_secs_f64(), ms(*recoveries.last().unwrap()));
            assert!(relay.running(), "the relay exited after the broker came back; log tail:\n{}", relay.log_tail(30));
        }
        // Stopped (SIGTERM) while the broker is down, with deliveries outstanding: it must exit 0
        // within the graceful timeout, having confirmed only what was acknowledged.
        tokio::time::sleep(Duration::from_secs(2)).await;
        broker.crash();
        tokio::time::sleep(Duration::from_secs(1)).await;
        let stopping = Instant::now();
        let status = relay.stop();
        let stop_took = stopping.elapsed();
        assert_eq!(status.code(), Some(0), "stopped while the broker was down; log tail:\n{}", relay.log_tail(30));
        assert!(stop_took < Duration::from_secs(15), "the stop took {stop_took:?} with task.shutdown.graceful.timeout.ms=5000");
        broker.start_again();
        relay.restart();
        tokio::time::sleep(Duration::from_secs(2)).await;
        let stats = load.stop().await;
        let sessions = relay.count(STREAMING);
        let extra = format!(
            "broker_restarts=3 published_again_after_restart=({}) stop_while_broker_down_took={} relay_sessions={sessions}",
            stats_line(&recoveries),
            ms(stop_took)
        );
        settle(name, &bed, &kinds, &mut relay, written(&stats), &extra).await;
        assert_eq!(relay.stop().code(), Some(0), "log tail:\n{}", relay.log_tail(30));
        bed.drop_slot().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_restarted_fast_and_immediate_under_load() {
    let name = "postgres_restarted_fast_and_immediate_under_load";
    bounded(name, Duration::from_secs(300), async {
        let seed = Rng::seed();
        let kinds = ["Order", "Customer"];
        let pg = PgCluster::start("pgrestart");
        let bed = Bed::new("pgrestart", pg.port, &Env::get().broker).await;
        bed.create_topics(&kinds, 2).await;
        let mut relay = RelayProc::start("pgrestart", &bed.config(&[]));
        relay.wait_count(STREAMING, 1, Duration::from_secs(30)).await;
        let load = Load::start(
            &bed,
            pg.port,
            LoadSpec { writers: 3, pause: Duration::from_millis(5), ..LoadSpec::default() },
            seed,
        );
        let mut figures = Vec::new();
        for mode in ["fast", "immediate"] {
            tokio::time::sleep(Duration::from_secs(3)).await;
            let sessions = relay.count(STREAMING);
            let stopping = Instant::now();
            pg.stop(mode);
            let stopped = stopping.elapsed();
            tokio::time::sleep(Duration::from_secs(1)).await;
            pg.start_again();
            let up = Instant::now();
            assert!(relay.running(), "the relay exited while PostgreSQL was down; log tail:\n{}", relay.log_tail(30));
            let streaming = relay.wait_count(STREAMING, sessions + 1, Duration::from_secs(90)).await;
            let published = bed.probe_round_trip(up, Duration::from_secs(90)).await;
            figures.push(format!(
                "{mode}: stop took {} streaming_again {} published_again {}",
                ms(stopped),
                ms(streaming),
                ms(published)
            ));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        let stats = load.stop().await;
        let extra = format!("[{}] in_doubt_rows={}", figures.join("; "), stats.get(|s| &s.failed));
        settle(name, &bed, &kinds, &mut relay, written(&stats), &extra).await;
        assert_eq!(relay.stop().code(), Some(0), "log tail:\n{}", relay.log_tail(30));
    })
    .await;
}

/// PostgreSQL before 17 keeps a logical slot's confirmed position on disk only now and then (when
/// its restart point moves), so a restart takes the slot back over confirmed work. The relay that
/// outlived the restart remembers what it confirmed on that server and resumes there: with every
/// event confirmed before each restart (fast, then immediate), nothing is published twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_restarted_replays_nothing_the_relay_confirmed() {
    let name = "postgres_restarted_replays_nothing_the_relay_confirmed";
    bounded(name, Duration::from_secs(240), async {
        let kinds = ["Order"];
        let pg = PgCluster::start("pgreplay");
        let bed = Bed::new("pgreplay", pg.port, &Env::get().broker).await;
        bed.create_topics(&kinds, 1).await;
        let mut relay = RelayProc::start("pgreplay", &bed.config(&[]));
        relay.wait_count(STREAMING, 1, Duration::from_secs(30)).await;
        let mut figures = Vec::new();
        for mode in ["fast", "immediate"] {
            let sql = bed.sql().await;
            for t in 0..100 {
                sql.batch_execute(&format!(
                    "INSERT INTO public.{} (id, aggregatetype, aggregateid, type, payload) \
                     SELECT gen_random_uuid(), '{}', 'agg-{t}', 'Created', '{{}}' FROM generate_series(1, 10)",
                    bed.table,
                    bed.agg("Order")
                ))
                .await
                .expect("write events");
            }
            let confirmed = bed.wait_confirmed_to_wal_end(&mut relay, Duration::from_secs(60)).await;
            let sessions = relay.count(STREAMING);
            pg.stop(mode);
            pg.start_again();
            relay.wait_count(STREAMING, sessions + 1, Duration::from_secs(90)).await;
            let published = bed.probe_round_trip(Instant::now(), Duration::from_secs(60)).await;
            figures.push(format!("{mode}: confirmed_before {} published_again {}", ms(confirmed), ms(published)));
        }
        let rows = bed.rows().await;
        let records = bed.read_back(&kinds, &rows, Duration::from_secs(60));
        let v = verify(&rows, &records, rows.len() as u64);
        println!("{}", v.line(name, &figures.join("; ")));
        assert!(v.missing.is_empty(), "missing {:?}", v.missing);
        assert_eq!(
            v.duplicates,
            0,
            "republished after a restart (e.g. {:?}); log tail:\n{}",
            v.duplicate_samples,
            relay.log_tail(20)
        );
        assert_eq!(relay.stop().code(), Some(0), "log tail:\n{}", relay.log_tail(30));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn network_cut_detected_and_recovered() {
    let name = "network_cut_detected_and_recovered";
    bounded(name, Duration::from_secs(300), async {
        let seed = Rng::seed();
        let kinds = ["Order", "Customer"];
        let pg = PgCluster::start("netcut");
        pg.set_wal_sender_timeout("5s").await;
        let pg_proxy = Proxy::start(([127, 0, 0, 1], pg.port).into()).await;
        let broker_port = free_port();
        let broker_proxy = Proxy::start(([127, 0, 0, 1], broker_port).into()).await;
        let broker = Broker::start_behind("netcut", broker_port, broker_proxy.port);
        let bed = Bed::new("netcut", pg.port, &broker.addr()).await;
        bed.create_topics(&kinds, 2).await;
        // librdkafka notices a silent broker when a request times out (socket.timeout.ms, 60 s by
        // default); 10 s keeps the scenario short.
        let config = bed.config_via(pg_proxy.port, &broker.addr(), &["producer.override.socket.timeout.ms=10000"]);
        let mut relay = RelayProc::start("netcut", &config);
        relay.wait_count(STREAMING, 1, Duration::from_secs(30)).await;
        let load = Load::start(
            &bed,
            pg.port,
            LoadSpec { writers: 2, pause: Duration::from_millis(10), ..LoadSpec::default() },
            seed,
        );
        let mut figures = Vec::new();
        for (what, proxy, stall) in [
            ("postgres reset", &pg_proxy, false),
            ("postgres stalled", &pg_proxy, true),
            ("broker reset", &broker_proxy, false),
            ("broker stalled", &broker_proxy, true),
        ] {
            tokio::time::sleep(Duration::from_secs(2)).await;
            let sessions = relay.count(STREAMING);
            let cut = if stall { proxy.stall_all() } else { proxy.reset_all() };
            let at = Instant::now();
            let published = bed.probe_round_trip(at, Duration::from_secs(120)).await;
            if stall {
                proxy.resume_all();
            }
            assert!(relay.running(), "the relay exited after {what}; log tail:\n{}", relay.log_tail(30));
            figures.push(format!(
                "{what} ({cut} conns): published_again {} sessions +{}",
                ms(published),
                relay.count(STREAMING) - sessions
            ));
        }
        let log = relay.log_text();
        assert!(
            log.contains("no message from PostgreSQL"),
            "the stalled PostgreSQL connection is detected as dead; log tail:\n{}",
            relay.log_tail(40)
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
        let stats = load.stop().await;
        let extra = format!("[{}]", figures.join("; "));
        settle(name, &bed, &kinds, &mut relay, written(&stats), &extra).await;
        assert_eq!(relay.stop().code(), Some(0), "log tail:\n{}", relay.log_tail(30));
    })
    .await;
}

/// `lsn.flush.timeout.ms` and `lsn.flush.timeout.action` (Debezium 3.2+) bound a status update the
/// server does not take. The proxy stalls the relay's connections to PostgreSQL (it stops reading
/// them, as a stuck walsender or a stalled network does), and status updates every millisecond
/// fill the socket buffers (the proxy's are small) within a second or two. Under `warn` the relay
/// says so and keeps waiting, streams on once the connection flows again, and stops at once when
/// told to; under the default `fail` it stops with exit 3, naming the key (before, the write was
/// waited for without a bound, and no warning ever came).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_status_update_the_server_does_not_take_stops_the_relay_or_warns_as_configured() {
    let name = "a_status_update_the_server_does_not_take_stops_the_relay_or_warns_as_configured";
    bounded(name, Duration::from_secs(240), async {
        let kinds = ["Order"];
        // A server of its own, with PostgreSQL's default wal_sender_timeout (60 s; the suite's is
        // 5 s): the relay does not take the stalled server's silence for a dead connection first.
        let pg = PgCluster::start("flushtimeout");
        pg.set_wal_sender_timeout("1min").await;
        let pg_proxy = Proxy::start_with_small_buffers(([127, 0, 0, 1], pg.port).into()).await;
        let bed = Bed::new("flushtimeout", pg.port, &Env::get().broker).await;
        bed.create_topics(&kinds, 1).await;
        let config = |action: &str| {
            bed.config_via(
                pg_proxy.port,
                &Env::get().broker,
                &[
                    "status.update.interval.ms=1",
                    "lsn.flush.timeout.ms=1000",
                    "task.shutdown.graceful.timeout.ms=2000",
                    &format!("lsn.flush.timeout.action={action}"),
                ],
            )
        };
        let mut relay = RelayProc::start("flushtimeout_warn", &config("warn"));
        relay.wait_count(STREAMING, 1, Duration::from_secs(30)).await;
        let stalled = Instant::now();
        assert!(pg_proxy.stall_all() > 0);
        let warning = "the status update confirming this position is not written yet";
        relay.wait_count(warning, 1, Duration::from_secs(60)).await;
        let warned_after = stalled.elapsed();
        assert!(relay.running(), "warn keeps the relay running; log tail:\n{}", relay.log_tail(20));
        pg_proxy.resume_all();
        // The stream goes on: an event written now is published, by this session or the next.
        let published = bed.probe_round_trip(Instant::now(), Duration::from_secs(90)).await;
        assert!(relay.running(), "log tail:\n{}", relay.log_tail(20));
        assert_eq!(relay.stop().code(), Some(0), "log tail:\n{}", relay.log_tail(30));
        // A stop while the server takes nothing is not held by the update the relay waits for. A
        // relay of its own, stalled right after it streams (before its first publication check,
        // which a stalled SQL connection would turn into a new session).
        let mut relay = RelayProc::start("flushtimeout_stop", &config("warn"));
        relay.wait_count(STREAMING, 1, Duration::from_secs(30)).await;
        assert!(pg_proxy.stall_all() > 0);
        relay.wait_count(warning, 1, Duration::from_secs(60)).await;
        let stopping = Instant::now();
        let code = relay.stop().code();
        let stop_took = stopping.elapsed();
        pg_proxy.resume_all();
        assert_eq!(code, Some(0), "a stop ends the relay cleanly; log tail:\n{}", relay.log_tail(30));
        assert!(stop_took < Duration::from_secs(15), "the stop took {stop_took:?}; log tail:\n{}", relay.log_tail(30));
        assert!(
            relay.log_text().contains("PostgreSQL took no final status update")
                || relay.log_text().contains("stopped while PostgreSQL took no status update"),
            "the stop says the position stayed; log tail:\n{}",
            relay.log_tail(30)
        );

        let mut relay = RelayProc::start("flushtimeout_fail", &config("fail"));
        relay.wait_count(STREAMING, 1, Duration::from_secs(30)).await;
        let stalled = Instant::now();
        assert!(pg_proxy.stall_all() > 0);
        while relay.running() {
            assert!(
                stalled.elapsed() < Duration::from_secs(60),
                "the relay kept running with its status updates unwritten; log tail:\n{}",
                relay.log_tail(20)
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let stopped_after = stalled.elapsed();
        pg_proxy.resume_all();
        let log = relay.log_text();
        assert!(
            log.contains("was not written to PostgreSQL within lsn.flush.timeout.ms (1000 ms)")
                && log.contains("lsn.flush.timeout.action=warn"),
            "the stop names the key and the way out; log tail:\n{}",
            relay.log_tail(20)
        );
        assert_eq!(relay.stop().code(), Some(3), "log tail:\n{}", relay.log_tail(20));
        println!(
            "{name}: warned {} after the stall, published again {} after it ended, a stop in a second stall took {}; stopped {} after the stall",
            ms(warned_after),
            ms(published),
            ms(stop_took),
            ms(stopped_after)
        );
    })
    .await;
}

/// A session that ends with a record in flight (the broker read the request but has not answered)
/// must not let that record land after the next session's resends of the same events. Here the
/// proxy holds what the relay sends on its broker connections (as a broker that took the requests
/// and has not processed them) while a session ends (its walsender is terminated,
/// and it stops waiting for acknowledgements after 1 s); the next session sends the event again
/// and a newer one of the same aggregate; then the held request is let through. The aggregate's
/// last record must be its newest event: a new producer per session let the old request land last
/// (A', B', A: run here before the fix). Then, on the same broker, the lost-slot guard over a slow
/// link (see below).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_request_held_from_an_ended_session_never_lands_after_the_next_sessions_records() {
    let name = "a_request_held_from_an_ended_session_never_lands_after_the_next_sessions_records";
    bounded(name, Duration::from_secs(180), async {
        let kinds = ["Order"];
        let broker_port = free_port();
        let proxy = Proxy::start(([127, 0, 0, 1], broker_port).into()).await;
        let broker = Broker::start_behind("heldrequest", broker_port, proxy.port);
        let bed = Bed::new("heldrequest", Env::get().pg_port, &broker.addr()).await;
        bed.create_topics(&kinds, 1).await;
        let mut relay = RelayProc::start("heldrequest", &bed.config(&["task.shutdown.graceful.timeout.ms=1000"]));
        relay.wait_count(STREAMING, 1, Duration::from_secs(30)).await;
        let sql = bed.sql().await;
        let insert = |n: i64| {
            format!(
                "INSERT INTO public.{} (id, aggregatetype, aggregateid, type, payload) VALUES (gen_random_uuid(), '{}', 'held', 'Event', '{{\"n\": {n}}}') RETURNING id::text",
                bed.table,
                bed.agg("Order")
            )
        };
        // A first event of the topic, published: the producer knows the partition's leader, so the
        // next one goes straight into a produce request.
        let first: String = sql.query_one(&insert(0), &[]).await.unwrap().get(0);
        let rows = bed.rows().await;
        bed.read_back(&kinds, &rows, Duration::from_secs(30));
        assert!(proxy.hold_requests() > 0, "the relay holds broker connections");
        let older: String = sql.query_one(&insert(1), &[]).await.unwrap().get(0);
        // The relay sends it into the held connection; then its session ends.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let walsender = bed.walsender_pid().await.expect("the relay's walsender");
        sql.execute("SELECT pg_terminate_backend($1)", &[&walsender]).await.unwrap();
        relay.wait_count(STREAMING, 2, Duration::from_secs(60)).await;
        let newer: String = sql.query_one(&insert(2), &[]).await.unwrap().get(0);
        // Long enough for the new session to publish both events, were it free to.
        tokio::time::sleep(Duration::from_secs(3)).await;
        proxy.release_requests();
        let rows = bed.rows().await;
        let records = bed.read_back(&kinds, &rows, Duration::from_secs(60));
        let held: Vec<String> = records
            .iter()
            .filter(|r| r.topic == bed.topic("Order"))
            .map(|r| String::from_utf8_lossy(r.header("id").unwrap_or_default()).into_owned())
            .map(|id| match id {
                _ if id == first => "first".to_string(),
                _ if id == older => "older".to_string(),
                _ if id == newer => "newer".to_string(),
                other => other,
            })
            .collect();
        println!("{name}: the aggregate's records in offset order: {held:?}");
        assert!(held.contains(&"older".to_string()), "the older event is missing: {held:?}");
        assert_eq!(
            held.last().map(String::as_str),
            Some("newer"),
            "a record of the ended session landed after the newer event; log tail:\n{}",
            relay.log_tail(30)
        );
        assert_eq!(relay.stop().code(), Some(0), "log tail:\n{}", relay.log_tail(30));

        // Issue 20, item 9, on the same broker: the slot is lost while the relay is stopped, and the
        // link to the broker is slow. The lost-slot guard must read the offsets topic to its end
        // however long the first answer takes: it once gave up after 400 ms without a record and
        // took the slot for never used, recreating it past what was committed meanwhile.
        bed.drop_slot().await;
        sql.query_one(&insert(3), &[]).await.unwrap();
        proxy.set_rate(4096);
        let restarted = Instant::now();
        relay.restart();
        while relay.running() && restarted.elapsed() < Duration::from_secs(60) {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let took = restarted.elapsed();
        let read = relay.log_text().lines().rev().find(|l| l.contains("for the slot's record")).map(str::to_string);
        println!("{name}: with the broker at 4 KiB/s the relay found the lost slot in {}; {read:?}", ms(took));
        assert_eq!(relay.stop().code(), Some(8), "the lost slot went unnoticed; log tail:\n{}", relay.log_tail(30));
        assert!(relay.log_text().contains("streamed from it before"), "log tail:\n{}", relay.log_tail(30));
        assert!(bed.confirmed().await.is_none(), "no slot was created");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn standby_takes_over_when_active_relay_dies() {
    let name = "standby_takes_over_when_active_relay_dies";
    bounded(name, Duration::from_secs(180), async {
        let seed = Rng::seed();
        let kinds = ["Order", "Customer"];
        let bed = Bed::shared("standby").await;
        bed.create_topics(&kinds, 2).await;
        // Rows for the active relay's initial snapshot.
        let prefilled = 20_000;
        bed.prefill("Order", prefilled).await;
        let config = bed.config(&[]);
        let mut active = RelayProc::start("active", &config);
        active.wait_count(STREAMING, 1, Duration::from_secs(60)).await;
        let mut standby = RelayProc::start("standby", &config);
        standby.wait_count(STANDING_BY, 1, Duration::from_secs(30)).await;
        let load = Load::start(
            &bed,
            bed.pg_port,
            LoadSpec { writers: 2, pause: Duration::from_millis(5), ..LoadSpec::default() },
            seed,
        );
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(standby.count(STREAMING), 0, "the standby must not stream while the active relay does");
        assert!(standby.running());
        let mut watcher = bed.probe_watcher();
        active.kill9();
        let killed = Instant::now();
        let probe = bed.probe().await;
        let streaming = standby.wait_count(STREAMING, 1, Duration::from_secs(60)).await;
        let published = watcher.wait(&probe, killed, Duration::from_secs(60));
        tokio::time::sleep(Duration::from_secs(2)).await;
        let stats = load.stop().await;
        let extra = format!(
            "takeover: standby_streaming_after_kill={} next_event_published_after_kill={}",
            ms(streaming),
            ms(published)
        );
        settle(name, &bed, &kinds, &mut standby, written(&stats) + prefilled as u64, &extra).await;
        assert_eq!(bed.other_slots().await, Vec::<String>::new(), "no staging slot left behind to hold WAL");
        assert_eq!(standby.stop().code(), Some(0), "log tail:\n{}", standby.log_tail(30));
        bed.drop_slot().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn relays_started_together_on_a_new_slot_one_stands_by() {
    let name = "relays_started_together_on_a_new_slot_one_stands_by";
    bounded(name, Duration::from_secs(240), async {
        // Two replicas of a deployment start at once on a slot that does not exist yet, with rows for
        // the initial snapshot: one must take the slot (and the snapshot), the other stand by;
        // neither may exit. Rounds with the publication created by the operator beforehand and
        // rounds where the relays create it; several of each, as the outcome depends on timing.
        let kinds = ["Order"];
        let prefilled = 20_000;
        let mut failures = Vec::new();
        for (round, precreate) in [true, true, false, false].into_iter().enumerate() {
            let bed = Bed::shared("together").await;
            bed.create_topics(&kinds, 2).await;
            if precreate {
                bed.sql()
                    .await
                    .batch_execute(&format!("CREATE PUBLICATION {} FOR TABLE public.{}", bed.publication, bed.table))
                    .await
                    .unwrap();
            }
            bed.prefill("Order", prefilled).await;
            let outcome = match start_pair_together(&bed).await {
                Ok((mut active, mut standby)) => {
                    bed.probe_round_trip(Instant::now(), Duration::from_secs(30)).await;
                    settle(name, &bed, &kinds, &mut active, prefilled as u64, &format!("round={round}")).await;
                    let leftover = bed.other_slots().await;
                    assert_eq!(active.stop().code(), Some(0), "log tail:\n{}", active.log_tail(30));
                    assert_eq!(standby.stop().code(), Some(0), "log tail:\n{}", standby.log_tail(30));
                    if leftover.is_empty() {
                        Ok(())
                    } else {
                        Err(format!("slots left behind, holding WAL: {leftover:?}"))
                    }
                }
                Err(e) => Err(e),
            };
            let what = if precreate { "publication created beforehand" } else { "relays create the publication" };
            if let Err(e) = outcome {
                failures.push(format!("round {round} ({what}): {e}"));
            }
            // What a failed round left behind (a staging slot) must not hold WAL for the next ones.
            for slot in bed.other_slots().await {
                let _ = bed.sql().await.execute("SELECT pg_drop_replication_slot($1)", &[&slot]).await;
            }
            bed.drop_slot().await;
        }
        println!("{name}: rounds=4 failed={}", failures.len());
        assert!(failures.is_empty(), "{} of 4 rounds failed:\n{}", failures.len(), failures.join("\n\n"));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn second_relay_killed_during_first_relays_snapshot_loses_nothing() {
    let name = "second_relay_killed_during_first_relays_snapshot_loses_nothing";
    bounded(name, Duration::from_secs(240), async {
        // Relay A takes the initial snapshot of a large outbox; rows are committed after its
        // snapshot point; a second instance B starts (a second replica, a restart overlapping the
        // old process) and is killed during its own snapshot. Whatever slot A ends up streaming
        // from, the rows committed after A's snapshot point must be published.
        let kinds = ["Order"];
        let bed = Bed::shared("snaprace").await;
        bed.create_topics(&kinds, 2).await;
        let prefilled = env_usize("PGOUTBOX_FAULTS_SNAPSHOT_ROWS", 60_000) as i64;
        bed.prefill("Order", prefilled).await;
        let config = bed.config(&[]);
        let mut a = RelayProc::start("snap_a", &config);
        a.wait_count("snapshot: reading existing rows", 1, Duration::from_secs(60)).await;
        let sql = bed.sql().await;
        let after_snapshot_point = 100;
        for i in 0..after_snapshot_point {
            sql.batch_execute(&format!(
                "INSERT INTO public.{} (id, aggregatetype, aggregateid, type, payload) VALUES (gen_random_uuid(), '{}', 'late-{i}', 'Late', '{{}}')",
                bed.table,
                bed.agg("Order")
            ))
            .await
            .unwrap();
        }
        let a_done_early = a.count(SNAPSHOT_DONE) > 0;
        let mut b = RelayProc::start("snap_b", &config);
        // B is killed as soon as it has its own staging slot (or once it stands by or fails).
        let start = Instant::now();
        while b.count(SNAPSHOT_STARTED) == 0 && b.count(STANDING_BY) == 0 && b.running() && start.elapsed() < Duration::from_secs(30) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let b_outcome = if b.count(SNAPSHOT_STARTED) > 0 { "B created a staging slot" } else if b.running() { "B stood by" } else { "B exited" };
        b.kill9();
        let b_log = b.log_tail(5);
        a.wait_count(STREAMING, 1, Duration::from_secs(120)).await;
        bed.probe_round_trip(Instant::now(), Duration::from_secs(60)).await;
        let extra = format!("prefilled={prefilled} committed_after_a_snapshot_point={after_snapshot_point} a_done_before_b={a_done_early} {b_outcome}");
        let rows = bed.rows().await;
        let records = bed.read_back(&kinds, &rows, Duration::from_secs(30));
        let v = verify(&rows, &records, prefilled as u64 + after_snapshot_point + 1);
        println!("{}", v.line(name, &extra));
        let leftover = bed.other_slots().await;
        for slot in &leftover {
            let _ = sql.execute("SELECT pg_drop_replication_slot($1)", &[slot]).await;
        }
        v.assert_clean(&format!("{}\n--- B:\n{b_log}", a.log_tail(20)));
        assert_eq!(leftover, Vec::<String>::new(), "no staging slot left behind to hold WAL");
        assert_eq!(a.stop().code(), Some(0), "log tail:\n{}", a.log_tail(30));
        bed.drop_slot().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn huge_transaction_published_with_bounded_memory() {
    let name = "huge_transaction_published_with_bounded_memory";
    bounded(name, Duration::from_secs(480), async {
        let n = env_usize("PGOUTBOX_FAULTS_HUGE_ROWS", 1_000_000) as i64;
        let kinds = ["Order"];
        let bed = Bed::shared("huge").await;
        bed.create_topics(&kinds, 3).await;
        let strings = ["key.converter=org.apache.kafka.connect.storage.StringConverter", "value.converter=org.apache.kafka.connect.storage.StringConverter"];
        let mut relay = RelayProc::start("huge", &bed.config(&strings));
        relay.wait_count(STREAMING, 1, Duration::from_secs(30)).await;
        let pid = relay.pid().unwrap();
        let rss = RssWatch::start(pid);
        let start = Instant::now();
        bed.sql()
            .await
            .batch_execute(&format!(
                "BEGIN; INSERT INTO public.{b} (writer, n, note) VALUES (0, 0, 'bulk import'); \
                 INSERT INTO public.{t} (id, aggregatetype, aggregateid, type, payload) \
                 SELECT gen_random_uuid(), '{agg}', 'agg-' || (g % 1000), 'Imported', jsonb_build_object('g', g) FROM generate_series(1, {n}) g; COMMIT;",
                b = bed.business,
                t = bed.table,
                agg = bed.agg("Order")
            ))
            .await
            .expect("the huge transaction commits");
        let committed = start.elapsed();
        let acked = bed.wait_confirmed_to_wal_end(&mut relay, Duration::from_secs(400)).await;
        let hwm_mb = status_kb(pid, "VmHWM").unwrap_or(0) as f64 / 1024.0;
        let peak_mb = rss.peak_mb().max(hwm_mb);
        drop(rss);
        let extra = format!(
            "rows_in_one_transaction={n} commit_took={:.1}s all_acknowledged_after_commit={:.1}s relay_peak_rss={peak_mb:.0}MB (VmHWM {hwm_mb:.0}MB)",
            committed.as_secs_f64(),
            acked.as_secs_f64()
        );
        let v = settle(name, &bed, &kinds, &mut relay, n as u64, &extra).await;
        assert_eq!(v.committed as i64, n);
        assert!(peak_mb < RSS_LIMIT_MB, "relay peak RSS {peak_mb:.0} MB exceeds {RSS_LIMIT_MB} MB");
        assert_eq!(relay.stop().code(), Some(0), "log tail:\n{}", relay.log_tail(30));
        bed.drop_slot().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn slow_broker_keeps_memory_bounded_and_postgres_alive() {
    let name = "slow_broker_keeps_memory_bounded_and_postgres_alive";
    bounded(name, Duration::from_secs(300), async {
        const RATE: u64 = 300 * 1024;
        const THROTTLED: Duration = Duration::from_secs(25);
        let backlog = env_usize("PGOUTBOX_FAULTS_BACKLOG", 30_000) as i64;
        let kinds = ["Order"];
        let pg = PgCluster::start("slowbroker");
        // The server drops a replication connection silent for this long: the relay must keep
        // sending status updates while the broker holds it back.
        pg.set_wal_sender_timeout("5s").await;
        let broker_port = free_port();
        let proxy = Proxy::start(([127, 0, 0, 1], broker_port).into()).await;
        let broker = Broker::start_behind("slowbroker", broker_port, proxy.port);
        let bed = Bed::new("slowbroker", pg.port, &broker.addr()).await;
        bed.create_topics(&kinds, 2).await;
        let mut relay = RelayProc::start("slowbroker", &bed.config(&["value.converter=org.apache.kafka.connect.storage.StringConverter"]));
        relay.wait_count(STREAMING, 1, Duration::from_secs(30)).await;
        let pid = relay.pid().unwrap();
        let rss = RssWatch::start(pid);
        let walsender = bed.walsender_pid().await.expect("the relay's walsender");
        proxy.set_rate(RATE);
        let sql = bed.sql().await;
        let per_tx = 500;
        for first in (0..backlog).step_by(per_tx) {
            let last = (first + per_tx as i64).min(backlog);
            sql.batch_execute(&format!(
                "BEGIN; INSERT INTO public.{b} (writer, n, note) VALUES (0, {first}, 'batch'); \
                 INSERT INTO public.{t} (id, aggregatetype, aggregateid, type, payload) \
                 SELECT gen_random_uuid(), '{agg}', 'agg-' || (g % 50), 'Created', jsonb_build_object('g', g, 'pad', repeat('p', 1000)) FROM generate_series({}, {}) g; COMMIT;",
                first + 1,
                last,
                b = bed.business,
                t = bed.table,
                agg = bed.agg("Order"),
            ))
            .await
            .unwrap();
        }
        let wal_end = bed.wal_end().await;
        let throttled_since = Instant::now();
        let mut max_unsent = 0i64;
        while throttled_since.elapsed() < THROTTLED {
            assert_eq!(bed.walsender_pid().await, Some(walsender), "the replication connection was replaced while the broker was slow; log tail:\n{}", relay.log_tail(30));
            let unsent: Option<i64> = sql
                .query_one(&format!("SELECT (pg_current_wal_lsn() - sent_lsn)::bigint FROM pg_stat_replication WHERE pid = {walsender}"), &[])
                .await
                .ok()
                .and_then(|r| r.get(0));
            max_unsent = max_unsent.max(unsent.unwrap_or(0));
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let confirmed_at_lift = bed.confirmed().await;
        assert!(confirmed_at_lift.is_some_and(|c| c < wal_end), "the backlog drained while throttled: the broker was not slow enough to test anything");
        let forwarded_mb = proxy.forwarded() as f64 / (1024.0 * 1024.0);
        proxy.set_rate(0);
        let drained = bed.wait_confirmed_to_wal_end(&mut relay, Duration::from_secs(120)).await;
        assert_eq!(bed.walsender_pid().await, Some(walsender), "the replication connection survived the slow broker");
        let peak_mb = rss.peak_mb();
        drop(rss);
        let log = relay.log_text();
        assert!(!log.contains("reconnecting"), "no reconnect while the broker was slow; log tail:\n{}", relay.log_tail(30));
        let extra = format!(
            "backlog={backlog} throttle={}KB/s for {}s ({forwarded_mb:.1}MB through) max_wal_held_on_server={:.1}MB drained_after_unthrottle={:.1}s relay_peak_rss={peak_mb:.0}MB walsender_unchanged=yes",
            RATE / 1024,
            THROTTLED.as_secs(),
            max_unsent as f64 / (1024.0 * 1024.0),
            drained.as_secs_f64()
        );
        settle(name, &bed, &kinds, &mut relay, backlog as u64, &extra).await;
        assert!(peak_mb < RSS_LIMIT_MB, "relay peak RSS {peak_mb:.0} MB exceeds {RSS_LIMIT_MB} MB");
        assert_eq!(relay.stop().code(), Some(0), "log tail:\n{}", relay.log_tail(30));
    })
    .await;
}

/// The same fast shutdown while Kafka is down and events wait for acknowledgement: the relay cannot
/// confirm what the server sent, and answering the server's pings kept the walsender (and so the
/// shutdown) waiting for as long as Kafka stayed away. Now the relay notices that the server ended
/// its SQL session and ends the stream; nothing unacknowledged was confirmed, so once PostgreSQL and
/// Kafka are back every event is delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_fast_shutdown_is_not_held_while_kafka_is_down() {
    let name = "postgres_fast_shutdown_is_not_held_while_kafka_is_down";
    bounded(name, Duration::from_secs(180), async {
        let kinds = ["Order"];
        let pg = PgCluster::start("fastshutdown_kafka_down");
        let broker = Broker::start("fastshutdown_kafka_down");
        let bed = Bed::new("fastshutdown_kafka_down", pg.port, &broker.addr()).await;
        bed.create_topics(&kinds, 1).await;
        // A small producer queue, so that with Kafka down the whole pipeline backs up to the reader
        // quickly (it then holds a batch it cannot hand over, as under any long outage).
        let config = bed
            .config(&["task.shutdown.graceful.timeout.ms=5000", "producer.override.queue.buffering.max.messages=10"])
            .replace("status.update.interval.ms=500", "status.update.interval.ms=10000");
        let mut relay = RelayProc::start("fastshutdown_kafka_down", &config);
        relay.wait_count(STREAMING, 1, Duration::from_secs(30)).await;
        bed.prefill("Order", 5).await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        broker.crash();
        for _ in 0..8 {
            bed.prefill("Order", 1000).await;
        }
        let rows = bed.rows().await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        let stopping = Instant::now();
        pg.stop("fast");
        let stopped = stopping.elapsed();
        println!("{name}: pg_ctl stop -m fast with Kafka down took {}", ms(stopped));
        assert!(
            stopped < Duration::from_secs(10),
            "the fast shutdown waited {stopped:?} for the relay; log tail:\n{}",
            relay.log_tail(20)
        );
        assert!(relay.running(), "the relay keeps retrying; log tail:\n{}", relay.log_tail(20));
        pg.start_again();
        broker.start_again();
        let records = bed.read_back(&kinds, &rows, Duration::from_secs(90));
        let missing = verify(&rows, &records, rows.len() as u64).missing;
        assert!(missing.is_empty(), "missing after recovery: {missing:?}; log tail:\n{}", relay.log_tail(30));
        assert_eq!(relay.stop().code(), Some(0), "log tail:\n{}", relay.log_tail(30));
        bed.drop_slot().await;
    })
    .await;
}

/// `pg_ctl stop -m fast` (and a switchover) waits until every walsender's client confirmed all it
/// was sent. The relay answered the server's shutdown ping with the position confirmed before it
/// had processed that ping, then stayed silent for a status interval (10 s by default): the
/// shutdown waited for it. The confirmed position must go out as soon as it moves.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_fast_shutdown_is_not_held_by_an_idle_relay() {
    let name = "postgres_fast_shutdown_is_not_held_by_an_idle_relay";
    bounded(name, Duration::from_secs(120), async {
        let kinds = ["Order"];
        let pg = PgCluster::start("fastshutdown");
        let bed = Bed::new("fastshutdown", pg.port, &Env::get().broker).await;
        bed.create_topics(&kinds, 1).await;
        // Debezium's default status interval, instead of the test beds' 500 ms.
        let config = bed.config(&[]).replace("status.update.interval.ms=500", "status.update.interval.ms=10000");
        let mut relay = RelayProc::start("fastshutdown", &config);
        relay.wait_count(STREAMING, 1, Duration::from_secs(30)).await;
        bed.prefill("Order", 10).await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        let stopping = Instant::now();
        pg.stop("fast");
        let stopped = stopping.elapsed();
        println!("{name}: pg_ctl stop -m fast took {}", ms(stopped));
        assert!(stopped < Duration::from_secs(5), "the fast shutdown waited {stopped:?} for the relay");
        pg.start_again();
        let _ = relay.stop();
    })
    .await;
}

/// The leader and replicas of `topic`'s partition `partition`, as the cluster's metadata says.
fn partition_layout(bootstrap: &str, topic: &str, partition: i32) -> (i32, Vec<i32>) {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    let c: BaseConsumer = rdkafka::ClientConfig::new().set("bootstrap.servers", bootstrap).create().expect("a client");
    let md = c.fetch_metadata(Some(topic), Duration::from_secs(10)).expect("metadata");
    let p = md.topics()[0].partitions().iter().find(|p| p.id() == partition).expect("the partition");
    (p.leader(), p.replicas().to_vec())
}

/// `topic`'s replication factor and cleanup policy, from the cluster.
async fn topic_shape(bootstrap: &str, topic: &str) -> (usize, usize, String) {
    use rdkafka::admin::{AdminClient, AdminOptions, ResourceSpecifier};
    use rdkafka::client::DefaultClientContext;
    let b = bootstrap.to_string();
    let t = topic.to_string();
    let (partitions, replicas) = tokio::task::spawn_blocking(move || {
        use rdkafka::consumer::{BaseConsumer, Consumer};
        let c: BaseConsumer = rdkafka::ClientConfig::new().set("bootstrap.servers", &b).create().unwrap();
        let md = c.fetch_metadata(Some(&t), Duration::from_secs(10)).unwrap();
        let parts = md.topics()[0].partitions();
        (parts.len(), parts.first().map_or(0, |p| p.replicas().len()))
    })
    .await
    .unwrap();
    let admin: AdminClient<DefaultClientContext> =
        rdkafka::ClientConfig::new().set("bootstrap.servers", bootstrap).create().unwrap();
    let described = admin.describe_configs([&ResourceSpecifier::Topic(topic)], &AdminOptions::new()).await.unwrap();
    let policy = described[0]
        .as_ref()
        .ok()
        .and_then(|r| r.get("cleanup.policy"))
        .and_then(|e| e.value.clone())
        .unwrap_or_default();
    (partitions, replicas, policy)
}

/// What only a real cluster shows, on three Kafka nodes (replication factor 3,
/// `min.insync.replicas=2`) under an application workload: the relay's offsets topic is created
/// replicated and compacted; a broker SIGKILLed, a rolling restart of all three, and a partition's
/// leader moved by reassignment lose nothing, keep each aggregate's order, and never stop the relay;
/// with two of three down (below `min.insync.replicas`, and the controller quorum gone with them) it
/// warns, holds its confirmed position, and resumes when they return.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_kafka_brokers_killed_rolled_reassigned_and_two_down_lose_nothing() {
    let name = "three_kafka_brokers_killed_rolled_reassigned_and_two_down_lose_nothing";
    bounded(name, Duration::from_secs(600), async {
        let seed = Rng::seed();
        let kinds = ["Order", "Customer"];
        let broker = Broker::start_nodes("threebrokers", 3);
        let bed = Bed::new("threebrokers", Env::get().pg_port, &broker.addr()).await;
        bed.create_topics(&kinds, 3).await;
        // The relay logs in over SASL_SSL with SCRAM (as on MSK or Confluent Platform), so every
        // kill, roll and return below also makes it authenticate again (and the broker's
        // `connections.max.reauth.ms` of 15 s ends its sessions meanwhile): a handshake that fails
        // while a broker restarts must not stop it (issue 20, item 18).
        let sasl = [
            "security.protocol=SASL_SSL".to_string(),
            "sasl.mechanism=SCRAM-SHA-512".to_string(),
            format!(
                r#"sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="{}";"#,
                broker.env("ALICE_PASSWORD")
            ),
            format!("ssl.truststore.location={}", broker.dir.join("tls/ca.pem").display()),
            "ssl.truststore.type=PEM".to_string(),
            "task.shutdown.graceful.timeout.ms=5000".to_string(),
        ];
        let sasl: Vec<&str> = sasl.iter().map(String::as_str).collect();
        let mut relay = RelayProc::start("threebrokers", &bed.config_via(bed.pg_port, &broker.env("SASL_SSL"), &sasl));
        relay.wait_count(STREAMING, 1, Duration::from_secs(60)).await;
        // No offset.storage.replication.factor: Connect's 3, compacted, Connect's 25 partitions (in
        // the topic the config names, under PGOUTBOX_FAULTS_EXACTLY_ONCE one of its own).
        let config = std::fs::read_to_string(relay.config_path()).unwrap();
        let offsets =
            config.lines().find_map(|l| l.strip_prefix("offset.storage.topic=")).unwrap_or("pgoutbox-offsets");
        let (partitions, replicas, policy) = topic_shape(&broker.addr(), offsets).await;
        assert_eq!((partitions, replicas, policy.as_str()), (25, 3, "compact"), "the offsets topic's shape");
        let load = Load::start(
            &bed,
            bed.pg_port,
            LoadSpec { writers: 3, pause: Duration::from_millis(5), ..LoadSpec::default() },
            seed,
        );
        let mut figures = Vec::new();

        // One broker SIGKILLed: leaders move to the other two; min.insync.replicas=2 still holds.
        tokio::time::sleep(Duration::from_secs(3)).await;
        broker.stop_node(2, "kill");
        let down = Instant::now();
        let published = bed.probe_round_trip(down, Duration::from_secs(120)).await;
        assert!(relay.running(), "the relay exited with a broker down; log tail:\n{}", relay.log_tail(30));
        broker.start_node(2);
        figures.push(format!("one_killed: published_again {}", ms(published)));

        // A rolling restart, one broker at a time, each waited for.
        for id in 1..=3 {
            tokio::time::sleep(Duration::from_secs(3)).await;
            broker.stop_node(id, "term");
            let at = Instant::now();
            let published = bed.probe_round_trip(at, Duration::from_secs(120)).await;
            broker.start_node(id);
            assert!(relay.running(), "the relay exited in the rolling restart; log tail:\n{}", relay.log_tail(30));
            figures.push(format!("roll_{id}: published_again {}", ms(published)));
        }

        // A partition's leader moved by Kafka's reassignment tool, onto the two other brokers.
        tokio::time::sleep(Duration::from_secs(5)).await;
        let topic = bed.topic("Order");
        let (leader, _) = tokio::task::block_in_place(|| partition_layout(&broker.addr(), &topic, 0));
        let others: Vec<i32> = (1..=3).filter(|&b| b != leader).collect();
        let at = Instant::now();
        tokio::task::block_in_place(|| broker.reassign(&topic, 0, &others));
        let (new_leader, new_replicas) = tokio::task::block_in_place(|| partition_layout(&broker.addr(), &topic, 0));
        assert_ne!(new_leader, leader, "the reassignment moved the leader");
        assert_eq!(new_replicas, others);
        let published = bed.probe_round_trip(at, Duration::from_secs(120)).await;
        figures.push(format!("reassigned {leader}->{new_leader}: published_again {}", ms(published)));

        // Two of three down: nothing can be acknowledged. The relay keeps running, warns, and the
        // slot's confirmed position stays where it was.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let warnings_before = relay.count("for an acknowledgement");
        broker.stop_node(2, "kill");
        broker.stop_node(3, "kill");
        let down = Instant::now();
        tokio::time::sleep(Duration::from_secs(8)).await;
        let held = bed.confirmed().await;
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert!(relay.running(), "the relay exited with two brokers down; log tail:\n{}", relay.log_tail(30));
        assert_eq!(bed.confirmed().await, held, "the confirmed position moved while nothing could be acknowledged");
        assert!(
            relay.count("for an acknowledgement") > warnings_before,
            "no warning that acknowledgements stopped; log tail:\n{}",
            relay.log_tail(30)
        );
        broker.start_node(2);
        broker.start_node(3);
        let up = Instant::now();
        let published = bed.probe_round_trip(up, Duration::from_secs(180)).await;
        figures.push(format!("two_down {:.0}s: published_again {}", (up - down).as_secs_f64(), ms(published)));

        tokio::time::sleep(Duration::from_secs(2)).await;
        let stats = load.stop().await;
        // Refusals seen once and not confirmed (a handshake failed while a broker restarted).
        figures.push(format!("login refusals seen once: {}", relay.count("confirming in")));
        settle(name, &bed, &kinds, &mut relay, written(&stats), &format!("[{}]", figures.join("; "))).await;
        assert_eq!(relay.stop().code(), Some(0), "log tail:\n{}", relay.log_tail(30));
        bed.drop_slot().await;
    })
    .await;
}

/// The message outbox under the seed's faults: every outbox INSERT of the application also emits
/// its event as a transactional logical decoding message (a trigger, in the same transaction), and
/// the relay captures the messages only (`no_tables`), so the table is the ledger of what was
/// committed, which the messages must match. The relay is SIGKILLed at random moments, the load
/// rolls back one transaction in eight, and the application dies between its writes and its commit
/// (its backend terminated, its `psql` killed): no message of a dead transaction is published,
/// none committed is missing, per aggregate in commit order.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn message_outbox_relay_killed_and_application_crashing_loses_nothing() {
    let name = "message_outbox_relay_killed_and_application_crashing_loses_nothing";
    bounded(name, Duration::from_secs(240), async {
        let seed = Rng::seed();
        let mut rng = Rng::new(seed);
        let kinds = ["Order", "Customer"];
        let bed = Bed::shared("msgkill").await;
        bed.create_topics(&kinds, 3).await;
        let prefix = format!("outbox_{}", bed.slot);
        let t = &bed.table;
        bed.sql()
            .await
            .batch_execute(&format!(
                "CREATE FUNCTION public.{t}_emit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
                 PERFORM pg_logical_emit_message(true, '{prefix}', json_build_object('id', NEW.id, 'aggregatetype', NEW.aggregatetype, \
                 'aggregateid', NEW.aggregateid, 'type', NEW.type, 'payload', NEW.payload)::text); RETURN NEW; END $$; \
                 CREATE TRIGGER {t}_emit AFTER INSERT ON public.{t} FOR EACH ROW EXECUTE FUNCTION public.{t}_emit()"
            ))
            .await
            .expect("the trigger that emits each outbox row as a message");
        let include = format!("message.prefix.include.list={prefix}");
        let config = bed.config(&[
            "publication.autocreate.mode=no_tables",
            "table.include.list=",
            "transforms=decode,outbox",
            "transforms.decode.type=io.debezium.connector.postgresql.transforms.DecodeLogicalDecodingMessageContent",
            &include,
        ]);
        let mut relay = RelayProc::start("msgkill", &config);
        relay.wait_count(STREAMING, 1, Duration::from_secs(30)).await;
        let load = Load::start(&bed, bed.pg_port, LoadSpec::default(), seed);
        let admin = bed.sql().await;
        let kills = env_usize("PGOUTBOX_FAULTS_MESSAGE_KILLS", 6);
        let (mut recoveries, mut doomed_rows) = (Vec::new(), 0u64);
        for round in 0..kills {
            tokio::time::sleep(rng.millis(100, 1500)).await;
            // Every other round, the application dies mid-transaction while the relay is down.
            let doomed = match round % 2 {
                0 => Some(crash::doomed_transaction(&bed, 3, &format!("msg_doomed_{round}")).await),
                _ => None,
            };
            relay.kill9();
            let killed = Instant::now();
            if let Some((app, pid, ids)) = doomed {
                doomed_rows += ids.len() as u64;
                let ok: bool = admin.query_one("SELECT pg_terminate_backend($1)", &[&pid]).await.unwrap().get(0);
                assert!(ok && app.batch_execute("COMMIT").await.is_err(), "a terminated backend cannot commit");
            }
            let sessions = relay.count(STREAMING);
            relay.restart();
            relay.wait_count(STREAMING, sessions + 1, Duration::from_secs(60)).await;
            recoveries.push(killed.elapsed());
        }
        let psql_gone = crash::psql_killed_mid_transaction(&bed, 2, &format!("msg_psql_{}", std::process::id())).await;
        doomed_rows += 2;
        let (stats, last) = wind_down(&bed, load).await;
        let extra = format!(
            "kills={kills} streaming_again_after_kill=({}) doomed_rows={doomed_rows} psql_backend_gone_after_kill={} final_probe={} seed={seed}",
            stats_line(&recoveries),
            ms(psql_gone),
            ms(last)
        );
        let v = settle(name, &bed, &kinds, &mut relay, written(&stats) + doomed_rows, &extra).await;
        assert!(v.committed > 500, "the load committed too little to mean anything: {}", v.committed);
        assert_eq!(relay.stop().code(), Some(0), "log tail:\n{}", relay.log_tail(30));
        bed.drop_slot().await;
    })
    .await;
}

/// Confluent's AvroConverter through Apicurio's Confluent-compatible API, with expanded payloads so
/// that a new payload shape needs a new schema. The registry stops answering (SIGSTOP: connections
/// hang, as behind a dead load balancer) just before a row of a new shape: nothing from that row on
/// is published, the slot's confirmed position stays before it, the relay logs why and keeps
/// running; once the registry answers (SIGCONT) the rows arrive in order, their ids naming the
/// schemas of their payloads. Then the subject gets a BACKWARD rule and a row whose payload changes
/// a field's type from the latest version's: the relay stops with exit code 6, naming the subject
/// and the registry's reason, and the position stays before that row.
#[tokio::test(flavor = "multi_thread")]
async fn a_registry_that_stops_answering_holds_the_position_and_an_incompatible_schema_stops_the_relay() {
    let registry = faults_support::registry::Registry::start("down");
    let outbox = support::Outbox::new("registry_down").await;
    outbox.create_topics(&["Order"], 1).await;
    let topic = outbox.topic("Order");
    let ccompat = format!("{}/apis/ccompat/v7", registry.url);
    let config = outbox.config(&[
        "key.converter=org.apache.kafka.connect.storage.StringConverter",
        "value.converter=io.confluent.connect.avro.AvroConverter",
        &format!("value.converter.schema.registry.url={ccompat}"),
        "transforms.outbox.table.expand.json.payload=true",
    ]);
    let mut relay = support::Relay::start_streaming(&config);
    let sql = outbox.env.sql().await;
    sql.batch_execute(&outbox.insert_sql("Order", "a-1", Some(r#"{"n": 1}"#))).await.unwrap();
    let first = support::consume(&outbox.env.broker, std::slice::from_ref(&topic), 1, Duration::from_secs(30));
    assert_eq!(first.len(), 1, "log:\n{}", relay.log_text());
    let n_int = registry.schema(faults_support::registry::confluent_id(first[0].value.as_deref().unwrap()));
    assert!(n_int.contains(r#"{"name":"n","type":["null","int"],"default":null}"#), "{n_int}");

    // The registry stops answering; a row of a new shape, then one of the known shape.
    registry.signal("STOP");
    let before = faults_support::registry::lsn(&outbox).await;
    sql.batch_execute(&outbox.insert_sql("Order", "a-1", Some(r#"{"m": "x"}"#))).await.unwrap();
    sql.batch_execute(&outbox.insert_sql("Order", "a-1", Some(r#"{"n": 2}"#))).await.unwrap();
    let stopped = Instant::now();
    relay.wait_for_log("did not answer for subject", Duration::from_secs(60));
    println!("registry down: the relay said so after {:.1} s", stopped.elapsed().as_secs_f64());
    // Long enough for several status intervals (500 ms here) and a retry.
    tokio::time::sleep(Duration::from_secs(15)).await;
    let held = support::consume_until_idle(&outbox.env.broker, std::slice::from_ref(&topic), Duration::from_secs(2));
    assert_eq!(held.len(), 1, "published while the registry was down:\n{}", relay.log_text());
    let confirmed = outbox.confirmed_flush().await.expect("the slot");
    assert!(
        faults_support::registry::lsn_value(&confirmed) <= faults_support::registry::lsn_value(&before),
        "the slot was confirmed at {confirmed}, past {before}, where the row waiting for the registry starts"
    );
    assert!(relay.wait(Duration::from_millis(10)).is_none(), "the relay must wait for the registry, not exit");

    registry.signal("CONT");
    let all = support::consume(&outbox.env.broker, std::slice::from_ref(&topic), 3, Duration::from_secs(90));
    assert_eq!(all.len(), 3, "after the registry came back; log:\n{}", relay.log_text());
    let m = registry.schema(faults_support::registry::confluent_id(all[1].value.as_deref().unwrap()));
    assert!(m.contains(r#""name":"m""#), "the second record names {m}");
    assert_eq!(registry.schema(faults_support::registry::confluent_id(all[2].value.as_deref().unwrap())), n_int);
    assert!(relay.log_text().contains("schema registry: schema registered"), "the recovery is logged");

    // An incompatible change under a BACKWARD rule.
    let subject = format!("{topic}-value");
    let (code, body) =
        registry.call("PUT", &format!("/apis/ccompat/v7/config/{subject}"), r#"{"compatibility":"BACKWARD"}"#);
    assert_eq!(code, 200, "setting the rule: {body}");
    // The latest version is the `m` string shape: `m` as a number cannot read it. The bound is taken
    // inside the row's transaction, just before its commit: a confirmed position may pass the INSERT
    // (a keepalive while other sessions' WAL flushed it before its commit) and stay safe, since
    // PostgreSQL sends again every transaction that commits after the slot's position; it must not
    // pass the commit.
    sql.batch_execute(&format!("BEGIN; {}", outbox.insert_sql("Order", "a-1", Some(r#"{"m": 5}"#)))).await.unwrap();
    let before: String = sql.query_one("SELECT pg_current_wal_insert_lsn()::text", &[]).await.unwrap().get(0);
    sql.batch_execute("COMMIT").await.unwrap();
    let Some(exit) = relay.wait(Duration::from_secs(60)) else {
        panic!("the relay kept running after an incompatible schema; log:\n{}", relay.log_text())
    };
    let log = relay.log_text();
    assert_eq!(exit.code(), Some(6), "log:\n{log}");
    assert!(log.contains(&format!("refused subject `{subject}`")) && log.contains("HTTP 409"), "log:\n{log}");
    let confirmed = outbox.confirmed_flush().await.expect("the slot");
    assert!(
        faults_support::registry::lsn_value(&confirmed) <= faults_support::registry::lsn_value(&before),
        "confirmed {confirmed}, past the refused row at {before}"
    );
    let records = support::consume_until_idle(&outbox.env.broker, std::slice::from_ref(&topic), Duration::from_secs(2));
    assert_eq!(records.len(), 3, "the refused row was published");
    outbox.drop_slot().await;
}

/// Confluent's JsonSchemaConverter for keys and values, through the suite's Apicurio Registry (its
/// Confluent-compatible API), read back by a consumer built on Confluent's Python client: its
/// JSONDeserializer takes the magic byte and schema id, fetches the schema by that id and validates
/// each value against it. No JsonSchemaConverter jar is to be had here, so this is the reference:
/// the schemas are checked member for member against what JsonSchemaData and everit print (see
/// src/connect/json_schema.rs), and the values must decode and validate. The keys are strings
/// (StringConverter): Apicurio 2.4's Confluent-compatible API refuses a JSON Schema without
/// top-level `properties` or `$schema` (`{"type":"string"}`: HTTP 422 "Given schema is not from
/// type: JSON"), which Confluent's registry accepts; the payload is expanded and placed in an
/// envelope, so the value's schema is an object.
#[tokio::test(flavor = "multi_thread")]
async fn json_schema_records_decode_and_validate_with_confluents_deserializer() {
    let registry =
        std::env::var("PGOUTBOX_TEST_REGISTRY").expect("PGOUTBOX_TEST_REGISTRY: run through scripts/test.sh");
    let pythonpath = std::env::var("PGOUTBOX_TEST_CONFLUENT_PYTHONPATH").expect(
        "PGOUTBOX_TEST_CONFLUENT_PYTHONPATH: run through scripts/test.sh (install.sh installs confluent-kafka)",
    );
    let ccompat = format!("{registry}/apis/ccompat/v7");
    let outbox = support::Outbox::new("json_schema").await;
    outbox.create_topics(&["Order"], 1).await;
    let topic = outbox.topic("Order");
    let config = outbox.config(&[
        "key.converter=org.apache.kafka.connect.storage.StringConverter",
        "value.converter=io.confluent.connect.json.JsonSchemaConverter",
        &format!("value.converter.schema.registry.url={ccompat}"),
        "transforms.outbox.table.expand.json.payload=true",
        "transforms.outbox.table.fields.additional.placement=created_at:envelope:createdAt,seq:envelope:seq",
    ]);
    let mut relay = support::Relay::start_streaming(&config);
    let sql = outbox.env.sql().await;
    let payloads = [
        r#"{"n": 1, "s": "x\"y", "f": 1.5, "b": true, "tags": ["a", "b"], "o": {"k": "v"}}"#,
        r#"{"n": 2, "s": "é", "f": -0.25, "b": false, "tags": ["c"], "o": {"k": "w"}}"#,
    ];
    for p in payloads {
        sql.batch_execute(&outbox.insert_sql("Order", "a-1", Some(p))).await.unwrap();
    }
    let records = support::consume(&outbox.env.broker, std::slice::from_ref(&topic), 2, Duration::from_secs(60));
    assert_eq!(records.len(), 2, "log:\n{}", relay.log_text());

    let input: String = records
        .iter()
        .map(|r| {
            let hex = |b: &Option<Vec<u8>>| b.as_ref().map_or(serde_json::Value::Null, |b| hex::encode(b).into());
            assert_eq!(r.key.as_deref(), Some(&b"a-1"[..]));
            format!("{}\n", serde_json::json!({ "topic": r.topic, "key": null, "value": hex(&r.value) }))
        })
        .collect();
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/confluent_json_schema_decode.py");
    let mut child = std::process::Command::new("python3")
        .arg(&script)
        .arg(&ccompat)
        .env("PYTHONPATH", &pythonpath)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run python3");
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "Confluent's deserializer refused a record:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let decoded: Vec<serde_json::Value> =
        String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(decoded.len(), 2);

    for (d, p) in decoded.iter().zip(payloads) {
        let value = &d["value"]["decoded"];
        let want: serde_json::Value = serde_json::from_str(p).unwrap();
        assert_eq!(value["payload"], want, "the expanded payload, as the consumer decodes it");
        assert!(value["createdAt"].as_str().is_some_and(|t| t.ends_with('Z')), "{value}");
        assert!(value["seq"].is_i64(), "{value}");
    }
    // Both rows have one shape: one schema, one version under the topic's subjects.
    assert_eq!(decoded[0]["value"]["id"], decoded[1]["value"]["id"]);
    let schema = decoded[0]["value"]["schema"].as_str().unwrap();
    // The columns' defaults (`now()` and `nextval(...)`) as Debezium's placeholders, after the title.
    for member in [
        r#""createdAt":{"type":"string","title":"io.debezium.time.ZonedTimestamp","default":"1970-01-01T00:00:00.000000Z","connect.index":1,"connect.version":1}"#,
        r#""seq":{"type":"integer","default":0,"connect.index":2,"connect.type":"int64"}"#,
        r#""payload":{"connect.index":0,"oneOf":[{"type":"null"},{"type":"object","#,
        r#""f":{"connect.index":"#,
        r#"{"type":"null"},{"type":"number","connect.type":"float64"}"#,
    ] {
        assert!(schema.contains(member), "{member} is not in the registered schema {schema}");
    }
    assert!(schema.starts_with(r#"{"type":"object","#), "{schema}");
    let (code, body) = support::http_get(
        registry.trim_start_matches("http://"),
        &format!("/apis/ccompat/v7/subjects/{topic}-value/versions"),
    )
    .expect("the registry answers");
    assert_eq!((code, body.trim()), (200, "[1]"), "the versions of {topic}-value");
    assert!(relay.wait(Duration::from_millis(10)).is_none(), "the relay exited; log:\n{}", relay.log_text());
    outbox.drop_slot().await;
}

/// A registry behind an authenticating proxy (Debian's nginx asking for basic auth in front of the
/// suite's Apicurio Registry): with `basic.auth.user.info` wrong, the relay stops with exit code 6,
/// naming the subject, the 401 and the keys to fix, nothing published and the password in no log
/// line; with it right, the records are published with ids the registry gives.
#[tokio::test(flavor = "multi_thread")]
async fn a_registry_refusing_the_credentials_stops_the_relay_and_the_right_ones_publish() {
    let registry =
        std::env::var("PGOUTBOX_TEST_REGISTRY").expect("PGOUTBOX_TEST_REGISTRY: run through scripts/test.sh");
    let proxy = faults_support::registry::AuthProxy::start(&registry, "relay", "s3cret-pw");
    let outbox = support::Outbox::new("registry_auth").await;
    outbox.create_topics(&["Order"], 1).await;
    let topic = outbox.topic("Order");
    let config = |password: &str| {
        outbox.config(&[
            "key.converter=org.apache.kafka.connect.storage.StringConverter",
            "value.converter=io.confluent.connect.avro.AvroConverter",
            &format!("value.converter.schema.registry.url={}/apis/ccompat/v7", proxy.url),
            "value.converter.basic.auth.credentials.source=USER_INFO",
            &format!("value.converter.basic.auth.user.info=relay:{password}"),
        ])
    };
    let sql = outbox.env.sql().await;
    sql.batch_execute(&outbox.insert_sql("Order", "a-1", Some(r#"{"n": 1}"#))).await.unwrap();

    let mut relay = support::Relay::start(&config("not-the-pw"));
    let Some(exit) = relay.wait(Duration::from_secs(60)) else {
        panic!("the relay kept running with credentials the registry refuses; log:\n{}", relay.log_text())
    };
    let log = relay.log_text();
    assert_eq!(exit.code(), Some(6), "log:\n{log}");
    assert!(log.contains(&format!("refused subject `{topic}-value`")) && log.contains("HTTP 401"), "log:\n{log}");
    assert!(log.contains("basic.auth.user.info"), "the fix names the key; log:\n{log}");
    assert!(!log.contains("not-the-pw"), "the password reached the log:\n{log}");
    let none = support::consume_until_idle(&outbox.env.broker, std::slice::from_ref(&topic), Duration::from_secs(2));
    assert!(none.is_empty(), "published with refused credentials");

    let mut relay = support::Relay::start(&config("s3cret-pw"));
    let records = support::consume(&outbox.env.broker, std::slice::from_ref(&topic), 1, Duration::from_secs(60));
    assert_eq!(records.len(), 1, "log:\n{}", relay.log_text());
    let id = faults_support::registry::confluent_id(records[0].value.as_deref().unwrap());
    let (code, body) =
        support::http_get(registry.trim_start_matches("http://"), &format!("/apis/ccompat/v7/schemas/ids/{id}"))
            .expect("the registry answers");
    assert_eq!(code, 200, "the id names a schema in the registry behind the proxy: {body}");
    assert!(!relay.log_text().contains("s3cret-pw"), "the password reached the log");
    assert!(relay.wait(Duration::from_millis(10)).is_none(), "log:\n{}", relay.log_text());
    outbox.drop_slot().await;
}

/// `bearer.auth.credentials.source=OAUTHBEARER`: a registry behind a proxy (Debian's nginx) that
/// lets through only requests bearing a live token of an OAuth endpoint (the client-credentials
/// grant; tokens live 4 s here). With a wrong client secret the endpoint refuses, and the relay
/// stops with exit code 6 naming the keys to fix, nothing published and the secret in no log line.
/// With the right one the relay fetches a token, registers through the proxy, sends
/// `bearer.auth.logical.cluster` as `target-sr-cluster`, and fetches a new token once the first is
/// due (a new topic's schema after 5 s). Apicurio 2.x's converter with
/// `apicurio.auth.service.token.endpoint` gets its token the same way, its id and secret in the form.
#[tokio::test(flavor = "multi_thread")]
async fn a_registry_behind_oauth_gets_tokens_from_the_endpoint_and_a_refused_client_stops_the_relay() {
    const SECRET: &str = "sr-oauth-Sekr3t";
    let registry =
        std::env::var("PGOUTBOX_TEST_REGISTRY").expect("PGOUTBOX_TEST_REGISTRY: run through scripts/test.sh");
    let endpoint =
        support::oauth::TokenEndpoint::start("relay", SECRET, "schema:write registry", Duration::from_secs(4)).await;
    let proxy = faults_support::registry::AuthProxy::bearer(&registry, &endpoint.introspect_url);
    let (code, _) = support::http_get(proxy.url.trim_start_matches("http://"), "/apis/ccompat/v7/subjects")
        .expect("the proxy answers");
    assert_eq!(code, 401, "the proxy lets a request without a token through");
    let outbox = support::Outbox::new("registry_oauth").await;
    outbox.create_topics(&["Order", "Invoice", "Shipment"], 1).await;
    let config = |secret: &str| {
        outbox.config(&[
            "key.converter=org.apache.kafka.connect.storage.StringConverter",
            "value.converter=io.confluent.connect.avro.AvroConverter",
            &format!("value.converter.schema.registry.url={}/apis/ccompat/v7", proxy.url),
            "value.converter.bearer.auth.credentials.source=OAUTHBEARER",
            &format!("value.converter.bearer.auth.issuer.endpoint.url={}", endpoint.url),
            "value.converter.bearer.auth.client.id=relay",
            &format!("value.converter.bearer.auth.client.secret={secret}"),
            "value.converter.bearer.auth.scope=schema:write registry",
            "value.converter.bearer.auth.logical.cluster=lsrc-pgoutbox",
        ])
    };
    let sql = outbox.env.sql().await;
    sql.batch_execute(&outbox.insert_sql("Order", "a-1", Some(r#"{"n": 1}"#))).await.unwrap();
    let order = outbox.topic("Order");

    let mut relay = support::Relay::start(&config("not-the-secret"));
    let Some(exit) = relay.wait(Duration::from_secs(60)) else {
        panic!("the relay kept running with a client the token endpoint refuses; log:\n{}", relay.log_text())
    };
    let log = relay.log_text();
    assert_eq!(exit.code(), Some(6), "log:\n{log}");
    assert!(
        log.contains("OAuth token endpoint") && log.contains("HTTP 401") && log.contains("bearer.auth.client.secret"),
        "names the endpoint's refusal and the keys; log:\n{log}"
    );
    assert!(!log.contains("not-the-secret"), "the secret reached the log:\n{log}");
    let none = support::consume_until_idle(&outbox.env.broker, std::slice::from_ref(&order), Duration::from_secs(2));
    assert!(none.is_empty(), "published without a token");
    assert_eq!(endpoint.issued(), 0);

    let mut relay = support::Relay::start(&config(SECRET));
    let records = support::consume(&outbox.env.broker, std::slice::from_ref(&order), 1, Duration::from_secs(60));
    assert_eq!(records.len(), 1, "log:\n{}", relay.log_text());
    let id = faults_support::registry::confluent_id(records[0].value.as_deref().unwrap());
    let (code, body) =
        support::http_get(registry.trim_start_matches("http://"), &format!("/apis/ccompat/v7/schemas/ids/{id}"))
            .expect("the registry answers");
    assert_eq!(code, 200, "the id names a schema in the registry behind the proxy: {body}");
    assert_eq!(endpoint.issued(), 1, "one token for the first schema");
    // The first token is due after 80% of its 4 s: the next schema needs a new one.
    tokio::time::sleep(Duration::from_secs(5)).await;
    sql.batch_execute(&outbox.insert_sql("Invoice", "i-1", Some(r#"{"n": 2}"#))).await.unwrap();
    let invoice = outbox.topic("Invoice");
    let records = support::consume(&outbox.env.broker, std::slice::from_ref(&invoice), 1, Duration::from_secs(60));
    assert_eq!(records.len(), 1, "log:\n{}", relay.log_text());
    assert_eq!(endpoint.issued(), 2, "a new token once the first was due");
    assert!(endpoint.refused.lock().unwrap().len() == 1, "only the wrong secret was refused");
    let access = proxy.access_log();
    assert!(
        access.lines().filter(|l| l.contains("/apis/ccompat/v7/subjects/")).all(|l| l.ends_with("lsrc-pgoutbox")),
        "every registry call names the logical cluster:\n{access}"
    );
    let log = relay.log_text();
    assert!(!log.contains(SECRET), "the secret reached the log");
    assert!(relay.wait(Duration::from_millis(10)).is_none(), "the relay exited; log:\n{log}");
    assert_eq!(relay.stop().code(), Some(0));
    // Confluent's way: the credentials as HTTP Basic, the scope asked for.
    let grants = endpoint.grants.lock().unwrap().clone();
    assert!(
        grants.iter().all(|(how, scope)| *how == "basic" && scope.as_deref() == Some("schema:write registry")),
        "{grants:?}"
    );

    // Apicurio 2.x's converter, its id and secret in the form, through the same proxy.
    let mut relay = support::Relay::start(&outbox.config(&[
        "key.converter=org.apache.kafka.connect.storage.StringConverter",
        "value.converter=io.apicurio.registry.utils.converter.AvroConverter",
        &format!("value.converter.apicurio.registry.url={}/apis/registry/v2", proxy.url),
        "value.converter.apicurio.registry.auto-register=true",
        &format!("value.converter.apicurio.auth.service.token.endpoint={}", endpoint.url),
        "value.converter.apicurio.auth.client.id=relay",
        &format!("value.converter.apicurio.auth.client.secret={SECRET}"),
    ]));
    sql.batch_execute(&outbox.insert_sql("Shipment", "s-1", Some(r#"{"n": 3}"#))).await.unwrap();
    let shipment = outbox.topic("Shipment");
    let records = support::consume(&outbox.env.broker, std::slice::from_ref(&shipment), 1, Duration::from_secs(60));
    assert_eq!(records.len(), 1, "log:\n{}", relay.log_text());
    let grants = endpoint.grants.lock().unwrap().clone();
    assert_eq!(
        grants.last(),
        Some(&("post", None)),
        "Apicurio's way: the credentials in the form, no scope: {grants:?}"
    );
    assert!(!relay.log_text().contains(SECRET), "the secret reached the log");
    assert!(relay.wait(Duration::from_millis(10)).is_none(), "the relay exited; log:\n{}", relay.log_text());
    outbox.drop_slot().await;
}

/// A registry reached over https (a certificate from a CA of the test's own): with the CA as the
/// truststore (PEM), records are published with ids the registry gives; without it the relay stops
/// at once with exit code 6, saying the registry cannot be trusted and naming the truststore key,
/// instead of retrying a certificate that will never verify.
#[tokio::test(flavor = "multi_thread")]
async fn a_registry_over_tls_is_trusted_through_the_truststore_and_refused_without_it() {
    let registry = faults_support::registry::Registry::start_tls("tls");
    let ca = registry.ca.clone().expect("the registry's CA");
    let outbox = support::Outbox::new("registry_tls").await;
    outbox.create_topics(&["Order"], 1).await;
    let topic = outbox.topic("Order");
    let url = format!("value.converter.schema.registry.url={}/apis/ccompat/v7", registry.url);
    let untrusted = outbox.config(&["value.converter=io.confluent.connect.avro.AvroConverter", &url]);
    let sql = outbox.env.sql().await;

    let mut relay = support::Relay::start_streaming(&untrusted);
    sql.batch_execute(&outbox.insert_sql("Order", "a-1", Some(r#"{"n": 1}"#))).await.unwrap();
    let Some(exit) = relay.wait(Duration::from_secs(60)) else {
        panic!("the relay kept running against an untrusted registry; log:\n{}", relay.log_text())
    };
    let log = relay.log_text();
    assert_eq!(exit.code(), Some(6), "log:\n{log}");
    assert!(
        log.contains("cannot be trusted") && log.contains("value.converter.schema.registry.ssl.truststore.location"),
        "log:\n{log}"
    );

    let trusted = format!(
        "{untrusted}value.converter.schema.registry.ssl.truststore.location={ca}\nvalue.converter.schema.registry.ssl.truststore.type=PEM\n"
    );
    let mut relay = support::Relay::start_streaming(&trusted);
    let records = support::consume(&outbox.env.broker, std::slice::from_ref(&topic), 1, Duration::from_secs(30));
    assert_eq!(records.len(), 1, "log:\n{}", relay.log_text());
    let schema = registry.schema(faults_support::registry::confluent_id(records[0].value.as_deref().unwrap()));
    assert!(schema.contains("io.debezium.data.Json"), "{schema}");
    assert_eq!(relay.stop().code(), Some(0), "log:\n{}", relay.log_text());
    outbox.drop_slot().await;
}
