//! A logical unit with a device queue, driven in virtual time through real CDBs: CDL policies
//! for every limit kind (status, sense, data moved or not), task attributes, task management.

mod common;

use common::{request, Collect, Request};
use device::{
    Completion, DeviceQueue, DhCompletion, LuConfig, Next, Nexus, Ns, Submitted, TaskAttribute,
    TaskId, TaskManagement, TmfResponse, Unit,
};
use drive::{Drive, MediaOp, MediaOutcome, Service};
use qos::order::{Fifo, OrderingPolicy, Sptf};
use qos::{CdlDescriptor, CdlPage, CdlPages, Policy, QueueConfig, Scheduler};
use scsi::{Asc, SenseKey, Status};
use std::collections::BTreeMap;
use std::sync::Arc;
use store::{RamStore, Store};

const MS: Ns = 1_000_000;
const BLOCKS: u64 = 1 << 16;

/// Every op takes 10 ms, except LBAs listed in `slow` (their own time), and a flush 25 ms;
/// positioning is the LBA distance from the last started op, so positional ordering has
/// something to order.
struct TestDrive {
    slow: Vec<(u64, Ns)>,
    head: u64,
}

impl Drive for TestDrive {
    fn parallelism(&self) -> usize {
        1
    }
    fn positioning_time(&self, _: Ns, op: &MediaOp) -> Ns {
        op.lba.abs_diff(self.head)
    }
    fn start(&mut self, now: Ns, op: &MediaOp) -> Service {
        self.head = op.lba;
        let service = self
            .slow
            .iter()
            .find(|(lba, _)| *lba == op.lba)
            .map_or(10 * MS, |(_, s)| *s);
        Service {
            done_at: now + service,
            outcome: MediaOutcome::Ok,
            recovery: 0,
        }
    }
    fn flush(&mut self, now: Ns) -> Ns {
        now + FLUSH
    }
}

const FLUSH: Ns = 25 * MS;

/// A timed LU, the nexuses that talk to it, and the tasks they have in it (with their
/// Data-Out, as their transport keeps it), driven as a server drives it but in virtual
/// time: every call's deliveries collect in one sink, handled by `run`.
struct Bench {
    lu: Arc<Unit>,
    store: Arc<RamStore>,
    tasks: BTreeMap<(u64, u64), (TaskId, Vec<u8>)>,
    nexuses: Vec<Nexus>,
    sink: Collect,
}

/// What became of one task.
#[derive(Debug)]
struct Done {
    tag: u64,
    at: Ns,
    completion: Completion,
    data_in: Vec<u8>,
}

/// A descriptor with one limit of `ms` (in 1 µs units, so at most 65 ms).
fn descriptor(kind: &str, ms: u16, policy: Policy) -> CdlDescriptor {
    let mut d = CdlDescriptor {
        t2cdlunits: qos::T2CdlUnits::Us1,
        ..CdlDescriptor::default()
    };
    let value = ms * 1000;
    match kind {
        "inactive" => {
            d.max_inactive_time = value;
            d.max_inactive_time_policy = policy;
        }
        "active" => {
            d.max_active_time = value;
            d.max_active_time_policy = policy;
        }
        _ => {
            d.command_duration_guideline = value;
            d.command_duration_guideline_policy = policy;
        }
    }
    d
}

/// A timed unit over `store`, configured as `config`, queued by `queue`.
fn timed_unit(config: LuConfig, store: Arc<RamStore>, queue: DeviceQueue) -> Arc<Unit> {
    let plane = common::plane_over(&config, store);
    Arc::new(Unit::build(config, plane, Some(queue)).unwrap())
}

impl Bench {
    fn new(
        read: &[CdlDescriptor],
        order: Box<dyn OrderingPolicy + Send>,
        dh: DhCompletion,
    ) -> Self {
        Self::with_drive(read, order, dh, Vec::new())
    }

    fn with_drive(
        read: &[CdlDescriptor],
        order: Box<dyn OrderingPolicy + Send>,
        dh: DhCompletion,
        slow: Vec<(u64, Ns)>,
    ) -> Self {
        let mut t2a = CdlPage::default();
        t2a.descriptors[..read.len()].copy_from_slice(read);
        let store = Arc::new(RamStore::new(BLOCKS * 512).unwrap());
        // Every block holds its LBA's low byte, so reads show what they moved.
        for lba in [100u64, 200, 300, 400, 500] {
            store.write_at(lba * 512, &[lba as u8; 512]).unwrap();
        }
        let queue = DeviceQueue {
            queue: QueueConfig {
                cdl: CdlPages { t2a, t2b: t2a },
                ..QueueConfig::default()
            },
            scheduler: Scheduler::Policy(order),
            drive: Box::new(TestDrive { slow, head: 0 }),
            dh,
            dld_classes: [None; 8],
        };
        let config = LuConfig::new("iqn.test:t", 0, BLOCKS * 512);
        let lu = timed_unit(config, store.clone(), queue);
        let mut b = Bench {
            lu,
            store,
            tasks: BTreeMap::new(),
            nexuses: Vec::new(),
            sink: Collect::default(),
        };
        for id in 1..=2 {
            b.nexuses.push(common::nexus(id));
        }
        b.clear_attentions();
        b
    }

