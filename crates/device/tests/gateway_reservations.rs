//! Persistent reservations shared by gateways (docs/gateways.md), without a cluster: two
//! logical units over planes that share one versioned state and pass each other's
//! announcements, as RBD planes do through a RADOS object and its watch. The state a
//! REGISTER through one writes is what the other reads; a write that finds the state changed
//! by another gateway is prepared again on it, and gives up with ABORTED COMMAND after too
//! many such races; a gateway that starts alone drops a state whose APTPL is 0.

mod common;
use common::gateway::{Cluster, Gateway};
use common::pr::{keys, pr_in, pr_out};
use common::{ready_as, run, sense_of};
use device::{Completion, Nexus, Target};
use scsi::persistent_reserve::{basic, decode_read_full_status, PrOutParameters};
use scsi::persistent_reserve::{PrInAction::ReadFullStatus, PrOutAction::*, ReservationType::*};
use scsi::{Asc, SenseKey};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use store::KeptFile;

/// Gateway `own` (of port groups 1 and 2) as a target with LUN 0.
fn gateway(plane: Arc<Gateway>, own: u16) -> Target {
    common::gateway::target(plane, own, |_| {})
}

fn host(id: u64, n: u8) -> Nexus {
    common::nexus_of(id, &format!("iqn.test:host{n},i,0x000000000001"), false)
}

#[test]
fn a_change_through_one_gateway_is_the_others_state() {
    let cluster = Cluster::new();
    let (pa, pb) = (
        Gateway::join(&cluster, true),
        Gateway::join(&cluster, false),
    );
    let (a, b) = (gateway(pa, 1), gateway(pb, 2));
    let h1a = ready_as(&a, host(1, 1));
    let h1b = ready_as(&b, host(2, 1));
    let h2b = ready_as(&b, host(3, 2));
    assert_eq!(
        pr_out(&a, &h1a, Register, None, basic(0, 0xA)),
        Completion::GOOD
    );
    assert_eq!(keys(&b, &h2b).1, [0xA], "B reads A's registration");
    // READ FULL STATUS through B: the registration is through target port 1.
    let d = pr_in(&b, &h2b, ReadFullStatus);
    let (_, status) = decode_read_full_status(&d).expect("READ FULL STATUS data");
    assert_eq!(status[0].relative_target_port_identifier, 1);
    // Host 1 through B is another I_T nexus: not registered, so its RESERVE conflicts.
    let c = pr_out(&b, &h1b, Reserve, Some(WriteExclusive), basic(0xA, 0));
    assert_eq!(c.status, scsi::Status::ReservationConflict);
    // Host 2 registers through B for every port and preempts host 1's registration: host 1's
    // nexus on A is told (the effects travel), its nexus on B (unregistered) is not.
    assert_eq!(
        pr_out(
            &b,
            &h2b,
            Register,
            None,
            PrOutParameters {
                all_tg_pt: true,
                ..basic(0, 0xB)
            }
        ),
        Completion::GOOD
    );
    assert_eq!(
        pr_out(&b, &h2b, Preempt, Some(WriteExclusive), basic(0xB, 0xA)),
        Completion::GOOD
    );
    let (c, _) = run(&a, &h1a, &[0; 6], &[]);
    assert_eq!(
        sense_of(&c),
        (SenseKey::UnitAttention, Asc::REGISTRATIONS_PREEMPTED)
    );
    assert_eq!(run(&b, &h1b, &[0; 6], &[]).0, Completion::GOOD);
    assert_eq!(keys(&a, &h1a).1, [0xB]);
    // Three changes, each written once; the refused RESERVE not at all.
    assert_eq!(cluster.object(KeptFile::Reservations).writes, 3);
}

#[test]
fn a_change_whose_announcement_was_lost_is_read_all_the_same() {
    let cluster = Cluster::new();
    let (pa, pb) = (
        Gateway::join(&cluster, true),
        Gateway::join(&cluster, false),
    );
    pa.mute.store(true, Ordering::Relaxed);
    let (a, b) = (gateway(pa, 1), gateway(pb, 2));
    let (h1a, h2b) = (ready_as(&a, host(1, 1)), ready_as(&b, host(2, 2)));
    assert_eq!(keys(&b, &h2b).1, [0u64; 0]);
    assert_eq!(
        pr_out(&a, &h1a, Register, None, basic(0, 0xA)),
        Completion::GOOD
    );
    // A died before its notify went out: B sees the newer version in the cluster.
    assert_eq!(keys(&b, &h2b), (1, vec![0xA]), "B reads A's registration");
}

#[test]
fn a_race_lost_to_another_gateway_is_run_again_then_given_up() {
    let cluster = Cluster::new();
    let pa = Gateway::join(&cluster, true);
    let a = gateway(pa.clone(), 1);
    let h = ready_as(&a, host(1, 1));
    // Three races lost: the REGISTER is prepared again on the state each time, and lands.
    pa.interfere.store(3, Ordering::Relaxed);
    assert_eq!(
        pr_out(&a, &h, Register, None, basic(0, 0xA)),
        Completion::GOOD
    );
    assert_eq!(pa.interfere.load(Ordering::Relaxed), 0);
    assert_eq!(keys(&a, &h).1, [0xA]);
    // Every race lost: ABORTED COMMAND, and nothing changed.
    pa.interfere.store(1000, Ordering::Relaxed);
    let c = pr_out(&a, &h, Register, None, basic(0xA, 0xB));
    assert_eq!(
        sense_of(&c),
        (SenseKey::AbortedCommand, Asc::NO_ADDITIONAL_SENSE)
    );
    pa.interfere.store(0, Ordering::Relaxed);
    assert_eq!(keys(&a, &h).1, [0xA]);
}

#[test]
fn a_gateway_starting_alone_drops_a_state_without_aptpl() {
    let cluster = Cluster::new();
    {
        let a = gateway(Gateway::join(&cluster, true), 1);
        let h = ready_as(&a, host(1, 1));
        assert_eq!(
            pr_out(&a, &h, Register, None, basic(0, 0xA)),
            Completion::GOOD
        );
    }
    // Another gateway alive: the state stays.
    let b = gateway(Gateway::join(&cluster, false), 2);
    let h = ready_as(&b, host(2, 2));
    assert_eq!(keys(&b, &h).1, [0xA]);
    // None alive: APTPL = 0 is gone, written back for the gateways that start later.
    let a = gateway(Gateway::join(&cluster, true), 1);
    let h = ready_as(&a, host(3, 2));
    assert_eq!(keys(&a, &h).1, Vec::<u64>::new());
    let later = gateway(Gateway::join(&cluster, false), 2);
    let h2 = ready_as(&later, host(4, 2));
    assert_eq!(keys(&later, &h2).1, Vec::<u64>::new());
    // APTPL = 1 survives, PRgeneration restarting at zero.
    assert_eq!(
        pr_out(
            &a,
            &h,
            Register,
            None,
            PrOutParameters {
                aptpl: true,
                ..basic(0, 0xC)
            }
        ),
        Completion::GOOD
    );
    let again = gateway(Gateway::join(&cluster, true), 1);
    let h3 = ready_as(&again, host(5, 2));
    assert_eq!(keys(&again, &h3), (0, vec![0xC]), "PRgeneration, keys");
}
