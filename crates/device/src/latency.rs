//! Latency histograms of a logical unit with a device queue: arrival in the task set to the
//! moment the task leaves it, per priority class and per CDL descriptor. Fixed log-spaced
//! buckets (1-2-5 steps from 50 µs to 10 s, as Prometheus histograms want them), kept under
//! the task set's lock, so recording one is a search over 17 bounds and two additions.

use crate::Ns;
use qos::CLASSES;

/// Inclusive upper bounds of the buckets, in nanoseconds; a last bucket takes the rest.
pub const BOUNDS_NS: [Ns; 17] = [
    50_000,
    100_000,
    200_000,
    500_000,
    1_000_000,
    2_000_000,
    5_000_000,
    10_000_000,
    20_000_000,
    50_000_000,
    100_000_000,
    200_000_000,
    500_000_000,
    1_000_000_000,
    2_000_000_000,
    5_000_000_000,
    10_000_000_000,
];

/// One histogram of latencies.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Histogram {
    buckets: [u64; BOUNDS_NS.len() + 1],
    sum_ns: u64,
}

/// The index of the bucket that holds `latency`.
fn bucket(latency: Ns) -> usize {
    BOUNDS_NS.partition_point(|&b| b < latency)
}

impl Histogram {
    pub fn record(&mut self, latency: Ns) {
        self.add(bucket(latency), latency);
    }

    fn add(&mut self, bucket: usize, latency: Ns) {
        if let Some(n) = self.buckets.get_mut(bucket) {
            *n += 1;
        }
        self.sum_ns = self.sum_ns.saturating_add(latency);
    }

    /// Latencies recorded.
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// Their sum, in nanoseconds.
    pub fn sum_ns(&self) -> u64 {
        self.sum_ns
    }

    /// How many latencies were at most each of [`BOUNDS_NS`], in order (Prometheus's
    /// cumulative `le` buckets; the `+Inf` bucket is [`Self::count`]).
    pub fn cumulative(&self) -> impl Iterator<Item = (Ns, u64)> + '_ {
        BOUNDS_NS
            .iter()
            .zip(&self.buckets)
            .scan(0, |total, (&bound, &n)| {
                *total += n;
                Some((bound, *total))
            })
    }
}

/// The histograms of one task set. A task counts in its class and in the descriptor it was
/// submitted with (the T2A page's for reads, T2B's for writes; DLD 0: no limit), as the
/// queue's statistics count it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Latencies {
    pub classes: [Histogram; CLASSES],
    /// Reads by DLD 0..=7.
    pub reads: [Histogram; 8],
    /// Writes by DLD 0..=7.
    pub writes: [Histogram; 8],
    /// Commands a CDL policy ended (Dh, Eh, Fh): how long after their limit expired they
    /// left the task set. Zero in virtual time; on the wall clock, how late the logical
    /// unit's driver or the call that noticed the expiry came.
    pub late_ends: Histogram,
}

impl Latencies {
    /// Kept out of line: the task set's completion loop, which the simulator runs for every
    /// command, stays small.
    #[inline(never)]
    pub(crate) fn record(&mut self, class: usize, write: bool, dld: u8, latency: Ns) {
        let bucket = bucket(latency);
        if let Some(h) = self.classes.get_mut(class) {
            h.add(bucket, latency);
        }
        let page = if write {
            &mut self.writes
        } else {
            &mut self.reads
        };
        if let Some(h) = page.get_mut(usize::from(dld)) {
            h.add(bucket, latency);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_latency_counts_in_the_first_bucket_that_holds_it() {
        let mut h = Histogram::default();
        for ns in [0, 50_000, 50_001, 10_000_000_000, 10_000_000_001, u64::MAX] {
            h.record(ns);
        }
        let cumulative: Vec<(Ns, u64)> = h.cumulative().collect();
        assert_eq!(cumulative[0], (50_000, 2), "bounds are inclusive");
        assert_eq!(cumulative[1], (100_000, 3));
        assert_eq!(cumulative[16], (10_000_000_000, 4));
        assert_eq!(h.count(), 6, "the last two only in +Inf");
        assert_eq!(h.sum_ns(), u64::MAX, "the sum saturates");
    }

    #[test]
    fn a_task_counts_in_its_class_and_its_descriptor() {
        let mut l = Latencies::default();
        l.record(1, false, 1, 3_000_000);
        l.record(2, true, 0, 7_000_000);
        l.record(2, true, 9, 1);
        assert_eq!(l.classes.map(|h| h.count()), [0, 1, 2, 0]);
        assert_eq!((l.reads[1].count(), l.reads[1].sum_ns()), (1, 3_000_000));
        assert_eq!(l.writes[0].count(), 1);
        assert_eq!(
            l.writes.iter().map(Histogram::count).sum::<u64>(),
            1,
            "no DLD 9"
        );
    }
}
