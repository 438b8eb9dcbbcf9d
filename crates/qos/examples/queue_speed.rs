//! Speed of the queue itself: a closed loop at QD 32 on a drive whose model costs nothing
//! (fixed 5 ms service, positioning = LBA distance), so the time measured is the queue's.
//! Run: cargo run --release -p qos --example queue_speed [commands]

use drive::{Drive, MediaOp, MediaOutcome, Ns, Service};
use qos::order::{Candidate, OrderingPolicy};
use qos::{
    CdlDescriptor, CdlPages, Command, Completion, DeadlineAware, DeadlineAwareConfig, Policy,
    Queue, QueueConfig, Scheduler,
};
use std::time::Instant;

const MS: Ns = 1_000_000;

struct Cheap {
    head: u64,
}

impl Drive for Cheap {
    fn parallelism(&self) -> usize {
        1
    }
    fn positioning_time(&self, _now: Ns, op: &MediaOp) -> Ns {
        op.lba.abs_diff(self.head) >> 20
    }
    fn start(&mut self, now: Ns, op: &MediaOp) -> Service {
        self.head = op.lba;
        Service {
            done_at: now + 5 * MS,
            outcome: MediaOutcome::Ok,
            recovery: 0,
        }
    }
    fn flush(&mut self, now: Ns) -> Ns {
        now
    }
}

struct Fifo;
impl OrderingPolicy for Fifo {
    fn pick(&mut self, _now: Ns, _queue: &[Candidate], _drive: &dyn Drive) -> usize {
        0
    }
}

fn run(name: &str, scheduler: Scheduler, limited_percent: u64, n: u64) {
    let mut pages = CdlPages::default();
    if let Some(d) = CdlDescriptor::guideline(50 * MS, Policy::CompleteEarliest) {
        pages.t2a.descriptors[0] = d;
    }
    let config = QueueConfig {
        cdl: pages,
        ..QueueConfig::default()
    };
    let Ok(mut q) = Queue::new(config, Cheap { head: 0 }, scheduler) else {
        panic!("config refused")
    };
    let mut x: u64 = 1;
    let mut cmd = |id: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let dld = u8::from(x % 100 < limited_percent);
        Command {
            id,
            class: 2,
            op: MediaOp {
                lba: x >> 20,
                blocks: 256,
                write: false,
                fua: false,
            },
            dld,
        }
    };
    let mut id = 0;
    for _ in 0..32 {
        let _ = q.submit(0, cmd(id));
        id += 1;
    }
    let mut done: Vec<Completion> = Vec::with_capacity(64);
    let start = Instant::now();
    let mut completed = 0;
    while completed < n {
        let Some(t) = q.next_event() else { break };
        done.clear();
        q.advance(t, &mut done);
        for c in &done {
            completed += 1;
            let _ = q.submit(c.at, cmd(id));
            id += 1;
        }
    }
    let s = start.elapsed().as_secs_f64();
    println!(
        "{name:<28} {:>6.2} M commands/s",
        completed as f64 / s / 1e6
    );
}

fn main() {
    let n = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2_000_000);
    run("FIFO, no CDL", Scheduler::Policy(Box::new(Fifo)), 0, n);
    run(
        "FIFO, 20 % limited",
        Scheduler::Policy(Box::new(Fifo)),
        20,
        n,
    );
    let cdl = || Scheduler::CdlAware(Box::new(DeadlineAware::new(DeadlineAwareConfig::default())));
    run("CDL-aware, 20 % limited", cdl(), 20, n);
}
