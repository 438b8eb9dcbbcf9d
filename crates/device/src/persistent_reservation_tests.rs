//! Every PERSISTENT RESERVE OUT service action and reservation type, on the pure state.

use super::*;
use scsi::persistent_reserve::encode_transport_id;
use ReservationType::*;

const A: &str = "iqn.2026-11.dev.stint:a,i,0x000000000001";
const B: &str = "iqn.2026-11.dev.stint:b,i,0x000000000002";
const C: &str = "iqn.2026-11.dev.stint:c,i,0x000000000003";

fn cmd(service_action: PrOutAction, kind: Option<ReservationType>) -> PersistentReserveOut {
    PersistentReserveOut {
        service_action,
        scope_type: kind.map_or(0, ReservationType::code),
        parameter_list_length: 24,
    }
}

/// The basic parameter list (SPC-4 table 214).
fn list(key: u64, sa_key: u64, flags: u8) -> Vec<u8> {
    let mut p = vec![0u8; 24];
    p[0..8].copy_from_slice(&key.to_be_bytes());
    p[8..16].copy_from_slice(&sa_key.to_be_bytes());
    p[20] = flags;
    p
}

fn out(
    s: &mut PersistentReservations,
    port: &str,
    action: PrOutAction,
    kind: Option<ReservationType>,
    key: u64,
    sa_key: u64,
) -> Performed {
    s.perform(
        n(port),
        &cmd(action, kind),
        &list(key, sa_key, 0),
        true,
        &[1],
    )
}

fn register(s: &mut PersistentReservations, port: &str, key: u64) {
    out(s, port, PrOutAction::Register, None, 0, key).unwrap();
}

fn reserve(s: &mut PersistentReservations, port: &str, key: u64, kind: ReservationType) {
    out(s, port, PrOutAction::Reserve, Some(kind), key, 0).unwrap();
}

fn whom(port: &str) -> Whom {
    Whom {
        initiator_port: port.to_owned(),
        target_port: Some(1),
    }
}

fn ua(port: &str, asc: Asc) -> (Whom, Asc) {
    (whom(port), asc)
}

/// `port`'s I_T nexus through a lone server's one target port.
fn n(port: &str) -> It<'_> {
    It {
        initiator_port: port,
        target_port: 1,
    }
}

fn check(r: Performed) -> Sense {
    match r {
        Err(Refusal::Check(s)) => s,
        other => panic!("expected CHECK CONDITION, got {other:?}"),
    }
}

#[test]
fn register_change_and_unregister() {
    let mut s = PersistentReservations::default();
    register(&mut s, A, 0xA1);
    assert_eq!(s.key_of(n(A)), Some(0xA1));
    assert_eq!(s.generation, 1);
    // A registered nexus must give its key; an unregistered one zero.
    let r = out(&mut s, A, PrOutAction::Register, None, 0xBAD, 0xA2);
    assert_eq!(r, Err(Refusal::Conflict));
    assert_eq!(
        out(&mut s, B, PrOutAction::Register, None, 7, 0xB1),
        Err(Refusal::Conflict)
    );
    out(&mut s, A, PrOutAction::Register, None, 0xA1, 0xA2).unwrap();
    assert_eq!(s.key_of(n(A)), Some(0xA2));
    // REGISTER AND IGNORE EXISTING KEY takes any RESERVATION KEY.
    out(
        &mut s,
        A,
        PrOutAction::RegisterAndIgnoreExistingKey,
        None,
        0xBAD,
        0xA3,
    )
    .unwrap();
    assert_eq!(s.key_of(n(A)), Some(0xA3));
    out(&mut s, A, PrOutAction::Register, None, 0xA3, 0).unwrap();
    assert_eq!(s.key_of(n(A)), None);
    // Registering zero from an unregistered nexus changes nothing but PRgeneration.
    out(
        &mut s,
        A,
        PrOutAction::RegisterAndIgnoreExistingKey,
        None,
        0,
        0,
    )
    .unwrap();
    assert!(s.registrations.is_empty());
    assert_eq!(s.generation, 5, "every REGISTER counts, failed ones do not");
}

#[test]
fn duplicate_keys_are_separate_registrations() {
    let mut s = PersistentReservations::default();
    register(&mut s, A, 7);
    register(&mut s, B, 7);
    let mut data = Vec::new();
    s.read(PrInAction::ReadKeys, false, &mut data);
    assert_eq!(&data[4..8], &[0, 0, 0, 16], "both keys reported");
    out(&mut s, A, PrOutAction::Register, None, 7, 0).unwrap();
    assert_eq!(s.key_of(n(B)), Some(7), "unregistering A leaves B");
}

