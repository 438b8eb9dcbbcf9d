//! Runs an experiment's points in parallel threads; each point is single-threaded and
//! deterministic, and results are put back in point order, so thread timing never shows.

use crate::device;
use crate::engine::PointResult;
use crate::error::SimError;
use crate::experiment::{Experiment, Point};
use crate::report::{PointReport, Report, Run, SimSpeed};
use crate::seeds::{SeedReport, SeedRun};
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
    let started = std::time::Instant::now();
    let out: Vec<(Point, PointResult)> = in_parallel(points.len(), threads, progress, |i| {
        let point = points[i];
        Ok((point, run_point(exp, point, seed)?))
    })?;
    let commands: u64 = out.iter().map(|(_, r)| r.commands).sum();
    Ok(Report {
        experiment: exp.id.clone(),
        seed,
        points: out
            .iter()
            .map(|(p, r)| PointReport::new(exp, *p, r))
            .collect(),
        run: Run::Sim(speed(commands, started)),
        verify: None,
        results: out,
    })
}

/// Runs every point once per seed (`seeds` in order), all of them in parallel as [`run`]
/// does, and keeps each run's summaries (not its histograms: a sweep of many seeds would hold
/// hundreds of them).
pub fn run_seeds(
    exp: &Experiment,
    seeds: &[u64],
    threads: usize,
    progress: &(dyn Fn() + Sync),
) -> Result<SeedReport, SimError> {
    let points = exp.points();
    let started = std::time::Instant::now();
    let runs = in_parallel(points.len() * seeds.len(), threads, progress, |i| {
        let (seed, point) = (seeds[i / points.len()], points[i % points.len()]);
        let r = run_point(exp, point, seed)?;
        Ok(SeedRun {
            point: PointReport::new(exp, point, &r),
            sla_met: exp.sla.as_ref().map(|sla| sla.met(&r)),
            commands: r.commands,
        })
    })?;
    let commands = runs.iter().map(|r| r.commands).sum();
    Ok(SeedReport::new(exp, seeds, &runs, speed(commands, started)))
}

fn speed(commands: u64, started: std::time::Instant) -> SimSpeed {
    let wall_s = started.elapsed().as_secs_f64();
    SimSpeed {
        commands,
        wall_s,
        commands_per_s: if wall_s > 0.0 {
            (commands as f64 / wall_s).round()
        } else {
            0.0
        },
    }
}

/// `task(0..tasks)` on up to `threads` threads (0: one per core), results in task order;
/// `progress` is called after each task.
fn in_parallel<T: Send>(
    tasks: usize,
    threads: usize,
    progress: &(dyn Fn() + Sync),
    task: impl Fn(usize) -> Result<T, SimError> + Sync,
) -> Result<Vec<T>, SimError> {
    let threads = match threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
    .min(tasks)
    .max(1);
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<T, SimError>>>> =
        Mutex::new((0..tasks).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= tasks {
                    break;
                }
                let r = task(i);
                if let Ok(mut all) = results.lock() {
                    if let Some(slot) = all.get_mut(i) {
                        *slot = Some(r);
                    }
                }
                progress();
            });
        }
    });
    let results = results.into_inner().map_err(|_| SimError::Panicked)?;
    results
        .into_iter()
        .map(|r| r.ok_or(SimError::Panicked)?)
        .collect()
}
