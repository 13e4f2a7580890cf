//! The bytes `org.apache.kafka.connect.json.JsonConverter` writes for Connect data.
//!
//! JsonConverter builds a Jackson tree and serialises it with a default `ObjectMapper` (UTF-8
//! generator), so the bytes follow Jackson, not JSON in general:
//! - schema objects list `type`, then `items` (arrays) or `fields` (structs, each field's schema
//!   followed by `"field":"<name>"`), then `optional`, `name`, `version` (`JsonConverter.asJsonSchema`).
//!   FLOAT32 is called `"float"` and FLOAT64 `"double"`.
//! - strings escape `"`, `\` and control characters like `json::write_string`, and additionally every
//!   UTF-16 surrogate: a character outside the BMP (an emoji) is written as two upper-case `\uD83D\uDE00`
//!   escapes, not as four UTF-8 bytes (`UTF8JsonGenerator._outputMultiByteChar`; combining them is the
//!   opt-in `COMBINE_UNICODE_SURROGATES_IN_UTF8`). Observed with Debezium 3.6.3, see `expand` tests.
//! - doubles as `Double.toString` (`1.0`, `1.0E20`, `1.0E-4`, `-0.0`), floats as `Float.toString`;
//!   NaN and infinities as the strings `"NaN"`, `"Infinity"`, `"-Infinity"` (`QUOTE_NON_NUMERIC_NUMBERS`).
//!   This is the JDK 19+ algorithm (JDK-4511638: the shortest decimal that reads back, the closest
//!   of those, ties to even, at least two digits considered), checked equal to JDK 25 on 1.33 million
//!   doubles and 1 million floats. JDK 17, which the reference runner uses, prints a longer form for
//!   about 0.3% of arbitrary doubles, all in E notation (`9.999999999999999E22` for `1.0E23`,
//!   `2.6814475343671142E18` for `2.681447534367114E18`); none between 10^-3 and 10^7 in our samples.
//! - BYTES as base64 with padding.
//! - `schemas.enable=true` wraps the value as `{"schema":...,"payload":...}`; a missing schema is `null`.

use base64::Engine as _;
use bytes::Bytes;

use super::avro::DECIMAL;
use super::config::{ConfigError, Reader};
use super::java::float::{write_java_double, write_java_float};
use super::{ConvertError, Schema, Type, Value};

const HEX: &[u8; 16] = b"0123456789ABCDEF";

/// What each byte needs in a JSON string: 0 nothing, `U` a `\u00XX` escape, `S` a look at the
/// sequence it starts (4-byte UTF-8 or a generalised-UTF-8 surrogate), else the letter of its short
/// escape.
const U: u8 = b'u';
const S: u8 = 1;
static ESCAPE: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0;
    while b < 0x20 {
        t[b] = U;
        b += 1;
    }
    t[0x08] = b'b';
    t[0x09] = b't';
    t[0x0A] = b'n';
    t[0x0C] = b'f';
    t[0x0D] = b'r';
    t[b'"' as usize] = b'"';
    t[b'\\' as usize] = b'\\';
    t[0xED] = S;
    let mut b = 0xF0;
    while b <= 0xF4 {
        t[b] = S;
        b += 1;
    }
    t
};

/// The UTF-16 units to escape for the sequence at `s[i]` (a byte marked `S`), and its length:
/// a 4-byte UTF-8 character becomes a surrogate pair, a generalised-UTF-8 surrogate (`ED A0..BF xx`)
/// its one unit. `None` for anything else (written as is).
fn surrogates(s: &[u8], i: usize) -> Option<(usize, [u16; 2], usize)> {
    match s[i] {
        0xF0..=0xF4 if i + 3 < s.len() => {
            let cp = (u32::from(s[i] & 0x07) << 18)
                | (u32::from(s[i + 1] & 0x3F) << 12)
                | (u32::from(s[i + 2] & 0x3F) << 6)
                | u32::from(s[i + 3] & 0x3F);
            let c = cp.checked_sub(0x1_0000)?;
            Some((4, [0xD800 | (c >> 10) as u16, 0xDC00 | (c & 0x3FF) as u16], 2))
        }
        0xED if i + 2 < s.len() && s[i + 1] >= 0xA0 => {
            Some((3, [0xD000 | (u16::from(s[i + 1] & 0x3F) << 6) | u16::from(s[i + 2] & 0x3F), 0], 1))
        }
        _ => None,
    }
}

