//! The schema-registry converters: Confluent's `io.confluent.connect.avro.AvroConverter`,
//! `io.confluent.connect.protobuf.ProtobufConverter` and `io.confluent.connect.json.JsonSchemaConverter`,
//! and Apicurio 2.x's `io.apicurio.registry.utils.converter.AvroConverter` and `ExtJsonConverter`. A
//! record's Connect schema is mapped to Avro (`avro`), Protobuf (`protobuf`), JSON Schema
//! (`json_schema`) or JsonConverter's schema (`json`), registered (or looked up) once per subject
//! and schema, and the record written as the converter's wire format: Confluent's magic byte and
//! 4-byte id before the body (Protobuf's message indexes first), or Apicurio's ids in
//! `apicurio.{key,value}.globalId` headers (its default), or its 8-byte globalId (or 4-byte id with
//! `as-confluent`) before the body, or ExtJsonConverter's `{"schemaId":…,"payload":…}`.
//!
//! Registry calls are off the per-record path: the id is cached per (topic, schema), so a registry
//! is asked once per new schema. That call blocks the caller (the relay's single-threaded runtime
//! included) for at most [`CALL_TIMEOUT`] per registry URL. A registry that cannot be reached is a
//! [`RegistryError::Unavailable`], which stops the session without moving the position (the relay
//! retries); a registry that answers no (incompatible schema, authentication refused, schema not
//! found with auto-registration off) is [`RegistryError::Refused`], which stops the relay naming the
//! subject and the registry's reason.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;

use super::config::{ConfigError, Reader};
use super::{avro, json, json_schema, protobuf};
use super::{ConvertError, Schema, Value};

pub const CONFLUENT_AVRO: &str = "io.confluent.connect.avro.AvroConverter";
pub const CONFLUENT_PROTOBUF: &str = "io.confluent.connect.protobuf.ProtobufConverter";
pub const CONFLUENT_JSON_SCHEMA: &str = "io.confluent.connect.json.JsonSchemaConverter";
pub const APICURIO_AVRO: &str = "io.apicurio.registry.utils.converter.AvroConverter";
pub const APICURIO_EXT_JSON: &str = "io.apicurio.registry.utils.converter.ExtJsonConverter";

/// How long one registry URL may take to answer.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// After a registry did not answer, how long it counts as down (calls fail at once).
const DOWN_FOR: Duration = Duration::from_secs(5);

/// Apicurio's `apicurio.registry.check-period-ms` default: how long its resolver reuses an id
/// resolved by content.
const APICURIO_CHECK_PERIOD: Duration = Duration::from_secs(30);

/// A registry's refusal or absence, as the relay must act on it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// No registry URL answered: retry later from the confirmed position.
    #[error("the schema registry ({urls}) did not answer for subject `{subject}`: {reason}; nothing is published past this record until it answers (pgoutbox retries); check that the registry runs and that {key} names it")]
    Unavailable { urls: String, subject: String, reason: String, key: String },
    /// The registry answered no: stop, naming what to fix.
    #[error("the schema registry refused subject `{subject}`: HTTP {status}: {message}; {fix}")]
    Refused { subject: String, status: u16, message: String, fix: String },
    /// The registry's certificate is not trusted (or names another host): a configuration to fix,
    /// not an outage to wait out.
    #[error("the schema registry at {url} cannot be trusted: {reason}; {fix}")]
    Untrusted { url: String, reason: String, fix: String },
}

impl RegistryError {
    pub fn is_retryable(&self) -> bool {
        matches!(self, RegistryError::Unavailable { .. })
    }
}

/// What the body is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Avro(avro::Options),
    Protobuf,
    JsonSchema(json_schema::Options),
    /// Apicurio's ExtJsonConverter: JsonConverter's schema registered (artifact type KCONNECT) and
    /// `{"schemaId":<globalId>,"payload":<JsonConverter's value without schemas>}`.
    ExtJson,
}

impl Format {
    /// The registry's name for the schema type (Confluent's `schemaType`, Apicurio's artifact type).
    fn schema_type(self) -> &'static str {
        match self {
            Format::Avro(_) => "AVRO",
            Format::Protobuf => "PROTOBUF",
            Format::JsonSchema(_) => "JSON",
            Format::ExtJson => "KCONNECT",
        }
    }

    /// The error of a schema or value this format cannot hold.
    fn error(self, message: String) -> ConvertError {
        match self {
            Format::Avro(_) => ConvertError::Avro(message),
            Format::Protobuf => ConvertError::Protobuf(message),
            Format::JsonSchema(_) | Format::ExtJson => ConvertError::JsonSchema(message),
        }
    }
}

/// Which registry API and wire format.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Flavor {
    /// Confluent's API (or Apicurio's ccompat): magic 0, 4-byte id, the body.
    Confluent { subject: SubjectStrategy, auto_register: bool, use_latest: bool },
    /// Apicurio's v2 API, artifacts named by TopicIdStrategy in group `default` or the one
    /// `apicurio.registry.artifact.group-id` names.
    Apicurio { auto_register: bool, find_latest: bool, headers: bool, id: IdKind, as_confluent: bool, group: String },
}

