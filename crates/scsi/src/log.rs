//! Log pages (SPC-5 §7.3, log page format): LOG SENSE parameter data for the pages a logical
//! unit answers.

use crate::command::{LogPageControl, LogSelect, LogSense};
use crate::sense::Sense;

/// Page 00h: Supported Log Pages (subpage 00h) and Supported Log Pages and Subpages (subpage
/// FFh) (SPC-5 log pages of those names).
pub const SUPPORTED_LOG_PAGES: u8 = 0x00;
pub const ALL_SUBPAGES: u8 = 0xFF;
/// Command Duration Limits Statistics: page 19h, subpage 21h (SPC-6; sg3_utils' sg_logs
/// decodes it as "Command duration limits statistics log page [0x19,0x21]").
pub const COMMAND_DURATION_LIMITS_STATISTICS: (u8, u8) = (0x19, 0x21);
/// Logical Block Provisioning: page 0Ch (SBC-4 §6.4.5), on a thin-provisioned logical unit.
pub const LOGICAL_BLOCK_PROVISIONING: (u8, u8) = (0x0C, 0x00);

/// The optional pages a logical unit has.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pages {
    /// Command Duration Limits Statistics (a logical unit with CDL).
    pub cdl: bool,
    /// Logical Block Provisioning (a thin-provisioned logical unit).
    pub provisioning: bool,
}

/// The (page, subpage) pairs a logical unit answers, in ascending order.
fn implemented(pages: Pages) -> impl Iterator<Item = (u8, u8)> {
    [
        Some((SUPPORTED_LOG_PAGES, 0x00)),
        Some((SUPPORTED_LOG_PAGES, ALL_SUBPAGES)),
        pages.provisioning.then_some(LOGICAL_BLOCK_PROVISIONING),
        pages.cdl.then_some(COMMAND_DURATION_LIMITS_STATISTICS),
    ]
    .into_iter()
    .flatten()
}

/// What the Logical Block Provisioning log page reports, in units of 2^THRESHOLD EXPONENT
/// logical blocks (VPD page B2h).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProvisioningResources {
    /// AVAILABLE LBA MAPPING RESOURCE COUNT: what the logical unit can still map.
    pub available: u32,
    /// USED LBA MAPPING RESOURCE COUNT: what its mapped blocks take.
    pub used: u32,
}

/// Parameter codes of the Logical Block Provisioning log page (SBC-4 table 209).
const AVAILABLE_LBA_MAPPING_RESOURCE_COUNT: u16 = 0x0001;
const USED_LBA_MAPPING_RESOURCE_COUNT: u16 = 0x0002;

/// The parameters from code `from` on (resource count log parameter format, SBC-4 table 210:
/// RESOURCE COUNT, then SCOPE 01b, the resources are dedicated to this logical unit). The
/// counts are values, not thresholds: PC 00b and 10b report zeros as the CDL page does.
fn logical_block_provisioning(
    r: &ProvisioningResources,
    pc: LogPageControl,
    from: u16,
    out: &mut Vec<u8>,
) {
    let cumulative = pc == LogPageControl::CumulativeValues;
    for (code, count) in [
        (AVAILABLE_LBA_MAPPING_RESOURCE_COUNT, r.available),
        (USED_LBA_MAPPING_RESOURCE_COUNT, r.used),
    ] {
        if code >= from {
            let count = if cumulative { count } else { 0 };
            let mut value = [0u8; 8];
            value[..4].copy_from_slice(&count.to_be_bytes());
            value[4] = 0x01;
            parameter(code, CONTROL_BINARY, &value, out);
        }
    }
}

/// The counters of one T2 command duration limit descriptor (SPC-6 command duration limits
/// statistics log page; the four 32-bit counters of sg3_utils' sg_logs and of cdl-tools'
/// `struct cdl_scsi_stats_desc`). The device counts in 64 bits; the page saturates each to
/// 32 bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CdlDescriptorStatistics {
    pub number_of_inactive_target_miss_commands: u64,
    pub number_of_active_target_miss_commands: u64,
    pub number_of_inactive_target_and_active_target_miss_commands: u64,
    pub number_of_commands: u64,
}

