//! The SCSI target device: the set of logical units behind one iSCSI target node, plus the
//! target-wide commands (REPORT LUNS) and addressing of absent LUNs (SPC-5 §4.4.3 / SAM-5 §4.6).

use crate::{Completion, Nexus, Request, TaskManagement, TmfResponse, Transfer};
use scsi::{Asc, Sense, SenseKey};

/// Logical units addressed by LUN.
#[derive(Default)]
pub struct Target {}

impl Target {
    /// Direction and length `cdb` asks for, or the sense to fail it with before any data moves.
    pub fn transfer(&self, _lun: u64, _cdb: &[u8]) -> Result<Transfer, Sense> {
        Ok(Transfer::None)
    }

    /// Execute one command. Read data is appended to `data_in` (which the caller cleared).
    pub fn execute(&self, _req: &Request, _data_in: &mut Vec<u8>) -> Completion {
        Completion::check_condition(Sense::new(SenseKey::IllegalRequest, Asc::INVALID_COMMAND_OPERATION_CODE))
    }

    /// A task management function for `lun` from `nexus`.
    pub fn task_management(&self, _nexus: &Nexus, _lun: u64, _tmf: TaskManagement) -> TmfResponse {
        TmfResponse::FunctionComplete
    }

    /// The nexus logged out or its connection dropped (SAM-5 §6.3.4: I_T nexus loss).
    pub fn nexus_lost(&self, _nexus: &Nexus) {}
}
