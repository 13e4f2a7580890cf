//! `table.expand.json.payload`: the payload column's JSON text becomes a Connect struct with an
//! inferred schema, exactly as Debezium 3.6.3 does it (`EventRouterDelegate.apply` step 8 and
//! `io.debezium.transforms.outbox.JsonSchemaData`).
//!
//! Debezium's steps, and what each one means for the record:
//! 1. Only text starting with `{` or `[` is parsed (Jackson `readTree`, see `parse`). Failure: a
//!    warning, and the column is published unchanged (string, `io.debezium.data.Json` schema).
//! 2. `toConnectSchema(<payload column name>, tree)` infers the schema. Every inferred schema is
//!    optional, except merged array elements (below).
//!    - string, boolean; an integer is `int32` if it fits, else `int64`; any other number `float64`.
//!    - an object is a struct named after its path: the root `payload`, then `payload.customer`,
//!      `payload.customer.address`; fields in document order (for `jsonb`, PostgreSQL's key order:
//!      shorter keys first). An empty key (`""`) fails the whole inference.
//!    - `null` fields are dropped, or with `table.json.payload.null.behavior=optional_bytes` typed
//!      as optional bytes. Empty arrays are dropped (3.6's only behaviour), or with Debezium 3.7's
//!      `table.json.payload.empty.array.behavior=optional_string` typed as an optional array of
//!      optional strings, at any depth (`[[]]` too), and written as `[]`.
//!    - an array's element schema comes from its first non-null element; all non-null elements must
//!      have the same JSON type and, for numbers, the same inferred schema (`[1, 2147483648]` and
//!      `[1.5, 2]` fail). A first element with no schema (an empty array, or `null` under `ignore`)
//!      fails. Nested arrays use no path: structs inside them have no name and their children are
//!      named from the bare key.
//!    - an array of objects: the distinct struct schemas of its elements (named after the array's
//!      path) are merged: fields of the first, then new fields of the next; a field seen twice keeps
//!      its first schema unless that was bytes (a null). Debezium collects the element schemas in a
//!      `HashSet`, so which element counts as "first" depends on `Schema.hashCode`, which hashes the
//!      identity hash codes of the `Schema.Type` enum constants: it varies between JVMs and is not
//!      reproducible (two Debezium 3.6.3 runs on the same row wrote `qty, sku, price` and
//!      `sku, qty, price`). pgoutbox merges in document order. A merged schema (two or more distinct
//!      element schemas) is NOT optional, because `SchemaUtil.copySchemaBasics` does not copy
//!      optionality.
//!
//!    Failure here (`ConnectException`, `SchemaBuilderException`): warning, column unchanged.
//! 3. `toConnectData(tree, schema)` builds the value: a struct gets, for each schema field the object
//!    has, the converted node; `Struct.put` validates it. Absent fields stay null (JsonConverter
//!    writes `null`, so merged array elements show every merged field).
//!
//!    Failure here comes AFTER the schema was replaced: the record carries the inferred schema with
//!    the original string, JsonConverter throws `DataException: Invalid type for STRUCT: class
//!    java.lang.String` (ARRAY for a top-level array) and the Debezium task stops. StringConverter
//!    ignores the schema and publishes the text (observed); with an `envelope` placement `Struct.put`
//!    throws whatever the converter (from the code). This happens for a non-empty top-level array,
//!    an integer beyond 64 bits (`BigDecimal` for a `float64` schema; `jsonb` prints `1e20` as
//!    `100000000000000000000`), a merged array of objects that also holds a `null` element, and
//!    merged elements whose common field has different types (`{"p": 1}` and `{"p": 1.5}`).
//!    A top-level `[]` has no schema at all: the string is published with a null schema
//!    (`{"schema":null,"payload":"[]"}`), and with an `envelope` placement the task stops.
//!
//! [`expand_json_payload`] reports the failures with their consequence; see [`ExpandError`].
//! `field.name.adjustment.mode` (`avro`, which Debezium also applies to JSON keys) is not modelled.

mod parse;

use std::borrow::Cow;

use bytes::Bytes;

use self::parse::{read_tree, Node};
use super::column::ColumnType;
use crate::connect::{Schema, Type, Value};

