//! Target-level behaviour through the public API the iSCSI layer uses.

mod common;

use common::{Request, TargetExt};

use common::{nexus, ram_lu, read10, run_on as run, sense_of};
use device::{
    Completion, LuConfig, Nexus, Target, TaskAttribute, TaskManagement, TmfResponse, Transfer, Unit,
};
use scsi::{Asc, Sense, SenseKey, Status};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use store::{FileStore, InlinePlane, RamStore, Store};

const BLOCKS: u64 = 2048;

fn target() -> Target {
    common::ram_target(LuConfig::new("iqn.test:t", 0, BLOCKS * 512))
}

/// A nexus that has already consumed its power-on unit attention.
fn ready(t: &Target, id: u64) -> Nexus {
    let n = nexus(id);
    let (c, _) = run(t, &n, 0, &[0; 6], &[]);
    assert_eq!(
        c.sense.map(|s| s.asc),
        Some(Asc::POWER_ON_RESET_OR_BUS_DEVICE_RESET)
    );
    assert_eq!(run(t, &n, 0, &[0; 6], &[]).0, Completion::GOOD);
    n
}

fn write16(lba: u64, blocks: u32, fua: bool) -> [u8; 16] {
    let mut c = common::write16(lba, blocks);
    c[1] |= u8::from(fua) << 3;
    c
}

/// A write the command would refuse is refused before the transport asks for its data
/// (issue 11: a WRITE longer than MAXIMUM TRANSFER LENGTH was R2T'd and buffered whole).
#[test]
fn a_write_too_long_or_out_of_range_is_refused_before_its_data() {
    let t = target();
    // The default maximum transfer: 8 MiB of 512-byte blocks.
    let max = 16_384;
    assert_eq!(
        t.transfer(&nexus(1), 0, &write16(0, BLOCKS as u32, false)),
        Ok(Transfer::Out(BLOCKS as u32 * 512))
    );
    let e = t
        .transfer(&nexus(1), 0, &write16(0, max + 1, false))
        .unwrap_err();
    assert_eq!(e, Sense::invalid_field_in_cdb(10, None));
    let e = t
        .transfer(&nexus(1), 0, &write16(BLOCKS - 1, 2, false))
        .unwrap_err();
    assert_eq!(
        (e.key, e.asc),
        (SenseKey::IllegalRequest, Asc::LBA_OUT_OF_RANGE)
    );
}

#[test]
fn write_then_read_back() {
    let t = target();
    let n = ready(&t, 1);
    let data: Vec<u8> = (0..4 * 512).map(|i| (i * 7 % 256) as u8).collect();
    assert_eq!(
        t.transfer(&nexus(1), 0, &write16(10, 4, false)),
        Ok(Transfer::Out(2048))
    );
    assert_eq!(
        run(&t, &n, 0, &write16(10, 4, true), &data).0,
        Completion::GOOD
    );
    assert_eq!(
        t.transfer(&nexus(1), 0, &read10(10, 4)),
        Ok(Transfer::In(2048))
    );
    let (c, back) = run(&t, &n, 0, &read10(10, 4), &[]);
    assert_eq!(c, Completion::GOOD);
    assert_eq!(back, data);
}

#[test]
fn lba_out_of_range_and_too_long() {
    let t = target();
    let n = ready(&t, 1);
    let (c, data) = run(&t, &n, 0, &read10(BLOCKS as u32 - 1, 2), &[]);
    assert_eq!(
        sense_of(&c),
        (SenseKey::IllegalRequest, Asc::LBA_OUT_OF_RANGE)
    );
    assert!(data.is_empty());
    // LBA + length overflowing 64 bits.
    let (c, _) = run(&t, &n, 0, &write16(u64::MAX, 2, false), &[0; 1024]);
    assert_eq!(
        sense_of(&c),
        (SenseKey::IllegalRequest, Asc::LBA_OUT_OF_RANGE)
    );
    // Zero blocks at the first LBA past the end is fine; one past that is not.
    assert_eq!(
        run(&t, &n, 0, &read10(BLOCKS as u32, 0), &[]).0,
        Completion::GOOD
    );
    assert_eq!(
        sense_of(&run(&t, &n, 0, &read10(BLOCKS as u32 + 1, 0), &[]).0).1,
        Asc::LBA_OUT_OF_RANGE
    );
    // Longer than the Block Limits maximum (8 MiB / 512 = 16384 blocks): TRANSFER LENGTH field.
    let mut cdb = [0u8; 16];
    cdb[0] = 0x88;
    cdb[10..14].copy_from_slice(&16385u32.to_be_bytes());
    assert_eq!(
        run(&t, &n, 0, &cdb, &[]).0.sense,
        Some(Sense::invalid_field_in_cdb(10, None))
    );
}

#[test]
fn short_data_out_writes_only_whole_blocks_received() {
    let t = target();
    let n = ready(&t, 1);
    run(&t, &n, 0, &write16(0, 2, false), &[b'a'; 1024]);
    assert_eq!(
        run(&t, &n, 0, &write16(0, 2, false), &[b'b'; 512]).0,
        Completion::GOOD
    );
    let (_, back) = run(&t, &n, 0, &read10(0, 2), &[]);
    assert!(back[..512].iter().all(|&b| b == b'b'));
    assert!(back[512..].iter().all(|&b| b == b'a'));
}

#[test]
fn inquiry_and_vpd() {
    let t = target();
    let n = nexus(1);
    let (c, std) = run(&t, &n, 0, &[0x12, 0, 0, 0, 255, 0], &[]);
    assert_eq!(
        c,
        Completion::GOOD,
        "INQUIRY ignores the pending unit attention"
    );
    assert_eq!(std[0], 0);
    assert_eq!(std[2], 0x0D);
    assert_eq!(&std[8..13], b"STINT");
    // Truncated to the allocation length.
    assert_eq!(run(&t, &n, 0, &[0x12, 0, 0, 0, 10, 0], &[]).1.len(), 10);
    let (_, pages) = run(&t, &n, 0, &[0x12, 1, 0, 0, 255, 0], &[]);
    assert_eq!(
        &pages[4..],
        &[0x00, 0x80, 0x83, 0x86, 0x8F, 0xB0, 0xB1, 0xB2]
    );
    // Room for the longest page (Third-party Copy, 372 bytes).
    for &page in &pages[4..] {
        let (c, d) = run(&t, &n, 0, &[0x12, 1, page, 0x04, 0, 0], &[]);
        assert_eq!(c, Completion::GOOD);
        assert_eq!(d[1], page);
        assert_eq!(usize::from(u16::from_be_bytes([d[2], d[3]])), d.len() - 4);
    }
    let (c, _) = run(&t, &n, 0, &[0x12, 1, 0xC7, 0, 255, 0], &[]);
    assert_eq!(c.sense, Some(Sense::invalid_field_in_cdb(2, None)));
    let (c, _) = run(&t, &n, 0, &[0x12, 0, 0x80, 0, 255, 0], &[]);
    assert_eq!(c.sense, Some(Sense::invalid_field_in_cdb(2, None)));
    // Block limits: MAXIMUM TRANSFER LENGTH.
    let (_, bl) = run(&t, &n, 0, &[0x12, 1, 0xB0, 0, 255, 0], &[]);
    assert_eq!(u32::from_be_bytes([bl[8], bl[9], bl[10], bl[11]]), 16384);
}

#[test]
fn device_identifier_is_stable_across_instances() {
    let id = |lun| {
        let t = Target::new(vec![(
            lun,
            ram_lu(LuConfig::new("iqn.test:t", lun, 1 << 20)),
        )]);
        run(&t, &nexus(1), lun, &[0x12, 1, 0x83, 0, 255, 0], &[]).1
    };
    assert_eq!(id(0), id(0));
    assert_ne!(id(0)[8..24], id(1)[8..24]);
}