    /// Consume the power-on unit attention of both nexuses.
    fn clear_attentions(&mut self) {
        for n in &self.nexuses {
            let mut data_in = Vec::new();
            self.lu.command(
                0,
                &request(n, 0, &[0; 6], &[]).arrival(),
                &mut data_in,
                &mut self.sink,
            );
        }
    }

    /// Submits a command from nexus `n` (1 or 2) at `now`; `Some` if it completed at once.
    fn submit(
        &mut self,
        now: Ns,
        n: u64,
        tag: u64,
        attribute: TaskAttribute,
        cdb: &[u8],
        data_out: &[u8],
    ) -> Option<Completion> {
        let nexus = &self.nexuses[n as usize - 1];
        let req = Request {
            tag,
            attribute,
            ..request(nexus, 0, cdb, data_out)
        };
        let mut data_in = Vec::new();
        match self
            .lu
            .command(now, &req.arrival(), &mut data_in, &mut self.sink)
            .1
        {
            Submitted::Done(c) => Some(c),
            Submitted::Queued(task) => {
                self.tasks.insert((n, tag), (task, data_out.to_vec()));
                None
            }
            other => panic!("{cdb:02x?}: {other:?}"),
        }
    }

    /// A command that completes at once, from nexus 1: its status and data-in.
    fn at_once(&mut self, tag: u64, cdb: &[u8], data_out: &[u8]) -> (Completion, Vec<u8>) {
        let req = Request {
            tag,
            ..request(&self.nexuses[0], 0, cdb, data_out)
        };
        let mut data_in = Vec::new();
        match self
            .lu
            .command(0, &req.arrival(), &mut data_in, &mut self.sink)
            .1
        {
            Submitted::Done(c) => (c, data_in),
            other => panic!("{cdb:02x?}: {other:?}"),
        }
    }

    fn read(&mut self, now: Ns, tag: u64, lba: u64, dld: u8) -> Option<Completion> {
        self.submit(
            now,
            1,
            tag,
            TaskAttribute::Simple,
            &read16(lba, 1, dld),
            &[],
        )
    }

    /// Task management from nexus `n` at `now`.
    fn tmf(&mut self, now: Ns, n: u64, tmf: TaskManagement) -> TmfResponse {
        let nexus = &self.nexuses[n as usize - 1];
        self.lu.task_management(now, nexus, tmf, &mut self.sink)
    }

    /// When the unit's driver must next run.
    fn next_event(&self) -> Option<Ns> {
        self.lu.with(|core| core.poll_timeout())
    }

    /// The driver runs at `now`.
    fn advance(&mut self, now: Ns) {
        self.lu.advance(now, &mut self.sink);
    }

    /// Runs the clock up to `until`, finishing every task that leaves (for all nexuses): what
    /// the unit delivers is handled as its transport would (an operation run with the task's
    /// buffers, a status recorded, an abort recorded as data-in "aborted").
    fn run(&mut self, until: Ns) -> Vec<(u64, Done)> {
        let mut done = Vec::new();
        let mut now = 0;
        loop {
            for f in std::mem::take(&mut self.sink.finished) {
                let Some((task, data_out)) = self.tasks.get(&(f.nexus, f.tag)).cloned() else {
                    continue;
                };
                assert_eq!(task, f.task, "a delivery names its task");
                let ended = match f.then {
                    Next::Aborted => Some((Completion::GOOD, b"aborted".to_vec())),
                    Next::Done {
                        completion,
                        data_in,
                        ..
                    } => Some((completion, data_in)),
                    Next::Run(op) => {
                        let mut data_in = Vec::new();
                        match self
                            .lu
                            .run(now, task, op, &data_out, &mut data_in, &mut self.sink)
                        {
                            Submitted::Done(c) => Some((c, data_in)),
                            Submitted::Aborted => Some((Completion::GOOD, b"aborted".to_vec())),
                            _ => None,
                        }
                    }
                };
                if let Some((completion, data_in)) = ended {
                    self.tasks.remove(&(f.nexus, f.tag));
                    done.push((
                        f.nexus,
                        Done {
                            tag: f.tag,
                            at: now,
                            completion,
                            data_in,
                        },
                    ));
                }
            }
            if !self.sink.finished.is_empty() {
                // What the calls at `now` delivered is handled at `now`, before time moves.
                continue;
            }
            match self.next_event().filter(|t| *t <= until) {
                Some(t) => {
                    now = now.max(t);
                    self.advance(now);
                }
                None => break,
            }
        }
        done
    }
}

fn read16(lba: u64, blocks: u32, dld: u8) -> [u8; 16] {
    scsi::encode::rw16(false, lba, blocks, dld)
}

fn write16(lba: u64, blocks: u32, dld: u8) -> [u8; 16] {
    scsi::encode::rw16(true, lba, blocks, dld)
}

fn sense(c: &Completion) -> Option<(SenseKey, Asc)> {
    c.sense.as_ref().map(|s| (s.key, s.asc))
}

