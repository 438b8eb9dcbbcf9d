//! RESERVE and RELEASE (6) (SPC-2) shared by gateways (docs/gateways.md), without a cluster:
//! the holder is the logical unit's, named by I_T nexus, so every gateway refuses the other
//! nexuses' commands while it is held; RELEASE by the holder, its nexus's loss and a logical
//! unit reset through any gateway release it, each written once; a race between two
//! gateways' RESERVEs leaves one holder; a gateway that restarts releases its own nexuses'.

mod common;
use common::gateway::{Cluster, Gateway};
use common::pr::{pr_in, pr_out};
use common::{ready_as, run, sense_of, write16, Collect};
use device::{Completion, Nexus, Target, TaskManagement};
use scsi::persistent_reserve::{basic, PrInAction::ReadKeys, PrOutAction::Register};
use scsi::{Asc, SenseKey, Status};
use std::sync::Arc;
use store::KeptFile;

const RESERVE6: [u8; 6] = [0x16, 0, 0, 0, 0, 0];
const RELEASE6: [u8; 6] = [0x17, 0, 0, 0, 0, 0];
const READ_CAPACITY10: [u8; 10] = [0x25, 0, 0, 0, 0, 0, 0, 0, 0, 0];
const INQUIRY: [u8; 6] = [0x12, 0, 0, 0, 36, 0];

/// `n` on `t` past its power-on unit attention, which REQUEST SENSE takes whatever
/// reservation is held (an unrestricted command).
fn join(t: &Target, n: Nexus) -> Nexus {
    let (c, sense) = run(t, &n, &[0x03, 0, 0, 0, 18, 0], &[]);
    assert_eq!(
        (c, sense[2] & 0x0F),
        (Completion::GOOD, 0x06),
        "a unit attention"
    );
    n
}

/// Gateway `own` (of port groups 1 and 2) as a target with LUN 0.
fn gateway(plane: Arc<Gateway>, own: u16) -> Target {
    common::gateway::target(plane, own, |_| {})
}

fn host(id: u64, n: u8) -> Nexus {
    common::nexus_of(id, &format!("iqn.test:host{n},i,0x000000000001"), false)
}

/// WRITE (16) of one block at LBA 0.
fn write(t: &Target, n: &Nexus) -> Status {
    run(t, n, &write16(0, 1), &[0xA5; 512]).0.status
}

fn status(t: &Target, n: &Nexus, cdb: &[u8]) -> Status {
    run(t, n, cdb, &[]).0.status
}

/// Two gateways of port groups 1 and 2 over one cluster, a started first.
fn pair(cluster: &Arc<Cluster>) -> (Arc<Gateway>, Target, Arc<Gateway>, Target) {
    let (pa, pb) = (Gateway::join(cluster, true), Gateway::join(cluster, false));
    let (a, b) = (gateway(pa.clone(), 1), gateway(pb.clone(), 2));
    (pa, a, pb, b)
}

/// The writes of the reservations state that landed.
fn writes(cluster: &Cluster) -> u32 {
    cluster.object(KeptFile::Reservations).writes
}

