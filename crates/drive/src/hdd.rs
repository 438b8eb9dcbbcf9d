//! Hard disk timing model (parameters and sources: profiles/hdd-22tb-cmr.toml): command overhead, seek (with write settle),
//! rotational wait and media transfer at the zone's rate, with a segmented read cache, an
//! optional write-back cache and fault ranges. One actuator, so `parallelism` is 1.

pub mod fault;
pub mod geometry;
pub mod profile;
pub mod read_cache;
pub mod seek;
pub mod write_cache;

pub use fault::{FaultKind, FaultRange};
pub use geometry::{Geometry, Location};
pub use profile::{HddProfile, DEFAULT_HDD_PROFILE};

use std::cell::Cell;

use crate::error::ProfileError;
use crate::{Drive, MediaOp, MediaOutcome, Ns, OpMemo, QueuedOp, Service, NS_PER_MS, NS_PER_US};
use fault::Faults;
use read_cache::{MissCheck, ReadCache, ReadHit};
use seek::{SeekAnchors, SeekCurve};
use write_cache::{Limits, WriteCache};

/// Destage by position considers this many dirty writes on either side of the head in LBA
/// order (the nearest cylinders): the cheapest to reach lies among them, and the pick costs
/// the same with a thousand writes cached as with a hundred.
const DESTAGE_SCAN: usize = 64;

/// A modelled hard disk.
#[derive(Clone, Debug)]
pub struct Hdd {
    geometry: Geometry,
    seek_read: SeekCurve,
    seek_write: SeekCurve,
    overhead: Ns,
    read_hit_overhead: Ns,
    write_hit_overhead: Ns,
    interface_ns_per_byte: f64,
    host_turnaround: Ns,
    /// Cylinder under the heads after the last media access.
    cylinder: u32,
    /// The last LBA of that access: where destage by position looks for its candidates.
    head_lba: u64,
    /// When the actuator finishes its current media access.
    free_at: Ns,
    /// When it finishes the last host command's access (`free_at` is later when a forced
    /// destage follows it).
    host_until: Ns,
    read_cache: ReadCache,
    write_cache: WriteCache,
    write_cache_enabled: bool,
    destage_idle_delay: Ns,
    destage_max_age: Ns,
    faults: Faults,
    /// ⌊2^64 / T_rev⌋ (or one less): `t mod T_rev` by a multiplication, see [`Hdd::rev_phase`].
    rev_magic: u64,
    /// Every seek is below 3 T_rev, so a phase plus a seek is reduced by two conditional
    /// subtractions (true of any real drive; the profile does not promise it).
    seeks_below_3_revs: bool,
    /// Direct-mapped memo by LBA: the same queued commands are looked at again at every pick,
    /// and placing costs a square root and a read-cache check.
    place_memo: Box<[Cell<OpMemo>; PLACE_MEMO]>,
}

/// Start of positioning estimates at one `now`: the actuator is free and the command overhead
/// done `lead` after `now`, with the platter at `phase` (ns into a revolution).
#[derive(Clone, Copy, Debug)]
struct Origin {
    lead: Ns,
    phase: Ns,
}

/// What [`Drive::positioning_after`] needs of a next op: its cost if the caches serve it,
/// else its cylinder and angle (and which seek curve reaches it).
#[derive(Clone, Copy, Debug, Default)]
struct NextOp {
    cached: Option<Ns>,
    cylinder: u32,
    angle: Ns,
    write: bool,
}

/// Next ops [`Drive::positioning_after`] keeps on the stack (more go on the heap).
const NEXTS_ON_STACK: usize = 16;

/// Slots of the placement memo, as a power of two. Two queued commands in one slot evict each
/// other at every pick; with 32 queued that happens to ~0.2 of them at 4096 slots (3.6 at
/// 256). Only the queued commands' slots are touched, so a large table stays cache-friendly.
const PLACE_MEMO_BITS: u32 = 12;
const PLACE_MEMO: usize = 1 << PLACE_MEMO_BITS;

fn ms(v: f64) -> Ns {
    (v * NS_PER_MS).round() as Ns
}

