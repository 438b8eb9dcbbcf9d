//! The copy manager of a logical unit (SPC-4): EXTENDED COPY (LID1)/(LID4) with block to
//! block segments, within this logical unit or to and from any other the process serves, and
//! RECEIVE COPY RESULTS. A copy is a job of its command's task: one data-plane operation per
//! chunk of at most 1 MiB, never the whole range at once, so it stops between chunks when a
//! reset, a nexus loss or COPY OPERATION ABORT ends it.

use crate::copy_manager::{CopyManager, UnitView};
use crate::{Completion, Nexus};
use scsi::inquiry::DeviceIdentifiers;
use scsi::third_party_copy::{
    self as tpc, in_action, BlockToBlock, CopyList, CopyResult, CopyStatus, CscdDescriptor,
    ListIdUsage, ReceiveCopyResults,
};
use scsi::{Asc, Sense, SenseKey};
use std::collections::VecDeque;
use std::sync::Arc;
use store::{Done, Failure, Op, Source};

/// Bytes a copy moves per data-plane operation.
pub(crate) const CHUNK_BYTES: u64 = 1 << 20;

/// A copy whose list identifier the copy manager holds (LIST ID USAGE 00b/10b).
struct HeldList {
    nexus: u64,
    list_identifier: u32,
    /// `None` while the copy runs.
    result: Option<CopyResult>,
    /// A COPY OPERATION ABORT asked the running copy to stop at its next chunk.
    abort: bool,
}

/// The copies of one logical unit: results held for RECEIVE COPY RESULTS, and an epoch that
/// resets and nexus losses advance so that running copies stop.
#[derive(Default)]
pub(crate) struct CopyLists {
    held: VecDeque<HeldList>,
    epoch: u64,
}

impl CopyLists {
    /// A held copy `list_identifier` of `nexus` starts: OPERATION IN PROGRESS if one runs
    /// already; a finished one with that identifier is forgotten.
    pub(crate) fn begin(&mut self, nexus: u64, list_identifier: u32) -> Result<(), Completion> {
        let same = |h: &HeldList| h.nexus == nexus && h.list_identifier == list_identifier;
        if self.held.iter().any(|h| same(h) && h.result.is_none()) {
            return Err(Completion::check_condition(Sense::new(
                SenseKey::IllegalRequest,
                tpc::OPERATION_IN_PROGRESS,
            )));
        }
        self.held.retain(|h| !same(h));
        if self.held.len() >= tpc::MAX_HELD_LISTS {
            self.held.pop_front();
        }
        self.held.push_back(HeldList {
            nexus,
            list_identifier,
            result: None,
            abort: false,
        });
        Ok(())
    }

    /// The held copy finished with `result`.
    pub(crate) fn end(&mut self, nexus: u64, list_identifier: u32, result: CopyResult) {
        let running = self.held.iter_mut().find(|h| {
            h.nexus == nexus && h.list_identifier == list_identifier && h.result.is_none()
        });
        if let Some(h) = running {
            h.result = Some(result);
        }
    }

    /// Whether a reset since `epoch`, or a COPY OPERATION ABORT of held copy `list` of
    /// `nexus`, stopped a copy.
    fn stopped(&self, epoch: u64, nexus: u64, list: Option<u32>) -> bool {
        self.epoch != epoch
            || list.is_some_and(|id| {
                self.held.iter().any(|h| {
                    h.nexus == nexus && h.list_identifier == id && h.result.is_none() && h.abort
                })
            })
    }

    /// COPY OPERATION ABORT (SPC-4): the nexus's held copy with the LIST IDENTIFIER stops
    /// between chunks and ends as a reset would end it (COPY ABORTED; its status: aborted). A
    /// list identifier the nexus does not hold is an invalid field, as in FreeBSD CTL.
    pub(crate) fn abort(&mut self, nexus: u64, list_identifier: u32) -> Completion {
        let mut found = false;
        for h in self
            .held
            .iter_mut()
            .filter(|h| h.nexus == nexus && h.list_identifier == list_identifier)
        {
            h.abort = true;
            found = true;
        }
        if found {
            Completion::GOOD
        } else {
            Completion::check_condition(Sense::invalid_field_in_cdb(2, None))
        }
    }

