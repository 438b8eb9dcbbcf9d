//! PDU framing (RFC 7143 §11.2: BHS, AHS, header digest, data segment, padding, data digest)
//! and the opcode-specific header layouts by name.
//!
//! Framing never allocates: it finds the boundaries of the next complete PDU in a receive
//! buffer and checks lengths against the negotiated limit before anything is trusted.

use std::ops::Range;

use crate::bhs::{padding, Bhs, Opcode, BHS_LEN};
use crate::digest;

/// What the receiver accepts (negotiated HeaderDigest/DataDigest and our
/// MaxRecvDataSegmentLength, RFC 7143 §13.1 and §13.12).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameLimits {
    pub header_digest: bool,
    pub data_digest: bool,
    pub max_data_segment_length: usize,
}

impl FrameLimits {
    /// Largest PDU these limits allow on the wire: BHS + AHS (≤ 255 words) + digests + data.
    pub fn max_pdu_len(&self) -> usize {
        BHS_LEN + 255 * 4 + 4 + self.max_data_segment_length + 3 + 4
    }
}

/// Boundaries of one complete PDU inside a receive buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    pub bhs: Bhs,
    /// Additional Header Segments (RFC 7143 §11.2.2).
    pub ahs: Range<usize>,
    /// The data segment without padding and digest.
    pub data: Range<usize>,
    /// Total bytes the PDU occupies.
    pub len: usize,
    /// False when data digests are on and the data digest did not match; the header is
    /// trustworthy, so the PDU can be rejected precisely (RFC 7143 §7.8).
    pub data_digest_ok: bool,
}

/// Framing errors after which the byte stream cannot be trusted: the connection must close.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// DataSegmentLength exceeds what we declared (RFC 7143 §13.12).
    DataSegmentTooLong { len: usize, max: usize },
    /// Header digest mismatch (RFC 7143 §7.8: the header cannot be trusted).
    HeaderDigest,
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::DataSegmentTooLong { len, max } => {
                write!(
                    f,
                    "DataSegmentLength {len} exceeds MaxRecvDataSegmentLength {max}"
                )
            }
            FrameError::HeaderDigest => write!(f, "header digest mismatch"),
        }
    }
}

impl std::error::Error for FrameError {}

/// Find the first complete PDU in `buf`. `Ok(None)` means more bytes are needed.
pub fn frame(buf: &[u8], limits: &FrameLimits) -> Result<Option<Frame>, FrameError> {
    let Some(bhs) = Bhs::from_slice(buf) else {
        return Ok(None);
    };
    let dsl = bhs.data_segment_len();
    if dsl > limits.max_data_segment_length {
        return Err(FrameError::DataSegmentTooLong {
            len: dsl,
            max: limits.max_data_segment_length,
        });
    }
    let ahs = BHS_LEN..BHS_LEN + bhs.total_ahs_len();
    let mut pos = ahs.end;
    if limits.header_digest {
        let Some(wire) = buf.get(pos..pos + 4) else {
            return Ok(None);
        };
        let Some(header) = buf.get(..pos) else {
            return Ok(None);
        };
        if digest::from_wire(wire) != Some(digest::crc32c(header)) {
            return Err(FrameError::HeaderDigest);
        }
        pos += 4;
    }
    let data = pos..pos + dsl;
    pos = data.end + padding(dsl);
    let mut data_digest_ok = true;
    if limits.data_digest && dsl > 0 {
        let (Some(padded), Some(wire)) = (buf.get(data.start..pos), buf.get(pos..pos + 4)) else {
            return Ok(None);
        };
        data_digest_ok = digest::from_wire(wire) == Some(digest::crc32c(padded));
        pos += 4;
    }
    if buf.len() < pos {
        return Ok(None);
    }
    Ok(Some(Frame {
        bhs,
        ahs,
        data,
        len: pos,
        data_digest_ok,
    }))
}

