//! `stint.toml` (docs/configuration.md) as `stint serve --config` reads it: serde's
//! structure, then every check `Config::validate` makes (names, LUN numbers, sizes, drives,
//! queues, CDL pages, CHAP); each line also as a `--lun` flag. Beyond "no panic": a refusal
//! says why, and a configuration that passes has a LUN on every target.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stint::config::{Config, LunConfig};

fuzz_target!(|input: &[u8]| {
    let Ok(text) = std::str::from_utf8(input) else {
        return;
    };
    if !stint_fuzz::stays_in_tree(text) {
        return;
    }
    for line in text.lines().take(8) {
        if let Err(e) = LunConfig::parse_flag(line) {
            assert!(!e.to_string().is_empty());
        }
    }
    let Ok(config) = toml::from_str::<Config>(text) else {
        return;
    };
    match config.validate() {
        Ok(()) => assert!(config.targets.iter().all(|t| !t.luns.is_empty())),
        Err(e) => assert!(!format!("{e:#}").is_empty()),
    }
});
