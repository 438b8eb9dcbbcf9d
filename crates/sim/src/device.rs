//! The simulated device of an experiment: `[drive]` (model and profile) and `[queue]` (depth,
//! ordering, arbitration, admission), built fresh for every point.

use crate::engine::{run_point, PointResult, PointSetup};
use crate::error::SimError;
use crate::experiment::Variant;
use drive::{Drive, Hdd, HddProfile, Instant};
use qos::{
    Admission, Arbitration, CdlPages, DeadlineAware, DeadlineAwareConfig, Queue, QueueConfig,
    Scheduler,
};
use serde::Deserialize;

/// Drive models an experiment can use.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Model {
    Hdd,
    Ssd,
    Instant,
}

/// `[drive]`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DeviceSpec {
    pub model: Model,
    /// Profile TOML file (hdd, ssd); default: the model's built-in profile.
    pub profile: Option<String>,
    /// Overrides the profile's write cache (WCE) setting (hdd).
    pub write_cache: Option<bool>,
    /// Capacity of the instant model ("1TiB").
    pub capacity: Option<String>,
}

/// `[queue]`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct QueueSpec {
    /// Device queue depth, 1..=256 (32: SATA NCQ).
    #[serde(default = "depth")]
    pub depth: usize,
    /// Ordering inside the device queue: "cdl-aware" or a policy of qos::order.
    #[serde(default = "scheduler")]
    pub scheduler: String,
    /// "strict", "rr" or "wrr" (spec/drive-model.md §3.4).
    #[serde(default = "strict")]
    pub arbitration: String,
    /// WRR weights for high, medium, low (1..=256 each).
    pub weights: Option<[u32; 3]>,
    /// WRR arbitration burst (commands per turn); default no limit.
    pub burst: Option<u32>,
    /// "fifo" or "deadline-aware".
    #[serde(default = "fifo")]
    pub admission: String,
}

fn depth() -> usize {
    32
}
fn scheduler() -> String {
    "default".into()
}
fn strict() -> String {
    "strict".into()
}
fn fifo() -> String {
    "fifo".into()
}

impl Default for QueueSpec {
    fn default() -> Self {
        Self {
            depth: depth(),
            scheduler: scheduler(),
            arbitration: strict(),
            weights: None,
            burst: None,
            admission: fifo(),
        }
    }
}

impl QueueSpec {
    /// The queue configuration with `cdl` pages; checked by qos.
    pub fn config(&self, cdl: CdlPages) -> Result<QueueConfig, SimError> {
        let arbitration = match (self.arbitration.as_str(), self.weights) {
            ("strict", None) => Arbitration::Strict,
            ("rr", None) => Arbitration::RoundRobin,
            ("wrr", Some(weights)) => Arbitration::WeightedRoundRobin {
                weights,
                burst: self.burst.unwrap_or(u32::MAX),
            },
            ("wrr", None) => {
                return Err(SimError::field(
                    "queue.weights",
                    "wrr needs weights = [high, medium, low]",
                ))
            }
            ("strict" | "rr", Some(_)) => {
                return Err(SimError::field(
                    "queue.weights",
                    "weights apply to arbitration = \"wrr\" only",
                ))
            }
            (other, _) => {
                return Err(SimError::field(
                    "queue.arbitration",
                    format!("unknown arbitration {other:?} (strict, rr, wrr)"),
                ))
            }
        };
        let admission = match self.admission.as_str() {
            "fifo" => Admission::Fifo,
            "deadline-aware" => Admission::DeadlineAware,
            other => {
                return Err(SimError::field(
                    "queue.admission",
                    format!("unknown admission {other:?} (fifo, deadline-aware)"),
                ))
            }
        };
        let config = QueueConfig {
            depth: self.depth,
            arbitration,
            admission,
            cdl,
        };
        config.validate().map_err(|e| {
            let text = e.to_string();
            // qos names `depth`, `weights.<level>`, `burst`, `cdl`: prefix the table.
            SimError::field(
                &format!("queue.{}", text.split_whitespace().next().unwrap_or("")),
                text,
            )
        })?;
        self.scheduler()?;
        Ok(config)
    }

    /// The ordering of the device queue.
    pub fn scheduler(&self) -> Result<Scheduler, SimError> {
        match self.scheduler.as_str() {
            "cdl-aware" => Ok(Scheduler::CdlAware(DeadlineAware::new(
                DeadlineAwareConfig::default(),
            ))),
            name => ordering(name),
        }
    }
}

/// The drive a variant runs on, prepared once (profiles read and checked at load).
#[derive(Clone, Debug)]
pub enum DriveSetup {
    Hdd(Box<HddProfile>),
    Instant { capacity: u64 },
}

impl DeviceSpec {
    /// Reads the profile (relative paths from `base`) and checks the fields.
    pub fn prepare(&self, base: &std::path::Path) -> Result<DriveSetup, SimError> {
        let read = |p: &str| {
            std::fs::read_to_string(base.join(p))
                .map_err(|e| SimError::field("drive.profile", format!("{p}: {e}")))
        };
        match self.model {
            Model::Hdd => {
                if self.capacity.is_some() {
                    return Err(SimError::field("drive.capacity", "set by the hdd profile"));
                }
                let mut profile = match &self.profile {
                    Some(p) => HddProfile::from_toml(&read(p)?)
                        .map_err(|e| SimError::field("drive.profile", format!("{p}: {e}")))?,
                    None => HddProfile::default_22tb(),
                };
                if let Some(wce) = self.write_cache {
                    profile.cache.write_cache = wce;
                }
                Ok(DriveSetup::Hdd(Box::new(profile)))
            }
            Model::Instant => {
                let text = self.capacity.as_deref().unwrap_or("1TiB");
                let capacity =
                    workload::parse_size(text).map_err(|m| SimError::field("drive.capacity", m))?;
                if capacity < 1 << 20 {
                    return Err(SimError::field("drive.capacity", "must be at least 1MiB"));
                }
                Ok(DriveSetup::Instant { capacity })
            }
            Model::Ssd => Err(SimError::field("drive.model", "ssd is not available yet")),
        }
    }
}

impl DriveSetup {
    /// Capacity in bytes.
    pub fn capacity(&self) -> u64 {
        match self {
            Self::Hdd(p) => p.geometry.capacity_sectors * u64::from(p.geometry.sector_bytes),
            Self::Instant { capacity } => *capacity,
        }
    }
}

fn run_on<D: Drive>(
    drive: D,
    variant: &Variant,
    setup: &PointSetup,
) -> Result<PointResult, SimError> {
    let config = variant.queue.config(variant.cdl)?;
    let queue = Queue::new(config, drive, variant.queue.scheduler()?)
        .map_err(|e| SimError::Device(e.to_string()))?;
    run_point(queue, setup)
}

/// Builds the variant's device and runs one point on it.
pub fn run(variant: &Variant, setup: &PointSetup) -> Result<PointResult, SimError> {
    match &variant.drive {
        DriveSetup::Hdd(p) => {
            let hdd = Hdd::new(p).map_err(|e| SimError::field("drive.profile", e.to_string()))?;
            run_on(hdd, variant, setup)
        }
        DriveSetup::Instant { .. } => run_on(Instant, variant, setup),
    }
}

/// An ordering policy by name.
fn ordering(name: &str) -> Result<Scheduler, SimError> {
    match name {
        "default" => Ok(Scheduler::CdlAware(DeadlineAware::new(
            DeadlineAwareConfig::default(),
        ))),
        other => Err(SimError::field(
            "queue.scheduler",
            format!("unknown scheduler {other:?}"),
        )),
    }
}
