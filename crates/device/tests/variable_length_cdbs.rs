//! WRITE SAME (32) and WRITE ATOMIC (32) (SBC-4) through the target: the (16)
//! forms' behaviour, with field pointers into the variable length CDB.

mod common;

use common::{edited_target, ready, run};
use device::{Completion, LuConfig, Nexus, Target};
use scsi::{Asc, SenseKey};

const BLOCKS: u64 = 8192;

fn target(edit: impl FnOnce(&mut LuConfig)) -> Target {
    edited_target(BLOCKS, edit)
}

fn cdb32(service_action: u16, flags: u8, lba: u64, blocks: u32) -> [u8; 32] {
    let mut c = [0u8; 32];
    c[0] = 0x7F;
    c[7] = 0x18;
    c[8..10].copy_from_slice(&service_action.to_be_bytes());
    c[10] = flags;
    c[12..20].copy_from_slice(&lba.to_be_bytes());
    c[28..32].copy_from_slice(&blocks.to_be_bytes());
    c
}

const WRITE_SAME_32: u16 = 0x000D;
const WRITE_ATOMIC_32: u16 = 0x000F;
const UNMAP: u8 = 0x08;
const NDOB: u8 = 0x01;

fn read(t: &Target, n: &Nexus, lba: u64, blocks: u32) -> Vec<u8> {
    let (done, data) = run(t, n, &common::read16(lba, blocks), &[]);
    assert_eq!(done, Completion::GOOD);
    data
}

fn invalid_field(c: &Completion) -> (SenseKey, Asc, u16, Option<u8>) {
    let ((key, asc), (byte, bit)) = (common::sense_of(c), common::field_pointer(c));
    (key, asc, byte, bit)
}

fn field(byte: u16, bit: Option<u8>) -> (SenseKey, Asc, u16, Option<u8>) {
    (
        SenseKey::IllegalRequest,
        Asc::INVALID_FIELD_IN_CDB,
        byte,
        bit,
    )
}

#[test]
fn write_same32_writes_unmaps_and_checks_its_fields() {
    let t = target(|_| {});
    let n = ready(&t, 1);
    let block = [0x5A; 512];
    let (c, _) = run(&t, &n, &cdb32(WRITE_SAME_32, 0, 100, 40), &block);
    assert_eq!(c, Completion::GOOD);
    assert!(read(&t, &n, 100, 40).iter().all(|&b| b == 0x5A));
    assert_eq!(read(&t, &n, 140, 1), vec![0; 512], "no further");
    // NDOB: zeros, no Data-Out.
    let (c, _) = run(&t, &n, &cdb32(WRITE_SAME_32, NDOB, 100, 10), &[]);
    assert_eq!(c, Completion::GOOD);
    assert!(read(&t, &n, 100, 10).iter().all(|&b| b == 0));
    assert!(read(&t, &n, 110, 30).iter().all(|&b| b == 0x5A));
    // UNMAP: deallocated, reads as zeros (LBPRZ).
    let (c, _) = run(&t, &n, &cdb32(WRITE_SAME_32, UNMAP, 110, 30), &block);
    assert_eq!(c, Completion::GOOD);
    assert!(read(&t, &n, 110, 30).iter().all(|&b| b == 0));
    // 0 blocks: to the last LBA (WSNZ = 0), within MAXIMUM WRITE SAME LENGTH.
    let (c, _) = run(&t, &n, &cdb32(WRITE_SAME_32, 0, BLOCKS - 4, 0), &block);
    assert_eq!(c, Completion::GOOD);
    assert!(read(&t, &n, BLOCKS - 4, 4).iter().all(|&b| b == 0x5A));
    // Errors point into the 32-byte CDB.
    let (c, _) = run(&t, &n, &cdb32(WRITE_SAME_32, 0, 0, 1 << 16), &block);
    assert_eq!(
        invalid_field(&c),
        field(28, None),
        "beyond MAXIMUM WRITE SAME LENGTH"
    );
    let (c, _) = run(&t, &n, &cdb32(WRITE_SAME_32, 0, BLOCKS - 1, 2), &block);
    assert_eq!(c.sense.unwrap().asc, Asc::LBA_OUT_OF_RANGE);
    let (c, _) = run(&t, &n, &cdb32(WRITE_SAME_32, 0x10, 0, 1), &block);
    assert_eq!(invalid_field(&c), field(10, Some(4)), "ANCHOR, ANC_SUP = 0");
    let thick = target(|c| c.thin_provisioning = false);
    let n = ready(&thick, 1);
    let (c, _) = run(&thick, &n, &cdb32(WRITE_SAME_32, UNMAP, 0, 1), &block);
    assert_eq!(invalid_field(&c), field(10, Some(3)), "UNMAP without LBPWS");
}

#[test]
fn write_atomic32_writes_all_or_nothing() {
    let t = target(|_| {});
    let n = ready(&t, 1);
    let (c, _) = run(&t, &n, &cdb32(WRITE_ATOMIC_32, 0, 10, 2), &[7; 1024]);
    assert_eq!(c, Completion::GOOD);
    assert!(read(&t, &n, 10, 2).iter().all(|&b| b == 7));
    // A Data-Out short of the 32-bit TRANSFER LENGTH writes nothing.
    let (c, _) = run(&t, &n, &cdb32(WRITE_ATOMIC_32, 0, 10, 2), &[9; 512]);
    assert_eq!(invalid_field(&c), field(28, None));
    assert!(read(&t, &n, 10, 2).iter().all(|&b| b == 7));
    // Beyond MAXIMUM ATOMIC TRANSFER LENGTH, and an ATOMIC BOUNDARY (bytes 4–5) beyond
    // MAXIMUM ATOMIC BOUNDARY SIZE.
    let (c, _) = run(&t, &n, &cdb32(WRITE_ATOMIC_32, 0, 0, u32::MAX), &[]);
    assert_eq!(invalid_field(&c), field(28, None));
    let mut cdb = cdb32(WRITE_ATOMIC_32, 0, 0, 1);
    cdb[4..6].copy_from_slice(&0xFFFFu16.to_be_bytes());
    assert_eq!(
        invalid_field(&run(&t, &n, &cdb, &[0; 512]).0),
        field(4, None)
    );
    let (c, _) = run(
        &t,
        &n,
        &cdb32(WRITE_ATOMIC_32, 0, BLOCKS - 1, 2),
        &[0; 1024],
    );
    assert_eq!(c.sense.unwrap().asc, Asc::LBA_OUT_OF_RANGE);
    let ro = target(|c| c.read_only = true);
    let n = ready(&ro, 1);
    let (c, _) = run(&ro, &n, &cdb32(WRITE_ATOMIC_32, 0, 0, 1), &[0; 512]);
    let s = c.sense.unwrap();
    assert_eq!(
        (s.key, s.asc),
        (SenseKey::DataProtect, Asc::WRITE_PROTECTED)
    );
}
