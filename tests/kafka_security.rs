//! Kafka security against Apache Kafka's own SASL and TLS: the one-node cluster scripts/test.sh
//! starts (`scripts/lib.sh` kafka_start: SASL_SSL with SCRAM and PLAIN users, a listener requiring
//! client certificates, one presenting a certificate for another host), with configs written the way
//! Connect users write them (JAAS, truststores and keystores).

mod support;

use std::path::PathBuf;
use std::time::Duration;

use pgoutbox::kafka::consume::consume_all_with;
use support::oauth::TokenEndpoint;
use support::{pgoutbox, write_config, Outbox, Relay};

/// The cluster's listeners and users (its `env` file) and its certificates (`tls/`).
struct Secure {
    dir: PathBuf,
    env: std::collections::HashMap<String, String>,
}

impl Secure {
    fn start() -> Secure {
        let dir = PathBuf::from(
            std::env::var("PGOUTBOX_TEST_KAFKA").expect("PGOUTBOX_TEST_KAFKA: run through scripts/test.sh"),
        );
        let env = std::fs::read_to_string(dir.join("env"))
            .expect("the Kafka cluster's env file")
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Secure { dir, env }
    }

    fn get(&self, k: &str) -> &str {
        &self.env[k]
    }

    fn file(&self, name: &str) -> String {
        self.dir.join("tls").join(name).to_string_lossy().into_owned()
    }

    fn scram(&self, user: &str, password: &str) -> String {
        format!(
            r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="{user}" password="{password}";"#
        )
    }
}

/// Connect-style keys for `kafka`: topic creation by the relay (the secured brokers have none of the
/// test's topics), the keys given, and the bootstrap servers.
fn secured(o: &Outbox, bootstrap: &str, keys: &[String]) -> String {
    let mut extra = vec![
        format!("bootstrap.servers={bootstrap}"),
        "topic.creation.default.partitions=1".to_string(),
        "topic.creation.default.replication.factor=1".to_string(),
    ];
    extra.extend(keys.iter().cloned());
    let refs: Vec<&str> = extra.iter().map(String::as_str).collect();
    o.config(&refs)
}

async fn insert(o: &Outbox, n: usize) -> Vec<String> {
    let sql = o.env.sql().await;
    for i in 0..n {
        sql.batch_execute(&o.insert_sql("Order", &format!("order-{i}"), Some("{\"n\":1}"))).await.unwrap();
    }
    o.rows().await.into_iter().map(|r| r.id).collect()
}

/// Reads the topic back with librdkafka settings of the test's own (not pgoutbox's translation).
fn read_back(bootstrap: &str, settings: &[(&str, &str)], topic: &str, expected: usize) -> Vec<String> {
    tokio::task::block_in_place(|| {
        // The relay creates the topic with its first event; the read assigns the partitions it sees.
        use rdkafka::consumer::{BaseConsumer, Consumer};
        let mut c = rdkafka::ClientConfig::new();
        c.set("bootstrap.servers", bootstrap);
        for (k, v) in settings {
            c.set(*k, *v);
        }
        let probe: BaseConsumer = c.create().expect("a consumer");
        support::wait_for(&format!("topic {topic} to exist"), Duration::from_secs(60), || {
            probe
                .fetch_metadata(Some(topic), Duration::from_secs(5))
                .is_ok_and(|m| m.topics().iter().any(|t| t.error().is_none() && !t.partitions().is_empty()))
        });
        consume_all_with(bootstrap, settings, &[topic], Some(expected), Duration::ZERO, Duration::from_secs(60))
            .expect("consume")
            .into_iter()
            .filter_map(|r| r.headers.iter().find(|(k, _)| k == "id").and_then(|(_, v)| v.clone()))
            .map(|v| String::from_utf8_lossy(&v).into_owned())
            .collect()
    })
}

