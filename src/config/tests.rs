use super::*;

fn base() -> RawConfig {
    parse_properties(
        "name=outbox-connector\n\
         connector.class=io.debezium.connector.postgresql.PostgresConnector\n\
         database.hostname=127.0.0.1\ndatabase.port=5433\ndatabase.user=postgres\ndatabase.password=s3cret\n\
         database.dbname=app\ntopic.prefix=dbserver1\nplugin.name=pgoutput\nslot.name=outbox_slot\n\
         publication.name=outbox_pub\npublication.autocreate.mode=filtered\ntable.include.list=public.outbox\n\
         transforms=outbox\ntransforms.outbox.type=io.debezium.transforms.outbox.EventRouter\n\
         bootstrap.servers=127.0.0.1:9092\n",
    )
}

fn with(extra: &[&str]) -> Result<Config, ConfigError> {
    let mut raw = base();
    for e in extra {
        raw.set(e).unwrap();
    }
    Config::from_raw(&raw)
}

fn err_key(extra: &[&str]) -> String {
    match with(extra) {
        Err(ConfigError::Invalid { key, .. } | ConfigError::Missing { key, .. }) => key,
        other => panic!("expected a key error for {extra:?}, got {other:?}"),
    }
}

fn key_of(result: Result<Config, ConfigError>) -> String {
    match result {
        Err(ConfigError::Invalid { key, .. } | ConfigError::Missing { key, .. }) => key,
        other => panic!("expected a key error, got {other:?}"),
    }
}

#[test]
fn config_supported_keys_are_parsed() {
    let c = with(&[
        "transforms.outbox.route.by.field=kind",
        "transforms.outbox.route.topic.regex=(?<routedByValue>.*)Aggregate",
        "transforms.outbox.route.topic.replacement=${routedByValue}.events",
        "transforms.outbox.table.field.event.id=event_id",
        "transforms.outbox.table.field.event.key=agg_id",
        "transforms.outbox.table.field.event.payload=body",
        "transforms.outbox.table.op.invalid.behavior=fatal",
        "transforms.outbox.route.tombstone.on.empty.payload=true",
        "key.converter=org.apache.kafka.connect.storage.StringConverter",
        "value.converter=org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable=false",
        "database.sslmode=disable",
        "status.update.interval.ms=500",
        "skipped.operations=u,d",
    ])
    .unwrap();
    assert_eq!(c.connector_name, "outbox-connector");
    assert_eq!((c.database.hostname.as_str(), c.database.port), ("127.0.0.1", 5433));
    assert_eq!(c.database.password.as_ref().unwrap().expose(), "s3cret");
    assert_eq!(c.database.sslmode, SslMode::Disable);
    assert_eq!((c.slot_name.as_str(), c.publication_name.as_str()), ("outbox_slot", "outbox_pub"));
    assert_eq!(c.publication_autocreate, AutocreateMode::Filtered);
    assert!(c.tables.matches("public", "outbox"));
    assert!(!c.tables.matches("public", "outbox2"), "include lists are anchored");
    assert_eq!(c.router.route_by_field, "kind");
    assert!(c.router.route_topic_regex.is_match("OrderAggregate"));
    assert!(!c.router.route_topic_regex.is_match("OrderAggregatex"), "Java's matches() is a full match");
    assert_eq!(c.router.route_topic_replacement, "${routedByValue}.events");
    assert_eq!(c.router.field_event_id, "event_id");
    assert_eq!(c.router.field_event_key, "agg_id");
    assert_eq!(c.router.field_event_payload, "body");
    assert_eq!(c.router.op_invalid_behavior, InvalidOpBehavior::Fatal);
    assert!(c.router.tombstone_on_empty_payload);
    assert_eq!(c.key_converter, Converter::String);
    assert_eq!(c.value_converter, Converter::json(false));
    assert_eq!(c.status_interval, Duration::from_millis(500));
    assert!(c.skipped.update && !c.skipped.insert);
    assert_eq!(c.kafka.bootstrap_servers, "127.0.0.1:9092");
}

#[test]
fn config_defaults_match_debezium() {
    let c = with(&[]).unwrap();
    assert_eq!(c.router.route_by_field, "aggregatetype");
    assert_eq!(c.router.route_topic_replacement, "outbox.event.${routedByValue}");
    assert_eq!(c.router.field_event_id, "id");
    assert_eq!(c.router.field_event_key, "aggregateid");
    assert_eq!(c.router.field_event_payload, "payload");
    assert_eq!(c.router.op_invalid_behavior, InvalidOpBehavior::Warn);
    assert!(!c.router.tombstone_on_empty_payload);
    // Like the Debezium container image: JsonConverter with schemas.
    assert_eq!(c.key_converter, Converter::json(true));
    assert_eq!(c.value_converter, Converter::json(true));
    assert_eq!(c.database.sslmode, SslMode::Prefer);
    assert_eq!(c.status_interval, Duration::from_secs(10));
    assert!(!c.skipped.insert && !c.skipped.update);
    assert!(c.extended_headers);
    let mut raw = base();
    raw.entries.remove("slot.name");
    raw.entries.remove("publication.name");
    raw.entries.remove("publication.autocreate.mode");
    let c = Config::from_raw(&raw).unwrap();
    assert_eq!((c.slot_name.as_str(), c.publication_name.as_str()), ("debezium", "dbz_publication"));
    assert_eq!(c.publication_autocreate, AutocreateMode::AllTables);
}

