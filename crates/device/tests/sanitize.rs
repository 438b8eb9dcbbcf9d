//! SANITIZE, FORMAT UNIT, WRITE ATOMIC (16) and REPORT/SET TIMESTAMP through the target.

mod common;

use common::field_pointer as invalid_field;
use common::sense_of as sense;
use common::{edited_target, nexus, read16, request, target_with, write16};
use common::{Collect, Request, TargetExt};
use device::{Completion, LuConfig, Next, Nexus, Ns, Submitted, Target};
use scsi::{Asc, SenseKey, Status};
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use store::{RamStore, Store};

/// 4 MiB of 512-byte blocks: four RAM chunks.
const BLOCKS: u64 = 8192;

/// A RAM store whose writes (and so deallocations) fail while `failing` is set.
struct Flaky {
    ram: RamStore,
    failing: Arc<AtomicBool>,
}

impl Store for Flaky {
    fn len(&self) -> u64 {
        self.ram.len()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.ram.read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
        if self.failing.load(Ordering::SeqCst) {
            return Err(io::Error::other("injected write failure"));
        }
        self.ram.write_at(offset, buf)
    }
    fn flush(&self) -> io::Result<()> {
        Ok(())
    }
}

fn target(edit: impl FnOnce(&mut LuConfig)) -> Target {
    edited_target(BLOCKS, edit)
}

const MS: Ns = 1_000_000;

/// Runs a command at `now_ms` (the tests' clock stays there).
fn submit(
    t: &Target,
    n: &Nexus,
    now_ms: u64,
    cdb: &[u8],
    data_out: &[u8],
) -> (Completion, Vec<u8>) {
    common::set_now(now_ms * MS);
    run(t, n, cdb, data_out)
}

/// Runs a command at the tests' clock, with a tag of its own on this thread (the tests run
/// commands from several threads at once on one nexus: tags must not overlap).
fn run(t: &Target, n: &Nexus, cdb: &[u8], data_out: &[u8]) -> (Completion, Vec<u8>) {
    std::thread_local!(static TAG: std::cell::Cell<u64> = const { std::cell::Cell::new(0) });
    static THREADS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let tag = TAG.with(|t| {
        if t.get() == 0 {
            t.set((THREADS.fetch_add(1, Ordering::Relaxed) + 1) << 32);
        }
        t.set(t.get() + 1);
        t.get()
    });
    let mut data_in = Vec::new();
    let req = Request {
        tag,
        ..request(n, 0, cdb, data_out)
    };
    let c = t.execute(&req, &mut data_in);
    (c, data_in)
}

/// The units' driver runs at every deadline up to `at_ms`, as a server's would, in virtual
/// time; the tests' clock is then `at_ms`.
fn drive_to(t: &Target, at_ms: u64, sink: &mut Collect) {
    let at = at_ms * MS;
    for (_, unit) in t.units() {
        while let Some(next) = unit.with(|c| c.poll_timeout()).filter(|n| *n <= at) {
            unit.advance(next.max(common::now()), sink);
        }
    }
    common::set_now(at);
}

/// A nexus past its power-on unit attention.
fn ready(t: &Target, id: u64) -> Nexus {
    let n = nexus(id);
    let _ua = run(t, &n, &[0; 6], &[]);
    assert_eq!(run(t, &n, &[0; 6], &[]).0, Completion::GOOD);
    n
}

fn sanitize(action: u8, immed: bool, ause: bool, list_length: u16) -> [u8; 10] {
    let mut c = [0u8; 10];
    c[0] = 0x48;
    c[1] = action | u8::from(immed) << 7 | u8::from(ause) << 5;
    c[7..9].copy_from_slice(&list_length.to_be_bytes());
    c
}

fn write_atomic16(lba: u64, blocks: u16) -> [u8; 16] {
    let mut c = [0u8; 16];
    c[0] = 0x9C;
    c[2..10].copy_from_slice(&lba.to_be_bytes());
    c[12..14].copy_from_slice(&blocks.to_be_bytes());
    c
}

fn read_all(t: &Target, n: &Nexus, lba: u64, blocks: u32) -> Vec<u8> {
    let (c, data) = run(t, n, &read16(lba, blocks), &[]);
    assert_eq!(c, Completion::GOOD);
    data
}

