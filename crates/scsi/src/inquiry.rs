//! Standard INQUIRY data (SPC-5 §6.7.2, table 148) and the VPD pages (SPC-5 §7.7, SBC-4 §6.6).

/// Peripheral device type: direct access block device (SPC-5 table 150).
pub const DIRECT_ACCESS_BLOCK_DEVICE: u8 = 0x00;
/// PERIPHERAL QUALIFIER 011b / DEVICE TYPE 1Fh: no logical unit at this LUN (SPC-5 table 149).
pub const NO_LOGICAL_UNIT: u8 = 0x7F;

/// Version descriptors claimed in standard INQUIRY data (SPC-5 table 151): SAM-5, iSCSI,
/// SPC-4, SPC-5, SBC-3, SBC-4.
const VERSION_DESCRIPTORS: [u16; 6] = [0x00A0, 0x0960, 0x0460, 0x05C0, 0x04C0, 0x0600];

/// Length of the standard INQUIRY data we return.
pub const STANDARD_INQUIRY_LENGTH: usize = 96;

/// What standard INQUIRY data says about one logical unit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StandardInquiry {
    /// PERIPHERAL QUALIFIER and PERIPHERAL DEVICE TYPE (byte 0).
    pub peripheral: u8,
    pub removable: bool,
    /// 3PC: the logical unit has a copy manager (third-party copy commands, VPD 8Fh).
    pub third_party_copy: bool,
    /// TPGS bit 4 (byte 5): implicit asymmetric logical unit access (SPC-4 §5.16.2.7).
    pub implicit_alua: bool,
    /// TPGS bit 5: explicit asymmetric logical unit access, SET TARGET PORT GROUPS
    /// (SPC-4 §5.16.2.8).
    pub explicit_alua: bool,
    /// VERSION (byte 2): the SPC version claimed (Linux probes CDL only from SPC-5, 07h, on).
    pub version: u8,
    pub vendor: [u8; 8],
    pub product: [u8; 16],
    pub revision: [u8; 4],
}

/// Copy `s` into a space-padded ASCII field (SPC-5 §4.3.1); non-printable characters become '_'.
pub fn ascii_field<const N: usize>(s: &str) -> [u8; N] {
    let mut f = [b' '; N];
    for (d, c) in f.iter_mut().zip(s.bytes()) {
        *d = if (0x20..=0x7E).contains(&c) { c } else { b'_' };
    }
    f
}

impl StandardInquiry {
    /// Append the standard INQUIRY data (SPC-5 table 148).
    pub fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.resize(start + STANDARD_INQUIRY_LENGTH, 0);
        let b = &mut out[start..];
        b[0] = self.peripheral;
        b[1] = if self.removable { 0x80 } else { 0 };
        b[2] = self.version;
        b[3] = 0x02; // RESPONSE DATA FORMAT 2
        b[4] = (STANDARD_INQUIRY_LENGTH - 5) as u8;
        b[5] = u8::from(self.explicit_alua) << 5
            | u8::from(self.implicit_alua) << 4
            | u8::from(self.third_party_copy) << 3;
        b[7] = 0x02; // CMDQUE: SIMPLE/ORDERED/HEAD OF QUEUE task attributes
        b[8..16].copy_from_slice(&self.vendor);
        b[16..32].copy_from_slice(&self.product);
        b[32..36].copy_from_slice(&self.revision);
        for (i, v) in VERSION_DESCRIPTORS.iter().enumerate() {
            b[58 + 2 * i..60 + 2 * i].copy_from_slice(&v.to_be_bytes());
        }
    }
}

