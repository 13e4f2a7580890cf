//! Authentication against a fake server on a real socket, playing what a server in the middle
//! would: an AuthenticationOk in the middle of SCRAM, a cleartext request where SCRAM was asked for.

use std::time::Duration;

use bytes::{BufMut, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::*;
use crate::config::{RequireAuth, Secret, SslMode};

fn params(port: u16, require_auth: Option<&str>) -> ConnectParams {
    ConnectParams {
        host: "127.0.0.1".into(),
        port,
        user: "u".into(),
        password: Some(Secret::new("the-password".into())),
        dbname: "db".into(),
        application_name: "t".into(),
        connect_timeout: Duration::from_secs(5),
        sslmode: SslMode::Disable,
        tcp_keepalive: false,
        channel_binding: Binding::Prefer,
        require_auth: require_auth.map(|r| RequireAuth::parse(r).unwrap()),
        tls: None,
    }
}

fn auth_message(code: i32, data: &[u8]) -> BytesMut {
    let mut m = BytesMut::new();
    m.put_u8(b'R');
    m.put_i32(8 + data.len() as i32);
    m.put_i32(code);
    m.put_slice(data);
    m
}

/// A server that answers the startup with `script` (one message per client message read) and
/// returns everything the client sent.
async fn fake_server(script: Vec<BytesMut>) -> (u16, tokio::task::JoinHandle<Vec<u8>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let handle = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        let mut received = Vec::new();
        let mut buf = [0u8; 4096];
        for reply in script {
            // One client message (startup, or a password/SASL message) before each reply.
            let n = tokio::time::timeout(Duration::from_secs(2), s.read(&mut buf)).await.map_or(0, |r| r.unwrap_or(0));
            received.extend_from_slice(&buf[..n]);
            if s.write_all(&reply).await.is_err() {
                break;
            }
        }
        let n = tokio::time::timeout(Duration::from_millis(500), s.read(&mut buf)).await.map_or(0, |r| r.unwrap_or(0));
        received.extend_from_slice(&buf[..n]);
        received
    });
    (port, handle)
}

fn ready() -> BytesMut {
    let mut m = auth_message(0, &[]);
    m.put_slice(&[b'Z', 0, 0, 0, 5, b'I']);
    m
}

#[tokio::test]
async fn auth_ok_before_the_scram_signature_is_refused() {
    let (port, server) = fake_server(vec![auth_message(10, b"SCRAM-SHA-256\0\0"), ready()]).await;
    let e = ReplicationConnection::connect(&params(port, None)).await.err().expect("refused");
    assert!(matches!(e, PgError::AuthRefused(_)), "{e}");
    assert!(e.to_string().contains("before proving it knows the password"), "{e}");
    assert!(!e.is_retryable());
    server.abort();
}

#[tokio::test]
async fn cleartext_request_is_refused_unanswered_when_only_scram_is_allowed() {
    for (code, what) in [(3, "cleartext"), (5, "md5")] {
        let data: &[u8] = if code == 5 { b"salt" } else { b"" };
        let (port, server) = fake_server(vec![auth_message(code, data), ready()]).await;
        let e = ReplicationConnection::connect(&params(port, Some("scram-sha-256"))).await.err().expect("refused");
        assert!(matches!(e, PgError::AuthRefused(_)) && e.to_string().contains(what), "{e}");
        let received = server.await.unwrap();
        assert!(!received.windows(12).any(|w| w == b"the-password"), "the password was sent");
        let startup = i32::from_be_bytes(received[..4].try_into().unwrap()) as usize;
        assert!(received[startup..].first() != Some(&b'p'), "no password message at all was sent: {received:?}");
    }
}

#[tokio::test]
async fn trust_is_refused_when_require_auth_excludes_none_and_taken_otherwise() {
    let (port, server) = fake_server(vec![ready()]).await;
    let e = ReplicationConnection::connect(&params(port, Some("scram-sha-256"))).await.err().expect("refused");
    assert!(e.to_string().contains("without authentication"), "{e}");
    server.abort();
    let (port, server) = fake_server(vec![ready()]).await;
    ReplicationConnection::connect(&params(port, Some("scram-sha-256,none"))).await.expect("none allows trust");
    server.abort();
}

#[test]
fn require_auth_lists_parse_like_libpq() {
    let r = RequireAuth::parse("scram-sha-256").unwrap();
    assert!(r.scram && !r.password && !r.md5 && !r.none);
    let r = RequireAuth::parse("!password,!md5").unwrap();
    assert!(r.scram && r.none && !r.password && !r.md5);
    for bad in ["scram-sha-256,!md5", "md5,md5", "kerberos", ""] {
        assert!(RequireAuth::parse(bad).is_err(), "{bad:?}");
    }
}
