//! Debezium's heartbeat records, which pass through the Event Router unchanged: topic
//! `<topic.heartbeat.prefix>.<topic.prefix>`, partition 0, key struct `ServerNameKey{serverName}`,
//! value struct `Heartbeat{ts_ms}`, no headers.

use std::sync::Arc;

use bytes::Bytes;

use super::json::write_string;
use super::OutboxRecord;
use crate::config::Converter;

const KEY_SCHEMA: &str = r#"{"type":"struct","fields":[{"type":"string","optional":false,"field":"serverName"}],"optional":false,"name":"io.debezium.connector.common.ServerNameKey"}"#;
const VALUE_SCHEMA: &str = r#"{"type":"struct","fields":[{"type":"int64","optional":false,"field":"ts_ms"}],"optional":false,"name":"io.debezium.connector.common.Heartbeat"}"#;

pub fn record(
    topic: &Arc<str>,
    server_name: &str,
    key_converter: Converter,
    value_converter: Converter,
    ts_ms: i64,
) -> OutboxRecord {
    let mut name = Vec::new();
    write_string(&mut name, server_name.as_bytes());
    let key_payload = format!(r#"{{"serverName":{}}}"#, String::from_utf8_lossy(&name));
    let value_payload = format!(r#"{{"ts_ms":{ts_ms}}}"#);
    let encode = |c: Converter, schema: &str, payload: &str, as_string: String| -> Option<Bytes> {
        match c {
            // Connect's Struct.toString().
            Converter::String => Some(Bytes::from(as_string)),
            Converter::Json { schemas: false } => Some(Bytes::from(payload.to_string())),
            Converter::Json { schemas: true } => {
                Some(Bytes::from(format!(r#"{{"schema":{schema},"payload":{payload}}}"#)))
            }
            // BinaryDataConverter refuses structs; Debezium would fail on the heartbeat too.
            Converter::Binary => None,
        }
    };
    OutboxRecord {
        topic: topic.clone(),
        key: encode(key_converter, KEY_SCHEMA, &key_payload, format!("Struct{{serverName={server_name}}}")),
        value: encode(value_converter, VALUE_SCHEMA, &value_payload, format!("Struct{{ts_ms={ts_ms}}}")),
        headers: Vec::new(),
        partition: Some(0),
        timestamp_ms: ts_ms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heartbeat_matches_debezium_under_each_converter() {
        let t: Arc<str> = Arc::from("__debezium-heartbeat.dbserver1");
        let r = record(&t, "dbserver1", Converter::Json { schemas: true }, Converter::Json { schemas: false }, 42);
        assert_eq!(
            std::str::from_utf8(r.key.as_deref().unwrap()).unwrap(),
            r#"{"schema":{"type":"struct","fields":[{"type":"string","optional":false,"field":"serverName"}],"optional":false,"name":"io.debezium.connector.common.ServerNameKey"},"payload":{"serverName":"dbserver1"}}"#
        );
        assert_eq!(r.value.as_deref(), Some(&br#"{"ts_ms":42}"#[..]));
        assert_eq!(r.partition, Some(0));
        let r = record(&t, "dbserver1", Converter::String, Converter::String, 42);
        assert_eq!(r.key.as_deref(), Some(&b"Struct{serverName=dbserver1}"[..]));
        assert_eq!(r.value.as_deref(), Some(&b"Struct{ts_ms=42}"[..]));
    }
}
