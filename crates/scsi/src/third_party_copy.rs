//! Third-party copy, SPC-4's copy manager model: the EXTENDED COPY (LID4) and (LID1)
//! parameter lists (SPC-4 §6.4, §6.5) with their CSCD and segment descriptors, the data of
//! the RECEIVE COPY STATUS, FAILURE DETAILS, OPERATING PARAMETERS and RECEIVE ROD TOKEN
//! INFORMATION service actions, ROD tokens, SBC-4's POPULATE TOKEN and WRITE USING TOKEN
//! parameter lists, and the Third-party Copy VPD page (8Fh). Pure: the device resolves,
//! copies and keeps tokens.

use crate::cdb::{be16, be24, be32, be64, or8, put32, u8_at};
use crate::command::Command;
use crate::encode::{Encoded, Misfit};
use crate::inquiry::{begin_page, end_page};
use crate::sense::{Asc, Sense, SenseKey};

/// Service actions of operation code 83h (SPC-4).
pub mod out_action {
    pub const EXTENDED_COPY_LID1: u8 = 0x00;
    pub const EXTENDED_COPY_LID4: u8 = 0x01;
    pub const POPULATE_TOKEN: u8 = 0x10;
    pub const WRITE_USING_TOKEN: u8 = 0x11;
    pub const COPY_OPERATION_ABORT: u8 = 0x1C;
}

/// Service actions of operation code 84h (SPC-4).
pub mod in_action {
    pub const RECEIVE_COPY_STATUS_LID1: u8 = 0x00;
    pub const RECEIVE_COPY_DATA_LID1: u8 = 0x01;
    pub const RECEIVE_COPY_OPERATING_PARAMETERS: u8 = 0x03;
    pub const RECEIVE_COPY_FAILURE_DETAILS: u8 = 0x04;
    pub const RECEIVE_COPY_STATUS_LID4: u8 = 0x05;
    pub const RECEIVE_COPY_DATA_LID4: u8 = 0x06;
    pub const RECEIVE_ROD_TOKEN_INFORMATION: u8 = 0x07;
    pub const REPORT_ALL_ROD_TOKENS: u8 = 0x08;
}

/// Copy manager limits, reported by OPERATING PARAMETERS and the VPD page.
pub const MAX_CSCD_DESCRIPTORS: u16 = 64;
pub const MAX_SEGMENT_DESCRIPTORS: u16 = 64;
/// MAXIMUM DESCRIPTOR LIST LENGTH: CSCD plus segment descriptors, in bytes.
pub const MAX_DESCRIPTOR_LIST_LENGTH: u32 = 8192;
/// Copies whose results a logical unit holds at once (per LU, all nexuses).
pub const MAX_HELD_LISTS: usize = 255;

const CSCD_LENGTH: usize = 32;
/// Identification descriptor CSCD descriptor (SPC-4).
pub const CSCD_IDENTIFICATION: u8 = 0xE4;
/// Block device to block device segment descriptor (SPC-4).
pub const SEGMENT_BLOCK_TO_BLOCK: u8 = 0x02;
/// Its DESCRIPTOR LENGTH: the 28 bytes after the first four.
const BLOCK_TO_BLOCK_LENGTH: u16 = 0x18;

pub const UNSUPPORTED_TARGET_DESCRIPTOR_TYPE_CODE: Asc = Asc(0x26, 0x07);
pub const UNSUPPORTED_SEGMENT_DESCRIPTOR_TYPE_CODE: Asc = Asc(0x26, 0x09);
pub const TOO_MANY_TARGET_DESCRIPTORS: Asc = Asc(0x26, 0x06);
pub const TOO_MANY_SEGMENT_DESCRIPTORS: Asc = Asc(0x26, 0x08);
pub const UNEXPECTED_INEXACT_SEGMENT: Asc = Asc(0x26, 0x0A);
pub const UNREACHABLE_COPY_TARGET: Asc = Asc(0x08, 0x04);
pub const COPY_TARGET_DEVICE_NOT_REACHABLE: Asc = Asc(0x0D, 0x02);
pub const INCORRECT_COPY_TARGET_DEVICE_TYPE: Asc = Asc(0x0D, 0x03);
pub const OPERATION_IN_PROGRESS: Asc = Asc(0x00, 0x16);

/// A service action of operation code 83h: EXTENDED COPY (LID1) or (LID4) (SPC-4 tables 96
/// and 101), POPULATE TOKEN or WRITE USING TOKEN (SBC-4 tables 37 and 124).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExtendedCopy {
    pub service_action: u8,
    /// LIST IDENTIFIER of the CDB (bytes 6–9, token commands only; EXTENDED COPY carries it
    /// in its parameter list).
    pub list_identifier: u32,
    pub parameter_list_length: u32,
}

/// A RECEIVE COPY RESULTS service action (SPC-4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReceiveCopyResults {
    pub service_action: u8,
    /// LIST IDENTIFIER: byte 2 (LID1) or bytes 2–5 (LID4); 0 for OPERATING PARAMETERS.
    pub list_identifier: u32,
    pub allocation_length: u32,
}

/// The longest parameter list of an 83h command the device takes: room for the largest
/// valid list (a LID4 header and MAXIMUM DESCRIPTOR LIST LENGTH) with slack for lists that
/// overrun it. Longer ones are refused with PARAMETER LIST LENGTH ERROR (as PERSISTENT
/// RESERVE OUT's are) before the transport buffers them.
pub const MAX_PARAMETER_LIST_LENGTH: u32 = 64 << 10;

/// Decoder of the table's 83h entries: PARAMETER LIST LENGTH in bytes 10–13.
pub(crate) fn decode_extended_copy(c: &[u8]) -> Result<Command, Sense> {
    if be32(c, 10) > MAX_PARAMETER_LIST_LENGTH {
        return Err(param_list_length_error());
    }
    let service_action = u8_at(c, 1) & 0x1F;
    let list_identifier = match service_action {
        out_action::POPULATE_TOKEN | out_action::WRITE_USING_TOKEN => be32(c, 6),
        _ => 0,
    };
    Ok(Command::ExtendedCopy(ExtendedCopy {
        service_action,
        list_identifier,
        parameter_list_length: be32(c, 10),
    }))
}

/// COPY OPERATION ABORT (SPC-4): the LIST IDENTIFIER of the copy to stop, bytes 2–5;
/// no parameter list.
pub(crate) fn decode_copy_operation_abort(c: &[u8]) -> Result<Command, Sense> {
    Ok(Command::ExtendedCopy(ExtendedCopy {
        service_action: out_action::COPY_OPERATION_ABORT,
        list_identifier: be32(c, 2),
        parameter_list_length: 0,
    }))
}

