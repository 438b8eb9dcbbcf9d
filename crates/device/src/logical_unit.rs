//! A logical unit's core: the whole SAM task lifecycle of the SPC-5/SBC-4 command set, sans
//! I/O. Every call takes `&mut self` and the time; what the call's task needs next comes back
//! as a [`Step`], what happened to other tasks as [`Event`]s, store I/O as data-plane
//! operations whose results come back through [`LogicalUnit::io_done`].
//!
//! The task lifecycle lives in this file (arrival, Data-Out, task attributes, the device
//! queue, the data plane, task management); the prechecks in `precheck.rs`, what each command
//! does in `execute.rs`. The parts (reservations, unit attentions, mode pages, sanitize, copy
//! lists, provisioning) are values the core owns.

use crate::block::Geometry;
use crate::config::{ConfigError, LuConfig};
use crate::copy_manager::{CopyManager, Published, UnitView};
use crate::device_queue::{DeviceQueue, MediumTask, Scheduled};
use crate::event::{Arrived, Event, Step, TaskId, Then};
use crate::extended_copy::{CopyLists, Here};
use crate::identity;
use crate::in_flight::EndedInFlight;
use crate::metrics::{CommandCounters, Kind, Metrics};
use crate::mode_state::ModeState;
use crate::provisioning::Provisioning;
use crate::read_write_long::Uncorrectable;
use crate::reservations::Reservations;
use crate::sanitize::{self, Sanitizer};
use crate::task::{Serviced, State, Task};
use crate::task_set::TaskSet;
use crate::timestamp::DeviceClock;
use crate::unit_attention::UnitAttentions;
use crate::{aptpl, Arrival, Completion, Nexus, Ns, TaskManagement, TmfResponse, Transfer};
use scsi::command::Command;
use scsi::inquiry::{self, BlockLimits, DeviceIdentifiers, StandardInquiry};
use scsi::mode::ModeParameters;
use scsi::provisioning::Thresholds;
use scsi::{rsoc, Asc, CommandInfo, Sense, SenseKey};
use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;
use store::Done;

/// The state files a logical unit keeps through power loss, as its data plane loaded them.
#[derive(Clone, Debug, Default)]
pub struct Kept {
    /// Saved mode parameters (SPC-5 §7.5.4).
    pub mode_pages: Option<Vec<u8>>,
    /// Persistent reservations under APTPL (SPC-4 §5.13.5.1).
    pub reservations: Option<Vec<u8>>,
    /// Where several gateways export the logical unit: the persistent reservations they
    /// share, as the plane read them at start (docs/gateways.md); `reservations` is then
    /// unused.
    pub shared_reservations: Option<store::SharedState>,
    /// Where several gateways export the logical unit: the mode parameters they share, as
    /// the plane read them at start; `mode_pages` is then unused.
    pub shared_mode_pages: Option<store::SharedState>,
}

/// What the core knows of its store, from the data plane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backing {
    /// Capacity in bytes.
    pub len: u64,
    /// The pieces UNMAP deallocates; 0 when it deallocates nothing.
    pub unmap_granularity: u64,
    /// Bytes allocated now, where the store can tell (thin provisioning's used resources).
    pub allocated: Option<u64>,
}

/// One logical unit. Build it with [`LogicalUnit::new`].
pub struct LogicalUnit {
    config: LuConfig,
    blocks: u64,
    inquiry: StandardInquiry,
    identifiers: DeviceIdentifiers,
    serial: String,
    block_limits: BlockLimits,
    pub(crate) mode: ModeState,
    /// START STOP UNIT with START = 0 stopped the unit (SBC-4 §4.20).
    pub(crate) stopped: bool,
    /// Removable medium loaded (always true for a fixed LU).
    pub(crate) medium_present: bool,
    /// Nexuses that have prevented medium removal (SBC-4 §5.11: prevention is per I_T nexus
    /// and removal is prevented while any nexus prevents it).
    pub(crate) prevent_removal: BTreeSet<u64>,
    pub(crate) reservations: Reservations,
    pub(crate) unit_attentions: UnitAttentions,
    pub(crate) sanitizer: Sanitizer,
    /// Blocks WRITE LONG marked uncorrectable (shared with copies from other units).
    pub(crate) uncorrectable: Arc<Uncorrectable>,
    /// REPORT/SET TIMESTAMP.
    pub(crate) clock: DeviceClock,
    pub(crate) provisioning: Provisioning,
    /// The store's usage as the data plane last reported it.
    pub(crate) usage: Option<u64>,
    tasks: TaskSet<Task>,
    /// The device queue of a timed or QoS logical unit.
    pub(crate) queue: Option<Scheduled>,
    counters: CommandCounters,
    pub(crate) copies: CopyLists,
    /// The copy manager EXTENDED COPY and ROD tokens reach other units through, and this
    /// unit's published view in it.
    copy: Option<(Arc<CopyManager>, Arc<UnitView>)>,
    events: VecDeque<Event>,
    /// The next step of background work, until the driver takes it.
    background: Option<store::Op>,
    left: Vec<qos::Completion>,
    started: Vec<qos::Started>,
    /// Tasks a CDL policy ended while their store operation ran.
    ended: EndedInFlight,
    /// Started tasks waiting for an ended write on their blocks, oldest first.
    blocked: Vec<TaskId>,
    released: Vec<TaskId>,
    releasing: bool,
    /// Whether the task that ended last exceeded a duration limit (its event says so).
    missed: bool,
    /// The target port group of the preferred gateway, as the data plane last told
    /// (docs/gateways.md); `None` while none is known, or for a lone server.
    pub(crate) preferred: Option<u16>,
    /// A SET TARGET PORT GROUPS under way: its nexus and the group it makes preferred, which
    /// the data plane may report before the command completes; that nexus gets no unit
    /// attention for the change (SPC-4 §5.16.2.5).
    pub(crate) choosing: Option<(u64, u16)>,
    /// The group the last SET TARGET PORT GROUPS (through any gateway) made preferred, as
    /// this gateway heard of it: REPORT TARGET PORT GROUPS' STATUS CODE while it is.
    pub(crate) chosen: Option<u16>,
    /// What the other gateways must hear of before the command that did it completes
    /// ([`Self::take_announcements`]).
    pub(crate) announcements: Vec<crate::PeerEvent>,
}

/// Complete with CHECK CONDITION. Out of line and cold: every caller is an error path, kept
/// out of the command path's instruction cache.
#[cold]
#[inline(never)]
pub(crate) fn check(sense: Sense) -> Completion {
    Completion::check_condition(sense)
}

/// An overlapped command's status (SAM-5 §5.10): ABORTED COMMAND, OVERLAPPED COMMANDS
/// ATTEMPTED. Out of line: an initiator's error.
#[cold]
#[inline(never)]
fn overlapped() -> Completion {
    check(Sense::new(
        SenseKey::AbortedCommand,
        Asc::OVERLAPPED_COMMANDS_ATTEMPTED,
    ))
}

