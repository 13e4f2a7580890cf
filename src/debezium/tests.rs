use bytes::Bytes;

use super::array::parse as pg_array;
use super::column::*;
use super::interval::parse as interval;
use super::temporal::*;
use super::{TemporalPrecision, TypeModes};
use crate::connect::java::date::{civil_from_days, days_from_civil, java_date_to_string, java_date_values_string};
use crate::connect::java::decimal::decimal;
use crate::connect::{Schema, Type, Value};
use crate::pgoutput::Oid;

fn schema_for_column(type_oid: Oid, modifier: i32, optional: bool, modes: TypeModes) -> Option<ColumnType> {
    ColumnType::of(type_oid, modifier, optional, modes)
}

fn parse_value(c: &ColumnType, text: &Bytes) -> Option<Value> {
    c.parse(text)
}

fn name(c: &ColumnType) -> Option<&str> {
    c.schema.name()
}

#[test]
fn schema_for_maps_debezium_semantic_types() {
    let d = TypeModes::default();
    let s = ColumnType::of(oid::UUID, -1, false, d).unwrap();
    assert_eq!(s.schema, Schema::named(Type::String, false, "io.debezium.data.Uuid"));
    let s = ColumnType::of(oid::JSONB, -1, true, d).unwrap();
    assert_eq!(s.schema, Schema::named(Type::String, true, "io.debezium.data.Json"));
    assert_eq!(ColumnType::of(oid::VARCHAR, -1, false, d).unwrap().schema, Schema::primitive(Type::String, false));
    assert!(ColumnType::of(1184 + 1 /* not routed */, -1, true, d).is_none());
}

#[test]
fn timestamps_follow_debezium_adaptive_precision() {
    assert_eq!(timestamp_micros("1970-01-01 00:00:00"), Some(0));
    assert_eq!(timestamp_micros("2026-11-29 23:59:59.123456"), Some(1_795_996_799_123_456));
    assert_eq!(timestamp_micros("1969-12-31 23:59:59.5"), Some(-500_000));
    assert_eq!(timestamp_micros("2000-02-29 12:00:00.001"), Some(951_825_600_001_000));
    assert_eq!(date_days("1970-01-02"), Some(1));
    assert_eq!(date_days("0001-01-01 BC"), Some(days_from_civil(0, 1, 1)));
    assert_eq!(timestamp_micros("nonsense"), None);
    let ms = schema_for_column(oid::TIMESTAMP, 3, true, TypeModes::default()).unwrap();
    assert_eq!(name(&ms), Some(TIMESTAMP_MILLIS));
    assert_eq!(parse_value(&ms, &Bytes::from_static(b"1970-01-01 00:00:01.234")), Some(Value::Int(1234)));
    assert_eq!(
        name(&schema_for_column(oid::TIMESTAMP, -1, true, TypeModes::default()).unwrap()),
        Some(TIMESTAMP_MICROS)
    );
    assert_eq!(
        name(&schema_for_column(oid::TIMESTAMPTZ, -1, true, TypeModes::default()).unwrap()),
        Some(ZONED_TIMESTAMP)
    );
}

