//! `stint`: a software SCSI disk with command-level quality of service.

mod bench;
mod cdl;
mod metrics;
mod serve;
mod service;
mod sim;

use stint::config;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "stint",
    version,
    about = "A software SCSI disk with command-level quality of service"
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
    Serve(serve::ServeArgs),
    /// Run an experiment on the device models in virtual time.
    Sim(sim::SimArgs),
    Cdl(cdl::CdlArgs),
    /// Run an experiment's jobs (or one job from flags) against an iSCSI LUN in real time.
    Bench(bench::BenchArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => serve::run(args),
        Command::Sim(args) => sim::run(args),
        Command::Cdl(args) => cdl::run(args),
        Command::Bench(args) => bench::run(args),
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
