//! Token-based copy offload (SBC-4, the ODX model): POPULATE TOKEN makes a ROD
//! token that represents ranges of this logical unit, WRITE USING TOKEN writes what a token
//! represents into ranges of this (or any other of the process's) logical unit, and RECEIVE
//! ROD TOKEN INFORMATION returns the token. Tokens are access upon reference: the data is
//! read when used, and a write to the represented blocks first revokes the token.

use crate::extended_copy::{completion_of, CHUNK_BYTES};
use crate::logical_unit::{check, LogicalUnit};
use crate::{Completion, Request};
use scsi::third_party_copy::{self as tpc, CopyResult, CscdDescriptor, ExtendedCopy, Range};
use scsi::{Asc, Sense, SenseKey};
use std::sync::Arc;

/// The byte extents of `ranges` on a unit of `block_size`.
fn extents(ranges: &[Range], block_size: u32) -> Vec<(u64, u64)> {
    let bs = u64::from(block_size);
    ranges
        .iter()
        .map(|r| (r.lba * bs, u64::from(r.blocks) * bs))
        .collect()
}

impl LogicalUnit {
    /// Every range inside the capacity, else LBA OUT OF RANGE (SBC-4).
    fn check_ranges(&self, ranges: &[Range]) -> Result<u64, Sense> {
        let mut blocks = 0u64;
        for r in ranges {
            match r.lba.checked_add(u64::from(r.blocks)) {
                Some(end) if end <= self.blocks() => blocks += u64::from(r.blocks),
                _ => return Err(Sense::lba_out_of_range()),
            }
        }
        Ok(blocks)
    }

    /// This logical unit as a CSCD descriptor names it (its NAA designator).
    fn own_cscd(&self) -> CscdDescriptor {
        CscdDescriptor {
            code_set: 0x01,
            designator_type: 0x03,
            association: 0,
            designator: self.identifiers.naa.to_vec(),
            block_length: self.block_size(),
        }
    }

    /// POPULATE TOKEN (SBC-4): the ranges are checked, the token is made and held
    /// under the CDB's LIST IDENTIFIER for RECEIVE ROD TOKEN INFORMATION.
    pub(crate) fn populate_token(&self, req: &Request, x: &ExtendedCopy, p: &[u8]) -> Completion {
        let pt = match tpc::parse_populate_token(p) {
            Ok(pt) => pt,
            Err(sense) => return check(sense),
        };
        let blocks = match self.check_ranges(&pt.ranges) {
            Ok(b) => b,
            Err(sense) => return check(sense),
        };
        let Some(manager) = self.copy_manager.get() else {
            // A logical unit outside any target (the simulator's) keeps no tokens.
            return check(Sense::invalid_command_operation_code());
        };
        if let Err(busy) = self.copies.begin(req.nexus.id, x.list_identifier) {
            return busy;
        }
        let timeout = match pt.inactivity_timeout {
            0 => tpc::DEFAULT_INACTIVITY_TIMEOUT,
            t => t,
        };
        let bytes = blocks * u64::from(self.block_size());
        let token = manager.create_token(self.own_cscd(), pt.ranges, bytes, timeout);
        let mut result = CopyResult::new(tpc::out_action::POPULATE_TOKEN);
        result.transfer_count = blocks;
        result.rod_token = Some(token);
        self.copies.end(req.nexus.id, x.list_identifier, result);
        Completion::GOOD
    }

