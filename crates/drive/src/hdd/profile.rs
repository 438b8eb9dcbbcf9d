//! HDD profiles as data: the TOML schema and its checks.

use serde::Deserialize;

use crate::error::{check_range, ProfileError};
use crate::hdd::fault::FaultRange;

/// The checked-in default profile, "22 TB 7200 rpm CMR", with a source for every value.
pub const DEFAULT_HDD_PROFILE: &str = include_str!("../../profiles/hdd-22tb-cmr.toml");

/// An HDD profile. All times in the units their names say.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct HddProfile {
    pub name: String,
    pub geometry: GeometryProfile,
    pub seek: SeekProfile,
    pub timing: TimingProfile,
    pub cache: CacheProfile,
    pub recovery: RecoveryProfile,
    /// Fault ranges (experiments/README.md, B4); TOML `[[fault]]`.
    #[serde(default, rename = "fault")]
    pub faults: Vec<FaultRange>,
}

/// Recording geometry: zoned (continuous) layout.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct GeometryProfile {
    pub capacity_sectors: u64,
    pub sector_bytes: u32,
    pub heads: u32,
    pub rpm: u32,
    pub media_rate_od_mb_s: f64,
    pub id_od_rate_ratio: f64,
}

/// Seek curve anchors.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SeekProfile {
    pub average_read_ms: f64,
    pub average_write_ms: f64,
    pub track_to_track_read_ms: f64,
    pub track_to_track_write_ms: f64,
    pub track_to_track_max_cylinders: u32,
    /// `[distance / full stroke, time / full-stroke time]` points, increasing, ending at `[1, 1]`.
    pub shape: Vec<[f64; 2]>,
    /// The source drive's settle as a fraction of its full stroke (its single-track time /
    /// full-stroke time): the part of `shape` replaced by the modern track-to-track time.
    pub shape_settle: f64,
}

/// Per-command timing.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TimingProfile {
    pub command_overhead_ms: f64,
    pub host_turnaround_us: f64,
}

/// Read and write caches.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CacheProfile {
    pub write_cache: bool,
    pub write_cache_mb: f64,
    /// Destage is forced once dirty data exceeds this fraction of `write_cache_mb`...
    pub destage_high_watermark: f64,
    /// ...until it is down to this fraction.
    pub destage_low_watermark: f64,
    /// Idle time of the actuator before it starts destaging (below the high watermark).
    pub destage_idle_delay_ms: f64,
    /// A dirty write older than this is destaged next, wherever it lies (no starvation).
    pub destage_max_age_ms: f64,
    pub interface_mb_s: f64,
    pub read_segments: u32,
    pub read_ahead_sectors: u32,
    pub read_hit_overhead_ms: f64,
    pub write_hit_overhead_ms: f64,
}

/// Error recovery, experiments/README.md, B4.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RecoveryProfile {
    pub retry_overhead_ms: f64,
    pub full_ladder_ms: f64,
    pub recovery_cap_ms: f64,
}

impl HddProfile {
    /// Parses and checks a profile; errors name the field.
    pub fn from_toml(text: &str) -> Result<Self, ProfileError> {
        let profile: Self = toml::from_str(text).map_err(|e| ProfileError::Parse(e.to_string()))?;
        profile.validate()?;
        Ok(profile)
    }

    /// The default "22 TB 7200 rpm CMR" profile.
    pub fn default_22tb() -> Self {
        // The embedded file is checked by this crate's tests; fall back to nothing else.
        match Self::from_toml(DEFAULT_HDD_PROFILE) {
            Ok(p) => p,
            Err(e) => unreachable!("embedded default HDD profile is invalid: {e}"),
        }
    }

