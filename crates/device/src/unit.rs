//! One logical unit as a server shares it between its connections: the core behind a lock,
//! and its data plane. The lock is held for the core's bookkeeping only, never across a data
//! copy or a store call: a READ on an inline (RAM) plane takes it to enter the task, releases
//! it while the store copies into the connection's buffer, and takes it again to end the
//! task. What the core's calls do to other tasks goes to a [`Sink`]: the server routes it to
//! their connections; steps of background work go to the unit's driver.
//!
//! No clock and no thread here: the caller passes the time in, and an asynchronous plane's
//! completions come back through [`Unit::completed`], called by whatever reaps them.

use crate::event::{Event, Step, TaskId, Then};
use crate::sanitize::Phase;
use crate::{
    Arrival, Backing, Completion, ConfigError, DeviceQueue, Kept, LogicalUnit, LuConfig, Nexus, Ns,
    PeerEvent, ResizeError, SharedStates, TaskManagement, TmfResponse, Transfer,
};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use store::{Buffers, Done, KeptFile, Op, Plane};

/// The id of the data-plane operation of background work (it has no task).
const BACKGROUND: u64 = u64::MAX;

/// What a command came to, for its transport.
#[derive(Debug, PartialEq, Eq)]
pub enum Submitted {
    /// It ended with this status; read data is in the caller's data-in buffer.
    Done(Completion),
    /// Collect this many bytes of Data-Out (what came with the command counts), then call
    /// [`Unit::data_out`].
    WantData(TaskId, u32),
    /// It goes on without its transport: a [`Finished`] for it will be delivered.
    Queued(TaskId),
    /// Task management aborted it: no status (TAS = 0).
    Aborted,
}

/// A task of one nexus that moved on without its transport asking, to deliver to the
/// nexus's connection.
#[derive(Debug)]
pub struct Finished {
    pub nexus: u64,
    /// The logical unit of the task.
    pub lun: u64,
    pub tag: u64,
    pub task: TaskId,
    pub then: Next,
}

/// What a delivered task needs.
#[derive(Debug)]
pub enum Next {
    /// Run its data-plane operation with its buffers: [`Unit::run`].
    Run(Op),
    /// It ended: its status, with its buffers (read data in `data_in`).
    Done {
        completion: Completion,
        data_in: Vec<u8>,
        data_out: Vec<u8>,
    },
    /// Task management aborted it: no status (TAS = 0); forget it.
    Aborted,
}

/// Where what a call does to others goes.
pub trait Sink {
    /// A task of another nexus (or of the caller's, finishing elsewhere) moved on.
    fn deliver(&mut self, f: Finished);
    /// The core of the unit at `lun` needs its driver's [`Unit::advance`] earlier than the
    /// driver was told (a deadline moved closer, or background work is waiting).
    fn wake(&mut self, lun: u64);
}

/// What the plane had news of before a command ([`Unit::news`]).
struct News {
    resized: Option<u64>,
    events: Vec<PeerEvent>,
    shared: SharedStates,
    preferred: Option<Option<u16>>,
}

impl News {
    /// Made the core's, under its lock, before the command.
    fn apply(&self, now: Ns, core: &mut LogicalUnit) {
        for event in &self.events {
            core.peer_event(now, event, &self.shared);
        }
        if let Some(bytes) = self.resized {
            core.resize(bytes);
        }
        if let Some(group) = self.preferred.filter(|&g| g != core.preferred_gateway()) {
            core.set_preferred_gateway(group);
        }
    }
}

/// A logical unit as a server shares it.
pub struct Unit {
    core: Mutex<LogicalUnit>,
    plane: Arc<dyn Plane>,
    lun: u64,
    /// The capacity follows the store's when it is resized (not when a drive model sets it).
    follows_store: bool,
    /// Held by the operator's resize under way ([`Unit::resize`]): one at a time.
    resizing: Mutex<()>,
    /// When the unit's driver will next call [`Unit::advance`] (`Ns::MAX`: not before it is
    /// woken).
    armed: AtomicU64,
}

