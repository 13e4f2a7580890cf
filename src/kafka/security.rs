//! Kafka client failures that no retry can fix: the broker refused the SASL credentials, or a TLS
//! certificate did not verify (an untrusted CA, a host name mismatch, a client certificate the broker
//! would not take). librdkafka retries these forever, as it does a broker that is away; the Java
//! client raises them as `SaslAuthenticationException` / `SslAuthenticationException` and Connect
//! fails the task. pgoutbox stops too (exit 7), naming the setting to fix.

use std::sync::Mutex;
use std::time::Duration;

use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseProducer, Producer as _, ProducerContext};

use super::certificate::NOT_TRUSTED;
use crate::config::KafkaConfig;

/// What to tell the operator about a client error, `None` when it may pass (a broker restarting,
/// a network fault). The error's code decides first: a SASL authentication failure is a refusal;
/// a TLS failure (or a transport failure, which is how a TLS alert the broker sends after the
/// handshake arrives) is one when OpenSSL's text says the certificate did not verify or the peer
/// sent an alert; any other code never is, whatever its text.
pub fn refusal(error: &KafkaError, reason: &str) -> Option<String> {
    let code = error.rdkafka_error_code();
    let text = reason.to_ascii_lowercase();
    let tls_alert = text.contains("ssl") && (text.contains("alert") || text.contains("certificate verify failed"));
    let refused = match code {
        Some(RDKafkaErrorCode::Authentication | RDKafkaErrorCode::SaslAuthenticationFailed | RDKafkaErrorCode::SSL) => {
            true
        }
        Some(RDKafkaErrorCode::BrokerTransportFailure) => tls_alert,
        _ => false,
    };
    if !refused {
        return None;
    }
    // OAUTHBEARER with a token endpoint: librdkafka fetches the token before the SASL handshake. An
    // endpoint that refused the client (OAuth's error codes) is a refusal; one that could not be
    // reached or failed (an identity provider restarting) passes, and librdkafka tries again.
    if let Some(at) = text.find("failed to acquire sasl oauthbearer token") {
        let detail = &text[at..];
        // OAuth's error codes, HTTP's refusals when the body has none, and a certificate the client
        // does not trust (curl's words).
        const OAUTH_REFUSALS: [&str; 11] = [
            "invalid_client",
            "unauthorized_client",
            "invalid_scope",
            "invalid_grant",
            "invalid_request",
            "access_denied",
            "unauthorized",
            "forbidden",
            "http 401",
            "http 403",
            "ssl certificate problem",
        ];
        if !OAUTH_REFUSALS.iter().any(|e| detail.contains(e)) {
            return None;
        }
        return Some(format!(
            "the OAuth token endpoint refused this client ({reason}); check sasl.oauthbearer.token.endpoint.url, \
             and clientId, clientSecret and scope in sasl.jaas.config (producer.override.sasl.jaas.config for the producer)"
        ));
    }
    if matches!(code, Some(RDKafkaErrorCode::Authentication | RDKafkaErrorCode::SaslAuthenticationFailed)) {
        // The connection died in the middle of the handshake (a broker stopping or restarting):
        // librdkafka reports it as an authentication failure, "...mechanism handshake failed: Local:
        // Broker transport failure", but nothing was refused (seen in a rolling restart); so is a
        // broker that did not answer in time.
        if ["broker transport failure", "disconnected", "connection closed", "timed out"]
            .iter()
            .any(|t| text.contains(t))
        {
            return None;
        }
        return Some(format!(
            "Kafka refused the SASL login ({reason}); check the username and password in sasl.jaas.config \
             (producer.override.sasl.jaas.config for the producer) and sasl.mechanism"
        ));
    }
    if text.contains("hostname mismatch") || text.contains("host name mismatch") || text.contains("ip address mismatch")
    {
        return Some(format!(
            "the broker's TLS certificate does not name the host it was reached at ({reason}); connect by a name \
             the certificate carries, fix the certificate, or set ssl.endpoint.identification.algorithm= (empty) \
             to turn host name checks off"
        ));
    }
    if text.contains("certificate verify failed")
        || text.contains("unable to get local issuer")
        || text.contains("self-signed")
    {
        return Some(format!(
            "{NOT_TRUSTED} ({reason}); set ssl.truststore.location (PEM or PKCS12) \
             or ssl.truststore.certificates to the CA that signed it (or, if it is signed by a trusted CA, check \
             that it names the broker's host: ssl.endpoint.identification.algorithm)"
        ));
    }
    if ["certificate required", "bad certificate", "unknown ca", "certificate unknown", "handshake failure"]
        .iter()
        .any(|a| text.contains(&format!("alert {a}")) || text.contains(&format!("alert_{}", a.replace(' ', "_"))))
    {
        return Some(format!(
            "the broker refused this client's TLS handshake ({reason}); it likely requires a client certificate \
             its CA signed: set ssl.keystore.location (PKCS12 or PEM) and its password, or \
             ssl.keystore.certificate.chain and ssl.keystore.key"
        ));
    }
    // A TLS failure without a verification failure or an alert (the peer closed the connection
    // mid-handshake: a broker restarting) may pass.
    None
}

