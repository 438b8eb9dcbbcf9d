//! The SCSI target device: the set of logical units behind one iSCSI target node, plus the
//! target-wide commands (REPORT LUNS), addressing of absent LUNs (SPC-5 §4.4.3 / SAM-5 §4.6)
//! and the task management functions that span logical units (TARGET RESET).

use crate::logical_unit::{check, truncate};
use crate::unit::{Sink, Submitted, Unit};
use crate::{
    Arrival, Completion, CopyManager, Nexus, Ns, TaskId, TaskManagement, TmfResponse, Transfer,
};
use parking_lot::RwLock;
use scsi::command::Command;
use scsi::inquiry::{self, StandardInquiry};
use scsi::{Asc, Flags, Sense, SenseKey};
use std::collections::BTreeMap;
use std::sync::Arc;
use store::Op;

/// Logical units addressed by LUN. An operator may add and remove units while the target
/// serves ([`Target::insert`], [`Target::remove`]); a command finds its unit under a short
/// read lock.
#[derive(Default)]
pub struct Target {
    luns: RwLock<Luns>,
    /// The copy manager units added later join.
    manager: Arc<CopyManager>,
}

#[derive(Default)]
struct Luns {
    units: BTreeMap<u64, Arc<Unit>>,
    /// LUN masking: the initiators (by iSCSI name) that may see a LUN; a LUN without an entry
    /// is everyone's. To anyone else a masked LUN is absent (SPC-5 §4.4.3): REPORT LUNS leaves
    /// it out and commands get LOGICAL UNIT NOT SUPPORTED.
    masks: BTreeMap<u64, Vec<String>>,
    /// Removed units finishing the tasks they had: absent to new commands, still reached by
    /// their tasks' Data-Out, data-plane operations and I_T nexus loss.
    leaving: BTreeMap<u64, Arc<Unit>>,
}

impl Luns {
    /// The unit at `lun` as `nexus` sees it: `None` when absent or masked.
    fn visible(&self, nexus: &Nexus, lun: u64) -> Option<&Arc<Unit>> {
        let visible = self
            .masks
            .get(&lun)
            .is_none_or(|allowed| allowed.iter().any(|i| i == nexus.initiator_name()));
        self.units.get(&lun).filter(|_| visible)
    }

    /// The unit a task on `lun` runs on, present or leaving.
    fn of_task(&self, lun: u64) -> Option<Arc<Unit>> {
        self.units.get(&lun).or(self.leaving.get(&lun)).cloned()
    }

    /// Every unit that may still have tasks.
    fn all(&self) -> Vec<Arc<Unit>> {
        self.units
            .values()
            .chain(self.leaving.values())
            .cloned()
            .collect()
    }

    fn inventory_changed(&self) {
        for u in self.units.values() {
            u.with(|core| core.reported_luns_changed());
        }
    }
}

fn lun_not_supported() -> Sense {
    Sense::new(SenseKey::IllegalRequest, Asc::LOGICAL_UNIT_NOT_SUPPORTED)
}

/// Whether the target answers `cdb` itself, whichever LUN it names (the table's TARGET flag:
/// REPORT LUNS).
fn target_scope(cdb: &[u8]) -> bool {
    scsi::table::find(cdb).is_ok_and(|i| i.flags.contains(Flags::TARGET))
}

impl Target {
    /// A target serving `luns`; a later duplicate LUN replaces an earlier one. Units that
    /// belong to no copy manager yet share a new one, so EXTENDED COPY reaches every LUN of
    /// the target ([`Self::with_copy_manager`], or attaching them first, reaches further).
    pub fn new(luns: Vec<(u64, Arc<Unit>)>) -> Self {
        Self::with_copy_manager(luns, Arc::default())
    }

    /// A target whose units that belong to no copy manager yet join `manager` (one per
    /// process reaches every target's units).
    pub fn with_copy_manager(luns: Vec<(u64, Arc<Unit>)>, manager: Arc<CopyManager>) -> Self {
        for (_, unit) in &luns {
            let _joined = unit.attach(manager.clone());
        }
        Target {
            luns: RwLock::new(Luns {
                units: luns.into_iter().collect(),
                ..Luns::default()
            }),
            manager,
        }
    }

