//! `stint`: a software SCSI disk with command-level quality of service.

mod admin;
mod bench;
mod cdl;
mod control;
mod ctl;
mod metrics;
mod reconfigure;
mod serve;
mod service;
mod sim;

use stint::config;

use clap::{CommandFactory, Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "stint",
    version,
    about = "A software SCSI disk with command-level quality of service",
    after_help = "Documentation: README.md (an example of each command), docs/ (the reference), \
experiments/README.md (every measured result)."
)]
struct Cli {
    /// On an error, print its full detail (Rust's Debug form, with a backtrace when
    /// RUST_BACKTRACE=1) instead of one line of causes.
    #[arg(long, global = true)]
    debug: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve logical units over iSCSI.
    #[command(
        after_help = "Reference: docs/configuration.md (every flag and stint.toml key), \
docs/cdl.md (CDL), docs/commands.md (the SCSI commands), docs/durability.md, docs/metrics.md, \
docs/rbd.md (Ceph)."
    )]
    Serve(serve::ServeArgs),
    /// Run an experiment on the device models in virtual time.
    #[command(
        after_help = "Reference: docs/experiments.md (the experiment file format); every \
result: experiments/README.md."
    )]
    Sim(sim::SimArgs),
    #[command(
        after_help = "Reference: docs/cdl-tool.md (every subcommand, the page file format), \
docs/cdl.md (CDL in stint)."
    )]
    Cdl(cdl::CdlArgs),
    /// Run an experiment's jobs (or one job from flags) against an iSCSI LUN in real time.
    #[command(
        after_help = "Reference: docs/bench.md (every flag, the report, the two clocks); \
docs/experiments.md (the experiment file format)."
    )]
    Bench(bench::BenchArgs),
    /// Control a running `stint serve` through its admin socket: list targets, LUNs and
    /// sessions, read a LUN's counters, add, remove or resize LUNs, reload.
    #[command(after_help = "Reference: docs/ctl.md (the socket, its permissions, the protocol).")]
    Ctl(ctl::CtlArgs),
    /// Print a shell completion script (bash, zsh or fish) on stdout.
    #[command(long_about = "Print a shell completion script on stdout. For bash: \
`stint completions bash > ~/.local/share/bash-completion/completions/stint`; zsh: into a \
directory of $fpath as `_stint`; fish: `~/.config/fish/completions/stint.fish`.")]
    Completions {
        /// The shell.
        shell: Shell,
    },
}

/// The shells `stint completions` writes a script for.
#[derive(Clone, Copy, clap::ValueEnum)]
enum Shell {
    Bash,
    Zsh,
    Fish,
}

/// Writes `shell`'s completion script for the whole command line to stdout. The script is
/// built in memory first: a closed stdout (`stint completions bash | head`) drops the rest
/// instead of panicking inside the generator.
fn completions(shell: Shell) {
    use clap_complete::{generate, shells};
    use std::io::Write as _;
    let mut cmd = Cli::command();
    let mut script = Vec::new();
    match shell {
        Shell::Bash => generate(shells::Bash, &mut cmd, "stint", &mut script),
        Shell::Zsh => generate(shells::Zsh, &mut cmd, "stint", &mut script),
        Shell::Fish => generate(shells::Fish, &mut cmd, "stint", &mut script),
    }
    let _ = std::io::stdout().lock().write_all(&script);
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => serve::run(args),
        Command::Sim(args) => sim::run(args),
        Command::Cdl(args) => cdl::run(args),
        Command::Bench(args) => bench::run(args),
        // Its own errors: `stint ctl: <error>`, exit code 1.
        Command::Ctl(args) => return ctl::main(args),
        Command::Completions { shell } => {
            completions(shell);
            Ok(())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // A user's mistake is one line of causes whatever RUST_BACKTRACE says; --debug shows all.
        Err(e) if cli.debug => {
            eprintln!("error: {e:?}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
