//! Bearer tokens fetched from an OAuth 2 token endpoint with the client-credentials grant, as the
//! registry clients do it, and asked for only when a schema is registered or looked up, never per
//! record:
//! - Confluent's `bearer.auth.credentials.source=OAUTHBEARER` (`OauthCredentialProvider`:
//!   `HttpJwtRetriever`, `ClientJwtValidator`, `OauthTokenCache`): a POST of
//!   `grant_type=client_credentials[&scope=…]` with the client's id and secret as HTTP Basic
//!   credentials; the `access_token` of the answer read as a JWT whose `exp` and subject claims must
//!   be there, and kept until 80% of its life has passed, but never into the last
//!   `bearer.auth.cache.expiry.buffer.seconds` (300) before it expires.
//! - Apicurio 2.x's `apicurio.auth.service.url` or `apicurio.auth.service.token.endpoint`
//!   (`OidcAuth`): the client's id and secret in the form (`grant_type=client_credentials&client_id=…
//!   &client_secret=…`), the `access_token` kept for the answer's `expires_in` less a second.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{http_call, CallError, Url, CALL_TIMEOUT};

/// Confluent's `OauthTokenCache.CACHE_EXPIRY_THRESHOLD`.
const CACHE_EXPIRY_THRESHOLD: f64 = 0.8;

/// Apicurio's `OidcAuth` default token expiration reduction.
const APICURIO_EXPIRATION_REDUCTION: Duration = Duration::from_secs(1);

/// Whose client's way of asking and keeping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Style {
    Confluent { scope: Option<String>, scope_claim: String, sub_claim: String, buffer: Duration },
    Apicurio,
}

/// The client credentials and where to exchange them.
pub struct OAuth {
    pub endpoint: Url,
    /// The key that names the endpoint, and the converter's prefix, for errors.
    pub endpoint_key: String,
    pub prefix: String,
    pub client_id: String,
    pub client_secret: String,
    pub style: Style,
    /// The token, and until when it is used (milliseconds since 1970).
    cached: Mutex<Option<(Arc<str>, u64)>>,
}

impl std::fmt::Debug for OAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuth")
            .field("endpoint", &self.endpoint.describe())
            .field("client_id", &self.client_id)
            .field("client_secret", &"***")
            .field("style", &self.style)
            .finish()
    }
}

impl PartialEq for OAuth {
    fn eq(&self, o: &Self) -> bool {
        self.endpoint == o.endpoint
            && self.client_id == o.client_id
            && self.client_secret == o.client_secret
            && self.style == o.style
    }
}

impl Eq for OAuth {}

/// Why no token could be had.
#[derive(Debug, PartialEq, Eq)]
pub enum TokenError {
    /// The endpoint did not answer, or answered with a server error: try again later.
    Unavailable(String),
    /// The endpoint refused the credentials, or its token is not one the client can use.
    Refused { status: u16, message: String },
}

impl OAuth {
    pub fn new(
        endpoint: Url,
        endpoint_key: String,
        prefix: String,
        client_id: String,
        client_secret: String,
        style: Style,
    ) -> OAuth {
        let style = match style {
            Style::Confluent { scope, scope_claim, sub_claim, buffer } => Style::Confluent {
                scope: scope.map(|s| s.trim().to_string()).filter(|s| !s.is_empty()),
                scope_claim,
                sub_claim,
                buffer,
            },
            apicurio => apicurio,
        };
        OAuth { endpoint, endpoint_key, prefix, client_id, client_secret, style, cached: Mutex::new(None) }
    }

    /// The keys that say how the token is had, for a refusal's fix.
    pub fn keys(&self) -> String {
        let p = &self.prefix;
        match self.style {
            Style::Confluent { .. } => format!(
                "{p}bearer.auth.client.id, {p}bearer.auth.client.secret and {p}bearer.auth.scope (and {p}bearer.auth.issuer.endpoint.url)"
            ),
            Style::Apicurio => format!(
                "{p}apicurio.auth.client.id and {p}apicurio.auth.client.secret (and {p}apicurio.auth.service.url with {p}apicurio.auth.realm, or {p}apicurio.auth.service.token.endpoint)"
            ),
        }
    }

