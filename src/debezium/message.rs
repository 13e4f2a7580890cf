//! Debezium's `DecodeLogicalDecodingMessageContent` (3.0+): the content of a logical decoding
//! message (`pg_logical_emit_message(true, '<prefix>', '<json>')`) becomes the `after` struct of a
//! create event, which the Event Router then routes like an outbox row.
//!
//! Debezium's steps (`convertLogicalDecodingMessageContentBytesToStruct`), each kept here:
//! 1. The bytes are read as a Java string (`new String(bytes)`: UTF-8, an invalid sequence becomes
//!    U+FFFD).
//! 2. Only text starting with `{` or `[` is parsed; anything else fails the task ("Unable to parse
//!    logical decoding message content JSON string"), and so does a syntax error.
//! 3. `JsonSchemaData.toConnectSchema(null, tree)`: the schema is inferred as for
//!    `table.expand.json.payload` (see `expand`), with an unnamed root, so its children are named by
//!    their bare keys (`payload`, then `payload.customer`). JSON nulls are dropped unless
//!    `fields.null.include=true` types them as optional bytes; empty arrays are always dropped (the
//!    transform builds its `JsonSchemaData` without Debezium 3.7's empty-array option).
//! 4. `toConnectData`, cast to a `Struct`: a top-level array fails the task (a
//!    `ClassCastException`), and so does any failure of inference, which the transform does not
//!    catch.
//!
//! The rest of the transform is the record around the struct: the key becomes null, `op` becomes
//! `c`, and the value schema is renamed `io.debezium.connector.postgresql.MessageValue.Envelope` so
//! that the Event Router takes it. Nothing of that reaches the router's records except `ts_ms`,
//! the record timestamp when `table.field.event.timestamp` is unset.

use super::expand::{infer_struct, ExpandError, Expanded, Expansion, JsonEmptyArrayBehavior, JsonNullBehavior};
use crate::connect::Schema;

/// The transform's class.
pub const DECODE_CONTENT_CLASS: &str =
    "io.debezium.connector.postgresql.transforms.DecodeLogicalDecodingMessageContent";

/// Why a message's content cannot become an event; Debezium's task stops on each.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContentError {
    #[error("its content is not a JSON object (it starts with {0})")]
    NotJson(String),
    #[error("its content is a JSON array, not an object")]
    Array,
    #[error("its content is not JSON that Debezium reads: {0}")]
    Unreadable(ExpandError),
}

/// The `after` struct of a message whose content is `content`; `null_include` is the transform's
/// `fields.null.include`.
pub fn decode_content(content: &[u8], null_include: bool) -> Result<Expanded, ContentError> {
    // Valid UTF-8 (the usual case) is checked with the fast validator; Java's replacement of
    // invalid sequences only when needed.
    let text = match std::str::from_utf8(content) {
        Ok(t) => std::borrow::Cow::Borrowed(t),
        Err(_) => String::from_utf8_lossy(content),
    };
    if !(text.starts_with('{') || text.starts_with('[')) {
        let start = match text.chars().next() {
            None => "nothing: it is empty".to_string(),
            Some(c) => format!("`{}`", c.escape_debug()),
        };
        return Err(ContentError::NotJson(start));
    }
    let nulls = if null_include { JsonNullBehavior::OptionalBytes } else { JsonNullBehavior::Ignore };
    let options = Expansion { nulls, empty_arrays: JsonEmptyArrayBehavior::Ignore };
    match infer_struct(&text, None, options) {
        Ok(e) if matches!(e.schema, Schema::Struct { .. }) => Ok(e),
        Ok(_) | Err(ExpandError::NoSchema) => Err(ContentError::Array),
        Err(ExpandError::StopsDebezium { .. }) if text.starts_with('[') => Err(ContentError::Array),
        Err(e) => Err(ContentError::Unreadable(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connect::{Type, Value};

    fn field_names(s: &Schema) -> Vec<String> {
        match s {
            Schema::Struct { fields, .. } => fields.iter().map(|(n, _)| n.clone()).collect(),
            _ => Vec::new(),
        }
    }

    #[test]
    fn decode_content_infers_an_unnamed_struct_with_bare_child_names() {
        let e = decode_content(
            br#"{"id":"e1","aggregatetype":"Order","n":7,"payload":{"sku":"A","tags":[]},"gone":null}"#,
            false,
        )
        .expect("an object decodes");
        let Schema::Struct { name, fields, optional, .. } = &e.schema else { panic!("not a struct") };
        assert_eq!(name, &None);
        assert!(optional);
        assert_eq!(field_names(&e.schema), ["id", "aggregatetype", "n", "payload"]);
        assert_eq!(fields[2].1, Schema::optional(Type::Int32));
        // The payload struct is named by its bare key; the empty array is dropped.
        let Schema::Struct { name, .. } = &fields[3].1 else { panic!("payload is not a struct") };
        assert_eq!(name.as_deref(), Some("payload"));
        assert_eq!(field_names(&fields[3].1), ["sku"]);
        let Value::Struct(values) = &e.value else { panic!("not a struct value") };
        assert_eq!(values[0], Value::String("e1".into()));
    }

    #[test]
    fn decode_content_keeps_nulls_only_when_asked() {
        let e = decode_content(br#"{"a":null,"b":1}"#, true).expect("decodes");
        assert_eq!(field_names(&e.schema), ["a", "b"]);
        let Schema::Struct { fields, .. } = &e.schema else { panic!() };
        assert_eq!(fields[0].1, Schema::optional(Type::Bytes));
        assert_eq!(field_names(&decode_content(br#"{"a":null,"b":1}"#, false).expect("decodes").schema), ["b"]);
    }

    #[test]
    fn decode_content_refuses_what_debezium_stops_on() {
        assert_eq!(decode_content(b"hello", false), Err(ContentError::NotJson("`h`".into())));
        assert_eq!(decode_content(b"", false), Err(ContentError::NotJson("nothing: it is empty".into())));
        assert_eq!(decode_content(b"[1,2]", false), Err(ContentError::Array));
        assert_eq!(decode_content(b"[]", false), Err(ContentError::Array));
        assert!(matches!(decode_content(b"{\"a\":", false), Err(ContentError::Unreadable(_))));
        assert!(matches!(decode_content(br#"{"a":[1,"x"]}"#, false), Err(ContentError::Unreadable(_))));
    }
}
