//! Typed commands decoded from CDBs (SPC-5 §6, SBC-4 §5). Fields keep the standards' names.

use crate::persistent_reserve::{PrInAction, PrOutAction};
use crate::sanitize::SanitizeAction;
use crate::third_party_copy::out_action::COPY_OPERATION_ABORT;
use crate::third_party_copy::{ExtendedCopy, ReceiveCopyResults};

/// READ/WRITE (6)/(10)/(12)/(16)/(32) (SBC-4 §5.12–5.16, §5.39–5.43). A READ(6)/WRITE(6)
/// transfer length of 0 is already turned into 256. The default is block 0, no blocks, no
/// flags, no DLD: `ReadWrite { lba, transfer_length, ..ReadWrite::default() }`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadWrite {
    pub lba: u64,
    pub transfer_length: u32,
    pub dpo: bool,
    pub fua: bool,
    pub group_number: u8,
    /// Duration limit descriptor index (DLD2:DLD0, SBC-5 READ(16)/WRITE(16)/READ(32)/WRITE(32));
    /// 0 elsewhere.
    pub dld: u8,
}

/// BYTCHK (SBC-4 table 89 for VERIFY, table 118 for WRITE AND VERIFY).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ByteCheck {
    /// 00b: no data-out; check the medium only.
    None,
    /// 01b: compare `length` blocks of data-out with the medium.
    Compare,
    /// 11b: one block of data-out, compared with every block of the range.
    CompareOneBlock,
}

/// VERIFY (10)/(12)/(16) (SBC-4 §5.35–5.37).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verify {
    pub lba: u64,
    pub verification_length: u32,
    pub dpo: bool,
    pub bytchk: ByteCheck,
    pub group_number: u8,
}

/// WRITE AND VERIFY (10)/(12)/(16) (SBC-4 §5.43–5.45).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteAndVerify {
    pub lba: u64,
    pub transfer_length: u32,
    pub dpo: bool,
    pub bytchk: ByteCheck,
    pub group_number: u8,
}

/// WRITE SAME (10)/(16) (SBC-4 §5.46–5.47): one block of data-out written to every block of
/// the range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteSame {
    /// UNMAP (byte 1 bit 3): deallocate instead of writing; needs LBPWS/LBPWS10.
    pub unmap: bool,
    /// NDOB (WRITE SAME (16) byte 1 bit 0): no Data-Out buffer; the block is all zeros.
    pub ndob: bool,
    pub lba: u64,
    pub number_of_logical_blocks: u32,
    pub group_number: u8,
}

/// UNMAP (SBC-4 §5.30, table 120): deallocate the ranges of the parameter list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unmap {
    pub group_number: u8,
    pub parameter_list_length: u16,
}

/// SYNCHRONIZE CACHE (10)/(16) (SBC-4 §5.32–5.33) and PRE-FETCH (10)/(16) (SBC-4 §5.9–5.10):
/// a range (0 blocks = to the end of the medium) and IMMED.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheRange {
    pub lba: u64,
    pub number_of_logical_blocks: u32,
    pub immed: bool,
}

/// INQUIRY (SPC-5 §6.7, table 145).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Inquiry {
    pub evpd: bool,
    pub page_code: u8,
    pub allocation_length: u16,
}

/// Page control of MODE SENSE (SPC-5 table 165).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageControl {
    Current,
    Changeable,
    Default,
    /// 11b: only a logical unit that saves mode pages answers it.
    Saved,
}

/// MODE SENSE (6)/(10) (SPC-5 §6.14–6.15).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModeSense {
    /// true for MODE SENSE(10) (8-byte header, LLBAA).
    pub ten: bool,
    pub dbd: bool,
    pub llbaa: bool,
    pub pc: PageControl,
    pub page_code: u8,
    pub subpage_code: u8,
    pub allocation_length: u16,
}

/// MODE SELECT (6)/(10) (SPC-5 §6.12–6.13).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModeSelect {
    pub ten: bool,
    pub pf: bool,
    /// Save the pages (byte 1 bit 0); only a logical unit that saves mode pages accepts it.
    pub sp: bool,
    pub parameter_list_length: u16,
}

