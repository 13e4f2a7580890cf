//! JSON output byte-compatible with Kafka Connect's JsonConverter (Jackson's default `ObjectMapper`):
//! compact, `"` and `\` escaped, `\b \t \n \f \r` in short form, other control characters as `\u00XX`
//! with upper-case hex, characters outside the BMP as `\uXXXX` surrogate pairs, everything else
//! (non-ASCII in the BMP, `/`, DEL) written as is in UTF-8.

use super::schema::{FieldSchema, FieldValue};

const HEX: &[u8; 16] = b"0123456789ABCDEF";

/// Escapes a string whose characters are all in the BMP.
fn write_bmp_string(out: &mut Vec<u8>, s: &[u8]) {
    out.reserve(s.len() + 2);
    out.push(b'"');
    let mut start = 0;
    for (i, &b) in s.iter().enumerate() {
        let short = match b {
            b'"' => b'"',
            b'\\' => b'\\',
            0x08 => b'b',
            0x09 => b't',
            0x0A => b'n',
            0x0C => b'f',
            0x0D => b'r',
            0x00..=0x1F => 0,
            _ => continue,
        };
        out.extend_from_slice(&s[start..i]);
        if short == 0 {
            out.extend_from_slice(b"\\u00");
            out.push(HEX[(b >> 4) as usize]);
            out.push(HEX[(b & 0xF) as usize]);
        } else {
            out.push(b'\\');
            out.push(short);
        }
        start = i + 1;
    }
    out.extend_from_slice(&s[start..]);
    out.push(b'"');
}

/// A JSON string as Jackson's UTF-8 generator writes it: the BMP escaping below, except that
/// characters outside the BMP (4-byte UTF-8) and lone surrogates (generalised UTF-8 `ED A0..BF xx`)
/// become `\uXXXX` escapes of their UTF-16 surrogates.
pub fn write_string(out: &mut Vec<u8>, s: &[u8]) {
    if !s.iter().any(|&b| b >= 0xED) {
        return write_bmp_string(out, s);
    }
    out.push(b'"');
    let mut scratch = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < s.len() {
        let units: Option<(usize, [u16; 2], usize)> = match s[i] {
            0xF0..=0xF4 if i + 3 < s.len() => {
                let cp = (u32::from(s[i] & 0x07) << 18)
                    | (u32::from(s[i + 1] & 0x3F) << 12)
                    | (u32::from(s[i + 2] & 0x3F) << 6)
                    | u32::from(s[i + 3] & 0x3F);
                let c = cp - 0x1_0000;
                Some((4, [0xD800 | (c >> 10) as u16, 0xDC00 | (c & 0x3FF) as u16], 2))
            }
            0xED if i + 2 < s.len() && s[i + 1] >= 0xA0 => {
                let unit = 0xD000 | (u16::from(s[i + 1] & 0x3F) << 6) | u16::from(s[i + 2] & 0x3F);
                Some((3, [unit, 0], 1))
            }
            _ => None,
        };
        let Some((len, units, count)) = units else {
            i += 1;
            continue;
        };
        scratch.clear();
        write_bmp_string(&mut scratch, &s[start..i]);
        out.extend_from_slice(&scratch[1..scratch.len() - 1]);
        for unit in &units[..count] {
            out.extend_from_slice(format!("\\u{unit:04X}").as_bytes());
        }
        i += len;
        start = i;
    }
    scratch.clear();
    write_bmp_string(&mut scratch, &s[start..]);
    out.extend_from_slice(&scratch[1..]);
}

/// A primitive Connect schema as JsonConverter writes it: `type`, `optional`, then `name` and
/// `version` when set.
pub fn write_schema(out: &mut Vec<u8>, schema: &FieldSchema) {
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
    out.push(b'}');
}

pub fn write_value(out: &mut Vec<u8>, value: &FieldValue) {
    match value {
        FieldValue::Null => out.extend_from_slice(b"null"),
        FieldValue::String(s) => write_string(out, s),
        FieldValue::Bytes(b) => {
            out.push(b'"');
            base64(out, b);
            out.push(b'"');
        }
        FieldValue::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        FieldValue::Int(i) => out.extend_from_slice(i.to_string().as_bytes()),
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
