//! Mode parameters (SPC-5 §7.5, SBC-4 §6.5): MODE SENSE data encoding and MODE SELECT parameter
//! list validation for the pages this device implements.

use crate::cdb::{be16, be32, be64, u8_at};
use crate::cdl::{changeable_mask, CdlError, CdlPage, CdlPageKind, CdlPages};
use crate::command::{ModeSelect, ModeSense, PageControl};
use crate::provisioning::{self, Thresholds};
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
    /// The Command Duration Limit T2A and T2B pages (SPC-6, subpages 07h and 08h of page 0Ah);
    /// `None`: the logical unit has no CDL and the subpages do not exist.
    pub cdl: Option<CdlPages>,
    /// The Logical Block Provisioning page's thresholds (SBC-4, page 1Ch subpage 02h);
    /// `None`: the logical unit is fully provisioned and the page does not exist.
    pub provisioning: Option<Thresholds>,
}

/// Every (page, subpage) implemented, in MODE SENSE "all pages" order.
const PAGES: [(u8, u8); 4] = [
    (READ_WRITE_ERROR_RECOVERY, 0),
    (CACHING, 0),
    (CONTROL, 0),
    (CONTROL, CONTROL_EXTENSION_SUBPAGE),
];

/// The T2A and T2B subpages, which follow Control Extension in that order; only a logical unit
/// with CDL has them.
const CDL_PAGES: [(u8, u8); 2] = [(CONTROL, 0x07), (CONTROL, 0x08)];

/// The pages a logical unit with `values` implements, in ascending order.
fn implemented(values: &ModeParameters) -> impl Iterator<Item = (u8, u8)> {
    let cdl: &[(u8, u8)] = if values.cdl.is_some() {
        &CDL_PAGES
    } else {
        &[]
    };
    let provisioning = values.provisioning.map(|_| provisioning::MODE_PAGE);
    PAGES.iter().chain(cdl).copied().chain(provisioning)
}

/// Which CDL page (page, subpage) is, if any.
fn cdl_kind(page: u8, subpage: u8) -> Option<CdlPageKind> {
    [CdlPageKind::T2A, CdlPageKind::T2B]
        .into_iter()
        .find(|k| page == CONTROL && k.subpage() == subpage)
}

fn cdl_page(pages: &CdlPages, kind: CdlPageKind) -> &CdlPage {
    match kind {
        CdlPageKind::T2A => &pages.t2a,
        CdlPageKind::T2B => &pages.t2b,
    }
}

/// The page (from byte 0, PS = 0) holding `values`, or with `None` its changeable-values mask,
/// where WCE is changeable when `wce_changeable`.
fn page_bytes(
    page: u8,
    subpage: u8,
    values: Option<&ModeParameters>,
    wce_changeable: bool,
) -> Vec<u8> {
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
        // Caching (SBC-4 §6.5.5, table 231): WCE changeable unless the LU's owner pinned it.
        (CACHING, 0) => {
            let mut p = vec![0u8; 20];
            p[0] = CACHING;
            p[1] = 18;
            p[2] = match values {
                Some(v) => u8::from(v.wce) << 2,
                None => u8::from(wce_changeable) << 2,
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
        // Logical Block Provisioning (SBC-4 §6.5.10): the thresholds, and their mask.
        provisioning::MODE_PAGE => match values {
            Some(v) => v.provisioning.unwrap_or_default().encode(false).to_vec(),
            None => Thresholds::default().encode(true).to_vec(),
        },
        // Command Duration Limit T2A/T2B (SPC-6 §7.5.11, §7.5.12): the codec's encoding, and
        // its mask of the fields MODE SELECT may change.
        _ => match (cdl_kind(page, subpage), values) {
            (Some(kind), Some(v)) => cdl_page(&v.cdl.unwrap_or_default(), kind)
                .encode(kind)
                .to_vec(),
            (Some(kind), None) => changeable_mask(kind).to_vec(),
            (None, _) => Vec::new(),
        },
    }
}

/// Which pages a MODE SENSE (page code, subpage code) selects (SPC-5 §6.14, table 166), or the
/// INVALID FIELD IN CDB sense for an unsupported one.
fn select_pages(
    page_code: u8,
    subpage_code: u8,
    values: &ModeParameters,
) -> Result<Vec<(u8, u8)>, Sense> {
    let all = || implemented(values);
    let selected: Vec<(u8, u8)> = match (page_code, subpage_code) {
        (ALL_PAGES, 0) => all().filter(|p| p.1 == 0).collect(),
        (ALL_PAGES, ALL_SUBPAGES) => all().collect(),
        (ALL_PAGES, _) => return Err(Sense::invalid_field_in_cdb(3, None)),
        (p, ALL_SUBPAGES) => all().filter(|x| x.0 == p).collect(),
        (p, s) => all().filter(|x| *x == (p, s)).collect(),
    };
    if selected.is_empty() {
        // Unknown page: point at PAGE CODE; known page with unknown subpage: at SUBPAGE CODE.
        return Err(if all().any(|x| x.0 == page_code) {
            Sense::invalid_field_in_cdb(3, None)
        } else {
            Sense::invalid_field_in_cdb(2, Some(5))
        });
    }
    Ok(selected)
}

/// What MODE SENSE and MODE SELECT need to know about the logical unit.
#[derive(Clone, Copy, Debug)]
pub struct ModeContext<'a> {
    pub current: &'a ModeParameters,
    pub default: &'a ModeParameters,
    /// The saved values of a logical unit that can save mode pages (PS = 1, PC = 11b and
    /// SP = 1 are accepted); `None` when it cannot.
    pub saved: Option<&'a ModeParameters>,
    pub write_protected: bool,
    /// Whether MODE SELECT may change WCE (its bit in the changeable values).
    pub wce_changeable: bool,
    pub number_of_blocks: u64,
    pub block_length: u32,
}