/// Append a PDU (header, optional digests, data, padding) to `out`.
pub fn write_pdu(
    out: &mut Vec<u8>,
    bhs: &Bhs,
    data: &[u8],
    header_digest: bool,
    data_digest: bool,
) {
    let mut bhs = *bhs;
    bhs.set_data_segment_len(data.len());
    out.extend_from_slice(&bhs.0);
    if header_digest {
        out.extend_from_slice(&digest::to_wire(digest::crc32c(&bhs.0)));
    }
    if !data.is_empty() {
        out.extend_from_slice(data);
        let pad = [0u8; 3];
        let pad = &pad[..padding(data.len())];
        out.extend_from_slice(pad);
        if data_digest {
            out.extend_from_slice(&digest::to_wire(digest::crc32c_pieces(&[data, pad])));
        }
    }
}

// ---------------------------------------------------------------------------------------
// Opcode-specific layouts (field offsets within the BHS).
// ---------------------------------------------------------------------------------------

/// SCSI Command (RFC 7143 §11.3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScsiCommand {
    pub immediate: bool,
    pub final_bit: bool,
    pub read: bool,
    pub write: bool,
    /// ATTR (§11.3.1.2): 0 untagged, 1 simple, 2 ordered, 3 head of queue, 4 ACA.
    pub attr: u8,
    pub lun: u64,
    pub itt: u32,
    pub expected_data_transfer_length: u32,
    pub cmdsn: u32,
    pub exp_statsn: u32,
    /// CDB bytes: BHS bytes 32..48 plus an Extended CDB AHS (§11.3.5) when present.
    pub cdb: Cdb,
}

/// Longest CDB accepted: 16 bytes in the BHS plus up to 244 in an Extended CDB AHS
/// (SPC-5 §4.2.1: 260 bytes).
pub const MAX_CDB_LEN: usize = 260;

/// A CDB held inline (no allocation per command).
#[derive(Clone, PartialEq, Eq)]
pub struct Cdb {
    bytes: [u8; MAX_CDB_LEN],
    len: usize,
}

impl std::fmt::Debug for Cdb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Cdb({:02x?})", self.as_slice())
    }
}

impl Cdb {
    pub fn new(bytes: &[u8]) -> Option<Cdb> {
        let mut c = Cdb {
            bytes: [0; MAX_CDB_LEN],
            len: bytes.len(),
        };
        c.bytes.get_mut(..bytes.len())?.copy_from_slice(bytes);
        Some(c)
    }

    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// Why a PDU's fields were refused (answered with a Reject, RFC 7143 §11.17.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FieldError {
    /// Malformed or unsupported AHS.
    Ahs,
}

/// AHS types (RFC 7143 §11.2.2.1).
const AHS_EXTENDED_CDB: u8 = 1;
const AHS_BIDI_READ_LENGTH: u8 = 2;

impl ScsiCommand {
    pub fn parse(bhs: &Bhs, ahs: &[u8]) -> Result<ScsiCommand, FieldError> {
        let f = bhs.flags();
        let mut cdb = Cdb {
            bytes: [0; MAX_CDB_LEN],
            len: 16,
        };
        cdb.bytes[..16].copy_from_slice(&bhs.0[32..48]);
        // Each AHS (§11.2.2): AHSLength (2 bytes, counts the AHS-specific byte 3 and the
        // data), AHSType, AHS-specific byte, data; padded to 4 bytes.
        let mut rest = ahs;
        while !rest.is_empty() {
            let (Some(&hi), Some(&lo), Some(&kind)) = (rest.first(), rest.get(1), rest.get(2))
            else {
                return Err(FieldError::Ahs);
            };
            let len = usize::from(u16::from_be_bytes([hi, lo]));
            if len == 0 {
                return Err(FieldError::Ahs);
            }
            let body = rest.get(4..3 + len).ok_or(FieldError::Ahs)?;
            match kind {
                // Extended CDB (§11.3.5): CDB bytes 16.. follow the reserved byte.
                AHS_EXTENDED_CDB => {
                    let end = 16 + body.len();
                    cdb.bytes
                        .get_mut(16..end)
                        .ok_or(FieldError::Ahs)?
                        .copy_from_slice(body);
                    cdb.len = end;
                }
                // Bidirectional Read Expected Data Transfer Length (§11.3.6): not used by
                // any command this target serves.
                AHS_BIDI_READ_LENGTH if body.len() == 4 => {}
                _ => return Err(FieldError::Ahs),
            }
            rest = rest.get(3 + len + padding(3 + len)..).unwrap_or(&[]);
        }
        Ok(ScsiCommand {
            immediate: bhs.immediate(),
            final_bit: f & 0x80 != 0,
            read: f & 0x40 != 0,
            write: f & 0x20 != 0,
            attr: f & 0x07,
            lun: bhs.lun_raw(),
            itt: bhs.itt(),
            expected_data_transfer_length: bhs.u32_at(20),
            cmdsn: bhs.u32_at(24),
            exp_statsn: bhs.u32_at(28),
            cdb,
        })
    }

