//! HDD model against the datasheet numbers the default profile cites.

use drive::{
    Drive, FaultRange, Hdd, HddProfile, MediaOp, MediaOutcome, Ns, ProfileError, QueuedOp,
};

/// SplitMix64: a tiny seeded stream for test workloads.
struct SplitMix(u64);
impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
    }
}

fn read(lba: u64, blocks: u32) -> MediaOp {
    MediaOp {
        lba,
        blocks,
        write: false,
        fua: false,
    }
}

fn write(lba: u64, blocks: u32) -> MediaOp {
    MediaOp {
        lba,
        blocks,
        write: true,
        fua: false,
    }
}

fn ms(ns: Ns) -> f64 {
    ns as f64 / 1e6
}

/// Datasheet-style average: Σ(C−d)·t(d) / Σ(C−d) over d = 1..C−1.
fn weighted_average(hdd: &Hdd, write: bool) -> f64 {
    let c = u64::from(hdd.geometry().cylinders);
    let (mut sum, mut weight) = (0.0, 0.0);
    for d in 1..c {
        let w = (c - d) as f64;
        sum += w * ms(hdd.seek_time(d as u32, write));
        weight += w;
    }
    sum / weight
}

#[test]
fn seek_curve_hits_datasheet_averages() {
    let hdd = Hdd::default_22tb();
    let read_avg = weighted_average(&hdd, false);
    let write_avg = weighted_average(&hdd, true);
    assert!((read_avg - 7.4).abs() < 0.02, "read average {read_avg} ms");
    assert!(
        (write_avg - 8.2).abs() < 0.02,
        "write average {write_avg} ms"
    );
    assert_eq!(hdd.seek_time(1, false), 230_000);
    assert_eq!(hdd.seek_time(1, true), 320_000);
    assert_eq!(hdd.seek_time(10, false), 230_000);
    assert_eq!(hdd.seek_time(0, false), 0);
    // The Atlas 10K motion (shape above its 0.115 settle floor) scaled to the 7.4 ms average,
    // plus the 0.23 ms modern settle: 0.23 + (7.4 − 0.23)/(5.60/10.83 − 0.115) · (1 − 0.115)
    // ≈ 16.0 ms. (Scaling the whole Atlas curve, settle included, gives a 14.3 ms average but
    // makes every short seek ~1 ms too slow: see crates/qos/tests/calibration.rs.)
    let full = ms(hdd.full_stroke());
    assert!((full - 16.0).abs() < 0.2, "full stroke {full} ms");
    // A 1% stroke seek: 0.23 + 1.646 · (0.186 − 0.115) · 10.83 ≈ 1.5 ms.
    let one_percent = ms(hdd.seek_time(hdd.geometry().cylinders / 100, false));
    assert!((one_percent - 1.5).abs() < 0.1, "1% seek {one_percent} ms");
    let last = hdd.geometry().cylinders - 1;
    assert!((ms(hdd.seek_time(last, false)) - full).abs() < 0.01);
    // Monotone in distance.
    let mut prev = 0;
    for d in (0..last).step_by(997) {
        let t = hdd.seek_time(d, false);
        assert!(t >= prev, "seek time drops at {d}");
        prev = t;
    }
}

#[test]
fn rotation_period_is_7200_rpm() {
    let hdd = Hdd::default_22tb();
    assert_eq!(hdd.rev_ns(), 8_333_333);
}

#[test]
fn media_rate_at_od_and_id() {
    let hdd = Hdd::default_22tb();
    let g = hdd.geometry();
    let od = g.media_rate(0) / 1e6;
    let id = g.media_rate(g.capacity_sectors - 1) / 1e6;
    assert!((od - 285.0).abs() < 0.5, "OD {od} MB/s");
    assert!((id / od - 0.47).abs() < 0.005, "ID/OD {}", id / od);
    // LBA-uniform mean rate is 0.767 × OD (uniform in radius²).
    let n = 10_000u64;
    let mean: f64 = (0..n)
        .map(|i| g.media_rate(i * (g.capacity_sectors / n)))
        .sum::<f64>()
        / n as f64
        / 1e6;
    assert!((mean / od - 0.767).abs() < 0.01, "mean/OD {}", mean / od);
}

