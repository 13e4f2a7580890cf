//! `pgoutbox verify`: compares what the database committed with what the broker holds, for the same
//! connector configuration.
//!
//! ```text
//!  outbox table ──rows (id, route-by, key, commit order)──▶ Comparison ◀──records (id header)── routed topics
//!   (database.rs)                                          (compare.rs)                          (broker.rs)
//!                                          unmatched ids ──▶ looked up in the whole table ──▶ Report (report.rs)
//! ```
//!
//! 1. The rows still in the outbox table (optionally only those with `created_at` in
//!    [`--since`, `--until`)) are read in one query, each routed to its topic as the Event Router
//!    does; their distinct topics, plus any `--topic`, are what is read.
//! 2. The topics are read from the beginning, or from `--since` (less a clock-skew margin), each
//!    record matched to its row by the `id` header.
//! 3. Findings: *missing* (a row, no record), *orphans* (a record, no row), *duplicates* (an id more
//!    than once), *order violations* (per partition and aggregate, first copies out of commit order).
//!
//! Orphans need care: an outbox is usually cleaned up, and a deleted row's record looks exactly
//! like an orphan. So by default (`OrphanPolicy::Window`) only records published within the verified
//! window count, and a record whose row exists outside the window (or was committed after the rows
//! were read) never does.

pub mod broker;
pub mod cli;
pub mod compare;
pub mod database;
pub mod report;

use std::time::Duration;

use crate::config::{Config, ConfigError};
use crate::postgres::setup::connect_sql;
use crate::postgres::{ConnectParams, PgError};

pub use broker::Progress;
pub use compare::{Comparison, OrphanPolicy, TimeRange};
pub use report::Report;

#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// An option or the table does not fit: what to change is in the text.
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Postgres(#[from] PgError),
    #[error("{what} from Kafka at {servers}: {source}; check bootstrap.servers and that the broker is running")]
    Broker {
        servers: String,
        what: String,
        #[source]
        source: Box<rdkafka::error::KafkaError>,
    },
}

impl VerifyError {
    /// 2 for configuration and options, 3 when the database or the broker cannot be used.
    pub fn exit_code(&self) -> u8 {
        match self {
            VerifyError::Config(_) | VerifyError::Usage(_) => 2,
            VerifyError::Postgres(_) | VerifyError::Broker { .. } => 3,
        }
    }
}

/// What to verify, beyond the connector configuration.
#[derive(Debug, Clone)]
pub struct Options {
    /// Only rows with `created_at` at or after this (a PostgreSQL timestamptz literal).
    pub since: Option<String>,
    /// Only rows with `created_at` before this.
    pub until: Option<String>,
    /// The column that gives commit order; otherwise one is chosen (see `database::order_source`).
    pub order_column: Option<String>,
    /// Topics to read besides the routed topics of the rows.
    pub topics: Vec<String>,
    pub orphans: OrphanPolicy,
    /// How long to wait for missing events after reaching the ends, and for a silent broker before.
    pub idle: Duration,
    /// Which `isolation.level`s to read at; `None`: `read_committed`, and `read_uncommitted` as
    /// well when the connector runs exactly once.
    pub isolation: Option<IsolationLevels>,
}

/// `--isolation-level`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum IsolationLevels {
    #[value(name = "read_committed")]
    ReadCommitted,
    #[value(name = "read_uncommitted")]
    ReadUncommitted,
    /// Both: the report is read_committed's, with read_uncommitted's missing and duplicates beside.
    Both,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            since: None,
            until: None,
            order_column: None,
            topics: Vec::new(),
            orphans: OrphanPolicy::Window,
            idle: Duration::from_secs(5),
            isolation: None,
        }
    }
}

pub type ProgressFn = Box<dyn FnMut(&Progress) + Send>;