/// PC field of LOG SENSE (SPC-5 LOG SENSE command, byte 2 bits 7:6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogPageControl {
    ThresholdValues,
    CumulativeValues,
    DefaultThresholdValues,
    DefaultCumulativeValues,
}

/// LOG SENSE (SPC-5 §6.9). SP = 1 is refused while decoding: no log
/// parameters are saved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogSense {
    pub pc: LogPageControl,
    pub page_code: u8,
    pub subpage_code: u8,
    /// First parameter code to return; parameters with lower codes are left out.
    pub parameter_pointer: u16,
    pub allocation_length: u16,
}

/// LOG SELECT (SPC-5 §6.8). The logical unit has no changeable or savable log parameters, so
/// a parameter list and SP = 1 are refused; what remains is a parameter code reset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogSelect {
    /// PCR: set the parameters the PC field names to their defaults.
    pub pcr: bool,
    pub pc: LogPageControl,
    /// Page 00h subpage 00h: every log page.
    pub page_code: u8,
    pub subpage_code: u8,
}

/// START STOP UNIT (SBC-4 §5.31, table 95).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StartStopUnit {
    pub immed: bool,
    pub power_condition_modifier: u8,
    pub power_condition: u8,
    pub no_flush: bool,
    pub loej: bool,
    pub start: bool,
}

/// REPORT SUPPORTED OPERATION CODES (SPC-5 §6.35, table 256).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReportSupportedOperationCodes {
    pub rctd: bool,
    pub reporting_options: u8,
    pub requested_operation_code: u8,
    pub requested_service_action: u16,
    pub allocation_length: u32,
}

/// READ DEFECT DATA (10)/(12) (SBC-4 tables 44 and 47): which lists, in which format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadDefectData {
    /// true for the 12-byte CDB, whose parameter data header is 8 bytes (SBC-4 table 48).
    pub long: bool,
    pub req_plist: bool,
    pub req_glist: bool,
    pub defect_list_format: u8,
    pub allocation_length: u32,
}

/// PERSISTENT RESERVE IN (SPC-4 §6.15.1, table 200).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PersistentReserveIn {
    pub service_action: PrInAction,
    pub allocation_length: u16,
}

/// PERSISTENT RESERVE OUT (SPC-4 §6.16.1, table 212). SCOPE and TYPE are checked by the
/// service actions that use them ([`crate::persistent_reserve::scope_and_type`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PersistentReserveOut {
    pub service_action: PrOutAction,
    /// Byte 2: SCOPE (bits 7:4) and TYPE (bits 3:0).
    pub scope_type: u8,
    pub parameter_list_length: u32,
}

/// SANITIZE (SBC-4 §5.30, table 102).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sanitize {
    pub immed: bool,
    /// AUSE: if this sanitize fails, EXIT FAILURE MODE may end the failure mode.
    pub ause: bool,
    pub action: SanitizeAction,
    pub parameter_list_length: u16,
}

/// FORMAT UNIT (SBC-4 §5.4, table 34). FMTPINFO (protection information) is outside the
/// usage mask, so only its 00b reaches here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FormatUnit {
    /// LONGLIST: the parameter list header is 8 bytes, not 4.
    pub longlist: bool,
    /// FMTDATA: a parameter list follows.
    pub fmtdata: bool,
}

impl FormatUnit {
    /// The parameter list header's length: 0 without FMTDATA, 4 (short) or 8 (long).
    pub fn header_length(&self) -> u32 {
        match (self.fmtdata, self.longlist) {
            (false, _) => 0,
            (true, false) => 4,
            (true, true) => 8,
        }
    }
}

