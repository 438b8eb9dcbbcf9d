//! Persistent reservations of one logical unit (SPC-4 §5.13): registrations by I_T nexus, the
//! reservation and its holder, PRgeneration, and what each PERSISTENT RESERVE OUT service
//! action does to them. Pure: the logical unit applies the unit attentions and aborts a
//! service action asks for, and keeps the state through power loss when APTPL is set.
//!
//! An I_T nexus is named by its initiator port (`iqn...,i,0x<ISID>`, the iSCSI initiator port
//! name) and the relative target port identifier of its target port: registrations survive
//! its sessions (§5.13.5.1). A lone server has one target port (1); where several gateways
//! export the logical unit each is a target port, its port group's (docs/gateways.md). A
//! registration made with ALL_TG_PT is one registration for every target port (§5.13.7): it
//! is found, changed, removed and holds the reservation through any of them.

use scsi::command::PersistentReserveOut;
use scsi::persistent_reserve::{
    self, Capabilities, FullStatus, PrInAction, PrOutAction, PrOutParameters,
    RegisterAndMoveParameters, ReservationType,
};
use scsi::table::ReservationAccess;
use scsi::{Asc, Sense, SenseKey};

/// An I_T nexus as every gateway names it: its initiator port and the relative target port
/// it came through (as registrations name it, SPC-4 §5.13.7).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ItNexus {
    pub(crate) initiator_port: String,
    pub(crate) target_port: u16,
}

/// An I_T nexus as registrations name it (SPC-4 §5.13.7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct It<'a> {
    pub(crate) initiator_port: &'a str,
    /// RELATIVE TARGET PORT IDENTIFIER of the target port (as in VPD page 83h).
    pub(crate) target_port: u16,
}

/// The nexuses an effect is for: an initiator port's at one target port, or at every one
/// (`None`: its registration was made with ALL_TG_PT).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Whom {
    pub(crate) initiator_port: String,
    pub(crate) target_port: Option<u16>,
}

impl Whom {
    /// Whether they include nexuses at target port `target_port`.
    pub(crate) fn reaches(&self, target_port: u16) -> bool {
        self.target_port.is_none_or(|t| t == target_port)
    }
}

/// Registrations a logical unit keeps; one more is INSUFFICIENT REGISTRATION RESOURCES
/// (SPC-4 §5.13.7), so a host cannot grow the state (and its file) without bound.
pub(crate) const MAX_REGISTRATIONS: usize = 128;

/// The longest initiator port name a TransportID can carry: an iSCSI name of 223 bytes (RFC
/// 7143 §4.2.7.1), ",i,0x" and 12 hex digits of ISID (SPC-4 table 506).
const MAX_INITIATOR_PORT: usize = 223 + 5 + 12;

/// One registered I_T nexus.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Registration {
    pub(crate) initiator_port: String,
    /// The target port it was made through (with ALL_TG_PT, it is for every one).
    pub(crate) target_port: u16,
    pub(crate) key: u64,
    pub(crate) all_tg_pt: bool,
}

impl Registration {
    /// Whether this registration is `it`'s.
    fn is(&self, it: It<'_>) -> bool {
        self.initiator_port == it.initiator_port
            && (self.all_tg_pt || self.target_port == it.target_port)
    }

    fn whom(&self) -> Whom {
        Whom {
            initiator_port: self.initiator_port.clone(),
            target_port: (!self.all_tg_pt).then_some(self.target_port),
        }
    }

    /// Whether this registration and `other` are for a common I_T nexus.
    pub(crate) fn overlaps(&self, other: &Registration) -> bool {
        self.initiator_port == other.initiator_port
            && (self.all_tg_pt || other.all_tg_pt || self.target_port == other.target_port)
    }
}

/// The persistent reservation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Reservation {
    /// The I_T nexus that holds it (its initiator port and target port; through every target
    /// port when its registration was made with ALL_TG_PT); under an all registrants type
    /// every registrant does, and this is the one that reserved.
    pub(crate) holder: String,
    pub(crate) holder_target_port: u16,
    pub(crate) kind: ReservationType,
}

