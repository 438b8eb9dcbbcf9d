//! Errors that name the field at fault.

use std::fmt;

/// A job description that cannot run; the message names the job and the field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkloadError {
    /// `job "<name>"` or similar.
    pub job: String,
    /// The field, as spelled in the file (e.g. `iodepth`, `cmdprio[1].percentage`).
    pub field: String,
    pub message: String,
}

impl WorkloadError {
    pub(crate) fn new(job: &str, field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            job: job.to_owned(),
            field: field.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for WorkloadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "job \"{}\": {}: {}", self.job, self.field, self.message)
    }
}

impl std::error::Error for WorkloadError {}
