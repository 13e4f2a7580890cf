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

/// One relay at one steady rate.
#[derive(Debug, Clone)]
pub struct Window {
    pub rate: usize,
    pub seconds: f64,
    pub events_written: usize,
    pub transactions: usize,
    /// Records the consumer saw from the window's start until it had seen as many as were written
    /// (or 60 s more had passed).
    pub events_consumed: usize,
    /// Records the consumer had seen when the CPU was read (the work that CPU paid for).
    pub delivered_with_cpu: usize,
    /// From the application sending the transaction to the consumer reading the record.
    pub e2e_p50_ms: f64,
    pub e2e_p99_ms: f64,
    pub e2e_max_ms: f64,
    /// pgoutbox only: from the commit to the broker's acknowledgement of the transaction's last event.
    pub ack_p50_ms: Option<f64>,
    pub ack_p99_ms: Option<f64>,
    /// pgoutbox only: the part from the commit to the relay's receipt of the transaction.
    pub received_p99_ms: Option<f64>,
    /// The relay's CPU over the window and the second after it (not while a relay that fell behind
    /// catches up).
    pub cpu_seconds: f64,
    pub peak_rss_mb: f64,
}

impl Window {
    pub fn new(
        rate: usize,
        writing: Duration,
        events_written: usize,
        latencies: &mut [u64],
        usage: Usage,
        cpu_before: f64,
        shape: &crate::workload::Shape,
    ) -> Self {
        Window {
            rate,
            seconds: writing.as_secs_f64(),
            events_written,
            transactions: events_written / shape.per_txn.max(1),
            events_consumed: latencies.len(),
            delivered_with_cpu: latencies.len(),
            e2e_p50_ms: crate::e2e::quantile_ms(latencies, 0.5),
            e2e_p99_ms: crate::e2e::quantile_ms(latencies, 0.99),
            e2e_max_ms: crate::e2e::quantile_ms(latencies, 1.0),
            ack_p50_ms: None,
            ack_p99_ms: None,
            received_p99_ms: None,
            cpu_seconds: usage.cpu_seconds - cpu_before,
            peak_rss_mb: usage.peak_rss_mb,
        }
    }

    pub fn delivered_with_cpu(mut self, n: usize) -> Self {
        self.delivered_with_cpu = n;
        self
    }

    /// Adds pgoutbox's own commit-to-ack figures (its /latency answer).
    pub fn with_commit_to_ack(mut self, lat: &serde_json::Value) -> Self {
        let ms = |v: &serde_json::Value| v.as_u64().map(|us| us as f64 / 1000.0);
        self.ack_p50_ms = ms(&lat["p50_us"]);
        self.ack_p99_ms = ms(&lat["p99_us"]);
        self.received_p99_ms = ms(&lat["received"]["p99_us"]);
        self
    }

    pub fn achieved_rate(&self) -> f64 {
        self.events_written as f64 / self.seconds.max(1e-9)
    }

    /// Per event delivered while the CPU was counted: a relay that falls behind did less for its
    /// CPU than was written.
    pub fn delivered(&self) -> usize {
        self.events_written.min(self.delivered_with_cpu).max(1)
    }

    pub fn cpu_us_per_event(&self) -> f64 {
        self.cpu_seconds * 1e6 / self.delivered() as f64
    }

    pub fn cpu_us_per_txn(&self) -> f64 {
        self.cpu_us_per_event() * (self.events_written as f64 / self.transactions.max(1) as f64)
    }

