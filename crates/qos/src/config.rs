//! Queue configuration and its validation.

use crate::admission::Admission;
use crate::arbitration::Arbitration;
use crate::cdl::{CdlError, CdlPages};
use std::fmt;

/// Largest device queue depth accepted (issue 3: 1..256).
pub const MAX_DEPTH: usize = 256;

/// How a [`crate::Queue`] is set up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueConfig {
    /// Device queue depth: commands fetched by the device, queued plus in service (1..=256;
    /// 32 = SATA NCQ).
    pub depth: usize,
    pub arbitration: Arbitration,
    pub admission: Admission,
    /// Initial T2A/T2B pages.
    pub cdl: CdlPages,
}

impl Default for QueueConfig {
    fn default() -> Self {
        Self {
            depth: 32,
            arbitration: Arbitration::default(),
            admission: Admission::default(),
            cdl: CdlPages::default(),
        }
    }
}

impl QueueConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(1..=MAX_DEPTH).contains(&self.depth) {
            return Err(ConfigError::Depth(self.depth));
        }
        if let Arbitration::WeightedRoundRobin { weights, burst } = self.arbitration {
            for (level, weight) in ["high", "medium", "low"].into_iter().zip(weights) {
                if !(1..=256).contains(&weight) {
                    return Err(ConfigError::Weight { level, weight });
                }
            }
            if burst == 0 {
                return Err(ConfigError::Burst);
            }
        }
        self.cdl.validate().map_err(ConfigError::Cdl)
    }
}

/// A refused [`QueueConfig`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigError {
    /// `depth` outside 1..=256.
    Depth(usize),
    /// A WRR weight outside 1..=256.
    Weight {
        level: &'static str,
        weight: u32,
    },
    /// A WRR arbitration burst of 0.
    Burst,
    Cdl(CdlError),
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Depth(d) => write!(f, "depth {d} out of range 1..={MAX_DEPTH}"),
            Self::Weight { level, weight } => {
                write!(f, "weights.{level} {weight} out of range 1..=256")
            }
            Self::Burst => write!(f, "burst must be at least 1"),
            Self::Cdl(e) => write!(f, "cdl: {e}"),
        }
    }
}

impl std::error::Error for ConfigError {}