/// Keep at most `allocation_length` bytes of what was appended after `start` (SPC-5 §4.2.5.6).
pub(crate) fn truncate(data_in: &mut Vec<u8>, start: usize, allocation_length: u32) {
    let keep = start.saturating_add(usize::try_from(allocation_length).unwrap_or(usize::MAX));
    data_in.truncate(keep);
}

/// How a command that [`LogicalUnit::run`] ran goes on.
pub(crate) enum Ran {
    /// It ended with this status (read data, if any, in the data-in buffer).
    Done(Completion),
    /// Its data-plane operation, and what the result will mean.
    Io(store::Op, crate::task::After),
    /// It waits for the sanitize it started.
    Sanitizing,
}

impl LogicalUnit {
    /// A logical unit over a store the data plane describes (`backing`, which must hold at
    /// least `config.size_bytes`), with what it kept through the last power loss, and, for a
    /// timed or QoS logical unit, its device queue.
    pub fn new(
        config: LuConfig,
        backing: Backing,
        kept: Kept,
        queue: Option<DeviceQueue>,
    ) -> Result<Self, ConfigError> {
        let mut config = config;
        // WCE is the drive model's write cache where it has one: one setting, not two.
        if let Some(wce) = queue.as_ref().and_then(|q| q.drive.write_cache()) {
            config.write_cache = wce;
        }
        config.validate()?;
        if backing.len < config.size_bytes {
            return Err(ConfigError::StoreTooSmall {
                store_bytes: backing.len,
                size_bytes: config.size_bytes,
            });
        }
        let key = identity::identity_key(&config.target_name, config.lun, config.serial.as_deref());
        let serial = config
            .serial
            .clone()
            .unwrap_or_else(|| identity::derived_serial(&key));
        let vendor = inquiry::ascii_field(&config.vendor);
        let identifiers =
            identity::device_identifiers(vendor, &serial, &key, config.port_groups.own);
        let inquiry = StandardInquiry {
            peripheral: inquiry::DIRECT_ACCESS_BLOCK_DEVICE,
            removable: config.removable,
            third_party_copy: true,
            implicit_alua: true,
            explicit_alua: config.port_groups.explicit(),
            version: config.inquiry_version,
            vendor,
            product: inquiry::ascii_field(&config.product),
            revision: inquiry::ascii_field(&config.revision),
        };
        // A kept file that does not decode, as the error reading it names it.
        let corrupt = |path: &Option<std::path::PathBuf>, e: String| {
            let at = path
                .as_ref()
                .map_or(String::new(), |p| format!("{}: ", p.display()));
            std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{at}{e}"))
        };
        let block_limits = block_limits(&config, backing.unmap_granularity);
        let cdl = queue.as_ref().map(|q| q.queue.cdl);
        let default_mode = ModeParameters {
            wce: config.write_cache,
            d_sense: false,
            swp: false,
            cdl,
            provisioning: config.thin_provisioning.then(Thresholds::default),
        };
        let mut mode = ModeState::new(
            default_mode,
            queue.is_some(),
            kept.mode_pages.as_deref(),
            config.write_cache_changeable,
            config.thin_provisioning,
        )
        .map_err(|e| ConfigError::SavedMode(corrupt(&config.saved_mode_path, e)))?;
        if let Some(state) = &kept.shared_mode_pages {
            let adopted = mode.adopt(state).map_err(|e| {
                ConfigError::SavedMode(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("the gateways' mode parameters: {e}"),
                ))
            })?;
            if let Some(current) = adopted {
                mode.apply(current);
            }
        }
        let (persistent, spc2, shared) = match (&kept.shared_reservations, &kept.reservations) {
            (Some(s), _) => {
                let state = s.contents.as_deref().map(aptpl::decode_shared).transpose();
                let state = state.map_err(|e| {
                    ConfigError::PersistentReservations(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!("the gateways' persistent reservations: {e}"),
                    ))
                })?;
                let (persistent, spc2) = state.map_or((None, None), |(p, h)| (Some(p), h));
                (persistent, spc2, Some(s.version))
            }
            (None, Some(bytes)) => (
                Some(aptpl::decode_kept(bytes).map_err(|e| {
                    ConfigError::PersistentReservations(corrupt(
                        &config.persistent_reservations_path,
                        e,
                    ))
                })?),
                None,
                None,
            ),
            (None, None) => (None, None, None),
        };
        // The gateways' state outlives any one of them: APTPL = 1 is honoured there.
        let ptpl_capable = config.persistent_reservations_path.is_some() || shared.is_some();
        let reservations =
            Reservations::new(persistent, spc2, ptpl_capable, &config.port_groups, shared);
        let queue = queue
            .map(Scheduled::new)
            .transpose()
            .map_err(ConfigError::Queue)?;
        let blocks = config.blocks();
        let mut lu = LogicalUnit {
            provisioning: Provisioning::new(blocks, config.block_size, backing.unmap_granularity),
            sanitizer: Sanitizer::new(
                u64::try_from(config.sanitize_pace.as_nanos()).unwrap_or(u64::MAX),
            ),
            blocks,
            config,
            inquiry,
            identifiers,
            serial,
            block_limits,
            mode,
            stopped: false,
            medium_present: true,
            prevent_removal: BTreeSet::new(),
            reservations,
            unit_attentions: UnitAttentions::default(),
            uncorrectable: Arc::default(),
            clock: DeviceClock::default(),
            usage: backing.allocated,
            tasks: TaskSet::default(),
            queue,
            counters: CommandCounters::default(),
            copies: CopyLists::default(),
            copy: None,
            events: VecDeque::new(),
            background: None,
            left: Vec::new(),
            started: Vec::new(),
            ended: EndedInFlight::default(),
            blocked: Vec::new(),
            released: Vec::new(),
            releasing: false,
            missed: false,
            preferred: None,
            choosing: None,
            chosen: None,
            announcements: Vec::new(),
        };
        let current = *lu.mode.current();
        lu.follow_mode(0, current);
        Ok(lu)
    }

    pub fn config(&self) -> &LuConfig {
        &self.config
    }

    /// Capacity in logical blocks.
    pub fn blocks(&self) -> u64 {
        self.blocks
    }

    pub fn block_size(&self) -> u32 {
        self.config.block_size
    }

    /// The Block Limits VPD page values.
    pub fn block_limits(&self) -> &BlockLimits {
        &self.block_limits
    }

    /// MAXIMUM TRANSFER LENGTH (VPD B0h) in logical blocks.
    pub fn max_transfer_length(&self) -> u32 {
        self.block_limits.maximum_transfer_length
    }

    /// The VPD 83h designators, by which copies name this unit.
    pub fn identifiers(&self) -> &DeviceIdentifiers {
        &self.identifiers
    }

    /// Whether commands go through a device queue (a timed or QoS logical unit).
    pub fn has_device_queue(&self) -> bool {
        self.queue.is_some()
    }

    /// What this logical unit supports of the command table.
    pub fn features(&self) -> rsoc::Features {
        rsoc::Features {
            cdl: self.has_device_queue(),
            thin_provisioning: self.config.thin_provisioning,
            explicit_alua: self.config.port_groups.explicit(),
        }
    }

    /// Whether sense data should be in descriptor format (Control mode page D_SENSE).
    pub fn descriptor_sense(&self) -> bool {
        self.mode.current().d_sense
    }

    /// Read-only by configuration or by the Control mode page's SWP bit.
    pub fn write_protected(&self) -> bool {
        self.config.read_only || self.mode.current().swp
    }

    /// The write cache is on (Caching mode page WCE).
    pub(crate) fn write_cache(&self) -> bool {
        self.mode.current().wce
    }

    /// Medium present and the unit started: medium access commands may run.
    pub(crate) fn medium_ready(&self) -> bool {
        self.medium_present && !self.stopped
    }

    pub(crate) fn serial(&self) -> &str {
        &self.serial
    }

    pub(crate) fn standard_inquiry(&self) -> &StandardInquiry {
        &self.inquiry
    }

    /// What the medium commands see of this unit.
    pub(crate) fn geometry(&self) -> Geometry<'_> {
        Geometry {
            blocks: self.blocks,
            block_size: self.config.block_size,
            limits: &self.block_limits,
            thin: self.config.thin_provisioning,
            write_cache: self.write_cache(),
        }
    }

    /// What a copy sees of this unit.
    pub(crate) fn here(&self) -> Here<'_> {
        Here {
            identifiers: &self.identifiers,
            block_size: self.config.block_size,
            blocks: self.blocks,
            write_protected: self.write_protected(),
            write_cache: self.write_cache(),
            manager: self.copy.as_ref().map(|(m, _)| &**m),
        }
    }

    /// What a copy sees of this unit, beside its copy lists (borrowed apart).
    pub(crate) fn copy_parts(&mut self) -> (Here<'_>, &mut CopyLists) {
        let write_protected = self.write_protected();
        let write_cache = self.write_cache();
        let here = Here {
            identifiers: &self.identifiers,
            block_size: self.config.block_size,
            blocks: self.blocks,
            write_protected,
            write_cache,
            manager: self.copy.as_ref().map(|(m, _)| &**m),
        };
        (here, &mut self.copies)
    }

    /// The nexus and tag of a task in the task set.
    pub fn owner(&self, id: TaskId) -> Option<(u64, u64)> {
        self.tasks.owner(id)
    }

    /// The nexus and tag of a task.
    pub(crate) fn tasks_owner(&self, id: TaskId) -> Option<(u64, u64)> {
        self.tasks.owner(id)
    }

    /// A task with its nexus, in one look.
    pub(crate) fn task_with_nexus(&self, id: TaskId) -> Option<(u64, &Task)> {
        self.tasks.owned(id).map(|(nexus, _, task)| (nexus, task))
    }

    pub(crate) fn task_ref(&self, id: TaskId) -> Option<&Task> {
        self.tasks.get(id)
    }

    /// The copy manager, and this unit's view in it.
    pub(crate) fn copy_manager(&self) -> Option<&(Arc<CopyManager>, Arc<UnitView>)> {
        self.copy.as_ref()
    }

    /// Whether the unit belongs to a copy manager.
    pub(crate) fn attached(&self) -> bool {
        self.copy.is_some()
    }

    /// Leaves its copy manager (the unit leaves its target): no copy reaches it any more, and
    /// the manager no longer holds its store open.
    pub(crate) fn detach(&mut self) {
        if let Some((manager, view)) = self.copy.take() {
            manager.unregister(&view);
        }
    }

    /// Raises REPORTED LUNS DATA HAS CHANGED for every nexus this unit knows: the target's
    /// logical unit inventory changed (SPC-5 §6.33).
    pub(crate) fn reported_luns_changed(&mut self) {
        self.unit_attentions
            .raise(Asc::REPORTED_LUNS_DATA_HAS_CHANGED, None);
    }

    /// Joins a copy manager: copies and ROD tokens reach other units through it, and it sees
    /// this unit through `view`.
    pub(crate) fn attach(&mut self, manager: Arc<CopyManager>, view: Arc<UnitView>) {
        manager.register(view.clone());
        self.copy = Some((manager, view));
        self.publish();
    }

    /// This unit's blocks WRITE LONG marked uncorrectable, shared with its copy view.
    pub(crate) fn uncorrectable(&self) -> &Arc<Uncorrectable> {
        &self.uncorrectable
    }

    /// Tells the copy manager what copies from other units check of this one.
    pub(crate) fn publish(&self) {
        if let Some((_, view)) = &self.copy {
            let (spc2_holder, persistent) = self.reservations.snapshot();
            view.publish(Published {
                ready: self.medium_ready(),
                write_protected: self.write_protected(),
                spc2_holder,
                persistent,
                target_port: self.reservations.target_port(),
            });
        }
    }

    /// `blocks` from `lba` are about to change: ROD tokens that represent them are revoked,
    /// and blocks WRITE LONG marked uncorrectable read back again.
    pub(crate) fn written(&self, lba: u64, blocks: u64) {
        self.uncorrectable.clear(lba, blocks);
        if let Some((manager, view)) = &self.copy {
            manager.written(view, lba, blocks);
        }
    }

    // --- The task lifecycle -------------------------------------------------------------

    /// A CDB through the command table, refusing what this unit does not support.
    fn decode(
        &self,
        found: &Result<&'static CommandInfo, Sense>,
        cdb: &[u8],
    ) -> Result<(&'static CommandInfo, Command), Sense> {
        let info = found.clone()?;
        let cmd = scsi::table::decode_as(info, cdb)?;
        if !self.features().supports(info) {
            return Err(Sense::invalid_command_operation_code());
        }
        Ok((info, cmd))
    }

    /// A command arrives at `now` (SAM-5 §5.1). Commands that end at once write their data
    /// into `data_in`; the rest enter the task set and go on as the returned step says.
    pub fn command(&mut self, now: Ns, a: &Arrival, data_in: &mut Vec<u8>) -> Arrived {
        self.clock.observe(now);
        let found = scsi::table::find(a.cdb);
        let kind = found.as_ref().map_or(Kind::Other, |i| Kind::of_entry(i));
        let mut transfer = None;
        let step = match self.arrive(now, a, &found, &mut transfer, data_in) {
            Ok(step) => step,
            Err(refused) => self.refused(kind, refused),
        };
        Arrived { transfer, step }
    }

    /// A command refused before it entered the task set: counted, and answered.
    #[cold]
    #[inline(never)]
    fn refused(&mut self, kind: Kind, refused: Completion) -> Step {
        self.counters.count(kind, &refused, 0);
        Step::Done(refused)
    }

    /// The task a command becomes, or the status it is refused with; `transfer` is set once
    /// its CDB decoded and a write's range checked out.
    fn arrive(
        &mut self,
        now: Ns,
        a: &Arrival,
        found: &Result<&'static CommandInfo, Sense>,
        transfer: &mut Option<Transfer>,
        data_in: &mut Vec<u8>,
    ) -> Result<Step, Completion> {
        if self.tasks.tag_in_use(a.nexus.id, a.tag) {
            // The tag of a task still in progress (SAM-5 §5.10, overlapped commands). The new
            // command ends; the older one goes on.
            return Err(overlapped());
        }
        let (info, cmd) = self.decode(found, a.cdb).map_err(check)?;
        self.geometry().check_data_out(info, &cmd).map_err(check)?;
        let asked = Transfer::of(cmd.data_length(), self.config.block_size);
        *transfer = Some(asked);
        self.precheck(a, found, info, &cmd)?;
        let transfer = asked;
        let want = match transfer {
            Transfer::Out(n) => n.min(a.data_out_buffer_size),
            _ => 0,
        };
        let have = a.data_out.len() as u64 >= u64::from(want);
        // The device queue takes inputs in time order.
        self.catch_up(now);
        let task = Task {
            info,
            cmd,
            kind: Kind::of_entry(info),
            arrived: now,
            head_of_queue: a.attribute == crate::TaskAttribute::HeadOfQueue,
            privileged: a.nexus.privileged,
            class: a.nexus.class,
            buffer: a.data_out_buffer_size,
            want,
            have: have.then_some(want),
            params: Vec::new(),
            state: State::Entered,
            medium: None,
            started: None,
            missed: false,
        };
        let Ok(id) = self.tasks.enter(a.nexus.id, a.tag, a.attribute, task) else {
            unreachable!("the tag was checked to be free");
        };
        if !have {
            return Ok(Step::DataOut(id, want));
        }
        let data_out = a.data_out.get(..want as usize).unwrap_or(a.data_out);
        Ok(self.proceed(now, id, data_out, data_in))
    }

    /// All of a task's Data-Out came (`data`: what the transport collected, at most what
    /// [`Step::DataOut`] asked for).
    pub fn data_out(&mut self, now: Ns, id: TaskId, data: &[u8], data_in: &mut Vec<u8>) -> Step {
        self.clock.observe(now);
        if self.tasks.is_aborted(id) {
            return Step::Aborted;
        }
        let Some(task) = self.tasks.get_mut(id).filter(|t| t.have.is_none()) else {
            debug_assert!(false, "data_out of a task that has its data");
            return Step::Aborted;
        };
        task.have = Some(u32::try_from(data.len()).unwrap_or(u32::MAX).min(task.want));
        self.proceed(now, id, data, data_in)
    }

    /// The transport could not collect a task's Data-Out (a digest or offset error: RFC 7143
    /// §7.8, §11.7.4): the task ends with `c`.
    pub fn data_out_failed(&mut self, now: Ns, id: TaskId, c: Completion) {
        self.clock.observe(now);
        if self.tasks.is_aborted(id) || self.tasks.get(id).is_none() {
            return;
        }
        let _done = self.finish(now, id, c);
    }

    /// A task with its Data-Out: held back behind an older task, or started.
    fn proceed(&mut self, now: Ns, id: TaskId, data_out: &[u8], data_in: &mut Vec<u8>) -> Step {
        if self.tasks.is_held(id) {
            if let Some(task) = self.tasks.get_mut(id) {
                if keeps_params(&task.cmd) {
                    task.params = data_out.to_vec();
                }
            }
            return Step::Wait(id);
        }
        self.start(now, id, data_out, data_in)
    }

    /// A task that may go: a medium command enters the device queue of a timed or QoS unit;
    /// every other command runs.
    fn start(&mut self, now: Ns, id: TaskId, data_out: &[u8], data_in: &mut Vec<u8>) -> Step {
        if let (Some(q), Some(task)) = (&self.queue, self.tasks.get(id)) {
            match self.geometry().media_op(task.info, &task.cmd) {
                Err(sense) => return self.finish(now, id, check(sense)),
                Ok(Some((op, dld))) => {
                    let m = MediumTask {
                        op,
                        class: q.class_of(task.class, dld),
                        dld,
                    };
                    let head_of_queue = task.head_of_queue;
                    if let Some(task) = self.tasks.get_mut(id) {
                        task.medium = Some(m);
                        task.state = State::Queued;
                    }
                    if let Some(q) = &mut self.queue {
                        q.submit(now, id.to_u64(), m, head_of_queue);
                    }
                    return Step::Wait(id);
                }
                Ok(None) => {}
            }
        }
        let ran = self.run(now, id, data_out, data_in);
        self.ran(now, id, ran)
    }

    /// What a command run comes to.
    fn ran(&mut self, now: Ns, id: TaskId, ran: Ran) -> Step {
        match ran {
            Ran::Done(c) => self.finish(now, id, c),
            Ran::Io(op, after) => {
                if let Some(task) = self.tasks.get_mut(id) {
                    task.state = State::Io(after);
                }
                Step::Io(id, op)
            }
            Ran::Sanitizing => {
                if let Some(task) = self.tasks.get_mut(id) {
                    task.state = State::Sanitizing;
                }
                Step::Wait(id)
            }
        }
    }

    /// A task's data-plane operation ended with `done` (read data appended to `data_in`).
    pub fn io_done(&mut self, now: Ns, id: TaskId, done: Done, data_in: &mut Vec<u8>) -> Step {
        self.clock.observe(now);
        if !self.ended.is_empty() || self.tasks.is_aborted(id) {
            if let Some(step) = self.io_done_ended(now, id, data_in) {
                return step;
            }
        }
        let Some(task) = self.tasks.get_mut(id) else {
            return Step::Aborted;
        };
        let State::Io(after) = std::mem::replace(&mut task.state, State::Entered) else {
            debug_assert!(false, "io_done of a task without an operation");
            return Step::Aborted;
        };
        // A medium task the device queue started (its result stays with the task set).
        let started = task.started.is_some();
        let ran = self.io_result(now, id, after, done, data_in);
        match ran {
            Ran::Done(c) if started => {
                self.serviced(now, id, c, data_in);
                // Without model time left the queue lets it go now: answer it here.
                match self.advance_queue(now, Some(id)) {
                    Some((step, data)) => {
                        *data_in = data;
                        step
                    }
                    None => Step::Wait(id),
                }
            }
            ran => self.ran(now, id, ran),
        }
    }

    /// [`Self::io_done`] of a task that a CDL policy or task management ended while its
    /// operation ran (`None`: neither did, it goes on as usual). Out of line: rare.
    #[cold]
    #[inline(never)]
    fn io_done_ended(&mut self, now: Ns, id: TaskId, data_in: &mut Vec<u8>) -> Option<Step> {
        if let Some(c) = self.ended.done(id) {
            // A CDL policy answered it while the store worked: the late data is dropped. The
            // answer is repeated for a transport that ran the operation after it learnt of
            // the end (it ignores an answer for a task it no longer has).
            data_in.clear();
            self.unblock(now);
            return Some(Step::Done(c));
        }
        if self.tasks.is_aborted(id) {
            // Task management aborted it while the operation ran: no status (TAS = 0).
            if let Some(task) = self.tasks.remove(id) {
                self.counters.aborted(task.kind);
                if let State::Io(crate::task::After::Copy(job, _)) = task.state {
                    // A held copy's results say it was aborted.
                    self.copy_aborted(&job);
                }
            }
            self.release(now);
            return Some(Step::Aborted);
        }
        None
    }

    /// A data-plane operation delivered for task `id` that its transport did not run: the
    /// task had ended for it meanwhile (a CDL policy or task management answered it).
    pub fn io_dropped(&mut self, now: Ns, id: TaskId) {
        self.clock.observe(now);
        if self.ended.done(id).is_some() {
            self.unblock(now);
        } else if self.tasks.is_aborted(id) {
            if let Some(task) = self.tasks.remove(id) {
                self.counters.aborted(task.kind);
            }
            self.release(now);
        }
    }

    /// A started medium task's store operation ended with `c` (read data in `data_in`): kept
    /// until the device queue lets it go, at the later of now and the model's time.
    fn serviced(&mut self, now: Ns, id: TaskId, c: Completion, data_in: &mut Vec<u8>) {
        let Some(task) = self.tasks.get_mut(id) else {
            return;
        };
        task.state = State::Serviced(Serviced::new(c, std::mem::take(data_in)));
        if let (Some(started), Some(q)) = (task.started, &mut self.queue) {
            q.store_done(now, started);
        }
    }

    /// A task ends with `c`: it leaves the task set, is counted, and the tasks it held back
    /// may go.
    fn finish(&mut self, now: Ns, id: TaskId, c: Completion) -> Step {
        let block_size = self.config.block_size;
        let left = self.tasks.remove_with(id, |task| {
            let moved = match Transfer::of(task.cmd.data_length(), block_size) {
                Transfer::In(n) | Transfer::Out(n) => n,
                Transfer::None => 0,
            };
            (
                task.kind,
                moved,
                task.missed,
                task.medium.map_or(0, |m| m.dld),
            )
        });
        let Some((kind, moved, missed, dld)) = left else {
            return Step::Aborted;
        };
        self.counters.count(kind, &c, moved);
        self.missed = missed;
        if missed {
            self.trace_missed(dld, &c);
        }
        self.release(now);
        Step::Done(c)
    }

    /// The operator's trace of a missed duration limit (the counters say how many): out of
    /// line, so the tracing machinery stays out of the command path's instruction cache.
    #[cold]
    #[inline(never)]
    fn trace_missed(&self, dld: u8, c: &Completion) {
        tracing::debug!(
            lun = self.config.lun,
            dld,
            status = ?c.status,
            sense = ?c.sense.as_ref().map(|s| (s.key, s.asc)),
            "duration limit missed"
        );
    }

    /// Starts held tasks that no longer have to wait, oldest first; what they do comes out as
    /// events.
    fn release(&mut self, now: Ns) {
        if !self.tasks.holds_any() || std::mem::replace(&mut self.releasing, true) {
            return;
        }
        let mut ids = std::mem::take(&mut self.released);
        loop {
            self.tasks.release(&mut ids);
            if ids.is_empty() {
                break;
            }
            for id in ids.drain(..) {
                let Some((nexus, tag)) = self.tasks.owner(id) else {
                    continue;
                };
                let Some(task) = self.tasks.get_mut(id) else {
                    continue;
                };
                if task.have.is_none() {
                    // Released while its Data-Out is still coming: it starts when it has it.
                    continue;
                }
                let params = std::mem::take(&mut task.params);
                let mut data_in = Vec::new();
                let step = self.start(now, id, &params, &mut data_in);
                self.emit(nexus, tag, id, step, data_in);
            }
        }
        self.released = ids;
        self.releasing = false;
    }

    /// A step of a task other than the one a call was about becomes an event for its nexus.
    /// Never inlined: a command's start and its end both come out through it, and one copy
    /// of it in the instruction cache serves both.
    #[inline(never)]
    fn emit(&mut self, nexus: u64, tag: u64, task: TaskId, step: Step, data_in: Vec<u8>) {
        let then = match step {
            Step::Io(_, op) => Then::Io(op),
            Step::Done(c) => Then::Done(c, data_in),
            Step::Aborted => Then::Aborted,
            Step::Wait(_) | Step::DataOut(..) => return,
        };
        let missed = match &then {
            Then::Done(..) => std::mem::take(&mut self.missed),
            _ => self.tasks.get(task).is_some_and(|t| t.missed),
        };
        self.events.push_back(Event {
            nexus,
            tag,
            task,
            then,
            missed,
        });
    }

    /// What happened without a call asking, oldest first.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// When the core next needs [`Self::handle_timeout`]: the device queue's next event, the
    /// next step of a paced sanitize, or at once for background work waiting to be taken
    /// ([`Self::poll_background`]).
    pub fn poll_timeout(&self) -> Option<Ns> {
        if self.background.is_some() {
            return Some(0);
        }
        let queue = self.queue.as_ref().and_then(Scheduled::next_event);
        let sanitize = self.sanitizer.next_at();
        match (queue, sanitize) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// A step of a long operation that runs on after its command answered (a SANITIZE): run
    /// it away from the connections and call [`Self::background_done`].
    pub fn poll_background(&mut self) -> Option<store::Op> {
        self.background.take()
    }

    /// Everything due by `now`: tasks the device queue is done with, the next step of a
    /// sanitize. What follows comes out as events.
    pub fn handle_timeout(&mut self, now: Ns) {
        self.clock.observe(now);
        self.advance_queue(now, None);
        self.pump_background(now);
    }

    /// Brings the device queue up to `now` before an input at `now` (the queue takes inputs
    /// in time order).
    fn catch_up(&mut self, now: Ns) {
        if self
            .queue
            .as_ref()
            .and_then(Scheduled::next_event)
            .is_some_and(|t| t <= now)
        {
            self.advance_queue(now, None);
        }
    }

    /// Medium tasks the device queue moved on by `now`: the ones it started go to the store,
    /// the ones it let go end with their store operation's status, or with the status their
    /// CDL policy or the drive's error recovery gave. What happens to them comes out as
    /// events, except for `caller`'s (a task whose store operation just ended): its step
    /// and read data come back.
    #[inline]
    fn advance_queue(&mut self, now: Ns, caller: Option<TaskId>) -> Option<(Step, Vec<u8>)> {
        // Nothing due (a store's end before the model's, the common case in `io_done`): the
        // queue's round would start and let go of no task.
        match &mut self.queue {
            Some(q) if !q.due(now) => {
                q.advance_idle(now);
                None
            }
            Some(_) => self.advance_queue_due(now, caller),
            None => None,
        }
    }

    /// [`Self::advance_queue`] when the queue has something due at `now`.
    fn advance_queue_due(&mut self, now: Ns, caller: Option<TaskId>) -> Option<(Step, Vec<u8>)> {
        let mut answer = None;
        while let Some(q) = &mut self.queue {
            // What the last round released or started may have made more due at `now`.
            if !q.due(now) {
                q.advance_idle(now);
                break;
            }
            q.advance(now, &mut self.left, &mut self.started);
            if self.left.is_empty() && self.started.is_empty() {
                break;
            }
            // Read in place: nothing a task's end or start does comes back to this round.
            for i in 0..self.left.len() {
                let Some(&l) = self.left.get(i) else {
                    break;
                };
                let id = TaskId::from_u64(l.id);
                let Some((nexus, tag)) = self.tasks.owner(id) else {
                    debug_assert!(false, "the queue returned a task that left the set");
                    continue;
                };
                let before = self.events.len();
                let (step, data_in) = self.left_queue(now, id, l);
                if caller == Some(id) {
                    answer = Some((step, data_in));
                } else {
                    self.emit(nexus, tag, id, step, data_in);
                    if self.events.len() > before + 1 {
                        self.answer_first(before);
                    }
                }
            }
            self.left.clear();
            for i in 0..self.started.len() {
                if let Some(&s) = self.started.get(i) {
                    self.start_medium(now, s);
                }
            }
            self.started.clear();
        }
        answer
    }

    /// A task's answer, the last event, goes before those of the tasks its end released
    /// (the events from `before` on). Out of line: only when its end released some.
    #[cold]
    #[inline(never)]
    fn answer_first(&mut self, before: usize) {
        if let Some(moved) = self.events.make_contiguous().get_mut(before..) {
            moved.rotate_right(1);
        }
    }

    /// The device queue let a medium task go with `l`: its step, and its read data.
    fn left_queue(&mut self, now: Ns, id: TaskId, l: qos::Completion) -> (Step, Vec<u8>) {
        let Some(task) = self.tasks.get_mut(id) else {
            return (Step::Aborted, Vec::new());
        };
        task.missed |= l.missed.any();
        task.started = None;
        let state = std::mem::replace(&mut task.state, State::Entered);
        let (medium, arrived) = (task.medium, task.arrived);
        let (Some(m), Some(q)) = (medium, &mut self.queue) else {
            return (Step::Aborted, Vec::new());
        };
        q.record(&m, now.saturating_sub(arrived));
        if l.ended_by.is_some() {
            q.record_late_end(now.saturating_sub(l.at));
        }
        match (q.completion(l.outcome, &m.op), state) {
            (None, State::Serviced(s)) => (self.finish(now, id, s.completion()), s.data_in),
            (ended, state) => self.left_unserviced(now, id, &m, ended, state),
        }
    }

    /// [`Self::left_queue`] of a task its CDL policy or the drive's error recovery ended
    /// (`ended`), or that left before its store operation was done. Out of line: rare.
    #[cold]
    #[inline(never)]
    fn left_unserviced(
        &mut self,
        now: Ns,
        id: TaskId,
        m: &MediumTask,
        ended: Option<Completion>,
        state: State,
    ) -> (Step, Vec<u8>) {
        match (ended, state) {
            (Some(c), State::Io(_)) => {
                // Ended while the store works on it: answered now, the operation finishes
                // in the background.
                let nexus = self.tasks.owner(id).map_or(0, |(n, _)| n);
                self.ended.add(id, nexus, &m.op, c.clone());
                (self.finish(now, id, c), Vec::new())
            }
            (ended, state) => {
                if let State::Blocked = state {
                    self.blocked.retain(|b| *b != id);
                }
                debug_assert!(ended.is_some(), "a task ends well only once serviced");
                let c = ended.unwrap_or(Completion::GOOD);
                (self.finish(now, id, c), Vec::new())
            }
        }
    }

    /// The device queue started a medium task: its store operation goes out, unless a write
    /// a CDL policy ended still holds its blocks.
    fn start_medium(&mut self, now: Ns, started: qos::Started) {
        let id = TaskId::from_u64(started.id);
        let Some(task) = self.tasks.get_mut(id) else {
            debug_assert!(false, "the queue started a task that left the set");
            return;
        };
        task.started = Some(started);
        if !self.ended.is_empty() && task.medium.is_some_and(|m| self.ended.blocks(&m.op)) {
            task.state = State::Blocked;
            self.blocked.push(id);
            return;
        }
        self.issue(now, id);
    }

    /// Runs a started medium task: its store operation comes out as an event.
    fn issue(&mut self, now: Ns, id: TaskId) {
        let Some((nexus, tag, task)) = self.tasks.owned_mut(id) else {
            return;
        };
        task.state = State::Entered;
        let params = std::mem::take(&mut task.params);
        let mut data_in = Vec::new();
        let step = match self.run(now, id, &params, &mut data_in) {
            Ran::Done(c) => {
                self.serviced(now, id, c, &mut data_in);
                Step::Wait(id)
            }
            ran => self.ran(now, id, ran),
        };
        self.emit(nexus, tag, id, step, data_in);
    }

    /// An ended write reached the store: the tasks that waited for its blocks go, oldest
    /// first, unless another ended write still holds theirs.
    fn unblock(&mut self, now: Ns) {
        let mut i = 0;
        while let Some(&id) = self.blocked.get(i) {
            let waits = self
                .tasks
                .get(id)
                .and_then(|t| t.medium)
                .is_some_and(|m| self.ended.blocks(&m.op));
            if waits {
                i += 1;
                continue;
            }
            self.blocked.remove(i);
            self.issue(now, id);
        }
    }

    /// Hands the sanitize's next step, when one is due, to the background; ends it when its
    /// work is done and its pace passed.
    #[inline]
    pub(crate) fn pump_background(&mut self, now: Ns) {
        if self.background.is_some() || self.sanitizer.is_idle() {
            return;
        }
        self.pump_sanitize(now);
    }

    /// [`Self::pump_background`] with a sanitize under way.
    fn pump_sanitize(&mut self, now: Ns) {
        match self.sanitizer.next(now) {
            Some(sanitize::Next::Step(op)) => self.background = Some(op),
            Some(sanitize::Next::Ended(waiting, c)) => self.sanitized(now, waiting, c),
            None => {}
        }
    }

    /// The sanitize ended with `c`: the SANITIZE command that waited for it, if any, ends too.
    fn sanitized(&mut self, now: Ns, waiting: Option<TaskId>, c: Completion) {
        let Some(id) = waiting else { return };
        if let Some((nexus, tag)) = self.tasks.owner(id) {
            let data_in = Vec::new();
            let step = self.finish(now, id, c);
            self.emit(nexus, tag, id, step, data_in);
        }
    }

    /// The background step in flight ended with `done`.
    pub fn background_done(&mut self, now: Ns, done: Done) {
        self.clock.observe(now);
        if let Some((waiting, c)) = self.sanitizer.step_done(&done) {
            self.sanitized(now, waiting, c);
        }
        self.pump_background(now);
    }

    // --- Task management ----------------------------------------------------------------

    /// Task management takes a task out: it ends without status (TAS = 0), and its nexus
    /// learns it from an `Aborted` event. One whose data-plane operation runs stays in its
    /// slot, its tag free, until the operation ends.
    fn abort(&mut self, now: Ns, id: TaskId) {
        let Some((nexus, tag)) = self.tasks.owner(id) else {
            return;
        };
        let Some(task) = self.tasks.get(id) else {
            return;
        };
        // A task the device queue holds (waiting, or started) leaves it: its unit is free.
        let queued = task.started.is_some() || matches!(task.state, State::Queued);
        if let (true, Some(q)) = (queued, &mut self.queue) {
            q.abort(now, id.to_u64());
        }
        match task.state {
            State::Io(_) => self.tasks.untag(id),
            State::Entered
            | State::Queued
            | State::Blocked
            | State::Serviced(_)
            | State::Sanitizing => {
                match task.state {
                    State::Sanitizing => {
                        self.sanitizer.forget_waiting(id);
                    }
                    State::Blocked => self.blocked.retain(|b| *b != id),
                    _ => {}
                }
                if let Some(task) = self.tasks.remove(id) {
                    self.counters.aborted(task.kind);
                }
            }
        }
        self.events.push_back(Event {
            nexus,
            tag,
            task: id,
            then: Then::Aborted,
            missed: false,
        });
    }

    /// ABORT TASK (SAM-5 §7.2) of the nexus's task with `tag`; false when there is none.
    pub fn abort_task(&mut self, now: Ns, nexus: u64, tag: u64) -> bool {
        self.catch_up(now);
        let Some(id) = self.tasks.find(nexus, tag) else {
            return false;
        };
        self.abort(now, id);
        self.release(now);
        true
    }

    /// Aborts every task of the nexuses `which` selects (ABORT TASK SET: the nexus's own;
    /// CLEAR TASK SET, LOGICAL UNIT RESET: all; I_T nexus loss: the lost nexus's; PREEMPT AND
    /// ABORT: the preempted ones'). Returns the nexuses that lost tasks, in ascending order.
    pub(crate) fn abort_where(&mut self, now: Ns, which: impl Fn(u64) -> bool) -> Vec<u64> {
        self.catch_up(now);
        let mut lost = Vec::new();
        for id in self.tasks.of(&which) {
            if let Some((nexus, _)) = self.tasks.owner(id) {
                lost.push(nexus);
            }
            self.abort(now, id);
        }
        self.release(now);
        lost.sort_unstable();
        lost.dedup();
        lost
    }

    /// A task management function for this logical unit from `nexus` at `now` (SAM-5 §7).
    /// TARGET WARM and COLD RESET are the target's: it resets every logical unit.
    pub fn task_management(&mut self, now: Ns, nexus: &Nexus, tmf: TaskManagement) -> TmfResponse {
        self.clock.observe(now);
        match tmf {
            TaskManagement::AbortTask(tag) => {
                if self.abort_task(now, nexus.id, tag) {
                    TmfResponse::FunctionComplete
                } else {
                    TmfResponse::NoSuchTask
                }
            }
            TaskManagement::AbortTaskSet => {
                self.abort_where(now, |n| n == nexus.id);
                TmfResponse::FunctionComplete
            }
            TaskManagement::ClearTaskSet => {
                // TAS = 0: the nexuses that lost tasks learn it from a unit attention
                // (SAM-5 §7.5).
                for other in self.abort_where(now, |_| true) {
                    if other != nexus.id {
                        self.unit_attentions
                            .raise_for(other, Asc::COMMANDS_CLEARED_BY_ANOTHER_INITIATOR);
                    }
                }
                TmfResponse::FunctionComplete
            }
            // NormACA = 0: there is never an ACA condition to clear (SAM-5 §7.4).
            TaskManagement::ClearAca => TmfResponse::FunctionRejected,
            TaskManagement::LogicalUnitReset => {
                self.reset(now, Asc::BUS_DEVICE_RESET_FUNCTION_OCCURRED, true);
                TmfResponse::FunctionComplete
            }
            TaskManagement::TargetWarmReset => {
                self.reset(now, Asc::POWER_ON_RESET_OR_BUS_DEVICE_RESET, true);
                TmfResponse::FunctionComplete
            }
            TaskManagement::TargetColdReset => {
                self.reset(now, Asc::POWER_ON_OCCURRED, true);
                TmfResponse::FunctionComplete
            }
        }
    }

    /// LOGICAL UNIT RESET or a target reset (SAM-5 §6.3): every task is aborted, mode
    /// parameters go back to their saved values (or defaults), the unit is started, and every
    /// nexus gets a unit attention. RESERVE reservations end; persistent ones stay (SPC-4
    /// §5.13.1). `here`: the reset came through this server, not another gateway, so where
    /// gateways share the RESERVE reservation this one releases it ([`Self::owed_release`]).
    pub(crate) fn reset(&mut self, now: Ns, asc: Asc, here: bool) {
        // Every nexus gets the reset's unit attention, so the lost tasks need none of their own.
        let _lost = self.abort_where(now, |_| true);
        let power_on = self.mode.power_on();
        self.apply_mode(now, power_on);
        self.stopped = false;
        self.prevent_removal.clear();
        self.copies.abort_running();
        self.reservations.reset(here);
        self.unit_attentions.raise(asc, None);
        self.publish();
    }

    /// The store's capacity changed to `bytes` (an RBD image resized, or the operator's
    /// [`crate::Unit::resize`]): commands from now on see the new capacity, and every nexus
    /// gets CAPACITY DATA HAS CHANGED (SBC-4 §4.6), on which Linux rescans the disk's size. A
    /// part-block is not addressable. Tasks already past their range check finish against
    /// the store, which refuses what lies beyond a shrunk end. The blocks a shrink cuts off
    /// change as a write would change them: their ROD tokens are revoked and their WRITE LONG
    /// marks go, so that blocks grown back later read as zeros.
    pub fn resize(&mut self, bytes: u64) {
        let blocks = bytes / u64::from(self.config.block_size);
        if blocks == self.blocks || blocks == 0 {
            return;
        }
        if blocks < self.blocks {
            self.written(blocks, self.blocks - blocks);
        }
        self.blocks = blocks;
        self.config.size_bytes = blocks * u64::from(self.config.block_size);
        self.provisioning.resize(blocks);
        if let Some((_, view)) = &self.copy {
            view.resize(blocks);
        }
        self.unit_attentions
            .raise(Asc::CAPACITY_DATA_HAS_CHANGED, None);
    }

    /// I_T nexus loss (SAM-5 §6.3.4): its tasks, its unit attentions, its medium removal
    /// prevention and its RESERVE reservation go; its persistent registrations stay.
    pub fn nexus_lost(&mut self, now: Ns, nexus: u64) {
        self.clock.observe(now);
        let _lost = self.abort_where(now, |n| n == nexus);
        self.ended.nexus_lost(nexus);
        self.unblock(now);
        let port = self.unit_attentions.port_of(nexus).map(str::to_owned);
        self.reservations.nexus_lost(nexus, port.as_deref());
        self.unit_attentions.forget(nexus);
        self.prevent_removal.remove(&nexus);
        self.copies.forget(nexus);
        self.publish();
    }

    /// The nexus is known here: a REPORT LUNS addressed to this unit made first contact.
    pub fn register_nexus(&mut self, nexus: &Nexus) {
        self.unit_attentions.register(nexus);
    }

    // --- Mode parameters ----------------------------------------------------------------

    /// New mode parameters become current, and what follows from them: the device queue's
    /// CDL pages (commands already in the task set keep the descriptors they arrived with)
    /// and its drive's write cache (in order with the task set: commands the drive starts
    /// from now on follow it), the provisioning thresholds, the copy view's write protection.
    pub(crate) fn apply_mode(&mut self, now: Ns, new: ModeParameters) -> bool {
        let old = self.mode.apply(new);
        let current = *self.mode.current();
        self.follow_mode(now, current);
        let changed = old != current;
        if changed {
            self.publish();
        }
        changed
    }

    fn follow_mode(&mut self, now: Ns, current: ModeParameters) {
        if let Some(q) = &mut self.queue {
            if let Some(pages) = current.cdl {
                q.set_cdl(pages);
            }
            q.set_write_cache(now, current.wce);
        }
        self.provisioning.arm(current.provisioning, self.usage);
    }

    /// The operator changed the LU's CDL pages in its configuration (a reload): they become
    /// the default values, and the current ones unless an initiator selected its own, for
    /// commands that arrive from `now`; every nexus then gets MODE PARAMETERS CHANGED
    /// (SPC-5 §7.5.2). Returns whether the current pages changed; an error for pages the
    /// queue refuses or a LU without CDL.
    pub fn set_cdl_defaults(&mut self, now: Ns, pages: qos::CdlPages) -> Result<bool, String> {
        if self.mode.current().cdl.is_none() {
            return Err("the logical unit has no CDL pages".to_owned());
        }
        pages.validate().map_err(|e| e.to_string())?;
        self.clock.observe(now);
        let follows = self.mode.set_default_cdl(pages);
        if follows {
            let current = *self.mode.current();
            self.follow_mode(now, current);
            self.publish();
            self.unit_attentions
                .raise(Asc::MODE_PARAMETERS_CHANGED, None);
        }
        Ok(follows)
    }

    // --- What the operator sees ---------------------------------------------------------

    /// Tasks in the task set.
    pub fn tasks(&self) -> usize {
        self.tasks.len()
    }

    /// The queue's counters (per class and per CDL descriptor).
    pub fn queue_stats(&self) -> Option<qos::Stats> {
        Some(self.queue.as_ref()?.stats().clone())
    }

    /// Keep latency histograms for [`Self::metrics`] from now on (a host that exports them
    /// asks; the simulator does not, and so pays nothing for them).
    pub fn keep_latencies(&mut self) {
        if let Some(q) = &mut self.queue {
            q.keep_latencies();
        }
    }

    /// Everything the logical unit counts, now.
    pub fn metrics(&self) -> Metrics {
        Metrics {
            counts: self.counters.snapshot(),
            queue: self.queue.as_ref().map(|q| q.metrics(self.tasks.len())),
        }
    }
}