/// A JSON string as Jackson's UTF-8 generator writes it: see the module comment; characters outside
/// the BMP (4-byte UTF-8) and lone surrogates (generalised UTF-8 `ED A0..BF xx`) become `\uXXXX`
/// escapes of their UTF-16 units. One pass with a table lookup per byte: this runs on every payload.
pub fn write_string(out: &mut Vec<u8>, s: &[u8]) {
    out.reserve(s.len() + 2);
    out.push(b'"');
    let mut start = 0;
    let mut i = 0;
    while i < s.len() {
        let esc = ESCAPE[s[i] as usize];
        if esc == 0 {
            i += 1;
            continue;
        }
        let b = s[i];
        if esc == S {
            let Some((len, units, count)) = surrogates(s, i) else {
                i += 1;
                continue;
            };
            out.extend_from_slice(&s[start..i]);
            for &unit in &units[..count] {
                out.extend_from_slice(b"\\u");
                for shift in [12, 8, 4, 0] {
                    out.push(HEX[((unit >> shift) & 0xF) as usize]);
                }
            }
            i += len;
        } else {
            out.extend_from_slice(&s[start..i]);
            if esc == U {
                out.extend_from_slice(b"\\u00");
                out.push(HEX[(b >> 4) as usize]);
                out.push(HEX[(b & 0xF) as usize]);
            } else {
                out.push(b'\\');
                out.push(esc);
            }
            i += 1;
        }
        start = i;
    }
    out.extend_from_slice(&s[start..]);
    out.push(b'"');
}

/// A `byte[]` as Jackson writes it: a string of standard base64 with padding.
fn write_base64(out: &mut Vec<u8>, data: &[u8]) {
    out.push(b'"');
    base64(out, data);
    out.push(b'"');
}

/// Standard base64 with padding, as Jackson writes `byte[]` (and SimpleHeaderConverter bytes).
pub fn base64(out: &mut Vec<u8>, data: &[u8]) {
    let start = out.len();
    out.resize(start + data.len().div_ceil(3) * 4, 0);
    let written = base64::engine::general_purpose::STANDARD
        .encode_slice(data, &mut out[start..])
        .expect("the buffer holds the padded encoding");
    out.truncate(start + written);
}

/// The schema as JsonConverter writes it inside the envelope (a default value as its `decimals`
/// write it).
pub fn write_schema(out: &mut Vec<u8>, s: &Schema, decimals: Decimals) {
    let mut params: &[(String, String)] = &[];
    let mut doc = None;
    let (optional, name, version) = match s {
        Schema::Primitive { ty, optional, name, version, parameters, .. } => {
            out.extend_from_slice(b"{\"type\":\"");
            out.extend_from_slice(ty.json_name().as_bytes());
            out.push(b'"');
            params = parameters;
            (*optional, name.as_deref(), *version)
        }
        Schema::Array { items, optional } => {
            out.extend_from_slice(b"{\"type\":\"array\",\"items\":");
            write_schema(out, items, decimals);
            (*optional, None, None)
        }
        Schema::Struct { name, fields, optional, version, doc: struct_doc } => {
            doc = struct_doc.as_deref();
            out.extend_from_slice(b"{\"type\":\"struct\",\"fields\":[");
            for (i, (field, schema)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_schema(out, schema, decimals);
                // The field's schema object gets one more key, `field`, at its end.
                out.pop();
                out.extend_from_slice(b",\"field\":");
                write_string(out, field.as_bytes());
                out.push(b'}');
            }
            out.push(b']');
            (*optional, name.as_deref(), *version)
        }
    };
    out.extend_from_slice(if optional { b",\"optional\":true" } else { b",\"optional\":false" });
    if let Some(name) = name {
        out.extend_from_slice(b",\"name\":");
        write_string(out, name.as_bytes());
    }
    if let Some(v) = version {
        out.extend_from_slice(b",\"version\":");
        out.extend_from_slice(v.to_string().as_bytes());
    }
    if let Some(doc) = doc {
        out.extend_from_slice(b",\"doc\":");
        write_string(out, doc.as_bytes());
    }
    write_parameters(out, params.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    if let Some(v) = s.default_value() {
        out.extend_from_slice(b",\"default\":");
        // A default is a valid value of its schema (it was read as one).
        if write_value_as(out, s, v, decimals).is_err() {
            out.extend_from_slice(b"null");
        }
    }
    out.push(b'}');
}

/// `,"parameters":{...}` as JsonConverter writes a schema's parameters (nothing when there are none).
pub fn write_parameters<'a>(out: &mut Vec<u8>, params: impl IntoIterator<Item = (&'a str, &'a str)>) {
    let mut first = true;
    for (k, v) in params {
        out.extend_from_slice(if first { b",\"parameters\":{" } else { b"," });
        first = false;
        write_string(out, k.as_bytes());
        out.push(b':');
        write_string(out, v.as_bytes());
    }
    if !first {
        out.push(b'}');
    }
}

