//! The CDL-aware ordering policy (experiments/README.md, B2 and B3; docs/cdl.md): a base
//! ordering policy (by default the calibrated one of [`crate::order`]) whose pick a
//! duration-limited command takes over when honouring its limit now is worth what it costs.
//! At every pick, for each limited command in the queue:
//!
//! - **The real cost.** Its offer is what starting it costs beyond the best raw positioning
//!   choice of the queue (not the base policy's aged pick): its own positioning time, or,
//!   looking one pick ahead ([`Drive::positioning_after`]), the positioning of another
//!   command that brings the heads near it plus its own positioning from there.
//! - **Urgency from slack.** The time left to its limit against its estimated service time
//!   gives the value of waiting for a later pick: the expected cost of honouring the limit
//!   later, or of missing it (priced at [`PRICE_OF_A_MISS`] mean service times, more the
//!   later), learned by optimal stopping from the offers seen ([`stopping`]). It is worth
//!   taking when its offer, with the price of the lateness it would still have, costs less
//!   than waiting.
//! - **Start and completion limits differ.** A start limit (max inactive time) is met when
//!   the command starts: only getting it started counts. A completion limit (duration
//!   guideline) is met when it finishes, so its own service time counts, and each has its own
//!   value of waiting. A max active time runs from the start: waiting cannot make it late,
//!   so it only adds the price of an overrun to an offer whose service would not fit in it
//!   (a command with no other limit is left to the base policy). A start limit without a
//!   completion limit is planned [`START_ROOM`] dispatch intervals early, since a host judges
//!   the completion ([`DeadlineAware::start_room`]).
//! - **Ties by positioning.** Of those worth taking, the one that must start first goes,
//!   counted in whole dispatch intervals; within one interval the cheapest offer: commands
//!   with equal limits go by positioning, not by arrival, and late ones latest first (EDF
//!   is the fallback). Remaining ties go by arrival ([`Candidate::seq`]), and the limited
//!   commands are weighed in that order, so the pick does not depend on the order of the
//!   queue ([`OrderingPolicy::order_free`] when the base policy's does not either).
//! - **The budget.** perf_vs_duration_guideline bounds the average increase in completion
//!   time: each take-over must fit in it with its own cost, both picks of one through another
//!   command ([`budget`]).
//!
//! Unlimited commands keep the base policy's ordering and tail control; the base policy is
//! asked only for the picks it makes, so its aging follows the rate at which it dispatches.

mod budget;
mod stopping;

use crate::cdl::PerfVsDurationGuideline;
use crate::order::{
    ceil, floor, Candidate, Limits, OrderConfig, OrderingPolicy, Positions, QueueMemos,
};
use budget::Budget;
use drive::{Drive, Ns, QueuedOp};
use std::fmt;
use std::str::FromStr;
use stopping::{Kind, Offer, Plan, Stopping};

/// Tuning of [`DeadlineAware`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DeadlineAwareConfig {
    /// How early limited commands are planned to finish: each limit is taken as this many
    /// dispatch intervals earlier than it is, a margin for what the estimates miss (commands
    /// whose positioning stays dear, limited commands arriving together). More serves them
    /// earlier and costs more total IOPS; 0 plans to the limit itself; below 0 plans past it.
    /// The trade-off is experiments/README.md's B2 curve (`crates/sim/examples/cdl_tradeoff.rs`).
    pub aggressiveness: f64,
    /// The ordering of everything the limits do not decide.
    pub base: OrderConfig,
}

impl Default for DeadlineAwareConfig {
    fn default() -> Self {
        Self {
            aggressiveness: 2.0,
            base: OrderConfig::default(),
        }
    }
}

impl FromStr for DeadlineAwareConfig {
    type Err = String;

    /// Parses `aggressiveness=1.5` and/or `base=<ordering policy>` (`base` last: the rest of
    /// the string is the policy, e.g. `aggressiveness=1,base=asptf:rate=0.02`); empty for the
    /// defaults. The error names the offending key.
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
                "aggressiveness" => {
                    config.aggressiveness = value
                        .trim()
                        .parse::<f64>()
                        .ok()
                        .filter(|v| v.is_finite())
                        .ok_or(format!("aggressiveness: {value:?} is not a number"))?
                }
                other => {
                    return Err(format!(
                        "unknown parameter {other:?} (aggressiveness, base)"
                    ))
                }
            }
        }
        Ok(config)
    }
}

