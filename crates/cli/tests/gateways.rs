//! Two `stint serve` gateways exporting one RBD image (docs/gateways.md): one disk with two
//! paths (the same identity, a target port group each), the first gateway active/optimized
//! while it lives; what one acknowledged the other reads, whichever wrote last; a LOGICAL
//! UNIT RESET through one gateway reaches the nexuses of the other; a gateway
//! killed under writes loses no acknowledged block, the other takes the image over and
//! becomes the optimized one (ASYMMETRIC ACCESS STATE CHANGED), and the first takes that
//! back when it returns; libiscsi's multipath tests through both.
//!
//! Needs a cluster, as crates/cli/tests/rbd.rs does: `STINT_CEPH_CONF` names its ceph.conf.

mod common;
use common::cdb::{emit, read, rw, sense, write};
use common::{free_port, pattern, runtime, Server};
use iscsi::initiator::{CommandResult, Initiator, LoginOptions};
use iscsi::url::IscsiUrl;
use scsi::command::{Command, Inquiry};
use scsi::{form, Asc, SenseKey};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const BLOCK: usize = 512;
const TARGET: &str = "iqn.2026-11.dev.stint:gateways";

fn cluster(test: &str) -> String {
    match std::env::var("STINT_CEPH_CONF") {
        Ok(conf) if !conf.is_empty() => conf,
        _ => panic!("{test}: STINT_CEPH_CONF is not set (./test.sh starts a cluster)"),
    }
}