/// What a plane tells a core of its store: its capacity, unmap granularity and usage now.
pub fn backing(plane: &dyn Plane) -> Backing {
    let g = plane.geometry();
    let mut none = Vec::new();
    let buffers = Buffers::Borrowed {
        data_in: &mut none,
        data_out: &[],
    };
    let allocated = match plane.submit(0, Op::Usage, buffers) {
        Some(Done::Usage(bytes)) => bytes,
        _ => None,
    };
    Backing {
        len: g.capacity,
        unmap_granularity: g.unmap_granularity,
        allocated,
    }
}

impl Unit {
    /// A logical unit over `plane`, with what the plane kept through the last power loss,
    /// and, for a timed or QoS logical unit, its device queue.
    pub fn build(
        config: LuConfig,
        plane: Arc<dyn Plane>,
        queue: Option<DeviceQueue>,
    ) -> Result<Unit, ConfigError> {
        let own = config.port_groups.own;
        let shared_reservations = match plane.load_shared(KeptFile::Reservations) {
            Some(loaded) => Some(
                loaded
                    .and_then(|state| crate::reservations::power_on(&*plane, state, own))
                    .map_err(ConfigError::PersistentReservations)?,
            ),
            None => None,
        };
        let shared_mode_pages = plane
            .load_shared(KeptFile::ModePages)
            .transpose()
            .map_err(ConfigError::SavedMode)?;
        // At the logical unit's power on the saved values became current: every gateway
        // starting later must find them so.
        let power_on = shared_mode_pages
            .as_ref()
            .is_some_and(|s| s.first || s.contents.is_none());
        let kept = Kept {
            mode_pages: plane
                .load(KeptFile::ModePages)
                .map_err(ConfigError::SavedMode)?,
            reservations: plane
                .load(KeptFile::Reservations)
                .map_err(ConfigError::PersistentReservations)?,
            shared_reservations,
            shared_mode_pages,
        };
        let mut core = LogicalUnit::new(config, backing(&*plane), kept, queue)?;
        if let Some((contents, version)) = core.shared_mode().filter(|_| power_on) {
            let done = plane.share_now(KeptFile::ModePages, &contents, version);
            core.shared_mode_written(0, done);
        }
        Ok(Unit::new(core, plane))
    }

    pub fn new(core: LogicalUnit, plane: Arc<dyn Plane>) -> Unit {
        Unit {
            lun: core.config().lun,
            core: Mutex::new(core),
            plane,
            follows_store: true,
            resizing: Mutex::new(()),
            armed: AtomicU64::new(Ns::MAX),
        }
    }

    /// Keeps the capacity the unit was built with when its store is resized: a drive
    /// model's geometry sets it.
    pub fn fixed_size(mut self) -> Unit {
        self.follows_store = false;
        self
    }

    pub fn plane(&self) -> &Arc<dyn Plane> {
        &self.plane
    }

    /// Reads or changes the core (configuration, metrics, the copy manager): the lock is
    /// held while `f` runs.
    pub fn with<R>(&self, f: impl FnOnce(&mut LogicalUnit) -> R) -> R {
        f(&mut self.core.lock())
    }

    /// Runs `f` on the core at `now`, then what it made due by `now`, then takes what it did
    /// to other tasks and whether the driver must wake, all under one lock; delivers them
    /// after it is released.
    fn call<R>(&self, now: Ns, sink: &mut dyn Sink, f: impl FnOnce(&mut LogicalUnit) -> R) -> R {
        let mut events = Vec::new();
        let (r, wake, announce) = {
            let mut core = self.core.lock();
            let r = f(&mut core);
            let announce = core.take_announcements();
            if core.poll_timeout().is_some_and(|t| t <= now) {
                // A device queue without drive timing ends a command's queueing the instant
                // it starts: run it on this thread, not after a wake-up of the driver's.
                core.handle_timeout(now);
            }
            while let Some(e) = core.poll_event() {
                events.push(e);
            }
            let next = core.poll_timeout();
            (
                r,
                next.is_some_and(|t| t < self.armed.load(Ordering::Relaxed)),
                announce,
            )
        };
        // The other gateways have it (or a bounded wait passed) before any completion of
        // this call goes out.
        for event in announce {
            if let Err(e) = self.plane.announce(&event.encode()) {
                tracing::warn!(error = %e, lun = self.lun, "telling the other gateways of a change");
            }
        }
        for Event {
            nexus,
            tag,
            task,
            then,
            ..
        } in events
        {
            sink.deliver(Finished {
                nexus,
                lun: self.lun,
                tag,
                task,
                then: match then {
                    Then::Io(op) => Next::Run(op),
                    Then::Done(completion, data_in) => Next::Done {
                        completion,
                        data_in,
                        data_out: Vec::new(),
                    },
                    Then::Aborted => Next::Aborted,
                },
            });
        }
        if wake {
            sink.wake(self.lun);
        }
        r
    }

