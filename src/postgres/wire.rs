//! Framing and parsing of the backend messages a replication connection sees.
//!
//! postgres-protocol's backend parser rejects `CopyBothResponse` (`W`), which START_REPLICATION
//! answers with, so this module frames backend messages itself: a tag byte, a big-endian `i32` length
//! that counts itself, then the body. `parse_frame` returns `Ok(None)` while more bytes are needed and
//! hands out the body as `Bytes` split off the read buffer, so `XLogData` payloads reach the decoder
//! without a copy. Frontend messages are written with postgres-protocol.

use bytes::{Buf, Bytes, BytesMut};

use crate::lsn::Lsn;

/// Largest backend message accepted. PostgreSQL caps a single field at 1 GB; a frame claiming more is
/// corrupt, and refusing it keeps a bad length from reserving gigabytes.
pub const MAX_FRAME_LEN: usize = 1 << 30;

pub mod tag {
    pub const AUTHENTICATION: u8 = b'R';
    pub const PARAMETER_STATUS: u8 = b'S';
    pub const BACKEND_KEY_DATA: u8 = b'K';
    pub const READY_FOR_QUERY: u8 = b'Z';
    pub const ERROR_RESPONSE: u8 = b'E';
    pub const NOTICE_RESPONSE: u8 = b'N';
    pub const ROW_DESCRIPTION: u8 = b'T';
    pub const DATA_ROW: u8 = b'D';
    pub const COMMAND_COMPLETE: u8 = b'C';
    pub const EMPTY_QUERY_RESPONSE: u8 = b'I';
    pub const COPY_BOTH_RESPONSE: u8 = b'W';
    pub const COPY_OUT_RESPONSE: u8 = b'H';
    pub const COPY_DATA: u8 = b'd';
    pub const COPY_DONE: u8 = b'c';
    /// Inside CopyData: XLogData and primary keepalive (server to client), standby status update
    /// (client to server).
    pub const XLOG_DATA: u8 = b'w';
    pub const PRIMARY_KEEPALIVE: u8 = b'k';
    pub const STANDBY_STATUS_UPDATE: u8 = b'r';
}

#[derive(Debug, thiserror::Error)]
pub enum WireError {
    #[error("backend message {tag:#04x} has invalid length {len}")]
    BadLength { tag: u8, len: i64 },
    #[error("malformed {what} message from the server")]
    Malformed { what: &'static str },
}

#[derive(Debug, Clone)]
pub struct Frame {
    pub tag: u8,
    pub body: Bytes,
}

/// Splits one complete backend message off the front of `buf`, or returns `None` if it is incomplete.
pub fn parse_frame(buf: &mut BytesMut) -> Result<Option<Frame>, WireError> {
    if buf.len() < 5 {
        return Ok(None);
    }
    let tag = buf[0];
    let len = i32::from_be_bytes([buf[1], buf[2], buf[3], buf[4]]);
    if len < 4 || len as usize > MAX_FRAME_LEN {
        return Err(WireError::BadLength { tag, len: i64::from(len) });
    }
    let total = 1 + len as usize;
    if buf.len() < total {
        // Make room for the rest of this frame in one go rather than growing piecemeal.
        buf.reserve(total - buf.len());
        return Ok(None);
    }
    let mut frame = buf.split_to(total).freeze();
    frame.advance(5);
    Ok(Some(Frame { tag, body: frame }))
}

/// The fields of an ErrorResponse or NoticeResponse.
#[derive(Debug, Clone, Default)]
pub struct ServerError {
    pub severity: String,
    pub code: String,
    pub message: String,
    pub detail: Option<String>,
    pub hint: Option<String>,
}

impl std::fmt::Display for ServerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {} (SQLSTATE {})", self.severity, self.message, self.code)?;
        if let Some(d) = &self.detail {
            write!(f, "; detail: {d}")?;
        }
        if let Some(h) = &self.hint {
            write!(f, "; hint: {h}")?;
        }
        Ok(())
    }
}

pub fn parse_error_fields(body: &[u8]) -> ServerError {
    let mut e = ServerError::default();
    let mut rest = body;
    while let Some((&field, tail)) = rest.split_first() {
        if field == 0 {
            break;
        }
        let end = tail.iter().position(|&b| b == 0).unwrap_or(tail.len());
        let value = String::from_utf8_lossy(&tail[..end]).into_owned();
        match field {
            b'V' => e.severity = value,
            b'S' if e.severity.is_empty() => e.severity = value,
            b'C' => e.code = value,
            b'M' => e.message = value,
            b'D' => e.detail = Some(value),
            b'H' => e.hint = Some(value),
            _ => {}
        }
        rest = tail.get(end + 1..).unwrap_or(&[]);
    }
    e
}

/// A DataRow's values as text (`None` for NULL).
pub fn parse_data_row(body: &Bytes) -> Result<Vec<Option<String>>, WireError> {
    let bad = || WireError::Malformed { what: "DataRow" };
    let mut b = body.clone();
    if b.remaining() < 2 {
        return Err(bad());
    }
    let n = b.get_i16();
    if n < 0 || n as usize * 4 > b.remaining() {
        return Err(bad());
    }
    let mut out = Vec::with_capacity(n as usize);
    for _ in 0..n {
        if b.remaining() < 4 {
            return Err(bad());
        }
        let len = b.get_i32();
        if len < 0 {
            out.push(None);
            continue;
        }
        if b.remaining() < len as usize {
            return Err(bad());
        }
        out.push(Some(String::from_utf8_lossy(&b.split_to(len as usize)).into_owned()));
    }
    Ok(out)
}