#[test]
fn a_reserve_through_one_gateway_refuses_other_nexuses_through_every_gateway() {
    let cluster = Cluster::new();
    let (_, a, _, b) = pair(&cluster);
    let h1a = ready_as(&a, host(1, 1));
    let h1b = ready_as(&b, host(2, 1));
    let h2b = ready_as(&b, host(3, 2));
    let h3a = ready_as(&a, host(4, 3));
    assert_eq!(status(&a, &h1a, &RESERVE6), Status::Good);
    assert_eq!(writes(&cluster), 1);
    // Through gateway b, as through a: a WRITE and READ CAPACITY conflict, INQUIRY does
    // not (SPC-2 §5.5.1), and PERSISTENT RESERVE IN and OUT conflict.
    assert_eq!(write(&b, &h2b), Status::ReservationConflict);
    assert_eq!(
        status(&b, &h2b, &READ_CAPACITY10),
        Status::ReservationConflict
    );
    assert_eq!(
        status(&a, &h3a, &READ_CAPACITY10),
        Status::ReservationConflict
    );
    assert_eq!(status(&b, &h2b, &INQUIRY), Status::Good);
    assert_eq!(status(&a, &h1a, &READ_CAPACITY10), Status::Good);
    let read_keys = [0x5E, 0, 0, 0, 0, 0, 0, 0x10, 0, 0];
    assert_eq!(status(&b, &h2b, &read_keys), Status::ReservationConflict);
    assert_eq!(
        pr_out(&b, &h2b, Register, None, basic(0, 0xB)).status,
        Status::ReservationConflict
    );
    // Host 1 through b is another I_T nexus: not the holder.
    assert_eq!(write(&b, &h1b), Status::ReservationConflict);
    // Another host through a, too.
    assert_eq!(write(&a, &h3a), Status::ReservationConflict);
    // The holder writes; a RESERVE again by it and a RELEASE by another nexus change
    // nothing and write nothing.
    assert_eq!(write(&a, &h1a), Status::Good);
    assert_eq!(status(&a, &h1a, &RESERVE6), Status::Good);
    assert_eq!(status(&b, &h2b, &RELEASE6), Status::Good);
    assert_eq!(status(&b, &h1b, &RELEASE6), Status::Good);
    assert_eq!(writes(&cluster), 1);
    assert_eq!(write(&b, &h2b), Status::ReservationConflict);
    assert_eq!(status(&b, &h2b, &RESERVE6), Status::ReservationConflict);
    // The holder's RELEASE through a frees it on b.
    assert_eq!(status(&a, &h1a, &RELEASE6), Status::Good);
    assert_eq!(writes(&cluster), 2);
    assert_eq!(write(&b, &h2b), Status::Good);
    assert_eq!(pr_in(&b, &h2b, ReadKeys).len(), 8, "no keys");
    // And b's nexus may reserve now, refusing a's.
    assert_eq!(status(&b, &h2b, &RESERVE6), Status::Good);
    assert_eq!(write(&a, &h1a), Status::ReservationConflict);
    assert_eq!(writes(&cluster), 3);
}

#[test]
fn the_holders_nexus_loss_frees_it_for_the_other_gateway() {
    let cluster = Cluster::new();
    let (_, a, _, b) = pair(&cluster);
    let h1a = ready_as(&a, host(1, 1));
    let h2b = ready_as(&b, host(2, 2));
    assert_eq!(status(&a, &h1a, &RESERVE6), Status::Good);
    let mut sink = Collect::default();
    // Another nexus of the same initiator port here (a session that came and went) is not
    // the one that reserved: its loss releases nothing.
    a.nexus_lost(common::now(), &host(9, 1), &mut sink);
    assert_eq!(write(&b, &h2b), Status::ReservationConflict);
    // Nor does a nexus's loss on b.
    b.nexus_lost(common::now(), &h2b, &mut sink);
    let h2b = join(&b, host(3, 2));
    assert_eq!(write(&b, &h2b), Status::ReservationConflict);
    assert_eq!(writes(&cluster), 1);
    a.nexus_lost(common::now(), &h1a, &mut sink);
    assert_eq!(writes(&cluster), 2);
    assert_eq!(write(&b, &h2b), Status::Good);
}