/// What RecordNameStrategy names a subject after.
enum RecordName {
    /// The Avro record's full name (the struct's), worked out from the Connect schema.
    Avro,
    /// Given by the format: a Protobuf message's full name, a JSON Schema's `title` (`None`: it has
    /// none, and the strategy refuses it).
    Given(Option<String>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SubjectStrategy {
    Topic,
    Record,
    TopicRecord,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IdKind {
    Global,
    Content,
}

/// A credential never shown by `Debug`.
#[derive(Clone, PartialEq, Eq)]
struct Authorization(String);

/// Headers Confluent's client sends with every call under bearer auth, by name.
type BearerHeaders = Vec<(&'static str, String)>;

/// How the converter authenticates to the registry.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Auth {
    /// The same `Authorization` header on every call (basic auth, a static bearer token).
    Header(Authorization),
    /// A bearer token fetched from an OAuth token endpoint (`OAUTHBEARER`).
    OAuth(Arc<oauth::OAuth>),
}

impl std::fmt::Debug for Authorization {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("\"***\"")
    }
}

/// One converter (a key's or a value's) with its registry and its cache of ids.
#[derive(Debug)]
pub struct RegistryConverter {
    class: &'static str,
    is_key: bool,
    /// The key that names the registry, and the converter's prefix, for errors.
    url_key: String,
    prefix: String,
    ssl_prefix: String,
    urls: Vec<Url>,
    /// For `https://` URLs.
    tls: Option<tls::Tls>,
    auth: Option<Auth>,
    /// Confluent's `target-sr-cluster` and `Confluent-Identity-Pool-Id` (`bearer.auth.logical.cluster`,
    /// `bearer.auth.identity.pool.id`), sent with every call.
    bearer_headers: BearerHeaders,
    flavor: Flavor,
    format: Format,
    /// Ids by topic and Connect schema: the registry is asked once per new pair. Nested, so that a
    /// record's lookup borrows its topic and schema instead of cloning them.
    cache: Mutex<HashMap<Arc<str>, HashMap<Schema, i64>>>,
    /// Apicurio: ids by schema content, and when they were resolved.
    by_content: Mutex<HashMap<Schema, (i64, std::time::Instant)>>,
    /// Until when the registry counts as down after it did not answer, and why.
    down: Mutex<Option<(std::time::Instant, RegistryError)>>,
}

impl PartialEq for RegistryConverter {
    fn eq(&self, other: &Self) -> bool {
        self.class == other.class
            && self.is_key == other.is_key
            && self.urls == other.urls
            && self.tls == other.tls
            && self.auth == other.auth
            && self.bearer_headers == other.bearer_headers
            && self.flavor == other.flavor
            && self.format == other.format
    }
}

impl Eq for RegistryConverter {}

/// A registry base URL: `http[s]://host:port/path`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Url {
    tls: bool,
    host: String,
    port: u16,
    /// Without a trailing slash.
    path: String,
}

impl Url {
    fn parse(key: &str, s: &str) -> Result<Url, ConfigError> {
        let s = s.trim();
        if s.contains('@') {
            // Never echo it: it may hold a password.
            return Err(ConfigError::invalid(key, "holds credentials in the URL; set basic.auth.credentials.source=USER_INFO and basic.auth.user.info (or apicurio.auth.username and apicurio.auth.password) instead"));
        }
        let (tls, rest) = match (s.strip_prefix("https://"), s.strip_prefix("http://")) {
            (Some(rest), _) => (true, rest),
            (None, Some(rest)) => (false, rest),
            _ => {
                // The value is not repeated (no config error repeats one).
                return Err(ConfigError::invalid(key, "is not an http:// or https:// URL of a schema registry"));
            }
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], rest[i..].trim_end_matches('/')),
            None => (rest, ""),
        };
        if authority.contains('@') {
            return Err(ConfigError::invalid(key, "holds credentials in the URL; set basic.auth.credentials.source=USER_INFO and basic.auth.user.info instead"));
        }
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(']') || authority.starts_with('[') => {
                (h, p.parse().map_err(|_| ConfigError::invalid(key, "has an invalid port"))?)
            }
            _ => (authority, if tls { 443 } else { 80 }),
        };
        if host.is_empty() {
            return Err(ConfigError::invalid(key, "has no host"));
        }
        Ok(Url { tls, host: host.trim_matches(['[', ']']).to_string(), port, path: path.to_string() })
    }

    fn describe(&self) -> String {
        format!("{}://{}:{}{}", if self.tls { "https" } else { "http" }, self.host, self.port, self.path)
    }
}

/// Whether a class names a schema-registry converter (supported or not).
pub fn is_registry_class(class: &str) -> bool {
    class.starts_with("io.confluent.connect.") || class.starts_with("io.apicurio.registry.")
}

impl RegistryConverter {
    /// `<which>.converter=<class>` and its options under `<which>.converter.`.
    pub fn parse(r: &mut Reader<'_>, which: &str, class: &str) -> Result<RegistryConverter, ConfigError> {
        Self::parse_at(r, &format!("{which}.converter."), which == "key", class)
    }

