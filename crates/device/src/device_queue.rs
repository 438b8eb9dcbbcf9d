//! Logical units with a device queue: medium commands are timed by a drive model and ordered
//! by the QoS queue (CDL, priority classes, WRR), everything else runs at once. The transport
//! drives it with the time: [`LogicalUnit::submit`] at arrival, [`LogicalUnit::advance`] when
//! something is due, [`LogicalUnit::complete`] to move a finished task's data.

use crate::logical_unit::check;
use crate::metrics::{Kind, Metrics, QueueMetrics};
use crate::task_set::{Admitted, DhCompletion, MediumTask, TaskSet};
use crate::{Completion, Finished, LogicalUnit, Nexus, Request, Submitted, Verdict};
use drive::{Drive, Ns};
use qos::{Class, LimitKind, Queue, QueueConfig, Scheduler};
use scsi::command::Command;
use scsi::log::{CdlDescriptorStatistics, CdlStatistics};
use scsi::{Asc, CommandInfo, Sense, SenseKey};

/// What makes a logical unit timed or QoS-scheduled.
pub struct DeviceQueue {
    pub queue: QueueConfig,
    pub scheduler: Scheduler,
    /// The timing model (`drive::Instant` for a QoS LU without timing).
    pub drive: Box<dyn Drive + Send>,
    pub dh: DhCompletion,
    /// Priority class of a command by its DLD (index 0..=7), where its nexus has none.
    pub dld_classes: [Option<Class>; 8],
}

/// The per-LU state behind [`LogicalUnit`]'s device queue.
pub(crate) struct Scheduled {
    pub(crate) set: parking_lot::Mutex<TaskSet>,
    dld_classes: [Option<Class>; 8],
    /// The queue's CDL counters at the last LOG SELECT reset: the log page reports the
    /// difference, while the queue's own statistics (the simulator's) keep counting.
    cdl_statistics_reset: parking_lot::Mutex<CdlStatistics>,
    /// Called when something became due earlier than the real-time driver expects.
    waker: std::sync::OnceLock<Box<dyn Fn() + Send + Sync>>,
}

impl Scheduled {
    pub(crate) fn new(q: DeviceQueue) -> Result<Self, qos::ConfigError> {
        let queue = Queue::new(q.queue, q.drive, q.scheduler)?;
        Ok(Scheduled {
            set: parking_lot::Mutex::new(TaskSet::new(queue, q.dh)),
            dld_classes: q.dld_classes,
            cdl_statistics_reset: parking_lot::Mutex::default(),
            waker: std::sync::OnceLock::new(),
        })
    }

    /// The class of a command: its nexus's, else its DLD's, else medium.
    fn class_of(&self, nexus: &Nexus, dld: u8) -> usize {
        nexus
            .class
            .or_else(|| self.dld_classes.get(usize::from(dld)).copied().flatten())
            .unwrap_or(Class::Medium)
            .index()
    }

    fn wake(&self) {
        if let Some(w) = self.waker.get() {
            w();
        }
    }
}

/// [`LogicalUnit::advance`] on the task set: when something is next due, and whether the
/// real-time driver must be woken for it.
fn advance_set(set: &mut TaskSet, now: Ns, out: &mut Vec<Finished>) -> (Option<Ns>, bool) {
    set.advance(now, out);
    let next = set.next_event();
    let wake = set.needs_wake(next);
    (next, wake)
}

impl LogicalUnit {
    /// Whether commands go through a device queue (a timed or QoS logical unit).
    pub fn has_device_queue(&self) -> bool {
        self.scheduled.is_some()
    }