/// `table.json.payload.null.behavior`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum JsonNullBehavior {
    /// `ignore` (the default): JSON null fields are left out of the schema.
    #[default]
    Ignore,
    /// `optional_bytes`: JSON null fields are optional BYTES fields with a null value.
    OptionalBytes,
}

impl JsonNullBehavior {
    /// Debezium's spelling, any case, surrounding blanks ignored; `None` for anything else.
    pub fn parse(value: &str) -> Option<Self> {
        match value.trim().to_ascii_lowercase().as_str() {
            "ignore" => Some(JsonNullBehavior::Ignore),
            "optional_bytes" => Some(JsonNullBehavior::OptionalBytes),
            _ => None,
        }
    }
}

/// `table.json.payload.empty.array.behavior` (Debezium 3.7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum JsonEmptyArrayBehavior {
    /// `ignore` (the default, and Debezium 3.6's only behaviour): empty arrays are left out.
    #[default]
    Ignore,
    /// `optional_string`: an empty array is an optional array of optional strings, at any depth.
    OptionalString,
}

/// How JSON nulls and empty arrays are typed (`JsonSchemaData`'s two options).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Expansion {
    pub nulls: JsonNullBehavior,
    pub empty_arrays: JsonEmptyArrayBehavior,
}

impl From<JsonNullBehavior> for Expansion {
    fn from(nulls: JsonNullBehavior) -> Self {
        Expansion { nulls, empty_arrays: JsonEmptyArrayBehavior::Ignore }
    }
}

/// The payload after expansion: the record's new value schema and value.
#[derive(Debug, Clone, PartialEq)]
pub struct Expanded {
    pub schema: Schema,
    pub value: Value,
}