    /// Stop the copies running now at their next chunk.
    pub(crate) fn abort_running(&mut self) {
        self.epoch += 1;
    }

    /// The held results of a nexus that is gone go with it.
    pub(crate) fn forget(&mut self, nexus: u64) {
        self.held.retain(|h| h.nexus != nexus || h.result.is_none());
    }

    /// RECEIVE COPY RESULTS (SPC-4), appended to `data_in` (not truncated). A completed copy's
    /// results are given once: reporting them lets the list identifier go, as CTL does.
    pub(crate) fn receive(
        &mut self,
        nexus: u64,
        r: &ReceiveCopyResults,
        descriptor_sense: bool,
        max_segment_bytes: u32,
        data_in: &mut Vec<u8>,
    ) -> Completion {
        let start = data_in.len();
        let unknown = || Completion::check_condition(Sense::invalid_field_in_cdb(2, None));
        match r.service_action {
            in_action::RECEIVE_COPY_OPERATING_PARAMETERS => {
                tpc::operating_parameters(max_segment_bytes, data_in);
                return Completion::GOOD;
            }
            in_action::REPORT_ALL_ROD_TOKENS => {
                tpc::all_rod_tokens(data_in);
                return Completion::GOOD;
            }
            _ => {}
        }
        let found = self
            .held
            .iter()
            .position(|h| h.nexus == nexus && h.list_identifier == r.list_identifier);
        let Some(i) = found else {
            return unknown();
        };
        // RECEIVE COPY DATA (LID1)/(LID4): block to block segments hold no data, so the
        // answer is the header with no held data; unlike the status, asking for it does not
        // let the list identifier go.
        match (r.service_action, &self.held[i].result) {
            (in_action::RECEIVE_COPY_DATA_LID1, _) => {
                tpc::copy_data_lid1(data_in);
                return Completion::GOOD;
            }
            (in_action::RECEIVE_COPY_DATA_LID4, Some(result)) => {
                tpc::copy_data_lid4(result, descriptor_sense, data_in);
                return Completion::GOOD;
            }
            (in_action::RECEIVE_COPY_DATA_LID4, None) => {
                tpc::copy_data_lid4(&CopyResult::new(0), descriptor_sense, data_in);
                data_in[start + 5] = 0x11; // in progress, foreground
                return Completion::GOOD;
            }
            _ => {}
        }
        let Some(result) = &self.held[i].result else {
            // Still running (another connection of the nexus asked): in progress, nothing
            // counted yet.
            let running = CopyResult::new(0);
            match r.service_action {
                in_action::RECEIVE_COPY_STATUS_LID1 => {
                    tpc::copy_status_lid1(&running, data_in);
                    data_in[start + 4] = 0x00; // COPY MANAGER STATUS: in progress
                }
                in_action::RECEIVE_COPY_STATUS_LID4 | in_action::RECEIVE_ROD_TOKEN_INFORMATION => {
                    tpc::copy_status_lid4(&running, descriptor_sense, data_in);
                    data_in[start + 5] = 0x11; // in progress, foreground
                }
                _ => return unknown(),
            }
            return Completion::GOOD;
        };
        match r.service_action {
            in_action::RECEIVE_COPY_STATUS_LID1 => tpc::copy_status_lid1(result, data_in),
            in_action::RECEIVE_COPY_STATUS_LID4 => {
                tpc::copy_status_lid4(result, descriptor_sense, data_in)
            }
            in_action::RECEIVE_ROD_TOKEN_INFORMATION => {
                tpc::rod_token_information(result, descriptor_sense, data_in)
            }
            _ => tpc::failure_details(result, descriptor_sense, data_in),
        }
        self.held.remove(i);
        Completion::GOOD
    }
}

