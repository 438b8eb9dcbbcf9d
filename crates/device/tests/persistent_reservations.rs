//! Persistent reservations through the target's API, from two and three I_T nexuses: the
//! service actions end to end, the unit attentions they establish, RESERVE (6)/(10) beside
//! them, resets and nexus loss, and APTPL across a restart on a file LUN.

mod common;

use std::sync::Arc;

use common::TargetExt;

use common::pr::{keys, pr_in, pr_out, pr_out_cdb, reservation};
use common::{run, target_with};
use device::TaskManagement;
use device::{Completion, ConfigError, LuConfig, Nexus, Target, Unit};
use scsi::persistent_reserve::{basic, PrInAction::ReportCapabilities, PrOutAction::*};
use scsi::persistent_reserve::{PrOutParameters, ReservationType};
use scsi::{Asc, SenseKey, Status};
use std::path::Path;
use store::FileStore;
use ReservationType::*;

const BLOCKS: u64 = 2048;
const CONFLICT: Completion = Completion {
    status: Status::ReservationConflict,
    sense: None,
};

fn ram_target() -> Target {
    common::ram_target(LuConfig::new("iqn.test:t", 0, BLOCKS * 512))
}

/// A file LUN that keeps persistent reservations in `dir`/lun.img.pr, as `stint serve` sets
/// it up; every call is a power on.
fn file_target(dir: &Path) -> Target {
    let data = dir.join("lun.img");
    let store = FileStore::open(&data, Some(BLOCKS * 512)).unwrap();
    let mut config = LuConfig::new("iqn.test:t", 0, BLOCKS * 512);
    config.persistent_reservations_path = Some(dir.join("lun.img.pr"));
    target_with(config, Arc::new(store))
}

/// Nexus `id` of initiator `name` (ISID 1).
fn nexus(id: u64, name: &str) -> Nexus {
    let port = format!("iqn.2026-11.test:{name},i,0x000000000001");
    common::nexus_of(id, &port, false)
}

/// A nexus past its power-on unit attention.
fn ready(t: &Target, id: u64, name: &str) -> Nexus {
    common::ready_as(t, nexus(id, name))
}

fn unit_attention(t: &Target, n: &Nexus) -> Option<Asc> {
    let (c, _) = run(t, n, &[0; 6], &[]);
    let s = c.sense?;
    assert_eq!(s.key, SenseKey::UnitAttention);
    Some(s.asc)
}

fn read10() -> [u8; 10] {
    [0x28, 0, 0, 0, 0, 1, 0, 0, 1, 0]
}

fn write10() -> [u8; 10] {
    [0x2A, 0, 0, 0, 0, 1, 0, 0, 1, 0]
}

#[test]
fn register_reserve_conflict_preempt_between_two_initiators() {
    let t = ram_target();
    let a = ready(&t, 1, "a");
    let b = ready(&t, 2, "b");
    let block = [0x5Au8; 512];
    assert_eq!(
        pr_out(&t, &a, Register, None, basic(0, 0xA)),
        Completion::GOOD
    );
    assert_eq!(
        pr_out(&t, &b, Register, None, basic(0, 0xB)),
        Completion::GOOD
    );
    assert_eq!(keys(&t, &b), (2, vec![0xA, 0xB]));
    // A reserves Exclusive Access: B (registered, not the holder) can neither read nor write,
    // nor reserve; INQUIRY, TEST UNIT READY and PERSISTENT RESERVE IN still run.
    assert_eq!(
        pr_out(&t, &a, Reserve, Some(ExclusiveAccess), basic(0xA, 0)),
        Completion::GOOD
    );
    assert_eq!(run(&t, &a, &write10(), &block).0, Completion::GOOD);
    assert_eq!(run(&t, &b, &read10(), &[]).0, CONFLICT);
    assert_eq!(run(&t, &b, &write10(), &block).0, CONFLICT);
    assert_eq!(
        pr_out(&t, &b, Reserve, Some(ExclusiveAccess), basic(0xB, 0)),
        CONFLICT
    );
    assert_eq!(
        run(&t, &b, &[0x12, 0, 0, 0, 36, 0], &[]).0,
        Completion::GOOD
    );
    assert_eq!(run(&t, &b, &[0; 6], &[]).0, Completion::GOOD);
    assert_eq!(reservation(&t, &b), Some((0xA, ExclusiveAccess)));
    // B preempts A: A's registration and reservation go, A is told, B holds Write Exclusive.
    assert_eq!(
        pr_out(&t, &b, Preempt, Some(WriteExclusive), basic(0xB, 0xA)),
        Completion::GOOD
    );
    assert_eq!(unit_attention(&t, &a), Some(Asc::REGISTRATIONS_PREEMPTED));
    assert_eq!(
        unit_attention(&t, &b),
        None,
        "the preempting nexus is not told"
    );
    assert_eq!(keys(&t, &a), (3, vec![0xB]));
    assert_eq!(reservation(&t, &a), Some((0xB, WriteExclusive)));
    // A may read through Write Exclusive, not write; its old key no longer works.
    assert_eq!(run(&t, &a, &read10(), &[]).0, Completion::GOOD);
    assert_eq!(run(&t, &a, &write10(), &block).0, CONFLICT);
    assert_eq!(
        pr_out(&t, &a, Release, Some(WriteExclusive), basic(0xA, 0)),
        CONFLICT
    );
    assert_eq!(run(&t, &b, &write10(), &block).0, Completion::GOOD);
    // CLEAR from B ends everything, and A hears of it if registered: it is not any more.
    assert_eq!(pr_out(&t, &b, Clear, None, basic(0xB, 0)), Completion::GOOD);
    assert_eq!(unit_attention(&t, &a), None);
    assert_eq!(keys(&t, &a), (4, vec![]));
    assert_eq!(reservation(&t, &a), None);
    assert_eq!(run(&t, &a, &write10(), &block).0, Completion::GOOD);
}

