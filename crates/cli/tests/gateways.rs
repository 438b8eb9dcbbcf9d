//! Two `stint serve` gateways exporting one RBD image (docs/gateways.md): one disk with two
//! paths (the same identity, a target port group each), the first gateway active/optimized
//! while it lives; what one acknowledged the other reads, whichever wrote last; a LOGICAL
//! UNIT RESET through one gateway reaches the nexuses of the other; a gateway
//! killed under writes loses no acknowledged block, the other takes the image over and
//! becomes the optimized one (ASYMMETRIC ACCESS STATE CHANGED), and the first takes that
//! back when it returns; libiscsi's multipath tests through both; persistent reservations,
//! one state through both gateways (registrations per target port, ALL_TG_PT, PREEMPT AND
//! ABORT's unit attentions and aborts on the other gateway, racing REGISTERs, APTPL when the
//! last gateway goes); SET TARGET PORT GROUPS through one gateway, the choice of both.
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
    /// Extra keys of the LUN's table.
    lun_keys: String,
}

impl Pair {
    fn new(conf: &str, test: &str) -> Pair {
        Pair::sized(conf, test, "64M", "")
    }

    /// A pair over an image of `size` (`rbd create --size`), the LUN with `lun_keys` too.
    fn sized(conf: &str, test: &str, size: &str, lun_keys: &str) -> Pair {
        let image = format!("stint-gw-{test}-{}", std::process::id());
        let _ = std::process::Command::new("rbd")
            .args(["-c", conf, "rm", "--no-progress", &format!("rbd/{image}")])
            .output();
        rbd(conf, &["create", "--size", size, &format!("rbd/{image}")]);
        Pair {
            conf: conf.to_owned(),
            image,
            dir: tempfile::tempdir().unwrap(),
            ports: [free_port(), free_port()],
            lun_keys: lun_keys.to_owned(),
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
{keys}
"#,
                image = self.image,
                conf = self.conf,
                keys = self.lun_keys
            ),
        )
        .unwrap();
        path
    }
}

