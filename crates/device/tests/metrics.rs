//! What a logical unit counts for `stint serve --metrics`: commands by kind and ending, sense
//! data and bytes on a plain LU; the task set's gauges, latencies and task management aborts
//! on a timed one.

use device::metrics::{Kind, SenseCount};
mod common;

use common::{read10, Collect, Request};
use device::{
    Completion, DeviceQueue, DhCompletion, LuConfig, Metrics, Next, Nexus, Ns, Submitted,
    TaskManagement, TmfResponse, Unit,
};
use drive::{Drive, MediaOp, MediaOutcome, Service};
use qos::order::Fifo;
use qos::{CdlDescriptor, CdlPage, CdlPages, Policy, QueueConfig, Scheduler};
use scsi::{Asc, SenseKey, Status};
use std::sync::Arc;
use store::RamStore;

const MS: Ns = 1_000_000;
const BLOCKS: u64 = 4096;
const GOOD: Option<Status> = Some(Status::Good);
const CHECK: Option<Status> = Some(Status::CheckCondition);

fn nexus() -> Nexus {
    common::nexus_of(1, "iqn.test:i,i,0x000000000001", true)
}

fn write10(lba: u32, blocks: u16) -> [u8; 10] {
    let mut c = read10(lba, blocks);
    c[0] = 0x2A;
    c
}

fn read16(lba: u64, blocks: u32, dld: u8) -> [u8; 16] {
    scsi::encode::rw16(false, lba, blocks, dld)
}

fn request<'a>(n: &'a Nexus, tag: u64, cdb: &'a [u8], data_out: &'a [u8]) -> Request<'a> {
    Request {
        tag,
        ..common::request(n, 0, cdb, data_out)
    }
}

/// Submits a command at `now`; what the unit delivers (the store operation of a task its
/// device queue started) collects in `sink`, for [`run`].
fn submit(
    lu: &Unit,
    now: Ns,
    n: &Nexus,
    tag: u64,
    cdb: &[u8],
    data_out: &[u8],
    sink: &mut Collect,
) -> Submitted {
    let req = request(n, tag, cdb, data_out);
    let (_, s) = lu.command(now, &req.arrival(), &mut Vec::new(), sink);
    s
}

fn done(lu: &Unit, now: Ns, n: &Nexus, cdb: &[u8], data_out: &[u8]) -> Completion {
    let mut sink = Collect::default();
    let submitted = submit(lu, now, n, 0, cdb, data_out, &mut sink);
    assert!(sink.finished.is_empty(), "nothing else moved");
    match submitted {
        Submitted::Done(c) => c,
        other => panic!("{cdb:02X?}: {other:?}"),
    }
}

fn metrics(lu: &Unit) -> Metrics {
    lu.with(|core| core.metrics())
}

#[test]
fn a_plain_lu_counts_commands_sense_and_bytes() {
    let lu = common::ram_lu(LuConfig::new("iqn.test:t", 0, BLOCKS * 512));
    let n = nexus();
    // The power-on unit attention, then 3 reads, 2 writes, INQUIRY, a read past the end.
    assert_eq!(
        done(&lu, 0, &n, &[0; 6], &[]).status,
        Status::CheckCondition
    );
    for lba in 0..3 {
        assert_eq!(done(&lu, 0, &n, &read10(lba, 2), &[]), Completion::GOOD);
    }
    for lba in 0..2 {
        let c = done(&lu, 0, &n, &write10(lba, 4), &[7; 2048]);
        assert_eq!(c, Completion::GOOD);
    }
    assert_eq!(
        done(&lu, 0, &n, &[0x12, 0, 0, 0, 36, 0], &[]),
        Completion::GOOD
    );
    let past = read10(BLOCKS as u32 - 1, 2);
    assert_eq!(done(&lu, 0, &n, &past, &[]).status, Status::CheckCondition);

    let m = metrics(&lu);
    assert!(m.queue.is_none());
    let c = &m.counts;
    assert_eq!(
        [
            c.commands(Kind::Read, GOOD),
            c.commands(Kind::Read, CHECK),
            c.commands(Kind::Write, GOOD),
            c.commands(Kind::Other, GOOD),
            c.commands(Kind::Other, CHECK),
            c.commands(Kind::Other, None),
        ],
        [3, 1, 2, 1, 1, 0]
    );
    assert_eq!((c.read_bytes, c.written_bytes), (3 * 1024, 2 * 2048));
    let sense = |kind, key, asc| SenseCount {
        kind,
        key,
        asc,
        count: 1,
    };
    assert_eq!(
        c.sense,
        [
            sense(Kind::Read, SenseKey::IllegalRequest, Asc::LBA_OUT_OF_RANGE),
            sense(
                Kind::Other,
                SenseKey::UnitAttention,
                Asc::POWER_ON_RESET_OR_BUS_DEVICE_RESET
            ),
        ]
    );
}