    /// WRITE USING TOKEN (SBC-4): the token's data from OFFSET INTO ROD fills the
    /// ranges in order, in chunks; a token that represents less fills less (the transfer
    /// count says how much). The block device zero token writes zeros.
    pub(crate) fn write_using_token(
        &self,
        req: &Request,
        x: &ExtendedCopy,
        p: &[u8],
    ) -> Completion {
        let wut = match tpc::parse_write_using_token(p) {
            Ok(w) => w,
            Err(sense) => return check(sense),
        };
        if self.write_protected() {
            return check(Sense::new(SenseKey::DataProtect, Asc::WRITE_PROTECTED));
        }
        if let Err(sense) = self.check_ranges(&wut.ranges) {
            return check(sense);
        }
        let rod_type = match tpc::token_type(&wut.token) {
            Ok(t) => t,
            Err(sense) => return check(sense),
        };
        let source = if rod_type == tpc::ROD_TYPE_BLOCK_DEVICE_ZERO {
            None
        } else {
            let Some(manager) = self.copy_manager.get() else {
                return check(Sense::new(SenseKey::IllegalRequest, tpc::TOKEN_UNKNOWN));
            };
            let data = match manager.use_token(&wut.token, wut.delete_token) {
                Ok(d) => d,
                Err(sense) => return check(sense),
            };
            let unit: Option<Arc<LogicalUnit>> = if self.designated_by(&data.source) {
                None
            } else {
                match manager.find(&data.source) {
                    Some(lu) => Some(lu),
                    // The unit it represents is gone: the token is of no use any more.
                    None => return check(Sense::new(SenseKey::IllegalRequest, tpc::TOKEN_REVOKED)),
                }
            };
            Some((unit, data.ranges))
        };
        if let Err(busy) = self.copies.begin(req.nexus.id, x.list_identifier) {
            return busy;
        }
        let mut result = CopyResult::new(tpc::out_action::WRITE_USING_TOKEN);
        if let Err(sense) = self.fill_from_token(req, &wut, source, &mut result) {
            result.status = tpc::CopyStatus::Failed;
            result.sense = Some(sense);
        }
        let completion = completion_of(&result);
        self.copies.end(req.nexus.id, x.list_identifier, result);
        completion
    }

    /// Copy the token's bytes (zeros without a source) into the WRITE USING TOKEN ranges.
    fn fill_from_token(
        &self,
        req: &Request,
        wut: &tpc::WriteUsingToken,
        source: Option<(Option<Arc<LogicalUnit>>, Vec<Range>)>,
        result: &mut CopyResult,
    ) -> Result<(), Sense> {
        let bs = u64::from(self.block_size());
        let not_reachable =
            || Sense::new(SenseKey::CopyAborted, tpc::COPY_TARGET_DEVICE_NOT_REACHABLE);
        let (src, mut from) = match &source {
            None => (None, Vec::new()),
            Some((unit, ranges)) => {
                let lu: &LogicalUnit = unit.as_deref().unwrap_or(self);
                let other = !std::ptr::eq(lu, self);
                if other
                    && (!lu.medium_ready()
                        || lu.reservations.conflict(
                            req.nexus,
                            scsi::table::lookup(0x88, None),
                            &[0x88],
                        ))
                {
                    return Err(not_reachable());
                }
                (Some(lu), extents(ranges, lu.block_size()))
            }
        };
        // Skip OFFSET INTO ROD blocks (of this unit's size) of the token's data.
        let mut skip = wut.offset_into_rod.saturating_mul(bs);
        while skip > 0 && !from.is_empty() {
            let take = skip.min(from[0].1);
            from[0].0 += take;
            from[0].1 -= take;
            skip -= take;
            if from[0].1 == 0 {
                from.remove(0);
            }
        }
        if src.is_some() && from.is_empty() {
            return Err(Sense::invalid_field_in_parameter_list(8, None));
        }
        let epoch = self.copies.epoch();
        let mut buf = vec![0u8; CHUNK_BYTES];
        let mut from = from.into_iter();
        let mut current = from.next();
        for (to, len) in extents(&wut.ranges, self.block_size()) {
            self.written(to / bs, len / bs);
            let mut done = 0;
            while done < len {
                if self.copies.aborted_since(epoch) {
                    result.status = tpc::CopyStatus::Aborted;
                    return Err(Sense::new(SenseKey::CopyAborted, Asc::NO_ADDITIONAL_SENSE));
                }
                let mut n = (len - done).min(CHUNK_BYTES as u64);
                let chunk = match src {
                    None => {
                        buf[..n as usize].fill(0);
                        &buf[..n as usize]
                    }
                    Some(lu) => {
                        let Some((at, left)) = current.as_mut() else {
                            // The token represents no more: the rest stays as it was.
                            return Ok(());
                        };
                        n = n.min(*left);
                        let chunk = &mut buf[..n as usize];
                        lu.store.read_at(*at, chunk).map_err(|e| {
                            tracing::error!(error = %e, "token copy: source store read failed");
                            Sense::new(SenseKey::CopyAborted, Asc::UNRECOVERED_READ_ERROR)
                        })?;
                        *at += n;
                        *left -= n;
                        if *left == 0 {
                            current = from.next();
                        }
                        chunk
                    }
                };
                self.store.write_at(to + done, chunk).map_err(|e| {
                    tracing::error!(error = %e, "token copy: store write failed");
                    Sense::new(SenseKey::MediumError, Asc::WRITE_ERROR)
                })?;
                done += n;
                result.transfer_count += n / bs;
            }
            result.segments_processed += 1;
        }
        Ok(())
    }
}