    /// The converter `class` with its options under `prefix` (a BinaryDataConverter's delegate has
    /// them under `<which>.converter.delegate.converter.type.`).
    pub fn parse_at(
        r: &mut Reader<'_>,
        prefix: &str,
        is_key: bool,
        class: &str,
    ) -> Result<RegistryConverter, ConfigError> {
        let which = if is_key { "key" } else { "value" };
        let key = |k: &str| format!("{prefix}{k}");
        let mut bearer_headers = Vec::new();
        let (class, url_key, urls, auth, flavor) = match class {
            CONFLUENT_AVRO | CONFLUENT_PROTOBUF | CONFLUENT_JSON_SCHEMA => {
                let url_key = key("schema.registry.url");
                let urls: Vec<Url> = r
                    .required(&url_key, "the schema registry's URL (several separated by commas)")?
                    .split(',')
                    .filter(|u| !u.trim().is_empty())
                    .map(|u| Url::parse(&url_key, u))
                    .collect::<Result<_, _>>()?;
                let (auth, headers) = confluent_auth(r, prefix)?;
                bearer_headers = headers;
                let strategy = |r: &mut Reader<'_>, k: &str| -> Result<SubjectStrategy, ConfigError> {
                    let full = key(k);
                    let Some(v) = r.str(&full) else { return Ok(SubjectStrategy::Topic) };
                    match v.rsplit('.').next().unwrap_or(v) {
                        "TopicNameStrategy" => Ok(SubjectStrategy::Topic),
                        "RecordNameStrategy" => Ok(SubjectStrategy::Record),
                        "TopicRecordNameStrategy" => Ok(SubjectStrategy::TopicRecord),
                        _ => Err(ConfigError::invalid(&full, "is not a supported subject name strategy; use io.confluent.kafka.serializers.subject.TopicNameStrategy, RecordNameStrategy or TopicRecordNameStrategy")),
                    }
                };
                let subject = strategy(
                    r,
                    if which == "key" { "key.subject.name.strategy" } else { "value.subject.name.strategy" },
                )?;
                let flavor = Flavor::Confluent {
                    subject,
                    auto_register: r.bool_or(&key("auto.register.schemas"), true)?,
                    use_latest: r.bool_or(&key("use.latest.version"), false)?,
                };
                let class = match class {
                    CONFLUENT_AVRO => CONFLUENT_AVRO,
                    CONFLUENT_PROTOBUF => CONFLUENT_PROTOBUF,
                    _ => CONFLUENT_JSON_SCHEMA,
                };
                (class, url_key, urls, auth, flavor)
            }
            APICURIO_AVRO | APICURIO_EXT_JSON => {
                let url_key = key("apicurio.registry.url");
                let url = r.required(
                    &url_key,
                    "the Apicurio Registry API's URL, e.g. http://registry:8080/apis/registry/v2",
                )?;
                let url = Url::parse(&url_key, &url)?;
                if url.path.ends_with("/v3") {
                    return Err(ConfigError::invalid(&url_key, "names Apicurio Registry's v3 API, which pgoutbox does not speak yet; point it at the v2 API (/apis/registry/v2) or at the Confluent-compatible API with io.confluent.connect.avro.AvroConverter"));
                }
                let auth = match (r.str(&key("apicurio.auth.username")), r.str(&key("apicurio.auth.password"))) {
                    (Some(u), Some(p)) => Some(Auth::Header(basic(&format!("{u}:{p}")))),
                    (None, None) => None,
                    _ => {
                        return Err(ConfigError::invalid(
                            &key("apicurio.auth.username"),
                            "needs apicurio.auth.password beside it (both or neither)",
                        ))
                    }
                };
                // OAuth, when asked for, comes first, as in Apicurio's resolver.
                let auth = match apicurio_oauth(r, prefix)? {
                    Some(o) => Some(Auth::OAuth(Arc::new(o))),
                    None => auth,
                };
                if let Some(s) = r.str(&key("apicurio.registry.artifact-resolver-strategy")) {
                    if !s.ends_with(".TopicIdStrategy") {
                        return Err(ConfigError::invalid(&key("apicurio.registry.artifact-resolver-strategy"), "is not supported; pgoutbox names artifacts as io.apicurio.registry.serde.strategy.TopicIdStrategy does (<topic>-key, <topic>-value), the default"));
                    }
                }
                if let Some(e) = r.str(&key("apicurio.registry.avro.encoding")) {
                    if !e.eq_ignore_ascii_case("BINARY") {
                        return Err(ConfigError::invalid(
                            &key("apicurio.registry.avro.encoding"),
                            "is not supported; pgoutbox writes Avro's binary encoding (BINARY, the default)",
                        ));
                    }
                }
                let id = r.choice(
                    &key("apicurio.registry.use-id"),
                    IdKind::Global,
                    &[("globalId", IdKind::Global), ("contentId", IdKind::Content)],
                )?;
                let flavor = Flavor::Apicurio {
                    auto_register: r.bool_or(&key("apicurio.registry.auto-register"), false)?,
                    find_latest: r.bool_or(&key("apicurio.registry.find-latest"), false)?,
                    headers: r.bool_or(&key("apicurio.registry.headers.enabled"), true)?,
                    id,
                    as_confluent: r.bool_or(&key("apicurio.registry.as-confluent"), false)?,
                    // The resolver's explicit group replaces the strategy's (none: `default`).
                    group: match r.raw(&key("apicurio.registry.artifact.group-id")).map(str::trim) {
                        None => "default".to_string(),
                        // Apicurio reads it as an empty group and asks for /groups//artifacts.
                        Some("") => {
                            return Err(ConfigError::invalid(
                                &key("apicurio.registry.artifact.group-id"),
                                "is empty; remove it for Apicurio's default group",
                            ))
                        }
                        Some(g) => g.to_string(),
                    },
                };
                let class = if class == APICURIO_AVRO { APICURIO_AVRO } else { APICURIO_EXT_JSON };
                (class, url_key, vec![url], auth, flavor)
            }
            other => {
                return Err(ConfigError::invalid(prefix.trim_end_matches('.'), format!("names `{other}`, a schema-registry converter pgoutbox does not implement yet; supported: {CONFLUENT_AVRO}, {CONFLUENT_PROTOBUF}, {CONFLUENT_JSON_SCHEMA}, {APICURIO_AVRO}, {APICURIO_EXT_JSON} (Apicurio's SerdeBasedConverter and its 3.x converters are not)")));
            }
        };
        let ssl_prefix = match class {
            CONFLUENT_AVRO | CONFLUENT_PROTOBUF | CONFLUENT_JSON_SCHEMA => key("schema.registry.ssl."),
            _ => key("apicurio.registry.request.ssl."),
        };
        // Confluent's client reaches a token endpoint with the registry's TLS settings too.
        let issuer_tls = matches!(&auth, Some(Auth::OAuth(o)) if o.endpoint.tls);
        let tls = if urls.iter().any(|u| u.tls) || issuer_tls { Some(tls::parse(r, &ssl_prefix)?) } else { None };
        refuse_byte_changing_options(r, prefix)?;
        let format = if class == CONFLUENT_PROTOBUF {
            refuse_protobuf_options(r, prefix)?;
            Format::Protobuf
        } else if class == CONFLUENT_JSON_SCHEMA {
            Format::JsonSchema(json_schema_options(r, prefix)?)
        } else if class == APICURIO_EXT_JSON {
            // The options ExtJsonConverter hands its JsonConverter (schemas are always off).
            let decimal = key("decimal.format");
            if r.str(&decimal).is_some_and(|v| !v.eq_ignore_ascii_case("BASE64")) {
                return Err(ConfigError::invalid(&decimal, "is not supported with ExtJsonConverter: pgoutbox writes decimals as JsonConverter's default does (BASE64); remove it"));
            }
            r.bool_or(&key("schemas.enable"), false)?;
            r.bool_or(&key("replace.null.with.default"), true)?;
            r.str(&key("schemas.cache.size"));
            Format::ExtJson
        } else {
            // Checked and accepted: nothing the Event Router writes depends on it.
            r.bool_or(&key("enhanced.avro.schema.support"), false)?;
            Format::Avro(avro::Options {
                connect_meta_data: r.bool_or(&key("connect.meta.data"), true)?,
                bare_optional_struct: class == APICURIO_AVRO,
            })
        };
        // Read, so they are not reported as ignored: a cache size changes no byte.
        r.str(&key("schemas.cache.config"));
        Ok(RegistryConverter {
            class,
            is_key,
            url_key,
            prefix: prefix.to_string(),
            ssl_prefix,
            urls,
            tls,
            auth,
            bearer_headers,
            flavor,
            format,
            cache: Mutex::new(HashMap::new()),
            by_content: Mutex::new(HashMap::new()),
            down: Mutex::new(None),
        })
    }

    /// The record bytes of (schema, value) on `topic`, registering the schema on first use; the
    /// Apicurio id headers go to `headers`.
    pub fn encode(
        &self,
        topic: &str,
        schema: Option<&Schema>,
        value: &Value,
        headers: Option<&mut Vec<(Arc<str>, Option<Bytes>)>>,
    ) -> Result<Option<Bytes>, ConvertError> {
        if matches!(value, Value::Null) {
            // Every converter writes a null as Kafka's null, with no id and nothing registered;
            // AvroData refuses a null for a required schema (ProtobufData does not). JsonSchemaData
            // turns a null under an optional schema into a JSON `null`, which its serializer writes
            // as any other value: the schema registered, its id, then `null`.
            match (&self.format, schema) {
                (Format::Avro(_), Some(s)) if !s.is_optional() => return Err(ConvertError::RequiredNull),
                (Format::JsonSchema(_), Some(s)) if s.is_optional() => {}
                // Apicurio's schema resolver requires a value: Connect's task fails on it
                // (a NullPointerException in DefaultSchemaResolver.resolveSchema).
                (Format::ExtJson, Some(_)) => {
                    return Err(ConvertError::JsonSchema(format!(
                        "{APICURIO_EXT_JSON} cannot write a null {} that has a schema (Apicurio's schema resolver fails on it, and Connect's task with it): a NULL payload or key; use another converter for this part, or leave such rows out",
                        self.part()
                    )))
                }
                _ => return Ok(None),
            }
        }
        let Some(schema) = schema else {
            return Err(self.format.error(format!(
                "{} needs a schema; this {} has none (schemaless data)",
                self.class,
                self.part()
            )));
        };
        let id = self.id(topic, schema)?;
        let mut out = Vec::with_capacity(64);
        // Apicurio's serializer writes the id to headers only when it is handed them: Connect's
        // worker does; a BinaryDataConverter calling its delegate does not. ExtJsonConverter writes
        // it in its JSON body instead (below).
        match (&self.flavor, headers) {
            _ if self.format == Format::ExtJson => {}
            (Flavor::Confluent { .. }, _) => {
                out.push(0);
                out.extend_from_slice(&(id as i32).to_be_bytes());
            }
            (Flavor::Apicurio { headers: true, id: kind, .. }, Some(headers)) => {
                let part = self.part();
                let name = match kind {
                    IdKind::Global => format!("apicurio.{part}.globalId"),
                    IdKind::Content => format!("apicurio.{part}.contentId"),
                };
                headers.push((Arc::from(name), Some(Bytes::copy_from_slice(&id.to_be_bytes()))));
                headers.push((Arc::from(format!("apicurio.{part}.encoding")), Some(Bytes::from_static(b"BINARY"))));
            }
            (Flavor::Apicurio { as_confluent, .. }, _) => {
                out.push(0);
                if *as_confluent {
                    out.extend_from_slice(&(id as i32).to_be_bytes());
                } else {
                    out.extend_from_slice(&id.to_be_bytes());
                }
            }
        }
        match self.format {
            Format::Avro(options) => avro::write(schema, value, &mut out, options)?,
            Format::Protobuf => protobuf::write(schema, value, &mut out)?,
            Format::JsonSchema(options) => json_schema::write(schema, value, &mut out, options)?,
            // PrettyFormatStrategy, ExtJsonConverter's default: the globalId in the body, whatever
            // the id options say.
            Format::ExtJson => {
                out.extend_from_slice(format!("{{\"schemaId\":{id},\"payload\":").as_bytes());
                json::write_value(&mut out, schema, value)?;
                out.push(b'}');
            }
        }
        Ok(Some(Bytes::from(out)))
    }

    fn part(&self) -> &'static str {
        if self.is_key {
            "key"
        } else {
            "value"
        }
    }

    /// The id of `schema` under `topic`'s subject, from the cache or the registry.
    fn id(&self, topic: &str, schema: &Schema) -> Result<i64, ConvertError> {
        if let Some(id) = self.cache.lock().expect("registry cache").get(topic).and_then(|ids| ids.get(schema)) {
            return Ok(*id);
        }
        // Apicurio's resolver also keeps what it resolved by content for its check period
        // (`apicurio.registry.check-period-ms`, 30 s): within it, a schema resolved for one topic is
        // written with that id on another topic, nothing registered for the latter, as Debezium's
        // records show; after it, the other topic's artifact is asked for.
        let apicurio = matches!(self.flavor, Flavor::Apicurio { .. });
        if apicurio {
            if let Some((id, at)) = self.by_content.lock().expect("registry cache").get(schema) {
                if at.elapsed() < APICURIO_CHECK_PERIOD {
                    return Ok(*id);
                }
            }
        }
        // A registry that just did not answer is not asked again at once: every record (and
        // heartbeat) would wait out the timeout again.
        if let Some((until, e)) = &*self.down.lock().expect("registry state") {
            if std::time::Instant::now() < *until {
                return Err(ConvertError::Registry(e.clone()));
            }
        }
        let (text, record_name) = match self.format {
            Format::Avro(options) => (avro::schema_text(schema, options)?, RecordName::Avro),
            Format::Protobuf => {
                let proto = protobuf::schema_of(schema)?;
                (proto.text, RecordName::Given(Some(proto.record_name)))
            }
            Format::JsonSchema(options) => {
                let registered = json_schema::schema_of(schema, options)?;
                (registered.text, RecordName::Given(registered.title))
            }
            Format::ExtJson => {
                let mut text = Vec::with_capacity(128);
                json::write_schema(&mut text, schema, json::Decimals::Base64);
                (String::from_utf8(text).expect("a JSON schema is UTF-8"), RecordName::Avro)
            }
        };
        let subject = self.subject(topic, schema, record_name)?;
        let id = match block_on(self.resolve(&subject, &text)) {
            Ok(id) => id,
            Err(e) => {
                if e.is_retryable() {
                    *self.down.lock().expect("registry state") =
                        Some((std::time::Instant::now() + DOWN_FOR, e.clone()));
                }
                return Err(ConvertError::Registry(e));
            }
        };
        tracing::info!(subject = %subject, id, registry = %self.urls[0].describe(), "schema registry: schema registered or found");
        self.cache.lock().expect("registry cache").entry(Arc::from(topic)).or_default().insert(schema.clone(), id);
        if apicurio {
            self.by_content.lock().expect("registry cache").insert(schema.clone(), (id, std::time::Instant::now()));
        }
        Ok(id)
    }

    /// The subject (Confluent) or artifact id (Apicurio) of a schema on a topic; a Protobuf record's
    /// name is its message's full name (`google.protobuf.StringValue` for a string), a JSON
    /// Schema's its `title`.
    fn subject(&self, topic: &str, schema: &Schema, name: RecordName) -> Result<String, ConvertError> {
        let refused = || {
            // As Confluent's strategies refuse them.
            Err(self.format.error(format!(
                "the {part} subject name strategy needs a record schema, and the {part} of this record on `{topic}` is {}{}: use TopicNameStrategy for it",
                if schema.is_optional() { "an optional " } else { "" },
                schema.java_type(),
                part = self.part(),
            )))
        };
        let record_name = || match (&name, schema) {
            (RecordName::Given(Some(n)), _) => Ok(n.clone()),
            (RecordName::Given(None), _) => refused(),
            // Confluent registers an optional struct as a union, which has no name.
            (RecordName::Avro, Schema::Struct { name: Some(n), optional: false, .. }) => Ok(n.clone()),
            (RecordName::Avro, Schema::Struct { name: None, optional: false, .. }) => {
                Ok("io.confluent.connect.avro.ConnectDefault".to_string())
            }
            (RecordName::Avro, _) => refused(),
        };
        Ok(match &self.flavor {
            Flavor::Confluent { subject: SubjectStrategy::Record, .. } => record_name()?,
            Flavor::Confluent { subject: SubjectStrategy::TopicRecord, .. } => format!("{topic}-{}", record_name()?),
            _ => format!("{topic}-{}", self.part()),
        })
    }

    async fn resolve(&self, subject: &str, text: &str) -> Result<i64, RegistryError> {
        let enc = percent_encode(subject);
        match &self.flavor {
            Flavor::Confluent { auto_register, use_latest, .. } => {
                // Confluent's client sends no schemaType for Avro, its default.
                let body = match self.format {
                    Format::Avro(_) => serde_json::json!({ "schema": text }),
                    _ => serde_json::json!({ "schemaType": self.format.schema_type(), "schema": text }),
                }
                .to_string();
                let (method, path, body) = if *auto_register {
                    ("POST", format!("/subjects/{enc}/versions?normalize=false"), Some(body))
                } else if *use_latest {
                    ("GET", format!("/subjects/{enc}/versions/latest"), None)
                } else {
                    ("POST", format!("/subjects/{enc}?normalize=false&deleted=false"), Some(body))
                };
                let v = self
                    .call(subject, method, &path, &[("Content-Type", "application/vnd.schemaregistry.v1+json")], body)
                    .await?;
                if *use_latest && !*auto_register {
                    let latest = v["schema"].as_str().unwrap_or_default();
                    same_as_latest(subject, latest, text, "use.latest.version")?;
                }
                id_field(subject, &v, "id")
            }
            Flavor::Apicurio { auto_register, find_latest, id, group, .. } => {
                let group = percent_encode(group);
                let headers = [
                    ("Content-Type", "application/json"),
                    ("X-Registry-ArtifactId", subject),
                    ("X-Registry-ArtifactType", self.format.schema_type()),
                ];
                let v = if *auto_register {
                    let path = format!("/groups/{group}/artifacts?ifExists=RETURN_OR_UPDATE&canonical=false");
                    self.call(subject, "POST", &path, &headers, Some(text.to_string())).await?
                } else if *find_latest {
                    let meta =
                        self.call(subject, "GET", &format!("/groups/{group}/artifacts/{enc}/meta"), &[], None).await?;
                    // Apicurio writes with the latest version's schema; pgoutbox writes with the
                    // record's own, so the two must be the same schema.
                    let global = id_field(subject, &meta, "globalId")?;
                    let latest = self
                        .call(subject, "GET", &format!("/ids/globalIds/{global}?dereference=false"), &[], None)
                        .await?;
                    same_as_latest(subject, &latest.to_string(), text, "apicurio.registry.find-latest")?;
                    meta
                } else {
                    let path = format!("/groups/{group}/artifacts/{enc}/meta?canonical=true");
                    self.call(subject, "POST", &path, &headers[..1], Some(text.to_string())).await?
                };
                id_field(subject, &v, if *id == IdKind::Global { "globalId" } else { "contentId" })
            }
        }
    }

    /// One registry call, trying each URL in turn; the parsed JSON of a 2xx answer.
    async fn call(
        &self,
        subject: &str,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<String>,
    ) -> Result<serde_json::Value, RegistryError> {
        let authorization = self.authorization(subject).await?;
        let mut all_headers: Vec<(&str, &str)> = headers.to_vec();
        all_headers.extend(self.bearer_headers.iter().map(|(k, v)| (*k, v.as_str())));
        let headers = &all_headers[..];
        let mut reasons = Vec::new();
        // A conflict between concurrent registrations (Apicurio answers 409 "already exists" when
        // another client created an artifact or version at the same moment) is asked again at once,
        // a few times; an answer that is only slow or failing goes to the next URL.
        for round in 1..=3u64 {
            let mut conflict = false;
            for url in &self.urls {
                let target = format!("{}{path}", url.path);
                let tls = self.tls.as_ref().map(|t| t.config.clone());
                let call = http_call(url, tls, method, &target, headers, authorization.as_deref(), body.clone());
                match tokio::time::timeout(CALL_TIMEOUT, call).await {
                    Err(_) => reasons.push(format!("{}: no answer in {} s", url.describe(), CALL_TIMEOUT.as_secs())),
                    Ok(Err(CallError::Tls(reason))) => {
                        return Err(RegistryError::Untrusted {
                            url: url.describe(),
                            reason,
                            fix: format!(
                                "set {}truststore.location to the CA that signed the registry's certificate (PEM or PKCS12), or check that the URL names the host the certificate is for",
                                self.ssl_prefix
                            ),
                        })
                    }
                    Ok(Err(e)) => reasons.push(format!("{}: {e}", url.describe())),
                    Ok(Ok((status, answer))) if (200..300).contains(&status) => {
                        return serde_json::from_slice(&answer).map_err(|e| RegistryError::Refused {
                            subject: subject.into(),
                            status,
                            message: format!("an answer that is not JSON ({e})"),
                            fix: format!("check that {} names a schema registry's API", self.url_key),
                        })
                    }
                    // The registry is there but failing: another URL may do better, else retry later.
                    Ok(Ok((status, answer))) if status >= 500 || status == 408 || status == 429 => {
                        reasons.push(format!("{}: HTTP {status} {}", url.describe(), message(&answer)))
                    }
                    Ok(Ok((409, answer))) if message(&answer).contains("already exists") => {
                        reasons.push(format!("{}: HTTP 409 {}", url.describe(), message(&answer)));
                        conflict = true;
                    }
                    Ok(Ok((status, answer))) => {
                        if let (401, Some(Auth::OAuth(o))) = (status, &self.auth) {
                            o.forget();
                        }
                        return Err(self.refusal(subject, status, &answer));
                    }
                }
            }
            if !conflict {
                break;
            }
            if round < 3 {
                tokio::time::sleep(Duration::from_millis(100 * round)).await;
            }
        }
        Err(RegistryError::Unavailable {
            urls: self.urls.iter().map(Url::describe).collect::<Vec<_>>().join(", "),
            subject: subject.into(),
            reason: reasons.join("; "),
            key: self.url_key.clone(),
        })
    }

    /// The `Authorization` header's value for the next call, fetching an OAuth token when one is
    /// due.
    async fn authorization(&self, subject: &str) -> Result<Option<String>, RegistryError> {
        let o = match &self.auth {
            None => return Ok(None),
            Some(Auth::Header(a)) => return Ok(Some(a.0.clone())),
            Some(Auth::OAuth(o)) => o,
        };
        let tls = self.tls.as_ref().map(|t| t.config.clone());
        let keys = o.keys();
        o.authorization(tls).await.map(Some).map_err(|e| match e {
            oauth::TokenError::Unavailable(reason) => RegistryError::Unavailable {
                urls: o.endpoint.describe(),
                subject: subject.into(),
                reason: format!("the OAuth token endpoint: {reason}"),
                key: o.endpoint_key.clone(),
            },
            oauth::TokenError::Refused { status, message } => RegistryError::Refused {
                subject: subject.into(),
                status,
                message: format!("the OAuth token endpoint {} gave no usable token: {message}", o.endpoint.describe()),
                fix: format!("check {keys}"),
            },
        })
    }

    fn refusal(&self, subject: &str, status: u16, answer: &[u8]) -> RegistryError {
        let auth_keys = match (&self.flavor, &self.auth) {
            (Flavor::Confluent { .. }, Some(Auth::OAuth(_))) => "bearer.auth.client.id, bearer.auth.client.secret and bearer.auth.scope (the registry refused the token they obtained)",
            (Flavor::Confluent { .. }, _) => "basic.auth.credentials.source and basic.auth.user.info or schema.registry.basic.auth.user.info (or bearer.auth.token)",
            (Flavor::Apicurio { .. }, Some(Auth::OAuth(_))) => "apicurio.auth.client.id and apicurio.auth.client.secret (the registry refused the token they obtained)",
            (Flavor::Apicurio { .. }, _) => "apicurio.auth.username and apicurio.auth.password",
        };
        let fix = match (status, &self.flavor) {
            (401 | 403, _) => format!("check the credentials in {}{auth_keys}", self.prefix),
            (409, _) => "the schema is incompatible with the subject's earlier versions under the registry's compatibility rule: make the change compatible, or change the subject's compatibility level (the position stays before this record)".into(),
            (404, Flavor::Confluent { .. }) => format!("the schema is not registered under this subject and auto.register.schemas=false: register it, or set {}auto.register.schemas=true", self.prefix),
            (404, Flavor::Apicurio { .. }) => format!("the schema is not registered as this artifact and apicurio.registry.auto-register=false: register it, or set {}apicurio.registry.auto-register=true", self.prefix),
            (422 | 400, _) => "the registry refused the schema itself; report it with the schema".into(),
            _ => format!("check {} and the registry's log", self.url_key),
        };
        RegistryError::Refused { subject: subject.into(), status, message: message(answer), fix }
    }
}

