//! Segmented read cache with sequential detection (DiskSim-style
//! segments, [DS] valid/atlas10k.diskspecs). After a media read the head keeps reading ahead
//! into the read's segment while the actuator stays idle; a read that starts inside what is
//! already buffered (or being streamed) is served without a seek.

use crate::Ns;

#[derive(Clone, Copy, Debug, Default)]
struct Segment {
    start: u64,
    end: u64,
    /// Last use, for least-recently-used replacement (0 = empty).
    stamp: u64,
}

/// The read-ahead stream of the most recent media read, alive while the actuator is idle.
#[derive(Clone, Copy, Debug)]
struct Stream {
    segment: usize,
    /// The segment's first LBA (fixed while the stream lives).
    start: u64,
    /// LBA up to which the media read itself went, and when it got there.
    read_end: u64,
    at: Ns,
    ns_per_sector: f64,
    /// Read-ahead stops here unless a sequential command extends it.
    limit: u64,
}

/// How a read would be served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadHit {
    Miss,
    /// Everything is in the buffer.
    Cached,
    /// The start is buffered and the stream reaches the end at this time.
    Streaming {
        media_done: Ns,
    },
}

/// Growth events remembered for [`ReadCache::lookup_since`] (a power of two: slot by mask).
const GROWTH_LOG: usize = 8;
const _: () = assert!(GROWTH_LOG.is_power_of_two());

#[derive(Clone, Debug)]
pub struct ReadCache {
    segments: Vec<Segment>,
    /// Counts growth events (a segment gained data); starts at 1 so 0 can mean "unknown".
    version: u64,
    /// The last `GROWTH_LOG` growth events as (start, end), slot `version % GROWTH_LOG`: a
    /// read known to miss at an earlier version only needs checking against these (ordering
    /// policies ask about every queued command at every pick).
    growth: [(u64, u64); GROWTH_LOG],
    stream: Option<Stream>,
    clock: u64,
    read_ahead: u64,
}

/// What the cache looks like at one `now`, for telling cheaply that reads known to miss
/// still miss (see [`ReadCache::miss_check`]).
#[derive(Clone, Copy, Debug)]
pub struct MissCheck<'a> {
    /// Reads starting in `[stream_start, stream_limit]` may be served by the stream.
    stream_start: u64,
    stream_limit: u64,
    version: u64,
    /// A version most reads asked about were known to miss at (`u64::MAX`: none), and the
    /// ranges that grew since then outside the stream's range (`grown[..n]`, at most two).
    since: u64,
    grown: [(u64, u64); 2],
    n: usize,
    growth: &'a [(u64, u64); GROWTH_LOG],
}

impl MissCheck<'_> {
    /// The version a read that still misses now misses at.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The version most reads were known to miss at, when what grew since then is known
    /// ([`Self::grown`]); `u64::MAX` (a version never reached) otherwise.
    pub fn since(&self) -> u64 {
        self.since
    }

    /// The ranges that grew since [`Self::since`], but for those inside the stream's range.
    pub fn grown(&self) -> &[(u64, u64)] {
        self.grown.get(..self.n).unwrap_or_default()
    }

    /// Whether the read-ahead stream may serve a read starting at `lba`.
    #[inline(always)]
    pub fn near_stream(&self, lba: u64) -> bool {
        (self.stream_start <= lba) & (lba <= self.stream_limit)
    }

    /// Whether a read of `[lba, end)` known to miss at `miss_version` surely misses now, as
    /// [`ReadCache::lookup_since`] would find (false: ask it).
    #[inline(always)]
    pub fn still_misses(&self, lba: u64, end: u64, miss_version: u64) -> bool {
        if self.near_stream(lba) {
            return false;
        }
        if miss_version == self.since {
            return !self
                .grown()
                .iter()
                .any(|&(start, seg_end)| (start <= lba) & (end <= seg_end));
        }
        if miss_version == 0 || self.version.wrapping_sub(miss_version) > GROWTH_LOG as u64 {
            return false;
        }
        let mut maybe = false;
        let mut v = miss_version;
        while v != self.version {
            v += 1;
            let (start, seg_end) = self.growth[v as usize & (GROWTH_LOG - 1)];
            maybe |= (start <= lba) & (end <= seg_end);
        }
        !maybe
    }
}

