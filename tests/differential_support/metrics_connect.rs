//! The metrics differential: Apache Kafka Connect running Debezium 3.7.1, scraped through the
//! Prometheus JMX exporter (tests/fixtures/jmx-exporter-connect.yml: Debezium's exporter rules for its
//! connector MBeans, Strimzi's for Connect's), against a `pgoutbox connect` worker's own `/metrics`,
//! with the same connector created over REST on each and the same changes read by both.
//!
//! Every series of the compared families (`debezium_metrics_*`, and Connect's worker, connector and
//! task families `kafka_connect_*`) must exist on both sides with the same labels, but for the
//! differences [`ALLOWED`] lists with their reasons; each listed difference must still occur, so that
//! the list cannot outlive what it excuses. The counters that depend only on the workload (events
//! seen per operation, transactions, filtered and erroneous events, the snapshot's, records polled and
//! written, the errors skipped under `errors.tolerance=all`, statuses) must have the same values;
//! times, rates, ratios and queue sizes are left out, and of a timestamp only whether there is one.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::connect::Connect;
use super::sides::{connector_config, free_port, logs, slots_exist, Worker};
use crate::support::{call, create_topics, http_get, unique, Env};

/// Differences between the two sides' series that are by design: (the series' name, the side that
/// has it, why).
const ALLOWED: &[(&str, Side, &str)] = &[
    (
        "debezium_metrics_NumberOfEventsSkipped",
        Side::Pgoutbox,
        "NumberOfEventsFiltered under its name before Debezium 1.x, which Debezium's Grafana dashboard still queries",
    ),
    (
        "kafka_connect_worker_rebalance_leader_name",
        Side::Connect,
        "pgoutbox's workers share the config topic without a leader (docs/operations.md)",
    ),
    (
        "kafka_connect_worker_rebalance_connect_protocol",
        Side::Connect,
        "pgoutbox's workers do not speak Connect's group protocol",
    ),
];

/// Series whose values depend on timing or on how each side is built, not on the changes read:
/// compared by name and labels only.
const VALUE_EXEMPT: &[&str] = &[
    "MilliSeconds",
    "Duration",
    // pgoutbox's queue holds batches, Debezium's records (docs/operations.md).
    "QueueTotalCapacity",
    "QueueRemainingCapacity",
    "_rate",
    "_ratio",
    "_time_ms",
    "_avg",
    "_max",
    "batch_size",
    "rebalance",
    "kafka_connect_worker_connector_startup",
    "kafka_connect_worker_task_startup",
];

#[derive(Clone, Copy, PartialEq, Debug)]
enum Side {
    Connect,
    Pgoutbox,
}

/// Connect's connector version label is Debezium's release (3.7.1.Final here); pgoutbox's is the
/// release whose records it matches (`config::DEBEZIUM_VERSION`). Its value is not compared.
const VERSION_LABEL: &str = "connector_version";

type Series = BTreeMap<String, f64>;

