//! Kafka Connect's, Debezium's and the Kafka clients' metrics under the names their exporters'
//! rules give their MBeans, so the dashboards and alerts built on them read pgoutbox unchanged:
//!
//! - Connect's, as Strimzi's JMX-exporter rules (`kafka-connect-metrics.yaml`) name them:
//!   `kafka_connect_connector_*{connector}` from `connector-metrics`, `kafka_connect_connector_task_*`,
//!   `kafka_connect_source_task_*` and `kafka_connect_task_error_*` `{connector,task}`,
//!   `kafka_connect_worker_*` (with `{connector}` for the per-connector task counts),
//!   `kafka_connect_worker_rebalance_*` and `kafka_connect_coordinator_*` in distributed mode;
//! - the Kafka clients' (`kafka_producer_*{clientid}`, `kafka_consumer_*{clientid}`), from
//!   librdkafka's statistics, where a Java client metric has a counterpart;
//! - Debezium's connector MBeans as Debezium's own exporter configuration names them:
//!   `debezium_metrics_<Attribute>{context,name,plugin}` (CamelCase, untyped), the streaming and
//!   snapshot contexts, `RowsScanned{table}`, and `kafka_connect_metrics_{incoming,outgoing}_byte_rate{client}`
//!   that Debezium's dashboard reads.
//!
//! Each outbox connector runs one task, `0`; a stopped connector has none, as in Connect.

use super::sheet::{Kind, Sheet};
use super::Source;
use crate::metrics::{ClientStats, Metrics, RelayState};

/// What a Connect worker knows beyond its connectors: its group (distributed mode) and its own
/// clients (the consumers of the config, status and offset topics).
#[derive(Debug, Default, Clone)]
pub struct WorkerFigures {
    pub group: Option<Group>,
    pub consumers: Vec<ClientStats>,
    pub startups: Option<std::sync::Arc<Startups>>,
}

/// Connector and task starts on a worker (`connect-worker-metrics`' startup metrics).
#[derive(Debug, Default)]
pub struct Startups {
    pub connector: Starts,
    pub task: Starts,
}

/// Attempts, successes and failures.
#[derive(Debug, Default)]
pub struct Starts([std::sync::atomic::AtomicU64; 3]);

