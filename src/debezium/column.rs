//! The Connect schema Debezium's PostgreSQL connector gives a column (`PostgresValueConverter`'s
//! `schemaBuilder`), and how that column's pgoutput text becomes the value ([`TextForm`]).

use crate::connect::{Schema, Type};
use crate::pgoutput::Oid;

use super::modes::{BinaryHandling, DecimalHandling, IntervalHandling, TemporalPrecision, TypeModes};

pub mod oid {
    use crate::pgoutput::Oid;
    pub const BOOL: Oid = 16;
    pub const BYTEA: Oid = 17;
    pub const CHAR: Oid = 18;
    pub const NAME: Oid = 19;
    pub const INT8: Oid = 20;
    pub const INT2: Oid = 21;
    pub const INT4: Oid = 23;
    pub const TEXT: Oid = 25;
    pub const FLOAT4: Oid = 700;
    pub const FLOAT8: Oid = 701;
    pub const NUMERIC: Oid = 1700;
    pub const JSON: Oid = 114;
    pub const XML: Oid = 142;
    pub const BPCHAR: Oid = 1042;
    pub const VARCHAR: Oid = 1043;
    pub const UUID: Oid = 2950;
    pub const JSONB: Oid = 3802;
    pub const DATE: Oid = 1082;
    pub const TIME: Oid = 1083;
    pub const TIMESTAMP: Oid = 1114;
    pub const TIMESTAMPTZ: Oid = 1184;
    pub const TIMETZ: Oid = 1266;
    pub const INTERVAL: Oid = 1186;
}

// Debezium's and Connect's semantic type names.
pub const TIMESTAMP_MILLIS: &str = "io.debezium.time.Timestamp";
pub const TIMESTAMP_MICROS: &str = "io.debezium.time.MicroTimestamp";
pub const TIMESTAMP_NANOS: &str = "io.debezium.time.NanoTimestamp";
pub const ZONED_TIMESTAMP: &str = "io.debezium.time.ZonedTimestamp";
pub const ZONED_TIME: &str = "io.debezium.time.ZonedTime";
pub const MICRO_DURATION: &str = "io.debezium.time.MicroDuration";
pub const INTERVAL_TEXT: &str = "io.debezium.time.Interval";
pub const DATE_DAYS: &str = "io.debezium.time.Date";
pub const TIME_MILLIS: &str = "io.debezium.time.Time";
pub const TIME_MICROS: &str = "io.debezium.time.MicroTime";
pub const TIME_NANOS: &str = "io.debezium.time.NanoTime";
pub const CONNECT_TIMESTAMP: &str = "org.apache.kafka.connect.data.Timestamp";
pub const CONNECT_TIME: &str = "org.apache.kafka.connect.data.Time";
pub const CONNECT_DATE: &str = "org.apache.kafka.connect.data.Date";
pub const ISO_DATE: &str = "io.debezium.time.IsoDate";
pub const ISO_TIME: &str = "io.debezium.time.IsoTime";
pub const ISO_TIMESTAMP: &str = "io.debezium.time.IsoTimestamp";
pub const DECIMAL: &str = "org.apache.kafka.connect.data.Decimal";
pub const VARIABLE_SCALE_DECIMAL: &str = "io.debezium.data.VariableScaleDecimal";
pub const JSON: &str = "io.debezium.data.Json";
pub const UUID: &str = "io.debezium.data.Uuid";
pub const XML: &str = "io.debezium.data.Xml";

/// A unit of time since the epoch or past midnight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Millis,
    Micros,
    Nanos,
}

/// How a column's pgoutput text becomes its Connect value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextForm {
    /// The text read as the primitive type (text, integers, floats, booleans, bytea's hex).
    Plain(Type),
    /// A `timestamp` as a count of `Unit`s since the epoch.
    Timestamp(Unit),
    /// A `time` as a count of `Unit`s past midnight.
    Time(Unit),
    /// A `date` as days since the epoch.
    Date,
    /// Connect's Timestamp, Time and Date logical types (`java.util.Date` values).
    JavaTimestamp,
    JavaTime,
    JavaDate,
    /// A ZonedTimestamp with this many fraction digits: the column's precision (6 when it has none);
    /// 0 writes them only when not zero.
    Zoned(u8),
    /// A ZonedTime (a `timetz`).
    ZonedTime,
    /// A Connect Decimal (a `numeric(p,s)` column) of this scale.
    Decimal {
        scale: u16,
    },
    /// Debezium's VariableScaleDecimal struct (a `numeric` without a declared precision).
    VariableDecimal,
    /// A `numeric` written as a STRING (`decimal.handling.mode=string`): `BigDecimal.toPlainString`.
    DecimalText,
    /// A `bytea` written as a STRING (`binary.handling.mode` other than `bytes`), in this encoding.
    ByteaText(BinaryHandling),
    /// `time.precision.mode=isostring`: IsoDate, IsoTime, IsoTimestamp.
    IsoDate,
    IsoTime,
    IsoTimestamp,
    /// An `interval` as MicroDuration (INT64 microseconds).
    MicroDuration,
    /// An `interval` written as an ISO-8601 duration STRING (`interval.handling.mode=string`).
    IntervalText,
    /// A one-dimensional array column of elements of this type (elements are optional).
    Array(Type),
}

