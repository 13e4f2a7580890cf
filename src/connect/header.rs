//! `org.apache.kafka.connect.storage.SimpleHeaderConverter`: `Values.convertToString` in UTF-8,
//! without quotes or schema. Bytes as base64; a `java.util.Date` by its value (see
//! [`java_date_values_string`]); a list as `["a","b c",null,1]`, strings quoted and escaped.

use bytes::Bytes;

use super::java::date::java_date_values_string;
use super::{string, Schema, Value};

/// The header bytes for a value, `None` for a null.
pub fn encode(schema: Option<&Schema>, value: &Value) -> Option<Bytes> {
    match value {
        Value::Null => None,
        Value::Bytes(b) => {
            let mut out = Vec::new();
            super::json::base64(&mut out, b);
            Some(Bytes::from(out))
        }
        Value::JavaDate { millis, .. } => Some(Bytes::from(java_date_values_string(*millis))),
        Value::Array(items) => {
            let items_schema = match schema {
                Some(Schema::Array { items, .. }) => Some(&**items),
                _ => None,
            };
            let mut out = String::from("[");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                match item {
                    Value::Null => out.push_str("null"),
                    Value::String(s) => {
                        out.push('"');
                        for c in String::from_utf8_lossy(s).chars() {
                            if c == '"' || c == '\\' {
                                out.push('\\');
                            }
                            out.push(c);
                        }
                        out.push('"');
                    }
                    other => {
                        if let Some(b) = encode(items_schema, other) {
                            out.push_str(&String::from_utf8_lossy(&b));
                        }
                    }
                }
            }
            out.push(']');
            Some(Bytes::from(out))
        }
        other => string::encode(schema, other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connect::Type;

    #[test]
    fn bytes_are_base64_like_simple_header_converter() {
        assert_eq!(encode(None, &Value::Bytes(Bytes::from_static(b"hi"))).as_deref(), Some(&b"aGk="[..]));
        assert_eq!(encode(None, &Value::Int(5)).as_deref(), Some(&b"5"[..]));
        assert_eq!(encode(None, &Value::Null), None);
    }

    #[test]
    fn lists_quote_their_strings() {
        let schema = Schema::Array { items: Box::new(Schema::optional(Type::String)), optional: true };
        let v = Value::Array(vec![Value::text("a"), Value::Null, Value::text("q\"x")]);
        assert_eq!(encode(Some(&schema), &v).as_deref(), Some(&br#"["a",null,"q\"x"]"#[..]));
    }
}
