//! Seagate's fast-fail study step by step (experiments/README.md, A1–A5): per step the highest
//! queue depth whose R1 reads meet the SLA (99.99 % under 100 ms), the MiB/s the drive
//! transferred for the host there, R1's p99.99 with the samples behind it, and the ratio to
//! A1, and every point of the four steps; then A4 with a wider start margin in the CDL-aware
//! scheduler, and A5 (abort and replica, its SLA on all reads). Prints Markdown tables.
//!
//! `cargo run --release -p sim --example seagate_steps [ios [threads]]` (default: the files'
//! 10^6 measured commands per point, one thread per core)

use sim::sla::Sla;
use sim::{Experiment, Report, SimError, Stop};
use std::path::Path;

/// The CDL-aware scheduler's margins (aggressiveness) A4 is also run with; 2 is its default.
const MARGINS: [f64; 3] = [4.0, 6.0, 8.0];

fn shipped(id: &str) -> Result<Experiment, SimError> {
    Experiment::load(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../experiments/{id}.toml")),
    )
}

/// One variant's best point: QD, MiB/s, latency at the SLA's percentile (ms), the SLA's
/// commands and the samples beyond that percentile; then the next queue depth of the sweep
/// and its latency at the percentile, where the SLA fails.
struct Best {
    qd: u32,
    mib_s: f64,
    at_ms: f64,
    ios: u64,
    beyond: u64,
    next: Option<(u32, f64)>,
}

fn best(report: &Report, sla: &Sla, variant: usize) -> Option<Best> {
    let (point, r) = report.sla_best(sla, variant)?;
    let v = sla.verdict(r);
    let next = report
        .results
        .iter()
        .filter(|(p, _)| p.variant == variant && p.qd > point.qd)
        .min_by_key(|(p, _)| p.qd)
        .map(|(p, r)| (p.qd, sla.verdict(r).at_percentile_ms));
    Some(Best {
        qd: point.qd,
        mib_s: r.total.summary(r.interval).mib_s,
        at_ms: v.at_percentile_ms,
        ios: v.ios,
        beyond: v.beyond,
        next,
    })
}

fn run(
    exp: &Experiment,
    ios: Option<u64>,
    threads: usize,
) -> Result<(Report, Sla), Box<dyn std::error::Error>> {
    let mut exp = exp.clone();
    if let Some(n) = ios {
        exp.set_stop(Stop::Ios(n));
    }
    let sla = exp.sla.ok_or(format!("{} has no SLA", exp.id))?;
    Ok((sim::sweep::run(&exp, exp.seed, threads, &|| {})?, sla))
}

/// A Markdown row: the `label` cells, then `b`'s with its MiB/s as a multiple of `base`.
fn row(label: &str, b: Option<&Best>, base: f64) -> String {
    match b {
        None => format!("| {label} | none | – | – | no | – | – |"),
        Some(b) => {
            let next = b.next.map_or_else(
                || "– (the sweep's last)".to_owned(),
                |(qd, ms)| format!("QD {qd}: {ms:.1} ms"),
            );
            format!(
                "| {label} | {} | {:.1} | {:.1} ({} reads, {} beyond) | yes | {next} | {:.2}× |",
                b.qd,
                b.mib_s,
                b.at_ms,
                b.ios,
                b.beyond,
                b.mib_s / base
            )
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let ios = args.next().and_then(|a| a.parse().ok());
    let threads = args.next().and_then(|a| a.parse().ok()).unwrap_or(0);
    let steps = [
        (
            "A1",
            "60/40 mix, 256 KiB reads, 512 KiB writes, no write cache",
        ),
        ("A2", "write cache on"),
        ("A3", "2 MiB writes, byte ratio kept"),
        ("A4", "R1 100 ms, R2 1000 ms inactive limits, best effort"),
    ];
    println!(
        "| step | what changes | highest QD meeting the SLA | MiB/s | R1 p99.99 ms | SLA met | \
         next QD: R1 p99.99 | vs A1 |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let mut base = None;
    let mut every = Vec::new();
    for (id, what) in steps {
        let exp = shipped(&id.to_lowercase())?;
        let (report, sla) = run(&exp, ios, threads)?;
        let b = best(&report, &sla, 0);
        let a1 = *base.get_or_insert(b.as_ref().map_or(f64::NAN, |b| b.mib_s));
        println!("{}", row(&format!("{id} | {what}"), b.as_ref(), a1));
        for (p, r) in &report.results {
            let v = sla.verdict(r);
            every.push(format!(
                "| {id} | {} | {:.1} | {:.1} ({} reads, {} beyond) | {} |",
                p.qd,
                r.total.summary(r.interval).mib_s,
                v.at_percentile_ms,
                v.ios,
                v.beyond,
                if v.met { "yes" } else { "no" }
            ));
        }
    }
    let a1 = base.unwrap_or(f64::NAN);
    println!("\n| step | QD | MiB/s | R1 p99.99 ms | SLA met |");
    println!("|---|---|---|---|---|");
    for line in every {
        println!("{line}");
    }

    // A4 as shipped runs the scheduler's default margin; wider margins start R1 reads earlier.
    let mut a4 = shipped("a4")?;
    let template = a4.variants.swap_remove(0);
    a4.variants = MARGINS
        .iter()
        .map(|m| {
            let mut v = template.clone();
            v.name = format!("{m}");
            v.queue.scheduler = format!("cdl-aware:aggressiveness={m}");
            v
        })
        .collect();
    a4.variants_in_file = a4.variants.len();
    let (report, sla) = run(&a4, ios, threads)?;
    println!("\n| A4 with cdl-aware:aggressiveness= | highest QD meeting the SLA | MiB/s | R1 p99.99 ms | SLA met | next QD: R1 p99.99 | vs A1 |");
    println!("|---|---|---|---|---|---|---|");
    for (i, m) in MARGINS.iter().enumerate() {
        println!(
            "{}",
            row(&format!("{m}"), best(&report, &sla, i).as_ref(), a1)
        );
    }

    let (report, sla) = run(&shipped("a5")?, ios, threads)?;
    println!(
        "\n| A5 variant (SLA: {}) | highest QD meeting it | MiB/s | all reads p99.99 ms | SLA met | next QD: p99.99 | vs A1 |",
        sla.describe()
    );
    println!("|---|---|---|---|---|---|---|");
    let a5 = shipped("a5")?;
    for (i, v) in a5.variants.iter().enumerate() {
        println!("{}", row(&v.name, best(&report, &sla, i).as_ref(), a1));
    }
    Ok(())
}
