//! The simulated device of an experiment: `[drive]` (model and profile) and `[queue]` (depth,
//! ordering, arbitration, admission), built fresh for every point.

use crate::engine::{run_point, PointResult, PointSetup};
use crate::unit::SimUnit;
use crate::error::SimError;
use crate::experiment::Variant;
use crate::faults::FaultSetSpec;
use device::{Backing, DeviceQueue, DhCompletion, Kept, LogicalUnit, LuConfig};
use drive::{Drive, DriveConfig, Hdd, Instant, Ssd};
use qos::order::{OrderConfig, ORDER_NAMES};
use qos::{
    Admission, Arbitration, CdlPages, Class, DeadlineAware, DeadlineAwareConfig, QueueConfig,
    Scheduler,
};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::str::FromStr;
use workload::{stream_seed, Rng};

/// Random stream of the fault set (job streams are 0.., the replica u32::MAX).
const FAULT_STREAM: u64 = u64::MAX;

/// `[drive]`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DeviceSpec {
    /// A built-in model (drive::DRIVE_NAMES: instant, hdd, hdd-22tb-cmr, ssd, ssd-nvme-tlc), or
    /// "hdd"/"ssd" with `profile`.
    pub model: String,
    /// Profile TOML file for an hdd or ssd model, relative to the experiment file.
    pub profile: Option<String>,
    /// Overrides the profile's write cache (WCE) setting (hdd).
    pub write_cache: Option<bool>,
    /// Capacity of the instant model ("1TiB"; default 1 TiB).
    pub capacity: Option<String>,
    /// A seeded set of weak/unrecoverable ranges (hdd).
    pub faults: Option<FaultSetSpec>,
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
    /// "strict", "rr" or "wrr" (NVMe arbitration mechanisms).
    #[serde(default = "strict")]
    pub arbitration: String,
    /// WRR weights for high, medium, low (1..=256 each).
    pub weights: Option<[u32; 3]>,
    /// WRR arbitration burst (commands per turn); default no limit.
    pub burst: Option<u32>,
    /// "fifo" or "deadline-aware".
    #[serde(default = "fifo")]
    pub admission: String,
    /// Priority class of commands by DLD, e.g. `{ 1 = "high", 2 = "low" }`, for commands
    /// whose nexus has no class (in `sim` every job's class is its nexus's, so this applies
    /// to `serve`, where a host's only per-command hint is the DLD).
    #[serde(default)]
    pub dld_classes: BTreeMap<String, String>,
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
            dld_classes: BTreeMap::new(),
        }
    }
}

impl QueueSpec {
    /// The queue configuration with `cdl` pages; checked by qos.
    pub fn config(&self, cdl: CdlPages) -> Result<QueueConfig, SimError> {
        if self.burst.is_some() && self.arbitration != "wrr" {
            return Err(SimError::field(
                "queue.burst",
                "burst applies to arbitration = \"wrr\" only",
            ));
        }
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

    /// `dld_classes` as the device takes it: a class per DLD 0..=7.
    pub fn dld_classes(&self) -> Result<[Option<Class>; 8], SimError> {
        let mut classes = [None; 8];
        for (dld, name) in &self.dld_classes {
            let at = format!("queue.dld_classes.{dld}");
            let slot = dld
                .parse::<usize>()
                .ok()
                .and_then(|d| classes.get_mut(d))
                .ok_or_else(|| SimError::field(&at, "a DLD is 0..=7"))?;
            *slot = Some(Class::from_name(name).ok_or_else(|| {
                SimError::field(
                    &at,
                    format!("unknown class {name:?} (urgent, high, medium, low)"),
                )
            })?);
        }
        Ok(classes)
    }

    /// The ordering of the device queue: "default" (qos::order's default policy), a policy of
    /// qos::order with parameters ("sptf", "asptf:rate=0.02"), or
    /// "cdl-aware[:aggressiveness=..,base=..]".
    pub fn scheduler(&self) -> Result<Scheduler, SimError> {
        let err = |m: String| SimError::field("queue.scheduler", m);
        let text = self.scheduler.trim();
        match text
            .split_once(':')
            .map_or((text, ""), |(n, p)| (n.trim(), p))
        {
            ("cdl-aware", params) => {
                let config = DeadlineAwareConfig::from_str(params)
                    .map_err(|e| err(format!("cdl-aware: {e}")))?;
                Ok(Scheduler::CdlAware(Box::new(DeadlineAware::new(config))))
            }
            ("default", "") => Ok(Scheduler::Policy(OrderConfig::default().build())),
            _ => {
                let order = OrderConfig::from_str(text).map_err(|e| {
                    err(format!(
                        "{e} (default, cdl-aware, or one of {})",
                        ORDER_NAMES.join(", ")
                    ))
                })?;
                Ok(Scheduler::Policy(order.build()))
            }
        }
    }
}

/// The drive a variant runs on, prepared once (profiles read and checked at load).
#[derive(Clone, Debug)]
pub struct DriveSetup {
    pub config: DriveConfig,
    pub faults: Option<FaultSetSpec>,
    /// Seed of the fault set when it is fixed (a `stint serve` LUN's `seed`); `None`: drawn
    /// from the run's seed.
    pub fault_seed: Option<u64>,
    /// Bytes addressable by the workload.
    pub capacity: u64,
}

impl DeviceSpec {
    /// Reads the profile (relative paths from `base`) and checks the fields.
    pub fn prepare(&self, base: &std::path::Path) -> Result<DriveSetup, SimError> {
        let mut config = match &self.profile {
            Some(p) => {
                let text = std::fs::read_to_string(base.join(p))
                    .map_err(|e| SimError::field("drive.profile", format!("{p}: {e}")))?;
                DriveConfig::from_profile(&self.model, &text)
                    .map_err(|e| SimError::field("drive.profile", format!("{p}: {e}")))?
            }
            None => DriveConfig::by_name(&self.model)
                .map_err(|e| SimError::field("drive.model", e.to_string()))?,
        };
        if let Some(wce) = self.write_cache {
            match &mut config {
                DriveConfig::Hdd(p) => p.cache.write_cache = wce,
                _ => {
                    return Err(SimError::field(
                        "drive.write_cache",
                        "applies to hdd models only",
                    ))
                }
            }
        }
        let capacity = match &config {
            DriveConfig::Hdd(p) => p.geometry.capacity_sectors * u64::from(p.geometry.sector_bytes),
            DriveConfig::Ssd(p) => p.capacity_sectors * u64::from(p.sector_bytes),
            DriveConfig::Instant => {
                let text = self.capacity.as_deref().unwrap_or("1TiB");
                workload::parse_size(text).map_err(|m| SimError::field("drive.capacity", m))?
            }
        };
        if self.capacity.is_some() && !matches!(config, DriveConfig::Instant) {
            return Err(SimError::field(
                "drive.capacity",
                "only the instant model takes a capacity",
            ));
        }
        if capacity < 1 << 20 {
            return Err(SimError::field("drive.capacity", "must be at least 1MiB"));
        }
        if let Some(f) = &self.faults {
            f.validate()?;
            if !matches!(config, DriveConfig::Hdd(_)) {
                return Err(SimError::field(
                    "drive.faults",
                    "applies to hdd models only",
                ));
            }
        }
        // Built once here so a profile the model refuses fails at load, not in a sweep thread.
        config
            .build()
            .map_err(|e| SimError::field("drive.profile", e.to_string()))?;
        Ok(DriveSetup {
            config,
            faults: self.faults.clone(),
            fault_seed: None,
            capacity,
        })
    }
}

impl DriveSetup {
    /// The write-back cache (WCE) the model starts with; `None` for a model without one.
    pub fn write_cache(&self) -> Option<bool> {
        match &self.config {
            DriveConfig::Hdd(p) => Some(p.cache.write_cache),
            DriveConfig::Ssd(_) | DriveConfig::Instant => None,
        }
    }

