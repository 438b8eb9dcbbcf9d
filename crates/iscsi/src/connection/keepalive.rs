//! Keepalive (RFC 7143 §11.19): after an idle interval the target pings the initiator with a
//! NOP-In; a second silent interval means the initiator is gone, and so does one silent
//! interval before login completes. Login itself must end within the portal's login timeout,
//! input or not. The shell arms one timer at [`Connection::poll_timeout`] and calls
//! [`Connection::handle_timeout`] when it fires.

use super::*;

#[derive(Debug)]
pub(super) struct Keepalive {
    interval: Option<Ns>,
    last_input: Ns,
    /// When the unanswered ping went out.
    pinged_at: Option<Ns>,
    next_tag: u32,
    /// When a connection still logging in is closed.
    login_deadline: Ns,
}

fn ns(d: std::time::Duration) -> Ns {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Keepalive {
    pub(super) fn new(portal: &Portal, accepted: Ns) -> Keepalive {
        Keepalive {
            interval: portal.nop_in_interval.map(ns),
            last_input: accepted,
            pinged_at: None,
            next_tag: 1,
            login_deadline: accepted.saturating_add(ns(portal.login_timeout)),
        }
    }

    /// Bytes arrived at `now`.
    pub(super) fn input(&mut self, now: Ns) {
        self.last_input = now;
        self.pinged_at = None;
    }
}

impl Connection {
    /// When [`Self::handle_timeout`] must run next; `None` when keepalive is off and login is
    /// over.
    pub fn poll_timeout(&self) -> Option<Ns> {
        let k = &self.keepalive;
        let idle = k
            .interval
            .map(|i| k.pinged_at.unwrap_or(k.last_input).saturating_add(i));
        if self.is_full_feature() {
            idle
        } else {
            Some(idle.map_or(k.login_deadline, |t| t.min(k.login_deadline)))
        }
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
        // Idle for a whole interval: give the free data buffers back (issue 11).
        if let Phase::FullFeature(s) = &mut self.phase {
            s.pool.release();
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Ns = 1_000_000_000;

    fn connection(accepted: Ns, login_timeout: u64) -> Connection {
        let mut portal = Portal::new(Vec::new());
        portal.nop_in_interval = Some(std::time::Duration::from_secs(30));
        portal.login_timeout = std::time::Duration::from_secs(login_timeout);
        Connection::new(Arc::new(portal), "192.0.2.1:3260".into(), accepted)
    }

    #[test]
    fn a_connection_that_never_logs_in_is_closed_after_one_interval() {
        let mut c = connection(5 * S, 60);
        assert_eq!(c.poll_timeout(), Some(35 * S));
        let mut out = Output::new();
        assert!(c.handle_timeout(34 * S, &mut out), "not yet");
        assert!(!c.handle_timeout(35 * S, &mut out));
        assert!(out.is_empty());
    }

    #[test]
    fn input_moves_the_deadline() {
        let mut c = connection(0, 60);
        c.receive(20 * S, &[0u8; 10], &mut Output::new());
        assert_eq!(c.poll_timeout(), Some(50 * S));
    }

    /// Issue 11: one byte every 20 s kept a connection in login forever.
    #[test]
    fn a_login_trickled_byte_by_byte_ends_at_the_login_timeout() {
        let mut c = connection(0, 15);
        let mut out = Output::new();
        for t in [5, 10] {
            c.receive(t * S, &[0u8], &mut out);
            assert!(c.handle_timeout(t * S, &mut out));
        }
        assert_eq!(c.poll_timeout(), Some(15 * S));
        assert!(!c.handle_timeout(15 * S, &mut out));
    }
}
