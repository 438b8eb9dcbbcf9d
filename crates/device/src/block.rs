//! Medium-access commands of SBC-4: READ, WRITE, WRITE ATOMIC, WRITE AND VERIFY, VERIFY,
//! SYNCHRONIZE CACHE, PRE-FETCH. Data moves once: store → `data_in`, `data_out` → store.
//! Every command that changes blocks holds their range in the logical unit's range lock
//! while it does, so overlapping changes happen one after the other, never interleaved.

use crate::logical_unit::{check, LogicalUnit};
use crate::{Completion, Request};
use drive::MediaOp;
use scsi::command::{
    ByteCheck, CacheRange, Command, ReadWrite, Unmap, Verify, WriteAndVerify, WriteSame,
};
use scsi::provisioning::{self, ProvisioningStatus};
use scsi::{Asc, CommandInfo, Sense, SenseKey};
use std::sync::atomic::Ordering;

/// Byte of the TRANSFER LENGTH (or VERIFICATION LENGTH) field for each CDB size (SBC-4
/// tables 80–82, 84 and friends).
fn length_field(info: &CommandInfo) -> u16 {
    match info.cdb_length() {
        6 => 4,
        10 => 7,
        12 => 6,
        // READ(32)/WRITE(32) (SBC-4 tables 75, 196).
        32 => 28,
        _ => 10,
    }
}

impl LogicalUnit {
    /// Check length against the Block Limits maximum and the range against the capacity; the
    /// byte offset and length of the range in the store.
    fn range(&self, info: &CommandInfo, lba: u64, blocks: u32) -> Result<(u64, usize), Sense> {
        if blocks > self.max_transfer_length() {
            return Err(Sense::invalid_field_in_cdb(length_field(info), None));
        }
        match lba.checked_add(blocks.into()) {
            Some(end) if end <= self.blocks() => {}
            _ => return Err(Sense::lba_out_of_range()),
        }
        let bs = u64::from(self.block_size());
        // Both fit: lba < blocks() and blocks ≤ max transfer length in bytes (a u32).
        Ok((lba * bs, blocks as usize * bs as usize))
    }

    /// For commands whose data-out is as long as their transfer length: the checks of
    /// [`Self::range`] (MAXIMUM TRANSFER LENGTH, capacity) that their handlers make later.
    pub(crate) fn check_data_out_range(
        &self,
        info: &CommandInfo,
        cmd: &Command,
    ) -> Result<(), Sense> {
        match *cmd {
            Command::Write(rw) | Command::OrWrite(rw) => {
                self.range(info, rw.lba, rw.transfer_length)
            }
            Command::WriteAndVerify(w) => self.range(info, w.lba, w.transfer_length),
            Command::WriteAtomic { rw, .. } => self.atomic_range(&rw),
            Command::Verify(v) if v.bytchk == ByteCheck::Compare => {
                self.range(info, v.lba, v.verification_length)
            }
            _ => return Ok(()),
        }
        .map(|_| ())
    }

    /// The medium access `cmd` makes, for a drive model, with its DLD; `None` for commands
    /// that move no blocks (PRE-FETCH, which only fills a cache, among them). SYNCHRONIZE
    /// CACHE is the drive's flush ([`MediaOp::FLUSH`]). The range checks the command's handler
    /// makes come first (write protection is a precheck), so a command that would fail them
    /// fails before it is timed.
    pub(crate) fn media_op(
        &self,
        info: &CommandInfo,
        cmd: &Command,
    ) -> Result<Option<(MediaOp, u8)>, Sense> {
        let (lba, blocks, write, fua, dld) = match *cmd {
            Command::Read(rw) => (rw.lba, rw.transfer_length, false, rw.fua, rw.dld),
            Command::Write(rw) | Command::OrWrite(rw) => {
                (rw.lba, rw.transfer_length, true, rw.fua, rw.dld)
            }
            Command::CompareAndWrite(rw) | Command::WriteAtomic { rw, .. } => {
                (rw.lba, rw.transfer_length, true, rw.fua, 0)
            }
            Command::WriteAndVerify(w) => (w.lba, w.transfer_length, true, true, 0),
            Command::WriteSame(w) => (w.lba, w.number_of_logical_blocks, true, false, 0),
            Command::Verify(v) => (v.lba, v.verification_length, false, false, 0),
            // Timed as the drive model's flush of its write cache, after the range check.
            Command::SynchronizeCache(r) => {
                self.cache_range(&r)?;
                return Ok(Some((MediaOp::FLUSH, 0)));
            }
            _ => return Ok(None),
        };
        match cmd {
            Command::WriteAtomic { rw, .. } => {
                self.atomic_range(rw)?;
            }
            // Their own length limits are checked when they run.
            Command::CompareAndWrite(_) | Command::WriteSame(_) => {
                match lba.checked_add(blocks.into()) {
                    Some(end) if end <= self.blocks() => {}
                    _ => return Err(Sense::lba_out_of_range()),
                }
            }
            _ => {
                self.range(info, lba, blocks)?;
            }
        }
        if blocks == 0 {
            return Ok(None);
        }
        let op = MediaOp {
            lba,
            blocks,
            write,
            fua,
        };
        Ok(Some((op, dld)))
    }