fn spec_i_pt(ports: &[&str]) -> Vec<u8> {
    let mut p = list(0, 0x5, 0x08);
    let mut tids = Vec::new();
    for port in ports {
        encode_transport_id(port, &mut tids);
    }
    p.extend_from_slice(&(tids.len() as u32).to_be_bytes());
    p.extend_from_slice(&tids);
    p
}

#[test]
fn spec_i_pt_registers_the_named_ports_too() {
    let mut s = PersistentReservations::default();
    let register = cmd(PrOutAction::Register, None);
    s.perform(n(A), &register, &spec_i_pt(&[B, C]), true, &[1])
        .unwrap();
    assert_eq!(
        [s.key_of(n(A)), s.key_of(n(B)), s.key_of(n(C))],
        [Some(5); 3]
    );
    // A named port that is registered already (or named twice) refuses the whole list.
    let mut t = PersistentReservations::default();
    t.perform(n(C), &register, &list(0, 9, 0), true, &[1])
        .unwrap();
    let e = check(t.perform(n(A), &register, &spec_i_pt(&[B, C]), true, &[1]));
    assert_eq!(e.asc, Asc::INVALID_FIELD_IN_PARAMETER_LIST);
    assert_eq!(e.field.map(|f| f.byte), Some(28 + 48), "C's TransportID");
    assert_eq!(t.key_of(n(A)), None, "nothing registered");
    let e = check(t.perform(n(A), &register, &spec_i_pt(&[B, B]), true, &[1]));
    assert_eq!(e.asc, Asc::INVALID_FIELD_IN_PARAMETER_LIST);
    // SPEC_I_PT from a registered nexus, or with another service action, is refused.
    let mut from_registered = spec_i_pt(&[B]);
    from_registered[..8].copy_from_slice(&9u64.to_be_bytes());
    let e = check(t.perform(n(C), &register, &from_registered, true, &[1]));
    assert_eq!(e, Sense::invalid_field_in_parameter_list(20, Some(3)));
    let ignore = cmd(PrOutAction::RegisterAndIgnoreExistingKey, None);
    let e = check(t.perform(n(A), &ignore, &spec_i_pt(&[B]), true, &[1]));
    assert_eq!(e, Sense::invalid_field_in_parameter_list(20, Some(3)));
}

#[test]
fn registrations_are_bounded() {
    let mut s = PersistentReservations::default();
    for i in 0..MAX_REGISTRATIONS {
        register(&mut s, &format!("iqn.2026-11.dev.stint:h,i,0x{i:012x}"), 1);
    }
    let e = check(out(&mut s, A, PrOutAction::Register, None, 0, 1));
    assert_eq!(e.asc, Asc::INSUFFICIENT_REGISTRATION_RESOURCES);
    // An initiator port no TransportID can name is not registered either.
    let mut s = PersistentReservations::default();
    let long = format!("iqn.2026-11.dev.stint:{},i,0x000000000001", "x".repeat(210));
    let e = check(out(&mut s, &long, PrOutAction::Register, None, 0, 1));
    assert_eq!(e.asc, Asc::INSUFFICIENT_REGISTRATION_RESOURCES);
    assert!(s.registrations.is_empty());
}

#[test]
fn reserve_every_type() {
    for kind in ReservationType::ALL {
        let mut s = PersistentReservations::default();
        register(&mut s, A, 1);
        register(&mut s, B, 2);
        // Unregistered, or with another key: RESERVATION CONFLICT.
        let r = out(&mut s, C, PrOutAction::Reserve, Some(kind), 0, 0);
        assert_eq!(r, Err(Refusal::Conflict), "{kind:?}");
        let r = out(&mut s, A, PrOutAction::Reserve, Some(kind), 2, 0);
        assert_eq!(r, Err(Refusal::Conflict), "{kind:?}");
        reserve(&mut s, A, 1, kind);
        assert!(s.holds(n(A)));
        assert_eq!(s.holds(n(B)), kind.all_registrants(), "{kind:?}");
        assert_eq!(s.generation, 2, "RESERVE leaves PRgeneration alone");
        // The holder may repeat it, not change its type; nobody else may reserve.
        reserve(&mut s, A, 1, kind);
        let other = ReservationType::ALL
            .into_iter()
            .find(|t| *t != kind)
            .unwrap();
        let r = out(&mut s, A, PrOutAction::Reserve, Some(other), 1, 0);
        assert_eq!(r, Err(Refusal::Conflict), "{kind:?}");
        let r = out(&mut s, B, PrOutAction::Reserve, Some(kind), 2, 0);
        if kind.all_registrants() {
            assert!(r.is_ok(), "{kind:?}: every registrant holds it");
        } else {
            assert_eq!(r, Err(Refusal::Conflict), "{kind:?}");
        }
    }
}

