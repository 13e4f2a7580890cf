//! Who may call the worker's REST API: Connect's `BasicAuthSecurityRestExtension`, configured the
//! way Connect operators already do it.
//!
//! - The worker names the extension in `rest.extension.classes`.
//! - The JVM's JAAS file, `-Djava.security.auth.login.config=FILE` in `KAFKA_OPTS` (as Connect's
//!   start scripts pass it), has a `KafkaConnect` section with Connect's `PropertyFileLoginModule`
//!   and its `file` option: a properties file of `user=password` lines.
//! - Every request needs `Authorization: Basic base64(user:password)` of a listed user; otherwise
//!   401 with Connect's body, `User cannot access the resource.`.
//!
//! Where Connect fails open or late, pgoutbox stops at start, naming what to fix: an empty users
//! file (Connect then lets every request in), a missing or unreadable one (Connect answers 401 to
//! everything), a JAAS file without the section, an extension class it does not implement.
//! Malformed base64 is a 401 (Connect answers 500). Like Connect, the users file is read once.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;

use crate::config::security::jaas;
use crate::config::ConfigError;

pub const EXTENSIONS_KEY: &str = "rest.extension.classes";
pub const BASIC_AUTH_EXTENSION: &str =
    "org.apache.kafka.connect.rest.basic.auth.extension.BasicAuthSecurityRestExtension";
const PROPERTY_FILE_MODULE: &str = "org.apache.kafka.connect.rest.basic.auth.extension.PropertyFileLoginModule";
const LOGIN_CONTEXT: &str = "KafkaConnect";
const JAAS_PROPERTY: &str = "java.security.auth.login.config";
/// Connect's body for a refused request.
const REFUSED: &str = "User cannot access the resource.";

/// The users allowed in, by name.
#[derive(Clone)]
pub struct BasicAuth {
    users: Arc<BTreeMap<String, String>>,
}

impl std::fmt::Debug for BasicAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BasicAuth").field("users", &self.users.len()).finish()
    }
}

/// The JAAS file that `KAFKA_OPTS` points the JVM at (`-Djava.security.auth.login.config=FILE`,
/// with or without quotes), as Connect's start scripts pass it; the last one given, as the JVM
/// takes it (an image's KAFKA_OPTS extended by a deployment).
pub fn jaas_file_from(kafka_opts: &str) -> Option<String> {
    let prefix = format!("-D{JAAS_PROPERTY}=");
    kafka_opts.split_whitespace().rev().find_map(|arg| {
        let v = arg.strip_prefix(&prefix)?.trim_matches(|c| c == '"' || c == '\'');
        (!v.is_empty()).then(|| v.to_string())
    })
}