#[test]
fn config_malformed_values_name_the_key() {
    assert_eq!(err_key(&["database.port=abc"]), "database.port");
    assert_eq!(err_key(&["database.port=70000"]), "database.port");
    assert_eq!(err_key(&["plugin.name=decoderbufs"]), "plugin.name");
    assert_eq!(err_key(&["publication.autocreate.mode=sometimes"]), "publication.autocreate.mode");
    assert_eq!(err_key(&["database.sslmode=verify-fully"]), "database.sslmode");
    assert_eq!(err_key(&["slot.name=Bad-Slot"]), "slot.name");
    assert_eq!(err_key(&["status.update.interval.ms=soon"]), "status.update.interval.ms");
    assert_eq!(err_key(&["status.update.interval.ms=0"]), "status.update.interval.ms");
    assert_eq!(err_key(&["skipped.operations=x"]), "skipped.operations");
    assert_eq!(err_key(&["time.precision.mode=millis"]), "time.precision.mode");
    assert_eq!(err_key(&["decimal.handling.mode=exact"]), "decimal.handling.mode");
    assert_eq!(err_key(&["binary.handling.mode=base32"]), "binary.handling.mode");
    assert_eq!(err_key(&["interval.handling.mode=iso"]), "interval.handling.mode");
    assert_eq!(err_key(&["table.include.list=public.(outbox"]), "table.include.list");
    assert_eq!(err_key(&["transforms.outbox.route.topic.regex=(unclosed"]), "transforms.outbox.route.topic.regex");
    assert_eq!(
        err_key(&["transforms.outbox.table.op.invalid.behavior=ignore"]),
        "transforms.outbox.table.op.invalid.behavior"
    );
    assert_eq!(
        err_key(&["transforms.outbox.route.tombstone.on.empty.payload=yes"]),
        "transforms.outbox.route.tombstone.on.empty.payload"
    );
    assert_eq!(
        err_key(&["transforms.outbox.type=org.apache.kafka.connect.transforms.RegexRouter"]),
        "transforms.outbox.type"
    );
    assert_eq!(err_key(&["transforms=a,b"]), "transforms");
    assert_eq!(
        err_key(&["transforms=outbox,b", "transforms.b.type=com.example.MySmt"]),
        "transforms.b.type",
        "a class pgoutbox does not implement is refused, naming the alias"
    );
    assert_eq!(
        err_key(&[
            "transforms=r,outbox",
            "transforms.r.type=org.apache.kafka.connect.transforms.RegexRouter",
            "transforms.r.regex=x",
            "transforms.r.replacement=y"
        ]),
        "transforms.r.type",
        "a record transform before the router is refused"
    );
    assert_eq!(
        err_key(&["transforms=only", "transforms.only.type=org.apache.kafka.connect.transforms.Filter"]),
        "transforms.only.type"
    );
    assert_eq!(
        err_key(&[
            "transforms=outbox,f",
            "transforms.f.type=org.apache.kafka.connect.transforms.Filter",
            "transforms.f.predicate=nope"
        ]),
        "transforms.f.predicate"
    );
    // A registry converter without its registry names the key that is missing.
    assert_eq!(
        err_key(&["value.converter=io.apicurio.registry.utils.converter.AvroConverter"]),
        "value.converter.apicurio.registry.url"
    );
    assert_eq!(
        err_key(&["key.converter=io.confluent.connect.avro.AvroConverter"]),
        "key.converter.schema.registry.url"
    );
    assert_eq!(
        err_key(&["key.converter=io.confluent.connect.protobuf.ProtobufConverter"]),
        "key.converter.schema.registry.url"
    );
    assert_eq!(
        err_key(&["key.converter=io.confluent.connect.json.JsonSchemaConverter"]),
        "key.converter.schema.registry.url"
    );
    assert_eq!(err_key(&["key.converter=io.apicurio.registry.utils.converter.SerdeBasedConverter"]), "key.converter");
    assert_eq!(err_key(&["value.converter.schemas.enable=maybe"]), "value.converter.schemas.enable");
    assert_eq!(err_key(&["header.converter=x.Y"]), "header.converter");
    assert_eq!(err_key(&["connector.class=io.debezium.connector.mysql.MySqlConnector"]), "connector.class");
    assert_eq!(
        err_key(&["transforms.outbox.table.expand.json.payload=maybe"]),
        "transforms.outbox.table.expand.json.payload"
    );
    assert_eq!(
        err_key(&["transforms.outbox.table.json.payload.null.behavior=drop"]),
        "transforms.outbox.table.json.payload.null.behavior"
    );
    assert_eq!(
        err_key(&["topic.creation.default.partitions=0", "topic.creation.default.replication.factor=1"]),
        "topic.creation.default.partitions"
    );
}

#[test]
fn config_missing_required_keys_are_named() {
    for key in
        ["database.hostname", "database.user", "database.dbname", "topic.prefix", "bootstrap.servers", "transforms"]
    {
        let mut raw = base();
        raw.entries.remove(key);
        match Config::from_raw(&raw) {
            Err(ConfigError::Missing { key: k, .. }) => assert_eq!(k, key),
            other => panic!("removing {key} gave {other:?}"),
        }
    }
    let mut raw = base();
    raw.entries.remove("table.include.list");
    assert!(
        matches!(Config::from_raw(&raw), Err(ConfigError::Invalid { key, .. }) if key == "publication.autocreate.mode")
    );
}

#[test]
fn config_lists_ignored_keys_with_reasons() {
    assert!(with(&["snapshot.mode=no_data"]).unwrap().ignored.is_empty(), "no_data is what pgoutbox does");
    assert_eq!(with(&[]).unwrap().snapshot_mode, SnapshotMode::Initial, "Debezium's default");
    assert_eq!(with(&["snapshot.mode=never"]).unwrap().snapshot_mode, SnapshotMode::NoData);
    assert_eq!(err_key(&["snapshot.mode=custom"]), "snapshot.mode");
    let c = with(&[
        "tasks.max=1",
        "snapshot.isolation.mode=serializable",
        "database.server.name=old",
        "frobnicate=1",
        "producer.linger.ms=5",
        "transforms.outbox.debezium.op.invalid.behavior=warn",
    ])
    .unwrap();
    let find =
        |k: &str| c.ignored.iter().find(|i| i.key == k).unwrap_or_else(|| panic!("{k} not listed")).reason.clone();
    assert!(find("tasks.max").contains("single task"));
    assert!(find("snapshot.isolation.mode").contains("exported snapshot"));
    assert!(find("database.server.name").contains("topic.prefix"));
    assert!(find("frobnicate").contains("not a key"));
    assert!(!c.ignored.iter().any(|i| i.key == "producer.linger.ms"), "producer settings are passed through");
    assert_eq!(c.kafka.producer_overrides.get("linger.ms"), Some("5"));
    assert!(!c.ignored.iter().any(|i| i.key == "slot.name"), "used keys are not listed");
    // A 1.x key whose current name is not set is read as 1.x did, with a warning.
    assert!(!c.ignored.iter().any(|i| i.key == "transforms.outbox.debezium.op.invalid.behavior"));
    assert!(c
        .warnings
        .iter()
        .any(|w| w.contains("debezium.op.invalid.behavior") && w.contains("table.op.invalid.behavior")));
}