#[test]
fn scope_and_type_are_checked_before_anything_else() {
    let mut s = PersistentReservations::default();
    let bad_type = PersistentReserveOut {
        scope_type: 0x02,
        ..cmd(PrOutAction::Reserve, None)
    };
    let e = check(s.perform(n(A), &bad_type, &list(0, 0, 0), true, &[1]));
    assert_eq!(e, Sense::invalid_field_in_cdb(2, Some(3)));
    let bad_scope = PersistentReserveOut {
        scope_type: 0x11,
        ..cmd(PrOutAction::Preempt, None)
    };
    let e = check(s.perform(n(A), &bad_scope, &list(0, 0, 0), true, &[1]));
    assert_eq!(e, Sense::invalid_field_in_cdb(2, Some(7)));
    // REGISTER and CLEAR ignore them.
    let register = PersistentReserveOut {
        scope_type: 0xFF,
        ..cmd(PrOutAction::Register, None)
    };
    s.perform(n(A), &register, &list(0, 1, 0), true, &[1])
        .unwrap();
    // The parameter list is 24 bytes.
    let e = check(s.perform(n(A), &cmd(PrOutAction::Clear, None), &[0; 23], true, &[1]));
    assert_eq!(e.asc, Asc::PARAMETER_LIST_LENGTH_ERROR);
}

/// Who may run what under each type (SPC-4 table 65, SBC-4 table 13; libiscsi's
/// ProutReserve.Access* cases): (registered can read, can write; unregistered can read, can
/// write) for a nexus other than the holder.
#[test]
fn access_under_every_type() {
    let expected = [
        (WriteExclusive, (true, false, true, false)),
        (ExclusiveAccess, (false, false, false, false)),
        (WriteExclusiveRegistrantsOnly, (true, true, true, false)),
        (ExclusiveAccessRegistrantsOnly, (true, true, false, false)),
        (WriteExclusiveAllRegistrants, (true, true, true, false)),
        (ExclusiveAccessAllRegistrants, (true, true, false, false)),
    ];
    use ReservationAccess::*;
    for (kind, (reg_read, reg_write, unreg_read, unreg_write)) in expected {
        let mut s = PersistentReservations::default();
        register(&mut s, A, 1);
        register(&mut s, B, 2);
        reserve(&mut s, A, 1, kind);
        let can = |port, access| !s.conflicts(n(port), access);
        assert!(can(A, Read) && can(A, Write), "{kind:?}: the holder");
        assert_eq!(
            (can(B, Read), can(B, Write)),
            (reg_read, reg_write),
            "{kind:?}"
        );
        assert_eq!(
            (can(C, Read), can(C, Write)),
            (unreg_read, unreg_write),
            "{kind:?}"
        );
        for access in [Unrestricted, Allowed, OwnRules] {
            assert!(can(C, access), "{kind:?} {access:?}");
        }
    }
    // No reservation, no conflict, registered or not.
    let mut s = PersistentReservations::default();
    register(&mut s, A, 1);
    assert!(!s.conflicts(n(C), ReservationAccess::Write));
}