impl Reservation {
    fn held_by(it: It<'_>, kind: ReservationType) -> Reservation {
        Reservation {
            holder: it.initiator_port.to_owned(),
            holder_target_port: it.target_port,
            kind,
        }
    }

    fn holder(&self) -> It<'_> {
        It {
            initiator_port: &self.holder,
            target_port: self.holder_target_port,
        }
    }
}

/// The persistent reservation state of a logical unit.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct PersistentReservations {
    /// PRgeneration (SPC-4 §6.15.2): zero at power on.
    pub(crate) generation: u32,
    /// In registration order, which READ KEYS and READ FULL STATUS keep.
    pub(crate) registrations: Vec<Registration>,
    pub(crate) reservation: Option<Reservation>,
    /// The last APTPL received (§5.13.5.1): whether the state survives power loss.
    pub(crate) aptpl: bool,
}

/// Why a service action was not performed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// RESERVATION CONFLICT status.
    Conflict,
    /// CHECK CONDITION with this sense.
    Check(Sense),
}

impl From<Sense> for Refusal {
    fn from(s: Sense) -> Self {
        Refusal::Check(s)
    }
}

/// What a performed service action asks of the logical unit besides the new state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Effects {
    /// Unit attentions for these nexuses (never the issuing nexus).
    pub(crate) unit_attentions: Vec<(Whom, Asc)>,
    /// PREEMPT AND ABORT: the nexuses whose commands are aborted (§5.13.11.2.6).
    pub(crate) aborted: Vec<Whom>,
}

type Performed = Result<Effects, Refusal>;

/// INSUFFICIENT REGISTRATION RESOURCES (SPC-4 §5.13.7, §5.13.8).
fn insufficient_resources() -> Refusal {
    Refusal::Check(Sense::new(
        SenseKey::IllegalRequest,
        Asc::INSUFFICIENT_REGISTRATION_RESOURCES,
    ))
}

fn invalid_parameter(byte: u16, bit: Option<u8>) -> Refusal {
    Refusal::Check(Sense::invalid_field_in_parameter_list(byte, bit))
}

impl PersistentReservations {
    /// The registration of `it` (at most one: registrations never overlap).
    fn registration(&self, it: It<'_>) -> Option<&Registration> {
        self.registrations.iter().find(|r| r.is(it))
    }

    pub(crate) fn key_of(&self, it: It<'_>) -> Option<u64> {
        self.registration(it).map(|r| r.key)
    }

    /// Whether `it` is a persistent reservation holder (SPC-4 §5.13.10).
    pub(crate) fn holds(&self, it: It<'_>) -> bool {
        match &self.reservation {
            Some(r) if r.kind.all_registrants() => self.key_of(it).is_some(),
            Some(r) => self.registration(r.holder()).is_some_and(|h| h.is(it)),
            None => false,
        }
    }

    /// The key READ RESERVATION and PREEMPT see for the reservation: zero for an all
    /// registrants type (SPC-4 §6.15.3).
    fn reservation_key(&self, r: &Reservation) -> u64 {
        if r.kind.all_registrants() {
            0
        } else {
            self.key_of(r.holder()).unwrap_or(0)
        }
    }

    /// Whether a command of `access` from `port` conflicts with the reservation: SPC-4 table
    /// 65 and SBC-4 table 13. Holders run everything; under a registrants only or all
    /// registrants type so does every registrant.
    pub(crate) fn conflicts(&self, it: It<'_>, access: ReservationAccess) -> bool {
        let Some(r) = &self.reservation else {
            return false;
        };
        if self.holds(it) {
            return false;
        }
        match access {
            ReservationAccess::Unrestricted
            | ReservationAccess::Allowed
            | ReservationAccess::OwnRules => false,
            ReservationAccess::Read if r.kind.write_exclusive() => false,
            ReservationAccess::Read
            | ReservationAccess::Write
            | ReservationAccess::AllowedWhen { .. } => {
                !(r.kind.registrants() && self.key_of(it).is_some())
            }
        }
    }

