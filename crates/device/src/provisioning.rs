//! Logical block provisioning of a thin-provisioned logical unit (SBC-4 §4.7.3): what its
//! store holds mapped, counted for the Logical Block Provisioning log page in sets of
//! 2^THRESHOLD EXPONENT logical blocks, and the thresholds of its mode page.

use crate::LogicalUnit;
use scsi::log::{Pages, ProvisioningResources};
use scsi::provisioning::Thresholds;
use scsi::Asc;
use std::sync::atomic::Ordering;

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

    /// The thresholds in force became `thresholds`: writes check the resources while one is
    /// enabled, from the count as it is now.
    pub(crate) fn arm_thresholds(&self, thresholds: Option<Thresholds>) {
        let enabled = thresholds.is_some_and(|t| t.available.enabled || t.used.enabled);
        if enabled {
            let used = self.provisioning_resources().map_or(0, |r| r.used);
            self.provisioning_used.store(used.into(), Ordering::Relaxed);
        }
        self.thresholds_enabled.store(enabled, Ordering::Relaxed);
    }

    /// After a command from `nexus` changed the medium: if the resources crossed an enabled
    /// threshold since the last check, THIN PROVISIONING SOFT THRESHOLD REACHED for every
    /// nexus, or with SITUA for `nexus` alone (SBC-4 §4.7.3.7).
    pub(crate) fn check_thresholds(&self, nexus: u64) {
        let Some(now) = self.provisioning_resources() else {
            return;
        };
        let last = self
            .provisioning_used
            .swap(now.used.into(), Ordering::Relaxed);
        let total = u64::from(now.available) + u64::from(now.used);
        let before = ProvisioningResources {
            available: u32::try_from(total.saturating_sub(last)).unwrap_or(u32::MAX),
            used: u32::try_from(last).unwrap_or(u32::MAX),
        };
        let Some(thresholds) = self.mode.lock().provisioning else {
            return;
        };
        if thresholds.crossed(&before, &now) {
            let asc = Asc::THIN_PROVISIONING_SOFT_THRESHOLD_REACHED;
            if thresholds.situa {
                self.unit_attentions.raise_for(nexus, asc);
            } else {
                self.unit_attentions.raise(asc, None);
            }
        }
    }
}
