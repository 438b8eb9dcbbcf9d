//! An RBD LUN served by `stint serve` over a real Ceph cluster, through the initiator path:
//! data across sessions and a restart, UNMAP reading back zeros, COMPARE AND WRITE and its
//! miscompare offset, `stint bench --verify`, an image resized while served or by its plane
//! (`stint ctl lun resize`), and the errors of bad configurations.
//!
//! Needs a cluster: `STINT_CEPH_CONF` names its ceph.conf (user admin, pool `rbd`), as
//! `./test.sh` sets after `tests/ceph/cluster.sh start`, then runs these with
//! `--include-ignored`. A plain `cargo test` reports them ignored, not passed; run without a
//! cluster, they fail.

mod common;
use common::cdb::{read, read_capacity16, rw, sense, test_unit_ready, write};
use common::ceph::{cluster, Image};
use common::Server;
use common::{pattern, runtime};
use iscsi::initiator::{Initiator, LoginOptions};
use iscsi::url::IscsiUrl;
use scsi::command::ReadWrite;
use scsi::{form, Asc, SenseKey};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};
use store::Plane;

const BLOCK: usize = 512;
const IMAGE_BYTES: u64 = 64 << 20;

/// A fresh image of `IMAGE_BYTES` in pool rbd, removed when dropped.
fn test_image(conf: &str, test: &str) -> Image {
    Image::new(
        conf,
        &format!("stint-test-{test}"),
        &format!("{IMAGE_BYTES}B"),
    )
}

/// (LBA, blocks): small, unaligned, across a 4 MiB object boundary, and the last blocks.
fn extents() -> Vec<(u64, u32)> {
    let blocks = IMAGE_BYTES / BLOCK as u64;
    let object = (4 << 20) / BLOCK as u64;
    vec![
        (0, 8),
        (9, 1),
        (1000, 2048),
        (object - 3, 7),
        (blocks - 1, 1),
        (blocks - 601, 600),
    ]
}

async fn session(url: &str, initiator: &str) -> (Initiator, u64) {
    let url: IscsiUrl = url.parse().expect("stint prints valid URLs");
    let opts = LoginOptions::new(initiator, Some(&url.target));
    let mut s = Initiator::connect_portal(&url.portal, &opts)
        .await
        .expect("login");
    // The new nexus's unit attention (POWER ON, RESET...), consumed as initiators do.
    let _ = s.scsi_command(url.lun, &test_unit_ready(), &[], 0).await;
    let r = s
        .scsi_command(url.lun, &test_unit_ready(), &[], 0)
        .await
        .expect("TEST UNIT READY");
    assert_eq!(r.status, 0, "{:?}", r.parsed_sense());
    (s, url.lun)
}

async fn write_blocks(s: &mut Initiator, lun: u64, lba: u64, data: &[u8], fua: bool) {
    let blocks = (data.len() / BLOCK) as u32;
    let cdb = write(
        form::WRITE_16,
        ReadWrite {
            fua,
            ..rw(lba, blocks)
        },
    );
    let r = s.scsi_command(lun, &cdb, data, 0).await.expect("write");
    assert_eq!(r.status, 0, "WRITE(16) at {lba}: {:?}", r.parsed_sense());
}

async fn read_blocks(s: &mut Initiator, lun: u64, lba: u64, blocks: u32) -> Vec<u8> {
    let cdb = read(form::READ_16, rw(lba, blocks));
    let r = s
        .scsi_command(lun, &cdb, &[], blocks * BLOCK as u32)
        .await
        .expect("read");
    assert_eq!(r.status, 0, "READ(16) at {lba}: {:?}", r.parsed_sense());
    r.data_in
}

