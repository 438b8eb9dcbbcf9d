//! `stint`: a software SCSI disk with command-level quality of service.

mod bench;
mod cdl;
mod config;
mod serve;
mod sim;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "stint",
    version,
    about = "A software SCSI disk with command-level quality of service"
)]
struct Cli {
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

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Serve(args) => serve::run(args),
        Command::Sim(args) => sim::run(args),
        Command::Cdl(args) => cdl::run(args),
        Command::Bench(args) => bench::run(args),
    }
}
