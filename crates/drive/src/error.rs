//! Errors from loading and checking drive profiles. Each names the offending field.

use std::fmt;

/// A drive profile that could not be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProfileError {
    /// The TOML did not parse or did not match the schema; the message from the TOML parser
    /// names the key (e.g. "missing field `rpm`", "unknown field `rmp`") and the line.
    Parse(String),
    /// A field parsed but its value is out of range.
    Invalid { field: String, reason: String },
}

impl ProfileError {
    pub(crate) fn invalid(field: &str, reason: impl Into<String>) -> Self {
        Self::Invalid {
            field: field.to_string(),
            reason: reason.into(),
        }
    }
}

impl fmt::Display for ProfileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Parse(msg) => write!(f, "drive profile: {msg}"),
            Self::Invalid { field, reason } => write!(f, "drive profile: field `{field}` {reason}"),
        }
    }
}

impl std::error::Error for ProfileError {}

/// Checks that a finite `value` lies in `min..=max` (profile units), naming `field` if not.
pub(crate) fn check_range(
    field: &str,
    value: f64,
    min: f64,
    max: f64,
) -> Result<f64, ProfileError> {
    if value.is_finite() && value >= min && value <= max {
        Ok(value)
    } else {
        Err(ProfileError::invalid(
            field,
            format!("must be between {min} and {max}, got {value}"),
        ))
    }
}
