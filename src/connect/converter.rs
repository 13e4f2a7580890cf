//! The converters a connector config names (`key.converter`, `value.converter`, `header.converter`),
//! and the one `encode` that turns a (schema, value) pair into record bytes as that converter would.

use std::sync::Arc;

use bytes::Bytes;

use super::config::{ConfigError, Reader};
use super::registry::{is_registry_class, RegistryConverter};
use super::{header, json, string, ConvertError, Schema, Value};

pub const JSON_CONVERTER: &str = "org.apache.kafka.connect.json.JsonConverter";
pub const STRING_CONVERTER: &str = "org.apache.kafka.connect.storage.StringConverter";
pub const SIMPLE_HEADER_CONVERTER: &str = "org.apache.kafka.connect.storage.SimpleHeaderConverter";
pub const BINARY_DATA_CONVERTER: &str = "io.debezium.converters.BinaryDataConverter";

pub const BYTE_BUFFER_CONVERTER: &str = "io.debezium.converters.ByteBufferConverter";

/// Kafka Connect converters pgoutbox reproduces byte for byte.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Converter {
    /// `org.apache.kafka.connect.storage.StringConverter`
    String,
    /// `org.apache.kafka.connect.json.JsonConverter` with `schemas.enable` and `decimal.format`.
    Json { schemas: bool, decimals: json::Decimals },
    /// `io.debezium.converters.BinaryDataConverter` (and Kafka's `ByteArrayConverter`): BYTES values
    /// as they are (the Avro-in-outbox recipe with a bytea payload column).
    Binary,
    /// BinaryDataConverter with `delegate.converter.type`: BYTES as they are, anything else
    /// through the delegate (JsonConverter or StringConverter).
    BinaryOr(Delegate),
    /// A schema-registry converter (Confluent's or Apicurio's Avro), with its registry and its
    /// cache of schema ids, shared by the records it writes.
    Registry(Arc<RegistryConverter>),
}

/// The delegate of a BinaryDataConverter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delegate {
    String,
    Json {
        schemas: bool,
        decimals: json::Decimals,
    },
    /// A schema-registry converter, its options under `delegate.converter.type.`.
    Registry(Arc<RegistryConverter>),
}

impl Converter {
    /// JsonConverter with `schemas.enable` as given and its other options at their defaults.
    pub fn json(schemas: bool) -> Converter {
        Converter::Json { schemas, decimals: json::Decimals::Base64 }
    }

    /// `<which>.converter` and its `schemas.enable`; without one, JsonConverter with schemas, as
    /// the Debezium container image configures its worker.
    pub fn parse(r: &mut Reader<'_>, which: &str) -> Result<Converter, ConfigError> {
        let key = format!("{which}.converter");
        let class = r.string_or(&key, JSON_CONVERTER);
        let schemas = r.bool_or(&format!("{which}.converter.schemas.enable"), true)?;
        match class.as_str() {
            STRING_CONVERTER => Ok(Converter::String),
            JSON_CONVERTER => Ok(Converter::Json { schemas, decimals: json_decimals(r, &key)? }),
            BYTE_BUFFER_CONVERTER => {
                r.warn(format!("{key}={BYTE_BUFFER_CONVERTER} is Debezium 1.x's name of {BINARY_DATA_CONVERTER}; it works the same, rename it"));
                binary(r, &key)
            }
            BINARY_DATA_CONVERTER => binary(r, &key),
            // Kafka's own ByteArrayConverter behaves the same: BYTES as they are, null as null, any
            // other schema refused.
            "io.debezium.converters.ByteArrayConverter" | "org.apache.kafka.connect.converters.ByteArrayConverter" => {
                Ok(Converter::Binary)
            }
            other if is_registry_class(other) => Ok(Converter::Registry(Arc::new(RegistryConverter::parse(r, which, other)?))),
            _ => Err(ConfigError::invalid(&key, format!("is not a supported converter; use {STRING_CONVERTER}, {JSON_CONVERTER}, {BINARY_DATA_CONVERTER} or org.apache.kafka.connect.converters.ByteArrayConverter"))),
        }
    }

    /// Whether the converter publishes BYTES values as they are (and refuses or delegates others).
    pub fn is_binary(&self) -> bool {
        matches!(self, Converter::Binary | Converter::BinaryOr(_))
    }

