//! Why an operator's resize of a logical unit (`stint ctl lun resize`, issue 22) was refused.
//! [`crate::Unit::resize`] does the resize; this is what it answers when it cannot.

use std::fmt;
use std::io;

/// A refused resize: nothing changed, except after a shrink the store refused or failed
/// ([`ResizeError::Store`]): the capacity is back to what the store holds, with a second
/// CAPACITY DATA HAS CHANGED.
#[derive(Debug)]
pub enum ResizeError {
    /// The unit follows a drive model, whose geometry sets its capacity.
    Modelled,
    /// Another resize of the unit is under way.
    InProgress,
    /// A SANITIZE is working through the medium as it was when it started (SBC-4 §4.11): it
    /// would miss grown blocks, or fail past a cut end.
    Sanitizing,
    /// A capacity of no logical block (READ CAPACITY reports the last LBA, SBC-4 §5.20.2).
    Zero,
    /// Not a whole number of logical blocks: a part-block is not addressable.
    NotWholeBlocks { bytes: u64, block_size: u32 },
    /// Smaller than now without the operator's consent.
    Shrink { from: u64, to: u64 },
    /// The medium, re-read, holds less than one logical block.
    BelowOneBlock { bytes: u64, block_size: u32 },
    /// The store refused or failed (`Unsupported` where its size cannot change).
    Store(io::Error),
}

impl fmt::Display for ResizeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResizeError::Modelled => f.write_str("a drive model fixes this LUN's capacity"),
            ResizeError::InProgress => {
                f.write_str("another resize of this LUN is in progress; retry when it ends")
            }
            ResizeError::Sanitizing => {
                f.write_str("a SANITIZE is in progress on this LUN; resize after it ends")
            }
            ResizeError::Zero => f.write_str("a LUN cannot be 0 bytes"),
            ResizeError::NotWholeBlocks { bytes, block_size } => write!(
                f,
                "{bytes} bytes is not a whole number of the LUN's {block_size}-byte blocks"
            ),
            ResizeError::Shrink { from, to } => write!(
                f,
                "{to} bytes is smaller than the LUN's {from}: shrinking loses the data beyond \
                 the new end; pass --shrink"
            ),
            ResizeError::BelowOneBlock { bytes, block_size } => write!(
                f,
                "the store now holds {bytes} bytes, less than one {block_size}-byte block"
            ),
            ResizeError::Store(e) => write!(f, "the store: {e}"),
        }
    }
}

impl std::error::Error for ResizeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ResizeError::Store(e) => Some(e),
            _ => None,
        }
    }
}
