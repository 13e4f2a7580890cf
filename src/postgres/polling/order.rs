//! Which column the polling relay publishes an outbox table's rows in, and whether it keeps each
//! aggregate's events in commit order.
//!
//! The poll reads the oldest unpublished rows `ORDER BY` this order, so an aggregate's events reach
//! Kafka in it. Commit order needs a value the database assigns at insert, in insertion order, and
//! that grows from one transaction to the next: a sequence or identity column (or an integer id
//! filled from one). Nothing else visible in SQL does it:
//! - `xmin` is the inserting transaction's id, but a row written in a savepoint (ORMs nest blocks:
//!   e1, SAVEPOINT, e2, RELEASE, e3) carries the subtransaction's own, larger xid, and no SQL maps it
//!   back to its top-level transaction: e2 would be published after e3;
//! - `ctid`, the only tie-break within one xid, is a place, not a time: once vacuum frees space on
//!   earlier pages, a transaction's later rows can land before its earlier ones.
//!
//! So with `pgoutbox.polling.ordering=per_aggregate` an order that cannot keep insertion order is
//! refused at start (and by `check`), with the statements that add one. `xmin` stays available for
//! those who accept its reorderings, by naming it (`pgoutbox.polling.order.column=xmin`).
//!
//! A sequence that hands each session a block of values (`CACHE` above 1) does not grow from one
//! transaction to the next when they come from different sessions: refused too, naming the
//! `ALTER SEQUENCE` that fixes it.

use tokio_postgres::Client;

use crate::config::polling::{Ordering, PollingConfig, XMIN_ORDER};
use crate::postgres::replication::quote_ident;
use crate::postgres::PgError;

/// `smallint`, `integer`, `bigint`, `numeric`: types whose values sort as numbers.
const NUMBER_TYPES: [u32; 4] = [21, 23, 20, 1700];

/// The inserting transactions' order: rows of an older inserting transaction first, then by place.
/// No index serves it, so every poll sorts the backlog.
const XMIN_EXPR: &str = "age(o.xmin) DESC, o.ctid";

/// What the server says about one column of the outbox table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnFacts {
    pub name: String,
    /// The type as `format_type` shows it.
    pub shown: String,
    /// The type's oid, a domain's base type's for a domain.
    pub base: u32,
    /// The sequence that fills the column (an identity's, or one its default calls `nextval` on).
    pub sequence: Option<Sequence>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sequence {
    /// Schema-qualified, quoted where needed.
    pub name: String,
    /// `CACHE`: how many values each session takes at a time.
    pub cache: i64,
}

/// What choosing the order needs to know about the table.
#[derive(Debug, Clone, Default)]
pub struct TableFacts {
    /// `"schema"."table"`.
    pub qualified: String,
    /// A partitioned table (`PARTITION BY`): no `CREATE INDEX CONCURRENTLY` on it.
    pub partitioned: bool,
    pub columns: Vec<ColumnFacts>,
}

/// The order chosen for a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Order {
    /// The `ORDER BY` expression, over the alias `o`.
    pub expr: String,
    /// The column a partial index on unpublished rows should lead with, quoted.
    pub index_column: String,
    /// What the operator should know about this order although it is accepted (`check` reports it
    /// as a warning, the relay logs it at start).
    pub note: Option<String>,
}

