//! T2A/T2B page encoding, decoding and validation (SPC-6 T2A/T2B mode pages, CDL policies) and T2CDLUNITS.

use qos::{
    CdlDescriptor, CdlError, CdlPage, CdlPageKind, LimitKind, PerfVsDurationGuideline, Policy,
    T2CdlUnits,
};

fn sample() -> CdlPage {
    let mut page = CdlPage {
        perf_vs_duration_guideline: PerfVsDurationGuideline::MAX,
        ..CdlPage::default()
    };
    page.descriptors[0] = CdlDescriptor {
        t2cdlunits: T2CdlUnits::Ms10,
        max_inactive_time: 5,
        max_inactive_time_policy: Policy::Abort,
        max_active_time: 0x0102,
        max_active_time_policy: Policy::AbortRecovery,
        command_duration_guideline: 3,
        command_duration_guideline_policy: Policy::ContinueNextLimit,
    };
    page.descriptors[6] = CdlDescriptor {
        t2cdlunits: T2CdlUnits::Ns500,
        command_duration_guideline: 0xFFFF,
        command_duration_guideline_policy: Policy::CompleteUnavailable,
        ..CdlDescriptor::default()
    };
    page
}

#[test]
fn units_convert_to_ns() {
    assert_eq!(T2CdlUnits::Ns500.duration(3), Some(1_500));
    assert_eq!(T2CdlUnits::Us1.duration(7), Some(7_000));
    assert_eq!(T2CdlUnits::Ms10.duration(3), Some(30_000_000));
    assert_eq!(T2CdlUnits::Ms500.duration(65_535), Some(32_767_500_000_000));
    assert_eq!(T2CdlUnits::None.duration(5), None);
    assert_eq!(T2CdlUnits::Ms10.duration(0), None);
    for (code, units) in [
        (0x0, T2CdlUnits::None),
        (0x6, T2CdlUnits::Ns500),
        (0x8, T2CdlUnits::Us1),
        (0xA, T2CdlUnits::Ms10),
        (0xE, T2CdlUnits::Ms500),
    ] {
        assert_eq!(T2CdlUnits::from_code(code), Some(units));
        assert_eq!(units.code(), code);
    }
    for reserved in [0x1, 0x5, 0x7, 0x9, 0xB, 0xF] {
        assert_eq!(T2CdlUnits::from_code(reserved), None);
    }
}

#[test]
fn exact_units_pick_the_coarsest_that_fits() {
    assert_eq!(T2CdlUnits::exact(50_000_000), Some((T2CdlUnits::Ms10, 5)));
    assert_eq!(
        T2CdlUnits::exact(1_000_000_000),
        Some((T2CdlUnits::Ms500, 2))
    );
    assert_eq!(T2CdlUnits::exact(1_500), Some((T2CdlUnits::Ns500, 3)));
    assert_eq!(T2CdlUnits::exact(5_000_000), Some((T2CdlUnits::Us1, 5_000)));
    assert_eq!(T2CdlUnits::exact(0), None);
    assert_eq!(T2CdlUnits::exact(7), None);
    let d = CdlDescriptor::guideline(50_000_000, Policy::CompleteEarliest);
    assert_eq!(
        d.and_then(|d| d.limit(LimitKind::Guideline)),
        Some((50_000_000, Policy::CompleteEarliest))
    );
}

#[test]
fn perf_vs_duration_guideline_codes() {
    let pct =
        |code| PerfVsDurationGuideline::new(code).map(|p| (p.fraction() * 1000.0).round() as u32);
    assert_eq!(pct(0x0), Some(0));
    assert_eq!(pct(0x1), Some(5));
    assert_eq!(pct(0x7), Some(40));
    assert_eq!(pct(0x9), Some(80));
    assert_eq!(pct(0xC), Some(200));
    assert_eq!(pct(0xD), None);
    assert_eq!(pct(0xF), None);
}