    /// SPC-4 §5.13.3: RESERVE and RELEASE (6)/(10) complete with GOOD and change nothing
    /// when they come from a holder or, under a registrants only or all registrants type,
    /// from a registrant.
    pub(crate) fn exempts_spc2(&self, it: It<'_>) -> bool {
        self.holds(it)
            || self
                .reservation
                .as_ref()
                .is_some_and(|r| r.kind.registrants() && self.key_of(it).is_some())
    }

    /// PERSISTENT RESERVE IN parameter data (SPC-4 §6.15), not truncated.
    pub(crate) fn read(&self, action: PrInAction, ptpl_c: bool, out: &mut Vec<u8>) {
        match action {
            PrInAction::ReadKeys => persistent_reserve::read_keys(
                self.generation,
                self.registrations.iter().map(|r| r.key),
                out,
            ),
            PrInAction::ReadReservation => {
                let reservation = self
                    .reservation
                    .as_ref()
                    .map(|r| (self.reservation_key(r), r.kind));
                persistent_reserve::read_reservation(self.generation, reservation, out)
            }
            PrInAction::ReportCapabilities => persistent_reserve::report_capabilities(
                Capabilities {
                    ptpl_c,
                    ptpl_a: self.aptpl,
                },
                out,
            ),
            PrInAction::ReadFullStatus => persistent_reserve::read_full_status(
                self.generation,
                self.registrations.iter().map(|r| FullStatus {
                    reservation_key: r.key,
                    all_tg_pt: r.all_tg_pt,
                    holds: self
                        .reservation
                        .as_ref()
                        .filter(|_| {
                            self.holds(It {
                                initiator_port: &r.initiator_port,
                                target_port: r.target_port,
                            })
                        })
                        .map(|res| res.kind),
                    relative_target_port_identifier: r.target_port,
                    initiator_port: &r.initiator_port,
                }),
                out,
            ),
        }
    }

    /// Performs a PERSISTENT RESERVE OUT from `port` with parameter list `list` (all the
    /// PARAMETER LIST LENGTH announced). `ptpl_capable`: APTPL = 1 may be honoured;
    /// `target_ports`: the relative identifiers of every target port of the logical unit. On
    /// a refusal the state may be half changed: callers apply it to a copy.
    pub(crate) fn perform(
        &mut self,
        port: It<'_>,
        cmd: &PersistentReserveOut,
        list: &[u8],
        ptpl_capable: bool,
        target_ports: &[u16],
    ) -> Performed {
        use PrOutAction::*;
        // The CDB's fields first: SCOPE and TYPE where they are used (SPC-4 table 216).
        let kind = || persistent_reserve::scope_and_type(cmd.scope_type);
        if matches!(
            cmd.service_action,
            Reserve | Release | Preempt | PreemptAndAbort
        ) {
            kind()?;
        }
        let basic = || -> Result<PrOutParameters, Refusal> {
            let p = PrOutParameters::decode(list)?;
            // SPEC_I_PT is for REGISTER only (SPC-4 §6.16.3).
            if p.spec_i_pt && cmd.service_action != Register {
                return Err(invalid_parameter(20, Some(3)));
            }
            Ok(p)
        };
        let effects = match cmd.service_action {
            Register => self.register(port, &basic()?, false, ptpl_capable)?,
            RegisterAndIgnoreExistingKey => self.register(port, &basic()?, true, ptpl_capable)?,
            Reserve => self.reserve(port, &basic()?, kind()?)?,
            Release => self.release(port, &basic()?, kind()?)?,
            Clear => self.clear(port, &basic()?)?,
            Preempt => self.preempt(port, &basic()?, kind()?, false)?,
            PreemptAndAbort => self.preempt(port, &basic()?, kind()?, true)?,
            RegisterAndMove => {
                let m = RegisterAndMoveParameters::decode(list)?;
                self.register_and_move(port, &m, ptpl_capable, target_ports)?
            }
        };
        if cmd.service_action.increments_generation() {
            self.generation = self.generation.wrapping_add(1);
        }
        Ok(effects)
    }

