//! Media faults and error recovery (experiments/README.md, B4): LBA ranges that read back only
//! after k retry revolutions ("weak"), or never ("bad"); recovery is capped per command.

use serde::Deserialize;

use crate::error::ProfileError;
use crate::{MediaOutcome, Ns};

/// One fault range as written in a profile (`[[fault]]`).
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct FaultRange {
    pub start_lba: u64,
    pub sectors: u64,
    /// Retry revolutions a weak range needs before it reads back.
    #[serde(default)]
    pub retries: u32,
    /// A bad range: the whole retry ladder runs (up to the cap) and the read fails.
    #[serde(default)]
    pub unrecoverable: bool,
}

/// What a fault range does to a read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    Weak { retries: u32 },
    Unrecoverable,
}

impl FaultRange {
    pub fn end_lba(&self) -> u64 {
        self.start_lba.saturating_add(self.sectors)
    }

    pub fn kind(&self) -> FaultKind {
        if self.unrecoverable {
            FaultKind::Unrecoverable
        } else {
            FaultKind::Weak {
                retries: self.retries,
            }
        }
    }

    pub(crate) fn validate(&self, index: usize, capacity: u64) -> Result<(), ProfileError> {
        let field = format!("fault[{index}]");
        if self.sectors == 0 {
            return Err(ProfileError::invalid(
                &format!("{field}.sectors"),
                "must be at least 1",
            ));
        }
        if self.end_lba() > capacity {
            return Err(ProfileError::invalid(
                &format!("{field}.start_lba"),
                "range ends beyond the capacity",
            ));
        }
        if self.unrecoverable == (self.retries > 0) {
            return Err(ProfileError::invalid(
                &field,
                "needs exactly one of `retries` (> 0) or `unrecoverable = true`",
            ));
        }
        Ok(())
    }
}

/// Fault ranges sorted by LBA (non-overlapping), with the recovery timing.
#[derive(Clone, Debug, Default)]
pub struct Faults {
    ranges: Vec<FaultRange>,
    /// Time of one retry: a revolution plus the offset-read set-up.
    retry_ns: Ns,
    full_ladder_ns: Ns,
    cap_ns: Ns,
}

/// Recovery a read needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Recovery {
    pub time: Ns,
    pub outcome: MediaOutcome,
}

impl Faults {
    pub fn new(mut ranges: Vec<FaultRange>, retry_ns: Ns, full_ladder_ns: Ns, cap_ns: Ns) -> Self {
        ranges.sort_by_key(|r| r.start_lba);
        Self {
            ranges,
            retry_ns,
            full_ladder_ns,
            cap_ns,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Recovery for a read of `[lba, lba + blocks)`: the worst range it touches decides.
    /// Weak: k retries of one revolution each; beyond the cap the read fails at the cap.
    /// Bad: the full ladder, capped, then failure.
    pub fn recovery(&self, lba: u64, blocks: u64) -> Recovery {
        let end = lba.saturating_add(blocks);
        let first = self.ranges.partition_point(|r| r.end_lba() <= lba);
        let mut worst = Recovery {
            time: 0,
            outcome: MediaOutcome::Ok,
        };
        for r in self
            .ranges
            .iter()
            .skip(first)
            .take_while(|r| r.start_lba < end)
        {
            let this = match r.kind() {
                FaultKind::Weak { retries } => {
                    let t = u64::from(retries).saturating_mul(self.retry_ns);
                    if t > self.cap_ns {
                        Recovery {
                            time: self.cap_ns,
                            outcome: MediaOutcome::Unrecovered,
                        }
                    } else {
                        Recovery {
                            time: t,
                            outcome: MediaOutcome::Ok,
                        }
                    }
                }
                FaultKind::Unrecoverable => Recovery {
                    time: self.full_ladder_ns.min(self.cap_ns),
                    outcome: MediaOutcome::Unrecovered,
                },
            };
            let worse = (this.outcome == MediaOutcome::Unrecovered, this.time)
                > (worst.outcome == MediaOutcome::Unrecovered, worst.time);
            if worse {
                worst = this;
            }
        }
        worst
    }
}

impl Faults {
    pub fn retry_ns(&self) -> Ns {
        self.retry_ns
    }
    pub fn full_ladder_ns(&self) -> Ns {
        self.full_ladder_ns
    }
    pub fn cap_ns(&self) -> Ns {
        self.cap_ns
    }
}