impl Hdd {
    /// Builds the model from a checked profile.
    pub fn new(p: &HddProfile) -> Result<Self, ProfileError> {
        p.validate()?;
        let geometry = Geometry::new(&p.geometry);
        let s = &p.seek;
        let anchors = |average_ms, track_to_track_ms, field| SeekAnchors {
            average_ms,
            track_to_track_ms,
            track_to_track_max_cylinders: s.track_to_track_max_cylinders,
            shape: &s.shape,
            shape_settle: s.shape_settle,
            field,
        };
        let seek_read = SeekCurve::new(
            geometry.cylinders,
            &anchors(
                s.average_read_ms,
                s.track_to_track_read_ms,
                "seek.average_read_ms",
            ),
        )?;
        let seek_write = SeekCurve::new(
            geometry.cylinders,
            &anchors(
                s.average_write_ms,
                s.track_to_track_write_ms,
                "seek.average_write_ms",
            ),
        )?;
        let seeks_below_3_revs =
            seek_read.longest().max(seek_write.longest()) < geometry.rev_ns.saturating_mul(3);
        let c = &p.cache;
        let r = &p.recovery;
        let retry_ns = geometry.rev_ns + ms(r.retry_overhead_ms);
        // Rounded: MB are decimal, so a capacity of whole sectors is rarely exact in binary.
        let cache_sectors = (c.write_cache_mb * 1e6 / f64::from(p.geometry.sector_bytes)).round();
        let limits = Limits {
            capacity: cache_sectors as u64,
            high: (cache_sectors * c.destage_high_watermark).round() as u64,
            low: (cache_sectors * c.destage_low_watermark).round() as u64,
        };
        Ok(Self {
            seek_read,
            seek_write,
            overhead: ms(p.timing.command_overhead_ms),
            read_hit_overhead: ms(c.read_hit_overhead_ms),
            write_hit_overhead: ms(c.write_hit_overhead_ms),
            interface_ns_per_byte: 1e9 / (c.interface_mb_s * 1e6),
            host_turnaround: (p.timing.host_turnaround_us * NS_PER_US).round() as Ns,
            cylinder: 0,
            head_lba: 0,
            free_at: 0,
            host_until: 0,
            read_cache: ReadCache::new(c.read_segments, c.read_ahead_sectors),
            write_cache: WriteCache::new(limits),
            write_cache_enabled: c.write_cache,
            destage_idle_delay: ms(c.destage_idle_delay_ms),
            destage_max_age: ms(c.destage_max_age_ms),
            rev_magic: u64::MAX / geometry.rev_ns.max(1),
            seeks_below_3_revs,
            place_memo: Box::new([const { Cell::new(OpMemo::EMPTY) }; PLACE_MEMO]),
            faults: Faults::new(
                p.faults.clone(),
                retry_ns,
                ms(r.full_ladder_ms),
                ms(r.recovery_cap_ms),
            ),
            geometry,
        })
    }

    /// The default "22 TB 7200 rpm CMR" drive.
    pub fn default_22tb() -> Self {
        match Self::new(&HddProfile::default_22tb()) {
            Ok(h) => h,
            Err(e) => unreachable!("embedded default HDD profile is invalid: {e}"),
        }
    }

    pub fn geometry(&self) -> &Geometry {
        &self.geometry
    }

    /// Seek time for a move of `cylinders` (read or write curve).
    pub fn seek_time(&self, cylinders: u32, write: bool) -> Ns {
        if write {
            self.seek_write.time(cylinders)
        } else {
            self.seek_read.time(cylinders)
        }
    }

    /// Full-stroke read seek.
    pub fn full_stroke(&self) -> Ns {
        self.seek_read.full_stroke()
    }

    /// Revolution time.
    pub fn rev_ns(&self) -> Ns {
        self.geometry.rev_ns
    }

    /// Per-command controller overhead.
    pub fn command_overhead(&self) -> Ns {
        self.overhead
    }

    /// Host turnaround of a closed loop driving this drive (not used by the drive).
    pub fn host_turnaround(&self) -> Ns {
        self.host_turnaround
    }

    /// Sectors acknowledged but not yet on the medium.
    pub fn dirty_sectors(&self) -> u64 {
        self.write_cache.dirty_sectors()
    }

