//! A CDL hard disk over iSCSI: `stint serve --config examples/fast-fail.toml` answered through
//! the crate's initiator with real CDBs: detection (RSOC, VPD B1h, the T2A page), limited
//! reads that miss their limit failing with the CDL sense while unlimited ones complete, the
//! LOG SENSE counters, a connection that keeps receiving while the drive is busy, and ABORT
//! TASK of a queued command.

mod common;
use common::Server;
use iscsi::initiator::{Initiator, LoginOptions};
use iscsi::tmf;
use iscsi::url::IscsiUrl;

const EXAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/fast-fail.toml");
const CHECK_CONDITION: u8 = 0x02;

fn read16(lba: u64, blocks: u32, dld: u8) -> [u8; 16] {
    scsi::encode::rw16(false, lba, blocks, dld)
}

/// (sense key, ASC, ASCQ) of fixed-format sense data.
fn sense(s: &[u8]) -> (u8, u8, u8) {
    (s[2] & 0x0F, s[12], s[13])
}

/// A deterministic spread of LBAs over the whole 22 TB disk.
fn lba(i: u64, capacity_blocks: u64) -> u64 {
    (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 20) % (capacity_blocks - 256)
}

async fn login(server: &Server) -> (Initiator, u64) {
    let url: IscsiUrl = server.urls[0].parse().unwrap();
    let opts = LoginOptions::new("iqn.2026-11.dev.stint:test", Some(&url.target));
    let mut s = Initiator::connect_portal(&url.portal, &opts).await.unwrap();
    // The power-on unit attention.
    let r = s.scsi_command(url.lun, &[0; 6], &[], 0).await.unwrap();
    assert_eq!(r.status, CHECK_CONDITION);
    (s, url.lun)
}

