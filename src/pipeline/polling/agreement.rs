//! Instances that would break each other's order refuse to start beside each other.
//!
//! Per-aggregate order across instances rests on every instance hashing the aggregates the same way
//! and owning partitions under the same advisory lock namespace (`ownership`). An instance that
//! disagrees runs beside the others without any error and breaks it: one with
//! `pgoutbox.polling.ordering=none` takes any row, one with another `pgoutbox.polling.partitions`
//! hashes an aggregate into another partition, one whose include lists select another set of tables
//! owns partitions under another namespace, so two instances read the same aggregate at once.
//!
//! So every instance announces its settings for each table it polls, where the others see them: a
//! shared advisory lock per table whose key carries the settings (`postgres::polling::announce`),
//! held by the polling connection and gone with it. At start an instance announces, then reads the
//! other sessions' announcements, and refuses to go on when one that polls any of its tables
//! disagrees, naming the setting. Announcing first means two disagreeing instances starting at the
//! same moment both see each other (both refuse); a running instance is never stopped by a newcomer.
//!
//! Session advisory locks need a session: behind a pooler in transaction mode (pgbouncer's
//! `pool_mode=transaction`) the statements of one connection run on whichever server connection is
//! free, and the locks stay with a server connection other clients then use. It is found before
//! anything is published: the backend answering changes between two transactions, or a second
//! connection is answered by the same backend, or the backend answering does not hold the lock this
//! session just took, or a statement this session prepared is gone when it runs (the server keeps
//! them for the session; a pooler sends the execution to another server connection).

use tokio_postgres::Client;

use crate::config::polling::{Ordering, PollingConfig};
use crate::error::RelayError;
use crate::postgres::polling::{self as sql_locks, Announcement, PolledTable};
use crate::postgres::setup::{self, SetupError, SetupFailure};
use crate::postgres::ConnectParams;

/// The settings every instance polling a table must share, as the low 12 bits of its announcement:
/// the partition count (0 for `ordering=none`, where it means nothing) and, in bit 11, `none`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Settings {
    ordering: Ordering,
    partitions: i32,
}

const NONE_BIT: u32 = 1 << 11;

impl Settings {
    fn of(cfg: &PollingConfig) -> Settings {
        match cfg.ordering {
            Ordering::None => Settings { ordering: Ordering::None, partitions: 0 },
            Ordering::PerAggregate => Settings { ordering: Ordering::PerAggregate, partitions: cfg.partitions },
        }
    }

    fn signature(self) -> u32 {
        match self.ordering {
            Ordering::None => NONE_BIT,
            // At most 1024 (the configuration's bound): bits 0-10.
            Ordering::PerAggregate => (self.partitions as u32) & 0x7ff,
        }
    }

    fn from_signature(signature: u32) -> Settings {
        if signature & NONE_BIT != 0 {
            Settings { ordering: Ordering::None, partitions: 0 }
        } else {
            Settings { ordering: Ordering::PerAggregate, partitions: (signature & 0x7ff) as i32 }
        }
    }
}

fn ordering_name(o: Ordering) -> &'static str {
    match o {
        Ordering::None => "none",
        Ordering::PerAggregate => "per_aggregate",
    }
}

/// Announces this instance's settings for `tables` on the polling connection `sql`, then refuses
/// (a definite error, naming the difference and the fix) to go on beside an instance that
/// disagrees, or behind a pooler that breaks session locks.
pub async fn join(
    sql: &Client,
    params: &ConnectParams,
    tables: &[PolledTable],
    cfg: &PollingConfig,
) -> Result<(), RelayError> {
    let mine = Settings::of(cfg);
    let (first, _) = sql_locks::backend(sql).await.map_err(lost_statement)?;
    let mut oids = Vec::with_capacity(tables.len());
    for t in tables {
        let qualified = format!(
            "{}.{}",
            crate::postgres::replication::quote_ident(&t.schema),
            crate::postgres::replication::quote_ident(&t.table)
        );
        oids.push((
            sql_locks::announce(sql, &qualified, mine.signature()).await.map_err(lost_statement)?,
            t.qualified(),
        ));
    }
    // Every message of this connection answered first (a dropped prepared statement is closed in
    // the background): its server process must be idle when the probe asks, or a transaction pooler
    // would answer the probe from another one, and the pooler would go unnoticed.
    sql.batch_execute("SELECT 1").await.map_err(|e| lost_statement(crate::postgres::PgError::Sql(e)))?;
    let other = {
        let probe = setup::connect_sql(params).await?;
        sql_locks::backend(&probe).await.map_err(lost_statement)?.0
    };
    let (again, holds) = sql_locks::backend(sql).await.map_err(lost_statement)?;
    if let Some(why) = pooled(first, again, other, holds) {
        return Err(refuse(why));
    }
    let others = sql_locks::announcements(sql).await?;
    match disagreement(mine, &oids, &others) {
        Some(why) => Err(refuse(why)),
        None => Ok(()),
    }
}

