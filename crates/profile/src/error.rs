//! Errors of the `[drive]`, `[queue]` and `[cdl]` tables and of the logical unit they build.

use std::fmt;

/// A bad field: `field` is its path from the table's name (`queue.depth`,
/// `cdl.read[0].dld`); the file it came from adds where the table sits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub(crate) fn new(field: &str, message: impl Into<String>) -> Self {
        Self {
            field: field.to_owned(),
            message: message.into(),
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

impl std::error::Error for FieldError {}

/// Why a logical unit with a device queue could not be built.
#[derive(Debug)]
pub enum BuildError {
    /// The description has a bad field.
    Field(FieldError),
    /// The logical unit refused its configuration or could not read its saved state.
    Device(device::ConfigError),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Field(e) => e.fmt(f),
            Self::Device(e) => write!(f, "device: {e}"),
        }
    }
}

impl std::error::Error for BuildError {}

impl From<FieldError> for BuildError {
    fn from(e: FieldError) -> Self {
        Self::Field(e)
    }
}

impl From<device::ConfigError> for BuildError {
    fn from(e: device::ConfigError) -> Self {
        Self::Device(e)
    }
}
