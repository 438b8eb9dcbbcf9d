//! Queue mechanics: event order, instant drives, slot reuse after an abandoned operation,
//! parallel units, counters.

mod common;

use common::*;
use qos::{CdlDescriptor, Outcome, Policy, QueueConfig, T2CdlUnits};

#[test]
fn an_instant_drive_completes_everything_at_once_in_order() {
    let mut q = fifo_queue(QueueConfig::default(), FixedDrive::new(0));
    for id in 0..100 {
        submit(&mut q, 5, read(id, id, 0));
    }
    let mut done = Vec::new();
    q.advance(5, &mut done);
    assert_eq!(done.len(), 100);
    assert!(done.iter().zip(0..).all(|(c, id)| c.id == id && c.at == 5));
    assert_eq!(q.next_event(), None);
    assert!(q.is_empty());
}

#[test]
fn next_event_is_exact() {
    let mut q = fifo_queue(QueueConfig::default(), FixedDrive::new(10 * MS));
    assert_eq!(q.next_event(), None);
    submit(&mut q, 3, read(1, 1, 0));
    assert_eq!(q.next_event(), Some(3));
    let mut done = Vec::new();
    q.advance(3, &mut done);
    assert_eq!(q.next_event(), Some(3 + 10 * MS));
    q.advance(3 + 10 * MS - 1, &mut done);
    assert!(done.is_empty());
    q.advance(3 + 10 * MS, &mut done);
    assert_eq!(done.len(), 1);
    assert_eq!(q.next_event(), None);
}

#[test]
fn a_reused_slot_ignores_the_abandoned_operations_completion() {
    let d = CdlDescriptor {
        t2cdlunits: T2CdlUnits::Ms10,
        max_active_time: 3,
        max_active_time_policy: Policy::CompleteUnavailable,
        ..CdlDescriptor::default()
    };
    let mut drive = FixedDrive::new(10 * MS);
    drive.slow.push((200, 100 * MS));
    let config = QueueConfig {
        cdl: t2a(&[d]),
        ..QueueConfig::default()
    };
    let mut q = fifo_queue(config, drive);
    submit(&mut q, 0, read(1, 200, 1));
    let done = run(&mut q, 30 * MS);
    assert_eq!(
        (done.len(), done[0].outcome),
        (1, Outcome::CompletedUnavailable)
    );
    // The next command takes the freed slot; the first op's 100 ms completion must not end it.
    submit(&mut q, 30 * MS, read(2, 200, 0));
    let done = run(&mut q, u64::MAX);
    assert_eq!(done.len(), 1);
    assert_eq!((done[0].id, done[0].at), (2, 130 * MS));
}

#[test]
fn parallel_units_run_side_by_side() {
    let mut drive = FixedDrive::new(10 * MS);
    drive.units = 4;
    let mut q = fifo_queue(QueueConfig::default(), drive);
    for id in 0..8 {
        submit(&mut q, 0, read(id, id, 0));
    }
    let done = run(&mut q, u64::MAX);
    let at: Vec<u64> = done.iter().map(|c| c.at / MS).collect();
    assert_eq!(at, [10, 10, 10, 10, 20, 20, 20, 20]);
}

