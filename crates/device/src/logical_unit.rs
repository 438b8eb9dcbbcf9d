//! A logical unit: the SPC-5/SBC-4 command set over a store. Commands run inline on the
//! caller's thread; per-LU state is atomics plus small locks, so LUs never contend with each
//! other and READ/WRITE touch no lock of the LU.

use crate::config::{ConfigError, LuConfig};
use crate::copy_manager::CopyManager;
use crate::device_queue::{DeviceQueue, Scheduled};
use crate::extended_copy::CopyLists;
use crate::identity;
use crate::metrics::CommandCounters;
use crate::range_lock::RangeLock;
use crate::reservations::Reservations;
use crate::sanitize::Sanitizer;
use crate::saved_mode;
use crate::timestamp::DeviceClock;
use crate::unit_attention::UnitAttentions;
use crate::{Completion, Ns, Request, TaskAttribute, Transfer};
use parking_lot::Mutex;
use scsi::alua::{self, TargetPortGroup};
use scsi::command::{Command, Inquiry, ModeSelect, StartStopUnit};
use scsi::inquiry::{self, vpd, BlockLimits, DeviceIdentifiers, StandardInquiry};
use scsi::mode::{self, ModeContext, ModeParameters};
use scsi::provisioning::{self, Thresholds};
use scsi::{rsoc, Asc, CommandInfo, Flags, Sense, SenseKey, Status};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use store::Store;

/// One logical unit. Build it with [`LogicalUnit::new`] and hand it to [`crate::Target::new`].
pub struct LogicalUnit {
    config: LuConfig,
    blocks: u64,
    pub(crate) store: Arc<dyn Store>,
    inquiry: StandardInquiry,
    pub(crate) identifiers: DeviceIdentifiers,
    serial: String,
    block_limits: BlockLimits,
    default_mode: ModeParameters,
    pub(crate) mode: Mutex<ModeParameters>,
    /// Saved values, on a logical unit that can save them (one with a device queue); kept
    /// in `config.saved_mode_path` when there is one.
    saved_mode: Option<Mutex<ModeParameters>>,
    /// Copies of mode values read on every command, kept in step with `mode`.
    d_sense: AtomicBool,
    pub(crate) wce: AtomicBool,
    /// Control mode page SWP: writes fail as if the LU were read-only.
    pub(crate) swp: AtomicBool,
    /// START STOP UNIT with START = 0 stopped the unit (SBC-4 §4.20).
    stopped: AtomicBool,
    /// Removable medium loaded (always true for a fixed LU).
    medium_present: AtomicBool,
    /// Nexuses that have prevented medium removal (SBC-4 §5.11: prevention is per I_T nexus
    /// and removal is prevented while any nexus prevents it).
    prevent_removal: Mutex<BTreeSet<u64>>,
    /// RESERVE/RELEASE and persistent reservations.
    pub(crate) reservations: Reservations,
    pub(crate) unit_attentions: UnitAttentions,
    /// The block ranges commands that change the medium are changing: WRITE ATOMIC, COMPARE
    /// AND WRITE and ORWRITE are each one uninterrupted change against every other write.
    pub(crate) ranges: Arc<RangeLock>,
    /// SANITIZE in progress or failed.
    pub(crate) sanitizer: Sanitizer,
    /// Blocks WRITE LONG marked uncorrectable.
    pub(crate) uncorrectable: crate::read_write_long::Uncorrectable,
    /// REPORT/SET TIMESTAMP.
    pub(crate) clock: DeviceClock,
    /// The task set and device queue of a timed or QoS logical unit; without one, commands
    /// run inline on the caller's thread.
    pub(crate) scheduled: Option<Scheduled>,
    /// Commands, sense data and bytes, for the operator's metrics.
    pub(crate) counters: CommandCounters,
    /// The registry through which EXTENDED COPY reaches other logical units.
    pub(crate) copy_manager: OnceLock<Arc<CopyManager>>,
    /// Third-party copies: held results, and what stops running ones.
    pub(crate) copies: CopyLists,
    /// A logical block provisioning threshold is enabled: writes check the resources.
    pub(crate) thresholds_enabled: AtomicBool,
    /// The USED LBA MAPPING RESOURCE COUNT the thresholds last saw.
    pub(crate) provisioning_used: AtomicU64,
}

/// Complete with CHECK CONDITION.
pub(crate) fn check(sense: Sense) -> Completion {
    Completion::check_condition(sense)
}

/// A unit attention condition the command met: CHECK CONDITION, UNIT ATTENTION.
fn unit_attention(asc: Option<Asc>) -> Result<(), Completion> {
    match asc {
        Some(asc) => Err(check(Sense::new(SenseKey::UnitAttention, asc))),
        None => Ok(()),
    }
}