/// What a limited read ends with, and when.
#[derive(Debug, PartialEq)]
enum Expect {
    /// GOOD with the block's data, at this time (ms).
    Data(u64),
    /// This status and sense, no data, at this time (ms).
    Ended(Status, SenseKey, Asc, u64),
}

/// The limited command is C (DLD 1, LBA 300). "queued": A and B (LBA 100, 200, no limit) are
/// submitted before it, so C waits 20 ms and runs 20–30 ms; "slow": C runs alone for 30 ms.
fn limited_read(kind: &str, policy: Policy, scene: &str, dh: DhCompletion) -> Expect {
    let slow = if scene == "slow" {
        vec![(300, 30 * MS)]
    } else {
        Vec::new()
    };
    let mut b = Bench::with_drive(&[descriptor(kind, 15, policy)], Box::new(Fifo), dh, slow);
    if scene == "queued" {
        assert!(b.read(0, 1, 100, 0).is_none());
        assert!(b.read(0, 2, 200, 0).is_none());
    }
    assert!(b.read(0, 3, 300, 1).is_none());
    let done = b.run(u64::MAX);
    let (_, c) = done.iter().find(|(_, d)| d.tag == 3).expect("C finished");
    if scene == "queued" {
        // The unlimited reads are unaffected.
        for tag in [1, 2] {
            let (_, d) = done.iter().find(|(_, d)| d.tag == tag).unwrap();
            assert_eq!(d.completion, Completion::GOOD);
        }
    }
    match (c.completion.status, sense(&c.completion)) {
        (Status::Good, None) => {
            assert_eq!(c.data_in, vec![44u8; 512], "LBA 300 holds 300 mod 256");
            Expect::Data(c.at / MS)
        }
        (status, Some((key, asc))) => {
            assert!(c.data_in.is_empty(), "no data with {key:?} {asc:?}");
            Expect::Ended(status, key, asc, c.at / MS)
        }
        (status, None) => panic!("{status:?} without sense"),
    }
}

const CC: Status = Status::CheckCondition;
const ABORTED: SenseKey = SenseKey::AbortedCommand;

#[test]
fn every_policy_of_every_limit_kind_over_real_cdbs() {
    use Policy::*;
    let dh_cc = Expect::Ended(CC, SenseKey::Completed, Asc::DATA_CURRENTLY_UNAVAILABLE, 15);
    let cases = [
        // Inactive: C would start at 20 ms, its limit is 15 ms.
        ("inactive", CompleteEarliest, "queued", Expect::Data(30)),
        ("inactive", CompleteUnavailable, "queued", dh_cc),
        (
            "inactive",
            Abort,
            "queued",
            Expect::Ended(CC, ABORTED, Asc::COMMAND_TIMEOUT_BEFORE_PROCESSING, 15),
        ),
        // Active: C runs 30 ms against a 15 ms limit.
        ("active", CompleteEarliest, "slow", Expect::Data(30)),
        (
            "active",
            CompleteUnavailable,
            "slow",
            Expect::Ended(CC, SenseKey::Completed, Asc::DATA_CURRENTLY_UNAVAILABLE, 15),
        ),
        (
            "active",
            AbortRecovery,
            "slow",
            Expect::Ended(
                CC,
                ABORTED,
                Asc::COMMAND_TIMEOUT_DURING_PROCESSING_DUE_TO_ERROR_RECOVERY,
                15,
            ),
        ),
        (
            "active",
            Abort,
            "slow",
            Expect::Ended(CC, ABORTED, Asc::COMMAND_TIMEOUT_DURING_PROCESSING, 15),
        ),
        // Guideline: missed before processing ("queued") or during it ("slow").
        ("guideline", CompleteEarliest, "queued", Expect::Data(30)),
        // 1h: descriptor 2 has no limits, so C goes on as if unlimited.
        ("guideline", ContinueNextLimit, "queued", Expect::Data(30)),
        ("guideline", ContinueNoLimit, "queued", Expect::Data(30)),
        (
            "guideline",
            CompleteUnavailable,
            "queued",
            Expect::Ended(CC, SenseKey::Completed, Asc::DATA_CURRENTLY_UNAVAILABLE, 15),
        ),
        (
            "guideline",
            Abort,
            "queued",
            Expect::Ended(CC, ABORTED, Asc::COMMAND_TIMEOUT_BEFORE_PROCESSING, 15),
        ),
        (
            "guideline",
            Abort,
            "slow",
            Expect::Ended(CC, ABORTED, Asc::COMMAND_TIMEOUT_DURING_PROCESSING, 15),
        ),
    ];
    for (kind, policy, scene, expected) in cases {
        assert_eq!(
            limited_read(kind, policy, scene, DhCompletion::CheckCondition),
            expected,
            "{kind} {policy:?} {scene}"
        );
    }
}

#[test]
fn dh_can_complete_with_good_status_and_sense() {
    let e = limited_read(
        "inactive",
        Policy::CompleteUnavailable,
        "queued",
        DhCompletion::GoodWithSense,
    );
    assert_eq!(
        e,
        Expect::Ended(
            Status::Good,
            SenseKey::Completed,
            Asc::DATA_CURRENTLY_UNAVAILABLE,
            15
        )
    );
}