#[test]
fn timestamptz_becomes_utc_iso_8601_like_debezium() {
    for (text, want) in [
        ("2024-02-29 12:34:56.789+02", "2024-02-29T10:34:56.789Z"),
        ("2024-02-29 12:34:56+02", "2024-02-29T10:34:56Z"),
        ("2024-01-01 00:00:00+00", "2024-01-01T00:00:00Z"),
        ("2024-01-01 00:00:00.1+00", "2024-01-01T00:00:00.1Z"),
        ("1999-12-31 23:59:59.999999-05:30", "2000-01-01T05:29:59.999999Z"),
        ("2000-01-01 00:30:00+01", "1999-12-31T23:30:00Z"),
        ("1900-01-01 00:00:00+00:09:21", "1899-12-31T23:50:39Z"),
        ("1970-01-01 00:00:00+00", "1970-01-01T00:00:00Z"),
        ("0044-03-15 12:00:00+00 BC", "-0043-03-15T12:00:00Z"),
        ("0001-01-01 00:00:00+00 BC", "0000-01-01T00:00:00Z"),
        ("10000-01-01 00:00:00+00", "+10000-01-01T00:00:00Z"),
    ] {
        assert_eq!(zoned_timestamp(text, 0).as_deref(), Some(want), "{text}");
    }
    for text in ["infinity", "-infinity", "2024-01-01 00:00:00", "2024-01-01 00:00:00+1", "x"] {
        assert_eq!(zoned_timestamp(text, 6), None, "{text}");
    }
    // The column's precision fixes the digits (6 without one), as Debezium 3.6.3 writes them.
    let value = |typmod: i32, t: &'static str| {
        let schema = schema_for_column(oid::TIMESTAMPTZ, typmod, true, TypeModes::default()).unwrap();
        parse_value(&schema, &Bytes::from_static(t.as_bytes()))
    };
    let string = |s: &'static str| Some(Value::String(Bytes::from(s)));
    assert_eq!(value(-1, "2024-02-29 12:34:56.789+02"), string("2024-02-29T10:34:56.789000Z"));
    assert_eq!(value(-1, "2024-01-01 00:00:00+00"), string("2024-01-01T00:00:00.000000Z"));
    assert_eq!(value(3, "2024-01-01 00:00:00.1+00"), string("2024-01-01T00:00:00.100Z"));
    assert_eq!(value(0, "2024-01-01 00:00:01+00"), string("2024-01-01T00:00:01Z"));
    assert_eq!(value(-1, "infinity"), string("infinity"));
}

#[test]
fn numerics_become_java_big_decimals() {
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    for (text, scale, bytes, java) in [
        // Seen from Debezium 3.6.3 (base64 BNI=, +w==, AlQL4/8=, AA==).
        ("12.34", 2, "04d2", "12.34"),
        ("-0.05", 2, "fb", "-0.05"),
        ("99999999.99", 2, "02540be3ff", "99999999.99"),
        ("0.00", 2, "00", "0.00"),
        // BigInteger.toByteArray at the sign boundaries.
        ("127", 0, "7f", "127"),
        ("128", 0, "0080", "128"),
        ("-128", 0, "80", "-128"),
        ("-129", 0, "ff7f", "-129"),
        ("-256", 0, "ff00", "-256"),
        ("-32768", 0, "8000", "-32768"),
        ("12345678901234567890123456789", 0, "27e41b3246bec9b16e398115", "12345678901234567890123456789"),
        // BigDecimal.toString goes scientific below an adjusted exponent of -6.
        ("0.000001", 6, "01", "0.000001"),
        ("0.0000001", 7, "01", "1E-7"),
        ("-0.00000010", 8, "f6", "-1.0E-7"),
        ("0.00000000", 8, "00", "0E-8"),
    ] {
        let (b, t) = decimal(text, Some(scale)).unwrap_or_else(|| panic!("{text}"));
        assert_eq!((hex(&b), t.as_str()), (bytes.to_string(), java), "{text}");
    }
    assert_eq!(decimal("NaN", Some(2)), None);
    assert_eq!(decimal("1.5", Some(2)), None);
    assert_eq!(decimal("0.0000000001", None).map(|d| d.1).as_deref(), Some("1E-10"));
    let schema = schema_for_column(oid::NUMERIC, ((10 << 16) | 2) + 4, false, TypeModes::default()).unwrap();
    assert_eq!((name(&schema), schema.form), (Some(DECIMAL), TextForm::Decimal { scale: 2 }));
    let crate::connect::Schema::Primitive { parameters, .. } = &schema.schema else { panic!() };
    assert_eq!(parameters, &[("scale".into(), "2".into()), ("connect.decimal.precision".into(), "10".into())]);
    let variable = schema_for_column(oid::NUMERIC, -1, false, TypeModes::default()).unwrap();
    assert_eq!(name(&variable), Some(VARIABLE_SCALE_DECIMAL));
    assert_eq!(
        parse_value(&variable, &Bytes::from_static(b"-0.050")),
        Some(Value::Struct(vec![
            Value::Int(3),
            Value::Decimal { unscaled: Bytes::from_static(&[0xCE]), text: Bytes::from_static(b"-0.050") }
        ]))
    );
}

