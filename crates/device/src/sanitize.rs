//! SANITIZE (SBC-4 §4.11, §5.30) and FORMAT UNIT (SBC-4 §5.4): operations on the whole medium.
//!
//! A sanitize runs on a thread of its own, over the medium in steps, so that REQUEST SENSE can report its progress and every other command but
//! the few SBC-4 lets through gets NOT READY, SANITIZE IN PROGRESS. BLOCK ERASE and
//! CRYPTOGRAPHIC ERASE deallocate (a thin store frees its chunks or punches holes: fast, and
//! nothing old reads back); OVERWRITE writes its pattern. A sanitize that fails leaves the
//! logical unit in sanitize failure mode: medium commands get MEDIUM ERROR, SANITIZE COMMAND
//! FAILED until a sanitize succeeds or, when the failed one had AUSE set, EXIT FAILURE MODE.
//!
//! With IMMED the command completes at once. Without it, it completes when the sanitize
//! does: on a logical unit with a real-time driver (the transport's clock thread, which
//! registered a waker) the command is answered from that thread, like a task leaving a device
//! queue, so its connection goes on serving other commands meanwhile; without one (the
//! simulator, tests) it runs on the caller's thread.

use crate::logical_unit::{check, LogicalUnit};
use crate::range_lock::RangeLock;
use crate::{Completion, Finished, Request, Submitted, Verdict};
use parking_lot::Mutex;
use scsi::command::{Command, FormatUnit, Sanitize};
use scsi::sanitize::{self, Overwrite, SanitizeAction};
use scsi::table::Flags;
use scsi::{Asc, Sense, SenseKey};
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use store::Store;

/// Where the logical unit is with respect to sanitizing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    Idle,
    /// `done` of `total` bytes of work are done (an OVERWRITE counts each pass).
    Running {
        done: u64,
        total: u64,
    },
    /// The last sanitize failed; `ause` is that command's AUSE.
    Failed {
        ause: bool,
    },
}

impl Phase {
    /// PROGRESS INDICATION: the fraction done, in 65,536ths.
    fn progress(done: u64, total: u64) -> u16 {
        let fraction = u128::from(done) * 65_536 / u128::from(total.max(1));
        u16::try_from(fraction).unwrap_or(u16::MAX)
    }

    /// The sense data a command the phase refuses gets, and REQUEST SENSE reports.
    pub(crate) fn sense(self) -> Option<Sense> {
        match self {
            Phase::Idle => None,
            Phase::Running { done, total } => {
                Some(Sense::sanitize_in_progress(Self::progress(done, total)))
            }
            Phase::Failed { .. } => Some(Sense::new(
                SenseKey::MediumError,
                Asc::SANITIZE_COMMAND_FAILED,
            )),
        }
    }
}

/// The sanitize state of one logical unit.
pub(crate) struct Sanitizer {
    phase: Arc<Mutex<Phase>>,
    /// The least time a sanitize takes: a test can watch one in progress (it sleeps between
    /// steps); zero runs at the store's speed.
    pace: Duration,
    /// SANITIZE commands without IMMED that finished, for the real-time driver to answer.
    done: Arc<Done>,
}

#[derive(Default)]
struct Done {
    /// The nexus and tag of the SANITIZE command waiting for its sanitize, until it is
    /// answered or aborted.
    command: Mutex<Option<(u64, u64)>>,
    finished: Mutex<Vec<Finished>>,
    /// The real-time driver's waker; set once it drives the logical unit.
    waker: OnceLock<Arc<dyn Fn() + Send + Sync>>,
}

impl Done {
    fn finish(&self, f: Finished) {
        self.finished.lock().push(f);
        if let Some(wake) = self.waker.get() {
            wake();
        }
    }
}

impl Sanitizer {
    pub(crate) fn new(pace: Duration) -> Self {
        Sanitizer {
            phase: Arc::new(Mutex::new(Phase::Idle)),
            pace,
            done: Arc::default(),
        }
    }

    /// The real-time driver of the logical unit: it drains [`Self::drain`] when woken.
    pub(crate) fn set_waker(&self, waker: Arc<dyn Fn() + Send + Sync>) {
        let _first = self.done.waker.set(waker);
    }

