//! The libiscsi command-line tools work against `stint serve` (issue 2, item 2).

mod common;
use common::{tool, Server};

#[test]
fn iscsi_ls_lists_the_target_and_luns() {
    let server = Server::start(&["--lun", "ram:64MiB", "--lun", "ram:32MiB"], 2);
    let portal = format!("iscsi://{}", server.portal());
    let (ok, out) = tool("iscsi-ls", &["-s", &portal]);
    assert!(ok, "{out}");
    assert!(
        out.contains("Target:iqn.2026-11.dev.stint:target0"),
        "{out}"
    );
    assert!(out.contains("Lun:0") && out.contains("Lun:1"), "{out}");
    assert!(server.stop(), "serve did not stop cleanly on SIGTERM");
}

/// LUN masking through a real client: iscsi-ls under the granted initiator name lists both
/// LUNs, under another only the unmasked one.
#[test]
fn a_masked_lun_is_invisible_to_iscsi_ls() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("stint.toml");
    std::fs::write(
        &config,
        "[[target]]\nname = \"iqn.2026-11.dev.stint:masked\"\n\
         [[target.lun]]\nstore = \"ram\"\nsize = \"1MiB\"\n\
         [[target.lun]]\nstore = \"ram\"\nsize = \"1MiB\"\n\
         allowed_initiators = [\"iqn.2026-11.dev.stint:owner\"]\n",
    )
    .unwrap();
    let server = Server::start(&["--config", config.to_str().unwrap()], 2);
    let portal = format!("iscsi://{}", server.portal());
    let luns = |initiator: &str| {
        let (ok, out) = tool("iscsi-ls", &["-s", "-i", initiator, &portal]);
        assert!(ok, "{out}");
        (out.contains("Lun:0"), out.contains("Lun:1"))
    };
    assert_eq!(luns("iqn.2026-11.dev.stint:owner"), (true, true));
    assert_eq!(luns("iqn.2026-11.dev.stint:someone"), (true, false));
    let masked = server.urls[1].clone();
    let (ok, out) = tool(
        "iscsi-inq",
        &["-i", "iqn.2026-11.dev.stint:someone", &masked],
    );
    // libiscsi's connect sends TEST UNIT READY, which a masked LUN fails like an absent one.
    assert!(
        !ok && out.contains("LOGICAL_UNIT_NOT_SUPPORTED"),
        "the masked LUN: {out}"
    );
    assert!(server.stop());
}

#[test]
fn iscsi_inq_standard_and_device_identification() {
    let server = Server::start(&["--lun", "ram:16MiB"], 1);
    let url = &server.urls[0];
    let (ok, out) = tool("iscsi-inq", &[url]);
    assert!(ok, "{out}");
    assert!(out.contains("Vendor:STINT"), "{out}");
    // iscsi-inq 1.19 parses -c with atoi, so "0x83" asks for page 00h (the supported pages).
    let (ok, out) = tool("iscsi-inq", &["-e", "1", "-c", "0x83", url]);
    assert!(ok, "{out}");
    assert!(out.contains("Page:0x83 DEVICE_IDENTIFICATION"), "{out}");
    let (ok, out) = tool("iscsi-inq", &["-e", "1", "-c", "131", url]);
    assert!(ok, "{out}");
    assert!(
        out.contains("NAA"),
        "VPD 83h without an NAA designator: {out}"
    );
    // The identifier is stable: a second server with the same target name and LUN reports it too.
    let again = Server::start(&["--lun", "ram:16MiB"], 1);
    let (_, out2) = tool("iscsi-inq", &["-e", "1", "-c", "131", &again.urls[0]]);
    assert_eq!(out, out2);
}

#[test]
fn iscsi_readcapacity16_reports_size_and_block_length() {
    let server = Server::start(&["--lun", "ram:64MiB"], 1);
    let (ok, out) = tool("iscsi-readcapacity16", &[&server.urls[0]]);
    assert!(ok, "{out}");
    assert!(out.contains("LOGICAL BLOCK LENGTH IN BYTES:512"), "{out}");
    assert!(
        out.contains(&format!("Total size:{}", 64u64 << 20)),
        "{out}"
    );
}

#[test]
fn iscsi_perf_runs_random_reads() {
    let server = Server::start(&["--lun", "ram:64MiB"], 1);
    let (_, out) = tool(
        "iscsi-perf",
        &["-t", "2", "-m", "8", "-b", "8", "-r", &server.urls[0]],
    );
    let iops: f64 = out
        .replace('\r', "\n")
        .lines()
        .filter_map(|l| l.trim().strip_prefix("iops average "))
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .next_back()
        .unwrap_or_else(|| panic!("no iops average in: {out}"));
    assert!(iops > 100.0, "{out}");
}

/// CHAP (issue 11): libiscsi logs in with the right secret (one-way, and mutual with the
/// target's secret from a file only its owner reads), and is refused with a wrong secret,
/// without one, or when the target answers mutual CHAP with another secret than it expects.
#[test]
fn chap_one_way_and_mutual_with_libiscsi() {
    let dir = tempfile::tempdir().unwrap();
    let (server, at) = common::chap_server(dir.path());
    let mutual = "?target_user=stint&target_password=target-secret-34";
    for url in [
        at("alice%alice-secret-12@", ""),
        at("alice%alice-secret-12@", mutual),
    ] {
        let (ok, out) = tool("iscsi-inq", &[&url]);
        assert!(ok && out.contains("Vendor:STINT"), "{url}: {out}");
    }
    for url in [
        at("alice%wrong-secret-99@", ""),
        at("mallory%alice-secret-12@", ""),
        at("", ""),
    ] {
        let (ok, out) = tool("iscsi-inq", &[&url]);
        assert!(
            !ok && out.contains("Authentication failure"),
            "{url}: {out}"
        );
    }
    let wrong_target = "?target_user=stint&target_password=wrong-target-99";
    let (ok, out) = tool("iscsi-inq", &[&at("alice%alice-secret-12@", wrong_target)]);
    assert!(
        !ok && out.contains("Invalid CHAP_R response from the target"),
        "{out}"
    );
    assert!(server.stop());
}
