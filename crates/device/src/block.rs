//! The medium-access commands of SBC-4 as data-plane operations: READ, WRITE, WRITE ATOMIC,
//! ORWRITE, COMPARE AND WRITE, WRITE AND VERIFY, WRITE SAME, UNMAP, VERIFY, SYNCHRONIZE CACHE,
//! PRE-FETCH, GET LBA STATUS, READ LONG and WRITE LONG, FORMAT UNIT. Each CDB's fields are
//! checked here (length against the Block Limits, range against the capacity); what the
//! command does to blocks becomes one [`Op`], which the data plane runs under its range lock.
//! Pure functions of the command and the unit's geometry.

use crate::Completion;
use drive::MediaOp;
use scsi::command::{ByteCheck, CacheRange, Command, ReadWrite, Unmap, Verify, WriteSame};
use scsi::inquiry::BlockLimits;
use scsi::provisioning::{self, ProvisioningStatus};
use scsi::{Asc, CommandInfo, Sense, SenseKey};
use store::{Done, Failure, Op};

/// What the medium commands need to know of their logical unit.
pub(crate) struct Geometry<'a> {
    pub(crate) blocks: u64,
    pub(crate) block_size: u32,
    pub(crate) limits: &'a BlockLimits,
    pub(crate) thin: bool,
    /// WCE: writes may stay in a volatile cache; otherwise every write is durable before
    /// GOOD (SBC-4 §4.15).
    pub(crate) write_cache: bool,
}

/// A medium command whose fields checked out.
#[derive(Debug)]
pub(crate) enum Plan {
    /// Nothing to move: GOOD at once.
    Good,
    /// One data-plane operation; `changes`: the blocks it changes, (lba, count).
    Io {
        op: Op,
        /// The LBA a medium error reports in INFORMATION.
        lba: Option<u64>,
        /// It writes (its failure is a WRITE ERROR unless the plane says it failed reading).
        writes: bool,
        changes: Option<(u64, u64)>,
    },
}

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

fn lba_out_of_range() -> Sense {
    Sense::lba_out_of_range()
}