/// [`read_back`] from the mutual-TLS broker, with the test's client certificate.
fn read_back_mtls(s: &Secure, topic: &str, expected: usize) -> Vec<String> {
    let (ca, cert, key) = (s.file("ca.pem"), s.file("client-cert.pem"), s.file("client-key.pem"));
    let settings = [
        ("security.protocol", "SSL"),
        ("ssl.ca.location", ca.as_str()),
        ("ssl.certificate.location", cert.as_str()),
        ("ssl.key.location", key.as_str()),
    ];
    read_back(s.get("MTLS"), &settings, topic, expected)
}

fn assert_stops_refused(relay: &mut Relay, needles: &[&str], secrets: &[&str]) {
    assert_stops_refused_within(relay, Duration::from_secs(90), needles, secrets)
}

fn assert_stops_refused_within(relay: &mut Relay, deadline: Duration, needles: &[&str], secrets: &[&str]) {
    let status =
        relay.wait(deadline).unwrap_or_else(|| panic!("relay kept running after {deadline:?}:\n{}", relay.log_text()));
    let log = relay.log_text();
    assert_eq!(status.code(), Some(7), "{log}");
    for n in needles {
        assert!(log.contains(n), "log names {n}:\n{log}");
    }
    for s in secrets {
        assert!(!log.contains(s), "a secret reached the log:\n{log}");
    }
    assert!(!log.contains("streaming"), "{log}");
}

/// A broker certificate that does not verify stops the relay at its first session's start: the
/// handshake's verdict is definite, so there is no confirmation to wait for and no session to
/// retry, however slow the machine (the deadline only bounds a start under load).
fn assert_certificate_refused(relay: &mut Relay, needles: &[&str], secrets: &[&str]) {
    assert_stops_refused_within(relay, Duration::from_secs(30), needles, secrets);
    let log = relay.log_text();
    assert!(!log.contains("confirming in"), "a definite refusal waited for a confirmation:\n{log}");
    assert!(!log.contains("reconnecting"), "a definite refusal was retried as a passing failure:\n{log}");
}

/// SASL_SSL with SCRAM-SHA-512 and a CA check, written as in a Connect worker: the worker-level keys
/// (admin client, offsets) at the top, the producer's under producer.override., the CA in a PKCS12
/// truststore as keytool writes it. Every event arrives, and `check` passes without showing a secret.
#[tokio::test(flavor = "multi_thread")]
async fn sasl_ssl_scram_sha_512_with_a_ca_check_delivers_every_event() {
    let s = Secure::start();
    let o = Outbox::new("sec_scram512").await;
    let password = s.get("ALICE_PASSWORD").to_string();
    let mut keys = Vec::new();
    for prefix in ["", "producer.override."] {
        keys.extend([
            format!("{prefix}security.protocol=SASL_SSL"),
            format!("{prefix}sasl.mechanism=SCRAM-SHA-512"),
            format!("{prefix}sasl.jaas.config={}", s.scram("alice", &password)),
            format!("{prefix}ssl.truststore.location={}", s.file("truststore.p12")),
            format!("{prefix}ssl.truststore.type=PKCS12"),
            format!("{prefix}ssl.truststore.password=trust-pass"),
        ]);
    }
    let config = secured(&o, s.get("SASL_SSL"), &keys);
    let mut relay = Relay::start_streaming(&config);
    let ids = insert(&o, 20).await;
    let ca = s.file("ca.pem");
    let got = read_back(
        s.get("SASL_SSL"),
        &[
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "SCRAM-SHA-512"),
            ("sasl.username", "alice"),
            ("sasl.password", &password),
            ("ssl.ca.location", &ca),
        ],
        &o.topic("Order"),
        ids.len(),
    );
    assert_eq!(got, ids, "every event, in commit order; relay log:\n{}", relay.log_text());
    assert_eq!(relay.stop().code(), Some(0));
    assert!(!relay.log_text().contains(&password), "{}", relay.log_text());

    let cfg = write_config(&config);
    let (code, text) = pgoutbox(&["check", "--config", &cfg.to_string_lossy()]);
    assert!(text.contains("reachable"), "{text}");
    assert!(!text.contains(&password) && !text.contains("trust-pass"), "{text}");
    let _ = code;
    o.drop_slot().await;
}

