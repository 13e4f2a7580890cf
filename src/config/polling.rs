//! `pgoutbox.relay`: which relay publishes the outbox, and the polling relay's own options.
//!
//! The log-tailing relay (the default) reads the replication stream. The polling relay reads the
//! table: it selects unpublished rows, publishes them, and sets their `published_at` once the broker
//! acknowledged them (see `pipeline::polling`). Everything after the row (Event Router, converters,
//! transforms, producer, dead letters) is the same for both.

use std::time::Duration;

use crate::connect::{ConfigError, Reader};

/// `pgoutbox.relay`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RelayKind {
    /// `log_tailing` (the default): the logical replication stream, progress in the slot.
    LogTailing,
    /// `polling`: the table itself, progress in each row's `published_at`.
    Polling,
}

/// `pgoutbox.polling.ordering`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ordering {
    /// `per_aggregate` (the default): the aggregate ids are hashed into `partitions`, each owned by
    /// one live instance at a time, so an aggregate's rows are published by one poller, in order.
    PerAggregate,
    /// `none`: every instance takes any unpublished row (`FOR NO KEY UPDATE SKIP LOCKED`). Faster with many
    /// instances, but an aggregate's events can be published out of order (the seed's warning).
    None,
}

#[derive(Debug, Clone)]
pub struct PollingConfig {
    /// `poll.interval.ms` (Debezium's key, read by the polling relay only; default 100 ms): how long
    /// the relay waits after a poll that found less than a full batch.
    pub interval: Duration,
    /// `max.batch.size` (Debezium's key and default, 2048): rows per poll, published and marked in
    /// one transaction.
    pub batch_size: i64,
    /// `pgoutbox.polling.ack.timeout.ms` (default 60 s): how long a batch waits for Kafka without an
    /// acknowledgement before it is rolled back and this instance hands its partitions over.
    pub ack_timeout: Duration,
    /// `pgoutbox.polling.published.column` (default `published_at`): set when the broker has
    /// acknowledged the row's record; rows where it is null are unpublished.
    pub published_column: String,
    /// `pgoutbox.polling.order.column`: the column rows are published in (ascending), a sequence or
    /// identity column. Unset: the event id column when it is an integer. `xmin` ([`XMIN_ORDER`])
    /// names the inserting transactions' order, which `ordering=per_aggregate` takes only when named
    /// (see `postgres::polling::order`); with `ordering=none` it is the default for other ids.
    pub order_column: Option<String>,
    pub ordering: Ordering,
    /// `pgoutbox.polling.partitions` (default 1): how many parts the aggregate ids are hashed into;
    /// each is owned by one instance at a time. Every instance must use the same number.
    pub partitions: i32,
    /// `pgoutbox.polling.timestamp.column`: a column dating each row (a timestamp, or epoch
    /// milliseconds), for the age of the oldest unpublished row. Unset: `table.field.event.timestamp`.
    pub timestamp_column: Option<String>,
    /// `pgoutbox.polling.notify.channel` (off by default): a channel to LISTEN on; a NOTIFY on it
    /// wakes the poller at once instead of after `poll.interval.ms`.
    pub notify_channel: Option<String>,
}

/// `pgoutbox.polling.order.column=xmin`: the inserting transactions' order (a system column, so no
/// table has a column of that name), for those who accept that it reverses rows written in
/// savepoints and can reorder one transaction's rows after vacuum reused space.
pub const XMIN_ORDER: &str = "xmin";

/// The polling relay's own keys (it also reads Debezium's `poll.interval.ms` and `max.batch.size`).
const POLLING_KEYS: [&str; 7] = [
    "pgoutbox.polling.timestamp.column",
    "pgoutbox.polling.partitions",
    "pgoutbox.polling.ordering",
    "pgoutbox.polling.order.column",
    "pgoutbox.polling.published.column",
    "pgoutbox.polling.notify.channel",
    "pgoutbox.polling.ack.timeout.ms",
];

/// Reads `pgoutbox.relay` and, for the polling relay, its options. Returns `None` for the
/// log-tailing relay, whose keys `poll.interval.ms` and `max.batch.size` then stay ignored.
pub fn parse(r: &mut Reader<'_>) -> Result<(RelayKind, Option<PollingConfig>), ConfigError> {
    let kind = r.choice(
        "pgoutbox.relay",
        RelayKind::LogTailing,
        &[("log_tailing", RelayKind::LogTailing), ("polling", RelayKind::Polling)],
    )?;
    if kind == RelayKind::LogTailing {
        for k in POLLING_KEYS {
            if r.has(k) {
                r.consume(k);
                r.warn(format!(
                    "{k} is set but pgoutbox.relay is log_tailing: it applies to pgoutbox.relay=polling only"
                ));
            }
        }
        return Ok((kind, None));
    }
    let interval = r.millis_or("poll.interval.ms", 100)?;
    let batch_size: i64 = r.int_or("max.batch.size", 2048, "a number of rows")?;
    if batch_size <= 0 {
        return Err(ConfigError::invalid("max.batch.size", "must be at least 1"));
    }
    let ack_timeout = r.millis_or("pgoutbox.polling.ack.timeout.ms", 60_000)?;
    if ack_timeout < Duration::from_secs(1) {
        return Err(ConfigError::invalid("pgoutbox.polling.ack.timeout.ms", "must be at least 1000"));
    }
    let partitions: i32 = r.int_or("pgoutbox.polling.partitions", 1, "a number of partitions")?;
    if !(1..=1024).contains(&partitions) {
        return Err(ConfigError::invalid("pgoutbox.polling.partitions", "must be between 1 and 1024"));
    }
    let ordering = r.choice(
        "pgoutbox.polling.ordering",
        Ordering::PerAggregate,
        &[("per_aggregate", Ordering::PerAggregate), ("none", Ordering::None)],
    )?;
    let column = |r: &mut Reader<'_>, key: &str| -> Result<Option<String>, ConfigError> {
        match r.str(key).map(str::trim) {
            None | Some("") => Ok(None),
            Some(c) if c.contains('\0') => Err(ConfigError::invalid(key, "contains a NUL character")),
            Some(c) => Ok(Some(c.to_string())),
        }
    };
    let published_column = column(r, "pgoutbox.polling.published.column")?.unwrap_or_else(|| "published_at".into());
    let order_column = column(r, "pgoutbox.polling.order.column")?;
    let notify_channel = column(r, "pgoutbox.polling.notify.channel")?;
    let timestamp_column = column(r, "pgoutbox.polling.timestamp.column")?;
    Ok((
        kind,
        Some(PollingConfig {
            interval,
            batch_size,
            ack_timeout,
            published_column,
            order_column,
            ordering,
            partitions,
            notify_channel,
            timestamp_column,
        }),
    ))
}
