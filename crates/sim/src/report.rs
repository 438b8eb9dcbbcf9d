//! Results of a run: the JSON object of issue 3 (field order is output order; classes in a
//! BTreeMap, so the same file and seed print the same bytes) and a readable table.

use crate::array::ArrayStats;
use crate::engine::group_name;
use crate::engine::PointResult;
use crate::experiment::{Experiment, Point};
use crate::sla::Sla;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use workload::{StatsSummary, MIN_SAMPLES_BEYOND};

/// One point as printed.
#[derive(Clone, Debug, Serialize)]
pub struct PointReport {
    pub variant: String,
    pub qd: u32,
    pub total: StatsSummary,
    pub classes: BTreeMap<String, StatsSummary>,
    /// Per job of the experiment (its instances together).
    pub jobs: BTreeMap<String, StatsSummary>,
    /// Completions that were not GOOD, by "sense key/ASC/ASCQ" in hex (`stint bench`; the
    /// simulator's CDL outcomes are in the class counters).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub errors: BTreeMap<String, u64>,
    /// An erasure-coded array's drives (the groups above are its user reads).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub erasure: Option<ArrayStats>,
}

/// Commands a run executed and the wall-clock time it took: the simulator's own speed, or
/// what `stint bench` measured on a real LUN.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct SimSpeed {
    pub commands: u64,
    pub wall_s: f64,
    pub commands_per_s: f64,
}

/// What `stint bench --verify` checked.
#[derive(Clone, Debug, Serialize)]
pub struct Verified {
    pub blocks_checked: u64,
    pub mismatches: Vec<String>,
}

/// Who produced a report: the key it carries its speed under (`"sim"` or `"bench"`).
#[derive(Clone, Copy, Debug, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Run {
    Sim(SimSpeed),
    Bench(SimSpeed),
}

/// A whole run.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub experiment: String,
    pub seed: u64,
    pub points: Vec<PointReport>,
    #[serde(flatten)]
    pub run: Run,
    /// `stint bench --verify`: blocks checked and every mismatch found ("LBA n: what").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verify: Option<Verified>,
    /// The raw results behind `points`, same order (histograms for plots and SLAs).
    #[serde(skip)]
    pub results: Vec<(Point, PointResult)>,
}

impl PointReport {
    pub fn new(exp: &Experiment, point: Point, r: &PointResult) -> Self {
        let classes = r
            .used_groups()
            .map(|(g, stats)| (group_name(g), stats.summary(r.interval)))
            .collect();
        Self {
            variant: exp
                .variants
                .get(point.variant)
                .map_or_else(String::new, |v| v.name.clone()),
            qd: point.qd,
            total: r.total.summary(r.interval),
            classes,
            jobs: r
                .jobs
                .iter()
                .map(|(name, stats)| (name.clone(), stats.summary(r.interval)))
                .collect(),
            errors: BTreeMap::new(),
            erasure: r.erasure,
        }
    }
}

impl PointReport {
    /// The groups a table prints for this point: "all", then each class when there are
    /// several, then each job when there are several ("job:NAME").
    pub fn groups(&self) -> Vec<(String, &StatsSummary)> {
        let mut groups = vec![("all".to_owned(), &self.total)];
        if self.classes.len() > 1 {
            groups.extend(self.classes.iter().map(|(n, s)| (n.clone(), s)));
        }
        if self.jobs.len() > 1 {
            groups.extend(self.jobs.iter().map(|(n, s)| (format!("job:{n}"), s)));
        }
        groups
    }
}

/// What a table says under a percentile it leaves out.
/// `scope` says where the samples were too few ("in its row").
pub fn thin_footnote(scope: &str) -> String {
    format!(
        "–: fewer than {MIN_SAMPLES_BEYOND} samples beyond the percentile {scope}, too few to \
         estimate it (p99 needs {} samples, p99.9 {}, p99.99 {}); --json gives every percentile \
         with its samples_beyond",
        MIN_SAMPLES_BEYOND * 100,
        MIN_SAMPLES_BEYOND * 1000,
        MIN_SAMPLES_BEYOND * 10_000
    )
}

