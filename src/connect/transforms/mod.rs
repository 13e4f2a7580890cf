//! Kafka Connect's built-in transforms (`org.apache.kafka.connect.transforms.*`) and predicates
//! (`...transforms.predicates.*`), on [`Record`]s, with the results and error messages of Kafka 4.x.
//!
//! `parse` reads one transform's options (`transforms.<alias>.*`) and refuses, at start, options
//! and shapes Kafka would refuse at start; `apply` returns the rewritten record, `None` when the
//! record is dropped (`Filter`), or the `DataException` Kafka would throw (which the connector
//! handles by `errors.tolerance`).

mod cast;
mod fields;
mod flatten;
mod headers;
pub mod predicates;
mod routing;
mod structs;
mod timestamp;

use super::config::{ConfigError, Reader};
use super::record::{Data, Record};

pub use predicates::Predicate;

const PACKAGE: &str = "org.apache.kafka.connect.transforms.";

/// Which part of the record a `$Key`/`$Value` transform works on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Key,
    Value,
}

impl Part {
    fn of(self, r: &Record) -> &Data {
        match self {
            Part::Key => &r.key,
            Part::Value => &r.value,
        }
    }

    fn of_mut(self, r: &mut Record) -> &mut Data {
        match self {
            Part::Key => &mut r.key,
            Part::Value => &mut r.value,
        }
    }
}

/// A transform Kafka would fail the record with (`DataException`), Kafka's message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TransformError(pub String);

/// One configured transform.
#[derive(Debug, Clone)]
pub enum Transform {
    RegexRouter(routing::RegexRouter),
    TimestampRouter(routing::TimestampRouter),
    InsertHeader(headers::InsertHeader),
    DropHeaders(headers::DropHeaders),
    HeaderFrom(headers::HeaderFrom),
    InsertField(fields::InsertField),
    ReplaceField(fields::ReplaceField),
    HoistField(fields::HoistField),
    ExtractField(fields::ExtractField),
    ValueToKey(fields::ValueToKey),
    SetSchemaMetadata(fields::SetSchemaMetadata),
    Cast(cast::Cast),
    MaskField(cast::MaskField),
    TimestampConverter(timestamp::TimestampConverter),
    Flatten(flatten::Flatten),
    Filter,
}

/// Kafka's transforms this module implements, by their class names after the package.
pub const KAFKA_TRANSFORMS: &[&str] = &[
    "RegexRouter",
    "TimestampRouter",
    "InsertHeader",
    "DropHeaders",
    "HeaderFrom$Key",
    "HeaderFrom$Value",
    "InsertField$Key",
    "InsertField$Value",
    "ReplaceField$Key",
    "ReplaceField$Value",
    "HoistField$Key",
    "HoistField$Value",
    "ExtractField$Key",
    "ExtractField$Value",
    "ValueToKey",
    "SetSchemaMetadata$Key",
    "SetSchemaMetadata$Value",
    "Cast$Key",
    "Cast$Value",
    "MaskField$Key",
    "MaskField$Value",
    "TimestampConverter$Key",
    "TimestampConverter$Value",
    "Flatten$Key",
    "Flatten$Value",
    "Filter",
];

/// The package of Kafka's transforms.
pub const KAFKA_TRANSFORMS_PACKAGE: &str = PACKAGE;

/// Whether `class` names one of Kafka's transforms this module implements.
pub fn is_known(class: &str) -> bool {
    class.strip_prefix(PACKAGE).is_some_and(|name| KAFKA_TRANSFORMS.contains(&name))
}