/// VPD page codes this device returns (SPC-5 table 486, SBC-4 table 209).
pub mod vpd {
    pub const SUPPORTED_VPD_PAGES: u8 = 0x00;
    pub const UNIT_SERIAL_NUMBER: u8 = 0x80;
    pub const DEVICE_IDENTIFICATION: u8 = 0x83;
    pub const EXTENDED_INQUIRY_DATA: u8 = 0x86;
    pub const THIRD_PARTY_COPY: u8 = 0x8F;
    pub const BLOCK_LIMITS: u8 = 0xB0;
    pub const BLOCK_DEVICE_CHARACTERISTICS: u8 = 0xB1;
    pub const LOGICAL_BLOCK_PROVISIONING: u8 = 0xB2;
    pub const ALL: [u8; 8] = [
        SUPPORTED_VPD_PAGES,
        UNIT_SERIAL_NUMBER,
        DEVICE_IDENTIFICATION,
        EXTENDED_INQUIRY_DATA,
        THIRD_PARTY_COPY,
        BLOCK_LIMITS,
        BLOCK_DEVICE_CHARACTERISTICS,
        LOGICAL_BLOCK_PROVISIONING,
    ];
}

/// Start a VPD page: byte 0 peripheral, byte 1 page code, bytes 2–3 PAGE LENGTH (patched by
/// [`end_page`]). Returns the page's start offset.
pub(crate) fn begin_page(out: &mut Vec<u8>, peripheral: u8, page: u8) -> usize {
    let start = out.len();
    out.extend_from_slice(&[peripheral, page, 0, 0]);
    start
}

pub(crate) fn end_page(out: &mut [u8], start: usize) {
    let len = (out.len() - start - 4) as u16;
    out[start + 2..start + 4].copy_from_slice(&len.to_be_bytes());
}

/// Supported VPD Pages (SPC-5 §7.7.18, table 522).
pub fn supported_vpd_pages(out: &mut Vec<u8>, peripheral: u8) {
    let s = begin_page(out, peripheral, vpd::SUPPORTED_VPD_PAGES);
    out.extend_from_slice(&vpd::ALL);
    end_page(out, s);
}

/// Unit Serial Number (SPC-5 §7.7.19, table 523).
pub fn unit_serial_number(out: &mut Vec<u8>, peripheral: u8, serial: &str) {
    let s = begin_page(out, peripheral, vpd::UNIT_SERIAL_NUMBER);
    out.extend(
        serial
            .bytes()
            .map(|c| if (0x20..=0x7E).contains(&c) { c } else { b'_' }),
    );
    end_page(out, s);
}

/// Identifiers for the Device Identification page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceIdentifiers {
    /// NAA IEEE Registered Extended designator (NAA 6, SPC-5 table 505), 16 bytes.
    pub naa: [u8; 16],
    /// EUI-64 designator (SPC-5 §7.7.6.5), 8 bytes.
    pub eui64: [u8; 8],
    /// T10 vendor ID based designator (SPC-5 §7.7.6.4): vendor + serial.
    pub vendor: [u8; 8],
    pub serial: String,
    /// RELATIVE TARGET PORT IDENTIFIER of the port the command came through (SPC-5 table 508).
    pub relative_target_port: u16,
    /// TARGET PORT GROUP of that port (SPC-5 §7.7.6.7), as REPORT TARGET PORT GROUPS names it.
    pub target_port_group: u16,
}

/// Device Identification (SPC-5 §7.7.6, table 500; designation descriptor table 501).
pub fn device_identification(out: &mut Vec<u8>, peripheral: u8, ids: &DeviceIdentifiers) {
    let s = begin_page(out, peripheral, vpd::DEVICE_IDENTIFICATION);
    // CODE SET 1 (binary), ASSOCIATION 00b (logical unit), DESIGNATOR TYPE 3 (NAA).
    out.extend_from_slice(&[0x01, 0x03, 0, 16]);
    out.extend_from_slice(&ids.naa);
    // DESIGNATOR TYPE 2 (EUI-64).
    out.extend_from_slice(&[0x01, 0x02, 0, 8]);
    out.extend_from_slice(&ids.eui64);
    // CODE SET 2 (ASCII), DESIGNATOR TYPE 1 (T10 vendor ID).
    out.extend_from_slice(&[0x02, 0x01, 0, (8 + ids.serial.len().min(64)) as u8]);
    out.extend_from_slice(&ids.vendor);
    out.extend(
        ids.serial
            .bytes()
            .take(64)
            .map(|c| if (0x20..=0x7E).contains(&c) { c } else { b'_' }),
    );
    // PROTOCOL IDENTIFIER 5 (iSCSI), PIV 1, ASSOCIATION 01b (target port), TYPE 4 (relative
    // target port identifier).
    out.extend_from_slice(&[0x51, 0x94, 0, 4, 0, 0]);
    out.extend_from_slice(&ids.relative_target_port.to_be_bytes());
    // The same with DESIGNATOR TYPE 5 (target port group).
    out.extend_from_slice(&[0x51, 0x95, 0, 4, 0, 0]);
    out.extend_from_slice(&ids.target_port_group.to_be_bytes());
    end_page(out, s);
}

