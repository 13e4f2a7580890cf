//! `database.requireAuth` on the SQL connection. tokio-postgres, which runs it, answers whatever
//! authentication the server asks for; libpq's `require_auth` (pgjdbc's `requireAuth`) refuses a
//! request of a kind the operator did not allow before anything is answered, so a server in the
//! middle cannot make the client send its password in clear or as an md5 hash. The replication
//! connection, our own framing, checks each request itself (replication.rs); this guard does the same
//! for tokio-postgres by reading the server's messages as they arrive, below tokio-postgres (on the
//! decrypted stream when TLS is on), until authentication is over: a request that is not allowed
//! ends the connection with an error before tokio-postgres sees it.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::tls::{ChannelBinding, TlsConnect, TlsStream};

use crate::config::RequireAuth;

/// Why the guard ended the connection (found in the error's causes by the caller).
#[derive(Debug)]
pub struct Refusal(pub String);

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refusal {}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// The server's one-byte answer to an SSLRequest: `S` (TLS follows: the TLS stream's own guard
    /// takes over) or `N` (plain messages follow).
    SslAnswer,
    /// Reading the server's messages until authentication is over.
    Messages,
    /// Authentication is over (or happens inside TLS): bytes pass untouched.
    Passive,
}

/// Where the reader is in the server's message stream.
#[derive(Debug)]
struct Parser {
    phase: Phase,
    policy: RequireAuth,
    /// The current message's header (type byte and length), as far as read.
    header: [u8; 5],
    header_len: usize,
    /// Bytes of the current message's body not read yet.
    body_left: usize,
    /// An Authentication message's request code, as far as read.
    code: [u8; 4],
    code_len: usize,
    /// Whether the server asked for any authentication (a bare AuthenticationOk is `none`).
    asked: bool,
}

impl Parser {
    fn new(policy: RequireAuth, phase: Phase) -> Parser {
        Parser { phase, policy, header: [0; 5], header_len: 0, body_left: 0, code: [0; 4], code_len: 0, asked: false }
    }

    /// Reads what the server sent next; a request the policy does not allow is refused.
    fn feed(&mut self, mut bytes: &[u8]) -> Result<(), Refusal> {
        while !bytes.is_empty() {
            match self.phase {
                Phase::Passive => return Ok(()),
                Phase::SslAnswer => {
                    self.phase = if bytes[0] == b'S' { Phase::Passive } else { Phase::Messages };
                    bytes = &bytes[1..];
                }
                Phase::Messages if self.header_len < 5 => {
                    let n = (5 - self.header_len).min(bytes.len());
                    self.header[self.header_len..self.header_len + n].copy_from_slice(&bytes[..n]);
                    self.header_len += n;
                    bytes = &bytes[n..];
                    if self.header_len == 5 {
                        let len = u32::from_be_bytes([self.header[1], self.header[2], self.header[3], self.header[4]]);
                        self.body_left = (len as usize).saturating_sub(4);
                        self.code_len = 0;
                        self.end_if_read();
                    }
                }
                Phase::Messages => {
                    if self.header[0] == b'R' && self.code_len < 4 {
                        let n = (4 - self.code_len).min(bytes.len()).min(self.body_left);
                        self.code[self.code_len..self.code_len + n].copy_from_slice(&bytes[..n]);
                        self.code_len += n;
                        self.body_left -= n;
                        bytes = &bytes[n..];
                        if self.code_len == 4 {
                            self.request(i32::from_be_bytes(self.code))?;
                        }
                    } else {
                        let n = self.body_left.min(bytes.len());
                        self.body_left -= n;
                        bytes = &bytes[n..];
                    }
                    self.end_if_read();
                }
            }
        }
        Ok(())
    }

    fn end_if_read(&mut self) {
        if self.header_len == 5 && self.body_left == 0 {
            self.header_len = 0;
        }
    }

