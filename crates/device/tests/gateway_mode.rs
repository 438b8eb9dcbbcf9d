//! Mode parameters shared by gateways (docs/gateways.md), without a cluster: a MODE SELECT
//! through one gateway is every gateway's current values, every nexus but the sender's gets
//! MODE PARAMETERS CHANGED (SPC-5 §7.5.2), a lost race is checked again on the values as they
//! are, a reset's values are what a gateway starting later finds, and a gateway that starts
//! alone powers on with the saved values.

mod common;
use common::gateway::{Cluster, Gateway};
use common::{ready_as, run, sense_of, write16};
use device::{Completion, Nexus, Target, TaskManagement};
use scsi::{Asc, SenseKey};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use store::KeptFile;

fn gateway(plane: Arc<Gateway>, own: u16) -> Target {
    common::gateway::target(plane, own, |_| {})
}

fn host(id: u64, n: u8) -> Nexus {
    common::nexus_of(id, &format!("iqn.test:host{n},i,0x000000000001"), true)
}

/// MODE SENSE (6) of the Control mode page (0Ah): its SWP bit.
fn swp(t: &Target, n: &Nexus) -> bool {
    let (c, page) = run(t, n, &[0x1A, 0x08, 0x0A, 0, 255, 0], &[]);
    assert_eq!(c, Completion::GOOD);
    page[4 + 4] & 0x08 != 0
}

/// MODE SELECT (6) of the Control mode page with SWP as asked (SPC-5 §7.5.8).
fn select_swp(t: &Target, n: &Nexus, on: bool) -> Completion {
    let (_, mut page) = run(t, n, &[0x1A, 0x08, 0x0A, 0, 255, 0], &[]);
    page[0] = 0;
    if on {
        page[4 + 4] |= 0x08;
    } else {
        page[4 + 4] &= !0x08;
    }
    let len = page.len() as u8;
    run(t, n, &[0x15, 0x10, 0, 0, len, 0], &page).0
}

/// The unit attention `n` meets first, if any (TEST UNIT READY).
fn unit_attention(t: &Target, n: &Nexus) -> Option<Asc> {
    let (c, _) = run(t, n, &[0; 6], &[]);
    c.sense
        .filter(|s| s.key == SenseKey::UnitAttention)
        .map(|s| s.asc)
}

#[test]
fn a_mode_select_through_one_gateway_is_every_gateways_and_tells_every_other_nexus() {
    let cluster = Cluster::new();
    let (a, b) = (
        gateway(Gateway::join(&cluster, true), 1),
        gateway(Gateway::join(&cluster, false), 2),
    );
    let (h1a, h2a, h1b) = (
        ready_as(&a, host(1, 1)),
        ready_as(&a, host(2, 2)),
        ready_as(&b, host(3, 1)),
    );
    assert!(!swp(&b, &h1b));
    assert_eq!(select_swp(&a, &h1a, true), Completion::GOOD);
    assert_eq!(unit_attention(&a, &h1a), None, "the sender is not told");
    assert_eq!(unit_attention(&a, &h2a), Some(Asc::MODE_PARAMETERS_CHANGED));
    assert_eq!(
        unit_attention(&b, &h1b),
        Some(Asc::MODE_PARAMETERS_CHANGED),
        "the other gateway's nexus of the same initiator is another I_T nexus"
    );
    assert!(swp(&b, &h1b), "B's current values are A's");
    let (c, _) = run(&b, &h1b, &write16(0, 1), &[0; 512]);
    assert_eq!(sense_of(&c), (SenseKey::DataProtect, Asc::WRITE_PROTECTED));
    // And back, through B.
    assert_eq!(select_swp(&b, &h1b, false), Completion::GOOD);
    assert_eq!(unit_attention(&a, &h1a), Some(Asc::MODE_PARAMETERS_CHANGED));
    assert_eq!(run(&a, &h1a, &write16(0, 1), &[0; 512]).0, Completion::GOOD);
    // A gateway starting while the others are alive takes the current values.
    assert_eq!(select_swp(&a, &h1a, true), Completion::GOOD);
    let c = gateway(Gateway::join(&cluster, false), 1);
    let h3c = ready_as(&c, host(4, 3));
    assert!(swp(&c, &h3c));
}

#[test]
fn a_change_whose_announcement_was_lost_is_read_all_the_same() {
    let cluster = Cluster::new();
    let pa = Gateway::join(&cluster, true);
    let (a, b) = (
        gateway(pa.clone(), 1),
        gateway(Gateway::join(&cluster, false), 2),
    );
    let (h1a, h1b) = (ready_as(&a, host(1, 1)), ready_as(&b, host(2, 1)));
    pa.mute.store(true, Ordering::Relaxed);
    assert_eq!(select_swp(&a, &h1a, true), Completion::GOOD);
    assert_eq!(unit_attention(&b, &h1b), Some(Asc::MODE_PARAMETERS_CHANGED));
    assert!(swp(&b, &h1b));
}

