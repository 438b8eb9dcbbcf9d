//! The copy manager of a logical unit (SPC-4): EXTENDED COPY (LID1)/(LID4) with block
//! to block segments, within this logical unit or to and from any other the process serves,
//! and RECEIVE COPY RESULTS. A copy moves through the stores in chunks, never the whole
//! range at once, and stops between chunks when a reset or nexus loss aborts it.

use crate::logical_unit::{check, truncate, LogicalUnit};
use crate::{Completion, Nexus, Request};
use parking_lot::Mutex;
use scsi::third_party_copy::{
    self as tpc, in_action, BlockToBlock, CopyList, CopyResult, CopyStatus, CscdDescriptor,
    ExtendedCopy, ListIdUsage, ReceiveCopyResults,
};
use scsi::{Asc, Sense, SenseKey};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Bytes a copy moves per store read and write.
pub(crate) const CHUNK_BYTES: usize = 1 << 20;

/// A copy whose list identifier the copy manager holds (LIST ID USAGE 00b/10b).
struct HeldList {
    nexus: u64,
    list_identifier: u32,
    /// `None` while the copy runs.
    result: Option<CopyResult>,
}

/// The copies of one logical unit: results held for RECEIVE COPY RESULTS, and an epoch
/// that resets and nexus losses advance so that running copies stop.
#[derive(Default)]
pub(crate) struct CopyLists {
    held: Mutex<VecDeque<HeldList>>,
    epoch: AtomicU64,
}

impl CopyLists {
    /// A held copy `list_identifier` of `nexus` starts: OPERATION IN PROGRESS if one runs
    /// already; a finished one with that identifier is forgotten.
    pub(crate) fn begin(&self, nexus: u64, list_identifier: u32) -> Result<(), Completion> {
        let mut lists = self.held.lock();
        let same = |h: &HeldList| h.nexus == nexus && h.list_identifier == list_identifier;
        if lists.iter().any(|h| same(h) && h.result.is_none()) {
            return Err(check(Sense::new(
                SenseKey::IllegalRequest,
                tpc::OPERATION_IN_PROGRESS,
            )));
        }
        lists.retain(|h| !same(h));
        if lists.len() >= tpc::MAX_HELD_LISTS {
            lists.pop_front();
        }
        lists.push_back(HeldList {
            nexus,
            list_identifier,
            result: None,
        });
        Ok(())
    }

    /// The held copy finished with `result`.
    pub(crate) fn end(&self, nexus: u64, list_identifier: u32, result: CopyResult) {
        let mut lists = self.held.lock();
        let running = lists.iter_mut().find(|h| {
            h.nexus == nexus && h.list_identifier == list_identifier && h.result.is_none()
        });
        if let Some(h) = running {
            h.result = Some(result);
        }
    }

    /// The epoch a copy starting now compares with between chunks.
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Relaxed)
    }

    /// Whether a reset since `epoch` stopped the copies.
    pub(crate) fn aborted_since(&self, epoch: u64) -> bool {
        self.epoch.load(Ordering::Relaxed) != epoch
    }

    /// Stop the copies running now at their next chunk.
    pub(crate) fn abort_running(&self) {
        self.epoch.fetch_add(1, Ordering::Relaxed);
    }

    /// The held results of a nexus that is gone go with it.
    pub(crate) fn forget(&self, nexus: u64) {
        self.held
            .lock()
            .retain(|h| h.nexus != nexus || h.result.is_none());
    }
}

/// A copy target a CSCD descriptor resolved to.
enum Unit {
    This,
    Other(Arc<LogicalUnit>),
}

/// How a segment failed: the sense the command ends with, and whether a reset or nexus loss
/// stopped it.
struct SegmentError {
    sense: Sense,
    aborted: bool,
}

impl From<Sense> for SegmentError {
    fn from(sense: Sense) -> Self {
        SegmentError {
            sense,
            aborted: false,
        }
    }
}

/// The status a finished copy answers with.
pub(crate) fn completion_of(r: &CopyResult) -> Completion {
    match &r.sense {
        Some(sense) => check(sense.clone()),
        None => Completion::GOOD,
    }
}

impl Unit {
    fn get<'a>(&'a self, this: &'a LogicalUnit) -> &'a LogicalUnit {
        match self {
            Unit::This => this,
            Unit::Other(lu) => lu,
        }
    }
}

/// COPY ABORTED with the segment pointer sense-key specific data (SPC-4) at the
/// descriptor being processed: SD = 0, FIELD POINTER relative to the parameter list.
fn copy_aborted(asc: Asc, seg: &BlockToBlock) -> Sense {
    Sense {
        key: SenseKey::CopyAborted,
        asc,
        field: Some(scsi::sense::FieldPointer {
            in_cdb: false,
            byte: u16::try_from(seg.offset).unwrap_or(u16::MAX),
            bit: None,
        }),
        information: None,
        progress: None,
    }
}

