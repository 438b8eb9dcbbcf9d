//! Command Duration Limits pages and policies: the T10 vocabulary lives in [`scsi::cdl`]
//! (SPC-6 mode pages); the queue applies it.

pub use scsi::cdl::*;
