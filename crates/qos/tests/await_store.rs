//! The queue in front of real storage (`Queue::await_store`): a started command ends at the
//! later of the model's time and the store's completion, the depth bounds what the store has
//! outstanding, and limits expire whether or not the store has answered.

mod common;

use common::*;
use qos::{CdlDescriptor, Outcome, Policy, Queue, QueueConfig, Started, T2CdlUnits};

fn awaiting(config: QueueConfig, drive: FixedDrive) -> Queue<FixedDrive> {
    let mut q = fifo_queue(config, drive);
    q.await_store();
    q
}

fn started(q: &mut Queue<FixedDrive>) -> Vec<Started> {
    let mut out = Vec::new();
    q.take_started(&mut out);
    out
}

#[test]
fn a_command_ends_at_the_later_of_model_and_store() {
    let mut q = awaiting(QueueConfig::default(), FixedDrive::new(10 * MS));
    submit(&mut q, 0, read(1, 0, 0));
    submit(&mut q, 0, read(2, 100, 0));
    assert!(run(&mut q, 0).is_empty());
    let s = started(&mut q);
    assert_eq!(s.iter().map(|s| s.id).collect::<Vec<_>>(), [1]);
    // The store answers before the model's 10 ms: the model's time ends it.
    assert!(q.store_done(3 * MS, s[0]));
    assert_eq!(q.next_event(), Some(10 * MS));
    let done = run(&mut q, 10 * MS);
    assert_eq!((done[0].id, done[0].at), (1, 10 * MS));
    // The next one starts at 10 ms; its store takes until 25 ms, past the model's 20 ms.
    let s = started(&mut q);
    assert_eq!(s.iter().map(|s| s.id).collect::<Vec<_>>(), [2]);
    assert!(
        run(&mut q, 24 * MS).is_empty(),
        "nothing ends before the store"
    );
    assert!(q.store_done(25 * MS, s[0]));
    let done = run(&mut q, 25 * MS);
    assert_eq!(
        (done[0].id, done[0].at, done[0].outcome),
        (2, 25 * MS, Outcome::Good)
    );
    assert!(q.is_empty());
}

#[test]
fn the_depth_bounds_what_the_store_has_outstanding() {
    let config = QueueConfig {
        depth: 2,
        ..QueueConfig::default()
    };
    let mut drive = FixedDrive::new(0);
    drive.units = 64;
    let mut q = awaiting(config, drive);
    for id in 1..=5 {
        submit(&mut q, 0, read(id, id * 100, 0));
    }
    run(&mut q, 0);
    let first = started(&mut q);
    assert_eq!(first.len(), 2, "two in service: the store has two");
    assert!(q.store_done(MS, first[1]));
    let done = run(&mut q, MS);
    assert_eq!(done.iter().map(|c| c.id).collect::<Vec<_>>(), [2]);
    assert_eq!(
        started(&mut q).iter().map(|s| s.id).collect::<Vec<_>>(),
        [3]
    );
}

#[test]
fn an_active_limit_ends_a_command_the_store_has_not_answered() {
    let d = CdlDescriptor {
        t2cdlunits: T2CdlUnits::Us1,
        max_active_time: 5_000,
        max_active_time_policy: Policy::Abort,
        ..CdlDescriptor::default()
    };
    let config = QueueConfig {
        cdl: t2a(&[d]),
        ..QueueConfig::default()
    };
    let mut q = awaiting(config, FixedDrive::new(0));
    submit(&mut q, 0, read(1, 0, 1));
    run(&mut q, 0);
    let s = started(&mut q);
    let done = run(&mut q, 20 * MS);
    assert_eq!(done.len(), 1);
    assert_eq!(
        (done[0].at, done[0].outcome),
        (5 * MS, Outcome::AbortedDuringProcessing)
    );
    assert!(done[0].missed.active);
    // The store's late answer finds the command gone.
    assert!(!q.store_done(30 * MS, s[0]));
    assert!(q.is_empty());
    assert_eq!(q.next_event(), None);
}

#[test]
fn a_command_started_and_ended_in_one_advance_is_not_reported_started() {
    // Task management takes it out before the caller took the starts.
    let mut q = awaiting(QueueConfig::default(), FixedDrive::new(0));
    submit(&mut q, 0, read(1, 0, 0));
    run(&mut q, 0);
    assert!(q.abort(0, 1));
    assert!(started(&mut q).is_empty());
}
