//! Logical block provisioning of a thin-provisioned logical unit (SBC-4 §4.7.3): what its
//! store holds mapped, counted for the Logical Block Provisioning log page in sets of
//! 2^THRESHOLD EXPONENT logical blocks, and the thresholds of its mode page. A value the core
//! owns; the store's usage comes in from the data plane (`Op::Usage`).

use scsi::log::ProvisioningResources;
use scsi::provisioning::Thresholds;

pub(crate) struct Provisioning {
    /// Capacity in logical blocks, and their size.
    blocks: u64,
    block_size: u32,
    /// THRESHOLD EXPONENT (VPD page B2h).
    exponent: u8,
    /// A threshold is enabled: writes ask the store for its usage and check the thresholds.
    enabled: bool,
    /// The USED LBA MAPPING RESOURCE COUNT the thresholds last saw.
    used: u32,
}

impl Provisioning {
    /// THRESHOLD EXPONENT: the store's unmap granularity in logical blocks (what one mapping
    /// resource is), at least 2 blocks (0 would mean no thresholds), and large enough that the
    /// capacity fits the log page's 32-bit counts.
    pub(crate) fn new(blocks: u64, block_size: u32, unmap_granularity: u64) -> Self {
        let granularity = unmap_granularity / u64::from(block_size);
        let mut exponent = granularity.max(2).next_power_of_two().trailing_zeros();
        while blocks >> exponent > u64::from(u32::MAX) {
            exponent += 1;
        }
        Provisioning {
            blocks,
            block_size,
            exponent: exponent as u8,
            enabled: false,
            used: 0,
        }
    }

    /// The capacity changed; the exponent stays (VPD B2h told the host), so the log page's
    /// counts saturate on a unit grown past 2^32 sets.
    pub(crate) fn resize(&mut self, blocks: u64) {
        self.blocks = blocks;
    }

    pub(crate) fn exponent(&self) -> u8 {
        self.exponent
    }

    /// Whether writes must check the thresholds.
    pub(crate) fn enabled(&self) -> bool {
        self.enabled
    }

    /// The Logical Block Provisioning log page's counts for `allocated` bytes: the sets held
    /// (rounded up) and the rest of the capacity.
    pub(crate) fn resources(&self, allocated: u64) -> ProvisioningResources {
        let set = u64::from(self.block_size) << self.exponent;
        let total = self
            .blocks
            .saturating_mul(self.block_size.into())
            .div_ceil(set);
        let used = allocated.div_ceil(set).min(total);
        let count = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
        ProvisioningResources {
            available: count(total - used),
            used: count(used),
        }
    }

    /// The thresholds in force became `thresholds`, with the store holding `allocated` bytes
    /// (`None`: it cannot tell): writes check the resources while one is enabled, from the
    /// count as it is now.
    pub(crate) fn arm(&mut self, thresholds: Option<Thresholds>, allocated: Option<u64>) {
        self.enabled = thresholds.is_some_and(|t| t.available.enabled || t.used.enabled);
        if let (true, Some(bytes)) = (self.enabled, allocated) {
            self.used = self.resources(bytes).used;
        }
    }

    /// After a command changed the medium, the store holds `allocated` bytes: whether the
    /// resources crossed an enabled threshold since the last check (SBC-4 §4.7.3.7).
    pub(crate) fn crossed(&mut self, thresholds: Option<Thresholds>, allocated: u64) -> bool {
        let now = self.resources(allocated);
        let last = std::mem::replace(&mut self.used, now.used);
        let total = u64::from(now.available) + u64::from(now.used);
        let before = ProvisioningResources {
            available: u32::try_from(total.saturating_sub(last.into())).unwrap_or(u32::MAX),
            used: last,
        };
        thresholds.is_some_and(|t| t.crossed(&before, &now))
    }
}