#[test]
fn encode_places_fields_where_the_table_says() {
    let b = sample().encode(CdlPageKind::T2A);
    assert_eq!(b.len(), 232);
    assert_eq!(&b[..4], &[0x4A, 0x07, 0x00, 0xE4]);
    assert_eq!(b[7], 0xC0);
    let d1 = &b[8..40];
    assert_eq!(d1[0], 0x0A);
    assert_eq!(&d1[2..4], &[0x00, 0x05]);
    assert_eq!(&d1[4..6], &[0x01, 0x02]);
    assert_eq!(d1[6], 0xFE);
    assert_eq!(&d1[10..12], &[0x00, 0x03]);
    assert_eq!(d1[14], 0x01);
    let d7 = &b[200..232];
    assert_eq!((d7[0], d7[10], d7[11], d7[14]), (0x06, 0xFF, 0xFF, 0x0D));
    let t2b = sample().encode(CdlPageKind::T2B);
    assert_eq!((t2b[1], t2b[7]), (0x08, 0x00));
}

#[test]
fn round_trip_both_pages() {
    let page = sample();
    assert_eq!(
        CdlPage::decode(CdlPageKind::T2A, &page.encode(CdlPageKind::T2A)),
        Ok(page)
    );
    let t2b = CdlPage {
        perf_vs_duration_guideline: PerfVsDurationGuideline::default(),
        ..page
    };
    assert_eq!(
        CdlPage::decode(CdlPageKind::T2B, &page.encode(CdlPageKind::T2B)),
        Ok(t2b)
    );
}

#[test]
fn decode_ignores_ps_and_reserved_bits() {
    let mut b = sample().encode(CdlPageKind::T2A);
    b[0] |= 0x80;
    b[7] |= 0x0F;
    b[8] |= 0xF0;
    b[8 + 15] = 0x01;
    assert_eq!(CdlPage::decode(CdlPageKind::T2A, &b), Ok(sample()));
}

fn refused(kind: CdlPageKind, edit: impl FnOnce(&mut [u8; 232])) -> CdlError {
    let mut b = sample().encode(kind);
    edit(&mut b);
    match CdlPage::decode(kind, &b) {
        Err(e) => e,
        Ok(p) => panic!("accepted {p:?}"),
    }
}

#[test]
fn header_errors() {
    assert_eq!(
        CdlPage::decode(CdlPageKind::T2A, &[0u8; 231]),
        Err(CdlError::Length { len: 231 })
    );
    assert_eq!(
        refused(CdlPageKind::T2A, |b| b[0] = 0x0A),
        CdlError::PageCode { found: 0x0A }
    );
    assert_eq!(
        refused(CdlPageKind::T2A, |b| b[1] = 0x08),
        CdlError::Subpage {
            expected: 7,
            found: 8
        }
    );
    assert_eq!(
        refused(CdlPageKind::T2A, |b| b[3] = 0x20),
        CdlError::PageLength { found: 0x20 }
    );
    let e = refused(CdlPageKind::T2A, |b| b[7] = 0xD0);
    assert_eq!(e, CdlError::PerfVsDurationGuideline { code: 0xD });
    assert_eq!(e.field_pointer(), Some((7, 7)));
    // T2B byte 7 is reserved: not checked.
    let mut b = sample().encode(CdlPageKind::T2B);
    b[7] = 0xF0;
    assert!(CdlPage::decode(CdlPageKind::T2B, &b).is_ok());
}

#[test]
fn reserved_units_name_the_descriptor_and_field() {
    let e = refused(CdlPageKind::T2A, |b| b[8 + 32 * 2] = 0x07);
    assert_eq!(
        e,
        CdlError::Units {
            descriptor: 3,
            code: 7
        }
    );
    assert_eq!(e.field_pointer(), Some((72, 3)));
    assert!(e.to_string().contains("descriptor 3"));
}

