//! `check` for the polling relay: the published column, the partial index that keeps the poll
//! cheap, the privileges it needs, and outbox rows deleted as they are inserted (which the polling
//! relay never sees).

use tokio_postgres::Client;

use super::{ok, problem, Finding};
use crate::config::polling::PollingConfig;
use crate::config::Config;
use crate::postgres::polling::{event_columns, PolledTable};
use crate::postgres::replication::{quote_ident, quote_literal};
use crate::postgres::setup;

fn warning(subject: &str, detail: impl Into<String>) -> Finding {
    Finding { ok: true, warning: true, subject: subject.into(), detail: detail.into() }
}

pub async fn check(sql: &Client, cfg: &Config, p: &PollingConfig) -> Vec<Finding> {
    let tables = match setup::captured_tables(sql, cfg).await {
        Ok(t) => t,
        Err(e) => return vec![problem("polling", e.to_string())],
    };
    let mut out = Vec::new();
    for (schema, table) in tables {
        let qualified = format!("{}.{}", quote_ident(&schema), quote_ident(&table));
        let subject = format!("polling {schema}.{table}");
        match PolledTable::describe(sql, &schema, &table, p, &event_columns(cfg)).await {
            Ok(t) => {
                out.push(ok(&subject, format!("column `{}` records what was published", p.published_column)));
                out.extend(privileges(sql, &subject, &qualified, cfg, p).await);
                if let Some(note) = &t.order_note {
                    out.push(warning(&subject, note.clone()));
                }
                out.extend(partial_index(sql, &subject, &qualified, p, &t.index_column).await);
            }
            Err(e) => {
                out.push(problem(&subject, e.to_string()));
                continue;
            }
        }
        out.extend(deleted_as_inserted(sql, &subject, &qualified).await);
    }
    out
}

async fn privileges(sql: &Client, subject: &str, qualified: &str, cfg: &Config, p: &PollingConfig) -> Option<Finding> {
    let row = sql
        .query_one(
            "SELECT has_table_privilege($1::text::regclass, 'SELECT'), has_column_privilege($1::text::regclass, $2, 'UPDATE')",
            &[&qualified, &p.published_column],
        )
        .await
        .ok()?;
    let (select, update): (bool, bool) = (row.get(0), row.get(1));
    Some(if select && update {
        ok(subject, "the user may read the table and set the published column")
    } else {
        let mut missing = Vec::new();
        if !select {
            missing.push("SELECT".to_string());
        }
        if !update {
            missing.push(format!("UPDATE ({})", quote_ident(&p.published_column)));
        }
        problem(
            subject,
            format!(
                "user `{}` lacks {} on {qualified}; run GRANT {} ON {qualified} TO {}",
                cfg.database.user,
                missing.join(" and "),
                missing.join(", "),
                quote_ident(&cfg.database.user)
            ),
        )
    })
}

/// An index whose predicate is `<published> IS NULL`: without one every poll scans the whole table,
/// published rows included.
async fn partial_index(
    sql: &Client,
    subject: &str,
    qualified: &str,
    p: &PollingConfig,
    order: &str,
) -> Option<Finding> {
    let rows = sql
        .query(
            "SELECT pg_get_expr(i.indpred, i.indrelid), (SELECT quote_ident(a.attname) FROM pg_attribute a \
             WHERE a.attrelid = i.indrelid AND a.attnum = i.indkey[0]) \
             FROM pg_index i WHERE i.indrelid = $1::text::regclass AND i.indpred IS NOT NULL",
            &[&qualified],
        )
        .await
        .ok()?;
    let wanted = format!("{} IS NULL", quote_ident(&p.published_column));
    let plain = |s: &str| s.replace(['(', ')', '"'], "");
    let covering: Vec<Option<String>> =
        rows.iter().filter(|r| plain(&r.get::<_, String>(0)) == plain(&wanted)).map(|r| r.get(1)).collect();
    // quote_ident quotes only where needed; `order` is always quoted.
    let leads = |c: &Option<String>| c.as_deref().is_some_and(|c| plain(c) == plain(order));
    Some(if covering.iter().any(leads) {
        ok(subject, format!("a partial index covers the unpublished rows ({wanted}) in the order column's order"))
    } else if !covering.is_empty() {
        warning(
            subject,
            format!(
                "the partial index on the unpublished rows ({wanted}) does not lead with the order column {order}: every poll \
                 sorts the unpublished rows; run CREATE INDEX CONCURRENTLY ON {qualified} ({order}) WHERE {wanted}"
            ),
        )
    } else {
        warning(
            subject,
            format!(
                "no index with `WHERE {wanted}`: every poll reads the whole table, published rows included; \
                 run CREATE INDEX CONCURRENTLY ON {qualified} ({order}) WHERE {wanted}"
            ),
        )
    })
}

/// Debezium's usual outbox deletes each row in the transaction that inserted it (the insert is in
/// the WAL, which is all log tailing needs). The polling relay never sees such a row.
async fn deleted_as_inserted(sql: &Client, subject: &str, qualified: &str) -> Option<Finding> {
    let row = sql
        .query_one(
            &format!(
                "SELECT n_tup_ins, n_tup_del, n_tup_upd, (SELECT count(*) FROM (SELECT 1 FROM {qualified} LIMIT 1) x) \
                 FROM pg_stat_user_tables WHERE relid = {}::regclass",
                quote_literal(qualified)
            ),
            &[],
        )
        .await
        .ok()?;
    let (inserted, deleted, updated, any_left): (i64, i64, i64, i64) = (row.get(0), row.get(1), row.get(2), row.get(3));
    // Rows the polling relay published were updated (marked) before any pruning deleted them.
    (inserted > 0 && any_left == 0 && deleted >= inserted && updated == 0).then(|| {
        problem(
            subject,
            format!(
                "{qualified} is empty although {inserted} rows were inserted and {deleted} deleted: the application seems to delete each outbox row \
                 in the transaction that inserts it (Debezium's pattern). The polling relay never sees such rows; \
                 keep them until published (prune with pgoutbox.prune.*) or use the log-tailing relay (pgoutbox.relay=log_tailing)"
            ),
        )
    })
}