/// Closed loop at QD1 with 50 µs turnaround; returns the mean service time in ms.
fn qd1_mean(blocks: u32, n: u64) -> f64 {
    let mut hdd = Hdd::default_22tb();
    let span = hdd.geometry().capacity_sectors - u64::from(blocks);
    let mut rng = SplitMix(7);
    let (mut now, mut total) = (0, 0);
    for _ in 0..n {
        let lba = rng.below(span / u64::from(blocks)) * u64::from(blocks);
        let s = hdd.start(now, &read(lba, blocks));
        assert_eq!(s.outcome, MediaOutcome::Ok);
        total += s.done_at - now;
        now = s.done_at + hdd.host_turnaround();
    }
    ms(total) / n as f64
}

#[test]
fn random_4k_read_at_qd1_takes_about_12_ms() {
    // overhead 0.15 + average seek 7.4 + half a revolution 4.17 ≈ 11.7 ms (86 IOPS).
    let mean = qd1_mean(8, 4000);
    assert!((11.4..12.5).contains(&mean), "4 KiB QD1 mean {mean} ms");
}

#[test]
fn random_128k_read_at_qd1_matches_82_iops() {
    let mean = qd1_mean(256, 4000);
    let iops = 1000.0 / (mean + 0.05);
    assert!((iops - 82.0).abs() / 82.0 < 0.05, "128 KiB QD1 {iops} IOPS");
}

#[test]
fn positioning_time_predicts_start() {
    let mut hdd = Hdd::default_22tb();
    let mut rng = SplitMix(3);
    let mut now = 1_000;
    for _ in 0..200 {
        let op = read(rng.below(1 << 35), 8);
        let predicted = hdd.positioning_time(now, &op);
        let service = hdd.service_time(now, &op);
        let s = hdd.start(now, &op);
        assert_eq!(
            s.done_at - now,
            service,
            "service estimate is exact without faults"
        );
        let transfer = s.done_at - now - predicted;
        assert!(
            transfer < 100_000,
            "transfer of 4 KiB took {transfer} ns after positioning"
        );
        now = s.done_at + 50_000;
    }
}

#[test]
fn positioning_times_match_one_at_a_time() {
    let mut profile = HddProfile::default_22tb();
    for write_cache in [false, true] {
        profile.cache.write_cache = write_cache;
        let Ok(hdd) = Hdd::new(&profile) else {
            unreachable!("the default profile with WCE {write_cache} is valid")
        };
        positioning_times_match_one_at_a_time_on(hdd);
    }
}

