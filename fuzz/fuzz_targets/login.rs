//! The login phase (RFC 7143 §6.3, §11.12–11.13) fed a sequence of Login Requests, each a
//! header (stages, transit and continue bits, version, ISID, TSIH) and a data segment of
//! key=value text. Records are separated by FFh (never in UTF-8 text): byte 0 is the flags
//! byte of the header, byte 1 picks the other fields, the rest is the data segment, so
//! seeds are readable text. Beyond "no panic":
//! - every answer is well-formed text within the 8192 bytes every initiator accepts;
//! - nobody reaches the full feature phase of a node that requires CHAP, or of a discovery
//!   session that requires it (the challenge is random, so a fuzzer cannot answer it);
//! - a completed login names the node asked for and carries parameters in RFC 7143's ranges.
#![no_main]

use iscsi::bhs::{Bhs, Opcode};
use iscsi::login::{Login, LoginRequest, LoginStatus, LoginStep};
use iscsi::negotiation::{SessionType, TargetLimits};
use iscsi::text;
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

fn portal() -> &'static iscsi::Portal {
    static PORTAL: OnceLock<std::sync::Arc<iscsi::Portal>> = OnceLock::new();
    PORTAL.get_or_init(stint_fuzz::portal)
}

fuzz_target!(|input: &[u8]| {
    let Some((&knobs, records)) = input.split_first() else {
        return;
    };
    let discovery_chap = portal().nodes()[1].chap.clone().filter(|_| knobs & 1 != 0);
    let mut login = Login::new(TargetLimits::default(), 1).with_discovery_chap(discovery_chap);
    for record in records.split(|&b| b == 0xFF) {
        let (flags, misc, data) = match record {
            [flags, misc, data @ ..] => (*flags, *misc, data),
            _ => continue,
        };
        let mut b = Bhs::new(Opcode::LoginRequest);
        b.set_immediate(true);
        b.set_flags(flags);
        b.0[3] = u8::from(misc & 1 != 0); // Version-min
        b.0[8] = 0x80; // ISID: random qualifier type
        b.0[13] = misc >> 4 & 1; // ISID changes when bit 4 moves
        b.set_u16_at(14, u16::from(misc >> 1 & 1)); // TSIH
        b.set_itt(u32::from(misc));
        let req = LoginRequest::parse(&b);
        match login.step(&req, data, &portal().nodes()) {
            LoginStep::Continue(reply) => {
                check_reply_text(&reply.text);
                assert_eq!(reply.status, LoginStatus::SUCCESS);
                assert_ne!(reply.nsg, 3, "full feature phase without Complete");
            }
            LoginStep::Complete(reply, established) => {
                check_reply_text(&reply.text);
                assert!(reply.transit && reply.nsg == 3);
                assert_eq!(reply.status, LoginStatus::SUCCESS);
                match established.session_type {
                    SessionType::Normal => {
                        let node = established.node.expect("a normal session names its node");
                        assert_eq!(node, 0, "logged in to a node that requires CHAP");
                    }
                    SessionType::Discovery => {
                        assert!(knobs & 1 == 0, "discovery without the required CHAP");
                        assert_eq!(established.node, None);
                    }
                }
                assert!(!established.initiator_name.is_empty());
                let p = &established.params;
                assert!(p.first_burst_length <= p.max_burst_length);
                assert!((512..=16_777_215).contains(&p.initiator_max_recv_data_segment_length));
                return;
            }
            LoginStep::Fail(reply) => {
                assert_ne!(reply.status, LoginStatus::SUCCESS);
                assert!(reply.text.is_empty());
                assert!(!reply.reason.is_empty());
                return;
            }
        }
    }
});

fn check_reply_text(t: &[u8]) {
    assert!(t.len() <= 8192, "a login answer of {} bytes", t.len());
    let pairs = text::parse_list(t).expect("the answer is key=value text");
    for (i, (k, _)) in pairs.iter().enumerate() {
        assert!(
            !pairs[..i].iter().any(|(p, _)| p == k),
            "{k} answered twice in one response"
        );
    }
}
