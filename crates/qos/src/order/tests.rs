//! Ordering policies on hand-made queues, with a drive whose positioning time is the LBA
//! distance from its head (so the expected pick is obvious).

use super::*;
use drive::{MediaOutcome, Service};

/// Positioning time = |lba − head| ns.
struct LineDrive {
    head: u64,
}

impl Drive for LineDrive {
    fn parallelism(&self) -> usize {
        1
    }
    fn positioning_time(&self, _now: Ns, op: &MediaOp) -> Ns {
        op.lba.abs_diff(self.head)
    }
    fn start(&mut self, now: Ns, op: &MediaOp) -> Service {
        self.head = op.lba;
        Service {
            done_at: now + 1,
            outcome: MediaOutcome::Ok,
            recovery: 0,
        }
    }
    fn flush(&mut self, now: Ns) -> Ns {
        now
    }
}

fn cand(id: u64, lba: u64, arrived: Ns) -> Candidate {
    Candidate {
        id,
        op: MediaOp {
            lba,
            blocks: 8,
            write: false,
            fua: false,
        },
        arrived,
        seq: id,
        limits: Limits::default(),
        class: 0,
    }
}

#[test]
fn fifo_picks_the_oldest_then_lowest_id() {
    let drive = LineDrive { head: 0 };
    let q = [
        cand(5, 10, 300),
        cand(3, 900, 100),
        cand(4, 1, 200),
        cand(2, 7, 100),
    ];
    assert_eq!(
        Fifo.pick(1000, &q, &drive),
        3,
        "arrived 100 with id 2 beats id 3"
    );
    assert_eq!(Fifo.pick(1000, &q[..2], &drive), 1);
    assert_eq!(Fifo.pick(1000, &q[..1], &drive), 0);
}

#[test]
fn sptf_picks_the_shortest_positioning_then_oldest() {
    let drive = LineDrive { head: 500 };
    let q = [
        cand(1, 0, 0),
        cand(2, 480, 50),
        cand(3, 530, 10),
        cand(4, 900, 0),
    ];
    assert_eq!(
        Sptf.pick(1000, &q, &drive),
        1,
        "|480 − 500| = 20 is shortest"
    );
    let tie = [cand(1, 520, 40), cand(2, 480, 30)];
    assert_eq!(
        Sptf.pick(1000, &tie, &drive),
        1,
        "equal distance: the older one"
    );
    assert_eq!(sptf_cost(0, &q[3], &drive), 400);
}

#[test]
fn additive_aging_lets_an_old_far_command_win() {
    let drive = LineDrive { head: 0 };
    // Near and young (cost 100) vs far and old (cost 1000 − rate · age).
    let q = [cand(1, 100, 9_000), cand(2, 1000, 0)];
    let mut weak = AgedSptf::new(Aging::Additive { rate: 0.05 });
    assert_eq!(weak.pick(10_000, &q, &drive), 0, "1000 − 500 > 100 − 50");
    let mut strong = AgedSptf::new(Aging::Additive { rate: 0.2 });
    assert_eq!(
        strong.pick(10_000, &q, &drive),
        1,
        "1000 − 2000 < 100 − 200"
    );
    assert_eq!(strong.cost(10_000, &q[1], &drive), -1000.0);
}

#[test]
fn multiplicative_aging_scales_cost_by_remaining_window() {
    let drive = LineDrive { head: 0 };
    let q = [cand(1, 300, 9_000), cand(2, 1000, 0)];
    // W = 20 µs: 300 · (1 − 1/20) = 285 vs 1000 · (1 − 10/20) = 500.
    let mut p = AgedSptf::new(Aging::Multiplicative { window: 20_000 });
    assert_eq!(p.pick(10_000, &q, &drive), 0);
    // W = 12 µs: 300 · (1 − 1/12) = 275 vs 1000 · (1 − 10/12) ≈ 167.
    let mut p = AgedSptf::new(Aging::Multiplicative { window: 12_000 });
    assert_eq!(p.pick(10_000, &q, &drive), 1);
}

#[test]
fn rpo_is_sptf_until_it_has_seen_a_service_interval() {
    let drive = LineDrive { head: 0 };
    let q = [cand(1, 100, 1_000_000), cand(2, 1000, 0), cand(3, 5000, 0)];
    let mut p = Rpo::default();
    assert_eq!(p.window(3), None);
    assert_eq!(
        p.pick(1_000_000, &q, &drive),
        0,
        "no window yet: plain SPTF"
    );
}

