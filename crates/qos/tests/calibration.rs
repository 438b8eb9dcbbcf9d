//! HDD calibration (experiments/README.md, B1, issue 3 "How it must be shown" 1): the default
//! drive profile with the default ordering policy, 128 KiB random reads over the full span in a
//! closed loop at QD 1–32, against WD's published IOPS and p99.

use drive::{Drive, Hdd, MediaOp, Ns};
use qos::order::{Candidate, OrderConfig, OrderingPolicy};

/// SplitMix64 (seeding and a small uniform stream "SplitMix64 seeding").
struct SplitMix(u64);
impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in 0..n (multiply-shift).
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
    }
}

/// 128 KiB in 512-byte sectors.
const BLOCKS: u32 = 256;

#[derive(Clone, Copy, Debug)]
struct Point {
    iops: f64,
    p99_ms: f64,
    mean_ms: f64,
}

/// One closed-loop run at `qd`: `ios` measured completions after a ramp of 10·QD + 200.
fn run(qd: usize, ios: usize, seed: u64, policy: &mut dyn OrderingPolicy) -> Point {
    let mut drive = match std::env::var("STINT_PROFILE") {
        Ok(path) => {
            let text = std::fs::read_to_string(path).expect("STINT_PROFILE");
            Hdd::new(&drive::HddProfile::from_toml(&text).expect("profile")).expect("drive")
        }
        Err(_) => Hdd::default_22tb(),
    };
    let turnaround = drive.host_turnaround();
    let slots = (drive.geometry().capacity_sectors - u64::from(BLOCKS)) / u64::from(BLOCKS);
    let mut rng = SplitMix(seed);
    let mut next_id = 0u64;
    let mut new_cmd = |now: Ns, rng: &mut SplitMix| {
        next_id += 1;
        let lba = rng.below(slots) * u64::from(BLOCKS);
        Candidate {
            id: next_id,
            op: MediaOp {
                lba,
                blocks: BLOCKS,
                write: false,
                fua: false,
            },
            arrived: now,
            seq: next_id,
            limits: Default::default(),
            class: 0,
        }
    };
    let ramp = 10 * qd + 200;
    let mut queue: Vec<Candidate> = (0..qd).map(|_| new_cmd(0, &mut rng)).collect();
    // Host submissions in flight (submit time); completions come one at a time, so sorted.
    let mut arrivals = std::collections::VecDeque::with_capacity(qd);
    let mut latencies = Vec::with_capacity(ios);
    let (mut now, mut completed, mut t_start) = (0, 0usize, 0);
    let mut active: Option<(Ns, Candidate)> = None;
    while latencies.len() < ios {
        if active.is_none() && !queue.is_empty() {
            let i = policy.pick(now, &queue, &drive).min(queue.len() - 1);
            let c = queue.swap_remove(i);
            let s = drive.start(now, &c.op);
            active = Some((s.done_at, c));
        }
        let next_done = active.map(|(t, _)| t);
        let next_arrival = arrivals.front().copied();
        let completion_first = match (next_done, next_arrival) {
            (Some(done), Some(a)) => done <= a,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => unreachable!("closed loop lost its commands"),
        };
        if completion_first {
            if let Some((done, c)) = active.take() {
                now = done;
                completed += 1;
                if completed == ramp {
                    t_start = now;
                } else if completed > ramp {
                    latencies.push(now - c.arrived);
                }
                arrivals.push_back(now + turnaround);
            }
        } else if let Some(a) = arrivals.pop_front() {
            now = a;
            queue.push(new_cmd(now, &mut rng));
        }
    }
    let elapsed = (now - t_start) as f64 / 1e9;
    let mean_ms = latencies.iter().sum::<Ns>() as f64 / latencies.len() as f64 / 1e6;
    latencies.sort_unstable();
    let p99 = latencies[(latencies.len() * 99).div_ceil(100) - 1];
    Point {
        iops: latencies.len() as f64 / elapsed,
        p99_ms: p99 as f64 / 1e6,
        mean_ms,
    }
}

/// WD cdl-tools 22 TB baseline (experiments/README.md, B1): (QD, IOPS, p99 ms).
const PUBLISHED: [(usize, f64, f64); 7] = [
    (1, 82.0, 20.0),
    (2, 88.0, 40.0),
    (4, 97.0, 65.0),
    (8, 115.0, 110.0),
    (16, 141.0, 185.0),
    (24, 154.0, 255.0),
    (32, 165.0, 323.0),
];