impl Transform {
    /// The transform `class` with its options under `prefix` (`transforms.<alias>.`); `None` when
    /// the class is not one of Kafka's that this module implements.
    pub fn parse(class: &str, r: &mut Reader<'_>, prefix: &str) -> Result<Option<Transform>, ConfigError> {
        let Some(name) = class.strip_prefix(PACKAGE) else { return Ok(None) };
        let (base, part) = match name.split_once('$') {
            Some((b, "Key")) => (b, Some(Part::Key)),
            Some((b, "Value")) => (b, Some(Part::Value)),
            Some(_) => return Ok(None),
            None => (name, None),
        };
        let o = Options { r, prefix };
        Ok(Some(match (base, part) {
            ("RegexRouter", None) => Transform::RegexRouter(routing::RegexRouter::parse(o)?),
            ("TimestampRouter", None) => Transform::TimestampRouter(routing::TimestampRouter::parse(o)?),
            ("InsertHeader", None) => Transform::InsertHeader(headers::InsertHeader::parse(o)?),
            ("DropHeaders", None) => Transform::DropHeaders(headers::DropHeaders::parse(o)?),
            ("HeaderFrom", Some(p)) => Transform::HeaderFrom(headers::HeaderFrom::parse(o, p)?),
            ("InsertField", Some(p)) => Transform::InsertField(fields::InsertField::parse(o, p)?),
            ("ReplaceField", Some(p)) => Transform::ReplaceField(fields::ReplaceField::parse(o, p)?),
            ("HoistField", Some(p)) => Transform::HoistField(fields::HoistField::parse(o, p)?),
            ("ExtractField", Some(p)) => Transform::ExtractField(fields::ExtractField::parse(o, p)?),
            ("ValueToKey", None) => Transform::ValueToKey(fields::ValueToKey::parse(o)?),
            ("SetSchemaMetadata", Some(p)) => Transform::SetSchemaMetadata(fields::SetSchemaMetadata::parse(o, p)?),
            ("Cast", Some(p)) => Transform::Cast(cast::Cast::parse(o, p)?),
            ("MaskField", Some(p)) => Transform::MaskField(cast::MaskField::parse(o, p)?),
            ("TimestampConverter", Some(p)) => {
                Transform::TimestampConverter(timestamp::TimestampConverter::parse(o, p)?)
            }
            ("Flatten", Some(p)) => Transform::Flatten(flatten::Flatten::parse(o, p)?),
            ("Filter", None) => Transform::Filter,
            _ => return Ok(None),
        }))
    }

    /// Whether the transform only reads or writes headers (or nothing): such a transform may run
    /// before the Event Router, which keeps a record's headers.
    pub fn only_headers(&self) -> bool {
        matches!(self, Transform::InsertHeader(_) | Transform::DropHeaders(_) | Transform::Filter)
    }

    pub fn apply(&self, record: Record) -> Result<Option<Record>, TransformError> {
        let mut r = record;
        match self {
            Transform::RegexRouter(t) => t.apply(&mut r)?,
            Transform::TimestampRouter(t) => t.apply(&mut r)?,
            Transform::InsertHeader(t) => t.apply(&mut r),
            Transform::DropHeaders(t) => t.apply(&mut r),
            Transform::HeaderFrom(t) => t.apply(&mut r)?,
            Transform::InsertField(t) => t.apply(&mut r)?,
            Transform::ReplaceField(t) => t.apply(&mut r)?,
            Transform::HoistField(t) => t.apply(&mut r),
            Transform::ExtractField(t) => t.apply(&mut r)?,
            Transform::ValueToKey(t) => t.apply(&mut r)?,
            Transform::SetSchemaMetadata(t) => t.apply(&mut r),
            Transform::Cast(t) => t.apply(&mut r)?,
            Transform::MaskField(t) => t.apply(&mut r)?,
            Transform::TimestampConverter(t) => t.apply(&mut r)?,
            Transform::Flatten(t) => t.apply(&mut r)?,
            Transform::Filter => return Ok(None),
        }
        Ok(Some(r))
    }
}

/// A transform's options: the reader and the `transforms.<alias>.` prefix, so errors name the key.
pub(crate) struct Options<'r, 'a> {
    r: &'r mut Reader<'a>,
    prefix: &'r str,
}

impl Options<'_, '_> {
    fn key(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    fn str(&mut self, name: &str) -> Option<String> {
        let key = self.key(name);
        self.r.str(&key).map(str::to_string)
    }

    fn required(&mut self, name: &str, hint: &str) -> Result<String, ConfigError> {
        let key = self.key(name);
        self.r.required(&key, hint)
    }

    /// A comma-separated list (Connect's LIST type): trimmed, empty items dropped.
    fn list(&mut self, name: &str) -> Vec<String> {
        self.str(name)
            .map(|v| v.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect())
            .unwrap_or_default()
    }

    /// A LIST option that must name at least one item.
    fn required_list(&mut self, name: &str, hint: &str) -> Result<Vec<String>, ConfigError> {
        let items = self.list(name);
        if items.is_empty() {
            return Err(ConfigError::Missing { key: self.key(name), hint: hint.into() });
        }
        Ok(items)
    }

    fn invalid(&self, name: &str, message: impl Into<String>) -> ConfigError {
        ConfigError::invalid(&self.key(name), message)
    }
}

#[cfg(test)]
mod tests;
