//! The comparison logic on hand-made rows and records: every finding, and the cases that must not
//! be findings (redelivered copies, cleaned-up rows, other partitions).

use std::collections::HashSet;

use super::compare::*;
use super::report::{iso8601_utc, Report};

const T: &str = "outbox.event.Order";

fn row(id: &str, aggregate: &str, rank: i64) -> CommittedEvent {
    CommittedEvent {
        id: id.to_string(),
        topic: Some(T.to_string()),
        aggregate: Some(aggregate.to_string()),
        order: Some(CommitOrder { rank, value: rank.to_string() }),
        published: None,
    }
}

fn rec(partition: i32, offset: i64, ts: i64, id: &str) -> (i32, i64, i64, Option<String>) {
    (partition, offset, ts, Some(id.to_string()))
}

/// Rows, then records as (partition, offset, timestamp, id) on topic `T`.
fn compare(rows: Vec<CommittedEvent>, records: &[(i32, i64, i64, Option<String>)]) -> Comparison {
    let mut c = Comparison::new();
    for r in rows {
        c.add_committed(r);
    }
    for (partition, offset, ts, id) in records {
        c.observe(&ObservedRecord {
            topic: T,
            partition: *partition,
            offset: *offset,
            timestamp_ms: Some(*ts),
            id: id.as_deref().map(str::as_bytes),
            commit_lsn: None,
        });
    }
    c
}

fn finish(c: Comparison, policy: OrphanPolicy) -> Outcome {
    c.finish(policy, TimeRange::default(), &HashSet::new())
}

#[test]
fn comparison_clean_when_every_row_has_one_record() {
    let c = compare(
        vec![row("e1", "a", 1), row("e2", "b", 2), row("e3", "a", 3)],
        &[rec(0, 0, 100, "e1"), rec(1, 0, 101, "e2"), rec(0, 1, 102, "e3")],
    );
    assert_eq!(c.missing_now(), 0);
    assert_eq!(c.committed_topics(), vec![T.to_string()]);
    let o = finish(c, OrphanPolicy::Window);
    assert_eq!((o.events_committed, o.records_consumed), (3, 3));
    assert_eq!((o.missing.count, o.orphans.count, o.duplicates.count, o.order_violations.count), (0, 0, 0, 0));
    assert_eq!(o.order_checked, 3);
}

#[test]
fn comparison_lists_missing_events_in_commit_order() {
    let rows: Vec<_> = (0..25).map(|i| row(&format!("e{i:02}"), "a", 100 - i)).collect();
    let c = compare(rows, &[rec(0, 0, 1, "e00")]);
    assert_eq!(c.missing_now(), 24);
    let o = finish(c, OrphanPolicy::Window);
    assert_eq!(o.missing.count, 24);
    assert_eq!(o.missing.examples.len(), EXAMPLES);
    assert_eq!(o.missing.examples[0].id, "e24", "lowest commit order first");
    assert_eq!(o.missing.examples[0].order.as_deref(), Some("76"));
    assert_eq!(o.missing.examples[0].topic.as_deref(), Some(T));
}

#[test]
fn comparison_counts_orphans_only_after_the_first_matched_record() {
    // Records at ts 10 and 20 belong to rows an outbox cleanup deleted; "x" at ts 40 was published
    // after the first record whose row still exists (ts 30): an orphan.
    let records = [rec(0, 0, 10, "gone1"), rec(0, 1, 20, "gone2"), rec(0, 2, 30, "e1"), rec(0, 3, 40, "x")];
    let o = finish(compare(vec![row("e1", "a", 1)], &records), OrphanPolicy::Window);
    assert_eq!(o.orphans.count, 1);
    assert_eq!(o.orphans.examples[0].id.as_deref(), Some("x"));
    assert_eq!(o.orphans.examples[0].location.offset, 3);
    assert_eq!(o.unmatched_outside_window, 2);
    assert_eq!(o.orphan_window, Some(TimeRange { from_ms: Some(30), until_ms: None }));

    let o = finish(compare(vec![row("e1", "a", 1)], &records), OrphanPolicy::All);
    assert_eq!((o.orphans.count, o.unmatched_outside_window), (3, 0));

    let o = finish(compare(vec![row("e1", "a", 1)], &records), OrphanPolicy::Off);
    assert_eq!((o.orphans.count, o.orphan_window), (0, None));
}

