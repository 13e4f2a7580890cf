//! The PostgreSQL connector options that decide how column types are written, and their parsing.

use crate::connect::{ConfigError, Reader};

/// `decimal.handling.mode`: how a `numeric` column is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DecimalHandling {
    /// A Connect Decimal for `numeric(p,s)`; Debezium's VariableScaleDecimal struct for a `numeric`
    /// without a declared precision.
    #[default]
    Precise,
    /// FLOAT64.
    Double,
    /// STRING, `BigDecimal.toPlainString`.
    String,
}

/// `binary.handling.mode`: how a `bytea` column is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BinaryHandling {
    /// BYTES.
    #[default]
    Bytes,
    /// STRING: standard base64 with padding.
    Base64,
    /// STRING: URL-safe base64 with padding.
    Base64UrlSafe,
    /// STRING: hexadecimal digits.
    Hex,
}

/// `time.precision.mode`: how `date`, `time` and `timestamp` columns are written (Debezium's
/// TemporalPrecisionMode; `timestamptz` is a ZonedTimestamp string in every mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TemporalPrecision {
    /// The column's precision decides: `timestamp(0..=3)` Timestamp (ms), else MicroTimestamp;
    /// `time(0..=3)` Time (ms), else MicroTime; `date` Date (days).
    #[default]
    Adaptive,
    /// As `adaptive`, but `time` is always MicroTime.
    AdaptiveTimeMicroseconds,
    /// MicroTimestamp and MicroTime whatever the precision.
    Microseconds,
    /// NanoTimestamp and NanoTime whatever the precision.
    Nanoseconds,
    /// Kafka Connect's logical types (Timestamp, Time, Date), milliseconds: finer digits are cut.
    Connect,
    /// ISO-8601 strings with a `Z` (IsoDate, IsoTime, IsoTimestamp).
    IsoString,
}

/// `interval.handling.mode`: how an `interval` column is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IntervalHandling {
    /// MicroDuration: INT64 microseconds, a month counted as 30.4375 days.
    #[default]
    Numeric,
    /// Interval: an ISO-8601 duration STRING, `P1Y2M3DT4H5M6.78S`.
    String,
}

/// The connector options that decide how column types are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TypeModes {
    pub decimals: DecimalHandling,
    pub binary: BinaryHandling,
    pub temporal: TemporalPrecision,
    pub intervals: IntervalHandling,
}

impl TypeModes {
    /// `decimal.handling.mode`, `binary.handling.mode`, `time.precision.mode` and
    /// `interval.handling.mode`, with Debezium's defaults.
    pub fn parse(r: &mut Reader<'_>) -> Result<TypeModes, ConfigError> {
        use BinaryHandling as B;
        use DecimalHandling as D;
        use IntervalHandling as I;
        use TemporalPrecision as T;
        Ok(TypeModes {
            decimals: r.choice(
                "decimal.handling.mode",
                D::Precise,
                &[("precise", D::Precise), ("double", D::Double), ("string", D::String)],
            )?,
            binary: r.choice(
                "binary.handling.mode",
                B::Bytes,
                &[("bytes", B::Bytes), ("base64", B::Base64), ("base64-url-safe", B::Base64UrlSafe), ("hex", B::Hex)],
            )?,
            temporal: r.choice(
                "time.precision.mode",
                T::Adaptive,
                &[
                    ("adaptive", T::Adaptive),
                    ("adaptive_time_microseconds", T::AdaptiveTimeMicroseconds),
                    ("microseconds", T::Microseconds),
                    ("nanoseconds", T::Nanoseconds),
                    ("connect", T::Connect),
                    ("isostring", T::IsoString),
                ],
            )?,
            intervals: r.choice(
                "interval.handling.mode",
                I::Numeric,
                &[("numeric", I::Numeric), ("string", I::String)],
            )?,
        })
    }
}
