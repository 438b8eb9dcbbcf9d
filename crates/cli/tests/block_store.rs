//! A block-device LUN (`store = "block"`, issue 19 item 2) on a loop device each test sets up:
//! data written through one session reads back through another and is on the device; READ
//! CAPACITY(16) reports the device's size and blocks; UNMAP reads back as zeros (LBPRZ); the
//! device is held exclusively; bad devices are named. Skipped (saying so) where loop devices
//! cannot be set up.

mod common;
use common::cdb::{emit, read, read_capacity16, rw, sense, test_unit_ready, write};
use common::loop_device::LoopDevice;
use common::Server;
use common::{pattern, runtime};
use iscsi::initiator::{Initiator, LoginOptions};
use iscsi::url::IscsiUrl;
use scsi::command::{CacheRange, Command, ReadWrite, Unmap};
use scsi::{form, SenseKey};
use std::os::unix::fs::FileExt;
use std::process::Command as Process;

async fn login(url: &str, isid_low: u8) -> (Initiator, u64) {
    let url: IscsiUrl = url.parse().expect("stint prints valid URLs");
    let mut opts = LoginOptions::new("iqn.2026-11.dev.stint:block-test", Some(&url.target));
    opts.isid[5] = isid_low;
    let mut s = Initiator::connect_portal(&url.portal, &opts)
        .await
        .expect("login");
    // The new nexus's POWER ON unit attention, consumed.
    for _ in 0..2 {
        let r = s.scsi_command(url.lun, &test_unit_ready(), &[], 0).await;
        if r.expect("TEST UNIT READY").status == 0 {
            return (s, url.lun);
        }
    }
    panic!("TEST UNIT READY does not pass");
}

/// READ CAPACITY(16): (blocks, block length, LBPPBE, LBPME, LBPRZ).
async fn capacity(s: &mut Initiator, lun: u64) -> (u64, u32, u8, bool, bool) {
    let cdb = read_capacity16();
    let r = s.scsi_command(lun, &cdb, &[], 32).await.unwrap();
    assert_eq!(r.status, 0, "{:?}", r.parsed_sense());
    let d = &r.data_in;
    (
        u64::from_be_bytes(d[..8].try_into().unwrap()) + 1,
        u32::from_be_bytes(d[8..12].try_into().unwrap()),
        d[13] & 0x0F,
        d[14] & 0x80 != 0,
        d[14] & 0x40 != 0,
    )
}

async fn write_at(s: &mut Initiator, lun: u64, lba: u64, data: &[u8], block: usize, fua: bool) {
    let blocks = (data.len() / block) as u32;
    let cdb = write(
        form::WRITE_16,
        ReadWrite {
            fua,
            ..rw(lba, blocks)
        },
    );
    let r = s.scsi_command(lun, &cdb, data, 0).await.unwrap();
    assert_eq!(r.status, 0, "WRITE(16) at {lba}: {:?}", r.parsed_sense());
}

async fn read_at(s: &mut Initiator, lun: u64, lba: u64, blocks: u32, block: usize) -> Vec<u8> {
    let cdb = read(form::READ_16, rw(lba, blocks));
    let len = blocks as usize * block;
    let r = s.scsi_command(lun, &cdb, &[], len as u32).await.unwrap();
    assert_eq!(r.status, 0, "READ(16) at {lba}: {:?}", r.parsed_sense());
    assert_eq!(r.data_in.len(), len);
    r.data_in
}

/// GET LBA STATUS at `lba` (SBC-4 §5.7): the first descriptor's (LBA, blocks, provisioning
/// status: 0 mapped, 1 deallocated).
async fn lba_status(s: &mut Initiator, lun: u64, lba: u64) -> (u64, u32, u8) {
    let cdb = emit(
        Command::GetLbaStatus {
            lba,
            allocation_length: 24,
        },
        form::GET_LBA_STATUS,
    );
    let r = s.scsi_command(lun, &cdb, &[], 24).await.unwrap();
    assert_eq!(r.status, 0, "GET LBA STATUS: {:?}", r.parsed_sense());
    let d = &r.data_in[8..24];
    (
        u64::from_be_bytes(d[..8].try_into().unwrap()),
        u32::from_be_bytes(d[8..12].try_into().unwrap()),
        d[12] & 0x0F,
    )
}

/// `stint serve` with `args` that must fail: its stderr.
fn refused(args: &[&str]) -> String {
    let out = Process::new(env!("CARGO_BIN_EXE_stint"))
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(args)
        .output()
        .expect("run stint");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{args:?} was served: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr
}

