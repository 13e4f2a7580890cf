//! Connect data as Protobuf, the way Confluent's `io.confluent.connect.protobuf.ProtobufConverter`
//! (its `ProtobufData`, 7.0) writes it with its default options: a Connect schema becomes a proto3
//! file whose text (wire-schema's rendering, which the converter registers) is built here, and a
//! value becomes that file's first message in Protobuf's binary encoding, after the message-index
//! list the registry's wire format puts between the schema id and the body.
//!
//! - A struct is a message named after the last part of its Connect name (`ConnectDefault1`,
//!   `ConnectDefault2`, ... in the order met when unnamed); the top struct's namespace is the file's
//!   package; a message named as the field that holds it is `<name>Message` (the Event Router's
//!   expanded payloads name their structs after their fields). A field is numbered by its position;
//!   a struct field's message is declared inside the message that uses it, once per name.
//! - Optional fields are plain proto3 fields (no wrappers): a null, a zero, `false` and `""` all
//!   write nothing, as proto3 does.
//! - INT8 and INT16 are `int32` with `connect.type` in Confluent's field options; Connect's Decimal,
//!   Date, Time and Timestamp are `confluent.type.Decimal`, `google.type.Date`,
//!   `google.type.TimeOfDay` and `google.protobuf.Timestamp`, imported.
//! - An array is a repeated field (numbers and booleans packed); an array of arrays has no
//!   Protobuf form (the converter refuses it, and so does this).
//! - A primitive at the top (an outbox key, or a string payload) is the matching message of
//!   Google's `wrappers.proto`: the registered schema is that whole file and the message index says
//!   which of its messages (StringValue is the eighth).

use super::avro::{DATE, DECIMAL, TIME, TIMESTAMP};
use super::java::date::gregorian_calendar_date;
use super::{ConvertError, Schema, Type, Value};

/// What the converter registers for a primitive at the top: `google/protobuf/wrappers.proto` as
/// wire-schema renders it.
pub const WRAPPERS: &str = "syntax = \"proto3\";
package google.protobuf;

option java_package = \"com.google.protobuf\";
option java_outer_classname = \"WrappersProto\";
option java_multiple_files = true;
option go_package = \"google.golang.org/protobuf/types/known/wrapperspb\";
option cc_enable_arenas = true;
option objc_class_prefix = \"GPB\";
option csharp_namespace = \"Google.Protobuf.WellKnownTypes\";