impl BasicAuth {
    /// `None` when the worker asks for no authentication. `kafka_opts` is the `KAFKA_OPTS`
    /// environment variable.
    pub fn from_props(
        props: &BTreeMap<String, String>,
        kafka_opts: Option<&str>,
    ) -> Result<Option<BasicAuth>, ConfigError> {
        let classes: Vec<&str> = props
            .get(EXTENSIONS_KEY)
            .map(|v| v.split(',').map(str::trim).filter(|c| !c.is_empty()).collect())
            .unwrap_or_default();
        if classes.is_empty() {
            return Ok(None);
        }
        if let Some(_other) = classes.iter().find(|c| **c != BASIC_AUTH_EXTENSION) {
            return Err(ConfigError::invalid(
                EXTENSIONS_KEY,
                format!("lists a REST extension pgoutbox does not implement; it implements {BASIC_AUTH_EXTENSION} (HTTP basic authentication) and, with listeners.https.ssl.client.auth=required, client certificates"),
            ));
        }
        let fix = format!("start the worker with KAFKA_OPTS=-D{JAAS_PROPERTY}=/path/to/connect_jaas.conf, as Connect's basic auth extension needs");
        let Some(path) = kafka_opts.and_then(jaas_file_from) else {
            return Err(ConfigError::invalid(
                EXTENSIONS_KEY,
                format!("names the basic auth extension, but no JAAS file is given: {fix}"),
            ));
        };
        let text = std::fs::read_to_string(&path).map_err(|e| {
            ConfigError::invalid(
                EXTENSIONS_KEY,
                format!("cannot read the JAAS file that KAFKA_OPTS names ({e}): {fix}"),
            )
        })?;
        let sections = jaas::parse_file(&text)
            .map_err(|e| ConfigError::invalid(EXTENSIONS_KEY, format!("the JAAS file that KAFKA_OPTS names: {e}")))?;
        let section = sections.get(LOGIN_CONTEXT).or_else(|| sections.get("other")).ok_or_else(|| {
            ConfigError::invalid(
                EXTENSIONS_KEY,
                format!("the JAAS file that KAFKA_OPTS names has no `{LOGIN_CONTEXT} {{ ... }};` section"),
            )
        })?;
        let mut users = BTreeMap::new();
        for login in section {
            if login.module != PROPERTY_FILE_MODULE {
                return Err(ConfigError::invalid(
                    EXTENSIONS_KEY,
                    format!("the JAAS file's {LOGIN_CONTEXT} section uses a login module pgoutbox does not implement; use {PROPERTY_FILE_MODULE} required file=\"/path/users.properties\";"),
                ));
            }
            let file = login.options.get("file").map(|f| f.trim()).filter(|f| !f.is_empty()).ok_or_else(|| {
                ConfigError::invalid(EXTENSIONS_KEY, format!("the JAAS file's {PROPERTY_FILE_MODULE} has no `file` option (Connect: \"Property Credentials file must be specified\")"))
            })?;
            let text = std::fs::read_to_string(file).map_err(|e| {
                ConfigError::invalid(EXTENSIONS_KEY, format!("cannot read the users file the JAAS file names ({e})"))
            })?;
            users.extend(crate::config::parse_properties(&text).entries);
        }
        if users.is_empty() {
            return Err(ConfigError::invalid(
                EXTENSIONS_KEY,
                "the users file the JAAS file names lists no user; Connect would then let every request in, pgoutbox refuses to start: add user=password lines",
            ));
        }
        Ok(Some(BasicAuth { users: Arc::new(users) }))
    }

    /// Whether an `Authorization` header value names a listed user with its password.
    pub fn allows(&self, authorization: Option<&str>) -> bool {
        let Some((scheme, encoded)) = authorization.and_then(|h| h.split_once(' ')) else { return false };
        if !scheme.eq_ignore_ascii_case("Basic") || scheme.is_empty() {
            return false;
        }
        let engine = base64::engine::GeneralPurpose::new(
            &base64::alphabet::STANDARD,
            base64::engine::GeneralPurposeConfig::new()
                .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
        );
        let Ok(bytes) = engine.decode(encoded) else { return false };
        let decoded = String::from_utf8_lossy(&bytes);
        let Some((user, password)) = decoded.split_once(':') else { return false };
        if user.is_empty() {
            return false;
        }
        self.users.get(user).is_some_and(|expected| constant_time_eq(expected.as_bytes(), password.as_bytes()))
    }
}

/// Equal bytes, compared without an early exit, so the time taken says nothing of the password.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = a.len() ^ b.len();
    for (i, x) in a.iter().enumerate() {
        diff |= usize::from(x ^ b.get(i).copied().unwrap_or(!x));
    }
    diff == 0
}

