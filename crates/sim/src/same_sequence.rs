//! Both clocks drive one core (issue 18, item 3): a scripted command sequence runs through
//! the unit `stint serve` builds for a timed RAM LUN (the core over an inline plane on a RAM
//! store, as the server's connections and driver call it) and through the simulator's unit
//! (the core over the null plane), both in virtual time. Every status, sense and counter must
//! be the same: the data plane is the only difference, and it moves bytes, never decides.

use crate::unit::{Returned, SimUnit};
use device::{
    Arrival, Backing, Completion, DhCompletion, Kept, LuConfig, Next, Nexus, Ns, Sink, Submitted,
    TaskAttribute, TaskManagement, TmfResponse, Unit,
};
use profile::DeviceParts;
use std::sync::Arc;
use store::{InlinePlane, RamStore};
use workload::Rng;

/// The drive of examples/fast-fail.toml (weak sectors, descriptors that give up), with a
/// queue shorter than the script's load so that commands wait in it.
const DEVICE: &str = r#"
id = "same-sequence"
title = "one core, two planes"
qd = [1]
ios = 1

[drive]
model = "hdd"
faults = { ranges = 2000, fraction = 0.02, retries = [1, 8] }

[queue]
depth = 8
scheduler = "cdl-aware"

[cdl]
perf_vs_duration_guideline = 20
read = [
  { dld = 1, guideline_ms = 30, guideline_policy = "abort" },
  { dld = 2, guideline_ms = 30, guideline_policy = "complete-unavailable" },
  { dld = 3, active_ms = 20, active_policy = "abort-recovery" },
  { dld = 4, inactive_ms = 40, inactive_policy = "abort" },
]
write = [
  { dld = 1, guideline_ms = 30, guideline_policy = "abort" },
  { dld = 2, guideline_ms = 30, guideline_policy = "complete-unavailable" },
]

[[job]]
name = "unused"
rw = "randread"
bs = "4k"
"#;

/// The logical unit's size: small enough for a SANITIZE to step through in the test.
const SIZE: u64 = 64 << 20;
const MS: Ns = 1_000_000;

/// One command or task management function of the script, at its time.
#[derive(Clone, Debug)]
enum Action {
    Command {
        nexus: usize,
        tag: u64,
        cdb: Vec<u8>,
        attribute: TaskAttribute,
        data_out: Vec<u8>,
    },
    AbortTask {
        nexus: usize,
        tag: u64,
    },
}

/// What one side reports: every ended command (time, nexus, tag, completion), every ABORT
/// TASK's answer, and the counters at the end.
#[derive(Debug, Default, PartialEq)]
struct Trace {
    ended: Vec<(Ns, u64, u64, String)>,
    aborts: Vec<bool>,
    metrics: Option<device::Metrics>,
}

fn nexuses() -> [Nexus; 2] {
    [1, 2].map(|id| Nexus {
        id,
        initiator_port: format!("iqn.2026-11.dev.stint:host{id},i,0x00023d000001"),
        class: None,
        privileged: true,
    })
}

fn parts_of(variant: &crate::Variant) -> (LuConfig, DeviceParts<'_>) {
    let mut config = LuConfig::new("iqn.2026-11.dev.stint:same", 0, SIZE);
    config.block_size = variant.drive.block_size();
    config.medium_rotation_rate = variant.drive.medium_rotation_rate();
    // Spread over time, so that commands arrive while it runs.
    config.sanitize_pace = std::time::Duration::from_millis(50);
    let parts = DeviceParts {
        drive: &variant.drive,
        queue: &variant.queue,
        cdl: variant.cdl,
        dh: DhCompletion::CheckCondition,
        seed: 7,
    };
    (config, parts)
}

/// A completion as the trace keeps it: status, sense key, ASC/ASCQ, then all of the sense.
fn record(c: &Completion) -> String {
    match &c.sense {
        None => format!("{:?}", c.status),
        Some(s) => format!(
            "{:?} {:?} {:02X}h/{:02X}h {s:?}",
            c.status, s.key, s.asc.0, s.asc.1
        ),
    }
}

