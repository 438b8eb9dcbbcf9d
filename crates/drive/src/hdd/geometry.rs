//! LBA → (cylinder, angle, media rate) for a zoned-recording disk with constant linear density
//! (profiles/hdd-22tb-cmr.toml): LBA 0 at the outer diameter, tracks spread uniformly in radius,
//! track capacity and media rate proportional to radius.

use crate::hdd::profile::GeometryProfile;
use crate::Ns;

/// Where an LBA sits on the platter.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Location {
    pub cylinder: u32,
    /// Angular position of the sector as ns after the index mark (0..T_rev).
    pub angle_ns: Ns,
    /// Media time per sector at this radius.
    pub ns_per_sector: f64,
}

/// The platter layout derived from a [`GeometryProfile`].
#[derive(Clone, Debug)]
pub struct Geometry {
    pub capacity_sectors: u64,
    pub sector_bytes: u32,
    pub cylinders: u32,
    pub heads: u32,
    /// Revolution time (integer ns, so runs are deterministic).
    pub rev_ns: Ns,
    /// r_ID / r_OD.
    ratio: f64,
    /// 1 − ratio², the r² span.
    r2_span: f64,
    inv_capacity: f64,
    /// Tracks per unit of normalised radial distance x = (1 − r)/(1 − ratio).
    tracks_per_x: f64,
    inv_heads: f64,
    ns_per_sector_od: f64,
}

impl Geometry {
    pub fn new(p: &GeometryProfile) -> Self {
        let rev_ns = (60e9 / f64::from(p.rpm)).round() as Ns;
        let rate_od = p.media_rate_od_mb_s * 1e6;
        let ratio = p.id_od_rate_ratio;
        // Capacity = heads × cylinders × mean track capacity, where the mean over a radius-uniform
        // track spread is rate_OD × T_rev × (1 + ratio) / 2.
        let bytes = p.capacity_sectors as f64 * f64::from(p.sector_bytes);
        let mean_track = rate_od * (rev_ns as f64 / 1e9) * (1.0 + ratio) / 2.0;
        let cylinders = (bytes / (mean_track * f64::from(p.heads))).round().max(1.0);
        Self {
            capacity_sectors: p.capacity_sectors,
            sector_bytes: p.sector_bytes,
            cylinders: cylinders.min(f64::from(u32::MAX)) as u32,
            heads: p.heads,
            rev_ns,
            ratio,
            r2_span: 1.0 - ratio * ratio,
            inv_capacity: 1.0 / p.capacity_sectors as f64,
            tracks_per_x: cylinders * f64::from(p.heads) / (1.0 - ratio).max(f64::EPSILON),
            inv_heads: 1.0 / f64::from(p.heads),
            ns_per_sector_od: f64::from(p.sector_bytes) / rate_od * 1e9,
        }
    }

    /// Normalised radius (r / r_OD) of an LBA: r² = r_ID² + (1 − u)(r_OD² − r_ID²).
    fn radius(&self, lba: u64) -> f64 {
        let u = (lba as f64 * self.inv_capacity).min(1.0);
        (self.ratio * self.ratio + (1.0 - u) * self.r2_span).sqrt()
    }

    /// Cylinder and angle of an LBA, and its normalised radius (the hot path of positioning).
    #[inline]
    pub fn place(&self, lba: u64) -> (u32, Ns, f64) {
        let r = self.radius(lba);
        // Tracks are uniform in x = (1 − r)/(1 − r_ID): track_pos counts tracks from the OD, its
        // fraction is the sector's angle on its track.
        let track_pos = (1.0 - r) * self.tracks_per_x;
        let track = track_pos as u64;
        let frac = track_pos - track as f64;
        let cylinder = ((track_pos * self.inv_heads) as u32).min(self.cylinders - 1);
        let angle = ((frac * self.rev_ns as f64) as Ns).min(self.rev_ns - 1);
        (cylinder, angle, r)
    }

    pub fn locate(&self, lba: u64) -> Location {
        let (cylinder, angle_ns, r) = self.place(lba);
        Location {
            cylinder,
            angle_ns,
            ns_per_sector: self.ns_per_sector_od / r,
        }
    }

    /// Media rate at an LBA in bytes per second (rate_OD × r / r_OD).
    pub fn media_rate(&self, lba: u64) -> f64 {
        f64::from(self.sector_bytes) / self.locate(lba).ns_per_sector * 1e9
    }
}