/// The status a finished copy answers with.
pub(crate) fn completion_of(r: &CopyResult) -> Completion {
    match &r.sense {
        Some(sense) => Completion::check_condition(sense.clone()),
        None => Completion::GOOD,
    }
}

/// The logical unit a copy addresses, as a copy needs it.
pub(crate) struct Here<'a> {
    pub(crate) identifiers: &'a DeviceIdentifiers,
    pub(crate) block_size: u32,
    pub(crate) blocks: u64,
    pub(crate) write_protected: bool,
    pub(crate) write_cache: bool,
    pub(crate) manager: Option<&'a CopyManager>,
}

impl Here<'_> {
    /// Whether a CSCD descriptor names this unit (binary NAA or EUI-64, logical unit
    /// association, from VPD 83h).
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

    /// What one block to block segment may move here (NUMBER OF BLOCKS is 16 bits).
    pub(crate) fn max_segment_bytes(&self) -> u32 {
        u32::from(u16::MAX).saturating_mul(self.block_size)
    }
}

/// One end of a copy.
#[derive(Clone)]
pub(crate) enum Endpoint {
    This,
    Other(Arc<UnitView>),
}

impl Endpoint {
    fn source(&self) -> Source {
        match self {
            Endpoint::This => Source::This,
            Endpoint::Other(v) => Source::Other(v.plane.clone()),
        }
    }

    fn block_size(&self, here: &Here) -> u32 {
        match self {
            Endpoint::This => here.block_size,
            Endpoint::Other(v) => v.block_size,
        }
    }

    fn blocks(&self, here: &Here) -> u64 {
        match self {
            Endpoint::This => here.blocks,
            Endpoint::Other(v) => v.blocks(),
        }
    }
}

/// The blocks a chunk of a copy is about to change: revoke tokens over them and forget
/// uncorrectable marks, on whichever unit they are.
pub(crate) struct Changes {
    pub(crate) unit: Endpoint,
    pub(crate) lba: u64,
    pub(crate) blocks: u64,
}

/// Bytes to move from a list of source extents (or zeros) into a list of destination extents,
/// chunk by chunk.
struct Mover {
    source: Endpoint,
    /// `None`: zeros (the block device zero ROD token).
    from: Option<VecDeque<(u64, u64)>>,
    destination: Endpoint,
    to: VecDeque<(u64, u64)>,
    /// Overlapping ranges of one store copy from the end, so no byte is read after it was
    /// overwritten.
    backwards: bool,
    /// Bytes per destination block (the transfer count's unit).
    destination_block: u64,
    /// Chunks handed out so far.
    chunks: u64,
}

impl Mover {
    /// The next chunk's operation, the destination blocks it changes (lba, count), and whether
    /// it is the last of its destination extent; `None` when done or the source has nothing
    /// more to give (a token that represents less than the destination ranges: the rest stays
    /// as it was).
    fn next(&mut self, durable: bool) -> Option<(Op, u64, u64, bool)> {
        let &(to, to_left) = self.to.front().filter(|e| e.1 > 0)?;
        let mut n = to_left.min(CHUNK_BYTES);
        let from = match self.from.as_ref() {
            None => None,
            Some(from) => {
                let &(at, left) = from.front().filter(|e| e.1 > 0)?;
                n = n.min(left);
                Some((at, left))
            }
        };
        // Backwards: the chunk at the end of the (single) extent pair.
        let (src_at, dst_at) = if self.backwards {
            (from.map(|(at, left)| at + left - n), to + to_left - n)
        } else {
            (from.map(|(at, _)| at), to)
        };
        let op = match src_at {
            Some(at) => Op::Copy {
                source: self.source.source(),
                destination: self.destination.source(),
                from: at,
                to: dst_at,
                len: n,
                durable,
            },
            None => Op::WriteSame {
                offset: dst_at,
                len: n,
                block: self.destination_block as u32,
                zeros: true,
                durable,
            },
        };
        let backwards = self.backwards;
        let advance = |e: &mut (u64, u64)| {
            if !backwards {
                e.0 += n;
            }
            e.1 -= n;
        };
        let mut last = false;
        if let Some(front) = self.to.front_mut() {
            advance(front);
            if front.1 == 0 {
                self.to.pop_front();
                last = true;
            }
        }
        if let Some(from) = self.from.as_mut() {
            if let Some(front) = from.front_mut() {
                advance(front);
                if front.1 == 0 {
                    from.pop_front();
                }
            }
        }
        self.chunks += 1;
        let bs = self.destination_block;
        Some((op, dst_at / bs, n / bs, last))
    }
}