    /// Replaces the fault ranges (e.g. seeded by a simulation's fault stream).
    pub fn set_faults(&mut self, ranges: Vec<FaultRange>) -> Result<(), ProfileError> {
        for (i, f) in ranges.iter().enumerate() {
            f.validate(i, self.geometry.capacity_sectors)?;
        }
        let f = &self.faults;
        self.faults = Faults::new(ranges, f.retry_ns(), f.full_ladder_ns(), f.cap_ns());
        Ok(())
    }

    /// `t mod T_rev`, the platter's phase at `t`: the quotient estimated with the reciprocal
    /// `rev_magic` is exact or one short, so one conditional subtraction makes it exact (this is
    /// on the ordering policies' per-candidate path, where a 64-bit division would dominate).
    #[inline]
    fn rev_phase(&self, t: Ns) -> Ns {
        let rev = self.geometry.rev_ns;
        let q = ((u128::from(t) * u128::from(self.rev_magic)) >> 64) as u64;
        let r = t - q * rev;
        if r >= rev {
            r - rev
        } else {
            r
        }
    }

    /// Time from `t` (actuator free, overhead done) until the first sector at (`cylinder`,
    /// `angle`) is under the head: seek from the current cylinder, then wait for the platter.
    #[inline]
    fn access(&self, t: Ns, cylinder: u32, angle: Ns, write: bool) -> Ns {
        self.access_from_phase(self.rev_phase(t), cylinder, angle, write)
    }

    /// [`Self::access`] given the platter phase `t_phase` at the start time.
    #[inline(always)]
    fn access_from_phase(&self, t_phase: Ns, cylinder: u32, angle: Ns, write: bool) -> Ns {
        let rev = self.geometry.rev_ns;
        let seek = self.seek_time(cylinder.abs_diff(self.cylinder), write);
        // Phase of the platter when the seek ends, then the wait until `angle` (< T_rev) comes
        // round: (angle − phase) mod T_rev.
        let phase = if self.seeks_below_3_revs {
            // t_phase + seek < 4 T_rev: reduce by 2 T_rev, then by T_rev, when above.
            let x = t_phase + seek;
            let x = if x >= 2 * rev { x - 2 * rev } else { x };
            if x >= rev {
                x - rev
            } else {
                x
            }
        } else {
            self.rev_phase(t_phase + seek)
        };
        let wait = angle + rev - phase;
        seek + if wait >= rev { wait - rev } else { wait }
    }

    /// Where positioning estimates at `now` start from.
    #[inline]
    fn origin(&self, now: Ns) -> Origin {
        let t = now.max(self.free_at) + self.overhead;
        Origin {
            lead: t - now,
            phase: self.rev_phase(t),
        }
    }

    /// [`Drive::positioning_time`] of `op` from `origin` (made at `now`), with what `m`
    /// remembers about it (brought up to date).
    #[inline(always)]
    fn position(&self, now: Ns, origin: &Origin, op: &MediaOp, m: &mut OpMemo) -> Ns {
        if op.is_flush() {
            // It needs no positioning of its own: destage starts where the heads are.
            return 0;
        }
        if op.write && self.caches_write(op) && self.write_cache.has_room(op.blocks.into(), now) {
            return self.write_hit_overhead;
        }
        let key = op.lba.wrapping_add(1);
        if m.key != key {
            *m = self.placed(op.lba);
        }
        if !op.write {
            let end = op.lba.saturating_add(op.blocks.into());
            let known = if m.blocks == op.blocks {
                m.miss_version
            } else {
                0
            };
            let (hit, miss_version) = self.read_cache.lookup_since(op.lba, end, now, known);
            let hit = match hit {
                ReadHit::Miss if self.write_cache.covers(op.lba, end) => ReadHit::Cached,
                hit => hit,
            };
            match hit {
                ReadHit::Cached => return self.read_hit_overhead,
                ReadHit::Streaming { media_done } => {
                    return self.read_hit_overhead.max(media_done.saturating_sub(now));
                }
                ReadHit::Miss => {
                    m.blocks = op.blocks;
                    m.miss_version = miss_version;
                }
            }
        }
        origin.lead + self.access_from_phase(origin.phase, m.cylinder, m.angle.into(), op.write)
    }