    /// Sets the write-back cache (WCE) the model starts with; a model without one (ssd,
    /// instant) is left as it is, its timing the same either way.
    pub fn set_write_cache(&mut self, on: bool) {
        if let DriveConfig::Hdd(p) = &mut self.config {
            p.cache.write_cache = on;
        }
    }

    /// A fresh drive in its initial state; an HDD's fault set is drawn from the fixed fault
    /// seed, else from `seed`.
    pub fn build(&self, seed: u64) -> Result<Box<dyn Drive + Send>, SimError> {
        let seed = self.fault_seed.unwrap_or(seed);
        let err = |e: drive::ProfileError| SimError::field("drive.profile", e.to_string());
        Ok(match &self.config {
            DriveConfig::Hdd(p) => {
                let mut hdd = Hdd::new(p).map_err(err)?;
                if let Some(f) = &self.faults {
                    let mut rng = Rng::new(stream_seed(seed, FAULT_STREAM));
                    hdd.set_faults(f.generate(p.geometry.capacity_sectors, &mut rng))
                        .map_err(err)?;
                }
                Box::new(hdd)
            }
            DriveConfig::Ssd(p) => Box::new(Ssd::new(p).map_err(err)?),
            DriveConfig::Instant => Box::new(Instant),
        })
    }

    /// MEDIUM ROTATION RATE of VPD page B1h (SBC-4 table 237): the disk's rpm, or 0001h for
    /// a non-rotating medium.
    pub fn medium_rotation_rate(&self) -> u16 {
        match &self.config {
            DriveConfig::Hdd(p) => u16::try_from(p.geometry.rpm).unwrap_or(1),
            DriveConfig::Ssd(_) | DriveConfig::Instant => 1,
        }
    }

    /// Bytes per sector of the model: the LU's logical block size.
    pub fn block_size(&self) -> u32 {
        match &self.config {
            DriveConfig::Hdd(p) => p.geometry.sector_bytes,
            DriveConfig::Ssd(p) => p.sector_bytes,
            DriveConfig::Instant => 512,
        }
    }
}

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
    /// The device queue of the logical unit: its timing, queue and CDL pages.
    pub fn device_queue(&self) -> Result<DeviceQueue, SimError> {
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
    ) -> Result<LogicalUnit, SimError> {
        config.medium_rotation_rate = self.drive.medium_rotation_rate();
        let queue = self.device_queue()?;
        LogicalUnit::new(config, backing, kept, Some(queue))
            .map_err(|e| SimError::Device(e.to_string()))
    }
}

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
    parts.logical_unit(config, backing, Kept::default())
}