#[test]
fn read_capacity() {
    let mut cfg = LuConfig::new("iqn.test:t", 0, BLOCKS * 512);
    cfg.physical_block_exponent = 3;
    let t = Target::new(vec![(0, ram_lu(cfg))]);
    let n = ready(&t, 1);
    let (c, d) = run(&t, &n, 0, &[0x25, 0, 0, 0, 0, 0, 0, 0, 0, 0], &[]);
    assert_eq!(c, Completion::GOOD);
    assert_eq!(
        d,
        [
            &(BLOCKS as u32 - 1).to_be_bytes()[..],
            &512u32.to_be_bytes()
        ]
        .concat()
    );
    let mut cdb = [0u8; 16];
    cdb[0] = 0x9E;
    cdb[1] = 0x10;
    cdb[13] = 32;
    let (c, d) = run(&t, &n, 0, &cdb, &[]);
    assert_eq!(c, Completion::GOOD);
    assert_eq!(d.len(), 32);
    assert_eq!(&d[0..8], &(BLOCKS - 1).to_be_bytes());
    assert_eq!(d[13], 3, "LBPPBE");
    // READ CAPACITY (10) with PMI = 0 and a non-zero LBA.
    let (c, _) = run(&t, &n, 0, &[0x25, 0, 0, 0, 0, 1, 0, 0, 0, 0], &[]);
    assert_eq!(c.sense, Some(Sense::invalid_field_in_cdb(2, None)));
}

/// LUN masking (issue 11): to an initiator it is not granted to, a LUN is absent; REPORT
/// LUNS leaves it out, INQUIRY answers "no logical unit", nothing else runs, and no data is
/// asked for; the granted initiator sees and uses it.
#[test]
fn a_masked_lun_is_absent_to_other_initiators() {
    let t = Target::new(vec![
        (0, ram_lu(LuConfig::new("iqn.test:t", 0, 1 << 20))),
        (1, ram_lu(LuConfig::new("iqn.test:t", 1, 1 << 20))),
    ])
    .with_mask(1, vec!["iqn.test:i1".into()]);
    let (owner, other) = (nexus(1), nexus(2));
    assert_eq!(other.initiator_name(), "iqn.test:i2");
    let report = [0xA0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0];
    let (_, d) = run(&t, &owner, 0, &report, &[]);
    assert_eq!(&d[0..4], &16u32.to_be_bytes(), "the owner sees LUN 0 and 1");
    let (_, d) = run(&t, &other, 0, &report, &[]);
    assert_eq!(&d[0..4], &8u32.to_be_bytes(), "the other sees LUN 0 only");
    assert_eq!(d[8 + 1], 0);
    let (_, d) = run(&t, &other, 1, &[0x12, 0, 0, 0, 96, 0], &[]);
    assert_eq!(d[0], 0x7F, "INQUIRY: peripheral qualifier 011b");
    let (c, _) = run(&t, &other, 1, &read10(0, 1), &[]);
    assert_eq!(
        sense_of(&c),
        (SenseKey::IllegalRequest, Asc::LOGICAL_UNIT_NOT_SUPPORTED)
    );
    assert_eq!(
        t.transfer(&other, 1, &write16(0, 1, false))
            .unwrap_err()
            .asc,
        Asc::LOGICAL_UNIT_NOT_SUPPORTED,
        "refused before any R2T"
    );
    assert_eq!(
        t.transfer(&owner, 1, &write16(0, 1, false)),
        Ok(Transfer::Out(512))
    );
}

#[test]
fn report_luns_and_absent_luns() {
    let t = Target::new(vec![
        (0, ram_lu(LuConfig::new("iqn.test:t", 0, 1 << 20))),
        (3, ram_lu(LuConfig::new("iqn.test:t", 3, 1 << 20))),
    ]);
    let n = nexus(1);
    let cdb = [0xA0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0];
    for lun in [0, 7] {
        let (c, d) = run(&t, &n, lun, &cdb, &[]);
        assert_eq!(c, Completion::GOOD);
        assert_eq!(&d[0..4], &16u32.to_be_bytes());
        assert_eq!(d[8 + 1], 0);
        assert_eq!(d[16 + 1], 3);
    }
    let (_, d) = run(&t, &n, 0, &[0xA0, 0, 0x01, 0, 0, 0, 0, 0, 1, 0, 0, 0], &[]);
    assert_eq!(d, vec![0; 8], "no well-known LUs");
    let (c, _) = run(&t, &n, 0, &[0xA0, 0, 0x05, 0, 0, 0, 0, 0, 1, 0, 0, 0], &[]);
    assert_eq!(c.sense, Some(Sense::invalid_field_in_cdb(2, None)));
    // Absent LUN 7.
    let (c, d) = run(&t, &n, 7, &[0x12, 0, 0, 0, 96, 0], &[]);
    assert_eq!(c, Completion::GOOD);
    assert_eq!(d[0], 0x7F);
    let (c, _) = run(&t, &n, 7, &read10(0, 1), &[]);
    assert_eq!(
        sense_of(&c),
        (SenseKey::IllegalRequest, Asc::LOGICAL_UNIT_NOT_SUPPORTED)
    );
    assert_eq!(
        t.transfer(&nexus(1), 7, &read10(0, 1)).unwrap_err().asc,
        Asc::LOGICAL_UNIT_NOT_SUPPORTED
    );
    let (c, d) = run(&t, &n, 7, &[0x03, 0, 0, 0, 18, 0], &[]);
    assert_eq!(c, Completion::GOOD);
    assert_eq!((d[2], d[12]), (0x05, 0x25));
    assert_eq!(
        t.task_management(
            0,
            &n,
            7,
            TaskManagement::LogicalUnitReset,
            &mut common::Collect::default()
        ),
        TmfResponse::IncorrectLun
    );
}

#[test]
fn unit_attentions_are_per_nexus() {
    let t = target();
    let a = ready(&t, 1);
    let b = ready(&t, 2);
    // MODE SELECT turning WCE off from nexus a: b gets MODE PARAMETERS CHANGED, a does not.
    let (_, mut page) = run(&t, &a, 0, &[0x1A, 0x08, 0x08, 0, 255, 0], &[]);
    page[0] = 0;
    page[4 + 2] &= !0x04;
    let len = page.len() as u8;
    assert_eq!(
        t.transfer(&nexus(1), 0, &[0x15, 0x10, 0, 0, len, 0]),
        Ok(Transfer::Out(len.into()))
    );
    assert_eq!(
        run(&t, &a, 0, &[0x15, 0x10, 0, 0, len, 0], &page).0,
        Completion::GOOD
    );
    assert_eq!(run(&t, &a, 0, &[0; 6], &[]).0, Completion::GOOD);
    let (c, _) = run(&t, &b, 0, &[0; 6], &[]);
    assert_eq!(
        sense_of(&c),
        (SenseKey::UnitAttention, Asc::MODE_PARAMETERS_CHANGED)
    );
    assert_eq!(run(&t, &b, 0, &[0; 6], &[]).0, Completion::GOOD);
    let (_, page) = run(&t, &b, 0, &[0x1A, 0x08, 0x08, 0, 255, 0], &[]);
    assert_eq!(page[4 + 2] & 0x04, 0, "WCE now off");
    // LOGICAL UNIT RESET: everyone, including the requester; REQUEST SENSE reports and clears.
    assert_eq!(
        t.task_management(
            0,
            &a,
            0,
            TaskManagement::LogicalUnitReset,
            &mut common::Collect::default()
        ),
        TmfResponse::FunctionComplete
    );
    let (c, d) = run(&t, &a, 0, &[0x03, 0, 0, 0, 252, 0], &[]);
    assert_eq!(c, Completion::GOOD);
    assert_eq!((d[2], d[12], d[13]), (0x06, 0x29, 0x03));
    assert_eq!(run(&t, &a, 0, &[0; 6], &[]).0, Completion::GOOD);
    assert_eq!(
        sense_of(&run(&t, &b, 0, &[0; 6], &[]).0).1,
        Asc::BUS_DEVICE_RESET_FUNCTION_OCCURRED
    );
    let (_, page) = run(&t, &b, 0, &[0x1A, 0x08, 0x08, 0, 255, 0], &[]);
    assert_eq!(page[4 + 2] & 0x04, 0x04, "reset restores the default WCE");
    // Nexus loss forgets the nexus; it is a fresh one next time.
    t.nexus_lost(0, &b, &mut common::Collect::default());
    assert_eq!(
        sense_of(&run(&t, &b, 0, &[0; 6], &[]).0).1,
        Asc::POWER_ON_RESET_OR_BUS_DEVICE_RESET
    );
}