/// Why a payload was not expanded, and what Debezium 3.6.3 does with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpandError {
    /// Debezium logs "JSON expansion failed" and publishes the column unchanged.
    #[error("the payload does not start with `{{` or `[`")]
    NotJson,
    /// Debezium logs "JSON expansion failed" and publishes the column unchanged.
    #[error("the payload is not JSON that Debezium reads: {reason} at byte {offset}")]
    Syntax { offset: usize, reason: &'static str },
    /// Debezium cannot infer a schema, logs "JSON expansion failed" and publishes the column unchanged.
    #[error("{0}")]
    Uninferable(String),
    /// A top-level `[]`: Debezium publishes the string with NO value schema (JsonConverter:
    /// `{"schema":null,"payload":"[]"}` or `"[]"`), or stops the task under an `envelope` placement.
    #[error("the payload is an empty top-level array, for which Debezium infers no schema")]
    NoSchema,
    /// Debezium replaces the schema but cannot build the value; JsonConverter then throws
    /// `DataException: <debezium_error>` and the task stops (see the module doc).
    #[error("Debezium 3.6 stops on this payload ({reason}: `DataException: {debezium_error}`)")]
    StopsDebezium { reason: String, debezium_error: &'static str },
    /// Debezium would expand this, pgoutbox cannot: a field name with a lone surrogate escape.
    #[error("a field name holds a lone UTF-16 surrogate escape, which pgoutbox does not expand")]
    Unsupported,
}

impl ExpandError {
    /// True when Debezium publishes the payload column unchanged, so that doing the same is
    /// byte-identical.
    pub fn debezium_keeps_string(&self) -> bool {
        matches!(self, ExpandError::NotJson | ExpandError::Syntax { .. } | ExpandError::Uninferable(_))
    }
}

const INVALID_STRUCT: &str = "Invalid type for STRUCT: class java.lang.String";
const INVALID_ARRAY: &str = "Invalid type for ARRAY: class java.lang.String";

/// Expands the payload column's text (`payload_field` is the column's name, which names the root
/// struct: `table.field.event.payload`, `payload` by default).
pub fn expand_json_payload(
    text: &str,
    payload_field: &str,
    options: impl Into<Expansion>,
) -> Result<Expanded, ExpandError> {
    if !(text.starts_with('{') || text.starts_with('[')) {
        return Err(ExpandError::NotJson);
    }
    infer_struct(text, Some(payload_field), options.into())
}

/// `JsonSchemaData`'s `toConnectSchema(root, tree)` then `toConnectData`, for JSON text that must
/// become a struct: the root struct is named `root` (unnamed for `None`, its children then named
/// by their bare keys).
pub(crate) fn infer_struct(text: &str, root: Option<&str>, options: Expansion) -> Result<Expanded, ExpandError> {
    let tree = read_tree(text).map_err(|e| ExpandError::Syntax { offset: e.offset, reason: e.reason })?;
    let schema = Infer { options }.schema(root, &tree)?.ok_or(ExpandError::NoSchema)?;
    match &schema {
        Schema::Struct { .. } => {}
        _ => {
            return Err(ExpandError::StopsDebezium {
                reason: "a top-level JSON array cannot become a struct".into(),
                debezium_error: INVALID_ARRAY,
            })
        }
    }
    let value = build(&tree, &schema)
        .map_err(|reason| ExpandError::StopsDebezium { reason, debezium_error: INVALID_STRUCT })?;
    Ok(Expanded { schema, value })
}

/// `JsonSchemaData.toConnectSchema`.
struct Infer {
    options: Expansion,
}

impl Infer {
    /// `None` is "no schema": the field is dropped. Recursion happens here, once per nesting
    /// level, so the leaves live in a helper.
    fn schema(&self, key: Option<&str>, node: &Node<'_>) -> Result<Option<Schema>, ExpandError> {
        match node {
            Node::Array(elems) if !elems.is_empty() => {
                Ok(Some(Schema::Array { items: Box::new(self.items(key, elems)?), optional: true }))
            }
            Node::Array(_) if self.options.empty_arrays == JsonEmptyArrayBehavior::OptionalString => {
                Ok(Some(Schema::Array { items: Box::new(Schema::optional(Type::String)), optional: true }))
            }
            Node::Object(members) => {
                let fields = self.fields(key, members)?;
                Ok(Some(Schema::Struct {
                    name: key.map(str::to_string),
                    fields,
                    optional: true,
                    version: None,
                    doc: None,
                }))
            }
            _ => Ok(self.leaf(node)),
        }
    }

    #[inline(never)]
    fn leaf(&self, node: &Node<'_>) -> Option<Schema> {
        match node {
            Node::String(_) => Some(Schema::optional(Type::String)),
            Node::Bool(_) => Some(Schema::optional(Type::Boolean)),
            Node::Int(_) | Node::Long(_) | Node::BigInt | Node::Double(_) => Some(number_schema(node)),
            Node::Null => {
                (self.options.nulls == JsonNullBehavior::OptionalBytes).then(|| Schema::optional(Type::Bytes))
            }
            // An empty array has no schema; containers are handled by `schema`.
            Node::Array(_) | Node::Object(_) => None,
        }
    }

    /// The fields of the struct inferred for an object at path `key`.
    fn fields(
        &self,
        key: Option<&str>,
        fields: &[(Cow<'_, [u8]>, Node<'_>)],
    ) -> Result<Vec<(String, Schema)>, ExpandError> {
        let mut out: Vec<(String, Schema)> = Vec::with_capacity(fields.len());
        for (name, node) in fields {
            let name = std::str::from_utf8(name).map_err(|_| ExpandError::Unsupported)?;
            // Only containers name a struct after their path.
            let schema = match node {
                Node::Array(_) | Node::Object(_) => self.schema(Some(&child_key(key, name)), node)?,
                _ => self.leaf(node),
            };
            if let Some(schema) = schema {
                if name.is_empty() {
                    // SchemaBuilder.field refuses an empty name.
                    return Err(ExpandError::Uninferable("fieldName cannot be null.".into()));
                }
                out.push((name.to_string(), schema));
            }
        }
        Ok(out)
    }

    /// `toConnectSchemaWithCycles`: the element schema of a non-empty array.
    fn items(&self, key: Option<&str>, elems: &[Node<'_>]) -> Result<Schema, ExpandError> {
        let sample = first_element(elems)?;
        if matches!(sample, Node::Object(_)) {
            return self.object_items(key, elems);
        }
        match self.schema(None, sample)? {
            Some(schema) => Ok(schema),
            None => Err(unrecognized_member()),
        }
    }

    /// The element schema of an array of objects: the distinct element schemas (all named `key`)
    /// merged, first seen first (Debezium: HashSet order, see the module doc).
    #[inline(never)]
    fn object_items(&self, key: Option<&str>, elems: &[Node<'_>]) -> Result<Schema, ExpandError> {
        let mut distinct: Vec<Vec<(String, Schema)>> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for elem in elems {
            if let Node::Object(fields) = elem {
                let fields = self.fields(key, fields)?;
                if !seen.contains(&fields) {
                    seen.insert(fields.clone());
                    distinct.push(fields);
                }
            }
        }
        // One distinct schema is used as is; merging builds a new one that is NOT optional
        // (`copySchemaBasics` copies name and version only).
        let optional = distinct.len() == 1;
        let mut rest = distinct.into_iter();
        let first = rest.next().unwrap_or_default();
        let fields = rest.fold(first, merge);
        Ok(Schema::Struct { name: key.map(str::to_string), fields, optional, version: None, doc: None })
    }
}

#[cold]
fn unrecognized_member() -> ExpandError {
    ExpandError::Uninferable("Array has unrecognized member schema.".into())
}

/// The path that names a member's struct: `<key>.<name>`, or the bare name under a blank or
/// missing key (Debezium's `Strings.isNullOrBlank`; Java's `trim` removes every character up to
/// U+0020).
#[inline(never)]
fn child_key(key: Option<&str>, name: &str) -> String {
    match key {
        Some(k) if !k.trim_matches(|c: char| c <= ' ').is_empty() => format!("{k}.{name}"),
        _ => name.to_string(),
    }
}

fn number_schema(node: &Node) -> Schema {
    match node {
        Node::Int(_) => Schema::optional(Type::Int32),
        Node::Long(_) => Schema::optional(Type::Int64),
        _ => Schema::optional(Type::Float64),
    }
}

/// `getFirstArrayElement`: the first non-null element after checking that all non-null elements
/// share its JSON type (and number schema); `null` when there is none.
fn first_element<'n, 'a>(elems: &'n [Node<'a>]) -> Result<&'n Node<'a>, ExpandError> {
    let mut sample: Option<&Node<'a>> = None;
    for elem in elems.iter().filter(|e| !matches!(e, Node::Null)) {
        let first = *sample.get_or_insert(elem);
        if elem.kind() != first.kind() {
            return Err(ExpandError::Uninferable("Field is not a homogenous array.".into()));
        }
        if elem.is_number() && number_schema(elem) != number_schema(first) {
            return Err(ExpandError::Uninferable("Field is not a homogenous array, different number types.".into()));
        }
    }
    Ok(sample.unwrap_or(&Node::Null))
}

/// `mergeSchema` on struct fields: those of `left`, then the new ones of `right`; a bytes field (a
/// null) gives way to a typed one, otherwise the first schema stays.
fn merge(mut fields: Vec<(String, Schema)>, more: Vec<(String, Schema)>) -> Vec<(String, Schema)> {
    let is_bytes = |s: &Schema| matches!(s, Schema::Primitive { ty: Type::Bytes, .. });
    for (field, schema) in more {
        match fields.iter_mut().find(|(f, _)| *f == field) {
            None => fields.push((field, schema)),
            Some((_, old)) => {
                if *old != schema && is_bytes(old) && !is_bytes(&schema) {
                    *old = schema;
                }
            }
        }
    }
    fields
}

/// `toConnectData` with `Struct.put`'s validation: `Err` where Java throws. Recursion happens
/// here only, once per nesting level, so leaves and errors live in helpers.
fn build(node: &Node<'_>, schema: &Schema) -> Result<Value, String> {
    match (node, schema) {
        (Node::Array(elems), Schema::Array { items, .. }) => {
            let mut out = Vec::with_capacity(elems.len());
            for elem in elems {
                out.push(checked(build(elem, items)?, items)?);
            }
            Ok(Value::Array(out))
        }
        (Node::Object(members), Schema::Struct { fields, .. }) => {
            let mut out = Vec::with_capacity(fields.len());
            let mut cursor = 0;
            for (name, field_schema) in fields {
                out.push(match lookup(members, name.as_bytes(), &mut cursor) {
                    Some(child) => checked(build(child, field_schema)?, field_schema)?,
                    None => Value::Null,
                });
            }
            Ok(Value::Struct(out))
        }
        _ => leaf(node, schema),
    }
}

#[inline(never)]
fn leaf(node: &Node<'_>, schema: &Schema) -> Result<Value, String> {
    Ok(match (node, schema) {
        (Node::Null, _) => Value::Null,
        (Node::String(s), Schema::Primitive { ty: Type::String, .. }) => Value::String(Bytes::copy_from_slice(s)),
        (Node::Bool(b), Schema::Primitive { ty: Type::Boolean, .. }) => Value::Bool(*b),
        (Node::Int(i), Schema::Primitive { ty: Type::Int32, .. }) => Value::Int(i64::from(*i)),
        (Node::Long(i), Schema::Primitive { ty: Type::Int64, .. }) => Value::Int(*i),
        (Node::Double(f), Schema::Primitive { ty: Type::Float64, .. }) => Value::Float(*f),
        (Node::BigInt, _) => {
            return Err("an integer beyond 64 bits becomes a BigDecimal, which no schema accepts".into())
        }
        _ => return Err(format!("a JSON {} does not fit the inferred {}", node_name(node), schema_name(schema))),
    })
}

/// The member named `key`. Schema fields mostly follow the object's own order, so the search starts
/// where the previous one ended.
fn lookup<'n, 'a>(members: &'n [(Cow<'a, [u8]>, Node<'a>)], key: &[u8], cursor: &mut usize) -> Option<&'n Node<'a>> {
    let n = members.len();
    let i = (0..n).map(|k| (*cursor + k) % n).find(|&i| *members[i].0 == *key)?;
    *cursor = i + 1;
    Some(&members[i].1)
}

/// `ConnectSchema.validateValue`'s null rule.
#[inline(never)]
fn checked(value: Value, schema: &Schema) -> Result<Value, String> {
    if value == Value::Null && !schema.is_optional() {
        return Err(
            "a null element in an array of objects with differing fields (the merged element schema is required)"
                .into(),
        );
    }
    Ok(value)
}

fn node_name(node: &Node<'_>) -> &'static str {
    match node {
        Node::Null => "null",
        Node::Bool(_) => "boolean",
        Node::Int(_) | Node::Long(_) | Node::BigInt | Node::Double(_) => "number",
        Node::String(_) => "string",
        Node::Array(_) => "array",
        Node::Object(_) => "object",
    }
}

fn schema_name(schema: &Schema) -> String {
    match schema {
        Schema::Primitive { ty, .. } => format!("{ty:?}").to_lowercase(),
        Schema::Array { .. } => "array".into(),
        Schema::Struct { name, .. } => format!("struct {}", name.as_deref().unwrap_or("(unnamed)")),
    }
}

/// The payload after `table.expand.json.payload`: `(schema, value)`, the schema `None` for a
/// top-level `[]` (Debezium publishes it with no schema). Where Debezium would keep the string, or
/// where Debezium 3.6 would stop its task, pgoutbox keeps the string and says so (`event` names the
/// event in the warning).
pub fn expand_payload(
    field: &str,
    column: &ColumnType,
    payload: &Value,
    options: Expansion,
    event: &str,
) -> (Option<Schema>, Value) {
    let unexpanded = || (Some(column.schema.clone()), payload.clone());
    let Value::String(text) = payload else { return unexpanded() };
    let Ok(text) = std::str::from_utf8(text) else { return unexpanded() };
    if !(text.starts_with('{') || text.starts_with('[')) {
        return unexpanded();
    }
    match expand_json_payload(text, field, options) {
        Ok(e) => (Some(e.schema), e.value),
        Err(ExpandError::NoSchema) => (None, payload.clone()),
        Err(e) if e.debezium_keeps_string() => {
            tracing::warn!(event, reason = %e, "JSON payload not expanded; published as a string, as Debezium does");
            unexpanded()
        }
        Err(e) => {
            tracing::warn!(event, reason = %e, "JSON payload not expanded; published as a string (Debezium 3.6 stops its task on this payload)");
            unexpanded()
        }
    }
}

#[cfg(test)]
mod tests;
