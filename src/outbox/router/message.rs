//! The message outbox: a logical decoding message (`pg_logical_emit_message(true, '<prefix>',
//! '<json>')`) through `DecodeLogicalDecodingMessageContent` and the Event Router, as Debezium runs
//! the two (`debezium::message`, then `EventRouterDelegate.apply` on the decoded struct).
//!
//! A table row is routed by columns planned once per table; a message's struct is inferred from
//! each message's JSON, so its fields are looked up by name per message, and where the table's plan
//! is checked once, each message is checked here, with Debezium's outcome:
//! - a field the router reads that the JSON lacks fails (Debezium: "Unable to find payload field",
//!   "… is not a valid field name"); a JSON `null` is no field at all unless `fields.null.include`;
//! - the types are JSON's: the route-by field must be a string, a partition placement an integer
//!   within int32, a schema version an int32, and `table.field.event.timestamp` can only be null
//!   (an inferred number has no timestamp type: Debezium fails on any other value);
//! - the key and header schemas are the inferred ones (optional), and an envelope placement's
//!   struct is named after the route-by value alone (the decoded struct has no schema name).

use std::sync::Arc;

use bytes::Bytes;

use super::{envelope_struct, is_blank, Origin, RouteError, Router, NO_ENVELOPE_SCHEMA};
use crate::connect::record::{Data, Header, Record};
use crate::connect::{Schema, Type, Value};
use crate::debezium::expand::{expand_json_payload, ExpandError, Expanded};
use crate::outbox::chain::DecodeMessages;
use crate::outbox::options::Placement;
use crate::outbox::OutboxRecord;

/// One logical decoding message, as pgoutput delivered it.
pub struct Message<'a> {
    pub prefix: &'a str,
    pub content: &'a [u8],
}

/// The decoded struct's fields by name.
struct Event<'a> {
    fields: &'a [(String, Schema)],
    values: &'a [Value],
    /// Where the id field is (what names the event in errors).
    id: Option<usize>,
    origin: Origin<'a>,
}

impl Event<'_> {
    fn get(&self, name: &str) -> Option<(&Schema, &Value)> {
        let i = self.fields.iter().position(|(n, _)| n == name)?;
        Some((&self.fields[i].1, self.values.get(i).unwrap_or(&Value::Null)))
    }

    /// "event `<id>` of the messages of prefix `<p>`", for errors and warnings.
    fn what(&self) -> String {
        match self.id.and_then(|i| self.values.get(i)) {
            Some(Value::String(t)) => format!("event `{}` of {}", String::from_utf8_lossy(t), self.origin),
            Some(Value::Int(i)) => format!("event `{i}` of {}", self.origin),
            _ => format!("an event of {}", self.origin),
        }
    }

    fn error(&self, problem: String, fix: &str) -> RouteError {
        RouteError { registry: None, what: self.what(), problem, fix: fix.to_string() }
    }

    /// The field the router reads through `option`, which the JSON must have.
    fn required(&self, name: &str, option: &str) -> Result<(&Schema, &Value), RouteError> {
        self.get(name).ok_or_else(|| {
            self.error(
                format!("its JSON has no field `{name}` (a JSON null counts as none unless fields.null.include=true)"),
                &format!("give every message a `{name}` field, or set transforms.<router>.{option} to the field that holds it"),
            )
        })
    }

    fn data(&self, name: &str, option: &str) -> Result<Data, RouteError> {
        let (schema, value) = self.required(name, option)?;
        Ok(Data::new(Arc::new(schema.clone()), value.clone()))
    }

    /// An int32 field (`Struct.getInt32`): a JSON integer that fits.
    fn int32(&self, name: &str, option: &str) -> Result<Option<i32>, RouteError> {
        match self.required(name, option)? {
            (_, Value::Null) => Ok(None),
            (s, Value::Int(v)) if s.primitive_type() == Some(Type::Int32) => Ok(i32::try_from(*v).ok()),
            _ => Err(self.error(
                format!("its field `{name}` is not a JSON integer within int32"),
                &format!("write `{name}` as an integer in the messages ({option})"),
            )),
        }
    }
}

