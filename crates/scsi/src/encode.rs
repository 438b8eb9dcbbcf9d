//! CDBs built for an initiator (`stint bench`, the simulator's host, tests): the inverse of
//! the decoders, for the commands a load generator sends.

/// READ(16) or WRITE(16) (SBC-4 READ(16) and WRITE(16) tables) of `blocks` logical blocks at
/// `lba`, with the duration limit descriptor index DLD2:0 in byte 1 bit 0 and byte 14 bits 7:6
/// (SBC-5), as Linux sd builds them.
pub fn rw16(write: bool, lba: u64, blocks: u32, dld: u8) -> [u8; 16] {
    let mut c = [0u8; 16];
    c[0] = if write { 0x8A } else { 0x88 };
    c[1] = (dld >> 2) & 1;
    c[2..10].copy_from_slice(&lba.to_be_bytes());
    c[10..14].copy_from_slice(&blocks.to_be_bytes());
    c[14] = (dld & 3) << 6;
    c
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::Command;

    #[test]
    fn rw16_decodes_to_what_was_asked() {
        for dld in 0..8 {
            let Ok((_, Command::Read(rw))) = crate::decode(&rw16(false, 1 << 40, 256, dld)) else {
                panic!("READ(16) did not decode");
            };
            assert_eq!((rw.lba, rw.transfer_length, rw.dld), (1 << 40, 256, dld));
            let Ok((_, Command::Write(rw))) = crate::decode(&rw16(true, 7, 1, dld)) else {
                panic!("WRITE(16) did not decode");
            };
            assert_eq!((rw.lba, rw.transfer_length, rw.dld), (7, 1, dld));
        }
    }

    #[test]
    fn unmap_list_decodes_to_what_was_asked() {
        let list = unmap_parameter_list(&[(7, 3), (1 << 40, 0)]);
        let d = crate::provisioning::unmap_descriptors(&list).unwrap();
        let ranges: Vec<(u64, u32)> = d
            .iter()
            .map(|d| (d.lba, d.number_of_logical_blocks))
            .collect();
        assert_eq!(ranges, [(7, 3), (1 << 40, 0)]);
    }
}
