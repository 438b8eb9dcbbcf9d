//! Slowing down repeated failed logins from one address, so guessing CHAP secrets or target
//! names costs time: the first few refusals in a minute are answered at once, later ones after
//! a pause that doubles up to a cap. A login that succeeds is never delayed.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// Refusals per address answered without delay within one window.
const FREE: u32 = 3;
/// How long an address's failures are remembered after its first one.
const WINDOW: Duration = Duration::from_secs(60);
/// The first pause, doubled for each further refusal.
const FIRST_PAUSE: Duration = Duration::from_millis(500);
/// The longest pause: under the 15 s login timeout an honest initiator lives with.
const MAX_PAUSE: Duration = Duration::from_secs(8);
/// Addresses remembered before expired ones are dropped (many addresses, e.g. IPv6, must not
/// grow the map without bound).
const PRUNE_AT: usize = 4096;

/// Failed logins per initiator address.
#[derive(Default)]
pub struct LoginThrottle {
    failures: HashMap<IpAddr, (Instant, u32)>,
}

impl LoginThrottle {
    /// Records a refused login from `peer` at `now`; returns how long to wait before sending
    /// the refusal, and whether this is the refusal that starts the slowing (to log it once).
    pub fn refused(&mut self, peer: IpAddr, now: Instant) -> (Duration, bool) {
        if self.failures.len() >= PRUNE_AT {
            self.failures
                .retain(|_, (since, _)| now.duration_since(*since) < WINDOW);
        }
        let (since, count) = self.failures.entry(peer).or_insert((now, 0));
        if now.duration_since(*since) >= WINDOW {
            *since = now;
            *count = 0;
        }
        *count += 1;
        match count.checked_sub(FREE + 1) {
            None => (Duration::ZERO, false),
            Some(n) => (
                FIRST_PAUSE.saturating_mul(1 << n.min(16)).min(MAX_PAUSE),
                n == 0,
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_grow_after_a_few_refusals_and_reset_after_the_window() {
        let mut t = LoginThrottle::default();
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let b: IpAddr = "192.0.2.2".parse().unwrap();
        let t0 = Instant::now();
        let pauses: Vec<(u64, bool)> = (0..9)
            .map(|_| {
                let (d, first) = t.refused(a, t0);
                (d.as_millis() as u64, first)
            })
            .collect();
        assert_eq!(
            pauses,
            [
                (0, false),
                (0, false),
                (0, false),
                (500, true),
                (1000, false),
                (2000, false),
                (4000, false),
                (8000, false),
                (8000, false)
            ]
        );
        assert_eq!(t.refused(b, t0).0, Duration::ZERO, "per address");
        assert_eq!(t.refused(a, t0 + WINDOW).0, Duration::ZERO, "forgotten");
    }

    #[test]
    fn many_addresses_do_not_grow_the_map_forever() {
        let mut t = LoginThrottle::default();
        let t0 = Instant::now();
        for i in 0..PRUNE_AT as u32 {
            t.refused(IpAddr::from(i.to_be_bytes()), t0);
        }
        t.refused("192.0.2.9".parse().unwrap(), t0 + WINDOW);
        assert_eq!(t.failures.len(), 1);
    }
}
