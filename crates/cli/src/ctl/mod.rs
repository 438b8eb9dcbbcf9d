//! `stint ctl`: the admin socket's client (docs/ctl.md). One request, one response, printed
//! for a person or, with `--json`, as the server's result.

mod print;

use crate::admin::path::Env;
use crate::admin::proto::{
    Applied, Envelope, Listing, Request, Response, SessionInfo, Stats, MAX_RESPONSE, VERSION,
};
use anyhow::{bail, Context};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

#[derive(clap::Args)]
pub struct CtlArgs {
    /// The server's admin socket. Default: $STINT_ADMIN_SOCKET, else the one live socket in
    /// $RUNTIME_DIRECTORY, $XDG_RUNTIME_DIR/stint (or /tmp/stint-UID) and /run/stint.
    #[arg(long, value_name = "PATH", global = true)]
    socket: Option<PathBuf>,
    /// Print the server's result as JSON instead of a table.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    verb: Verb,
}

#[derive(clap::Subcommand)]
enum Verb {
    /// The targets and their LUNs, with sizes as served now.
    Ls,
    /// The iSCSI sessions logged in.
    Sessions,
    /// End a session (by the id `sessions` shows).
    Logout { session: u64 },
    /// Read the configuration file again and apply what changed.
    Reload,
    /// A LUN's counters (the metrics endpoint's, docs/metrics.md).
    Stats { target: String, lun: u64 },
    /// Add, remove or resize a LUN.
    #[command(subcommand)]
    Lun(LunVerb),
}

#[derive(clap::Subcommand)]
enum LunVerb {
    /// Add a LUN to a target; SPEC as `stint serve --lun` takes it (ram:1GiB,
    /// file:PATH[:SIZE], block:DEVICE[:SIZE], rbd:POOL/IMAGE[:CONF], hdd).
    Add {
        target: String,
        spec: String,
        /// Its LUN number; default: the lowest free one.
        #[arg(long)]
        lun: Option<u64>,
    },
    /// Remove a LUN from a target.
    Remove { target: String, lun: u64 },
    /// Set a LUN's size (512MiB, 1GiB or 1G = 2^30 bytes, 1GB = 10^9); without SIZE, take
    /// its store's size again (after `truncate`, `rbd resize`, a grown device).
    Resize {
        target: String,
        lun: u64,
        #[arg(value_parser = crate::config::parse_size)]
        size: Option<u64>,
        /// Allow a smaller size (the data beyond the new end is lost to initiators).
        #[arg(long)]
        shrink: bool,
    },
}

impl Verb {
    fn request(self) -> Request {
        match self {
            Verb::Ls => Request::Ls,
            Verb::Sessions => Request::Sessions,
            Verb::Logout { session } => Request::Logout { session },
            Verb::Reload => Request::Reload,
            Verb::Stats { target, lun } => Request::Stats { target, lun },
            Verb::Lun(LunVerb::Add { target, spec, lun }) => Request::LunAdd { target, lun, spec },
            Verb::Lun(LunVerb::Remove { target, lun }) => Request::LunRemove { target, lun },
            Verb::Lun(LunVerb::Resize {
                target,
                lun,
                size,
                shrink,
            }) => Request::LunResize {
                target,
                lun,
                size,
                shrink,
            },
        }
    }
}

/// Runs the command; every error is one line on stderr and exit code 1.
pub fn main(args: CtlArgs) -> ExitCode {
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("stint ctl: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: CtlArgs) -> anyhow::Result<()> {
    let path = match args.socket {
        Some(path) => path,
        None => match std::env::var_os("STINT_ADMIN_SOCKET").filter(|s| !s.is_empty()) {
            Some(path) => PathBuf::from(path),
            None => find_socket(&Env::current())?,
        },
    };
    let request = args.verb.request();
    let result = call(&path, &request)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&result)?);
        return Ok(());
    }
    let text = match request {
        Request::Ls => print::ls(&serde_json::from_value::<Listing>(result)?),
        Request::Sessions => print::sessions(&serde_json::from_value::<Vec<SessionInfo>>(result)?),
        Request::Stats { .. } => print::stats(&serde_json::from_value::<Stats>(result)?),
        _ => {
            let applied: Applied = serde_json::from_value(result)?;
            applied.changes.iter().map(|c| format!("{c}\n")).collect()
        }
    };
    print!("{text}");
    Ok(())
}

/// Sends `request` to the server at `path`; its result, or its error as ours.
fn call(path: &Path, request: &Request) -> anyhow::Result<serde_json::Value> {
    let mut stream = UnixStream::connect(path).map_err(|e| {
        let hint = match e.kind() {
            std::io::ErrorKind::PermissionDenied => {
                "the socket is mode 0600: run as the server's user (or root)"
            }
            std::io::ErrorKind::ConnectionRefused => {
                "nothing listens there: the server that made it has stopped"
            }
            _ => "is `stint serve` running with this admin socket (--admin-socket, admin_socket)?",
        };
        anyhow::anyhow!("cannot connect to {}: {e}; {hint}", path.display())
    })?;
    // A reload may take seconds; a server that hangs longer than this is reported.
    stream.set_read_timeout(Some(Duration::from_secs(120)))?;
    let mut line = serde_json::to_vec(&Envelope {
        version: VERSION,
        request: request.clone(),
    })?;
    line.push(b'\n');
    // A server that refuses the client answers before reading and closes: its answer is
    // still there to read after the write fails.
    let sent = stream.write_all(&line);
    let mut answer = String::new();
    let read = BufReader::new(stream.take(MAX_RESPONSE as u64)).read_line(&mut answer);
    if answer.is_empty() {
        sent.with_context(|| format!("sending to {}", path.display()))?;
        read.with_context(|| format!("reading the answer of {}", path.display()))?;
        bail!("{} closed the connection without answering", path.display());
    }
    let response: Response = serde_json::from_str(&answer)
        .with_context(|| format!("the answer of {} is not a response", path.display()))?;
    match (response.ok, response.result, response.error) {
        (true, Some(result), _) => Ok(result),
        (false, _, Some(error)) => bail!("{error}"),
        _ => bail!(
            "the answer of {} has neither result nor error",
            path.display()
        ),
    }
}

/// The one live socket in the search directories; several or none is an error naming them.
fn find_socket(env: &Env) -> anyhow::Result<PathBuf> {
    let dirs = env.search_dirs();
    let mut live = Vec::new();
    for dir in &dirs {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        let mut found: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "sock"))
            .collect();
        found.sort();
        // A stale socket (its server gone) refuses the connection: ignored. One we may not
        // open is listed, so that the error says where it is.
        live.extend(found.into_iter().filter(|p| match UnixStream::connect(p) {
            Ok(_) => true,
            Err(e) => e.kind() != std::io::ErrorKind::ConnectionRefused,
        }));
    }
    let shown = |paths: &[PathBuf]| {
        paths
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match live.len() {
        1 => Ok(live.remove(0)),
        0 => bail!(
            "no admin socket of a running stint serve in {}; give --socket PATH or set \
             STINT_ADMIN_SOCKET",
            shown(&dirs)
        ),
        _ => bail!(
            "{} stint serve admin sockets: {}; choose one with --socket PATH",
            live.len(),
            shown(&live)
        ),
    }
}
