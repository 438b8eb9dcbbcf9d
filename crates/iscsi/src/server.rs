//! The tokio shell around [`Connection`]: accept connections, move bytes, nothing else.
//!
//! Each connection is one task (connections spread over the runtime's workers). A task reads
//! into a large buffer, lets the connection handle every complete PDU in it, then writes all
//! responses of the batch with vectored writes.

use std::future::Future;
use std::io;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::connection::Connection;
use crate::node::TargetNode;
use crate::output::Output;
use crate::portal::Portal;

/// Serve `nodes` on `listener` until `shutdown` completes; then stop accepting, close every
/// connection (I_T nexus loss for the devices) and return.
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
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut tasks = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => {
                let (stream, _) = match accepted {
                    Ok(a) => a,
                    // Running out of descriptors or a connection reset before accept: keep
                    // serving the others.
                    Err(_) => continue,
                };
                let portal = portal.clone();
                let stop = stop_rx.clone();
                tasks.spawn(async move {
                    // A failed connection only ends itself.
                    let _ = run_connection(stream, portal, stop).await;
                });
            }
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
        }
    }
    let _ = stop_tx.send(true);
    while tasks.join_next().await.is_some() {}
    Ok(())
}

/// Drive one connection until either side closes it or `stop` turns true.
pub async fn run_connection(
    mut stream: TcpStream,
    portal: Arc<Portal>,
    mut stop: watch::Receiver<bool>,
) -> io::Result<()> {
    stream.set_nodelay(true)?;
    let local = stream.local_addr()?.to_string();
    let mut conn = Connection::new(portal, local);
    let mut buf = vec![0u8; (2 * conn.frame_limits().max_pdu_len()).max(1 << 20)];
    let (mut start, mut end) = (0usize, 0usize);
    let mut out = Output::new();
    let result = loop {
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
        let n = tokio::select! {
            r = stream.read(&mut buf[end..]) => match r {
                Ok(n) => n,
                Err(e) => break Err(e),
            },
            _ = stop.changed() => break Ok(()),
        };
        if n == 0 {
            break Ok(());
        }
        end += n;
        start += conn.receive(&buf[start..end], &mut out);
        if start == end {
            start = 0;
            end = 0;
        }
        if !out.is_empty() {
            if let Err(e) = write_output(&mut stream, &out).await {
                break Err(e);
            }
            conn.recycle(&mut out);
        }
        if out.close {
            break Ok(());
        }
    };
    conn.close();
    let _ = stream.shutdown().await;
    result
}

/// Write a whole batch with as few `writev` calls as the kernel allows.
pub async fn write_output(stream: &mut TcpStream, out: &Output) -> io::Result<()> {
    let total = out.len();
    let mut written = 0;
    while written < total {
        let slices = out.io_slices(written);
        let n = stream.write_vectored(&slices).await?;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        written += n;
    }
    Ok(())
}
