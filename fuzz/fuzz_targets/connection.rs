//! A whole target connection (the sans-I/O `iscsi::Connection` in front of a `device::Target`
//! with a plain RAM logical unit and one with a device queue) fed a byte stream built from
//! the input: raw bytes, PDUs with random headers, SCSI commands in the CmdSN window,
//! Data-Out answering the latest R2T, all delivered in arbitrary pieces with time passing and
//! keepalive timers firing. Optionally a clean login comes first, so most inputs reach the
//! full feature phase. Beyond "no panic":
//! - the connection never consumes more than it was given;
//! - after our own login, everything it sends frames as whole PDUs under the negotiated
//!   digests, no data segment exceeds the initiator's MaxRecvDataSegmentLength (8192), and no
//!   R2T asks for more than MaxBurstLength;
//! - every SCSI Response with CHECK CONDITION carries well-formed sense data, and Data-In
//!   carries status only as GOOD without sense (phase collapse, RFC 7143 §11.7.4).
#![no_main]

use std::sync::{Arc, Mutex};

use iscsi::bhs::{Bhs, Opcode};
use iscsi::output::Output;
use iscsi::pdu::{self, FrameLimits};
use iscsi::{text, Connection};
use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;

/// The initiator's MaxRecvDataSegmentLength: the RFC 7143 §13.12 default, not negotiated.
const INITIATOR_MRDSL: usize = 8192;
/// MaxBurstLength: the RFC 7143 §13.13 default, not negotiated.
const MAX_BURST: u32 = 262_144;

struct Harness {
    conn: Connection,
    portal: Arc<iscsi::Portal>,
    /// What the device delivered to this connection's nexus from elsewhere (LUN 1's clock).
    mailbox: Arc<Mutex<Vec<device::Finished>>>,
    out: Output,
    stream: Vec<u8>,
    now: u64,
    cmdsn: u32,
    itt: u32,
    /// Digests of our login; `None`: the input logs in (or not) by itself, and what the
    /// connection sends is only checked to be framed while no login completed.
    digests: Option<bool>,
    /// The latest R2T: ITT, TTT, buffer offset, desired length.
    r2t: Option<(u32, u32, u32, u32)>,
}

fuzz_target!(|input: &[u8]| {
    let _ = run(&mut Unstructured::new(input));
});

fn run(u: &mut Unstructured) -> Result<()> {
    let knobs: u8 = u.arbitrary()?;
    let portal = stint_fuzz::portal();
    let mailbox = Arc::new(Mutex::new(Vec::new()));
    let mut conn = Connection::new(portal.clone(), "127.0.0.1:3260".into(), 0);
    let m = mailbox.clone();
    conn.set_mailbox(Arc::new(move |f| m.lock().unwrap().push(f)));
    let mut h = Harness {
        conn,
        portal,
        mailbox,
        out: Output::new(),
        stream: Vec::new(),
        now: 0,
        cmdsn: 1,
        itt: 0,
        digests: None,
        r2t: None,
    };
    if knobs & 1 != 0 {
        let digests = knobs & 2 != 0;
        h.login(knobs & 4 != 0, digests);
        h.flush(usize::MAX);
        assert!(h.conn.is_full_feature(), "our login was refused");
        // From here on every PDU each way carries the digests the login negotiated.
        h.digests = Some(digests);
    }
    while !u.is_empty() && !h.conn.is_closed() {
        match u.choose_index(6)? {
            0 => {
                let n = u.int_in_range(0..=200)?;
                let raw = u.bytes(n)?;
                h.stream.extend_from_slice(raw);
            }
            1 => {
                let mut b = Bhs(u.arbitrary()?);
                if u.arbitrary()? {
                    b.set_u32_at(24, h.next_cmdsn(b.immediate()));
                }
                b.set_total_ahs_len_words(0);
                let n = u.int_in_range(0..=600)?;
                let data = u.bytes(n)?.to_vec();
                h.push(&b, &data);
            }
            2 => {
                let mut b = Bhs::new(Opcode::ScsiCommand);
                b.set_immediate(u.ratio(1, 8)?);
                b.set_flags(u.arbitrary::<u8>()? & 0xE7 | 0x80);
                b.set_lun_raw(u64::from(u.int_in_range(0..=2u8)?) << 48);
                h.itt = h.itt.wrapping_add(1);
                b.set_itt(h.itt);
                let edtl = u32::from(u.arbitrary::<u16>()?) * 8;
                b.set_u32_at(20, edtl);
                b.set_u32_at(24, h.next_cmdsn(b.immediate()));
                b.0[32..48].copy_from_slice(&u.arbitrary::<[u8; 16]>()?);
                let n = u.int_in_range(0..=1024)?;
                let data = u.bytes(n)?.to_vec();
                h.push(&b, &data);
            }
            3 => {
                if let Some((itt, ttt, offset, len)) = h.r2t {
                    let mut b = Bhs::new(Opcode::DataOut);
                    b.set_flags(if u.ratio(7, 8)? { 0x80 } else { 0 });
                    b.set_itt(itt);
                    b.set_u32_at(20, ttt);
                    b.set_u32_at(40, offset);
                    let n = (len as usize).min(INITIATOR_MRDSL);
                    let n = if u.ratio(7, 8)? {
                        n
                    } else {
                        u.int_in_range(0..=n)?
                    };
                    h.push(&b, &vec![0xA5; n]);
                    h.r2t = None;
                }
            }
            4 => {
                let piece = u.int_in_range(1..=4096)?;
                h.flush(piece);
            }
            _ => {
                h.now += u64::from(u.arbitrary::<u32>()?) * 1000;
                if !h.conn.handle_timeout(h.now, &mut h.out) {
                    h.conn.close();
                }
                h.collect();
            }
        }
    }
    h.flush(usize::MAX);
    Ok(())
}