    /// The target with `lun` visible to `initiators` (iSCSI names) only.
    pub fn with_mask(self, lun: u64, initiators: Vec<String>) -> Self {
        self.luns.write().masks.insert(lun, initiators);
        self
    }

    /// The logical unit at `lun` as `nexus` sees it: `None` when absent or masked.
    fn unit(&self, nexus: &Nexus, lun: u64) -> Option<Arc<Unit>> {
        self.luns.read().visible(nexus, lun).cloned()
    }

    pub fn lun(&self, lun: u64) -> Option<Arc<Unit>> {
        self.luns.read().units.get(&lun).cloned()
    }

    /// LUNs in ascending order.
    pub fn luns(&self) -> Vec<u64> {
        self.luns.read().units.keys().copied().collect()
    }

    /// The logical units by LUN, each needing a driver on the server's clock.
    pub fn units(&self) -> Vec<(u64, Arc<Unit>)> {
        let luns = self.luns.read();
        luns.units.iter().map(|(l, u)| (*l, u.clone())).collect()
    }

    /// Adds `unit` at `lun` while the target serves, visible to `initiators` only unless that
    /// is empty; every other unit's nexuses learn of it by REPORTED LUNS DATA HAS CHANGED.
    pub fn insert(&self, lun: u64, unit: Arc<Unit>, initiators: Vec<String>) -> Result<(), String> {
        let mut luns = self.luns.write();
        if luns.units.contains_key(&lun) {
            return Err(format!("LUN {lun} exists"));
        }
        if luns.leaving.contains_key(&lun) {
            return Err(format!(
                "LUN {lun} was removed and is still finishing its tasks or closing its store"
            ));
        }
        luns.inventory_changed();
        let _joined = unit.attach(self.manager.clone());
        luns.units.insert(lun, unit);
        if !initiators.is_empty() {
            luns.masks.insert(lun, initiators);
        }
        Ok(())
    }

    /// Removes the unit at `lun` while the target serves: new commands to it get LOGICAL UNIT
    /// NOT SUPPORTED at once, the tasks it has finish ([`Self::leaving_idle`] tells when,
    /// [`Self::forget`] lets it go), and the other units' nexuses get REPORTED LUNS DATA HAS
    /// CHANGED.
    pub fn remove(&self, lun: u64) -> Option<Arc<Unit>> {
        let mut luns = self.luns.write();
        let unit = luns.units.remove(&lun)?;
        luns.masks.remove(&lun);
        unit.detach();
        luns.leaving.insert(lun, unit.clone());
        luns.inventory_changed();
        Some(unit)
    }

    /// Whether the removed unit at `lun` has no task left (none can come: commands no longer
    /// reach it).
    pub fn leaving_idle(&self, lun: u64) -> bool {
        self.luns
            .read()
            .leaving
            .get(&lun)
            .is_none_or(|u| u.with(|core| core.tasks() == 0))
    }

    /// The removed units still finishing their tasks.
    pub fn leaving(&self) -> Vec<Arc<Unit>> {
        self.luns.read().leaving.values().cloned().collect()
    }

    /// Forgets the removed unit at `lun` (its store closes once the caller's handles go); the
    /// LUN may be added again.
    pub fn forget(&self, lun: u64) {
        self.luns.write().leaving.remove(&lun);
    }

    /// Whether a removed unit at `lun` still finishes its tasks.
    pub fn is_leaving(&self, lun: u64) -> bool {
        self.luns.read().leaving.contains_key(&lun)
    }

    /// Changes who may see `lun` (empty: everyone who may log in).
    pub fn set_mask(&self, lun: u64, initiators: Vec<String>) {
        let mut luns = self.luns.write();
        if initiators.is_empty() {
            luns.masks.remove(&lun);
        } else {
            luns.masks.insert(lun, initiators);
        }
        luns.inventory_changed();
    }

