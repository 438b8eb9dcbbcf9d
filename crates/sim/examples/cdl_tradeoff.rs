//! The CDL-aware scheduler's trade-off (experiments/README.md, B2 and B3): total IOPS lost
//! against B1 versus the limited classes' p99 (as a multiple of their guideline) and the
//! unlimited class's p99 (as a multiple of its p99 without CDL, the experiment's `no-cdl`
//! variant) as its aggressiveness varies, per queue depth. Prints the table and writes
//! `experiments/results/b2-tradeoff.svg` and `b3-tradeoff.svg` (or into the directory given).
//!
//! `cargo run --release -p sim --example cdl_tradeoff [ios [dir]]`

use sim::plot::tradeoff::{self, Bound, Curve};
use sim::{Experiment, SimError, Stop};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The knob's settings, in the order the curves are drawn; 2 is the default.
const AGGRESSIVENESS: [f64; 8] = [-2.0, -1.0, 0.0, 1.0, 2.0, 3.0, 4.0, 6.0];
const DEFAULT: f64 = 2.0;
const QD: [u32; 3] = [8, 16, 32];

fn shipped(id: &str) -> Result<Experiment, SimError> {
    Experiment::load(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../experiments/{id}.toml")),
    )
}

/// One setting at one queue depth: total IOPS lost against B1 (%), the worst limited class's
/// p99 over its guideline, each limited class's p99 (ms), and the unlimited class's p99 (ms)
/// and over its p99 without CDL.
struct Setting {
    loss: f64,
    worst: f64,
    p99: Vec<f64>,
    unlimited: f64,
    unlimited_ratio: f64,
}

/// The unlimited class of B2 and B3.
const UNLIMITED: &str = "medium";

/// Per queue depth, one [`Setting`] per aggressiveness, in [`AGGRESSIVENESS`]' order.
type Results = BTreeMap<u32, Vec<Setting>>;

/// Total IOPS of B1 per queue depth.
fn baseline(ios: Option<u64>) -> Result<BTreeMap<u32, f64>, SimError> {
    let mut b1 = shipped("b1")?;
    b1.set_qd(QD.to_vec())?;
    if let Some(n) = ios {
        b1.set_stop(Stop::Ios(n));
    }
    let r = sim::sweep::run(&b1, b1.seed, 0, &|| {})?;
    Ok(r.points.iter().map(|p| (p.qd, p.total.iops)).collect())
}

/// Runs `id`'s cdl-aware variant at every setting and queue depth.
fn sweep(
    id: &str,
    limited: &[(&str, f64)],
    b1: &BTreeMap<u32, f64>,
    ios: Option<u64>,
) -> Result<Results, SimError> {
    let mut exp = shipped(id)?;
    exp.select_variants(&["no-cdl".to_owned(), "cdl-aware".to_owned()])?;
    let template = exp.variants.swap_remove(1);
    exp.variants.extend(AGGRESSIVENESS.iter().map(|a| {
        let mut v = template.clone();
        v.name = format!("{a}");
        v.queue.scheduler = format!("cdl-aware:aggressiveness={a}");
        v
    }));
    exp.variants_in_file = exp.variants.len();
    exp.set_qd(QD.to_vec())?;
    if let Some(n) = ios {
        exp.set_stop(Stop::Ios(n));
    }
    let r = sim::sweep::run(&exp, exp.seed, 0, &|| {})?;
    let unlimited = |variant: &str, qd: u32| {
        r.points
            .iter()
            .find(|p| p.qd == qd && p.variant == variant)
            .and_then(|p| p.classes.get(UNLIMITED))
            .map_or(f64::NAN, |c| c.lat_ms.p99)
    };
    let mut out = Results::new();
    for a in AGGRESSIVENESS {
        for &qd in &QD {
            let Some(p) = r
                .points
                .iter()
                .find(|p| p.qd == qd && p.variant == format!("{a}"))
            else {
                continue;
            };
            let base = b1.get(&qd).copied().unwrap_or(f64::NAN);
            let loss = 100.0 * (1.0 - p.total.iops / base);
            let p99: Vec<f64> = limited
                .iter()
                .map(|(class, _)| p.classes.get(*class).map_or(f64::NAN, |c| c.lat_ms.p99))
                .collect();
            let worst = p99
                .iter()
                .zip(limited)
                .map(|(p, (_, g))| p / g)
                .fold(0.0, f64::max);
            let u = unlimited(&p.variant, qd);
            out.entry(qd).or_default().push(Setting {
                loss,
                worst,
                p99,
                unlimited: u,
                unlimited_ratio: u / unlimited("no-cdl", qd),
            });
        }
    }
    Ok(out)
}

