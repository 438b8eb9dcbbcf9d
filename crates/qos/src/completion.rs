//! What the queue reports when a command leaves it (SPC-6 command duration limit policies).

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
    /// for reads; the device picks the exact ASC).
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

    /// (sense key, ASC, ASCQ) for a duration-limit outcome (SPC-6 CDL policies); `None` for
    /// `Good` and `MediumError` (the latter's sense depends on the command).
    pub fn cdl_sense(self) -> Option<(u8, u8, u8)> {
        match self {
            Self::Good | Self::MediumError => None,
            Self::CompletedUnavailable => Some((0x0F, 0x55, 0x0A)),
            Self::AbortedBeforeProcessing => Some((0x0B, 0x2E, 0x01)),
            Self::AbortedDuringProcessing => Some((0x0B, 0x2E, 0x02)),
            Self::AbortedErrorRecovery => Some((0x0B, 0x2E, 0x03)),
        }
    }

    /// The outcome a host reads from a command's status and sense (sense key, ASC, ASCQ):
    /// the CDL completions by their sense (the inverse of [`Self::cdl_sense`]), GOOD without
    /// sense as `Good`, anything else as `MediumError`.
    pub fn from_status(good: bool, sense: Option<(u8, u8, u8)>) -> Self {
        match sense {
            None if good => Self::Good,
            Some(s) => Self::ALL
                .into_iter()
                .find(|o| o.cdl_sense() == Some(s))
                .unwrap_or(Self::MediumError),
            None => Self::MediumError,
        }
    }

    /// Whether no data was transferred because a duration limit ended the command (the host
    /// sees -ETIME).
    pub fn is_duration_limit(self) -> bool {
        self.cdl_sense().is_some()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_decodes_what_the_device_encoded() {
        for o in Outcome::ALL {
            let decoded = Outcome::from_status(o == Outcome::Good, o.cdl_sense());
            assert_eq!(decoded, o, "{o:?}");
        }
        // Dh's GOOD-with-sense form is still unavailable data.
        assert_eq!(
            Outcome::from_status(true, Some((0x0F, 0x55, 0x0A))),
            Outcome::CompletedUnavailable
        );
        assert_eq!(
            Outcome::from_status(false, Some((0x03, 0x11, 0x00))),
            Outcome::MediumError
        );
        assert_eq!(Outcome::from_status(false, None), Outcome::MediumError);
    }
}
