//! Workloads shared by `stint sim` and `stint bench`: fio-like job descriptions (TOML), seeded
//! I/O generators and latency statistics with HDR histograms.
//!
//! A [`JobSpec`] is what a file says; [`JobSpec::compile`] checks it against the device's
//! capacity and gives a [`Job`]; a [`Generator`] turns a job and a seed into [`Io`]s, or
//! replays the job's [`Trace`].

mod error;
mod generator;
mod job;
mod rng;
mod size;
mod stats;
mod trace;

pub use error::WorkloadError;
pub use generator::{Generator, Io};
pub use job::{
    BlockSizes, CmdPrio, Job, JobSpec, MixBy, Prio, Replay, Rw, SizeSplit, TraceTiming, MAX_IODEPTH,
};
pub use rng::{stream_seed, Rng};
pub use size::parse_size;
pub use stats::{
    LatencyStats, LatencySummary, SamplesBeyond, StatsSummary, MIN_SAMPLES_BEYOND, PERCENTILE_NAMES,
};
pub use trace::{Trace, TraceFormat, TraceIo};

/// Logical block size the generators address in (fio and the published experiments use
/// 512-byte sectors).
pub const SECTOR: u64 = 512;