#[test]
fn a_fast_failed_write_changes_nothing_and_a_good_one_lands_at_completion() {
    let mut b = Bench::new(
        &[descriptor("inactive", 15, Policy::Abort)],
        Box::new(Fifo),
        DhCompletion::CheckCondition,
    );
    let data = vec![0xABu8; 512];
    assert!(b.read(0, 1, 100, 0).is_none());
    assert!(b.read(0, 2, 200, 0).is_none());
    // Limited write: misses its inactive limit and is aborted.
    assert!(b
        .submit(0, 1, 3, TaskAttribute::Simple, &write16(400, 1, 1), &data)
        .is_none());
    // Unlimited write: lands when it completes, not before.
    assert!(b
        .submit(0, 1, 4, TaskAttribute::Simple, &write16(500, 1, 0), &data)
        .is_none());
    let mut block = vec![0u8; 512];
    b.store.read_at(500 * 512, &mut block).unwrap();
    assert_eq!(block, vec![500u16 as u8; 512], "not written while queued");
    let done = b.run(u64::MAX);
    let ended = |tag| {
        done.iter()
            .find(|(_, d)| d.tag == tag)
            .unwrap()
            .1
            .completion
            .clone()
    };
    assert_eq!(
        sense(&ended(3)),
        Some((ABORTED, Asc::COMMAND_TIMEOUT_BEFORE_PROCESSING))
    );
    assert_eq!(ended(4), Completion::GOOD);
    b.store.read_at(400 * 512, &mut block).unwrap();
    assert_eq!(
        block,
        vec![400u16 as u8; 512],
        "aborted write left the medium alone"
    );
    b.store.read_at(500 * 512, &mut block).unwrap();
    assert_eq!(block, data);
}

#[test]
fn ordered_tasks_wait_for_older_ones_and_hold_back_younger_ones() {
    let mut b = Bench::new(&[], Box::new(Sptf), DhCompletion::CheckCondition);
    assert!(b.read(0, 1, 1000, 0).is_none());
    b.advance(0);
    // SPTF alone would serve 1001 and 1002 before 5000.
    let ordered = read16(5000, 1, 0);
    assert!(b
        .submit(MS, 1, 2, TaskAttribute::Ordered, &ordered, &[])
        .is_none());
    assert!(b.read(MS, 3, 1001, 0).is_none());
    assert!(b.read(MS, 4, 1002, 0).is_none());
    // A command that does not touch the medium waits behind the ORDERED task too.
    assert!(b
        .submit(MS, 1, 5, TaskAttribute::Simple, &[0; 6], &[])
        .is_none());
    let done = b.run(u64::MAX);
    let order: Vec<(u64, u64)> = done.iter().map(|(_, d)| (d.tag, d.at / MS)).collect();
    assert_eq!(order, [(1, 10), (2, 20), (5, 20), (4, 30), (3, 40)]);
    assert!(done.iter().all(|(_, d)| d.completion == Completion::GOOD));
}

#[test]
fn head_of_queue_tasks_start_next() {
    let mut b = Bench::new(&[], Box::new(Fifo), DhCompletion::CheckCondition);
    for (tag, lba) in [(1, 100), (2, 200), (3, 300)] {
        assert!(b.read(0, tag, lba, 0).is_none());
    }
    b.advance(0);
    let hoq = read16(400, 1, 0);
    assert!(b
        .submit(MS, 1, 4, TaskAttribute::HeadOfQueue, &hoq, &[])
        .is_none());
    let done = b.run(u64::MAX);
    let order: Vec<u64> = done.iter().map(|(_, d)| d.tag).collect();
    assert_eq!(order, [1, 4, 2, 3]);
}

#[test]
fn abort_task_of_a_queued_and_of_an_active_command() {
    let mut b = Bench::new(&[], Box::new(Fifo), DhCompletion::CheckCondition);
    for (tag, lba) in [(1, 100), (2, 200), (3, 300)] {
        assert!(b.read(0, tag, lba, 0).is_none());
    }
    b.advance(0);
    // Queued: 2 goes without a completion.
    assert_eq!(
        b.tmf(MS, 1, TaskManagement::AbortTask(2)),
        TmfResponse::FunctionComplete
    );
    // Active: 1 is abandoned at 5 ms and frees the actuator, so 3 runs 5–15 ms.
    assert_eq!(
        b.tmf(5 * MS, 1, TaskManagement::AbortTask(1)),
        TmfResponse::FunctionComplete
    );
    assert_eq!(
        b.tmf(5 * MS, 1, TaskManagement::AbortTask(1)),
        TmfResponse::NoSuchTask
    );
    let done = b.run(u64::MAX);
    // The aborted tasks are delivered to their transport as aborted (it forgets them). 1's
    // store operation was delivered when the queue started it, before the aborts: here its
    // transport runs it late, and learns of the abort from its end.
    let order: Vec<(u64, u64, bool)> = done
        .iter()
        .map(|(_, d)| (d.tag, d.at / MS, d.data_in == b"aborted"))
        .collect();
    assert_eq!(order, [(1, 0, true), (2, 0, true), (3, 15, false)]);
}

