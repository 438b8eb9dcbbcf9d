//! Latency statistics: HDR histograms (1 µs resolution, 3 significant digits) plus exact
//! count, sum and maximum, and the duration-limit completion counters of a run.
//!
//! Each percentile comes with the number of samples beyond it: a percentile with few samples
//! beyond it is one of the few largest latencies seen, not an estimate of the tail, so reports
//! print it only from [`MIN_SAMPLES_BEYOND`] on.

use hdrhistogram::Histogram;
use serde::Serialize;

/// Largest latency the histogram resolves (one hour, in µs); longer ones are clamped.
const MAX_US: u64 = 3_600_000_000;

/// The reported percentiles p50, p90, p99, p99.9 and p99.99, each as the share of samples that
/// lie beyond it, in parts per million (integers, so a count of samples beyond is exact).
const TAILS_PPM: [u64; 5] = [500_000, 100_000, 10_000, 1_000, 100];

/// Their names as tables print them.
pub const PERCENTILE_NAMES: [&str; 5] = ["p50", "p90", "p99", "p99.9", "p99.99"];

/// Fewest samples beyond a percentile for a report to print it: with fewer, its value is
/// decided by a handful of samples (p99.99 needs 100,000 in its group, p99 1,000).
pub const MIN_SAMPLES_BEYOND: u64 = 10;

/// Latencies and counters of one group of commands (a class, or all).
#[derive(Clone, Debug)]
pub struct LatencyStats {
    hist: Histogram<u64>,
    count: u64,
    sum_ns: u128,
    min_ns: u64,
    max_ns: u64,
    bytes: u64,
    /// Commands whose data the drive transferred for the host (`bytes` counts theirs).
    with_data: u64,
    /// Reads the drive ended without data that a replica served instead.
    replica: u64,
    /// Commands that carried a duration limit descriptor (DLD 1..=7).
    limited: u64,
    limit_missed: u64,
    completed_unavailable: u64,
    aborted: u64,
}

impl Default for LatencyStats {
    fn default() -> Self {
        Self::new()
    }
}

/// Latency percentiles in ms (issue 3 JSON `lat_ms`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct LatencySummary {
    pub min: f64,
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub p9999: f64,
    pub max: f64,
}

impl LatencySummary {
    /// p50, p90, p99, p99.9 and p99.99, in the order of [`PERCENTILE_NAMES`].
    pub fn percentiles(&self) -> [f64; 5] {
        [self.p50, self.p90, self.p99, self.p999, self.p9999]
    }
}

/// How many samples lie beyond each percentile of [`LatencySummary`]: of n samples, the
/// percentile p is the one ranked ceil(p × n) from the smallest, and n − ceil(p × n) lie
/// beyond it. (JSON `samples_beyond`, keys as in `lat_ms`.)
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SamplesBeyond {
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
    pub p9999: u64,
}

impl SamplesBeyond {
    /// Of `n` samples.
    pub fn of(n: u64) -> Self {
        let [p50, p90, p99, p999, p9999] = TAILS_PPM.map(|t| beyond(n, t));
        Self {
            p50,
            p90,
            p99,
            p999,
            p9999,
        }
    }

    /// In the order of [`PERCENTILE_NAMES`].
    pub fn counts(&self) -> [u64; 5] {
        [self.p50, self.p90, self.p99, self.p999, self.p9999]
    }

    /// The fewest of each, over several runs.
    pub fn min(self, other: Self) -> Self {
        Self {
            p50: self.p50.min(other.p50),
            p90: self.p90.min(other.p90),
            p99: self.p99.min(other.p99),
            p999: self.p999.min(other.p999),
            p9999: self.p9999.min(other.p9999),
        }
    }
}

/// Samples beyond the percentile with `tail_ppm` parts per million above it, of `n`:
/// n − ceil(n × (1 − tail/10⁶)) = floor(n × tail / 10⁶).
fn beyond(n: u64, tail_ppm: u64) -> u64 {
    u64::try_from(u128::from(n) * u128::from(tail_ppm.min(1_000_000)) / 1_000_000)
        .unwrap_or(u64::MAX)
}