pub async fn run() {
    let _turn = super::turn().await;
    let env = Env::get();
    let u = unique("metrics");
    let dir = std::env::temp_dir().join("pgoutbox-differential").join(&u);
    std::fs::create_dir_all(&dir).unwrap();
    let table = format!("outbox_{u}");
    let sql = env.sql().await;
    sql.batch_execute(&format!(
        "CREATE TABLE public.{table} (id uuid PRIMARY KEY, aggregatetype varchar(255), \
         aggregateid varchar(255) NOT NULL, type varchar(255) NOT NULL, payload jsonb)"
    ))
    .await
    .unwrap();
    let insert = |agg: &str| {
        format!("INSERT INTO {table} VALUES (gen_random_uuid(), 'order', '{agg}', 'created', '{{\"a\": 1}}');")
    };
    // Two rows for the snapshot.
    sql.batch_execute(&format!("{}{}", insert("s1"), insert("s2"))).await.unwrap();
    // Two connectors on each side: `metrics-…` with the Event Router alone, and `skipping-…`, which
    // also skips UPDATEs (`skipped.operations=u`) and drops the `drop` aggregate's events with
    // Kafka's Filter transform.
    // A third, `nodata-…`, takes no snapshot (`snapshot.mode=no_data`).
    let variants = [("metrics", "d", "p"), ("skipping", "d2", "p2"), ("nodata", "d3", "p3")];
    let prefixes: Vec<String> = variants.iter().flat_map(|(_, d, p)| [format!("{u}{d}"), format!("{u}{p}")]).collect();
    let topics: Vec<String> = prefixes.iter().map(|p| format!("{p}.outbox.event.order")).collect();
    let mut all_topics = topics.clone();
    all_topics.extend(prefixes.iter().map(|p| format!("{p}.outbox.event.drop")));
    create_topics(&env.broker, &all_topics, 1).await;

    let exporter_port = free_port();
    let exporter = format!("{exporter_port}:{}", fixture("jmx-exporter-connect.yml").display());
    let connect = tokio::task::block_in_place(|| {
        Connect::start_with_metrics(dir.join(format!("connect-{u}")), &env.broker, "", Some(exporter.clone()))
    });
    let worker_addr = format!("127.0.0.1:{}", free_port());
    let mut worker = Worker::start(&dir, &env.broker, &worker_addr, &u);

    for (variant, (name, dbz, pgo)) in variants.iter().enumerate() {
        for (side, prefix) in [(Side::Connect, format!("{u}{dbz}")), (Side::Pgoutbox, format!("{u}{pgo}"))] {
            let server = format!("srv{u}{variant}");
            let mut config =
                connector_config(&table, &format!("slot_{prefix}"), &format!("pub_{prefix}"), &server, &prefix);
            // A row the Event Router refuses is skipped, and counted, on both sides.
            config["errors.tolerance"] = serde_json::json!("all");
            config["errors.log.enable"] = serde_json::json!("true");
            if variant == 1 {
                let more = serde_json::json!({
                    "skipped.operations": "u",
                    "transforms": "outbox,drop,side",
                    "transforms.drop.type": "org.apache.kafka.connect.transforms.Filter",
                    "transforms.drop.predicate": "isDrop",
                    "predicates": "isDrop",
                    "predicates.isDrop.type": "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
                    "predicates.isDrop.pattern": "outbox\\.event\\.drop",
                });
                config.as_object_mut().unwrap().extend(more.as_object().unwrap().clone());
            }
            if variant == 2 {
                config["snapshot.mode"] = serde_json::json!("no_data");
            }
            let body = serde_json::json!({ "name": format!("{name}-{u}"), "config": config });
            let (code, answer) = match side {
                Side::Connect => connect.call("POST", "/connectors", &body.to_string()),
                Side::Pgoutbox => {
                    let (code, v) = call(&worker_addr, "POST", "/connectors", Some(&body));
                    (code, v.to_string())
                }
            };
            assert_eq!(code, 201, "creating {name} on {side:?}: {answer}\n{}", logs(&connect, &worker));
        }
    }
    let broker = env.broker.clone();
    let read = |topic: &str, n: usize| {
        let records = crate::support::consume(&broker, &[topic.to_string()], n, Duration::from_secs(120));
        assert_eq!(records.len(), n, "records in {topic}\n{}", logs(&connect, &worker));
    };
    // The snapshot's two rows, from the connectors that take one (the last two topics are nodata's).
    let snapshotting = &topics[..topics.len() - 2];
    tokio::task::block_in_place(|| snapshotting.iter().for_each(|t| read(t, 2)));
    // nodata's slot exists once it streams: changes after this are its.
    let slots: Vec<String> = prefixes.iter().map(|p| format!("slot_{p}")).collect();
    slots_exist(&sql, &slots).await.unwrap_or_else(|e| panic!("{e}\n{}", logs(&connect, &worker)));

    // Streaming: three transactions of two events, an UPDATE the Event Router ignores with a
    // warning, a DELETE it drops, a row it refuses (skipped under errors.tolerance=all), and one
    // more event.
    for i in 0..3 {
        sql.batch_execute(&format!("BEGIN; {}{} COMMIT;", insert(&format!("a{i}")), insert(&format!("b{i}"))))
            .await
            .unwrap();
    }
    sql.batch_execute(&format!("UPDATE {table} SET type = 'changed' WHERE aggregateid = 'a0'")).await.unwrap();
    sql.batch_execute(&format!("DELETE FROM {table} WHERE aggregateid = 'b0'")).await.unwrap();
    // A row without an aggregate type: no topic to route it to.
    sql.batch_execute(&format!(
        "INSERT INTO {table} VALUES (gen_random_uuid(), NULL, 'c0', 'created', '{{\"a\": 1}}')"
    ))
    .await
    .unwrap();
    sql.batch_execute(&format!("BEGIN; {} COMMIT;", insert("d0"))).await.unwrap();
    // Two events of the `drop` aggregate, which the second connector's Filter drops.
    sql.batch_execute(&format!(
        "INSERT INTO {table} VALUES (gen_random_uuid(), 'drop', 'x0', 'created', '{{}}'), \
         (gen_random_uuid(), 'drop', 'x1', 'created', '{{}}')"
    ))
    .await
    .unwrap();
    tokio::task::block_in_place(|| {
        snapshotting.iter().for_each(|t| read(t, 9));
        topics[topics.len() - 2..].iter().for_each(|t| read(t, 7));
    });

    let connect_metrics = format!("127.0.0.1:{exporter_port}");
    // Until both sides have seen as many changes per connector, with every record acknowledged
    // (Connect commits its offsets every second); a count that never agrees shows in the report.
    let settled = || {
        let (theirs, ours) =
            (without_messages(&compared(scrape(&connect_metrics))), without_messages(&compared(scrape(&worker_addr))));
        let seen = |s: &Series| -> Vec<(String, f64)> {
            s.iter()
                .filter(|(k, _)| k.starts_with("debezium_metrics_TotalNumberOfEventsSeen{context=\"streaming\""))
                .map(|(k, v)| (k.clone(), *v))
                .collect()
        };
        let idle = |s: &Series| {
            s.iter()
                .filter(|(k, _)| k.starts_with("kafka_connect_source_task_source_record_active_count{"))
                .all(|(_, v)| *v == 0.0)
        };
        seen(&theirs).len() == variants.len() && seen(&theirs) == seen(&ours) && idle(&theirs) && idle(&ours)
    };
    let start = Instant::now();
    while !settled() && start.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(500));
    }
    std::thread::sleep(Duration::from_secs(2));
    let (theirs, ours) = (compared(scrape(&connect_metrics)), compared(scrape(&worker_addr)));
    let problems = differences(&without_messages(&theirs), &without_messages(&ours));
    let report = format!(
        "{} difference(s) between Kafka Connect + Debezium's metrics and pgoutbox's:\n{}\n\n--- Connect's series:\n{}\n--- pgoutbox's series:\n{}\n{}",
        problems.len(),
        problems.join("\n"),
        render(&theirs),
        render(&ours),
        logs(&connect, &worker)
    );
    worker.stop();
    drop(connect);
    for prefix in &prefixes {
        let _ = sql.batch_execute(&format!("SELECT pg_drop_replication_slot('slot_{prefix}')")).await;
        let _ = sql.batch_execute(&format!("DROP PUBLICATION IF EXISTS pub_{prefix}")).await;
    }
    let _ = sql.batch_execute(&format!("DROP TABLE {table}")).await;
    assert!(problems.is_empty(), "{report}");
    eprintln!("[metrics differential] {} series identical by name and labels", ours.len());
    let _ = std::fs::remove_dir_all(&dir);
}

