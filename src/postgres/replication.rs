//! The replication connection: startup with `replication=database`, authentication (trust, cleartext,
//! md5, SCRAM-SHA-256), replication commands, and the CopyBoth stream.
//!
//! tokio-postgres cannot speak CopyBoth, so this is a small client of its own: postgres-protocol writes
//! the frontend messages and runs SCRAM; `wire` frames what the server sends.
//!
//! The stream is read with `fill` (cancel-safe: bytes read are kept in the buffer) and `try_message`
//! (synchronous), so the pipeline's reader can `select!` between the socket, its status timer and its
//! outgoing channel without losing data.

use bytes::{Bytes, BytesMut};
use postgres_protocol::authentication::sasl::{ChannelBinding, ScramSha256, SCRAM_SHA_256, SCRAM_SHA_256_PLUS};
use postgres_protocol::message::frontend;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::wire::{self, tag, Frame, ReplicationMessage, ServerError, WireError};
use super::{ConnectParams, PgError};
use crate::config::ChannelBinding as Binding;
use crate::lsn::Lsn;

/// Where authentication stands. An AuthenticationOk is taken only where the exchange allows it:
/// never in the middle of SCRAM, before the server proved it knows the password (its signature in
/// AuthenticationSASLFinal), which a server in the middle could otherwise skip.
enum AuthState {
    Start,
    /// A cleartext or md5 password was sent.
    PasswordSent,
    Scram {
        scram: ScramSha256,
        bound: bool,
    },
    /// SCRAM finished and the server's signature checked; `bound`: over SCRAM-SHA-256-PLUS.
    Verified {
        bound: bool,
    },
}

/// How much to ask the kernel for per read. Large enough to carry many small XLogData messages per
/// syscall during catch-up.
const READ_CHUNK: usize = 256 * 1024;

/// The connection's byte stream: plain TCP, or TLS over it (tokio-util's `Either` forwards both
/// directions to whichever it holds).
type Stream = tokio_util::either::Either<TcpStream, Box<tokio_rustls::client::TlsStream<TcpStream>>>;

pub struct ReplicationConnection {
    stream: Stream,
    read_buf: BytesMut,
    write_buf: BytesMut,
}

/// The answer to IDENTIFY_SYSTEM.
#[derive(Debug, Clone)]
pub struct SystemIdentity {
    pub system_id: String,
    pub timeline: u32,
    pub xlog_pos: Lsn,
    pub dbname: Option<String>,
}

/// The replication connection's socket send buffer (the kernel doubles it for its bookkeeping).
const SEND_BUFFER: usize = 16 * 1024;

impl ReplicationConnection {
    pub async fn connect(params: &ConnectParams) -> Result<Self, PgError> {
        let addr = format!("{}:{}", params.host, params.port);
        let stream =
            tokio::time::timeout(params.connect_timeout, TcpStream::connect((params.host.as_str(), params.port)))
                .await
                .map_err(|_| PgError::ConnectTimeout { addr: addr.clone(), after: params.connect_timeout })?
                .map_err(|source| PgError::Connect { addr: addr.clone(), source })?;
        stream.set_nodelay(true).map_err(PgError::Io)?;
        if params.tcp_keepalive {
            // database.tcpKeepAlive: the kernel notices a vanished peer even on an idle connection.
            let _ = socket2::SockRef::from(&stream).set_keepalive(true);
        }
        // The client only ever sends small messages here (status updates, a few commands): a send
        // buffer the kernel does not grow to megabytes leaves less to fill before a server that
        // stopped reading blocks a status update (the server's receive buffer still comes first).
        let _ = socket2::SockRef::from(&stream).set_send_buffer_size(SEND_BUFFER);
        let stream = negotiate_tls(stream, params, &addr).await?;
        if params.channel_binding == Binding::Require && matches!(stream, Stream::Left(_)) {
            return Err(PgError::AuthRefused("database.channelBinding=require, but the connection is not TLS; set database.sslmode to require, verify-ca or verify-full".into()));
        }
        let mut conn =
            ReplicationConnection { stream, read_buf: BytesMut::with_capacity(READ_CHUNK), write_buf: BytesMut::new() };
        conn.startup(params).await?;
        Ok(conn)
    }

