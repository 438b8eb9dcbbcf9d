//! The SCSI target device: the set of logical units behind one iSCSI target node, plus the
//! target-wide commands (REPORT LUNS) and addressing of absent LUNs (SPC-5 §4.4.3 / SAM-5 §4.6).

use crate::logical_unit::{check, truncate, LogicalUnit};
use crate::{Completion, Nexus, Ns, Request, Submitted, TaskManagement, TmfResponse, Transfer};
use scsi::command::Command;
use scsi::inquiry::{self, StandardInquiry};
use scsi::{Asc, Flags, Sense, SenseKey};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Logical units addressed by LUN. Immutable after construction, so finding a LU takes no lock.
#[derive(Default)]
pub struct Target {
    luns: BTreeMap<u64, Arc<LogicalUnit>>,
    /// LUN masking: the initiators (by iSCSI name) that may see a LUN; a LUN without an entry
    /// is everyone's. To anyone else a masked LUN is absent (SPC-5 §4.4.3): REPORT LUNS leaves
    /// it out and commands get LOGICAL UNIT NOT SUPPORTED.
    masks: BTreeMap<u64, Vec<String>>,
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
    /// A target serving `luns`; a later duplicate LUN replaces an earlier one. Logical units
    /// not yet registered with a [`crate::CopyManager`] share a new one, so EXTENDED COPY
    /// reaches every LUN of the target (register them first to reach further).
    pub fn new(luns: Vec<(u64, Arc<LogicalUnit>)>) -> Self {
        let manager = Arc::new(crate::CopyManager::default());
        for (_, lu) in &luns {
            manager.register(lu);
        }
        Target {
            luns: luns.into_iter().collect(),
            masks: BTreeMap::new(),
        }
    }

    /// The target with `lun` visible to `initiators` (iSCSI names) only.
    pub fn with_mask(mut self, lun: u64, initiators: Vec<String>) -> Self {
        self.masks.insert(lun, initiators);
        self
    }

    /// The logical unit at `lun` as `nexus` sees it: `None` when absent or masked.
    fn unit(&self, nexus: &Nexus, lun: u64) -> Option<&Arc<LogicalUnit>> {
        let visible = self
            .masks
            .get(&lun)
            .is_none_or(|allowed| allowed.iter().any(|i| i == nexus.initiator_name()));
        self.luns.get(&lun).filter(|_| visible)
    }

    pub fn lun(&self, lun: u64) -> Option<&Arc<LogicalUnit>> {
        self.luns.get(&lun)
    }

