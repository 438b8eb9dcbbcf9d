//! Two `stint serve` gateways exporting one RBD image (docs/gateways.md): one disk with two
//! paths (the same identity, a target port group each), the first gateway active/optimized
//! while it lives; what one acknowledged the other reads, whichever wrote last; a LOGICAL
//! UNIT RESET through one gateway reaches the nexuses of the other; a gateway
//! killed under writes loses no acknowledged block, the other takes the image over and
//! becomes the optimized one (ASYMMETRIC ACCESS STATE CHANGED), and the first takes that
//! back when it returns; libiscsi's multipath tests through both; persistent reservations,
//! one state through both gateways (registrations per target port, ALL_TG_PT, PREEMPT AND
//! ABORT's unit attentions and aborts on the other gateway, racing REGISTERs, APTPL when the
//! last gateway goes); RESERVE (6) through one gateway holding on both, released by the
//! holder, its logout or a LOGICAL UNIT RESET through the other; SET TARGET PORT GROUPS
//! through one gateway, the choice of both.
//!
//! Needs a cluster, as crates/cli/tests/rbd.rs does: `STINT_CEPH_CONF` names its ceph.conf.

mod common;
use common::cdb::{emit, persistent_reserve_in, persistent_reserve_out, read, rw, sense, write};
use common::ceph::{cluster, Image};
use common::{free_port, pattern, runtime, Server};
use iscsi::initiator::{CommandResult, Initiator, LoginOptions};
use iscsi::url::IscsiUrl;
use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use scsi::command::{Command, Inquiry, ReadWrite};
use scsi::persistent_reserve::{
    basic, decode_read_full_status, decode_read_keys, decode_read_reservation, Keys, PrInAction,
    PrOutAction, PrOutParameters, Registration, Reservation, ReservationType,
};
use scsi::{form, Asc, SenseKey};
use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use PrInAction::{ReadFullStatus, ReadKeys};
use PrOutAction::{PreemptAndAbort, Register, RegisterAndIgnoreExistingKey, Release, Reserve};
use ReservationType::ExclusiveAccess;

const BLOCK: usize = 512;
const TARGET: &str = "iqn.2026-11.dev.stint:gateways";

/// Two gateways ("a" in port group 1, "b" in 2) of one fresh 64 MiB image, each with its
/// configuration file in a directory of its own; the image is removed when dropped.
struct Pair {
    image: Image,
    dir: tempfile::TempDir,
    ports: [u16; 2],
    /// Extra keys of the LUN's table.
    lun_keys: String,
    /// The target's `alua_explicit`: hosts may choose the preferred gateway.
    explicit: bool,
}

impl Pair {
    fn new(conf: &str, test: &str) -> Pair {
        Pair::sized(conf, test, "64M", "")
    }

    /// A pair over an image of `size` (`rbd create --size`), the LUN with `lun_keys` too.
    fn sized(conf: &str, test: &str, size: &str, lun_keys: &str) -> Pair {
        Pair {
            image: Image::new(conf, &format!("stint-gw-{test}"), size),
            dir: tempfile::tempdir().unwrap(),
            ports: [free_port(), free_port()],
            lun_keys: lun_keys.to_owned(),
            explicit: false,
        }
    }

