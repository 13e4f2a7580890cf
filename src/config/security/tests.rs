use super::*;

fn keys(pairs: &[(&str, &str)]) -> Keys {
    pairs.iter().map(|(k, v)| (k.to_string(), (format!("producer.override.{k}"), v.to_string()))).collect()
}

fn setting<'a>(t: &'a Translated, key: &str) -> Option<&'a str> {
    t.settings.get(key)
}

const SCRAM: &str =
    r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="alice-secret";"#;

#[test]
fn sasl_ssl_scram_maps_jaas_into_username_and_password() {
    let t = translate(&keys(&[
        ("security.protocol", "sasl_ssl"),
        ("sasl.mechanism", "SCRAM-SHA-512"),
        ("sasl.jaas.config", SCRAM),
    ]))
    .unwrap();
    assert_eq!(setting(&t, "security.protocol"), Some("SASL_SSL"));
    assert_eq!(setting(&t, "sasl.mechanism"), Some("SCRAM-SHA-512"));
    assert_eq!(setting(&t, "sasl.username"), Some("alice"));
    assert_eq!(setting(&t, "sasl.password"), Some("alice-secret"));
    assert_eq!(setting(&t, "ssl.endpoint.identification.algorithm"), Some("https"), "Java's default");
    assert!(setting(&t, "sasl.jaas.config").is_none());
    let shown = format!("{:?}", t.settings);
    assert!(!shown.contains("alice-secret") && shown.contains("alice"), "{shown}");
}

#[test]
fn plain_module_implies_the_plain_mechanism_and_scram_needs_one() {
    let plain = r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";"#;
    let t = translate(&keys(&[("security.protocol", "SASL_PLAINTEXT"), ("sasl.jaas.config", plain)])).unwrap();
    assert_eq!(setting(&t, "sasl.mechanism"), Some("PLAIN"));
    let e = translate(&keys(&[("security.protocol", "SASL_PLAINTEXT"), ("sasl.jaas.config", SCRAM)])).unwrap_err();
    assert!(e.to_string().contains("producer.override.sasl.mechanism"), "{e}");
    let e = translate(&keys(&[
        ("security.protocol", "SASL_PLAINTEXT"),
        ("sasl.mechanism", "PLAIN"),
        ("sasl.jaas.config", SCRAM),
    ]))
    .unwrap_err();
    assert!(e.to_string().contains("PlainLoginModule") && !e.to_string().contains("alice-secret"), "{e}");
}

#[test]
fn unsupported_mechanisms_are_refused_with_what_to_use() {
    for (m, needle) in [("GSSAPI", "Kerberos"), ("AWS_MSK_IAM", "SCRAM-SHA-512"), ("NTLM", "not one of")] {
        let e = translate(&keys(&[("security.protocol", "SASL_SSL"), ("sasl.mechanism", m)])).unwrap_err();
        assert!(e.to_string().contains(needle) && e.to_string().contains("sasl.mechanism"), "{m}: {e}");
    }
    let e = translate(&keys(&[("security.protocol", "SASL_SSL")])).unwrap_err();
    assert!(e.to_string().contains("GSSAPI"), "{e}");
    let e = translate(&keys(&[("security.protocol", "TLS")])).unwrap_err();
    assert!(e.to_string().contains("security.protocol"), "{e}");
}

#[test]
fn a_bad_jaas_config_names_the_key_and_hides_the_text() {
    let e = translate(&keys(&[
        ("security.protocol", "SASL_SSL"),
        ("sasl.mechanism", "SCRAM-SHA-256"),
        (
            "sasl.jaas.config",
            r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="a" password="zzsecret""#,
        ),
    ]))
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("producer.override.sasl.jaas.config") && e.contains("semicolon") && !e.contains("zzsecret"),
        "{e}"
    );
    let e = translate(&keys(&[
        ("security.protocol", "SASL_SSL"),
        ("sasl.mechanism", "SCRAM-SHA-256"),
        ("sasl.jaas.config", r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="a";"#),
    ]))
    .unwrap_err()
    .to_string();
    assert!(e.contains("password"), "{e}");
}