    /// The nexus is registered with `key` (SPC-4 §6.16.3), else RESERVATION CONFLICT.
    fn check_key(&self, port: It<'_>, key: u64) -> Result<(), Refusal> {
        match self.key_of(port) {
            Some(k) if k == key => Ok(()),
            _ => Err(Refusal::Conflict),
        }
    }

    /// Unit attention `asc` for every registered nexus but `port`.
    fn tell_registrants(&self, port: It<'_>, asc: Asc, effects: &mut Effects) {
        for r in self.registrations.iter().filter(|r| !r.is(port)) {
            effects.unit_attentions.push((r.whom(), asc));
        }
    }

    /// REGISTER and REGISTER AND IGNORE EXISTING KEY (SPC-4 §5.13.7, tables 67 and 68).
    fn register(
        &mut self,
        port: It<'_>,
        p: &PrOutParameters,
        ignore_existing_key: bool,
        ptpl_capable: bool,
    ) -> Performed {
        if p.aptpl && !ptpl_capable {
            return Err(invalid_parameter(20, Some(0)));
        }
        let new_key = p.service_action_reservation_key;
        let mut effects = Effects::default();
        match self.key_of(port) {
            None => {
                if !ignore_existing_key && p.reservation_key != 0 {
                    return Err(Refusal::Conflict);
                }
                if new_key == 0 {
                    // Nothing to register: GOOD, and nothing changes.
                    return Ok(effects);
                }
                // SPEC_I_PT's initiator ports register through the same target port, or every
                // one with ALL_TG_PT (SPC-4 §5.13.7).
                let new = |initiator_port: &str| Registration {
                    initiator_port: initiator_port.to_owned(),
                    target_port: port.target_port,
                    key: new_key,
                    all_tg_pt: p.all_tg_pt,
                };
                let mut added = vec![new(port.initiator_port)];
                // One with ALL_TG_PT over a registration of the initiator port through
                // another target port would make two registrations of one I_T nexus.
                if self.registrations.iter().any(|r| r.overlaps(&added[0])) {
                    return Err(invalid_parameter(20, Some(2)));
                }
                for t in &p.transport_ids {
                    let r = new(&t.initiator_port);
                    // Every nexus SPEC_I_PT names must be unregistered (table 67 note b).
                    let taken = added
                        .iter()
                        .chain(&self.registrations)
                        .any(|x| x.overlaps(&r));
                    if taken {
                        return Err(invalid_parameter(
                            u16::try_from(t.at).unwrap_or(u16::MAX),
                            None,
                        ));
                    }
                    added.push(r);
                }
                // The login takes any InitiatorName; one too long for a TransportID (READ FULL
                // STATUS, the APTPL file) cannot be registered.
                let too_long = port.initiator_port.len() > MAX_INITIATOR_PORT;
                if too_long || self.registrations.len() + added.len() > MAX_REGISTRATIONS {
                    return Err(insufficient_resources());
                }
                self.registrations.extend(added);
            }
            Some(key) => {
                if !ignore_existing_key && p.reservation_key != key {
                    return Err(Refusal::Conflict);
                }
                if p.spec_i_pt {
                    // Table 67 note c.
                    return Err(invalid_parameter(20, Some(3)));
                }
                if new_key == 0 {
                    self.unregister(port, &mut effects);
                } else if let Some(i) = self.registrations.iter().position(|r| r.is(port)) {
                    let mut changed = self.registrations[i].clone();
                    changed.key = new_key;
                    if changed.all_tg_pt != p.all_tg_pt {
                        changed.all_tg_pt = p.all_tg_pt;
                        changed.target_port = port.target_port;
                    }
                    let overlaps = self
                        .registrations
                        .iter()
                        .enumerate()
                        .any(|(j, r)| j != i && r.overlaps(&changed));
                    if overlaps {
                        return Err(invalid_parameter(20, Some(2)));
                    }
                    self.registrations[i] = changed;
                }
            }
        }
        self.aptpl = p.aptpl;
        Ok(effects)
    }

