//! Struct helpers the field transforms share, with Kafka's `Requirements` messages.

use crate::connect::{Schema, Value};

use super::TransformError;

/// A struct's schema parts, as `SchemaUtil.copySchemaBasics` keeps them (name, version, doc; not
/// optionality: a rebuilt struct schema is required).
pub struct Basics {
    pub name: Option<String>,
    pub version: Option<i32>,
    pub doc: Option<String>,
}

impl Basics {
    pub fn of(schema: &Schema) -> Basics {
        match schema {
            Schema::Struct { name, version, doc, .. } => {
                Basics { name: name.clone(), version: *version, doc: doc.clone() }
            }
            _ => Basics { name: None, version: None, doc: None },
        }
    }

    pub fn with(self, fields: Vec<(String, Schema)>) -> Schema {
        Schema::Struct { name: self.name, fields, optional: false, version: self.version, doc: self.doc }
    }
}

/// `value.getClass().getName()` for Kafka's messages.
pub fn class_name(v: &Value) -> &'static str {
    v.java_class().strip_prefix("class ").unwrap_or("null")
}

/// A struct's fields (name and schema) and its values, in field order.
pub type StructParts<'a> = (&'a [(String, Schema)], &'a [Value]);

/// `Requirements.requireStruct` / `requireMap`: the struct's fields and values, or Kafka's error.
pub fn require_struct<'a>(
    schema: Option<&'a Schema>,
    value: &'a Value,
    purpose: &str,
) -> Result<StructParts<'a>, TransformError> {
    match (schema, value) {
        (Some(Schema::Struct { fields, .. }), Value::Struct(values)) => Ok((fields, values)),
        // pgoutbox's records always carry a schema but for an expanded `[]`: Kafka would want a Map.
        (None, v) => Err(TransformError(format!(
            "Only Map objects supported in absence of schema for [{purpose}], found: {}",
            class_name(v)
        ))),
        (Some(_), v) => {
            Err(TransformError(format!("Only Struct objects supported for [{purpose}], found: {}", class_name(v))))
        }
    }
}