/// A queue of random reads, re-reads of recent ones (cache hits), sequential follow-ons
/// (streaming) and writes, asked about as a batch and singly at every dispatch; the service
/// estimates from the memos, up to date or left from the previous dispatch, are the full ones.
fn positioning_times_match_one_at_a_time_on(mut hdd: Hdd) {
    let mut rng = SplitMix(11);
    let mut queue: Vec<MediaOp> = Vec::new();
    let mut done: Vec<MediaOp> = Vec::new();
    let mut now = 0;
    let mut times = Vec::new();
    // Memos kept beside the queue as a policy keeps them, and memos of other ops.
    let mut memos: Vec<QueuedOp> = Vec::new();
    let mut memo_times = Vec::new();
    for _ in 0..2_000 {
        while queue.len() < 32 {
            let op = match (rng.below(8), done.last()) {
                (0, Some(d)) => read(d.lba + u64::from(d.blocks), 256),
                (1, Some(d)) => read(d.lba, d.blocks / 2),
                (2, _) => write(rng.below(1 << 35), 256),
                _ => read(rng.below(1 << 35), 256),
            };
            queue.push(op);
            memos.push(QueuedOp::new(op));
        }
        hdd.positioning_times(now, &queue, &mut times);
        let singly: Vec<Ns> = queue
            .iter()
            .map(|op| hdd.positioning_time(now, op))
            .collect();
        assert_eq!(times, singly, "at {now} ns");
        let services = |hdd: &Hdd, memos: &[QueuedOp]| -> Vec<Ns> {
            memos
                .iter()
                .zip(&singly)
                .map(|(q, &t)| hdd.service_time_memo(now, q, t))
                .collect()
        };
        let full: Vec<Ns> = queue.iter().map(|op| hdd.service_time(now, op)).collect();
        assert_eq!(services(&hdd, &memos), full, "stale memos at {now} ns");
        hdd.positioning_times_memo(now, &mut memos, &mut memo_times);
        assert_eq!(memo_times, singly, "with memos at {now} ns");
        assert_eq!(services(&hdd, &memos), full, "services at {now} ns");
        // Memos of other ops.
        let mut stray: Vec<QueuedOp> = memos
            .iter()
            .zip(memos.iter().cycle().skip(1))
            .map(|(q, other)| QueuedOp {
                op: q.op,
                memo: other.memo,
            })
            .collect();
        hdd.positioning_times_memo(now, &mut stray, &mut memo_times);
        assert_eq!(memo_times, singly, "with stray memos at {now} ns");
        assert_eq!(services(&hdd, &stray), full, "stray services at {now} ns");
        let Some(i) = (0..queue.len()).min_by_key(|&i| times[i]) else {
            unreachable!("the queue is full")
        };
        let op = queue.remove(i);
        memos.remove(i);
        let s = hdd.start(now, &op);
        done.push(op);
        now = now.max(s.done_at.min(now + 5_000_000));
    }
}

#[test]
fn a_remembered_miss_gives_way_to_what_came_into_a_cache_since() {
    // A read that missed at a read-cache version the cache is still at is served from a cache
    // later all the same: by the read-ahead stream once it got there, or by a dirty write.
    let mut profile = HddProfile::default_22tb();
    profile.cache.write_cache = true;
    let Ok(mut hdd) = Hdd::new(&profile) else {
        unreachable!("the default profile with WCE is valid")
    };
    let first = read(1 << 30, 256);
    let done = hdd.start(0, &first).done_at;
    let follow_on = read((1 << 30) + 256, 8);
    let elsewhere = read(1 << 32, 8);
    let mut queue = vec![QueuedOp::new(follow_on), QueuedOp::new(elsewhere)];
    let mut times = Vec::new();
    // Before the first read is done, neither is in a cache.
    hdd.positioning_times_memo(0, &mut queue, &mut times);
    let later = done + 1_000_000;
    let t = hdd.positioning_time(later, &follow_on);
    assert!(t < 1_000_000, "the stream serves the follow-on: {t} ns");
    assert_eq!(
        hdd.service_time_memo(later, &queue[0], t),
        hdd.service_time(later, &follow_on)
    );
    // A cached write of the other read's blocks (no read-cache growth).
    hdd.start(later, &write(1 << 32, 8));
    let t = hdd.positioning_time(later, &elsewhere);
    assert_eq!(
        hdd.service_time_memo(later, &queue[1], t),
        hdd.service_time(later, &elsewhere)
    );
}

#[test]
fn sequential_reads_stream_from_read_ahead() {
    let mut hdd = Hdd::default_22tb();
    let mut now = 0;
    let first = hdd.start(now, &read(0, 256));
    now = first.done_at + 50_000;
    let mut total = 0;
    for i in 1..=100u64 {
        let s = hdd.start(now, &read(i * 256, 256));
        total += s.done_at - now;
        now = s.done_at + 50_000;
    }
    // 128 KiB at ~285 MB/s is 0.46 ms: no revolution lost per command.
    let per = ms(total) / 100.0;
    assert!(per < 0.6, "sequential 128 KiB read took {per} ms each");
    // A re-read of data still in a segment is a hit.
    let again = hdd.start(now, &read(100 * 256, 256));
    assert!(again.done_at - now < 1_000_000);
}

