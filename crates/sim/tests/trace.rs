//! Trace replay (`trace` in a `[[job]]`): a replay issues each of the trace's reads and writes
//! once, the shipped traces (one workload as a fio iolog and as an MSR CSV) replay alike, an
//! open replay takes the trace's time, and a bad line is refused with its number.

use sim::{Experiment, Report};
use std::path::{Path, PathBuf};

fn traces() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments/traces")
}

/// One job replaying `trace` (in experiments/traces/) on the HDD model at QD 8.
fn replay(trace: &str, format: &str, extra: &str) -> String {
    format!(
        "id = \"t\"\nqd = [8]\nios = 1000000\nramp_ios = 0\n[drive]\nmodel = \"hdd\"\n\
         [[job]]\nname = \"replay\"\ntrace = \"{trace}\"\ntrace_format = \"{format}\"\n{extra}\n"
    )
}

fn run(text: &str) -> Report {
    let exp = Experiment::parse_in(text, &traces()).unwrap_or_else(|e| panic!("{e}"));
    sim::sweep::run(&exp, 1, 0, &|| {}).unwrap()
}

/// Lines of the shipped trace that are reads or writes.
fn io_lines(name: &str) -> u64 {
    let text = std::fs::read_to_string(traces().join(name)).unwrap();
    let io = |l: &&str| {
        [" read ", " write ", ",Read,", ",Write,"]
            .iter()
            .any(|k| l.contains(k))
    };
    text.lines().filter(io).count() as u64
}

#[test]
fn a_replay_issues_every_io_of_the_trace_once() {
    let n = io_lines("stream-checkpoint.iolog");
    assert!(n > 2000, "{n}");
    let report = run(&replay("stream-checkpoint.iolog", "iolog", ""));
    let point = &report.points[0];
    assert_eq!(point.total.ios, n);
    assert_eq!(report.results[0].1.commands, n);
}

#[test]
fn the_shipped_iolog_and_csv_replay_alike() {
    assert_eq!(
        io_lines("stream-checkpoint.iolog"),
        io_lines("stream-checkpoint.csv")
    );
    for timing in ["closed", "open"] {
        let extra = format!("trace_timing = \"{timing}\"");
        let a = run(&replay("stream-checkpoint.iolog", "iolog", &extra));
        let b = run(&replay("stream-checkpoint.csv", "msr", &extra));
        assert_eq!(
            serde_json::to_value(&a.points).unwrap(),
            serde_json::to_value(&b.points).unwrap(),
            "{timing}"
        );
    }
}

#[test]
fn an_open_replay_takes_the_traces_time_and_speed_scales_it() {
    // The last I/O of the shipped trace is due 8 s after the first; the drive keeps up, so
    // the replay lasts about that long (less than a second more), half that at speed 2.
    let seconds = |extra: &str| {
        let report = run(&replay("stream-checkpoint.iolog", "iolog", extra));
        report.results[0].1.interval as f64 / 1e9
    };
    let open = seconds("trace_timing = \"open\"");
    assert!((7.9..9.0).contains(&open), "{open}");
    let fast = seconds("trace_timing = \"open\"\ntrace_speed = 2");
    assert!((3.9..5.0).contains(&fast), "{fast}");
    let closed = seconds("");
    assert!(closed < open, "{closed} {open}");
}

#[test]
fn a_bad_line_is_refused_with_its_number() {
    let dir = std::env::temp_dir().join(format!("stint-trace-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("bad.csv"),
        "1,h,0,Read,0,4096,0\n2,h,0,Read,4096,4096,0\n3,h,0,Trim,0,4096,0\n",
    )
    .unwrap();
    let text = replay("bad.csv", "msr", "");
    let e = Experiment::parse_in(&text, &dir).unwrap_err().to_string();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(e.starts_with("job \"replay\".trace: "), "{e}");
    assert!(e.contains("bad.csv:3: type \"Trim\""), "{e}");
    let missing = Experiment::parse_in(&replay("none.csv", "msr", ""), &traces())
        .unwrap_err()
        .to_string();
    assert!(missing.contains("none.csv"), "{missing}");
}

#[test]
fn an_erasure_experiment_refuses_a_trace() {
    let text = replay(
        "stream-checkpoint.iolog",
        "iolog",
        "[erasure]\ndata = 4\nparity = 2",
    );
    let e = Experiment::parse_in(&text, &traces())
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("job \"replay\".trace: "), "{e}");
}