/// Decoder of the table's RECEIVE COPY RESULTS entries: ALLOCATION LENGTH in bytes 10–13.
pub(crate) fn decode_receive_copy_results(c: &[u8]) -> Result<Command, Sense> {
    let service_action = u8_at(c, 1) & 0x1F;
    let list_identifier = match service_action {
        in_action::RECEIVE_COPY_STATUS_LID4
        | in_action::RECEIVE_COPY_DATA_LID4
        | in_action::RECEIVE_ROD_TOKEN_INFORMATION => be32(c, 2),
        in_action::REPORT_ALL_ROD_TOKENS => 0,
        _ => u32::from(u8_at(c, 2)),
    };
    Ok(Command::ReceiveCopyResults(ReceiveCopyResults {
        service_action,
        list_identifier,
        allocation_length: be32(c, 10),
    }))
}

/// The 83h command in the form's CDB, whose byte 1 holds the form's service action.
fn extended_copy_of<'a>(cmd: &'a Command, c: &[u8]) -> Result<&'a ExtendedCopy, Misfit> {
    match cmd {
        Command::ExtendedCopy(x) if x.service_action == u8_at(c, 1) & 0x1F => Ok(x),
        _ => Err(Misfit::Command),
    }
}

/// Encoder of the table's 83h entries but COPY OPERATION ABORT: the LIST IDENTIFIER in bytes
/// 6–9 of the token commands (EXTENDED COPY has none in its CDB), PARAMETER LIST LENGTH in
/// bytes 10–13.
pub(crate) fn encode_extended_copy(cmd: &Command, c: &mut [u8]) -> Encoded {
    let x = extended_copy_of(cmd, c)?;
    match x.service_action {
        out_action::POPULATE_TOKEN | out_action::WRITE_USING_TOKEN => {
            put32(c, 6, x.list_identifier)
        }
        _ if x.list_identifier != 0 => return Err(Misfit::Field("LIST IDENTIFIER")),
        _ => {}
    }
    if x.parameter_list_length > MAX_PARAMETER_LIST_LENGTH {
        return Err(Misfit::Field("PARAMETER LIST LENGTH"));
    }
    put32(c, 10, x.parameter_list_length);
    Ok(())
}

/// COPY OPERATION ABORT (SPC-4): LIST IDENTIFIER in bytes 2–5, no parameter list.
pub(crate) fn encode_copy_operation_abort(cmd: &Command, c: &mut [u8]) -> Encoded {
    let x = extended_copy_of(cmd, c)?;
    if x.parameter_list_length != 0 {
        return Err(Misfit::Field("PARAMETER LIST LENGTH"));
    }
    put32(c, 2, x.list_identifier);
    Ok(())
}

/// Encoder of the table's RECEIVE COPY RESULTS entries: the LIST IDENTIFIER in byte 2 (LID1)
/// or bytes 2–5 (LID4), none for OPERATING PARAMETERS and REPORT ALL ROD TOKENS; ALLOCATION
/// LENGTH in bytes 10–13.
pub(crate) fn encode_receive_copy_results(cmd: &Command, c: &mut [u8]) -> Encoded {
    let r = match cmd {
        Command::ReceiveCopyResults(r) if r.service_action == u8_at(c, 1) & 0x1F => r,
        _ => return Err(Misfit::Command),
    };
    let list_identifier = Misfit::Field("LIST IDENTIFIER");
    match r.service_action {
        in_action::RECEIVE_COPY_STATUS_LID4
        | in_action::RECEIVE_COPY_DATA_LID4
        | in_action::RECEIVE_ROD_TOKEN_INFORMATION => put32(c, 2, r.list_identifier),
        in_action::RECEIVE_COPY_OPERATING_PARAMETERS | in_action::REPORT_ALL_ROD_TOKENS => {
            if r.list_identifier != 0 {
                return Err(list_identifier);
            }
        }
        _ => or8(
            c,
            2,
            u8::try_from(r.list_identifier).map_err(|_| list_identifier)?,
        ),
    }
    put32(c, 10, r.allocation_length);
    Ok(())
}

/// LIST ID USAGE (SPC-4): 11b holds nothing and needs LIST IDENTIFIER 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListIdUsage {
    Held,
    NotHeld,
}

/// A CSCD descriptor the copy manager can resolve: an identification descriptor naming a
/// block device logical unit by one of its VPD 83h designators.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CscdDescriptor {
    /// CODE SET, then ASSOCIATION and DESIGNATOR TYPE (byte 5 bits 5:0).
    pub code_set: u8,
    pub designator_type: u8,
    pub association: u8,
    pub designator: Vec<u8>,
    /// DISK BLOCK LENGTH (bytes 29–31).
    pub block_length: u32,
}

/// A block device to block device segment descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockToBlock {
    /// DC: the count is in destination blocks (else source blocks).
    pub destination_count: bool,
    pub source: u16,
    pub destination: u16,
    pub blocks: u16,
    pub source_lba: u64,
    pub destination_lba: u64,
    /// Offset of the descriptor in the parameter list, for a segment pointer in sense data.
    pub offset: usize,
}

/// A parsed EXTENDED COPY parameter list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CopyList {
    pub list_identifier: u32,
    pub usage: ListIdUsage,
    pub cscds: Vec<CscdDescriptor>,
    pub segments: Vec<BlockToBlock>,
}

fn param_list_length_error() -> Sense {
    Sense::new(SenseKey::IllegalRequest, Asc::PARAMETER_LIST_LENGTH_ERROR)
}

fn illegal(asc: Asc) -> Sense {
    Sense::new(SenseKey::IllegalRequest, asc)
}

/// Offsets of the fields that differ between the two header formats.
struct Header {
    len: usize,
    list_identifier: u32,
    flags: u8,
    cscd_list_length: usize,
    segment_list_length: usize,
    inline_data_length: usize,
    /// Byte of LIST IDENTIFIER (field pointer of a refused identifier).
    list_identifier_byte: u16,
}