#[test]
fn counters_per_class_and_descriptor() {
    let d = CdlDescriptor::guideline(15 * MS, Policy::Abort).unwrap_or_default();
    let config = QueueConfig {
        cdl: t2a(&[d, d]),
        ..QueueConfig::default()
    };
    let mut q = fifo_queue(config, FixedDrive::new(10 * MS));
    submit(&mut q, 0, read(1, 1, 1));
    submit(&mut q, 0, read(2, 2, 1));
    let mut c = read(3, 3, 2);
    c.class = 1;
    submit(&mut q, 0, c);
    submit(&mut q, 0, write(4, 4, 0));
    run(&mut q, u64::MAX);
    let s = q.stats();
    assert_eq!(
        (s.t2a[0].commands, s.t2a[1].commands, s.unlimited.commands),
        (2, 1, 1)
    );
    assert_eq!((s.classes[2].commands, s.classes[1].commands), (3, 1));
    // Strict arbitration serves class 1 first: 3 runs 0..10 ms; 1 starts at 10 ms and is
    // aborted at 15 ms mid-service; 2 is aborted at 15 ms before starting; 4 runs 15..25 ms.
    assert_eq!(s.t2a[1].completions.get(Outcome::Good), 1);
    assert_eq!(
        s.t2a[0].completions.get(Outcome::AbortedDuringProcessing),
        1
    );
    assert_eq!(
        s.t2a[0].completions.get(Outcome::AbortedBeforeProcessing),
        1
    );
    assert_eq!(
        s.t2a[0]
            .misses(qos::LimitKind::Guideline)
            .get(Policy::Abort),
        2
    );
    assert_eq!(s.classes[1].completions.get(Outcome::Good), 1);
    assert_eq!(s.classes[2].completions.total(), 3);
    assert_eq!(s.classes[2].commands_missed, 2);
    assert_eq!(s.unlimited.completions.get(Outcome::Good), 1);
    assert_eq!(s.descriptor(2, false).commands, 1);
    assert_eq!(s.descriptor(0, true).commands, 1);
}

#[test]
fn a_queue_can_move_to_another_thread() {
    fn send<T: Send>(_: &T) {}
    let q = fifo_queue(QueueConfig::default(), FixedDrive::new(MS));
    send(&q);
    let mut q = q;
    q.drive_mut().units = 2;
    assert_eq!(q.drive().units, 2);
}

/// Random commands, limits, policies, page changes and aborts: every command leaves exactly
/// once (completed, in time order, or aborted), and the device queue never exceeds its depth.
#[test]
fn random_traffic_keeps_the_invariants() {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let policies = [
        Policy::CompleteEarliest,
        Policy::CompleteUnavailable,
        Policy::Abort,
    ];
    let guideline_policies = [
        Policy::CompleteEarliest,
        Policy::ContinueNextLimit,
        Policy::ContinueNoLimit,
        Policy::CompleteUnavailable,
        Policy::Abort,
    ];
    let random_pages = |next: &mut dyn FnMut() -> u64| {
        let mut pages = t2a(&[]);
        for page in [&mut pages.t2a, &mut pages.t2b] {
            for d in page.descriptors.iter_mut() {
                *d = CdlDescriptor {
                    t2cdlunits: T2CdlUnits::Ms10,
                    max_inactive_time: (next() % 4) as u16,
                    max_inactive_time_policy: policies[(next() % 3) as usize],
                    max_active_time: (next() % 3) as u16,
                    max_active_time_policy: [
                        Policy::AbortRecovery,
                        policies[(next() % 3) as usize],
                    ][(next() % 2) as usize],
                    command_duration_guideline: (next() % 6) as u16,
                    command_duration_guideline_policy: guideline_policies[(next() % 5) as usize],
                };
            }
        }
        pages
    };
    let mut all_aborted = 0;
    for round in 0..20 {
        let depth = 1 + (next() % 8) as usize;
        let arbitration = match round % 3 {
            0 => qos::Arbitration::Strict,
            1 => qos::Arbitration::RoundRobin,
            _ => qos::Arbitration::WeightedRoundRobin {
                weights: [3, 2, 1],
                burst: 2,
            },
        };
        let admission = if round % 2 == 0 {
            qos::Admission::Fifo
        } else {
            qos::Admission::DeadlineAware
        };
        let config = QueueConfig {
            depth,
            arbitration,
            admission,
            cdl: random_pages(&mut next),
        };
        let mut drive = FixedDrive::new(3 * MS);
        drive.units = 1 + (next() % 3) as usize;
        drive.slow.push((7, 45 * MS));
        let mut q = fifo_queue(config, drive);
        let mut now = 0;
        let mut submitted = 0u64;
        let mut aborted = 0u64;
        let mut done = Vec::new();
        for _ in 0..400 {
            now += next() % (2 * MS);
            let before = done.len();
            q.advance(now, &mut done);
            assert!(q.device_len() <= depth);
            assert!(done[before..].iter().all(|c| c.at <= now));
            if next() % 50 == 0 {
                assert!(q.set_cdl(random_pages(&mut next)).is_ok());
            }
            if submitted > 0 && next() % 20 == 0 && q.abort(now, next() % submitted) {
                aborted += 1;
            }
            let mut c = read(submitted, next() % 10, (next() % 8) as u8);
            c.class = (next() % 4) as usize;
            c.op.write = next() % 3 == 0;
            submit(&mut q, now, c);
            submitted += 1;
        }
        done.extend(run(&mut q, u64::MAX));
        assert!(q.is_empty());
        assert!(
            done.windows(2).all(|w| w[0].at <= w[1].at),
            "completions out of order"
        );
        let mut ids: Vec<u64> = done.iter().map(|c| c.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len() as u64 + aborted, submitted);
        assert_eq!(done.len(), ids.len());
        for c in &done {
            assert!(c.at >= c.submitted_at);
            assert_eq!(c.outcome.is_duration_limit(), c.ended_by.is_some());
        }
        let s = q.stats();
        let total: u64 = s.classes.iter().map(|c| c.completions.total()).sum();
        let aborts: u64 = s.classes.iter().map(|c| c.aborted_tasks).sum();
        assert_eq!((total, aborts), (submitted - aborted, aborted));
        all_aborted += aborted;
    }
    assert!(all_aborted > 20, "{all_aborted}");
}

