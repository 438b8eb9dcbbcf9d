//! When to honour a limit: optimal stopping over the picks left before it.
//!
//! At every pick a limited command is offered at some cost: its positioning time beyond the
//! best raw positioning choice of the queue if started now, or, when that is cheaper, the
//! cost of reaching it next, through another command started now (a look-ahead offer: it
//! starts a pick later). Started at a later pick it loses one dispatch interval per pick and
//! its offer is a fresh draw (the heads will be somewhere else). Finishing (completion limit) or
//! starting (start limit) after the limit is priced: a miss costs `price`, and each dispatch
//! interval of lateness beyond it costs more, quadratically, so the latest go first. The value
//! of waiting with `d` ns left, `V(d)`, is the expected cost of acting optimally from the next
//! pick on:
//!
//! `V(d) = E[min(c + penalty(late(d, c)), V(d − interval))]`
//!
//! (finite-horizon optimal stopping, computed backwards from far past the limit, where every
//! pick takes the command at once). A command is worth starting now when its cost now plus
//! its own penalty is at most the value of waiting. The distribution of the cost `c` and the
//! service time of a pick at no cost are learned from the limited commands of this queue, so
//! the rule fits any drive model.

use crate::order::floor;
use drive::Ns;

/// Costs kept: those of the last this many limited candidates seen at a pick.
const SAMPLES: usize = 1024;
/// The value tables are worked out again after this many new costs (and at every power of two
/// below it, so a fresh queue learns quickly). The offers of a workload change slowly, and
/// working the tables out is most of what recording costs: every 256 costs, it took a
/// sixth of the CDL-aware pick's instructions (issue 21, speed).
const REFRESH: u64 = 4096;
/// Table resolution: steps per dispatch interval.
const STEPS: usize = 4;
/// Table span: dispatch intervals before the limit (more use the last entry) ...
const AHEAD: usize = 128;
/// ... and after it (where waiting is never worth it any more).
const LATE: usize = 16;
/// Weight of one observation in the running mean service time of a pick at no cost.
const GAIN: f64 = 1.0 / 256.0;

/// What the tables are worked out for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Plan {
    /// Mean time between picks (ns).
    pub(super) interval: f64,
    /// The cost of a miss (ns of drive time).
    pub(super) price: f64,
}

/// Which clock a limit is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    /// Met if the command starts in time (max inactive time).
    Start,
    /// Met if the command finishes in time (duration guideline): its own service counts.
    Completion,
}

/// An offer seen at a pick: its cost, and whether it starts the command a pick later.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Offer {
    pub(super) cost: Ns,
    pub(super) later: bool,
}

/// The costs of one kind of offer, sorted, with the prefix sums of their values and squares.
#[derive(Clone, Debug, Default)]
struct Sorted {
    costs: Vec<f64>,
    sums: Vec<(f64, f64)>,
}

/// The learned offer distribution and the value of waiting it gives.
#[derive(Clone, Debug, Default)]
pub(super) struct Stopping {
    /// Ring of the last [`SAMPLES`] offers.
    offers: Vec<Offer>,
    /// Costs recorded so far.
    seen: u64,
    /// Running mean service time of a command started at no cost (its service estimate less
    /// its cost); 0 until one was seen.
    base_service: f64,
    plan: Option<Plan>,
    /// `V` for start and completion limits at `d = (i − LATE·STEPS) · step`.
    start: Vec<f64>,
    completion: Vec<f64>,
    step: f64,
    /// Scratch: the offers that start the command now and those that start it a pick later.
    at_once: Sorted,
    next_pick: Sorted,
}

impl Stopping {
    /// Whether the value tables were worked out yet.
    pub(super) fn learned(&self) -> bool {
        !self.start.is_empty()
    }

    /// A limited candidate was seen at a pick with its best `offer`; started now it would
    /// take `service` ns, `direct` ns more positioning than the best raw choice. True if the
    /// value tables were worked out again.
    pub(super) fn record(&mut self, offer: Offer, direct: Ns, service: Ns, plan: Plan) -> bool {
        let at = (self.seen % SAMPLES as u64) as usize;
        match self.offers.get_mut(at) {
            Some(slot) => *slot = offer,
            None => self.offers.push(offer),
        }
        let base = service.saturating_sub(direct) as f64;
        self.base_service = if self.seen == 0 {
            base
        } else {
            self.base_service + (base - self.base_service) * GAIN
        };
        self.seen += 1;
        if self.seen.is_multiple_of(REFRESH) || (self.seen < REFRESH && self.seen.is_power_of_two())
        {
            self.refresh(plan);
            return true;
        }
        false
    }

