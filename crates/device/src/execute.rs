//! What each command does once it may run (SPC-5 §6, SBC-4 §5): the dispatch of the command
//! set. A command either ends here (its data appended to the caller's buffer) or asks the data
//! plane for an operation, whose result [`LogicalUnit::io_result`] turns into its status or
//! its next operation. The parts it works on are the core's values; the medium commands'
//! checks and operations are in `block.rs`.

use crate::block::{self, Plan};
use crate::event::TaskId;
use crate::extended_copy::{CopyJob, Endpoint, Next};
use crate::logical_unit::{check, truncate, LogicalUnit, Ran};
use crate::mode_state::Medium;
use crate::read_write_long;
use crate::sanitize::{self, Started};
use crate::task::After;
use crate::{Completion, Nexus, Ns};
use scsi::alua;
use scsi::command::{Command, Inquiry, StartStopUnit};
use scsi::inquiry::{self, vpd};
use scsi::third_party_copy::{self as tpc, ExtendedCopy};
use scsi::{provisioning, rsoc, Asc, Sense, SenseKey};
use store::{Done, KeptFile, Op};

impl LogicalUnit {
    /// The nexus of a task, as the commands that need more than its id see it; a task the
    /// unit does not know (or whose nexus is gone) is the target's fault: the command ends
    /// with HARDWARE ERROR, INTERNAL TARGET FAILURE.
    pub(crate) fn task_nexus(&self, id: TaskId) -> Result<Nexus, Ran> {
        let nexus = self.tasks_owner(id).and_then(|(nexus, _)| {
            let task = self.task(id)?;
            Some(Nexus {
                id: nexus,
                initiator_port: self.unit_attentions.port_of(nexus)?.to_owned(),
                class: task.class,
                privileged: task.privileged,
            })
        });
        nexus.ok_or_else(|| {
            Ran::Done(check(Sense::new(
                SenseKey::HardwareError,
                Asc::INTERNAL_TARGET_FAILURE,
            )))
        })
    }

