//! The PDU codec (RFC 7143 §11): framing of a receive buffer under any negotiated limits, and
//! the header layouts read from it. Beyond "no panic":
//! - a frame lies inside the buffer, and framing one PDU at a time consumes it exactly;
//! - a framed PDU with a zero-padded data segment re-encodes to the very bytes it came from;
//! - every header layout with an encoder (SCSI Command, Data-Out, Task Management) encodes back
//!   to the fields it was parsed from.
#![no_main]

use iscsi::bhs::{Bhs, Opcode, BHS_LEN};
use iscsi::pdu::{self, Data, FrameLimits, ScsiCommand};
use iscsi::tmf::TmfRequest;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    let Some((&knobs, bytes)) = input.split_first() else {
        return;
    };
    let limits = FrameLimits {
        header_digest: knobs & 1 != 0,
        data_digest: knobs & 2 != 0,
        max_data_segment_length: [512, 8192, 262_144, (1 << 24) - 1][usize::from(knobs >> 2 & 3)],
    };
    let mut pos = 0;
    while let Ok(Some(f)) = pdu::frame(&bytes[pos..], &limits) {
        let rest = &bytes[pos..];
        assert!(f.len <= rest.len() && f.len >= BHS_LEN);
        assert!(f.ahs.end <= f.data.start && f.data.end <= f.len);
        assert!(f.data.len() <= limits.max_data_segment_length);
        let whole = &rest[..f.len];
        let data = &whole[f.data.clone()];
        let ahs = &whole[f.ahs.clone()];
        if f.ahs.is_empty()
            && f.data_digest_ok
            && whole[f.data.end..]
                .iter()
                .take(iscsi::bhs::padding(f.data.len()))
                .all(|&b| b == 0)
        {
            reencode(&f.bhs, data, whole, &limits);
        }
        headers(&f.bhs, ahs);
        pos += f.len;
    }
});

/// A PDU without AHS whose padding is zero (and whose digests match) is exactly what
/// `write_pdu` makes of its header and data.
fn reencode(bhs: &Bhs, data: &[u8], whole: &[u8], limits: &FrameLimits) {
    let mut again = Vec::new();
    pdu::write_pdu(
        &mut again,
        bhs,
        data,
        limits.header_digest,
        limits.data_digest,
    );
    assert_eq!(again, whole, "a framed PDU re-encodes differently");
}

/// The typed views of a header, and their encoders where stint has one.
fn headers(bhs: &Bhs, ahs: &[u8]) {
    match bhs.opcode() {
        Some(Opcode::ScsiCommand) => {
            let Ok(cmd) = ScsiCommand::parse(bhs, ahs) else {
                return;
            };
            let cdb = cmd.cdb.as_slice();
            assert!(cdb.len() >= 16 && cdb.len() <= pdu::MAX_CDB_LEN);
            assert_eq!(&cdb[..16], &bhs.0[32..48]);
            let again = cmd.to_bhs();
            // Everything but the opcode byte's reserved bit, the reserved flag bits (4:3)
            // and the reserved bytes 2..4 and 5..8 (data segment length) comes back.
            let mut want = *bhs;
            want.0[0] &= 0x7F;
            want.0[1] &= 0xE7;
            want.0[2..8].fill(0);
            let mut got = again;
            got.0[0] &= 0x7F;
            got.0[2..8].fill(0);
            assert_eq!(got, want, "SCSI Command header round trip");
            assert_eq!(ScsiCommand::parse(&again, ahs).map(|c| c.itt), Ok(cmd.itt));
        }
        Some(Opcode::DataOut) => {
            let d = Data::parse(bhs);
            let again = Data::parse(&d.to_data_out(bhs.u32_at(28)));
            assert_eq!(again, d, "Data-Out header round trip");
        }
        Some(Opcode::TaskManagementRequest) => {
            let t = TmfRequest::parse(bhs);
            if let Some(function) = t.function {
                let again = TmfRequest::parse(&t.to_bhs(function));
                assert_eq!(again.function, t.function);
                assert_eq!(again.referenced_task_tag, t.referenced_task_tag);
                assert_eq!(again.lun, t.lun);
            }
        }
        Some(Opcode::LoginRequest) => {
            let l = iscsi::login::LoginRequest::parse(bhs);
            assert_eq!(l.isid, bhs.0[8..14]);
        }
        _ => {}
    }
}
