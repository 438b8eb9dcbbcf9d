//! SET TARGET PORT GROUPS across gateways (docs/gateways.md), without a cluster: two logical
//! units over planes that share the explicit choice and which gateways are alive, and pass
//! each other's announcements, as RBD planes do through a RADOS object and its watch. A
//! choice through one gateway is every gateway's; the sender's nexus gets no unit attention,
//! every other nexus of both gateways does; bad lists are refused at their field, and a
//! gateway that is not alive cannot be chosen.

mod common;
use common::gateway::{Cluster, Gateway};
use common::{field_pointer, nexus_of, ready_as, run, sense_of};
use device::{Completion, LuConfig, Nexus, Target};
use scsi::alua::AccessState;
use scsi::{Asc, SenseKey};
use std::sync::Arc;

/// Gateway `own` (of port groups 1 and 2) as a target with LUN 0, the others in `state`,
/// with explicit ALUA (`alua_explicit`) or not.
fn gateway(plane: Arc<Gateway>, own: u16, state: AccessState, explicit: bool) -> Target {
    common::gateway::target(plane, own, |c| {
        c.alua_state = state;
        c.port_groups.explicit = explicit;
    })
}

/// Gateways 1 and 2 of one cluster, the others active/non-optimized.
fn pair() -> (Arc<Cluster>, Target, Target) {
    let cluster = Cluster::new();
    let a = gateway(
        Gateway::join(&cluster, false),
        1,
        AccessState::ActiveNonOptimized,
        true,
    );
    let b = gateway(
        Gateway::join(&cluster, false),
        2,
        AccessState::ActiveNonOptimized,
        true,
    );
    (cluster, a, b)
}

fn host(id: u64, n: u8) -> Nexus {
    nexus_of(id, &format!("iqn.test:host{n},i,0x000000000001"), false)
}

const TEST_UNIT_READY: [u8; 6] = [0; 6];
const READ_10: [u8; 10] = [0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0];
const RTPG: [u8; 12] = [0xA3, 0x0A, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0];
const AO: u8 = 0;
const ANO: u8 = 1;
const STANDBY: u8 = 2;