/// Service time and dispatch interval assumed before any was observed (an HDD random access,
/// experiments/README.md, B1).
const INITIAL_SERVICE_NS: f64 = 12e6;
/// What missing a limit costs, in mean service times: taking a command this much dearer to
/// keep a limit is worth it (each dispatch interval late then costs more, see [`stopping`]).
const PRICE_OF_A_MISS: f64 = 4.0;
/// The room a start limit alone is planned with, in dispatch intervals beyond the
/// aggressiveness margin (see [`DeadlineAware::start_room`]).
const START_ROOM: f64 = 6.0;
/// How many of the cheapest candidates a look-ahead tries as the way to a limited command.
const FIRSTS: usize = 8;
/// Weight of one observation in the running means of service time, dispatch interval and
/// best positioning time (about the last 64 commands).
const GAIN: f64 = 1.0 / 64.0;

/// The CDL-aware policy. [`crate::Queue`] feeds it observed service times and the
/// perf_vs_duration_guideline of the T2A page.
pub struct DeadlineAware {
    aggressiveness: f64,
    base: Box<dyn OrderingPolicy + Send>,
    budget: Budget,
    stopping: Stopping,
    mean_service: f64,
    /// Running mean time between back-to-back picks, and the previous pick (time, whether
    /// commands were left waiting after it).
    interval: f64,
    last_pick: Option<(Ns, bool)>,
    /// Running mean of the best raw positioning time of a pick.
    mean_best: f64,
    positions: Positions,
    /// Scratch: the limited candidates of a pick and their indices, the indices of the
    /// candidates that may lead to them, and the look-ahead estimates.
    limited: Vec<Limited>,
    limited_at: Vec<usize>,
    /// Scratch: each limited candidate's (seq, place in `limited`), in arrival order.
    arrivals: Vec<(u64, usize)>,
    firsts: Vec<usize>,
    after: Vec<Ns>,
}

/// A limited candidate at a pick.
#[derive(Clone, Copy, Debug)]
struct Limited {
    index: usize,
    /// Its [`Candidate::seq`].
    seq: u64,
    positioning: Ns,
    /// Estimated service time if started now.
    service: Ns,
    /// Positioning time beyond the best raw choice if started now.
    direct: Ns,
    /// The cheapest offer: started now, or reached next through another candidate.
    offer: Offer,
    /// The way it gains most: started now (`None`), or reached next through the candidate
    /// `via` started now, at `cost`.
    via: Option<usize>,
    cost: Ns,
    /// The value of waiting for a later pick (see [`stopping`]), and that minus what the
    /// chosen way costs with the price of its lateness.
    wait: f64,
    regret: f64,
    /// See [`DeadlineAware::urgency`].
    urgency: i64,
}

impl fmt::Debug for DeadlineAware {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeadlineAware")
            .field("aggressiveness", &self.aggressiveness)
            .field("budget", &self.budget)
            .field("mean_service", &self.mean_service)
            .field("interval", &self.interval)
            .finish_non_exhaustive()
    }
}

impl DeadlineAware {
    pub fn new(config: DeadlineAwareConfig) -> Self {
        Self::with_base(config.aggressiveness, config.base.build())
    }

    /// Over any ordering policy.
    pub fn with_base(aggressiveness: f64, base: Box<dyn OrderingPolicy + Send>) -> Self {
        Self {
            aggressiveness,
            base,
            budget: Budget::new(PerfVsDurationGuideline::default().fraction()),
            stopping: Stopping::default(),
            mean_service: INITIAL_SERVICE_NS,
            interval: INITIAL_SERVICE_NS,
            last_pick: None,
            mean_best: 0.0,
            positions: Positions::default(),
            limited: Vec::new(),
            limited_at: Vec::new(),
            arrivals: Vec::new(),
            firsts: Vec::new(),
            after: Vec::new(),
        }
    }

    /// Sets the allowed increase in average completion time (from the T2A page).
    pub fn set_budget(&mut self, perf: PerfVsDurationGuideline) {
        self.budget.set(perf.fraction());
    }

    /// Records one command's service time (start to completion).
    pub fn observe_service(&mut self, service: Ns) {
        self.mean_service += (service as f64 - self.mean_service) * GAIN;
        self.budget.served(service);
    }

    /// Tracks the time between back-to-back picks (a gap after the queue ran dry is idle
    /// time, not a dispatch interval).
    fn observe_pick(&mut self, now: Ns, queued: usize) {
        if let Some((prev, true)) = self.last_pick {
            let gap = now.saturating_sub(prev) as f64;
            self.interval += (gap - self.interval) * GAIN;
        }
        self.last_pick = Some((now, queued > 1));
    }

