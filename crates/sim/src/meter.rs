//! The accounting of one point, shared by `stint sim` and `stint bench` so that their reports
//! compare point for point: how the host reads a command's end, the ramp, the stop rule, the
//! statistics per (class, DLD) group, per job and of the SLA's commands, and the completions
//! that were not GOOD by their sense.

use crate::engine::{group, group_name, PointResult, PointSetup, Stop};
use crate::sla::Scope;
use drive::Ns;
use qos::{Class, Outcome};
use scsi::{Sense, Status};
use std::collections::BTreeMap;
use workload::{Io, LatencyStats};

/// (sense key, ASC, ASCQ) of a completion that was not GOOD; (0, 0, status) for a status
/// without sense.
pub type SenseCode = (u8, u8, u8);

/// Completions that were not GOOD, by their sense.
pub type Errors = BTreeMap<SenseCode, u64>;

/// A command's end as the host reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ended {
    pub outcome: Outcome,
    /// Its sense, unless it ended GOOD without any.
    pub error: Option<SenseCode>,
}

impl Ended {
    pub const GOOD: Ended = Ended {
        outcome: Outcome::Good,
        error: None,
    };

    /// What a status byte and its sense say (qos::status reads the outcome).
    pub fn read(status: u8, sense: Option<&Sense>) -> Ended {
        let error = match sense {
            Some(s) => Some((s.key as u8, s.asc.0, s.asc.1)),
            None if status == Status::Good as u8 => None,
            None => Some((0, 0, status)),
        };
        Ended {
            outcome: Outcome::read(status, sense),
            error,
        }
    }
}

/// Who brought a command's data to the host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Served {
    /// The drive transferred it (a read's data, or a write's).
    Drive,
    /// The drive ended the read without it and a replica served it.
    Replica,
    /// Nobody: the command ended without its data.
    Nobody,
}

impl Served {
    /// The drive's own answer: it moved the data only when the command ended GOOD.
    pub fn by_drive(outcome: Outcome) -> Served {
        if outcome == Outcome::Good {
            Served::Drive
        } else {
            Served::Nobody
        }
    }
}

/// One completion to account.
#[derive(Clone, Copy, Debug)]
pub struct Completed {
    /// The job instance, an index in the setup's jobs.
    pub instance: usize,
    pub io: Io,
    /// Submission to status.
    pub latency: Ns,
    pub ended: Ended,
    /// It exceeded a duration limit on its way.
    pub missed: bool,
    pub served: Served,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OneGroup {
    /// Nothing measured yet.
    Unknown,
    Is(usize),
    /// Commands of several groups were measured: each group has its own statistics.
    No,
}

/// Bookkeeping of measured completions.
pub struct Meter {
    result: PointResult,
    /// The group of every command measured so far, while there is one: its statistics are
    /// `total`'s, kept only there until a command of another group comes. (When all commands
    /// are of one group, as in B1, one histogram takes each latency instead of two.)
    one_group: OneGroup,
    sla: Option<Scope>,
    /// The job of each instance (an index in `result.jobs`); with one job, `total` is its.
    job_of: Vec<usize>,
    seen: u64,
    ramp: u64,
    /// When the ramp ended and when the last measured command completed.
    started: Ns,
    last: Ns,
    stop: Stop,
    done: bool,
    errors: Errors,
}

impl Meter {
    /// Nothing measured yet, for `setup`'s jobs.
    pub fn new(setup: &PointSetup) -> Self {
        let (result, job_of) = PointResult::new(setup);
        Self {
            result,
            one_group: OneGroup::Unknown,
            sla: setup.sla,
            job_of,
            seen: 0,
            ramp: setup.ramp,
            started: 0,
            last: 0,
            stop: setup.stop,
            done: false,
            errors: Errors::new(),
        }
    }

