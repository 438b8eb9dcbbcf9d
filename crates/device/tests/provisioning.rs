//! The Logical Block Provisioning log page of a thin-provisioned logical unit, counted from
//! its store.

mod common;

use common::{run, write16};
use device::{Completion, LuConfig, Nexus, Target};

/// 64 MiB of 512-byte blocks: 64 sets of 2^11 blocks, one RAM chunk each.
const SIZE: u64 = 64 << 20;

fn target(thin: bool) -> Target {
    let mut config = LuConfig::new("iqn.test:t", 0, SIZE);
    config.thin_provisioning = thin;
    common::ram_target(config)
}

fn nexus(t: &Target) -> Nexus {
    let n = common::nexus_of(1, "iqn.test:i,i,0x000000000001", true);
    run(t, &n, &[0; 6], &[]);
    n
}

/// LOG SENSE of page 0Ch, cumulative values: (available, used).
fn resources(t: &Target, n: &Nexus) -> (u32, u32) {
    let (c, page) = run(t, n, &[0x4D, 0, 0x40 | 0x0C, 0, 0, 0, 0, 0x01, 0, 0], &[]);
    assert_eq!(c, Completion::GOOD);
    assert_eq!(&page[..4], &[0x8C, 0, 0, 24]);
    let count = |at: usize| u32::from_be_bytes(page[at..at + 4].try_into().unwrap());
    assert_eq!((&page[4..6], &page[16..18]), (&[0, 1][..], &[0, 2][..]));
    (count(8), count(20))
}

