//! The simulator's logical unit: the core `stint serve` runs, with a null data plane. The
//! engine calls the core's functions in the order the server's unit does (a command, its
//! data-plane operation, that operation's end; the core's deadlines and the events they
//! bring), but every data-plane operation ends at once, at the time it was asked for, moving
//! no data: the simulator times commands and keeps none of their bytes. It owns its core, so
//! no lock is taken.

use device::{Arrival, Completion, Event, LogicalUnit, Ns, Step, TaskId, Then};
use store::{Buffers, Done, NullPlane, Op, Plane};

/// A command that ended.
#[derive(Debug)]
pub(crate) struct Returned {
    /// The engine's tags name its commands alone; the same-sequence test compares nexuses.
    #[cfg(test)]
    pub(crate) nexus: u64,
    pub(crate) tag: u64,
    pub(crate) completion: Completion,
    /// It exceeded a duration limit on its way, whatever the policy did.
    pub(crate) missed: bool,
}

pub(crate) struct SimUnit {
    lu: LogicalUnit,
    plane: NullPlane,
    scratch: Vec<u8>,
    /// Commands that ended during a submit (the device queue caught up to its time), handed
    /// out by the next `advance`, due at `pending_at`.
    pending: Vec<Returned>,
    pending_at: Ns,
}

impl SimUnit {
    pub(crate) fn new(lu: LogicalUnit) -> Self {
        let capacity = lu.blocks() * u64::from(lu.block_size());
        SimUnit {
            lu,
            plane: NullPlane::new(capacity),
            scratch: Vec::new(),
            pending: Vec::new(),
            pending_at: 0,
        }
    }

    pub(crate) fn block_size(&self) -> u32 {
        self.lu.block_size()
    }

    /// When the unit next needs the time.
    pub(crate) fn next_event(&self) -> Option<Ns> {
        if self.pending.is_empty() {
            self.lu.poll_timeout()
        } else {
            Some(self.pending_at)
        }
    }

    /// A command arrives at `now`: `Some` with its status when it ends at once (on a logical
    /// unit with a device queue, only a command the unit refuses does).
    pub(crate) fn submit(&mut self, now: Ns, a: &Arrival) -> Option<Completion> {
        self.scratch.clear();
        let mut step = self.lu.command(now, a, &mut self.scratch).step;
        let ended = loop {
            match step {
                Step::Io(task, op) => step = self.io(now, task, op),
                Step::Done(c) => break Some(c),
                Step::DataOut(..) | Step::Wait(_) | Step::Aborted => break None,
            }
        };
        // What the command made due by `now` (its dispatch) runs in the same call, as in the
        // server's unit (`device::Unit::call`), not in a round of its own.
        let mut pending = std::mem::take(&mut self.pending);
        if self.lu.poll_timeout().is_some_and(|t| t <= now) {
            self.run_due(now, &mut pending);
        } else {
            self.drain(now, &mut pending);
        }
        if !pending.is_empty() && self.pending.is_empty() {
            self.pending_at = now;
        }
        self.pending = pending;
        ended
    }

    /// Runs a data-plane operation on the null plane and gives its end to the core.
    fn io(&mut self, now: Ns, task: TaskId, op: Op) -> Step {
        self.scratch.clear();
        let buffers = Buffers::Borrowed {
            data_in: &mut self.scratch,
            data_out: &[],
        };
        let result = self
            .plane
            .submit(task.to_u64(), op, buffers)
            .unwrap_or(Done::Ok);
        self.lu.io_done(now, task, result, &mut self.scratch)
    }

    /// Everything due by `now`; the commands that ended are appended to `done`. Returns when
    /// the unit next needs the time.
    pub(crate) fn advance(&mut self, now: Ns, done: &mut Vec<Returned>) -> Option<Ns> {
        done.append(&mut self.pending);
        self.run_due(now, done);
        self.lu.poll_timeout()
    }

    /// Everything due by `now`, with the background work it brings; the commands that ended
    /// are appended to `done`.
    fn run_due(&mut self, now: Ns, done: &mut Vec<Returned>) {
        self.lu.handle_timeout(now);
        while let Some(op) = self.lu.poll_background() {
            let buffers = Buffers::Borrowed {
                data_in: &mut self.scratch,
                data_out: &[],
            };
            let result = self.plane.submit(u64::MAX, op, buffers).unwrap_or(Done::Ok);
            self.lu.background_done(now, result);
        }
        self.drain(now, done);
    }

    /// The core's events: operations run at once, ends recorded. Inlined: most calls find
    /// none.
    #[inline]
    fn drain(&mut self, now: Ns, done: &mut Vec<Returned>) {
        while let Some(e) = self.lu.poll_event() {
            self.event(now, e, done);
        }
    }

    /// One event of the core: its operation runs at once, its end is recorded.
    fn event(&mut self, now: Ns, e: Event, done: &mut Vec<Returned>) {
        let completion = match e.then {
            Then::Io(op) => {
                let mut step = self.io(now, e.task, op);
                loop {
                    match step {
                        Step::Io(task, op) => step = self.io(now, task, op),
                        Step::Done(c) => break c,
                        _ => return,
                    }
                }
            }
            Then::Done(completion, _) => completion,
            // The host aborted it and knows.
            Then::Aborted => return,
        };
        done.push(Returned {
            #[cfg(test)]
            nexus: e.nexus,
            tag: e.tag,
            completion,
            missed: e.missed,
        });
    }

    /// The core's counters.
    #[cfg(test)]
    pub(crate) fn metrics(&self) -> device::Metrics {
        self.lu.metrics()
    }

    /// ABORT TASK of the nexus's task `tag`; false when there is none.
    pub(crate) fn abort_task(&mut self, now: Ns, nexus: u64, tag: u64) -> bool {
        self.lu.abort_task(now, nexus, tag)
    }
}
