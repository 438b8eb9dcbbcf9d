//! The metrics endpoint: `GET /metrics` over HTTP/1.1 (RFC 9112) on a listener of its own, on
//! the serve runtime. A scrape cannot hold up the iSCSI portal: one request per connection,
//! its head at most 8 KiB and read within 5 s, the answer written within 5 s, at most 8
//! connections at once (more are closed as they come). A hand-written responder for one
//! path; the request head is parsed by `httparse` (what hyper uses), which keeps an HTTP
//! framework and its dependencies out of the binary.

use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

const MAX_HEAD: usize = 8 * 1024;
const MAX_HEADERS: usize = 64;
const READ_TIMEOUT: Duration = Duration::from_secs(5);
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
const MAX_CONNECTIONS: usize = 8;
/// The Prometheus text exposition format's media type.
const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// What a request head asks for.
#[derive(Debug, PartialEq, Eq)]
enum Request {
    /// More bytes are needed.
    Partial,
    Metrics,
    NotFound,
    /// Not an HTTP/1.x request head (400), or one longer than [`MAX_HEAD`] (431).
    Bad(u16),
}

/// Reads what `head` (the bytes received so far) asks for.
fn request(head: &[u8]) -> Request {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    match req.parse(head) {
        Ok(httparse::Status::Complete(_)) => {
            let path = req.path.unwrap_or_default();
            let path = path.split_once('?').map_or(path, |(p, _)| p);
            if req.method == Some("GET") && path == "/metrics" {
                Request::Metrics
            } else {
                Request::NotFound
            }
        }
        Ok(httparse::Status::Partial) if head.len() >= MAX_HEAD => Request::Bad(431),
        Ok(httparse::Status::Partial) => Request::Partial,
        Err(httparse::Error::TooManyHeaders) => Request::Bad(431),
        Err(_) => Request::Bad(400),
    }
}

/// The text of one scrape, of what is served at the time (LUNs come and go).
pub type Scrape = Arc<dyn Fn() -> String + Send + Sync>;

/// Serves scrapes on `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, scrape: Scrape) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                // Out of descriptors, say: try again later rather than spin.
                tracing::warn!(error = %e, "metrics: accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::debug!(%peer, "metrics: too many connections, closing");
            continue;
        };
        let scrape = scrape.clone();
        tokio::spawn(async move {
            if let Err(e) = answer(stream, &scrape).await {
                tracing::debug!(%peer, error = %e, "metrics: connection ended");
            }
            drop(slot);
        });
    }
}

async fn answer(mut stream: TcpStream, scrape: &Scrape) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(1024);
    let asked = tokio::time::timeout(READ_TIMEOUT, async {
        let mut buf = [0u8; 1024];
        loop {
            let room = (MAX_HEAD - head.len()).min(buf.len());
            let n = stream.read(&mut buf[..room]).await?;
            if n == 0 {
                return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof));
            }
            head.extend_from_slice(&buf[..n]);
            match request(&head) {
                Request::Partial => {}
                done => return Ok(done),
            }
        }
    })
    .await
    .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
    let (status, body) = match asked {
        Request::Metrics => ("200 OK", scrape()),
        Request::NotFound => ("404 Not Found", "only GET /metrics is served\n".to_owned()),
        Request::Bad(431) => (
            "431 Request Header Fields Too Large",
            "request head too long\n".to_owned(),
        ),
        Request::Bad(_) | Request::Partial => {
            ("400 Bad Request", "not an HTTP/1.1 request\n".to_owned())
        }
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {CONTENT_TYPE}\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
    tokio::time::timeout(WRITE_TIMEOUT, async {
        stream.write_all(response.as_bytes()).await?;
        stream.shutdown().await
    })
    .await
    .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_get_metrics_is_served() {
        let ok = b"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: text/plain\r\n\r\n";
        assert_eq!(request(ok), Request::Metrics);
        assert_eq!(
            request(b"GET /metrics?name=x HTTP/1.0\r\n\r\n"),
            Request::Metrics
        );
        assert_eq!(request(b"GET / HTTP/1.1\r\n\r\n"), Request::NotFound);
        assert_eq!(
            request(b"GET /metricsx HTTP/1.1\r\n\r\n"),
            Request::NotFound
        );
        assert_eq!(
            request(b"POST /metrics HTTP/1.1\r\n\r\n"),
            Request::NotFound
        );
        assert_eq!(request(&ok[..20]), Request::Partial);
        assert_eq!(
            request(b"\x16\x03\x01 TLS hello\r\n\r\n"),
            Request::Bad(400)
        );
    }

    #[test]
    fn a_request_head_is_bounded() {
        let mut long = b"GET /metrics HTTP/1.1\r\nX: ".to_vec();
        long.resize(MAX_HEAD, b'a');
        assert_eq!(request(&long), Request::Bad(431));
        let many: String = (0..=MAX_HEADERS).map(|i| format!("H{i}: v\r\n")).collect();
        let head = format!("GET /metrics HTTP/1.1\r\n{many}\r\n");
        assert_eq!(request(head.as_bytes()), Request::Bad(431));
    }
}