#[test]
fn write_cache_acknowledges_fast_and_flush_drains() {
    let mut profile = HddProfile::default_22tb();
    profile.cache.write_cache = true;
    let mut hdd = Hdd::new(&profile).expect("profile");
    let mut rng = SplitMix(11);
    let mut now = 0;
    for _ in 0..16 {
        let s = hdd.start(now, &write(rng.below(1 << 35), 8));
        assert!(
            s.done_at - now < 1_000_000,
            "cached write took {} ns",
            s.done_at - now
        );
        now = s.done_at;
    }
    assert!(hdd.dirty_sectors() > 0);
    let clean = hdd.flush(now);
    assert_eq!(hdd.dirty_sectors(), 0);
    // Destaging what is left takes real media time (several random writes).
    assert!(clean - now > 20_000_000, "flush took {} ns", clean - now);
    assert_eq!(hdd.flush(clean), clean);
    // FUA bypasses the cache: a media write.
    let fua = hdd.start(
        clean,
        &MediaOp {
            lba: 5 << 30,
            blocks: 8,
            write: true,
            fua: true,
        },
    );
    assert!(fua.done_at - clean > 1_000_000);
    assert_eq!(hdd.dirty_sectors(), 0);
}

#[test]
fn write_cache_off_writes_to_media_with_write_settle() {
    let mut hdd = Hdd::default_22tb();
    let s = hdd.start(0, &write(1 << 34, 8));
    assert!(s.done_at > 1_000_000);
    assert_eq!(hdd.dirty_sectors(), 0);
}

#[test]
fn turning_the_write_cache_off_destages_before_the_next_write() {
    let mut profile = HddProfile::default_22tb();
    profile.cache.write_cache = true;
    let mut hdd = Hdd::new(&profile).expect("profile");
    assert_eq!(hdd.write_cache(), Some(true));
    let mut rng = SplitMix(12);
    let mut now = 0;
    for _ in 0..16 {
        now = hdd.start(now, &write(rng.below(1 << 35), 8)).done_at;
    }
    assert!(hdd.dirty_sectors() > 0);
    // What a flush from here would take: the destage the switch must do first.
    let clean = hdd.clone().flush(now);
    hdd.set_write_cache(now, false);
    assert_eq!(hdd.write_cache(), Some(false));
    assert_eq!(hdd.dirty_sectors(), 0);
    // The next write goes to the medium, after the destage.
    let through = hdd.start(now, &write(rng.below(1 << 35), 8));
    assert!(
        through.done_at > clean + 1_000_000,
        "{through:?} vs clean at {clean}"
    );
    assert_eq!(hdd.dirty_sectors(), 0);
    // Back on: a write is acknowledged from the buffer again.
    let later = through.done_at;
    hdd.set_write_cache(later, true);
    let cached = hdd.start(later, &write(rng.below(1 << 35), 8));
    assert!(cached.done_at - later < 1_000_000);
    assert!(hdd.dirty_sectors() > 0);
}

#[test]
fn a_model_without_a_write_cache_says_so() {
    let mut ssd = drive::Ssd::new(&drive::SsdProfile::default_nvme()).expect("profile");
    assert_eq!(ssd.write_cache(), None);
    ssd.set_write_cache(0, true);
    assert_eq!(ssd.write_cache(), None);
    assert_eq!(drive::Instant.write_cache(), None);
}

