//! A CDL hard disk over iSCSI: `stint serve --config examples/fast-fail.toml` answered through
//! the crate's initiator with real CDBs: detection (RSOC, VPD B1h, the T2A page), limited
//! reads that miss their limit failing with the CDL sense while unlimited ones complete, the
//! LOG SENSE counters, a connection that keeps receiving while the drive is busy, and ABORT
//! TASK of a queued command.

mod common;
use common::cdb::{emit, mode_select10, mode_sense10, read, rw, sense, test_unit_ready, Cdb};
use common::Server;
use iscsi::initiator::{Initiator, LoginOptions};
use iscsi::tmf;
use iscsi::url::IscsiUrl;
use qos::cdl::{CdlPage, CdlPageKind, Policy, T2CdlUnits};
use scsi::command::{
    Command, Inquiry, LogPageControl, LogSense, PageControl, ReadWrite,
    ReportSupportedOperationCodes,
};
use scsi::{form, Asc, SenseKey, Status};

const EXAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/fast-fail.toml");
const CHECK_CONDITION: u8 = Status::CheckCondition as u8;

fn read16(lba: u64, blocks: u32, dld: u8) -> Cdb {
    read(
        form::READ_16,
        ReadWrite {
            dld,
            ..rw(lba, blocks)
        },
    )
}

/// MODE SENSE(10) of the T2A page's current values.
fn sense_t2a() -> Cdb {
    mode_sense10(PageControl::Current, scsi::mode::CONTROL, 0x07, 512)
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
    let r = s
        .scsi_command(url.lun, &test_unit_ready(), &[], 0)
        .await
        .unwrap();
    assert_eq!(r.status, CHECK_CONDITION);
    (s, url.lun)
}

async fn capacity_blocks(s: &mut Initiator, lun: u64) -> u64 {
    let r = s
        .scsi_command(
            lun,
            &emit(
                Command::ReadCapacity16 {
                    allocation_length: 32,
                },
                form::READ_CAPACITY_16,
            ),
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
        .scsi_command(
            lun,
            &emit(
                Command::Inquiry(Inquiry {
                    evpd: true,
                    page_code: 0xB1,
                    allocation_length: 64,
                }),
                form::INQUIRY,
            ),
            &[],
            64,
        )
        .await
        .unwrap();
    assert_eq!(u16::from_be_bytes([r.data_in[4], r.data_in[5]]), 7200);
    // What Linux probes: RSOC one command for READ(16) and WRITE(16), 20 bytes.
    for (command, cdlp) in [(form::READ_16, 1), (form::WRITE_16, 2)] {
        let one_command = ReportSupportedOperationCodes {
            rctd: false,
            reporting_options: 0b001,
            requested_operation_code: command.opcode(),
            requested_service_action: 0,
            allocation_length: 20,
        };
        let cdb = emit(
            Command::ReportSupportedOperationCodes(one_command),
            form::REPORT_SUPPORTED_OPERATION_CODES,
        );
        let r = s.scsi_command(lun, &cdb, &[], 20).await.unwrap();
        assert_eq!(r.status, 0);
        assert_eq!(
            (r.data_in[0] & 1, r.data_in[1] >> 3 & 3, r.data_in[1] & 7),
            (1, cdlp, 3)
        );
    }
    // The T2A page as cdladm reads it: descriptor 1 is a 30 ms guideline with policy Fh.
    let r = s.scsi_command(lun, &sense_t2a(), &[], 512).await.unwrap();
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
                let timeouts = [
                    Asc::COMMAND_TIMEOUT_BEFORE_PROCESSING,
                    Asc::COMMAND_TIMEOUT_DURING_PROCESSING,
                ];
                assert!(
                    matches!(sense(&r), Some((SenseKey::AbortedCommand, asc)) if timeouts.contains(&asc)),
                    "ABORTED COMMAND, COMMAND TIMEOUT before or during processing: {:?}",
                    r.parsed_sense()
                );
                assert!(r.data_in.is_empty());
                "aborted"
            }
            (CHECK_CONDITION, 2) => {
                assert_eq!(
                    sense(&r),
                    Some((SenseKey::Completed, Asc::DATA_CURRENTLY_UNAVAILABLE))
                );
                assert!(r.data_in.is_empty());
                "unavailable"
            }
            (status, dld) => panic!("status {status:#x} for DLD {dld}: {:?}", r.parsed_sense()),
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
    let (page_code, subpage_code) = scsi::log::COMMAND_DURATION_LIMITS_STATISTICS;
    let log_sense = LogSense {
        pc: LogPageControl::CumulativeValues,
        page_code,
        subpage_code,
        parameter_pointer: 0,
        allocation_length: 2048,
    };
    let r = s
        .scsi_command(
            lun,
            &emit(Command::LogSense(log_sense), form::LOG_SENSE),
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
    let tur = s
        .submit(lun, &test_unit_ready(), Vec::new(), 0)
        .await
        .unwrap();
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
    let r = s.scsi_command(lun, &sense_t2a(), &[], 512).await.unwrap();
    // cdladm's upload: the page as read, descriptor 1 now a 20 ms guideline with policy Dh,
    // after an empty mode parameter header (PS clear, as the page encodes), saved (SP = 1).
    let mut page = CdlPage::decode(CdlPageKind::T2A, &r.data_in[8..]).unwrap();
    let d1 = &mut page.descriptors[0];
    d1.t2cdlunits = T2CdlUnits::Ms10;
    d1.command_duration_guideline = 2;
    d1.command_duration_guideline_policy = Policy::CompleteUnavailable;
    let mut list = vec![0; 8];
    list.extend_from_slice(&page.encode(CdlPageKind::T2A));
    let select = mode_select10(list.len(), true);
    let w = s.scsi_command(lun, &select, &list, 0).await.unwrap();
    assert_eq!(w.status, 0, "{:?}", w.parsed_sense());
    s.logout().await.unwrap();
    assert!(server.stop());
    assert!(dir.path().join("disk.img.modes").exists());

    let server = Server::start(&args, 1);
    let (mut s, lun) = login(&server).await;
    let r = s.scsi_command(lun, &sense_t2a(), &[], 512).await.unwrap();
    let d1 = &r.data_in[16..48];
    assert_eq!(
        (d1[0], u16::from_be_bytes([d1[10], d1[11]]), d1[14]),
        (0x0A, 2, 0x0D)
    );
    s.logout().await.unwrap();
    assert!(server.stop());
}