impl Geometry<'_> {
    fn bs(&self) -> u64 {
        u64::from(self.block_size)
    }

    /// `blocks` from `lba` lie within the capacity.
    fn within(&self, lba: u64, blocks: u64) -> Result<(), Sense> {
        match lba.checked_add(blocks) {
            Some(end) if end <= self.blocks => Ok(()),
            _ => Err(lba_out_of_range()),
        }
    }

    /// Length against the Block Limits maximum and range against the capacity; the byte
    /// offset and length of the range.
    fn range(&self, info: &CommandInfo, lba: u64, blocks: u32) -> Result<(u64, u32), Sense> {
        if blocks > self.limits.maximum_transfer_length {
            return Err(Sense::invalid_field_in_cdb(length_field(info), None));
        }
        self.within(lba, blocks.into())?;
        // Both fit: lba < blocks and blocks ≤ the maximum transfer length, whose bytes fit a
        // u32 (the configuration's maximum transfer is a u32 of bytes).
        Ok((lba * self.bs(), blocks.saturating_mul(self.block_size)))
    }

    /// WRITE ATOMIC (16)/(32)'s limits (SBC-4): TRANSFER LENGTH within MAXIMUM ATOMIC
    /// TRANSFER LENGTH (or, with an ATOMIC BOUNDARY, the limits with a boundary), the range
    /// within the capacity. No alignment or granularity is required.
    fn atomic_range(
        &self,
        info: &CommandInfo,
        rw: &ReadWrite,
        boundary: u16,
    ) -> Result<(u64, u32), Sense> {
        // ATOMIC BOUNDARY and TRANSFER LENGTH: bytes 10 and 12 of the (16) CDB, 4 and 28 of
        // the (32) one.
        let (boundary_field, length_field) = match info.cdb_length() {
            32 => (4, 28),
            _ => (10, 12),
        };
        let l = self.limits;
        let max = if boundary == 0 {
            l.maximum_atomic_transfer_length
        } else {
            if u32::from(boundary) > l.maximum_atomic_boundary_size {
                return Err(Sense::invalid_field_in_cdb(boundary_field, None));
            }
            l.maximum_atomic_transfer_length_with_atomic_boundary
        };
        if rw.transfer_length > max {
            return Err(Sense::invalid_field_in_cdb(length_field, None));
        }
        self.within(rw.lba, rw.transfer_length.into())?;
        Ok((
            rw.lba * self.bs(),
            rw.transfer_length.saturating_mul(self.block_size),
        ))
    }

    /// The range of SYNCHRONIZE CACHE / PRE-FETCH: 0 blocks means "to the last LBA"; any part
    /// beyond the capacity is LBA OUT OF RANGE.
    fn cache_range(&self, r: &CacheRange) -> Result<(), Sense> {
        match r.lba.checked_add(r.number_of_logical_blocks.into()) {
            Some(end) if end <= self.blocks && r.lba < self.blocks => Ok(()),
            _ => Err(lba_out_of_range()),
        }
    }

    /// A write of `blocks` from `lba` whose fields checked out, writing the whole blocks of
    /// the `data_out` bytes that came (at most `len`): when the initiator sent less than the
    /// CDB asks (iSCSI EDTL < transfer length), only what arrived is written (RFC 7143
    /// §11.4.5.1 residual overflow; libiscsi test_write10_residuals).
    fn write(
        &self,
        lba: u64,
        offset: u64,
        len: u32,
        data_out: u32,
        fua: bool,
        atomic: bool,
    ) -> Plan {
        let bs = self.block_size;
        let n = len.min(data_out / bs * bs);
        if n == 0 {
            return Plan::Good;
        }
        Plan::Io {
            op: Op::Write {
                offset,
                len: n,
                durable: fua || !self.write_cache,
                atomic,
            },
            lba: Some(lba),
            writes: true,
            changes: Some((lba, u64::from(n / bs))),
        }
    }

    /// For commands whose Data-Out is as long as their transfer length: the checks their
    /// plans make, before the transport asks for (and buffers) any of their data.
    pub(crate) fn check_data_out(&self, info: &CommandInfo, cmd: &Command) -> Result<(), Sense> {
        match *cmd {
            Command::Write(rw) | Command::OrWrite(rw) => {
                self.range(info, rw.lba, rw.transfer_length)
            }
            Command::WriteAndVerify(w) => self.range(info, w.lba, w.transfer_length),
            Command::WriteAtomic { rw, .. } => self.atomic_range(info, &rw, 0),
            Command::Verify(v) if v.bytchk == ByteCheck::Compare => {
                self.range(info, v.lba, v.verification_length)
            }
            _ => return Ok(()),
        }
        .map(|_| ())
    }

    /// The medium access `cmd` makes, for a drive model, with its DLD; `None` for commands
    /// that move no blocks (PRE-FETCH, which only fills a cache, among them). SYNCHRONIZE
    /// CACHE is the drive's flush ([`MediaOp::FLUSH`]). The range checks of the command's
    /// plan come first, so a command that would fail them fails before it is timed.
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
                self.atomic_range(info, rw, 0)?;
            }
            // Their own length limits are checked when they run.
            Command::CompareAndWrite(_) | Command::WriteSame(_) => {
                self.within(lba, blocks.into())?
            }
            _ => {
                self.range(info, lba, blocks)?;
            }
        }
        if blocks == 0 {
            return Ok(None);
        }
        Ok(Some((
            MediaOp {
                lba,
                blocks,
                write,
                fua,
            },
            dld,
        )))
    }

    /// READ (6)/(10)/(12)/(16)/(32) (SBC-4 §5.12–5.16).
    pub(crate) fn read(&self, info: &CommandInfo, rw: &ReadWrite) -> Result<Plan, Sense> {
        let (offset, len) = self.range(info, rw.lba, rw.transfer_length)?;
        if len == 0 {
            return Ok(Plan::Good);
        }
        Ok(Plan::Io {
            op: Op::Read { offset, len },
            lba: Some(rw.lba),
            writes: false,
            changes: None,
        })
    }

    /// WRITE (6)/(10)/(12)/(16)/(32) (SBC-4 §5.39–5.43), and WRITE AND VERIFY (10)/(12)/(16)
    /// (SBC-4 §5.43–5.45), whose data must be on the medium to be verified, so it is written
    /// through; the comparison of BYTCHK = 01b is against the very bytes just stored, so it
    /// always matches.
    pub(crate) fn write_command(
        &self,
        info: &CommandInfo,
        cmd: &Command,
        data_out: u32,
    ) -> Result<Plan, Sense> {
        let (lba, blocks, fua) = match *cmd {
            Command::WriteAndVerify(w) => (w.lba, w.transfer_length, true),
            Command::Write(rw) => (rw.lba, rw.transfer_length, rw.fua),
            _ => return Err(Sense::invalid_command_operation_code()),
        };
        let (offset, len) = self.range(info, lba, blocks)?;
        Ok(self.write(lba, offset, len, data_out, fua, false))
    }

    /// WRITE ATOMIC (16)/(32) (SBC-4 §4.29): all or nothing with respect to every other write
    /// and every read; a Data-Out shorter than the TRANSFER LENGTH writes nothing (where
    /// WRITE would write the whole blocks that came).
    pub(crate) fn write_atomic(
        &self,
        info: &CommandInfo,
        rw: &ReadWrite,
        boundary: u16,
        data_out: u32,
    ) -> Result<Plan, Sense> {
        let (offset, len) = self.atomic_range(info, rw, boundary)?;
        if len == 0 {
            return Ok(Plan::Good);
        }
        if data_out < len {
            let length_field = if info.cdb_length() == 32 { 28 } else { 12 };
            return Err(Sense::invalid_field_in_cdb(length_field, None));
        }
        Ok(self.write(rw.lba, offset, len, len, rw.fua, true))
    }

    /// ORWRITE (16) (SBC-4 §5.8): read the blocks, OR the Data-Out into them, write them
    /// back, as one atomic change. Only whole blocks that arrived are changed, as for WRITE.
    pub(crate) fn or_write(
        &self,
        info: &CommandInfo,
        rw: &ReadWrite,
        data_out: u32,
    ) -> Result<Plan, Sense> {
        let (offset, len) = self.range(info, rw.lba, rw.transfer_length)?;
        let n = len.min(data_out / self.block_size * self.block_size);
        if n == 0 {
            return Ok(Plan::Good);
        }
        Ok(Plan::Io {
            op: Op::OrWrite {
                offset,
                len: n,
                durable: rw.fua || !self.write_cache,
            },
            lba: Some(rw.lba),
            writes: true,
            changes: Some((rw.lba, u64::from(n / self.block_size))),
        })
    }

    /// COMPARE AND WRITE (SBC-4 §5.3): holding the range, compare the verify instance with
    /// the medium and, only if equal, write the write instance. NUMBER OF LOGICAL BLOCKS above
    /// MAXIMUM COMPARE AND WRITE LENGTH, or 0, or a Data-Out shorter than both instances, is
    /// an invalid NUMBER field. (SBC-4 lets 0 be a no-op; a 0 here is in practice a count that
    /// wrapped the one-byte field, e.g. libiscsi 1.19's 256-block case, so refusing it reports
    /// the real error.) So is a Data-Out buffer of another size than the two instances.
    pub(crate) fn compare_and_write(
        &self,
        rw: &ReadWrite,
        data_out: u32,
        buffer: u32,
    ) -> Result<Plan, Sense> {
        let blocks = rw.transfer_length;
        if blocks == 0 || blocks > u32::from(self.limits.maximum_compare_and_write_length) {
            return Err(Sense::invalid_field_in_cdb(13, None));
        }
        self.within(rw.lba, blocks.into())?;
        let len = blocks * self.block_size;
        if data_out < 2 * len || buffer != 2 * len {
            return Err(Sense::invalid_field_in_cdb(13, None));
        }
        Ok(Plan::Io {
            op: Op::CompareAndWrite {
                offset: rw.lba * self.bs(),
                len,
                durable: rw.fua || !self.write_cache,
            },
            lba: Some(rw.lba),
            writes: true,
            changes: Some((rw.lba, blocks.into())),
        })
    }

    /// WRITE SAME (10)/(16)/(32) (SBC-4): the one Data-Out block written to every block of
    /// the range. WSNZ = 0: 0 blocks means every block from the LBA to the last one. More than
    /// MAXIMUM WRITE SAME LENGTH is an invalid NUMBER OF LOGICAL BLOCKS. With UNMAP on a
    /// thin-provisioned unit the range is deallocated instead, whatever the block holds, and
    /// reads back as zeros (LBPRZ = 1), as Linux LIO does and libiscsi's
    /// WriteSame*.UnmapUntilEnd expects (SBC-4 §4.7.3.4.2 leaves it to the device server).
    /// A Data-Out buffer holds one block, or nothing (NDOB, or a WRITE SAME(10) that sends no
    /// data: then nothing is written unless it unmaps); any other size is refused.
    pub(crate) fn write_same(
        &self,
        info: &CommandInfo,
        w: &WriteSame,
        data_out: u32,
        buffer: u32,
    ) -> Result<Plan, Sense> {
        if buffer != 0 && (w.ndob || buffer != self.block_size) {
            return Err(Sense::new(
                SenseKey::IllegalRequest,
                Asc::INVALID_FIELD_IN_CDB,
            ));
        }
        // LBPWS/LBPWS10 are set only with thin provisioning.
        if w.unmap && !self.thin {
            return Err(Sense::invalid_field_in_cdb(
                info.protect_byte() as u16,
                Some(3),
            ));
        }
        let number_field = match info.cdb_length() {
            10 => 7,
            32 => 28,
            _ => 10,
        };
        if w.lba >= self.blocks {
            return Err(lba_out_of_range());
        }
        let blocks = match u64::from(w.number_of_logical_blocks) {
            0 => self.blocks - w.lba,
            n => n,
        };
        if blocks > self.limits.maximum_write_same_length {
            return Err(Sense::invalid_field_in_cdb(number_field, None));
        }
        self.within(w.lba, blocks)?;
        let (offset, len) = (w.lba * self.bs(), blocks * self.bs());
        let op = if w.unmap {
            Op::Unmap {
                ranges: vec![(offset, len)],
                durable: !self.write_cache,
            }
        } else {
            // As with WRITE, a short Data-Out (no whole block) writes nothing.
            if !w.ndob && data_out < self.block_size {
                return Ok(Plan::Good);
            }
            Op::WriteSame {
                offset,
                len,
                block: self.block_size,
                zeros: w.ndob,
                durable: !self.write_cache,
            }
        };
        Ok(Plan::Io {
            op,
            lba: Some(w.lba),
            writes: true,
            changes: Some((w.lba, blocks)),
        })
    }

    /// UNMAP (SBC-4 §5.30): every descriptor is checked (LBA range, MAXIMUM UNMAP LBA COUNT
    /// and BLOCK DESCRIPTOR COUNT) before any range is deallocated. A PARAMETER LIST LENGTH of
    /// 0 unmaps nothing. The ranges that change, (lba, count), come with the plan.
    pub(crate) fn unmap(
        &self,
        u: &Unmap,
        data_out: &[u8],
    ) -> Result<(Plan, Vec<(u64, u64)>), Sense> {
        if u.parameter_list_length == 0 {
            return Ok((Plan::Good, Vec::new()));
        }
        let list = data_out
            .get(..usize::from(u.parameter_list_length))
            .ok_or_else(|| {
                Sense::new(SenseKey::IllegalRequest, Asc::PARAMETER_LIST_LENGTH_ERROR)
            })?;
        let descriptors = provisioning::unmap_descriptors(list)?;
        if descriptors.len() as u64 > u64::from(self.limits.maximum_unmap_block_descriptor_count) {
            return Err(Sense::invalid_field_in_parameter_list(2, None));
        }
        let mut total: u64 = 0;
        for (i, d) in descriptors.iter().enumerate() {
            let blocks = u64::from(d.number_of_logical_blocks);
            self.within(d.lba, blocks)?;
            total += blocks;
            if total > u64::from(self.limits.maximum_unmap_lba_count) {
                // The NUMBER OF LOGICAL BLOCKS of the descriptor that passed the limit.
                let field = u16::try_from(8 + 16 * i + 8).unwrap_or(u16::MAX);
                return Err(Sense::invalid_field_in_parameter_list(field, None));
            }
        }
        let changed: Vec<(u64, u64)> = descriptors
            .iter()
            .filter(|d| d.number_of_logical_blocks != 0)
            .map(|d| (d.lba, u64::from(d.number_of_logical_blocks)))
            .collect();
        if changed.is_empty() {
            return Ok((Plan::Good, changed));
        }
        let op = Op::Unmap {
            ranges: changed
                .iter()
                .map(|&(lba, n)| (lba * self.bs(), n * self.bs()))
                .collect(),
            durable: !self.write_cache,
        };
        let plan = Plan::Io {
            op,
            lba: changed.first().map(|&(lba, _)| lba),
            writes: true,
            changes: None,
        };
        Ok((plan, changed))
    }

    /// VERIFY (10)/(12)/(16) (SBC-4 §5.35–5.37). BYTCHK 00b: the medium is always readable;
    /// 01b: compare the Data-Out blocks; 11b: compare one Data-Out block with every block.
    pub(crate) fn verify(
        &self,
        info: &CommandInfo,
        v: &Verify,
        data_out: u32,
    ) -> Result<Plan, Sense> {
        let (offset, len) = self.range(info, v.lba, v.verification_length)?;
        let (pattern, block) = match v.bytchk {
            ByteCheck::None => return Ok(Plan::Good),
            ByteCheck::Compare => (len, 0),
            ByteCheck::CompareOneBlock => (self.block_size.min(len), self.block_size),
        };
        if data_out < pattern {
            return Err(Sense::new(
                SenseKey::IllegalRequest,
                Asc::PARAMETER_LIST_LENGTH_ERROR,
            ));
        }
        if len == 0 {
            return Ok(Plan::Good);
        }
        Ok(Plan::Io {
            op: Op::Compare { offset, len, block },
            lba: Some(v.lba),
            writes: false,
            changes: None,
        })
    }

    /// SYNCHRONIZE CACHE (10)/(16) (SBC-4 §5.32–5.33): flush the whole store (a range flush
    /// is allowed to do more than asked). IMMED is honoured by finishing before answering.
    pub(crate) fn synchronize_cache(&self, r: &CacheRange) -> Result<Plan, Sense> {
        self.cache_range(r)?;
        Ok(Plan::Io {
            op: Op::Flush,
            lba: None,
            writes: true,
            changes: None,
        })
    }

    /// PRE-FETCH (10)/(16) (SBC-4 §5.9–5.10). CONDITION MET means the blocks now sit in a
    /// cache; these stores have no cache separate from the medium, so there is nothing to
    /// fill and the answer is GOOD (the "insufficient cache" case), which is also what
    /// libiscsi 1.19's Prefetch tests accept.
    pub(crate) fn pre_fetch(&self, r: &CacheRange) -> Result<Plan, Sense> {
        self.cache_range(r)?;
        Ok(Plan::Good)
    }

    /// GET LBA STATUS (SBC-4 §5.8): how many extents the allocation length has room for (at
    /// least one, at most 64), and the operation that finds them on a thin unit; a fully
    /// provisioned unit reports every block mapped without asking the store.
    pub(crate) fn lba_status(
        &self,
        lba: u64,
        allocation_length: u32,
    ) -> Result<(usize, Option<Op>), Sense> {
        if lba >= self.blocks {
            return Err(lba_out_of_range());
        }
        let wanted = (allocation_length.saturating_sub(8) / 16).clamp(1, 64) as usize;
        let op = self.thin.then(|| Op::Extents {
            offset: lba * self.bs(),
            len: (self.blocks - lba) * self.bs(),
            max: wanted as u32,
        });
        Ok((wanted, op))
    }

    /// GET LBA STATUS parameter data from `lba` for the store's runs (allocated, bytes), or
    /// every block mapped for a fully provisioned unit: extents are whole blocks (a block
    /// partly allocated counts as mapped), each at most u32::MAX blocks.
    pub(crate) fn lba_status_data(
        &self,
        lba: u64,
        wanted: usize,
        runs: Option<&[(bool, u64)]>,
        out: &mut Vec<u8>,
    ) {
        let bs = self.bs();
        let mut extents = Vec::with_capacity(wanted);
        let mut at = lba;
        let mut runs = runs.map(|r| r.iter());
        while extents.len() < wanted && at < self.blocks {
            let span = (self.blocks - at).min(u64::from(u32::MAX));
            let (mapped, bytes) = match runs.as_mut() {
                None => (true, span * bs),
                Some(r) => match r.next() {
                    Some(&(mapped, bytes)) => (mapped, bytes.min(span * bs)),
                    None => break,
                },
            };
            let blocks = if mapped {
                bytes.div_ceil(bs)
            } else {
                bytes / bs
            };
            let (status, blocks) = match blocks {
                0 => (ProvisioningStatus::Mapped, 1),
                n if mapped => (ProvisioningStatus::Mapped, n),
                n => (ProvisioningStatus::Deallocated, n),
            };
            extents.push((at, blocks as u32, status));
            at += blocks;
        }
        provisioning::lba_status(&extents, out);
    }

    /// ILLEGAL REQUEST, INVALID FIELD IN CDB at BYTE TRANSFER LENGTH with ILI and INFORMATION
    /// = requested minus block length, when `length` is not the block size (SBC-4 READ LONG).
    pub(crate) fn long_length(&self, info: &CommandInfo, length: u16) -> Result<(), Sense> {
        if u32::from(length) == self.block_size {
            return Ok(());
        }
        let field = if info.cdb_length() == 10 { 7 } else { 12 };
        let mut sense = Sense::invalid_field_in_cdb(field, None);
        sense.ili = true;
        sense.information = Some((i64::from(length) - i64::from(self.block_size)) as u64);
        Err(sense)
    }

    /// READ LONG (10)/(16): the block's bytes (the stores keep no ECC, so a long block is the
    /// logical block itself), also of a block marked uncorrectable.
    pub(crate) fn read_long(
        &self,
        info: &CommandInfo,
        lba: u64,
        length: u16,
    ) -> Result<Plan, Sense> {
        if lba >= self.blocks {
            return Err(lba_out_of_range());
        }
        self.long_length(info, length)?;
        Ok(Plan::Io {
            op: Op::Read {
                offset: lba * self.bs(),
                len: self.block_size,
            },
            lba: Some(lba),
            writes: false,
            changes: None,
        })
    }

    /// WRITE LONG (10)/(16) without WR_UNCOR: the Data-Out is the block's new bytes.
    pub(crate) fn write_long(
        &self,
        info: &CommandInfo,
        lba: u64,
        length: u16,
        data_out: u32,
    ) -> Result<Plan, Sense> {
        if lba >= self.blocks {
            return Err(lba_out_of_range());
        }
        self.long_length(info, length)?;
        if data_out < u32::from(length) {
            return Err(Sense::new(
                SenseKey::IllegalRequest,
                Asc::PARAMETER_LIST_LENGTH_ERROR,
            ));
        }
        Ok(self.write(
            lba,
            lba * self.bs(),
            self.block_size,
            self.block_size,
            false,
            false,
        ))
    }

    /// FORMAT UNIT (SBC-4 §5.4) with the defaults: every block is deallocated, so the medium
    /// reads as zeros.
    pub(crate) fn format(&self) -> Plan {
        Plan::Io {
            op: Op::Unmap {
                ranges: vec![(0, self.blocks * self.bs())],
                durable: !self.write_cache,
            },
            lba: None,
            writes: true,
            changes: Some((0, self.blocks)),
        }
    }
}

