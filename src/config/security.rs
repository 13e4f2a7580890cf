//! Kafka client security as Java clients (and so Connect users) write it, translated into
//! librdkafka's settings: `security.protocol`, `sasl.mechanism`, `sasl.jaas.config` (parsed as JAAS,
//! see [`jaas`]), Java truststores and keystores (PEM or PKCS12; JKS is refused with the `keytool`
//! command that converts it) and the PEM-in-config keys.
//!
//! As in the Java client, SASL keys only count under a `SASL_*` protocol and SSL keys only under
//! `SSL`/`SASL_SSL`; the others are reported as ignored. librdkafka's own names (`sasl.username`,
//! `ssl.ca.location`, ...) pass through unchanged for users who write those.
//!
//! Secrets (passwords, private keys, the JAAS text) never appear in an error: errors name the key.

use std::collections::BTreeMap;

use super::{invalid, ConfigError, IgnoredKey};

pub mod jaas;

/// librdkafka settings for one client. `Debug` hides secret values.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ClientSettings(pub Vec<(String, String)>);

impl ClientSettings {
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// Sets `key`, replacing an earlier value.
    pub fn set(&mut self, key: &str, value: impl Into<String>) {
        self.0.retain(|(k, _)| k != key);
        self.0.push((key.to_string(), value.into()));
    }
}

impl std::fmt::Debug for ClientSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.0.iter().map(|(k, v)| (k, if is_secret(k) { "<redacted>" } else { v }))).finish()
    }
}

/// Whether a setting holds a secret (a password, a private key, a token, a JAAS login with its
/// credentials), decided by what the key holds, under any prefix (`producer.override.`,
/// `admin.`, `listeners.https.`, `transforms.x.` ...): its last names say that. Keys that hold a
/// path, a URL, a type or a number (`ssl.keystore.location`, `...token.endpoint.url`) are not
/// secrets, whatever words they contain.
pub fn is_secret(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    let last = k.rsplit('.').next().unwrap_or(&k);
    const NOT_SECRET: &[&str] =
        &["location", "url", "uri", "type", "algorithm", "mechanism", "ms", "class", "path", "file", "filename"];
    if NOT_SECRET.contains(&last) {
        return false;
    }
    const SECRET_WORDS: &[&str] = &["password", "passwd", "secret", "passphrase", "apikey", "jaas"];
    SECRET_WORDS.iter().any(|w| last.contains(w))
        || k.ends_with("jaas.config")
        // PEM private keys: Java's ssl.keystore.key, librdkafka's ssl.key.pem.
        || k.ends_with("keystore.key")
        || k.ends_with("key.pem")
        || k.ends_with("sasl.oauthbearer.config")
        || last == "token"
        || k.ends_with("access.token")
        // A schema registry's `user:password` (basic.auth.user.info, schema.registry.basic.auth.user.info).
        || k.ends_with("user.info")
}

/// Whether a Java client key is a security setting (one that every client of the cluster needs).
pub fn is_security_key(name: &str) -> bool {
    name.starts_with("security.") || name.starts_with("sasl.") || name.starts_with("ssl.")
}

/// One client's security keys by Java name, each with the full key it came from (for errors).
pub type Keys = BTreeMap<String, (String, String)>;

/// The result of translating one client's keys.
#[derive(Debug, Default)]
pub struct Translated {
    pub settings: ClientSettings,
    pub ignored: Vec<IgnoredKey>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Protocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl Protocol {
    fn tls(self) -> bool {
        matches!(self, Protocol::Ssl | Protocol::SaslSsl)
    }
    fn sasl(self) -> bool {
        matches!(self, Protocol::SaslPlaintext | Protocol::SaslSsl)
    }
    fn name(self) -> &'static str {
        match self {
            Protocol::Plaintext => "PLAINTEXT",
            Protocol::Ssl => "SSL",
            Protocol::SaslPlaintext => "SASL_PLAINTEXT",
            Protocol::SaslSsl => "SASL_SSL",
        }
    }
}