#[test]
fn a_logical_unit_reset_through_the_other_gateway_frees_it() {
    let cluster = Cluster::new();
    let (_, a, _, b) = pair(&cluster);
    let h1a = ready_as(&a, host(1, 1));
    let h3a = ready_as(&a, host(3, 3));
    let h2b = ready_as(&b, host(2, 2));
    assert_eq!(status(&a, &h1a, &RESERVE6), Status::Good);
    let mut sink = Collect::default();
    let reset = TaskManagement::LogicalUnitReset;
    b.task_management(common::now(), &h2b, 0, reset, &mut sink);
    // Only b wrote the release; a reset there too and released nothing more.
    assert_eq!(writes(&cluster), 2);
    let (c, _) = run(&a, &h3a, &[0; 6], &[]);
    assert_eq!(
        sense_of(&c),
        (
            SenseKey::UnitAttention,
            Asc::BUS_DEVICE_RESET_FUNCTION_OCCURRED
        )
    );
    assert_eq!(write(&a, &h3a), Status::Good);
    let h2b = ready_as(&b, h2b);
    assert_eq!(write(&b, &h2b), Status::Good);
    assert_eq!(writes(&cluster), 2);
}

#[test]
fn two_reserves_at_once_leave_one_holder() {
    let cluster = Cluster::new();
    let (pa, a, _, b) = pair(&cluster);
    let b = Arc::new(b);
    let h1a = ready_as(&a, host(1, 1));
    let h2b = ready_as(&b, host(2, 2));
    // b's RESERVE lands between a's decision and its write: a's write finds another version.
    let (other, holder) = (b.clone(), h2b.clone());
    *pa.before_share.lock() = Some(Box::new(move || {
        assert_eq!(status(&other, &holder, &RESERVE6), Status::Good);
    }));
    assert_eq!(status(&a, &h1a, &RESERVE6), Status::ReservationConflict);
    assert!(pa.before_share.lock().is_none(), "the race was run");
    assert_eq!(writes(&cluster), 1, "b's write alone");
    assert_eq!(write(&a, &h1a), Status::ReservationConflict);
    assert_eq!(write(&b, &h2b), Status::Good);
    // Gateway a restarted reads b's holder (on another target port: it stays).
    drop(a);
    let a = gateway(Gateway::join(&cluster, false), 1);
    let h4a = join(&a, host(4, 4));
    assert_eq!(write(&a, &h4a), Status::ReservationConflict);
}

#[test]
fn a_holder_through_a_dead_gateway_stays_until_it_restarts() {
    let cluster = Cluster::new();
    let (pa, a, _, b) = pair(&cluster);
    let h1a = ready_as(&a, host(1, 1));
    let h2b = ready_as(&b, host(2, 2));
    assert_eq!(status(&a, &h1a, &RESERVE6), Status::Good);
    // a dies: no nexus loss is processed.
    drop((a, pa));
    assert_eq!(write(&b, &h2b), Status::ReservationConflict);
    // Restarted while b lives, a releases its own nexuses' reservation.
    let a = gateway(Gateway::join(&cluster, false), 1);
    assert_eq!(writes(&cluster), 2);
    assert_eq!(write(&b, &h2b), Status::Good);
    let h1a = join(&a, host(5, 1));
    assert_eq!(write(&a, &h1a), Status::Good);
    // b's holder survives a's restart.
    assert_eq!(status(&b, &h2b, &RESERVE6), Status::Good);
    let a = gateway(Gateway::join(&cluster, false), 1);
    let h1a = join(&a, host(6, 1));
    assert_eq!(write(&a, &h1a), Status::ReservationConflict);
    // No gateway alive: the logical unit's power on ends it (b's holder too).
    let a = gateway(Gateway::join(&cluster, true), 1);
    let h1a = join(&a, host(7, 1));
    assert_eq!(write(&a, &h1a), Status::Good);
}

#[test]
fn a_registration_keeps_refusing_reserve_on_every_gateway() {
    let cluster = Cluster::new();
    let (_, a, _, b) = pair(&cluster);
    let h1a = ready_as(&a, host(1, 1));
    let h2b = ready_as(&b, host(2, 2));
    assert_eq!(
        pr_out(&a, &h1a, Register, None, basic(0, 0xA)),
        Completion::GOOD
    );
    // SPC-2 §5.5.1: while a nexus is registered, RESERVE conflicts, through b too.
    assert_eq!(status(&b, &h2b, &RESERVE6), Status::ReservationConflict);
    assert_eq!(writes(&cluster), 1);
}
