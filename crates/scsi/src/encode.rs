//! CDB encoders, one per table entry, the inverses of the decoders in decode.rs: an initiator
//! (`stint bench`, `stint cdl`, the simulator's host, the tests) writes
//! `Command::Read(rw).emit(form::READ_16)`. The form is the table entry because several
//! decode to one command (READ(6) to READ(32) are all `Command::Read`). A value the form
//! cannot carry is refused, so what is sent decodes to what was meant.

use crate::cdb::{or8, put16, put32, put64, set_bit, u8_at};
use crate::command::*;
use crate::persistent_reserve::MAX_PARAMETER_LIST;
use crate::table::{CommandInfo, ServiceActionField};
use std::fmt;

/// The longest CDB: the variable length ones.
const MAX_CDB: usize = 32;

/// An encoded CDB; it derefs to its bytes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Cdb {
    bytes: [u8; MAX_CDB],
    len: u8,
}

impl std::ops::Deref for Cdb {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

impl fmt::Debug for Cdb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:02x?}", &**self)
    }
}

/// Why a command was not encoded in a form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EncodeError {
    /// The form is another command's: a WRITE in READ(16)'s, PERSISTENT RESERVE OUT with
    /// RESERVE in REGISTER's.
    OtherCommand { form: &'static str },
    /// The value of `field` does not fit the form: an LBA above 21 bits in READ(6), a DLD in
    /// READ(10).
    DoesNotFit {
        form: &'static str,
        field: &'static str,
    },
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::OtherCommand { form } => write!(f, "{form} encodes another command"),
            Self::DoesNotFit { form, field } => write!(f, "{field} does not fit {form}"),
        }
    }
}

impl std::error::Error for EncodeError {}