impl Stream {
    /// LBA the read-ahead has reached at `t`.
    fn reached(&self, t: Ns) -> u64 {
        let ahead = (t.saturating_sub(self.at) as f64 / self.ns_per_sector) as u64;
        self.read_end.saturating_add(ahead).min(self.limit)
    }
}

impl ReadCache {
    pub fn new(segments: u32, read_ahead_sectors: u32) -> Self {
        Self {
            segments: vec![Segment::default(); segments as usize],
            version: 1,
            growth: [(0, 0); GROWTH_LOG],
            stream: None,
            clock: 0,
            read_ahead: read_ahead_sectors.into(),
        }
    }

    /// Whether `[lba, end)` read at `now` hits.
    pub fn lookup(&self, lba: u64, end: u64, now: Ns) -> ReadHit {
        if let Some(hit) = self.stream_hit(lba, end, now) {
            return hit;
        }
        if self.segments_hit(lba, end) {
            ReadHit::Cached
        } else {
            ReadHit::Miss
        }
    }

    /// As [`Self::lookup`] for a read already known to miss at `miss_version` (0: unknown).
    /// Also returns the version at which it misses now (0 on a hit), to remember.
    #[inline]
    pub fn lookup_since(&self, lba: u64, end: u64, now: Ns, miss_version: u64) -> (ReadHit, u64) {
        if let Some(hit) = self.stream_hit(lba, end, now) {
            return (hit, 0);
        }
        if miss_version != 0 && self.version.wrapping_sub(miss_version) <= GROWTH_LOG as u64 {
            // Only segments that grew since can newly hold it; a match is re-checked in full
            // because the grown segment may have been dropped since.
            let mut maybe = false;
            let mut v = miss_version;
            while v != self.version {
                v += 1;
                let (start, seg_end) = self.growth[v as usize & (GROWTH_LOG - 1)];
                maybe |= (start <= lba) & (end <= seg_end);
            }
            if !maybe {
                return (ReadHit::Miss, self.version);
            }
        }
        if self.segments_hit(lba, end) {
            (ReadHit::Cached, 0)
        } else {
            (ReadHit::Miss, self.version)
        }
    }

    /// Counts growth events: a read that missed at this version misses while it stays the
    /// same, but for what the read-ahead stream serves ([`Self::may_stream`]).
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Whether the read-ahead stream may serve a read starting at `lba` at `now` (false: it
    /// surely does not, as [`Self::lookup`] would find).
    pub fn may_stream(&self, lba: u64, now: Ns) -> bool {
        self.stream
            .as_ref()
            .is_some_and(|s| (s.start <= lba) & (lba <= s.limit) & (now >= s.at))
    }

    /// The cache at `now` for [`MissCheck::still_misses`], where most reads asked about
    /// were last seen to miss at version `since`: an ordering policy asks about every queued
    /// read at every pick, nearly all of them misses.
    pub fn miss_check(&self, now: Ns, since: u64) -> MissCheck<'_> {
        let (stream_start, stream_limit) = match &self.stream {
            // As in `stream_hit`: the stream is only looked at from its own time on.
            Some(s) if now >= s.at => (s.start, s.limit),
            _ => (1, 0),
        };
        let mut check = MissCheck {
            stream_start,
            stream_limit,
            version: self.version,
            since: u64::MAX,
            grown: [(u64::MAX, 0); 2],
            n: 0,
            growth: &self.growth,
        };
        if since == 0 || self.version.wrapping_sub(since) > GROWTH_LOG as u64 {
            return check;
        }
        let mut n = 0;
        let mut v = since;
        // Versions start at 1 and grow by one: `u64::MAX` is never reached.
        while v != self.version {
            v += 1;
            let (start, end) = self.growth[v as usize & (GROWTH_LOG - 1)];
            // A read held by a range inside the stream's starts there: `still_misses` has
            // turned it away already.
            if (stream_start <= start) & (end <= stream_limit) {
                continue;
            }
            let Some(g) = check.grown.get_mut(n) else {
                return check;
            };
            *g = (start, end);
            n += 1;
        }
        check.since = since;
        check.n = n;
        check
    }