    /// A command arrives at `now`: what its CDB asks to transfer, and what became of it.
    /// Read data of a command that ended is in `data_in`.
    pub fn command(
        &self,
        now: Ns,
        a: &Arrival,
        data_in: &mut Vec<u8>,
        sink: &mut dyn Sink,
    ) -> (Option<Transfer>, Submitted) {
        // One load per command; the plane is asked what is new only when it has news.
        let news = self.plane.news().then(|| self.news());
        let arrived = self.call(now, sink, |core| {
            if let Some(news) = &news {
                news.apply(now, core);
            }
            core.command(now, a, data_in)
        });
        let data_out = a.data_out;
        (
            arrived.transfer,
            self.drive(now, arrived.step, data_out, data_in, sink),
        )
    }

    /// What the plane has news of ([`Plane::news`]), asked outside the lock: the store's new
    /// size, the other gateways' announcements since the last call and, when one changed a
    /// state they share (or the plane saw a change no announcement told of), that state read
    /// from the cluster once (a RADOS read only then). When one chose the preferred gateway,
    /// the plane reads the choice again, so that [`Plane::preferred_gateway`] answers it.
    fn news(&self) -> News {
        let resized = self.plane.resized().filter(|_| self.follows_store);
        let (events, shared) = self.peer_news();
        News {
            resized,
            events,
            shared,
            preferred: self.plane.preferred_gateway(),
        }
    }

    /// The other gateways' announcements, and the shared states they (or the plane's look at
    /// the cluster) say changed, read again.
    fn peer_news(&self) -> (Vec<PeerEvent>, SharedStates) {
        let mut news: Vec<PeerEvent> = self
            .plane
            .announced()
            .iter()
            .filter_map(|m| PeerEvent::decode(m))
            .collect();
        let reservations = |e: &PeerEvent| matches!(e, PeerEvent::Reservations(_));
        let mode_pages = |e: &PeerEvent| *e == PeerEvent::ModeParameters;
        // A change no announcement told of: read it, with nothing asked of the nexuses.
        if self.plane.shared_changed(KeptFile::Reservations) && !news.iter().any(reservations) {
            news.push(PeerEvent::Reservations(Default::default()));
        }
        if self.plane.shared_changed(KeptFile::ModePages) && !news.iter().any(mode_pages) {
            news.push(PeerEvent::ModeParameters);
        }
        if news.iter().any(|e| matches!(e, PeerEvent::AccessStates(_))) {
            if let Err(e) = self.plane.reload_preferred() {
                tracing::error!(error = %e, lun = self.lun, "reading the preferred gateway");
            }
        }
        let load = |file: KeptFile| {
            let loaded = self.plane.load_shared(file)?;
            loaded
                .inspect_err(|e| {
                    tracing::error!(error = %e, lun = self.lun, ?file, "reading a gateways' state")
                })
                .ok()
        };
        let shared = SharedStates {
            reservations: news
                .iter()
                .any(reservations)
                .then(|| load(KeptFile::Reservations))
                .flatten(),
            mode_pages: news
                .iter()
                .any(mode_pages)
                .then(|| load(KeptFile::ModePages))
                .flatten(),
        };
        (news, shared)
    }

    /// All Data-Out of a task that asked for it came.
    pub fn data_out(
        &self,
        now: Ns,
        task: TaskId,
        data: &[u8],
        data_in: &mut Vec<u8>,
        sink: &mut dyn Sink,
    ) -> Submitted {
        let step = self.call(now, sink, |core| core.data_out(now, task, data, data_in));
        self.drive(now, step, data, data_in, sink)
    }

    /// The transport could not collect a task's Data-Out: it ends with `c` (the transport
    /// answers it).
    pub fn data_out_failed(&self, now: Ns, task: TaskId, c: Completion, sink: &mut dyn Sink) {
        self.call(now, sink, |core| core.data_out_failed(now, task, c));
    }

