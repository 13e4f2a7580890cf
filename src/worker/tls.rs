//! HTTPS for the worker's REST API, from Connect's keys: `listeners=https://...` with
//! `listeners.https.ssl.*` (or the worker's own `ssl.*`, which Connect falls back to): a PKCS12 or
//! PEM keystore with the worker's key and certificate chain, and `ssl.client.auth` (`none`,
//! `requested`, `required`) with a truststore for client certificates. JKS stores, which only Java
//! reads, are refused with the `keytool` command that converts them.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use openssl::pkey::{PKey, Private};
use openssl::x509::X509;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::ServerConfig;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::config::ConfigError;

/// A TLS handshake that takes longer than this is dropped, so a silent client holds nothing.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The prefix the REST API's TLS keys are read under: `listeners.https.` when any key has it, else
/// none (the worker's own `ssl.*`). As in Connect, the two are never mixed: a client-auth setting
/// under `listeners.https.` never picks up the worker's Kafka truststore.
fn prefix(props: &BTreeMap<String, String>) -> &'static str {
    match props.keys().any(|k| k.starts_with("listeners.https.")) {
        true => "listeners.https.",
        false => "",
    }
}

/// One REST TLS setting, with the key it came from.
fn setting<'p>(props: &'p BTreeMap<String, String>, name: &str) -> Option<(String, &'p str)> {
    let key = format!("{}{name}", prefix(props));
    props.get(&key).map(|v| v.trim()).filter(|v| !v.is_empty()).map(|v| (key, v))
}

/// The key to name for a missing setting.
fn key_for(props: &BTreeMap<String, String>, name: &str) -> String {
    format!("{}{name}", if prefix(props).is_empty() { "listeners.https." } else { prefix(props) })
}

fn invalid(key: &str, why: impl Into<String>) -> ConfigError {
    ConfigError::invalid(key, why.into())
}