/// Fill the first and last 16 blocks with `byte`.
fn scribble(t: &Target, n: &Nexus, byte: u8) {
    for lba in [0, BLOCKS - 16] {
        let (c, _) = run(t, n, &write16(lba, 16), &[byte; 16 * 512]);
        assert_eq!(c, Completion::GOOD);
    }
}

#[test]
fn overwrite_fills_every_block_with_the_pattern() {
    let t = target(|_| {});
    let n = ready(&t, 1);
    scribble(&t, &n, b'a');
    let list = [0x01, 0, 0, 2, 0xAA, 0x55];
    let (c, _) = run(&t, &n, &sanitize(1, false, false, 6), &list);
    assert_eq!(c, Completion::GOOD);
    for lba in [0, BLOCKS - 16] {
        let data = read_all(&t, &n, lba, 16);
        assert!(data.chunks(2).all(|p| p == [0xAA, 0x55]), "LBA {lba}");
    }
    // INVERT with two passes: the second pass writes the complement, which stays.
    let list = [0x82, 0, 0, 1, 0x0F];
    assert_eq!(
        run(&t, &n, &sanitize(1, false, false, 5), &list).0,
        Completion::GOOD
    );
    assert!(read_all(&t, &n, 100, 4).iter().all(|&b| b == 0xF0));
    // Bad lists and lengths change nothing.
    for (len, list) in [
        (4u16, &[1u8, 0, 0, 0][..]),
        (517, &[0; 517]),
        (5, &[0, 0, 0, 1, 0]),
    ] {
        let (c, _) = run(&t, &n, &sanitize(1, false, false, len), list);
        assert_eq!(c.status, Status::CheckCondition, "length {len}");
        assert_eq!(sense(&c).0, SenseKey::IllegalRequest);
    }
    assert!(read_all(&t, &n, 100, 4).iter().all(|&b| b == 0xF0));
}

/// GET LBA STATUS (16) from LBA 0, 255 bytes of descriptors.
fn lba_status(t: &Target, n: &Nexus) -> Vec<u8> {
    let mut cdb = [0u8; 16];
    cdb[0] = 0x9E;
    cdb[1] = 0x12;
    cdb[13] = 255;
    let (c, data) = run(t, n, &cdb, &[]);
    assert_eq!(c, Completion::GOOD);
    data
}

#[test]
fn an_overwrite_with_zeros_deallocates() {
    // 1 TiB of RAM: written block by block this would allocate all of it.
    let mut config = LuConfig::new("iqn.test:t", 0, 1 << 40);
    config.size_bytes = 1 << 40;
    let t = common::ram_target(config);
    let n = ready(&t, 1);
    let (c, _) = run(&t, &n, &write16(7, 1), &[b'a'; 512]);
    assert_eq!(c, Completion::GOOD);
    let list = [0x01, 0, 0, 4, 0, 0, 0, 0];
    let (c, _) = run(&t, &n, &sanitize(1, false, false, 8), &list);
    assert_eq!(c, Completion::GOOD);
    assert!(read_all(&t, &n, 0, 16).iter().all(|&b| b == 0));
    assert_eq!(lba_status(&t, &n)[20] & 0x0F, 1, "deallocated");
}

#[test]
fn block_and_crypto_erase_deallocate_the_medium() {
    let t = target(|_| {});
    let n = ready(&t, 1);
    for action in [2, 3] {
        scribble(&t, &n, b'a');
        assert_eq!(
            run(&t, &n, &sanitize(action, false, false, 0), &[]).0,
            Completion::GOOD
        );
        assert!(read_all(&t, &n, 0, 16).iter().all(|&b| b == 0));
        assert!(read_all(&t, &n, BLOCKS - 16, 16).iter().all(|&b| b == 0));
        // GET LBA STATUS: one descriptor, every block deallocated.
        let data = lba_status(&t, &n);
        assert_eq!(&data[16..20], &(BLOCKS as u32).to_be_bytes());
        assert_eq!(data[20] & 0x0F, 1, "deallocated");
        // A parameter list is an error for the erases.
        let (c, _) = run(&t, &n, &sanitize(action, false, false, 8), &[0; 8]);
        assert_eq!(invalid_field(&c), (7, None));
    }
    // Service actions other than 01h-03h and 1Fh are invalid.
    let (c, _) = run(&t, &n, &sanitize(4, false, false, 0), &[]);
    assert_eq!(invalid_field(&c), (1, Some(4)));
    // VPD B1h: reads after an erase succeed (WABEREQ = WACEREQ = 01b).
    let (c, data) = run(&t, &n, &[0x12, 1, 0xB1, 0, 64, 0], &[]);
    assert_eq!(c, Completion::GOOD);
    assert_eq!(data[7] >> 4, 0b0101);
}

