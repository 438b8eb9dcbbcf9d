//! Tuning bench for the CDL-aware policy: a closed loop of 128 KiB
//! random reads on the default 22 TB HDD model, 20 % of them with a 50 ms guideline
//! (experiment B2), against the same loop with no CDL, both over the same base ordering policy.
//! Run: cargo run --release -p qos --example cdl_aware [ios [aggressiveness [base policy]]]

use drive::{Hdd, MediaOp, Ns};
use qos::order::OrderConfig;
use qos::{
    CdlDescriptor, CdlPages, Command, Completion, DeadlineAware, DeadlineAwareConfig,
    PerfVsDurationGuideline, Policy, Queue, QueueConfig, Scheduler,
};

const MS: Ns = 1_000_000;
const CAPACITY: u64 = 42_970_644_480;
const BLOCKS: u32 = 256;

/// SplitMix64: enough randomness for a bench.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

struct Point {
    iops: f64,
    p99: [f64; 2],
    mean: [f64; 2],
    missed: u64,
}

fn run(qd: usize, ios: usize, scheduler: Scheduler, cdl: bool) -> Point {
    let mut pages = CdlPages::default();
    pages.t2a.perf_vs_duration_guideline = PerfVsDurationGuideline::MAX;
    if let Some(d) = CdlDescriptor::guideline(50 * MS, Policy::CompleteEarliest) {
        pages.t2a.descriptors[0] = d;
    }
    let config = QueueConfig {
        cdl: pages,
        ..QueueConfig::default()
    };
    let Ok(mut q) = Queue::new(config, Hdd::default_22tb(), scheduler) else {
        panic!("config refused")
    };
    let mut rng = Rng(7);
    let next_cmd = |id: u64, rng: &mut Rng| {
        let lba = (rng.next() % (CAPACITY / u64::from(BLOCKS) - 1)) * u64::from(BLOCKS);
        let limited = rng.next() % 100 < 20;
        let dld = u8::from(limited && cdl);
        let class = if limited { 1 } else { 2 };
        Command {
            id,
            class,
            op: MediaOp {
                lba,
                blocks: BLOCKS,
                write: false,
                fua: false,
            },
            dld,
        }
    };
    let mut id = 0;
    for _ in 0..qd {
        let c = next_cmd(id, &mut rng);
        id += 1;
        let _ = q.submit(0, c);
    }
    let warm = 10 * qd + 200;
    let mut lat: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    let mut done: Vec<Completion> = Vec::new();
    let mut pending: Vec<Ns> = Vec::new();
    let mut finished = 0usize;
    let (mut t0, mut t1) = (0, 0);
    let mut missed = 0;
    while finished < ios + warm {
        let tq = q.next_event().unwrap_or(Ns::MAX);
        let th = pending.iter().copied().min().unwrap_or(Ns::MAX);
        if th <= tq {
            pending.retain(|t| *t != th);
            let c = next_cmd(id, &mut rng);
            id += 1;
            let _ = q.submit(th, c);
            continue;
        }
        done.clear();
        q.advance(tq, &mut done);
        for c in &done {
            finished += 1;
            if finished == warm {
                t0 = c.at;
            }
            if finished > warm {
                lat[usize::from(c.class == 2)].push(c.latency() as f64 / 1e6);
                missed += u64::from(c.missed.any());
                t1 = c.at;
            }
            pending.push(c.at + 50_000);
        }
    }
    let pct = |v: &mut Vec<f64>, p: f64| {
        v.sort_by(|a, b| a.total_cmp(b));
        v.get(((v.len() as f64 * p) as usize).min(v.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0.0)
    };
    let mean = |v: &Vec<f64>| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let m = [mean(&lat[0]), mean(&lat[1])];
    Point {
        iops: ios as f64 / ((t1 - t0) as f64 / 1e9),
        p99: [pct(&mut lat[0], 0.99), pct(&mut lat[1], 0.99)],
        mean: m,
        missed,
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let ios: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(20_000);
    let aggressiveness: f64 = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(DeadlineAwareConfig::default().aggressiveness);
    let base: OrderConfig = match args.next().map(|a| a.parse()) {
        Some(Ok(order)) => order,
        Some(Err(e)) => panic!("{e}"),
        None => OrderConfig::default(),
    };
    println!("base policy {base}, aggressiveness {aggressiveness}");
    println!("qd  variant        IOPS   limited p99/mean   other p99/mean   missed");
    for qd in [4, 8, 16, 32] {
        let variants = [
            ("no CDL", Scheduler::Policy(base.build()), false),
            (
                "CDL-aware",
                Scheduler::CdlAware(Box::new(DeadlineAware::with_base(
                    aggressiveness,
                    base.build(),
                ))),
                true,
            ),
        ];
        for (name, scheduler, cdl) in variants {
            let r = run(qd, ios, scheduler, cdl);
            println!(
                "{qd:<3} {name:<12} {:>6.1}   {:>7.1}/{:<7.1}   {:>7.1}/{:<7.1}  {}",
                r.iops, r.p99[0], r.mean[0], r.p99[1], r.mean[1], r.missed
            );
        }
    }
}