    /// MAXIMUM COMPARE AND WRITE LENGTH (VPD B0h) in logical blocks.
    fn max_compare_and_write_length(&self) -> u8 {
        self.block_limits().maximum_compare_and_write_length
    }

    /// READ (6)/(10)/(12)/(16) (SBC-4 §5.12–5.15).
    pub(crate) fn read(
        &self,
        info: &CommandInfo,
        rw: &ReadWrite,
        data_in: &mut Vec<u8>,
    ) -> Completion {
        let (offset, len) = match self.range(info, rw.lba, rw.transfer_length) {
            Ok(r) => r,
            Err(sense) => return check(sense),
        };
        let start = data_in.len();
        data_in.resize(start + len, 0);
        match self.store.read_at(offset, &mut data_in[start..]) {
            Ok(()) => Completion::GOOD,
            Err(e) => {
                data_in.truncate(start);
                self.io_error(
                    &e,
                    SenseKey::MediumError,
                    Asc::UNRECOVERED_READ_ERROR,
                    Some(rw.lba),
                )
            }
        }
    }

    /// Store the whole blocks of `data_out` (at most `len` bytes): when the initiator sent less
    /// than the CDB asks (iSCSI EDTL < transfer length), only what arrived is written
    /// (RFC 7143 §11.4.5.1 residual overflow; libiscsi test_write10_residuals).
    fn store_blocks(
        &self,
        lba: u64,
        offset: u64,
        len: usize,
        data_out: &[u8],
        fua: bool,
    ) -> Completion {
        let bs = self.block_size() as usize;
        let n = len.min(data_out.len() / bs * bs);
        let Some(data) = data_out.get(..n) else {
            return check(Sense::new(
                SenseKey::HardwareError,
                Asc::INTERNAL_TARGET_FAILURE,
            ));
        };
        self.written(lba, (n / bs) as u64);
        // FUA with the write cache on: this write is stable before GOOD (SBC-4 §4.15). With
        // WCE = 0 the store is in write-through mode already.
        let written = if fua && self.wce.load(Ordering::Relaxed) {
            self.store.write_durable(offset, data)
        } else {
            self.store.write_at(offset, data)
        };
        if let Err(e) = written {
            return self.io_error(&e, SenseKey::MediumError, Asc::WRITE_ERROR, Some(lba));
        }
        Completion::GOOD
    }

    /// WRITE (6)/(10)/(12)/(16) (SBC-4 §5.39–5.42).
    pub(crate) fn write(&self, info: &CommandInfo, rw: &ReadWrite, data_out: &[u8]) -> Completion {
        match self.range(info, rw.lba, rw.transfer_length) {
            Ok((offset, len)) => {
                let _held = self.ranges.lock(rw.lba, rw.transfer_length.into());
                self.store_blocks(rw.lba, offset, len, data_out, rw.fua)
            }
            Err(sense) => check(sense),
        }
    }

    /// WRITE ATOMIC (16)'s limits (SBC-4 §5.48): TRANSFER LENGTH within MAXIMUM ATOMIC
    /// TRANSFER LENGTH (or, with an ATOMIC BOUNDARY, the limits with a boundary), the range
    /// within the capacity. No alignment or granularity is required. 0 blocks writes nothing
    /// but still names an LBA that must exist.
    fn atomic_range(&self, rw: &scsi::command::ReadWrite) -> Result<(u64, usize), Sense> {
        self.atomic_limits(rw.transfer_length, 0)?;
        match rw.lba.checked_add(rw.transfer_length.into()) {
            Some(end) if end <= self.blocks() => {}
            _ => return Err(Sense::lba_out_of_range()),
        }
        let bs = u64::from(self.block_size());
        Ok((rw.lba * bs, rw.transfer_length as usize * bs as usize))
    }