/// The series with other tests' logical decoding messages taken out of the streaming counts.
/// Every message reaches every slot (B-17), and the connectors here exclude them all, so both sides
/// count each as seen, filtered and a logical message event, as Debezium 3.7 does; but how many
/// arrived before each scrape is a matter of timing. Their own count is compared only for whether
/// both have one.
fn without_messages(series: &Series) -> Series {
    let mut out = series.clone();
    for (key, messages) in
        series.iter().filter(|(k, _)| k.starts_with("debezium_metrics_TotalNumberOfLogicalMessageEventsSeen{"))
    {
        let labels = &key[key.find('{').unwrap_or(0)..];
        for name in ["TotalNumberOfEventsSeen", "NumberOfEventsFiltered"] {
            if let Some(v) = out.get_mut(&format!("debezium_metrics_{name}{labels}")) {
                *v -= messages;
            }
        }
        out.insert(key.clone(), f64::from(u8::from(*messages > 0.0)));
    }
    out
}

/// The differences that [`ALLOWED`] does not excuse, and the allowances that excused nothing.
fn differences(theirs: &Series, ours: &Series) -> Vec<String> {
    let mut problems = Vec::new();
    let mut used = BTreeSet::new();
    let family = |key: &str| key.split('{').next().unwrap_or(key).to_string();
    for (side, have, lack) in [(Side::Connect, theirs, ours), (Side::Pgoutbox, ours, theirs)] {
        for key in have.keys().filter(|k| !lack.contains_key(*k)) {
            match ALLOWED.iter().position(|(name, s, _)| *s == side && family(key) == *name) {
                Some(i) => {
                    used.insert(i);
                }
                None => problems.push(format!("only {side:?} has {key}")),
            }
        }
    }
    for (i, (name, side, why)) in ALLOWED.iter().enumerate() {
        if !used.contains(&i) {
            problems.push(format!("the allowed difference `{name}` only on {side:?} ({why}) did not occur: remove it"));
        }
    }
    for (key, theirs) in theirs {
        let Some(ours) = ours.get(key) else { continue };
        if VALUE_EXEMPT.iter().any(|x| key.contains(x)) {
            continue;
        }
        // A time of day: whether there is one.
        let same = if key.contains("_timestamp") {
            (*theirs > 0.0) == (*ours > 0.0)
        } else {
            (theirs.is_nan() && ours.is_nan()) || theirs == ours
        };
        if !same {
            problems.push(format!("{key}: Connect {theirs}, pgoutbox {ours}"));
        }
    }
    problems
}

