//! A checked reader over a `Bytes` buffer: every read verifies the length first, so malformed or
//! truncated input becomes a `DecodeError`, never a panic.

use bytes::Bytes;

use super::DecodeError;

pub(crate) struct Cursor {
    buf: Bytes,
    pos: usize,
}

impl Cursor {
    pub(crate) fn new(buf: Bytes) -> Self {
        Cursor { buf, pos: 0 }
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn take(&mut self, n: usize, what: &'static str) -> Result<&[u8], DecodeError> {
        if self.remaining() < n {
            return Err(DecodeError::Truncated { what, needed: n, available: self.remaining() });
        }
        let start = self.pos;
        self.pos += n;
        Ok(&self.buf[start..self.pos])
    }

    pub(crate) fn u8(&mut self, what: &'static str) -> Result<u8, DecodeError> {
        Ok(self.take(1, what)?[0])
    }

    pub(crate) fn i16(&mut self, what: &'static str) -> Result<i16, DecodeError> {
        let b = self.take(2, what)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    pub(crate) fn u32(&mut self, what: &'static str) -> Result<u32, DecodeError> {
        let b = self.take(4, what)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub(crate) fn i32(&mut self, what: &'static str) -> Result<i32, DecodeError> {
        Ok(self.u32(what)? as i32)
    }

    pub(crate) fn u64(&mut self, what: &'static str) -> Result<u64, DecodeError> {
        let b = self.take(8, what)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_be_bytes(a))
    }

    pub(crate) fn i64(&mut self, what: &'static str) -> Result<i64, DecodeError> {
        Ok(self.u64(what)? as i64)
    }

    /// A slice of the underlying buffer, shared rather than copied.
    pub(crate) fn bytes(&mut self, n: usize, what: &'static str) -> Result<Bytes, DecodeError> {
        self.take(n, what)?;
        Ok(self.buf.slice(self.pos - n..self.pos))
    }

    /// A NUL-terminated string (PostgreSQL's `String` type in message formats).
    pub(crate) fn cstr(&mut self, what: &'static str) -> Result<String, DecodeError> {
        let rest = &self.buf[self.pos..];
        let nul = rest.iter().position(|&b| b == 0).ok_or(DecodeError::UnterminatedString { what })?;
        let s = std::str::from_utf8(&rest[..nul]).map_err(|_| DecodeError::InvalidUtf8 { what })?.to_string();
        self.pos += nul + 1;
        Ok(s)
    }
}
