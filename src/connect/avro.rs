//! Connect data as Avro, the way the registry converters' `AvroData` writes it (Confluent's
//! `io.confluent.connect.avro.AvroData` and Apicurio's copy of it): a Connect schema becomes an Avro
//! schema whose JSON text is what the converter registers, and a Connect value becomes that schema's
//! Avro binary encoding, the record body after the registry's id.
//!
//! With `connect.meta.data` (the default) a schema keeps what Avro has no place for in `connect.*`
//! properties: `connect.doc`, `connect.version`, `connect.parameters`, `connect.default`,
//! `connect.name` and `connect.type` (INT8 and INT16), in that order after the Avro type. An optional
//! schema is the union `["null", T]` (`[T, "null"]` when it has a default); an optional field gets
//! `"default": null`. Connect's Decimal, Date, Time and Timestamp become Avro's logical types.

use serde_json::{json, Map, Value as Json};

use super::{ConvertError, Schema, Type, Value};

/// Connect's logical type names.
pub const DECIMAL: &str = "org.apache.kafka.connect.data.Decimal";
pub const DATE: &str = "org.apache.kafka.connect.data.Date";
pub const TIME: &str = "org.apache.kafka.connect.data.Time";
pub const TIMESTAMP: &str = "org.apache.kafka.connect.data.Timestamp";

/// AvroData's defaults for records without a Connect name.
const DEFAULT_NAMESPACE: &str = "io.confluent.connect.avro";
const DEFAULT_NAME: &str = "ConnectDefault";
/// The precision AvroData gives a Decimal without `connect.decimal.precision`.
const DEFAULT_DECIMAL_PRECISION: i64 = 64;

/// How the converter maps schemas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// `connect.meta.data`: the `connect.*` properties.
    pub connect_meta_data: bool,
    /// A top-level optional struct as its bare record, without the union: Apicurio's serializer
    /// takes the schema of the datum, and the datum of an optional struct is the record itself;
    /// Confluent's takes the Connect schema's Avro schema, the union included.
    pub bare_optional_struct: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options { connect_meta_data: true, bare_optional_struct: false }
    }
}

impl Options {
    /// Whether the top of `schema` is written without its optional union.
    fn bare_top(self, schema: &Schema) -> bool {
        self.bare_optional_struct && matches!(schema, Schema::Struct { .. })
    }
}

/// The Avro schema of a Connect schema, as the JSON the converter registers (Avro's
/// `Schema.toString()`: compact, members in Avro's order).
pub fn schema_text(schema: &Schema, options: Options) -> Result<String, ConvertError> {
    Ok(to_avro(schema, options, &mut Names::default(), options.bare_top(schema))?.to_string())
}

/// What Avro's printer keeps while it writes a schema: the records already defined (printed by
/// name the second time), the enclosing namespace, and AvroData's count of unnamed records
/// (`ConnectDefault`, `ConnectDefault2`, ...).
#[derive(Default)]
struct Names {
    defined: std::collections::HashSet<String>,
    /// Structs already converted and the full name they got: AvroData converts an equal Connect
    /// schema once, so a second unnamed struct equal to an earlier one is that record again.
    converted: Vec<(Schema, String)>,
    space: Option<String>,
    unnamed: usize,
}

fn to_avro(schema: &Schema, o: Options, names: &mut Names, ignore_optional: bool) -> Result<Json, ConvertError> {
    let base = base_schema(schema, o, names)?;
    if schema.is_optional() && !ignore_optional {
        // AvroData's `maybeMakeOptional`: null first, unless the schema has a default, which an
        // Avro union's default must match (its first branch).
        return Ok(if schema.default_value().is_some() { json!([base, "null"]) } else { json!(["null", base]) });
    }
    Ok(base)
}

/// A default as AvroData writes it in a schema (`defaultValueFromConnect`): Avro's form of the
/// value (logical types as their underlying number or bytes), bytes as ISO-8859-1 text.
fn default_json(schema: &Schema, value: &Value) -> Json {
    let ty = match schema {
        Schema::Primitive { ty, .. } => *ty,
        _ => return Json::Null,
    };
    match (ty, value) {
        (Type::Int32, Value::JavaDate { number, .. }) => json!(number),
        (Type::Int64, Value::JavaDate { millis, .. }) => json!(millis),
        (_, Value::Int(i)) => json!(i),
        (Type::Float32, Value::Float(f)) => json!(*f as f32),
        (_, Value::Float(f)) => json!(f),
        (_, Value::Bool(b)) => json!(b),
        (_, Value::String(s)) => json!(String::from_utf8_lossy(s)),
        (_, Value::Bytes(b) | Value::Decimal { unscaled: b, .. }) => {
            json!(b.iter().map(|&c| char::from(c)).collect::<String>())
        }
        _ => Json::Null,
    }
}