/// Records what the ordering policy is shown.
struct Recording(std::sync::Arc<std::sync::Mutex<Vec<(u64, u64)>>>);

impl qos::order::OrderingPolicy for Recording {
    fn pick(
        &mut self,
        _now: drive::Ns,
        queue: &[qos::order::Candidate],
        _drive: &dyn drive::Drive,
    ) -> usize {
        if let Ok(mut seen) = self.0.lock() {
            seen.extend(queue.iter().map(|c| (c.id, c.arrived)));
        }
        0
    }
}

#[test]
fn ordering_sees_the_admission_time_as_arrival() {
    // Depth 1: the second command waits 10 ms in its submission queue. Aging policies must
    // count from its admission into the device queue, not from its submission.
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let scheduler = qos::Scheduler::Policy(Box::new(Recording(seen.clone())));
    let config = QueueConfig {
        depth: 1,
        ..QueueConfig::default()
    };
    let Ok(mut q) = qos::Queue::new(config, FixedDrive::new(10 * MS), scheduler) else {
        panic!("config refused")
    };
    submit(&mut q, 0, read(1, 1, 0));
    submit(&mut q, 0, read(2, 2, 0));
    let done = run(&mut q, u64::MAX);
    assert_eq!(by_id(&done, 2).submitted_at, 0);
    let seen = seen.lock().map(|s| s.clone()).unwrap_or_default();
    assert_eq!(seen, [(1, 0), (2, 10 * MS)]);
}

#[test]
fn abort_task_removes_a_command_wherever_it_is() {
    let mut drive = FixedDrive::new(10 * MS);
    drive.slow.push((1, 100 * MS));
    let config = QueueConfig {
        depth: 2,
        ..QueueConfig::default()
    };
    let mut q = fifo_queue(config, drive);
    for id in 1..=4 {
        submit(&mut q, 0, read(id, id, 0));
    }
    let mut done = Vec::new();
    q.advance(0, &mut done);
    // 1 runs (100 ms), 2 is in the device queue, 3 and 4 wait in the submission queue.
    assert!(q.abort(MS, 3));
    assert!(!q.abort(MS, 3));
    assert!(!q.abort(MS, 99));
    q.advance(5 * MS, &mut done);
    assert!(q.abort(5 * MS, 1));
    let done = run(&mut q, u64::MAX);
    let ids: Vec<(u64, u64)> = done.iter().map(|c| (c.id, c.at / MS)).collect();
    // 2 starts when 1 is abandoned at 5 ms; 4 follows.
    assert_eq!(ids, [(2, 15), (4, 25)]);
    assert_eq!(q.stats().classes[2].aborted_tasks, 2);
    assert_eq!(q.stats().classes[2].completions.total(), 2);
}

