//! `stint serve` as a systemd `Type=notify` service (examples/stint.service): the service
//! manager's side is played by a datagram socket in $NOTIFY_SOCKET. READY=1 comes once the
//! portal accepts connections, WATCHDOG=1 at half of $WATCHDOG_USEC while it serves, and
//! STOPPING=1 on SIGTERM, before it exits.

use std::io::{BufRead, BufReader};
use std::os::unix::net::UnixDatagram;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The server's process, killed by its PID if the test fails before it stops it.
struct Served(std::process::Child);

impl Drop for Served {
    fn drop(&mut self) {
        // Nothing to do for a server the test already waited for.
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The next datagram, within `limit`.
fn next(sock: &UnixDatagram, limit: Duration) -> String {
    sock.set_read_timeout(Some(limit)).unwrap();
    let mut buf = [0u8; 4096];
    let n = sock
        .recv(&mut buf)
        .unwrap_or_else(|e| panic!("no notification within {limit:?}: {e}"));
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

#[test]
fn serve_notifies_ready_pets_the_watchdog_and_says_it_is_stopping() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notify.sock");
    let sock = UnixDatagram::bind(&path).unwrap();
    // WATCHDOG_PID must be the server's own pid, as systemd sets it: the shell's, kept by exec.
    let mut child = Served(
        Command::new("sh")
            .args([
                "-c",
                "WATCHDOG_PID=$$ exec \"$0\" serve --listen 127.0.0.1:0 --lun ram:16MiB",
            ])
            .arg(env!("CARGO_BIN_EXE_stint"))
            .env("NOTIFY_SOCKET", &path)
            .env("WATCHDOG_USEC", "200000")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let pid = child.0.id();
    let ready = next(&sock, Duration::from_secs(60));
    assert!(ready.lines().any(|l| l == "READY=1"), "{ready:?}");
    assert!(
        ready.contains("STATUS=serving 1 LUNs on 127.0.0.1:"),
        "{ready:?}"
    );
    // Ready means listening: the portal takes a connection now.
    let url = BufReader::new(child.0.stdout.take().unwrap())
        .lines()
        .next()
        .unwrap()
        .unwrap();
    let portal = url
        .strip_prefix("iscsi://")
        .and_then(|u| u.split('/').next())
        .unwrap()
        .to_owned();
    std::net::TcpStream::connect(&portal).expect("the portal listens once READY=1 is sent");

    // 100 ms apart: 20 in 2 s on time; at least 5 however loaded the machine (a late tick
    // is caught up, not skipped).
    let start = Instant::now();
    let mut pets = 0;
    while start.elapsed() < Duration::from_secs(2) {
        if next(&sock, Duration::from_secs(5)).trim_end() == "WATCHDOG=1" {
            pets += 1;
        }
    }
    assert!(
        pets >= 5,
        "{pets} WATCHDOG=1 in 2 s with WATCHDOG_USEC=200000"
    );

    let kill = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let n = next(&sock, Duration::from_secs(30));
        if n.lines().any(|l| l == "STOPPING=1") {
            break;
        }
        assert!(Instant::now() < deadline, "no STOPPING=1 after SIGTERM");
    }
    let status = child.0.wait().unwrap();
    assert!(status.success(), "serve exited with {status}");
}

#[test]
fn serve_without_a_service_manager_sends_nothing() {
    // No $NOTIFY_SOCKET: nothing to notify, and no warning about it.
    let out = Command::new("sh")
        .args(["-c", "\"$0\" serve --listen 127.0.0.1:0 --lun ram:1MiB & pid=$!; sleep 1; kill -TERM $pid; wait $pid"])
        .arg(env!("CARGO_BIN_EXE_stint"))
        .env_remove("NOTIFY_SOCKET")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(!log.contains("service manager"), "{log}");
    assert!(!log.contains("watchdog"), "{log}");
}
