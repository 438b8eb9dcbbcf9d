//! The crash test over an RBD LUN (issue 19; docs/durability.md, docs/rbd.md): the same
//! writers and model as the file LUN's SIGKILL runs, `stint serve` exporting an image of the
//! cluster `STINT_CEPH_CONF` names. Only SIGKILL: the data lives in the cluster, which a power
//! loss of the server's machine does not reach.
//!
//! Each cache mode runs twice: with librbd's cache off, as the test cluster's conf has it (a
//! write completes once the OSD has it, so no acknowledged write may be missing), and with
//! it on (`rbd_cache = true`, write-back), where the killed process takes the writes its cache
//! held: only the flushes stint asks librbd for (SYNCHRONIZE CACHE, FUA, WCE = 0) keep them.
//!
//! To show the check can fail, one more run has the server's write cache on while the writers
//! take every GOOD as durable: it must lose blocks.
//!
//! A restart waits for the killed server's exclusive lock: librbd breaks it, blocklisting the
//! dead client first, only once the OSD has timed out its watch (docs/rbd.md). The runs
//! therefore go side by side, each on its own image and server, so that their waits overlap.

use crate::load::{Mode, BLOCK, BLOCKS};
use crate::model::Tally;
use crate::server::Server;
use crate::{rounds, Rounds};
use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Kills per run unless STINT_CRASH_RBD_KILLS says otherwise: each restart waits about
/// osd_client_watch_timeout (10 s in tests/ceph/cluster.sh's cluster).
const KILLS: u32 = 3;

/// When the kill comes, in milliseconds after the writers start: later than on a file LUN
/// (5 to 120 ms), since a round's restart costs seconds anyway, and a write-back cache's
/// first flushes must have time to complete.
const KILL_WINDOW_MS: std::ops::Range<u64> = 50..1501;

/// The test images' object size: 64 KiB, so that some writes (up to 8 blocks of 4 KiB) span
/// two objects, two OSD operations that are not atomic together.
const OBJECT_SIZE: &str = "64K";

/// A fresh image of the LUN's size in pool rbd, removed when dropped.
struct Image {
    conf: PathBuf,
    name: String,
}

