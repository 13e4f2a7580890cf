//! The record differential against the newest Debezium in Kafka Connect itself: a case's rows through
//! Apache Kafka Connect (a distributed worker of the suite's Kafka release) running the Debezium
//! PostgreSQL connector from Maven Central (`scripts/debezium-plugin/pom.xml`), and through pgoutbox,
//! both on the suite's Apache Kafka, every record compared byte for byte as in `harness.rs`.
//!
//! The two sides share one broker, so each side's topics get a prefix of its own: a RegexRouter
//! appended to the case's transformation chain (`<prefix>.<topic>`), stripped again before the
//! comparison. Both sides run under the same connector name and `topic.prefix`, which Debezium's
//! context headers carry; Connect's offsets for the name are deleted after each case (KIP-875) so the
//! next case starts clean.

use std::time::{Duration, Instant};

use pgoutbox::config::parse_properties;
use pgoutbox::kafka::consume::{consume_all, ConsumedRecord};

use super::broker::list_topics;
use super::case::{Case, Expect};
use super::compare::compare;
use super::connect::Connect;
use super::debezium::tail;
use super::harness::{cleanup, prepare, properties, Names, DEBEZIUM_DEADLINE, PGOUTBOX_DEADLINE};
use crate::support::{unique, Env, Relay};

/// The cases run through Connect in the suite: one per converter, placement, expansion, type mode
/// and transformation family (every case with `PGOUTBOX_CONNECT_DIFFERENTIAL=all`).
pub const SUITE: &[fn() -> Case] = &[
    super::cases::default_converters,
    super::cases::string_converters,
    super::cases::placement_envelope_schemas_on,
    super::cases::expand_json_payload_schemas_on,
    super::cases::placement_numerics,
    super::cases::column_defaults,
    super::cases::temporal_adaptive,
    super::cases::header_converter_json,
    super::cases::chain_router_header_predicates,
    super::cases::bytea_binary_data_converter,
    super::cases::message_outbox_placements_and_expansion,
    super::cases::chain_enforce_record_size_after_router,
    // Debezium 3.7 only (3.6.3, the other run's reference, has no such option).
    super::cases::expand_json_payload_empty_arrays_optional_string,
];

/// The schema-registry converters' cases (Connect only: the other run has no converter plugins).
pub const REGISTRY: &[fn() -> Case] = &[
    super::cases::avro_apicurio_ids_in_headers,
    super::cases::avro_apicurio_expanded_payload,
    super::cases::avro_confluent_wire_format_numerics,
    super::cases::avro_confluent_converter,
    super::cases::avro_confluent_expanded_payload,
    super::cases::avro_apicurio_temporal_connect,
    super::cases::avro_apicurio_temporal_adaptive,
    super::cases::protobuf_confluent_converter,
    super::cases::protobuf_confluent_expanded_payload,
    super::cases::protobuf_confluent_envelope,
    super::cases::json_schema_body_floats,
    super::cases::json_schema_body_numerics,
    super::cases::json_schema_body_timestamptz,
    super::cases::json_schema_body_column_types,
    super::cases::ext_json_apicurio_converter,
    super::cases::ext_json_apicurio_expanded_payload,
    super::cases::avro_confluent_column_defaults,
];

/// Schema-registry cases run by name or with `all` only (CI time): each passed when added.
pub const REGISTRY_BY_HAND: &[fn() -> Case] = &[
    super::cases::avro_apicurio_column_defaults,
    super::cases::protobuf_confluent_column_defaults,
    super::cases::ext_json_apicurio_column_defaults,
    super::cases::avro_apicurio_explicit_group,
];

/// The connector's properties with the topic-prefixing router appended (later keys win in both
/// parsers, so appending is enough).
fn with_side_prefix(text: &str, prefix: &str) -> String {
    let chain = parse_properties(text).entries.get("transforms").cloned().unwrap_or_default();
    let chain = if chain.trim().is_empty() { "sideprefix".to_string() } else { format!("{chain},sideprefix") };
    format!(
        "{text}transforms={chain}\ntransforms.sideprefix.type=org.apache.kafka.connect.transforms.RegexRouter\n\
         transforms.sideprefix.regex=(.*)\ntransforms.sideprefix.replacement={prefix}.$1\n"
    )
}

