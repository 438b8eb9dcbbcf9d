//! The access state of each target port group (SPC-4 §5.16, implicit ALUA). A lone server
//! reports its one group in the configured `alua_state`. Where several gateways export the
//! logical unit (docs/gateways.md), the preferred gateway is active/optimized and the others
//! in the configured `alua_state`: active/non-optimized (they run every command) or standby
//! (they refuse media access until they are preferred); the preferred one is the first in the
//! configuration's order that is alive, as the data plane sees the store's clients.

use crate::logical_unit::LogicalUnit;
use scsi::alua::{AccessState, TargetPortGroup};
use scsi::Asc;

impl LogicalUnit {
    /// The state of this server's target port group now.
    pub fn own_access_state(&self) -> AccessState {
        self.access_state(self.config().port_groups.own)
    }

    /// The state of target port group `group`.
    fn access_state(&self, group: u16) -> AccessState {
        let groups = &self.config().port_groups;
        if !groups.shared() {
            return self.config().alua_state;
        }
        if self.preferred.or(groups.all.first().copied()) == Some(group) {
            AccessState::ActiveOptimized
        } else {
            self.config().alua_state
        }
    }

    /// Every target port group with its state, as REPORT TARGET PORT GROUPS lists them.
    pub(crate) fn target_port_groups(&self) -> Vec<TargetPortGroup> {
        self.config()
            .port_groups
            .all
            .iter()
            .map(|&id| TargetPortGroup {
                id,
                state: self.access_state(id),
                relative_target_port: id,
            })
            .collect()
    }

    /// The preferred gateway is now the one of target port group `group` (or none known):
    /// where that changes a group's state, every nexus gets ASYMMETRIC ACCESS STATE CHANGED
    /// (SPC-4 §5.16.2.3, an implicit transition), on which a host reads the states again.
    pub fn set_preferred_gateway(&mut self, group: Option<u16>) {
        if group == self.preferred {
            return;
        }
        let before = self.target_port_groups();
        self.preferred = group;
        if self.target_port_groups() != before {
            self.unit_attentions
                .raise(Asc::ASYMMETRIC_ACCESS_STATE_CHANGED, None);
        }
    }

    /// What another gateway of the logical unit announced happened there. `shared`: for a
    /// change of the persistent reservations, their state as read from the cluster after
    /// the announcement (`None`: the read failed, the state here stays as it was).
    pub fn peer_event(
        &mut self,
        now: crate::Ns,
        event: &crate::PeerEvent,
        shared: Option<&store::SharedState>,
    ) {
        match event {
            crate::PeerEvent::Reset(asc) => self.reset(now, *asc),
            crate::PeerEvent::Reservations(effects) => {
                if let Some(state) = shared {
                    if let Err(e) = self.reservations.reload(state) {
                        tracing::error!(error = %e, "the gateways' persistent reservations");
                    }
                }
                self.reservation_effects(now, effects, None);
            }
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