    async fn startup(&mut self, p: &ConnectParams) -> Result<(), PgError> {
        let mut params = vec![
            ("user", p.user.as_str()),
            ("database", p.dbname.as_str()),
            ("replication", "database"),
            ("application_name", p.application_name.as_str()),
            ("client_encoding", "UTF8"),
        ];
        params.retain(|(_, v)| !v.is_empty());
        frontend::startup_message(params, &mut self.write_buf).map_err(PgError::Io)?;
        self.flush().await?;
        let mut auth = AuthState::Start;
        loop {
            let frame = self.read_frame().await?;
            match frame.tag {
                tag::AUTHENTICATION => {
                    if let Some(next) = self.authenticate(p, &frame.body, &mut auth)? {
                        self.write_buf.extend_from_slice(&next);
                        self.flush().await?;
                    }
                }
                tag::ERROR_RESPONSE => {
                    let mut e = wire::parse_error_fields(&frame.body);
                    if e.code == "42501" && e.hint.is_none() {
                        e.hint = Some(format!("give the user the REPLICATION attribute (ALTER ROLE {} REPLICATION) or use one that has it", p.user));
                    }
                    return Err(PgError::from_server(e));
                }
                tag::READY_FOR_QUERY => return Ok(()),
                _ => {} // ParameterStatus, BackendKeyData, notices.
            }
        }
    }