#[test]
fn registrants_only_release_and_clear_tell_the_others() {
    let t = ram_target();
    let a = ready(&t, 1, "a");
    let b = ready(&t, 2, "b");
    let c = ready(&t, 3, "c");
    for (n, key) in [(&a, 1), (&b, 2)] {
        assert_eq!(
            pr_out(&t, n, Register, None, basic(0, key)),
            Completion::GOOD
        );
    }
    let ro = ExclusiveAccessRegistrantsOnly;
    assert_eq!(
        pr_out(&t, &a, Reserve, Some(ro), basic(1, 0)),
        Completion::GOOD
    );
    // Registrants run everything, others nothing that touches the medium.
    assert_eq!(run(&t, &b, &read10(), &[]).0, Completion::GOOD);
    assert_eq!(run(&t, &c, &read10(), &[]).0, CONFLICT);
    assert_eq!(
        pr_out(&t, &a, Release, Some(ro), basic(1, 0)),
        Completion::GOOD
    );
    assert_eq!(unit_attention(&t, &b), Some(Asc::RESERVATIONS_RELEASED));
    assert_eq!(unit_attention(&t, &c), None, "not registered");
    assert_eq!(unit_attention(&t, &a), None);
    assert_eq!(pr_out(&t, &b, Clear, None, basic(2, 0)), Completion::GOOD);
    assert_eq!(unit_attention(&t, &a), Some(Asc::RESERVATIONS_PREEMPTED));
}