    /// [`Drive::positioning_times_memo`] of `queue` into `out` (as long), in the common case
    /// spelt out: a read that missed at `cache.since()` (nothing that grew since, `grown`,
    /// holds it), with no dirty data and seeks below 3 T_rev. The others (mostly the one op
    /// new to the queue) are positioned after the loop, which so makes no call and keeps its
    /// values in registers.
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    fn missed_reads<const N: usize>(
        &self,
        now: Ns,
        origin: &Origin,
        cache: &MissCheck<'_>,
        grown: [(u64, u64); N],
        queue: &mut [QueuedOp],
        out: &mut [Ns],
    ) {
        let (since, version) = (cache.since(), cache.version());
        let rev = self.geometry.rev_ns;
        // How many ops the loop left (their time `LEFT`, which no position is), and the last.
        const LEFT: Ns = Ns::MAX;
        let (mut left, mut last) = (0usize, 0usize);
        for (i, (QueuedOp { op, memo: m }, t)) in queue.iter_mut().zip(out.iter_mut()).enumerate() {
            let end = op.lba.saturating_add(op.blocks.into());
            let missed = !op.write
                & (m.key == op.lba.wrapping_add(1))
                & (m.blocks == op.blocks)
                & (m.miss_version == since)
                & !cache.near_stream(op.lba)
                & !grown
                    .iter()
                    .any(|&(start, seg_end)| (start <= op.lba) & (end <= seg_end));
            if missed {
                m.miss_version = version;
                // `access_from_phase` for a read, seeks below 3 T_rev.
                let seek = self.seek_read.time(m.cylinder.abs_diff(self.cylinder));
                // The wait for the platter, (angle − (phase + seek)) mod T_rev, taken of a
                // number that is positive and equal to it mod T_rev (phase + seek < 4 T_rev):
                // the reduction's comparisons would be coin tosses, its fix-up is rare.
                let wait = self.rev_phase(u64::from(m.angle) + 4 * rev - origin.phase - seek);
                *t = origin.lead + seek + wait;
            } else {
                *t = LEFT;
                (left, last) = (left + 1, i);
            }
        }
        let position = |(QueuedOp { op, memo: m }, t): (&mut QueuedOp, &mut Ns)| {
            *t = self.position_outlined(now, origin, op, m);
        };
        match left {
            0 => {}
            1 => {
                if let (Some(q), Some(t)) = (queue.get_mut(last), out.get_mut(last)) {
                    position((q, t));
                }
            }
            _ => queue
                .iter_mut()
                .zip(out.iter_mut())
                .filter(|(_, t)| **t == LEFT)
                .for_each(position),
        }
    }

    /// [`Drive::positioning_times_memo`] of `queue` into `out` (as long), any case.
    fn positions(
        &self,
        now: Ns,
        origin: &Origin,
        cache: &MissCheck<'_>,
        queue: &mut [QueuedOp],
        out: &mut [Ns],
    ) {
        let no_dirty = self.write_cache.is_empty();
        for (QueuedOp { op, memo: m }, t) in queue.iter_mut().zip(out.iter_mut()) {
            let end = op.lba.saturating_add(op.blocks.into());
            // A read that missed every cache when last asked about, and nothing that has
            // come into a cache since holds it: `position`, shorter.
            *t = if !op.write
                && m.key == op.lba.wrapping_add(1)
                && m.blocks == op.blocks
                && cache.still_misses(op.lba, end, m.miss_version)
                && (no_dirty || !self.write_cache.covers(op.lba, end))
            {
                m.miss_version = cache.version();
                origin.lead
                    + self.access_from_phase(origin.phase, m.cylinder, m.angle.into(), false)
            } else {
                self.position_outlined(now, origin, op, m)
            };
        }
    }

    #[inline(never)]
    fn position_outlined(&self, now: Ns, origin: &Origin, op: &MediaOp, m: &mut OpMemo) -> Ns {
        self.position(now, origin, op, m)
    }

    /// [`Self::position`] with the model's own memo (a direct-mapped table by LBA).
    #[inline]
    fn position_memoised(&self, now: Ns, origin: &Origin, op: &MediaOp) -> Ns {
        let slot = self.memo_slot(op.lba);
        let mut m = slot.get();
        let t = self.position(now, origin, op, &mut m);
        slot.set(m);
        t
    }

