//! What the core answers: the next step of the task a call was about ([`Step`]), and the
//! events of other tasks and of the logical unit's own background work ([`Event`]).

use crate::{Completion, Transfer};
use store::Op;

/// A task in a logical unit's task set: its slot and the slot's generation, so that the id
/// of a task that ended never names the task that takes its slot next.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TaskId {
    pub(crate) slot: u32,
    pub(crate) generation: u32,
}

impl TaskId {
    /// The id as one number (a data-plane operation's id).
    pub fn to_u64(self) -> u64 {
        u64::from(self.generation) << 32 | u64::from(self.slot)
    }

    pub fn from_u64(id: u64) -> TaskId {
        TaskId {
            slot: id as u32,
            generation: (id >> 32) as u32,
        }
    }
}

/// What the task a call was about needs next.
#[derive(Debug)]
pub enum Step {
    /// It ended with this status; its read data, if any, is in the caller's data-in buffer.
    Done(Completion),
    /// Receive the rest of its Data-Out, `len` bytes in all (what came with the command
    /// counts), then call [`crate::LogicalUnit::data_out`] with all of it.
    DataOut(TaskId, u32),
    /// Run this data-plane operation with the task's buffers, then call
    /// [`crate::LogicalUnit::io_done`] with its result.
    Io(TaskId, Op),
    /// It waits in the task set (behind an ORDERED task, in the device queue, for a long
    /// operation): an [`Event`] will say what it needs next.
    Wait(TaskId),
    /// Task management aborted it while it ran: it ends without status (TAS = 0).
    Aborted,
}

/// What a call answers when a command arrives: the direction and length its CDB asks for, for
/// residuals (`None` when the command was refused before that counted: a CDB that does not
/// decode, a write out of range, an overlapped tag), and its first step.
#[derive(Debug)]
pub struct Arrived {
    pub transfer: Option<Transfer>,
    pub step: Step,
}

/// Something that happened to a task without its transport asking: another task's end
/// released it, the device queue decided, task management aborted it.
#[derive(Debug)]
pub struct Event {
    pub nexus: u64,
    pub tag: u64,
    pub task: TaskId,
    pub then: Then,
    /// It exceeded a duration limit on its way, whatever the policy did (the LOG SENSE
    /// statistics count it; the status shows it only for policies Dh, Eh and Fh).
    pub missed: bool,
}

/// A task's next step, delivered as an event.
#[derive(Debug)]
pub enum Then {
    /// Run this data-plane operation, then call [`crate::LogicalUnit::io_done`].
    Io(Op),
    /// It ended; `data_in` holds what a command the core answered itself produced.
    Done(Completion, Vec<u8>),
    /// Task management of another nexus aborted it: no status (TAS = 0).
    Aborted,
}