#[test]
fn d_sense_selects_descriptor_format() {
    let t = target();
    let a = ready(&t, 1);
    let (_, mut page) = run(&t, &a, 0, &[0x1A, 0x08, 0x0A, 0, 255, 0], &[]);
    page[0] = 0;
    page[4 + 2] |= 0x04;
    let len = page.len() as u8;
    assert_eq!(
        run(&t, &a, 0, &[0x15, 0x10, 0, 0, len, 0], &page).0,
        Completion::GOOD
    );
    let mut out = vec![];
    t.encode_sense(0, &Sense::lba_out_of_range(), &mut out);
    assert_eq!(out[0], 0x72);
}

#[test]
fn stopped_unit_is_not_ready() {
    let t = target();
    let n = ready(&t, 1);
    assert_eq!(
        run(&t, &n, 0, &[0x1B, 0, 0, 0, 0, 0], &[]).0,
        Completion::GOOD
    );
    let nr = (
        SenseKey::NotReady,
        Asc::LOGICAL_UNIT_NOT_READY_INITIALIZING_REQUIRED,
    );
    assert_eq!(sense_of(&run(&t, &n, 0, &[0; 6], &[]).0), nr);
    assert_eq!(sense_of(&run(&t, &n, 0, &read10(0, 1), &[]).0), nr);
    assert_eq!(
        run(&t, &n, 0, &[0x12, 0, 0, 0, 36, 0], &[]).0,
        Completion::GOOD
    );
    // LOEJ on a non-removable LU.
    assert_eq!(
        run(&t, &n, 0, &[0x1B, 0, 0, 0, 0x03, 0], &[]).0.sense,
        Some(Sense::invalid_field_in_cdb(4, Some(1)))
    );
    assert_eq!(
        run(&t, &n, 0, &[0x1B, 0, 0, 0, 1, 0], &[]).0,
        Completion::GOOD
    );
    assert_eq!(run(&t, &n, 0, &read10(0, 1), &[]).0, Completion::GOOD);
}

#[test]
fn read_only_lu_rejects_writes() {
    let mut cfg = LuConfig::new("iqn.test:t", 0, 1 << 20);
    cfg.read_only = true;
    let t = Target::new(vec![(0, ram_lu(cfg))]);
    let n = ready(&t, 1);
    let (c, _) = run(&t, &n, 0, &write16(0, 1, false), &[0; 512]);
    assert_eq!(sense_of(&c), (SenseKey::DataProtect, Asc::WRITE_PROTECTED));
    let (_, ms) = run(&t, &n, 0, &[0x1A, 0, 0x3F, 0, 255, 0], &[]);
    assert_eq!(ms[2] & 0x80, 0x80, "WP in the mode parameter header");
}

#[test]
fn verify_compares_and_reports_offset() {
    let t = target();
    let n = ready(&t, 1);
    let data: Vec<u8> = (0..1024).map(|i| (i % 199) as u8).collect();
    run(&t, &n, 0, &write16(100, 2, false), &data);
    let mut v = [0x2F, 0x02, 0, 0, 0, 100, 0, 0, 2, 0];
    assert_eq!(t.transfer(&nexus(1), 0, &v), Ok(Transfer::Out(1024)));
    assert_eq!(run(&t, &n, 0, &v, &data).0, Completion::GOOD);
    let mut bad = data.clone();
    bad[700] ^= 0x58;
    let (c, _) = run(&t, &n, 0, &v, &bad);
    let s = c.sense.unwrap();
    assert_eq!(
        (s.key, s.asc, s.information),
        (
            SenseKey::Miscompare,
            Asc::MISCOMPARE_DURING_VERIFY,
            Some(700)
        )
    );
    // BYTCHK = 0: no data, medium check only.
    v[1] = 0;
    assert_eq!(t.transfer(&nexus(1), 0, &v), Ok(Transfer::None));
    assert_eq!(run(&t, &n, 0, &v, &[]).0, Completion::GOOD);
    // BYTCHK = 11b: one block compared with each block.
    run(&t, &n, 0, &write16(200, 2, false), &[9u8; 1024]);
    let v3 = [0x2F, 0x06, 0, 0, 0, 200, 0, 0, 2, 0];
    assert_eq!(t.transfer(&nexus(1), 0, &v3), Ok(Transfer::Out(512)));
    assert_eq!(run(&t, &n, 0, &v3, &[9u8; 512]).0, Completion::GOOD);
    assert_eq!(
        run(&t, &n, 0, &v3, &[8u8; 512]).0.sense.unwrap().key,
        SenseKey::Miscompare
    );
    // BYTCHK = 10b is reserved.
    let v2 = [0x2F, 0x04, 0, 0, 0, 200, 0, 0, 2, 0];
    assert_eq!(
        t.transfer(&nexus(1), 0, &v2),
        Err(Sense::invalid_field_in_cdb(1, Some(2)))
    );
}

#[test]
fn cache_commands() {
    let t = target();
    let n = ready(&t, 1);
    let sync10 = |lba: u32, blocks: u16| {
        let mut c = [0x35, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        c[2..6].copy_from_slice(&lba.to_be_bytes());
        c[7..9].copy_from_slice(&blocks.to_be_bytes());
        c
    };
    assert_eq!(run(&t, &n, 0, &sync10(0, 0), &[]).0, Completion::GOOD);
    assert_eq!(
        sense_of(&run(&t, &n, 0, &sync10(BLOCKS as u32 - 1, 2), &[]).0).1,
        Asc::LBA_OUT_OF_RANGE
    );
    let mut pf = sync10(BLOCKS as u32 - 4, 4);
    pf[0] = 0x34;
    assert_eq!(run(&t, &n, 0, &pf, &[]).0.status, Status::Good);
    pf[2..6].copy_from_slice(&(BLOCKS as u32 + 1).to_be_bytes());
    pf[7..9].copy_from_slice(&[0, 0]);
    assert_eq!(
        sense_of(&run(&t, &n, 0, &pf, &[]).0).1,
        Asc::LBA_OUT_OF_RANGE
    );
}

#[test]
fn file_lu_survives_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lun0.img");
    let data = vec![0xC3u8; 4096];
    {
        let store = FileStore::open(&path, Some(1 << 20)).unwrap();
        let t = common::target_with(LuConfig::new("iqn.test:t", 0, 1 << 20), Arc::new(store));
        let n = ready(&t, 1);
        assert_eq!(
            run(&t, &n, 0, &write16(8, 8, true), &data).0,
            Completion::GOOD
        );
    }
    let store = FileStore::open(&path, None).unwrap();
    assert_eq!(store.len(), 1 << 20);
    let t = common::target_with(LuConfig::new("iqn.test:t", 0, 1 << 20), Arc::new(store));
    let n = ready(&t, 1);
    let (_, back) = run(&t, &n, 0, &read10(8, 8), &[]);
    assert_eq!(back, data);
}

#[test]
fn config_errors_are_reported() {
    let mut cfg = LuConfig::new("iqn.test:t", 0, 1 << 20);
    cfg.block_size = 1024;
    let plane = |len| Arc::new(InlinePlane::new(Arc::new(RamStore::new(len).unwrap())));
    assert!(Unit::build(cfg, plane(1 << 20), None).is_err());
    let cfg = LuConfig::new("iqn.test:t", 0, 1 << 20);
    let e = Unit::build(cfg, plane(1 << 19), None).err().unwrap();
    assert!(e.to_string().contains("524288"), "{e}");
}

/// A RAM store that counts the durable writes and flushes the device asks of it.
struct Counting {
    ram: RamStore,
    durable: Arc<AtomicU64>,
    flushes: Arc<AtomicU64>,
}