#[test]
fn comparison_orphan_window_follows_since_and_until() {
    let records = [rec(0, 0, 10, "old"), rec(0, 1, 50, "in"), rec(0, 2, 90, "late")];
    let c = compare(vec![], &records);
    let window = TimeRange { from_ms: Some(40), until_ms: Some(80) };
    let candidates = c.orphan_candidates(OrphanPolicy::Window, window);
    assert_eq!(candidates, vec!["in".to_string()], "only candidates inside the window are looked up");
    let o = c.finish(OrphanPolicy::Window, window, &HashSet::new());
    assert_eq!(o.orphans.count, 1);
    assert_eq!(o.unmatched_outside_window, 2);
}

#[test]
fn comparison_without_window_or_match_counts_no_orphans() {
    // Every row deleted (or none written yet): there is nothing to anchor a window to.
    let o = finish(compare(vec![], &[rec(0, 0, 10, "a"), rec(0, 1, 20, "b")]), OrphanPolicy::Window);
    assert_eq!((o.orphans.count, o.orphan_window, o.unmatched_outside_window), (0, None, 2));
}

#[test]
fn comparison_rows_outside_the_window_are_not_orphans() {
    // "later" was committed after the rows were read (or lies outside --since/--until): the lookup
    // in the whole table finds it.
    let c = compare(vec![row("e1", "a", 1)], &[rec(0, 0, 10, "e1"), rec(0, 1, 20, "later"), rec(0, 2, 30, "x")]);
    let mut candidates = c.orphan_candidates(OrphanPolicy::Window, TimeRange::default());
    candidates.sort();
    assert_eq!(candidates, vec!["later".to_string(), "x".to_string()]);
    let o = c.finish(OrphanPolicy::Window, TimeRange::default(), &HashSet::from(["later".to_string()]));
    assert_eq!((o.orphans.count, o.rows_outside_window), (1, 1));
    assert_eq!(o.orphans.examples[0].id.as_deref(), Some("x"));
}

#[test]
fn comparison_records_without_id_header_are_orphans() {
    let c = compare(vec![row("e1", "a", 1)], &[rec(0, 0, 10, "e1"), (0, 1, 20, None)]);
    let o = finish(c, OrphanPolicy::Window);
    assert_eq!(o.orphans.count, 1);
    assert_eq!(o.orphans.examples[0].id, None);
}

#[test]
fn comparison_redelivery_is_duplicates_not_order_violations() {
    // A relay crash after publishing e1..e3 but before confirming: all three are published again.
    let rows = vec![row("e1", "a", 1), row("e2", "a", 2), row("e3", "a", 3)];
    let records = [
        rec(0, 0, 1, "e1"),
        rec(0, 1, 2, "e2"),
        rec(0, 2, 3, "e3"),
        rec(0, 3, 4, "e1"),
        rec(0, 4, 5, "e2"),
        rec(0, 5, 6, "e3"),
    ];
    let o = finish(compare(rows, &records), OrphanPolicy::Window);
    assert_eq!(o.order_violations.count, 0);
    assert_eq!((o.duplicates.count, o.duplicate_records), (3, 3));
    assert_eq!(o.duplicates.examples[0].id, "e1");
    assert_eq!(o.duplicates.examples[0].copies, 2);
    let offsets: Vec<i64> = o.duplicates.examples[0].locations.iter().map(|l| l.offset).collect();
    assert_eq!(offsets, vec![0, 3]);
    assert_eq!(o.missing.count, 0);
}

#[test]
fn comparison_counts_duplicate_orphans_once_as_orphan() {
    let c = compare(vec![row("e1", "a", 1)], &[rec(0, 0, 10, "e1"), rec(0, 1, 20, "x"), rec(0, 2, 30, "x")]);
    let o = finish(c, OrphanPolicy::Window);
    assert_eq!((o.orphans.count, o.duplicates.count, o.duplicate_records), (1, 1, 1));
}

#[test]
fn comparison_finds_order_violations_per_aggregate_and_partition() {
    let rows = vec![
        row("a1", "A", 1),
        row("a2", "A", 2),
        row("a3", "A", 3),
        row("b1", "B", 4),
        row("b2", "B", 5),
        row("c1", "C", 6),
        row("c2", "C", 7),
    ];
    let records = [
        // A: 1, 3, 2 -> a2 arrives after a3.
        rec(0, 0, 1, "a1"),
        rec(0, 1, 1, "a3"),
        rec(0, 2, 1, "b1"),
        rec(0, 3, 1, "a2"),
        rec(0, 4, 1, "b2"),
        // C's events in two partitions (a repartitioned topic): each partition on its own is in order.
        rec(1, 0, 1, "c2"),
        rec(2, 0, 1, "c1"),
    ];
    let o = finish(compare(rows, &records), OrphanPolicy::Window);
    assert_eq!(o.order_violations.count, 1, "{:?}", o.order_violations);
    let v = &o.order_violations.examples[0];
    assert_eq!(
        (v.aggregate.as_str(), v.id.as_str(), v.offset, v.after_id.as_str(), v.after_offset),
        ("A", "a2", 3, "a3", 1)
    );
    assert_eq!((v.order.as_str(), v.after_order.as_str()), ("2", "3"));
    assert_eq!((v.topic.as_str(), v.partition), (T, 0));
}

