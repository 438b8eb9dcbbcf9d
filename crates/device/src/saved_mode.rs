//! Saved mode parameters (SPC-5 §7.5.4: at power on and after a reset the saved values become
//! current), kept for a file LUN in a small file beside its data so they survive restarts.

use crate::atomic_file;
use scsi::cdl::{CdlPage, CdlPageKind, CdlPages, T2_PAGE_LEN};
use scsi::mode::ModeParameters;
use scsi::provisioning::{Thresholds, MODE_PAGE_LEN};
use std::io;
use std::path::Path;

const MAGIC: &[u8] = b"stint saved mode parameters v1\n";

/// The file's contents: MAGIC, a flags byte (WCE, D_SENSE, SWP, CDL pages present, Logical
/// Block Provisioning page present), then the T2A and T2B pages and the Logical Block
/// Provisioning page as MODE SENSE returns them. A file written before the last page existed
/// reads as one without it.
fn encode(p: &ModeParameters) -> Vec<u8> {
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

fn decode(bytes: &[u8]) -> Result<ModeParameters, String> {
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

/// The saved values at `path`, if it exists; an unreadable or corrupt file is an error that
/// names it.
pub(crate) fn load(path: &Path) -> io::Result<Option<ModeParameters>> {
    atomic_file::load(path, decode)
}

/// Replaces the saved values at `path` atomically ([`atomic_file::replace`]).
pub(crate) fn save(path: &Path, p: &ModeParameters) -> io::Result<()> {
    atomic_file::replace(path, &encode(p))
}

#[cfg(test)]
mod tests {
    use super::*;
    use scsi::cdl::{CdlDescriptor, Policy};
    use std::path::PathBuf;

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

    fn new_file(path: &Path) -> PathBuf {
        let mut tmp = path.to_owned().into_os_string();
        tmp.push(".new");
        tmp.into()
    }

    /// A crash after the new file was partly written and before the rename: the saved values
    /// are the old ones, whole, and the next save replaces the leftover.
    #[test]
    fn a_torn_new_file_never_replaces_the_saved_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lun.img.modes");
        let (old, new) = (params(50_000_000, true), params(20_000_000, false));
        save(&path, &old).unwrap();
        let saved = std::fs::read(&path).unwrap();
        let whole = encode(&new);
        std::fs::write(new_file(&path), &whole[..whole.len() / 2]).unwrap();
        assert_eq!(load(&path).unwrap(), Some(old));
        assert_eq!(std::fs::read(&path).unwrap(), saved);
        save(&path, &new).unwrap();
        assert_eq!(load(&path).unwrap(), Some(new));
        assert!(!new_file(&path).exists(), "renamed away");
    }

    /// A save that cannot write its new file fails and leaves the saved values as they were.
    #[test]
    fn a_failed_save_keeps_the_saved_values() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lun.img.modes");
        let old = params(50_000_000, true);
        save(&path, &old).unwrap();
        // The new file's name taken by a directory: it cannot be created (EISDIR).
        std::fs::create_dir(new_file(&path)).unwrap();
        assert!(save(&path, &params(20_000_000, false)).is_err());
        assert_eq!(load(&path).unwrap(), Some(old));
    }

    #[test]
    fn round_trip_and_corruption() {
        let p = params(50_000_000, true);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lun.img.modes");
        assert!(load(&path).unwrap().is_none());
        save(&path, &p).unwrap();
        assert_eq!(load(&path).unwrap(), Some(p));
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.truncate(bytes.len() - 1);
        std::fs::write(&path, &bytes).unwrap();
        let err = load(&path).unwrap_err().to_string();
        assert!(
            err.contains("lun.img.modes") && err.contains("truncated"),
            "{err}"
        );
    }
}
