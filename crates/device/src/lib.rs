//! The logical unit: the SCSI block command set (SPC-5/SBC-4) over a store.
//!
//! The device never reads a clock and never talks to the network: a transport (iSCSI) hands it
//! a [`Request`] and gets a [`Completion`] back, with read data appended to a buffer the
//! transport owns (so data is copied once, store → that buffer → socket).

mod block;
mod config;
mod identity;
mod logical_unit;
mod target;
mod unit_attention;

pub use config::{ConfigError, LuConfig};
pub use logical_unit::LogicalUnit;
pub use target::Target;

use scsi::{Sense, Status};

/// An I_T nexus (SAM-5 §4.7.4): one initiator port attached to this target port.
/// Unit attentions and reservations are kept per nexus.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Nexus {
    /// Unique for the life of the process; never reused.
    pub id: u64,
    /// The initiator port name, e.g. `iqn.1994-05.com.example:host,i,0x00023d000001`
    /// (RFC 7143 §4.2.7.1: initiator name + ",i,0x" + ISID).
    pub initiator_port: String,
}

/// Task attribute (SAM-5 §8.6), from the iSCSI ATTR field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TaskAttribute {
    #[default]
    Simple,
    Ordered,
    HeadOfQueue,
    Aca,
}

/// One SCSI command as the device receives it.
#[derive(Debug)]
pub struct Request<'a> {
    pub nexus: &'a Nexus,
    pub lun: u64,
    pub cdb: &'a [u8],
    pub attribute: TaskAttribute,
    /// Data-Out bytes the initiator sent (at most the expected data transfer length).
    pub data_out: &'a [u8],
}

/// How a command ended. Read data is in the caller's `data_in` buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Completion {
    pub status: Status,
    /// Sense data (CHECK CONDITION; or GOOD with sense for CDL policy Dh).
    pub sense: Option<Sense>,
}

impl Completion {
    pub const GOOD: Completion = Completion {
        status: Status::Good,
        sense: None,
    };

    pub fn check_condition(sense: Sense) -> Self {
        Completion {
            status: Status::CheckCondition,
            sense: Some(sense),
        }
    }
}

/// Data direction and length the CDB asks for, decoded from the command table; the transport
/// uses it to solicit Data-Out (R2T) and to compute residuals (RFC 7143 §11.4.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transfer {
    None,
    /// The device will return up to this many bytes.
    In(u32),
    /// The device needs exactly this many bytes from the initiator.
    Out(u32),
}

/// Task management functions (SAM-5 §7; RFC 7143 §11.5.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskManagement {
    AbortTask,
    AbortTaskSet,
    ClearAca,
    ClearTaskSet,
    LogicalUnitReset,
    TargetWarmReset,
    TargetColdReset,
}

/// Task management service responses (SAM-5 §7.11).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TmfResponse {
    FunctionComplete,
    FunctionRejected,
    IncorrectLun,
}
