//! Counters per class and per CDL descriptor: what LOG SENSE 19h/21h (SPC-6 CDL statistics log page) and the
//! reports need. Latency histograms are kept by the caller from [`crate::Completion`]s.

use crate::cdl::{LimitKind, Policy};
use crate::class::CLASSES;
use crate::completion::{Misses, Outcome};

/// Limit misses of one kind, by the policy that applied.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LimitMisses {
    by_policy: [u64; Policy::ALL.len()],
}

impl LimitMisses {
    pub fn get(&self, policy: Policy) -> u64 {
        self.by_policy[policy.index()]
    }

    pub fn total(&self) -> u64 {
        self.by_policy.iter().sum()
    }
}

/// Completions by outcome.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OutcomeCounts {
    by_outcome: [u64; Outcome::ALL.len()],
}

impl OutcomeCounts {
    pub fn get(&self, outcome: Outcome) -> u64 {
        self.by_outcome[outcome.index()]
    }

    pub fn total(&self) -> u64 {
        self.by_outcome.iter().sum()
    }
}

/// The counters kept per class and per descriptor. For a descriptor they are the LOG SENSE
/// 19h/21h parameter (SPC-6 CDL statistics; 0021h+n−1 for T2A, 0041h+n−1 for T2B): offset 4
/// `misses(Inactive).total()`, 8 `misses(Active).total()`, 12
/// `commands_missed_inactive_or_active`, 16 `commands`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Commands submitted.
    pub commands: u64,
    pub completions: OutcomeCounts,
    /// Commands that exceeded at least one limit (any kind).
    pub commands_missed: u64,
    /// Commands that exceeded their inactive or active limit (LOG SENSE 19h/21h third counter).
    pub commands_missed_inactive_or_active: u64,
    /// Commands removed by task management (ABORT TASK, CLEAR TASK SET, reset): no completion.
    pub aborted_tasks: u64,
    misses: [LimitMisses; 3],
}

impl Counters {
    /// Limit misses of `kind`, by policy.
    pub fn misses(&self, kind: LimitKind) -> &LimitMisses {
        &self.misses[kind.index()]
    }

    fn miss(&mut self, kind: LimitKind, policy: Policy) {
        self.misses[kind.index()].by_policy[policy.index()] += 1;
    }

    fn complete(&mut self, outcome: Outcome, missed: Misses) {
        self.completions.by_outcome[outcome.index()] += 1;
        self.commands_missed += u64::from(missed.any());
        self.commands_missed_inactive_or_active += u64::from(missed.inactive || missed.active);
    }
}

/// All counters of a queue. Commands and completions count against the class and the
/// descriptor the command was submitted with; each miss counts against the descriptor whose
/// limit was exceeded (after a 1h chain, the next one).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub classes: [Counters; CLASSES],
    /// T2A descriptors 1..=7 at index 0..7 (reads).
    pub t2a: [Counters; 7],
    /// T2B descriptors 1..=7 at index 0..7 (writes).
    pub t2b: [Counters; 7],
    /// Commands with DLD 0.
    pub unlimited: Counters,
}

impl Stats {
    /// Counters of descriptor `dld` (1..=7) of the read or write page; DLD 0 (or out of
    /// range) gives the unlimited counters.
    pub fn descriptor(&self, dld: u8, write: bool) -> &Counters {
        let page = if write { &self.t2b } else { &self.t2a };
        usize::from(dld)
            .checked_sub(1)
            .and_then(|i| page.get(i))
            .unwrap_or(&self.unlimited)
    }

    fn descriptor_mut(&mut self, dld: u8, write: bool) -> &mut Counters {
        let page = if write { &mut self.t2b } else { &mut self.t2a };
        match usize::from(dld)
            .checked_sub(1)
            .and_then(|i| page.get_mut(i))
        {
            Some(c) => c,
            None => &mut self.unlimited,
        }
    }

    pub(crate) fn submitted(&mut self, class: usize, dld: u8, write: bool) {
        if let Some(c) = self.classes.get_mut(class) {
            c.commands += 1;
        }
        self.descriptor_mut(dld, write).commands += 1;
    }

    pub(crate) fn missed(
        &mut self,
        class: usize,
        dld: u8,
        write: bool,
        kind: LimitKind,
        policy: Policy,
    ) {
        if let Some(c) = self.classes.get_mut(class) {
            c.miss(kind, policy);
        }
        self.descriptor_mut(dld, write).miss(kind, policy);
    }

    pub(crate) fn aborted_task(&mut self, class: usize, dld: u8, write: bool) {
        if let Some(c) = self.classes.get_mut(class) {
            c.aborted_tasks += 1;
        }
        self.descriptor_mut(dld, write).aborted_tasks += 1;
    }

    pub(crate) fn completed(
        &mut self,
        class: usize,
        dld: u8,
        write: bool,
        outcome: Outcome,
        missed: Misses,
    ) {
        if let Some(c) = self.classes.get_mut(class) {
            c.complete(outcome, missed);
        }
        self.descriptor_mut(dld, write).complete(outcome, missed);
    }
}
