//! T10 vocabulary for a block device: CDB decoding to typed commands and encoding back
//! ([`Command::emit`] in a [`form`]), status, sense data both ways, VPD and mode pages, and the
//! command table. Pure: no I/O, no clocks.

pub mod alua;
mod cdb;
pub mod cdl;
pub mod command;
mod decode;
pub mod encode;
pub mod form;
pub mod inquiry;
pub mod log;
pub mod mode;
pub mod persistent_reserve;
pub mod provisioning;
pub mod report_luns;
pub mod rsoc;
pub mod sanitize;
pub mod sense;
pub mod status;
pub mod table;
pub mod third_party_copy;
pub mod timestamp;

pub use command::Command;
pub use sense::{Asc, Sense, SenseKey};
pub use status::Status;
pub use table::{decode, CommandInfo, Direction, Flags, COMMANDS};