#[test]
fn faults_add_retry_revolutions_or_fail_within_cap() {
    let mut hdd = Hdd::default_22tb();
    hdd.set_faults(vec![
        FaultRange {
            start_lba: 1_000_000,
            sectors: 8,
            retries: 3,
            unrecoverable: false,
        },
        FaultRange {
            start_lba: 2_000_000,
            sectors: 1,
            retries: 0,
            unrecoverable: true,
        },
        FaultRange {
            start_lba: 3_000_000,
            sectors: 1,
            retries: 5000,
            unrecoverable: false,
        },
    ])
    .expect("faults");
    let rev = hdd.rev_ns();
    let weak = hdd.start(0, &read(1_000_004, 8));
    assert_eq!(weak.outcome, MediaOutcome::Ok);
    assert_eq!(weak.recovery, 3 * (rev + 100_000));
    let clean = hdd.start(weak.done_at, &read(1_000_008, 8));
    assert_eq!(clean.recovery, 0);
    let bad = hdd.start(clean.done_at, &read(1_999_990, 16));
    assert_eq!(bad.outcome, MediaOutcome::Unrecovered);
    assert_eq!(bad.recovery, 2_670_000_000);
    let hopeless = hdd.start(bad.done_at, &read(3_000_000, 1));
    assert_eq!(hopeless.outcome, MediaOutcome::Unrecovered);
    assert_eq!(hopeless.recovery, 7_000_000_000, "capped at the ERC limit");
    assert!(hopeless.done_at - bad.done_at < 7_100_000_000);
}

#[test]
fn default_profile_parses_and_every_line_cites() {
    let text = drive::hdd::DEFAULT_HDD_PROFILE;
    let p = HddProfile::from_toml(text).expect("default profile");
    assert_eq!(p.name, "22 TB 7200 rpm CMR");
    assert_eq!(p.geometry.capacity_sectors, 42_970_644_480);
    // Every parameter line is preceded by a comment naming its source.
    let lines: Vec<&str> = text.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        let l = line.trim();
        if l.contains(" = ") && !l.starts_with('#') && !l.starts_with("name") && !l.starts_with('[')
        {
            let comment = lines.get(i.wrapping_sub(1)).copied().unwrap_or("");
            let cites = |c: &str| {
                ["[", "assumed", "assumption", "derived"]
                    .iter()
                    .any(|k| c.contains(k))
            };
            let cited = cites(comment) || lines.get(i.wrapping_sub(2)).is_some_and(|c| cites(c));
            assert!(
                comment.trim_start().starts_with('#') && cited,
                "line {} `{l}` has no cited source",
                i + 1
            );
        }
    }
}

#[test]
fn profile_errors_name_the_field() {
    let text = drive::hdd::DEFAULT_HDD_PROFILE;
    let missing = text.replace("rpm = 7200\n", "");
    let e = HddProfile::from_toml(&missing).expect_err("missing rpm");
    assert!(e.to_string().contains("rpm"), "{e}");
    let typo = text.replace("rpm = 7200", "rmp = 7200");
    let e = HddProfile::from_toml(&typo).expect_err("typo");
    assert!(e.to_string().contains("rmp"), "{e}");
    let wrong_type = text.replace("heads = 20", "heads = \"twenty\"");
    let e = HddProfile::from_toml(&wrong_type).expect_err("type");
    assert!(e.to_string().contains("heads"), "{e}");
    let bad_value = text.replace("average_read_ms = 7.4", "average_read_ms = -1.0");
    let e = HddProfile::from_toml(&bad_value).expect_err("range");
    assert!(
        matches!(&e, ProfileError::Invalid { field, .. } if field == "seek.average_read_ms"),
        "{e}"
    );
    let bad_shape = text.replace("[1.0, 1.0],", "[0.9, 1.0],");
    let e = HddProfile::from_toml(&bad_shape).expect_err("shape");
    assert!(e.to_string().contains("seek.shape"), "{e}");
    let bad_fault = format!("{text}\n[[fault]]\nstart_lba = 5\nsectors = 0\nretries = 2\n");
    let e = HddProfile::from_toml(&bad_fault).expect_err("fault");
    assert!(e.to_string().contains("fault[0].sectors"), "{e}");
    assert!(HddProfile::from_toml("not toml [").is_err());
}

