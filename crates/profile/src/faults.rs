//! Seeded fault sets for the HDD model (experiments/README.md, B4: "per-LBA-range fault sets …
//! seed their locations and sizes from the fault RNG stream").

use crate::error::FieldError;
use drive::FaultRange;
use serde::Deserialize;
use workload::Rng;

/// `[drive.faults]`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FaultSetSpec {
    /// Number of fault ranges.
    pub ranges: u64,
    /// Fraction of the capacity they cover together (0 < fraction ≤ 0.5).
    pub fraction: f64,
    /// Retry revolutions a weak range needs, drawn uniformly from [min, max].
    #[serde(default = "retries")]
    pub retries: [u32; 2],
    /// Share of the ranges that never read back (the whole retry ladder, then MEDIUM ERROR).
    #[serde(default)]
    pub unrecoverable: f64,
}

fn retries() -> [u32; 2] {
    [1, 8]
}

impl FaultSetSpec {
    pub fn validate(&self) -> Result<(), FieldError> {
        if !(1..=1_000_000).contains(&self.ranges) {
            return Err(FieldError::new(
                "drive.faults.ranges",
                format!("{} is outside 1..=1000000", self.ranges),
            ));
        }
        if !(self.fraction > 0.0 && self.fraction <= 0.5) {
            return Err(FieldError::new(
                "drive.faults.fraction",
                format!("{} is outside (0, 0.5]", self.fraction),
            ));
        }
        let [lo, hi] = self.retries;
        if lo == 0 || lo > hi || hi > 1000 {
            return Err(FieldError::new(
                "drive.faults.retries",
                format!("[{lo}, {hi}] must satisfy 1 <= min <= max <= 1000"),
            ));
        }
        if !(0.0..=1.0).contains(&self.unrecoverable) {
            return Err(FieldError::new(
                "drive.faults.unrecoverable",
                format!("{} is outside 0..=1", self.unrecoverable),
            ));
        }
        Ok(())
    }

    /// The fault ranges of a drive of `capacity` sectors: one range at a random place in each
    /// of `ranges` equal strata, so they never overlap and stay sorted.
    pub fn generate(&self, capacity: u64, rng: &mut Rng) -> Vec<FaultRange> {
        let stratum = capacity / self.ranges.max(1);
        let sectors = ((capacity as f64 * self.fraction / self.ranges as f64) as u64)
            .clamp(1, stratum.max(1));
        let [lo, hi] = self.retries;
        (0..self.ranges)
            .filter(|_| stratum >= sectors)
            .map(|i| {
                let start_lba = i * stratum + rng.below(stratum - sectors + 1);
                if rng.chance(self.unrecoverable) {
                    FaultRange {
                        start_lba,
                        sectors,
                        retries: 0,
                        unrecoverable: true,
                    }
                } else {
                    let retries = lo + rng.below(u64::from(hi - lo) + 1) as u32;
                    FaultRange {
                        start_lba,
                        sectors,
                        retries,
                        unrecoverable: false,
                    }
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(text: &str) -> FaultSetSpec {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn ranges_cover_the_fraction_without_overlap() {
        let s = spec("ranges = 100\nfraction = 0.01\nretries = [2, 4]\nunrecoverable = 0.1");
        s.validate().unwrap();
        let capacity = 1_000_000_000;
        let ranges = s.generate(capacity, &mut Rng::new(1));
        assert_eq!(ranges.len(), 100);
        let covered: u64 = ranges.iter().map(|r| r.sectors).sum();
        assert!((covered as f64 / capacity as f64 - 0.01).abs() < 1e-6);
        for w in ranges.windows(2) {
            assert!(w[0].end_lba() <= w[1].start_lba);
        }
        assert!(ranges.last().unwrap().end_lba() <= capacity);
        assert!(ranges
            .iter()
            .all(|r| r.unrecoverable || (2..=4).contains(&r.retries)));
        let bad = ranges.iter().filter(|r| r.unrecoverable).count();
        assert!((3..=20).contains(&bad), "{bad}");
        assert_eq!(ranges, s.generate(capacity, &mut Rng::new(1)));
    }

    #[test]
    fn bad_fields() {
        for (text, field) in [
            ("ranges = 0\nfraction = 0.1", "drive.faults.ranges"),
            ("ranges = 5\nfraction = 0.9", "drive.faults.fraction"),
            (
                "ranges = 5\nfraction = 0.1\nretries = [3, 2]",
                "drive.faults.retries",
            ),
            (
                "ranges = 5\nfraction = 0.1\nunrecoverable = 2",
                "drive.faults.unrecoverable",
            ),
        ] {
            assert!(
                spec(text)
                    .validate()
                    .unwrap_err()
                    .to_string()
                    .starts_with(field),
                "{text}"
            );
        }
    }
}