fn figure(
    dir: &Path,
    id: &str,
    what: &str,
    results: &Results,
    bound: f64,
) -> Result<PathBuf, String> {
    let default = AGGRESSIVENESS
        .iter()
        .position(|a| *a == DEFAULT)
        .unwrap_or(0);
    let knob: Vec<String> = AGGRESSIVENESS.iter().map(|a| format!("{a}")).collect();
    let curves: Vec<Curve> = results
        .iter()
        .flat_map(|(qd, points)| {
            [
                Curve {
                    name: format!("QD {qd}, limited"),
                    points: points.iter().map(|s| (s.worst, s.loss)).collect(),
                    knob: knob.clone(),
                    default,
                },
                Curve {
                    name: format!("QD {qd}, unlimited"),
                    points: points.iter().map(|s| (s.unlimited_ratio, s.loss)).collect(),
                    knob: knob.clone(),
                    default,
                },
            ]
        })
        .collect();
    let path = dir.join(format!("{id}-tradeoff.svg"));
    // Issue 21's bounds: limited p99 within `bound`× the guideline, the unlimited p99 within
    // 1.15× its p99 without CDL, under 7 % of B1's IOPS lost.
    let bounds = [
        Bound::X(1.0, "1×".into()),
        Bound::X(bound, format!("limited bound ({bound}×)")),
        Bound::X(1.15, "unlimited bound (1.15×)".into()),
        Bound::Y(7.0, "7 % loss".into()),
    ];
    tradeoff::write(
        &path,
        (
            &format!("{id}: total IOPS lost against B1 vs each class's p99, by aggressiveness"),
            &format!("{what} — stint sim, seed 1; cdl-aware:aggressiveness=A (default {DEFAULT})"),
        ),
        (
            "p99 / its reference (limited: the worse class over its guideline; unlimited: over its p99 without CDL)",
            "IOPS lost against B1 (%)",
        ),
        &curves,
        &bounds,
    )?;
    Ok(path)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let ios = args.next().and_then(|a| a.parse().ok());
    let dir = args.next().map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments/results"),
        PathBuf::from,
    );
    std::fs::create_dir_all(&dir)?;
    let b1 = baseline(ios)?;
    let runs = [
        (
            "b2",
            "50 ms guideline on 20 % of reads",
            vec![("medium-dld1", 50.0)],
            1.4,
        ),
        (
            "b3",
            "100 ms on 10 % and 300 ms on 20 % of reads",
            vec![("medium-dld2", 100.0), ("medium-dld4", 300.0)],
            1.1,
        ),
    ];
    for (id, what, limited, bound) in runs {
        let results = sweep(id, &limited, &b1, ios)?;
        println!(
            "{id}: aggressiveness, QD, IOPS loss vs B1 (%), p99 (ms) of {limited:?}, \
             p99 (ms) of {UNLIMITED:?} and over its p99 without CDL"
        );
        for (qd, points) in &results {
            for (a, s) in AGGRESSIVENESS.iter().zip(points) {
                let p99: Vec<String> = s.p99.iter().map(|p| format!("{p:.1}")).collect();
                println!(
                    "  {a:>4} {qd:>3} {:>6.1} {} {:.0} {:.2}×",
                    s.loss,
                    p99.join(" "),
                    s.unlimited,
                    s.unlimited_ratio
                );
            }
        }
        let path = figure(&dir, id, what, &results, bound)?;
        println!("  {}", path.display());
    }
    Ok(())
}