/// Debezium 1.x keys still found in running deployments, read as 1.x read them unless the current
/// key is set too.
#[test]
fn config_reads_debezium_1x_keys_as_1x_did() {
    let mut raw = base();
    raw.entries.remove("topic.prefix");
    raw.entries.remove("table.include.list");
    for (k, v) in [
        ("database.server.name", "legacy1"),
        ("table.whitelist", "public.outbox"),
        ("schema.blacklist", "audit"),
        ("transforms.outbox.table.field.event.payload.id", "stream_id"),
        ("transforms.outbox.debezium.op.invalid.behavior", "fatal"),
        ("transforms.outbox.debezium.expand.json.payload", "true"),
        ("value.converter", "io.debezium.converters.ByteBufferConverter"),
        ("value.converter.delegate.converter.type", "org.apache.kafka.connect.json.JsonConverter"),
        ("value.converter.delegate.converter.type.schemas.enable", "false"),
    ] {
        raw.entries.insert(k.into(), v.into());
    }
    let c = Config::from_raw(&raw).unwrap();
    assert_eq!(c.topic_prefix, "legacy1");
    assert!(c.tables.matches("public", "outbox") && !c.tables.matches("public", "other"));
    assert!(!c.tables.matches("audit", "outbox"));
    assert_eq!(c.router.field_event_key, "stream_id");
    assert_eq!(c.router.op_invalid_behavior, InvalidOpBehavior::Fatal);
    assert!(c.router.expand_json_payload);
    assert_eq!(
        c.value_converter,
        Converter::BinaryOr(crate::connect::converter::Delegate::Json {
            schemas: false,
            decimals: crate::connect::json::Decimals::Base64
        })
    );
    for key in [
        "database.server.name",
        "table.whitelist",
        "schema.blacklist",
        "payload.id",
        "debezium.expand.json.payload",
        "ByteBufferConverter",
    ] {
        assert!(c.warnings.iter().any(|w| w.contains(key)), "no warning about {key}: {:?}", c.warnings);
    }
    assert!(c.ignored.is_empty(), "{:?}", c.ignored);
    // The current key wins, and the 1.x one is listed as ignored.
    raw.entries.insert("topic.prefix".into(), "current".into());
    raw.entries.insert("transforms.outbox.table.field.event.key".into(), "aggregateid".into());
    let c = Config::from_raw(&raw).unwrap();
    assert_eq!((c.topic_prefix.as_str(), c.router.field_event_key.as_str()), ("current", "aggregateid"));
    assert!(c.ignored.iter().any(|i| i.key == "database.server.name"));
}