    /// Answers one Authentication request; returns the bytes to send, if any. What the
    /// configuration does not allow (`database.requireAuth`, `database.channelBinding`) is refused
    /// before anything is answered, as libpq does.
    fn authenticate(&self, p: &ConnectParams, body: &Bytes, auth: &mut AuthState) -> Result<Option<BytesMut>, PgError> {
        if body.len() < 4 {
            return Err(PgError::Protocol(WireError::Malformed { what: "Authentication" }));
        }
        let code = i32::from_be_bytes([body[0], body[1], body[2], body[3]]);
        let data = &body[4..];
        let password = || {
            p.password
                .as_ref()
                .map(|s| s.expose().as_bytes())
                .ok_or_else(|| PgError::PasswordRequired { user: p.user.clone() })
        };
        fn refuse<T>(why: &str) -> Result<T, PgError> {
            Err(PgError::AuthRefused(format!(
                "{why}; refusing to authenticate (database.requireAuth / database.channelBinding)"
            )))
        }
        let allowed = |method: fn(&crate::config::RequireAuth) -> bool| p.require_auth.as_ref().map_or(true, method);
        let password_request = |what: &str| {
            if p.channel_binding == Binding::Require {
                return refuse(&format!("database.channelBinding=require, but the server asks for a {what} password, which cannot bind to the TLS channel"));
            }
            Ok(())
        };
        let mut out = BytesMut::new();
        match code {
            0 => {
                match auth {
                    AuthState::Scram { .. } => {
                        return refuse("the server said authentication succeeded before proving it knows the password (no SCRAM server signature): a server in the middle would be taken for the real one")
                    }
                    AuthState::Start if !allowed(|r| r.none) => {
                        return refuse("the server let the client in without authentication, which database.requireAuth does not allow")
                    }
                    AuthState::Verified { bound: true } => {}
                    _ if p.channel_binding == Binding::Require => {
                        return refuse("database.channelBinding=require, but the server authenticated the client without channel binding")
                    }
                    _ => {}
                }
                return Ok(None);
            }
            3 => {
                if !allowed(|r| r.password) {
                    return refuse(
                        "the server asks for a cleartext password, which database.requireAuth does not allow",
                    );
                }
                password_request("cleartext")?;
                frontend::password_message(password()?, &mut out).map_err(PgError::Io)?;
                *auth = AuthState::PasswordSent;
            }
            5 => {
                if !allowed(|r| r.md5) {
                    return refuse(
                        "the server asks for an md5-hashed password, which database.requireAuth does not allow",
                    );
                }
                password_request("md5-hashed")?;
                let salt: [u8; 4] = data
                    .get(..4)
                    .and_then(|s| s.try_into().ok())
                    .ok_or(PgError::Protocol(WireError::Malformed { what: "AuthenticationMD5Password" }))?;
                let hash = postgres_protocol::authentication::md5_hash(p.user.as_bytes(), password()?, salt);
                frontend::password_message(hash.as_bytes(), &mut out).map_err(PgError::Io)?;
                *auth = AuthState::PasswordSent;
            }
            10 => {
                if !allowed(|r| r.scram) {
                    return refuse("the server asks for SCRAM, which database.requireAuth does not allow");
                }
                if !matches!(auth, AuthState::Start) {
                    return Err(PgError::Protocol(WireError::Malformed { what: "duplicate AuthenticationSASL" }));
                }
                let offered: Vec<&[u8]> = data.split(|&b| b == 0).filter(|m| !m.is_empty()).collect();
                let (scram, mechanism, bound) = self.choose_scram(p, &offered, password()?)?;
                frontend::sasl_initial_response(mechanism, scram.message(), &mut out).map_err(PgError::Io)?;
                *auth = AuthState::Scram { scram, bound };
            }
            11 => {
                let AuthState::Scram { scram, .. } = auth else {
                    return Err(PgError::Protocol(WireError::Malformed { what: "SASLContinue" }));
                };
                scram.update(data).map_err(PgError::Scram)?;
                frontend::sasl_response(scram.message(), &mut out).map_err(PgError::Io)?;
            }
            12 => {
                let AuthState::Scram { scram, bound } = auth else {
                    return Err(PgError::Protocol(WireError::Malformed { what: "SASLFinal" }));
                };
                scram.finish(data).map_err(PgError::Scram)?;
                *auth = AuthState::Verified { bound: *bound };
                return Ok(None);
            }
            other => return Err(PgError::UnsupportedAuth { method: format!("authentication request {other}") }),
        }
        Ok(Some(out))
    }

    /// SCRAM-SHA-256-PLUS bound to the server's certificate when the connection is TLS, the server
    /// offers it and `database.channelBinding` is not `disable`; else SCRAM-SHA-256, saying `y,,`
    /// over TLS (so a server that does bind refuses a downgrade in transit) and `n,,` without.
    fn choose_scram(
        &self,
        p: &ConnectParams,
        offered: &[&[u8]],
        password: &[u8],
    ) -> Result<(ScramSha256, &'static str, bool), PgError> {
        let tls = match &self.stream {
            Stream::Right(tls) => Some(tls),
            Stream::Left(_) => None,
        };
        let plus_offered = offered.contains(&SCRAM_SHA_256_PLUS.as_bytes());
        // Whether this client can bind to this server's certificate (not to an Ed25519 or RSA-PSS
        // one, whose signature names no digest for the openssl crate).
        let mut can_bind = false;
        if tls.is_some() && plus_offered && p.channel_binding != Binding::Disable {
            let end_point = tls.and_then(|t| t.get_ref().1.peer_certificates()?.first().map(|c| c.as_ref().to_vec()));
            if let Some(hash) = end_point.as_deref().and_then(super::tls::end_point_hash) {
                let scram = ScramSha256::new(password, ChannelBinding::tls_server_end_point(hash));
                return Ok((scram, SCRAM_SHA_256_PLUS, true));
            }
        } else {
            can_bind = tls.is_some() && p.channel_binding != Binding::Disable;
        }
        if p.channel_binding == Binding::Require {
            return Err(PgError::AuthRefused("database.channelBinding=require, but the server offers no SCRAM-SHA-256-PLUS this client can bind to its certificate; refusing to authenticate".into()));
        }
        if !offered.contains(&SCRAM_SHA_256.as_bytes()) {
            return Err(PgError::UnsupportedAuth {
                method: offered.iter().map(|m| String::from_utf8_lossy(m)).collect::<Vec<_>>().join(","),
            });
        }
        // "y,,": this client could bind but the server offered no PLUS (a real server that does
        // bind then refuses: a downgrade in transit). "n,,": it cannot (no TLS, disabled, or a
        // certificate it cannot hash), and says so.
        let binding = if can_bind { ChannelBinding::unrequested() } else { ChannelBinding::unsupported() };
        Ok((ScramSha256::new(password, binding), SCRAM_SHA_256, false))
    }

