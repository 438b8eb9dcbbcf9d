//! `stint sim` as a user runs it: one JSON object on stdout with --json, a table otherwise,
//! SVG figures with --plot, and clear errors for bad arguments and files.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn experiment(id: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../experiments/{id}.toml"))
}

fn stint(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stint"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn json_is_exactly_one_object() {
    let b1 = experiment("b1");
    let out = stint(&[
        "sim",
        b1.to_str().unwrap(),
        "--json",
        "--ios",
        "300",
        "--seed",
        "3",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let mut stream = serde_json::Deserializer::from_str(&stdout).into_iter::<serde_json::Value>();
    let first = stream.next().unwrap().unwrap();
    assert!(
        stream.next().is_none(),
        "more than one JSON value: {stdout}"
    );
    assert_eq!(stdout.trim_end().lines().count(), 1);
    assert_eq!(first["experiment"], "b1");
    assert_eq!(first["seed"], 3);
    assert_eq!(first["points"].as_array().unwrap().len(), 7);
    assert_eq!(first["points"][6]["qd"], 32);
    assert_eq!(first["points"][6]["total"]["ios"], 300);
    assert!(first["sim"]["commands"].as_u64().unwrap() > 7 * 300);
}

#[test]
fn table_and_plots() {
    let dir = std::env::temp_dir().join(format!("stint-sim-plots-{}", std::process::id()));
    let c2 = experiment("c2");
    let out = stint(&[
        "sim",
        c2.to_str().unwrap(),
        "--ios",
        "200",
        "--plot",
        dir.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("variant") && l.contains("p99.99")),
        "{stdout}"
    );
    assert!(stdout.contains("wrr-128-1"));
    for fig in ["iops", "p99", "cdf"] {
        let svg = std::fs::read_to_string(dir.join(format!("c2-{fig}.svg"))).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("wrr-16-1"), "{fig}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--seeds N` runs N seeds from `--seed` on: one JSON object with the spread of every figure,
/// or a table of min–max per point and class.
#[test]
fn a_seed_sweep() {
    let b1 = experiment("b1");
    let b1 = b1.to_str().unwrap();
    let common = ["sim", b1, "--ios", "300", "--qd", "1,32", "--seed", "4"];
    let out = stint(&[&common[..], &["--seeds", "3", "--json"]].concat());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["seeds"], serde_json::json!([4, 5, 6]));
    let iops = &v["points"][1]["groups"]["all"]["iops"];
    let (min, max) = (iops["min"].as_f64().unwrap(), iops["max"].as_f64().unwrap());
    assert!(min < max && max < 300.0, "{iops}");
    assert_eq!(v["points"][1]["qd"], 32);
    assert_eq!(v["points"][1]["groups"]["all"]["samples_beyond"]["p99"], 3);
    let out = stint(&[&common[..], &["--seeds", "3"]].concat());
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(table.contains("3 seeds (4–6): min–max"), "{table}");
    assert!(table.contains(&format!("{min:.1}–{max:.1}")), "{table}");
    assert!(table.contains("–: fewer than 10 samples beyond"), "{table}");
    for bad in [
        &["--seeds", "1"][..],
        &["--seeds", "2", "--plot", "out"],
        &["--seeds", "2", "--seed", "18446744073709551615"],
    ] {
        let out = stint(&[&common[..6], bad].concat());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && stderr.contains("--seed"),
            "{bad:?}: {stderr}"
        );
    }
}

#[test]
fn errors_name_the_problem() {
    let b1 = experiment("b1");
    let b1 = b1.to_str().unwrap();
    let out = stint(&["sim", b1, "--ios", "0"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--ios"));
    let out = stint(&["sim", b1, "--ios", "5", "--runtime", "1"]);
    assert!(!out.status.success());
    let out = stint(&["sim", "/nonexistent/x.toml"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/x.toml"));
    let bad = std::env::temp_dir().join(format!("stint-sim-bad-{}.toml", std::process::id()));
    std::fs::write(
        &bad,
        "id = \"x\"\nqd = [0]\n[drive]\nmodel = \"instant\"\n[[job]]\nname = \"j\"\n",
    )
    .unwrap();
    let out = stint(&["sim", bad.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("qd: 0 is outside"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"));
    std::fs::remove_file(&bad).unwrap();
}
