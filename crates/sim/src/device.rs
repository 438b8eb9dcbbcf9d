//! The simulated device of an experiment: the logical unit its `[drive]`, `[queue]` and
//! `[cdl]` describe, built fresh for every point.

use crate::engine::{run_point, PointResult, PointSetup};
use crate::error::SimError;
use crate::experiment::Variant;
use crate::unit::SimUnit;
use device::{Backing, DhCompletion, Kept, LogicalUnit, LuConfig};
use profile::DeviceParts;

/// Builds the variant's logical unit (data never stored: the simulator only times commands)
/// and runs one point on it, or on an array of them for an erasure-coded variant.
pub fn run(variant: &Variant, setup: &PointSetup) -> Result<PointResult, SimError> {
    let Some(layout) = &variant.erasure else {
        let mut lu = SimUnit::new(logical_unit(variant, setup.seed)?);
        return run_point(&mut lu, setup);
    };
    let luns = (0..layout.drives as usize)
        .map(|d| logical_unit(variant, crate::array::drive_seed(setup.seed, d)).map(SimUnit::new))
        .collect::<Result<Vec<_>, _>>()?;
    crate::array::run(luns, layout, variant.drive.capacity, setup)
}

/// The variant's logical unit, its fault set drawn from `seed`.
fn logical_unit(variant: &Variant, seed: u64) -> Result<LogicalUnit, SimError> {
    let capacity = variant.drive.capacity;
    let mut config = LuConfig::new("iqn.2026-11.dev.stint:sim", 0, capacity);
    config.block_size = variant.drive.block_size();
    // The null data plane holds the capacity and keeps nothing.
    let backing = Backing {
        len: capacity,
        unmap_granularity: 0,
        allocated: None,
    };
    let parts = DeviceParts {
        drive: &variant.drive,
        queue: &variant.queue,
        cdl: variant.cdl,
        dh: DhCompletion::default(),
        seed,
    };
    Ok(parts.logical_unit(config, backing, Kept::default())?)
}