    /// Runs a delivered task's data-plane operation ([`Next::Run`]) with its buffers.
    pub fn run(
        &self,
        now: Ns,
        task: TaskId,
        op: Op,
        data_out: &[u8],
        data_in: &mut Vec<u8>,
        sink: &mut dyn Sink,
    ) -> Submitted {
        self.drive(now, Step::Io(task, op), data_out, data_in, sink)
    }

    /// Takes a task's steps as far as they go without waiting: an inline plane's operations,
    /// and those an asynchronous plane can end at once (cached reads), run here, outside the
    /// lock, one after the other.
    fn drive(
        &self,
        now: Ns,
        mut step: Step,
        data_out: &[u8],
        data_in: &mut Vec<u8>,
        sink: &mut dyn Sink,
    ) -> Submitted {
        loop {
            match step {
                Step::Done(c) => return Submitted::Done(c),
                Step::DataOut(task, len) => return Submitted::WantData(task, len),
                Step::Wait(task) => return Submitted::Queued(task),
                Step::Aborted => return Submitted::Aborted,
                Step::Io(task, op) => {
                    if !self.plane.is_inline() {
                        if let Some(done) = self.plane.try_now(&op, data_in) {
                            step =
                                self.call(now, sink, |core| core.io_done(now, task, done, data_in));
                            continue;
                        }
                        let buffers = Buffers::Owned {
                            data_in: std::mem::take(data_in),
                            data_out: data_out.to_vec(),
                        };
                        let inline = self.plane.submit(task.to_u64(), op, buffers);
                        debug_assert!(inline.is_none(), "an asynchronous plane answers later");
                        return Submitted::Queued(task);
                    }
                    let buffers = Buffers::Borrowed { data_in, data_out };
                    let Some(done) = self.plane.submit(task.to_u64(), op, buffers) else {
                        debug_assert!(false, "an inline plane answers at once");
                        return Submitted::Queued(task);
                    };
                    step = self.call(now, sink, |core| core.io_done(now, task, done, data_in));
                }
            }
        }
    }

    /// A delivered task's operation ([`Next::Run`]) its transport will not run: the task
    /// had ended for it meanwhile (a CDL policy or task management answered it first).
    pub fn dropped(&self, now: Ns, task: TaskId, sink: &mut dyn Sink) {
        self.call(now, sink, |core| core.io_dropped(now, task));
    }

    /// An asynchronous plane's operation `id` ended at `now` with `done`; the buffers it
    /// had come back. What follows for its task (another operation, or its end with its
    /// buffers) goes to `sink`.
    pub fn completed(
        &self,
        now: Ns,
        id: u64,
        done: Done,
        mut data_in: Vec<u8>,
        data_out: Vec<u8>,
        sink: &mut dyn Sink,
    ) {
        if id == BACKGROUND {
            self.call(now, sink, |core| core.background_done(now, done));
            return;
        }
        let task = TaskId::from_u64(id);
        // What the other gateways announced applies before this completion: a task that
        // PREEMPT AND ABORT there ended gets no status here (a load while there is none).
        let (news, shared) = self.peer_news();
        let (owner, step) = self.call(now, sink, |core| {
            for event in &news {
                core.peer_event(now, event, &shared);
            }
            let owner = core.owner(task);
            (owner, core.io_done(now, task, done, &mut data_in))
        });
        let Some((nexus, tag)) = owner else { return };
        let then = match step {
            Step::Io(task, op) => {
                let buffers = Buffers::Owned { data_in, data_out };
                let inline = self.plane.submit(task.to_u64(), op, buffers);
                debug_assert!(inline.is_none(), "an asynchronous plane answers later");
                return;
            }
            Step::Done(completion) => Next::Done {
                completion,
                data_in,
                data_out,
            },
            Step::Aborted => Next::Aborted,
            Step::Wait(_) | Step::DataOut(..) => return,
        };
        sink.deliver(Finished {
            nexus,
            lun: self.lun,
            tag,
            task,
            then,
        });
    }