/// SET TARGET PORT GROUPS with one descriptor per (state, group).
fn stpg(t: &Target, n: &Nexus, descriptors: &[(u8, u16)]) -> Completion {
    let mut list = vec![0u8; 4];
    for &(state, group) in descriptors {
        list.extend_from_slice(&[state, 0]);
        list.extend_from_slice(&group.to_be_bytes());
    }
    let mut cdb = [0xA4, 0x0A, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    cdb[6..10].copy_from_slice(&(list.len() as u32).to_be_bytes());
    run(t, n, &cdb, &list).0
}

/// REPORT TARGET PORT GROUPS: each group's (id, PREF, state, SUPPORTED bits).
fn groups(t: &Target, n: &Nexus) -> Vec<(u16, bool, u8, u8)> {
    let (c, d) = run(t, n, &RTPG, &[]);
    assert_eq!(c, Completion::GOOD);
    d[4..]
        .chunks(12)
        .map(|g| {
            (
                u16::from_be_bytes([g[2], g[3]]),
                g[0] & 0x80 != 0,
                g[0] & 0x0F,
                g[1],
            )
        })
        .collect()
}

/// Whether `n`'s next command reports ASYMMETRIC ACCESS STATE CHANGED (and takes it).
fn told(t: &Target, n: &Nexus) -> bool {
    let c = run(t, n, &TEST_UNIT_READY, &[]).0;
    if c == Completion::GOOD {
        return false;
    }
    assert_eq!(
        sense_of(&c),
        (
            SenseKey::UnitAttention,
            Asc::ASYMMETRIC_ACCESS_STATE_CHANGED
        )
    );
    true
}

#[test]
fn only_gateways_with_alua_explicit_offer_explicit_alua() {
    let lone = common::ram_target(LuConfig::new("iqn.test:lone", 0, 1 << 20));
    let implicit = gateway(
        Gateway::join(&Cluster::new(), true),
        1,
        AccessState::ActiveNonOptimized,
        false,
    );
    let (_, a, _) = pair();
    let rsoc = [0xA3, 0x0C, 0x02, 0xA4, 0, 0x0A, 0, 0, 0, 64, 0, 0];
    for (t, tpgs, support) in [
        (&lone, 0x10, 0b001),
        (&implicit, 0x10, 0b001),
        (&a, 0x30, 0b011),
    ] {
        let n = ready_as(t, host(1, 1));
        let (_, inquiry) = run(t, &n, &[0x12, 0, 0, 0, 96, 0], &[]);
        assert_eq!(inquiry[5] & 0x30, tpgs, "TPGS");
        let (c, d) = run(t, &n, &rsoc, &[]);
        assert_eq!(c, Completion::GOOD);
        assert_eq!(d[1] & 0x07, support, "RSOC SUPPORT");
    }
    // SPC-4 §6.45: mandatory with TPGS 1xb, so unknown without it.
    for t in [&lone, &implicit] {
        let n = ready_as(t, host(1, 1));
        assert_eq!(
            sense_of(&stpg(t, &n, &[(AO, 1)])),
            (
                SenseKey::IllegalRequest,
                Asc::INVALID_COMMAND_OPERATION_CODE
            )
        );
    }
}

#[test]
fn a_choice_through_one_gateway_is_every_gateways_and_tells_the_other_nexuses() {
    let (cluster, a, b) = pair();
    let (h1a, h2a) = (ready_as(&a, host(1, 1)), ready_as(&a, host(2, 2)));
    let (h1b, h2b) = (ready_as(&b, host(3, 1)), ready_as(&b, host(4, 2)));
    // Both gateways alive: the first is preferred, marked PREF; the SUPPORTED bits are the
    // states a gateway takes, AO_SUP and AN_SUP.
    let first = vec![(1, true, AO, 0x03), (2, false, ANO, 0x03)];
    assert_eq!(groups(&a, &h1a), first);
    assert_eq!(groups(&b, &h1b), first);
    // Host 1 makes gw-b (group 2) active/optimized through gw-b, naming gw-a's group in the
    // other state as it may.
    assert_eq!(stpg(&b, &h1b, &[(ANO, 1), (AO, 2)]), Completion::GOOD);
    assert_eq!(*cluster.chosen.lock(), Some(2));
    let second = vec![(1, false, ANO, 0x03), (2, true, AO, 0x03)];
    // The sender's nexus is not told; every other one, on both gateways, is.
    assert!(!told(&b, &h1b));
    assert!(told(&b, &h2b));
    assert!(told(&a, &h1a));
    assert!(told(&a, &h2a));
    for (t, n) in [(&a, &h1a), (&a, &h2a), (&b, &h1b), (&b, &h2b)] {
        assert_eq!(groups(t, n), second);
    }
    // The same choice again changes no state: nobody is told.
    assert_eq!(stpg(&a, &h2a, &[(AO, 2)]), Completion::GOOD);
    assert!([(&a, &h1a), (&b, &h1b), (&b, &h2b)]
        .iter()
        .all(|(t, n)| !told(t, n)));
    // And back, through gw-a: now host 2's nexus on gw-a is the one not told.
    assert_eq!(stpg(&a, &h2a, &[(AO, 1)]), Completion::GOOD);
    assert!(!told(&a, &h2a));
    assert!(told(&a, &h1a) && told(&b, &h1b) && told(&b, &h2b));
    assert_eq!(groups(&b, &h2b), first);
    // A list without an active/optimized group leaves things as they are.
    assert_eq!(stpg(&b, &h1b, &[(ANO, 2)]), Completion::GOOD);
    assert_eq!(stpg(&b, &h1b, &[]), Completion::GOOD);
    assert!(!told(&a, &h1a) && !told(&b, &h2b));
    assert_eq!(*cluster.chosen.lock(), Some(1));
}

#[test]
fn a_gateway_that_is_not_alive_cannot_be_chosen() {
    let (cluster, a, b) = pair();
    let (h1a, h1b) = (ready_as(&a, host(1, 1)), ready_as(&b, host(2, 1)));
    cluster.alive.lock().retain(|&g| g != 1);
    let c = stpg(&b, &h1b, &[(AO, 1)]);
    assert_eq!(
        sense_of(&c),
        (
            SenseKey::HardwareError,
            Asc::SET_TARGET_PORT_GROUPS_COMMAND_FAILED
        )
    );
    // Nothing changed, nobody told.
    assert_eq!(*cluster.chosen.lock(), None);
    assert!(!told(&a, &h1a));
}

#[test]
fn bad_lists_are_refused_at_their_field_and_change_nothing() {
    let (cluster, a, b) = pair();
    let (h1a, h1b) = (ready_as(&a, host(1, 1)), ready_as(&b, host(2, 1)));
    let invalid = |c: &Completion| {
        assert_eq!(
            sense_of(c),
            (
                SenseKey::IllegalRequest,
                Asc::INVALID_FIELD_IN_PARAMETER_LIST
            )
        );
        field_pointer(c)
    };
    // Group 3 is no gateway's: the TARGET PORT GROUP field.
    assert_eq!(invalid(&stpg(&b, &h1b, &[(AO, 3)])), (6, None));
    // States a gateway does not take (standby here, unavailable, LBA dependent, offline,
    // transitioning, reserved): the ASYMMETRIC ACCESS STATE field.
    for state in [STANDBY, 3, 4, 5, 0x0E, 0x0F] {
        assert_eq!(
            invalid(&stpg(&b, &h1b, &[(AO, 2), (state, 1)])),
            (8, Some(3)),
            "{state:#x}"
        );
    }
    // Two groups active/optimized; the preferred one left non-optimized with none chosen.
    assert_eq!(invalid(&stpg(&b, &h1b, &[(AO, 2), (AO, 1)])), (8, Some(3)));
    assert_eq!(
        invalid(&stpg(&b, &h1b, &[(ANO, 2), (ANO, 1)])),
        (8, Some(3))
    );
    // A group named twice: the second's TARGET PORT GROUP.
    assert_eq!(invalid(&stpg(&b, &h1b, &[(AO, 2), (ANO, 2)])), (10, None));
    // A reserved bit of a descriptor.
    assert_eq!(invalid(&stpg(&b, &h1b, &[(0x10, 2)])), (4, Some(7)));
    // A PARAMETER LIST LENGTH that is no header and descriptors is the CDB's field.
    let c = run(
        &b,
        &h1b,
        &[0xA4, 0x0A, 0, 0, 0, 0, 0, 0, 0, 6, 0, 0],
        &[0; 6],
    )
    .0;
    assert_eq!(
        sense_of(&c),
        (SenseKey::IllegalRequest, Asc::INVALID_FIELD_IN_CDB)
    );
    assert_eq!(field_pointer(&c), (6, None));
    assert_eq!(*cluster.chosen.lock(), None);
    assert!(!told(&a, &h1a) && !told(&b, &h1b));
    assert_eq!(groups(&a, &h1a)[0], (1, true, AO, 0x03));
}

#[test]
fn a_standby_gateway_chosen_serves_the_medium() {
    let cluster = Cluster::new();
    let a = gateway(
        Gateway::join(&cluster, false),
        1,
        AccessState::Standby,
        true,
    );
    let b = gateway(
        Gateway::join(&cluster, false),
        2,
        AccessState::Standby,
        true,
    );
    // Standby refuses TEST UNIT READY: the power-on unit attention goes with an RTPG.
    let (h1a, h1b) = (host(1, 1), host(2, 1));
    for (t, n) in [(&a, &h1a), (&b, &h1b)] {
        run(t, n, &RTPG, &[]);
        assert_eq!(run(t, n, &RTPG, &[]).0, Completion::GOOD);
    }
    let refused = run(&b, &h1b, &READ_10, &[]).0;
    assert_eq!(
        sense_of(&refused),
        (
            SenseKey::NotReady,
            Asc::LOGICAL_UNIT_NOT_ACCESSIBLE_TARGET_PORT_IN_STANDBY_STATE
        )
    );
    // What Linux's scsi_dh_alua does when it activates a standby path: SET TARGET PORT
    // GROUPS through it, for its group. SUPPORTED: AO_SUP and S_SUP.
    assert_eq!(groups(&b, &h1b)[1], (2, false, STANDBY, 0x05));
    assert_eq!(stpg(&b, &h1b, &[(AO, 2), (STANDBY, 1)]), Completion::GOOD);
    assert_eq!(run(&b, &h1b, &READ_10, &[]).0, Completion::GOOD);
    assert!(told(&a, &h1a));
    let refused = run(&a, &h1a, &READ_10, &[]).0;
    assert_eq!(sense_of(&refused).0, SenseKey::NotReady);
}
