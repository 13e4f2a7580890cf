//! A minimal HTTP endpoint for operators and benchmarks: `/metrics` (Prometheus text), `/health`
//! (liveness: 200 with the relay's state, a standby and a snapshot included), `/ready` (readiness:
//! 200 while streaming, 503 with the state otherwise) and `/latency` (JSON quantiles of commit-to-ack latency since
//! the previous `/latency` request).

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::metrics::{Metrics, RelayState, Summary};

/// Whose metrics the endpoint serves: the connector's name and `topic.prefix`.
#[derive(Clone)]
pub struct Relay {
    pub connector: String,
    pub server: String,
    pub metrics: Arc<Metrics>,
}

/// Serves the endpoint on `listener` until `shutdown`.
pub async fn serve(listener: TcpListener, relay: Relay, shutdown: CancellationToken) {
    let app = axum::Router::new().fallback(handle).with_state(relay);
    if let Err(e) = axum::serve(listener, app).with_graceful_shutdown(shutdown.cancelled_owned()).await {
        tracing::warn!(error = %e, "the HTTP endpoint stopped");
    }
}

async fn handle(State(relay): State<Relay>, uri: Uri, headers: axum::http::HeaderMap) -> Response {
    if uri.path() == "/metrics" {
        let source =
            // `pgoutbox run`'s one connector: running, except while another instance holds the slot
            // (as a Connect task not assigned here) or before the first session starts.
            crate::exposition::Source {
                connector: &relay.connector,
                server: &relay.server,
                metrics: &relay.metrics,
                state: match relay.metrics.state() {
                    crate::metrics::RelayState::StandingBy | crate::metrics::RelayState::Starting => "UNASSIGNED",
                    _ => "RUNNING",
                },
            };
        let now =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
        let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
        let (format, content_type) = crate::exposition::negotiate(accept);
        let body = crate::exposition::render(&[source], None, now, format);
        return ([(header::CONTENT_TYPE, content_type)], body).into_response();
    }
    let (status, ctype, body) = respond(uri.path(), &relay.metrics);
    let code = status.split(' ').next().and_then(|c| c.parse().ok()).and_then(|c| StatusCode::from_u16(c).ok());
    (code.unwrap_or(StatusCode::INTERNAL_SERVER_ERROR), [(header::CONTENT_TYPE, ctype)], body).into_response()
}

fn respond(path: &str, m: &Metrics) -> (&'static str, &'static str, String) {
    match path {
        // Liveness: the process runs its loop, whatever the state (a standby or a snapshot is alive).
        // Health: alive and not stalled (the oldest unpublished event within pgoutbox.stall.threshold.ms).
        "/health" if m.stalled.load(std::sync::atomic::Ordering::Relaxed) == 1 => (
            "503 Service Unavailable",
            "text/plain",
            format!(
                "stalled: {} unpublished event(s), the oldest {}s old\n",
                m.unpublished_events.load(std::sync::atomic::Ordering::Relaxed),
                m.oldest_unpublished_ms.load(std::sync::atomic::Ordering::Relaxed) / 1000
            ),
        ),
        "/health" | "/health/live" => ("200 OK", "text/plain", format!("{}\n", m.state().name())),
        // Readiness: events flow.
        "/ready" | "/health/ready" => {
            let state = m.state();
            if state == RelayState::Streaming {
                ("200 OK", "text/plain", "streaming\n".into())
            } else {
                ("503 Service Unavailable", "text/plain", format!("{}\n", state.name()))
            }
        }
        "/latency" => {
            let (ack, received) = m.take_window();
            ("200 OK", "application/json", json(&ack, &received))
        }
        _ => ("404 Not Found", "text/plain", "not found\n".into()),
    }
}

