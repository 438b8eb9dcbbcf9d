//! Unit attention conditions, kept per I_T nexus (SAM-5 §5.14).

use crate::Nexus;
use parking_lot::RwLock;
use scsi::Asc;
use std::collections::{BTreeMap, VecDeque};

/// More pending conditions than this for one nexus add nothing: the oldest are reported first
/// and a host re-reads state after any of them.
const MAX_PENDING: usize = 8;

/// Pending unit attentions of one logical unit, by nexus id. A nexus seen for the first time
/// gets POWER ON, RESET, OR BUS DEVICE RESET OCCURRED (as tgt and LIO do; libiscsi clears it
/// with TEST UNIT READY after login).
#[derive(Default)]
pub(crate) struct UnitAttentions {
    nexuses: RwLock<BTreeMap<u64, Pending>>,
}

/// The conditions of one nexus, and its initiator port: persistent reservations name I_T
/// nexuses by initiator port (SPC-4 §5.13.5.1), so their conditions are raised by port.
struct Pending {
    initiator_port: String,
    conditions: VecDeque<Asc>,
}

/// The conditions of a nexus seen for the first time.
fn first_contact(nexus: &Nexus) -> Pending {
    Pending {
        initiator_port: nexus.initiator_port.clone(),
        conditions: VecDeque::from([Asc::POWER_ON_RESET_OR_BUS_DEVICE_RESET]),
    }
}

impl UnitAttentions {
    /// What a command from `nexus` meets: the oldest pending condition, which it reports and
    /// clears, or none. An `exempt` command (the table's NO_UNIT_ATTENTION: INQUIRY, REPORT
    /// LUNS, REQUEST SENSE, which returns the condition as its data; SAM-5 §5.14) only makes
    /// the nexus known.
    pub(crate) fn on_command(&self, nexus: &Nexus, exempt: bool) -> Option<Asc> {
        if exempt {
            self.register(nexus);
            None
        } else {
            self.take(nexus)
        }
    }

    /// [`Self::on_command`] by the logical unit's only user (no lock taken).
    pub(crate) fn on_command_mut(&mut self, nexus: &Nexus, exempt: bool) -> Option<Asc> {
        let map = self.nexuses.get_mut();
        if exempt {
            map.entry(nexus.id).or_insert_with(|| first_contact(nexus));
            None
        } else {
            take_from(map, nexus)
        }
    }

    /// Make sure `nexus` is known (first contact raises the power-on condition).
    pub(crate) fn register(&self, nexus: &Nexus) {
        if self.nexuses.read().contains_key(&nexus.id) {
            return;
        }
        self.nexuses
            .write()
            .entry(nexus.id)
            .or_insert_with(|| first_contact(nexus));
    }

    /// Report-and-clear the oldest pending condition for `nexus`, if any. The common case (a
    /// known nexus with nothing pending) takes only the shared lock.
    pub(crate) fn take(&self, nexus: &Nexus) -> Option<Asc> {
        if self
            .nexuses
            .read()
            .get(&nexus.id)
            .is_some_and(|p| p.conditions.is_empty())
        {
            return None;
        }
        take_from(&mut self.nexuses.write(), nexus)
    }

    /// Raise `asc` for every known nexus except `except`.
    pub(crate) fn raise(&self, asc: Asc, except: Option<u64>) {
        let mut map = self.nexuses.write();
        for (id, p) in map.iter_mut() {
            if Some(*id) != except {
                push(&mut p.conditions, asc);
            }
        }
    }

    /// Raise `asc` for `nexus` alone, if it is known.
    pub(crate) fn raise_for(&self, nexus: u64, asc: Asc) {
        if let Some(p) = self.nexuses.write().get_mut(&nexus) {
            push(&mut p.conditions, asc);
        }
    }

    /// Raise `asc` for the known nexuses of `initiator_port` other than `except`.
    pub(crate) fn raise_for_port(&self, initiator_port: &str, asc: Asc, except: u64) {
        for (id, p) in self.nexuses.write().iter_mut() {
            if *id != except && p.initiator_port == initiator_port {
                push(&mut p.conditions, asc);
            }
        }
    }

    /// The known nexuses of `initiator_port`.
    pub(crate) fn nexuses_of(&self, initiator_port: &str) -> Vec<u64> {
        let map = self.nexuses.read();
        map.iter()
            .filter(|(_, p)| p.initiator_port == initiator_port)
            .map(|(id, _)| *id)
            .collect()
    }

    /// The nexus is gone (SAM-5 §6.3.4); its conditions go with it.
    pub(crate) fn forget(&self, nexus: u64) {
        self.nexuses.write().remove(&nexus);
    }
}

/// Queue `asc` unless it is pending already or the queue is full.
fn push(conditions: &mut VecDeque<Asc>, asc: Asc) {
    if !conditions.contains(&asc) && conditions.len() < MAX_PENDING {
        conditions.push_back(asc);
    }
}

/// [`UnitAttentions::take`] on the map.
fn take_from(map: &mut BTreeMap<u64, Pending>, nexus: &Nexus) -> Option<Asc> {
    map.entry(nexus.id)
        .or_insert_with(|| first_contact(nexus))
        .conditions
        .pop_front()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nexus(id: u64, initiator_port: &str) -> Nexus {
        Nexus {
            id,
            initiator_port: initiator_port.into(),
            class: None,
            privileged: false,
        }
    }

    #[test]
    fn first_contact_then_per_nexus_conditions() {
        let ua = UnitAttentions::default();
        let (one, two) = (nexus(1, "a,i,0x1"), nexus(2, "b,i,0x2"));
        assert_eq!(ua.take(&one), Some(Asc::POWER_ON_RESET_OR_BUS_DEVICE_RESET));
        assert_eq!(ua.take(&one), None);
        ua.register(&two);
        ua.raise(Asc::MODE_PARAMETERS_CHANGED, Some(1));
        assert_eq!(ua.take(&one), None, "the changing nexus gets no UA");
        assert_eq!(ua.take(&two), Some(Asc::POWER_ON_RESET_OR_BUS_DEVICE_RESET));
        assert_eq!(ua.take(&two), Some(Asc::MODE_PARAMETERS_CHANGED));
        assert_eq!(ua.take(&two), None);
        ua.raise(Asc::BUS_DEVICE_RESET_FUNCTION_OCCURRED, None);
        ua.raise(Asc::BUS_DEVICE_RESET_FUNCTION_OCCURRED, None);
        assert_eq!(ua.take(&one), Some(Asc::BUS_DEVICE_RESET_FUNCTION_OCCURRED));
        assert_eq!(ua.take(&one), None, "duplicates are merged");
        ua.forget(2);
        assert_eq!(
            ua.take(&two),
            Some(Asc::POWER_ON_RESET_OR_BUS_DEVICE_RESET),
            "a forgotten nexus starts afresh"
        );
    }

    #[test]
    fn conditions_by_initiator_port() {
        let ua = UnitAttentions::default();
        let (one, two, three) = (
            nexus(1, "a,i,0x1"),
            nexus(2, "b,i,0x2"),
            nexus(3, "b,i,0x2"),
        );
        for n in [&one, &two, &three] {
            ua.take(n);
        }
        assert_eq!(ua.nexuses_of("b,i,0x2"), [2, 3]);
        ua.raise_for_port("b,i,0x2", Asc::RESERVATIONS_PREEMPTED, 3);
        assert_eq!(ua.take(&one), None);
        assert_eq!(ua.take(&two), Some(Asc::RESERVATIONS_PREEMPTED));
        assert_eq!(ua.take(&three), None, "the excepted nexus");
    }
}
