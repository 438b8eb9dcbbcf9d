//! A latency SLA checked per point, e.g. "99.99 % of reads under 100 ms" (experiments/README.md,
//! A1–A4), and the highest queue depth that meets it.

use crate::engine::PointResult;
use crate::error::SimError;
use serde::Deserialize;

/// `[sla]` in an experiment file.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SlaSpec {
    /// Percentage of commands that must finish within the limit (e.g. 99.99).
    pub percentile: f64,
    pub limit_ms: f64,
    /// "read" (default) or "all".
    #[serde(default = "reads")]
    pub commands: String,
}

fn reads() -> String {
    "read".to_owned()
}

/// A validated SLA.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sla {
    pub fraction: f64,
    pub limit_ns: u64,
    pub reads_only: bool,
}

impl Sla {
    pub fn new(spec: &SlaSpec) -> Result<Self, SimError> {
        if !(spec.percentile > 0.0 && spec.percentile < 100.0) {
            return Err(SimError::field(
                "sla.percentile",
                format!("{} is outside (0, 100)", spec.percentile),
            ));
        }
        if !(spec.limit_ms > 0.0 && spec.limit_ms <= 3.6e6) {
            return Err(SimError::field(
                "sla.limit_ms",
                format!("{} is outside (0, 3600000]", spec.limit_ms),
            ));
        }
        let reads_only = match spec.commands.as_str() {
            "read" => true,
            "all" => false,
            other => {
                return Err(SimError::field(
                    "sla.commands",
                    format!("{other:?} is neither \"read\" nor \"all\""),
                ))
            }
        };
        Ok(Self {
            fraction: spec.percentile / 100.0,
            limit_ns: (spec.limit_ms * 1e6) as u64,
            reads_only,
        })
    }

    /// Whether a point meets the SLA (no measured commands: not met).
    pub fn met(&self, r: &PointResult) -> bool {
        let s = if self.reads_only { &r.reads } else { &r.total };
        s.count() > 0 && s.fraction_below(self.limit_ns) >= self.fraction
    }

    pub fn describe(&self) -> String {
        format!(
            "{}% of {} under {} ms",
            self.fraction * 100.0,
            if self.reads_only { "reads" } else { "commands" },
            self.limit_ns as f64 / 1e6
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sla(text: &str) -> Result<Sla, SimError> {
        Sla::new(&toml::from_str(text).unwrap())
    }

    #[test]
    fn met_counts_the_reads() {
        let s = sla("percentile = 99\nlimit_ms = 100").unwrap();
        let mut r = PointResult::default();
        assert!(!s.met(&r));
        for _ in 0..99 {
            r.reads.record(10_000_000, Some(1));
        }
        r.reads.record(500_000_000, Some(1));
        assert!(s.met(&r));
        r.reads.record(500_000_000, Some(1));
        assert!(!s.met(&r));
    }

    #[test]
    fn bad_fields() {
        assert!(sla("percentile = 100\nlimit_ms = 1")
            .unwrap_err()
            .to_string()
            .starts_with("sla.percentile"));
        assert!(sla("percentile = 9\nlimit_ms = 0")
            .unwrap_err()
            .to_string()
            .starts_with("sla.limit_ms"));
        assert!(sla("percentile = 9\nlimit_ms = 1\ncommands = \"x\"")
            .unwrap_err()
            .to_string()
            .starts_with("sla.commands"));
    }
}
