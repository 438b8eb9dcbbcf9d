//! The tokio shell around [`Connection`]: accept connections, move bytes, and the few
//! things that span connections (session reinstatement, TARGET COLD RESET, shutdown) or
//! need a clock (NOP-In keepalive).
//!
//! Each connection is one task (connections spread over the runtime's workers). A task reads
//! into a large buffer, lets the connection handle every complete PDU in it, then writes all
//! responses of the batch with vectored writes.

use std::future::Future;
use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify};
use tokio::task::JoinSet;
use tracing::Instrument;

use device::Finished;

use crate::clock;
use crate::connection::Connection;
use crate::node::TargetNode;
use crate::output::Output;
use crate::portal::Portal;
use crate::sessions::{Handles, Login};

/// Seconds a stopping server gives initiators to log out after asking them to.
const LOGOUT_GRACE_SECONDS: u16 = 2;

/// Serve `nodes` on `listener` until `shutdown` completes; then stop accepting, ask every
/// logged-in initiator to log out (its connection closes after the Logout or a short grace
/// period), close the rest (I_T nexus loss for the devices) and return.
pub async fn serve(
    listener: TcpListener,
    nodes: Vec<TargetNode>,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    serve_portal(listener, Arc::new(Portal::new(nodes)), shutdown).await
}

/// [`serve`] with a portal built by the caller (custom limits, queue depth or portal group tag).
pub async fn serve_portal(
    listener: TcpListener,
    portal: Arc<Portal>,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    // Each logical unit has its driver on the wall clock for as long as we serve.
    for (n, node) in portal.nodes().iter().enumerate() {
        for (lun, unit) in node.target.units() {
            portal.drivers.start(n, lun, unit, portal.router.clone())?;
        }
    }
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut tasks = JoinSet::new();
    let mut accept_failing = false;
    let mut refusing = false;
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(a) => {
                        if std::mem::take(&mut accept_failing) {
                            tracing::info!("accepting connections again");
                        }
                        a
                    }
                    Err(e) => {
                        // Keep serving the others. Out of descriptors the pending connection
                        // stays pending and accept fails again at once: back off instead of
                        // spinning (issue 11: 98 % CPU), and say so once, not 20 times a second.
                        if !std::mem::replace(&mut accept_failing, true) {
                            tracing::warn!(error = %e, "accept failed; retrying every 50 ms");
                        }
                        tokio::time::sleep(ACCEPT_BACKOFF).await;
                        continue;
                    }
                };
                let Some(slot) = portal.sessions.admit(
                    peer.ip(),
                    portal.max_connections,
                    portal.max_connections_per_address,
                ) else {
                    if !std::mem::replace(&mut refusing, true) {
                        tracing::warn!(
                            ip = %peer.ip(),
                            total = portal.max_connections,
                            per_address = portal.max_connections_per_address,
                            "connection limit reached: new connections are closed at once"
                        );
                    }
                    drop(stream);
                    continue;
                };
                if std::mem::take(&mut refusing) {
                    tracing::info!("below the connection limits again");
                }
                let portal = portal.clone();
                let stop = stop_rx.clone();
                let span = tracing::info_span!("connection", %peer);
                tasks.spawn(
                    async move {
                        let _slot = slot;
                        tracing::debug!("accepted");
                        // A failed connection only ends itself.
                        match run_connection(stream, peer, portal, stop).await {
                            Ok(()) => tracing::debug!("closed"),
                            Err(e) => tracing::info!(error = %e, "closed"),
                        }
                    }
                    .instrument(span),
                );
            }
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
        }
    }
    tracing::info!(connections = tasks.len(), "stopping");
    // Fails only when no connection is left to receive it.
    let _ = stop_tx.send(true);
    while tasks.join_next().await.is_some() {}
    portal.drivers.stop_all();
    Ok(())
}

/// The pause after a failed accept.
const ACCEPT_BACKOFF: std::time::Duration = std::time::Duration::from_millis(50);

