//! Logical block provisioning (SBC-4 §4.7): the UNMAP parameter list, GET LBA STATUS
//! parameter data, the Logical Block Provisioning VPD page and the thresholds of its mode
//! page.

use crate::cdb::{be32, u8_at};
use crate::inquiry::{begin_page, end_page, vpd};
use crate::log::ProvisioningResources;
use crate::sense::{Asc, Sense, SenseKey};

/// One UNMAP block descriptor (SBC-4 table 122): a range to deallocate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnmapDescriptor {
    pub lba: u64,
    pub number_of_logical_blocks: u32,
}

/// Bytes of the UNMAP parameter list header and of each block descriptor.
const UNMAP_HEADER: usize = 8;
const UNMAP_DESCRIPTOR: usize = 16;

/// The block descriptors of an UNMAP parameter list (SBC-4 §5.30.2, table 121). A list shorter
/// than its header is a PARAMETER LIST LENGTH ERROR; a data length that claims more than was
/// sent is an invalid field at that length; an incomplete last descriptor is ignored (SBC-4:
/// the UNMAP BLOCK DESCRIPTOR DATA LENGTH "should be a multiple of 16").
pub fn unmap_descriptors(list: &[u8]) -> Result<Vec<UnmapDescriptor>, Sense> {
    if list.len() < UNMAP_HEADER {
        return Err(Sense::new(
            SenseKey::IllegalRequest,
            Asc::PARAMETER_LIST_LENGTH_ERROR,
        ));
    }
    let data_length = usize::from(u16::from_be_bytes([list[0], list[1]]));
    let descriptor_length = usize::from(u16::from_be_bytes([list[2], list[3]]));
    if data_length + 2 > list.len() {
        return Err(Sense::invalid_field_in_parameter_list(0, None));
    }
    if descriptor_length + UNMAP_HEADER > list.len() {
        return Err(Sense::invalid_field_in_parameter_list(2, None));
    }
    Ok(list[UNMAP_HEADER..UNMAP_HEADER + descriptor_length]
        .chunks_exact(UNMAP_DESCRIPTOR)
        .map(|d| UnmapDescriptor {
            lba: u64::from_be_bytes(d[0..8].try_into().unwrap_or_default()),
            number_of_logical_blocks: u32::from_be_bytes(d[8..12].try_into().unwrap_or_default()),
        })
        .collect())
}

/// PROVISIONING STATUS of an LBA status descriptor (SBC-4 table 72).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProvisioningStatus {
    Mapped = 0,
    Deallocated = 1,
}

/// GET LBA STATUS parameter data (SBC-4 §5.8.2, tables 70–71) for `extents` in order from the
/// starting LBA: (LBA, number of blocks, status). The PARAMETER DATA LENGTH covers them all;
/// the caller truncates to the allocation length.
pub fn lba_status(extents: &[(u64, u32, ProvisioningStatus)], out: &mut Vec<u8>) {
    let length = 4 + 16 * extents.len() as u32;
    out.extend_from_slice(&length.to_be_bytes());
    out.extend_from_slice(&[0; 4]);
    for &(lba, blocks, status) in extents {
        out.extend_from_slice(&lba.to_be_bytes());
        out.extend_from_slice(&blocks.to_be_bytes());
        out.extend_from_slice(&[status as u8, 0, 0, 0]);
    }
}

/// Logical Block Provisioning (SBC-4 §6.6.6, table 217). Thin (`Some(threshold exponent)`):
/// THRESHOLD EXPONENT, the unit of the Logical Block Provisioning log page's counts and of
/// its thresholds (2^exponent logical blocks); LBPU (UNMAP), LBPWS and LBPWS10 (WRITE SAME
/// with UNMAP), LBPRZ 001b (a deallocated block reads as zeros), PROVISIONING TYPE 010b; no
/// anchored state. `None`: fully provisioned.
pub fn logical_block_provisioning(out: &mut Vec<u8>, peripheral: u8, thin: Option<u8>) {
    let s = begin_page(out, peripheral, vpd::LOGICAL_BLOCK_PROVISIONING);
    match thin {
        Some(exponent) => out.extend_from_slice(&[exponent, 0x80 | 0x40 | 0x20 | 0x04, 0x02, 0]),
        None => out.extend_from_slice(&[0, 0, 0, 0]),
    }
    end_page(out, s);
}