/// A percentile as a table prints it: in ms, or "–" with too few samples beyond it.
fn percentile_cell(ms: f64, beyond: u64) -> String {
    if beyond < MIN_SAMPLES_BEYOND {
        "–".to_owned()
    } else {
        format!("{ms:.2}")
    }
}

/// Writes `rows` into `out` as aligned columns, the first `left` left-aligned and the others
/// right-aligned; returns the column widths (in characters).
pub fn aligned(out: &mut String, rows: &[Vec<String>], left: usize) -> Vec<usize> {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .map(|r| r.get(c).map_or(0, |cell| cell.chars().count()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (cell, w))| {
                // `format!` pads by chars, so "–" takes one column like a digit.
                if i < left {
                    format!("{cell:<w$}")
                } else {
                    format!("{cell:>w$}")
                }
            })
            .collect();
        let _ = writeln!(out, "{}", cells.join("  ").trim_end());
    }
    widths
}

impl Report {
    /// The point of `variant` at the highest queue depth that meets `sla`, if any does.
    pub fn sla_best(&self, sla: &Sla, variant: usize) -> Option<&(Point, PointResult)> {
        self.results
            .iter()
            .filter(|(p, r)| p.variant == variant && sla.met(r))
            .max_by_key(|(p, _)| p.qd)
    }

    /// Per point: throughput, the commands the SLA covers, their latency at its percentile
    /// and the verdict; then per variant the highest queue depth that meets it.
    fn sla_table(&self, exp: &Experiment, sla: &Sla) -> String {
        let mut rows = vec![[
            "variant".to_owned(),
            "qd".to_owned(),
            "MiB/s".to_owned(),
            "SLA ios".to_owned(),
            format!("{} ms", sla.percentile_name()),
            "met".to_owned(),
        ]
        .to_vec()];
        let mut thin = false;
        for (p, r) in &self.results {
            let v = sla.verdict(r);
            thin |= v.beyond < MIN_SAMPLES_BEYOND;
            rows.push(vec![
                exp.variants
                    .get(p.variant)
                    .map_or_else(String::new, |v| v.name.clone()),
                p.qd.to_string(),
                format!("{:.1}", r.total.summary(r.interval).mib_s),
                v.ios.to_string(),
                percentile_cell(v.at_percentile_ms, v.beyond),
                if v.met { "yes" } else { "no" }.to_owned(),
            ]);
        }
        let mut out = String::new();
        aligned(&mut out, &rows, 2);
        let _ = writeln!(
            out,
            "MiB/s: the bytes the drive transferred for the host, reads and writes"
        );
        if thin {
            let _ = writeln!(
                out,
                "–: fewer than {MIN_SAMPLES_BEYOND} of the commands the SLA covers beyond the percentile"
            );
        }
        for (v, variant) in exp.variants.iter().enumerate() {
            let _ = match self.sla_best(sla, v) {
                Some((p, r)) => writeln!(
                    out,
                    "{}: highest QD meeting it {}, {:.1} MiB/s",
                    variant.name,
                    p.qd,
                    r.total.summary(r.interval).mib_s
                ),
                None => writeln!(out, "{}: no queue depth meets it", variant.name),
            };
        }
        out
    }

    /// Per point of an erasure-coded array: its layout and what its drives did.
    fn erasure_table(&self) -> String {
        #[rustfmt::skip]
        let header = [
            "variant", "qd", "k+m", "drives", "chunk KiB", "drive IOPS", "fast-failed",
            "errors", "rebuilds", "rereads", "degraded reads", "background",
        ];
        let mut rows: Vec<Vec<String>> = vec![header.iter().map(|h| (*h).to_owned()).collect()];
        for p in &self.points {
            let Some(a) = &p.erasure else { continue };
            rows.push(vec![
                p.variant.clone(),
                p.qd.to_string(),
                format!("{}+{}", a.data, a.parity),
                a.drives.to_string(),
                (a.chunk_bytes / 1024).to_string(),
                format!("{:.1}", a.drive_iops),
                a.fast_failed.to_string(),
                a.errors.to_string(),
                a.rebuilds.to_string(),
                a.rereads.to_string(),
                a.degraded.to_string(),
                a.background.to_string(),
            ]);
        }
        let mut out = String::from(
            "\nerasure-coded array: the rows above are user reads (one stripe each, done when k \
             chunks are in); per point, what the drives did:\n",
        );
        aligned(&mut out, &rows, 1);
        let _ = writeln!(
            out,
            "drive IOPS: completions on all drives (chunk reads, rebuilds, rereads, background); \
             fast-failed: chunk reads a CDL policy ended without data; rebuilds: reads of another \
             chunk of the stripe for a failed one; rereads: a failed chunk read again (none left)"
        );
        out
    }

