//! The application side of the benchmark: outbox rows written in transactions, as a backlog or at a
//! fixed rate.

use std::time::{Duration, Instant};

use tokio_postgres::{Client, NoTls};

#[derive(Debug, Clone)]
pub struct Shape {
    pub payload_bytes: usize,
    pub per_txn: usize,
    pub aggregates: usize,
}

pub const TYPES: [&str; 4] = ["Order", "Customer", "Payment", "Shipment"];

pub async fn connect(port: u16) -> anyhow::Result<Client> {
    let (client, conn) =
        tokio_postgres::connect(&format!("host=127.0.0.1 port={port} user=postgres dbname=postgres"), NoTls).await?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(client)
}

/// One transaction's INSERT of events `first..first + per_txn`.
pub fn txn_sql(shape: &Shape, first: usize) -> String {
    let mut sql = String::from("INSERT INTO public.outbox (id, aggregatetype, aggregateid, type, payload) VALUES ");
    for n in first..first + shape.per_txn {
        let agg = n % shape.aggregates;
        if n > first {
            sql.push(',');
        }
        // When the application sent it, for the end-to-end latency (see `e2e`).
        let sent = crate::e2e::now_us();
        let head = format!(
            r#"{{"seq": {n}, "sent_us": {sent}, "orderId": "agg-{agg}", "customer": {{"id": {agg}, "name": "Customer {agg}"}}, "note": ""#
        );
        let fill = shape.payload_bytes.saturating_sub(head.len() + 2);
        sql.push_str(&format!(
            "(gen_random_uuid(), '{}', 'agg-{agg}', 'Created', '{head}{}\"}}')",
            TYPES[agg % TYPES.len()],
            "x".repeat(fill)
        ));
    }
    sql
}

/// Writes `events` events as fast as `concurrency` connections allow.
pub async fn backlog(port: u16, shape: &Shape, events: usize, concurrency: usize) -> anyhow::Result<Duration> {
    let start = Instant::now();
    write_backlog(port, shape, events, concurrency, txn_sql).await?;
    Ok(start.elapsed())
}

/// Writes `events` events, each transaction's SQL from `txn`, as fast as `concurrency` connections
/// allow; returns the connections, still open (their backends' CPU is still in /proc).
pub async fn write_backlog(
    port: u16,
    shape: &Shape,
    events: usize,
    concurrency: usize,
    txn: fn(&Shape, usize) -> String,
) -> anyhow::Result<Vec<Client>> {
    let txns = events.div_ceil(shape.per_txn);
    let mut tasks = Vec::new();
    for worker in 0..concurrency {
        let client = connect(port).await?;
        let shape = shape.clone();
        tasks.push(tokio::spawn(async move {
            let mut t = worker;
            while t < txns {
                client.batch_execute(&txn(&shape, t * shape.per_txn)).await?;
                t += concurrency;
            }
            anyhow::Ok(client)
        }));
    }
    let mut clients = Vec::new();
    for t in tasks {
        clients.push(t.await??);
    }
    Ok(clients)
}

/// Writes at `rate` events per second for `duration`, numbering events from `first`.
pub async fn steady(port: u16, shape: &Shape, rate: usize, duration: Duration, first: usize) -> anyhow::Result<usize> {
    // Enough connections that the round trips do not cap the rate (one per 5,000 events/s).
    let writers = (rate / 5000).clamp(2, 8);
    let txn_rate = rate as f64 / shape.per_txn as f64 / writers as f64;
    let period = Duration::from_secs_f64(1.0 / txn_rate);
    let mut tasks = Vec::new();
    for w in 0..writers {
        let client = connect(port).await?;
        let shape = shape.clone();
        tasks.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval(period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
            let end = Instant::now() + duration;
            let mut n = 0usize;
            while Instant::now() < end {
                tick.tick().await;
                client.batch_execute(&txn_sql(&shape, first + (n * writers + w) * shape.per_txn)).await?;
                n += 1;
            }
            anyhow::Ok(n * shape.per_txn)
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += t.await??;
    }
    Ok(total)
}
