//! The device command queue: per-class submission queues, admission and arbitration into a
//! device queue of bounded depth, ordering onto the drive, and CDL limits enforced at expiry
//! (SPC-6 command duration limits). A pure state machine: the caller passes time in.

use crate::admission::{Admission, SlotRef, SubmissionQueue};
use crate::arbitration::Arbiter;
use crate::cdl::{CdlError, CdlPages, LimitKind, Policy};
use crate::class::CLASSES;
use crate::completion::{Completion, Outcome};
use crate::config::{ConfigError, QueueConfig};
use crate::deadline::DeadlineAware;
use crate::order::{Candidate, OrderingPolicy, QueueMemos};
use crate::stats::Stats;
use drive::{Drive, MediaOp, MediaOutcome, Ns, Service};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt;
use std::sync::Arc;

mod expiry;
mod slot;

use slot::{Limit, Released, Slot, State};

/// A medium command handed to the queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Command {
    /// The caller's tag, returned in the [`Completion`].
    pub id: u64,
    /// Priority class index (see [`crate::Class`]): 0 urgent, 1 high, 2 medium, 3 low.
    pub class: usize,
    pub op: MediaOp,
    /// Duration limit descriptor (SBC-5 READ(16)/WRITE(16) DLD field): 0 none, 1..=7 a descriptor
    /// of T2A (reads) or T2B (writes).
    pub dld: u8,
}

/// A refused [`Command`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SubmitError {
    /// `class` is not below [`CLASSES`].
    Class(usize),
    /// `dld` is above 7.
    Dld(u8),
}

impl fmt::Display for SubmitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Class(c) => write!(f, "class {c} out of range 0..{CLASSES}"),
            Self::Dld(d) => write!(f, "dld {d} out of range 0..=7"),
        }
    }
}

impl std::error::Error for SubmitError {}

/// How the device queue picks the next command for the drive.
pub enum Scheduler {
    /// Any ordering policy (the FIFO / SPTF / aged-SPTF policies of [`crate::order`], or one of
    /// the caller's).
    Policy(Box<dyn OrderingPolicy + Send>),
    /// The CDL-aware policy; the queue feeds it service times and perf_vs_duration_guideline.
    CdlAware(Box<DeadlineAware>),
}

impl fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Policy(_) => f.write_str("Scheduler::Policy(..)"),
            Self::CdlAware(d) => f.debug_tuple("Scheduler::CdlAware").field(d).finish(),
        }
    }
}

/// What a timed event is about. Completions sort before expiries at the same instant, so a
/// command that finishes exactly at its limit meets it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum EventKind {
    Done,
    Expire(LimitKind),
}

type Event = (Ns, EventKind, SlotRef);

/// A started command's place in the queue, for [`Queue::store_done`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Started {
    /// The caller's tag of the command.
    pub id: u64,
    slot: SlotRef,
}

/// The device queue of one logical unit, owning its drive model.
pub struct Queue<D: Drive> {
    drive: D,
    scheduler: Scheduler,
    depth: usize,
    admission: Admission,
    arbiter: Arbiter,
    pages: Arc<CdlPages>,
    slots: Vec<Slot>,
    free: Vec<u32>,
    submission: [SubmissionQueue; CLASSES],
    waiting: [usize; CLASSES],
    /// The device queue (not started), and the slot of each candidate: in arrival order,
    /// unless the scheduler's pick does not depend on it (`order_free`).
    candidates: Vec<Candidate>,
    candidate_slots: Vec<u32>,
    /// The drive's memos of the candidates' ops, for the ordering policy.
    memos: QueueMemos,
    /// Commands admitted into the device queue so far (the next [`Candidate::seq`]).
    admitted: u64,
    /// HEAD OF QUEUE tasks not started yet, in arrival order.
    head: Vec<u32>,
    /// The scheduler's pick does not depend on the order of the device queue
    /// ([`OrderingPolicy::order_free`]): a command leaves it by a swap with the last one.
    order_free: bool,
    active: usize,
    events: BinaryHeap<Reverse<Event>>,
    /// A dispatch is due at this time (set by `submit`).
    dispatch_at: Option<Ns>,
    /// Whether a started command also waits for [`Queue::store_done`].
    awaits_store: bool,
    /// Commands started since the caller last took them ([`Queue::take_started`]).
    started: Vec<SlotRef>,
    now: Ns,
    stats: Stats,
}