    /// ABORT TASK of the waiting SANITIZE command: it gets no status; the sanitize itself goes
    /// on (half a sanitize is no way to leave a medium).
    pub(crate) fn abort(&self, nexus: u64, tag: u64) -> bool {
        let mut command = self.done.command.lock();
        let found = *command == Some((nexus, tag));
        if found {
            *command = None;
        }
        found
    }

    /// The waiting SANITIZE command is in a task set being cleared if `which` selects its
    /// nexus: when that is not `reporter`, the nexus is returned and its connection learns of
    /// the abort from the driver.
    pub(crate) fn abort_where(
        &self,
        reporter: Option<u64>,
        which: &impl Fn(u64) -> bool,
    ) -> Option<u64> {
        let mut command = self.done.command.lock();
        let (nexus, tag) = (*command).filter(|&(n, _)| which(n))?;
        *command = None;
        drop(command);
        if Some(nexus) == reporter {
            return None;
        }
        self.done.finish(Finished {
            nexus,
            tag,
            verdict: Verdict::Aborted,
            missed: false,
        });
        Some(nexus)
    }

    /// Moves the SANITIZE commands that finished to `out`.
    pub(crate) fn drain(&self, out: &mut Vec<Finished>) {
        let mut finished = self.done.finished.lock();
        if !finished.is_empty() {
            out.append(&mut finished);
        }
    }

    pub(crate) fn phase(&self) -> Phase {
        *self.phase.lock()
    }

    /// Whether `cmd` may run in the current phase: while a sanitize runs only commands that
    /// report on the device (not its medium) do; in failure mode, none that access the medium.
    pub(crate) fn gate(&self, cmd: &Command, flags: Flags) -> Result<(), Sense> {
        let phase = self.phase();
        let allowed = match phase {
            Phase::Idle => true,
            Phase::Running { .. } => flags.contains(Flags::DURING_SANITIZE),
            // A new sanitize is how failure mode ends (SBC-4 §4.11.3).
            Phase::Failed { .. } => {
                !flags.contains(Flags::READY) || matches!(cmd, Command::Sanitize(_))
            }
        };
        match phase.sense() {
            Some(sense) if !allowed => Err(sense),
            _ => Ok(()),
        }
    }
}

/// What a sanitize does to each step of the medium.
enum Work {
    Erase,
    Overwrite(Overwrite),
}

/// One sanitize, with everything its thread needs.
struct Job {
    work: Work,
    store: Arc<dyn Store>,
    ranges: Arc<RangeLock>,
    blocks: u64,
    block_size: u64,
    /// Write cache off: the result is made durable before the sanitize counts as done.
    flush: bool,
    phase: Arc<Mutex<Phase>>,
    pace: Duration,
    ause: bool,
}

/// The medium is worked on in steps of this many bytes (a RAM store's chunk), each one step
/// of progress.
const STEP: u64 = 1 << 20;

impl Job {
    fn passes(&self) -> u64 {
        match &self.work {
            Work::Erase => 1,
            Work::Overwrite(o) => o.count.into(),
        }
    }

    /// Work through the medium, then record the outcome in the phase.
    fn run(self) -> std::io::Result<()> {
        let done = self.work_through();
        let mut phase = self.phase.lock();
        *phase = match &done {
            Ok(()) => Phase::Idle,
            Err(e) => {
                tracing::error!(error = %e, "sanitize failed: the logical unit is in sanitize failure mode");
                Phase::Failed { ause: self.ause }
            }
        };
        done
    }

