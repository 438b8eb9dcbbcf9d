//! The access state of each target port group (SPC-4 §5.16). A lone server reports its one
//! group in the configured `alua_state` (implicit ALUA only). Where several gateways export the
//! logical unit (docs/gateways.md), the preferred gateway is active/optimized and the others
//! in the configured `alua_state`: active/non-optimized (they run every command) or standby
//! (they refuse media access until they are preferred). The data plane tells which gateway is
//! preferred: the one SET TARGET PORT GROUPS last chose while it is alive, else the first
//! alive in the configuration's order (explicit and implicit ALUA, TPGS 11b).

use crate::logical_unit::{check, LogicalUnit, Ran};
use crate::task::After;
use crate::Completion;
use scsi::alua::{AccessState, TargetPortGroup, TransitionStatus};
use scsi::{Asc, Sense, SenseKey};

impl LogicalUnit {
    /// The state of this server's target port group now.
    pub fn own_access_state(&self) -> AccessState {
        self.access_state(self.config().port_groups.own)
    }

    /// The preferred gateway's group, or the first while none is known.
    fn preferred_or_first(&self) -> Option<u16> {
        self.preferred
            .or(self.config().port_groups.all.first().copied())
    }

    /// The state of target port group `group`.
    fn access_state(&self, group: u16) -> AccessState {
        if !self.config().port_groups.shared() {
            return self.config().alua_state;
        }
        if self.preferred_or_first() == Some(group) {
            AccessState::ActiveOptimized
        } else {
            self.config().alua_state
        }
    }

    /// Every target port group with its state, as REPORT TARGET PORT GROUPS lists them. A
    /// gateway's group may be active/optimized or the configured `alua_state` (the SUPPORTED
    /// bits, the states SET TARGET PORT GROUPS accepts), and PREF marks the preferred one;
    /// a lone server's group may be in any state the configuration gives it. STATUS CODE
    /// says SET TARGET PORT GROUPS made the states while the gateway it chose last is the
    /// preferred one, else implicit behaviour (for a group not in its default state).
    pub(crate) fn target_port_groups(&self) -> Vec<TargetPortGroup> {
        let shared = self.config().port_groups.shared();
        let supported = if shared {
            AccessState::ActiveOptimized.supported_bit() | self.config().alua_state.supported_bit()
        } else {
            AccessState::ALL
                .iter()
                .fold(0, |b, s| b | s.supported_bit())
        };
        let explicit = shared && self.chosen.is_some() && self.chosen == self.preferred;
        self.config()
            .port_groups
            .all
            .iter()
            .map(|&id| {
                let state = self.access_state(id);
                TargetPortGroup {
                    id,
                    state,
                    pref: shared && self.preferred_or_first() == Some(id),
                    supported,
                    relative_target_port: id,
                    status: match () {
                        _ if explicit => TransitionStatus::Explicit,
                        _ if state == AccessState::default() => TransitionStatus::None,
                        _ => TransitionStatus::Implicit,
                    },
                }
            })
            .collect()
    }

    /// The preferred gateway is now the one of target port group `group` (or none known):
    /// where that changes a group's state, every nexus gets ASYMMETRIC ACCESS STATE CHANGED
    /// (SPC-4 §5.16.2.5), on which a host reads the states again; every nexus but the one of
    /// a SET TARGET PORT GROUPS that chose `group` (an explicit transition).
    pub fn set_preferred_gateway(&mut self, group: Option<u16>) {
        let sender = match self.choosing {
            Some((nexus, chosen)) if Some(chosen) == group => {
                self.choosing = None;
                Some(nexus)
            }
            _ => None,
        };
        if group == self.preferred {
            return;
        }
        let states = |lu: &Self| -> Vec<_> {
            let groups = lu.target_port_groups();
            groups.iter().map(|g| (g.state, g.pref)).collect()
        };
        let before = states(self);
        self.preferred = group;
        if states(self) != before {
            self.unit_attentions
                .raise(Asc::ASYMMETRIC_ACCESS_STATE_CHANGED, sender);
        }
    }