#[test]
fn reserve6_and_persistent_reservations_exclude_each_other() {
    let t = ram_target();
    let a = ready(&t, 1, "a");
    let b = ready(&t, 2, "b");
    let reserve6 = [0x16, 0, 0, 0, 0, 0];
    let release10 = [0x57, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    // Under RESERVE (6), every PERSISTENT RESERVE command conflicts, the holder's too
    // (SPC-2 §5.5.1).
    assert_eq!(run(&t, &a, &reserve6, &[]).0, Completion::GOOD);
    assert_eq!(pr_out(&t, &a, Register, None, basic(0, 1)), CONFLICT);
    let (c, _) = run(&t, &b, &[0x5E, 0, 0, 0, 0, 0, 0, 0, 8, 0], &[]);
    assert_eq!(c, CONFLICT);
    assert_eq!(run(&t, &a, &release10, &[]).0, Completion::GOOD);
    // Registered: RESERVE and RELEASE (6)/(10) conflict, except for the holder of a
    // persistent reservation, for whom they change nothing (SPC-4 §5.13.3).
    assert_eq!(
        pr_out(&t, &a, Register, None, basic(0, 1)),
        Completion::GOOD
    );
    assert_eq!(run(&t, &b, &reserve6, &[]).0, CONFLICT);
    assert_eq!(
        run(&t, &a, &reserve6, &[]).0,
        CONFLICT,
        "registered, no holder"
    );
    assert_eq!(
        pr_out(&t, &a, Reserve, Some(WriteExclusive), basic(1, 0)),
        Completion::GOOD
    );
    assert_eq!(run(&t, &a, &reserve6, &[]).0, Completion::GOOD);
    assert_eq!(run(&t, &a, &release10, &[]).0, Completion::GOOD);
    assert_eq!(reservation(&t, &b), Some((1, WriteExclusive)), "unchanged");
    assert_eq!(run(&t, &b, &release10, &[]).0, CONFLICT);
    // RESERVE (10) works like RESERVE (6) once nobody is registered.
    assert_eq!(
        pr_out(&t, &a, Register, None, basic(1, 0)),
        Completion::GOOD
    );
    let reserve10 = [0x56, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    assert_eq!(run(&t, &b, &reserve10, &[]).0, Completion::GOOD);
    assert_eq!(run(&t, &a, &read10(), &[]).0, CONFLICT);
    assert_eq!(run(&t, &a, &reserve10, &[]).0, CONFLICT);
}

#[test]
fn resets_and_nexus_loss_keep_persistent_reservations() {
    let t = ram_target();
    let a = ready(&t, 1, "a");
    let b = ready(&t, 2, "b");
    assert_eq!(
        pr_out(&t, &a, Register, None, basic(0, 1)),
        Completion::GOOD
    );
    assert_eq!(
        pr_out(&t, &a, Reserve, Some(ExclusiveAccess), basic(1, 0)),
        Completion::GOOD
    );
    t.task_management(
        0,
        &b,
        0,
        TaskManagement::LogicalUnitReset,
        &mut common::Collect::default(),
    );
    t.task_management(
        0,
        &b,
        0,
        TaskManagement::TargetWarmReset,
        &mut common::Collect::default(),
    );
    assert_eq!(
        unit_attention(&t, &b),
        Some(Asc::BUS_DEVICE_RESET_FUNCTION_OCCURRED)
    );
    assert_eq!(run(&t, &b, &read10(), &[]).0, CONFLICT);
    // A's session ends; a new one from the same initiator port is the same I_T nexus to
    // persistent reservations: still registered, still the holder.
    t.nexus_lost(0, &a, &mut common::Collect::default());
    assert_eq!(run(&t, &b, &read10(), &[]).0, CONFLICT);
    let a_again = ready(&t, 3, "a");
    assert_eq!(run(&t, &a_again, &read10(), &[]).0, Completion::GOOD);
    assert_eq!(
        pr_out(&t, &a_again, Release, Some(ExclusiveAccess), basic(1, 0)),
        Completion::GOOD
    );
    assert_eq!(
        unit_attention(&t, &b),
        Some(Asc::POWER_ON_RESET_OR_BUS_DEVICE_RESET),
        "the warm reset's"
    );
    assert_eq!(run(&t, &b, &read10(), &[]).0, Completion::GOOD);
}

#[test]
fn bad_parameter_lists_and_cdbs_get_precise_errors() {
    let t = ram_target();
    let a = ready(&t, 1, "a");
    // A parameter list longer than any taken is refused before its data is asked for.
    let huge = pr_out_cdb(Register, 0, 1 << 20);
    let e = t.transfer(&a, 0, &huge).unwrap_err();
    assert_eq!(e.asc, Asc::PARAMETER_LIST_LENGTH_ERROR);
    // The basic list is 24 bytes; Data-Out short of what the CDB announced is refused too.
    let (c, _) = run(&t, &a, &pr_out_cdb(Register, 0, 23), &[0; 23]);
    assert_eq!(c.sense.unwrap().asc, Asc::PARAMETER_LIST_LENGTH_ERROR);
    let (c, _) = run(&t, &a, &pr_out_cdb(Register, 0, 24), &[0; 20]);
    assert_eq!(c.sense.unwrap().asc, Asc::PARAMETER_LIST_LENGTH_ERROR);
    // Reserved service actions; a reserved TYPE.
    let (c, _) = run(&t, &a, &[0x5E, 0x04, 0, 0, 0, 0, 0, 0, 8, 0], &[]);
    assert_eq!(c.sense.unwrap().asc, Asc::INVALID_FIELD_IN_CDB);
    let (c, _) = run(&t, &a, &[0x5F, 0x08, 0, 0, 0, 0, 0, 0, 24, 0], &[0; 24]);
    assert_eq!(c.sense.unwrap().asc, Asc::INVALID_FIELD_IN_CDB);
    let (c, _) = run(&t, &a, &pr_out_cdb(Reserve, 0x2, 24), &[0; 24]);
    assert_eq!(c.sense.unwrap().asc, Asc::INVALID_FIELD_IN_CDB);
    // A RAM LU cannot persist through power loss: APTPL = 1 is refused, PTPL_C is 0.
    let c = pr_out(
        &t,
        &a,
        Register,
        None,
        PrOutParameters {
            aptpl: true,
            ..basic(0, 1)
        },
    );
    assert_eq!(c.sense.unwrap().asc, Asc::INVALID_FIELD_IN_PARAMETER_LIST);
    assert_eq!(pr_in(&t, &a, ReportCapabilities)[2] & 1, 0);
    // READ KEYS keeps ADDITIONAL LENGTH whatever the allocation length.
    assert_eq!(
        pr_out(&t, &a, Register, None, basic(0, 1)),
        Completion::GOOD
    );
    let (c, d) = run(&t, &a, &[0x5E, 0, 0, 0, 0, 0, 0, 0, 8, 0], &[]);
    assert_eq!((c, d), (Completion::GOOD, vec![0, 0, 0, 1, 0, 0, 0, 8]));
}

#[test]
fn aptpl_keeps_registrations_and_the_reservation_through_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let pr_file = dir.path().join("lun.img.pr");
    {
        let t = file_target(dir.path());
        let a = ready(&t, 1, "a");
        let b = ready(&t, 2, "b");
        assert_eq!(
            pr_in(&t, &a, ReportCapabilities)[2] & 1,
            1,
            "PTPL_C on a file LUN"
        );
        assert_eq!(
            pr_out(&t, &a, Register, None, basic(0, 0xA)),
            Completion::GOOD
        );
        assert!(!pr_file.exists(), "nothing kept without APTPL");
        assert_eq!(
            pr_out(
                &t,
                &b,
                RegisterAndIgnoreExistingKey,
                None,
                PrOutParameters {
                    aptpl: true,
                    ..basic(0, 0xB)
                }
            ),
            Completion::GOOD
        );
        assert_eq!(
            pr_out(&t, &a, Reserve, Some(ExclusiveAccess), basic(0xA, 0)),
            Completion::GOOD
        );
        assert!(pr_file.exists());
        assert_eq!(pr_in(&t, &a, ReportCapabilities)[3] & 1, 1, "PTPL_A");
    }
    // Power on: the keys, the holder and its type are back; PRgeneration starts at zero.
    let t = file_target(dir.path());
    let a = ready(&t, 1, "a");
    let b = ready(&t, 2, "b");
    assert_eq!(keys(&t, &b), (0, vec![0xA, 0xB]));
    assert_eq!(reservation(&t, &b), Some((0xA, ExclusiveAccess)));
    assert_eq!(run(&t, &b, &read10(), &[]).0, CONFLICT);
    assert_eq!(run(&t, &a, &read10(), &[]).0, Completion::GOOD);
    // APTPL = 0 in the next registration: the next power on finds nothing.
    assert_eq!(
        pr_out(&t, &b, Register, None, basic(0xB, 0xBB)),
        Completion::GOOD
    );
    assert!(!pr_file.exists());
    drop(t);
    let t = file_target(dir.path());
    let a = ready(&t, 1, "a");
    assert_eq!(keys(&t, &a), (0, vec![]));
    assert_eq!(reservation(&t, &a), None);
}

#[test]
fn a_corrupt_reservations_file_stops_the_logical_unit_with_its_name() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("lun.img.pr"), b"garbage").unwrap();
    let store = FileStore::open(&dir.path().join("lun.img"), Some(BLOCKS * 512)).unwrap();
    let mut config = LuConfig::new("iqn.test:t", 0, BLOCKS * 512);
    config.persistent_reservations_path = Some(dir.path().join("lun.img.pr"));
    let plane = common::plane_over(&config, Arc::new(store));
    let e = Unit::build(config, plane, None).err().unwrap();
    assert!(matches!(e, ConfigError::PersistentReservations(_)), "{e:?}");
    let e = e.to_string();
    assert!(
        e.contains("lun.img.pr") && e.contains("not a persistent reservations file"),
        "{e}"
    );
}