impl CdlDescriptorStatistics {
    fn since(&self, earlier: &Self) -> Self {
        CdlDescriptorStatistics {
            number_of_inactive_target_miss_commands: self
                .number_of_inactive_target_miss_commands
                .saturating_sub(earlier.number_of_inactive_target_miss_commands),
            number_of_active_target_miss_commands: self
                .number_of_active_target_miss_commands
                .saturating_sub(earlier.number_of_active_target_miss_commands),
            number_of_inactive_target_and_active_target_miss_commands: self
                .number_of_inactive_target_and_active_target_miss_commands
                .saturating_sub(earlier.number_of_inactive_target_and_active_target_miss_commands),
            number_of_commands: self
                .number_of_commands
                .saturating_sub(earlier.number_of_commands),
        }
    }

    fn counters(&self) -> [u64; 4] {
        [
            self.number_of_inactive_target_miss_commands,
            self.number_of_active_target_miss_commands,
            self.number_of_inactive_target_and_active_target_miss_commands,
            self.number_of_commands,
        ]
    }
}

/// Everything the Command Duration Limits Statistics log page reports; descriptors 1..=7 of
/// each mode page are `t2a[0..7]` and `t2b[0..7]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CdlStatistics {
    /// ACHIEVABLE LATENCY TARGET in microseconds (parameter 0001h).
    pub achievable_latency_target: u32,
    pub t2a: [CdlDescriptorStatistics; 7],
    pub t2b: [CdlDescriptorStatistics; 7],
}

impl CdlStatistics {
    /// The counts since `earlier` (what the page reports after a LOG SELECT reset).
    pub fn since(&self, earlier: &CdlStatistics) -> CdlStatistics {
        let page = |now: &[CdlDescriptorStatistics; 7], then: &[CdlDescriptorStatistics; 7]| {
            std::array::from_fn(|i| now[i].since(&then[i]))
        };
        CdlStatistics {
            achievable_latency_target: self.achievable_latency_target,
            t2a: page(&self.t2a, &earlier.t2a),
            t2b: page(&self.t2b, &earlier.t2b),
        }
    }
}

/// Parameter codes (SPC-6): 0001h achievable latency target; 0021h–0027h the T2A descriptors
/// 1..7; 0041h–0047h the T2B descriptors 1..7 (0011h–0017h and 0031h–0037h are restricted).
const ACHIEVABLE_LATENCY_TARGET: u16 = 0x0001;
const FIRST_T2A_DESCRIPTOR: u16 = 0x0021;
const FIRST_T2B_DESCRIPTOR: u16 = 0x0041;
const LAST_PARAMETER_CODE: u16 = FIRST_T2B_DESCRIPTOR + 6;

/// Parameter control byte (SPC-5 log parameter format): DU = 0 (the device updates the
/// values), TSD = 0, FORMAT AND LINKING 10b (bounded or unbounded data counter) for the
/// counters, 11b (binary format list) for the latency target, which is a value.
const CONTROL_COUNTERS: u8 = 0b10;
const CONTROL_BINARY: u8 = 0b11;

/// One log parameter (SPC-5 log parameter format): PARAMETER CODE, control byte, PARAMETER
/// LENGTH, value.
fn parameter(code: u16, control: u8, value: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&code.to_be_bytes());
    out.push(control);
    out.push(value.len() as u8);
    out.extend_from_slice(value);
}

/// The parameters of the Command Duration Limits Statistics log page from code `from` on.
/// Cumulative values are the counters; the logical unit keeps no thresholds (ETC and TMC are
/// obsolete in SPC-5) and a counter's default is 0, so the other page controls report zeros.
fn cdl_statistics(s: &CdlStatistics, pc: LogPageControl, from: u16, out: &mut Vec<u8>) {
    if from <= ACHIEVABLE_LATENCY_TARGET {
        parameter(
            ACHIEVABLE_LATENCY_TARGET,
            CONTROL_BINARY,
            &s.achievable_latency_target.to_be_bytes(),
            out,
        );
    }
    let cumulative = pc == LogPageControl::CumulativeValues;
    for (first, descriptors) in [
        (FIRST_T2A_DESCRIPTOR, &s.t2a),
        (FIRST_T2B_DESCRIPTOR, &s.t2b),
    ] {
        for (code, d) in (first..).zip(descriptors).filter(|(code, _)| *code >= from) {
            let mut value = [0u8; 16];
            if cumulative {
                for (bytes, counter) in value.chunks_exact_mut(4).zip(d.counters()) {
                    let saturated = u32::try_from(counter).unwrap_or(u32::MAX);
                    bytes.copy_from_slice(&saturated.to_be_bytes());
                }
            }
            parameter(code, CONTROL_COUNTERS, &value, out);
        }
    }
}

