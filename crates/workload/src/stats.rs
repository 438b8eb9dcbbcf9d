//! Latency statistics: HDR histograms (1 µs resolution, 3 significant digits) plus exact
//! count, sum and maximum, and the duration-limit completion counters of a run.

use hdrhistogram::Histogram;
use serde::Serialize;

/// Largest latency the histogram resolves (one hour, in µs); longer ones are clamped.
const MAX_US: u64 = 3_600_000_000;

/// Latencies and counters of one group of commands (a class, or all).
#[derive(Clone, Debug)]
pub struct LatencyStats {
    hist: Histogram<u64>,
    count: u64,
    sum_ns: u128,
    min_ns: u64,
    max_ns: u64,
    bytes: u64,
    /// Commands whose data reached the host (`bytes` counts theirs).
    with_data: u64,
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

/// A group's results over a measured interval (issue 3 JSON `STATS`; field order is the
/// output order).
///
/// `ios`, `iops` and `lat_ms` count every completion, the ones a duration limit policy ended
/// early included: how fast a command was failed is what fast fail is judged by. `data_ios`,
/// `data_iops` and `mib_s` count only the commands whose data reached the host (a replica's
/// answer to a failed read included), so `mib_s` = `data_iops` × the transfer size.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct StatsSummary {
    pub ios: u64,
    pub iops: f64,
    pub data_ios: u64,
    pub data_iops: f64,
    pub mib_s: f64,
    pub lat_ms: LatencySummary,
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

    /// Records one command that took `latency_ns`: `data` is the bytes it brought to or from
    /// the host, `None` when it ended without its data (aborted, DATA CURRENTLY UNAVAILABLE,
    /// an error).
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
            lat_ms: LatencySummary {
                min: if self.count == 0 {
                    0.0
                } else {
                    ms(self.min_ns)
                },
                mean: round3(mean_ns / 1e6),
                p50: ms(self.quantile_ns(0.5)),
                p90: ms(self.quantile_ns(0.9)),
                p99: ms(self.quantile_ns(0.99)),
                p999: ms(self.quantile_ns(0.999)),
                p9999: ms(self.quantile_ns(0.9999)),
                max: ms(self.max_ns),
            },
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
        none.merge(&s);
        let sum = none.summary(1_000_000_000);
        assert_eq!((sum.ios, sum.data_ios, sum.aborted), (5, 3, 1));
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

    #[test]
    fn empty_group_is_all_zero() {
        assert_eq!(LatencyStats::new().summary(0), StatsSummary::default());
    }
}