    /// LUNs in ascending order.
    pub fn luns(&self) -> impl Iterator<Item = u64> + '_ {
        self.luns.keys().copied()
    }

    /// Direction and length `cdb` from `nexus` asks for, or the sense to fail it with before
    /// any data moves.
    pub fn transfer(&self, nexus: &Nexus, lun: u64, cdb: &[u8]) -> Result<Transfer, Sense> {
        let found = scsi::table::find(cdb);
        let Some(lu) = self.unit(nexus, lun) else {
            // Same answers as `absent_lun`: only the table's NO_LUN commands run.
            let info = found
                .ok()
                .filter(|i| i.flags.contains(Flags::NO_LUN))
                .ok_or_else(lun_not_supported)?;
            let cmd = scsi::table::decode_as(info, cdb)?;
            return Ok(Transfer::of(cmd.data_length(), 0));
        };
        let (info, cmd) = lu.decode_found(found, cdb)?;
        lu.transfer(info, &cmd)
    }

    /// A command arrives at `now`: on a logical unit with a device queue a medium command
    /// enters its task set; everything else runs at once, as [`Self::execute`].
    pub fn submit(&self, now: Ns, req: &Request, data_in: &mut Vec<u8>) -> Submitted {
        match self.unit(req.nexus, req.lun) {
            Some(lu) if !target_scope(req.cdb) => lu.submit(now, req, data_in),
            _ => Submitted::Done(self.execute(req, data_in)),
        }
    }

    /// Execute one command. Read data is appended to `data_in` (which the caller cleared).
    pub fn execute(&self, req: &Request, data_in: &mut Vec<u8>) -> Completion {
        if target_scope(req.cdb) {
            return self.report_luns(req, data_in);
        }
        match self.unit(req.nexus, req.lun) {
            Some(lu) => lu.execute(req, data_in),
            None => self.absent_lun(req, data_in),
        }
    }

    /// Append sense data for a command on `lun` in the format the LU's Control mode page asks
    /// for (D_SENSE, SPC-5 table 457); fixed format for absent LUNs.
    pub fn encode_sense(&self, lun: u64, sense: &Sense, out: &mut Vec<u8>) {
        let descriptor = self.luns.get(&lun).is_some_and(|lu| lu.descriptor_sense());
        sense.write(descriptor, out);
    }

    /// REPORT LUNS (SPC-5 §6.33) works on any LUN. No administrative or well-known logical
    /// units exist, so SELECT REPORT 01h, 10h and 12h report none.
    fn report_luns(&self, req: &Request, data_in: &mut Vec<u8>) -> Completion {
        let Ok((
            _,
            Command::ReportLuns {
                select_report,
                allocation_length,
            },
        )) = scsi::decode(req.cdb)
        else {
            return match scsi::decode(req.cdb) {
                Err(sense) => check(sense),
                Ok(_) => check(Sense::invalid_command_operation_code()),
            };
        };
        if let Some(lu) = self.unit(req.nexus, req.lun) {
            lu.unit_attentions.register(req.nexus);
        }
        let start = data_in.len();
        let visible = self
            .luns()
            .filter(|&lun| self.unit(req.nexus, lun).is_some());
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
    fn absent_lun(&self, req: &Request, data_in: &mut Vec<u8>) -> Completion {
        let start = data_in.len();
        let Some(info) = scsi::table::find(req.cdb)
            .ok()
            .filter(|i| i.flags.contains(Flags::NO_LUN))
        else {
            return check(lun_not_supported());
        };
        match scsi::table::decode_as(info, req.cdb) {
            Ok(Command::Inquiry(i)) if !i.evpd => {
                StandardInquiry {
                    peripheral: inquiry::NO_LOGICAL_UNIT,
                    removable: false,
                    third_party_copy: false,
                    implicit_alua: false,
                    version: self
                        .luns
                        .values()
                        .next()
                        .map_or(0x0D, |lu| lu.config().inquiry_version),
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

    /// A task management function for `lun` from `nexus` at `now` (SAM-5 §7). Tasks of the
    /// other nexuses that it aborts come out of their logical unit's next `advance` as
    /// [`crate::Verdict::Aborted`].
    pub fn task_management(
        &self,
        now: Ns,
        nexus: &Nexus,
        lun: u64,
        tmf: TaskManagement,
    ) -> TmfResponse {
        let all = |asc| {
            for lu in self.luns.values() {
                lu.reset(now, Some(nexus.id), asc);
            }
            TmfResponse::FunctionComplete
        };
        if let TaskManagement::TargetWarmReset = tmf {
            return all(Asc::POWER_ON_RESET_OR_BUS_DEVICE_RESET);
        }
        if let TaskManagement::TargetColdReset = tmf {
            return all(Asc::POWER_ON_OCCURRED);
        }
        let Some(lu) = self.unit(nexus, lun) else {
            return TmfResponse::IncorrectLun;
        };
        match tmf {
            TaskManagement::AbortTask(tag) => {
                if lu.abort_task(now, nexus.id, tag) {
                    TmfResponse::FunctionComplete
                } else {
                    TmfResponse::NoSuchTask
                }
            }
            TaskManagement::AbortTaskSet => {
                lu.abort_tasks(now, Some(nexus.id), |n| n == nexus.id);
                TmfResponse::FunctionComplete
            }
            TaskManagement::ClearTaskSet => {
                // TAS = 0: the nexuses that lost tasks learn it from a unit attention
                // (SAM-5 §7.5).
                for other in lu.abort_tasks(now, Some(nexus.id), |_| true) {
                    lu.unit_attentions
                        .raise_for(other, Asc::COMMANDS_CLEARED_BY_ANOTHER_INITIATOR);
                }
                TmfResponse::FunctionComplete
            }
            // NormACA = 0: there is never an ACA condition to clear (SAM-5 §7.4).
            TaskManagement::ClearAca => TmfResponse::FunctionRejected,
            TaskManagement::LogicalUnitReset => {
                lu.reset(now, Some(nexus.id), Asc::BUS_DEVICE_RESET_FUNCTION_OCCURRED);
                TmfResponse::FunctionComplete
            }
            TaskManagement::TargetWarmReset | TaskManagement::TargetColdReset => {
                TmfResponse::FunctionComplete
            }
        }
    }

    /// The nexus logged out or its connection dropped (SAM-5 §6.3.4: I_T nexus loss).
    pub fn nexus_lost(&self, now: Ns, nexus: &Nexus) {
        for lu in self.luns.values() {
            lu.nexus_lost(now, nexus.id);
        }
    }
}