/// What a copy's task does next.
pub(crate) enum Next {
    /// Run this chunk; the blocks it changes.
    Chunk(Op, Changes),
    /// The copy ended with this status.
    Done(Completion),
}

/// What produces the copy's segments.
enum Work {
    /// EXTENDED COPY: block to block segments, each checked as it starts.
    List {
        list: CopyList,
        nexus: Nexus,
        next: usize,
    },
    /// WRITE USING TOKEN: one pass over the destination ranges (each a "segment").
    Token,
}

/// One copy (EXTENDED COPY or WRITE USING TOKEN) under way.
pub(crate) struct CopyJob {
    work: Work,
    mover: Option<Mover>,
    epoch: u64,
    nexus: u64,
    /// The held list identifier, for COPY OPERATION ABORT and the held result.
    held: Option<u32>,
    /// The list identifier under which the result is kept (WRITE USING TOKEN's always is).
    list_identifier: Option<u32>,
    result: CopyResult,
    /// The segment being moved, for the sense data of a failure.
    segment: Option<BlockToBlock>,
    /// The chunk in flight is the last of its destination extent: one more segment is done
    /// when it is.
    ends_extent: bool,
}

/// COPY ABORTED with the segment pointer sense-key specific data (SPC-4) at the descriptor
/// being processed: SD = 0, FIELD POINTER relative to the parameter list.
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
        ili: false,
    }
}

impl CopyJob {
    /// EXTENDED COPY (LID1)/(LID4) (SPC-4 §6.4, §6.5) from `nexus` with parameter list `p`,
    /// already checked to be PARAMETER LIST LENGTH long. A list of no bytes copies nothing
    /// (`Ok(None)`). The whole list is checked before any segment runs; segments then run in
    /// order, and the first that fails ends the copy with COPY ABORTED (or DATA PROTECT for a
    /// write-protected destination).
    pub(crate) fn extended_copy(
        nexus: &Nexus,
        service_action: u8,
        p: &[u8],
        copies: &mut CopyLists,
    ) -> Result<Option<CopyJob>, Completion> {
        if p.is_empty() {
            return Ok(None);
        }
        let lid4 = service_action == tpc::out_action::EXTENDED_COPY_LID4;
        let list = tpc::parse_copy_list(lid4, p).map_err(Completion::check_condition)?;
        let held = (list.usage == ListIdUsage::Held).then_some(list.list_identifier);
        if let Some(id) = held {
            copies.begin(nexus.id, id)?;
        }
        Ok(Some(CopyJob {
            work: Work::List {
                list,
                nexus: nexus.clone(),
                next: 0,
            },
            mover: None,
            epoch: copies.epoch,
            nexus: nexus.id,
            held,
            list_identifier: held,
            result: CopyResult::new(service_action),
            segment: None,
            ends_extent: false,
        }))
    }

