//! WRITE SAME (32) and WRITE ATOMIC (32) (SBC-4) through the target: the (16)
//! forms' behaviour, with field pointers into the variable length CDB.

use device::{Completion, LogicalUnit, LuConfig, Nexus, Request, Target, TaskAttribute};
use scsi::{Asc, SenseKey};
use std::sync::Arc;
use store::RamStore;

const BLOCKS: u64 = 8192;

fn target(edit: impl FnOnce(&mut LuConfig)) -> Target {
    let mut config = LuConfig::new("iqn.test:t", 0, BLOCKS * 512);
    edit(&mut config);
    let store = RamStore::new(config.size_bytes).unwrap();
    Target::new(vec![(
        0,
        Arc::new(LogicalUnit::new(config, Box::new(store)).unwrap()),
    )])
}

fn run(t: &Target, n: &Nexus, cdb: &[u8], data_out: &[u8]) -> (Completion, Vec<u8>) {
    let req = Request {
        nexus: n,
        lun: 0,
        tag: 0,
        cdb,
        attribute: TaskAttribute::Simple,
        data_out,
        data_out_buffer_size: data_out.len() as u32,
    };
    let mut data_in = Vec::new();
    let c = t.execute(&req, &mut data_in);
    (c, data_in)
}

/// A nexus past its power-on unit attention.
fn ready(t: &Target) -> Nexus {
    let n = Nexus {
        id: 1,
        initiator_port: "iqn.test:i1,i,0x000000000001".into(),
        class: None,
        privileged: true,
    };
    let _ua = run(t, &n, &[0; 6], &[]);
    assert_eq!(run(t, &n, &[0; 6], &[]).0, Completion::GOOD);
    n
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
    let mut c = [0u8; 16];
    c[0] = 0x88;
    c[2..10].copy_from_slice(&lba.to_be_bytes());
    c[10..14].copy_from_slice(&blocks.to_be_bytes());
    let (done, data) = run(t, n, &c, &[]);
    assert_eq!(done, Completion::GOOD);
    data
}

fn invalid_field(c: &Completion) -> (SenseKey, Asc, u16, Option<u8>) {
    let s = c.sense.as_ref().expect("sense");
    let f = s.field.expect("field pointer");
    (s.key, s.asc, f.byte, f.bit)
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
    let n = ready(&t);
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
    let n = ready(&thick);
    let (c, _) = run(&thick, &n, &cdb32(WRITE_SAME_32, UNMAP, 0, 1), &block);
    assert_eq!(invalid_field(&c), field(10, Some(3)), "UNMAP without LBPWS");
}

#[test]
fn write_atomic32_writes_all_or_nothing() {
    let t = target(|_| {});
    let n = ready(&t);
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
    let n = ready(&ro);
    let (c, _) = run(&ro, &n, &cdb32(WRITE_ATOMIC_32, 0, 0, 1), &[0; 512]);
    let s = c.sense.unwrap();
    assert_eq!(
        (s.key, s.asc),
        (SenseKey::DataProtect, Asc::WRITE_PROTECTED)
    );
}