    /// Header for this command; a CDB longer than 16 bytes is not encoded (initiator side
    /// only sends ≤ 16-byte CDBs).
    pub fn to_bhs(&self) -> Bhs {
        let mut b = Bhs::new(Opcode::ScsiCommand);
        b.set_immediate(self.immediate);
        let mut f = self.attr & 7;
        if self.final_bit {
            f |= 0x80;
        }
        if self.read {
            f |= 0x40;
        }
        if self.write {
            f |= 0x20;
        }
        b.set_flags(f);
        b.set_lun_raw(self.lun);
        b.set_itt(self.itt);
        b.set_u32_at(20, self.expected_data_transfer_length);
        b.set_u32_at(24, self.cmdsn);
        b.set_u32_at(28, self.exp_statsn);
        let cdb = self.cdb.as_slice();
        let n = cdb.len().min(16);
        b.0[32..32 + n].copy_from_slice(&cdb[..n]);
        b
    }
}

/// SCSI Data-Out (RFC 7143 §11.7) and SCSI Data-In (§11.7) share this layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Data {
    pub final_bit: bool,
    pub lun: u64,
    pub itt: u32,
    pub ttt: u32,
    pub datasn: u32,
    pub buffer_offset: u32,
}

impl Data {
    pub fn parse(bhs: &Bhs) -> Data {
        Data {
            final_bit: bhs.final_bit(),
            lun: bhs.lun_raw(),
            itt: bhs.itt(),
            ttt: bhs.u32_at(20),
            datasn: bhs.u32_at(36),
            buffer_offset: bhs.u32_at(40),
        }
    }

    /// A Data-Out header (initiator side).
    pub fn to_data_out(&self, exp_statsn: u32) -> Bhs {
        let mut b = Bhs::new(Opcode::DataOut);
        b.set_flags(if self.final_bit { 0x80 } else { 0 });
        b.set_lun_raw(self.lun);
        b.set_itt(self.itt);
        b.set_u32_at(20, self.ttt);
        b.set_u32_at(28, exp_statsn);
        b.set_u32_at(36, self.datasn);
        b.set_u32_at(40, self.buffer_offset);
        b
    }
}

/// Residual flags and count (RFC 7143 §11.4.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Residual {
    #[default]
    None,
    /// O bit: the target had more data than the Expected Data Transfer Length allowed.
    Overflow(u32),
    /// U bit: fewer bytes moved than the Expected Data Transfer Length.
    Underflow(u32),
}

impl Residual {
    /// Flag bits for byte 1 (O = 0x04, U = 0x02) and the Residual Count.
    pub fn encode(self) -> (u8, u32) {
        match self {
            Residual::None => (0, 0),
            Residual::Overflow(n) => (0x04, n),
            Residual::Underflow(n) => (0x02, n),
        }
    }

    pub fn decode(flags: u8, count: u32) -> Residual {
        if flags & 0x04 != 0 {
            Residual::Overflow(count)
        } else if flags & 0x02 != 0 {
            Residual::Underflow(count)
        } else {
            Residual::None
        }
    }

    /// Residual between what the initiator expected and what the command moved.
    pub fn between(expected: u32, actual: u32) -> Residual {
        use std::cmp::Ordering::*;
        match actual.cmp(&expected) {
            Equal => Residual::None,
            Greater => Residual::Overflow(actual - expected),
            Less => Residual::Underflow(expected - actual),
        }
    }
}

