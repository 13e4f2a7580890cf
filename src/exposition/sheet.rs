//! A small exposition writer for the families whose names, labels and types follow another
//! exporter's (Connect's and Debezium's MBeans as the JMX exporter's rules publish them): label names
//! that vary per family (`connector_class`, `clientid`), untyped series, and both formats a scraper
//! may ask for, the Prometheus text format 0.0.4 and OpenMetrics 1.0.

use std::collections::HashMap;
use std::fmt::Write;

/// A family's type, as the exporter it follows declares it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    /// The JMX exporter's default (no `type` in the rule): `untyped` in 0.0.4, `unknown` in OpenMetrics.
    Untyped,
}

/// Which exposition format a scrape gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    OpenMetrics,
}

struct Family {
    /// Without the `_total` of a counter's samples.
    name: String,
    help: String,
    kind: Kind,
    samples: Vec<(String, f64)>,
}

/// Families in the order they were first added, each with its samples in order.
#[derive(Default)]
pub struct Sheet {
    families: Vec<Family>,
    index: HashMap<String, usize>,
}

impl Sheet {
    /// One sample of `name` (a counter's name ends in `_total`, as its samples do) with `labels`
    /// (values escaped here).
    pub fn add(&mut self, name: &str, help: &str, kind: Kind, labels: &[(&str, &str)], value: f64) {
        let base = match kind {
            Kind::Counter => name.strip_suffix("_total").unwrap_or(name),
            _ => name,
        };
        let i = match self.index.get(base) {
            Some(&i) => i,
            None => {
                self.families.push(Family {
                    name: base.to_string(),
                    help: help.to_string(),
                    kind,
                    samples: Vec::new(),
                });
                self.index.insert(base.to_string(), self.families.len() - 1);
                self.families.len() - 1
            }
        };
        let mut set = String::new();
        for (k, v) in labels {
            let sep = if set.is_empty() { "" } else { "," };
            let _ = write!(set, "{sep}{k}=\"{}\"", super::escape(v));
        }
        self.families[i].samples.push((set, value));
    }

    pub fn write(&self, out: &mut String, format: Format) {
        for f in &self.families {
            let total = if f.kind == Kind::Counter { "_total" } else { "" };
            let (family, kind) = match (format, f.kind) {
                (Format::Text, Kind::Counter) => (format!("{}_total", f.name), "counter"),
                (Format::OpenMetrics, Kind::Counter) => (f.name.clone(), "counter"),
                (_, Kind::Gauge) => (f.name.clone(), "gauge"),
                (Format::Text, Kind::Untyped) => (f.name.clone(), "untyped"),
                (Format::OpenMetrics, Kind::Untyped) => (f.name.clone(), "unknown"),
            };
            let _ = writeln!(out, "# HELP {family} {}", help_text(&f.help));
            let _ = writeln!(out, "# TYPE {family} {kind}");
            for (labels, value) in &f.samples {
                let braces = if labels.is_empty() { String::new() } else { format!("{{{labels}}}") };
                let _ = writeln!(out, "{}{total}{braces} {}", f.name, number(*value));
            }
        }
    }
}

/// Help text as both formats need it: backslashes and line feeds escaped.
fn help_text(help: &str) -> String {
    help.replace('\\', "\\\\").replace('\n', "\\n")
}

/// A sample value: integral values without a fraction, the special values as the formats spell them.
pub fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// prometheus-client's OpenMetrics output as the text format 0.0.4: a counter family's name gets
/// its samples' `_total`, `unknown` becomes `untyped`, and `# UNIT` and `# EOF` go.
pub fn openmetrics_to_text(om: &str) -> String {
    let counters: std::collections::HashSet<&str> =
        om.lines().filter_map(|l| l.strip_prefix("# TYPE ")).filter_map(|l| l.strip_suffix(" counter")).collect();
    let mut out = String::with_capacity(om.len());
    for line in om.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let rewritten = ["# HELP ", "# TYPE "].iter().find_map(|prefix| {
            let rest = line.strip_prefix(prefix)?;
            let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
            let name = if counters.contains(name) { format!("{name}_total") } else { name.to_string() };
            let tail = if *prefix == "# TYPE " && tail == "unknown" { "untyped" } else { tail };
            Some(format!("{prefix}{name} {tail}"))
        });
        match rewritten {
            Some(l) => out.push_str(&l),
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_formats_name_counters_and_untyped_series_as_their_parsers_expect() {
        let mut s = Sheet::default();
        s.add("a_poll_total", "Polled", Kind::Counter, &[("connector", "c\"1")], 5.0);
        s.add("b_count", "Count", Kind::Gauge, &[], 2.5);
        s.add("C_Seen", "Seen", Kind::Untyped, &[("context", "streaming")], -1.0);
        let mut text = String::new();
        s.write(&mut text, Format::Text);
        assert_eq!(
            text,
            "# HELP a_poll_total Polled\n# TYPE a_poll_total counter\na_poll_total{connector=\"c\\\"1\"} 5\n\
             # HELP b_count Count\n# TYPE b_count gauge\nb_count 2.5\n\
             # HELP C_Seen Seen\n# TYPE C_Seen untyped\nC_Seen{context=\"streaming\"} -1\n"
        );
        let mut om = String::new();
        s.write(&mut om, Format::OpenMetrics);
        assert!(om.starts_with("# HELP a_poll Polled\n# TYPE a_poll counter\na_poll_total{"), "{om}");
        assert!(om.contains("# TYPE C_Seen unknown\n"), "{om}");
    }

    #[test]
    fn openmetrics_counters_become_text_format_counters() {
        let om = "# HELP x_events Events.\n# TYPE x_events counter\nx_events_total{c=\"a\"} 3\n# HELP g G.\n# TYPE g gauge\ng 1\n# EOF\n";
        assert_eq!(
            openmetrics_to_text(om),
            "# HELP x_events_total Events.\n# TYPE x_events_total counter\nx_events_total{c=\"a\"} 3\n# HELP g G.\n# TYPE g gauge\ng 1\n"
        );
    }
}
