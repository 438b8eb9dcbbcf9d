//! Drive timing models: pure functions of drive state, command and time (ns).
//! No clocks, no I/O: the caller passes `now` and gets times back.

/// Nanoseconds of device time (virtual in `sim`, monotonic-clock based in `serve`).
pub type Ns = u64;

/// One medium access as the drive sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MediaOp {
    pub lba: u64,
    /// At least 1, except for [`MediaOp::FLUSH`].
    pub blocks: u32,
    pub write: bool,
    /// Force Unit Access: a write bypasses (or writes through) the write cache.
    pub fua: bool,
}

impl MediaOp {
    /// SYNCHRONIZE CACHE (SBC-4 §5.32–5.33) as a queued op: a write of no blocks, forced to
    /// the medium. The queue runs it with [`Drive::flush`].
    pub const FLUSH: Self = Self {
        lba: 0,
        blocks: 0,
        write: true,
        fua: true,
    };

    pub fn is_flush(&self) -> bool {
        self.blocks == 0
    }
}

/// How a started operation ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MediaOutcome {
    Ok,
    /// Error recovery gave up (or hit the recovery-time cap): MEDIUM ERROR.
    Unrecovered,
}

/// What the drive reports when it starts an operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Service {
    /// When the operation completes (data transferred, status ready).
    pub done_at: Ns,
    pub outcome: MediaOutcome,
    /// Portion of `done_at - now` spent in error recovery (retry revolutions).
    pub recovery: Ns,
}

/// What a model remembers about one op of a queue it is asked about again and again (see
/// [`Drive::positioning_times_memo`]): opaque to the caller, who keeps it beside the op
/// ([`QueuedOp`]). A memo that came with another op is noticed and redone.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpMemo {
    /// `lba + 1` of the op it describes (0: nothing known).
    pub(crate) key: u64,
    pub(crate) cylinder: u32,
    /// Below one revolution (< 2^32 ns for any rpm ≥ 1000).
    pub(crate) angle: u32,
    /// A read of `blocks` from this LBA missed the read cache at `miss_version` (0: unknown).
    pub(crate) blocks: u32,
    pub(crate) miss_version: u64,
}

impl OpMemo {
    pub(crate) const EMPTY: Self = Self {
        key: 0,
        cylinder: 0,
        angle: 0,
        blocks: 0,
        miss_version: 0,
    };
}

/// An op of a queue a model is asked about again and again, with the model's memo of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueuedOp {
    pub op: MediaOp,
    pub memo: OpMemo,
}

impl QueuedOp {
    /// An op the model knows nothing about yet.
    pub fn new(op: MediaOp) -> Self {
        Self {
            op,
            memo: OpMemo::default(),
        }
    }
}

/// A timing model of a drive.
pub trait Drive {
    /// How many operations the drive services at once: 1 for an HDD actuator (the device queue
    /// orders the rest); larger for flash, which queues per unit internally.
    fn parallelism(&self) -> usize;

    /// Estimated time from `now` until `op`'s media transfer could begin if it were started
    /// now (seek + settle + rotational wait), without changing state. Used by positional
    /// ordering policies (SPTF).
    fn positioning_time(&self, now: Ns, op: &MediaOp) -> Ns;

    /// [`Self::positioning_time`] of each of `ops` at `now`, replacing the contents of `out`.
    /// An ordering policy asks about its whole queue at every pick: a model can work out what
    /// the candidates share (head position, platter phase) once.
    fn positioning_times(&self, now: Ns, ops: &[MediaOp], out: &mut Vec<Ns>) {
        out.clear();
        out.extend(ops.iter().map(|op| self.positioning_time(now, op)));
    }

    /// [`Self::positioning_times`] of a queue the caller asks about at every pick, each op
    /// with its memo, kept by the caller between calls: a model need not work out again what
    /// does not change while an op waits (its place on the medium, that the read cache did
    /// not hold it).
    fn positioning_times_memo(&self, now: Ns, queue: &mut [QueuedOp], out: &mut Vec<Ns>) {
        out.clear();
        out.extend(queue.iter().map(|q| self.positioning_time(now, &q.op)));
    }

    /// Estimated time from `now` until `op` would complete if started now (positioning plus
    /// media transfer, no error recovery), without changing state. Defaults to the positioning
    /// time (models without a transfer estimate).
    fn service_time(&self, now: Ns, op: &MediaOp) -> Ns {
        self.positioning_time(now, op)
    }