    /// The penalty of being `late` ns late (none if not late).
    fn penalty(plan: Plan, late: f64) -> f64 {
        if late <= 0.0 {
            0.0
        } else {
            let picks = late / plan.interval;
            plan.price * (1.0 + picks * picks)
        }
    }

    /// The running mean service time of a command started at no cost.
    pub(super) fn base_service(&self) -> f64 {
        self.base_service
    }

    /// What starting the command now costs: `cost` plus the penalty of being `late` ns late.
    pub(super) fn now(&self, cost: Ns, late: f64) -> f64 {
        let plan = self.plan.unwrap_or(Plan {
            interval: 1.0,
            price: 0.0,
        });
        cost as f64 + Self::penalty(plan, late)
    }

    /// The expected cost of waiting for a later pick with `left` ns to the limit (negative:
    /// past it). 0 before anything was learned.
    pub(super) fn wait(&self, kind: Kind, left: f64) -> f64 {
        let table = match kind {
            Kind::Start => &self.start,
            Kind::Completion => &self.completion,
        };
        if table.is_empty() || self.step <= 0.0 {
            return 0.0;
        }
        // V at one pick later, rounded down to a step.
        let steps = floor(left / self.step) - STEPS as f64;
        let i = (steps + (LATE * STEPS) as f64).clamp(0.0, (table.len() - 1) as f64);
        table.get(i as usize).copied().unwrap_or(0.0)
    }

    fn refresh(&mut self, plan: Plan) {
        self.plan = Some(plan);
        for (sorted, later) in [(&mut self.at_once, false), (&mut self.next_pick, true)] {
            sorted.costs.clear();
            sorted.costs.extend(
                self.offers
                    .iter()
                    .filter(|o| o.later == later)
                    .map(|o| o.cost as f64),
            );
            sorted.costs.sort_unstable_by(f64::total_cmp);
            sorted.sums.clear();
            sorted.sums.push((0.0, 0.0));
            let (mut s1, mut s2) = (0.0, 0.0);
            for &c in &sorted.costs {
                s1 += c;
                s2 += c * c;
                sorted.sums.push((s1, s2));
            }
        }
        self.step = plan.interval / STEPS as f64;
        let mut start = std::mem::take(&mut self.start);
        let mut completion = std::mem::take(&mut self.completion);
        self.fill(&mut start, plan, None);
        self.fill(&mut completion, plan, Some(self.base_service));
        self.start = start;
        self.completion = completion;
    }

    /// Works out `V` from far past the limit forwards in time-left. With `own` (the service
    /// time of a pick at no cost), a pick's own service (`own + c`) counts towards being late.
    fn fill(&self, table: &mut Vec<f64>, plan: Plan, own: Option<f64>) {
        table.clear();
        let n = self.offers.len().max(1) as f64;
        let slope = if own.is_some() { 1.0 } else { 0.0 };
        for i in 0..(LATE + AHEAD) * STEPS {
            let left = (i as f64 - (LATE * STEPS) as f64) * self.step;
            // Waiting one more pick: the entry STEPS before; none left that far back.
            let wait = i.checked_sub(STEPS).and_then(|j| table.get(j).copied());
            let mut total = 0.0;
            for (sorted, delay) in [(&self.at_once, 0.0), (&self.next_pick, plan.interval)] {
                // Lateness of an offer at cost c: a + slope · c.
                let a = own.unwrap_or(0.0) + delay - left;
                total += sorted.sum_min(plan, a, slope, wait);
            }
            table.push(total / n);
        }
    }
}

impl Sorted {
    /// Σ min(f(c), wait) over these costs, f(c) = c + penalty(a + slope · c): f grows with
    /// c, so the costs below the crossing pay f(c) and the rest `wait` (all pay f without).
    fn sum_min(&self, plan: Plan, a: f64, slope: f64, wait: Option<f64>) -> f64 {
        let f = |c: f64| c + Stopping::penalty(plan, a + slope * c);
        let k = match wait {
            Some(w) => self.costs.partition_point(|&c| f(c) < w),
            None => self.costs.len(),
        };
        self.sum_f(k, plan, a, slope) + (self.costs.len() - k) as f64 * wait.unwrap_or(0.0)
    }