#[test]
fn an_immediate_sanitize_reports_progress_and_holds_off_other_commands() {
    let t = target(|c| c.sanitize_pace = Duration::from_millis(600));
    let n = ready(&t, 1);
    scribble(&t, &n, b'a');
    let mut sink = Collect::default();
    assert_eq!(
        run(&t, &n, &sanitize(2, true, false, 0), &[]).0,
        Completion::GOOD
    );
    for cdb in [
        &[0u8; 6][..],
        &read16(0, 1),
        &write16(0, 1),
        &sanitize(2, true, false, 0),
    ] {
        let (c, _) = run(&t, &n, cdb, &[0; 512]);
        assert_eq!(
            sense(&c),
            (SenseKey::NotReady, Asc::SANITIZE_IN_PROGRESS),
            "{cdb:02x?}"
        );
    }
    assert_eq!(
        run(&t, &n, &[0x12, 0, 0, 0, 96, 0], &[]).0,
        Completion::GOOD
    );
    drive_to(&t, 200, &mut sink);
    let (c, data) = run(&t, &n, &[0x03, 0, 0, 0, 18, 0], &[]);
    assert_eq!(c, Completion::GOOD);
    assert_eq!((data[2], data[12], data[13]), (0x02, 0x04, 0x1B));
    assert_eq!(data[15], 0x80, "SKSV with a progress indication");
    let progress = u16::from_be_bytes([data[16], data[17]]);
    assert!(progress > 0 && progress < u16::MAX, "progress {progress}");
    // Paced: still running just before 600 ms, done at 600 ms.
    drive_to(&t, 590, &mut sink);
    assert_eq!(
        sense(&run(&t, &n, &[0; 6], &[]).0).1,
        Asc::SANITIZE_IN_PROGRESS
    );
    drive_to(&t, 600, &mut sink);
    assert_eq!(run(&t, &n, &[0; 6], &[]).0, Completion::GOOD);
    assert!(read_all(&t, &n, 0, 16).iter().all(|&b| b == 0));
    let (_, data) = run(&t, &n, &[0x03, 0, 0, 0, 18, 0], &[]);
    assert_eq!(data[2] & 0x0F, 0, "NO SENSE once done");
}

#[test]
fn a_failed_sanitize_leaves_failure_mode_by_its_rules() {
    let config = LuConfig::new("iqn.test:t", 0, BLOCKS * 512);
    let failing = Arc::new(AtomicBool::new(false));
    let store = Flaky {
        ram: RamStore::new(BLOCKS * 512).unwrap(),
        failing: failing.clone(),
    };
    let t = target_with(config, Arc::new(store));
    let n = ready(&t, 1);
    for ause in [false, true] {
        failing.store(true, Ordering::SeqCst);
        let (c, _) = run(&t, &n, &sanitize(2, false, ause, 0), &[]);
        assert_eq!(
            sense(&c),
            (SenseKey::MediumError, Asc::SANITIZE_COMMAND_FAILED)
        );
        failing.store(false, Ordering::SeqCst);
        let (c, _) = run(&t, &n, &read16(0, 1), &[]);
        assert_eq!(
            sense(&c),
            (SenseKey::MediumError, Asc::SANITIZE_COMMAND_FAILED)
        );
        assert_eq!(
            run(&t, &n, &[0x12, 0, 0, 0, 96, 0], &[]).0,
            Completion::GOOD
        );
        let (c, _) = run(&t, &n, &sanitize(0x1F, false, false, 0), &[]);
        if ause {
            assert_eq!(c, Completion::GOOD, "AUSE = 1: EXIT FAILURE MODE ends it");
        } else {
            assert_eq!(
                invalid_field(&c),
                (1, Some(4)),
                "AUSE = 0: only a sanitize ends it"
            );
            assert_eq!(
                run(&t, &n, &sanitize(3, false, false, 0), &[]).0,
                Completion::GOOD
            );
        }
        assert_eq!(run(&t, &n, &read16(0, 1), &[]).0, Completion::GOOD);
    }
}

