//! Choosing a drive model by name or from a profile file.

use crate::error::ProfileError;
use crate::hdd::{Hdd, HddProfile};
use crate::instant::Instant;
use crate::ssd::{Ssd, SsdProfile};
use crate::Drive;

/// A drive model with its profile.
#[derive(Clone, Debug, PartialEq)]
pub enum DriveConfig {
    /// No timing (the fast path).
    Instant,
    Hdd(Box<HddProfile>),
    Ssd(Box<SsdProfile>),
}

/// Names accepted by [`DriveConfig::by_name`].
pub const DRIVE_NAMES: &[&str] = &["instant", "hdd", "hdd-22tb-cmr", "ssd", "ssd-nvme-tlc"];

impl DriveConfig {
    /// A built-in model: `instant`, `hdd` (= `hdd-22tb-cmr`) or `ssd` (= `ssd-nvme-tlc`).
    pub fn by_name(name: &str) -> Result<Self, ProfileError> {
        match name {
            "instant" => Ok(Self::Instant),
            "hdd" | "hdd-22tb-cmr" => Ok(Self::Hdd(Box::new(HddProfile::default_22tb()))),
            "ssd" | "ssd-nvme-tlc" => Ok(Self::Ssd(Box::new(SsdProfile::default_nvme()))),
            other => Err(ProfileError::invalid(
                "drive",
                format!(
                    "unknown model `{other}`; expected one of {}",
                    DRIVE_NAMES.join(", ")
                ),
            )),
        }
    }

    /// A profile file's text for `model` (`hdd` or `ssd`).
    pub fn from_profile(model: &str, toml_text: &str) -> Result<Self, ProfileError> {
        match model {
            "hdd" => Ok(Self::Hdd(Box::new(HddProfile::from_toml(toml_text)?))),
            "ssd" => Ok(Self::Ssd(Box::new(SsdProfile::from_toml(toml_text)?))),
            other => Err(ProfileError::invalid(
                "model",
                format!("`{other}` has no profile file; expected hdd or ssd"),
            )),
        }
    }

    /// A fresh drive in its initial state.
    pub fn build(&self) -> Result<Box<dyn Drive + Send>, ProfileError> {
        Ok(match self {
            Self::Instant => Box::new(Instant),
            Self::Hdd(p) => Box::new(Hdd::new(p)?),
            Self::Ssd(p) => Box::new(Ssd::new(p)?),
        })
    }
}