    fn work_through(&self) -> std::io::Result<()> {
        let bytes = self.blocks * self.block_size;
        let total = bytes * self.passes();
        let started = Instant::now();
        // Writes already running finish first; new ones are refused by the phase.
        let _all = self.ranges.lock(0, self.blocks);
        let step = STEP.max(self.block_size) / self.block_size * self.block_size;
        let mut done = 0;
        for pass in 0..self.passes() {
            let pattern = match &self.work {
                Work::Erase => Vec::new(),
                Work::Overwrite(o) => {
                    let block = o.block(pass as u8, self.block_size as usize);
                    block.repeat((step / self.block_size) as usize)
                }
            };
            // A pass of zeros deallocates like an erase: unmapped blocks read as zeros, and a
            // huge sparse RAM LUN is not made to allocate every block.
            let zeros = pattern.iter().all(|&b| b == 0);
            let mut offset = 0;
            while offset < bytes {
                let n = step.min(bytes - offset);
                if zeros {
                    self.store.punch_hole(offset, n)?;
                } else {
                    self.store.write_at(offset, &pattern[..n as usize])?;
                }
                offset += n;
                done += n;
                *self.phase.lock() = Phase::Running { done, total };
                self.pace(started, done, total);
            }
        }
        if self.flush {
            self.store.flush()?;
        }
        Ok(())
    }

    /// Sleep until the share of the pace that `done` of `total` stands for has passed.
    fn pace(&self, started: Instant, done: u64, total: u64) {
        if self.pace.is_zero() {
            return;
        }
        let due = self.pace.mul_f64(done as f64 / total.max(1) as f64);
        if let Some(wait) = due.checked_sub(started.elapsed()) {
            std::thread::sleep(wait);
        }
    }
}

/// How a sanitize's command completes.
enum Completes {
    /// On the caller's thread, when the sanitize is done (IMMED = 0 without a driver).
    Inline,
    /// At once (IMMED = 1).
    AtOnce,
    /// From the real-time driver when the sanitize is done (IMMED = 0).
    Later { nexus: u64, tag: u64 },
}

/// The completion of a sanitize that ended with `outcome`.
fn completion(outcome: &std::io::Result<()>) -> Completion {
    match outcome {
        Ok(()) => Completion::GOOD,
        Err(_) => check(Sense::new(
            SenseKey::MediumError,
            Asc::SANITIZE_COMMAND_FAILED,
        )),
    }
}

impl LogicalUnit {
    /// A SANITIZE without IMMED on a logical unit with a real-time driver: it completes from
    /// the driver when done; `None` for anything else, which runs as usual.
    pub(crate) fn submit_sanitize(&self, req: &Request) -> Option<Submitted> {
        if req.cdb.first() != Some(&0x48) || self.sanitizer.done.waker.get().is_none() {
            return None;
        }
        Some(match self.precheck(req) {
            Ok((_, Command::Sanitize(s))) if !s.immed => {
                let completes = Completes::Later {
                    nexus: req.nexus.id,
                    tag: req.tag,
                };
                match self.start_sanitize(&s, req, completes) {
                    Some(done) => Submitted::Done(done),
                    None => Submitted::Queued,
                }
            }
            Ok(_) => return None,
            Err(failed) => Submitted::Done(failed),
        })
    }

    /// SANITIZE (SBC-4 §5.30), completing on the caller's thread.
    pub(crate) fn sanitize(&self, s: &Sanitize, req: &Request) -> Completion {
        let completes = if s.immed {
            Completes::AtOnce
        } else {
            Completes::Inline
        };
        self.start_sanitize(s, req, completes)
            .unwrap_or(Completion::GOOD)
    }

