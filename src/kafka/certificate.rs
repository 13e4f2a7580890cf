//! The brokers' TLS certificates, checked by a handshake of pgoutbox's own before librdkafka's.
//!
//! librdkafka reports a certificate that does not verify as it reports a broker that is away: an
//! error callback, and a reconnection a second later, forever. Those reports are a poor basis for
//! stopping: librdkafka suppresses a broker's identical errors for 30 s, and they reach the
//! application only as its event queue is served, behind the client's log lines. Whether a
//! refusal was seen (and seen again, to confirm it) within a session's preflight came down to the
//! machine's load, and on a busy machine the relay retried a certificate that would never verify as
//! if the cluster were unreachable. A handshake gives a definite answer at once: OpenSSL's verdict on
//! the chain the broker presents, with the client's CAs and host name check set up as librdkafka sets
//! them up (`rd_kafka_ssl_set_certs`, `rd_kafka_transport_ssl_set_endpoint_id`), from the same
//! settings: `ssl.ca.location` (a file, a directory or `probe`), `ssl.ca.pem`, `ssl.crl.location`,
//! `ssl.endpoint.identification.algorithm` and `enable.ssl.certificate.verification`.
//!
//! Only a failed verification is an answer. A broker that cannot be reached, a handshake that fails
//! for another reason (a listener without TLS, no common cipher, a broker that wants a client
//! certificate, which it says only after the handshake), and settings this check does not reproduce
//! (an OpenSSL engine or provider) leave the decision to librdkafka's reports, as before.

use std::net::{IpAddr, TcpStream, ToSocketAddrs};
use std::path::Path;
use std::time::Duration;

use openssl::ssl::{HandshakeError, Ssl, SslContext, SslContextBuilder, SslMethod, SslVerifyMode};
use openssl::x509::verify::X509VerifyFlags;
use openssl::x509::{X509VerifyResult, X509};
use rdkafka::ClientConfig;

/// How long a broker has to connect and finish the handshake. A broker that takes longer is left
/// to librdkafka, which waits as long as it takes.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// The start of the text for a certificate no trusted CA signed (see [`super::security`]).
pub const NOT_TRUSTED: &str = "the broker's TLS certificate is not trusted";

// OpenSSL's verification results (`X509_V_ERR_*`) that call for another fix than the truststore.
const CERT_NOT_YET_VALID: i32 = 9;
const CERT_HAS_EXPIRED: i32 = 10;
const HOSTNAME_MISMATCH: i32 = 62;
const IP_ADDRESS_MISMATCH: i32 = 64;

/// Where librdkafka looks for the system's CAs when it has none configured (`ssl.ca.location`
/// unset or `probe`) and OpenSSL is linked statically, as here (`rd_kafka_ssl_probe_and_set_default_ca_location`):
/// the first of these that loads.
const CA_PROBE_PATHS: [&str; 17] = [
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/certs/ca-bundle.crt",
    "/etc/pki/tls/certs/ca-bundle.trust.crt",
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
    "/etc/ssl/ca-bundle.pem",
    "/etc/pki/tls/cacert.pem",
    "/etc/ssl/cert.pem",
    "/etc/ssl/cacert.pem",
    "/etc/certs/ca-certificates.crt",
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/ssl/certs",
    "/usr/local/etc/ssl/cert.pem",
    "/usr/local/etc/ssl/cacert.pem",
    "/usr/local/etc/ssl/certs/cert.pem",
    "/usr/local/etc/ssl/certs/cacert.pem",
    "/usr/local/share/certs/ca-root-nss.crt",
    "/etc/openssl/certs/ca-certificates.crt",
];

