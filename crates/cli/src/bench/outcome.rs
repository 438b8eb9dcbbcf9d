//! What a completed command means to the host (its status and sense decoded as `stint sim`
//! decodes them), and the per-point accounting: the simulator's groups (class × DLD), ramp and
//! stop rules, so the two reports compare point for point.

use iscsi::initiator::CommandResult;
use qos::Outcome;
use sim::engine::{group, group_name};
use sim::sla::Scope;
use sim::{PointResult, PointSetup, Stop};
use std::collections::BTreeMap;
use workload::{Io, LatencyStats};

/// A command's end as the host reads it.
pub struct Ended {
    pub outcome: Outcome,
    /// (sense key, ASC, ASCQ) when the status was not plain GOOD.
    pub sense: Option<(u8, u8, u8)>,
}

/// SAM-5 status codes: GOOD is 00h.
const GOOD: u8 = 0x00;

pub fn of(r: &CommandResult) -> Ended {
    let sense = scsi::sense::parse_key_asc(&r.sense).map(|(key, asc)| (key, asc.0, asc.1));
    let sense = if r.status == GOOD && sense.is_none() {
        None
    } else {
        // A non-GOOD status without readable sense still is an error.
        Some(sense.unwrap_or((0, 0, r.status)))
    };
    Ended {
        outcome: Outcome::from_status(r.status == GOOD, sense),
        sense,
    }
}

/// The measured completions of one point.
pub struct Meter {
    result: PointResult,
    seen: u64,
    ramp: u64,
    /// When the ramp ended and when the last measured command completed (ns).
    started: u64,
    last: u64,
    stop: Stop,
    done: bool,
    /// Completions that were not GOOD, by (sense key, ASC, ASCQ).
    errors: BTreeMap<(u8, u8, u8), u64>,
    /// The job of each instance (an index in `result.jobs`).
    job_of: Vec<usize>,
    /// The commands the experiment's SLA covers.
    sla: Option<Scope>,
}

impl Meter {
    pub fn new(setup: &PointSetup) -> Meter {
        let (result, job_of) = PointResult::new(setup);
        Meter {
            result,
            job_of,
            seen: 0,
            ramp: setup.ramp,
            started: 0,
            last: 0,
            stop: setup.stop,
            done: false,
            errors: BTreeMap::new(),
            sla: setup.sla,
        }
    }

    /// Records one completion of job instance `instance` at `now`; returns whether the point
    /// has measured enough. Completions after that (the commands still in flight) are not
    /// counted.
    pub fn record(
        &mut self,
        now: u64,
        instance: usize,
        latency: u64,
        io: &Io,
        e: &Ended,
        missed: bool,
    ) -> bool {
        if self.done {
            return true;
        }
        self.seen += 1;
        self.result.commands += 1;
        if self.seen <= self.ramp {
            self.started = now;
            return false;
        }
        let data = (e.outcome == Outcome::Good).then(|| io.bytes());
        if let Some(sense) = e.sense {
            *self.errors.entry(sense).or_default() += 1;
        }
        let g = group(io.class, io.dld);
        if let Some(stats @ None) = self.result.groups.get_mut(g) {
            *stats = Some(LatencyStats::new());
        }
        let job = self.job_of.get(instance).copied().unwrap_or(0);
        let mut groups = [
            Some(&mut self.result.total),
            self.result.groups.get_mut(g).and_then(Option::as_mut),
            self.result.jobs.get_mut(job).map(|(_, stats)| stats),
            None,
        ];
        if self.sla.is_some_and(|scope| scope.covers(io.write, io.dld)) {
            groups[3] = Some(&mut self.result.sla);
        }
        for s in groups.into_iter().flatten() {
            s.record(latency, data);
            if io.dld != 0 {
                s.count_limited();
            }
            if missed {
                s.count_limit_missed();
            }
            if e.outcome == Outcome::CompletedUnavailable {
                s.count_completed_unavailable();
            }
            if e.outcome.is_aborted() {
                s.count_aborted();
            }
        }
        self.last = now;
        self.done = match self.stop {
            Stop::Ios(n) => self.result.total.count() >= n,
            Stop::Runtime(t) => now.saturating_sub(self.started) >= t,
        };
        self.done
    }

    /// A progress line: measured I/Os, IOPS and p99 per group so far.
    pub fn live(&self, now: u64) -> String {
        let secs = now.saturating_sub(self.started) as f64 / 1e9;
        if self.seen <= self.ramp {
            return format!("ramp {}/{}", self.seen, self.ramp);
        }
        let mut line = format!(
            "{} I/Os, {:.0} IOPS",
            self.result.total.count(),
            self.result.total.count() as f64 / secs.max(1e-9)
        );
        for (g, s) in self.result.used_groups() {
            line += &format!(
                " | {} p99 {:.1} ms",
                group_name(g),
                s.quantile_ns(0.99) as f64 / 1e6
            );
        }
        line
    }

    /// The point's results, and the completions that were not GOOD by their sense.
    pub fn into_result(mut self) -> (PointResult, BTreeMap<(u8, u8, u8), u64>) {
        self.result.interval = self.last.saturating_sub(self.started);
        (self.result, self.errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use qos::Class;
    use sim::Experiment;

    /// `stint bench` counts as the simulator does: an aborted read is a completion (IOPS,
    /// latency) without data (data IOPS, MiB/s), and its sense is listed.
    #[test]
    fn an_aborted_read_is_a_completion_without_data() {
        let mut exp = Experiment::parse(
            "id = \"t\"\nqd = [2]\nios = 2\n[drive]\nmodel = \"instant\"\n[[job]]\nname = \"r\"\n",
        )
        .unwrap();
        exp.ramp_ios = Some(0);
        let setup = exp
            .points()
            .first()
            .map(|p| exp.setup_on(*p, 1, 1 << 30))
            .unwrap()
            .unwrap();
        let mut meter = Meter::new(&setup);
        let io = Io {
            lba: 0,
            blocks: 256,
            write: false,
            class: Class::Medium,
            dld: 1,
        };
        let good = Ended {
            outcome: Outcome::Good,
            sense: None,
        };
        let aborted = Ended {
            outcome: Outcome::AbortedDuringProcessing,
            sense: Some((0x0B, 0x2E, 0x02)),
        };
        assert!(!meter.record(0, 0, 10_000_000, &io, &good, false));
        assert!(meter.record(1_000_000_000, 1, 50_000_000, &io, &aborted, true));
        let (result, errors) = meter.into_result();
        let s = result.total.summary(result.interval);
        assert_eq!((s.ios, s.data_ios, s.aborted), (2, 1, 1), "{s:?}");
        assert_eq!((s.iops, s.data_iops, s.mib_s), (2.0, 1.0, 0.125), "{s:?}");
        assert_eq!(errors.get(&(0x0B, 0x2E, 0x02)), Some(&1));
    }
}
