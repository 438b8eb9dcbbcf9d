//! Durability proven by crashing (issue 11, docs/durability.md). In each cache mode, writers on
//! four sessions write stamped blocks to a file LUN; at a random moment the server gets
//! SIGKILL; it restarts on the file and every block is read back and checked against what was
//! acknowledged durable. SIGKILL keeps the page cache, so the same is done under simulated
//! power loss: the server runs on a [`power_loss::PowerLossStore`] and restarts on its stable
//! image. Then, to show the check can fail, each mode runs on a store that skips the step its
//! durability rests on, and must lose blocks.
//!
//! `crash_rbd` ([`rbd`]) does the SIGKILL runs over an RBD image of a real cluster: an ignored
//! test, run with --ignored or --include-ignored and STINT_CEPH_CONF.
//!
//! STINT_CRASH_SEED replays a run's schedule (the seed is printed); STINT_CRASH_KILLS sets the
//! kills per mode and crash kind (default 50), STINT_CRASH_RBD_KILLS those of each RBD run
//! (default 3). A plain binary (harness = false): re-executed with `harness::ENV` set, it is
//! the power-loss runs' server instead.

#[path = "../common/cdb.rs"]
mod cdb;
mod harness;
mod load;
mod model;
mod power_loss;
mod rbd;
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

/// What a run's crashes and checks found.
pub struct Rounds {
    pub acked_writes: u64,
    pub tally: Tally,
    /// How long each restart took to serve again.
    pub restarts: Vec<Duration>,
}

/// `kills` rounds of one mode on `server`: write from every session, SIGKILL it at a random
/// moment `window` milliseconds in, `after_kill`, restart it with `start`, read every block
/// back and check it.
#[allow(clippy::too_many_arguments)]
pub fn rounds(
    mode: Mode,
    kills: u32,
    window: std::ops::Range<u64>,
    rng: &mut Xoshiro256PlusPlus,
    runtime: &tokio::runtime::Runtime,
    mut server: Server,
    mut start: impl FnMut(&mut Xoshiro256PlusPlus) -> Server,
    mut after_kill: impl FnMut() -> Result<(), String>,
) -> Result<(Rounds, Server), String> {
    let model = Arc::new(Mutex::new(Model::new(BLOCKS)));
    let mut tally = Tally::default();
    let mut restarts = Vec::new();
    for kill in 0..kills {
        let after =
            Duration::from_millis(window.start + rng.next_u64() % (window.end - window.start));
        let url = server.url.clone();
        let writers =
            load::write_until_killed(&url, mode, &model, rng.next_u64(), after, || server.kill());
        runtime
            .block_on(writers)
            .map_err(|e| format!("kill {kill}: {e}"))?;
        after_kill()?;
        let restart = Instant::now();
        server = start(rng);
        restarts.push(restart.elapsed());
        runtime
            .block_on(load::read_back(&server.url, &model, &mut tally))
            .map_err(|e| format!("after kill {kill}: {e}"))?;
    }
    let acked_writes = model.lock().unwrap().acked_writes;
    let rounds = Rounds {
        acked_writes,
        tally,
        restarts,
    };
    Ok((rounds, server))
}

/// `kills` crashes of one mode on a file LUN: write, crash, restart, check, and again.
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
    let first = start(&mut rng);
    let after_kill = || {
        if crash == Crash::PowerLoss {
            // Power is back: the disk holds the stable image, nothing else.
            std::fs::rename(&stable, &file).map_err(|e| e.to_string())?;
        }
        Ok(())
    };
    let (r, _server) = rounds(
        mode,
        kills,
        5..121,
        &mut rng,
        runtime,
        first,
        start,
        after_kill,
    )?;
    Ok(Run {
        mode,
        crash,
        weaken,
        kills,
        acked_writes: r.acked_writes,
        tally: r.tally,
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
    for f in t.durability_failures() {
        fail(&f);
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
    // cargo passes test filters and libtest flags: run what they select. `crash_rbd` is an
    // ignored test, as the ones of tests/rbd.rs: it needs a cluster, so it runs only with
    // --ignored or --include-ignored (test.sh's Ceph stage), and a plain run says so.
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |f: &str| args.iter().any(|a| a == f);
    let (ignored_only, include_ignored) = (flag("--ignored"), flag("--include-ignored"));
    if flag("--list") {
        if !ignored_only {
            println!("crash: test");
        }
        println!("crash_rbd: test");
        return;
    }
    let filters: Vec<&String> = args
        .iter()
        .filter(|a| !a.starts_with('-') && a.parse::<u64>().is_err())
        .collect();
    let selected =
        |name: &str| filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str()));
    let seed = std::env::var("STINT_CRASH_SEED")
        .ok()
        .map(|s| s.parse().expect("STINT_CRASH_SEED: a number"))
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    let (mut passed, mut failed, mut ignored) = (0, 0, 0);
    if selected("crash") && !ignored_only {
        println!(
            "crash test, seed {seed} (replay: STINT_CRASH_SEED={seed} cargo test -p stint --test crash)"
        );
        let (p, f) = file_runs(seed);
        (passed, failed) = (passed + p, failed + f);
    } else {
        println!("crash: filtered out");
    }
    if !selected("crash_rbd") {
        println!("crash_rbd: filtered out");
    } else if ignored_only || include_ignored {
        println!(
            "crash test over RBD, seed {seed} (replay: STINT_CRASH_SEED={seed} \
             STINT_CEPH_CONF=... cargo test -p stint --test crash -- --ignored)"
        );
        let (p, f) = rbd::runs(seed);
        (passed, failed) = (passed + p, failed + f);
    } else {
        println!(
            "crash_rbd: ignored, not run (needs a Ceph cluster: STINT_CEPH_CONF and \
             --include-ignored; ./test.sh's Ceph stage runs it)"
        );
        ignored += 1;
    }
    println!("crash: {passed} passed, {failed} failed, {ignored} ignored");
    if failed > 0 {
        std::process::exit(1);
    }
}

/// The file LUN's runs, every cache mode and crash kind, and the weakened stores: how many
/// passed and failed.
fn file_runs(seed: u64) -> (usize, usize) {
    let kills: u32 = std::env::var("STINT_CRASH_KILLS")
        .ok()
        .map(|s| s.parse().expect("STINT_CRASH_KILLS: a number"))
        .unwrap_or(50);

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
    (runs - failed_runs, failed_runs)
}
