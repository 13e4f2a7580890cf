//! Debezium's transforms after the Event Router.
//!
//! `HeaderToValue` works on the router's struct values. `PartitionRouting` and `TimezoneConverter`
//! act only on change-event envelopes (a value schema named `*.Envelope`), which the router's output
//! never is: Debezium passes its records through unchanged, and so does pgoutbox.

use std::sync::Arc;

use crate::connect::record::{Data, Record};
use crate::connect::transforms::TransformError;
use crate::connect::{ConfigError, Reader, Schema, Value};

pub const HEADER_TO_VALUE: &str = "io.debezium.transforms.HeaderToValue";
pub const PARTITION_ROUTING: &str = "io.debezium.transforms.partitions.PartitionRouting";
pub const TIMEZONE_CONVERTER: &str = "io.debezium.transforms.TimezoneConverter";
/// Debezium 3.6's `EnforceRecordSize`: shortens the longest string and bytes columns of a change
/// event's `before` and `after` until its estimated size fits `max.bytes`. It acts on change-event
/// envelopes only; a record without them (the Event Router's) passes through unchanged.
pub const ENFORCE_RECORD_SIZE: &str = "io.debezium.transforms.EnforceRecordSize";

/// `EnforceRecordSize`'s options, checked as Debezium checks them: `max.bytes` required and
/// positive, `compression.ratio` (1.0) positive, `min.field.size` (25000) not negative.
pub fn check_enforce_record_size(r: &mut Reader<'_>, prefix: &str) -> Result<(), ConfigError> {
    let max_key = format!("{prefix}max.bytes");
    let max: i64 = match r.str(&max_key) {
        None => {
            return Err(ConfigError::invalid(
                &max_key,
                "Missing required configuration \"max.bytes\" which has no default value.",
            ))
        }
        Some(v) => v.parse().map_err(|_| ConfigError::invalid(&max_key, "Expected value to be a 32-bit integer"))?,
    };
    if max <= 0 {
        return Err(ConfigError::invalid(&max_key, "Must be a positive integer"));
    }
    let ratio_key = format!("{prefix}compression.ratio");
    if let Some(v) = r.str(&ratio_key) {
        let ratio: f64 = v.parse().map_err(|_| ConfigError::invalid(&ratio_key, "Expected value to be a double"))?;
        if ratio.is_nan() || ratio <= 0.0 {
            return Err(ConfigError::invalid(&ratio_key, "Must be a positive number"));
        }
    }
    let min_key = format!("{prefix}min.field.size");
    if let Some(v) = r.str(&min_key) {
        let min: i32 =
            v.parse().map_err(|_| ConfigError::invalid(&min_key, "Expected value to be a 32-bit integer"))?;
        if min < 0 {
            return Err(ConfigError::invalid(&min_key, "Must be non-negative"));
        }
    }
    Ok(())
}

/// `headers`, `fields` (as many) and `operation` (`move` or `copy`): header values become value
/// fields, appended in the record's header order with the header's schema.
#[derive(Debug, Clone)]
pub struct HeaderToValue {
    headers: Vec<String>,
    fields: Vec<String>,
    remove: bool,
}

/// A LIST option as Debezium validates it: required, no element with a space, no empty element.
fn list(r: &mut Reader<'_>, key: &str) -> Result<Vec<String>, ConfigError> {
    let Some(v) = r.str(key) else {
        return Err(ConfigError::invalid(key, "A value is required"));
    };
    let mut items: Vec<String> = v.split(',').map(|s| s.trim().to_string()).collect();
    while items.last().is_some_and(String::is_empty) {
        items.pop();
    }
    if items.iter().any(|i| i.contains(' ')) {
        return Err(ConfigError::invalid(key, "Element(s) containing space not permitted"));
    }
    if items.iter().any(String::is_empty) {
        return Err(ConfigError::invalid(key, "Empty string element(s) not permitted"));
    }
    Ok(items)
}

impl HeaderToValue {
    pub fn parse(r: &mut Reader<'_>, prefix: &str) -> Result<HeaderToValue, ConfigError> {
        let headers = list(r, &format!("{prefix}headers"))?;
        let fields = list(r, &format!("{prefix}fields"))?;
        let op_key = format!("{prefix}operation");
        let remove = match r.str(&op_key).map(|v| v.trim().to_ascii_lowercase()) {
            Some(v) if v == "move" => true,
            Some(v) if v == "copy" => false,
            Some(_) => return Err(ConfigError::invalid(&op_key, "Value must be one of move, copy")),
            None => return Err(ConfigError::invalid(&op_key, "A value is required")),
        };
        if headers.len() != fields.len() {
            return Err(ConfigError::invalid(
                &format!("{prefix}fields"),
                "'fields' config must have the same number of elements as 'headers' config.",
            ));
        }
        if fields.iter().any(|f| f.contains('.')) {
            return Err(ConfigError::invalid(
                &format!("{prefix}fields"),
                "nested field names (with a `.`) are not implemented in pgoutbox; use top-level names",
            ));
        }
        Ok(HeaderToValue { headers, fields, remove })
    }

    pub fn apply(&self, mut r: Record) -> Result<Option<Record>, TransformError> {
        if r.value.value == Value::Null {
            return Ok(Some(r));
        }
        let (Some(Schema::Struct { name, fields, version, doc, .. }), Value::Struct(values)) =
            (r.value.schema(), &r.value.value)
        else {
            let class = r.value.value.java_class().strip_prefix("class ").unwrap_or("null");
            return Err(TransformError(format!(
                "Only Struct objects supported for [Header field insertion], found: {class}"
            )));
        };
        let entries: Vec<(&String, &Data)> = r
            .headers
            .iter()
            .filter_map(|h| self.headers.iter().position(|c| **c == *h.key).map(|i| (&self.fields[i], &h.data)))
            .collect();
        if entries.is_empty() {
            return Ok(Some(r));
        }
        let mut new_fields = fields.clone();
        let mut new_values = values.clone();
        for (field, data) in &entries {
            let Some(schema) = data.schema() else {
                return Err(TransformError(format!("fieldSchema for field {field} cannot be null.")));
            };
            match new_fields.iter().position(|(f, _)| f == *field) {
                // An existing field keeps its schema; the last value put wins.
                Some(i) => new_values[i] = data.value.clone(),
                None => {
                    new_fields.push(((*field).clone(), schema.clone()));
                    new_values.push(data.value.clone());
                }
            }
        }
        // copySchemaBasics: name, version, doc; the rebuilt schema is required.
        let schema = Schema::Struct {
            name: name.clone(),
            fields: new_fields,
            optional: false,
            version: *version,
            doc: doc.clone(),
        };
        r.value = Data::new(Arc::new(schema), Value::Struct(new_values));
        if self.remove {
            r.headers.retain(|h| !self.headers.iter().any(|c| **c == *h.key));
        }
        Ok(Some(r))
    }
}