/// Java keys with no librdkafka counterpart that change nothing librdkafka does, and why.
const IGNORED: &[(&str, &str)] = &[
    ("security.providers", "Java security providers do not apply; librdkafka uses OpenSSL"),
    ("ssl.protocol", "librdkafka negotiates the highest TLS version OpenSSL and the broker share"),
    ("ssl.enabled.protocols", "librdkafka negotiates the highest TLS version OpenSSL and the broker share"),
    ("ssl.cipher.suites", "Java cipher suite names; librdkafka uses OpenSSL's defaults"),
    ("ssl.keymanager.algorithm", "a Java KeyManagerFactory setting"),
    ("ssl.trustmanager.algorithm", "a Java TrustManagerFactory setting"),
    ("ssl.secure.random.implementation", "a Java SecureRandom setting"),
    ("ssl.provider", "a Java security provider setting"),
    ("sasl.login.refresh.window.factor", "librdkafka refreshes tokens on its own schedule"),
    ("sasl.login.refresh.window.jitter", "librdkafka refreshes tokens on its own schedule"),
    ("sasl.login.refresh.min.period.seconds", "librdkafka refreshes tokens on its own schedule"),
    ("sasl.login.refresh.buffer.seconds", "librdkafka refreshes tokens on its own schedule"),
    ("sasl.login.retry.backoff.ms", "librdkafka retries token requests on its own schedule"),
    ("sasl.login.retry.backoff.max.ms", "librdkafka retries token requests on its own schedule"),
    ("sasl.login.connect.timeout.ms", "librdkafka's token request uses its own timeouts"),
    ("sasl.login.read.timeout.ms", "librdkafka's token request uses its own timeouts"),
    ("sasl.oauthbearer.scope.claim.name", "a broker-side (token validation) setting"),
    ("sasl.oauthbearer.sub.claim.name", "a broker-side (token validation) setting"),
    ("sasl.oauthbearer.expected.audience", "a broker-side (token validation) setting"),
    ("sasl.oauthbearer.expected.issuer", "a broker-side (token validation) setting"),
    ("sasl.oauthbearer.jwks.endpoint.url", "a broker-side (token validation) setting"),
    ("sasl.oauthbearer.jwks.endpoint.refresh.ms", "a broker-side (token validation) setting"),
    ("sasl.oauthbearer.clock.skew.seconds", "a broker-side (token validation) setting"),
    ("sasl.oauthbearer.header.urlencode", "librdkafka sends the client credentials form-encoded"),
    ("sasl.client.callback.handler.class", "a Java class; pgoutbox's SASL mechanisms need no callback handler"),
    ("sasl.kerberos.service.name", "GSSAPI (Kerberos) is not supported"),
];

/// The Java classes of OAUTHBEARER's client-credentials login handler (the second is the pre-3.4 name).
const OAUTH_HANDLERS: &[&str] = &[
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler",
];

const PLAIN_MODULE: &str = "org.apache.kafka.common.security.plain.PlainLoginModule";
const SCRAM_MODULE: &str = "org.apache.kafka.common.security.scram.ScramLoginModule";
const OAUTH_MODULE: &str = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule";

/// The full key `name` came from, or, for a key not given, the one it would be given as (with the
/// prefix of the keys that are), so an error about a missing key names where to add it.
fn full_key(keys: &Keys, name: &str) -> String {
    if let Some((full, _)) = keys.get(name) {
        return full.clone();
    }
    let prefix = keys.iter().next().and_then(|(n, (f, _))| f.strip_suffix(n.as_str())).unwrap_or("");
    format!("{prefix}{name}")
}

