//! Where a logical unit keeps its small state files: beside a file LUN's data (saved mode
//! parameters in `<file>.modes`, persistent reservations in `<file>.pr`); a RAM LUN keeps none.
//! Each is replaced atomically (docs/durability.md).

use crate::atomic_file;
use crate::plane::{Done, Failure, KeptFile};
use std::io;
use std::path::PathBuf;

/// The paths of a logical unit's kept files; `None`: that file is not kept.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeptFiles {
    pub mode_pages: Option<PathBuf>,
    pub reservations: Option<PathBuf>,
}

impl KeptFiles {
    fn path(&self, file: KeptFile) -> Option<&PathBuf> {
        match file {
            KeptFile::ModePages => self.mode_pages.as_ref(),
            KeptFile::Reservations => self.reservations.as_ref(),
        }
    }

    /// The file's contents, if it exists.
    pub fn load(&self, file: KeptFile) -> io::Result<Option<Vec<u8>>> {
        match self.path(file) {
            Some(path) => atomic_file::load(path),
            None => Ok(None),
        }
    }

    /// [`crate::Op::Keep`]: replaces the file with `contents`, or removes it.
    pub(crate) fn keep(&self, file: KeptFile, contents: Option<&[u8]>) -> Done {
        let Some(path) = self.path(file) else {
            let error = io::Error::new(
                io::ErrorKind::Unsupported,
                format!("this logical unit keeps no {file:?} file"),
            );
            return Done::Failed(Failure::Write { at: None, error });
        };
        let kept = match contents {
            Some(bytes) => atomic_file::replace(path, bytes),
            None => atomic_file::remove(path),
        };
        match kept {
            Ok(()) => Done::Ok,
            Err(error) => Done::Failed(Failure::Write { at: None, error }),
        }
    }
}
