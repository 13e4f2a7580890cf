//! Debezium's heartbeat records, which pass through the Event Router unchanged: topic
//! `<topic.heartbeat.prefix>.<topic.prefix>` (joined by `topic.delimiter`), partition 0, key struct `ServerNameKey{serverName}`,
//! value struct `Heartbeat{ts_ms}`, no headers.

use std::sync::Arc;

use bytes::Bytes;

use super::OutboxRecord;
use crate::connect::{Converter, Schema, Type, Value};

/// A required struct of one required field, as Debezium's heartbeat key and value are.
fn one_field_struct(name: &str, field: &str, ty: Type) -> Schema {
    Schema::Struct {
        name: Some(name.to_string()),
        fields: vec![(field.to_string(), Schema::primitive(ty, false))],
        optional: false,
        version: None,
        doc: None,
    }
}

/// The heartbeat record; `Err` only when a schema registry did not give the heartbeat schema's id
/// (the heartbeat is then skipped: it carries no event).
pub fn record(
    topic: &Arc<str>,
    server_name: &str,
    key_converter: &Converter,
    value_converter: &Converter,
    ts_ms: i64,
) -> Result<OutboxRecord, crate::connect::registry::RegistryError> {
    let key_schema = one_field_struct("io.debezium.connector.common.ServerNameKey", "serverName", Type::String);
    let value_schema = one_field_struct("io.debezium.connector.common.Heartbeat", "ts_ms", Type::Int64);
    let key = Value::Struct(vec![Value::String(Bytes::copy_from_slice(server_name.as_bytes()))]);
    let value = Value::Struct(vec![Value::Int(ts_ms)]);
    // BinaryDataConverter refuses structs; Debezium would fail on the heartbeat too. A registry
    // converter registers the heartbeat's schemas under the heartbeat topic's subjects and may add
    // its id headers.
    let mut ids = Vec::new();
    let encode = |c: &Converter, s: &crate::connect::Schema, v: &Value, ids: &mut Vec<_>| match c.encode_to(
        topic,
        Some(s),
        v,
        ids,
    ) {
        Ok(bytes) => Ok(bytes),
        Err(crate::connect::ConvertError::Registry(e)) => Err(e),
        Err(_) => Ok(None),
    };
    let key = encode(key_converter, &key_schema, &key, &mut ids)?;
    let value = encode(value_converter, &value_schema, &value, &mut ids)?;
    Ok(OutboxRecord {
        topic: topic.clone(),
        key,
        value,
        headers: ids.into_iter().map(|(name, value)| super::Header { name, value }).collect(),
        partition: Some(0),
        timestamp_ms: ts_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heartbeat_matches_debezium_under_each_converter() {
        let t: Arc<str> = Arc::from("__debezium-heartbeat.dbserver1");
        let r = record(&t, "dbserver1", &Converter::json(true), &Converter::json(false), 42).unwrap();
        assert_eq!(
            std::str::from_utf8(r.key.as_deref().unwrap()).unwrap(),
            r#"{"schema":{"type":"struct","fields":[{"type":"string","optional":false,"field":"serverName"}],"optional":false,"name":"io.debezium.connector.common.ServerNameKey"},"payload":{"serverName":"dbserver1"}}"#
        );
        assert_eq!(r.value.as_deref(), Some(&br#"{"ts_ms":42}"#[..]));
        assert_eq!(r.partition, Some(0));
        let r = record(&t, "dbserver1", &Converter::String, &Converter::String, 42).unwrap();
        assert_eq!(r.key.as_deref(), Some(&b"Struct{serverName=dbserver1}"[..]));
        assert_eq!(r.value.as_deref(), Some(&b"Struct{ts_ms=42}"[..]));
    }
}