/// The schema without the optional union.
fn base_schema(schema: &Schema, o: Options, names: &mut Names) -> Result<Json, ConvertError> {
    let mut props = Map::new();
    match schema {
        Schema::Primitive { ty, name, parameters, .. } => {
            let (avro_type, connect_type) = match ty {
                Type::Int8 => ("int", Some("int8")),
                Type::Int16 => ("int", Some("int16")),
                Type::Int32 => ("int", None),
                Type::Int64 => ("long", None),
                Type::Float32 => ("float", None),
                Type::Float64 => ("double", None),
                Type::Boolean => ("boolean", None),
                Type::String => ("string", None),
                Type::Bytes => ("bytes", None),
            };
            props.insert("type".into(), json!(avro_type));
            if *ty == Type::Bytes && name.as_deref() == Some(DECIMAL) {
                let param = |k: &str| parameters.iter().find(|(p, _)| p == k).map(|(_, v)| v.as_str());
                let scale: i64 = param("scale").and_then(|s| s.parse().ok()).unwrap_or(0);
                let precision = param("connect.decimal.precision")
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(DEFAULT_DECIMAL_PRECISION);
                props.insert("scale".into(), json!(scale));
                props.insert("precision".into(), json!(precision));
            }
            meta(&mut props, schema, o, connect_type);
            let logical = match (ty, name.as_deref()) {
                (Type::Bytes, Some(DECIMAL)) => Some("decimal"),
                (Type::Int32, Some(DATE)) => Some("date"),
                (Type::Int32, Some(TIME)) => Some("time-millis"),
                (Type::Int64, Some(TIMESTAMP)) => Some("timestamp-millis"),
                _ => None,
            };
            if let Some(l) = logical {
                props.insert("logicalType".into(), json!(l));
            }
            if props.len() == 1 {
                return Ok(json!(avro_type));
            }
            Ok(Json::Object(props))
        }
        Schema::Array { items, .. } => {
            let items = to_avro(items, o, names, false)?;
            props.insert("type".into(), json!("array"));
            props.insert("items".into(), items);
            meta(&mut props, schema, o, None);
            Ok(Json::Object(props))
        }
        Schema::Struct { name, fields, version, doc, .. } => {
            let required = Schema::Struct {
                name: name.clone(),
                fields: fields.clone(),
                optional: false,
                version: *version,
                doc: doc.clone(),
            };
            let earlier = names.converted.iter().find(|(s, _)| *s == required).map(|(_, n)| n.clone());
            let full = match (earlier.clone(), name) {
                (Some(n), _) => n,
                (None, Some(n)) => n.clone(),
                (None, None) => {
                    names.unnamed += 1;
                    match names.unnamed {
                        1 => format!("{DEFAULT_NAMESPACE}.{DEFAULT_NAME}"),
                        n => format!("{DEFAULT_NAMESPACE}.{DEFAULT_NAME}{n}"),
                    }
                }
            };
            let (namespace, simple) = match full.rfind('.') {
                Some(i) => (Some(full[..i].to_string()), full[i + 1..].to_string()),
                None => (None, full.clone()),
            };
            // Defined once: later uses are the name, short within the same namespace. Another
            // struct under a name already defined has no Avro schema (Java fails on it too).
            if names.defined.contains(&full) {
                if earlier.is_none() {
                    return Err(ConvertError::Avro(format!(
                        "two different structs are both named `{full}`, and an Avro schema can define a name once; rename one (e.g. with a transform), or flatten the payload"
                    )));
                }
                return Ok(if namespace == names.space { json!(simple) } else { json!(full) });
            }
            check_name(&simple, &full)?;
            names.defined.insert(full.clone());
            names.converted.push((required, full.clone()));
            props.insert("type".into(), json!("record"));
            props.insert("name".into(), json!(simple));
            match (&namespace, &names.space) {
                (Some(ns), enclosing) if Some(ns) != enclosing.as_ref() => {
                    props.insert("namespace".into(), json!(ns));
                }
                (None, Some(_)) => {
                    props.insert("namespace".into(), json!(""));
                }
                _ => {}
            }
            let saved = std::mem::replace(&mut names.space, namespace);
            let mut avro_fields = Vec::with_capacity(fields.len());
            for (field, fschema) in fields {
                check_name(field, field)?;
                let mut f = Map::new();
                f.insert("name".into(), json!(field));
                f.insert("type".into(), to_avro(fschema, o, names, false)?);
                match fschema.default_value() {
                    Some(v) => {
                        f.insert("default".into(), default_json(fschema, v));
                    }
                    None if fschema.is_optional() => {
                        f.insert("default".into(), Json::Null);
                    }
                    None => {}
                }
                avro_fields.push(Json::Object(f));
            }
            names.space = saved;
            props.insert("fields".into(), Json::Array(avro_fields));
            meta(&mut props, schema, o, None);
            Ok(Json::Object(props))
        }
    }
}