impl<D: Drive> Queue<D> {
    /// A queue in front of `drive`, ordering its device queue with `scheduler`.
    pub fn new(
        config: QueueConfig,
        drive: D,
        mut scheduler: Scheduler,
    ) -> Result<Self, ConfigError> {
        config.validate()?;
        if let Scheduler::CdlAware(d) = &mut scheduler {
            d.set_budget(config.cdl.t2a.perf_vs_duration_guideline);
        }
        let order_free = match &scheduler {
            Scheduler::Policy(p) => p.order_free(),
            Scheduler::CdlAware(d) => d.order_free(),
        };
        Ok(Self {
            drive,
            scheduler,
            depth: config.depth,
            admission: config.admission,
            arbiter: Arbiter::new(config.arbitration),
            pages: Arc::new(config.cdl),
            slots: Vec::new(),
            free: Vec::new(),
            submission: std::array::from_fn(|_| SubmissionQueue::new()),
            waiting: [0; CLASSES],
            candidates: Vec::with_capacity(config.depth),
            candidate_slots: Vec::with_capacity(config.depth),
            memos: QueueMemos::default(),
            admitted: 0,
            head: Vec::new(),
            order_free,
            active: 0,
            events: BinaryHeap::new(),
            dispatch_at: None,
            awaits_store: false,
            started: Vec::new(),
            now: 0,
            stats: Stats::default(),
        })
    }

    /// Replaces the T2A/T2B pages (MODE SELECT). Commands already submitted keep the
    /// descriptors they were submitted with (SPC-6: a page change does not apply to commands
    /// already in the task set).
    pub fn set_cdl(&mut self, pages: CdlPages) -> Result<(), CdlError> {
        pages.validate()?;
        if let Scheduler::CdlAware(d) = &mut self.scheduler {
            d.set_budget(pages.t2a.perf_vs_duration_guideline);
        }
        self.pages = Arc::new(pages);
        Ok(())
    }

    /// Real storage behind the model: from now on a started command ends at the later of
    /// the model's time and the caller's [`Queue::store_done`] (the store's real
    /// completion), and the caller learns of each start from [`Queue::take_started`] to
    /// issue the store operation then. Without it (the simulator's drive-only queues) the
    /// model's time alone ends a command.
    pub fn await_store(&mut self) {
        self.awaits_store = true;
    }

    /// The commands started since the last call that are still in service, in start order:
    /// the caller issues their store operations and reports each end to
    /// [`Queue::store_done`]. (A command started and ended by a limit in one `advance` is not
    /// among them.)
    pub fn take_started(&mut self, out: &mut Vec<Started>) {
        for r in self.started.drain(..) {
            if let Some(s) = self
                .slots
                .get(r.slot as usize)
                .filter(|s| s.gen == r.gen && s.state == State::Active)
            {
                out.push(Started { id: s.id, slot: r });
            }
        }
    }

    /// The store finished the operation of a started command at `now`: it ends at the later
    /// of that and the model's time, at the next [`Queue::advance`] due then. False when the
    /// command already left the queue (a limit or task management ended it meanwhile).
    pub fn store_done(&mut self, now: Ns, started: Started) -> bool {
        let now = now.max(self.now);
        let r = started.slot;
        let Some(s) = self
            .slots
            .get_mut(r.slot as usize)
            .filter(|s| s.gen == r.gen && s.state == State::Active && s.store_pending)
        else {
            return false;
        };
        s.store_pending = false;
        s.done_at = s.done_at.max(now);
        self.events.push(Reverse((s.done_at, EventKind::Done, r)));
        true
    }

    /// The pages in force for new commands.
    pub fn cdl(&self) -> &CdlPages {
        &self.pages
    }

    /// A command arrives at `now` (its inactive time and guideline start now). It is
    /// dispatched by the next [`Queue::advance`]; [`Queue::next_event`] returns `now` until
    /// then. Call `advance(now)` first whenever `now` has passed `next_event()`, as with every
    /// input; times before the last `advance` are taken as that time.
    pub fn submit(&mut self, now: Ns, cmd: Command) -> Result<(), SubmitError> {
        let (r, now) = self.enter(now, cmd)?;
        let key = match self.admission {
            Admission::Fifo => None,
            Admission::DeadlineAware => self.slot(r).and_then(Slot::deadline),
        };
        if let Some(s) = self.slot_mut(r) {
            s.admit_key = key;
        }
        self.submission[cmd.class].push(r, key);
        self.waiting[cmd.class] += 1;
        self.dispatch_at = Some(self.dispatch_at.map_or(now, |t| t.min(now)));
        self.check();
        Ok(())
    }

