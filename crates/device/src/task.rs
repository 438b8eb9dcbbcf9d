//! One task as the core keeps it: its command, decoded once at arrival, and where it is in
//! its life (SAM-5 §4.6: from arrival, through waiting for Data-Out, being held back by an
//! ORDERED task, the device queue and the data plane, to its end).

use crate::device_queue::MediumTask;
use crate::extended_copy::CopyJob;
use crate::metrics::Kind;
use crate::reservations::Prepared;
use crate::Ns;
use scsi::command::{Command, LogSense, StartStopUnit};
use scsi::mode::ModeParameters;
use scsi::CommandInfo;

pub(crate) struct Task {
    pub(crate) info: &'static CommandInfo,
    pub(crate) cmd: Command,
    pub(crate) kind: Kind,
    pub(crate) arrived: Ns,
    pub(crate) head_of_queue: bool,
    /// Its nexus may disrupt other initiators ([`crate::Nexus::privileged`]).
    pub(crate) privileged: bool,
    /// Its nexus's priority class, where the configuration gives one.
    pub(crate) class: Option<qos::Class>,
    /// Data-Out Buffer Size (SAM-5 §5.1).
    pub(crate) buffer: u32,
    /// The Data-Out bytes it takes (what the CDB asks, within the buffer), and those that
    /// came: `None` while the transport collects them.
    pub(crate) want: u32,
    pub(crate) have: Option<u32>,
    /// A parameter list kept while the task is held back (the data plane's payloads stay
    /// with the transport).
    pub(crate) params: Vec<u8>,
    pub(crate) state: State,
    /// Its media access, on a logical unit with a device queue.
    pub(crate) medium: Option<MediumTask>,
    /// The device queue started it: its store operation's end goes back to the queue.
    pub(crate) started: Option<qos::Started>,
    /// It exceeded a duration limit on its way (whatever the policy did).
    pub(crate) missed: bool,
}

/// Where a task is.
pub(crate) enum State {
    /// Entered: collecting Data-Out, or held back, or about to start.
    Entered,
    /// In the device queue.
    Queued,
    /// Started by the device queue, waiting for a write a CDL policy ended on its blocks to
    /// reach the store (`in_flight.rs`).
    Blocked,
    /// Its data-plane operation runs; `After` says what its result means.
    Io(After),
    /// Its store operation ended; the device queue has not let it go yet (the drive model's
    /// time is later).
    Serviced(Serviced),
    /// Waiting for the sanitize it started (SANITIZE without IMMED).
    Sanitizing,
}

/// A medium task's result, kept until the device queue lets it go.
pub(crate) struct Serviced {
    /// Its status, when other than GOOD without sense (kept small: most are GOOD).
    pub(crate) completion: Option<Box<crate::Completion>>,
    /// Its read data.
    pub(crate) data_in: Vec<u8>,
}

impl Serviced {
    pub(crate) fn new(c: crate::Completion, data_in: Vec<u8>) -> Self {
        Serviced {
            completion: (c != crate::Completion::GOOD).then(|| Box::new(c)),
            data_in,
        }
    }

    pub(crate) fn completion(&self) -> crate::Completion {
        self.completion
            .as_deref()
            .cloned()
            .unwrap_or(crate::Completion::GOOD)
    }
}

/// What a task does with the result of its data-plane operation.
pub(crate) enum After {
    /// A medium command: its status follows from the result (`lba` for the sense data's
    /// INFORMATION); a write then checks the provisioning thresholds when one is enabled.
    Medium { lba: Option<u64>, writes: bool },
    /// The store's usage after a write, for the provisioning thresholds.
    Thresholds,
    /// FORMAT UNIT's deallocation of the whole medium.
    Format,
    /// GET LBA STATUS's runs of the store.
    LbaStatus {
        lba: u64,
        wanted: usize,
        allocation_length: u32,
    },
    /// LOG SENSE's Logical Block Provisioning page needs the store's usage.
    LogSense(LogSense),
    /// START STOP UNIT's flush before the unit stops.
    Stop(StartStopUnit),
    /// MODE SELECT with SP = 1: the values are kept, then made current; `arm`: then the
    /// store's usage for thresholds the new values enable.
    ModeSave(Box<ModeParameters>),
    /// MODE SELECT enabled provisioning thresholds: their starting count.
    ArmThresholds,
    /// PERSISTENT RESERVE OUT with APTPL: the new state is kept, then made current.
    Reservations(Box<Prepared>),
    /// PERSISTENT RESERVE OUT where the gateways share the state: the new state is written
    /// with its version guard, then made current; on a lost race the command is prepared
    /// again on the state as it is (`attempts`: races lost to other gateways so far), so it
    /// needs its CDB and parameters.
    SharedReservations {
        prepared: Box<Prepared>,
        cmd: scsi::command::PersistentReserveOut,
        list: Vec<u8>,
        attempts: u32,
    },
    /// MODE SELECT where the gateways share the values: their copy is written with its
    /// version guard, then they become current; on a lost race the list is checked again.
    SharedMode(Box<crate::mode_state::SharedSelect>),
    /// RESERVE (`reserve`) or RELEASE (6)/(10) where the gateways share the state: the new
    /// holder is written with its version guard, then made current; on a lost race the
    /// command runs again on the state as it is (`attempts`: races lost to other gateways).
    SharedReserve {
        reserve: bool,
        holder: Option<crate::reservations::Spc2Holder>,
        attempts: u32,
    },
    /// A chunk of a third-party copy, moving `blocks` destination blocks.
    Copy(Box<CopyJob>, u64),
    /// SET TARGET PORT GROUPS: the data plane kept the choice of this group as the preferred
    /// gateway.
    Prefer(u16),
}

impl Task {
    /// The Data-Out it has, once all of it came.
    pub(crate) fn data_out_len(&self) -> u32 {
        self.have.unwrap_or(0)
    }
}
