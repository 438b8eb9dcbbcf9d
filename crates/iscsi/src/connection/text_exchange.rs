//! Text Request/Response (RFC 7143 §11.10, §11.11): SendTargets (§12.3, appendix C),
//! full-feature declarations and long answers continued with the C bit.

use super::*;

/// Text Request/Response exchange state (RFC 7143 §11.10–11.11): request reassembly and the
/// rest of a long answer waiting for the initiator's next (empty) request.
#[derive(Default)]
pub(super) struct TextExchange {
    request: text::Assembler,
    answer: Option<(u32, text::Splitter)>,
}

impl Session {
    pub(super) fn text_request(&mut self, bhs: &Bhs, data: &[u8], out: &mut Output) {
        if self.window.admit(bhs.u32_at(24), bhs.immediate()) == Admission::Drop {
            return;
        }
        let ttt = bhs.u32_at(20);
        let continues = bhs.flags() & 0x40 != 0;
        // Continuing our long answer: the initiator sends an empty request with our TTT.
        if ttt != RESERVED_TAG {
            if let Some((tag, _)) = &self.text.answer {
                if *tag == ttt {
                    return self.send_text_piece(bhs, out);
                }
            }
            return self.reject(RejectReason::InvalidPduField, bhs, out);
        }
        self.text.answer = None;
        let whole = match self.text.request.push(data, continues) {
            Ok(Some(t)) => t,
            Ok(None) => {
                // Acknowledge a continued request with an empty response (§11.11.2).
                let mut b = text_response_header(bhs, false, false, RESERVED_TAG);
                let n = self.numbers_with_status();
                n.write(&mut b);
                out.pdu(&b, &[]);
                return;
            }
            Err(_) => return self.reject(RejectReason::InvalidPduField, bhs, out),
        };
        let Ok(pairs) = text::parse(&whole) else {
            return self.reject(RejectReason::InvalidPduField, bhs, out);
        };
        let mut answer = Vec::new();
        for (key, value) in &pairs {
            match key.as_str() {
                "SendTargets" => self.send_targets(value, &mut answer),
                // Declarative; may change in full feature phase (RFC 7143 §13.12).
                "MaxRecvDataSegmentLength" => {
                    let mut p = self.params.clone();
                    if crate::negotiation::answer(
                        key,
                        value,
                        self.session_type,
                        &self.portal.limits,
                        &mut p,
                    )
                    .is_none()
                    {
                        self.params.initiator_max_recv_data_segment_length =
                            p.initiator_max_recv_data_segment_length;
                    }
                }
                k if k.starts_with("X-") || k.starts_with("X#") => {
                    text::push(&mut answer, key, "NotUnderstood")
                }
                // Everything else is negotiated at login only (RFC 7143 §13: "LO").
                _ => text::push(&mut answer, key, "Reject"),
            }
        }
        let tag = self.allocate_ttt();
        self.text.answer = Some((tag, text::Splitter::new(answer)));
        self.send_text_piece(bhs, out);
    }

    fn send_text_piece(&mut self, bhs: &Bhs, out: &mut Output) {
        let max = self.params.initiator_max_recv_data_segment_length as usize;
        let Some((tag, splitter)) = &mut self.text.answer else {
            return;
        };
        let tag = *tag;
        let (piece, more) = splitter.next_piece(max);
        let piece = piece.to_vec();
        if !more {
            self.text.answer = None;
        }
        let mut b = text_response_header(bhs, !more, more, if more { tag } else { RESERVED_TAG });
        let n = self.numbers_with_status();
        n.write(&mut b);
        out.pdu(&b, &piece);
    }

    /// SendTargets (RFC 7143 §12.3 and appendix C): TargetName and TargetAddress of the
    /// nodes this initiator may use.
    fn send_targets(&self, value: &str, answer: &mut Vec<u8>) {
        let address = format!("{},{}", self.local_address, self.portal.portal_group_tag);
        for (i, node) in self.portal.nodes().iter().enumerate() {
            let wanted = match (self.session_type, value) {
                // In a Normal session only the session's own target is reported.
                (SessionType::Normal, "All" | "") => self.node == Some(i),
                (SessionType::Discovery, "All") => true,
                (_, name) => node.name == name,
            };
            if wanted && node.allows(&self.initiator_name) {
                text::push(answer, "TargetName", &node.name);
                if node.gateways.is_empty() {
                    text::push(answer, "TargetAddress", &address);
                }
                // Every gateway's portal, so that a host discovers each path at once.
                for g in &node.gateways {
                    let at = format!("{},{}", g.address, g.portal_group_tag);
                    text::push(answer, "TargetAddress", &at);
                }
            }
        }
    }
}

fn text_response_header(req: &Bhs, final_bit: bool, continues: bool, ttt: u32) -> Bhs {
    let mut b = Bhs::new(Opcode::TextResponse);
    b.set_flags(if final_bit { 0x80 } else { 0 } | if continues { 0x40 } else { 0 });
    b.set_lun_raw(req.lun_raw());
    b.set_itt(req.itt());
    b.set_u32_at(20, ttt);
    b
}
