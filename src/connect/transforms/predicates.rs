//! Kafka's predicates (`org.apache.kafka.connect.transforms.predicates.*`): whether a transform
//! applies to a record (`transforms.<alias>.predicate`, inverted by `.negate`).

use regex::Regex;

use super::Options;
use crate::connect::config::{ConfigError, Reader};
use crate::connect::record::Record;
use crate::connect::Value;

const PACKAGE: &str = "org.apache.kafka.connect.transforms.predicates.";

/// The predicates this module implements, by their full class names.
pub const CLASSES: &[&str] = &[
    "org.apache.kafka.connect.transforms.predicates.HasHeaderKey",
    "org.apache.kafka.connect.transforms.predicates.RecordIsTombstone",
    "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
];

#[derive(Debug, Clone)]
pub enum Predicate {
    /// `pattern`, a full match of the topic name.
    TopicNameMatches(Regex),
    /// `name`: the record has at least one header of that name.
    HasHeaderKey(String),
    /// The record's value is null.
    RecordIsTombstone,
}

impl Predicate {
    /// `predicates.<name>.type` and its options under `prefix` (`predicates.<name>.`); `None` for
    /// a class this module does not implement.
    pub fn parse(class: &str, r: &mut Reader<'_>, prefix: &str) -> Result<Option<Predicate>, ConfigError> {
        let mut o = Options { r, prefix };
        Ok(Some(match class.strip_prefix(PACKAGE) {
            Some("TopicNameMatches") => {
                let p = o.required("pattern", "a regular expression the whole topic name must match")?;
                let regex = Regex::new(&format!("^(?:{p})$")).map_err(|e| {
                    o.invalid("pattern", format!("is not a valid regex: {}", crate::connect::config::regex_problem(&e)))
                })?;
                Predicate::TopicNameMatches(regex)
            }
            Some("HasHeaderKey") => Predicate::HasHeaderKey(o.required("name", "the header name to look for")?),
            Some("RecordIsTombstone") => Predicate::RecordIsTombstone,
            _ => return Ok(None),
        }))
    }

    pub fn test(&self, r: &Record) -> bool {
        match self {
            Predicate::TopicNameMatches(re) => re.is_match(&r.topic),
            Predicate::HasHeaderKey(name) => r.headers.iter().any(|h| *h.key == **name),
            Predicate::RecordIsTombstone => r.value.value == Value::Null,
        }
    }
}
