//! The instant model: every operation completes at once (the fast path, no drive modelled).

use crate::{Drive, MediaOp, MediaOutcome, Ns, Service};

/// A drive that takes no time.
#[derive(Clone, Copy, Debug, Default)]
pub struct Instant;

/// Operations the instant drive accepts at once (effectively unbounded).
const INSTANT_PARALLELISM: usize = 1 << 16;

impl Drive for Instant {
    fn parallelism(&self) -> usize {
        INSTANT_PARALLELISM
    }

    fn positioning_time(&self, _now: Ns, _op: &MediaOp) -> Ns {
        0
    }

    fn start(&mut self, now: Ns, _op: &MediaOp) -> Service {
        Service {
            done_at: now,
            outcome: MediaOutcome::Ok,
            recovery: 0,
        }
    }

    fn flush(&mut self, now: Ns) -> Ns {
        now
    }
}