/// One decoded command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    TestUnitReady,
    /// REQUEST SENSE (SPC-5 §6.39).
    RequestSense {
        desc: bool,
        allocation_length: u8,
    },
    Inquiry(Inquiry),
    /// REPORT LUNS (SPC-5 §6.33).
    ReportLuns {
        select_report: u8,
        allocation_length: u32,
    },
    /// READ CAPACITY (10) (SBC-4 §5.20).
    ReadCapacity10,
    /// READ CAPACITY (16) (SBC-4 §5.21).
    ReadCapacity16 {
        allocation_length: u32,
    },
    /// GET LBA STATUS (SBC-4 §5.8): the provisioning status of the blocks from `lba` on.
    GetLbaStatus {
        lba: u64,
        allocation_length: u32,
    },
    Read(ReadWrite),
    Write(ReadWrite),
    /// ORWRITE (16): OR the data-out into the medium (SBC-4 §5.8).
    OrWrite(ReadWrite),
    /// COMPARE AND WRITE (SBC-4 §5.3): `transfer_length` is the NUMBER OF LOGICAL BLOCKS; the
    /// data-out holds twice that (verify instance, then write instance).
    CompareAndWrite(ReadWrite),
    WriteAndVerify(WriteAndVerify),
    WriteSame(WriteSame),
    Unmap(Unmap),
    Verify(Verify),
    SynchronizeCache(CacheRange),
    PreFetch(CacheRange),
    ModeSense(ModeSense),
    ModeSelect(ModeSelect),
    LogSense(LogSense),
    LogSelect(LogSelect),
    StartStopUnit(StartStopUnit),
    /// RESERVE (6)/(10) and RELEASE (6)/(10) (SPC-2 §7.21–7.24): whole-LU reservations for
    /// one nexus, without the obsolete third-party and extent forms.
    Reserve,
    Release,
    PersistentReserveIn(PersistentReserveIn),
    PersistentReserveOut(PersistentReserveOut),
    /// PREVENT ALLOW MEDIUM REMOVAL (SBC-4 §5.11): PREVENT 01b prevents, 00b allows.
    PreventAllowMediumRemoval {
        prevent: bool,
    },
    ReportSupportedOperationCodes(ReportSupportedOperationCodes),
    /// READ DEFECT DATA (10)/(12) (SBC-4 §5.12, §5.13).
    ReadDefectData(ReadDefectData),
    /// REPORT SUPPORTED TASK MANAGEMENT FUNCTIONS (SPC-5 §6.36).
    ReportSupportedTaskManagementFunctions {
        repd: bool,
        allocation_length: u32,
    },
    Sanitize(Sanitize),
    FormatUnit(FormatUnit),
    /// WRITE ATOMIC (16) (SBC-4 §5.48): a WRITE that reaches the medium whole or not at all.
    /// `transfer_length` is the 16-bit TRANSFER LENGTH.
    WriteAtomic {
        rw: ReadWrite,
        atomic_boundary: u16,
    },
    /// READ LONG (10)/(16) (SBC-4): one logical block with its ECC, of which these stores
    /// keep none, so BYTE TRANSFER LENGTH must be the block size. CORRCT is accepted and
    /// changes nothing; PBLOCK is refused.
    ReadLong {
        lba: u64,
        byte_transfer_length: u16,
    },
    /// WRITE LONG (10)/(16) (SBC-4): WR_UNCOR marks the block uncorrectable (no data);
    /// otherwise one block of BYTE TRANSFER LENGTH bytes is written. COR_DIS and PBLOCK are
    /// refused.
    WriteLong {
        lba: u64,
        byte_transfer_length: u16,
        wr_uncor: bool,
    },
    /// REPORT TIMESTAMP (SPC-5 §6.38).
    ReportTimestamp {
        allocation_length: u32,
    },
    /// SET TIMESTAMP (SPC-5 §6.46).
    SetTimestamp {
        parameter_list_length: u32,
    },
    /// SET TARGET PORT GROUPS (SPC-4 §6.45): a parameter list of 0 bytes, or a 4-byte header
    /// and 4-byte descriptors ([`crate::alua::set_target_port_groups`]).
    SetTargetPortGroups {
        parameter_list_length: u32,
    },
    /// EXTENDED COPY (LID1)/(LID4) (SPC-4 §6.4, §6.5).
    ExtendedCopy(ExtendedCopy),
    /// RECEIVE COPY RESULTS service actions (SPC-4 §6.18–§6.21).
    ReceiveCopyResults(ReceiveCopyResults),
    /// REPORT TARGET PORT GROUPS (SPC-5 §6.37); `extended`: PARAMETER DATA FORMAT 001b,
    /// the extended header.
    ReportTargetPortGroups {
        extended: bool,
        allocation_length: u32,
    },
}