    /// `header.converter`: `None` is SimpleHeaderConverter (Connect's default).
    pub fn parse_header(r: &mut Reader<'_>) -> Result<Option<Converter>, ConfigError> {
        match r.string_or("header.converter", SIMPLE_HEADER_CONVERTER).as_str() {
            SIMPLE_HEADER_CONVERTER => Ok(None),
            JSON_CONVERTER => Ok(Some(Converter::Json {
                schemas: r.bool_or("header.converter.schemas.enable", true)?,
                decimals: json_decimals(r, "header.converter")?,
            })),
            STRING_CONVERTER => Ok(Some(Converter::String)),
            _ => Err(ConfigError::invalid("header.converter", format!("is not a supported header converter; use {SIMPLE_HEADER_CONVERTER} (Connect's default), {JSON_CONVERTER} or {STRING_CONVERTER}"))),
        }
    }

    /// `fromConnectData`: the record bytes, `None` for a Kafka null. `schema` is `None` only for
    /// schemaless data (an expanded top-level `[]`).
    ///
    /// A registry converter needs the record's topic: [`Converter::encode_to`].
    pub fn encode(&self, schema: Option<&Schema>, value: &Value) -> Result<Option<Bytes>, ConvertError> {
        self.encode_to("", schema, value, &mut Vec::new())
    }

    /// `fromConnectData(topic, headers, schema, value)`: [`Converter::encode`], with the topic a
    /// registry converter names its subject after and the headers it writes ids to.
    pub fn encode_to(
        &self,
        topic: &str,
        schema: Option<&Schema>,
        value: &Value,
        headers: &mut Vec<(Arc<str>, Option<Bytes>)>,
    ) -> Result<Option<Bytes>, ConvertError> {
        match self {
            Converter::Registry(r) => r.encode(topic, schema, value, Some(headers)),
            Converter::Json { schemas, decimals } => json::json_converter(*schemas, *decimals, schema, value),
            Converter::String => Ok(string::encode(schema, value)),
            Converter::Binary => match value {
                Value::Null => Ok(None),
                Value::Bytes(b) => Ok(Some(b.clone())),
                _ => Err(ConvertError::NotBytes("BinaryDataConverter")),
            },
            // Debezium's BinaryDataConverter: a BYTES schema (or none) as bytes, other schemas to
            // the delegate.
            Converter::BinaryOr(delegate) => match (schema, value) {
                (None | Some(Schema::Primitive { ty: super::Type::Bytes, .. }), Value::Bytes(b)) => Ok(Some(b.clone())),
                (None | Some(Schema::Primitive { ty: super::Type::Bytes, .. }), Value::Null) => Ok(None),
                _ => match delegate {
                    Delegate::String => Converter::String.encode(schema, value),
                    Delegate::Json { schemas, decimals } => json::json_converter(*schemas, *decimals, schema, value),
                    // Debezium's BinaryDataConverter calls its delegate without the record's headers.
                    Delegate::Registry(r) => r.encode(topic, schema, value, None),
                },
            },
        }
    }

    /// A header's bytes under `header.converter` (`None`: SimpleHeaderConverter), schemaless or not;
    /// another converter's `fromConnectHeader` is its `fromConnectData`.
    pub fn encode_header(
        converter: Option<&Converter>,
        data: &super::record::Data,
    ) -> Result<Option<Bytes>, ConvertError> {
        match converter {
            None => Ok(header::encode(data.schema(), &data.value)),
            Some(c) => c.encode(data.schema(), &data.value),
        }
    }
}

/// BinaryDataConverter and its `delegate.converter.type` (with the delegate's own options under
/// `delegate.converter.type.`).
fn binary(r: &mut Reader<'_>, key: &str) -> Result<Converter, ConfigError> {
    let delegate_key = format!("{key}.delegate.converter.type");
    let Some(class) = r.str(&delegate_key) else { return Ok(Converter::Binary) };
    let delegate = match class {
        STRING_CONVERTER => Delegate::String,
        JSON_CONVERTER => Delegate::Json {
            schemas: r.bool_or(&format!("{delegate_key}.schemas.enable"), true)?,
            decimals: json_decimals(r, &delegate_key)?,
        },
        other if is_registry_class(other) => {
            let is_key = key.starts_with("key.");
            Delegate::Registry(Arc::new(RegistryConverter::parse_at(r, &format!("{delegate_key}."), is_key, other)?))
        }
        _ => {
            return Err(ConfigError::invalid(
                &delegate_key,
                format!("is not supported as a delegate; use {JSON_CONVERTER}, {STRING_CONVERTER} or a supported schema-registry converter"),
            ))
        }
    };
    Ok(Converter::BinaryOr(delegate))
}

/// JsonConverter's `decimal.format` under `key` (`value.converter`, …).
fn json_decimals(r: &mut Reader<'_>, key: &str) -> Result<json::Decimals, ConfigError> {
    json::Decimals::read(r, &format!("{key}.decimal.format"))
}

#[cfg(test)]
mod tests;