    /// The read-ahead stream holds, or is about to reach, `[lba, end)`.
    fn stream_hit(&self, lba: u64, end: u64, now: Ns) -> Option<ReadHit> {
        let s = self.stream.as_ref()?;
        // Cheap range test first: random reads almost never fall near the stream.
        if (lba > s.limit) | (s.start > lba) | (now < s.at) {
            return None;
        }
        let reached = s.reached(now);
        if end <= reached {
            return Some(ReadHit::Cached);
        }
        if lba <= reached {
            let more = end.saturating_sub(s.read_end) as f64 * s.ns_per_sector;
            return Some(ReadHit::Streaming {
                media_done: s.at + more as Ns,
            });
        }
        None
    }

    fn segments_hit(&self, lba: u64, end: u64) -> bool {
        // Non-short-circuit `&` and `|`: for random reads each test is a coin toss, and a
        // mispredicted branch costs more than the whole scan.
        self.segments.iter().fold(false, |hit, g| {
            hit | ((g.stamp != 0) & (g.start <= lba) & (end <= g.end))
        })
    }

    /// Segment data now covers `[start, end)`.
    fn grew(&mut self, start: u64, end: u64) {
        self.version += 1;
        self.growth[self.version as usize & (GROWTH_LOG - 1)] = (start, end);
    }

    /// The actuator leaves the stream at `t` (another media access starts): freeze what was read.
    pub fn stop_stream(&mut self, t: Ns) {
        if let Some(s) = self.stream.take() {
            let reached = if t >= s.at { s.reached(t) } else { s.read_end };
            if let Some(g) = self.segments.get_mut(s.segment) {
                g.end = g.end.max(reached);
                let (start, end) = (g.start, g.end);
                self.grew(start, end);
            }
        }
    }

    /// A media read of `[lba, end)` finished at `at`: it fills a segment and starts read-ahead.
    pub fn insert(&mut self, lba: u64, end: u64, at: Ns, ns_per_sector: f64) {
        self.clock += 1;
        let victim = self
            .segments
            .iter()
            .enumerate()
            .min_by_key(|(_, g)| g.stamp)
            .map(|(i, _)| i);
        if let Some(i) = victim {
            if let Some(g) = self.segments.get_mut(i) {
                *g = Segment {
                    start: lba,
                    end,
                    stamp: self.clock,
                };
            }
            self.stream = Some(Stream {
                segment: i,
                start: lba,
                read_end: end,
                at,
                ns_per_sector,
                limit: end.saturating_add(self.read_ahead),
            });
            self.grew(lba, end);
        }
    }

    /// A sequential read extended the stream to `end` at `at`.
    pub fn extend_stream(&mut self, end: u64, at: Ns) {
        self.clock += 1;
        if let Some(s) = &mut self.stream {
            if end > s.read_end {
                s.read_end = end;
                s.at = at;
                s.limit = end.saturating_add(self.read_ahead);
            }
            if let Some(g) = self.segments.get_mut(s.segment) {
                g.end = g.end.max(end);
                g.stamp = self.clock;
                let (start, seg_end) = (g.start, g.end);
                self.grew(start, seg_end);
            }
        }
    }

    /// Marks a segment that served a hit as recently used.
    pub fn touch(&mut self, lba: u64, end: u64) {
        self.clock += 1;
        let clock = self.clock;
        if let Some(g) = self
            .segments
            .iter_mut()
            .find(|g| g.stamp != 0 && g.start <= lba && end <= g.end)
        {
            g.stamp = clock;
        }
    }

    /// A write to `[lba, end)` makes overlapping buffered data stale.
    pub fn invalidate(&mut self, lba: u64, end: u64) {
        for (i, g) in self.segments.iter_mut().enumerate() {
            if g.stamp != 0 && g.start < end && lba < g.end.max(g.start + 1) {
                *g = Segment::default();
                if self.stream.is_some_and(|s| s.segment == i) {
                    self.stream = None;
                }
            }
        }
        if let Some(s) = self.stream {
            // The read-ahead would run into the written range: stop it before.
            if s.limit > lba && s.read_end <= lba {
                self.stream = Some(Stream { limit: lba, ..s });
            }
        }
    }
}