#[test]
fn sanitize_respects_write_protection_and_reservations() {
    let t = target(|c| c.read_only = true);
    let n = ready(&t, 1);
    let (c, _) = run(&t, &n, &sanitize(2, false, false, 0), &[]);
    assert_eq!(sense(&c), (SenseKey::DataProtect, Asc::WRITE_PROTECTED));
    let (c, _) = run(&t, &n, &[0x04, 0, 0, 0, 0, 0], &[]);
    assert_eq!(
        sense(&c),
        (SenseKey::DataProtect, Asc::WRITE_PROTECTED),
        "FORMAT UNIT"
    );

    let t = target(|_| {});
    let (a, b) = (ready(&t, 1), ready(&t, 2));
    assert_eq!(run(&t, &b, &[0x16, 0, 0, 0, 0, 0], &[]).0, Completion::GOOD);
    let (c, _) = run(&t, &a, &sanitize(3, false, false, 0), &[]);
    assert_eq!(c.status, Status::ReservationConflict);
}

#[test]
fn format_unit_clears_the_medium_and_refuses_what_it_does_not_do() {
    let t = target(|_| {});
    let n = ready(&t, 1);
    scribble(&t, &n, b'a');
    assert_eq!(run(&t, &n, &[0x04, 0, 0, 0, 0, 0], &[]).0, Completion::GOOD);
    assert!(read_all(&t, &n, 0, 16).iter().all(|&b| b == 0));
    // FMTDATA with the short header, FOV and IMMED.
    scribble(&t, &n, b'a');
    assert_eq!(
        run(&t, &n, &[0x04, 0x10, 0, 0, 0, 0], &[0, 0x82, 0, 0]).0,
        Completion::GOOD
    );
    assert!(read_all(&t, &n, BLOCKS - 16, 16).iter().all(|&b| b == 0));
    // A defect list, an initialization pattern, protection information: refused.
    let (c, _) = run(&t, &n, &[0x04, 0x10, 0, 0, 0, 0], &[0, 0, 0, 8]);
    assert_eq!(sense(&c).1, Asc::INVALID_FIELD_IN_PARAMETER_LIST);
    let (c, _) = run(&t, &n, &[0x04, 0x10, 0, 0, 0, 0], &[0, 0x88, 0, 0]);
    assert_eq!(sense(&c).1, Asc::INVALID_FIELD_IN_PARAMETER_LIST);
    let (c, _) = run(&t, &n, &[0x04, 0x40, 0, 0, 0, 0], &[]);
    assert_eq!(invalid_field(&c), (1, Some(6)), "FMTPINFO");
    let (c, _) = run(&t, &n, &[0x04, 0x20, 0, 0, 0, 0], &[]);
    assert_eq!(invalid_field(&c), (1, Some(5)), "LONGLIST without FMTDATA");
}

#[test]
fn write_atomic_limits_and_errors() {
    let t = target(|_| {});
    let n = ready(&t, 1);
    let (c, _) = run(&t, &n, &write_atomic16(10, 2), &[7; 1024]);
    assert_eq!(c, Completion::GOOD);
    assert!(read_all(&t, &n, 10, 2).iter().all(|&b| b == 7));
    assert_eq!(
        run(&t, &n, &write_atomic16(BLOCKS, 0), &[]).0,
        Completion::GOOD
    );
    for lba in [BLOCKS + 1, 1 << 63, u64::MAX] {
        let (c, _) = run(&t, &n, &write_atomic16(lba, 0), &[]);
        assert_eq!(sense(&c).1, Asc::LBA_OUT_OF_RANGE, "LBA {lba}");
    }
    let (c, _) = run(&t, &n, &write_atomic16(BLOCKS - 1, 2), &[0; 1024]);
    assert_eq!(sense(&c).1, Asc::LBA_OUT_OF_RANGE);
    // A Data-Out short of the TRANSFER LENGTH writes nothing.
    let (c, _) = run(&t, &n, &write_atomic16(10, 2), &[9; 512]);
    assert_eq!(invalid_field(&c), (12, None));
    assert!(read_all(&t, &n, 10, 2).iter().all(|&b| b == 7));
    // WRPROTECT needs protection information.
    let mut cdb = write_atomic16(0, 1);
    cdb[1] = 0x20;
    assert_eq!(invalid_field(&run(&t, &n, &cdb, &[0; 512]).0), (1, Some(7)));
    // An ATOMIC BOUNDARY beyond MAXIMUM ATOMIC BOUNDARY SIZE.
    let mut cdb = write_atomic16(0, 1);
    cdb[10..12].copy_from_slice(&0xFFFFu16.to_be_bytes());
    assert_eq!(invalid_field(&run(&t, &n, &cdb, &[0; 512]).0), (10, None));
    // VPD B0h: the atomic limits.
    let (_, vpd) = run(&t, &n, &[0x12, 1, 0xB0, 0, 64, 0], &[]);
    let max = u32::from_be_bytes(vpd[44..48].try_into().unwrap());
    assert_eq!(max, u32::from_be_bytes(vpd[8..12].try_into().unwrap()));
    assert_eq!(&vpd[48..56], &[0; 8], "no alignment or granularity");
    let t = target(|c| c.read_only = true);
    let n = ready(&t, 1);
    let (c, _) = run(&t, &n, &write_atomic16(0, 1), &[0; 512]);
    assert_eq!(sense(&c), (SenseKey::DataProtect, Asc::WRITE_PROTECTED));
}