/// The LID1 header is 16 bytes; the LID4 header is 48
/// with LIST FORMAT 01h in byte 0 and no header CSCD descriptors supported.
fn header(lid4: bool, p: &[u8]) -> Result<Header, Sense> {
    if !lid4 {
        if p.len() < 16 {
            return Err(param_list_length_error());
        }
        return Ok(Header {
            len: 16,
            list_identifier: u32::from(p[0]),
            flags: p[1],
            cscd_list_length: usize::from(be16(p, 2)),
            segment_list_length: be32(p, 8) as usize,
            inline_data_length: be32(p, 12) as usize,
            list_identifier_byte: 0,
        });
    }
    if p.len() < 48 {
        return Err(param_list_length_error());
    }
    if p[0] != 0x01 {
        return Err(Sense::invalid_field_in_parameter_list(0, None));
    }
    if be16(p, 2) != 0 {
        return Err(Sense::invalid_field_in_parameter_list(2, None));
    }
    Ok(Header {
        len: 48,
        list_identifier: be32(p, 20),
        flags: p[1],
        cscd_list_length: usize::from(be16(p, 42)),
        segment_list_length: usize::from(be16(p, 44)),
        inline_data_length: usize::from(be16(p, 46)),
        list_identifier_byte: 20,
    })
}

/// Parse and check an EXTENDED COPY parameter list in SPC-4's order of precedence: the
/// lengths against the limits and the list, then the descriptors one by one. Resolving the
/// CSCDs and checking ranges is the copy manager's, while it processes segments.
pub fn parse_copy_list(lid4: bool, p: &[u8]) -> Result<CopyList, Sense> {
    let h = header(lid4, p)?;
    let descriptors = h.cscd_list_length.saturating_add(h.segment_list_length);
    // No inline or held data is supported: MAXIMUM INLINE DATA LENGTH is 0.
    if descriptors > MAX_DESCRIPTOR_LIST_LENGTH as usize
        || h.inline_data_length != 0
        || h.len.saturating_add(descriptors) > p.len()
    {
        return Err(param_list_length_error());
    }
    if h.cscd_list_length % CSCD_LENGTH != 0 {
        let byte = if lid4 { 42 } else { 2 };
        return Err(Sense::invalid_field_in_parameter_list(byte, None));
    }
    if h.cscd_list_length / CSCD_LENGTH > usize::from(MAX_CSCD_DESCRIPTORS) {
        return Err(illegal(TOO_MANY_TARGET_DESCRIPTORS));
    }
    let usage = match (h.flags >> 3) & 0x03 {
        0b11 if h.list_identifier != 0 => {
            return Err(Sense::invalid_field_in_parameter_list(
                h.list_identifier_byte,
                None,
            ))
        }
        0b11 => ListIdUsage::NotHeld,
        _ => ListIdUsage::Held,
    };
    let cscd_start = h.len;
    let cscds = p[cscd_start..cscd_start + h.cscd_list_length]
        .chunks_exact(CSCD_LENGTH)
        .enumerate()
        .map(|(i, d)| cscd(d, cscd_start + i * CSCD_LENGTH))
        .collect::<Result<Vec<_>, _>>()?;
    let seg_start = cscd_start + h.cscd_list_length;
    let seg_list = &p[seg_start..seg_start + h.segment_list_length];
    let mut segments = Vec::new();
    let mut at = 0;
    while at < seg_list.len() {
        if segments.len() == usize::from(MAX_SEGMENT_DESCRIPTORS) {
            return Err(illegal(TOO_MANY_SEGMENT_DESCRIPTORS));
        }
        let d = &seg_list[at..];
        let offset = seg_start + at;
        if d.len() < 4 {
            return Err(param_list_length_error());
        }
        if d[0] != SEGMENT_BLOCK_TO_BLOCK {
            return Err(illegal(UNSUPPORTED_SEGMENT_DESCRIPTOR_TYPE_CODE));
        }
        if be16(d, 2) != BLOCK_TO_BLOCK_LENGTH {
            return Err(Sense::invalid_field_in_parameter_list(
                (offset + 2) as u16,
                None,
            ));
        }
        let len = 4 + usize::from(BLOCK_TO_BLOCK_LENGTH);
        if d.len() < len {
            return Err(param_list_length_error());
        }
        // CAT (byte 1 bit 0) matters only for inexact segments, which never arise here.
        segments.push(BlockToBlock {
            destination_count: d[1] & 0x02 != 0,
            source: be16(d, 4),
            destination: be16(d, 6),
            blocks: be16(d, 10),
            source_lba: be64(d, 12),
            destination_lba: be64(d, 20),
            offset,
        });
        at += len;
    }
    Ok(CopyList {
        list_identifier: h.list_identifier,
        usage,
        cscds,
        segments,
    })
}

/// One CSCD descriptor at `offset` in the parameter list (SPC-4).
fn cscd(d: &[u8], offset: usize) -> Result<CscdDescriptor, Sense> {
    if d[0] != CSCD_IDENTIFICATION {
        return Err(illegal(UNSUPPORTED_TARGET_DESCRIPTOR_TYPE_CODE));
    }
    // LU ID TYPE and NUL (byte 1 bits 7:5) are ignored from SPC-4 on; only block devices
    // are copy targets here.
    if d[1] & 0x1F != crate::inquiry::DIRECT_ACCESS_BLOCK_DEVICE {
        return Err(Sense::invalid_field_in_parameter_list(
            (offset + 1) as u16,
            Some(4),
        ));
    }
    let length = usize::from(d[7]);
    if length > 20 {
        return Err(Sense::invalid_field_in_parameter_list(
            (offset + 7) as u16,
            None,
        ));
    }
    Ok(CscdDescriptor {
        code_set: d[4] & 0x0F,
        designator_type: d[5] & 0x0F,
        association: (d[5] >> 4) & 0x03,
        designator: d[8..8 + length].to_vec(),
        block_length: be24(d, 29),
    })
}

/// A ROD token (SPC-4): always 512 bytes.
pub type RodToken = [u8; 512];

/// ROD TYPE of the tokens this copy manager creates: access upon reference (SPC-4 table
/// 45), so the data is read when a WRITE USING TOKEN uses it, and a write to the
/// represented blocks first revokes the token.
pub const ROD_TYPE_ACCESS_UPON_REFERENCE: u32 = 0x0001_0000;
/// The block device zero ROD token (SBC-4): WRITE USING TOKEN writes zeros.
pub const ROD_TYPE_BLOCK_DEVICE_ZERO: u32 = 0xFFFF_0001;
/// ROD TOKEN LENGTH of a 512-byte token.
const ROD_TOKEN_LENGTH: u16 = 0x01F8;
/// MAXIMUM RANGE DESCRIPTORS (Block Device ROD Limits, SBC-4).
pub const MAX_RANGE_DESCRIPTORS: u16 = 64;
/// Inactivity timeouts in seconds: the default for 0, and the largest accepted.
pub const DEFAULT_INACTIVITY_TIMEOUT: u32 = 60;
pub const MAX_INACTIVITY_TIMEOUT: u32 = 600;