/// Every media access takes 10 ms.
struct TenMs;

impl Drive for TenMs {
    fn parallelism(&self) -> usize {
        1
    }
    fn positioning_time(&self, _: Ns, _: &MediaOp) -> Ns {
        0
    }
    fn start(&mut self, now: Ns, _: &MediaOp) -> Service {
        Service {
            done_at: now + 10 * MS,
            outcome: MediaOutcome::Ok,
            recovery: 0,
        }
    }
    fn flush(&mut self, now: Ns) -> Ns {
        now
    }
}

/// A FIFO-ordered LU on [`TenMs`] whose T2A descriptor 1 aborts a read not done within
/// 15 ms (guideline, policy Fh), keeping latencies.
fn timed_lu() -> Arc<Unit> {
    let lu = quiet_timed_lu();
    lu.with(|core| core.keep_latencies());
    lu
}

/// [`timed_lu`] without latencies, as the simulator has it.
fn quiet_timed_lu() -> Arc<Unit> {
    let mut t2a = CdlPage::default();
    t2a.descriptors[0] = CdlDescriptor {
        t2cdlunits: qos::T2CdlUnits::Us1,
        command_duration_guideline: 15_000,
        command_duration_guideline_policy: Policy::Abort,
        ..CdlDescriptor::default()
    };
    let queue = DeviceQueue {
        queue: QueueConfig {
            cdl: CdlPages {
                t2a,
                t2b: CdlPage::default(),
            },
            ..QueueConfig::default()
        },
        scheduler: Scheduler::Policy(Box::new(Fifo)),
        drive: Box::new(TenMs),
        dh: DhCompletion::CheckCondition,
        dld_classes: [None; 8],
    };
    let store = Arc::new(RamStore::new(BLOCKS * 512).unwrap());
    let config = LuConfig::new("iqn.test:t", 0, BLOCKS * 512);
    let plane = common::plane_over(&config, store);
    Arc::new(Unit::build(config, plane, Some(queue)).unwrap())
}

/// Advances `lu` through every event up to `until` and finishes what it delivers (and what
/// `sink` holds already), as a transport does; returns the completions by tag.
fn run(lu: &Unit, until: Ns, sink: &mut Collect) -> Vec<(u64, Completion)> {
    let mut completed = Vec::new();
    let mut now = 0;
    loop {
        for f in std::mem::take(&mut sink.finished) {
            let c = match f.then {
                Next::Run(op) => match lu.run(now, f.task, op, &[], &mut Vec::new(), sink) {
                    Submitted::Done(c) => c,
                    // It ends at the model's time, delivered then.
                    Submitted::Queued(_) => continue,
                    other => panic!("{other:?}"),
                },
                Next::Done { completion, .. } => completion,
                Next::Aborted => panic!("task {} aborted", f.tag),
            };
            completed.push((f.tag, c));
        }
        let Some(t) = lu.with(|core| core.poll_timeout()).filter(|t| *t <= until) else {
            break;
        };
        now = t;
        lu.advance(t, sink);
    }
    completed
}

