//! A scenario's test bed: an outbox table (Debezium's columns plus a bigserial `seq`), the
//! application's business table, a slot, a publication and topics, on any PostgreSQL and broker.
//!
//! Probes time recoveries end to end: a probe is an outbox event committed right after a fault (or
//! its repair); the time until a consumer sees it is the time the relay needed to publish again.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use pgoutbox::kafka::consume::{consume_all_with, ConsumedRecord};
use pgoutbox::lsn::Lsn;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use tokio_postgres::Client;

use super::procs::{connect_sql, RelayProc};
use crate::support::{create_topics, unique, Env};

/// The aggregate type of probes; one aggregate, so probes are also checked for order.
pub const PROBE: &str = "Probe";

/// An outbox row as committed (payloads are not needed for the checks).
#[derive(Debug, Clone)]
pub struct Row {
    pub id: String,
    pub aggregatetype: String,
    pub aggregateid: String,
    pub seq: i64,
}

pub struct Bed {
    /// Where the tables live: the application, probes and checks connect here directly.
    pub pg_port: u16,
    /// Bootstrap servers for creating topics and reading them back.
    pub broker: String,
    pub table: String,
    pub business: String,
    pub slot: String,
    pub publication: String,
    pub agg_prefix: String,
}

impl Bed {
    /// A bed on the shared PostgreSQL and broker that scripts/test.sh starts.
    pub async fn shared(name: &str) -> Bed {
        let env = Env::get();
        Bed::new(name, env.pg_port, &env.broker).await
    }

    pub async fn new(name: &str, pg_port: u16, broker: &str) -> Bed {
        let u = unique(name);
        let bed = Bed {
            pg_port,
            broker: broker.to_string(),
            table: format!("outbox_{u}"),
            business: format!("business_{u}"),
            slot: format!("slot_{u}"),
            publication: format!("pub_{u}"),
            agg_prefix: format!("F{u}"),
        };
        bed.sql()
            .await
            .batch_execute(&format!(
                "CREATE TABLE public.{t} (id uuid PRIMARY KEY, aggregatetype varchar(255) NOT NULL, aggregateid varchar(255) NOT NULL, \
                 type varchar(255) NOT NULL, payload jsonb, seq bigserial, created_at timestamptz NOT NULL DEFAULT now()); \
                 CREATE TABLE public.{b} (id bigserial PRIMARY KEY, writer int NOT NULL, n bigint NOT NULL, note text)",
                t = bed.table,
                b = bed.business
            ))
            .await
            .expect("create outbox and business tables");
        bed
    }

    pub fn agg(&self, kind: &str) -> String {
        format!("{}_{kind}", self.agg_prefix)
    }

    pub fn topic(&self, kind: &str) -> String {
        format!("outbox.event.{}", self.agg(kind))
    }

    /// The topics of `kinds` and of the probes.
    pub fn topics(&self, kinds: &[&str]) -> Vec<String> {
        kinds.iter().chain(std::iter::once(&PROBE)).map(|k| self.topic(k)).collect()
    }

    /// Creates the topics of `kinds` with `partitions` each, and the one-partition probe topic.
    pub async fn create_topics(&self, kinds: &[&str], partitions: i32) {
        let topics: Vec<String> = kinds.iter().map(|k| self.topic(k)).collect();
        create_topics(&self.broker, &topics, partitions).await;
        create_topics(&self.broker, &[self.topic(PROBE)], 1).await;
    }

    /// The relay's config for this bed, reaching PostgreSQL at `pg_port` and the broker at `broker`
    /// (a proxy's, or the bed's own), plus `extra` lines.
    pub fn config_via(&self, pg_port: u16, broker: &str, extra: &[&str]) -> String {
        let mut c = format!(
            "name=faults-connector\nconnector.class=io.debezium.connector.postgresql.PostgresConnector\n\
             database.hostname=127.0.0.1\ndatabase.port={pg_port}\ndatabase.user=postgres\ndatabase.dbname=postgres\n\
             database.sslmode=disable\ntopic.prefix=faults\nplugin.name=pgoutput\nslot.name={}\n\
             publication.name={}\npublication.autocreate.mode=filtered\ntable.include.list=public.{}\n\
             transforms=outbox\ntransforms.outbox.type=io.debezium.transforms.outbox.EventRouter\n\
             bootstrap.servers={broker}\nstatus.update.interval.ms={}\n",
            self.slot,
            self.publication,
            self.table,
            // PGOUTBOX_FAULTS_STATUS_MS: Debezium's default (10000) shows the duplicate window an
            // unchanged Connect config gets.
            std::env::var("PGOUTBOX_FAULTS_STATUS_MS").unwrap_or_else(|_| "500".into())
        );
        for e in extra {
            c.push_str(e);
            c.push('\n');
        }
        // PGOUTBOX_FAULTS_EXACTLY_ONCE=1 runs every scenario with Kafka transactions (each with an
        // offsets topic of its own); their summary lines then count duplicates under exactly once.
        if std::env::var("PGOUTBOX_FAULTS_EXACTLY_ONCE").is_ok_and(|v| v == "1")
            && !c.contains("exactly.once.source.support")
        {
            c.push_str(&format!(
                "exactly.once.source.support=enabled\nexactly.once.support=required\noffset.storage.topic=offsets_{}\n",
                self.slot
            ));
        }
        c
    }