/// Translates one client's Java security keys.
pub fn translate(keys: &Keys) -> Result<Translated, ConfigError> {
    let mut t = Translated::default();
    let key_of = |name: &str| full_key(keys, name);
    let value = |name: &str| keys.get(name).map(|(_, v)| v.trim()).filter(|v| !v.is_empty());
    let protocol = match value("security.protocol") {
        None => Protocol::Plaintext,
        Some(p) => match p.to_ascii_uppercase().as_str() {
            "PLAINTEXT" => Protocol::Plaintext,
            "SSL" => Protocol::Ssl,
            "SASL_PLAINTEXT" => Protocol::SaslPlaintext,
            "SASL_SSL" => Protocol::SaslSsl,
            _ => {
                return Err(invalid(
                    &key_of("security.protocol"),
                    "is not one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL",
                ))
            }
        },
    };
    t.settings.set("security.protocol", protocol.name());
    let mut handled: Vec<&str> = vec!["security.protocol"];
    if protocol.sasl() {
        sasl(keys, &mut t, &mut handled)?;
    }
    if protocol.tls() {
        tls(keys, &mut t, &mut handled)?;
    }
    for (name, (full, v)) in keys {
        if handled.contains(&name.as_str()) {
            continue;
        }
        if let Some((_, why)) = IGNORED.iter().find(|(k, _)| k == name) {
            t.ignored.push(IgnoredKey { key: full.clone(), reason: why.to_string() });
        } else if (name.starts_with("sasl.") && !protocol.sasl()) || (name.starts_with("ssl.") && !protocol.tls()) {
            t.ignored.push(IgnoredKey {
                key: full.clone(),
                reason: format!("security.protocol={} does not use it (as in the Java client)", protocol.name()),
            });
        } else if name.starts_with("security.") {
            t.ignored.push(IgnoredKey { key: full.clone(), reason: "not a Kafka client setting".into() });
        } else {
            // librdkafka's own names, for users who write those.
            t.settings.set(name, v.trim());
        }
    }
    Ok(t)
}

fn sasl<'k>(keys: &'k Keys, t: &mut Translated, handled: &mut Vec<&'k str>) -> Result<(), ConfigError> {
    let full = |name: &str| full_key(keys, name);
    let value = |name: &str| keys.get(name).map(|(_, v)| v.trim()).filter(|v| !v.is_empty());
    handled.extend(["sasl.mechanism", "sasl.jaas.config", "sasl.login.callback.handler.class"]);
    let login = match value("sasl.jaas.config") {
        Some(text) => Some(jaas::parse(text).map_err(|e| invalid(&full("sasl.jaas.config"), e.to_string()))?),
        None => None,
    };
    let mechanism = match (value("sasl.mechanism"), &login) {
        (Some(m), _) => m.to_ascii_uppercase(),
        (None, Some(l)) if l.module == PLAIN_MODULE => "PLAIN".to_string(),
        (None, Some(l)) if l.module == OAUTH_MODULE => "OAUTHBEARER".to_string(),
        (None, _) => {
            return Err(invalid(
                &full("sasl.mechanism"),
                "not set, and the Java default GSSAPI (Kerberos) is not supported; set PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER",
            ))
        }
    };
    let expected_module = login_module(&mechanism).map_err(|why| invalid(&full("sasl.mechanism"), why))?;
    t.settings.set("sasl.mechanism", mechanism.clone());
    let Some(login) = login else {
        // librdkafka's own sasl.username / sasl.password (or OAUTHBEARER settings) may follow.
        return Ok(());
    };
    if login.module != expected_module {
        return Err(invalid(
            &full("sasl.jaas.config"),
            format!("sasl.mechanism={mechanism} needs the login module {expected_module}, not {}", login.module),
        ));
    }
    if mechanism == "OAUTHBEARER" {
        return oauthbearer(keys, &login, t, handled);
    }
    let option = |name: &str| {
        login.options.get(name).cloned().ok_or_else(|| {
            invalid(&full("sasl.jaas.config"), format!("{} has no `{name}` option; add {name}=\"...\"", login.module))
        })
    };
    t.settings.set("sasl.username", option("username")?);
    t.settings.set("sasl.password", option("password")?);
    Ok(())
}

