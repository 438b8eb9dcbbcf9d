//! CHAP from stint's own initiator: `stint bench` and `stint cdl` take the credentials in the URL
//! as libiscsi does (`user%secret@`, `?target_user=…&target_password=…` for mutual CHAP), log in
//! with the right secret, are refused with a wrong one, refuse a target that proves a wrong
//! secret, and never print a secret.

mod common;
use common::Server;
use std::process::Command;

fn stint(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_stint"))
        .args(args)
        .output()
        .expect("run stint");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn bench_and_cdl_log_in_with_chap() {
    let dir = tempfile::tempdir().unwrap();
    let (server, at) = common::chap_server(dir.path());
    let bench = |url: &str| {
        stint(&[
            "bench", "--url", url, "--rw", "randread", "--bs", "4k", "--ios", "200", "--json",
        ])
    };
    let cdl = |url: &str| stint(&["cdl", "info", url]);
    let mutual = "?target_user=stint&target_password=target-secret-34";
    for url in [
        at("alice%alice-secret-12@", ""),
        at("alice%alice-secret-12@", mutual),
    ] {
        let (ok, out) = bench(&url);
        assert!(ok && out.contains("\"iops\""), "{url}: {out}");
        let (ok, out) = cdl(&url);
        assert!(ok, "{url}: {out}");
        assert!(!out.contains("alice-secret-12"), "{out}");
    }
    for url in [at("alice%wrong-secret-99@", ""), at("", "")] {
        for (ok, out) in [bench(&url), cdl(&url)] {
            assert!(
                !ok && out.contains("authentication failure"),
                "{url}: {out}"
            );
            assert!(!out.contains("wrong-secret-99"), "{out}");
        }
    }
    // The target proves a secret other than the one we expect: we refuse it.
    let liar = "?target_user=stint&target_password=wrong-target-99";
    for (ok, out) in [
        bench(&at("alice%alice-secret-12@", liar)),
        cdl(&at("alice%alice-secret-12@", liar)),
    ] {
        assert!(
            !ok && out.contains("the target did not prove the expected name and secret"),
            "{out}"
        );
        assert!(!out.contains("wrong-target-99"), "{out}");
    }
    // A URL whose CHAP part is incomplete is refused before any connection.
    let (ok, out) = bench(&at("alice@", ""));
    assert!(
        !ok && out.contains("needs both a name and a secret"),
        "{out}"
    );
    assert!(server.stop());
}

/// A target without CHAP: credentials in the URL are not silently dropped (stint's target
/// refuses an initiator that offers only CHAP).
#[test]
fn credentials_for_a_target_without_chap_are_an_error() {
    let server = Server::start(&["--lun", "ram:16MiB"], 1);
    let rest = server.urls[0].trim_start_matches("iscsi://");
    let (ok, out) = stint(&[
        "cdl",
        "info",
        &format!("iscsi://alice%alice-secret-12@{rest}"),
    ]);
    assert!(
        !ok && out.contains("authentication failure") && !out.contains("alice-secret-12"),
        "{out}"
    );
    assert!(server.stop());
}