    fn memo_slot(&self, lba: u64) -> &Cell<OpMemo> {
        // The top PLACE_MEMO_BITS bits of a multiplicative hash: always in range.
        &self.place_memo
            [(lba.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - PLACE_MEMO_BITS)) as usize]
    }

    /// A fresh memo of `lba`: its cylinder and angle.
    #[inline]
    fn placed(&self, lba: u64) -> OpMemo {
        let (cylinder, angle, _) = self.geometry.place(lba);
        OpMemo {
            key: lba.wrapping_add(1),
            cylinder,
            angle: angle as u32,
            blocks: 0,
            miss_version: 0,
        }
    }

    /// Cylinder and angle of `lba`, memoised.
    fn place(&self, lba: u64) -> (u32, Ns) {
        let slot = self.memo_slot(lba);
        let mut p = slot.get();
        if p.key != lba.wrapping_add(1) {
            p = self.placed(lba);
            slot.set(p);
        }
        (p.cylinder, p.angle.into())
    }

    fn interface_time(&self, blocks: u64) -> Ns {
        (blocks as f64 * f64::from(self.geometry.sector_bytes) * self.interface_ns_per_byte) as Ns
    }

    /// A media access of `[lba, lba+blocks)` starting at actuator time `t` (≥ free_at).
    /// Returns (done, recovery, outcome) and moves the heads.
    fn media(&mut self, t: Ns, lba: u64, blocks: u64, write: bool) -> (Ns, Ns, MediaOutcome) {
        self.read_cache.stop_stream(t);
        let loc = self.geometry.locate(lba);
        let begin = t + self.overhead;
        let transfer_start = begin + self.access(begin, loc.cylinder, loc.angle_ns, write);
        let transfer = (blocks as f64 * loc.ns_per_sector) as Ns;
        let (recovery, outcome) = if write || self.faults.is_empty() {
            (0, MediaOutcome::Ok)
        } else {
            let r = self.faults.recovery(lba, blocks);
            (r.time, r.outcome)
        };
        let done = transfer_start + transfer + recovery;
        let last = lba.saturating_add(blocks.saturating_sub(1));
        self.cylinder = self.geometry.locate(last).cylinder;
        self.head_lba = last;
        self.free_at = done;
        if !write && outcome == MediaOutcome::Ok {
            self.read_cache
                .insert(lba, lba.saturating_add(blocks), done, loc.ns_per_sector);
        }
        (done, recovery, outcome)
    }

    /// Destages one dirty write when the actuator frees up: the oldest once it has waited
    /// `destage_max_age`, else the one cheapest to reach from the head.
    fn destage_one(&mut self) {
        let start = self.free_at;
        let t = start + self.overhead;
        let cache = &self.write_cache;
        let slot = match cache.oldest() {
            Some((slot, d)) if start.saturating_sub(d.since) >= self.destage_max_age => Some(slot),
            _ => cache
                .near(self.head_lba, DESTAGE_SCAN)
                .min_by_key(|(_, d)| {
                    let (cylinder, angle) = self.place(d.lba);
                    self.access(t, cylinder, angle, true)
                })
                .map(|(slot, _)| slot),
        };
        if let Some(d) = slot.and_then(|slot| self.write_cache.remove(slot)) {
            let (done, _, _) = self.media(start, d.lba, d.blocks, true);
            self.write_cache.destaging(d.blocks, done);
        }
    }

    /// Destages in the time the actuator was idle before `now`: while destage is forced at
    /// once, else from `destage_idle_delay` after it freed up, one write after another while
    /// the next would start before `now`. The last may run past `now`: a command that
    /// arrives then waits for it, as on a drive, which cannot stop a write half done.
    fn destage_idle(&mut self, now: Ns) {
        let lazy_from = self.free_at.saturating_add(self.destage_idle_delay);
        while !self.write_cache.is_empty() {
            let begin = if self.write_cache.forced() {
                self.free_at
            } else {
                self.free_at.max(lazy_from)
            };
            if begin >= now {
                return;
            }
            self.free_at = begin;
            self.destage_one();
        }
    }

    fn read_hit(&self, now: Ns, lba: u64, end: u64) -> ReadHit {
        match self.read_cache.lookup(lba, end, now) {
            ReadHit::Miss if self.write_cache.covers(lba, end) => ReadHit::Cached,
            hit => hit,
        }
    }

    /// Whether a queued read is known from its memo to miss both caches at `now`, so that
    /// [`Self::served_from_cache`] is false without a lookup: it missed the read cache's
    /// segments at their current version (only growth, which moves the version, makes a
    /// segment hold more), the read-ahead stream cannot serve it and no dirty write holds it.
    #[inline]
    fn known_miss(&self, now: Ns, q: &QueuedOp) -> bool {
        let QueuedOp { op, memo: m } = q;
        !op.write
            && m.key == op.lba.wrapping_add(1)
            && m.blocks == op.blocks
            && m.miss_version == self.read_cache.version()
            && !self.read_cache.may_stream(op.lba, now)
            && (self.write_cache.is_empty()
                || !self
                    .write_cache
                    .covers(op.lba, op.lba.saturating_add(op.blocks.into())))
    }

    /// The media transfer of `op` at its zone's rate.
    fn media_transfer(&self, op: &MediaOp) -> Ns {
        (f64::from(op.blocks) * self.geometry.locate(op.lba).ns_per_sector) as Ns
    }

    /// Whether `op` at `now` would not need the actuator (a read hit or a cached write).
    fn served_from_cache(&self, now: Ns, op: &MediaOp) -> bool {
        if op.write {
            self.caches_write(op) && self.write_cache.has_room(op.blocks.into(), now)
        } else {
            let end = op.lba.saturating_add(op.blocks.into());
            matches!(self.read_hit(now, op.lba, end), ReadHit::Cached)
        }
    }

    fn caches_write(&self, op: &MediaOp) -> bool {
        self.write_cache_enabled && !op.fua && self.write_cache.can_hold(op.blocks.into())
    }
}

