//! The HDD's write-back cache: watermarks, idle destage, read hits, flush, FUA, destage by
//! position against FIFO, and the age bound.

use drive::{Drive, FaultRange, Hdd, HddProfile, MediaOp, Ns, ProfileError};

const MS: Ns = 1_000_000;

fn op(lba: u64, blocks: u32, write: bool, fua: bool) -> MediaOp {
    MediaOp {
        lba,
        blocks,
        write,
        fua,
    }
}

/// The default drive with the write cache on, room for `writes` writes of 4 KiB, and no
/// idle destage unless `idle_delay_ms` is small.
fn drive(writes: u64, idle_delay_ms: f64, max_age_ms: f64) -> Hdd {
    let mut p = HddProfile::default_22tb();
    p.cache.write_cache = true;
    p.cache.write_cache_mb = (writes * 4096) as f64 / 1e6;
    p.cache.destage_idle_delay_ms = idle_delay_ms;
    p.cache.destage_max_age_ms = max_age_ms;
    Hdd::new(&p).expect("profile")
}

/// Spread-out LBAs (a multiplicative hash of `i`), 4 KiB aligned, within the first 2^35.
fn lba(i: u64) -> u64 {
    (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 29) & !7
}

/// Writes `n` 4 KiB writes back to back (each when the previous is acknowledged).
fn write_burst(hdd: &mut Hdd, from: u64, n: u64, mut now: Ns) -> Ns {
    for i in from..from + n {
        now = hdd.start(now, &op(lba(i), 8, true, false)).done_at;
    }
    now
}

#[test]
fn writes_are_absorbed_to_the_high_watermark_then_destage_is_forced_down_to_the_low_one() {
    // 100 writes of room: high watermark 75, low 50 (the shipped 0.75 and 0.5).
    let mut hdd = drive(100, 1e6, 1e7);
    let now = write_burst(&mut hdd, 0, 75, 0);
    assert_eq!(
        hdd.dirty_sectors(),
        75 * 8,
        "absorbed up to the high watermark"
    );
    // The 76th passes it: from now on a destage follows every command.
    let mut now = write_burst(&mut hdd, 75, 1, now);
    assert_eq!(hdd.dirty_sectors(), 75 * 8, "one in, one destaged");
    let mut dirty = Vec::new();
    for i in 0..40 {
        now = hdd.start(now, &op(lba(1000 + i), 8, false, false)).done_at;
        dirty.push(hdd.dirty_sectors() / 8);
    }
    let want: Vec<u64> = (0..40).map(|i| (74 - i).max(50)).collect();
    assert_eq!(
        dirty, want,
        "one destage per read, down to the low watermark"
    );
    // Below the high watermark again: writes are absorbed without destage.
    write_burst(&mut hdd, 2000, 10, now);
    assert_eq!(hdd.dirty_sectors(), 60 * 8);
}

#[test]
fn idle_destage_waits_for_the_idle_delay() {
    let mut hdd = drive(1000, 50.0, 1e7);
    // 20 acknowledgements take about 8 ms; the actuator has been idle since time 0.
    let now = write_burst(&mut hdd, 0, 20, 0);
    let r = hdd.start(now + MS, &op(lba(500), 8, false, false));
    assert_eq!(hdd.dirty_sectors(), 20 * 8, "idle less than 50 ms");
    let r = hdd.start(r.done_at + 45 * MS, &op(lba(501), 8, false, false));
    assert_eq!(hdd.dirty_sectors(), 20 * 8, "idle 45 ms");
    // Idle for a second: everything goes to the medium.
    hdd.start(r.done_at + 1000 * MS, &op(lba(502), 8, false, false));
    assert_eq!(hdd.dirty_sectors(), 0);
}

