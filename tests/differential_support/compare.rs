//! Record-by-record comparison of what Debezium produced (the reference) with what pgoutbox produced:
//! per topic and partition in offset order, the topic, partition, key bytes, value bytes, header names
//! in order and header values. Everything may differ only as `LEGITIMATE_DIFFERENCES` says, and the
//! code below enforces exactly that list. A mismatch is described with both sides' bytes as text and
//! as hex around the first differing byte.

use std::collections::BTreeMap;

use pgoutbox::kafka::consume::ConsumedRecord;

pub const RUN_ID_HEADER: &str = "__debezium.context.runId";

/// The only ways a pgoutbox record may differ from Debezium's, and why. Nothing else is tolerated.
pub const LEGITIMATE_DIFFERENCES: &[(&str, &str)] = &[
    (
        "record timestamp",
        "Debezium stamps each record with the wall-clock time it processed the change (envelope ts_ms), \
         so two runs never agree; the timestamp is compared only in cases that take it from a column \
         (table.field.event.timestamp)",
    ),
    (
        "value of header __debezium.context.runId",
        "a UUIDv7 minted per connector run; the header's name and position are compared, both values \
         must hold a UUIDv7, and what a header converter writes around it must be identical",
    ),
    (
        "partition of a record whose key is NULL",
        "the Java producer's sticky partitioner places key-less records on a random partition (two Debezium \
         runs disagree), so they are matched by content within their topic, not by partition and offset",
    ),
];

/// Compares two record sets; returns one description per mismatch (empty when identical).
pub fn compare(debezium: &[ConsumedRecord], pgoutbox: &[ConsumedRecord], timestamps: bool) -> Vec<String> {
    let mut problems = Vec::new();
    // Records with a key: the partition is murmur2 of the key bytes, so it must match, and within a
    // partition the order must match too.
    let (dk, pk) = (keyed(debezium), keyed(pgoutbox));
    let mut slots: Vec<&(String, i32)> = dk.keys().chain(pk.keys()).collect();
    slots.sort();
    slots.dedup();
    for slot in slots {
        let where_ = format!("topic {} partition {}", slot.0, slot.1);
        pair_up(
            &where_,
            dk.get(slot).map_or(&[][..], Vec::as_slice),
            pk.get(slot).map_or(&[][..], Vec::as_slice),
            Checks { partition: true, timestamps },
            &mut problems,
        );
    }
    // Key-less records: matched by content within their topic (see LEGITIMATE_DIFFERENCES).
    let (dn, pn) = (keyless(debezium), keyless(pgoutbox));
    let mut topics: Vec<&String> = dn.keys().chain(pn.keys()).collect();
    topics.sort();
    topics.dedup();
    for topic in topics {
        let where_ = format!("topic {topic}, records with a NULL key (any partition)");
        pair_up(
            &where_,
            dn.get(topic).map_or(&[][..], Vec::as_slice),
            pn.get(topic).map_or(&[][..], Vec::as_slice),
            Checks { partition: false, timestamps },
            &mut problems,
        );
    }
    problems
}

fn keyed(records: &[ConsumedRecord]) -> BTreeMap<(String, i32), Vec<&ConsumedRecord>> {
    let mut m: BTreeMap<(String, i32), Vec<&ConsumedRecord>> = BTreeMap::new();
    for r in records.iter().filter(|r| r.key.is_some()) {
        m.entry((r.topic.clone(), r.partition)).or_default().push(r);
    }
    for v in m.values_mut() {
        v.sort_by_key(|r| r.offset);
    }
    m
}

fn keyless(records: &[ConsumedRecord]) -> BTreeMap<String, Vec<&ConsumedRecord>> {
    let mut m: BTreeMap<String, Vec<&ConsumedRecord>> = BTreeMap::new();
    for r in records.iter().filter(|r| r.key.is_none()) {
        m.entry(r.topic.clone()).or_default().push(r);
    }
    for v in m.values_mut() {
        // Event id first, so the two copies of one event meet even when something else differs.
        v.sort_by_key(|r| content_key(r));
    }
    m
}

type Headers = Vec<(String, Option<Vec<u8>>)>;

fn content_key(r: &ConsumedRecord) -> (Option<Vec<u8>>, Option<Vec<u8>>, Headers) {
    let headers = r.headers.iter().filter(|(n, _)| n != RUN_ID_HEADER).cloned().collect();
    (r.header("id").map(<[u8]>::to_vec), r.value.clone(), headers)
}

/// Which of the conditionally compared fields to compare (see LEGITIMATE_DIFFERENCES).
#[derive(Debug, Clone, Copy)]
pub struct Checks {
    pub partition: bool,
    pub timestamps: bool,
}