/// The Logical Block Provisioning mode page (SBC-4 §6.5.10): page 1Ch, subpage 02h.
pub const MODE_PAGE: (u8, u8) = (0x1C, 0x02);
/// Its length: the 16-byte header and two threshold descriptors of 8 bytes.
pub const MODE_PAGE_LEN: usize = 16 + 2 * 8;

/// One soft threshold (THRESHOLD TYPE 000b): ENABLED and THRESHOLD COUNT, in threshold sets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Threshold {
    pub enabled: bool,
    pub count: u32,
}

/// The thresholds a host may set on a thin-provisioned logical unit: one on the available LBA
/// mapping resources, armed decreasing, one on the used ones, armed increasing. Crossing an
/// enabled one establishes THIN PROVISIONING SOFT THRESHOLD REACHED (SBC-4 §4.7.3.7).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Thresholds {
    /// SITUA: the unit attention goes to the I_T nexus whose command crossed the threshold
    /// only, not to every one.
    pub situa: bool,
    pub available: Threshold,
    pub used: Threshold,
}

/// THRESHOLD ARMING (SBC-4 threshold descriptor) 000b: armed decreasing; 001b: increasing.
const ARMED_DECREASING: u8 = 0b000;
const ARMED_INCREASING: u8 = 0b001;
/// THRESHOLD RESOURCE: the parameter codes of the Logical Block Provisioning log page.
const AVAILABLE_LBA_MAPPING_RESOURCES: u8 = 0x01;
const USED_LBA_MAPPING_RESOURCES: u8 = 0x02;

impl Thresholds {
    /// The descriptors in page order: (arming, resource, threshold).
    fn descriptors(&self) -> [(u8, u8, Threshold); 2] {
        [
            (
                ARMED_DECREASING,
                AVAILABLE_LBA_MAPPING_RESOURCES,
                self.available,
            ),
            (ARMED_INCREASING, USED_LBA_MAPPING_RESOURCES, self.used),
        ]
    }

    /// The page as MODE SENSE returns it (PS clear), or with `changeable` its mask of the
    /// fields MODE SELECT may change: SITUA, each ENABLED and THRESHOLD COUNT.
    pub fn encode(&self, changeable: bool) -> [u8; MODE_PAGE_LEN] {
        let mut p = [0u8; MODE_PAGE_LEN];
        p[0] = 0x40 | MODE_PAGE.0;
        p[1] = MODE_PAGE.1;
        p[2..4].copy_from_slice(&((MODE_PAGE_LEN - 4) as u16).to_be_bytes());
        p[4] = if changeable {
            0x01
        } else {
            u8::from(self.situa)
        };
        for (d, (arming, resource, t)) in p[16..].chunks_exact_mut(8).zip(self.descriptors()) {
            if changeable {
                d[0] = 0x80;
                d[4..].fill(0xFF);
            } else {
                // ENABLED, THRESHOLD TYPE 000b (soft), THRESHOLD ARMING.
                d[0] = u8::from(t.enabled) << 7 | arming;
                d[1] = resource;
                d[4..].copy_from_slice(&t.count.to_be_bytes());
            }
        }
        p
    }

    /// The values of a page MODE SELECT sent, whose other bits it checked against
    /// [`Self::encode`].
    pub fn decode(page: &[u8]) -> Thresholds {
        let threshold = |at: usize| Threshold {
            enabled: u8_at(page, at) & 0x80 != 0,
            count: be32(page, at + 4),
        };
        Thresholds {
            situa: u8_at(page, 4) & 0x01 != 0,
            available: threshold(16),
            used: threshold(24),
        }
    }

