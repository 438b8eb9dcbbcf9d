//! Arbitrary bytes into every decoder and into the target connection: no panic, ever.
//! A seeded xorshift generator keeps failures reproducible (the seed is in the message).

use std::sync::Arc;

use iscsi::bhs::{Bhs, Opcode};
use iscsi::output::Output;
use iscsi::pdu::{self, FrameLimits};
use iscsi::{text, Connection, Portal, TargetNode};
use scsi::command::{Command, ReadWrite};
use scsi::form;

struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

fn portal() -> Arc<Portal> {
    Arc::new(Portal::new(vec![TargetNode {
        retired: false,
        gateways: Vec::new(),
        name: "iqn.2026-01.org.stint:fuzz".into(),
        alias: None,
        target: Arc::new(device::Target::default()),
        allowed_initiators: Vec::new(),
        initiator_classes: Vec::new(),
        chap: None,
        privileged_initiators: vec!["*".into()],
    }]))
}

/// A valid login, so random PDUs also reach the full feature phase handlers.
fn login_pdu() -> Vec<u8> {
    let mut b = Bhs::new(Opcode::LoginRequest);
    b.set_immediate(true);
    b.set_flags(0x80 | (1 << 2) | 3);
    b.0[8] = 0x80;
    let mut keys = Vec::new();
    text::push(&mut keys, "InitiatorName", "iqn.fuzzer");
    text::push(&mut keys, "TargetName", "iqn.2026-01.org.stint:fuzz");
    let mut out = Vec::new();
    pdu::write_pdu(&mut out, &b, &keys, false, false);
    out
}

#[test]
fn decoders_never_panic_on_random_bytes() {
    let limits = FrameLimits {
        header_digest: true,
        data_digest: true,
        max_data_segment_length: 4096,
    };
    for seed in 1..3000u64 {
        let mut rng = XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let len = (rng.next() % 600) as usize;
        let bytes = rng.bytes(len);
        let _ = pdu::frame(&bytes, &limits);
        let _ = text::parse(&bytes);
        if let Some(bhs) = Bhs::from_slice(&bytes) {
            let _ = pdu::ScsiCommand::parse(&bhs, bytes.get(48..).unwrap_or(&[]));
            let _ = iscsi::login::LoginRequest::parse(&bhs);
            let _ = iscsi::tmf::TmfRequest::parse(&bhs);
        }
    }
}

#[test]
fn connection_survives_random_pdus() {
    let portal = portal();
    let mut handled_in_full_feature = 0;
    for seed in 1..400u64 {
        let mut rng = XorShift(seed.wrapping_mul(0xD1B5_4A32_D192_ED03));
        let mut conn = Connection::new(portal.clone(), "127.0.0.1:3260".into(), 0);
        let mut out = Output::new();
        let logged_in = seed % 4 != 0;
        if logged_in {
            let login = login_pdu();
            assert_eq!(
                conn.receive(0, &login, &mut out),
                login.len(),
                "seed {seed}"
            );
            assert!(conn.is_full_feature(), "seed {seed}");
            conn.recycle(&mut out);
        }
        // Well-formed headers with random fields (and a random opcode), then raw noise.
        for _ in 0..20 {
            let mut b = Bhs(rng.bytes(48).try_into().unwrap());
            let data_len = (rng.next() % 300) as usize;
            b.set_total_ahs_len_words((rng.next() % 3) as u8);
            let mut pdu_bytes = b.0.to_vec();
            pdu_bytes.extend(rng.bytes(b.total_ahs_len()));
            b.set_data_segment_len(data_len);
            pdu_bytes[5..8].copy_from_slice(&b.0[5..8]);
            pdu_bytes.extend(rng.bytes(data_len + iscsi::bhs::padding(data_len)));
            let used = conn.receive(0, &pdu_bytes, &mut out);
            assert!(used <= pdu_bytes.len(), "seed {seed}");
            if conn.is_full_feature() && used == pdu_bytes.len() {
                handled_in_full_feature += 1;
            }
            conn.recycle(&mut out);
            if conn.is_closed() {
                break;
            }
        }
        let noise = rng.bytes(1000);
        let _ = conn.receive(0, &noise, &mut out);
        conn.close();
    }
    // The PDUs really reached the full feature phase handlers.
    assert!(handled_in_full_feature > 1000, "{handled_in_full_feature}");
}

/// A "target" that completes the login, then answers everything with random PDUs: the
/// initiator must return errors, never panic or allocate from untrusted lengths.
#[tokio::test]
async fn initiator_survives_a_garbage_target() {
    use iscsi::initiator::{Initiator, LoginOptions};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let target = tokio::spawn(async move {
        for seed in 1..40u64 {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            let mut rng = XorShift(seed.wrapping_mul(0xA076_1D64_78BD_642F));
            let mut req = [0u8; 4096];
            let _ = s.read(&mut req).await;
            let mut b = Bhs::new(Opcode::LoginResponse);
            b.set_flags(0x80 | (1 << 2) | 3);
            b.set_u16_at(14, 1);
            b.set_itt(Bhs::from_slice(&req).map_or(0, |r| r.itt()));
            b.set_u32_at(32, 100); // MaxCmdSN
            let mut out = Vec::new();
            pdu::write_pdu(&mut out, &b, b"", false, false);
            // Then noise: random headers with plausible opcodes, and raw bytes.
            for _ in 0..8 {
                let mut h = Bhs(rng.bytes(48).try_into().unwrap());
                h.0[0] = [0x20, 0x21, 0x25, 0x31, 0x3F, 0x32, 0x24][(rng.next() % 7) as usize];
                h.set_total_ahs_len_words(0);
                let len = (rng.next() % 64) as usize;
                pdu::write_pdu(&mut out, &h, &rng.bytes(len), false, false);
            }
            out.extend(rng.bytes(200));
            let _ = s.write_all(&out).await;
            let _ = s.shutdown().await;
        }
    });
    let eight = ReadWrite {
        transfer_length: 8,
        ..ReadWrite::default()
    };
    let read = Command::Read(eight).emit(form::READ_10).unwrap();
    let write = Command::Write(eight).emit(form::WRITE_10).unwrap();
    let mut logged_in = 0;
    for _ in 1..40u64 {
        let mut opts = LoginOptions::new("iqn.fuzz", Some("iqn.garbage"));
        opts.timeout = std::time::Duration::from_millis(300);
        let Ok(mut ini) = Initiator::connect(addr, &opts).await else {
            continue;
        };
        logged_in += 1;
        let _ = ini.scsi_command(0, &read, &[], 4096).await;
        let _ = ini.nop(b"x").await;
        let _ = ini.scsi_command(0, &write, &[7; 4096], 0).await;
    }
    target.await.unwrap();
    // The garbage really reached the full feature phase decoders.
    assert!(logged_in > 30, "{logged_in}");
}
