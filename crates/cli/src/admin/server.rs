//! The admin socket's listener: one task accepts, one task per connection reads request
//! lines and answers each in order; the verbs run on blocking threads.
//!
//! Access: the socket file is mode 0600, set right after bind (before the first accept), so
//! only the server's user (and root) can connect; peers of another uid that still get through
//! (a socket made while the mode was the umask's, a directory with looser permissions) are
//! refused by their SO_PEERCRED uid.

use super::proto::{self, Response, MAX_LINE};
use super::{dispatch, Admin, Peer};
use anyhow::{bail, Context};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};

/// A served admin socket: stops accepting and removes its file when dropped.
pub struct AdminServer {
    path: PathBuf,
    /// The socket file's identity, so that a file another server put there since is kept.
    inode: (u64, u64),
    task: tokio::task::JoinHandle<()>,
}

impl AdminServer {
    /// Binds `path` (replacing a stale socket, refusing a live one) and serves `admin` on it.
    /// Must be called within a tokio runtime.
    pub fn start(path: &Path, admin: Arc<dyn Admin>) -> anyhow::Result<AdminServer> {
        let listener = bind(path)?;
        let meta = std::fs::metadata(path).with_context(|| format!("{}", path.display()))?;
        let uid = rustix::process::geteuid().as_raw();
        let task = tokio::spawn(accept(listener, admin, uid));
        Ok(AdminServer {
            path: path.to_path_buf(),
            inode: (meta.dev(), meta.ino()),
            task,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for AdminServer {
    fn drop(&mut self) {
        self.task.abort();
        let ours =
            std::fs::symlink_metadata(&self.path).is_ok_and(|m| (m.dev(), m.ino()) == self.inode);
        if ours {
            if let Err(e) = std::fs::remove_file(&self.path) {
                tracing::warn!(path = %self.path.display(), error = %e, "removing the admin socket");
            }
        }
    }
}

/// Binds a Unix listener at `path` with mode 0600. An existing socket that accepts a
/// connection belongs to a running server: refused. One that refuses it is stale (a server
/// that was killed): removed.
fn bind(path: &Path) -> anyhow::Result<UnixListener> {
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.file_type().is_socket() {
            bail!(
                "admin socket {}: the path exists and is not a socket; remove it or give \
                 another --admin-socket",
                path.display()
            );
        }
        match std::os::unix::net::UnixStream::connect(path) {
            Ok(_) => bail!(
                "another stint serve listens on {}; stop it or give another --admin-socket",
                path.display()
            ),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                tracing::info!(path = %path.display(), "removing a stale admin socket");
                std::fs::remove_file(path)
                    .with_context(|| format!("removing stale admin socket {}", path.display()))?;
            }
            Err(e) => {
                return Err(e).with_context(|| {
                    format!(
                        "admin socket {}: cannot tell whether a server uses it",
                        path.display()
                    )
                })
            }
        }
    }
    let listener = UnixListener::bind(path)
        .with_context(|| format!("cannot listen on admin socket {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("admin socket {}: chmod 600", path.display()))?;
    Ok(listener)
}

async fn accept(listener: UnixListener, admin: Arc<dyn Admin>, uid: u32) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                tokio::spawn(connection(stream, admin.clone(), uid));
            }
            Err(e) => {
                // Out of file descriptors, typically: wait rather than spin.
                tracing::warn!(error = %e, "admin socket: accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    }
}

async fn connection(stream: UnixStream, admin: Arc<dyn Admin>, uid: u32) {
    let peer = match stream.peer_cred() {
        Ok(c) => Peer {
            uid: c.uid(),
            pid: c.pid(),
        },
        Err(e) => {
            tracing::warn!(error = %e, "admin socket: no peer credentials; connection closed");
            return;
        }
    };
    let (read, mut write) = stream.into_split();
    if !allowed(peer.uid, uid) {
        tracing::warn!(%peer, "admin socket: refused a connection of another user");
        let refusal = Response::error(format!(
            "uid {} may not use this admin socket (the server runs as uid {uid}; root may)",
            peer.uid
        ));
        let _ = send(&mut write, &refusal).await;
        return;
    }
    let mut read = BufReader::new(read);
    let mut line = Vec::new();
    loop {
        line.clear();
        let response = match read_line(&mut read, &mut line).await {
            Ok(Line::End) => return,
            Ok(Line::TooLong) => Response::error(format!(
                "request line longer than {MAX_LINE} bytes; refused"
            )),
            Ok(Line::Complete) => answer(&line, &admin, peer).await,
            Err(e) => {
                tracing::debug!(error = %e, "admin socket: read failed");
                return;
            }
        };
        if send(&mut write, &response).await.is_err() {
            return;
        }
    }
}

/// Whether a peer of uid `peer` may use the socket of a server running as `server`.
fn allowed(peer: u32, server: u32) -> bool {
    peer == server || peer == 0
}

async fn answer(line: &[u8], admin: &Arc<dyn Admin>, peer: Peer) -> Response {
    let request = match std::str::from_utf8(line) {
        Ok(text) => proto::parse_request(text.trim_end_matches(['\n', '\r'])),
        Err(e) => Err(format!("not a JSON object: the line is not UTF-8 ({e})")),
    };
    match request {
        Err(e) => Response::error(e),
        Ok(request) => {
            let admin = admin.clone();
            let verb = request.verb();
            tokio::task::spawn_blocking(move || dispatch(&*admin, &request, &peer))
                .await
                .unwrap_or_else(|e| {
                    tracing::error!(verb, error = %e, "admin request failed");
                    Response::error(format!("{verb} failed inside the server: {e}"))
                })
        }
    }
}

enum Line {
    Complete,
    /// Over [`MAX_LINE`]: the rest of it was read and dropped, up to its newline.
    TooLong,
    /// The peer closed the connection (a last line without a newline still counts).
    End,
}

/// Reads one line into `line` without buffering more than [`MAX_LINE`] bytes of it.
async fn read_line(
    read: &mut BufReader<tokio::net::unix::OwnedReadHalf>,
    line: &mut Vec<u8>,
) -> std::io::Result<Line> {
    let mut too_long = false;
    loop {
        let buf = read.fill_buf().await?;
        if buf.is_empty() {
            return Ok(match (too_long, line.is_empty()) {
                (true, _) => Line::TooLong,
                (false, true) => Line::End,
                (false, false) => Line::Complete,
            });
        }
        let (chunk, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (&buf[..=i], true),
            None => (buf, false),
        };
        let n = chunk.len();
        if !too_long && line.len() + n <= MAX_LINE + 1 {
            line.extend_from_slice(chunk);
        } else {
            too_long = true;
            line.clear();
        }
        read.consume(n);
        if done {
            return Ok(if too_long {
                Line::TooLong
            } else {
                Line::Complete
            });
        }
    }
}

async fn send(
    write: &mut tokio::net::unix::OwnedWriteHalf,
    response: &Response,
) -> std::io::Result<()> {
    let mut text = serde_json::to_vec(response).unwrap_or_else(|e| {
        serde_json::to_vec(&Response::error(format!("encoding the response: {e}")))
            .unwrap_or_default()
    });
    text.push(b'\n');
    write.write_all(&text).await
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_the_servers_user_and_root_are_served() {
        use super::allowed;
        assert!(allowed(1000, 1000));
        assert!(allowed(0, 1000), "root");
        assert!(allowed(0, 0));
        assert!(!allowed(1001, 1000));
        assert!(!allowed(1000, 0), "a user, on root's server");
    }
}