    /// Writes what is buffered. Cancel-safe: the buffer drops each byte as it is written, so a
    /// write given up halfway (a status update the server does not take in time) goes on where it
    /// stopped at the next flush, and the stream never carries half a message twice.
    async fn flush(&mut self) -> Result<(), PgError> {
        self.stream.write_all_buf(&mut self.write_buf).await.map_err(PgError::Io)?;
        // Under TLS, what the TLS layer still holds goes out too.
        self.stream.flush().await.map_err(PgError::Io)
    }

    /// Reads more bytes from the server into the buffer. Cancel-safe.
    pub async fn fill(&mut self) -> Result<(), PgError> {
        self.read_buf.reserve(READ_CHUNK);
        let n = self.stream.read_buf(&mut self.read_buf).await.map_err(PgError::Io)?;
        if n == 0 {
            return Err(PgError::ConnectionClosed);
        }
        Ok(())
    }

    /// The next complete frame already buffered, if any.
    pub fn try_frame(&mut self) -> Result<Option<Frame>, PgError> {
        wire::parse_frame(&mut self.read_buf).map_err(PgError::Protocol)
    }

    async fn read_frame(&mut self) -> Result<Frame, PgError> {
        loop {
            if let Some(f) = self.try_frame()? {
                return Ok(f);
            }
            self.fill().await?;
        }
    }

    /// Runs a replication command or simple query; returns its rows as text.
    pub async fn simple_query(&mut self, sql: &str) -> Result<Vec<Vec<Option<String>>>, PgError> {
        frontend::query(sql, &mut self.write_buf).map_err(PgError::Io)?;
        self.flush().await?;
        let mut rows = Vec::new();
        let mut error: Option<ServerError> = None;
        loop {
            let frame = self.read_frame().await?;
            match frame.tag {
                tag::DATA_ROW => rows.push(wire::parse_data_row(&frame.body).map_err(PgError::Protocol)?),
                tag::ERROR_RESPONSE => error = Some(wire::parse_error_fields(&frame.body)),
                tag::READY_FOR_QUERY => {
                    return match error {
                        Some(e) => Err(PgError::from_server(e)),
                        None => Ok(rows),
                    }
                }
                _ => {}
            }
        }
    }

    pub async fn identify_system(&mut self) -> Result<SystemIdentity, PgError> {
        let rows = self.simple_query("IDENTIFY_SYSTEM").await?;
        let row = rows.first().ok_or(PgError::Protocol(WireError::Malformed { what: "IDENTIFY_SYSTEM" }))?;
        let field = |i: usize| row.get(i).cloned().flatten();
        let bad = || PgError::Protocol(WireError::Malformed { what: "IDENTIFY_SYSTEM" });
        Ok(SystemIdentity {
            system_id: field(0).ok_or_else(bad)?,
            timeline: field(1).and_then(|t| t.parse().ok()).ok_or_else(bad)?,
            xlog_pos: field(2).and_then(|l| l.parse().ok()).ok_or_else(bad)?,
            dbname: field(3),
        })
    }