#[test]
fn the_log_page_counts_what_the_store_holds() {
    let t = target(true);
    let n = nexus(&t);
    // VPD B2h: THRESHOLD EXPONENT 11, one 1 MiB RAM chunk per set.
    let (_, vpd) = run(&t, &n, &[0x12, 1, 0xB2, 0, 255, 0], &[]);
    assert_eq!(vpd[4], 11);
    assert_eq!(resources(&t, &n), (64, 0));
    // 3 MiB from LBA 2048 (the second chunk on): three sets.
    let data = vec![0x5A; 3 << 20];
    assert_eq!(run(&t, &n, &write16(2048, 6144), &data).0, Completion::GOOD);
    assert_eq!(resources(&t, &n), (61, 3));
    // UNMAP of the middle chunk frees one set.
    let list = scsi::encode::unmap_parameter_list(&[(4096, 2048)]);
    let mut unmap = [0x42, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    unmap[8] = list.len() as u8;
    assert_eq!(run(&t, &n, &unmap, &list).0, Completion::GOOD);
    assert_eq!(resources(&t, &n), (62, 2));
    // The supported pages list names it.
    let (_, list) = run(&t, &n, &[0x4D, 0, 0x40, 0, 0, 0, 0, 0, 255, 0], &[]);
    assert_eq!(&list[4..], &[0x00, 0x0C]);
}

#[test]
fn a_fully_provisioned_unit_has_no_provisioning_page() {
    let t = target(false);
    let n = nexus(&t);
    let (c, _) = run(&t, &n, &[0x4D, 0, 0x40 | 0x0C, 0, 0, 0, 0, 0x01, 0, 0], &[]);
    assert_eq!(c.sense, Some(scsi::Sense::invalid_field_in_cdb(2, Some(5))));
    let (_, vpd) = run(&t, &n, &[0x12, 1, 0xB2, 0, 255, 0], &[]);
    assert_eq!(vpd[4], 0, "no THRESHOLD EXPONENT");
}

/// MODE SELECT(10) of the Logical Block Provisioning page: SITUA and the used threshold.
fn select_thresholds(t: &Target, n: &Nexus, situa: bool, used: Option<u32>) -> Completion {
    let mut list = vec![0u8; 8];
    let mut page = [0u8; 32];
    page[..4].copy_from_slice(&[0x5C, 0x02, 0x00, 0x1C]);
    page[4] = u8::from(situa);
    page[16..18].copy_from_slice(&[0x00, 0x01]); // available, armed decreasing, disabled
    page[24] = if used.is_some() { 0x81 } else { 0x01 }; // used, armed increasing
    page[25] = 0x02;
    page[28..].copy_from_slice(&used.unwrap_or(0).to_be_bytes());
    list.extend_from_slice(&page);
    let cdb = [0x55, 0x10, 0, 0, 0, 0, 0, 0, list.len() as u8, 0];
    run(t, n, &cdb, &list).0
}

fn other_nexus(t: &Target) -> Nexus {
    let n = common::nexus_of(2, "iqn.test:other,i,0x000000000002", false);
    run(t, &n, &[0; 6], &[]);
    n
}

fn unit_attention(t: &Target, n: &Nexus) -> Option<scsi::Asc> {
    let (c, _) = run(t, n, &[0; 6], &[]);
    c.sense.map(|s| s.asc)
}

fn write_chunk(t: &Target, n: &Nexus, chunk: u64) {
    let data = vec![1u8; 1 << 20];
    assert_eq!(
        run(t, n, &write16(chunk * 2048, 2048), &data).0,
        Completion::GOOD
    );
}

#[test]
fn crossing_the_used_threshold_raises_the_soft_threshold_unit_attention() {
    let t = target(true);
    let (n, other) = (nexus(&t), other_nexus(&t));
    // MODE SENSE lists the page, changeable and current.
    let (_, all) = run(&t, &n, &[0x5A, 0x08, 0x3F, 0xFF, 0, 0, 0, 0x10, 0, 0], &[]);
    let tail = &all[all.len() - 32..];
    assert_eq!(&tail[..2], &[0x5C, 0x02]);
    assert_eq!(select_thresholds(&t, &n, false, Some(2)), Completion::GOOD);
    assert_eq!(
        unit_attention(&t, &other),
        Some(scsi::Asc::MODE_PARAMETERS_CHANGED)
    );
    write_chunk(&t, &n, 0);
    assert_eq!(unit_attention(&t, &n), None, "1 set used, below 2");
    write_chunk(&t, &n, 1);
    let reached = Some(scsi::Asc::THIN_PROVISIONING_SOFT_THRESHOLD_REACHED);
    assert_eq!(unit_attention(&t, &n), reached);
    assert_eq!(unit_attention(&t, &other), reached, "SITUA 0: every nexus");
    write_chunk(&t, &n, 2);
    assert_eq!(
        unit_attention(&t, &other),
        None,
        "already above: no second one"
    );
    // SITUA 1: only the nexus whose write crossed it.
    let t = target(true);
    let (n, other) = (nexus(&t), other_nexus(&t));
    assert_eq!(select_thresholds(&t, &n, true, Some(1)), Completion::GOOD);
    unit_attention(&t, &other);
    write_chunk(&t, &n, 5);
    assert_eq!(unit_attention(&t, &n), reached);
    assert_eq!(unit_attention(&t, &other), None);
}

#[test]
fn only_the_enabled_bits_counts_and_situa_are_changeable() {
    let t = target(true);
    let n = nexus(&t);
    let mut list = vec![0u8; 8];
    let mut page = [0u8; 32];
    page[..4].copy_from_slice(&[0x5C, 0x02, 0x00, 0x1C]);
    page[16..18].copy_from_slice(&[0x00, 0x02]); // THRESHOLD RESOURCE changed
    page[24..26].copy_from_slice(&[0x01, 0x02]);
    list.extend_from_slice(&page);
    let cdb = [0x55, 0x10, 0, 0, 0, 0, 0, 0, list.len() as u8, 0];
    assert_eq!(
        run(&t, &n, &cdb, &list).0.sense,
        Some(scsi::Sense::invalid_field_in_parameter_list(
            8 + 17,
            Some(1)
        ))
    );
    // A fully provisioned unit has no such page.
    let t = target(false);
    let n = nexus(&t);
    assert_eq!(
        select_thresholds(&t, &n, false, Some(1)).sense,
        Some(scsi::Sense::invalid_field_in_parameter_list(8, Some(5)))
    );
}