/// LOG SENSE parameter data (SPC-5 log page format, not truncated): the two supported pages
/// lists; Logical Block Provisioning when `provisioning` holds the logical unit's resource
/// counts; Command Duration Limits Statistics when `cdl` holds its CDL counters. The PAGE
/// LENGTH is always the full length; the caller truncates to the allocation length. An
/// unsupported page is ILLEGAL REQUEST, INVALID FIELD IN CDB (24h/00h: the only refusal cdladm
/// takes for "statistics not supported") at PAGE CODE, or at SUBPAGE CODE when the page code
/// exists.
pub fn log_sense(
    l: &LogSense,
    cdl: Option<&CdlStatistics>,
    provisioning: Option<&ProvisioningResources>,
    out: &mut Vec<u8>,
) -> Result<(), Sense> {
    let pages = Pages {
        cdl: cdl.is_some(),
        provisioning: provisioning.is_some(),
    };
    let start = out.len();
    // Byte 0: DS (7), SPF (6), PAGE CODE (5:0); byte 1 SUBPAGE CODE; bytes 2–3 PAGE LENGTH.
    match (l.page_code, l.subpage_code) {
        (SUPPORTED_LOG_PAGES, 0x00) => {
            // The page codes that have a subpage 00h.
            out.extend_from_slice(&[SUPPORTED_LOG_PAGES, 0x00, 0, 0]);
            out.extend(implemented(pages).filter(|p| p.1 == 0).map(|p| p.0));
        }
        (SUPPORTED_LOG_PAGES, ALL_SUBPAGES) => {
            out.extend_from_slice(&[0x40 | SUPPORTED_LOG_PAGES, ALL_SUBPAGES, 0, 0]);
            out.extend(implemented(pages).flat_map(|(p, s)| [p, s]));
        }
        LOGICAL_BLOCK_PROVISIONING if provisioning.is_some() => {
            if l.parameter_pointer > USED_LBA_MAPPING_RESOURCE_COUNT {
                return Err(Sense::invalid_field_in_cdb(5, None));
            }
            // DS = 1: no parameter of the page is saved.
            out.extend_from_slice(&[0x80 | LOGICAL_BLOCK_PROVISIONING.0, 0x00, 0, 0]);
            if let Some(r) = provisioning {
                logical_block_provisioning(r, l.pc, l.parameter_pointer, out);
            }
        }
        COMMAND_DURATION_LIMITS_STATISTICS if cdl.is_some() => {
            if l.parameter_pointer > LAST_PARAMETER_CODE {
                return Err(Sense::invalid_field_in_cdb(5, None));
            }
            // DS = 1: no parameter of the page is saved.
            let (page, subpage) = COMMAND_DURATION_LIMITS_STATISTICS;
            out.extend_from_slice(&[0x80 | 0x40 | page, subpage, 0, 0]);
            if let Some(stats) = cdl {
                cdl_statistics(stats, l.pc, l.parameter_pointer, out);
            }
        }
        _ => return Err(unsupported_page(l.page_code, pages)),
    }
    let page_length = u16::try_from(out.len() - start - 4).unwrap_or(u16::MAX);
    out[start + 2..start + 4].copy_from_slice(&page_length.to_be_bytes());
    Ok(())
}

/// The refusal of a page the logical unit does not answer: INVALID FIELD IN CDB at SUBPAGE CODE
/// when the page code exists, else at PAGE CODE.
fn unsupported_page(page_code: u8, pages: Pages) -> Sense {
    if implemented(pages).any(|p| p.0 == page_code) {
        Sense::invalid_field_in_cdb(3, None)
    } else {
        Sense::invalid_field_in_cdb(2, Some(5))
    }
}