    /// The unit's driver at `now`: everything due is handled, background work run (an
    /// inline plane's here, an asynchronous one's handed to it); returns when the driver must
    /// call again (`None`: only when woken).
    pub fn advance(&self, now: Ns, sink: &mut dyn Sink) -> Option<Ns> {
        // Whatever the other gateways announced meanwhile applies here too: PREEMPT AND ABORT
        // ends this gateway's tasks of the preempted nexuses without waiting for a command.
        let (news, shared) = self.peer_news();
        if !news.is_empty() {
            self.call(now, sink, |core| {
                for event in &news {
                    core.peer_event(now, event, &shared);
                }
            });
        }
        loop {
            let (background, next) = self.call(now, sink, |core| {
                core.handle_timeout(now);
                let background = core.poll_background();
                let next = core.poll_timeout();
                if background.is_none() {
                    // Under the lock: a call that brings a deadline closer after this one
                    // compares with it and wakes the driver; stored after the lock, a
                    // deadline set in between would be overwritten and never woken for.
                    self.armed.store(next.unwrap_or(Ns::MAX), Ordering::Relaxed);
                }
                (background, next)
            });
            let Some(op) = background else {
                return next;
            };
            if !self.plane.is_inline() {
                let buffers = Buffers::Owned {
                    data_in: Vec::new(),
                    data_out: Vec::new(),
                };
                let inline = self.plane.submit(BACKGROUND, op, buffers);
                debug_assert!(inline.is_none(), "an asynchronous plane answers later");
                continue;
            }
            let mut data_in = Vec::new();
            let buffers = Buffers::Borrowed {
                data_in: &mut data_in,
                data_out: &[],
            };
            if let Some(done) = self.plane.submit(BACKGROUND, op, buffers) {
                self.call(now, sink, |core| core.background_done(now, done));
            }
        }
    }

    /// Resizes the unit's store on the operator's request (`stint ctl lun resize`, issue 22):
    /// to `bytes`, or, with `None`, to the size its medium has now (a file or block device
    /// grown outside stint, an RBD image resized), which needs no `shrink` since the medium
    /// has changed already. Returns the new capacity in bytes; every nexus gets CAPACITY DATA
    /// HAS CHANGED (SBC-4 §4.6) when it changed.
    ///
    /// A shrink takes effect for new commands before the store cuts: they get LOGICAL BLOCK
    /// ADDRESS OUT OF RANGE past the new end, while commands already past their range check
    /// end against the store, which finishes the changes under way before the cut and fails
    /// what comes after (never a write past the new end). A grow takes effect once the store
    /// holds the new bytes, which read as zeros. Blocks the calling thread while the store
    /// waits for those changes (a FORMAT UNIT holds the whole medium until it ends) and
    /// changes its size (`ftruncate` and `fsync`, `rbd_resize`): not a thread of an async
    /// runtime.
    pub fn resize(&self, bytes: Option<u64>, shrink: bool) -> Result<u64, ResizeError> {
        if !self.follows_store {
            return Err(ResizeError::Modelled);
        }
        let _one = self.resizing.try_lock().ok_or(ResizeError::InProgress)?;
        let (block_size, old) = self.with(|core| {
            let sanitizing = matches!(core.sanitizer.phase(), Phase::Running { .. });
            (!sanitizing)
                .then(|| {
                    (
                        core.block_size(),
                        core.blocks() * u64::from(core.block_size()),
                    )
                })
                .ok_or(ResizeError::Sanitizing)
        })?;
        let block = u64::from(block_size);
        match bytes {
            Some(0) => return Err(ResizeError::Zero),
            Some(bytes) if !bytes.is_multiple_of(block) => {
                return Err(ResizeError::NotWholeBlocks { bytes, block_size })
            }
            Some(to) if to < old && !shrink => {
                return Err(ResizeError::Shrink { from: old, to });
            }
            Some(to) if to < old => self.with(|core| core.resize(to)),
            _ => {}
        }
        let new = match self.plane.resize(bytes) {
            Ok(new) => new,
            Err(e) => {
                // Back to what the store holds: the old capacity, unless it cut some of it.
                let kept = self.plane.geometry().capacity.min(old);
                self.with(|core| core.resize(kept));
                return Err(ResizeError::Store(e));
            }
        };
        if new < block {
            return Err(ResizeError::BelowOneBlock {
                bytes: new,
                block_size,
            });
        }
        let new = new / block * block;
        self.with(|core| core.resize(new));
        Ok(new)
    }

