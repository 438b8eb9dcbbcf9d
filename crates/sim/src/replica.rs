//! The replica a fast-failed read is re-served from (experiments/README.md, B4: "an external
//! latency distribution"): a fixed network/decode cost plus an exponential tail.

use drive::Ns;
use serde::Deserialize;
use workload::Rng;

/// `[replica]` in an experiment file.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ReplicaSpec {
    /// Fixed part, ms.
    pub base_ms: f64,
    /// Mean of the exponential part, ms.
    #[serde(default)]
    pub mean_ms: f64,
}

/// Validated replica latency model.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Replica {
    base: f64,
    mean: f64,
}

impl Replica {
    pub fn new(spec: ReplicaSpec) -> Result<Self, crate::SimError> {
        for (field, v) in [
            ("replica.base_ms", spec.base_ms),
            ("replica.mean_ms", spec.mean_ms),
        ] {
            if !(0.0..=60_000.0).contains(&v) {
                return Err(crate::SimError::field(
                    field,
                    format!("{v} is outside 0..=60000"),
                ));
            }
        }
        Ok(Self {
            base: spec.base_ms * 1e6,
            mean: spec.mean_ms * 1e6,
        })
    }

    /// One re-serve latency in ns.
    pub fn sample(&self, rng: &mut Rng) -> Ns {
        let tail = if self.mean > 0.0 {
            rng.exponential(self.mean)
        } else {
            0.0
        };
        (self.base + tail).min(1e15) as Ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_base_plus_tail() {
        let r = Replica::new(ReplicaSpec {
            base_ms: 2.0,
            mean_ms: 3.0,
        })
        .unwrap();
        let mut rng = Rng::new(1);
        let xs: Vec<Ns> = (0..10_000).map(|_| r.sample(&mut rng)).collect();
        assert!(xs.iter().all(|x| *x >= 2_000_000));
        let mean = xs.iter().sum::<u64>() as f64 / xs.len() as f64 / 1e6;
        assert!((mean - 5.0).abs() < 0.15, "{mean}");
        assert!(Replica::new(ReplicaSpec {
            base_ms: -1.0,
            mean_ms: 0.0
        })
        .is_err());
    }
}
