//! What a logical unit counts for its operator (`stint serve --metrics`): commands by kind and
//! by how they ended, sense data, bytes moved; with a device queue also the task set's gauges,
//! the queue's per-class and per-descriptor statistics and latency histograms. Plain counters
//! of the core: two additions per command, no allocation (a completion with sense data adds
//! to a small map, one entry per sense the LU can give).

use crate::latency::Latencies;
use crate::Completion;
use scsi::{Asc, CommandInfo, Direction, SenseKey, Status};
use std::collections::BTreeMap;

/// What a command does, for counting: reads and writes of logical blocks (the command table's
/// [`scsi::CommandInfo::moves_blocks`]: READ and WRITE of every size, WRITE AND VERIFY, WRITE
/// SAME, ORWRITE, COMPARE AND WRITE), everything else as other.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Read,
    Write,
    Other,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::Read, Kind::Write, Kind::Other];

    /// The kind of the command in `cdb`, from its table entry (operation code and service
    /// action), whether or not the rest of it is valid.
    pub fn of(cdb: &[u8]) -> Kind {
        scsi::table::find(cdb).map_or(Kind::Other, Kind::of_entry)
    }

    /// The kind of commands of a table entry.
    pub fn of_entry(info: &CommandInfo) -> Kind {
        match info.moves_blocks() {
            Some(Direction::In) => Kind::Read,
            Some(Direction::Out) => Kind::Write,
            _ => Kind::Other,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::Read => "read",
            Kind::Write => "write",
            Kind::Other => "other",
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// How a counted command ended: its status (SAM-5 table 43), or `None` when task management
/// aborted it and no status was sent (TAS = 0).
pub type Ending = Option<Status>;

/// Every [`Ending`], in the order of [`Counts::commands`]'s second index.
pub const ENDINGS: [Ending; 9] = [
    Some(Status::Good),
    Some(Status::CheckCondition),
    Some(Status::ConditionMet),
    Some(Status::Busy),
    Some(Status::ReservationConflict),
    Some(Status::TaskSetFull),
    Some(Status::AcaActive),
    Some(Status::TaskAborted),
    None,
];

fn ending_index(ending: Ending) -> usize {
    match ending {
        Some(Status::Good) => 0,
        Some(Status::CheckCondition) => 1,
        Some(Status::ConditionMet) => 2,
        Some(Status::Busy) => 3,
        Some(Status::ReservationConflict) => 4,
        Some(Status::TaskSetFull) => 5,
        Some(Status::AcaActive) => 6,
        Some(Status::TaskAborted) => 7,
        None => 8,
    }
}

/// The counters of one logical unit.
#[derive(Default)]
pub(crate) struct CommandCounters {
    commands: [[u64; ENDINGS.len()]; 3],
    read_bytes: u64,
    written_bytes: u64,
    sense: BTreeMap<(Kind, SenseKey, Asc), u64>,
}

impl CommandCounters {
    /// A command of `kind` ended with `c`; `moved` is the length of the data transfer its
    /// CDB asks for, the bytes a read or write moved when it completed GOOD (counted from the
    /// CDB, not from buffers, so that a plane that moves no data counts the same).
    pub(crate) fn count(&mut self, kind: Kind, c: &Completion, moved: u32) {
        self.commands[kind.index()][ending_index(Some(c.status))] += 1;
        match &c.sense {
            None if c.status == Status::Good => match kind {
                Kind::Read => self.read_bytes += u64::from(moved),
                Kind::Write => self.written_bytes += u64::from(moved),
                Kind::Other => {}
            },
            None => {}
            Some(s) => *self.sense.entry((kind, s.key, s.asc)).or_default() += 1,
        }
    }

    /// Task management aborted a command of `kind`: no status was sent (TAS = 0).
    pub(crate) fn aborted(&mut self, kind: Kind) {
        self.commands[kind.index()][ending_index(None)] += 1;
    }

    /// What they hold now.
    pub(crate) fn snapshot(&self) -> Counts {
        let sense = self
            .sense
            .iter()
            .map(|(&(kind, key, asc), &count)| SenseCount {
                kind,
                key,
                asc,
                count,
            })
            .collect();
        Counts {
            commands: self.commands,
            read_bytes: self.read_bytes,
            written_bytes: self.written_bytes,
            sense,
        }
    }
}

/// Completions with one sense key and ASC/ASCQ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SenseCount {
    pub kind: Kind,
    pub key: SenseKey,
    pub asc: Asc,
    pub count: u64,
}

/// A logical unit's command counters at one moment: every command the logical unit ended,
/// whichever clock drives it; they never go back to zero.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// By [`Kind`] and by [`ENDINGS`] index.
    commands: [[u64; ENDINGS.len()]; 3],
    /// Data-In bytes of read commands that completed with GOOD status.
    pub read_bytes: u64,
    /// Data-Out bytes of write commands that completed with GOOD status.
    pub written_bytes: u64,
    /// Completions that carried sense data (CHECK CONDITION, or GOOD for a CDL policy Dh
    /// completion sent that way), sorted.
    pub sense: Vec<SenseCount>,
}

impl Counts {
    /// Commands of `kind` that ended so.
    pub fn commands(&self, kind: Kind, ending: Ending) -> u64 {
        self.commands[kind.index()][ending_index(ending)]
    }
}

/// The state of a logical unit's device queue at one moment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QueueMetrics {
    /// Tasks in the task set: held by an ORDERED task, in a submission queue, or in the
    /// device queue.
    pub tasks: usize,
    /// Commands in the device queue (queued and in service).
    pub device_queue: usize,
    /// Commands waiting in each class's submission queue.
    pub waiting: [usize; qos::CLASSES],
    /// The queue's counters per class and per CDL descriptor (those LOG SENSE 19h/21h
    /// reports, never reset here).
    pub stats: qos::Stats,
    pub latencies: Latencies,
}

/// Everything a logical unit counts, at one moment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Metrics {
    pub counts: Counts,
    /// For a logical unit with a device queue.
    pub queue: Option<QueueMetrics>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_ending_has_its_own_index() {
        for (i, e) in ENDINGS.into_iter().enumerate() {
            assert_eq!(ending_index(e), i, "{e:?}");
        }
    }

    #[test]
    fn kinds_by_operation_code() {
        let mut read32 = [0u8; 32];
        read32[0] = 0x7F;
        read32[9] = 0x09;
        let mut write32 = read32;
        write32[9] = 0x0B;
        let mut verify32 = read32;
        verify32[9] = 0x0A;
        for (cdb, kind) in [
            (&[0x28u8, 0, 0, 0, 0, 0, 0, 0, 1, 0][..], Kind::Read),
            (&[0x88; 16], Kind::Read),
            (&read32, Kind::Read),
            (&[0x2A; 10], Kind::Write),
            (&[0x93; 16], Kind::Write),
            (&[0x89; 16], Kind::Write),
            (&write32, Kind::Write),
            (&verify32, Kind::Other),
            (&[0x12, 0, 0, 0, 36, 0], Kind::Other),
            (&[0x2F; 10], Kind::Other),
            (&[], Kind::Other),
        ] {
            assert_eq!(Kind::of(cdb), kind, "{cdb:02X?}");
        }
    }
}
