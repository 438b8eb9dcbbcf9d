//! `stint sim`: runs an experiment file in virtual time and prints a table or one JSON object.

use anyhow::{bail, Context};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub struct SimArgs {
    /// Experiment file, e.g. experiments/b1.toml, or a shipped experiment's id, e.g. b1.
    #[arg(required_unless_present = "list")]
    pub experiment: Option<PathBuf>,
    /// List the shipped experiments (their ids and titles) and exit.
    #[arg(long, exclusive = true)]
    pub list: bool,
    /// Seed of every random stream (default: the file's `seed`, else 1).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Run every point with N seeds (the seed and the N − 1 after it) and print, per point and
    /// class, the spread of IOPS and each percentile across them.
    #[arg(long, value_name = "N", conflicts_with = "plot",
          value_parser = clap::value_parser!(u64).range(2..=10_000))]
    pub seeds: Option<u64>,
    /// Print exactly one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Write SVG figures (IOPS vs QD, p99 per class vs QD, latency CDF per class) into DIR.
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    /// Measured I/Os per point (overrides the file's `ios`/`runtime`).
    #[arg(long, conflicts_with = "runtime")]
    pub ios: Option<u64>,
    /// Simulated seconds measured per point (overrides the file's `ios`/`runtime`).
    #[arg(long)]
    pub runtime: Option<f64>,
    /// Queue depths to run instead of the file's sweep, e.g. --qd 32 or --qd 1,8,32.
    #[arg(long, value_delimiter = ',')]
    pub qd: Vec<u32>,
    /// Run only these variants (repeat or comma-separate).
    #[arg(long, value_delimiter = ',')]
    pub variant: Vec<String>,
    /// Threads for the sweep (0: one per core).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// Run the jobs on the device of a `stint serve` configuration instead of the file's
    /// [drive], [queue] and [cdl] (its first LUN with a device queue), e.g.
    /// --device examples/hdd-cdl.toml: what `stint bench` measures against that LUN.
    #[arg(long, value_name = "STINT_TOML")]
    pub device: Option<PathBuf>,
}

/// Makes `dir` ready for figures, so a bad --plot is refused before a long run, not after it.
pub fn plot_dir(dir: &Path) -> anyhow::Result<()> {
    if dir.exists() && !dir.is_dir() {
        bail!(
            "--plot {}: not a directory (--plot names the directory the SVG figures go into)",
            dir.display()
        );
    }
    std::fs::create_dir_all(dir).with_context(|| format!("--plot {}", dir.display()))
}

pub fn run(args: SimArgs) -> anyhow::Result<()> {
    let Some(path) = &args.experiment else {
        for (id, title) in sim::shipped::list() {
            println!("{id:<4} {title}");
        }
        return Ok(());
    };
    let mut exp = sim::shipped::resolve(path).with_context(|| format!("in {}", path.display()))?;
    if let Some(dir) = &args.plot {
        plot_dir(dir)?;
    }
    match (args.ios, args.runtime) {
        (Some(0), _) => bail!("--ios must be at least 1"),
        (Some(n), _) => exp.set_stop(sim::Stop::Ios(n)),
        (None, Some(s)) if !(s > 0.0 && s <= 1e6) => {
            bail!("--runtime must be in (0, 1e6] seconds, not {s}")
        }
        (None, Some(s)) => exp.set_stop(sim::Stop::Runtime((s * 1e9) as u64)),
        (None, None) => {}
    }
    if !args.qd.is_empty() {
        exp.set_qd(args.qd.clone())?;
    }
    if !args.variant.is_empty() {
        exp.select_variants(&args.variant)?;
    }
    if let Some(path) = &args.device {
        let device = crate::config::Config::load(path)?
            .device_description()
            .with_context(|| format!("in {}", path.display()))?;
        for v in &mut exp.variants {
            v.set_device(device.drive.clone(), device.queue.clone(), device.cdl)
                .with_context(|| {
                    format!("the jobs of variant {:?} on {}", v.name, path.display())
                })?;
        }
    }
    let seed = args.seed.unwrap_or(exp.seed);
    let seeds: Vec<u64> = match args.seeds {
        Some(n) => {
            let Some(last) = seed.checked_add(n - 1) else {
                bail!(
                    "--seed {seed} --seeds {n}: the last seed would pass {}",
                    u64::MAX
                );
            };
            (seed..=last).collect()
        }
        None => vec![seed],
    };
    let points = exp.points().len() as u64 * seeds.len() as u64;
    let bar = if args.json || !std::io::stderr().is_terminal() {
        ProgressBar::hidden()
    } else {
        let bar = ProgressBar::new(points);
        if let Ok(style) =
            ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} points {elapsed}")
        {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_prefix(exp.id.clone());
        bar
    };
    if args.seeds.is_some() {
        let report = sim::sweep::run_seeds(&exp, &seeds, args.threads, &|| bar.inc(1))?;
        bar.finish_and_clear();
        if args.json {
            println!("{}", report.to_json());
        } else {
            print!("{}", report.table(&exp));
        }
        return Ok(());
    }
    let report = sim::sweep::run(&exp, seed, args.threads, &|| bar.inc(1))?;
    bar.finish_and_clear();
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
    Ok(())
}
