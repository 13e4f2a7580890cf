//! `org.apache.kafka.connect.storage.StringConverter`: `value.toString()` of Connect data in UTF-8,
//! with a JVM in UTC. Structs print as `Struct{a=1,b=x}` (null fields left out), lists as `[a, b]`,
//! floats as `Float.toString`/`Double.toString`, dates as `java.util.Date.toString()`.

use bytes::Bytes;

use super::java::date::java_date_to_string;
use super::java::float::java_float_to_string;
use super::{Schema, Type, Value};

/// The record bytes: `None` for a null value (a Kafka null). A top-level string is passed through
/// without a copy; a top-level `byte[]` is written as its bytes (Java would print its identity hash,
/// `[B@1b6d3586`, which no consumer can use).
pub fn encode(schema: Option<&Schema>, value: &Value) -> Option<Bytes> {
    match value {
        Value::Null => None,
        Value::String(s) | Value::Bytes(s) => Some(s.clone()),
        Value::Decimal { text, .. } => Some(text.clone()),
        v => Some(Bytes::from(to_string(schema, v))),
    }
}

/// `toString()` of a value under its schema (the schema tells FLOAT32 from FLOAT64 and names a
/// struct's fields; without one, a float is a double and a struct prints its values only).
pub fn to_string(schema: Option<&Schema>, value: &Value) -> String {
    let mut out = String::new();
    write(&mut out, schema, value);
    out
}

fn write(out: &mut String, schema: Option<&Schema>, value: &Value) {
    match (schema, value) {
        (_, Value::Null) => out.push_str("null"),
        (_, Value::Bool(b)) => out.push_str(if *b { "true" } else { "false" }),
        (_, Value::Int(i)) => out.push_str(&i.to_string()),
        (Some(Schema::Primitive { ty: Type::Float32, .. }), Value::Float(f)) => {
            out.push_str(&java_float_to_string(*f, true))
        }
        (_, Value::Float(f)) => out.push_str(&java_float_to_string(*f, false)),
        (_, Value::String(s)) => out.push_str(&String::from_utf8_lossy(s)),
        (_, Value::Bytes(b)) => out.push_str(&format!("{b:?}")),
        (_, Value::Decimal { text, .. }) => out.push_str(&String::from_utf8_lossy(text)),
        (_, Value::JavaDate { millis, .. }) => out.push_str(&java_date_to_string(*millis)),
        (schema, Value::Array(items)) => {
            let items_schema = match schema {
                Some(Schema::Array { items, .. }) => Some(&**items),
                _ => None,
            };
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write(out, items_schema, item);
            }
            out.push(']');
        }
        (schema, Value::Struct(values)) => {
            let fields = match schema {
                Some(Schema::Struct { fields, .. }) => Some(fields),
                _ => None,
            };
            out.push_str("Struct{");
            let mut first = true;
            for (i, v) in values.iter().enumerate() {
                if matches!(v, Value::Null) {
                    continue;
                }
                if !first {
                    out.push(',');
                }
                first = false;
                let field = fields.and_then(|f| f.get(i));
                if let Some((name, _)) = field {
                    out.push_str(name);
                    out.push('=');
                }
                write(out, field.map(|(_, s)| s), v);
            }
            out.push('}');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn structs_name_their_fields_and_leave_nulls_out() {
        let schema = Schema::Struct {
            name: Some("x.Value".into()),
            fields: vec![
                ("payload".into(), Schema::optional(Type::String)),
                ("n".into(), Schema::optional(Type::Float32)),
                ("gone".into(), Schema::optional(Type::Int32)),
                ("list".into(), Schema::Array { items: Box::new(Schema::optional(Type::Float64)), optional: true }),
            ],
            optional: false,
            version: None,
            doc: None,
        };
        let v = Value::Struct(vec![
            Value::text("{}"),
            Value::Float(f64::from(0.1f32)),
            Value::Null,
            Value::Array(vec![Value::Float(1.0), Value::Null]),
        ]);
        assert_eq!(to_string(Some(&schema), &v), "Struct{payload={},n=0.1,list=[1.0, null]}");
        assert_eq!(encode(Some(&schema), &Value::Null), None);
    }

    #[test]
    fn top_level_text_and_numbers() {
        let s = Schema::optional(Type::String);
        assert_eq!(encode(Some(&s), &Value::text("a b")).as_deref(), Some(&b"a b"[..]));
        assert_eq!(encode(None, &Value::Int(-3)).as_deref(), Some(&b"-3"[..]));
        assert_eq!(encode(None, &Value::Bool(true)).as_deref(), Some(&b"true"[..]));
        let f32_schema = Schema::optional(Type::Float32);
        assert_eq!(encode(Some(&f32_schema), &Value::Float(f64::from(1.1f32))).as_deref(), Some(&b"1.1"[..]));
    }
}
