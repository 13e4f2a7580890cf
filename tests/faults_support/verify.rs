//! What the broker holds, checked against what PostgreSQL committed.
//!
//! - missing: a committed outbox row with no record (a gap: the one thing a crash must never cause);
//! - orphan: a record whose id is no committed row (an event from a rolled-back or aborted transaction);
//! - duplicate: a second copy of an event (allowed after crashes: consumers deduplicate by `id`);
//! - order violation: within a partition, in offset order, the first copy of each event of one
//!   aggregate (topic and key) must come in commit order, which `seq` is for the load's writers.

use std::collections::HashMap;

use pgoutbox::kafka::consume::ConsumedRecord;

use super::bed::Row;

#[derive(Debug, Default)]
pub struct Verdict {
    /// Outbox rows the application wrote, committed or not.
    pub written: u64,
    pub committed: usize,
    pub records: usize,
    /// Distinct event ids found.
    pub published: usize,
    pub missing: Vec<String>,
    pub orphans: Vec<String>,
    pub duplicates: usize,
    /// The first few duplicates: the event, and where its first and its second copy are.
    pub duplicate_samples: Vec<String>,
    pub order_violations: Vec<String>,
}

pub fn verify(rows: &[Row], records: &[ConsumedRecord], written: u64) -> Verdict {
    let seq_of: HashMap<&str, i64> = rows.iter().map(|r| (r.id.as_str(), r.seq)).collect();
    let mut sorted: Vec<&ConsumedRecord> = records.iter().collect();
    sorted.sort_by(|a, b| (&a.topic, a.partition, a.offset).cmp(&(&b.topic, b.partition, b.offset)));
    let mut seen: HashMap<&[u8], (i32, i64)> = HashMap::with_capacity(records.len());
    let mut last: HashMap<(&str, i32, &[u8]), i64> = HashMap::new();
    let mut v = Verdict { written, committed: rows.len(), records: records.len(), ..Verdict::default() };
    for r in sorted {
        let id = r.header("id").unwrap_or_default();
        if let Some(&(p, o)) = seen.get(id) {
            v.duplicates += 1;
            if v.duplicate_samples.len() < 5 {
                let id = String::from_utf8_lossy(id);
                v.duplicate_samples.push(format!("{id}: {}[{p}]@{o} and [{}]@{}", r.topic, r.partition, r.offset));
            }
            continue;
        }
        seen.insert(id, (r.partition, r.offset));
        let id_text = String::from_utf8_lossy(id);
        let Some(&seq) = seq_of.get(id_text.as_ref()) else {
            v.orphans.push(format!("{id_text} in {}[{}]@{}", r.topic, r.partition, r.offset));
            continue;
        };
        let key = (r.topic.as_str(), r.partition, r.key.as_deref().unwrap_or_default());
        if let Some(&prev) = last.get(&key) {
            if seq < prev {
                v.order_violations.push(format!(
                    "{}[{}] key {:?}: seq {seq} after {prev}",
                    r.topic,
                    r.partition,
                    String::from_utf8_lossy(key.2)
                ));
            }
        }
        last.insert(key, seq);
    }
    v.published = seen.len() - v.orphans.len();
    v.missing = rows
        .iter()
        .filter(|r| !seen.contains_key(r.id.as_bytes()))
        .map(|r| format!("{} ({} {} seq {})", r.id, r.aggregatetype, r.aggregateid, r.seq))
        .collect();
    v
}

impl Verdict {
    /// The scenario's one-line summary.
    pub fn line(&self, scenario: &str, extra: &str) -> String {
        format!(
            "{scenario}: written={} committed={} published={} records={} missing={} orphans={} duplicates={} order_violations={} {extra}",
            self.written,
            self.committed,
            self.published,
            self.records,
            self.missing.len(),
            self.orphans.len(),
            self.duplicates,
            self.order_violations.len()
        )
    }

    /// Nothing missing, no orphans, no order violations. `log` is shown on failure.
    pub fn assert_clean(&self, log: &str) {
        let sample = |v: &[String]| v.iter().take(5).cloned().collect::<Vec<_>>();
        assert!(
            self.missing.is_empty() && self.orphans.is_empty() && self.order_violations.is_empty(),
            "missing {} (e.g. {:?}), orphans {} (e.g. {:?}), order violations {} (e.g. {:?}); relay log tail:\n{log}",
            self.missing.len(),
            sample(&self.missing),
            self.orphans.len(),
            sample(&self.orphans),
            self.order_violations.len(),
            sample(&self.order_violations),
        );
    }
}