    fn atomic_limits(&self, blocks: u32, boundary: u16) -> Result<(), Sense> {
        let l = self.block_limits();
        let max = if boundary == 0 {
            l.maximum_atomic_transfer_length
        } else {
            if u32::from(boundary) > l.maximum_atomic_boundary_size {
                return Err(Sense::invalid_field_in_cdb(10, None));
            }
            l.maximum_atomic_transfer_length_with_atomic_boundary
        };
        if blocks > max {
            return Err(Sense::invalid_field_in_cdb(12, None));
        }
        Ok(())
    }

    /// WRITE ATOMIC (16) (SBC-4 §5.48): the blocks change all at once with respect to every
    /// other write (they hold their whole range), and all or nothing: a Data-Out shorter than
    /// the TRANSFER LENGTH writes nothing (where WRITE would write the whole blocks that came).
    pub(crate) fn write_atomic(
        &self,
        rw: &scsi::command::ReadWrite,
        atomic_boundary: u16,
        data_out: &[u8],
    ) -> Completion {
        let (offset, len) = match self
            .atomic_limits(rw.transfer_length, atomic_boundary)
            .and_then(|()| self.atomic_range(rw))
        {
            Ok(r) => r,
            Err(sense) => return check(sense),
        };
        if len == 0 {
            return Completion::GOOD;
        }
        let Some(data) = data_out.get(..len) else {
            return check(Sense::invalid_field_in_cdb(12, None));
        };
        let _held = self.ranges.lock(rw.lba, rw.transfer_length.into());
        self.store_blocks(rw.lba, offset, len, data, rw.fua)
    }

    /// ORWRITE (16) (SBC-4 §5.8): read the blocks, OR the data-out into them, write them back.
    /// Only whole blocks that arrived are changed, as for WRITE.
    pub(crate) fn or_write(
        &self,
        info: &CommandInfo,
        rw: &ReadWrite,
        data_out: &[u8],
    ) -> Completion {
        let (offset, len) = match self.range(info, rw.lba, rw.transfer_length) {
            Ok(r) => r,
            Err(sense) => return check(sense),
        };
        let bs = self.block_size() as usize;
        let n = len.min(data_out.len() / bs * bs);
        let _held = self.ranges.lock(rw.lba, rw.transfer_length.into());
        let mut medium = match self.read_medium(rw.lba, offset, n) {
            Ok(m) => m,
            Err(failed) => return failed,
        };
        medium.iter_mut().zip(data_out).for_each(|(m, d)| *m |= d);
        self.store_blocks(rw.lba, offset, n, &medium, rw.fua)
    }

    /// The medium's current bytes for a read-modify-write (ORWRITE, COMPARE AND WRITE); the
    /// caller holds their range.
    fn read_medium(&self, lba: u64, offset: u64, len: usize) -> Result<Vec<u8>, Completion> {
        let mut medium = vec![0u8; len];
        self.store.read_at(offset, &mut medium).map_err(|e| {
            self.io_error(
                &e,
                SenseKey::MediumError,
                Asc::UNRECOVERED_READ_ERROR,
                Some(lba),
            )
        })?;
        Ok(medium)
    }

    /// WRITE AND VERIFY (10)/(12)/(16) (SBC-4 §5.43–5.45): the data must be on the medium to be
    /// verified, so it is written through. The comparison of BYTCHK = 01b is against the very
    /// bytes just stored, so it always matches.
    pub(crate) fn write_and_verify(
        &self,
        info: &CommandInfo,
        w: &WriteAndVerify,
        data_out: &[u8],
    ) -> Completion {
        match self.range(info, w.lba, w.transfer_length) {
            Ok((offset, len)) => {
                let _held = self.ranges.lock(w.lba, w.transfer_length.into());
                self.store_blocks(w.lba, offset, len, data_out, true)
            }
            Err(sense) => check(sense),
        }
    }