#[test]
fn abort_all_empties_the_queue() {
    let config = QueueConfig {
        depth: 2,
        ..QueueConfig::default()
    };
    let mut q = fifo_queue(config, FixedDrive::new(10 * MS));
    for id in 1..=5 {
        submit(&mut q, 0, read(id, id, 0));
    }
    q.advance(0, &mut Vec::new());
    assert_eq!(q.abort_all(), 5);
    assert!(q.is_empty());
    assert_eq!(q.next_event(), None);
    assert_eq!(q.stats().unlimited.aborted_tasks, 5);
    // The queue works on afterwards.
    submit(&mut q, 20 * MS, read(6, 6, 0));
    let done = run(&mut q, u64::MAX);
    assert_eq!((done.len(), done[0].at), (1, 30 * MS));
}

#[test]
fn head_of_queue_tasks_start_before_queued_commands_and_jump_the_depth() {
    let config = QueueConfig {
        depth: 2,
        ..QueueConfig::default()
    };
    let mut q = fifo_queue(config, FixedDrive::new(10 * MS));
    for id in 0..4 {
        submit(&mut q, 0, read(id, id, 0));
    }
    let mut done = Vec::new();
    q.advance(0, &mut done);
    // 0 runs, 1 waits in the device queue (depth 2), 2 and 3 in the submission queue.
    q.submit_head_of_queue(MS, read(10, 10, 0)).unwrap();
    q.submit_head_of_queue(2 * MS, read(11, 11, 0)).unwrap();
    assert_eq!(
        q.device_len(),
        4,
        "both HEAD OF QUEUE tasks are in the device queue"
    );
    let done = run(&mut q, u64::MAX);
    let order: Vec<u64> = done.iter().map(|c| c.id).collect();
    assert_eq!(order, [0, 10, 11, 1, 2, 3]);
    assert_eq!(done[1].at, 20 * MS);
}

#[test]
fn an_aborted_head_of_queue_task_leaves_the_queue() {
    let mut q = fifo_queue(QueueConfig::default(), FixedDrive::new(10 * MS));
    submit(&mut q, 0, read(1, 1, 0));
    let mut done = Vec::new();
    q.advance(0, &mut done);
    q.submit_head_of_queue(0, read(2, 2, 0)).unwrap();
    assert!(q.abort(MS, 2));
    assert_eq!(q.len(), 1);
    let done = run(&mut q, u64::MAX);
    assert_eq!(done.iter().map(|c| c.id).collect::<Vec<_>>(), [1]);
}

