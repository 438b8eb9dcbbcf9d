//! Unit attention conditions, kept per I_T nexus (SAM-5 §5.14).

use crate::Nexus;
use scsi::Asc;
use std::collections::VecDeque;

/// More pending conditions than this for one nexus add nothing: the oldest are reported first
/// and a host re-reads state after any of them.
const MAX_PENDING: usize = 8;

/// Pending unit attentions of one logical unit, by nexus id. A nexus seen for the first time
/// gets POWER ON, RESET, OR BUS DEVICE RESET OCCURRED (as tgt and LIO do; libiscsi clears it
/// with TEST UNIT READY after login).
#[derive(Default)]
pub(crate) struct UnitAttentions {
    /// Looked up by every command, so a list searched from the front: a logical unit has a
    /// handful of nexuses, and comparing their ids beats hashing one.
    nexuses: Vec<(u64, Pending)>,
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
    pub(crate) fn on_command(&mut self, nexus: &Nexus, exempt: bool) -> Option<Asc> {
        if exempt {
            self.register(nexus);
            None
        } else {
            self.take(nexus)
        }
    }

    /// Make sure `nexus` is known (first contact raises the power-on condition).
    pub(crate) fn register(&mut self, nexus: &Nexus) {
        if self.get_mut(nexus.id).is_none() {
            self.nexuses.push((nexus.id, first_contact(nexus)));
        }
    }

    fn get_mut(&mut self, nexus: u64) -> Option<&mut Pending> {
        self.nexuses
            .iter_mut()
            .find(|(id, _)| *id == nexus)
            .map(|(_, p)| p)
    }

    /// Report-and-clear the oldest pending condition for `nexus`, if any.
    pub(crate) fn take(&mut self, nexus: &Nexus) -> Option<Asc> {
        match self.get_mut(nexus.id) {
            Some(p) => p.conditions.pop_front(),
            None => {
                let mut p = first_contact(nexus);
                let asc = p.conditions.pop_front();
                self.nexuses.push((nexus.id, p));
                asc
            }
        }
    }

    /// Raise `asc` for every known nexus except `except`.
    pub(crate) fn raise(&mut self, asc: Asc, except: Option<u64>) {
        for (id, p) in &mut self.nexuses {
            if Some(*id) != except {
                push(&mut p.conditions, asc);
            }
        }
    }

    /// Raise `asc` for `nexus` alone, if it is known.
    pub(crate) fn raise_for(&mut self, nexus: u64, asc: Asc) {
        if let Some(p) = self.get_mut(nexus) {
            push(&mut p.conditions, asc);
        }
    }

    /// Raise `asc` for the known nexuses of `initiator_port` other than `except`.
    pub(crate) fn raise_for_port(&mut self, initiator_port: &str, asc: Asc, except: u64) {
        for (id, p) in &mut self.nexuses {
            if *id != except && p.initiator_port == initiator_port {
                push(&mut p.conditions, asc);
            }
        }
    }

    /// The known nexuses of `initiator_port`, in ascending order.
    pub(crate) fn nexuses_of(&self, initiator_port: &str) -> Vec<u64> {
        let mut ids: Vec<u64> = self
            .nexuses
            .iter()
            .filter(|(_, p)| p.initiator_port == initiator_port)
            .map(|(id, _)| *id)
            .collect();
        ids.sort_unstable();
        ids
    }

    /// The initiator port of a known nexus.
    pub(crate) fn port_of(&self, nexus: u64) -> Option<&str> {
        self.nexuses
            .iter()
            .find(|(id, _)| *id == nexus)
            .map(|(_, p)| p.initiator_port.as_str())
    }

    /// The nexus is gone (SAM-5 §6.3.4); its conditions go with it.
    pub(crate) fn forget(&mut self, nexus: u64) {
        self.nexuses.retain(|(id, _)| *id != nexus);
    }
}

/// Queue `asc` unless it is pending already or the queue is full.
fn push(conditions: &mut VecDeque<Asc>, asc: Asc) {
    if !conditions.contains(&asc) && conditions.len() < MAX_PENDING {
        conditions.push_back(asc);
    }
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
        let mut ua = UnitAttentions::default();
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
        let mut ua = UnitAttentions::default();
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