    /// A command arrives at `now`. On a logical unit without a device queue, or for a
    /// command that does not access the medium, it runs at once; medium commands that pass
    /// their checks enter the task set. The caller then calls [`Self::advance`] at `now`
    /// (which wakes the real-time driver if the new task is due later): a command that can
    /// complete at once then does so on the caller's thread.
    /// Every command that completes here, and every one [`Self::complete`] finishes, is
    /// counted in [`Self::metrics`].
    pub fn submit(&self, now: Ns, req: &Request, data_in: &mut Vec<u8>) -> Submitted {
        self.clock.observe(now);
        let start = data_in.len();
        let submitted = self.submit_uncounted(now, req, data_in);
        if let Submitted::Done(c) = &submitted {
            self.counters.count(req, c, data_in.len() - start);
        }
        submitted
    }

    fn submit_uncounted(&self, now: Ns, req: &Request, data_in: &mut Vec<u8>) -> Submitted {
        if let Some(submitted) = self.submit_sanitize(req) {
            return submitted;
        }
        let Some(s) = &self.scheduled else {
            return Submitted::Done(self.execute(req, data_in));
        };
        let (info, cmd, medium) = match self.precheck(req).and_then(|d| self.medium_task(req, d)) {
            Ok(d) => d,
            Err(failed) => return Submitted::Done(failed),
        };
        let kind = Kind::of(req.cdb);
        let admitted = s
            .set
            .lock()
            .submit(now, req.nexus.id, req.tag, req.attribute, kind, medium);
        self.admitted(admitted, req, info, cmd, data_in)
    }

    /// [`Self::submit`] by the logical unit's only user, such as the simulator: the same
    /// checks and task set, no lock taken.
    pub fn submit_mut(&mut self, now: Ns, req: &Request, data_in: &mut Vec<u8>) -> Submitted {
        self.clock.observe(now);
        if self.scheduled.is_none() {
            return Submitted::Done(self.execute(req, data_in));
        }
        let checked = self.precheck_mut(req);
        let (info, cmd, medium) = match checked.and_then(|d| self.medium_task(req, d)) {
            Ok(d) => d,
            Err(failed) => return Submitted::Done(failed),
        };
        let kind = Kind::of(req.cdb);
        let admitted = match &mut self.scheduled {
            Some(s) => {
                s.set
                    .get_mut()
                    .submit(now, req.nexus.id, req.tag, req.attribute, kind, medium)
            }
            None => return Submitted::Done(self.execute(req, data_in)),
        };
        self.admitted(admitted, req, info, cmd, data_in)
    }

