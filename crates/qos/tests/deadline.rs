//! The CDL-aware ordering policy on hand-made queues (positioning = LBA distance from the head,
//! 10 ms of transfer), one rule at a time: slack against service time, start and completion
//! limits, the max active time, ties by positioning, the budget, look-ahead.

mod common;

use common::*;
use drive::{Drive, MediaOp, Ns, QueuedOp, Service};
use qos::order::{Aging, Candidate, Limits, OrderConfig, OrderingPolicy, QueueMemos};
use qos::{
    CdlDescriptor, DeadlineAware, DeadlineAwareConfig, PerfVsDurationGuideline, Policy, Queue,
    QueueConfig, Scheduler,
};

const NOW: Ns = 1_000 * MS;

fn op(lba: u64) -> MediaOp {
    MediaOp {
        lba,
        blocks: 8,
        write: false,
        fua: false,
    }
}

fn with_limits(id: u64, lba: u64, limits: Limits) -> Candidate {
    Candidate {
        id,
        op: op(lba),
        arrived: NOW - MS,
        seq: id,
        limits,
        class: 2,
    }
}

/// A candidate with a duration guideline (a completion limit) at `finish_by`, if any.
fn cand(id: u64, lba: u64, finish_by: Option<Ns>) -> Candidate {
    with_limits(id, lba, Limits::new(None, finish_by, None))
}

fn config(aggressiveness: f64) -> DeadlineAwareConfig {
    DeadlineAwareConfig {
        aggressiveness,
        ..DeadlineAwareConfig::default()
    }
}

/// A fresh policy (dispatch interval and service time assumed 12 ms) with the 20 % budget.
fn policy_with(config: DeadlineAwareConfig) -> DeadlineAware {
    let mut p = DeadlineAware::new(config);
    p.set_budget(PerfVsDurationGuideline::MAX);
    p
}

fn policy() -> DeadlineAware {
    policy_with(DeadlineAwareConfig::default())
}

#[test]
fn without_deadlines_it_is_shortest_positioning_first() {
    let drive = FixedDrive::new(10 * MS);
    let queue = [cand(1, 900, None), cand(2, 100, None), cand(3, 500, None)];
    assert_eq!(policy().pick(NOW, &queue, &drive), 1);
}

#[test]
fn a_command_short_of_slack_beats_a_closer_one() {
    // 13 ms left and 10 ms of service: it cannot wait for another pick.
    let drive = FixedDrive::new(10 * MS);
    let queue = [cand(1, 100, None), cand(2, 5_000, Some(NOW + 13 * MS))];
    assert_eq!(policy().pick(NOW, &queue, &drive), 1);
    // With a second to go, waiting costs nothing and the closer command goes first.
    let queue = [cand(1, 100, None), cand(2, 5_000, Some(NOW + 1_000 * MS))];
    assert_eq!(policy().pick(NOW, &queue, &drive), 0);
}

#[test]
fn start_and_completion_limits_differ() {
    // 13 ms left, picks 12 ms apart, 10 ms of service, no margin. A start limit is still met
    // at the next pick, so the closer command goes first; a completion limit is not (the
    // command would finish 9 ms late), so it goes now. (The start limit's descriptor has a
    // far completion limit too, so the start limit is planned without room; see
    // a_start_limit_alone_is_planned_with_room.)
    let far = Some(NOW + 10_000 * MS);
    let drive = FixedDrive::new(10 * MS);
    let start = Limits::new(Some(NOW + 13 * MS), far, None);
    let queue = [cand(1, 100, None), with_limits(2, 5_000, start)];
    assert_eq!(policy_with(config(0.0)).pick(NOW, &queue, &drive), 0);
    let queue = [cand(1, 100, None), cand(2, 5_000, Some(NOW + 13 * MS))];
    assert_eq!(policy_with(config(0.0)).pick(NOW, &queue, &drive), 1);
    // Only the start counts against a start limit: 2 ms before it, a command that takes
    // 40 ms still meets it by starting now, and goes.
    let drive = FixedDrive::new(40 * MS);
    let soon = Limits::new(Some(NOW + 2 * MS), far, None);
    let queue = [cand(1, 100, None), with_limits(2, 5_000, soon)];
    assert_eq!(policy_with(config(0.0)).pick(NOW, &queue, &drive), 1);
}

