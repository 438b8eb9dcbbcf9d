//! iSCSI target nodes (RFC 7143 §4.2.7): a name, an optional alias, the SCSI target device
//! behind it and the initiators allowed to log in.

use std::sync::Arc;

use device::Op;
use device::{
    Arrival, Completion, Nexus, Ns, Sink, Submitted, TaskId, TaskManagement, TmfResponse, Transfer,
    Unit,
};
use scsi::Sense;

/// What the iSCSI layer needs from the SCSI target device behind a node: the
/// `device::Target` contract, as a trait so tests can stand in a small fake that answers
/// every command at once (only `command` is required).
pub trait ScsiTarget: Send + Sync {
    /// A command arrives at `now`: what its CDB asks to transfer (`None` when it was refused
    /// before that counted), and what became of it. What it does to other tasks goes to
    /// `sink`.
    fn command(
        &self,
        now: Ns,
        a: &Arrival,
        data_in: &mut Vec<u8>,
        sink: &mut dyn Sink,
    ) -> (Option<Transfer>, Submitted);
    /// All Data-Out of a task on `lun` that asked for it came.
    fn data_out(
        &self,
        _now: Ns,
        _lun: u64,
        _task: TaskId,
        _data: &[u8],
        _data_in: &mut Vec<u8>,
        _sink: &mut dyn Sink,
    ) -> Submitted {
        Submitted::Aborted
    }
    /// The transport could not collect a task's Data-Out: it ends with `c`.
    fn data_out_failed(
        &self,
        _now: Ns,
        _lun: u64,
        _task: TaskId,
        _c: Completion,
        _sink: &mut dyn Sink,
    ) {
    }
    /// Runs a delivered task's data-plane operation with its buffers.
    #[allow(clippy::too_many_arguments)]
    fn run(
        &self,
        _now: Ns,
        _lun: u64,
        _task: TaskId,
        _op: Op,
        _data_out: &[u8],
        _data_in: &mut Vec<u8>,
        _sink: &mut dyn Sink,
    ) -> Submitted {
        Submitted::Aborted
    }
    /// A delivered task's data-plane operation its transport will not run (the task had
    /// ended for it).
    fn dropped(&self, _now: Ns, _lun: u64, _task: TaskId, _sink: &mut dyn Sink) {}
    fn task_management(
        &self,
        _now: Ns,
        _nexus: &Nexus,
        _lun: u64,
        _tmf: TaskManagement,
        _sink: &mut dyn Sink,
    ) -> TmfResponse {
        TmfResponse::FunctionComplete
    }
    /// Append `sense` for a command on `lun` in the format the LU uses (fixed unless its
    /// Control mode page sets D_SENSE, SPC-5 table 457).
    fn encode_sense(&self, _lun: u64, sense: &Sense, out: &mut Vec<u8>) {
        sense.write_fixed(out);
    }
    /// Logout or connection loss (SAM-5 §6.3.4).
    fn nexus_lost(&self, _now: Ns, _nexus: &Nexus, _sink: &mut dyn Sink) {}
    /// The logical units, by LUN: each needs a driver on the server's clock.
    fn units(&self) -> Vec<(u64, Arc<Unit>)> {
        Vec::new()
    }
}

impl ScsiTarget for device::Target {
    fn command(
        &self,
        now: Ns,
        a: &Arrival,
        data_in: &mut Vec<u8>,
        sink: &mut dyn Sink,
    ) -> (Option<Transfer>, Submitted) {
        device::Target::command(self, now, a, data_in, sink)
    }

    fn data_out(
        &self,
        now: Ns,
        lun: u64,
        task: TaskId,
        data: &[u8],
        data_in: &mut Vec<u8>,
        sink: &mut dyn Sink,
    ) -> Submitted {
        device::Target::data_out(self, now, lun, task, data, data_in, sink)
    }

    fn data_out_failed(&self, now: Ns, lun: u64, task: TaskId, c: Completion, sink: &mut dyn Sink) {
        device::Target::data_out_failed(self, now, lun, task, c, sink)
    }

    fn run(
        &self,
        now: Ns,
        lun: u64,
        task: TaskId,
        op: Op,
        data_out: &[u8],
        data_in: &mut Vec<u8>,
        sink: &mut dyn Sink,
    ) -> Submitted {
        device::Target::run(self, now, lun, task, op, data_out, data_in, sink)
    }

    fn dropped(&self, now: Ns, lun: u64, task: TaskId, sink: &mut dyn Sink) {
        device::Target::dropped(self, now, lun, task, sink)
    }

    fn task_management(
        &self,
        now: Ns,
        nexus: &Nexus,
        lun: u64,
        tmf: TaskManagement,
        sink: &mut dyn Sink,
    ) -> TmfResponse {
        device::Target::task_management(self, now, nexus, lun, tmf, sink)
    }

    fn encode_sense(&self, lun: u64, sense: &Sense, out: &mut Vec<u8>) {
        device::Target::encode_sense(self, lun, sense, out)
    }

    fn nexus_lost(&self, now: Ns, nexus: &Nexus, sink: &mut dyn Sink) {
        device::Target::nexus_lost(self, now, nexus, sink)
    }

    fn units(&self) -> Vec<(u64, Arc<Unit>)> {
        device::Target::units(self)
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
    /// Removed from the configuration while serving: no new logins, absent from SendTargets
    /// (its index stays, see [`crate::Portal::update_nodes`]).
    pub retired: bool,
    /// Every gateway's portal when several servers export the node (docs/gateways.md),
    /// this server's own included; empty for a lone server.
    pub gateways: Vec<GatewayPortal>,
}

/// One gateway's network portal and its portal group (RFC 7143 §4.4.1): each gateway is a
/// portal group of its own, so that no session spans two of them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GatewayPortal {
    /// "address:port", as SendTargets' TargetAddress gives it.
    pub address: String,
    pub portal_group_tag: u16,
    /// Whether it is this server's.
    pub own: bool,
}

impl TargetNode {
    /// The portal group tag this server declares for the node: its gateway's, else the
    /// portal's `default`.
    pub fn portal_group_tag(&self, default: u16) -> u16 {
        self.gateways
            .iter()
            .find(|g| g.own)
            .map_or(default, |g| g.portal_group_tag)
    }

    /// Whether `initiator` may log in (and see this node in SendTargets).
    pub fn allows(&self, initiator: &str) -> bool {
        !self.retired
            && (self.allowed_initiators.is_empty()
                || self.allowed_initiators.iter().any(|i| i == initiator))
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
            .field("retired", &self.retired)
            .finish()
    }
}