/// LOG SELECT without a parameter list (SPC-5 §6.8, processing when the parameter list length
/// is zero): whether the Command Duration Limits Statistics counters are to be set to their
/// default, zero. That is a parameter code reset (PCR = 1) of cumulative values (PC 01b or 11b)
/// of the pages PAGE CODE and SUBPAGE CODE name: page 00h subpage 00h names every page,
/// subpage FFh every subpage of its page. Resetting threshold values changes nothing, as no
/// page keeps thresholds; the provisioning counts are values, which no reset changes.
pub fn log_select(l: &LogSelect, pages: Pages) -> Result<bool, Sense> {
    let every_page = (l.page_code, l.subpage_code) == (SUPPORTED_LOG_PAGES, 0x00);
    let names = |(page, subpage): (u8, u8)| {
        every_page
            || (page == l.page_code
                && (l.subpage_code == ALL_SUBPAGES || subpage == l.subpage_code))
    };
    if !implemented(pages).any(names) {
        return Err(unsupported_page(l.page_code, pages));
    }
    let cumulative = matches!(
        l.pc,
        LogPageControl::CumulativeValues | LogPageControl::DefaultCumulativeValues
    );
    Ok(pages.cdl && l.pcr && cumulative && names(COMMAND_DURATION_LIMITS_STATISTICS))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sense(
        page: u8,
        sub: u8,
        pointer: u16,
        cdl: Option<&CdlStatistics>,
    ) -> Result<Vec<u8>, Sense> {
        sense_pc(LogPageControl::CumulativeValues, page, sub, pointer, cdl)
    }

    fn sense_pc(
        pc: LogPageControl,
        page: u8,
        sub: u8,
        pointer: u16,
        cdl: Option<&CdlStatistics>,
    ) -> Result<Vec<u8>, Sense> {
        let l = LogSense {
            pc,
            page_code: page,
            subpage_code: sub,
            parameter_pointer: pointer,
            allocation_length: 0xFFFF,
        };
        let mut out = vec![];
        log_sense(&l, cdl, None, &mut out).map(|_| out)
    }

    fn stats() -> CdlStatistics {
        let mut s = CdlStatistics {
            achievable_latency_target: 12_345,
            ..CdlStatistics::default()
        };
        s.t2a[0] = CdlDescriptorStatistics {
            number_of_inactive_target_miss_commands: 1,
            number_of_active_target_miss_commands: 2,
            number_of_inactive_target_and_active_target_miss_commands: 3,
            number_of_commands: 400,
        };
        s.t2b[6].number_of_commands = 5_000_000_000; // saturates
        s
    }

    #[test]
    fn supported_pages_without_cdl() {
        assert_eq!(
            sense(0, 0, 0, None).unwrap(),
            vec![0x00, 0x00, 0x00, 0x01, 0x00]
        );
        assert_eq!(
            sense(0, 0xFF, 0, None).unwrap(),
            vec![0x40, 0xFF, 0x00, 0x04, 0x00, 0x00, 0x00, 0xFF]
        );
    }

    #[test]
    fn supported_pages_with_cdl() {
        let s = stats();
        // 19h has no subpage 00h, so the page-code list does not name it.
        assert_eq!(sense(0, 0, 0, Some(&s)).unwrap(), vec![0, 0, 0, 1, 0]);
        assert_eq!(
            sense(0, 0xFF, 0, Some(&s)).unwrap(),
            vec![0x40, 0xFF, 0x00, 0x06, 0x00, 0x00, 0x00, 0xFF, 0x19, 0x21]
        );
    }

    #[test]
    fn cdl_statistics_bytes() {
        let out = sense(0x19, 0x21, 0, Some(&stats())).unwrap();
        // Header: DS, SPF, 19h; subpage 21h; 8 + 14 × 20 parameter bytes.
        assert_eq!(&out[..4], &[0xD9, 0x21, 0x01, 0x20]);
        assert_eq!(out.len(), 4 + 8 + 14 * 20);
        // 0001h: binary format list, 4 bytes of microseconds.
        assert_eq!(&out[4..12], &[0x00, 0x01, 0x03, 0x04, 0, 0, 0x30, 0x39]);
        // 0021h: T2A descriptor 1, four big-endian counters.
        assert_eq!(&out[12..16], &[0x00, 0x21, 0x02, 0x10]);
        assert_eq!(
            &out[16..32],
            &[0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 1, 0x90]
        );
        // Codes run 0021h..0027h then 0041h..0047h, each 20 bytes.
        let codes: Vec<u16> = out[12..]
            .chunks(20)
            .map(|p| u16::from_be_bytes([p[0], p[1]]))
            .collect();
        let expected: Vec<u16> = (0x21..=0x27).chain(0x41..=0x47).collect();
        assert_eq!(codes, expected);
        // 0047h: T2B descriptor 7, number of commands saturated at FFFFFFFFh.
        let last = &out[out.len() - 20..];
        assert_eq!(&last[..4], &[0x00, 0x47, 0x02, 0x10]);
        assert_eq!(&last[16..20], &[0xFF; 4]);
    }

    #[test]
    fn parameter_pointer_omits_lower_codes() {
        let s = stats();
        let out = sense(0x19, 0x21, 0x0027, Some(&s)).unwrap();
        // 0027h and the seven T2B descriptors; PAGE LENGTH counts only them.
        assert_eq!(u16::from_be_bytes([out[2], out[3]]), 8 * 20);
        assert_eq!(&out[4..6], &[0x00, 0x27]);
        assert_eq!(&out[24..26], &[0x00, 0x41]);
        let out = sense(0x19, 0x21, 0x0047, Some(&s)).unwrap();
        assert_eq!(out.len(), 4 + 20);
        assert_eq!(
            sense(0x19, 0x21, 0x0048, Some(&s)).unwrap_err(),
            Sense::invalid_field_in_cdb(5, None)
        );
    }

    #[test]
    fn only_cumulative_values_carry_counts() {
        let s = stats();
        let out = sense_pc(LogPageControl::ThresholdValues, 0x19, 0x21, 0, Some(&s)).unwrap();
        assert_eq!(out.len(), 4 + 8 + 14 * 20);
        assert_eq!(
            &out[8..12],
            &12_345u32.to_be_bytes(),
            "the target is not a counter"
        );
        assert!(out[12..].chunks(20).all(|p| p[4..].iter().all(|&b| b == 0)));
    }

    #[test]
    fn unsupported_pages_are_invalid_field_in_cdb() {
        use crate::sense::{Asc, SenseKey};
        // Without CDL, what cdladm probes is refused with exactly 24h/00h at PAGE CODE.
        let e = sense(0x19, 0x21, 0, None).unwrap_err();
        assert_eq!(
            (e.key, e.asc),
            (SenseKey::IllegalRequest, Asc::INVALID_FIELD_IN_CDB)
        );
        assert_eq!(e, Sense::invalid_field_in_cdb(2, Some(5)));
        let s = stats();
        assert_eq!(
            sense(0x19, 0x00, 0, Some(&s)).unwrap_err(),
            Sense::invalid_field_in_cdb(3, None)
        );
        assert_eq!(
            sense(0x00, 0x01, 0, Some(&s)).unwrap_err(),
            Sense::invalid_field_in_cdb(3, None)
        );
        assert_eq!(
            sense(0x0D, 0x00, 0, Some(&s)).unwrap_err(),
            Sense::invalid_field_in_cdb(2, Some(5))
        );
    }

    fn select(pcr: bool, pc: LogPageControl, page: u8, sub: u8, cdl: bool) -> Result<bool, Sense> {
        let l = LogSelect {
            pcr,
            pc,
            page_code: page,
            subpage_code: sub,
        };
        log_select(
            &l,
            Pages {
                cdl,
                provisioning: false,
            },
        )
    }

    #[test]
    fn parameter_code_reset_of_cumulative_values_zeroes_the_cdl_counters() {
        use LogPageControl::*;
        for pc in [CumulativeValues, DefaultCumulativeValues] {
            assert_eq!(select(true, pc, 0x19, 0x21, true), Ok(true));
            assert_eq!(select(true, pc, 0x00, 0x00, true), Ok(true), "every page");
            assert_eq!(
                select(true, pc, 0x00, 0x00, false),
                Ok(false),
                "no CDL page"
            );
            assert_eq!(select(true, pc, 0x19, 0xFF, true), Ok(true), "all of 19h");
            assert_eq!(
                select(true, pc, 0x00, 0xFF, true),
                Ok(false),
                "only the lists"
            );
        }
        // No thresholds to reset; without PCR nothing changes.
        assert_eq!(select(true, ThresholdValues, 0x19, 0x21, true), Ok(false));
        assert_eq!(select(true, DefaultThresholdValues, 0, 0, true), Ok(false));
        assert_eq!(select(false, CumulativeValues, 0x19, 0x21, true), Ok(false));
    }

    #[test]
    fn log_select_refuses_pages_as_log_sense_does() {
        let pc = LogPageControl::CumulativeValues;
        assert_eq!(
            select(true, pc, 0x19, 0x21, false),
            Err(Sense::invalid_field_in_cdb(2, Some(5)))
        );
        assert_eq!(
            select(true, pc, 0x19, 0x00, true),
            Err(Sense::invalid_field_in_cdb(3, None))
        );
        assert_eq!(
            select(true, pc, 0x0D, 0x00, true),
            Err(Sense::invalid_field_in_cdb(2, Some(5)))
        );
    }

    fn provisioning_page(pc: LogPageControl, pointer: u16) -> Result<Vec<u8>, Sense> {
        let l = LogSense {
            pc,
            page_code: 0x0C,
            subpage_code: 0,
            parameter_pointer: pointer,
            allocation_length: 0xFFFF,
        };
        let r = ProvisioningResources {
            available: 1000,
            used: 24,
        };
        let mut out = vec![];
        log_sense(&l, None, Some(&r), &mut out).map(|_| out)
    }

    #[test]
    fn logical_block_provisioning_page_bytes() {
        let out = provisioning_page(LogPageControl::CumulativeValues, 0).unwrap();
        assert_eq!(
            out,
            [
                0x8C, 0x00, 0x00, 0x18, // DS, page 0Ch, 2 × 12 bytes
                0x00, 0x01, 0x03, 0x08, 0, 0, 0x03, 0xE8, 0x01, 0, 0, 0, // available 1000
                0x00, 0x02, 0x03, 0x08, 0, 0, 0, 24, 0x01, 0, 0, 0, // used 24
            ]
        );
        let used_only = provisioning_page(LogPageControl::CumulativeValues, 2).unwrap();
        assert_eq!(&used_only[2..6], &[0, 12, 0x00, 0x02]);
        assert_eq!(
            provisioning_page(LogPageControl::CumulativeValues, 3).unwrap_err(),
            Sense::invalid_field_in_cdb(5, None)
        );
        let thresholds = provisioning_page(LogPageControl::ThresholdValues, 0).unwrap();
        assert_eq!(&thresholds[8..12], &[0; 4], "counts are not thresholds");
    }

    #[test]
    fn supported_pages_list_provisioning_on_thin_units_only() {
        let l = |sub| LogSense {
            pc: LogPageControl::CumulativeValues,
            page_code: 0,
            subpage_code: sub,
            parameter_pointer: 0,
            allocation_length: 0xFFFF,
        };
        let r = ProvisioningResources::default();
        let mut out = vec![];
        log_sense(&l(0), Some(&stats()), Some(&r), &mut out).unwrap();
        assert_eq!(out, [0, 0, 0, 2, 0x00, 0x0C]);
        out.clear();
        log_sense(&l(0xFF), Some(&stats()), Some(&r), &mut out).unwrap();
        assert_eq!(&out[4..], &[0, 0, 0, 0xFF, 0x0C, 0, 0x19, 0x21]);
        assert_eq!(
            sense(0x0C, 0, 0, None).unwrap_err(),
            Sense::invalid_field_in_cdb(2, Some(5))
        );
    }
}