/// SCRAM-SHA-256 with a PEM truststore, all keys under producer.override. only (the admin client
/// takes the producer's), with the password, the mechanism and the truststore's path from Connect's
/// file, directory and environment config providers.
#[tokio::test(flavor = "multi_thread")]
async fn sasl_ssl_scram_sha_256_with_a_pem_truststore_delivers() {
    let s = Secure::start();
    let o = Outbox::new("sec_scram256").await;
    // Secrets as Connect users keep them: a properties file, a mounted directory, the environment.
    let secrets = s.dir.join("secrets");
    std::fs::create_dir_all(secrets.join("mounted")).unwrap();
    std::fs::write(secrets.join("kafka.properties"), format!("bob.password={}\n", s.get("BOB_PASSWORD"))).unwrap();
    std::fs::write(secrets.join("mounted").join("mechanism"), "SCRAM-SHA-256").unwrap();
    std::env::set_var("PGOUTBOX_TEST_KAFKA_TRUSTSTORE", s.file("ca.pem"));
    let keys = vec![
        "config.providers=file,env,dir".to_string(),
        "config.providers.file.class=org.apache.kafka.common.config.provider.FileConfigProvider".to_string(),
        format!("config.providers.file.param.allowed.paths={}", secrets.display()),
        "config.providers.env.class=org.apache.kafka.common.config.provider.EnvVarConfigProvider".to_string(),
        "config.providers.env.param.allowlist.pattern=PGOUTBOX_TEST_.*".to_string(),
        "config.providers.dir.class=org.apache.kafka.common.config.provider.DirectoryConfigProvider".to_string(),
        "producer.override.security.protocol=SASL_SSL".to_string(),
        format!("producer.override.sasl.mechanism=${{dir:{}/mounted:mechanism}}", secrets.display()),
        format!(
            "producer.override.sasl.jaas.config={}",
            s.scram("bob", &format!("${{file:{}/kafka.properties:bob.password}}", secrets.display()))
        ),
        "producer.override.ssl.truststore.location=${env:PGOUTBOX_TEST_KAFKA_TRUSTSTORE}".to_string(),
        "producer.override.ssl.truststore.type=PEM".to_string(),
    ];
    let mut relay = Relay::start_streaming(&secured(&o, s.get("SASL_SSL"), &keys));
    let ids = insert(&o, 5).await;
    let ca = s.file("ca.pem");
    let got = read_back(
        s.get("SASL_SSL"),
        &[
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "SCRAM-SHA-256"),
            ("sasl.username", "bob"),
            ("sasl.password", s.get("BOB_PASSWORD")),
            ("ssl.ca.location", &ca),
        ],
        &o.topic("Order"),
        ids.len(),
    );
    assert_eq!(got, ids);
    assert_eq!(relay.stop().code(), Some(0));
    assert!(!relay.log_text().contains(s.get("BOB_PASSWORD")), "{}", relay.log_text());
    o.drop_slot().await;
}

/// Mutual TLS: the broker requires a client certificate of its CA. With the PKCS12 keystore events
/// flow; without a keystore the relay stops (exit 7) saying a client certificate is likely needed.
#[tokio::test(flavor = "multi_thread")]
async fn mutual_tls_with_a_client_keystore_delivers_and_without_one_stops() {
    let s = Secure::start();
    let o = Outbox::new("sec_mtls").await;
    let trust = [
        "security.protocol=SSL".to_string(),
        format!("ssl.truststore.location={}", s.file("ca.pem")),
        "ssl.truststore.type=PEM".to_string(),
    ];
    let mut without = Relay::start(&secured(&o, s.get("MTLS"), &trust));
    assert_stops_refused(&mut without, &["ssl.keystore.location"], &[]);

    let mut keys = Vec::new();
    for prefix in ["", "producer.override."] {
        keys.extend(trust.iter().map(|k| format!("{prefix}{k}")));
        keys.extend([
            format!("{prefix}ssl.keystore.location={}", s.file("client.p12")),
            format!("{prefix}ssl.keystore.type=PKCS12"),
            format!("{prefix}ssl.keystore.password=client-pass"),
            format!("{prefix}ssl.key.password=client-pass"),
        ]);
    }
    let mut relay = Relay::start_streaming(&secured(&o, s.get("MTLS"), &keys));
    let ids = insert(&o, 5).await;
    let got = read_back_mtls(&s, &o.topic("Order"), ids.len());
    assert_eq!(got, ids);
    assert_eq!(relay.stop().code(), Some(0));
    assert!(!relay.log_text().contains("client-pass"));
    o.drop_slot().await;
}