#[test]
fn a_timed_lu_counts_latencies_outcomes_and_aborted_tasks() {
    let lu = timed_lu();
    let n = nexus();
    assert_eq!(
        done(&lu, 0, &n, &[0; 6], &[]).status,
        Status::CheckCondition
    );
    // Three 1-block reads with DLD 1 at t = 0: the first is done at 10 ms, the second is
    // aborted during processing and the third before it at the 15 ms guideline.
    let cdbs: Vec<(u64, [u8; 16])> = (1..=3).map(|tag| (tag, read16(tag, 1, 1))).collect();
    let mut sink = Collect::default();
    for (tag, cdb) in &cdbs {
        let r = submit(&lu, 0, &n, *tag, cdb, &[], &mut sink);
        assert!(matches!(r, Submitted::Queued(_)), "{r:?}");
    }
    let q = metrics(&lu).queue.unwrap();
    assert_eq!(q.tasks, 3);
    assert_eq!(q.device_queue + q.waiting.iter().sum::<usize>(), 3);

    let completed = run(&lu, 100 * MS, &mut sink);
    assert_eq!(completed.len(), 3);
    let m = metrics(&lu);
    let q = m.queue.as_ref().unwrap();
    assert_eq!((q.tasks, q.device_queue), (0, 0));
    let reads = &q.latencies.reads[1];
    assert_eq!(reads.count(), 3);
    assert_eq!(reads.sum_ns(), (10 + 15 + 15) * MS);
    assert_eq!(
        reads.cumulative().find(|(b, _)| *b == 10 * MS),
        Some((10 * MS, 1))
    );
    let medium = qos::Class::Medium.index();
    assert_eq!(q.latencies.classes[medium], *reads);
    // The queue's own statistics, reused as they are.
    assert_eq!(q.stats.t2a[0].commands, 3);
    assert_eq!(q.stats.t2a[0].completions.get(qos::Outcome::Good), 1);
    assert_eq!(q.stats.t2a[0].commands_missed, 2);
    let c = &m.counts;
    assert_eq!(
        (c.commands(Kind::Read, GOOD), c.commands(Kind::Read, CHECK)),
        (1, 2)
    );
    assert_eq!(c.read_bytes, 512);
    let aborted: Vec<(Asc, u64)> = c
        .sense
        .iter()
        .filter(|s| s.kind == Kind::Read)
        .map(|s| (s.asc, s.count))
        .collect();
    assert_eq!(
        aborted,
        [
            (Asc::COMMAND_TIMEOUT_BEFORE_PROCESSING, 1),
            (Asc::COMMAND_TIMEOUT_DURING_PROCESSING, 1)
        ]
    );

    // A write aborted by task management counts as aborted, in no histogram.
    let mut w = read16(9, 1, 0);
    w[0] = 0x8A;
    let r = submit(&lu, 200 * MS, &n, 7, &w, &[0; 512], &mut sink);
    assert!(matches!(r, Submitted::Queued(_)), "{r:?}");
    assert_eq!(metrics(&lu).queue.unwrap().tasks, 1);
    let abort = TaskManagement::AbortTask(7);
    let r = lu.task_management(201 * MS, &n, abort, &mut Collect::default());
    assert_eq!(r, TmfResponse::FunctionComplete);
    // The queue had started it: its store operation was delivered, and the transport, told
    // of the abort first, does not run it.
    let runs = std::mem::take(&mut sink.finished);
    assert!(matches!(runs.as_slice(), [f] if f.tag == 7 && matches!(f.then, Next::Run(_))));
    lu.dropped(201 * MS, runs[0].task, &mut sink);
    let m = metrics(&lu);
    assert_eq!(m.counts.commands(Kind::Write, None), 1);
    assert_eq!(m.counts.written_bytes, 0);
    let q = m.queue.unwrap();
    assert_eq!(q.tasks, 0);
    assert_eq!(q.latencies.writes[0].count(), 0);
    assert_eq!(q.stats.unlimited.aborted_tasks, 1);
}

#[test]
fn latencies_are_kept_only_when_asked_for() {
    let lu = timed_lu();
    let quiet = quiet_timed_lu();
    let n = nexus();
    for lu in [&lu, &quiet] {
        assert_eq!(done(lu, 0, &n, &[0; 6], &[]).status, Status::CheckCondition);
        let mut sink = Collect::default();
        let r = submit(lu, 0, &n, 1, &read16(1, 1, 0), &[], &mut sink);
        assert!(matches!(r, Submitted::Queued(_)), "{r:?}");
        assert_eq!(run(lu, 100 * MS, &mut sink).len(), 1);
    }
    let kept = metrics(&lu).queue.unwrap().latencies.reads[0];
    assert_eq!((kept.count(), kept.sum_ns()), (1, 10 * MS));
    let m = metrics(&quiet);
    assert_eq!(m.counts.commands(Kind::Read, GOOD), 1);
    assert_eq!(m.queue.unwrap().latencies.reads[0].count(), 0);
}