/// A group's results over a measured interval (issue 3 JSON `STATS`; field order is the
/// output order).
///
/// `ios`, `iops` and `lat_ms` count every completion, the ones a duration limit policy ended
/// early included: how fast a command was failed is what fast fail is judged by. `data_ios`,
/// `data_iops` and `mib_s` count only the commands whose data the drive transferred for the
/// host, so `mib_s` = `data_iops` × the transfer size is the drive's throughput; a read the
/// drive ended without data and a replica served instead is in `replica_ios` (its latency,
/// with the replica's answer, is in `lat_ms`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct StatsSummary {
    pub ios: u64,
    pub iops: f64,
    pub data_ios: u64,
    pub data_iops: f64,
    pub mib_s: f64,
    pub replica_ios: u64,
    pub lat_ms: LatencySummary,
    pub samples_beyond: SamplesBeyond,
    /// Commands with a duration limit descriptor that exceeded none of its limits.
    pub limit_met: u64,
    pub limit_missed: u64,
    pub completed_unavailable: u64,
    pub aborted: u64,
}

/// Rounds to 1 µs in ms, 0.001 in rates: stable, readable output.
fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

impl LatencyStats {
    pub fn new() -> Self {
        Self {
            hist: Self::histogram(),
            count: 0,
            sum_ns: 0,
            min_ns: u64::MAX,
            max_ns: 0,
            bytes: 0,
            with_data: 0,
            replica: 0,
            limited: 0,
            limit_missed: 0,
            completed_unavailable: 0,
            aborted: 0,
        }
    }

    /// 1 µs .. 1 h at 3 significant digits: constant bounds that hdrhistogram accepts.
    #[allow(clippy::expect_used)]
    fn histogram() -> Histogram<u64> {
        Histogram::new_with_bounds(1, MAX_US, 3).expect("constant histogram bounds are valid")
    }

    /// Records one command that took `latency_ns`: `data` is the bytes the drive transferred
    /// for it, `None` when the drive ended it without its data (aborted, DATA CURRENTLY
    /// UNAVAILABLE, an error).
    pub fn record(&mut self, latency_ns: u64, data: Option<u64>) {
        let us = (latency_ns / 1000).clamp(1, MAX_US);
        self.hist.saturating_record(us);
        self.count += 1;
        self.sum_ns += u128::from(latency_ns);
        self.min_ns = self.min_ns.min(latency_ns);
        self.max_ns = self.max_ns.max(latency_ns);
        if let Some(bytes) = data {
            self.with_data += 1;
            self.bytes += bytes;
        }
    }

    /// Counts a command that carried a duration limit descriptor (met or missed).
    pub fn count_limited(&mut self) {
        self.limited += 1;
    }
    /// Counts a command that exceeded a duration limit (whatever its policy did).
    pub fn count_limit_missed(&mut self) {
        self.limit_missed += 1;
    }
    /// Counts a policy Dh completion (GOOD, DATA CURRENTLY UNAVAILABLE).
    pub fn count_completed_unavailable(&mut self) {
        self.completed_unavailable += 1;
    }
    /// Counts a policy Eh/Fh abort.
    pub fn count_aborted(&mut self) {
        self.aborted += 1;
    }
    /// Counts a read the drive ended without data that a replica served instead.
    pub fn count_replica(&mut self) {
        self.replica += 1;
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// Latency (ns) at quantile `q` (0..=1), at histogram resolution.
    pub fn quantile_ns(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        // Histogram buckets hold whole µs; keep every quantile within the exact extremes.
        self.hist
            .value_at_quantile(q)
            .saturating_mul(1000)
            .clamp(self.min_ns, self.max_ns)
    }

    /// Latency (ns) of the sample ranked `rank` from the smallest (1-based), at histogram
    /// resolution.
    fn at_rank_ns(&self, rank: u64) -> u64 {
        let n = self.hist.len();
        if n == 0 {
            return 0;
        }
        // value_at_quantile(q) takes rank ceil(q × n): half a rank below keeps the float
        // product off the boundary, so it lands on `rank` exactly.
        let q = (rank.clamp(1, n) as f64 - 0.5) / n as f64;
        self.hist
            .value_at_quantile(q)
            .saturating_mul(1000)
            .clamp(self.min_ns, self.max_ns)
    }

    /// The percentile with `tail_ppm` parts per million of the samples beyond it (100: p99.99),
    /// in ns, and how many samples lie beyond it.
    pub fn percentile_ns(&self, tail_ppm: u64) -> (u64, u64) {
        let n = self.hist.len();
        let beyond = beyond(n, tail_ppm);
        (self.at_rank_ns(n - beyond), beyond)
    }

    /// Fraction of recorded commands at or below `ns`.
    pub fn fraction_below(&self, ns: u64) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        let us = (ns / 1000).clamp(1, MAX_US);
        self.hist.count_between(0, us) as f64 / self.hist.len() as f64
    }