/// The first refusal of a certificate among `servers` (`host:port`, comma-separated, as in
/// `bootstrap.servers`), in their order, naming the setting to fix; `None` when each certificate
/// verified or could not be checked, or `config` does not connect over TLS with verification on.
/// The servers are tried at once, each within [`HANDSHAKE_TIMEOUT`].
pub fn refusal(config: &ClientConfig, servers: &str) -> Option<String> {
    let checker = Checker::new(config)?;
    let servers: Vec<(&str, u16)> = servers.split(',').filter_map(server).collect();
    std::thread::scope(|scope| {
        let checks: Vec<_> = servers
            .iter()
            .map(|&(host, port)| {
                let checker = &checker;
                scope.spawn(move || checker.refusal(host, port))
            })
            .collect();
        // A panic in a check (none is expected) is no answer either.
        checks.into_iter().find_map(|c| c.join().ok().flatten())
    })
}

/// `host` and `port` of one of `bootstrap.servers` (`host:port`, `[v6]:port`, with or without a
/// `proto://` prefix, as librdkafka reads them); the port defaults to librdkafka's 9092.
fn server(entry: &str) -> Option<(&str, u16)> {
    let entry = entry.trim();
    let entry = entry.split_once("://").map_or(entry, |(_, rest)| rest);
    if entry.is_empty() {
        return None;
    }
    match entry.rsplit_once(':') {
        // An IPv6 address without brackets or port (`::1`) has colons and no port.
        Some((host, port)) if !host.contains(':') || host.ends_with(']') => Some((host, port.parse().ok()?)),
        _ => Some((entry, 9092)),
    }
}

/// The client's TLS settings, as OpenSSL needs them to verify a broker.
struct Checker {
    context: SslContext,
    /// `ssl.endpoint.identification.algorithm=https` (librdkafka's default, as Java's).
    check_host: bool,
}

impl Checker {
    /// `None` when the client does not use TLS, does not verify certificates, or its settings
    /// cannot be reproduced here (they are then librdkafka's to apply, and to refuse).
    fn new(config: &ClientConfig) -> Option<Checker> {
        let get = |key: &str| config.get(key).map(str::trim).filter(|v| !v.is_empty());
        let protocol = get("security.protocol").unwrap_or("plaintext");
        if !protocol.eq_ignore_ascii_case("ssl") && !protocol.eq_ignore_ascii_case("sasl_ssl") {
            return None;
        }
        if get("enable.ssl.certificate.verification").is_some_and(|v| v.eq_ignore_ascii_case("false")) {
            return None;
        }
        // An engine or a provider can verify differently from the OpenSSL linked here.
        if ["ssl.engine.location", "ssl.engine.id", "ssl.providers"].iter().any(|k| get(k).is_some()) {
            return None;
        }
        let mut b = SslContextBuilder::new(SslMethod::tls_client()).ok()?;
        b.set_verify(SslVerifyMode::PEER);
        let location = get("ssl.ca.location").filter(|l| *l != "probe");
        if let Some(location) = location {
            load_ca_path(&mut b, Path::new(location))?;
        }
        let pem = get("ssl.ca.pem");
        if let Some(pem) = pem {
            for cert in X509::stack_from_pem(pem.as_bytes()).ok()? {
                b.cert_store_mut().add_cert(cert).ok()?;
            }
        }
        if location.is_none() && pem.is_none() {
            let probed =
                CA_PROBE_PATHS.iter().any(|p| Path::new(p).exists() && load_ca_path(&mut b, Path::new(p)).is_some());
            if !probed {
                b.set_default_verify_paths().ok()?;
            }
        }
        if let Some(crl) = get("ssl.crl.location") {
            b.load_verify_locations(Some(Path::new(crl)), None).ok()?;
            b.cert_store_mut().set_flags(X509VerifyFlags::CRL_CHECK).ok()?;
        }
        let check_host = !get("ssl.endpoint.identification.algorithm").is_some_and(|a| a.eq_ignore_ascii_case("none"));
        Some(Checker { context: b.build(), check_host })
    }