/// Reads what [`choose`] needs about `qualified` (quoted).
pub async fn facts(sql: &Client, qualified: &str) -> Result<TableFacts, PgError> {
    let rows = sql
        .query(
            "SELECT a.attname::text, format_type(a.atttypid, a.atttypmod), \
             CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE t.oid END, s.seq, s.cache, \
             (SELECT c.relkind = 'p' FROM pg_class c WHERE c.oid = a.attrelid) \
             FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid \
             LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum \
             LEFT JOIN LATERAL (SELECT (SELECT format('%I.%I', n.nspname, c.relname) FROM pg_class c \
                 JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = q.seqrelid) AS seq, q.seqcache AS cache \
               FROM pg_depend dep JOIN pg_sequence q ON \
                 (dep.classid = 'pg_attrdef'::regclass AND dep.objid = d.oid \
                  AND dep.refclassid = 'pg_class'::regclass AND dep.refobjid = q.seqrelid) \
                 OR (dep.classid = 'pg_class'::regclass AND dep.objid = q.seqrelid AND dep.deptype = 'i' \
                  AND dep.refclassid = 'pg_class'::regclass AND dep.refobjid = a.attrelid AND dep.refobjsubid = a.attnum) \
               ORDER BY q.seqcache DESC LIMIT 1) s ON true \
             WHERE a.attrelid = $1::text::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
            &[&qualified],
        )
        .await
        .map_err(PgError::Sql)?;
    let mut facts = TableFacts { qualified: qualified.to_string(), ..TableFacts::default() };
    for r in rows {
        facts.partitioned |= r.get::<_, Option<bool>>(5).unwrap_or(false);
        let sequence = r.get::<_, Option<String>>(3).map(|name| Sequence { name, cache: r.get(4) });
        facts.columns.push(ColumnFacts { name: r.get(0), shown: r.get(1), base: r.get(2), sequence });
    }
    Ok(facts)
}

/// The order of `facts`' table under `cfg`, whose event id column is `id` and published column
/// `published`; an error says what is wrong and the statements that fix it.
pub fn choose(cfg: &PollingConfig, id: &str, published: &str, facts: &TableFacts) -> Result<Order, String> {
    let find = |name: &str| facts.columns.iter().find(|c| c.name == name);
    let strict = cfg.ordering == Ordering::PerAggregate;
    match cfg.order_column.as_deref() {
        Some(XMIN_ORDER) => Ok(Order {
            expr: XMIN_EXPR.into(),
            index_column: quote_ident(id),
            note: strict.then(|| XMIN_NOTE.to_string()),
        }),
        Some(name) => match find(name) {
            None => Err(format!(
                "pgoutbox.polling.order.column names `{name}`, which outbox table {} does not have; name a column that \
                 grows with insertion (a bigserial or identity column), or add one: {}",
                facts.qualified,
                add_column(facts, published)
            )),
            Some(c) if !strict => Ok(by(c)),
            Some(c) => numbered(c, facts, published, "pgoutbox.polling.order.column names"),
        },
        None => match find(id) {
            Some(c) if NUMBER_TYPES[..3].contains(&c.base) => {
                if strict {
                    numbered(c, facts, published, "the event id (table.field.event.id), the default order, is")
                } else {
                    Ok(by(c))
                }
            }
            _ if !strict => Ok(Order { expr: XMIN_EXPR.into(), index_column: quote_ident(id), note: None }),
            found => Err(no_order(facts, id, found, published)),
        },
    }
}

/// Rows by `c`, ascending.
fn by(c: &ColumnFacts) -> Order {
    Order { expr: format!("o.{}", quote_ident(&c.name)), index_column: quote_ident(&c.name), note: None }
}

/// `c` as the order under `ordering=per_aggregate`: a number, from a sequence that hands out one
/// value at a time, or from the application (accepted, with a note).
fn numbered(c: &ColumnFacts, facts: &TableFacts, published: &str, what: &str) -> Result<Order, String> {
    let q = &facts.qualified;
    match &c.sequence {
        _ if !NUMBER_TYPES.contains(&c.base) => Err(format!(
            "{what} column `{}` of {q}, of type {}, which does not number rows in insertion order, so an aggregate's \
             events would not reach Kafka in commit order; name a column filled by a sequence or identity, or add one: {}",
            c.name,
            c.shown,
            add_column(facts, published)
        )),
        Some(s) if s.cache > 1 => Err(format!(
            "{what} column `{}` of {q}, filled by sequence {} with CACHE {}: each session takes {} numbers at a time, so a \
             later transaction of an aggregate, from another session, can get a smaller number than an earlier one and be \
             published first; make it hand out one at a time: ALTER SEQUENCE {} CACHE 1 (sessions that already took a \
             block use it up first: reconnect the application's connections after it)",
            c.name, s.name, s.cache, s.cache, s.name
        )),
        Some(_) => Ok(by(c)),
        None => Ok(Order {
            note: Some(format!(
                "column `{}` of {q} orders the rows but has no sequence or identity default: the application numbers \
                 them, and an aggregate's events keep commit order only if it numbers them in that order (ids handed \
                 out in blocks by several processes, as pooled or hi/lo generators do, are not)",
                c.name
            )),
            ..by(c)
        }),
    }
}