/// The JAAS login module a mechanism needs, or why the mechanism cannot be used.
fn login_module(mechanism: &str) -> Result<&'static str, String> {
    match mechanism {
        "PLAIN" => Ok(PLAIN_MODULE),
        "SCRAM-SHA-256" | "SCRAM-SHA-512" => Ok(SCRAM_MODULE),
        "OAUTHBEARER" => Ok(OAUTH_MODULE),
        "GSSAPI" => Err("GSSAPI (Kerberos) is not supported by this build; use SCRAM-SHA-512, PLAIN over SASL_SSL, or OAUTHBEARER".into()),
        "AWS_MSK_IAM" => Err("AWS_MSK_IAM needs the AWS Java library, which librdkafka cannot load; enable SASL/SCRAM on the MSK cluster and use SCRAM-SHA-512, or OAUTHBEARER".into()),
        _ => Err("is not one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER".into()),
    }
}

fn oauthbearer<'k>(
    keys: &'k Keys,
    login: &jaas::Login,
    t: &mut Translated,
    handled: &mut Vec<&'k str>,
) -> Result<(), ConfigError> {
    let full = |name: &str| full_key(keys, name);
    let value = |name: &str| keys.get(name).map(|(_, v)| v.trim().to_string()).filter(|v| !v.is_empty());
    handled.extend([
        "sasl.oauthbearer.token.endpoint.url",
        "sasl.oauthbearer.client.credentials.client.id",
        "sasl.oauthbearer.client.credentials.client.secret",
        "sasl.oauthbearer.scope",
    ]);
    let opt = |name: &str| login.options.get(name).cloned();
    let extensions: Vec<String> =
        login.options.iter().filter_map(|(k, v)| k.strip_prefix("extension_").map(|e| format!("{e}={v}"))).collect();
    if !extensions.is_empty() {
        t.settings.set("sasl.oauthbearer.extensions", extensions.join(","));
    }
    if let Some(url) = value("sasl.oauthbearer.token.endpoint.url") {
        return oidc(keys, login, t, url);
    }
    // The Java client's unsecured tokens (development clusters): librdkafka has the same.
    if let Some(sub) = opt("unsecuredLoginStringClaim_sub") {
        let mut config = format!("principal={sub}");
        if let Some(scope) = opt("unsecuredLoginListClaim_scope").or_else(|| opt("unsecuredLoginStringClaim_scope")) {
            config.push_str(&format!(" scope={scope}"));
        }
        t.settings.set("enable.sasl.oauthbearer.unsecure.jwt", "true");
        t.settings.set("sasl.oauthbearer.config", config);
        return Ok(());
    }
    Err(invalid(
        &full("sasl.oauthbearer.token.endpoint.url"),
        "OAUTHBEARER needs a token endpoint (sasl.oauthbearer.token.endpoint.url with clientId and clientSecret in sasl.jaas.config) or, for development, unsecuredLoginStringClaim_sub",
    ))
}

