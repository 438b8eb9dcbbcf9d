//! The reservations of a logical unit: RESERVE/RELEASE (6)/(10) (SPC-2), persistent
//! reservations (SPC-4 §5.13, [`crate::persistent_reservation`]), how the two meet (SPC-2
//! §5.5.1 with the exceptions of SPC-4 §5.13.3, CRH = 1), and which commands they refuse
//! (the command table's [`ReservationAccess`]).

use crate::aptpl;
use crate::logical_unit::{check, LogicalUnit};
use crate::persistent_reservation::{Effects, PersistentReservations, Refusal};
use crate::{Completion, Nexus, Request};
use parking_lot::Mutex;
use scsi::command::{PersistentReserveIn, PersistentReserveOut};
use scsi::table::ReservationAccess;
use scsi::{Asc, CommandInfo, Sense, SenseKey, Status};
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

const CONFLICT: Completion = Completion {
    status: Status::ReservationConflict,
    sense: None,
};

pub(crate) struct Reservations {
    /// Some reservation exists, of either kind: only then does a command look at the state,
    /// so the common unreserved case costs one atomic load.
    reserved: AtomicBool,
    state: Mutex<State>,
    /// Where persistent reservations outlive the process when APTPL is set (a file LUN's);
    /// `None`: they cannot (PTPL_C = 0).
    path: Option<PathBuf>,
}

struct State {
    /// The nexus holding a RESERVE (6)/(10) reservation.
    spc2_holder: Option<u64>,
    persistent: PersistentReservations,
}

/// Why a PERSISTENT RESERVE OUT did not complete with GOOD.
pub(crate) enum Failed {
    Status(Completion),
    /// The state could not be kept through power loss; nothing changed.
    Io(io::Error),
}

impl From<Refusal> for Failed {
    fn from(r: Refusal) -> Self {
        Failed::Status(match r {
            Refusal::Conflict => CONFLICT,
            Refusal::Check(sense) => check(sense),
        })
    }
}

impl Reservations {
    /// A logical unit's reservations at power on: those kept at `path`, if any.
    pub(crate) fn new(path: Option<PathBuf>) -> io::Result<Self> {
        let persistent = match &path {
            Some(p) => aptpl::load(p)?.unwrap_or_default(),
            None => PersistentReservations::default(),
        };
        let r = Reservations {
            reserved: AtomicBool::new(false),
            state: Mutex::new(State {
                spc2_holder: None,
                persistent,
            }),
            path,
        };
        r.publish(&r.state.lock());
        Ok(r)
    }

    fn publish(&self, st: &State) {
        let reserved = st.spc2_holder.is_some() || st.persistent.reservation.is_some();
        self.reserved.store(reserved, Ordering::Release);
    }

    /// Whether another nexus's reservation refuses `cdb` from `nexus`. A RESERVE (6)/(10)
    /// reservation lets only the [`ReservationAccess::Unrestricted`] commands through (SPC-2
    /// §5.5.1); a persistent one follows SPC-4 table 65 and SBC-4 table 13.
    /// `info` is the command's table entry; a CDB the table does not know conflicts like a
    /// write (the reservation is checked before the CDB is).
    pub(crate) fn conflict(&self, nexus: &Nexus, info: Option<&CommandInfo>, cdb: &[u8]) -> bool {
        if !self.reserved.load(Ordering::Acquire) {
            return false;
        }
        let access = info.map_or(ReservationAccess::Write, |i| i.reservation_access(cdb));
        let st = self.state.lock();
        match st.spc2_holder {
            Some(holder) => {
                holder != nexus.id
                    && !matches!(
                        access,
                        ReservationAccess::Unrestricted | ReservationAccess::OwnRules
                    )
            }
            None => st.persistent.conflicts(&nexus.initiator_port, access),
        }
    }

    /// RESERVE (6)/(10). While an I_T nexus is registered, RESERVE conflicts (SPC-2 §5.5.1)
    /// except from a persistent reservation holder, for whom it changes nothing (SPC-4
    /// §5.13.3).
    pub(crate) fn reserve(&self, nexus: &Nexus) -> Completion {
        let mut st = self.state.lock();
        if !st.persistent.registrations.is_empty() {
            return self.spc2_exception(&st, nexus);
        }
        match st.spc2_holder {
            Some(h) if h != nexus.id => CONFLICT,
            _ => {
                st.spc2_holder = Some(nexus.id);
                self.publish(&st);
                Completion::GOOD
            }
        }
    }

