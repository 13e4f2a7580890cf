//! Debezium's column mappers (`ColumnMappers`) for the router's columns.
//!
//! `column.propagate.source.type` and `datatype.propagate.source.type`: Debezium's
//! `PropagateSourceMetadataToSchemaParameter`, which adds the column's source type to its schema's
//! parameters, after the converter's own (a Decimal's `scale` and `connect.decimal.precision`):
//! `__debezium.source.column.type` (the type's name upper-cased), `__debezium.source.column.length`,
//! `__debezium.source.column.scale` and `__debezium.source.column.name`. PostgreSQL columns have no
//! comment for Debezium (it does not read them), so `__debezium.source.column.comment` never appears.
//!
//! While streaming, Debezium takes the length and scale from the pgoutput Relation message's type
//! modifier through the JDBC driver's `TypeInfoCache`: `getPrecision` and `getScale` with the
//! modifier, or, without one (-1), the type's defaults (`getPrecision`, or `getDisplaySize` where
//! the precision is 0). The column list is matched against `<schema>.<table>.<column>`, the type
//! list against `<schema>.<table>.<type name>` (lower case, as the catalog spells it), both
//! anchored and case-insensitive.
//!
//! The value mappers `column.mask.with.<n>.chars`, `column.mask.hash.<algorithm>.with.salt.<salt>`
//! (and its `.v2` form) and `column.truncate.to.<n>.chars` are not applied: a routed column one of
//! them selects stops the relay naming the key, so that a value meant to be masked never reaches
//! Kafka in the clear. Lists that select other tables' columns do not matter to the Event Router.

use regex::Regex;

use super::column::oid;
use crate::connect::{ConfigError, Reader};
use crate::pgoutput::Oid;

/// What the driver reports for a column of unbounded length (`unknownLength`).
const UNKNOWN_LENGTH: i32 = i32::MAX;

/// The propagation lists (a column matching either gets the parameters), and the value mappers
/// pgoutbox does not apply, by key.
#[derive(Debug, Clone, Default)]
pub struct ColumnMappers {
    columns: Vec<Regex>,
    datatypes: Vec<Regex>,
    unapplied: Vec<(String, Vec<Regex>)>,
}

/// Whether `key` names one of Debezium's value mappers (masking, hashing, truncation).
fn is_value_mapper(key: &str) -> bool {
    let between = |prefix: &str, suffix: &str| {
        key.strip_prefix(prefix).and_then(|rest| rest.strip_suffix(suffix)).is_some_and(|n| n.parse::<u32>().is_ok())
    };
    between("column.mask.with.", ".chars")
        || between("column.truncate.to.", ".chars")
        || key.strip_prefix("column.mask.hash.").is_some_and(|rest| rest.contains(".with.salt."))
}

impl ColumnMappers {
    pub fn parse(r: &mut Reader<'_>) -> Result<ColumnMappers, ConfigError> {
        let mut unapplied = Vec::new();
        for key in r.keys_with_prefix("column.") {
            if is_value_mapper(key) {
                unapplied.push((key.to_string(), r.regex_list(key)?));
            }
        }
        Ok(ColumnMappers {
            columns: r.regex_list("column.propagate.source.type")?,
            datatypes: r.regex_list("datatype.propagate.source.type")?,
            unapplied,
        })
    }

    /// The key of a value mapper that selects this column, which pgoutbox does not apply.
    pub fn unapplied(&self, schema: &str, table: &str, column: &str) -> Option<&str> {
        let id = format!("{schema}.{table}.{column}");
        self.unapplied.iter().find(|(_, list)| list.iter().any(|r| r.is_match(&id))).map(|(k, _)| k.as_str())
    }

    /// The parameters Debezium adds to the schema of column `column` of `schema.table`, of type
    /// `type_oid` with modifier `type_modifier`; none when neither list selects it (or its type is
    /// one pgoutbox does not route).
    pub fn parameters(
        &self,
        schema: &str,
        table: &str,
        column: &str,
        type_oid: Oid,
        type_modifier: i32,
    ) -> Option<Vec<(String, String)>> {
        if self.columns.is_empty() && self.datatypes.is_empty() {
            return None;
        }
        let (name, base) = type_name(type_oid)?;
        let by_column = || {
            let id = format!("{schema}.{table}.{column}");
            self.columns.iter().any(|r| r.is_match(&id))
        };
        let by_type = || {
            let id = format!("{schema}.{table}.{name}");
            self.datatypes.iter().any(|r| r.is_match(&id))
        };
        if !by_column() && !by_type() {
            return None;
        }
        let (length, scale) = if type_modifier == -1 {
            let precision = precision(base, -1);
            (if precision == 0 { display_size(base, -1) } else { precision }, self::scale(base, -1))
        } else {
            (precision(base, type_modifier), self::scale(base, type_modifier))
        };
        Some(vec![
            ("__debezium.source.column.type".into(), name.to_uppercase()),
            ("__debezium.source.column.length".into(), length.to_string()),
            ("__debezium.source.column.scale".into(), scale.to_string()),
            ("__debezium.source.column.name".into(), column.to_string()),
        ])
    }
}