/// How a Connect Decimal is written (`decimal.format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Decimals {
    /// Its unscaled bytes in base64 (JsonConverter's default).
    Base64,
    /// A JSON number, `BigDecimal.toString` (as Jackson writes a DecimalNode).
    Numeric,
}

impl Decimals {
    /// A `decimal.format` key: `BASE64` (the default) or `NUMERIC`, in any case, as Kafka's
    /// `JsonConverterConfig` and Confluent's `JsonSchemaConverterConfig` read it.
    pub fn read(r: &mut Reader<'_>, key: &str) -> Result<Decimals, ConfigError> {
        r.choice(key, Decimals::Base64, &[("BASE64", Decimals::Base64), ("NUMERIC", Decimals::Numeric)])
    }
}

/// The value as JsonConverter writes it under schema `s` (`convertToJson`).
pub fn write_value(out: &mut Vec<u8>, s: &Schema, v: &Value) -> Result<(), ConvertError> {
    write_value_as(out, s, v, Decimals::Base64)
}

/// [`write_value`], with Decimals written as `decimals` says.
pub fn write_value_as(out: &mut Vec<u8>, s: &Schema, v: &Value, decimals: Decimals) -> Result<(), ConvertError> {
    let mismatch = || ConvertError::InvalidType { schema: s.java_type(), found: v.java_class() };
    match (s, v) {
        (_, Value::Null) if s.is_optional() => out.extend_from_slice(b"null"),
        (_, Value::Null) => return Err(ConvertError::RequiredNull),
        (Schema::Primitive { ty: Type::Bytes, name: Some(n), .. }, Value::Decimal { text, .. })
            if decimals == Decimals::Numeric && n == DECIMAL =>
        {
            out.extend_from_slice(text)
        }
        (Schema::Primitive { ty, .. }, _) => match (ty, v) {
            (
                Type::Int8 | Type::Int16 | Type::Int32 | Type::Int64,
                Value::Int(i) | Value::JavaDate { number: i, .. },
            ) => {
                out.extend_from_slice(i.to_string().as_bytes());
            }
            (Type::Float64, Value::Float(f)) => write_java_double(out, *f),
            (Type::Float32, Value::Float(f)) => write_java_float(out, *f as f32),
            (Type::Boolean, Value::Bool(b)) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
            (Type::String, Value::String(text)) => write_string(out, text),
            (Type::Bytes, Value::Bytes(b) | Value::Decimal { unscaled: b, .. }) => write_base64(out, b),
            _ => return Err(mismatch()),
        },
        (Schema::Array { items, .. }, Value::Array(elems)) => {
            out.push(b'[');
            for (i, e) in elems.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value_as(out, items, e, decimals)?;
            }
            out.push(b']');
        }
        (Schema::Struct { fields, .. }, Value::Struct(values)) => {
            if fields.len() != values.len() {
                return Err(ConvertError::StructArity { fields: fields.len(), values: values.len() });
            }
            out.push(b'{');
            for (i, ((name, schema), value)) in fields.iter().zip(values).enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_string(out, name.as_bytes());
                out.push(b':');
                write_value_as(out, schema, value, decimals)?;
            }
            out.push(b'}');
        }
        _ => return Err(mismatch()),
    }
    Ok(())
}

/// A value without a schema, typed by its Java class (JsonConverter's `schema == null` path).
pub fn write_schemaless_value(out: &mut Vec<u8>, v: &Value) -> Result<(), ConvertError> {
    match v {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Int(i) | Value::JavaDate { number: i, .. } => out.extend_from_slice(i.to_string().as_bytes()),
        Value::Float(f) => write_java_double(out, *f),
        Value::String(text) => write_string(out, text),
        Value::Bytes(b) | Value::Decimal { unscaled: b, .. } => write_base64(out, b),
        Value::Array(elems) => {
            out.push(b'[');
            for (i, e) in elems.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_schemaless_value(out, e)?;
            }
            out.push(b']');
        }
        Value::Struct(_) => return Err(ConvertError::SchemalessStruct),
    }
    Ok(())
}

