//! Unit attention conditions, kept per I_T nexus (SAM-5 §5.14).

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
    nexuses: RwLock<BTreeMap<u64, VecDeque<Asc>>>,
}

/// INQUIRY, REPORT LUNS and REQUEST SENSE neither report nor clear a unit attention
/// (SAM-5 §5.14; REQUEST SENSE returns it as its data).
const EXEMPT: [u8; 3] = [0x12, 0xA0, 0x03];

/// The conditions of a nexus seen for the first time.
fn first_contact() -> VecDeque<Asc> {
    VecDeque::from([Asc::POWER_ON_RESET_OR_BUS_DEVICE_RESET])
}

impl UnitAttentions {
    /// What a command with `opcode` from `nexus` meets: the oldest pending condition, which
    /// it reports and clears, or none (the exempt commands only make the nexus known).
    pub(crate) fn on_command(&self, nexus: u64, opcode: u8) -> Option<Asc> {
        if EXEMPT.contains(&opcode) {
            self.register(nexus);
            None
        } else {
            self.take(nexus)
        }
    }

    /// [`Self::on_command`] by the logical unit's only user (no lock taken).
    pub(crate) fn on_command_mut(&mut self, nexus: u64, opcode: u8) -> Option<Asc> {
        let map = self.nexuses.get_mut();
        if EXEMPT.contains(&opcode) {
            map.entry(nexus).or_insert_with(first_contact);
            None
        } else {
            take_from(map, nexus)
        }
    }

    /// Make sure `nexus` is known (first contact raises the power-on condition).
    pub(crate) fn register(&self, nexus: u64) {
        if self.nexuses.read().contains_key(&nexus) {
            return;
        }
        self.nexuses
            .write()
            .entry(nexus)
            .or_insert_with(first_contact);
    }

    /// Report-and-clear the oldest pending condition for `nexus`, if any. The common case (a
    /// known nexus with nothing pending) takes only the shared lock.
    pub(crate) fn take(&self, nexus: u64) -> Option<Asc> {
        if self
            .nexuses
            .read()
            .get(&nexus)
            .is_some_and(|q| q.is_empty())
        {
            return None;
        }
        take_from(&mut self.nexuses.write(), nexus)
    }

    /// Raise `asc` for every known nexus except `except`.
    pub(crate) fn raise(&self, asc: Asc, except: Option<u64>) {
        let mut map = self.nexuses.write();
        for (id, q) in map.iter_mut() {
            if Some(*id) != except && !q.contains(&asc) && q.len() < MAX_PENDING {
                q.push_back(asc);
            }
        }
    }

    /// Raise `asc` for `nexus` alone, if it is known.
    pub(crate) fn raise_for(&self, nexus: u64, asc: Asc) {
        if let Some(q) = self.nexuses.write().get_mut(&nexus) {
            if !q.contains(&asc) && q.len() < MAX_PENDING {
                q.push_back(asc);
            }
        }
    }

    /// The nexus is gone (SAM-5 §6.3.4); its conditions go with it.
    pub(crate) fn forget(&self, nexus: u64) {
        self.nexuses.write().remove(&nexus);
    }
}

/// [`UnitAttentions::take`] on the map.
fn take_from(map: &mut BTreeMap<u64, VecDeque<Asc>>, nexus: u64) -> Option<Asc> {
    match map.get_mut(&nexus) {
        Some(q) => q.pop_front(),
        None => map.entry(nexus).or_insert_with(first_contact).pop_front(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_contact_then_per_nexus_conditions() {
        let ua = UnitAttentions::default();
        assert_eq!(ua.take(1), Some(Asc::POWER_ON_RESET_OR_BUS_DEVICE_RESET));
        assert_eq!(ua.take(1), None);
        ua.register(2);
        ua.raise(Asc::MODE_PARAMETERS_CHANGED, Some(1));
        assert_eq!(ua.take(1), None, "the changing nexus gets no UA");
        assert_eq!(ua.take(2), Some(Asc::POWER_ON_RESET_OR_BUS_DEVICE_RESET));
        assert_eq!(ua.take(2), Some(Asc::MODE_PARAMETERS_CHANGED));
        assert_eq!(ua.take(2), None);
        ua.raise(Asc::BUS_DEVICE_RESET_FUNCTION_OCCURRED, None);
        ua.raise(Asc::BUS_DEVICE_RESET_FUNCTION_OCCURRED, None);
        assert_eq!(ua.take(1), Some(Asc::BUS_DEVICE_RESET_FUNCTION_OCCURRED));
        assert_eq!(ua.take(1), None, "duplicates are merged");
        ua.forget(2);
        assert_eq!(
            ua.take(2),
            Some(Asc::POWER_ON_RESET_OR_BUS_DEVICE_RESET),
            "a forgotten nexus starts afresh"
        );
    }
}