/// The catalog's name of a type pgoutbox routes, and the element type of an array (the driver
/// sizes an array as its element).
fn type_name(type_oid: Oid) -> Option<(&'static str, Oid)> {
    let plain = |name| Some((name, type_oid));
    match type_oid {
        oid::BOOL => plain("bool"),
        oid::BYTEA => plain("bytea"),
        oid::INT8 => plain("int8"),
        oid::INT2 => plain("int2"),
        oid::INT4 => plain("int4"),
        oid::TEXT => plain("text"),
        oid::JSON => plain("json"),
        oid::XML => plain("xml"),
        oid::FLOAT4 => plain("float4"),
        oid::FLOAT8 => plain("float8"),
        oid::BPCHAR => plain("bpchar"),
        oid::VARCHAR => plain("varchar"),
        oid::DATE => plain("date"),
        oid::TIME => plain("time"),
        oid::TIMESTAMP => plain("timestamp"),
        oid::TIMESTAMPTZ => plain("timestamptz"),
        oid::INTERVAL => plain("interval"),
        oid::TIMETZ => plain("timetz"),
        oid::NUMERIC => plain("numeric"),
        oid::UUID => plain("uuid"),
        oid::JSONB => plain("jsonb"),
        1000 => Some(("_bool", oid::BOOL)),
        1005 => Some(("_int2", oid::INT2)),
        1007 => Some(("_int4", oid::INT4)),
        1009 => Some(("_text", oid::TEXT)),
        1014 => Some(("_bpchar", oid::BPCHAR)),
        1015 => Some(("_varchar", oid::VARCHAR)),
        1016 => Some(("_int8", oid::INT8)),
        1021 => Some(("_float4", oid::FLOAT4)),
        1022 => Some(("_float8", oid::FLOAT8)),
        2951 => Some(("_uuid", oid::UUID)),
        _ => None,
    }
}

/// `TypeInfoCache.getPrecision`.
fn precision(base: Oid, typmod: i32) -> i32 {
    match base {
        oid::INT2 => 5,
        oid::INT4 => 10,
        oid::INT8 => 19,
        oid::FLOAT4 => 8,
        oid::FLOAT8 => 17,
        oid::NUMERIC if typmod == -1 => 0,
        oid::NUMERIC => ((typmod - 4) as u32 & 0xFFFF_0000) as i32 >> 16,
        oid::CHAR | oid::BOOL => 1,
        oid::BPCHAR | oid::VARCHAR if typmod == -1 => UNKNOWN_LENGTH,
        oid::BPCHAR | oid::VARCHAR => typmod - 4,
        oid::DATE | oid::TIME | oid::TIMETZ | oid::INTERVAL | oid::TIMESTAMP | oid::TIMESTAMPTZ => {
            display_size(base, typmod)
        }
        _ => UNKNOWN_LENGTH,
    }
}

/// `TypeInfoCache.getScale`.
fn scale(base: Oid, typmod: i32) -> i32 {
    match base {
        oid::FLOAT4 => 8,
        oid::FLOAT8 => 17,
        oid::NUMERIC if typmod == -1 => 0,
        oid::NUMERIC => (typmod - 4) & 0xFFFF,
        oid::TIME | oid::TIMETZ | oid::TIMESTAMP | oid::TIMESTAMPTZ if typmod == -1 => 6,
        oid::TIME | oid::TIMETZ | oid::TIMESTAMP | oid::TIMESTAMPTZ => typmod,
        oid::INTERVAL if typmod == -1 => 6,
        oid::INTERVAL => typmod & 0xFFFF,
        _ => 0,
    }
}