    /// (latency ms, cumulative fraction) at the histogram's distinct values, for CDF plots.
    pub fn cdf(&self) -> Vec<(f64, f64)> {
        let total = self.hist.len().max(1) as f64;
        let mut seen = 0u64;
        self.hist
            .iter_recorded()
            .map(|v| {
                seen += v.count_at_value();
                (v.value_iterated_to() as f64 / 1000.0, seen as f64 / total)
            })
            .collect()
    }

    pub fn merge(&mut self, other: &LatencyStats) {
        // Same bounds on both sides, so adding cannot fail; saturate the counts if it did.
        if self.hist.add(&other.hist).is_err() {
            self.hist.saturating_record_n(MAX_US, other.hist.len());
        }
        self.count += other.count;
        self.sum_ns += other.sum_ns;
        self.min_ns = self.min_ns.min(other.min_ns);
        self.max_ns = self.max_ns.max(other.max_ns);
        self.bytes += other.bytes;
        self.with_data += other.with_data;
        self.replica += other.replica;
        self.limited += other.limited;
        self.limit_missed += other.limit_missed;
        self.completed_unavailable += other.completed_unavailable;
        self.aborted += other.aborted;
    }

    /// The summary over a measured interval of `interval_ns`.
    pub fn summary(&self, interval_ns: u64) -> StatsSummary {
        let secs = interval_ns as f64 / 1e9;
        let per_s = |x: f64| if secs > 0.0 { round3(x / secs) } else { 0.0 };
        let ms = |ns: u64| round3(ns as f64 / 1e6);
        let beyond = SamplesBeyond::of(self.hist.len());
        let [p50, p90, p99, p999, p9999] = TAILS_PPM.map(|t| ms(self.percentile_ns(t).0));
        let mean_ns = if self.count == 0 {
            0.0
        } else {
            self.sum_ns as f64 / self.count as f64
        };
        StatsSummary {
            ios: self.count,
            iops: per_s(self.count as f64),
            data_ios: self.with_data,
            data_iops: per_s(self.with_data as f64),
            mib_s: per_s(self.bytes as f64 / (1u64 << 20) as f64),
            replica_ios: self.replica,
            lat_ms: LatencySummary {
                min: if self.count == 0 {
                    0.0
                } else {
                    ms(self.min_ns)
                },
                mean: round3(mean_ns / 1e6),
                p50,
                p90,
                p99,
                p999,
                p9999,
                max: ms(self.max_ns),
            },
            samples_beyond: beyond,
            limit_met: self.limited.saturating_sub(self.limit_missed),
            limit_missed: self.limit_missed,
            completed_unavailable: self.completed_unavailable,
            aborted: self.aborted,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_mean_and_rates() {
        let mut s = LatencyStats::new();
        for ms in 1..=1000u64 {
            s.record(ms * 1_000_000, Some(4096));
        }
        let sum = s.summary(2_000_000_000);
        assert_eq!(sum.ios, 1000);
        assert_eq!(sum.iops, 500.0);
        assert_eq!((sum.data_ios, sum.data_iops), (1000, 500.0));
        assert!((sum.mib_s - 1000.0 * 4096.0 / 1048576.0 / 2.0).abs() < 1e-3);
        assert!((sum.lat_ms.mean - 500.5).abs() < 1e-9);
        assert_eq!(sum.lat_ms.min, 1.0);
        assert!((sum.lat_ms.p50 - 500.0).abs() <= 0.5, "{:?}", sum.lat_ms);
        assert!((sum.lat_ms.p90 - 900.0).abs() <= 1.0, "{:?}", sum.lat_ms);
        assert!((sum.lat_ms.p99 - 990.0).abs() <= 1.0, "{:?}", sum.lat_ms);
        assert_eq!(sum.lat_ms.max, 1000.0);
        assert!((s.fraction_below(100_000_000) - 0.1).abs() < 0.002);
    }

    /// An aborted command is a completion (IOPS, latency) that brought no data (data IOPS,
    /// MiB/s): a class whose every command is failed fast shows IOPS but no data IOPS.
    #[test]
    fn aborted_commands_count_as_completions_without_data() {
        let mut s = LatencyStats::new();
        for _ in 0..3 {
            s.record(30_000_000, Some(1 << 20));
        }
        s.record(50_000_000, None);
        s.count_aborted();
        let sum = s.summary(1_000_000_000);
        assert_eq!((sum.ios, sum.iops), (4, 4.0));
        assert_eq!((sum.data_ios, sum.data_iops, sum.mib_s), (3, 3.0, 3.0));
        assert_eq!((sum.aborted, sum.lat_ms.max), (1, 50.0));
        let mut none = LatencyStats::new();
        none.record(50_000_000, None);
        none.count_replica();
        none.merge(&s);
        let sum = none.summary(1_000_000_000);
        assert_eq!((sum.ios, sum.data_ios, sum.aborted), (5, 3, 1));
        // A replica's answer is no data the drive transferred.
        assert_eq!((sum.replica_ios, sum.mib_s), (1, 3.0));
    }

    #[test]
    fn merge_adds_up() {
        let (mut a, mut b) = (LatencyStats::new(), LatencyStats::new());
        a.record(1_000_000, Some(1));
        b.record(9_000_000, Some(1));
        a.count_limited();
        b.count_limited();
        b.count_limit_missed();
        a.merge(&b);
        let s = a.summary(1_000_000_000);
        assert_eq!((s.ios, s.limit_met, s.limit_missed), (2, 1, 1));
        assert_eq!((s.lat_ms.min, s.lat_ms.max), (1.0, 9.0));
        assert_eq!(a.cdf().last().map(|p| p.1), Some(1.0));
    }

    /// Each percentile is the sample at rank ceil(p × n), and the samples beyond it are the
    /// n − ceil(p × n) above that rank.
    #[test]
    fn percentiles_sit_at_their_rank_with_the_samples_beyond_them() {
        let mut s = LatencyStats::new();
        // 1..=2000 µs: the histogram holds each of these values exactly.
        for us in 1..=2000u64 {
            s.record(us * 1000, None);
        }
        let sum = s.summary(1_000_000_000);
        assert_eq!(
            sum.lat_ms.percentiles(),
            [1.0, 1.8, 1.98, 1.998, 2.0],
            "{:?}",
            sum.lat_ms
        );
        let b = sum.samples_beyond;
        assert_eq!(b.counts(), [1000, 200, 20, 2, 0]);
        // 100,000 samples put 10 beyond p99.99 (what reports require), one fewer puts 9.
        assert_eq!(SamplesBeyond::of(100_000).p9999, 10);
        assert_eq!(SamplesBeyond::of(99_999).p9999, 9);
        assert_eq!(SamplesBeyond::of(1_000).counts(), [500, 100, 10, 1, 0]);
        assert_eq!(SamplesBeyond::of(u64::MAX).p50, u64::MAX / 2);
        // Any percentile by its tail in parts per million: p99.5 is rank 1990 of 2000.
        assert_eq!(s.percentile_ns(5_000), (1_990_000, 10));
        assert_eq!(LatencyStats::new().percentile_ns(100), (0, 0));
        assert_eq!(
            SamplesBeyond::of(1000).min(SamplesBeyond::of(20_000)),
            SamplesBeyond::of(1000)
        );
    }

    #[test]
    fn empty_group_is_all_zero() {
        assert_eq!(LatencyStats::new().summary(0), StatsSummary::default());
    }
}