    /// [`Self::service_time`] of an op of a queue given its positioning time at `now`, both
    /// as [`Self::positioning_times_memo`] left them: a model that knows from the memo how
    /// the op would be served need not ask its caches again (an ordering policy asks about
    /// the limited commands of its queue at every pick).
    fn service_time_memo(&self, now: Ns, queued: &QueuedOp, _positioning: Ns) -> Ns {
        self.service_time(now, &queued.op)
    }

    /// Look-ahead: if each op of `queue` at the indices `firsts` were started now, the
    /// positioning time of each op at the indices `nexts` at the moment it finished, with the
    /// heads where its transfer ended. `times` are the ops' [`Self::positioning_time`] at
    /// `now`, and their memos as [`Self::positioning_times_memo`] left them. Writes
    /// `out[f * nexts.len() + n]` and returns true; false (the default, and for an index out
    /// of the queue) for a model without the estimate. Caches are taken as they are now.
    fn positioning_after(
        &self,
        _now: Ns,
        _queue: &[QueuedOp],
        _times: &[Ns],
        _firsts: &[usize],
        _nexts: &[usize],
        _out: &mut Vec<Ns>,
    ) -> bool {
        false
    }

    /// Start `op` at `now` on a free unit; returns when and how it ends.
    fn start(&mut self, now: Ns, op: &MediaOp) -> Service;

    /// SYNCHRONIZE CACHE at `now`: returns when the cache is clean.
    fn flush(&mut self, now: Ns) -> Ns;

    /// Whether the write-back cache is on (WCE of the Caching mode page, SBC-4 §6.5.5);
    /// `None` for a model without one, whose timing WCE does not change.
    fn write_cache(&self) -> Option<bool> {
        None
    }

    /// MODE SELECT turned the write-back cache on or off at `now`; writes started from then on
    /// follow it. Turning it off destages the dirty data first (WCE = 0: a write completes
    /// once on the medium, SBC-4 §4.15), so what starts next waits for that destage. A model
    /// without a write cache ignores it.
    fn set_write_cache(&mut self, _now: Ns, _enabled: bool) {}

    /// The running `op` is abandoned at `now` (a CDL policy Dh/Eh/Fh ended it during
    /// processing, or ABORT TASK): the drive stops working on it. By default nothing changes
    /// (a flash page operation runs to its end).
    fn abort(&mut self, _now: Ns, _op: &MediaOp) {}
}

/// A boxed model is a model: `serve` picks its drive at run time.
impl<D: Drive + ?Sized> Drive for Box<D> {
    fn parallelism(&self) -> usize {
        (**self).parallelism()
    }
    fn positioning_time(&self, now: Ns, op: &MediaOp) -> Ns {
        (**self).positioning_time(now, op)
    }
    fn positioning_times(&self, now: Ns, ops: &[MediaOp], out: &mut Vec<Ns>) {
        (**self).positioning_times(now, ops, out)
    }
    fn positioning_times_memo(&self, now: Ns, queue: &mut [QueuedOp], out: &mut Vec<Ns>) {
        (**self).positioning_times_memo(now, queue, out)
    }
    fn service_time(&self, now: Ns, op: &MediaOp) -> Ns {
        (**self).service_time(now, op)
    }
    fn service_time_memo(&self, now: Ns, queued: &QueuedOp, positioning: Ns) -> Ns {
        (**self).service_time_memo(now, queued, positioning)
    }
    fn positioning_after(
        &self,
        now: Ns,
        queue: &[QueuedOp],
        times: &[Ns],
        firsts: &[usize],
        nexts: &[usize],
        out: &mut Vec<Ns>,
    ) -> bool {
        (**self).positioning_after(now, queue, times, firsts, nexts, out)
    }
    fn start(&mut self, now: Ns, op: &MediaOp) -> Service {
        (**self).start(now, op)
    }
    fn flush(&mut self, now: Ns) -> Ns {
        (**self).flush(now)
    }
    fn write_cache(&self) -> Option<bool> {
        (**self).write_cache()
    }
    fn set_write_cache(&mut self, now: Ns, enabled: bool) {
        (**self).set_write_cache(now, enabled)
    }
    fn abort(&mut self, now: Ns, op: &MediaOp) {
        (**self).abort(now, op)
    }
}

pub mod config;
pub mod error;
pub mod hdd;
pub mod instant;
pub mod ssd;

pub use config::{DriveConfig, DRIVE_NAMES};
pub use error::ProfileError;
pub use hdd::{FaultKind, FaultRange, Hdd, HddProfile};
pub use instant::Instant;
pub use ssd::{Ssd, SsdProfile};

/// Nanoseconds per millisecond / microsecond, for converting profile values.
pub const NS_PER_MS: f64 = 1e6;
pub const NS_PER_US: f64 = 1e3;