    /// A HEAD OF QUEUE task (SAM-5 §8.6): it bypasses the submission queues, arbitration and
    /// the device queue's depth and ordering, and starts before every queued command as soon
    /// as a unit is free (HEAD OF QUEUE tasks among themselves in arrival order). Its CDL
    /// limits apply as for [`Queue::submit`].
    pub fn submit_head_of_queue(&mut self, now: Ns, cmd: Command) -> Result<(), SubmitError> {
        let (r, now) = self.enter(now, cmd)?;
        if let Some(s) = self.slot_mut(r) {
            s.state = State::Head;
        }
        self.head.push(r.slot);
        self.dispatch_at = Some(self.dispatch_at.map_or(now, |t| t.min(now)));
        self.check();
        Ok(())
    }

    /// Takes a slot for `cmd`, snapshots its descriptor and arms its limits.
    fn enter(&mut self, now: Ns, cmd: Command) -> Result<(SlotRef, Ns), SubmitError> {
        if cmd.class >= CLASSES {
            return Err(SubmitError::Class(cmd.class));
        }
        if cmd.dld > 7 {
            return Err(SubmitError::Dld(cmd.dld));
        }
        let now = now.max(self.now);
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.slots.push(Slot::empty());
                u32::try_from(self.slots.len() - 1).unwrap_or(u32::MAX)
            }
        };
        let descriptor = self.pages.descriptor(cmd.dld, cmd.op.write).copied();
        let pages = (cmd.dld != 0).then(|| Arc::clone(&self.pages));
        // `slot` came from the free list or was just pushed: it indexes `slots`.
        let s = &mut self.slots[slot as usize];
        let gen = s.gen;
        *s = Slot {
            id: cmd.id,
            class: cmd.class,
            dld: cmd.dld,
            op: cmd.op,
            state: State::Submitted,
            gen,
            submitted_at: now,
            desc: cmd.dld,
            pages,
            ..Slot::empty()
        };
        self.stats.submitted(cmd.class, cmd.dld, cmd.op.write);
        let r = SlotRef { slot, gen };
        self.arm(r, descriptor.as_ref(), now);
        Ok((r, now))
    }

    /// The earliest time at which something is due (a dispatch, a completion or a limit
    /// expiry), or `None` when the queue is empty.
    pub fn next_event(&self) -> Option<Ns> {
        let event = self.events.peek().map(|Reverse((t, _, _))| *t);
        match (event, self.dispatch_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// True when [`Queue::advance`] at `now` has something to do (a dispatch, a completion
    /// or an expiry is due).
    #[inline]
    pub fn due(&self, now: Ns) -> bool {
        self.next_event().is_some_and(|t| t <= now)
    }

    /// [`Queue::advance`] at `now` when nothing is due ([`Queue::due`] is false): it only
    /// brings the queue's time up and drops the events that no longer apply, so the caller
    /// skips the rest of its round (a store's end the model has not reached yet).
    pub fn advance_idle(&mut self, now: Ns) {
        debug_assert!(!self.due(now), "advance_idle with something due");
        self.now = self.now.max(now);
        self.drop_stale_events();
        self.check();
    }

    /// Processes everything due up to and including `now`, appending the commands that left
    /// the queue to `done` in time order.
    pub fn advance(&mut self, now: Ns, done: &mut Vec<Completion>) {
        while let Some(t) = self.next_event().filter(|t| *t <= now) {
            self.now = self.now.max(t);
            let t = self.now;
            let mut dispatched = false;
            while let Some(&Reverse((at, kind, r))) = self.events.peek() {
                if at > t {
                    break;
                }
                if kind != EventKind::Done && !dispatched {
                    // A unit freed at t may start a command whose inactive limit is t.
                    self.dispatch(t);
                    dispatched = true;
                    continue;
                }
                self.events.pop();
                match kind {
                    EventKind::Done => self.complete(r, at, t, done),
                    EventKind::Expire(limit) => self.expire(r, limit, at, t, done),
                }
            }
            self.dispatch(t);
        }
        self.now = self.now.max(now);
        self.drop_stale_events();
        self.check();
    }

    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    pub fn drive(&self) -> &D {
        &self.drive
    }

    /// The drive model; a change of its write cache goes through [`Queue::set_write_cache`].
    pub fn drive_mut(&mut self) -> &mut D {
        &mut self.drive
    }

    /// The drive's write-back cache setting (WCE), `None` for a model without one.
    pub fn write_cache(&self) -> Option<bool> {
        self.drive.write_cache()
    }

    /// MODE SELECT changed WCE at `now`: the drive follows for every command it starts from
    /// then on (commands in service keep the setting they started with). Turning it off
    /// destages the dirty data first, so the next command starts once it is on the medium.
    /// Times before the last `advance` are taken as that time.
    pub fn set_write_cache(&mut self, now: Ns, enabled: bool) {
        let now = now.max(self.now);
        self.drive.set_write_cache(now, enabled);
    }

    /// Commands in the queue (submitted, queued or in service).
    pub fn len(&self) -> usize {
        self.waiting.iter().sum::<usize>() + self.device_len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Commands in the device queue (queued plus in service); at most the configured depth
    /// plus the HEAD OF QUEUE tasks that jumped it.
    pub fn device_len(&self) -> usize {
        self.candidates.len() + self.head.len() + self.active
    }

    /// Commands waiting in class `class`'s submission queue.
    pub fn waiting(&self, class: usize) -> usize {
        self.waiting.get(class).copied().unwrap_or(0)
    }

    fn slot(&self, r: SlotRef) -> Option<&Slot> {
        self.slots
            .get(r.slot as usize)
            .filter(|s| s.gen == r.gen && s.state != State::Free)
    }

    fn slot_mut(&mut self, r: SlotRef) -> Option<&mut Slot> {
        self.slots
            .get_mut(r.slot as usize)
            .filter(|s| s.gen == r.gen && s.state != State::Free)
    }

    /// Admits commands into the device queue while it has room, then starts commands while the
    /// drive has a free unit.
    fn dispatch(&mut self, t: Ns) {
        self.dispatch_at = None;
        let units = self.drive.parallelism().max(1);
        while self.active < units && !self.head.is_empty() {
            let slot = self.head.remove(0);
            self.start(slot, t);
        }
        while self.device_len() < self.depth {
            let Some(class) = self.arbiter.next(&self.waiting) else {
                break;
            };
            let slots = &self.slots;
            let popped = self.submission[class].pop(|r, key| {
                slots.get(r.slot as usize).is_some_and(|s| {
                    s.gen == r.gen && s.state == State::Submitted && s.admit_key == key
                })
            });
            let Some(r) = popped else {
                // Only stale entries were left: the count was wrong; resynchronise.
                self.waiting[class] = 0;
                continue;
            };
            self.waiting[class] -= 1;
            let seq = self.admitted;
            let Some(s) = self.slot_mut(r) else { continue };
            s.state = State::Queued;
            // `arrived` is the admission into the device queue, not the submission: positional
            // aging models the drive, which only sees a command once fetched, and time spent in
            // a submission queue must not make the drive serve it FIFO.
            let candidate = Candidate {
                id: s.id,
                op: s.op,
                arrived: t,
                seq,
                limits: s.limits(),
                class: s.class,
            };
            self.admitted += 1;
            self.candidates.push(candidate);
            self.candidate_slots.push(r.slot);
            self.memos.push(candidate.op);
        }
        self.arbiter.end_turn();
        while self.active < units && !self.candidates.is_empty() {
            let pick = match &mut self.scheduler {
                Scheduler::Policy(p) => {
                    p.pick_memoised(t, &self.candidates, &mut self.memos, &self.drive)
                }
                Scheduler::CdlAware(p) => {
                    p.pick_memoised(t, &self.candidates, &mut self.memos, &self.drive)
                }
            };
            let index = if pick < self.candidates.len() {
                pick
            } else {
                0
            };
            let slot = self.take_candidate(index);
            self.start(slot, t);
        }
    }

    /// Takes the candidate at `index` (in range) out of the device queue; returns its slot.
    fn take_candidate(&mut self, index: usize) -> u32 {
        if self.order_free {
            self.candidates.swap_remove(index);
            self.memos.swap_remove(index);
            self.candidate_slots.swap_remove(index)
        } else {
            self.candidates.remove(index);
            self.memos.remove(index);
            self.candidate_slots.remove(index)
        }
    }

    fn start(&mut self, slot: u32, t: Ns) {
        let Some(s) = self.slots.get_mut(slot as usize) else {
            return;
        };
        let service = if s.op.is_flush() {
            Service {
                done_at: self.drive.flush(t),
                outcome: MediaOutcome::Ok,
                recovery: 0,
            }
        } else {
            self.drive.start(t, &s.op)
        };
        s.state = State::Active;
        s.started_at = t;
        s.done_at = service.done_at.max(t);
        s.media = service.outcome;
        s.store_pending = self.awaits_store;
        s.active = s.active_for.map(|(ns, policy)| Limit {
            at: t.saturating_add(ns),
            policy,
            fired: false,
        });
        let r = SlotRef { slot, gen: s.gen };
        if s.store_pending {
            self.started.push(r);
        } else {
            self.events.push(Reverse((s.done_at, EventKind::Done, r)));
        }
        if let Some(l) = s.active {
            self.events
                .push(Reverse((l.at, EventKind::Expire(LimitKind::Active), r)));
        }
        self.active += 1;
    }

    fn complete(&mut self, r: SlotRef, at: Ns, t: Ns, done: &mut Vec<Completion>) {
        let Some(s) = self.slot(r) else { return };
        if s.state != State::Active || s.store_pending || s.done_at != at {
            return;
        }
        let service = t.saturating_sub(s.started_at);
        let outcome = match s.media {
            MediaOutcome::Ok => Outcome::Good,
            MediaOutcome::Unrecovered => Outcome::MediumError,
        };
        if let Scheduler::CdlAware(d) = &mut self.scheduler {
            d.observe_service(service);
        }
        self.finish(r, t, outcome, None, done);
    }

    /// Removes the command from wherever it is, reports it and frees its slot. An active
    /// command's media operation is abandoned: its unit is free from `t`.
    fn finish(
        &mut self,
        r: SlotRef,
        t: Ns,
        outcome: Outcome,
        ended_by: Option<(LimitKind, Policy)>,
        done: &mut Vec<Completion>,
    ) {
        let Some(left) = self.release(r) else {
            return;
        };
        if left.started_at.is_some() && !matches!(outcome, Outcome::Good | Outcome::MediumError) {
            self.drive.abort(t, &left.op);
        }
        self.stats
            .completed(left.class, left.dld, left.op.write, outcome, left.missed);
        done.push(Completion {
            id: left.id,
            class: left.class,
            dld: left.dld,
            outcome,
            at: t,
            submitted_at: left.submitted_at,
            started_at: left.started_at,
            missed: left.missed,
            ended_by,
        });
    }

    /// Takes the command out of its submission queue, the device queue or the drive, and frees
    /// its slot.
    fn release(&mut self, r: SlotRef) -> Option<Released> {
        let s = self
            .slots
            .get_mut(r.slot as usize)
            .filter(|s| s.gen == r.gen && s.state != State::Free)?;
        match s.state {
            State::Free => {}
            State::Submitted => {
                self.waiting[s.class] = self.waiting[s.class].saturating_sub(1);
            }
            State::Queued => {
                if let Some(i) = self.candidate_slots.iter().position(|x| *x == r.slot) {
                    self.candidates.remove(i);
                    self.candidate_slots.remove(i);
                    self.memos.remove(i);
                }
            }
            State::Head => self.head.retain(|x| *x != r.slot),
            State::Active => self.active = self.active.saturating_sub(1),
        }
        let left = Released {
            id: s.id,
            class: s.class,
            dld: s.dld,
            op: s.op,
            submitted_at: s.submitted_at,
            started_at: (s.state == State::Active).then_some(s.started_at),
            missed: s.missed,
        };
        s.state = State::Free;
        s.gen = s.gen.wrapping_add(1);
        s.pages = None;
        self.free.push(r.slot);
        Some(left)
    }

    /// ABORT TASK (SAM-5 §7.2): removes command `id` without a completion; a running media
    /// operation is abandoned. Returns whether it was in the queue. Commands behind it move up
    /// at the next [`Queue::advance`].
    pub fn abort(&mut self, now: Ns, id: u64) -> bool {
        let found = self
            .slots
            .iter()
            .zip(0u32..)
            .find(|(s, _)| s.state != State::Free && s.id == id)
            .map(|(s, slot)| SlotRef { slot, gen: s.gen });
        let Some(left) = found.and_then(|r| self.release(r)) else {
            return false;
        };
        self.stats.aborted_task(left.class, left.dld, left.op.write);
        let now = now.max(self.now);
        if left.started_at.is_some() {
            self.drive.abort(now, &left.op);
        }
        self.dispatch_at = Some(self.dispatch_at.map_or(now, |t| t.min(now)));
        self.drop_stale_events();
        self.check();
        true
    }

    /// CLEAR TASK SET / LOGICAL UNIT RESET (SAM-5 §7.4, §7.7): aborts every command; returns
    /// how many there were.
    pub fn abort_all(&mut self) -> usize {
        let live: Vec<SlotRef> = (0u32..)
            .zip(&self.slots)
            .filter(|(_, s)| s.state != State::Free)
            .map(|(slot, s)| SlotRef { slot, gen: s.gen })
            .collect();
        for r in &live {
            if let Some(left) = self.release(*r) {
                self.stats.aborted_task(left.class, left.dld, left.op.write);
                if left.started_at.is_some() {
                    self.drive.abort(self.now, &left.op);
                }
            }
        }
        self.drop_stale_events();
        self.check();
        live.len()
    }

    /// The queue's invariants, after every input (debug builds: the simulator and the fuzz
    /// targets run them millions of times): each live slot is counted in exactly one place
    /// (its class's waiting count, the device queue with its memo, the HEAD OF QUEUE list or
    /// the active count), the free list holds the free slots, no more commands are in service
    /// than the drive has units, and the device queue is not deeper than configured.
    fn check(&self) {
        if !cfg!(debug_assertions) {
            return;
        }
        let mut by_state = [0usize; 5];
        let mut submitted = [0usize; CLASSES];
        for s in &self.slots {
            let i = match s.state {
                State::Free => 0,
                State::Submitted => {
                    submitted[s.class] += 1;
                    1
                }
                State::Queued => 2,
                State::Head => 3,
                State::Active => 4,
            };
            by_state[i] += 1;
        }
        debug_assert_eq!(by_state[0], self.free.len(), "free list");
        debug_assert!(
            self.free
                .iter()
                .all(|&f| self.slots[f as usize].state == State::Free),
            "a free-listed slot is live"
        );
        debug_assert_eq!(submitted, self.waiting, "waiting counts by class");
        debug_assert_eq!(by_state[2], self.candidates.len(), "device queue");
        debug_assert_eq!(self.candidates.len(), self.candidate_slots.len());
        debug_assert_eq!(self.candidates.len(), self.memos.len(), "memos");
        debug_assert!(
            self.candidates
                .iter()
                .zip(&self.candidate_slots)
                .all(|(c, &slot)| {
                    let s = &self.slots[slot as usize];
                    s.state == State::Queued && s.id == c.id
                }),
            "a candidate's slot"
        );
        debug_assert!(self.candidates.len() <= self.depth, "device queue depth");
        debug_assert_eq!(by_state[3], self.head.len(), "HEAD OF QUEUE list");
        debug_assert_eq!(by_state[4], self.active, "active count");
        debug_assert!(self.active <= self.drive.parallelism().max(1), "units");
    }

    /// Pops events that no longer apply so that `next_event` is exact.
    fn drop_stale_events(&mut self) {
        while let Some(&Reverse((at, kind, r))) = self.events.peek() {
            let live = self.slot(r).is_some_and(|s| match kind {
                EventKind::Done => s.state == State::Active && !s.store_pending && s.done_at == at,
                EventKind::Expire(LimitKind::Inactive) => {
                    s.state != State::Active && s.inactive.is_some_and(|l| l.at == at && !l.fired)
                }
                EventKind::Expire(LimitKind::Active) => {
                    s.state == State::Active && s.active.is_some_and(|l| l.at == at && !l.fired)
                }
                EventKind::Expire(LimitKind::Guideline) => {
                    s.guideline.is_some_and(|l| l.at == at && !l.fired)
                }
            });
            if live {
                break;
            }
            self.events.pop();
        }
    }
}