impl LogicalUnit {
    /// Whether a CSCD descriptor names this logical unit: its NAA or EUI-64 designator
    /// (binary code set, logical unit association) from VPD 83h.
    pub(crate) fn designated_by(&self, c: &CscdDescriptor) -> bool {
        if c.code_set != 0x01 || c.association != 0 {
            return false;
        }
        match c.designator_type {
            0x03 => c.designator == self.identifiers.naa,
            0x02 => c.designator == self.identifiers.eui64,
            _ => false,
        }
    }

    /// `blocks` from `lba` are about to change: ROD tokens that represent them are revoked.
    pub(crate) fn written(&self, lba: u64, blocks: u64) {
        if let Some(m) = self.copy_manager.get() {
            m.written(self, lba, blocks);
        }
    }

    /// What one block to block segment may move here (NUMBER OF BLOCKS is 16 bits).
    pub(crate) fn max_segment_bytes(&self) -> u32 {
        u32::from(u16::MAX).saturating_mul(self.block_size())
    }

    /// Operation code 83h: EXTENDED COPY (LID1)/(LID4) here, the token commands in
    /// `rod_token.rs`.
    pub(crate) fn extended_copy(&self, req: &Request, x: &ExtendedCopy) -> Completion {
        let len = x.parameter_list_length as usize;
        let Some(p) = req.data_out.get(..len) else {
            return check(Sense::new(
                SenseKey::IllegalRequest,
                Asc::PARAMETER_LIST_LENGTH_ERROR,
            ));
        };
        match x.service_action {
            tpc::out_action::POPULATE_TOKEN => self.populate_token(req, x, p),
            tpc::out_action::WRITE_USING_TOKEN => self.write_using_token(req, x, p),
            sa => self.copy_list(req, sa, p),
        }
    }

    /// EXTENDED COPY (LID1)/(LID4) (SPC-4 §6.4, §6.5). A PARAMETER LIST LENGTH of 0 copies
    /// nothing. The whole list is checked before any segment runs; segments then run in
    /// order, and the first that fails ends the copy with COPY ABORTED (or DATA PROTECT for
    /// a write-protected destination).
    fn copy_list(&self, req: &Request, service_action: u8, p: &[u8]) -> Completion {
        if p.is_empty() {
            return Completion::GOOD;
        }
        let lid4 = service_action == tpc::out_action::EXTENDED_COPY_LID4;
        let list = match tpc::parse_copy_list(lid4, p) {
            Ok(l) => l,
            Err(sense) => return check(sense),
        };
        let held = list.usage == ListIdUsage::Held;
        if held {
            if let Err(busy) = self.copies.begin(req.nexus.id, list.list_identifier) {
                return busy;
            }
        }
        let result = self.run_copy(req.nexus, &list, service_action);
        let completion = completion_of(&result);
        if held {
            self.copies.end(req.nexus.id, list.list_identifier, result);
        }
        completion
    }

    /// Run every segment of `list` for `nexus`.
    fn run_copy(&self, nexus: &Nexus, list: &CopyList, service_action: u8) -> CopyResult {
        let epoch = self.copies.epoch();
        let mut result = CopyResult::new(service_action);
        for seg in &list.segments {
            if let Err(e) = self.copy_segment(nexus, list, seg, epoch, &mut result) {
                result.status = if e.aborted {
                    CopyStatus::Aborted
                } else {
                    CopyStatus::Failed
                };
                result.sense = Some(e.sense);
                break;
            }
            result.segments_processed += 1;
        }
        result
    }

    /// The copy target CSCD descriptor `index` of `list` names.
    fn resolve(&self, list: &CopyList, index: u16, seg: &BlockToBlock) -> Result<Unit, Sense> {
        let unreachable = || copy_aborted(tpc::UNREACHABLE_COPY_TARGET, seg);
        let cscd = list.cscds.get(usize::from(index)).ok_or_else(unreachable)?;
        let unit = if self.designated_by(cscd) {
            Unit::This
        } else {
            let manager = self.copy_manager.get().ok_or_else(unreachable)?;
            Unit::Other(manager.find(cscd).ok_or_else(unreachable)?)
        };
        if cscd.block_length != unit.get(self).block_size() {
            return Err(copy_aborted(tpc::INCORRECT_COPY_TARGET_DEVICE_TYPE, seg));
        }
        Ok(unit)
    }

