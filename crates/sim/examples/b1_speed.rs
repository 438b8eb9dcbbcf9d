//! Simulator speed on B1 at QD 32 (issue 3, "Fast"): one point, one thread.
//! `cargo run --release -p sim --example b1_speed [ios]`

use sim::{Experiment, Point, Stop};
use std::path::Path;

fn main() -> Result<(), sim::SimError> {
    let ios = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(500_000);
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments/b1.toml");
    let mut exp = Experiment::load(&file)?;
    exp.set_stop(Stop::Ios(ios));
    let started = std::time::Instant::now();
    let r = sim::sweep::run_point(&exp, Point { variant: 0, qd: 32 }, exp.seed)?;
    let wall = started.elapsed().as_secs_f64();
    let s = r.total.summary(r.interval);
    println!(
        "b1 QD32: {} commands in {wall:.3} s = {:.0} simulated commands/s (IOPS {:.1}, p99 {:.1} ms)",
        r.commands,
        r.commands as f64 / wall,
        s.iops,
        s.lat_ms.p99
    );
    Ok(())
}