/// A WRITE racing an ORWRITE (a read-modify-write) over the same blocks: the write lands
/// before the read or after the write-back, never between them, where the ORWRITE would
/// write back the old bytes over it. Then a WRITE ATOMIC against a WRITE: all one or all the
/// other.
#[test]
fn changes_to_the_same_blocks_do_not_interleave() {
    let t = target(|_| {});
    let n = ready(&t, 1);
    let blocks = 6144u16; // 3 MiB from LBA 1024: four RAM chunks
    let len = usize::from(blocks) * 512;
    let (ones, twos) = (vec![0x01; len], vec![0x02; len]);
    let start = std::sync::Barrier::new(2);
    let race = |first: &[u8], second: &[u8], opcode: u8| {
        run(&t, &n, &write16(1024, blocks.into()), &vec![0; len]);
        std::thread::scope(|s| {
            s.spawn(|| {
                start.wait();
                let mut cdb = write16(1024, blocks.into());
                cdb[0] = opcode;
                if opcode == 0x9C {
                    cdb = write_atomic16(1024, blocks);
                }
                assert_eq!(run(&t, &n, &cdb, first).0, Completion::GOOD);
            });
            s.spawn(|| {
                start.wait();
                assert_eq!(
                    run(&t, &n, &write16(1024, blocks.into()), second).0,
                    Completion::GOOD
                );
            });
        });
        read_all(&t, &n, 1024, blocks.into())
    };
    for round in 0..50 {
        let data = race(&ones, &twos, 0x8B);
        assert!(
            data.iter().all(|&b| b == 0x02) || data.iter().all(|&b| b == 0x03),
            "round {round}: the WRITE was lost inside the ORWRITE ({:#x})",
            data[0]
        );
        let data = race(&ones, &twos, 0x9C);
        assert!(data.iter().all(|&b| b == data[0]), "round {round}: mixed");
    }
}

/// A READ concurrent with WRITE ATOMICs of the same blocks sees one write's data whole,
/// never half of each (SBC-4 §4.29.2), though plain reads take no lock. The range spans RAM
/// chunks, which the store copies one at a time.
#[test]
fn reads_never_see_half_an_atomic_write() {
    let t = target(|_| {});
    let n = ready(&t, 1);
    let blocks = 4096u16; // 2 MiB from LBA 1024: three RAM chunks
    let len = usize::from(blocks) * 512;
    let patterns = [vec![0xAA; len], vec![0x55; len]];
    assert_eq!(
        run(&t, &n, &write_atomic16(1024, blocks), &patterns[0]).0,
        Completion::GOOD
    );
    let done = AtomicBool::new(false);
    let (reads, mixed) = std::thread::scope(|s| {
        let reader = s.spawn(|| {
            let (mut reads, mut mixed) = (0, 0);
            while !done.load(Ordering::SeqCst) {
                let data = read_all(&t, &n, 1024, blocks.into());
                reads += 1;
                if !data.iter().all(|&b| b == data[0]) {
                    mixed += 1;
                }
            }
            (reads, mixed)
        });
        for i in 0..400 {
            let data = &patterns[i % 2];
            assert_eq!(
                run(&t, &n, &write_atomic16(1024, blocks), data).0,
                Completion::GOOD
            );
        }
        done.store(true, Ordering::SeqCst);
        reader.join().unwrap()
    });
    assert!(reads > 0);
    assert_eq!(mixed, 0, "{mixed} of {reads} reads saw two writes' data");
}

