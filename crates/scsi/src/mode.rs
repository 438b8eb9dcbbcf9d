//! Mode parameters (SPC-5 §7.5, SBC-4 §6.5): MODE SENSE data encoding and MODE SELECT parameter
//! list validation for the pages this device implements.

use crate::cdb::{be16, be32, be64, u8_at};
use crate::command::PageControl;
use crate::sense::{Asc, Sense, SenseKey};

pub const READ_WRITE_ERROR_RECOVERY: u8 = 0x01;
pub const CACHING: u8 = 0x08;
pub const CONTROL: u8 = 0x0A;
/// Control Extension is subpage 01h of page 0Ah (SPC-5 §7.5.10).
pub const CONTROL_EXTENSION_SUBPAGE: u8 = 0x01;
pub const ALL_PAGES: u8 = 0x3F;
pub const ALL_SUBPAGES: u8 = 0xFF;

/// The changeable mode parameters of one logical unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModeParameters {
    /// WCE, Caching page byte 2 bit 2 (SBC-4 table 231).
    pub wce: bool,
    /// D_SENSE, Control page byte 2 bit 2 (SPC-5 table 457): descriptor-format sense.
    pub d_sense: bool,
    /// SWP, Control page byte 4 bit 3 (SPC-5 table 457): software write protect.
    pub swp: bool,
}

/// Every (page, subpage) implemented, in MODE SENSE "all pages" order.
const PAGES: [(u8, u8); 4] = [
    (READ_WRITE_ERROR_RECOVERY, 0),
    (CACHING, 0),
    (CONTROL, 0),
    (CONTROL, CONTROL_EXTENSION_SUBPAGE),
];

/// The page body (from byte 0) for one page and page control.
fn page_bytes(
    page: u8,
    subpage: u8,
    pc: PageControl,
    current: &ModeParameters,
    default: &ModeParameters,
) -> Vec<u8> {
    let values = match pc {
        PageControl::Current => Some(current),
        PageControl::Default => Some(default),
        PageControl::Changeable => None,
    };
    match (page, subpage) {
        // Read-Write Error Recovery (SBC-4 §6.5.8, table 245): AWRE, ARRE; nothing changeable.
        (READ_WRITE_ERROR_RECOVERY, 0) => {
            let mut p = vec![0u8; 12];
            p[0] = READ_WRITE_ERROR_RECOVERY;
            p[1] = 10;
            if values.is_some() {
                p[2] = 0xC0;
            }
            p
        }
        // Caching (SBC-4 §6.5.5, table 231): WCE changeable.
        (CACHING, 0) => {
            let mut p = vec![0u8; 20];
            p[0] = CACHING;
            p[1] = 18;
            p[2] = match values {
                Some(v) => u8::from(v.wce) << 2,
                None => 0x04,
            };
            p
        }
        // Control (SPC-5 §7.5.9, table 457): D_SENSE and SWP changeable; GLTSD = 1 (no log saving),
        // QUEUE ALGORITHM MODIFIER 1 (unrestricted reordering allowed).
        (CONTROL, 0) => {
            let mut p = vec![0u8; 12];
            p[0] = CONTROL;
            p[1] = 10;
            match values {
                Some(v) => {
                    p[2] = u8::from(v.d_sense) << 2 | 0x02;
                    p[3] = 0x10;
                    p[4] = u8::from(v.swp) << 3;
                    p[8..10].copy_from_slice(&0xFFFFu16.to_be_bytes()); // BUSY TIMEOUT PERIOD: unlimited
                }
                None => {
                    p[2] = 0x04;
                    p[4] = 0x08;
                }
            }
            p
        }
        // Control Extension (SPC-5 §7.5.10, table 459): SPF = 1; nothing changeable.
        (CONTROL, CONTROL_EXTENSION_SUBPAGE) => {
            let mut p = vec![0u8; 32];
            p[0] = 0x40 | CONTROL;
            p[1] = CONTROL_EXTENSION_SUBPAGE;
            p[2..4].copy_from_slice(&28u16.to_be_bytes());
            if values.is_some() {
                p[6] = 252; // MAXIMUM SENSE DATA LENGTH
            }
            p
        }
        _ => Vec::new(),
    }
}