fn rbd(conf: &str, args: &[&str]) {
    let out = std::process::Command::new("rbd")
        .args(["-c", conf])
        .args(args)
        .output()
        .expect("run rbd");
    assert!(
        out.status.success(),
        "rbd {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Two gateways ("a" in port group 1, "b" in 2) of one fresh 64 MiB image, each with its
/// configuration file in a directory of its own; the image is removed when dropped.
struct Pair {
    conf: String,
    image: String,
    dir: tempfile::TempDir,
    ports: [u16; 2],
}

impl Pair {
    fn new(conf: &str, test: &str) -> Pair {
        let image = format!("stint-gw-{test}-{}", std::process::id());
        let _ = std::process::Command::new("rbd")
            .args(["-c", conf, "rm", "--no-progress", &format!("rbd/{image}")])
            .output();
        rbd(conf, &["create", "--size", "64M", &format!("rbd/{image}")]);
        Pair {
            conf: conf.to_owned(),
            image,
            dir: tempfile::tempdir().unwrap(),
            ports: [free_port(), free_port()],
        }
    }

    /// Starts gateway `which` (0: a, 1: b).
    fn start(&self, which: usize) -> Server {
        let name = ["a", "b"][which];
        let dir = self.dir.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let config = self.config(&dir, name);
        let listen = format!("127.0.0.1:{}", self.ports[which]);
        Server::start_listening(&listen, &["--config", config.to_str().unwrap()], 1, &[])
    }

    fn config(&self, dir: &Path, me: &str) -> PathBuf {
        let path = dir.join("stint.toml");
        let [a, b] = self.ports;
        std::fs::write(
            &path,
            format!(
                r#"
[[target]]
name = "{TARGET}"
gateway = "{me}"
[[target.gateways]]
name = "a"
portal = "127.0.0.1:{a}"
port_group = 1
[[target.gateways]]
name = "b"
portal = "127.0.0.1:{b}"
port_group = 2
[[target.lun]]
store = "rbd"
pool = "rbd"
image = "{image}"
conf = "{conf}"
"#,
                image = self.image,
                conf = self.conf
            ),
        )
        .unwrap();
        path
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        let _ = std::process::Command::new("rbd")
            .args([
                "-c",
                &self.conf,
                "rm",
                "--no-progress",
                &format!("rbd/{}", self.image),
            ])
            .output();
    }
}

async fn session(url: &str, initiator: &str) -> (Initiator, u64) {
    let url: IscsiUrl = url.parse().expect("stint prints valid URLs");
    let opts = LoginOptions::new(initiator, Some(&url.target));
    let s = Initiator::connect_portal(&url.portal, &opts)
        .await
        .expect("login");
    (s, url.lun)
}

/// `cdb` until it meets no unit attention (each is reported once), with the conditions met.
async fn command(
    s: &mut Initiator,
    lun: u64,
    cdb: &[u8],
    out: &[u8],
    len: u32,
) -> (CommandResult, Vec<Asc>) {
    let mut met = Vec::new();
    loop {
        let r = s.scsi_command(lun, cdb, out, len).await.expect("command");
        match sense(&r) {
            Some((SenseKey::UnitAttention, asc)) if met.len() < 8 => met.push(asc),
            _ => return (r, met),
        }
    }
}

async fn write_blocks(s: &mut Initiator, lun: u64, lba: u64, data: &[u8]) -> Vec<Asc> {
    let cdb = write(form::WRITE_16, rw(lba, (data.len() / BLOCK) as u32));
    let (r, met) = command(s, lun, &cdb, data, 0).await;
    assert_eq!(r.status, 0, "WRITE(16) at {lba}: {:?}", r.parsed_sense());
    met
}

async fn read_blocks(s: &mut Initiator, lun: u64, lba: u64, blocks: u32) -> Vec<u8> {
    let cdb = read(form::READ_16, rw(lba, blocks));
    let (r, _) = command(s, lun, &cdb, &[], blocks * BLOCK as u32).await;
    assert_eq!(r.status, 0, "READ(16) at {lba}: {:?}", r.parsed_sense());
    r.data_in
}

/// (group, ASYMMETRIC ACCESS STATE) of each target port group REPORT TARGET PORT GROUPS
/// lists, and the unit attentions met on the way.
async fn groups(s: &mut Initiator, lun: u64) -> (Vec<(u16, u8)>, Vec<Asc>) {
    let cdb = emit(
        Command::ReportTargetPortGroups {
            extended: false,
            allocation_length: 1024,
        },
        form::REPORT_TARGET_PORT_GROUPS,
    );
    let (r, met) = command(s, lun, &cdb, &[], 1024).await;
    assert_eq!(r.status, 0, "RTPG: {:?}", r.parsed_sense());
    let groups = r.data_in[4..]
        .chunks(12)
        .map(|d| (u16::from_be_bytes([d[2], d[3]]), d[0] & 0x0F))
        .collect();
    (groups, met)
}

/// Asks REPORT TARGET PORT GROUPS until group `optimized` is active/optimized (state 0) and
/// the other active/non-optimized, for at most `within`; returns the unit attentions met
/// meanwhile.
async fn until_optimized(
    s: &mut Initiator,
    lun: u64,
    optimized: u16,
    within: Duration,
) -> Vec<Asc> {
    let deadline = Instant::now() + within;
    let mut met = Vec::new();
    loop {
        let (states, m) = groups(s, lun).await;
        met.extend(m);
        let want: Vec<(u16, u8)> = [1, 2].map(|g| (g, u8::from(g != optimized))).into();
        if states == want {
            return met;
        }
        assert!(
            Instant::now() < deadline,
            "group {optimized} never became the optimized one: {states:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The VPD 83h designators of the logical unit (ASSOCIATION 00b) and of its target port
/// (01b), by (association, type).
async fn designators(s: &mut Initiator, lun: u64) -> Vec<(u8, u8, Vec<u8>)> {
    let cdb = emit(
        Command::Inquiry(Inquiry {
            evpd: true,
            page_code: 0x83,
            allocation_length: 255,
        }),
        form::INQUIRY,
    );
    let (r, _) = command(s, lun, &cdb, &[], 255).await;
    assert_eq!(r.status, 0);
    let page = r.data_in;
    let mut at = 4;
    let mut found = Vec::new();
    while at + 4 <= page.len() {
        let len = usize::from(page[at + 3]);
        found.push((
            (page[at + 1] >> 4) & 3,
            page[at + 1] & 0x0F,
            page[at + 4..at + 4 + len].to_vec(),
        ));
        at += 4 + len;
    }
    found
}

#[test]
#[ignore = "needs a Ceph cluster: ./test.sh starts one and runs it"]
fn two_gateways_are_one_disk_and_either_reads_what_the_other_wrote() {
    let conf = cluster("two_gateways_are_one_disk_and_either_reads_what_the_other_wrote");
    let pair = Pair::new(&conf, "paths");
    let (a, b) = (pair.start(0), pair.start(1));
    runtime().block_on(async {
        let (mut sa, lun) = session(&a.urls[0], "iqn.2026-11.dev.stint:host-a").await;
        let (mut sb, _) = session(&b.urls[0], "iqn.2026-11.dev.stint:host-b").await;
        // One logical unit: the same NAA and EUI-64; a target port group and port each.
        let (da, db) = (
            designators(&mut sa, lun).await,
            designators(&mut sb, lun).await,
        );
        let lu = |d: &[(u8, u8, Vec<u8>)]| -> Vec<(u8, u8, Vec<u8>)> {
            d.iter().filter(|x| x.0 == 0).cloned().collect()
        };
        assert_eq!(lu(&da), lu(&db));
        assert!(da.contains(&(1, 5, vec![0, 0, 0, 1])), "{da:?}");
        assert!(db.contains(&(1, 5, vec![0, 0, 0, 2])), "{db:?}");
        // Both alive: the first listed is the optimized one, through either path.
        assert_eq!(groups(&mut sa, lun).await.0, [(1, 0), (2, 1)]);
        assert_eq!(groups(&mut sb, lun).await.0, [(1, 0), (2, 1)]);

        // Writes through either path take the image over; the other path reads them, and
        // the states stay (no unit attention on the way).
        for round in 0..3u64 {
            let data = pattern(round, 64 * BLOCK);
            let (w, r) = match round % 2 {
                0 => (&mut sa, &mut sb),
                _ => (&mut sb, &mut sa),
            };
            assert_eq!(write_blocks(w, lun, 100, &data).await, []);
            assert_eq!(read_blocks(r, lun, 100, 64).await, data, "round {round}");
        }
        assert_eq!(groups(&mut sa, lun).await, (vec![(1, 0), (2, 1)], vec![]));
        assert_eq!(groups(&mut sb, lun).await, (vec![(1, 0), (2, 1)], vec![]));

        // A LOGICAL UNIT RESET through A resets the one logical unit: B's nexus is told too.
        let reset = sa
            .task_management(iscsi::tmf::Function::LogicalUnitReset, lun, 0)
            .await
            .expect("LOGICAL UNIT RESET");
        assert_eq!(reset, iscsi::tmf::Response::FunctionComplete);
        for s in [&mut sa, &mut sb] {
            let (_, met) = groups(s, lun).await;
            assert_eq!(met, [Asc::BUS_DEVICE_RESET_FUNCTION_OCCURRED]);
        }
        sa.logout().await.expect("logout");
        sb.logout().await.expect("logout");
    });
    assert!(a.stop(), "gateway a did not stop cleanly");
    assert!(b.stop(), "gateway b did not stop cleanly");
}

#[test]
#[ignore = "needs a Ceph cluster: ./test.sh starts one and runs it"]
fn a_gateway_killed_under_writes_loses_no_acknowledged_block() {
    let conf = cluster("a_gateway_killed_under_writes_loses_no_acknowledged_block");
    let pair = Pair::new(&conf, "failover");
    let (a, b) = (pair.start(0), pair.start(1));
    let ua = a.urls[0].clone();
    let ub = b.urls[0].clone();
    let (acknowledged, pause) = runtime().block_on(async {
        let (mut sa, lun) = session(&ua, "iqn.2026-11.dev.stint:host").await;
        // Writes through A, each acknowledged one remembered, until A is killed mid-stream.
        let writer = tokio::spawn(async move {
            let mut acknowledged = Vec::new();
            for i in 0..u64::MAX {
                let data = pattern(1000 + i, 8 * BLOCK);
                let cdb = write(form::WRITE_16, rw(i * 8, 8));
                match sa.scsi_command(lun, &cdb, &data, 0).await {
                    Ok(r) if r.status == 0 => acknowledged.push(i),
                    // The power-on unit attention, then the kill.
                    Ok(r) if sense(&r).is_some_and(|s| s.0 == SenseKey::UnitAttention) => {}
                    _ => break,
                }
            }
            acknowledged
        });
        tokio::time::sleep(Duration::from_secs(2)).await;
        let killed = std::process::Command::new("kill")
            .args(["-KILL", &a.pid().to_string()])
            .status()
            .expect("kill");
        assert!(killed.success());
        let acknowledged = writer.await.unwrap();
        assert!(
            acknowledged.len() > 10,
            "only {} writes",
            acknowledged.len()
        );

        // B reads every acknowledged block at once (reads take no lock), then writes:
        // librbd breaks the dead gateway's lock, blocklisting it, and B holds the image.
        let (mut sb, lun) = session(&ub, "iqn.2026-11.dev.stint:host").await;
        for &i in &acknowledged {
            let got = read_blocks(&mut sb, lun, i * 8, 8).await;
            assert!(got == pattern(1000 + i, 8 * BLOCK), "write {i} lost");
        }
        let started = Instant::now();
        write_blocks(&mut sb, lun, 0, &pattern(7, 8 * BLOCK)).await;
        let pause = started.elapsed();
        // A's client is gone from the image: B is the optimized gateway now, and says so.
        let met = until_optimized(&mut sb, lun, 2, Duration::from_secs(60)).await;
        assert!(
            met.contains(&Asc::ASYMMETRIC_ACCESS_STATE_CHANGED),
            "B's nexus met {met:?}"
        );
        sb.logout().await.expect("logout");
        (acknowledged.len(), pause)
    });
    drop(a);
    eprintln!(
        "failover: {acknowledged} acknowledged writes kept; B's first write took {} ms",
        pause.as_millis()
    );
    // A restarted is the preferred gateway again, on both paths, and takes the image back
    // from the live B at its first write.
    let a = pair.start(0);
    runtime().block_on(async {
        let (mut sa, lun) = session(&a.urls[0], "iqn.2026-11.dev.stint:host-2").await;
        let (mut sb, _) = session(&b.urls[0], "iqn.2026-11.dev.stint:host-3").await;
        until_optimized(&mut sa, lun, 1, Duration::from_secs(10)).await;
        until_optimized(&mut sb, lun, 1, Duration::from_secs(10)).await;
        assert_eq!(read_blocks(&mut sa, lun, 0, 8).await, pattern(7, 8 * BLOCK));
        let started = Instant::now();
        write_blocks(&mut sa, lun, 0, &pattern(8, 8 * BLOCK)).await;
        eprintln!(
            "failback: A's first write took {} ms",
            started.elapsed().as_millis()
        );
        assert_eq!(read_blocks(&mut sb, lun, 0, 8).await, pattern(8, 8 * BLOCK));
        sa.logout().await.expect("logout");
        sb.logout().await.expect("logout");
    });
    assert!(a.stop());
    assert!(b.stop());
}

/// The multipath tests that may fail, from tests/conformance/libiscsi-expected-gateways.txt.
fn expected_failures() -> Vec<String> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/conformance/libiscsi-expected-gateways.txt"
    );
    std::fs::read_to_string(path)
        .expect("the expectations file")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split_whitespace().next().unwrap_or_default().to_owned())
        .collect()
}

#[test]
#[ignore = "needs a Ceph cluster: ./test.sh starts one and runs it"]
fn libiscsi_multipath_tests_pass_through_the_two_gateways() {
    let conf = cluster("libiscsi_multipath_tests_pass_through_the_two_gateways");
    let pair = Pair::new(&conf, "mpath");
    let (a, b) = (pair.start(0), pair.start(1));
    let out = std::process::Command::new("timeout")
        .args([
            "600",
            "iscsi-test-cu",
            "--dataloss",
            "-t",
            "ALL.MultipathIO",
        ])
        .args([&a.urls[0], &b.urls[0]])
        .output()
        .expect("iscsi-test-cu (./test.sh installs libiscsi-bin)");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    // "  Test: Simple ...passed" (a failed one's line goes on with its messages).
    let results: Vec<(String, bool)> = text
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("Test: "))
        .filter_map(|l| {
            let (name, rest) = l.split_once(" ...")?;
            Some((
                format!("ALL.MultipathIO.{name}"),
                rest.starts_with("passed"),
            ))
        })
        .collect();
    let names: Vec<&str> = results.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["Simple", "Reset", "CompareAndWrite", "CompareAndWriteAsync"]
            .map(|t| format!("ALL.MultipathIO.{t}")),
        "every multipath test ran (none skipped: libiscsi skips them when the paths differ)\n{text}"
    );
    let expected = expected_failures();
    for (name, passed) in &results {
        match (passed, expected.contains(name)) {
            (false, false) => panic!("{name} failed, and the expectations do not list it\n{text}"),
            (true, true) => eprintln!("{name} passed: the expectations may drop it"),
            _ => {}
        }
    }
    eprintln!("libiscsi ALL.MultipathIO through two gateways: {results:?}");
    assert!(a.stop());
    assert!(b.stop());
}
