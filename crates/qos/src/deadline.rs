//! The CDL-aware ordering policy (spec/drive-model.md §2.5): shortest positioning time first,
//! minus a bonus that grows smoothly as a limited command's slack shrinks below a few service
//! times; the extra positioning time spent on that bonus is budgeted by
//! perf_vs_duration_guideline (spec/cdl.md §8). Late commands therefore go in deadline order
//! (EDF is the fallback), and unlimited commands are not starved.

use crate::cdl::PerfVsDurationGuideline;
use crate::order::{Candidate, OrderingPolicy};
use drive::{Drive, Ns};
use std::fmt;
use std::str::FromStr;

/// Tuning of [`DeadlineAware`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DeadlineAwareConfig {
    /// Weight of the deferral bonus (1 = the expected positioning saved, see [`DeadlineAware`]).
    /// 1.25 puts B2's limited p99 (50 ms guideline on 20 % of I/Os) at 39/42/47/52 ms at
    /// QD 4/8/16/32 on the 22 TB HDD model over the default (RPO) ordering, for 6/10/14/16 %
    /// fewer IOPS (examples/cdl_aware.rs); 1.0 gives 41/47/52/57 ms for 5/9/12/15 %.
    pub bonus: f64,
    /// Aging of every command, in ns of cost per ns waited (DiskSim additive aging,
    /// spec/drive-model.md §2.1); bounds the tail of unlimited commands.
    pub aging: f64,
}

impl Default for DeadlineAwareConfig {
    fn default() -> Self {
        Self {
            bonus: 1.25,
            aging: 0.0,
        }
    }
}

impl FromStr for DeadlineAwareConfig {
    type Err = String;

    /// Parses `key=value` pairs separated by commas (`bonus=2,aging=0.02`; empty for the
    /// defaults); the error names the offending key.
    fn from_str(s: &str) -> Result<Self, String> {
        let mut config = Self::default();
        for pair in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = pair
                .split_once('=')
                .ok_or(format!("{pair:?}: expected key=value"))?;
            let field = match key.trim() {
                "bonus" => &mut config.bonus,
                "aging" => &mut config.aging,
                other => return Err(format!("unknown parameter {other:?} (bonus, aging)")),
            };
            *field = value
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v >= 0.0)
                .ok_or(format!("{key}: {value:?} is not a non-negative number"))?;
        }
        Ok(config)
    }
}

/// Weight of one observation in the decaying budget sums (a window of about 1000 commands).
const DECAY: f64 = 1.0 / 1024.0;
/// Throughput lost per unit of extra positioning time spent on a deadline: more than 1, since
/// the head then starts the next pick from a worse place. Measured on the 22 TB HDD model at
/// QD 8–32 (1.3–1.4); with 1.5 the IOPS loss stays within perf_vs_duration_guideline.
const LOSS_PER_EXTRA_POSITIONING: f64 = 1.5;
/// Service time assumed before any was observed (an HDD random access, spec/drive-model.md §2.2).
const INITIAL_SERVICE_NS: f64 = 12e6;

/// The CDL-aware policy. [`crate::Queue`] feeds it observed service times and the
/// perf_vs_duration_guideline of the T2A page.
///
/// Cost of a candidate = positioning time − aging × age − bonus. The bonus prices deferral: a
/// command with slack for n more services still gets n chances to be started cheaply, and the
/// best of n random positionings costs about 2P/(n+1) (P = mean positioning time in the queue),
/// so deferring it costs that much later; unlimited commands have no such cost. A late command
/// (negative slack) gets 2P per service time late on top, so late commands go in deadline order.
///
/// With a base policy ([`DeadlineAware::with_base`]) the base picks among all commands (keeping
/// its own tail control, e.g. aged SPTF) and a limited command replaces that pick only when its
/// cost with the bonus is lower than the base pick's.
pub struct DeadlineAware {
    config: DeadlineAwareConfig,
    base: Option<Box<dyn OrderingPolicy + Send>>,
    budget: f64,
    mean_service: f64,
    /// Decaying sums: positioning time spent beyond the base choice, and service time.
    extra: f64,
    busy: f64,
    /// Positioning time of each candidate in the current pick (reused buffer).
    positioning: Vec<f64>,
}

impl fmt::Debug for DeadlineAware {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeadlineAware")
            .field("config", &self.config)
            .field("base", &self.base.as_ref().map(|_| ".."))
            .field("budget", &self.budget)
            .field("mean_service", &self.mean_service)
            .finish()
    }
}