    /// What a handshake with `host:port` says of its certificate (see [`refusal`]).
    fn refusal(&self, host: &str, port: u16) -> Option<String> {
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        // A name that does not resolve and a broker that does not answer are not answers.
        let stream = (bare, port)
            .to_socket_addrs()
            .ok()?
            .find_map(|addr| TcpStream::connect_timeout(&addr, HANDSHAKE_TIMEOUT).ok())?;
        stream.set_read_timeout(Some(HANDSHAKE_TIMEOUT)).ok()?;
        stream.set_write_timeout(Some(HANDSHAKE_TIMEOUT)).ok()?;
        let mut ssl = Ssl::new(&self.context).ok()?;
        let ip = bare.parse::<IpAddr>().ok();
        // As librdkafka: a name goes in SNI, and the certificate must carry the name (or address)
        // the broker was reached at, the port left out.
        if ip.is_none() {
            ssl.set_hostname(bare).ok()?;
        }
        if self.check_host {
            match ip {
                Some(ip) => ssl.param_mut().set_ip(ip).ok()?,
                None => ssl.param_mut().set_host(bare).ok()?,
            }
        }
        match ssl.connect(stream) {
            Ok(mut tls) => {
                let _ = tls.shutdown();
                None
            }
            Err(HandshakeError::Failure(mid)) => verdict(mid.ssl().verify_result(), &format!("{host}:{port}")),
            Err(_) => None,
        }
    }
}

/// Loads the CAs of a file or a directory (of hashed names, as `c_rehash` makes), as librdkafka
/// does with `ssl.ca.location`.
fn load_ca_path(b: &mut SslContextBuilder, path: &Path) -> Option<()> {
    let r = if path.is_dir() {
        b.load_verify_locations(None, Some(path))
    } else {
        b.load_verify_locations(Some(path), None)
    };
    r.ok()
}