impl Drive for Hdd {
    fn parallelism(&self) -> usize {
        1
    }

    /// The actuator gives up the abandoned access (e.g. its retry revolutions) at `now`; the
    /// head stays where the access left it. A destage booked after the access still runs,
    /// from `now`.
    fn abort(&mut self, now: Ns, _op: &MediaOp) {
        let trailing = self.free_at.saturating_sub(self.host_until);
        self.free_at = self.free_at.min(now.saturating_add(trailing));
        self.host_until = self.host_until.min(now);
    }

    fn positioning_time(&self, now: Ns, op: &MediaOp) -> Ns {
        self.position_memoised(now, &self.origin(now), op)
    }

    fn positioning_times(&self, now: Ns, ops: &[MediaOp], out: &mut Vec<Ns>) {
        let origin = self.origin(now);
        out.clear();
        out.extend(
            ops.iter()
                .map(|op| self.position_memoised(now, &origin, op)),
        );
    }

    fn positioning_times_memo(&self, now: Ns, queue: &mut [QueuedOp], out: &mut Vec<Ns>) {
        let origin = self.origin(now);
        // Memos were brought up to date at the last call, the oldest op's among them.
        let since = queue.first().map_or(0, |q| q.memo.miss_version);
        let cache = self.read_cache.miss_check(now, since);
        out.clear();
        out.resize(queue.len(), 0);
        if self.write_cache.is_empty() && self.seeks_below_3_revs {
            match *cache.grown() {
                [] => self.missed_reads(now, &origin, &cache, [], queue, out),
                [a] => self.missed_reads(now, &origin, &cache, [a], queue, out),
                [a, b] => self.missed_reads(now, &origin, &cache, [a, b], queue, out),
                _ => self.positions(now, &origin, &cache, queue, out),
            }
        } else {
            self.positions(now, &origin, &cache, queue, out);
        }
    }

    fn service_time(&self, now: Ns, op: &MediaOp) -> Ns {
        let pos = self.positioning_time(now, op);
        if self.served_from_cache(now, op) {
            return pos + self.interface_time(op.blocks.into());
        }
        pos + self.media_transfer(op)
    }