impl Store for Counting {
    fn len(&self) -> u64 {
        self.ram.len()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.ram.read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, buf: &[u8]) -> std::io::Result<()> {
        self.ram.write_at(offset, buf)
    }
    fn write_durable(&self, offset: u64, buf: &[u8]) -> std::io::Result<()> {
        self.durable.fetch_add(1, Relaxed);
        self.ram.write_at(offset, buf)
    }
    fn flush(&self) -> std::io::Result<()> {
        self.flushes.fetch_add(1, Relaxed);
        Ok(())
    }
}

/// FUA makes its own write durable, not every cached one (issue 11: FUA synced the whole
/// file); without FUA nothing is synced.
#[test]
fn fua_asks_for_one_durable_write_and_no_flush() {
    let (durable, flushes) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let store = Counting {
        ram: RamStore::new(BLOCKS * 512).unwrap(),
        durable: durable.clone(),
        flushes: flushes.clone(),
    };
    let lu = common::unit_over(
        LuConfig::new("iqn.test:t", 0, BLOCKS * 512),
        Arc::new(store),
    );
    let t = Target::new(vec![(0, lu)]);
    let n = ready(&t, 1);
    let counts = || (durable.load(Relaxed), flushes.load(Relaxed));
    let (c, _) = run(&t, &n, 0, &write16(0, 1, false), &[1; 512]);
    assert_eq!((c, counts()), (Completion::GOOD, (0, 0)));
    let (c, _) = run(&t, &n, 0, &write16(8, 1, true), &[2; 512]);
    assert_eq!((c, counts()), (Completion::GOOD, (1, 0)));
}

#[test]
fn target_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Target>();
}

#[test]
fn software_write_protect_via_control_page() {
    let t = target();
    let n = ready(&t, 1);
    let (_, changeable) = run(&t, &n, 0, &[0x1A, 0x08, 0x4A, 0, 255, 0], &[]);
    assert_eq!(changeable[4 + 4] & 0x08, 0x08, "SWP is changeable");
    let (_, mut page) = run(&t, &n, 0, &[0x1A, 0x08, 0x0A, 0, 255, 0], &[]);
    page[0] = 0;
    page[4 + 4] |= 0x08;
    let len = page.len() as u8;
    assert_eq!(
        run(&t, &n, 0, &[0x15, 0x10, 0, 0, len, 0], &page).0,
        Completion::GOOD
    );
    assert_eq!(run(&t, &n, 0, &read10(0, 1), &[]).0, Completion::GOOD);
    let (c, _) = run(&t, &n, 0, &write16(0, 1, false), &[0; 512]);
    assert_eq!(sense_of(&c), (SenseKey::DataProtect, Asc::WRITE_PROTECTED));
    let (_, ms) = run(&t, &n, 0, &[0x1A, 0x08, 0x0A, 0, 255, 0], &[]);
    assert_eq!(ms[2] & 0x80, 0x80, "WP");
    page[4 + 4] &= !0x08;
    assert_eq!(
        run(&t, &n, 0, &[0x15, 0x10, 0, 0, len, 0], &page).0,
        Completion::GOOD
    );
    assert_eq!(
        run(&t, &n, 0, &write16(0, 1, false), &[0; 512]).0,
        Completion::GOOD
    );
}

/// Issue 11: an initiator without the privilege cannot stop the unit or switch the write
/// cache or write protection for everyone; harmless changes (START, D_SENSE) it may make.
#[test]
fn disruptive_commands_need_the_privilege() {
    let t = target();
    let mut n = ready(&t, 1);
    n.privileged = false;
    let denied = (
        SenseKey::IllegalRequest,
        Asc::ACCESS_DENIED_NO_ACCESS_RIGHTS,
    );
    let (c, _) = run(&t, &n, 0, &[0x1B, 0, 0, 0, 0, 0], &[]);
    assert_eq!(sense_of(&c), denied, "STOP");
    assert_eq!(
        run(&t, &n, 0, &read10(0, 1), &[]).0,
        Completion::GOOD,
        "still ready"
    );
    assert_eq!(
        run(&t, &n, 0, &[0x1B, 0, 0, 0, 1, 0], &[]).0,
        Completion::GOOD,
        "START"
    );
    let (_, mut control) = run(&t, &n, 0, &[0x1A, 0x08, 0x0A, 0, 255, 0], &[]);
    control[0] = 0;
    let len = control.len() as u8;
    let mut swp = control.clone();
    swp[4 + 4] |= 0x08;
    let (c, _) = run(&t, &n, 0, &[0x15, 0x10, 0, 0, len, 0], &swp);
    assert_eq!(sense_of(&c), denied, "SWP");
    let (_, mut caching) = run(&t, &n, 0, &[0x1A, 0x08, 0x08, 0, 255, 0], &[]);
    caching[0] = 0;
    caching[4 + 2] ^= 0x04;
    let (c, _) = run(
        &t,
        &n,
        0,
        &[0x15, 0x10, 0, 0, caching.len() as u8, 0],
        &caching,
    );
    assert_eq!(sense_of(&c), denied, "WCE");
    let mut d_sense = control;
    d_sense[4 + 2] |= 0x04;
    assert_eq!(
        run(&t, &n, 0, &[0x15, 0x10, 0, 0, len, 0], &d_sense).0,
        Completion::GOOD,
        "D_SENSE is the initiator's own business"
    );
    let owner = ready(&t, 2);
    let (c, _) = run(&t, &owner, 0, &[0x15, 0x10, 0, 0, len, 0], &swp);
    assert_eq!(c, Completion::GOOD, "a privileged initiator may");
}

/// Issue 11: a LUN configured without a write cache stays so whatever an initiator selects.
#[test]
fn a_pinned_write_cache_cannot_be_turned_on() {
    let mut config = LuConfig::new("iqn.test:t", 0, BLOCKS * 512);
    config.write_cache = false;
    config.write_cache_changeable = false;
    let t = Target::new(vec![(0, ram_lu(config))]);
    let n = ready(&t, 1);
    let (_, changeable) = run(&t, &n, 0, &[0x1A, 0x08, 0x48, 0, 255, 0], &[]);
    assert_eq!(changeable[4 + 2] & 0x04, 0, "WCE is not changeable");
    let (_, mut page) = run(&t, &n, 0, &[0x1A, 0x08, 0x08, 0, 255, 0], &[]);
    assert_eq!(page[4 + 2] & 0x04, 0, "WCE off");
    page[0] = 0;
    page[4 + 2] |= 0x04;
    let len = page.len() as u8;
    let (c, _) = run(&t, &n, 0, &[0x15, 0x10, 0, 0, len, 0], &page);
    assert_eq!(
        c.sense,
        Some(Sense::invalid_field_in_parameter_list(6, Some(2)))
    );
    let (_, after) = run(&t, &n, 0, &[0x1A, 0x08, 0x08, 0, 255, 0], &[]);
    assert_eq!(after[4 + 2] & 0x04, 0, "still off");
}

#[test]
fn mode_select_errors() {
    let t = target();
    let n = ready(&t, 1);
    // Data-out shorter than the PARAMETER LIST LENGTH.
    let (c, _) = run(&t, &n, 0, &[0x15, 0x10, 0, 0, 24, 0], &[0; 10]);
    assert_eq!(
        sense_of(&c),
        (SenseKey::IllegalRequest, Asc::PARAMETER_LIST_LENGTH_ERROR)
    );
    // SP = 1.
    let (c, _) = run(&t, &n, 0, &[0x15, 0x11, 0, 0, 24, 0], &[0; 24]);
    assert_eq!(c.sense, Some(Sense::invalid_field_in_cdb(1, Some(0))));
    // Saved values.
    let (c, _) = run(&t, &n, 0, &[0x1A, 0, 0xC8, 0, 255, 0], &[]);
    assert_eq!(
        sense_of(&c),
        (
            SenseKey::IllegalRequest,
            Asc::SAVING_PARAMETERS_NOT_SUPPORTED
        )
    );
    // A non-changeable bit of the caching page (RCD), parameter-list pointer.
    let (_, mut page) = run(&t, &n, 0, &[0x1A, 0x08, 0x08, 0, 255, 0], &[]);
    page[0] = 0;
    page[4 + 2] |= 0x01;
    let len = page.len() as u8;
    let (c, _) = run(&t, &n, 0, &[0x15, 0x10, 0, 0, len, 0], &page);
    assert_eq!(
        c.sense,
        Some(Sense::invalid_field_in_parameter_list(6, Some(0)))
    );
}

