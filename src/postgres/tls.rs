//! TLS for both PostgreSQL connections, with libpq's `sslmode` semantics:
//! - `disable`: never; `allow`: plaintext (this relay does not retry with TLS); `prefer` (Debezium's
//!   default): TLS when the server offers it, without verifying the certificate;
//! - `require`: TLS, certificate not verified, unless `database.sslrootcert` is given (then as
//!   `verify-ca`, as libpq does);
//! - `verify-ca`: the chain must lead to `database.sslrootcert`; `verify-full`: and the certificate
//!   must name `database.hostname`.
//!
//! `database.sslcert` / `database.sslkey` present a client certificate (`cert` authentication).

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

use crate::config::{DatabaseConfig, SslMode};

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {key} `{path}`: {message}")]
    File { key: &'static str, path: String, message: String },
    #[error("TLS setup failed: {0}")]
    Config(String),
}

/// Whether to ask for TLS, and whether the connection must fail without it.
pub fn wants_tls(mode: SslMode) -> (bool, bool) {
    match mode {
        SslMode::Disable | SslMode::Allow => (false, false),
        SslMode::Prefer => (true, false),
        SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => (true, true),
    }
}

fn provider() -> Arc<CryptoProvider> {
    crate::tls::provider()
}

pub fn client_config(db: &DatabaseConfig) -> Result<ClientConfig, TlsError> {
    let provider = provider();
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?;
    let verify_chain = matches!(db.sslmode, SslMode::VerifyCa | SslMode::VerifyFull)
        || (db.sslmode == SslMode::Require && db.sslrootcert.is_some());
    let verifier: Arc<dyn ServerCertVerifier> = if verify_chain {
        let path = db.sslrootcert.as_deref().ok_or_else(|| {
            TlsError::Config("sslmode verify-ca and verify-full need database.sslrootcert (the CA that signed the server certificate)".into())
        })?;
        let mut roots = RootCertStore::empty();
        for cert in CertificateDer::pem_file_iter(path).map_err(|e| file_err("database.sslrootcert", path, e))? {
            roots
                .add(cert.map_err(|e| file_err("database.sslrootcert", path, e))?)
                .map_err(|e| TlsError::Config(e.to_string()))?;
        }
        let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
            .build()
            .map_err(|e| TlsError::Config(e.to_string()))?;
        if db.sslmode == SslMode::VerifyFull {
            webpki
        } else {
            Arc::new(crate::tls::IgnoreHostname(webpki))
        }
    } else {
        Arc::new(AcceptAnyCertificate(provider))
    };
    let builder = builder.dangerous().with_custom_certificate_verifier(verifier);
    match (&db.sslcert, &db.sslkey) {
        (Some(cert), Some(key)) => {
            let chain = CertificateDer::pem_file_iter(cert)
                .map_err(|e| file_err("database.sslcert", cert, e))?
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| file_err("database.sslcert", cert, e))?;
            let key = PrivateKeyDer::from_pem_file(key).map_err(|e| file_err("database.sslkey", key, e))?;
            builder.with_client_auth_cert(chain, key).map_err(|e| TlsError::Config(format!("client certificate: {e}")))
        }
        (None, None) => Ok(builder.with_no_client_auth()),
        _ => Err(TlsError::Config("database.sslcert and database.sslkey go together".into())),
    }
}

fn file_err(key: &'static str, path: &str, e: impl std::fmt::Display) -> TlsError {
    TlsError::File { key, path: path.to_string(), message: e.to_string() }
}

pub fn server_name(host: &str) -> Result<ServerName<'static>, TlsError> {
    ServerName::try_from(host.to_string())
        .map_err(|e| TlsError::Config(format!("`{host}` is not a valid TLS server name: {e}")))
}

/// `prefer` / `require` without a root certificate: encryption without authentication of the server,
/// as libpq does; the handshake signatures are still checked.
#[derive(Debug)]
struct AcceptAnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(m, c, d, &self.0.signature_verification_algorithms)
    }
    fn verify_tls13_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(m, c, d, &self.0.signature_verification_algorithms)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// The `tls-server-end-point` channel binding data of a server certificate (RFC 5929 4.1): its
/// DER hashed with its signature's digest, SHA-256 where that is MD5 or SHA-1. `None` for a
/// signature whose digest the openssl crate cannot name (Ed25519; RSA-PSS, whose digest sits in
/// its parameters, where libpq can bind): the client then says it does not bind (`n,,`).
pub fn end_point_hash(der: &[u8]) -> Option<Vec<u8>> {
    use openssl::hash::{hash, MessageDigest};
    use openssl::nid::Nid;
    let cert = openssl::x509::X509::from_der(der).ok()?;
    let digest = cert.signature_algorithm().object().nid().signature_algorithms()?.digest;
    let md = match digest {
        Nid::MD5 | Nid::SHA1 => MessageDigest::sha256(),
        Nid::UNDEF => return None,
        d => MessageDigest::from_nid(d)?,
    };
    Some(hash(md, der).ok()?.to_vec())
}
