//! A `stint serve` child process for integration tests: listens on a free loopback port, reports
//! its LUN URLs, and is stopped (SIGTERM, then kill) when dropped.

#![allow(dead_code)] // each test binary uses a different part

pub mod cdb;
pub mod ceph;
pub mod loop_device;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Server {
    child: Child,
    /// One libiscsi URL per LUN, as printed by `stint serve`.
    pub urls: Vec<String>,
    /// The metrics endpoint's URL, printed before the LUNs' with `--metrics`.
    pub metrics: Option<String>,
}

impl Server {
    /// Starts `stint serve --listen 127.0.0.1:0 <args>` and waits for its `expected_luns` URLs.
    pub fn start(args: &[&str], expected_luns: usize) -> Server {
        Server::start_with_env(args, expected_luns, &[])
    }

    /// As [`Server::start`], with environment variables set (or removed, when empty).
    pub fn start_with_env(args: &[&str], expected_luns: usize, env: &[(&str, &str)]) -> Server {
        Server::start_listening("127.0.0.1:0", args, expected_luns, env)
    }

    /// As [`Server::start_with_env`], listening on `listen`.
    pub fn start_listening(
        listen: &str,
        args: &[&str],
        expected_luns: usize,
        env: &[(&str, &str)],
    ) -> Server {
        let mut command = Command::new(env!("CARGO_BIN_EXE_stint"));
        for (name, value) in env {
            match value.is_empty() {
                true => command.env_remove(name),
                false => command.env(name, value),
            };
        }
        let mut child = command
            .args(["serve", "--listen", listen])
            .args(args)
            // Logins and connections are logged at info: keep test output to what went wrong.
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start stint serve");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let mut urls = Vec::new();
        let mut metrics = None;
        while urls.len() < expected_luns {
            match lines.next() {
                Some(Ok(line)) if line.starts_with("iscsi://") => urls.push(line),
                Some(Ok(line)) if line.starts_with("http://") => metrics = Some(line),
                Some(Ok(_)) => {}
                _ => {
                    let _ = child.kill();
                    panic!(
                        "stint serve exited before printing {expected_luns} URLs (got {urls:?})"
                    );
                }
            }
        }
        Server {
            child,
            urls,
            metrics,
        }
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// "127.0.0.1:port" of the portal.
    pub fn portal(&self) -> String {
        let rest = self.urls[0].trim_start_matches("iscsi://");
        rest.split('/').next().unwrap_or_default().to_string()
    }

    /// Sends SIGTERM and waits for a clean exit; returns whether it exited with status 0.
    pub fn stop(mut self) -> bool {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.success();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A loopback port free now (bound, then released): for a server whose port others must
/// know before it starts.
pub fn free_port() -> u16 {
    let socket = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    socket.local_addr().expect("local address").port()
}

/// Runs a libiscsi tool with a timeout; returns (success, stdout + stderr).
pub fn tool(program: &str, args: &[&str]) -> (bool, String) {
    let out = Command::new("timeout")
        .arg("30")
        .arg(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!("{program} not runnable ({e}); ./test.sh installs libiscsi-bin")
        });
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

/// A `stint serve` of one 16 MiB RAM LUN behind CHAP (user alice, secret alice-secret-12) with
/// mutual CHAP (stint, target-secret-34, read from a file only its owner may read), in `dir`;
/// and a function making its URL with `credentials` ("user%secret@") and a `query`.
pub fn chap_server(dir: &std::path::Path) -> (Server, impl Fn(&str, &str) -> String) {
    use std::os::unix::fs::PermissionsExt;
    let secret_file = dir.join("target.secret");
    std::fs::write(&secret_file, "target-secret-34\n").unwrap();
    std::fs::set_permissions(&secret_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let config = dir.join("chap.toml");
    std::fs::write(
        &config,
        r#"
[[target]]
name = "iqn.2026-11.dev.stint:secure"
chap = { user = "alice", secret = "alice-secret-12" }
mutual_chap = { user = "stint", secret_file = "target.secret" }
[[target.lun]]
store = "ram"
size = "16MiB"
"#,
    )
    .unwrap();
    let server = Server::start(&["--config", config.to_str().unwrap()], 1);
    let rest = server.urls[0].trim_start_matches("iscsi://").to_owned();
    let at = move |credentials: &str, query: &str| format!("iscsi://{credentials}{rest}{query}");
    (server, at)
}

/// Deterministic, position-dependent bytes, so a misplaced block cannot compare equal.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// A single-threaded runtime for a test's initiator sessions.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}