/// UNMAP (SBC-4 §5.30) of `ranges` (LBA, blocks), one block descriptor each, in that order;
/// it must end GOOD.
async fn unmap(s: &mut Initiator, lun: u64, ranges: &[(u64, u32)]) {
    let mut params = vec![0u8; 8];
    for &(lba, n) in ranges {
        params.extend_from_slice(&lba.to_be_bytes());
        params.extend_from_slice(&n.to_be_bytes());
        params.extend_from_slice(&[0; 4]);
    }
    let len = params.len() as u16;
    params[0..2].copy_from_slice(&(len - 2).to_be_bytes());
    params[2..4].copy_from_slice(&(len - 8).to_be_bytes());
    let mut cdb = [0u8; 10];
    cdb[0] = 0x42;
    cdb[7..9].copy_from_slice(&len.to_be_bytes());
    let r = s.scsi_command(lun, &cdb, &params, 0).await.unwrap();
    assert_eq!(r.status, 0, "UNMAP: {:?}", r.parsed_sense());
}

async fn write_all(url: &str) {
    let (mut s, lun) = session(url, "iqn.2026-11.dev.stint:writer").await;
    for (i, (lba, blocks)) in extents().into_iter().enumerate() {
        let data = pattern(i as u64, blocks as usize * BLOCK);
        write_blocks(&mut s, lun, lba, &data, true).await;
    }
    s.logout().await.expect("logout");
}

async fn verify_all(url: &str) {
    let (mut s, lun) = session(url, "iqn.2026-11.dev.stint:reader").await;
    for (i, (lba, blocks)) in extents().into_iter().enumerate() {
        let want = pattern(i as u64, blocks as usize * BLOCK);
        let got = read_blocks(&mut s, lun, lba, blocks).await;
        assert!(got == want, "data at LBA {lba} ({blocks} blocks) differs");
    }
    s.logout().await.expect("logout");
}

#[test]
#[ignore = "needs a Ceph cluster: ./test.sh starts one and runs it"]
fn rbd_lun_round_trip_across_sessions_and_a_restart() {
    let conf = cluster("rbd_lun_round_trip_across_sessions_and_a_restart");
    let image = test_image(&conf, "roundtrip");
    let server = Server::start(&["--lun", &image.lun()], 1);
    let url = server.urls[0].clone();
    runtime().block_on(async {
        write_all(&url).await;
        verify_all(&url).await;
    });
    assert!(server.stop(), "serve did not stop cleanly on SIGTERM");
    // The exclusive lock went with the server: a new one opens the image and reads the data.
    let server = Server::start(&["--lun", &image.lun()], 1);
    runtime().block_on(verify_all(&server.urls[0]));
    assert!(server.stop());
}

