//! The Prometheus exposition of the relays' metrics: pgoutbox's own (`pgoutbox_*`, with
//! prometheus-client), the process's (`process_*`), and Connect's, Debezium's and the Kafka clients'
//! under the names their exporters give them (`connect`). Served as OpenMetrics to a scraper that
//! asks for it (Prometheus does), else in the text format 0.0.4 (`curl`, `promtool check metrics`).

mod connect;
mod sheet;

pub use connect::{Group, Startups, WorkerFigures};
pub use sheet::Format;

use std::sync::atomic::{AtomicI64, AtomicU64};

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::Registry;

use crate::metrics::{Metrics, RelayState};

pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
pub const TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The format a scrape with this `Accept` header gets, and its content type: OpenMetrics when the
/// scraper accepts it (as Prometheus does), else the text format every parser reads.
pub fn negotiate(accept: Option<&str>) -> (Format, &'static str) {
    match accept {
        Some(a) if a.contains("application/openmetrics-text") => (Format::OpenMetrics, CONTENT_TYPE),
        _ => (Format::Text, TEXT_CONTENT_TYPE),
    }
}

/// One relay: its connector name, its `topic.prefix` (Debezium's server name), its metrics, and its
/// task's state as Connect names it (`RUNNING`, `PAUSED`, `STOPPED`, `FAILED`, `UNASSIGNED`).
pub struct Source<'a> {
    pub connector: &'a str,
    pub server: &'a str,
    pub metrics: &'a Metrics,
    pub state: &'a str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Connector {
    connector: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Topic {
    connector: String,
    topic: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorClass {
    connector: String,
    class: String,
}

/// A histogram whose buckets were counted elsewhere (the relay's own fine-grained histogram), for
/// the exposition: sum, count, and per bucket its upper bound and the samples in it alone.
#[derive(Debug, Default)]
struct Counted(std::sync::Mutex<Buckets>);

/// Sum, count, and (upper bound, samples in this bucket alone) per bucket.
type Buckets = (f64, u64, Vec<(f64, u64)>);

impl TypedMetric for Counted {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for Counted {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let h = self.0.lock().unwrap_or_else(|e| e.into_inner());
        encoder.encode_histogram::<NoLabelSet>(h.0, h.1, &h.2, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

/// The commit-to-ack histogram's bounds, in seconds: from a millisecond to a minute.
const LATENCY_BOUNDS_S: [f64; 15] =
    [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];

type IntGauges<L> = Family<L, Gauge<i64, AtomicI64>>;
type FloatGauges<L> = Family<L, Gauge<f64, AtomicU64>>;

fn int_gauge<L: EncodeLabelSet + Clone + std::hash::Hash + Eq + std::fmt::Debug + Send + Sync + 'static>(
    r: &mut Registry,
    name: &str,
    help: &str,
) -> IntGauges<L> {
    let f = IntGauges::<L>::default();
    r.register(name, help, f.clone());
    f
}

fn counter(r: &mut Registry, name: &str, help: &str) -> Family<Connector, Counter> {
    let f = Family::<Connector, Counter>::default();
    r.register(name, help, f.clone());
    f
}

fn as_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// The metrics of every relay (and of the worker that runs them, when it is one) in `format`.
pub fn render(sources: &[Source<'_>], worker: Option<&WorkerFigures>, now_ms: u64, format: Format) -> String {
    // prometheus-client writes label values as they are: a connector name, server name or topic
    // with a quote, backslash or newline would end the label and break the whole scrape.
    // The sheet escapes what it writes; prometheus-client does not, so pgoutbox's own families get
    // the names escaped here (escaping both would double the backslashes of the sheet's families).
    let escaped: Vec<(String, String)> = sources.iter().map(|s| (escape(s.connector), escape(s.server))).collect();
    let mut r = Registry::default();
    let own = Own::register(&mut r);
    let mut sheet = sheet::Sheet::default();
    let now = std::time::Instant::now();
    for (s, (connector, server)) in sources.iter().zip(&escaped) {
        own.observe(&Source { connector, server, metrics: s.metrics, state: s.state });
        connect::connector(&mut sheet, s, now);
        connect::debezium(&mut sheet, s, now_ms);
    }
    connect::worker(&mut sheet, sources, worker);
    process(&mut r);
    let mut own_text = String::new();
    // Writing to a String cannot fail.
    let _ = encode(&mut own_text, &r);
    let mut out = match format {
        Format::OpenMetrics => own_text.strip_suffix("# EOF\n").unwrap_or(&own_text).to_string(),
        Format::Text => sheet::openmetrics_to_text(&own_text),
    };
    sheet.write(&mut out, format);
    if format == Format::OpenMetrics {
        out.push_str("# EOF\n");
    }
    out
}

/// The process metrics every Prometheus client library exports (`process_*`, as the Java and Go
/// clients name them), read from `/proc/self`; a value that cannot be read is left out.
fn process(r: &mut Registry) {
    let p = ProcessStats::read();
    let mut gauge = |name: &str, help: &str, v: Option<f64>| {
        if let Some(v) = v {
            let g = Gauge::<f64, AtomicU64>::default();
            g.set(v);
            r.register(name, help, g);
        }
    };
    gauge("process_resident_memory_bytes", "Resident memory size in bytes.", p.rss_bytes);
    gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.", p.vsize_bytes);
    gauge("process_open_fds", "Number of open file descriptors.", p.open_fds);
    gauge("process_max_fds", "Maximum number of open file descriptors.", p.max_fds);
    gauge("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", p.start_time_s);
    gauge("process_threads", "Number of OS threads in the process.", p.threads);
    if let Some(cpu) = p.cpu_s {
        let c = Counter::<f64, AtomicU64>::default();
        c.inc_by(cpu);
        r.register("process_cpu_seconds", "Total user and system CPU time spent in seconds.", c);
    }
}

/// What `/proc/self` says of this process.
#[derive(Debug, Default)]
struct ProcessStats {
    cpu_s: Option<f64>,
    rss_bytes: Option<f64>,
    vsize_bytes: Option<f64>,
    open_fds: Option<f64>,
    max_fds: Option<f64>,
    start_time_s: Option<f64>,
    threads: Option<f64>,
}

/// Clock ticks per second in `/proc`'s times: USER_HZ, 100 on every Linux ABI pgoutbox builds for.
const USER_HZ: f64 = 100.0;

impl ProcessStats {
    fn read() -> ProcessStats {
        let mut p = ProcessStats::default();
        // /proc/self/stat: the fields after the command's closing parenthesis, from field 3 (state).
        if let Ok(stat) = std::fs::read_to_string("/proc/self/stat") {
            if let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) {
                let f: Vec<&str> = rest.split_whitespace().collect();
                let num = |i: usize| f.get(i - 3).and_then(|v| v.parse::<f64>().ok());
                p.cpu_s = num(14).zip(num(15)).map(|(u, s)| (u + s) / USER_HZ);
                p.threads = num(20);
                p.vsize_bytes = num(23);
                let boot = std::fs::read_to_string("/proc/stat").ok().and_then(|s| {
                    s.lines().find_map(|l| l.strip_prefix("btime ")).and_then(|v| v.trim().parse::<f64>().ok())
                });
                p.start_time_s = num(22).zip(boot).map(|(ticks, boot)| boot + ticks / USER_HZ);
            }
        }
        if let Ok(status) = std::fs::read_to_string("/proc/self/status") {
            p.rss_bytes = status.lines().find_map(|l| l.strip_prefix("VmRSS:")).and_then(|v| {
                v.trim().strip_suffix("kB").and_then(|kb| kb.trim().parse::<f64>().ok()).map(|kb| kb * 1024.0)
            });
        }
        p.open_fds = std::fs::read_dir("/proc/self/fd").ok().map(|d| d.count() as f64);
        if let Ok(limits) = std::fs::read_to_string("/proc/self/limits") {
            p.max_fds = limits
                .lines()
                .find(|l| l.starts_with("Max open files"))
                .and_then(|l| l.split_whitespace().nth(3))
                .and_then(|v| v.parse::<f64>().ok());
        }
        p
    }
}

/// A label value as the exposition formats require it: backslash, double quote and line feed escaped.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// pgoutbox's own metrics, labelled by connector.
struct Own {
    acked: Family<Connector, Counter>,
    confirmed: Family<Connector, Counter>,
    kafka_transactions: Family<Connector, Counter>,
    sessions: Family<Connector, Counter>,
    confirmed_lsn: IntGauges<Connector>,
    received_lsn: IntGauges<Connector>,
    streaming: IntGauges<Connector>,
    wait: FloatGauges<Connector>,
    latency_histogram: Family<Connector, Counted>,
    lag_bytes: IntGauges<Connector>,
    lag_seconds: FloatGauges<Connector>,
    unpublished: IntGauges<Connector>,
    oldest_unpublished: FloatGauges<Connector>,
    stalled: IntGauges<Connector>,
    pruned: Family<Connector, Counter>,
    reconnects: Family<Connector, Counter>,
    partition_changes: Family<Connector, Counter>,
    topic_records: Family<Topic, Counter>,
    topic_bytes: Family<Topic, Counter>,
    errors: Family<ErrorClass, Counter>,
}

impl Own {
    fn register(r: &mut Registry) -> Self {
        let wait = FloatGauges::<Connector>::default();
        r.register(
            "pgoutbox_unacknowledged_wait_seconds",
            "How long the oldest unacknowledged event has waited",
            wait.clone(),
        );
        let lag_seconds = FloatGauges::<Connector>::default();
        r.register(
            "pgoutbox_slot_lag_seconds",
            "How long ago the oldest transaction read but not yet confirmed to the slot committed (0 when all are confirmed)",
            lag_seconds.clone(),
        );
        let latency_histogram = Family::<Connector, Counted>::default();
        r.register(
            "pgoutbox_commit_to_ack_latency_seconds",
            "Commit-to-acknowledgement latency per transaction with events, since start",
            latency_histogram.clone(),
        );
        let per_topic = |r: &mut Registry, name: &str, help: &str| {
            let f = Family::<Topic, Counter>::default();
            r.register(name, help, f.clone());
            f
        };
        let errors = Family::<ErrorClass, Counter>::default();
        r.register(
            "pgoutbox_errors",
            "Events skipped under errors.tolerance=all, by class (route: the router refused the row; delivery: the broker refused the record), and dead letters queued",
            errors.clone(),
        );
        let oldest_unpublished = FloatGauges::<Connector>::default();
        r.register(
            "pgoutbox_outbox_oldest_unpublished_age_seconds",
            "Age of the oldest outbox event committed but not yet acknowledged by the broker (polling: the oldest unpublished row; log tailing: the oldest transaction read but not yet confirmed); 0 when none",
            oldest_unpublished.clone(),
        );
        Own {
            unpublished: int_gauge(
                r,
                "pgoutbox_outbox_unpublished_events",
                "Outbox events committed but not yet acknowledged by the broker (polling: unpublished rows in the table; log tailing: events decoded but not yet acknowledged, WAL not decoded yet is in pgoutbox_slot_lag_bytes)",
            ),
            oldest_unpublished,
            stalled: int_gauge(
                r,
                "pgoutbox_outbox_stalled",
                "1 while the oldest unpublished event is older than pgoutbox.stall.threshold.ms",
            ),
            pruned: counter(r, "pgoutbox_outbox_pruned_rows", "Outbox rows deleted or archived by pgoutbox.prune.*"),
            latency_histogram,
            lag_bytes: int_gauge(
                r,
                "pgoutbox_slot_lag_bytes",
                "WAL bytes between the server's position as last heard and the confirmed position",
            ),
            lag_seconds,
            reconnects: counter(r, "pgoutbox_reconnects", "Replication sessions started after the first"),
            partition_changes: counter(
                r,
                "pgoutbox_topic_partition_changes",
                "Times a topic this connector produces to was seen with another partition count than when it first produced to it: keys may map to other partitions from then on, so an aggregate's events before and after may be read out of order",
            ),
            topic_records: per_topic(r, "pgoutbox_topic_records_sent", "Records handed to the producer, per topic"),
            topic_bytes: per_topic(
                r,
                "pgoutbox_topic_bytes_sent",
                "Key, value and header bytes handed to the producer, per topic",
            ),
            errors,
            acked: counter(r, "pgoutbox_events_acked", "Events the broker acknowledged"),
            confirmed: counter(r, "pgoutbox_transactions_confirmed", "Transactions whose position was confirmed"),
            kafka_transactions: counter(
                r,
                "pgoutbox_kafka_transactions_committed",
                "Kafka transactions committed (exactly.once.source.support=enabled), each with its offset record",
            ),
            sessions: counter(r, "pgoutbox_sessions", "Replication sessions started"),
            confirmed_lsn: int_gauge(r, "pgoutbox_confirmed_lsn", "The confirmed LSN, as a number"),
            received_lsn: int_gauge(r, "pgoutbox_received_lsn", "The LSN received from the server"),
            streaming: int_gauge(r, "pgoutbox_streaming", "1 while streaming"),
            wait,
        }
    }

    fn observe(&self, s: &Source<'_>) {
        let m = s.metrics;
        let g = Metrics::get;
        let c = Connector { connector: s.connector.to_string() };
        self.acked.get_or_create(&c).inc_by(g(&m.events_acked));
        self.confirmed.get_or_create(&c).inc_by(g(&m.transactions_confirmed));
        self.kafka_transactions.get_or_create(&c).inc_by(g(&m.kafka_transactions));
        self.sessions.get_or_create(&c).inc_by(g(&m.sessions));
        self.confirmed_lsn.get_or_create(&c).set(as_i64(g(&m.confirmed_lsn)));
        self.received_lsn.get_or_create(&c).set(as_i64(g(&m.received_lsn)));
        self.streaming.get_or_create(&c).set(i64::from(m.state() == RelayState::Streaming));
        self.wait.get_or_create(&c).set(g(&m.unacknowledged_wait_ms) as f64 / 1e3);
        let bounds_us = LATENCY_BOUNDS_S.map(|s| (s * 1e6) as u64);
        let (sum_us, count, counts) = m.latency_buckets(&bounds_us);
        let buckets = LATENCY_BOUNDS_S.iter().copied().chain([f64::MAX]).zip(counts).collect();
        *self.latency_histogram.get_or_create(&c).0.lock().unwrap_or_else(|e| e.into_inner()) =
            (sum_us as f64 / 1e6, count, buckets);
        self.lag_bytes.get_or_create(&c).set(as_i64(g(&m.received_lsn).saturating_sub(g(&m.confirmed_lsn))));
        self.lag_seconds.get_or_create(&c).set(g(&m.slot_lag_ms) as f64 / 1e3);
        self.unpublished.get_or_create(&c).set(as_i64(g(&m.unpublished_events)));
        self.oldest_unpublished.get_or_create(&c).set(g(&m.oldest_unpublished_ms) as f64 / 1e3);
        self.pruned.get_or_create(&c).inc_by(g(&m.pruned_rows));
        self.stalled.get_or_create(&c).set(i64::from(m.stalled.load(std::sync::atomic::Ordering::Relaxed)));
        self.reconnects.get_or_create(&c).inc_by(g(&m.sessions).saturating_sub(1));
        self.partition_changes.get_or_create(&c).inc_by(g(&m.partition_changes));
        for (topic, records, bytes) in m.sent_by_topic() {
            let labels = Topic { connector: c.connector.clone(), topic: escape(&topic) };
            self.topic_records.get_or_create(&labels).inc_by(records);
            self.topic_bytes.get_or_create(&labels).inc_by(bytes);
        }
        for (class, n) in
            [("route", &m.route_errors), ("delivery", &m.delivery_errors), ("dead_letter", &m.dead_letters)]
        {
            self.errors.get_or_create(&ErrorClass { connector: c.connector.clone(), class: class.into() }).inc_by(g(n));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::*;

    fn sample(text: &str, name: &str) -> String {
        let line = text
            .lines()
            .find(|l| l.split(' ').next() == Some(name))
            .unwrap_or_else(|| panic!("{name} missing:\n{text}"));
        line[name.len() + 1..].to_string()
    }

    #[test]
    fn pgoutbox_and_debezium_names() {
        let m = Metrics::default();
        m.events_acked.store(42, Ordering::Relaxed);
        m.events_seen.store(43, Ordering::Relaxed);
        m.inserts_seen.store(40, Ordering::Relaxed);
        m.updates_seen.store(3, Ordering::Relaxed);
        m.confirmed_lsn.store(0x1_0000_0010, Ordering::Relaxed);
        m.last_event_ms.store(1_000, Ordering::Relaxed);
        m.behind_source_ms.store(7, Ordering::Relaxed);
        m.unacknowledged_wait_ms.store(31_500, Ordering::Relaxed);
        m.set_state(RelayState::Streaming);
        let text = render(
            &[Source { connector: "orders", server: "dbserver1", metrics: &m, state: "RUNNING" }],
            None,
            3_500,
            Format::OpenMetrics,
        );
        assert_eq!(sample(&text, "pgoutbox_events_acked_total{connector=\"orders\"}"), "42");
        assert!(!text.contains("lsn=\""), "no series whose label changes with every position:\n{text}");
        assert_eq!(sample(&text, "pgoutbox_streaming{connector=\"orders\"}"), "1");
        assert_eq!(sample(&text, "pgoutbox_unacknowledged_wait_seconds{connector=\"orders\"}"), "31.5");
        let dbz = |attr: &str| {
            format!("debezium_metrics_{attr}{{context=\"streaming\",name=\"dbserver1\",plugin=\"postgres\"}}")
        };
        assert_eq!(sample(&text, &dbz("TotalNumberOfEventsSeen")), "43");
        assert_eq!(sample(&text, &dbz("TotalNumberOfCreateEventsSeen")), "40");
        assert_eq!(sample(&text, &dbz("NumberOfUnchangedEventsSkipped")), "-1");
        assert_eq!(sample(&text, &dbz("MilliSecondsBehindSource")), "7");
        assert_eq!(sample(&text, &dbz("MilliSecondsSinceLastEvent")), "2500");
        assert_eq!(sample(&text, &dbz("Connected")), "1");
        assert!(
            !text.contains("MilliSecondsBehindSourceP50"),
            "no lag statistics before the first event (Debezium's are null):\n{text}"
        );
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    /// Debezium 3.6's lag statistics, under the names its exporter rules give them.
    #[test]
    fn lag_statistics_as_debezium_names_them() {
        let m = Metrics::default();
        m.record_behind_source(10, 3);
        m.record_behind_source(40, 1);
        m.record_behind_source(200, 1);
        m.last_event_ms.store(1_000, Ordering::Relaxed);
        m.set_state(RelayState::Streaming);
        let text = render(
            &[Source { connector: "orders", server: "dbserver1", metrics: &m, state: "RUNNING" }],
            None,
            3_500,
            Format::Text,
        );
        let dbz = |attr: &str| {
            let name =
                format!("debezium_metrics_{attr}{{context=\"streaming\",name=\"dbserver1\",plugin=\"postgres\"}}");
            sample(&text, &name).parse::<f64>().unwrap()
        };
        assert_eq!(dbz("MilliSecondsBehindSource"), 200.0, "the last transaction's");
        assert_eq!(dbz("MilliSecondsBehindSourceMinValue"), 10.0);
        assert_eq!(dbz("MilliSecondsBehindSourceMaxValue"), 200.0);
        assert_eq!(dbz("MilliSecondsBehindSourceAverageValue"), (3.0 * 10.0 + 40.0 + 200.0) / 5.0);
        let near = |got: f64, want: f64| (got - want).abs() <= want * 0.01;
        assert!(near(dbz("MilliSecondsBehindSourceP50"), 10.0), "{text}");
        // DDSketch's rank, q * (count - 1), falls on the fourth of the five events for both.
        assert!(near(dbz("MilliSecondsBehindSourceP95"), 40.0), "{text}");
        assert!(near(dbz("MilliSecondsBehindSourceP99"), 40.0), "{text}");
    }

    /// The process metrics every exporter has, with the values `/proc` gives this test's process.
    #[test]
    fn process_metrics_as_every_exporter_names_them() {
        let text = render(&[], None, 0, Format::OpenMetrics);
        let num = |name: &str| sample(&text, name).parse::<f64>().unwrap();
        let rss = num("process_resident_memory_bytes");
        assert!(rss > 1e6 && rss < 1e11, "{rss}");
        assert!(num("process_virtual_memory_bytes") >= rss);
        assert!(num("process_open_fds") >= 3.0);
        assert!(num("process_max_fds") >= num("process_open_fds"));
        assert!(num("process_cpu_seconds_total") > 0.0 || text.contains("process_cpu_seconds_total 0"));
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
        let start = num("process_start_time_seconds");
        assert!(start <= now + 1.0 && start > now - 86_400.0, "started within the day: {start} (now {now})");
        assert!(num("process_threads") >= 1.0);
        assert!(text.contains("# TYPE process_cpu_seconds counter"), "{text}");
    }

    /// The relay's own aggregatable metrics: a real histogram of commit-to-ack latency (cumulative
    /// buckets, sum and count), slot lag, reconnects, per-topic records and bytes, errors by class.
    #[test]
    fn pgoutbox_histogram_lag_topics_and_errors() {
        let m = Metrics::default();
        for us in [800, 3_000, 3_000, 40_000, 2_000_000] {
            m.record_latency_us(us);
        }
        m.received_lsn.store(1_000, Ordering::Relaxed);
        m.confirmed_lsn.store(400, Ordering::Relaxed);
        m.slot_lag_ms.store(2_500, Ordering::Relaxed);
        m.sessions.store(3, Ordering::Relaxed);
        m.record_sent(&std::sync::Arc::from("outbox.event.Order"), 2, 300);
        m.route_errors.store(1, Ordering::Relaxed);
        m.dead_letters.store(1, Ordering::Relaxed);
        let text = render(
            &[Source { connector: "o", server: "s", metrics: &m, state: "RUNNING" }],
            None,
            0,
            Format::OpenMetrics,
        );
        let bucket = |le: &str| {
            sample(&text, &format!("pgoutbox_commit_to_ack_latency_seconds_bucket{{le=\"{le}\",connector=\"o\"}}"))
        };
        assert_eq!(bucket("0.001"), "1");
        assert_eq!(bucket("0.005"), "3");
        assert_eq!(bucket("0.05"), "4");
        assert_eq!(bucket("1.0"), "4");
        assert_eq!(bucket("2.5"), "5");
        assert_eq!(bucket("+Inf"), "5");
        assert_eq!(sample(&text, "pgoutbox_commit_to_ack_latency_seconds_count{connector=\"o\"}"), "5");
        assert_eq!(sample(&text, "pgoutbox_commit_to_ack_latency_seconds_sum{connector=\"o\"}"), "2.0468");
        assert_eq!(sample(&text, "pgoutbox_slot_lag_bytes{connector=\"o\"}"), "600");
        assert_eq!(sample(&text, "pgoutbox_slot_lag_seconds{connector=\"o\"}"), "2.5");
        assert_eq!(sample(&text, "pgoutbox_reconnects_total{connector=\"o\"}"), "2");
        let topic = "{connector=\"o\",topic=\"outbox.event.Order\"}";
        assert_eq!(sample(&text, &format!("pgoutbox_topic_records_sent_total{topic}")), "2");
        assert_eq!(sample(&text, &format!("pgoutbox_topic_bytes_sent_total{topic}")), "300");
        assert_eq!(sample(&text, "pgoutbox_errors_total{connector=\"o\",class=\"route\"}"), "1");
        assert_eq!(sample(&text, "pgoutbox_errors_total{connector=\"o\",class=\"delivery\"}"), "0");
        assert_eq!(sample(&text, "pgoutbox_errors_total{connector=\"o\",class=\"dead_letter\"}"), "1");
    }

    /// Connect's metrics as Strimzi's JMX-exporter rules name them: one task per connector, its status
    /// as a label, the worker's counts; a stopped connector keeps its worker counts but has no task.
    #[test]
    fn connect_names_follow_the_task_states() {
        let (running, paused, stopped) = (Metrics::default(), Metrics::default(), Metrics::default());
        running.records_polled.store(5, Ordering::Relaxed);
        running.events_seen.store(5, Ordering::Relaxed);
        running.events_acked.store(4, Ordering::Relaxed);
        let text = render(
            &[
                Source { connector: "a", server: "s1", metrics: &running, state: "RUNNING" },
                Source { connector: "b", server: "s2", metrics: &paused, state: "PAUSED" },
                Source { connector: "c", server: "s3", metrics: &stopped, state: "STOPPED" },
            ],
            None,
            0,
            Format::OpenMetrics,
        );
        let task = |c: &str| format!("{{connector=\"{c}\",task=\"0\"}}");
        assert_eq!(sample(&text, "kafka_connect_connector_status{connector=\"a\",status=\"running\"}"), "1");
        assert_eq!(sample(&text, "kafka_connect_connector_status{connector=\"b\",status=\"paused\"}"), "1");
        assert_eq!(sample(&text, "kafka_connect_connector_status{connector=\"c\",status=\"stopped\"}"), "1");
        let status = |c: &str, s: &str| {
            format!("kafka_connect_connector_task_status{{connector=\"{c}\",task=\"0\",status=\"{s}\"}}")
        };
        assert_eq!(
            (sample(&text, &status("a", "running")), sample(&text, &status("b", "paused"))),
            ("1".into(), "1".into())
        );
        assert!(
            !text.contains("kafka_connect_connector_task_status{connector=\"c\""),
            "a stopped connector has no task:\n{text}"
        );
        assert_eq!(sample(&text, &format!("kafka_connect_source_task_source_record_poll_total{}", task("a"))), "5");
        assert_eq!(sample(&text, &format!("kafka_connect_source_task_source_record_write_total{}", task("a"))), "4");
        assert_eq!(sample(&text, &format!("kafka_connect_connector_task_running_ratio{}", task("b"))), "0");
        assert_eq!(sample(&text, "kafka_connect_worker_connector_count"), "3");
        assert_eq!(sample(&text, "kafka_connect_worker_task_count"), "2");
        let count = |state: &str, c: &str| {
            sample(&text, &format!("kafka_connect_worker_connector_{state}_task_count{{connector=\"{c}\"}}"))
        };
        assert_eq!(
            (count("running", "a"), count("paused", "a"), count("total", "a")),
            ("1".into(), "0".into(), "1".into())
        );
        assert_eq!((count("running", "b"), count("paused", "b")), ("0".into(), "1".into()));
        assert_eq!((count("running", "c"), count("total", "c")), ("0".into(), "0".into()));
    }

    /// A name with a quote, a backslash and a line feed (a standalone worker's connector from a
    /// file, a topic from an aggregatetype) stays one label value: every sample line parses.
    #[test]
    fn label_values_are_escaped() {
        let m = Metrics::default();
        m.record_sent(&std::sync::Arc::from("t\"x"), 1, 10);
        let name = "a\"b\\c\nd";
        let text = render(
            &[Source { connector: name, server: "s\"", metrics: &m, state: "RUNNING" }],
            None,
            0,
            Format::OpenMetrics,
        );
        assert!(text.contains("connector=\"a\\\"b\\\\c\\nd\""), "{text}");
        // Escaped once in every family, the borrowed ones (written by the sheet) too.
        assert!(
            text.contains("kafka_connect_connector_status{connector=\"a\\\"b\\\\c\\nd\",status=\"running\"} 1"),
            "{text}"
        );
        assert!(text.contains("name=\"s\\\"\""), "{text}");
        assert!(text.contains("topic=\"t\\\"x\""), "{text}");
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let unescaped = line.replace("\\\\", "").replace("\\\"", "");
            assert_eq!(unescaped.matches('"').count() % 2, 0, "a label value ends early: {line}");
            assert!(line.contains(' '), "a sample line was cut: {line}");
        }
    }
}
