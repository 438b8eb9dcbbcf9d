//! The device clock of REPORT TIMESTAMP and SET TIMESTAMP (SPC-5 §5.2). The device never
//! reads a clock: its time is the latest `now` a command brought, so the timestamp advances
//! with the transport's clock (or the simulator's).

use crate::Ns;
use scsi::timestamp::{self, Origin};

#[derive(Default)]
pub(crate) struct DeviceClock {
    now: Ns,
    /// The milliseconds SET TIMESTAMP gave and the device time it gave them at; `None`: the
    /// timestamp counts from power on (origin 000b).
    set: Option<(u64, Ns)>,
}

impl DeviceClock {
    /// A command arrived at `now`.
    pub(crate) fn observe(&mut self, now: Ns) {
        self.now = self.now.max(now);
    }

    /// The timestamp parameter data (SPC-5 table 270).
    pub(crate) fn report(&self, out: &mut Vec<u8>) {
        let now = self.now;
        match self.set {
            None => timestamp::encode(Origin::PowerOn, now / 1_000_000, out),
            Some((ms, at)) => timestamp::encode(
                Origin::SetTimestamp,
                ms.saturating_add(now.saturating_sub(at) / 1_000_000),
                out,
            ),
        }
    }

    pub(crate) fn set(&mut self, ms: u64) {
        self.set = Some((ms, self.now));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_timestamp_advances_with_device_time() {
        let mut clock = DeviceClock::default();
        clock.observe(5_000_000_000);
        let mut out = Vec::new();
        clock.report(&mut out);
        assert_eq!(out[2], 0b000, "from power on");
        assert_eq!(&out[4..10], &5_000u64.to_be_bytes()[2..]);
        clock.set(1_000_000);
        clock.observe(7_500_000_000);
        clock.observe(1); // an older `now` from another connection does not go back
        out.clear();
        clock.report(&mut out);
        assert_eq!(out[2], 0b010, "set by SET TIMESTAMP");
        assert_eq!(&out[4..10], &1_002_500u64.to_be_bytes()[2..]);
    }
}
