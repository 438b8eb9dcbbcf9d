//! Runs an experiment's points in parallel threads; each point is single-threaded and
//! deterministic, and results are put back in point order, so thread timing never shows.

use crate::device;
use crate::engine::PointResult;
use crate::error::SimError;
use crate::experiment::{Experiment, Point};
use crate::report::{PointReport, Report, Run, SimSpeed};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Runs one point.
pub fn run_point(exp: &Experiment, point: Point, seed: u64) -> Result<PointResult, SimError> {
    let variant = exp
        .variants
        .get(point.variant)
        .ok_or_else(|| SimError::field("variant", "no such variant"))?;
    let setup = exp.setup(point, seed)?;
    device::run(variant, &setup)
}

/// Runs every point with up to `threads` threads (0: one per core); `progress` is called
/// after each point.
pub fn run(
    exp: &Experiment,
    seed: u64,
    threads: usize,
    progress: &(dyn Fn() + Sync),
) -> Result<Report, SimError> {
    let points = exp.points();
    let threads = match threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
    .min(points.len())
    .max(1);
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<PointResult, SimError>>>> =
        Mutex::new(vec![None; points.len()]);
    let started = std::time::Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(point) = points.get(i) else { break };
                let r = run_point(exp, *point, seed);
                if let Ok(mut all) = results.lock() {
                    if let Some(slot) = all.get_mut(i) {
                        *slot = Some(r);
                    }
                }
                progress();
            });
        }
    });
    let wall_s = started.elapsed().as_secs_f64();
    let results = results
        .into_inner()
        .map_err(|_| SimError::Device("a sweep thread panicked".into()))?;
    let mut out = Vec::with_capacity(points.len());
    for (point, r) in points.into_iter().zip(results) {
        let r = r.ok_or_else(|| SimError::Device("a sweep thread panicked".into()))??;
        out.push((point, r));
    }
    let commands: u64 = out.iter().map(|(_, r)| r.commands).sum();
    Ok(Report {
        experiment: exp.id.clone(),
        seed,
        points: out
            .iter()
            .map(|(p, r)| PointReport::new(exp, *p, r))
            .collect(),
        run: Run::Sim(SimSpeed {
            commands,
            wall_s,
            commands_per_s: if wall_s > 0.0 {
                (commands as f64 / wall_s).round()
            } else {
                0.0
            },
        }),
        verify: None,
        results: out,
    })
}
