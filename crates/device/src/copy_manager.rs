//! The copy manager's view of the process (SPC-4 §5.16.2): every logical unit a third-party
//! copy may name as a copy source or destination, found by its VPD 83h designators. One
//! registry is shared by every target of a `stint serve`, so EXTENDED COPY crosses LUNs and
//! targets of the same process.

use crate::LogicalUnit;
use parking_lot::RwLock;
use scsi::third_party_copy::CscdDescriptor;
use std::sync::{Arc, Weak};

/// The logical units a copy may reach. Holds them weakly: a unit that is dropped drops out.
#[derive(Default)]
pub struct CopyManager {
    units: RwLock<Vec<Weak<LogicalUnit>>>,
}

impl CopyManager {
    /// Make `lu` reachable through this copy manager and make it the one `lu`'s copies use.
    /// A logical unit belongs to one copy manager: `false` if it already had one.
    pub fn register(self: &Arc<Self>, lu: &Arc<LogicalUnit>) -> bool {
        if lu.copy_manager.set(Arc::clone(self)).is_err() {
            return false;
        }
        let mut units = self.units.write();
        units.retain(|u| u.strong_count() > 0);
        units.push(Arc::downgrade(lu));
        true
    }

    /// The logical unit a CSCD descriptor names, if one of ours has that designator.
    pub(crate) fn find(&self, cscd: &CscdDescriptor) -> Option<Arc<LogicalUnit>> {
        self.units
            .read()
            .iter()
            .filter_map(Weak::upgrade)
            .find(|lu| lu.designated_by(cscd))
    }
}