/// Sequence numbers every target response carries (RFC 7143 §11.2.1 StatSN/ExpCmdSN/MaxCmdSN).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Numbers {
    pub statsn: u32,
    pub exp_cmdsn: u32,
    pub max_cmdsn: u32,
}

impl Numbers {
    pub fn write(&self, b: &mut Bhs) {
        b.set_u32_at(24, self.statsn);
        b.set_u32_at(28, self.exp_cmdsn);
        b.set_u32_at(32, self.max_cmdsn);
    }

    pub fn read(b: &Bhs) -> Numbers {
        Numbers {
            statsn: b.u32_at(24),
            exp_cmdsn: b.u32_at(28),
            max_cmdsn: b.u32_at(32),
        }
    }
}

/// SCSI Response header (RFC 7143 §11.4); the data segment carries SenseLength + sense.
pub fn scsi_response(itt: u32, status: u8, residual: Residual, n: Numbers, exp_datasn: u32) -> Bhs {
    let mut b = Bhs::new(Opcode::ScsiResponse);
    let (flags, count) = residual.encode();
    b.set_flags(0x80 | flags);
    b.0[2] = 0x00; // Response: command completed at target
    b.0[3] = status;
    b.set_itt(itt);
    n.write(&mut b);
    b.set_u32_at(36, exp_datasn);
    b.set_u32_at(44, count);
    b
}

/// Data-In header (RFC 7143 §11.7); with `status` the S bit is set (§11.7.4, phase collapse).
#[allow(clippy::too_many_arguments)]
pub fn data_in(
    itt: u32,
    lun: u64,
    final_bit: bool,
    status: Option<(u8, Residual)>,
    n: Numbers,
    datasn: u32,
    buffer_offset: u32,
) -> Bhs {
    let mut b = Bhs::new(Opcode::DataIn);
    let mut flags = if final_bit { 0x80 } else { 0 };
    b.set_lun_raw(lun);
    b.set_itt(itt);
    b.set_u32_at(20, crate::bhs::RESERVED_TAG);
    n.write(&mut b);
    if let Some((status, residual)) = status {
        let (rflags, count) = residual.encode();
        flags |= 0x01 | rflags;
        b.0[3] = status;
        b.set_u32_at(44, count);
    } else {
        // StatSN is reserved without the S bit.
        b.set_u32_at(24, 0);
    }
    b.set_flags(flags);
    b.set_u32_at(36, datasn);
    b.set_u32_at(40, buffer_offset);
    b
}

/// Ready To Transfer (RFC 7143 §11.8).
pub fn r2t(itt: u32, lun: u64, ttt: u32, n: Numbers, r2tsn: u32, offset: u32, length: u32) -> Bhs {
    let mut b = Bhs::new(Opcode::ReadyToTransfer);
    b.set_flags(0x80);
    b.set_lun_raw(lun);
    b.set_itt(itt);
    b.set_u32_at(20, ttt);
    n.write(&mut b);
    b.set_u32_at(36, r2tsn);
    b.set_u32_at(40, offset);
    b.set_u32_at(44, length);
    b
}

/// Reject reasons (RFC 7143 §11.17.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RejectReason {
    DataDigestError = 0x02,
    SnackReject = 0x03,
    ProtocolError = 0x04,
    CommandNotSupported = 0x05,
    InvalidPduField = 0x09,
}