#[test]
fn logical_unit_reset_aborts_every_task_and_tells_the_other_nexus_transport() {
    let mut b = Bench::new(&[], Box::new(Fifo), DhCompletion::CheckCondition);
    assert!(b.read(0, 1, 100, 0).is_none());
    assert!(b
        .submit(0, 2, 7, TaskAttribute::Simple, &read16(200, 1, 0), &[])
        .is_none());
    b.advance(0);
    assert_eq!(
        b.tmf(MS, 1, TaskManagement::LogicalUnitReset),
        TmfResponse::FunctionComplete
    );
    let done = b.run(u64::MAX);
    // Both nexuses' tasks are delivered to their transports as aborted; nothing completes.
    let ended: Vec<(u64, u64, &[u8])> = done
        .iter()
        .map(|(n, d)| (*n, d.tag, &d.data_in[..]))
        .collect();
    assert_eq!(ended, [(1, 1, &b"aborted"[..]), (2, 7, b"aborted")]);
    assert_eq!(b.lu.with(|c| c.tasks()), 0);
    // Both nexuses see the reset.
    for n in 1..=2 {
        let c = b
            .submit(2 * MS, n, 9, TaskAttribute::Simple, &[0; 6], &[])
            .unwrap();
        assert_eq!(
            sense(&c),
            Some((
                SenseKey::UnitAttention,
                Asc::BUS_DEVICE_RESET_FUNCTION_OCCURRED
            ))
        );
    }
}

/// PREEMPT AND ABORT (SPC-4 §5.13.11.2.6) aborts the preempted nexus's tasks, queued and
/// active: they leave without status (TAS = 0) and the nexus learns why from a unit attention.
#[test]
fn preempt_and_abort_aborts_the_preempted_nexus_tasks() {
    let mut b = Bench::new(&[], Box::new(Fifo), DhCompletion::CheckCondition);
    let prout = |sa: u8, key: u64, sa_key: u64| {
        let mut list = vec![0u8; 24];
        list[0..8].copy_from_slice(&key.to_be_bytes());
        list[8..16].copy_from_slice(&sa_key.to_be_bytes());
        // TYPE Exclusive Access where the service action uses one.
        ([0x5F, sa, 0x03, 0, 0, 0, 0, 0, 24, 0], list)
    };
    for (n, key) in [(1, 0xA), (2, 0xB)] {
        let (cdb, list) = prout(0x00, 0, key);
        let c = b.submit(0, n, 1, TaskAttribute::Simple, &cdb, &list);
        assert_eq!(c, Some(Completion::GOOD));
    }
    for (tag, lba) in [(10, 100), (11, 200)] {
        let c = b.submit(0, 2, tag, TaskAttribute::Simple, &read16(lba, 1, 0), &[]);
        assert!(c.is_none());
    }
    assert!(b.read(0, 12, 300, 0).is_none());
    b.advance(0);
    let (cdb, list) = prout(0x05, 0xA, 0xB);
    let c = b.submit(5 * MS, 1, 13, TaskAttribute::Simple, &cdb, &list);
    assert_eq!(c, Some(Completion::GOOD));
    let done = b.run(u64::MAX);
    let ended: Vec<(u64, u64, bool)> = done
        .iter()
        .map(|(n, d)| (*n, d.tag, d.data_in == b"aborted"))
        .collect();
    assert_eq!(ended, [(2, 10, true), (2, 11, true), (1, 12, false)]);
    assert_eq!(done[2].1.completion, Completion::GOOD);
    let c = b
        .submit(50 * MS, 2, 20, TaskAttribute::Simple, &[0; 6], &[])
        .unwrap();
    assert_eq!(
        sense(&c),
        Some((SenseKey::UnitAttention, Asc::REGISTRATIONS_PREEMPTED))
    );
}

#[test]
fn a_second_task_with_the_same_tag_is_an_overlapped_command() {
    let mut b = Bench::new(&[], Box::new(Fifo), DhCompletion::CheckCondition);
    assert!(b.read(0, 1, 100, 0).is_none());
    let c = b.read(0, 1, 200, 0).expect("refused at once");
    assert_eq!(
        sense(&c),
        Some((ABORTED, Asc::OVERLAPPED_COMMANDS_ATTEMPTED))
    );
    // The same tag on the other nexus is another task.
    assert!(b
        .submit(0, 2, 1, TaskAttribute::Simple, &read16(200, 1, 0), &[])
        .is_none());
    assert_eq!(b.run(u64::MAX).len(), 2);
}

#[test]
fn bad_commands_fail_before_they_are_timed() {
    let mut b = Bench::new(&[], Box::new(Fifo), DhCompletion::CheckCondition);
    let c = b.read(0, 1, BLOCKS, 0).expect("at once");
    assert_eq!(
        sense(&c),
        Some((SenseKey::IllegalRequest, Asc::LBA_OUT_OF_RANGE))
    );
    assert_eq!(b.next_event(), None);
}