pub const TOKEN_UNKNOWN: Asc = Asc(0x23, 0x04);
pub const TOKEN_CORRUPT: Asc = Asc(0x23, 0x05);
pub const TOKEN_REVOKED: Asc = Asc(0x23, 0x06);
pub const TOKEN_EXPIRED: Asc = Asc(0x23, 0x07);
pub const REMOTE_TOKEN_USAGE_NOT_SUPPORTED: Asc = Asc(0x23, 0x02);

/// A block device range descriptor (SBC-4): LBA and NUMBER OF LOGICAL BLOCKS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Range {
    pub lba: u64,
    pub blocks: u32,
}

/// A POPULATE TOKEN parameter list (SBC-4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PopulateToken {
    /// Seconds; 0 asks for the default.
    pub inactivity_timeout: u32,
    pub ranges: Vec<Range>,
}

/// A WRITE USING TOKEN parameter list (SBC-4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteUsingToken {
    pub delete_token: bool,
    /// OFFSET INTO ROD, in logical blocks of the destination.
    pub offset_into_rod: u64,
    pub token: Box<RodToken>,
    pub ranges: Vec<Range>,
}

/// The range descriptors from `at` (their BLOCK DEVICE RANGE DESCRIPTOR LENGTH field is at
/// `length_field`), at most [`MAX_RANGE_DESCRIPTORS`], none empty, at least one.
fn ranges(p: &[u8], length_field: usize, at: usize) -> Result<Vec<Range>, Sense> {
    let len = usize::from(be16(p, length_field));
    let field = || Sense::invalid_field_in_parameter_list(length_field as u16, None);
    if len == 0 || len % 16 != 0 || len / 16 > usize::from(MAX_RANGE_DESCRIPTORS) {
        return Err(field());
    }
    let list = p.get(at..at + len).ok_or_else(param_list_length_error)?;
    let ranges: Vec<Range> = list
        .chunks_exact(16)
        .map(|d| Range {
            lba: be64(d, 0),
            blocks: be32(d, 8),
        })
        .collect();
    if let Some(i) = ranges.iter().position(|r| r.blocks == 0) {
        return Err(Sense::invalid_field_in_parameter_list(
            (at + 16 * i + 8) as u16,
            None,
        ));
    }
    Ok(ranges)
}

/// The DATA LENGTH field (bytes 0–1) counts the bytes after it.
fn check_data_length(p: &[u8]) -> Result<(), Sense> {
    if p.len() < 2 || usize::from(be16(p, 0)) + 2 > p.len() {
        return Err(param_list_length_error());
    }
    Ok(())
}

/// Parse a POPULATE TOKEN parameter list: RTV with a ROD type other than ours, or an
/// inactivity timeout beyond the limit, is an invalid field.
pub fn parse_populate_token(p: &[u8]) -> Result<PopulateToken, Sense> {
    check_data_length(p)?;
    if p.len() < 16 {
        return Err(param_list_length_error());
    }
    let rtv = p[2] & 0x02 != 0;
    if rtv && be32(p, 8) != ROD_TYPE_ACCESS_UPON_REFERENCE {
        return Err(Sense::invalid_field_in_parameter_list(8, None));
    }
    let inactivity_timeout = be32(p, 4);
    if inactivity_timeout > MAX_INACTIVITY_TIMEOUT {
        return Err(Sense::invalid_field_in_parameter_list(4, None));
    }
    Ok(PopulateToken {
        inactivity_timeout,
        ranges: ranges(p, 14, 16)?,
    })
}

/// Parse a WRITE USING TOKEN parameter list.
pub fn parse_write_using_token(p: &[u8]) -> Result<WriteUsingToken, Sense> {
    check_data_length(p)?;
    if p.len() < 536 {
        return Err(param_list_length_error());
    }
    let mut token = Box::new([0u8; 512]);
    token.copy_from_slice(&p[16..528]);
    Ok(WriteUsingToken {
        delete_token: p[2] & 0x02 != 0,
        offset_into_rod: be64(p, 8),
        token,
        ranges: ranges(p, 534, 536)?,
    })
}

/// The ROD type and length of a token, or why it is not one of ours.
pub fn token_type(token: &RodToken) -> Result<u32, Sense> {
    let rod_type = be32(token, 0);
    if rod_type == ROD_TYPE_BLOCK_DEVICE_ZERO {
        return Ok(rod_type);
    }
    if rod_type != ROD_TYPE_ACCESS_UPON_REFERENCE || be16(token, 6) != ROD_TOKEN_LENGTH {
        return Err(illegal(TOKEN_CORRUPT));
    }
    Ok(rod_type)
}

/// A token of ours (SPC-4): ROD TYPE, ROD TOKEN LENGTH, the copy manager's token
/// identifier (bytes 8–15), the CSCD descriptor of the source logical unit (16–47),
/// NUMBER OF BYTES REPRESENTED (48–63), then `secret` so that a token cannot be guessed.
pub fn make_token(id: u64, source: &CscdDescriptor, bytes: u64, secret: [u8; 32]) -> RodToken {
    let mut t = [0u8; 512];
    t[0..4].copy_from_slice(&ROD_TYPE_ACCESS_UPON_REFERENCE.to_be_bytes());
    t[6..8].copy_from_slice(&ROD_TOKEN_LENGTH.to_be_bytes());
    t[8..16].copy_from_slice(&id.to_be_bytes());
    t[16] = CSCD_IDENTIFICATION;
    t[20] = source.code_set;
    t[21] = source.association << 4 | source.designator_type;
    t[23] = source.designator.len() as u8;
    t[24..24 + source.designator.len()].copy_from_slice(&source.designator);
    t[45..48].copy_from_slice(&source.block_length.to_be_bytes()[1..]);
    t[56..64].copy_from_slice(&bytes.to_be_bytes());
    t[64..96].copy_from_slice(&secret);
    t
}

/// COPY STATUS values of LID1 and COPY OPERATION STATUS values of LID4 (SPC-4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyStatus {
    Good,
    Failed,
    Aborted,
}

