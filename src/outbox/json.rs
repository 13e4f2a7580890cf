//! JSON output byte-compatible with Kafka Connect's JsonConverter (Jackson's default `ObjectMapper`):
//! compact, `"` and `\` escaped, `\b \t \n \f \r` in short form, other control characters as `\u00XX`
//! with upper-case hex, characters outside the BMP as `\uXXXX` surrogate pairs, everything else
//! (non-ASCII in the BMP, `/`, DEL) written as is in UTF-8.

use super::schema::{FieldSchema, FieldValue};

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

/// A primitive Connect schema as JsonConverter writes it: `type`, `optional`, then `name` and
/// `version` when set.
pub fn write_schema(out: &mut Vec<u8>, schema: &FieldSchema) {
    if matches!(schema.ty, super::schema::SchemaType::VariableDecimal | super::schema::SchemaType::Array) {
        return super::connect::write_schema(out, &super::value::schema_of(schema));
    }
    out.extend_from_slice(b"{\"type\":\"");
    out.extend_from_slice(schema.ty.connect_name().as_bytes());
    out.extend_from_slice(b"\",\"optional\":");
    out.extend_from_slice(if schema.optional { b"true" } else { b"false" });
    if let Some(name) = schema.name {
        out.extend_from_slice(b",\"name\":");
        write_string(out, name.as_bytes());
    }
    if let Some(v) = schema.version {
        out.extend_from_slice(b",\"version\":");
        out.extend_from_slice(v.to_string().as_bytes());
    }
    if let super::schema::TextForm::Decimal { precision, scale } = schema.form {
        let (p, s) = (precision.to_string(), scale.to_string());
        super::connect::write_parameters(out, [("scale", s.as_str()), ("connect.decimal.precision", p.as_str())]);
    }
    out.push(b'}');
}

pub fn write_value(out: &mut Vec<u8>, value: &FieldValue) {
    match value {
        FieldValue::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(out, item);
            }
            out.push(b']');
        }
        FieldValue::Null => out.extend_from_slice(b"null"),
        FieldValue::String(s) => write_string(out, s),
        FieldValue::Bytes(b) => {
            out.push(b'"');
            base64(out, b);
            out.push(b'"');
        }
        FieldValue::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        FieldValue::Int(i) | FieldValue::JavaDate { number: i, .. } => out.extend_from_slice(i.to_string().as_bytes()),
        FieldValue::Float32(f) => super::connect::write_java_float(out, *f),
        FieldValue::Float64(f) => super::connect::write_java_double(out, *f),
        FieldValue::Decimal { unscaled, .. } => {
            out.push(b'"');
            base64(out, unscaled);
            out.push(b'"');
        }
        FieldValue::VariableDecimal { scale, unscaled, .. } => {
            out.extend_from_slice(format!("{{\"scale\":{scale},\"value\":\"").as_bytes());
            base64(out, unscaled);
            out.extend_from_slice(b"\"}");
        }
    }
}

/// Standard base64 with padding, as Jackson writes `byte[]` (and SimpleHeaderConverter bytes).
pub fn base64(out: &mut Vec<u8>, data: &[u8]) {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for chunk in data.chunks(3) {
        let n = (u32::from(chunk[0]) << 16)
            | (u32::from(*chunk.get(1).unwrap_or(&0)) << 8)
            | u32::from(*chunk.get(2).unwrap_or(&0));
        out.push(A[(n >> 18) as usize & 63]);
        out.push(A[(n >> 12) as usize & 63]);
        out.push(if chunk.len() > 1 { A[(n >> 6) as usize & 63] } else { b'=' });
        out.push(if chunk.len() > 2 { A[n as usize & 63] } else { b'=' });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

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
            write_value(&mut out, &FieldValue::Bytes(Bytes::copy_from_slice(input)));
            assert_eq!(String::from_utf8(out).unwrap(), want);
        }
    }
}
