//! Where the admin socket lives. Default: `$RUNTIME_DIRECTORY/admin.sock` under systemd
//! (RuntimeDirectory=stint), else `$XDG_RUNTIME_DIR/stint/<port>.sock`, else
//! `/tmp/stint-<uid>/<port>.sock`; per portal port, so servers on port 0 never share one.

use anyhow::{bail, Context};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The file name in `$RUNTIME_DIRECTORY`: one service, one socket.
pub const SERVICE_SOCKET: &str = "admin.sock";

/// Where a system service's socket is (RuntimeDirectory=stint), which `stint ctl` also looks
/// in: an operator's shell has no `$RUNTIME_DIRECTORY`.
pub const SYSTEM_DIR: &str = "/run/stint";

/// The environment the default depends on.
#[derive(Clone, Debug, Default)]
pub struct Env {
    pub runtime_directory: Option<OsString>,
    pub xdg_runtime_dir: Option<OsString>,
    pub uid: u32,
}

impl Env {
    pub fn current() -> Env {
        let set = |name| std::env::var_os(name).filter(|v| !v.is_empty());
        Env {
            runtime_directory: set("RUNTIME_DIRECTORY"),
            xdg_runtime_dir: set("XDG_RUNTIME_DIR"),
            uid: rustix::process::geteuid().as_raw(),
        }
    }

    /// systemd's RuntimeDirectory (the first, when it lists several separated by ':').
    fn service_dir(&self) -> Option<PathBuf> {
        let dirs = self.runtime_directory.as_ref()?.to_str()?;
        dirs.split(':').next().map(PathBuf::from)
    }

    /// The per-user directory of sockets (created or checked 0700 by [`private_dir`]).
    pub fn user_dir(&self) -> PathBuf {
        match &self.xdg_runtime_dir {
            Some(dir) => Path::new(dir).join("stint"),
            None => PathBuf::from(format!("/tmp/stint-{}", self.uid)),
        }
    }

    /// The default socket of a server whose portal listens on `port`.
    pub fn default_socket(&self, port: u16) -> PathBuf {
        match self.service_dir() {
            Some(dir) => dir.join(SERVICE_SOCKET),
            None => self.user_dir().join(format!("{port}.sock")),
        }
    }

    /// The directories `stint ctl` looks for sockets in, in order, without repeats.
    pub fn search_dirs(&self) -> Vec<PathBuf> {
        let mut dirs: Vec<PathBuf> = self.service_dir().into_iter().collect();
        for dir in [self.user_dir(), PathBuf::from(SYSTEM_DIR)] {
            if !dirs.contains(&dir) {
                dirs.push(dir);
            }
        }
        dirs
    }
}

/// Whether and where to serve the admin socket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Setting {
    Off,
    At(PathBuf),
    /// [`Env::default_socket`], in a directory [`private_dir`] prepares unless it is
    /// systemd's.
    Default,
}

impl Setting {
    /// From `--admin-socket` ("none": off) and the file's `admin_socket` ("": off; relative to
    /// the file's directory `base`); the flag wins.
    pub fn from(flag: Option<&Path>, file: Option<&Path>, base: &Path) -> Setting {
        match (flag, file) {
            (Some(f), _) if f == Path::new("none") => Setting::Off,
            (Some(f), _) => Setting::At(f.to_path_buf()),
            (None, Some(f)) if f.as_os_str().is_empty() => Setting::Off,
            (None, Some(f)) => Setting::At(base.join(f)),
            (None, None) => Setting::Default,
        }
    }

    /// The socket's path for a portal on `port`, its directory made ready for a default.
    pub fn resolve(&self, env: &Env, port: u16) -> anyhow::Result<Option<PathBuf>> {
        match self {
            Setting::Off => Ok(None),
            Setting::At(path) => Ok(Some(path.clone())),
            Setting::Default => {
                let path = env.default_socket(port);
                if env.service_dir().is_none() {
                    private_dir(&env.user_dir(), env.uid)?;
                    sweep_stale(&env.user_dir());
                }
                Ok(Some(path))
            }
        }
    }
}

/// Creates `dir` mode 0700, or checks that it is a directory of `uid` that no one else may
/// enter: in a shared /tmp another user could have made it first, to place or watch sockets.
pub fn private_dir(dir: &Path, uid: u32) -> anyhow::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e).with_context(|| format!("creating {}", dir.display())),
    }
    let meta = std::fs::symlink_metadata(dir).with_context(|| format!("{}", dir.display()))?;
    if !meta.is_dir() {
        bail!(
            "{} exists and is not a directory; remove it or give --admin-socket PATH",
            dir.display()
        );
    }
    if meta.uid() != uid {
        bail!(
            "{} belongs to uid {}, not to this user (uid {uid}); refusing to put the admin \
             socket there: give --admin-socket PATH",
            dir.display(),
            meta.uid()
        );
    }
    if meta.mode() & 0o077 != 0 {
        bail!(
            "{} is mode {:o}: others may enter it; `chmod 700` it or give --admin-socket PATH",
            dir.display(),
            meta.mode() & 0o777
        );
    }
    Ok(())
}