/// What the copy manager holds about one copy for RECEIVE COPY RESULTS.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CopyResult {
    /// The service action that started it (01h for LID4, 00h for LID1).
    pub service_action: u8,
    pub status: CopyStatus,
    pub segments_processed: u16,
    /// Blocks written so far.
    pub transfer_count: u64,
    /// The sense data it ended with, when it failed.
    pub sense: Option<Sense>,
    /// The ROD token a POPULATE TOKEN created.
    pub rod_token: Option<Box<RodToken>>,
}

impl CopyResult {
    /// A copy that has not moved anything yet.
    pub fn new(service_action: u8) -> Self {
        CopyResult {
            service_action,
            status: CopyStatus::Good,
            segments_processed: 0,
            transfer_count: 0,
            sense: None,
            rod_token: None,
        }
    }
}

/// TRANSFER COUNT UNITS F1h: logical blocks of the destination (SPC-4).
const UNITS_BLOCKS: u8 = 0xF1;

/// RECEIVE COPY STATUS (LID1) data (SPC-4).
pub fn copy_status_lid1(r: &CopyResult, out: &mut Vec<u8>) {
    out.extend_from_slice(&8u32.to_be_bytes());
    out.push(match r.status {
        CopyStatus::Good => 0x01,
        CopyStatus::Failed | CopyStatus::Aborted => 0x02,
    });
    out.extend_from_slice(&r.segments_processed.to_be_bytes());
    out.push(UNITS_BLOCKS);
    out.extend_from_slice(
        &u32::try_from(r.transfer_count)
            .unwrap_or(u32::MAX)
            .to_be_bytes(),
    );
}

/// RECEIVE COPY STATUS (LID4) data (SPC-4), with the sense data it ended with.
pub fn copy_status_lid4(r: &CopyResult, descriptor_sense: bool, out: &mut Vec<u8>) {
    let mut sense = Vec::new();
    if let Some(s) = &r.sense {
        s.write(descriptor_sense, &mut sense);
    }
    let start = out.len();
    out.resize(start + 32, 0);
    let b = &mut out[start..];
    b[0..4].copy_from_slice(&(28 + sense.len() as u32).to_be_bytes());
    b[4] = r.service_action;
    b[5] = match r.status {
        CopyStatus::Good => 0x01,
        CopyStatus::Failed => 0x02,
        CopyStatus::Aborted => 0x60,
    };
    // EXTENDED COPY COMPLETION STATUS: the SCSI status it ended with.
    b[12] = if r.sense.is_some() { 0x02 } else { 0x00 };
    b[13] = sense.len() as u8;
    b[14] = sense.len() as u8;
    b[15] = UNITS_BLOCKS;
    b[16..24].copy_from_slice(&r.transfer_count.to_be_bytes());
    b[24..26].copy_from_slice(&r.segments_processed.to_be_bytes());
    out.extend_from_slice(&sense);
}

/// RECEIVE ROD TOKEN INFORMATION data (SPC-4): the LID4 copy status, then the
/// ROD token descriptors (one, with the token, after POPULATE TOKEN).
pub fn rod_token_information(r: &CopyResult, descriptor_sense: bool, out: &mut Vec<u8>) {
    let start = out.len();
    copy_status_lid4(r, descriptor_sense, out);
    let token_len = r.rod_token.as_ref().map_or(0, |t| 2 + t.len());
    out.extend_from_slice(&(token_len as u32).to_be_bytes());
    if let Some(t) = &r.rod_token {
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(&t[..]);
    }
    let available = (out.len() - start - 4) as u32;
    out[start..start + 4].copy_from_slice(&available.to_be_bytes());
}

/// RECEIVE COPY DATA (LID1) data (SPC-4): AVAILABLE DATA and the held data, of which
/// block to block segments keep none.
pub fn copy_data_lid1(out: &mut Vec<u8>) {
    out.extend_from_slice(&0u32.to_be_bytes());
}

/// RECEIVE COPY DATA (LID4) data (SPC-4): the LID4 copy status, then HELD DATA LENGTH
/// and the held data (none: block to block segments hold no data).
pub fn copy_data_lid4(r: &CopyResult, descriptor_sense: bool, out: &mut Vec<u8>) {
    let start = out.len();
    copy_status_lid4(r, descriptor_sense, out);
    out.extend_from_slice(&0u32.to_be_bytes());
    let available = (out.len() - start - 4) as u32;
    out[start..start + 4].copy_from_slice(&available.to_be_bytes());
}

/// REPORT ALL ROD TOKENS data (SPC-4): AVAILABLE DATA, four reserved bytes and the ROD
/// management tokens, of which this copy manager makes none.
pub fn all_rod_tokens(out: &mut Vec<u8>) {
    out.extend_from_slice(&4u32.to_be_bytes());
    out.extend_from_slice(&[0; 4]);
}

/// RECEIVE COPY FAILURE DETAILS data (SPC-4).
pub fn failure_details(r: &CopyResult, descriptor_sense: bool, out: &mut Vec<u8>) {
    let mut sense = Vec::new();
    if let Some(s) = &r.sense {
        s.write(descriptor_sense, &mut sense);
    }
    let start = out.len();
    out.resize(start + 60, 0);
    let b = &mut out[start..];
    b[0..4].copy_from_slice(&(56 + sense.len() as u32).to_be_bytes());
    // COPY COMMAND STATUS: the SCSI status the copy ended with.
    b[56] = if r.sense.is_some() { 0x02 } else { 0x00 };
    b[58..60].copy_from_slice(&(sense.len() as u16).to_be_bytes());
    out.extend_from_slice(&sense);
}

/// RECEIVE COPY OPERATING PARAMETERS data (SPC-4). `max_segment_bytes` is what
/// one block to block segment can move on this logical unit.
pub fn operating_parameters(max_segment_bytes: u32, out: &mut Vec<u8>) {
    let codes = [SEGMENT_BLOCK_TO_BLOCK, CSCD_IDENTIFICATION];
    let start = out.len();
    out.resize(start + 44, 0);
    let b = &mut out[start..];
    b[0..4].copy_from_slice(&(40 + codes.len() as u32).to_be_bytes());
    b[4] = 0x01; // SNLID: LIST ID USAGE 11b is supported
    b[8..10].copy_from_slice(&MAX_CSCD_DESCRIPTORS.to_be_bytes());
    b[10..12].copy_from_slice(&MAX_SEGMENT_DESCRIPTORS.to_be_bytes());
    b[12..16].copy_from_slice(&MAX_DESCRIPTOR_LIST_LENGTH.to_be_bytes());
    b[16..20].copy_from_slice(&max_segment_bytes.to_be_bytes());
    // Inline data, held data, stream transfers: none (bytes 20–31 stay 0).
    b[34..36].copy_from_slice(&(MAX_HELD_LISTS as u16).to_be_bytes());
    b[36] = MAX_HELD_LISTS as u8;
    b[43] = codes.len() as u8;
    out.extend_from_slice(&codes);
}

