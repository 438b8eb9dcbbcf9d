//! The task set of a logical unit that has a device queue (SAM-5 §4.6.x task sets, §8.6 task
//! attributes). Medium tasks go through the QoS queue and its drive model (`qos::Queue`);
//! task attributes are honoured here; what leaves comes out as [`Finished`] for the transport.
//! Pure: time is passed in.

use crate::latency::Latencies;
use crate::metrics::Kind;
use crate::{Completion, Finished, TaskAttribute, Verdict};
use drive::{Drive, MediaOp, Ns};
use qos::{Outcome, Queue};
use rustc_hash::FxHashMap;
use std::collections::hash_map::Entry as MapEntry;
use std::collections::VecDeque;

pub use qos::DhCompletion;

/// What a medium task asks of the queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MediumTask {
    pub(crate) op: MediaOp,
    pub(crate) class: usize,
    pub(crate) dld: u8,
}

/// What a task does once it may run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Work {
    /// A medium access timed by the drive model.
    Medium(MediumTask),
    /// A command that completes at once when it runs, held back by an ORDERED task.
    Immediate,
}

struct Entry {
    nexus: u64,
    tag: u64,
    ordered: bool,
    work: Work,
    kind: Kind,
    arrived: Ns,
}

/// Where a submitted task went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Admitted {
    /// Into the queue or held: a [`Finished`] will come out of `advance`.
    Queued,
    /// An immediate task that may run now (not entered).
    RunNow,
    /// The nexus already has a task with this tag: OVERLAPPED COMMANDS ATTEMPTED.
    Overlapped,
}

/// The tasks of one logical unit and the queue that times them.
pub(crate) struct TaskSet {
    queue: Queue<Box<dyn Drive + Send>>,
    dh: DhCompletion,
    entries: Vec<Option<Entry>>,
    free: Vec<u32>,
    /// (nexus, tag) of every entered task: overlapped commands and ABORT TASK.
    by_tag: FxHashMap<(u64, u64), u32>,
    /// Tasks held back by an ORDERED task (SAM-5 §8.6.3), in arrival order.
    held: VecDeque<u32>,
    /// Entered tasks in the queue (not held), and the ORDERED ones among them.
    running: usize,
    ordered_running: usize,
    /// Tasks that left for a reason of their own (aborted by another nexus's task
    /// management): reported by the next `advance`.
    outbox: Vec<Finished>,
    scratch: Vec<qos::Completion>,
    /// The time the real-time driver was last told to wake at.
    armed: Option<Ns>,
    /// Arrival to leaving, of the medium tasks that left by themselves, once `keep_latencies`
    /// (the simulator keeps statistics of its own and leaves it off).
    latencies: Latencies,
    keep_latencies: bool,
    /// Tasks task management aborted, by [`Kind`].
    aborted: [u64; 3],
    /// The latest time an input or `advance` brought: when a command that runs outside the
    /// queue (PREEMPT AND ABORT) aborts tasks.
    latest: Ns,
}

impl TaskSet {
    pub(crate) fn new(queue: Queue<Box<dyn Drive + Send>>, dh: DhCompletion) -> Self {
        TaskSet {
            queue,
            dh,
            entries: Vec::new(),
            free: Vec::new(),
            by_tag: FxHashMap::default(),
            held: VecDeque::new(),
            running: 0,
            ordered_running: 0,
            outbox: Vec::new(),
            scratch: Vec::new(),
            armed: None,
            latencies: Latencies::default(),
            keep_latencies: false,
            aborted: [0; 3],
            latest: 0,
        }
    }

    /// The latest time the task set was given.
    pub(crate) fn latest(&self) -> Ns {
        self.latest
    }

    pub(crate) fn queue(&self) -> &Queue<Box<dyn Drive + Send>> {
        &self.queue
    }

    pub(crate) fn queue_mut(&mut self) -> &mut Queue<Box<dyn Drive + Send>> {
        &mut self.queue
    }

    /// Tasks in the task set (held, queued or in service).
    pub(crate) fn len(&self) -> usize {
        self.by_tag.len()
    }

    pub(crate) fn latencies(&self) -> &Latencies {
        &self.latencies
    }

    /// Records the latency of every task that leaves from now on.
    pub(crate) fn keep_latencies(&mut self) {
        self.keep_latencies = true;
    }

    /// Tasks task management aborted, by [`Kind`] (read, write, other).
    pub(crate) fn aborted(&self) -> [u64; 3] {
        self.aborted
    }

