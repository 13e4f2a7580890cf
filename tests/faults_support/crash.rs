//! The application dying between writing its rows and committing them: its backend terminated by
//! the server (`pg_terminate_backend`), or its process killed with SIGKILL mid-transaction (a `psql`
//! child sleeping inside its transaction). Rows they write carry `doomed` in their payload.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::bed::Bed;

/// Starts a transaction that writes a business row and `n` outbox rows marked `doomed`, without
/// committing. Returns the client, its backend pid and the rows' ids.
pub async fn doomed_transaction(bed: &Bed, n: i32, tag: &str) -> (tokio_postgres::Client, i32, Vec<String>) {
    let app = bed.sql().await;
    let pid: i32 = app.query_one("SELECT pg_backend_pid()", &[]).await.unwrap().get(0);
    app.batch_execute(&format!(
        "BEGIN; INSERT INTO public.{} (writer, n, note) VALUES (-1, 0, 'doomed {tag}')",
        bed.business
    ))
    .await
    .unwrap();
    let ids = app
        .query(
            &format!(
                "INSERT INTO public.{} (id, aggregatetype, aggregateid, type, payload) \
                 SELECT gen_random_uuid(), $1, 'doomed-' || (g % 5), 'Doomed', jsonb_build_object('doomed', $2::text, 'g', g) \
                 FROM generate_series(1, $3) g RETURNING id::text",
                bed.table
            ),
            &[&bed.agg("Order"), &tag, &n],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    (app, pid, ids)
}

/// Commits `n` outbox rows in one transaction with COPY, which writes several rows per WAL record
/// (they share an LSN). Returns `n`.
pub async fn copy_rows(bed: &Bed, n: usize, tag: &str) -> u64 {
    use futures_util::SinkExt;
    let app = bed.sql().await;
    let sink = app
        .copy_in::<_, bytes::Bytes>(&format!(
            "COPY public.{} (id, aggregatetype, aggregateid, type, payload) FROM STDIN",
            bed.table
        ))
        .await
        .unwrap();
    let agg = bed.agg("Order");
    let mut text = String::with_capacity(n * 120);
    for g in 0..n {
        text.push_str(&format!("{}\t{agg}\t{tag}-{}\tBulk\t{{\"g\": {g}}}\n", uuid::Uuid::now_v7(), g % 7));
    }
    futures_util::pin_mut!(sink);
    sink.send(bytes::Bytes::from(text)).await.unwrap();
    sink.finish().await.unwrap();
    n as u64
}

/// A `psql` process that writes doomed rows and sleeps inside its transaction, killed with SIGKILL
/// once it sleeps. Returns how long the server took to end the orphaned backend.
pub async fn psql_killed_mid_transaction(bed: &Bed, n: i32, tag: &str) -> Duration {
    use std::io::Write;
    let app_name = format!("doomed_{tag}");
    // client_connection_check_interval lets the server notice the dead client during pg_sleep
    // instead of after it.
    let script = format!(
        "SET application_name = '{app_name}';\nSET client_connection_check_interval = '200ms';\nBEGIN;\n\
         INSERT INTO public.{b} (writer, n, note) VALUES (-1, 0, 'doomed {tag}');\n\
         INSERT INTO public.{t} (id, aggregatetype, aggregateid, type, payload) SELECT gen_random_uuid(), '{agg}', 'doomed-' || (g % 5), 'Doomed', \
         jsonb_build_object('doomed', '{tag}', 'g', g) FROM generate_series(1, {n}) g;\nSELECT pg_sleep(30);\nCOMMIT;\n",
        b = bed.business,
        t = bed.table,
        agg = bed.agg("Order"),
    );
    let mut child = Command::new("psql")
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &bed.pg_port.to_string(),
            "-U",
            "postgres",
            "-d",
            "postgres",
            "-q",
            "-v",
            "ON_ERROR_STOP=1",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn psql");
    // Keep stdin open: psql must not see the end of its input.
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(script.as_bytes()).unwrap();
    stdin.flush().unwrap();
    let admin = bed.sql().await;
    let sleeping = "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND state = 'active' AND query LIKE '%pg_sleep%'";
    let start = Instant::now();
    while admin.query_one(sleeping, &[&app_name]).await.unwrap().get::<_, i64>(0) == 0 {
        assert!(start.elapsed() < Duration::from_secs(30), "psql never reached pg_sleep");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    child.kill().unwrap();
    child.wait().unwrap();
    drop(stdin);
    let killed = Instant::now();
    let alive = "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1";
    while admin.query_one(alive, &[&app_name]).await.unwrap().get::<_, i64>(0) > 0 {
        assert!(killed.elapsed() < Duration::from_secs(40), "the killed client's backend lives on");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    killed.elapsed()
}