#[test]
fn rpo_window_follows_queue_length_and_dispatch_interval() {
    let drive = LineDrive { head: 0 };
    let mut p = Rpo::new(2.0);
    let busy = [cand(1, 1, 0), cand(2, 2, 0), cand(3, 3, 0)];
    // Back-to-back dispatches 10 µs apart: the interval is 10 µs.
    assert_eq!(p.pick(0, &busy, &drive), 0);
    assert_eq!(p.pick(10_000, &busy, &drive), 0);
    assert_eq!(p.window(4), Some(2.0 * 4.0 * 10_000.0));
    // A gap after the queue ran dry (one command left) is idle time, not service: ignored.
    let alone = [cand(9, 1, 0)];
    p.pick(20_000, &alone, &drive);
    p.pick(1_000_000, &busy, &drive);
    assert_eq!(p.window(1), Some(2.0 * 10_000.0));
    // This dispatch follows a busy one 30 µs earlier: interval 10 + 20/64 µs, window
    // 2 · 2 · 10.3 ≈ 41.3 µs. The far command that arrived at 0.99 ms costs
    // 1000 · (1 − 40/41.3) ≈ 30 and beats the young near one (100 · (1 − 0)).
    let q = [cand(1, 100, 1_030_000), cand(2, 1000, 990_000)];
    assert_eq!(p.pick(1_030_000, &q, &drive), 1);
    // A younger far command (age 10 µs: 1000 · (1 − 10/41.2) ≈ 757) loses to the near one.
    let q = [cand(1, 100, 1_040_000), cand(2, 1000, 1_030_000)];
    assert_eq!(p.pick(1_040_000, &q, &drive), 0);
}

#[test]
fn config_parses_names_and_parameters() {
    assert_eq!("fifo".parse::<OrderConfig>(), Ok(OrderConfig::Fifo));
    assert_eq!(" sptf ".parse::<OrderConfig>(), Ok(OrderConfig::Sptf));
    assert_eq!(
        "asptf:rate=0.03".parse(),
        Ok(OrderConfig::Asptf(Aging::Additive { rate: 0.03 }))
    );
    assert_eq!(
        "asptf:window_ms=50".parse(),
        Ok(OrderConfig::Asptf(Aging::Multiplicative {
            window: 50_000_000
        }))
    );
    assert_eq!("rpo:factor=3".parse(), Ok(OrderConfig::Rpo { factor: 3.0 }));
    assert_eq!("rpo".parse(), Ok(OrderConfig::default()));
    assert_eq!(
        OrderConfig::default(),
        OrderConfig::Rpo {
            factor: DEFAULT_RPO_FACTOR
        }
    );
    for c in [
        OrderConfig::Fifo,
        OrderConfig::Sptf,
        OrderConfig::Asptf(Aging::Additive { rate: 0.02 }),
        OrderConfig::Asptf(Aging::Multiplicative { window: 30_000_000 }),
        OrderConfig::Rpo { factor: 2.5 },
    ] {
        assert_eq!(c.to_string().parse(), Ok(c), "{c} round-trips");
    }
}

#[test]
fn config_errors_name_the_problem() {
    let err = |s: &str| s.parse::<OrderConfig>().expect_err(s).to_string();
    assert!(err("elevator").contains("unknown policy `elevator`"));
    assert!(err("sptf:rate=1").contains("unknown parameter `rate`"));
    assert!(err("rpo:factor=abc").contains("`factor` must be a number"));
    assert!(err("rpo:factor=-1").contains("`factor`"));
    assert!(err("asptf:rate").contains("not key=value"));
    assert!(err("asptf:rate=0.1,window_ms=5").contains("not both"));
}

#[test]
fn built_policies_pick_like_their_types() {
    let drive = LineDrive { head: 0 };
    let q = [cand(1, 50, 10), cand(2, 10, 20)];
    assert_eq!(OrderConfig::Fifo.build().pick(100, &q, &drive), 0);
    assert_eq!(OrderConfig::Sptf.build().pick(100, &q, &drive), 1);
}

#[test]
fn total_order_key_orders_as_total_cmp() {
    let xs = [
        f64::NEG_INFINITY,
        -1e300,
        -1.5,
        -f64::MIN_POSITIVE,
        -0.0,
        0.0,
        f64::MIN_POSITIVE,
        1.0,
        1.0 + f64::EPSILON,
        1e300,
        f64::INFINITY,
        f64::NAN,
        -f64::NAN,
    ];
    for a in xs {
        for b in xs {
            assert_eq!(
                total_order_key(a).cmp(&total_order_key(b)),
                a.total_cmp(&b),
                "{a} vs {b}"
            );
        }
    }
}

#[test]
fn small_ns_to_f64_is_the_plain_conversion() {
    let xs = [
        0,
        1,
        12_345_678_901,
        (1 << 53) + 1,
        (1 << 62) + 3,
        i64::MAX as u64,
    ];
    assert!(below_2_63(&xs));
    for x in xs {
        assert_eq!(small_ns_to_f64(x).to_bits(), (x as f64).to_bits(), "{x}");
    }
    assert!(!below_2_63(&[1, 1 << 63, 2]));
    assert!(!below_2_63(&[u64::MAX]));
}

