//! Saved mode parameters (SPC-5 §7.5.4: at power on and after a reset the saved values become
//! current), kept for a file LUN in a small file beside its data so they survive restarts.

use scsi::cdl::{CdlPage, CdlPageKind, CdlPages, T2_PAGE_LEN};
use scsi::mode::ModeParameters;
use scsi::provisioning::{Thresholds, MODE_PAGE_LEN};

const MAGIC: &[u8] = b"stint saved mode parameters v1\n";

/// The file's contents: MAGIC, a flags byte (WCE, D_SENSE, SWP, CDL pages present, Logical
/// Block Provisioning page present), then the T2A and T2B pages and the Logical Block
/// Provisioning page as MODE SENSE returns them. A file written before the last page existed
/// reads as one without it.
pub(crate) fn encode(p: &ModeParameters) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.push(
        u8::from(p.wce)
            | u8::from(p.d_sense) << 1
            | u8::from(p.swp) << 2
            | u8::from(p.cdl.is_some()) << 3
            | u8::from(p.provisioning.is_some()) << 4,
    );
    if let Some(cdl) = &p.cdl {
        out.extend_from_slice(&cdl.t2a.encode(CdlPageKind::T2A));
        out.extend_from_slice(&cdl.t2b.encode(CdlPageKind::T2B));
    }
    if let Some(t) = &p.provisioning {
        out.extend_from_slice(&t.encode(false));
    }
    out
}

pub(crate) fn decode(bytes: &[u8]) -> Result<ModeParameters, String> {
    let rest = bytes
        .strip_prefix(MAGIC)
        .ok_or("not a saved mode parameters file")?;
    let (&flags, mut pages) = rest.split_first().ok_or("truncated")?;
    let cdl = if flags & 8 != 0 {
        let (t2a, rest) = pages
            .split_at_checked(T2_PAGE_LEN)
            .ok_or("truncated CDL pages")?;
        let (t2b, rest) = rest
            .split_at_checked(T2_PAGE_LEN)
            .ok_or("truncated CDL pages")?;
        pages = rest;
        Some(CdlPages {
            t2a: CdlPage::decode(CdlPageKind::T2A, t2a).map_err(|e| e.to_string())?,
            t2b: CdlPage::decode(CdlPageKind::T2B, t2b).map_err(|e| e.to_string())?,
        })
    } else {
        None
    };
    let provisioning = if flags & 16 != 0 {
        let (page, rest) = pages
            .split_at_checked(MODE_PAGE_LEN)
            .ok_or("truncated Logical Block Provisioning page")?;
        pages = rest;
        Some(Thresholds::decode(page))
    } else {
        None
    };
    if !pages.is_empty() {
        return Err("trailing bytes".into());
    }
    Ok(ModeParameters {
        wce: flags & 1 != 0,
        d_sense: flags & 2 != 0,
        swp: flags & 4 != 0,
        cdl,
        provisioning,
    })
}

const SHARED_MAGIC: &[u8] = b"stint gateways' mode parameters v1\n";

/// What the gateways of a logical unit share (docs/gateways.md): SHARED_MAGIC, the length of
/// the current values' encoding (u32, big-endian), the current values, then the saved ones
/// (nothing on a logical unit that does not save them), each as [`encode`] writes it.
pub(crate) fn encode_shared(current: &ModeParameters, saved: Option<&ModeParameters>) -> Vec<u8> {
    let current = encode(current);
    let mut out = SHARED_MAGIC.to_vec();
    out.extend_from_slice(&(current.len() as u32).to_be_bytes());
    out.extend_from_slice(&current);
    if let Some(saved) = saved {
        out.extend_from_slice(&encode(saved));
    }
    out
}

/// The current and saved values [`encode_shared`] wrote.
pub(crate) fn decode_shared(
    bytes: &[u8],
) -> Result<(ModeParameters, Option<ModeParameters>), String> {
    let rest = bytes
        .strip_prefix(SHARED_MAGIC)
        .ok_or("not the gateways' mode parameters")?;
    let (len, rest) = rest.split_first_chunk::<4>().ok_or("truncated")?;
    let (current, saved) = usize::try_from(u32::from_be_bytes(*len))
        .ok()
        .and_then(|n| rest.split_at_checked(n))
        .ok_or("truncated current values")?;
    let saved = match saved {
        [] => None,
        saved => Some(decode(saved)?),
    };
    Ok((decode(current)?, saved))
}

#[cfg(test)]
mod tests {
    use super::*;
    use scsi::cdl::{CdlDescriptor, Policy};

    fn params(guideline_ns: u64, wce: bool) -> ModeParameters {
        let mut pages = CdlPages::default();
        pages.t2a.descriptors[0] = CdlDescriptor::guideline(guideline_ns, Policy::Abort).unwrap();
        ModeParameters {
            wce,
            d_sense: false,
            swp: true,
            cdl: Some(pages),
            provisioning: Some(Thresholds {
                situa: wce,
                used: scsi::provisioning::Threshold {
                    enabled: true,
                    count: 9,
                },
                ..Thresholds::default()
            }),
        }
    }

    #[test]
    fn round_trip_and_corruption() {
        let p = params(50_000_000, true);
        let bytes = encode(&p);
        assert_eq!(decode(&bytes), Ok(p));
        let err = decode(&bytes[..bytes.len() - 1]).unwrap_err();
        assert!(err.contains("truncated"), "{err}");
        assert!(decode(b"other").is_err());
    }

    #[test]
    fn the_gateways_state_round_trips_with_and_without_saved_values() {
        let (current, saved) = (params(50_000_000, true), params(7_000_000, false));
        let bytes = encode_shared(&current, Some(&saved));
        assert_eq!(decode_shared(&bytes), Ok((current, Some(saved))));
        let bytes = encode_shared(&current, None);
        assert_eq!(decode_shared(&bytes), Ok((current, None)));
        for n in 0..bytes.len() {
            assert!(decode_shared(&bytes[..n]).is_err(), "cut at {n}");
        }
        assert!(decode_shared(&encode(&current)).is_err());
    }
}