/// ILLEGAL REQUEST, SAVING PARAMETERS NOT SUPPORTED: PC = 11b without saved values (SPC-5
/// §6.14.5).
fn saving_parameters_not_supported() -> Sense {
    Sense::new(
        SenseKey::IllegalRequest,
        Asc::SAVING_PARAMETERS_NOT_SUPPORTED,
    )
}

/// MODE SENSE (6)/(10) parameter data (SPC-5 §7.5.5–7.5.6): header, optional block descriptor
/// (short, or long with LLBAA in MODE SENSE (10)), pages. Not truncated.
pub fn mode_sense(m: &ModeSense, ctx: &ModeContext, out: &mut Vec<u8>) -> Result<(), Sense> {
    let values = match m.pc {
        PageControl::Current => Some(ctx.current),
        PageControl::Default => Some(ctx.default),
        PageControl::Saved => Some(ctx.saved.ok_or_else(saving_parameters_not_supported)?),
        PageControl::Changeable => None,
    };
    let pages = select_pages(m.page_code, m.subpage_code, ctx.current)?;
    let start = out.len();
    let header_len = if m.ten { 8 } else { 4 };
    out.resize(start + header_len, 0);
    // DEVICE-SPECIFIC PARAMETER (SBC-4 table 227): WP, DPOFUA.
    let device_specific = u8::from(ctx.write_protected) << 7 | 0x10;
    let (blocks, length) = if values.is_some() {
        (ctx.number_of_blocks, ctx.block_length)
    } else {
        (0, 0)
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
    // PS (byte 0 bit 7 of every page, SPC-5 mode page formats): all pages can be saved, or none.
    let ps = u8::from(ctx.saved.is_some()) << 7;
    for (p, s) in pages {
        let page = page_bytes(p, s, values, ctx.wce_changeable);
        if let Some((&byte0, rest)) = page.split_first() {
            out.push(byte0 | ps);
            out.extend_from_slice(rest);
        }
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

/// A refused T2A/T2B page whose first byte is parameter-list byte `at`.
fn cdl_error(at: usize, e: CdlError) -> Sense {
    match e.field_pointer() {
        Some((byte, bit)) => param_error(at + byte, Some(bit)),
        None => length_error(),
    }
}

/// What a valid MODE SELECT asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModeSelection {
    /// The new current values.
    pub parameters: ModeParameters,
    /// SP = 1: the caller makes `parameters` the saved values too.
    pub save: bool,
}

/// Validate a MODE SELECT (6)/(10) parameter list (SPC-5 §6.12, §7.5.5) against the current
/// values and return the parameters it sets. Every bit of a page that is not changeable must
/// equal its current value; a block descriptor must describe the current capacity and block
/// length; a T2A/T2B page must hold valid units and policies. Nothing is applied unless the
/// whole list is valid. SP = 1 is refused unless the logical unit can save.
pub fn mode_select(m: &ModeSelect, data: &[u8], ctx: &ModeContext) -> Result<ModeSelection, Sense> {
    if m.sp && ctx.saved.is_none() {
        return Err(Sense::invalid_field_in_cdb(1, Some(0)));
    }
    let current = ctx.current;
    // PARAMETER LIST LENGTH 0: nothing is transferred and nothing changes (SPC-5 §6.12).
    if data.is_empty() {
        return Ok(ModeSelection {
            parameters: *current,
            save: false,
        });
    }
    let header_len = if m.ten { 8 } else { 4 };
    if data.len() < header_len {
        return Err(length_error());
    }
    let (descriptor_len, long_lba) = if m.ten {
        (usize::from(be16(data, 6)), u8_at(data, 4) & 1 != 0)
    } else {
        (usize::from(u8_at(data, 3)), false)
    };
    let descriptor_field = if m.ten { 6 } else { 3 };
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
            ctx.number_of_blocks
        } else {
            ctx.number_of_blocks.min(u32::MAX.into())
        };
        if blocks != 0 && blocks != capacity {
            return Err(param_error(d, None));
        }
        if length != ctx.block_length {
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
        if !implemented(current).any(|x| x == (page, subpage)) || (spf != (subpage != 0)) {
            return Err(param_error(at, Some(5)));
        }
        let cur = page_bytes(page, subpage, Some(current), ctx.wce_changeable);
        let mask = page_bytes(page, subpage, None, ctx.wce_changeable);
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
            provisioning::MODE_PAGE => new.provisioning = Some(Thresholds::decode(got)),
            _ => {
                if let (Some(kind), Some(pages)) = (cdl_kind(page, subpage), new.cdl.as_mut()) {
                    let decoded = CdlPage::decode(kind, got).map_err(|e| cdl_error(at, e))?;
                    match kind {
                        CdlPageKind::T2A => pages.t2a = decoded,
                        CdlPageKind::T2B => pages.t2b = decoded,
                    }
                }
            }
        }
        at += cur.len();
    }
    Ok(ModeSelection {
        parameters: new,
        save: m.sp,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cdl::{CdlDescriptor, Policy, T2CdlUnits, T2_PAGE_LEN};

    const DEF: ModeParameters = ModeParameters {
        wce: true,
        d_sense: false,
        swp: false,
        cdl: None,
        provisioning: None,
    };

    /// A logical unit's mode values; `saved: None` means it cannot save.
    struct Lu {
        current: ModeParameters,
        default: ModeParameters,
        saved: Option<ModeParameters>,
        wce_changeable: bool,
    }

    impl Lu {
        fn plain() -> Self {
            Lu {
                current: DEF,
                default: DEF,
                saved: None,
                wce_changeable: true,
            }
        }

        /// CDL pages with descriptor 1 of T2A limited to a 30 ms guideline.
        fn with_cdl(saves: bool) -> Self {
            let mut pages = CdlPages::default();
            pages.t2a.descriptors[0] =
                CdlDescriptor::guideline(30_000_000, Policy::CompleteEarliest).unwrap();
            let current = ModeParameters {
                cdl: Some(pages),
                ..DEF
            };
            let default = ModeParameters {
                cdl: Some(CdlPages::default()),
                ..DEF
            };
            Lu {
                current,
                default,
                saved: saves.then_some(default),
                wce_changeable: true,
            }
        }

        fn ctx(&self) -> ModeContext<'_> {
            ModeContext {
                current: &self.current,
                default: &self.default,
                saved: self.saved.as_ref(),
                write_protected: false,
                wce_changeable: self.wce_changeable,
                number_of_blocks: 2048,
                block_length: 512,
            }
        }

        fn sense(
            &self,
            ten: bool,
            dbd: bool,
            pc: PageControl,
            page: u8,
            sub: u8,
        ) -> Result<Vec<u8>, Sense> {
            sense_ctx(&self.ctx(), ten, dbd, false, pc, page, sub)
        }

        fn select(&self, ten: bool, sp: bool, data: &[u8]) -> Result<ModeSelection, Sense> {
            let m = ModeSelect {
                ten,
                pf: true,
                sp,
                parameter_list_length: data.len() as u16,
            };
            mode_select(&m, data, &self.ctx())
        }
    }

    fn sense_ctx(
        ctx: &ModeContext,
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
        let mut out = vec![];
        mode_sense(&m, ctx, &mut out).map(|_| out)
    }

    fn sense(
        ten: bool,
        dbd: bool,
        llbaa: bool,
        pc: PageControl,
        page: u8,
        sub: u8,
    ) -> Result<Vec<u8>, Sense> {
        sense_ctx(&Lu::plain().ctx(), ten, dbd, llbaa, pc, page, sub)
    }

    /// (page byte 0, subpage) of each page after the header and block descriptors.
    fn page_headers(out: &[u8], ten: bool) -> Vec<(u8, u8)> {
        let mut at = if ten {
            8 + usize::from(u16::from_be_bytes([out[6], out[7]]))
        } else {
            4 + usize::from(out[3])
        };
        let mut pages = vec![];
        while at < out.len() {
            let spf = out[at] & 0x40 != 0;
            let (sub, len) = if spf {
                (
                    out[at + 1],
                    4 + usize::from(u16::from_be_bytes([out[at + 2], out[at + 3]])),
                )
            } else {
                (0, 2 + usize::from(out[at + 1]))
            };
            pages.push((out[at], sub));
            at += len;
        }
        pages
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

    #[test]
    fn cdl_subpages_exist_only_with_cdl() {
        let plain = Lu::plain();
        for sub in [0x07, 0x08] {
            assert_eq!(
                plain
                    .sense(true, true, PageControl::Current, CONTROL, sub)
                    .unwrap_err(),
                Sense::invalid_field_in_cdb(3, None)
            );
        }
        let lu = Lu::with_cdl(false);
        let pages = lu.current.cdl.unwrap();
        // MODE SENSE(6) of T2A alone: 4-byte header and the codec's 232 bytes.
        let t2a = lu
            .sense(false, true, PageControl::Current, CONTROL, 0x07)
            .unwrap();
        assert_eq!(t2a.len(), 4 + T2_PAGE_LEN);
        assert_eq!(usize::from(t2a[0]), t2a.len() - 1);
        assert_eq!(&t2a[4..], &pages.t2a.encode(CdlPageKind::T2A));
        assert_eq!(&t2a[4..8], &[0x4A, 0x07, 0x00, 0xE4]);
        // Descriptor 1: units Ah (10 ms), guideline 3.
        assert_eq!((t2a[12], &t2a[22..24]), (0x0A, &[0u8, 3][..]));
        let t2b = lu
            .sense(true, true, PageControl::Current, CONTROL, 0x08)
            .unwrap();
        assert_eq!(&t2b[8..], &pages.t2b.encode(CdlPageKind::T2B));
        // The listings: 0Ah/FFh and 3Fh/FFh include both after Control Extension; 3Fh/00h not.
        let control = lu
            .sense(true, true, PageControl::Current, CONTROL, ALL_SUBPAGES)
            .unwrap();
        assert_eq!(
            page_headers(&control, true),
            vec![(0x0A, 0), (0x4A, 0x01), (0x4A, 0x07), (0x4A, 0x08)]
        );
        assert_eq!(control.len(), 8 + 12 + 32 + 2 * T2_PAGE_LEN);
        let all = lu
            .sense(true, true, PageControl::Current, ALL_PAGES, ALL_SUBPAGES)
            .unwrap();
        assert_eq!(page_headers(&all, true).len(), 6);
        assert_eq!(
            &page_headers(&all, true)[4..],
            &[(0x4A, 0x07), (0x4A, 0x08)]
        );
        let all = lu
            .sense(true, true, PageControl::Current, ALL_PAGES, 0)
            .unwrap();
        assert_eq!(page_headers(&all, true).len(), 3);
    }

    #[test]
    fn cdl_changeable_and_default_values() {
        let lu = Lu::with_cdl(false);
        for kind in [CdlPageKind::T2A, CdlPageKind::T2B] {
            let mask = lu
                .sense(
                    false,
                    true,
                    PageControl::Changeable,
                    CONTROL,
                    kind.subpage(),
                )
                .unwrap();
            assert_eq!(&mask[4..], &changeable_mask(kind));
            let default = lu
                .sense(false, true, PageControl::Default, CONTROL, kind.subpage())
                .unwrap();
            assert_eq!(&default[4..], &CdlPage::default().encode(kind));
        }
        // T2A's PERF VS DURATION GUIDELINES is changeable, T2B's byte 7 is reserved.
        let mask = lu
            .sense(false, true, PageControl::Changeable, CONTROL, 0x07)
            .unwrap();
        assert_eq!(mask[4 + 7], 0xF0);
        let mask = lu
            .sense(false, true, PageControl::Changeable, CONTROL, 0x08)
            .unwrap();
        assert_eq!(mask[4 + 7], 0x00);
    }

    #[test]
    fn saved_values_only_where_the_lu_saves() {
        // Cannot save: PC = 11b is SAVING PARAMETERS NOT SUPPORTED, SP = 1 an invalid CDB
        // field, PS = 0 everywhere.
        let lu = Lu::with_cdl(false);
        let e = lu
            .sense(false, true, PageControl::Saved, ALL_PAGES, 0)
            .unwrap_err();
        assert_eq!(
            e,
            Sense::new(
                SenseKey::IllegalRequest,
                Asc::SAVING_PARAMETERS_NOT_SUPPORTED
            )
        );
        let all = lu
            .sense(true, true, PageControl::Current, ALL_PAGES, ALL_SUBPAGES)
            .unwrap();
        assert!(page_headers(&all, true)
            .iter()
            .all(|(b0, _)| b0 & 0x80 == 0));
        assert_eq!(
            lu.select(true, true, &[0; 8]).unwrap_err(),
            Sense::invalid_field_in_cdb(1, Some(0))
        );
        // Can save: PC = 11b returns the saved values, PS = 1 on every page, SP = 1 is passed on.
        let mut lu = Lu::with_cdl(true);
        lu.saved = Some(ModeParameters {
            wce: false,
            ..lu.default
        });
        let saved = lu
            .sense(false, true, PageControl::Saved, CACHING, 0)
            .unwrap();
        assert_eq!(saved[4 + 2] & 0x04, 0, "saved WCE");
        let saved = lu
            .sense(false, true, PageControl::Saved, CONTROL, 0x07)
            .unwrap();
        assert_eq!(saved[12], 0, "saved T2A descriptor 1 has no limit");
        let all = lu
            .sense(true, true, PageControl::Current, ALL_PAGES, ALL_SUBPAGES)
            .unwrap();
        let headers = page_headers(&all, true);
        assert_eq!(headers.len(), 6);
        assert!(headers.iter().all(|(b0, _)| b0 & 0x80 != 0));
        let plain = ModeSelection {
            parameters: lu.current,
            save: true,
        };
        assert_eq!(lu.select(true, true, &[0; 8]).unwrap(), plain);
        // An empty parameter list changes and saves nothing; SP is still checked first.
        let unchanged = ModeSelection {
            parameters: lu.current,
            save: false,
        };
        assert_eq!(lu.select(true, true, &[]).unwrap(), unchanged);
        assert_eq!(
            Lu::plain().select(false, true, &[]).unwrap_err(),
            Sense::invalid_field_in_cdb(1, Some(0))
        );
    }

    /// What cdladm sends back: the MODE SENSE(10) data (DBD = 1, PC = current) with MODE DATA
    /// LENGTH and byte 3 zeroed, PS cleared, PAGE LENGTH forced to 00E4h.
    fn cdladm_list(lu: &Lu, kind: CdlPageKind) -> Vec<u8> {
        let mut buf = lu
            .sense(true, true, PageControl::Current, CONTROL, kind.subpage())
            .unwrap();
        buf[0..2].fill(0);
        buf[3] = 0;
        buf[8] &= 0x7F;
        buf[10..12].copy_from_slice(&[0x00, 0xE4]);
        buf
    }

    #[test]
    fn cdladm_round_trip() {
        for saves in [false, true] {
            let mut lu = Lu::with_cdl(saves);
            let mut list = cdladm_list(&lu, CdlPageKind::T2A);
            assert_eq!(list.len(), 8 + T2_PAGE_LEN);
            // perf-vs-duration-guideline 3h; descriptor 2: 10 ms units, inactive 5 / Fh,
            // active 7 / Eh, guideline 20 / Dh.
            list[8 + 7] = 0x30;
            let d = 8 + 8 + 32;
            list[d] = 0x0A;
            list[d + 2..d + 4].copy_from_slice(&5u16.to_be_bytes());
            list[d + 4..d + 6].copy_from_slice(&7u16.to_be_bytes());
            list[d + 6] = 0xFE;
            list[d + 10..d + 12].copy_from_slice(&20u16.to_be_bytes());
            list[d + 14] = 0x0D;
            let selected = lu.select(true, saves, &list).unwrap();
            assert_eq!(selected.save, saves);
            let t2a = selected.parameters.cdl.unwrap().t2a;
            assert_eq!(t2a.perf_vs_duration_guideline.code(), 3);
            assert_eq!(
                t2a.descriptors[1],
                CdlDescriptor {
                    t2cdlunits: T2CdlUnits::Ms10,
                    max_inactive_time: 5,
                    max_inactive_time_policy: Policy::Abort,
                    max_active_time: 7,
                    max_active_time_policy: Policy::AbortRecovery,
                    command_duration_guideline: 20,
                    command_duration_guideline_policy: Policy::CompleteUnavailable,
                }
            );
            assert_eq!(
                t2a.descriptors[0],
                lu.current.cdl.unwrap().t2a.descriptors[0]
            );
            assert_eq!(
                selected.parameters.cdl.unwrap().t2b,
                lu.current.cdl.unwrap().t2b
            );
            // Read back, it is what was written (PS aside).
            lu.current = selected.parameters;
            let again = cdladm_list(&lu, CdlPageKind::T2A);
            assert_eq!(again, list);
            // An unchanged T2B page round-trips as is.
            let t2b = cdladm_list(&lu, CdlPageKind::T2B);
            assert_eq!(lu.select(true, false, &t2b).unwrap().parameters, lu.current);
        }
    }

    #[test]
    fn cdl_page_errors_point_into_the_parameter_list() {
        let lu = Lu::with_cdl(false);
        let t2b = cdladm_list(&lu, CdlPageKind::T2B);
        // Descriptor 3 MAX ACTIVE TIME POLICY 1h (guideline only): byte 8 + 8 + 64 + 6, bit 3.
        let mut bad = t2b.clone();
        bad[8 + 8 + 64 + 6] = 0x01;
        assert_eq!(
            lu.select(true, false, &bad).unwrap_err(),
            Sense::invalid_field_in_parameter_list(86, Some(3))
        );
        // Descriptor 7 MAX INACTIVE TIME POLICY Eh (active only), MODE SELECT(6): 4 + 8 + 192 + 6.
        let mut six = vec![0u8; 4];
        six.extend_from_slice(&t2b[8..]);
        six[4 + 8 + 192 + 6] = 0xE0;
        assert_eq!(
            lu.select(false, false, &six).unwrap_err(),
            Sense::invalid_field_in_parameter_list(210, Some(7))
        );
        // Descriptor 1 T2CDLUNITS 5h (reserved).
        let mut bad = t2b.clone();
        bad[8 + 8] = 0x05;
        assert_eq!(
            lu.select(true, false, &bad).unwrap_err(),
            Sense::invalid_field_in_parameter_list(16, Some(3))
        );
        // T2A PERF VS DURATION GUIDELINES Dh (reserved).
        let mut bad = cdladm_list(&lu, CdlPageKind::T2A);
        bad[8 + 7] = 0xD0;
        assert_eq!(
            lu.select(true, false, &bad).unwrap_err(),
            Sense::invalid_field_in_parameter_list(15, Some(7))
        );
        // Not changeable: T2B byte 7, BYPASS SEQUESTRATION, reserved descriptor bytes.
        for (at, bit) in [(8 + 7, 4), (8 + 8 + 15, 0), (8 + 8 + 32 + 20, 6)] {
            let mut bad = t2b.clone();
            bad[at] |= 1 << bit;
            assert_eq!(
                lu.select(true, false, &bad).unwrap_err(),
                Sense::invalid_field_in_parameter_list(at as u16, Some(bit)),
                "byte {at} bit {bit}"
            );
        }
        // Wrong PAGE LENGTH.
        let mut bad = t2b.clone();
        bad[11] = 0xE0;
        assert_eq!(
            lu.select(true, false, &bad).unwrap_err(),
            Sense::invalid_field_in_parameter_list(10, None)
        );
        // A LU without CDL has no such page.
        assert_eq!(
            Lu::plain().select(true, false, &t2b).unwrap_err(),
            Sense::invalid_field_in_parameter_list(8, Some(5))
        );
    }

    fn caching_select(wce: bool) -> Vec<u8> {
        let mut d = vec![0u8; 4];
        let mut p = page_bytes(CACHING, 0, Some(&DEF), true);
        p[2] = u8::from(wce) << 2;
        d.extend_from_slice(&p);
        d
    }

    fn select6(data: &[u8]) -> Result<ModeParameters, Sense> {
        Lu::plain().select(false, false, data).map(|s| s.parameters)
    }

    /// A LUN whose owner pinned the write cache off: WCE is not changeable, and selecting it
    /// is refused at its bit (issue 11: an initiator turned WCE back on over write_cache = false).
    #[test]
    fn a_pinned_wce_is_not_changeable() {
        let pinned = Lu {
            current: ModeParameters { wce: false, ..DEF },
            default: ModeParameters { wce: false, ..DEF },
            saved: None,
            wce_changeable: false,
        };
        let mut d = vec![0u8; 4];
        let mut p = page_bytes(CACHING, 0, Some(&pinned.current), false);
        p[2] = 0x04;
        d.extend_from_slice(&p);
        assert_eq!(
            pinned.select(false, false, &d).unwrap_err(),
            Sense::invalid_field_in_parameter_list(6, Some(2))
        );
        assert_eq!(page_bytes(CACHING, 0, None, false)[2], 0, "changeable mask");
        assert_eq!(page_bytes(CACHING, 0, None, true)[2], 0x04);
    }

    #[test]
    fn select_changes_wce_only() {
        let new = select6(&caching_select(false)).unwrap();
        assert_eq!(
            new,
            ModeParameters {
                wce: false,
                d_sense: false,
                swp: false,
                cdl: None,
                provisioning: None,
            }
        );
        let mut bad = caching_select(false);
        bad[4 + 2] |= 0x01; // RCD is not changeable
        assert_eq!(
            select6(&bad).unwrap_err(),
            Sense::invalid_field_in_parameter_list(6, Some(0))
        );
    }

    #[test]
    fn select_parameter_list_errors() {
        let full = caching_select(true);
        assert_eq!(
            select6(&full[..3]).unwrap_err().asc,
            Asc::PARAMETER_LIST_LENGTH_ERROR
        );
        assert_eq!(
            select6(&full[..10]).unwrap_err().asc,
            Asc::PARAMETER_LIST_LENGTH_ERROR
        );
        let mut wrong_len = full.clone();
        wrong_len[5] = 17;
        assert_eq!(
            select6(&wrong_len).unwrap_err(),
            Sense::invalid_field_in_parameter_list(5, None)
        );
        let mut unknown = full.clone();
        unknown[4] = 0x19;
        assert_eq!(
            select6(&unknown).unwrap_err(),
            Sense::invalid_field_in_parameter_list(4, Some(5))
        );
        // Block descriptor with the wrong block length.
        let mut d = vec![0, 0, 0, 8, 0, 0, 0x08, 0, 0, 0, 0x10, 0];
        assert_eq!(
            select6(&d).unwrap_err(),
            Sense::invalid_field_in_parameter_list(9, None)
        );
        d[10] = 0x02;
        assert_eq!(select6(&d).unwrap(), DEF);
        let bad_bdl = [0, 0, 0, 4, 0, 0, 0, 0];
        assert_eq!(
            select6(&bad_bdl).unwrap_err(),
            Sense::invalid_field_in_parameter_list(3, None)
        );
    }
}
