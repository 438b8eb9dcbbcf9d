//! The pure SCSI layer: every CDB through the command table, the T2A/T2B pages (SPC-6
//! §7.5.11–7.5.12), MODE SELECT (SPC-5 §6.12) and LOG SELECT parameter lists, sense encoding.
//! Byte 0 picks what the rest is. Beyond "no panic":
//! - a refused CDB's field pointer names a byte (and bit) of that CDB, and its sense encodes
//!   well formed in both formats;
//! - a decoded CDB was long enough for its command, whose opcode it carries;
//! - a T2A/T2B page that decodes encodes back to its changeable bits and header;
//! - a MODE SELECT that passes selects values that MODE SENSE reports and that the same
//!   MODE SELECT of that report selects again;
//! - an EXTENDED COPY, POPULATE TOKEN or WRITE USING TOKEN parameter list (SPC-4 §6.4,
//!   SBC-4) that is refused points inside the list, one that parses stays
//!   within the descriptor limits;
//! - a SET TARGET PORT GROUPS parameter list (SPC-4 §6.45) that is refused points inside the
//!   list, one that decodes names each group once, every descriptor where it is.
#![no_main]

use libfuzzer_sys::fuzz_target;
use scsi::cdl::{changeable_mask, CdlPage, CdlPageKind, CdlPages};
use scsi::command::{Command, ModeSelect, ModeSense, PageControl};
use scsi::mode::{self, ModeContext, ModeParameters};
use scsi::provisioning::Thresholds;
use scsi::Sense;

const BLOCKS: u64 = 2048;

fuzz_target!(|input: &[u8]| {
    let Some((&knobs, data)) = input.split_first() else {
        return;
    };
    match knobs & 3 {
        0 => cdb(data, knobs),
        1 => cdl_page(data, knobs),
        3 if knobs & 0x80 != 0 => copy_parameter_list(data, knobs),
        2 if knobs & 0x80 != 0 => set_target_port_groups(data),
        _ => mode_select(data, knobs),
    }
});

fn check_sense(sense: &Sense) {
    for descriptor in [false, true] {
        let mut out = Vec::new();
        sense.write(descriptor, &mut out);
        stint_fuzz::check_sense(&out);
    }
}

fn cdb(cdb: &[u8], knobs: u8) {
    match scsi::decode(cdb) {
        Ok((info, command)) => {
            assert!(cdb.len() >= info.cdb_length());
            assert_eq!(info.opcode(), cdb[0]);
            let _ = command.data_length();
            if let Command::ReportSupportedOperationCodes(r) = command {
                let mut out = Vec::new();
                let features = scsi::rsoc::Features {
                    cdl: knobs & 4 != 0,
                    thin_provisioning: knobs & 8 != 0,
                    explicit_alua: knobs & 0x10 != 0,
                };
                if scsi::rsoc::report_supported_operation_codes(&r, features, &mut out).is_ok() {
                    assert!(out.len() < 1 << 16, "REPORT SUPPORTED OPERATION CODES data");
                }
            }
            if let Command::LogSelect(l) = command {
                let pages = scsi::log::Pages {
                    cdl: knobs & 4 != 0,
                    provisioning: knobs & 8 != 0,
                };
                if let Err(s) = scsi::log::log_select(&l, pages) {
                    check_sense(&s);
                }
            }
        }
        Err(sense) => {
            check_sense(&sense);
            if let Some(f) = sense.field {
                assert!(f.in_cdb, "a CDB error points into the parameter list");
                assert!(
                    usize::from(f.byte) < cdb.len().max(1),
                    "field pointer byte {} of a {}-byte CDB",
                    f.byte,
                    cdb.len()
                );
                assert!(f.bit.is_none_or(|b| b < 8));
            }
        }
    }
}

fn copy_parameter_list(p: &[u8], knobs: u8) {
    use scsi::third_party_copy as tpc;
    let refused = match knobs & 0x0C {
        0 | 4 => match tpc::parse_copy_list(knobs & 4 != 0, p) {
            Ok(list) => {
                assert!(list.cscds.len() <= usize::from(tpc::MAX_CSCD_DESCRIPTORS));
                assert!(list.segments.len() <= usize::from(tpc::MAX_SEGMENT_DESCRIPTORS));
                assert!(list.segments.iter().all(|s| s.offset + 28 <= p.len()));
                None
            }
            Err(s) => Some(s),
        },
        8 => tpc::parse_populate_token(p).err(),
        _ => tpc::parse_write_using_token(p).err(),
    };
    if let Some(sense) = refused {
        check_sense(&sense);
        if let Some(f) = sense.field {
            assert!(!f.in_cdb && usize::from(f.byte) < p.len());
        }
    }
}