    /// What a command that passed its checks asks of the task set: its media access, if any.
    #[allow(clippy::type_complexity)]
    fn medium_task(
        &self,
        req: &Request,
        (info, cmd): (&'static CommandInfo, Command),
    ) -> Result<(&'static CommandInfo, Command, Option<MediumTask>), Completion> {
        let medium = self.media_op(info, &cmd).map_err(check)?;
        let task = medium.map(|(op, dld)| MediumTask {
            op,
            dld,
            class: self
                .scheduled
                .as_ref()
                .map_or(Class::Medium.index(), |s| s.class_of(req.nexus, dld)),
        });
        Ok((info, cmd, task))
    }

    /// What became of a command the task set was offered.
    fn admitted(
        &self,
        admitted: Admitted,
        req: &Request,
        info: &'static CommandInfo,
        cmd: Command,
        data_in: &mut Vec<u8>,
    ) -> Submitted {
        match admitted {
            Admitted::RunNow => Submitted::Done(self.run(req, info, cmd, data_in)),
            Admitted::Overlapped => Submitted::Done(check(Sense::new(
                SenseKey::AbortedCommand,
                Asc::OVERLAPPED_COMMANDS_ATTEMPTED,
            ))),
            Admitted::Queued => Submitted::Queued,
        }
    }

    /// Processes everything due up to `now`; tasks that left the task set are appended to
    /// `out`, for whichever nexus they belong to. Returns when something is next due.
    pub fn advance(&self, now: Ns, out: &mut Vec<Finished>) -> Option<Ns> {
        self.sanitizer.drain(out);
        let s = self.scheduled.as_ref()?;
        let (next, wake) = advance_set(&mut s.set.lock(), now, out);
        if wake {
            s.wake();
        }
        next
    }

    /// [`Self::advance`] by the logical unit's only user: no lock taken.
    pub fn advance_mut(&mut self, now: Ns, out: &mut Vec<Finished>) -> Option<Ns> {
        let s = self.scheduled.as_mut()?;
        let (next, wake) = advance_set(s.set.get_mut(), now, out);
        if wake {
            s.wake();
        }
        next
    }

    /// [`Self::advance`] for the real-time driver: returns when it must call again (`None`:
    /// only after its waker was called).
    pub fn drive_clock(&self, now: Ns, out: &mut Vec<Finished>) -> Option<Ns> {
        self.sanitizer.drain(out);
        let s = self.scheduled.as_ref()?;
        let mut set = s.set.lock();
        set.advance(now, out);
        let next = set.next_event();
        set.arm(next);
        next
    }

    /// The earliest time something is due in the device queue.
    pub fn next_event(&self) -> Option<Ns> {
        self.scheduled.as_ref()?.set.lock().next_event()
    }

    /// Registers the real-time driver's waker: called (from any thread, without locks held)
    /// when something becomes due before the time [`Self::drive_clock`] last returned.
    /// It also answers SANITIZE commands without IMMED when their sanitize is done.
    /// Only the first registration counts.
    pub fn set_waker(&self, waker: Box<dyn Fn() + Send + Sync>) {
        let waker: std::sync::Arc<dyn Fn() + Send + Sync> = waker.into();
        self.sanitizer.set_waker(waker.clone());
        if let Some(s) = &self.scheduled {
            let _first = s.waker.set(Box::new(move || waker()));
        }
    }

    /// Finishes a task that left the task set: runs it (moving its data through `data_in`
    /// or `req.data_out`) when its verdict lets it, and returns its status. The command is
    /// counted in [`Self::metrics`] (an aborted one was, when it was aborted).
    pub fn complete(&self, f: &Finished, req: &Request, data_in: &mut Vec<u8>) -> Completion {
        let start = data_in.len();
        let c = match &f.verdict {
            Verdict::Run => match self.decode(req.cdb) {
                Ok((info, cmd)) => self.run(req, info, cmd, data_in),
                Err(sense) => check(sense),
            },
            Verdict::Fail(c) => c.clone(),
            Verdict::Aborted => {
                return check(Sense::new(
                    SenseKey::AbortedCommand,
                    Asc::NO_ADDITIONAL_SENSE,
                ))
            }
        };
        self.counters.count(req, &c, data_in.len() - start);
        if f.missed {
            // The operator's trace of a missed duration limit (the counters say how many).
            tracing::debug!(
                lun = self.config().lun,
                tag = f.tag,
                dld = match self.decode(req.cdb) {
                    Ok((_, Command::Read(rw) | Command::Write(rw))) => rw.dld,
                    _ => 0,
                },
                status = ?c.status,
                sense = ?c.sense.as_ref().map(|s| (s.key, s.asc)),
                "duration limit missed"
            );
        }
        c
    }

    /// The status [`Self::complete`] would give, without moving data: for a host that only
    /// times commands (the simulator).
    pub fn status(&self, f: &Finished) -> Completion {
        match &f.verdict {
            Verdict::Run => Completion::GOOD,
            Verdict::Fail(c) => c.clone(),
            Verdict::Aborted => check(Sense::new(
                SenseKey::AbortedCommand,
                Asc::NO_ADDITIONAL_SENSE,
            )),
        }
    }

    /// ABORT TASK (SAM-5 §7.2) of a task in the task set; false when there is none.
    pub fn abort_task(&self, now: Ns, nexus: u64, tag: u64) -> bool {
        if self.sanitizer.abort(nexus, tag) {
            return true;
        }
        let Some(s) = &self.scheduled else {
            return false;
        };
        let mut set = s.set.lock();
        let found = set.abort_task(now, nexus, tag);
        let next = set.next_event();
        let wake = set.needs_wake(next);
        drop(set);
        if wake {
            s.wake();
        }
        found
    }

    /// Aborts the tasks of the nexuses `which` selects; those of other nexuses than
    /// `reporter` come out of the next [`Self::advance`] as [`Verdict::Aborted`].
    /// Returns the other nexuses that lost tasks.
    pub(crate) fn abort_tasks(
        &self,
        now: Ns,
        reporter: Option<u64>,
        which: impl Fn(u64) -> bool,
    ) -> Vec<u64> {
        let sanitizing = self.sanitizer.abort_where(reporter, &which);
        let Some(s) = &self.scheduled else {
            return sanitizing.into_iter().collect();
        };
        let mut set = s.set.lock();
        let mut others = set.abort_where(now, reporter, which);
        others.extend(sanitizing.filter(|n| !others.contains(n)));
        let next = set.next_event();
        let wake = set.needs_wake(next);
        drop(set);
        if wake {
            s.wake();
        }
        others
    }

    /// Commands in the task set.
    pub fn tasks(&self) -> usize {
        self.scheduled.as_ref().map_or(0, |s| s.set.lock().len())
    }

    /// The queue's counters (per class and per CDL descriptor).
    pub fn queue_stats(&self) -> Option<qos::Stats> {
        Some(self.scheduled.as_ref()?.set.lock().queue().stats().clone())
    }

    /// Keep latency histograms for [`Self::metrics`] from now on (a host that exports them
    /// asks; the simulator does not, and so pays nothing for them).
    pub fn keep_latencies(&self) {
        if let Some(s) = &self.scheduled {
            s.set.lock().keep_latencies();
        }
    }

    /// Everything the logical unit counts, now: the command counters, and the task set's
    /// gauges, statistics and latencies (copied under its lock, as LOG SENSE reads them).
    pub fn metrics(&self) -> Metrics {
        let Some(s) = &self.scheduled else {
            return Metrics {
                counts: self.counters.snapshot([0; 3]),
                queue: None,
            };
        };
        let set = s.set.lock();
        let queue = set.queue();
        let metrics = QueueMetrics {
            tasks: set.len(),
            device_queue: queue.device_len(),
            waiting: std::array::from_fn(|class| queue.waiting(class)),
            stats: queue.stats().clone(),
            latencies: set.latencies().clone(),
        };
        let aborted = set.aborted();
        drop(set);
        Metrics {
            counts: self.counters.snapshot(aborted),
            queue: Some(metrics),
        }
    }

    /// The Command Duration Limits statistics log page's counters (SPC-6 log page 19h
    /// subpage 21h): the queue's per-descriptor counters since the last reset.
    pub(crate) fn cdl_statistics(&self) -> Option<CdlStatistics> {
        let s = self.scheduled.as_ref()?;
        let counted = cdl_statistics_of(s.set.lock().queue().stats());
        Some(counted.since(&s.cdl_statistics_reset.lock()))
    }

    /// LOG SELECT's parameter code reset of the page: its counters read zero from now on.
    pub(crate) fn reset_cdl_statistics(&self) {
        if let Some(s) = &self.scheduled {
            let set = s.set.lock();
            *s.cdl_statistics_reset.lock() = cdl_statistics_of(set.queue().stats());
        }
    }
}

/// The counters of the Command Duration Limits statistics log page in the queue's statistics.
fn cdl_statistics_of(stats: &qos::Stats) -> CdlStatistics {
    let page = |counters: &[qos::Counters; 7]| {
        counters.map(|c| CdlDescriptorStatistics {
            number_of_inactive_target_miss_commands: c.misses(LimitKind::Inactive).total(),
            number_of_active_target_miss_commands: c.misses(LimitKind::Active).total(),
            number_of_inactive_target_and_active_target_miss_commands: c
                .commands_missed_inactive_or_active,
            number_of_commands: c.commands,
        })
    };
    CdlStatistics {
        // No latency target is promised beyond the descriptors themselves.
        achievable_latency_target: 0,
        t2a: page(&stats.t2a),
        t2b: page(&stats.t2b),
    }
}