#[test]
fn random_commands_never_panic() {
    let t = common::ram_target(LuConfig::new("iqn.test:t", 0, 1 << 20));
    let n = nexus(1);
    let mut state = 0xD1CE_0000_0000_0007u64;
    let mut next = move || {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_F491_4F6C_DD1D)
    };
    let data_out = vec![0x5Au8; 8192];
    let mut data_in = Vec::new();
    for i in 0..30_000u32 {
        let len = (next() % 17) as usize;
        let mut cdb: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        if !cdb.is_empty() && i % 2 == 0 {
            let info = &scsi::COMMANDS[(next() as usize) % scsi::COMMANDS.len()];
            cdb[0] = info.opcode();
            for (b, m) in cdb.iter_mut().zip(info.usage).skip(1) {
                *b &= *m;
            }
            if let (Some(sa), Some(b)) = (info.service_action, cdb.get_mut(1)) {
                *b = sa as u8;
            }
            // Keep LBAs small often enough to reach the store.
            if i % 4 == 0 {
                for b in cdb.iter_mut().skip(2).take(4) {
                    *b = 0;
                }
            }
        }
        let lun = next() % 3;
        let _ = t.transfer(&nexus(1), lun, &cdb);
        let out = &data_out[..(next() % 8192) as usize];
        data_in.clear();
        let req = Request {
            nexus: &n,
            lun,
            tag: 0,
            cdb: &cdb,
            attribute: TaskAttribute::Simple,
            data_out: out,
            data_out_buffer_size: (next() % 8192) as u32,
        };
        let c = t.execute(&req, &mut data_in);
        assert_eq!(c.status == Status::CheckCondition, c.sense.is_some());
        if i % 1000 == 0 {
            t.task_management(
                0,
                &n,
                lun,
                TaskManagement::LogicalUnitReset,
                &mut common::Collect::default(),
            );
        }
    }
}

#[test]
fn aca_attribute_is_refused_other_attributes_run() {
    let t = target();
    let n = ready(&t, 1);
    for (attribute, good) in [
        (TaskAttribute::Simple, true),
        (TaskAttribute::Ordered, true),
        (TaskAttribute::HeadOfQueue, true),
        (TaskAttribute::Aca, false),
    ] {
        let cdb = read10(0, 1);
        let req = Request {
            attribute,
            ..common::request(&n, 0, &cdb, &[])
        };
        let mut data_in = Vec::new();
        let c = t.execute(&req, &mut data_in);
        assert_eq!(c == Completion::GOOD, good, "{attribute:?}");
        if !good {
            assert_eq!(
                sense_of(&c),
                (SenseKey::IllegalRequest, Asc::INVALID_MESSAGE_ERROR)
            );
        }
    }
}

#[test]
fn four_k_blocks_and_512e() {
    let mut cfg = LuConfig::new("iqn.test:t", 0, 1 << 22);
    cfg.block_size = 4096;
    let t = Target::new(vec![(0, ram_lu(cfg))]);
    let n = ready(&t, 1);
    let (_, d) = run(&t, &n, 0, &[0x25, 0, 0, 0, 0, 0, 0, 0, 0, 0], &[]);
    assert_eq!(u32::from_be_bytes([d[0], d[1], d[2], d[3]]), 1023);
    assert_eq!(u32::from_be_bytes([d[4], d[5], d[6], d[7]]), 4096);
    assert_eq!(
        t.transfer(&nexus(1), 0, &read10(0, 2)),
        Ok(Transfer::In(8192))
    );
    let data = vec![0x77u8; 8192];
    assert_eq!(
        run(&t, &n, 0, &write16(1022, 2, false), &data).0,
        Completion::GOOD
    );
    assert_eq!(run(&t, &n, 0, &read10(1022, 2), &[]).1, data);
    assert_eq!(
        sense_of(&run(&t, &n, 0, &read10(1023, 2), &[]).0).1,
        Asc::LBA_OUT_OF_RANGE
    );
    // Mode block descriptor carries the 4096-byte block length.
    let (_, ms) = run(&t, &n, 0, &[0x1A, 0, 0x08, 0, 255, 0], &[]);
    assert_eq!(&ms[9..12], &[0, 0x10, 0]);
}

#[test]
fn concurrent_writers_keep_their_data() {
    let t = Arc::new(Target::new(vec![(
        0,
        ram_lu(LuConfig::new("iqn.test:t", 0, 8 << 20)),
    )]));
    std::thread::scope(|s| {
        for id in 0..4u64 {
            let t = Arc::clone(&t);
            s.spawn(move || {
                let n = nexus(id + 10);
                run(&t, &n, 0, &[0; 6], &[]);
                // Each thread owns 4096 blocks (2 MiB), crossing RAM chunk boundaries.
                for round in 0..64u64 {
                    let lba = id * 4096 + round * 64;
                    let pattern = vec![(id * 64 + round) as u8; 64 * 512];
                    assert_eq!(
                        run(&t, &n, 0, &write16(lba, 64, false), &pattern).0,
                        Completion::GOOD
                    );
                    let (c, back) = run(&t, &n, 0, &read10(lba as u32, 64), &[]);
                    assert_eq!(c, Completion::GOOD);
                    assert!(back == pattern, "thread {id} round {round}");
                }
            });
        }
    });
}

#[test]
fn orwrite_ors_into_the_medium() {
    let t = target();
    let n = ready(&t, 1);
    run(&t, &n, 0, &write16(5, 2, false), &[0xA5; 1024]);
    let mut ow = write16(5, 2, false);
    ow[0] = 0x8B;
    assert_eq!(t.transfer(&nexus(1), 0, &ow), Ok(Transfer::Out(1024)));
    assert_eq!(run(&t, &n, 0, &ow, &[0x5A; 1024]).0, Completion::GOOD);
    assert_eq!(run(&t, &n, 0, &read10(5, 2), &[]).1, vec![0xFF; 1024]);
    let mut beyond = write16(BLOCKS - 1, 2, false);
    beyond[0] = 0x8B;
    assert_eq!(
        sense_of(&run(&t, &n, 0, &beyond, &[0; 1024]).0).1,
        Asc::LBA_OUT_OF_RANGE
    );
    // ORPROTECT must be zero.
    ow[1] = 0x20;
    assert_eq!(
        t.transfer(&nexus(1), 0, &ow),
        Err(Sense::invalid_field_in_cdb(1, Some(7)))
    );
}

#[test]
fn rsoc_and_rstmf_through_the_device() {
    let t = target();
    let n = ready(&t, 1);
    // Linux's CDL probe: one command, READ(16), allocation length 4 + 16 = 20 (Linux's
    // scsi_cdl_check_cmd).
    let probe = [0xA3, 0x0C, 0x01, 0x88, 0, 0, 0, 0, 0, 20, 0, 0];
    assert_eq!(t.transfer(&nexus(1), 0, &probe), Ok(Transfer::In(20)));
    let (c, d) = run(&t, &n, 0, &probe, &[]);
    assert_eq!(c, Completion::GOOD);
    assert_eq!(d.len(), 20);
    assert_eq!(d[1] & 0x07, 0x03, "SUPPORT: supported per standard");
    assert_eq!(&d[2..4], &[0, 16]);
    assert_eq!(d[4], 0x88);
    // Truncation never fails the command.
    let (c, d) = run(
        &t,
        &n,
        0,
        &[0xA3, 0x0C, 0x80, 0, 0, 0, 0, 0, 0, 7, 0, 0],
        &[],
    );
    assert_eq!((c, d.len()), (Completion::GOOD, 7));
    let (c, d) = run(
        &t,
        &n,
        0,
        &[0xA3, 0x0D, 0x80, 0, 0, 0, 0, 0, 0, 16, 0, 0],
        &[],
    );
    assert_eq!(c, Completion::GOOD);
    assert_eq!(
        (d.len(), d[0] & 0x08, d[3]),
        (16, 0x08, 0x0C),
        "LURS, REPD additional length"
    );
}