    /// Whether a task with `attribute` arriving now must wait for older tasks (SAM-5 §8.6:
    /// an ORDERED task waits for every older task, every task waits for an older ORDERED one).
    fn must_wait(&self, attribute: TaskAttribute) -> bool {
        match attribute {
            TaskAttribute::HeadOfQueue => false,
            TaskAttribute::Ordered => self.running > 0 || !self.held.is_empty(),
            TaskAttribute::Simple | TaskAttribute::Aca => {
                self.ordered_running > 0 || !self.held.is_empty()
            }
        }
    }

    /// A task of `kind` arrives at `now`. `medium` is `None` for a command that does not
    /// access the medium: it runs at once unless an ORDERED task holds it back.
    pub(crate) fn submit(
        &mut self,
        now: Ns,
        nexus: u64,
        tag: u64,
        attribute: TaskAttribute,
        kind: Kind,
        medium: Option<MediumTask>,
    ) -> Admitted {
        self.catch_up(now);
        let wait = self.must_wait(attribute);
        if medium.is_none() && !wait {
            return Admitted::RunNow;
        }
        let vacant = match self.by_tag.entry((nexus, tag)) {
            MapEntry::Occupied(_) => return Admitted::Overlapped,
            MapEntry::Vacant(v) => v,
        };
        let entry = Entry {
            nexus,
            tag,
            ordered: attribute == TaskAttribute::Ordered,
            work: medium.map_or(Work::Immediate, Work::Medium),
            kind,
            arrived: now,
        };
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.entries.push(None);
                u32::try_from(self.entries.len() - 1).unwrap_or(u32::MAX)
            }
        };
        self.entries[slot as usize] = Some(entry);
        vacant.insert(slot);
        if wait {
            self.held.push_back(slot);
        } else {
            self.start(now, slot, attribute == TaskAttribute::HeadOfQueue);
        }
        Admitted::Queued
    }

    /// Hands an entered medium task to the queue.
    fn start(&mut self, now: Ns, slot: u32, head_of_queue: bool) {
        let Some(Some(e)) = self.entries.get(slot as usize) else {
            return;
        };
        let Work::Medium(m) = e.work else {
            return;
        };
        self.running += 1;
        self.ordered_running += usize::from(e.ordered);
        let cmd = qos::Command {
            id: u64::from(slot),
            class: m.class,
            op: m.op,
            dld: m.dld,
        };
        // Class and DLD were checked when the task was built, so the queue accepts them.
        let _accepted = if head_of_queue {
            self.queue.submit_head_of_queue(now, cmd)
        } else {
            self.queue.submit(now, cmd)
        };
    }

    /// Frees a task's entry; returns its nexus and tag.
    fn remove(&mut self, slot: u32) -> Option<Entry> {
        let e = self.entries.get_mut(slot as usize)?.take()?;
        self.by_tag.remove(&(e.nexus, e.tag));
        self.free.push(slot);
        Some(e)
    }

    /// Processes everything due up to `now`; appends what left the task set to `out`.
    pub(crate) fn advance(&mut self, now: Ns, out: &mut Vec<Finished>) {
        self.latest = self.latest.max(now);
        out.append(&mut self.outbox);
        self.advance_into(now, out);
    }

    /// Brings the queue up to `now` before an input at `now`, keeping what left for the
    /// next `advance` (the queue takes inputs in time order).
    fn catch_up(&mut self, now: Ns) {
        self.latest = self.latest.max(now);
        if self.queue.next_event().is_some_and(|t| t <= now) {
            let mut out = std::mem::take(&mut self.outbox);
            self.advance_into(now, &mut out);
            self.outbox = out;
        }
    }

    fn advance_into(&mut self, now: Ns, out: &mut Vec<Finished>) {
        loop {
            self.queue.advance(now, &mut self.scratch);
            if self.scratch.is_empty() {
                break;
            }
            let mut done = std::mem::take(&mut self.scratch);
            for c in done.drain(..) {
                let Ok(slot) = u32::try_from(c.id) else {
                    continue;
                };
                let Some(e) = self.remove(slot) else { continue };
                self.running = self.running.saturating_sub(1);
                self.ordered_running = self.ordered_running.saturating_sub(usize::from(e.ordered));
                let verdict = match e.work {
                    Work::Medium(m) => {
                        if self.keep_latencies {
                            let latency = now.saturating_sub(e.arrived);
                            self.latencies.record(m.class, m.op.write, m.dld, latency);
                        }
                        self.verdict(c.outcome, &m)
                    }
                    Work::Immediate => Verdict::Run,
                };
                out.push(Finished {
                    nexus: e.nexus,
                    tag: e.tag,
                    verdict,
                    missed: c.missed.any(),
                });
            }
            self.scratch = done;
            self.release(now, out);
            // Nothing more is due (a held task that was started would be): the queue has
            // nothing to hand out.
            match self.queue.next_event() {
                Some(t) if t <= now => {}
                _ => break,
            }
        }
    }

    /// Starts held tasks that no longer have to wait, oldest first.
    fn release(&mut self, now: Ns, out: &mut Vec<Finished>) {
        while let Some(&slot) = self.held.front() {
            let Some(Some(e)) = self.entries.get(slot as usize) else {
                self.held.pop_front();
                continue;
            };
            let blocked = if e.ordered {
                self.running > 0
            } else {
                self.ordered_running > 0
            };
            if blocked {
                break;
            }
            self.held.pop_front();
            if let Work::Immediate = e.work {
                if let Some(e) = self.remove(slot) {
                    out.push(Finished {
                        nexus: e.nexus,
                        tag: e.tag,
                        verdict: Verdict::Run,
                        missed: false,
                    });
                }
            } else {
                self.start(now, slot, false);
            }
        }
    }

    /// The status a queue outcome gives a medium task (qos::status).
    fn verdict(&self, outcome: Outcome, m: &MediumTask) -> Verdict {
        match outcome.status(&m.op, self.dh) {
            None => Verdict::Run,
            Some((status, sense)) => Verdict::Fail(Completion {
                status,
                sense: Some(sense),
            }),
        }
    }

    /// ABORT TASK (SAM-5 §7.2): removes the task without a completion. Returns whether it was
    /// in the task set.
    pub(crate) fn abort_task(&mut self, now: Ns, nexus: u64, tag: u64) -> bool {
        self.catch_up(now);
        let Some(&slot) = self.by_tag.get(&(nexus, tag)) else {
            return false;
        };
        self.abort_slot(now, slot);
        true
    }

    /// Aborts every task `which` selects (ABORT TASK SET: the nexus's own; CLEAR TASK SET,
    /// LOGICAL UNIT RESET: all; I_T nexus loss: the lost nexus's). Tasks of other nexuses
    /// than `reporter` are reported as [`Verdict::Aborted`] by the next `advance`, so their
    /// transports can let go of them (TAS = 0: the initiator gets no status).
    /// Returns the other nexuses that lost tasks, in ascending order.
    pub(crate) fn abort_where(
        &mut self,
        now: Ns,
        reporter: Option<u64>,
        which: impl Fn(u64) -> bool,
    ) -> Vec<u64> {
        self.catch_up(now);
        let slots: Vec<u32> = (0u32..)
            .zip(&self.entries)
            .filter_map(|(slot, e)| e.as_ref().filter(|e| which(e.nexus)).map(|_| slot))
            .collect();
        let mut others = Vec::new();
        for slot in slots {
            if let Some((nexus, tag)) = self.abort_slot(now, slot) {
                if Some(nexus) != reporter {
                    self.outbox.push(Finished {
                        nexus,
                        tag,
                        verdict: Verdict::Aborted,
                        missed: false,
                    });
                    others.push(nexus);
                }
            }
        }
        others.sort_unstable();
        others.dedup();
        others
    }

    fn abort_slot(&mut self, now: Ns, slot: u32) -> Option<(u64, u64)> {
        let e = self.remove(slot)?;
        self.aborted[e.kind.index()] += 1;
        if let Some(i) = self.held.iter().position(|s| *s == slot) {
            self.held.remove(i);
        } else if let Work::Medium(_) = e.work {
            self.queue.abort(now, u64::from(slot));
            self.running = self.running.saturating_sub(1);
            self.ordered_running = self.ordered_running.saturating_sub(usize::from(e.ordered));
        }
        let mut out = Vec::new();
        // Tasks behind an aborted ORDERED task may go.
        self.release(now, &mut out);
        self.outbox.append(&mut out);
        Some((e.nexus, e.tag))
    }

    /// The earliest time something is due.
    pub(crate) fn next_event(&self) -> Option<Ns> {
        if !self.outbox.is_empty() {
            return Some(0);
        }
        self.queue.next_event()
    }

    /// Whether the real-time driver must be woken: something is due (at `next`, the next
    /// event) before the time it was told to wake at. Records the new time.
    pub(crate) fn needs_wake(&mut self, next: Option<Ns>) -> bool {
        let earlier = match (next, self.armed) {
            (Some(n), Some(a)) => n < a,
            (Some(_), None) => true,
            (None, _) => false,
        };
        if earlier {
            self.armed = next;
        }
        earlier
    }

    /// The real-time driver will wake at `at` (`None`: only when told).
    pub(crate) fn arm(&mut self, at: Option<Ns>) {
        self.armed = at;
    }
}