/// Verifies the outbox of `config` against its topics.
pub async fn verify(config: &Config, options: &Options, progress: Option<ProgressFn>) -> Result<Report, VerifyError> {
    if config.messages.is_some() && config.tables.none {
        return Err(VerifyError::Usage(format!("verify audits an outbox table against the broker, and this messages-only connector has none. {MESSAGES_NOT_AUDITED}")));
    }
    let sql = connect_sql(&ConnectParams::from_config(&config.database)).await?;
    let table = database::outbox_table(&sql, config).await?;
    database::check_columns(&table, &config.router, options.since.is_some() || options.until.is_some())?;
    let (since, until) = bounds(&sql, options).await?;
    let order = database::order_source(&sql, &table, options.order_column.as_deref()).await?;

    let levels = options.isolation.unwrap_or(match config.exactly_once {
        Some(_) => IsolationLevels::Both,
        None => IsolationLevels::ReadCommitted,
    });
    let main = match levels {
        IsolationLevels::ReadUncommitted => broker::Isolation::ReadUncommitted,
        _ => broker::Isolation::ReadCommitted,
    };
    let rows = Rows { sql: &sql, table: &table, config, order: &order, window: (since.as_ref(), until.as_ref()) };
    let cmp = rows.comparison().await?;
    let mut topics = cmp.committed_topics();
    topics.extend(options.topics.iter().cloned());
    topics.sort();
    topics.dedup();

    let plan = broker::ReadPlan {
        kafka: config.kafka.clone(),
        topics: topics.clone(),
        start: start_at(config, since.as_ref()),
        idle: options.idle,
        isolation: main,
    };
    let uncommitted_plan = (levels == IsolationLevels::Both)
        .then(|| broker::ReadPlan { isolation: broker::Isolation::ReadUncommitted, ..plan.clone() });
    let (cmp, summary) = read_broker(plan, cmp, progress).await?;

    let window = TimeRange { from_ms: since.as_ref().map(|b| b.ms), until_ms: until.as_ref().map(|b| b.ms) };
    let candidates = cmp.orphan_candidates(options.orphans, window);
    let elsewhere = database::existing_ids(&sql, &table, &config.router.field_event_id, &candidates).await?;
    let by_commit_lsn = cmp.ordered_by_commit_lsn();
    let outcome = cmp.finish(options.orphans, window, &elsewhere);
    let mut isolation = vec![IsolationFigures::of(main, &outcome)];
    if let Some(plan) = uncommitted_plan {
        let (cmp, _) = read_broker(plan, rows.comparison().await?, None).await?;
        let other = cmp.finish(options.orphans, window, &elsewhere);
        isolation.push(IsolationFigures::of(broker::Isolation::ReadUncommitted, &other));
    }

    let mut notes = notes(config, &order, &outcome, &summary, options);
    if let (Some(column), true) = (&config.router.field_event_timestamp, since.is_some()) {
        notes.push(format!("record timestamps come from column `{column}` (table.field.event.timestamp), so the topics were read from the beginning"));
    }
    let order_source = if by_commit_lsn {
        "the records' commit LSN header (exact commit order)".to_string()
    } else {
        order.describe()
    };
    Ok(Report {
        table: table.display(),
        topics,
        since: options.since.clone(),
        until: options.until.clone(),
        order_source,
        outcome,
        notes,
        isolation,
    })
}

/// What the rows of one verification are read with.
struct Rows<'a> {
    sql: &'a tokio_postgres::Client,
    table: &'a database::OutboxTable,
    config: &'a Config,
    order: &'a database::OrderSource,
    window: (Option<&'a database::Bound>, Option<&'a database::Bound>),
}

impl Rows<'_> {
    /// A comparison holding the committed rows, ready for the records.
    async fn comparison(&self) -> Result<Comparison, VerifyError> {
        let mut cmp = Comparison::new();
        cmp.use_commit_lsn_header(self.config.commit_lsn_header.clone());
        let published = self.config.polling.as_ref().map(|p| p.published_column.as_str());
        database::read_rows(self.sql, self.table, &self.config.router, self.order, self.window, published, |e| {
            cmp.add_committed(e)
        })
        .await?;
        Ok(cmp)
    }
}

/// Missing events and duplicates as a consumer at one `isolation.level` sees them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsolationFigures {
    pub level: &'static str,
    pub missing: u64,
    pub duplicates: u64,
    pub duplicate_records: u64,
}

impl IsolationFigures {
    fn of(level: broker::Isolation, o: &compare::Outcome) -> Self {
        IsolationFigures {
            level: level.name(),
            missing: o.missing.count,
            duplicates: o.duplicates.count,
            duplicate_records: o.duplicate_records,
        }
    }
}

/// Record timestamps are the relay's publish time, never before the row's creation, unless
/// table.field.event.timestamp sets them from a column: then they say nothing about where the
/// window's records start.
fn start_at(config: &Config, since: Option<&database::Bound>) -> broker::StartAt {
    match since {
        Some(s) if config.router.field_event_timestamp.is_none() => {
            broker::StartAt::Time(s.ms - broker::CLOCK_SKEW.as_millis() as i64)
        }
        _ => broker::StartAt::Beginning,
    }
}

