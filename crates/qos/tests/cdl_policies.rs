//! CDL limits and policies in virtual time with an exact drive (SPC-6 CDL policies): every
//! policy for every limit kind, with exact outcomes and timestamps.

mod common;

use common::*;
use qos::{
    CdlDescriptor, Completion, DhCompletion, LimitKind, MediaOp, Misses, Outcome, Policy,
    QueueConfig, T2CdlUnits,
};
use scsi::{Asc, SenseKey};

type Limit = Option<(u64, Policy)>;

/// The sense key and ASC a read that ended so is answered with.
fn sense_of(outcome: Outcome) -> Option<(SenseKey, Asc)> {
    let op = MediaOp {
        lba: 0,
        blocks: 1,
        write: false,
        fua: false,
    };
    outcome
        .status(&op, DhCompletion::default())
        .map(|(_, s)| (s.key, s.asc))
}

/// A descriptor in 1 µs units with limits given in ms.
fn desc(inactive: Limit, active: Limit, guideline: Limit) -> CdlDescriptor {
    let us = |l: Limit| {
        l.map_or((0, Policy::CompleteEarliest), |(ms, p)| {
            ((ms * 1000) as u16, p)
        })
    };
    let (max_inactive_time, max_inactive_time_policy) = us(inactive);
    let (max_active_time, max_active_time_policy) = us(active);
    let (command_duration_guideline, command_duration_guideline_policy) = us(guideline);
    CdlDescriptor {
        t2cdlunits: T2CdlUnits::Us1,
        max_inactive_time,
        max_inactive_time_policy,
        max_active_time,
        max_active_time_policy,
        command_duration_guideline,
        command_duration_guideline_policy,
    }
}

fn config(descriptors: &[CdlDescriptor]) -> QueueConfig {
    QueueConfig {
        cdl: t2a(descriptors),
        ..QueueConfig::default()
    }
}

/// A (unlimited, 10 ms) then B (DLD 1) at t = 0 on a FIFO 10 ms drive: B waits 10 ms.
fn behind_one(d: CdlDescriptor) -> (Vec<Completion>, qos::Stats) {
    let mut q = fifo_queue(config(&[d]), FixedDrive::new(10 * MS));
    submit(&mut q, 0, read(1, 100, 0));
    submit(&mut q, 0, read(2, 200, 1));
    submit(&mut q, 0, read(3, 300, 0));
    let done = run(&mut q, u64::MAX);
    (done, q.stats().clone())
}

fn missed(kind: LimitKind) -> Misses {
    let mut m = Misses::default();
    match kind {
        LimitKind::Inactive => m.inactive = true,
        LimitKind::Active => m.active = true,
        LimitKind::Guideline => m.guideline = true,
    }
    m
}

#[test]
fn inactive_0h_counts_the_miss_and_keeps_going() {
    let (done, stats) = behind_one(desc(Some((5, Policy::CompleteEarliest)), None, None));
    let b = by_id(&done, 2);
    assert_eq!(b.outcome, Outcome::Good);
    assert_eq!((b.started_at, b.at), (Some(10 * MS), 20 * MS));
    assert_eq!(b.missed, missed(LimitKind::Inactive));
    assert_eq!(b.ended_by, None);
    assert_eq!(
        stats.t2a[0]
            .misses(LimitKind::Inactive)
            .get(Policy::CompleteEarliest),
        1
    );
    assert_eq!(stats.t2a[0].commands_missed_inactive_or_active, 1);
    assert_eq!(stats.t2a[0].completions.get(Outcome::Good), 1);
    assert_eq!(by_id(&done, 3).at, 30 * MS);
}

#[test]
fn inactive_dh_completes_unavailable_at_expiry_and_frees_the_slot() {
    let (done, stats) = behind_one(desc(Some((5, Policy::CompleteUnavailable)), None, None));
    let ids: Vec<u64> = done.iter().map(|c| c.id).collect();
    assert_eq!(ids, [2, 1, 3]);
    let b = by_id(&done, 2);
    assert_eq!(b.outcome, Outcome::CompletedUnavailable);
    assert_eq!((b.started_at, b.at), (None, 5 * MS));
    assert_eq!(
        b.ended_by,
        Some((LimitKind::Inactive, Policy::CompleteUnavailable))
    );
    // The third command moves up: it starts when the first completes.
    assert_eq!(by_id(&done, 3).at, 20 * MS);
    assert_eq!(
        stats.t2a[0].completions.get(Outcome::CompletedUnavailable),
        1
    );
    assert_eq!(
        stats.classes[2]
            .misses(LimitKind::Inactive)
            .get(Policy::CompleteUnavailable),
        1
    );
}