#[test]
fn release_by_holder_with_its_type() {
    for kind in ReservationType::ALL {
        let mut s = PersistentReservations::default();
        register(&mut s, A, 1);
        register(&mut s, B, 2);
        register(&mut s, C, 3);
        reserve(&mut s, A, 1, kind);
        let generation = s.generation;
        // A registered non-holder's RELEASE changes nothing (under all registrants there is
        // no such nexus: B holds it too).
        if !kind.all_registrants() {
            let r = out(&mut s, B, PrOutAction::Release, Some(kind), 2, 0).unwrap();
            assert_eq!(r, Effects::default());
            assert!(s.reservation.is_some());
        }
        let other = ReservationType::ALL
            .into_iter()
            .find(|t| *t != kind)
            .unwrap();
        let e = check(out(&mut s, A, PrOutAction::Release, Some(other), 1, 0));
        assert_eq!(
            e.asc,
            Asc::INVALID_RELEASE_OF_PERSISTENT_RESERVATION,
            "{kind:?}"
        );
        let effects = out(&mut s, A, PrOutAction::Release, Some(kind), 1, 0).unwrap();
        assert_eq!(s.reservation, None);
        assert_eq!(s.registrations.len(), 3, "registrations stay");
        let expected = if kind.registrants() {
            vec![
                ua(B, Asc::RESERVATIONS_RELEASED),
                ua(C, Asc::RESERVATIONS_RELEASED),
            ]
        } else {
            vec![]
        };
        assert_eq!(effects.unit_attentions, expected, "{kind:?}");
        assert_eq!(
            s.generation, generation,
            "RELEASE leaves PRgeneration alone"
        );
        // Releasing nothing is GOOD.
        out(&mut s, A, PrOutAction::Release, Some(kind), 1, 0).unwrap();
    }
}

#[test]
fn clear_removes_everything_and_tells_the_others() {
    let mut s = PersistentReservations::default();
    register(&mut s, A, 1);
    register(&mut s, B, 2);
    reserve(&mut s, B, 2, ExclusiveAccess);
    assert_eq!(
        out(&mut s, C, PrOutAction::Clear, None, 0, 0),
        Err(Refusal::Conflict)
    );
    let effects = out(&mut s, A, PrOutAction::Clear, None, 1, 0).unwrap();
    assert_eq!(
        effects.unit_attentions,
        [ua(B, Asc::RESERVATIONS_PREEMPTED)]
    );
    assert_eq!(s.reservation, None);
    assert!(s.registrations.is_empty());
    assert_eq!(s.generation, 3);
}

#[test]
fn preempt_the_holder() {
    let mut s = PersistentReservations::default();
    register(&mut s, A, 1);
    register(&mut s, B, 2);
    register(&mut s, C, 3);
    reserve(&mut s, A, 1, WriteExclusive);
    // B takes the reservation with another type: A loses its registration, C is told the
    // reservation it lived under is gone.
    let effects = out(&mut s, B, PrOutAction::Preempt, Some(ExclusiveAccess), 2, 1).unwrap();
    assert_eq!(
        effects.unit_attentions,
        [
            ua(A, Asc::REGISTRATIONS_PREEMPTED),
            ua(C, Asc::RESERVATIONS_RELEASED)
        ]
    );
    assert!(effects.aborted.is_empty(), "PREEMPT aborts nothing");
    assert_eq!(s.key_of(n(A)), None);
    assert!(s.holds(n(B)));
    assert_eq!(
        s.reservation.as_ref().map(|r| r.kind),
        Some(ExclusiveAccess)
    );
    // The same type: only the preempted are told.
    let effects = out(
        &mut s,
        C,
        PrOutAction::PreemptAndAbort,
        Some(ExclusiveAccess),
        3,
        2,
    )
    .unwrap();
    assert_eq!(
        effects.unit_attentions,
        [ua(B, Asc::REGISTRATIONS_PREEMPTED)]
    );
    assert_eq!(
        effects.aborted,
        [whom(B)],
        "PREEMPT AND ABORT aborts the preempted"
    );
    assert!(s.holds(n(C)));
    // The holder may preempt itself to change the type, keeping its registration.
    out(
        &mut s,
        C,
        PrOutAction::Preempt,
        Some(WriteExclusiveRegistrantsOnly),
        3,
        3,
    )
    .unwrap();
    assert_eq!(s.key_of(n(C)), Some(3));
    assert!(s.holds(n(C)));
}

