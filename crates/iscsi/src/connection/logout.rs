//! Logout (RFC 7143 §11.14, §11.15), and the Asynchronous Message that asks for one
//! (§11.9.1).

use super::*;

impl Connection {
    /// Ask the initiator to log out within `seconds` (Asynchronous Message, AsyncEvent 1,
    /// RFC 7143 §11.9.1): how a stopping target ends sessions cleanly. Returns false when
    /// the connection is not in full feature phase (nothing to ask).
    pub fn request_logout(&mut self, seconds: u16, out: &mut Output) -> bool {
        let Phase::FullFeature(s) = &mut self.phase else {
            return false;
        };
        let mut b = Bhs::new(Opcode::AsyncMessage);
        b.set_flags(0x80);
        b.set_itt(RESERVED_TAG);
        s.numbers_with_status().write(&mut b);
        b.0[36] = 1; // AsyncEvent: target requests Logout
        b.set_u16_at(42, seconds); // Parameter3: time to Logout
        out.pdu(&b, &[]);
        true
    }
}

impl Session {
    pub(super) fn logout(&mut self, bhs: &Bhs, out: &mut Output) -> Flow {
        if self.window.admit(bhs.u32_at(24), bhs.immediate()) == Admission::Drop {
            return Flow::Continue;
        }
        let reason = bhs.flags() & 0x7F;
        // RFC 7143 §11.15.1: 0 = close session, 1 = close connection, 2 = remove the
        // connection for recovery (needs ErrorRecoveryLevel 2: answered "not supported").
        let response: u8 = if reason == 2 { 2 } else { 0 };
        let mut b = Bhs::new(Opcode::LogoutResponse);
        b.set_flags(0x80);
        b.0[2] = response;
        b.set_itt(bhs.itt());
        let n = self.numbers_with_status();
        n.write(&mut b);
        b.set_u16_at(40, self.params.default_time2wait as u16);
        b.set_u16_at(42, self.params.default_time2retain as u16);
        out.pdu(&b, &[]);
        if response == 0 {
            Flow::Close
        } else {
            Flow::Continue
        }
    }
}