/// Commit-to-ack quantiles at the top level; the commit-to-receipt part under `received`.
fn json(s: &Summary, received: &Summary) -> String {
    let r = received;
    format!(
        "{{\"count\":{},\"p50_us\":{},\"p90_us\":{},\"p99_us\":{},\"p999_us\":{},\"max_us\":{},\
         \"received\":{{\"count\":{},\"p50_us\":{},\"p90_us\":{},\"p99_us\":{},\"max_us\":{}}}}}\n",
        s.count, s.p50_us, s.p90_us, s.p99_us, s.p999_us, s.max_us, r.count, r.p50_us, r.p90_us, r.p99_us, r.max_us
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn health_and_readiness_follow_the_state() {
        let m = Metrics::default();
        m.set_state(RelayState::Streaming);
        assert_eq!(respond("/health", &m).0, "200 OK");
        assert_eq!(respond("/ready", &m).0, "200 OK");
        for state in [RelayState::StandingBy, RelayState::Snapshotting, RelayState::Reconnecting] {
            m.set_state(state);
            let (live, _, body) = respond("/health", &m);
            assert_eq!((live, body.trim()), ("200 OK", state.name()), "a {state:?} relay is alive");
            assert_eq!(respond("/ready", &m).0, "503 Service Unavailable", "a {state:?} relay is not ready");
        }
        assert_eq!(respond("/nope", &m).0, "404 Not Found");
    }

    /// A stall fails `/health` (naming the backlog) but not liveness: restarting cannot fix a broker.
    #[test]
    fn health_reports_a_stall_and_liveness_does_not() {
        let m = Metrics::default();
        m.set_state(RelayState::Streaming);
        m.unpublished_events.store(42, std::sync::atomic::Ordering::Relaxed);
        m.oldest_unpublished_ms.store(400_000, std::sync::atomic::Ordering::Relaxed);
        m.stalled.store(1, std::sync::atomic::Ordering::Relaxed);
        let (code, _, body) = respond("/health", &m);
        assert_eq!(
            (code, body.trim()),
            ("503 Service Unavailable", "stalled: 42 unpublished event(s), the oldest 400s old")
        );
        assert_eq!(respond("/health/live", &m).0, "200 OK");
        m.stalled.store(0, std::sync::atomic::Ordering::Relaxed);
        assert_eq!(respond("/health", &m).0, "200 OK");
    }

    /// A request that arrives in pieces (a client writing the request line and each header
    /// separately) still gets its whole answer, not a connection reset.
    #[tokio::test]
    async fn a_request_in_pieces_gets_the_whole_answer() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let metrics = Arc::new(Metrics::default());
        metrics.set_state(RelayState::StandingBy);
        let shutdown = CancellationToken::new();
        let relay = Relay { connector: "c".into(), server: "s".into(), metrics };
        tokio::spawn(serve(listener, relay, shutdown.clone()));
        let mut sock = tokio::net::TcpStream::connect(addr).await.unwrap();
        sock.set_nodelay(true).unwrap();
        for piece in ["GET /hea", "lth HTTP/1.1\r\n", "host: x\r\n", "connection: close\r\n", "\r\n"] {
            sock.write_all(piece.as_bytes()).await.unwrap();
            tokio::time::sleep(std::time::Duration::from_millis(30)).await;
        }
        let mut answer = String::new();
        sock.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
        assert!(answer.ends_with("\r\n\r\nstanding_by\n"), "{answer}");
        let mut sock = tokio::net::TcpStream::connect(addr).await.unwrap();
        sock.write_all(b"GET /nope HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").await.unwrap();
        let mut answer = String::new();
        sock.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 404 Not Found\r\n"), "{answer}");
        let mut sock = tokio::net::TcpStream::connect(addr).await.unwrap();
        sock.write_all(b"GET /metrics HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").await.unwrap();
        let mut answer = String::new();
        sock.read_to_string(&mut answer).await.unwrap();
        assert!(
            answer.contains("debezium_metrics_Connected{context=\"streaming\",name=\"s\",plugin=\"postgres\"} 0"),
            "{answer}"
        );
        shutdown.cancel();
    }
}