/// The refusal when nothing orders the rows: the event id `found` is not a number.
fn no_order(facts: &TableFacts, id: &str, found: Option<&ColumnFacts>, published: &str) -> String {
    let q = &facts.qualified;
    let id_is = match found {
        Some(c) => format!("its event id `{id}` (table.field.event.id) is a {}", c.shown),
        None => format!("it has no event id column `{id}` (table.field.event.id)"),
    };
    let why = format!(
        "outbox table {q} has no order that keeps an aggregate's events in commit order: {id_is}, and the inserting \
         transactions' order (xmin) publishes a row written in a savepoint after the rows its transaction wrote after it, \
         and can reorder one transaction's rows once vacuum lets it reuse space"
    );
    let opt_out =
        "or, accepting those reorderings, set pgoutbox.polling.order.column=xmin (or pgoutbox.polling.ordering=none, \
         which keeps no order at all)";
    let candidate = facts
        .columns
        .iter()
        .find(|c| NUMBER_TYPES[..3].contains(&c.base) && c.sequence.as_ref().is_some_and(|s| s.cache == 1));
    match candidate {
        Some(c) => format!(
            "{why}. Its column `{}` ({}, filled by sequence {}) does: set pgoutbox.polling.order.column={}, with its partial \
             index: {}; {opt_out}",
            c.name,
            c.shown,
            c.sequence.as_ref().map_or("", |s| s.name.as_str()),
            c.name,
            index(facts, &c.name, published)
        ),
        None => format!("{why}. Add a column that does: {}; {opt_out}", add_column(facts, published)),
    }
}

/// The statements that add an order column, index it, and name it.
fn add_column(facts: &TableFacts, published: &str) -> String {
    let name = ["seq", "outbox_seq", "pgoutbox_seq"]
        .into_iter()
        .find(|n| facts.columns.iter().all(|c| c.name != *n))
        .unwrap_or("pgoutbox_order");
    // Identity columns on a partitioned table need PostgreSQL 17; a serial column works on every
    // version the relay supports.
    let column = if facts.partitioned { "bigserial" } else { "bigint GENERATED BY DEFAULT AS IDENTITY" };
    format!(
        "ALTER TABLE {} ADD COLUMN {} {column}; {}; then set pgoutbox.polling.order.column={name} (the ALTER TABLE \
         rewrites the table under an exclusive lock and numbers the rows already there in their physical order: run it \
         while no row waits to be published)",
        facts.qualified,
        quote_ident(name),
        index(facts, name, published)
    )
}

/// The partial index that keeps the poll on the unpublished rows, in `column`'s order.
pub fn index(facts: &TableFacts, column: &str, published: &str) -> String {
    let concurrently = if facts.partitioned { "" } else { " CONCURRENTLY" };
    format!(
        "CREATE INDEX{concurrently} ON {} ({}) WHERE {} IS NULL",
        facts.qualified,
        quote_ident(column),
        quote_ident(published)
    )
}

const XMIN_NOTE: &str =
    "pgoutbox.polling.order.column=xmin publishes rows in their inserting transactions' order: a row \
     written in a savepoint goes out after the rows its transaction wrote after it, and one transaction's rows can be \
     reordered once vacuum lets it reuse space; a sequence or identity column keeps insertion order";

#[cfg(test)]
mod tests;
