//! The Basic Header Segment (RFC 7143 §11.2.1): the 48 bytes that start every iSCSI PDU.
//!
//! [`Bhs`] is a plain byte array with accessors for the fields common to all opcodes and
//! typed getters/setters by byte offset for the opcode-specific ones; `pdu.rs` gives the
//! opcode-specific layouts their names.

/// Length of the Basic Header Segment (RFC 7143 §11.2.1).
pub const BHS_LEN: usize = 48;

/// The reserved "no tag" value for ITT and TTT (RFC 7143 §11.2.1.8 / §11.18.4).
pub const RESERVED_TAG: u32 = 0xFFFF_FFFF;

/// PDU opcodes (RFC 7143 §11.2.1.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opcode {
    // Initiator opcodes.
    NopOut = 0x00,
    ScsiCommand = 0x01,
    TaskManagementRequest = 0x02,
    LoginRequest = 0x03,
    TextRequest = 0x04,
    DataOut = 0x05,
    LogoutRequest = 0x06,
    Snack = 0x10,
    // Target opcodes.
    NopIn = 0x20,
    ScsiResponse = 0x21,
    TaskManagementResponse = 0x22,
    LoginResponse = 0x23,
    TextResponse = 0x24,
    DataIn = 0x25,
    LogoutResponse = 0x26,
    ReadyToTransfer = 0x31,
    AsyncMessage = 0x32,
    Reject = 0x3F,
}

impl Opcode {
    /// The opcode for the low six bits of byte 0, or `None` for a reserved/vendor opcode.
    pub fn from_u8(v: u8) -> Option<Opcode> {
        Some(match v & 0x3F {
            0x00 => Opcode::NopOut,
            0x01 => Opcode::ScsiCommand,
            0x02 => Opcode::TaskManagementRequest,
            0x03 => Opcode::LoginRequest,
            0x04 => Opcode::TextRequest,
            0x05 => Opcode::DataOut,
            0x06 => Opcode::LogoutRequest,
            0x10 => Opcode::Snack,
            0x20 => Opcode::NopIn,
            0x21 => Opcode::ScsiResponse,
            0x22 => Opcode::TaskManagementResponse,
            0x23 => Opcode::LoginResponse,
            0x24 => Opcode::TextResponse,
            0x25 => Opcode::DataIn,
            0x26 => Opcode::LogoutResponse,
            0x31 => Opcode::ReadyToTransfer,
            0x32 => Opcode::AsyncMessage,
            0x3F => Opcode::Reject,
            _ => return None,
        })
    }
}

/// One Basic Header Segment (RFC 7143 §11.2.1, figure "Basic Header Segment").
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Bhs(pub [u8; BHS_LEN]);

impl std::fmt::Debug for Bhs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Bhs(op={:#04x}, itt={:#010x})",
            self.opcode_raw(),
            self.itt()
        )
    }
}

impl Default for Bhs {
    fn default() -> Self {
        Bhs([0; BHS_LEN])
    }
}

impl Bhs {
    /// A zeroed header with `opcode`.
    pub fn new(opcode: Opcode) -> Bhs {
        let mut b = Bhs::default();
        b.0[0] = opcode as u8;
        b
    }

    /// Copy the first 48 bytes of `bytes`; `None` when fewer are present.
    pub fn from_slice(bytes: &[u8]) -> Option<Bhs> {
        let b: [u8; BHS_LEN] = bytes.get(..BHS_LEN)?.try_into().ok()?;
        Some(Bhs(b))
    }

    /// Raw opcode (byte 0, bits 5..0).
    pub fn opcode_raw(&self) -> u8 {
        self.0[0] & 0x3F
    }

    pub fn opcode(&self) -> Option<Opcode> {
        Opcode::from_u8(self.0[0])
    }

    /// The I bit: immediate delivery (RFC 7143 §11.2.1.1).
    pub fn immediate(&self) -> bool {
        self.0[0] & 0x40 != 0
    }

    pub fn set_immediate(&mut self, on: bool) {
        self.set_bit(0, 0x40, on);
    }

    /// The F (final) bit, byte 1 bit 7.
    pub fn final_bit(&self) -> bool {
        self.0[1] & 0x80 != 0
    }

    pub fn flags(&self) -> u8 {
        self.0[1]
    }

