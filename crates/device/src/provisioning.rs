//! Logical block provisioning of a thin-provisioned logical unit (SBC-4 §4.7.3): what its
//! store holds mapped, counted for the Logical Block Provisioning log page in sets of
//! 2^THRESHOLD EXPONENT logical blocks.

use crate::LogicalUnit;
use scsi::log::{Pages, ProvisioningResources};

impl LogicalUnit {
    /// THRESHOLD EXPONENT (VPD page B2h): the store's unmap granularity in logical blocks
    /// (what one mapping resource is), at least 2 blocks (0 would mean no thresholds), and
    /// large enough that the capacity fits the log page's 32-bit counts.
    pub(crate) fn threshold_exponent(&self) -> u8 {
        let granularity = self.store.unmap_granularity() / u64::from(self.block_size());
        let mut exponent = granularity.max(2).next_power_of_two().trailing_zeros();
        while self.blocks() >> exponent > u64::from(u32::MAX) {
            exponent += 1;
        }
        exponent as u8
    }

    /// The Logical Block Provisioning log page's counts: the sets the store holds allocated
    /// (rounded up) and the rest of the capacity; `None` on a fully provisioned unit or a
    /// store that cannot tell.
    pub(crate) fn provisioning_resources(&self) -> Option<ProvisioningResources> {
        if !self.config().thin_provisioning {
            return None;
        }
        let set = u64::from(self.block_size()) << self.threshold_exponent();
        let total = self
            .blocks()
            .saturating_mul(self.block_size().into())
            .div_ceil(set);
        let used = self.store.allocated_bytes()?.div_ceil(set).min(total);
        let count = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
        Some(ProvisioningResources {
            available: count(total - used),
            used: count(used),
        })
    }

    /// The optional log pages this logical unit has.
    pub(crate) fn log_pages(&self) -> Pages {
        Pages {
            cdl: self.has_device_queue(),
            provisioning: self.config().thin_provisioning && self.store.allocated_bytes().is_some(),
        }
    }
}