    pub fn line(&self) -> String {
        let opt = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}"));
        format!(
            "{:>6} ev/s asked, {:>6.0} written, {:>7} consumed | e2e p50 {:>8.2} p99 {:>8.2} max {:>8.2} ms | ack p50 {:>6} p99 {:>6} ms | CPU {:>5.2} s = {:>6.1} us/event {:>7.1} us/txn | RSS {:.0} MB",
            self.rate,
            self.achieved_rate(),
            self.events_consumed,
            self.e2e_p50_ms,
            self.e2e_p99_ms,
            self.e2e_max_ms,
            opt(self.ack_p50_ms),
            opt(self.ack_p99_ms),
            self.cpu_seconds,
            self.cpu_us_per_event(),
            self.cpu_us_per_txn(),
            self.peak_rss_mb
        )
    }

    fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "rate": self.rate, "seconds": self.seconds, "events_written": self.events_written,
            "achieved_rate": self.achieved_rate(), "transactions": self.transactions,
            "events_consumed": self.events_consumed, "delivered_with_cpu": self.delivered_with_cpu,
            "e2e_p50_ms": self.e2e_p50_ms, "e2e_p99_ms": self.e2e_p99_ms, "e2e_max_ms": self.e2e_max_ms,
            "commit_to_ack_p50_ms": self.ack_p50_ms, "commit_to_ack_p99_ms": self.ack_p99_ms,
            "commit_to_receipt_p99_ms": self.received_p99_ms,
            "cpu_seconds": self.cpu_seconds, "cpu_us_per_event": self.cpu_us_per_event(),
            "cpu_us_per_txn": self.cpu_us_per_txn(), "peak_rss_mb": self.peak_rss_mb,
        })
    }
}

/// One relay at every rate.
#[derive(Debug, Clone)]
pub struct SteadyRun {
    pub relay: String,
    pub windows: Vec<Window>,
}