/// Converter options that would change the bytes or the registered schemas in ways pgoutbox does
/// not reproduce: refused, naming the key, rather than ignored.
fn refuse_byte_changing_options(r: &mut Reader<'_>, prefix: &str) -> Result<(), ConfigError> {
    for flag in ["scrub.invalid.names", "normalize.schemas", "generalized.sum.type.support"] {
        let key = format!("{prefix}{flag}");
        if r.bool_or(&key, false)? {
            return Err(ConfigError::invalid(
                &key,
                "is not supported: pgoutbox writes names and schemas as given; remove it or set it to false",
            ));
        }
    }
    for key in r.keys_with_prefix(&format!("{prefix}apicurio.registry.")) {
        let option = &key[prefix.len() + "apicurio.registry.".len()..];
        let changes_bytes = (option.starts_with("headers.") && option.ends_with(".name"))
            || (option.starts_with("artifact.") && option != "artifact.group-id")
            || matches!(option, "id-handler" | "headers.handler" | "avro-datum-provider" | "dereference-schema");
        if changes_bytes && r.peek(key).is_some() {
            return Err(ConfigError::invalid(key, "is not supported: pgoutbox writes Apicurio's default header names, id handler and artifact names (TopicIdStrategy); remove it or keep Kafka Connect for this connector"));
        }
    }
    Ok(())
}