/// Whether a command's Data-Out is a parameter list the core reads when it runs (kept while
/// the task is held), rather than blocks the data plane moves (which stay with the
/// transport).
fn keeps_params(cmd: &Command) -> bool {
    matches!(
        cmd,
        Command::ModeSelect(_)
            | Command::PersistentReserveOut(_)
            | Command::Unmap(_)
            | Command::Sanitize(_)
            | Command::FormatUnit(_)
            | Command::ExtendedCopy(_)
            | Command::SetTimestamp { .. }
    )
}

/// The Block Limits VPD page of a logical unit (SBC-4 §6.6.4).
fn block_limits(config: &LuConfig, unmap_granularity: u64) -> BlockLimits {
    let max_blocks = config.max_transfer_bytes / config.block_size;
    let thin = config.thin_provisioning;
    BlockLimits {
        maximum_compare_and_write_length: u8::try_from(max_blocks / 2).unwrap_or(u8::MAX),
        optimal_transfer_length_granularity: 1 << config.physical_block_exponent,
        maximum_transfer_length: max_blocks,
        optimal_transfer_length: max_blocks.min((1 << 20) / config.block_size),
        maximum_prefetch_length: max_blocks,
        // Every WRITE ATOMIC holds its range against all other writes, so any length a WRITE
        // may have is atomic, at any alignment, with or without a boundary.
        maximum_atomic_transfer_length: max_blocks,
        maximum_atomic_transfer_length_with_atomic_boundary: max_blocks,
        maximum_atomic_boundary_size: max_blocks,
        // Bounded so one command cannot hold a connection for long (32 MiB at 512 B). One
        // block short of 2^16: libiscsi 1.19's WriteSame16.Unmap writes as many blocks as this
        // allows from 65,536 with one WRITE(16), beyond our MAXIMUM TRANSFER LENGTH.
        maximum_write_same_length: (1 << 16) - 1,
        // Deallocating is cheap (chunks dropped, holes punched) whatever the length.
        maximum_unmap_lba_count: if thin { u32::MAX } else { 0 },
        maximum_unmap_block_descriptor_count: if thin { 256 } else { 0 },
        optimal_unmap_granularity: if thin {
            u32::try_from(unmap_granularity / u64::from(config.block_size))
                .unwrap_or(u32::MAX)
                .max(1)
        } else {
            0
        },
    }
}
