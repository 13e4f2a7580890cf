//! The Prometheus exposition of the relays' metrics (prometheus-client, OpenMetrics text):
//! pgoutbox's own (`pgoutbox_*`), and Debezium's streaming metrics under the names and labels
//! Debezium's JMX-exporter configuration publishes (`debezium_metrics_<Attribute>{context="streaming",
//! name="<topic.prefix>",plugin="postgres"}`), so existing dashboards and alerts read them unchanged.

use std::sync::atomic::{AtomicI64, AtomicU64};

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::lsn::Lsn;
use crate::metrics::{Metrics, RelayState};

pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// One relay: its connector name, its `topic.prefix` (Debezium's server name) and its metrics.
pub struct Source<'a> {
    pub connector: &'a str,
    pub server: &'a str,
    pub metrics: &'a Metrics,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Debezium {
    context: String,
    name: String,
    plugin: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Connector {
    connector: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Lsns {
    connector: String,
    lsn: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Quantile {
    connector: String,
    quantile: String,
}

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

/// The metrics of every relay, in OpenMetrics text.
pub fn render(sources: &[Source<'_>], now_ms: u64) -> String {
    let mut r = Registry::default();
    let own = Own::register(&mut r);
    let debezium = DebeziumMetrics::register(&mut r);
    for s in sources {
        own.observe(s);
        debezium.observe(s, now_ms);
    }
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = encode(&mut out, &r);
    out
}

/// pgoutbox's own metrics, labelled by connector.
struct Own {
    acked: Family<Connector, Counter>,
    confirmed: Family<Connector, Counter>,
    sessions: Family<Connector, Counter>,
    confirmed_lsn: IntGauges<Connector>,
    lsn_text: IntGauges<Lsns>,
    received_lsn: IntGauges<Connector>,
    streaming: IntGauges<Connector>,
    wait: FloatGauges<Connector>,
    latency: FloatGauges<Quantile>,
}

impl Own {
    fn register(r: &mut Registry) -> Self {
        let wait = FloatGauges::<Connector>::default();
        r.register(
            "pgoutbox_unacknowledged_wait_seconds",
            "How long the oldest unacknowledged event has waited",
            wait.clone(),
        );
        let latency = FloatGauges::<Quantile>::default();
        r.register(
            "pgoutbox_commit_to_ack_seconds",
            "Commit-to-acknowledgement latency quantiles since start",
            latency.clone(),
        );
        Own {
            acked: counter(r, "pgoutbox_events_acked", "Events the broker acknowledged"),
            confirmed: counter(r, "pgoutbox_transactions_confirmed", "Transactions whose position was confirmed"),
            sessions: counter(r, "pgoutbox_sessions", "Replication sessions started"),
            confirmed_lsn: int_gauge(r, "pgoutbox_confirmed_lsn", "The confirmed LSN, as a number"),
            lsn_text: int_gauge(r, "pgoutbox_confirmed_lsn_text", "The confirmed LSN as PostgreSQL prints it"),
            received_lsn: int_gauge(r, "pgoutbox_received_lsn", "The LSN received from the server"),
            streaming: int_gauge(r, "pgoutbox_streaming", "1 while streaming"),
            wait,
            latency,
        }
    }

    fn observe(&self, s: &Source<'_>) {
        let m = s.metrics;
        let g = Metrics::get;
        let c = Connector { connector: s.connector.to_string() };
        self.acked.get_or_create(&c).inc_by(g(&m.events_acked));
        self.confirmed.get_or_create(&c).inc_by(g(&m.transactions_confirmed));
        self.sessions.get_or_create(&c).inc_by(g(&m.sessions));
        self.confirmed_lsn.get_or_create(&c).set(as_i64(g(&m.confirmed_lsn)));
        let lsn = Lsn(g(&m.confirmed_lsn)).to_string();
        self.lsn_text.get_or_create(&Lsns { connector: c.connector.clone(), lsn }).set(1);
        self.received_lsn.get_or_create(&c).set(as_i64(g(&m.received_lsn)));
        self.streaming.get_or_create(&c).set(i64::from(m.state() == RelayState::Streaming));
        self.wait.get_or_create(&c).set(g(&m.unacknowledged_wait_ms) as f64 / 1e3);
        let t = m.total();
        for (q, us) in [("0.5", t.p50_us), ("0.99", t.p99_us), ("0.999", t.p999_us)] {
            let labels = Quantile { connector: c.connector.clone(), quantile: q.into() };
            self.latency.get_or_create(&labels).set(us as f64 / 1e6);
        }
    }
}

/// Debezium's streaming and snapshot metrics, as its JMX exporter names and labels them.
struct DebeziumMetrics {
    behind: IntGauges<Debezium>,
    since: IntGauges<Debezium>,
    seen: IntGauges<Debezium>,
    created: IntGauges<Debezium>,
    committed: IntGauges<Debezium>,
    connected: IntGauges<Debezium>,
    snapshot_running: IntGauges<Debezium>,
}

impl DebeziumMetrics {
    fn register(r: &mut Registry) -> Self {
        let mut dbz = |attr: &str, help: &str| int_gauge::<Debezium>(r, &format!("debezium_metrics_{attr}"), help);
        DebeziumMetrics {
            behind: dbz("MilliSecondsBehindSource", "Milliseconds between the last event's commit and its read"),
            since: dbz("MilliSecondsSinceLastEvent", "Milliseconds since the last event was read (-1: none)"),
            seen: dbz("TotalNumberOfEventsSeen", "Outbox events read"),
            created: dbz("TotalNumberOfCreateEventsSeen", "Outbox INSERTs read"),
            committed: dbz("NumberOfCommittedTransactions", "Transactions read"),
            connected: dbz("Connected", "1 while the replication connection streams"),
            snapshot_running: dbz("SnapshotRunning", "1 while the initial snapshot runs"),
        }
    }

    fn observe(&self, s: &Source<'_>, now_ms: u64) {
        let m = s.metrics;
        let g = Metrics::get;
        let labels =
            |context: &str| Debezium { context: context.into(), name: s.server.to_string(), plugin: "postgres".into() };
        let streaming = labels("streaming");
        let state = m.state();
        let last = g(&m.last_event_ms);
        self.behind.get_or_create(&streaming).set(if last == 0 { -1 } else { as_i64(g(&m.behind_source_ms)) });
        self.since.get_or_create(&streaming).set(if last == 0 { -1 } else { as_i64(now_ms.saturating_sub(last)) });
        self.seen.get_or_create(&streaming).set(as_i64(g(&m.events_seen)));
        self.created.get_or_create(&streaming).set(as_i64(g(&m.events_seen)));
        self.committed.get_or_create(&streaming).set(as_i64(g(&m.transactions_seen)));
        self.connected.get_or_create(&streaming).set(i64::from(state == RelayState::Streaming));
        self.snapshot_running.get_or_create(&labels("snapshot")).set(i64::from(state == RelayState::Snapshotting));
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
        m.confirmed_lsn.store(0x1_0000_0010, Ordering::Relaxed);
        m.last_event_ms.store(1_000, Ordering::Relaxed);
        m.behind_source_ms.store(7, Ordering::Relaxed);
        m.unacknowledged_wait_ms.store(31_500, Ordering::Relaxed);
        m.set_state(RelayState::Streaming);
        let text = render(&[Source { connector: "orders", server: "dbserver1", metrics: &m }], 3_500);
        assert_eq!(sample(&text, "pgoutbox_events_acked_total{connector=\"orders\"}"), "42");
        assert_eq!(sample(&text, "pgoutbox_confirmed_lsn_text{connector=\"orders\",lsn=\"1/10\"}"), "1");
        assert_eq!(sample(&text, "pgoutbox_streaming{connector=\"orders\"}"), "1");
        assert_eq!(sample(&text, "pgoutbox_unacknowledged_wait_seconds{connector=\"orders\"}"), "31.5");
        let dbz = |attr: &str| {
            format!("debezium_metrics_{attr}{{context=\"streaming\",name=\"dbserver1\",plugin=\"postgres\"}}")
        };
        assert_eq!(sample(&text, &dbz("TotalNumberOfEventsSeen")), "43");
        assert_eq!(sample(&text, &dbz("MilliSecondsBehindSource")), "7");
        assert_eq!(sample(&text, &dbz("MilliSecondsSinceLastEvent")), "2500");
        assert_eq!(sample(&text, &dbz("Connected")), "1");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
}
