//! The reservations of a logical unit: RESERVE/RELEASE (6)/(10) (SPC-2), persistent
//! reservations (SPC-4 §5.13, [`crate::persistent_reservation`]), how the two meet (SPC-2
//! §5.5.1 with the exceptions of SPC-4 §5.13.3, CRH = 1), and which commands they refuse
//! (the command table's [`ReservationAccess`]). A value the core owns.

use crate::persistent_reservation::{Effects, It, PersistentReservations, Refusal};
use crate::{aptpl, Completion, Nexus};
use scsi::command::{PersistentReserveIn, PersistentReserveOut};
use scsi::table::ReservationAccess;
use scsi::{Asc, CommandInfo, Sense, SenseKey, Status};

const CONFLICT: Completion = Completion {
    status: Status::ReservationConflict,
    sense: None,
};

pub(crate) struct Reservations {
    /// The nexus holding a RESERVE (6)/(10) reservation.
    spc2_holder: Option<u64>,
    persistent: PersistentReservations,
    /// The state can be kept through power loss when APTPL is set (PTPL_C): the logical unit
    /// has somewhere to keep it.
    ptpl_capable: bool,
    /// The relative target port identifier of this server's target port, through which
    /// every nexus here came (its port group's, as VPD page 83h reports it).
    target_port: u16,
    /// Every target port's: this server's, or every gateway's (docs/gateways.md).
    target_ports: Vec<u16>,
}

/// A PERSISTENT RESERVE OUT performed on a copy of the state: made current by
/// [`Reservations::commit`] once it is kept (when APTPL asks), so a failure at any step
/// changes nothing.
pub(crate) struct Prepared {
    next: PersistentReservations,
    pub(crate) effects: Effects,
    /// What to keep through power loss first: the new state's file contents (`Some(None)`:
    /// remove the file, APTPL went off).
    pub(crate) keep: Option<Option<Vec<u8>>>,
}

impl Reservations {
    /// A logical unit's reservations at power on: `kept`, the state kept through the last
    /// power loss, if any.
    /// `groups`: this server's target port group and every one's.
    pub(crate) fn new(
        kept: Option<PersistentReservations>,
        ptpl_capable: bool,
        groups: &crate::PortGroups,
    ) -> Self {
        Reservations {
            spc2_holder: None,
            persistent: kept.unwrap_or_default(),
            ptpl_capable,
            target_port: groups.own,
            target_ports: groups.all.clone(),
        }
    }