#[test]
fn preempt_registrations_only() {
    let mut s = PersistentReservations::default();
    register(&mut s, A, 1);
    register(&mut s, B, 2);
    register(&mut s, C, 2);
    // No reservation: the registrations with the key go (libiscsi ProutPreempt).
    let effects = out(
        &mut s,
        A,
        PrOutAction::PreemptAndAbort,
        Some(ExclusiveAccess),
        1,
        2,
    )
    .unwrap();
    assert_eq!(
        effects.unit_attentions,
        [
            ua(B, Asc::REGISTRATIONS_PREEMPTED),
            ua(C, Asc::REGISTRATIONS_PREEMPTED)
        ]
    );
    assert_eq!(effects.aborted, [whom(B), whom(C)]);
    assert_eq!(s.reservation, None, "no reservation is made");
    assert_eq!(s.registrations.len(), 1);
    // A key nobody holds is RESERVATION CONFLICT; zero is an invalid field.
    let r = out(&mut s, A, PrOutAction::Preempt, Some(ExclusiveAccess), 1, 9);
    assert_eq!(r, Err(Refusal::Conflict));
    let e = check(out(
        &mut s,
        A,
        PrOutAction::Preempt,
        Some(ExclusiveAccess),
        1,
        0,
    ));
    assert_eq!(e, Sense::invalid_field_in_parameter_list(8, None));
    // Under a reservation, a non-holder's key removes that registration only.
    register(&mut s, B, 2);
    reserve(&mut s, A, 1, WriteExclusive);
    register(&mut s, C, 3);
    out(&mut s, B, PrOutAction::Preempt, Some(ExclusiveAccess), 2, 3).unwrap();
    assert_eq!(s.key_of(n(C)), None);
    assert_eq!(s.reservation.as_ref().map(|r| r.kind), Some(WriteExclusive));
    assert!(s.holds(n(A)));
    // Preempting one's own key removes one's own registration, with no unit attention.
    let effects = out(&mut s, B, PrOutAction::Preempt, Some(ExclusiveAccess), 2, 2).unwrap();
    assert!(effects.unit_attentions.is_empty());
    assert_eq!(s.key_of(n(B)), None);
}

#[test]
fn preempt_all_registrants() {
    for kind in [WriteExclusiveAllRegistrants, ExclusiveAccessAllRegistrants] {
        let mut s = PersistentReservations::default();
        register(&mut s, A, 1);
        register(&mut s, B, 2);
        register(&mut s, C, 3);
        reserve(&mut s, A, 1, kind);
        // A non-zero key removes registrations and leaves the reservation.
        out(&mut s, A, PrOutAction::Preempt, Some(kind), 1, 3).unwrap();
        assert_eq!(s.key_of(n(C)), None);
        assert_eq!(s.reservation.as_ref().map(|r| r.kind), Some(kind));
        // Zero preempts the reservation and removes every other registration.
        let effects = out(&mut s, B, PrOutAction::Preempt, Some(WriteExclusive), 2, 0).unwrap();
        assert_eq!(
            effects.unit_attentions,
            [ua(A, Asc::REGISTRATIONS_PREEMPTED)],
            "{kind:?}: nobody else is registered to be told of the new type"
        );
        assert_eq!(s.registrations.len(), 1);
        assert!(s.holds(n(B)) && !s.holds(n(A)));
        assert_eq!(s.reservation.as_ref().map(|r| r.kind), Some(WriteExclusive));
    }
}

#[test]
fn a_holder_that_unregisters_releases() {
    for kind in ReservationType::ALL {
        let mut s = PersistentReservations::default();
        register(&mut s, A, 1);
        register(&mut s, B, 2);
        reserve(&mut s, A, 1, kind);
        let effects = out(&mut s, A, PrOutAction::Register, None, 1, 0).unwrap();
        // Libiscsi's ProutReserve.Ownership*: all registrants reservations stay with B.
        assert_eq!(s.reservation.is_some(), kind.all_registrants(), "{kind:?}");
        let told = kind.registrants() && !kind.all_registrants();
        assert_eq!(
            effects.unit_attentions,
            if told {
                vec![ua(B, Asc::RESERVATIONS_RELEASED)]
            } else {
                vec![]
            },
            "{kind:?}"
        );
        // The last registrant of an all registrants reservation takes it along.
        out(
            &mut s,
            B,
            PrOutAction::RegisterAndIgnoreExistingKey,
            None,
            0,
            0,
        )
        .unwrap();
        assert_eq!(s.reservation, None, "{kind:?}");
    }
}

fn register_and_move(key: u64, sa_key: u64, flags: u8, rtpi: u16, to: &str) -> Vec<u8> {
    let mut p = list(key, sa_key, 0);
    p[17] = flags;
    p[18..20].copy_from_slice(&rtpi.to_be_bytes());
    let mut tid = Vec::new();
    encode_transport_id(to, &mut tid);
    p[20..24].copy_from_slice(&(tid.len() as u32).to_be_bytes());
    p.extend_from_slice(&tid);
    p
}