/// Keep at most `allocation_length` bytes of what was appended after `start` (SPC-5 §4.2.5.6).
pub(crate) fn truncate(data_in: &mut Vec<u8>, start: usize, allocation_length: u32) {
    let keep = start.saturating_add(usize::try_from(allocation_length).unwrap_or(usize::MAX));
    data_in.truncate(keep);
}

impl LogicalUnit {
    /// A logical unit over `store`, which must hold at least `config.size_bytes`.
    pub fn new(config: LuConfig, store: Box<dyn Store>) -> Result<Self, ConfigError> {
        config.validate()?;
        if store.len() < config.size_bytes {
            return Err(ConfigError::StoreTooSmall {
                store_bytes: store.len(),
                size_bytes: config.size_bytes,
            });
        }
        let key = identity::identity_key(&config.target_name, config.lun, config.serial.as_deref());
        let serial = config
            .serial
            .clone()
            .unwrap_or_else(|| identity::derived_serial(&key));
        let vendor = inquiry::ascii_field(&config.vendor);
        let identifiers = identity::device_identifiers(vendor, &serial, &key);
        let inquiry = StandardInquiry {
            peripheral: inquiry::DIRECT_ACCESS_BLOCK_DEVICE,
            removable: config.removable,
            third_party_copy: true,
            implicit_alua: true,
            version: config.inquiry_version,
            vendor,
            product: inquiry::ascii_field(&config.product),
            revision: inquiry::ascii_field(&config.revision),
        };
        let max_blocks = config.max_transfer_bytes / config.block_size;
        let block_limits = BlockLimits {
            maximum_compare_and_write_length: u8::try_from(max_blocks / 2).unwrap_or(u8::MAX),
            optimal_transfer_length_granularity: 1 << config.physical_block_exponent,
            maximum_transfer_length: max_blocks,
            optimal_transfer_length: max_blocks.min((1 << 20) / config.block_size),
            maximum_prefetch_length: max_blocks,
            // Every WRITE ATOMIC holds its range against all other writes, so any length a
            // WRITE may have is atomic, at any alignment, with or without a boundary.
            maximum_atomic_transfer_length: max_blocks,
            maximum_atomic_transfer_length_with_atomic_boundary: max_blocks,
            maximum_atomic_boundary_size: max_blocks,
            // Bounded so one command cannot hold a connection for long (32 MiB at 512 B). One
            // block short of 2^16: libiscsi 1.19's WriteSame16.Unmap writes as many blocks as
            // this allows from 65,536 with one WRITE(16), beyond our MAXIMUM TRANSFER LENGTH.
            maximum_write_same_length: (1 << 16) - 1,
            // Deallocating is cheap (chunks dropped, holes punched) whatever the length.
            maximum_unmap_lba_count: if config.thin_provisioning {
                u32::MAX
            } else {
                0
            },
            maximum_unmap_block_descriptor_count: if config.thin_provisioning { 256 } else { 0 },
            optimal_unmap_granularity: if config.thin_provisioning {
                u32::try_from(store.unmap_granularity() / u64::from(config.block_size))
                    .unwrap_or(u32::MAX)
                    .max(1)
            } else {
                0
            },
        };
        let default_mode = ModeParameters {
            wce: config.write_cache,
            d_sense: false,
            swp: false,
            cdl: None,
            provisioning: config.thin_provisioning.then(Thresholds::default),
        };
        store.set_write_through(!config.write_cache);
        let reservations = Reservations::new(config.persistent_reservations_path.clone())
            .map_err(ConfigError::PersistentReservations)?;
        let sanitizer = Sanitizer::new(config.sanitize_pace);
        Ok(LogicalUnit {
            blocks: config.blocks(),
            config,
            store: Arc::from(store),
            inquiry,
            identifiers,
            serial,
            block_limits,
            default_mode,
            mode: Mutex::new(default_mode),
            saved_mode: None,
            d_sense: AtomicBool::new(false),
            wce: AtomicBool::new(default_mode.wce),
            swp: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
            medium_present: AtomicBool::new(true),
            prevent_removal: Mutex::new(BTreeSet::new()),
            reservations,
            unit_attentions: UnitAttentions::default(),
            ranges: Arc::default(),
            sanitizer,
            uncorrectable: Default::default(),
            clock: DeviceClock::default(),
            scheduled: None,
            counters: CommandCounters::default(),
            copy_manager: OnceLock::new(),
            copies: CopyLists::default(),
            thresholds_enabled: AtomicBool::new(false),
            provisioning_used: AtomicU64::new(0),
        })
    }

