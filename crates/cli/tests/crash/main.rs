//! Durability proven by crashing (issue 11, docs/durability.md). In each cache mode, writers on
//! four sessions write stamped blocks to a file LUN; at a random moment the server gets
//! SIGKILL; it restarts on the file and every block is read back and checked against what was
//! acknowledged durable. SIGKILL keeps the page cache, so the same is done under simulated
//! power loss: the server runs on a [`power_loss::PowerLossStore`] and restarts on its stable
//! image. Then, to show the check can fail, each mode runs on a store that skips the step its
//! durability rests on, and must lose blocks.
//!
//! STINT_CRASH_SEED replays a run's schedule (the seed is printed); STINT_CRASH_KILLS sets the
//! kills per mode and crash kind (default 50). A plain binary (harness = false): re-executed
//! with `harness::ENV` set, it is the power-loss runs' server instead.

#[path = "../common/cdb.rs"]
mod cdb;
mod harness;
mod load;
mod model;
mod power_loss;
mod server;
#[path = "../../src/bench/stamp.rs"]
mod stamp;

use load::{Mode, BLOCK, BLOCKS};
use model::{Model, Tally};
use power_loss::Weaken;
use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use server::Server;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Kills of each weakened store: it loses blocks at the first power loss already.
const NEGATIVE_KILLS: u32 = 10;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Crash {
    Kill,
    PowerLoss,
}

impl Crash {
    fn name(self) -> &'static str {
        match self {
            Crash::Kill => "SIGKILL",
            Crash::PowerLoss => "power loss",
        }
    }
}

struct Run {
    mode: Mode,
    crash: Crash,
    weaken: Weaken,
    kills: u32,
    acked_writes: u64,
    tally: Tally,
    elapsed: Duration,
}

/// `kills` crashes of one mode: write, crash, restart, check, and again.
fn run(
    mode: Mode,
    crash: Crash,
    weaken: Weaken,
    kills: u32,
    seed: u64,
    runtime: &tokio::runtime::Runtime,
) -> Result<Run, String> {
    let started = Instant::now();
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let file = dir.path().join("lun.img");
    let stable = dir.path().join("lun.img.stable");
    let size = BLOCKS * BLOCK as u64;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let start = |rng: &mut Xoshiro256PlusPlus| match crash {
        Crash::Kill => Server::stint(&file, size, BLOCK as u32, mode.write_cache()),
        Crash::PowerLoss => Server::harness(&harness::Spec {
            file: file.clone(),
            stable: stable.clone(),
            size,
            block_size: BLOCK as u32,
            write_cache: mode.write_cache(),
            weaken,
            writeback_seed: rng.next_u64(),
        }),
    };
    let model = Arc::new(Mutex::new(Model::new(BLOCKS)));
    let mut tally = Tally::default();
    let mut server = start(&mut rng);
    for kill in 0..kills {
        let after = Duration::from_millis(5 + rng.next_u64() % 116);
        let url = server.url.clone();
        let writers =
            load::write_until_killed(&url, mode, &model, rng.next_u64(), after, || server.kill());
        runtime
            .block_on(writers)
            .map_err(|e| format!("kill {kill}: {e}"))?;
        if crash == Crash::PowerLoss {
            // Power is back: the disk holds the stable image, nothing else.
            std::fs::rename(&stable, &file).map_err(|e| e.to_string())?;
        }
        server = start(&mut rng);
        runtime
            .block_on(load::read_back(&server.url, &model, &mut tally))
            .map_err(|e| format!("after kill {kill}: {e}"))?;
    }
    let acked_writes = model.lock().unwrap().acked_writes;
    Ok(Run {
        mode,
        crash,
        weaken,
        kills,
        acked_writes,
        tally,
        elapsed: started.elapsed(),
    })
}