/// Which pages a MODE SENSE (page code, subpage code) selects (SPC-5 §6.14, table 166), or the
/// INVALID FIELD IN CDB sense for an unsupported one.
fn select_pages(page_code: u8, subpage_code: u8) -> Result<Vec<(u8, u8)>, Sense> {
    let selected: Vec<(u8, u8)> = match (page_code, subpage_code) {
        (ALL_PAGES, 0) => PAGES.iter().copied().filter(|p| p.1 == 0).collect(),
        (ALL_PAGES, ALL_SUBPAGES) => PAGES.to_vec(),
        (ALL_PAGES, _) => return Err(Sense::invalid_field_in_cdb(3, None)),
        (p, ALL_SUBPAGES) => PAGES.iter().copied().filter(|x| x.0 == p).collect(),
        (p, s) => PAGES.iter().copied().filter(|x| *x == (p, s)).collect(),
    };
    if selected.is_empty() {
        // Unknown page: point at PAGE CODE; known page with unknown subpage: at SUBPAGE CODE.
        return Err(if PAGES.iter().any(|x| x.0 == page_code) {
            Sense::invalid_field_in_cdb(3, None)
        } else {
            Sense::invalid_field_in_cdb(2, Some(5))
        });
    }
    Ok(selected)
}

/// What MODE SENSE needs to know about the logical unit.
#[derive(Clone, Copy, Debug)]
pub struct ModeSenseContext<'a> {
    pub current: &'a ModeParameters,
    pub default: &'a ModeParameters,
    pub write_protected: bool,
    pub number_of_blocks: u64,
    pub block_length: u32,
}

/// MODE SENSE (6)/(10) parameter data (SPC-5 §7.5.5–7.5.6): header, optional block descriptor
/// (short, or long with LLBAA in MODE SENSE (10)), pages. Not truncated.
pub fn mode_sense(
    m: &crate::command::ModeSense,
    ctx: &ModeSenseContext,
    out: &mut Vec<u8>,
) -> Result<(), Sense> {
    let pages = select_pages(m.page_code, m.subpage_code)?;
    let start = out.len();
    let header_len = if m.ten { 8 } else { 4 };
    out.resize(start + header_len, 0);
    // DEVICE-SPECIFIC PARAMETER (SBC-4 table 227): WP, DPOFUA.
    let device_specific = u8::from(ctx.write_protected) << 7 | 0x10;
    let changeable = m.pc == PageControl::Changeable;
    let (blocks, length) = if changeable {
        (0, 0)
    } else {
        (ctx.number_of_blocks, ctx.block_length)
    };
    let mut descriptor = Vec::new();
    if !m.dbd {
        if m.llbaa {
            // Long LBA mode parameter block descriptor (SBC-4 table 226).
            descriptor.extend_from_slice(&blocks.to_be_bytes());
            descriptor.extend_from_slice(&[0; 4]);
            descriptor.extend_from_slice(&length.to_be_bytes());
        } else {
            // Short LBA mode parameter block descriptor (SBC-4 table 225).
            descriptor.extend_from_slice(&u32::try_from(blocks).unwrap_or(u32::MAX).to_be_bytes());
            descriptor.push(0);
            descriptor.extend_from_slice(&length.to_be_bytes()[1..]);
        }
    }
    out.extend_from_slice(&descriptor);
    for (p, s) in pages {
        out.extend_from_slice(&page_bytes(p, s, m.pc, ctx.current, ctx.default));
    }
    let total = out.len() - start;
    let h = &mut out[start..];
    if m.ten {
        h[0..2].copy_from_slice(&u16::try_from(total - 2).unwrap_or(u16::MAX).to_be_bytes());
        h[3] = device_specific;
        h[4] = u8::from(m.llbaa && !m.dbd);
        h[6..8].copy_from_slice(&(descriptor.len() as u16).to_be_bytes());
    } else {
        h[0] = u8::try_from(total - 1).unwrap_or(u8::MAX);
        h[2] = device_specific;
        h[3] = descriptor.len() as u8;
    }
    Ok(())
}

fn param_error(byte: usize, bit: Option<u8>) -> Sense {
    Sense::invalid_field_in_parameter_list(u16::try_from(byte).unwrap_or(u16::MAX), bit)
}

fn length_error() -> Sense {
    Sense::new(SenseKey::IllegalRequest, Asc::PARAMETER_LIST_LENGTH_ERROR)
}

