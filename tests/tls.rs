//! database.sslmode against a PostgreSQL with TLS on (certificates made by scripts/lib.sh): `ssl_user`
//! may connect only over TLS, `cert_user` only with a client certificate.

mod support;

use std::time::Duration;

use support::*;

fn tls_dir() -> String {
    std::env::var("PGOUTBOX_TEST_TLS_DIR").expect("PGOUTBOX_TEST_TLS_DIR is set by scripts/test.sh")
}

/// The test config without its user and sslmode, then `extra`.
fn tls_config(o: &Outbox, extra: &[&str]) -> String {
    let mut cfg = o.config(&[]).replace("database.user=postgres\n", "").replace("database.sslmode=disable\n", "");
    for e in extra {
        cfg.push_str(e);
        cfg.push('\n');
    }
    cfg
}

async fn relays_one_event(o: &Outbox, extra: &[&str]) {
    o.create_topics(&["Order"], 1).await;
    let cfg = tls_config(o, extra);
    let mut relay = Relay::start(&cfg);
    relay.wait_for_log("streaming", Duration::from_secs(30));
    o.env.sql().await.batch_execute(&o.insert_sql("Order", "a", Some("{}"))).await.unwrap();
    let got = consume(&o.env.broker, &[o.topic("Order")], 1, Duration::from_secs(30));
    assert_eq!(got.len(), 1, "log:\n{}", relay.log_text());
    assert_eq!(relay.stop().code(), Some(0));
    o.drop_slot().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn tls_require_and_verify_full_connect() {
    let ca = format!("{}/ca.crt", tls_dir());
    for mode in ["prefer", "require", "verify-ca", "verify-full"] {
        let o = Outbox::new(&format!("tls_{}", mode.replace('-', "_"))).await;
        relays_one_event(
            &o,
            &[
                "database.user=ssl_user",
                "database.password=ssl-secret",
                &format!("database.sslmode={mode}"),
                &format!("database.sslrootcert={ca}"),
            ],
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn tls_client_certificate_authenticates() {
    let d = tls_dir();
    let o = Outbox::new("tls_cert").await;
    relays_one_event(
        &o,
        &[
            "database.user=cert_user",
            "database.sslmode=verify-ca",
            &format!("database.sslrootcert={d}/ca.crt"),
            &format!("database.sslcert={d}/client.crt"),
            &format!("database.sslkey={d}/client.key"),
        ],
    )
    .await;
}

async fn fails_with(extra: &[&str], needle: &str) {
    let o = Outbox::new("tls_bad").await;
    let cfg = tls_config(&o, extra);
    let mut relay = Relay::start(&cfg);
    let status = relay.wait(Duration::from_secs(30)).expect("exits on its own");
    let log = relay.log_text();
    assert_eq!(status.code(), Some(3), "log:\n{log}");
    assert!(log.contains(needle), "expected {needle:?} in log:\n{log}");
    assert!(!log.contains("ssl-secret"), "the password must never be logged");
}

#[tokio::test(flavor = "multi_thread")]
async fn tls_wrong_ca_is_refused_clearly() {
    let d = tls_dir();
    fails_with(
        &[
            "database.user=ssl_user",
            "database.password=ssl-secret",
            "database.sslmode=verify-full",
            &format!("database.sslrootcert={d}/other-ca.crt"),
        ],
        "TLS",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn tls_disabled_is_rejected_by_a_tls_only_user() {
    fails_with(
        &["database.user=ssl_user", "database.password=ssl-secret", "database.sslmode=disable"],
        "pg_hba.conf rejects",
    )
    .await;
}

/// SCRAM-SHA-256-PLUS bound to the server's certificate, on both connections, against the real
/// server: channelBinding=require succeeds over TLS (so the binding really happened: a plain
/// SCRAM exchange would be refused), and requireAuth=scram-sha-256 accepts the SCRAM user.
#[tokio::test(flavor = "multi_thread")]
async fn tls_channel_binding_required_binds_to_the_server_certificate() {
    let ca = format!("{}/ca.crt", tls_dir());
    let o = Outbox::new("tls_binding").await;
    relays_one_event(
        &o,
        &[
            "database.user=ssl_user",
            "database.password=ssl-secret",
            "database.sslmode=verify-full",
            &format!("database.sslrootcert={ca}"),
            "database.channelBinding=require",
            "database.requireAuth=scram-sha-256",
        ],
    )
    .await;
}

/// A trust-authenticated user is let in without authentication: with requireAuth listing only
/// SCRAM the relay refuses the connection (exit 3) instead of streaming. The SQL connection, the
/// first one made, refuses it itself, inside TLS and without it (before, only the replication
/// connection checked requireAuth).
#[tokio::test(flavor = "multi_thread")]
async fn tls_require_auth_refuses_a_server_that_skips_authentication() {
    for sslmode in ["require", "disable"] {
        fails_with(
            &["database.user=postgres", &format!("database.sslmode={sslmode}"), "database.requireAuth=scram-sha-256"],
            "without authentication, which database.requireAuth does not allow; refusing to authenticate the SQL connection",
        )
        .await;
    }
}