message DoubleValue {
  double value = 1 [json_name = \"value\"];
}
message FloatValue {
  float value = 1 [json_name = \"value\"];
}
message Int64Value {
  int64 value = 1 [json_name = \"value\"];
}
message UInt64Value {
  uint64 value = 1 [json_name = \"value\"];
}
message Int32Value {
  int32 value = 1 [json_name = \"value\"];
}
message UInt32Value {
  uint32 value = 1 [json_name = \"value\"];
}
message BoolValue {
  bool value = 1 [json_name = \"value\"];
}
message StringValue {
  string value = 1 [json_name = \"value\"];
}
message BytesValue {
  bytes value = 1 [json_name = \"value\"];
}
";

/// The proto file of a Connect schema: its text, and the full name of the message a record is (what
/// RecordNameStrategy names the subject after).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proto {
    pub text: String,
    pub record_name: String,
}

/// The wrapper message of a primitive type and its place in `wrappers.proto`.
fn wrapper(ty: Type) -> (&'static str, u8) {
    match ty {
        Type::Float64 => ("DoubleValue", 0),
        Type::Float32 => ("FloatValue", 1),
        Type::Int64 => ("Int64Value", 2),
        Type::Int8 | Type::Int16 | Type::Int32 => ("Int32Value", 4),
        Type::Boolean => ("BoolValue", 6),
        Type::String => ("StringValue", 7),
        Type::Bytes => ("BytesValue", 8),
    }
}

/// The message-index list of a record of `schema`: which message of its file the record is, as
/// the count and the indexes in zig-zag varints (the first message alone is the single byte 0).
fn message_indexes(schema: &Schema) -> &'static [u8] {
    const WRAPPER_INDEXES: [[u8; 2]; 9] = [[2, 0], [2, 2], [2, 4], [2, 6], [2, 8], [2, 10], [2, 12], [2, 14], [2, 16]];
    match schema {
        Schema::Primitive { ty, .. } => match wrapper(*ty).1 {
            0 => &[0],
            i => &WRAPPER_INDEXES[usize::from(i)],
        },
        _ => &[0],
    }
}

/// The proto file of `schema`.
pub fn schema_of(schema: &Schema) -> Result<Proto, ConvertError> {
    match schema {
        Schema::Primitive { name: Some(n), .. } if [DECIMAL, DATE, TIME, TIMESTAMP].contains(&n.as_str()) => {
            Err(ConvertError::Protobuf(format!(
                "a Connect {n} at the top of a record has no Protobuf schema in pgoutbox (ProtobufConverter wraps it in a message of its own); put it in a struct, or use another converter for this part"
            )))
        }
        Schema::Primitive { ty, .. } => {
            Ok(Proto { text: WRAPPERS.to_string(), record_name: format!("google.protobuf.{}", wrapper(*ty).0) })
        }
        Schema::Array { .. } => {
            Err(ConvertError::Protobuf("Unsupported root schema of type ARRAY: a Protobuf record is a message".into()))
        }
        Schema::Struct { name, .. } => {
            let mut file = File::default();
            let (package, message) = match name.as_deref().and_then(|n| n.rsplit_once('.')) {
                Some((package, message)) => (Some(package.to_string()), message.to_string()),
                None => (None, file.name_of(schema)),
            };
            if let Some(p) = &package {
                for part in p.split('.') {
                    check_identifier(part, p)?;
                }
            }
            check_identifier(&message, name.as_deref().unwrap_or(&message))?;
            let body = file.message(&message, schema)?;
            let mut text = String::from("syntax = \"proto3\";\n");
            if let Some(p) = &package {
                text.push_str(&format!("package {p};\n"));
            }
            text.push('\n');
            if !file.imports.is_empty() {
                for i in &file.imports {
                    text.push_str(&format!("import \"{i}\";\n"));
                }
                text.push('\n');
            }
            text.push_str(&body);
            let record_name = match &package {
                Some(p) => format!("{p}.{message}"),
                None => message,
            };
            Ok(Proto { text, record_name })
        }
    }
}

/// What writing one file keeps: its imports in the order first used, and the count of unnamed
/// structs.
#[derive(Default)]
struct File {
    imports: Vec<&'static str>,
    unnamed: usize,
}

impl File {
    fn import(&mut self, path: &'static str) {
        if !self.imports.contains(&path) {
            self.imports.push(path);
        }
    }

    /// The message name of a struct: the last part of its Connect name, or the next
    /// `ConnectDefault<n>`.
    fn name_of(&mut self, schema: &Schema) -> String {
        match schema.name() {
            Some(n) => n.rsplit('.').next().unwrap_or(n).to_string(),
            None => {
                self.unnamed += 1;
                format!("ConnectDefault{}", self.unnamed)
            }
        }
    }

    /// The message type of field `field` of message `name` (whose struct is `schema`), a struct
    /// `element`, declaring it in `nested` the first time.
    fn struct_type(
        &mut self,
        name: &str,
        schema: &Schema,
        field: &str,
        element: &Schema,
        nested: &mut Vec<(String, Schema, String)>,
    ) -> Result<String, ConvertError> {
        // A message named as the field that holds it gets "Message" appended.
        let mut message = self.name_of(element);
        if message == field {
            message.push_str("Message");
        }
        check_identifier(&message, element.name().unwrap_or(&message))?;
        if message == name {
            // The converter takes a struct named as the message it is in for that message itself:
            // nothing is declared, and the field refers back to the enclosing message, whose
            // descriptor then writes the inner value. That works only when the inner struct has the
            // same fields (or none); otherwise the converter fails the record ("Cannot find field"),
            // and so does pgoutbox.
            let empty = matches!(element, Schema::Struct { fields, .. } if fields.is_empty());
            if !(empty || same_fields(schema, element)) {
                return Err(ConvertError::Protobuf(format!(
                    "field `{field}` of message `{name}` holds a struct that is also named `{name}` (after the \"Message\" suffix) but has other fields: ProtobufConverter takes it for the enclosing message and cannot write it; rename the struct or the field (e.g. a JSON payload's nested key)"
                )));
            }
            return Ok(message);
        }
        match nested.iter().find(|(n, _, _)| *n == message) {
            // Declared once per name; the converter takes the first declaration.
            Some((_, first, _)) if same_fields(first, element) => {}
            Some(_) => {
                return Err(ConvertError::Protobuf(format!(
                    "two different structs named `{message}` in message `{name}`: a Protobuf message declares each nested message name once; rename one of them"
                )))
            }
            None => {
                let body = self.message(&message, element)?;
                nested.push((message.clone(), element.clone(), body));
            }
        }
        Ok(message)
    }

    /// `message <name> { ... }` with its nested messages, unindented, ending in a newline.
    fn message(&mut self, name: &str, schema: &Schema) -> Result<String, ConvertError> {
        let Schema::Struct { fields, .. } = schema else { unreachable!("a message is a struct") };
        let mut lines = String::new();
        let mut nested: Vec<(String, Schema, String)> = Vec::new();
        for (i, (field, fschema)) in fields.iter().enumerate() {
            check_identifier(field, field)?;
            let (repeated, element) = match fschema {
                Schema::Array { items, .. } => {
                    if matches!(**items, Schema::Array { .. }) {
                        return Err(ConvertError::Protobuf(format!(
                            "field `{field}` is an array of arrays, which Protobuf cannot hold (ProtobufConverter refuses it: Array cannot be nested)"
                        )));
                    }
                    (true, &**items)
                }
                other => (false, other),
            };
            let (ty, options) = match element {
                Schema::Struct { .. } => (self.struct_type(name, schema, field, element, &mut nested)?, None),
                Schema::Primitive { ty, name: logical, parameters, .. } => match logical.as_deref() {
                    Some(TIMESTAMP) => {
                        self.import("google/protobuf/timestamp.proto");
                        ("google.protobuf.Timestamp".to_string(), None)
                    }
                    Some(DATE) => {
                        self.import("google/type/date.proto");
                        ("google.type.Date".to_string(), None)
                    }
                    Some(TIME) => {
                        self.import("google/type/timeofday.proto");
                        ("google.type.TimeOfDay".to_string(), None)
                    }
                    Some(DECIMAL) => {
                        self.import("confluent/type/decimal.proto");
                        let param = |k: &str| parameters.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
                        if let Some((other, _)) =
                            parameters.iter().find(|(k, _)| k != "scale" && k != "connect.decimal.precision")
                        {
                            return Err(ConvertError::Protobuf(format!(
                                "field `{field}` is a Decimal with a parameter `{other}`, whose Protobuf option pgoutbox does not reproduce; use decimal.handling.mode=string or double"
                            )));
                        }
                        // The precision parameter (as `precision`) first, then the scale.
                        let mut entries = Vec::new();
                        if let Some(p) = param("connect.decimal.precision") {
                            entries.push([("value", p), ("key", "precision")]);
                        }
                        entries.push([("value", param("scale").unwrap_or("0")), ("key", "scale")]);
                        ("confluent.type.Decimal".to_string(), Some(meta(&entries)))
                    }
                    _ => match ty {
                        Type::Int8 => {
                            ("int32".to_string(), Some(meta(&[[("key", "connect.type"), ("value", "int8")]])))
                        }
                        Type::Int16 => {
                            ("int32".to_string(), Some(meta(&[[("key", "connect.type"), ("value", "int16")]])))
                        }
                        Type::Int32 => ("int32".to_string(), None),
                        Type::Int64 => ("int64".to_string(), None),
                        Type::Float32 => ("float".to_string(), None),
                        Type::Float64 => ("double".to_string(), None),
                        Type::Boolean => ("bool".to_string(), None),
                        Type::String => ("string".to_string(), None),
                        Type::Bytes => ("bytes".to_string(), None),
                    },
                },
                Schema::Array { .. } => unreachable!("checked above"),
            };
            let repeated = if repeated { "repeated " } else { "" };
            match options {
                None => lines.push_str(&format!("  {repeated}{ty} {field} = {};\n", i + 1)),
                Some(o) => lines.push_str(&format!("  {repeated}{ty} {field} = {} [{o}];\n", i + 1)),
            }
        }
        if let Some((clash, _, _)) = nested.iter().find(|(n, _, _)| fields.iter().any(|(f, _)| f == n)) {
            return Err(ConvertError::Protobuf(format!(
                "message `{name}` would have a field and a nested message both named `{clash}`, which Protobuf refuses (\"{clash}\" is already defined); rename the field or the struct"
            )));
        }
        if lines.is_empty() && nested.is_empty() {
            return Ok(format!("message {name} {{}}\n"));
        }
        let mut out = format!("message {name} {{\n{lines}");
        if !nested.is_empty() {
            // An empty line, then the nested messages indented (a message nested deeper gets its own
            // empty line indented with it, as wire-schema writes it).
            out.push('\n');
            for (_, _, body) in &nested {
                out.push_str(&indent(body));
            }
        }
        out.push_str("}\n");
        Ok(out)
    }
}

/// Whether two structs have the same fields (their names aside).
fn same_fields(a: &Schema, b: &Schema) -> bool {
    matches!((a, b), (Schema::Struct { fields: x, .. }, Schema::Struct { fields: y, .. }) if x == y)
}

/// Confluent's `(confluent.field_meta)` option with its parameters, as wire-schema renders it (each
/// entry's two fields in the order the converter puts them).
fn meta(entries: &[[(&str, &str); 2]]) -> String {
    let items: Vec<String> = entries
        .iter()
        .map(|[(k1, v1), (k2, v2)]| format!("{{\n        {k1}: \"{v1}\",\n        {k2}: \"{v2}\"\n      }}"))
        .collect();
    format!("(confluent.field_meta) = {{\n    params: [\n      {}\n    ]\n  }}", items.join(",\n      "))
}

/// Every line of `text` two spaces further in.
fn indent(text: &str) -> String {
    text.split_inclusive('\n').map(|l| format!("  {l}")).collect()
}

/// Protobuf's identifier rule; the converter fails on anything else.
fn check_identifier(part: &str, full: &str) -> Result<(), ConvertError> {
    if super::is_identifier(part) {
        Ok(())
    } else {
        Err(ConvertError::Protobuf(format!(
            "`{full}` is not a valid Protobuf identifier (letters, digits and _ only, not starting with a digit); rename it (e.g. with a transform)"
        )))
    }
}

/// The message-index list and the Protobuf encoding of `value` under [`schema_of`]`(schema)`.
pub fn write(schema: &Schema, value: &Value, out: &mut Vec<u8>) -> Result<(), ConvertError> {
    out.extend_from_slice(message_indexes(schema));
    match schema {
        Schema::Struct { .. } => message(schema, value, out),
        // The wrapper message's field 1.
        _ => field(1, schema, value, out),
    }
}

fn message(schema: &Schema, value: &Value, out: &mut Vec<u8>) -> Result<(), ConvertError> {
    let (Schema::Struct { fields, .. }, Value::Struct(values)) = (schema, value) else {
        return Err(ConvertError::InvalidType { schema: schema.java_type(), found: value.java_class() });
    };
    if fields.len() != values.len() {
        return Err(ConvertError::StructArity { fields: fields.len(), values: values.len() });
    }
    for (i, ((_, fschema), v)) in fields.iter().zip(values).enumerate() {
        field(i as u32 + 1, fschema, v, out)?;
    }
    Ok(())
}

/// Field `number` of `value`: nothing for a null or proto3's default.
fn field(number: u32, schema: &Schema, value: &Value, out: &mut Vec<u8>) -> Result<(), ConvertError> {
    // ProtobufData leaves a null out whether or not the Connect schema allows it.
    if matches!(value, Value::Null) {
        return Ok(());
    }
    match (schema, value) {
        (Schema::Array { items, .. }, Value::Array(values)) => {
            if values.is_empty() {
                return Ok(());
            }
            if packed(items) {
                let mut body = Vec::new();
                for v in values {
                    scalar(items, v, &mut body)?;
                }
                key(number, 2, out);
                varint(body.len() as u64, out);
                out.extend_from_slice(&body);
            } else {
                for v in values {
                    if matches!(v, Value::Null) {
                        return Err(ConvertError::Protobuf(format!(
                            "a null in an array (field {number}): a repeated Protobuf field cannot hold one"
                        )));
                    }
                    element(number, items, v, out)?;
                }
            }
            Ok(())
        }
        (Schema::Array { .. }, v) => {
            Err(ConvertError::InvalidType { schema: schema.java_type(), found: v.java_class() })
        }
        (Schema::Primitive { .. }, v) if !is_message(schema) => {
            // Only a value of the schema's own type (any other is refused by `element`).
            let Schema::Primitive { ty, .. } = schema else { unreachable!("a primitive") };
            let is_default = match (ty, v) {
                (Type::Int8 | Type::Int16 | Type::Int32 | Type::Int64, Value::Int(0)) => true,
                (Type::Boolean, Value::Bool(false)) => true,
                (Type::Float32 | Type::Float64, Value::Float(f)) => f.to_bits() == 0,
                (Type::String, Value::String(b)) | (Type::Bytes, Value::Bytes(b)) => b.is_empty(),
                _ => false,
            };
            if is_default {
                return Ok(());
            }
            element(number, schema, v, out)
        }
        _ => element(number, schema, value, out),
    }
}

/// Whether a repeated field of `items` is packed (proto3: numbers and booleans).
fn packed(items: &Schema) -> bool {
    matches!(items, Schema::Primitive { ty, .. } if !matches!(ty, Type::String | Type::Bytes)) && !is_message(items)
}

/// Whether `schema` is written as a message (a struct, or a logical type's message).
fn is_message(schema: &Schema) -> bool {
    match schema {
        Schema::Struct { .. } => true,
        Schema::Primitive { name: Some(n), .. } => [DECIMAL, DATE, TIME, TIMESTAMP].contains(&n.as_str()),
        _ => false,
    }
}

/// One occurrence of field `number` (a repeated field's element, or a field with a value).
fn element(number: u32, schema: &Schema, value: &Value, out: &mut Vec<u8>) -> Result<(), ConvertError> {
    if is_message(schema) {
        let mut body = Vec::new();
        match schema {
            Schema::Struct { .. } => message(schema, value, &mut body)?,
            _ => logical(schema, value, &mut body)?,
        }
        key(number, 2, out);
        varint(body.len() as u64, out);
        out.extend_from_slice(&body);
        return Ok(());
    }
    let Schema::Primitive { ty, .. } = schema else {
        return Err(ConvertError::Protobuf(format!("field {number}: an array in an array")));
    };
    let wire = match ty {
        Type::Float64 => 1,
        Type::Float32 => 5,
        Type::String | Type::Bytes => 2,
        _ => 0,
    };
    key(number, wire, out);
    scalar(schema, value, out)
}

/// A scalar's encoding without its key (strings and bytes with their length).
fn scalar(schema: &Schema, value: &Value, out: &mut Vec<u8>) -> Result<(), ConvertError> {
    let invalid = || ConvertError::InvalidType { schema: schema.java_type(), found: value.java_class() };
    let Schema::Primitive { ty, .. } = schema else { return Err(invalid()) };
    match (ty, value) {
        // int32 is sign-extended to 64 bits on the wire.
        (Type::Int8 | Type::Int16 | Type::Int32, Value::Int(i)) => varint(*i as i32 as i64 as u64, out),
        (Type::Int64, Value::Int(i)) => varint(*i as u64, out),
        (Type::Int64, Value::JavaDate { millis, .. }) => varint(*millis as u64, out),
        (Type::Int32, Value::JavaDate { number, .. }) => varint(*number as i32 as i64 as u64, out),
        (Type::Float64, Value::Float(f)) => out.extend_from_slice(&f.to_le_bytes()),
        (Type::Float32, Value::Float(f)) => out.extend_from_slice(&(*f as f32).to_le_bytes()),
        (Type::Boolean, Value::Bool(b)) => out.push(u8::from(*b)),
        (Type::String, Value::String(s)) => {
            let s = super::avro::java_utf8(s);
            varint(s.len() as u64, out);
            out.extend_from_slice(&s);
        }
        // Debezium's VariableScaleDecimal holds its unscaled value as a Decimal's.
        (Type::Bytes, Value::Bytes(b)) | (Type::Bytes, Value::Decimal { unscaled: b, .. }) => {
            varint(b.len() as u64, out);
            out.extend_from_slice(b);
        }
        _ => return Err(invalid()),
    }
    Ok(())
}

/// The body of a logical type's message.
fn logical(schema: &Schema, value: &Value, out: &mut Vec<u8>) -> Result<(), ConvertError> {
    let invalid = || ConvertError::InvalidType { schema: schema.java_type(), found: value.java_class() };
    let put = |number: u32, n: i64, out: &mut Vec<u8>| {
        if n != 0 {
            key(number, 0, out);
            varint(n as u64, out);
        }
    };
    match (schema.name(), value) {
        (Some(TIMESTAMP), Value::JavaDate { millis, .. }) => {
            // google.protobuf.Timestamp holds 0001-01-01 to 9999-12-31; the converter refuses the rest
            // (PostgreSQL's infinity among them, as time.precision.mode=connect gives it).
            let seconds = millis.div_euclid(1000);
            if !(-62_135_596_800..=253_402_300_799).contains(&seconds) {
                return Err(ConvertError::Protobuf(format!(
                    "Timestamp is not valid: {seconds} seconds from the epoch is outside google.protobuf.Timestamp's 0001-01-01 to 9999-12-31 (ProtobufConverter refuses it)"
                )));
            }
            put(1, seconds, out);
            put(2, millis.rem_euclid(1000) * 1_000_000, out);
        }
        (Some(DATE), Value::JavaDate { millis, .. }) => {
            let (y, m, d) = gregorian_calendar_date(millis.div_euclid(86_400_000));
            put(1, y, out);
            put(2, m, out);
            put(3, d, out);
        }
        (Some(TIME), Value::JavaDate { millis, .. }) => {
            let ms = millis.rem_euclid(86_400_000);
            put(1, ms / 3_600_000, out);
            put(2, ms / 60_000 % 60, out);
            put(3, ms / 1000 % 60, out);
            put(4, ms % 1000 * 1_000_000, out);
        }
        (Some(DECIMAL), Value::Decimal { unscaled, .. }) => {
            let Schema::Primitive { parameters, .. } = schema else { return Err(invalid()) };
            let scale: i64 =
                parameters.iter().find(|(k, _)| k == "scale").and_then(|(_, v)| v.parse().ok()).unwrap_or(0);
            if !unscaled.is_empty() {
                key(1, 2, out);
                varint(unscaled.len() as u64, out);
                out.extend_from_slice(unscaled);
            }
            put(2, digits(unscaled), out);
            put(3, scale, out);
        }
        _ => return Err(invalid()),
    }
    Ok(())
}

/// `BigDecimal.precision()` of an unscaled value (two's-complement big-endian): its decimal digits,
/// 1 for zero.
fn digits(unscaled: &[u8]) -> i64 {
    let negative = unscaled.first().is_some_and(|b| b & 0x80 != 0);
    // The magnitude, big-endian.
    let mut mag: Vec<u8> = unscaled.to_vec();
    if negative {
        for b in &mut mag {
            *b = !*b;
        }
        for b in mag.iter_mut().rev() {
            let (v, carry) = b.overflowing_add(1);
            *b = v;
            if !carry {
                break;
            }
        }
    }
    let mut count = 0;
    while mag.iter().any(|&b| b != 0) {
        let mut rem = 0u32;
        for b in &mut mag {
            let cur = (rem << 8) | u32::from(*b);
            *b = (cur / 10) as u8;
            rem = cur % 10;
        }
        count += 1;
    }
    count.max(1)
}

fn key(number: u32, wire: u8, out: &mut Vec<u8>) {
    varint((u64::from(number) << 3) | u64::from(wire), out);
}

fn varint(mut n: u64, out: &mut Vec<u8>) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

#[cfg(test)]
mod tests;