#[test]
fn inactive_fh_aborts_before_processing() {
    let (done, _) = behind_one(desc(Some((5, Policy::Abort)), None, None));
    let b = by_id(&done, 2);
    assert_eq!(b.outcome, Outcome::AbortedBeforeProcessing);
    assert_eq!((b.started_at, b.at), (None, 5 * MS));
    assert_eq!(
        sense_of(b.outcome),
        Some((SenseKey::AbortedCommand, Asc(0x2E, 0x01)))
    );
}

#[test]
fn inactive_limit_met_when_started_exactly_at_expiry() {
    let (done, _) = behind_one(desc(Some((10, Policy::Abort)), None, None));
    let b = by_id(&done, 2);
    assert_eq!(b.outcome, Outcome::Good);
    assert_eq!(b.missed, Misses::default());
    assert_eq!(b.at, 20 * MS);
}

#[test]
fn inactive_limit_runs_in_the_submission_queue_too() {
    let d = desc(Some((5, Policy::Abort)), None, None);
    let mut q = fifo_queue(
        QueueConfig {
            depth: 1,
            ..config(&[d])
        },
        FixedDrive::new(10 * MS),
    );
    submit(&mut q, 0, read(1, 100, 0));
    submit(&mut q, 0, read(2, 200, 1));
    q.advance(0, &mut Vec::new());
    assert_eq!((q.device_len(), q.waiting(2)), (1, 1));
    let done = run(&mut q, u64::MAX);
    assert_eq!(by_id(&done, 2).outcome, Outcome::AbortedBeforeProcessing);
    assert_eq!(by_id(&done, 2).at, 5 * MS);
    assert!(q.is_empty());
}

/// B (DLD 1) alone on a drive where its LBA needs 100 ms (error recovery), then C (10 ms).
fn slow_active(d: CdlDescriptor) -> Vec<Completion> {
    slow_active_with_aborts(d).0
}

/// As [`slow_active`], plus the (time, LBA) of every media op the drive was told to abandon.
fn slow_active_with_aborts(d: CdlDescriptor) -> (Vec<Completion>, Vec<(u64, u64)>) {
    let mut drive = FixedDrive::new(10 * MS);
    drive.slow.push((200, 100 * MS));
    let mut q = fifo_queue(config(&[d]), drive);
    submit(&mut q, 0, read(2, 200, 1));
    submit(&mut q, 0, read(3, 300, 0));
    let done = run(&mut q, u64::MAX);
    (done, q.drive().aborted.clone())
}

#[test]
fn the_drive_abandons_only_ops_ended_during_processing() {
    for (policy, aborted) in [
        (Policy::CompleteEarliest, vec![]),
        (Policy::CompleteUnavailable, vec![(30 * MS, 200)]),
        (Policy::AbortRecovery, vec![(30 * MS, 200)]),
        (Policy::Abort, vec![(30 * MS, 200)]),
    ] {
        let (_, got) = slow_active_with_aborts(desc(None, Some((30, policy)), None));
        assert_eq!(got, aborted, "{policy:?}");
    }
    // An inactive-limit abort never reached the drive.
    let mut q = fifo_queue(
        config(&[desc(Some((5, Policy::Abort)), None, None)]),
        FixedDrive::new(10 * MS),
    );
    submit(&mut q, 0, read(1, 100, 0));
    submit(&mut q, 0, read(2, 200, 1));
    run(&mut q, u64::MAX);
    assert!(q.drive().aborted.is_empty());
}

#[test]
fn active_0h_completes_late_with_the_miss_counted() {
    let done = slow_active(desc(None, Some((30, Policy::CompleteEarliest)), None));
    let b = by_id(&done, 2);
    assert_eq!(
        (b.outcome, b.started_at, b.at),
        (Outcome::Good, Some(0), 100 * MS)
    );
    assert_eq!(b.missed, missed(LimitKind::Active));
    assert_eq!(by_id(&done, 3).at, 110 * MS);
}