    /// A command of `class` with `dld` went out: its group is reported from now on, even if
    /// none of its commands is measured (`PointResult::groups`).
    pub fn submitted(&mut self, class: Class, dld: u8) {
        if self.done {
            return;
        }
        if let Some(stats @ None) = self.result.groups.get_mut(group(class, dld)) {
            *stats = Some(LatencyStats::new());
        }
    }

    /// Whether the ramp is over: completions now are measured.
    pub fn measuring(&self) -> bool {
        self.seen >= self.ramp
    }

    /// Whether the point has measured enough.
    pub fn done(&self) -> bool {
        self.done
    }

    /// Accounts a completion at `now`; returns whether the point has measured enough. Those
    /// that complete at the instant it stopped are counted; later ones (the commands `stint
    /// bench` still has in flight) are not.
    pub fn record(&mut self, now: Ns, c: &Completed) -> bool {
        if self.done && now > self.last {
            return true;
        }
        self.seen += 1;
        self.result.commands += 1;
        if self.seen <= self.ramp {
            self.started = now;
            return false;
        }
        if let Some(code) = c.ended.error {
            *self.errors.entry(code).or_default() += 1;
        }
        let io = &c.io;
        let data = (c.served == Served::Drive).then(|| io.bytes());
        let g = group(io.class, io.dld);
        // The copies kept in `total` part from it before this command makes them differ.
        match self.one_group {
            OneGroup::Unknown => self.one_group = OneGroup::Is(g),
            OneGroup::Is(one) if one != g => {
                self.copy_total_to_group(one);
                self.one_group = OneGroup::No;
            }
            OneGroup::Is(_) | OneGroup::No => {}
        }
        let mut stats = [Some(&mut self.result.total), None, None, None];
        if self.one_group == OneGroup::No {
            stats[1] = self.result.groups.get_mut(g).and_then(Option::as_mut);
        }
        if self.sla.is_some_and(|scope| scope.covers(io.write, io.dld)) {
            stats[2] = Some(&mut self.result.sla);
        }
        if self.result.jobs.len() > 1 {
            let job = self.job_of.get(c.instance).copied().unwrap_or(0);
            stats[3] = self.result.jobs.get_mut(job).map(|(_, stats)| stats);
        }
        let outcome = c.ended.outcome;
        for s in stats.into_iter().flatten() {
            s.record(c.latency, data);
            if io.dld != 0 {
                s.count_limited();
            }
            if c.missed {
                s.count_limit_missed();
            }
            if outcome == Outcome::CompletedUnavailable {
                s.count_completed_unavailable();
            }
            if outcome.is_aborted() {
                s.count_aborted();
            }
            if c.served == Served::Replica {
                s.count_replica();
            }
        }
        self.last = now;
        self.done = match self.stop {
            Stop::Ios(n) => self.result.total.count() >= n,
            Stop::Runtime(t) => now.saturating_sub(self.started) >= t,
        };
        self.done
    }

    /// Group `g`'s statistics are what `total` holds.
    fn copy_total_to_group(&mut self, g: usize) {
        if let Some(Some(stats)) = self.result.groups.get_mut(g) {
            *stats = self.result.total.clone();
        }
    }

    /// A progress line: measured I/Os, IOPS and p99 per group so far.
    pub fn live(&self, now: Ns) -> String {
        if self.seen <= self.ramp {
            return format!("ramp {}/{}", self.seen, self.ramp);
        }
        let secs = now.saturating_sub(self.started) as f64 / 1e9;
        let total = &self.result.total;
        let mut line = format!(
            "{} I/Os, {:.0} IOPS",
            total.count(),
            total.count() as f64 / secs.max(1e-9)
        );
        for (g, s) in self.result.used_groups() {
            let s = if self.one_group == OneGroup::Is(g) {
                total
            } else {
                s
            };
            line += &format!(
                " | {} p99 {:.1} ms",
                group_name(g),
                s.quantile_ns(0.99) as f64 / 1e6
            );
        }
        line
    }

