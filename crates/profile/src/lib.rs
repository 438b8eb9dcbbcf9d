//! The `[drive]`, `[queue]` and `[cdl]` tables that `stint.toml` (a LUN's
//! `[target.lun.drive]`, ...) and experiment files share: one serde type each, checked with
//! errors that name the field, and the logical unit with a device queue they describe.
//!
//! ```
//! let drive = profile::DeviceSpec {
//!     model: "hdd".into(),
//!     profile: None,
//!     write_cache: None,
//!     capacity: None,
//!     faults: None,
//! };
//! let drive = drive.prepare(std::path::Path::new("."))?;
//! assert_eq!(drive.block_size(), 512);
//! # Ok::<(), profile::FieldError>(())
//! ```

mod cdl;
// `crate::drive` below: this module holds `[drive]`, the drive crate its models.
mod drive;
mod error;
mod faults;
mod logical_unit;
mod queue;

pub use crate::drive::{DeviceSpec, DriveSetup};
pub use cdl::{CdlSpec, DescriptorSpec};
pub use error::{BuildError, FieldError};
pub use faults::FaultSetSpec;
pub use logical_unit::DeviceParts;
pub use queue::QueueSpec;