    /// The JSON object, one line.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }

    /// An aligned table: a row per point, per class and per job (when a point has several of
    /// them), then the SLA verdict per variant if the experiment has one.
    pub fn table(&self, exp: &Experiment) -> String {
        #[rustfmt::skip]
        let header = [
            "variant", "qd", "class", "ios", "IOPS", "data IOPS", "MiB/s", "min ms", "mean",
            "p50", "p90", "p99", "p99.9", "p99.99", "max", "met", "missed", "unavail", "aborted",
        ];
        let mut rows: Vec<Vec<String>> = vec![header.iter().map(|h| (*h).to_owned()).collect()];
        let mut thin = false;
        for p in &self.points {
            for (name, s) in p.groups() {
                let l = &s.lat_ms;
                let mut row = vec![
                    p.variant.clone(),
                    p.qd.to_string(),
                    name,
                    s.ios.to_string(),
                    format!("{:.1}", s.iops),
                    format!("{:.1}", s.data_iops),
                    format!("{:.1}", s.mib_s),
                    format!("{:.2}", l.min),
                    format!("{:.2}", l.mean),
                ];
                for (value, beyond) in l.percentiles().into_iter().zip(s.samples_beyond.counts()) {
                    thin |= beyond < MIN_SAMPLES_BEYOND;
                    row.push(percentile_cell(value, beyond));
                }
                row.extend([
                    format!("{:.2}", l.max),
                    s.limit_met.to_string(),
                    s.limit_missed.to_string(),
                    s.completed_unavailable.to_string(),
                    s.aborted.to_string(),
                ]);
                rows.push(row);
            }
        }
        let mut out = format!("{} — {}\n", exp.id, exp.title);
        aligned(&mut out, &rows, 3);
        // IOPS and MiB/s count different commands once a policy fails some fast; say which.
        let _ = writeln!(
            out,
            "data IOPS and MiB/s: commands whose data the drive transferred for the host; \
             IOPS and latencies also count those it ended without (unavail: Dh, aborted: Eh/Fh, errors)"
        );
        if exp.variants.iter().any(|v| v.replica.is_some()) {
            let _ = writeln!(
                out,
                "a read ended without data is served by the replica: its latency includes the \
                 replica's answer, its data is not in data IOPS or MiB/s"
            );
        }
        if thin {
            let _ = writeln!(out, "{}", thin_footnote("in its row"));
        }
        for p in self.points.iter().filter(|p| !p.errors.is_empty()) {
            let list: Vec<String> = p.errors.iter().map(|(k, n)| format!("{k}: {n}")).collect();
            let _ = writeln!(
                out,
                "{} QD{} errors by sense key/ASC/ASCQ: {}",
                p.variant,
                p.qd,
                list.join(", ")
            );
        }
        if self.points.iter().any(|p| p.erasure.is_some()) {
            out += &self.erasure_table();
        }
        if let Some(sla) = &exp.sla {
            let _ = writeln!(out, "\nSLA: {}", sla.describe());
            out += &self.sla_table(exp, sla);
        }
        let _ = match self.run {
            Run::Sim(s) => writeln!(
                out,
                "\nsimulated {} commands in {:.2} s ({:.0} commands/s)",
                s.commands, s.wall_s, s.commands_per_s
            ),
            Run::Bench(s) => writeln!(
                out,
                "\nran {} commands in {:.2} s of wall-clock time",
                s.commands, s.wall_s
            ),
        };
        if let Some(v) = &self.verify {
            let _ = writeln!(
                out,
                "verify: {} blocks checked, {} mismatches",
                v.blocks_checked,
                v.mismatches.len()
            );
            for m in v.mismatches.iter().take(20) {
                let _ = writeln!(out, "  {m}");
            }
        }
        out
    }
}