/// Reject header (RFC 7143 §11.17); the data segment is the rejected PDU's header.
pub fn reject(reason: RejectReason, n: Numbers) -> Bhs {
    let mut b = Bhs::new(Opcode::Reject);
    b.set_flags(0x80);
    b.0[2] = reason as u8;
    b.set_itt(crate::bhs::RESERVED_TAG);
    n.write(&mut b);
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAIN: FrameLimits = FrameLimits {
        header_digest: false,
        data_digest: false,
        max_data_segment_length: 8192,
    };
    const DIGESTS: FrameLimits = FrameLimits {
        header_digest: true,
        data_digest: true,
        max_data_segment_length: 8192,
    };

    fn pdu(data: &[u8], limits: &FrameLimits) -> Vec<u8> {
        let mut b = Bhs::new(Opcode::NopOut);
        b.set_itt(7);
        let mut out = Vec::new();
        write_pdu(&mut out, &b, data, limits.header_digest, limits.data_digest);
        out
    }

    #[test]
    fn frames_a_padded_pdu_and_waits_for_missing_bytes() {
        let bytes = pdu(b"hello", &PLAIN);
        assert_eq!(bytes.len(), 48 + 8);
        for cut in 0..bytes.len() {
            assert_eq!(frame(&bytes[..cut], &PLAIN), Ok(None), "cut {cut}");
        }
        let f = frame(&bytes, &PLAIN).unwrap().unwrap();
        assert_eq!(&bytes[f.data.clone()], b"hello");
        assert_eq!(f.len, bytes.len());
    }

    #[test]
    fn digests_are_checked() {
        let mut bytes = pdu(b"abcdef", &DIGESTS);
        assert_eq!(bytes.len(), 48 + 4 + 8 + 4);
        let f = frame(&bytes, &DIGESTS).unwrap().unwrap();
        assert!(f.data_digest_ok);
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        assert!(!frame(&bytes, &DIGESTS).unwrap().unwrap().data_digest_ok);
        bytes[16] ^= 1;
        assert_eq!(frame(&bytes, &DIGESTS), Err(FrameError::HeaderDigest));
    }

    #[test]
    fn oversized_data_segment_is_refused_before_reading_it() {
        let mut b = Bhs::new(Opcode::ScsiCommand);
        b.set_data_segment_len(8193);
        assert_eq!(
            frame(&b.0, &PLAIN),
            Err(FrameError::DataSegmentTooLong {
                len: 8193,
                max: 8192
            })
        );
        b.set_data_segment_len(0xFF_FFFF);
        assert!(frame(&b.0, &PLAIN).is_err());
    }

    #[test]
    fn total_ahs_length_is_framed_without_trusting_it() {
        let mut b = Bhs::new(Opcode::ScsiCommand);
        b.set_total_ahs_len_words(255);
        b.set_data_segment_len(4);
        let mut bytes = b.0.to_vec();
        bytes.resize(48 + 1020, 0);
        // AHS present but the data segment is not: wait.
        assert_eq!(frame(&bytes, &PLAIN), Ok(None));
        bytes.extend_from_slice(b"data");
        let f = frame(&bytes, &PLAIN).unwrap().unwrap();
        assert_eq!((f.ahs, f.data.clone(), f.len), (48..1068, 1068..1072, 1072));
        assert!(PLAIN.max_pdu_len() >= f.len);
    }

    #[test]
    fn extended_cdb_ahs() {
        let mut b = Bhs::new(Opcode::ScsiCommand);
        b.0[32] = 0x7F;
        // AHSLength 18 = reserved byte + 17 CDB bytes; 21 bytes padded to 24.
        let mut ahs = vec![0, 18, AHS_EXTENDED_CDB, 0];
        ahs.extend(16u8..33);
        ahs.resize(24, 0);
        let c = ScsiCommand::parse(&b, &ahs).unwrap();
        assert_eq!(c.cdb.as_slice().len(), 33);
        assert_eq!(c.cdb.as_slice()[0], 0x7F);
        assert_eq!(c.cdb.as_slice()[16..], (16u8..33).collect::<Vec<_>>()[..]);
    }

    #[test]
    fn malformed_ahs_is_refused() {
        let b = Bhs::new(Opcode::ScsiCommand);
        assert_eq!(ScsiCommand::parse(&b, &[0, 40, 1, 0]), Err(FieldError::Ahs));
        assert_eq!(ScsiCommand::parse(&b, &[0, 1, 9, 0]), Err(FieldError::Ahs));
        assert!(ScsiCommand::parse(&b, &[0, 0, 1, 0]).is_err());
    }

    #[test]
    fn residual_between() {
        assert_eq!(Residual::between(512, 0), Residual::Underflow(512));
        assert_eq!(Residual::between(0, 512), Residual::Overflow(512));
        assert_eq!(Residual::between(9, 9), Residual::None);
        let (f, c) = Residual::Overflow(5).encode();
        assert_eq!(Residual::decode(f, c), Residual::Overflow(5));
    }
}