    /// Joins a copy manager: EXTENDED COPY and ROD tokens of this unit reach the others
    /// registered with it, and theirs reach this one (through this unit's data plane). A unit
    /// belongs to one copy manager: `false` when it had one already.
    pub fn attach(&self, manager: Arc<crate::CopyManager>) -> bool {
        let mut core = self.core.lock();
        if core.attached() {
            return false;
        }
        let ids = core.identifiers().clone();
        let view = crate::copy_manager::UnitView::new(
            ids.naa,
            ids.eui64,
            core.block_size(),
            core.blocks(),
            self.plane.clone(),
            core.uncorrectable().clone(),
        );
        core.attach(manager, Arc::new(view));
        true
    }

    /// Leaves its copy manager (see [`Self::attach`]).
    pub fn detach(&self) {
        self.core.lock().detach();
    }

    /// A task management function for this unit from `nexus` at `now` (SAM-5 §7).
    pub fn task_management(
        &self,
        now: Ns,
        nexus: &Nexus,
        tmf: TaskManagement,
        sink: &mut dyn Sink,
    ) -> TmfResponse {
        // A reset releases the RESERVE reservation the other gateways' commands made.
        let (news, shared) = self.peer_news();
        let (response, mode) = self.call(now, sink, |core| {
            for event in &news {
                core.peer_event(now, event, &shared);
            }
            (core.task_management(now, nexus, tmf), core.shared_mode())
        });
        self.settle_reservations(now, sink);
        // A reset is the logical unit's, on every gateway that exports it: they have it
        // before the function's response goes out.
        if let Some(event) =
            PeerEvent::of(tmf).filter(|_| response == TmfResponse::FunctionComplete)
        {
            if let Err(e) = self.plane.announce(&event.encode()) {
                tracing::warn!(error = %e, lun = self.lun, "telling the other gateways of a reset");
            }
            // It made the saved mode parameters current here, and there on hearing of it:
            // every gateway starting later must find them so.
            if let Some((contents, version)) = mode {
                let done = self
                    .plane
                    .share_now(KeptFile::ModePages, &contents, version);
                self.call(now, sink, |core| core.shared_mode_written(now, done));
            }
        }
        response
    }

    /// The nexus logged out or its connection dropped (SAM-5 §6.3.4).
    pub fn nexus_lost(&self, now: Ns, nexus: u64, sink: &mut dyn Sink) {
        self.call(now, sink, |core| core.nexus_lost(now, nexus));
        self.settle_reservations(now, sink);
    }

    /// Where gateways share the RESERVE (6)/(10) reservation (docs/gateways.md): writes the
    /// release the core owes after a reset here or its holder's I_T nexus loss, on the
    /// caller's thread, as the core decides it on the state as it is, again after each race
    /// lost, at most [`SHARE_ATTEMPTS`](crate::lost_race::SHARE_ATTEMPTS) times. A
    /// failure is logged and the reservation stays in the cluster, until a reset through any
    /// gateway releases it.
    fn settle_reservations(&self, now: Ns, sink: &mut dyn Sink) {
        for _ in 0..crate::lost_race::SHARE_ATTEMPTS {
            let Some((contents, version)) = self.with(|core| core.owed_release()) else {
                return;
            };
            let failure = match self
                .plane
                .share_now(KeptFile::Reservations, &contents, version)
            {
                Ok(Done::Shared(version)) => {
                    self.call(now, sink, |core| core.owed_release_done(Ok(Some(version))));
                    return;
                }
                Ok(Done::Stale(state)) => {
                    self.call(now, sink, |core| core.owed_release_done(Err(&state)));
                    continue;
                }
                Ok(other) => format!("{other:?}"),
                Err(e) => e.to_string(),
            };
            tracing::warn!(error = %failure, lun = self.lun, "releasing the gateways' RESERVE reservation");
            self.with(|core| core.owed_release_done(Ok(None)));
            return;
        }
        tracing::warn!(
            lun = self.lun,
            "releasing the gateways' RESERVE reservation lost every race"
        );
        self.with(|core| core.owed_release_done(Ok(None)));
    }
}
