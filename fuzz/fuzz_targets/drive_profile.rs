//! Drive profiles (docs/drive-profile.md): an `hdd` or `ssd` profile file, checked and built
//! into its timing model, which then serves a few operations. Beyond "no panic" (no division
//! by zero, no overflow, no allocation sized by an unchecked field): building refuses what the
//! model cannot run with the field named (`stint` loads a profile by building it once), and a
//! model that builds finishes every operation at or after its start.
#![no_main]

use drive::{Drive, DriveConfig, MediaOp};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    let Some((&knobs, text)) = input.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(text) else {
        return;
    };
    let model = if knobs & 1 == 0 { "hdd" } else { "ssd" };
    let Ok(config) = DriveConfig::from_profile(model, text) else {
        return;
    };
    let (sectors, block) = match &config {
        DriveConfig::Hdd(p) => (p.geometry.capacity_sectors, p.geometry.sector_bytes),
        DriveConfig::Ssd(p) => (p.capacity_sectors, p.sector_bytes),
        DriveConfig::Instant => unreachable!("a profile is of an hdd or ssd"),
    };
    assert!(sectors > 0 && block > 0);
    let mut drive = match config.build() {
        Ok(drive) => drive,
        Err(e) => {
            assert!(!e.to_string().is_empty());
            return;
        }
    };
    assert!(drive.parallelism() >= 1);
    let mut now = 0;
    for (i, lba) in [
        0,
        sectors / 2,
        sectors - 1,
        u64::from(knobs) * 7919 % sectors,
    ]
    .into_iter()
    .enumerate()
    {
        let op = MediaOp {
            lba,
            blocks: u32::try_from((sectors - lba).min(256)).unwrap_or(1),
            write: i % 2 == 1,
            fua: knobs & 2 != 0,
        };
        let _ = drive.service_time(now, &op);
        let s = drive.start(now, &op);
        assert!(s.done_at >= now, "finished before it started");
        now = s.done_at;
    }
    assert!(drive.flush(now) >= now);
});
