//! `stint cdl` against a live `stint serve`: info, show, save, upload and stats on the CDL hard
//! disk of examples/hdd-cdl.toml and on a plain RAM LUN, each checked independently over the
//! wire with the crate's initiator (MODE SENSE of the T2A/T2B pages, READ(16)/WRITE(16) with a
//! DLD).

mod common;
use common::cdb::{self, mode_sense10, rw, sense};
use common::Server;
use iscsi::initiator::{Initiator, LoginOptions};
use iscsi::url::IscsiUrl;
use scsi::command::{PageControl, ReadWrite};
use scsi::{form, SenseKey};
use std::path::Path;
use std::process::Command;

const HDD_CDL: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/hdd-cdl.toml");

/// Runs `stint cdl ARGS`; returns (success, stdout, stderr).
fn cdl(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_stint"))
        .arg("cdl")
        .args(args)
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("run stint cdl");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `stint cdl ARGS`, which must succeed; its stdout.
fn cdl_ok(args: &[&str]) -> String {
    let (ok, out, err) = cdl(args);
    assert!(ok, "stint cdl {args:?} failed:\n{out}\n{err}");
    out
}

/// A session of the test's own (another initiator name than `stint cdl`'s).
async fn login(url: &str) -> (Initiator, u64) {
    let url: IscsiUrl = url.parse().unwrap();
    let opts = LoginOptions::new("iqn.2026-11.dev.stint:cdl-test", Some(&url.target));
    let s = Initiator::connect_portal(&url.portal, &opts).await.unwrap();
    (s, url.lun)
}

/// Runs a command, repeated after unit attentions (power on; MODE PARAMETERS CHANGED after
/// `stint cdl upload`); returns (status, data).
async fn run(s: &mut Initiator, lun: u64, cdb: &[u8], out: &[u8], alloc: u32) -> (u8, Vec<u8>) {
    for _ in 0..8 {
        let r = s.scsi_command(lun, cdb, out, alloc).await.unwrap();
        if matches!(sense(&r), Some((SenseKey::UnitAttention, _))) {
            continue;
        }
        return (r.status, r.data_in);
    }
    panic!("unit attentions without end");
}

/// MODE SENSE(10), DBD, page 0Ah/`subpage`, page control `pc`: the 232-byte page.
async fn mode_page(s: &mut Initiator, lun: u64, subpage: u8, pc: PageControl) -> Vec<u8> {
    let cdb = mode_sense10(pc, scsi::mode::CONTROL, subpage, 512);
    let (status, data) = run(s, lun, &cdb, &[], 512).await;
    assert_eq!(status, 0, "MODE SENSE 0Ah/{subpage:02X}h PC {pc:?}");
    data[8..8 + 232].to_vec()
}

/// Both pages' current values.
async fn both_pages(s: &mut Initiator, lun: u64) -> (Vec<u8>, Vec<u8>) {
    (
        mode_page(s, lun, 0x07, PageControl::Current).await,
        mode_page(s, lun, 0x08, PageControl::Current).await,
    )
}

/// Descriptor `n` (1..=7) of a page as (units, inactive, inactive policy, active, active
/// policy, guideline, guideline policy).
fn descriptor(page: &[u8], n: usize) -> (u8, u16, u8, u16, u8, u16, u8) {
    let d = &page[8 + 32 * (n - 1)..8 + 32 * n];
    let be = |i: usize| u16::from_be_bytes([d[i], d[i + 1]]);
    (
        d[0] & 0x0F,
        be(2),
        d[6] >> 4,
        be(4),
        d[6] & 0x0F,
        be(10),
        d[14] & 0x0F,
    )
}

/// One descriptor block of a page file, as cdladm writes it.
fn block(n: usize, d: (u8, u16, u8, u16, u8, u16, u8)) -> String {
    let (units, inactive, ipol, active, apol, guideline, gpol) = d;
    format!(
        "== descriptor: {n}\nt2cdlunits: 0x{units:x}\nmax-inactive-time: {inactive}\n\
         max-inactive-time-policy: 0x{ipol:x}\nmax-active-time: {active}\n\
         max-active-time-policy: 0x{apol:x}\nduration-guideline: {guideline}\n\
         duration-guideline-policy: 0x{gpol:x}\n\n"
    )
}

/// A page file in cdladm's format with our own comment.
fn page_file(
    page: &str,
    pvsdg: Option<u8>,
    descriptors: &[(u8, u16, u8, u16, u8, u16, u8); 7],
) -> String {
    let mut f = format!("# {page} page written for stint's tests in cdladm's page file format\n\n");
    f += &format!("cdlp: {page}\n\n");
    if let Some(p) = pvsdg {
        f += &format!("perf-vs-duration-guideline: 0x{p:x}\n\n");
    }
    for (i, d) in descriptors.iter().enumerate() {
        f += &block(i + 1, *d);
    }
    f
}

/// The T2A page of cdl-tools' benchmark (its T2A.cdl): 20 %, guidelines of 50,
/// 100, 200, 300, 400 and 500 ms (units 10 ms) with policy 0h, descriptor 7 unlimited.
/// Written out in full, as a user would have it.
const BENCHMARK_T2A: &str = "\
# cdladm page file: read descriptors for the CDL benchmark
#   perf-vs-duration-guideline 0xc = 20 %
#   t2cdlunits 0xa = 10 ms, so duration-guideline 5 = 50 ms

cdlp: T2A

perf-vs-duration-guideline: 0xc

== descriptor: 1
t2cdlunits: 0xa
max-inactive-time: 0
max-inactive-time-policy: 0x0
max-active-time: 0
max-active-time-policy: 0x0
duration-guideline: 5
duration-guideline-policy: 0x0

== descriptor: 2
t2cdlunits: 0xa
max-inactive-time: 0
max-inactive-time-policy: 0x0
max-active-time: 0
max-active-time-policy: 0x0
duration-guideline: 10
duration-guideline-policy: 0x0

== descriptor: 3
t2cdlunits: 0xa
max-inactive-time: 0
max-inactive-time-policy: 0x0
max-active-time: 0
max-active-time-policy: 0x0
duration-guideline: 20
duration-guideline-policy: 0x0

== descriptor: 4
t2cdlunits: 0xa
max-inactive-time: 0
max-inactive-time-policy: 0x0
max-active-time: 0
max-active-time-policy: 0x0
duration-guideline: 30
duration-guideline-policy: 0x0

== descriptor: 5
t2cdlunits: 0xa
max-inactive-time: 0
max-inactive-time-policy: 0x0
max-active-time: 0
max-active-time-policy: 0x0
duration-guideline: 40
duration-guideline-policy: 0x0

== descriptor: 6
t2cdlunits: 0xa
max-inactive-time: 0
max-inactive-time-policy: 0x0
max-active-time: 0
max-active-time-policy: 0x0
duration-guideline: 50
duration-guideline-policy: 0x0

== descriptor: 7
t2cdlunits: 0xa
max-inactive-time: 0
max-inactive-time-policy: 0x0
max-active-time: 0
max-active-time-policy: 0x0
duration-guideline: 0
duration-guideline-policy: 0x0

";

/// The page of cdl-tools' test pages with active and inactive limits
/// (its T2A-active-inactive-time.cdl): 20 ms active limits with policies 0h, Dh,
/// Fh in descriptors 1-3, 20 ms inactive limits with 0h, Dh, Fh in 4-6.
const ACTIVE_INACTIVE: [(u8, u16, u8, u16, u8, u16, u8); 7] = [
    (0xa, 0, 0x0, 2, 0x0, 0, 0x0),
    (0xa, 0, 0x0, 2, 0xd, 0, 0x0),
    (0xa, 0, 0x0, 2, 0xf, 0, 0x0),
    (0xa, 2, 0x0, 0, 0x0, 0, 0x0),
    (0xa, 2, 0xd, 0, 0x0, 0, 0x0),
    (0xa, 2, 0xf, 0, 0x0, 0, 0x0),
    (0xa, 0, 0x0, 0, 0x0, 0, 0x0),
];

/// The T2B.cdl of cdl-tools' tests: a 50 ms write guideline in descriptor 1 and a 20 ms
/// active limit with policy Dh in descriptor 7.
const T2B_TEST: [(u8, u16, u8, u16, u8, u16, u8); 7] = [
    (0xa, 0, 0x0, 0, 0x0, 5, 0x0),
    (0xa, 0, 0x0, 0, 0x0, 0, 0x0),
    (0xa, 0, 0x0, 0, 0x0, 0, 0x0),
    (0xa, 0, 0x0, 0, 0x0, 0, 0x0),
    (0xa, 0, 0x0, 0, 0x0, 0, 0x0),
    (0xa, 0, 0x0, 0, 0x0, 0, 0x0),
    (0xa, 0, 0x0, 2, 0xd, 0, 0x0),
];

/// The lines of a page file that carry data (no comments, no blank lines).
fn significant(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .collect()
}

/// `text` with `key`'s value in descriptor `n` replaced.
fn set_field(text: &str, n: usize, key: &str, value: &str) -> String {
    let mut in_block = false;
    let mut done = false;
    let mut out = String::new();
    for line in text.lines() {
        if line.starts_with("== descriptor: ") {
            in_block = line == format!("== descriptor: {n}");
        }
        if in_block && !done && line.starts_with(&format!("{key}:")) {
            out += &format!("{key}: {value}\n");
            done = true;
        } else {
            out += line;
            out += "\n";
        }
    }
    assert!(done, "no {key} in descriptor {n}");
    out
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn show_save_edit_upload_show_round_trip() {
    let server = Server::start(&["--config", HDD_CDL], 1);
    let url = server.urls[0].clone();
    let dir = tempfile::tempdir().unwrap();
    let (mut s, lun) = login(&url).await;

    // show: examples/hdd-cdl.toml's pages in cdladm's layout.
    let shown = cdl_ok(&["show", &url]);
    assert!(shown.starts_with(
        "Page T2A: read descriptors\n  perf_vs_duration_guideline : 20%\n  Descriptor 1:\n    \
         T2 CDL units             : 10 ms (0xa)\n    max inactive time        : no limit\n    \
         max active time          : no limit\n    duration guideline       : 50 ms\n    \
         duration guideline policy: complete-earliest\n  Descriptor 2:\n"
    ));
    assert!(shown.contains("Page T2B: write descriptors\n  Descriptor 1:\n"));
    assert!(shown.contains("    duration guideline       : 500 ms\n"));
    assert_eq!(shown.matches("  Descriptor ").count(), 14);
    assert!(!shown[shown.find("Page T2B").unwrap()..].contains("perf_vs_duration_guideline"));

    // save: the T2A page in cdladm's format.
    let file = dir.path().join("t2a.cdl");
    let file = file.to_str().unwrap();
    let out = cdl_ok(&["save", &url, "--page", "t2a", "--file", file]);
    assert_eq!(out, format!("Saving page T2A to file {file}\n"));
    let saved = std::fs::read_to_string(file).unwrap();
    assert!(saved.starts_with("# T2A page format:\n"));
    assert!(saved.contains("\ncdlp: T2A\n\nperf-vs-duration-guideline: 0xc\n\n"));
    assert!(saved.contains(&block(2, (0xa, 0, 0, 0, 0, 10, 0))));

    // edit descriptor 2: a 30 ms inactive limit with abort, a 70 ms guideline with
    // complete-unavailable; upload.
    let mut edited = set_field(&saved, 2, "max-inactive-time", "3");
    edited = set_field(&edited, 2, "max-inactive-time-policy", "0xf");
    edited = set_field(&edited, 2, "duration-guideline", "7");
    edited = set_field(&edited, 2, "duration-guideline-policy", "0xd");
    let edited_path = write(dir.path(), "edited.cdl", &edited);
    let (t2a_before, t2b_before) = both_pages(&mut s, lun).await;
    let out = cdl_ok(&["upload", &url, "--file", &edited_path]);
    assert!(out.contains("Uploading page T2A:\n"), "{out}");
    assert!(
        out.ends_with("Page T2A uploaded (current values)\n"),
        "{out}"
    );

    // The LUN's page, read by the test: only descriptor 2 changed.
    let (t2a, t2b) = both_pages(&mut s, lun).await;
    assert_eq!(descriptor(&t2a, 2), (0xa, 3, 0xf, 0, 0, 7, 0xd));
    for n in [1, 3, 4, 5, 6, 7] {
        assert_eq!(
            descriptor(&t2a, n),
            descriptor(&t2a_before, n),
            "descriptor {n}"
        );
    }
    assert_eq!(t2a[7] >> 4, 0xC);
    assert_eq!(t2b, t2b_before);

    // show again, and a second save gives back the edited file byte for byte.
    let shown = cdl_ok(&["show", &url, "--page", "T2A"]);
    let d2 = &shown[shown.find("  Descriptor 2:").unwrap()..shown.find("  Descriptor 3:").unwrap()];
    assert_eq!(
        d2,
        "  Descriptor 2:\n    T2 CDL units             : 10 ms (0xa)\n    max inactive time        \
         : 30 ms\n    max inactive policy      : abort\n    max active time          : no \
         limit\n    duration guideline       : 70 ms\n    duration guideline policy: \
         complete-unavailable\n"
    );
    assert!(!shown.contains("Page T2B"));
    let again = dir.path().join("again.cdl");
    cdl_ok(&[
        "save",
        &url,
        "--page",
        "t2a",
        "--file",
        again.to_str().unwrap(),
    ]);
    assert_eq!(std::fs::read_to_string(&again).unwrap(), edited);

    // --raw shows the codes.
    let raw = cdl_ok(&["show", &url, "--page", "t2a", "--raw"]);
    assert!(raw.contains(
        "  Descriptor 2:\n    T2 CDL units             : 0xa\n    max inactive time        : \
         0x0003\n    max inactive policy      : 0xf\n"
    ));
    s.logout().await.unwrap();
    assert!(server.stop());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_in_cdladms_format_load() {
    let server = Server::start(&["--config", HDD_CDL], 1);
    let url = server.urls[0].clone();
    let dir = tempfile::tempdir().unwrap();
    let (mut s, lun) = login(&url).await;

    // A start from other values, so that the benchmark page has something to change.
    let first = page_file("T2A", Some(0x4), &ACTIVE_INACTIVE);
    let path = write(dir.path(), "active-inactive.cdl", &first);
    cdl_ok(&["upload", &url, "--file", &path]);
    let t2a = mode_page(&mut s, lun, 0x07, PageControl::Current).await;
    assert_eq!(t2a[7] >> 4, 0x4);
    for (n, d) in (1..).zip(ACTIVE_INACTIVE) {
        assert_eq!(descriptor(&t2a, n), d, "descriptor {n}");
    }

    // cdl-tools' benchmark page, as a file written out by hand.
    let path = write(dir.path(), "T2A.cdl", BENCHMARK_T2A);
    cdl_ok(&["upload", &url, "--file", &path]);
    let t2a = mode_page(&mut s, lun, 0x07, PageControl::Current).await;
    assert_eq!(t2a[7] >> 4, 0xC);
    for (n, guideline) in (1..).zip([5, 10, 20, 30, 40, 50, 0]) {
        assert_eq!(
            descriptor(&t2a, n),
            (0xa, 0, 0, 0, 0, guideline, 0),
            "descriptor {n}"
        );
    }
    // What stint saves holds the same fields in the same order.
    let saved = dir.path().join("saved.cdl");
    cdl_ok(&[
        "save",
        &url,
        "--page",
        "t2a",
        "--file",
        saved.to_str().unwrap(),
    ]);
    assert_eq!(
        significant(&std::fs::read_to_string(&saved).unwrap()),
        significant(BENCHMARK_T2A)
    );

    // A T2B page from cdl-tools' tests, made permanent: current and saved values change.
    let t2b_file = page_file("T2B", None, &T2B_TEST);
    let path = write(dir.path(), "T2B.cdl", &t2b_file);
    let saved_before = mode_page(&mut s, lun, 0x08, PageControl::Saved).await;
    let out = cdl_ok(&["upload", &url, "--file", &path, "--permanent"]);
    assert!(
        out.ends_with("Page T2B uploaded (current and saved values)\n"),
        "{out}"
    );
    let current = mode_page(&mut s, lun, 0x08, PageControl::Current).await;
    let saved_after = mode_page(&mut s, lun, 0x08, PageControl::Saved).await;
    for (n, d) in (1..).zip(T2B_TEST) {
        assert_eq!(descriptor(&current, n), d, "descriptor {n}");
    }
    assert_ne!(saved_before, saved_after);
    assert_eq!(&saved_after[4..], &current[4..]);
    // The T2A uploads above were not permanent: its saved values are still the defaults.
    assert_eq!(
        descriptor(&mode_page(&mut s, lun, 0x07, PageControl::Saved).await, 1),
        (0xa, 0, 0, 0, 0, 5, 0)
    );
    let both = dir.path().join("lun0.cdl");
    let out = cdl_ok(&["save", &url, "--file", both.to_str().unwrap()]);
    assert_eq!(out.lines().count(), 2, "{out}");
    let t2b_saved = std::fs::read_to_string(dir.path().join("lun0-T2B.cdl")).unwrap();
    assert_eq!(significant(&t2b_saved), significant(&t2b_file));
    assert!(dir.path().join("lun0-T2A.cdl").exists());
    s.logout().await.unwrap();
    assert!(server.stop());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_file_is_refused_with_its_line_and_the_lun_is_unchanged() {
    let server = Server::start(&["--config", HDD_CDL], 1);
    let url = server.urls[0].clone();
    let dir = tempfile::tempdir().unwrap();
    let (mut s, lun) = login(&url).await;
    let good = page_file("T2A", Some(0xc), &ACTIVE_INACTIVE);
    let line_of = |text: &str, n: usize, key: &str| {
        let block = text.find(&format!("== descriptor: {n}\n")).unwrap();
        let at = block + text[block..].find(&format!("\n{key}:")).unwrap() + 1;
        text[..at].lines().count() + 1
    };
    let cases: Vec<(String, usize, &str)> =
        vec![
        // An abort-recovery policy for an inactive limit, in the last descriptor: a tool
        // that applied descriptors as it read them would have changed 1-6 already.
        (
            set_field(&good, 7, "max-inactive-time-policy", "0xe"),
            line_of(&good, 7, "max-inactive-time-policy"),
            "descriptor 7 max-inactive-time-policy: 0xe (abort-recovery) is not allowed for a max \
             inactive time (allowed: 0x0 complete-earliest, 0xd complete-unavailable, 0xf abort)",
        ),
        (
            set_field(&good, 6, "duration-guideline", "65536"),
            line_of(&good, 6, "duration-guideline"),
            "descriptor 6 duration-guideline: `65536` does not fit the 16-bit field",
        ),
        (
            set_field(&good, 3, "t2cdlunits", "0x9"),
            line_of(&good, 3, "t2cdlunits"),
            "descriptor 3 t2cdlunits: 0x9 is reserved (allowed: 0x0 none, 0x6 500ns, 0x8 1us, \
             0xa 10ms, 0xe 500ms)",
        ),
        (
            set_field(&good, 5, "max-active-time-policy", "0x3"),
            line_of(&good, 5, "max-active-time-policy"),
            "descriptor 5 max-active-time-policy: 0x3 is not a policy",
        ),
        (
            good.replace("perf-vs-duration-guideline: 0xc", "perf-vs-duration-guideline: 0xd"),
            5,
            "perf-vs-duration-guideline: 0xd is reserved (allowed: 0x0..0xc",
        ),
        (
            set_field(&good, 4, "max-inactive-time", "2ms"),
            line_of(&good, 4, "max-inactive-time"),
            "descriptor 4 max-inactive-time: `2ms` is not a decimal number",
        ),
        (
            good.replace("== descriptor: 6\n", "== descriptor: 8\n"),
            line_of(&good, 6, "t2cdlunits") - 1,
            "expected `== descriptor: 6`, found `== descriptor: 8`",
        ),
        (
            good.replace("max-active-time: 2\nmax-active-time-policy: 0xf\n", ""),
            line_of(&good, 3, "max-active-time"),
            "expected `max-active-time:` (descriptor 3), found `duration-guideline: 0`",
        ),
        (
            format!("{good}cdlp: T2B\n"),
            good.lines().count() + 1,
            "unexpected `cdlp: T2B` after descriptor 7",
        ),
        (good.replace("cdlp: T2A", "cdlp: B"), 3, "cdlp: page B is an SPC-5 CDL page"),
    ];
    for (i, (text, line, message)) in cases.iter().enumerate() {
        let before = both_pages(&mut s, lun).await;
        let path = write(dir.path(), &format!("bad{i}.cdl"), text);
        let (ok, out, err) = cdl(&["upload", &url, "--file", &path]);
        assert!(!ok, "case {i} was accepted:\n{out}");
        assert!(
            err.contains(&format!("{path}: line {line}: {message}")),
            "case {i}: expected line {line}: {message}\ngot: {err}"
        );
        assert!(err.contains("nothing was sent to the LUN"), "{err}");
        assert!(!err.contains("panicked"), "{err}");
        assert_eq!(
            both_pages(&mut s, lun).await,
            before,
            "case {i} changed the LUN"
        );
    }
    // A file that cannot be read.
    let (ok, _, err) = cdl(&["upload", &url, "--file", "/nonexistent/page.cdl"]);
    assert!(
        !ok && err.contains("cannot read /nonexistent/page.cdl"),
        "{err}"
    );
    // The good file still loads.
    let path = write(dir.path(), "good.cdl", &good);
    cdl_ok(&["upload", &url, "--file", &path]);
    let t2a = mode_page(&mut s, lun, 0x07, PageControl::Current).await;
    assert_eq!(descriptor(&t2a, 7), ACTIVE_INACTIVE[6]);
    assert_eq!(descriptor(&t2a, 6), ACTIVE_INACTIVE[5]);
    s.logout().await.unwrap();
    assert!(server.stop());
}

/// The stats table row of descriptor `n` under `page`: (inactive-miss, active-miss,
/// inactive-or-active-miss, commands).
fn stats_row(out: &str, page: &str, n: usize) -> [u64; 4] {
    let section = &out[out.find(&format!("Page {page}:")).unwrap()..];
    let row = section
        .lines()
        .skip(2)
        .find(|l| l.split_whitespace().next() == Some(&n.to_string()))
        .unwrap();
    let v: Vec<u64> = row
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().unwrap())
        .collect();
    [v[0], v[1], v[2], v[3]]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_count_the_commands_sent_per_descriptor() {
    let server = Server::start(&["--config", HDD_CDL], 1);
    let url = server.urls[0].clone();
    let (mut s, lun) = login(&url).await;
    let out = cdl_ok(&["stats", &url]);
    assert_eq!(stats_row(&out, "T2A", 1), [0, 0, 0, 0]);
    // 9 READ(16) with DLD 1, 4 WRITE(16) with DLD 2, 2 READ(16) with DLD 7, 3 without.
    let sent = [(false, 1, 9), (true, 2, 4), (false, 7, 2), (false, 0, 3)];
    for (i, (is_write, dld, n)) in sent.into_iter().enumerate() {
        for k in 0..n {
            let lba = (i as u64 * 1000 + k) * 4096;
            let rw = ReadWrite { dld, ..rw(lba, 8) };
            let (cdb, data, alloc) = if is_write {
                (cdb::write(form::WRITE_16, rw), vec![0xA5; 4096], 0)
            } else {
                (cdb::read(form::READ_16, rw), Vec::new(), 4096)
            };
            let (status, _) = run(&mut s, lun, &cdb, &data, alloc).await;
            assert_eq!(status, 0);
        }
    }
    let out = cdl_ok(&["stats", &url]);
    assert!(out.contains("Page T2A: parameters 0021h-0027h\n"), "{out}");
    assert!(out.contains("Page T2B: parameters 0041h-0047h\n"), "{out}");
    let commands = |page: &str, n: usize| stats_row(&out, page, n)[3];
    assert_eq!(commands("T2A", 1), 9, "{out}");
    assert_eq!(commands("T2B", 2), 4, "{out}");
    assert_eq!(commands("T2A", 7), 2, "{out}");
    for n in 2..=6 {
        assert_eq!(commands("T2A", n), 0, "{out}");
    }
    for n in [1, 3, 4, 5, 6, 7] {
        assert_eq!(commands("T2B", n), 0, "{out}");
    }
    // Misses never exceed the commands.
    for page in ["T2A", "T2B"] {
        for n in 1..=7 {
            let [i, a, e, c] = stats_row(&out, page, n);
            assert!(i <= c && a <= c && e <= c, "{page} {n}: {out}");
        }
    }
    // --reset zeroes every counter, and counting starts again from there.
    let out = cdl_ok(&["stats", "--reset", &url]);
    for page in ["T2A", "T2B"] {
        for n in 1..=7 {
            assert_eq!(stats_row(&out, page, n), [0, 0, 0, 0], "{page} {n}: {out}");
        }
    }
    let dld1 = cdb::read(form::READ_16, ReadWrite { dld: 1, ..rw(0, 8) });
    let (status, _) = run(&mut s, lun, &dld1, &[], 4096).await;
    assert_eq!(status, 0);
    let out = cdl_ok(&["stats", &url]);
    assert_eq!(stats_row(&out, "T2A", 1)[3], 1, "{out}");
    s.logout().await.unwrap();
    assert!(server.stop());
}

#[test]
fn info_tells_a_cdl_disk_from_a_plain_lun() {
    let server = Server::start(&["--lun", "ram:64MiB", "--lun", "hdd"], 2);
    let (plain, hdd) = (&server.urls[0], &server.urls[1]);

    let out = cdl_ok(&["info", plain]);
    assert!(out.contains("    INQUIRY VERSION: 0Dh (SPC-6)\n"), "{out}");
    assert!(
        out.contains(
            "    Command duration limits: not supported (no command reports a T2A or T2B page)\n"
        ),
        "{out}"
    );
    assert!(
        out.contains("READ(16)   88h        RWCDLP 0, CDLP 00b: not duration limited"),
        "{out}"
    );
    assert!(out.contains("T2A  0Ah/07h: not present (CHECK CONDITION, ILLEGAL REQUEST, INVALID FIELD IN CDB (24h/00h)"), "{out}");
    assert!(
        out.contains("    Statistics (LOG SENSE 19h/21h): not supported"),
        "{out}"
    );

    let out = cdl_ok(&["info", hdd]);
    assert!(
        out.contains("    Command duration limits: supported (T2A, T2B)\n"),
        "{out}"
    );
    for line in [
        "READ(16)   88h        RWCDLP 1, CDLP 01b: T2A mode page",
        "WRITE(16)  8Ah        RWCDLP 1, CDLP 10b: T2B mode page",
        "READ(32)   7Fh/0009h  RWCDLP 1, CDLP 01b: T2A mode page",
        "WRITE(32)  7Fh/000Bh  RWCDLP 1, CDLP 10b: T2B mode page",
        "T2A  0Ah/07h: present, read descriptors, savable (PS 1)",
        "T2B  0Ah/08h: present, write descriptors, savable (PS 1)",
        "Statistics (LOG SENSE 19h/21h): supported",
    ] {
        assert!(out.contains(line), "{line}\n{out}");
    }

    // The other commands refuse a LUN without CDL, saying why.
    for args in [
        vec!["show", plain.as_str()],
        vec![
            "save",
            plain.as_str(),
            "--page",
            "t2a",
            "--file",
            "/tmp/never-written.cdl",
        ],
    ] {
        let (ok, _, err) = cdl(&args);
        assert!(!ok);
        assert!(
            err.contains("the LUN does not support command duration limits: none of READ(16), WRITE(16), READ(32), WRITE(32) reports a CDL page"),
            "{err}"
        );
    }
    assert!(!Path::new("/tmp/never-written.cdl").exists());
    let (ok, _, err) = cdl(&["stats", plain]);
    assert!(
        !ok && err.contains(
            "the LUN has no CDL statistics: LOG SENSE page 19h subpage 21h is not supported"
        ),
        "{err}"
    );
    let (ok, _, err) = cdl(&["stats", "--reset", plain]);
    assert!(
        !ok && err.contains("resetting the CDL statistics (LOG SELECT, PCR=1, page 19h/21h) failed: CHECK CONDITION, ILLEGAL REQUEST"),
        "{err}"
    );

    // A LUN that does not exist, a target that does not exist, a portal nobody listens on,
    // a URL that is not one.
    let absent = plain.replace("/0", "/9");
    let (ok, _, err) = cdl(&["info", &absent]);
    assert!(!ok && err.contains("LUN 9 does not exist on iqn.2026-11.dev.stint:target0 (INQUIRY peripheral qualifier 011b); REPORT LUNS lists: 0, 1"), "{err}");
    let wrong = plain.replace("target0", "nothere");
    let (ok, _, err) = cdl(&["show", &wrong]);
    assert!(
        !ok && err.contains("no target of that name at this portal"),
        "{err}"
    );
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (ok, _, err) = cdl(&["info", &format!("iscsi://127.0.0.1:{port}/iqn.x/0")]);
    assert!(
        !ok && err.contains(&format!("cannot connect to 127.0.0.1:{port}")),
        "{err}"
    );
    let (ok, _, err) = cdl(&["stats", "127.0.0.1/iqn.x/0"]);
    assert!(!ok && err.contains("does not start with iscsi://"), "{err}");
    assert!(server.stop());
}

#[test]
fn help_describes_every_subcommand() {
    let out = cdl_ok(&["--help"]);
    for sub in ["info", "show", "save", "upload", "stats"] {
        assert!(out.contains(&format!("\n  {sub} ")), "{sub}: {out}");
    }
    let upload = cdl_ok(&["upload", "--help"]);
    for text in [
        "--permanent",
        "--file <FILE>",
        "SP=1",
        "perf-vs-duration-guideline: 0xc",
        "<URL>",
    ] {
        assert!(upload.contains(text), "{text}: {upload}");
    }
    let save = cdl_ok(&["save", "--help"]);
    assert!(
        save.contains("--page <PAGE>") && save.contains("disk-T2A.cdl"),
        "{save}"
    );
    let stats = cdl_ok(&["stats", "--help"]);
    assert!(
        stats.contains("0041h-0047h") && stats.contains("LOG SELECT"),
        "{stats}"
    );
    let (ok, _, err) = cdl(&["show", "iscsi://h/iqn.x/0", "--page", "t2c"]);
    assert!(!ok && err.contains("possible values: t2a, t2b"), "{err}");
}