    pub fn set_flags(&mut self, v: u8) {
        self.0[1] = v;
    }

    pub fn set_bit(&mut self, byte: usize, mask: u8, on: bool) {
        if on {
            self.0[byte] |= mask;
        } else {
            self.0[byte] &= !mask;
        }
    }

    /// TotalAHSLength in bytes (byte 4 counts 4-byte words; RFC 7143 §11.2.1.4).
    pub fn total_ahs_len(&self) -> usize {
        usize::from(self.0[4]) * 4
    }

    pub fn set_total_ahs_len_words(&mut self, words: u8) {
        self.0[4] = words;
    }

    /// DataSegmentLength in bytes, without padding (RFC 7143 §11.2.1.5).
    pub fn data_segment_len(&self) -> usize {
        (usize::from(self.0[5]) << 16) | (usize::from(self.0[6]) << 8) | usize::from(self.0[7])
    }

    /// Set DataSegmentLength; the field is 24 bits wide, larger values are a caller bug
    /// prevented by the negotiated MaxRecvDataSegmentLength (≤ 2^24 − 1, RFC 7143 §13.12).
    pub fn set_data_segment_len(&mut self, len: usize) {
        let len = len.min(0x00FF_FFFF) as u32;
        self.0[5..8].copy_from_slice(&len.to_be_bytes()[1..]);
    }

    /// Bytes 8..16: LUN or opcode-specific.
    pub fn lun_raw(&self) -> u64 {
        self.u64_at(8)
    }

    pub fn set_lun_raw(&mut self, v: u64) {
        self.set_u64_at(8, v);
    }

    /// Initiator Task Tag (bytes 16..20).
    pub fn itt(&self) -> u32 {
        self.u32_at(16)
    }

    pub fn set_itt(&mut self, v: u32) {
        self.set_u32_at(16, v);
    }

    pub fn u16_at(&self, at: usize) -> u16 {
        u16::from_be_bytes([self.0[at], self.0[at + 1]])
    }

    pub fn set_u16_at(&mut self, at: usize, v: u16) {
        self.0[at..at + 2].copy_from_slice(&v.to_be_bytes());
    }

    /// Big-endian u32 at `at`; `at` is a constant field offset ≤ 44.
    pub fn u32_at(&self, at: usize) -> u32 {
        u32::from_be_bytes([self.0[at], self.0[at + 1], self.0[at + 2], self.0[at + 3]])
    }

    pub fn set_u32_at(&mut self, at: usize, v: u32) {
        self.0[at..at + 4].copy_from_slice(&v.to_be_bytes());
    }

    pub fn u64_at(&self, at: usize) -> u64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.0[at..at + 8]);
        u64::from_be_bytes(b)
    }

    pub fn set_u64_at(&mut self, at: usize, v: u64) {
        self.0[at..at + 8].copy_from_slice(&v.to_be_bytes());
    }
}

/// Bytes of padding after a data segment of `len` bytes (RFC 7143 §11.2.3: 4-byte aligned).
pub fn padding(len: usize) -> usize {
    (4 - (len % 4)) % 4
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_round_trip() {
        let mut b = Bhs::new(Opcode::DataIn);
        b.set_data_segment_len(0x12_3456);
        b.set_total_ahs_len_words(3);
        assert_eq!(b.data_segment_len(), 0x12_3456);
        assert_eq!(b.total_ahs_len(), 12);
        assert_eq!(b.opcode(), Some(Opcode::DataIn));
    }

    #[test]
    fn unknown_opcodes_are_none() {
        for v in [0x07u8, 0x0F, 0x1C, 0x1D, 0x1E, 0x27, 0x30, 0x3C] {
            assert_eq!(Opcode::from_u8(v), None, "{v:#x}");
        }
        assert_eq!(Opcode::from_u8(0x41), Some(Opcode::ScsiCommand)); // I bit ignored
    }

    #[test]
    fn short_slice_is_not_a_header() {
        assert!(Bhs::from_slice(&[0u8; 47]).is_none());
        assert!(Bhs::from_slice(&[0u8; 48]).is_some());
    }

    #[test]
    fn padding_aligns_to_four() {
        assert_eq!([0, 1, 2, 3, 4, 5].map(padding), [0, 3, 2, 1, 0, 3]);
    }
}
