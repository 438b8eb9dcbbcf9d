//! Classes, arbitration (strict, round robin, NVMe WRR with burst),
//! device queue depth and admission order, in virtual time with an exact drive.

mod common;

use common::*;
use qos::{
    Admission, Arbitration, CdlDescriptor, Class, Command, ConfigError, MediaOp, Policy,
    QueueConfig, SubmitError,
};

fn cmd(id: u64, class: Class) -> Command {
    Command {
        id,
        class: class.index(),
        op: MediaOp {
            lba: id,
            blocks: 8,
            write: false,
            fua: false,
        },
        dld: 0,
    }
}

/// Fills each class with `per_class` commands at t = 0 and returns the classes in the order
/// the drive served them (1 ms each, FIFO inside the device queue).
fn served(arbitration: Arbitration, depth: usize, per_class: [u64; 4]) -> Vec<Class> {
    let config = QueueConfig {
        depth,
        arbitration,
        ..QueueConfig::default()
    };
    let mut q = fifo_queue(config, FixedDrive::new(MS));
    let mut id = 0;
    for (class, n) in Class::ALL.into_iter().zip(per_class) {
        for _ in 0..n {
            submit(&mut q, 0, cmd(id, class));
            id += 1;
        }
    }
    let done = run(&mut q, u64::MAX);
    assert_eq!(done.len() as u64, per_class.iter().sum::<u64>());
    done.iter()
        .filter_map(|c| Class::from_index(c.class))
        .collect()
}

fn count(order: &[Class], class: Class) -> usize {
    order.iter().filter(|c| **c == class).count()
}

#[test]
fn strict_serves_lower_index_first() {
    let order = served(Arbitration::Strict, 1, [2, 2, 2, 2]);
    use Class::*;
    assert_eq!(
        order,
        [Urgent, Urgent, High, High, Medium, Medium, Low, Low]
    );
}

#[test]
fn round_robin_alternates_between_non_empty_classes() {
    let order = served(Arbitration::RoundRobin, 1, [0, 3, 1, 2]);
    use Class::*;
    assert_eq!(order, [High, Medium, Low, High, Low, High]);
}

#[test]
fn wrr_shares_follow_the_weights() {
    let wrr = Arbitration::WeightedRoundRobin {
        weights: [4, 2, 1],
        burst: 1,
    };
    let order = served(wrr, 1, [0, 400, 400, 400]);
    // While all three levels are backlogged, every round of 7 serves 4:2:1.
    let first = &order[..700];
    assert_eq!(count(first, Class::High), 400);
    assert_eq!(count(first, Class::Medium), 200);
    assert_eq!(count(first, Class::Low), 100);
    let round = &order[..7];
    assert_eq!(
        (
            count(round, Class::High),
            count(round, Class::Medium),
            count(round, Class::Low)
        ),
        (4, 2, 1)
    );
}

#[test]
fn wrr_urgent_is_strictly_first() {
    let wrr = Arbitration::WeightedRoundRobin {
        weights: [1, 1, 1],
        burst: 1,
    };
    let order = served(wrr, 1, [3, 2, 2, 2]);
    use Class::*;
    assert_eq!(&order[..3], &[Urgent, Urgent, Urgent]);
    assert_eq!(&order[3..], &[High, Medium, Low, High, Medium, Low]);
}

#[test]
fn wrr_burst_fetches_up_to_burst_per_turn() {
    // Depth 8: the first fetch fills 8 slots in one go. Weights 4:2:1, burst 2:
    // High 2, Medium 2, Low 1 (its credit), High 2 (its last), then a new round: Medium.
    let wrr = Arbitration::WeightedRoundRobin {
        weights: [4, 2, 1],
        burst: 2,
    };
    let order = served(wrr, 8, [0, 20, 20, 20]);
    use Class::*;
    assert_eq!(
        &order[..8],
        &[High, High, Medium, Medium, Low, High, High, Medium]
    );
    // Burst 1 interleaves instead; High spends its last two credits alone, then a new round.
    let wrr = Arbitration::WeightedRoundRobin {
        weights: [4, 2, 1],
        burst: 1,
    };
    let order = served(wrr, 8, [0, 20, 20, 20]);
    assert_eq!(
        &order[..8],
        &[High, Medium, Low, High, Medium, High, High, Medium]
    );
}

