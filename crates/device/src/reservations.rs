//! The reservations of a logical unit: RESERVE/RELEASE (6)/(10) (SPC-2), persistent
//! reservations (SPC-4 §5.13, [`crate::persistent_reservation`]), how the two meet (SPC-2
//! §5.5.1 with the exceptions of SPC-4 §5.13.3, CRH = 1), and which commands they refuse
//! (the command table's [`ReservationAccess`]). A value the core owns.
//!
//! Where gateways share the logical unit (docs/gateways.md), the RESERVE (6)/(10) holder is
//! part of the state they share, named by I_T nexus, and changes as a PERSISTENT RESERVE OUT
//! does: written to the cluster first, guarded by the version, and current here once written.

use crate::persistent_reservation::{Effects, It, ItNexus, PersistentReservations, Refusal};
use crate::{aptpl, Completion, Nexus};
use scsi::command::{PersistentReserveIn, PersistentReserveOut};
use scsi::table::ReservationAccess;
use scsi::{Asc, CommandInfo, Sense, SenseKey, Status};

const CONFLICT: Completion = Completion {
    status: Status::ReservationConflict,
    sense: None,
};

/// The I_T nexus holding a RESERVE (6)/(10) reservation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Spc2Holder {
    /// A lone server's nexus, by its id.
    Nexus(u64),
    /// Where gateways share the state: the nexus every gateway names so. A nexus here is
    /// the holder when it has the initiator port and the target port is this server's;
    /// `here`: the id of the nexus here whose RESERVE made it, whose loss alone releases it
    /// (`None`: not known here, any loss of a nexus of that initiator port does).
    Shared { it: ItNexus, here: Option<u64> },
}

impl Spc2Holder {
    /// Whether `nexus`, which came through target port `here`, holds the reservation.
    pub(crate) fn is(&self, nexus: &Nexus, here: u16) -> bool {
        match self {
            Spc2Holder::Nexus(id) => *id == nexus.id,
            Spc2Holder::Shared { it, .. } => {
                it.target_port == here && it.initiator_port == nexus.initiator_port
            }
        }
    }
}

/// What a RESERVE or RELEASE (6)/(10) comes to.
pub(crate) enum Spc2 {
    /// It ended: made current (a lone server), changing nothing, or refused.
    Done(Completion),
    /// Where gateways share the state: the write of the new holder, guarded by the version
    /// it was decided on; [`Reservations::spc2_shared`] once written.
    Share(store::Op, Option<Spc2Holder>),
}

/// A release of the gateways' RESERVE (6)/(10) reservation that this gateway owes outside
/// any command, to write with [`Reservations::owed`].
enum Owed {
    /// A logical unit reset here releases whoever holds it ([`Reservations::reset`]).
    Reset,
    /// The loss of this I_T nexus here releases it while that nexus holds it
    /// ([`Reservations::nexus_lost`]).
    Lost(ItNexus),
}