/// MODE SELECT(10) of one T2A page, as cdladm sends it (PF = 1, SP as asked).
fn select_t2a(b: &mut Bench, now: Ns, page: &CdlPage, save: bool) -> Completion {
    let mut data = vec![0u8; 8];
    data.extend_from_slice(&page.encode(qos::CdlPageKind::T2A));
    let len = data.len() as u16;
    let mut cdb = [0u8; 10];
    cdb[0] = 0x55;
    cdb[1] = 0x10 | u8::from(save);
    cdb[7..9].copy_from_slice(&len.to_be_bytes());
    b.submit(now, 1, 90, TaskAttribute::Simple, &cdb, &data)
        .expect("MODE SELECT runs at once")
}

/// MODE SENSE(10), DBD, current values of page 0Ah subpage `subpage`: the page bytes.
fn sense_page(b: &mut Bench, subpage: u8, pc: u8) -> Vec<u8> {
    let cdb = [0x5A, 0x08, pc << 6 | 0x0A, subpage, 0, 0, 0, 0x02, 0x00, 0];
    let (c, mut data) = b.at_once(91, &cdb, &[]);
    assert_eq!(c, Completion::GOOD);
    data.split_off(8)
}

#[test]
fn a_mode_page_change_applies_to_commands_that_arrive_after_it() {
    let mut b = Bench::new(
        &[descriptor("inactive", 15, Policy::Abort)],
        Box::new(Fifo),
        DhCompletion::CheckCondition,
    );
    assert!(b.read(0, 1, 100, 0).is_none());
    assert!(b.read(0, 2, 200, 0).is_none());
    assert!(b.read(0, 3, 300, 1).is_none());
    // Descriptor 1 loses its limit while C waits.
    assert_eq!(
        select_t2a(&mut b, MS, &CdlPage::default(), false),
        Completion::GOOD
    );
    let mut empty = CdlPage::default().encode(qos::CdlPageKind::T2A);
    empty[0] |= 0x80; // PS
    assert_eq!(sense_page(&mut b, 0x07, 0), empty);
    assert!(b.read(MS, 4, 400, 1).is_none());
    let done = b.run(u64::MAX);
    let ended = |tag| {
        done.iter()
            .find(|(_, d)| d.tag == tag)
            .unwrap()
            .1
            .completion
            .clone()
    };
    assert_eq!(
        sense(&ended(3)),
        Some((ABORTED, Asc::COMMAND_TIMEOUT_BEFORE_PROCESSING)),
        "C keeps the descriptor it arrived with"
    );
    assert_eq!(ended(4), Completion::GOOD, "D arrived under the new page");
    // The other nexus is told the mode parameters changed.
    let c = b
        .submit(50 * MS, 2, 9, TaskAttribute::Simple, &[0; 6], &[])
        .unwrap();
    assert_eq!(
        sense(&c),
        Some((SenseKey::UnitAttention, Asc::MODE_PARAMETERS_CHANGED))
    );
}

#[test]
fn a_bad_policy_in_mode_select_is_refused_with_its_field_pointer() {
    let mut b = Bench::new(&[], Box::new(Fifo), DhCompletion::CheckCondition);
    let mut bytes = CdlPage::default().encode(qos::CdlPageKind::T2A);
    // Descriptor 1's inactive policy Eh (abort-recovery) is allowed for active limits only.
    bytes[8 + 6] = 0xE0;
    let mut data = vec![0u8; 8];
    data.extend_from_slice(&bytes);
    let mut cdb = [0u8; 10];
    cdb[0] = 0x55;
    cdb[1] = 0x10;
    cdb[7..9].copy_from_slice(&(data.len() as u16).to_be_bytes());
    let c = b
        .submit(0, 1, 5, TaskAttribute::Simple, &cdb, &data)
        .unwrap();
    let s = c.sense.expect("sense");
    assert_eq!(
        (s.key, s.asc),
        (
            SenseKey::IllegalRequest,
            Asc::INVALID_FIELD_IN_PARAMETER_LIST
        )
    );
    let field = s.field.expect("field pointer");
    assert_eq!((field.byte, field.bit), (8 + 8 + 6, Some(7)));
}

/// The four counters of one parameter of the CDL statistics log page (LOG SENSE 19h/21h):
/// code (2 bytes), control, length 10h, then four big-endian counters.
fn cdl_counters(b: &mut Bench, code: u16) -> [u32; 4] {
    let cdb = [0x4D, 0, 0x40 | 0x19, 0x21, 0, 0, 0, 0x10, 0x00, 0];
    let (c, page) = b.at_once(9, &cdb, &[]);
    assert_eq!(c, Completion::GOOD);
    let mut at = 4;
    while at + 4 <= page.len() {
        let len = usize::from(page[at + 3]);
        if u16::from_be_bytes([page[at], page[at + 1]]) == code {
            let c = &page[at + 4..at + 4 + len];
            return std::array::from_fn(|i| {
                u32::from_be_bytes([c[4 * i], c[4 * i + 1], c[4 * i + 2], c[4 * i + 3]])
            });
        }
        at += 4 + len;
    }
    panic!("no parameter {code:04x}");
}

