//! The benchmark's results: a table with ratios on stdout, result.json, result.md and chart.svg.

use std::path::Path;
use std::time::Duration;

use crate::procstat::Usage;
use crate::Args;

#[derive(Debug, Clone)]
pub struct Contender {
    pub name: String,
    pub events: usize,
    /// For the relays, from streaming start to the last acknowledgement (so it includes the time to
    /// the first event); for the ceilings, the whole run.
    pub drain: Duration,
    pub usage: Option<Usage>,
    /// From process start to the first event acknowledged.
    pub first_event: Option<Duration>,
    /// From process start to streaming.
    pub startup: Option<Duration>,
}

impl Contender {
    pub fn throughput(
        name: &str,
        events: usize,
        drain: Duration,
        usage: Option<Usage>,
        first_event: Option<Duration>,
    ) -> Self {
        Contender { name: name.into(), events, drain, usage, first_event, startup: None }
    }

    pub fn events_per_sec(&self) -> f64 {
        self.events as f64 / self.drain.as_secs_f64().max(1e-9)
    }

    pub fn line(&self) -> String {
        format!("{:.0} events/s ({} events in {:.2}s)", self.events_per_sec(), self.events, self.drain.as_secs_f64())
    }
}

#[derive(Debug, Clone)]
pub struct Steady {
    pub rate: usize,
    pub seconds: u64,
    pub events_written: usize,
    pub transactions: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// The part from commit to the relay's receipt of the transaction (server decoding and transfer).
    pub received_p50_ms: f64,
    pub received_p99_ms: f64,
    pub cpu_seconds: f64,
    pub peak_rss_mb: f64,
}

pub struct Results {
    pub args: Args,
    pub events: usize,
    pub payload_bytes: u64,
    pub decoding: Option<Contender>,
    pub broker: Option<Contender>,
    pub pgoutbox: Option<Contender>,
    pub debezium: Option<Contender>,
    pub steady: Option<Steady>,
}

impl Results {
    pub fn new(args: &Args, events: usize, payload_bytes: u64) -> Self {
        Results {
            args: args.clone(),
            events,
            payload_bytes,
            decoding: None,
            broker: None,
            pgoutbox: None,
            debezium: None,
            steady: None,
        }
    }

    fn mb_per_sec(&self, c: &Contender) -> f64 {
        self.payload_bytes as f64 / 1e6 / c.drain.as_secs_f64().max(1e-9)
    }

    fn contenders(&self) -> Vec<&Contender> {
        [&self.pgoutbox, &self.debezium, &self.decoding, &self.broker].into_iter().flatten().collect()
    }
}

fn ratio(a: Option<&Contender>, b: Option<&Contender>) -> Option<f64> {
    Some(a?.events_per_sec() / b?.events_per_sec())
}

pub fn table(r: &Results) -> String {
    let mut s = format!(
        "\n{} events, {} per transaction, ~{} B payloads ({:.1} MB of payload), {} aggregates\n\n",
        r.events,
        r.args.events_per_txn,
        r.args.payload_bytes,
        r.payload_bytes as f64 / 1e6,
        r.args.aggregates
    );
    s.push_str(&format!(
        "{:<52} {:>12} {:>8} {:>12} {:>10} {:>10} {:>10}\n",
        "catch-up", "events/s", "MB/s", "first event", "startup", "CPU s", "peak RSS"
    ));
    for c in r.contenders() {
        let opt = |d: Option<Duration>| d.map_or("-".to_string(), |d| format!("{:.3}s", d.as_secs_f64()));
        s.push_str(&format!(
            "{:<52} {:>12.0} {:>8.1} {:>12} {:>10} {:>10} {:>10}\n",
            c.name,
            c.events_per_sec(),
            r.mb_per_sec(c),
            opt(c.first_event),
            opt(c.startup),
            c.usage.map_or("-".into(), |u| format!("{:.1}", u.cpu_seconds)),
            c.usage.map_or("-".into(), |u| format!("{:.0} MB", u.peak_rss_mb)),
        ));
    }
    s.push('\n');
    let p = r.pgoutbox.as_ref();
    for (label, x) in [
        ("pgoutbox / Debezium", ratio(p, r.debezium.as_ref())),
        ("pgoutbox / decoding ceiling", ratio(p, r.decoding.as_ref())),
        ("pgoutbox / broker ceiling", ratio(p, r.broker.as_ref())),
    ] {
        if let Some(x) = x {
            s.push_str(&format!("{label:<30} {x:>6.2}x\n"));
        }
    }
    if let Some(st) = &r.steady {
        s.push_str(&format!(
            "\nsteady state {} events/s for {}s: commit-to-ack latency p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms over {} transactions; {:.1} CPU s, peak RSS {:.1} MB\n\
             (of which commit to receipt by the relay: p50 {:.2} ms, p99 {:.2} ms)\n",
            st.rate, st.seconds, st.p50_ms, st.p99_ms, st.max_ms, st.transactions, st.cpu_seconds, st.peak_rss_mb,
            st.received_p50_ms, st.received_p99_ms
        ));
    }
    s
}