/// Drive one connection until either side closes it, `stop` turns true, or another
/// connection ends its session (reinstatement, cold reset).
async fn run_connection(
    mut stream: TcpStream,
    peer: std::net::SocketAddr,
    portal: Arc<Portal>,
    mut stop: watch::Receiver<bool>,
) -> io::Result<()> {
    let id = portal.sessions.id();
    let handles = Handles {
        kill: Arc::new(Notify::new()),
        logout: Arc::new(Notify::new()),
        traffic: Arc::default(),
    };
    let mut registered = false;
    let link = Link {
        peer,
        id,
        handles: &handles,
    };
    let result = serve_stream(
        &mut stream,
        link,
        portal.clone(),
        &mut stop,
        &mut registered,
    )
    .await;
    if registered {
        portal.sessions.remove(id);
    }
    // The peer may be gone already; the socket closes on drop either way.
    let _ = stream.shutdown().await;
    result
}

/// What the shell knows of a connection besides its socket.
struct Link<'a> {
    peer: std::net::SocketAddr,
    /// The connection's number in the registry.
    id: u64,
    handles: &'a Handles,
}

async fn serve_stream(
    stream: &mut TcpStream,
    link: Link<'_>,
    portal: Arc<Portal>,
    stop: &mut watch::Receiver<bool>,
    registered: &mut bool,
) -> io::Result<()> {
    let Link { peer, id, handles } = link;
    let kill = &handles.kill;
    let shared = portal.clone();
    let registry = &shared.sessions;
    stream.set_nodelay(true)?;
    let local = stream.local_addr()?.to_string();
    let send_timeout = portal.nop_in_interval.unwrap_or(SEND_TIMEOUT);
    let mut conn = Connection::new(portal, local, clock::now());
    // Tasks of this connection that finish on a logical unit's clock come back through here.
    // Each with the time it was handed over, for the portal's delivery histogram.
    let (done_tx, mut done_rx) = tokio::sync::mpsc::unbounded_channel::<(device::Ns, Finished)>();
    conn.set_mailbox(Arc::new(move |f| {
        // A closed channel means the connection has ended: its nexus loss aborted the task.
        let _closed = done_tx.send((clock::now(), f));
    }));
    let mut handed = Vec::new();
    let mut buf = vec![0u8; (2 * conn.frame_limits().max_pdu_len()).max(1 << 20)];
    let (mut start, mut end) = (0usize, 0usize);
    let mut out = Output::new();
    // One keepalive timer for the connection, re-armed only when it fires, so a busy
    // connection does not touch the timer wheel on every read.
    let armed = conn.poll_timeout();
    let idle = tokio::time::sleep_until(armed.map_or_else(far_future, clock::instant));
    tokio::pin!(idle);
    let mut stopping: Option<tokio::time::Instant> = None;
    // True when the last batch filled up before every received PDU was handled.
    let mut backlog = false;
    let result = loop {
        if !backlog {
            if end == buf.len() {
                // Move the partial PDU to the front; the buffer holds two largest PDUs.
                buf.copy_within(start..end, 0);
                end -= start;
                start = 0;
                let need = 2 * conn.frame_limits().max_pdu_len();
                if buf.len() < need {
                    buf.resize(need, 0);
                }
            }
            let grace = async {
                if let Some(deadline) = stopping {
                    tokio::time::sleep_until(deadline).await;
                }
            };
            let n = tokio::select! {
                r = stream.read(&mut buf[end..]) => match r {
                    Ok(n) => n,
                    Err(e) => break Err(e),
                },
                _ = asked_to_leave(stop, &handles.logout), if stopping.is_none() => {
                    // Ask for a Logout and give the initiator a moment to send it.
                    if !conn.request_logout(LOGOUT_GRACE_SECONDS, &mut out) {
                        break Ok(());
                    }
                    stopping = Some(
                        tokio::time::Instant::now()
                            + std::time::Duration::from_secs(u64::from(LOGOUT_GRACE_SECONDS)),
                    );
                    if let Err(e) = send(stream, &out, send_timeout, handles, stop).await {
                        break Err(e);
                    }
                    conn.recycle(&mut out);
                    continue;
                }
                Some((at, f)) = done_rx.recv() => {
                    let now = clock::now();
                    conn.complete(now, f, &mut out);
                    handed.push(at);
                    while let Ok((at, f)) = done_rx.try_recv() {
                        if out.is_full() {
                            break;
                        }
                        conn.complete(now, f, &mut out);
                        handed.push(at);
                    }
                    if let Err(e) = send(stream, &out, send_timeout, handles, stop).await {
                        break Err(e);
                    }
                    let written = clock::now();
                    let mut delivery = shared.delivery.lock();
                    for at in handed.drain(..) {
                        delivery.record(written.saturating_sub(at));
                    }
                    drop(delivery);
                    conn.recycle(&mut out);
                    continue;
                }
                _ = grace, if stopping.is_some() => break Ok(()),
                _ = kill.notified() => break Ok(()),
                _ = &mut idle, if armed.is_some() => {
                    if !conn.handle_timeout(clock::now(), &mut out) {
                        break Err(io::Error::new(io::ErrorKind::TimedOut, "initiator silent"));
                    }
                    let next = conn.poll_timeout().map_or_else(far_future, clock::instant);
                    idle.as_mut().reset(next);
                    if let Err(e) = send(stream, &out, send_timeout, handles, stop).await {
                        break Err(e);
                    }
                    conn.recycle(&mut out);
                    continue;
                }
            };
            if n == 0 {
                break Ok(());
            }
            end += n;
            handles
                .traffic
                .bytes_received
                .fetch_add(n as u64, Ordering::Relaxed);
        }
        start += conn.receive(clock::now(), &buf[start..end], &mut out);
        backlog = out.is_full();
        if start == end {
            start = 0;
            end = 0;
        }
        if !*registered {
            if let (Some(identity), Some(n)) = (conn.identity(), conn.negotiated()) {
                let login = Login {
                    identity: identity.clone(),
                    peer,
                    tsih: n.tsih,
                    authentication: n.authentication.clone(),
                    keys: n.keys.clone(),
                };
                registry.register(id, login, handles);
                *registered = true;
            }
        }
        handles
            .traffic
            .in_flight
            .store(conn.in_flight(), Ordering::Relaxed);
        if conn.take_cold_reset() {
            registry.kill_node(conn.identity().and_then(|i| i.node), id);
        }
        if conn.take_login_refused() {
            let (pause, starts) = registry
                .throttle
                .lock()
                .refused(peer.ip(), std::time::Instant::now());
            if starts {
                tracing::warn!(
                    ip = %peer.ip(),
                    "repeated failed logins from this address: its refusals now come after a \
                     pause (up to 8 s)"
                );
            }
            tokio::select! {
                _ = tokio::time::sleep(pause) => {}
                _ = kill.notified() => break Ok(()),
                _ = stop.changed() => break Ok(()),
            }
        }
        if !out.is_empty() {
            if let Err(e) = send(stream, &out, send_timeout, handles, stop).await {
                break Err(e);
            }
            conn.recycle(&mut out);
        }
        if out.close {
            break Ok(());
        }
    };
    conn.close();
    result
}

