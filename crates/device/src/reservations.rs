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
    /// Where the gateways share the state (docs/gateways.md): the version of the cluster's
    /// copy this one is, which a change must still find there to be written.
    shared: Option<u64>,
    /// The version this gateway's last PERSISTENT RESERVE OUT wrote.
    written: Option<u64>,
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
    /// Where the gateways share the state: the write of the new state, guarded by the
    /// version it was prepared on ([`store::Op::Share`]).
    pub(crate) share: Option<store::Op>,
}

/// How many races with other gateways a PERSISTENT RESERVE OUT may lose (its write found
/// the state changed by another gateway since it was prepared) before it gives up. A race
/// lost to a command of this gateway is not counted: the commands of one gateway run one
/// after the other in the end, and only the other gateways' could starve it.
pub(crate) const SHARE_ATTEMPTS: u32 = 16;

/// The gateways' state at start: when no other gateway had the logical unit open (its power
/// on, as the hosts see it), a state whose APTPL is 0 does not survive (SPC-4 §5.13.5.1),
/// and PRgeneration restarts at zero (SPC-4 §6.15.2); written back so that every gateway
/// starting later finds it so.
pub(crate) fn power_on(
    plane: &dyn store::Plane,
    state: store::SharedState,
) -> std::io::Result<store::SharedState> {
    let invalid = |e: String| std::io::Error::new(std::io::ErrorKind::InvalidData, e);
    let Some(bytes) = state.contents.as_deref().filter(|_| state.first) else {
        return Ok(state);
    };
    let old = aptpl::decode(bytes).map_err(invalid)?;
    let new = if old.aptpl {
        PersistentReservations {
            generation: 0,
            ..old.clone()
        }
    } else {
        PersistentReservations::default()
    };
    if new == old {
        return Ok(state);
    }
    if !old.aptpl {
        tracing::info!(
            registrations = old.registrations.len(),
            "persistent reservations with APTPL = 0 dropped: no other gateway is alive"
        );
    }
    let contents = aptpl::encode(&new);
    match plane.share_now(store::KeptFile::Reservations, &contents, state.version)? {
        store::Done::Shared(version) => Ok(store::SharedState {
            contents: Some(contents),
            version,
            first: true,
        }),
        // Another gateway came up and changed it meanwhile: its state stands.
        store::Done::Stale(now) => Ok(now),
        store::Done::Failed(f) => Err(std::io::Error::new(f.error().kind(), f.error().to_string())),
        other => Err(std::io::Error::other(format!("{other:?}"))),
    }
}

impl Reservations {
    /// A logical unit's reservations at power on: `kept`, the state kept through the last
    /// power loss, if any.
    /// `groups`: this server's target port group and every one's.
    pub(crate) fn new(
        kept: Option<PersistentReservations>,
        ptpl_capable: bool,
        groups: &crate::PortGroups,
        shared: Option<u64>,
    ) -> Self {
        Reservations {
            spc2_holder: None,
            persistent: kept.unwrap_or_default(),
            ptpl_capable,
            target_port: groups.own,
            target_ports: groups.all.clone(),
            shared,
            written: None,
        }
    }

    /// The gateways' state as another gateway (or a lost race) left it: made current when
    /// it is newer than this one (RADOS object versions only grow).
    pub(crate) fn reload(&mut self, state: &store::SharedState) -> Result<(), String> {
        if self.shared.is_some_and(|v| v > state.version) {
            return Ok(());
        }
        self.persistent = match state.contents.as_deref() {
            Some(bytes) => aptpl::decode(bytes)?,
            None => PersistentReservations::default(),
        };
        self.shared = Some(state.version);
        Ok(())
    }

    /// The gateways' state was written: this is its version now.
    pub(crate) fn shared_as(&mut self, version: u64) {
        self.shared = Some(version);
        self.written = Some(version);
    }

    /// Whether the state at `version` is what this gateway wrote last: a race lost to it
    /// was lost to a command of this gateway.
    pub(crate) fn written_here(&self, version: u64) -> bool {
        self.written == Some(version)
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
        // Every change goes to the gateways' copy, whatever APTPL says: every gateway must
        // see it; a lone server keeps a file under APTPL only.
        let share = self.shared.map(|version| store::Op::Share {
            file: store::KeptFile::Reservations,
            contents: aptpl::encode(&next),
            version,
        });
        let keep = (share.is_none() && self.ptpl_capable && (next.aptpl || self.persistent.aptpl))
            .then(|| next.aptpl.then(|| aptpl::encode(&next)));
        Ok(Prepared {
            next,
            effects,
            keep,
            share,
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
