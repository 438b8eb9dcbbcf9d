//! What a logical unit counts for its operator (`stint serve --metrics`): commands by kind and
//! by how they ended, sense data, bytes moved; with a device queue also the task set's gauges,
//! the queue's per-class and per-descriptor statistics and latency histograms. The counters
//! every command touches are relaxed atomics: no lock and no allocation on the inline path.
//! Only a completion with sense data takes a lock (a small map, one entry per sense the LU
//! can give).

use crate::latency::Latencies;
use crate::{Completion, Request};
use parking_lot::Mutex;
use rustc_hash::FxHashMap;
use scsi::{Asc, Direction, SenseKey, Status};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

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
        match scsi::table::find(cdb).map(|i| i.moves_blocks()) {
            Ok(Some(Direction::In)) => Kind::Read,
            Ok(Some(Direction::Out)) => Kind::Write,
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

/// The atomic counters of one logical unit.
#[derive(Default)]
pub(crate) struct CommandCounters {
    commands: [[AtomicU64; ENDINGS.len()]; 3],
    read_bytes: AtomicU64,
    written_bytes: AtomicU64,
    sense: Mutex<FxHashMap<(Kind, SenseKey, Asc), u64>>,
}

impl CommandCounters {
    /// `req` ended with `c` after producing `data_in` bytes of read data.
    pub(crate) fn count(&self, req: &Request, c: &Completion, data_in: usize) {
        let kind = Kind::of(req.cdb);
        self.commands[kind.index()][ending_index(Some(c.status))].fetch_add(1, Relaxed);
        match &c.sense {
            None if c.status == Status::Good => {
                let moved = match kind {
                    Kind::Read => (&self.read_bytes, data_in),
                    Kind::Write => (&self.written_bytes, req.data_out.len()),
                    Kind::Other => return,
                };
                moved.0.fetch_add(moved.1 as u64, Relaxed);
            }
            None => {}
            Some(s) => *self.sense.lock().entry((kind, s.key, s.asc)).or_default() += 1,
        }
    }

    /// What they hold now; `aborted` adds the tasks task management aborted, by kind.
    pub(crate) fn snapshot(&self, aborted: [u64; 3]) -> Counts {
        let mut commands = [[0; ENDINGS.len()]; 3];
        for (row, counters) in commands.iter_mut().zip(&self.commands) {
            for (n, c) in row.iter_mut().zip(counters) {
                *n = c.load(Relaxed);
            }
        }
        for (row, n) in commands.iter_mut().zip(aborted) {
            row[ending_index(None)] += n;
        }
        let mut sense: Vec<SenseCount> = self
            .sense
            .lock()
            .iter()
            .map(|(&(kind, key, asc), &count)| SenseCount {
                kind,
                key,
                asc,
                count,
            })
            .collect();
        sense.sort_by_key(|s| (s.kind, s.key as u8, s.asc.0, s.asc.1));
        Counts {
            commands,
            read_bytes: self.read_bytes.load(Relaxed),
            written_bytes: self.written_bytes.load(Relaxed),
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

/// A logical unit's command counters at one moment. They count the commands the transport
/// hands to the logical unit through `submit` and `complete` (not those of the simulator's
/// `submit_mut` and `status`); they never go back to zero.
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