/// A column as Debezium types it: its Connect schema, and how its text is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnType {
    pub schema: Schema,
    pub form: TextForm,
}

impl ColumnType {
    fn plain(ty: Type, optional: bool) -> ColumnType {
        ColumnType { schema: Schema::primitive(ty, optional), form: TextForm::Plain(ty) }
    }

    fn named(ty: Type, optional: bool, name: &str, form: TextForm) -> ColumnType {
        ColumnType { schema: Schema::named(ty, optional, name), form }
    }

    /// Debezium's type of a column of this type (and type modifier: a timestamp's precision, a
    /// numeric's precision and scale), or `None` for types pgoutbox cannot route yet.
    pub fn of(type_oid: Oid, type_modifier: i32, optional: bool, modes: TypeModes) -> Option<ColumnType> {
        if type_oid == oid::BYTEA && modes.binary != BinaryHandling::Bytes {
            let schema = Schema::primitive(Type::String, optional);
            return Some(ColumnType { schema, form: TextForm::ByteaText(modes.binary) });
        }
        match (type_oid, modes.decimals) {
            (oid::NUMERIC, DecimalHandling::Double) => return Some(ColumnType::plain(Type::Float64, optional)),
            (oid::NUMERIC, DecimalHandling::String) => {
                let schema = Schema::primitive(Type::String, optional);
                return Some(ColumnType { schema, form: TextForm::DecimalText });
            }
            _ => {}
        }
        match type_oid {
            oid::DATE | oid::TIME | oid::TIMESTAMP => Some(temporal(type_oid, type_modifier, optional, modes.temporal)),
            oid::TIMESTAMPTZ => {
                let digits = u8::try_from(type_modifier).ok().filter(|d| *d <= 6).unwrap_or(6);
                Some(ColumnType::named(Type::String, optional, ZONED_TIMESTAMP, TextForm::Zoned(digits)))
            }
            oid::TIMETZ => Some(ColumnType::named(Type::String, optional, ZONED_TIME, TextForm::ZonedTime)),
            oid::INTERVAL => Some(match modes.intervals {
                IntervalHandling::Numeric => {
                    ColumnType::named(Type::Int64, optional, MICRO_DURATION, TextForm::MicroDuration)
                }
                IntervalHandling::String => {
                    ColumnType::named(Type::String, optional, INTERVAL_TEXT, TextForm::IntervalText)
                }
            }),
            oid::NUMERIC => numeric(type_modifier, optional),
            _ => match array_element(type_oid) {
                Some(elem) => {
                    let items = ColumnType::of(elem, -1, true, TypeModes::default())?;
                    let TextForm::Plain(ty) = items.form else { return None };
                    let schema = Schema::Array { items: Box::new(items.schema), optional };
                    Some(ColumnType { schema, form: TextForm::Array(ty) })
                }
                None => scalar(type_oid, optional),
            },
        }
    }
}

/// With Debezium's default decimal.handling.mode=precise: a numeric without a declared precision
/// is a VariableScaleDecimal struct, numeric(p,s) a Connect Decimal.
fn numeric(type_modifier: i32, optional: bool) -> Option<ColumnType> {
    let Some(typmod) = type_modifier.checked_sub(4).filter(|t| *t >= 0) else {
        let required = |ty| Schema::primitive(ty, false);
        let schema = Schema::Struct {
            name: Some(VARIABLE_SCALE_DECIMAL.to_string()),
            fields: vec![("scale".into(), required(Type::Int32)), ("value".into(), required(Type::Bytes))],
            optional,
            version: Some(1),
            doc: Some("Variable scaled decimal".into()),
        };
        return Some(ColumnType { schema, form: TextForm::VariableDecimal });
    };
    let (precision, scale) = ((typmod >> 16) & 0xFFFF, typmod & 0xFFFF);
    // PostgreSQL 15 allows a negative scale (stored as 11 bits); Debezium's handling of it is not
    // known here: not routed.
    if scale > 1000 {
        return None;
    }
    let schema = Schema::Primitive {
        ty: Type::Bytes,
        optional,
        name: Some(DECIMAL.to_string()),
        version: Some(1),
        parameters: vec![
            ("scale".to_string(), scale.to_string()),
            ("connect.decimal.precision".to_string(), precision.to_string()),
        ],
        default: None,
    };
    Some(ColumnType { schema, form: TextForm::Decimal { scale: u16::try_from(scale).ok()? } })
}