    /// The command to start instead of the base policy's pick for the sake of a limit, if
    /// any, given every candidate's positioning time (and, for look-ahead, their ops with the
    /// drive's memos).
    fn take_over(
        &mut self,
        now: Ns,
        queue: &[Candidate],
        times: &[Ns],
        ops: Option<&[QueuedOp]>,
        drive: &dyn Drive,
    ) -> Option<usize> {
        if !self.budget.open() || times.len() != queue.len() {
            return None;
        }
        // One pass finds the best raw choice and the limited candidates; what a limited one
        // costs beyond the best is known only after it, so the second pass fills that in.
        let mut best = times.first().copied().unwrap_or(0);
        self.limited.clear();
        for (index, (c, &positioning)) in queue.iter().zip(times).enumerate() {
            best = best.min(positioning);
            if c.limits.has_deadline() {
                self.limited.push(Limited {
                    index,
                    seq: c.seq,
                    positioning,
                    service: 0,
                    direct: 0,
                    offer: Offer::default(),
                    via: None,
                    cost: 0,
                    wait: 0.0,
                    regret: f64::NEG_INFINITY,
                    urgency: 0,
                });
            }
        }
        self.mean_best += (best as f64 - self.mean_best) * GAIN;
        if self.limited.is_empty() {
            return None;
        }
        for l in &mut self.limited {
            l.direct = l.positioning - best;
            (l.offer.cost, l.cost) = (l.direct, l.direct);
            // With its memo the drive knows, mostly, how it would be served.
            l.service = match ops.and_then(|ops| ops.get(l.index)) {
                Some(q) => drive.service_time_memo(now, q, l.positioning),
                None => drive.service_time(now, &queue[l.index].op),
            };
        }
        // Each command's value of waiting, from the tables as they are: it bounds what a
        // look-ahead may cost (worked out again below if this pick's offers refresh them).
        self.weigh(now, queue);
        let ahead = ops.is_some_and(|ops| self.look_ahead(now, queue, times, best, ops, drive));
        // The offers seen teach the value of waiting (from the next refresh of its tables on).
        let typical = self.mean_best as Ns;
        if ahead {
            let n = self.limited.len();
            for (&first, after) in self.firsts.iter().zip(self.after.chunks_exact(n)) {
                let t = times.get(first).copied().unwrap_or(Ns::MAX);
                for (l, &a) in self.limited.iter_mut().zip(after) {
                    let cost = (t - best).saturating_add(a.saturating_sub(typical));
                    if first != l.index && cost < l.offer.cost {
                        l.offer = Offer { cost, later: true };
                    }
                }
            }
        }
        let plan = Plan {
            interval: self.interval,
            price: PRICE_OF_A_MISS * self.mean_service,
        };
        // Recorded in arrival order (see the module's ties).
        self.arrivals.clear();
        self.arrivals
            .extend(self.limited.iter().enumerate().map(|(i, l)| (l.seq, i)));
        // Insertion sort in place: they are few.
        for k in 1..self.arrivals.len() {
            let mut j = k;
            while j > 0 && self.arrivals[j - 1].0 > self.arrivals[j].0 {
                self.arrivals.swap(j - 1, j);
                j -= 1;
            }
        }
        let mut refreshed = false;
        for l in self
            .arrivals
            .iter()
            .filter_map(|&(_, i)| self.limited.get(i))
        {
            refreshed |= self.stopping.record(l.offer, l.direct, l.service, plan);
        }
        if refreshed {
            self.weigh(now, queue);
        }
        if ahead {
            self.weigh_look_ahead(now, queue, times, best);
        }
        let pick = self
            .limited
            .iter()
            // A take-over through another command must afford both picks; it spends the
            // first now, the second when that comes.
            .filter(|l| l.regret > 0.0 && self.budget.allows(l.cost))
            .min_by_key(|l| (l.urgency, l.cost, l.seq))
            .copied()?;
        self.budget.spend(pick.spends(times, best));
        Some(pick.via.unwrap_or(pick.index))
    }

    /// Each limited candidate's value of waiting, the regret of not starting it now, and its
    /// urgency.
    fn weigh(&mut self, now: Ns, queue: &[Candidate]) {
        let mut limited = std::mem::take(&mut self.limited);
        for l in &mut limited {
            let limits = &queue[l.index].limits;
            let left = self.left(now, limits);
            l.wait = self.wait(left);
            let late = self.lateness(left, limits, 0.0, l.service as f64);
            l.regret = l.wait - self.stopping.now(l.direct, late);
            l.urgency = self.urgency(now, limits);
        }
        self.limited = limited;
    }

