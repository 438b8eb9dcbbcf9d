//! The device queue of a timed or QoS-scheduled logical unit: medium tasks are timed by a
//! drive model and ordered by the `qos` queue (CDL, priority classes, WRR). A value the core
//! owns; time is passed in.

use crate::latency::Latencies;
use crate::metrics::QueueMetrics;
use crate::Completion;
use drive::{Drive, MediaOp, Ns};
use qos::{Class, LimitKind, Outcome, Queue, QueueConfig, Scheduler};
use scsi::log::{CdlDescriptorStatistics, CdlStatistics};

pub use qos::DhCompletion;

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

/// What a medium task asks of the queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MediumTask {
    pub(crate) op: MediaOp,
    pub(crate) class: usize,
    pub(crate) dld: u8,
}

/// The queue of one logical unit and what it counts.
pub(crate) struct Scheduled {
    queue: Queue<Box<dyn Drive + Send>>,
    dh: DhCompletion,
    dld_classes: [Option<Class>; 8],
    /// The queue's CDL counters at the last LOG SELECT reset: the log page reports the
    /// difference, while the queue's own statistics (the simulator's) keep counting.
    cdl_statistics_reset: CdlStatistics,
    /// Arrival to leaving, of the medium tasks that left by themselves, once `keep_latencies`
    /// (the simulator keeps statistics of its own and leaves it off).
    latencies: Latencies,
    keep_latencies: bool,
}

impl Scheduled {
    pub(crate) fn new(q: DeviceQueue) -> Result<Self, qos::ConfigError> {
        let mut queue = Queue::new(q.queue, q.drive, q.scheduler)?;
        // The store's operation runs while the model times it: a task ends at the later of
        // the two (on the simulator's null plane, at the model's time).
        queue.await_store();
        Ok(Scheduled {
            queue,
            dh: q.dh,
            dld_classes: q.dld_classes,
            cdl_statistics_reset: CdlStatistics::default(),
            latencies: Latencies::default(),
            keep_latencies: false,
        })
    }

    /// The class of a command: its nexus's, else its DLD's, else medium.
    pub(crate) fn class_of(&self, nexus: Option<Class>, dld: u8) -> usize {
        nexus
            .or_else(|| self.dld_classes.get(usize::from(dld)).copied().flatten())
            .unwrap_or(Class::Medium)
            .index()
    }

    /// A medium task starts: into its class's submission queue, or ahead of every queued
    /// command for a HEAD OF QUEUE task.
    pub(crate) fn submit(&mut self, now: Ns, id: u64, m: MediumTask, head_of_queue: bool) {
        let cmd = qos::Command {
            id,
            class: m.class,
            op: m.op,
            dld: m.dld,
        };
        // Class and DLD were checked when the task was built, so the queue accepts them.
        let accepted = if head_of_queue {
            self.queue.submit_head_of_queue(now, cmd)
        } else {
            self.queue.submit(now, cmd)
        };
        debug_assert!(accepted.is_ok(), "{accepted:?}");
    }

    /// Task management took a task out.
    pub(crate) fn abort(&mut self, now: Ns, id: u64) {
        self.queue.abort(now, id);
    }

    /// Every task due by `now` that left the queue, in time order, and those it started.
    pub(crate) fn advance(
        &mut self,
        now: Ns,
        left: &mut Vec<qos::Completion>,
        started: &mut Vec<qos::Started>,
    ) {
        self.queue.advance(now, left);
        self.queue.take_started(started);
    }

    /// A started task's store operation ended at `now`.
    /// Whether [`Self::advance`] at `now` has anything to do.
    #[inline]
    pub(crate) fn due(&self, now: Ns) -> bool {
        self.queue.due(now)
    }

    /// [`Self::advance`] at `now` when nothing is due: no task leaves or starts.
    pub(crate) fn advance_idle(&mut self, now: Ns) {
        self.queue.advance_idle(now);
    }

    pub(crate) fn store_done(&mut self, now: Ns, started: qos::Started) {
        self.queue.store_done(now, started);
    }

    pub(crate) fn next_event(&self) -> Option<Ns> {
        self.queue.next_event()
    }

    /// Records a medium task's time in the task set, once latencies are kept.
    pub(crate) fn record(&mut self, m: &MediumTask, latency: Ns) {
        if self.keep_latencies {
            self.latencies.record(m.class, m.op.write, m.dld, latency);
        }
    }

    /// Records how long after its limit expired a task a CDL policy ended left the task
    /// set, once latencies are kept.
    pub(crate) fn record_late_end(&mut self, lateness: Ns) {
        if self.keep_latencies {
            self.latencies.late_ends.record(lateness);
        }
    }

    pub(crate) fn keep_latencies(&mut self) {
        self.keep_latencies = true;
    }

    /// The status a queue outcome other than `Good` gives a medium task (`qos::status`: the
    /// one mapping the device answers with and hosts read back).
    pub(crate) fn completion(&self, outcome: Outcome, op: &MediaOp) -> Option<Completion> {
        let (status, sense) = outcome.status(op, self.dh)?;
        Some(Completion {
            status,
            sense: Some(sense),
        })
    }

    /// MODE SELECT changed the CDL pages: commands already in the queue keep the descriptors
    /// they arrived with.
    pub(crate) fn set_cdl(&mut self, pages: qos::CdlPages) {
        let accepted = self.queue.set_cdl(pages);
        debug_assert!(accepted.is_ok(), "MODE SELECT validated the pages");
    }

    /// In order with the task set: commands the drive starts from now on follow it.
    pub(crate) fn set_write_cache(&mut self, now: Ns, on: bool) {
        if self.queue.write_cache().is_some_and(|wce| wce != on) {
            self.queue.set_write_cache(now, on);
        }
    }

    pub(crate) fn stats(&self) -> &qos::Stats {
        self.queue.stats()
    }

    /// The queue's gauges and counters for the operator.
    pub(crate) fn metrics(&self, tasks: usize) -> QueueMetrics {
        QueueMetrics {
            tasks,
            device_queue: self.queue.device_len(),
            waiting: std::array::from_fn(|class| self.queue.waiting(class)),
            stats: self.queue.stats().clone(),
            latencies: self.latencies.clone(),
        }
    }

    /// The Command Duration Limits statistics log page's counters (SPC-6 log page 19h
    /// subpage 21h): the queue's per-descriptor counters since the last reset.
    pub(crate) fn cdl_statistics(&self) -> CdlStatistics {
        cdl_statistics_of(self.queue.stats()).since(&self.cdl_statistics_reset)
    }

    /// LOG SELECT's parameter code reset of the page: its counters read zero from now on.
    pub(crate) fn reset_cdl_statistics(&mut self) {
        self.cdl_statistics_reset = cdl_statistics_of(self.queue.stats());
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
