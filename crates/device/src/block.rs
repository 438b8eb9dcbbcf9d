//! Medium-access commands of SBC-4: READ, WRITE, WRITE AND VERIFY, VERIFY, SYNCHRONIZE CACHE,
//! PRE-FETCH. Data moves once: store → `data_in`, `data_out` → store.

use crate::logical_unit::{check, LogicalUnit};
use crate::Completion;
use drive::MediaOp;
use scsi::command::{ByteCheck, CacheRange, Command, ReadWrite, Verify, WriteAndVerify, WriteSame};
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
            Command::Verify(v) if v.bytchk == ByteCheck::Compare => {
                self.range(info, v.lba, v.verification_length)
            }
            _ => return Ok(()),
        }
        .map(|_| ())
    }

    /// The medium access `cmd` makes, for a drive model, with its DLD; `None` for commands
    /// that move no blocks (or only the cache's: SYNCHRONIZE CACHE, PRE-FETCH). The range and
    /// write-protect checks the command's handler makes come first, so a command that would
    /// fail them fails before it is timed.
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
            Command::CompareAndWrite(rw) => (rw.lba, rw.transfer_length, true, rw.fua, 0),
            Command::WriteAndVerify(w) => (w.lba, w.transfer_length, true, true, 0),
            Command::WriteSame(w) => (w.lba, w.number_of_logical_blocks, true, false, 0),
            Command::Verify(v) => (v.lba, v.verification_length, false, false, 0),
            _ => return Ok(None),
        };
        if write {
            self.check_writable()?;
        }
        match cmd {
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

    fn check_writable(&self) -> Result<(), Sense> {
        if self.write_protected() {
            return Err(Sense::new(SenseKey::DataProtect, Asc::WRITE_PROTECTED));
        }
        Ok(())
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
        if let Err(sense) = self.check_writable() {
            return check(sense);
        }
        match self.range(info, rw.lba, rw.transfer_length) {
            Ok((offset, len)) => self.store_blocks(rw.lba, offset, len, data_out, rw.fua),
            Err(sense) => check(sense),
        }
    }

    /// ORWRITE (16) (SBC-4 §5.8): read the blocks, OR the data-out into them, write them back.
    /// Only whole blocks that arrived are changed, as for WRITE.
    pub(crate) fn or_write(
        &self,
        info: &CommandInfo,
        rw: &ReadWrite,
        data_out: &[u8],
    ) -> Completion {
        if let Err(sense) = self.check_writable() {
            return check(sense);
        }
        let (offset, len) = match self.range(info, rw.lba, rw.transfer_length) {
            Ok(r) => r,
            Err(sense) => return check(sense),
        };
        let bs = self.block_size() as usize;
        let n = len.min(data_out.len() / bs * bs);
        let _serialised = self.read_modify_write.lock();
        let mut medium = match self.read_medium(rw.lba, offset, n) {
            Ok(m) => m,
            Err(failed) => return failed,
        };
        medium.iter_mut().zip(data_out).for_each(|(m, d)| *m |= d);
        self.store_blocks(rw.lba, offset, n, &medium, rw.fua)
    }

    /// The medium's current bytes for a read-modify-write (ORWRITE, COMPARE AND WRITE); the
    /// caller holds the read-modify-write lock.
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
        if let Err(sense) = self.check_writable() {
            return check(sense);
        }
        match self.range(info, w.lba, w.transfer_length) {
            Ok((offset, len)) => self.store_blocks(w.lba, offset, len, data_out, true),
            Err(sense) => check(sense),
        }
    }

    /// COMPARE AND WRITE (SBC-4 §5.3): under the read-modify-write lock, compare the verify
    /// instance with the medium and, only if equal, write the write instance. A mismatch is
    /// MISCOMPARE with INFORMATION = offset of the first differing byte; nothing is written.
    /// NUMBER OF LOGICAL BLOCKS above MAXIMUM COMPARE AND WRITE LENGTH, or 0, or a data-out
    /// shorter than both instances, is an invalid NUMBER field. (SBC-4 lets 0 be a no-op; a
    /// 0 here is in practice a count that wrapped the one-byte field, e.g. libiscsi 1.19's
    /// 256-block case, so refusing it reports the real error.)
    pub(crate) fn compare_and_write(&self, rw: &ReadWrite, data_out: &[u8]) -> Completion {
        if let Err(sense) = self.check_writable() {
            return check(sense);
        }
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
        let offset = rw.lba * u64::from(self.block_size());
        let _serialised = self.read_modify_write.lock();
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
    /// of the range, in writes of up to 128 KiB. WSNZ = 1, so 0 blocks is an invalid field, as
    /// is more than MAXIMUM WRITE SAME LENGTH (the NUMBER OF LOGICAL BLOCKS field).
    pub(crate) fn write_same(
        &self,
        info: &CommandInfo,
        w: &WriteSame,
        data_out: &[u8],
    ) -> Completion {
        if let Err(sense) = self.check_writable() {
            return check(sense);
        }
        // Thin provisioning (LBPWS, LBPWS10 in VPD B2h) is not offered yet.
        if w.unmap {
            return check(Sense::invalid_field_in_cdb(1, Some(3)));
        }
        let number_field = if info.cdb_length() == 10 { 7 } else { 10 };
        let blocks = u64::from(w.number_of_logical_blocks);
        if blocks == 0 || blocks > self.max_write_same_length() {
            return check(Sense::invalid_field_in_cdb(number_field, None));
        }
        match w.lba.checked_add(blocks) {
            Some(end) if end <= self.blocks() => {}
            _ => return check(Sense::lba_out_of_range()),
        }
        let bs = self.block_size() as usize;
        // As with WRITE, a short data-out (no whole block) writes nothing.
        let Some(block) = data_out.get(..bs) else {
            return Completion::GOOD;
        };
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
