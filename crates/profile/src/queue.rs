//! `[queue]`: the device queue of a logical unit (depth, ordering, arbitration, admission)
//! and the classes of commands by DLD.

use crate::error::FieldError;
use qos::order::{OrderConfig, ORDER_NAMES};
use qos::{
    Admission, Arbitration, CdlPages, Class, DeadlineAware, DeadlineAwareConfig, QueueConfig,
    Scheduler,
};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::str::FromStr;

/// `[queue]`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct QueueSpec {
    /// Device queue depth, 1..=256 (32: SATA NCQ).
    #[serde(default = "depth")]
    pub depth: usize,
    /// Ordering inside the device queue: "cdl-aware" or a policy of qos::order.
    #[serde(default = "scheduler")]
    pub scheduler: String,
    /// "strict", "rr" or "wrr" (NVMe arbitration mechanisms).
    #[serde(default = "strict")]
    pub arbitration: String,
    /// WRR weights for high, medium, low (1..=256 each).
    pub weights: Option<[u32; 3]>,
    /// WRR arbitration burst (commands per turn); default no limit.
    pub burst: Option<u32>,
    /// "fifo" or "deadline-aware".
    #[serde(default = "fifo")]
    pub admission: String,
    /// Priority class of commands by DLD, e.g. `{ 1 = "high", 2 = "low" }`, for commands
    /// whose nexus has no class (in `sim` every job's class is its nexus's, so this applies
    /// to `serve`, where a host's only per-command hint is the DLD).
    #[serde(default)]
    pub dld_classes: BTreeMap<String, String>,
}

fn depth() -> usize {
    32
}
fn scheduler() -> String {
    "default".into()
}
fn strict() -> String {
    "strict".into()
}
fn fifo() -> String {
    "fifo".into()
}

impl Default for QueueSpec {
    fn default() -> Self {
        Self {
            depth: depth(),
            scheduler: scheduler(),
            arbitration: strict(),
            weights: None,
            burst: None,
            admission: fifo(),
            dld_classes: BTreeMap::new(),
        }
    }
}

impl QueueSpec {
    /// The queue configuration with `cdl` pages; checked by qos.
    pub fn config(&self, cdl: CdlPages) -> Result<QueueConfig, FieldError> {
        if self.burst.is_some() && self.arbitration != "wrr" {
            return Err(FieldError::new(
                "queue.burst",
                "burst applies to arbitration = \"wrr\" only",
            ));
        }
        let arbitration = match (self.arbitration.as_str(), self.weights) {
            ("strict", None) => Arbitration::Strict,
            ("rr", None) => Arbitration::RoundRobin,
            ("wrr", Some(weights)) => Arbitration::WeightedRoundRobin {
                weights,
                burst: self.burst.unwrap_or(u32::MAX),
            },
            ("wrr", None) => {
                return Err(FieldError::new(
                    "queue.weights",
                    "wrr needs weights = [high, medium, low]",
                ))
            }
            ("strict" | "rr", Some(_)) => {
                return Err(FieldError::new(
                    "queue.weights",
                    "weights apply to arbitration = \"wrr\" only",
                ))
            }
            (other, _) => {
                return Err(FieldError::new(
                    "queue.arbitration",
                    format!("unknown arbitration {other:?} (strict, rr, wrr)"),
                ))
            }
        };
        let admission = match self.admission.as_str() {
            "fifo" => Admission::Fifo,
            "deadline-aware" => Admission::DeadlineAware,
            other => {
                return Err(FieldError::new(
                    "queue.admission",
                    format!("unknown admission {other:?} (fifo, deadline-aware)"),
                ))
            }
        };
        let config = QueueConfig {
            depth: self.depth,
            arbitration,
            admission,
            cdl,
        };
        config.validate().map_err(|e| {
            let text = e.to_string();
            // qos names `depth`, `weights.<level>`, `burst`, `cdl`: prefix the table.
            FieldError::new(
                &format!("queue.{}", text.split_whitespace().next().unwrap_or("")),
                text,
            )
        })?;
        self.scheduler()?;
        Ok(config)
    }

    /// `dld_classes` as the device takes it: a class per DLD 0..=7.
    pub fn dld_classes(&self) -> Result<[Option<Class>; 8], FieldError> {
        let mut classes = [None; 8];
        for (dld, name) in &self.dld_classes {
            let at = format!("queue.dld_classes.{dld}");
            let slot = dld
                .parse::<usize>()
                .ok()
                .and_then(|d| classes.get_mut(d))
                .ok_or_else(|| FieldError::new(&at, "a DLD is 0..=7"))?;
            *slot = Some(Class::from_name(name).ok_or_else(|| {
                FieldError::new(
                    &at,
                    format!("unknown class {name:?} (urgent, high, medium, low)"),
                )
            })?);
        }
        Ok(classes)
    }

    /// The ordering of the device queue: "default" (qos::order's default policy), a policy of
    /// qos::order with parameters ("sptf", "asptf:rate=0.02"), or
    /// "cdl-aware[:aggressiveness=..,base=..]".
    pub fn scheduler(&self) -> Result<Scheduler, FieldError> {
        let err = |m: String| FieldError::new("queue.scheduler", m);
        let text = self.scheduler.trim();
        match text
            .split_once(':')
            .map_or((text, ""), |(n, p)| (n.trim(), p))
        {
            ("cdl-aware", params) => {
                let config = DeadlineAwareConfig::from_str(params)
                    .map_err(|e| err(format!("cdl-aware: {e}")))?;
                Ok(Scheduler::CdlAware(Box::new(DeadlineAware::new(config))))
            }
            ("default", "") => Ok(Scheduler::Policy(OrderConfig::default().build())),
            _ => {
                let order = OrderConfig::from_str(text).map_err(|e| {
                    err(format!(
                        "{e} (default, cdl-aware, or one of {})",
                        ORDER_NAMES.join(", ")
                    ))
                })?;
                Ok(Scheduler::Policy(order.build()))
            }
        }
    }
}