    /// Asks the drive, if it can tell, where each limited candidate would be after each
    /// candidate started now that could lead to it more cheaply than starting it directly
    /// (into `firsts` and `after`, a row per first). Reaching a command through another costs
    /// at least the other's positioning beyond the best and starts it later, so the others
    /// can be left out exactly.
    fn look_ahead(
        &mut self,
        now: Ns,
        queue: &[Candidate],
        times: &[Ns],
        best: Ns,
        ops: &[QueuedOp],
        drive: &dyn Drive,
    ) -> bool {
        if ops.len() != times.len() {
            return false;
        }
        // A way through another command is only taken if it costs less than starting the
        // command now and than waiting (weigh_look_ahead): no first dearer than that can lead
        // to a limited command usefully, and asking the drive about it costs most of the time
        // of a pick (issue 21, speed).
        let learned = self.stopping.learned();
        let dearest = self
            .limited
            .iter()
            .map(|l| match learned {
                true => ceil((l.direct as f64).min(l.wait.max(0.0))) as Ns,
                false => l.direct,
            })
            .max()
            .unwrap_or(0);
        self.firsts.clear();
        // Only the cheapest few can lead anywhere for less than the others cost alone: keep
        // the [`FIRSTS`] cheapest below the bound (by time, then arrival).
        // Each kept as (time and seq as one number, index): seqs are distinct.
        const NONE: (u128, usize) = (u128::MAX, usize::MAX);
        let mut cheapest = [NONE; FIRSTS];
        for (i, (&t, c)) in times.iter().zip(queue).enumerate() {
            let key = ((u128::from(t) << 64) | u128::from(c.seq), i);
            if t - best < dearest && key.0 < cheapest[FIRSTS - 1].0 {
                // Insertion from the end: a shift of a few entries, not a call to memmove.
                let mut at = FIRSTS - 1;
                while let Some(&before) = at.checked_sub(1).and_then(|b| cheapest.get(b)) {
                    if before.0 <= key.0 {
                        break;
                    }
                    cheapest[at] = before;
                    at -= 1;
                }
                cheapest[at] = key;
            }
        }
        self.firsts
            .extend(cheapest.iter().filter(|c| c.1 != usize::MAX).map(|c| c.1));
        self.limited_at.clear();
        self.limited_at.extend(self.limited.iter().map(|l| l.index));
        drive.positioning_after(
            now,
            ops,
            times,
            &self.firsts,
            &self.limited_at,
            &mut self.after,
        ) && self.after.len() == self.firsts.len() * self.limited.len()
    }

    /// For each limited candidate, whether reaching it next, through another candidate started
    /// now, gains more than starting it now: the other's positioning beyond the best, plus
    /// the limited one's positioning after it beyond a typical best one, with the price of
    /// starting it that much later.
    fn weigh_look_ahead(&mut self, now: Ns, queue: &[Candidate], times: &[Ns], best: Ns) {
        let n = self.limited.len();
        let typical = self.mean_best as Ns;
        let mut limited = std::mem::take(&mut self.limited);
        for (&first, after) in self.firsts.iter().zip(self.after.chunks_exact(n)) {
            let t = times.get(first).copied().unwrap_or(Ns::MAX);
            for (l, &a) in limited.iter_mut().zip(after) {
                let cost = (t - best).saturating_add(a.saturating_sub(typical));
                if first == l.index || cost as f64 >= l.wait {
                    continue;
                }
                // It starts once the first is done (its transfer taken as long as the limited
                // one's), then takes `a` plus its own transfer.
                let transfer = l.service.saturating_sub(l.positioning) as f64;
                let start = t as f64 + transfer;
                let finish = start + a as f64 + transfer;
                let limits = &queue[l.index].limits;
                let late = self.lateness(self.left(now, limits), limits, start, finish);
                let regret = l.wait - self.stopping.now(cost, late);
                // Of equal gains, the way through the earliest arrival (see the module's ties).
                let better = regret > l.regret
                    || (regret == l.regret
                        && l.via.is_some_and(|v| rank(queue, first) < rank(queue, v)));
                if better {
                    (l.regret, l.cost, l.via) = (regret, cost, Some(first));
                }
            }
        }
        self.limited = limited;
    }

    /// The dispatch interval, counted from now, in which the command must start to meet its
    /// limits (by the service time of a start at no cost); negative when that is past.
    fn urgency(&self, now: Ns, limits: &Limits) -> i64 {
        let start = limits
            .start_by()
            .map_or(f64::INFINITY, |t| t as f64 - self.start_room(limits));
        let finish = limits
            .finish_by()
            .map_or(f64::INFINITY, |t| t as f64 - self.stopping.base_service());
        floor((start.min(finish) - now as f64) / self.interval) as i64
    }