#[test]
fn register_and_move_hands_the_reservation_over() {
    let mv = cmd(PrOutAction::RegisterAndMove, None);
    let mut s = PersistentReservations::default();
    register(&mut s, A, 1);
    register(&mut s, B, 2);
    // No reservation: INVALID FIELD IN CDB (SPC-4 §5.13.8).
    let e = check(s.perform(n(A), &mv, &register_and_move(1, 7, 0, 1, C), true, &[1]));
    assert_eq!(e.asc, Asc::INVALID_FIELD_IN_CDB);
    reserve(&mut s, A, 1, ExclusiveAccess);
    // Only the holder, with its key, to another nexus of this target port, with a key.
    let r = s.perform(n(B), &mv, &register_and_move(2, 7, 0, 1, C), true, &[1]);
    assert_eq!(r, Err(Refusal::Conflict));
    let r = s.perform(n(A), &mv, &register_and_move(2, 7, 0, 1, C), true, &[1]);
    assert_eq!(r, Err(Refusal::Conflict));
    let e = check(s.perform(n(A), &mv, &register_and_move(1, 0, 0, 1, C), true, &[1]));
    assert_eq!(e, Sense::invalid_field_in_parameter_list(8, None));
    let e = check(s.perform(n(A), &mv, &register_and_move(1, 7, 0, 2, C), true, &[1]));
    assert_eq!(e, Sense::invalid_field_in_parameter_list(18, None));
    let e = check(s.perform(n(A), &mv, &register_and_move(1, 7, 0, 1, A), true, &[1]));
    assert_eq!(e, Sense::invalid_field_in_parameter_list(24, None));
    let generation = s.generation;
    s.perform(n(A), &mv, &register_and_move(1, 7, 0, 1, C), true, &[1])
        .unwrap();
    assert_eq!(s.key_of(n(C)), Some(7));
    assert!(s.holds(n(C)) && !s.holds(n(A)));
    assert_eq!(
        s.key_of(n(A)),
        Some(1),
        "UNREG = 0 keeps the mover registered"
    );
    assert_eq!(
        s.reservation.as_ref().map(|r| r.kind),
        Some(ExclusiveAccess)
    );
    assert_eq!(s.generation, generation + 1);
    // UNREG = 1, and to a registered nexus (whose key is replaced).
    s.perform(n(C), &mv, &register_and_move(7, 8, 0x02, 1, B), true, &[1])
        .unwrap();
    assert_eq!(s.key_of(n(C)), None);
    assert_eq!(s.key_of(n(B)), Some(8));
    assert!(s.holds(n(B)));
    // Not for all registrants reservations.
    let mut s = PersistentReservations::default();
    register(&mut s, A, 1);
    reserve(&mut s, A, 1, WriteExclusiveAllRegistrants);
    let r = s.perform(n(A), &mv, &register_and_move(1, 7, 0, 1, C), true, &[1]);
    assert_eq!(r, Err(Refusal::Conflict));
}

#[test]
fn aptpl_needs_a_place_to_persist() {
    let mut s = PersistentReservations::default();
    let register = cmd(PrOutAction::Register, None);
    let e = check(s.perform(n(A), &register, &list(0, 1, 0x01), false, &[1]));
    assert_eq!(e, Sense::invalid_field_in_parameter_list(20, Some(0)));
    assert!(s.registrations.is_empty());
    s.perform(n(A), &register, &list(0, 1, 0x01), true, &[1])
        .unwrap();
    assert!(s.aptpl);
    // The last APTPL received decides.
    s.perform(n(A), &register, &list(1, 2, 0x00), true, &[1])
        .unwrap();
    assert!(!s.aptpl);
    let mv = cmd(PrOutAction::RegisterAndMove, None);
    reserve(&mut s, A, 2, WriteExclusive);
    let e = check(s.perform(n(A), &mv, &register_and_move(2, 7, 0x01, 1, B), false, &[1]));
    assert_eq!(e, Sense::invalid_field_in_parameter_list(17, Some(0)));
}

