//! `stint bench` against a real `stint serve`: a quick job from flags, an experiment file on a
//! CDL hard disk agreeing with `stint sim` on the same device, and bad arguments.

mod common;
use common::cdb::{self, rw, test_unit_ready};
use common::Server;
use scsi::form;
use std::process::Command;

const EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples");
const EXPERIMENTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../experiments");

fn stint(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_stint"))
        .args(args)
        .output()
        .expect("run stint");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn json(args: &[&str]) -> serde_json::Value {
    let (ok, out, err) = stint(args);
    assert!(ok, "{args:?}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// `stint bench --json` with `flags` against a 64 MiB RAM LUN of its own.
fn bench_ram(flags: &[&str]) -> serde_json::Value {
    let server = Server::start(&["--lun", "ram:64MiB"], 1);
    let mut args = vec!["bench", "--url", &server.urls[0], "--json"];
    args.extend_from_slice(flags);
    let r = json(&args);
    assert!(server.stop());
    r
}

#[test]
fn a_quick_job_from_flags_measures_a_ram_lun() {
    let r = bench_ram(&[
        "--rw",
        "randrw",
        "--bs",
        "4k",
        "--iodepth",
        "8",
        "--numjobs",
        "2",
        "--runtime",
        "1s",
    ]);
    let total = &r["points"][0]["total"];
    assert!(total["ios"].as_u64().unwrap() > 500, "{total}");
    assert!(total["iops"].as_f64().unwrap() > 0.0);
    // A RAM LUN fails nothing: every command brought its data.
    assert_eq!(total["data_ios"], total["ios"], "{total}");
    // The flag job's two instances are reported together as job "job".
    assert_eq!(r["points"][0]["jobs"]["job"]["ios"], total["ios"], "{r}");
    assert!(r["bench"]["commands"].as_u64().unwrap() >= total["ios"].as_u64().unwrap());
    assert!(r["points"][0].get("errors").is_none(), "{r}");
    assert!(r.get("sim").is_none());
}

/// rate_iops caps each job instance: two sessions at 100 commands/s with room for 4 in flight
/// each reach no more than 200 IOPS against a RAM LUN that could do a hundred times that.
#[test]
fn rate_iops_caps_each_instance() {
    let r = bench_ram(&[
        "--iodepth",
        "4",
        "--numjobs",
        "2",
        "--rate-iops",
        "100",
        "--ios",
        "200",
    ]);
    let total = &r["points"][0]["total"];
    let iops = total["iops"].as_f64().unwrap();
    assert_eq!(total["ios"].as_u64(), Some(200), "{total}");
    // A slow machine may fall behind the schedule, never get ahead of it.
    assert!(iops <= 200.0 * 1.02 && iops > 50.0, "{total}");
}

/// The real-time run and the simulator run the same commands on the same device code: per
/// class IOPS within 5 % and mean latency within 10 %, the point's p99 within 10 % (they differ
/// by the real host's round trips and the wall clock's jitter). bench/two-clocks.sh checks p99
/// per class over 1,500 I/Os per point, as the issue asks; here a class has too few commands
/// for its p99 to be more than its maximum.
///
/// A loaded machine (builds beside the test) delays the real-time run's threads by tens of
/// milliseconds now and then, which 600 I/Os cannot average out: up to three runs are made,
/// and one that agrees passes. A device that drifts from the simulator fails all three.
#[test]
fn bench_on_a_cdl_disk_agrees_with_sim_on_its_configuration() {
    let config = format!("{EXAMPLES}/hdd-cdl.toml");
    let b2 = format!("{EXPERIMENTS}/b2.toml");
    let common = [
        "--qd",
        "8",
        "--ios",
        "600",
        "--variant",
        "cdl-aware",
        "--seed",
        "3",
        "--json",
    ];
    let mut sim = vec!["sim", b2.as_str(), "--device", config.as_str()];
    sim.extend(common);
    let s = json(&sim);
    let mut disagreements = Vec::new();
    for _ in 0..3 {
        let server = Server::start(&["--config", &config], 1);
        let mut bench = vec!["bench", b2.as_str(), "--url", server.urls[0].as_str()];
        bench.extend(common);
        let b = json(&bench);
        assert!(server.stop());
        match agreement(&b, &s) {
            Ok(()) => return,
            Err(e) => {
                eprintln!("bench and sim disagree: {e}");
                disagreements.push(e);
            }
        }
    }
    panic!("bench and sim disagree in three runs: {disagreements:#?}");
}

/// Whether a bench report agrees with the simulator's on the same point (see above).
fn agreement(b: &serde_json::Value, s: &serde_json::Value) -> Result<(), String> {
    let ratio =
        |x: &serde_json::Value, y: &serde_json::Value| x.as_f64().unwrap() / y.as_f64().unwrap();
    let (bt, st) = (&b["points"][0]["total"], &s["points"][0]["total"]);
    let p99 = ratio(&bt["lat_ms"]["p99"], &st["lat_ms"]["p99"]);
    if !(0.9..=1.1).contains(&p99) {
        return Err(format!("p99 {bt} vs {st}"));
    }
    let classes = b["points"][0]["classes"].as_object().unwrap();
    assert_eq!(classes.len(), 2, "{classes:?}");
    for (name, x) in classes {
        let y = &s["points"][0]["classes"][name];
        let iops = ratio(&x["iops"], &y["iops"]);
        let mean = ratio(&x["lat_ms"]["mean"], &y["lat_ms"]["mean"]);
        if !(0.95..=1.05).contains(&iops) {
            return Err(format!("{name}: IOPS {x} vs {y}"));
        }
        if !(0.9..=1.1).contains(&mean) {
            return Err(format!("{name}: mean {x} vs {y}"));
        }
    }
    Ok(())
}

/// A job replaying a trace sends each of its I/Os once, wrapped into the 64 MiB LUN, in the
/// trace's time when open: 200 reads and writes 2.5 ms apart take half a second.
#[test]
fn a_trace_replays_over_iscsi() {
    let dir = std::env::temp_dir().join(format!("stint-bench-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let trace: String = (0..200u64)
        .map(|i| {
            let kind = if i % 4 == 0 { "Write" } else { "Read" };
            // Filetime ticks of 100 ns; offsets far past the LUN's end wrap into it.
            format!(
                "{},h,0,{kind},{},4096,0\n",
                1_000_000 + i * 25_000,
                (i * 7919) << 30
            )
        })
        .collect();
    std::fs::write(dir.join("t.csv"), trace).unwrap();
    let file = |timing: &str| {
        let path = dir.join(format!("{timing}.toml"));
        std::fs::write(
            &path,
            format!(
                "id = \"tr\"\nqd = [4]\nios = 1000000\nramp_ios = 0\n[drive]\nmodel = \"instant\"\n\
                 [[job]]\nname = \"replay\"\ntrace = \"t.csv\"\ntrace_format = \"msr\"\n\
                 trace_timing = \"{timing}\"\n"
            ),
        )
        .unwrap();
        path.to_string_lossy().into_owned()
    };
    let (closed, open) = (file("closed"), file("open"));
    let server = Server::start(&["--lun", "ram:64MiB"], 1);
    let run = |path: &str| json(&["bench", path, "--url", &server.urls[0], "--json"]);
    let (c, o) = (run(&closed), run(&open));
    assert!(server.stop());
    std::fs::remove_dir_all(&dir).unwrap();
    for r in [&c, &o] {
        assert_eq!(r["points"][0]["total"]["ios"].as_u64(), Some(200), "{r}");
        assert_eq!(
            r["points"][0]["total"]["data_ios"].as_u64(),
            Some(200),
            "{r}"
        );
    }
    let wall = |r: &serde_json::Value| r["bench"]["wall_s"].as_f64().unwrap();
    assert!(wall(&o) >= 0.49, "{o}");
    assert!(wall(&c) < wall(&o), "{c} {o}");
}

#[test]
fn bad_arguments_are_named() {
    let cases: [(&[&str], &str); 5] = [
        (&["bench", "--url", "iscsi://127.0.0.1:1"], "--url"),
        (
            &[
                "bench",
                "x.toml",
                "--url",
                "iscsi://127.0.0.1:1/iqn.a:b/0",
                "--rw",
                "read",
            ],
            "cannot be used with",
        ),
        (
            &[
                "bench",
                "--url",
                "iscsi://127.0.0.1:1/iqn.a:b/0",
                "--runtime",
                "ten",
            ],
            "invalid duration",
        ),
        (
            &[
                "bench",
                "--url",
                "iscsi://127.0.0.1:1/iqn.a:b/0",
                "--runtime",
                "1s",
            ],
            "logging in to 127.0.0.1:1",
        ),
        // An erasure-coded array is a simulation of several drives: refused before logging in.
        (
            &["bench", "e1", "--url", "iscsi://127.0.0.1:1/iqn.a:b/0"],
            "has [erasure]",
        ),
    ];
    for (args, want) in cases {
        let (ok, _, err) = stint(args);
        assert!(!ok, "{args:?} succeeded");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

/// `--verify` stamps what it writes and finds a corrupted block, named by its LBA.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_finds_a_corrupted_block() {
    let server = Server::start(&["--lun", "ram:64MiB"], 1);
    let url = server.urls[0].clone();
    let dir = tempfile::tempdir().unwrap();
    let exp = |rw: &str| {
        let path = dir.path().join(format!("{rw}.toml"));
        std::fs::write(
            &path,
            format!(
                "id = \"v\"\nqd = [4]\nruntime = 1\n[drive]\nmodel = \"instant\"\n\
                 [[job]]\nname = \"j\"\nrw = \"{rw}\"\nbs = \"4k\"\nsize = \"256KiB\"\n"
            ),
        )
        .unwrap();
        path.display().to_string()
    };
    let (write, read) = (exp("write"), exp("randread"));
    let run = |file: String| {
        let url = url.clone();
        tokio::task::spawn_blocking(move || stint(&["bench", &file, "--url", &url, "--verify"]))
    };
    let (ok, out, err) = run(write).await.unwrap();
    assert!(ok, "{out}{err}");
    assert!(
        out.contains(", 0 mismatches") || !out.contains("mismatches"),
        "{out}"
    );
    // Flip one byte of block 17 behind bench's back.
    let u: iscsi::url::IscsiUrl = url.parse().unwrap();
    let opts = iscsi::initiator::LoginOptions::new("iqn.2026-11.dev.stint:test", Some(&u.target));
    let mut s = iscsi::initiator::Initiator::connect_portal(&u.portal, &opts)
        .await
        .unwrap();
    s.scsi_command(u.lun, &test_unit_ready(), &[], 0)
        .await
        .unwrap();
    let r = s
        .scsi_command(u.lun, &cdb::read(form::READ_16, rw(17, 1)), &[], 512)
        .await
        .unwrap();
    let mut block = r.data_in;
    assert_eq!(&block[..8], b"stintVfy", "bench stamped the block");
    block[300] ^= 0xFF;
    let w = s
        .scsi_command(u.lun, &cdb::write(form::WRITE_16, rw(17, 1)), &block, 0)
        .await
        .unwrap();
    assert_eq!(w.status, 0);
    s.logout().await.unwrap();
    let (ok, out, err) = run(read).await.unwrap();
    assert!(!ok, "a corrupted block passed: {out}");
    assert!(
        out.contains("LBA 17: generation") && out.contains("checksum mismatch"),
        "{out}"
    );
    assert!(err.contains("--verify found"), "{err}");
    assert!(server.stop());
}