    /// Creates a logical slot for pgoutput; returns its consistent point. The old `NOEXPORT_SNAPSHOT`
    /// spelling is used because every server from 10 on accepts it.
    pub async fn create_slot(&mut self, slot: &str) -> Result<Lsn, PgError> {
        let sql = format!("CREATE_REPLICATION_SLOT {} LOGICAL pgoutput NOEXPORT_SNAPSHOT", quote_ident(slot));
        let rows = self.simple_query(&sql).await?;
        rows.first()
            .and_then(|r| r.get(1).cloned().flatten())
            .and_then(|l| l.parse().ok())
            .ok_or(PgError::Protocol(WireError::Malformed { what: "CREATE_REPLICATION_SLOT" }))
    }

    /// Marks `slot` for synchronisation to standbys (PostgreSQL 17+, `ALTER_REPLICATION_SLOT ...
    /// (FAILOVER true)`): a failover slot survives a failover to a standby that synchronises it. The
    /// slot must not be in use.
    pub async fn set_failover(&mut self, slot: &str) -> Result<(), PgError> {
        self.simple_query(&format!("ALTER_REPLICATION_SLOT {} (FAILOVER true)", quote_ident(slot))).await.map(|_| ())
    }

    /// Creates a logical slot and exports the snapshot it starts from: returns its consistent point and
    /// the snapshot name, valid until this connection runs its next command. Import it with `SET
    /// TRANSACTION SNAPSHOT` on another connection to read exactly the data the slot's stream follows.
    pub async fn create_slot_exporting_snapshot(&mut self, slot: &str) -> Result<(Lsn, String), PgError> {
        let sql = format!("CREATE_REPLICATION_SLOT {} LOGICAL pgoutput EXPORT_SNAPSHOT", quote_ident(slot));
        let rows = self.simple_query(&sql).await?;
        let bad = || PgError::Protocol(WireError::Malformed { what: "CREATE_REPLICATION_SLOT" });
        let row = rows.first().ok_or_else(bad)?;
        let lsn = row.get(1).cloned().flatten().and_then(|l| l.parse().ok()).ok_or_else(bad)?;
        let name = row.get(2).cloned().flatten().ok_or_else(bad)?;
        Ok((lsn, name))
    }

    /// Enters CopyBoth mode streaming `slot` from `start` with pgoutput protocol version 1, with
    /// logical decoding messages when `messages` (PostgreSQL 14+; they are not filtered by the
    /// publication).
    pub async fn start_replication(
        &mut self,
        slot: &str,
        start: Lsn,
        publication: &str,
        messages: bool,
    ) -> Result<(), PgError> {
        let sql = format!(
            "START_REPLICATION SLOT {} LOGICAL {} (proto_version '1', publication_names {}{})",
            quote_ident(slot),
            start,
            quote_literal(&quote_ident(publication)),
            if messages { ", messages 'true'" } else { "" },
        );
        frontend::query(&sql, &mut self.write_buf).map_err(PgError::Io)?;
        self.flush().await?;
        let mut error = None;
        loop {
            let frame = self.read_frame().await?;
            match frame.tag {
                tag::COPY_BOTH_RESPONSE => return Ok(()),
                tag::ERROR_RESPONSE => error = Some(wire::parse_error_fields(&frame.body)),
                tag::READY_FOR_QUERY => {
                    return Err(error
                        .map(PgError::from_server)
                        .unwrap_or(PgError::Protocol(WireError::Malformed { what: "START_REPLICATION response" })))
                }
                _ => {}
            }
        }
    }

