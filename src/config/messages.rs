//! The message outbox's keys: which logical decoding messages the connector captures
//! (`message.prefix.include.list` / `message.prefix.exclude.list`, Debezium's), and what happens to
//! a non-transactional one (`pgoutbox.messages.non.transactional`, pgoutbox's own).
//!
//! Messages are captured only when `DecodeLogicalDecodingMessageContent` runs before the Event
//! Router: pgoutbox relays outbox events, and only that transform makes a message one. Without it
//! Debezium would publish each message as a raw record to `<topic.prefix>.message` (B-17).

use regex::Regex;

use crate::connect::{ConfigError, Reader};

use super::{invalid, polling::RelayKind};

/// What a non-transactional message (`pg_logical_emit_message(false, …)`) becomes. PostgreSQL
/// decodes it at once, even when its transaction later rolls back: publishing it can publish an
/// event without a committed change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NonTransactional {
    /// The default: skipped, with a warning naming its prefix and LSN.
    Skip,
    /// Published as Debezium publishes it, on its own, at its own position.
    Publish,
}

/// Debezium's message prefix lists on their own: whatever pgoutbox relays, Debezium counts a
/// message they leave out as a filtered event, and pgoutbox's metrics do the same.
#[derive(Debug, Clone, Default)]
pub struct Prefixes {
    pub include: Vec<Regex>,
    pub exclude: Vec<Regex>,
}

impl Prefixes {
    /// Whether either list is set.
    pub fn is_set(&self) -> bool {
        !self.include.is_empty() || !self.exclude.is_empty()
    }

    /// Whether messages with this prefix pass the lists.
    pub fn captures(&self, prefix: &str) -> bool {
        if !self.include.is_empty() {
            return self.include.iter().any(|r| r.is_match(prefix));
        }
        !self.exclude.iter().any(|r| r.is_match(prefix))
    }
}

#[derive(Debug, Clone)]
pub struct MessageCapture {
    /// Anchored, case-insensitive, as Debezium matches them; at most one of the two lists is set.
    pub prefixes: Prefixes,
    pub non_transactional: NonTransactional,
}

impl MessageCapture {
    /// Whether messages with this prefix are captured.
    pub fn captures(&self, prefix: &str) -> bool {
        self.prefixes.captures(prefix)
    }
}

pub const NON_TRANSACTIONAL_KEY: &str = "pgoutbox.messages.non.transactional";

/// The capture, `Some` when the chain decodes messages (`decodes`); `None` otherwise, with a warning
/// for each message key set that then changes nothing.
pub fn parse(
    r: &mut Reader<'_>,
    decodes: bool,
    relay: RelayKind,
) -> Result<(Option<MessageCapture>, Prefixes), ConfigError> {
    let include = r.regex_list("message.prefix.include.list")?;
    let exclude = r.regex_list("message.prefix.exclude.list")?;
    if !include.is_empty() && !exclude.is_empty() {
        return Err(invalid(
            "message.prefix.exclude.list",
            "cannot be set together with message.prefix.include.list (Debezium refuses both too); keep one",
        ));
    }
    let non_transactional = r.choice(
        NON_TRANSACTIONAL_KEY,
        NonTransactional::Skip,
        &[("skip", NonTransactional::Skip), ("publish", NonTransactional::Publish)],
    )?;
    if !decodes {
        for key in ["message.prefix.include.list", "message.prefix.exclude.list", NON_TRANSACTIONAL_KEY] {
            if r.has(key) {
                r.warn(format!("{key} changes nothing: pgoutbox relays logical decoding messages only through a DecodeLogicalDecodingMessageContent transform before the Event Router"));
            }
        }
        return Ok((None, Prefixes { include, exclude }));
    }
    if relay == RelayKind::Polling {
        return Err(invalid(
            "transforms",
            "DecodeLogicalDecodingMessageContent needs the log-tailing relay: logical decoding messages live in the WAL only, which the polling relay does not read; remove the transform or set pgoutbox.relay=log_tailing",
        ));
    }
    let prefixes = Prefixes { include, exclude };
    Ok((Some(MessageCapture { prefixes: prefixes.clone(), non_transactional }), prefixes))
}