/// READ(16) or WRITE(16) (SBC-5 §5.18, §5.46) with duration limit descriptor `dld`
/// (SBC-5 table 43: DLD2 in byte 1, DLD1..0 in byte 14).
fn rw16(write: bool, lba: u64, blocks: u32, dld: u8) -> Vec<u8> {
    let mut cdb = vec![0u8; 16];
    cdb[0] = if write { 0x8A } else { 0x88 };
    cdb[1] = dld >> 2 & 1;
    cdb[2..10].copy_from_slice(&lba.to_be_bytes());
    cdb[10..14].copy_from_slice(&blocks.to_be_bytes());
    cdb[14] = (dld & 3) << 6;
    cdb
}

/// The script: two nexuses, a closed loop of reads and writes with every descriptor, other
/// commands in between (some refused), ORDERED and HEAD OF QUEUE tasks, overlapped tags,
/// ABORT TASK, then a SANITIZE with commands refused during it, and reads after it.
fn script(block_size: u32) -> Vec<(Ns, Action)> {
    let blocks = SIZE / u64::from(block_size);
    let mut rng = Rng::new(18);
    let mut at: Ns = 0;
    let mut tag = 0u64;
    let mut actions = Vec::new();
    let mut recent: Vec<(usize, u64)> = Vec::new();
    for _ in 0..4000 {
        at += (rng.exponential(1.5) * MS as f64) as Ns;
        let nexus = rng.below(2) as usize;
        tag += 1;
        let attribute = match rng.below(100) {
            0..=2 => TaskAttribute::Ordered,
            3..=4 => TaskAttribute::HeadOfQueue,
            _ => TaskAttribute::Simple,
        };
        let (cdb, data_out) = match rng.below(100) {
            0..=1 => {
                if let Some(&(nexus, tag)) = recent.last() {
                    actions.push((at, Action::AbortTask { nexus, tag }));
                }
                continue;
            }
            2 => {
                // A tag still in use (overlapped commands), when the last one is.
                if let Some(&(n, t)) = recent.last() {
                    let cdb = rw16(false, 0, 8, 0);
                    let action = Action::Command {
                        nexus: n,
                        tag: t,
                        cdb,
                        attribute,
                        data_out: Vec::new(),
                    };
                    actions.push((at, action));
                }
                continue;
            }
            3..=4 => (vec![0; 6], Vec::new()),
            5..=6 => (vec![0x12, 0, 0, 0, 96, 0], Vec::new()),
            // LOG SENSE of the CDL statistics (SPC-6 §7.3.6, page 19h subpage 21h).
            7..=8 => (vec![0x4D, 0, 0x59, 0x21, 0, 0, 0, 0x10, 0, 0], Vec::new()),
            9 => (vec![0x35, 0, 0, 0, 0, 0, 0, 0, 0, 0], Vec::new()),
            // An operation code no entry has; a READ past the last block.
            10 => (vec![0xFF, 0, 0, 0, 0, 0], Vec::new()),
            11 => (rw16(false, blocks - 4, 8, 0), Vec::new()),
            _ => {
                let write = rng.chance(0.3);
                let len = 8 << rng.below(5);
                let lba = rng.below(blocks - u64::from(len)) / 8 * 8;
                let dld = rng.below(5) as u8;
                let data = if write {
                    vec![tag as u8; (len * block_size) as usize]
                } else {
                    Vec::new()
                };
                (rw16(write, lba, len, dld), data)
            }
        };
        recent.push((nexus, tag));
        if recent.len() > 4 {
            recent.remove(0);
        }
        let action = Action::Command {
            nexus,
            tag,
            cdb,
            attribute,
            data_out,
        };
        actions.push((at, action));
    }
    // SANITIZE BLOCK ERASE with IMMED (SBC-5 §5.30), then commands while it runs (refused
    // with its progress) and after it ended.
    let command = |nexus, tag, cdb: Vec<u8>| Action::Command {
        nexus,
        tag,
        cdb,
        attribute: TaskAttribute::Simple,
        data_out: Vec::new(),
    };
    at += 2000 * MS;
    actions.push((
        at,
        command(0, tag + 1, vec![0x48, 0x82, 0, 0, 0, 0, 0, 0, 0, 0]),
    ));
    for i in 0..10 {
        at += MS / 10;
        actions.push((at, command(i % 2, tag + 2 + i as u64, rw16(false, 0, 8, 0))));
    }
    actions.push((at, command(1, tag + 20, vec![0x03, 0, 0, 0, 18, 0])));
    at += 2000 * MS;
    actions.push((at, command(0, tag + 21, rw16(false, 0, 8, 1))));
    actions
}