/// Third-party Copy VPD page (SPC-4): the Block Device ROD Token Limits (0000h,
/// SBC-4), Supported Commands (0001h), Parameter Data (0004h), Supported
/// Descriptors (0008h), Supported CSCD Descriptor IDs (000Ch), ROD Token Features (0106h),
/// Supported ROD Token and ROD Types (0108h) and General Copy Operations (8001h)
/// third-party copy descriptors.
pub fn third_party_copy_vpd(out: &mut Vec<u8>, peripheral: u8, max_segment_bytes: u32) {
    let s = begin_page(out, peripheral, crate::inquiry::vpd::THIRD_PARTY_COPY);
    let descriptor = |out: &mut Vec<u8>, kind: u16, body: &[u8]| {
        // Every descriptor is a multiple of four bytes long.
        let padded = body.len().div_ceil(4) * 4;
        out.extend_from_slice(&kind.to_be_bytes());
        out.extend_from_slice(&(padded as u16).to_be_bytes());
        out.extend_from_slice(body);
        out.resize(out.len() + padded - body.len(), 0);
    };
    let mut bdrl = [0u8; 32];
    bdrl[6..8].copy_from_slice(&MAX_RANGE_DESCRIPTORS.to_be_bytes());
    bdrl[8..12].copy_from_slice(&MAX_INACTIVITY_TIMEOUT.to_be_bytes());
    bdrl[12..16].copy_from_slice(&DEFAULT_INACTIVITY_TIMEOUT.to_be_bytes());
    // MAXIMUM TOKEN TRANSFER SIZE and OPTIMAL TRANSFER COUNT: 0, not reported.
    descriptor(out, 0x0000, &bdrl);
    // Supported Commands: per operation code, its service actions.
    let ec = [
        0x83,
        5,
        out_action::EXTENDED_COPY_LID1,
        out_action::EXTENDED_COPY_LID4,
        out_action::POPULATE_TOKEN,
        out_action::WRITE_USING_TOKEN,
        out_action::COPY_OPERATION_ABORT,
    ];
    let rcr = [
        0x84,
        8,
        in_action::RECEIVE_COPY_STATUS_LID1,
        in_action::RECEIVE_COPY_DATA_LID1,
        in_action::RECEIVE_COPY_OPERATING_PARAMETERS,
        in_action::RECEIVE_COPY_FAILURE_DETAILS,
        in_action::RECEIVE_COPY_STATUS_LID4,
        in_action::RECEIVE_COPY_DATA_LID4,
        in_action::RECEIVE_ROD_TOKEN_INFORMATION,
        in_action::REPORT_ALL_ROD_TOKENS,
    ];
    let mut commands = vec![(ec.len() + rcr.len()) as u8];
    commands.extend_from_slice(&ec);
    commands.extend_from_slice(&rcr);
    descriptor(out, 0x0001, &commands);
    let mut pd = [0u8; 28];
    pd[4..6].copy_from_slice(&MAX_CSCD_DESCRIPTORS.to_be_bytes());
    pd[6..8].copy_from_slice(&MAX_SEGMENT_DESCRIPTORS.to_be_bytes());
    pd[8..12].copy_from_slice(&MAX_DESCRIPTOR_LIST_LENGTH.to_be_bytes());
    descriptor(out, 0x0004, &pd);
    descriptor(
        out,
        0x0008,
        &[2, SEGMENT_BLOCK_TO_BLOCK, CSCD_IDENTIFICATION],
    );
    // Supported CSCD IDs: an empty list (segments name CSCDs of their own list only).
    descriptor(out, 0x000C, &[0, 0]);
    // ROD Token Features: no remote tokens; lifetimes in seconds; the block device
    // type-specific features descriptor (48 bytes, all optimal sizes not reported).
    let mut rtf = [0u8; 44 + 48];
    rtf[12..16].copy_from_slice(&1u32.to_be_bytes());
    rtf[16..20].copy_from_slice(&MAX_INACTIVITY_TIMEOUT.to_be_bytes());
    rtf[20..24].copy_from_slice(&MAX_INACTIVITY_TIMEOUT.to_be_bytes());
    rtf[42..44].copy_from_slice(&48u16.to_be_bytes());
    rtf[44 + 2..44 + 4].copy_from_slice(&44u16.to_be_bytes());
    descriptor(out, 0x0106, &rtf);
    // Supported ROD types: ours (token in and out) and the block device zero token (in).
    let mut srt = vec![0u8; 4];
    srt[2..4].copy_from_slice(&128u16.to_be_bytes());
    for (rod_type, flags) in [
        (ROD_TYPE_ACCESS_UPON_REFERENCE, 0x03),
        (ROD_TYPE_BLOCK_DEVICE_ZERO, 0x02),
    ] {
        let mut d = [0u8; 64];
        d[0..4].copy_from_slice(&rod_type.to_be_bytes());
        d[4] = flags;
        srt.extend_from_slice(&d);
    }
    descriptor(out, 0x0108, &srt);
    let mut gco = [0u8; 28];
    gco[0..4].copy_from_slice(&(MAX_HELD_LISTS as u32).to_be_bytes());
    gco[4..8].copy_from_slice(&(MAX_HELD_LISTS as u32).to_be_bytes());
    gco[8..12].copy_from_slice(&max_segment_bytes.to_be_bytes());
    descriptor(out, 0x8001, &gco);
    end_page(out, s);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An identification CSCD naming an NAA designator, as libiscsi and Linux build it.
    fn cscd_id(naa: &[u8; 16], block: u32) -> [u8; 32] {
        let mut d = [0u8; 32];
        d[0] = CSCD_IDENTIFICATION;
        d[4] = 0x01;
        d[5] = 0x03;
        d[7] = 16;
        d[8..24].copy_from_slice(naa);
        d[29..32].copy_from_slice(&block.to_be_bytes()[1..]);
        d
    }

    fn b2b(src: u16, dst: u16, blocks: u16, src_lba: u64, dst_lba: u64) -> [u8; 28] {
        let mut d = [0u8; 28];
        d[0] = SEGMENT_BLOCK_TO_BLOCK;
        d[3] = 0x18;
        d[4..6].copy_from_slice(&src.to_be_bytes());
        d[6..8].copy_from_slice(&dst.to_be_bytes());
        d[10..12].copy_from_slice(&blocks.to_be_bytes());
        d[12..20].copy_from_slice(&src_lba.to_be_bytes());
        d[20..28].copy_from_slice(&dst_lba.to_be_bytes());
        d
    }

    fn lid1(list: u8, flags: u8, cscds: &[[u8; 32]], segs: &[[u8; 28]]) -> Vec<u8> {
        let mut p = vec![0u8; 16];
        p[0] = list;
        p[1] = flags;
        p[2..4].copy_from_slice(&((cscds.len() * 32) as u16).to_be_bytes());
        p[8..12].copy_from_slice(&((segs.len() * 28) as u32).to_be_bytes());
        cscds.iter().for_each(|c| p.extend_from_slice(c));
        segs.iter().for_each(|s| p.extend_from_slice(s));
        p
    }

    fn asc(r: Result<CopyList, Sense>) -> Asc {
        r.unwrap_err().asc
    }

    #[test]
    fn a_parameter_list_beyond_64_kib_is_refused_before_its_data() {
        let mut cdb = [0u8; 16];
        cdb[0] = 0x83;
        cdb[10..14].copy_from_slice(&MAX_PARAMETER_LIST_LENGTH.to_be_bytes());
        assert!(decode_extended_copy(&cdb).is_ok());
        cdb[10..14].copy_from_slice(&(MAX_PARAMETER_LIST_LENGTH + 1).to_be_bytes());
        assert_eq!(
            decode_extended_copy(&cdb).unwrap_err().asc,
            Asc::PARAMETER_LIST_LENGTH_ERROR
        );
    }

    #[test]
    fn a_lid1_list_parses_into_cscds_and_segments() {
        let naa = [0x60; 16];
        let p = lid1(7, 0, &[cscd_id(&naa, 512)], &[b2b(0, 0, 8, 1, 100)]);
        let l = parse_copy_list(false, &p).unwrap();
        assert_eq!(l.list_identifier, 7);
        assert_eq!(l.usage, ListIdUsage::Held);
        assert_eq!(l.cscds[0].designator, naa);
        assert_eq!(
            (l.cscds[0].designator_type, l.cscds[0].block_length),
            (3, 512)
        );
        let s = l.segments[0];
        assert_eq!(
            (s.blocks, s.source_lba, s.destination_lba, s.offset),
            (8, 1, 100, 48)
        );
    }

    #[test]
    fn a_lid4_list_has_a_48_byte_header() {
        let one = lid1(0, 0, &[cscd_id(&[1; 16], 512)], &[b2b(0, 0, 1, 0, 1)]);
        let mut p = vec![0u8; 48];
        p[0] = 0x01;
        p[20..24].copy_from_slice(&0x0102_0304u32.to_be_bytes());
        p[42..44].copy_from_slice(&32u16.to_be_bytes());
        p[44..46].copy_from_slice(&28u16.to_be_bytes());
        p.extend_from_slice(&one[16..]);
        let l = parse_copy_list(true, &p).unwrap();
        assert_eq!(l.list_identifier, 0x0102_0304);
        assert_eq!(l.segments.len(), 1);
        p[0] = 0x02;
        assert_eq!(
            parse_copy_list(true, &p).unwrap_err(),
            Sense::invalid_field_in_parameter_list(0, None)
        );
    }

    #[test]
    fn lengths_beyond_the_list_or_the_limits_are_parameter_list_length_errors() {
        let p = lid1(1, 0, &[cscd_id(&[1; 16], 512)], &[b2b(0, 0, 1, 0, 1)]);
        for cut in [0, 15, 16 + 31, p.len() - 1] {
            assert_eq!(
                asc(parse_copy_list(false, &p[..cut])),
                Asc::PARAMETER_LIST_LENGTH_ERROR
            );
        }
        let mut inline = p.clone();
        inline[15] = 4;
        inline.extend_from_slice(&[0; 4]);
        assert_eq!(
            asc(parse_copy_list(false, &inline)),
            Asc::PARAMETER_LIST_LENGTH_ERROR
        );
        // Over MAXIMUM DESCRIPTOR LIST LENGTH comes before TOO MANY ... DESCRIPTORS.
        let many = vec![cscd_id(&[1; 16], 512); 300];
        assert_eq!(
            asc(parse_copy_list(false, &lid1(1, 0, &many, &[]))),
            Asc::PARAMETER_LIST_LENGTH_ERROR
        );
    }

    #[test]
    fn too_many_descriptors_and_unsupported_types_have_their_own_codes() {
        let c = cscd_id(&[1; 16], 512);
        let s = b2b(0, 0, 1, 0, 1);
        let cscds = vec![c; usize::from(MAX_CSCD_DESCRIPTORS) + 1];
        assert_eq!(
            asc(parse_copy_list(false, &lid1(1, 0, &cscds, &[s]))),
            TOO_MANY_TARGET_DESCRIPTORS
        );
        let segs = vec![s; usize::from(MAX_SEGMENT_DESCRIPTORS) + 1];
        assert_eq!(
            asc(parse_copy_list(false, &lid1(1, 0, &[c], &segs))),
            TOO_MANY_SEGMENT_DESCRIPTORS
        );
        let mut fc = c;
        fc[0] = 0xE0;
        assert_eq!(
            asc(parse_copy_list(false, &lid1(1, 0, &[fc], &[s]))),
            UNSUPPORTED_TARGET_DESCRIPTOR_TYPE_CODE
        );
        let mut stream = s;
        stream[0] = 0x03;
        assert_eq!(
            asc(parse_copy_list(false, &lid1(1, 0, &[c], &[stream]))),
            UNSUPPORTED_SEGMENT_DESCRIPTOR_TYPE_CODE
        );
    }

    #[test]
    fn bad_fields_are_pointed_at() {
        let c = cscd_id(&[1; 16], 512);
        let mut s = b2b(0, 0, 1, 0, 1);
        s[3] = 0x14;
        assert_eq!(
            parse_copy_list(false, &lid1(1, 0, &[c], &[s])).unwrap_err(),
            Sense::invalid_field_in_parameter_list(16 + 32 + 2, None)
        );
        let mut tape = c;
        tape[1] = 0x01;
        assert_eq!(
            parse_copy_list(false, &lid1(1, 0, &[tape], &[])).unwrap_err(),
            Sense::invalid_field_in_parameter_list(17, Some(4))
        );
        let mut long = c;
        long[7] = 21;
        assert_eq!(
            parse_copy_list(false, &lid1(1, 0, &[long], &[])).unwrap_err(),
            Sense::invalid_field_in_parameter_list(23, None)
        );
        // LIST ID USAGE 11b wants LIST IDENTIFIER 0.
        assert_eq!(
            parse_copy_list(false, &lid1(1, 0x18, &[c], &[])).unwrap_err(),
            Sense::invalid_field_in_parameter_list(0, None)
        );
        let l = parse_copy_list(false, &lid1(0, 0x18, &[c], &[])).unwrap();
        assert_eq!(l.usage, ListIdUsage::NotHeld);
    }

    #[test]
    fn operating_parameters_and_status_have_their_lengths() {
        let mut op = Vec::new();
        operating_parameters(1 << 20, &mut op);
        assert_eq!(be32(&op, 0) as usize, op.len() - 4);
        assert_eq!(be16(&op, 8), MAX_CSCD_DESCRIPTORS);
        assert_eq!(&op[44..], &[0x02, 0xE4]);
        let r = CopyResult {
            service_action: 1,
            status: CopyStatus::Failed,
            segments_processed: 1,
            transfer_count: 8,
            sense: Some(Sense::new(SenseKey::CopyAborted, UNREACHABLE_COPY_TARGET)),
            rod_token: None,
        };
        let mut st = Vec::new();
        copy_status_lid1(&r, &mut st);
        assert_eq!(st, [0, 0, 0, 8, 2, 0, 1, 0xF1, 0, 0, 0, 8]);
        let mut st4 = Vec::new();
        copy_status_lid4(&r, false, &mut st4);
        assert_eq!(be32(&st4, 0) as usize, st4.len() - 4);
        assert_eq!((st4[5], st4[12], st4[14]), (0x02, 0x02, 18));
        assert_eq!(st4[32 + 2], 0x0A, "the sense data follows");
        let mut fd = Vec::new();
        failure_details(&r, false, &mut fd);
        assert_eq!((be32(&fd, 0) as usize, be16(&fd, 58)), (fd.len() - 4, 18));
    }

    fn pt_list(timeout: u32, ranges: &[(u64, u32)]) -> Vec<u8> {
        let mut p = vec![0u8; 16];
        p[4..8].copy_from_slice(&timeout.to_be_bytes());
        p[14..16].copy_from_slice(&((ranges.len() * 16) as u16).to_be_bytes());
        for &(lba, blocks) in ranges {
            p.extend_from_slice(&lba.to_be_bytes());
            p.extend_from_slice(&blocks.to_be_bytes());
            p.extend_from_slice(&[0; 4]);
        }
        let len = (p.len() - 2) as u16;
        p[0..2].copy_from_slice(&len.to_be_bytes());
        p
    }

    #[test]
    fn populate_token_lists_are_checked() {
        let pt = parse_populate_token(&pt_list(0, &[(8, 16), (100, 1)])).unwrap();
        assert_eq!(
            pt.ranges,
            [
                Range { lba: 8, blocks: 16 },
                Range {
                    lba: 100,
                    blocks: 1
                }
            ]
        );
        let mut rtv = pt_list(0, &[(0, 1)]);
        rtv[2] = 0x02;
        rtv[8..12].copy_from_slice(&0x0080_0000u32.to_be_bytes());
        assert_eq!(
            parse_populate_token(&rtv).unwrap_err(),
            Sense::invalid_field_in_parameter_list(8, None)
        );
        assert_eq!(
            parse_populate_token(&pt_list(601, &[(0, 1)])).unwrap_err(),
            Sense::invalid_field_in_parameter_list(4, None)
        );
        assert_eq!(
            parse_populate_token(&pt_list(0, &[])).unwrap_err(),
            Sense::invalid_field_in_parameter_list(14, None)
        );
        assert_eq!(
            parse_populate_token(&pt_list(0, &[(0, 0)])).unwrap_err(),
            Sense::invalid_field_in_parameter_list(24, None)
        );
        let full = pt_list(0, &[(0, 1)]);
        assert_eq!(
            parse_populate_token(&full[..full.len() - 1])
                .unwrap_err()
                .asc,
            Asc::PARAMETER_LIST_LENGTH_ERROR
        );
    }

    #[test]
    fn a_token_round_trips_through_write_using_token() {
        let src = CscdDescriptor {
            code_set: 1,
            designator_type: 3,
            association: 0,
            designator: vec![0x60; 16],
            block_length: 512,
        };
        let token = make_token(7, &src, 4096, [0xAB; 32]);
        assert_eq!(token_type(&token), Ok(ROD_TYPE_ACCESS_UPON_REFERENCE));
        assert_eq!(&token[16..20], &[0xE4, 0, 0, 0]);
        assert_eq!(be64(&token, 56), 4096);
        let mut p = vec![0u8; 536];
        p[2] = 0x02;
        p[8..16].copy_from_slice(&3u64.to_be_bytes());
        p[16..528].copy_from_slice(&token);
        p[534..536].copy_from_slice(&16u16.to_be_bytes());
        p.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 2, 0, 0, 0, 0]);
        let len = (p.len() - 2) as u16;
        p[0..2].copy_from_slice(&len.to_be_bytes());
        let w = parse_write_using_token(&p).unwrap();
        assert!(w.delete_token);
        assert_eq!(
            (w.offset_into_rod, w.ranges[0]),
            (3, Range { lba: 9, blocks: 2 })
        );
        assert_eq!(w.token[..], token[..]);
        let mut corrupt = token;
        corrupt[7] = 0;
        assert_eq!(token_type(&corrupt).unwrap_err().asc, TOKEN_CORRUPT);
    }

    #[test]
    fn the_vpd_page_lists_descriptors_of_four_byte_multiples() {
        let mut out = Vec::new();
        third_party_copy_vpd(&mut out, 0, 1 << 20);
        assert_eq!(out[1], 0x8F);
        assert_eq!(usize::from(be16(&out, 2)), out.len() - 4);
        let mut at = 4;
        let mut kinds = Vec::new();
        while at < out.len() {
            kinds.push(be16(&out, at));
            let len = usize::from(be16(&out, at + 2));
            assert_eq!(len % 4, 0);
            at += 4 + len;
        }
        assert_eq!(at, out.len());
        assert_eq!(
            kinds,
            [0x0000, 0x0001, 0x0004, 0x0008, 0x000C, 0x0106, 0x0108, 0x8001]
        );
    }
}