    /// `nexus` as registrations name it: its initiator port, this server's target port.
    fn it<'a>(&self, nexus: &'a Nexus) -> It<'a> {
        It {
            initiator_port: &nexus.initiator_port,
            target_port: self.target_port,
        }
    }

    /// The relative target port identifier of this server's target port.
    pub(crate) fn target_port(&self) -> u16 {
        self.target_port
    }

    /// Whether another nexus's reservation refuses `cdb` from `nexus`. A RESERVE (6)/(10)
    /// reservation lets only the [`ReservationAccess::Unrestricted`] commands through (SPC-2
    /// §5.5.1); a persistent one follows SPC-4 table 65 and SBC-4 table 13.
    /// `info` is the command's table entry; a CDB the table does not know conflicts like a
    /// write (the reservation is checked before the CDB is).
    pub(crate) fn conflict(&self, nexus: &Nexus, info: Option<&CommandInfo>, cdb: &[u8]) -> bool {
        if self.spc2_holder.is_none() && self.persistent.reservation.is_none() {
            return false;
        }
        let access = info.map_or(ReservationAccess::Write, |i| i.reservation_access(cdb));
        match self.spc2_holder {
            Some(holder) => {
                holder != nexus.id
                    && !matches!(
                        access,
                        ReservationAccess::Unrestricted | ReservationAccess::OwnRules
                    )
            }
            None => self.persistent.conflicts(self.it(nexus), access),
        }
    }

    /// RESERVE (6)/(10). While an I_T nexus is registered, RESERVE conflicts (SPC-2 §5.5.1)
    /// except from a persistent reservation holder, for whom it changes nothing (SPC-4
    /// §5.13.3).
    pub(crate) fn reserve(&mut self, nexus: &Nexus) -> Completion {
        if !self.persistent.registrations.is_empty() {
            return self.spc2_exception(nexus);
        }
        match self.spc2_holder {
            Some(h) if h != nexus.id => CONFLICT,
            _ => {
                self.spc2_holder = Some(nexus.id);
                Completion::GOOD
            }
        }
    }

    /// RELEASE (6)/(10): the holder's releases, anyone else's is a no-op (SPC-2 §7.16);
    /// registrations make it conflict as RESERVE does.
    pub(crate) fn release(&mut self, nexus: &Nexus) -> Completion {
        if !self.persistent.registrations.is_empty() {
            return self.spc2_exception(nexus);
        }
        if self.spc2_holder == Some(nexus.id) {
            self.spc2_holder = None;
        }
        Completion::GOOD
    }

    fn spc2_exception(&self, nexus: &Nexus) -> Completion {
        if self.persistent.exempts_spc2(self.it(nexus)) {
            Completion::GOOD
        } else {
            CONFLICT
        }
    }

    /// PERSISTENT RESERVE IN: the parameter data, appended to `out` (not truncated). Under a
    /// RESERVE (6)/(10) reservation every PERSISTENT RESERVE command conflicts (SPC-2 §5.5.1).
    pub(crate) fn persistent_reserve_in(
        &self,
        p: &PersistentReserveIn,
        out: &mut Vec<u8>,
    ) -> Completion {
        if self.spc2_holder.is_some() {
            return CONFLICT;
        }
        self.persistent
            .read(p.service_action, self.ptpl_capable, out);
        Completion::GOOD
    }

    /// PERSISTENT RESERVE OUT from `nexus` with its Data-Out, performed on a copy of the state.
    pub(crate) fn prepare_out(
        &self,
        nexus: &Nexus,
        cmd: &PersistentReserveOut,
        data_out: &[u8],
    ) -> Result<Prepared, Completion> {
        if self.spc2_holder.is_some() {
            return Err(CONFLICT);
        }
        let list = usize::try_from(cmd.parameter_list_length)
            .ok()
            .and_then(|n| data_out.get(..n))
            .ok_or_else(|| {
                Completion::check_condition(Sense::new(
                    SenseKey::IllegalRequest,
                    Asc::PARAMETER_LIST_LENGTH_ERROR,
                ))
            })?;
        let mut next = self.persistent.clone();
        let effects = next
            .perform(
                self.it(nexus),
                cmd,
                list,
                self.ptpl_capable,
                &self.target_ports,
            )
            .map_err(|r| match r {
                Refusal::Conflict => CONFLICT,
                Refusal::Check(sense) => Completion::check_condition(sense),
            })?;
        let keep = (self.ptpl_capable && (next.aptpl || self.persistent.aptpl))
            .then(|| next.aptpl.then(|| aptpl::encode(&next)));
        Ok(Prepared {
            next,
            effects,
            keep,
        })
    }

    /// A prepared PERSISTENT RESERVE OUT becomes current.
    pub(crate) fn commit(&mut self, prepared: Prepared) -> Effects {
        self.persistent = prepared.next;
        prepared.effects
    }

    /// What copies from other units check: the RESERVE holder and the persistent state.
    pub(crate) fn snapshot(&self) -> (Option<u64>, PersistentReservations) {
        (self.spc2_holder, self.persistent.clone())
    }

    /// A logical unit reset releases a RESERVE (6)/(10) reservation; persistent reservations
    /// are not reset by hard reset or logical unit reset (SPC-4 §5.13.1).
    pub(crate) fn reset(&mut self) {
        self.spc2_holder = None;
    }

    /// I_T nexus loss releases the nexus's RESERVE (6)/(10) reservation; its registrations
    /// stay, named by initiator port (SPC-4 §5.13.5.1).
    pub(crate) fn nexus_lost(&mut self, nexus: u64) {
        if self.spc2_holder == Some(nexus) {
            self.spc2_holder = None;
        }
    }
}