#[test]
fn policies_are_checked_per_limit() {
    // Inactive allows {0, D, F}.
    for code in [0x1, 0x2, 0xE, 0x3] {
        let e = refused(CdlPageKind::T2A, |b| b[8 + 6] = code << 4);
        assert_eq!(
            e,
            CdlError::Policy {
                descriptor: 1,
                limit: LimitKind::Inactive,
                code
            }
        );
        assert_eq!(e.field_pointer(), Some((14, 7)));
    }
    // Active allows {0, D, E, F}.
    for code in [0x1, 0x2, 0x5] {
        let e = refused(CdlPageKind::T2A, |b| b[40 + 6] = code);
        assert_eq!(
            e,
            CdlError::Policy {
                descriptor: 2,
                limit: LimitKind::Active,
                code
            }
        );
        assert_eq!(e.field_pointer(), Some((46, 3)));
    }
    // Guideline allows {0, 1, 2, D, F}.
    for code in [0xE, 0x4, 0xC] {
        let e = refused(CdlPageKind::T2B, |b| b[200 + 14] = code);
        assert_eq!(
            e,
            CdlError::Policy {
                descriptor: 7,
                limit: LimitKind::Guideline,
                code
            }
        );
        assert_eq!(e.field_pointer(), Some((214, 3)));
        assert!(e.to_string().contains("command_duration_guideline_policy"));
    }
    for code in [0x0, 0xD, 0xF] {
        let mut b = sample().encode(CdlPageKind::T2A);
        b[8 + 6] = code << 4;
        assert!(
            CdlPage::decode(CdlPageKind::T2A, &b).is_ok(),
            "inactive {code:X}h"
        );
    }
}

#[test]
fn typed_pages_are_validated_too() {
    let mut page = sample();
    page.descriptors[4].max_inactive_time_policy = Policy::ContinueNoLimit;
    assert_eq!(
        page.validate(),
        Err(CdlError::Policy {
            descriptor: 5,
            limit: LimitKind::Inactive,
            code: 2
        })
    );
    let mut page = sample();
    page.descriptors[1].command_duration_guideline_policy = Policy::AbortRecovery;
    assert_eq!(
        page.validate(),
        Err(CdlError::Policy {
            descriptor: 2,
            limit: LimitKind::Guideline,
            code: 0xE
        })
    );
    assert_eq!(sample().validate(), Ok(()));
}

#[test]
fn random_bytes_never_panic() {
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut accepted = 0;
    for _ in 0..20_000 {
        let len = if next() % 8 == 0 {
            (next() % 300) as usize
        } else {
            232
        };
        let mut page: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        if len == 232 && next() % 2 == 0 {
            // A valid header so the descriptors get decoded too.
            page[..4].copy_from_slice(&[0x4A, 0x07, 0x00, 0xE4]);
            page[7] &= 0x7F;
        }
        if let Ok(p) = CdlPage::decode(CdlPageKind::T2A, &page) {
            accepted += 1;
            assert_eq!(
                CdlPage::decode(CdlPageKind::T2A, &p.encode(CdlPageKind::T2A)),
                Ok(p)
            );
        }
    }
    // Seven descriptors of random bytes rarely all hold valid codes: most pages are refused.
    assert!(accepted < 1_000, "{accepted}");
}

#[test]
fn changeable_mask_covers_exactly_the_settable_fields() {
    let mask = qos::cdl::changeable_mask(CdlPageKind::T2A);
    assert_eq!(&mask[..8], &[0x4A, 0x07, 0x00, 0xE4, 0, 0, 0, 0xF0]);
    for d in 0..7 {
        let at = 8 + 32 * d;
        let desc = &mask[at..at + 32];
        assert_eq!(
            &desc[..16],
            &[0x0F, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0xFF, 0xFF, 0, 0, 0x0F, 0]
        );
        assert!(desc[16..].iter().all(|b| *b == 0));
    }
    // A page with every changeable bit set still decodes once the codes are valid ones.
    let mut page = mask;
    for d in 0..7 {
        let at = 8 + 32 * d;
        page[at] = 0x0E;
        page[at + 6] = 0xFE;
        page[at + 14] = 0x0F;
    }
    page[7] = 0xC0;
    assert!(CdlPage::decode(CdlPageKind::T2A, &page).is_ok());
    assert_eq!(qos::cdl::changeable_mask(CdlPageKind::T2B)[7], 0);
}