    /// The pair with `alua_explicit = true` (SET TARGET PORT GROUPS).
    fn explicit(self) -> Pair {
        Pair {
            explicit: true,
            ..self
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
alua_explicit = {explicit}
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
                image = self.image.name,
                conf = self.image.conf,
                keys = self.lun_keys,
                explicit = self.explicit
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
                .args(["-c", &self.image.conf, "status", &self.image.spec()])
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

async fn session(url: &str, initiator: &str) -> (Initiator, u64) {
    session_waiting(url, initiator, None).await
}

/// A session whose commands wait `timeout` (else the initiator's default) for a response: a
/// write through a gateway that just restarted waits until librbd has broken the dead owner's
/// lock (the cluster's watch timeout, then the blocklist), 7-10 s here when idle, more if busy.
async fn session_waiting(
    url: &str,
    initiator: &str,
    timeout: Option<Duration>,
) -> (Initiator, u64) {
    let url: IscsiUrl = url.parse().expect("stint prints valid URLs");
    let mut opts = LoginOptions::new(initiator, Some(&url.target));
    if let Some(timeout) = timeout {
        opts.timeout = timeout;
    }
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
    let pair = Pair::new(&conf, "stpg").explicit();
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

const RESERVATION_CONFLICT: u8 = 0x18;

/// PERSISTENT RESERVE OUT `action` of `kind` with the parameter list `list`: (status, unit
/// attentions met).
async fn pr_out(
    s: &mut Initiator,
    lun: u64,
    action: PrOutAction,
    kind: Option<ReservationType>,
    list: PrOutParameters,
) -> (u8, Vec<Asc>) {
    let list = list.encode();
    let cdb = persistent_reserve_out(action, kind, list.len());
    let (r, met) = command(s, lun, &cdb, &list, 0).await;
    (r.status, met)
}

/// PERSISTENT RESERVE IN `action`'s parameter data, and the unit attentions met.
async fn pr_in(s: &mut Initiator, lun: u64, action: PrInAction) -> (Vec<u8>, Vec<Asc>) {
    let cdb = persistent_reserve_in(action, 0x2000);
    let (r, met) = command(s, lun, &cdb, &[], 0x2000).await;
    assert_eq!(
        r.status,
        0,
        "PERSISTENT RESERVE IN {action:?}: {:?}",
        r.parsed_sense()
    );
    (r.data_in, met)
}

/// READ KEYS: PRgeneration and the registered keys.
async fn read_keys(s: &mut Initiator, lun: u64) -> Keys {
    let (d, _) = pr_in(s, lun, ReadKeys).await;
    decode_read_keys(&d).expect("READ KEYS parameter data")
}

/// READ KEYS: the registered keys.
async fn keys(s: &mut Initiator, lun: u64) -> Vec<u64> {
    read_keys(s, lun).await.keys
}

/// READ FULL STATUS: PRgeneration and the registrations.
async fn read_full_status(s: &mut Initiator, lun: u64) -> (u32, Vec<Registration>) {
    let (d, _) = pr_in(s, lun, ReadFullStatus).await;
    decode_read_full_status(&d).expect("READ FULL STATUS parameter data")
}

/// READ FULL STATUS: (key, ALL_TG_PT, holder, relative target port identifier) each.
async fn full_status(s: &mut Initiator, lun: u64) -> Vec<(u64, bool, bool, u16)> {
    let (_, registrations) = read_full_status(s, lun).await;
    registrations
        .into_iter()
        .map(|r| {
            (
                r.reservation_key,
                r.all_tg_pt,
                r.holds.is_some(),
                r.relative_target_port_identifier,
            )
        })
        .collect()
}

/// `list` with ALL_TG_PT: a registration for every target port (SPC-4 §5.13.7).
fn all_tg_pt(list: PrOutParameters) -> PrOutParameters {
    PrOutParameters {
        all_tg_pt: true,
        ..list
    }
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
        assert_eq!(
            pr_out(&mut a1, lun, Register, None, basic(0, 0xA1)).await.0,
            0
        );
        assert_eq!(keys(&mut b2, lun).await, [0xA1]);
        assert_eq!(full_status(&mut b2, lun).await, [(0xA1, false, false, 1)]);
        // Through B host 1 is another, unregistered I_T nexus: its RESERVE conflicts.
        let (status, _) =
            pr_out(&mut b1, lun, Reserve, Some(ExclusiveAccess), basic(0xA1, 0)).await;
        assert_eq!(
            status, RESERVATION_CONFLICT,
            "host 1 through B is not registered"
        );

        // Host 3 registers through A with ALL_TG_PT: it reserves through B.
        assert_eq!(
            pr_out(&mut a3, lun, Register, None, all_tg_pt(basic(0, 0xC3)))
                .await
                .0,
            0
        );
        let (status, _) =
            pr_out(&mut b3, lun, Reserve, Some(ExclusiveAccess), basic(0xC3, 0)).await;
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
        assert_eq!(
            pr_out(&mut b2, lun, Register, None, basic(0, 0xB2)).await.0,
            0
        );
        let status = full_status(&mut a1, lun).await;
        assert_eq!(status[2], (0xB2, false, false, 2), "{status:?}");
        let (s, met) = pr_out(
            &mut a1,
            lun,
            PreemptAndAbort,
            Some(ExclusiveAccess),
            basic(0xA1, 0xB2),
        )
        .await;
        assert_eq!((s, met), (0, vec![]));
        let (_, met) = pr_in(&mut b2, lun, ReadKeys).await;
        assert_eq!(met, [Asc::REGISTRATIONS_PREEMPTED], "host 2 through B");
        let (_, met) = pr_in(&mut a2, lun, ReadKeys).await;
        assert_eq!(met, [], "host 2 through A had no registration");
        assert_eq!(keys(&mut b1, lun).await, [0xA1, 0xC3]);
        for s in [a1, b1, a2, b2, a3, b3] {
            s.logout().await.expect("logout");
        }
    });
    assert!(a.stop(), "gateway a did not stop cleanly");
    assert!(b.stop(), "gateway b did not stop cleanly");
}

/// The status of `cdb` (no data either way) past the unit attentions it meets.
async fn status(s: &mut Initiator, lun: u64, cdb: &[u8]) -> u8 {
    command(s, lun, cdb, &[], 0).await.0.status
}

/// The status of a one-block WRITE(16) at LBA 0.
async fn write_status(s: &mut Initiator, lun: u64) -> u8 {
    let cdb = write(form::WRITE_16, rw(0, 1));
    command(s, lun, &cdb, &pattern(7, BLOCK), 0).await.0.status
}

#[test]
#[ignore = "needs a Ceph cluster: ./test.sh starts one and runs it"]
fn a_reserve_6_through_one_gateway_holds_on_both() {
    let conf = cluster("a_reserve_6_through_one_gateway_holds_on_both");
    let pair = Pair::new(&conf, "reserve6");
    let (a, b) = (pair.start(0), pair.start(1));
    let reserve = emit(Command::Reserve, form::RESERVE_6);
    let release = emit(Command::Release, form::RELEASE_6);
    let inquiry = emit(
        Command::Inquiry(Inquiry {
            evpd: false,
            page_code: 0,
            allocation_length: 36,
        }),
        form::INQUIRY,
    );
    runtime().block_on(async {
        let host = |n: u8| format!("iqn.2026-11.dev.stint:reserve-host{n}");
        let (mut a1, lun) = session(&a.urls[0], &host(1)).await;
        let (mut b1, _) = session(&b.urls[0], &host(1)).await;
        let (mut b2, _) = session(&b.urls[0], &host(2)).await;
        for s in [&mut a1, &mut b1, &mut b2] {
            assert_eq!(write_status(s, lun).await, 0);
        }
        // Host 1 reserves through A: host 2 through B, and host 1 through B (another I_T
        // nexus), are refused what SPC-2 refuses them; INQUIRY runs.
        assert_eq!(status(&mut a1, lun, &reserve).await, 0);
        for s in [&mut b2, &mut b1] {
            assert_eq!(write_status(s, lun).await, RESERVATION_CONFLICT);
        }
        let read_keys = persistent_reserve_in(ReadKeys, 0x2000);
        let (r, _) = command(&mut b2, lun, &read_keys, &[], 0x2000).await;
        assert_eq!(r.status, RESERVATION_CONFLICT, "PERSISTENT RESERVE IN");
        let (r, _) = command(&mut b2, lun, &inquiry, &[], 36).await;
        assert_eq!(r.status, 0, "INQUIRY");
        assert_eq!(write_status(&mut a1, lun).await, 0, "the holder writes");
        // A RELEASE through B by another nexus is a no-op.
        assert_eq!(status(&mut b2, lun, &release).await, 0);
        assert_eq!(write_status(&mut b2, lun).await, RESERVATION_CONFLICT);
        // The holder's RELEASE through A frees it on B; host 2 reserves through B.
        assert_eq!(status(&mut a1, lun, &release).await, 0);
        assert_eq!(write_status(&mut b2, lun).await, 0);
        assert_eq!(status(&mut b2, lun, &reserve).await, 0);
        assert_eq!(write_status(&mut a1, lun).await, RESERVATION_CONFLICT);
        // Host 2's nexus through B ends (logout): B releases it, and A hears of it.
        b2.logout().await.expect("logout");
        let started = Instant::now();
        while write_status(&mut a1, lun).await != 0 {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "the holder's logout did not release it"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // Host 1 reserves through B; a LOGICAL UNIT RESET through A releases it for both.
        assert_eq!(status(&mut b1, lun, &reserve).await, 0);
        assert_eq!(write_status(&mut a1, lun).await, RESERVATION_CONFLICT);
        let reset = a1
            .task_management(iscsi::tmf::Function::LogicalUnitReset, lun, 0)
            .await
            .expect("LOGICAL UNIT RESET");
        assert_eq!(reset, iscsi::tmf::Response::FunctionComplete);
        assert_eq!(write_status(&mut a1, lun).await, 0, "released by the reset");
        let (mut b3, _) = session(&b.urls[0], &host(3)).await;
        assert_eq!(write_status(&mut b3, lun).await, 0);
        for s in [a1, b1, b3] {
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
                let list = basic(0, 0x100 + i).encode();
                let cdb = persistent_reserve_out(Register, None, list.len());
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
        assert_eq!(
            read_keys(s, *lun).await.generation,
            HOSTS as u32,
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
    let register = |server: &Server, key: u64, aptpl: bool| {
        let url = server.urls[0].clone();
        runtime().block_on(async move {
            let (mut s, lun) = session(&url, host).await;
            let (status, _) = pr_out(
                &mut s,
                lun,
                Register,
                None,
                all_tg_pt(PrOutParameters {
                    aptpl,
                    ..basic(0, key)
                }),
            )
            .await;
            s.logout().await.expect("logout");
            status
        })
    };
    // APTPL = 0 through A while B lives: A restarted finds it (B kept the logical unit on).
    let (a, b) = (pair.start(0), pair.start(1));
    assert_eq!(register(&a, 0x5, false), 0);
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
    assert_eq!(register(&a, 0x6, true), 0);
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
        assert_eq!(
            pr_out(&mut a1, lun, Register, None, basic(0, 0xA1)).await.0,
            0
        );
        assert_eq!(
            pr_out(&mut b2, lun, Register, None, basic(0, 0xB2)).await.0,
            0
        );
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
            PreemptAndAbort,
            Some(ExclusiveAccess),
            basic(0xA1, 0xB2),
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

// A gateway killed in the middle of PERSISTENT RESERVE OUTs and a write burst (issue 20's fault
// test): the reservation state through the other gateway is the one before or after the
// command in flight, never half of it, and every acknowledged block is there.

/// The persistent reservation state as the hosts of the fault test change it; every
/// registration is through gw-a (relative target port 1), none with ALL_TG_PT.
#[derive(Clone, Debug, PartialEq)]
struct PrState {
    generation: u32,
    /// Key by initiator port.
    registrations: BTreeMap<String, u64>,
    /// The holder's initiator port (its key is its registration's).
    holder: Option<String>,
}

/// The type the holder reserves: Write Exclusive – Registrants Only, so that the registered
/// writers go on writing while it is held.
const FAULT_TYPE: ReservationType = ReservationType::WriteExclusiveRegistrantsOnly;

/// One PERSISTENT RESERVE OUT of the fault test: through host `host` (an index into the
/// hosts' names), what it sends and the state it leaves.
#[derive(Clone, Debug)]
struct PrStep {
    host: usize,
    action: PrOutAction,
    list: PrOutParameters,
    after: PrState,
}

impl PrState {
    /// What READ KEYS, READ RESERVATION and READ FULL STATUS return for this state.
    fn expected(&self) -> (Keys, Reservation, (u32, Vec<Registration>)) {
        let mut keys: Vec<u64> = self.registrations.values().copied().collect();
        keys.sort_unstable();
        let reservation = self
            .holder
            .as_ref()
            .map(|h| (self.registrations[h], FAULT_TYPE));
        let full = self
            .registrations
            .iter()
            .map(|(port, &key)| Registration {
                reservation_key: key,
                all_tg_pt: false,
                holds: (self.holder.as_ref() == Some(port)).then_some(FAULT_TYPE),
                relative_target_port_identifier: 1,
                initiator_port: port.clone(),
            })
            .collect();
        (
            Keys {
                generation: self.generation,
                keys,
            },
            Reservation {
                generation: self.generation,
                reservation,
            },
            (self.generation, full),
        )
    }

    /// Step `n` from this state, its keys from `next_key`: in turn REGISTER AND IGNORE
    /// EXISTING KEY of the holder host (index 0) to a new key, its RESERVE or RELEASE, and
    /// the REGISTER of a pool host's I_T nexus (indexes `pool`), or its unregistering.
    /// Each changes what the PERSISTENT RESERVE IN service actions report.
    fn step(&self, n: u64, next_key: &mut u64, ports: &[String], pool: Range<usize>) -> PrStep {
        let mut after = self.clone();
        let holder = &ports[0];
        let key = self.registrations.get(holder).copied().unwrap_or(0);
        let (host, action, list) = match n % 3 {
            0 => {
                *next_key += 1;
                after.generation += 1;
                after.registrations.insert(holder.clone(), *next_key);
                (0, RegisterAndIgnoreExistingKey, basic(0, *next_key))
            }
            1 => {
                after.holder = match self.holder {
                    None => Some(holder.clone()),
                    Some(_) => None,
                };
                let action = if self.holder.is_none() {
                    Reserve
                } else {
                    Release
                };
                (0, action, basic(key, 0))
            }
            _ => {
                let host = pool.start + (n / 3) as usize % pool.len();
                let port = &ports[host];
                after.generation += 1;
                match self.registrations.get(port) {
                    Some(&old) => {
                        after.registrations.remove(port);
                        (host, Register, basic(old, 0))
                    }
                    None => {
                        *next_key += 1;
                        after.registrations.insert(port.clone(), *next_key);
                        (host, Register, basic(0, *next_key))
                    }
                }
            }
        };
        PrStep {
            host,
            action,
            list,
            after,
        }
    }
}

/// The state READ KEYS, READ RESERVATION and READ FULL STATUS report through `s`, if they
/// agree with one another and with one of `candidates`: its index.
async fn which_state(s: &mut Initiator, lun: u64, candidates: &[&PrState]) -> usize {
    let keys = {
        let mut k = read_keys(s, lun).await;
        k.keys.sort_unstable();
        k
    };
    let (d, _) = pr_in(s, lun, PrInAction::ReadReservation).await;
    let reservation = decode_read_reservation(&d).expect("READ RESERVATION parameter data");
    let full = {
        let (generation, mut r) = read_full_status(s, lun).await;
        r.sort_by(|x, y| x.initiator_port.cmp(&y.initiator_port));
        (generation, r)
    };
    let got = (keys, reservation, full);
    candidates
        .iter()
        .position(|c| c.expected() == got)
        .unwrap_or_else(|| {
            panic!("the reservation state is none of the candidates:\n{got:#?}\n{candidates:#?}")
        })
}

/// What a writer of the burst did: the writes acknowledged, as (LBA, pattern seed) in
/// order, and the one in flight when its gateway died.
struct Burst {
    acknowledged: Vec<(u64, u64)>,
    in_flight: Option<(u64, u64)>,
}

/// 8-block WRITE(16)s with FUA through `s` at `region` onwards (wrapping in `blocks`), each
/// of a new pattern, until one fails (the gateway died); `started` counts the acknowledged.
async fn burst(
    mut s: Initiator,
    lun: u64,
    region: u64,
    blocks: u64,
    seeds: u64,
    started: Arc<AtomicU64>,
) -> Burst {
    let mut acknowledged = Vec::new();
    for i in 0.. {
        let lba = region + (i * 8) % blocks;
        let seed = seeds + i;
        let cdb = write(
            form::WRITE_16,
            ReadWrite {
                fua: true,
                ..rw(lba, 8)
            },
        );
        let data = pattern(seed, 8 * BLOCK);
        let mut met = 0;
        let ended = loop {
            match s.scsi_command(lun, &cdb, &data, 0).await {
                Ok(r) if r.status == 0 => break false,
                // Unit attentions (power on, RESERVATIONS RELEASED, the states): again.
                Ok(r) if met < 8 && sense(&r).is_some_and(|s| s.0 == SenseKey::UnitAttention) => {
                    met += 1
                }
                Ok(r) => panic!("WRITE(16) at {lba}: {} {:?}", r.status, r.parsed_sense()),
                Err(_) => break true,
            }
        };
        if ended {
            return Burst {
                acknowledged,
                in_flight: Some((lba, seed)),
            };
        }
        acknowledged.push((lba, seed));
        started.fetch_add(1, Ordering::Relaxed);
    }
    unreachable!("the burst ends when its gateway dies")
}

#[test]
#[ignore = "needs a Ceph cluster: ./test.sh starts one and runs it"]
fn a_gateway_killed_mid_reservation_and_write_burst_keeps_one_state_and_every_block() {
    const ROUNDS: u64 = 6;
    const WRITERS: u64 = 3;
    const POOL: usize = 3;
    // Writes through a restarted gw-a wait for the dead one's lock to be broken.
    const PATIENT: Option<Duration> = Some(Duration::from_secs(60));
    /// Each writer's region in a round: 2 MiB.
    const REGION: u64 = 4096;
    let conf =
        cluster("a_gateway_killed_mid_reservation_and_write_burst_keeps_one_state_and_every_block");
    let seed = std::env::var("STINT_FAULT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    eprintln!("fault test: STINT_FAULT_SEED={seed} replays the kill times");
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let pair = Pair::new(&conf, "faults");
    let (mut a, b) = (pair.start(0), pair.start(1));
    let began = Instant::now();
    // Host 0 reserves, hosts 1..=POOL register and unregister, the writers are registered
    // once (so that they write while host 0 holds its registrants only reservation).
    let names: Vec<String> = (0..1 + POOL + WRITERS as usize)
        .map(|i| format!("iqn.2026-11.dev.stint:fault{i}"))
        .collect();
    let ports: Vec<String> = names
        .iter()
        .map(|n| format!("{n},i,0x800000001234"))
        .collect();
    let writers = 1 + POOL..names.len();
    let (mut in_flight, mut applied, mut pr_acknowledged, mut blocks_checked) = (0, 0, 0, 0);
    let mut state = PrState {
        generation: 0,
        registrations: BTreeMap::new(),
        holder: None,
    };
    let mut next_key = 0xF000;
    let mut n = 0;
    runtime().block_on(async {
        let (mut check_b, lun) = session(&b.urls[0], "iqn.2026-11.dev.stint:fault-check").await;
        for w in writers.clone() {
            let (mut s, _) = session(&a.urls[0], &names[w]).await;
            next_key += 1;
            assert_eq!(
                pr_out(&mut s, lun, Register, None, basic(0, next_key))
                    .await
                    .0,
                0
            );
            state.generation += 1;
            state.registrations.insert(ports[w].clone(), next_key);
            s.logout().await.expect("logout");
        }
        for round in 0..ROUNDS {
            // The PERSISTENT RESERVE OUTs, one after the other through gw-a, until one fails.
            let mut hosts = Vec::new();
            for name in &names[..1 + POOL] {
                hosts.push(session_waiting(&a.urls[0], name, PATIENT).await.0);
            }
            let (base, ports_, pool) = (state.clone(), ports.clone(), 1..1 + POOL);
            let (mut key, first) = (next_key, n);
            let acked = Arc::new(AtomicU64::new(0));
            let counted = acked.clone();
            let killed = Arc::new(AtomicBool::new(false));
            let stop = killed.clone();
            let reserving = tokio::spawn(async move {
                let mut state = base;
                for n in first.. {
                    let step = state.step(n, &mut key, &ports_, pool.clone());
                    let kind = matches!(step.action, Reserve | Release).then_some(FAULT_TYPE);
                    let list = step.list.encode();
                    let cdb = persistent_reserve_out(step.action, kind, list.len());
                    let s = &mut hosts[step.host];
                    let mut met = 0;
                    let done = loop {
                        // Sent after the kill: not in flight at it.
                        if stop.load(Ordering::Relaxed) {
                            return (state, None, n, key);
                        }
                        match s.scsi_command(lun, &cdb, &list, 0).await {
                            Ok(r) if r.status == 0 => break true,
                            Ok(r)
                                if met < 8
                                    && sense(&r)
                                        .is_some_and(|s| s.0 == SenseKey::UnitAttention) =>
                            {
                                met += 1
                            }
                            Ok(r) => {
                                panic!("{:?}: {} {:?}", step.action, r.status, r.parsed_sense())
                            }
                            Err(_) => break false,
                        }
                    };
                    if !done {
                        return (state, Some(step), n, key);
                    }
                    state = step.after;
                    counted.fetch_add(1, Ordering::Relaxed);
                }
                unreachable!("the PERSISTENT RESERVE OUTs end when gw-a dies")
            });
            // The write burst: each writer in a region of its own this round.
            let written = Arc::new(AtomicU64::new(0));
            let mut bursts = Vec::new();
            for (i, w) in writers.clone().enumerate() {
                let (s, _) = session_waiting(&a.urls[0], &names[w], PATIENT).await;
                let region = (round * WRITERS + i as u64) * REGION;
                let seeds = (round * WRITERS + i as u64) << 32;
                bursts.push(tokio::spawn(burst(
                    s,
                    lun,
                    region,
                    REGION,
                    seeds,
                    written.clone(),
                )));
            }
            // Once writes flow (after a kill, once the dead gateway's lock is broken) and
            // reservations change, at a random moment: SIGKILL.
            let waiting = Instant::now();
            while written.load(Ordering::Relaxed) < WRITERS * 4 || acked.load(Ordering::Relaxed) < 2
            {
                // A task that ended before the kill failed: its panic, here and now.
                if reserving.is_finished() {
                    reserving.await.unwrap();
                    panic!("round {round}: the PERSISTENT RESERVE OUTs ended before the kill");
                }
                if let Some(i) = bursts.iter().position(|b| b.is_finished()) {
                    bursts.swap_remove(i).await.unwrap();
                    panic!("round {round}: a writer ended before the kill");
                }
                assert!(
                    waiting.elapsed() < Duration::from_secs(90),
                    "round {round}: in 90 s, {} writes and {} PERSISTENT RESERVE OUTs acknowledged",
                    written.load(Ordering::Relaxed),
                    acked.load(Ordering::Relaxed)
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            tokio::time::sleep(Duration::from_millis(50 + rng.next_u64() % 700)).await;
            // Responses that came meanwhile are taken, and the next commands sent, first.
            tokio::task::yield_now().await;
            // kill(2) itself: a `kill` child would stall this thread, the sessions' one, for
            // milliseconds in which the command in flight ends and no other is sent.
            let pid = rustix::process::Pid::from_raw(a.pid() as i32).expect("a child's pid");
            rustix::process::kill_process(pid, rustix::process::Signal::KILL)
                .expect("SIGKILL gw-a");
            killed.store(true, Ordering::Relaxed);
            let (before, step, last, key) = reserving.await.unwrap();
            (n, next_key) = (last + 1, key);
            pr_acknowledged += acked.load(Ordering::Relaxed);
            // Through gw-b: the state after the last acknowledged PERSISTENT RESERVE OUT, or
            // after the one in flight at the kill, never half of it.
            let candidates = match &step {
                Some(step) => vec![before, step.after.clone()],
                None => vec![before],
            };
            let landed =
                which_state(&mut check_b, lun, &candidates.iter().collect::<Vec<_>>()).await;
            state = candidates[landed].clone();
            in_flight += u64::from(step.is_some());
            applied += landed as u64;
            let found = match &step {
                Some(step) => format!(
                    "{:?} in flight, found {}",
                    step.action,
                    ["not done", "done"][landed]
                ),
                None => "none in flight".to_owned(),
            };
            eprintln!(
                "round {round}: {} PERSISTENT RESERVE OUTs acknowledged; at the kill {found}",
                acked.load(Ordering::Relaxed),
            );
            // Every acknowledged block reads back through gw-b; one in flight is the old or
            // the new data.
            let mut expected: BTreeMap<u64, Vec<Option<u64>>> = BTreeMap::new();
            for b in bursts {
                let b = b.await.unwrap();
                for &(lba, seed) in &b.acknowledged {
                    expected.insert(lba, vec![Some(seed)]);
                }
                if let Some((lba, seed)) = b.in_flight {
                    let old = expected.get(&lba).and_then(|e| e[0]);
                    expected.insert(lba, vec![old, Some(seed)]);
                }
            }
            for (&lba, acceptable) in &expected {
                let got = read_blocks(&mut check_b, lun, lba, 8).await;
                let fits = |s: &Option<u64>| match s {
                    Some(seed) => got == pattern(*seed, 8 * BLOCK),
                    None => got.iter().all(|&b| b == 0),
                };
                assert!(
                    acceptable.iter().any(fits),
                    "round {round}: LBA {lba} lost its acknowledged write ({acceptable:?})"
                );
                blocks_checked += 8 * (acceptable.len() == 1) as u64;
            }
            // gw-a back: it reports what gw-b does.
            a = pair.start(0);
            let (mut check_a, _) = session(&a.urls[0], "iqn.2026-11.dev.stint:fault-check").await;
            assert_eq!(
                which_state(&mut check_a, lun, &[&state]).await,
                0,
                "gw-a restarted"
            );
            check_a.logout().await.expect("logout");
        }
        check_b.logout().await.expect("logout");
    });
    eprintln!(
        "fault test: {ROUNDS} rounds in {:.1} s; a PERSISTENT RESERVE OUT in flight at {in_flight} \
         kills, found applied after {applied}; {pr_acknowledged} acknowledged; \
         {blocks_checked} acknowledged blocks read back",
        began.elapsed().as_secs_f64()
    );
    assert!(
        in_flight > 0,
        "no kill landed with a PERSISTENT RESERVE OUT in flight: the test showed nothing"
    );
    assert!(a.stop());
    assert!(b.stop());
}
