//! `Flatten`: nested structs become top-level fields named `outer<delimiter>inner`.

use std::sync::Arc;

use super::structs::{require_struct, Basics};
use super::{Options, Part, TransformError};
use crate::connect::config::ConfigError;
use crate::connect::record::Record;
use crate::connect::{Schema, Value};

#[derive(Debug, Clone)]
pub struct Flatten {
    part: Part,
    delimiter: String,
}

impl Flatten {
    pub(super) fn parse(mut o: Options<'_, '_>, part: Part) -> Result<Self, ConfigError> {
        Ok(Flatten { part, delimiter: o.str("delimiter").unwrap_or_else(|| ".".to_string()) })
    }

    pub(super) fn apply(&self, r: &mut Record) -> Result<(), TransformError> {
        let data = self.part.of(r);
        if data.value == Value::Null {
            return Ok(());
        }
        let (fields, values) = require_struct(data.schema(), &data.value, "flattening")?;
        let optional = data.schema().is_some_and(Schema::is_optional);
        let mut out_fields = Vec::new();
        let mut out_values = Vec::new();
        self.walk(fields, Some(values), "", optional, &mut out_fields, &mut out_values)?;
        let schema =
            Basics::of(data.schema().unwrap_or(&Schema::optional(crate::connect::Type::String))).with(out_fields);
        let value = Value::Struct(out_values);
        *self.part.of_mut(r) = crate::connect::record::Data::new(Arc::new(schema), value);
        Ok(())
    }

    /// Depth first, in field order: leaves (primitives and arrays) keep their schema, made
    /// optional under an optional parent; a null nested struct leaves its leaves null.
    fn walk(
        &self,
        fields: &[(String, Schema)],
        values: Option<&[Value]>,
        prefix: &str,
        optional: bool,
        out_fields: &mut Vec<(String, Schema)>,
        out_values: &mut Vec<Value>,
    ) -> Result<(), TransformError> {
        for (i, (name, schema)) in fields.iter().enumerate() {
            let full = if prefix.is_empty() { name.clone() } else { format!("{prefix}{}{name}", self.delimiter) };
            let field_optional = optional || schema.is_optional();
            let value = values.map(|v| &v[i]);
            match schema {
                Schema::Struct { fields: inner, .. } => {
                    let inner_values = match value {
                        Some(Value::Struct(v)) => Some(&v[..]),
                        _ => None,
                    };
                    self.walk(inner, inner_values, &full, field_optional, out_fields, out_values)?;
                }
                leaf => {
                    if out_fields.iter().any(|(f, _)| *f == full) {
                        return Err(TransformError(format!(
                            "Cannot create field because of field name duplication {full}"
                        )));
                    }
                    let mut leaf = leaf.clone();
                    if field_optional {
                        set_optional(&mut leaf);
                    }
                    out_fields.push((full, leaf));
                    out_values.push(value.cloned().unwrap_or(Value::Null));
                }
            }
        }
        Ok(())
    }
}

fn set_optional(s: &mut Schema) {
    match s {
        Schema::Primitive { optional, .. } | Schema::Array { optional, .. } | Schema::Struct { optional, .. } => {
            *optional = true
        }
    }
}
