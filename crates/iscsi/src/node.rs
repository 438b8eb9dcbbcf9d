//! iSCSI target nodes (RFC 7143 §4.2.7): a name, an optional alias, the SCSI target device
//! behind it and the initiators allowed to log in.

use std::sync::Arc;

use device::{Completion, Nexus, Request, TaskManagement, TmfResponse, Transfer};
use scsi::Sense;

/// What the iSCSI layer needs from the SCSI target device behind a node: the
/// `device::Target` contract, as a trait so tests can stand in a small fake.
pub trait ScsiTarget: Send + Sync {
    /// Direction and length `cdb` asks for, or the sense to fail it with before data moves.
    fn transfer(&self, lun: u64, cdb: &[u8]) -> Result<Transfer, Sense>;
    /// Execute one command inline; read data is appended to `data_in`.
    fn execute(&self, req: &Request, data_in: &mut Vec<u8>) -> Completion;
    fn task_management(&self, nexus: &Nexus, lun: u64, tmf: TaskManagement) -> TmfResponse;
    /// Append `sense` for a command on `lun` in the format the LU uses (fixed unless its
    /// Control mode page sets D_SENSE, SPC-5 table 457).
    fn encode_sense(&self, _lun: u64, sense: &Sense, out: &mut Vec<u8>) {
        sense.write_fixed(out);
    }
    /// Logout or connection loss (SAM-5 §6.3.4).
    fn nexus_lost(&self, nexus: &Nexus);
}

impl ScsiTarget for device::Target {
    fn transfer(&self, lun: u64, cdb: &[u8]) -> Result<Transfer, Sense> {
        device::Target::transfer(self, lun, cdb)
    }

    fn execute(&self, req: &Request, data_in: &mut Vec<u8>) -> Completion {
        device::Target::execute(self, req, data_in)
    }

    fn task_management(&self, nexus: &Nexus, lun: u64, tmf: TaskManagement) -> TmfResponse {
        device::Target::task_management(self, nexus, lun, tmf)
    }

    fn encode_sense(&self, lun: u64, sense: &Sense, out: &mut Vec<u8>) {
        device::Target::encode_sense(self, lun, sense, out)
    }

    fn nexus_lost(&self, nexus: &Nexus) {
        device::Target::nexus_lost(self, nexus)
    }
}

/// One iSCSI target node served on a portal.
#[derive(Clone)]
pub struct TargetNode {
    /// iSCSI name (iqn./eui./naa. form, RFC 7143 §4.2.7.1).
    pub name: String,
    /// TargetAlias (RFC 7143 §13.6), declared at login when set.
    pub alias: Option<String>,
    /// The SCSI target device (normally `Arc<device::Target>`, which coerces).
    pub target: Arc<dyn ScsiTarget>,
    /// Initiator names allowed to open a Normal session; empty allows any.
    pub allowed_initiators: Vec<String>,
}

impl TargetNode {
    /// Whether `initiator` may log in (and see this node in SendTargets).
    pub fn allows(&self, initiator: &str) -> bool {
        self.allowed_initiators.is_empty() || self.allowed_initiators.iter().any(|i| i == initiator)
    }
}

impl std::fmt::Debug for TargetNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TargetNode")
            .field("name", &self.name)
            .field("alias", &self.alias)
            .field("allowed_initiators", &self.allowed_initiators)
            .finish()
    }
}