    /// Removes `port`'s registration and, with it, the reservation it holds (SPC-4
    /// §5.13.11.2.3, table 71).
    fn unregister(&mut self, port: It<'_>, effects: &mut Effects) {
        let held = self.holds(port);
        self.registrations.retain(|r| !r.is(port));
        let Some(r) = &self.reservation else {
            return;
        };
        if !held {
            return;
        }
        if r.kind.all_registrants() {
            if self.registrations.is_empty() {
                self.reservation = None;
            }
        } else {
            if r.kind.registrants() {
                self.tell_registrants(port, Asc::RESERVATIONS_RELEASED, effects);
            }
            self.reservation = None;
        }
    }

    /// RESERVE (SPC-4 §5.13.9): one reservation at a time; the holder may repeat it.
    fn reserve(&mut self, port: It<'_>, p: &PrOutParameters, kind: ReservationType) -> Performed {
        self.check_key(port, p.reservation_key)?;
        match &self.reservation {
            Some(r) if self.holds(port) && r.kind == kind => {}
            Some(_) => return Err(Refusal::Conflict),
            None => self.reservation = Some(Reservation::held_by(port, kind)),
        }
        Ok(Effects::default())
    }

    /// RELEASE (SPC-4 §5.13.11.2.2): only a holder releases, with the reservation's type.
    fn release(&mut self, port: It<'_>, p: &PrOutParameters, kind: ReservationType) -> Performed {
        self.check_key(port, p.reservation_key)?;
        let mut effects = Effects::default();
        let Some(r) = &self.reservation else {
            return Ok(effects);
        };
        if !self.holds(port) {
            return Ok(effects);
        }
        if r.kind != kind {
            return Err(Refusal::Check(Sense::new(
                SenseKey::IllegalRequest,
                Asc::INVALID_RELEASE_OF_PERSISTENT_RESERVATION,
            )));
        }
        if r.kind.registrants() {
            self.tell_registrants(port, Asc::RESERVATIONS_RELEASED, &mut effects);
        }
        self.reservation = None;
        Ok(effects)
    }

    /// CLEAR (SPC-4 §5.13.11.2.7): no reservation, no registrations.
    fn clear(&mut self, port: It<'_>, p: &PrOutParameters) -> Performed {
        self.check_key(port, p.reservation_key)?;
        let mut effects = Effects::default();
        self.tell_registrants(port, Asc::RESERVATIONS_PREEMPTED, &mut effects);
        self.registrations.clear();
        self.reservation = None;
        Ok(effects)
    }

    /// PREEMPT and PREEMPT AND ABORT (SPC-4 §5.13.11.2.4–6, table 72 and figure 9).
    fn preempt(
        &mut self,
        port: It<'_>,
        p: &PrOutParameters,
        kind: ReservationType,
        abort: bool,
    ) -> Performed {
        self.check_key(port, p.reservation_key)?;
        let key = p.service_action_reservation_key;
        let holder_key = self.reservation.as_ref().map(|r| self.reservation_key(r));
        let mut effects = match holder_key {
            // Zero names no registration, except an all registrants reservation's holders.
            _ if key == 0 && holder_key != Some(0) => return Err(invalid_parameter(8, None)),
            Some(holder_key) if holder_key == key => self.preempt_reservation(port, key, kind),
            _ => self.remove_registrations(port, key)?,
        };
        if !abort {
            effects.aborted.clear();
        }
        Ok(effects)
    }

