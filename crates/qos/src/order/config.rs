//! Selecting an ordering policy by name with parameters: `fifo`, `sptf`, `asptf:rate=0.02`,
//! `asptf:window_ms=50`, `rpo`, `rpo:factor=2.2` (the syntax experiment files and CLI flags use).

use std::fmt;
use std::str::FromStr;

use super::{AgedSptf, Aging, Fifo, OrderingPolicy, Rpo, Sptf, DEFAULT_RPO_FACTOR};

/// An ordering policy and its parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum OrderConfig {
    Fifo,
    Sptf,
    /// Aged SPTF (DiskSim's queue policies).
    Asptf(Aging),
    /// The default: aged SPTF whose window is `factor` × queue length × mean service interval.
    Rpo {
        factor: f64,
    },
}

/// A policy name or parameter that does not parse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrderConfigError(pub String);

impl fmt::Display for OrderConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ordering policy: {}", self.0)
    }
}

impl std::error::Error for OrderConfigError {}

/// Policy names accepted by [`OrderConfig::from_str`].
pub const ORDER_NAMES: &[&str] = &["fifo", "sptf", "asptf", "rpo"];

impl OrderConfig {
    /// A fresh policy instance.
    pub fn build(&self) -> Box<dyn OrderingPolicy + Send> {
        match *self {
            Self::Fifo => Box::new(Fifo),
            Self::Sptf => Box::new(Sptf),
            Self::Asptf(aging) => Box::new(AgedSptf::new(aging)),
            Self::Rpo { factor } => Box::new(Rpo::new(factor)),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Self::Fifo => "fifo",
            Self::Sptf => "sptf",
            Self::Asptf(_) => "asptf",
            Self::Rpo { .. } => "rpo",
        }
    }
}

/// `key=value` parameters after the `:`.
struct Params<'a> {
    policy: &'a str,
    pairs: Vec<(&'a str, &'a str)>,
}

impl<'a> Params<'a> {
    fn parse(policy: &'a str, text: Option<&'a str>) -> Result<Self, OrderConfigError> {
        let mut pairs = Vec::new();
        for item in text
            .into_iter()
            .flat_map(|t| t.split(','))
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            let (k, v) = item.split_once('=').ok_or_else(|| {
                OrderConfigError(format!("{policy}: parameter `{item}` is not key=value"))
            })?;
            pairs.push((k.trim(), v.trim()));
        }
        Ok(Self { policy, pairs })
    }

    /// Takes `key` as a finite number in `min..=max`.
    fn number(&mut self, key: &str, min: f64, max: f64) -> Result<Option<f64>, OrderConfigError> {
        let Some(pos) = self.pairs.iter().position(|(k, _)| *k == key) else {
            return Ok(None);
        };
        let (_, v) = self.pairs.remove(pos);
        match v.parse::<f64>() {
            Ok(x) if x.is_finite() && (min..=max).contains(&x) => Ok(Some(x)),
            _ => Err(OrderConfigError(format!(
                "{}: `{key}` must be a number in {min}..={max}, got `{v}`",
                self.policy
            ))),
        }
    }

    /// Fails on any parameter not taken.
    fn finish(self) -> Result<(), OrderConfigError> {
        match self.pairs.first() {
            None => Ok(()),
            Some((k, _)) => Err(OrderConfigError(format!(
                "{}: unknown parameter `{k}`",
                self.policy
            ))),
        }
    }
}

fn ms_to_ns(ms: f64) -> u64 {
    (ms * 1e6).round() as u64
}

impl FromStr for OrderConfig {
    type Err = OrderConfigError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (name, rest) = match s.trim().split_once(':') {
            Some((n, r)) => (n.trim(), Some(r)),
            None => (s.trim(), None),
        };
        let mut p = Params::parse(name, rest)?;
        let config = match name {
            "fifo" => Self::Fifo,
            "sptf" => Self::Sptf,
            "asptf" => {
                let rate = p.number("rate", 0.0, 1e3)?;
                let window = p.number("window_ms", 1e-3, 1e7)?;
                match (rate, window) {
                    (Some(rate), None) => Self::Asptf(Aging::Additive { rate }),
                    (None, Some(w)) => Self::Asptf(Aging::Multiplicative {
                        window: ms_to_ns(w),
                    }),
                    (None, None) => Self::Asptf(Aging::Additive { rate: 0.02 }),
                    (Some(_), Some(_)) => {
                        return Err(OrderConfigError(
                            "asptf: give either `rate` or `window_ms`, not both".into(),
                        ))
                    }
                }
            }
            "rpo" => Self::Rpo {
                factor: p.number("factor", 0.01, 1e3)?.unwrap_or(DEFAULT_RPO_FACTOR),
            },
            other => {
                return Err(OrderConfigError(format!(
                    "unknown policy `{other}`; expected one of {}",
                    ORDER_NAMES.join(", ")
                )))
            }
        };
        p.finish()?;
        Ok(config)
    }
}

impl fmt::Display for OrderConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Fifo | Self::Sptf => f.write_str(self.name()),
            Self::Rpo { factor } => write!(f, "rpo:factor={factor}"),
            Self::Asptf(Aging::Additive { rate }) => write!(f, "asptf:rate={rate}"),
            Self::Asptf(Aging::Multiplicative { window }) => {
                write!(f, "asptf:window_ms={}", *window as f64 / 1e6)
            }
        }
    }
}

/// The calibrated default (experiments/README.md, B1): `rpo:factor=2.2`.
impl Default for OrderConfig {
    fn default() -> Self {
        Self::Rpo {
            factor: DEFAULT_RPO_FACTOR,
        }
    }
}
