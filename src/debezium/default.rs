//! A column's `DEFAULT` as Debezium's PostgreSQL connector reads it into the column's schema
//! (`PostgresDefaultValueConverter`): the catalog's expression (`pg_get_expr`, what JDBC's
//! `COLUMN_DEF` gives) reduced to a literal, or to a placeholder when a function computes it
//! (`now()`, `gen_random_uuid()`, `nextval(...)`), then converted as the column's values are.
//!
//! The default matters twice: JsonConverter writes it into the field's schema (`"default":…`), and
//! Connect's `Struct.get` hands it out for a NULL, so the Event Router publishes a NULL key, payload
//! or placed column as that default.
//!
//! Debezium gives no default (and logs a warning) for a type it has no reader for (`timetz`,
//! `bytea`, arrays, `"char"`, `name`), for an expression it cannot reduce (`1 + 2`), and for a value
//! that converts to a struct (a `numeric` without a declared scale). So does pgoutbox.

use std::sync::LazyLock;

use bytes::Bytes;
use regex::Regex;

use super::column::{oid, ColumnType, TextForm};
use crate::connect::Value;
use crate::pgoutput::Oid;

/// The first single-quoted literal, `''` inside it standing for a quote.
static LITERAL: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"'([^']*(?:''[^']*)*)'").expect("literal pattern"));
/// An expression that starts with a function call, possibly in parentheses.
static FUNCTION: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[(]?[A-Za-z0-9_.]+\((?:.+(?:, ?.+)*)?\)").expect("function pattern"));
const CURRENT_DATE_TIMES: [&str; 5] =
    ["current_timestamp", "current_time", "current_date", "localtime", "localtimestamp"];

/// How Debezium reads a default of one type: the placeholder for a computed one, whether the
/// expression is trimmed first and whether `NULL::…` means none (its `parseNullDefault`).
struct Reader {
    placeholder: &'static str,
    trim: bool,
    null_aware: bool,
}

fn reader(type_oid: Oid) -> Option<Reader> {
    let r = |placeholder, trim, null_aware| Some(Reader { placeholder, trim, null_aware });
    match type_oid {
        oid::BOOL => r("false", true, true),
        oid::BPCHAR | oid::VARCHAR | oid::TEXT | oid::XML => r("", false, false),
        oid::JSON | oid::JSONB => r("{}", false, false),
        oid::NUMERIC | oid::FLOAT4 | oid::FLOAT8 => r("0.0", true, true),
        oid::INT2 | oid::INT4 | oid::INT8 => r("0", true, true),
        oid::UUID => r("00000000-0000-0000-0000-000000000000", true, false),
        // Debezium's placeholders `1970-01-01` and `00:00`, written as PostgreSQL prints them.
        oid::DATE => r("1970-01-01", true, false),
        oid::TIME => r("00:00:00", true, false),
        oid::TIMESTAMP => r("1970-01-01 00:00:00", true, false),
        oid::TIMESTAMPTZ => r("1970-01-01 00:00:00+00", true, false),
        // `new PGInterval("epoch")` reads no interval: a computed default gives none.
        oid::INTERVAL => r("epoch", true, false),
        _ => None,
    }
}

/// The literal text Debezium reads from `expression` (its `extractDefault`), `None` for none.
fn literal(expression: &str, placeholder: &str) -> Option<String> {
    if FUNCTION.is_match(expression) || CURRENT_DATE_TIMES.contains(&expression.to_lowercase().as_str()) {
        return Some(placeholder.to_string());
    }
    if !expression.contains('\'') {
        return (!expression.starts_with("NULL::")).then(|| expression.to_string());
    }
    LITERAL.captures(expression).map(|c| c[1].replace("''", "'"))
}

/// The default value Debezium puts in the schema of a column of this type, whose catalog default is
/// `expression`; `None` when it puts none.
pub fn column_default(type_oid: Oid, expression: &str, column: &ColumnType) -> Option<Value> {
    let reader = reader(type_oid)?;
    let expression = if reader.trim { expression.trim() } else { expression };
    if reader.null_aware && expression.starts_with("NULL::") {
        return None;
    }
    let text = literal(expression, reader.placeholder)?;
    let text = match (type_oid, column.form) {
        // `Boolean.parseBoolean`: `true` in any case, anything else false.
        (oid::BOOL, _) => (if text.eq_ignore_ascii_case("true") { "t" } else { "f" }).to_string(),
        // `BigDecimal.setScale` up to the column's scale (never down).
        (oid::NUMERIC, TextForm::Decimal { scale }) => widen_scale(&text, usize::from(scale)),
        _ => text,
    };
    match column.parse(&Bytes::from(text))? {
        // KAFKA-12694: Debezium leaves a struct default out.
        Value::Struct(_) | Value::Null => None,
        v => Some(v),
    }
}

/// `text` with zeros appended to `scale` fraction digits when it has fewer.
fn widen_scale(text: &str, scale: usize) -> String {
    let fraction = text.split_once('.').map_or(0, |(_, f)| f.len());
    match (fraction, scale) {
        (f, s) if f >= s => text.to_string(),
        (0, s) => format!("{text}.{}", "0".repeat(s)),
        (f, s) => format!("{text}{}", "0".repeat(s - f)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::debezium::TypeModes;

    fn default_of(type_oid: Oid, type_modifier: i32, expression: &str) -> Option<Value> {
        let column = ColumnType::of(type_oid, type_modifier, true, TypeModes::default()).expect("routable type");
        column_default(type_oid, expression, &column)
    }

    fn text(v: &str) -> Option<Value> {
        Some(Value::String(Bytes::copy_from_slice(v.as_bytes())))
    }

    #[test]
    fn literals_are_read_as_debezium_reads_them() {
        assert_eq!(default_of(oid::VARCHAR, -1, "'new'::character varying"), text("new"));
        assert_eq!(default_of(oid::TEXT, -1, "'it''s'::text"), text("it's"));
        assert_eq!(default_of(oid::JSONB, -1, r#"'{"a": 1}'::jsonb"#), text(r#"{"a": 1}"#));
        assert_eq!(default_of(oid::INT4, -1, "1"), Some(Value::Int(1)));
        assert_eq!(default_of(oid::INT8, -1, "'-9223372036854775807'::bigint"), Some(Value::Int(-9223372036854775807)));
        assert_eq!(default_of(oid::BOOL, -1, "true"), Some(Value::Bool(true)));
        assert_eq!(default_of(oid::BOOL, -1, "false"), Some(Value::Bool(false)));
        assert_eq!(default_of(oid::FLOAT8, -1, "1.5"), Some(Value::Float(1.5)));
        assert_eq!(default_of(oid::INTERVAL, -1, "'1 day 02:00:00'::interval"), Some(Value::Int(93_600_000_000)));
        // numeric(10,2): the scale widened to the column's.
        let Some(Value::Decimal { text, .. }) = default_of(oid::NUMERIC, (10 << 16) + 2 + 4, "9.9") else { panic!() };
        assert_eq!(&text[..], b"9.90");
    }

    #[test]
    fn computed_defaults_get_debeziums_placeholders() {
        assert_eq!(default_of(oid::UUID, -1, "gen_random_uuid()"), text("00000000-0000-0000-0000-000000000000"));
        assert_eq!(default_of(oid::INT8, -1, "nextval('outbox_seq'::regclass)"), Some(Value::Int(0)));
        assert_eq!(default_of(oid::TEXT, -1, "(gen_random_uuid())::text"), text(""));
        assert_eq!(default_of(oid::TIMESTAMPTZ, -1, "now()"), text("1970-01-01T00:00:00.000000Z"));
        assert_eq!(default_of(oid::TIMESTAMPTZ, -1, "CURRENT_TIMESTAMP"), text("1970-01-01T00:00:00.000000Z"));
        assert_eq!(default_of(oid::TIMESTAMP, 6, "(now() AT TIME ZONE 'utc'::text)"), Some(Value::Int(0)));
    }

    #[test]
    fn no_default_where_debezium_gives_none() {
        assert_eq!(default_of(oid::VARCHAR, -1, "NULL::character varying"), None);
        assert_eq!(default_of(oid::INT4, -1, "NULL::integer"), None);
        assert_eq!(default_of(oid::INT4, -1, "(1 + 2)"), None);
        assert_eq!(default_of(oid::BYTEA, -1, r"'\x00'::bytea"), None);
        assert_eq!(default_of(oid::INTERVAL, -1, "(now() - now())"), None);
        // numeric without a scale: a VariableScaleDecimal struct.
        assert_eq!(default_of(oid::NUMERIC, -1, "1.5"), None);
    }
}
