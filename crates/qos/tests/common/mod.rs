//! Test doubles: an exact fixed-service-time drive and a FIFO ordering policy.
#![allow(dead_code)]

use drive::{Drive, MediaOp, MediaOutcome, Ns, Service};
use qos::order::{Candidate, OrderingPolicy};
use qos::{CdlDescriptor, CdlPages, Command, Completion, Queue, QueueConfig, Scheduler};

pub const MS: Ns = 1_000_000;

/// Every operation takes `service` ns, except LBAs listed in `slow` (their own time) and LBAs in
/// `bad` (unrecovered). Positioning time is the LBA distance from the last started op (1 ns per
/// block), so positional policies have something to order by.
pub struct FixedDrive {
    pub service: Ns,
    pub units: usize,
    pub slow: Vec<(u64, Ns)>,
    pub bad: Vec<u64>,
    pub head: u64,
    /// (start time, lba) of every started op.
    pub started: Vec<(Ns, u64)>,
    /// (time, lba) of every abandoned op.
    pub aborted: Vec<(Ns, u64)>,
}

impl FixedDrive {
    pub fn new(service: Ns) -> Self {
        Self {
            service,
            units: 1,
            slow: Vec::new(),
            bad: Vec::new(),
            head: 0,
            started: Vec::new(),
            aborted: Vec::new(),
        }
    }
}

impl Drive for FixedDrive {
    fn parallelism(&self) -> usize {
        self.units
    }

    fn positioning_time(&self, _now: Ns, op: &MediaOp) -> Ns {
        op.lba.abs_diff(self.head)
    }

    fn service_time(&self, now: Ns, op: &MediaOp) -> Ns {
        let service = self
            .slow
            .iter()
            .find(|(lba, _)| *lba == op.lba)
            .map_or(self.service, |(_, s)| *s);
        self.positioning_time(now, op) + service
    }

    fn start(&mut self, now: Ns, op: &MediaOp) -> Service {
        self.started.push((now, op.lba));
        self.head = op.lba;
        let service = self
            .slow
            .iter()
            .find(|(lba, _)| *lba == op.lba)
            .map_or(self.service, |(_, s)| *s);
        let outcome = if self.bad.contains(&op.lba) {
            MediaOutcome::Unrecovered
        } else {
            MediaOutcome::Ok
        };
        Service {
            done_at: now + service,
            outcome,
            recovery: 0,
        }
    }

    fn flush(&mut self, now: Ns) -> Ns {
        now
    }

    fn abort(&mut self, now: Ns, op: &MediaOp) {
        self.aborted.push((now, op.lba));
    }
}

/// Starts the oldest queued command (the device queue is kept in arrival order).
pub struct Fifo;

impl OrderingPolicy for Fifo {
    fn pick(&mut self, _now: Ns, _queue: &[Candidate], _drive: &dyn Drive) -> usize {
        0
    }
}

pub fn read(id: u64, lba: u64, dld: u8) -> Command {
    Command {
        id,
        class: 2,
        op: MediaOp {
            lba,
            blocks: 8,
            write: false,
            fua: false,
        },
        dld,
    }
}

pub fn write(id: u64, lba: u64, dld: u8) -> Command {
    Command {
        id,
        class: 2,
        op: MediaOp {
            lba,
            blocks: 8,
            write: true,
            fua: false,
        },
        dld,
    }
}

/// T2A pages whose descriptors 1.. are `descriptors`.
pub fn t2a(descriptors: &[CdlDescriptor]) -> CdlPages {
    let mut pages = CdlPages::default();
    for (slot, d) in pages.t2a.descriptors.iter_mut().zip(descriptors) {
        *slot = *d;
    }
    pages
}

pub fn fifo_queue(config: QueueConfig, drive: FixedDrive) -> Queue<FixedDrive> {
    match Queue::new(config, drive, Scheduler::Policy(Box::new(Fifo))) {
        Ok(q) => q,
        Err(e) => panic!("config refused: {e}"),
    }
}

/// Runs events until none is left at or before `until`; returns the completions in order.
pub fn run<D: Drive>(q: &mut Queue<D>, until: Ns) -> Vec<Completion> {
    let mut done = Vec::new();
    while let Some(t) = q.next_event().filter(|t| *t <= until) {
        q.advance(t, &mut done);
    }
    done
}

pub fn submit<D: Drive>(q: &mut Queue<D>, now: Ns, cmd: Command) {
    if let Err(e) = q.submit(now, cmd) {
        panic!("submit refused: {e}");
    }
}

pub fn by_id(done: &[Completion], id: u64) -> Completion {
    match done.iter().find(|c| c.id == id) {
        Some(c) => *c,
        None => panic!("command {id} did not complete: {done:?}"),
    }
}