/// The server is stopping, or an operator asked for this session's logout.
async fn asked_to_leave(stop: &mut watch::Receiver<bool>, logout: &Notify) {
    tokio::select! {
        _ = stop.changed() => {}
        _ = logout.notified() => {}
    }
}

/// A deadline that never comes (an unarmed timer).
fn far_future() -> tokio::time::Instant {
    tokio::time::Instant::now() + std::time::Duration::from_secs(86_400 * 365)
}

/// How long a batch may wait for the peer to take any of it when no keepalive interval is
/// set.
const SEND_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Write a whole batch with as few `writev` calls as the kernel allows; given up when the peer takes nothing for `timeout` (it stopped reading:
/// the same rule as a silent initiator), when another connection ends the session, or when
/// the server stops: a stalled reader must not pin its session, reinstatement or shutdown
/// (issue 11).
async fn send(
    stream: &mut TcpStream,
    out: &Output,
    timeout: std::time::Duration,
    handles: &Handles,
    stop: &mut watch::Receiver<bool>,
) -> io::Result<()> {
    let gone = |why: &str| io::Error::new(io::ErrorKind::TimedOut, why.to_owned());
    let write = async {
        let total = out.len();
        let mut written = 0;
        while written < total {
            let slices = out.io_slices(written);
            let n = tokio::time::timeout(timeout, stream.write_vectored(&slices))
                .await
                .map_err(|_| gone("the initiator stopped reading"))??;
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            written += n;
            handles
                .traffic
                .bytes_sent
                .fetch_add(n as u64, Ordering::Relaxed);
        }
        Ok(())
    };
    tokio::select! {
        r = write => r,
        _ = handles.kill.notified() => Err(gone("the session was closed by another connection")),
        _ = stop.changed() => Err(gone("the server is stopping")),
    }
}