    /// The point's result, every copy kept in `total` written out, and the completions that
    /// were not GOOD.
    pub fn finish(mut self) -> (PointResult, Errors) {
        if let OneGroup::Is(g) = self.one_group {
            self.copy_total_to_group(g);
        }
        if let [(_, only)] = self.result.jobs.as_mut_slice() {
            *only = self.result.total.clone();
        }
        self.result.interval = self.last.saturating_sub(self.started);
        (self.result, self.errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Experiment;
    use scsi::{Asc, SenseKey};

    fn setup() -> PointSetup {
        let mut exp = Experiment::parse(
            "id = \"t\"\nqd = [2]\nios = 2\n[drive]\nmodel = \"instant\"\n[[job]]\nname = \"r\"\n",
        )
        .unwrap();
        exp.ramp_ios = Some(0);
        exp.points()
            .first()
            .map(|p| exp.setup_on(*p, 1, 1 << 30))
            .unwrap()
            .unwrap()
    }

    fn read(dld: u8) -> Io {
        Io {
            lba: 0,
            blocks: 256,
            write: false,
            class: Class::Medium,
            dld,
        }
    }

    fn completed(latency: Ns, ended: Ended, missed: bool) -> Completed {
        Completed {
            instance: 0,
            io: read(1),
            latency,
            ended,
            missed,
            served: Served::by_drive(ended.outcome),
        }
    }

    /// An aborted read is a completion (IOPS, latency) without data (data IOPS, MiB/s), and
    /// its sense is listed.
    #[test]
    fn an_aborted_read_is_a_completion_without_data() {
        let mut meter = Meter::new(&setup());
        meter.submitted(Class::Medium, 1);
        let sense = Sense::new(
            SenseKey::AbortedCommand,
            Asc::COMMAND_TIMEOUT_DURING_PROCESSING,
        );
        let aborted = Ended::read(Status::CheckCondition as u8, Some(&sense));
        assert_eq!(aborted.outcome, Outcome::AbortedDuringProcessing);
        assert!(!meter.record(0, &completed(10_000_000, Ended::GOOD, false)));
        assert!(meter.record(1_000_000_000, &completed(50_000_000, aborted, true)));
        let (result, errors) = meter.finish();
        let s = result.total.summary(result.interval);
        assert_eq!((s.ios, s.data_ios, s.aborted), (2, 1, 1), "{s:?}");
        assert_eq!((s.iops, s.data_iops, s.mib_s), (2.0, 1.0, 0.125), "{s:?}");
        assert_eq!(errors.get(&(0x0B, 0x2E, 0x02)), Some(&1));
        let names: Vec<String> = result.used_groups().map(|(g, _)| group_name(g)).collect();
        assert_eq!(names, ["medium-dld1"]);
    }

    /// Completions at the instant the point stopped count; later ones do not.
    #[test]
    fn the_stop_instant_ends_the_point() {
        let mut meter = Meter::new(&setup());
        meter.submitted(Class::Medium, 1);
        for _ in 0..2 {
            meter.record(5, &completed(1, Ended::GOOD, false));
        }
        assert!(meter.done());
        assert!(meter.record(5, &completed(1, Ended::GOOD, false)));
        assert!(meter.record(6, &completed(1, Ended::GOOD, false)));
        meter.submitted(Class::High, 0);
        let (result, _) = meter.finish();
        assert_eq!((result.total.count(), result.commands), (3, 3));
        assert_eq!(result.used_groups().count(), 1, "nothing new once stopped");
    }

    #[test]
    fn a_status_without_sense_is_an_error_by_its_status() {
        let busy = Ended::read(Status::Busy as u8, None);
        assert_eq!(
            (busy.outcome, busy.error),
            (Outcome::MediumError, Some((0, 0, 0x08)))
        );
        assert_eq!(Ended::read(Status::Good as u8, None), Ended::GOOD);
    }
}