/// The compared families of a scrape, each series under its name and sorted labels; label values
/// that name a process (client ids) are replaced by `*`, and so is the connector version's
/// ([`VERSION_LABEL`]).
fn compared(series: Vec<(String, f64)>) -> Series {
    let mut out = Series::new();
    for (key, v) in series {
        let (name, labels) = key.split_once('{').map_or((key.as_str(), ""), |(n, l)| (n, l.trim_end_matches('}')));
        let keep = name.starts_with("debezium_metrics_")
            || (name.starts_with("kafka_connect_") && !name.starts_with("kafka_connect_metrics_"));
        if !keep {
            continue;
        }
        let mut pairs: Vec<(String, String)> = split_labels(labels)
            .into_iter()
            .map(|(k, v)| {
                let v = match k.as_str() {
                    "clientid" | "client" => "*".to_string(),
                    VERSION_LABEL => "<version>".to_string(),
                    _ => v,
                };
                (k, v)
            })
            .collect();
        pairs.sort();
        let labels: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
        out.insert(format!("{name}{{{}}}", labels.join(",")), v);
    }
    out
}

/// `a="x",b="y"` as pairs (values hold no `",` here).
fn split_labels(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some((k, after)) = rest.split_once("=\"") {
        let end = after.find("\",").unwrap_or_else(|| after.rfind('"').unwrap_or(after.len()));
        out.push((k.trim_start_matches(',').to_string(), after[..end].to_string()));
        rest = after.get(end + 1..).unwrap_or("");
    }
    out
}

/// Every sample of `addr`'s `/metrics` as (series, value).
fn scrape(addr: &str) -> Vec<(String, f64)> {
    let Some((200, body)) = http_get(addr, "/metrics") else { return Vec::new() };
    body.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let value = match value {
                "NaN" => f64::NAN,
                "+Inf" => f64::INFINITY,
                "-Inf" => f64::NEG_INFINITY,
                v => v.parse().ok()?,
            };
            Some((series.to_string(), value))
        })
        .collect()
}

fn render(s: &Series) -> String {
    s.iter().map(|(k, v)| format!("{k} {v}\n")).collect()
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests").join("fixtures").join(name)
}