/// A PEM keystore file (key and chain in one file) and the PEM-in-config keys work as well.
#[tokio::test(flavor = "multi_thread")]
async fn mutual_tls_with_pem_keystores_delivers() {
    let s = Secure::start();
    let o = Outbox::new("sec_mtls_pem").await;
    let read = |f: &str| std::fs::read_to_string(s.file(f)).unwrap().replace('\n', "\\n\\\n");
    let keys = vec![
        "security.protocol=SSL".to_string(),
        format!("ssl.truststore.certificates={}", read("ca.pem")),
        format!("ssl.keystore.certificate.chain={}", read("client-cert.pem")),
        format!("ssl.keystore.key={}", read("client-key.pem")),
        "producer.override.security.protocol=SSL".to_string(),
        format!("producer.override.ssl.truststore.location={}", s.file("ca.pem")),
        "producer.override.ssl.truststore.type=PEM".to_string(),
        format!("producer.override.ssl.keystore.location={}", s.file("client.pem")),
        "producer.override.ssl.keystore.type=PEM".to_string(),
    ];
    let mut relay = Relay::start_streaming(&secured(&o, s.get("MTLS"), &keys));
    let ids = insert(&o, 3).await;
    let got = read_back_mtls(&s, &o.topic("Order"), ids.len());
    assert_eq!(got, ids);
    assert_eq!(relay.stop().code(), Some(0));
    o.drop_slot().await;
}

/// A wrong password: one clear error naming sasl.jaas.config, exit 7, no retry loop, no password
/// in the log; the same from `check`.
#[tokio::test(flavor = "multi_thread")]
async fn wrong_sasl_password_stops_with_exit_7_naming_the_key() {
    let s = Secure::start();
    let o = Outbox::new("sec_wrongpw").await;
    let wrong = "Not-Alices-Password-93";
    let keys = vec![
        "security.protocol=SASL_SSL".to_string(),
        "sasl.mechanism=SCRAM-SHA-512".to_string(),
        format!("sasl.jaas.config={}", s.scram("alice", wrong)),
        format!("ssl.truststore.location={}", s.file("ca.pem")),
    ];
    let config = secured(&o, s.get("SASL_SSL"), &keys);
    let mut relay = Relay::start(&config);
    assert_stops_refused(&mut relay, &["sasl.jaas.config"], &[wrong]);
    // Warned while it is being confirmed (a broker being rolled refuses one handshake), then reported
    // as the reason to stop, once.
    let log = relay.log_text();
    let reports = log.lines().filter(|l| l.contains("ERROR") && l.contains("refused the SASL login")).count();
    assert_eq!(reports, 1, "reported once:\n{log}");
    assert!(log.contains("confirming in 5 s"), "{log}");
    let cfg = write_config(&config);
    let (code, text) = pgoutbox(&["check", "--config", &cfg.to_string_lossy()]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("sasl.jaas.config") && !text.contains(wrong), "{text}");
}