/// A refusal is confirmed before the relay stops on it: a broker being rolled can fail one
/// handshake. It stops when the same kind of refusal comes again at least this long after the
/// first (librdkafka reconnects within a second or two, so a lasting refusal recurs at once).
pub const CONFIRM_AFTER: Duration = Duration::from_secs(5);
/// A second refusal this long after the first starts the confirmation over.
const CONFIRM_WITHIN: Duration = Duration::from_secs(120);

/// When each refusal was first seen, process-wide: the client that saw the first one is often
/// gone (a session ends on it and the next builds new clients) when the second comes.
static FIRST_SEEN: Mutex<Option<std::collections::HashMap<String, std::time::Instant>>> = Mutex::new(None);

/// Whether `refusal` (one of [`refusal`]'s texts) is confirmed: the same kind of refusal was seen
/// between CONFIRM_AFTER and CONFIRM_WITHIN ago. The first of a series is not. The kind is the
/// text before librdkafka's reason in parentheses, which varies from one attempt to the next.
pub fn confirmed(refusal: &str) -> bool {
    confirmed_at(refusal, std::time::Instant::now())
}

fn confirmed_at(refusal: &str, now: std::time::Instant) -> bool {
    // The kind, and the broker librdkafka names (`sasl_ssl://host:port/...`): a refusal by one
    // cluster never confirms one by another.
    let kind = refusal.split(" (").next().unwrap_or(refusal);
    let broker = refusal.split("://").nth(1).and_then(|rest| rest.split(['/', ' ', ':']).next()).unwrap_or("");
    let refusal = &format!("{kind} @ {broker}");
    let mut seen = FIRST_SEEN.lock().unwrap_or_else(|e| e.into_inner());
    let seen = seen.get_or_insert_with(Default::default);
    seen.retain(|_, at| now.saturating_duration_since(*at) <= CONFIRM_WITHIN);
    match seen.get(refusal) {
        Some(at) => now.saturating_duration_since(*at) >= CONFIRM_AFTER,
        None => {
            seen.insert(refusal.to_string(), now);
            false
        }
    }
}

/// A client context that remembers the first refusal librdkafka reported.
#[derive(Default)]
pub struct WatchingContext {
    refused: Mutex<Option<String>>,
}

