//! Keepalive (RFC 7143 §11.19): after an idle interval the target pings the initiator with a
//! NOP-In; a second silent interval means the initiator is gone, and so does one silent
//! interval before login completes. The shell arms one timer at [`Connection::poll_timeout`]
//! and calls [`Connection::handle_timeout`] when it fires.

use super::*;

#[derive(Debug)]
pub(super) struct Keepalive {
    interval: Option<Ns>,
    last_input: Ns,
    /// When the unanswered ping went out.
    pinged_at: Option<Ns>,
    next_tag: u32,
}

impl Keepalive {
    pub(super) fn new(interval: Option<std::time::Duration>) -> Keepalive {
        Keepalive {
            interval: interval.map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)),
            last_input: 0,
            pinged_at: None,
            next_tag: 1,
        }
    }

    /// Bytes arrived at `now`.
    pub(super) fn input(&mut self, now: Ns) {
        self.last_input = now;
        self.pinged_at = None;
    }
}

impl Connection {
    /// When [`Self::handle_timeout`] must run next; `None` when keepalive is off.
    pub fn poll_timeout(&self) -> Option<Ns> {
        let k = &self.keepalive;
        let interval = k.interval?;
        Some(k.pinged_at.unwrap_or(k.last_input).saturating_add(interval))
    }

    /// The timer fired at `now`: pings an idle initiator (into `out`), or returns false when
    /// it stayed silent for too long and the connection must close.
    pub fn handle_timeout(&mut self, now: Ns, out: &mut Output) -> bool {
        match self.poll_timeout() {
            Some(at) if now >= at => {}
            _ => return true,
        }
        if self.keepalive.pinged_at.is_some() || !self.is_full_feature() {
            return false;
        }
        let tag = self.keepalive.next_tag;
        self.keepalive.next_tag = tag.wrapping_add(1) & 0x7FFF_FFFF;
        self.keepalive.pinged_at = Some(now);
        self.ping(tag, out);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Ns = 1_000_000_000;

    fn connection(accepted: Ns) -> Connection {
        let mut portal = Portal::new(Vec::new());
        portal.nop_in_interval = Some(std::time::Duration::from_secs(30));
        Connection::new(Arc::new(portal), "192.0.2.1:3260".into(), accepted)
    }

    #[test]
    fn a_connection_that_never_logs_in_is_closed_after_one_interval() {
        let mut c = connection(5 * S);
        assert_eq!(c.poll_timeout(), Some(35 * S));
        let mut out = Output::new();
        assert!(c.handle_timeout(34 * S, &mut out), "not yet");
        assert!(!c.handle_timeout(35 * S, &mut out));
        assert!(out.is_empty());
    }

    #[test]
    fn input_moves_the_deadline() {
        let mut c = connection(0);
        c.receive(20 * S, &[0u8; 10], &mut Output::new());
        assert_eq!(c.poll_timeout(), Some(50 * S));
    }
}