/// The server's unit: the core over an inline plane on a RAM store, driven as its
/// connections and its driver call it, in virtual time.
fn serve(variant: &crate::Variant, script: &[(Ns, Action)]) -> Trace {
    #[derive(Default)]
    struct Collect(Vec<device::Finished>);
    impl Sink for Collect {
        fn deliver(&mut self, f: device::Finished) {
            self.0.push(f);
        }
        fn wake(&mut self, _lun: u64) {}
    }
    let (config, parts) = parts_of(variant);
    let store = Arc::new(RamStore::new(SIZE).unwrap());
    let plane = Arc::new(InlinePlane::new(store));
    let unit = Unit::build(config, plane, Some(parts.device_queue().unwrap())).unwrap();
    let nexuses = nexuses();
    let mut trace = Trace::default();
    let mut data_out_of = std::collections::HashMap::new();
    let mut sink = Collect::default();
    // Delivered tasks: run their operations, record their ends.
    let deliver = |now: Ns, sink: &mut Collect, trace: &mut Trace, data_out_of: &_| loop {
        let delivered = std::mem::take(&mut sink.0);
        if delivered.is_empty() {
            break;
        }
        for f in delivered {
            let ended = match f.then {
                Next::Aborted => None,
                Next::Done { completion, .. } => Some(completion),
                Next::Run(op) => {
                    let data_out: &Vec<u8> = &data_out_of_get(data_out_of, f.nexus, f.tag);
                    let mut data_in = Vec::new();
                    match unit.run(now, f.task, op, data_out, &mut data_in, sink) {
                        Submitted::Done(c) => Some(c),
                        _ => None,
                    }
                }
            };
            if let Some(c) = ended {
                trace.ended.push((now, f.nexus, f.tag, record(&c)));
            }
        }
    };
    let mut now = 0;
    for (at, action) in script {
        // The driver: every deadline before the action.
        while let Some(d) = unit.with(|c| c.poll_timeout()).filter(|d| d <= at) {
            now = now.max(d);
            unit.advance(now, &mut sink);
            deliver(now, &mut sink, &mut trace, &data_out_of);
        }
        now = *at;
        match action {
            Action::AbortTask { nexus, tag } => {
                let tmf = TaskManagement::AbortTask(*tag);
                let r = unit.task_management(now, &nexuses[*nexus], tmf, &mut sink);
                trace.aborts.push(r == TmfResponse::FunctionComplete);
            }
            Action::Command {
                nexus,
                tag,
                cdb,
                attribute,
                data_out,
            } => {
                let n = &nexuses[*nexus];
                let arrival = Arrival {
                    nexus: n,
                    lun: 0,
                    tag: *tag,
                    cdb,
                    attribute: *attribute,
                    data_out_buffer_size: data_out.len() as u32,
                    data_out,
                };
                let mut data_in = Vec::new();
                match unit.command(now, &arrival, &mut data_in, &mut sink).1 {
                    Submitted::Done(c) => trace.ended.push((now, n.id, *tag, record(&c))),
                    Submitted::Queued(_) => {
                        data_out_of.insert((n.id, *tag), data_out.clone());
                    }
                    other => panic!("{cdb:02x?}: {other:?}"),
                }
            }
        }
        deliver(now, &mut sink, &mut trace, &data_out_of);
    }
    while let Some(d) = unit.with(|c| c.poll_timeout()) {
        now = now.max(d);
        unit.advance(now, &mut sink);
        deliver(now, &mut sink, &mut trace, &data_out_of);
    }
    trace.metrics = Some(unit.with(|c| c.metrics()));
    trace
}

