//! Session-wide sequence numbers (RFC 7143 §4.2.2.1–§4.2.2.2): the CmdSN window
//! [ExpCmdSN, MaxCmdSN] compared in serial number arithmetic (RFC 1982).

/// `a < b` in 32-bit serial number arithmetic (RFC 1982 §3.2).
pub fn sn_lt(a: u32, b: u32) -> bool {
    a != b && (b.wrapping_sub(a) as i32) > 0
}

/// `a <= b` in serial number arithmetic.
pub fn sn_le(a: u32, b: u32) -> bool {
    a == b || sn_lt(a, b)
}

/// Command numbering of one session (one connection per session: MaxConnections=1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CmdWindow {
    pub exp_cmdsn: u32,
    /// Commands the session may have outstanding (MaxCmdSN − ExpCmdSN + 1).
    pub depth: u32,
}

/// What to do with a numbered command (RFC 7143 §4.2.2.1, §3.2.2.1 of RFC 3720).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Deliver it.
    Deliver,
    /// Outside [ExpCmdSN, MaxCmdSN]: silently ignore, keep the session.
    Drop,
}

impl CmdWindow {
    pub fn new(exp_cmdsn: u32, depth: u32) -> CmdWindow {
        CmdWindow {
            exp_cmdsn,
            depth: depth.max(1),
        }
    }

    pub fn max_cmdsn(&self) -> u32 {
        self.exp_cmdsn.wrapping_add(self.depth - 1)
    }

    /// Admit a command with `cmdsn`; immediate commands are not subject to the window and
    /// do not advance it.
    pub fn admit(&mut self, cmdsn: u32, immediate: bool) -> Admission {
        if immediate {
            return Admission::Deliver;
        }
        if !sn_le(self.exp_cmdsn, cmdsn) || !sn_le(cmdsn, self.max_cmdsn()) {
            return Admission::Drop;
        }
        // With one connection commands arrive in order; a gap inside the window can only
        // come from an initiator that skipped numbers, so the window moves past it.
        self.exp_cmdsn = cmdsn.wrapping_add(1);
        Admission::Deliver
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serial_arithmetic_wraps() {
        assert!(sn_lt(0xFFFF_FFFF, 0));
        assert!(sn_lt(1, 2));
        assert!(!sn_lt(2, 1));
        assert!(!sn_lt(5, 5));
        assert!(sn_le(5, 5));
    }

    #[test]
    fn window_drops_too_high_and_too_low() {
        let mut w = CmdWindow::new(10, 4);
        assert_eq!(w.max_cmdsn(), 13);
        assert_eq!(w.admit(14, false), Admission::Drop);
        assert_eq!(w.admit(9, false), Admission::Drop);
        assert_eq!(w.exp_cmdsn, 10);
        assert_eq!(w.admit(10, false), Admission::Deliver);
        assert_eq!(w.exp_cmdsn, 11);
        assert_eq!(w.admit(11, true), Admission::Deliver);
        assert_eq!(w.exp_cmdsn, 11);
    }

    #[test]
    fn window_wraps_around() {
        let mut w = CmdWindow::new(u32::MAX, 128);
        assert_eq!(w.admit(u32::MAX, false), Admission::Deliver);
        assert_eq!(w.exp_cmdsn, 0);
        assert_eq!(w.admit(0, false), Admission::Deliver);
    }
}
