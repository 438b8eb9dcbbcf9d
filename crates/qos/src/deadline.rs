//! The CDL-aware ordering policy (spec/drive-model.md §2.5): shortest positioning time first,
//! minus a bonus that grows smoothly as a limited command's slack shrinks below a few service
//! times; the extra positioning time spent on that bonus is budgeted by
//! perf_vs_duration_guideline (spec/cdl.md §8). Late commands therefore go in deadline order
//! (EDF is the fallback), and unlimited commands are not starved.

use crate::cdl::PerfVsDurationGuideline;
use crate::order::{Candidate, OrderingPolicy};
use drive::{Drive, Ns};

/// Tuning of [`DeadlineAware`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DeadlineAwareConfig {
    /// Slack, in mean service times, below which a limited command starts gaining a bonus.
    pub horizon: f64,
    /// Bonus at zero slack, in mean service times (the quadratic keeps rising past it).
    pub bonus: f64,
    /// Aging of every command, in ns of cost per ns waited (DiskSim additive aging,
    /// spec/drive-model.md §2.1); bounds the tail of unlimited commands.
    pub aging: f64,
}

impl Default for DeadlineAwareConfig {
    fn default() -> Self {
        Self {
            horizon: 3.0,
            bonus: 1.0,
            aging: 0.0,
        }
    }
}

/// Weight of one observation in the decaying budget sums (a window of about 1000 commands).
const DECAY: f64 = 1.0 / 1024.0;
/// Service time assumed before any was observed (an HDD random access, spec/drive-model.md §2.2).
const INITIAL_SERVICE_NS: f64 = 12e6;

/// The CDL-aware policy. [`crate::Queue`] feeds it observed service times and the
/// perf_vs_duration_guideline of the T2A page.
#[derive(Clone, Debug)]
pub struct DeadlineAware {
    config: DeadlineAwareConfig,
    budget: f64,
    mean_service: f64,
    /// Decaying sums: positioning time spent beyond the base choice, and service time.
    extra: f64,
    busy: f64,
}

impl DeadlineAware {
    pub fn new(config: DeadlineAwareConfig) -> Self {
        Self {
            config,
            budget: PerfVsDurationGuideline::default().fraction(),
            mean_service: INITIAL_SERVICE_NS,
            extra: 0.0,
            busy: 0.0,
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

    fn within_budget(&self) -> bool {
        self.extra <= self.budget * self.busy
    }

    fn bonus(&self, now: Ns, c: &Candidate) -> f64 {
        let Some(deadline) = c.deadline else {
            return 0.0;
        };
        let horizon = self.config.horizon * self.mean_service;
        let slack = deadline as f64 - now as f64 - self.mean_service;
        if slack >= horizon || horizon <= 0.0 {
            return 0.0;
        }
        let x = (horizon - slack) / horizon;
        self.config.bonus * self.mean_service * x * x
    }
}

impl OrderingPolicy for DeadlineAware {
    fn pick(&mut self, now: Ns, queue: &[Candidate], drive: &dyn Drive) -> usize {
        let use_bonus = self.within_budget();
        // (index, cost) of the base choice and of the choice with the bonus.
        let mut base = (0usize, f64::INFINITY, 0.0f64);
        let mut best = (0usize, f64::INFINITY, 0.0f64);
        for (i, c) in queue.iter().enumerate() {
            let positioning = drive.positioning_time(now, &c.op) as f64;
            let age = now.saturating_sub(c.arrived) as f64;
            let cost = positioning - self.config.aging * age;
            if cost < base.1 {
                base = (i, cost, positioning);
            }
            let cost = if use_bonus {
                cost - self.bonus(now, c)
            } else {
                cost
            };
            if cost < best.1 {
                best = (i, cost, positioning);
            }
        }
        self.extra = self.extra * (1.0 - DECAY) + (best.2 - base.2).max(0.0);
        best.0
    }
}