fn pair_up(where_: &str, dbz: &[&ConsumedRecord], pgo: &[&ConsumedRecord], checks: Checks, problems: &mut Vec<String>) {
    for i in 0..dbz.len().max(pgo.len()) {
        match (dbz.get(i), pgo.get(i)) {
            (Some(d), Some(p)) => {
                let diffs = diff_records(d, p, checks);
                if !diffs.is_empty() {
                    problems.push(format!(
                        "{where_}, record #{i} (Debezium offset {}, pgoutbox offset {}, event id {}, Debezium's key {}):\n{}",
                        d.offset,
                        p.offset,
                        event_id(d),
                        show(d.key.as_deref()),
                        diffs.join("\n")
                    ));
                }
            }
            (Some(d), None) => {
                problems.push(format!("{where_}, record #{i}: only Debezium produced\n  {}", describe(d)))
            }
            (None, Some(p)) => {
                problems.push(format!("{where_}, record #{i}: only pgoutbox produced\n  {}", describe(p)))
            }
            (None, None) => {}
        }
    }
}

/// Field-by-field differences of one record pair, following LEGITIMATE_DIFFERENCES.
pub fn diff_records(d: &ConsumedRecord, p: &ConsumedRecord, checks: Checks) -> Vec<String> {
    let mut out = Vec::new();
    if d.topic != p.topic {
        out.push(byte_diff("topic", Some(d.topic.as_bytes()), Some(p.topic.as_bytes())));
    }
    if checks.partition && d.partition != p.partition {
        out.push(format!("  partition: Debezium {} / pgoutbox {}", d.partition, p.partition));
    }
    if checks.timestamps && d.timestamp != p.timestamp {
        out.push(format!("  timestamp: Debezium {:?} / pgoutbox {:?}", d.timestamp, p.timestamp));
    }
    if d.key != p.key {
        out.push(byte_diff("key", d.key.as_deref(), p.key.as_deref()));
    }
    if d.value != p.value {
        out.push(byte_diff("value", d.value.as_deref(), p.value.as_deref()));
    }
    let names = |r: &ConsumedRecord| r.headers.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    if names(d) != names(p) {
        out.push(format!("  header names: Debezium {:?}\n                pgoutbox {:?}", names(d), names(p)));
        return out;
    }
    for ((name, dv), (_, pv)) in d.headers.iter().zip(&p.headers) {
        if name == RUN_ID_HEADER {
            let (ds, ps) = (dv.as_deref().and_then(around_uuid_v7), pv.as_deref().and_then(around_uuid_v7));
            for (side, v, split) in [("Debezium", dv, ds), ("pgoutbox", pv, ps)] {
                if split.is_none() {
                    out.push(format!("  header {name}: {side}'s value {} holds no UUIDv7", show(v.as_deref())));
                }
            }
            if let (Some(d), Some(p)) = (ds, ps) {
                if d != p {
                    out.push(format!("  header {name}: around the run id Debezium wrote {d:?}, pgoutbox {p:?}"));
                }
            }
        } else if dv != pv {
            out.push(byte_diff(&format!("header {name}"), dv.as_deref(), pv.as_deref()));
        }
    }
    out
}

/// What stands before and after the one UUIDv7 in `v` (a header converter's wrapping, e.g. JSON with
/// a schema), or `None` unless exactly one is there.
pub fn around_uuid_v7(v: &[u8]) -> Option<(&[u8], &[u8])> {
    let mut found = (0..v.len().saturating_sub(35)).filter(|&i| is_uuid_v7(&v[i..i + 36]));
    let i = found.next()?;
    found.next().is_none().then(|| (&v[..i], &v[i + 36..]))
}

/// `xxxxxxxx-xxxx-7xxx-[89ab]xxx-xxxxxxxxxxxx` in lower-case hex, as Java's UUID.toString() writes it.
pub fn is_uuid_v7(v: &[u8]) -> bool {
    v.len() == 36
        && v.iter().enumerate().all(|(i, &c)| match i {
            8 | 13 | 18 | 23 => c == b'-',
            _ => c.is_ascii_digit() || (b'a'..=b'f').contains(&c),
        })
        && v[14] == b'7'
        && matches!(v[19], b'8' | b'9' | b'a' | b'b')
}

pub fn event_id(r: &ConsumedRecord) -> String {
    r.header("id").map_or_else(|| "<none>".to_string(), |v| String::from_utf8_lossy(v).into_owned())
}

/// One record in a line: where it is, its key, value (shortened) and headers.
pub fn describe(r: &ConsumedRecord) -> String {
    let headers: Vec<String> = r.headers.iter().map(|(n, v)| format!("{n}={}", show(v.as_deref()))).collect();
    format!(
        "topic {} partition {} offset {} key {} value {} headers [{}]",
        r.topic,
        r.partition,
        r.offset,
        show(r.key.as_deref()),
        show(r.value.as_deref()),
        headers.join(", ")
    )
}