/// JsonSchemaConverter's options: the two that change bytes (`decimal.format`,
/// `object.additional.properties`), one refused (`json.indent.output`), and those read only when
/// converting back to Connect data or when serializing Java objects, accepted.
fn json_schema_options(r: &mut Reader<'_>, prefix: &str) -> Result<json_schema::Options, ConfigError> {
    let key = |k: &str| format!("{prefix}{k}");
    let indent = key("json.indent.output");
    if r.bool_or(&indent, false)? {
        return Err(ConfigError::invalid(
            &indent,
            "is not supported: pgoutbox writes JSON Schema records compactly, as the default (false) does; remove it",
        ));
    }
    for flag in [
        "json.fail.invalid.schema",
        "json.fail.unknown.properties",
        "json.write.dates.iso8601",
        "json.oneof.for.nullables",
        "use.optional.for.nonrequired",
        "ignore.modern.dialects",
        "flatten.singleton.unions",
        "ignore.default.for.nullables",
    ] {
        r.bool_or(&key(flag), false)?;
    }
    for option in ["json.schema.spec.version", "json.default.property.inclusion", "schemas.cache.size"] {
        r.str(&key(option));
    }
    Ok(json_schema::Options {
        decimals: json::Decimals::read(r, &key("decimal.format"))?,
        additional_properties: r.bool_or(&key("object.additional.properties"), true)?,
    })
}