#[test]
fn device_queue_depth_bounds_fetched_commands() {
    let config = QueueConfig {
        depth: 4,
        ..QueueConfig::default()
    };
    let mut q = fifo_queue(config, FixedDrive::new(MS));
    for id in 0..10 {
        submit(&mut q, 0, cmd(id, Class::Medium));
    }
    let mut done = Vec::new();
    q.advance(0, &mut done);
    assert_eq!((q.device_len(), q.waiting(2), q.len()), (4, 6, 10));
    q.advance(MS, &mut done);
    assert_eq!((done.len(), q.device_len(), q.waiting(2)), (1, 4, 5));
    // With 3 units the drive takes 3 at a time, still within depth 4.
    let mut drive = FixedDrive::new(MS);
    drive.units = 3;
    let mut q = fifo_queue(
        QueueConfig {
            depth: 4,
            ..QueueConfig::default()
        },
        drive,
    );
    for id in 0..10 {
        submit(&mut q, 0, cmd(id, Class::Medium));
    }
    let done = run(&mut q, MS);
    assert_eq!(done.len(), 3);
    assert_eq!(q.device_len(), 4);
}

#[test]
fn config_is_validated() {
    let bad = |c: QueueConfig| {
        qos::Queue::new(
            c,
            FixedDrive::new(MS),
            qos::Scheduler::Policy(Box::new(Fifo)),
        )
        .err()
    };
    assert_eq!(
        bad(QueueConfig {
            depth: 0,
            ..QueueConfig::default()
        }),
        Some(ConfigError::Depth(0))
    );
    assert_eq!(
        bad(QueueConfig {
            depth: 257,
            ..QueueConfig::default()
        }),
        Some(ConfigError::Depth(257))
    );
    assert_eq!(
        bad(QueueConfig {
            depth: 256,
            ..QueueConfig::default()
        }),
        None
    );
    let wrr = Arbitration::WeightedRoundRobin {
        weights: [4, 0, 1],
        burst: 1,
    };
    assert_eq!(
        bad(QueueConfig {
            arbitration: wrr,
            ..QueueConfig::default()
        }),
        Some(ConfigError::Weight {
            level: "medium",
            weight: 0
        })
    );
    let wrr = Arbitration::WeightedRoundRobin {
        weights: [4, 2, 1],
        burst: 0,
    };
    assert_eq!(
        bad(QueueConfig {
            arbitration: wrr,
            ..QueueConfig::default()
        }),
        Some(ConfigError::Burst)
    );
}

#[test]
fn bad_commands_are_refused() {
    let mut q = fifo_queue(QueueConfig::default(), FixedDrive::new(MS));
    let mut c = cmd(1, Class::Low);
    c.class = 4;
    assert_eq!(q.submit(0, c), Err(SubmitError::Class(4)));
    let mut c = cmd(1, Class::Low);
    c.dld = 8;
    assert_eq!(q.submit(0, c), Err(SubmitError::Dld(8)));
    assert!(q.is_empty());
    assert_eq!(q.next_event(), None);
}

/// Behind a running command, at depth 1: U (unlimited), L1 (100 ms guideline), L2 (50 ms).
fn admitted(admission: Admission) -> Vec<u64> {
    let guideline =
        |ms| CdlDescriptor::guideline(ms * MS, Policy::CompleteEarliest).unwrap_or_default();
    let config = QueueConfig {
        depth: 1,
        admission,
        cdl: t2a(&[guideline(100), guideline(50)]),
        ..QueueConfig::default()
    };
    let mut q = fifo_queue(config, FixedDrive::new(MS));
    submit(&mut q, 0, read(0, 0, 0));
    q.advance(0, &mut Vec::new());
    submit(&mut q, 0, read(1, 1, 0));
    submit(&mut q, 0, read(2, 2, 1));
    submit(&mut q, 0, read(3, 3, 2));
    submit(&mut q, 0, read(4, 4, 0));
    run(&mut q, u64::MAX).iter().map(|c| c.id).collect()
}

#[test]
fn admission_fifo_keeps_arrival_order() {
    assert_eq!(admitted(Admission::Fifo), [0, 1, 2, 3, 4]);
}

#[test]
fn admission_deadline_aware_admits_nearest_deadline_first() {
    assert_eq!(admitted(Admission::DeadlineAware), [0, 3, 2, 1, 4]);
}

#[test]
fn class_names_and_ioprio() {
    assert_eq!(Class::from_name("rt"), Some(Class::High));
    assert_eq!(Class::from_name("idle"), Some(Class::Low));
    assert_eq!(Class::from_name("urgent"), Some(Class::Urgent));
    assert_eq!(Class::from_name("bogus"), None);
    assert_eq!(Class::from_ioprio_class(1), Class::High);
    assert_eq!(Class::from_ioprio_class(0), Class::Medium);
    assert_eq!(Class::from_ioprio_class(3), Class::Low);
}