/// The status a medium command's data-plane operation ends with: GOOD, MISCOMPARE with
/// INFORMATION = the offset of the first differing byte (SBC-4 §5.3, §5.35), or a store
/// failure as MEDIUM ERROR (HARDWARE ERROR when the request itself was bad).
pub(crate) fn completion(done: &Done, lba: Option<u64>, writes: bool) -> Completion {
    match done {
        Done::Miscompare(at) => {
            let mut sense = Sense::new(SenseKey::Miscompare, Asc::MISCOMPARE_DURING_VERIFY);
            sense.information = Some(*at);
            Completion::check_condition(sense)
        }
        Done::Failed(f) => {
            let asc = match f {
                Failure::Write { .. } if writes => Asc::WRITE_ERROR,
                _ => Asc::UNRECOVERED_READ_ERROR,
            };
            store_failure(f.error(), SenseKey::MediumError, asc, lba)
        }
        Done::Ok | Done::Extents(_) | Done::Usage(_) | Done::Shared(_) | Done::Stale(_) => {
            Completion::GOOD
        }
    }
}

/// Linux errno values a store's failures carry that have a sense of their own.
const ENOSPC: i32 = 28;
const EDQUOT: i32 = 122;
const ESHUTDOWN: i32 = 108;
const ETIMEDOUT: i32 = 110;

