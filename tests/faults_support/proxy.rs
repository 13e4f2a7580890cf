//! A TCP proxy that plays the network between the relay and a server.
//!
//! - `reset_all` drops every connection it carries with a TCP RST on both sides (a firewall or
//!   load balancer killing connections): both peers see an error at once.
//! - `stall_all` stops forwarding on the connections it carries, in both directions, without closing
//!   them, and hides a close from either side (a peer that vanished, a NAT entry that expired): only
//!   the peers' own timeouts can notice. Connections opened later are forwarded normally, so a peer
//!   that reconnects recovers. `resume_all` lets stalled connections flow (and close) again.
//! - `hold_requests` keeps reading what the clients of the connections it carries send, but holds it
//!   instead of forwarding it, until `release_requests` (a broker that has taken a request and not
//!   yet processed it): the client's close, even an abortive one, does not lose what was held; it is
//!   delivered on release, and the connection closes 2 s later. Connections opened later are not held.
//! - `set_rate` throttles each direction of each connection to so many bytes per second (a slow
//!   link): reading stops while the budget is spent, so TCP backpressure reaches the sender.
//! - `cut` stalls the connections it carries and every one opened later (a network partition: the
//!   peers can connect, nothing gets through), until `resume_all`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// One carried connection: its stall switch and its reset trigger.
struct Conn {
    stall: watch::Sender<bool>,
    hold: watch::Sender<bool>,
    reset: CancellationToken,
}

struct Shared {
    target: SocketAddr,
    conns: Mutex<HashMap<u64, Conn>>,
    next_id: AtomicU64,
    /// Bytes per second per direction and connection; 0 is unlimited.
    rate: AtomicU64,
    /// `cut`: connections opened now are stalled from the start.
    cut: std::sync::atomic::AtomicBool,
    accepted: AtomicU64,
    forwarded: AtomicU64,
}

pub struct Proxy {
    pub port: u16,
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
}

impl Proxy {
    /// Listens on a free loopback port and forwards to `target`.
    pub async fn start(target: SocketAddr) -> Proxy {
        Self::listening(TcpListener::bind("127.0.0.1:0").await.expect("bind proxy"), target)
    }

    /// `start`, with the smallest receive buffer the kernel allows on the clients' connections: a
    /// stall then pushes back on a client after a few kilobytes (its writes block), as a peer that
    /// stopped reading does once the buffers between them are full.
    pub async fn start_with_small_buffers(target: SocketAddr) -> Proxy {
        let socket = tokio::net::TcpSocket::new_v4().expect("proxy socket");
        socket.set_recv_buffer_size(1).expect("SO_RCVBUF");
        socket.bind(([127, 0, 0, 1], 0).into()).expect("bind proxy");
        Self::listening(socket.listen(64).expect("listen"), target)
    }

    fn listening(listener: TcpListener, target: SocketAddr) -> Proxy {
        let port = listener.local_addr().unwrap().port();
        let shared = Arc::new(Shared {
            target,
            conns: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
            rate: AtomicU64::new(0),
            cut: std::sync::atomic::AtomicBool::new(false),
            accepted: AtomicU64::new(0),
            forwarded: AtomicU64::new(0),
        });
        let s = shared.clone();
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                s.accepted.fetch_add(1, Ordering::Relaxed);
                tokio::spawn(serve(s.clone(), client));
            }
        });
        Proxy { port, shared, accept }
    }

    /// Drops every carried connection with an RST. Returns how many.
    pub fn reset_all(&self) -> usize {
        let conns = self.shared.conns.lock().unwrap();
        for c in conns.values() {
            c.reset.cancel();
        }
        conns.len()
    }

    /// Stops forwarding on every carried connection, keeping them open. Returns how many.
    pub fn stall_all(&self) -> usize {
        let conns = self.shared.conns.lock().unwrap();
        for c in conns.values() {
            let _ = c.stall.send(true);
        }
        conns.len()
    }

    /// Stalls every carried connection and every one opened from now on, until `resume_all`.
    /// Returns how many were carried.
    pub fn cut(&self) -> usize {
        self.shared.cut.store(true, Ordering::Relaxed);
        self.stall_all()
    }

    /// Lets stalled connections flow again (and deliver the closes they held back).
    pub fn resume_all(&self) {
        self.shared.cut.store(false, Ordering::Relaxed);
        for c in self.shared.conns.lock().unwrap().values() {
            let _ = c.stall.send(false);
        }
    }

    /// Holds what the clients of the current connections send (see the module's doc). Returns how
    /// many connections.
    pub fn hold_requests(&self) -> usize {
        let conns = self.shared.conns.lock().unwrap();
        for c in conns.values() {
            let _ = c.hold.send(true);
        }
        conns.len()
    }

    /// Forwards what was held, and lets the held connections flow again.
    pub fn release_requests(&self) {
        for c in self.shared.conns.lock().unwrap().values() {
            let _ = c.hold.send(false);
        }
    }

    /// Throttles every connection, current and future, to `bytes_per_sec` per direction (0: none).
    pub fn set_rate(&self, bytes_per_sec: u64) {
        self.shared.rate.store(bytes_per_sec, Ordering::Relaxed);
    }

    /// Connections carried right now.
    pub fn live(&self) -> usize {
        self.shared.conns.lock().unwrap().len()
    }

    /// Connections accepted since the start.
    pub fn accepted(&self) -> u64 {
        self.shared.accepted.load(Ordering::Relaxed)
    }

    /// Bytes forwarded since the start, both directions.
    pub fn forwarded(&self) -> u64 {
        self.shared.forwarded.load(Ordering::Relaxed)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.reset_all();
    }
}