/// OAUTHBEARER with a token endpoint: the client-credentials flow, librdkafka's `oidc` method.
fn oidc(keys: &Keys, login: &jaas::Login, t: &mut Translated, url: String) -> Result<(), ConfigError> {
    let full = |name: &str| full_key(keys, name);
    let value = |name: &str| keys.get(name).map(|(_, v)| v.trim().to_string()).filter(|v| !v.is_empty());
    let opt = |name: &str| login.options.get(name).cloned();
    if let Some(h) = value("sasl.login.callback.handler.class") {
        if !OAUTH_HANDLERS.contains(&h.as_str()) {
            return Err(invalid(
                &full("sasl.login.callback.handler.class"),
                format!("`{h}` is not supported; use {}", OAUTH_HANDLERS[0]),
            ));
        }
    }
    let id = value("sasl.oauthbearer.client.credentials.client.id").or_else(|| opt("clientId"));
    let secret = value("sasl.oauthbearer.client.credentials.client.secret").or_else(|| opt("clientSecret"));
    let (Some(id), Some(secret)) = (id, secret) else {
        return Err(invalid(
            &full("sasl.jaas.config"),
            "OAUTHBEARER with a token endpoint needs clientId=\"...\" and clientSecret=\"...\" in the JAAS config (or sasl.oauthbearer.client.credentials.client.id / .client.secret)",
        ));
    };
    if !librdkafka_has("oidc") {
        return Err(invalid(
            &full("sasl.oauthbearer.token.endpoint.url"),
            "OAUTHBEARER with a token endpoint needs librdkafka built with libcurl, and this build has none; \
             rebuild with scripts/build-release.sh after scripts/install.sh (it installs what librdkafka's build \
             probes for), or use SCRAM-SHA-512",
        ));
    }
    t.settings.set("sasl.oauthbearer.method", "oidc");
    t.settings.set("sasl.oauthbearer.token.endpoint.url", url);
    t.settings.set("sasl.oauthbearer.client.id", id);
    t.settings.set("sasl.oauthbearer.client.secret", secret);
    if let Some(scope) = value("sasl.oauthbearer.scope").or_else(|| opt("scope")) {
        t.settings.set("sasl.oauthbearer.scope", scope);
    }
    Ok(())
}

/// Whether the linked librdkafka has `feature` among its `builtin.features` (e.g. `oidc`, which
/// needs libcurl at librdkafka's build).
pub fn librdkafka_has(feature: &str) -> bool {
    rdkafka::ClientConfig::new()
        .create_native_config()
        .and_then(|c| c.get("builtin.features"))
        .is_ok_and(|f| f.split(',').any(|x| x == feature))
}

/// What a store file turned out to be.
#[derive(Debug, PartialEq, Eq)]
enum StoreFormat {
    Pem,
    Pkcs12,
}

/// The format of a store file, from `type` and its bytes. Java's default type (JKS) also reads
/// PKCS12 files (`keystore.type.compat`), so an absent or JKS type is decided by the content.
fn store_format(path_key: &str, declared: Option<&str>, bytes: &[u8]) -> Result<StoreFormat, ConfigError> {
    const JKS_MAGIC: [u8; 4] = [0xFE, 0xED, 0xFE, 0xED];
    const JCEKS_MAGIC: [u8; 4] = [0xCE, 0xCE, 0xCE, 0xCE];
    if bytes.starts_with(&JKS_MAGIC) || bytes.starts_with(&JCEKS_MAGIC) {
        let kind = if bytes.starts_with(&JKS_MAGIC) { "JKS" } else { "JCEKS" };
        let type_key = path_key.replace(".location", ".type");
        let password_key = path_key.replace(".location", ".password");
        return Err(invalid(
            path_key,
            format!(
                "the file is a {kind} store, which only Java reads; convert it to PKCS12 with \
                 `keytool -importkeystore -srckeystore STORE -srcstoretype {kind} -destkeystore STORE.p12 -deststoretype PKCS12` \
                 and set {path_key} to STORE.p12, {type_key}=PKCS12 (the password stays {password_key})"
            ),
        ));
    }
    let looks_pem = String::from_utf8_lossy(&bytes[..bytes.len().min(4096)]).contains("-----BEGIN");
    match declared.map(str::to_ascii_uppercase).as_deref() {
        Some("PEM") if looks_pem => Ok(StoreFormat::Pem),
        Some("PEM") => Err(invalid(path_key, "the file is not PEM (no -----BEGIN line), as the store type says")),
        Some("PKCS12") if !looks_pem => Ok(StoreFormat::Pkcs12),
        Some("PKCS12") => Err(invalid(path_key, "the file is PEM, not PKCS12; set the store type to PEM")),
        None | Some("JKS") if looks_pem => Ok(StoreFormat::Pem),
        None | Some("JKS") => Ok(StoreFormat::Pkcs12),
        Some(_) => Err(invalid(
            &path_key.replace(".location", ".type"),
            "is not supported; use PKCS12 or PEM (convert a JKS store with keytool -importkeystore)",
        )),
    }
}