#[test]
fn a_start_limit_alone_is_planned_with_room() {
    // 60 ms to a start limit, picks 12 ms apart, no margin: with a far completion limit in
    // the same descriptor four more picks may pass before it must start, and the closer
    // command goes first. A start limit alone is planned six dispatch intervals (72 ms)
    // earlier, so that the command has finished by then: it is due, and goes now.
    let drive = FixedDrive::new(10 * MS);
    let both = Limits::new(Some(NOW + 60 * MS), Some(NOW + 10_000 * MS), None);
    let queue = [cand(1, 100, None), with_limits(2, 5_000, both)];
    assert_eq!(policy_with(config(0.0)).pick(NOW, &queue, &drive), 0);
    let alone = Limits::new(Some(NOW + 60 * MS), None, None);
    let queue = [cand(1, 100, None), with_limits(2, 5_000, alone)];
    assert_eq!(policy_with(config(0.0)).pick(NOW, &queue, &drive), 1);
}

#[test]
fn aggressiveness_is_a_margin_before_the_limit() {
    // 40 ms left: three more picks before the command must start. Planned to the limit it
    // waits; with a margin of three dispatch intervals it goes now.
    let drive = FixedDrive::new(10 * MS);
    let queue = [cand(1, 100, None), cand(2, 5_000, Some(NOW + 40 * MS))];
    assert_eq!(policy_with(config(0.0)).pick(NOW, &queue, &drive), 0);
    assert_eq!(policy_with(config(3.0)).pick(NOW, &queue, &drive), 1);
}

#[test]
fn an_offer_that_overruns_the_max_active_time_is_priced_as_a_miss() {
    // Two commands that must start now (5 ms to their start limits). The closer one would
    // overrun its 1 ms max active time (10 ms of service), a miss either way; the other one
    // goes instead. Without that limit the closer one goes. (A far completion limit in
    // both descriptors plans the start limits without room, so that the max active time
    // decides.)
    let drive = FixedDrive::new(10 * MS);
    let far = Some(NOW + 10_000 * MS);
    let start = Limits::new(Some(NOW + 5 * MS), far, None);
    let active = Limits::new(Some(NOW + 5 * MS), far, Some(MS));
    let queue = [
        cand(1, 100, None),
        with_limits(2, 4_000, active),
        with_limits(3, 5_000, start),
    ];
    assert_eq!(policy_with(config(0.0)).pick(NOW, &queue, &drive), 2);
    let queue = [
        cand(1, 100, None),
        with_limits(2, 4_000, start),
        with_limits(3, 5_000, start),
    ];
    assert_eq!(policy_with(config(0.0)).pick(NOW, &queue, &drive), 1);
}

#[test]
fn equal_limits_go_by_positioning_not_arrival() {
    // Two reads with the same 50 ms guideline that arrived 0.5 ms apart, both due: the
    // closer one goes, though the other arrived first.
    let drive = FixedDrive::new(10 * MS);
    let mut first = cand(2, 9_000, Some(NOW + 5 * MS));
    first.arrived = NOW - 45 * MS;
    let mut second = cand(3, 2_000, Some(NOW + 5 * MS + MS / 2));
    second.arrived = NOW - 45 * MS + MS / 2;
    let queue = [cand(1, 100, None), first, second];
    assert_eq!(policy().pick(NOW, &queue, &drive), 2);
}

#[test]
fn late_commands_go_in_deadline_order() {
    // Late by 30 ms and by 1 ms (more than a dispatch interval apart): the latest goes
    // first, though it is the further one.
    let drive = FixedDrive::new(10 * MS);
    let queue = [
        cand(1, 100, None),
        cand(2, 5_000, Some(NOW - 30 * MS)),
        cand(3, 4_000, Some(NOW - MS)),
    ];
    assert_eq!(policy().pick(NOW, &queue, &drive), 1);
}