/// A bare config map without `name` takes the connector's name from its file.
#[test]
fn config_without_name_is_named_after_its_file() {
    let dir = std::env::temp_dir().join(format!("pgoutbox-name-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut raw = base();
    raw.entries.remove("name");
    let body: Vec<String> = raw.entries.iter().map(|(k, v)| format!("{:?}: {:?}", k, v)).collect();
    let path = dir.join("orders-outbox.json");
    std::fs::write(&path, format!("{{{}}}", body.join(","))).unwrap();
    let c = Config::from_raw(&RawConfig::load(&path).unwrap()).unwrap();
    assert_eq!(c.connector_name, "orders-outbox");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Transform chains: aliases in order around the router, predicates, the tracing transform.
#[test]
fn config_reads_transform_chains() {
    let c = with(&[
        "transforms=trace,outbox,route,tag",
        "transforms.trace.type=io.debezium.transforms.tracing.ActivateTracingSpan",
        "transforms.route.type=org.apache.kafka.connect.transforms.RegexRouter",
        "transforms.route.regex=(.*)",
        "transforms.route.replacement=x.$1",
        "transforms.tag.type=org.apache.kafka.connect.transforms.InsertHeader",
        "transforms.tag.header=h",
        "transforms.tag.value.literal=v",
        "transforms.tag.predicate=p",
        "transforms.tag.negate=true",
        "predicates=p",
        "predicates.p.type=org.apache.kafka.connect.transforms.predicates.HasHeaderKey",
        "predicates.p.name=id",
    ])
    .unwrap();
    let chain = &c.router.chain;
    assert_eq!(chain.router_alias, "outbox");
    assert_eq!(chain.before.iter().map(|s| s.alias.as_str()).collect::<Vec<_>>(), ["trace"]);
    assert_eq!(chain.after.iter().map(|s| s.alias.as_str()).collect::<Vec<_>>(), ["route", "tag"]);
    assert!(c.warnings.iter().any(|w| w.contains("ActivateTracingSpan")));
    assert!(c.ignored.is_empty(), "{:?}", c.ignored);
}

#[test]
fn config_password_never_appears_in_debug_output() {
    let c = with(&[]).unwrap();
    let dbg = format!("{c:?}");
    assert!(!dbg.contains("s3cret"), "password leaked: {dbg}");
}

#[test]
fn config_additional_placements_follow_debezium_syntax() {
    let c = with(&[
        "transforms.outbox.table.fields.additional.placement=type:header:eventType, part:PARTITION ,type:envelope",
        "transforms.outbox.table.field.additional.missing=ignore",
        "transforms.outbox.table.field.event.timestamp=ts",
    ])
    .unwrap();
    let a = &c.router.additional;
    assert_eq!(a.len(), 3);
    assert_eq!((a[0].column.as_str(), a[0].placement, a[0].alias.as_str()), ("type", Placement::Header, "eventType"));
    assert_eq!((a[1].placement, a[1].alias.as_str()), (Placement::Partition, "part"));
    assert_eq!((a[2].placement, a[2].alias.as_str()), (Placement::Envelope, "type"));
    assert!(c.router.additional_missing_ignore);
    assert_eq!(c.router.field_event_timestamp.as_deref(), Some("ts"));
    for bad in ["type", "type:footer", "type:header:a:b", ":header"] {
        assert_eq!(
            err_key(&[&format!("transforms.outbox.table.fields.additional.placement={bad}")]),
            "transforms.outbox.table.fields.additional.placement",
            "{bad}"
        );
    }
    assert_eq!(
        err_key(&["transforms.outbox.table.field.additional.missing=skip"]),
        "transforms.outbox.table.field.additional.missing"
    );
}

#[test]
fn config_topic_creation_needs_both_defaults() {
    assert!(with(&["topic.creation.default.partitions=3"]).unwrap().kafka.topic_creation.is_none());
    let c = with(&["topic.creation.default.partitions=3", "topic.creation.default.replication.factor=1"]).unwrap();
    let tc = c.kafka.topic_creation.unwrap();
    assert_eq!((tc.partitions, tc.replication_factor), (3, 1));
}

#[test]
fn config_include_lists_are_case_insensitive_like_debezium() {
    let c = with(&["table.include.list=Public.OUTBOX"]).unwrap();
    assert!(c.tables.matches("public", "outbox"));
}

#[test]
fn lsn_flush_mode_is_read_as_debezium_reads_it() {
    assert!(with(&["lsn.flush.mode=CONNECTOR"]).is_ok(), "case-insensitive, as Debezium's enum");
    assert_eq!(err_key(&["lsn.flush.mode=sometimes"]), "lsn.flush.mode");
    assert!(with(&["lsn.flush.mode=Manual"]).unwrap().lsn_flush_manual);
    assert!(!with(&["lsn.flush.mode=connector_and_driver"]).unwrap().lsn_flush_manual);
    assert!(!with(&[]).unwrap().lsn_flush_manual);
    // The deprecated key's false is manual, unless lsn.flush.mode says otherwise.
    assert!(with(&["flush.lsn.source=false"]).unwrap().lsn_flush_manual);
    assert!(!with(&["lsn.flush.mode=connector", "flush.lsn.source=false"]).unwrap().lsn_flush_manual);
    // Given both, lsn.flush.mode wins without a word; the deprecated key alone is read with a warning.
    let c = with(&["lsn.flush.mode=connector", "flush.lsn.source=false"]).unwrap();
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    assert!(c.ignored.iter().all(|k| k.key != "flush.lsn.source"), "{:?}", c.ignored);
    let c = with(&["flush.lsn.source=true"]).unwrap();
    assert!(c.warnings.iter().any(|w| w.contains("'flush.lsn.source' is deprecated")), "{:?}", c.warnings);
    assert_eq!(err_key(&["flush.lsn.source=maybe"]), "flush.lsn.source");
}

/// Debezium's heartbeat topic is its prefix and `topic.prefix` joined by `topic.delimiter`
/// (`AbstractTopicNamingStrategy.heartbeatTopic`); `topic.heartbeat.name` replaces it whole.
#[test]
fn heartbeat_topic_follows_topic_delimiter() {
    let topic = |extra: &[&str]| {
        let props = [&["heartbeat.interval.ms=1000"], extra].concat();
        with(&props).unwrap().heartbeat.unwrap().topic
    };
    let prefix = with(&[]).unwrap().topic_prefix;
    assert_eq!(topic(&[]), format!("__debezium-heartbeat.{prefix}"));
    assert_eq!(topic(&["topic.delimiter=_"]), format!("__debezium-heartbeat_{prefix}"));
    assert_eq!(topic(&["topic.delimiter=_", "topic.heartbeat.name=beats"]), "beats");
    assert_eq!(with(&["topic.delimiter=_"]).unwrap().router.topic_delimiter, "_");
}

#[test]
fn connector_and_driver_turns_heartbeats_on_as_debezium_does() {
    let c = with(&["lsn.flush.mode=connector_and_driver"]).unwrap();
    assert_eq!(c.heartbeat.as_ref().map(|h| h.interval), Some(Duration::from_millis(600_000)));
    assert!(
        c.warnings.iter().any(|w| w.starts_with("heartbeat.interval.ms was internally set to 600000 ms")),
        "{:?}",
        c.warnings
    );
    let c = with(&["lsn.flush.mode=connector_and_driver", "heartbeat.interval.ms=5000"]).unwrap();
    assert_eq!(c.heartbeat.as_ref().map(|h| h.interval), Some(Duration::from_millis(5_000)));
    let c = with(&["lsn.flush.mode=connector_and_driver", "provide.transaction.metadata=true"]).unwrap();
    assert!(c.heartbeat.is_none());
    assert!(with(&["lsn.flush.mode=connector"]).unwrap().heartbeat.is_none());
}

#[test]
fn enforce_record_size_is_checked_and_passes_the_routers_records_through() {
    let after = |opts: &[&str]| {
        let mut keys = vec!["transforms=outbox,size", "transforms.size.type=io.debezium.transforms.EnforceRecordSize"];
        keys.extend_from_slice(opts);
        with(&keys)
    };
    let c = after(&["transforms.size.max.bytes=1000000"]).unwrap();
    assert!(
        c.warnings
            .iter()
            .any(|w| w.starts_with("transforms.size: io.debezium.transforms.EnforceRecordSize changes nothing")),
        "{:?}",
        c.warnings
    );
    assert!(c.ignored.iter().all(|k| !k.key.starts_with("transforms.size.")), "{:?}", c.ignored);
    assert_eq!(
        err_key(&["transforms=outbox,size", "transforms.size.type=io.debezium.transforms.EnforceRecordSize"]),
        "transforms.size.max.bytes"
    );
    for bad in ["transforms.size.max.bytes=0", "transforms.size.max.bytes=x"] {
        assert_eq!(key_of(after(&[bad])), "transforms.size.max.bytes", "{bad}");
    }
    assert_eq!(
        key_of(after(&["transforms.size.max.bytes=10", "transforms.size.compression.ratio=0"])),
        "transforms.size.compression.ratio"
    );
    assert_eq!(
        key_of(after(&["transforms.size.max.bytes=10", "transforms.size.min.field.size=-1"])),
        "transforms.size.min.field.size"
    );
    // Before the router it would cut the outbox row's payload short: refused, saying so.
    let err = with(&[
        "transforms=size,outbox",
        "transforms.size.type=io.debezium.transforms.EnforceRecordSize",
        "transforms.size.max.bytes=1000",
    ])
    .unwrap_err();
    assert!(err.to_string().contains("payload"), "{err}");
    assert_eq!(key_of(Err(err)), "transforms.size.type");
}

#[test]
fn lsn_flush_timeout_and_offset_mismatch_are_read_as_debezium_reads_them() {
    assert_eq!(err_key(&["lsn.flush.timeout.action=retry"]), "lsn.flush.timeout.action");
    assert_eq!(err_key(&["lsn.flush.timeout.ms=0"]), "lsn.flush.timeout.ms");
    assert_eq!(err_key(&["lsn.flush.timeout.ms=soon"]), "lsn.flush.timeout.ms");
    assert_eq!(err_key(&["offset.mismatch.strategy=trust_me"]), "offset.mismatch.strategy");
    let defaults = with(&[]).unwrap();
    assert_eq!(defaults.lsn_flush_timeout, std::time::Duration::from_secs(30));
    assert_eq!(defaults.lsn_flush_timeout_action, crate::config::FlushTimeoutAction::Fail);
    let c = with(&[
        "lsn.flush.timeout.action= WARN ",
        "lsn.flush.timeout.ms=5000",
        "offset.mismatch.strategy=trust_greater_lsn",
    ])
    .unwrap();
    assert_eq!(c.lsn_flush_timeout, std::time::Duration::from_millis(5000));
    assert_eq!(c.lsn_flush_timeout_action, crate::config::FlushTimeoutAction::Warn);
    assert_eq!(
        with(&["lsn.flush.timeout.action=ignore"]).unwrap().lsn_flush_timeout_action,
        crate::config::FlushTimeoutAction::Ignore
    );
    for key in ["lsn.flush.timeout.action", "lsn.flush.timeout.ms", "offset.mismatch.strategy"] {
        assert!(!c.ignored.iter().any(|k| k.key == key), "{key} is acted on, not ignored: {:?}", c.ignored);
    }
    assert_eq!(c.offset_mismatch, crate::config::OffsetMismatch::TrustGreaterLsn);
    // As Debezium parses it: case-insensitive, trimmed; no_validation by default.
    assert_eq!(
        with(&["offset.mismatch.strategy= Trust_Offset "]).unwrap().offset_mismatch,
        crate::config::OffsetMismatch::TrustOffset
    );
    assert_eq!(with(&[]).unwrap().offset_mismatch, crate::config::OffsetMismatch::NoValidation);
    assert!(!crate::config::OffsetMismatch::TrustSlot.advances_slot());
    assert!(crate::config::OffsetMismatch::TrustGreaterLsn.advances_slot());
}

/// A value refused because a reference to an undeclared provider was read literally says so.
#[test]
fn a_refused_value_that_is_an_undeclared_provider_reference_says_so() {
    let e = with(&[
        "value.converter=io.confluent.connect.avro.AvroConverter",
        "value.converter.schema.registry.url=${env:SR_URL}",
    ])
    .unwrap_err();
    let ConfigError::Invalid { key, message } = e else { panic!("{e:?}") };
    assert_eq!(key, "value.converter.schema.registry.url");
    assert!(message.contains("config provider `env`") && message.contains("config.providers"), "{message}");
    assert!(!message.contains("SR_URL"), "the value is not repeated: {message}");
}

#[test]
fn config_refuses_what_it_cannot_honour() {
    assert_eq!(
        err_key(&["transforms.outbox.field.name.adjustment.mode=avro"]),
        "transforms.outbox.field.name.adjustment.mode"
    );
    assert!(with(&["lsn.flush.mode=connector"]).is_ok());
    // Custom converters are Java classes: refused when named, as the key Debezium reads them from.
    assert_eq!(err_key(&["converters=bool", "bool.type=com.example.BooleanConverter"]), "converters");
    assert!(with(&["converters= "]).is_ok());
    let c = with(&[
        "topic.creation.default.partitions=3",
        "topic.creation.default.replication.factor=1",
        "topic.creation.enable=false",
    ])
    .unwrap();
    assert!(c.kafka.topic_creation.is_none(), "topic.creation.enable=false wins");
    assert_eq!(
        with(&["pgoutbox.commit.lsn.header=TRUE"]).unwrap().commit_lsn_header.as_deref(),
        Some("__pgoutbox.commit_lsn")
    );
}

#[test]
fn config_time_precision_mode_is_read_like_debezium() {
    use crate::debezium::TemporalPrecision as M;
    let mode = |v: &str| with(&[&format!("time.precision.mode={v}")]).unwrap().router.type_modes.temporal;
    assert_eq!(with(&[]).unwrap().router.type_modes.temporal, M::Adaptive);
    assert_eq!(mode("connect"), M::Connect);
    assert_eq!(mode("ADAPTIVE_TIME_MICROSECONDS"), M::AdaptiveTimeMicroseconds);
    assert_eq!(mode("microseconds"), M::Microseconds);
    assert_eq!(mode("nanoseconds"), M::Nanoseconds);
    assert_eq!(mode("isostring"), M::IsoString);
    let header = |extra: &[&str]| with(extra).unwrap().router.header_converter;
    assert_eq!(header(&[]), None);
    assert_eq!(header(&["header.converter=org.apache.kafka.connect.storage.SimpleHeaderConverter"]), None);
    assert_eq!(header(&["header.converter=org.apache.kafka.connect.json.JsonConverter"]), Some(Converter::json(true)));
    assert_eq!(
        header(&[
            "header.converter=org.apache.kafka.connect.json.JsonConverter",
            "header.converter.schemas.enable=false"
        ]),
        Some(Converter::json(false))
    );
    let intervals = |v: &str| with(&[&format!("interval.handling.mode={v}")]).unwrap().router.type_modes.intervals;
    assert_eq!(with(&[]).unwrap().router.type_modes.intervals, crate::debezium::IntervalHandling::Numeric);
    assert_eq!(intervals("STRING"), crate::debezium::IntervalHandling::String);
}

/// Every key pgoutbox documents, set to a value that may be a secret (or a file's contents read
/// through a provider): whatever the parser says of it, the value never comes back, in the error,
/// a warning or an ignored key's reason.
#[test]
fn config_errors_never_repeat_a_value() {
    const MARK: &str = "Zq9Mark";
    let docs = include_str!("../../docs/compatibility.md");
    let key = regex::Regex::new(r"`([a-z][a-z0-9_]*(?:\.[a-z0-9_]+)+)`").unwrap();
    // `config.providers` lists aliases, which name keys (`config.providers.<alias>.class`): an
    // error about an alias names its key, so the alias is left out here.
    let mut keys: std::collections::BTreeSet<String> = key
        .captures_iter(docs)
        .map(|c| c[1].to_string())
        .filter(|k| !["config.providers", "transforms", "predicates"].contains(&k.as_str()))
        .collect();
    let options: Vec<String> = keys.iter().map(|k| format!("transforms.outbox.{k}")).collect();
    keys.extend(options);
    // A chain with one transform of each family, so their options are read too.
    let chain = [
        "transforms=outbox,route,cast,mask,ts,flat,hoist,filter",
        "transforms.route.type=org.apache.kafka.connect.transforms.RegexRouter",
        "transforms.route.regex=x",
        "transforms.route.replacement=y",
        "transforms.cast.type=org.apache.kafka.connect.transforms.Cast$Value",
        "transforms.cast.spec=int32",
        "transforms.mask.type=org.apache.kafka.connect.transforms.MaskField$Value",
        "transforms.mask.fields=a",
        "transforms.ts.type=org.apache.kafka.connect.transforms.TimestampConverter$Value",
        "transforms.ts.target.type=string",
        "transforms.ts.format=yyyy",
        "transforms.flat.type=org.apache.kafka.connect.transforms.Flatten$Value",
        "transforms.hoist.type=org.apache.kafka.connect.transforms.HoistField$Value",
        "transforms.hoist.field=f",
        "transforms.filter.type=org.apache.kafka.connect.transforms.Filter",
        "transforms.filter.predicate=p",
        "predicates=p",
        "predicates.p.type=org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
        "predicates.p.pattern=x",
    ];
    for alias in ["route", "cast", "mask", "ts", "flat", "hoist", "filter"] {
        for o in ["regex", "replacement", "spec", "fields", "replacement", "target.type", "format", "field", "type"] {
            keys.insert(format!("transforms.{alias}.{o}"));
        }
    }
    keys.extend(["predicates.p.pattern", "predicates.p.type"].map(String::from));
    let values = [
        MARK.to_string(),
        format!("{MARK}:{MARK}:{MARK},{MARK}"),
        format!("({MARK}"),
        format!("io.{MARK}.Class"),
        format!("/{MARK}/x"),
    ];
    let mut tried = 0;
    let mut echoed = std::collections::BTreeMap::new();
    for k in &keys {
        for v in &values {
            let mut raw = base();
            for c in chain {
                raw.set(c).unwrap();
            }
            raw.entries.insert(k.clone(), v.clone());
            tried += 1;
            let said: Vec<String> = match Config::from_raw(&raw) {
                Err(e) => vec![e.to_string()],
                Ok(c) => c.warnings.iter().cloned().chain(c.ignored.iter().map(|i| i.reason.clone())).collect(),
            };
            if let Some(s) = said.into_iter().find(|s| s.contains(MARK)) {
                echoed.insert(k.clone(), format!("{v}: {s}"));
            }
        }
    }
    assert!(echoed.is_empty(), "values repeated:\n{echoed:#?}");
    assert!(tried > 1000, "only {tried} values tried: did the docs' key list move?");
}

/// A producer queue (buffer.memory) smaller than the largest record (max.request.size) could
/// never take a record between the two: refused at start, naming both keys.
#[test]
fn config_refuses_a_producer_queue_smaller_than_its_largest_record() {
    let e = with(&["producer.buffer.memory=524288"]).unwrap_err().to_string();
    assert!(e.contains("buffer.memory") && e.contains("max.request.size"), "{e}");
    let e = with(&["producer.override.max.request.size=33554432"]).unwrap_err().to_string();
    assert!(e.contains("buffer.memory"), "{e}");
    assert!(with(&["producer.buffer.memory=67108864", "producer.override.max.request.size=33554432"]).is_ok());
}

/// KIP-891: a connector that asks for a plugin version pgoutbox is not is refused, naming it.
#[test]
fn a_connector_plugin_version_must_be_pgoutbox_s() {
    assert!(with(&["connector.plugin.version=3.6.3.Final"]).is_ok());
    assert!(with(&["connector.plugin.version=[3.0,4.0)"]).is_ok());
    assert_eq!(err_key(&["connector.plugin.version=9.9.9"]), "connector.plugin.version");
    let e = with(&["connector.plugin.version=(3.6.3,)"]).unwrap_err().to_string();
    assert!(e.contains("this worker does not have; available versions: [3.6.3.Final]"), "{e}");
}

#[test]
fn config_message_outbox_needs_the_decode_transform_before_the_router() {
    const DECODE: &str =
        "transforms.decode.type=io.debezium.connector.postgresql.transforms.DecodeLogicalDecodingMessageContent";
    // Without the transform no message is captured, and the message keys are said to do nothing.
    let c = with(&["message.prefix.include.list=orders"]).unwrap();
    assert!(c.messages.is_none());
    assert!(c.warnings.iter().any(|w| w.contains("message.prefix.include.list changes nothing")), "{:?}", c.warnings);
    // Before the router: messages are events, selected by prefix (anchored, any case).
    let c = with(&["transforms=decode,outbox", DECODE, "message.prefix.include.list=orders.*"]).unwrap();
    let m = c.messages.expect("messages captured");
    assert!(m.captures("Orders_v2") && !m.captures("my_orders"));
    assert_eq!(m.non_transactional, messages::NonTransactional::Skip);
    assert!(!c.tables.none, "a table list keeps its tables");
    let c = with(&["transforms=decode,outbox", DECODE, "message.prefix.exclude.list=audit"]).unwrap();
    assert!(!c.messages.as_ref().unwrap().captures("AUDIT") && c.messages.unwrap().captures("orders"));
    // After the router it decodes nothing: a warning, no capture.
    let c = with(&["transforms=outbox,decode", DECODE]).unwrap();
    assert!(c.messages.is_none() && c.warnings.iter().any(|w| w.contains("after the Event Router decodes nothing")));
    // Refusals name the key.
    assert_eq!(
        err_key(&[
            "transforms=decode,outbox",
            DECODE,
            "message.prefix.include.list=a",
            "message.prefix.exclude.list=b"
        ]),
        "message.prefix.exclude.list"
    );
    assert_eq!(
        err_key(&["transforms=decode,outbox", DECODE, "pgoutbox.messages.non.transactional=maybe"]),
        "pgoutbox.messages.non.transactional"
    );
    assert_eq!(err_key(&["transforms=decode,outbox", DECODE, "pgoutbox.relay=polling"]), "transforms");
    assert_eq!(
        err_key(&[
            "transforms=decode,outbox",
            DECODE,
            "transforms.decode.predicate=p",
            "predicates=p",
            "predicates.p.type=org.apache.kafka.connect.transforms.predicates.RecordIsTombstone"
        ]),
        "transforms.decode.predicate"
    );
}

const TOPIC_PREDICATE: &str =
    "predicates.isOutbox.type=org.apache.kafka.connect.transforms.predicates.TopicNameMatches";

/// Debezium's documentation keeps the Event Router to the outbox table with a predicate: accepted
/// where it applies the router to the captured table's (and the messages') change events, refused
/// at start, naming the topic and the fix, where Debezium would publish raw change events instead.
#[test]
fn config_router_predicate_must_apply_it_to_the_captured_events() {
    let router = ["transforms.outbox.predicate=isOutbox", "predicates=isOutbox", TOPIC_PREDICATE];
    let c = with(&[&router[..], &["predicates.isOutbox.pattern=dbserver1\\.public\\.outbox"]].concat()).unwrap();
    assert_eq!(c.router.chain.router_gate.as_ref().map(|g| g.name.as_str()), Some("isOutbox"));
    // The pattern of Debezium's documentation matches the routed topic, not the table's: refused.
    let e = with(&[&router[..], &["predicates.isOutbox.pattern=outbox.event.*"]].concat()).unwrap_err().to_string();
    assert!(e.contains("transforms.outbox.predicate") && e.contains("`dbserver1.public.outbox`"), "{e}");
    assert!(e.contains("make predicates.isOutbox.pattern match"), "{e}");
    // Negated, it must not match the table's topic.
    let negated =
        [&router[..], &["predicates.isOutbox.pattern=.*heartbeat.*", "transforms.outbox.negate=true"]].concat();
    assert!(with(&negated).is_ok());
    // A change event is never a tombstone: only the negated form applies the router.
    let tomb = [
        "transforms.outbox.predicate=t",
        "predicates=t",
        "predicates.t.type=org.apache.kafka.connect.transforms.predicates.RecordIsTombstone",
    ];
    assert_eq!(err_key(&tomb), "transforms.outbox.predicate");
    assert!(with(&[&tomb[..], &["transforms.outbox.negate=true"]].concat()).is_ok());
    // The include list matches any case: the table's lower-case name counts too.
    let upper =
        [&router[..], &["predicates.isOutbox.pattern=dbserver1\\.public\\.outbox", "table.include.list=public.OUTBOX"]];
    assert!(with(&upper.concat()).is_ok());
    // The table's topic is joined by topic.delimiter and named by topic.naming.strategy.
    let delimited = [&router[..], &["predicates.isOutbox.pattern=dbserver1_public_outbox", "topic.delimiter=_"]];
    assert!(with(&delimited.concat()).is_ok());
    let e = with(
        &[&router[..], &["predicates.isOutbox.pattern=dbserver1\\.public\\.outbox", "topic.delimiter=_"]].concat(),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("`dbserver1_public_outbox`"), "{e}");
    let unicode = [
        &router[..],
        &[
            "predicates.isOutbox.pattern=dbserver1_u005fpublic_u005foutbox",
            "topic.delimiter=_",
            "topic.naming.strategy=io.debezium.schema.SchemaUnicodeTopicNamingStrategy",
        ],
    ];
    assert!(with(&unicode.concat()).is_ok());
    assert_eq!(err_key(&["topic.delimiter=/"]), "topic.delimiter");
    assert_eq!(
        err_key(&["topic.naming.strategy=io.debezium.schema.SchemaRegexTopicNamingStrategy"]),
        "topic.naming.strategy"
    );
    // A pattern in the include list is checked at the first event instead.
    let c =
        with(&[&router[..], &["predicates.isOutbox.pattern=nothing", "table.include.list=public.outbox_.*"]].concat());
    assert!(c.is_ok());
    // With the message transform, the messages' topic must pass the router's and its own predicate.
    const DECODE: &str =
        "transforms.decode.type=io.debezium.connector.postgresql.transforms.DecodeLogicalDecodingMessageContent";
    let both = [&router[..], &["transforms=decode,outbox", DECODE]].concat();
    let e = with(&[&both[..], &["predicates.isOutbox.pattern=dbserver1\\.public\\.outbox"]].concat()).unwrap_err();
    assert!(e.to_string().contains("`dbserver1.message`"), "{e}");
    assert!(with(&[&both[..], &["predicates.isOutbox.pattern=dbserver1\\.(public\\.outbox|message)"]].concat()).is_ok());
    let decode_only = [
        "transforms=decode,outbox",
        DECODE,
        "transforms.decode.predicate=m",
        "predicates=m",
        "predicates.m.type=org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
    ];
    assert!(with(&[&decode_only[..], &["predicates.m.pattern=.*\\.message"]].concat()).is_ok());
    assert_eq!(
        err_key(&[&decode_only[..], &["predicates.m.pattern=.*\\.public\\..*"]].concat()),
        "transforms.decode.predicate"
    );
}

#[test]
fn config_messages_only_connector_captures_no_table() {
    let mut raw = base();
    raw.entries.remove("table.include.list");
    for e in [
        "publication.autocreate.mode=no_tables",
        "transforms=decode,outbox",
        "transforms.decode.type=io.debezium.connector.postgresql.transforms.DecodeLogicalDecodingMessageContent",
        "pgoutbox.messages.non.transactional=publish",
    ] {
        raw.set(e).unwrap();
    }
    let c = Config::from_raw(&raw).unwrap();
    assert!(c.tables.none && !c.tables.matches("public", "outbox"));
    assert_eq!(c.messages.unwrap().non_transactional, messages::NonTransactional::Publish);
}

/// `pgoutbox.polling.ack.timeout.ms`: a minute unless set; below a second (which would abandon
/// batches a broker only needs a moment for) it is refused, naming the key.
#[test]
fn polling_ack_timeout_defaults_to_a_minute_and_refuses_less_than_a_second() {
    let timeout = |extra: &[&str]| {
        let mut keys = vec!["pgoutbox.relay=polling"];
        keys.extend_from_slice(extra);
        with(&keys).unwrap().polling.unwrap().ack_timeout
    };
    assert_eq!(timeout(&[]), std::time::Duration::from_secs(60));
    assert_eq!(timeout(&["pgoutbox.polling.ack.timeout.ms=3000"]), std::time::Duration::from_secs(3));
    for bad in ["999", "0", "soon"] {
        let key = format!("pgoutbox.polling.ack.timeout.ms={bad}");
        assert_eq!(err_key(&["pgoutbox.relay=polling", &key]), "pgoutbox.polling.ack.timeout.ms");
    }
}

#[test]
fn errors_log_enable_is_read_for_what_the_metrics_count() {
    assert!(!with(&["errors.tolerance=all"]).unwrap().errors.log, "Connect's default is false");
    assert!(with(&["errors.tolerance=all", "errors.log.enable=true"]).unwrap().errors.log);
    assert!(!with(&["errors.log.enable=false"]).unwrap().errors.log);
    let c = with(&["errors.log.enable=true"]).unwrap();
    assert!(!c.ignored.iter().any(|k| k.key == "errors.log.enable"), "{:?}", c.ignored);
}

#[test]
fn a_skipped_delete_is_read() {
    let c = with(&["skipped.operations=d"]).unwrap();
    assert!(c.skipped.delete && !c.skipped.insert && !c.skipped.update);
    assert!(!with(&["skipped.operations=t"]).unwrap().skipped.delete);
}

/// JsonConverter's `decimal.format`, per converter, in any case, and refused naming the key when it
/// is neither form (Kafka's `JsonConverterConfig` validates it the same way).
#[test]
fn json_converter_decimal_format_is_read_per_converter() {
    use crate::connect::json::Decimals;
    let c = with(&[
        "value.converter=org.apache.kafka.connect.json.JsonConverter",
        "value.converter.decimal.format=numeric",
        "key.converter=org.apache.kafka.connect.json.JsonConverter",
    ])
    .unwrap();
    assert_eq!(c.value_converter, Converter::Json { schemas: true, decimals: Decimals::Numeric });
    assert_eq!(c.key_converter, Converter::json(true));
    let header = with(&[
        "header.converter=org.apache.kafka.connect.json.JsonConverter",
        "header.converter.decimal.format=NUMERIC",
    ])
    .unwrap();
    assert_eq!(header.router.header_converter, Some(Converter::Json { schemas: true, decimals: Decimals::Numeric }));
    let e = with(&["value.converter.decimal.format=TEXT"]).unwrap_err().to_string();
    assert!(e.contains("value.converter.decimal.format") && e.contains("NUMERIC"), "{e}");
}

/// A finite delivery timeout can reorder an aggregate's events (a record given up is published again
/// after later ones of its partition): said at start, at least once; not under exactly once, where the
/// record's transaction aborts.
#[test]
fn a_finite_delivery_timeout_is_warned_about_at_least_once() {
    let warned = |extra: &[&str]| {
        with(extra).unwrap().warnings.iter().any(|w| w.contains("out of its aggregate's commit order"))
    };
    assert!(warned(&["producer.override.delivery.timeout.ms=120000"]));
    assert!(warned(&["producer.message.timeout.ms=30000"]));
    assert!(!warned(&[]));
    assert!(!warned(&["producer.override.delivery.timeout.ms=2147483647"]));
    assert!(!warned(&["producer.override.delivery.timeout.ms=120000", "exactly.once.source.support=enabled"]));
}
