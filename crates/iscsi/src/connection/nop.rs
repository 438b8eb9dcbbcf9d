//! NOP-Out and NOP-In (RFC 7143 §11.18, §11.19): pings in both directions.

use super::*;

impl Connection {
    /// A target-initiated NOP-In (RFC 7143 §11.19) to check the initiator is alive; the
    /// initiator answers with a NOP-Out carrying `ttt`.
    pub fn ping(&mut self, ttt: u32, out: &mut Output) {
        if let Phase::FullFeature(s) = &mut self.phase {
            let mut b = Bhs::new(Opcode::NopIn);
            b.set_flags(0x80);
            b.set_itt(RESERVED_TAG);
            b.set_u32_at(20, ttt);
            // StatSN is not advanced by an unsolicited NOP-In.
            s.numbers_without_status().write(&mut b);
            out.pdu(&b, &[]);
        }
    }
}

impl Session {
    pub(super) fn nop_out(&mut self, bhs: &Bhs, data: &[u8], out: &mut Output) {
        // NOP-Out carries a CmdSN; non-immediate ones take a slot in the window.
        if self.window.admit(bhs.u32_at(24), bhs.immediate()) == Admission::Drop {
            return;
        }
        // ITT 0xffffffff: an answer to our NOP-In, or a ping that wants no reply (§11.18).
        if bhs.itt() == RESERVED_TAG {
            return;
        }
        let mut b = Bhs::new(Opcode::NopIn);
        b.set_flags(0x80);
        b.set_lun_raw(bhs.lun_raw());
        b.set_itt(bhs.itt());
        b.set_u32_at(20, RESERVED_TAG);
        let n = self.numbers_with_status();
        n.write(&mut b);
        // Ping data is echoed (RFC 7143 §11.19.2), bounded by the initiator's limit.
        let max = self.params.initiator_max_recv_data_segment_length as usize;
        out.pdu(&b, data.get(..max.min(data.len())).unwrap_or(&[]));
    }
}