    /// WRITE USING TOKEN's copy of `from` (extents of `source`, or zeros) into `to` (extents
    /// of this unit), its result kept under `list_identifier`.
    pub(crate) fn token(
        nexus: u64,
        list_identifier: u32,
        source: Endpoint,
        from: Option<Vec<(u64, u64)>>,
        to: Vec<(u64, u64)>,
        block_size: u32,
        copies: &CopyLists,
    ) -> CopyJob {
        CopyJob {
            work: Work::Token,
            mover: Some(Mover {
                source,
                from: from.map(VecDeque::from),
                destination: Endpoint::This,
                to: VecDeque::from(to),
                backwards: false,
                destination_block: block_size.into(),
                chunks: 0,
            }),
            epoch: copies.epoch,
            nexus,
            held: None,
            list_identifier: Some(list_identifier),
            result: CopyResult::new(tpc::out_action::WRITE_USING_TOKEN),
            segment: None,
            ends_extent: false,
        }
    }

    /// The copy's result is kept for RECEIVE COPY RESULTS under this identifier, if any.
    pub(crate) fn kept_as(&self) -> Option<(u64, u32)> {
        self.list_identifier.map(|id| (self.nexus, id))
    }

    pub(crate) fn result(&self) -> &CopyResult {
        &self.result
    }

    /// Its result as task management left it: aborted, with COPY ABORTED at the segment it
    /// was moving.
    pub(crate) fn aborted(&self) -> CopyResult {
        CopyResult {
            status: CopyStatus::Aborted,
            sense: Some(self.abort_sense()),
            ..self.result.clone()
        }
    }

    /// Ends the copy with `sense`; `aborted`: a reset or COPY OPERATION ABORT stopped it.
    fn fail(&mut self, sense: Sense, aborted: bool) -> Next {
        self.result.status = if aborted {
            CopyStatus::Aborted
        } else {
            CopyStatus::Failed
        };
        self.result.sense = Some(sense);
        Next::Done(completion_of(&self.result))
    }

    fn abort_sense(&self) -> Sense {
        match &self.segment {
            Some(seg) => copy_aborted(Asc::NO_ADDITIONAL_SENSE, seg),
            None => Sense::new(SenseKey::CopyAborted, Asc::NO_ADDITIONAL_SENSE),
        }
    }

    /// The next chunk, or the end.
    pub(crate) fn next(&mut self, here: &Here, copies: &CopyLists) -> Next {
        if copies.stopped(self.epoch, self.nexus, self.held) {
            let sense = self.abort_sense();
            return self.fail(sense, true);
        }
        let durable = !here.write_cache;
        loop {
            if let Some(mover) = self.mover.as_mut() {
                if let Some((op, lba, blocks, last)) = mover.next(durable) {
                    self.ends_extent = last;
                    let unit = mover.destination.clone();
                    return Next::Chunk(op, Changes { unit, lba, blocks });
                }
                // A segment of no blocks is done without a chunk.
                let empty = mover.chunks == 0;
                self.mover = None;
                if empty && matches!(self.work, Work::List { .. }) {
                    self.result.segments_processed += 1;
                }
            }
            let Work::List { list, nexus, next } = &mut self.work else {
                return Next::Done(completion_of(&self.result));
            };
            let Some(seg) = list.segments.get(*next).copied() else {
                return Next::Done(completion_of(&self.result));
            };
            *next += 1;
            self.segment = Some(seg);
            match segment(here, list, nexus, &seg) {
                Ok(mover) => self.mover = Some(mover),
                Err(sense) => return self.fail(sense, false),
            }
        }
    }

    /// The chunk in flight ended with `done`; it moved `blocks` destination blocks.
    pub(crate) fn chunk_done(&mut self, done: &Done, blocks: u64) -> Option<Next> {
        match done {
            Done::Failed(f) => {
                let source = matches!(f, Failure::Read { .. });
                tracing::error!(error = %f.error(), source, "copy: store I/O failed");
                let asc = if source {
                    Asc::UNRECOVERED_READ_ERROR
                } else {
                    Asc::WRITE_ERROR
                };
                let sense = match (&self.segment, &self.work) {
                    (Some(seg), Work::List { .. }) => copy_aborted(asc, seg),
                    (_, Work::Token) if !source => {
                        Sense::new(SenseKey::MediumError, Asc::WRITE_ERROR)
                    }
                    _ => Sense::new(SenseKey::CopyAborted, asc),
                };
                Some(self.fail(sense, false))
            }
            _ => {
                self.result.transfer_count += blocks;
                if std::mem::take(&mut self.ends_extent) {
                    self.result.segments_processed += 1;
                }
                None
            }
        }
    }
}