/// ProtobufConverter options that change the schema or the bytes (in 7.0 or in later versions),
/// which pgoutbox writes only as the defaults do.
fn refuse_protobuf_options(r: &mut Reader<'_>, prefix: &str) -> Result<(), ConfigError> {
    for flag in
        ["wrapper.for.nullables", "optional.for.nullables", "generate.struct.for.nulls", "wrapper.for.raw.primitives"]
    {
        let key = format!("{prefix}{flag}");
        let default = flag == "wrapper.for.raw.primitives";
        if r.bool_or(&key, default)? != default {
            return Err(ConfigError::invalid(
                &key,
                format!("is not supported: pgoutbox writes Protobuf as ProtobufConverter's defaults do ({flag}={default}); remove it"),
            ));
        }
    }
    // Checked and accepted: nothing the Event Router writes has enums or unions.
    let skip_known = format!("{prefix}skip.known.types");
    if !r.bool_or(&skip_known, true)? {
        return Err(ConfigError::invalid(
            &skip_known,
            "is not supported: with false the converter registers Google's and Confluent's own types as subjects and references them; pgoutbox registers schemas without references (skip.known.types=true, the default)",
        ));
    }
    for flag in ["enhanced.protobuf.schema.support", "generate.index.for.unions", "int.for.enums"] {
        r.bool_or(&format!("{prefix}{flag}"), false)?;
    }
    r.str(&format!("{prefix}reference.subject.name.strategy"));
    Ok(())
}