/// What must hold of a run; the failures.
fn judge(r: &Run) -> Vec<String> {
    let t = &r.tally;
    let mut failures = Vec::new();
    let mut fail =
        |what: &str| failures.push(format!("{}, {}: {what}", r.mode.name(), r.crash.name()));
    if r.weaken != Weaken::None {
        if t.lost == 0 {
            fail("a store without its durability step lost nothing: the check cannot fail");
        }
        return failures;
    }
    if t.lost > 0 || t.torn > 0 {
        fail(&format!(
            "{} durable blocks lost, {} torn: {:#?}",
            t.lost, t.torn, t.problems
        ));
    }
    if t.durable_fresh == 0 {
        fail("no block made durable since a crash was checked");
    }
    if t.in_flight_landed == 0 {
        fail("no kill came while writes were in flight");
    }
    match r.crash {
        // The page cache survives SIGKILL: no acknowledged write may be missing.
        Crash::Kill if t.rolled_back > 0 => fail(&format!(
            "{} acknowledged blocks rolled back by SIGKILL",
            t.rolled_back
        )),
        // Power loss takes what no flush covered: if nothing went, nothing was simulated.
        Crash::PowerLoss if r.mode.write_cache() && t.rolled_back == 0 => {
            fail("power loss took no unflushed write")
        }
        _ => {}
    }
    failures
}

fn main() {
    if std::env::var_os(harness::ENV).is_some() {
        harness::serve();
        return;
    }
    // cargo passes test filters and libtest flags: run unless filtered out.
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        println!("crash: test");
        return;
    }
    let filters: Vec<&String> = args
        .iter()
        .filter(|a| !a.starts_with('-') && a.parse::<u64>().is_err())
        .collect();
    if !filters.is_empty() && !filters.iter().any(|f| "crash".contains(f.as_str())) {
        println!("crash: filtered out");
        return;
    }
    let seed = std::env::var("STINT_CRASH_SEED")
        .ok()
        .map(|s| s.parse().expect("STINT_CRASH_SEED: a number"))
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    let kills: u32 = std::env::var("STINT_CRASH_KILLS")
        .ok()
        .map(|s| s.parse().expect("STINT_CRASH_KILLS: a number"))
        .unwrap_or(50);
    println!("crash test, seed {seed} (replay: STINT_CRASH_SEED={seed} cargo test -p stint --test crash)");

    model::self_check();
    let scratch = tempfile::tempdir().expect("a temporary directory");
    power_loss::self_check(scratch.path());

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let mut seeds = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut plan = Vec::new();
    for mode in [Mode::Sync, Mode::Fua, Mode::WriteThrough] {
        plan.push((mode, Crash::Kill, Weaken::None, kills));
        plan.push((mode, Crash::PowerLoss, Weaken::None, kills));
    }
    plan.push((Mode::Sync, Crash::PowerLoss, Weaken::Flush, NEGATIVE_KILLS));
    plan.push((Mode::Fua, Crash::PowerLoss, Weaken::Durable, NEGATIVE_KILLS));
    // The write cache off makes every write a durable one (SBC-4 §4.15).
    plan.push((
        Mode::WriteThrough,
        Crash::PowerLoss,
        Weaken::Durable,
        NEGATIVE_KILLS,
    ));

    let (mut failures, mut failed_runs) = (Vec::new(), 0);
    let runs = plan.len();
    println!(
        "| cache mode | crash | store | kills | writes acknowledged | durable-acknowledged blocks checked | of them written since the crash before | lost | torn | rolled back (acknowledged, not durable) | unacknowledged writes found landed | time |"
    );
    println!("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (mode, crash, weaken, kills) in plan {
        match run(mode, crash, weaken, kills, seeds.next_u64(), &runtime) {
            Ok(r) => {
                let store = match weaken {
                    Weaken::None => "as shipped".to_string(),
                    w => format!("without {} durability", w.name()),
                };
                println!(
                    "| {} | {} | {store} | {} | {} | {} | {} | {} | {} | {} | {} | {:.1} s |",
                    r.mode.name(),
                    r.crash.name(),
                    r.kills,
                    r.acked_writes,
                    r.tally.durable_checked,
                    r.tally.durable_fresh,
                    r.tally.lost,
                    r.tally.torn,
                    r.tally.rolled_back,
                    r.tally.in_flight_landed,
                    r.elapsed.as_secs_f64()
                );
                let wrong = judge(&r);
                failed_runs += usize::from(!wrong.is_empty());
                failures.extend(wrong);
            }
            Err(e) => {
                failed_runs += 1;
                failures.push(format!("{}, {}: {e}", mode.name(), crash.name()));
            }
        }
    }
    for f in &failures {
        eprintln!("crash test FAILED (seed {seed}): {f}");
    }
    println!("crash: {} passed, {failed_runs} failed", runs - failed_runs);
    if failed_runs > 0 {
        std::process::exit(1);
    }
}