/// Extended INQUIRY Data (SPC-5 §7.7.7, table 509): task attributes and volatile cache.
pub fn extended_inquiry_data(out: &mut Vec<u8>, peripheral: u8) {
    let s = begin_page(out, peripheral, vpd::EXTENDED_INQUIRY_DATA);
    let mut p = [0u8; 60];
    p[1] = 0x07; // HEADSUP, ORDSUP, SIMPSUP
    p[2] = 0x01; // V_SUP: a volatile write cache exists
    out.extend_from_slice(&p);
    end_page(out, s);
}

/// Fields of the Block Limits page (SBC-4 §6.6.4, table 213), in logical blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockLimits {
    /// MAXIMUM COMPARE AND WRITE LENGTH.
    pub maximum_compare_and_write_length: u8,
    pub optimal_transfer_length_granularity: u16,
    pub maximum_transfer_length: u32,
    pub optimal_transfer_length: u32,
    pub maximum_prefetch_length: u32,
    /// MAXIMUM WRITE SAME LENGTH; WSNZ is clear, so 0 blocks means "to the last LBA" when
    /// that many blocks are within it.
    pub maximum_write_same_length: u64,
    /// MAXIMUM UNMAP LBA COUNT and MAXIMUM UNMAP BLOCK DESCRIPTOR COUNT; 0 without thin
    /// provisioning (UNMAP is not supported).
    pub maximum_unmap_lba_count: u32,
    pub maximum_unmap_block_descriptor_count: u32,
    /// OPTIMAL UNMAP GRANULARITY: ranges of this many blocks, aligned to it (UGAVALID with an
    /// UNMAP GRANULARITY ALIGNMENT of 0), are deallocated; the rest of an unmapped range is
    /// written with zeros.
    pub optimal_unmap_granularity: u32,
    /// MAXIMUM ATOMIC TRANSFER LENGTH of WRITE ATOMIC; ATOMIC ALIGNMENT and ATOMIC TRANSFER
    /// LENGTH GRANULARITY are 0 (none required).
    pub maximum_atomic_transfer_length: u32,
    /// MAXIMUM ATOMIC TRANSFER LENGTH WITH ATOMIC BOUNDARY and MAXIMUM ATOMIC BOUNDARY SIZE.
    pub maximum_atomic_transfer_length_with_atomic_boundary: u32,
    pub maximum_atomic_boundary_size: u32,
}

/// Block Limits (SBC-4 §6.6.4, table 213).
pub fn block_limits(out: &mut Vec<u8>, peripheral: u8, l: &BlockLimits) {
    let s = begin_page(out, peripheral, vpd::BLOCK_LIMITS);
    let mut p = [0u8; 60];
    p[1] = l.maximum_compare_and_write_length;
    p[2..4].copy_from_slice(&l.optimal_transfer_length_granularity.to_be_bytes());
    p[4..8].copy_from_slice(&l.maximum_transfer_length.to_be_bytes());
    p[8..12].copy_from_slice(&l.optimal_transfer_length.to_be_bytes());
    p[12..16].copy_from_slice(&l.maximum_prefetch_length.to_be_bytes());
    p[16..20].copy_from_slice(&l.maximum_unmap_lba_count.to_be_bytes());
    p[20..24].copy_from_slice(&l.maximum_unmap_block_descriptor_count.to_be_bytes());
    if l.optimal_unmap_granularity != 0 {
        p[24..28].copy_from_slice(&l.optimal_unmap_granularity.to_be_bytes());
        p[28] = 0x80; // UGAVALID, UNMAP GRANULARITY ALIGNMENT 0
    }
    p[32..40].copy_from_slice(&l.maximum_write_same_length.to_be_bytes());
    p[40..44].copy_from_slice(&l.maximum_atomic_transfer_length.to_be_bytes());
    p[52..56].copy_from_slice(
        &l.maximum_atomic_transfer_length_with_atomic_boundary
            .to_be_bytes(),
    );
    p[56..60].copy_from_slice(&l.maximum_atomic_boundary_size.to_be_bytes());
    out.extend_from_slice(&p);
    end_page(out, s);
}