/// A broker certificate from a CA the client does not trust: exit 7 naming the truststore, at the
/// first session's start.
#[tokio::test(flavor = "multi_thread")]
async fn untrusted_broker_certificate_stops_naming_the_truststore() {
    let s = Secure::start();
    let o = Outbox::new("sec_untrusted").await;
    let keys = vec![
        "security.protocol=SASL_SSL".to_string(),
        "sasl.mechanism=SCRAM-SHA-512".to_string(),
        format!("sasl.jaas.config={}", s.scram("alice", s.get("ALICE_PASSWORD"))),
        format!("ssl.truststore.location={}", s.file("other-ca.pem")),
        "ssl.truststore.type=PEM".to_string(),
    ];
    let mut relay = Relay::start(&secured(&o, s.get("SASL_SSL"), &keys));
    assert_certificate_refused(&mut relay, &["is not trusted", "ssl.truststore.location"], &[s.get("ALICE_PASSWORD")]);
}

/// A certificate for another host name: with Java's default (https) the relay stops at the first
/// session's start saying so and naming ssl.endpoint.identification.algorithm; with the check turned
/// off (empty) events flow.
#[tokio::test(flavor = "multi_thread")]
async fn host_name_mismatch_stops_and_delivers_with_checks_off() {
    let s = Secure::start();
    let o = Outbox::new("sec_hostname").await;
    let keys = vec!["security.protocol=SSL".to_string(), format!("ssl.truststore.location={}", s.file("ca.pem"))];
    let mut checked = Relay::start(&secured(&o, s.get("WRONGHOST"), &keys));
    assert_certificate_refused(
        &mut checked,
        &["does not name the host", "ssl.endpoint.identification.algorithm= (empty)"],
        &[],
    );

    let mut keys = keys.clone();
    keys.push("ssl.endpoint.identification.algorithm=".to_string());
    let mut relay = Relay::start_streaming(&secured(&o, s.get("WRONGHOST"), &keys));
    let ids = insert(&o, 3).await;
    let ca = s.file("ca.pem");
    let got = read_back(
        s.get("WRONGHOST"),
        &[("security.protocol", "SSL"), ("ssl.ca.location", &ca), ("ssl.endpoint.identification.algorithm", "none")],
        &o.topic("Order"),
        ids.len(),
    );
    assert_eq!(got, ids);
    assert_eq!(relay.stop().code(), Some(0));
    o.drop_slot().await;
}

/// A JKS truststore (as keytool writes one) is refused at start with the command that converts it.
#[tokio::test(flavor = "multi_thread")]
async fn jks_truststore_is_refused_with_the_keytool_command() {
    let s = Secure::start();
    let jks = s.file("truststore.jks");
    if !std::path::Path::new(&jks).exists() {
        eprintln!("keytool is not installed: the JKS case is covered by the unit tests only");
        return;
    }
    let o = Outbox::new("sec_jks").await;
    let keys = vec![
        "security.protocol=SSL".to_string(),
        format!("ssl.truststore.location={jks}"),
        "ssl.truststore.password=trust-pass".to_string(),
    ];
    let cfg = write_config(&secured(&o, s.get("MTLS"), &keys));
    let (code, text) = pgoutbox(&["run", "--config", &cfg.to_string_lossy()]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("keytool -importkeystore") && text.contains("ssl.truststore.location"), "{text}");
    assert!(!text.contains("trust-pass"), "{text}");
}