    /// The checks of SANITIZE, in order: the CDB's parameter list length, write protection,
    /// the parameter list; then the sanitize starts. Its completion, or `None` when it comes
    /// later.
    fn start_sanitize(
        &self,
        s: &Sanitize,
        req: &Request,
        completes: Completes,
    ) -> Option<Completion> {
        let bs = self.block_size();
        if let Err(sense) =
            sanitize::check_parameter_list_length(s.action, s.parameter_list_length, bs)
        {
            return Some(check(sense));
        }
        let sanitizer = &self.sanitizer;
        if s.action == SanitizeAction::ExitFailureMode {
            let mut phase = sanitizer.phase.lock();
            return Some(match *phase {
                Phase::Failed { ause: false } => check(Sense::invalid_field_in_cdb(1, Some(4))),
                _ => {
                    *phase = Phase::Idle;
                    Completion::GOOD
                }
            });
        }
        if self.write_protected() {
            return Some(check(Sense::new(
                SenseKey::DataProtect,
                Asc::WRITE_PROTECTED,
            )));
        }
        let work = match s.action {
            SanitizeAction::Overwrite => {
                let len = usize::from(s.parameter_list_length);
                let Some(list) = req.data_out.get(..len) else {
                    return Some(check(Sense::new(
                        SenseKey::IllegalRequest,
                        Asc::PARAMETER_LIST_LENGTH_ERROR,
                    )));
                };
                match Overwrite::parse(list, bs) {
                    Ok(o) => Work::Overwrite(o),
                    Err(sense) => return Some(check(sense)),
                }
            }
            _ => Work::Erase,
        };
        let job = Job {
            work,
            store: self.store.clone(),
            ranges: self.ranges.clone(),
            blocks: self.blocks(),
            block_size: bs.into(),
            flush: !self.wce.load(Ordering::Relaxed),
            phase: sanitizer.phase.clone(),
            pace: sanitizer.pace,
            ause: s.ause,
        };
        {
            let mut phase = sanitizer.phase.lock();
            if let Phase::Running { .. } = *phase {
                // Two SANITIZE commands passed the gate at once: the second one waits its turn
                // as any command would during the first.
                let sense = phase
                    .sense()
                    .unwrap_or_else(|| Sense::sanitize_in_progress(0));
                return Some(check(sense));
            }
            let total = job.blocks * job.block_size * job.passes();
            *phase = Phase::Running { done: 0, total };
        }
        // Every block is rewritten: blocks WRITE LONG marked uncorrectable read again, and
        // ROD tokens over the old data are revoked.
        self.written(0, job.blocks);
        let later = match completes {
            Completes::Inline => return Some(completion(&job.run())),
            Completes::AtOnce => None,
            Completes::Later { nexus, tag } => Some((nexus, tag)),
        };
        let phase = sanitizer.phase.clone();
        let done = sanitizer.done.clone();
        *done.command.lock() = later;
        let spawned = std::thread::Builder::new()
            .name("stint-sanitize".into())
            .spawn(move || {
                // The outcome is in the phase, and the log has the cause.
                let outcome = job.run();
                let waiting = done.command.lock().take();
                if let Some((nexus, tag)) = waiting {
                    done.finish(Finished {
                        nexus,
                        tag,
                        verdict: Verdict::Fail(completion(&outcome)),
                        missed: false,
                    });
                }
            });
        match spawned {
            Ok(_detached) if later.is_some() => None,
            Ok(_detached) => Some(Completion::GOOD),
            Err(e) => {
                *phase.lock() = Phase::Idle;
                *sanitizer.done.command.lock() = None;
                Some(self.io_error(
                    &e,
                    SenseKey::HardwareError,
                    Asc::INTERNAL_TARGET_FAILURE,
                    None,
                ))
            }
        }
    }

    /// FORMAT UNIT (SBC-4 §5.4) with the defaults: no defect list, no protection information,
    /// no initialization pattern. Every block is deallocated, so the medium reads as zeros.
    pub(crate) fn format_unit(&self, f: &FormatUnit, req: &Request) -> Completion {
        if self.write_protected() {
            return check(Sense::new(SenseKey::DataProtect, Asc::WRITE_PROTECTED));
        }
        let len = f.header_length() as usize;
        if len > 0 {
            let Some(header) = req.data_out.get(..len) else {
                return check(Sense::new(
                    SenseKey::IllegalRequest,
                    Asc::PARAMETER_LIST_LENGTH_ERROR,
                ));
            };
            if let Err(sense) = sanitize::check_format_header(header, f.longlist) {
                return check(sense);
            }
        }
        let blocks = self.blocks();
        let _all = self.ranges.lock(0, blocks);
        match self.deallocate(0, blocks) {
            c if c == Completion::GOOD => c,
            _ => check(Sense::new(
                SenseKey::MediumError,
                Asc::MEDIUM_FORMAT_CORRUPTED,
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_is_a_fraction_of_65536() {
        assert_eq!(Phase::progress(0, 10), 0);
        assert_eq!(Phase::progress(5, 10), 0x8000);
        assert_eq!(Phase::progress(10, 10), u16::MAX);
        assert_eq!(Phase::progress(1, 0), u16::MAX);
    }
}
