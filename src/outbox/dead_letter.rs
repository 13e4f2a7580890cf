//! Dead-letter records (`errors.tolerance=all` with `errors.deadletterqueue.topic.name`): the event
//! that could not be published, with the reason in Kafka Connect's `__connect.errors.*` headers.

use std::sync::Arc;

use bytes::Bytes;

use super::{Header, OutboxRecord};
use crate::connect::json::write_string;
use crate::pgoutput::{TupleData, Value};

/// Where the failure happened, as Connect names its stages.
#[derive(Debug, Clone, Copy)]
pub enum Stage {
    /// The Event Router could not route the row.
    Transformation,
    /// The broker refused the record for good.
    KafkaProduce,
}

pub struct Failure<'a> {
    pub stage: Stage,
    pub message: &'a str,
    pub connector: &'a str,
    pub original_topic: Option<&'a str>,
    pub event_id: Option<&'a str>,
    pub table: Option<&'a str>,
}

fn header(name: &str, value: Option<&str>) -> Header {
    Header { name: Arc::from(name), value: value.map(|v| Bytes::copy_from_slice(v.as_bytes())) }
}

/// A dead-letter record. `row` (with its column names) becomes a JSON object of the columns' text
/// values, so the failed event can be inspected and replayed; it is absent for broker refusals,
/// where the record itself was the problem (e.g. too large).
pub fn record(
    topic: &Arc<str>,
    failure: &Failure<'_>,
    row: Option<(&[String], &TupleData)>,
    timestamp_ms: i64,
) -> OutboxRecord {
    let value = row.map(|(columns, tuple)| {
        let mut out = Vec::from(&b"{"[..]);
        for (i, (name, v)) in columns.iter().zip(&tuple.values).enumerate() {
            if i > 0 {
                out.push(b',');
            }
            write_string(&mut out, name.as_bytes());
            out.push(b':');
            match v {
                Value::Text(t) | Value::Binary(t) => write_string(&mut out, t),
                Value::Null | Value::UnchangedToast => out.extend_from_slice(b"null"),
            }
        }
        out.push(b'}');
        Bytes::from(out)
    });
    let stage = match failure.stage {
        Stage::Transformation => "TRANSFORMATION",
        Stage::KafkaProduce => "KAFKA_PRODUCE",
    };
    let mut headers = vec![
        header("__connect.errors.stage", Some(stage)),
        header("__connect.errors.connector.name", Some(failure.connector)),
        header("__connect.errors.task.id", Some("0")),
        header("__connect.errors.exception.message", Some(failure.message)),
    ];
    if let Some(t) = failure.original_topic {
        headers.push(header("__connect.errors.topic", Some(t)));
    }
    if let Some(t) = failure.table {
        headers.push(header("__pgoutbox.table", Some(t)));
    }
    if let Some(id) = failure.event_id {
        headers.push(header("id", Some(id)));
    }
    OutboxRecord { topic: topic.clone(), key: None, value, headers, partition: None, timestamp_ms }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dead_letter_carries_the_row_and_the_error() {
        let topic: Arc<str> = Arc::from("dlq");
        let cols = vec!["id".to_string(), "aggregatetype".to_string()];
        let row = TupleData { values: vec![Value::Text(Bytes::from_static(b"1")), Value::Null] };
        let f = Failure {
            stage: Stage::Transformation,
            message: "route-by column is NULL",
            connector: "c",
            original_topic: None,
            event_id: Some("1"),
            table: Some("public.outbox"),
        };
        let r = record(&topic, &f, Some((&cols, &row)), 5);
        assert_eq!(r.value.as_deref(), Some(&br#"{"id":"1","aggregatetype":null}"#[..]));
        assert!(r.headers.iter().any(|h| &*h.name == "__connect.errors.exception.message"
            && h.value.as_deref() == Some(&b"route-by column is NULL"[..])));
        assert_eq!(r.event_id(), "1");
    }
}