const CONTENT_FIX: &str = "emit JSON objects, as in pg_logical_emit_message(true, '<prefix>', '{\"id\": \"…\", \"aggregatetype\": \"…\", \"aggregateid\": \"…\", \"payload\": {…}}'), or leave the prefix out with message.prefix.exclude.list";

impl Router {
    /// The record for one logical decoding message, through the transform chain and the
    /// converters; `None` when a transform drops it.
    pub fn route_message(
        &mut self,
        decode: &DecodeMessages,
        message: &Message<'_>,
        timestamp_ms: i64,
    ) -> Result<Option<OutboxRecord>, RouteError> {
        let origin = Origin::Messages(message.prefix);
        // Debezium's message records carry no context headers (only its table change events do).
        let mut leading = Vec::new();
        if !self.cfg.chain.before.is_empty() || decode.gate.is_some() || self.cfg.chain.router_gate.is_some() {
            let topic = format!("{}.message", self.cfg.topic_prefix);
            match self.before_router(topic, leading, origin, decode.gate.as_ref())? {
                Some(headers) => leading = headers,
                None => return Ok(None),
            }
        }
        let decoded =
            crate::debezium::message::decode_content(message.content, decode.null_include).map_err(|e| RouteError {
                registry: None,
                what: format!("a message of prefix `{}`", message.prefix),
                problem: format!("transform `{}` cannot decode it: {e}", decode.alias),
                fix: CONTENT_FIX.to_string(),
            })?;
        let record = self.message_record(decoded, origin, timestamp_ms, leading)?;
        self.finish(record, origin)
    }

    /// `EventRouterDelegate.apply` on a decoded message, in Debezium's order.
    fn message_record(
        &mut self,
        decoded: Expanded,
        origin: Origin<'_>,
        timestamp_ms: i64,
        leading: Vec<Header>,
    ) -> Result<Record, RouteError> {
        let (Schema::Struct { mut fields, .. }, Value::Struct(mut values)) = (decoded.schema, decoded.value) else {
            return Err(RouteError {
                registry: None,
                what: format!("an event of {origin}"),
                problem: "its content is not a JSON object".into(),
                fix: CONTENT_FIX.into(),
            });
        };
        let cfg = &self.cfg;
        // The payload is moved out rather than copied (it is most of the event), unless the router
        // reads its field again.
        let payload_name = &cfg.field_event_payload;
        let read_again = [&cfg.field_event_id, &cfg.field_event_key, &cfg.route_by_field].contains(&payload_name)
            || cfg.field_event_timestamp.as_ref() == Some(payload_name)
            || cfg.field_event_schema_version.as_ref() == Some(payload_name)
            || cfg.additional.iter().any(|a| &a.column == payload_name);
        let taken = match fields.iter().position(|(n, _)| n == payload_name) {
            Some(i) if !read_again && i < values.len() => Some((
                std::mem::replace(&mut fields[i].1, Schema::optional(Type::Bytes)),
                std::mem::replace(&mut values[i], Value::Null),
            )),
            _ => None,
        };
        let id = fields.iter().position(|(n, _)| *n == cfg.field_event_id);
        let event = Event { fields: &fields, values: &values, id, origin };
        let (payload_schema, payload) = match taken {
            Some(p) => p,
            None => {
                let (s, v) = event.required(payload_name, "table.field.event.payload")?;
                (s.clone(), v.clone())
            }
        };
        let timestamp_ms = match &cfg.field_event_timestamp {
            None => timestamp_ms,
            Some(f) => match event.required(f, "table.field.event.timestamp")? {
                (_, Value::Null) => timestamp_ms,
                _ => return Err(event.error(
                    format!("its field `{f}` is a JSON number, which has no timestamp type (Debezium accepts only Timestamp, MicroTimestamp or NanoTimestamp fields, which a message cannot carry)"),
                    "unset table.field.event.timestamp for the message outbox (the record then carries the time the message was read)",
                )),
            },
        };
        let id = event.data(&cfg.field_event_id, "table.field.event.id")?;
        if id.value == Value::Null {
            return Err(event.error(
                format!("its event id field `{}` is null", cfg.field_event_id),
                "give every event an id (consumers deduplicate by it)",
            ));
        }
        let (payload_schema, payload) = self.message_payload(payload_schema, payload, &event);
        let route = match event.required(&cfg.route_by_field, "route.by.field")? {
            (s, Value::String(t)) if s.primitive_type() == Some(Type::String) => t.clone(),
            (_, Value::Null) => {
                return Err(event.error(
                    format!("its route-by field `{}` is null", cfg.route_by_field),
                    "set the aggregate type on every event; it names the topic",
                ))
            }
            _ => {
                return Err(event.error(
                    format!("its route-by field `{}` is not a JSON string", cfg.route_by_field),
                    "write the aggregate type as a string; it names the topic",
                ))
            }
        };
        let value = self.message_value(&event, payload_schema, payload, &route)?;
        let mut headers = leading;
        headers.push(Header { key: self.id_header.clone(), data: id });
        let mut partition = None;
        for a in &self.cfg.additional {
            if self.cfg.additional_missing_ignore && event.get(&a.column).is_none() {
                continue;
            }
            match a.placement {
                Placement::Header => headers.push(Header {
                    key: Arc::from(a.alias.as_str()),
                    data: event.data(&a.column, "table.fields.additional.placement")?,
                }),
                Placement::Partition => partition = event.int32(&a.column, "table.fields.additional.placement")?,
                Placement::Envelope => {}
            }
        }
        let key = event.data(&self.cfg.field_event_key, "table.field.event.key")?;
        let route = String::from_utf8_lossy(&route).into_owned();
        let describe = || event.what();
        let topic = self.topic(&route, &describe)?;
        Ok(Record { topic, partition, key, value, timestamp_ms, headers })
    }