    /// The time left from `now` to the start limit (planned with its room) and to the
    /// completion limit, those it has, each taken as `aggressiveness` dispatch intervals
    /// earlier than it is.
    fn left(&self, now: Ns, limits: &Limits) -> Left {
        let left = |t: Ns| t as f64 - now as f64 - self.aggressiveness * self.interval;
        Left {
            start: limits.start_by().map(|t| left(t) - self.start_room(limits)),
            finish: limits.finish_by().map(left),
        }
    }

    /// The value of waiting for a later pick: the more pressing of the command's limits.
    fn wait(&self, left: Left) -> f64 {
        let mut wait = 0.0f64;
        if let Some(left) = left.start {
            wait = wait.max(self.stopping.wait(Kind::Start, left));
        }
        if let Some(left) = left.finish {
            wait = wait.max(self.stopping.wait(Kind::Completion, left));
        }
        wait
    }

    /// How late the command would be if it started `start` ns from now and finished `finish`
    /// ns from now: the latest of its limits, an overrun active limit included.
    fn lateness(&self, left: Left, limits: &Limits, start: f64, finish: f64) -> f64 {
        let mut late = f64::NEG_INFINITY;
        if let Some(left) = left.start {
            late = late.max(start - left);
        }
        if let Some(left) = left.finish {
            late = late.max(finish - left);
        }
        if let Some(a) = limits.active_for() {
            late = late.max(finish - start - a as f64);
        }
        late
    }
}

/// See [`DeadlineAware::left`].
#[derive(Clone, Copy, Debug)]
struct Left {
    start: Option<f64>,
    finish: Option<f64>,
}

impl DeadlineAware {
    /// The room a start limit (max inactive time) alone is planned with, before the
    /// aggressiveness margin: [`START_ROOM`] dispatch intervals. A host measures completions
    /// (Seagate's SLA, experiments/README.md A4, counts R1's latency against its 100 ms
    /// inactive limit), so a command met just at its start limit is late by its service and
    /// by the other commands due at the same time; a completion limit counts the command's
    /// own service already ([`stopping`]), and with one in the same descriptor the start
    /// limit needs no room.
    fn start_room(&self, limits: &Limits) -> f64 {
        if limits.finish_by().is_some() {
            0.0
        } else {
            START_ROOM * self.interval
        }
    }
}

/// The order of ties: arrival into the device queue.
fn rank(queue: &[Candidate], index: usize) -> u64 {
    queue.get(index).map_or(u64::MAX, |c| c.seq)
}

impl Limited {
    /// What taking its offer spends now: the positioning beyond the best raw choice of what
    /// starts now.
    fn spends(&self, times: &[Ns], best: Ns) -> Ns {
        match self.via {
            Some(first) => times.get(first).map_or(0, |t| t - best),
            None => self.direct,
        }
    }
}

impl OrderingPolicy for DeadlineAware {
    fn order_free(&self) -> bool {
        self.base.order_free()
    }

    fn pick(&mut self, now: Ns, queue: &[Candidate], drive: &dyn Drive) -> usize {
        self.observe_pick(now, queue.len());
        let mut positions = std::mem::take(&mut self.positions);
        positions.measure(now, queue, drive);
        let (times, ops) = positions.measured();
        let pick = match self.take_over(now, queue, times, Some(ops), drive) {
            Some(i) => i,
            None => match self.base.pick_timed(now, queue, times) {
                Some(i) => i,
                None => self.base.pick(now, queue, drive),
            },
        };
        positions.picked(pick);
        self.positions = positions;
        pick
    }

    fn pick_memoised(
        &mut self,
        now: Ns,
        queue: &[Candidate],
        memos: &mut QueueMemos,
        drive: &dyn Drive,
    ) -> usize {
        if memos.len() != queue.len() {
            return self.pick(now, queue, drive);
        }
        self.observe_pick(now, queue.len());
        let mut positions = std::mem::take(&mut self.positions);
        let times = positions.measure_memoised(now, memos, drive);
        let pick = match self.take_over(now, queue, times, Some(memos.ops()), drive) {
            Some(i) => i,
            None => match self.base.pick_timed(now, queue, times) {
                Some(i) => i,
                None => self.base.pick_memoised(now, queue, memos, drive),
            },
        };
        self.positions = positions;
        pick
    }
}