    /// RELEASE (6)/(10): the holder's releases, anyone else's is a no-op (SPC-2 §7.16);
    /// registrations make it conflict as RESERVE does.
    pub(crate) fn release(&self, nexus: &Nexus) -> Completion {
        let mut st = self.state.lock();
        if !st.persistent.registrations.is_empty() {
            return self.spc2_exception(&st, nexus);
        }
        if st.spc2_holder == Some(nexus.id) {
            st.spc2_holder = None;
            self.publish(&st);
        }
        Completion::GOOD
    }

    fn spc2_exception(&self, st: &State, nexus: &Nexus) -> Completion {
        if st.persistent.exempts_spc2(&nexus.initiator_port) {
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
        let st = self.state.lock();
        if st.spc2_holder.is_some() {
            return CONFLICT;
        }
        st.persistent
            .read(p.service_action, self.path.is_some(), out);
        Completion::GOOD
    }

    /// PERSISTENT RESERVE OUT from `nexus` with its Data-Out: performed on a copy of the
    /// state, kept through power loss if APTPL says so, then made current, so a failure at
    /// any step changes nothing.
    pub(crate) fn persistent_reserve_out(
        &self,
        nexus: &Nexus,
        cmd: &PersistentReserveOut,
        data_out: &[u8],
    ) -> Result<Effects, Failed> {
        let mut st = self.state.lock();
        if st.spc2_holder.is_some() {
            return Err(Failed::Status(CONFLICT));
        }
        let list = usize::try_from(cmd.parameter_list_length)
            .ok()
            .and_then(|n| data_out.get(..n))
            .ok_or_else(|| {
                Failed::Status(check(Sense::new(
                    SenseKey::IllegalRequest,
                    Asc::PARAMETER_LIST_LENGTH_ERROR,
                )))
            })?;
        let mut next = st.persistent.clone();
        let effects = next.perform(&nexus.initiator_port, cmd, list, self.path.is_some())?;
        if let Some(path) = &self.path {
            if next.aptpl || st.persistent.aptpl {
                aptpl::store(path, &next).map_err(Failed::Io)?;
            }
        }
        st.persistent = next;
        self.publish(&st);
        Ok(effects)
    }

    /// A logical unit reset releases a RESERVE (6)/(10) reservation; persistent reservations
    /// are not reset by hard reset or logical unit reset (SPC-4 §5.13.1).
    pub(crate) fn reset(&self) {
        let mut st = self.state.lock();
        st.spc2_holder = None;
        self.publish(&st);
    }

    /// I_T nexus loss releases the nexus's RESERVE (6)/(10) reservation; its registrations
    /// stay, named by initiator port (SPC-4 §5.13.5.1).
    pub(crate) fn nexus_lost(&self, nexus: u64) {
        let mut st = self.state.lock();
        if st.spc2_holder == Some(nexus) {
            st.spc2_holder = None;
            self.publish(&st);
        }
    }
}

impl LogicalUnit {
    /// PERSISTENT RESERVE OUT: the service action, then the unit attentions it establishes
    /// for the other nexuses and, for PREEMPT AND ABORT, the preempted nexuses' tasks aborted
    /// (SPC-4 §5.13.11.2.6; TAS = 0, so they end without status).
    pub(crate) fn persistent_reserve_out(
        &self,
        req: &Request,
        cmd: &PersistentReserveOut,
    ) -> Completion {
        let effects = match self
            .reservations
            .persistent_reserve_out(req.nexus, cmd, req.data_out)
        {
            Ok(effects) => effects,
            Err(Failed::Status(c)) => return c,
            Err(Failed::Io(e)) => {
                return self.io_error(&e, SenseKey::MediumError, Asc::WRITE_ERROR, None)
            }
        };
        let me = req.nexus.id;
        for (port, asc) in &effects.unit_attentions {
            self.unit_attentions.raise_for_port(port, *asc, me);
        }
        let preempted: Vec<u64> = effects
            .aborted
            .iter()
            .flat_map(|port| self.unit_attentions.nexuses_of(port))
            .filter(|&n| n != me)
            .collect();
        if let (false, Some(s)) = (preempted.is_empty(), &self.scheduled) {
            let now = s.set.lock().latest();
            let _lost = self.abort_tasks(now, Some(me), |n| preempted.contains(&n));
        }
        Completion::GOOD
    }
}
