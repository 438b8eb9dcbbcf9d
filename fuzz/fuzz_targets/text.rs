//! Text keys (RFC 7143 §6.1): key=value parsing, reassembly of continued key lists (§11.10.2)
//! and the negotiation of every operational key (§13) from both ends. Beyond "no panic":
//! - what parses re-encodes to text that parses to the same pairs;
//! - reassembly returns exactly the pieces pushed, or refuses past its bound;
//! - negotiated parameters stay inside RFC 7143's ranges whatever is offered, and the answer
//!   is a value the initiator side reads back to the same parameters.
#![no_main]

use iscsi::negotiation::{self, Parameters, SessionType, TargetLimits};
use iscsi::text::{self, Assembler, MAX_TEXT_LEN};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    let Some((&knobs, data)) = input.split_first() else {
        return;
    };
    reassembly(data, usize::from(knobs) + 1);
    if let Ok(pairs) = text::parse_list(data) {
        let again = text::encode(&pairs);
        assert_eq!(text::parse_list(&again).as_ref(), Ok(&pairs));
        if text::parse(data).is_ok() {
            assert_eq!(text::parse(&again), Ok(pairs.clone()));
        }
        negotiate(&pairs, knobs);
    }
    for value in data.split(|&b| b == 0) {
        let Ok(value) = std::str::from_utf8(value) else {
            continue;
        };
        // Binary values (RFC 7143 §6.1): a hex one re-encodes to itself; base64 only decodes.
        if let Some(bytes) = iscsi::chap::decode_binary(value) {
            if value.starts_with("0x") || value.starts_with("0X") {
                assert_eq!(
                    iscsi::chap::encode_hex(&bytes).to_ascii_lowercase(),
                    value.to_ascii_lowercase()
                );
            }
        }
    }
});

/// The data in pieces of `piece` bytes, the last without the C bit.
fn reassembly(data: &[u8], piece: usize) {
    let mut a = Assembler::default();
    let mut chunks = data.chunks(piece).peekable();
    while let Some(chunk) = chunks.next() {
        let last = chunks.peek().is_none();
        match a.push(chunk, !last) {
            Ok(Some(text)) => {
                assert!(last);
                assert_eq!(text, data);
            }
            Ok(None) => assert!(!last),
            Err(_) => {
                assert!(data.len() > MAX_TEXT_LEN);
                assert!(a.is_empty());
                return;
            }
        }
    }
}

fn negotiate(pairs: &[(String, String)], knobs: u8) {
    let session = if knobs & 1 == 0 {
        SessionType::Normal
    } else {
        SessionType::Discovery
    };
    let limits = TargetLimits::default();
    let mut target = Parameters::default();
    let mut initiator = Parameters::default();
    for (key, value) in pairs {
        let before = target.clone();
        if let Some(answer) = negotiation::answer(key, value, session, &limits, &mut target) {
            assert!(
                !answer.is_empty() && answer.len() <= 255,
                "answer {answer:?}"
            );
            negotiation::apply_answer(key, &answer, &mut initiator);
            if answer == "Reject" || answer == "Irrelevant" || answer == "NotUnderstood" {
                assert_eq!(target, before, "{key}={value} refused yet applied");
            }
        }
        let lengths = 512..=16_777_215;
        assert!(lengths.contains(&target.max_burst_length));
        assert!(lengths.contains(&target.first_burst_length));
        assert!(lengths.contains(&target.initiator_max_recv_data_segment_length));
        assert!(target.first_burst_length <= target.max_burst_length);
        assert!(target.max_burst_length <= limits.max_burst_length);
        assert!((1..=limits.max_outstanding_r2t).contains(&target.max_outstanding_r2t));
        assert_eq!(target.error_recovery_level, 0);
        assert_eq!(target.max_connections, 1);
    }
    for key in ["MaxBurstLength", "FirstBurstLength", "MaxOutstandingR2T"] {
        if pairs.iter().any(|(k, _)| k == key) && session == SessionType::Normal {
            let (t, i) = match key {
                "MaxBurstLength" => (target.max_burst_length, initiator.max_burst_length),
                "FirstBurstLength" => (target.first_burst_length, initiator.first_burst_length),
                _ => (target.max_outstanding_r2t, initiator.max_outstanding_r2t),
            };
            // The initiator applies the last answer; a later MaxBurstLength may have lowered
            // FirstBurstLength on the target side only.
            if key != "FirstBurstLength" {
                assert_eq!(t, i, "{key}: target {t}, initiator read {i}");
            }
        }
    }
}