/// The REST API's TLS configuration for an `https://` listener.
pub fn server_config(props: &BTreeMap<String, String>) -> Result<ServerConfig, ConfigError> {
    let Some((location_key, location)) = setting(props, "ssl.keystore.location") else {
        return Err(invalid(
            &key_for(props, "ssl.keystore.location"),
            "an https:// listener needs the worker's key and certificate: set listeners.https.ssl.keystore.location (PKCS12 or PEM) and its password",
        ));
    };
    let password = setting(props, "ssl.keystore.password").map_or("", |(_, v)| v);
    let key_password = setting(props, "ssl.key.password").map(|(_, v)| v);
    let kind = setting(props, "ssl.keystore.type").map(|(_, v)| v);
    let bytes = read(&location_key, location)?;
    let (key, chain) = keystore(&bytes, kind, password, key_password)
        .map_err(|why| invalid(&location_key, format!("cannot read the file it names: {why}")))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| invalid(&location_key, e.to_string()))?;
    let auth = setting(props, "ssl.client.auth").map_or("none".to_string(), |(_, v)| v.to_ascii_lowercase());
    let builder = match auth.as_str() {
        "none" => builder.with_no_client_auth(),
        "requested" | "required" => {
            let roots = client_roots(props)?;
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = if auth == "requested" { verifier.allow_unauthenticated() } else { verifier };
            let verifier =
                verifier.build().map_err(|e| invalid("listeners.https.ssl.truststore.location", e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
        other => {
            return Err(invalid(
                "listeners.https.ssl.client.auth",
                format!("`{other}` is not one of none, requested, required"),
            ))
        }
    };
    let mut config = builder.with_single_cert(chain, key).map_err(|e| {
        invalid(&location_key, format!("the key and certificate in the file do not make a TLS identity: {e}"))
    })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

fn read(key: &str, path: &str) -> Result<Vec<u8>, ConfigError> {
    std::fs::read(path).map_err(|e| invalid(key, format!("cannot read the file it names: {e}")))
}

/// The private key and certificate chain of a keystore, PKCS12 or PEM (decided by its content when
/// the type is absent or JKS, as Java's keystore.type.compat reads PKCS12 under the JKS type).
fn keystore(
    bytes: &[u8],
    kind: Option<&str>,
    password: &str,
    key_password: Option<&str>,
) -> Result<(PrivateKeyDer<'static>, Vec<CertificateDer<'static>>), String> {
    if bytes.starts_with(&[0xFE, 0xED, 0xFE, 0xED]) || bytes.starts_with(&[0xCE, 0xCE, 0xCE, 0xCE]) {
        return Err("it is a JKS store, which only Java reads; convert it with `keytool -importkeystore -srckeystore FILE -destkeystore FILE.p12 -deststoretype PKCS12` and point the key at FILE.p12".into());
    }
    let pem = String::from_utf8_lossy(&bytes[..bytes.len().min(4096)]).contains("-----BEGIN");
    let (pkey, certs) = match (kind.map(str::to_ascii_uppercase).as_deref(), pem) {
        (Some("PEM") | None | Some("JKS"), true) => {
            let certs = X509::stack_from_pem(bytes).map_err(|e| format!("no PEM certificate: {e}"))?;
            let pkey = match key_password.or(Some(password).filter(|p| !p.is_empty())) {
                Some(p) => PKey::private_key_from_pem_passphrase(bytes, p.as_bytes()),
                None => PKey::private_key_from_pem(bytes),
            }
            .map_err(|_| "no PEM private key, or the key's password (ssl.key.password) is wrong".to_string())?;
            (pkey, certs)
        }
        (Some("PKCS12") | None | Some("JKS"), false) => pkcs12(bytes, password)?,
        (Some(_), _) => return Err("the store type does not match its content (PKCS12 or PEM)".into()),
    };
    if certs.is_empty() {
        return Err("it holds no certificate".into());
    }
    let key = pkey.private_key_to_pkcs8().map_err(|e| e.to_string())?;
    let chain = certs.iter().map(|c| c.to_der().map(CertificateDer::from)).collect::<Result<Vec<_>, _>>();
    Ok((PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key)), chain.map_err(|e| e.to_string())?))
}

fn pkcs12(der: &[u8], password: &str) -> Result<(PKey<Private>, Vec<X509>), String> {
    let p12 = openssl::pkcs12::Pkcs12::from_der(der).map_err(|_| "not a PKCS12 or PEM keystore".to_string())?;
    let parsed = p12
        .parse2(password)
        .map_err(|_| "wrong password (ssl.keystore.password), or an encryption OpenSSL does not support".to_string())?;
    let (Some(pkey), Some(cert)) = (parsed.pkey, parsed.cert) else {
        return Err("it holds no private key with its certificate (is it a truststore?)".into());
    };
    Ok((pkey, std::iter::once(cert).chain(parsed.ca.into_iter().flatten()).collect()))
}

/// The CAs that sign acceptable client certificates.
fn client_roots(props: &BTreeMap<String, String>) -> Result<rustls::RootCertStore, ConfigError> {
    let Some((key, location)) = setting(props, "ssl.truststore.location") else {
        return Err(invalid(
            &key_for(props, "ssl.truststore.location"),
            "ssl.client.auth asks for client certificates: set the truststore with the CAs that sign them",
        ));
    };
    let bytes = read(&key, location)?;
    if bytes.starts_with(&[0xFE, 0xED, 0xFE, 0xED]) || bytes.starts_with(&[0xCE, 0xCE, 0xCE, 0xCE]) {
        return Err(invalid(&key, "the file is a JKS store, which only Java reads; convert it with `keytool -importkeystore -srckeystore STORE -destkeystore STORE.p12 -deststoretype PKCS12`"));
    }
    let password = setting(props, "ssl.truststore.password").map_or("", |(_, v)| v);
    let certs = if String::from_utf8_lossy(&bytes).contains("-----BEGIN") {
        X509::stack_from_pem(&bytes).map_err(|e| invalid(&key, format!("cannot read the file's certificates: {e}")))?
    } else {
        let p12 = openssl::pkcs12::Pkcs12::from_der(&bytes)
            .and_then(|p| p.parse2(password))
            .map_err(|_| invalid(&key, "cannot read the file as PKCS12 or PEM (check its password)"))?;
        p12.cert.into_iter().chain(p12.ca.into_iter().flatten()).collect()
    };
    let mut roots = rustls::RootCertStore::empty();
    for c in certs {
        let der = c.to_der().map_err(|e| invalid(&key, e.to_string()))?;
        roots.add(CertificateDer::from(der)).map_err(|e| invalid(&key, format!("a certificate in the file: {e}")))?;
    }
    Ok(roots)
}

/// Handshakes in progress at once: past it, new connections wait in the kernel's backlog, so a
/// flood of clients that open connections and never finish a handshake costs a bounded number of
/// tasks and buffers.
const HANDSHAKES_AT_ONCE: usize = 64;

/// An HTTPS listener for axum: handshakes run on their own tasks (bounded by
/// [`HANDSHAKE_TIMEOUT`] each and [`HANDSHAKES_AT_ONCE`] together), so a slow or silent client
/// never holds up the next one.
pub struct TlsListener {
    ready: mpsc::Receiver<(tokio_rustls::server::TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
}

impl TlsListener {
    pub fn new(tcp: TcpListener, config: Arc<ServerConfig>, shutdown: CancellationToken) -> std::io::Result<Self> {
        let local = tcp.local_addr()?;
        let acceptor = tokio_rustls::TlsAcceptor::from(config);
        let (tx, ready) = mpsc::channel(64);
        let slots = Arc::new(tokio::sync::Semaphore::new(HANDSHAKES_AT_ONCE));
        tokio::spawn(async move {
            loop {
                let permit = tokio::select! {
                    _ = shutdown.cancelled() => return,
                    permit = slots.clone().acquire_owned() => match permit {
                        Ok(p) => p,
                        Err(_) => return,
                    },
                };
                let (stream, peer) = tokio::select! {
                    _ = shutdown.cancelled() => return,
                    accepted = tcp.accept() => match accepted {
                        Ok(a) => a,
                        Err(e) => {
                            tracing::warn!(error = %e, "REST API: accept failed");
                            tokio::time::sleep(Duration::from_millis(100)).await;
                            continue;
                        }
                    },
                };
                let (acceptor, tx) = (acceptor.clone(), tx.clone());
                tokio::spawn(async move {
                    let handshake = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await;
                    drop(permit);
                    match handshake {
                        Ok(Ok(tls)) => {
                            let _ = tx.send((tls, peer)).await;
                        }
                        Ok(Err(e)) => tracing::debug!(%peer, error = %e, "REST API: TLS handshake failed"),
                        Err(_) => tracing::debug!(%peer, "REST API: TLS handshake timed out"),
                    }
                });
            }
        });
        Ok(TlsListener { ready, local })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = tokio_rustls::server::TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(connection) => connection,
            // The accept loop stopped (shutdown): no connection comes any more.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    /// A self-signed identity for `localhost` in a PEM keystore file, and its certificate.
    fn identity() -> (std::path::PathBuf, Vec<u8>) {
        use openssl::asn1::Asn1Time;
        use openssl::ec::{EcGroup, EcKey};
        use openssl::hash::MessageDigest;
        use openssl::nid::Nid;
        use openssl::x509::extension::SubjectAlternativeName;
        use openssl::x509::{X509Builder, X509NameBuilder};
        let key =
            PKey::from_ec_key(EcKey::generate(&EcGroup::from_curve_name(Nid::X9_62_PRIME256V1).unwrap()).unwrap())
                .unwrap();
        let mut name = X509NameBuilder::new().unwrap();
        name.append_entry_by_text("CN", "localhost").unwrap();
        let name = name.build();
        let mut b = X509Builder::new().unwrap();
        b.set_version(2).unwrap();
        b.set_subject_name(&name).unwrap();
        b.set_issuer_name(&name).unwrap();
        b.set_pubkey(&key).unwrap();
        b.set_not_before(&Asn1Time::days_from_now(0).unwrap()).unwrap();
        b.set_not_after(&Asn1Time::days_from_now(1).unwrap()).unwrap();
        let san = SubjectAlternativeName::new().dns("localhost").build(&b.x509v3_context(None, None)).unwrap();
        b.append_extension(san).unwrap();
        b.sign(&key, MessageDigest::sha256()).unwrap();
        let cert = b.build();
        let path =
            std::env::temp_dir().join(format!("pgoutbox-tls-{}-{}.pem", std::process::id(), uuid::Uuid::now_v7()));
        let mut pem = key.private_key_to_pem_pkcs8().unwrap();
        pem.extend(cert.to_pem().unwrap());
        std::fs::write(&path, pem).unwrap();
        (path, cert.to_der().unwrap())
    }

    /// Issue 20, item 6: a client that opens a connection and never finishes its handshake is
    /// dropped after HANDSHAKE_TIMEOUT, and no more than HANDSHAKES_AT_ONCE handshakes run at once:
    /// one more silent client is taken only when a slot frees, so it is dropped a timeout later
    /// than the first ones (time is paused: the waits are virtual). A real client's handshake still
    /// completes once a slot is free.
    #[tokio::test(start_paused = true)]
    async fn silent_clients_are_dropped_and_hold_back_the_next_one_only_for_the_handshake_timeout() {
        use tokio::io::AsyncReadExt;
        let (keystore, cert) = identity();
        let props = props(&[("listeners.https.ssl.keystore.location", keystore.to_str().unwrap())]);
        let config = Arc::new(server_config(&props).unwrap());
        let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = tcp.local_addr().unwrap();
        let mut listener = TlsListener::new(tcp, config, CancellationToken::new()).unwrap();
        tokio::spawn(async move {
            // What axum would do: take each connection that finished its handshake.
            loop {
                let _ = axum::serve::Listener::accept(&mut listener).await;
            }
        });
        let started = tokio::time::Instant::now();
        let mut silent = Vec::new();
        for _ in 0..HANDSHAKES_AT_ONCE {
            silent.push(TcpStream::connect(addr).await.unwrap());
        }
        let mut one_more = TcpStream::connect(addr).await.unwrap();
        let mut buf = [0u8; 16];
        for s in &mut silent {
            let read = s.read(&mut buf).await;
            assert!(matches!(read, Ok(0) | Err(_)), "a silent client was not dropped: {read:?}");
        }
        let first_dropped = started.elapsed();
        assert!(first_dropped >= HANDSHAKE_TIMEOUT, "dropped before the timeout: {first_dropped:?}");
        let read = one_more.read(&mut buf).await;
        assert!(matches!(read, Ok(0) | Err(_)), "the extra silent client was not dropped: {read:?}");
        let extra_dropped = started.elapsed();
        assert!(
            extra_dropped >= first_dropped + HANDSHAKE_TIMEOUT,
            "the extra client's handshake started before a slot was free: dropped at {extra_dropped:?}, the others at {first_dropped:?}"
        );
        // Every slot is free again: a real client is served.
        let mut roots = rustls::RootCertStore::empty();
        roots.add(CertificateDer::from(cert)).unwrap();
        let client = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let connector = tokio_rustls::TlsConnector::from(Arc::new(client));
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let real = connector.connect(name, TcpStream::connect(addr).await.unwrap()).await;
        assert!(real.is_ok(), "the real client's handshake: {:?}", real.err());
        let _ = std::fs::remove_file(keystore);
    }

    /// As in Connect, `listeners.https.*` and the worker's `ssl.*` are never mixed: with any
    /// `listeners.https.` key, the worker's Kafka truststore is not the REST API's.
    #[test]
    fn listener_keys_replace_the_workers_ssl_keys_as_a_whole() {
        let p = props(&[
            ("ssl.truststore.location", "/kafka/truststore.p12"),
            ("ssl.keystore.location", "/kafka/keystore.p12"),
            ("listeners.https.ssl.client.auth", "required"),
        ]);
        assert_eq!(setting(&p, "ssl.truststore.location"), None);
        assert_eq!(setting(&p, "ssl.client.auth"), Some(("listeners.https.ssl.client.auth".into(), "required")));
        let e = server_config(&p).unwrap_err().to_string();
        assert!(e.contains("listeners.https.ssl.keystore.location"), "{e}");
        let worker_only = props(&[("ssl.keystore.location", "/kafka/keystore.p12")]);
        assert_eq!(
            setting(&worker_only, "ssl.keystore.location"),
            Some(("ssl.keystore.location".into(), "/kafka/keystore.p12"))
        );
    }
}