#[test]
fn a_zero_perf_vs_duration_guideline_leaves_pure_positioning() {
    let drive = FixedDrive::new(10 * MS);
    let mut p = policy();
    p.set_budget(PerfVsDurationGuideline::default());
    let queue = [cand(1, 100, None), cand(2, 5_000, Some(NOW - 5 * MS))];
    assert_eq!(p.pick(NOW, &queue, &drive), 0);
}

#[test]
fn the_budget_bounds_the_average_and_lets_cheap_picks_through() {
    // perf_vs_duration_guideline 0.5 %: the credit of a fresh queue (768 ms of assumed
    // service) allows 3.8 ms of positioning beyond the best choice. A due command 5 ms away
    // does not fit; one 1 ms away does, three times, and the fourth no longer fits; serving
    // commands (10 ms each) earns it back.
    let drive = FixedDrive::new(10 * MS);
    let mut p = policy();
    p.set_budget(PerfVsDurationGuideline::new(1).expect("code 1 is 0.5 %"));
    let dear = [cand(1, 100, None), cand(2, 5_000_100, Some(NOW + 5 * MS))];
    assert_eq!(p.pick(NOW, &dear, &drive), 0);
    let cheap = [cand(1, 100, None), cand(2, 1_000_100, Some(NOW + 5 * MS))];
    for round in 0..3 {
        assert_eq!(p.pick(NOW, &cheap, &drive), 1, "round {round}");
    }
    assert_eq!(p.pick(NOW, &cheap, &drive), 0);
    for _ in 0..200 {
        p.observe_service(10 * MS);
    }
    assert_eq!(p.pick(NOW, &cheap, &drive), 1);
    let mut generous = policy();
    assert_eq!(generous.pick(NOW, &dear, &drive), 1);
}

/// A drive with a look-ahead: positioning from the head (LBA distance, ns), and a table of
/// positioning times of one op right after another (LBA distance by default).
struct AheadDrive {
    head: u64,
    after: Vec<((u64, u64), Ns)>,
}

impl Drive for AheadDrive {
    fn parallelism(&self) -> usize {
        1
    }
    fn positioning_time(&self, _now: Ns, op: &MediaOp) -> Ns {
        op.lba.abs_diff(self.head)
    }
    fn service_time(&self, now: Ns, op: &MediaOp) -> Ns {
        self.positioning_time(now, op) + 10 * MS
    }
    fn positioning_after(
        &self,
        _now: Ns,
        queue: &[QueuedOp],
        _times: &[Ns],
        firsts: &[usize],
        nexts: &[usize],
        out: &mut Vec<Ns>,
    ) -> bool {
        out.clear();
        for f in firsts.iter().map(|&i| &queue[i]) {
            for n in nexts.iter().map(|&i| &queue[i].op) {
                let listed = self.after.iter().find(|(k, _)| *k == (f.op.lba, n.lba));
                out.push(listed.map_or(n.lba.abs_diff(f.op.lba), |(_, t)| *t));
            }
        }
        true
    }
    fn start(&mut self, now: Ns, op: &MediaOp) -> Service {
        self.head = op.lba;
        Service {
            done_at: now + 10 * MS,
            outcome: drive::MediaOutcome::Ok,
            recovery: 0,
        }
    }
    fn flush(&mut self, now: Ns) -> Ns {
        now
    }
}

