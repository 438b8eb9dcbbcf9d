//! Logical units added to and removed from a target while it serves: REPORT LUNS follows,
//! the other units' nexuses get REPORTED LUNS DATA HAS CHANGED (SPC-5 §6.33), a removed
//! unit's LUN answers LOGICAL UNIT NOT SUPPORTED while its last tasks finish.

mod common;

use common::{nexus_of, ram_lu, read16, ready_as, run_on, sense_of};
use device::{Completion, LuConfig, Target};
use scsi::{Asc, SenseKey};

const REPORT_LUNS: [u8; 12] = [0xA0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0];
const TEST_UNIT_READY: [u8; 6] = [0; 6];

fn lu(lun: u64) -> std::sync::Arc<device::Unit> {
    ram_lu(LuConfig::new(
        "iqn.2026-11.dev.stint:inventory",
        lun,
        1 << 20,
    ))
}

/// The LUNs REPORT LUNS lists (SPC-5 §6.33: 8-byte entries after an 8-byte header).
fn reported(t: &Target, n: &device::Nexus) -> Vec<u64> {
    let (c, data) = run_on(t, n, 0, &REPORT_LUNS, &[]);
    assert_eq!(c, Completion::GOOD);
    data[8..]
        .chunks(8)
        .map(|e| u64::from(u16::from_be_bytes([e[0] & 0x3F, e[1]])))
        .collect()
}

#[test]
fn an_added_unit_is_reported_and_announced() {
    let t = Target::new(vec![(0, lu(0))]);
    let n = ready_as(&t, nexus_of(1, "iqn.2026-11.dev.stint:host,i,0x1", false));
    assert_eq!(reported(&t, &n), [0]);
    t.insert(1, lu(1), vec![]).expect("a new LUN");
    let (c, _) = run_on(&t, &n, 0, &TEST_UNIT_READY, &[]);
    assert_eq!(
        sense_of(&c),
        (SenseKey::UnitAttention, Asc::REPORTED_LUNS_DATA_HAS_CHANGED)
    );
    assert_eq!(reported(&t, &n), [0, 1]);
    // The new unit starts with its own power-on unit attention, then serves.
    let (c, _) = run_on(&t, &n, 1, &TEST_UNIT_READY, &[]);
    assert_eq!(sense_of(&c).0, SenseKey::UnitAttention);
    assert_eq!(run_on(&t, &n, 1, &read16(0, 1), &[]).0, Completion::GOOD);
    let taken = t.insert(1, lu(1), vec![]).expect_err("LUN 1 is taken");
    assert!(taken.contains("LUN 1 exists"), "{taken}");
}

#[test]
fn a_removed_unit_is_gone_at_once_and_forgotten_when_idle() {
    let t = Target::new(vec![(0, lu(0)), (1, lu(1))]);
    let n = nexus_of(1, "iqn.2026-11.dev.stint:host,i,0x1", false);
    for lun in [0, 1] {
        let _ua = run_on(&t, &n, lun, &TEST_UNIT_READY, &[]);
    }
    let unit = t.remove(1).expect("LUN 1 is there");
    assert!(t.remove(1).is_none(), "removed once");
    let (c, _) = run_on(&t, &n, 1, &read16(0, 1), &[]);
    assert_eq!(
        sense_of(&c),
        (SenseKey::IllegalRequest, Asc::LOGICAL_UNIT_NOT_SUPPORTED)
    );
    let (c, _) = run_on(&t, &n, 0, &TEST_UNIT_READY, &[]);
    assert_eq!(
        sense_of(&c),
        (SenseKey::UnitAttention, Asc::REPORTED_LUNS_DATA_HAS_CHANGED)
    );
    assert_eq!(reported(&t, &n), [0]);
    assert!(t.leaving_idle(1), "no task was left on it");
    assert_eq!(t.leaving().len(), 1, "a stopping server still flushes it");
    let refused = t.insert(1, lu(1), vec![]).expect_err("still leaving");
    assert!(refused.contains("still finishing"), "{refused}");
    t.forget(1);
    assert!(t.leaving().is_empty());
    assert_eq!(std::sync::Arc::strong_count(&unit), 1, "the target let go");
    t.insert(1, lu(1), vec![]).expect("the LUN is free again");
}

#[test]
fn a_changed_mask_hides_a_unit() {
    let t = Target::new(vec![(0, lu(0)), (1, lu(1))]);
    let n = nexus_of(1, "iqn.2026-11.dev.stint:host,i,0x1", false);
    let _ua = run_on(&t, &n, 0, &TEST_UNIT_READY, &[]);
    assert_eq!(reported(&t, &n), [0, 1]);
    t.set_mask(1, vec!["iqn.2026-11.dev.stint:other".into()]);
    let (c, _) = run_on(&t, &n, 0, &TEST_UNIT_READY, &[]);
    assert_eq!(
        sense_of(&c),
        (SenseKey::UnitAttention, Asc::REPORTED_LUNS_DATA_HAS_CHANGED)
    );
    assert_eq!(reported(&t, &n), [0]);
    t.set_mask(1, vec![]);
    assert_eq!(reported(&t, &n), [0, 1]);
}
