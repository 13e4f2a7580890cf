//! Kafka Connect's data model and converters, byte for byte as the Java runtime produces them: one
//! [`Schema`], one [`Value`], and what each converter writes for a (schema, value) pair.
//!
//! - `json`: `org.apache.kafka.connect.json.JsonConverter` (Jackson's bytes);
//! - `string`: `StringConverter`, that is `toString()` of Connect data (`Struct{a=1}`, `[a, b]`);
//! - `header`: `SimpleHeaderConverter` (`Values.convertToString`);
//! - `registry`: the schema-registry converters, with `avro`, `protobuf` and `json_schema` mapping
//!   Connect schemas and values to their formats;
//! - `converter`: the configured converter classes and the one `encode` the router calls;
//! - `java`: Java's number and date formatting that all of the above share;
//! - `config`: reading a connector's string map with typed getters whose errors name the key;
//! - `record`: a Connect record (topic, key, value, headers as Connect data) and its encoding.
//!
//! Nothing here knows of PostgreSQL, Debezium or the outbox: `debezium` maps columns onto this model
//! and `outbox` builds records from it.

pub mod avro;
pub mod config;
pub mod converter;
pub mod header;
pub mod java;
pub mod json;
pub mod json_schema;
pub mod protobuf;
pub mod record;
pub mod registry;
pub mod string;
pub mod transforms;

use bytes::Bytes;

pub use config::{ConfigError, Reader};
pub use converter::Converter;

/// The primitive Connect schema types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Type {
    Int8,
    Int16,
    Int32,
    Int64,
    Float32,
    Float64,
    Boolean,
    String,
    Bytes,
}

impl Type {
    /// The name JsonConverter writes in `"type"`.
    pub fn json_name(self) -> &'static str {
        match self {
            Type::Int8 => "int8",
            Type::Int16 => "int16",
            Type::Int32 => "int32",
            Type::Int64 => "int64",
            Type::Float32 => "float",
            Type::Float64 => "double",
            Type::Boolean => "boolean",
            Type::String => "string",
            Type::Bytes => "bytes",
        }
    }

    /// `Schema.Type` as Java prints it in error messages.
    pub fn java_name(self) -> &'static str {
        match self {
            Type::Int8 => "INT8",
            Type::Int16 => "INT16",
            Type::Int32 => "INT32",
            Type::Int64 => "INT64",
            Type::Float32 => "FLOAT32",
            Type::Float64 => "FLOAT64",
            Type::Boolean => "BOOLEAN",
            Type::String => "STRING",
            Type::Bytes => "BYTES",
        }
    }
}

/// A Connect schema. Equality is Connect's (`ConnectSchema.equals`): same type, optionality, name,
/// version, fields in the same order.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Schema {
    Primitive {
        ty: Type,
        optional: bool,
        name: Option<String>,
        version: Option<i32>,
        /// Schema parameters in insertion order (a Decimal's `scale` and `connect.decimal.precision`).
        parameters: Vec<(String, String)>,
        /// The schema's default value: Debezium's reading of a column's literal `DEFAULT`.
        default: Option<SchemaDefault>,
    },
    Array {
        items: Box<Schema>,
        optional: bool,
    },
    /// E.g. an envelope placement's `dbserver1.public.outbox.Order.Value`, the struct
    /// `table.expand.json.payload` infers, or Debezium's VariableScaleDecimal.
    Struct {
        name: Option<String>,
        fields: Vec<(String, Schema)>,
        optional: bool,
        version: Option<i32>,
        /// Written after the version (Debezium's VariableScaleDecimal has one).
        doc: Option<String>,
    },
}

/// A schema's default value (`Schema.defaultValue()`), never `Null`. Compared and hashed as the value
/// it holds, so that schemas with different defaults are different schemas, as in Connect.
#[derive(Debug, Clone, PartialEq)]
pub struct SchemaDefault(pub Value);

impl Eq for SchemaDefault {}

impl std::hash::Hash for SchemaDefault {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        format!("{:?}", self.0).hash(state);
    }
}

impl Schema {
    /// `Schema.<TYPE>_SCHEMA` or `Schema.OPTIONAL_<TYPE>_SCHEMA`.
    pub fn primitive(ty: Type, optional: bool) -> Schema {
        Schema::Primitive { ty, optional, name: None, version: None, parameters: Vec::new(), default: None }
    }

    /// `Schema.OPTIONAL_<TYPE>_SCHEMA`.
    pub fn optional(ty: Type) -> Schema {
        Schema::primitive(ty, true)
    }

    /// A logical type: a primitive with a semantic name, version 1 (as Debezium's and Connect's are).
    pub fn named(ty: Type, optional: bool, name: &str) -> Schema {
        Schema::Primitive {
            ty,
            optional,
            name: Some(name.to_string()),
            version: Some(1),
            parameters: Vec::new(),
            default: None,
        }
    }

