//! `RegexRouter` and `TimestampRouter`: the topic, rewritten.

use std::sync::Arc;

use regex::Regex;

use super::{Options, TransformError};
use crate::connect::config::ConfigError;
use crate::connect::java::date::{format_simple, simple_date_format, DatePart};
use crate::connect::java::replace;
use crate::connect::record::Record;

/// `regex` (a full match against the topic) and `replacement` (Java's replacement syntax).
#[derive(Debug, Clone)]
pub struct RegexRouter {
    regex: Regex,
    replacement: String,
}

impl RegexRouter {
    pub(super) fn parse(mut o: Options<'_, '_>) -> Result<Self, ConfigError> {
        let source = o.required("regex", "the regular expression the topic must match")?;
        let replacement = o.required("replacement", "the new topic name, with $1 or ${name} for groups")?;
        let regex = Regex::new(&format!("^(?:{source})$")).map_err(|e| {
            o.invalid("regex", format!("is not a valid regex: {}", crate::connect::config::regex_problem(&e)))
        })?;
        Ok(RegexRouter { regex, replacement })
    }

    pub(super) fn apply(&self, r: &mut Record) -> Result<(), TransformError> {
        // A replacement Java refuses (a group the regex does not have) fails the record, as the
        // IllegalArgumentException does in Connect.
        let t = replace::route(&self.regex, &self.replacement, &r.topic).map_err(TransformError)?;
        if *t != *r.topic {
            r.topic = Arc::from(t);
        }
        Ok(())
    }
}

/// `topic.format` (`${topic}` and `${timestamp}`) and `timestamp.format` (a `SimpleDateFormat`
/// pattern, in UTC).
#[derive(Debug, Clone)]
pub struct TimestampRouter {
    topic_format: String,
    timestamp_format: Vec<DatePart>,
}

impl TimestampRouter {
    pub(super) fn parse(mut o: Options<'_, '_>) -> Result<Self, ConfigError> {
        let topic_format = o.str("topic.format").unwrap_or_else(|| "${topic}-${timestamp}".to_string());
        let pattern = o.str("timestamp.format").unwrap_or_else(|| "yyyyMMdd".to_string());
        let timestamp_format = simple_date_format(&pattern).map_err(|why| {
            o.invalid("timestamp.format", format!("is not a date pattern Java accepts: it has {why}"))
        })?;
        Ok(TimestampRouter { topic_format, timestamp_format })
    }

    pub(super) fn apply(&self, r: &mut Record) -> Result<(), TransformError> {
        let stamp = format_simple(&self.timestamp_format, r.timestamp_ms);
        r.topic = Arc::from(self.topic_format.replace("${topic}", &r.topic).replace("${timestamp}", &stamp));
        Ok(())
    }
}