fn read_store(key: &str, path: &str) -> Result<Vec<u8>, ConfigError> {
    std::fs::read(path).map_err(|e| invalid(key, format!("cannot read the file it names: {e}")))
}

fn tls<'k>(keys: &'k Keys, t: &mut Translated, handled: &mut Vec<&'k str>) -> Result<(), ConfigError> {
    let full = |name: &str| full_key(keys, name);
    let raw = |name: &str| keys.get(name).map(|(_, v)| v.as_str());
    let value = |name: &str| raw(name).map(str::trim).filter(|v| !v.is_empty());
    handled.extend([
        "ssl.endpoint.identification.algorithm",
        "ssl.truststore.location",
        "ssl.truststore.type",
        "ssl.truststore.password",
        "ssl.truststore.certificates",
        "ssl.keystore.location",
        "ssl.keystore.type",
        "ssl.keystore.password",
        "ssl.keystore.certificate.chain",
        "ssl.keystore.key",
        "ssl.key.password",
        "ssl.engine.factory.class",
    ]);
    if value("ssl.engine.factory.class").is_some() {
        return Err(invalid(
            &full("ssl.engine.factory.class"),
            "a Java SSL engine factory cannot be loaded; use the ssl.truststore.* and ssl.keystore.* keys",
        ));
    }
    // Java's default is `https` (host name checks on); an empty value turns them off.
    let identification = match raw("ssl.endpoint.identification.algorithm").map(str::trim) {
        None => "https",
        Some("") => "none",
        Some(v) if v.eq_ignore_ascii_case("https") => "https",
        Some(_) => {
            return Err(invalid(
                &full("ssl.endpoint.identification.algorithm"),
                "is not supported; use https (check the broker's host name) or an empty value (do not)",
            ))
        }
    };
    t.settings.set("ssl.endpoint.identification.algorithm", identification);

    truststore(keys, t)?;
    keystore(keys, t)
}

/// A key's trimmed value, `None` when absent or empty.
fn value_of<'k>(keys: &'k Keys, name: &str) -> Option<&'k str> {
    keys.get(name).map(|(_, v)| v.trim()).filter(|v| !v.is_empty())
}

/// Whom the client trusts: `ssl.truststore.*` (PEM in the config, a PEM file or PKCS12), else the
/// system's CAs.
fn truststore(keys: &Keys, t: &mut Translated) -> Result<(), ConfigError> {
    let value = |name: &str| value_of(keys, name);
    if let Some(pem) = value("ssl.truststore.certificates") {
        t.settings.set("ssl.ca.pem", pem);
    } else if let Some(path) = value("ssl.truststore.location") {
        let key = full_key(keys, "ssl.truststore.location");
        let bytes = read_store(&key, path)?;
        match store_format(&key, value("ssl.truststore.type"), &bytes)? {
            StoreFormat::Pem => t.settings.set("ssl.ca.location", path),
            StoreFormat::Pkcs12 => {
                let password = value("ssl.truststore.password").unwrap_or("");
                let pem = pkcs12_certificates(&bytes, password).map_err(|why| {
                    invalid(&key, format!("cannot read the file as PKCS12: {why} (check ssl.truststore.password)"))
                })?;
                t.settings.set("ssl.ca.pem", pem);
            }
        }
    }
    // No truststore: Java trusts the JVM's public CAs. The vendored OpenSSL's own default path is
    // not where the system keeps them, so ask librdkafka to probe the usual places
    // (/etc/ssl/certs, ...), unless librdkafka's own keys say where they are.
    if t.settings.get("ssl.ca.location").is_none()
        && t.settings.get("ssl.ca.pem").is_none()
        && !keys.contains_key("ssl.ca.location")
        && !keys.contains_key("ssl.ca.pem")
    {
        t.settings.set("ssl.ca.location", "probe");
    }
    Ok(())
}