    pub fn config(&self, extra: &[&str]) -> String {
        self.config_via(self.pg_port, &self.broker, extra)
    }

    pub async fn sql(&self) -> Client {
        connect_sql(self.pg_port).await.expect("connect to the bed's PostgreSQL")
    }

    /// Rows that were in the outbox before any relay ran (published as the initial snapshot): `n`
    /// events of 100 aggregates of `kind`, committed in one transaction.
    pub async fn prefill(&self, kind: &str, n: i64) {
        self.sql()
            .await
            .batch_execute(&format!(
                "INSERT INTO public.{t} (id, aggregatetype, aggregateid, type, payload) \
                 SELECT gen_random_uuid(), '{agg}', 'pre-' || (g % 100), 'Existing', jsonb_build_object('g', g) FROM generate_series(1, {n}) g",
                t = self.table,
                agg = self.agg(kind)
            ))
            .await
            .expect("prefill the outbox");
    }

    /// Every committed outbox row, in `seq` order.
    pub async fn rows(&self) -> Vec<Row> {
        self.sql()
            .await
            .query(
                &format!("SELECT id::text, aggregatetype, aggregateid, seq FROM public.{} ORDER BY seq", self.table),
                &[],
            )
            .await
            .expect("read the outbox")
            .iter()
            .map(|r| Row { id: r.get(0), aggregatetype: r.get(1), aggregateid: r.get(2), seq: r.get(3) })
            .collect()
    }

    pub async fn wal_end(&self) -> Lsn {
        let s: String = self.sql().await.query_one("SELECT pg_current_wal_lsn()::text", &[]).await.unwrap().get(0);
        s.parse().expect("an LSN")
    }

    pub async fn confirmed(&self) -> Option<Lsn> {
        let row = self
            .sql()
            .await
            .query_opt("SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1", &[&self.slot])
            .await
            .ok()??;
        row.get::<_, Option<String>>(0).and_then(|s| s.parse().ok())
    }

    /// The walsender serving the slot, if a relay streams from it.
    pub async fn walsender_pid(&self) -> Option<i32> {
        self.sql()
            .await
            .query_opt("SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1", &[&self.slot])
            .await
            .ok()??
            .get(0)
    }

    /// Slots named after this bed's slot other than the slot itself (a snapshot's staging slot
    /// left behind would hold WAL forever).
    pub async fn other_slots(&self) -> Vec<String> {
        self.sql()
            .await
            .query(
                "SELECT slot_name::text FROM pg_replication_slots WHERE slot_name LIKE $1 || '%' AND slot_name <> $1",
                &[&self.slot],
            )
            .await
            .expect("list slots")
            .iter()
            .map(|r| r.get(0))
            .collect()
    }