#[test]
fn positions_follow_a_changing_queue() {
    // Commands leave from anywhere (not only the one noted as picked) and arrive at the end;
    // the estimates stay those of the drive asked one at a time.
    let mut hdd = drive::Hdd::default_22tb();
    let mut positions = Positions::default();
    let mut queue: Vec<Candidate> = Vec::new();
    let mut x: u64 = 7;
    let mut next = || {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        x >> 20
    };
    let mut now = 0;
    let mut last = 0;
    for id in 0..3_000 {
        while queue.len() < 24 {
            // Some re-read or follow the last read (read cache hits and streaming).
            let lba = match next() % 8 {
                0 => last,
                1 => last + 8,
                _ => next() % (1 << 35),
            };
            queue.push(cand(id, lba, now));
        }
        let times = positions.measure(now, &queue, &hdd).to_vec();
        let singly: Vec<Ns> = queue
            .iter()
            .map(|c| hdd.positioning_time(now, &c.op))
            .collect();
        assert_eq!(times, singly, "at {now} ns");
        let noted = (next() % queue.len() as u64) as usize;
        positions.picked(noted);
        let left = if next() % 4 == 0 {
            (next() % queue.len() as u64) as usize
        } else {
            noted
        };
        let c = queue.remove(left);
        if next() % 8 == 0 {
            // Another one goes too (a limit expired).
            let i = (next() % queue.len() as u64) as usize;
            queue.remove(i);
        }
        last = c.op.lba;
        now = hdd.start(now, &c.op).done_at;
    }
}

#[test]
fn picking_from_the_times_is_picking() {
    // Every policy that can pick from the positioning times picks what it picks by asking the
    // drive (same state: RPO's interval is fed identically to both copies).
    let drive = LineDrive { head: 5_000 };
    let mut x: u64 = 3;
    let mut next = || {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        x >> 40
    };
    let policies = || -> Vec<Box<dyn OrderingPolicy>> {
        vec![
            Box::new(Fifo),
            Box::new(Sptf),
            Box::new(AgedSptf::new(Aging::Additive { rate: 0.3 })),
            Box::new(AgedSptf::new(Aging::Multiplicative { window: 40_000 })),
            Box::new(Rpo::new(2.0)),
        ]
    };
    let (mut asked, mut timed) = (policies(), policies());
    for round in 0..200u64 {
        let now = 100_000 + round * 7_000;
        let queue: Vec<Candidate> = (0..1 + next() % 12)
            .map(|id| cand(id, next() % 10_000, now - next() % 60_000))
            .collect();
        let times: Vec<Ns> = queue.iter().map(|c| sptf_cost(now, c, &drive)).collect();
        for (a, t) in asked.iter_mut().zip(timed.iter_mut()) {
            let expected = a.pick(now, &queue, &drive);
            assert_eq!(t.pick_timed(now, &queue, &times), Some(expected));
        }
    }
    assert_eq!(Sptf.pick_timed(0, &[cand(1, 1, 0)], &[]), None);
}

#[test]
fn limits_keep_their_times_in_24_bytes() {
    let l = Limits::new(Some(0), Some(5_000_000), None);
    assert_eq!(
        (l.start_by(), l.finish_by(), l.active_for()),
        (Some(0), Some(5_000_000), None)
    );
    assert!(l.has_deadline());
    let active = Limits::new(None, None, Some(1));
    assert_eq!(active.active_for(), Some(1));
    assert!(!active.has_deadline() && !Limits::default().has_deadline());
    assert_eq!(std::mem::size_of::<Limits>(), 24);
}

#[test]
fn floor_is_libm_floor() {
    let mut x: u64 = 1;
    let mut values = vec![
        0.5,
        -0.5,
        1.0,
        -1.0,
        -1e-300,
        4.5e15,
        -4.5e15 - 0.5,
        9.2e18,
        -9.3e18,
        1e300,
        f64::INFINITY,
        f64::NEG_INFINITY,
    ];
    for _ in 0..10_000 {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        // Any bit pattern: every magnitude and sign, NaNs included.
        values.push(f64::from_bits(x));
        values.push((x >> 11) as f64 / 1e3 - 4e12);
    }
    for v in values {
        let (ours, libm) = (super::floor(v), v.floor());
        assert!(
            ours == libm || (ours.is_nan() && libm.is_nan()),
            "floor({v:e}) = {ours:e}, not {libm:e}"
        );
        let (ours, libm) = (super::ceil(v), v.ceil());
        assert!(
            ours == libm || (ours.is_nan() && libm.is_nan()),
            "ceil({v:e}) = {ours:e}, not {libm:e}"
        );
    }
}