    /// The payload field, expanded under `table.expand.json.payload` when it is a string (a
    /// failure keeps the string, as Debezium does); the schema `None` for a top-level `[]`.
    fn message_payload(&self, schema: Schema, payload: Value, event: &Event<'_>) -> (Option<Schema>, Value) {
        let text = match &payload {
            Value::String(t) if self.cfg.expand_json_payload => std::str::from_utf8(t).ok(),
            _ => None,
        };
        let Some(text) = text else { return (Some(schema), payload) };
        let options = crate::debezium::Expansion {
            nulls: self.cfg.json_null_behavior,
            empty_arrays: self.cfg.json_empty_array_behavior,
        };
        match expand_json_payload(text, &self.cfg.field_event_payload, options) {
            Ok(e) => (Some(e.schema), e.value),
            Err(ExpandError::NoSchema) => (None, payload.clone()),
            Err(e) => {
                tracing::warn!(event = event.what(), reason = %e, "JSON payload not expanded; published as a string, as Debezium does");
                (Some(schema), payload.clone())
            }
        }
    }

    /// The record value: the payload, or the envelope struct (named after the route-by value) with
    /// the `envelope` placements; a null without schema for a tombstone.
    fn message_value(
        &self,
        event: &Event<'_>,
        schema: Option<Schema>,
        payload: Value,
        route: &Bytes,
    ) -> Result<Data, RouteError> {
        let cfg = &self.cfg;
        let envelope: Vec<_> = cfg.additional.iter().filter(|a| a.placement == Placement::Envelope).collect();
        let blank = is_blank(&payload);
        let value = if envelope.is_empty() {
            Data { schema: schema.map(Arc::new), value: payload }
        } else {
            let Some(payload_schema) = schema else {
                let (problem, fix) = NO_ENVELOPE_SCHEMA;
                return Err(event.error(problem.into(), fix));
            };
            let mut fields = vec![("payload".to_string(), payload_schema)];
            let mut values = vec![payload];
            for a in envelope {
                match event.get(&a.column) {
                    Some((s, v)) => {
                        fields.push((a.alias.clone(), s.clone()));
                        values.push(v.clone());
                    }
                    None if cfg.additional_missing_ignore => {}
                    None => {
                        event.required(&a.column, "table.fields.additional.placement")?;
                    }
                }
            }
            let version = match &cfg.field_event_schema_version {
                Some(f) => event.int32(f, "table.field.event.schema.version")?,
                None => None,
            };
            envelope_struct(String::from_utf8_lossy(route).into_owned(), fields, values, version)
        };
        if cfg.tombstone_on_empty_payload && blank {
            return Ok(Data::null());
        }
        Ok(value)
    }
}
