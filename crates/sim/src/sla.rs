//! A latency SLA checked per point, e.g. "99.99 % of the reads with DLD 1 under 100 ms"
//! (experiments/README.md, A1–A5), and the highest queue depth that meets it.

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
    /// Only the commands sent with this duration limit descriptor (0..=7), e.g. the reads a
    /// host marks as the latency-critical ones.
    pub dld: Option<u8>,
}

fn reads() -> String {
    "read".to_owned()
}

/// The commands an SLA covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scope {
    pub reads_only: bool,
    pub dld: Option<u8>,
}

impl Scope {
    /// Whether a command (a write or a read, with its DLD) is one of them.
    pub fn covers(&self, write: bool, dld: u8) -> bool {
        !(self.reads_only && write) && self.dld.is_none_or(|d| d == dld)
    }
}

/// A validated SLA.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sla {
    /// As written, e.g. 99.99.
    pub percentile: f64,
    pub fraction: f64,
    /// The share of commands allowed beyond the limit, in parts per million (100: 99.99 %).
    pub tail_ppm: u64,
    pub limit_ns: u64,
    pub scope: Scope,
}

/// One point judged against an SLA.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Verdict {
    /// Commands the SLA covers that the point measured.
    pub ios: u64,
    /// Their latency at the SLA's percentile (ms) and the samples beyond it.
    pub at_percentile_ms: f64,
    pub beyond: u64,
    pub met: bool,
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
        if let Some(d) = spec.dld.filter(|d| *d > 7) {
            return Err(SimError::field(
                "sla.dld",
                format!("{d} is outside 0..=7 (a duration limit descriptor)"),
            ));
        }
        Ok(Self {
            percentile: spec.percentile,
            fraction: spec.percentile / 100.0,
            tail_ppm: ((100.0 - spec.percentile) * 1e4).round() as u64,
            limit_ns: (spec.limit_ms * 1e6) as u64,
            scope: Scope {
                reads_only,
                dld: spec.dld,
            },
        })
    }

    /// Whether a point meets the SLA (no measured commands: not met).
    pub fn met(&self, r: &PointResult) -> bool {
        r.sla.count() > 0 && r.sla.fraction_below(self.limit_ns) >= self.fraction
    }

    /// The point judged: what the SLA covers, its latency at the SLA's percentile and whether
    /// it is met.
    pub fn verdict(&self, r: &PointResult) -> Verdict {
        let (ns, beyond) = r.sla.percentile_ns(self.tail_ppm);
        Verdict {
            ios: r.sla.count(),
            at_percentile_ms: (ns as f64 / 1e3).round() / 1e3,
            beyond,
            met: self.met(r),
        }
    }

    /// "p99.99": the percentile's name as tables print it.
    pub fn percentile_name(&self) -> String {
        format!("p{}", self.percentile)
    }

    pub fn describe(&self) -> String {
        let what = if self.scope.reads_only {
            "reads"
        } else {
            "commands"
        };
        let dld = match self.scope.dld {
            Some(0) => " without a DLD".to_owned(),
            Some(d) => format!(" with DLD {d}"),
            None => String::new(),
        };
        format!(
            "{}% of {what}{dld} under {} ms",
            self.percentile,
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
    fn met_counts_what_the_sla_covers() {
        let s = sla("percentile = 99\nlimit_ms = 100").unwrap();
        let mut r = PointResult::default();
        assert!(!s.met(&r));
        for _ in 0..99 {
            r.sla.record(1_000_000, Some(1));
        }
        r.sla.record(500_000_000, Some(1));
        assert!(s.met(&r));
        let v = s.verdict(&r);
        assert_eq!(
            (v.ios, v.at_percentile_ms, v.beyond, v.met),
            (100, 1.0, 1, true)
        );
        r.sla.record(500_000_000, Some(1));
        assert!(!s.met(&r));
        assert_eq!(s.percentile_name(), "p99");
    }

    #[test]
    fn scope_by_direction_and_dld() {
        let r1 = sla("percentile = 99.99\nlimit_ms = 100\ndld = 1").unwrap();
        assert_eq!(r1.tail_ppm, 100);
        assert!(r1.scope.covers(false, 1));
        assert!(!r1.scope.covers(true, 1) && !r1.scope.covers(false, 2));
        assert_eq!(r1.describe(), "99.99% of reads with DLD 1 under 100 ms");
        let all = sla("percentile = 99.9\nlimit_ms = 5\ncommands = \"all\"").unwrap();
        assert!(all.scope.covers(true, 3) && all.scope.covers(false, 0));
        assert_eq!(all.describe(), "99.9% of commands under 5 ms");
        let plain = sla("percentile = 50\nlimit_ms = 5\ndld = 0").unwrap();
        assert_eq!(plain.describe(), "50% of reads without a DLD under 5 ms");
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
        assert!(sla("percentile = 9\nlimit_ms = 1\ndld = 8")
            .unwrap_err()
            .to_string()
            .starts_with("sla.dld"));
    }
}