async fn capacity_blocks(s: &mut Initiator, lun: u64) -> u64 {
    let r = s
        .scsi_command(
            lun,
            &[0x9E, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0],
            &[],
            32,
        )
        .await
        .unwrap();
    u64::from_be_bytes(r.data_in[..8].try_into().unwrap()) + 1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_sees_a_cdl_hard_disk() {
    let server = Server::start(&["--config", EXAMPLE], 1);
    let (mut s, lun) = login(&server).await;
    // 22 TB, rotating at 7200 rpm (VPD B1h MEDIUM ROTATION RATE).
    assert!(capacity_blocks(&mut s, lun).await * 512 > 20_000_000_000_000);
    let r = s
        .scsi_command(lun, &[0x12, 1, 0xB1, 0, 64, 0], &[], 64)
        .await
        .unwrap();
    assert_eq!(u16::from_be_bytes([r.data_in[4], r.data_in[5]]), 7200);
    // What Linux probes: RSOC one command for READ(16) and WRITE(16), 20 bytes.
    for (opcode, cdlp) in [(0x88, 1), (0x8A, 2)] {
        let cdb = [0xA3, 0x0C, 0x01, opcode, 0, 0, 0, 0, 0, 20, 0, 0];
        let r = s.scsi_command(lun, &cdb, &[], 20).await.unwrap();
        assert_eq!(r.status, 0);
        assert_eq!(
            (r.data_in[0] & 1, r.data_in[1] >> 3 & 3, r.data_in[1] & 7),
            (1, cdlp, 3)
        );
    }
    // The T2A page as cdladm reads it: descriptor 1 is a 30 ms guideline with policy Fh.
    let r = s
        .scsi_command(
            lun,
            &[0x5A, 0x08, 0x0A, 0x07, 0, 0, 0, 0x02, 0x00, 0],
            &[],
            512,
        )
        .await
        .unwrap();
    let page = &r.data_in[8..];
    assert_eq!(
        (
            page[0] & 0x3F,
            page[1],
            u16::from_be_bytes([page[2], page[3]])
        ),
        (0x0A, 7, 0xE4)
    );
    let d1 = &page[8..40];
    assert_eq!(
        (d1[0], u16::from_be_bytes([d1[10], d1[11]]), d1[14]),
        (0x0A, 3, 0x0F)
    );
    s.logout().await.unwrap();
    assert!(server.stop());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limited_reads_that_miss_fail_fast_and_the_others_complete() {
    let server = Server::start(&["--config", EXAMPLE], 1);
    let (mut s, lun) = login(&server).await;
    let blocks = capacity_blocks(&mut s, lun).await;
    // 96 random 64 KiB reads at once, a third each with DLD 0, 1 (Fh) and 2 (Dh): the
    // device queue holds 32, so limited reads wait far longer than their 30 ms.
    let mut sent = std::collections::BTreeMap::new();
    for i in 0..96u64 {
        let dld = (i % 3) as u8;
        let itt = s
            .submit(
                lun,
                &read16(lba(i, blocks), 128, dld),
                Vec::new(),
                128 * 512,
            )
            .await
            .unwrap();
        sent.insert(itt, dld);
    }
    let mut outcome = std::collections::BTreeMap::<(u8, &str), u32>::new();
    for _ in 0..96 {
        let (itt, r) = s.complete().await.unwrap();
        let dld = sent[&itt];
        let what = match (r.status, dld) {
            (0, _) => {
                assert_eq!(r.data_in.len(), 128 * 512);
                "good"
            }
            (CHECK_CONDITION, 1) => {
                let (key, asc, ascq) = sense(&r.sense);
                assert_eq!((key, asc), (0x0B, 0x2E), "ABORTED COMMAND, COMMAND TIMEOUT");
                assert!(matches!(ascq, 1 | 2), "before or during processing: {ascq}");
                assert!(r.data_in.is_empty());
                "aborted"
            }
            (CHECK_CONDITION, 2) => {
                assert_eq!(
                    sense(&r.sense),
                    (0x0F, 0x55, 0x0A),
                    "COMPLETED, DATA UNAVAILABLE"
                );
                assert!(r.data_in.is_empty());
                "unavailable"
            }
            (status, dld) => panic!("status {status:#x} for DLD {dld}: {:02x?}", r.sense),
        };
        *outcome.entry((dld, what)).or_default() += 1;
    }
    assert_eq!(outcome.get(&(0, "good")), Some(&32), "{outcome:?}");
    assert!(
        outcome.get(&(1, "aborted")).is_some_and(|n| *n > 0),
        "{outcome:?}"
    );
    assert!(
        outcome.get(&(2, "unavailable")).is_some_and(|n| *n > 0),
        "{outcome:?}"
    );
    // LOG SENSE 19h/21h: descriptors 1 and 2 each counted 32 commands.
    let r = s
        .scsi_command(
            lun,
            &[0x4D, 0, 0x59, 0x21, 0, 0, 0, 0x08, 0x00, 0],
            &[],
            2048,
        )
        .await
        .unwrap();
    assert_eq!(r.status, 0);
    let param = |code: u16| {
        let mut at = 4;
        while at + 4 <= r.data_in.len() {
            let len = usize::from(r.data_in[at + 3]);
            if u16::from_be_bytes([r.data_in[at], r.data_in[at + 1]]) == code {
                let c = &r.data_in[at + 4..at + 4 + len];
                return u32::from_be_bytes(c[12..16].try_into().unwrap());
            }
            at += 4 + len;
        }
        panic!("no parameter {code:#06x}");
    };
    assert_eq!((param(0x21), param(0x22), param(0x23)), (32, 32, 0));
    s.logout().await.unwrap();
    assert!(server.stop());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_connection_keeps_receiving_while_the_drive_is_busy() {
    let server = Server::start(&["--config", EXAMPLE], 1);
    let (mut s, lun) = login(&server).await;
    let blocks = capacity_blocks(&mut s, lun).await;
    let mut reads = Vec::new();
    for i in 0..100u64 {
        reads.push(
            s.submit(lun, &read16(lba(i, blocks), 256, 0), Vec::new(), 256 * 512)
                .await
                .unwrap(),
        );
    }
    // 100 random 128 KiB reads keep the disk busy for about half a second; a command that
    // does not touch the medium, sent after them, is answered at once.
    let tur = s.submit(lun, &[0; 6], Vec::new(), 0).await.unwrap();
    // ABORT TASK of a read still waiting in the queue: it never completes.
    let victim = reads[99];
    let answer = s
        .task_management(tmf::Function::AbortTask, lun, victim)
        .await
        .unwrap();
    assert_eq!(answer, tmf::Response::FunctionComplete);
    let mut order = Vec::new();
    for _ in 0..100 {
        let (itt, r) = s.complete().await.unwrap();
        assert_eq!(r.status, 0);
        assert_ne!(itt, victim, "an aborted task answered");
        order.push(itt);
    }
    let tur_at = order.iter().position(|i| *i == tur).unwrap();
    assert!(tur_at < 10, "TEST UNIT READY answered after {tur_at} reads");
    s.logout().await.unwrap();
    assert!(server.stop());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_a_host_saves_survive_a_restart_of_a_file_lun() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("stint.toml");
    std::fs::write(
        &config,
        format!(
            "[[target]]\nname = \"iqn.2026-11.dev.stint:saved\"\n[[target.lun]]\nstore = \"file\"\n\
             path = \"{}\"\nsize = \"1GiB\"\n[target.lun.drive]\nmodel = \"hdd\"\n",
            dir.path().join("disk.img").display()
        ),
    )
    .unwrap();
    let args = ["--config", config.to_str().unwrap()];
    let server = Server::start(&args, 1);
    let (mut s, lun) = login(&server).await;
    let sense_t2a = [0x5A, 0x08, 0x0A, 0x07, 0, 0, 0, 0x02, 0x00, 0];
    let r = s.scsi_command(lun, &sense_t2a, &[], 512).await.unwrap();
    // cdladm's upload: the page as read, descriptor 1 now a 20 ms guideline with policy Dh,
    // header cleared, PS cleared, saved (SP = 1).
    let mut list = r.data_in.clone();
    list[..8].fill(0);
    list[8] &= 0x7F;
    let d1 = 8 + 8;
    list[d1] = 0x0A;
    list[d1 + 10..d1 + 12].copy_from_slice(&2u16.to_be_bytes());
    list[d1 + 14] = 0x0D;
    let mut select = [0x55, 0x11, 0, 0, 0, 0, 0, 0, 0, 0];
    select[7..9].copy_from_slice(&(list.len() as u16).to_be_bytes());
    let w = s.scsi_command(lun, &select, &list, 0).await.unwrap();
    assert_eq!(w.status, 0, "{:02x?}", w.sense);
    s.logout().await.unwrap();
    assert!(server.stop());
    assert!(dir.path().join("disk.img.modes").exists());

    let server = Server::start(&args, 1);
    let (mut s, lun) = login(&server).await;
    let r = s.scsi_command(lun, &sense_t2a, &[], 512).await.unwrap();
    let d1 = &r.data_in[16..48];
    assert_eq!(
        (d1[0], u16::from_be_bytes([d1[10], d1[11]]), d1[14]),
        (0x0A, 2, 0x0D)
    );
    s.logout().await.unwrap();
    assert!(server.stop());
}