    /// The next replication message already buffered, if any. `Err(StreamEnded)` when the server ends
    /// the CopyBoth stream.
    pub fn try_message(&mut self) -> Result<Option<ReplicationMessage>, PgError> {
        loop {
            let Some(frame) = self.try_frame()? else { return Ok(None) };
            match frame.tag {
                tag::COPY_DATA => return wire::parse_copy_data(frame.body).map(Some).map_err(PgError::Protocol),
                tag::ERROR_RESPONSE => return Err(PgError::from_server(wire::parse_error_fields(&frame.body))),
                tag::COPY_DONE | tag::COMMAND_COMPLETE | tag::READY_FOR_QUERY => return Err(PgError::StreamEnded),
                tag::NOTICE_RESPONSE => {
                    tracing::info!(notice = %wire::parse_error_fields(&frame.body), "server notice");
                }
                _ => {}
            }
        }
    }

    pub async fn send_status(&mut self, write: Lsn, flush: Lsn, reply: bool) -> Result<(), PgError> {
        wire::standby_status_update(&mut self.write_buf, write, flush, flush, reply);
        self.flush().await
    }

    /// Leaves CopyBoth mode the way pg_recvlogical does: CopyDone, then read (and drop) what the
    /// server still sends until it ends the stream, so the status update just sent is read by the
    /// server before the connection closes. Bounded by `deadline`.
    pub async fn end_copy(&mut self, deadline: std::time::Duration) {
        frontend::copy_done(&mut self.write_buf);
        let wait = async {
            if self.flush().await.is_err() {
                return;
            }
            loop {
                match self.try_frame() {
                    Ok(Some(f))
                        if matches!(
                            f.tag,
                            tag::COPY_DONE | tag::COMMAND_COMPLETE | tag::READY_FOR_QUERY | tag::ERROR_RESPONSE
                        ) =>
                    {
                        return
                    }
                    Ok(Some(_)) => continue,
                    Ok(None) => {
                        if self.fill().await.is_err() {
                            return;
                        }
                    }
                    Err(_) => return,
                }
            }
        };
        let _ = tokio::time::timeout(deadline, wait).await;
    }

    /// Ends the session politely; errors are irrelevant at this point.
    /// Bounded: a server that stopped reading does not hold the relay here.
    pub async fn terminate(mut self) {
        frontend::terminate(&mut self.write_buf);
        let _ = tokio::time::timeout(std::time::Duration::from_secs(1), async {
            let _ = self.flush().await;
            let _ = self.stream.shutdown().await;
        })
        .await;
    }
}

/// Sends SSLRequest when the sslmode asks for TLS; upgrades if the server agrees.
async fn negotiate_tls(mut tcp: TcpStream, params: &ConnectParams, addr: &str) -> Result<Stream, PgError> {
    let (want, must) = super::tls::wants_tls(params.sslmode);
    if !want {
        return Ok(Stream::Left(tcp));
    }
    let config = params
        .tls
        .clone()
        .ok_or_else(|| PgError::Tls("the TLS configuration could not be built (see the error above)".into()))?;
    let mut req = BytesMut::new();
    frontend::ssl_request(&mut req);
    tcp.write_all(&req).await.map_err(PgError::Io)?;
    let mut answer = [0u8; 1];
    tcp.read_exact(&mut answer).await.map_err(PgError::Io)?;
    match answer[0] {
        b'S' => {
            let name = super::tls::server_name(&params.host).map_err(|e| PgError::Tls(e.to_string()))?;
            let tls = tokio_rustls::TlsConnector::from(config)
                .connect(name, tcp)
                .await
                .map_err(|e| PgError::Tls(e.to_string()))?;
            Ok(Stream::Right(Box::new(tls)))
        }
        b'N' if !must => Ok(Stream::Left(tcp)),
        b'N' => Err(PgError::TlsRefused(addr.to_string())),
        _ => Err(PgError::Protocol(WireError::Malformed { what: "SSLRequest answer" })),
    }
}

/// Quotes an SQL identifier.
pub fn quote_ident(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}

/// Quotes an SQL string literal.
pub fn quote_literal(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

#[cfg(test)]
mod auth_tests;