    /// Σ f(c) over the `k` cheapest costs, from the prefix sums: Σ c plus the penalty of the
    /// late ones (price · (1 + ((a + slope·c) / interval)²) each).
    fn sum_f(&self, k: usize, plan: Plan, a: f64, slope: f64) -> f64 {
        let (s1, s2) = self.sums.get(k).copied().unwrap_or((0.0, 0.0));
        // Late are those with a + slope·c > 0: all, none, or (slope 1) the costs above −a.
        let first_late = if slope == 0.0 {
            if a > 0.0 {
                0
            } else {
                k
            }
        } else {
            self.costs.partition_point(|&c| a + c <= 0.0).min(k)
        };
        let (l1, l2) = self.sums.get(first_late).copied().unwrap_or((0.0, 0.0));
        let (m, t1, t2) = ((k - first_late) as f64, s1 - l1, s2 - l2);
        // Σ (a + slope·c)² over the late ones.
        let squares = m * a * a + 2.0 * a * slope * t1 + slope * slope * t2;
        let inv = 1.0 / (plan.interval * plan.interval);
        s1 + plan.price * (m + squares * inv)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAN: Plan = Plan {
        interval: 1000.0,
        price: 2000.0,
    };

    fn learned(costs: impl Iterator<Item = Ns>) -> Stopping {
        let mut s = Stopping::default();
        for cost in costs {
            s.record(Offer { cost, later: false }, cost, cost + 500, PLAN);
        }
        s
    }

    #[test]
    fn nothing_is_worth_waiting_for_before_costs_were_seen() {
        let s = Stopping::default();
        assert_eq!(s.wait(Kind::Start, 1e9), 0.0);
    }

    #[test]
    fn far_from_the_limit_waiting_is_worth_the_cheapest_cost() {
        // Costs 0, 1, 2 and 3 µs alike: with many picks to come, waiting costs almost nothing;
        // with few, more; one pick before the limit, the mean (1.5 µs).
        let s = learned((0..256u64).map(|i| i % 4 * 1000));
        let far = s.wait(Kind::Start, 100_000.0);
        let near = s.wait(Kind::Start, 3_000.0);
        let last = s.wait(Kind::Start, 1_000.0);
        assert!(far < 1.0, "{far}");
        assert!(far < near && near < last, "{far} {near} {last}");
        // At 1 µs left the next pick is exactly at the limit (still in time) and the one after
        // is late by more than any cost: the next pick takes it whatever it costs.
        assert_eq!(last, 1500.0);
        // E_2 of the classic recursion: E[min(c, 1500)] = (0 + 1000 + 1500 + 1500) / 4.
        assert_eq!(s.wait(Kind::Start, 2_000.0), 1000.0);
    }

    #[test]
    fn a_completion_limit_counts_the_commands_own_service() {
        // The same time left is tighter for a command that must finish: its 500 ns of
        // service at no cost, plus its cost, must fit too.
        let s = learned((0..256u64).map(|i| i % 4 * 1000));
        for left in [2_000.0, 3_000.0, 5_000.0] {
            assert!(
                s.wait(Kind::Completion, left) > s.wait(Kind::Start, left),
                "{left}"
            );
        }
    }

    #[test]
    fn lateness_is_priced_ever_more() {
        let s = learned((0..256u64).map(|i| i % 4 * 1000));
        assert_eq!(s.now(700, -10.0), 700.0);
        assert_eq!(s.now(700, 500.0), 700.0 + 2000.0 * 1.25);
        let past = [0.0, -1_000.0, -2_000.0, -4_000.0].map(|d| s.wait(Kind::Start, d));
        assert!(past.windows(2).all(|w| w[1] > w[0]), "{past:?}");
    }

    #[test]
    fn only_the_latest_costs_count() {
        let mut s = learned(std::iter::repeat_n(1_000_000, SAMPLES));
        let dear = s.wait(Kind::Start, 1_000.0);
        for _ in 0..SAMPLES {
            let offer = Offer {
                cost: 10,
                later: false,
            };
            s.record(offer, 10, 510, PLAN);
        }
        assert_eq!(dear, 1e6);
        assert_eq!(s.wait(Kind::Start, 1_000.0), 10.0);
    }
}
