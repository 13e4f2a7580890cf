//! Sans-IO decoder of PostgreSQL's `pgoutput` logical replication protocol, version 1.
//!
//! Spec: PostgreSQL docs, "Logical Replication Message Formats" (protocol-logicalrep-message-formats).
//! Each `XLogData` payload holds exactly one message; its first byte is the tag. Protocol version 1 has
//! no streaming of in-progress transactions: a transaction arrives whole, after its commit, as
//! `Begin`, changes, `Commit`.
//!
//! Nothing here does I/O. Every read checks the remaining length first, and no allocation is sized from a
//! count on the wire before the bytes that count describes are known to be present (each column needs at
//! least one byte), so hostile input yields a `DecodeError`, not a panic or a huge allocation.
//! Text-format column values are kept as `Bytes` slices of the `XLogData` buffer: no copy.

mod cursor;

use bytes::Bytes;

use crate::lsn::Lsn;
use cursor::Cursor;

/// A PostgreSQL object identifier.
pub type Oid = u32;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DecodeError {
    #[error("pgoutput message is truncated: {what} needs {needed} bytes, {available} left")]
    Truncated { what: &'static str, needed: usize, available: usize },
    #[error("pgoutput message is empty")]
    Empty,
    #[error("unknown pgoutput message tag {tag:#04x} ({})", *tag as char)]
    UnknownTag { tag: u8 },
    #[error("pgoutput {what} string has no terminating NUL")]
    UnterminatedString { what: &'static str },
    #[error("pgoutput {what} is not valid UTF-8")]
    InvalidUtf8 { what: &'static str },
    #[error("pgoutput {what}: unexpected byte {byte:#04x}")]
    UnexpectedByte { what: &'static str, byte: u8 },
    #[error("pgoutput {what}: invalid count {count}")]
    InvalidCount { what: &'static str, count: i64 },
    #[error("pgoutput message has {0} trailing bytes")]
    TrailingBytes(usize),
}

#[derive(Debug, Clone, PartialEq)]
pub enum LogicalMessage {
    Begin(Begin),
    Commit(Commit),
    Origin(Origin),
    Relation(Relation),
    Type(Type),
    Insert(Insert),
    Update(Update),
    Delete(Delete),
    Truncate(Truncate),
    Message(Message),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Begin {
    /// LSN of the transaction's commit record (its start, not its end).
    pub final_lsn: Lsn,
    /// Commit time, microseconds since 2000-01-01 UTC.
    pub commit_time: i64,
    pub xid: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Commit {
    pub flags: u8,
    /// LSN of the commit record.
    pub commit_lsn: Lsn,
    /// End of the commit record: the position to confirm once the transaction is fully handled, because
    /// the server skips a transaction whose commit record starts before the slot's confirmed position.
    pub end_lsn: Lsn,
    pub commit_time: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    pub commit_lsn: Lsn,
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relation {
    pub oid: Oid,
    pub namespace: String,
    pub name: String,
    pub replica_identity: u8,
    pub columns: Vec<Column>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// 1 when the column is part of the replica identity key.
    pub flags: u8,
    pub name: String,
    pub type_oid: Oid,
    pub type_modifier: i32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Type {
    pub oid: Oid,
    pub namespace: String,
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Insert {
    pub relation: Oid,
    pub new: TupleData,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Update {
    pub relation: Oid,
    /// The old key (`K`) or old full row (`O`), when the replica identity sends one.
    pub old: Option<TupleData>,
    pub new: TupleData,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delete {
    pub relation: Oid,
    pub old: TupleData,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Truncate {
    pub options: u8,
    pub relations: Vec<Oid>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub transactional: bool,
    pub lsn: Lsn,
    pub prefix: String,
    pub content: Bytes,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TupleData {
    pub values: Vec<Value>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Null,
    /// A TOASTed value that did not change (only in UPDATE): the server did not send it.
    UnchangedToast,
    /// Text output of the type's output function (pgoutput's default format).
    Text(Bytes),
    Binary(Bytes),
}

/// Decodes one pgoutput message (the payload of one `XLogData`).
pub fn decode(data: Bytes) -> Result<LogicalMessage, DecodeError> {
    let mut c = Cursor::new(data);
    if c.remaining() == 0 {
        return Err(DecodeError::Empty);
    }
    let tag = c.u8("tag")?;
    let msg = match tag {
        b'B' => LogicalMessage::Begin(Begin {
            final_lsn: Lsn(c.u64("Begin.final_lsn")?),
            commit_time: c.i64("Begin.commit_time")?,
            xid: c.u32("Begin.xid")?,
        }),
        b'C' => LogicalMessage::Commit(Commit {
            flags: c.u8("Commit.flags")?,
            commit_lsn: Lsn(c.u64("Commit.commit_lsn")?),
            end_lsn: Lsn(c.u64("Commit.end_lsn")?),
            commit_time: c.i64("Commit.commit_time")?,
        }),
        b'O' => LogicalMessage::Origin(Origin {
            commit_lsn: Lsn(c.u64("Origin.commit_lsn")?),
            name: c.cstr("Origin.name")?,
        }),
        b'R' => LogicalMessage::Relation(relation(&mut c)?),
        b'Y' => LogicalMessage::Type(Type {
            oid: c.u32("Type.oid")?,
            namespace: c.cstr("Type.namespace")?,
            name: c.cstr("Type.name")?,
        }),
        b'I' => {
            let relation = c.u32("Insert.relation")?;
            expect(&mut c, b'N', "Insert tuple marker")?;
            LogicalMessage::Insert(Insert { relation, new: tuple(&mut c)? })
        }
        b'U' => LogicalMessage::Update(update(&mut c)?),
        b'D' => LogicalMessage::Delete(delete(&mut c)?),
        b'T' => LogicalMessage::Truncate(truncate(&mut c)?),
        b'M' => LogicalMessage::Message(message(&mut c)?),
        tag => return Err(DecodeError::UnknownTag { tag }),
    };
    if c.remaining() != 0 {
        return Err(DecodeError::TrailingBytes(c.remaining()));
    }
    Ok(msg)
}

fn update(c: &mut Cursor) -> Result<Update, DecodeError> {
    let relation = c.u32("Update.relation")?;
    let mut marker = c.u8("Update tuple marker")?;
    let mut old = None;
    if marker == b'K' || marker == b'O' {
        old = Some(tuple(c)?);
        marker = c.u8("Update new tuple marker")?;
    }
    if marker != b'N' {
        return Err(DecodeError::UnexpectedByte { what: "Update new tuple marker", byte: marker });
    }
    Ok(Update { relation, old, new: tuple(c)? })
}

fn delete(c: &mut Cursor) -> Result<Delete, DecodeError> {
    let relation = c.u32("Delete.relation")?;
    let marker = c.u8("Delete tuple marker")?;
    if marker != b'K' && marker != b'O' {
        return Err(DecodeError::UnexpectedByte { what: "Delete tuple marker", byte: marker });
    }
    Ok(Delete { relation, old: tuple(c)? })
}

fn truncate(c: &mut Cursor) -> Result<Truncate, DecodeError> {
    let count = c.u32("Truncate.count")?;
    let options = c.u8("Truncate.options")?;
    // Each OID is 4 bytes: check they are all present before allocating for them.
    if (count as usize).saturating_mul(4) > c.remaining() {
        return Err(DecodeError::InvalidCount { what: "Truncate relations", count: i64::from(count) });
    }
    let mut relations = Vec::with_capacity(count as usize);
    for _ in 0..count {
        relations.push(c.u32("Truncate.relation")?);
    }
    Ok(Truncate { options, relations })
}

fn message(c: &mut Cursor) -> Result<Message, DecodeError> {
    let flags = c.u8("Message.flags")?;
    let lsn = Lsn(c.u64("Message.lsn")?);
    let prefix = c.cstr("Message.prefix")?;
    let len = c.u32("Message.length")? as usize;
    let content = c.bytes(len, "Message.content")?;
    Ok(Message { transactional: flags & 1 == 1, lsn, prefix, content })
}

fn expect(c: &mut Cursor, want: u8, what: &'static str) -> Result<(), DecodeError> {
    match c.u8(what)? {
        b if b == want => Ok(()),
        byte => Err(DecodeError::UnexpectedByte { what, byte }),
    }
}

fn relation(c: &mut Cursor) -> Result<Relation, DecodeError> {
    let oid = c.u32("Relation.oid")?;
    let namespace = c.cstr("Relation.namespace")?;
    let name = c.cstr("Relation.name")?;
    let replica_identity = c.u8("Relation.replica_identity")?;
    let count = c.i16("Relation.column_count")?;
    // A column needs at least 1 + 1 + 4 + 4 bytes (flags, empty name, type, modifier).
    if count < 0 || (count as usize) * 10 > c.remaining() {
        return Err(DecodeError::InvalidCount { what: "Relation columns", count: i64::from(count) });
    }
    let mut columns = Vec::with_capacity(count as usize);
    for _ in 0..count {
        columns.push(Column {
            flags: c.u8("Column.flags")?,
            name: c.cstr("Column.name")?,
            type_oid: c.u32("Column.type_oid")?,
            type_modifier: c.i32("Column.type_modifier")?,
        });
    }
    Ok(Relation { oid, namespace, name, replica_identity, columns })
}

fn tuple(c: &mut Cursor) -> Result<TupleData, DecodeError> {
    let count = c.i16("TupleData.column_count")?;
    // Every column is at least its one-byte kind.
    if count < 0 || count as usize > c.remaining() {
        return Err(DecodeError::InvalidCount { what: "TupleData columns", count: i64::from(count) });
    }
    let mut values = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let value = match c.u8("TupleData column kind")? {
            b'n' => Value::Null,
            b'u' => Value::UnchangedToast,
            kind @ (b't' | b'b') => {
                let len = c.i32("TupleData value length")?;
                if len < 0 {
                    return Err(DecodeError::InvalidCount { what: "TupleData value length", count: i64::from(len) });
                }
                let data = c.bytes(len as usize, "TupleData value")?;
                if kind == b't' {
                    Value::Text(data)
                } else {
                    Value::Binary(data)
                }
            }
            byte => return Err(DecodeError::UnexpectedByte { what: "TupleData column kind", byte }),
        };
        values.push(value);
    }
    Ok(TupleData { values })
}

#[cfg(test)]
mod tests;