#[test]
fn looking_ahead_it_reaches_a_limited_command_through_another() {
    // A command far from the head (50 µs) that must not wait beyond the next pick (26 ms to
    // its limit with the margin, 10 ms of service, picks 12 ms apart), and a command 1 µs
    // dearer than the best one after which it is reached at once: that one goes now, and the
    // limited one right after, in time.
    let drive = AheadDrive {
        head: 0,
        after: vec![((1_100, 50_000), 0)],
    };
    let queue = [
        cand(1, 100, None),
        cand(2, 1_100, None),
        cand(3, 50_000, Some(NOW + 50 * MS)),
    ];
    let mut p = policy();
    assert_eq!(p.pick(NOW, &queue, &drive), 1);
    // A drive that cannot look ahead offers it only at its own cost, and at the next pick it
    // will still be in time: the best command goes now.
    let plain = FixedDrive::new(10 * MS);
    assert_eq!(policy().pick(NOW, &queue, &plain), 0);
    // From there the limited one costs nothing.
    let drive = AheadDrive {
        head: 50_000,
        after: Vec::new(),
    };
    assert_eq!(p.pick(NOW + 10 * MS, &[queue[0], queue[2]], &drive), 1);
}

#[test]
fn the_base_policy_keeps_its_aging() {
    let drive = FixedDrive::new(10 * MS);
    let mut p = DeadlineAware::new(DeadlineAwareConfig {
        base: OrderConfig::Asptf(Aging::Additive { rate: 0.01 }),
        ..Default::default()
    });
    let mut old = cand(1, 900_000, None);
    old.arrived = 0;
    let queue = [cand(2, 100, None), old];
    assert_eq!(p.pick(NOW, &queue, &drive), 1);
}

#[test]
fn in_the_queue_a_limited_command_meets_its_guideline() {
    // Five unlimited commands on the way and one limited further out, 10 ms each: SPTF alone
    // serves the far one last (at 60 ms); its 35 ms guideline makes the policy take it in time.
    let run = |scheduler| {
        let mut pages = t2a(&[]);
        pages.t2a.perf_vs_duration_guideline = PerfVsDurationGuideline::MAX;
        if let Some(d) = CdlDescriptor::guideline(35 * MS, Policy::CompleteEarliest) {
            pages.t2a.descriptors[0] = d;
        }
        let config = QueueConfig {
            cdl: pages,
            ..QueueConfig::default()
        };
        let Ok(mut q) = Queue::new(config, FixedDrive::new(10 * MS), scheduler) else {
            panic!("config refused")
        };
        submit(&mut q, 0, read(9, 900, 1));
        for id in 0..5 {
            submit(&mut q, 0, read(id, 100 * (id + 1), 0));
        }
        let done = run(&mut q, u64::MAX);
        by_id(&done, 9)
    };
    let late = run(Scheduler::Policy(OrderConfig::Sptf.build()));
    assert_eq!((late.at, late.missed.guideline), (60 * MS, true));
    let met = run(Scheduler::CdlAware(Box::new(DeadlineAware::new(
        DeadlineAwareConfig::default(),
    ))));
    assert!(met.at <= 35 * MS && !met.missed.guideline, "{met:?}");
}

#[test]
fn config_parses_from_key_value_pairs() {
    let parse = |s: &str| s.parse::<DeadlineAwareConfig>();
    assert_eq!(parse(""), Ok(DeadlineAwareConfig::default()));
    assert_eq!(DeadlineAwareConfig::default().aggressiveness, 2.0);
    assert_eq!(
        parse("aggressiveness=0.5, base=asptf:rate=0.02"),
        Ok(DeadlineAwareConfig {
            aggressiveness: 0.5,
            base: OrderConfig::Asptf(Aging::Additive { rate: 0.02 })
        })
    );
    assert_eq!(
        parse("aggressiveness=-1").map(|c| c.aggressiveness),
        Ok(-1.0)
    );
    assert_eq!(parse("base=sptf").map(|c| c.base), Ok(OrderConfig::Sptf));
    assert!(parse("aggressiveness=nan").is_err_and(|e| e.contains("aggressiveness")));
    assert!(parse("aggressiveness=inf").is_err_and(|e| e.contains("aggressiveness")));
    assert!(parse("bonus=1").is_err_and(|e| e.contains("bonus")));
    assert!(parse("aggressiveness").is_err_and(|e| e.contains("key=value")));
    assert!(parse("base=warp").is_err_and(|e| e.contains("base")));
}