/// SASL PLAIN (carol) and OAUTHBEARER with Kafka's unsecured tokens, each over SASL_SSL, and each
/// relay kept running past the broker's `connections.max.reauth.ms`: Kafka closes a connection whose
/// session expired unless the client authenticates again on it, so events written after the expiry
/// arriving without the session restarting show re-authentication works.
#[tokio::test(flavor = "multi_thread")]
async fn sasl_plain_and_oauthbearer_deliver_across_reauthentication() {
    let s = Secure::start();
    let reauth = Duration::from_millis(s.get("REAUTH_MS").parse().unwrap());
    let carol = s.get("CAROL_PASSWORD").to_string();
    let plain = format!(
        r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="carol" password="{carol}";"#
    );
    let oauth = r#"org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="alice";"#;
    let ca = s.file("ca.pem");
    let mut runs = Vec::new();
    for (name, mechanism, jaas) in [("sec_plain", "PLAIN", plain.as_str()), ("sec_oauth", "OAUTHBEARER", oauth)] {
        let o = Outbox::new(name).await;
        let keys = vec![
            "security.protocol=SASL_SSL".to_string(),
            format!("sasl.mechanism={mechanism}"),
            format!("sasl.jaas.config={jaas}"),
            format!("ssl.truststore.location={ca}"),
            "ssl.truststore.type=PEM".to_string(),
        ];
        let relay = Relay::start_streaming(&secured(&o, s.get("SASL_SSL"), &keys));
        insert(&o, 3).await;
        runs.push((o, relay));
    }
    let reader = [
        ("security.protocol", "SASL_SSL"),
        ("sasl.mechanism", "PLAIN"),
        ("sasl.username", "carol"),
        ("sasl.password", carol.as_str()),
        ("ssl.ca.location", ca.as_str()),
    ];
    for (o, relay) in &runs {
        let got = read_back(s.get("SASL_SSL"), &reader, &o.topic("Order"), 3);
        assert_eq!(got.len(), 3, "relay log:\n{}", relay.log_text());
    }
    // Past the session's lifetime, with the producers' connections idle and then busy again.
    tokio::time::sleep(reauth + Duration::from_secs(5)).await;
    for (o, relay) in &mut runs {
        // Every row of the outbox: the 3 from before the expiry and 6 more.
        let ids = insert(o, 6).await;
        let got = read_back(s.get("SASL_SSL"), &reader, &o.topic("Order"), ids.len());
        assert_eq!(
            got,
            ids,
            "every event, in commit order, after the session expired; relay log:\n{}",
            relay.log_text()
        );
        let log = relay.log_text();
        assert!(!log.contains("reconnecting"), "the session restarted:\n{log}");
        assert!(!log.contains(&carol), "a secret reached the log:\n{log}");
        assert_eq!(relay.stop().code(), Some(0));
        o.drop_slot().await;
    }
}