#[test]
fn active_dh_abandons_the_media_op_at_expiry() {
    let done = slow_active(desc(None, Some((30, Policy::CompleteUnavailable)), None));
    let b = by_id(&done, 2);
    assert_eq!(
        (b.outcome, b.started_at, b.at),
        (Outcome::CompletedUnavailable, Some(0), 30 * MS)
    );
    assert_eq!(
        b.ended_by,
        Some((LimitKind::Active, Policy::CompleteUnavailable))
    );
    // The unit is free at the expiry: C starts at 30 ms.
    let c = by_id(&done, 3);
    assert_eq!((c.started_at, c.at), (Some(30 * MS), 40 * MS));
}

#[test]
fn active_eh_aborts_with_error_recovery_ascq() {
    let done = slow_active(desc(None, Some((30, Policy::AbortRecovery)), None));
    let b = by_id(&done, 2);
    assert_eq!((b.outcome, b.at), (Outcome::AbortedErrorRecovery, 30 * MS));
    assert_eq!(
        sense_of(b.outcome),
        Some((SenseKey::AbortedCommand, Asc(0x2E, 0x03)))
    );
    assert_eq!(by_id(&done, 3).at, 40 * MS);
}

#[test]
fn active_fh_aborts_during_processing() {
    let done = slow_active(desc(None, Some((30, Policy::Abort)), None));
    let b = by_id(&done, 2);
    assert_eq!(
        (b.outcome, b.started_at, b.at),
        (Outcome::AbortedDuringProcessing, Some(0), 30 * MS)
    );
    assert_eq!(
        sense_of(b.outcome),
        Some((SenseKey::AbortedCommand, Asc(0x2E, 0x02)))
    );
}

#[test]
fn active_limit_does_not_run_while_queued() {
    // B waits 10 ms behind A; its 15 ms active limit counts from its start at 10 ms.
    let (done, _) = behind_one(desc(None, Some((15, Policy::Abort)), None));
    let b = by_id(&done, 2);
    assert_eq!((b.outcome, b.at), (Outcome::Good, 20 * MS));
}

#[test]
fn guideline_0h_counts_the_miss() {
    let (done, stats) = behind_one(desc(None, None, Some((15, Policy::CompleteEarliest))));
    let b = by_id(&done, 2);
    assert_eq!((b.outcome, b.at), (Outcome::Good, 20 * MS));
    assert_eq!(b.missed, missed(LimitKind::Guideline));
    assert_eq!(
        stats.t2a[0]
            .misses(LimitKind::Guideline)
            .get(Policy::CompleteEarliest),
        1
    );
    assert_eq!(stats.t2a[0].commands_missed, 1);
    assert_eq!(stats.t2a[0].commands_missed_inactive_or_active, 0);
}

#[test]
fn guideline_met_when_completing_exactly_at_it() {
    let (done, _) = behind_one(desc(None, None, Some((20, Policy::Abort))));
    assert_eq!(by_id(&done, 2).outcome, Outcome::Good);
    assert_eq!(by_id(&done, 2).missed, Misses::default());
}

#[test]
fn guideline_dh_on_a_queued_and_on_an_active_command() {
    let (done, _) = behind_one(desc(None, None, Some((5, Policy::CompleteUnavailable))));
    let b = by_id(&done, 2);
    assert_eq!(
        (b.outcome, b.started_at, b.at),
        (Outcome::CompletedUnavailable, None, 5 * MS)
    );
    let (done, _) = behind_one(desc(None, None, Some((15, Policy::CompleteUnavailable))));
    let b = by_id(&done, 2);
    assert_eq!(
        (b.outcome, b.started_at, b.at),
        (Outcome::CompletedUnavailable, Some(10 * MS), 15 * MS)
    );
    assert_eq!(by_id(&done, 3).started_at, Some(15 * MS));
}

#[test]
fn guideline_fh_before_and_during_processing() {
    let (done, _) = behind_one(desc(None, None, Some((5, Policy::Abort))));
    assert_eq!(by_id(&done, 2).outcome, Outcome::AbortedBeforeProcessing);
    assert_eq!(by_id(&done, 2).at, 5 * MS);
    let (done, _) = behind_one(desc(None, None, Some((15, Policy::Abort))));
    assert_eq!(by_id(&done, 2).outcome, Outcome::AbortedDuringProcessing);
    assert_eq!(by_id(&done, 2).at, 15 * MS);
}