/// Messages inside the CopyBoth stream, from the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplicationMessage {
    XLogData { wal_start: Lsn, wal_end: Lsn, send_time: i64, data: Bytes },
    PrimaryKeepalive { wal_end: Lsn, send_time: i64, reply_requested: bool },
}

pub fn parse_copy_data(body: Bytes) -> Result<ReplicationMessage, WireError> {
    let mut b = body;
    if !b.has_remaining() {
        return Err(WireError::Malformed { what: "CopyData" });
    }
    match b.get_u8() {
        tag::XLOG_DATA => {
            if b.remaining() < 24 {
                return Err(WireError::Malformed { what: "XLogData" });
            }
            let wal_start = Lsn(b.get_u64());
            let wal_end = Lsn(b.get_u64());
            let send_time = b.get_i64();
            Ok(ReplicationMessage::XLogData { wal_start, wal_end, send_time, data: b })
        }
        tag::PRIMARY_KEEPALIVE => {
            if b.remaining() != 17 {
                return Err(WireError::Malformed { what: "primary keepalive" });
            }
            Ok(ReplicationMessage::PrimaryKeepalive {
                wal_end: Lsn(b.get_u64()),
                send_time: b.get_i64(),
                reply_requested: b.get_u8() == 1,
            })
        }
        _ => Err(WireError::Malformed { what: "CopyData (unknown replication message)" }),
    }
}

/// Microseconds since 2000-01-01 00:00 UTC, PostgreSQL's epoch for replication timestamps.
pub fn pg_epoch_micros(now: std::time::SystemTime) -> i64 {
    const PG_EPOCH_OFFSET_SECS: u64 = 946_684_800;
    let unix = now.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    unix.as_micros() as i64 - (PG_EPOCH_OFFSET_SECS as i64) * 1_000_000
}

/// A standby status update, wrapped in CopyData, appended to `out`.
pub fn standby_status_update(out: &mut BytesMut, write: Lsn, flush: Lsn, apply: Lsn, reply: bool) {
    use bytes::BufMut;
    out.put_u8(tag::COPY_DATA);
    out.put_i32(4 + 1 + 8 * 4 + 1);
    out.put_u8(tag::STANDBY_STATUS_UPDATE);
    out.put_u64(write.0);
    out.put_u64(flush.0);
    out.put_u64(apply.0);
    out.put_i64(pg_epoch_micros(std::time::SystemTime::now()));
    out.put_u8(u8::from(reply));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_frame_waits_for_a_whole_message() {
        let mut buf = BytesMut::from(&b"Z\0\0\0\x05I"[..]);
        let f = parse_frame(&mut buf).unwrap().unwrap();
        assert_eq!((f.tag, &f.body[..]), (b'Z', &b"I"[..]));
        assert!(buf.is_empty());
        let mut partial = BytesMut::from(&b"Z\0\0\0\x05"[..]);
        assert!(parse_frame(&mut partial).unwrap().is_none());
        assert_eq!(partial.len(), 5, "an incomplete frame is left in place");
    }

    #[test]
    fn parse_frame_rejects_impossible_lengths() {
        for len in [0i32, 3, -1, i32::MAX] {
            let mut buf = BytesMut::new();
            buf.extend_from_slice(b"d");
            buf.extend_from_slice(&len.to_be_bytes());
            assert!(parse_frame(&mut buf).is_err(), "length {len} accepted");
        }
    }

    #[test]
    fn parse_copy_data_reads_xlogdata_and_keepalive() {
        let mut x = vec![b'w'];
        x.extend_from_slice(&1u64.to_be_bytes());
        x.extend_from_slice(&2u64.to_be_bytes());
        x.extend_from_slice(&3i64.to_be_bytes());
        x.extend_from_slice(b"B...");
        match parse_copy_data(Bytes::from(x)).unwrap() {
            ReplicationMessage::XLogData { wal_start, wal_end, data, .. } => {
                assert_eq!((wal_start, wal_end, &data[..]), (Lsn(1), Lsn(2), &b"B..."[..]));
            }
            other => panic!("{other:?}"),
        }
        let mut k = vec![b'k'];
        k.extend_from_slice(&9u64.to_be_bytes());
        k.extend_from_slice(&0i64.to_be_bytes());
        k.push(1);
        assert_eq!(
            parse_copy_data(Bytes::from(k)).unwrap(),
            ReplicationMessage::PrimaryKeepalive { wal_end: Lsn(9), send_time: 0, reply_requested: true }
        );
        assert!(parse_copy_data(Bytes::from_static(b"k\0\0")).is_err());
        assert!(parse_copy_data(Bytes::from_static(b"w\0")).is_err());
        assert!(parse_copy_data(Bytes::new()).is_err());
    }

    #[test]
    fn error_fields_are_parsed() {
        let e = parse_error_fields(b"SERROR\0VERROR\0C55006\0Mreplication slot \"s\" is active for PID 7\0\0");
        assert_eq!((e.severity.as_str(), e.code.as_str()), ("ERROR", "55006"));
        assert!(e.message.contains("is active"));
    }

    #[test]
    fn data_rows_are_parsed_and_checked() {
        let body = Bytes::from_static(b"\0\x02\0\0\0\x02hi\xff\xff\xff\xff");
        assert_eq!(parse_data_row(&body).unwrap(), vec![Some("hi".to_string()), None]);
        assert!(parse_data_row(&Bytes::from_static(b"\0\x02\0\0\0\x09hi")).is_err());
    }
}