impl Pair {
    /// Waits until no client has the image open (`rbd status`: "Watchers: none").
    fn until_unwatched(&self, limit: Duration) {
        let started = Instant::now();
        loop {
            let out = std::process::Command::new("rbd")
                .args(["-c", &self.conf, "status", &format!("rbd/{}", self.image)])
                .output()
                .expect("run rbd status");
            let text = String::from_utf8_lossy(&out.stdout);
            if out.status.success() && text.contains("Watchers: none") {
                return;
            }
            assert!(started.elapsed() < limit, "still watched: {text}");
            std::thread::sleep(Duration::from_millis(200));
        }
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

/// SET TARGET PORT GROUPS making group `group` active/optimized: its status, and the unit
/// attentions met on the way.
async fn prefer(s: &mut Initiator, lun: u64, group: u16) -> (CommandResult, Vec<Asc>) {
    let cdb = emit(
        Command::SetTargetPortGroups {
            parameter_list_length: 8,
        },
        form::SET_TARGET_PORT_GROUPS,
    );
    let mut list = vec![0u8; 8];
    list[6..].copy_from_slice(&group.to_be_bytes());
    command(s, lun, &cdb, &list, 0).await
}

#[test]
#[ignore = "needs a Ceph cluster: ./test.sh starts one and runs it"]
fn set_target_port_groups_through_one_gateway_is_every_gateways_choice() {
    let conf = cluster("set_target_port_groups_through_one_gateway_is_every_gateways_choice");
    let pair = Pair::new(&conf, "stpg");
    let (a, b) = (pair.start(0), pair.start(1));
    runtime().block_on(async {
        let (mut sa, lun) = session(&a.urls[0], "iqn.2026-11.dev.stint:host-a").await;
        let (mut sb1, _) = session(&b.urls[0], "iqn.2026-11.dev.stint:host-b1").await;
        let (mut sb2, _) = session(&b.urls[0], "iqn.2026-11.dev.stint:host-b2").await;
        for s in [&mut sa, &mut sb1, &mut sb2] {
            assert_eq!(groups(s, lun).await.0, [(1, 0), (2, 1)]);
        }
        // Through gw-b, gw-b becomes the optimized one, as both gateways report at once
        // (gw-a heard of it before the status came); every nexus but the sender's is told.
        let (r, _) = prefer(&mut sb1, lun, 2).await;
        assert_eq!(r.status, 0, "STPG: {:?}", r.parsed_sense());
        let changed = vec![Asc::ASYMMETRIC_ACCESS_STATE_CHANGED];
        assert_eq!(groups(&mut sb1, lun).await, (vec![(1, 1), (2, 0)], vec![]));
        assert_eq!(
            groups(&mut sb2, lun).await,
            (vec![(1, 1), (2, 0)], changed.clone())
        );
        assert_eq!(
            groups(&mut sa, lun).await,
            (vec![(1, 1), (2, 0)], changed.clone())
        );
        // It stays so while both live, past many looks at which gateways are alive.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        for s in [&mut sa, &mut sb1, &mut sb2] {
            assert_eq!(groups(s, lun).await, (vec![(1, 1), (2, 0)], vec![]));
        }
        // A write through gw-b, now preferred, and a read of it through gw-a.
        let data = pattern(7, 16 * BLOCK);
        assert_eq!(write_blocks(&mut sb1, lun, 40, &data).await, []);
        assert_eq!(read_blocks(&mut sa, lun, 40, 16).await, data);
        // And back, through gw-a: the gw-b nexuses are told this time.
        let (r, _) = prefer(&mut sa, lun, 1).await;
        assert_eq!(r.status, 0, "STPG: {:?}", r.parsed_sense());
        assert_eq!(groups(&mut sa, lun).await, (vec![(1, 0), (2, 1)], vec![]));
        for s in [&mut sb1, &mut sb2] {
            assert_eq!(
                groups(s, lun).await,
                (vec![(1, 0), (2, 1)], changed.clone())
            );
        }
        for s in [sa, sb1, sb2] {
            s.logout().await.expect("logout");
        }
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

// Persistent reservations through two gateways: one state in the cluster (docs/gateways.md).

/// PERSISTENT RESERVE OUT service actions and types (SPC-4 tables 213 and 214).
const REGISTER: u8 = 0x00;
const RESERVE: u8 = 0x01;
const PREEMPT_AND_ABORT: u8 = 0x05;
const EXCLUSIVE_ACCESS: u8 = 0x03;
/// Parameter list byte 20.
const ALL_TG_PT: u8 = 0x04;
const APTPL: u8 = 0x01;
const RESERVATION_CONFLICT: u8 = 0x18;

/// PERSISTENT RESERVE OUT with the basic parameter list: (status, unit attentions met).
async fn pr_out(
    s: &mut Initiator,
    lun: u64,
    action: u8,
    kind: u8,
    key: u64,
    sa_key: u64,
    flags: u8,
) -> (u8, Vec<Asc>) {
    let cdb = [0x5F, action, kind, 0, 0, 0, 0, 0, 24, 0];
    let mut list = vec![0u8; 24];
    list[..8].copy_from_slice(&key.to_be_bytes());
    list[8..16].copy_from_slice(&sa_key.to_be_bytes());
    list[20] = flags;
    let (r, met) = command(s, lun, &cdb, &list, 0).await;
    (r.status, met)
}

/// PERSISTENT RESERVE IN `action`'s parameter data, and the unit attentions met.
async fn pr_in(s: &mut Initiator, lun: u64, action: u8) -> (Vec<u8>, Vec<Asc>) {
    let cdb = [0x5E, action, 0, 0, 0, 0, 0, 0x20, 0, 0];
    let (r, met) = command(s, lun, &cdb, &[], 0x2000).await;
    assert_eq!(
        r.status,
        0,
        "PERSISTENT RESERVE IN {action}: {:?}",
        r.parsed_sense()
    );
    (r.data_in, met)
}

/// READ KEYS: the registered keys.
async fn keys(s: &mut Initiator, lun: u64) -> Vec<u64> {
    let (d, _) = pr_in(s, lun, 0).await;
    let len = u32::from_be_bytes(d[4..8].try_into().unwrap()) as usize;
    d[8..8 + len]
        .chunks(8)
        .map(|k| u64::from_be_bytes(k.try_into().unwrap()))
        .collect()
}

/// READ FULL STATUS: (key, ALL_TG_PT, holder, relative target port identifier) each.
async fn full_status(s: &mut Initiator, lun: u64) -> Vec<(u64, bool, bool, u16)> {
    let (d, _) = pr_in(s, lun, 3).await;
    let end = 8 + u32::from_be_bytes(d[4..8].try_into().unwrap()) as usize;
    let mut at = 8;
    let mut out = Vec::new();
    while at < end {
        let x = &d[at..];
        out.push((
            u64::from_be_bytes(x[..8].try_into().unwrap()),
            x[12] & 2 != 0,
            x[12] & 1 != 0,
            u16::from_be_bytes([x[18], x[19]]),
        ));
        at += 24 + u32::from_be_bytes(x[20..24].try_into().unwrap()) as usize;
    }
    out
}

#[test]
#[ignore = "needs a Ceph cluster: ./test.sh starts one and runs it"]
fn persistent_reservations_are_one_state_through_both_gateways() {
    let conf = cluster("persistent_reservations_are_one_state_through_both_gateways");
    let pair = Pair::new(&conf, "pr");
    let (a, b) = (pair.start(0), pair.start(1));
    runtime().block_on(async {
        let host = |n: u8| format!("iqn.2026-11.dev.stint:pr-host{n}");
        // Each host logs in through both gateways: one initiator port, two I_T nexuses.
        let (mut a1, lun) = session(&a.urls[0], &host(1)).await;
        let (mut b1, _) = session(&b.urls[0], &host(1)).await;
        let (mut a2, _) = session(&a.urls[0], &host(2)).await;
        let (mut b2, _) = session(&b.urls[0], &host(2)).await;
        let (mut a3, _) = session(&a.urls[0], &host(3)).await;
        let (mut b3, _) = session(&b.urls[0], &host(3)).await;
        for s in [&mut a1, &mut b1, &mut a2, &mut b2, &mut a3, &mut b3] {
            assert_eq!(keys(s, lun).await, Vec::<u64>::new());
        }

        // Host 1 registers through A alone: B reads the key, through port 1.
        assert_eq!(pr_out(&mut a1, lun, REGISTER, 0, 0, 0xA1, 0).await.0, 0);
        assert_eq!(keys(&mut b2, lun).await, [0xA1]);
        assert_eq!(full_status(&mut b2, lun).await, [(0xA1, false, false, 1)]);
        // Through B host 1 is another, unregistered I_T nexus: its RESERVE conflicts.
        let (status, _) = pr_out(&mut b1, lun, RESERVE, EXCLUSIVE_ACCESS, 0xA1, 0, 0).await;
        assert_eq!(
            status, RESERVATION_CONFLICT,
            "host 1 through B is not registered"
        );

        // Host 3 registers through A with ALL_TG_PT: it reserves through B.
        assert_eq!(
            pr_out(&mut a3, lun, REGISTER, 0, 0, 0xC3, ALL_TG_PT)
                .await
                .0,
            0
        );
        let (status, _) = pr_out(&mut b3, lun, RESERVE, EXCLUSIVE_ACCESS, 0xC3, 0, 0).await;
        assert_eq!(status, 0, "host 3 registered for every target port");
        // The reservation holds on both gateways: host 1 cannot write through either.
        for s in [&mut a1, &mut b1] {
            let cdb = write(form::WRITE_16, rw(0, 1));
            let (r, _) = command(s, lun, &cdb, &pattern(1, BLOCK), 0).await;
            assert_eq!(r.status, RESERVATION_CONFLICT);
        }
        let cdb = write(form::WRITE_16, rw(0, 1));
        let (r, _) = command(&mut a3, lun, &cdb, &pattern(1, BLOCK), 0).await;
        assert_eq!(r.status, 0, "the holder writes through A too");
        let status = full_status(&mut a1, lun).await;
        assert_eq!(status, [(0xA1, false, false, 1), (0xC3, true, true, 1)]);

        // Host 2 registers through B alone; host 1 preempts it (and aborts its tasks)
        // through A: host 2's nexus on B is told, its nexus on A (never registered) is not.
        assert_eq!(pr_out(&mut b2, lun, REGISTER, 0, 0, 0xB2, 0).await.0, 0);
        let status = full_status(&mut a1, lun).await;
        assert_eq!(status[2], (0xB2, false, false, 2), "{status:?}");
        let (s, met) = pr_out(
            &mut a1,
            lun,
            PREEMPT_AND_ABORT,
            EXCLUSIVE_ACCESS,
            0xA1,
            0xB2,
            0,
        )
        .await;
        assert_eq!((s, met), (0, vec![]));
        let (_, met) = pr_in(&mut b2, lun, 0).await;
        assert_eq!(met, [Asc::REGISTRATIONS_PREEMPTED], "host 2 through B");
        let (_, met) = pr_in(&mut a2, lun, 0).await;
        assert_eq!(met, [], "host 2 through A had no registration");
        assert_eq!(keys(&mut b1, lun).await, [0xA1, 0xC3]);
        for s in [a1, b1, a2, b2, a3, b3] {
            s.logout().await.expect("logout");
        }
    });
    assert!(a.stop(), "gateway a did not stop cleanly");
    assert!(b.stop(), "gateway b did not stop cleanly");
}

#[test]
#[ignore = "needs a Ceph cluster: ./test.sh starts one and runs it"]
fn registers_racing_through_both_gateways_all_end_registered() {
    const HOSTS: u64 = 16;
    let conf = cluster("registers_racing_through_both_gateways_all_end_registered");
    let pair = Pair::new(&conf, "prrace");
    let (a, b) = (pair.start(0), pair.start(1));
    runtime().block_on(async {
        // Half the hosts through each gateway, all logged in and past their power-on unit
        // attention first, then every REGISTER at once.
        let mut sessions = Vec::new();
        for i in 0..HOSTS {
            let url = if i % 2 == 0 { &a.urls[0] } else { &b.urls[0] };
            let (mut s, lun) = session(url, &format!("iqn.2026-11.dev.stint:race{i}")).await;
            keys(&mut s, lun).await;
            sessions.push((s, lun, i));
        }
        let racing = sessions.into_iter().map(|(mut s, lun, i)| {
            tokio::spawn(async move {
                let cdb = [0x5F, REGISTER, 0, 0, 0, 0, 0, 0, 24, 0];
                let mut list = vec![0u8; 24];
                list[8..16].copy_from_slice(&(0x100 + i).to_be_bytes());
                let r = s.scsi_command(lun, &cdb, &list, 0).await.expect("REGISTER");
                let status = (r.status, sense(&r));
                (s, lun, status)
            })
        });
        let mut done = Vec::new();
        for r in racing.collect::<Vec<_>>() {
            done.push(r.await.unwrap());
        }
        let statuses: Vec<_> = done.iter().map(|d| d.2).collect();
        assert!(
            statuses.iter().all(|s| s.0 == 0),
            "every REGISTER GOOD: {statuses:?}"
        );
        let (s, lun, _) = &mut done[0];
        let mut got = keys(s, *lun).await;
        got.sort_unstable();
        let want: Vec<u64> = (0..HOSTS).map(|i| 0x100 + i).collect();
        assert_eq!(got, want, "no registration lost to a race");
        let (d, _) = pr_in(s, *lun, 0).await;
        let generation = u32::from_be_bytes(d[..4].try_into().unwrap());
        assert_eq!(
            generation, HOSTS as u32,
            "one PRgeneration step per REGISTER"
        );
        for (s, _, _) in done {
            s.logout().await.expect("logout");
        }
    });
    assert!(a.stop());
    assert!(b.stop());
}

#[test]
#[ignore = "needs a Ceph cluster: ./test.sh starts one and runs it"]
fn reservations_without_aptpl_end_when_the_last_gateway_goes() {
    let conf = cluster("reservations_without_aptpl_end_when_the_last_gateway_goes");
    let pair = Pair::new(&conf, "praptpl");
    let host = "iqn.2026-11.dev.stint:aptpl-host";
    let keys_through = |server: &Server| {
        let url = server.urls[0].clone();
        runtime().block_on(async move {
            let (mut s, lun) = session(&url, host).await;
            let k = keys(&mut s, lun).await;
            s.logout().await.expect("logout");
            k
        })
    };
    let register = |server: &Server, key: u64, flags: u8| {
        let url = server.urls[0].clone();
        runtime().block_on(async move {
            let (mut s, lun) = session(&url, host).await;
            let (status, _) = pr_out(&mut s, lun, REGISTER, 0, 0, key, flags | ALL_TG_PT).await;
            s.logout().await.expect("logout");
            status
        })
    };
    // APTPL = 0 through A while B lives: A restarted finds it (B kept the logical unit on).
    let (a, b) = (pair.start(0), pair.start(1));
    assert_eq!(register(&a, 0x5, 0), 0);
    assert!(a.stop());
    let a = pair.start(0);
    assert_eq!(keys_through(&a), [0x5], "B was alive: no power loss");
    // Both gone, then A alone: the power loss ends APTPL = 0 registrations. A gateway whose
    // watch the OSD still keeps counts as alive (docs/gateways.md): first none is left.
    assert!(a.stop());
    assert!(b.stop());
    pair.until_unwatched(Duration::from_secs(30));
    let a = pair.start(0);
    assert_eq!(
        keys_through(&a),
        Vec::<u64>::new(),
        "APTPL = 0 lost at power on"
    );
    // APTPL = 1 survives it.
    assert_eq!(register(&a, 0x6, APTPL), 0);
    assert!(a.stop());
    let b = pair.start(1);
    assert_eq!(keys_through(&b), [0x6], "APTPL = 1 kept through power loss");
    assert!(b.stop());
}

#[test]
#[ignore = "needs a Ceph cluster: ./test.sh starts one and runs it"]
fn preempt_and_abort_through_one_gateway_aborts_a_task_on_the_other() {
    let conf = cluster("preempt_and_abort_through_one_gateway_aborts_a_task_on_the_other");
    // 4096-byte blocks: the longest WRITE SAME is 256 MiB, long enough to be under way when
    // the preemption comes, even on a loaded machine.
    let pair = Pair::sized(&conf, "prabort", "256M", "block_size = 4096");
    let (a, b) = (pair.start(0), pair.start(1));
    runtime().block_on(async {
        let (mut a1, lun) = session(&a.urls[0], "iqn.2026-11.dev.stint:abort-host1").await;
        let (mut b2, _) = session(&b.urls[0], "iqn.2026-11.dev.stint:abort-host2").await;
        assert_eq!(pr_out(&mut a1, lun, REGISTER, 0, 0, 0xA1, 0).await.0, 0);
        assert_eq!(pr_out(&mut b2, lun, REGISTER, 0, 0, 0xB2, 0).await.0, 0);
        // A WRITE SAME of 256 MiB through B: long enough to be under way when host 1
        // preempts host 2 through A. Aborted (TAS = 0), it never gets a status.
        let blocks: u32 = 65535;
        let mut cdb = [0u8; 16];
        cdb[0] = 0x93;
        cdb[10..14].copy_from_slice(&blocks.to_be_bytes());
        let started = Instant::now();
        let long = tokio::spawn(async move {
            let r = b2.scsi_command(lun, &cdb, &pattern(9, 4096), 0).await;
            (r.map(|r| r.status), started.elapsed())
        });
        // Under way before the preemption is sent.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let (s, _) = pr_out(
            &mut a1,
            lun,
            PREEMPT_AND_ABORT,
            EXCLUSIVE_ACCESS,
            0xA1,
            0xB2,
            0,
        )
        .await;
        assert_eq!(s, 0);
        let preempted = started.elapsed();
        // The initiator gives up on a task without response after its 10 s timeout.
        let (r, took) = long.await.unwrap();
        assert!(
            matches!(r, Err(iscsi::initiator::Error::Timeout)),
            "the WRITE SAME ended with {r:?} after {took:?} (PREEMPT AND ABORT done at \
             {preempted:?}): not aborted"
        );
        assert_eq!(keys(&mut a1, lun).await, [0xA1]);
        a1.logout().await.expect("logout");
    });
    assert!(a.stop());
    assert!(b.stop());
}
