//! The logical unit a description builds: `stint serve` exports it, `stint sim` runs it.

use crate::drive::DriveSetup;
use crate::error::BuildError;
use crate::queue::QueueSpec;
use device::{DeviceQueue, DhCompletion, LogicalUnit, LuConfig};
use qos::CdlPages;
use store::Store;

/// The parts of a device description that shape a logical unit's device queue.
pub struct DeviceParts<'a> {
    pub drive: &'a DriveSetup,
    pub queue: &'a QueueSpec,
    pub cdl: CdlPages,
    pub dh: DhCompletion,
    /// Seeds the drive's fault set.
    pub seed: u64,
}

impl DeviceParts<'_> {
    /// The logical unit `stint serve` exports and `stint sim` runs: `config` and `store`
    /// give its identity and data, the description its timing, queue and CDL pages.
    pub fn logical_unit(
        &self,
        mut config: LuConfig,
        store: Box<dyn Store>,
    ) -> Result<LogicalUnit, BuildError> {
        config.medium_rotation_rate = self.drive.medium_rotation_rate();
        let queue = DeviceQueue {
            queue: self.queue.config(self.cdl)?,
            scheduler: self.queue.scheduler()?,
            drive: self.drive.build(self.seed)?,
            dh: self.dh,
            dld_classes: self.queue.dld_classes()?,
        };
        Ok(LogicalUnit::with_device_queue(config, store, queue)?)
    }
}