fn contender_json(r: &Results, c: &Contender) -> serde_json::Value {
    serde_json::json!({
        "name": c.name,
        "events": c.events,
        "drain_seconds": c.drain.as_secs_f64(),
        "events_per_sec": c.events_per_sec(),
        "payload_mb_per_sec": r.mb_per_sec(c),
        "first_event_seconds": c.first_event.map(|d| d.as_secs_f64()),
        "startup_seconds": c.startup.map(|d| d.as_secs_f64()),
        "cpu_seconds": c.usage.map(|u| u.cpu_seconds),
        "peak_rss_mb": c.usage.map(|u| u.peak_rss_mb),
    })
}

pub fn write(r: &Results, out: &Path) -> anyhow::Result<()> {
    let p = r.pgoutbox.as_ref();
    let json = serde_json::json!({
        "workload": {
            "events": r.events, "events_per_txn": r.args.events_per_txn, "payload_bytes": r.args.payload_bytes,
            "aggregates": r.args.aggregates, "partitions": r.args.partitions, "payload_total_bytes": r.payload_bytes,
        },
        "pgoutbox": p.map(|c| contender_json(r, c)),
        "debezium": r.debezium.as_ref().map(|c| contender_json(r, c)),
        "decoding_ceiling": r.decoding.as_ref().map(|c| contender_json(r, c)),
        "broker_ceiling": r.broker.as_ref().map(|c| contender_json(r, c)),
        "ratios": {
            "pgoutbox_over_debezium": ratio(p, r.debezium.as_ref()),
            "pgoutbox_over_decoding_ceiling": ratio(p, r.decoding.as_ref()),
            "pgoutbox_over_broker_ceiling": ratio(p, r.broker.as_ref()),
        },
        "steady_state": r.steady.as_ref().map(|s| serde_json::json!({
            "rate": s.rate, "seconds": s.seconds, "events_written": s.events_written, "transactions": s.transactions,
            "p50_ms": s.p50_ms, "p99_ms": s.p99_ms, "max_ms": s.max_ms,
            "received_p50_ms": s.received_p50_ms, "received_p99_ms": s.received_p99_ms, "cpu_seconds": s.cpu_seconds, "peak_rss_mb": s.peak_rss_mb,
        })),
    });
    std::fs::write(out.join("result.json"), serde_json::to_string_pretty(&json)?)?;
    std::fs::write(out.join("result.md"), format!("```\n{}```\n", table(r)))?;
    std::fs::write(out.join("chart.svg"), svg(r))?;
    Ok(())
}

/// A horizontal bar chart of catch-up throughput.
fn svg(r: &Results) -> String {
    let bars: Vec<(&str, f64)> = r.contenders().iter().map(|c| (c.name.as_str(), c.events_per_sec())).collect();
    let max = bars.iter().map(|b| b.1).fold(1.0, f64::max);
    let (w, label_w, bar_h, gap) = (900.0, 360.0, 34.0, 14.0);
    let h = 60.0 + bars.len() as f64 * (bar_h + gap);
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"14\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"10\" y=\"24\" font-size=\"16\" font-weight=\"bold\">Catch-up throughput, {} events of ~{} B (events/s, higher is better)</text>\n",
        r.events, r.args.payload_bytes
    );
    for (i, (name, v)) in bars.iter().enumerate() {
        let y = 44.0 + i as f64 * (bar_h + gap);
        let bw = (w - label_w - 120.0) * v / max;
        let color = if name.starts_with("pgoutbox") {
            "#2b7bb9"
        } else if name.starts_with("Debezium") {
            "#d9822b"
        } else {
            "#9aa5b1"
        };
        s.push_str(&format!(
            "<text x=\"10\" y=\"{:.0}\">{}</text><rect x=\"{label_w}\" y=\"{y:.0}\" width=\"{bw:.0}\" height=\"{bar_h}\" fill=\"{color}\"/>\
             <text x=\"{:.0}\" y=\"{:.0}\">{:.0}</text>\n",
            y + bar_h * 0.65,
            name.replace('&', "&amp;").replace('<', "&lt;"),
            label_w + bw + 8.0,
            y + bar_h * 0.65,
            v
        ));
    }
    s.push_str("</svg>\n");
    s
}