impl Starts {
    pub fn attempt(&self) {
        self.0[0].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn succeeded(&self) {
        self.0[1].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn failed(&self) {
        self.0[2].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    fn counts(&self) -> [u64; 3] {
        self.0.each_ref().map(|c| c.load(std::sync::atomic::Ordering::Relaxed))
    }
}

/// The worker's view of its Connect group (`connect-worker-rebalance-metrics`,
/// `connect-coordinator-metrics`).
#[derive(Debug, Default, Clone)]
pub struct Group {
    /// The member's client id (Connect's `connect-<n>`).
    pub client_id: String,
    pub epoch: u64,
    pub completed_rebalances: u64,
    pub rebalancing: bool,
    /// Since the last completed rebalance, in milliseconds (-1: none yet).
    pub since_last_rebalance_ms: i64,
    pub rebalance_avg_ms: f64,
    pub rebalance_max_ms: f64,
    pub assigned_connectors: u64,
    pub assigned_tasks: u64,
}

/// `connect-worker-metrics`' per-connector task counts, and the task state each counts.
const TASK_COUNTS: [(&str, &str); 6] = [
    ("running", "RUNNING"),
    ("paused", "PAUSED"),
    ("failed", "FAILED"),
    ("unassigned", "UNASSIGNED"),
    ("destroyed", "-"),
    ("restarting", "RESTARTING"),
];

pub fn connector(sheet: &mut Sheet, s: &Source<'_>, now: std::time::Instant) {
    let m = s.metrics;
    let g = Metrics::get;
    let c = [("connector", s.connector)];
    let status = s.state.to_ascii_lowercase();
    // As Connect (and the REST API) report it: a connector whose task failed is still running.
    let connector_status = if s.state == "FAILED" { "running" } else { status.as_str() };
    let mut add = |name: &str, help: &str, kind: Kind, extra: &[(&str, &str)], v: f64| {
        let labels: Vec<(&str, &str)> = c.iter().copied().chain(extra.iter().copied()).collect();
        sheet.add(name, help, kind, &labels, v);
    };
    add(
        "kafka_connect_connector_status",
        "Kafka Connect status JMX metric type connector",
        Kind::Gauge,
        &[("status", connector_status)],
        1.0,
    );
    add(
        "kafka_connect_connector_connector_class",
        "Kafka Connect connector-class JMX metric type connector",
        Kind::Gauge,
        &[("connector_class", crate::config::POSTGRES_CONNECTOR_CLASS)],
        1.0,
    );
    add(
        "kafka_connect_connector_connector_type",
        "Kafka Connect connector-type JMX metric type connector",
        Kind::Gauge,
        &[("connector_type", "source")],
        1.0,
    );
    add(
        "kafka_connect_connector_connector_version",
        "Kafka Connect connector-version JMX metric type connector",
        Kind::Gauge,
        &[("connector_version", crate::config::DEBEZIUM_VERSION)],
        1.0,
    );
    let has_task = s.state != "STOPPED";
    for (name, state) in TASK_COUNTS {
        let n = f64::from(u8::from(state == s.state));
        add(
            &format!("kafka_connect_worker_connector_{name}_task_count"),
            &format!("The connector's tasks that are {name}"),
            Kind::Gauge,
            &[],
            n,
        );
    }
    add(
        "kafka_connect_worker_connector_total_task_count",
        "The connector's tasks",
        Kind::Gauge,
        &[],
        f64::from(u8::from(has_task)),
    );
    if !has_task {
        return;
    }
    let task = [("connector", s.connector), ("task", "0")];
    let mut add = |name: &str, help: &str, kind: Kind, extra: &[(&str, &str)], v: f64| {
        let labels: Vec<(&str, &str)> = task.iter().copied().chain(extra.iter().copied()).collect();
        sheet.add(name, help, kind, &labels, v);
    };
    add(
        "kafka_connect_connector_task_status",
        "Kafka Connect JMX Connector task status",
        Kind::Gauge,
        &[("status", &status)],
        1.0,
    );
    let (running, paused) = m.task_clock.lock().unwrap_or_else(|e| e.into_inner()).tick(s.state, now);
    add(
        "kafka_connect_connector_task_running_ratio",
        "The fraction of time the task has spent running since it started",
        Kind::Gauge,
        &[],
        running,
    );
    add(
        "kafka_connect_connector_task_pause_ratio",
        "The fraction of time the task has spent paused since it started",
        Kind::Gauge,
        &[],
        paused,
    );
    let (commit_avg, commit_max) = m.offset_commits.lock().unwrap_or_else(|e| e.into_inner()).avg_max(now);
    add(
        "kafka_connect_connector_task_offset_commit_avg_time_ms",
        "Milliseconds a write of the connector's offset took, on average over the last minute",
        Kind::Gauge,
        &[],
        commit_avg,
    );
    add(
        "kafka_connect_connector_task_offset_commit_max_time_ms",
        "Milliseconds the slowest write of the connector's offset took over the last minute",
        Kind::Gauge,
        &[],
        commit_max,
    );
    let batches = m.batches.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let per_batch = |v: f64| if batches.count > 0 { v / batches.count as f64 } else { 0.0 };
    add(
        "kafka_connect_connector_task_batch_size_avg",
        "Records per batch the source handed over",
        Kind::Gauge,
        &[],
        per_batch(batches.records as f64),
    );
    add(
        "kafka_connect_connector_task_batch_size_max",
        "The largest batch the source handed over",
        Kind::Gauge,
        &[],
        batches.max_records as f64,
    );
    let (polled, written) = (g(&m.records_polled), g(&m.events_acked));
    let [poll_rate, write_rate] = m.throughput.lock().unwrap_or_else(|e| e.into_inner()).rates([polled, written], now);
    add(
        "kafka_connect_source_task_source_record_poll_total",
        "Records the task produced before transforms (snapshot rows, changes, a DELETE's tombstone)",
        Kind::Counter,
        &[],
        polled as f64,
    );
    add(
        "kafka_connect_source_task_source_record_poll_rate",
        "Records read from the source per second",
        Kind::Gauge,
        &[],
        poll_rate,
    );
    add(
        "kafka_connect_source_task_source_record_write_total",
        "Records the broker acknowledged",
        Kind::Counter,
        &[],
        written as f64,
    );
    add(
        "kafka_connect_source_task_source_record_write_rate",
        "Records the broker acknowledged per second",
        Kind::Gauge,
        &[],
        write_rate,
    );
    let active = m.sample_active_count(now);
    let (active_avg, active_max) = m.active_counts.lock().unwrap_or_else(|e| e.into_inner()).avg_max(now);
    add(
        "kafka_connect_source_task_source_record_active_count",
        "Records read and not yet acknowledged",
        Kind::Gauge,
        &[],
        active as f64,
    );
    add(
        "kafka_connect_source_task_source_record_active_count_avg",
        "Records read and not yet acknowledged, on average over the last minute (sampled at each batch and each scrape)",
        Kind::Gauge,
        &[],
        active_avg,
    );
    add(
        "kafka_connect_source_task_source_record_active_count_max",
        "Records read and not yet acknowledged, at most over the last minute (sampled at each batch and each scrape)",
        Kind::Gauge,
        &[],
        active_max,
    );
    add(
        "kafka_connect_source_task_poll_batch_avg_time_ms",
        "Milliseconds the source took to fill a batch, on average",
        Kind::Gauge,
        &[],
        per_batch(batches.time_sum_ms),
    );
    add(
        "kafka_connect_source_task_poll_batch_max_time_ms",
        "Milliseconds the source took to fill its slowest batch",
        Kind::Gauge,
        &[],
        batches.time_max_ms,
    );
    // errors.tolerance: a record the router or the broker refused; skipped ones; dead letters.
    let errors = (g(&m.route_errors) + g(&m.delivery_errors)) as f64;
    let dead = g(&m.dead_letters) as f64;
    add("kafka_connect_task_error_total_record_errors", "Records that met an error", Kind::Gauge, &[], errors);
    add(
        "kafka_connect_task_error_total_record_failures",
        "Failed attempts to process or deliver a record",
        Kind::Gauge,
        &[],
        errors,
    );
    add(
        "kafka_connect_task_error_total_records_skipped",
        "Records skipped under errors.tolerance=all",
        Kind::Gauge,
        &[],
        errors,
    );
    add(
        "kafka_connect_task_error_total_errors_logged",
        "Errors logged under errors.log.enable=true",
        Kind::Gauge,
        &[],
        g(&m.errors_logged) as f64,
    );
    add(
        "kafka_connect_task_error_last_error_timestamp",
        "When the task last met an error, in milliseconds since the epoch (0: never)",
        Kind::Gauge,
        &[],
        g(&m.last_error_ms) as f64,
    );
    add(
        "kafka_connect_task_error_total_retries",
        "Retried operations (pgoutbox retries inside the producer: see kafka_producer_record_retry_total)",
        Kind::Gauge,
        &[],
        0.0,
    );
    add(
        "kafka_connect_task_error_deadletterqueue_produce_requests",
        "Records sent to the dead letter queue",
        Kind::Gauge,
        &[],
        dead,
    );
    add(
        "kafka_connect_task_error_deadletterqueue_produce_failures",
        "Dead letters the broker refused (pgoutbox stops instead)",
        Kind::Gauge,
        &[],
        0.0,
    );
    if let Some(p) = m.producer_stats() {
        producer(sheet, &p);
    }
}

/// A producer's figures under the Java producer's names (`producer-metrics`), and the network rates
/// Debezium's dashboard reads (`kafka_connect_metrics_*_byte_rate{client}`).
fn producer(sheet: &mut Sheet, p: &ClientStats) {
    client(sheet, "producer", p);
    let id = [("clientid", p.client_id.as_str())];
    let help = "Kafka Producer JMX metric type producer";
    for (name, v) in [("record_send_total", p.records_sent as f64), ("record_retry_total", p.retries as f64)] {
        sheet.add(&format!("kafka_producer_{name}"), help, Kind::Counter, &id, v);
    }
    for (name, v) in [
        ("record_queue_time_avg", p.record_queue_time_avg_ms),
        ("batch_size_avg", p.batch_size_avg),
        ("records_per_request_avg", p.records_per_request_avg),
        ("requests_in_flight", p.requests_in_flight as f64),
    ] {
        sheet.add(&format!("kafka_producer_{name}"), help, Kind::Gauge, &id, v);
    }
    let client = [("client", p.client_id.as_str())];
    sheet.add(
        "kafka_connect_metrics_incoming_byte_rate",
        "Bytes per second read from the brokers",
        Kind::Untyped,
        &client,
        p.incoming_byte_rate,
    );
    sheet.add(
        "kafka_connect_metrics_outgoing_byte_rate",
        "Bytes per second sent to the brokers",
        Kind::Untyped,
        &client,
        p.outgoing_byte_rate,
    );
}

/// What every Java client reports under `<kind>-metrics` (kind: producer, consumer).
fn client(sheet: &mut Sheet, kind: &str, p: &ClientStats) {
    let id = [("clientid", p.client_id.as_str())];
    let help = format!("Kafka {kind} JMX metric type {kind}");
    for (name, v) in [
        ("outgoing_byte_total", p.outgoing_bytes as f64),
        ("incoming_byte_total", p.incoming_bytes as f64),
        ("request_total", p.requests as f64),
        ("response_total", p.responses as f64),
    ] {
        sheet.add(&format!("kafka_{kind}_{name}"), &help, Kind::Counter, &id, v);
    }
    for (name, v) in [("connection_count", p.connections as f64), ("request_latency_avg", p.request_latency_avg_ms)] {
        sheet.add(&format!("kafka_{kind}_{name}"), &help, Kind::Gauge, &id, v);
    }
}

/// The worker: its connector and task counts, its group, its own consumers.
pub fn worker(sheet: &mut Sheet, sources: &[Source<'_>], figures: Option<&WorkerFigures>) {
    let tasks = sources.iter().filter(|s| s.state != "STOPPED").count();
    sheet.add(
        "kafka_connect_worker_connector_count",
        "The connectors this worker runs",
        Kind::Gauge,
        &[],
        sources.len() as f64,
    );
    sheet.add("kafka_connect_worker_task_count", "The tasks this worker runs", Kind::Gauge, &[], tasks as f64);
    let Some(figures) = figures else { return };
    if let Some(startups) = &figures.startups {
        for (what, starts) in [("connector", &startups.connector), ("task", &startups.task)] {
            let [attempts, successes, failures] = starts.counts();
            let help = "Kafka Connect JMX metric worker";
            sheet.add(
                &format!("kafka_connect_worker_{what}_startup_attempts_total"),
                help,
                Kind::Counter,
                &[],
                attempts as f64,
            );
            sheet.add(
                &format!("kafka_connect_worker_{what}_startup_success_total"),
                help,
                Kind::Counter,
                &[],
                successes as f64,
            );
            sheet.add(
                &format!("kafka_connect_worker_{what}_startup_failure_total"),
                help,
                Kind::Counter,
                &[],
                failures as f64,
            );
            let share = |n: u64| if attempts > 0 { n as f64 / attempts as f64 } else { 0.0 };
            sheet.add(
                &format!("kafka_connect_worker_{what}_startup_success_percentage"),
                help,
                Kind::Gauge,
                &[],
                share(successes),
            );
            sheet.add(
                &format!("kafka_connect_worker_{what}_startup_failure_percentage"),
                help,
                Kind::Gauge,
                &[],
                share(failures),
            );
        }
    }
    for c in &figures.consumers {
        client(sheet, "consumer", c);
    }
    let Some(group) = &figures.group else { return };
    let help = "Kafka Connect JMX metric rebalance information";
    sheet.add(
        "kafka_connect_worker_rebalance_completed_rebalances_total",
        help,
        Kind::Counter,
        &[],
        group.completed_rebalances as f64,
    );
    for (name, v) in [
        ("rebalancing", f64::from(u8::from(group.rebalancing))),
        ("epoch", group.epoch as f64),
        ("time_since_last_rebalance_ms", group.since_last_rebalance_ms as f64),
        ("rebalance_avg_time_ms", group.rebalance_avg_ms),
        ("rebalance_max_time_ms", group.rebalance_max_ms),
    ] {
        sheet.add(&format!("kafka_connect_worker_rebalance_{name}"), help, Kind::Gauge, &[], v);
    }
    let id = [("clientid", group.client_id.as_str())];
    let help = "Kafka Connect JMX metric assignment information";
    sheet.add(
        "kafka_connect_coordinator_assigned_connectors",
        help,
        Kind::Gauge,
        &id,
        group.assigned_connectors as f64,
    );
    sheet.add("kafka_connect_coordinator_assigned_tasks", help, Kind::Gauge, &id, group.assigned_tasks as f64);
}

/// Debezium's streaming and snapshot MBeans (`debezium.postgres:type=connector-metrics,context=…,
/// server=<topic.prefix>`), as Debezium's exporter configuration names them: CamelCase, untyped.
pub fn debezium(sheet: &mut Sheet, s: &Source<'_>, now_ms: u64) {
    let m = s.metrics;
    let g = Metrics::get;
    let mut add = |context: &str, attr: &str, help: &str, v: f64| {
        let labels = [("context", context), ("name", s.server), ("plugin", "postgres")];
        sheet.add(&format!("debezium_metrics_{attr}"), help, Kind::Untyped, &labels, v);
    };
    let state = m.state();
    let last = g(&m.last_event_ms);
    let since = |at: u64| if at == 0 { -1.0 } else { now_ms.saturating_sub(at) as f64 };
    let (creates, updates, deletes, filtered) =
        (g(&m.inserts_seen), g(&m.updates_seen), g(&m.deletes_seen), g(&m.events_filtered));
    let (capacity, remaining) = m.queue().map_or((0.0, 0.0), |(c, r)| (c as f64, r as f64));
    let streaming = "streaming";
    add(
        streaming,
        "Connected",
        "1 while the replication connection streams",
        f64::from(u8::from(state == RelayState::Streaming)),
    );
    add(
        streaming,
        "MilliSecondsBehindSource",
        "Milliseconds between the last event's commit and its read (-1: none)",
        if last == 0 { -1.0 } else { g(&m.behind_source_ms) as f64 },
    );
    // Debezium 3.6's lag statistics since the task started; null (left out by its exporter, so
    // absent here) before the first event.
    if let Some(f) = m.behind_source_figures() {
        let stats = [
            (
                "MilliSecondsBehindSourceMinValue",
                "The smallest MilliSecondsBehindSource of any event since the task started",
                f.min as f64,
            ),
            (
                "MilliSecondsBehindSourceMaxValue",
                "The largest MilliSecondsBehindSource of any event since the task started",
                f.max as f64,
            ),
            (
                "MilliSecondsBehindSourceAverageValue",
                "The average MilliSecondsBehindSource of the events since the task started",
                f.average,
            ),
            (
                "MilliSecondsBehindSourceP50",
                "The median MilliSecondsBehindSource of the events since the task started (1 % relative accuracy)",
                f.p50,
            ),
            (
                "MilliSecondsBehindSourceP95",
                "The 95th percentile of MilliSecondsBehindSource since the task started (1 % relative accuracy)",
                f.p95,
            ),
            (
                "MilliSecondsBehindSourceP99",
                "The 99th percentile of MilliSecondsBehindSource since the task started (1 % relative accuracy)",
                f.p99,
            ),
        ];
        for (attr, help, v) in stats {
            add(streaming, attr, help, v);
        }
    }
    add(streaming, "MilliSecondsSinceLastEvent", "Milliseconds since the last event was read (-1: none)", since(last));
    let messages = g(&m.messages_seen) + g(&m.messages_filtered);
    add(
        streaming,
        "TotalNumberOfEventsSeen",
        "Changes and logical decoding messages read (skipped operations left out, filtered ones included)",
        (creates + updates + deletes + messages) as f64,
    );
    add(streaming, "TotalNumberOfCreateEventsSeen", "INSERTs read", creates as f64);
    add(streaming, "TotalNumberOfUpdateEventsSeen", "UPDATEs read", updates as f64);
    add(streaming, "TotalNumberOfDeleteEventsSeen", "DELETEs read", deletes as f64);
    add(streaming, "TotalNumberOfReadEventsSeen", "Rows read by an incremental snapshot (pgoutbox runs none)", 0.0);
    add(streaming, "TotalNumberOfLogicalMessageEventsSeen", "Logical decoding messages read", messages as f64);
    add(
        streaming,
        "NumberOfEventsFiltered",
        "Changes the connector filtered out (tables the lists do not capture); what transforms drop is not counted",
        filtered as f64,
    );
    add(
        streaming,
        "NumberOfUnchangedEventsSkipped",
        "UPDATEs skipped for changing nothing (-1: skip.messages.without.change is off, as pgoutbox has it)",
        -1.0,
    );
    add(
        streaming,
        "NumberOfEventsSkipped",
        "NumberOfEventsFiltered under its name before Debezium 1.x renamed it",
        filtered as f64,
    );
    // Debezium counts the changes the connector itself cannot process; a record the Event Router
    // refuses is a transform's error, counted in kafka_connect_task_error_* as in Connect.
    add(streaming, "NumberOfErroneousEvents", "Changes the connector could not process (pgoutbox stops instead)", 0.0);
    add(streaming, "NumberOfCommittedTransactions", "Transactions read", g(&m.transactions_seen) as f64);
    add(streaming, "QueueTotalCapacity", "Batches the queue between source and sink holds", capacity);
    add(streaming, "QueueRemainingCapacity", "Batches free in the queue between source and sink", remaining);
    queue_bytes(&mut add, streaming);
    let snap = m.snapshot.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let snapshot = "snapshot";
    let running = state == RelayState::Snapshotting;
    add(snapshot, "SnapshotRunning", "1 while the initial snapshot runs", f64::from(u8::from(running)));
    add(snapshot, "SnapshotCompleted", "1 once the initial snapshot completed", f64::from(u8::from(snap.completed)));
    add(snapshot, "SnapshotAborted", "1 if the initial snapshot was cut short", f64::from(u8::from(snap.aborted)));
    add(snapshot, "SnapshotPaused", "1 while the snapshot is paused (pgoutbox never pauses one)", 0.0);
    let end = if snap.ended_ms > 0 { snap.ended_ms } else { now_ms };
    let duration = if snap.started_ms > 0 { end.saturating_sub(snap.started_ms) / 1000 } else { 0 };
    add(snapshot, "SnapshotDurationInSeconds", "How long the snapshot took (so far)", duration as f64);
    add(snapshot, "TotalTableCount", "Tables the snapshot reads", snap.total_tables as f64);
    add(snapshot, "RemainingTableCount", "Tables the snapshot has still to read", snap.remaining_tables as f64);
    add(snapshot, "SnapshotSkipped", "1 if the task started without a snapshot", f64::from(u8::from(snap.skipped)));
    add(snapshot, "SnapshotPausedDurationInSeconds", "How long the snapshot was paused (never)", 0.0);
    let rows = snap.rows_scanned.iter().map(|(_, n)| n).sum::<u64>() as f64;
    add(snapshot, "TotalNumberOfEventsSeen", "Rows the snapshot read", rows);
    add(snapshot, "TotalNumberOfReadEventsSeen", "Rows the snapshot read", rows);
    for op in ["Create", "Update", "Delete"] {
        add(snapshot, &format!("TotalNumberOf{op}EventsSeen"), "Changes a snapshot reads none of", 0.0);
    }
    // Rows a transform drops are not filtered events to Debezium (transforms run after it).
    add(snapshot, "NumberOfEventsFiltered", "Rows the connector filtered out of the snapshot (none)", 0.0);
    add(snapshot, "NumberOfEventsSkipped", "NumberOfEventsFiltered under its old name", 0.0);
    add(snapshot, "NumberOfErroneousEvents", "Rows the connector could not process (pgoutbox stops instead)", 0.0);
    add(
        snapshot,
        "MilliSecondsSinceLastEvent",
        "Milliseconds since the snapshot's last row (-1: none)",
        if snap.events == 0 { -1.0 } else { since(end) },
    );
    add(snapshot, "QueueTotalCapacity", "Batches the queue between source and sink holds", capacity);
    add(snapshot, "QueueRemainingCapacity", "Batches free in the queue between source and sink", remaining);
    queue_bytes(&mut add, snapshot);
    for (table, rows) in &snap.rows_scanned {
        let labels = [("context", "snapshot"), ("name", s.server), ("plugin", "postgres"), ("table", table.as_str())];
        sheet.add(
            "debezium_metrics_RowsScanned",
            "Rows the snapshot read, per table",
            Kind::Untyped,
            &labels,
            *rows as f64,
        );
    }
}

/// Debezium's queue limit in bytes (`max.queue.size.in.bytes`, 0: none, its default) and what the
/// queue holds under it, which Debezium only measures under a limit: pgoutbox bounds its queue in
/// batches and has no such limit, so both are 0, as Debezium reports them by default.
fn queue_bytes(add: &mut impl FnMut(&str, &str, &str, f64), context: &str) {
    add(context, "MaxQueueSizeInBytes", "The queue's limit in bytes (0: none)", 0.0);
    add(context, "CurrentQueueSizeInBytes", "Bytes in the queue, measured under a byte limit only", 0.0);
}