/// A store failure as `key`/`asc`, unless its cause has a more precise sense, logged with its
/// cause (the host sees only the sense, the operator needs the cause):
/// - past the store's end ([`store::BeyondEnd`]: a shrink cut the range after the command's
///   range check): ILLEGAL REQUEST, LOGICAL BLOCK ADDRESS OUT OF RANGE, as the check would
///   answer now (SBC-4 §4.5);
/// - the request itself was bad (otherwise `InvalidInput`): HARDWARE ERROR, INTERNAL TARGET
///   FAILURE;
/// - a change the store has no space for (`ENOSPC`, or `EDQUOT`: a Ceph pool's quota): DATA
///   PROTECT, SPACE ALLOCATION FAILED WRITE PROTECT (27h/07h), thin provisioning's answer to
///   resource exhaustion (SBC-4 §4.7.3); the blocks are not damaged, so not MEDIUM ERROR;
/// - the store did not answer in time (`ETIMEDOUT`: librados's OSD or monitor timeout):
///   ABORTED COMMAND, LOGICAL UNIT COMMUNICATION TIME-OUT (08h/01h), which hosts retry;
/// - the store refuses this server for good (`ESHUTDOWN`: librados's `-EBLOCKLISTED`, another
///   client took the image's lock): NOT READY, MANUAL INTERVENTION REQUIRED (04h/03h).
pub(crate) fn store_failure(
    e: &std::io::Error,
    key: SenseKey,
    asc: Asc,
    lba: Option<u64>,
) -> Completion {
    let (key, asc) = store_sense(e, key, asc);
    tracing::error!(error = %e, ?key, ?asc, lba, "store I/O failed");
    let mut sense = Sense::new(key, asc);
    sense.information = lba;
    Completion::check_condition(sense)
}

