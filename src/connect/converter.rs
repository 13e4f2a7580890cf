//! The converters a connector config names (`key.converter`, `value.converter`, `header.converter`),
//! and the one `encode` that turns a (schema, value) pair into record bytes as that converter would.

use bytes::Bytes;

use super::config::{ConfigError, Reader};
use super::{header, json, string, ConvertError, Schema, Value};

pub const JSON_CONVERTER: &str = "org.apache.kafka.connect.json.JsonConverter";
pub const STRING_CONVERTER: &str = "org.apache.kafka.connect.storage.StringConverter";
pub const SIMPLE_HEADER_CONVERTER: &str = "org.apache.kafka.connect.storage.SimpleHeaderConverter";
pub const BINARY_DATA_CONVERTER: &str = "io.debezium.converters.BinaryDataConverter";

/// Kafka Connect converters pgoutbox reproduces byte for byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Converter {
    /// `org.apache.kafka.connect.storage.StringConverter`
    String,
    /// `org.apache.kafka.connect.json.JsonConverter` with `schemas.enable`.
    Json { schemas: bool },
    /// `io.debezium.converters.BinaryDataConverter` (and Kafka's `ByteArrayConverter`): BYTES values
    /// as they are (the Avro-in-outbox recipe with a bytea payload column).
    Binary,
}

impl Converter {
    /// `<which>.converter` and its `schemas.enable`; without one, JsonConverter with schemas, as
    /// the Debezium container image configures its worker.
    pub fn parse(r: &mut Reader<'_>, which: &str) -> Result<Converter, ConfigError> {
        let key = format!("{which}.converter");
        let class = r.string_or(&key, JSON_CONVERTER);
        let schemas = r.bool_or(&format!("{which}.converter.schemas.enable"), true)?;
        match class.as_str() {
            STRING_CONVERTER => Ok(Converter::String),
            JSON_CONVERTER => Ok(Converter::Json { schemas }),
            // Kafka's own ByteArrayConverter behaves the same: BYTES as they are, null as null, any
            // other schema refused.
            BINARY_DATA_CONVERTER
            | "io.debezium.converters.ByteArrayConverter"
            | "org.apache.kafka.connect.converters.ByteArrayConverter" => Ok(Converter::Binary),
            other => Err(ConfigError::invalid(&key, format!("`{other}` is not supported; use {STRING_CONVERTER}, {JSON_CONVERTER}, {BINARY_DATA_CONVERTER} or org.apache.kafka.connect.converters.ByteArrayConverter"))),
        }
    }

    /// `header.converter`: `None` is SimpleHeaderConverter (Connect's default).
    pub fn parse_header(r: &mut Reader<'_>) -> Result<Option<Converter>, ConfigError> {
        match r.string_or("header.converter", SIMPLE_HEADER_CONVERTER).as_str() {
            SIMPLE_HEADER_CONVERTER => Ok(None),
            JSON_CONVERTER => Ok(Some(Converter::Json { schemas: r.bool_or("header.converter.schemas.enable", true)? })),
            STRING_CONVERTER => Ok(Some(Converter::String)),
            h => Err(ConfigError::invalid("header.converter", format!("`{h}` is not supported; use {SIMPLE_HEADER_CONVERTER} (Connect's default), {JSON_CONVERTER} or {STRING_CONVERTER}"))),
        }
    }

    /// `fromConnectData`: the record bytes, `None` for a Kafka null. `schema` is `None` only for
    /// schemaless data (an expanded top-level `[]`).
    pub fn encode(self, schema: Option<&Schema>, value: &Value) -> Result<Option<Bytes>, ConvertError> {
        match self {
            Converter::Json { schemas } => json::json_converter(schemas, schema, value),
            Converter::String => Ok(string::encode(schema, value)),
            Converter::Binary => match value {
                Value::Null => Ok(None),
                Value::Bytes(b) => Ok(Some(b.clone())),
                _ => Err(ConvertError::NotBytes("BinaryDataConverter")),
            },
        }
    }

    /// A header's bytes under `header.converter` (`None`: SimpleHeaderConverter); another
    /// converter's `fromConnectHeader` is its `fromConnectData`.
    pub fn encode_header(
        converter: Option<Converter>,
        schema: &Schema,
        value: &Value,
    ) -> Result<Option<Bytes>, ConvertError> {
        match converter {
            None => Ok(header::encode(Some(schema), value)),
            Some(c) => c.encode(Some(schema), value),
        }
    }
}

#[cfg(test)]
mod tests;
