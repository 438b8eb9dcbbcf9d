//! One T2 command duration limit descriptor (SPC-6 T2A/T2B mode pages, table "T2 descriptor").

use super::units::Ns;
use super::{CdlError, LimitKind, Policy, T2CdlUnits};

/// Encoded size of a T2 descriptor.
pub const T2_DESCRIPTOR_LEN: usize = 32;

/// A T2 descriptor (SPC-6 "T2 descriptor" table: 32 bytes; units byte 0, inactive 2–3, active 4–5,
/// policies byte 6, guideline 10–11, guideline policy byte 14).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CdlDescriptor {
    pub t2cdlunits: T2CdlUnits,
    pub max_inactive_time: u16,
    pub max_inactive_time_policy: Policy,
    pub max_active_time: u16,
    pub max_active_time_policy: Policy,
    pub command_duration_guideline: u16,
    pub command_duration_guideline_policy: Policy,
}

impl CdlDescriptor {
    /// A descriptor with only a duration guideline, in ns (expressed in the coarsest exact
    /// units); `None` if `ns` cannot be expressed.
    pub fn guideline(ns: Ns, policy: Policy) -> Option<Self> {
        let (t2cdlunits, value) = T2CdlUnits::exact(ns)?;
        Some(Self {
            t2cdlunits,
            command_duration_guideline: value,
            command_duration_guideline_policy: policy,
            ..Self::default()
        })
    }

    /// The limit of `kind` as a duration and its policy; `None` when that limit is unused.
    pub fn limit(&self, kind: LimitKind) -> Option<(Ns, Policy)> {
        let (value, policy) = match kind {
            LimitKind::Inactive => (self.max_inactive_time, self.max_inactive_time_policy),
            LimitKind::Active => (self.max_active_time, self.max_active_time_policy),
            LimitKind::Guideline => (
                self.command_duration_guideline,
                self.command_duration_guideline_policy,
            ),
        };
        self.t2cdlunits.duration(value).map(|ns| (ns, policy))
    }

    /// Whether any limit is in use.
    pub fn is_limited(&self) -> bool {
        LimitKind::ALL.iter().any(|k| self.limit(*k).is_some())
    }

    /// Checks each policy against the limit it belongs to (SPC-6 policy codes: inactive {0,D,F},
    /// active {0,D,E,F}, guideline {0,1,2,D,F}). `number` (1..=7) names it in the error.
    pub fn validate(&self, number: u8) -> Result<(), CdlError> {
        for (limit, policy) in [
            (LimitKind::Inactive, self.max_inactive_time_policy),
            (LimitKind::Active, self.max_active_time_policy),
            (LimitKind::Guideline, self.command_duration_guideline_policy),
        ] {
            if !policy.allowed_for(limit) {
                return Err(CdlError::Policy {
                    descriptor: number,
                    limit,
                    code: policy.code(),
                });
            }
        }
        Ok(())
    }

    /// Decodes and validates descriptor `number` (1..=7) from its 32 bytes. Reserved bits are
    /// ignored; BYPASS SEQUESTRATION is not supported and reads as 0.
    pub fn decode(number: u8, b: &[u8; T2_DESCRIPTOR_LEN]) -> Result<Self, CdlError> {
        let units_code = b[0] & 0x0F;
        let t2cdlunits = T2CdlUnits::from_code(units_code).ok_or(CdlError::Units {
            descriptor: number,
            code: units_code,
        })?;
        let policy = |limit: LimitKind, code: u8| {
            Policy::from_code(code)
                .filter(|p| p.allowed_for(limit))
                .ok_or(CdlError::Policy {
                    descriptor: number,
                    limit,
                    code,
                })
        };
        Ok(Self {
            t2cdlunits,
            max_inactive_time: u16::from_be_bytes([b[2], b[3]]),
            max_inactive_time_policy: policy(LimitKind::Inactive, b[6] >> 4)?,
            max_active_time: u16::from_be_bytes([b[4], b[5]]),
            max_active_time_policy: policy(LimitKind::Active, b[6] & 0x0F)?,
            command_duration_guideline: u16::from_be_bytes([b[10], b[11]]),
            command_duration_guideline_policy: policy(LimitKind::Guideline, b[14] & 0x0F)?,
        })
    }

    /// Encodes into 32 bytes (reserved bytes zero).
    pub fn encode(&self) -> [u8; T2_DESCRIPTOR_LEN] {
        let mut b = [0u8; T2_DESCRIPTOR_LEN];
        b[0] = self.t2cdlunits.code();
        b[2..4].copy_from_slice(&self.max_inactive_time.to_be_bytes());
        b[4..6].copy_from_slice(&self.max_active_time.to_be_bytes());
        b[6] = (self.max_inactive_time_policy.code() << 4) | self.max_active_time_policy.code();
        b[10..12].copy_from_slice(&self.command_duration_guideline.to_be_bytes());
        b[14] = self.command_duration_guideline_policy.code();
        b
    }
}