#[test]
fn oauthbearer_client_credentials_map_to_librdkafka_oidc() {
    let t = translate(&keys(&[
        ("security.protocol", "SASL_SSL"),
        ("sasl.mechanism", "OAUTHBEARER"),
        ("sasl.oauthbearer.token.endpoint.url", "https://idp.example/token"),
        ("sasl.login.callback.handler.class", OAUTH_HANDLERS[0]),
        (
            "sasl.jaas.config",
            r#"org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="relay" clientSecret="s3" scope="kafka" extension_logicalCluster="lkc-1";"#,
        ),
    ]))
    .unwrap();
    assert_eq!(setting(&t, "sasl.oauthbearer.method"), Some("oidc"));
    assert_eq!(setting(&t, "sasl.oauthbearer.client.id"), Some("relay"));
    assert_eq!(setting(&t, "sasl.oauthbearer.client.secret"), Some("s3"));
    assert_eq!(setting(&t, "sasl.oauthbearer.scope"), Some("kafka"));
    assert_eq!(setting(&t, "sasl.oauthbearer.token.endpoint.url"), Some("https://idp.example/token"));
    assert_eq!(setting(&t, "sasl.oauthbearer.extensions"), Some("logicalCluster=lkc-1"));
    let t = translate(&keys(&[
        ("security.protocol", "SASL_PLAINTEXT"),
        ("sasl.mechanism", "OAUTHBEARER"),
        ("sasl.jaas.config", r#"org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="dev";"#),
    ]))
    .unwrap();
    assert_eq!(setting(&t, "enable.sasl.oauthbearer.unsecure.jwt"), Some("true"));
    assert_eq!(setting(&t, "sasl.oauthbearer.config"), Some("principal=dev"));
}

#[test]
fn keys_the_protocol_does_not_use_are_ignored_as_in_java() {
    let t = translate(&keys(&[
        ("sasl.jaas.config", SCRAM),
        ("ssl.truststore.location", "/nonexistent/truststore.p12"),
        ("ssl.cipher.suites", "TLS_AES_256_GCM_SHA384"),
    ]))
    .unwrap();
    assert_eq!(setting(&t, "security.protocol"), Some("PLAINTEXT"));
    assert_eq!(t.settings.0.len(), 1, "{:?}", t.settings);
    let ignored: Vec<&str> = t.ignored.iter().map(|i| i.key.as_str()).collect();
    assert_eq!(ignored.len(), 3, "{ignored:?}");
    let t = translate(&keys(&[("security.protocol", "SSL"), ("ssl.cipher.suites", "TLS_AES_256_GCM_SHA384")])).unwrap();
    assert!(setting(&t, "ssl.cipher.suites").is_none(), "Java cipher names would fail in OpenSSL");
    assert!(t.ignored[0].reason.contains("cipher"));
}

#[test]
fn endpoint_identification_empty_turns_host_checks_off() {
    let t = translate(&keys(&[("security.protocol", "SSL"), ("ssl.endpoint.identification.algorithm", "")])).unwrap();
    assert_eq!(setting(&t, "ssl.endpoint.identification.algorithm"), Some("none"));
    let t =
        translate(&keys(&[("security.protocol", "SSL"), ("ssl.endpoint.identification.algorithm", "HTTPS")])).unwrap();
    assert_eq!(setting(&t, "ssl.endpoint.identification.algorithm"), Some("https"));
    assert!(
        translate(&keys(&[("security.protocol", "SSL"), ("ssl.endpoint.identification.algorithm", "ldaps")])).is_err()
    );
}

/// A self-signed CA certificate and its key, made here so the tests need no files.
fn certificate(cn: &str) -> (openssl::x509::X509, openssl::pkey::PKey<openssl::pkey::Private>) {
    use openssl::{asn1::Asn1Time, bn::BigNum, hash::MessageDigest, pkey::PKey, rsa::Rsa, x509};
    let key = PKey::from_rsa(Rsa::generate(2048).unwrap()).unwrap();
    let mut name = x509::X509NameBuilder::new().unwrap();
    name.append_entry_by_text("CN", cn).unwrap();
    let name = name.build();
    let mut b = x509::X509Builder::new().unwrap();
    b.set_version(2).unwrap();
    b.set_serial_number(&BigNum::from_u32(7).unwrap().to_asn1_integer().unwrap()).unwrap();
    b.set_subject_name(&name).unwrap();
    b.set_issuer_name(&name).unwrap();
    b.set_pubkey(&key).unwrap();
    b.set_not_before(&Asn1Time::days_from_now(0).unwrap()).unwrap();
    b.set_not_after(&Asn1Time::days_from_now(30).unwrap()).unwrap();
    b.sign(&key, MessageDigest::sha256()).unwrap();
    (b.build(), key)
}

fn temp_file(name: &str, bytes: &[u8]) -> String {
    let dir = std::env::temp_dir().join(format!("pgoutbox-sec-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p.to_string_lossy().into_owned()
}

#[test]
fn pkcs12_truststore_becomes_pem_and_a_wrong_password_names_the_key() {
    let (ca, _) = certificate("pgoutbox test CA");
    let mut stack = openssl::stack::Stack::new().unwrap();
    stack.push(ca.clone()).unwrap();
    let p12 = openssl::pkcs12::Pkcs12::builder().ca(stack).build2("trust-pass").unwrap().to_der().unwrap();
    let path = temp_file("truststore.p12", &p12);
    for declared in [Some("PKCS12"), None, Some("JKS")] {
        let mut k = vec![
            ("security.protocol", "SSL"),
            ("ssl.truststore.location", path.as_str()),
            ("ssl.truststore.password", "trust-pass"),
        ];
        if let Some(d) = declared {
            k.push(("ssl.truststore.type", d));
        }
        let t = translate(&keys(&k)).unwrap();
        let pem = setting(&t, "ssl.ca.pem").expect("the CA as PEM");
        assert_eq!(openssl::x509::X509::from_pem(pem.as_bytes()).unwrap().to_der().unwrap(), ca.to_der().unwrap());
    }
    let e = translate(&keys(&[
        ("security.protocol", "SSL"),
        ("ssl.truststore.location", &path),
        ("ssl.truststore.password", "wrong-pass"),
    ]))
    .unwrap_err()
    .to_string();
    assert!(e.contains("producer.override.ssl.truststore.location") && e.contains("ssl.truststore.password"), "{e}");
    assert!(!e.contains("wrong-pass"), "{e}");
}

#[test]
fn pem_and_pkcs12_keystores_map_to_librdkafka_keys() {
    let (cert, key) = certificate("pgoutbox client");
    let p12 = openssl::pkcs12::Pkcs12::builder().pkey(&key).cert(&cert).build2("ks-pass").unwrap().to_der().unwrap();
    let path = temp_file("client.p12", &p12);
    let t = translate(&keys(&[
        ("security.protocol", "SSL"),
        ("ssl.keystore.location", &path),
        ("ssl.keystore.type", "PKCS12"),
        ("ssl.keystore.password", "ks-pass"),
    ]))
    .unwrap();
    assert_eq!(setting(&t, "ssl.keystore.location"), Some(path.as_str()));
    assert_eq!(setting(&t, "ssl.keystore.password"), Some("ks-pass"));
    let e = translate(&keys(&[
        ("security.protocol", "SSL"),
        ("ssl.keystore.location", &path),
        ("ssl.keystore.password", "nope"),
    ]))
    .unwrap_err();
    assert!(e.to_string().contains("ssl.keystore.password"), "{e}");

    let mut pem = key.private_key_to_pem_pkcs8().unwrap();
    pem.extend(cert.to_pem().unwrap());
    let path = temp_file("client.pem", &pem);
    let t = translate(&keys(&[
        ("security.protocol", "SSL"),
        ("ssl.keystore.location", &path),
        ("ssl.keystore.type", "PEM"),
    ]))
    .unwrap();
    assert_eq!(setting(&t, "ssl.certificate.location"), Some(path.as_str()));
    assert_eq!(setting(&t, "ssl.key.location"), Some(path.as_str()));

    let chain = String::from_utf8(cert.to_pem().unwrap()).unwrap();
    let private = String::from_utf8(key.private_key_to_pem_pkcs8().unwrap()).unwrap();
    let t = translate(&keys(&[
        ("security.protocol", "SSL"),
        ("ssl.keystore.certificate.chain", &chain),
        ("ssl.keystore.key", &private),
        ("ssl.truststore.certificates", &chain),
    ]))
    .unwrap();
    assert_eq!(setting(&t, "ssl.certificate.pem"), Some(chain.trim()));
    assert_eq!(setting(&t, "ssl.ca.pem"), Some(chain.trim()));
    assert!(setting(&t, "ssl.key.pem").is_some());
    assert!(!format!("{:?}", t.settings).contains("PRIVATE KEY"), "the key is redacted in Debug output");
}

#[test]
fn jks_stores_are_refused_with_the_keytool_command() {
    let path = temp_file("truststore.jks", &[0xFE, 0xED, 0xFE, 0xED, 0, 0, 0, 2]);
    let e = translate(&keys(&[
        ("security.protocol", "SSL"),
        ("ssl.truststore.location", &path),
        ("ssl.truststore.type", "JKS"),
    ]))
    .unwrap_err()
    .to_string();
    assert!(e.contains("keytool -importkeystore") && e.contains("-deststoretype PKCS12"), "{e}");
    assert!(!e.contains(&path), "the key is named, its value (the path) is not repeated: {e}");
    let e =
        translate(&keys(&[("security.protocol", "SSL"), ("ssl.keystore.location", &path)])).unwrap_err().to_string();
    assert!(e.contains("keytool") && e.contains("ssl.keystore.type=PKCS12"), "{e}");
}

#[test]
fn librdkafka_names_pass_through() {
    let t = translate(&keys(&[
        ("security.protocol", "SASL_SSL"),
        ("sasl.mechanism", "PLAIN"),
        ("sasl.username", "u"),
        ("sasl.password", "p"),
        ("ssl.ca.location", "/etc/ssl/certs/ca.pem"),
    ]))
    .unwrap();
    assert_eq!(setting(&t, "sasl.username"), Some("u"));
    assert_eq!(setting(&t, "ssl.ca.location"), Some("/etc/ssl/certs/ca.pem"));
}

#[test]
fn without_a_truststore_the_system_cas_are_trusted_as_the_jvm_s_would_be() {
    let t = translate(&keys(&[
        ("security.protocol", "SASL_SSL"),
        ("sasl.mechanism", "SCRAM-SHA-512"),
        ("sasl.jaas.config", SCRAM),
    ]))
    .unwrap();
    assert_eq!(setting(&t, "ssl.ca.location"), Some("probe"));
    let t = translate(&keys(&[("security.protocol", "SSL"), ("ssl.ca.location", "/etc/ca.pem")])).unwrap();
    assert_eq!(setting(&t, "ssl.ca.location"), Some("/etc/ca.pem"), "librdkafka's own key wins");
    let t = translate(&keys(&[
        ("security.protocol", "SASL_PLAINTEXT"),
        ("sasl.mechanism", "SCRAM-SHA-512"),
        ("sasl.jaas.config", SCRAM),
    ]))
    .unwrap();
    assert!(setting(&t, "ssl.ca.location").is_none(), "no TLS, no CAs");
}

#[test]
fn secrets_are_known_by_what_the_key_holds_under_any_prefix() {
    for k in [
        "database.password",
        "value.converter.basic.auth.user.info",
        "key.converter.schema.registry.basic.auth.user.info",
        "value.converter.bearer.auth.token",
        "value.converter.apicurio.auth.password",
        "database.sslpassword",
        "ssl.key.password",
        "producer.override.ssl.keystore.key",
        "admin.override.ssl.keystore.key",
        "listeners.https.ssl.keystore.key",
        "producer.override.ssl.key.pem",
        "producer.override.sasl.jaas.config",
        "consumer.sasl.jaas.config",
        "sasl.oauthbearer.client.credentials.client.secret",
        "producer.sasl.oauthbearer.config",
        "ssl.truststore.password",
        "transforms.x.apikey",
    ] {
        assert!(is_secret(k), "{k} holds a secret");
    }
    for k in [
        "database.user",
        "database.sslkey",
        "ssl.keystore.location",
        "ssl.truststore.certificates",
        "ssl.keystore.certificate.chain",
        "sasl.oauthbearer.token.endpoint.url",
        "sasl.mechanism",
        "transforms.outbox.table.field.event.key",
        "password.encryption.type",
        "topic.prefix",
    ] {
        assert!(!is_secret(k), "{k} holds no secret");
    }
}

/// The build links a librdkafka with libcurl (OIDC tokens): librdkafka's configure probes for a
/// linkable libcurl before using the vendored one, and silently builds without it when the probe
/// fails (scripts/install.sh installs what it probes for). A build without it fails here, not at a
/// user's first token endpoint.
#[test]
fn the_linked_librdkafka_fetches_oidc_tokens() {
    assert!(
        librdkafka_has("oidc"),
        "librdkafka was built without libcurl: OAUTHBEARER token endpoints will be refused"
    );
    assert!(!librdkafka_has("no-such-feature"));
}