    /// COMPARE AND WRITE (SBC-4 §5.3): holding the range, compare the verify
    /// instance with the medium and, only if equal, write the write instance. A mismatch is
    /// MISCOMPARE with INFORMATION = offset of the first differing byte; nothing is written.
    /// NUMBER OF LOGICAL BLOCKS above MAXIMUM COMPARE AND WRITE LENGTH, or 0, or a data-out
    /// shorter than both instances, is an invalid NUMBER field. (SBC-4 lets 0 be a no-op; a
    /// 0 here is in practice a count that wrapped the one-byte field, e.g. libiscsi 1.19's
    /// 256-block case, so refusing it reports the real error.) So is a Data-Out buffer of
    /// another size than the two instances.
    pub(crate) fn compare_and_write(&self, rw: &ReadWrite, req: &Request) -> Completion {
        let data_out = req.data_out;
        let blocks = rw.transfer_length;
        if blocks == 0 || blocks > u32::from(self.max_compare_and_write_length()) {
            return check(Sense::invalid_field_in_cdb(13, None));
        }
        match rw.lba.checked_add(blocks.into()) {
            Some(end) if end <= self.blocks() => {}
            _ => return check(Sense::lba_out_of_range()),
        }
        let len = blocks as usize * self.block_size() as usize;
        let (Some(verify), Some(write)) = (data_out.get(..len), data_out.get(len..2 * len)) else {
            return check(Sense::invalid_field_in_cdb(13, None));
        };
        if req.data_out_buffer_size as usize != 2 * len {
            return check(Sense::invalid_field_in_cdb(13, None));
        }
        let offset = rw.lba * u64::from(self.block_size());
        let _held = self.ranges.lock(rw.lba, blocks.into());
        let medium = match self.read_medium(rw.lba, offset, len) {
            Ok(m) => m,
            Err(failed) => return failed,
        };
        if let Some(at) = medium.iter().zip(verify).position(|(a, b)| a != b) {
            let mut sense = Sense::new(SenseKey::Miscompare, Asc::MISCOMPARE_DURING_VERIFY);
            sense.information = Some(at as u64);
            return check(sense);
        }
        self.store_blocks(rw.lba, offset, len, write, rw.fua)
    }

    /// WRITE SAME (10)/(16) (SBC-4 §5.46–5.47): the one data-out block written to every block
    /// of the range, in writes of up to 128 KiB. WSNZ = 0: 0 blocks means every block from the
    /// LBA to the last one. More than MAXIMUM WRITE SAME LENGTH is an invalid NUMBER OF LOGICAL
    /// BLOCKS. With UNMAP on a thin-provisioned unit the range is deallocated instead, whatever
    /// the block holds, and reads back as zeros (LBPRZ = 1), as Linux LIO does and libiscsi's
    /// WriteSame*.UnmapUntilEnd expects (SBC-4 §4.7.3.4.2 leaves it to the device server).
    /// A Data-Out buffer holds one block, or nothing (NDOB, or a WRITE SAME(10) that sends no
    /// data: then nothing is written unless it unmaps); any other size is refused.
    pub(crate) fn write_same(
        &self,
        info: &CommandInfo,
        w: &WriteSame,
        req: &Request,
    ) -> Completion {
        let data_out = req.data_out;
        let buffer = req.data_out_buffer_size;
        if buffer != 0 && (w.ndob || buffer != self.block_size()) {
            return check(Sense::new(
                SenseKey::IllegalRequest,
                Asc::INVALID_FIELD_IN_CDB,
            ));
        }
        // LBPWS/LBPWS10 are set only with thin provisioning.
        if w.unmap && !self.config().thin_provisioning {
            return check(Sense::invalid_field_in_cdb(1, Some(3)));
        }
        let number_field = if info.cdb_length() == 10 { 7 } else { 10 };
        if w.lba >= self.blocks() {
            return check(Sense::lba_out_of_range());
        }
        let blocks = match u64::from(w.number_of_logical_blocks) {
            0 => self.blocks() - w.lba,
            n => n,
        };
        if blocks > self.max_write_same_length() {
            return check(Sense::invalid_field_in_cdb(number_field, None));
        }
        match w.lba.checked_add(blocks) {
            Some(end) if end <= self.blocks() => {}
            _ => return check(Sense::lba_out_of_range()),
        }
        let _held = self.ranges.lock(w.lba, blocks);
        if w.unmap {
            return self.deallocate(w.lba, blocks);
        }
        let bs = self.block_size() as usize;
        let zeros;
        let block = if w.ndob {
            zeros = vec![0u8; bs];
            &zeros[..]
        } else {
            // As with WRITE, a short data-out (no whole block) writes nothing.
            let Some(block) = data_out.get(..bs) else {
                return Completion::GOOD;
            };
            block
        };
        self.written(w.lba, blocks);
        let per_write = ((128 << 10) / bs).max(1) as u64;
        let pattern = block.repeat(per_write.min(blocks) as usize);
        let mut lba = w.lba;
        let end = w.lba + blocks;
        while lba < end {
            let n = per_write.min(end - lba) as usize;
            if let Err(e) = self.store.write_at(lba * bs as u64, &pattern[..n * bs]) {
                return self.io_error(&e, SenseKey::MediumError, Asc::WRITE_ERROR, Some(lba));
            }
            lba += n as u64;
        }
        Completion::GOOD
    }