/// How a write of a state the gateways share ([`Op::Share`]) that neither landed nor lost a
/// race ends: MEDIUM ERROR, WRITE ERROR (or what [`store_failure`] makes of the error) when
/// the store failed, HARDWARE ERROR for an answer no plane gives.
pub(crate) fn share_failed(done: &Done) -> Completion {
    match done {
        Done::Failed(f) => store_failure(f.error(), SenseKey::MediumError, Asc::WRITE_ERROR, None),
        _ => Completion::check_condition(Sense::new(
            SenseKey::HardwareError,
            Asc::INTERNAL_TARGET_FAILURE,
        )),
    }
}

/// The sense key and code of a store failure `e` that would otherwise be `key`/`asc` (see
/// [`store_failure`]).
fn store_sense(e: &std::io::Error, key: SenseKey, asc: Asc) -> (SenseKey, Asc) {
    if e.get_ref()
        .is_some_and(|cause| cause.is::<store::BeyondEnd>())
    {
        return (SenseKey::IllegalRequest, Asc::LBA_OUT_OF_RANGE);
    }
    if e.kind() == std::io::ErrorKind::InvalidInput {
        return (SenseKey::HardwareError, Asc::INTERNAL_TARGET_FAILURE);
    }
    match e.raw_os_error() {
        Some(ENOSPC | EDQUOT) if asc == Asc::WRITE_ERROR => (
            SenseKey::DataProtect,
            Asc::SPACE_ALLOCATION_FAILED_WRITE_PROTECT,
        ),
        Some(ETIMEDOUT) => (
            SenseKey::AbortedCommand,
            Asc::LOGICAL_UNIT_COMMUNICATION_TIME_OUT,
        ),
        Some(ESHUTDOWN) => (
            SenseKey::NotReady,
            Asc::LOGICAL_UNIT_NOT_READY_MANUAL_INTERVENTION_REQUIRED,
        ),
        _ => (key, asc),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Error, ErrorKind};

    #[test]
    fn store_failures_map_to_precise_sense() {
        let write = |e: &Error| store_sense(e, SenseKey::MediumError, Asc::WRITE_ERROR);
        let read = |e: &Error| store_sense(e, SenseKey::MediumError, Asc::UNRECOVERED_READ_ERROR);
        let full = (
            SenseKey::DataProtect,
            Asc::SPACE_ALLOCATION_FAILED_WRITE_PROTECT,
        );
        assert_eq!(Asc::SPACE_ALLOCATION_FAILED_WRITE_PROTECT, Asc(0x27, 0x07));
        assert_eq!(write(&Error::from_raw_os_error(ENOSPC)), full);
        assert_eq!(write(&Error::from_raw_os_error(EDQUOT)), full);
        // A read cannot run out of space: an ENOSPC there stays what the caller said.
        assert_eq!(
            read(&Error::from_raw_os_error(ENOSPC)),
            (SenseKey::MediumError, Asc::UNRECOVERED_READ_ERROR)
        );
        let timeout = (
            SenseKey::AbortedCommand,
            Asc::LOGICAL_UNIT_COMMUNICATION_TIME_OUT,
        );
        assert_eq!(Asc::LOGICAL_UNIT_COMMUNICATION_TIME_OUT, Asc(0x08, 0x01));
        assert_eq!(write(&Error::from_raw_os_error(ETIMEDOUT)), timeout);
        assert_eq!(read(&Error::from_raw_os_error(ETIMEDOUT)), timeout);
        let gone = (
            SenseKey::NotReady,
            Asc::LOGICAL_UNIT_NOT_READY_MANUAL_INTERVENTION_REQUIRED,
        );
        assert_eq!(
            Asc::LOGICAL_UNIT_NOT_READY_MANUAL_INTERVENTION_REQUIRED,
            Asc(0x04, 0x03)
        );
        assert_eq!(read(&Error::from_raw_os_error(ESHUTDOWN)), gone);
        // EIO, and errors without an errno: the caller's MEDIUM ERROR.
        assert_eq!(
            write(&Error::from_raw_os_error(5)),
            (SenseKey::MediumError, Asc::WRITE_ERROR)
        );
        assert_eq!(
            read(&Error::other("short read")),
            (SenseKey::MediumError, Asc::UNRECOVERED_READ_ERROR)
        );
        assert_eq!(
            write(&Error::new(ErrorKind::InvalidInput, "bad range")),
            (SenseKey::HardwareError, Asc::INTERNAL_TARGET_FAILURE)
        );
        let cut = store::BeyondEnd {
            offset: 4096,
            len: 512,
            store_len: 2048,
        };
        assert_eq!(
            read(&Error::new(ErrorKind::InvalidInput, cut)),
            (SenseKey::IllegalRequest, Asc::LBA_OUT_OF_RANGE)
        );
    }
}