#[test]
fn guideline_2h_drops_every_limit() {
    // Guideline 5 ms (2h) and inactive 8 ms (Fh): after 5 ms no limit is left.
    let (done, stats) = behind_one(desc(
        Some((8, Policy::Abort)),
        None,
        Some((5, Policy::ContinueNoLimit)),
    ));
    let b = by_id(&done, 2);
    assert_eq!((b.outcome, b.at), (Outcome::Good, 20 * MS));
    assert_eq!(b.missed, missed(LimitKind::Guideline));
    assert_eq!(
        stats.t2a[0]
            .misses(LimitKind::Guideline)
            .get(Policy::ContinueNoLimit),
        1
    );
    // The same with 0h keeps the inactive limit, which then aborts the command.
    let (done, _) = behind_one(desc(
        Some((8, Policy::Abort)),
        None,
        Some((5, Policy::CompleteEarliest)),
    ));
    let b = by_id(&done, 2);
    assert_eq!(
        (b.outcome, b.at),
        (Outcome::AbortedBeforeProcessing, 8 * MS)
    );
    assert!(b.missed.guideline && b.missed.inactive);
}

/// A, X (unlimited, 10 ms each) then B (DLD 1) at t = 0: B runs 20..30 ms.
fn behind_two(descriptors: &[CdlDescriptor]) -> (Vec<Completion>, qos::Stats) {
    let mut q = fifo_queue(config(descriptors), FixedDrive::new(10 * MS));
    submit(&mut q, 0, read(1, 100, 0));
    submit(&mut q, 0, read(4, 400, 0));
    submit(&mut q, 0, read(2, 200, 1));
    let done = run(&mut q, u64::MAX);
    (done, q.stats().clone())
}

#[test]
fn guideline_1h_chains_to_the_next_descriptor() {
    // Descriptor 1: 15 ms guideline, 1h; descriptor 2: 30 ms guideline, Fh (from arrival).
    let d1 = desc(None, None, Some((15, Policy::ContinueNextLimit)));
    let (done, stats) = behind_two(&[d1, desc(None, None, Some((30, Policy::Abort)))]);
    let b = by_id(&done, 2);
    assert_eq!((b.outcome, b.at), (Outcome::Good, 30 * MS));
    assert_eq!(
        stats.t2a[0]
            .misses(LimitKind::Guideline)
            .get(Policy::ContinueNextLimit),
        1
    );
    assert_eq!(stats.t2a[1].misses(LimitKind::Guideline).total(), 0);
    // With 25 ms on descriptor 2 the chained limit aborts it mid-service.
    let (done, stats) = behind_two(&[d1, desc(None, None, Some((25, Policy::Abort)))]);
    let b = by_id(&done, 2);
    assert_eq!(
        (b.outcome, b.started_at, b.at),
        (Outcome::AbortedDuringProcessing, Some(20 * MS), 25 * MS)
    );
    assert_eq!(b.ended_by, Some((LimitKind::Guideline, Policy::Abort)));
    assert_eq!(
        stats.t2a[1].misses(LimitKind::Guideline).get(Policy::Abort),
        1
    );
    // Completions count against the descriptor the command was submitted with.
    assert_eq!(
        stats.t2a[0]
            .completions
            .get(Outcome::AbortedDuringProcessing),
        1
    );
}

#[test]
fn guideline_1h_chains_into_an_inactive_limit() {
    let d1 = desc(None, None, Some((5, Policy::ContinueNextLimit)));
    let d2 = desc(Some((8, Policy::CompleteUnavailable)), None, None);
    let (done, _) = behind_two(&[d1, d2]);
    let b = by_id(&done, 2);
    assert_eq!((b.outcome, b.at), (Outcome::CompletedUnavailable, 8 * MS));
    assert_eq!(
        b.ended_by,
        Some((LimitKind::Inactive, Policy::CompleteUnavailable))
    );
    assert!(b.missed.guideline && b.missed.inactive);
}

#[test]
fn guideline_1h_on_descriptor_7_continues_with_no_limit() {
    let mut pages = t2a(&[]);
    pages.t2a.descriptors[6] = desc(
        Some((8, Policy::Abort)),
        None,
        Some((5, Policy::ContinueNextLimit)),
    );
    let mut q = fifo_queue(
        QueueConfig {
            cdl: pages,
            ..QueueConfig::default()
        },
        FixedDrive::new(10 * MS),
    );
    submit(&mut q, 0, read(1, 100, 0));
    submit(&mut q, 0, read(2, 200, 7));
    let done = run(&mut q, u64::MAX);
    let b = by_id(&done, 2);
    assert_eq!((b.outcome, b.at), (Outcome::Good, 20 * MS));
    assert_eq!(
        q.stats().t2a[6]
            .misses(LimitKind::Guideline)
            .get(Policy::ContinueNextLimit),
        1
    );
}