/// `use.latest.version` / `find-latest`: the latest version's schema must be the record's own
/// (the same schema, whitespace aside), for pgoutbox writes records only with their own schema.
fn same_as_latest(subject: &str, latest: &str, text: &str, option: &str) -> Result<(), RegistryError> {
    let same =
        match (serde_json::from_str::<serde_json::Value>(latest), serde_json::from_str::<serde_json::Value>(text)) {
            (Ok(x), Ok(y)) => x == y,
            _ => latest == text,
        };
    if same {
        return Ok(());
    }
    Err(RegistryError::Refused {
        subject: subject.into(),
        status: 200,
        message: format!("its latest version differs from the record's schema {text}"),
        fix: format!("pgoutbox writes records only with their own schema; register that schema as the latest version, or set {option}=false"),
    })
}

fn id_field(subject: &str, v: &serde_json::Value, field: &str) -> Result<i64, RegistryError> {
    v[field].as_i64().ok_or_else(|| RegistryError::Refused {
        subject: subject.into(),
        status: 200,
        message: format!("an answer without `{field}`: {v}"),
        fix: "check that the URL names the registry API the converter expects".into(),
    })
}

/// The registry's own message in an error answer (Confluent's `message`, Apicurio's `message` or
/// `detail`), else the start of the body.
fn message(answer: &[u8]) -> String {
    let parsed: serde_json::Value = serde_json::from_slice(answer).unwrap_or_default();
    let text = ["message", "detail", "title"]
        .iter()
        .find_map(|f| parsed[*f].as_str().map(str::to_string))
        .unwrap_or_else(|| String::from_utf8_lossy(answer).into_owned());
    // One line, and not a whole stack trace.
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match one_line.char_indices().nth(400) {
        Some((i, _)) => format!("{}…", &one_line[..i]),
        None => one_line,
    }
}

/// `basic.auth.credentials.source`, `bearer.auth.credentials.source` and their keys; with the
/// headers Confluent's client adds to every call under bearer auth.
fn confluent_auth(r: &mut Reader<'_>, prefix: &str) -> Result<(Option<Auth>, BearerHeaders), ConfigError> {
    let key = |k: &str| format!("{prefix}{k}");
    let source = r.string_or(&key("basic.auth.credentials.source"), "URL");
    let basic_auth = match source.to_ascii_uppercase().as_str() {
        // The older name wins when it is set and not empty, as in Confluent's
        // `UserInfoCredentialProvider` and `AbstractKafkaSchemaSerDeConfig.basicAuthUserInfo`.
        "USER_INFO" => {
            let deprecated = r.str(&key("schema.registry.basic.auth.user.info")).map(str::to_string);
            let user_info = match deprecated {
                Some(v) => v,
                None => r.required(
                    &key("basic.auth.user.info"),
                    "user:password for the schema registry (or the older schema.registry.basic.auth.user.info)",
                )?,
            };
            Some(Auth::Header(basic(&user_info)))
        }
        "URL" => {
            r.str(&key("basic.auth.user.info"));
            r.str(&key("schema.registry.basic.auth.user.info"));
            None
        }
        "SASL_INHERIT" => {
            return Err(ConfigError::invalid(
                &key("basic.auth.credentials.source"),
                "SASL_INHERIT is not supported; use USER_INFO with basic.auth.user.info",
            ));
        }
        _ => {
            return Err(ConfigError::invalid(
                &key("basic.auth.credentials.source"),
                "is not one of USER_INFO, URL, SASL_INHERIT",
            ))
        }
    };
    let source = r.str(&key("bearer.auth.credentials.source")).map(|s| s.trim().to_ascii_uppercase());
    let bearer = match source.as_deref() {
        None => None,
        Some("STATIC_TOKEN") => Some(Auth::Header(Authorization(format!(
            "Bearer {}",
            r.required(&key("bearer.auth.token"), "the bearer token for the schema registry")?
        )))),
        Some("OAUTHBEARER") => Some(Auth::OAuth(Arc::new(oauth_config(r, prefix)?))),
        Some(_) => return Err(ConfigError::invalid(
            &key("bearer.auth.credentials.source"),
            "is not supported; use STATIC_TOKEN with bearer.auth.token, or OAUTHBEARER with bearer.auth.issuer.endpoint.url, bearer.auth.client.id and bearer.auth.client.secret (SASL_OAUTHBEARER_INHERIT, CUSTOM and the managed-identity sources are not supported)",
        )),
    };
    let mut headers = Vec::new();
    for (k, header) in [
        ("bearer.auth.logical.cluster", "target-sr-cluster"),
        ("bearer.auth.identity.pool.id", "Confluent-Identity-Pool-Id"),
    ] {
        if let Some(v) = r.str(&key(k)).map(str::trim).filter(|v| !v.is_empty()) {
            if bearer.is_some() {
                headers.push((header, v.to_string()));
            }
        }
    }
    match (basic_auth, bearer) {
        (Some(_), Some(_)) => Err(ConfigError::invalid(
            &key("bearer.auth.credentials.source"),
            "cannot be set beside basic.auth.credentials.source=USER_INFO; choose one",
        )),
        (b, t) => Ok((b.or(t), headers)),
    }
}