async fn serve(shared: Arc<Shared>, client: TcpStream) {
    let upstream = match TcpStream::connect(shared.target).await {
        Ok(u) => u,
        Err(_) => {
            let _ = client.set_zero_linger();
            return;
        }
    };
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
    let (stall_tx, stall_rx) = watch::channel(shared.cut.load(Ordering::Relaxed));
    let (hold_tx, hold_rx) = watch::channel(false);
    let reset = CancellationToken::new();
    shared.conns.lock().unwrap().insert(id, Conn { stall: stall_tx.clone(), hold: hold_tx, reset: reset.clone() });
    // A `cut` between the first look and the registration.
    if shared.cut.load(Ordering::Relaxed) {
        let _ = stall_tx.send(true);
    }
    let (cr, cw) = client.into_split();
    let (ur, uw) = upstream.into_split();
    tokio::join!(
        pump(cr, uw, stall_rx.clone(), Some(hold_rx), reset.clone(), shared.clone()),
        pump(ur, cw, stall_rx, None, reset.clone(), shared.clone()),
    );
    shared.conns.lock().unwrap().remove(&id);
}

/// Waits while the connection is stalled; `false` if it was reset meanwhile.
async fn wait_unstalled(stall: &mut watch::Receiver<bool>, reset: &CancellationToken) -> bool {
    tokio::select! {
        _ = reset.cancelled() => false,
        r = stall.wait_for(|s| !*s) => r.is_ok(),
    }
}

/// Copies one direction until EOF, error or reset. A reset (or an error, which the other side must
/// see too) ends both directions with an RST: the zero linger makes the sockets' close abortive.
/// `hold` (the client's direction): while it is set, what is read is kept, not written.
async fn pump(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    mut stall: watch::Receiver<bool>,
    mut hold: Option<watch::Receiver<bool>>,
    reset: CancellationToken,
    shared: Arc<Shared>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    let mut held: Vec<u8> = Vec::new();
    let holding = |hold: &Option<watch::Receiver<bool>>| hold.as_ref().is_some_and(|h| *h.borrow());
    let mut budget_at = tokio::time::Instant::now();
    let abort = |from: &OwnedReadHalf, reset: &CancellationToken| {
        let _ = from.as_ref().set_zero_linger();
        reset.cancel();
    };
    loop {
        if !wait_unstalled(&mut stall, &reset).await {
            return abort(&from, &reset);
        }
        let rate = shared.rate.load(Ordering::Relaxed);
        // Throttled: small chunks (a tenth of a second's worth) keep the flow smooth.
        let chunk = if rate == 0 { buf.len() } else { ((rate / 10) as usize).clamp(512, buf.len()) };
        let mut waiting = hold.clone().filter(|_| !held.is_empty());
        let released = async move {
            match waiting.as_mut() {
                Some(h) => {
                    let _ = h.wait_for(|h| !*h).await;
                }
                None => std::future::pending().await,
            }
        };
        let n = tokio::select! {
            _ = reset.cancelled() => return abort(&from, &reset),
            // Stalled while waiting for data: stop reading.
            _ = async { let _ = stall.wait_for(|s| *s).await; } => continue,
            _ = released => {
                if to.write_all(&held).await.is_err() {
                    return abort(&from, &reset);
                }
                held.clear();
                continue;
            }
            r = from.read(&mut buf[..chunk]) => match r {
                Ok(0) => break,
                Ok(n) => n,
                Err(_) if !held.is_empty() => {
                    // The client is gone; what it sent before still reaches the server (which had
                    // taken it), then the server sees the connection close.
                    if let Some(h) = hold.as_mut() {
                        let _ = h.wait_for(|h| !*h).await;
                    }
                    let _ = to.write_all(&held).await;
                    return close_after_held(to).await;
                }
                Err(_) => return abort(&from, &reset),
            },
        };
        if holding(&hold) {
            held.extend_from_slice(&buf[..n]);
            continue;
        }
        if !held.is_empty() {
            if to.write_all(&held).await.is_err() {
                return abort(&from, &reset);
            }
            held.clear();
        }
        if !wait_unstalled(&mut stall, &reset).await {
            return abort(&from, &reset);
        }
        let written = tokio::select! {
            _ = reset.cancelled() => return abort(&from, &reset),
            r = to.write_all(&buf[..n]) => r,
        };
        if written.is_err() {
            return abort(&from, &reset);
        }
        shared.forwarded.fetch_add(n as u64, Ordering::Relaxed);
        if rate > 0 {
            let now = tokio::time::Instant::now();
            budget_at = budget_at.max(now) + Duration::from_secs_f64(n as f64 / rate as f64);
            tokio::select! {
                _ = reset.cancelled() => return abort(&from, &reset),
                _ = tokio::time::sleep_until(budget_at) => {}
            }
        }
    }
    // EOF: a stalled connection hides it until resumed (a dead network delivers no FIN either).
    if !wait_unstalled(&mut stall, &reset).await {
        return abort(&from, &reset);
    }
    if !held.is_empty() {
        if let Some(h) = hold.as_mut() {
            let _ = h.wait_for(|h| !*h).await;
        }
        let _ = to.write_all(&held).await;
        return close_after_held(to).await;
    }
    let _ = to.shutdown().await;
}

/// Closes the server's side after delivering what was held from a client that is gone, with the
/// server's time to take it first: a server that had the request before the close processes it, and
/// a close that came with the bytes could make it drop them.
async fn close_after_held(mut to: OwnedWriteHalf) {
    tokio::time::sleep(Duration::from_secs(2)).await;
    let _ = to.shutdown().await;
}