#[test]
fn days_round_trip_through_civil_dates() {
    for days in (-800_000..800_000).step_by(997) {
        let (y, m, d) = civil_from_days(days);
        assert_eq!(days_from_civil(y, m, d), days);
    }
}

#[test]
fn parse_text_reads_each_type() {
    let b = |s: &'static str| Bytes::from_static(s.as_bytes());
    use super::value::plain;
    assert_eq!(plain(Type::Int64, &b("-42")), Some(Value::Int(-42)));
    assert_eq!(plain(Type::Boolean, &b("t")), Some(Value::Bool(true)));
    assert_eq!(plain(Type::Bytes, &b("\\x00fF")), Some(Value::Bytes(Bytes::from_static(&[0, 255]))));
    assert_eq!(plain(Type::Bytes, &b("\\x0")), None);
    assert_eq!(plain(Type::Int32, &b("x")), None);
}

fn temporal(type_oid: Oid, modifier: i32, mode: TemporalPrecision) -> (Type, String) {
    let modes = TypeModes { temporal: mode, ..TypeModes::default() };
    let s = schema_for_column(type_oid, modifier, true, modes).unwrap();
    (s.schema.primitive_type().unwrap(), s.schema.name().unwrap().to_string())
}

/// The schemas Debezium 3.6's TemporalPrecisionMode builders give (printed from its jars).
#[test]
fn temporal_schemas_follow_time_precision_mode() {
    use TemporalPrecision as M;
    let (i32_, i64_) = (Type::Int32, Type::Int64);
    for (oid, modifier, mode, expected) in [
        (oid::DATE, -1, M::Adaptive, (i32_, DATE_DAYS)),
        (oid::DATE, -1, M::Nanoseconds, (i32_, DATE_DAYS)),
        (oid::DATE, -1, M::Connect, (i32_, CONNECT_DATE)),
        (oid::TIME, 3, M::Adaptive, (i32_, TIME_MILLIS)),
        (oid::TIME, -1, M::Adaptive, (i64_, TIME_MICROS)),
        (oid::TIME, 0, M::AdaptiveTimeMicroseconds, (i64_, TIME_MICROS)),
        (oid::TIME, 0, M::Microseconds, (i64_, TIME_MICROS)),
        (oid::TIME, 6, M::Nanoseconds, (i64_, TIME_NANOS)),
        (oid::TIME, 6, M::Connect, (i32_, CONNECT_TIME)),
        (oid::TIMESTAMP, 0, M::Adaptive, (i64_, TIMESTAMP_MILLIS)),
        (oid::TIMESTAMP, 3, M::AdaptiveTimeMicroseconds, (i64_, TIMESTAMP_MILLIS)),
        (oid::TIMESTAMP, 4, M::Adaptive, (i64_, TIMESTAMP_MICROS)),
        (oid::TIMESTAMP, 0, M::Microseconds, (i64_, TIMESTAMP_MICROS)),
        (oid::TIMESTAMP, 0, M::Nanoseconds, (i64_, TIMESTAMP_NANOS)),
        (oid::TIMESTAMP, 3, M::Connect, (i64_, CONNECT_TIMESTAMP)),
        (oid::TIMESTAMPTZ, 3, M::Connect, (Type::String, ZONED_TIMESTAMP)),
    ] {
        assert_eq!(
            temporal(oid, modifier, mode),
            (expected.0, expected.1.to_string()),
            "oid {oid}({modifier}) under {mode:?}"
        );
    }
    for (oid, name) in [(oid::DATE, ISO_DATE), (oid::TIME, ISO_TIME), (oid::TIMESTAMP, ISO_TIMESTAMP)] {
        assert_eq!(temporal(oid, 3, M::IsoString), (Type::String, name.to_string()));
    }
}