#[test]
fn a_race_lost_to_another_gateway_is_checked_again_and_too_many_abort_the_command() {
    let cluster = Cluster::new();
    let pa = Gateway::join(&cluster, true);
    let a = gateway(pa.clone(), 1);
    let h = ready_as(&a, host(1, 1));
    let before = cluster.object(KeptFile::ModePages).writes;
    pa.interfere.store(3, Ordering::Relaxed);
    assert_eq!(select_swp(&a, &h, true), Completion::GOOD);
    assert_eq!(pa.interfere.load(Ordering::Relaxed), 0, "three races lost");
    assert_eq!(cluster.object(KeptFile::ModePages).writes, before + 1);
    assert!(swp(&a, &h));
    pa.interfere.store(1000, Ordering::Relaxed);
    let c = select_swp(&a, &h, false);
    assert_eq!(
        sense_of(&c),
        (SenseKey::AbortedCommand, Asc::NO_ADDITIONAL_SENSE)
    );
    pa.interfere.store(0, Ordering::Relaxed);
    assert!(swp(&a, &h), "nothing changed");
}

#[test]
fn a_race_lost_to_this_gateways_own_write_is_not_counted() {
    let cluster = Cluster::new();
    let pa = Gateway::join(&cluster, true);
    let a = Arc::new(gateway(pa.clone(), 1));
    let (h1, h2) = (ready_as(&a, host(1, 1)), ready_as(&a, host(2, 2)));
    let before = cluster.object(KeptFile::ModePages).writes;
    // h2's MODE SELECT through the same gateway lands between h1's decision and its write
    // (a race lost to this gateway), then 15 writes of another gateway land before h1's
    // next ones: one short of the races that abort a command, if the first is not counted.
    let (inner, plane) = (a.clone(), pa.clone());
    *pa.before_share.lock() = Some(Box::new(move || {
        assert_eq!(select_swp(&inner, &h2, false), Completion::GOOD);
        let other = plane.clone();
        *plane.before_share.lock() = Some(Box::new(move || {
            other.interfere.store(15, Ordering::Relaxed);
        }));
    }));
    assert_eq!(select_swp(&a, &h1, true), Completion::GOOD);
    assert!(pa.before_share.lock().is_none(), "both races were run");
    assert_eq!(pa.interfere.load(Ordering::Relaxed), 0, "15 races lost");
    assert_eq!(cluster.object(KeptFile::ModePages).writes, before + 2);
    assert!(swp(&a, &h1));
}

#[test]
fn a_reset_makes_the_power_on_values_every_gateways_and_a_lone_start_powers_on() {
    let cluster = Cluster::new();
    let (a, b) = (
        gateway(Gateway::join(&cluster, true), 1),
        gateway(Gateway::join(&cluster, false), 2),
    );
    let (h1a, h1b) = (ready_as(&a, host(1, 1)), ready_as(&b, host(2, 1)));
    assert_eq!(select_swp(&a, &h1a, true), Completion::GOOD);
    let response = a.task_management(
        0,
        &h1a,
        0,
        TaskManagement::LogicalUnitReset,
        &mut common::Collect::default(),
    );
    assert_eq!(response, device::TmfResponse::FunctionComplete);
    for (t, n) in [(&a, &h1a), (&b, &h1b)] {
        assert_eq!(
            unit_attention(t, n),
            Some(Asc::BUS_DEVICE_RESET_FUNCTION_OCCURRED)
        );
        assert_eq!(unit_attention(t, n), None, "the reset's, and no other");
    }
    assert!(!swp(&b, &h1b), "B reset too");
    // A gateway starting later finds the values the reset made current.
    let c = gateway(Gateway::join(&cluster, false), 1);
    let h3c = ready_as(&c, host(3, 3));
    assert!(!swp(&c, &h3c));
    // With every gateway gone, one that starts alone powers the logical unit on: its
    // current values are the saved ones (here the defaults), whatever the last were.
    assert_eq!(select_swp(&c, &h3c, true), Completion::GOOD);
    drop((a, b, c));
    let d = gateway(Gateway::join(&cluster, true), 1);
    let h4d = ready_as(&d, host(4, 4));
    assert!(!swp(&d, &h4d));
    let e = gateway(Gateway::join(&cluster, false), 2);
    assert!(!swp(&e, &ready_as(&e, host(5, 5))), "and wrote them back");
}