impl DeadlineAware {
    /// Over shortest positioning time first (with the configured aging).
    pub fn new(config: DeadlineAwareConfig) -> Self {
        Self {
            config,
            base: None,
            budget: PerfVsDurationGuideline::default().fraction(),
            mean_service: INITIAL_SERVICE_NS,
            extra: 0.0,
            busy: 0.0,
            positioning: Vec::new(),
        }
    }

    /// Over `base` (e.g. the default ordering policy of [`crate::order`]), so that a run with
    /// CDL differs from the same run without it only by the deadline bonus.
    pub fn with_base(config: DeadlineAwareConfig, base: Box<dyn OrderingPolicy + Send>) -> Self {
        Self {
            base: Some(base),
            ..Self::new(config)
        }
    }

    /// Sets the allowed loss (from the T2A page).
    pub fn set_budget(&mut self, perf: PerfVsDurationGuideline) {
        self.budget = perf.fraction();
    }

    /// Records one command's service time (start to completion).
    pub fn observe_service(&mut self, service: Ns) {
        let s = service as f64;
        self.mean_service += (s - self.mean_service) * DECAY * 8.0;
        self.busy = self.busy * (1.0 - DECAY) + s;
    }

    /// Whether the positioning time spent on deadlines so far is within
    /// perf_vs_duration_guideline of the service time.
    fn within_budget(&self) -> bool {
        self.budget > 0.0 && self.extra * LOSS_PER_EXTRA_POSITIONING <= self.budget * self.busy
    }

    /// The deferral bonus of a candidate with `deadline`, given mean positioning `p`.
    fn bonus(&self, now: Ns, deadline: Ns, p: f64) -> f64 {
        let slack = (deadline as f64 - now as f64 - self.mean_service) / self.mean_service;
        let bonus = if slack >= 0.0 {
            2.0 * p / (slack + 1.0)
        } else {
            2.0 * p * (1.0 - slack)
        };
        self.config.bonus * bonus
    }
}

impl OrderingPolicy for DeadlineAware {
    fn pick(&mut self, now: Ns, queue: &[Candidate], drive: &dyn Drive) -> usize {
        self.extra *= 1.0 - DECAY;
        let last = queue.len().saturating_sub(1);
        let external = self
            .base
            .as_mut()
            .map(|b| b.pick(now, queue, drive).min(last));
        let limited = queue.iter().any(|c| c.deadline.is_some());
        if let (Some(b), false) = (external, limited) {
            return b;
        }
        // Positioning of the candidates the choice depends on: all of them without a base
        // policy; else the limited ones and the base pick (NaN: not needed).
        let all = external.is_none();
        self.positioning.clear();
        self.positioning
            .extend(queue.iter().enumerate().map(|(i, c)| {
                if all || c.deadline.is_some() || external == Some(i) {
                    drive.positioning_time(now, &c.op) as f64
                } else {
                    f64::NAN
                }
            }));
        // P, the mean positioning time of a queued command; the limited ones are a fair sample.
        let (sum, n) = queue
            .iter()
            .zip(&self.positioning)
            .filter(|(c, _)| all || c.deadline.is_some())
            .fold((0.0, 0u32), |(sum, n), (_, p)| (sum + p, n + 1));
        let mean = sum / f64::from(n.max(1));
        let use_bonus = self.within_budget();
        let positioning = |i: usize| self.positioning.get(i).copied().unwrap_or(0.0);
        let cost = |i: usize, bonus: bool| {
            let Some(c) = queue.get(i) else {
                return f64::INFINITY;
            };
            let aged = positioning(i) - self.config.aging * now.saturating_sub(c.arrived) as f64;
            match c.deadline {
                Some(d) if bonus && use_bonus => aged - self.bonus(now, d, mean),
                _ => aged,
            }
        };
        // The base choice: the base policy's pick, or the lowest aged positioning time.
        let base = external.unwrap_or_else(|| {
            (0..queue.len())
                .map(|i| (cost(i, false), i))
                .min_by(|a, b| a.0.total_cmp(&b.0))
                .map_or(0, |(_, i)| i)
        });
        let mut best = (base, cost(base, true));
        for (i, c) in queue.iter().enumerate() {
            if c.deadline.is_some() && cost(i, true) < best.1 {
                best = (i, cost(i, true));
            }
        }
        self.extra += (positioning(best.0) - positioning(base)).max(0.0);
        best.0
    }
}
