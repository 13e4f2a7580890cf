//! PostgreSQL's text of dates, times and timestamps (DateStyle ISO) as Debezium reads them: counts
//! since the epoch or past midnight, and the ISO-8601 strings of ZonedTimestamp, ZonedTime and the
//! `isostring` mode. Every reader checks its input's digits and ranges, so no text, however long or
//! strange, overflows: it is `None`, an error naming the column.

use crate::connect::java::date::{civil_from_days, days_from_civil};

pub const MICROS_PER_DAY: i64 = 86_400_000_000;

/// `YYYY-MM-DD[ BC]` as PostgreSQL prints a date (DateStyle ISO).
pub fn date_days(text: &str) -> Option<i64> {
    // Debezium's POSITIVE/NEGATIVE_INFINITY_LOCAL_DATE, as its Date conversion counts their days.
    match text {
        "infinity" => return Some(-2_147_472_692),
        "-infinity" => return Some(-2_147_472_691),
        _ => {}
    }
    let (text, bc) = match text.strip_suffix(" BC") {
        Some(t) => (t, true),
        None => (text, false),
    };
    let mut parts = text.splitn(3, '-');
    let y: i64 = digits(parts.next()?, 1..=MAX_YEAR_DIGITS)?;
    let m: i64 = digits(parts.next()?, 2..=2)?;
    let d: i64 = digits(parts.next()?, 2..=2)?;
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    // Year 1 BC is astronomical year 0.
    let y = if bc { 1 - y } else { y };
    Some(days_from_civil(y, m, d))
}

/// `YYYY-MM-DD HH:MM:SS[.ffffff][ BC]` (a timestamp without time zone, DateStyle ISO) as
/// microseconds since the epoch, the way Debezium reads it (the wall-clock value taken as UTC).
pub fn timestamp_micros(text: &str) -> Option<i64> {
    // Debezium's POSITIVE/NEGATIVE_INFINITY_LOCAL_DATE_TIME (+294247-01-10T04:00:25.200 and
    // -290308-12-21T19:59:27.600), in microseconds.
    match text {
        "infinity" => return Some(9_223_372_036_825_200_000),
        "-infinity" => return Some(-9_223_372_036_832_400_000),
        _ => {}
    }
    let (text, bc) = match text.strip_suffix(" BC") {
        Some(t) => (t, true),
        None => (text, false),
    };
    let (date, time) = text.split_once(' ')?;
    let days = date_days(&if bc { format!("{date} BC") } else { date.to_string() })?;
    let (hms, frac) = time.split_once('.').unwrap_or((time, ""));
    let mut t = hms.splitn(3, ':');
    let h: i64 = digits(t.next()?, 2..=2)?;
    let mi: i64 = digits(t.next()?, 2..=2)?;
    let s: i64 = digits(t.next()?, 2..=2)?;
    let micros = fraction_micros(frac)?;
    // PostgreSQL goes up to year 294276, past what an i64 of microseconds since 1970 holds.
    days.checked_mul(24)?
        .checked_add(h)?
        .checked_mul(60)?
        .checked_add(mi)?
        .checked_mul(60_000_000)?
        .checked_add(s * 1_000_000 + micros)
}

/// A `time` as PostgreSQL prints it (`HH:MM:SS[.ffffff]`, up to `24:00:00`): microseconds past
/// midnight.
pub fn time_micros(text: &str) -> Option<i64> {
    let (hms, frac) = text.split_once('.').unwrap_or((text, ""));
    let mut t = hms.splitn(3, ':');
    let mut part = || digits(t.next()?, 2..=2);
    let (h, mi, s) = (part()?, part()?, part()?);
    let micros = fraction_micros(frac)?;
    Some((h * 3600 + mi * 60 + s) * 1_000_000 + micros)
}

/// A `timestamptz` as PostgreSQL prints it (`YYYY-MM-DD HH:MM:SS[.ffffff]±HH[:MM[:SS]][ BC]`, in the
/// session's time zone) as Debezium 3.6's ZonedTimestamp: the same instant in UTC, ISO-8601 with
/// seconds always, `digits` digits of fraction (`2024-02-29T10:34:56.789000Z` for 6), and `Z`. With
/// `digits` 0, Java's `ISO_OFFSET_DATE_TIME`: the fraction without trailing zeros, only when not zero
/// (seen from Debezium: the column's precision, 6 without one). `None` when the text is not such a
/// timestamp.
pub fn zoned_timestamp(text: &str, digits: u8) -> Option<String> {
    let (text, bc) = match text.strip_suffix(" BC") {
        Some(t) => (t, " BC"),
        None => (text, ""),
    };
    let (date, rest) = text.split_once(' ')?;
    let (time, offset_secs) = split_offset(rest)?;
    let local = timestamp_micros(&format!("{date} {time}{bc}"))?;
    Some(iso_instant(local.checked_sub(offset_secs * 1_000_000)?, digits))
}