#[test]
fn comparison_checks_first_copies_in_each_partition() {
    // Copies of a1, a2 in a second partition (the topic was repartitioned and events republished):
    // there they are first copies, and out of order; a third copy of a1 there is only a duplicate.
    let rows = vec![row("a1", "A", 1), row("a2", "A", 2)];
    let records = [rec(0, 0, 1, "a1"), rec(0, 1, 1, "a2"), rec(1, 0, 1, "a2"), rec(1, 1, 1, "a1"), rec(1, 2, 1, "a2")];
    let o = finish(compare(rows, &records), OrphanPolicy::Window);
    assert_eq!((o.order_violations.count, o.order_checked), (1, 4));
    assert_eq!((o.order_violations.examples[0].partition, o.order_violations.examples[0].id.as_str()), (1, "a1"));
    assert_eq!((o.duplicates.count, o.duplicate_records), (2, 3));
}

#[test]
fn comparison_compares_with_the_previous_event_only() {
    // One late event is one violation, not one per event after it.
    let rows: Vec<_> = (1..=5).map(|i| row(&format!("e{i}"), "A", i)).collect();
    let records = [rec(0, 0, 1, "e5"), rec(0, 1, 1, "e1"), rec(0, 2, 1, "e2"), rec(0, 3, 1, "e3"), rec(0, 4, 1, "e4")];
    assert_eq!(finish(compare(rows, &records), OrphanPolicy::Window).order_violations.count, 1);
}

#[test]
fn comparison_equal_commit_order_is_not_a_violation() {
    // Two events of one transaction share its commit timestamp.
    let mut rows = vec![row("e1", "A", 7), row("e2", "A", 7)];
    rows[1].order.as_mut().unwrap().value = "same".into();
    let o = finish(compare(rows, &[rec(0, 0, 1, "e2"), rec(0, 1, 1, "e1")]), OrphanPolicy::Window);
    assert_eq!(o.order_violations.count, 0);
}

#[test]
fn comparison_skips_order_without_order_value_or_aggregate() {
    let rows = vec![
        CommittedEvent {
            id: "n1".into(),
            topic: Some(T.into()),
            aggregate: None,
            order: Some(CommitOrder { rank: 2, value: "2".into() }),
            published: None,
        },
        CommittedEvent {
            id: "n2".into(),
            topic: Some(T.into()),
            aggregate: None,
            order: Some(CommitOrder { rank: 1, value: "1".into() }),
            published: None,
        },
        CommittedEvent {
            id: "u1".into(),
            topic: Some(T.into()),
            aggregate: Some("A".into()),
            order: None,
            published: None,
        },
        row("a1", "A", 5),
    ];
    let records = [rec(0, 0, 1, "n1"), rec(0, 1, 1, "n2"), rec(0, 2, 1, "a1"), rec(0, 3, 1, "u1")];
    let o = finish(compare(rows, &records), OrphanPolicy::Window);
    assert_eq!((o.order_violations.count, o.order_checked), (0, 1));
}

#[test]
fn comparison_unroutable_row_is_missing_without_topic() {
    let c = compare(
        vec![CommittedEvent {
            id: "e1".into(),
            topic: None,
            aggregate: Some("a".into()),
            order: None,
            published: None,
        }],
        &[],
    );
    assert!(c.committed_topics().is_empty());
    let o = finish(c, OrphanPolicy::Window);
    assert_eq!(o.missing.examples[0].topic, None);
}

#[test]
fn time_range_bounds() {
    let r = TimeRange { from_ms: Some(10), until_ms: Some(20) };
    assert!(!r.contains(Some(9)));
    assert!(r.contains(Some(10)));
    assert!(r.contains(Some(19)));
    assert!(!r.contains(Some(20)));
    assert!(r.contains(None), "a record without a timestamp cannot be placed outside");
    assert!(TimeRange::default().contains(Some(i64::MIN)));
}

#[test]
fn iso8601_formats_epoch_millis() {
    assert_eq!(iso8601_utc(0), "1970-01-01T00:00:00.000Z");
    assert_eq!(iso8601_utc(951_782_400_000), "2000-02-29T00:00:00.000Z");
    assert_eq!(iso8601_utc(1_714_564_800_123), "2024-05-01T12:00:00.123Z");
    assert_eq!(iso8601_utc(-1), "1969-12-31T23:59:59.999Z");
}

