//! The CDL-aware ordering policy (experiments/README.md, B2): a base ordering policy (by default
//! the calibrated one of [`crate::order`]) whose pick a duration-limited command may take over
//! when its positioning time minus a deferral bonus is lower. The bonus grows as the command's
//! slack shrinks; the extra positioning time spent on it is budgeted by
//! perf_vs_duration_guideline (SPC-6 T2A mode page). Late commands go in deadline order (EDF is the
//! fallback), and unlimited commands keep the base policy's ordering and tail control.

use crate::cdl::PerfVsDurationGuideline;
use crate::order::{sptf_cost, Candidate, OrderConfig, OrderingPolicy, QueueMemos};
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
    /// The ordering of everything the bonus does not decide.
    pub base: OrderConfig,
}

impl Default for DeadlineAwareConfig {
    fn default() -> Self {
        Self {
            bonus: 1.25,
            base: OrderConfig::default(),
        }
    }
}

impl FromStr for DeadlineAwareConfig {
    type Err = String;

    /// Parses `bonus=1.5` and/or `base=<ordering policy>` (`base` last: the rest of the string
    /// is the policy, e.g. `bonus=1,base=asptf:rate=0.02`); empty for the defaults. The error
    /// names the offending key.
    fn from_str(s: &str) -> Result<Self, String> {
        let mut config = Self::default();
        let mut rest = s.trim();
        while !rest.is_empty() {
            if let Some(policy) = rest.strip_prefix("base=") {
                config.base = policy.trim().parse().map_err(|e| format!("base: {e}"))?;
                break;
            }
            let (pair, tail) = rest.split_once(',').unwrap_or((rest, ""));
            rest = tail.trim();
            let (key, value) = pair
                .split_once('=')
                .ok_or(format!("{pair:?}: expected key=value"))?;
            match key.trim() {
                "bonus" => {
                    config.bonus = value
                        .trim()
                        .parse::<f64>()
                        .ok()
                        .filter(|v| v.is_finite() && *v >= 0.0)
                        .ok_or(format!("bonus: {value:?} is not a non-negative number"))?
                }
                other => return Err(format!("unknown parameter {other:?} (bonus, base)")),
            }
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
/// Service time assumed before any was observed (an HDD random access, experiments/README.md, B1).
const INITIAL_SERVICE_NS: f64 = 12e6;

/// The CDL-aware policy. [`crate::Queue`] feeds it observed service times and the
/// perf_vs_duration_guideline of the T2A page.
///
/// The base policy picks among all commands. A limited command takes that pick over when its
/// positioning time minus its bonus is below the base pick's (minus the base pick's own bonus
/// if it is limited too). The bonus prices deferral: a command with slack for n more services
/// still gets n chances to be started cheaply, and the best of n random positionings costs
/// about 2P/(n+1) (P = mean positioning time of a queued command), so deferring it costs that
/// much later; unlimited commands have no such cost. A late command (negative slack) gets 2P
/// per service time late on top, so late commands go in deadline order.
pub struct DeadlineAware {
    bonus: f64,
    base: Box<dyn OrderingPolicy + Send>,
    budget: f64,
    mean_service: f64,
    /// Decaying sums: positioning time spent beyond the base choice, and service time.
    extra: f64,
    busy: f64,
    /// Positioning time of the candidates a pick looks at (reused buffer; NaN elsewhere).
    positioning: Vec<f64>,
}

impl fmt::Debug for DeadlineAware {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeadlineAware")
            .field("bonus", &self.bonus)
            .field("budget", &self.budget)
            .field("mean_service", &self.mean_service)
            .finish_non_exhaustive()
    }
}

impl DeadlineAware {
    pub fn new(config: DeadlineAwareConfig) -> Self {
        Self::with_base(config.bonus, config.base.build())
    }

    /// Over any ordering policy.
    pub fn with_base(bonus: f64, base: Box<dyn OrderingPolicy + Send>) -> Self {
        Self {
            bonus,
            base,
            budget: PerfVsDurationGuideline::default().fraction(),
            mean_service: INITIAL_SERVICE_NS,
            extra: 0.0,
            busy: 0.0,
            positioning: Vec::new(),
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
    fn deferral_bonus(&self, now: Ns, deadline: Ns, p: f64) -> f64 {
        let slack = (deadline as f64 - now as f64 - self.mean_service) / self.mean_service;
        let bonus = if slack >= 0.0 {
            2.0 * p / (slack + 1.0)
        } else {
            2.0 * p * (1.0 - slack)
        };
        self.bonus * bonus
    }
}

impl OrderingPolicy for DeadlineAware {
    fn pick(&mut self, now: Ns, queue: &[Candidate], drive: &dyn Drive) -> usize {
        self.extra *= 1.0 - DECAY;
        let base = self.base.pick(now, queue, drive);
        self.choose(now, queue, drive, base)
    }

    fn pick_memoised(
        &mut self,
        now: Ns,
        queue: &[Candidate],
        memos: &mut QueueMemos,
        drive: &dyn Drive,
    ) -> usize {
        self.extra *= 1.0 - DECAY;
        let base = self.base.pick_memoised(now, queue, memos, drive);
        self.choose(now, queue, drive, base)
    }
}

impl DeadlineAware {
    /// The pick, given the base policy's.
    fn choose(&mut self, now: Ns, queue: &[Candidate], drive: &dyn Drive, base: usize) -> usize {
        let base = base.min(queue.len().saturating_sub(1));
        if !self.within_budget() || queue.iter().all(|c| c.deadline.is_none()) {
            return base;
        }
        self.positioning.clear();
        self.positioning
            .extend(queue.iter().enumerate().map(|(i, c)| {
                if c.deadline.is_some() || i == base {
                    sptf_cost(now, c, drive) as f64
                } else {
                    f64::NAN
                }
            }));
        // P, the mean positioning time of a queued command: the limited ones are a fair sample.
        let (sum, n) = queue
            .iter()
            .zip(&self.positioning)
            .filter(|(c, _)| c.deadline.is_some())
            .fold((0.0, 0u32), |(sum, n), (_, p)| (sum + p, n + 1));
        let mean = sum / f64::from(n.max(1));
        let positioning = |i: usize| self.positioning.get(i).copied().unwrap_or(0.0);
        let cost = |i: usize| match queue.get(i).and_then(|c| c.deadline) {
            Some(d) => positioning(i) - self.deferral_bonus(now, d, mean),
            None => positioning(i),
        };
        let mut best = (base, cost(base));
        for (i, c) in queue.iter().enumerate() {
            if c.deadline.is_some() && cost(i) < best.1 {
                best = (i, cost(i));
            }
        }
        self.extra += (positioning(best.0) - positioning(base)).max(0.0);
        best.0
    }
}