#[test]
fn spc2_exemptions_follow_the_holder() {
    let mut s = PersistentReservations::default();
    register(&mut s, A, 1);
    register(&mut s, B, 2);
    assert!(!s.exempts_spc2(n(A)), "registered, no reservation");
    reserve(&mut s, A, 1, WriteExclusive);
    assert!(s.exempts_spc2(n(A)) && !s.exempts_spc2(n(B)) && !s.exempts_spc2(n(C)));
    out(&mut s, A, PrOutAction::Release, Some(WriteExclusive), 1, 0).unwrap();
    reserve(&mut s, A, 1, ExclusiveAccessRegistrantsOnly);
    assert!(s.exempts_spc2(n(B)), "a registrant under registrants only");
    assert!(!s.exempts_spc2(n(C)));
}

#[test]
fn read_reservation_and_full_status() {
    let mut s = PersistentReservations::default();
    register(&mut s, A, 0xA);
    register(&mut s, B, 0xB);
    reserve(&mut s, B, 0xB, ExclusiveAccess);
    let mut data = Vec::new();
    s.read(PrInAction::ReadReservation, false, &mut data);
    assert_eq!(&data[8..16], &0xBu64.to_be_bytes());
    assert_eq!(data[21], ExclusiveAccess.code());
    out(
        &mut s,
        B,
        PrOutAction::Release,
        Some(ExclusiveAccess),
        0xB,
        0,
    )
    .unwrap();
    reserve(&mut s, B, 0xB, WriteExclusiveAllRegistrants);
    data.clear();
    s.read(PrInAction::ReadReservation, false, &mut data);
    assert_eq!(&data[8..16], &[0; 8], "all registrants: key zero");
    data.clear();
    s.read(PrInAction::ReadFullStatus, false, &mut data);
    // Both registrants hold an all registrants reservation.
    let first = &data[8..];
    assert_eq!(first[12] & 1, 1);
    let len = 24 + u32::from_be_bytes(first[20..24].try_into().unwrap()) as usize;
    assert_eq!(first[len + 12] & 1, 1);
    assert_eq!(data.len(), 8 + 2 * len);
    data.clear();
    s.read(PrInAction::ReportCapabilities, true, &mut data);
    assert_eq!(data[2] & 1, 1, "PTPL_C");
    assert_eq!(data[3] & 1, 0, "PTPL_A");
}

/// `port`'s I_T nexus through the target port of gateway `t` (port groups 1 and 2).
fn at(port: &str, t: u16) -> It<'_> {
    It {
        initiator_port: port,
        target_port: t,
    }
}

const GATEWAYS: &[u16] = &[1, 2];

fn out_at(
    s: &mut PersistentReservations,
    it: It<'_>,
    action: PrOutAction,
    kind: Option<ReservationType>,
    key: u64,
    sa_key: u64,
    flags: u8,
) -> Performed {
    s.perform(
        it,
        &cmd(action, kind),
        &list(key, sa_key, flags),
        true,
        GATEWAYS,
    )
}

const ALL_TG_PT: u8 = 0x04;

#[test]
fn a_registration_is_for_one_target_port_unless_all_tg_pt() {
    use PrOutAction::*;
    let mut s = PersistentReservations::default();
    // A through port 1 only: registered there, not through port 2.
    out_at(&mut s, at(A, 1), Register, None, 0, 0xA, 0).unwrap();
    assert_eq!(s.key_of(at(A, 1)), Some(0xA));
    assert_eq!(s.key_of(at(A, 2)), None);
    // Through port 2 it reserves as an unregistered nexus: RESERVATION CONFLICT, and gives
    // zero to register.
    let r = out_at(&mut s, at(A, 2), Reserve, Some(ExclusiveAccess), 0xA, 0, 0);
    assert_eq!(r, Err(Refusal::Conflict));
    out_at(&mut s, at(A, 2), Register, None, 0, 0xA2, 0).unwrap();
    assert_eq!(
        s.registrations.len(),
        2,
        "two I_T nexuses, two registrations"
    );
    // A reservation through port 1 is held there: port 2's nexus of A is another one.
    out_at(&mut s, at(A, 1), Reserve, Some(ExclusiveAccess), 0xA, 0, 0).unwrap();
    assert!(s.holds(at(A, 1)) && !s.holds(at(A, 2)));
    assert!(s.conflicts(at(A, 2), ReservationAccess::Write));
    // READ FULL STATUS reports each registration's target port.
    let mut data = Vec::new();
    s.read(PrInAction::ReadFullStatus, false, &mut data);
    let first = &data[8..];
    assert_eq!(&first[18..20], &1u16.to_be_bytes(), "A through port 1");
    assert_eq!(first[12] & 1, 1, "the holder");
    let len = 24 + u32::from_be_bytes(first[20..24].try_into().unwrap()) as usize;
    assert_eq!(
        &first[len + 18..len + 20],
        &2u16.to_be_bytes(),
        "A through port 2"
    );
    assert_eq!(first[len + 12] & 1, 0, "not the holder");
    // Unregistering through port 2 leaves port 1's registration and its reservation.
    let effects = out_at(&mut s, at(A, 2), Register, None, 0xA2, 0, 0).unwrap();
    assert_eq!(effects, Effects::default());
    assert!(s.holds(at(A, 1)));
    assert_eq!(s.key_of(at(A, 2)), None);
}

