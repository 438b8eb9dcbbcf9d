//! `stint bench`: the jobs of an experiment file (or one job from flags) run in real time
//! against an iSCSI LUN, one session per job instance, closed loop, each I/O a READ(16) or
//! WRITE(16) with its DLD, exactly as `stint sim` sends them to its logical unit. The results
//! fill the simulator's report: the same table, JSON and plots.

mod load;
mod stamp;
mod verify;

use anyhow::{bail, Context};
use iscsi::url::IscsiUrl;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;

use load::Target;

#[derive(clap::Args)]
pub struct BenchArgs {
    /// Experiment file (its [[job]]s, queue-depth sweep and ios/runtime; the LUN's own
    /// configuration replaces [drive], [queue] and [cdl]). Without it, one job from the flags.
    pub experiment: Option<PathBuf>,
    /// The LUN: iscsi://host:port/target/lun (as `stint serve` prints).
    #[arg(long, value_name = "URL")]
    pub url: String,
    /// Job flags (without an experiment file): fio's rw (read, write, randread, randwrite,
    /// rw, randrw).
    #[arg(long, default_value = "randread", conflicts_with = "experiment")]
    pub rw: String,
    /// Block size, e.g. 4k, 128k, or "4k,64k" for reads,writes.
    #[arg(long, default_value = "4k", conflicts_with = "experiment")]
    pub bs: String,
    /// Percentage of reads in a mixed job.
    #[arg(long, conflicts_with = "experiment")]
    pub rwmixread: Option<f64>,
    /// Commands each job instance keeps outstanding.
    #[arg(long, default_value_t = 1, conflicts_with_all = ["experiment", "qd"],
          value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub iodepth: u32,
    /// Job instances, each on its own iSCSI session.
    #[arg(long, default_value_t = 1, conflicts_with = "experiment",
          value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub numjobs: u32,
    /// Share of commands (percent) sent with `--cmdprio-hint` as DLD.
    #[arg(long, conflicts_with = "experiment")]
    pub cmdprio_percentage: Option<f64>,
    /// Duration limit descriptor (1..=7) of the prioritized commands.
    #[arg(long, conflicts_with = "experiment", value_parser = clap::value_parser!(u8).range(1..=7))]
    pub cmdprio_hint: Option<u8>,
    /// Class the prioritized commands are reported under (urgent, high, medium, low).
    #[arg(long, conflicts_with = "experiment")]
    pub cmdprio_class: Option<String>,
    /// At most this many commands per second per job instance (fio's rate_iops).
    #[arg(long, conflicts_with = "experiment")]
    pub rate_iops: Option<f64>,
    /// Measured I/Os per point (after the ramp).
    #[arg(long, conflicts_with = "runtime")]
    pub ios: Option<u64>,
    /// Measured time per point, e.g. 10s, 500ms, 2m (default for a flag job: 10s).
    #[arg(long)]
    pub runtime: Option<String>,
    /// Queue depths to run instead of the file's sweep, e.g. --qd 1,8,32.
    #[arg(long, value_delimiter = ',')]
    pub qd: Vec<u32>,
    /// Run only these variants of the file (their device tables do not apply: the LUN is what
    /// it is).
    #[arg(long, value_delimiter = ',')]
    pub variant: Vec<String>,
    /// Seed of the generators (default: the file's, else 1).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Print exactly one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Write SVG figures (IOPS vs QD, p99 per class vs QD, latency CDF per class) into DIR.
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    /// Stamp every written block with its LBA, a generation and a CRC32C, check every block
    /// read, and report each mismatch with its LBA (exit status 1 when there is one).
    #[arg(long)]
    pub verify: bool,
    /// iSCSI initiator name of the sessions (a target's `initiator_classes` may map it).
    #[arg(long, default_value = "iqn.2026-11.dev.stint:bench")]
    pub initiator: String,
}

pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    let url: IscsiUrl = args
        .url
        .parse()
        .map_err(|e| anyhow::anyhow!("--url: {e}"))?;
    if let Some(dir) = &args.plot {
        crate::sim::plot_dir(dir)?;
    }
    let mut exp = match &args.experiment {
        Some(path) => {
            sim::shipped::resolve(path).with_context(|| format!("in {}", path.display()))?
        }
        None => load::flag_job(&args)?,
    };
    if let Some(v) = exp.variants.iter().find(|v| v.erasure.is_some()) {
        anyhow::bail!(
            "variant {:?} has [erasure]: an erasure-coded array of simulated drives runs in \
             `stint sim` only; bench measures one LUN",
            v.name
        );
    }
    load::apply_overrides(&mut exp, &args)?;
    let seed = args.seed.unwrap_or(exp.seed);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let report = runtime.block_on(async {
        let target = Arc::new(Target::probe(&url, &args.initiator, args.verify).await?);
        let bar = progress(args.json);
        let report = load::run_all(&exp, seed, &target, &bar).await;
        bar.finish_and_clear();
        report
    })?;
    if args.json {
        println!("{}", report.to_json());
    } else {
        print!("{}", report.table(&exp));
    }
    if let Some(dir) = &args.plot {
        let files = sim::plot::write(dir, &exp, &report).map_err(anyhow::Error::msg)?;
        if !args.json {
            for f in files {
                println!("wrote {}", f.display());
            }
        }
    }
    if let Some(v) = report.verify.as_ref().filter(|v| !v.mismatches.is_empty()) {
        bail!("--verify found {} mismatching blocks", v.mismatches.len());
    }
    Ok(())
}

/// A live line on a terminal: the point, IOPS and p99 per class.
fn progress(json: bool) -> indicatif::ProgressBar {
    if json || !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new_spinner();
    if let Ok(style) = indicatif::ProgressStyle::with_template("{spinner} {elapsed} {msg}") {
        bar.set_style(style);
    }
    bar
}

/// Seconds in "10s", "500ms", "2m", "1.5h" or a plain number of seconds.
pub fn parse_duration(text: &str) -> anyhow::Result<f64> {
    let t = text.trim();
    let (number, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = t.strip_suffix('h') {
        (n, 3600.0)
    } else {
        (t, 1.0)
    };
    match number.trim().parse::<f64>() {
        Ok(v) if v > 0.0 && (v * scale).is_finite() => Ok(v * scale),
        _ => bail!("invalid duration {text:?} (examples: 10s, 500ms, 2m)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s").unwrap(), 10.0);
        assert_eq!(parse_duration("500ms").unwrap(), 0.5);
        assert_eq!(parse_duration("2m").unwrap(), 120.0);
        assert_eq!(parse_duration("3").unwrap(), 3.0);
        for bad in ["", "s", "-1s", "ten", "0"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