    /// Whether the resources going from `before` to `now` crossed an enabled threshold in the
    /// direction it is armed for: the available count falling to or below its threshold, or
    /// the used count rising to or above its own.
    pub fn crossed(&self, before: &ProvisioningResources, now: &ProvisioningResources) -> bool {
        let a = self.available;
        let u = self.used;
        (a.enabled && before.available > a.count && now.available <= a.count)
            || (u.enabled && before.used < u.count && now.used >= u.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode::unmap_parameter_list as list;

    #[test]
    fn unmap_parameter_list() {
        let d = unmap_descriptors(&list(&[(7, 3), (1 << 40, 0)])).unwrap();
        assert_eq!(
            d,
            [
                UnmapDescriptor {
                    lba: 7,
                    number_of_logical_blocks: 3
                },
                UnmapDescriptor {
                    lba: 1 << 40,
                    number_of_logical_blocks: 0
                }
            ]
        );
        assert_eq!(unmap_descriptors(&list(&[])).unwrap(), []);
        // An incomplete last descriptor is ignored.
        let mut l = list(&[(1, 1)]);
        l[3] = 20;
        l[1] = 26;
        l.extend_from_slice(&[0; 4]);
        assert_eq!(unmap_descriptors(&l).unwrap().len(), 1);
        let short = unmap_descriptors(&[0; 7]).unwrap_err();
        assert_eq!(short.asc, Asc::PARAMETER_LIST_LENGTH_ERROR);
        // Lengths that claim more than was sent.
        let mut l = list(&[(1, 1)]);
        l[3] = 32;
        assert_eq!(
            unmap_descriptors(&l).unwrap_err(),
            Sense::invalid_field_in_parameter_list(2, None)
        );
        let mut l = list(&[(1, 1)]);
        l[1] = 40;
        assert_eq!(
            unmap_descriptors(&l).unwrap_err(),
            Sense::invalid_field_in_parameter_list(0, None)
        );
    }

    #[test]
    fn lba_status_layout() {
        let mut out = Vec::new();
        lba_status(
            &[
                (5, 3, ProvisioningStatus::Mapped),
                (8, 100, ProvisioningStatus::Deallocated),
            ],
            &mut out,
        );
        assert_eq!(out.len(), 8 + 32);
        assert_eq!(&out[0..4], &36u32.to_be_bytes());
        assert_eq!(&out[8..16], &5u64.to_be_bytes());
        assert_eq!(&out[16..20], &3u32.to_be_bytes());
        assert_eq!((out[20], out[36]), (0, 1));
    }

    #[test]
    fn provisioning_page() {
        let mut thin = Vec::new();
        logical_block_provisioning(&mut thin, 0, Some(11));
        assert_eq!(thin, [0, 0xB2, 0, 4, 11, 0xE4, 0x02, 0]);
        let mut full = Vec::new();
        logical_block_provisioning(&mut full, 0, None);
        assert_eq!(full, [0, 0xB2, 0, 4, 0, 0, 0, 0]);
    }

    #[test]
    fn threshold_page_round_trip_and_mask() {
        let t = Thresholds {
            situa: true,
            available: Threshold {
                enabled: false,
                count: 7,
            },
            used: Threshold {
                enabled: true,
                count: 0x0102_0304,
            },
        };
        let page = t.encode(false);
        assert_eq!(&page[..5], &[0x5C, 0x02, 0x00, 0x1C, 0x01]);
        assert_eq!(&page[16..24], &[0x00, 0x01, 0, 0, 0, 0, 0, 7]);
        assert_eq!(&page[24..32], &[0x81, 0x02, 0, 0, 1, 2, 3, 4]);
        assert_eq!(Thresholds::decode(&page), t);
        let mask = t.encode(true);
        assert_eq!(mask[4], 0x01);
        assert_eq!(&mask[24..32], &[0x80, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF]);
    }

    #[test]
    fn thresholds_fire_once_per_crossing_in_their_direction() {
        let r = |available, used| ProvisioningResources { available, used };
        let mut t = Thresholds {
            used: Threshold {
                enabled: true,
                count: 10,
            },
            ..Thresholds::default()
        };
        assert!(t.crossed(&r(91, 9), &r(90, 10)));
        assert!(!t.crossed(&r(90, 10), &r(89, 11)), "already above");
        assert!(!t.crossed(&r(89, 11), &r(95, 5)), "falling is not armed");
        t.used.enabled = false;
        assert!(!t.crossed(&r(91, 9), &r(90, 10)), "disabled");
        t.available = Threshold {
            enabled: true,
            count: 50,
        };
        assert!(t.crossed(&r(51, 49), &r(50, 50)));
        assert!(!t.crossed(&r(50, 50), &r(60, 40)));
    }
}