    /// Waits until the slot confirms everything written so far: `relay` has had every committed
    /// event acknowledged. Returns how long that took; fails at once if the relay exits.
    pub async fn wait_confirmed_to_wal_end(&self, relay: &mut RelayProc, deadline: Duration) -> Duration {
        let target = self.wal_end().await;
        let start = Instant::now();
        loop {
            if self.confirmed().await.is_some_and(|c| c >= target) {
                return start.elapsed();
            }
            assert!(relay.running(), "the relay exited before confirming {target}; log tail:\n{}", relay.log_tail(20));
            assert!(
                start.elapsed() < deadline,
                "the slot did not confirm {target} within {deadline:?} (confirmed: {:?})",
                self.confirmed().await
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Commits a probe event; returns its id.
    pub async fn probe(&self) -> String {
        self.sql()
            .await
            .query_one(
                &format!(
                    "INSERT INTO public.{} (id, aggregatetype, aggregateid, type, payload) VALUES (gen_random_uuid(), $1, 'probe', 'Probe', '{{}}') RETURNING id::text",
                    self.table
                ),
                &[&self.agg(PROBE)],
            )
            .await
            .expect("write a probe")
            .get(0)
    }

    /// A consumer of the probe topic, connected and caught up, so a later wait measures the relay
    /// rather than the consumer's start.
    pub fn probe_watcher(&self) -> ProbeWatcher {
        let mut w = self.probe_consumer();
        // Catch up with the probes already there.
        tokio::task::block_in_place(|| {
            let start = Instant::now();
            while start.elapsed() < Duration::from_millis(500) {
                w.poll();
            }
        });
        w
    }

    fn probe_consumer(&self) -> ProbeWatcher {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &self.broker)
            .set("group.id", unique("probe"))
            .set("enable.auto.commit", "false")
            .set("fetch.wait.max.ms", "20")
            .set("socket.timeout.ms", "5000")
            .create()
            .expect("probe consumer");
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&self.topic(PROBE), 0, Offset::Beginning).unwrap();
        consumer.assign(&tpl).expect("assign the probe topic");
        ProbeWatcher { consumer, seen: HashSet::new() }
    }

    /// Waits until probe `id` can be consumed; returns the time since `since` (the fault).
    pub async fn wait_published(&self, id: &str, since: Instant, deadline: Duration) -> Duration {
        self.probe_consumer().wait(id, since, deadline)
    }

    /// Commits a probe and waits until it is published: the relay streams end to end.
    pub async fn probe_round_trip(&self, since: Instant, deadline: Duration) -> Duration {
        let id = self.probe().await;
        self.wait_published(&id, since, deadline).await
    }

    /// Reads every record of the bed's topics (`kinds` and probes), again until every row in `rows`
    /// was found or `deadline` passed (the broker's watermarks can lag what it stored).
    pub fn read_back(&self, kinds: &[&str], rows: &[Row], deadline: Duration) -> Vec<ConsumedRecord> {
        self.read_back_within(kinds, rows, &[], deadline)
    }

    /// [`read_back`](Self::read_back) with consumer settings (e.g. `isolation.level`).
    pub fn read_back_with(&self, kinds: &[&str], rows: &[Row], settings: &[(&str, &str)]) -> Vec<ConsumedRecord> {
        self.read_back_within(kinds, rows, settings, Duration::from_secs(30))
    }

    fn read_back_within(
        &self,
        kinds: &[&str],
        rows: &[Row],
        settings: &[(&str, &str)],
        deadline: Duration,
    ) -> Vec<ConsumedRecord> {
        let topics = self.topics(kinds);
        let refs: Vec<&str> = topics.iter().map(String::as_str).collect();
        let start = Instant::now();
        tokio::task::block_in_place(|| loop {
            let records =
                consume_all_with(&self.broker, settings, &refs, None, Duration::from_secs(3), Duration::from_secs(600))
                    .expect("consume");
            let ids: HashSet<&[u8]> = records.iter().filter_map(|r| r.header("id")).collect();
            let complete = rows.iter().all(|r| ids.contains(r.id.as_bytes()));
            if complete || start.elapsed() > deadline {
                return records;
            }
            std::thread::sleep(Duration::from_secs(1));
        })
    }

    pub async fn drop_slot(&self) {
        let _ = self.sql().await.execute("SELECT pg_drop_replication_slot($1)", &[&self.slot]).await;
    }
}

/// Reads the probe topic, remembering the ids seen.
pub struct ProbeWatcher {
    consumer: BaseConsumer,
    seen: HashSet<String>,
}

impl ProbeWatcher {
    fn poll(&mut self) {
        if let Some(Ok(m)) = self.consumer.poll(Duration::from_millis(20)) {
            if let Some(id) = m.headers().and_then(|h| h.iter().find(|h| h.key == "id").and_then(|h| h.value)) {
                self.seen.insert(String::from_utf8_lossy(id).into_owned());
            }
        }
    }

    /// Waits until probe `id` was consumed; returns the time since `since`.
    pub fn wait(&mut self, id: &str, since: Instant, deadline: Duration) -> Duration {
        tokio::task::block_in_place(|| {
            while !self.seen.contains(id) {
                assert!(since.elapsed() < deadline, "probe {id} not published within {deadline:?}");
                self.poll();
            }
            since.elapsed()
        })
    }
}