fn refuse(message: String) -> RelayError {
    SetupFailure::Setup(SetupError::Server(message)).into()
}

/// An error of a statement on the polling connection; a prepared statement the server does not
/// know (SQLSTATE 26000, which PostgreSQL never loses within a session) is a pooler's doing: refused.
fn lost_statement(e: crate::postgres::PgError) -> RelayError {
    if e.sqlstate() == Some("26000") {
        return refuse(pooler(&format!(
            "a statement prepared on this connection did not exist when it ran ({e}), so another server process ran it"
        )));
    }
    e.into()
}

/// Whether the polling connection runs through a pooler in transaction (or statement) mode, from
/// the backend that answered two transactions on it (`first`, `again`, with the announcements taken
/// in between), the one that answered another connection (`other`), and whether `again` holds the
/// announcements.
fn pooled(first: i32, again: i32, other: i32, holds: bool) -> Option<String> {
    let evidence = if first != again {
        format!("two transactions on one connection ran on two server processes (pid {first}, then {again})")
    } else if other == first {
        format!("a second connection was answered by the same server process (pid {first})")
    } else if !holds {
        format!("server process {again} does not hold the advisory lock this connection just took")
    } else {
        return None;
    };
    Some(pooler(&evidence))
}

/// The refusal of a pooler in transaction mode, told by `evidence`.
fn pooler(evidence: &str) -> String {
    format!(
        "the polling relay's connection goes through a pooler that shares server connections between transactions \
         (pgbouncer's pool_mode=transaction or statement): {evidence}. The polling relay owns aggregate partitions with \
         session advisory locks, which such a pooler leaves on a server connection other clients then use; connect it to \
         PostgreSQL directly (database.hostname / database.port) or through a pool with pool_mode=session"
    )
}

