//! Errors of experiment files and runs; each names the field or stage at fault.

use std::fmt;

#[derive(Debug)]
pub enum SimError {
    /// A bad field: `field` is its path in the file (e.g. `queue.depth`, `job[0].iodepth`).
    Field { field: String, message: String },
    /// The file is not valid TOML or has unknown/mistyped fields (serde's message names them).
    Parse(String),
    /// The device could not be built or refused a command (a bug if the file validated).
    Device(DeviceError),
    /// A thread of the sweep panicked (a bug).
    Panicked,
}

/// What went wrong with a simulated logical unit.
#[derive(Debug)]
pub enum DeviceError {
    /// The logical unit refused its configuration.
    Config(device::ConfigError),
    /// A workload's I/O has no READ(16) or WRITE(16) that says it (an LBA or length the CDB
    /// cannot hold).
    Unencodable {
        io: String,
        error: scsi::encode::EncodeError,
    },
    /// It refused a command at once: the workload does not fit the device.
    Refused {
        cdb: Vec<u8>,
        sense: Option<scsi::Sense>,
    },
    /// The run has no I_T nexus for a class of its jobs.
    NoNexus(qos::Class),
    /// An erasure-coded array has no drive of this index.
    NoDrive(usize),
}

impl SimError {
    pub(crate) fn field(field: &str, message: impl Into<String>) -> Self {
        Self::Field {
            field: field.to_owned(),
            message: message.into(),
        }
    }

    /// The same error inside `variant`.
    pub(crate) fn in_variant(self, variant: &str) -> Self {
        match self {
            Self::Field { field, message } => Self::Field {
                field,
                message: format!("{message} (in variant \"{variant}\")"),
            },
            Self::Parse(m) => Self::Parse(format!("variant \"{variant}\": {m}")),
            other => other,
        }
    }
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Field { field, message } => write!(f, "{field}: {message}"),
            Self::Parse(m) => f.write_str(m),
            Self::Device(e) => write!(f, "device: {e}"),
            Self::Panicked => f.write_str("a sweep thread panicked"),
        }
    }
}

impl fmt::Display for DeviceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Config(e) => e.fmt(f),
            Self::Unencodable { io, error } => write!(f, "{io}: {error}"),
            Self::Refused { cdb, sense } => write!(f, "the device refused {cdb:02x?}: {sense:?}"),
            Self::NoNexus(class) => write!(f, "no nexus for class {class:?}"),
            Self::NoDrive(d) => write!(f, "no drive {d}"),
        }
    }
}

impl std::error::Error for SimError {}

impl From<workload::WorkloadError> for SimError {
    fn from(e: workload::WorkloadError) -> Self {
        Self::Field {
            field: format!("job \"{}\".{}", e.job, e.field),
            message: e.message,
        }
    }
}

impl From<profile::FieldError> for SimError {
    fn from(e: profile::FieldError) -> Self {
        Self::Field {
            field: e.field,
            message: e.message,
        }
    }
}

impl From<profile::BuildError> for SimError {
    fn from(e: profile::BuildError) -> Self {
        match e {
            profile::BuildError::Field(e) => e.into(),
            profile::BuildError::Device(e) => Self::Device(DeviceError::Config(e)),
        }
    }
}