    /// Preempts the reservation (SPC-4 §5.13.11.2.4.3): the registrations with `key` (every
    /// other one when `key` is an all registrants reservation's zero) go, except the
    /// preempting nexus's, and it holds a reservation of `kind`.
    fn preempt_reservation(&mut self, port: It<'_>, key: u64, kind: ReservationType) -> Effects {
        let mut effects = Effects::default();
        let old = self.reservation.take().map(|r| r.kind);
        let (removed, kept): (Vec<Registration>, Vec<Registration>) =
            std::mem::take(&mut self.registrations)
                .into_iter()
                .partition(|r| !r.is(port) && (key == 0 || r.key == key));
        self.registrations = kept;
        for r in removed {
            effects
                .unit_attentions
                .push((r.whom(), Asc::REGISTRATIONS_PREEMPTED));
            effects.aborted.push(r.whom());
        }
        if old != Some(kind) {
            self.tell_registrants(port, Asc::RESERVATIONS_RELEASED, &mut effects);
        }
        self.reservation = Some(Reservation::held_by(port, kind));
        effects
    }

    /// Removes the registrations with `key`, the preempting nexus's included (SPC-4
    /// §5.13.11.2.5); a key nobody registered is RESERVATION CONFLICT.
    fn remove_registrations(&mut self, port: It<'_>, key: u64) -> Performed {
        let mut effects = Effects::default();
        let (removed, kept): (Vec<Registration>, Vec<Registration>) =
            std::mem::take(&mut self.registrations)
                .into_iter()
                .partition(|r| r.key == key);
        self.registrations = kept;
        if removed.is_empty() {
            return Err(Refusal::Conflict);
        }
        for r in removed.into_iter().filter(|r| !r.is(port)) {
            effects
                .unit_attentions
                .push((r.whom(), Asc::REGISTRATIONS_PREEMPTED));
            effects.aborted.push(r.whom());
        }
        // An all registrants reservation ends with its last registrant (table 71).
        if self.registrations.is_empty()
            && self
                .reservation
                .as_ref()
                .is_some_and(|r| r.kind.all_registrants())
        {
            self.reservation = None;
        }
        Ok(effects)
    }

    /// REGISTER AND MOVE (SPC-4 §5.13.8, table 70): the holder registers another I_T nexus
    /// and hands it the reservation, keeping its scope and type.
    fn register_and_move(
        &mut self,
        port: It<'_>,
        m: &RegisterAndMoveParameters,
        ptpl_capable: bool,
        target_ports: &[u16],
    ) -> Performed {
        if m.aptpl && !ptpl_capable {
            return Err(invalid_parameter(17, Some(0)));
        }
        self.check_key(port, m.reservation_key)?;
        let Some(r) = &self.reservation else {
            return Err(Sense::invalid_field_in_cdb(1, Some(4)).into());
        };
        if r.kind.all_registrants() || !self.holds(port) {
            return Err(Refusal::Conflict);
        }
        if m.service_action_reservation_key == 0 {
            return Err(invalid_parameter(8, None));
        }
        if !target_ports.contains(&m.relative_target_port_identifier) {
            return Err(invalid_parameter(18, None));
        }
        let destination = It {
            initiator_port: m.transport_id.as_str(),
            target_port: m.relative_target_port_identifier,
        };
        // The mover's own I_T nexus (its registration's, with ALL_TG_PT any target port).
        if self.registration(port).is_some_and(|r| r.is(destination)) {
            return Err(invalid_parameter(24, None));
        }
        let kind = r.kind;
        let full = self.registrations.len() >= MAX_REGISTRATIONS;
        match self.registrations.iter_mut().find(|r| r.is(destination)) {
            Some(r) => r.key = m.service_action_reservation_key,
            None if full => return Err(insufficient_resources()),
            None => self.registrations.push(Registration {
                initiator_port: destination.initiator_port.to_owned(),
                target_port: destination.target_port,
                key: m.service_action_reservation_key,
                all_tg_pt: false,
            }),
        }
        // The destination's registration, which may be one with ALL_TG_PT.
        self.reservation = Some(Reservation::held_by(destination, kind));
        if m.unreg {
            self.registrations.retain(|r| !r.is(port));
        }
        self.aptpl = m.aptpl;
        Ok(Effects::default())
    }
}

#[cfg(test)]
#[path = "persistent_reservation_tests.rs"]
mod tests;
