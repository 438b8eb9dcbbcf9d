//! perf_vs_duration_guideline (SPC-6 T2A mode page): the maximum percentage increase in average
//! command completion time the device may accept to honour duration limits.
//!
//! Every nanosecond the drive spends beyond its best positioning choice delays each command
//! waiting behind it by that much, so over a window of commands the increase in average
//! completion time is the time spent on limits over the service time the drive would otherwise
//! have needed. The account keeps both as decaying sums and admits a limit-driven pick only if
//! its own cost keeps the ratio within the bound: cheap picks go on when dear ones no longer
//! fit, and the bound holds on average rather than switching the policy on and off.

use drive::Ns;

/// Weight of one completion in the decaying sums (a window of about 1000 commands).
const DECAY: f64 = 1.0 / 1024.0;
/// Service time credited before any was observed: as if the drive had served 64 commands of
/// 12 ms (an HDD random access, experiments/README.md, B1) without spending on limits, so a
/// fresh queue can honour its first limits. It decays like any other service.
const INITIAL_BUSY_NS: f64 = 64.0 * 12e6;

#[derive(Clone, Copy, Debug)]
pub(super) struct Budget {
    /// Allowed increase as a fraction (0 = limits may not change the order).
    fraction: f64,
    /// Decaying sums: time spent on limits beyond the best raw choice, and service time.
    spent: f64,
    busy: f64,
}

impl Budget {
    pub(super) fn new(fraction: f64) -> Self {
        Self {
            fraction,
            spent: 0.0,
            busy: INITIAL_BUSY_NS,
        }
    }

    pub(super) fn set(&mut self, fraction: f64) {
        self.fraction = fraction;
    }

    /// Whether any limit-driven pick may be made at all.
    pub(super) fn open(&self) -> bool {
        self.fraction > 0.0
    }

    /// A command was served in `service` ns.
    pub(super) fn served(&mut self, service: Ns) {
        self.spent *= 1.0 - DECAY;
        self.busy = self.busy * (1.0 - DECAY) + service as f64;
    }

    /// Whether spending `cost` ns more keeps the increase within the bound: spent over the
    /// service time without it (busy minus spent).
    pub(super) fn allows(&self, cost: Ns) -> bool {
        let spent = self.spent + cost as f64;
        spent <= self.fraction * (self.busy - self.spent).max(0.0)
    }

    pub(super) fn spend(&mut self, cost: Ns) {
        self.spent += cost as f64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zero_guideline_allows_nothing() {
        let b = Budget::new(0.0);
        assert!(!b.open());
        assert!(!b.allows(1));
        assert!(b.allows(0));
    }

    #[test]
    fn cheap_picks_fit_where_dear_ones_no_longer_do() {
        let mut b = Budget::new(0.1);
        // 1000 services of 10 ms (plus the decaying initial credit).
        for _ in 0..1000 {
            b.served(10_000_000);
        }
        // Spend all but 2 ms of the allowance: s + 2 ms = 0.1 · (busy − s).
        let spent = (0.1 * b.busy - 2e6) / 1.1;
        b.spend(spent as Ns);
        assert!(b.allows(100_000), "a 0.1 ms pick still fits");
        assert!(!b.allows(5_000_000), "a 5 ms one does not");
    }

    #[test]
    fn spending_all_that_is_allowed_keeps_the_average_at_the_bound() {
        // Each command needs 10 ms; before each, the policy spends what it is allowed in 1 ms
        // picks, which lengthen its service. Over the window, spent / (busy − spent) ends at
        // the bound.
        let mut b = Budget::new(0.05);
        for _ in 0..20_000 {
            let mut extra = 0;
            while b.allows(1_000_000) {
                b.spend(1_000_000);
                extra += 1_000_000;
            }
            b.served(10_000_000 + extra);
        }
        let ratio = b.spent / (b.busy - b.spent);
        assert!(ratio <= 0.05 && ratio > 0.045, "{ratio}");
    }
}