/// Reads the topics on a blocking thread (the consumer polls).
async fn read_broker(
    plan: broker::ReadPlan,
    mut cmp: Comparison,
    progress: Option<ProgressFn>,
) -> Result<(Comparison, broker::ReadSummary), VerifyError> {
    let mut progress = progress.unwrap_or_else(|| Box::new(|_| {}));
    let read = tokio::task::spawn_blocking(move || broker::read(&plan, &mut cmp, &mut *progress).map(|s| (cmp, s)));
    match read.await {
        Ok(r) => r,
        // Only a panic ends the blocking task early: let it continue as the panic it is.
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    }
}

/// `--since` and `--until` as PostgreSQL reads them.
async fn bounds(
    sql: &tokio_postgres::Client,
    options: &Options,
) -> Result<(Option<database::Bound>, Option<database::Bound>), VerifyError> {
    let since = match &options.since {
        Some(t) => Some(database::bound(sql, "--since", t).await?),
        None => None,
    };
    let until = match &options.until {
        Some(t) => Some(database::bound(sql, "--until", t).await?),
        None => None,
    };
    if let (Some(s), Some(u)) = (&since, &until) {
        if s.ms >= u.ms {
            return Err(VerifyError::Usage(format!("--since `{}` is not before --until `{}`", s.text, u.text)));
        }
    }
    Ok((since, until))
}

/// Why the message outbox's events are not audited, and how to audit them instead.
const MESSAGES_NOT_AUDITED: &str = "Logical decoding messages cannot be read back once published: they live only in the WAL, which PostgreSQL recycles past the slot's confirmed position, and no table keeps them. To audit them, have the application write each event's id to a table in the same transaction as the message (the ids committed), and compare those ids with the `id` headers in the topics; docs/operations.md shows the query";

fn notes(
    config: &Config,
    order: &database::OrderSource,
    o: &compare::Outcome,
    read: &broker::ReadSummary,
    options: &Options,
) -> Vec<String> {
    let mut notes = Vec::new();
    if config.messages.is_some() {
        notes.push(format!("only the outbox table's events were audited, not the connector's logical decoding messages. {MESSAGES_NOT_AUDITED}"));
    }
    if *order == database::OrderSource::None {
        notes.push("order not checked: no --order-column, track_commit_timestamp is off, and the table has no seq, sequence or created_at column".to_string());
    }
    for t in &read.absent_topics {
        notes.push(format!("topic `{t}` does not exist on the broker"));
    }
    if let Some((topic, p, next, end)) = read.incomplete.first() {
        notes.push(format!(
            "nothing arrived for {:?}, so {} partition(s) were not read to their end (e.g. {topic}[{p}] at offset {next} of {end}); the results may be incomplete",
            options.idle,
            read.incomplete.len()
        ));
    }
    if o.missing.count > 0 && read.incomplete.is_empty() {
        notes.push(format!(
            "missing events were waited for {:?} after reading to the end; if the relay is behind, retry with a larger --idle-ms or an --until in the past",
            options.idle
        ));
    }
    match options.orphans {
        OrphanPolicy::Off => notes.push("orphans not checked (--orphans off)".to_string()),
        OrphanPolicy::Window if o.orphan_window.is_none() => notes.push(
            "orphans not checked: no record matched a row still in the table, so there is no window to count them in (records may belong to rows deleted by outbox cleanup); give --since, or --orphans all if the outbox is never cleaned up".to_string(),
        ),
        _ => {}
    }
    if o.pending > 0 {
        notes.push(format!(
            "{} row(s) not yet published by the polling relay (published column null, no record): waiting for a poll, not counted as missing",
            o.pending
        ));
    }
    if o.unmarked_published > 0 {
        notes.push(format!(
            "{} row(s) are in the topics but not marked published: a batch in flight, or one acknowledged before a crash (the polling relay publishes them again)",
            o.unmarked_published
        ));
    }
    if o.rows_outside_window > 0 {
        notes.push(format!(
            "{} event(s) in Kafka have a row outside the verified rows (outside --since/--until, or committed after the rows were read); not counted",
            o.rows_outside_window
        ));
    }
    notes
}

#[cfg(test)]
mod tests;
