//! READ LONG and WRITE LONG (10)/(16) (SBC-4). The stores keep a logical block's bytes and no
//! ECC, so a long block is the logical block itself. WRITE LONG with WR_UNCOR marks a block
//! uncorrectable: READ and VERIFY of it then fail with MEDIUM ERROR, UNRECOVERED READ ERROR
//! until a write changes the block.

use crate::logical_unit::{check, LogicalUnit};
use crate::Completion;
use parking_lot::Mutex;
use scsi::{Asc, CommandInfo, Sense, SenseKey};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};

/// The blocks WRITE LONG marked uncorrectable. `any` keeps reads of a unit with none (the
/// usual case) to one relaxed load.
#[derive(Default)]
pub(crate) struct Uncorrectable {
    any: AtomicBool,
    blocks: Mutex<BTreeSet<u64>>,
}

impl Uncorrectable {
    fn mark(&self, lba: u64) {
        self.blocks.lock().insert(lba);
        self.any.store(true, Ordering::Relaxed);
    }

    /// `blocks` from `lba` were written: they read back again.
    pub(crate) fn clear(&self, lba: u64, blocks: u64) {
        if !self.any.load(Ordering::Relaxed) {
            return;
        }
        let mut marked = self.blocks.lock();
        let end = lba.saturating_add(blocks);
        let gone: Vec<u64> = marked.range(lba..end).copied().collect();
        gone.iter().for_each(|b| {
            marked.remove(b);
        });
        self.any.store(!marked.is_empty(), Ordering::Relaxed);
    }

    /// The first block marked uncorrectable among `blocks` from `lba`.
    pub(crate) fn first(&self, lba: u64, blocks: u64) -> Option<u64> {
        if !self.any.load(Ordering::Relaxed) {
            return None;
        }
        let end = lba.saturating_add(blocks);
        self.blocks.lock().range(lba..end).next().copied()
    }
}

/// MEDIUM ERROR, UNRECOVERED READ ERROR at the marked block.
pub(crate) fn unrecovered(lba: u64) -> Completion {
    let mut sense = Sense::new(SenseKey::MediumError, Asc::UNRECOVERED_READ_ERROR);
    sense.information = Some(lba);
    check(sense)
}

impl LogicalUnit {
    /// ILLEGAL REQUEST, INVALID FIELD IN CDB at BYTE TRANSFER LENGTH with ILI and INFORMATION
    /// = requested minus block length, when `length` is not the block size (SBC-4).
    fn long_length(&self, info: &CommandInfo, length: u16) -> Result<(), Sense> {
        let bs = self.block_size();
        if u32::from(length) == bs {
            return Ok(());
        }
        let field = if info.cdb_length() == 10 { 7 } else { 12 };
        let mut sense = Sense::invalid_field_in_cdb(field, None);
        sense.ili = true;
        sense.information = Some((i64::from(length) - i64::from(bs)) as u64);
        Err(sense)
    }

    fn long_lba(&self, lba: u64) -> Result<(), Sense> {
        if lba >= self.blocks() {
            return Err(Sense::lba_out_of_range());
        }
        Ok(())
    }

    /// READ LONG (10)/(16): the block's bytes, also of a block marked uncorrectable (reading
    /// what is there is what READ LONG is for).
    pub(crate) fn read_long(
        &self,
        info: &CommandInfo,
        lba: u64,
        length: u16,
        data_in: &mut Vec<u8>,
    ) -> Completion {
        if let Err(sense) = self
            .long_lba(lba)
            .and_then(|()| self.long_length(info, length))
        {
            return check(sense);
        }
        let start = data_in.len();
        data_in.resize(start + usize::from(length), 0);
        let offset = lba * u64::from(self.block_size());
        match self.store.read_at(offset, &mut data_in[start..]) {
            Ok(()) => Completion::GOOD,
            Err(e) => {
                data_in.truncate(start);
                self.io_error(
                    &e,
                    SenseKey::MediumError,
                    Asc::UNRECOVERED_READ_ERROR,
                    Some(lba),
                )
            }
        }
    }

    /// WRITE LONG (10)/(16): WR_UNCOR marks the block uncorrectable (the data stays); else
    /// the Data-Out is the block's new bytes.
    pub(crate) fn write_long(
        &self,
        info: &CommandInfo,
        lba: u64,
        length: u16,
        wr_uncor: bool,
        data_out: &[u8],
    ) -> Completion {
        if self.write_protected() {
            return check(Sense::new(SenseKey::DataProtect, Asc::WRITE_PROTECTED));
        }
        if let Err(sense) = self.long_lba(lba) {
            return check(sense);
        }
        if wr_uncor {
            let _held = self.ranges.lock(lba, 1);
            // Tokens that represent the block are revoked: its data is lost to readers.
            self.written(lba, 1);
            self.uncorrectable.mark(lba);
            return Completion::GOOD;
        }
        if let Err(sense) = self.long_length(info, length) {
            return check(sense);
        }
        let len = usize::from(length);
        let Some(block) = data_out.get(..len) else {
            return check(Sense::new(
                SenseKey::IllegalRequest,
                Asc::PARAMETER_LIST_LENGTH_ERROR,
            ));
        };
        let offset = lba * u64::from(self.block_size());
        let _held = self.ranges.lock(lba, 1);
        self.store_blocks(lba, offset, len, block, false)
    }
}
