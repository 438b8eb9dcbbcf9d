//! Logical block provisioning (SBC-4 §4.7): the UNMAP parameter list, GET LBA STATUS
//! parameter data and the Logical Block Provisioning VPD page.

use crate::inquiry::{begin_page, end_page, vpd};
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
}
