//! Small state files kept beside a file LUN's data (saved mode parameters, persistent
//! reservations), replaced so that a crash leaves the old contents or the new ones
//! (docs/durability.md).

use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The directory `path` is in, to sync after a rename or an unlink.
fn directory(path: &Path) -> &Path {
    path.parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// Replaces the file at `path` atomically: write a new file, sync it, rename it over the old
/// one, sync the directory. A new file left half written by a crash is never read, and the
/// next replace overwrites it.
pub(crate) fn replace(path: &Path, contents: &[u8]) -> io::Result<()> {
    let mut tmp = PathBuf::from(path);
    tmp.as_mut_os_string().push(".new");
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(contents)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    std::fs::File::open(directory(path))?.sync_all()
}

/// The contents of the file at `path`, or `None` when there is none; an unreadable file is
/// an error that names it.
pub(crate) fn load(path: &Path) -> io::Result<Option<Vec<u8>>> {
    match std::fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io::Error::new(e.kind(), format!("{}: {e}", path.display()))),
    }
}

/// Removes the file at `path`, if there is one, durably (the directory is synced).
pub(crate) fn remove(path: &Path) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => std::fs::File::open(directory(path))?.sync_all(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}