fn set_target_port_groups(list: &[u8]) {
    match scsi::alua::set_target_port_groups(list) {
        Ok(descriptors) => {
            for (i, d) in descriptors.iter().enumerate() {
                let at = usize::from(d.at);
                assert_eq!(at, 4 + 4 * i);
                assert_eq!(u16::from_be_bytes([list[at + 2], list[at + 3]]), d.group);
                assert!(descriptors[..i].iter().all(|o| o.group != d.group));
            }
        }
        Err(sense) => {
            check_sense(&sense);
            if let Some(f) = sense.field {
                assert!(!f.in_cdb && usize::from(f.byte) < list.len());
            }
        }
    }
}

fn cdl_page(page: &[u8], knobs: u8) {
    let kind = if knobs & 4 == 0 {
        CdlPageKind::T2A
    } else {
        CdlPageKind::T2B
    };
    match CdlPage::decode(kind, page) {
        Ok(decoded) => {
            let mask = changeable_mask(kind);
            let want: Vec<u8> = page.iter().zip(mask).map(|(b, m)| b & m).collect();
            assert_eq!(decoded.encode(kind).to_vec(), want, "T2 page round trip");
            assert_eq!(CdlPage::decode(kind, &decoded.encode(kind)), Ok(decoded));
            assert_eq!(decoded.validate(), Ok(()));
        }
        Err(e) => {
            if let Some((byte, bit)) = e.field_pointer() {
                assert!(byte < page.len() && bit < 8, "{e:?}");
            }
        }
    }
}

fn mode_select(data: &[u8], knobs: u8) {
    let cdl = (knobs & 4 != 0).then(CdlPages::default);
    // The Logical Block Provisioning page of a thin unit.
    let provisioning = (knobs & 1 != 0).then(Thresholds::default);
    let current = ModeParameters {
        wce: knobs & 8 != 0,
        d_sense: knobs & 16 != 0,
        swp: false,
        cdl,
        provisioning,
    };
    let default = ModeParameters {
        wce: true,
        d_sense: false,
        swp: false,
        cdl,
        provisioning,
    };
    let saved = (knobs & 32 != 0).then_some(default);
    let ctx = ModeContext {
        current: &current,
        default: &default,
        saved: saved.as_ref(),
        write_protected: false,
        wce_changeable: knobs & 64 != 0,
        number_of_blocks: BLOCKS,
        block_length: 512,
    };
    let ten = knobs & 128 != 0;
    let m = ModeSelect {
        ten,
        pf: true,
        sp: knobs & 2 != 0 && knobs & 1 != 0,
        parameter_list_length: u16::try_from(data.len()).unwrap_or(u16::MAX),
    };
    let selected = match mode::mode_select(&m, data, &ctx) {
        Ok(s) => s.parameters,
        Err(sense) => {
            check_sense(&sense);
            if let Some(f) = sense.field {
                assert!(!f.in_cdb || f.byte < 10, "{f:?}");
                assert!(f.in_cdb || usize::from(f.byte) < data.len(), "{f:?}");
            }
            return;
        }
    };
    if !ctx.wce_changeable {
        assert_eq!(selected.wce, current.wce, "WCE changed where it may not");
    }
    assert_eq!(selected.cdl.is_some(), current.cdl.is_some());
    assert_eq!(
        selected.provisioning.is_some(),
        current.provisioning.is_some()
    );
    // What MODE SENSE reports of the selected values is a MODE SELECT of the same values.
    let report = ModeContext {
        current: &selected,
        ..ctx
    };
    let sense = ModeSense {
        ten,
        dbd: false,
        llbaa: false,
        pc: PageControl::Current,
        page_code: mode::ALL_PAGES,
        subpage_code: mode::ALL_SUBPAGES,
        allocation_length: u16::MAX,
    };
    let mut out = Vec::new();
    mode::mode_sense(&sense, &report, &mut out).expect("MODE SENSE of all pages");
    let again = mode::mode_select(&ModeSelect { sp: false, ..m }, &out, &report)
        .expect("MODE SELECT of what MODE SENSE reported");
    assert_eq!(again.parameters, selected);
}