/// A socket younger than this is left alone by [`sweep_stale`]: it may be a server's between
/// its bind and its listen, when connecting to it is refused as to a stale one.
const STALE_AFTER: std::time::Duration = std::time::Duration::from_secs(10);

/// Removes the sockets of killed servers from the private directory `dir` (each has its
/// port's name; without this, every SIGKILL would leave one behind for good).
fn sweep_stale(dir: &Path) {
    use std::os::unix::fs::FileTypeExt;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for path in entries.filter_map(|e| Some(e.ok()?.path())) {
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let old = meta
            .modified()
            .ok()
            .and_then(|m| m.elapsed().ok())
            .is_some_and(|age| age > STALE_AFTER);
        let refused = || {
            std::os::unix::net::UnixStream::connect(&path)
                .is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionRefused)
        };
        if meta.file_type().is_socket() && old && refused() {
            match std::fs::remove_file(&path) {
                Ok(()) => tracing::debug!(path = %path.display(), "removed a stale admin socket"),
                Err(e) => tracing::debug!(path = %path.display(), error = %e, "stale admin socket"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(runtime: Option<&str>, xdg: Option<&str>) -> Env {
        Env {
            runtime_directory: runtime.map(OsString::from),
            xdg_runtime_dir: xdg.map(OsString::from),
            uid: 1000,
        }
    }

    #[test]
    fn default_paths() {
        assert_eq!(
            env(Some("/run/stint"), Some("/run/user/1000")).default_socket(3260),
            Path::new("/run/stint/admin.sock")
        );
        assert_eq!(
            env(Some("/run/stint:/run/other"), None).default_socket(3260),
            Path::new("/run/stint/admin.sock")
        );
        assert_eq!(
            env(None, Some("/run/user/1000")).default_socket(3260),
            Path::new("/run/user/1000/stint/3260.sock")
        );
        assert_eq!(
            env(None, None).default_socket(40000),
            Path::new("/tmp/stint-1000/40000.sock")
        );
        assert_eq!(
            env(None, None).search_dirs(),
            [Path::new("/tmp/stint-1000"), Path::new("/run/stint")]
        );
        assert_eq!(
            env(Some("/run/stint"), None).search_dirs(),
            [Path::new("/run/stint"), Path::new("/tmp/stint-1000")]
        );
    }

    #[test]
    fn settings() {
        let base = Path::new("/etc/stint");
        let p = |s: &str| Some(PathBuf::from(s));
        assert_eq!(Setting::from(None, None, base), Setting::Default);
        assert_eq!(
            Setting::from(p("none").as_deref(), p("a.sock").as_deref(), base),
            Setting::Off
        );
        assert_eq!(
            Setting::from(p("x.sock").as_deref(), p("").as_deref(), base),
            Setting::At("x.sock".into()),
            "the flag wins, relative to the working directory"
        );
        assert_eq!(Setting::from(None, p("").as_deref(), base), Setting::Off);
        assert_eq!(
            Setting::from(None, p("run/a.sock").as_deref(), base),
            Setting::At("/etc/stint/run/a.sock".into())
        );
        assert_eq!(
            Setting::from(None, p("/run/a.sock").as_deref(), base),
            Setting::At("/run/a.sock".into())
        );
    }

    #[test]
    fn the_private_directory_is_made_and_checked() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let uid = rustix::process::geteuid().as_raw();
        let dir = tmp.path().join("stint-x");
        private_dir(&dir, uid).unwrap();
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        private_dir(&dir, uid).unwrap();
        let other = private_dir(&dir, uid + 1).unwrap_err().to_string();
        assert!(other.contains("not to this user"), "{other}");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let open = private_dir(&dir, uid).unwrap_err().to_string();
        assert!(open.contains("is mode 755"), "{open}");
        let file = tmp.path().join("file");
        std::fs::write(&file, "").unwrap();
        let not_dir = private_dir(&file, uid).unwrap_err().to_string();
        assert!(not_dir.contains("not a directory"), "{not_dir}");
    }

    #[test]
    fn only_old_stale_sockets_are_swept() {
        let tmp = tempfile::tempdir().unwrap();
        let old = tmp.path().join("1.sock");
        let young = tmp.path().join("2.sock");
        let live = tmp.path().join("3.sock");
        drop(std::os::unix::net::UnixListener::bind(&old).unwrap());
        drop(std::os::unix::net::UnixListener::bind(&young).unwrap());
        let _listening = std::os::unix::net::UnixListener::bind(&live).unwrap();
        // A socket cannot be opened to set its times; touch sets them by path.
        for path in [&old, &live] {
            let touched = std::process::Command::new("touch")
                .args(["-m", "-d", "1 hour ago"])
                .arg(path)
                .status()
                .unwrap();
            assert!(touched.success());
        }
        sweep_stale(tmp.path());
        assert!(!old.exists(), "an old stale socket stays");
        assert!(young.exists(), "a young socket was swept");
        assert!(live.exists(), "a live socket was swept");
    }
}