#[test]
fn log_sense_counts_commands_and_misses_per_descriptor() {
    let mut b = Bench::new(
        &[
            descriptor("inactive", 15, Policy::CompleteEarliest),
            descriptor("guideline", 60, Policy::CompleteEarliest),
        ],
        Box::new(Fifo),
        DhCompletion::CheckCondition,
    );
    assert!(b.read(0, 1, 100, 0).is_none());
    assert!(b.read(0, 2, 200, 2).is_none());
    assert!(b.read(0, 3, 300, 1).is_none());
    assert!(b.read(0, 4, 400, 1).is_none());
    b.run(u64::MAX);
    // Descriptor 1: two commands; both waited past 15 ms (C started at 20, D at 30).
    assert_eq!(cdl_counters(&mut b, 0x21), [2, 0, 2, 2]);
    // Descriptor 2: one command, within its 60 ms guideline, no inactive/active miss.
    assert_eq!(cdl_counters(&mut b, 0x22), [0, 0, 0, 1]);
    assert_eq!(cdl_counters(&mut b, 0x41), [0, 0, 0, 0]);
}

#[test]
fn log_select_resets_the_cdl_statistics() {
    let mut b = Bench::new(
        &[descriptor("inactive", 15, Policy::CompleteEarliest)],
        Box::new(Fifo),
        DhCompletion::CheckCondition,
    );
    // 10 ms each, one after the other: the third starts at 20 ms, past its 15 ms.
    for tag in 1..=3 {
        assert!(b.read(0, tag, tag * 100, 1).is_none());
    }
    b.run(u64::MAX);
    assert_eq!(cdl_counters(&mut b, 0x21), [1, 0, 1, 3]);
    // SP = 1 (no log parameters are saved) and a parameter list (none is changeable) are
    // refused at their fields, and change nothing.
    let refused = |b: &mut Bench, cdb: &[u8]| {
        let (c, _) = b.at_once(10, cdb, &[]);
        let s = c.sense.expect("sense");
        assert_eq!(
            (s.key, s.asc),
            (SenseKey::IllegalRequest, Asc::INVALID_FIELD_IN_CDB)
        );
        let f = s.field.expect("field pointer");
        (f.byte, f.bit)
    };
    assert_eq!(
        refused(&mut b, &[0x4C, 0x03, 0x59, 0x21, 0, 0, 0, 0, 0, 0]),
        (1, Some(0))
    );
    assert_eq!(
        refused(&mut b, &[0x4C, 0x02, 0x59, 0x21, 0, 0, 0, 0, 4, 0]),
        (8, Some(2))
    );
    assert_eq!(
        refused(&mut b, &[0x4C, 0x02, 0x59, 0x20, 0, 0, 0, 0, 0, 0]),
        (3, None)
    );
    // A threshold reset changes nothing: the page keeps no thresholds.
    let (c, _) = b.at_once(11, &[0x4C, 0x02, 0x19, 0x21, 0, 0, 0, 0, 0, 0], &[]);
    assert_eq!(c, Completion::GOOD);
    assert_eq!(cdl_counters(&mut b, 0x21), [1, 0, 1, 3]);
    // PCR = 1, PC = 01b (cumulative values): the counters start again from zero.
    let (c, _) = b.at_once(12, &[0x4C, 0x02, 0x59, 0x21, 0, 0, 0, 0, 0, 0], &[]);
    assert_eq!(c, Completion::GOOD);
    assert_eq!(cdl_counters(&mut b, 0x21), [0, 0, 0, 0]);
    let later = 10_000_000_000;
    assert!(b.read(later, 4, 400, 1).is_none());
    b.run(u64::MAX);
    assert_eq!(cdl_counters(&mut b, 0x21), [0, 0, 0, 1]);
}

#[test]
fn rsoc_reports_the_cdl_pages_on_a_logical_unit_with_a_device_queue() {
    let mut b = Bench::new(&[], Box::new(Fifo), DhCompletion::CheckCondition);
    // One command, READ(16), the allocation length Linux uses.
    let cdb = [0xA3, 0x0C, 0x01, 0x88, 0, 0, 0, 0, 0, 20, 0, 0];
    let (c, data) = b.at_once(1, &cdb, &[]);
    assert_eq!(c, Completion::GOOD);
    assert_eq!(data.len(), 20);
    // RWCDLP = 1, CDLP = 01b (T2A), SUPPORT = 011b: what Linux needs to set cdl_supported.
    assert_eq!((data[0] & 1, data[1] >> 3 & 3, data[1] & 7), (1, 1, 3));
}