    /// One Authentication request, checked as libpq's require_auth checks it.
    fn request(&mut self, code: i32) -> Result<(), Refusal> {
        let refuse = |why: &str| {
            Err(Refusal(format!("{why}; refusing to authenticate the SQL connection (database.requireAuth)")))
        };
        match code {
            0 => {
                if !self.asked && !self.policy.none {
                    return refuse("the server let the client in without authentication, which database.requireAuth does not allow");
                }
                self.phase = Phase::Passive;
            }
            3 if !self.policy.password => {
                return refuse("the server asks for a cleartext password, which database.requireAuth does not allow")
            }
            5 if !self.policy.md5 => {
                return refuse("the server asks for an md5-hashed password, which database.requireAuth does not allow")
            }
            10 if !self.policy.scram => {
                return refuse("the server asks for SCRAM, which database.requireAuth does not allow")
            }
            // What pgoutbox cannot answer (GSSAPI, SSPI) tokio-postgres refuses itself.
            _ => {}
        }
        // SASL's continuation and final messages follow a request already counted.
        self.asked |= !matches!(code, 0 | 11 | 12);
        Ok(())
    }
}

/// A stream whose reads pass through the guard until authentication is over.
pub struct AuthGuard<S> {
    inner: S,
    parser: Parser,
}

