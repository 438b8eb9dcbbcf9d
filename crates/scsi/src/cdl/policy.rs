//! CDL policies applied when a limit is exceeded (SPC-6 T2 descriptor policy codes).

/// Which limit of a descriptor (SPC-6 T2 descriptor).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum LimitKind {
    /// MAX INACTIVE TIME: from arrival until processing starts.
    Inactive,
    /// MAX ACTIVE TIME: from start of processing until completion.
    Active,
    /// COMMAND DURATION GUIDELINE: the whole command, arrival to completion.
    Guideline,
}

impl LimitKind {
    pub const ALL: [LimitKind; 3] = [LimitKind::Inactive, LimitKind::Active, LimitKind::Guideline];

    /// Stable index (0, 1, 2) for per-kind arrays.
    pub fn index(self) -> usize {
        match self {
            Self::Inactive => 0,
            Self::Active => 1,
            Self::Guideline => 2,
        }
    }
}

/// A policy code (SPC-6 T2 descriptor; names from cdladm).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Policy {
    /// 0h complete-earliest: keep processing, count the miss.
    #[default]
    CompleteEarliest,
    /// 1h continue-next-limit (guideline only): continue under descriptor n+1's limits.
    ContinueNextLimit,
    /// 2h continue-no-limit (guideline only): continue with no limit.
    ContinueNoLimit,
    /// Dh complete-unavailable: GOOD, COMPLETED, 55h/0Ah, no data.
    CompleteUnavailable,
    /// Eh abort-recovery (active only): ABORTED COMMAND 2Eh/03h.
    AbortRecovery,
    /// Fh abort: ABORTED COMMAND 2Eh/01h (before processing) or 2Eh/02h (during).
    Abort,
}

impl Policy {
    pub const ALL: [Policy; 6] = [
        Policy::CompleteEarliest,
        Policy::ContinueNextLimit,
        Policy::ContinueNoLimit,
        Policy::CompleteUnavailable,
        Policy::AbortRecovery,
        Policy::Abort,
    ];

    /// Decodes a 4-bit policy field; codes with no meaning give `None`.
    pub fn from_code(code: u8) -> Option<Self> {
        match code {
            0x0 => Some(Self::CompleteEarliest),
            0x1 => Some(Self::ContinueNextLimit),
            0x2 => Some(Self::ContinueNoLimit),
            0xD => Some(Self::CompleteUnavailable),
            0xE => Some(Self::AbortRecovery),
            0xF => Some(Self::Abort),
            _ => None,
        }
    }

    pub fn code(self) -> u8 {
        match self {
            Self::CompleteEarliest => 0x0,
            Self::ContinueNextLimit => 0x1,
            Self::ContinueNoLimit => 0x2,
            Self::CompleteUnavailable => 0xD,
            Self::AbortRecovery => 0xE,
            Self::Abort => 0xF,
        }
    }

    /// Stable index 0..6 for per-policy counters.
    pub fn index(self) -> usize {
        match self {
            Self::CompleteEarliest => 0,
            Self::ContinueNextLimit => 1,
            Self::ContinueNoLimit => 2,
            Self::CompleteUnavailable => 3,
            Self::AbortRecovery => 4,
            Self::Abort => 5,
        }
    }

    /// Whether the policy may be used for `limit` (SPC-6, as cdladm checks it:
    /// inactive {0,D,F}, active {0,D,E,F}, guideline {0,1,2,D,F}).
    pub fn allowed_for(self, limit: LimitKind) -> bool {
        match limit {
            LimitKind::Inactive => {
                matches!(
                    self,
                    Self::CompleteEarliest | Self::CompleteUnavailable | Self::Abort
                )
            }
            LimitKind::Active => matches!(
                self,
                Self::CompleteEarliest
                    | Self::CompleteUnavailable
                    | Self::AbortRecovery
                    | Self::Abort
            ),
            LimitKind::Guideline => !matches!(self, Self::AbortRecovery),
        }
    }

    /// The cdladm name (cdl-tools `cdl_policy_str`).
    pub fn name(self) -> &'static str {
        match self {
            Self::CompleteEarliest => "complete-earliest",
            Self::ContinueNextLimit => "continue-next-limit",
            Self::ContinueNoLimit => "continue-no-limit",
            Self::CompleteUnavailable => "complete-unavailable",
            Self::AbortRecovery => "abort-recovery",
            Self::Abort => "abort",
        }
    }
}
