//! Server processes the test starts and SIGKILLs: `stint serve` itself for the SIGKILL runs
//! (a file LUN, or an RBD LUN), the harness (this binary re-executed) for the power-loss runs.

use crate::harness::{Spec, TARGET};
use iscsi::url::IscsiUrl;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

/// How long a server may take to print its URL: an RBD LUN's restart waits for the dead
/// server's watch to time out (osd_client_watch_timeout, 30 s by default) and then for
/// librbd's next try at the lock (every 5 s).
const START_LIMIT: Duration = Duration::from_secs(120);

pub struct Server {
    child: Child,
    /// Kept open: the server may still write to it.
    _stdout: BufReader<ChildStdout>,
    pub url: IscsiUrl,
}

impl Server {
    /// `stint serve --config` on a file LUN of `size` bytes at `file`.
    pub fn stint(file: &Path, size: u64, block_size: u32, write_cache: bool) -> Server {
        let lun = format!(
            "store = \"file\"\npath = \"{}\"\nsize = {size}\nblock_size = {block_size}\n\
             write_cache = {write_cache}\n",
            file.display()
        );
        Server::serve(&file.with_extension("toml"), &lun)
    }

    /// `stint serve --config` on RBD image `pool/image` of the cluster `conf` names (the
    /// LUN takes the image's size), its stint.toml and kept files in `dir`.
    pub fn stint_rbd(
        dir: &Path,
        conf: &Path,
        image: &str,
        block_size: u32,
        write_cache: bool,
    ) -> Server {
        let lun = format!(
            "store = \"rbd\"\npool = \"rbd\"\nimage = \"{image}\"\nconf = \"{}\"\n\
             block_size = {block_size}\nwrite_cache = {write_cache}\n",
            conf.display()
        );
        Server::serve(&dir.join("stint.toml"), &lun)
    }

    /// `stint serve --config` on a stint.toml at `config` of one target with one LUN.
    fn serve(config: &Path, lun: &str) -> Server {
        let toml = format!("[[target]]\nname = \"{TARGET}\"\n[[target.lun]]\n{lun}");
        std::fs::write(config, toml).expect("write stint.toml");
        let mut command = Command::new(env!("CARGO_BIN_EXE_stint"));
        command
            .args(["serve", "--listen", "127.0.0.1:0", "--config"])
            .arg(config)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null());
        Server::spawn(command)
    }

    /// The harness server on a power-loss store.
    pub fn harness(spec: &Spec) -> Server {
        let mut command = Command::new(std::env::current_exe().expect("own path"));
        command.envs(spec.env()).stdin(Stdio::piped());
        Server::spawn(command)
    }

    fn spawn(mut command: Command) -> Server {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start a server");
        // A server that neither prints its URL nor exits within START_LIMIT (an RBD LUN whose
        // lock never comes) is killed, by its PID, rather than left to hang the test.
        let (started, watch) = mpsc::channel::<()>();
        let pid = child.id().to_string();
        std::thread::spawn(move || {
            if watch.recv_timeout(START_LIMIT) == Err(RecvTimeoutError::Timeout) {
                let _ = Command::new("kill").args(["-KILL", &pid]).status();
            }
        });
        let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
        let mut line = String::new();
        while !line.starts_with("iscsi://") {
            line.clear();
            if stdout.read_line(&mut line).unwrap_or(0) == 0 {
                let _ = child.kill();
                let status = child.wait();
                panic!(
                    "the server exited (or was killed after {START_LIMIT:?}) before printing \
                     its URL: {status:?}"
                );
            }
        }
        let _ = started.send(());
        let url = line.trim().parse().expect("a valid URL");
        Server {
            child,
            _stdout: stdout,
            url,
        }
    }

    /// SIGTERM (a clean stop: `stint serve` flushes and closes its stores, an RBD image's
    /// lock and watch with them), and wait; whether it exited with status 0 within 30 s.
    pub fn stop(&mut self) -> bool {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.success();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// SIGKILL, and wait until it is gone (its file lock with it).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}