impl<S> AuthGuard<S> {
    /// Under a plain connection: `tls_asked` when the client sends an SSLRequest first (the server's
    /// one-byte answer comes before any message).
    pub fn plain(inner: S, policy: RequireAuth, tls_asked: bool) -> AuthGuard<S> {
        AuthGuard { inner, parser: Parser::new(policy, if tls_asked { Phase::SslAnswer } else { Phase::Messages }) }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for AuthGuard<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let me = &mut *self;
        match Pin::new(&mut me.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) if me.parser.phase != Phase::Passive => match me.parser.feed(&buf.filled()[before..]) {
                Ok(()) => Poll::Ready(Ok(())),
                Err(refusal) => Poll::Ready(Err(io::Error::new(io::ErrorKind::PermissionDenied, refusal))),
            },
            other => other,
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for AuthGuard<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl<S: TlsStream + Unpin> TlsStream for AuthGuard<S> {
    fn channel_binding(&self) -> ChannelBinding {
        self.inner.channel_binding()
    }
}

/// A TLS connector whose stream is guarded: the server's messages inside TLS are checked.
pub struct GuardedTls<T> {
    pub inner: T,
    pub policy: RequireAuth,
}

impl<S, T> TlsConnect<S> for GuardedTls<T>
where
    T: TlsConnect<S>,
    T::Future: Send + 'static,
{
    type Stream = AuthGuard<T::Stream>;
    type Error = T::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Stream, T::Error>> + Send>>;

    fn connect(self, stream: S) -> Self::Future {
        let policy = self.policy;
        let handshake = self.inner.connect(stream);
        Box::pin(async move {
            handshake.await.map(|inner| AuthGuard { inner, parser: Parser::new(policy, Phase::Messages) })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auth(code: i32) -> Vec<u8> {
        let mut m = vec![b'R'];
        m.extend_from_slice(&8i32.to_be_bytes());
        m.extend_from_slice(&code.to_be_bytes());
        m
    }

    /// Feeds `bytes` one chunk size at a time, as the socket may cut them anywhere.
    fn feed_in(policy: &str, phase: Phase, bytes: &[u8], chunk: usize) -> Result<Phase, String> {
        let mut p = Parser::new(RequireAuth::parse(policy).unwrap(), phase);
        for c in bytes.chunks(chunk) {
            p.feed(c).map_err(|r| r.0)?;
        }
        Ok(p.phase)
    }

    /// Against a server on a socket that asks for a cleartext (then an md5) password: the SQL
    /// connection, with SCRAM only allowed, is refused naming the key, and no password message is
    /// sent. tokio-postgres alone answers it (run here before the guard).
    #[tokio::test]
    async fn the_sql_connection_refuses_a_password_request_unanswered() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        for (code, what) in [(3i32, "cleartext"), (5, "md5")] {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let port = listener.local_addr().unwrap().port();
            let server = tokio::spawn(async move {
                let (mut s, _) = listener.accept().await.unwrap();
                let mut buf = vec![0u8; 4096];
                let n = s.read(&mut buf).await.unwrap();
                let mut request = vec![b'R'];
                let body: &[u8] = if code == 5 { b"salt" } else { b"" };
                request.extend_from_slice(&(8 + body.len() as i32).to_be_bytes());
                request.extend_from_slice(&code.to_be_bytes());
                request.extend_from_slice(body);
                s.write_all(&request).await.unwrap();
                let mut after = vec![0u8; 4096];
                let m = tokio::time::timeout(std::time::Duration::from_millis(500), s.read(&mut after))
                    .await
                    .map_or(0, |r| r.unwrap_or(0));
                (buf[..n].to_vec(), after[..m].to_vec())
            });
            let params = super::super::ConnectParams {
                host: "127.0.0.1".into(),
                port,
                user: "u".into(),
                password: Some(crate::config::Secret::new("the-password".into())),
                dbname: "db".into(),
                application_name: "t".into(),
                connect_timeout: std::time::Duration::from_secs(5),
                sslmode: crate::config::SslMode::Disable,
                tcp_keepalive: false,
                channel_binding: crate::config::ChannelBinding::Prefer,
                require_auth: Some(RequireAuth::parse("scram-sha-256").unwrap()),
                tls: None,
            };
            let e = super::super::setup::connect_sql(&params).await.expect_err("refused");
            let text = e.to_string();
            assert!(matches!(e, super::super::PgError::AuthRefused(_)), "{text}");
            assert!(text.contains(what) && text.contains("database.requireAuth"), "{text}");
            assert!(!e.is_retryable());
            let (startup, after) = server.await.unwrap();
            assert!(!startup.is_empty(), "the client sent its startup");
            assert!(after.first() != Some(&b'p'), "a password message was sent: {after:?}");
            assert!(!after.windows(12).any(|w| w == b"the-password"), "the password was sent");
        }
    }

    #[test]
    fn requests_are_checked_wherever_the_bytes_are_cut() {
        let notice = [b'N', 0, 0, 0, 6, b'x', 0];
        for chunk in [1, 2, 3, 5, 64] {
            // SCRAM allowed: the exchange (10, 11, 12) then Ok ends the guard's work.
            let mut scram = notice.to_vec();
            scram.extend(auth(10));
            scram.extend(auth(11));
            scram.extend(auth(12));
            scram.extend(auth(0));
            assert_eq!(feed_in("scram-sha-256", Phase::Messages, &scram, chunk), Ok(Phase::Passive));
            for (code, what) in [(3, "cleartext"), (5, "md5")] {
                let e = feed_in("scram-sha-256", Phase::Messages, &auth(code), chunk).unwrap_err();
                assert!(e.contains(what) && e.contains("database.requireAuth"), "{e}");
            }
            let e = feed_in("scram-sha-256", Phase::Messages, &auth(0), chunk).unwrap_err();
            assert!(e.contains("without authentication"), "{e}");
            assert_eq!(feed_in("scram-sha-256,none", Phase::Messages, &auth(0), chunk), Ok(Phase::Passive));
            // A refused SSLRequest: the messages follow in plain.
            let mut plain = vec![b'N'];
            plain.extend(auth(3));
            assert!(feed_in("scram-sha-256", Phase::SslAnswer, &plain, chunk).is_err());
            // Accepted: TLS follows, checked by the TLS stream's own guard.
            assert_eq!(feed_in("scram-sha-256", Phase::SslAnswer, b"S\x16\x03\x03", chunk), Ok(Phase::Passive));
        }
    }
}