/// The `connect.*` properties, in AvroData's order.
fn meta(props: &mut Map<String, Json>, schema: &Schema, o: Options, connect_type: Option<&str>) {
    if !o.connect_meta_data {
        return;
    }
    let (doc, version, parameters) = match schema {
        Schema::Primitive { version, parameters, .. } => (None, *version, parameters.as_slice()),
        Schema::Struct { version, doc, .. } => (doc.as_deref(), *version, &[][..]),
        Schema::Array { .. } => (None, None, &[][..]),
    };
    if let Some(doc) = doc {
        props.insert("connect.doc".into(), json!(doc));
    }
    if let Some(v) = version {
        props.insert("connect.version".into(), json!(v));
    }
    if !parameters.is_empty() {
        let map: Map<String, Json> = parameters.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
        props.insert("connect.parameters".into(), Json::Object(map));
    }
    if let Some(v) = schema.default_value() {
        props.insert("connect.default".into(), default_json(schema, v));
    }
    if let Some(name) = schema.name() {
        props.insert("connect.name".into(), json!(name));
    }
    if let Some(t) = connect_type {
        props.insert("connect.type".into(), json!(t));
    }
}

/// Avro's name rule (`[A-Za-z_][A-Za-z0-9_]*`); AvroData fails on anything else, and so does the
/// converter: a Connect name such as `my-topic.Value` has no Avro schema.
fn check_name(part: &str, full: &str) -> Result<(), ConvertError> {
    if super::is_identifier(part) {
        Ok(())
    } else {
        Err(ConvertError::Avro(format!(
            "`{full}` is not a valid Avro name (letters, digits and _ only, not starting with a digit), and Connect's AvroData refuses it too; rename it (schema.name.adjustment.mode=avro adjusts the part named after topic.prefix, schema and table; a routed topic's part needs route.topic.replacement, a field another column name or alias)"
        )))
    }
}

/// The Avro binary encoding of `value` under the Avro schema of `schema` (optional = union).
pub fn write(schema: &Schema, value: &Value, out: &mut Vec<u8>, options: Options) -> Result<(), ConvertError> {
    write_inner(schema, value, out, options.bare_top(schema))
}

fn write_inner(schema: &Schema, value: &Value, out: &mut Vec<u8>, ignore_optional: bool) -> Result<(), ConvertError> {
    if schema.is_optional() && !ignore_optional {
        // The union's branch: `["null", T]`, or `[T, "null"]` under a default.
        let null_last = schema.default_value().is_some();
        if matches!(value, Value::Null) {
            out.push(if null_last { 2 } else { 0 });
            return Ok(());
        }
        out.push(if null_last { 0 } else { 2 });
    } else if matches!(value, Value::Null) {
        return Err(ConvertError::RequiredNull);
    }
    let invalid = |found: &Value| ConvertError::InvalidType { schema: schema.java_type(), found: found.java_class() };
    match (schema, value) {
        (Schema::Primitive { ty, .. }, v) => match (ty, v) {
            (Type::Int8 | Type::Int16 | Type::Int32 | Type::Int64, Value::Int(i)) => long(*i, out),
            (Type::Int32, Value::JavaDate { number, .. }) => long(*number, out),
            (Type::Int64, Value::JavaDate { millis, .. }) => long(*millis, out),
            (Type::Float32, Value::Float(f)) => out.extend_from_slice(&(*f as f32).to_le_bytes()),
            (Type::Float64, Value::Float(f)) => out.extend_from_slice(&f.to_le_bytes()),
            (Type::Boolean, Value::Bool(b)) => out.push(u8::from(*b)),
            (Type::String, Value::String(s)) => {
                let s = java_utf8(s);
                long(s.len() as i64, out);
                out.extend_from_slice(&s);
            }
            (Type::Bytes, Value::Bytes(b)) | (Type::Bytes, Value::Decimal { unscaled: b, .. }) => {
                long(b.len() as i64, out);
                out.extend_from_slice(b);
            }
            (_, v) => return Err(invalid(v)),
        },
        (Schema::Array { items, .. }, Value::Array(values)) => {
            if !values.is_empty() {
                long(values.len() as i64, out);
                for v in values {
                    write_inner(items, v, out, false)?;
                }
            }
            out.push(0);
        }
        (Schema::Struct { fields, .. }, Value::Struct(values)) => {
            if fields.len() != values.len() {
                return Err(ConvertError::StructArity { fields: fields.len(), values: values.len() });
            }
            for ((_, fschema), v) in fields.iter().zip(values) {
                write_inner(fschema, v, out, false)?;
            }
        }
        (_, v) => return Err(invalid(v)),
    }
    Ok(())
}

/// Avro's zig-zag varint.
fn long(n: i64, out: &mut Vec<u8>) {
    let mut z = ((n << 1) ^ (n >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

/// The UTF-8 bytes Java writes for a string: a lone surrogate (which a `json` column's `\uD800`
/// escape leaves in the generalised form `ED A0 80`) becomes `?`, as `String.getBytes(UTF_8)` does.
pub(super) fn java_utf8(s: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    if std::str::from_utf8(s).is_ok() {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i] == 0xED && i + 2 < s.len() && (0xA0..=0xBF).contains(&s[i + 1]) {
            out.push(b'?');
            i += 3;
        } else {
            out.push(s[i]);
            i += 1;
        }
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests;
