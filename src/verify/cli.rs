//! The `pgoutbox verify` subcommand: its arguments, progress on stderr, the report on stdout and the
//! exit status. Kept here, beside the library it drives, so `main` only names it.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use super::{verify, Options, OrphanPolicy, Progress, ProgressFn, VerifyError};
use crate::config::{Config, RawConfig};

const AFTER_HELP: &str = "\
What is compared:
  rows      the rows still in the outbox table that table.include.list selects (exactly one table),
            with created_at in [--since, --until) when given
  records   the topics those rows route to (route.topic.regex / route.topic.replacement), plus any
            --topic, read from the beginning, or from --since (less 60 s for clock skew; from the
            beginning when table.field.event.timestamp sets the record timestamps)
  matching  by the `id` header against the table.field.event.id column

Findings:
  missing           a row with no record (fails)
  orphans           a record with no row (fails); see --orphans
  duplicates        an id in more than one record (reported; fails only with --fail-on-duplicates)
  order violations  within one partition, the first copy of an aggregate's event after the first
                    copy of an event committed later (fails)

Commit order comes from --order-column, else the transaction commit timestamp when the server has
track_commit_timestamp=on, else a column named seq, sequence or created_at; with none of these the
order check is skipped and the report says so.

Orphans (--orphans):
  window  (default) count only records published within the verified window: from --since, or
          without it from the first record whose row is still in the table, up to --until. Records
          published earlier most likely belong to rows an outbox cleanup deleted; they are reported
          as not counted. A record whose row exists outside the window is never an orphan.
  all     count every record without a row (outboxes that are never cleaned up)
  off     do not look for orphans (outboxes that delete each row in the transaction that inserts it)

Reading stops when every partition reaches the end it had when reading started. Events still
missing there are waited for (the relay may be behind) for at most --idle-ms.

Exit status: 0 clean; 1 missing events, orphans or order violations (or duplicates with
--fail-on-duplicates); 2 configuration or option error; 3 the database or the broker cannot be used.";

/// Arguments of `pgoutbox verify`.
#[derive(Debug, Clone, clap::Args)]
#[command(after_long_help = AFTER_HELP)]
pub struct VerifyArgs {
    /// Connector configuration: the same file `pgoutbox run` reads.
    #[arg(long)]
    pub config: PathBuf,
    /// Override a key, e.g. --set table.include.list=public.outbox (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Only rows with created_at at or after this (any PostgreSQL timestamptz, e.g. 2024-05-01T12:00:00Z).
    #[arg(long, value_name = "TIMESTAMP")]
    pub since: Option<String>,
    /// Only rows with created_at before this.
    #[arg(long, value_name = "TIMESTAMP")]
    pub until: Option<String>,
    /// The column that gives commit order (e.g. a sequence column).
    #[arg(long, value_name = "COLUMN")]
    pub order_column: Option<String>,
    /// Fail (exit 1) on duplicates too.
    #[arg(long)]
    pub fail_on_duplicates: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Also read this topic (repeatable), e.g. one whose rows were all deleted.
    #[arg(long = "topic", value_name = "TOPIC")]
    pub topics: Vec<String>,
    /// Which records without a row count as orphans.
    #[arg(long, value_enum, default_value = "window")]
    pub orphans: OrphanPolicy,
    /// How long to wait for missing events after reading to the end (and for a silent broker).
    #[arg(long, value_name = "MS", default_value = "5000")]
    pub idle_ms: u64,
    /// The consumer's isolation.level: read_committed (what exactly once promises), read_uncommitted
    /// (records of aborted Kafka transactions too), or both. Default: both when the connector runs
    /// exactly once (exactly.once.source.support=enabled), else read_committed.
    #[arg(long, value_enum, value_name = "LEVEL")]
    pub isolation_level: Option<super::IsolationLevels>,
    /// Show progress on stderr even when it is not a terminal.
    #[arg(long)]
    pub progress: bool,
}

fn load(args: &VerifyArgs) -> Result<Config, VerifyError> {
    let mut raw = RawConfig::load(&args.config)?;
    for s in &args.set {
        raw.set(s)?;
    }
    Ok(Config::from_raw(&raw)?)
}

fn print_progress(p: &Progress) {
    eprintln!(
        "verify: {} records read ({:.0}/s), {}/{} partitions at their end, ~{} to go, {} committed event(s) not seen yet",
        p.records,
        p.rate(),
        p.partitions_done,
        p.partitions,
        p.remaining,
        p.missing
    );
}

/// Runs `pgoutbox verify`: the report on stdout, progress and errors on stderr.
pub async fn run(args: VerifyArgs) -> ExitCode {
    let result = async {
        let config = load(&args)?;
        let options = Options {
            since: args.since.clone(),
            until: args.until.clone(),
            order_column: args.order_column.clone(),
            topics: args.topics.clone(),
            orphans: args.orphans,
            idle: Duration::from_millis(args.idle_ms),
            isolation: args.isolation_level,
        };
        let progress: Option<ProgressFn> =
            (args.progress || std::io::stderr().is_terminal()).then(|| Box::new(print_progress) as ProgressFn);
        verify(&config, &options, progress).await
    }
    .await;
    match result {
        Ok(report) => {
            if args.json {
                println!("{}", report.to_json(args.fail_on_duplicates));
            } else {
                print!("{}", report.to_text(args.fail_on_duplicates));
            }
            ExitCode::from(u8::from(report.failed(args.fail_on_duplicates)))
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}