    fn service_time_memo(&self, now: Ns, queued: &QueuedOp, positioning: Ns) -> Ns {
        if self.known_miss(now, queued) {
            positioning + self.media_transfer(&queued.op)
        } else {
            self.service_time(now, &queued.op)
        }
    }

    fn positioning_after(
        &self,
        now: Ns,
        queue: &[QueuedOp],
        times: &[Ns],
        firsts: &[usize],
        nexts: &[usize],
        out: &mut Vec<Ns>,
    ) -> bool {
        out.clear();
        let ok = |i: &usize| *i < queue.len() && *i < times.len();
        if !firsts.iter().chain(nexts).all(ok) {
            return false;
        }
        // Per next op: what it costs if the caches serve it (what it costs now, wherever the
        // heads are), else its place. On the stack for the few limited commands of a queue.
        let mut on_stack = [NextOp::default(); NEXTS_ON_STACK];
        let mut on_heap = Vec::new();
        let next_ops = match on_stack.get_mut(..nexts.len()) {
            Some(s) => s,
            None => {
                on_heap.resize(nexts.len(), NextOp::default());
                &mut on_heap[..]
            }
        };
        for (n, q) in next_ops.iter_mut().zip(nexts.iter().map(|&i| &queue[i])) {
            let (op, m) = (&q.op, &q.memo);
            *n = if self.known_miss(now, q) {
                NextOp {
                    cached: None,
                    cylinder: m.cylinder,
                    angle: m.angle.into(),
                    write: false,
                }
            } else {
                let (cylinder, angle) = self.place(op.lba);
                NextOp {
                    cached: self
                        .served_from_cache(now, op)
                        .then(|| self.positioning_time(now, op)),
                    cylinder,
                    angle,
                    write: op.write,
                }
            };
        }
        let rev = self.geometry.rev_ns;
        for (q, pos) in firsts.iter().map(|&i| (&queue[i], times[i])) {
            let first = &q.op;
            // Where the first op leaves the heads, and when the next one's overhead is done.
            let (cylinder, done) = if !self.known_miss(now, q) && self.served_from_cache(now, first)
            {
                let ready = now + pos + self.interface_time(first.blocks.into());
                (self.cylinder, ready.max(self.free_at))
            } else {
                let blocks = u64::from(first.blocks);
                let loc = self.geometry.locate(first.lba);
                let last = first.lba.saturating_add(blocks.saturating_sub(1));
                let transfer = (blocks as f64 * loc.ns_per_sector) as Ns;
                (self.geometry.locate(last).cylinder, now + pos + transfer)
            };
            let t = done + self.overhead;
            for n in &*next_ops {
                out.push(n.cached.unwrap_or_else(|| {
                    let seek = self.seek_time(n.cylinder.abs_diff(cylinder), n.write);
                    let wait = n.angle + rev - self.rev_phase(t + seek);
                    self.overhead + seek + if wait >= rev { wait - rev } else { wait }
                }));
            }
        }
        true
    }

    /// Past the high watermark, until the low one, a destage follows every command that
    /// used the actuator (after its media access: reads go ahead of destage) and every
    /// command that found it idle.
    fn start(&mut self, now: Ns, op: &MediaOp) -> Service {
        self.write_cache.retire(now);
        self.destage_idle(now);
        let busy = self.free_at;
        let service = self.serve(now, op);
        self.host_until = self.free_at;
        if self.write_cache.forced() && (self.free_at != busy || busy <= now) {
            self.free_at = self.free_at.max(now);
            self.destage_one();
        }
        service
    }

    fn flush(&mut self, now: Ns) -> Ns {
        self.destage_idle(now);
        self.free_at = self.free_at.max(now);
        while !self.write_cache.is_empty() {
            self.destage_one();
        }
        self.free_at
    }

    fn write_cache(&self) -> Option<bool> {
        Some(self.write_cache_enabled)
    }

    /// Off: every dirty write is destaged from `now` (after the access under way), and the
    /// actuator is busy until it is done.
    fn set_write_cache(&mut self, now: Ns, enabled: bool) {
        if !enabled {
            self.flush(now);
        }
        self.write_cache_enabled = enabled;
    }
}