#[test]
fn saved_pages_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lun.modes");
    let page = {
        let mut p = CdlPage::default();
        p.descriptors[0] = descriptor("guideline", 50, Policy::Abort);
        p
    };
    let build = || {
        let mut config = LuConfig::new("iqn.test:t", 0, BLOCKS * 512);
        config.saved_mode_path = Some(path.clone());
        let queue = DeviceQueue {
            queue: QueueConfig::default(),
            scheduler: Scheduler::Policy(Box::new(Fifo)),
            drive: Box::new(TestDrive {
                slow: Vec::new(),
                head: 0,
            }),
            dh: DhCompletion::CheckCondition,
            dld_classes: [None; 8],
        };
        let store = Arc::new(RamStore::new(BLOCKS * 512).unwrap());
        timed_unit(config, store, queue)
    };
    let mut b = Bench::new(&[], Box::new(Fifo), DhCompletion::CheckCondition);
    let fresh = |b: &mut Bench| {
        b.lu = build();
        // Clear the new LU's power-on unit attention for nexus 1.
        let c = b
            .submit(0, 1, 80, TaskAttribute::Simple, &[0; 6], &[])
            .unwrap();
        assert_eq!(sense(&c).map(|s| s.0), Some(SenseKey::UnitAttention));
    };
    fresh(&mut b);
    assert_eq!(select_t2a(&mut b, 0, &page, true), Completion::GOOD);
    assert!(path.exists());
    // Restart: the saved values are current at power on; the defaults stay the defaults.
    fresh(&mut b);
    let t2a = page.encode(qos::CdlPageKind::T2A);
    let mut saved = t2a;
    saved[0] |= 0x80; // PS: the page can be saved
    assert_eq!(sense_page(&mut b, 0x07, 0), saved);
    assert_eq!(sense_page(&mut b, 0x07, 3), saved);
    let mut default = CdlPage::default().encode(qos::CdlPageKind::T2A);
    default[0] |= 0x80;
    assert_eq!(sense_page(&mut b, 0x07, 2), default);
}

#[test]
fn a_command_takes_its_class_from_its_nexus_else_from_its_dld() {
    let queue = DeviceQueue {
        queue: QueueConfig {
            // One command in the device at a time: the strict arbiter decides who is next.
            depth: 1,
            ..QueueConfig::default()
        },
        scheduler: Scheduler::Policy(Box::new(Fifo)),
        drive: Box::new(TestDrive {
            slow: Vec::new(),
            head: 0,
        }),
        dh: DhCompletion::CheckCondition,
        dld_classes: [
            None,
            Some(qos::Class::High),
            None,
            Some(qos::Class::Low),
            None,
            None,
            None,
            None,
        ],
    };
    let store = Arc::new(RamStore::new(BLOCKS * 512).unwrap());
    let lu = timed_unit(LuConfig::new("iqn.test:t", 0, BLOCKS * 512), store, queue);
    let mut b = Bench::new(&[], Box::new(Fifo), DhCompletion::CheckCondition);
    b.lu = lu;
    // Nexus 2 is an urgent initiator whatever its DLD.
    b.nexuses[1].class = Some(qos::Class::Urgent);
    for n in 1..=2 {
        let c = b
            .submit(0, n, 99, TaskAttribute::Simple, &[0; 6], &[])
            .unwrap();
        assert_eq!(sense(&c).map(|s| s.0), Some(SenseKey::UnitAttention));
    }
    assert!(b.read(0, 1, 100, 0).is_none(), "runs first, alone");
    b.advance(0);
    assert!(b.read(0, 2, 200, 3).is_none(), "DLD 3: low");
    assert!(b.read(0, 3, 300, 0).is_none(), "DLD 0: medium");
    assert!(b.read(0, 4, 400, 1).is_none(), "DLD 1: high");
    assert!(b
        .submit(0, 2, 5, TaskAttribute::Simple, &read16(500, 1, 3), &[])
        .is_none());
    let done = b.run(u64::MAX);
    let order: Vec<(u64, u64)> = done.iter().map(|(n, d)| (*n, d.tag)).collect();
    assert_eq!(order, [(1, 1), (2, 5), (1, 4), (1, 3), (1, 2)]);
}

#[test]
fn synchronize_cache_completes_when_the_drive_has_flushed() {
    let mut b = Bench::new(&[], Box::new(Fifo), DhCompletion::CheckCondition);
    let write = write16(100, 1, 0);
    assert!(b
        .submit(0, 1, 1, TaskAttribute::Simple, &write, &[7; 512])
        .is_none());
    let sync10 = [0x35, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    let queued = b.submit(0, 1, 2, TaskAttribute::Simple, &sync10, &[]);
    assert!(queued.is_none(), "queued like a medium command: {queued:?}");
    let done = b.run(Ns::MAX);
    let at: Vec<(u64, Ns)> = done.iter().map(|(_, d)| (d.tag, d.at)).collect();
    // The write takes 10 ms; the flush starts after it and takes the drive's 25 ms.
    assert_eq!(at, [(1, 10 * MS), (2, 10 * MS + FLUSH)]);
    assert!(done.iter().all(|(_, d)| d.completion == Completion::GOOD));
    // A range beyond the capacity fails at once, before it is timed.
    let mut beyond = sync10;
    beyond[2..6].copy_from_slice(&(BLOCKS as u32).to_be_bytes());
    let failed = b.submit(0, 1, 3, TaskAttribute::Simple, &beyond, &[]);
    assert_eq!(
        failed.as_ref().and_then(sense),
        Some((SenseKey::IllegalRequest, Asc::LBA_OUT_OF_RANGE))
    );
}