/// The default ordering asked through the queue's memos, checked against itself asked
/// without them: the memos must follow the device queue exactly.
struct Checked {
    memoised: qos::order::Rpo,
    plain: qos::order::Rpo,
    picks: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl qos::order::OrderingPolicy for Checked {
    fn pick(
        &mut self,
        now: drive::Ns,
        queue: &[qos::order::Candidate],
        drive: &dyn drive::Drive,
    ) -> usize {
        self.plain.pick(now, queue, drive)
    }

    fn pick_memoised(
        &mut self,
        now: drive::Ns,
        queue: &[qos::order::Candidate],
        memos: &mut qos::order::QueueMemos,
        drive: &dyn drive::Drive,
    ) -> usize {
        let ops: Vec<drive::MediaOp> = queue.iter().map(|c| c.op).collect();
        let kept: Vec<drive::MediaOp> = memos.ops().iter().map(|q| q.op).collect();
        assert_eq!(kept, ops, "memos out of step at {now}");
        let pick = self.memoised.pick_memoised(now, queue, memos, drive);
        assert_eq!(pick, self.plain.pick(now, queue, drive), "at {now}");
        self.picks
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        pick
    }
}

#[test]
fn the_queues_memos_follow_its_device_queue() {
    // Commands leave the device queue when picked, when an inactive limit aborts them (Fh)
    // and by ABORT TASK; re-reads and sequential reads hit the drive's read cache.
    let mut x: u64 = 99;
    let mut next = move || {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        x >> 24
    };
    let picks = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let policy = Checked {
        memoised: qos::order::Rpo::default(),
        plain: qos::order::Rpo::default(),
        picks: picks.clone(),
    };
    let config = QueueConfig {
        depth: 16,
        cdl: t2a(&[CdlDescriptor {
            t2cdlunits: T2CdlUnits::Ms10,
            max_inactive_time: 8,
            max_inactive_time_policy: Policy::Abort,
            ..CdlDescriptor::default()
        }]),
        ..QueueConfig::default()
    };
    let scheduler = qos::Scheduler::Policy(Box::new(policy));
    let Ok(mut q) = qos::Queue::new(config, drive::Hdd::default_22tb(), scheduler) else {
        panic!("config refused")
    };
    let (mut now, mut last, mut done) = (0, 0, Vec::new());
    for id in 0..3_000 {
        now += next() % (3 * MS);
        q.advance(now, &mut done);
        if next() % 16 == 0 {
            q.abort(now, next() % (id + 1));
        }
        let lba = match next() % 8 {
            0 => last,
            1 => last + 256,
            _ => next() % (1 << 34),
        };
        last = lba;
        let mut c = read(id, lba, (next() % 2) as u8);
        c.op.blocks = 256;
        submit(&mut q, now, c);
    }
    done.extend(run(&mut q, u64::MAX));
    assert!(q.is_empty());
    assert!(done
        .iter()
        .any(|c| c.outcome == Outcome::AbortedBeforeProcessing));
    assert!(picks.load(std::sync::atomic::Ordering::Relaxed) > 1_000);
}

#[test]
fn the_write_cache_setting_reaches_the_drive_in_order_with_queued_commands() {
    let mut profile = drive::HddProfile::default_22tb();
    profile.cache.write_cache = true;
    let hdd = drive::Hdd::new(&profile).expect("profile");
    let mut q = match qos::Queue::new(
        QueueConfig::default(),
        hdd,
        qos::Scheduler::Policy(Box::new(Fifo)),
    ) {
        Ok(q) => q,
        Err(e) => panic!("config refused: {e}"),
    };
    assert_eq!(q.write_cache(), Some(true));
    // Sixteen cached writes, each acknowledged from the buffer.
    for id in 0..16 {
        submit(&mut q, 0, write(id, id * 40_000_000, 0));
    }
    let done = run(&mut q, 20 * MS);
    assert_eq!(done.len(), 16);
    let cached_until = done.iter().map(|c| c.at).max().unwrap_or(0);
    assert!(
        cached_until < 16 * MS,
        "cached writes done at {cached_until}"
    );
    assert!(q.drive().dirty_sectors() > 0);
    // WCE off at 20 ms: the dirty data is destaged, and a write queued now is on the medium
    // only after it.
    let clean = drive::Drive::flush(&mut q.drive().clone(), 20 * MS);
    assert!(clean > 30 * MS, "sixteen destages end at {clean}");
    q.set_write_cache(20 * MS, false);
    assert_eq!(
        (q.write_cache(), q.drive().dirty_sectors()),
        (Some(false), 0)
    );
    submit(&mut q, 20 * MS, write(16, 1 << 30, 0));
    let through = by_id(&run(&mut q, 2_000 * MS), 16);
    assert!(through.at > clean + MS, "done at {}", through.at);
    // On again: the next write is cached.
    q.set_write_cache(through.at, true);
    submit(&mut q, through.at, write(17, 1 << 31, 0));
    let again = by_id(&run(&mut q, through.at + 2_000 * MS), 17);
    assert!(again.at - through.at < MS, "took {}", again.at - through.at);
}