fn sweep(config: &OrderConfig, ios: usize, seed: u64) -> Vec<(usize, Point)> {
    PUBLISHED
        .iter()
        .map(|&(qd, ..)| {
            let mut policy = config.build();
            (qd, run(qd, ios, seed, policy.as_mut()))
        })
        .collect()
}

fn print_table(name: &str, points: &[(usize, Point)]) -> (f64, f64) {
    println!("policy {name}");
    println!("  QD | IOPS model  pub    dev  | p99 ms model   pub    dev  | mean ms");
    let (mut worst_iops, mut worst_p99) = (0.0f64, 0.0f64);
    for (&(qd, pub_iops, pub_p99), (_, p)) in PUBLISHED.iter().zip(points) {
        let di = (p.iops / pub_iops - 1.0) * 100.0;
        let dp = (p.p99_ms / pub_p99 - 1.0) * 100.0;
        worst_iops = worst_iops.max(di.abs());
        worst_p99 = worst_p99.max(dp.abs());
        println!(
            "  {qd:>2} | {:>9.1} {pub_iops:>5.0} {di:>+6.1}% | {:>11.1} {pub_p99:>5.0} {dp:>+6.1}% | {:>7.1}",
            p.iops, p.p99_ms, p.mean_ms
        );
    }
    println!("  worst deviation: IOPS {worst_iops:.1}%, p99 {worst_p99:.1}%");
    (worst_iops, worst_p99)
}

/// Measured I/Os per QD point: enough for a stable p99 (≥ 200 samples above it), small enough
/// for CI in debug mode. The seed is fixed, so the result is exact and the bands can be tight.
const CALIBRATION_IOS: usize = 20_000;
const CALIBRATION_SEED: u64 = 1;
/// Bands pinned at what the default reaches (issue 3 asks ±10% IOPS, ±20% p99; the worst
/// points are QD2 IOPS −6.8%, where the drive sees one queued command, and QD1 p99 +7.7%).
const IOPS_BAND: f64 = 8.0;
const P99_BAND: f64 = 10.0;

#[test]
fn default_profile_and_policy_match_published_b1() {
    let points = sweep(&OrderConfig::default(), CALIBRATION_IOS, CALIBRATION_SEED);
    let (worst_iops, worst_p99) = print_table(&OrderConfig::default().to_string(), &points);
    for (&(qd, pub_iops, pub_p99), (_, p)) in PUBLISHED.iter().zip(&points) {
        let di = (p.iops / pub_iops - 1.0) * 100.0;
        let dp = (p.p99_ms / pub_p99 - 1.0) * 100.0;
        assert!(
            di.abs() <= IOPS_BAND,
            "QD{qd}: {:.1} IOPS is {di:+.1}% from {pub_iops}",
            p.iops
        );
        assert!(
            dp.abs() <= P99_BAND,
            "QD{qd}: p99 {:.1} ms is {dp:+.1}% from {pub_p99}",
            p.p99_ms
        );
    }
    assert!(worst_iops <= IOPS_BAND && worst_p99 <= P99_BAND);
}

/// Explores a policy given as `STINT_ORDER` (OrderConfig syntax) with `STINT_IOS` I/Os per point:
/// `STINT_ORDER=sptf cargo test --release -p qos --test calibration -- --ignored --nocapture`.
#[test]
#[ignore]
fn explore() {
    let name = std::env::var("STINT_ORDER").unwrap_or_else(|_| "default".into());
    let ios = std::env::var("STINT_IOS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40_000);
    let seed = std::env::var("STINT_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    for spec in name.split(';') {
        let config = if spec == "default" {
            OrderConfig::default()
        } else {
            spec.parse().expect("STINT_ORDER")
        };
        print_table(spec, &sweep(&config, ios, seed));
    }
}

/// Simulation speed of B1 at QD32 with the default policy (the sim's goal is ≥ 2 M simulated
/// commands/s on one core): `cargo test --release -p qos --test calibration -- --ignored speed`.
#[test]
#[ignore]
fn speed_b1_qd32() {
    let ios = 1_000_000;
    let mut policy = OrderConfig::default().build();
    let wall = std::time::Instant::now();
    let p = run(32, ios, CALIBRATION_SEED, policy.as_mut());
    let secs = wall.elapsed().as_secs_f64();
    let build = std::time::Instant::now();
    let drive = Hdd::default_22tb();
    println!(
        "building the default HDD model took {:.1} ms",
        build.elapsed().as_secs_f64() * 1e3
    );
    drop(drive);
    println!(
        "B1 QD32: {ios} commands in {secs:.3} s = {:.2} M commands/s ({:.1} IOPS simulated)",
        ios as f64 / secs / 1e6,
        p.iops
    );
}