    /// Checks every value range and the shape table.
    pub fn validate(&self) -> Result<(), ProfileError> {
        let g = &self.geometry;
        if g.capacity_sectors < 1 << 16 {
            return Err(ProfileError::invalid(
                "geometry.capacity_sectors",
                "must be at least 65536",
            ));
        }
        if !matches!(g.sector_bytes, 512 | 4096) {
            return Err(ProfileError::invalid(
                "geometry.sector_bytes",
                "must be 512 or 4096",
            ));
        }
        if !(1..=64).contains(&g.heads) {
            return Err(ProfileError::invalid(
                "geometry.heads",
                "must be between 1 and 64",
            ));
        }
        if !(1000..=30000).contains(&g.rpm) {
            return Err(ProfileError::invalid(
                "geometry.rpm",
                "must be between 1000 and 30000",
            ));
        }
        check_range(
            "geometry.media_rate_od_mb_s",
            g.media_rate_od_mb_s,
            1.0,
            10_000.0,
        )?;
        check_range("geometry.id_od_rate_ratio", g.id_od_rate_ratio, 0.1, 0.99)?;

        let s = &self.seek;
        check_range("seek.average_read_ms", s.average_read_ms, 0.1, 100.0)?;
        check_range("seek.average_write_ms", s.average_write_ms, 0.1, 100.0)?;
        check_range(
            "seek.track_to_track_read_ms",
            s.track_to_track_read_ms,
            0.0,
            s.average_read_ms,
        )?;
        check_range(
            "seek.track_to_track_write_ms",
            s.track_to_track_write_ms,
            0.0,
            s.average_write_ms,
        )?;
        if s.track_to_track_max_cylinders == 0 {
            return Err(ProfileError::invalid(
                "seek.track_to_track_max_cylinders",
                "must be at least 1",
            ));
        }
        check_shape(&s.shape)?;
        let first = s.shape.first().map_or(1.0, |p| p[1]);
        check_range("seek.shape_settle", s.shape_settle, 0.0, first)?;

        let t = &self.timing;
        check_range(
            "timing.command_overhead_ms",
            t.command_overhead_ms,
            0.0,
            100.0,
        )?;
        check_range("timing.host_turnaround_us", t.host_turnaround_us, 0.0, 1e6)?;

        let c = &self.cache;
        check_range("cache.write_cache_mb", c.write_cache_mb, 0.0, 1e6)?;
        check_range(
            "cache.destage_high_watermark",
            c.destage_high_watermark,
            0.0,
            1.0,
        )?;
        check_range(
            "cache.destage_low_watermark",
            c.destage_low_watermark,
            0.0,
            1.0,
        )?;
        if c.destage_low_watermark > c.destage_high_watermark {
            return Err(ProfileError::invalid(
                "cache.destage_low_watermark",
                format!(
                    "must not exceed destage_high_watermark ({}), got {}",
                    c.destage_high_watermark, c.destage_low_watermark
                ),
            ));
        }
        check_range(
            "cache.destage_idle_delay_ms",
            c.destage_idle_delay_ms,
            0.0,
            1e6,
        )?;
        check_range("cache.destage_max_age_ms", c.destage_max_age_ms, 0.0, 1e7)?;
        check_range("cache.interface_mb_s", c.interface_mb_s, 1.0, 100_000.0)?;
        if c.read_segments > 1024 {
            return Err(ProfileError::invalid(
                "cache.read_segments",
                "must be at most 1024",
            ));
        }
        check_range(
            "cache.read_hit_overhead_ms",
            c.read_hit_overhead_ms,
            0.0,
            100.0,
        )?;
        check_range(
            "cache.write_hit_overhead_ms",
            c.write_hit_overhead_ms,
            0.0,
            100.0,
        )?;

        let r = &self.recovery;
        check_range(
            "recovery.retry_overhead_ms",
            r.retry_overhead_ms,
            0.0,
            1000.0,
        )?;
        check_range("recovery.full_ladder_ms", r.full_ladder_ms, 0.0, 1e7)?;
        check_range("recovery.recovery_cap_ms", r.recovery_cap_ms, 0.0, 1e7)?;

        let mut sorted: Vec<&FaultRange> = self.faults.iter().collect();
        sorted.sort_by_key(|f| f.start_lba);
        for (i, f) in self.faults.iter().enumerate() {
            f.validate(i, g.capacity_sectors)?;
        }
        for pair in sorted.windows(2) {
            if let [a, b] = pair {
                if a.end_lba() > b.start_lba {
                    return Err(ProfileError::invalid(
                        "fault",
                        format!(
                            "ranges starting at LBA {} and {} overlap",
                            a.start_lba, b.start_lba
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}

fn check_shape(shape: &[[f64; 2]]) -> Result<(), ProfileError> {
    let field = "seek.shape";
    if shape.len() < 2 {
        return Err(ProfileError::invalid(
            field,
            "needs at least two [distance, time] points",
        ));
    }
    let mut prev = [0.0, 0.0];
    for (i, &[d, t]) in shape.iter().enumerate() {
        let ok =
            d.is_finite() && t.is_finite() && d > prev[0] && t >= prev[1] && d <= 1.0 && t <= 1.0;
        if !ok {
            return Err(ProfileError::invalid(
                field,
                format!("point {i} [{d}, {t}] must increase in both coordinates within (0, 1]"),
            ));
        }
        prev = [d, t];
    }
    if prev != [1.0, 1.0] {
        return Err(ProfileError::invalid(
            field,
            "must end at [1.0, 1.0] (full stroke)",
        ));
    }
    Ok(())
}