/// Validate a MODE SELECT (6)/(10) parameter list (SPC-5 §6.12, §7.5.5) against the current
/// values and return the parameters it sets. Every bit of a page that is not changeable must
/// equal its current value; a block descriptor must describe the current capacity and block
/// length. Nothing is applied unless the whole list is valid.
pub fn mode_select(
    ten: bool,
    data: &[u8],
    current: &ModeParameters,
    default: &ModeParameters,
    number_of_blocks: u64,
    block_length: u32,
) -> Result<ModeParameters, Sense> {
    let header_len = if ten { 8 } else { 4 };
    if data.len() < header_len {
        return Err(length_error());
    }
    let (descriptor_len, long_lba) = if ten {
        (usize::from(be16(data, 6)), u8_at(data, 4) & 1 != 0)
    } else {
        (usize::from(u8_at(data, 3)), false)
    };
    let descriptor_field = if ten { 6 } else { 3 };
    let descriptor_size = if long_lba { 16 } else { 8 };
    if descriptor_len != 0 && descriptor_len != descriptor_size {
        return Err(param_error(descriptor_field, None));
    }
    if data.len() < header_len + descriptor_len {
        return Err(length_error());
    }
    if descriptor_len != 0 {
        let d = header_len;
        let (blocks, length, length_at) = if long_lba {
            (be64(data, d), be32(data, d + 12), d + 12)
        } else {
            (
                u64::from(be32(data, d)),
                be32(data, d + 4) & 0x00FF_FFFF,
                d + 5,
            )
        };
        let capacity = if long_lba {
            number_of_blocks
        } else {
            number_of_blocks.min(u32::MAX.into())
        };
        if blocks != 0 && blocks != capacity {
            return Err(param_error(d, None));
        }
        if length != block_length {
            return Err(param_error(length_at, None));
        }
    }
    let mut new = *current;
    let mut at = header_len + descriptor_len;
    while at < data.len() {
        let spf = u8_at(data, at) & 0x40 != 0;
        let page = u8_at(data, at) & 0x3F;
        let (subpage, body_len, header) = if spf {
            if at + 4 > data.len() {
                return Err(length_error());
            }
            (u8_at(data, at + 1), usize::from(be16(data, at + 2)), 4)
        } else {
            if at + 2 > data.len() {
                return Err(length_error());
            }
            (0, usize::from(u8_at(data, at + 1)), 2)
        };
        if !PAGES.contains(&(page, subpage)) || (spf != (subpage != 0)) {
            return Err(param_error(at, Some(5)));
        }
        let cur = page_bytes(page, subpage, PageControl::Current, current, default);
        let mask = page_bytes(page, subpage, PageControl::Changeable, current, default);
        if body_len + header != cur.len() {
            return Err(param_error(if spf { at + 2 } else { at + 1 }, None));
        }
        let Some(got) = data.get(at..at + cur.len()) else {
            return Err(length_error());
        };
        // Byte 0's PS bit is reserved in MODE SELECT and ignored; compare the rest.
        for i in header..cur.len() {
            let diff = (got[i] ^ cur[i]) & !mask[i];
            if diff != 0 {
                return Err(param_error(at + i, Some(7 - diff.leading_zeros() as u8)));
            }
        }
        match (page, subpage) {
            (CACHING, 0) => new.wce = got[2] & 0x04 != 0,
            (CONTROL, 0) => {
                new.d_sense = got[2] & 0x04 != 0;
                new.swp = got[4] & 0x08 != 0;
            }
            _ => {}
        }
        at += cur.len();
    }
    Ok(new)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::ModeSense;

    const DEF: ModeParameters = ModeParameters {
        wce: true,
        d_sense: false,
        swp: false,
    };

    fn sense(
        ten: bool,
        dbd: bool,
        llbaa: bool,
        pc: PageControl,
        page: u8,
        sub: u8,
    ) -> Result<Vec<u8>, Sense> {
        let m = ModeSense {
            ten,
            dbd,
            llbaa,
            pc,
            page_code: page,
            subpage_code: sub,
            allocation_length: 0xFFFF,
        };
        let ctx = ModeSenseContext {
            current: &DEF,
            default: &DEF,
            write_protected: false,
            number_of_blocks: 2048,
            block_length: 512,
        };
        let mut out = vec![];
        mode_sense(&m, &ctx, &mut out).map(|_| out)
    }

    #[test]
    fn all_pages_with_block_descriptor() {
        let out = sense(false, false, false, PageControl::Current, ALL_PAGES, 0).unwrap();
        assert_eq!(out[0] as usize, out.len() - 1);
        assert_eq!(out[3], 8);
        assert_eq!(&out[4..8], &2048u32.to_be_bytes());
        assert_eq!(&out[9..12], &[0, 2, 0]);
        assert_eq!(out.len(), 4 + 8 + 12 + 20 + 12);
        assert_eq!(out[12], READ_WRITE_ERROR_RECOVERY);
        assert_eq!(out[24], CACHING);
        assert_eq!(out[26] & 0x04, 0x04, "WCE set");
    }

    #[test]
    fn subpages_and_long_descriptor() {
        let out = sense(
            true,
            false,
            true,
            PageControl::Current,
            ALL_PAGES,
            ALL_SUBPAGES,
        )
        .unwrap();
        assert_eq!(
            usize::from(u16::from_be_bytes([out[0], out[1]])),
            out.len() - 2
        );
        assert_eq!(out[4], 1, "LONGLBA");
        assert_eq!(u16::from_be_bytes([out[6], out[7]]), 16);
        assert_eq!(out.len(), 8 + 16 + 12 + 20 + 12 + 32);
        let ext = sense(
            false,
            true,
            false,
            PageControl::Current,
            CONTROL,
            ALL_SUBPAGES,
        )
        .unwrap();
        assert_eq!(ext.len(), 4 + 12 + 32);
        assert_eq!(&ext[16..18], &[0x4A, 0x01]);
    }

    #[test]
    fn unsupported_pages_point_at_the_field() {
        assert_eq!(
            sense(false, true, false, PageControl::Current, 0x19, 0).unwrap_err(),
            Sense::invalid_field_in_cdb(2, Some(5))
        );
        assert_eq!(
            sense(false, true, false, PageControl::Current, CACHING, 3).unwrap_err(),
            Sense::invalid_field_in_cdb(3, None)
        );
        assert_eq!(
            sense(false, true, false, PageControl::Current, ALL_PAGES, 7).unwrap_err(),
            Sense::invalid_field_in_cdb(3, None)
        );
    }

    #[test]
    fn changeable_masks() {
        let out = sense(false, true, false, PageControl::Changeable, CACHING, 0).unwrap();
        assert_eq!(out[4 + 2], 0x04);
        let out = sense(
            false,
            true,
            false,
            PageControl::Changeable,
            READ_WRITE_ERROR_RECOVERY,
            0,
        )
        .unwrap();
        assert!(out[6..].iter().all(|&b| b == 0));
    }

    fn caching_select(wce: bool) -> Vec<u8> {
        let mut d = vec![0u8; 4];
        let mut p = page_bytes(CACHING, 0, PageControl::Current, &DEF, &DEF);
        p[2] = u8::from(wce) << 2;
        d.extend_from_slice(&p);
        d
    }

    #[test]
    fn select_changes_wce_only() {
        let new = mode_select(false, &caching_select(false), &DEF, &DEF, 2048, 512).unwrap();
        assert_eq!(
            new,
            ModeParameters {
                wce: false,
                d_sense: false,
                swp: false
            }
        );
        let mut bad = caching_select(false);
        bad[4 + 2] |= 0x01; // RCD is not changeable
        assert_eq!(
            mode_select(false, &bad, &DEF, &DEF, 2048, 512).unwrap_err(),
            Sense::invalid_field_in_parameter_list(6, Some(0))
        );
    }

    #[test]
    fn select_parameter_list_errors() {
        let full = caching_select(true);
        assert_eq!(
            mode_select(false, &full[..3], &DEF, &DEF, 2048, 512)
                .unwrap_err()
                .asc,
            Asc::PARAMETER_LIST_LENGTH_ERROR
        );
        assert_eq!(
            mode_select(false, &full[..10], &DEF, &DEF, 2048, 512)
                .unwrap_err()
                .asc,
            Asc::PARAMETER_LIST_LENGTH_ERROR
        );
        let mut wrong_len = full.clone();
        wrong_len[5] = 17;
        assert_eq!(
            mode_select(false, &wrong_len, &DEF, &DEF, 2048, 512).unwrap_err(),
            Sense::invalid_field_in_parameter_list(5, None)
        );
        let mut unknown = full.clone();
        unknown[4] = 0x19;
        assert_eq!(
            mode_select(false, &unknown, &DEF, &DEF, 2048, 512).unwrap_err(),
            Sense::invalid_field_in_parameter_list(4, Some(5))
        );
        // Block descriptor with the wrong block length.
        let mut d = vec![0, 0, 0, 8, 0, 0, 0x08, 0, 0, 0, 0x10, 0];
        assert_eq!(
            mode_select(false, &d, &DEF, &DEF, 2048, 512).unwrap_err(),
            Sense::invalid_field_in_parameter_list(9, None)
        );
        d[10] = 0x02;
        assert_eq!(mode_select(false, &d, &DEF, &DEF, 2048, 512).unwrap(), DEF);
        let bad_bdl = [0, 0, 0, 4, 0, 0, 0, 0];
        assert_eq!(
            mode_select(false, &bad_bdl, &DEF, &DEF, 2048, 512).unwrap_err(),
            Sense::invalid_field_in_parameter_list(3, None)
        );
    }
}