    /// SET TARGET PORT GROUPS (SPC-4 §6.45) from `nexus` with parameter list `list`: a gateway
    /// named active/optimized becomes the preferred one of every gateway (the data plane keeps
    /// the choice in the cluster, [`store::Op::Prefer`]); a gateway named in the configured
    /// `alua_state` is left as it is, which is that state unless it is the preferred one and
    /// no other is named active/optimized. Any other state, an unknown group, or a group named
    /// twice is INVALID FIELD IN PARAMETER LIST at its field.
    pub(crate) fn set_target_port_groups(&mut self, nexus: u64, list: &[u8]) -> Ran {
        let descriptors = match scsi::alua::set_target_port_groups(list) {
            Ok(d) => d,
            Err(sense) => return Ran::Done(check(sense)),
        };
        let groups = &self.config().port_groups;
        let mut chosen = None;
        for d in &descriptors {
            if !groups.all.contains(&d.group) {
                return Ran::Done(check(Sense::invalid_field_in_parameter_list(
                    d.at + 2,
                    None,
                )));
            }
            match d.state {
                Some(AccessState::ActiveOptimized) if chosen.is_none() => chosen = Some(d.group),
                Some(s) if s == self.config().alua_state => {}
                // A second group active/optimized, or a state no gateway takes.
                _ => {
                    return Ran::Done(check(Sense::invalid_field_in_parameter_list(d.at, Some(3))))
                }
            }
        }
        // Leaving the preferred gateway in the other state needs another made preferred.
        let preferred = self.preferred_or_first();
        if let Some(d) = descriptors
            .iter()
            .find(|d| chosen.is_none() && Some(d.group) == preferred)
        {
            return Ran::Done(check(Sense::invalid_field_in_parameter_list(d.at, Some(3))));
        }
        match chosen {
            Some(group) => {
                self.choosing = Some((nexus, group));
                Ran::Io(store::Op::Prefer { group }, After::Prefer(group))
            }
            None => Ran::Done(Completion::GOOD),
        }
    }

    /// The data plane kept (or failed to keep) SET TARGET PORT GROUPS' choice of `group`. The
    /// other gateways hear of it before the command completes; a failure changed nothing and
    /// is HARDWARE ERROR, SET TARGET PORT GROUPS COMMAND FAILED (SPC-4 §6.45), also when the
    /// chosen gateway is not alive.
    pub(crate) fn preferred_chosen(&mut self, group: u16, done: &store::Done) -> Ran {
        if let store::Done::Failed(f) = done {
            tracing::warn!(error = %f.error(), group, "SET TARGET PORT GROUPS");
            self.choosing = None;
            return Ran::Done(check(Sense::new(
                SenseKey::HardwareError,
                Asc::SET_TARGET_PORT_GROUPS_COMMAND_FAILED,
            )));
        }
        // `choosing` (set when the command asked) spares the sender, here or where a command
        // that came meanwhile saw the plane's new choice first.
        self.chosen = Some(group);
        self.set_preferred_gateway(Some(group));
        self.announcements
            .push(crate::PeerEvent::AccessStates(group));
        Ran::Done(Completion::GOOD)
    }

    /// What another gateway of the logical unit announced happened there. `shared`: the
    /// states the announcements made this gateway read again from the cluster. A new
    /// preferred gateway comes through the data plane ([`store::Plane::reload_preferred`]).
    pub fn peer_event(
        &mut self,
        now: crate::Ns,
        event: &crate::PeerEvent,
        shared: &crate::SharedStates,
    ) {
        match event {
            crate::PeerEvent::Reset(asc) => self.reset(now, *asc, false),
            crate::PeerEvent::Reservations(effects) => {
                if let Some(state) = &shared.reservations {
                    if let Err(e) = self.reservations.reload(state) {
                        tracing::error!(error = %e, "the gateways' persistent reservations");
                    }
                    self.publish();
                }
                self.reservation_effects(now, effects, None);
            }
            crate::PeerEvent::ModeParameters => {
                if let Some(state) = &shared.mode_pages {
                    if let Err(e) = self.reload_mode(now, state) {
                        tracing::error!(error = %e, "the gateways' mode parameters");
                    }
                }
            }
            crate::PeerEvent::AccessStates(group) => self.chosen = Some(*group),
        }
    }

    /// What the other gateways must hear of, taken once: the caller announces it through
    /// the data plane before the command that did it completes.
    pub fn take_announcements(&mut self) -> Vec<crate::PeerEvent> {
        std::mem::take(&mut self.announcements)
    }

    /// The preferred gateway this logical unit last heard of.
    pub fn preferred_gateway(&self) -> Option<u16> {
        self.preferred
    }
}