    /// The `Authorization` header's value: the cached token while it is fresh, else a new one.
    pub async fn authorization(&self, tls: Option<Arc<rustls::ClientConfig>>) -> Result<String, TokenError> {
        let now = now_ms();
        if let Some((token, until)) = self.cached.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            if now < *until {
                return Ok(format!("Bearer {token}"));
            }
        }
        let (token, expires_in) = self.fetch(tls).await?;
        let now = now_ms();
        let until = match &self.style {
            Style::Confluent { scope_claim, sub_claim, buffer, .. } => {
                let claims = claims(&token, sub_claim, scope_claim)
                    .map_err(|message| TokenError::Refused { status: 200, message })?;
                if now >= claims.expires_ms {
                    tracing::warn!(endpoint = %self.endpoint.describe(), "the schema registry's OAuth token has expired already on arrival (this host's clock is later than the token's exp): check that the clocks are in sync");
                }
                cache_until(now, claims.expires_ms, claims.issued_ms, *buffer)
            }
            Style::Apicurio => {
                let expires_in = Duration::from_secs(expires_in.unwrap_or(0));
                let kept = if expires_in > APICURIO_EXPIRATION_REDUCTION {
                    expires_in - APICURIO_EXPIRATION_REDUCTION
                } else {
                    expires_in
                };
                now + kept.as_millis() as u64
            }
        };
        let header = format!("Bearer {token}");
        *self.cached.lock().unwrap_or_else(|e| e.into_inner()) = Some((token.into(), until));
        Ok(header)
    }

    /// Forgets the token (the registry refused it).
    pub fn forget(&self) {
        *self.cached.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// The token and the answer's `expires_in` (seconds).
    async fn fetch(&self, tls: Option<Arc<rustls::ClientConfig>>) -> Result<(String, Option<u64>), TokenError> {
        use base64::Engine;
        let (body, authorization) = match &self.style {
            Style::Confluent { scope, .. } => {
                let basic = base64::engine::general_purpose::STANDARD.encode(format!(
                    "{}:{}",
                    self.client_id.trim(),
                    self.client_secret.trim()
                ));
                let mut body = String::from("grant_type=client_credentials");
                if let Some(scope) = scope {
                    body.push_str("&scope=");
                    body.push_str(&form_encode(scope));
                }
                (body, Some(format!("Basic {basic}")))
            }
            Style::Apicurio => (
                format!(
                    "grant_type=client_credentials&client_id={}&client_secret={}",
                    form_encode(&self.client_id),
                    form_encode(&self.client_secret)
                ),
                None,
            ),
        };
        let headers = [("Content-Type", "application/x-www-form-urlencoded"), ("Cache-Control", "no-cache")];
        let target = if self.endpoint.path.is_empty() { "/".to_string() } else { self.endpoint.path.clone() };
        let call = http_call(&self.endpoint, tls, "POST", &target, &headers, authorization.as_deref(), Some(body));
        let (status, answer) = match tokio::time::timeout(CALL_TIMEOUT, call).await {
            Err(_) => return Err(TokenError::Unavailable(format!("no answer in {} s", CALL_TIMEOUT.as_secs()))),
            Ok(Err(CallError::Tls(reason))) => {
                return Err(TokenError::Refused {
                    status: 0,
                    message: format!("its certificate cannot be trusted: {reason}"),
                })
            }
            Ok(Err(CallError::Transport(e))) => return Err(TokenError::Unavailable(e)),
            Ok(Ok(answer)) => answer,
        };
        // Kafka's and Confluent's retriever give up on these at once and retry the others.
        let retryable = !matches!(status, 400..=407 | 409..=415 | 501 | 505) && status >= 300;
        if retryable {
            return Err(TokenError::Unavailable(format!("HTTP {status} {}", super::message(&answer))));
        }
        if status >= 300 {
            return Err(TokenError::Refused { status, message: super::message(&answer) });
        }
        let v: serde_json::Value = serde_json::from_slice(&answer)
            .map_err(|e| TokenError::Refused { status, message: format!("an answer that is not JSON ({e})") })?;
        match v["access_token"].as_str().map(str::trim) {
            Some(t) if !t.is_empty() => Ok((t.to_string(), v["expires_in"].as_u64())),
            _ => Err(TokenError::Refused {
                status,
                message: "the token endpoint response did not contain an access_token value".into(),
            }),
        }
    }
}

/// What the client reads from a token.
#[derive(Debug, PartialEq, Eq)]
struct Claims {
    expires_ms: u64,
    issued_ms: Option<u64>,
}