/// The data a command moves, in logical blocks or bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataLength {
    None,
    /// Up to this many bytes to the initiator (allocation length).
    InBytes(u32),
    /// Exactly this many logical blocks to the initiator.
    InBlocks(u32),
    /// Exactly this many bytes from the initiator (parameter list length).
    OutBytes(u32),
    /// Exactly this many logical blocks from the initiator.
    OutBlocks(u32),
}

impl Command {
    /// What the CDB asks to move; the device multiplies blocks by its block size.
    pub fn data_length(&self) -> DataLength {
        use DataLength::*;
        match *self {
            Command::TestUnitReady
            | Command::SynchronizeCache(_)
            | Command::PreFetch(_)
            | Command::StartStopUnit(_)
            | Command::LogSelect(_)
            | Command::PreventAllowMediumRemoval { .. }
            | Command::Reserve
            | Command::Release => None,
            Command::Sanitize(s) => match s.parameter_list_length {
                0 => None,
                n => OutBytes(n.into()),
            },
            Command::FormatUnit(f) => match f.header_length() {
                0 => None,
                n => OutBytes(n),
            },
            Command::WriteAtomic { rw, .. } => OutBlocks(rw.transfer_length),
            Command::ReadLong {
                byte_transfer_length,
                ..
            } => InBytes(byte_transfer_length.into()),
            // WR_UNCOR transfers nothing (SBC-4 WRITE LONG).
            Command::WriteLong {
                byte_transfer_length,
                wr_uncor,
                ..
            } => OutBytes(if wr_uncor {
                0
            } else {
                byte_transfer_length.into()
            }),
            Command::ReportTimestamp { allocation_length } => InBytes(allocation_length),
            Command::SetTimestamp {
                parameter_list_length,
            }
            | Command::SetTargetPortGroups {
                parameter_list_length,
            } => OutBytes(parameter_list_length),
            Command::RequestSense {
                allocation_length, ..
            } => InBytes(allocation_length.into()),
            Command::Inquiry(i) => InBytes(i.allocation_length.into()),
            Command::ReportLuns {
                allocation_length, ..
            } => InBytes(allocation_length),
            Command::ReadCapacity10 => InBytes(8),
            Command::ReadCapacity16 { allocation_length }
            | Command::GetLbaStatus {
                allocation_length, ..
            } => InBytes(allocation_length),
            Command::Read(rw) => InBlocks(rw.transfer_length),
            Command::Write(rw) | Command::OrWrite(rw) => OutBlocks(rw.transfer_length),
            Command::WriteAndVerify(w) => OutBlocks(w.transfer_length),
            Command::WriteSame(w) => OutBlocks(u32::from(!w.ndob)),
            Command::Unmap(u) => OutBytes(u.parameter_list_length.into()),
            Command::CompareAndWrite(rw) => OutBlocks(rw.transfer_length * 2),
            Command::Verify(v) => match v.bytchk {
                ByteCheck::None => None,
                ByteCheck::Compare => OutBlocks(v.verification_length),
                ByteCheck::CompareOneBlock => OutBlocks(u32::from(v.verification_length != 0)),
            },
            Command::ModeSense(m) => InBytes(m.allocation_length.into()),
            Command::ModeSelect(m) => OutBytes(m.parameter_list_length.into()),
            Command::LogSense(l) => InBytes(l.allocation_length.into()),
            Command::ReportSupportedOperationCodes(r) => InBytes(r.allocation_length),
            Command::PersistentReserveIn(p) => InBytes(p.allocation_length.into()),
            Command::PersistentReserveOut(p) => OutBytes(p.parameter_list_length),
            Command::ReadDefectData(r) => InBytes(r.allocation_length),
            Command::ReportSupportedTaskManagementFunctions {
                allocation_length, ..
            }
            | Command::ReportTargetPortGroups {
                allocation_length, ..
            } => InBytes(allocation_length),
            // COPY OPERATION ABORT has no parameter list.
            Command::ExtendedCopy(x) if x.service_action == COPY_OPERATION_ABORT => None,
            Command::ExtendedCopy(x) => OutBytes(x.parameter_list_length),
            Command::ReceiveCopyResults(r) => InBytes(r.allocation_length),
        }
    }
}