/// A `date`, `time` or `timestamp` column under `time.precision.mode` (the type modifier is the
/// column's precision, -1 without one: 6).
fn temporal(type_oid: Oid, type_modifier: i32, optional: bool, mode: TemporalPrecision) -> ColumnType {
    use TemporalPrecision as M;
    use TextForm as F;
    use Unit::{Micros, Millis, Nanos};
    let millis = (0..=3).contains(&type_modifier);
    let (ty, name, form) = match (type_oid, mode) {
        (oid::DATE, M::IsoString) => (Type::String, ISO_DATE, F::IsoDate),
        (oid::TIME, M::IsoString) => (Type::String, ISO_TIME, F::IsoTime),
        (_, M::IsoString) => (Type::String, ISO_TIMESTAMP, F::IsoTimestamp),
        (oid::DATE, M::Connect) => (Type::Int32, CONNECT_DATE, F::JavaDate),
        (oid::DATE, _) => (Type::Int32, DATE_DAYS, F::Date),
        (oid::TIME, M::Adaptive) if millis => (Type::Int32, TIME_MILLIS, F::Time(Millis)),
        (oid::TIME, M::Adaptive | M::AdaptiveTimeMicroseconds | M::Microseconds) => {
            (Type::Int64, TIME_MICROS, F::Time(Micros))
        }
        (oid::TIME, M::Nanoseconds) => (Type::Int64, TIME_NANOS, F::Time(Nanos)),
        (oid::TIME, M::Connect) => (Type::Int32, CONNECT_TIME, F::JavaTime),
        (_, M::Adaptive | M::AdaptiveTimeMicroseconds) if millis => {
            (Type::Int64, TIMESTAMP_MILLIS, F::Timestamp(Millis))
        }
        (_, M::Adaptive | M::AdaptiveTimeMicroseconds | M::Microseconds) => {
            (Type::Int64, TIMESTAMP_MICROS, F::Timestamp(Micros))
        }
        (_, M::Nanoseconds) => (Type::Int64, TIMESTAMP_NANOS, F::Timestamp(Nanos)),
        (_, M::Connect) => (Type::Int64, CONNECT_TIMESTAMP, F::JavaTimestamp),
    };
    ColumnType::named(ty, optional, name, form)
}

/// The types whose schema depends on nothing but the type.
fn scalar(type_oid: Oid, optional: bool) -> Option<ColumnType> {
    let plain = |ty| Some(ColumnType::plain(ty, optional));
    let named = |name| Some(ColumnType::named(Type::String, optional, name, TextForm::Plain(Type::String)));
    match type_oid {
        oid::BOOL => plain(Type::Boolean),
        oid::BYTEA => plain(Type::Bytes),
        oid::INT2 => plain(Type::Int16),
        oid::INT4 => plain(Type::Int32),
        oid::INT8 => plain(Type::Int64),
        oid::FLOAT4 => plain(Type::Float32),
        oid::FLOAT8 => plain(Type::Float64),
        oid::TEXT | oid::VARCHAR | oid::BPCHAR | oid::NAME | oid::CHAR => plain(Type::String),
        oid::JSON | oid::JSONB => named(JSON),
        oid::UUID => named(UUID),
        oid::XML => named(XML),
        _ => None,
    }
}

/// The element type of the one-dimensional array types pgoutbox routes.
fn array_element(type_oid: Oid) -> Option<Oid> {
    Some(match type_oid {
        1000 => oid::BOOL,
        1005 => oid::INT2,
        1007 => oid::INT4,
        1016 => oid::INT8,
        1009 => oid::TEXT,
        1015 => oid::VARCHAR,
        1014 => oid::BPCHAR,
        1021 => oid::FLOAT4,
        1022 => oid::FLOAT8,
        2951 => oid::UUID,
        _ => return None,
    })
}