fn config(dir: &std::path::Path, lun: &str) -> String {
    let path = dir.join("stint.toml");
    let text =
        format!("[[target]]\nname = \"iqn.2026-11.dev.stint:block\"\n[[target.lun]]\n{lun}\n");
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// A 4Kn device (4096-byte logical blocks): its size and block size are the LUN's; data
/// written through one session, with and without FUA, reads back through another and is on
/// the device at the offsets the LBAs name; an UNMAPped range reads back as zeros.
#[test]
fn a_block_lun_serves_the_device() {
    const BLOCK: usize = 4096;
    const SIZE: u64 = 24 << 20;
    let Some(dev) = LoopDevice::new(SIZE, BLOCK as u32) else {
        return;
    };
    let server = Server::start(&["--lun", &format!("block:{}", dev.arg())], 1);
    let url = server.urls[0].clone();
    let blocks = SIZE / BLOCK as u64;
    // (LBA, blocks): the first, a large run, an odd one, the last.
    let extents = [(0, 2), (100, 300), (1001, 3), (blocks - 1, 1)];
    runtime().block_on(async {
        let (mut s, lun) = login(&url, 1).await;
        let (n, length, lbppbe, lbpme, lbprz) = capacity(&mut s, lun).await;
        assert_eq!((n, length as usize), (blocks, BLOCK));
        assert_eq!(
            lbppbe, 0,
            "a loop device's physical block is its logical one"
        );
        // The loop device deallocates (WRITE ZEROES punches its file), so the LUN is thin,
        // and unmapped blocks read as zeros (SBC-4 §4.7.3.4).
        assert!(lbpme && lbprz, "LBPME {lbpme}, LBPRZ {lbprz}");
        for (i, &(lba, n)) in extents.iter().enumerate() {
            let data = pattern(i as u64, n as usize * BLOCK);
            write_at(&mut s, lun, lba, &data, BLOCK, i % 2 == 0).await;
        }
        let sync = emit(
            Command::SynchronizeCache(CacheRange {
                lba: 0,
                number_of_logical_blocks: 0,
                immed: false,
            }),
            form::SYNCHRONIZE_CACHE_10,
        );
        let r = s.scsi_command(lun, &sync, &[], 0).await.unwrap();
        assert_eq!(r.status, 0, "{:?}", r.parsed_sense());
        s.logout().await.unwrap();

        let (mut s, lun) = login(&url, 2).await;
        for (i, &(lba, n)) in extents.iter().enumerate() {
            let want = pattern(i as u64, n as usize * BLOCK);
            assert!(
                read_at(&mut s, lun, lba, n, BLOCK).await == want,
                "LBA {lba}"
            );
        }
        // UNMAP 50 blocks in the middle of the large run: zeros there, data around them.
        let mut list = vec![0u8; 24];
        list[..2].copy_from_slice(&22u16.to_be_bytes());
        list[2..4].copy_from_slice(&16u16.to_be_bytes());
        list[8..16].copy_from_slice(&200u64.to_be_bytes());
        list[16..20].copy_from_slice(&50u32.to_be_bytes());
        let unmap = emit(
            Command::Unmap(Unmap {
                group_number: 0,
                parameter_list_length: 24,
            }),
            form::UNMAP,
        );
        let r = s.scsi_command(lun, &unmap, &list, 0).await.unwrap();
        assert_eq!(r.status, 0, "UNMAP: {:?}", r.parsed_sense());
        let back = read_at(&mut s, lun, 100, 300, BLOCK).await;
        let want = pattern(1, 300 * BLOCK);
        let (hole, after) = (100 * BLOCK..150 * BLOCK, 150 * BLOCK..);
        assert!(
            back[..hole.start] == want[..hole.start],
            "before the unmapped range"
        );
        assert!(
            back[hole.clone()].iter().all(|&b| b == 0),
            "unmapped blocks are not zeros"
        );
        assert!(
            back[after.clone()] == want[after],
            "after the unmapped range"
        );
        // GET LBA STATUS: deallocated until written again (the write goes through io_uring).
        assert_eq!(lba_status(&mut s, lun, 200).await, (200, 50, 1));
        write_at(&mut s, lun, 220, &pattern(9, BLOCK), BLOCK, false).await;
        assert_eq!(lba_status(&mut s, lun, 200).await, (200, 20, 1));
        assert_eq!(lba_status(&mut s, lun, 220).await, (220, 1, 0));
        assert_eq!(lba_status(&mut s, lun, 221).await, (221, 29, 1));
        // A read past the end is refused, not served from beyond the device.
        let r = s
            .scsi_command(lun, &read(form::READ_16, rw(blocks, 1)), &[], BLOCK as u32)
            .await
            .unwrap();
        assert_eq!(sense(&r).map(|s| s.0), Some(SenseKey::IllegalRequest));
        s.logout().await.unwrap();
    });
    assert!(server.stop(), "stint serve did not exit cleanly");
    // On the device itself: the file behind the loop device holds the data at LBA × 4096.
    let file = std::fs::File::open(&dev.file).unwrap();
    for (i, &(lba, n)) in extents.iter().enumerate().filter(|(i, _)| *i != 1) {
        let mut got = vec![0; n as usize * BLOCK];
        file.read_exact_at(&mut got, lba * BLOCK as u64).unwrap();
        assert!(
            got == pattern(i as u64, got.len()),
            "device bytes at LBA {lba}"
        );
    }
}

/// One device, one server: a second `stint serve` of it, or one of a device with a mounted
/// file system, is refused and says who holds it; the first goes on serving.
#[test]
fn a_block_device_is_held_exclusively() {
    let Some(dev) = LoopDevice::new(16 << 20, 512) else {
        return;
    };
    let lun = format!("block:{}", dev.arg());
    let first = Server::start(&["--lun", &lun], 1);
    let e = refused(&["--lun", &lun]);
    let holder = format!("device in use: exported by pid {}", first.pid());
    assert!(e.contains(&holder), "{e}");
    runtime().block_on(async {
        let (mut s, lun) = login(&first.urls[0], 1).await;
        let (n, length, ..) = capacity(&mut s, lun).await;
        assert_eq!((n, length), (16 << 11, 512));
    });
    assert!(first.stop());

    // A mounted file system holds the device too.
    let mkfs = Process::new("mkfs.ext4")
        .args(["-q", "-F"])
        .arg(dev.path())
        .output();
    if !mkfs.is_ok_and(|o| o.status.success()) {
        println!("SKIPPED (not passed): the mounted case (no mkfs.ext4)");
        return;
    }
    let mnt = tempfile::tempdir().unwrap();
    let mounted = Process::new("mount")
        .arg(dev.path())
        .arg(mnt.path())
        .status();
    if !mounted.is_ok_and(|s| s.success()) {
        println!("SKIPPED (not passed): the mounted case (mount refused)");
        return;
    }
    let e = refused(&["--lun", &lun]);
    let _ = Process::new("umount").arg(mnt.path()).status();
    let at = format!("a file system on it is mounted at {}", mnt.path().display());
    assert!(e.contains(&at), "{e}");
}

/// What cannot be served as a block LUN is refused with the reason, naming the path.
#[test]
fn bad_block_luns_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plain.img");
    std::fs::write(&file, vec![0; 1 << 20]).unwrap();
    let e = refused(&["--lun", &format!("block:{}", file.display())]);
    assert!(
        e.contains(&format!(
            "{}: not a block device: a regular file",
            file.display()
        )),
        "{e}"
    );
    let missing = dir.path().join("absent");
    let e = refused(&["--lun", &format!("block:{}", missing.display())]);
    assert!(
        e.contains(&format!("{}: no such device", missing.display())),
        "{e}"
    );
    let e = refused(&["--config", &config(dir.path(), "store = \"block\"")]);
    assert!(e.contains("a block store needs a path"), "{e}");

    let Some(dev) = LoopDevice::new(8 << 20, 4096) else {
        return;
    };
    let e = refused(&["--lun", &format!("block:{}:16MiB", dev.arg())]);
    assert!(
        e.contains("the device has 8388608 bytes, less than the LUN's configured size of 16777216"),
        "{e}"
    );
    let lun = format!(
        "store = \"block\"\npath = \"{}\"\nblock_size = 512",
        dev.arg()
    );
    let e = refused(&["--config", &config(dir.path(), &lun)]);
    assert!(
        e.contains("block_size 512 is not a multiple of the device's 4096-byte"),
        "{e}"
    );
    // A file store given a device says which store serves it.
    let e = refused(&["--lun", &format!("file:{}", dev.arg())]);
    assert!(
        e.contains("store = \\\"block\\\"") || e.contains("store = \"block\""),
        "{e}"
    );
}

/// `block_size` may be a multiple of the device's logical block (4096 on a 512-byte device);
/// `size` less than the device exports its start; a [queue] alone keeps the device's size.
#[test]
fn a_block_lun_takes_block_size_and_size_from_the_config() {
    let Some(dev) = LoopDevice::new(32 << 20, 512) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "block_size = 4096\nphysical_block_exponent = 0",
            (32 << 20) / 4096,
            4096,
        ),
        ("size = \"8MiB\"", (8 << 20) / 512, 512),
        ("[target.lun.queue]\ndepth = 4", (32 << 20) / 512, 512),
    ];
    for (keys, blocks, block) in cases {
        let lun = format!("store = \"block\"\npath = \"{}\"\n{keys}", dev.arg());
        let server = Server::start(&["--config", &config(dir.path(), &lun)], 1);
        runtime().block_on(async {
            let (mut s, lun) = login(&server.urls[0], 1).await;
            let (n, length, ..) = capacity(&mut s, lun).await;
            assert_eq!((n, length), (blocks, block), "{keys}");
        });
        assert!(server.stop(), "{keys}");
    }
}