/// The client's own certificate, for brokers that require one: `ssl.keystore.*` (PEM in the
/// config, a PEM file or PKCS12).
fn keystore(keys: &Keys, t: &mut Translated) -> Result<(), ConfigError> {
    let value = |name: &str| value_of(keys, name);
    let pem_key = if let Some(chain) = value("ssl.keystore.certificate.chain") {
        let Some(private) = value("ssl.keystore.key") else {
            return Err(invalid(
                &full_key(keys, "ssl.keystore.key"),
                "required with ssl.keystore.certificate.chain: the client's private key (PEM)",
            ));
        };
        t.settings.set("ssl.certificate.pem", chain);
        t.settings.set("ssl.key.pem", private);
        true
    } else if let Some(path) = value("ssl.keystore.location") {
        let key = full_key(keys, "ssl.keystore.location");
        let bytes = read_store(&key, path)?;
        match store_format(&key, value("ssl.keystore.type"), &bytes)? {
            StoreFormat::Pem => {
                t.settings.set("ssl.certificate.location", path);
                t.settings.set("ssl.key.location", path);
                true
            }
            StoreFormat::Pkcs12 => {
                let password = value("ssl.keystore.password").unwrap_or("");
                check_pkcs12_keystore(&bytes, password).map_err(|why| {
                    invalid(
                        &key,
                        format!("cannot read `{path}` as a PKCS12 keystore: {why} (check ssl.keystore.password)"),
                    )
                })?;
                t.settings.set("ssl.keystore.location", path);
                t.settings.set("ssl.keystore.password", password);
                false
            }
        }
    } else {
        false
    };
    // The password of a PEM private key (PKCS12 stores carry their own).
    if let (true, Some(p)) = (pem_key, value("ssl.key.password")) {
        t.settings.set("ssl.key.password", p);
    }
    Ok(())
}

/// The certificates of a PKCS12 truststore, as PEM. A Java truststore holds trusted-certificate
/// entries only; OpenSSL returns them as the `ca` stack.
fn pkcs12_certificates(der: &[u8], password: &str) -> Result<String, String> {
    let p12 = openssl::pkcs12::Pkcs12::from_der(der).map_err(|_| "not a PKCS12 file".to_string())?;
    let parsed =
        p12.parse2(password).map_err(|_| "wrong password, or an encryption OpenSSL does not support".to_string())?;
    let mut pem = String::new();
    for cert in parsed.cert.into_iter().chain(parsed.ca.into_iter().flatten()) {
        let text = cert.to_pem().map_err(|e| e.to_string())?;
        pem.push_str(&String::from_utf8_lossy(&text));
    }
    if pem.is_empty() {
        return Err("it holds no certificates".into());
    }
    Ok(pem)
}

/// A PKCS12 keystore must open with its password and hold a key and its certificate; librdkafka's
/// own error for either would not say which.
fn check_pkcs12_keystore(der: &[u8], password: &str) -> Result<(), String> {
    let p12 = openssl::pkcs12::Pkcs12::from_der(der).map_err(|_| "not a PKCS12 file".to_string())?;
    let parsed =
        p12.parse2(password).map_err(|_| "wrong password, or an encryption OpenSSL does not support".to_string())?;
    match (parsed.pkey, parsed.cert) {
        (Some(_), Some(_)) => Ok(()),
        _ => Err("it holds no private key with its certificate (is it a truststore?)".into()),
    }
}

#[cfg(test)]
mod tests;
