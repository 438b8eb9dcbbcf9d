//! The checks a command passes before it enters the task set, once, from its table entry's
//! [`Flags`], in the order they have always answered in: the CDB (INVALID COMMAND OPERATION
//! CODE, INVALID FIELD IN CDB with its field pointer) and a write's range, before any of its
//! data is asked for; a reservation held by another nexus (RESERVATION CONFLICT takes
//! precedence over CHECK CONDITION, SAM-5 §5.3.2); a pending unit attention for this nexus
//! (SAM-5 §5.14); the task attribute; the unit's state as the entry's flags ask (the target
//! port group's ALUA state, medium present, unit started, write protection); a sanitize in
//! progress or failed. No command repeats them.

use crate::logical_unit::{check, LogicalUnit};
use crate::{Arrival, Completion, TaskAttribute};
use scsi::command::Command;
use scsi::{Asc, CommandInfo, Flags, Sense, SenseKey, Status};

impl LogicalUnit {
    /// The checks after the CDB's (which `LogicalUnit::command` makes as it decodes).
    pub(crate) fn precheck(
        &mut self,
        a: &Arrival,
        found: &Result<&'static CommandInfo, Sense>,
        info: &'static CommandInfo,
        cmd: &Command,
    ) -> Result<(), Completion> {
        if self
            .reservations
            .conflict(a.nexus, found.as_ref().ok().copied(), a.cdb)
        {
            return Err(Completion {
                status: Status::ReservationConflict,
                sense: None,
            });
        }
        let exempt = info.flags.contains(Flags::NO_UNIT_ATTENTION);
        if let Some(asc) = self.unit_attentions.on_command(a.nexus, exempt) {
            return Err(check(Sense::new(SenseKey::UnitAttention, asc)));
        }
        // NormACA = 0: an ACA condition never exists, so a command with the ACA attribute has
        // nothing to run under (SAM-5 §5.9.2, §8.6).
        if a.attribute == TaskAttribute::Aca {
            return Err(check(Sense::new(
                SenseKey::IllegalRequest,
                Asc::INVALID_MESSAGE_ERROR,
            )));
        }
        self.check_state(info.flags).map_err(check)?;
        self.sanitizer.gate(cmd, info.flags).map_err(check)
    }

    /// Whether the unit's state lets a command with `flags` run.
    fn check_state(&self, flags: Flags) -> Result<(), Sense> {
        self.own_access_state().admits(flags)?;
        if flags.contains(Flags::MEDIUM) && !self.medium_present {
            return Err(Sense::new(SenseKey::NotReady, Asc::MEDIUM_NOT_PRESENT));
        }
        if flags.contains(Flags::READY) && self.stopped {
            return Err(Sense::new(
                SenseKey::NotReady,
                Asc::LOGICAL_UNIT_NOT_READY_INITIALIZING_REQUIRED,
            ));
        }
        if flags.contains(Flags::WRITES) && self.write_protected() {
            return Err(Sense::new(SenseKey::DataProtect, Asc::WRITE_PROTECTED));
        }
        Ok(())
    }
}
