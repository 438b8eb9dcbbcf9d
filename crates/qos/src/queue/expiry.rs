//! CDL limits of queued and running commands: arming them from a descriptor and applying the
//! policy when one expires (SPC-6 CDL policies, perf_vs_duration_guideline).

use super::slot::{Limit, State};
use super::{EventKind, Queue};
use crate::admission::{Admission, SlotRef};
use crate::cdl::{CdlDescriptor, LimitKind, Policy};
use crate::completion::{Completion, Outcome};
use drive::{Drive, Ns};
use std::cmp::Reverse;

impl<D: Drive> Queue<D> {
    /// Arms the limits of `descriptor` for the command in `r`, measured from its own clocks
    /// (inactive and guideline from arrival, active from start); none fires before `now`.
    pub(super) fn arm(&mut self, r: SlotRef, descriptor: Option<&CdlDescriptor>, now: Ns) {
        let Some(s) = self.slot_mut(r) else { return };
        let limit = |kind, from: Ns| {
            descriptor
                .and_then(|d| d.limit(kind))
                .map(|(ns, policy)| Limit {
                    at: from.saturating_add(ns).max(now),
                    policy,
                    fired: false,
                })
        };
        s.inactive = if s.state == State::Active {
            None
        } else {
            limit(LimitKind::Inactive, s.submitted_at)
        };
        s.guideline = limit(LimitKind::Guideline, s.submitted_at);
        s.active_for = descriptor.and_then(|d| d.limit(LimitKind::Active));
        s.active = if s.state == State::Active {
            limit(LimitKind::Active, s.started_at)
        } else {
            None
        };
        let events = [
            (LimitKind::Inactive, s.inactive),
            (LimitKind::Active, s.active),
            (LimitKind::Guideline, s.guideline),
        ];
        for (kind, l) in events {
            if let Some(l) = l {
                self.events
                    .push(Reverse((l.at, EventKind::Expire(kind), r)));
            }
        }
    }

    pub(super) fn expire(
        &mut self,
        r: SlotRef,
        kind: LimitKind,
        at: Ns,
        t: Ns,
        done: &mut Vec<Completion>,
    ) {
        let Some(s) = self.slot_mut(r) else { return };
        let armed = match kind {
            LimitKind::Inactive => s.state != State::Active,
            LimitKind::Active => s.state == State::Active,
            LimitKind::Guideline => true,
        };
        let Some(limit) = s
            .limit_mut(kind)
            .filter(|l| armed && l.at == at && !l.fired)
        else {
            return;
        };
        s.missed.set(kind);
        let (class, desc, write, started) = (s.class, s.desc, s.op.write, s.state == State::Active);
        self.stats.missed(class, desc, write, kind, limit.policy);
        let ended_by = Some((kind, limit.policy));
        match limit.policy {
            Policy::CompleteEarliest => {
                if let Some(l) = self.slot_mut(r).and_then(|s| s.limit_mut(kind).as_mut()) {
                    l.fired = true;
                }
                self.rekey(r);
            }
            Policy::ContinueNextLimit => self.chain(r, t),
            Policy::ContinueNoLimit => {
                if let Some(s) = self.slot_mut(r) {
                    s.inactive = None;
                    s.active = None;
                    s.active_for = None;
                    s.guideline = None;
                }
                self.rekey(r);
            }
            Policy::CompleteUnavailable => {
                self.finish(r, t, Outcome::CompletedUnavailable, ended_by, done)
            }
            Policy::AbortRecovery => {
                self.finish(r, t, Outcome::AbortedErrorRecovery, ended_by, done)
            }
            Policy::Abort => {
                let outcome = if started {
                    Outcome::AbortedDuringProcessing
                } else {
                    Outcome::AbortedBeforeProcessing
                };
                self.finish(r, t, outcome, ended_by, done)
            }
        }
    }

    /// Policy 1h: continue under descriptor n+1's limits. There is no descriptor 8, so at
    /// n = 7 the command continues with no limit, as under 2h (SPC-6 leaves it open).
    pub(super) fn chain(&mut self, r: SlotRef, t: Ns) {
        let Some(s) = self.slot_mut(r) else { return };
        let next = s.desc.saturating_add(1);
        let descriptor = s
            .pages
            .as_ref()
            .and_then(|p| p.descriptor(next, s.op.write))
            .copied();
        s.desc = if descriptor.is_some() { next } else { s.desc };
        self.arm(r, descriptor.as_ref(), t);
        self.rekey(r);
    }

    /// Keeps a command's deadline visible to admission and ordering after its limits changed.
    pub(super) fn rekey(&mut self, r: SlotRef) {
        let Some(s) = self.slot_mut(r) else { return };
        let (deadline, limits, state, class, old_key) =
            (s.deadline(), s.limits(), s.state, s.class, s.admit_key);
        match state {
            State::Submitted
                if self.admission == Admission::DeadlineAware && old_key != deadline =>
            {
                if let Some(s) = self.slot_mut(r) {
                    s.admit_key = deadline;
                }
                self.submission[class].push(r, deadline);
            }
            State::Queued => {
                if let Some(i) = self.candidate_slots.iter().position(|x| *x == r.slot) {
                    if let Some(c) = self.candidates.get_mut(i) {
                        c.limits = limits;
                    }
                }
            }
            _ => {}
        }
    }
}