    /// Who may see `lun`: empty for everyone.
    pub fn mask(&self, lun: u64) -> Vec<String> {
        self.luns
            .read()
            .masks
            .get(&lun)
            .cloned()
            .unwrap_or_default()
    }

    /// A command arrives at `now`. The target answers REPORT LUNS and commands for absent
    /// LUNs itself; everything else goes to its logical unit.
    pub fn command(
        &self,
        now: Ns,
        a: &Arrival,
        data_in: &mut Vec<u8>,
        sink: &mut dyn Sink,
    ) -> (Option<Transfer>, Submitted) {
        let unit = self.unit(a.nexus, a.lun);
        match &unit {
            Some(u) if !target_scope(a.cdb) => u.command(now, a, data_in, sink),
            _ => {
                let c = if target_scope(a.cdb) {
                    self.report_luns(a, data_in)
                } else {
                    self.absent_lun(a, data_in)
                };
                // What the CDB asks for, where the target takes it (for residuals).
                let transfer = scsi::table::find(a.cdb)
                    .ok()
                    .filter(|i| unit.is_none() || i.flags.contains(Flags::TARGET))
                    .filter(|i| i.flags.contains(Flags::NO_LUN))
                    .and_then(|i| scsi::table::decode_as(i, a.cdb).ok())
                    .map(|cmd| Transfer::of(cmd.data_length(), 0));
                (transfer, Submitted::Done(c))
            }
        }
    }

    /// All Data-Out of a task on `lun` came.
    pub fn data_out(
        &self,
        now: Ns,
        lun: u64,
        task: TaskId,
        data: &[u8],
        data_in: &mut Vec<u8>,
        sink: &mut dyn Sink,
    ) -> Submitted {
        match self.luns.read().of_task(lun) {
            Some(u) => u.data_out(now, task, data, data_in, sink),
            None => Submitted::Aborted,
        }
    }

    /// The transport could not collect a task's Data-Out: it ends with `c`.
    pub fn data_out_failed(
        &self,
        now: Ns,
        lun: u64,
        task: TaskId,
        c: Completion,
        sink: &mut dyn Sink,
    ) {
        let unit = self.luns.read().of_task(lun);
        if let Some(u) = unit {
            u.data_out_failed(now, task, c, sink);
        }
    }

    /// Runs a delivered task's data-plane operation on `lun`.
    #[allow(clippy::too_many_arguments)]
    pub fn run(
        &self,
        now: Ns,
        lun: u64,
        task: TaskId,
        op: Op,
        data_out: &[u8],
        data_in: &mut Vec<u8>,
        sink: &mut dyn Sink,
    ) -> Submitted {
        let unit = self.luns.read().of_task(lun);
        match unit {
            Some(u) => u.run(now, task, op, data_out, data_in, sink),
            None => Submitted::Aborted,
        }
    }

    /// A delivered data-plane operation of a task on `lun` that its transport will not run
    /// (the task had ended for it: [`Unit::dropped`]).
    pub fn dropped(&self, now: Ns, lun: u64, task: TaskId, sink: &mut dyn Sink) {
        let unit = self.luns.read().of_task(lun);
        if let Some(u) = unit {
            u.dropped(now, task, sink);
        }
    }

    /// Append sense data for a command on `lun` in the format the LU's Control mode page asks
    /// for (D_SENSE, SPC-5 table 457); fixed format for absent LUNs.
    pub fn encode_sense(&self, lun: u64, sense: &Sense, out: &mut Vec<u8>) {
        let unit = self.luns.read().of_task(lun);
        let descriptor = unit.is_some_and(|u| u.with(|core| core.descriptor_sense()));
        sense.write(descriptor, out);
    }