/// The case's topics for one side, allowing records of up to 8 MiB (the payload cases go past the
/// broker's 1 MB default; each side's producer limit is the case's) and any timestamp.
async fn create_side_topics(broker: &str, topics: &[String], partitions: i32) {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    use rdkafka::client::DefaultClientContext;
    let admin: AdminClient<DefaultClientContext> =
        rdkafka::ClientConfig::new().set("bootstrap.servers", broker).create().expect("admin client");
    let new: Vec<NewTopic> = topics
        .iter()
        .map(|t| {
            NewTopic::new(t, partitions, TopicReplication::Fixed(1))
                .set("max.message.bytes", "8388608")
                // The event-timestamp cases write timestamps decades away; Kafka 4 refuses those more
                // than an hour ahead by default.
                .set("message.timestamp.after.max.ms", "9223372036854775807")
        })
        .collect();
    for r in admin.create_topics(&new, &AdminOptions::new()).await.expect("create topics") {
        r.unwrap_or_else(|(t, e)| panic!("creating {t}: {e}"));
    }
    tokio::task::block_in_place(|| {
        crate::support::wait_for("topics visible", Duration::from_secs(20), || {
            topics.iter().all(|t| crate::support::topic_partitions(broker, t) == partitions)
        })
    });
}

/// Every record of the topics starting with `prefix.`, read until idle, the prefix taken off.
fn read_side(broker: &str, prefix: &str, min: usize) -> Vec<ConsumedRecord> {
    let start = Instant::now();
    loop {
        let topics: Vec<String> =
            list_topics(broker).into_iter().filter(|t| t.starts_with(&format!("{prefix}."))).collect();
        let refs: Vec<&str> = topics.iter().map(String::as_str).collect();
        let mut records = if refs.is_empty() {
            Vec::new()
        } else {
            consume_all(broker, &refs, None, Duration::from_secs(2), PGOUTBOX_DEADLINE).expect("read the broker")
        };
        if records.len() >= min || start.elapsed() > PGOUTBOX_DEADLINE {
            for r in &mut records {
                r.topic = r.topic[prefix.len() + 1..].to_string();
            }
            return records;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// Stops the connector, deletes its offsets and then the connector, so that the name starts clean.
fn remove_connector(connect: &Connect, name: &str) -> Result<(), String> {
    connect.stop_connector(name)?;
    let (code, body) = connect.call("DELETE", &format!("/connectors/{name}/offsets"), "");
    if code != 200 {
        return Err(format!("deleting the connector's offsets: {code} {body}"));
    }
    let (code, body) = connect.call("DELETE", &format!("/connectors/{name}"), "");
    if code != 204 {
        return Err(format!("deleting the connector: {code} {body}"));
    }
    Ok(())
}

/// Runs `case` through Connect and pgoutbox; an error is the report of the differences.
pub async fn run_case(connect: &Connect, case: Case) -> Result<String, String> {
    let Expect::Records(n) = case.expect else {
        return Ok("skipped: a failing case shows as a FAILED task in Connect".into());
    };
    let names = Names::new();
    std::fs::create_dir_all(&names.dir).expect("create case dir");
    prepare(&case, &names).await;
    let outcome = execute(connect, &case, &names, n).await;
    cleanup(&names).await;
    if outcome.is_ok() {
        let _ = std::fs::remove_dir_all(&names.dir);
    }
    outcome
}

async fn execute(connect: &Connect, case: &Case, names: &Names, n: usize) -> Result<String, String> {
    let env = Env::get();
    let u = unique("x");
    let (dbz_prefix, pgo_prefix) = (format!("{u}d"), format!("{u}p"));
    for prefix in [&dbz_prefix, &pgo_prefix] {
        let topics: Vec<String> = case.topics.iter().map(|t| format!("{prefix}.{t}")).collect();
        create_side_topics(&env.broker, &topics, case.partitions).await;
    }
    // Connect gets the values as Java's Properties.load reads the file (escapes resolved); pgoutbox
    // reads the file itself.
    let dbz_text = with_side_prefix(&properties(names, &names.debezium_slot, &env.broker, &case.props), &dbz_prefix);
    let dbz = parse_properties(&dbz_text).entries;
    let mut pgo = with_side_prefix(&properties(names, &names.pgoutbox_slot, &env.broker, &case.props), &pgo_prefix);
    // pgoutbox's slot record in a topic of this case's own (the broker outlives the case).
    pgo.push_str(&format!("offset.storage.topic=offsets_{u}\noffset.storage.replication.factor=1\n"));
    for line in &case.pgoutbox_props {
        pgo.push_str(&super::registry::fill(line));
        pgo.push('\n');
    }
    let name = dbz.get("name").cloned().unwrap_or_default();
    // In `pgoutbox run` (one file) a converter's settings apply to the default converter; in Connect
    // only to a converter the connector names, so the Connect side names it.
    let mut dbz = dbz;
    for (prefix, class) in [
        ("key.converter", "org.apache.kafka.connect.json.JsonConverter"),
        ("value.converter", "org.apache.kafka.connect.json.JsonConverter"),
        ("header.converter", "org.apache.kafka.connect.storage.SimpleHeaderConverter"),
    ] {
        if !dbz.contains_key(prefix) && dbz.keys().any(|k| k.starts_with(&format!("{prefix}."))) {
            dbz.insert(prefix.to_string(), class.to_string());
        }
    }

    let sql = env.sql().await;
    for s in &case.sql {
        let s = s.replace("{t}", &names.table);
        sql.batch_execute(&s).await.map_err(|e| format!("case SQL failed: {s}: {e}"))?;
    }
    let started = Instant::now();
    tokio::task::block_in_place(|| connect.create(&name, &dbz))?;
    // With a schema registry, pgoutbox starts once Connect is done: two clients creating artifacts
    // at the same moment can get Apicurio 2.4.2's spurious 409 "already exists" (pgoutbox asks again;
    // Connect's converter fails the task).
    let relay = case.registry.is_none().then(|| Relay::start(&pgo));
    // Until Connect produced the case's records, or its task failed.
    let dbz_records = loop {
        let records = tokio::task::block_in_place(|| read_side(&env.broker, &dbz_prefix, 0));
        if records.len() >= n || started.elapsed() > DEBEZIUM_DEADLINE {
            break records;
        }
        if tokio::task::block_in_place(|| connect.state(&name)).contains("FAILED") {
            break records;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let dbz_time = started.elapsed();
    let mut relay = relay.unwrap_or_else(|| Relay::start(&pgo));
    let state = tokio::task::block_in_place(|| connect.state(&name));
    let removed = tokio::task::block_in_place(|| remove_connector(connect, &name));
    let (b, p) = (env.broker.clone(), pgo_prefix.clone());
    let pgo_records = tokio::task::spawn_blocking(move || read_side(&b, &p, n)).await.expect("reader");
    let pgo_exit = tokio::task::block_in_place(|| relay.stop());
    let logs = || {
        format!(
            "--- Connect ({state}), last lines:\n{}\n--- pgoutbox, last lines:\n{}",
            connect.log_tail(40),
            tail(&relay.log_text(), 40)
        )
    };
    removed.map_err(|e| format!("{e}\n{}", logs()))?;
    if dbz_records.len() != n {
        return Err(format!("the case expects {n} records but Connect produced {}\n{}", dbz_records.len(), logs()));
    }
    if pgo_exit.code() != Some(0) {
        return Err(format!("pgoutbox exited with {pgo_exit}\n{}", logs()));
    }
    let (mut dbz_records, mut pgo_records) = (dbz_records, pgo_records);
    // The bodies compare only if pgoutbox did write the JSON Schema wire format.
    let json_schema = case.registry == Some(super::registry::Ids::JsonSchemaBody);
    let unprefixed =
        pgo_records.iter().filter(|r| json_schema && r.value.as_ref().is_some_and(|v| v.first() != Some(&0))).count();
    if unprefixed > 0 {
        return Err(format!("{unprefixed} of pgoutbox's values lack the magic byte and schema id\n{}", logs()));
    }
    if let Some(ids) = case.registry {
        for r in dbz_records.iter_mut().chain(pgo_records.iter_mut()) {
            super::registry::resolve(ids, r);
        }
    }
    let mut problems = compare(&dbz_records, &pgo_records, case.compare_timestamps);
    if case.registry.is_some_and(|ids| ids != super::registry::Ids::JsonSchemaBody) {
        let group = case
            .props
            .iter()
            .find_map(|p| p.strip_prefix("value.converter.apicurio.registry.artifact.group-id="))
            .unwrap_or("default");
        problems.extend(super::registry::compare_subjects(&case.topics, &dbz_prefix, &pgo_prefix, group));
    }
    if !problems.is_empty() {
        let shown: Vec<&str> = problems.iter().take(8).map(String::as_str).collect();
        return Err(format!(
            "{} difference(s) between Connect + Debezium ({} records) and pgoutbox ({} records); first {}:\n\n{}\n\n{}",
            problems.len(),
            dbz_records.len(),
            pgo_records.len(),
            shown.len(),
            shown.join("\n\n"),
            logs()
        ));
    }
    Ok(format!("{n} records identical; Connect {:.1}s", dbz_time.as_secs_f64()))
}

/// Every case of `cases` through one Connect worker; panics with every failing case's report.
pub async fn run(cases: Vec<Case>) {
    let _turn = super::turn().await;
    let env = Env::get();
    let dir = std::env::temp_dir().join("pgoutbox-differential").join(unique("connect"));
    let connect = tokio::task::block_in_place(|| Connect::start(dir.clone(), &env.broker, ""));
    let mut failures = Vec::new();
    let total = cases.len();
    for case in cases {
        let name = case.name;
        let started = Instant::now();
        match run_case(&connect, case).await {
            Ok(summary) => {
                eprintln!("[differential via Connect] {name}: PASS, {summary}, {:.1}s", started.elapsed().as_secs_f64())
            }
            Err(report) => {
                eprintln!("[differential via Connect] {name}: FAIL");
                failures.push(format!("{name}:\n{report}"));
            }
        }
    }
    drop(connect);
    if failures.is_empty() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    assert!(failures.is_empty(), "{} of {total} cases differ:\n\n{}", failures.len(), failures.join("\n\n"));
}