#[test]
fn temporal_values_in_every_unit() {
    let b = |s: &'static str| Bytes::from_static(s.as_bytes());
    let v = |oid: Oid, modifier: i32, mode: TemporalPrecision, text: &'static str| {
        let modes = TypeModes { temporal: mode, ..TypeModes::default() };
        parse_value(&schema_for_column(oid, modifier, true, modes).unwrap(), &b(text)).unwrap()
    };
    use TemporalPrecision as M;
    use Value::{Int, JavaDate};
    assert_eq!(v(oid::TIME, 3, M::Adaptive, "12:34:56.789"), Int(45_296_789));
    assert_eq!(v(oid::TIME, -1, M::Adaptive, "12:34:56.789012"), Int(45_296_789_012));
    assert_eq!(v(oid::TIME, -1, M::Nanoseconds, "00:00:00.000001"), Int(1_000));
    assert_eq!(v(oid::TIME, -1, M::Microseconds, "24:00:00"), Int(86_400_000_000));
    assert_eq!(v(oid::TIME, -1, M::Connect, "12:34:56.789999"), JavaDate { millis: 45_296_789, number: 45_296_789 });
    assert_eq!(v(oid::TIMESTAMP, -1, M::Nanoseconds, "1970-01-01 00:00:01.000002"), Int(1_000_002_000));
    // Before 1970 the milliseconds are floored, as Instant.toEpochMilli does.
    assert_eq!(v(oid::TIMESTAMP, -1, M::Connect, "1969-12-31 23:59:59.9995"), JavaDate { millis: -1, number: -1 });
    assert_eq!(v(oid::DATE, -1, M::Connect, "1970-01-03"), JavaDate { millis: 172_800_000, number: 2 });
    // Printed by Debezium 3.6.3's IsoDate/IsoTime/IsoTimestamp.toIsoString.
    let iso = |oid: Oid, text: &'static str| match v(oid, -1, M::IsoString, text) {
        Value::String(s) => String::from_utf8(s.to_vec()).unwrap(),
        other => panic!("{other:?}"),
    };
    assert_eq!(iso(oid::DATE, "0001-01-01"), "0001-01-01Z");
    assert_eq!(iso(oid::TIME, "23:59:59.999"), "23:59:59.999Z");
    assert_eq!(iso(oid::TIME, "00:00:00"), "00:00:00Z");
    assert_eq!(iso(oid::TIME, "00:00:00.000001"), "00:00:00.000001Z");
    assert_eq!(iso(oid::TIME, "24:00:00"), "00:00:00Z");
    assert_eq!(iso(oid::TIMESTAMP, "1900-01-01 00:00:00.5"), "1900-01-01T00:00:00.5Z");
    assert_eq!(iso(oid::TIMESTAMP, "1969-12-31 23:59:59.999999"), "1969-12-31T23:59:59.999999Z");
    // java.time's years beyond 0..=9999.
    assert_eq!(iso(oid::DATE, "10000-01-01"), "+10000-01-01Z");
    assert_eq!(iso(oid::DATE, "0044-03-15 BC"), "-0043-03-15Z");
    // Past what an i64 of microseconds holds (PostgreSQL allows up to year 294276): not a value.
    assert_eq!(timestamp_micros("294270-01-01 00:00:00"), None);
    assert!(timestamp_micros("294246-01-01 00:00:00").is_some());
    // Debezium's stand-ins for PostgreSQL's infinities (differential cases temporal_infinities*).
    assert_eq!(v(oid::TIMESTAMP, 3, M::Adaptive, "infinity"), Int(9_223_372_036_825_200));
    assert_eq!(v(oid::TIMESTAMP, -1, M::Adaptive, "-infinity"), Int(-9_223_372_036_832_400_000));
    assert_eq!(v(oid::DATE, -1, M::Adaptive, "infinity"), Int(-2_147_472_692));
    assert_eq!(iso(oid::TIMESTAMP, "infinity"), "+294247-01-10T04:00:25.2Z");
    // ZonedTime, as Debezium 3.6.3 wrote these (differential case placement_timetz).
    assert_eq!(zoned_time("23:30:00-01").as_deref(), Some("00:30:00Z"));
    assert_eq!(zoned_time("00:15:00.5+05:30").as_deref(), Some("18:45:00.5Z"));
    assert_eq!(zoned_time("12:34:56.789012+02").as_deref(), Some("10:34:56.789012Z"));
    assert_eq!(zoned_time("23:59:59-12").as_deref(), Some("11:59:59Z"));
    assert_eq!(zoned_time("12:00:00"), None);
    assert_eq!(time_micros("1:00:00"), None);
    assert_eq!(time_micros("01:00"), None);
    assert_eq!(time_micros("01:00:00.1234567"), None);
}