#[test]
fn a_write_makes_cached_read_data_stale() {
    let mut hdd = Hdd::default_22tb();
    let first = hdd.start(0, &read(1 << 30, 256));
    let now = first.done_at + 50_000;
    // Still buffered: a hit.
    let hit = hdd.start(now, &read(1 << 30, 256));
    assert!(
        hit.done_at - now < 1_000_000,
        "re-read took {} ns",
        hit.done_at - now
    );
    let w = hdd.start(hit.done_at, &write(1 << 30, 8));
    let again = hdd.start(w.done_at, &read(1 << 30, 256));
    assert!(
        again.done_at - w.done_at > 1_000_000,
        "stale segment served after a write"
    );
}

/// Twelve back-to-back 4 KiB random writes with WCE on; returns the time to acknowledge all.
fn twelve_cached_writes(cache_mb: f64) -> Ns {
    let mut profile = HddProfile::default_22tb();
    profile.cache.write_cache = true;
    profile.cache.write_cache_mb = cache_mb;
    let mut hdd = Hdd::new(&profile).expect("profile");
    let mut rng = SplitMix(5);
    let mut now = 0;
    for _ in 0..12 {
        now = hdd.start(now, &write(rng.below(1 << 35), 8)).done_at;
    }
    assert!(hdd.dirty_sectors() as f64 * 512.0 <= cache_mb * 1e6);
    now
}

#[test]
fn a_full_write_cache_makes_writes_wait_for_destage() {
    // Room for 64 writes: every acknowledgement is a buffer transfer (< 0.4 ms each).
    let roomy = twelve_cached_writes(64.0 * 4096.0 / 1e6);
    assert!(roomy < 12 * 400_000, "roomy cache took {roomy} ns");
    // Room for 4: at least 8 destages (random writes, > 2 ms each) must finish first.
    let full = twelve_cached_writes(4.0 * 4096.0 / 1e6);
    assert!(full > 8 * 2_000_000, "full cache took only {full} ns");
}

#[test]
fn remembered_read_cache_misses_agree_with_full_lookups() {
    use drive::hdd::read_cache::{ReadCache, ReadHit};
    let mut cache = ReadCache::new(4, 64);
    let mut rng = SplitMix(9);
    // Queries over a small LBA space so hits happen; each remembers its last miss version.
    let queries: Vec<(u64, u64)> = (0..24)
        .map(|_| {
            let lba = rng.below(4096);
            (lba, lba + 1 + rng.below(64))
        })
        .collect();
    let mut known = vec![0u64; queries.len()];
    let (mut now, mut hits) = (0, 0);
    for step in 0..3000 {
        now += 1 + rng.below(20_000);
        let lba = rng.below(4096);
        match rng.below(5) {
            0 => cache.insert(lba, lba + 1 + rng.below(128), now, 1000.0),
            1 => cache.stop_stream(now),
            2 => cache.extend_stream(lba, now),
            3 => cache.invalidate(lba, lba + 1 + rng.below(32)),
            _ => {}
        }
        for (i, &(q, end)) in queries.iter().enumerate() {
            let full = cache.lookup(q, end, now);
            let (fast, version) = cache.lookup_since(q, end, now, known[i]);
            assert_eq!(fast, full, "step {step}, query {i}");
            if full == ReadHit::Cached {
                hits += 1;
            }
            known[i] = version;
        }
    }
    assert!(hits > 100, "the test should exercise hits too ({hits})");
}

