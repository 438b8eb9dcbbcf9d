//! Duration limits over a real store (no drive model): the core, driven by hand, sees the
//! store's operations as a data plane would run them, and their ends come back whenever the
//! test says. A task ends at its store's completion; a CDL policy that fires while the store
//! works answers at once; the late data is dropped; an ended write holds its blocks until the
//! store has finished it (docs/cdl.md, "Limits in real time").

mod common;

use common::{nexus, request, sense_of};
use device::{
    Backing, Completion, DeviceQueue, DhCompletion, Event, Kept, LogicalUnit, LuConfig, Ns, Step,
    TaskId, Then,
};
use qos::order::Fifo;
use qos::{CdlDescriptor, CdlPage, CdlPages, Policy, QueueConfig, Scheduler};
use scsi::{Asc, SenseKey, Status};
use store::{Done, Op};

const MS: Ns = 1_000_000;
const BLOCKS: u64 = 1024;

/// A QoS logical unit without a drive model whose descriptor 1 (reads and writes) ends a
/// command still active after 10 ms (policy Fh), with a device queue of `depth`.
fn unit(depth: usize) -> LogicalUnit {
    let mut page = CdlPage::default();
    page.descriptors[0] = CdlDescriptor {
        t2cdlunits: qos::T2CdlUnits::Us1,
        max_active_time: 10_000,
        max_active_time_policy: Policy::Abort,
        ..CdlDescriptor::default()
    };
    let queue = DeviceQueue {
        queue: QueueConfig {
            depth,
            cdl: CdlPages {
                t2a: page,
                t2b: page,
            },
            ..QueueConfig::default()
        },
        scheduler: Scheduler::Policy(Box::new(Fifo)),
        drive: Box::new(drive::Instant),
        dh: DhCompletion::CheckCondition,
        dld_classes: [None; 8],
    };
    let config = LuConfig::new("iqn.test:t", 0, BLOCKS * 512);
    let backing = Backing {
        len: BLOCKS * 512,
        unmap_granularity: 0,
        allocated: None,
    };
    let mut lu = LogicalUnit::new(config, backing, Kept::default(), Some(queue)).unwrap();
    // The power-on unit attention.
    let n = nexus(1);
    let step = lu
        .command(0, &request(&n, 0, &[0; 6], &[]).arrival(), &mut Vec::new())
        .step;
    assert!(matches!(step, Step::Done(c) if c.status == Status::CheckCondition));
    lu
}

fn rw16(write: bool, lba: u64, dld: u8) -> [u8; 16] {
    scsi::encode::rw16(write, lba, 1, dld)
}

/// A command from nexus 1 with `tag` at `now`; it waits in the device queue.
fn submit(lu: &mut LogicalUnit, now: Ns, tag: u64, cdb: &[u8], data_out: &[u8]) -> TaskId {
    let n = nexus(1);
    let r = common::Request {
        tag,
        ..request(&n, 0, cdb, data_out)
    };
    match lu.command(now, &r.arrival(), &mut Vec::new()).step {
        Step::Wait(id) => id,
        other => panic!("{cdb:02x?}: {other:?}"),
    }
}

/// Runs what is due at `now`; the events that came out.
fn at(lu: &mut LogicalUnit, now: Ns) -> Vec<Event> {
    if lu.poll_timeout().is_some_and(|t| t <= now) {
        lu.handle_timeout(now);
    }
    std::iter::from_fn(|| lu.poll_event()).collect()
}

/// The store operation an event hands out.
fn io_of(e: &Event) -> &Op {
    match &e.then {
        Then::Io(op) => op,
        other => panic!("tag {}: {other:?}", e.tag),
    }
}

fn completion_of(e: &Event) -> &Completion {
    match &e.then {
        Then::Done(c, _) => c,
        other => panic!("tag {}: {other:?}", e.tag),
    }
}

#[test]
fn a_task_ends_when_its_store_does() {
    let mut lu = unit(4);
    let id = submit(&mut lu, 0, 1, &rw16(false, 5, 0), &[]);
    let events = at(&mut lu, 0);
    assert_eq!(events.len(), 1);
    assert!(matches!(
        io_of(&events[0]),
        Op::Read {
            offset: 2560,
            len: 512
        }
    ));
    // Nothing is due while the store works, however long it takes.
    assert_eq!(lu.poll_timeout(), None);
    let mut data = vec![7u8; 512];
    let step = lu.io_done(40 * MS, id, Done::Ok, &mut data);
    assert!(
        matches!(step, Step::Done(ref c) if *c == Completion::GOOD),
        "{step:?}"
    );
    assert_eq!(
        data,
        vec![7u8; 512],
        "the read data comes back with the answer"
    );
}