/// The refusal for a verification result, `None` for a certificate that verified (the handshake
/// then failed for another reason).
fn verdict(result: X509VerifyResult, server: &str) -> Option<String> {
    if result == X509VerifyResult::OK {
        return None;
    }
    let why = result.error_string();
    Some(match result.as_raw() {
        HOSTNAME_MISMATCH | IP_ADDRESS_MISMATCH => format!(
            "the broker's TLS certificate does not name the host it was reached at ({server}: {why}); connect by a \
             name the certificate carries (bootstrap.servers, and the brokers' advertised.listeners), fix the \
             certificate, or set ssl.endpoint.identification.algorithm= (empty) to turn host name checks off"
        ),
        CERT_NOT_YET_VALID | CERT_HAS_EXPIRED => format!(
            "the broker's TLS certificate is outside its validity period ({server}: {why}); renew the broker's \
             certificate, or check this machine's clock"
        ),
        _ => format!(
            "{NOT_TRUSTED} ({server}: {why}); set ssl.truststore.location (PEM or PKCS12) or \
             ssl.truststore.certificates to the CA that signed it, or fix the broker's certificate chain"
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::fake::{self, Issued};
    use super::*;

    /// A TLS client of `servers`, trusting `ca`, with `extra` settings (librdkafka's names).
    fn client(servers: &str, ca: &Issued, extra: &[(&str, &str)]) -> (ClientConfig, String) {
        let mut c = ClientConfig::new();
        c.set("security.protocol", "SSL").set("ssl.ca.pem", ca.pem());
        for (k, v) in extra {
            c.set(*k, *v);
        }
        (c, servers.to_string())
    }

    fn check((config, servers): (ClientConfig, String)) -> Option<String> {
        refusal(&config, &servers)
    }

    #[test]
    fn certificates_that_verify_or_cannot_be_checked_are_no_refusal() {
        let ca = fake::ca("pgoutbox test CA");
        let other = fake::ca("another CA");
        let named = fake::serve(&fake::broker(&ca, "IP:127.0.0.1", -1..30)).to_string();
        let elsewhere = fake::serve(&fake::broker(&ca, "DNS:elsewhere.example", -1..30)).to_string();
        assert_eq!(check(client(&named, &ca, &[])), None, "a certificate of a trusted CA naming the host");
        let none = [("ssl.endpoint.identification.algorithm", "none")];
        assert_eq!(check(client(&elsewhere, &ca, &none)), None, "host name checks off");
        let off = [("enable.ssl.certificate.verification", "false")];
        assert_eq!(check(client(&named, &other, &off)), None, "verification off");
        assert_eq!(check(client(&named, &other, &[("security.protocol", "SASL_PLAINTEXT")])), None, "no TLS");
        let engine = [("ssl.engine.location", "/nonexistent/engine.so")];
        assert_eq!(check(client(&named, &other, &engine)), None, "an engine verifies its own way");
        // Not reachable, or not TLS: librdkafka's to report.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string();
        assert_eq!(check(client(&closed, &other, &[])), None, "a closed port");
        let plain = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let plain_addr = plain.local_addr().unwrap().to_string();
        std::thread::spawn(move || {
            for s in plain.incoming().flatten() {
                drop(s);
            }
        });
        assert_eq!(check(client(&plain_addr, &other, &[])), None, "a listener without TLS");
    }

    #[test]
    fn each_refusal_names_its_fix_and_the_server() {
        let ca = fake::ca("pgoutbox test CA");
        let other = fake::ca("another CA");
        let named = fake::serve(&fake::broker(&ca, "IP:127.0.0.1", -1..30)).to_string();
        let elsewhere = fake::serve(&fake::broker(&ca, "DNS:elsewhere.example", -1..30)).to_string();
        let expired = fake::serve(&fake::broker(&ca, "IP:127.0.0.1", -30..-1)).to_string();

        let r = check(client(&named, &other, &[])).expect("an untrusted CA");
        assert!(r.starts_with(NOT_TRUSTED) && r.contains("ssl.truststore.location") && r.contains(&named), "{r}");
        let r = check(client(&elsewhere, &ca, &[])).expect("another host's certificate");
        assert!(r.contains("does not name the host") && r.contains("ssl.endpoint.identification.algorithm="), "{r}");
        assert!(r.contains(&elsewhere) && !r.contains(NOT_TRUSTED), "{r}");
        let r = check(client(&expired, &ca, &[])).expect("an expired certificate");
        assert!(r.contains("validity period") && r.contains("renew"), "{r}");

        // A CA file, as ssl.truststore.location (PEM) becomes ssl.ca.location.
        let dir = std::env::temp_dir().join(format!("pgoutbox-ca-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("other-ca.pem");
        std::fs::write(&file, other.pem()).unwrap();
        let mut config = ClientConfig::new();
        config.set("security.protocol", "SASL_SSL").set("ssl.ca.location", file.to_string_lossy());
        assert!(refusal(&config, &named).is_some_and(|r| r.starts_with(NOT_TRUSTED)));
        std::fs::write(&file, ca.pem()).unwrap();
        assert_eq!(refusal(&config, &named), None);
        std::fs::remove_dir_all(&dir).unwrap();

        // Several servers: the first refused one in their order, whichever answers first.
        let r = check(client(&format!("{named},{elsewhere},{expired}"), &ca, &[])).expect("two refused");
        assert!(r.contains(&elsewhere), "{r}");
    }

    #[test]
    fn bootstrap_entries_read_as_librdkafka_reads_them() {
        assert_eq!(server("127.0.0.1:9093"), Some(("127.0.0.1", 9093)));
        assert_eq!(server(" SSL://broker-1.example:9093 "), Some(("broker-1.example", 9093)));
        assert_eq!(server("broker-1.example"), Some(("broker-1.example", 9092)));
        assert_eq!(server("[::1]:9093"), Some(("[::1]", 9093)));
        assert_eq!(server("::1"), Some(("::1", 9092)));
        assert_eq!(server(""), None);
        assert_eq!(server("broker:port"), None);
    }
}

/// Brokers for the tests: TLS listeners on loopback presenting certificates made for the test
/// (a handshake and nothing of Kafka), and the CAs that signed them.
#[cfg(test)]
pub(super) mod fake {
    use std::io::Read;
    use std::net::{SocketAddr, TcpListener};
    use std::ops::Range;

    use openssl::asn1::Asn1Time;
    use openssl::bn::{BigNum, MsbOption};
    use openssl::ec::{EcGroup, EcKey};
    use openssl::hash::MessageDigest;
    use openssl::nid::Nid;
    use openssl::pkey::{PKey, Private};
    use openssl::ssl::{SslAcceptor, SslMethod};
    use openssl::x509::extension::{BasicConstraints, ExtendedKeyUsage, KeyUsage, SubjectAlternativeName};
    use openssl::x509::{X509NameBuilder, X509};

    /// A certificate and its key.
    pub struct Issued {
        pub cert: X509,
        pub key: PKey<Private>,
    }

    impl Issued {
        pub fn pem(&self) -> String {
            String::from_utf8(self.cert.to_pem().expect("PEM of a certificate")).expect("PEM is ASCII")
        }
    }

    /// A CA named `name`, valid from yesterday for a month.
    pub fn ca(name: &str) -> Issued {
        issue(name, None, None, -1..30)
    }

    /// A broker's certificate `ca` signed, naming `san` (`IP:127.0.0.1`, `DNS:broker.example`) and
    /// valid over `days` (from today).
    pub fn broker(ca: &Issued, san: &str, days: Range<i64>) -> Issued {
        issue("broker", Some(ca), Some(san), days)
    }

    fn issue(cn: &str, issuer: Option<&Issued>, san: Option<&str>, days: Range<i64>) -> Issued {
        let group = EcGroup::from_curve_name(Nid::X9_62_PRIME256V1).unwrap();
        let key = PKey::from_ec_key(EcKey::generate(&group).unwrap()).unwrap();
        let mut name = X509NameBuilder::new().unwrap();
        name.append_entry_by_nid(Nid::COMMONNAME, cn).unwrap();
        let name = name.build();
        let mut b = X509::builder().unwrap();
        b.set_version(2).unwrap();
        let mut serial = BigNum::new().unwrap();
        serial.rand(64, MsbOption::MAYBE_ZERO, false).unwrap();
        b.set_serial_number(&serial.to_asn1_integer().unwrap()).unwrap();
        b.set_subject_name(&name).unwrap();
        b.set_issuer_name(issuer.map_or(&name, |i| i.cert.subject_name())).unwrap();
        b.set_pubkey(&key).unwrap();
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
        b.set_not_before(&Asn1Time::from_unix(now + days.start * 86_400).unwrap()).unwrap();
        b.set_not_after(&Asn1Time::from_unix(now + days.end * 86_400).unwrap()).unwrap();
        match san {
            None => {
                b.append_extension(BasicConstraints::new().critical().ca().build().unwrap()).unwrap();
                b.append_extension(KeyUsage::new().critical().key_cert_sign().crl_sign().build().unwrap()).unwrap();
            }
            Some(san) => {
                let ext = {
                    let ctx = b.x509v3_context(issuer.map(|i| &*i.cert), None);
                    let mut names = SubjectAlternativeName::new();
                    match san.split_once(':') {
                        Some(("IP", ip)) => names.ip(ip),
                        Some(("DNS", dns)) => names.dns(dns),
                        _ => panic!("a SAN is IP:... or DNS:..., not {san}"),
                    };
                    names.build(&ctx).unwrap()
                };
                b.append_extension(ext).unwrap();
                b.append_extension(ExtendedKeyUsage::new().server_auth().build().unwrap()).unwrap();
            }
        }
        b.sign(issuer.map_or(&key, |i| &i.key), MessageDigest::sha256()).unwrap();
        Issued { cert: b.build(), key }
    }

    /// Serves TLS handshakes with `cert` on a loopback port, until the test process ends; a
    /// connection is closed at the first byte it sends after the handshake.
    pub fn serve(cert: &Issued) -> SocketAddr {
        let mut a = SslAcceptor::mozilla_intermediate_v5(SslMethod::tls_server()).unwrap();
        a.set_private_key(&cert.key).unwrap();
        a.set_certificate(&cert.cert).unwrap();
        let acceptor = a.build();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let acceptor = acceptor.clone();
                std::thread::spawn(move || {
                    if let Ok(mut tls) = acceptor.accept(stream) {
                        let _ = tls.read(&mut [0u8; 1]);
                    }
                });
            }
        });
        addr
    }
}