#[test]
fn all_tg_pt_registers_and_holds_through_every_target_port() {
    use PrOutAction::*;
    let mut s = PersistentReservations::default();
    out_at(&mut s, at(A, 1), Register, None, 0, 0xA, ALL_TG_PT).unwrap();
    assert_eq!(s.key_of(at(A, 2)), Some(0xA));
    assert_eq!(
        s.registrations.len(),
        1,
        "one registration for every target port"
    );
    // Reserved through port 2, held through both.
    out_at(&mut s, at(A, 2), Reserve, Some(WriteExclusive), 0xA, 0, 0).unwrap();
    assert!(s.holds(at(A, 1)) && s.holds(at(A, 2)));
    assert!(!s.holds(at(B, 1)));
    // B registered through port 2 alone; one with ALL_TG_PT through port 1 would register
    // B's nexus of port 2 twice.
    out_at(&mut s, at(B, 2), Register, None, 0, 0xB, 0).unwrap();
    let e = check(out_at(&mut s, at(B, 1), Register, None, 0, 0xB1, ALL_TG_PT));
    assert_eq!(e, Sense::invalid_field_in_parameter_list(20, Some(2)));
    // PREEMPT AND ABORT: B's effects name port 2, A's (ALL_TG_PT) every port.
    out_at(&mut s, at(C, 1), Register, None, 0, 0xC, ALL_TG_PT).unwrap();
    let effects = out_at(
        &mut s,
        at(C, 1),
        PreemptAndAbort,
        Some(ExclusiveAccess),
        0xC,
        0xB,
        0,
    )
    .unwrap();
    assert_eq!(
        effects.aborted,
        [Whom {
            initiator_port: B.to_owned(),
            target_port: Some(2)
        }]
    );
    assert!(effects.aborted[0].reaches(2) && !effects.aborted[0].reaches(1));
    let effects = out_at(
        &mut s,
        at(C, 2),
        PreemptAndAbort,
        Some(ExclusiveAccess),
        0xC,
        0xA,
        0,
    )
    .unwrap();
    assert_eq!(
        effects.aborted,
        [Whom {
            initiator_port: A.to_owned(),
            target_port: None
        }]
    );
    assert!(effects.aborted[0].reaches(1) && effects.aborted[0].reaches(2));
    assert!(
        s.holds(at(C, 1)) && s.holds(at(C, 2)),
        "C's ALL_TG_PT registration holds"
    );
}

#[test]
fn register_and_move_names_any_target_port_of_the_unit() {
    let mv = cmd(PrOutAction::RegisterAndMove, None);
    let mut s = PersistentReservations::default();
    out_at(&mut s, at(A, 1), PrOutAction::Register, None, 0, 1, 0).unwrap();
    out_at(
        &mut s,
        at(A, 1),
        PrOutAction::Reserve,
        Some(ExclusiveAccess),
        1,
        0,
        0,
    )
    .unwrap();
    // Port 3 is no target port of the unit.
    let e = check(s.perform(
        at(A, 1),
        &mv,
        &register_and_move(1, 7, 0, 3, B),
        true,
        GATEWAYS,
    ));
    assert_eq!(e, Sense::invalid_field_in_parameter_list(18, None));
    // A through port 2 is another I_T nexus than the mover's.
    s.perform(
        at(A, 1),
        &mv,
        &register_and_move(1, 7, 0, 2, A),
        true,
        GATEWAYS,
    )
    .unwrap();
    assert!(s.holds(at(A, 2)) && !s.holds(at(A, 1)));
    assert_eq!(s.key_of(at(A, 2)), Some(7));
    assert_eq!(s.key_of(at(A, 1)), Some(1));
}