/// OAUTHBEARER with a token endpoint (OIDC, the client-credentials grant), configured as Connect's
/// Java client is (KIP-768: the login callback handler, the endpoint URL, clientId, clientSecret and
/// scope in the JAAS config): the relay fetches its token from the endpoint with those credentials,
/// delivers, and fetches a new one before the first expires (tokens live 6 s here; the broker ends
/// a session when its token expires, so the relay also authenticates again). The secret reaches no log line. With a wrong
/// secret the endpoint refuses, and the relay stops (exit 7) naming the token endpoint's keys.
#[tokio::test(flavor = "multi_thread")]
async fn oauthbearer_fetches_tokens_from_an_oidc_endpoint_with_client_credentials() {
    const SECRET: &str = "oidc-Sekr3t-c1ient";
    let s = Secure::start();
    const LIFETIME: Duration = Duration::from_secs(6);
    let endpoint = TokenEndpoint::start("alice", SECRET, "kafka", LIFETIME).await;
    let ca = s.file("ca.pem");
    let keys = |secret: &str| {
        vec![
            "security.protocol=SASL_SSL".to_string(),
            "sasl.mechanism=OAUTHBEARER".to_string(),
            "sasl.login.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler".to_string(),
            format!("sasl.oauthbearer.token.endpoint.url={}", endpoint.url),
            format!(r#"sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="alice" clientSecret="{secret}" scope="kafka";"#),
            format!("ssl.truststore.location={ca}"),
            "ssl.truststore.type=PEM".to_string(),
        ]
    };
    let o = Outbox::new("sec_oidc").await;
    let mut relay = Relay::start_streaming(&secured(&o, s.get("SASL_SSL"), &keys(SECRET)));
    let carol = s.get("CAROL_PASSWORD").to_string();
    let reader = [
        ("security.protocol", "SASL_SSL"),
        ("sasl.mechanism", "PLAIN"),
        ("sasl.username", "carol"),
        ("sasl.password", carol.as_str()),
        ("ssl.ca.location", ca.as_str()),
    ];
    insert(&o, 3).await;
    assert_eq!(
        read_back(s.get("SASL_SSL"), &reader, &o.topic("Order"), 3).len(),
        3,
        "relay log:\n{}",
        relay.log_text()
    );
    assert!(endpoint.issued() >= 1, "no token was fetched; refused: {:?}", endpoint.refused.lock().unwrap());
    // Past the first token's lifetime, which also ends the broker's session (it lasts at most as
    // long as its token): the connection must authenticate again, with a new token.
    tokio::time::sleep(LIFETIME + Duration::from_secs(2)).await;
    let ids = insert(&o, 3).await;
    let got = read_back(s.get("SASL_SSL"), &reader, &o.topic("Order"), ids.len());
    assert_eq!(
        got,
        ids,
        "every event, in commit order, after the first token expired; relay log:\n{}",
        relay.log_text()
    );
    assert!(endpoint.issued() >= 2, "the token was not renewed: {} issued", endpoint.issued());
    assert!(endpoint.refused.lock().unwrap().is_empty(), "refused: {:?}", endpoint.refused.lock().unwrap());
    let grants = endpoint.grants.lock().unwrap().clone();
    assert!(grants.iter().all(|(_, scope)| scope.as_deref() == Some("kafka")), "the scope asked for: {grants:?}");
    let log = relay.log_text();
    assert!(!log.contains("reconnecting"), "the session restarted:\n{log}");
    assert!(!log.contains(SECRET), "the client secret reached the log:\n{log}");
    assert_eq!(relay.stop().code(), Some(0));
    o.drop_slot().await;

    // A wrong secret: the endpoint refuses it; nothing is delivered, and the relay stops naming the
    // token endpoint's keys (after confirming the refusal once, as for any refused login).
    let o = Outbox::new("sec_oidc_wrong").await;
    let mut relay = Relay::start(&secured(&o, s.get("SASL_SSL"), &keys("not-the-secret")));
    insert(&o, 1).await;
    let status = relay.wait(Duration::from_secs(60));
    let log = relay.log_text();
    assert_eq!(status.and_then(|s| s.code()), Some(7), "the relay did not stop on the refusal:\n{log}");
    assert!(
        log.contains("the OAuth token endpoint refused this client")
            && log.contains("sasl.oauthbearer.token.endpoint.url"),
        "the log does not name the token endpoint's refusal:\n{log}"
    );
    assert!(!endpoint.refused.lock().unwrap().is_empty(), "the endpoint saw no token request");
    assert!(!log.contains("not-the-secret"), "the client secret reached the log:\n{log}");
    o.drop_slot().await;
}

/// Adds (or removes) `operations` on `topic` for User:dave with Kafka's own ACL tool, over the
/// cluster's PLAINTEXT listener (a super user).
fn acl(s: &Secure, add: bool, topic: &str, operations: &[&str]) {
    let scripts = std::env::var("PGOUTBOX_TEST_SCRIPTS").expect("PGOUTBOX_TEST_SCRIPTS: run through scripts/test.sh");
    let mut args = vec![
        format!("{scripts}/services.sh"),
        "kafka-tool".into(),
        s.dir.to_string_lossy().into_owned(),
        "org.apache.kafka.tools.AclCommand".into(),
        "--bootstrap-server".into(),
        s.get("PLAINTEXT").to_string(),
        if add { "--add".into() } else { "--remove".into() },
        "--force".into(),
        "--allow-principal".into(),
        "User:dave".into(),
        "--topic".into(),
        topic.to_string(),
    ];
    for op in operations {
        args.extend(["--operation".to_string(), op.to_string()]);
    }
    let out = tokio::task::block_in_place(|| {
        std::process::Command::new("bash").args(&args).output().expect("run AclCommand")
    });
    assert!(
        out.status.success(),
        "AclCommand failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Kafka's authorizer on: a principal (dave) with exactly the grants docs/operations.md lists
/// delivers; with one of them removed the relay stops naming that grant and the topic: WRITE on the
/// event topic, CREATE for a topic that is missing, the offsets topic. IDEMPOTENT_WRITE is never
/// granted: since Kafka 3.0 WRITE on the topic allows the idempotent producer.
#[tokio::test(flavor = "multi_thread")]
async fn acl_grants_as_documented_work_and_each_missing_one_is_named() {
    let s = Secure::start();
    let o = Outbox::new("sec_acl").await;
    let password = s.get("DAVE_PASSWORD").to_string();
    let offsets = format!("acl-offsets-{}", o.slot);
    let topic = o.topic("Order");
    let keys = vec![
        "security.protocol=SASL_SSL".to_string(),
        "sasl.mechanism=SCRAM-SHA-512".to_string(),
        format!("sasl.jaas.config={}", s.scram("dave", &password)),
        format!("ssl.truststore.location={}", s.file("ca.pem")),
        format!("offset.storage.topic={offsets}"),
    ];
    let config = secured(&o, s.get("SASL_SSL"), &keys);
    acl(&s, true, &topic, &["WRITE", "DESCRIBE", "CREATE"]);
    acl(&s, true, &offsets, &["Read", "Write", "Describe", "Create", "DescribeConfigs"]);
    let alice = [
        ("security.protocol", "SASL_SSL"),
        ("sasl.mechanism", "SCRAM-SHA-512"),
        ("sasl.username", "alice"),
        ("sasl.password", s.get("ALICE_PASSWORD")),
        ("ssl.ca.location", &s.file("ca.pem")),
    ];

    // Every documented grant: delivered.
    let mut relay = Relay::start_streaming(&config);
    let ids = insert(&o, 3).await;
    let got = read_back(s.get("SASL_SSL"), &alice, &topic, ids.len());
    assert_eq!(got, ids, "relay log:\n{}", relay.log_text());
    assert_eq!(relay.stop().code(), Some(0));

    // WRITE on the event topic removed: exit 6, naming WRITE and the topic.
    acl(&s, false, &topic, &["WRITE"]);
    let mut relay = Relay::start_streaming(&config);
    insert(&o, 1).await;
    let status = relay.wait(Duration::from_secs(90)).unwrap_or_else(|| panic!("kept running:\n{}", relay.log_text()));
    let log = relay.log_text();
    assert_eq!(status.code(), Some(6), "{log}");
    assert!(log.contains("grant this client WRITE") && log.contains(&topic), "{log}");
    acl(&s, true, &topic, &["WRITE"]);

    // CREATE removed: an existing topic is still written (as Connect), a missing one is named.
    acl(&s, false, &topic, &["CREATE"]);
    let other = o.topic("Customer");
    acl(&s, true, &other, &["WRITE", "DESCRIBE"]);
    let mut relay = Relay::start_streaming(&config);
    let sql = o.env.sql().await;
    sql.batch_execute(&o.insert_sql("Customer", "c-1", Some("{}"))).await.unwrap();
    let status = relay.wait(Duration::from_secs(90)).unwrap_or_else(|| panic!("kept running:\n{}", relay.log_text()));
    let log = relay.log_text();
    assert_eq!(status.code(), Some(6), "{log}");
    assert!(log.contains("grant this client CREATE") && log.contains(&other), "{log}");
    // Everything before the refused event was delivered, the events of the first phase included.
    let got = read_back(s.get("SASL_SSL"), &alice, &topic, 4);
    assert_eq!(got.len(), 4, "{log}");

    // WRITE on the offsets topic removed: exit 7 at the session's start (the slot's record is written
    // before streaming), naming the topic and the grants.
    acl(&s, false, &offsets, &["WRITE"]);
    let mut relay = Relay::start(&config);
    let status = relay.wait(Duration::from_secs(90)).unwrap_or_else(|| panic!("kept running:\n{}", relay.log_text()));
    let log = relay.log_text();
    assert_eq!(status.code(), Some(7), "{log}");
    assert!(log.contains("grant this client READ, WRITE and CREATE") && log.contains(&offsets), "{log}");
    assert!(!log.contains(&password), "a secret reached the log:\n{log}");
    o.drop_slot().await;
}