impl Harness {
    fn login(&mut self, discovery: bool, digests: bool) {
        let mut b = Bhs::new(Opcode::LoginRequest);
        b.set_immediate(true);
        b.set_flags(0x80 | (1 << 2) | 3);
        b.0[8] = 0x80;
        b.set_u32_at(24, self.cmdsn);
        let mut keys = Vec::new();
        text::push(&mut keys, "InitiatorName", "iqn.2026-01.dev.stint:fuzzer");
        if discovery {
            text::push(&mut keys, "SessionType", "Discovery");
        } else {
            text::push(&mut keys, "TargetName", stint_fuzz::TARGET_NAME);
        }
        let digest = if digests { "CRC32C" } else { "None" };
        text::push(&mut keys, "HeaderDigest", digest);
        text::push(&mut keys, "DataDigest", digest);
        pdu::write_pdu(&mut self.stream, &b, &keys, false, false);
    }

    /// The CmdSN for the next PDU: immediate ones carry it without advancing it.
    fn next_cmdsn(&mut self, immediate: bool) -> u32 {
        let sn = self.cmdsn;
        if !immediate {
            self.cmdsn = self.cmdsn.wrapping_add(1);
        }
        sn
    }

    fn push(&mut self, b: &Bhs, data: &[u8]) {
        let d = self.digests.unwrap_or(false) && self.conn.is_full_feature();
        pdu::write_pdu(&mut self.stream, b, data, d, d);
    }

    /// Hands the stream over as reads would: `piece` more bytes at a time, the unconsumed
    /// tail of a partial PDU kept in front of them, the output written (checked) between calls.
    fn flush(&mut self, piece: usize) {
        let mut start = 0;
        let mut avail = piece.min(self.stream.len());
        while !self.conn.is_closed() {
            let given = &self.stream[start..avail];
            let used = self.conn.receive(self.now, given, &mut self.out);
            assert!(used <= given.len(), "consumed more than it was given");
            start += used;
            let full = self.out.is_full();
            self.collect();
            if full {
                continue;
            }
            if avail == self.stream.len() {
                break;
            }
            avail = avail.saturating_add(piece).min(self.stream.len());
        }
        self.stream.drain(..start);
    }

    /// Delivers what the queued logical unit finished, then checks and recycles the output.
    fn collect(&mut self) {
        let units = self.portal.nodes()[0].target.units();
        if let Some((_, unit)) = units.iter().find(|(lun, _)| *lun == 1) {
            let mut sink = stint_fuzz::Collect::default();
            unit.advance(self.now, &mut sink);
            for f in sink.0 {
                self.portal.router.route(f);
            }
        }
        let delivered = std::mem::take(&mut *self.mailbox.lock().unwrap());
        for f in delivered {
            self.conn.complete(self.now, f, &mut self.out);
        }
        let bytes = self.out.to_bytes();
        match self.digests {
            Some(d) => {
                let limits = FrameLimits {
                    header_digest: d,
                    data_digest: d,
                    max_data_segment_length: INITIATOR_MRDSL,
                };
                for (bhs, data) in stint_fuzz::frame_all(&bytes, &limits) {
                    self.check(&bhs, &data);
                }
            }
            None if !self.conn.is_full_feature() && self.conn.identity().is_none() => {
                stint_fuzz::frame_all(&bytes, &stint_fuzz::PLAIN);
            }
            None => {}
        }
        self.conn.recycle(&mut self.out);
    }

    fn check(&mut self, bhs: &Bhs, data: &[u8]) {
        match bhs.opcode_raw() {
            // SCSI Response (RFC 7143 §11.4): CHECK CONDITION carries SenseLength + sense.
            0x21 if bhs.0[2] == 0 && bhs.0[3] == 0x02 => {
                let sense = data.get(2..).expect("CHECK CONDITION without SenseLength");
                let len = usize::from(u16::from_be_bytes([data[0], data[1]]));
                stint_fuzz::check_sense(sense.get(..len).expect("SenseLength beyond the data"));
            }
            // Data-In with the S bit: status only for GOOD.
            0x25 if bhs.flags() & 0x01 != 0 => {
                assert_eq!(bhs.0[3], 0, "Data-In carries status {:02x}h", bhs.0[3]);
            }
            // R2T (§11.8): what we answer with Data-Out.
            0x31 => {
                let len = bhs.u32_at(44);
                assert!(len > 0 && len <= MAX_BURST, "R2T for {len} bytes");
                self.r2t = Some((bhs.itt(), bhs.u32_at(20), bhs.u32_at(40), len));
            }
            _ => {}
        }
    }
}
