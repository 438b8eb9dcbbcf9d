//! Flash and instant models.

use drive::{Drive, DriveConfig, Instant, MediaOp, Ssd, SsdProfile};

fn op(lba: u64, blocks: u32, write: bool) -> MediaOp {
    MediaOp {
        lba,
        blocks,
        write,
        fua: false,
    }
}

fn profile() -> SsdProfile {
    SsdProfile::from_toml(drive::ssd::DEFAULT_SSD_PROFILE).expect("default SSD profile")
}

#[test]
fn a_read_costs_overhead_plus_tr_plus_transfer() {
    let mut ssd = Ssd::new(&profile()).expect("ssd");
    assert_eq!(
        ssd.service_time(1_000, &op(0, 8, false)),
        5_000 + 70_000 + 585
    );
    let s = ssd.start(1_000, &op(0, 8, false));
    // 5 µs overhead + 70 µs tR + 4096 B at 7000 MB/s (585 ns).
    assert_eq!(s.done_at - 1_000, 5_000 + 70_000 + 585);
}

#[test]
fn units_work_in_parallel_and_queue_per_unit() {
    let mut ssd = Ssd::new(&profile()).expect("ssd");
    // 64 units striped by 8 sectors: LBAs 0 and 8 are on different units, 0 and 512 on the same.
    let a = ssd.start(0, &op(0, 8, false));
    let b = ssd.start(0, &op(8, 8, false));
    let c = ssd.start(0, &op(512, 8, false));
    assert!(
        b.done_at - a.done_at < 1_000,
        "parallel units only share the bus"
    );
    assert!(
        c.done_at >= a.done_at + 70_000,
        "same unit waits for the first read"
    );
    // Unit 0 is busy until 5 + 70 + 70 µs; the next op there waits for it, plus overhead.
    assert_eq!(ssd.positioning_time(0, &op(512, 8, false)), 145_000 + 5_000);
    assert_eq!(
        ssd.positioning_time(0, &op(16, 8, false)),
        5_000,
        "an idle unit"
    );
}

#[test]
fn writes_program_and_flush_waits_for_units() {
    let mut ssd = Ssd::new(&profile()).expect("ssd");
    let w = ssd.start(0, &op(0, 8, true));
    assert_eq!(w.done_at, 5_000 + 585 + 320_000);
    assert_eq!(ssd.flush(10), w.done_at);
    assert_eq!(ssd.flush(w.done_at + 5), w.done_at + 5);
}

#[test]
fn a_large_read_spreads_over_units() {
    let mut ssd = Ssd::new(&profile()).expect("ssd");
    // 1 MiB = 256 stripes over 64 units: 4 page reads per unit.
    let s = ssd.start(0, &op(0, 2048, false));
    let transfer = (1_048_576.0_f64 / 7000e6 * 1e9) as u64;
    assert_eq!(s.done_at, 5_000 + 4 * 70_000 + transfer);
    // A huge transfer length does not loop per stripe or overflow.
    let big = ssd.start(0, &op(0, u32::MAX, false));
    assert!(big.done_at > s.done_at);
}

#[test]
fn ssd_profile_errors_name_the_field() {
    let text = drive::ssd::DEFAULT_SSD_PROFILE;
    let e = SsdProfile::from_toml(&text.replace("units = 64", "units = 0")).expect_err("units");
    assert!(e.to_string().contains("`units`"), "{e}");
    let e = SsdProfile::from_toml(&text.replace("read_us", "tr_us")).expect_err("typo");
    assert!(e.to_string().contains("tr_us"), "{e}");
}

#[test]
fn instant_takes_no_time_and_configs_build() {
    let mut i = Instant;
    assert_eq!(i.start(42, &op(0, 8, false)).done_at, 42);
    assert_eq!(i.positioning_time(42, &op(0, 8, true)), 0);
    assert_eq!(i.flush(7), 7);
    for name in drive::config::DRIVE_NAMES {
        let d = DriveConfig::by_name(name).expect(name).build().expect(name);
        assert!(d.parallelism() >= 1);
    }
    let e = DriveConfig::by_name("floppy").expect_err("unknown");
    assert!(e.to_string().contains("floppy"), "{e}");
    assert_eq!(
        DriveConfig::by_name("hdd")
            .expect("hdd")
            .build()
            .expect("hdd")
            .parallelism(),
        1
    );
}

#[test]
fn a_read_queued_on_a_busy_unit_does_not_hold_the_bus() {
    let mut ssd = Ssd::new(&profile()).expect("ssd");
    // LBAs 0 and 512 share unit 0: the second read waits a whole tR for it. A read issued after
    // it to idle unit 1 must transfer as soon as its own data is ready, not after the second.
    let first = ssd.start(0, &op(0, 8, false));
    let queued = ssd.start(0, &op(512, 8, false));
    let other = ssd.start(0, &op(8, 8, false));
    assert!(queued.done_at >= first.done_at + 70_000);
    assert!(
        other.done_at < queued.done_at,
        "{other:?} waited for {queued:?}"
    );
    // It shares the interface with the first read only: one transfer (585 ns) later at most.
    assert!(
        other.done_at <= first.done_at + 585,
        "{other:?} vs {first:?}"
    );
}
