//! The device queue a description builds: `stint serve` exports the logical unit it times,
//! `stint sim` runs it.

use crate::drive::DriveSetup;
use crate::error::BuildError;
use crate::queue::QueueSpec;
use device::{Backing, DeviceQueue, DhCompletion, Kept, LogicalUnit, LuConfig};
use qos::CdlPages;

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
    /// The device queue: the description's timing, queue and CDL pages.
    pub fn device_queue(&self) -> Result<DeviceQueue, BuildError> {
        Ok(DeviceQueue {
            queue: self.queue.config(self.cdl)?,
            scheduler: self.queue.scheduler()?,
            drive: self.drive.build(self.seed)?,
            dh: self.dh,
            dld_classes: self.queue.dld_classes()?,
        })
    }

    /// The logical unit `stint serve` exports and `stint sim` runs: `config`, `backing` and
    /// `kept` give its identity, store and kept state, the description its timing, queue and
    /// CDL pages.
    pub fn logical_unit(
        &self,
        mut config: LuConfig,
        backing: Backing,
        kept: Kept,
    ) -> Result<LogicalUnit, BuildError> {
        config.medium_rotation_rate = self.drive.medium_rotation_rate();
        Ok(LogicalUnit::new(
            config,
            backing,
            kept,
            Some(self.device_queue()?),
        )?)
    }
}