/// The copy target CSCD descriptor `index` of `list` names.
fn resolve(
    here: &Here,
    list: &CopyList,
    index: u16,
    seg: &BlockToBlock,
) -> Result<Endpoint, Sense> {
    let unreachable = || copy_aborted(tpc::UNREACHABLE_COPY_TARGET, seg);
    let cscd = list.cscds.get(usize::from(index)).ok_or_else(unreachable)?;
    let unit = if here.designated_by(cscd) {
        Endpoint::This
    } else {
        let manager = here.manager.ok_or_else(unreachable)?;
        Endpoint::Other(manager.find(cscd).ok_or_else(unreachable)?)
    };
    if cscd.block_length != unit.block_size(here) {
        return Err(copy_aborted(tpc::INCORRECT_COPY_TARGET_DEVICE_TYPE, seg));
    }
    Ok(unit)
}

/// One block to block segment: resolve both ends, check them as a READ and a WRITE from
/// `nexus` would be checked, then the mover of its bytes.
fn segment(
    here: &Here,
    list: &CopyList,
    nexus: &Nexus,
    seg: &BlockToBlock,
) -> Result<Mover, Sense> {
    let source = resolve(here, list, seg.source, seg)?;
    let destination = resolve(here, list, seg.destination, seg)?;
    // The addressed unit passed its own checks; another one is checked here as if the nexus
    // had sent it a READ(16) or WRITE(16).
    let reachable = |e: &Endpoint, write: bool| match e {
        Endpoint::This => true,
        Endpoint::Other(v) => v.reachable(nexus, write),
    };
    if !reachable(&source, false) || !reachable(&destination, true) {
        return Err(copy_aborted(tpc::COPY_TARGET_DEVICE_NOT_REACHABLE, seg));
    }
    let protected = match &destination {
        Endpoint::This => here.write_protected,
        Endpoint::Other(v) => v.write_protected(),
    };
    if protected {
        return Err(Sense::new(SenseKey::DataProtect, Asc::WRITE_PROTECTED));
    }
    let (src_bs, dst_bs) = (
        u64::from(source.block_size(here)),
        u64::from(destination.block_size(here)),
    );
    let unit = if seg.destination_count {
        dst_bs
    } else {
        src_bs
    };
    let bytes = u64::from(seg.blocks) * unit;
    if bytes % src_bs != 0 || bytes % dst_bs != 0 {
        return Err(copy_aborted(tpc::UNEXPECTED_INEXACT_SEGMENT, seg));
    }
    let in_range = |e: &Endpoint, lba: u64, bs: u64| {
        lba.checked_add(bytes / bs)
            .is_some_and(|end| end <= e.blocks(here))
    };
    if !in_range(&source, seg.source_lba, src_bs)
        || !in_range(&destination, seg.destination_lba, dst_bs)
    {
        return Err(copy_aborted(Asc::NO_ADDITIONAL_SENSE, seg));
    }
    let from = seg.source_lba * src_bs;
    let to = seg.destination_lba * dst_bs;
    let same = match (&source, &destination) {
        (Endpoint::This, Endpoint::This) => true,
        (Endpoint::Other(a), Endpoint::Other(b)) => Arc::ptr_eq(a, b),
        _ => false,
    };
    Ok(Mover {
        source,
        from: Some(VecDeque::from([(from, bytes)])),
        destination,
        to: VecDeque::from([(to, bytes)]),
        backwards: same && to > from && to < from + bytes,
        destination_block: dst_bs,
        chunks: 0,
    })
}
