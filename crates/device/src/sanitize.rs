//! SANITIZE (SBC-4 §4.11, §5.30): an operation on the whole medium, as a job that steps with
//! the time rather than a thread.
//!
//! The medium is worked on in 1 MiB steps, one data-plane operation at a time, each one step of
//! progress, so that REQUEST SENSE can report it and every other command but the few SBC-4
//! lets through gets NOT READY, SANITIZE IN PROGRESS. BLOCK ERASE and CRYPTOGRAPHIC ERASE
//! deallocate (a thin store frees its chunks or punches holes: fast, and nothing old reads
//! back); OVERWRITE writes its pattern. A sanitize that fails leaves the logical unit in
//! sanitize failure mode: medium commands get MEDIUM ERROR, SANITIZE COMMAND FAILED until a
//! sanitize succeeds or, when the failed one had AUSE set, EXIT FAILURE MODE.
//!
//! The steps run in the background ([`crate::Event::Background`]), away from the
//! connections. With IMMED the command completes at once; without it, when the sanitize does.
//! A pace spreads the steps over at least that much time, so an initiator's test can watch a
//! sanitize in progress.

use crate::event::TaskId;
use crate::{Completion, Ns};
use scsi::command::{Command, Sanitize};
use scsi::sanitize::{self, Overwrite, SanitizeAction};
use scsi::table::Flags;
use scsi::{Asc, Sense, SenseKey};
use std::sync::Arc;
use store::{Done, Op};

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

/// The medium is worked on in steps of this many bytes (a RAM store's chunk), or of a whole
/// number of the store's unmap granules where those are larger ([`step_bytes`]).
const STEP: u64 = 1 << 20;

/// A sanitize step in bytes: [`STEP`] rounded up to whole blocks and whole OPTIMAL UNMAP
/// GRANULARITY units (`granularity`, in blocks; 0 when none), so that an erase's zeros cover
/// whole granules, which a store deallocates (an RBD image's 4 MiB objects: zeroed 1 MiB at
/// a time, an object would stay allocated, and GET LBA STATUS would say mapped).
fn step_bytes(block_size: u32, granularity: u32) -> u64 {
    let bs = u64::from(block_size.max(1));
    let blocks = (STEP / bs).max(1);
    let g = u64::from(granularity.max(1));
    blocks.div_ceil(g) * g * bs
}

/// One sanitize under way.
struct Job {
    /// One block per pass (OVERWRITE), or a block of zeros (the erases).
    patterns: Vec<Arc<[u8]>>,
    /// Bytes of the medium, and of one step.
    bytes: u64,
    step: u64,
    pass: usize,
    offset: u64,
    started: Ns,
    /// A step (or the final flush) is with the data plane.
    in_flight: bool,
    /// Write cache off: the result is made durable before the sanitize counts as done.
    flush: bool,
    flushed: bool,
    ause: bool,
    /// The SANITIZE command without IMMED that waits for the end.
    waiting: Option<TaskId>,
}

/// What a sanitize needs next.
pub(crate) enum Next {
    /// This step, from the data plane.
    Step(Op),
    /// It ended: the waiting command (if any) and its status.
    Ended(Option<TaskId>, Completion),
}

/// The sanitize state of one logical unit.
pub(crate) struct Sanitizer {
    phase: Phase,
    /// The least time a sanitize takes; zero runs at the store's speed.
    pace: Ns,
    job: Option<Job>,
}

/// What [`Sanitizer::start`] did.
pub(crate) enum Started {
    /// The command ends now with this status.
    Done(Completion),
    /// The command waits for the sanitize to end (IMMED = 0).
    Wait,
}

/// The facts of the logical unit a sanitize needs.
pub(crate) struct Medium {
    pub(crate) blocks: u64,
    pub(crate) block_size: u32,
    pub(crate) write_protected: bool,
    pub(crate) write_cache: bool,
    /// OPTIMAL UNMAP GRANULARITY in blocks (0: none).
    pub(crate) unmap_granularity: u32,
}

impl Sanitizer {
    pub(crate) fn new(pace: Ns) -> Self {
        Sanitizer {
            phase: Phase::Idle,
            pace,
            job: None,
        }
    }