    /// `Schema.defaultValue()`: a column's default (see `debezium::default`); only primitives have one.
    pub fn default_value(&self) -> Option<&Value> {
        match self {
            Schema::Primitive { default: Some(SchemaDefault(v)), .. } => Some(v),
            _ => None,
        }
    }

    pub fn is_optional(&self) -> bool {
        match self {
            Schema::Primitive { optional, .. } | Schema::Array { optional, .. } | Schema::Struct { optional, .. } => {
                *optional
            }
        }
    }

    /// The primitive type, `None` for arrays and structs.
    pub fn primitive_type(&self) -> Option<Type> {
        match self {
            Schema::Primitive { ty, .. } => Some(*ty),
            Schema::Array { .. } | Schema::Struct { .. } => None,
        }
    }

    /// The schema's name (a logical type's, a struct's), if it has one.
    pub fn name(&self) -> Option<&str> {
        match self {
            Schema::Primitive { name, .. } | Schema::Struct { name, .. } => name.as_deref(),
            Schema::Array { .. } => None,
        }
    }

    /// `Schema.Type` as Java prints it.
    pub fn java_type(&self) -> &'static str {
        match self {
            Schema::Primitive { ty, .. } => ty.java_name(),
            Schema::Array { .. } => "ARRAY",
            Schema::Struct { .. } => "STRUCT",
        }
    }
}

/// A Connect value. Structs hold one value per schema field, in field order (absent = `Null`).
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    /// Any of INT8..INT64; the schema says which.
    Int(i64),
    /// FLOAT64, or FLOAT32 (an `f32` widened exactly; written as that `f32`).
    Float(f64),
    /// UTF-8 text, often shared with the replication buffer. Strings decoded from a `json` column may
    /// also hold lone surrogates (a `\uD800` escape) in the generalised UTF-8 form (`ED A0 80`);
    /// JsonConverter writes them as `\uD800`.
    String(Bytes),
    Bytes(Bytes),
    /// A Connect Decimal (a BYTES logical type): the unscaled value as two's-complement big-endian
    /// bytes (what JSON writes, in base64) and `BigDecimal.toString` (what `toString` gives).
    Decimal {
        unscaled: Bytes,
        text: Bytes,
    },
    /// A `java.util.Date` (Connect's Timestamp, Time and Date logical types): the instant in
    /// milliseconds, and the number JsonConverter writes for it (days for a Date).
    JavaDate {
        millis: i64,
        number: i64,
    },
    Array(Vec<Value>),
    Struct(Vec<Value>),
}

impl Value {
    /// The Java class JsonConverter would have been handed, for its error messages.
    pub fn java_class(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "class java.lang.Boolean",
            Value::Int(_) => "class java.lang.Long",
            Value::Float(_) => "class java.lang.Double",
            Value::String(_) => "class java.lang.String",
            Value::Bytes(_) => "class [B",
            Value::Decimal { .. } => "class java.math.BigDecimal",
            Value::JavaDate { .. } => "class java.util.Date",
            Value::Array(_) => "class java.util.ArrayList",
            Value::Struct(_) => "class org.apache.kafka.connect.data.Struct",
        }
    }

    /// A string value from static text.
    pub fn text(s: &'static str) -> Value {
        Value::String(Bytes::from_static(s.as_bytes()))
    }
}

/// A (schema, value) pair a converter refuses with a `DataException`; the messages are Connect's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConvertError {
    #[error("Invalid type for {schema}: {found}")]
    InvalidType { schema: &'static str, found: &'static str },
    #[error("Conversion error: null value for field that is required and has no default value")]
    RequiredNull,
    #[error("struct value has {values} values for {fields} schema fields")]
    StructArity { fields: usize, values: usize },
    /// A struct needs its schema; JsonConverter says "Mismatching schema." for a schemaless one.
    #[error("Mismatching schema.")]
    SchemalessStruct,
    /// BinaryDataConverter and ByteArrayConverter take only BYTES.
    #[error("{0} only supports BYTES")]
    NotBytes(&'static str),
    /// A schema or value Avro cannot hold (AvroData's `DataException`).
    #[error("{0}")]
    Avro(String),
    /// A schema or value Protobuf cannot hold (ProtobufData's `DataException`).
    #[error("{0}")]
    Protobuf(String),
    /// A schema JsonSchemaConverter cannot hold, or one pgoutbox does not write.
    #[error("{0}")]
    JsonSchema(String),
    /// The schema registry did not give the schema's id: not the record's fault.
    #[error(transparent)]
    Registry(#[from] registry::RegistryError),
}

/// The name rule Avro and Protobuf share (`[A-Za-z_][A-Za-z0-9_]*`): their converters fail on any
/// other name.
pub(crate) fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests;