#[test]
fn timestamps_follow_device_time() {
    let t = target(|_| {});
    let (a, b) = (ready(&t, 1), ready(&t, 2));
    let report = [0xA3, 0x0F, 0, 0, 0, 0, 0, 0, 0, 12, 0, 0];
    let (c, data) = submit(&t, &a, 1_500, &report, &[]);
    assert_eq!(c, Completion::GOOD);
    assert_eq!(data.len(), 12);
    assert_eq!((data[1], data[2]), (0x0A, 0), "from power on");
    assert_eq!(&data[4..10], &1_500u64.to_be_bytes()[2..]);
    let mut set = [0u8; 12];
    set[4..10].copy_from_slice(&1_000_000_000u64.to_be_bytes()[2..]);
    let set_cdb = [0xA4, 0x0F, 0, 0, 0, 0, 0, 0, 0, 12, 0, 0];
    assert_eq!(submit(&t, &a, 2_000, &set_cdb, &set).0, Completion::GOOD);
    let (_, data) = submit(&t, &a, 2_250, &report, &[]);
    assert_eq!(data[2], 0b010, "set by SET TIMESTAMP");
    assert_eq!(&data[4..10], &1_000_000_250u64.to_be_bytes()[2..]);
    // The other nexus hears of it.
    let (c, _) = submit(&t, &b, 2_300, &[0; 6], &[]);
    assert_eq!(sense(&c), (SenseKey::UnitAttention, Asc::TIMESTAMP_CHANGED));
    // Reserved bytes in the parameter data are an error.
    set[11] = 1;
    let (c, _) = submit(&t, &a, 2_400, &set_cdb, &set);
    assert_eq!(sense(&c).1, Asc::INVALID_FIELD_IN_PARAMETER_LIST);
}

/// A SANITIZE without IMMED is answered by the unit's driver when its sanitize ends, and the
/// submitter is free meanwhile; ABORT TASK drops the answer, not the sanitize.
#[test]
fn without_immed_the_driver_answers_when_the_sanitize_ends() {
    let t = target(|c| c.sanitize_pace = Duration::from_millis(300));
    let n = ready(&t, 1);
    let mut sink = Collect::default();
    let submit_sanitize = |tag: u64, sink: &mut Collect| {
        let cdb = sanitize(2, false, false, 0);
        let req = Request {
            tag,
            ..request(&n, 0, &cdb, &[])
        };
        t.command(common::now(), &req.arrival(), &mut Vec::new(), sink)
            .1
    };
    let still_sanitizing = |why: &str| {
        let (c, _) = run(&t, &n, &[0; 6], &[]);
        assert_eq!(sense(&c).1, Asc::SANITIZE_IN_PROGRESS, "{why}");
    };
    assert!(matches!(
        submit_sanitize(7, &mut sink),
        Submitted::Queued(_)
    ));
    assert!(
        sink.wakes > 0,
        "the driver is woken for the sanitize's steps"
    );
    still_sanitizing("the submitter is not blocked");
    drive_to(&t, 299, &mut sink);
    still_sanitizing("paced");
    assert!(sink.finished.is_empty());
    drive_to(&t, 300, &mut sink);
    let out = std::mem::take(&mut sink.finished);
    assert_eq!(out.len(), 1);
    assert_eq!((out[0].nexus, out[0].tag), (n.id, 7));
    assert!(
        matches!(&out[0].then, Next::Done { completion, .. } if *completion == Completion::GOOD),
        "{out:?}"
    );
    assert_eq!(run(&t, &n, &[0; 6], &[]).0, Completion::GOOD);

    assert!(matches!(
        submit_sanitize(8, &mut sink),
        Submitted::Queued(_)
    ));
    let tmf = device::TaskManagement::AbortTask(8);
    assert_eq!(
        t.task_management(common::now(), &n, 0, tmf, &mut sink),
        device::TmfResponse::FunctionComplete
    );
    let aborted = std::mem::take(&mut sink.finished);
    assert!(
        matches!(&aborted[..], [f] if f.tag == 8 && matches!(f.then, Next::Aborted)),
        "{aborted:?}"
    );
    still_sanitizing("the sanitize goes on");
    drive_to(&t, 1_000, &mut sink);
    assert!(
        sink.finished.is_empty(),
        "an aborted command gets no status"
    );
    assert_eq!(run(&t, &n, &[0; 6], &[]).0, Completion::GOOD);
}
