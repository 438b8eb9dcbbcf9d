//! Experiment files (docs/experiments.md): the TOML of `stint sim`, its variants merged over
//! the base, every table checked, and each point's jobs compiled. Beyond "no panic": a file
//! that loads has variants and queue depths, and every point sets up.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    let Ok(text) = std::str::from_utf8(input) else {
        return;
    };
    if !stint_fuzz::stays_in_tree(text) {
        return;
    }
    let Ok(experiment) = sim::Experiment::parse(text) else {
        return;
    };
    assert!(!experiment.variants.is_empty() && !experiment.qd.is_empty());
    for point in experiment.points().into_iter().take(64) {
        if let Ok(setup) = experiment.setup(point, 1) {
            assert!(!setup.jobs.is_empty());
        }
    }
});
