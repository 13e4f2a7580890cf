//! `Lsn`: a position in PostgreSQL's write-ahead log.
//!
//! PostgreSQL prints LSNs as two hexadecimal halves, `16/B374D848`; on the wire they are big-endian
//! `u64`s. Ordering is plain integer ordering, which is what the checkpoint relies on.

use std::fmt;
use std::str::FromStr;

/// A WAL position. `Lsn::ZERO` is PostgreSQL's `InvalidXLogRecPtr`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Lsn(pub u64);

impl Lsn {
    pub const ZERO: Lsn = Lsn(0);

    pub fn is_zero(self) -> bool {
        self.0 == 0
    }
}

impl fmt::Display for Lsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:X}/{:X}", self.0 >> 32, self.0 & 0xFFFF_FFFF)
    }
}

#[derive(Debug, thiserror::Error)]
#[error("`{0}` is not an LSN; expected two hexadecimal halves like `16/B374D848`")]
pub struct ParseLsnError(String);

impl FromStr for Lsn {
    type Err = ParseLsnError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || ParseLsnError(s.to_string());
        let (hi, lo) = s.split_once('/').ok_or_else(err)?;
        let hi = u32::from_str_radix(hi, 16).map_err(|_| err())?;
        let lo = u32::from_str_radix(lo, 16).map_err(|_| err())?;
        Ok(Lsn((u64::from(hi) << 32) | u64::from(lo)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lsn_round_trips_through_postgres_text_form() {
        let lsn: Lsn = "16/B374D848".parse().unwrap();
        assert_eq!(lsn.0, 0x16_B374_D848);
        assert_eq!(lsn.to_string(), "16/B374D848");
        assert_eq!("0/0".parse::<Lsn>().unwrap(), Lsn::ZERO);
    }

    #[test]
    fn lsn_rejects_malformed_text() {
        for bad in ["", "16", "16/", "/1", "G/1", "1/2/3", "100000000/0"] {
            assert!(bad.parse::<Lsn>().is_err(), "{bad} parsed");
        }
    }

    #[test]
    fn lsn_orders_numerically() {
        assert!("1/0".parse::<Lsn>().unwrap() > "0/FFFFFFFF".parse::<Lsn>().unwrap());
    }
}
