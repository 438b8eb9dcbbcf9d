//! EXTENDED COPY and RECEIVE COPY RESULTS through the target, within a LUN, across LUNs of one
//! target and across targets sharing a copy manager, with the data read back.

mod common;

use common::{Request, TargetExt};

use common::{nexus, read16, run_on as run, sense_of, write16};
use device::{Completion, CopyManager, LuConfig, Nexus, Target, Unit};
use scsi::{Asc, SenseKey};
use std::sync::Arc;

const BLOCKS: u64 = 8192;

fn lu(target: &str, lun: u64, block_size: u32, read_only: bool) -> Arc<Unit> {
    let mut config = LuConfig::new(target, lun, BLOCKS * u64::from(block_size));
    config.block_size = block_size;
    config.read_only = read_only;
    common::ram_lu(config)
}

/// A nexus past its power-on unit attention on every LUN of `t`.
fn attach(t: &Target, id: u64) -> Nexus {
    let n = nexus(id);
    for lun in t.luns() {
        good(t, &n, lun, &[0; 6], &[]);
    }
    n
}

/// Run, consuming the power-on unit attention of a new nexus first.
fn good(t: &Target, n: &Nexus, lun: u64, cdb: &[u8], data_out: &[u8]) -> Vec<u8> {
    let (c, d) = run(t, n, lun, cdb, data_out);
    if c.sense.as_ref().map(|s| s.key) == Some(SenseKey::UnitAttention) {
        return good(t, n, lun, cdb, data_out);
    }
    assert_eq!(c, Completion::GOOD, "{cdb:02x?}");
    d
}

/// The NAA designator of VPD 83h, as an initiator picks it for a CSCD descriptor.
fn naa(t: &Target, n: &Nexus, lun: u64) -> [u8; 16] {
    let page = good(t, n, lun, &[0x12, 0x01, 0x83, 0x01, 0x00, 0], &[]);
    assert_eq!(&page[4..8], &[0x01, 0x03, 0x00, 16]);
    page[8..24].try_into().unwrap()
}

fn cscd(naa: &[u8; 16], block_size: u32) -> [u8; 32] {
    let mut d = [0u8; 32];
    d[0] = 0xE4;
    d[4] = 0x01;
    d[5] = 0x03;
    d[7] = 16;
    d[8..24].copy_from_slice(naa);
    d[29..32].copy_from_slice(&block_size.to_be_bytes()[1..]);
    d
}

fn segment(src: u16, dst: u16, blocks: u16, src_lba: u64, dst_lba: u64) -> [u8; 28] {
    let mut d = [0u8; 28];
    d[0] = 0x02;
    d[3] = 0x18;
    d[4..6].copy_from_slice(&src.to_be_bytes());
    d[6..8].copy_from_slice(&dst.to_be_bytes());
    d[10..12].copy_from_slice(&blocks.to_be_bytes());
    d[12..20].copy_from_slice(&src_lba.to_be_bytes());
    d[20..28].copy_from_slice(&dst_lba.to_be_bytes());
    d
}

/// An EXTENDED COPY (LID1) parameter list with LIST ID USAGE 00b.
fn lid1(list: u8, cscds: &[[u8; 32]], segments: &[[u8; 28]]) -> Vec<u8> {
    let mut p = vec![0u8; 16];
    p[0] = list;
    p[2..4].copy_from_slice(&((cscds.len() * 32) as u16).to_be_bytes());
    p[8..12].copy_from_slice(&((segments.len() * 28) as u32).to_be_bytes());
    cscds.iter().for_each(|c| p.extend_from_slice(c));
    segments.iter().for_each(|s| p.extend_from_slice(s));
    p
}

/// The same list in the LID4 format (48-byte header, 32-bit list identifier).
fn lid4(list: u32, cscds: &[[u8; 32]], segments: &[[u8; 28]]) -> Vec<u8> {
    let one = lid1(0, cscds, segments);
    let mut p = vec![0u8; 48];
    p[0] = 0x01;
    p[20..24].copy_from_slice(&list.to_be_bytes());
    p[42..44].copy_from_slice(&((cscds.len() * 32) as u16).to_be_bytes());
    p[44..46].copy_from_slice(&((segments.len() * 28) as u16).to_be_bytes());
    p.extend_from_slice(&one[16..]);
    p
}

