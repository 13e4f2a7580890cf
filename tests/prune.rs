//! Pruning (`pgoutbox.prune.*`, seed step 5) against real PostgreSQL and Kafka, for both relays: what
//! may go goes (deleted, archived, or as whole partitions), nothing unpublished is ever taken, and the
//! events still all arrive.

mod support;

use std::time::Duration;

use support::*;

const PRUNE_FAST: [&str; 2] = ["pgoutbox.prune.interval.ms=200", "pgoutbox.prune.batch.size=7"];

async fn count(o: &Outbox, table: &str, filter: &str) -> i64 {
    o.env.sql().await.query_one(&format!("SELECT count(*) FROM {table} WHERE {filter}"), &[]).await.unwrap().get(0)
}

async fn polled(name: &str) -> Outbox {
    let o = Outbox::new(name).await;
    o.env
        .sql()
        .await
        .batch_execute(&format!("ALTER TABLE public.{} ADD COLUMN published_at timestamptz", o.table))
        .await
        .unwrap();
    o.create_topics(&["order"], 1).await;
    o
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Polling: published rows are deleted in batches once the retention passed; unpublished ones never
/// are, however long they wait (here: no broker); with an archive table they are moved there.
#[tokio::test(flavor = "multi_thread")]
async fn polling_relay_prunes_only_published_rows_and_can_archive_them() {
    let o = polled("prune_poll").await;
    let t = format!("public.{}", o.table);
    let sql = o.env.sql().await;
    for i in 0..50 {
        sql.batch_execute(&o.insert_sql("order", &format!("a{i}"), None)).await.unwrap();
    }
    let mut lines = vec![
        "pgoutbox.relay=polling",
        "pgoutbox.polling.order.column=seq",
        "poll.interval.ms=50",
        "pgoutbox.prune.retention.ms=0",
        "task.shutdown.graceful.timeout.ms=500",
    ];
    lines.extend_from_slice(&PRUNE_FAST);
    let dead = format!("bootstrap.servers=127.0.0.1:{}", free_port());
    let mut relay =
        Relay::start_with(&o.config(&lines).replace(&format!("bootstrap.servers={}", o.env.broker), &dead), &[]);
    // Pruning starts before the first session; the session itself cannot reach Kafka and retries.
    relay.wait_for_log("polling session ended; reconnecting", Duration::from_secs(30));
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(count(&o, &t, "true").await, 50, "nothing unpublished is pruned");
    relay.stop();

    sql.batch_execute(&format!("CREATE TABLE {t}_archive (LIKE {t} INCLUDING ALL)")).await.unwrap();
    let archive = format!("pgoutbox.prune.archive.table={t}_archive");
    lines.push(&archive);
    let mut relay = Relay::start_with(&o.config(&lines), &[]);
    let records = consume(&o.env.broker, &[o.topic("order")], 50, Duration::from_secs(30));
    assert_eq!(by_id(&records).len(), 50);
    wait_for_async("every row moved to the archive", Duration::from_secs(30), || async {
        count(&o, &t, "true").await == 0 && count(&o, &format!("{t}_archive"), "published_at IS NOT NULL").await == 50
    })
    .await;
    relay.wait_for_log("pruning: removed outbox rows", Duration::from_secs(5));
    relay.stop();
}

/// Log tailing: with a retention and a timestamp column, only rows older than the retention go; the
/// events of rows pruned before the relay decoded them still arrive (their inserts are in the WAL).
#[tokio::test(flavor = "multi_thread")]
async fn log_tailing_relay_prunes_committed_rows_past_the_retention() {
    let o = Outbox::new("prune_log").await;
    o.create_topics(&["order"], 1).await;
    let t = format!("public.{}", o.table);
    let mut lines = vec!["pgoutbox.prune.retention.ms=3600000", "pgoutbox.prune.timestamp.column=created_at"];
    lines.extend_from_slice(&PRUNE_FAST);
    let mut relay = Relay::start_streaming(&o.config(&lines));
    let sql = o.env.sql().await;
    for i in 0..30 {
        sql.batch_execute(&o.insert_sql("order", &format!("a{i}"), None)).await.unwrap();
    }
    sql.batch_execute(&format!("UPDATE {t} SET created_at = now() - interval '2 hours' WHERE seq % 2 = 0"))
        .await
        .unwrap();
    let records = consume(&o.env.broker, &[o.topic("order")], 30, Duration::from_secs(30));
    assert_eq!(by_id(&records).len(), 30);
    wait_for_async("the old half pruned", Duration::from_secs(30), || async { count(&o, &t, "true").await == 15 })
        .await;
    assert_eq!(count(&o, &t, "created_at < now() - interval '1 hour'").await, 0);
    relay.stop();
    o.drop_slot().await;

    // Retention 0 needs no timestamp column: every committed row goes.
    // A new slot: the old one's loss would be noticed (and refused) through the offsets topic.
    let config =
        o.config(&["pgoutbox.prune.retention.ms=0", "pgoutbox.prune.interval.ms=200", "snapshot.mode=no_data"]);
    let mut relay =
        Relay::start_streaming(&config.replace(&format!("slot.name={}", o.slot), &format!("slot.name={}_b", o.slot)));
    wait_for_async("every row pruned", Duration::from_secs(30), || async { count(&o, &t, "true").await == 0 }).await;
    for i in 0..10 {
        sql.batch_execute(&o.insert_sql("order", &format!("b{i}"), None)).await.unwrap();
    }
    let records = consume(&o.env.broker, &[o.topic("order")], 40, Duration::from_secs(30));
    assert_eq!(by_id(&records).len(), 40, "rows pruned at once still publish their events");
    relay.stop();
    let _ = o.env.sql().await.execute("SELECT pg_drop_replication_slot($1)", &[&format!("{}_b", o.slot)]).await;
}

/// A retention the relay cannot apply (no column dates the rows) stops it at start, naming the key.
#[tokio::test(flavor = "multi_thread")]
async fn pruning_without_a_dating_column_stops_the_relay_naming_the_key() {
    let o = Outbox::new("prune_bad").await;
    let mut relay = Relay::start(&o.config(&["pgoutbox.prune.retention.ms=60000"]));
    let status = relay.wait(Duration::from_secs(30)).expect("the relay stops");
    assert_eq!(status.code(), Some(4));
    assert!(relay.log_text().contains("set pgoutbox.prune.timestamp.column"), "{}", relay.log_text());
    o.drop_slot().await;
}

/// A time-partitioned outbox: a partition whose every row was published is detached and dropped;
/// the partition new rows go to is kept even when all its rows were published.
#[tokio::test(flavor = "multi_thread")]
async fn polling_relay_drops_partitions_whose_every_row_was_published() {
    let env = Env::get();
    let u = unique("prune_part");
    let t = format!("outbox_{u}");
    let sql = env.sql().await;
    sql.batch_execute(&format!(
        "CREATE TABLE public.{t} (id uuid NOT NULL, aggregatetype varchar(255) NOT NULL, aggregateid varchar(255) NOT NULL, \
         type varchar(255) NOT NULL, payload jsonb, seq bigserial, created_at timestamptz NOT NULL, published_at timestamptz) \
         PARTITION BY RANGE (created_at); \
         CREATE TABLE public.{t}_2020 PARTITION OF public.{t} FOR VALUES FROM ('2020-01-01') TO ('2021-01-01'); \
         CREATE TABLE public.{t}_now PARTITION OF public.{t} FOR VALUES FROM ('2021-01-01') TO (MAXVALUE)"
    ))
    .await
    .unwrap();
    let agg = format!("T{u}_order");
    for (i, when) in ["2020-03-01", "2020-04-01", "now()", "now()"].iter().enumerate() {
        let when = if *when == "now()" { "now()".to_string() } else { format!("'{when}'") };
        sql.batch_execute(&format!(
            "INSERT INTO public.{t} (id, aggregatetype, aggregateid, type, payload, created_at) VALUES (gen_random_uuid(), '{agg}', 'a{i}', 'Created', NULL, {when})"
        ))
        .await
        .unwrap();
    }
    let topic = format!("outbox.event.{agg}");
    create_topics(&env.broker, std::slice::from_ref(&topic), 1).await;
    let config = format!(
        "name=prune-part\nconnector.class=io.debezium.connector.postgresql.PostgresConnector\ndatabase.hostname={}\ndatabase.port={}\n\
         database.user=postgres\ndatabase.dbname=postgres\ntopic.prefix=p\ntable.include.list=public.{t}\ntransforms=outbox\n\
         transforms.outbox.type=io.debezium.transforms.outbox.EventRouter\nbootstrap.servers={}\npgoutbox.relay=polling\npgoutbox.polling.order.column=seq\n\
         poll.interval.ms=50\npgoutbox.prune.retention.ms=0\npgoutbox.prune.interval.ms=200\n",
        env.pg_host, env.pg_port, env.broker
    );
    let mut relay = Relay::start_with(&config, &[]);
    let records = consume(&env.broker, &[topic], 4, Duration::from_secs(30));
    assert_eq!(by_id(&records).len(), 4);
    wait_for_async("the 2020 partition dropped", Duration::from_secs(30), || async {
        env.sql()
            .await
            .query_opt("SELECT to_regclass($1)::text", &[&format!("public.{t}_2020")])
            .await
            .unwrap()
            .and_then(|r| r.get::<_, Option<String>>(0))
            .is_none()
    })
    .await;
    let kept: i64 = sql
        .query_one(&format!("SELECT count(*) FROM pg_partition_tree('public.{t}') WHERE isleaf"), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(kept, 1, "the partition new rows go to stays");
    wait_for_async("its published rows deleted", Duration::from_secs(30), || async {
        env.sql().await.query_one(&format!("SELECT count(*) FROM public.{t}"), &[]).await.unwrap().get::<_, i64>(0) == 0
    })
    .await;
    relay.stop();
}