/// The middleware: every request, whatever its path, needs a listed user, except `GET /health`
/// (liveness and readiness probes; it tells whether the worker has started, nothing else).
pub async fn require(State(auth): State<BasicAuth>, request: Request, next: Next) -> Response {
    let header = request.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    let probe = request.method() == axum::http::Method::GET && request.uri().path() == "/health";
    if probe || auth.allows(header) {
        return next.run(request).await;
    }
    (StatusCode::UNAUTHORIZED, [(header::CONTENT_TYPE, "application/json")], REFUSED).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup(users: &str) -> (tempdir::Dir, BTreeMap<String, String>, String) {
        let dir = tempdir::Dir::new();
        let users_file = dir.path.join("users.properties");
        std::fs::write(&users_file, users).unwrap();
        let jaas_file = dir.path.join("connect_jaas.conf");
        std::fs::write(
            &jaas_file,
            format!("KafkaConnect {{\n  {PROPERTY_FILE_MODULE} required\n  file=\"{}\";\n}};\n", users_file.display()),
        )
        .unwrap();
        let props = BTreeMap::from([(EXTENSIONS_KEY.to_string(), BASIC_AUTH_EXTENSION.to_string())]);
        (dir, props, format!("-Xmx1g -D{JAAS_PROPERTY}={}", jaas_file.display()))
    }

    mod tempdir {
        pub struct Dir {
            pub path: std::path::PathBuf,
        }
        impl Dir {
            pub fn new() -> Dir {
                let path =
                    std::env::temp_dir().join(format!("pgoutbox-auth-{}-{}", std::process::id(), uuid::Uuid::now_v7()));
                std::fs::create_dir_all(&path).unwrap();
                Dir { path }
            }
        }
        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.path);
            }
        }
    }

    fn basic(user_password: &str) -> String {
        format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(user_password))
    }

    #[test]
    fn basic_auth_takes_connects_jaas_and_users_files() {
        let (_dir, props, opts) = setup("# admins\nadmin=s3cr:et\nops: pw2\n");
        let auth = BasicAuth::from_props(&props, Some(&opts)).unwrap().expect("auth is on");
        assert!(auth.allows(Some(&basic("admin:s3cr:et"))), "the password may hold a colon");
        assert!(auth.allows(Some(&basic("ops:pw2"))));
        assert!(auth.allows(Some(&basic("ops:pw2").replace("Basic", "basic"))), "the scheme is case-insensitive");
        for refused in [
            None,
            Some(basic("admin:wrong")),
            Some(basic("admin:s3cr")),
            Some(basic("nobody:pw2")),
            Some(basic(":pw2")),
            Some("Basic !!!".to_string()),
            Some(basic("adminpw")),
            Some("Bearer abc".to_string()),
        ] {
            assert!(!auth.allows(refused.as_deref()), "{refused:?}");
        }
    }

    #[test]
    fn basic_auth_stops_at_start_where_connect_would_fail_open_or_late() {
        assert!(BasicAuth::from_props(&BTreeMap::new(), None).unwrap().is_none());
        let (_dir, props, opts) = setup("# nobody\n");
        let e = BasicAuth::from_props(&props, Some(&opts)).unwrap_err().to_string();
        assert!(e.contains("lists no user"), "{e}");
        let e = BasicAuth::from_props(&props, None).unwrap_err().to_string();
        assert!(e.contains("KAFKA_OPTS"), "{e}");
        let e =
            BasicAuth::from_props(&props, Some("-Djava.security.auth.login.config=/nonexistent/x.conf")).unwrap_err();
        assert!(e.to_string().contains("cannot read the JAAS file"), "{e}");
        let other = BTreeMap::from([(EXTENSIONS_KEY.to_string(), "com.example.MyExtension".to_string())]);
        let e = BasicAuth::from_props(&other, Some(&opts)).unwrap_err().to_string();
        assert!(e.contains("does not implement") && !e.contains("com.example"), "{e}");
    }

    #[test]
    fn jaas_file_is_found_in_kafka_opts_as_connects_scripts_pass_it() {
        assert_eq!(
            jaas_file_from("-Xms1g -Djava.security.auth.login.config=/etc/k/jaas.conf -Dx=y").as_deref(),
            Some("/etc/k/jaas.conf")
        );
        assert_eq!(jaas_file_from("-Djava.security.auth.login.config=\"/a b\"").as_deref(), Some("/a"));
        assert_eq!(jaas_file_from("-Dother=1"), None);
        assert_eq!(
            jaas_file_from("-Djava.security.auth.login.config=/base.conf -Djava.security.auth.login.config=/mine.conf")
                .as_deref(),
            Some("/mine.conf"),
            "the JVM takes the last"
        );
    }
}