    pub(crate) fn phase(&self) -> Phase {
        self.phase
    }

    /// Whether `cmd` may run in the current phase: while a sanitize runs only commands that
    /// report on the device (not its medium) do; in failure mode, none that access the medium.
    pub(crate) fn gate(&self, cmd: &Command, flags: Flags) -> Result<(), Sense> {
        let allowed = match self.phase {
            Phase::Idle => return Ok(()),
            Phase::Running { .. } => flags.contains(Flags::DURING_SANITIZE),
            // A new sanitize is how failure mode ends (SBC-4 §4.11.3).
            Phase::Failed { .. } => {
                !flags.contains(Flags::READY) || matches!(cmd, Command::Sanitize(_))
            }
        };
        match self.phase.sense() {
            Some(sense) if !allowed => Err(sense),
            _ => Ok(()),
        }
    }

    /// SANITIZE (SBC-4 §5.30) from `task`: the checks in order (the CDB's parameter list
    /// length, EXIT FAILURE MODE, write protection, the parameter list), then the job starts.
    pub(crate) fn start(
        &mut self,
        now: Ns,
        s: &Sanitize,
        data_out: &[u8],
        medium: &Medium,
        task: TaskId,
    ) -> Started {
        let check = |sense| Started::Done(Completion::check_condition(sense));
        let bs = medium.block_size;
        if let Err(sense) =
            sanitize::check_parameter_list_length(s.action, s.parameter_list_length, bs)
        {
            return check(sense);
        }
        if s.action == SanitizeAction::ExitFailureMode {
            return match self.phase {
                Phase::Failed { ause: false } => check(Sense::invalid_field_in_cdb(1, Some(4))),
                _ => {
                    self.phase = Phase::Idle;
                    Started::Done(Completion::GOOD)
                }
            };
        }
        if medium.write_protected {
            return check(Sense::new(SenseKey::DataProtect, Asc::WRITE_PROTECTED));
        }
        let patterns: Vec<Arc<[u8]>> = match s.action {
            SanitizeAction::Overwrite => {
                let len = usize::from(s.parameter_list_length);
                let Some(list) = data_out.get(..len) else {
                    return check(Sense::new(
                        SenseKey::IllegalRequest,
                        Asc::PARAMETER_LIST_LENGTH_ERROR,
                    ));
                };
                match Overwrite::parse(list, bs) {
                    Ok(o) => (0..o.count)
                        .map(|pass| o.block(pass, bs as usize).into())
                        .collect(),
                    Err(sense) => return check(sense),
                }
            }
            _ => vec![vec![0u8; bs as usize].into()],
        };
        if let Phase::Running { .. } = self.phase {
            // Two SANITIZE commands passed the gate at once (a waiting one was released): the
            // second one is refused as any command would be during the first.
            return check(
                self.phase
                    .sense()
                    .unwrap_or_else(|| Sense::sanitize_in_progress(0)),
            );
        }
        let bytes = medium.blocks * u64::from(bs);
        let total = bytes * patterns.len() as u64;
        self.phase = Phase::Running { done: 0, total };
        self.job = Some(Job {
            patterns,
            bytes,
            step: step_bytes(bs, medium.unmap_granularity),
            pass: 0,
            offset: 0,
            started: now,
            in_flight: false,
            flush: !medium.write_cache,
            flushed: false,
            ause: s.ause,
            waiting: (!s.immed).then_some(task),
        });
        if s.immed {
            Started::Done(Completion::GOOD)
        } else {
            Started::Wait
        }
    }

    /// The bytes of work done so far.
    fn done(job: &Job) -> u64 {
        job.pass as u64 * job.bytes + job.offset
    }

    /// When the next step may start, or the sanitize end: once the share of the pace that the
    /// work done by then stands for has passed (so the whole takes at least the pace).
    fn due(&self, job: &Job) -> Ns {
        let total = job.bytes * job.patterns.len() as u64;
        let done = if job.pass < job.patterns.len() {
            Self::done(job)
        } else {
            total
        };
        let share = u128::from(self.pace) * u128::from(done) / u128::from(total.max(1));
        job.started
            .saturating_add(u64::try_from(share).unwrap_or(u64::MAX))
    }

