//! `InsertHeader`, `DropHeaders` and `HeaderFrom`: the record's headers.

use std::sync::Arc;

use bytes::Bytes;

use super::structs::{require_struct, Basics};
use super::{Options, Part, TransformError};
use crate::connect::config::ConfigError;
use crate::connect::record::{Data, Header, Record};
use crate::connect::{Schema, Type, Value};

/// `header` and `value.literal`, the literal typed as `Values.parseString` types it.
#[derive(Debug, Clone)]
pub struct InsertHeader {
    header: Arc<str>,
    data: Data,
}

/// `Values.parseString` for the literals a header takes: `true`/`false` a BOOLEAN, an integer the
/// smallest of INT8..INT64 that holds it, `null` no value, anything else a STRING (Kafka would also
/// read decimals, dates, arrays and maps; SimpleHeaderConverter prints those back unchanged unless
/// their text is not canonical, `1.50` for example).
fn parse_literal(text: &str) -> Data {
    let typed = |ty, v| Data::new(Arc::new(Schema::primitive(ty, false)), v);
    if text.eq_ignore_ascii_case("true") || text.eq_ignore_ascii_case("false") {
        return typed(Type::Boolean, Value::Bool(text.eq_ignore_ascii_case("true")));
    }
    if text == "null" {
        return Data::null();
    }
    if let Ok(i) = text.parse::<i64>() {
        let ty = if i8::try_from(i).is_ok() {
            Type::Int8
        } else if i16::try_from(i).is_ok() {
            Type::Int16
        } else if i32::try_from(i).is_ok() {
            Type::Int32
        } else {
            Type::Int64
        };
        return typed(ty, Value::Int(i));
    }
    typed(Type::String, Value::String(Bytes::copy_from_slice(text.as_bytes())))
}

impl InsertHeader {
    pub(super) fn parse(mut o: Options<'_, '_>) -> Result<Self, ConfigError> {
        let header = o.required("header", "the name of the header to add")?;
        let key = o.key("value.literal");
        // An empty literal is a value: Connect requires the key, not a non-empty value.
        let literal = o.r.raw(&key).ok_or_else(|| ConfigError::Missing {
            key: key.clone(),
            hint: "the header's value, parsed as Connect's Values.parseString does".into(),
        })?;
        Ok(InsertHeader { header: Arc::from(header.as_str()), data: parse_literal(literal) })
    }

    pub(super) fn apply(&self, r: &mut Record) {
        r.headers.push(Header { key: self.header.clone(), data: self.data.clone() });
    }
}

/// `headers`: every header of these names is removed.
#[derive(Debug, Clone)]
pub struct DropHeaders {
    headers: Vec<String>,
}

impl DropHeaders {
    pub(super) fn parse(mut o: Options<'_, '_>) -> Result<Self, ConfigError> {
        Ok(DropHeaders { headers: o.required_list("headers", "the names of the headers to drop")? })
    }

    pub(super) fn apply(&self, r: &mut Record) {
        r.headers.retain(|h| !self.headers.iter().any(|d| **d == *h.key));
    }
}

/// `fields`, `headers` (as many) and `operation` (`move` or `copy`).
#[derive(Debug, Clone)]
pub struct HeaderFrom {
    part: Part,
    fields: Vec<String>,
    headers: Vec<Arc<str>>,
    remove: bool,
}

impl HeaderFrom {
    pub(super) fn parse(mut o: Options<'_, '_>, part: Part) -> Result<Self, ConfigError> {
        let fields = o.list("fields");
        let headers: Vec<Arc<str>> = o.list("headers").iter().map(|h| Arc::from(h.as_str())).collect();
        if fields.len() != headers.len() {
            return Err(
                o.invalid("fields", "'fields' config must have the same number of elements as 'headers' config.")
            );
        }
        let remove = match o.required("operation", "move or copy")?.as_str() {
            "move" => true,
            "copy" => false,
            _ => return Err(o.invalid("operation", "is not one of move, copy")),
        };
        Ok(HeaderFrom { part, fields, headers, remove })
    }

    pub(super) fn apply(&self, r: &mut Record) -> Result<(), TransformError> {
        let data = self.part.of(r);
        if data.value == Value::Null {
            return Ok(());
        }
        let (fields, values) = require_struct(data.schema(), &data.value, "header extraction")?;
        let mut added = Vec::with_capacity(self.fields.len());
        for (name, header) in self.fields.iter().zip(&self.headers) {
            let i = fields
                .iter()
                .position(|(f, _)| f == name)
                .ok_or_else(|| TransformError(format!("Field does not exist: {name}")))?;
            added.push(Header {
                key: header.clone(),
                data: Data::new(Arc::new(fields[i].1.clone()), values[i].clone()),
            });
        }
        if self.remove {
            let keep: Vec<usize> = (0..fields.len()).filter(|i| !self.fields.contains(&fields[*i].0)).collect();
            let schema = Basics::of(data.schema().unwrap_or(&Schema::optional(Type::String)))
                .with(keep.iter().map(|i| fields[*i].clone()).collect());
            let value = Value::Struct(keep.iter().map(|i| values[*i].clone()).collect());
            *self.part.of_mut(r) = Data::new(Arc::new(schema), value);
        }
        r.headers.extend(added);
        Ok(())
    }
}