impl Hdd {
    /// [`Drive::start`] of `op` once idle destage is done.
    fn serve(&mut self, now: Ns, op: &MediaOp) -> Service {
        let blocks = u64::from(op.blocks);
        let end = op.lba.saturating_add(blocks);
        if op.write {
            self.read_cache.invalidate(op.lba, end);
            if self.caches_write(op) {
                // Full: the write is accepted once destage has made room, and the host waits.
                let mut ready = now;
                while !self.write_cache.has_room(blocks, ready) {
                    if let Some(t) = self.write_cache.next_release(ready) {
                        ready = t;
                    } else if self.write_cache.is_empty() {
                        break;
                    } else {
                        self.free_at = self.free_at.max(ready);
                        self.destage_one();
                    }
                }
                self.write_cache.push(op.lba, blocks, ready);
                let done = ready + self.write_hit_overhead + self.interface_time(blocks);
                return Service {
                    done_at: done,
                    outcome: MediaOutcome::Ok,
                    recovery: 0,
                };
            }
            // Written through (FUA, WCE off, or larger than the cache): on the medium when
            // done, and cached writes it wholly replaces need no destage.
            self.write_cache.supersede(op.lba, end);
            let (done, recovery, outcome) = self.media(now.max(self.free_at), op.lba, blocks, true);
            return Service {
                done_at: done,
                outcome,
                recovery,
            };
        }
        match self.read_hit(now, op.lba, end) {
            ReadHit::Cached => {
                self.read_cache.touch(op.lba, end);
                let done = now + self.read_hit_overhead + self.interface_time(blocks);
                Service {
                    done_at: done,
                    outcome: MediaOutcome::Ok,
                    recovery: 0,
                }
            }
            ReadHit::Streaming { media_done } => {
                let done =
                    media_done.max(now + self.read_hit_overhead + self.interface_time(blocks));
                self.read_cache.extend_stream(end, media_done);
                self.free_at = self.free_at.max(media_done);
                self.cylinder = self.geometry.locate(end.saturating_sub(1)).cylinder;
                self.head_lba = end.saturating_sub(1);
                Service {
                    done_at: done,
                    outcome: MediaOutcome::Ok,
                    recovery: 0,
                }
            }
            ReadHit::Miss => {
                let (done, recovery, outcome) =
                    self.media(now.max(self.free_at), op.lba, blocks, false);
                Service {
                    done_at: done,
                    outcome,
                    recovery,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rev_phase_is_the_remainder() {
        for rpm in [1000, 5400, 7200, 7500, 10_000, 15_000, 30_000] {
            let mut p = HddProfile::default_22tb();
            p.geometry.rpm = rpm;
            let Ok(hdd) = Hdd::new(&p) else {
                unreachable!("valid rpm {rpm}")
            };
            let rev = hdd.rev_ns();
            for k in [0, 1, 2, 3, 1000, 123_456_789, u64::MAX / rev - 1] {
                for t in [k * rev, k * rev + 1, k * rev + rev - 1, k * rev + rev / 2] {
                    assert_eq!(hdd.rev_phase(t), t % rev, "t = {t}, rev = {rev}");
                }
            }
            assert_eq!(hdd.rev_phase(u64::MAX), u64::MAX % rev);
        }
    }

    #[test]
    fn access_time_is_seek_plus_rotational_wait() {
        let fast = Hdd::default_22tb();
        assert!(
            fast.seeks_below_3_revs,
            "the default drive seeks within 3 revolutions"
        );
        let general = Hdd {
            seeks_below_3_revs: false,
            ..fast.clone()
        };
        let rev = fast.rev_ns();
        let cylinders = fast.geometry().cylinders;
        for (i, t) in (0..rev).step_by(997_331).enumerate() {
            for cylinder in (0..cylinders).step_by(4099) {
                let angle = (t + 7_919 * i as u64 + u64::from(cylinder)) % rev;
                for write in [false, true] {
                    let seek = fast.seek_time(cylinder.abs_diff(fast.cylinder), write);
                    let want = seek + (angle + rev - (t + seek) % rev) % rev;
                    assert_eq!(fast.access_from_phase(t, cylinder, angle, write), want);
                    assert_eq!(general.access_from_phase(t, cylinder, angle, write), want);
                }
            }
        }
    }
}
