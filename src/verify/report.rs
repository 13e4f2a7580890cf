//! What `verify` found, as a short human summary or as JSON, and the exit status it implies.

use std::fmt::Write as _;

use serde_json::{json, Value};

use super::compare::{Location, Outcome, TimeRange};

/// The verification's result with its context.
#[derive(Debug, Clone)]
pub struct Report {
    /// `schema.table`
    pub table: String,
    pub topics: Vec<String>,
    /// `--since` / `--until` as given.
    pub since: Option<String>,
    pub until: Option<String>,
    pub order_source: String,
    pub outcome: Outcome,
    /// Things the operator should know to read the numbers right.
    pub notes: Vec<String>,
    /// Missing and duplicates per `isolation.level` read (the outcome is the first one's).
    pub isolation: Vec<super::IsolationFigures>,
}

impl Report {
    /// Whether anything fails the verification: missing, orphans, order violations; duplicates only
    /// when asked.
    pub fn failed(&self, fail_on_duplicates: bool) -> bool {
        let o = &self.outcome;
        o.missing.count > 0
            || o.orphans.count > 0
            || o.order_violations.count > 0
            || (fail_on_duplicates && o.duplicates.count > 0)
    }

    pub fn to_json(&self, fail_on_duplicates: bool) -> Value {
        let o = &self.outcome;
        json!({
            "ok": !self.failed(fail_on_duplicates),
            "table": self.table,
            "topics": self.topics,
            "window": { "since": self.since, "until": self.until },
            "order_source": self.order_source,
            "isolation_levels": self.isolation.iter().map(|i| json!({"level": i.level, "missing": i.missing, "duplicates": i.duplicates, "duplicate_records": i.duplicate_records})).collect::<Vec<_>>(),
            "events_committed": o.events_committed,
            "records_consumed": o.records_consumed,
            "missing": {
                "count": o.missing.count,
                "examples": o.missing.examples.iter().map(|m| json!({"id": m.id, "topic": m.topic, "aggregate": m.aggregate, "order": m.order})).collect::<Vec<_>>(),
            },
            "orphans": {
                "count": o.orphans.count,
                "checked": o.orphan_window.is_some(),
                "window": o.orphan_window.map(|w| json!({"from_ms": w.from_ms, "until_ms": w.until_ms})),
                "not_counted_outside_window": o.unmatched_outside_window,
                "rows_outside_window": o.rows_outside_window,
                "examples": o.orphans.examples.iter().map(|x| json!({"id": x.id, "location": location_json(&x.location)})).collect::<Vec<_>>(),
            },
            "duplicates": {
                "count": o.duplicates.count,
                "extra_records": o.duplicate_records,
                "fails": fail_on_duplicates,
                "examples": o.duplicates.examples.iter().map(|d| json!({"id": d.id, "copies": d.copies, "locations": d.locations.iter().map(location_json).collect::<Vec<_>>()})).collect::<Vec<_>>(),
            },
            "order_violations": {
                "count": o.order_violations.count,
                "checked": o.order_checked,
                "examples": o.order_violations.examples.iter().map(|v| json!({
                    "topic": v.topic, "partition": v.partition, "aggregate": v.aggregate,
                    "id": v.id, "offset": v.offset, "order": v.order,
                    "after_id": v.after_id, "after_offset": v.after_offset, "after_order": v.after_order,
                })).collect::<Vec<_>>(),
            },
            "notes": self.notes,
        })
    }

    pub fn to_text(&self, fail_on_duplicates: bool) -> String {
        let o = &self.outcome;
        let mut s = String::new();
        let window = match (&self.since, &self.until) {
            (None, None) => "all rows".to_string(),
            (since, until) => format!(
                "rows with created_at in [{}, {})",
                since.as_deref().unwrap_or("-inf"),
                until.as_deref().unwrap_or("+inf")
            ),
        };
        let _ = writeln!(
            s,
            "outbox {} ({window}) vs {} topic(s): {}",
            self.table,
            self.topics.len(),
            self.topics.join(", ")
        );
        let _ = writeln!(s, "commit order from: {}", self.order_source);
        let _ = writeln!(s, "events committed:  {}", o.events_committed);
        let _ = writeln!(s, "records consumed:  {}", o.records_consumed);

        missing_text(&mut s, o);
        orphans_text(&mut s, o);
        duplicates_text(&mut s, o, fail_on_duplicates);
        order_text(&mut s, o);
        if self.isolation.len() > 1 {
            for i in &self.isolation {
                let _ = writeln!(
                    s,
                    "at {:<17}  missing {}, duplicates {} ({} extra record(s))",
                    format!("{}:", i.level),
                    i.missing,
                    i.duplicates,
                    i.duplicate_records
                );
            }
        }
        for n in &self.notes {
            let _ = writeln!(s, "note: {n}");
        }
        let _ = writeln!(s, "result: {}", if self.failed(fail_on_duplicates) { "FAILED" } else { "OK" });
        s
    }
}