pub(crate) struct Reservations {
    /// The nexus holding a RESERVE (6)/(10) reservation.
    spc2: Option<Spc2Holder>,
    /// Where gateways share the state: a release owed to it.
    owed: Option<Owed>,
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

/// The gateways' state at start: when no other gateway had the logical unit open (its power
/// on, as the hosts see it), a state whose APTPL is 0 does not survive (SPC-4 §5.13.5.1),
/// and PRgeneration restarts at zero (SPC-4 §6.15.2); written back so that every gateway
/// starting later finds it so.
pub(crate) fn power_on(
    plane: &dyn store::Plane,
    state: store::SharedState,
    own: u16,
) -> std::io::Result<store::SharedState> {
    let invalid = |e: String| std::io::Error::new(std::io::ErrorKind::InvalidData, e);
    let Some(bytes) = state.contents.as_deref() else {
        return Ok(state);
    };
    let (old, old_spc2) = aptpl::decode_shared(bytes).map_err(invalid)?;
    let new = match (state.first, old.aptpl) {
        (false, _) => old.clone(),
        (true, true) => PersistentReservations {
            generation: 0,
            ..old.clone()
        },
        (true, false) => PersistentReservations::default(),
    };
    // A RESERVE (6)/(10) reservation ends with power (SPC-2 §5.5.1), and one held through
    // this gateway ended with its nexuses when it stopped.
    let spc2 = old_spc2
        .clone()
        .filter(|h| !state.first && h.target_port != own);
    if new == old && spc2 == old_spc2 {
        return Ok(state);
    }
    if spc2 != old_spc2 {
        tracing::info!(
            holder = old_spc2.as_ref().map(|h| h.initiator_port.as_str()),
            "a RESERVE reservation ended with its gateway"
        );
    }
    if new != old && !old.aptpl {
        tracing::info!(
            registrations = old.registrations.len(),
            "persistent reservations with APTPL = 0 dropped: no other gateway is alive"
        );
    }
    let contents = aptpl::encode_shared(&new, spc2.as_ref());
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
    /// `spc2`: where gateways share the state, its RESERVE (6)/(10) holder.
    pub(crate) fn new(
        kept: Option<PersistentReservations>,
        spc2: Option<ItNexus>,
        ptpl_capable: bool,
        groups: &crate::PortGroups,
        shared: Option<u64>,
    ) -> Self {
        Reservations {
            spc2: spc2.map(|it| Spc2Holder::Shared { it, here: None }),
            owed: None,
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
        let (persistent, spc2) = match state.contents.as_deref() {
            Some(bytes) => aptpl::decode_shared(bytes)?,
            None => Default::default(),
        };
        self.persistent = persistent;
        // The same holder still: made by the same nexus here, if it was.
        let here = match &self.spc2 {
            Some(Spc2Holder::Shared { it, here }) if spc2.as_ref() == Some(it) => *here,
            _ => None,
        };
        self.spc2 = spc2.map(|it| Spc2Holder::Shared { it, here });
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
        if self.spc2.is_none() && self.persistent.reservation.is_none() {
            return false;
        }
        let access = info.map_or(ReservationAccess::Write, |i| i.reservation_access(cdb));
        match &self.spc2 {
            Some(holder) => {
                !holder.is(nexus, self.target_port)
                    && !matches!(
                        access,
                        ReservationAccess::Unrestricted | ReservationAccess::OwnRules
                    )
            }
            None => self.persistent.conflicts(self.it(nexus), access),
        }
    }

    /// RESERVE (`reserve`) or RELEASE (6)/(10). RESERVE by another nexus than the holder
    /// conflicts; RELEASE by the holder releases, anyone else's is a no-op (SPC-2 §7.16).
    /// While an I_T nexus is registered, both conflict (SPC-2 §5.5.1) except from a
    /// persistent reservation holder, for whom they change nothing (SPC-4 §5.13.3).
    pub(crate) fn reserve_or_release(&mut self, nexus: &Nexus, reserve: bool) -> Spc2 {
        if !self.persistent.registrations.is_empty() {
            return Spc2::Done(self.spc2_exception(nexus));
        }
        let holds = self.spc2.as_ref().map(|h| h.is(nexus, self.target_port));
        let next = match (reserve, holds) {
            (true, Some(false)) => return Spc2::Done(CONFLICT),
            (true, None) => Some(nexus),
            (false, Some(true)) => None,
            // The holder again, or a RELEASE of another's or of none: nothing changes.
            _ => return Spc2::Done(Completion::GOOD),
        };
        let Some(version) = self.shared else {
            self.spc2 = next.map(|n| Spc2Holder::Nexus(n.id));
            return Spc2::Done(Completion::GOOD);
        };
        let it = next.map(|n| ItNexus {
            initiator_port: n.initiator_port.clone(),
            target_port: self.target_port,
        });
        let share = store::Op::Share {
            file: store::KeptFile::Reservations,
            contents: aptpl::encode_shared(&self.persistent, it.as_ref()),
            version,
        };
        let next = it.map(|it| Spc2Holder::Shared {
            it,
            here: Some(nexus.id),
        });
        Spc2::Share(share, next)
    }

    /// The gateways' RESERVE (6)/(10) holder was written: `holder`, at `version`.
    pub(crate) fn spc2_shared(&mut self, holder: Option<Spc2Holder>, version: u64) {
        self.written = Some(version);
        // A newer state read meanwhile already holds this write.
        if self.shared.is_some_and(|v| v > version) {
            return;
        }
        self.spc2 = holder;
        self.shared = Some(version);
    }

    /// Where gateways share the state: the write of a release owed ([`Owed`]), while the
    /// holder it releases still holds, as contents and the version they replace; the owed
    /// release is forgotten when it has nothing left to release.
    pub(crate) fn owed(&mut self) -> Option<(Vec<u8>, u64)> {
        let due = match (self.owed.as_ref()?, &self.spc2) {
            (Owed::Reset, Some(_)) => true,
            (Owed::Lost(lost), Some(Spc2Holder::Shared { it, .. })) => lost == it,
            _ => false,
        };
        if !due {
            self.owed = None;
            return None;
        }
        Some((aptpl::encode_shared(&self.persistent, None), self.shared?))
    }

    /// The owed release was written at `version`, or (`None`) could not be: either way it
    /// is no longer owed.
    pub(crate) fn owed_written(&mut self, version: Option<u64>) {
        self.owed = None;
        if let Some(version) = version {
            self.spc2_shared(None, version);
        }
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
        if self.spc2.is_some() {
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
        if self.spc2.is_some() {
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
        // see it; a lone server keeps a file under APTPL only. No RESERVE (6)/(10) holder:
        // there, this command conflicts.
        let share = self.shared.map(|version| store::Op::Share {
            file: store::KeptFile::Reservations,
            contents: aptpl::encode_shared(&next, None),
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
    pub(crate) fn snapshot(&self) -> (Option<Spc2Holder>, PersistentReservations) {
        (self.spc2.clone(), self.persistent.clone())
    }

    /// A logical unit reset releases a RESERVE (6)/(10) reservation; persistent reservations
    /// are not reset by hard reset or logical unit reset (SPC-4 §5.13.1). Where gateways
    /// share the state, the gateway where the reset happened (`here`) owes the release
    /// ([`Self::owed`]); the others learn of it from the cluster.
    pub(crate) fn reset(&mut self, here: bool) {
        match &self.spc2 {
            Some(Spc2Holder::Shared { .. }) if here => self.owed = Some(Owed::Reset),
            Some(Spc2Holder::Shared { .. }) => {}
            _ => self.spc2 = None,
        }
    }

    /// I_T nexus loss of `nexus` (initiator port `port`, when known) releases its RESERVE
    /// (6)/(10) reservation (where gateways share it, owed: [`Self::owed`]); its
    /// registrations stay, named by initiator port (SPC-4 §5.13.5.1).
    pub(crate) fn nexus_lost(&mut self, nexus: u64, port: Option<&str>) {
        match &self.spc2 {
            Some(Spc2Holder::Nexus(id)) if *id == nexus => self.spc2 = None,
            // A reset owed releases it already.
            Some(Spc2Holder::Shared { it, here })
                if it.target_port == self.target_port
                    && Some(it.initiator_port.as_str()) == port
                    && here.is_none_or(|id| id == nexus)
                    && !matches!(self.owed, Some(Owed::Reset)) =>
            {
                self.owed = Some(Owed::Lost(it.clone()));
            }
            _ => {}
        }
    }
}
