//! `interval` text as pgjdbc's PGInterval reads it, and Debezium's two forms of it.

/// An `interval` as pgjdbc's PGInterval holds it, which is what Debezium converts from.
#[derive(Debug, PartialEq)]
pub struct Interval {
    years: i32,
    months: i32,
    days: i32,
    hours: i32,
    minutes: i32,
    /// PGInterval's `getSeconds()`: whole seconds plus microseconds / 1e6, in floating point.
    seconds: f64,
}

/// An `interval` in PostgreSQL's default output style (`1 year 2 mons -3 days +04:05:06.78`), read
/// as PGInterval reads it: a signed time applies its sign to hours, minutes and seconds; the seconds
/// are split into whole seconds and rounded microseconds.
pub fn parse(text: &str) -> Option<Interval> {
    let mut i = Interval { years: 0, months: 0, days: 0, hours: 0, minutes: 0, seconds: 0.0 };
    let mut tokens = text.split_ascii_whitespace();
    while let Some(t) = tokens.next() {
        if t.contains(':') {
            let (sign, hms) = match t.as_bytes()[0] {
                b'-' => (-1, &t[1..]),
                b'+' => (1, &t[1..]),
                _ => (1, t),
            };
            let mut parts = hms.splitn(3, ':');
            let (h, m, s) = (parts.next()?, parts.next()?, parts.next().unwrap_or("0"));
            let digits = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit() || b == b'.');
            if !(digits(h) && digits(m) && digits(s)) {
                return None;
            }
            i.hours = sign * h.parse::<i32>().ok()?;
            i.minutes = sign * m.parse::<i32>().ok()?;
            let secs = f64::from(sign) * s.parse::<f64>().ok()?;
            let whole = secs.trunc();
            let micros = ((secs - whole) * 1e6).round();
            i.seconds = whole + micros / 1e6;
        } else {
            let n: i32 = t.parse().ok()?;
            match tokens.next()? {
                "year" | "years" => i.years = n,
                "mon" | "mons" => i.months = n,
                "day" | "days" => i.days = n,
                _ => return None,
            }
        }
    }
    Some(i)
}

impl Interval {
    /// Debezium's MicroDuration.durationMicros with 30.4375 days a month, in its order of double
    /// operations, truncated (and saturated) to a long as Java's `(long)` does.
    pub fn micros(&self) -> i64 {
        let days = f64::from(self.years.wrapping_mul(12).wrapping_add(self.months)) * 30.4375 + f64::from(self.days);
        let seconds = ((days * 24.0 + f64::from(self.hours)) * 60.0 + f64::from(self.minutes)) * 60.0 + self.seconds;
        (seconds * 1_000_000.0 + 0.0) as i64
    }

    /// Debezium's Interval.toIsoString: `P{y}Y{m}M{d}DT{h}H{m}M{s}S`, the seconds as
    /// `BigDecimal.valueOf(double)` without trailing zeros, in plain notation.
    pub fn iso(&self) -> String {
        let seconds = if self.seconds == 0.0 { "0".to_string() } else { format!("{}", self.seconds) };
        format!("P{}Y{}M{}DT{}H{}M{}S", self.years, self.months, self.days, self.hours, self.minutes, seconds)
    }
}
