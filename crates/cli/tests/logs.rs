//! What `stint serve` tells its operator (issue 11): logins and refused logins with the reason,
//! on stderr, as text or JSON lines, filtered by RUST_LOG. Logins come from libiscsi's iscsi-inq.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

/// `stint serve` of a 1 MiB RAM LUN with `args`, RUST_LOG=`filter` and stderr in `log`; the
/// child and its LUN's URL.
fn serve(args: &[&str], filter: &str, log: &std::path::Path) -> (std::process::Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_stint"))
        .args(["serve", "--listen", "127.0.0.1:0", "--lun", "ram:1MiB"])
        .args(args)
        .env("RUST_LOG", filter)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .expect("start stint serve");
    let url = BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map_while(Result::ok)
        .find(|l| l.starts_with("iscsi://"))
        .expect("a URL");
    (child, url)
}

/// Serves a 1 MiB RAM LUN with `args` and RUST_LOG=`filter`, logs in once to it and once to a
/// target that does not exist, stops the server and returns its stderr.
fn logged(args: &[&str], filter: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("stderr");
    let (mut child, url) = serve(args, filter, &log);
    let (ok, out) = common::tool("iscsi-inq", &[&url]);
    assert!(ok, "{out}");
    let portal = url
        .trim_start_matches("iscsi://")
        .split('/')
        .next()
        .unwrap();
    let missing = format!("iscsi://{portal}/iqn.2026-11.dev.stint:nope/0");
    let (ok, out) = common::tool("iscsi-inq", &[&missing]);
    assert!(!ok, "{out}");
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(child.wait().unwrap().success());
    std::fs::read_to_string(&log).unwrap()
}

#[test]
fn logins_and_refusals_are_logged_as_json() {
    let text = logged(&["--log-format", "json"], "info");
    let events: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
        .collect();
    let find = |message: &str| {
        events
            .iter()
            .find(|e| e["fields"]["message"] == message)
            .unwrap_or_else(|| panic!("no {message:?} event in {text}"))
    };
    let login = find("login");
    assert_eq!(login["level"], "INFO");
    assert_eq!(login["fields"]["target"], "iqn.2026-11.dev.stint:target0");
    assert!(
        login["fields"]["initiator"]
            .as_str()
            .is_some_and(|i| i.contains("libiscsi")),
        "{login}"
    );
    // The connection's span names the peer.
    assert!(
        login["span"]["peer"]
            .as_str()
            .is_some_and(|p| p.starts_with("127.0.0.1:")),
        "{login}"
    );
    let refused = find("login refused");
    assert_eq!(refused["level"], "WARN");
    assert_eq!(refused["fields"]["status"], "0203h");
    assert_eq!(
        refused["fields"]["reason"],
        "no target named \"iqn.2026-11.dev.stint:nope\""
    );
}

#[test]
fn rust_log_filters_the_text_log() {
    let text = logged(&[], "warn");
    assert!(text.contains("WARN"), "{text}");
    assert!(text.contains("login refused"), "{text}");
    assert!(
        !text.contains("INFO"),
        "info events pass a warn filter: {text}"
    );
}

/// Guessing costs time: after three refusals in a minute, each further one from the same
/// address is answered after a pause (0.5 s, 1 s, ...), and the server says so once.
#[test]
fn repeated_failed_logins_are_slowed() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("stderr");
    let (mut child, url) = serve(&[], "warn", &log);
    let portal = url
        .trim_start_matches("iscsi://")
        .split('/')
        .next()
        .unwrap();
    let missing = format!("iscsi://{portal}/iqn.2026-11.dev.stint:guess/0");
    let mut took = Vec::new();
    for _ in 0..5 {
        let start = std::time::Instant::now();
        let (ok, out) = common::tool("iscsi-inq", &[&missing]);
        assert!(!ok, "{out}");
        took.push(start.elapsed());
    }
    // Lower bounds only: a slow machine makes every attempt slower, never faster.
    assert!(took[3].as_millis() >= 500, "{took:?}");
    assert!(took[4].as_millis() >= 1000, "{took:?}");
    let (ok, out) = common::tool("iscsi-inq", &[&url]);
    assert!(ok, "a right login is not refused: {out}");
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(child.wait().unwrap().success());
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        text.matches("repeated failed logins").count(),
        1,
        "said once: {text}"
    );
}