    /// Runs a task's command. `data_out`: its parameter list, or nothing for commands whose
    /// Data-Out the data plane moves (their length is the task's).
    pub(crate) fn run(
        &mut self,
        now: Ns,
        id: TaskId,
        data_out: &[u8],
        data_in: &mut Vec<u8>,
    ) -> Ran {
        let Some((nexus, task)) = self.task_with_nexus(id) else {
            return Ran::Done(check(Sense::new(
                SenseKey::HardwareError,
                Asc::INTERNAL_TARGET_FAILURE,
            )));
        };
        let (info, cmd, have, buffer, privileged) = (
            task.info,
            task.cmd,
            task.data_out_len(),
            task.buffer,
            task.privileged,
        );
        let start = data_in.len();
        let done = |c| Ran::Done(c);
        let planned = |lu: &Self, plan: Result<Plan, Sense>| lu.planned(plan);
        match cmd {
            // Its flags make the prechecks report a stopped unit or a missing medium.
            Command::TestUnitReady => done(Completion::GOOD),
            Command::RequestSense {
                desc,
                allocation_length,
            } => {
                let sense = self.request_sense(id);
                sense.write(desc, data_in);
                truncate(data_in, start, allocation_length.into());
                done(Completion::GOOD)
            }
            Command::Inquiry(i) => done(self.inquiry(&i, data_in, start)),
            Command::ReadCapacity10 => {
                let last = u32::try_from(self.blocks() - 1).unwrap_or(u32::MAX);
                data_in.extend_from_slice(&last.to_be_bytes());
                data_in.extend_from_slice(&self.block_size().to_be_bytes());
                done(Completion::GOOD)
            }
            Command::ReadCapacity16 { allocation_length } => {
                // READ CAPACITY (16) parameter data (SBC-4 table 66).
                let mut p = [0u8; 32];
                p[0..8].copy_from_slice(&(self.blocks() - 1).to_be_bytes());
                p[8..12].copy_from_slice(&self.block_size().to_be_bytes());
                p[13] = self.config().physical_block_exponent & 0x0F; // LBPPBE
                if self.config().thin_provisioning {
                    p[14] = 0x80 | 0x40; // LBPME, LBPRZ: deallocated blocks read as zeros
                }
                data_in.extend_from_slice(&p);
                truncate(data_in, start, allocation_length);
                done(Completion::GOOD)
            }
            Command::ReportLuns { .. } => {
                // Handled by the target, which knows every LUN; a LU alone reports itself.
                scsi::report_luns::report_luns(std::iter::once(self.config().lun), data_in);
                done(Completion::GOOD)
            }
            Command::Read(rw) => {
                match self.uncorrectable.first(rw.lba, rw.transfer_length.into()) {
                    Some(bad) => done(read_write_long::unrecovered(bad)),
                    None => planned(self, self.geometry().read(info, &rw)),
                }
            }
            Command::Write(_) | Command::WriteAndVerify(_) => {
                planned(self, self.geometry().write_command(info, &cmd, have))
            }
            Command::WriteAtomic {
                rw,
                atomic_boundary,
            } => planned(
                self,
                self.geometry()
                    .write_atomic(info, &rw, atomic_boundary, have),
            ),
            Command::OrWrite(rw) => planned(self, self.geometry().or_write(info, &rw, have)),
            Command::CompareAndWrite(rw) => {
                planned(self, self.geometry().compare_and_write(&rw, have, buffer))
            }
            Command::WriteSame(w) => {
                planned(self, self.geometry().write_same(info, &w, have, buffer))
            }
            Command::Unmap(u) => match self.geometry().unmap(&u, data_out) {
                Ok((plan, changed)) => {
                    for (lba, blocks) in changed {
                        self.written(lba, blocks);
                    }
                    self.planned(Ok(plan))
                }
                Err(sense) => done(check(sense)),
            },
            Command::Verify(v) => match self
                .uncorrectable
                .first(v.lba, v.verification_length.into())
            {
                Some(bad) => done(read_write_long::unrecovered(bad)),
                None => planned(self, self.geometry().verify(info, &v, have)),
            },
            Command::SynchronizeCache(r) => planned(self, self.geometry().synchronize_cache(&r)),
            Command::PreFetch(r) => planned(self, self.geometry().pre_fetch(&r)),
            Command::GetLbaStatus {
                lba,
                allocation_length,
            } => match self.geometry().lba_status(lba, allocation_length) {
                Err(sense) => done(check(sense)),
                Ok((wanted, Some(op))) => Ran::Io(
                    op,
                    After::LbaStatus {
                        lba,
                        wanted,
                        allocation_length,
                    },
                ),
                Ok((wanted, None)) => {
                    self.geometry().lba_status_data(lba, wanted, None, data_in);
                    truncate(data_in, start, allocation_length);
                    done(Completion::GOOD)
                }
            },
            Command::ReadLong {
                lba,
                byte_transfer_length,
            } => planned(
                self,
                self.geometry().read_long(info, lba, byte_transfer_length),
            ),
            Command::WriteLong {
                lba,
                byte_transfer_length,
                wr_uncor,
            } => {
                if self.write_protected() {
                    return done(check(Sense::new(
                        SenseKey::DataProtect,
                        Asc::WRITE_PROTECTED,
                    )));
                }
                if wr_uncor {
                    if lba >= self.blocks() {
                        return done(check(Sense::lba_out_of_range()));
                    }
                    // Tokens that represent the block are revoked: its data is lost to
                    // readers.
                    self.written(lba, 1);
                    self.uncorrectable.mark(lba);
                    return done(Completion::GOOD);
                }
                planned(
                    self,
                    self.geometry()
                        .write_long(info, lba, byte_transfer_length, have),
                )
            }
            Command::FormatUnit(f) => {
                if self.write_protected() {
                    return done(check(Sense::new(
                        SenseKey::DataProtect,
                        Asc::WRITE_PROTECTED,
                    )));
                }
                let len = f.header_length() as usize;
                if len > 0 {
                    let Some(header) = data_out.get(..len) else {
                        return done(check(Sense::new(
                            SenseKey::IllegalRequest,
                            Asc::PARAMETER_LIST_LENGTH_ERROR,
                        )));
                    };
                    if let Err(sense) = scsi::sanitize::check_format_header(header, f.longlist) {
                        return done(check(sense));
                    }
                }
                self.written(0, self.blocks());
                match self.geometry().format() {
                    Plan::Io { op, .. } => Ran::Io(op, After::Format),
                    Plan::Good => done(Completion::GOOD),
                }
            }
            Command::ModeSense(m) => {
                let medium = self.mode_medium();
                match self.mode.sense(&m, &medium, data_in) {
                    Ok(()) => {
                        truncate(data_in, start, m.allocation_length.into());
                        done(Completion::GOOD)
                    }
                    Err(sense) => done(check(sense)),
                }
            }
            Command::ModeSelect(m) => self.mode_select(now, id, &m, data_out, 0),
            Command::LogSense(l) => {
                if self.config().thin_provisioning && self.usage_known() {
                    // The Logical Block Provisioning page counts what the store holds now.
                    return Ran::Io(Op::Usage, After::LogSense(l));
                }
                done(self.log_sense(&l, data_in, start))
            }
            Command::LogSelect(l) => match scsi::log::log_select(&l, self.log_pages()) {
                Ok(reset) => {
                    if let (true, Some(q)) = (reset, &mut self.queue) {
                        q.reset_cdl_statistics();
                    }
                    done(Completion::GOOD)
                }
                Err(sense) => done(check(sense)),
            },
            // Stopping or ejecting the medium takes it from every initiator.
            Command::StartStopUnit(s) if !s.start && s.power_condition == 0 && !privileged => {
                done(self.refuse_unprivileged(nexus, "START STOP UNIT"))
            }
            Command::StartStopUnit(s) => self.start_stop_unit(&s),
            Command::Reserve | Command::Release => {
                self.reserve_or_release(id, matches!(cmd, Command::Reserve), 0)
            }
            Command::PersistentReserveIn(p) => {
                let c = self.reservations.persistent_reserve_in(&p, data_in);
                truncate(data_in, start, p.allocation_length.into());
                done(c)
            }
            Command::PersistentReserveOut(p) => {
                let n = match self.task_nexus(id) {
                    Ok(n) => n,
                    Err(ran) => return ran,
                };
                match self.reservations.prepare_out(&n, &p, data_out) {
                    Err(c) => done(c),
                    Ok(mut prepared) if prepared.share.is_some() => {
                        let share = prepared.share.take().expect("checked");
                        let n = usize::try_from(p.parameter_list_length).unwrap_or(usize::MAX);
                        let list = data_out[..n.min(data_out.len())].to_vec();
                        Ran::Io(
                            share,
                            After::SharedReservations {
                                prepared: Box::new(prepared),
                                cmd: p,
                                list,
                                attempts: 0,
                            },
                        )
                    }
                    Ok(mut prepared) => match prepared.keep.take() {
                        Some(contents) => Ran::Io(
                            Op::Keep {
                                file: KeptFile::Reservations,
                                contents,
                            },
                            After::Reservations(Box::new(prepared)),
                        ),
                        None => done(self.reservations_changed(now, nexus, prepared)),
                    },
                }
            }
            Command::PreventAllowMediumRemoval { prevent } => {
                if prevent {
                    self.prevent_removal.insert(nexus);
                } else {
                    self.prevent_removal.remove(&nexus);
                }
                done(Completion::GOOD)
            }
            Command::ReportSupportedOperationCodes(r) => {
                match rsoc::report_supported_operation_codes(&r, self.features(), data_in) {
                    Ok(()) => {
                        truncate(data_in, start, r.allocation_length);
                        done(Completion::GOOD)
                    }
                    Err(sense) => done(check(sense)),
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
                done(Completion::GOOD)
            }
            Command::ReportSupportedTaskManagementFunctions {
                repd,
                allocation_length,
            } => {
                rsoc::report_supported_task_management_functions(repd, data_in);
                truncate(data_in, start, allocation_length);
                done(Completion::GOOD)
            }
            Command::Sanitize(s) => {
                let medium = sanitize::Medium {
                    blocks: self.blocks(),
                    block_size: self.block_size(),
                    write_protected: self.write_protected(),
                    write_cache: self.write_cache(),
                    unmap_granularity: self.block_limits().optimal_unmap_granularity,
                };
                let running = matches!(self.sanitizer.phase(), sanitize::Phase::Running { .. });
                let started = self.sanitizer.start(now, &s, data_out, &medium, id);
                if !running && matches!(self.sanitizer.phase(), sanitize::Phase::Running { .. }) {
                    // Every block is rewritten: blocks WRITE LONG marked uncorrectable read
                    // again, and ROD tokens over the old data are revoked.
                    self.written(0, self.blocks());
                    self.pump_background(now);
                }
                match started {
                    Started::Done(c) => done(c),
                    Started::Wait => Ran::Sanitizing,
                }
            }
            Command::ReportTimestamp { allocation_length } => {
                self.clock.report(data_in);
                truncate(data_in, start, allocation_length);
                done(Completion::GOOD)
            }
            Command::SetTimestamp {
                parameter_list_length,
            } => {
                let data = data_out
                    .get(..parameter_list_length as usize)
                    .unwrap_or(data_out);
                match scsi::timestamp::decode_set(data) {
                    Ok(ms) => {
                        self.clock.set(ms);
                        self.unit_attentions
                            .raise(Asc::TIMESTAMP_CHANGED, Some(nexus));
                        done(Completion::GOOD)
                    }
                    Err(sense) => done(check(sense)),
                }
            }
            Command::SetTargetPortGroups {
                parameter_list_length,
            } => {
                let list = data_out
                    .get(..parameter_list_length as usize)
                    .unwrap_or(data_out);
                self.set_target_port_groups(nexus, list)
            }
            Command::ExtendedCopy(x) => self.extended_copy(now, id, &x, data_out),
            Command::ReceiveCopyResults(r) => {
                let descriptor = self.descriptor_sense();
                let max = self.here().max_segment_bytes();
                let c = self.copies.receive(nexus, &r, descriptor, max, data_in);
                if c == Completion::GOOD {
                    truncate(data_in, start, r.allocation_length);
                }
                done(c)
            }
            Command::ReportTargetPortGroups {
                extended,
                allocation_length,
            } => {
                let groups = self.target_port_groups();
                alua::report_target_port_groups(&groups, extended, data_in);
                truncate(data_in, start, allocation_length);
                done(Completion::GOOD)
            }
        }
    }

    /// A medium command's plan as what the task does: GOOD at once, or its operation (the
    /// blocks it changes first revoke tokens and forget uncorrectable marks).
    fn planned(&self, plan: Result<Plan, Sense>) -> Ran {
        match plan {
            Err(sense) => Ran::Done(check(sense)),
            Ok(Plan::Good) => Ran::Done(Completion::GOOD),
            Ok(Plan::Io {
                op,
                lba,
                writes,
                changes,
            }) => {
                if let Some((lba, blocks)) = changes {
                    self.written(lba, blocks);
                }
                Ran::Io(op, After::Medium { lba, writes })
            }
        }
    }

    /// What a task's data-plane operation came to: its status, or its next operation.
    /// A medium command's, the common case, is worked out here; the rest out of line, so
    /// that the READ/WRITE path stays small in the instruction cache.
    pub(crate) fn io_result(
        &mut self,
        now: Ns,
        id: TaskId,
        after: After,
        done: Done,
        data_in: &mut Vec<u8>,
    ) -> Ran {
        match after {
            After::Medium { lba, writes } => self.medium_result(&done, lba, writes),
            after => self.other_io_result(now, id, after, done, data_in),
        }
    }

    /// [`Self::io_result`] of a medium command.
    fn medium_result(&self, done: &Done, lba: Option<u64>, writes: bool) -> Ran {
        let c = block::completion(done, lba, writes);
        if writes && c == Completion::GOOD && self.provisioning.enabled() {
            return Ran::Io(Op::Usage, After::Thresholds);
        }
        Ran::Done(c)
    }

    /// [`Self::io_result`] of every other command.
    #[inline(never)]
    fn other_io_result(
        &mut self,
        now: Ns,
        id: TaskId,
        after: After,
        done: Done,
        data_in: &mut Vec<u8>,
    ) -> Ran {
        let nexus = self.tasks_owner(id).map_or(0, |(n, _)| n);
        match after {
            After::Medium { lba, writes } => self.medium_result(&done, lba, writes),
            After::Thresholds => {
                if let Done::Usage(Some(bytes)) = done {
                    self.usage = Some(bytes);
                    let thresholds = self.mode.thresholds();
                    if self.provisioning.crossed(thresholds, bytes) {
                        // SBC-4 §4.7.3.7: for every nexus, or with SITUA for the one whose
                        // command crossed it.
                        let asc = Asc::THIN_PROVISIONING_SOFT_THRESHOLD_REACHED;
                        if thresholds.is_some_and(|t| t.situa) {
                            self.unit_attentions.raise_for(nexus, asc);
                        } else {
                            self.unit_attentions.raise(asc, None);
                        }
                    }
                }
                Ran::Done(Completion::GOOD)
            }
            After::Format => Ran::Done(match done {
                Done::Failed(f) => {
                    tracing::error!(error = %f.error(), "FORMAT UNIT failed");
                    check(Sense::new(
                        SenseKey::MediumError,
                        Asc::MEDIUM_FORMAT_CORRUPTED,
                    ))
                }
                _ => Completion::GOOD,
            }),
            After::LbaStatus {
                lba,
                wanted,
                allocation_length,
            } => match done {
                Done::Extents(runs) => {
                    let start = data_in.len();
                    self.geometry()
                        .lba_status_data(lba, wanted, Some(&runs), data_in);
                    truncate(data_in, start, allocation_length);
                    Ran::Done(Completion::GOOD)
                }
                other => Ran::Done(block::completion(&other, Some(lba), false)),
            },
            After::LogSense(l) => {
                if let Done::Usage(usage) = done {
                    self.usage = usage.or(self.usage);
                }
                let start = data_in.len();
                Ran::Done(self.log_sense(&l, data_in, start))
            }
            After::Stop(s) => match done {
                Done::Failed(f) => Ran::Done(block::store_failure(
                    f.error(),
                    SenseKey::MediumError,
                    Asc::WRITE_ERROR,
                    None,
                )),
                _ => Ran::Done(self.stop_or_eject(&s)),
            },
            After::ModeSave(parameters) => match done {
                Done::Failed(f) => Ran::Done(block::store_failure(
                    f.error(),
                    SenseKey::MediumError,
                    Asc::WRITE_ERROR,
                    None,
                )),
                _ => {
                    self.mode.save(*parameters);
                    self.mode_selected(now, nexus, *parameters)
                }
            },
            After::ArmThresholds => {
                if let Done::Usage(usage) = done {
                    self.usage = usage.or(self.usage);
                }
                let current = self.mode.thresholds();
                self.provisioning.arm(current, self.usage);
                Ran::Done(Completion::GOOD)
            }
            After::Reservations(prepared) => match done {
                Done::Failed(f) => Ran::Done(block::store_failure(
                    f.error(),
                    SenseKey::MediumError,
                    Asc::WRITE_ERROR,
                    None,
                )),
                _ => Ran::Done(self.reservations_changed(now, nexus, *prepared)),
            },
            After::SharedReservations {
                prepared,
                cmd,
                list,
                attempts,
            } => match done {
                Done::Shared(version) => {
                    self.reservations.shared_as(version);
                    // The other gateways hear of it before the command completes.
                    self.announcements
                        .push(crate::PeerEvent::Reservations(prepared.effects.clone()));
                    Ran::Done(self.reservations_changed(now, nexus, *prepared))
                }
                Done::Stale(state) => self.reservations_stale(id, &state, cmd, list, attempts),
                other => Ran::Done(block::share_failed(&other)),
            },
            After::SharedReserve {
                reserve,
                holder,
                attempts,
            } => self.reserve_or_release_written(id, reserve, holder, attempts, done),
            After::Copy(mut job, blocks) => match job.chunk_done(&done, blocks) {
                Some(Next::Done(c)) => Ran::Done(self.copy_ended(&job, c)),
                _ => self.copy_next(job),
            },
            After::SharedMode(select) => self.mode_select_shared(now, id, done, *select),
            After::Prefer(group) => self.preferred_chosen(group, &done),
        }
    }

    /// REQUEST SENSE (SPC-5 §6.39): a pending unit attention (reported and cleared), the
    /// sanitize's progress or failure, a missing medium or stopped unit, or NO SENSE.
    fn request_sense(&mut self, id: TaskId) -> Sense {
        let nexus = self.task_nexus(id).ok();
        let pending = nexus.as_ref().and_then(|n| self.unit_attentions.take(n));
        match pending {
            Some(asc) => Sense::new(SenseKey::UnitAttention, asc),
            None => match self.sanitizer.phase().sense() {
                Some(s) => s,
                None if !self.medium_present => {
                    Sense::new(SenseKey::NotReady, Asc::MEDIUM_NOT_PRESENT)
                }
                None if self.stopped => Sense::new(
                    SenseKey::NotReady,
                    Asc::LOGICAL_UNIT_NOT_READY_INITIALIZING_REQUIRED,
                ),
                None => Sense::new(SenseKey::NoSense, Asc::NO_ADDITIONAL_SENSE),
            },
        }
    }

    /// INQUIRY: standard data or one VPD page (SPC-5 §6.7).
    fn inquiry(&self, i: &Inquiry, data_in: &mut Vec<u8>, start: usize) -> Completion {
        let standard = self.standard_inquiry();
        let p = standard.peripheral;
        if !i.evpd {
            standard.encode(data_in);
        } else {
            match i.page_code {
                vpd::SUPPORTED_VPD_PAGES => inquiry::supported_vpd_pages(data_in, p),
                vpd::UNIT_SERIAL_NUMBER => inquiry::unit_serial_number(data_in, p, self.serial()),
                vpd::DEVICE_IDENTIFICATION => {
                    inquiry::device_identification(data_in, p, self.identifiers())
                }
                vpd::EXTENDED_INQUIRY_DATA => inquiry::extended_inquiry_data(data_in, p),
                vpd::THIRD_PARTY_COPY => scsi::third_party_copy::third_party_copy_vpd(
                    data_in,
                    p,
                    self.here().max_segment_bytes(),
                ),
                vpd::BLOCK_LIMITS => inquiry::block_limits(data_in, p, self.block_limits()),
                vpd::BLOCK_DEVICE_CHARACTERISTICS => inquiry::block_device_characteristics(
                    data_in,
                    p,
                    self.config().medium_rotation_rate,
                    inquiry::AfterSanitize::ReadsSucceed,
                ),
                vpd::LOGICAL_BLOCK_PROVISIONING => provisioning::logical_block_provisioning(
                    data_in,
                    p,
                    self.config()
                        .thin_provisioning
                        .then(|| self.provisioning.exponent()),
                ),
                _ => return check(Sense::invalid_field_in_cdb(2, None)),
            }
        }
        truncate(data_in, start, i.allocation_length.into());
        Completion::GOOD
    }

    pub(crate) fn mode_medium(&self) -> Medium {
        Medium {
            write_protected: self.write_protected(),
            blocks: self.blocks(),
            block_size: self.block_size(),
        }
    }

    /// MODE SELECT's values are in force: the other nexuses learn it with MODE PARAMETERS
    /// CHANGED (SPC-5 §7.5.2); thresholds it enabled start from the store's usage now.
    pub(crate) fn mode_selected(
        &mut self,
        now: Ns,
        nexus: u64,
        new: scsi::mode::ModeParameters,
    ) -> Ran {
        let armed_before = self.provisioning.enabled();
        if self.apply_mode(now, new) {
            self.unit_attentions
                .raise(Asc::MODE_PARAMETERS_CHANGED, Some(nexus));
        }
        if !armed_before && self.provisioning.enabled() && self.usage_known() {
            return Ran::Io(Op::Usage, After::ArmThresholds);
        }
        Ran::Done(Completion::GOOD)
    }

    /// Whether the store can tell its usage (thin provisioning's resources).
    fn usage_known(&self) -> bool {
        self.usage.is_some()
    }

    /// The optional log pages this logical unit has.
    fn log_pages(&self) -> scsi::log::Pages {
        scsi::log::Pages {
            cdl: self.has_device_queue(),
            provisioning: self.config().thin_provisioning && self.usage_known(),
        }
    }

    /// LOG SENSE (SPC-5 §6.9) with the counters as they are now.
    fn log_sense(
        &self,
        l: &scsi::command::LogSense,
        data_in: &mut Vec<u8>,
        start: usize,
    ) -> Completion {
        let cdl = self.queue.as_ref().map(|q| q.cdl_statistics());
        let provisioning = self
            .usage
            .filter(|_| self.config().thin_provisioning)
            .map(|bytes| self.provisioning.resources(bytes));
        match scsi::log::log_sense(l, cdl.as_ref(), provisioning.as_ref(), data_in) {
            Ok(()) => {
                truncate(data_in, start, l.allocation_length.into());
                Completion::GOOD
            }
            Err(sense) => check(sense),
        }
    }

    /// ACCESS DENIED - NO ACCESS RIGHTS (SPC-6: the initiator lacks the right to what it
    /// asked), for a command that would disrupt other initiators from a nexus that may not.
    pub(crate) fn refuse_unprivileged(&self, nexus: u64, command: &str) -> Completion {
        tracing::warn!(
            initiator = self.unit_attentions.port_of(nexus).unwrap_or("?"),
            command,
            "refused: the initiator is not privileged"
        );
        check(Sense::new(
            SenseKey::IllegalRequest,
            Asc::ACCESS_DENIED_NO_ACCESS_RIGHTS,
        ))
    }

    /// START STOP UNIT (SBC-4 §5.31). A POWER CONDITION other than START_VALID only changes
    /// power state, which this device does not model; LOEJ needs removable medium whose
    /// removal no nexus prevents; stopping without NO_FLUSH flushes the store first.
    fn start_stop_unit(&mut self, s: &StartStopUnit) -> Ran {
        if s.power_condition != 0 {
            return Ran::Done(Completion::GOOD);
        }
        let removable = self.standard_inquiry().removable;
        if s.loej && !removable {
            return Ran::Done(check(Sense::invalid_field_in_cdb(4, Some(1))));
        }
        // Removable medium: START without LOEJ would only spin the medium, which is not
        // modelled (tgt does the same; libiscsi's NoLoej test expects the unit to stay ready).
        if removable && !s.loej {
            return Ran::Done(Completion::GOOD);
        }
        if s.loej && !self.prevent_removal.is_empty() {
            return Ran::Done(check(Sense::new(
                SenseKey::IllegalRequest,
                Asc::MEDIUM_REMOVAL_PREVENTED,
            )));
        }
        if !s.start && !s.no_flush {
            return Ran::Io(Op::Flush, After::Stop(*s));
        }
        Ran::Done(self.stop_or_eject(s))
    }

    fn stop_or_eject(&mut self, s: &StartStopUnit) -> Completion {
        self.stopped = !s.start;
        if s.loej {
            // START = 1 with LOEJ loads the medium, START = 0 ejects it (SBC-4 table 97).
            self.medium_present = s.start;
        }
        self.publish();
        Completion::GOOD
    }

    /// A PERSISTENT RESERVE OUT is in force: the unit attentions it establishes for the
    /// other nexuses and, for PREEMPT AND ABORT, the preempted nexuses' tasks aborted (SPC-4
    /// §5.13.11.2.6; TAS = 0, so they end without status).
    fn reservations_changed(
        &mut self,
        now: Ns,
        me: u64,
        prepared: crate::reservations::Prepared,
    ) -> Completion {
        let effects = self.reservations.commit(prepared);
        self.reservation_effects(now, &effects, Some(me));
        Completion::GOOD
    }

    /// Another gateway changed the shared persistent reservations after this PERSISTENT
    /// RESERVE OUT was prepared (its write found another version): the state as it is now
    /// becomes current and the command is prepared on it again, which may now refuse it;
    /// too many races lost end it ([`Self::race_lost`]).
    fn reservations_stale(
        &mut self,
        id: TaskId,
        state: &store::SharedState,
        cmd: scsi::command::PersistentReserveOut,
        list: Vec<u8>,
        attempts: u32,
    ) -> Ran {
        let attempts = match self.reservations_race_lost(state, attempts, "PERSISTENT RESERVE OUT")
        {
            Ok(attempts) => attempts,
            Err(ran) => return ran,
        };
        let n = match self.task_nexus(id) {
            Ok(n) => n,
            Err(ran) => return ran,
        };
        match self.reservations.prepare_out(&n, &cmd, &list) {
            Err(c) => Ran::Done(c),
            Ok(mut prepared) => match prepared.share.take() {
                Some(share) => Ran::Io(
                    share,
                    After::SharedReservations {
                        prepared: Box::new(prepared),
                        cmd,
                        list,
                        attempts,
                    },
                ),
                None => Ran::Done(check(Sense::new(
                    SenseKey::HardwareError,
                    Asc::INTERNAL_TARGET_FAILURE,
                ))),
            },
        }
    }

    /// What a PERSISTENT RESERVE OUT asks of the nexuses here (this server's target port),
    /// whether it came through this server (`me`, its nexus, spared) or another gateway.
    pub(crate) fn reservation_effects(
        &mut self,
        now: Ns,
        effects: &crate::persistent_reservation::Effects,
        me: Option<u64>,
    ) {
        let here = self.reservations.target_port();
        let except = me.unwrap_or(u64::MAX);
        for (whom, asc) in &effects.unit_attentions {
            if whom.reaches(here) {
                self.unit_attentions
                    .raise_for_port(&whom.initiator_port, *asc, except);
            }
        }
        let preempted: Vec<u64> = effects
            .aborted
            .iter()
            .filter(|whom| whom.reaches(here))
            .flat_map(|whom| self.unit_attentions.nexuses_of(&whom.initiator_port))
            .filter(|&n| Some(n) != me)
            .collect();
        if !preempted.is_empty() {
            let _lost = self.abort_where(now, |n| preempted.contains(&n));
        }
        self.publish();
    }

    /// Operation code 83h: EXTENDED COPY (LID1)/(LID4), COPY OPERATION ABORT, POPULATE TOKEN,
    /// WRITE USING TOKEN.
    fn extended_copy(&mut self, now: Ns, id: TaskId, x: &ExtendedCopy, data_out: &[u8]) -> Ran {
        let Some(p) = data_out.get(..x.parameter_list_length as usize) else {
            return Ran::Done(check(Sense::new(
                SenseKey::IllegalRequest,
                Asc::PARAMETER_LIST_LENGTH_ERROR,
            )));
        };
        let nexus = match self.task_nexus(id) {
            Ok(n) => n,
            Err(ran) => return ran,
        };
        let job = match x.service_action {
            tpc::out_action::COPY_OPERATION_ABORT => {
                return Ran::Done(self.copies.abort(nexus.id, x.list_identifier))
            }
            tpc::out_action::POPULATE_TOKEN => {
                let (here, copies) = self.copy_parts();
                let c = crate::rod_token::populate_token(now, &here, copies, nexus.id, x, p);
                return Ran::Done(c);
            }
            tpc::out_action::WRITE_USING_TOKEN => {
                let (here, copies) = self.copy_parts();
                crate::rod_token::write_using_token(now, &here, copies, &nexus, x, p).map(Some)
            }
            sa => CopyJob::extended_copy(&nexus, sa, p, &mut self.copies),
        };
        match job {
            Err(c) => Ran::Done(c),
            Ok(None) => Ran::Done(Completion::GOOD),
            Ok(Some(job)) => self.copy_next(Box::new(job)),
        }
    }

    /// A copy's next chunk, or its end.
    fn copy_next(&mut self, mut job: Box<CopyJob>) -> Ran {
        let (here, copies) = self.copy_parts();
        let next = job.next(&here, copies);
        match next {
            Next::Done(c) => Ran::Done(self.copy_ended(&job, c)),
            Next::Chunk(op, changes) => {
                match &changes.unit {
                    Endpoint::This => self.written(changes.lba, changes.blocks),
                    Endpoint::Other(view) => {
                        view.uncorrectable.clear(changes.lba, changes.blocks);
                        if let Some((manager, _)) = self.copy_manager() {
                            manager.written(view, changes.lba, changes.blocks);
                        }
                    }
                }
                Ran::Io(op, After::Copy(job, changes.blocks))
            }
        }
    }

    /// Task management aborted a copy's task between chunks: its held results say so.
    pub(crate) fn copy_aborted(&mut self, job: &CopyJob) {
        if let Some((nexus, list)) = job.kept_as() {
            self.copies.end(nexus, list, job.aborted());
        }
    }

    /// A copy ended with `c`: its result is kept for RECEIVE COPY RESULTS where its list
    /// identifier asks.
    fn copy_ended(&mut self, job: &CopyJob, c: Completion) -> Completion {
        if let Some((nexus, list)) = job.kept_as() {
            self.copies.end(nexus, list, job.result().clone());
        }
        c
    }
}

impl LogicalUnit {
    /// The task's command and state.
    pub(crate) fn task(&self, id: TaskId) -> Option<&crate::task::Task> {
        self.task_ref(id)
    }
}
