//! `stint sim`: the device (qos queue + drive model) in virtual time, driven by closed-loop
//! workloads, over the experiments of experiments/README.md.
//!
//! ```no_run
//! let exp = sim::Experiment::load(std::path::Path::new("experiments/b1.toml"))?;
//! let report = sim::sweep::run(&exp, exp.seed, 0, &|| {})?;
//! println!("{}", report.to_json());
//! # Ok::<(), sim::SimError>(())
//! ```

pub mod array;
pub mod device;
pub mod engine;
pub mod erasure;
mod error;
pub mod experiment;
pub mod host;
pub mod meter;
pub mod plot;
pub mod replica;
pub mod report;
#[cfg(test)]
mod same_sequence;
pub mod seeds;
pub mod shipped;
pub mod sla;
pub mod sweep;
mod unit;

pub use engine::{PointResult, PointSetup, Stop};
pub use error::{DeviceError, SimError};
pub use experiment::{Experiment, Point, Variant};
pub use report::Report;
