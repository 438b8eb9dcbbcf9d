//! What the queue reports when a command leaves it (SPC-6 command duration limit policies);
//! status.rs says it in SCSI status and sense.

use crate::cdl::{LimitKind, Policy};
use drive::Ns;

/// How a command ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Completed normally (possibly after missing a 0h/1h/2h limit).
    Good,
    /// Policy Dh: GOOD status with sense COMPLETED, 55h/0Ah DATA CURRENTLY UNAVAILABLE; no data
    /// transferred, nothing written.
    CompletedUnavailable,
    /// Policy Fh before processing started: ABORTED COMMAND, 2Eh/01h.
    AbortedBeforeProcessing,
    /// Policy Fh during processing: ABORTED COMMAND, 2Eh/02h.
    AbortedDuringProcessing,
    /// Policy Eh (active limit): ABORTED COMMAND, 2Eh/03h.
    AbortedErrorRecovery,
    /// The drive's error recovery failed: MEDIUM ERROR (SBC-4: 11h/00h UNRECOVERED READ ERROR
    /// for reads, 0Ch/00h WRITE ERROR for writes).
    MediumError,
}

impl Outcome {
    pub const ALL: [Outcome; 6] = [
        Outcome::Good,
        Outcome::CompletedUnavailable,
        Outcome::AbortedBeforeProcessing,
        Outcome::AbortedDuringProcessing,
        Outcome::AbortedErrorRecovery,
        Outcome::MediumError,
    ];

    /// Stable index 0..6 for per-outcome counters.
    pub fn index(self) -> usize {
        match self {
            Self::Good => 0,
            Self::CompletedUnavailable => 1,
            Self::AbortedBeforeProcessing => 2,
            Self::AbortedDuringProcessing => 3,
            Self::AbortedErrorRecovery => 4,
            Self::MediumError => 5,
        }
    }

    /// Aborted by policy Eh or Fh.
    pub fn is_aborted(self) -> bool {
        matches!(
            self,
            Self::AbortedBeforeProcessing
                | Self::AbortedDuringProcessing
                | Self::AbortedErrorRecovery
        )
    }
}

/// Which limits a command exceeded on its way (whatever the policy did about it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Misses {
    pub inactive: bool,
    pub active: bool,
    pub guideline: bool,
}

impl Misses {
    pub fn any(self) -> bool {
        self.inactive || self.active || self.guideline
    }

    pub fn get(self, kind: LimitKind) -> bool {
        match kind {
            LimitKind::Inactive => self.inactive,
            LimitKind::Active => self.active,
            LimitKind::Guideline => self.guideline,
        }
    }

    pub(crate) fn set(&mut self, kind: LimitKind) {
        match kind {
            LimitKind::Inactive => self.inactive = true,
            LimitKind::Active => self.active = true,
            LimitKind::Guideline => self.guideline = true,
        }
    }
}

/// A command that left the queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    /// The caller's [`crate::Command::id`].
    pub id: u64,
    pub class: usize,
    /// The DLD the command was submitted with (0 = not duration-limited).
    pub dld: u8,
    pub outcome: Outcome,
    /// When status is ready (completion time, or the expiry time for Dh/Eh/Fh).
    pub at: Ns,
    pub submitted_at: Ns,
    /// When processing started (the drive took it), if it did.
    pub started_at: Option<Ns>,
    /// Limits exceeded along the way.
    pub missed: Misses,
    /// The limit and policy that ended the command, for Dh/Eh/Fh outcomes.
    pub ended_by: Option<(LimitKind, Policy)>,
}

impl Completion {
    /// Latency as the host sees it: status time minus submission.
    pub fn latency(&self) -> Ns {
        self.at.saturating_sub(self.submitted_at)
    }
}