/// Expected strings printed by Kafka 4.3's `Values.convertToString` and JDK 17's
/// `java.util.Date.toString` (TZ=UTC).
#[test]
fn java_dates_print_as_kafka_and_the_jdk_do() {
    for (millis, values) in [
        (1_709_210_096_789, "2024-02-29T12:34:56.789Z"),
        (-1, "23:59:59.999Z"),
        (0, "00:00:00.000Z"),
        (86_400_000, "1970-01-02"),
        (-62_135_596_800_000, "00:00:00.000Z"),
        (1_709_164_800_000, "2024-02-29"),
        (43_200_000, "12:00:00.000Z"),
        (-86_400_000, "00:00:00.000Z"),
    ] {
        assert_eq!(java_date_values_string(millis), values, "{millis}");
    }
    for (millis, text) in [
        (1_709_210_096_789, "Thu Feb 29 12:34:56 UTC 2024"),
        (0, "Thu Jan 01 00:00:00 UTC 1970"),
        (-1, "Wed Dec 31 23:59:59 UTC 1969"),
        (-62_135_596_800_000, "Mon Jan 03 00:00:00 UTC 1"),
        (-12_219_292_800_000, "Fri Oct 15 00:00:00 UTC 1582"),
        (-12_219_292_800_001, "Thu Oct 04 23:59:59 UTC 1582"),
        (-2_208_988_800_000, "Mon Jan 01 00:00:00 UTC 1900"),
        (253_402_300_799_999, "Fri Dec 31 23:59:59 UTC 9999"),
        (86_399_999, "Thu Jan 01 23:59:59 UTC 1970"),
        // Years of the era, without an era marker, before year 1 (JDK 17).
        (-62_198_755_200_000, "Fri Jan 03 00:00:00 UTC 2"),
        (-62_135_769_600_000, "Sat Jan 01 00:00:00 UTC 1"),
        (253_402_300_800_000, "Sat Jan 01 00:00:00 UTC 10000"),
    ] {
        assert_eq!(java_date_to_string(millis), text, "{millis}");
    }
}

/// Expected: pgjdbc 42.7.13's PGInterval fed to Debezium 3.6.3's MicroDuration.durationMicros
/// (30.4375 days a month) and Interval.toIsoString, as PostgresValueConverter calls them; the
/// texts are PostgreSQL 15's output of the intervals.
#[test]
fn intervals_as_debezium_converts_them() {
    for (text, micros, iso) in [
        ("1 year 2 mons 3 days 04:05:06.78", 37_091_106_780_000, "P1Y2M3DT4H5M6.78S"),
        ("-1 days +02:03:00", -79_020_000_000, "P0Y0M-1DT2H3M0S"),
        ("00:00:00.000001", 1, "P0Y0M0DT0H0M0.000001S"),
        ("-00:00:01.5", -1_500_000, "P0Y0M0DT0H0M-1.5S"),
        ("10 mons", 26_298_000_000_000, "P0Y10M0DT0H0M0S"),
        ("00:00:00", 0, "P0Y0M0DT0H0M0S"),
        ("-178000000 years", i64::MIN, "P-178000000Y0M0DT0H0M0S"),
        ("3 days -00:00:00.000001", 259_199_999_999, "P0Y0M3DT0H0M-0.000001S"),
        ("1 mon 00:00:00.5", 2_629_800_500_000, "P0Y1M0DT0H0M0.5S"),
        ("-1 years -2 mons -3 days -04:05:06.789012", -37_091_106_789_012, "P-1Y-2M-3DT-4H-5M-6.789012S"),
        ("00:00:06", 6_000_000, "P0Y0M0DT0H0M6S"),
        ("1 day 100:00:00", 446_400_000_000, "P0Y0M1DT100H0M0S"),
        ("-1 days -00:00:00.5", -86_400_500_000, "P0Y0M-1DT0H0M-0.5S"),
        ("2 years 00:00:00.1", 63_115_200_100_000, "P2Y0M0DT0H0M0.1S"),
        ("12345678 days 11:11:11.111111", 1_066_666_619_471_111_040, "P0Y0M12345678DT11H11M11.111111S"),
    ] {
        let i = interval(text).unwrap_or_else(|| panic!("{text}"));
        assert_eq!((i.micros(), i.iso().as_str()), (micros, iso), "{text}");
    }
    assert_eq!(interval("1 fortnight"), None);
    assert_eq!(interval("1:x:00"), None);
}