fn report(o: Outcome) -> Report {
    Report {
        table: "public.outbox".into(),
        topics: vec![T.into()],
        since: None,
        until: None,
        order_source: "column `seq`".into(),
        outcome: o,
        notes: vec!["a note".into()],
        isolation: Vec::new(),
    }
}

#[test]
fn report_fails_on_findings_and_on_duplicates_only_when_asked() {
    let clean = report(finish(compare(vec![row("e1", "a", 1)], &[rec(0, 0, 1, "e1")]), OrphanPolicy::Window));
    assert!(!clean.failed(true));
    assert!(clean.to_text(false).contains("result: OK"));

    let dup = report(finish(
        compare(vec![row("e1", "a", 1)], &[rec(0, 0, 1, "e1"), rec(0, 1, 2, "e1")]),
        OrphanPolicy::Window,
    ));
    assert!(!dup.failed(false));
    assert!(dup.failed(true));
    assert_eq!(dup.to_json(true)["ok"], false);
    assert_eq!(dup.to_json(false)["duplicates"]["count"], 1);

    let missing = report(finish(
        compare(vec![row("e1", "a", 1), row("e2", "a", 2)], &[rec(0, 0, 1, "e1")]),
        OrphanPolicy::Window,
    ));
    assert!(missing.failed(false));
    let text = missing.to_text(false);
    assert!(
        text.contains("missing:           1") && text.contains("id=e2") && text.contains("result: FAILED"),
        "{text}"
    );
    assert!(text.contains("note: a note"));
    let json = missing.to_json(false);
    assert_eq!(json["missing"]["count"], 1);
    assert_eq!(json["missing"]["examples"][0]["id"], "e2");
    assert_eq!(json["events_committed"], 2);
    assert_eq!(json["records_consumed"], 1);

    let orphan = report(finish(
        compare(vec![row("e1", "a", 1)], &[rec(0, 0, 1, "e1"), rec(0, 1, 2, "x")]),
        OrphanPolicy::Window,
    ));
    assert!(orphan.failed(false));
    assert!(orphan.to_text(false).contains("id=x at outbox.event.Order[0]@1"), "{}", orphan.to_text(false));

    let order = report(finish(
        compare(vec![row("e1", "a", 1), row("e2", "a", 2)], &[rec(0, 0, 1, "e2"), rec(0, 1, 2, "e1")]),
        OrphanPolicy::Window,
    ));
    assert!(order.failed(false));
    assert_eq!(order.to_json(false)["order_violations"]["examples"][0]["after_id"], "e2");
}

#[test]
fn comparison_orders_by_the_commit_lsn_header_when_records_carry_it() {
    let mut c = Comparison::new();
    c.use_commit_lsn_header(Some("__pgoutbox.commit_lsn".into()));
    for id in ["e1", "e2"] {
        c.add_committed(CommittedEvent {
            id: id.into(),
            topic: Some(T.into()),
            aggregate: Some("a".into()),
            order: None,
            published: None,
        });
    }
    // e2 committed first (0/20) but sits after e1 (0/30) in the partition: a violation, found from
    // the records alone.
    for (offset, id, lsn) in [(0, "e1", "0/30"), (1, "e2", "0/20")] {
        c.observe(&ObservedRecord {
            topic: T,
            partition: 0,
            offset,
            timestamp_ms: Some(1),
            id: Some(id.as_bytes()),
            commit_lsn: Some(lsn.as_bytes()),
        });
    }
    assert!(c.ordered_by_commit_lsn());
    let o = finish(c, OrphanPolicy::Off);
    assert_eq!(o.order_violations.count, 1);
}

/// Under exactly once the report shows what each isolation level sees, in text and JSON.
#[test]
fn report_shows_each_isolation_level() {
    let mut r = report(finish(compare(vec![row("e1", "a", 1)], &[rec(0, 0, 1, "e1")]), OrphanPolicy::Window));
    r.isolation = vec![
        super::IsolationFigures { level: "read_committed", missing: 0, duplicates: 0, duplicate_records: 0 },
        super::IsolationFigures { level: "read_uncommitted", missing: 0, duplicates: 52, duplicate_records: 52 },
    ];
    let text = r.to_text(false);
    assert!(text.contains("at read_committed:    missing 0, duplicates 0"), "{text}");
    assert!(text.contains("at read_uncommitted:  missing 0, duplicates 52 (52 extra record(s))"), "{text}");
    let json = r.to_json(false);
    assert_eq!(json["isolation_levels"][1]["duplicates"], 52);
}
