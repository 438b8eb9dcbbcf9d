//! `[drive]`: the timing model of a logical unit (a built-in model or a profile file), its
//! write cache and its seeded fault set, read and checked once and built fresh per run.

use crate::error::FieldError;
use crate::faults::FaultSetSpec;
use drive::{Drive, DriveConfig, Hdd, Instant, Ssd};
use serde::Deserialize;
use workload::{stream_seed, Rng};

/// Random stream of the fault set, apart from those `stint sim` draws its jobs (0..) and its
/// replica (u32::MAX) from.
const FAULT_STREAM: u64 = u64::MAX;

/// `[drive]`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DeviceSpec {
    /// A built-in model (drive::DRIVE_NAMES: instant, hdd, hdd-22tb-cmr, ssd, ssd-nvme-tlc), or
    /// "hdd"/"ssd" with `profile`.
    pub model: String,
    /// Profile TOML file for an hdd or ssd model, relative to the file that names it.
    pub profile: Option<String>,
    /// Overrides the profile's write cache (WCE) setting (hdd).
    pub write_cache: Option<bool>,
    /// Capacity of the instant model ("1TiB"; default 1 TiB).
    pub capacity: Option<String>,
    /// A seeded set of weak/unrecoverable ranges (hdd).
    pub faults: Option<FaultSetSpec>,
}

/// The drive of a logical unit, prepared once (profiles read and checked at load).
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
    pub fn prepare(&self, base: &std::path::Path) -> Result<DriveSetup, FieldError> {
        let mut config = match &self.profile {
            Some(p) => {
                let text = std::fs::read_to_string(base.join(p))
                    .map_err(|e| FieldError::new("drive.profile", format!("{p}: {e}")))?;
                DriveConfig::from_profile(&self.model, &text)
                    .map_err(|e| FieldError::new("drive.profile", format!("{p}: {e}")))?
            }
            None => DriveConfig::by_name(&self.model)
                .map_err(|e| FieldError::new("drive.model", e.to_string()))?,
        };
        if let Some(wce) = self.write_cache {
            match &mut config {
                DriveConfig::Hdd(p) => p.cache.write_cache = wce,
                _ => {
                    return Err(FieldError::new(
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
                workload::parse_size(text).map_err(|m| FieldError::new("drive.capacity", m))?
            }
        };
        if self.capacity.is_some() && !matches!(config, DriveConfig::Instant) {
            return Err(FieldError::new(
                "drive.capacity",
                "only the instant model takes a capacity",
            ));
        }
        if capacity < 1 << 20 {
            return Err(FieldError::new("drive.capacity", "must be at least 1MiB"));
        }
        if let Some(f) = &self.faults {
            f.validate()?;
            if !matches!(config, DriveConfig::Hdd(_)) {
                return Err(FieldError::new(
                    "drive.faults",
                    "applies to hdd models only",
                ));
            }
        }
        // Built once here so a profile the model refuses fails at load, not in a sweep thread.
        config
            .build()
            .map_err(|e| FieldError::new("drive.profile", e.to_string()))?;
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
    pub fn build(&self, seed: u64) -> Result<Box<dyn Drive + Send>, FieldError> {
        let seed = self.fault_seed.unwrap_or(seed);
        let err = |e: drive::ProfileError| FieldError::new("drive.profile", e.to_string());
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
