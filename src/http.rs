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

use crate::lsn::Lsn;
use crate::metrics::{Metrics, RelayState, Summary};

/// Serves the endpoint on `listener` until `shutdown`.
pub async fn serve(listener: TcpListener, metrics: Arc<Metrics>, shutdown: CancellationToken) {
    let app = axum::Router::new().fallback(handle).with_state(metrics);
    if let Err(e) = axum::serve(listener, app).with_graceful_shutdown(shutdown.cancelled_owned()).await {
        tracing::warn!(error = %e, "the HTTP endpoint stopped");
    }
}

async fn handle(State(metrics): State<Arc<Metrics>>, uri: Uri) -> Response {
    let (status, ctype, body) = respond(uri.path(), &metrics);
    let code = status.split(' ').next().and_then(|c| c.parse().ok()).and_then(|c| StatusCode::from_u16(c).ok());
    (code.unwrap_or(StatusCode::INTERNAL_SERVER_ERROR), [(header::CONTENT_TYPE, ctype)], body).into_response()
}

fn respond(path: &str, m: &Metrics) -> (&'static str, &'static str, String) {
    match path {
        "/metrics" => ("200 OK", "text/plain; version=0.0.4", prometheus(m)),
        // Liveness: the process runs its loop, whatever the state (a standby or a snapshot is alive).
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

fn prometheus(m: &Metrics) -> String {
    let g = Metrics::get;
    let t = m.total();
    let secs = |us: u64| us as f64 / 1e6;
    format!(
        "# TYPE pgoutbox_events_acked_total counter\npgoutbox_events_acked_total {}\n\
         # TYPE pgoutbox_transactions_confirmed_total counter\npgoutbox_transactions_confirmed_total {}\n\
         # TYPE pgoutbox_confirmed_lsn gauge\npgoutbox_confirmed_lsn {}\n\
         # HELP pgoutbox_confirmed_lsn_text the confirmed LSN as PostgreSQL prints it\n# TYPE pgoutbox_confirmed_lsn_text gauge\npgoutbox_confirmed_lsn_text{{lsn=\"{}\"}} 1\n\
         # TYPE pgoutbox_received_lsn gauge\npgoutbox_received_lsn {}\n\
         # TYPE pgoutbox_streaming gauge\npgoutbox_streaming {}\n\
         # TYPE pgoutbox_sessions_total counter\npgoutbox_sessions_total {}\n\
         # HELP pgoutbox_unacknowledged_wait_seconds how long the oldest unacknowledged event has waited\n# TYPE pgoutbox_unacknowledged_wait_seconds gauge\npgoutbox_unacknowledged_wait_seconds {}\n\
         # TYPE pgoutbox_commit_to_ack_seconds summary\n\
         pgoutbox_commit_to_ack_seconds{{quantile=\"0.5\"}} {}\npgoutbox_commit_to_ack_seconds{{quantile=\"0.99\"}} {}\n\
         pgoutbox_commit_to_ack_seconds{{quantile=\"0.999\"}} {}\npgoutbox_commit_to_ack_seconds_sum {}\npgoutbox_commit_to_ack_seconds_count {}\n",
        g(&m.events_acked),
        g(&m.transactions_confirmed),
        g(&m.confirmed_lsn),
        Lsn(g(&m.confirmed_lsn)),
        g(&m.received_lsn),
        u8::from(m.state() == RelayState::Streaming),
        g(&m.sessions),
        g(&m.unacknowledged_wait_ms) as f64 / 1e3,
        secs(t.p50_us),
        secs(t.p99_us),
        secs(t.p999_us),
        secs(t.sum_us),
        t.count
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    fn sample(text: &str, name: &str) -> String {
        let line = text
            .lines()
            .find(|l| l.split(' ').next() == Some(name))
            .unwrap_or_else(|| panic!("{name} missing:\n{text}"));
        line[name.len() + 1..].to_string()
    }

    #[test]
    fn metrics_carry_the_counters_and_the_unacknowledged_wait() {
        let m = Metrics::default();
        m.events_acked.store(42, Ordering::Relaxed);
        m.confirmed_lsn.store(0x1_0000_0010, Ordering::Relaxed);
        m.set_state(RelayState::Streaming);
        m.unacknowledged_wait_ms.store(31_500, Ordering::Relaxed);
        let (status, _, text) = respond("/metrics", &m);
        assert_eq!(status, "200 OK");
        assert_eq!(sample(&text, "pgoutbox_events_acked_total"), "42");
        assert_eq!(sample(&text, "pgoutbox_confirmed_lsn"), "4294967312");
        assert_eq!(sample(&text, "pgoutbox_confirmed_lsn_text{lsn=\"1/10\"}"), "1");
        assert_eq!(sample(&text, "pgoutbox_streaming"), "1");
        assert_eq!(sample(&text, "pgoutbox_unacknowledged_wait_seconds"), "31.5");
        assert_eq!(respond("/health", &m).0, "200 OK");
        assert_eq!(respond("/ready", &m).0, "200 OK");
        for state in [RelayState::StandingBy, RelayState::Snapshotting, RelayState::Reconnecting] {
            m.set_state(state);
            let (live, _, body) = respond("/health", &m);
            assert_eq!((live, body.trim()), ("200 OK", state.name()), "a {state:?} relay is alive");
            assert_eq!(respond("/ready", &m).0, "503 Service Unavailable", "a {state:?} relay is not ready");
        }
        assert_eq!(sample(&respond("/metrics", &m).2, "pgoutbox_streaming"), "0");
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
        tokio::spawn(serve(listener, metrics, shutdown.clone()));
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
        shutdown.cancel();
    }
}