/// Microseconds since 1970 as java.time writes an instant in UTC: `yyyy-MM-ddTHH:MM:SS`, the fraction
/// as [`push_fraction`] writes it with `digits`, and `Z`.
fn iso_instant(micros: i64, digits: u8) -> String {
    let (y, m, d) = civil_from_days(micros.div_euclid(MICROS_PER_DAY));
    let mut out = format!("{}-{m:02}-{d:02}T", iso_year(y));
    push_time_of_day(&mut out, micros.rem_euclid(MICROS_PER_DAY), digits);
    out.push('Z');
    out
}

/// Microseconds past midnight as java.time writes a time in UTC: `HH:MM:SS`, the fraction without
/// trailing zeros (none when zero), and `Z`.
fn iso_time_of_day(micros: i64) -> String {
    let mut out = String::new();
    push_time_of_day(&mut out, micros, 0);
    out.push('Z');
    out
}

/// `HH:MM:SS` of microseconds past midnight, then the fraction as [`push_fraction`] writes it.
fn push_time_of_day(out: &mut String, micros: i64, digits: u8) {
    let secs = micros / 1_000_000;
    out.push_str(&format!("{:02}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60));
    push_fraction(out, micros, digits);
}

/// java.time's ISO_LOCAL_DATE year: four digits within 0..=9999, a sign beyond.
fn iso_year(y: i64) -> String {
    if (0..=9999).contains(&y) {
        format!("{y:04}")
    } else if y < 0 {
        format!("-{:04}", -y)
    } else {
        format!("+{y}")
    }
}

/// A `timetz` as PostgreSQL prints it (`HH:MM:SS[.ffffff]±HH[:MM[:SS]]`) as Debezium 3.6's
/// ZonedTime: the time in UTC (wrapping around midnight), the fraction without trailing zeros
/// whatever the column's precision (unlike ZonedTimestamp), and `Z`.
pub fn zoned_time(text: &str) -> Option<String> {
    let (time, offset_secs) = split_offset(text)?;
    Some(iso_time_of_day((time_micros(time)? - offset_secs * 1_000_000).rem_euclid(MICROS_PER_DAY)))
}

/// Splits `time±HH[:MM[:SS]]` into the time and the offset in seconds (east positive).
fn split_offset(text: &str) -> Option<(&str, i64)> {
    let at = text.rfind(['+', '-'])?;
    let (time, offset) = text.split_at(at);
    let sign: i64 = if offset.starts_with('-') { -1 } else { 1 };
    let mut parts = offset[1..].split(':');
    let mut offset_secs = 0i64;
    for unit in [3600, 60, 1] {
        if let Some(p) = parts.next() {
            if p.len() != 2 || !p.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            offset_secs += p.parse::<i64>().ok()? * unit;
        }
    }
    if parts.next().is_some() {
        return None;
    }
    Some((time, sign * offset_secs))
}

/// The fraction of a second of `micros`: `digits` digits, or with 0 only the digits up to the last
/// non-zero one (none when zero). PostgreSQL has already rounded the value to the column's precision.
fn push_fraction(out: &mut String, micros: i64, digits: u8) {
    let fraction = format!(".{:06}", micros.rem_euclid(1_000_000));
    match digits {
        0 => out.push_str(fraction.trim_end_matches('0').trim_end_matches('.')),
        d => out.push_str(&fraction[..=usize::from(d.min(6))]),
    }
}

/// `time.precision.mode=isostring`: PostgreSQL's text of a date as Debezium's IsoDate string. The
/// fraction without trailing zeros, none when zero; a `Z` after every form (DateTimeFormatters of
/// Debezium 3.6, checked against its IsoDate/IsoTime/IsoTimestamp.toIsoString).
pub fn iso_date(text: &str) -> Option<String> {
    let (y, m, d) = civil_from_days(date_days(text)?);
    Some(format!("{}-{m:02}-{d:02}Z", iso_year(y)))
}

/// A `time` as Debezium's IsoTime string. As a java.time LocalTime, `24:00:00` is the next midnight.
pub fn iso_time(text: &str) -> Option<String> {
    Some(iso_time_of_day(time_micros(text)? % MICROS_PER_DAY))
}

/// A `timestamp` as Debezium's IsoTimestamp string.
pub fn iso_timestamp(text: &str) -> Option<String> {
    Some(iso_instant(timestamp_micros(text)?, 0))
}

/// PostgreSQL's years go up to 294276 (timestamps) and 5874897 (dates): seven digits at most.
const MAX_YEAR_DIGITS: usize = 7;

/// An unsigned decimal of this many digits, or `None`: no sign, no overflow, whatever the input.
fn digits(text: &str, len: std::ops::RangeInclusive<usize>) -> Option<i64> {
    if !len.contains(&text.len()) || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// The microseconds of a fraction of a second's digits (at most six; none is zero).
fn fraction_micros(frac: &str) -> Option<i64> {
    if frac.is_empty() {
        return Some(0);
    }
    Some(digits(frac, 1..=6)? * 10i64.pow(6 - frac.len() as u32))
}