#[test]
fn array_literals_as_postgresql_prints_them() {
    let some = |v: &[Option<&str>]| Some(v.iter().map(|o| o.map(str::to_string)).collect::<Vec<_>>());
    assert_eq!(pg_array("{}"), some(&[]));
    assert_eq!(
        pg_array(r#"{a,"b c",NULL,"NULL","q\"x","back\\slash",""}"#),
        some(&[Some("a"), Some("b c"), None, Some("NULL"), Some("q\"x"), Some("back\\slash"), Some("")])
    );
    assert_eq!(pg_array("{1,-2}"), some(&[Some("1"), Some("-2")]));
    assert_eq!(pg_array("{{1,2},{3,4}}"), None);
    assert_eq!(pg_array("[0:1]={1,2}"), None);
    assert_eq!(pg_array(r#"{"unterminated}"#), None);
}

/// Texts at and past the edges of every reader: each is a value or `None`, never a panic or a
/// wrapped number (the router turns `None` into an error naming the column).
#[test]
fn extreme_texts_are_refused_not_wrapped() {
    let d = TypeModes::default();
    let b = |s: &str| Bytes::from(s.to_string());
    for (type_oid, modifier, mode, text) in [
        (oid::TIMESTAMP, -1, TemporalPrecision::Nanoseconds, "294246-01-01 00:00:00"),
        (oid::TIMESTAMP, -1, TemporalPrecision::Adaptive, "99999999999999999999-01-01 00:00:00"),
        (oid::TIMESTAMP, -1, TemporalPrecision::Adaptive, "2024-01-01 99999999999999999:00:00"),
        (oid::TIMESTAMP, -1, TemporalPrecision::Adaptive, "2024-01-01 00:00:9223372036854775807"),
        (oid::TIMESTAMP, -1, TemporalPrecision::Adaptive, "2024-01-01 -1:00:00"),
        (oid::DATE, -1, TemporalPrecision::Connect, "9223372036854775807-01-01"),
        (oid::DATE, -1, TemporalPrecision::Adaptive, "-5-01-01"),
        (oid::TIME, -1, TemporalPrecision::Nanoseconds, "99:99:99.9999999"),
        (oid::TIMESTAMPTZ, -1, TemporalPrecision::Adaptive, "2024-01-01 00:00:00+99999999999999999999"),
        (oid::INTERVAL, -1, TemporalPrecision::Adaptive, "99999999999 years"),
    ] {
        let modes = TypeModes { temporal: mode, ..d };
        let c = ColumnType::of(type_oid, modifier, true, modes).unwrap();
        let v = c.parse(&b(text));
        assert!(v.is_none() || matches!(c.form, TextForm::Zoned(_)), "{text}: {v:?}");
    }
    // The largest that still fit are values.
    let c = ColumnType::of(oid::DATE, -1, true, TypeModes { temporal: TemporalPrecision::Connect, ..d }).unwrap();
    assert!(c.parse(&b("5874897-12-31")).is_some());
    let c = ColumnType::of(oid::INTERVAL, -1, true, d).unwrap();
    assert_eq!(c.parse(&b("-178000000 years")), Some(Value::Int(i64::MIN)));
    let c = ColumnType::of(oid::NUMERIC, -1, true, d).unwrap();
    assert!(c.parse(&b(&"9".repeat(1000))).is_some());
}