fn rbd(conf: &Path, args: &[&str]) -> Result<(), String> {
    let out = Command::new("rbd")
        .arg("-c")
        .arg(conf)
        .args(args)
        .output()
        .map_err(|e| format!("running rbd: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "rbd {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl Image {
    fn create(conf: &Path, name: String) -> Result<Image, String> {
        let spec = format!("rbd/{name}");
        let _ = rbd(conf, &["rm", "--no-progress", &spec]);
        let size = format!("{}B", BLOCKS * BLOCK as u64);
        rbd(
            conf,
            &[
                "create",
                "--size",
                &size,
                "--object-size",
                OBJECT_SIZE,
                &spec,
            ],
        )?;
        Ok(Image {
            conf: conf.into(),
            name,
        })
    }
}

impl Drop for Image {
    fn drop(&mut self) {
        // Fails while a killed server's watch lingers (after a failed run): said, not hidden.
        if let Err(e) = rbd(
            &self.conf,
            &["rm", "--no-progress", &format!("rbd/{}", self.name)],
        ) {
            eprintln!("crash_rbd: image not removed: {e}");
        }
    }
}

struct Run {
    mode: Mode,
    cache: bool,
    weakened: bool,
    kills: u32,
    rounds: Rounds,
    elapsed: Duration,
}

/// `kills` crashes of one mode on a fresh image: write, SIGKILL, restart, check, and again;
/// `cache`: with librbd's write-back cache on; `weakened`: the server's write cache on
/// whatever the mode says (below).
#[allow(clippy::too_many_arguments)]
fn run(
    cluster: &Path,
    name: String,
    cache: bool,
    weakened: bool,
    mode: Mode,
    kills: u32,
    seed: u64,
) -> Result<Run, String> {
    let started = Instant::now();
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let conf = if cache {
        // The cluster's conf, and a section of the client's own, which outranks [client]
        // (where the test cluster turns the cache off). Write-back, not pacific's default
        // write-around: acknowledged writes stay in the process until a flush or a second.
        let conf = dir.path().join("ceph.conf");
        let text = std::fs::read_to_string(cluster).map_err(|e| e.to_string())?;
        let text = format!(
            "{text}\n[client.admin]\nrbd_cache = true\nrbd_cache_policy = writeback\n\
             rbd_cache_writethrough_until_flush = false\n"
        );
        std::fs::write(&conf, text).map_err(|e| e.to_string())?;
        conf
    } else {
        cluster.to_path_buf()
    };
    let image = Image::create(cluster, name)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let start = |_: &mut Xoshiro256PlusPlus| {
        Server::stint_rbd(
            dir.path(),
            &conf,
            &image.name,
            BLOCK as u32,
            mode.write_cache() || weakened,
        )
    };
    let first = start(&mut rng);
    let (rounds, mut last) = rounds(
        mode,
        kills,
        KILL_WINDOW_MS,
        &mut rng,
        &runtime,
        first,
        start,
        || Ok(()),
    )?;
    // A clean stop releases the lock and the watch: the image can go at once.
    if !last.stop() {
        return Err("the last server did not exit cleanly on SIGTERM".into());
    }
    drop(image);
    Ok(Run {
        mode,
        cache,
        weakened,
        kills,
        rounds,
        elapsed: started.elapsed(),
    })
}

fn cache_name(cache: bool) -> &'static str {
    if cache {
        "on (write-back)"
    } else {
        "off"
    }
}

/// What must hold of a run; the failures.
fn judge(r: &Run) -> Vec<String> {
    let t: &Tally = &r.rounds.tally;
    let mut failures = Vec::new();
    let mut fail = |what: &str| {
        failures.push(format!(
            "{}, RBD, librbd cache {}{}: {what}",
            r.mode.name(),
            cache_name(r.cache),
            if r.weakened { ", weakened" } else { "" }
        ))
    };
    if r.weakened {
        if t.lost == 0 {
            fail("a server that skips WCE = 0's flush lost nothing: the check cannot fail");
        }
        return failures;
    }
    for f in t.durability_failures() {
        fail(&f);
    }
    // With librbd's write-back cache, a plain write is acknowledged as it enters the cache,
    // so one still unacknowledged at the kill never reached the OSD: there, writes taken
    // from the cache (below) show the kill came during I/O.
    if t.in_flight_landed == 0 && !(r.cache && r.mode == Mode::Sync) {
        fail("no kill came while writes were in flight");
    }
    if !r.cache && t.rolled_back > 0 {
        // Without a cache librbd completes a write once the OSD has it.
        fail(&format!(
            "{} acknowledged blocks rolled back with librbd's cache off",
            t.rolled_back
        ));
    }
    if r.cache && r.mode == Mode::Sync && t.rolled_back == 0 {
        // Plain writes between flushes: if SIGKILL took none, the cache was not on.
        fail("SIGKILL took no write from librbd's cache: was it on?");
    }
    failures
}

/// Every run over RBD: how many passed and failed. Without STINT_CEPH_CONF it fails, as
/// tests/rbd.rs does when asked to run without a cluster.
pub fn runs(seed: u64) -> (usize, usize) {
    let cluster = match std::env::var("STINT_CEPH_CONF") {
        Ok(c) if !c.is_empty() => PathBuf::from(c),
        _ => {
            eprintln!(
                "crash_rbd FAILED: STINT_CEPH_CONF is not set (tests/ceph/cluster.sh start DIR \
                 makes a cluster; ./test.sh's Ceph stage runs this)"
            );
            return (0, 1);
        }
    };
    let kills: u32 = std::env::var("STINT_CRASH_RBD_KILLS")
        .ok()
        .map(|s| s.parse().expect("STINT_CRASH_RBD_KILLS: a number"))
        .unwrap_or(KILLS);
    // Its own stream: the file runs' schedules stay as they were for a seed.
    let mut seeds = Xoshiro256PlusPlus::seed_from_u64(seed ^ 0x7262_6400);
    let mut plan = Vec::new();
    for cache in [false, true] {
        for mode in [Mode::Sync, Mode::Fua, Mode::WriteThrough] {
            plan.push((cache, false, mode, seeds.next_u64()));
        }
    }
    // The check can fail: the writers take every GOOD as durable (WCE = 0, FUA on a quarter
    // of the writes), but the server runs with its write cache on, as a stint that answered
    // WCE = 0's writes without their FUA and flush would; the cached writes a SIGKILL takes
    // from librbd must show as lost.
    plan.push((true, true, Mode::WriteThrough, seeds.next_u64()));
    let results: Vec<Result<Run, String>> = std::thread::scope(|s| {
        let cluster = &cluster;
        let handles: Vec<_> = plan
            .iter()
            .enumerate()
            .map(|(i, &(cache, weakened, mode, seed))| {
                let name = format!("stint-crash-{}-{i}", std::process::id());
                s.spawn(move || run(cluster, name, cache, weakened, mode, kills, seed))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("panicked".into())))
            .collect()
    });
    println!(
        "| cache mode | librbd cache | server | kills | writes acknowledged | durable-acknowledged blocks checked | of them written since the crash before | lost | torn | rolled back (acknowledged, not durable) | unacknowledged writes found landed | restart: mean, max | time |"
    );
    println!("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let (mut failures, mut failed) = (Vec::new(), 0);
    for (&(cache, weakened, mode, _), result) in plan.iter().zip(&results) {
        let server = if weakened {
            "WCE=0 writes cached (weakened)"
        } else {
            "as shipped"
        };
        match result {
            Ok(r) => {
                let t = &r.rounds.tally;
                let restarts = &r.rounds.restarts;
                let max = restarts.iter().max().copied().unwrap_or_default();
                let mean = restarts.iter().sum::<Duration>() / restarts.len().max(1) as u32;
                println!(
                    "| {} | {} | {server} | {} | {} | {} | {} | {} | {} | {} | {} | {:.1} s, {:.1} s | {:.1} s |",
                    r.mode.name(),
                    cache_name(r.cache),
                    r.kills,
                    r.rounds.acked_writes,
                    t.durable_checked,
                    t.durable_fresh,
                    t.lost,
                    t.torn,
                    t.rolled_back,
                    t.in_flight_landed,
                    mean.as_secs_f64(),
                    max.as_secs_f64(),
                    r.elapsed.as_secs_f64()
                );
                let wrong = judge(r);
                failed += usize::from(!wrong.is_empty());
                failures.extend(wrong);
            }
            Err(e) => {
                failed += 1;
                failures.push(format!(
                    "{}, RBD, librbd cache {}, {server}: {e}",
                    mode.name(),
                    cache_name(cache)
                ));
            }
        }
    }
    for f in &failures {
        eprintln!("crash test over RBD FAILED (seed {seed}): {f}");
    }
    (plan.len() - failed, failed)
}
