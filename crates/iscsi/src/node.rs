//! iSCSI target nodes (RFC 7143 §4.2.7): a name, an optional alias, the SCSI target device
//! behind it and the initiators allowed to log in.

use std::sync::Arc;

use device::{
    Completion, Finished, LogicalUnit, Nexus, Ns, Request, Submitted, TaskManagement, TmfResponse,
    Transfer,
};
use scsi::Sense;

/// What the iSCSI layer needs from the SCSI target device behind a node: the
/// `device::Target` contract, as a trait so tests can stand in a small fake that runs every
/// command at once (only `transfer` and `execute` are required).
pub trait ScsiTarget: Send + Sync {
    /// Direction and length `cdb` from `nexus` asks for, or the sense to fail it with before
    /// data moves.
    fn transfer(&self, nexus: &Nexus, lun: u64, cdb: &[u8]) -> Result<Transfer, Sense>;
    /// Execute one command inline; read data is appended to `data_in`.
    fn execute(&self, req: &Request, data_in: &mut Vec<u8>) -> Completion;
    /// A command arrives at `now`: it completes at once or enters its LU's task set, and a
    /// [`Finished`] for it later comes out of [`Self::advance`] (here or on the LU's clock).
    fn submit(&self, _now: Ns, req: &Request, data_in: &mut Vec<u8>) -> Submitted {
        Submitted::Done(self.execute(req, data_in))
    }
    /// Everything due on `lun` up to `now`, for any nexus.
    fn advance(&self, _now: Ns, _lun: u64, _out: &mut Vec<Finished>) {}
    /// Moves a finished task's data and gives its status.
    fn complete(
        &self,
        _lun: u64,
        _f: &Finished,
        req: &Request,
        data_in: &mut Vec<u8>,
    ) -> Completion {
        self.execute(req, data_in)
    }
    fn task_management(
        &self,
        _now: Ns,
        _nexus: &Nexus,
        _lun: u64,
        _tmf: TaskManagement,
    ) -> TmfResponse {
        TmfResponse::FunctionComplete
    }
    /// Append `sense` for a command on `lun` in the format the LU uses (fixed unless its
    /// Control mode page sets D_SENSE, SPC-5 table 457).
    fn encode_sense(&self, _lun: u64, sense: &Sense, out: &mut Vec<u8>) {
        sense.write_fixed(out);
    }
    /// Logout or connection loss (SAM-5 §6.3.4).
    fn nexus_lost(&self, _now: Ns, _nexus: &Nexus) {}
    /// The logical units with a device queue: each needs a real-time clock driving it.
    fn clocked_units(&self) -> Vec<Arc<LogicalUnit>> {
        Vec::new()
    }
}

impl ScsiTarget for device::Target {
    fn transfer(&self, nexus: &Nexus, lun: u64, cdb: &[u8]) -> Result<Transfer, Sense> {
        device::Target::transfer(self, nexus, lun, cdb)
    }

    fn execute(&self, req: &Request, data_in: &mut Vec<u8>) -> Completion {
        device::Target::execute(self, req, data_in)
    }

    fn submit(&self, now: Ns, req: &Request, data_in: &mut Vec<u8>) -> Submitted {
        device::Target::submit(self, now, req, data_in)
    }

    fn advance(&self, now: Ns, lun: u64, out: &mut Vec<Finished>) {
        if let Some(lu) = self.lun(lun) {
            lu.advance(now, out);
        }
    }

    fn complete(&self, lun: u64, f: &Finished, req: &Request, data_in: &mut Vec<u8>) -> Completion {
        match self.lun(lun) {
            Some(lu) => lu.complete(f, req, data_in),
            None => device::Target::execute(self, req, data_in),
        }
    }

    fn task_management(
        &self,
        now: Ns,
        nexus: &Nexus,
        lun: u64,
        tmf: TaskManagement,
    ) -> TmfResponse {
        device::Target::task_management(self, now, nexus, lun, tmf)
    }

    fn encode_sense(&self, lun: u64, sense: &Sense, out: &mut Vec<u8>) {
        device::Target::encode_sense(self, lun, sense, out)
    }

    fn nexus_lost(&self, now: Ns, nexus: &Nexus) {
        device::Target::nexus_lost(self, now, nexus)
    }

    fn clocked_units(&self) -> Vec<Arc<LogicalUnit>> {
        self.luns().filter_map(|l| self.lun(l).cloned()).collect()
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
    /// Priority class of every command of an initiator (by name) on logical units with a
    /// device queue, as NVMe weighted round robin gives each submission queue a class.
    pub initiator_classes: Vec<(String, qos::Class)>,
    /// CHAP that initiators must pass to log in (RFC 7143 §12.1.3); `None`: no authentication.
    pub chap: Option<crate::chap::Chap>,
    /// Initiator names whose sessions may run disruptive operations (see
    /// [`device::Nexus::privileged`]; TARGET WARM and COLD RESET); `"*"` grants every
    /// initiator that may log in.
    pub privileged_initiators: Vec<String>,
}

impl TargetNode {
    /// Whether `initiator` may log in (and see this node in SendTargets).
    pub fn allows(&self, initiator: &str) -> bool {
        self.allowed_initiators.is_empty() || self.allowed_initiators.iter().any(|i| i == initiator)
    }

    /// Whether `initiator`'s sessions may run disruptive operations.
    pub fn privileged(&self, initiator: &str) -> bool {
        self.privileged_initiators
            .iter()
            .any(|i| i == "*" || i == initiator)
    }
}

impl std::fmt::Debug for TargetNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TargetNode")
            .field("name", &self.name)
            .field("alias", &self.alias)
            .field("allowed_initiators", &self.allowed_initiators)
            .field("initiator_classes", &self.initiator_classes)
            .field("chap", &self.chap)
            .field("privileged_initiators", &self.privileged_initiators)
            .finish()
    }
}
