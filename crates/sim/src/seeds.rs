//! A seed sweep (`stint sim --seeds N`): every point run once per seed, and per point and
//! group the spread of each figure across the seeds, so a reader sees which differences
//! between points are larger than the luck of one run.

use crate::experiment::Experiment;
use crate::report::{aligned, thin_footnote, PointReport, SimSpeed};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use workload::{SamplesBeyond, StatsSummary, MIN_SAMPLES_BEYOND};

/// One point run with one seed, reduced to what a seed sweep reports.
#[derive(Clone, Debug)]
pub struct SeedRun {
    pub point: PointReport,
    /// Whether it met the experiment's SLA (None: the experiment has none).
    pub sla_met: Option<bool>,
    pub commands: u64,
}

/// Minimum, maximum, mean and sample standard deviation of one figure across seeds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Spread {
    pub min: f64,
    pub max: f64,
    pub mean: f64,
    pub sd: f64,
}

impl Spread {
    /// Of `values` (no values: all zero; one: sd 0).
    pub fn of(values: impl IntoIterator<Item = f64>) -> Self {
        let v: Vec<f64> = values.into_iter().collect();
        if v.is_empty() {
            return Self::default();
        }
        let n = v.len() as f64;
        let mean = v.iter().sum::<f64>() / n;
        let sd = if v.len() > 1 {
            (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
        } else {
            0.0
        };
        let round = |x: f64| (x * 1000.0).round() / 1000.0;
        Self {
            min: v.iter().copied().fold(f64::INFINITY, f64::min),
            max: v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            mean: round(mean),
            sd: round(sd),
        }
    }

    /// "min–max" with `decimals`, or one number when every seed gave the same.
    fn range(&self, decimals: usize) -> String {
        let (a, b) = (
            format!("{:.*}", decimals, self.min),
            format!("{:.*}", decimals, self.max),
        );
        if a == b {
            a
        } else {
            format!("{a}–{b}")
        }
    }
}

/// The spread of a latency summary's figures, in ms (keys as in a report's `lat_ms`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct LatencySpread {
    pub min: Spread,
    pub mean: Spread,
    pub p50: Spread,
    pub p90: Spread,
    pub p99: Spread,
    pub p999: Spread,
    pub p9999: Spread,
    pub max: Spread,
}

/// One group (all, a class, a job) of one point across the seeds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct GroupSpread {
    pub ios: Spread,
    pub iops: Spread,
    pub data_iops: Spread,
    pub mib_s: Spread,
    pub lat_ms: LatencySpread,
    /// The fewest samples beyond each percentile in any seed's run.
    pub samples_beyond: SamplesBeyond,
    pub limit_missed: Spread,
    pub completed_unavailable: Spread,
    pub aborted: Spread,
}

impl GroupSpread {
    /// Of one group's summaries, one per seed.
    fn of(runs: &[&StatsSummary]) -> Self {
        let s = |f: fn(&StatsSummary) -> f64| Spread::of(runs.iter().map(|r| f(r)));
        Self {
            ios: s(|r| r.ios as f64),
            iops: s(|r| r.iops),
            data_iops: s(|r| r.data_iops),
            mib_s: s(|r| r.mib_s),
            lat_ms: LatencySpread {
                min: s(|r| r.lat_ms.min),
                mean: s(|r| r.lat_ms.mean),
                p50: s(|r| r.lat_ms.p50),
                p90: s(|r| r.lat_ms.p90),
                p99: s(|r| r.lat_ms.p99),
                p999: s(|r| r.lat_ms.p999),
                p9999: s(|r| r.lat_ms.p9999),
                max: s(|r| r.lat_ms.max),
            },
            samples_beyond: runs
                .iter()
                .map(|r| r.samples_beyond)
                .reduce(SamplesBeyond::min)
                .unwrap_or_default(),
            limit_missed: s(|r| r.limit_missed as f64),
            completed_unavailable: s(|r| r.completed_unavailable as f64),
            aborted: s(|r| r.aborted as f64),
        }
    }

    fn percentiles(&self) -> [Spread; 5] {
        let l = &self.lat_ms;
        [l.p50, l.p90, l.p99, l.p999, l.p9999]
    }
}

/// One point across the seeds.
#[derive(Clone, Debug, Serialize)]
pub struct PointSpread {
    pub variant: String,
    pub qd: u32,
    /// Groups as a point's table rows name them: "all", classes, "job:NAME".
    pub groups: BTreeMap<String, GroupSpread>,
    /// Seeds whose run met the experiment's SLA.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sla_met: Option<usize>,
}

/// A whole seed sweep (`stint sim --seeds N --json`).
#[derive(Clone, Debug, Serialize)]
pub struct SeedReport {
    pub experiment: String,
    pub seeds: Vec<u64>,
    pub points: Vec<PointSpread>,
    pub sim: SimSpeed,
    /// Row order of the table: each point's groups as its single-seed table orders them.
    #[serde(skip)]
    order: Vec<Vec<String>>,
}