#[test]
fn descriptor_change_does_not_affect_commands_already_queued() {
    let strict = desc(Some((5, Policy::Abort)), None, None);
    let mut q = fifo_queue(config(&[strict]), FixedDrive::new(10 * MS));
    submit(&mut q, 0, read(1, 100, 0));
    submit(&mut q, 0, read(2, 200, 1));
    q.advance(0, &mut Vec::new());
    assert!(q.set_cdl(t2a(&[desc(None, None, None)])).is_ok());
    submit(&mut q, MS, read(3, 300, 1));
    let done = run(&mut q, u64::MAX);
    // Command 2 keeps the 5 ms abort it arrived with; command 3 gets the new (no) limit.
    assert_eq!(by_id(&done, 2).outcome, Outcome::AbortedBeforeProcessing);
    assert_eq!(by_id(&done, 2).at, 5 * MS);
    assert_eq!(by_id(&done, 3).outcome, Outcome::Good);
    assert_eq!(by_id(&done, 3).at, 20 * MS);
}

#[test]
fn a_1h_chain_uses_the_pages_of_submission_time() {
    let d1 = desc(None, None, Some((5, Policy::ContinueNextLimit)));
    let d2 = desc(Some((8, Policy::Abort)), None, None);
    let mut q = fifo_queue(config(&[d1, d2]), FixedDrive::new(10 * MS));
    submit(&mut q, 0, read(1, 100, 0));
    submit(&mut q, 0, read(2, 200, 1));
    q.advance(0, &mut Vec::new());
    assert!(q.set_cdl(t2a(&[d1, desc(None, None, None)])).is_ok());
    let done = run(&mut q, u64::MAX);
    assert_eq!(by_id(&done, 2).outcome, Outcome::AbortedBeforeProcessing);
    assert_eq!(by_id(&done, 2).at, 8 * MS);
}

#[test]
fn writes_use_t2b_and_reads_t2a() {
    let mut pages = t2a(&[desc(Some((5, Policy::Abort)), None, None)]);
    pages.t2b.descriptors[0] = desc(Some((5, Policy::CompleteUnavailable)), None, None);
    let mut q = fifo_queue(
        QueueConfig {
            cdl: pages,
            ..QueueConfig::default()
        },
        FixedDrive::new(10 * MS),
    );
    submit(&mut q, 0, read(1, 100, 0));
    submit(&mut q, 0, read(2, 200, 1));
    submit(&mut q, 0, write(3, 300, 1));
    let done = run(&mut q, u64::MAX);
    assert_eq!(by_id(&done, 2).outcome, Outcome::AbortedBeforeProcessing);
    assert_eq!(by_id(&done, 3).outcome, Outcome::CompletedUnavailable);
    assert_eq!(
        q.stats().t2b[0]
            .completions
            .get(Outcome::CompletedUnavailable),
        1
    );
    assert_eq!(
        q.stats().t2a[0]
            .completions
            .get(Outcome::AbortedBeforeProcessing),
        1
    );
    assert_eq!(q.stats().unlimited.commands, 1);
}

#[test]
fn dld_with_units_none_is_unlimited() {
    let mut d = desc(Some((5, Policy::Abort)), None, None);
    d.t2cdlunits = T2CdlUnits::None;
    let (done, _) = behind_one(d);
    assert_eq!(by_id(&done, 2).outcome, Outcome::Good);
    assert_eq!(by_id(&done, 2).at, 20 * MS);
}

#[test]
fn unrecovered_media_is_a_medium_error() {
    let mut drive = FixedDrive::new(10 * MS);
    drive.bad.push(200);
    let mut q = fifo_queue(QueueConfig::default(), drive);
    submit(&mut q, 0, read(2, 200, 0));
    let done = run(&mut q, u64::MAX);
    assert_eq!(
        (by_id(&done, 2).outcome, by_id(&done, 2).at),
        (Outcome::MediumError, 10 * MS)
    );
    assert_eq!(
        q.stats().classes[2].completions.get(Outcome::MediumError),
        1
    );
}