#[test]
fn the_queue_depth_bounds_the_operations_the_store_has() {
    let mut lu = unit(2);
    let ids: Vec<TaskId> = (1..=4)
        .map(|tag| submit(&mut lu, 0, tag, &rw16(false, tag * 8, 0), &[]))
        .collect();
    let events = at(&mut lu, 0);
    assert_eq!(events.iter().map(|e| e.tag).collect::<Vec<_>>(), [1, 2]);
    let step = lu.io_done(MS, ids[1], Done::Ok, &mut Vec::new());
    assert!(
        matches!(step, Step::Done(ref c) if *c == Completion::GOOD),
        "{step:?}"
    );
    let events = at(&mut lu, MS);
    assert_eq!(events.iter().map(|e| e.tag).collect::<Vec<_>>(), [3]);
    io_of(&events[0]);
}

#[test]
fn a_limit_ends_a_read_at_once_and_its_late_data_is_dropped() {
    let mut lu = unit(4);
    let id = submit(&mut lu, 0, 1, &rw16(false, 5, 1), &[]);
    io_of(&at(&mut lu, 0)[0]);
    assert_eq!(lu.poll_timeout(), Some(10 * MS));
    let events = at(&mut lu, 10 * MS);
    assert_eq!(events.len(), 1);
    let c = completion_of(&events[0]);
    assert_eq!(
        sense_of(c),
        (
            SenseKey::AbortedCommand,
            Asc::COMMAND_TIMEOUT_DURING_PROCESSING
        )
    );
    assert!(events[0].missed);
    // The store answers later: the data goes nowhere; the answer is the one given.
    let mut data = vec![9u8; 512];
    let step = lu.io_done(50 * MS, id, Done::Ok, &mut data);
    assert!(matches!(step, Step::Done(ref late) if late == c));
    assert!(data.is_empty());
    assert_eq!(lu.tasks(), 0);
}

#[test]
fn an_ended_write_holds_its_blocks_until_the_store_has_it() {
    let mut lu = unit(4);
    let write = submit(&mut lu, 0, 1, &rw16(true, 5, 1), &[1; 512]);
    io_of(&at(&mut lu, 0)[0]);
    let ended = at(&mut lu, 10 * MS);
    assert_eq!(completion_of(&ended[0]).status, Status::CheckCondition);
    // A read of the same block, and one of another: only the other goes to the store.
    let same = submit(&mut lu, 11 * MS, 2, &rw16(false, 5, 0), &[]);
    let other = submit(&mut lu, 11 * MS, 3, &rw16(false, 6, 0), &[]);
    let events = at(&mut lu, 11 * MS);
    assert_eq!(events.iter().map(|e| e.tag).collect::<Vec<_>>(), [3]);
    let step = lu.io_done(12 * MS, other, Done::Ok, &mut vec![0; 512]);
    assert!(
        matches!(step, Step::Done(ref c) if *c == Completion::GOOD),
        "{step:?}"
    );
    assert!(
        at(&mut lu, 20 * MS).is_empty(),
        "the read waits for the write"
    );
    // The write reaches the store: the read goes.
    lu.io_done(30 * MS, write, Done::Ok, &mut Vec::new());
    let events = at(&mut lu, 30 * MS);
    assert_eq!(events.len(), 1);
    assert!(matches!(io_of(&events[0]), Op::Read { offset: 2560, .. }));
    assert_eq!(events[0].task, same);
}

#[test]
fn a_transport_that_drops_an_ended_task_operation_frees_its_blocks() {
    let mut lu = unit(4);
    let write = submit(&mut lu, 0, 1, &rw16(true, 5, 1), &[1; 512]);
    io_of(&at(&mut lu, 0)[0]);
    at(&mut lu, 10 * MS);
    let same = submit(&mut lu, 11 * MS, 2, &rw16(false, 5, 0), &[]);
    assert!(at(&mut lu, 11 * MS).is_empty());
    // The transport had answered the write before it could run it.
    lu.io_dropped(12 * MS, write);
    let events = at(&mut lu, 12 * MS);
    assert_eq!(events.iter().map(|e| e.task).collect::<Vec<_>>(), [same]);
}
