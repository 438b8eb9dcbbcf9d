//! Errors of experiment files and runs; each names the field or stage at fault.

use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SimError {
    /// A bad field: `field` is its path in the file (e.g. `queue.depth`, `job[0].iodepth`).
    Field { field: String, message: String },
    /// The file is not valid TOML or has unknown/mistyped fields (serde's message names them).
    Parse(String),
    /// The device refused a command or a configuration (a bug if the file validated).
    Device(String),
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
            Self::Device(m) => write!(f, "device: {m}"),
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
            profile::BuildError::Device(e) => Self::Device(e.to_string()),
        }
    }
}
