//! Server processes the test starts and SIGKILLs: `stint serve` itself for the SIGKILL runs,
//! the harness (this binary re-executed) for the power-loss runs.

use crate::harness::{Spec, TARGET};
use iscsi::url::IscsiUrl;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};

pub struct Server {
    child: Child,
    /// Kept open: the server may still write to it.
    _stdout: BufReader<ChildStdout>,
    pub url: IscsiUrl,
}

impl Server {
    /// `stint serve --config` on a file LUN of `size` bytes at `file`.
    pub fn stint(file: &Path, size: u64, block_size: u32, write_cache: bool) -> Server {
        let config = file.with_extension("toml");
        let toml = format!(
            "[[target]]\nname = \"{TARGET}\"\n[[target.lun]]\nstore = \"file\"\n\
             path = \"{}\"\nsize = {size}\nblock_size = {block_size}\nwrite_cache = {write_cache}\n",
            file.display()
        );
        std::fs::write(&config, toml).expect("write stint.toml");
        let mut command = Command::new(env!("CARGO_BIN_EXE_stint"));
        command
            .args(["serve", "--listen", "127.0.0.1:0", "--config"])
            .arg(&config)
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
        let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
        let mut line = String::new();
        while !line.starts_with("iscsi://") {
            line.clear();
            if stdout.read_line(&mut line).unwrap_or(0) == 0 {
                let _ = child.kill();
                let status = child.wait();
                panic!("the server exited before printing its URL: {status:?}");
            }
        }
        let url = line.trim().parse().expect("a valid URL");
        Server {
            child,
            _stdout: stdout,
            url,
        }
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