/// JsonConverter's record bytes: with schemas `{"schema":...,"payload":...}` (a missing schema is
/// `null`), without them the bare value. The caller handles JsonConverter's one Kafka-null case (no
/// schema and a null value, see [`json_converter`]); here it writes `null`.
pub fn json_envelope(
    out: &mut Vec<u8>,
    schemas_enabled: bool,
    decimals: Decimals,
    schema: Option<&Schema>,
    value: &Value,
) -> Result<(), ConvertError> {
    let write = |out: &mut Vec<u8>| match schema {
        Some(s) => write_value_as(out, s, value, decimals),
        None => write_schemaless_value(out, value),
    };
    if !schemas_enabled {
        return write(out);
    }
    out.extend_from_slice(b"{\"schema\":");
    match schema {
        Some(s) => write_schema(out, s, decimals),
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\"payload\":");
    write(out)?;
    out.push(b'}');
    Ok(())
}

/// `JsonConverter.fromConnectData`: `None` is a Kafka null (no schema and no value).
pub fn json_converter(
    schemas_enabled: bool,
    decimals: Decimals,
    schema: Option<&Schema>,
    value: &Value,
) -> Result<Option<Bytes>, ConvertError> {
    if schema.is_none() && *value == Value::Null {
        return Ok(None);
    }
    let mut out = Vec::with_capacity(128);
    json_envelope(&mut out, schemas_enabled, decimals, schema, value)?;
    Ok(Some(Bytes::from(out)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(input: &str) -> String {
        let mut out = Vec::new();
        write_string(&mut out, input.as_bytes());
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn strings_are_escaped_like_jackson() {
        assert_eq!(s(r#"{"id": 1}"#), r#""{\"id\": 1}""#);
        assert_eq!(s("a\\b/c"), r#""a\\b/c""#);
        assert_eq!(s("\u{8}\t\n\u{c}\r"), r#""\b\t\n\f\r""#);
        assert_eq!(s("\u{1}\u{1f}\u{7f}"), "\"\\u0001\\u001F\u{7f}\"");
        assert_eq!(s("héllo ✓"), "\"héllo ✓\"");
        // Outside the BMP Jackson writes UTF-16 surrogate escapes (seen from Debezium 3.6.3).
        assert_eq!(s("a😀b"), "\"a\\uD83D\\uDE00b\"");
        // A lone surrogate in generalised UTF-8 (PostgreSQL never sends one, Java strings can hold it).
        let mut out = Vec::new();
        write_string(&mut out, &[b'a', 0xED, 0xA0, 0x80, b'b']);
        assert_eq!(out, b"\"a\\uD800b\"");
    }

    /// Jackson's rules written the obvious way, one character at a time.
    fn reference(input: &str) -> String {
        let mut out = String::from("\"");
        for c in input.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\u{8}' => out.push_str("\\b"),
                '\t' => out.push_str("\\t"),
                '\n' => out.push_str("\\n"),
                '\u{c}' => out.push_str("\\f"),
                '\r' => out.push_str("\\r"),
                c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04X}", c as u32)),
                c if (c as u32) > 0xFFFF => {
                    for unit in c.encode_utf16(&mut [0; 2]) {
                        out.push_str(&format!("\\u{:04X}", unit));
                    }
                }
                c => out.push(c),
            }
        }
        out.push('"');
        out
    }

    #[test]
    fn escaping_matches_the_character_by_character_rules() {
        // Deterministic pseudo-random strings over an alphabet with every class of character.
        let alphabet = [
            'a',
            'Z',
            ' ',
            '/',
            '"',
            '\\',
            '\u{0}',
            '\u{8}',
            '\t',
            '\n',
            '\u{b}',
            '\u{c}',
            '\r',
            '\u{1f}',
            '\u{7f}',
            'é',
            '\u{7ff}',
            '\u{800}',
            '✓',
            '\u{d7ff}',
            '\u{e000}',
            '\u{ffff}',
            '\u{10000}',
            '😀',
            '\u{10ffff}',
        ];
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for len in 0..400 {
            let text: String = (0..len % 40)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    alphabet[(x % alphabet.len() as u64) as usize]
                })
                .collect();
            assert_eq!(s(&text), reference(&text), "input {text:?}");
        }
    }

    #[test]
    fn base64_pads_like_java() {
        for (input, want) in [(&b""[..], "\"\""), (b"f", "\"Zg==\""), (b"fo", "\"Zm8=\""), (b"foo", "\"Zm9v\"")] {
            let mut out = Vec::new();
            write_base64(&mut out, input);
            assert_eq!(String::from_utf8(out).unwrap(), want);
        }
    }
}