/// `TypeInfoCache.getDisplaySize`, for the types whose precision is their display size (and a
/// `numeric` without a declared precision).
fn display_size(base: Oid, typmod: i32) -> i32 {
    let seconds = match typmod {
        -1 => 7,
        0 => 0,
        // The driver's own comment: `SELECT '0:0:0.1'::time(1)` returns 2 digits.
        1 => 3,
        t => t + 1,
    };
    match base {
        oid::DATE => 13,
        oid::TIME => 8 + seconds,
        oid::TIMETZ => 8 + seconds + 6,
        oid::TIMESTAMP => 13 + 1 + 8 + seconds,
        oid::TIMESTAMPTZ => 13 + 1 + 8 + seconds + 6,
        oid::INTERVAL => 49,
        oid::NUMERIC if typmod == -1 => 131_089,
        oid::NUMERIC => {
            let precision = ((typmod - 4) >> 16) & 0xFFFF;
            let scale = (typmod - 4) & 0xFFFF;
            1 + precision + i32::from(scale != 0)
        }
        _ => UNKNOWN_LENGTH,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all() -> ColumnMappers {
        ColumnMappers {
            columns: vec![Regex::new("(?i)^(?:.*)$").unwrap()],
            datatypes: Vec::new(),
            unapplied: Vec::new(),
        }
    }

    fn of(type_oid: Oid, typmod: i32) -> (String, String, String) {
        let p = all().parameters("public", "outbox", "c", type_oid, typmod).unwrap();
        (p[0].1.clone(), p[1].1.clone(), p[2].1.clone())
    }

    fn t(ty: &str, length: i32, scale: i32) -> (String, String, String) {
        (ty.to_string(), length.to_string(), scale.to_string())
    }

    /// The values Debezium's tests and the driver's code give (see the module's documentation).
    #[test]
    fn lengths_and_scales_are_the_drivers() {
        assert_eq!(of(oid::TEXT, -1), t("TEXT", i32::MAX, 0));
        assert_eq!(of(oid::VARCHAR, 259), t("VARCHAR", 255, 0));
        assert_eq!(of(oid::VARCHAR, -1), t("VARCHAR", i32::MAX, 0));
        assert_eq!(of(oid::BPCHAR, 8), t("BPCHAR", 4, 0));
        assert_eq!(of(oid::INT2, -1), t("INT2", 5, 0));
        assert_eq!(of(oid::INT4, -1), t("INT4", 10, 0));
        assert_eq!(of(oid::INT8, -1), t("INT8", 19, 0));
        assert_eq!(of(oid::NUMERIC, (10 << 16) + 2 + 4), t("NUMERIC", 10, 2));
        assert_eq!(of(oid::NUMERIC, -1), t("NUMERIC", 131_089, 0));
        assert_eq!(of(oid::FLOAT4, -1), t("FLOAT4", 8, 8));
        assert_eq!(of(oid::FLOAT8, -1), t("FLOAT8", 17, 17));
        assert_eq!(of(oid::BOOL, -1), t("BOOL", 1, 0));
        assert_eq!(of(oid::JSONB, -1), t("JSONB", i32::MAX, 0));
        assert_eq!(of(oid::DATE, -1), t("DATE", 13, 0));
        assert_eq!(of(oid::TIME, -1), t("TIME", 15, 6));
        assert_eq!(of(oid::TIME, 3), t("TIME", 12, 3));
        assert_eq!(of(oid::TIMESTAMP, -1), t("TIMESTAMP", 29, 6));
        assert_eq!(of(oid::TIMESTAMP, 3), t("TIMESTAMP", 26, 3));
        assert_eq!(of(oid::TIMESTAMPTZ, -1), t("TIMESTAMPTZ", 35, 6));
        assert_eq!(of(oid::INTERVAL, -1), t("INTERVAL", 49, 6));
        assert_eq!(of(1009, -1), t("_TEXT", i32::MAX, 0));
    }

    #[test]
    fn value_mappers_are_recognised_by_their_key() {
        assert!(is_value_mapper("column.mask.with.12.chars"));
        assert!(is_value_mapper("column.truncate.to.20.chars"));
        assert!(is_value_mapper("column.mask.hash.SHA-256.with.salt.CzQMA0cB5K"));
        assert!(is_value_mapper("column.mask.hash.v2.SHA-256.with.salt.CzQMA0cB5K"));
        assert!(!is_value_mapper("column.mask.with.x.chars"));
        assert!(!is_value_mapper("column.propagate.source.type"));
        assert!(!is_value_mapper("column.include.list"));
    }

    #[test]
    fn columns_and_types_are_matched_by_qualified_name() {
        let p = |columns: &str, types: &str| ColumnMappers {
            unapplied: Vec::new(),
            columns: columns
                .split(',')
                .filter(|s| !s.is_empty())
                .map(|c| Regex::new(&format!("(?i)^(?:{c})$")).unwrap())
                .collect(),
            datatypes: types
                .split(',')
                .filter(|s| !s.is_empty())
                .map(|c| Regex::new(&format!("(?i)^(?:{c})$")).unwrap())
                .collect(),
        };
        let hit = |s: &ColumnMappers, col: &str, ty: Oid| s.parameters("public", "outbox", col, ty, -1).is_some();
        assert!(hit(&p("public.outbox.payload", ""), "payload", oid::JSONB));
        assert!(hit(&p("PUBLIC.OUTBOX.PAYLOAD", ""), "payload", oid::JSONB));
        assert!(!hit(&p("payload", ""), "payload", oid::JSONB), "anchored: the bare column name is not enough");
        assert!(hit(&p("", r".+\.JSONB"), "payload", oid::JSONB));
        assert!(!hit(&p("", "JSONB"), "payload", oid::JSONB));
        assert!(!hit(&p("", ""), "payload", oid::JSONB));
        let name = p("public.outbox.payload", "").parameters("public", "outbox", "payload", oid::JSONB, -1).unwrap();
        assert_eq!(name[3], ("__debezium.source.column.name".to_string(), "payload".to_string()));
    }
}