fn xcopy_cdb(service_action: u8, len: usize) -> [u8; 16] {
    let mut c = [0u8; 16];
    c[0] = 0x83;
    c[1] = service_action;
    c[10..14].copy_from_slice(&(len as u32).to_be_bytes());
    c
}

fn receive_cdb(service_action: u8, list: u32) -> [u8; 16] {
    let mut c = [0u8; 16];
    c[0] = 0x84;
    c[1] = service_action;
    if service_action == 0x05 {
        c[2..6].copy_from_slice(&list.to_be_bytes());
    } else {
        c[2] = list as u8;
    }
    c[10..14].copy_from_slice(&1024u32.to_be_bytes());
    c
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

#[test]
fn a_copy_crosses_luns_and_its_status_is_held_once() {
    let t = Target::new(vec![
        (0, lu("iqn.test:a", 0, 512, false)),
        (1, lu("iqn.test:a", 1, 512, false)),
    ]);
    let n = attach(&t, 1);
    // 3 MiB, so the copy takes several chunks.
    let blocks = 6144u32;
    let data = pattern(blocks as usize * 512, 7);
    good(&t, &n, 0, &write16(10, blocks), &data);
    let (a, b) = (naa(&t, &n, 0), naa(&t, &n, 1));
    assert_ne!(a, b);
    let p = lid1(
        5,
        &[cscd(&a, 512), cscd(&b, 512)],
        &[segment(0, 1, blocks as u16, 10, 100)],
    );
    good(&t, &n, 0, &xcopy_cdb(0x00, p.len()), &p);
    assert_eq!(good(&t, &n, 1, &read16(100, blocks), &[]), data);
    // COPY STATUS: completed, one segment, the blocks moved; then the list identifier is
    // free again.
    let status = good(&t, &n, 0, &receive_cdb(0x00, 5), &[]);
    assert_eq!(status[4], 0x01);
    assert_eq!(u16::from_be_bytes([status[5], status[6]]), 1);
    assert_eq!(status[7], 0xF1);
    assert_eq!(
        u32::from_be_bytes(status[8..12].try_into().unwrap()),
        blocks
    );
    let (c, _) = run(&t, &n, 0, &receive_cdb(0x00, 5), &[]);
    assert_eq!(
        sense_of(&c),
        (SenseKey::IllegalRequest, Asc::INVALID_FIELD_IN_CDB)
    );
    // Another nexus never sees this nexus's lists.
    let other = attach(&t, 2);
    good(&t, &other, 0, &xcopy_cdb(0x00, p.len()), &p);
    let (c, _) = run(&t, &n, 0, &receive_cdb(0x00, 5), &[]);
    assert_eq!(
        sense_of(&c),
        (SenseKey::IllegalRequest, Asc::INVALID_FIELD_IN_CDB)
    );
}

#[test]
fn lid4_copies_within_one_lun_with_overlap_and_reports_lid4_status() {
    let t = Target::new(vec![(0, lu("iqn.test:b", 0, 4096, false))]);
    let n = attach(&t, 1);
    let data = pattern(400 * 4096, 3);
    good(&t, &n, 0, &write16(0, 400), &data);
    let a = naa(&t, &n, 0);
    // Destination overlaps the source's tail: the result is as if the source were read first.
    let p = lid4(
        0x0102_0304,
        &[cscd(&a, 4096)],
        &[segment(0, 0, 300, 0, 100)],
    );
    good(&t, &n, 0, &xcopy_cdb(0x01, p.len()), &p);
    assert_eq!(good(&t, &n, 0, &read16(100, 300), &[]), data[..300 * 4096]);
    assert_eq!(good(&t, &n, 0, &read16(0, 100), &[]), data[..100 * 4096]);
    let status = good(&t, &n, 0, &receive_cdb(0x05, 0x0102_0304), &[]);
    assert_eq!((status[4], status[5], status[12]), (0x01, 0x01, 0x00));
    assert_eq!(u64::from_be_bytes(status[16..24].try_into().unwrap()), 300);
}

#[test]
fn a_copy_across_targets_needs_a_shared_copy_manager() {
    let (x, y) = (
        lu("iqn.test:x", 0, 512, false),
        lu("iqn.test:y", 0, 512, false),
    );
    let manager = Arc::new(CopyManager::default());
    assert!(x.attach(manager.clone()) && y.attach(manager.clone()));
    assert!(!x.attach(manager), "a unit belongs to one copy manager");
    let tx = Target::new(vec![(0, x)]);
    let ty = Target::new(vec![(0, y)]);
    let n = attach(&tx, 1);
    good(&ty, &n, 0, &[0; 6], &[]);
    let data = pattern(64 * 512, 9);
    good(&tx, &n, 0, &write16(0, 64), &data);
    let p = lid1(
        1,
        &[cscd(&naa(&tx, &n, 0), 512), cscd(&naa(&ty, &n, 0), 512)],
        &[segment(0, 1, 64, 0, 8)],
    );
    good(&tx, &n, 0, &xcopy_cdb(0x00, p.len()), &p);
    assert_eq!(good(&ty, &n, 0, &read16(8, 64), &[]), data);

    // Two targets built alone do not reach each other: UNREACHABLE COPY TARGET, and the
    // failure details hold the sense.
    let lone = Target::new(vec![(0, lu("iqn.test:z", 0, 512, false))]);
    good(&lone, &n, 0, &[0; 6], &[]);
    let q = lid1(
        2,
        &[cscd(&naa(&lone, &n, 0), 512), cscd(&naa(&ty, &n, 0), 512)],
        &[segment(0, 1, 8, 0, 0)],
    );
    let (c, _) = run(&lone, &n, 0, &xcopy_cdb(0x00, q.len()), &q);
    assert_eq!(sense_of(&c), (SenseKey::CopyAborted, Asc(0x08, 0x04)));
    let details = good(&lone, &n, 0, &receive_cdb(0x04, 2), &[]);
    assert_eq!(details[56], 0x02);
    assert_eq!((details[60 + 2] & 0x0F, details[60 + 12]), (0x0A, 0x08));
}

#[test]
fn segment_errors_abort_the_copy_with_precise_sense() {
    let t = Target::new(vec![
        (0, lu("iqn.test:c", 0, 512, false)),
        (1, lu("iqn.test:c", 1, 512, true)),
        (2, lu("iqn.test:c", 2, 4096, false)),
    ]);
    let n = attach(&t, 1);
    let (a, ro, big) = (naa(&t, &n, 0), naa(&t, &n, 1), naa(&t, &n, 2));
    let xcopy = |cscds: &[[u8; 32]], seg: [u8; 28]| {
        let p = lid1(1, cscds, &[seg]);
        let (c, _) = run(&t, &n, 0, &xcopy_cdb(0x00, p.len()), &p);
        c
    };
    // Beyond the destination's capacity.
    let c = xcopy(&[cscd(&a, 512)], segment(0, 0, 16, 0, BLOCKS - 8));
    assert_eq!(
        sense_of(&c),
        (SenseKey::CopyAborted, Asc::NO_ADDITIONAL_SENSE)
    );
    let field = c.sense.unwrap().field.unwrap();
    assert_eq!((field.in_cdb, field.byte), (false, 48), "segment pointer");
    // A CSCD index beyond the list.
    let c = xcopy(&[cscd(&a, 512)], segment(0, 1, 16, 0, 0));
    assert_eq!(sense_of(&c), (SenseKey::CopyAborted, Asc(0x08, 0x04)));
    // DISK BLOCK LENGTH that is not the unit's.
    let c = xcopy(&[cscd(&a, 4096)], segment(0, 0, 1, 0, 1));
    assert_eq!(sense_of(&c), (SenseKey::CopyAborted, Asc(0x0D, 0x03)));
    // A read-only destination.
    let c = xcopy(&[cscd(&a, 512), cscd(&ro, 512)], segment(0, 1, 1, 0, 0));
    assert_eq!(sense_of(&c), (SenseKey::DataProtect, Asc::WRITE_PROTECTED));
    // 3 source blocks of 512 bytes are not whole 4096-byte destination blocks; 8 are.
    let c = xcopy(&[cscd(&a, 512), cscd(&big, 4096)], segment(0, 1, 3, 0, 0));
    assert_eq!(sense_of(&c), (SenseKey::CopyAborted, Asc(0x26, 0x0A)));
    let data = pattern(8 * 512, 1);
    good(&t, &n, 0, &write16(0, 8), &data);
    assert_eq!(
        xcopy(&[cscd(&a, 512), cscd(&big, 4096)], segment(0, 1, 8, 0, 5)),
        Completion::GOOD
    );
    assert_eq!(good(&t, &n, 2, &read16(5, 1), &[]), data);
}

#[test]
fn another_units_reservation_stops_the_copy() {
    let t = Target::new(vec![
        (0, lu("iqn.test:d", 0, 512, false)),
        (1, lu("iqn.test:d", 1, 512, false)),
    ]);
    let (n, holder) = (attach(&t, 1), attach(&t, 2));
    let (a, b) = (naa(&t, &n, 0), naa(&t, &n, 1));
    good(&t, &holder, 1, &[0x16, 0, 0, 0, 0, 0], &[]); // RESERVE(6) of LUN 1
    let p = lid1(
        1,
        &[cscd(&a, 512), cscd(&b, 512)],
        &[segment(0, 1, 1, 0, 0)],
    );
    let (c, _) = run(&t, &n, 0, &xcopy_cdb(0x00, p.len()), &p);
    assert_eq!(sense_of(&c), (SenseKey::CopyAborted, Asc(0x0D, 0x02)));
    // The holder itself may copy into it.
    good(&t, &holder, 0, &xcopy_cdb(0x00, p.len()), &p);
}

#[test]
fn parameter_list_and_cdb_errors() {
    let t = Target::new(vec![(0, lu("iqn.test:e", 0, 512, false))]);
    let n = attach(&t, 1);
    let a = naa(&t, &n, 0);
    let p = lid1(1, &[cscd(&a, 512)], &[segment(0, 0, 1, 0, 1)]);
    // No parameter list: nothing to do.
    good(&t, &n, 0, &xcopy_cdb(0x00, 0), &[]);
    // A list shorter than its header says.
    let (c, _) = run(&t, &n, 0, &xcopy_cdb(0x00, p.len() - 1), &p[..p.len() - 1]);
    assert_eq!(
        sense_of(&c),
        (SenseKey::IllegalRequest, Asc::PARAMETER_LIST_LENGTH_ERROR)
    );
    // A reserved CDB bit.
    let mut cdb = xcopy_cdb(0x00, p.len());
    cdb[2] = 1;
    let (c, _) = run(&t, &n, 0, &cdb, &p);
    assert_eq!(
        sense_of(&c),
        (SenseKey::IllegalRequest, Asc::INVALID_FIELD_IN_CDB)
    );
    // OPERATING PARAMETERS: the limits the parser enforces, and the descriptor codes.
    let op = good(&t, &n, 0, &receive_cdb(0x03, 0), &[]);
    assert_eq!(u16::from_be_bytes([op[8], op[9]]), 64);
    assert_eq!(&op[44..46], &[0x02, 0xE4]);
    // 3PC in standard INQUIRY and VPD page 8Fh among the supported pages.
    let inq = good(&t, &n, 0, &[0x12, 0, 0, 0, 96, 0], &[]);
    assert_eq!(inq[5] & 0x08, 0x08);
    let pages = good(&t, &n, 0, &[0x12, 1, 0, 0, 255, 0], &[]);
    assert!(pages[4..].contains(&0x8F));
    let vpd = good(&t, &n, 0, &[0x12, 1, 0x8F, 0x01, 0, 0], &[]);
    assert_eq!(vpd[1], 0x8F);
}

fn token_cdb(service_action: u8, list: u32, len: usize) -> [u8; 16] {
    let mut c = [0u8; 16];
    c[0] = 0x83;
    c[1] = service_action;
    c[6..10].copy_from_slice(&list.to_be_bytes());
    c[10..14].copy_from_slice(&(len as u32).to_be_bytes());
    c
}

fn with_length(mut p: Vec<u8>) -> Vec<u8> {
    let len = (p.len() - 2) as u16;
    p[0..2].copy_from_slice(&len.to_be_bytes());
    p
}

fn range_descriptors(p: &mut Vec<u8>, ranges: &[(u64, u32)]) {
    for &(lba, blocks) in ranges {
        p.extend_from_slice(&lba.to_be_bytes());
        p.extend_from_slice(&blocks.to_be_bytes());
        p.extend_from_slice(&[0; 4]);
    }
}

/// POPULATE TOKEN of `ranges` with an inactivity timeout, then RECEIVE ROD TOKEN
/// INFORMATION for the token.
fn populate(t: &Target, n: &Nexus, lun: u64, timeout: u32, ranges: &[(u64, u32)]) -> Vec<u8> {
    let mut p = vec![0u8; 16];
    p[4..8].copy_from_slice(&timeout.to_be_bytes());
    p[14..16].copy_from_slice(&((ranges.len() * 16) as u16).to_be_bytes());
    range_descriptors(&mut p, ranges);
    let p = with_length(p);
    good(t, n, lun, &token_cdb(0x10, 77, p.len()), &p);
    let info = good(t, n, lun, &receive_cdb_lid4(0x07, 77), &[]);
    // The LID4 status (32 bytes, no sense), ROD TOKEN DESCRIPTORS LENGTH, 2 reserved bytes.
    assert_eq!((info[4], info[5]), (0x10, 0x01));
    assert_eq!(u32::from_be_bytes(info[32..36].try_into().unwrap()), 514);
    info[38..38 + 512].to_vec()
}

fn receive_cdb_lid4(service_action: u8, list: u32) -> [u8; 16] {
    let mut c = receive_cdb(0x05, list);
    c[1] = service_action;
    c[10..14].copy_from_slice(&4096u32.to_be_bytes());
    c
}

fn write_using(token: &[u8], delete: bool, offset: u64, ranges: &[(u64, u32)]) -> Vec<u8> {
    let mut p = vec![0u8; 536];
    p[2] = if delete { 0x02 } else { 0 };
    p[8..16].copy_from_slice(&offset.to_be_bytes());
    p[16..528].copy_from_slice(token);
    p[534..536].copy_from_slice(&((ranges.len() * 16) as u16).to_be_bytes());
    range_descriptors(&mut p, ranges);
    with_length(p)
}

fn wut(t: &Target, n: &Nexus, lun: u64, p: &[u8]) -> Completion {
    run(t, n, lun, &token_cdb(0x11, 78, p.len()), p).0
}

#[test]
fn a_token_copies_ranges_across_luns_until_a_write_revokes_it() {
    let t = Target::new(vec![
        (0, lu("iqn.test:f", 0, 512, false)),
        (1, lu("iqn.test:f", 1, 512, false)),
    ]);
    let n = attach(&t, 1);
    let data = pattern(3000 * 512, 5);
    good(&t, &n, 0, &write16(0, 3000), &data);
    // Two source ranges (1000 + 2000 blocks) fill one destination range of 2500 blocks,
    // skipping the first 500 blocks of the token's data.
    let token = populate(&t, &n, 0, 0, &[(0, 1000), (1000, 2000)]);
    assert_eq!(
        wut(&t, &n, 1, &write_using(&token, false, 500, &[(10, 2500)])),
        Completion::GOOD
    );
    assert_eq!(good(&t, &n, 1, &read16(10, 2500), &[]), data[500 * 512..]);
    let status = good(&t, &n, 1, &receive_cdb_lid4(0x05, 78), &[]);
    assert_eq!((status[4], status[5]), (0x11, 0x01));
    assert_eq!(u64::from_be_bytes(status[16..24].try_into().unwrap()), 2500);
    // A write outside the token's ranges leaves it valid; one inside revokes it.
    good(&t, &n, 0, &write16(5000, 1), &data[..512]);
    assert_eq!(
        wut(&t, &n, 1, &write_using(&token, false, 0, &[(0, 1)])),
        Completion::GOOD
    );
    good(&t, &n, 0, &write16(2999, 1), &data[..512]);
    let c = wut(&t, &n, 1, &write_using(&token, false, 0, &[(0, 1)]));
    assert_eq!(sense_of(&c), (SenseKey::IllegalRequest, Asc(0x23, 0x06)));
}

#[test]
fn unknown_deleted_corrupt_and_foreign_tokens_are_refused() {
    let t = Target::new(vec![(0, lu("iqn.test:g", 0, 512, false))]);
    let n = attach(&t, 1);
    let token = populate(&t, &n, 0, 0, &[(0, 8)]);
    // DEL_TKN: used once, then unknown.
    assert_eq!(
        wut(&t, &n, 0, &write_using(&token, true, 0, &[(100, 8)])),
        Completion::GOOD
    );
    let c = wut(&t, &n, 0, &write_using(&token, false, 0, &[(100, 8)]));
    assert_eq!(sense_of(&c), (SenseKey::IllegalRequest, Asc(0x23, 0x04)));
    // A token of our type that we never made.
    let mut forged = populate(&t, &n, 0, 0, &[(0, 8)]);
    forged[100] ^= 1;
    let c = wut(&t, &n, 0, &write_using(&forged, false, 0, &[(0, 8)]));
    assert_eq!(sense_of(&c), (SenseKey::IllegalRequest, Asc(0x23, 0x04)));
    // Not a ROD token at all.
    let c = wut(&t, &n, 0, &write_using(&[0x55; 512], false, 0, &[(0, 8)]));
    assert_eq!(sense_of(&c), (SenseKey::IllegalRequest, Asc(0x23, 0x05)));
    // A token another copy manager (another target built on its own) made.
    let other = Target::new(vec![(0, lu("iqn.test:h", 0, 512, false))]);
    good(&other, &n, 0, &[0; 6], &[]);
    let theirs = populate(&other, &n, 0, 0, &[(0, 8)]);
    let c = wut(&t, &n, 0, &write_using(&theirs, false, 0, &[(0, 8)]));
    assert_eq!(sense_of(&c), (SenseKey::IllegalRequest, Asc(0x23, 0x04)));
    // Ranges beyond the capacity, on either side.
    let mut p = vec![0u8; 16];
    p[14..16].copy_from_slice(&16u16.to_be_bytes());
    range_descriptors(&mut p, &[(BLOCKS - 1, 2)]);
    let p = with_length(p);
    let (c, _) = run(&t, &n, 0, &token_cdb(0x10, 1, p.len()), &p);
    assert_eq!(
        sense_of(&c),
        (SenseKey::IllegalRequest, Asc::LBA_OUT_OF_RANGE)
    );
    let c = wut(&t, &n, 0, &write_using(&token, false, 0, &[(BLOCKS, 1)]));
    assert_eq!(
        sense_of(&c),
        (SenseKey::IllegalRequest, Asc::LBA_OUT_OF_RANGE)
    );
}

#[test]
fn tokens_expire_after_their_inactivity_timeout() {
    // Token lifetimes run on the time commands bring.
    let t = Target::new(vec![(0, lu("iqn.test:i", 0, 512, false))]);
    let n = attach(&t, 1);
    let token = populate(&t, &n, 0, 2, &[(0, 8)]);
    // Used within 2 s of inactivity, again and again; then left alone for 3 s.
    for _ in 0..3 {
        common::set_now(common::now() + 1_500_000_000);
        assert_eq!(
            wut(&t, &n, 0, &write_using(&token, false, 0, &[(50, 8)])),
            Completion::GOOD
        );
    }
    common::set_now(common::now() + 3_000_000_000);
    let c = wut(&t, &n, 0, &write_using(&token, false, 0, &[(50, 8)]));
    assert_eq!(sense_of(&c), (SenseKey::IllegalRequest, Asc(0x23, 0x04)));
}

#[test]
fn the_zero_token_writes_zeros_and_protection_holds() {
    let t = Target::new(vec![
        (0, lu("iqn.test:j", 0, 4096, false)),
        (1, lu("iqn.test:j", 1, 4096, true)),
    ]);
    let n = attach(&t, 1);
    good(&t, &n, 0, &write16(4, 2), &pattern(2 * 4096, 1));
    let mut zero = [0u8; 512];
    zero[0..4].copy_from_slice(&0xFFFF_0001u32.to_be_bytes());
    zero[6..8].copy_from_slice(&0x01F8u16.to_be_bytes());
    assert_eq!(
        wut(&t, &n, 0, &write_using(&zero, false, 0, &[(4, 2)])),
        Completion::GOOD
    );
    assert_eq!(good(&t, &n, 0, &read16(4, 2), &[]), vec![0u8; 2 * 4096]);
    let c = wut(&t, &n, 1, &write_using(&zero, false, 0, &[(4, 2)]));
    assert_eq!(sense_of(&c), (SenseKey::DataProtect, Asc::WRITE_PROTECTED));
}

/// A 64 MiB LUN of 512-byte blocks, a nexus attached to it and its NAA: room for a copy long
/// enough to be stopped while it runs.
fn big_unit() -> (Arc<Target>, Nexus, [u8; 16]) {
    let mut config = LuConfig::new("iqn.test:k", 0, 64 << 20);
    config.block_size = 512;
    let t = Arc::new(Target::new(vec![(0, common::ram_lu(config))]));
    let n = attach(&t, 1);
    let a = naa(&t, &n, 0);
    (t, n, a)
}

/// Polls the copy's status with `receive` until `running` says it is under way.
fn wait_running(
    t: &Target,
    n: &Nexus,
    receive: &[u8],
    running: impl Fn(&[u8]) -> bool,
    copier: &std::thread::JoinHandle<impl Sized>,
) {
    let started = std::time::Instant::now();
    loop {
        // Tag 1: the copy's task has tag 0 (a second task with its tag would be an
        // overlapped command).
        let mut d = Vec::new();
        let req = Request {
            tag: 1,
            ..common::request(n, 0, receive, &[])
        };
        let c = t.execute(&req, &mut d);
        if c == Completion::GOOD && running(&d) {
            return;
        }
        assert!(
            !copier.is_finished(),
            "the copy ended before it was seen running"
        );
        assert!(started.elapsed().as_secs() < 10);
    }
}

/// A LOGICAL UNIT RESET from another thread stops a running copy between chunks: the
/// reset aborts its task (no status, TAS = 0) and its held status says aborted.
#[test]
fn a_reset_stops_a_running_copy_between_chunks() {
    let (t, n, a) = big_unit();
    // 64 segments of 16 MiB: 1 GiB to move, far longer than the reset takes to arrive.
    let segments = vec![segment(0, 0, 32768, 0, 32768); 64];
    let p = lid1(3, &[cscd(&a, 512)], &segments);
    let copier = {
        let (t, n, p) = (Arc::clone(&t), n.clone(), p.clone());
        std::thread::spawn(move || {
            let cdb = xcopy_cdb(0x00, p.len());
            t.try_execute(&common::request(&n, 0, &cdb, &p), &mut Vec::new())
        })
    };
    // Wait until the copy runs (its status says in progress), then reset the unit.
    wait_running(&t, &n, &receive_cdb(0x00, 3), |d| d[4] == 0x00, &copier);
    let reset = t.task_management(
        0,
        &n,
        0,
        device::TaskManagement::LogicalUnitReset,
        &mut common::Collect::default(),
    );
    assert_eq!(reset, device::TmfResponse::FunctionComplete);
    assert_eq!(copier.join().unwrap(), None, "aborted without status");
    // Past the reset's unit attention, the held status says: aborted, some segments done.
    let status = good(&t, &n, 0, &receive_cdb(0x05, 3), &[]);
    assert_eq!(status[5], 0x60);
    assert!(u16::from_be_bytes([status[24], status[25]]) < 64);
}

fn abort_cdb(list: u32) -> [u8; 16] {
    let mut c = [0u8; 16];
    c[0] = 0x83;
    c[1] = 0x1C;
    c[2..6].copy_from_slice(&list.to_be_bytes());
    c
}

/// COPY OPERATION ABORT from another thread stops a running LID4 copy between chunks, by
/// its list identifier: COPY ABORTED, and the held status says aborted.
#[test]
fn copy_operation_abort_stops_a_running_lid4_copy() {
    let (t, n, a) = big_unit();
    // An unknown list identifier is an invalid field.
    let (c, _) = run(&t, &n, 0, &abort_cdb(7), &[]);
    assert_eq!(c.sense.unwrap().field.unwrap().byte, 2);
    let segments = vec![segment(0, 0, 32768, 0, 32768); 64];
    let p = lid4(7, &[cscd(&a, 512)], &segments);
    let copier = {
        let (t, n, p) = (Arc::clone(&t), n.clone(), p.clone());
        std::thread::spawn(move || run(&t, &n, 0, &xcopy_cdb(0x01, p.len()), &p).0)
    };
    wait_running(&t, &n, &receive_cdb(0x05, 7), |d| d[5] == 0x11, &copier);
    // Another nexus cannot reach this nexus's list.
    let other = attach(&t, 2);
    assert!(run(&t, &other, 0, &abort_cdb(7), &[]).0.sense.is_some());
    let mut d = Vec::new();
    let abort = abort_cdb(7);
    let req = Request {
        tag: 1,
        ..common::request(&n, 0, &abort, &[])
    };
    assert_eq!(t.execute(&req, &mut d), Completion::GOOD);
    let c = copier.join().unwrap();
    assert_eq!(
        sense_of(&c),
        (SenseKey::CopyAborted, Asc::NO_ADDITIONAL_SENSE)
    );
    let status = good(&t, &n, 0, &receive_cdb(0x05, 7), &[]);
    assert_eq!(status[5], 0x60, "aborted");
    assert!(u16::from_be_bytes([status[24], status[25]]) < 64);
}

/// RECEIVE COPY DATA (LID1)/(LID4): block to block copies hold no data, so the header says
/// none, for a list the nexus holds; REPORT ALL ROD TOKENS: no management tokens.
#[test]
fn receive_copy_data_and_report_all_rod_tokens() {
    let t = Target::new(vec![(0, lu("iqn.test:t", 0, 512, false))]);
    let n = attach(&t, 1);
    let a = naa(&t, &n, 0);
    let seg = [segment(0, 0, 4, 0, 100)];
    let p = lid1(5, &[cscd(&a, 512)], &seg);
    good(&t, &n, 0, &xcopy_cdb(0x00, p.len()), &p);
    assert_eq!(good(&t, &n, 0, &receive_cdb(0x01, 5), &[]), [0, 0, 0, 0]);
    let (c, _) = run(&t, &n, 0, &receive_cdb(0x01, 6), &[]);
    assert_eq!(c.sense.unwrap().field.unwrap().byte, 2, "unknown list");
    let p = lid4(9, &[cscd(&a, 512)], &seg);
    good(&t, &n, 0, &xcopy_cdb(0x01, p.len()), &p);
    let data = good(&t, &n, 0, &receive_cdb_lid4(0x06, 9), &[]);
    assert_eq!(data.len(), 36, "copy status, then HELD DATA LENGTH");
    assert_eq!(u32::from_be_bytes(data[0..4].try_into().unwrap()), 32);
    assert_eq!(data[5], 0x01, "completed, good");
    assert_eq!(u64::from_be_bytes(data[16..24].try_into().unwrap()), 4);
    assert_eq!(&data[32..36], &[0; 4], "no held data");
    // The status is still there to be received once.
    let status = good(&t, &n, 0, &receive_cdb(0x05, 9), &[]);
    assert_eq!(status[5], 0x01);
    let mut cdb = [0u8; 16];
    cdb[0] = 0x84;
    cdb[1] = 0x08;
    cdb[10..14].copy_from_slice(&64u32.to_be_bytes());
    assert_eq!(good(&t, &n, 0, &cdb, &[]), [0, 0, 0, 4, 0, 0, 0, 0]);
    cdb[13] = 6;
    assert_eq!(good(&t, &n, 0, &cdb, &[]).len(), 6, "allocation length");
}