    /// REPORT LUNS (SPC-5 §6.33) works on any LUN. No administrative or well-known logical
    /// units exist, so SELECT REPORT 01h, 10h and 12h report none.
    fn report_luns(&self, a: &Arrival, data_in: &mut Vec<u8>) -> Completion {
        let (select_report, allocation_length) = match scsi::decode(a.cdb) {
            Ok((
                _,
                Command::ReportLuns {
                    select_report,
                    allocation_length,
                },
            )) => (select_report, allocation_length),
            Ok(_) => return check(Sense::invalid_command_operation_code()),
            Err(sense) => return check(sense),
        };
        if let Some(u) = self.unit(a.nexus, a.lun) {
            u.with(|core| core.register_nexus(a.nexus));
        }
        let start = data_in.len();
        let luns = self.luns.read();
        let visible = luns
            .units
            .keys()
            .copied()
            .filter(|&lun| luns.visible(a.nexus, lun).is_some());
        match select_report {
            0x00 | 0x02 | 0x11 => scsi::report_luns::report_luns(visible, data_in),
            0x01 | 0x10 | 0x12 => scsi::report_luns::report_luns(std::iter::empty(), data_in),
            _ => return check(Sense::invalid_field_in_cdb(2, None)),
        }
        truncate(data_in, start, allocation_length);
        Completion::GOOD
    }

    /// A LUN with no logical unit (SPC-5 §4.4.3): INQUIRY answers peripheral qualifier 011b,
    /// REQUEST SENSE returns LOGICAL UNIT NOT SUPPORTED as data, everything else fails with it
    /// (a NO_LUN command with an invalid CDB with that CDB's sense).
    fn absent_lun(&self, a: &Arrival, data_in: &mut Vec<u8>) -> Completion {
        let start = data_in.len();
        let Some(info) = scsi::table::find(a.cdb)
            .ok()
            .filter(|i| i.flags.contains(Flags::NO_LUN))
        else {
            return check(lun_not_supported());
        };
        match scsi::table::decode_as(info, a.cdb) {
            Ok(Command::Inquiry(i)) if !i.evpd => {
                StandardInquiry {
                    peripheral: inquiry::NO_LOGICAL_UNIT,
                    removable: false,
                    third_party_copy: false,
                    implicit_alua: false,
                    explicit_alua: false,
                    version: self
                        .luns
                        .read()
                        .units
                        .values()
                        .next()
                        .map_or(0x0D, |u| u.with(|core| core.config().inquiry_version)),
                    vendor: inquiry::ascii_field("STINT"),
                    product: inquiry::ascii_field("no such LUN"),
                    revision: inquiry::ascii_field(""),
                }
                .encode(data_in);
                truncate(data_in, start, i.allocation_length.into());
                Completion::GOOD
            }
            Ok(Command::RequestSense {
                desc,
                allocation_length,
            }) => {
                lun_not_supported().write(desc, data_in);
                truncate(data_in, start, allocation_length.into());
                Completion::GOOD
            }
            Err(sense) => check(sense),
            Ok(_) => check(lun_not_supported()),
        }
    }

    /// A task management function for `lun` from `nexus` at `now` (SAM-5 §7). The tasks it
    /// aborts are delivered to `sink` as aborted, the caller's own among them.
    pub fn task_management(
        &self,
        now: Ns,
        nexus: &Nexus,
        lun: u64,
        tmf: TaskManagement,
        sink: &mut dyn Sink,
    ) -> TmfResponse {
        if matches!(
            tmf,
            TaskManagement::TargetWarmReset | TaskManagement::TargetColdReset
        ) {
            let units = self.luns.read().all();
            for u in units {
                u.task_management(now, nexus, tmf, sink);
            }
            return TmfResponse::FunctionComplete;
        }
        match self.unit(nexus, lun) {
            Some(u) => u.task_management(now, nexus, tmf, sink),
            None => TmfResponse::IncorrectLun,
        }
    }

    /// The nexus logged out or its connection dropped (SAM-5 §6.3.4: I_T nexus loss).
    pub fn nexus_lost(&self, now: Ns, nexus: &Nexus, sink: &mut dyn Sink) {
        let units = self.luns.read().all();
        for u in units {
            u.nexus_lost(now, nexus.id, sink);
        }
    }
}