impl WatchingContext {
    pub fn refused(&self) -> Option<String> {
        self.refused.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl ClientContext for WatchingContext {
    fn log(&self, _level: RDKafkaLogLevel, fac: &str, message: &str) {
        // Preflight chatter: the outcome is reported by the caller.
        tracing::debug!(target: "librdkafka", facility = fac, "{message}");
    }

    fn error(&self, error: KafkaError, reason: &str) {
        if let Some(r) = refusal(&error, reason) {
            if confirmed(&r) {
                let mut slot = self.refused.lock().unwrap_or_else(|e| e.into_inner());
                slot.get_or_insert(r);
            } else {
                tracing::warn!(target: "librdkafka", "{r}; confirming in {} s (a broker being restarted can refuse one handshake)", CONFIRM_AFTER.as_secs());
            }
        } else {
            tracing::debug!(target: "librdkafka", %error, "Kafka client error: {reason}");
        }
    }
}

impl ProducerContext for WatchingContext {
    type DeliveryOpaque = ();
    fn delivery(&self, _: &rdkafka::message::DeliveryResult<'_>, _: ()) {}
}

#[derive(Debug, thiserror::Error)]
pub enum PreflightError {
    /// Retrying will not help: credentials or certificates.
    #[error("{0}")]
    Refused(String),
    #[error("cannot reach {servers}: {source}")]
    Unreachable {
        servers: String,
        #[source]
        source: KafkaError,
    },
}

/// Asks the cluster for its metadata with the admin-level settings, so that a refused login or
/// certificate is reported before anything else happens, with the setting to fix. Returns how many
/// brokers and topics the cluster reported.
///
/// The brokers' certificates are checked first by a handshake of pgoutbox's own
/// ([`super::certificate`]), whose verdict is definite at once: the bootstrap servers' before
/// librdkafka connects, the advertised brokers' once the metadata names them. Refused logins (and
/// certificates that check could not judge) come from librdkafka's error callback and are confirmed
/// across attempts ([`confirmed`]).
///
/// A producer handle, not a consumer: librdkafka hands refusals to the error callback with their
/// reason only on the main queue, which a producer's poll serves.
pub fn preflight(cfg: &KafkaConfig, timeout: Duration) -> Result<(usize, usize), PreflightError> {
    let unreachable = |source| PreflightError::Unreachable { servers: cfg.bootstrap_servers.clone(), source };
    let config = super::client_config(cfg);
    if let Some(r) = super::certificate::refusal(&config, &cfg.bootstrap_servers) {
        return Err(PreflightError::Refused(r));
    }
    let client: BaseProducer<WatchingContext> =
        config.create_with_context(WatchingContext::default()).map_err(unreachable)?;
    let start = std::time::Instant::now();
    loop {
        let result = client.client().fetch_metadata(None, Duration::from_secs(1));
        // Serve every event queued, not one: log lines share the queue with the errors, and one
        // event per round left a refusal behind a growing backlog of them.
        client.poll(if result.is_ok() { Duration::ZERO } else { SERVE_FOR });
        if let Some(r) = client.context().refused() {
            return Err(PreflightError::Refused(diagnose(cfg, r)));
        }
        match result {
            Ok(m) => {
                let advertised = advertised(&m, &cfg.bootstrap_servers);
                if let Some(r) = super::certificate::refusal(&config, &advertised) {
                    return Err(PreflightError::Refused(r));
                }
                return Ok((m.brokers().len(), m.topics().len()));
            }
            Err(e) if start.elapsed() >= timeout => return Err(unreachable(e)),
            Err(_) => {}
        }
    }
}

/// How long the preflight serves the client's events after a failed metadata request: everything
/// queued is served at once, this bounds the wait for more.
const SERVE_FOR: Duration = Duration::from_millis(100);

/// The brokers `metadata` advertises that are not among `bootstrap` (checked already), as
/// `host:port` separated by commas.
fn advertised(metadata: &rdkafka::metadata::Metadata, bootstrap: &str) -> String {
    metadata
        .brokers()
        .iter()
        .map(|b| match b.host().contains(':') {
            true => format!("[{}]:{}", b.host(), b.port()),
            false => format!("{}:{}", b.host(), b.port()),
        })
        .filter(|b| !bootstrap.split(',').any(|s| s.trim().rsplit("://").next() == Some(b.as_str())))
        .collect::<Vec<_>>()
        .join(",")
}

/// librdkafka reports a host name mismatch as a plain verification failure. When the same
/// connection succeeds with host name checks off, the CA was fine and the name was not: say so.
fn diagnose(cfg: &KafkaConfig, refusal: String) -> String {
    if !refusal.starts_with(NOT_TRUSTED)
        || cfg.client_security.get("ssl.endpoint.identification.algorithm") == Some("none")
    {
        return refusal;
    }
    let mut relaxed = cfg.clone();
    relaxed.client_security.set("ssl.endpoint.identification.algorithm", "none");
    let Ok(client) = super::client_config(&relaxed)
        .create_with_context::<_, BaseProducer<WatchingContext>>(WatchingContext::default())
    else {
        return refusal;
    };
    let fine = client.client().fetch_metadata(None, Duration::from_secs(5)).is_ok();
    client.poll(Duration::ZERO);
    if fine && client.context().refused().is_none() {
        return format!(
            "the broker's TLS certificate is signed by a trusted CA but does not name the host it was reached at \
             ({}); connect by a name the certificate carries, fix the certificate, or set \
             ssl.endpoint.identification.algorithm= (empty) to turn host name checks off",
            cfg.bootstrap_servers
        );
    }
    refusal
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ClientSettings;
    use crate::kafka::certificate::fake;

    /// A client of `addr` over TLS, trusting `ca`, with `extra` settings.
    fn tls_client(addr: std::net::SocketAddr, ca: &fake::Issued, extra: &[(&str, &str)]) -> KafkaConfig {
        let mut security = ClientSettings::default();
        security.set("security.protocol", "SSL");
        security.set("ssl.ca.pem", ca.pem());
        security.set("ssl.endpoint.identification.algorithm", "https");
        for (k, v) in extra {
            security.set(k, *v);
        }
        KafkaConfig {
            bootstrap_servers: addr.to_string(),
            producer_overrides: ClientSettings::default(),
            client_security: security,
            topic_creation: None,
        }
    }

    /// A certificate no configured CA signed, or one naming another host, is refused at the
    /// preflight's first look, with the setting to fix: the handshake's verdict on a certificate
    /// is the same at every attempt, so there is nothing to confirm (and nothing for librdkafka's
    /// suppression of repeated errors or a slow machine to delay).
    #[test]
    fn preflight_refuses_an_untrusted_or_mismatched_certificate_at_once() {
        let ca = fake::ca("pgoutbox test CA");
        let other = fake::ca("another CA");
        let named = fake::serve(&fake::broker(&ca, "IP:127.0.0.1", -1..30));
        let elsewhere = fake::serve(&fake::broker(&ca, "DNS:elsewhere.example", -1..30));
        for (addr, trusted, says) in [
            (named, &other, ["is not trusted", "ssl.truststore.location"]),
            (elsewhere, &ca, ["does not name the host", "ssl.endpoint.identification.algorithm="]),
        ] {
            let start = std::time::Instant::now();
            match preflight(&tls_client(addr, trusted, &[]), Duration::from_secs(10)) {
                Err(PreflightError::Refused(r)) => assert!(says.iter().all(|s| r.contains(s)), "{r}"),
                other => panic!("{addr}: not refused: {other:?}"),
            }
            assert!(start.elapsed() < CONFIRM_AFTER, "{addr}: refused only after {:?}", start.elapsed());
        }
    }

    #[test]
    fn refusals_name_the_setting_and_transient_errors_pass() {
        let ssl = KafkaError::Global(RDKafkaErrorCode::SSL);
        let r = refusal(&ssl, "ssl://127.0.0.1:1/bootstrap: SSL handshake failed: error:0A000086:SSL routines::certificate verify failed: broker certificate could not be verified, verify that ssl.ca.location is correctly configured or root CA certificates are installed (install ca-certificates package) (after 3ms in state SSL_HANDSHAKE)").unwrap();
        assert!(r.contains("ssl.truststore.location"), "{r}");
        let r = refusal(&ssl, "SSL handshake failed: certificate verify failed: Hostname mismatch").unwrap();
        assert!(r.contains("ssl.endpoint.identification.algorithm"), "{r}");
        let r = refusal(&ssl, "SSL handshake failed: error:0A00045C:SSL routines::tlsv13 alert certificate required")
            .unwrap();
        assert!(r.contains("ssl.keystore.location"), "{r}");
        let auth = KafkaError::Global(RDKafkaErrorCode::Authentication);
        assert!(refusal(&auth, "SASL authentication error: invalid credentials").unwrap().contains("sasl.jaas.config"));
        let dropped = "sasl_ssl://127.0.0.1:46405/1: SASL SCRAM-SHA-512 mechanism handshake failed: Local: Broker transport failure: broker's supported mechanisms: (n/a) (after 0ms in state DOWN)";
        assert!(refusal(&auth, dropped).is_none(), "a connection lost mid-handshake is no refusal");
        let hung = "sasl_ssl://127.0.0.1:1/1: SASL SCRAM-SHA-512 mechanism handshake failed: Local: Timed out";
        assert!(refusal(&auth, hung).is_none(), "a broker that does not answer is no refusal");
        assert!(refusal(&ssl, "SSL handshake failed: Disconnected").is_none());
        let token = r#"Failed to acquire SASL OAUTHBEARER token: {"error":"invalid_client"}"#;
        assert!(refusal(&auth, token).unwrap().contains("sasl.oauthbearer.token.endpoint.url"));
        let unreachable = r#"Failed to acquire SASL OAUTHBEARER token: Failed to retrieve OIDC token from "http://127.0.0.1:1/token": Couldn't connect to server (7)"#;
        assert!(refusal(&auth, unreachable).is_none(), "an endpoint that cannot be reached is retried");
        assert!(refusal(&KafkaError::Global(RDKafkaErrorCode::AllBrokersDown), "1/1 brokers are down").is_none());
    }

    #[test]
    fn a_refusal_stops_only_once_confirmed() {
        let t0 = std::time::Instant::now();
        let r = "test refusal: a_refusal_stops_only_once_confirmed";
        assert!(!confirmed_at(r, t0), "the first refusal is not confirmed");
        assert!(!confirmed_at(r, t0 + Duration::from_secs(1)), "nor one right after it");
        assert!(!confirmed_at("another refusal", t0 + CONFIRM_AFTER), "another kind is not confirmed by it");
        assert!(confirmed_at(r, t0 + CONFIRM_AFTER), "one that comes again after the backoff is");
        let late = t0 + CONFIRM_WITHIN + Duration::from_secs(10);
        assert!(!confirmed_at(r, late), "one long after the first starts over");
    }

    #[test]
    fn refusals_are_decided_by_code_not_by_text() {
        let transport = KafkaError::Global(RDKafkaErrorCode::BrokerTransportFailure);
        assert!(refusal(&transport, "Connection refused (after 0ms in state CONNECT)").is_none());
        assert!(refusal(&transport, "SSL transport error: ... sslv3 alert handshake failure").is_some());
        let timeout = KafkaError::Global(RDKafkaErrorCode::OperationTimedOut);
        assert!(refusal(&timeout, "SSL certificate verify failed, in a timeout's text").is_none(), "the code decides");
        let sasl = KafkaError::Global(RDKafkaErrorCode::SaslAuthenticationFailed);
        assert!(refusal(&sasl, "any wording at all").is_some(), "the code alone decides a SASL refusal");
    }
}
