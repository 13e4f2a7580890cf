//! An OAuth 2 token endpoint for the tests that need one (Kafka's OAUTHBEARER, the schema
//! registry's bearer auth).

use std::time::Duration;

/// An OAuth 2 token endpoint on loopback for the client-credentials grant, as an identity provider
/// (Keycloak, Okta, Entra ID) serves it: it checks the grant type, the scope and the client's id and
/// secret (HTTP Basic, or in the form), and issues tokens that live `lifetime`, in the unsecured form (alg none)
/// the broker's validator on this cluster accepts, with the client's id as the principal.
/// Where a token request put the client's credentials (`basic` or `post`), and its scope.
pub type Grant = (&'static str, Option<String>);

pub struct TokenEndpoint {
    pub url: String,
    /// Tokens issued, and requests refused (with what was wrong).
    pub issued: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    pub refused: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    /// How each token was asked for: the credentials' place (`basic` or `post`) and the scope, if
    /// one was asked for (a missing one is granted, as identity providers grant default scopes).
    pub grants: std::sync::Arc<std::sync::Mutex<Vec<Grant>>>,
    /// `introspect_url`: answers 200 to a request whose `Authorization: Bearer` token this endpoint
    /// issued and which has not expired, else 401 (for a proxy's `auth_request` in front of a
    /// service that accepts these tokens).
    pub introspect_url: String,
    server: tokio::task::JoinHandle<()>,
}

impl TokenEndpoint {
    pub async fn start(
        client_id: &'static str,
        client_secret: &'static str,
        scope: &'static str,
        lifetime: Duration,
    ) -> TokenEndpoint {
        use axum::http::{header, HeaderMap, StatusCode};
        use base64::Engine;
        const JSON: [(header::HeaderName, &str); 1] = [(header::CONTENT_TYPE, "application/json")];
        use std::sync::atomic::Ordering;
        let issued = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let refused = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        // Every token issued, with its expiry (seconds since 1970).
        let live = std::sync::Arc::new(std::sync::Mutex::new(std::collections::HashMap::<String, u64>::new()));
        let grants = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (i, r, l, g) = (issued.clone(), refused.clone(), live.clone(), grants.clone());
        let token = move |headers: HeaderMap, body: String| {
            let (i, r, l, g) = (i.clone(), r.clone(), l.clone(), g.clone());
            async move {
                let b64 = base64::engine::general_purpose::STANDARD;
                let basic = headers
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.strip_prefix("Basic "))
                    .and_then(|v| b64.decode(v).ok())
                    .map(|v| String::from_utf8_lossy(&v).into_owned());
                let form: std::collections::HashMap<String, String> = body
                    .split('&')
                    .filter_map(|kv| kv.split_once('='))
                    .map(|(k, v)| (form_decode(k), form_decode(v)))
                    .collect();
                // client_secret_basic, or client_secret_post (the id and secret in the form).
                let posted = match (form.get("client_id"), form.get("client_secret")) {
                    (Some(id), Some(secret)) => Some(format!("{id}:{secret}")),
                    _ => None,
                };
                let how = if basic.is_some() { "basic" } else { "post" };
                let wrong = if basic.or(posted).as_deref() != Some(&format!("{client_id}:{client_secret}")) {
                    Some("client credentials")
                } else if form.get("grant_type").map(String::as_str) != Some("client_credentials") {
                    Some("grant_type")
                } else if form.get("scope").is_some_and(|s| s != scope) {
                    Some("scope")
                } else {
                    None
                };
                if let Some(what) = wrong {
                    r.lock().unwrap().push(format!("{what}: {body}"));
                    return (StatusCode::UNAUTHORIZED, JSON, r#"{"error":"invalid_client"}"#.to_string());
                }
                i.fetch_add(1, Ordering::Relaxed);
                g.lock().unwrap().push((how, form.get("scope").cloned()));
                let url = base64::engine::general_purpose::URL_SAFE_NO_PAD;
                let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
                let claims =
                    serde_json::json!({"sub": client_id, "iat": now, "exp": now + lifetime.as_secs(), "scope": scope});
                let jwt = format!("{}.{}.", url.encode(r#"{"alg":"none"}"#), url.encode(claims.to_string()));
                l.lock().unwrap().insert(jwt.clone(), now + lifetime.as_secs());
                let answer =
                    serde_json::json!({"access_token": jwt, "token_type": "Bearer", "expires_in": lifetime.as_secs()});
                (StatusCode::OK, JSON, answer.to_string())
            }
        };
        let introspect = move |headers: HeaderMap| {
            let l = live.clone();
            async move {
                let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
                let token = headers
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.strip_prefix("Bearer "))
                    .unwrap_or_default()
                    .to_string();
                match l.lock().unwrap().get(&token) {
                    Some(exp) if *exp > now => StatusCode::OK,
                    _ => StatusCode::UNAUTHORIZED,
                }
            }
        };
        let app = axum::Router::new()
            .route("/oauth2/token", axum::routing::post(token))
            .route("/introspect", axum::routing::get(introspect));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let url = format!("http://127.0.0.1:{port}/oauth2/token");
        let introspect_url = format!("http://127.0.0.1:{port}/introspect");
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        TokenEndpoint { url, issued, refused, grants, introspect_url, server }
    }

    pub fn issued(&self) -> usize {
        self.issued.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Drop for TokenEndpoint {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// `application/x-www-form-urlencoded` decoding: `+` is a space, `%XX` a byte.
fn form_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                match std::str::from_utf8(&bytes[i + 1..i + 3])
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or(())
                {
                    Ok(b) => {
                        out.push(b);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