impl SeedReport {
    /// `runs` are seed-major: every point of the first seed, then of the next.
    pub fn new(exp: &Experiment, seeds: &[u64], runs: &[SeedRun], sim: SimSpeed) -> Self {
        let per_seed = runs.len() / seeds.len().max(1);
        let mut points = Vec::with_capacity(per_seed);
        let mut order = Vec::with_capacity(per_seed);
        for i in 0..per_seed {
            let of_point: Vec<&SeedRun> = runs.iter().skip(i).step_by(per_seed).collect();
            let Some(first) = of_point.first() else {
                continue;
            };
            // Every group any seed saw, in the order the first seed's table prints them; a
            // group a seed did not see counts as empty in that seed.
            let mut names: Vec<String> = first.point.groups().into_iter().map(|g| g.0).collect();
            for r in &of_point {
                for (name, _) in r.point.groups() {
                    if !names.contains(&name) {
                        names.push(name);
                    }
                }
            }
            let empty = StatsSummary::default();
            let groups = names
                .iter()
                .map(|name| {
                    let summaries: Vec<&StatsSummary> = of_point
                        .iter()
                        .map(|r| {
                            r.point
                                .groups()
                                .into_iter()
                                .find(|(n, _)| n == name)
                                .map_or(&empty, |(_, s)| s)
                        })
                        .collect();
                    (name.clone(), GroupSpread::of(&summaries))
                })
                .collect();
            points.push(PointSpread {
                variant: first.point.variant.clone(),
                qd: first.point.qd,
                groups,
                sla_met: exp
                    .sla
                    .as_ref()
                    .map(|_| of_point.iter().filter(|r| r.sla_met == Some(true)).count()),
            });
            order.push(names);
        }
        Self {
            experiment: exp.id.clone(),
            seeds: seeds.to_vec(),
            points,
            sim,
            order,
        }
    }

    /// The JSON object, one line.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }

    /// An aligned table: per point and group, min–max across the seeds of IOPS, MiB/s, the
    /// mean latency and each percentile (and how many seeds met the SLA).
    pub fn table(&self, exp: &Experiment) -> String {
        let mut header: Vec<String> = [
            "variant", "qd", "class", "ios", "IOPS", "MiB/s", "mean ms", "p50", "p90", "p99",
            "p99.9", "p99.99", "missed",
        ]
        .map(str::to_owned)
        .to_vec();
        if exp.sla.is_some() {
            header.push("SLA met".to_owned());
        }
        let mut rows = vec![header];
        let mut thin = false;
        for (p, names) in self.points.iter().zip(&self.order) {
            for name in names {
                let Some(g) = p.groups.get(name) else {
                    continue;
                };
                let mut row = vec![
                    p.variant.clone(),
                    p.qd.to_string(),
                    name.clone(),
                    g.ios.range(0),
                    g.iops.range(1),
                    g.mib_s.range(1),
                    g.lat_ms.mean.range(2),
                ];
                for (spread, beyond) in g.percentiles().iter().zip(g.samples_beyond.counts()) {
                    thin |= beyond < MIN_SAMPLES_BEYOND;
                    row.push(if beyond < MIN_SAMPLES_BEYOND {
                        "–".to_owned()
                    } else {
                        spread.range(2)
                    });
                }
                row.push(g.limit_missed.range(0));
                if let Some(met) = p.sla_met.filter(|_| name == "all") {
                    row.push(format!("{met}/{}", self.seeds.len()));
                }
                rows.push(row);
            }
        }
        let (first, last) = (
            self.seeds.first().copied().unwrap_or(0),
            self.seeds.last().copied().unwrap_or(0),
        );
        let mut out = format!("{} — {}\n", exp.id, exp.title);
        let _ = writeln!(
            out,
            "{} seeds ({first}–{last}): min–max of each figure across them (mean and sd in --json)",
            self.seeds.len()
        );
        aligned(&mut out, &rows, 3);
        if thin {
            let _ = writeln!(out, "{}", thin_footnote("in its row in some seed's run"));
        }
        if let Some(sla) = &exp.sla {
            let _ = writeln!(
                out,
                "SLA met: seeds whose run met {} at that point",
                sla.describe()
            );
        }
        let _ = writeln!(
            out,
            "\nsimulated {} commands in {:.2} s ({:.0} commands/s)",
            self.sim.commands, self.sim.wall_s, self.sim.commands_per_s
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_of_values() {
        let s = Spread::of([1.0, 2.0, 3.0, 6.0]);
        assert_eq!((s.min, s.max, s.mean), (1.0, 6.0, 3.0));
        // Sample standard deviation: sqrt((4 + 1 + 0 + 9) / 3).
        assert!((s.sd - (14.0f64 / 3.0).sqrt()).abs() < 1e-3, "{s:?}");
        assert_eq!(s.range(1), "1.0–6.0");
        let one = Spread::of([2.5]);
        assert_eq!((one.sd, one.range(1)), (0.0, "2.5".to_owned()));
        assert_eq!(Spread::of([]), Spread::default());
    }
}