/// UNMAP (thin provisioning, LBPRZ): unmapped blocks read back as zeros, whole objects and
/// partial ones alike, and their neighbours keep their data; COMPARE AND WRITE writes on a
/// match and reports the first differing byte on a miscompare (SBC-4 §5.3).
#[test]
#[ignore = "needs a Ceph cluster: ./test.sh starts one and runs it"]
fn rbd_unmap_reads_zeros_and_compare_and_write_reports_the_miscompare() {
    let conf = cluster("rbd_unmap_reads_zeros_and_compare_and_write");
    let image = test_image(&conf, "unmap");
    let server = Server::start(&["--lun", &image.lun()], 1);
    let url = server.urls[0].clone();
    runtime().block_on(async {
        let (mut s, lun) = session(&url, "iqn.2026-11.dev.stint:unmap").await;
        // 9 MiB from LBA 0: two whole 4 MiB objects and part of a third.
        let blocks = (9 << 20) / BLOCK as u32;
        let data = pattern(7, blocks as usize * BLOCK);
        for chunk in 0..9u64 {
            let at = (chunk << 20) as usize;
            write_blocks(&mut s, lun, chunk * 2048, &data[at..at + (1 << 20)], false).await;
        }
        // Unmap 3 blocks inside the first object and LBAs 8191..18433 (the end of object 0,
        // all of object 1, the start of object 2).
        let ranges: [(u64, u32); 2] = [(5, 3), (8191, 10242)];
        unmap(&mut s, lun, &ranges).await;
        let mut got = Vec::new();
        for chunk in 0..9u64 {
            got.extend(read_blocks(&mut s, lun, chunk * 2048, 2048).await);
        }
        let unmapped = |lba: u64| {
            ranges
                .iter()
                .any(|&(a, n)| lba >= a && lba < a + u64::from(n))
        };
        for lba in 0..u64::from(blocks) {
            let at = lba as usize * BLOCK;
            let (got, was) = (&got[at..at + BLOCK], &data[at..at + BLOCK]);
            if unmapped(lba) {
                assert!(
                    got.iter().all(|&b| b == 0),
                    "unmapped LBA {lba} is not zeros"
                );
            } else {
                assert!(got == was, "LBA {lba}, not unmapped, changed");
            }
        }

        // COMPARE AND WRITE of one block (librbd's own) and of 4 (stint's, under the range
        // lock): a match writes, a miscompare at byte 100 of the verify data writes nothing.
        for (lba, n) in [(40u64, 1u8), (44, 4)] {
            let len = usize::from(n) * BLOCK;
            let at = lba as usize * BLOCK;
            let current = data[at..at + len].to_vec();
            let new = pattern(lba, len);
            let mut caw = [0u8; 16];
            caw[0] = 0x89;
            caw[2..10].copy_from_slice(&lba.to_be_bytes());
            caw[13] = n;
            let r = s
                .scsi_command(lun, &caw, &[current.clone(), new.clone()].concat(), 0)
                .await
                .unwrap();
            assert_eq!(
                r.status,
                0,
                "COMPARE AND WRITE at {lba}: {:?}",
                r.parsed_sense()
            );
            assert!(read_blocks(&mut s, lun, lba, n.into()).await == new);
            let mut wrong = new.clone();
            wrong[100] ^= 1;
            let r = s
                .scsi_command(lun, &caw, &[wrong, current.clone()].concat(), 0)
                .await
                .unwrap();
            let parsed = r.parsed_sense().expect("sense");
            assert_eq!(parsed.key, SenseKey::Miscompare, "{parsed:?}");
            assert_eq!(parsed.information, Some(100), "{parsed:?}");
            assert!(read_blocks(&mut s, lun, lba, n.into()).await == new);
        }
        s.logout().await.unwrap();
    });
    assert!(server.stop());
}

