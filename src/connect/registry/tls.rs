//! TLS to a schema registry (`https://` URLs) with the Java clients' options: a truststore (PEM or
//! PKCS12; JKS is refused with the `keytool` command that converts it), else the operating
//! system's CA certificates as Java trusts its `cacerts`; a keystore for a client certificate; and
//! an empty `ssl.endpoint.identification.algorithm` to skip the host-name check.
//!
//! Confluent's converters read them under `schema.registry.ssl.`, Apicurio's under
//! `apicurio.registry.request.ssl.`.

use std::sync::Arc;

use openssl::pkcs12::Pkcs12;
use openssl::pkey::PKey;
use openssl::x509::X509;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use super::super::config::{ConfigError, Reader};

/// What the options say (compared when configs are compared), and the client built from them.
#[derive(Clone)]
pub struct Tls {
    settings: Settings,
    pub config: Arc<rustls::ClientConfig>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Settings {
    truststore: Option<String>,
    keystore: Option<String>,
    verify_hostname: bool,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.settings.fmt(f)
    }
}

impl PartialEq for Tls {
    fn eq(&self, other: &Self) -> bool {
        self.settings == other.settings
    }
}

impl Eq for Tls {}

/// The TLS client for `prefix` (e.g. `value.converter.schema.registry.ssl.`).
pub fn parse(r: &mut Reader<'_>, prefix: &str) -> Result<Tls, ConfigError> {
    let key = |k: &str| format!("{prefix}{k}");
    let roots = match r.str(&key("truststore.location")) {
        Some(location) => {
            let password = r.str(&key("truststore.password")).unwrap_or("");
            let kind = r.str(&key("truststore.type"));
            let certs = read_certificates(&key("truststore.location"), location, password, kind)?;
            let mut roots = rustls::RootCertStore::empty();
            for c in certs {
                roots.add(c).map_err(|e| {
                    ConfigError::invalid(&key("truststore.location"), format!("a certificate in `{location}`: {e}"))
                })?;
            }
            roots
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            let mut roots = rustls::RootCertStore::empty();
            let (added, _) = roots.add_parsable_certificates(found.certs);
            if added == 0 {
                return Err(ConfigError::invalid(&key("truststore.location"), "is needed: no CA certificates were found on this system (install ca-certificates, or set SSL_CERT_FILE) to check the registry's certificate"));
            }
            roots
        }
    };
    let verify_hostname = match r.raw(&key("endpoint.identification.algorithm")) {
        None => true,
        Some(v) if v.trim().eq_ignore_ascii_case("https") => true,
        Some(v) if v.trim().is_empty() => false,
        Some(_) => {
            return Err(ConfigError::invalid(
                &key("endpoint.identification.algorithm"),
                "is not one of https or an empty value",
            ))
        }
    };
    let provider = crate::tls::provider();
    let webpki = rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| ConfigError::invalid(&key("truststore.location"), e.to_string()))?;
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ConfigError::invalid(&key("protocol"), e.to_string()))?;
    let builder = if verify_hostname {
        builder.with_webpki_verifier(webpki)
    } else {
        builder.dangerous().with_custom_certificate_verifier(Arc::new(crate::tls::IgnoreHostname(webpki)))
    };
    let keystore = r.str(&key("keystore.location"));
    let config = match keystore {
        Some(location) => {
            let password = r.str(&key("keystore.password")).unwrap_or("");
            let key_password = r.str(&key("key.password"));
            let kind = r.str(&key("keystore.type"));
            let (chain, private) = read_keystore(&key("keystore.location"), location, password, key_password, kind)?;
            builder
                .with_client_auth_cert(chain, private)
                .map_err(|e| ConfigError::invalid(&key("keystore.location"), format!("the client certificate: {e}")))?
        }
        None => builder.with_no_client_auth(),
    };
    let settings = Settings {
        truststore: r.peek(&key("truststore.location")).map(str::to_string),
        keystore: keystore.map(str::to_string),
        verify_hostname,
    };
    Ok(Tls { settings, config: Arc::new(config) })
}