#[test]
fn over_a_base_policy_only_limited_commands_override_its_pick() {
    let drive = FixedDrive::new(10 * MS);
    let over_fifo = || {
        let mut p = DeadlineAware::with_base(2.0, Box::new(Fifo));
        p.set_budget(PerfVsDurationGuideline::MAX);
        p
    };
    // FIFO's pick stands against a closer unlimited command and a relaxed limited one.
    let queue = [
        cand(1, 900, None),
        cand(2, 100, None),
        cand(3, 950, Some(NOW + 1_000 * MS)),
    ];
    assert_eq!(over_fifo().pick(NOW, &queue, &drive), 0);
    // A limited command short of slack takes over.
    let queue = [cand(1, 900, None), cand(2, 5_000, Some(NOW + 13 * MS))];
    assert_eq!(over_fifo().pick(NOW, &queue, &drive), 1);
}

#[test]
fn reaching_a_command_through_another_must_afford_both_picks() {
    // The limited command costs 10 ms started now, 5 ms reached through a command 1 µs
    // dearer than the best: worth it with the 20 % budget. With 0.5 % (3.8 ms of credit) the
    // first pick alone would fit, both do not, and the best command goes.
    let drive = AheadDrive {
        head: 0,
        after: vec![((1_100, 10_000_100), 5 * MS)],
    };
    let queue = [
        cand(1, 100, None),
        cand(2, 1_100, None),
        cand(3, 10_000_100, Some(NOW + 50 * MS)),
    ];
    assert_eq!(policy().pick(NOW, &queue, &drive), 1);
    let mut tight = policy();
    tight.set_budget(PerfVsDurationGuideline::new(1).expect("code 1 is 0.5 %"));
    assert_eq!(tight.pick(NOW, &queue, &drive), 0);
}

#[test]
fn the_pick_does_not_depend_on_the_order_of_the_queue() {
    // Two policies over two copies of one HDD serve the same commands (random 128 KiB reads,
    // a fifth with a 50 ms guideline): one queue in arrival order, the other scrambled as the
    // device queue of an order-free policy scrambles it (the last command takes the picked
    // one's place). Every pick is of the same command.
    let (mut sorted, mut scrambled) = (policy(), policy());
    assert!(sorted.order_free());
    let mut drives = [drive::Hdd::default_22tb(), drive::Hdd::default_22tb()];
    let mut queues: [(Vec<Candidate>, QueueMemos); 2] = Default::default();
    let mut x: u64 = 7;
    let mut random = move |n: u64| {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (x >> 33) % n
    };
    let (mut now, mut seq, mut taken_over) = (0, 0, 0);
    for step in 0..10_000 {
        while queues[0].0.len() < 32 {
            let limits = match random(5) {
                0 => Limits::new(None, Some(now + 50 * MS), None),
                _ => Limits::default(),
            };
            let c = Candidate {
                id: random(1 << 20),
                op: MediaOp {
                    lba: random(1 << 34) * 256,
                    blocks: 256,
                    write: false,
                    fua: false,
                },
                arrived: now,
                seq,
                limits,
                class: 2,
            };
            seq += 1;
            for (queue, memos) in &mut queues {
                queue.push(c);
                memos.push(c.op);
            }
        }
        let [(q0, m0), (q1, m1)] = &mut queues;
        let i = sorted.pick_memoised(now, q0, m0, &drives[0]);
        let j = scrambled.pick_memoised(now, q1, m1, &drives[1]);
        assert_eq!(q0[i].id, q1[j].id, "step {step}");
        let base = OrderConfig::default().build().pick(now, q0, &drives[0]);
        taken_over += usize::from(q0[base].id != q0[i].id);
        let c = q0.remove(i);
        m0.remove(i);
        q1.swap_remove(j);
        m1.swap_remove(j);
        let done = drives.each_mut().map(|d| d.start(now, &c.op).done_at);
        assert_eq!(done[0], done[1]);
        sorted.observe_service(done[0] - now);
        scrambled.observe_service(done[0] - now);
        now = done[0];
    }
    assert!(
        taken_over > 100,
        "only {taken_over} picks were the policy's own"
    );
}
