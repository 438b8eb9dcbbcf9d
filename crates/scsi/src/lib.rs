//! T10 vocabulary for a block device: CDB decoding to typed commands, status, sense data,
//! VPD and mode pages, and the command table. Pure: no I/O, no clocks.

pub mod sense;
pub mod status;

pub use sense::{Asc, Sense, SenseKey};
pub use status::Status;