/// UNMAP's cost on RBD is one librbd request per range, not per descriptor, and a command's
/// ranges are in flight together: 256 one-block descriptors side by side (libiscsi's
/// Unmap.Simple sends such lists, 1 to 256 long), 256 one-block descriptors apart, and one
/// descriptor over the whole LUN each end within 250 ms (about 5, 30 and 15 ms here).
/// (Zeroing descriptor after descriptor, each a round trip to the OSD, took about 900 ms for
/// each of the first two here, and libiscsi's Unmap.Simple 90 to 140 s.) Every unmapped block
/// reads zeros and its neighbours keep their data; so does a WRITE SAME of a zero block inside
/// a live object.
#[test]
#[ignore = "needs a Ceph cluster: ./test.sh starts one and runs it"]
fn rbd_unmap_of_many_descriptors_is_one_request_per_range() {
    let conf = cluster("rbd_unmap_of_many_descriptors_is_one_request_per_range");
    let image = test_image(&conf, "unmapmany");
    let server = Server::start(&["--lun", &image.lun()], 1);
    let url = server.urls[0].clone();
    runtime().block_on(async {
        let (mut s, lun) = session(&url, "iqn.2026-11.dev.stint:unmapmany").await;
        // 1 MiB at LBA 0 (adjacent descriptors) and 1 MiB at LBA 8192 (object 1: descriptors
        // apart), so the OSD has objects to zero in.
        let data = pattern(11, 1 << 20);
        for lba in [0, 8192] {
            write_blocks(&mut s, lun, lba, &data, false).await;
        }
        let side_by_side: Vec<(u64, u32)> = (0..256u64).rev().map(|lba| (lba, 1)).collect();
        let apart: Vec<(u64, u32)> = (0..256u64).map(|i| (8192 + 2 * i, 1)).collect();
        let whole = [(0u64, (IMAGE_BYTES / BLOCK as u64) as u32)];
        let mut took = Vec::new();
        for ranges in [&side_by_side[..], &apart[..]] {
            let started = Instant::now();
            unmap(&mut s, lun, ranges).await;
            took.push(started.elapsed());
        }
        let got = read_blocks(&mut s, lun, 0, 2048).await;
        assert!(
            got[..256 * BLOCK].iter().all(|&b| b == 0),
            "LBAs 0..256 not zeros"
        );
        assert!(
            got[256 * BLOCK..] == data[256 * BLOCK..],
            "LBAs 256.. changed"
        );
        let got = read_blocks(&mut s, lun, 8192, 2048).await;
        for (i, (got, was)) in got.chunks(BLOCK).zip(data.chunks(BLOCK)).enumerate() {
            if i < 512 && i % 2 == 0 {
                assert!(got.iter().all(|&b| b == 0), "LBA {} not zeros", 8192 + i);
            } else {
                assert!(got == was, "LBA {}, not unmapped, changed", 8192 + i);
            }
        }
        // WRITE SAME(16) of a block of zeros inside a live object (librbd may turn a
        // write-same of zeros into a discard, which must still zero a partial object).
        let mut ws = [0u8; 16];
        ws[0] = 0x93;
        ws[2..10].copy_from_slice(&8193u64.to_be_bytes());
        ws[10..14].copy_from_slice(&64u32.to_be_bytes());
        let r = s.scsi_command(lun, &ws, &[0u8; BLOCK], 0).await.unwrap();
        assert_eq!(r.status, 0, "WRITE SAME(16): {:?}", r.parsed_sense());
        let got = read_blocks(&mut s, lun, 8192, 2048).await;
        for (i, (got, was)) in got.chunks(BLOCK).zip(data.chunks(BLOCK)).enumerate() {
            if (1..65).contains(&i) || (i < 512 && i % 2 == 0) {
                assert!(got.iter().all(|&b| b == 0), "LBA {} not zeros", 8192 + i);
            } else {
                assert!(got == was, "LBA {}, not written, changed", 8192 + i);
            }
        }
        let started = Instant::now();
        unmap(&mut s, lun, &whole).await;
        took.push(started.elapsed());
        let got = read_blocks(&mut s, lun, 8192, 2048).await;
        assert!(
            got.iter().all(|&b| b == 0),
            "LBAs 8192.. not zeros after the whole LUN"
        );
        for (what, t) in ["256 side by side", "256 apart", "the whole LUN"]
            .iter()
            .zip(&took)
        {
            assert!(
                *t < Duration::from_millis(250),
                "UNMAP of {what} took {t:?}: {took:?}"
            );
        }
        eprintln!("UNMAP on RBD: 256 side by side, 256 apart, the whole LUN: {took:?}");
        s.logout().await.unwrap();
    });
    assert!(server.stop());
}