/// Bytes as escaped text, shortened in the middle past 300 bytes; `null` for a Kafka null.
fn show(b: Option<&[u8]>) -> String {
    match b {
        None => "null".to_string(),
        Some(b) if b.len() > 300 => {
            format!(
                "{:?}…({} bytes)…{:?}",
                String::from_utf8_lossy(&b[..150]),
                b.len(),
                String::from_utf8_lossy(&b[b.len() - 100..])
            )
        }
        Some(b) => format!("{:?} ({} bytes)", String::from_utf8_lossy(b), b.len()),
    }
}

/// Both sides of a differing field: lengths, the first differing byte, and a window around it as
/// text and hex.
pub fn byte_diff(field: &str, dbz: Option<&[u8]>, pgo: Option<&[u8]>) -> String {
    let (Some(a), Some(b)) = (dbz, pgo) else {
        return format!("  {field}: Debezium {}\n  {:w$}  pgoutbox {}", show(dbz), "", show(pgo), w = field.len());
    };
    let at = a.iter().zip(b).position(|(x, y)| x != y).unwrap_or(a.len().min(b.len()));
    let window = |s: &[u8], from: usize, to: usize| -> (String, String) {
        let (from, to) = (from.min(s.len()), to.min(s.len()));
        let text = format!("{:?}", String::from_utf8_lossy(&s[from..to]));
        let hex = s[from..to].iter().map(|x| format!("{x:02x}")).collect::<Vec<_>>().join(" ");
        (text, hex)
    };
    let (ta, tb) = (window(a, at.saturating_sub(60), at + 60), window(b, at.saturating_sub(60), at + 60));
    let (ha, hb) = (window(a, at.saturating_sub(16), at + 16), window(b, at.saturating_sub(16), at + 16));
    format!(
        "  {field}: {} bytes (Debezium) vs {} bytes (pgoutbox), first difference at byte {at}\n\
         \x20   Debezium text [{}..]: {}\n\
         \x20   pgoutbox text [{}..]: {}\n\
         \x20   Debezium hex  [{}..]: {}\n\
         \x20   pgoutbox hex  [{}..]: {}\n\
         \x20   Debezium whole: {}\n\
         \x20   pgoutbox whole: {}",
        a.len(),
        b.len(),
        at.saturating_sub(60),
        ta.0,
        at.saturating_sub(60),
        tb.0,
        at.saturating_sub(16),
        ha.1,
        at.saturating_sub(16),
        hb.1,
        show(Some(a)),
        show(Some(b)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(partition: i32, offset: i64, key: Option<&str>, value: &str, run: &str) -> ConsumedRecord {
        ConsumedRecord {
            topic: "t".into(),
            partition,
            offset,
            timestamp: Some(offset),
            key: key.map(|k| k.as_bytes().to_vec()),
            value: Some(value.as_bytes().to_vec()),
            headers: vec![
                (RUN_ID_HEADER.into(), Some(run.as_bytes().to_vec())),
                ("id".into(), Some(value.as_bytes().to_vec())),
            ],
        }
    }

    const RUN_A: &str = "019ad2c4-5e6f-7a01-8b2c-0123456789ab";
    const RUN_B: &str = "019ad2c4-9999-7fff-b000-ffffffffffff";

    #[test]
    fn compare_tolerates_only_the_listed_differences() {
        let d = vec![rec(0, 0, Some("k"), "v1", RUN_A), rec(1, 0, None, "v2", RUN_A), rec(2, 0, None, "v3", RUN_A)];
        let p = vec![rec(0, 0, Some("k"), "v1", RUN_B), rec(0, 1, None, "v3", RUN_B), rec(0, 2, None, "v2", RUN_B)];
        assert_eq!(compare(&d, &p, false), Vec::<String>::new());
    }

    #[test]
    fn compare_reports_byte_and_partition_differences() {
        let d = vec![rec(0, 0, Some("k"), "v1", RUN_A)];
        let p = vec![rec(1, 0, Some("k"), "v2", "not-a-uuid")];
        let problems = compare(&d, &p, false);
        assert_eq!(problems.len(), 2, "{problems:#?}");
        assert!(is_uuid_v7(RUN_A.as_bytes()) && !is_uuid_v7(b"4d47e190-0402-4048-bc2c-89dd54343cdc"));
    }

    /// Under a JSON header converter the run id is wrapped; the wrapping must match.
    #[test]
    fn compare_run_ids_inside_a_header_converter_wrapping() {
        let json = |id: &str, optional: bool| {
            format!("{{\"schema\":{{\"type\":\"string\",\"optional\":{optional}}},\"payload\":\"{id}\"}}")
        };
        let d = vec![rec(0, 0, Some("k"), "v1", &json(RUN_A, false))];
        assert_eq!(compare(&d, &[rec(0, 0, Some("k"), "v1", &json(RUN_B, false))], false), Vec::<String>::new());
        assert_eq!(compare(&d, &[rec(0, 0, Some("k"), "v1", &json(RUN_B, true))], false).len(), 1);
        assert_eq!(around_uuid_v7(format!("{RUN_A}{RUN_B}").as_bytes()), None);
    }
}