    /// What the sanitize needs by `now`: its next step for the data plane when one is due and
    /// none is in flight, or its end once its work is done and its pace has passed.
    pub(crate) fn next(&mut self, now: Ns) -> Option<Next> {
        let due = self.job.as_ref().map(|j| self.due(j))?;
        let job = self.job.as_mut()?;
        if job.in_flight || due > now {
            return None;
        }
        let op = if job.pass < job.patterns.len() {
            let len = job.step.min(job.bytes - job.offset);
            Op::Fill {
                offset: job.offset,
                len,
                pattern: job.patterns[job.pass].clone(),
                durable: false,
            }
        } else if job.flush && !job.flushed {
            Op::Flush
        } else {
            let job = self.job.take()?;
            self.phase = Phase::Idle;
            return Some(Next::Ended(job.waiting, Completion::GOOD));
        };
        job.in_flight = true;
        Some(Next::Step(op))
    }

    /// Whether no sanitize is under way (the common case, checked at every timeout).
    #[inline]
    pub(crate) fn is_idle(&self) -> bool {
        self.job.is_none()
    }

    /// When a step that is not due yet will be.
    #[inline]
    pub(crate) fn next_at(&self) -> Option<Ns> {
        let job = self.job.as_ref().filter(|j| !j.in_flight)?;
        Some(self.due(job))
    }

    /// The step in flight ended with `done`. When the sanitize failed, returns the waiting
    /// command (if any) and its status; a sanitize that succeeds ends from [`Self::next`].
    pub(crate) fn step_done(&mut self, done: &Done) -> Option<(Option<TaskId>, Completion)> {
        let job = self.job.as_mut()?;
        job.in_flight = false;
        if let Done::Failed(f) = done {
            tracing::error!(error = %f.error(), "sanitize failed: the logical unit is in sanitize failure mode");
            let job = self.job.take()?;
            self.phase = Phase::Failed { ause: job.ause };
            let failed = Sense::new(SenseKey::MediumError, Asc::SANITIZE_COMMAND_FAILED);
            return Some((job.waiting, Completion::check_condition(failed)));
        }
        if job.pass < job.patterns.len() {
            job.offset += job.step.min(job.bytes - job.offset);
            if job.offset >= job.bytes {
                job.pass += 1;
                job.offset = 0;
            }
        } else {
            job.flushed = true;
        }
        let total = job.bytes * job.patterns.len() as u64;
        let done = if job.pass < job.patterns.len() {
            Self::done(job)
        } else {
            total
        };
        self.phase = Phase::Running { done, total };
        None
    }

    /// ABORT TASK, or a task set cleared, of the waiting SANITIZE command: it gets no status;
    /// the sanitize itself goes on (half a sanitize is no way to leave a medium). Whether the
    /// task was the waiting one.
    pub(crate) fn forget_waiting(&mut self, task: TaskId) -> bool {
        match self.job.as_mut() {
            Some(job) if job.waiting == Some(task) => {
                job.waiting = None;
                true
            }
            _ => false,
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

    #[test]
    fn steps_cover_whole_unmap_granules() {
        // No granularity, or a smaller one: 1 MiB.
        assert_eq!(step_bytes(512, 0), 1 << 20);
        assert_eq!(step_bytes(4096, 1), 1 << 20);
        assert_eq!(step_bytes(512, 8), 1 << 20);
        // An RBD image's 4 MiB objects (8192 blocks of 512 B, 1024 of 4 KiB): 4 MiB.
        assert_eq!(step_bytes(512, 8192), 4 << 20);
        assert_eq!(step_bytes(4096, 1024), 4 << 20);
        // A granule that does not divide 1 MiB: the next multiple of it.
        assert_eq!(step_bytes(512, 3000), 3000 * 512);
        assert_eq!(step_bytes(512, 1000), 3000 * 512);
        // A block larger than a step: one block.
        assert_eq!(step_bytes(u32::MAX, 0), u64::from(u32::MAX));
    }
}