/// The claims `ClientJwtValidator` requires: three dot-separated parts, a JSON payload with a
/// numeric `exp`, a non-empty subject, and, when present, a numeric `iat` and a string or list
/// scope.
fn claims(token: &str, sub_claim: &str, scope_claim: &str) -> Result<Claims, String> {
    use base64::Engine;
    let parts: Vec<&str> = token.split('.').collect();
    if parts.len() != 3 {
        return Err(format!("the access token is not a JWT (it has {} parts separated by dots, not 3)", parts.len()));
    }
    let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(parts[1].trim_end_matches('='))
        .map_err(|e| format!("the access token's payload is not base64url: {e}"))?;
    let payload: serde_json::Value =
        serde_json::from_slice(&payload).map_err(|e| format!("the access token's payload is not JSON: {e}"))?;
    let exp = payload["exp"].as_f64().ok_or("the access token has no numeric `exp` claim")?;
    match &payload[sub_claim] {
        serde_json::Value::String(s) if !s.trim().is_empty() => {}
        _ => return Err(format!("the access token has no `{sub_claim}` claim (bearer.auth.sub.claim.name names it)")),
    }
    match &payload[scope_claim] {
        serde_json::Value::Null | serde_json::Value::String(_) | serde_json::Value::Array(_) => {}
        _ => return Err(format!("the access token's `{scope_claim}` claim is neither a string nor a list")),
    }
    let issued_ms = match &payload["iat"] {
        serde_json::Value::Null => None,
        v => Some((v.as_f64().ok_or("the access token's `iat` claim is not a number")? * 1000.0) as u64),
    };
    Ok(Claims { expires_ms: (exp * 1000.0) as u64, issued_ms })
}

/// `OauthTokenCache.calculateTokenExpiryTime`: 80% of the token's life from its `iat` (or now), but
/// not into the last `buffer` before it expires; when the buffer does not fit, 80% of what is left.
fn cache_until(now: u64, expires: u64, issued: Option<u64>, buffer: Duration) -> u64 {
    if now > expires {
        return expires;
    }
    let buffer = buffer.as_millis() as u64;
    if now + buffer > expires {
        return now + ((expires - now) as f64 * CACHE_EXPIRY_THRESHOLD).floor() as u64;
    }
    let start = issued.unwrap_or(now);
    let proposed = start as i128 + ((expires as i128 - start as i128) as f64 * CACHE_EXPIRY_THRESHOLD) as i128;
    (proposed.max(0) as u64).min(expires - buffer)
}

/// Java's `URLEncoder.encode(s, UTF_8)`: form encoding, a space as `+`.
fn form_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'.' | b'-' | b'*' | b'_' => out.push(b as char),
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;

    fn jwt(payload: &str) -> String {
        let e = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        format!("{}.{}.sig", e.encode(r#"{"alg":"RS256"}"#), e.encode(payload))
    }

    #[test]
    fn a_token_needs_an_expiry_and_a_subject_as_confluents_validator_does() {
        let ok = claims(&jwt(r#"{"sub":"relay","exp":2000,"iat":1000,"scope":"a b"}"#), "sub", "scope");
        assert_eq!(ok, Ok(Claims { expires_ms: 2_000_000, issued_ms: Some(1_000_000) }));
        assert!(claims(&jwt(r#"{"sub":"relay"}"#), "sub", "scope").unwrap_err().contains("`exp`"));
        assert!(claims(&jwt(r#"{"exp":2000}"#), "sub", "scope").unwrap_err().contains("`sub`"));
        assert!(claims(&jwt(r#"{"client":"relay","exp":2000}"#), "client", "scope").is_ok(), "sub.claim.name");
        assert!(claims(&jwt(r#"{"sub":"r","exp":2000,"scope":7}"#), "sub", "scope").is_err());
        assert!(claims("opaque-token", "sub", "scope").unwrap_err().contains("not a JWT"));
    }

    #[test]
    fn a_token_is_kept_for_80_percent_of_its_life_but_not_into_the_buffer() {
        let s = Duration::from_secs;
        // An hour-long token, 300 s buffer: 80% is 48 min, before the buffer.
        assert_eq!(cache_until(0, 3_600_000, Some(0), s(300)), 2_880_000);
        // A 20-minute token: 80% is 16 min, past 15 (20 less the 5-minute buffer).
        assert_eq!(cache_until(0, 1_200_000, Some(0), s(300)), 900_000);
        // A token shorter than the buffer: 80% of what is left.
        assert_eq!(cache_until(1_000, 61_000, None, s(300)), 49_000);
        // Expired on arrival: its expiry, so the next call fetches again.
        assert_eq!(cache_until(5_000, 4_000, None, s(300)), 4_000);
    }

    #[test]
    fn the_scope_is_form_encoded_as_javas_url_encoder_does() {
        assert_eq!(form_encode("schema:read registry/*"), "schema%3Aread+registry%2F*");
    }
}
