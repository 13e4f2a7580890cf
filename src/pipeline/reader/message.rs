//! The message outbox in the stream: logical decoding messages (pgoutput's `M`, asked for with
//! `messages 'true'`) that `DecodeLogicalDecodingMessageContent` and the Event Router turn into
//! events.
//!
//! - A transactional message arrives between its transaction's BEGIN and COMMIT, in WAL order
//!   with the transaction's rows, and only if the transaction commits. It is an event of its
//!   transaction like an outbox row: the same order, and the position passes it only with the
//!   commit, once the broker acknowledged it.
//! - A non-transactional message (`pg_logical_emit_message(false, …)`) is decoded when it is
//!   written, outside any BEGIN/COMMIT, and is sent even when its transaction rolls back. By
//!   default it is skipped, with a warning (publishing it can publish an event without a committed
//!   change). Under `pgoutbox.messages.non.transactional=publish` it is published as Debezium does,
//!   and stands alone: the position passes it at its own LSN once it is acknowledged.
//! - Messages are not filtered by the publication: the prefix lists select them.

use std::sync::atomic::Ordering::Relaxed;

use super::{now_ms, tolerate_route_error, Reader};
use crate::config::messages::NonTransactional;
use crate::error::RelayError;
use crate::lsn::Lsn;
use crate::outbox::router::Message;
use crate::pgoutput::{self, TupleData, Value};
use crate::pipeline::Item;

impl Reader<'_> {
    /// A logical decoding message at `lsn` (its XLogData's start).
    pub(super) fn on_message(&mut self, m: &pgoutput::Message, lsn: Lsn) -> Result<(), RelayError> {
        // The config outlives the reader: borrowing it through a copy of the reference leaves
        // `self` free for the router.
        let cfg = self.cfg;
        // The capture's lists are these (`config::messages::parse`): a message past here is one it
        // captures.
        if !cfg.message_prefixes.captures(&m.prefix) {
            // Seen and filtered, as Debezium 3.7 counts a message its lists leave out.
            self.metrics.messages_filtered.fetch_add(1, Relaxed);
            self.metrics.events_filtered.fetch_add(1, Relaxed);
            return Ok(());
        }
        let (Some(capture), Some(decode)) = (&cfg.messages, &cfg.router.chain.decode) else {
            return Ok(());
        };
        self.metrics.messages_seen.fetch_add(1, Relaxed);
        self.metrics.records_polled.fetch_add(1, Relaxed);
        if m.transactional {
            if self.published_already(lsn) {
                return Ok(());
            }
        } else {
            if capture.non_transactional == NonTransactional::Skip {
                self.metrics.events_filtered.fetch_add(1, Relaxed);
                tracing::warn!(prefix = %m.prefix, lsn = %m.lsn, "skipping a non-transactional logical decoding message: PostgreSQL sends it even when its transaction rolls back, so publishing it could publish an event without a committed change; emit it with pg_logical_emit_message(true, …), or set pgoutbox.messages.non.transactional=publish to publish such messages as Debezium does");
                return Ok(());
            }
            if self.resume.is_some_and(|r| r.skips_position(m.lsn)) {
                return Ok(());
            }
        }
        let now = now_ms();
        let message = Message { prefix: &m.prefix, content: &m.content };
        let before = self.batch.len();
        match self.router.route_message(decode, &message, now) {
            // A transform dropped it: not Debezium's filtered event (transforms run after it).
            Ok(None) => {}
            Ok(Some(record)) => self.push_routed(record, now),
            Err(e) => {
                let row = TupleData {
                    values: vec![Value::Text(m.prefix.clone().into_bytes().into()), Value::Text(m.content.clone())],
                };
                let columns = ["prefix".to_string(), "content".to_string()];
                let origin = format!("the messages of prefix `{}`", m.prefix);
                let letter = tolerate_route_error(self.cfg, &origin, &columns, &row, e)?;
                self.metrics.route_errors.fetch_add(1, Relaxed);
                self.metrics.record_error(cfg.errors.log);
                if let Some(record) = letter {
                    self.metrics.dead_letters.fetch_add(1, Relaxed);
                    self.push_event(record);
                }
            }
        }
        let published = self.batch.len() > before;
        if m.transactional {
            if self.positions && published {
                let (lsn, changes) = self.change;
                self.batch.push(Item::Progress(Some(super::Partial { xid: self.xid, lsn, changes })));
            }
        } else if published {
            // It stands alone: its own end is a position the checkpoint may confirm.
            let commit_time = crate::postgres::wire::pg_epoch_micros(std::time::SystemTime::now());
            self.batch.push(Item::Commit { end_lsn: m.lsn, commit_time });
        }
        Ok(())
    }
}