#[test]
fn an_abandoned_access_frees_the_actuator_at_once() {
    let mut hdd = Hdd::default_22tb();
    hdd.set_faults(vec![FaultRange {
        start_lba: 1_000_000,
        sectors: 8,
        retries: 100,
        unrecoverable: false,
    }])
    .expect("faults");
    let weak = hdd.start(0, &read(1_000_000, 8));
    assert!(weak.recovery >= 100 * hdd.rev_ns(), "{weak:?}");
    // Without abort the next access waits for all the retry revolutions ...
    let mut waiting = hdd.clone();
    let behind = waiting.start(50_000_000, &read(5_000_000, 8));
    assert!(behind.done_at > weak.done_at);
    // ... with it (CDL Dh/Eh/Fh at 50 ms) the actuator moves on from 50 ms.
    hdd.abort(50_000_000, &read(1_000_000, 8));
    let next = hdd.start(50_000_000, &read(5_000_000, 8));
    assert!(next.done_at < 50_000_000 + 40_000_000, "{next:?}");
}

#[test]
fn positioning_after_is_the_positioning_once_the_first_op_is_done() {
    // Random reads and writes, and re-reads of recent reads (read-cache hits, which leave the
    // heads where they were): the look-ahead estimate must be what the drive says after
    // really starting the first op and waiting for it.
    let mut hdd = Hdd::default_22tb();
    let mut rng = SplitMix(5);
    let mut now = 0;
    let mut recent: Vec<MediaOp> = Vec::new();
    let mut after = Vec::new();
    let mut hits = 0;
    for _ in 0..300 {
        let random = |rng: &mut SplitMix| match rng.below(4) {
            0 => write(rng.below(1 << 35), 256),
            _ => read(rng.below(1 << 35), 256),
        };
        // A queue of 6 firsts, then 3 nexts (the firsts in reverse order of the queue).
        let mut queue: Vec<QueuedOp> = (0..6)
            .map(|i| match recent.get(i) {
                Some(r) if i % 2 == 0 => QueuedOp::new(*r),
                _ => QueuedOp::new(random(&mut rng)),
            })
            .collect();
        queue.extend((0..3).map(|_| QueuedOp::new(random(&mut rng))));
        let (firsts, nexts): (Vec<usize>, Vec<usize>) = ((0..6).rev().collect(), (6..9).collect());
        let times: Vec<Ns> = queue
            .iter()
            .map(|q| hdd.positioning_time(now, &q.op))
            .collect();
        hits += times[..6].iter().filter(|&&t| t < 1_000_000).count();
        assert!(hdd.positioning_after(now, &queue, &times, &firsts, &nexts, &mut after));
        assert_eq!(after.len(), firsts.len() * nexts.len());
        // The same from the memos the positioning estimates leave.
        let mut memoised = queue.clone();
        let mut scratch = Vec::new();
        hdd.positioning_times_memo(now, &mut memoised, &mut scratch);
        assert_eq!(scratch, times);
        let mut from_memos = Vec::new();
        assert!(hdd.positioning_after(now, &memoised, &times, &firsts, &nexts, &mut from_memos));
        assert_eq!(from_memos, after, "from the memos at {now} ns");
        assert!(
            !hdd.positioning_after(now, &queue, &times, &[9], &nexts, &mut scratch),
            "an index out of the queue"
        );
        for (f, q) in firsts.iter().map(|&i| &queue[i]).enumerate() {
            let mut ahead = hdd.clone();
            let done = ahead.start(now, &q.op).done_at;
            for (n, next) in nexts.iter().map(|&i| &queue[i]).enumerate() {
                assert_eq!(
                    after[f * nexts.len() + n],
                    ahead.positioning_time(done, &next.op),
                    "{:?} after {:?} at {now} ns",
                    next,
                    q.op
                );
            }
        }
        let op = read(rng.below(1 << 35), 256);
        recent.insert(0, op);
        now = hdd.start(now, &op).done_at + 50_000;
    }
    assert!(
        hits > 500,
        "only {hits} read-cache hits among the first ops"
    );
}