#[test]
fn a_read_of_dirty_data_is_a_cache_hit() {
    let mut hdd = drive(1000, 1e6, 1e7);
    let now = write_burst(&mut hdd, 0, 10, 0);
    let hit = hdd.start(now, &op(lba(3), 8, false, false));
    // Hit overhead 0.184 ms + 4 KiB at 550 MB/s: no seek, no rotation.
    assert!(hit.done_at - now < MS / 4, "{} ns", hit.done_at - now);
    let miss = hdd.start(hit.done_at, &op(lba(3) + 8, 8, false, false));
    assert!(
        miss.done_at - hit.done_at > MS,
        "next to it is on the medium only"
    );
    assert_eq!(hdd.dirty_sectors(), 10 * 8);
}

#[test]
fn flush_drains_the_cache_and_returns_when_it_is_clean() {
    let mut hdd = drive(1000, 1e6, 1e7);
    let now = write_burst(&mut hdd, 0, 30, 0);
    let clean = hdd.flush(now);
    assert_eq!(hdd.dirty_sectors(), 0);
    // 30 random 4 KiB writes take media time, even ordered by position (> 2 ms each).
    assert!(clean - now > 30 * 2 * MS, "flush took {} ns", clean - now);
    assert_eq!(hdd.flush(clean), clean, "nothing left to flush");
    // The actuator is busy until the flush is done: a read waits for it.
    let read = hdd.start(now, &op(lba(999), 8, false, false));
    assert!(read.done_at > clean);
}

#[test]
fn fua_writes_through_and_is_on_the_medium_when_it_completes() {
    let fua = op(5 << 30, 8, true, true);
    // On an idle drive, FUA with the cache on costs what a write costs with it off.
    let mut cached = drive(1000, 1e6, 1e7);
    let mut p = HddProfile::default_22tb();
    p.cache.write_cache = false;
    let mut through = Hdd::new(&p).expect("profile");
    let a = cached.start(0, &fua);
    assert_eq!(a, through.start(0, &fua));
    assert!(a.done_at > MS, "a media write: seek, rotation, transfer");
    assert_eq!(cached.dirty_sectors(), 0, "nothing left to destage");
    // A FUA write over cached data makes it clean: the newer data is on the medium.
    let now = write_burst(&mut cached, 0, 5, a.done_at);
    let over = cached.start(now, &op(lba(2), 8, true, true));
    assert_eq!(cached.dirty_sectors(), 4 * 8);
    assert!(over.done_at - now > MS);
    // A cached write over cached data replaces it: one destage, not two.
    let again = cached.start(over.done_at, &op(lba(3), 8, true, false));
    assert!(again.done_at - over.done_at < MS);
    assert_eq!(cached.dirty_sectors(), 4 * 8);
}

/// Time to flush 300 random 4 KiB writes.
fn flush_time(max_age_ms: f64) -> Ns {
    let mut hdd = drive(1000, 1e6, max_age_ms);
    let now = write_burst(&mut hdd, 0, 300, 0);
    assert_eq!(hdd.dirty_sectors(), 300 * 8);
    hdd.flush(now) - now
}

#[test]
fn destage_by_position_beats_fifo() {
    // A maximum age of 0 makes every destage take the oldest write: FIFO.
    let fifo = flush_time(0.0);
    let by_position = flush_time(1e7);
    // FIFO pays a random access per write (~12 ms); the nearest of 300 costs a fraction.
    assert!(fifo > 300 * 8 * MS, "FIFO {fifo} ns");
    assert!(
        (by_position as f64) < 0.5 * fifo as f64,
        "by position {by_position} ns against FIFO {fifo} ns"
    );
}

