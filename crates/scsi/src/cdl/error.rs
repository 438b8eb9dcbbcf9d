//! Why a CDL page or descriptor was refused, with the byte/bit it concerns so MODE SELECT can
//! answer ILLEGAL REQUEST / INVALID FIELD IN PARAMETER LIST with a field pointer (SPC-5 §4.4.2.3).

use super::LimitKind;
use std::fmt;

/// A refused T2A/T2B page (SPC-6 T2A/T2B mode pages). Descriptors are numbered 1..=7.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CdlError {
    /// The page is not 232 bytes long.
    Length { len: usize },
    /// Byte 0 is not 4Ah (SPF=1, page 0Ah; PS ignored).
    PageCode { found: u8 },
    /// Byte 1 is not the expected subpage (07h T2A, 08h T2B).
    Subpage { expected: u8, found: u8 },
    /// Bytes 2–3 are not 00E4h.
    PageLength { found: u16 },
    /// T2A byte 7 bits 7:4 above Ch (reserved).
    PerfVsDurationGuideline { code: u8 },
    /// A reserved T2CDLUNITS code.
    Units { descriptor: u8, code: u8 },
    /// A policy code that is reserved or not allowed for that limit.
    Policy {
        descriptor: u8,
        limit: LimitKind,
        code: u8,
    },
}

impl CdlError {
    /// (byte, bit) of the offending field, relative to the first byte of the page; the bit is
    /// the most significant bit of the field.
    pub fn field_pointer(&self) -> Option<(usize, u8)> {
        let desc = |n: u8| 8 + 32 * usize::from(n.saturating_sub(1));
        match *self {
            Self::Length { .. } => None,
            Self::PageCode { .. } => Some((0, 7)),
            Self::Subpage { .. } => Some((1, 7)),
            Self::PageLength { .. } => Some((2, 7)),
            Self::PerfVsDurationGuideline { .. } => Some((7, 7)),
            Self::Units { descriptor, .. } => Some((desc(descriptor), 3)),
            Self::Policy {
                descriptor,
                limit: LimitKind::Inactive,
                ..
            } => Some((desc(descriptor) + 6, 7)),
            Self::Policy {
                descriptor,
                limit: LimitKind::Active,
                ..
            } => Some((desc(descriptor) + 6, 3)),
            Self::Policy {
                descriptor,
                limit: LimitKind::Guideline,
                ..
            } => Some((desc(descriptor) + 14, 3)),
        }
    }
}

impl fmt::Display for CdlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Length { len } => write!(f, "CDL T2 page is {len} bytes, expected 232"),
            Self::PageCode { found } => {
                write!(
                    f,
                    "CDL T2 page byte 0 is {found:02X}h, expected 4Ah (SPF=1, page 0Ah)"
                )
            }
            Self::Subpage { expected, found } => {
                write!(
                    f,
                    "CDL page subpage is {found:02X}h, expected {expected:02X}h"
                )
            }
            Self::PageLength { found } => {
                write!(f, "CDL T2 page length is {found:04X}h, expected 00E4h")
            }
            Self::PerfVsDurationGuideline { code } => {
                write!(
                    f,
                    "perf_vs_duration_guideline code {code:X}h is reserved (0h..Ch)"
                )
            }
            Self::Units { descriptor, code } => {
                write!(f, "descriptor {descriptor}: t2cdlunits {code:X}h is reserved (0h, 6h, 8h, Ah, Eh)")
            }
            Self::Policy {
                descriptor,
                limit,
                code,
            } => {
                let (field, allowed) = match limit {
                    LimitKind::Inactive => ("max_inactive_time_policy", "0h, Dh, Fh"),
                    LimitKind::Active => ("max_active_time_policy", "0h, Dh, Eh, Fh"),
                    LimitKind::Guideline => {
                        ("command_duration_guideline_policy", "0h, 1h, 2h, Dh, Fh")
                    }
                };
                write!(
                    f,
                    "descriptor {descriptor}: {field} {code:X}h not allowed ({allowed})"
                )
            }
        }
    }
}

impl std::error::Error for CdlError {}