    /// A logical unit whose medium commands go through a device queue: timed by its drive
    /// model, ordered by its QoS settings, with Command Duration Limits.
    pub fn with_device_queue(
        config: LuConfig,
        store: Box<dyn Store>,
        queue: DeviceQueue,
    ) -> Result<Self, ConfigError> {
        let pages = queue.queue.cdl;
        let mut config = config;
        // WCE is the drive model's write cache where it has one: one setting, not two.
        if let Some(wce) = queue.drive.write_cache() {
            config.write_cache = wce;
        }
        let mut lu = Self::new(config, store)?;
        lu.scheduled = Some(Scheduled::new(queue).map_err(ConfigError::Queue)?);
        lu.default_mode.cdl = Some(pages);
        let saved = match &lu.config.saved_mode_path {
            Some(path) => saved_mode::load(path).map_err(ConfigError::SavedMode)?,
            None => None,
        };
        // A file from another kind of LU (without CDL pages) does not apply.
        let saved = saved.filter(|s| s.cdl.is_some()).unwrap_or(lu.default_mode);
        lu.saved_mode = Some(Mutex::new(saved));
        let mut current = lu.default_mode;
        lu.apply_mode(&mut current, saved);
        *lu.mode.get_mut() = current;
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

    /// MAXIMUM TRANSFER LENGTH (VPD B0h) in logical blocks.
    pub fn max_transfer_length(&self) -> u32 {
        self.block_limits.maximum_transfer_length
    }

    /// The Block Limits VPD page values.
    pub fn block_limits(&self) -> &BlockLimits {
        &self.block_limits
    }

    /// MAXIMUM WRITE SAME LENGTH (VPD B0h) in logical blocks.
    pub fn max_write_same_length(&self) -> u64 {
        self.block_limits.maximum_write_same_length
    }

    /// What this logical unit supports of the command table.
    pub fn features(&self) -> rsoc::Features {
        rsoc::Features {
            cdl: self.has_device_queue(),
            thin_provisioning: self.config.thin_provisioning,
        }
    }

    /// A CDB through the command table, refusing what this unit does not support.
    pub(crate) fn decode(&self, cdb: &[u8]) -> Result<(&'static CommandInfo, Command), Sense> {
        self.decode_found(scsi::table::find(cdb), cdb)
    }

    /// [`Self::decode`] of the entry [`scsi::table::find`] found for `cdb`.
    pub(crate) fn decode_found(
        &self,
        found: Result<&'static CommandInfo, Sense>,
        cdb: &[u8],
    ) -> Result<(&'static CommandInfo, Command), Sense> {
        let info = found?;
        let cmd = scsi::table::decode_as(info, cdb)?;
        if !self.features().supports(info) {
            return Err(Sense::invalid_command_operation_code());
        }
        Ok((info, cmd))
    }

    /// Whether sense data should be in descriptor format (Control mode page D_SENSE).
    pub fn descriptor_sense(&self) -> bool {
        self.d_sense.load(Ordering::Relaxed)
    }

    /// Read-only by configuration or by the Control mode page's SWP bit.
    pub fn write_protected(&self) -> bool {
        self.config.read_only || self.swp.load(Ordering::Relaxed)
    }

    /// Medium present and the unit started: medium access commands may run.
    pub(crate) fn medium_ready(&self) -> bool {
        self.medium_present.load(Ordering::Relaxed) && !self.stopped.load(Ordering::Relaxed)
    }

    pub fn store(&self) -> &dyn Store {
        &*self.store
    }

    /// The bytes `cmd` moves on this LU. A write whose length or range the command would
    /// refuse is refused here, before the transport asks for (and buffers) any of its data.
    pub(crate) fn transfer(&self, info: &CommandInfo, cmd: &Command) -> Result<Transfer, Sense> {
        self.check_data_out_range(info, cmd)?;
        Ok(Transfer::of(cmd.data_length(), self.config.block_size))
    }

    /// LOGICAL UNIT RESET or a target reset (SAM-5 §6.3): every task is aborted (those of
    /// other nexuses than `reporter` are reported by the next `advance`), mode parameters go
    /// back to their saved values (or defaults), the unit is started, and every nexus gets a
    /// unit attention. RESERVE reservations end; persistent ones stay (SPC-4 §5.13.1).
    pub(crate) fn reset(&self, now: Ns, reporter: Option<u64>, asc: Asc) {
        // Every nexus gets the reset's unit attention, so the lost tasks need none of their own.
        let _others = self.abort_tasks(now, reporter, |_| true);
        let power_on = self.power_on_mode();
        let mut mode = self.mode.lock();
        self.apply_mode(&mut mode, power_on);
        self.stopped.store(false, Ordering::Relaxed);
        drop(mode);
        self.prevent_removal.lock().clear();
        self.copies.abort_running();
        self.reservations.reset();
        self.unit_attentions.raise(asc, None);
    }

    /// I_T nexus loss (SAM-5 §6.3.4): its unit attentions, its medium removal prevention and
    /// its RESERVE reservation go; its persistent registrations stay.
    pub(crate) fn nexus_lost(&self, now: Ns, nexus: u64) {
        let _none = self.abort_tasks(now, Some(nexus), |n| n == nexus);
        self.unit_attentions.forget(nexus);
        self.prevent_removal.lock().remove(&nexus);
        self.copies.forget(nexus);
        self.reservations.nexus_lost(nexus);
    }

    /// The values that become current at power on and reset: the saved ones if any.
    fn power_on_mode(&self) -> ModeParameters {
        self.saved_mode
            .as_ref()
            .map_or(self.default_mode, |s| *s.lock())
    }

    fn apply_mode(&self, mode: &mut ModeParameters, new: ModeParameters) {
        let mut new = new;
        if !self.config.write_cache_changeable {
            // A saved page from before the pin does not turn the cache back on.
            new.wce = self.config.write_cache;
        }
        // A saved file from another provisioning neither adds nor drops the page.
        new.provisioning = match self.config.thin_provisioning {
            true => Some(new.provisioning.unwrap_or_default()),
            false => None,
        };
        self.arm_thresholds(new.provisioning);
        if let (Some(pages), Some(s)) = (new.cdl, &self.scheduled) {
            if mode.cdl != new.cdl {
                // Commands already in the task set keep the descriptors they arrived with.
                let accepted = s.set.lock().queue_mut().set_cdl(pages);
                debug_assert!(accepted.is_ok(), "MODE SELECT validated the pages");
            }
        }
        if let Some(s) = &self.scheduled {
            let mut set = s.set.lock();
            if set.queue().write_cache().is_some_and(|on| on != new.wce) {
                // In order with the task set: commands the drive starts from now on follow it.
                let now = set.latest();
                set.queue_mut().set_write_cache(now, new.wce);
            }
        }
        *mode = new;
        self.d_sense.store(new.d_sense, Ordering::Relaxed);
        self.wce.store(new.wce, Ordering::Relaxed);
        self.swp.store(new.swp, Ordering::Relaxed);
        // WCE = 0: every write reaches stable storage before GOOD (SBC-4 §4.15).
        self.store.set_write_through(!new.wce);
    }

    /// Execute one command addressed to this LU.
    pub(crate) fn execute(&self, req: &Request, data_in: &mut Vec<u8>) -> Completion {
        match self.precheck(req) {
            Ok((info, cmd)) => self.run(req, info, cmd, data_in),
            Err(failed) => failed,
        }
    }

    /// The checks made before a command enters the task set, once, from its table entry's
    /// [`Flags`]: a reservation held by another nexus (RESERVATION CONFLICT takes precedence
    /// over CHECK CONDITION, SAM-5 §5.3.2), a pending unit attention for this nexus (SAM-5
    /// §5.14), then [`Self::check_command`].
    pub(crate) fn precheck(
        &self,
        req: &Request,
    ) -> Result<(&'static CommandInfo, Command), Completion> {
        let found = scsi::table::find(req.cdb);
        self.check_reservation(req, &found)?;
        let exempt = found
            .as_ref()
            .is_ok_and(|i| i.flags.contains(Flags::NO_UNIT_ATTENTION));
        unit_attention(self.unit_attentions.on_command(req.nexus, exempt))?;
        self.check_command(req, found)
    }

    /// [`Self::precheck`] by the logical unit's only user (no lock taken).
    pub(crate) fn precheck_mut(
        &mut self,
        req: &Request,
    ) -> Result<(&'static CommandInfo, Command), Completion> {
        let found = scsi::table::find(req.cdb);
        self.check_reservation(req, &found)?;
        let exempt = found
            .as_ref()
            .is_ok_and(|i| i.flags.contains(Flags::NO_UNIT_ATTENTION));
        unit_attention(self.unit_attentions.on_command_mut(req.nexus, exempt))?;
        self.check_command(req, found)
    }

    /// The first of [`Self::precheck`]'s checks: a reservation held by another nexus.
    fn check_reservation(
        &self,
        req: &Request,
        found: &Result<&'static CommandInfo, Sense>,
    ) -> Result<(), Completion> {
        if self
            .reservations
            .conflict(req.nexus, found.as_ref().ok().copied(), req.cdb)
        {
            return Err(Completion {
                status: Status::ReservationConflict,
                sense: None,
            });
        }
        Ok(())
    }

    /// [`Self::precheck`]'s checks after the unit attention: the task attribute, the CDB, then
    /// the unit's state as the entry's flags ask: the target port group's ALUA state, medium
    /// present, unit started, write protection.
    fn check_command(
        &self,
        req: &Request,
        found: Result<&'static CommandInfo, Sense>,
    ) -> Result<(&'static CommandInfo, Command), Completion> {
        // NormACA = 0: an ACA condition never exists, so a command with the ACA attribute has
        // nothing to run under (SAM-5 §5.9.2, §8.6).
        if req.attribute == TaskAttribute::Aca {
            return Err(check(Sense::new(
                SenseKey::IllegalRequest,
                Asc::INVALID_MESSAGE_ERROR,
            )));
        }
        let (info, cmd) = self.decode_found(found, req.cdb).map_err(check)?;
        self.check_state(info.flags).map_err(check)?;
        self.sanitizer.gate(&cmd, info.flags).map_err(check)?;
        Ok((info, cmd))
    }

    /// Whether the unit's state lets a command with `flags` run.
    fn check_state(&self, flags: Flags) -> Result<(), Sense> {
        self.config.alua_state.admits(flags)?;
        if flags.contains(Flags::MEDIUM) && !self.medium_present.load(Ordering::Relaxed) {
            return Err(Sense::new(SenseKey::NotReady, Asc::MEDIUM_NOT_PRESENT));
        }
        if flags.contains(Flags::READY) && self.stopped.load(Ordering::Relaxed) {
            return Err(Sense::new(
                SenseKey::NotReady,
                Asc::LOGICAL_UNIT_NOT_READY_INITIALIZING_REQUIRED,
            ));
        }
        if flags.contains(Flags::WRITES) && self.write_protected() {
            return Err(Sense::new(SenseKey::DataProtect, Asc::WRITE_PROTECTED));
        }
        Ok(())
    }

    /// Run a command that passed [`Self::precheck`]; after one that changes the medium, the
    /// logical block provisioning thresholds, when any is enabled.
    pub(crate) fn run(
        &self,
        req: &Request,
        info: &'static CommandInfo,
        cmd: Command,
        data_in: &mut Vec<u8>,
    ) -> Completion {
        let done = self.run_command(req, info, cmd, data_in);
        if info.flags.contains(Flags::WRITES) && self.thresholds_enabled.load(Ordering::Relaxed) {
            self.check_thresholds(req.nexus.id);
        }
        done
    }

    fn run_command(
        &self,
        req: &Request,
        info: &'static CommandInfo,
        cmd: Command,
        data_in: &mut Vec<u8>,
    ) -> Completion {
        let start = data_in.len();
        match cmd {
            // Its flags make the prechecks report a stopped unit or a missing medium.
            Command::TestUnitReady => Completion::GOOD,
            Command::RequestSense {
                desc,
                allocation_length,
            } => {
                let sanitizing = self.sanitizer.phase().sense();
                let sense = match self.unit_attentions.take(req.nexus) {
                    Some(asc) => Sense::new(SenseKey::UnitAttention, asc),
                    None if sanitizing.is_some() => sanitizing
                        .unwrap_or_else(|| Sense::new(SenseKey::NoSense, Asc::NO_ADDITIONAL_SENSE)),
                    None if !self.medium_present.load(Ordering::Relaxed) => {
                        Sense::new(SenseKey::NotReady, Asc::MEDIUM_NOT_PRESENT)
                    }
                    None if self.stopped.load(Ordering::Relaxed) => Sense::new(
                        SenseKey::NotReady,
                        Asc::LOGICAL_UNIT_NOT_READY_INITIALIZING_REQUIRED,
                    ),
                    None => Sense::new(SenseKey::NoSense, Asc::NO_ADDITIONAL_SENSE),
                };
                sense.write(desc, data_in);
                truncate(data_in, start, allocation_length.into());
                Completion::GOOD
            }
            Command::Inquiry(i) => self.inquiry(&i, data_in, start),
            Command::ReadCapacity10 => {
                let last = u32::try_from(self.blocks - 1).unwrap_or(u32::MAX);
                data_in.extend_from_slice(&last.to_be_bytes());
                data_in.extend_from_slice(&self.config.block_size.to_be_bytes());
                Completion::GOOD
            }
            Command::ReadCapacity16 { allocation_length } => {
                // READ CAPACITY (16) parameter data (SBC-4 table 66).
                let mut p = [0u8; 32];
                p[0..8].copy_from_slice(&(self.blocks - 1).to_be_bytes());
                p[8..12].copy_from_slice(&self.config.block_size.to_be_bytes());
                p[13] = self.config.physical_block_exponent & 0x0F; // LBPPBE
                if self.config.thin_provisioning {
                    p[14] = 0x80 | 0x40; // LBPME, LBPRZ: deallocated blocks read as zeros
                }
                data_in.extend_from_slice(&p);
                truncate(data_in, start, allocation_length);
                Completion::GOOD
            }
            Command::ReportLuns { .. } => {
                // Handled by the target, which knows every LUN; a LU alone reports itself.
                scsi::report_luns::report_luns(std::iter::once(self.config.lun), data_in);
                Completion::GOOD
            }
            Command::Read(rw) => self.read(info, &rw, data_in),
            Command::Write(rw) => self.write(info, &rw, req.data_out),
            Command::OrWrite(rw) => self.or_write(info, &rw, req.data_out),
            Command::CompareAndWrite(rw) => self.compare_and_write(&rw, req),
            Command::WriteAndVerify(w) => self.write_and_verify(info, &w, req.data_out),
            Command::WriteSame(w) => self.write_same(info, &w, req),
            Command::Unmap(u) => self.unmap(&u, req.data_out),
            Command::GetLbaStatus {
                lba,
                allocation_length,
            } => self.get_lba_status(lba, allocation_length, data_in),
            Command::Verify(v) => self.verify(info, &v, req.data_out),
            Command::SynchronizeCache(r) => self.synchronize_cache(&r),
            Command::PreFetch(r) => self.pre_fetch(&r),
            Command::ModeSense(m) => {
                let current = *self.mode.lock();
                let saved = self.saved_mode.as_ref().map(|s| *s.lock());
                let ctx = ModeContext {
                    current: &current,
                    default: &self.default_mode,
                    saved: saved.as_ref(),
                    write_protected: self.write_protected(),
                    wce_changeable: self.config.write_cache_changeable,
                    number_of_blocks: self.blocks,
                    block_length: self.config.block_size,
                };
                match mode::mode_sense(&m, &ctx, data_in) {
                    Ok(()) => {
                        truncate(data_in, start, m.allocation_length.into());
                        Completion::GOOD
                    }
                    Err(sense) => check(sense),
                }
            }
            Command::ModeSelect(m) => self.mode_select(req, &m),
            Command::LogSense(l) => {
                let cdl = self.cdl_statistics();
                let provisioning = self.provisioning_resources();
                match scsi::log::log_sense(&l, cdl.as_ref(), provisioning.as_ref(), data_in) {
                    Ok(()) => {
                        truncate(data_in, start, l.allocation_length.into());
                        Completion::GOOD
                    }
                    Err(sense) => check(sense),
                }
            }
            Command::LogSelect(l) => match scsi::log::log_select(&l, self.log_pages()) {
                Ok(reset) => {
                    if reset {
                        self.reset_cdl_statistics();
                    }
                    Completion::GOOD
                }
                Err(sense) => check(sense),
            },
            // Stopping or ejecting the medium takes it from every initiator.
            Command::StartStopUnit(s) if !s.start && s.power_condition == 0 => self
                .privileged(req)
                .unwrap_or_else(|| self.start_stop_unit(&s)),
            Command::StartStopUnit(s) => self.start_stop_unit(&s),
            Command::Reserve => self.reservations.reserve(req.nexus),
            Command::Release => self.reservations.release(req.nexus),
            Command::PersistentReserveIn(p) => {
                let c = self.reservations.persistent_reserve_in(&p, data_in);
                truncate(data_in, start, p.allocation_length.into());
                c
            }
            Command::PersistentReserveOut(p) => self.persistent_reserve_out(req, &p),
            Command::PreventAllowMediumRemoval { prevent } => {
                let mut nexuses = self.prevent_removal.lock();
                if prevent {
                    nexuses.insert(req.nexus.id);
                } else {
                    nexuses.remove(&req.nexus.id);
                }
                Completion::GOOD
            }
            Command::ReportSupportedOperationCodes(r) => {
                match rsoc::report_supported_operation_codes(&r, self.features(), data_in) {
                    Ok(()) => {
                        truncate(data_in, start, r.allocation_length);
                        Completion::GOOD
                    }
                    Err(sense) => check(sense),
                }
            }
            Command::ReadDefectData(r) => {
                // A RAM or file store has no defects: both lists are valid and empty, in the
                // requested format (SBC-4 tables 45 and 48: PLISTV, GLISTV, DEFECT LIST FORMAT).
                let flags =
                    u8::from(r.req_plist) << 4 | u8::from(r.req_glist) << 3 | r.defect_list_format;
                let header: &[u8] = if r.long {
                    &[0, flags, 0, 0, 0, 0, 0, 0]
                } else {
                    &[0, flags, 0, 0]
                };
                data_in.extend_from_slice(header);
                truncate(data_in, start, r.allocation_length);
                Completion::GOOD
            }
            Command::ReportSupportedTaskManagementFunctions {
                repd,
                allocation_length,
            } => {
                rsoc::report_supported_task_management_functions(repd, data_in);
                truncate(data_in, start, allocation_length);
                Completion::GOOD
            }
            Command::Sanitize(s) => self.sanitize(&s, req),
            Command::FormatUnit(f) => self.format_unit(&f, req),
            Command::WriteAtomic {
                rw,
                atomic_boundary,
            } => self.write_atomic(info, &rw, atomic_boundary, req.data_out),
            Command::ReadLong {
                lba,
                byte_transfer_length,
            } => self.read_long(info, lba, byte_transfer_length, data_in),
            Command::WriteLong {
                lba,
                byte_transfer_length,
                wr_uncor,
            } => self.write_long(info, lba, byte_transfer_length, wr_uncor, req.data_out),
            Command::ReportTimestamp { allocation_length } => {
                self.clock.report(data_in);
                truncate(data_in, start, allocation_length);
                Completion::GOOD
            }
            Command::SetTimestamp {
                parameter_list_length,
            } => self.set_timestamp(req, parameter_list_length),
            Command::ExtendedCopy(x) => self.extended_copy(req, &x),
            Command::ReceiveCopyResults(r) => self.receive_copy_results(req, &r, data_in),
            Command::ReportTargetPortGroups {
                extended,
                allocation_length,
            } => {
                let group = TargetPortGroup {
                    id: crate::TARGET_PORT_GROUP,
                    state: self.config.alua_state,
                    relative_target_port: crate::RELATIVE_TARGET_PORT,
                };
                alua::report_target_port_groups(&[group], extended, data_in);
                truncate(data_in, start, allocation_length);
                Completion::GOOD
            }
        }
    }

    /// INQUIRY: standard data or one VPD page (SPC-5 §6.7).
    fn inquiry(&self, i: &Inquiry, data_in: &mut Vec<u8>, start: usize) -> Completion {
        let p = self.inquiry.peripheral;
        if !i.evpd {
            self.inquiry.encode(data_in);
        } else {
            match i.page_code {
                vpd::SUPPORTED_VPD_PAGES => inquiry::supported_vpd_pages(data_in, p),
                vpd::UNIT_SERIAL_NUMBER => inquiry::unit_serial_number(data_in, p, &self.serial),
                vpd::DEVICE_IDENTIFICATION => {
                    inquiry::device_identification(data_in, p, &self.identifiers)
                }
                vpd::EXTENDED_INQUIRY_DATA => inquiry::extended_inquiry_data(data_in, p),
                vpd::THIRD_PARTY_COPY => scsi::third_party_copy::third_party_copy_vpd(
                    data_in,
                    p,
                    self.max_segment_bytes(),
                ),
                vpd::BLOCK_LIMITS => inquiry::block_limits(data_in, p, &self.block_limits),
                vpd::BLOCK_DEVICE_CHARACTERISTICS => inquiry::block_device_characteristics(
                    data_in,
                    p,
                    self.config.medium_rotation_rate,
                    inquiry::AfterSanitize::ReadsSucceed,
                ),
                vpd::LOGICAL_BLOCK_PROVISIONING => provisioning::logical_block_provisioning(
                    data_in,
                    p,
                    self.config
                        .thin_provisioning
                        .then(|| self.threshold_exponent()),
                ),
                _ => return check(Sense::invalid_field_in_cdb(2, None)),
            }
        }
        truncate(data_in, start, i.allocation_length.into());
        Completion::GOOD
    }

    /// MODE SELECT (SPC-5 §6.12): validate the whole list, apply it, and tell the other
    /// nexuses with MODE PARAMETERS CHANGED (SPC-5 §7.5.2).
    fn mode_select(&self, req: &Request, m: &ModeSelect) -> Completion {
        let len = usize::from(m.parameter_list_length);
        let Some(data) = req.data_out.get(..len) else {
            return check(Sense::new(
                SenseKey::IllegalRequest,
                Asc::PARAMETER_LIST_LENGTH_ERROR,
            ));
        };
        let mut mode = self.mode.lock();
        let saved = self.saved_mode.as_ref().map(|s| *s.lock());
        let ctx = ModeContext {
            current: &mode,
            default: &self.default_mode,
            saved: saved.as_ref(),
            write_protected: self.write_protected(),
            wce_changeable: self.config.write_cache_changeable,
            number_of_blocks: self.blocks,
            block_length: self.config.block_size,
        };
        let selected = match mode::mode_select(m, data, &ctx) {
            Ok(selected) => selected,
            Err(sense) => return check(sense),
        };
        let new = selected.parameters;
        // The write cache and software write protect apply to every initiator.
        let shared = |p: &ModeParameters| (p.wce, p.swp);
        let disruptive = shared(&new) != shared(&mode)
            || (selected.save && saved.is_some_and(|s| shared(&s) != shared(&new)));
        if disruptive {
            if let Some(denied) = self.privileged(req) {
                return denied;
            }
        }
        if selected.save {
            if let Err(e) = self.save_mode(&new) {
                return self.io_error(&e, SenseKey::MediumError, Asc::WRITE_ERROR, None);
            }
        }
        if new != *mode {
            self.apply_mode(&mut mode, new);
            drop(mode);
            self.unit_attentions
                .raise(Asc::MODE_PARAMETERS_CHANGED, Some(req.nexus.id));
        }
        Completion::GOOD
    }

    /// SET TIMESTAMP (SPC-5 §6.46): the other nexuses get TIMESTAMP CHANGED.
    fn set_timestamp(&self, req: &Request, parameter_list_length: u32) -> Completion {
        let data = req
            .data_out
            .get(..parameter_list_length as usize)
            .unwrap_or(req.data_out);
        match scsi::timestamp::decode_set(data) {
            Ok(ms) => {
                self.clock.set(ms);
                self.unit_attentions
                    .raise(Asc::TIMESTAMP_CHANGED, Some(req.nexus.id));
                Completion::GOOD
            }
            Err(sense) => check(sense),
        }
    }

    /// `None` when the command's nexus may disrupt other initiators, else the refusal: ACCESS
    /// DENIED - NO ACCESS RIGHTS (SPC-6: the initiator lacks the right to what it asked).
    fn privileged(&self, req: &Request) -> Option<Completion> {
        if req.nexus.privileged {
            return None;
        }
        tracing::warn!(
            initiator = %req.nexus.initiator_port,
            opcode = format_args!("{:02X}h", req.cdb.first().copied().unwrap_or(0)),
            "refused: the initiator is not privileged"
        );
        Some(check(Sense::new(
            SenseKey::IllegalRequest,
            Asc::ACCESS_DENIED_NO_ACCESS_RIGHTS,
        )))
    }

    /// MODE SELECT with SP = 1: the new values are the saved ones, in the file if there is one.
    fn save_mode(&self, new: &ModeParameters) -> std::io::Result<()> {
        if let Some(path) = &self.config.saved_mode_path {
            saved_mode::save(path, new)?;
        }
        if let Some(s) = &self.saved_mode {
            *s.lock() = *new;
        }
        Ok(())
    }

    /// START STOP UNIT (SBC-4 §5.31). A POWER CONDITION other than START_VALID only changes
    /// power state, which this device does not model; LOEJ needs removable medium whose
    /// removal no nexus prevents.
    fn start_stop_unit(&self, s: &StartStopUnit) -> Completion {
        if s.power_condition != 0 {
            return Completion::GOOD;
        }
        if s.loej && !self.inquiry.removable {
            return check(Sense::invalid_field_in_cdb(4, Some(1)));
        }
        // Removable medium: START without LOEJ would only spin the medium, which is not
        // modelled (tgt does the same; libiscsi's NoLoej test expects the unit to stay ready).
        if self.inquiry.removable && !s.loej {
            return Completion::GOOD;
        }
        if s.loej && !self.prevent_removal.lock().is_empty() {
            return check(Sense::new(
                SenseKey::IllegalRequest,
                Asc::MEDIUM_REMOVAL_PREVENTED,
            ));
        }
        if !s.start && !s.no_flush {
            if let Err(e) = self.store.flush() {
                return self.io_error(&e, SenseKey::MediumError, Asc::WRITE_ERROR, None);
            }
        }
        self.stopped.store(!s.start, Ordering::Relaxed);
        if s.loej {
            // START = 1 with LOEJ loads the medium, START = 0 ejects it (SBC-4 table 97).
            self.medium_present.store(s.start, Ordering::Relaxed);
        }
        Completion::GOOD
    }

    /// A store failure as MEDIUM ERROR (or HARDWARE ERROR when the request itself was bad).
    pub(crate) fn io_error(
        &self,
        e: &std::io::Error,
        key: SenseKey,
        asc: Asc,
        lba: Option<u64>,
    ) -> Completion {
        // The host sees only the sense; the operator needs the cause (ENOSPC, EIO, ...).
        tracing::error!(error = %e, ?key, ?asc, lba, "store I/O failed");
        let mut sense = if e.kind() == std::io::ErrorKind::InvalidInput {
            Sense::new(SenseKey::HardwareError, Asc::INTERNAL_TARGET_FAILURE)
        } else {
            Sense::new(key, asc)
        };
        sense.information = lba;
        Completion {
            status: Status::CheckCondition,
            sense: Some(sense),
        }
    }
}