/// Writes near the OD keep the head there while one write waits at the ID; returns how long
/// that write stayed dirty (or `None` if it still is after 20 s).
fn far_write_wait(max_age_ms: f64) -> Option<Ns> {
    // Destage forced all along: 40 writes of room, high watermark 30.
    let mut hdd = drive(40, 1e6, max_age_ms);
    let far = hdd.geometry().capacity_sectors - 8;
    let t0 = hdd.start(0, &op(far, 8, true, false)).done_at;
    let mut now = write_burst(&mut hdd, 0, 35, t0);
    let mut i = 0;
    while now < 20_000 * MS {
        // A read of the far write is a hit only while it is dirty.
        let probe = hdd.start(now, &op(far, 8, false, false));
        if probe.done_at - now > MS {
            return Some(now);
        }
        // New writes near the OD, so the nearest dirty write is never the far one.
        now = hdd
            .start(probe.done_at, &op((i % 4096) * 8, 8, true, false))
            .done_at;
        now = hdd.start(now, &op(lba(i) >> 8, 8, false, false)).done_at;
        i += 1;
    }
    None
}

#[test]
fn no_dirty_write_starves_beyond_the_maximum_age() {
    assert_eq!(
        far_write_wait(1e7),
        None,
        "without the age bound, the far write waits"
    );
    let waited = far_write_wait(500.0).expect("destaged");
    // Destaged once 500 ms old, after the destage and the read already under way.
    assert!(waited < 600 * MS, "waited {waited} ns");
}

#[test]
fn an_aborted_command_keeps_the_destage_booked_after_it() {
    // Room for four 8 MiB writes: the fourth passes the high watermark (three).
    let mut hdd = drive(4 * 2048, 1e6, 1e7);
    let weak = 5_000_000_000;
    hdd.set_faults(vec![FaultRange {
        start_lba: weak,
        sectors: 8,
        retries: 100,
        unrecoverable: false,
    }])
    .expect("faults");
    let mut now = 0;
    for i in 0..4 {
        now = hdd.start(now, &op(i << 30, 16_384, true, false)).done_at;
    }
    // The read's retries run for 100 revolutions; an 8 MiB destage (29 ms of transfer at the
    // OD's 285 MB/s) is booked after them. Aborting the read mid-way frees the actuator for
    // the destage, not for the next command (which alone would be positioned within a full
    // stroke and a revolution, 25 ms).
    let read = hdd.start(now, &op(weak, 8, false, false));
    let abort_at = read.done_at - read.recovery / 2;
    hdd.abort(abort_at, &op(weak, 8, false, false));
    let next = hdd.positioning_time(abort_at, &op(7 << 30, 8, false, false));
    assert!(next > 29 * MS, "positioning {next} ns includes the destage");
}

#[test]
fn watermark_errors_name_the_field() {
    let text = drive::hdd::DEFAULT_HDD_PROFILE;
    let swapped = text
        .replace(
            "destage_high_watermark = 0.75",
            "destage_high_watermark = 0.4",
        )
        .replace("destage_low_watermark = 0.5", "destage_low_watermark = 0.6");
    let e = HddProfile::from_toml(&swapped).expect_err("low above high");
    assert!(
        matches!(&e, ProfileError::Invalid { field, reason }
            if field == "cache.destage_low_watermark" && reason.contains("0.4")),
        "{e}"
    );
    for (from, to, field) in [
        (
            "destage_high_watermark = 0.75",
            "destage_high_watermark = 1.5",
            "cache.destage_high_watermark",
        ),
        (
            "destage_low_watermark = 0.5",
            "destage_low_watermark = -0.1",
            "cache.destage_low_watermark",
        ),
        (
            "destage_idle_delay_ms = 1.0",
            "destage_idle_delay_ms = nan",
            "cache.destage_idle_delay_ms",
        ),
        (
            "destage_max_age_ms = 60000.0",
            "destage_max_age_ms = -1.0",
            "cache.destage_max_age_ms",
        ),
    ] {
        assert!(text.contains(from), "{from}");
        let e = HddProfile::from_toml(&text.replace(from, to)).expect_err(to);
        assert!(
            matches!(&e, ProfileError::Invalid { field: f, .. } if f == field),
            "{to}: {e}"
        );
    }
    let missing = text.replace("destage_max_age_ms = 60000.0\n", "");
    let e = HddProfile::from_toml(&missing).expect_err("missing");
    assert!(e.to_string().contains("destage_max_age_ms"), "{e}");
}
