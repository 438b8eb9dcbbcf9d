//! The CDL-aware ordering policy on hand-made queues (positioning = LBA distance from the head).

mod common;

use common::*;
use drive::Ns;
use qos::order::{Aging, Candidate, OrderConfig, OrderingPolicy};
use qos::{
    CdlDescriptor, DeadlineAware, DeadlineAwareConfig, MediaOp, PerfVsDurationGuideline, Policy,
    Queue, QueueConfig, Scheduler,
};

const NOW: Ns = 1_000 * MS;

fn cand(id: u64, lba: u64, deadline: Option<Ns>) -> Candidate {
    Candidate {
        id,
        op: MediaOp {
            lba,
            blocks: 8,
            write: false,
            fua: false,
        },
        arrived: NOW - MS,
        deadline,
        class: 2,
    }
}

fn policy() -> DeadlineAware {
    let mut p = DeadlineAware::new(DeadlineAwareConfig::default());
    p.set_budget(PerfVsDurationGuideline::MAX);
    p
}

#[test]
fn without_deadlines_it_is_shortest_positioning_first() {
    let drive = FixedDrive::new(10 * MS);
    let queue = [cand(1, 900, None), cand(2, 100, None), cand(3, 500, None)];
    assert_eq!(policy().pick(NOW, &queue, &drive), 1);
}

#[test]
fn a_command_short_of_slack_beats_a_closer_one() {
    let drive = FixedDrive::new(10 * MS);
    let queue = [cand(1, 100, None), cand(2, 5_000, Some(NOW + 13 * MS))];
    assert_eq!(policy().pick(NOW, &queue, &drive), 1);
    // With a far deadline the deferral bonus is small and the closer command goes first.
    let queue = [cand(1, 100, None), cand(2, 5_000, Some(NOW + 1_000 * MS))];
    assert_eq!(policy().pick(NOW, &queue, &drive), 0);
}

#[test]
fn late_commands_go_in_deadline_order() {
    let drive = FixedDrive::new(10 * MS);
    let queue = [
        cand(1, 100, None),
        cand(2, 5_000, Some(NOW - 5 * MS)),
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
    let sptf = DeadlineAware::new(DeadlineAwareConfig {
        bonus: 0.0,
        base: OrderConfig::Sptf,
    });
    let late = run(Scheduler::CdlAware(sptf));
    assert_eq!((late.at, late.missed.guideline), (60 * MS, true));
    let met = run(Scheduler::CdlAware(DeadlineAware::new(
        DeadlineAwareConfig::default(),
    )));
    assert!(met.at <= 35 * MS && !met.missed.guideline, "{met:?}");
}

#[test]
fn config_parses_from_key_value_pairs() {
    let parse = |s: &str| s.parse::<DeadlineAwareConfig>();
    assert_eq!(parse(""), Ok(DeadlineAwareConfig::default()));
    assert_eq!(
        parse("bonus=2, base=asptf:rate=0.02"),
        Ok(DeadlineAwareConfig {
            bonus: 2.0,
            base: OrderConfig::Asptf(Aging::Additive { rate: 0.02 })
        })
    );
    assert_eq!(parse("base=sptf").map(|c| c.base), Ok(OrderConfig::Sptf));
    assert!(parse("bonus=-1").is_err_and(|e| e.contains("bonus")));
    assert!(parse("bonus=nan").is_err_and(|e| e.contains("bonus")));
    assert!(parse("bogus=1").is_err_and(|e| e.contains("bogus")));
    assert!(parse("bonus").is_err_and(|e| e.contains("key=value")));
    assert!(parse("base=warp").is_err_and(|e| e.contains("base")));
}

#[test]
fn over_a_base_policy_only_limited_commands_override_its_pick() {
    let drive = FixedDrive::new(10 * MS);
    let over_fifo = || {
        let mut p = DeadlineAware::with_base(DeadlineAwareConfig::default().bonus, Box::new(Fifo));
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