fn missing_text(s: &mut String, o: &Outcome) {
    let _ = writeln!(s, "missing:           {}  (committed, no record in Kafka)", o.missing.count);
    for m in &o.missing.examples {
        let order = m.order.as_deref().map(|v| format!(" order={v}")).unwrap_or_default();
        let _ = writeln!(
            s,
            "  - id={} topic={} aggregate={}{order}",
            m.id,
            m.topic.as_deref().unwrap_or("<unroutable: NULL route-by value>"),
            m.aggregate.as_deref().unwrap_or("<null>")
        );
    }
    more(s, o.missing.count, o.missing.examples.len());
}

fn duplicates_text(s: &mut String, o: &Outcome, fail_on_duplicates: bool) {
    let verdict = if fail_on_duplicates { "fails (--fail-on-duplicates)" } else { "reported, not failed" };
    let _ =
        writeln!(s, "duplicates:        {}  ({} extra record(s); {verdict})", o.duplicates.count, o.duplicate_records);
    for d in &o.duplicates.examples {
        let at: Vec<String> = d.locations.iter().map(location_text).collect();
        let _ = writeln!(s, "  - id={} x{} at {}", d.id, d.copies, at.join("; "));
    }
    more(s, o.duplicates.count, o.duplicates.examples.len());
}

fn order_text(s: &mut String, o: &Outcome) {
    let _ = writeln!(s, "order violations:  {}  ({} first copies checked)", o.order_violations.count, o.order_checked);
    for v in &o.order_violations.examples {
        let _ = writeln!(
            s,
            "  - {}[{}] aggregate={}: id={} (order {}) at offset {} after id={} (order {}) at offset {}",
            v.topic, v.partition, v.aggregate, v.id, v.order, v.offset, v.after_id, v.after_order, v.after_offset
        );
    }
    more(s, o.order_violations.count, o.order_violations.examples.len());
}

fn more(s: &mut String, count: u64, shown: usize) {
    if count > shown as u64 {
        let _ = writeln!(s, "  ... and {} more", count - shown as u64);
    }
}

fn window_text(w: TimeRange) -> String {
    match (w.from_ms, w.until_ms) {
        (None, None) => "at any time".to_string(),
        (Some(f), None) => format!("from {}", iso8601_utc(f)),
        (None, Some(u)) => format!("before {}", iso8601_utc(u)),
        (Some(f), Some(u)) => format!("from {} to {}", iso8601_utc(f), iso8601_utc(u)),
    }
}

fn location_text(l: &Location) -> String {
    let ts = l.timestamp_ms.map(|t| format!(" ({})", iso8601_utc(t))).unwrap_or_default();
    format!("{}[{}]@{}{ts}", l.topic, l.partition, l.offset)
}

fn location_json(l: &Location) -> Value {
    json!({"topic": l.topic, "partition": l.partition, "offset": l.offset, "timestamp_ms": l.timestamp_ms})
}

/// Milliseconds since the epoch as `YYYY-MM-DDTHH:MM:SS.mmmZ` (proleptic Gregorian, UTC).
pub fn iso8601_utc(ms: i64) -> String {
    let days = ms.div_euclid(86_400_000);
    let in_day = ms.rem_euclid(86_400_000);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1000 % 60,
        in_day % 1000
    )
}

/// The orphans section: events in Kafka with no row in the table, within the window checked.
fn orphans_text(s: &mut String, o: &Outcome) {
    match o.orphan_window {
        None => {
            let _ = writeln!(s, "orphans:           not checked (see the notes)");
        }
        Some(w) => {
            let _ = writeln!(
                s,
                "orphans:           {}  (in Kafka, no row in the table, published {})",
                o.orphans.count,
                window_text(w)
            );
            for x in &o.orphans.examples {
                let _ = writeln!(
                    s,
                    "  - id={} at {}",
                    x.id.as_deref().unwrap_or("<no id header>"),
                    location_text(&x.location)
                );
            }
            more(s, o.orphans.count, o.orphans.examples.len());
            if o.unmatched_outside_window > 0 {
                let _ = writeln!(
                    s,
                    "  not counted: {} event(s) without a row published outside that window (their rows may have been deleted by outbox cleanup; --orphans all counts them)",
                    o.unmatched_outside_window
                );
            }
        }
    }
}