pub struct Results {
    pub args: Args,
    pub events: usize,
    pub payload_bytes: u64,
    pub decoding: Option<Contender>,
    pub broker: Option<Contender>,
    pub pgoutbox: Option<Contender>,
    pub debezium: Option<Contender>,
    pub steady: Vec<SteadyRun>,
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
            steady: Vec::new(),
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
        "\n{} events, {} per transaction, ~{} B payloads ({:.1} MB of payload), {} aggregates, {}\n\n",
        r.events,
        r.args.events_per_txn,
        r.args.payload_bytes,
        r.payload_bytes as f64 / 1e6,
        r.args.aggregates,
        if r.args.avro {
            "Confluent's AvroConverter (schema registry)"
        } else if r.args.protobuf {
            "Confluent's ProtobufConverter (schema registry)"
        } else {
            "JsonConverter"
        }
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
    if !r.steady.is_empty() {
        s.push_str(&format!(
            "\nsteady state, {}s a rate, {} events a transaction (e2e: application send to consumer read; ack: commit to broker acknowledgement)\n",
            r.args.steady_seconds, r.args.events_per_txn
        ));
        for run in &r.steady {
            s.push_str(&format!("{}:\n", run.relay));
            for w in &run.windows {
                s.push_str(&format!("  {}\n", w.line()));
            }
        }
        if let [p, d] = &r.steady[..] {
            for (pw, dw) in p.windows.iter().zip(&d.windows) {
                s.push_str(&format!(
                    "at {} events/s: pgoutbox uses {:.3} of Debezium's CPU per event ({:.1} against {:.1} us)\n",
                    pw.rate,
                    pw.cpu_us_per_event() / dw.cpu_us_per_event().max(1e-9),
                    pw.cpu_us_per_event(),
                    dw.cpu_us_per_event()
                ));
            }
        }
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
            "converter": if r.args.avro { "avro" } else if r.args.protobuf { "protobuf" } else { "json" },
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
        "steady_state": r.steady.iter().map(|run| serde_json::json!({
            "relay": run.relay, "windows": run.windows.iter().map(Window::json).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    });
    std::fs::write(out.join("result.json"), serde_json::to_string_pretty(&json)?)?;
    std::fs::write(out.join("result.md"), format!("```\n{}```\n", table(r)))?;
    std::fs::write(out.join("chart.svg"), svg(r))?;
    if !r.steady.is_empty() {
        std::fs::write(out.join("steady.svg"), steady_svg(&r.steady))?;
    }
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

/// The steady state's cost curve: CPU per event and end-to-end p99 at each rate, one group of bars
/// per rate, one bar per relay (log scale: the relays differ by orders of magnitude).
fn steady_svg(runs: &[SteadyRun]) -> String {
    let rates: Vec<usize> = runs.first().map(|r| r.windows.iter().map(|w| w.rate).collect()).unwrap_or_default();
    let (panel_w, panel_h, top) = (440.0, 300.0, 70.0);
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" font-size=\"13\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"10\" y=\"22\" font-size=\"16\" font-weight=\"bold\">Steady state by insert rate (lower is better, log scale)</text>\n",
        2.0 * panel_w + 40.0,
        top + panel_h + 60.0
    );
    let colors = ["#2b7bb9", "#d9822b"];
    for (i, run) in runs.iter().enumerate() {
        s.push_str(&format!(
            "<rect x=\"{}\" y=\"34\" width=\"12\" height=\"12\" fill=\"{}\"/><text x=\"{}\" y=\"45\">{}</text>\n",
            10.0 + i as f64 * 200.0,
            colors[i % 2],
            26.0 + i as f64 * 200.0,
            run.relay
        ));
    }
    type Panel = (&'static str, fn(&Window) -> f64);
    let panels: [Panel; 2] =
        [("relay CPU per event (us)", Window::cpu_us_per_event), ("end-to-end p99 (ms)", |w: &Window| w.e2e_p99_ms)];
    for (p, (title, value)) in panels.iter().enumerate() {
        let x0 = 20.0 + p as f64 * (panel_w + 20.0);
        let values: Vec<f64> = runs.iter().flat_map(|r| r.windows.iter().map(value)).collect();
        let max = values.iter().copied().fold(1.0, f64::max).log10().ceil().max(1.0);
        let min = values.iter().copied().filter(|v| *v > 0.0).fold(f64::MAX, f64::min).log10().floor().min(0.0);
        let y = |v: f64| top + panel_h - (v.max(1e-9).log10().clamp(min, max) - min) / (max - min) * panel_h;
        s.push_str(&format!("<text x=\"{x0}\" y=\"{}\" font-weight=\"bold\">{title}</text>\n", top - 6.0));
        let mut decade = min;
        while decade <= max {
            let v = 10f64.powf(decade);
            s.push_str(&format!(
                "<line x1=\"{x0}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/><text x=\"{}\" y=\"{:.1}\" font-size=\"11\">{}</text>\n",
                x0 + panel_w - 40.0,
                x0 + panel_w - 36.0,
                y(v) + 4.0,
                if v >= 1.0 { format!("{v:.0}") } else { format!("{v}") },
                y = y(v)
            ));
            decade += 1.0;
        }
        let group = (panel_w - 50.0) / rates.len().max(1) as f64;
        let bar = group / (runs.len() as f64 + 1.0);
        for (g, rate) in rates.iter().enumerate() {
            let gx = x0 + g as f64 * group;
            for (i, run) in runs.iter().enumerate() {
                let Some(w) = run.windows.iter().find(|w| w.rate == *rate) else { continue };
                let v = value(w);
                let (bx, by) = (gx + bar * (i as f64 + 0.5), y(v));
                s.push_str(&format!(
                    "<rect x=\"{bx:.1}\" y=\"{by:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\"/><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\" text-anchor=\"middle\">{}</text>\n",
                    bar * 0.9,
                    top + panel_h - by,
                    colors[i % 2],
                    bx + bar * 0.45,
                    by - 3.0,
                    if v >= 10.0 { format!("{v:.0}") } else { format!("{v:.1}") }
                ));
            }
            s.push_str(&format!(
                "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{rate} ev/s</text>\n",
                gx + group / 2.0,
                top + panel_h + 18.0
            ));
        }
    }
    s.push_str("</svg>\n");
    s
}
