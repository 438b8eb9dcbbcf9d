//! Seek time versus distance: the Atlas 10K shape ([DS]
//! valid/atlas10k.seek) scaled so that the cylinder-weighted average equals the datasheet
//! average, with single-track times for short seeks and a √d blend in between
//! (Ruemmler–Wilkes: short seeks grow with √distance). Precomputed into integer tables so a
//! lookup is a branch and an interpolation.

use crate::error::ProfileError;
use crate::Ns;

/// Distances below this are looked up exactly.
const SHORT: usize = 4096;
/// Number of steps of the coarse table over the full stroke.
const COARSE_STEPS: u64 = 4096;

/// Anchors of one seek curve (read or write), in ms.
#[derive(Clone, Copy, Debug)]
pub struct SeekAnchors<'a> {
    pub average_ms: f64,
    pub track_to_track_ms: f64,
    pub track_to_track_max_cylinders: u32,
    pub shape: &'a [[f64; 2]],
    /// Part of the shape that is the source drive's settle (its single-track time / full stroke).
    pub shape_settle: f64,
    /// Profile field named in errors.
    pub field: &'static str,
}

/// A seek curve as lookup tables.
#[derive(Clone, Debug)]
pub struct SeekCurve {
    short: Vec<u32>,
    /// Per coarse step: the time at its start and the rise to the next step (0 for the last).
    coarse: Vec<(u32, u32)>,
    /// The coarse table's step is 2^step_shift cylinders (a shift, not a division, per lookup).
    step_shift: u32,
    full_stroke_ns: Ns,
}

/// Normalised shape value `y` (time / full-stroke time of the source drive) at distance `d`.
/// Below the first shape point, a √d blend from the settle floor `y_settle` at the end of the
/// single-track range (Ruemmler–Wilkes: short seeks grow with √distance).
fn shape_at(d: u64, cylinders: u64, a: &SeekAnchors<'_>) -> f64 {
    let stroke = cylinders.saturating_sub(1).max(1) as f64;
    let x = d as f64 / stroke;
    let [x0, y0] = a.shape.first().copied().unwrap_or([1.0, 1.0]);
    if x < x0 {
        let t2t_max = f64::from(a.track_to_track_max_cylinders);
        let (s_lo, s_hi) = (t2t_max.sqrt(), (x0 * stroke).sqrt());
        let w = if s_hi > s_lo {
            ((d as f64).sqrt() - s_lo) / (s_hi - s_lo)
        } else {
            1.0
        };
        return a.shape_settle + w.clamp(0.0, 1.0) * (y0 - a.shape_settle);
    }
    let mut prev = [x0, y0];
    for &[xi, yi] in a.shape.iter().skip(1) {
        if x <= xi {
            let w = (x - prev[0]) / (xi - prev[0]);
            return prev[1] + w * (yi - prev[1]);
        }
        prev = [xi, yi];
    }
    prev[1]
}

/// Seek time in ms at distance `d`: the modern settle (single-track time) plus the source
/// drive's motion component (shape above its own settle floor) scaled by `motion` ms.
fn seek_ms(d: u64, cylinders: u64, motion: f64, a: &SeekAnchors<'_>) -> f64 {
    seek_ms_at(d, cylinders, &[motion], a)[0]
}

/// [`seek_ms`] at distance `d` for each of `N` motion scales, the shape evaluated once.
fn seek_ms_at<const N: usize>(
    d: u64,
    cylinders: u64,
    motions: &[f64; N],
    a: &SeekAnchors<'_>,
) -> [f64; N] {
    if d == 0 {
        return [0.0; N];
    }
    if d <= u64::from(a.track_to_track_max_cylinders) {
        return [a.track_to_track_ms; N];
    }
    let shape = (shape_at(d, cylinders, a) - a.shape_settle).max(0.0);
    motions.map(|motion| a.track_to_track_ms + motion * shape)
}

impl SeekCurve {
    /// Scales the shape's motion component so the average over all seek distances, weighted as
    /// datasheets do (Σ(max+1−n)(T_in+T_out)/((max+1)·max)), equals `a.average_ms`.
    pub fn new(cylinders: u32, a: &SeekAnchors<'_>) -> Result<Self, ProfileError> {
        let c = u64::from(cylinders.max(2));
        // The average is affine in the motion scale: avg(m) = base + slope · m. Exact sum over
        // short seeks; beyond, the curve is smooth and blocks of STRIDE distances are summed by
        // their midpoint (the error is far below a microsecond, and building stays fast).
        const STRIDE: u64 = 64;
        let (mut sum0, mut sum1, mut weight) = (0.0, 0.0, 0.0);
        let mut d = 1;
        while d < c {
            let len = if d < SHORT as u64 {
                1
            } else {
                STRIDE.min(c - d)
            };
            // Σ (c − d') over d' in [d, d + len).
            let w = len as f64 * (c - d) as f64 - (len * (len - 1) / 2) as f64;
            let mid = d + len / 2;
            let [t0, t1] = seek_ms_at(mid, c, &[0.0, 1.0], a);
            sum0 += w * t0;
            sum1 += w * (t1 - t0);
            weight += w;
            d += len;
        }
        let base = sum0 / weight;
        let slope = sum1 / weight;
        let motion = (a.average_ms - base) / slope;
        if !motion.is_finite() || motion <= 0.0 || slope <= 0.0 {
            return Err(ProfileError::invalid(
                a.field,
                "cannot be reached with this seek shape and track-to-track time",
            ));
        }
        let to_ns = |ms: f64| (ms * 1e6).round().clamp(0.0, f64::from(u32::MAX)) as u32;
        let short = (0..(SHORT as u64).min(c))
            .map(|d| to_ns(seek_ms(d, c, motion, a)))
            .collect();
        let step = c.div_ceil(COARSE_STEPS).max(1).next_power_of_two();
        let points: Vec<u32> = (0..=c.div_ceil(step))
            .map(|i| to_ns(seek_ms((i * step).min(c - 1), c, motion, a)))
            .collect();
        let rises = points.iter().skip(1).map(|&hi| Some(hi)).chain([None]);
        let coarse = points
            .iter()
            .zip(rises)
            .map(|(&lo, hi)| (lo, hi.map_or(0, |hi| hi.saturating_sub(lo))))
            .collect();
        let full_stroke_ns = to_ns(seek_ms(c - 1, c, motion, a)).into();
        Ok(Self {
            short,
            coarse,
            step_shift: step.trailing_zeros(),
            full_stroke_ns,
        })
    }

    /// Seek time for a move of `d` cylinders.
    #[inline]
    pub fn time(&self, d: u32) -> Ns {
        let d = d as usize;
        if let Some(&t) = self.short.get(d) {
            return t.into();
        }
        let d = d as u64;
        let i = (d >> self.step_shift) as usize;
        let frac = d & ((1 << self.step_shift) - 1);
        match self.coarse.get(i) {
            Some(&(lo, rise)) => u64::from(lo) + ((u64::from(rise) * frac) >> self.step_shift),
            None => self.full_stroke_ns,
        }
    }

    pub fn full_stroke(&self) -> Ns {
        self.full_stroke_ns
    }

    /// The longest seek [`Self::time`] can return (the curve need not be monotonic).
    pub fn longest(&self) -> Ns {
        let coarse = self.coarse.iter().map(|&(lo, _)| lo);
        let tables = self.short.iter().copied().chain(coarse).max();
        tables.map_or(0, Ns::from).max(self.full_stroke_ns)
    }
}