fn data_out_of_get(
    map: &std::collections::HashMap<(u64, u64), Vec<u8>>,
    nexus: u64,
    tag: u64,
) -> Vec<u8> {
    map.get(&(nexus, tag)).cloned().unwrap_or_default()
}

/// The simulator's unit: the core over the null plane, as the engine drives it.
fn sim(variant: &crate::Variant, script: &[(Ns, Action)]) -> Trace {
    let (config, parts) = parts_of(variant);
    let backing = Backing {
        len: SIZE,
        unmap_granularity: 0,
        allocated: None,
    };
    let mut unit = SimUnit::new(
        parts
            .logical_unit(config, backing, Kept::default())
            .unwrap(),
    );
    let nexuses = nexuses();
    let mut trace = Trace::default();
    let mut ended = Vec::new();
    let record_all = |now: Ns, ended: &mut Vec<Returned>, trace: &mut Trace| {
        for e in ended.drain(..) {
            trace
                .ended
                .push((now, e.nexus, e.tag, record(&e.completion)));
        }
    };
    let mut now = 0;
    for (at, action) in script {
        while let Some(d) = unit.next_event().filter(|d| d <= at) {
            now = now.max(d);
            unit.advance(now, &mut ended);
            record_all(now, &mut ended, &mut trace);
        }
        now = *at;
        match action {
            Action::AbortTask { nexus, tag } => {
                let aborted = unit.abort_task(now, nexuses[*nexus].id, *tag);
                trace.aborts.push(aborted);
            }
            Action::Command {
                nexus,
                tag,
                cdb,
                attribute,
                data_out,
            } => {
                let n = &nexuses[*nexus];
                let arrival = Arrival {
                    nexus: n,
                    lun: 0,
                    tag: *tag,
                    cdb,
                    attribute: *attribute,
                    data_out_buffer_size: data_out.len() as u32,
                    data_out,
                };
                if let Some(c) = unit.submit(now, &arrival) {
                    trace.ended.push((now, n.id, *tag, record(&c)));
                }
            }
        }
    }
    while let Some(d) = unit.next_event() {
        now = now.max(d);
        unit.advance(now, &mut ended);
        record_all(now, &mut ended, &mut trace);
    }
    trace.metrics = Some(unit.metrics());
    trace
}

#[test]
fn the_server_unit_and_the_simulator_unit_answer_one_script_alike() {
    let exp = crate::Experiment::parse(DEVICE).unwrap();
    let variant = &exp.variants[0];
    let script = script(variant.drive.block_size());
    let (mut a, mut b) = (serve(variant, &script), sim(variant, &script));
    // Within one instant the two report ends in their own order.
    a.ended.sort();
    b.ended.sort();
    // The script reaches what it is for: ends of every kind, aborts, the sanitize.
    let count = |what: &str| a.ended.iter().filter(|e| e.3.contains(what)).count();
    assert!(a.ended.len() > 3000, "{} commands ended", a.ended.len());
    for what in [
        "Good",
        " 2Eh/",    // a duration limit's abort (ABORTED COMMAND, 2Eh/xxh)
        " 55h/0Ah", // policy Dh (COMPLETED, 55h/0Ah)
        " 04h/1Bh", // SANITIZE IN PROGRESS
        "UnitAttention",
        "IllegalRequest",
        "NotReady",
    ] {
        assert!(count(what) > 0, "no end with {what}");
    }
    assert!(a.aborts.iter().any(|&x| x), "no ABORT TASK found its task");
    for (x, y) in a.ended.iter().zip(&b.ended) {
        assert_eq!(x, y, "the first difference");
    }
    assert_eq!(a.ended.len(), b.ended.len());
    assert_eq!(a.aborts, b.aborts);
    assert_eq!(a.metrics, b.metrics, "the counters");
}