/// `OAUTHBEARER`'s keys.
fn oauth_config(r: &mut Reader<'_>, prefix: &str) -> Result<oauth::OAuth, ConfigError> {
    let key = |k: &str| format!("{prefix}{k}");
    let endpoint_key = key("bearer.auth.issuer.endpoint.url");
    let url = r.required(&endpoint_key, "the OAuth token endpoint's URL, e.g. https://idp.example.com/oauth2/token")?;
    let endpoint = Url::parse(&endpoint_key, &url)?;
    let client_id = r.required(&key("bearer.auth.client.id"), "the OAuth client's id")?;
    let client_secret = r.required(&key("bearer.auth.client.secret"), "the OAuth client's secret")?;
    for (k, v) in [("bearer.auth.client.id", &client_id), ("bearer.auth.client.secret", &client_secret)] {
        if v.trim().is_empty() {
            return Err(ConfigError::invalid(&key(k), "is empty"));
        }
    }
    let scope = r.str(&key("bearer.auth.scope")).map(str::to_string);
    let scope_claim = r.string_or(&key("bearer.auth.scope.claim.name"), "scope");
    let sub_claim = r.string_or(&key("bearer.auth.sub.claim.name"), "sub");
    let buffer_key = key("bearer.auth.cache.expiry.buffer.seconds");
    let buffer = match r.str(&buffer_key) {
        None => 300,
        Some(v) => v.trim().parse::<i16>().ok().filter(|b| *b >= 0).ok_or_else(|| {
            ConfigError::invalid(&buffer_key, format!("`{v}` is not a number of seconds from 0 to 32767"))
        })?,
    };
    Ok(oauth::OAuth::new(
        endpoint,
        endpoint_key,
        prefix.to_string(),
        client_id,
        client_secret,
        oauth::Style::Confluent { scope, scope_claim, sub_claim, buffer: Duration::from_secs(buffer as u64) },
    ))
}

/// Apicurio 2.x's OAuth keys: the token endpoint, given, or Keycloak's under
/// `apicurio.auth.service.url` and `apicurio.auth.realm` (which wins, as in Apicurio's resolver).
fn apicurio_oauth(r: &mut Reader<'_>, prefix: &str) -> Result<Option<oauth::OAuth>, ConfigError> {
    let key = |k: &str| format!("{prefix}{k}");
    let service = r.str(&key("apicurio.auth.service.url")).map(str::to_string);
    let given = r.str(&key("apicurio.auth.service.token.endpoint")).map(str::to_string);
    let (endpoint_key, url) = match (service, given) {
        (None, None) => return Ok(None),
        (Some(service), _) => {
            let realm = r.required(&key("apicurio.auth.realm"), "the Keycloak realm the token endpoint is under")?;
            let url = format!("{}/realms/{realm}/protocol/openid-connect/token", service.trim());
            (key("apicurio.auth.service.url"), url)
        }
        (None, Some(url)) => (key("apicurio.auth.service.token.endpoint"), url),
    };
    let endpoint = Url::parse(&endpoint_key, &url)?;
    let client_id = r.required(&key("apicurio.auth.client.id"), "the OAuth client's id")?;
    let client_secret = r.required(&key("apicurio.auth.client.secret"), "the OAuth client's secret")?;
    // Apicurio 2.6's converter does not send a scope: read, so that it is not reported ignored.
    r.str(&key("apicurio.auth.client.scope"));
    Ok(Some(oauth::OAuth::new(
        endpoint,
        endpoint_key,
        prefix.to_string(),
        client_id,
        client_secret,
        oauth::Style::Apicurio,
    )))
}

fn basic(user_info: &str) -> Authorization {
    use base64::Engine;
    Authorization(format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(user_info)))
}

/// A subject in a URL path: everything but unreserved characters percent-encoded.
fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// One HTTP/1.1 exchange with hyper's client connection, over TLS for an `https://` URL; the
/// status and body.
async fn http_call(
    url: &Url,
    tls: Option<Arc<rustls::ClientConfig>>,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    authorization: Option<&str>,
    body: Option<String>,
) -> Result<(u16, Vec<u8>), CallError> {
    let stream = tokio::net::TcpStream::connect((url.host.as_str(), url.port))
        .await
        .map_err(|e| CallError::Transport(e.to_string()))?;
    match (url.tls, tls) {
        (true, Some(config)) => {
            let name = rustls::pki_types::ServerName::try_from(url.host.clone())
                .map_err(|e| CallError::Tls(format!("`{}` is not a TLS server name: {e}", url.host)))?;
            let stream = tokio_rustls::TlsConnector::from(config).connect(name, stream).await.map_err(|e| {
                // rustls's own verdicts (a certificate it does not trust, a protocol it refuses) are
                // configuration; anything else (a reset mid-handshake) is the network.
                match e.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>()) {
                    Some(
                        tls @ (rustls::Error::InvalidCertificate(_)
                        | rustls::Error::NoCertificatesPresented
                        | rustls::Error::UnsupportedNameType),
                    ) => CallError::Tls(tls.to_string()),
                    _ => CallError::Transport(format!("TLS handshake: {e}")),
                }
            })?;
            exchange(stream, url, method, target, headers, authorization, body).await.map_err(CallError::Transport)
        }
        (true, None) => Err(CallError::Tls("no TLS configuration for an https URL".into())),
        (false, _) => {
            exchange(stream, url, method, target, headers, authorization, body).await.map_err(CallError::Transport)
        }
    }
}

/// Why an exchange failed: the network (retried), or TLS's verdict on the registry (stops).
enum CallError {
    Transport(String),
    Tls(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Transport(e) | CallError::Tls(e) => f.write_str(e),
        }
    }
}

async fn exchange<S>(
    stream: S,
    url: &Url,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    authorization: Option<&str>,
    body: Option<String>,
) -> Result<(u16, Vec<u8>), String>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    use http_body_util::{BodyExt, Full};
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await.map_err(|e| e.to_string())?;
    let driver = tokio::spawn(connection);
    let default_port = if url.tls { 443 } else { 80 };
    let host = if url.port == default_port { url.host.clone() } else { format!("{}:{}", url.host, url.port) };
    let mut request = hyper::Request::builder()
        .method(method)
        .uri(target)
        .header("Host", host)
        .header("Accept", "application/json")
        .header("User-Agent", concat!("pgoutbox/", env!("CARGO_PKG_VERSION")));
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    if let Some(a) = authorization {
        request = request.header("Authorization", a);
    }
    let request = request.body(Full::new(Bytes::from(body.unwrap_or_default()))).map_err(|e| e.to_string())?;
    let response = sender.send_request(request).await.map_err(|e| e.to_string())?;
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes().to_vec();
    driver.abort();
    Ok((status, body))
}

/// Runs a registry call to completion from synchronous code: on a thread of its own with a runtime of
/// its own, so it works under any runtime (the relay's is single-threaded) or none.
fn block_on<T: Send>(f: impl std::future::Future<Output = T> + Send) -> T {
    std::thread::scope(|s| {
        s.spawn(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime for the schema registry call")
                .block_on(f)
        })
        .join()
        .expect("the schema registry call panicked")
    })
}

mod oauth;
mod tls;

#[cfg(test)]
mod tests;
