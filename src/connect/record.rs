//! A Connect record between the Event Router and the converters (`ConnectRecord`): topic,
//! partition, key, value, timestamp and headers as Connect data, which transforms rewrite and the
//! converters finally turn into bytes.

use std::sync::Arc;

use bytes::Bytes;

use super::{ConvertError, Converter, Schema, Value};

/// A schema and a value; `schema` is `None` for schemaless data.
#[derive(Debug, Clone, PartialEq)]
pub struct Data {
    pub schema: Option<Arc<Schema>>,
    pub value: Value,
}

impl Data {
    pub fn new(schema: Arc<Schema>, value: Value) -> Data {
        Data { schema: Some(schema), value }
    }

    /// No schema and a null value (a tombstone's value, a missing key).
    pub fn null() -> Data {
        Data { schema: None, value: Value::Null }
    }

    pub fn schema(&self) -> Option<&Schema> {
        self.schema.as_deref()
    }
}

/// One Connect header: its key and its data.
#[derive(Debug, Clone, PartialEq)]
pub struct Header {
    pub key: Arc<str>,
    pub data: Data,
}

/// A source record as transforms see it.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub topic: Arc<str>,
    /// Set by a `partition` placement or a partitioning transform; otherwise the producer's
    /// partitioner decides.
    pub partition: Option<i32>,
    pub key: Data,
    pub value: Data,
    pub timestamp_ms: i64,
    pub headers: Vec<Header>,
}

/// A record's bytes: what the producer sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Encoded {
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<(Arc<str>, Option<Bytes>)>,
}

/// The converters a connector writes its records with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Converters {
    pub key: Converter,
    pub value: Converter,
    /// `None` is SimpleHeaderConverter.
    pub header: Option<Converter>,
}

impl Converters {
    /// The record's key, value and headers as the converters write them.
    pub fn encode(&self, record: &Record) -> Result<Encoded, ConvertError> {
        // A registry converter's id headers follow the record's own, the key's first: Connect
        // converts the record's headers first, then the key and the value, whose converters append
        // theirs.
        let mut ids = Vec::new();
        let key = self.key.encode_to(&record.topic, record.key.schema(), &record.key.value, &mut ids)?;
        let value = self.value.encode_to(&record.topic, record.value.schema(), &record.value.value, &mut ids)?;
        let mut headers = Vec::with_capacity(record.headers.len() + ids.len());
        for h in &record.headers {
            headers.push((h.key.clone(), Converter::encode_header(self.header.as_ref(), &h.data)?));
        }
        headers.extend(ids);
        Ok(Encoded { key, value, headers })
    }
}