/// The first disagreement between this instance (`mine`, polling the tables `oids`, with their
/// names) and another session's announcements, as an error text.
fn disagreement(mine: Settings, oids: &[(u32, String)], others: &[Announcement]) -> Option<String> {
    let mut pids: Vec<i32> = others.iter().map(|a| a.pid).collect();
    pids.sort_unstable();
    pids.dedup();
    for pid in pids {
        let theirs: Vec<&Announcement> = others.iter().filter(|a| a.pid == pid).collect();
        let Some(shared) = theirs.iter().find(|a| oids.iter().any(|(o, _)| *o == a.table_oid)) else { continue };
        let who = match &shared.client {
            Some(c) => format!("another instance (server pid {pid}, {c})"),
            None => format!("another instance (server pid {pid})"),
        };
        let other = Settings::from_signature(shared.signature);
        if other.ordering != mine.ordering {
            return Some(format!(
                "{who} polls {} with pgoutbox.polling.ordering={}, and this one has pgoutbox.polling.ordering={}: \
                 an instance with `none` takes any row and breaks the per-aggregate order of the others; \
                 give every instance polling these tables the same pgoutbox.polling.ordering",
                shared.table,
                ordering_name(other.ordering),
                ordering_name(mine.ordering)
            ));
        }
        if other.partitions != mine.partitions {
            return Some(format!(
                "{who} polls {} with pgoutbox.polling.partitions={}, and this one has pgoutbox.polling.partitions={}: \
                 they would hash an aggregate into different partitions and publish it from two instances at once; \
                 give every instance polling these tables the same pgoutbox.polling.partitions",
                shared.table, other.partitions, mine.partitions
            ));
        }
        if mine.ordering == Ordering::None {
            // No partitions, no locks to share: the tables each instance polls are its own affair.
            continue;
        }
        let mut their_tables: Vec<&str> = theirs.iter().map(|a| a.table.as_str()).collect();
        their_tables.sort_unstable();
        their_tables.dedup();
        let same =
            their_tables.len() == oids.len() && oids.iter().all(|(o, _)| theirs.iter().any(|a| a.table_oid == *o));
        if !same {
            let mut mine_tables: Vec<&str> = oids.iter().map(|(_, n)| n.as_str()).collect();
            mine_tables.sort_unstable();
            return Some(format!(
                "{who} polls [{}], and this one polls [{}]: instances that poll a table together must select the same \
                 tables (their aggregate partitions are owned under a namespace named after the tables, so they would \
                 publish the same aggregate at once); make table.include.list / schema.include.list the same on every instance",
                their_tables.join(", "),
                mine_tables.join(", ")
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const PER4: Settings = Settings { ordering: Ordering::PerAggregate, partitions: 4 };

    fn held(pid: i32, table_oid: u32, table: &str, settings: Settings) -> Announcement {
        Announcement { pid, table_oid, table: table.into(), signature: settings.signature(), client: None }
    }

    #[test]
    fn signatures_round_trip_every_setting() {
        for s in [
            PER4,
            Settings { ordering: Ordering::PerAggregate, partitions: 1 },
            Settings { ordering: Ordering::PerAggregate, partitions: 1024 },
            Settings { ordering: Ordering::None, partitions: 0 },
        ] {
            assert!(s.signature() < 1 << 12);
            assert_eq!(Settings::from_signature(s.signature()), s);
        }
    }

    #[test]
    fn a_transaction_pooler_is_told_from_a_session() {
        assert_eq!(pooled(10, 10, 11, true), None, "a session of its own");
        let moved = pooled(10, 12, 11, true).unwrap();
        assert!(moved.contains("pid 10, then 12") && moved.contains("pool_mode=transaction"), "{moved}");
        let shared = pooled(10, 10, 10, true).unwrap();
        assert!(shared.contains("second connection") && shared.contains("pool_mode=session"), "{shared}");
        let lost = pooled(10, 10, 11, false).unwrap();
        assert!(lost.contains("does not hold the advisory lock"), "{lost}");
    }

    #[test]
    fn instances_that_agree_or_poll_other_tables_go_on() {
        let mine = [(1, "public.outbox".to_string())];
        assert_eq!(disagreement(PER4, &mine, &[]), None);
        assert_eq!(disagreement(PER4, &mine, &[held(7, 1, "public.outbox", PER4)]), None);
        let elsewhere = Settings { ordering: Ordering::None, partitions: 0 };
        assert_eq!(disagreement(PER4, &mine, &[held(7, 2, "public.other", elsewhere)]), None, "no shared table");
    }

    #[test]
    fn instances_that_disagree_are_named_with_the_setting() {
        let mine = [(1, "public.outbox".to_string())];
        let none = Settings { ordering: Ordering::None, partitions: 0 };
        let e = disagreement(PER4, &mine, &[held(7, 1, "public.outbox", none)]).unwrap();
        assert!(e.contains("pgoutbox.polling.ordering=none") && e.contains("server pid 7"), "{e}");
        let two = Settings { ordering: Ordering::PerAggregate, partitions: 2 };
        let e = disagreement(PER4, &mine, &[held(7, 1, "public.outbox", two)]).unwrap();
        assert!(e.contains("pgoutbox.polling.partitions=2") && e.contains("pgoutbox.polling.partitions=4"), "{e}");
        let wider = [held(7, 1, "public.outbox", PER4), held(7, 2, "public.other", PER4)];
        let e = disagreement(PER4, &mine, &wider).unwrap();
        assert!(e.contains("[public.other, public.outbox]") && e.contains("table.include.list"), "{e}");
        // Two unpartitioned instances share no locks: their table sets may differ.
        assert_eq!(
            disagreement(none, &mine, &[held(7, 1, "public.outbox", none), held(7, 2, "public.other", none)]),
            None
        );
    }
}