#[test]
fn request_sense_formats() {
    let t = target();
    let n = ready(&t, 1);
    let (c, d) = run(&t, &n, 0, &[0x03, 0x01, 0, 0, 252, 0], &[]);
    assert_eq!(c, Completion::GOOD);
    assert_eq!(
        (d[0], d[1], d[2], d[3]),
        (0x72, 0x00, 0x00, 0x00),
        "descriptor NO SENSE"
    );
    let (_, d) = run(&t, &n, 0, &[0x03, 0, 0, 0, 252, 0], &[]);
    assert_eq!((d[0], d[2], d.len()), (0x70, 0x00, 18));
    let (_, d) = run(&t, &n, 0, &[0x03, 0, 0, 0, 8, 0], &[]);
    assert_eq!(d.len(), 8, "allocation length");
}

#[test]
fn write_same_fills_the_range() {
    let t = target();
    let n = ready(&t, 1);
    let ws10 = |lba: u32, blocks: u16| {
        let mut c = [0x41, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        c[2..6].copy_from_slice(&lba.to_be_bytes());
        c[7..9].copy_from_slice(&blocks.to_be_bytes());
        c
    };
    assert_eq!(
        t.transfer(&nexus(1), 0, &ws10(3, 300)),
        Ok(Transfer::Out(512))
    );
    let block: Vec<u8> = (0..512).map(|i| i as u8).collect();
    assert_eq!(run(&t, &n, 0, &ws10(3, 300), &block).0, Completion::GOOD);
    let (_, back) = run(&t, &n, 0, &read10(2, 302), &[]);
    assert!(
        back[..512].iter().all(|&b| b == 0),
        "block before untouched"
    );
    for chunk in back[512..512 * 301].chunks(512) {
        assert_eq!(chunk, &block[..]);
    }
    assert!(
        back[512 * 301..].iter().all(|&b| b == 0),
        "block after untouched"
    );
    // WSNZ = 0: zero blocks is every block from the LBA on; the range end past capacity is
    // refused.
    assert_eq!(
        run(&t, &n, 0, &ws10(BLOCKS as u32 - 4, 0), &block).0,
        Completion::GOOD
    );
    let (_, back) = run(&t, &n, 0, &read10(BLOCKS as u32 - 4, 4), &[]);
    assert!(back.chunks(512).all(|b| b == &block[..]));
    assert_eq!(
        sense_of(&run(&t, &n, 0, &ws10(BLOCKS as u32 - 1, 2), &block).0).1,
        Asc::LBA_OUT_OF_RANGE
    );
    assert_eq!(
        sense_of(&run(&t, &n, 0, &ws10(BLOCKS as u32, 0), &block).0).1,
        Asc::LBA_OUT_OF_RANGE
    );
    // A Data-Out buffer of another size than one block is refused, and nothing written.
    let mut two = block.clone();
    two.extend_from_slice(&[9; 512]);
    assert_eq!(
        sense_of(&run(&t, &n, 0, &ws10(600, 1), &two).0),
        (SenseKey::IllegalRequest, Asc::INVALID_FIELD_IN_CDB)
    );
    assert_eq!(
        sense_of(&run(&t, &n, 0, &ws10(600, 1), &block[..256]).0),
        (SenseKey::IllegalRequest, Asc::INVALID_FIELD_IN_CDB)
    );
    let (_, back) = run(&t, &n, 0, &read10(600, 1), &[]);
    assert!(back.iter().all(|&b| b == 0));
    // UNMAP on a fully provisioned unit (after the write-protect check, as libiscsi's
    // ReadOnly test expects).
    let full = Target::new(vec![(
        0,
        ram_lu(LuConfig {
            thin_provisioning: false,
            ..LuConfig::new("iqn.test:t", 0, BLOCKS * 512)
        }),
    )]);
    let fnx = ready(&full, 1);
    let mut unmap = ws10(0, 1);
    unmap[1] = 0x08;
    assert_eq!(
        run(&full, &fnx, 0, &unmap, &block).0.sense,
        Some(Sense::invalid_field_in_cdb(1, Some(3)))
    );
    // Block Limits advertises WSNZ = 0 and the maximum length.
    let (_, bl) = run(&t, &n, 0, &[0x12, 1, 0xB0, 0, 255, 0], &[]);
    assert_eq!(bl[4] & 1, 0);
    assert_eq!(
        u64::from_be_bytes(bl[36..44].try_into().unwrap()),
        (1 << 16) - 1
    );
}

#[test]
fn compare_and_write_is_all_or_nothing() {
    let t = target();
    let n = ready(&t, 1);
    run(&t, &n, 0, &write16(40, 2, false), &[b'A'; 1024]);
    let caw = |lba: u64, blocks: u8| {
        let mut c = [0u8; 16];
        c[0] = 0x89;
        c[2..10].copy_from_slice(&lba.to_be_bytes());
        c[13] = blocks;
        c
    };
    assert_eq!(
        t.transfer(&nexus(1), 0, &caw(40, 2)),
        Ok(Transfer::Out(2048))
    );
    let mut data = vec![b'A'; 1024];
    data.extend_from_slice(&[b'B'; 1024]);
    assert_eq!(run(&t, &n, 0, &caw(40, 2), &data).0, Completion::GOOD);
    assert_eq!(run(&t, &n, 0, &read10(40, 2), &[]).1, vec![b'B'; 1024]);
    // Verify instance no longer matches: MISCOMPARE at the first differing byte, nothing written.
    data[..1024].fill(b'B');
    data[1000] = b'C';
    data[1024..].fill(b'D');
    let s = run(&t, &n, 0, &caw(40, 2), &data).0.sense.unwrap();
    assert_eq!(
        (s.key, s.asc, s.information),
        (
            SenseKey::Miscompare,
            Asc::MISCOMPARE_DURING_VERIFY,
            Some(1000)
        )
    );
    assert_eq!(run(&t, &n, 0, &read10(40, 2), &[]).1, vec![b'B'; 1024]);
    // Zero blocks, too many blocks, short data-out: the NUMBER OF LOGICAL BLOCKS field.
    assert_eq!(
        run(&t, &n, 0, &caw(40, 0), &[]).0.sense,
        Some(Sense::invalid_field_in_cdb(13, None))
    );
    assert_eq!(
        run(&t, &n, 0, &caw(40, 2), &data[..1500]).0.sense,
        Some(Sense::invalid_field_in_cdb(13, None))
    );
    // A Data-Out buffer larger than the two instances (libiscsi's InvalidDataOutSize).
    let mut more = data.clone();
    more.extend_from_slice(&[0; 1024]);
    assert_eq!(
        run(&t, &n, 0, &caw(40, 2), &more).0.sense,
        Some(Sense::invalid_field_in_cdb(13, None))
    );
    let (_, bl) = run(&t, &n, 0, &[0x12, 1, 0xB0, 0, 255, 0], &[]);
    assert_eq!(bl[5], 255, "MAXIMUM COMPARE AND WRITE LENGTH");
    assert_eq!(
        sense_of(&run(&t, &n, 0, &caw(BLOCKS - 1, 2), &[0; 2048]).0).1,
        Asc::LBA_OUT_OF_RANGE
    );
}

#[test]
fn removable_medium_eject_load_and_prevention() {
    let mut cfg = LuConfig::new("iqn.test:t", 0, 1 << 20);
    cfg.removable = true;
    let t = Target::new(vec![(0, ram_lu(cfg))]);
    let a = ready(&t, 1);
    let b = ready(&t, 2);
    let (_, inq) = run(&t, &a, 0, &[0x12, 0, 0, 0, 36, 0], &[]);
    assert_eq!(inq[1] & 0x80, 0x80, "RMB");
    let eject = [0x1B, 0, 0, 0, 0x02, 0];
    let load = [0x1B, 0, 0, 0, 0x03, 0];
    let prevent = |on: bool| [0x1E, 0, 0, 0, u8::from(on), 0];
    let prevented = (SenseKey::IllegalRequest, Asc::MEDIUM_REMOVAL_PREVENTED);
    let no_medium = (SenseKey::NotReady, Asc::MEDIUM_NOT_PRESENT);
    // Prevention by one nexus blocks the other too.
    assert_eq!(run(&t, &a, 0, &prevent(true), &[]).0, Completion::GOOD);
    assert_eq!(sense_of(&run(&t, &a, 0, &eject, &[]).0), prevented);
    assert_eq!(sense_of(&run(&t, &b, 0, &eject, &[]).0), prevented);
    assert_eq!(run(&t, &a, 0, &[0; 6], &[]).0, Completion::GOOD);
    assert_eq!(run(&t, &a, 0, &prevent(false), &[]).0, Completion::GOOD);
    assert_eq!(run(&t, &a, 0, &eject, &[]).0, Completion::GOOD);
    assert_eq!(sense_of(&run(&t, &a, 0, &[0; 6], &[]).0), no_medium);
    assert_eq!(sense_of(&run(&t, &a, 0, &read10(0, 1), &[]).0), no_medium);
    assert_eq!(
        sense_of(&run(&t, &a, 0, &[0x25, 0, 0, 0, 0, 0, 0, 0, 0, 0], &[]).0),
        no_medium
    );
    let (_, rs) = run(&t, &a, 0, &[0x03, 0, 0, 0, 18, 0], &[]);
    assert_eq!((rs[2], rs[12]), (0x02, 0x3A));
    assert_eq!(run(&t, &a, 0, &load, &[]).0, Completion::GOOD);
    assert_eq!(run(&t, &a, 0, &read10(0, 1), &[]).0, Completion::GOOD);
    // Nexus loss and LU reset end a nexus' prevention.
    run(&t, &b, 0, &prevent(true), &[]);
    t.nexus_lost(0, &b, &mut common::Collect::default());
    assert_eq!(run(&t, &a, 0, &eject, &[]).0, Completion::GOOD);
    assert_eq!(run(&t, &a, 0, &load, &[]).0, Completion::GOOD);
    run(&t, &a, 0, &prevent(true), &[]);
    t.task_management(
        0,
        &a,
        0,
        TaskManagement::LogicalUnitReset,
        &mut common::Collect::default(),
    );
    run(&t, &a, 0, &[0; 6], &[]);
    assert_eq!(run(&t, &a, 0, &eject, &[]).0, Completion::GOOD);
    // Obsolete PREVENT values.
    assert_eq!(
        t.transfer(&nexus(1), 0, &[0x1E, 0, 0, 0, 2, 0]),
        Err(Sense::invalid_field_in_cdb(4, Some(1)))
    );
}

#[test]
fn removable_unit_ignores_start_without_loej_and_power_conditions() {
    let mut cfg = LuConfig::new("iqn.test:t", 0, 1 << 20);
    cfg.removable = true;
    let t = Target::new(vec![(0, ram_lu(cfg))]);
    let n = ready(&t, 1);
    assert_eq!(
        run(&t, &n, 0, &[0x1B, 0, 0, 0, 0x00, 0], &[]).0,
        Completion::GOOD
    );
    assert_eq!(run(&t, &n, 0, &[0; 6], &[]).0, Completion::GOOD);
    for pc in 1..16u8 {
        assert_eq!(
            run(&t, &n, 0, &[0x1B, 1, 0, 0, pc << 4 | 0x02, 0], &[]).0,
            Completion::GOOD
        );
        assert_eq!(
            run(&t, &n, 0, &[0; 6], &[]).0,
            Completion::GOOD,
            "PC {pc} must not eject"
        );
    }
    // SYNC_NV (obsolete) is accepted; with no medium the answer is MEDIUM NOT PRESENT.
    assert_eq!(
        run(&t, &n, 0, &[0x1B, 0, 0, 0, 0x02, 0], &[]).0,
        Completion::GOOD
    );
    let (c, _) = run(&t, &n, 0, &[0x35, 0x06, 0, 0, 0, 0, 0, 0, 1, 0], &[]);
    assert_eq!(sense_of(&c), (SenseKey::NotReady, Asc::MEDIUM_NOT_PRESENT));
}

#[test]
fn reserve6_excludes_other_nexuses_until_released() {
    let t = target();
    let a = ready(&t, 1);
    let b = ready(&t, 2);
    let reserve = [0x16, 0, 0, 0, 0, 0];
    let release = [0x17, 0, 0, 0, 0, 0];
    let conflict = Completion {
        status: Status::ReservationConflict,
        sense: None,
    };
    assert_eq!(run(&t, &a, 0, &reserve, &[]).0, Completion::GOOD);
    assert_eq!(
        run(&t, &a, 0, &reserve, &[]).0,
        Completion::GOOD,
        "holder may re-reserve"
    );
    assert_eq!(run(&t, &b, 0, &reserve, &[]).0, conflict);
    assert_eq!(
        run(&t, &b, 0, &release, &[]).0,
        Completion::GOOD,
        "non-holder release is a no-op"
    );
    assert_eq!(run(&t, &b, 0, &read10(0, 1), &[]).0, conflict);
    assert_eq!(run(&t, &b, 0, &[0x1A, 0, 0x3F, 0, 255, 0], &[]).0, conflict);
    assert_eq!(
        run(&t, &b, 0, &[0x12, 0, 0, 0, 36, 0], &[]).0,
        Completion::GOOD,
        "INQUIRY never conflicts"
    );
    assert_eq!(run(&t, &a, 0, &read10(0, 1), &[]).0, Completion::GOOD);
    assert_eq!(run(&t, &a, 0, &release, &[]).0, Completion::GOOD);
    assert_eq!(run(&t, &b, 0, &reserve, &[]).0, Completion::GOOD);
    // The holder's nexus loss and LU reset both drop the reservation.
    t.nexus_lost(0, &b, &mut common::Collect::default());
    assert_eq!(run(&t, &a, 0, &reserve, &[]).0, Completion::GOOD);
    t.task_management(
        0,
        &b,
        0,
        TaskManagement::LogicalUnitReset,
        &mut common::Collect::default(),
    );
    let c = ready(&t, 3);
    assert_eq!(run(&t, &c, 0, &reserve, &[]).0, Completion::GOOD);
}

#[test]
fn read_defect_data_reports_empty_lists() {
    let t = target();
    let n = ready(&t, 1);
    // (10): REQ_PLIST + REQ_GLIST, format 101b (physical sector); 4-byte header, length 0.
    let (c, data) = run(&t, &n, 0, &[0x37, 0, 0x1D, 0, 0, 0, 0, 0, 32, 0], &[]);
    assert_eq!((c.status, data), (Status::Good, vec![0, 0x1D, 0, 0]));
    // (12): only the GLIST; 8-byte header, truncated to the allocation length.
    let (c, data) = run(&t, &n, 0, &[0xB7, 0x0B, 0, 0, 0, 0, 0, 0, 0, 6, 0, 0], &[]);
    assert_eq!((c.status, data), (Status::Good, vec![0, 0x0B, 0, 0, 0, 0]));
    // Reserved bits are refused with the field pointer (byte 2 bit 5).
    let (c, _) = run(&t, &n, 0, &[0x37, 0, 0x20, 0, 0, 0, 0, 0, 32, 0], &[]);
    assert_eq!(c.sense, Some(Sense::invalid_field_in_cdb(2, Some(5))));
}

use scsi::encode::unmap_parameter_list as unmap_list;

fn unmap_cdb(len: usize) -> [u8; 10] {
    let mut c = [0x42, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    c[7..9].copy_from_slice(&(len as u16).to_be_bytes());
    c
}

fn get_lba_status(lba: u64, alloc: u32) -> [u8; 16] {
    let mut c = [0u8; 16];
    c[0] = 0x9E;
    c[1] = 0x12;
    c[2..10].copy_from_slice(&lba.to_be_bytes());
    c[10..14].copy_from_slice(&alloc.to_be_bytes());
    c
}

/// (LBA, blocks, provisioning status) of each GET LBA STATUS descriptor.
fn lba_status(data: &[u8]) -> Vec<(u64, u32, u8)> {
    data[8..]
        .chunks(16)
        .map(|d| {
            (
                u64::from_be_bytes(d[0..8].try_into().unwrap()),
                u32::from_be_bytes(d[8..12].try_into().unwrap()),
                d[12] & 0x0F,
            )
        })
        .collect()
}

/// Thin provisioning (SBC-4 §4.7) on a RAM LU of 8 MiB (1 MiB chunks = 2048 blocks):
/// READ CAPACITY (16) and the VPD pages say so, UNMAP and WRITE SAME with UNMAP deallocate
/// whole chunks and zero the rest, GET LBA STATUS reports it, bad lists are refused before
/// anything changes; a fully provisioned LU refuses UNMAP and does not report it.
#[test]
fn thin_provisioning_deallocates_and_reports_it() {
    const N: u64 = 16384;
    let t = Target::new(vec![(0, ram_lu(LuConfig::new("iqn.test:t", 0, N * 512)))]);
    let n = ready(&t, 1);
    let (_, rc16) = run(
        &t,
        &n,
        0,
        &[0x9E, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0],
        &[],
    );
    assert_eq!(rc16[14] & 0xC0, 0xC0, "LBPME and LBPRZ");
    let (_, lbp) = run(&t, &n, 0, &[0x12, 1, 0xB2, 0, 255, 0], &[]);
    assert_eq!(
        (lbp[5], lbp[6] & 7),
        (0xE4, 0b010),
        "LBPU LBPWS LBPWS10 LBPRZ, thin"
    );
    let (_, bl) = run(&t, &n, 0, &[0x12, 1, 0xB0, 0, 255, 0], &[]);
    let be32 = |at: usize| u32::from_be_bytes(bl[at..at + 4].try_into().unwrap());
    assert_eq!((be32(20), be32(24), be32(28)), (u32::MAX, 256, 2048));
    assert_eq!(bl[32] & 0x80, 0x80, "UGAVALID");

    // Write everything, then unmap 1.5 chunks from chunk 1.
    assert_eq!(
        run(
            &t,
            &n,
            0,
            &write16(0, N as u32, false),
            &vec![0xAB; (N * 512) as usize]
        )
        .0,
        Completion::GOOD
    );
    let (_, st) = run(&t, &n, 0, &get_lba_status(0, 1024), &[]);
    assert_eq!(lba_status(&st), [(0, N as u32, 0)]);
    let list = unmap_list(&[(2048, 3072), (100, 0)]);
    assert_eq!(
        t.transfer(&nexus(1), 0, &unmap_cdb(list.len())),
        Ok(Transfer::Out(list.len() as u32))
    );
    assert_eq!(
        run(&t, &n, 0, &unmap_cdb(list.len()), &list).0,
        Completion::GOOD
    );
    let (_, back) = run(&t, &n, 0, &read10(2047, 3074), &[]);
    assert!(back[..512].iter().all(|&b| b == 0xAB));
    assert!(back[512..512 * 3073].iter().all(|&b| b == 0));
    assert!(back[512 * 3073..].iter().all(|&b| b == 0xAB));
    let (_, st) = run(&t, &n, 0, &get_lba_status(0, 1024), &[]);
    assert_eq!(
        lba_status(&st),
        [(0, 2048, 0), (2048, 2048, 1), (4096, (N - 4096) as u32, 0)]
    );
    // The allocation length bounds the descriptors gathered (and the PARAMETER DATA LENGTH).
    let (_, st) = run(&t, &n, 0, &get_lba_status(100, 24), &[]);
    assert_eq!(lba_status(&st), [(100, 1948, 0)]);
    assert_eq!(u32::from_be_bytes(st[0..4].try_into().unwrap()), 4 + 16);
    assert_eq!(
        sense_of(&run(&t, &n, 0, &get_lba_status(N, 24), &[]).0).1,
        Asc::LBA_OUT_OF_RANGE
    );

    // WRITE SAME(16) with UNMAP deallocates, whatever its block holds.
    let mut ws16 = [0u8; 16];
    ws16[0] = 0x93;
    ws16[1] = 0x08;
    ws16[2..10].copy_from_slice(&8192u64.to_be_bytes());
    ws16[10..14].copy_from_slice(&4096u32.to_be_bytes());
    assert_eq!(run(&t, &n, 0, &ws16, &[0; 512]).0, Completion::GOOD);
    let (_, st) = run(&t, &n, 0, &get_lba_status(8192, 24), &[]);
    assert_eq!(lba_status(&st), [(8192, 4096, 1)]);
    assert_eq!(
        run(&t, &n, 0, &write16(8192, 1, false), &[7; 512]).0,
        Completion::GOOD
    );
    assert_eq!(run(&t, &n, 0, &ws16, &[7; 512]).0, Completion::GOOD);
    let (_, back) = run(&t, &n, 0, &read10(8192, 1), &[]);
    assert!(back.iter().all(|&b| b == 0));

    // NDOB: no Data-Out buffer; the blocks are written with zeros (or deallocated with UNMAP).
    assert_eq!(
        run(&t, &n, 0, &write16(100, 1, false), &[7; 512]).0,
        Completion::GOOD
    );
    let mut ndob = [0u8; 16];
    ndob[0] = 0x93;
    ndob[1] = 0x01;
    ndob[2..10].copy_from_slice(&100u64.to_be_bytes());
    ndob[10..14].copy_from_slice(&1u32.to_be_bytes());
    assert_eq!(t.transfer(&nexus(1), 0, &ndob), Ok(Transfer::Out(0)));
    assert_eq!(run(&t, &n, 0, &ndob, &[]).0, Completion::GOOD);
    let (_, back) = run(&t, &n, 0, &read10(100, 1), &[]);
    assert!(back.iter().all(|&b| b == 0));
    let (_, st) = run(&t, &n, 0, &get_lba_status(100, 24), &[]);
    assert_eq!(lba_status(&st)[0].2, 0, "written, not deallocated");

    // Refused before anything changes: a range past the end, too many descriptors, a short
    // list; a PARAMETER LIST LENGTH of 0 does nothing.
    let bad = unmap_list(&[(0, 2048), (N - 1, 2)]);
    assert_eq!(
        sense_of(&run(&t, &n, 0, &unmap_cdb(bad.len()), &bad).0).1,
        Asc::LBA_OUT_OF_RANGE
    );
    let many = unmap_list(&vec![(0, 1); 257]);
    assert_eq!(
        run(&t, &n, 0, &unmap_cdb(many.len()), &many).0.sense,
        Some(Sense::invalid_field_in_parameter_list(2, None))
    );
    assert_eq!(
        sense_of(&run(&t, &n, 0, &unmap_cdb(4), &[0; 4]).0).1,
        Asc::PARAMETER_LIST_LENGTH_ERROR
    );
    assert_eq!(run(&t, &n, 0, &unmap_cdb(0), &[]).0, Completion::GOOD);
    let (_, back) = run(&t, &n, 0, &read10(0, 1), &[]);
    assert!(back.iter().all(|&b| b == 0xAB), "nothing was unmapped");

    // A fully provisioned LU: UNMAP is not a command it has, GET LBA STATUS says mapped.
    let full = Target::new(vec![(
        0,
        ram_lu(LuConfig {
            thin_provisioning: false,
            ..LuConfig::new("iqn.test:t", 0, N * 512)
        }),
    )]);
    let fnx = ready(&full, 1);
    let list = unmap_list(&[(0, 1)]);
    assert_eq!(
        full.transfer(&fnx, 0, &unmap_cdb(list.len())),
        Err(Sense::invalid_command_operation_code())
    );
    assert_eq!(
        sense_of(&run(&full, &fnx, 0, &unmap_cdb(list.len()), &list).0).1,
        Asc::INVALID_COMMAND_OPERATION_CODE
    );
    let (_, rc16) = run(
        &full,
        &fnx,
        0,
        &[0x9E, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0],
        &[],
    );
    assert_eq!(rc16[14] & 0xC0, 0);
    let (_, st) = run(&full, &fnx, 0, &get_lba_status(0, 24), &[]);
    assert_eq!(lba_status(&st), [(0, N as u32, 0)]);
}