    /// Deallocate `blocks` from `lba` (the range is checked, and held by the caller): the
    /// store frees what its granularity allows and zeroes the rest. With the write cache off the change is made
    /// durable before GOOD, as a write's would be.
    pub(crate) fn deallocate(&self, lba: u64, blocks: u64) -> Completion {
        let bs = u64::from(self.block_size());
        self.written(lba, blocks);
        let mut done = self.store.punch_hole(lba * bs, blocks * bs);
        if done.is_ok() && !self.wce.load(Ordering::Relaxed) {
            done = self.store.flush();
        }
        match done {
            Ok(()) => Completion::GOOD,
            Err(e) => self.io_error(&e, SenseKey::MediumError, Asc::WRITE_ERROR, Some(lba)),
        }
    }

    /// UNMAP (SBC-4 §5.30): every descriptor is checked (LBA range, MAXIMUM UNMAP LBA COUNT
    /// and BLOCK DESCRIPTOR COUNT) before any range is deallocated. A PARAMETER LIST LENGTH of
    /// 0 unmaps nothing.
    pub(crate) fn unmap(&self, u: &Unmap, data_out: &[u8]) -> Completion {
        if u.parameter_list_length == 0 {
            return Completion::GOOD;
        }
        let Some(list) = data_out.get(..usize::from(u.parameter_list_length)) else {
            return check(Sense::new(
                SenseKey::IllegalRequest,
                Asc::PARAMETER_LIST_LENGTH_ERROR,
            ));
        };
        let descriptors = match provisioning::unmap_descriptors(list) {
            Ok(d) => d,
            Err(sense) => return check(sense),
        };
        let limits = self.block_limits();
        if descriptors.len() as u64 > u64::from(limits.maximum_unmap_block_descriptor_count) {
            return check(Sense::invalid_field_in_parameter_list(2, None));
        }
        let mut total: u64 = 0;
        for (i, d) in descriptors.iter().enumerate() {
            let blocks = u64::from(d.number_of_logical_blocks);
            match d.lba.checked_add(blocks) {
                Some(end) if end <= self.blocks() => {}
                _ => return check(Sense::lba_out_of_range()),
            }
            total += blocks;
            if total > u64::from(limits.maximum_unmap_lba_count) {
                // The NUMBER OF LOGICAL BLOCKS of the descriptor that passed the limit.
                let field = u16::try_from(8 + 16 * i + 8).unwrap_or(u16::MAX);
                return check(Sense::invalid_field_in_parameter_list(field, None));
            }
        }
        for d in descriptors
            .iter()
            .filter(|d| d.number_of_logical_blocks != 0)
        {
            let blocks = d.number_of_logical_blocks.into();
            let _held = self.ranges.lock(d.lba, blocks);
            let done = self.deallocate(d.lba, blocks);
            if done != Completion::GOOD {
                return done;
            }
        }
        Completion::GOOD
    }

    /// GET LBA STATUS (SBC-4 §5.8): the extents from `lba` on, each mapped or deallocated, as
    /// many as fit the allocation length (at least one; at most 64 per command). A fully
    /// provisioned unit reports every block mapped.
    pub(crate) fn get_lba_status(
        &self,
        lba: u64,
        allocation_length: u32,
        data_in: &mut Vec<u8>,
    ) -> Completion {
        if lba >= self.blocks() {
            return check(Sense::lba_out_of_range());
        }
        let bs = u64::from(self.block_size());
        let wanted = (allocation_length.saturating_sub(8) / 16).clamp(1, 64) as usize;
        let mut extents = Vec::with_capacity(wanted);
        let mut at = lba;
        while extents.len() < wanted && at < self.blocks() {
            // A descriptor counts at most u32::MAX blocks.
            let span = (self.blocks() - at).min(u64::from(u32::MAX));
            // Every block of a fully provisioned unit is mapped, whatever the store holds.
            let extent = if self.config().thin_provisioning {
                self.store.extent(at * bs, span * bs)
            } else {
                Ok((true, span * bs))
            };
            let (mapped, bytes) = match extent {
                Ok(e) => e,
                Err(e) => {
                    return self.io_error(
                        &e,
                        SenseKey::MediumError,
                        Asc::UNRECOVERED_READ_ERROR,
                        Some(at),
                    )
                }
            };
            // Extents are whole blocks: a block partly allocated counts as mapped.
            let blocks = if mapped {
                bytes.div_ceil(bs)
            } else {
                bytes / bs
            };
            let (status, blocks) = match blocks {
                0 => (ProvisioningStatus::Mapped, 1),
                n => {
                    let s = if mapped {
                        ProvisioningStatus::Mapped
                    } else {
                        ProvisioningStatus::Deallocated
                    };
                    (s, n)
                }
            };
            extents.push((at, blocks as u32, status));
            at += blocks;
        }
        let start = data_in.len();
        provisioning::lba_status(&extents, data_in);
        crate::logical_unit::truncate(data_in, start, allocation_length);
        Completion::GOOD
    }