/// `stint bench --verify`: random writes and reads at QD 16 over the RBD LUN, each block
/// stamped and checked.
#[test]
#[ignore = "needs a Ceph cluster: ./test.sh starts one and runs it"]
fn rbd_bench_verify_finds_no_mismatch() {
    let conf = cluster("rbd_bench_verify_finds_no_mismatch");
    let image = test_image(&conf, "bench");
    let server = Server::start(&["--lun", &image.lun()], 1);
    let out = Command::new(env!("CARGO_BIN_EXE_stint"))
        .args([
            "bench",
            "--url",
            &server.urls[0],
            "--rw",
            "randrw",
            "--bs",
            "4k,64k",
        ])
        .args(["--iodepth", "16", "--runtime", "3s", "--verify"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains(", 0 mismatches"), "{text}");
    assert!(!text.contains(" 0 blocks checked"), "{text}");
    assert!(server.stop());
}

/// `stint serve` with `args`: it must exit, with an error, within `limit`; its stderr.
fn serve_fails(args: &[&str], limit: Duration) -> String {
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_stint"))
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    while started.elapsed() < limit {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(!status.success(), "serve {args:?} succeeded");
            let mut err = String::new();
            use std::io::Read;
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            return err;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("serve {args:?} still running after {limit:?}");
}

/// A missing image, a missing pool, an image another server holds, an unreachable cluster:
/// each one precise error, never a hang.
#[test]
#[ignore = "needs a Ceph cluster: ./test.sh starts one and runs it"]
fn rbd_bad_configurations_fail_precisely() {
    let conf = cluster("rbd_bad_configurations_fail_precisely");
    let err = serve_fails(
        &["--lun", &format!("rbd:rbd/stint-no-such-image:{conf}")],
        Duration::from_secs(60),
    );
    assert!(
        err.contains("opening image \"stint-no-such-image\""),
        "{err}"
    );
    assert!(err.contains("No such file or directory"), "{err}");
    let err = serve_fails(
        &["--lun", &format!("rbd:stint-no-such-pool/x:{conf}")],
        Duration::from_secs(60),
    );
    assert!(err.contains("opening pool \"stint-no-such-pool\""), "{err}");

    // Two servers, one image: the second cannot take the exclusive lock.
    let image = test_image(&conf, "lock");
    let server = Server::start(&["--lun", &image.lun()], 1);
    let err = serve_fails(&["--lun", &image.lun()], Duration::from_secs(60));
    assert!(err.contains("taking the exclusive lock"), "{err}");
    assert!(server.stop());

    // A configuration whose monitor is a closed port: an error within client_mount_timeout.
    let dir = tempfile::tempdir().unwrap();
    let dead = dir.path().join("dead.conf");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let keyring = std::fs::read_to_string(&conf)
        .unwrap()
        .lines()
        .find_map(|l| l.trim().strip_prefix("keyring = ").map(str::to_owned))
        .expect("the cluster's conf names a keyring");
    std::fs::write(
        &dead,
        format!("[global]\nmon_host = 127.0.0.1:{port}\n[client]\nkeyring = {keyring}\n"),
    )
    .unwrap();
    let err = serve_fails(
        &["--lun", &format!("rbd:rbd/x:{}", dead.display())],
        Duration::from_secs(40),
    );
    assert!(err.contains("connecting to the Ceph cluster"), "{err}");
}

/// READ CAPACITY(16)'s capacity in blocks.
async fn capacity(s: &mut Initiator, lun: u64) -> u64 {
    let r = s
        .scsi_command(lun, &read_capacity16(), &[], 32)
        .await
        .unwrap();
    assert_eq!(r.status, 0, "READ CAPACITY(16): {:?}", r.parsed_sense());
    u64::from_be_bytes(r.data_in[..8].try_into().unwrap()) + 1
}

/// Waits (at most 20 s: librbd tells the server through its watch on the image's header)
/// for CAPACITY DATA HAS CHANGED; every command before it must end GOOD.
async fn capacity_changed(s: &mut Initiator, lun: u64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        let r = s
            .scsi_command(lun, &test_unit_ready(), &[], 0)
            .await
            .unwrap();
        match sense(&r) {
            None => tokio::time::sleep(Duration::from_millis(100)).await,
            Some((SenseKey::UnitAttention, Asc::CAPACITY_DATA_HAS_CHANGED)) => return,
            other => panic!("TEST UNIT READY: {other:?}"),
        }
    }
    panic!("no CAPACITY DATA HAS CHANGED within 20 s of the resize");
}

/// `rbd resize` while the image is served (librbd hands the resize to the server, which
/// holds the exclusive lock): every nexus gets CAPACITY DATA HAS CHANGED (SBC-4 §4.6), READ
/// CAPACITY answers the new size, the grown blocks can be written and read, and after a
/// shrink a read past the new end is LOGICAL BLOCK ADDRESS OUT OF RANGE.
#[test]
#[ignore = "needs a Ceph cluster: ./test.sh starts one and runs it"]
fn rbd_resize_while_served_raises_capacity_data_has_changed() {
    let conf = cluster("rbd_resize_while_served_raises_capacity_data_has_changed");
    let image = test_image(&conf, "resize");
    let server = Server::start(&["--lun", &image.lun()], 1);
    let url = server.urls[0].clone();
    let blocks = IMAGE_BYTES / BLOCK as u64;
    runtime().block_on(async {
        let (mut a, lun) = session(&url, "iqn.2026-11.dev.stint:resize-a").await;
        let (mut b, _) = session(&url, "iqn.2026-11.dev.stint:resize-b").await;
        assert_eq!(capacity(&mut a, lun).await, blocks);

        let grown = 2 * IMAGE_BYTES;
        let (ok, err) = image.rbd(&[
            "resize",
            "--no-progress",
            "--size",
            &format!("{grown}B"),
            &image.spec(),
        ]);
        assert!(ok, "rbd resize: {err}");
        capacity_changed(&mut a, lun).await;
        capacity_changed(&mut b, lun).await;
        assert_eq!(capacity(&mut a, lun).await, 2 * blocks);
        let last = 2 * blocks - 8;
        let data = pattern(7, 8 * BLOCK);
        write_blocks(&mut b, lun, last, &data, true).await;
        assert!(
            read_blocks(&mut a, lun, last, 8).await == data,
            "the grown blocks"
        );

        let (ok, err) = image.rbd(&[
            "resize",
            "--no-progress",
            "--allow-shrink",
            "--size",
            &format!("{}B", IMAGE_BYTES / 2),
            &image.spec(),
        ]);
        assert!(ok, "rbd resize --allow-shrink: {err}");
        capacity_changed(&mut a, lun).await;
        assert_eq!(capacity(&mut a, lun).await, blocks / 2);
        let r = a
            .scsi_command(
                lun,
                &read(form::READ_16, rw(blocks / 2, 1)),
                &[],
                BLOCK as u32,
            )
            .await
            .unwrap();
        assert_eq!(
            sense(&r),
            Some((SenseKey::IllegalRequest, Asc::LBA_OUT_OF_RANGE)),
            "a read past the shrunk end"
        );
        a.logout().await.expect("logout");
        b.logout().await.expect("logout");
    });
    assert!(server.stop());
}

/// What an RBD plane opens: `image` in pool rbd of the cluster of `conf`, as admin.
fn plane_target(conf: &str, image: &str) -> store::RbdTarget {
    store::RbdTarget {
        conf: Some(conf.to_owned()),
        user: "admin".into(),
        keyring: None,
        pool: "rbd".into(),
        namespace: None,
        image: image.to_owned(),
        gateway: None,
    }
}

/// The plane resizes its image on request (`stint ctl lun resize`, issue 22) through
/// librbd's `rbd_resize`, which `rbd info` then reports: grown, the data below the old end
/// kept and the new end written and read back; without a size, an `rbd resize` made outside
/// adopted; shrunk, a read past the new end refused.
#[test]
#[ignore = "needs a Ceph cluster: ./test.sh starts one and runs it"]
fn rbd_plane_resizes_its_image_on_request() {
    let conf = cluster("rbd_plane_resizes_its_image_on_request");
    let image = test_image(&conf, "plane-resize");
    let target = plane_target(&conf, &image.name);
    let complete: store::Complete = Arc::new(|_, _, _, _| {});
    let plane = store::RbdPlane::open(&target, &store::Options::default(), complete).unwrap();
    let data = pattern(9, 4096);
    plane.write_now(IMAGE_BYTES - 4096, &data, true).unwrap();

    let grown = 2 * IMAGE_BYTES;
    assert_eq!(plane.resize(Some(grown)).unwrap(), grown);
    assert_eq!(image.size(), grown);
    assert_eq!(plane.geometry().capacity, grown);
    let mut back = vec![0; 8192];
    plane.read_now(IMAGE_BYTES - 4096, &mut back).unwrap();
    assert_eq!(back[..4096], data[..], "the data below the old end");
    assert!(back[4096..].iter().all(|&b| b == 0), "the grown bytes");
    plane.write_now(grown - 4096, &data, true).unwrap();
    plane.read_now(grown - 4096, &mut back[..4096]).unwrap();
    assert_eq!(back[..4096], data[..], "the new end");

    let outside = 3 * IMAGE_BYTES;
    let (ok, err) = image.rbd(&[
        "resize",
        "--no-progress",
        "--size",
        &format!("{outside}B"),
        &image.spec(),
    ]);
    assert!(ok, "rbd resize: {err}");
    assert_eq!(plane.resize(None).unwrap(), outside);
    assert_eq!(plane.geometry().capacity, outside);

    assert_eq!(plane.resize(Some(IMAGE_BYTES)).unwrap(), IMAGE_BYTES);
    assert_eq!(image.size(), IMAGE_BYTES);
    assert!(plane.read_now(IMAGE_BYTES, &mut back[..512]).is_err());
    plane
        .read_now(IMAGE_BYTES - 4096, &mut back[..4096])
        .unwrap();
    assert_eq!(back[..4096], data[..], "the data below the new end");
}

/// A shrink through the plane while a change holds a range it cuts: it waits for that
/// change, and a write checked against the old end that waited behind it fails rather than
/// reach librbd, which would clip it at the new end and answer success.
#[test]
#[ignore = "needs a Ceph cluster: ./test.sh starts one and runs it"]
fn rbd_plane_shrink_fails_the_writes_that_waited_for_it() {
    use store::{Buffers, Done, Failure, Op};
    let conf = cluster("rbd_plane_shrink_fails_the_writes_that_waited_for_it");
    let image = test_image(&conf, "plane-shrink");
    let target = plane_target(&conf, &image.name);
    let (tx, rx) = std::sync::mpsc::channel();
    let tx = std::sync::Mutex::new(tx);
    let complete: store::Complete = Arc::new(move |id, done, _, _| {
        let _ = tx.lock().unwrap().send((id, done));
    });
    let plane =
        Arc::new(store::RbdPlane::open(&target, &store::Options::default(), complete).unwrap());
    let cut = IMAGE_BYTES / 2;
    let lock = plane.range_lock().clone();
    let held = lock.lock(cut, 4096, false);
    let shrink = {
        let plane = plane.clone();
        std::thread::spawn(move || plane.resize(Some(cut)))
    };
    let waited = |n: usize| {
        let deadline = Instant::now() + Duration::from_secs(10);
        while lock.waiting() != n {
            assert!(Instant::now() < deadline, "{n} waiting");
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    waited(1);
    // Across the new end: 512 bytes below it, the rest past it.
    let op = Op::Write {
        offset: cut - 512,
        len: 4096,
        durable: false,
        atomic: false,
    };
    let buffers = Buffers::Owned {
        data_in: Vec::new(),
        data_out: vec![7; 4096],
    };
    assert!(plane.submit(1, op, buffers).is_none());
    waited(2);
    drop(held);
    assert_eq!(shrink.join().unwrap().unwrap(), cut);
    match rx.recv_timeout(Duration::from_secs(30)).unwrap() {
        (1, Done::Failed(Failure::Write { error, .. })) => {
            assert!(error.to_string().contains("beyond the store"), "{error}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(image.size(), cut);
    let mut back = vec![1; 512];
    plane.read_now(cut - 512, &mut back).unwrap();
    assert!(back.iter().all(|&b| b == 0), "nothing of the write landed");
}
