//! `java.util.Date` as Connect prints it (`toString()` in a UTC JVM, and `Values.convertToString`),
//! and the proleptic Gregorian calendar arithmetic java.time uses.

/// The proleptic Gregorian date of a day count from 1970-01-01 (Howard Hinnant's civil_from_days).
pub fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// Days from 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's days_from_civil).
pub fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

const MILLIS_PER_DAY: i64 = 86_400_000;

/// `Values.convertToString` of a `java.util.Date` (SimpleHeaderConverter): Kafka picks the layout by
/// the value, not the schema: under a day since the epoch (so every instant before 1970 too) the
/// time of day, `HH:mm:ss.SSS'Z'`; a whole number of days `yyyy-MM-dd`; otherwise
/// `yyyy-MM-dd'T'HH:mm:ss.SSS'Z'`; all in UTC.
pub fn java_date_values_string(millis: i64) -> String {
    let (days, ms) = (millis.div_euclid(MILLIS_PER_DAY), millis.rem_euclid(MILLIS_PER_DAY));
    let time = format!("{:02}:{:02}:{:02}.{:03}Z", ms / 3_600_000, ms / 60_000 % 60, ms / 1000 % 60, ms % 1000);
    if millis < MILLIS_PER_DAY {
        return time;
    }
    let (y, m, d) = civil_from_days(days);
    if ms == 0 {
        format!("{y:04}-{m:02}-{d:02}")
    } else {
        format!("{y:04}-{m:02}-{d:02}T{time}")
    }
}

/// The first day of the Gregorian calendar (1582-10-15) counted from 1970-01-01.
pub const GREGORIAN_CUTOVER_DAYS: i64 = -141_427;

/// The year, month and day of a day counted from 1970-01-01 as `java.util.GregorianCalendar` (and so
/// `java.util.Date`) gives them: Julian before 1582-10-15, and the year of its era (1 BC, the
/// astronomical year 0, is year 1).
pub fn gregorian_calendar_date(days: i64) -> (i64, i64, i64) {
    let (y, m, d) = if days >= GREGORIAN_CUTOVER_DAYS { civil_from_days(days) } else { julian_from_days(days) };
    (if y <= 0 { 1 - y } else { y }, m, d)
}

/// `java.util.Date.toString()` in a JVM whose time zone is UTC (Connect's `Struct.toString`):
/// `EEE MMM dd HH:mm:ss zzz yyyy`, Julian calendar before 1582-10-15 as `java.util.Date` does, the
/// year of its era with no era marker.
pub fn java_date_to_string(millis: i64) -> String {
    const WEEKDAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let (days, ms) = (millis.div_euclid(MILLIS_PER_DAY), millis.rem_euclid(MILLIS_PER_DAY));
    let (y, m, d) = gregorian_calendar_date(days);
    format!(
        "{} {} {d:02} {:02}:{:02}:{:02} UTC {y}",
        WEEKDAYS[(days + 4).rem_euclid(7) as usize],
        MONTHS[(m - 1) as usize],
        ms / 3_600_000,
        ms / 60_000 % 60,
        ms / 1000 % 60
    )
}

/// (year, month, day) in the Julian calendar of a day counted from 1970-01-01.
fn julian_from_days(days: i64) -> (i64, i64, i64) {
    let c = days + 2_440_588 + 32_082; // Julian day number, shifted to March-based years from -4800
    let d = (4 * c + 3).div_euclid(1461);
    let e = c - (1461 * d).div_euclid(4);
    let m = (5 * e + 2).div_euclid(153);
    (d - 4800 + m / 10, m + 3 - 12 * (m / 10), e - (153 * m + 2).div_euclid(5) + 1)
}

/// One piece of a `java.text.SimpleDateFormat` pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DatePart {
    Literal(String),
    /// A pattern letter and how many times it repeats (`yyyy` is `('y', 4)`).
    Field(char, usize),
}

/// Parses the `SimpleDateFormat` pattern letters pgoutbox formats (G y M d H h m s S E a z Z X
/// are Java's; these are the ones a topic name takes: `y M d H m s S`), with `'quoted'` literals
/// and `''` for a quote. Other letters are refused, naming them.
pub fn simple_date_format(pattern: &str) -> Result<Vec<DatePart>, String> {
    let mut out = Vec::new();
    let mut chars = pattern.chars().peekable();
    let mut literal = String::new();
    while let Some(c) = chars.next() {
        if c == '\'' {
            if chars.peek() == Some(&'\'') {
                chars.next();
                literal.push('\'');
                continue;
            }
            loop {
                match chars.next() {
                    None => return Err("an unterminated quote".into()),
                    Some('\'') if chars.peek() == Some(&'\'') => {
                        chars.next();
                        literal.push('\'');
                    }
                    Some('\'') => break,
                    Some(q) => literal.push(q),
                }
            }
        } else if c.is_ascii_alphabetic() {
            if !"yMdHmsS".contains(c) {
                return Err(format!("the pattern letter `{c}` (pgoutbox formats y, M, d, H, m, s and S)"));
            }
            let mut n = 1;
            while chars.peek() == Some(&c) {
                chars.next();
                n += 1;
            }
            if !literal.is_empty() {
                out.push(DatePart::Literal(std::mem::take(&mut literal)));
            }
            out.push(DatePart::Field(c, n));
        } else {
            literal.push(c);
        }
    }
    if !literal.is_empty() {
        out.push(DatePart::Literal(literal));
    }
    Ok(out)
}

/// Formats milliseconds since the epoch with a parsed pattern, in UTC and the proleptic Gregorian
/// calendar, as `SimpleDateFormat` does from 1582 on (`yy` is the year modulo 100; `MMM` the short
/// English month name; numbers are zero-padded to the letter count).
pub fn format_simple(parts: &[DatePart], millis: i64) -> String {
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    const FULL: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    let (days, ms) = (millis.div_euclid(MILLIS_PER_DAY), millis.rem_euclid(MILLIS_PER_DAY));
    let (y, m, d) = civil_from_days(days);
    let mut out = String::new();
    for p in parts {
        match p {
            DatePart::Literal(s) => out.push_str(s),
            DatePart::Field(c, n) => {
                let n = *n;
                let number = match c {
                    'y' if n == 2 => y.rem_euclid(100),
                    'y' => y,
                    'M' if n == 3 => {
                        out.push_str(MONTHS[(m - 1) as usize]);
                        continue;
                    }
                    'M' if n > 3 => {
                        out.push_str(FULL[(m - 1) as usize]);
                        continue;
                    }
                    'M' => m,
                    'd' => d,
                    'H' => ms / 3_600_000,
                    'm' => ms / 60_000 % 60,
                    's' => ms / 1000 % 60,
                    _ => ms % 1000,
                };
                out.push_str(&format!("{number:0n$}"));
            }
        }
    }
    out
}