/// What a read of a block returns after a BLOCK ERASE or CRYPTOGRAPHIC ERASE sanitize and
/// before the block is written: WABEREQ and WACEREQ (SBC-4 table 208).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AfterSanitize {
    /// 00b: not specified (no sanitize).
    NotSpecified,
    /// 01b: GOOD status, with data of the device's choosing (here: zeros).
    ReadsSucceed,
}

/// Block Device Characteristics (SBC-4 §6.6.2, table 208). `medium_rotation_rate` 1 means
/// non-rotating medium (table 209).
pub fn block_device_characteristics(
    out: &mut Vec<u8>,
    peripheral: u8,
    medium_rotation_rate: u16,
    after_sanitize: AfterSanitize,
) {
    let s = begin_page(out, peripheral, vpd::BLOCK_DEVICE_CHARACTERISTICS);
    let mut p = [0u8; 60];
    p[0..2].copy_from_slice(&medium_rotation_rate.to_be_bytes());
    if after_sanitize == AfterSanitize::ReadsSucceed {
        p[3] = 0b01 << 6 | 0b01 << 4; // WABEREQ, WACEREQ
    }
    out.extend_from_slice(&p);
    end_page(out, s);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_inquiry_layout() {
        let inq = StandardInquiry {
            peripheral: 0,
            removable: false,
            third_party_copy: false,
            implicit_alua: true,
            explicit_alua: false,
            version: 0x0D,
            vendor: ascii_field("STINT"),
            product: ascii_field("ramdisk\u{7}"),
            revision: ascii_field("0.1"),
        };
        let mut out = vec![];
        inq.encode(&mut out);
        assert_eq!(out.len(), 96);
        assert_eq!(out[4] as usize, out.len() - 5);
        assert_eq!(&out[8..16], b"STINT   ");
        assert_eq!(&out[16..24], b"ramdisk_");
        assert_eq!(out[2], 0x0D);
        assert_eq!(out[5], 0x10, "TPGS 01b");
        assert_eq!(&out[58..60], &[0x00, 0xA0]);
    }

    #[test]
    fn page_lengths_cover_the_payload() {
        let ids = DeviceIdentifiers {
            naa: [0x60; 16],
            eui64: [1; 8],
            vendor: ascii_field("STINT"),
            serial: "abc".into(),
            relative_target_port: 1,
            target_port_group: 7,
        };
        let mut pages: Vec<Vec<u8>> = vec![vec![]; 6];
        supported_vpd_pages(&mut pages[0], 0);
        unit_serial_number(&mut pages[1], 0, "SER1");
        device_identification(&mut pages[2], 0, &ids);
        extended_inquiry_data(&mut pages[3], 0);
        block_device_characteristics(&mut pages[4], 0, 1, AfterSanitize::NotSpecified);
        crate::provisioning::logical_block_provisioning(&mut pages[5], 0, Some(3));
        for p in &pages {
            assert_eq!(u16::from_be_bytes([p[2], p[3]]) as usize, p.len() - 4);
        }
        assert_eq!(&pages[0][4..], &vpd::ALL);
        assert_eq!(&pages[1][4..], b"SER1");
        // NAA descriptor first, then EUI-64 at 4 + 20.
        assert_eq!(pages[2][5], 0x03);
        assert_eq!(pages[2][4 + 20 + 1], 0x02);
        // The last two designators: relative target port 1, target port group 7.
        let tail = &pages[2][pages[2].len() - 16..];
        assert_eq!(
            tail,
            &[0x51, 0x94, 0, 4, 0, 0, 0, 1, 0x51, 0x95, 0, 4, 0, 0, 0, 7]
        );
        assert_eq!(&pages[4][4..6], &[0, 1]);
    }
}