    /// VERIFY (10)/(12)/(16) (SBC-4 §5.35–5.37). BYTCHK 00b: the medium is always readable;
    /// 01b: compare the data-out blocks; 11b: compare one data-out block with every block.
    /// A mismatch is MISCOMPARE / MISCOMPARE DURING VERIFY OPERATION with INFORMATION set to
    /// the offset of the first differing byte in the data-out buffer.
    pub(crate) fn verify(&self, info: &CommandInfo, v: &Verify, data_out: &[u8]) -> Completion {
        let (offset, len) = match self.range(info, v.lba, v.verification_length) {
            Ok(r) => r,
            Err(sense) => return check(sense),
        };
        let bs = self.block_size() as usize;
        let pattern_len = match v.bytchk {
            ByteCheck::None => return Completion::GOOD,
            ByteCheck::Compare => len,
            ByteCheck::CompareOneBlock => bs.min(len),
        };
        let Some(expected) = data_out.get(..pattern_len) else {
            return check(Sense::new(
                SenseKey::IllegalRequest,
                Asc::PARAMETER_LIST_LENGTH_ERROR,
            ));
        };
        let mut medium = vec![0u8; len];
        if let Err(e) = self.store.read_at(offset, &mut medium) {
            return self.io_error(
                &e,
                SenseKey::MediumError,
                Asc::UNRECOVERED_READ_ERROR,
                Some(v.lba),
            );
        }
        let mismatch = match v.bytchk {
            ByteCheck::CompareOneBlock => medium
                .chunks(bs)
                .find_map(|block| block.iter().zip(expected).position(|(a, b)| a != b)),
            _ => medium.iter().zip(expected).position(|(a, b)| a != b),
        };
        match mismatch {
            None => Completion::GOOD,
            Some(at) => {
                let mut sense = Sense::new(SenseKey::Miscompare, Asc::MISCOMPARE_DURING_VERIFY);
                sense.information = Some(at as u64);
                check(sense)
            }
        }
    }

    /// The range of SYNCHRONIZE CACHE / PRE-FETCH: 0 blocks means "to the last LBA"; any part
    /// beyond the capacity is LBA OUT OF RANGE.
    fn cache_range(&self, r: &CacheRange) -> Result<(), Sense> {
        match r.lba.checked_add(r.number_of_logical_blocks.into()) {
            Some(end) if end <= self.blocks() && r.lba < self.blocks() => Ok(()),
            _ => Err(Sense::lba_out_of_range()),
        }
    }

    /// SYNCHRONIZE CACHE (10)/(16) (SBC-4 §5.32–5.33): flush the whole store (a range flush is
    /// allowed to do more than asked). IMMED is honoured by finishing before returning anyway.
    pub(crate) fn synchronize_cache(&self, r: &CacheRange) -> Completion {
        if let Err(sense) = self.cache_range(r) {
            return check(sense);
        }
        match self.store.flush() {
            Ok(()) => Completion::GOOD,
            Err(e) => self.io_error(&e, SenseKey::MediumError, Asc::WRITE_ERROR, None),
        }
    }

    /// PRE-FETCH (10)/(16) (SBC-4 §5.9–5.10). CONDITION MET means the blocks now sit in a
    /// cache; these stores have no cache separate from the medium, so there is nothing to
    /// fill and the answer is GOOD (the "insufficient cache" case), which is also what
    /// libiscsi 1.19's Prefetch tests accept.
    pub(crate) fn pre_fetch(&self, r: &CacheRange) -> Completion {
        match self.cache_range(r) {
            Ok(()) => Completion::GOOD,
            Err(sense) => check(sense),
        }
    }
}
