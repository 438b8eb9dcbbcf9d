//! A loop device over a sparse file, for the block store's tests: set up with `losetup -f
//! --show` and detached by the device that returned, when dropped (so also when a test fails).

use std::path::{Path, PathBuf};
use std::process::Command;

pub struct LoopDevice {
    pub dev: PathBuf,
    /// The file behind it.
    pub file: PathBuf,
    _dir: tempfile::TempDir,
}

impl LoopDevice {
    /// A loop device of `size` bytes with `sector`-byte logical blocks over a new sparse file
    /// (in the temporary directory: a disk, or tmpfs); `None`, saying why on stdout, where
    /// none can be set up (not root, no loop driver, no losetup).
    pub fn new(size: u64, sector: u32) -> Option<LoopDevice> {
        let dir = tempfile::tempdir().expect("temporary directory");
        let file = dir.path().join("backing.img");
        std::fs::File::create(&file)
            .and_then(|f| f.set_len(size))
            .expect("backing file");
        let out = Command::new("losetup")
            .args(["-f", "--show", "--sector-size", &sector.to_string()])
            .arg(&file)
            .output();
        let why = match out {
            Ok(out) if out.status.success() => {
                let dev = String::from_utf8_lossy(&out.stdout).trim().to_owned();
                return Some(LoopDevice {
                    dev: dev.into(),
                    file,
                    _dir: dir,
                });
            }
            Ok(out) => String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            Err(e) => e.to_string(),
        };
        println!("SKIPPED (not passed): no loop device (losetup: {why}); run as root");
        None
    }

    pub fn path(&self) -> &Path {
        &self.dev
    }

    pub fn arg(&self) -> &str {
        self.dev.to_str().expect("a loop device's path is UTF-8")
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        let ok = Command::new("losetup")
            .arg("-d")
            .arg(&self.dev)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            eprintln!("could not detach {}", self.dev.display());
        }
    }
}