fn read(key: &str, location: &str) -> Result<Vec<u8>, ConfigError> {
    let bytes =
        std::fs::read(location).map_err(|e| ConfigError::invalid(key, format!("cannot read `{location}`: {e}")))?;
    if bytes.starts_with(&[0xFE, 0xED, 0xFE, 0xED]) || bytes.starts_with(&[0xCE, 0xCE, 0xCE, 0xCE]) {
        return Err(ConfigError::invalid(key, format!("`{location}` is a JKS store, which only Java reads; convert it with `keytool -importkeystore -srckeystore {location} -destkeystore {location}.p12 -deststoretype PKCS12` and name the .p12 file")));
    }
    Ok(bytes)
}

fn is_pem(bytes: &[u8], kind: Option<&str>) -> bool {
    kind.is_some_and(|k| k.eq_ignore_ascii_case("PEM")) || String::from_utf8_lossy(bytes).contains("-----BEGIN")
}

/// A truststore's certificates: PEM, or PKCS12 with its password.
fn read_certificates(
    key: &str,
    location: &str,
    password: &str,
    kind: Option<&str>,
) -> Result<Vec<CertificateDer<'static>>, ConfigError> {
    let bytes = read(key, location)?;
    let certs = if is_pem(&bytes, kind) {
        X509::stack_from_pem(&bytes)
            .map_err(|e| ConfigError::invalid(key, format!("cannot read the certificates of `{location}`: {e}")))?
    } else {
        let p12 = Pkcs12::from_der(&bytes).and_then(|p| p.parse2(password)).map_err(|_| {
            ConfigError::invalid(
                key,
                format!("cannot read `{location}` as PKCS12 or PEM (check the file and its password)"),
            )
        })?;
        p12.cert.into_iter().chain(p12.ca.into_iter().flatten()).collect()
    };
    if certs.is_empty() {
        return Err(ConfigError::invalid(key, format!("`{location}` holds no certificate")));
    }
    certs
        .iter()
        .map(|c| c.to_der().map(CertificateDer::from).map_err(|e| ConfigError::invalid(key, e.to_string())))
        .collect()
}

/// A keystore's certificate chain and private key: PKCS12, or PEM with the key and the chain.
fn read_keystore(
    key: &str,
    location: &str,
    password: &str,
    key_password: Option<&str>,
    kind: Option<&str>,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), ConfigError> {
    let bytes = read(key, location)?;
    let bad = |what: String| ConfigError::invalid(key, what);
    let (pkey, chain) = if is_pem(&bytes, kind) {
        let pkey = match key_password {
            Some(p) => PKey::private_key_from_pem_passphrase(&bytes, p.as_bytes()),
            None => PKey::private_key_from_pem(&bytes),
        }
        .map_err(|_| {
            bad(format!("`{location}` holds no private key this can read (an encrypted key needs its key.password)"))
        })?;
        let chain = X509::stack_from_pem(&bytes).map_err(|e| bad(format!("the certificates of `{location}`: {e}")))?;
        (pkey, chain)
    } else {
        let parsed = Pkcs12::from_der(&bytes)
            .and_then(|p| p.parse2(password))
            .map_err(|_| bad(format!("cannot read `{location}` as PKCS12 (check its password)")))?;
        let (Some(pkey), Some(cert)) = (parsed.pkey, parsed.cert) else {
            return Err(bad(format!("`{location}` holds no private key with its certificate")));
        };
        (pkey, std::iter::once(cert).chain(parsed.ca.into_iter().flatten()).collect())
    };
    if chain.is_empty() {
        return Err(bad(format!("`{location}` holds no certificate")));
    }
    let der = pkey.private_key_to_pkcs8().map_err(|e| bad(e.to_string()))?;
    let chain = chain
        .iter()
        .map(|c| c.to_der().map(CertificateDer::from).map_err(|e| bad(e.to_string())))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((chain, PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(der))))
}
