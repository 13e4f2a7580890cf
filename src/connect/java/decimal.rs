//! Java's `BigDecimal` from decimal text (PostgreSQL's `numeric`, a Cast or MaskField replacement): the
//! unscaled `BigInteger.toByteArray()` and `toString()`.

use bytes::Bytes;

/// A `numeric(p,s)` as PostgreSQL prints it (`-12.34`, exactly `scale` fraction digits) as Java's
/// `BigDecimal`: the unscaled value's `BigInteger.toByteArray()` and `toString()` (plain, or
/// scientific when the adjusted exponent is below -6: `1E-7`, `1.0E-7`). `None` for `NaN` or
/// anything else that is not such a number. Without `scale`, the text's own number of fraction
/// digits (a `numeric` without a declared scale).
pub fn decimal(text: &str, scale: Option<u16>) -> Option<(Vec<u8>, String)> {
    let (negative, body) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (int, frac) = body.split_once('.').unwrap_or((body, ""));
    let scale = scale.unwrap_or(frac.len().try_into().ok()?);
    if int.is_empty()
        || frac.len() != usize::from(scale)
        || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let digits: String = format!("{int}{frac}").trim_start_matches('0').to_string();
    let digits = if digits.is_empty() { "0".to_string() } else { digits };
    let negative = negative && digits != "0";
    let bytes = to_byte_array(&digits, negative);
    let text = to_string(&digits, negative, scale);
    Some((bytes, text))
}

/// `BigInteger.toByteArray()` of the decimal digits (no leading zeros), negated when `negative`.
fn to_byte_array(digits: &str, negative: bool) -> Vec<u8> {
    // The magnitude in base 256, big-endian (schoolbook multiply-add over the decimal digits).
    let mut magnitude: Vec<u8> = vec![0];
    for d in digits.bytes() {
        let mut carry = u32::from(d - b'0');
        for byte in magnitude.iter_mut().rev() {
            let v = u32::from(*byte) * 10 + carry;
            *byte = (v & 0xFF) as u8;
            carry = v >> 8;
        }
        while carry > 0 {
            magnitude.insert(0, (carry & 0xFF) as u8);
            carry >>= 8;
        }
    }
    while magnitude.len() > 1 && magnitude[0] == 0 {
        magnitude.remove(0);
    }
    if !negative {
        if magnitude[0] & 0x80 != 0 {
            magnitude.insert(0, 0);
        }
        magnitude
    } else {
        // Two's complement of the magnitude, with a sign byte when the top bit would read positive.
        let mut twos: Vec<u8> = magnitude.iter().map(|b| !b).collect();
        for byte in twos.iter_mut().rev() {
            let (v, overflow) = byte.overflowing_add(1);
            *byte = v;
            if !overflow {
                break;
            }
        }
        if twos[0] & 0x80 == 0 {
            twos.insert(0, 0xFF);
        }
        twos
    }
}

/// `BigDecimal.toString()` of the unscaled digits at `scale`.
fn to_string(digits: &str, negative: bool, scale: u16) -> String {
    let adjusted = digits.len() as i64 - 1 - i64::from(scale);
    let sign = if negative { "-" } else { "" };
    let scale = usize::from(scale);
    if adjusted >= -6 {
        if scale == 0 {
            format!("{sign}{digits}")
        } else if digits.len() > scale {
            format!("{sign}{}.{}", &digits[..digits.len() - scale], &digits[digits.len() - scale..])
        } else {
            format!("{sign}0.{}{digits}", "0".repeat(scale - digits.len()))
        }
    } else {
        let rest = if digits.len() > 1 { format!(".{}", &digits[1..]) } else { String::new() };
        format!("{sign}{}{rest}E{adjusted}", &digits[..1])
    }
}

/// `decimal.handling.mode=string`: `toPlainString`, which is PostgreSQL's own text, and the names
/// of Debezium's special values.
pub fn plain_string(text: &Bytes) -> Option<Bytes> {
    Some(Bytes::from_static(match &text[..] {
        b"NaN" => b"NAN",
        b"Infinity" => b"POSITIVE_INFINITY",
        b"-Infinity" => b"NEGATIVE_INFINITY",
        t => {
            decimal(std::str::from_utf8(t).ok()?, None)?;
            return Some(text.clone());
        }
    }))
}
