//! The logical unit: the SCSI block command set (SPC-5/SBC-4) and the whole SAM task lifecycle,
//! as a sans-I/O core.
//!
//! [`LogicalUnit`] never reads a clock, never does I/O and takes no lock: every call takes
//! `&mut self` and the time, and answers with what happens next for the task it was about
//! ([`Step`]) and, for other tasks, [`Event`]s that [`LogicalUnit::poll_event`] yields. Store
//! I/O is asked for as data-plane operations ([`store::Op`]) whose results come back with
//! [`LogicalUnit::io_done`]; [`LogicalUnit::poll_timeout`] says when it next needs the time.
//!
//! [`Unit`] is one logical unit as a server shares it: the core behind a lock that never
//! covers a data copy or a store call, and its data plane. [`Target`] is the SCSI target
//! device: the LUN map, REPORT LUNS, absent LUNs, task management across logical units.

mod alua;
mod aptpl;
mod block;
mod config;
mod copy_manager;
mod device_queue;
mod event;
mod execute;
mod extended_copy;
mod identity;
mod in_flight;
pub mod latency;
mod logical_unit;
mod lost_race;
pub mod metrics;
mod mode_select;
mod mode_state;
mod peer_event;
mod persistent_reservation;
mod precheck;
mod provisioning;
mod read_write_long;
mod reservations;
mod reserve_release;
mod resize;
mod rod_token;
mod sanitize;
mod saved_mode;
mod target;
mod task;
mod task_set;
mod timestamp;
mod unit;
mod unit_attention;

pub use config::{ConfigError, LuConfig, PortGroups};
pub use copy_manager::CopyManager;
pub use device_queue::{DeviceQueue, DhCompletion};
pub use drive::Ns;
pub use event::{Arrived, Event, Step, TaskId, Then};
pub use logical_unit::{Backing, Kept, LogicalUnit};
pub use metrics::Metrics;
pub use peer_event::{PeerEvent, SharedStates};
pub use resize::ResizeError;
/// The data plane's vocabulary, as the transport meets it.
pub use store::{Complete, Done, Op};
pub use target::Target;
pub use unit::{backing, Finished, Next, Sink, Submitted, Unit};

use scsi::{Sense, Status};

/// The target port group of a lone server (SPC-4 §5.16), which names its one target port
/// too: stint serves a target through one portal group, whose tag (1) names the group.
pub const TARGET_PORT_GROUP: u16 = 1;

/// An I_T nexus (SAM-5 §4.7.4): one initiator port attached to this target port.
/// Unit attentions and reservations are kept per nexus.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Nexus {
    /// Unique for the life of the process; never reused.
    pub id: u64,
    /// The initiator port name, e.g. `iqn.1994-05.com.example:host,i,0x00023d000001`
    /// (RFC 7143 §4.2.7.1: initiator name + ",i,0x" + ISID).
    pub initiator_port: String,
    /// The priority class of every command of this nexus on a logical unit with a device
    /// queue, where configured for its initiator (like an NVMe submission queue's class);
    /// `None`: the command's DLD decides.
    pub class: Option<qos::Class>,
    /// May change what every other initiator relies on: STOP or eject the medium (START
    /// STOP UNIT), switch the write cache or software write protect (MODE SELECT of WCE or
    /// SWP); the transport adds TARGET WARM and COLD RESET. Granted per initiator by the
    /// target's configuration; others get ACCESS DENIED - NO ACCESS RIGHTS.
    pub privileged: bool,
}

impl Nexus {
    /// The initiator's iSCSI name: the initiator port name up to ",i,0x" (RFC 7143 §4.2.7.1).
    pub fn initiator_name(&self) -> &str {
        self.initiator_port
            .split_once(",i,")
            .map_or(self.initiator_port.as_str(), |(name, _)| name)
    }
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

/// One SCSI command as it arrives (SAM-5 §5.1, Execute Command): the nexus, LUN, tag, CDB,
/// task attribute, the buffer sizes the initiator set aside, and the Data-Out that came with
/// the command (iSCSI immediate data; the rest is asked for with [`Step::DataOut`]).
#[derive(Debug)]
pub struct Arrival<'a> {
    pub nexus: &'a Nexus,
    pub lun: u64,
    /// The task tag (SAM-5 §4.8: with the nexus and LUN it names the task; iSCSI's ITT).
    pub tag: u64,
    pub cdb: &'a [u8],
    pub attribute: TaskAttribute,
    /// Data-Out Buffer Size (SAM-5 §5.1): the bytes the initiator set aside for the
    /// command's Data-Out (iSCSI's Expected Data Transfer Length of a write), which may differ
    /// from what the CDB asks; commands whose Data-Out has a fixed size check it.
    pub data_out_buffer_size: u32,
    /// The Data-Out bytes sent with the command (at most `data_out_buffer_size`).
    pub data_out: &'a [u8],
}

/// How a command ended. Read data travels beside it, in the transport's buffer.
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
/// uses it to compute residuals (RFC 7143 §11.4.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transfer {
    None,
    /// The device will return up to this many bytes.
    In(u32),
    /// The device needs exactly this many bytes from the initiator.
    Out(u32),
}

impl Transfer {
    /// What a command's data length comes to on a logical unit with `block_size`-byte blocks.
    pub fn of(length: scsi::command::DataLength, block_size: u32) -> Transfer {
        use scsi::command::DataLength;
        match length {
            DataLength::None => Transfer::None,
            DataLength::InBytes(n) => Transfer::In(n),
            DataLength::OutBytes(n) => Transfer::Out(n),
            DataLength::InBlocks(b) => Transfer::In(b.saturating_mul(block_size)),
            DataLength::OutBlocks(b) => Transfer::Out(b.saturating_mul(block_size)),
        }
    }
}

/// Task management functions (SAM-5 §7; RFC 7143 §11.5.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskManagement {
    /// ABORT TASK of the task with this tag.
    AbortTask(u64),
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
    /// ABORT TASK found no such task in the task set.
    NoSuchTask,
    FunctionRejected,
    IncorrectLun,
}