    /// One block to block segment: resolve both ends, check them as a READ and a WRITE from
    /// `nexus` would be checked, then copy in chunks.
    fn copy_segment(
        &self,
        nexus: &Nexus,
        list: &CopyList,
        seg: &BlockToBlock,
        epoch: u64,
        result: &mut CopyResult,
    ) -> Result<(), SegmentError> {
        let src_unit = self.resolve(list, seg.source, seg)?;
        let dst_unit = self.resolve(list, seg.destination, seg)?;
        let (src, dst) = (src_unit.get(self), dst_unit.get(self));
        // The addressed unit passed its own checks; another one is checked here as if the
        // nexus had sent it a READ(16) or WRITE(16).
        let reachable = |lu: &LogicalUnit, opcode: u8| {
            std::ptr::eq(lu, self)
                || (lu.medium_ready()
                    && !lu.reservations.conflict(
                        nexus,
                        scsi::table::lookup(opcode, None),
                        &[opcode],
                    ))
        };
        if !reachable(src, 0x88) || !reachable(dst, 0x8A) {
            return Err(copy_aborted(tpc::COPY_TARGET_DEVICE_NOT_REACHABLE, seg).into());
        }
        if dst.write_protected() {
            return Err(Sense::new(SenseKey::DataProtect, Asc::WRITE_PROTECTED).into());
        }
        let (src_bs, dst_bs) = (u64::from(src.block_size()), u64::from(dst.block_size()));
        let unit = if seg.destination_count {
            dst_bs
        } else {
            src_bs
        };
        let bytes = u64::from(seg.blocks) * unit;
        if bytes % src_bs != 0 || bytes % dst_bs != 0 {
            return Err(copy_aborted(tpc::UNEXPECTED_INEXACT_SEGMENT, seg).into());
        }
        let in_range = |lu: &LogicalUnit, lba: u64, bs: u64| {
            lba.checked_add(bytes / bs)
                .is_some_and(|end| end <= lu.blocks())
        };
        if !in_range(src, seg.source_lba, src_bs) || !in_range(dst, seg.destination_lba, dst_bs) {
            return Err(copy_aborted(Asc::NO_ADDITIONAL_SENSE, seg).into());
        }
        dst.written(seg.destination_lba, bytes / dst_bs);
        let from = seg.source_lba * src_bs;
        let to = seg.destination_lba * dst_bs;
        // Overlapping ranges of one store copy from the end, so no byte is read after it
        // was overwritten.
        let backwards = std::ptr::eq(src, dst) && to > from && to < from + bytes;
        let mut buf = vec![0u8; CHUNK_BYTES.min(bytes as usize)];
        let mut done = 0u64;
        while done < bytes {
            if self.copies.aborted_since(epoch) {
                return Err(SegmentError {
                    sense: copy_aborted(Asc::NO_ADDITIONAL_SENSE, seg),
                    aborted: true,
                });
            }
            let n = (bytes - done).min(CHUNK_BYTES as u64);
            let at = if backwards { bytes - done - n } else { done };
            let chunk = &mut buf[..n as usize];
            if let Err(e) = src.store.read_at(from + at, chunk) {
                tracing::error!(error = %e, "copy: source store read failed");
                return Err(copy_aborted(Asc::UNRECOVERED_READ_ERROR, seg).into());
            }
            if let Err(e) = dst.store.write_at(to + at, chunk) {
                tracing::error!(error = %e, "copy: destination store write failed");
                return Err(copy_aborted(Asc::WRITE_ERROR, seg).into());
            }
            done += n;
            result.transfer_count += n / dst_bs;
        }
        Ok(())
    }

    /// RECEIVE COPY RESULTS (SPC-4). A completed copy's results are given once:
    /// reporting them lets the list identifier go, as CTL does.
    pub(crate) fn receive_copy_results(
        &self,
        req: &Request,
        r: &ReceiveCopyResults,
        data_in: &mut Vec<u8>,
    ) -> Completion {
        let start = data_in.len();
        if r.service_action == in_action::RECEIVE_COPY_OPERATING_PARAMETERS {
            tpc::operating_parameters(self.max_segment_bytes(), data_in);
            truncate(data_in, start, r.allocation_length);
            return Completion::GOOD;
        }
        let mut lists = self.copies.held.lock();
        let found = lists
            .iter()
            .position(|h| h.nexus == req.nexus.id && h.list_identifier == r.list_identifier);
        let Some(i) = found else {
            return check(Sense::invalid_field_in_cdb(2, None));
        };
        let descriptor = self.descriptor_sense();
        let Some(result) = &lists[i].result else {
            // Still running (another connection of the nexus asked): in progress, nothing
            // counted yet.
            let running = CopyResult::new(0);
            match r.service_action {
                in_action::RECEIVE_COPY_STATUS_LID1 => {
                    tpc::copy_status_lid1(&running, data_in);
                    data_in[start + 4] = 0x00; // COPY MANAGER STATUS: in progress
                }
                in_action::RECEIVE_COPY_STATUS_LID4 | in_action::RECEIVE_ROD_TOKEN_INFORMATION => {
                    tpc::copy_status_lid4(&running, descriptor, data_in);
                    data_in[start + 5] = 0x11; // in progress, foreground
                }
                _ => return check(Sense::invalid_field_in_cdb(2, None)),
            }
            truncate(data_in, start, r.allocation_length);
            return Completion::GOOD;
        };
        match r.service_action {
            in_action::RECEIVE_COPY_STATUS_LID1 => tpc::copy_status_lid1(result, data_in),
            in_action::RECEIVE_COPY_STATUS_LID4 => {
                tpc::copy_status_lid4(result, descriptor, data_in)
            }
            in_action::RECEIVE_ROD_TOKEN_INFORMATION => {
                tpc::rod_token_information(result, descriptor, data_in)
            }
            _ => tpc::failure_details(result, descriptor, data_in),
        }
        lists.remove(i);
        truncate(data_in, start, r.allocation_length);
        Completion::GOOD
    }
}