/// What an entry's encoder refuses; [`Command::emit`] adds the form's name.
pub(crate) enum Misfit {
    Command,
    Field(&'static str),
}

pub(crate) type Encoded = Result<(), Misfit>;

const OTHER: Encoded = Err(Misfit::Command);

impl Command {
    /// This command's CDB in `form`, an entry of the command table ([`crate::form`]): the
    /// operation code and service action from the entry, every other field from `self`.
    ///
    /// ```
    /// use scsi::command::{Command, ReadWrite};
    /// let rw = ReadWrite { lba: 1 << 40, transfer_length: 8, dpo: false, fua: false, group_number: 0, dld: 2 };
    /// let cdb = Command::Read(rw).emit(scsi::form::READ_16)?;
    /// assert_eq!(scsi::decode(&cdb).map(|(_, c)| c), Ok(Command::Read(rw)));
    /// assert!(Command::Read(rw).emit(scsi::form::READ_10).is_err(), "no LBA above 32 bits, no DLD");
    /// # Ok::<(), scsi::encode::EncodeError>(())
    /// ```
    pub fn emit(&self, form: &CommandInfo) -> Result<Cdb, EncodeError> {
        let len = form.cdb_length().min(MAX_CDB);
        let mut cdb = Cdb {
            bytes: [0; MAX_CDB],
            len: len as u8,
        };
        let c = &mut cdb.bytes[..len];
        c[0] = form.opcode();
        match (ServiceActionField::of(form.opcode()), form.service_action) {
            (Some(ServiceActionField::Byte1), Some(sa)) => or8(c, 1, (sa & 0x1F) as u8),
            // ADDITIONAL CDB LENGTH, then the service action (SPC-5 variable length CDB).
            (Some(ServiceActionField::Bytes8To9), Some(sa)) => {
                or8(c, 7, (len - 8) as u8);
                put16(c, 8, sa);
            }
            _ => {}
        }
        (form.encode)(self, c).map_err(|m| match m {
            Misfit::Command => EncodeError::OtherCommand { form: form.name },
            Misfit::Field(field) => EncodeError::DoesNotFit {
                form: form.name,
                field,
            },
        })?;
        // No bit outside the entry's CDB usage data: decoding refuses those, and the tests and
        // the codec fuzz target decode what was encoded.
        Ok(cdb)
    }
}

/// READ(16) or WRITE(16) of `blocks` logical blocks at `lba` with duration limit descriptor
/// `dld` (its three low bits; 0 = none): the shorthand crates/device's tests build their
/// medium commands with.
pub fn rw16(write: bool, lba: u64, blocks: u32, dld: u8) -> [u8; 16] {
    let rw = ReadWrite {
        lba,
        transfer_length: blocks,
        dpo: false,
        fua: false,
        group_number: 0,
        dld: dld & 7,
    };
    let (cmd, form) = if write {
        (Command::Write(rw), crate::form::WRITE_16)
    } else {
        (Command::Read(rw), crate::form::READ_16)
    };
    let mut out = [0; 16];
    // Every LBA, length and 3-bit DLD fits READ(16)/WRITE(16).
    if let Ok(cdb) = cmd.emit(form) {
        out.copy_from_slice(&cdb);
    }
    out
}

/// An UNMAP parameter list (SBC-4 table 121) of one block descriptor per (LBA, blocks).
pub fn unmap_parameter_list(ranges: &[(u64, u32)]) -> Vec<u8> {
    let descriptors = u16::try_from(16 * ranges.len()).unwrap_or(u16::MAX - 6);
    let mut l = Vec::with_capacity(8 + 16 * ranges.len());
    l.extend_from_slice(&(descriptors + 6).to_be_bytes());
    l.extend_from_slice(&descriptors.to_be_bytes());
    l.extend_from_slice(&[0; 4]);
    for (lba, blocks) in ranges {
        l.extend_from_slice(&lba.to_be_bytes());
        l.extend_from_slice(&blocks.to_be_bytes());
        l.extend_from_slice(&[0; 4]);
    }
    l
}

/// `v` in a narrower field, or the field's name.
fn fit<T: TryFrom<U>, U>(v: U, field: &'static str) -> Result<T, Misfit> {
    T::try_from(v).map_err(|_| Misfit::Field(field))
}

/// `v` when at most `max` (a field narrower than its byte).
fn at_most(v: u8, max: u8, field: &'static str) -> Result<u8, Misfit> {
    if v <= max {
        Ok(v)
    } else {
        Err(Misfit::Field(field))
    }
}

/// Refuses a field the form lacks when it is set.
fn absent(set: bool, field: &'static str) -> Encoded {
    if set {
        Err(Misfit::Field(field))
    } else {
        Ok(())
    }
}

/// Whether the service action already in byte 1 is `code`: a command's own service action
/// must be its form's.
fn service_action_is(c: &[u8], code: u8) -> Encoded {
    if u8_at(c, 1) & 0x1F == code {
        Ok(())
    } else {
        OTHER
    }
}

pub(crate) fn test_unit_ready(cmd: &Command, _: &mut [u8]) -> Encoded {
    match cmd {
        Command::TestUnitReady => Ok(()),
        _ => OTHER,
    }
}

/// REQUEST SENSE (SPC-5 table 276).
pub(crate) fn request_sense(cmd: &Command, c: &mut [u8]) -> Encoded {
    let Command::RequestSense {
        desc,
        allocation_length,
    } = *cmd
    else {
        return OTHER;
    };
    set_bit(c, 1, 0, desc);
    or8(c, 4, allocation_length);
    Ok(())
}

/// INQUIRY (SPC-5 table 145): a page code needs EVPD.
pub(crate) fn inquiry(cmd: &Command, c: &mut [u8]) -> Encoded {
    let Command::Inquiry(i) = cmd else {
        return OTHER;
    };
    absent(!i.evpd && i.page_code != 0, "PAGE CODE")?;
    set_bit(c, 1, 0, i.evpd);
    or8(c, 2, i.page_code);
    put16(c, 3, i.allocation_length);
    Ok(())
}

/// RESERVE (6)/(10) (SPC-2 §7.21, §7.22): no third-party or extent fields.
pub(crate) fn reserve(cmd: &Command, _: &mut [u8]) -> Encoded {
    match cmd {
        Command::Reserve => Ok(()),
        _ => OTHER,
    }
}

/// RELEASE (6)/(10) (SPC-2 §7.16, §7.17).
pub(crate) fn release(cmd: &Command, _: &mut [u8]) -> Encoded {
    match cmd {
        Command::Release => Ok(()),
        _ => OTHER,
    }
}

/// PERSISTENT RESERVE IN (SPC-4 table 200).
pub(crate) fn persistent_reserve_in(cmd: &Command, c: &mut [u8]) -> Encoded {
    let Command::PersistentReserveIn(p) = cmd else {
        return OTHER;
    };
    service_action_is(c, p.service_action.code())?;
    put16(c, 7, p.allocation_length);
    Ok(())
}

/// PERSISTENT RESERVE OUT (SPC-4 table 212): no longer a parameter list than the device takes.
pub(crate) fn persistent_reserve_out(cmd: &Command, c: &mut [u8]) -> Encoded {
    let Command::PersistentReserveOut(p) = cmd else {
        return OTHER;
    };
    service_action_is(c, p.service_action.code())?;
    absent(
        p.parameter_list_length > MAX_PARAMETER_LIST,
        "PARAMETER LIST LENGTH",
    )?;
    or8(c, 2, p.scope_type);
    put32(c, 5, p.parameter_list_length);
    Ok(())
}

/// REPORT LUNS (SPC-5 table 262).
pub(crate) fn report_luns(cmd: &Command, c: &mut [u8]) -> Encoded {
    let Command::ReportLuns {
        select_report,
        allocation_length,
    } = *cmd
    else {
        return OTHER;
    };
    or8(c, 2, select_report);
    put32(c, 6, allocation_length);
    Ok(())
}

/// READ CAPACITY (10) (SBC-4 table 63): PMI = 0 and LBA 0.
pub(crate) fn read_capacity_10(cmd: &Command, _: &mut [u8]) -> Encoded {
    match cmd {
        Command::ReadCapacity10 => Ok(()),
        _ => OTHER,
    }
}

/// READ CAPACITY (16) (SBC-4 table 65).
pub(crate) fn read_capacity_16(cmd: &Command, c: &mut [u8]) -> Encoded {
    let Command::ReadCapacity16 { allocation_length } = *cmd else {
        return OTHER;
    };
    put32(c, 10, allocation_length);
    Ok(())
}

/// DPO and FUA in byte 1 bits 4 and 3 (bits 4 and 3 of `flags`), GROUP NUMBER in byte
/// `group` (at most `group_max`: 3Fh, or 1Fh where the CDB has five bits for it).
fn flags_and_group(
    r: &ReadWrite,
    c: &mut [u8],
    flags: usize,
    group: usize,
    group_max: u8,
) -> Encoded {
    set_bit(c, flags, 4, r.dpo);
    set_bit(c, flags, 3, r.fua);
    or8(
        c,
        group,
        at_most(r.group_number, group_max, "GROUP NUMBER")?,
    );
    Ok(())
}

/// READ (6)/WRITE (6) (SBC-4 tables 80, 121): a 21-bit LBA and 1–256 blocks (256 is sent as
/// 0); no DPO, FUA, group or DLD.
fn fields6(r: &ReadWrite, c: &mut [u8]) -> Encoded {
    absent(r.lba > 0x1F_FFFF, "LOGICAL BLOCK ADDRESS")?;
    let length = match r.transfer_length {
        256 => 0,
        1..=255 => r.transfer_length as u8,
        _ => return Err(Misfit::Field("TRANSFER LENGTH")),
    };
    absent(r.dpo || r.fua, "DPO/FUA")?;
    absent(r.group_number != 0, "GROUP NUMBER")?;
    absent(r.dld != 0, "DLD")?;
    or8(c, 1, (r.lba >> 16) as u8);
    put16(c, 2, r.lba as u16);
    or8(c, 4, length);
    Ok(())
}

/// (10)-byte layout (SBC-4 tables 81, 122): LBA 2..6, GROUP 6, TRANSFER LENGTH 7..9.
fn fields10(r: &ReadWrite, c: &mut [u8]) -> Encoded {
    absent(r.dld != 0, "DLD")?;
    put32(c, 2, fit(r.lba, "LOGICAL BLOCK ADDRESS")?);
    put16(c, 7, fit(r.transfer_length, "TRANSFER LENGTH")?);
    flags_and_group(r, c, 1, 6, 0x3F)
}

/// (12)-byte layout (SBC-4 tables 82, 123): LBA 2..6, TRANSFER LENGTH 6..10, GROUP 10.
fn fields12(r: &ReadWrite, c: &mut [u8]) -> Encoded {
    absent(r.dld != 0, "DLD")?;
    put32(c, 2, fit(r.lba, "LOGICAL BLOCK ADDRESS")?);
    put32(c, 6, r.transfer_length);
    flags_and_group(r, c, 1, 10, 0x3F)
}

/// (16)-byte layout without DLD (SBC-4 READ(16)/WRITE(16) tables): LBA 2..10, TRANSFER
/// LENGTH 10..14, GROUP in byte 14.
fn fields16(r: &ReadWrite, c: &mut [u8], group_max: u8) -> Encoded {
    put64(c, 2, r.lba);
    put32(c, 10, r.transfer_length);
    flags_and_group(r, c, 1, 14, group_max)
}

/// READ(16)/WRITE(16) (SBC-5): DLD2 in byte 1 bit 0, DLD1:DLD0 in byte 14 bits 7:6.
fn fields16_dld(r: &ReadWrite, c: &mut [u8]) -> Encoded {
    let dld = at_most(r.dld, 7, "DLD")?;
    or8(c, 1, dld >> 2);
    or8(c, 14, (dld & 3) << 6);
    fields16(r, c, 0x3F)
}

/// READ(32)/WRITE(32) (SBC-4 READ(32) and WRITE(32) tables): GROUP NUMBER in byte 6, DPO and
/// FUA in byte 10, DLD2:DLD0 in byte 11 bits 2:0 (SBC-5), LBA 12..20, TRANSFER LENGTH 28..32.
fn fields32(r: &ReadWrite, c: &mut [u8]) -> Encoded {
    or8(c, 11, at_most(r.dld, 7, "DLD")?);
    put64(c, 12, r.lba);
    put32(c, 28, r.transfer_length);
    flags_and_group(r, c, 10, 6, 0x3F)
}

pub(crate) fn read6(cmd: &Command, c: &mut [u8]) -> Encoded {
    let Command::Read(r) = cmd else { return OTHER };
    fields6(r, c)
}
pub(crate) fn read10(cmd: &Command, c: &mut [u8]) -> Encoded {
    let Command::Read(r) = cmd else { return OTHER };
    fields10(r, c)
}
pub(crate) fn read12(cmd: &Command, c: &mut [u8]) -> Encoded {
    let Command::Read(r) = cmd else { return OTHER };
    fields12(r, c)
}
pub(crate) fn read16(cmd: &Command, c: &mut [u8]) -> Encoded {
    let Command::Read(r) = cmd else { return OTHER };
    fields16_dld(r, c)
}
pub(crate) fn read32(cmd: &Command, c: &mut [u8]) -> Encoded {
    let Command::Read(r) = cmd else { return OTHER };
    fields32(r, c)
}
pub(crate) fn write6(cmd: &Command, c: &mut [u8]) -> Encoded {
    let Command::Write(r) = cmd else { return OTHER };
    fields6(r, c)
}
pub(crate) fn write10(cmd: &Command, c: &mut [u8]) -> Encoded {
    let Command::Write(r) = cmd else { return OTHER };
    fields10(r, c)
}
pub(crate) fn write12(cmd: &Command, c: &mut [u8]) -> Encoded {
    let Command::Write(r) = cmd else { return OTHER };
    fields12(r, c)
}
pub(crate) fn write16(cmd: &Command, c: &mut [u8]) -> Encoded {
    let Command::Write(r) = cmd else { return OTHER };
    fields16_dld(r, c)
}
pub(crate) fn write32(cmd: &Command, c: &mut [u8]) -> Encoded {
    let Command::Write(r) = cmd else { return OTHER };
    fields32(r, c)
}

/// ORWRITE (16) (SBC-4 §5.8, table 75): the (16) layout without DLD, a 5-bit group number.
pub(crate) fn orwrite16(cmd: &Command, c: &mut [u8]) -> Encoded {
    let Command::OrWrite(r) = cmd else {
        return OTHER;
    };
    absent(r.dld != 0, "DLD")?;
    fields16(r, c, 0x1F)
}

/// COMPARE AND WRITE (SBC-4 §5.3, table 42): NUMBER OF LOGICAL BLOCKS in byte 13.
pub(crate) fn compare_and_write(cmd: &Command, c: &mut [u8]) -> Encoded {
    let Command::CompareAndWrite(r) = cmd else {
        return OTHER;
    };
    absent(r.dld != 0, "DLD")?;
    put64(c, 2, r.lba);
    or8(c, 13, fit(r.transfer_length, "NUMBER OF LOGICAL BLOCKS")?);
    flags_and_group(r, c, 1, 14, 0x3F)
}

/// REQ_PLIST, REQ_GLIST and DEFECT LIST FORMAT, as READ DEFECT DATA (10) and (12) put them
/// in byte `at` (SBC-4 tables 44, 47).
fn defect_lists(r: &ReadDefectData, c: &mut [u8], at: usize) -> Encoded {
    set_bit(c, at, 4, r.req_plist);
    set_bit(c, at, 3, r.req_glist);
    or8(
        c,
        at,
        at_most(r.defect_list_format, 7, "DEFECT LIST FORMAT")?,
    );
    Ok(())
}

/// READ DEFECT DATA (10) (SBC-4 §5.12, table 44).
pub(crate) fn read_defect_data10(cmd: &Command, c: &mut [u8]) -> Encoded {
    let Command::ReadDefectData(r) = cmd else {
        return OTHER;
    };
    absent(r.long, "the 8-byte header")?;
    defect_lists(r, c, 2)?;
    put16(c, 7, fit(r.allocation_length, "ALLOCATION LENGTH")?);
    Ok(())
}

/// READ DEFECT DATA (12) (SBC-4 §5.13, table 47); ADDRESS DESCRIPTOR INDEX 0.
pub(crate) fn read_defect_data12(cmd: &Command, c: &mut [u8]) -> Encoded {
    let Command::ReadDefectData(r) = cmd else {
        return OTHER;
    };
    absent(!r.long, "the 4-byte header")?;
    defect_lists(r, c, 1)?;
    put32(c, 6, r.allocation_length);
    Ok(())
}

/// WRITE SAME (10) (SBC-4 §5.46, table 124): no NDOB.
pub(crate) fn write_same10(cmd: &Command, c: &mut [u8]) -> Encoded {
    let Command::WriteSame(w) = cmd else {
        return OTHER;
    };
    absent(w.ndob, "NDOB")?;
    set_bit(c, 1, 3, w.unmap);
    put32(c, 2, fit(w.lba, "LOGICAL BLOCK ADDRESS")?);
    or8(c, 6, at_most(w.group_number, 0x3F, "GROUP NUMBER")?);
    put16(
        c,
        7,
        fit(w.number_of_logical_blocks, "NUMBER OF LOGICAL BLOCKS")?,
    );
    Ok(())
}

/// WRITE SAME (16) (SBC-4 §5.47, table 125).
pub(crate) fn write_same16(cmd: &Command, c: &mut [u8]) -> Encoded {
    let Command::WriteSame(w) = cmd else {
        return OTHER;
    };
    set_bit(c, 1, 3, w.unmap);
    set_bit(c, 1, 0, w.ndob);
    put64(c, 2, w.lba);
    put32(c, 10, w.number_of_logical_blocks);
    or8(c, 14, at_most(w.group_number, 0x3F, "GROUP NUMBER")?);
    Ok(())
}

/// WRITE SAME (32) (SBC-4): UNMAP and NDOB in byte 10, GROUP NUMBER in byte 6, LBA 12..20,
/// NUMBER OF LOGICAL BLOCKS 28..32.
pub(crate) fn write_same32(cmd: &Command, c: &mut [u8]) -> Encoded {
    let Command::WriteSame(w) = cmd else {
        return OTHER;
    };
    set_bit(c, 10, 3, w.unmap);
    set_bit(c, 10, 0, w.ndob);
    or8(c, 6, at_most(w.group_number, 0x3F, "GROUP NUMBER")?);
    put64(c, 12, w.lba);
    put32(c, 28, w.number_of_logical_blocks);
    Ok(())
}

/// UNMAP (SBC-4 §5.30, table 120).
pub(crate) fn unmap(cmd: &Command, c: &mut [u8]) -> Encoded {
    let Command::Unmap(u) = cmd else {
        return OTHER;
    };
    or8(c, 6, at_most(u.group_number, 0x3F, "GROUP NUMBER")?);
    put16(c, 7, u.parameter_list_length);
    Ok(())
}

/// GET LBA STATUS (SBC-4 §5.8, table 69).
pub(crate) fn get_lba_status(cmd: &Command, c: &mut [u8]) -> Encoded {
    let Command::GetLbaStatus {
        lba,
        allocation_length,
    } = *cmd
    else {
        return OTHER;
    };
    put64(c, 2, lba);
    put32(c, 10, allocation_length);
    Ok(())
}

/// BYTCHK in byte 1 bits 2:1 (SBC-4 table 89).
fn bytchk(b: ByteCheck, c: &mut [u8]) {
    let code = match b {
        ByteCheck::None => 0,
        ByteCheck::Compare => 1,
        ByteCheck::CompareOneBlock => 3,
    };
    or8(c, 1, code << 1);
}

/// A VERIFY's fields as the READ layouts hold them (no FUA, no DLD).
fn verify_fields(v: &Verify) -> ReadWrite {
    ReadWrite {
        lba: v.lba,
        transfer_length: v.verification_length,
        dpo: v.dpo,
        fua: false,
        group_number: v.group_number,
        dld: 0,
    }
}

/// VERIFY (10)/(12)/(16) (SBC-4 §5.35–5.37): the READ layout of the same length.
fn verify(cmd: &Command, c: &mut [u8], layout: fn(&ReadWrite, &mut [u8]) -> Encoded) -> Encoded {
    let Command::Verify(v) = cmd else {
        return OTHER;
    };
    bytchk(v.bytchk, c);
    layout(&verify_fields(v), c)
}
pub(crate) fn verify10(cmd: &Command, c: &mut [u8]) -> Encoded {
    verify(cmd, c, fields10)
}
pub(crate) fn verify12(cmd: &Command, c: &mut [u8]) -> Encoded {
    verify(cmd, c, fields12)
}
pub(crate) fn verify16(cmd: &Command, c: &mut [u8]) -> Encoded {
    verify(cmd, c, |r, c| fields16(r, c, 0x3F))
}

/// WRITE AND VERIFY (10)/(12)/(16) (SBC-4 §5.43–5.45): BYTCHK 00b or 01b (table 118).
fn write_and_verify(
    cmd: &Command,
    c: &mut [u8],
    layout: fn(&ReadWrite, &mut [u8]) -> Encoded,
) -> Encoded {
    let Command::WriteAndVerify(w) = cmd else {
        return OTHER;
    };
    absent(w.bytchk == ByteCheck::CompareOneBlock, "BYTCHK")?;
    bytchk(w.bytchk, c);
    let r = ReadWrite {
        lba: w.lba,
        transfer_length: w.transfer_length,
        dpo: w.dpo,
        fua: false,
        group_number: w.group_number,
        dld: 0,
    };
    layout(&r, c)
}
pub(crate) fn write_and_verify10(cmd: &Command, c: &mut [u8]) -> Encoded {
    write_and_verify(cmd, c, fields10)
}
pub(crate) fn write_and_verify12(cmd: &Command, c: &mut [u8]) -> Encoded {
    write_and_verify(cmd, c, fields12)
}
pub(crate) fn write_and_verify16(cmd: &Command, c: &mut [u8]) -> Encoded {
    write_and_verify(cmd, c, |r, c| fields16(r, c, 0x3F))
}

/// IMMED (byte 1 bit 1) and the range of SYNCHRONIZE CACHE (10)/(16) and PRE-FETCH (10)/(16)
/// (SBC-4 §5.32–5.33, §5.9–5.10), in the (10) or (16) layout.
fn cache_range(r: &CacheRange, c: &mut [u8], sixteen: bool) -> Encoded {
    set_bit(c, 1, 1, r.immed);
    if sixteen {
        put64(c, 2, r.lba);
        put32(c, 10, r.number_of_logical_blocks);
    } else {
        put32(c, 2, fit(r.lba, "LOGICAL BLOCK ADDRESS")?);
        put16(
            c,
            7,
            fit(r.number_of_logical_blocks, "NUMBER OF LOGICAL BLOCKS")?,
        );
    }
    Ok(())
}
pub(crate) fn synchronize_cache10(cmd: &Command, c: &mut [u8]) -> Encoded {
    let Command::SynchronizeCache(r) = cmd else {
        return OTHER;
    };
    cache_range(r, c, false)
}
pub(crate) fn synchronize_cache16(cmd: &Command, c: &mut [u8]) -> Encoded {
    let Command::SynchronizeCache(r) = cmd else {
        return OTHER;
    };
    cache_range(r, c, true)
}
pub(crate) fn pre_fetch10(cmd: &Command, c: &mut [u8]) -> Encoded {
    let Command::PreFetch(r) = cmd else {
        return OTHER;
    };
    cache_range(r, c, false)
}
pub(crate) fn pre_fetch16(cmd: &Command, c: &mut [u8]) -> Encoded {
    let Command::PreFetch(r) = cmd else {
        return OTHER;
    };
    cache_range(r, c, true)
}

/// MODE SENSE's DBD, PC, PAGE CODE and SUBPAGE CODE (SPC-5 tables 165, 167, 169); `ten` is
/// the form's.
fn mode_sense(cmd: &Command, c: &mut [u8], ten: bool) -> Result<u16, Misfit> {
    let Command::ModeSense(m) = cmd else {
        return Err(Misfit::Command);
    };
    absent(m.ten != ten, "the header length")?;
    absent(!ten && m.llbaa, "LLBAA")?;
    let pc = match m.pc {
        PageControl::Current => 0,
        PageControl::Changeable => 1,
        PageControl::Default => 2,
        PageControl::Saved => 3,
    };
    set_bit(c, 1, 4, m.llbaa);
    set_bit(c, 1, 3, m.dbd);
    or8(c, 2, pc << 6 | at_most(m.page_code, 0x3F, "PAGE CODE")?);
    or8(c, 3, m.subpage_code);
    Ok(m.allocation_length)
}
/// MODE SENSE (6) (SPC-5 table 167).
pub(crate) fn mode_sense6(cmd: &Command, c: &mut [u8]) -> Encoded {
    let length = mode_sense(cmd, c, false)?;
    or8(c, 4, fit(length, "ALLOCATION LENGTH")?);
    Ok(())
}
/// MODE SENSE (10) (SPC-5 table 169).
pub(crate) fn mode_sense10(cmd: &Command, c: &mut [u8]) -> Encoded {
    let length = mode_sense(cmd, c, true)?;
    put16(c, 7, length);
    Ok(())
}

/// MODE SELECT's PF and SP (SPC-5 tables 161, 163); `ten` is the form's.
fn mode_select(cmd: &Command, c: &mut [u8], ten: bool) -> Result<u16, Misfit> {
    let Command::ModeSelect(m) = cmd else {
        return Err(Misfit::Command);
    };
    absent(m.ten != ten, "the header length")?;
    set_bit(c, 1, 4, m.pf);
    set_bit(c, 1, 0, m.sp);
    Ok(m.parameter_list_length)
}
/// MODE SELECT (6) (SPC-5 table 161).
pub(crate) fn mode_select6(cmd: &Command, c: &mut [u8]) -> Encoded {
    let length = mode_select(cmd, c, false)?;
    or8(c, 4, fit(length, "PARAMETER LIST LENGTH")?);
    Ok(())
}
/// MODE SELECT (10) (SPC-5 table 163).
pub(crate) fn mode_select10(cmd: &Command, c: &mut [u8]) -> Encoded {
    let length = mode_select(cmd, c, true)?;
    put16(c, 7, length);
    Ok(())
}

/// PC (byte 2 bits 7:6) and PAGE CODE of LOG SENSE and LOG SELECT, and SUBPAGE CODE.
fn log_page(pc: LogPageControl, page_code: u8, subpage_code: u8, c: &mut [u8]) -> Encoded {
    let pc = match pc {
        LogPageControl::ThresholdValues => 0,
        LogPageControl::CumulativeValues => 1,
        LogPageControl::DefaultThresholdValues => 2,
        LogPageControl::DefaultCumulativeValues => 3,
    };
    or8(c, 2, pc << 6 | at_most(page_code, 0x3F, "PAGE CODE")?);
    or8(c, 3, subpage_code);
    Ok(())
}

/// LOG SENSE (SPC-5 LOG SENSE command table): SP 0.
pub(crate) fn log_sense(cmd: &Command, c: &mut [u8]) -> Encoded {
    let Command::LogSense(l) = cmd else {
        return OTHER;
    };
    log_page(l.pc, l.page_code, l.subpage_code, c)?;
    put16(c, 5, l.parameter_pointer);
    put16(c, 7, l.allocation_length);
    Ok(())
}

/// LOG SELECT (SPC-5 LOG SELECT command table): SP 0, no parameter list.
pub(crate) fn log_select(cmd: &Command, c: &mut [u8]) -> Encoded {
    let Command::LogSelect(l) = cmd else {
        return OTHER;
    };
    set_bit(c, 1, 1, l.pcr);
    log_page(l.pc, l.page_code, l.subpage_code, c)
}

/// START STOP UNIT (SBC-4 table 95).
pub(crate) fn start_stop_unit(cmd: &Command, c: &mut [u8]) -> Encoded {
    let Command::StartStopUnit(s) = cmd else {
        return OTHER;
    };
    set_bit(c, 1, 0, s.immed);
    or8(
        c,
        3,
        at_most(s.power_condition_modifier, 0x0F, "POWER CONDITION MODIFIER")?,
    );
    or8(
        c,
        4,
        at_most(s.power_condition, 0x0F, "POWER CONDITION")? << 4,
    );
    set_bit(c, 4, 2, s.no_flush);
    set_bit(c, 4, 1, s.loej);
    set_bit(c, 4, 0, s.start);
    Ok(())
}

/// PREVENT ALLOW MEDIUM REMOVAL (SBC-4 table 71): PREVENT 00b or 01b.
pub(crate) fn prevent_allow_medium_removal(cmd: &Command, c: &mut [u8]) -> Encoded {
    let Command::PreventAllowMediumRemoval { prevent } = *cmd else {
        return OTHER;
    };
    set_bit(c, 4, 0, prevent);
    Ok(())
}

/// REPORT SUPPORTED OPERATION CODES (SPC-5 table 256): REPORTING OPTIONS 000b–011b.
pub(crate) fn report_supported_operation_codes(cmd: &Command, c: &mut [u8]) -> Encoded {
    let Command::ReportSupportedOperationCodes(r) = cmd else {
        return OTHER;
    };
    set_bit(c, 2, 7, r.rctd);
    or8(c, 2, at_most(r.reporting_options, 3, "REPORTING OPTIONS")?);
    or8(c, 3, r.requested_operation_code);
    put16(c, 4, r.requested_service_action);
    put32(c, 6, r.allocation_length);
    Ok(())
}

/// REPORT SUPPORTED TASK MANAGEMENT FUNCTIONS (SPC-5 table 259).
pub(crate) fn report_supported_tmf(cmd: &Command, c: &mut [u8]) -> Encoded {
    let Command::ReportSupportedTaskManagementFunctions {
        repd,
        allocation_length,
    } = *cmd
    else {
        return OTHER;
    };
    set_bit(c, 2, 7, repd);
    put32(c, 6, allocation_length);
    Ok(())
}

/// FORMAT UNIT (SBC-4 table 34): LONGLIST only with FMTDATA; no defect list.
pub(crate) fn format_unit(cmd: &Command, c: &mut [u8]) -> Encoded {
    let Command::FormatUnit(f) = cmd else {
        return OTHER;
    };
    absent(f.longlist && !f.fmtdata, "LONGLIST")?;
    set_bit(c, 1, 5, f.longlist);
    set_bit(c, 1, 4, f.fmtdata);
    Ok(())
}

/// SANITIZE (SBC-4 table 102); the form holds the service action.
pub(crate) fn sanitize(cmd: &Command, c: &mut [u8]) -> Encoded {
    let Command::Sanitize(s) = cmd else {
        return OTHER;
    };
    service_action_is(c, s.action.code())?;
    set_bit(c, 1, 7, s.immed);
    set_bit(c, 1, 5, s.ause);
    put16(c, 7, s.parameter_list_length);
    Ok(())
}

/// WRITE ATOMIC (16) (SBC-4 table 130): ATOMIC BOUNDARY 10..12, a 16-bit TRANSFER LENGTH
/// 12..14, GROUP NUMBER in byte 14; no DLD.
pub(crate) fn write_atomic16(cmd: &Command, c: &mut [u8]) -> Encoded {
    let Command::WriteAtomic {
        rw,
        atomic_boundary,
    } = cmd
    else {
        return OTHER;
    };
    absent(rw.dld != 0, "DLD")?;
    put64(c, 2, rw.lba);
    put16(c, 10, *atomic_boundary);
    put16(c, 12, fit(rw.transfer_length, "TRANSFER LENGTH")?);
    flags_and_group(rw, c, 1, 14, 0x3F)
}

/// WRITE ATOMIC (32) (SBC-4): ATOMIC BOUNDARY in bytes 4–5, the rest as WRITE (32) without
/// DLD.
pub(crate) fn write_atomic32(cmd: &Command, c: &mut [u8]) -> Encoded {
    let Command::WriteAtomic {
        rw,
        atomic_boundary,
    } = cmd
    else {
        return OTHER;
    };
    absent(rw.dld != 0, "DLD")?;
    put16(c, 4, *atomic_boundary);
    fields32(rw, c)
}

/// READ LONG (10) (SBC-4): LBA in bytes 2–5, BYTE TRANSFER LENGTH in bytes 7–8; CORRCT 0.
pub(crate) fn read_long10(cmd: &Command, c: &mut [u8]) -> Encoded {
    let Command::ReadLong {
        lba,
        byte_transfer_length,
    } = *cmd
    else {
        return OTHER;
    };
    put32(c, 2, fit(lba, "LOGICAL BLOCK ADDRESS")?);
    put16(c, 7, byte_transfer_length);
    Ok(())
}

/// READ LONG (16) (SBC-4, SERVICE ACTION IN (16) 11h): LBA in bytes 2–9, BYTE TRANSFER
/// LENGTH in bytes 12–13.
pub(crate) fn read_long16(cmd: &Command, c: &mut [u8]) -> Encoded {
    let Command::ReadLong {
        lba,
        byte_transfer_length,
    } = *cmd
    else {
        return OTHER;
    };
    put64(c, 2, lba);
    put16(c, 12, byte_transfer_length);
    Ok(())
}

/// WRITE LONG (10) (SBC-4): WR_UNCOR in byte 1 bit 6, LBA in bytes 2–5, BYTE TRANSFER LENGTH
/// in bytes 7–8.
pub(crate) fn write_long10(cmd: &Command, c: &mut [u8]) -> Encoded {
    let Command::WriteLong {
        lba,
        byte_transfer_length,
        wr_uncor,
    } = *cmd
    else {
        return OTHER;
    };
    set_bit(c, 1, 6, wr_uncor);
    put32(c, 2, fit(lba, "LOGICAL BLOCK ADDRESS")?);
    put16(c, 7, byte_transfer_length);
    Ok(())
}

/// WRITE LONG (16) (SBC-4, SERVICE ACTION OUT (16) 11h): WR_UNCOR in byte 1 bit 6, LBA in
/// bytes 2–9, BYTE TRANSFER LENGTH in bytes 12–13.
pub(crate) fn write_long16(cmd: &Command, c: &mut [u8]) -> Encoded {
    let Command::WriteLong {
        lba,
        byte_transfer_length,
        wr_uncor,
    } = *cmd
    else {
        return OTHER;
    };
    set_bit(c, 1, 6, wr_uncor);
    put64(c, 2, lba);
    put16(c, 12, byte_transfer_length);
    Ok(())
}

/// REPORT TIMESTAMP (SPC-5 table 269).
pub(crate) fn report_timestamp(cmd: &Command, c: &mut [u8]) -> Encoded {
    let Command::ReportTimestamp { allocation_length } = *cmd else {
        return OTHER;
    };
    put32(c, 6, allocation_length);
    Ok(())
}

/// SET TIMESTAMP (SPC-5 table 301).
pub(crate) fn set_timestamp(cmd: &Command, c: &mut [u8]) -> Encoded {
    let Command::SetTimestamp {
        parameter_list_length,
    } = *cmd
    else {
        return OTHER;
    };
    put32(c, 6, parameter_list_length);
    Ok(())
}

/// SET TARGET PORT GROUPS (SPC-4 table 327).
pub(crate) fn set_target_port_groups(cmd: &Command, c: &mut [u8]) -> Encoded {
    let Command::SetTargetPortGroups {
        parameter_list_length,
    } = *cmd
    else {
        return OTHER;
    };
    put32(c, 6, parameter_list_length);
    Ok(())
}

/// REPORT TARGET PORT GROUPS (SPC-5 §6.37): PARAMETER DATA FORMAT (byte 1 bits 7:5) 000b, or
/// 001b for the extended header.
pub(crate) fn report_target_port_groups(cmd: &Command, c: &mut [u8]) -> Encoded {
    let Command::ReportTargetPortGroups {
        extended,
        allocation_length,
    } = *cmd
    else {
        return OTHER;
    };
    set_bit(c, 1, 5, extended);
    put32(c, 6, allocation_length);
    Ok(())
}

#[cfg(test)]
mod tests;
