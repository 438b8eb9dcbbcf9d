//! Data moving through the target: immediate, unsolicited and solicited (R2T) Data-Out,
//! Data-In bursts, residuals, DataSN checks, ABORT TASK of a write waiting for data, and
//! several sessions at once. The device is a small RAM disk behind `ScsiTarget`.

mod common;

use std::time::Duration;

use common::*;
use iscsi::bhs::{Bhs, Opcode, RESERVED_TAG};
use iscsi::pdu::{Cdb, Data, Residual, ScsiCommand};
use iscsi::tmf::{Function, Response};
use scsi::{Asc, SenseKey, Status};

const MIB: usize = 1 << 20;

async fn round_trip(keys: &[(&str, &str)], len: usize, seed: u8) {
    let server = Server::start(4096).await;
    let mut ini = server.login_with(keys).await;
    let data = pattern(len, seed);
    let blocks = (len / BLOCK) as u16;
    let w = ini
        .scsi_command(0, &write10(8, blocks), &data, 0)
        .await
        .unwrap();
    assert_eq!((w.status, w.residual), (0, Residual::None), "{keys:?}");
    let r = ini
        .scsi_command(0, &read10(8, blocks), &[], len as u32)
        .await
        .unwrap();
    assert_eq!(r.status, 0);
    assert!(r.data_in == data, "{keys:?}: data differs");
    assert_eq!(
        server.disk.data.lock().unwrap()[8 * BLOCK..8 * BLOCK + len],
        data[..]
    );
    ini.logout().await.unwrap();
    server.stop().await;
}

#[tokio::test]
async fn immediate_and_unsolicited_then_r2t() {
    // InitialR2T=No, ImmediateData=Yes: 256 KiB immediate, the rest solicited.
    round_trip(&[], MIB, 1).await;
}

#[tokio::test]
async fn solicited_only() {
    round_trip(&[("ImmediateData", "No"), ("InitialR2T", "Yes")], MIB, 2).await;
}

#[tokio::test]
async fn unsolicited_data_out_pdus() {
    // Small FirstBurstLength and no immediate data: unsolicited Data-Out PDUs, then R2Ts.
    round_trip(
        &[("ImmediateData", "No"), ("FirstBurstLength", "8192")],
        64 * 1024,
        3,
    )
    .await;
}

#[tokio::test]
async fn small_bursts_and_segments() {
    round_trip(
        &[
            ("MaxBurstLength", "8192"),
            ("FirstBurstLength", "4096"),
            ("MaxRecvDataSegmentLength", "1024"),
        ],
        96 * 1024,
        4,
    )
    .await;
}

#[tokio::test]
async fn several_outstanding_r2ts() {
    round_trip(
        &[
            ("MaxOutstandingR2T", "4"),
            ("MaxBurstLength", "8192"),
            ("FirstBurstLength", "4096"),
            ("ImmediateData", "No"),
            ("InitialR2T", "Yes"),
        ],
        200 * 1024,
        7,
    )
    .await;
}

#[tokio::test]
async fn with_digests() {
    round_trip(
        &[("HeaderDigest", "CRC32C"), ("DataDigest", "CRC32C")],
        300 * 1024,
        5,
    )
    .await;
}

#[tokio::test]
async fn data_in_respects_segment_and_burst_limits() {
    let server = Server::start(256).await;
    let mut ini = server
        .login_with(&[
            ("MaxBurstLength", "4096"),
            ("MaxRecvDataSegmentLength", "1536"),
        ])
        .await;
    let cmd = ScsiCommand {
        immediate: false,
        final_bit: true,
        read: true,
        write: false,
        attr: 1,
        lun: 0,
        itt: 0x99,
        expected_data_transfer_length: 10 * 1024,
        cmdsn: ini.take_cmdsn(),
        exp_statsn: 0,
        cdb: Cdb::new(&read10(0, 20)).unwrap(),
    };
    ini.send(&cmd.to_bhs(), &[]).await.unwrap();
    let mut pdus = Vec::new();
    loop {
        let p = ini.recv().await.unwrap();
        assert_eq!(p.bhs.opcode(), Some(Opcode::DataIn));
        let status = p.bhs.flags() & 0x01 != 0;
        pdus.push((Data::parse(&p.bhs), p.data.len(), status));
        if status {
            break;
        }
    }
    // Bursts of 4096 split into 1536-byte segments: 1536, 1536, 1024 | ... | 1536, 512.
    let lens: Vec<usize> = pdus.iter().map(|p| p.1).collect();
    assert_eq!(lens, vec![1536, 1536, 1024, 1536, 1536, 1024, 1536, 512]);
    let finals: Vec<bool> = pdus.iter().map(|p| p.0.final_bit).collect();
    assert_eq!(
        finals,
        vec![false, false, true, false, false, true, false, true]
    );
    for (i, (d, _, _)) in pdus.iter().enumerate() {
        assert_eq!(d.datasn, i as u32);
    }
    assert_eq!(pdus.last().map(|p| p.0.buffer_offset), Some(9728));
    drop(ini);
    server.stop().await;
}

#[tokio::test]
async fn residuals_follow_the_expected_length() {
    let server = Server::start(64).await;
    let mut ini = server.login_with(&[]).await;
    // Read: CDB wants 1 block, initiator expects 10000 bytes → underflow.
    let r = ini
        .scsi_command(0, &read10(0, 1), &[], 10_000)
        .await
        .unwrap();
    assert_eq!(
        (r.status, r.residual, r.data_in.len()),
        (0, Residual::Underflow(10_000 - 512), 512)
    );
    // Read: CDB wants 2 blocks, initiator expects 1 → 512 bytes sent, overflow 512.
    let r = ini.scsi_command(0, &read10(0, 2), &[], 512).await.unwrap();
    assert_eq!(
        (r.status, r.residual, r.data_in.len()),
        (0, Residual::Overflow(512), 512)
    );
    // Write: CDB 1 block, 2 blocks sent → underflow; only the first block is written.
    let two = pattern(1024, 9);
    let w = ini.scsi_command(0, &write10(4, 1), &two, 0).await.unwrap();
    assert_eq!((w.status, w.residual), (0, Residual::Underflow(512)));
    let disk = server.disk.data.lock().unwrap()[4 * BLOCK..6 * BLOCK].to_vec();
    assert_eq!(disk[..512], two[..512]);
    assert_eq!(disk[512..], [0u8; 512]);
    // Write: CDB 2 blocks, 200 bytes sent → overflow.
    let w = ini
        .scsi_command(0, &write10(10, 2), &two[..200], 0)
        .await
        .unwrap();
    assert_eq!(w.residual, Residual::Overflow(1024 - 200));
    ini.logout().await.unwrap();
    server.stop().await;
}

/// A WRITE(10) of two blocks sent without data; the Data-Out PDUs follow by hand.
async fn bare_write(ini: &mut iscsi::initiator::Initiator, itt: u32) {
    let cmd = ScsiCommand {
        immediate: false,
        final_bit: false,
        read: false,
        write: true,
        attr: 1,
        lun: 0,
        itt,
        expected_data_transfer_length: 1024,
        cmdsn: ini.take_cmdsn(),
        exp_statsn: 0,
        cdb: Cdb::new(&write10(0, 2)).unwrap(),
    };
    ini.send(&cmd.to_bhs(), &[]).await.unwrap();
}

fn data_out(itt: u32, datasn: u32, offset: u32, final_bit: bool) -> Bhs {
    Data {
        final_bit,
        lun: 0,
        itt,
        ttt: RESERVED_TAG,
        datasn,
        buffer_offset: offset,
    }
    .to_data_out(0)
}

#[tokio::test]
async fn bad_datasn_fails_the_command_not_the_session() {
    let server = Server::start(64).await;
    let mut ini = server.login_with(&[("ImmediateData", "No")]).await;
    assert!(!ini.params().initial_r2t);
    for (first, second) in [(0, 0), (1, 0), (27, 1)] {
        let itt = 0x500 + first;
        bare_write(&mut ini, itt).await;
        ini.send(&data_out(itt, first, 0, false), &[0xA6; 512])
            .await
            .unwrap();
        ini.send(&data_out(itt, second, 512, true), &[0xA6; 512])
            .await
            .unwrap();
        let p = ini.recv().await.unwrap();
        assert_eq!(p.bhs.opcode(), Some(Opcode::ScsiResponse));
        assert_eq!(
            (p.bhs.itt(), p.bhs.0[3]),
            (itt, 0x02),
            "DataSN {first},{second}"
        );
        assert_eq!(response_sense(&p.data).key, SenseKey::AbortedCommand);
        // Nothing else arrives for that command.
        assert!(ini
            .recv_timeout(Duration::from_millis(100))
            .await
            .unwrap()
            .is_none());
    }
    assert_eq!(ini.nop(b"ok").await.unwrap(), b"ok");
    assert!(server.disk.data.lock().unwrap()[..1024]
        .iter()
        .all(|b| *b == 0));
    drop(ini);
    server.stop().await;
}

/// Immediate commands bypass the CmdSN window, so a session's tasks are capped on their own:
/// past twice the window (128) every command gets TASK SET FULL and nothing is kept for it
/// (issue 11: 2,000 immediate writes waiting for data grew the server by 518 MB).
#[tokio::test]
async fn a_flood_of_immediate_writes_meets_task_set_full() {
    let server = Server::start(64).await;
    let mut ini = server
        .login_with(&[("ImmediateData", "No"), ("InitialR2T", "Yes")])
        .await;
    // Immediate commands carry the next CmdSN without taking it (RFC 7143 §3.2.2.1).
    let (cmdsn, _) = ini.cmdsn();
    for itt in 0..400u32 {
        let cmd = ScsiCommand {
            immediate: true,
            final_bit: true,
            read: false,
            write: true,
            attr: 1,
            lun: 0,
            itt,
            expected_data_transfer_length: 1024,
            cmdsn,
            exp_statsn: 0,
            cdb: Cdb::new(&write10(0, 2)).unwrap(),
        };
        ini.send(&cmd.to_bhs(), &[]).await.unwrap();
    }
    let (mut r2ts, mut full) = (0, 0);
    while let Some(p) = ini.recv_timeout(Duration::from_millis(300)).await.unwrap() {
        match p.bhs.opcode() {
            Some(Opcode::ReadyToTransfer) => r2ts += 1,
            // Status byte 3: TASK SET FULL (28h), no sense.
            Some(Opcode::ScsiResponse) if p.bhs.0[3] == Status::TaskSetFull as u8 => full += 1,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!((r2ts, full), (256, 144));
    drop(ini);
    server.stop().await;
}

/// A command with the tag of a task still in progress is refused with OVERLAPPED COMMANDS
/// ATTEMPTED; the older task goes on (issue 11: duplicate tags were accepted).
#[tokio::test]
async fn a_duplicate_task_tag_is_an_overlapped_command() {
    let server = Server::start_device(64).await;
    let mut ini = server
        .login_ready(&[("ImmediateData", "No"), ("InitialR2T", "Yes")])
        .await;
    let itt = 0x700;
    bare_write(&mut ini, itt).await;
    let r2t = ini.recv().await.unwrap();
    assert_eq!(r2t.bhs.opcode(), Some(Opcode::ReadyToTransfer));
    bare_write(&mut ini, itt).await;
    let p = ini.recv().await.unwrap();
    assert_eq!(p.bhs.opcode(), Some(Opcode::ScsiResponse));
    assert_eq!((p.bhs.itt(), p.bhs.0[3]), (itt, 0x02));
    let sense = response_sense(&p.data);
    assert_eq!(
        (sense.key, sense.asc),
        (SenseKey::AbortedCommand, Asc::OVERLAPPED_COMMANDS_ATTEMPTED)
    );
    // The first write still takes its data and completes.
    let d = Data {
        final_bit: true,
        lun: 0,
        itt,
        ttt: r2t.bhs.u32_at(20),
        datasn: 0,
        buffer_offset: 0,
    };
    ini.send(&d.to_data_out(0), &[0x5A; 1024]).await.unwrap();
    let p = ini.recv().await.unwrap();
    assert_eq!(
        (p.bhs.opcode(), p.bhs.0[3]),
        (Some(Opcode::ScsiResponse), 0x00)
    );
    assert!(server.bytes(1024).iter().all(|b| *b == 0x5A));
    drop(ini);
    server.stop().await;
}

#[tokio::test]
async fn abort_task_of_a_write_waiting_for_data() {
    let server = Server::start_device(64).await;
    let mut ini = server
        .login_ready(&[("ImmediateData", "No"), ("InitialR2T", "Yes")])
        .await;
    let itt = 0x777;
    let cmd_bhs = {
        let cmd = ScsiCommand {
            immediate: false,
            final_bit: true,
            read: false,
            write: true,
            attr: 1,
            lun: 0,
            itt,
            expected_data_transfer_length: 1024,
            cmdsn: ini.take_cmdsn(),
            exp_statsn: 0,
            cdb: Cdb::new(&write10(0, 2)).unwrap(),
        };
        cmd.to_bhs()
    };
    ini.send(&cmd_bhs, &[]).await.unwrap();
    let r2t = ini.recv().await.unwrap();
    assert_eq!(r2t.bhs.opcode(), Some(Opcode::ReadyToTransfer));
    assert_eq!((r2t.bhs.u32_at(40), r2t.bhs.u32_at(44)), (0, 1024));
    assert_eq!(
        ini.task_management(Function::AbortTask, 0, itt)
            .await
            .unwrap(),
        Response::FunctionComplete
    );
    // Data for the aborted task is dropped quietly; nothing is written.
    let d = Data {
        final_bit: true,
        lun: 0,
        itt,
        ttt: r2t.bhs.u32_at(20),
        datasn: 0,
        buffer_offset: 0,
    };
    ini.send(&d.to_data_out(0), &[0x55; 1024]).await.unwrap();
    assert!(ini
        .recv_timeout(Duration::from_millis(100))
        .await
        .unwrap()
        .is_none());
    assert_eq!(ini.nop(b"after abort").await.unwrap(), b"after abort");
    assert!(server.bytes(1024).iter().all(|b| *b == 0));
    drop(ini);
    server.stop().await;
}

#[tokio::test]
async fn lun_reset_reaches_the_device_and_logout_loses_the_nexus() {
    let server = Server::start(8).await;
    let mut ini = server.login_with(&[]).await;
    assert_eq!(
        ini.task_management(Function::LogicalUnitReset, 0, RESERVED_TAG)
            .await
            .unwrap(),
        Response::FunctionComplete
    );
    ini.logout().await.unwrap();
    // The server notices the closed connection right after the Logout Response.
    for _ in 0..50 {
        if server.disk.events.lock().unwrap().len() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let events = server.disk.events.lock().unwrap().clone();
    assert_eq!(events[0], "LogicalUnitReset lun 0");
    assert_eq!(events[1], format!("lost {INITIATOR},i,0x800000001234"));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_sessions_at_once() {
    let server = Server::start(4096).await;
    let mut tasks = Vec::new();
    for s in 0..4u8 {
        let addr = server.addr;
        tasks.push(tokio::spawn(async move {
            let mut opts = iscsi::initiator::LoginOptions::new(INITIATOR, Some(TARGET));
            opts.isid[5] = s;
            let mut ini = iscsi::initiator::Initiator::connect(addr, &opts)
                .await
                .unwrap();
            for round in 0..20u8 {
                let lba = u32::from(s) * 256 + u32::from(round) * 8;
                let data = pattern(8 * BLOCK, s ^ round);
                assert_eq!(
                    ini.scsi_command(0, &write10(lba, 8), &data, 0)
                        .await
                        .unwrap()
                        .status,
                    0
                );
                let r = ini
                    .scsi_command(0, &read10(lba, 8), &[], data.len() as u32)
                    .await
                    .unwrap();
                assert!(r.data_in == data);
            }
            ini.logout().await.unwrap();
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    server.stop().await;
}

#[tokio::test]
async fn pipelined_commands_complete_out_of_order_safely() {
    let server = Server::start(4096).await;
    // Small bursts so writes need R2Ts while other commands are in flight.
    let mut ini = server
        .login_with(&[("FirstBurstLength", "4096"), ("MaxBurstLength", "8192")])
        .await;
    let mut expected = std::collections::BTreeMap::new();
    for i in 0..32u32 {
        let data = pattern(16 * BLOCK, i as u8);
        let itt = ini
            .submit(0, &write10(i * 16, 16), data.clone(), 0)
            .await
            .unwrap();
        expected.insert(itt, (i, data));
    }
    assert_eq!(ini.in_flight(), 32);
    while ini.in_flight() > 0 {
        let (itt, r) = ini.complete().await.unwrap();
        assert_eq!(r.status, 0);
        assert!(expected.contains_key(&itt));
    }
    let mut reads = Vec::new();
    for (i, data) in expected.values() {
        let itt = ini
            .submit(0, &read10(i * 16, 16), Vec::new(), data.len() as u32)
            .await
            .unwrap();
        reads.push((itt, data.clone()));
    }
    for _ in 0..reads.len() {
        let (itt, r) = ini.complete().await.unwrap();
        let want = &reads.iter().find(|(i, _)| *i == itt).unwrap().1;
        assert!(&r.data_in == want, "ITT {itt:#x}");
    }
    ini.logout().await.unwrap();
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_large_reads_in_flight() {
    // 32 MiB of reads queued at once: more than one output batch (output::SOFT_LIMIT).
    let server = Server::start(32 * 2048).await;
    let mut ini = server.login_with(&[]).await;
    let data = pattern(32 * MIB, 6);
    server.disk.data.lock().unwrap().copy_from_slice(&data);
    let mut cmds = Vec::new();
    for i in 0..32u32 {
        cmds.push((
            ini.submit(0, &read10(i * 2048, 2048), Vec::new(), MIB as u32)
                .await
                .unwrap(),
            i as usize,
        ));
    }
    for _ in 0..32 {
        let (itt, r) = ini.complete().await.unwrap();
        let i = cmds.iter().find(|c| c.0 == itt).unwrap().1;
        assert_eq!(r.status, 0);
        assert!(r.data_in[..] == data[i * MIB..(i + 1) * MIB], "read {i}");
    }
    ini.logout().await.unwrap();
    server.stop().await;
}

#[tokio::test]
async fn lun_reset_from_another_session_aborts_a_waiting_write() {
    let server = Server::start_device(64).await;
    let mut a = server
        .login_ready(&[("ImmediateData", "No"), ("InitialR2T", "Yes")])
        .await;
    let mut opts = iscsi::initiator::LoginOptions::new(INITIATOR, Some(TARGET));
    opts.isid[5] ^= 0xFF;
    let mut b = iscsi::initiator::Initiator::connect(server.addr, &opts)
        .await
        .unwrap();
    let _power_on = b.scsi_command(0, &[0; 6], &[], 0).await.unwrap();
    let itt = 0x42;
    let cmd = ScsiCommand {
        immediate: false,
        final_bit: true,
        read: false,
        write: true,
        attr: 1,
        lun: 0,
        itt,
        expected_data_transfer_length: 1024,
        cmdsn: a.take_cmdsn(),
        exp_statsn: 0,
        cdb: Cdb::new(&write10(0, 2)).unwrap(),
    };
    a.send(&cmd.to_bhs(), &[]).await.unwrap();
    let r2t = a.recv().await.unwrap();
    assert_eq!(r2t.bhs.opcode(), Some(Opcode::ReadyToTransfer));
    assert_eq!(
        b.task_management(Function::LogicalUnitReset, 0, RESERVED_TAG)
            .await
            .unwrap(),
        Response::FunctionComplete
    );
    let d = Data {
        final_bit: true,
        lun: 0,
        itt,
        ttt: r2t.bhs.u32_at(20),
        datasn: 0,
        buffer_offset: 0,
    };
    a.send(&d.to_data_out(0), &[0x55; 1024]).await.unwrap();
    // The aborted write gets no response and writes nothing.
    assert!(a
        .recv_timeout(Duration::from_millis(100))
        .await
        .unwrap()
        .is_none());
    assert_eq!(a.nop(b"a").await.unwrap(), b"a");
    assert!(server.bytes(1024).iter().all(|x| *x == 0));
    drop((a, b));
    server.stop().await;
}

fn command(
    ini: &mut iscsi::initiator::Initiator,
    itt: u32,
    attr: u8,
    cdb: &[u8],
    read: u32,
    write: u32,
) -> Bhs {
    ScsiCommand {
        immediate: false,
        final_bit: true,
        read: read > 0,
        write: write > 0,
        attr,
        lun: 0,
        itt,
        expected_data_transfer_length: read.max(write),
        cmdsn: ini.take_cmdsn(),
        exp_statsn: 0,
        cdb: Cdb::new(cdb).unwrap(),
    }
    .to_bhs()
}

#[tokio::test]
async fn ordered_task_waits_for_older_tasks_head_of_queue_does_not() {
    let server = Server::start_device(64).await;
    let mut ini = server
        .login_ready(&[("ImmediateData", "No"), ("InitialR2T", "Yes")])
        .await;
    // SIMPLE write waiting for its data.
    let w = command(&mut ini, 1, 1, &write10(0, 2), 0, 1024);
    ini.send(&w, &[]).await.unwrap();
    let r2t = ini.recv().await.unwrap();
    assert_eq!(r2t.bhs.opcode(), Some(Opcode::ReadyToTransfer));
    // ORDERED read of the same blocks: held back until the write is done.
    let r = command(&mut ini, 2, 2, &read10(0, 2), 1024, 0);
    ini.send(&r, &[]).await.unwrap();
    // A SIMPLE command behind the ORDERED one waits too; HEAD OF QUEUE runs at once.
    let simple = command(&mut ini, 3, 1, &test_unit_ready(), 0, 0);
    ini.send(&simple, &[]).await.unwrap();
    let hoq = command(&mut ini, 4, 3, &test_unit_ready(), 0, 0);
    ini.send(&hoq, &[]).await.unwrap();
    let first = ini.recv().await.unwrap();
    assert_eq!(
        (first.bhs.opcode(), first.bhs.itt()),
        (Some(Opcode::ScsiResponse), 4)
    );
    assert!(ini
        .recv_timeout(Duration::from_millis(100))
        .await
        .unwrap()
        .is_none());
    let data = pattern(1024, 0x3C);
    let d = Data {
        final_bit: true,
        lun: 0,
        itt: 1,
        ttt: r2t.bhs.u32_at(20),
        datasn: 0,
        buffer_offset: 0,
    };
    ini.send(&d.to_data_out(0), &data).await.unwrap();
    // Write, then the ORDERED read (seeing the write), then the SIMPLE command.
    let p = ini.recv().await.unwrap();
    assert_eq!(
        (p.bhs.opcode(), p.bhs.itt(), p.bhs.0[3]),
        (Some(Opcode::ScsiResponse), 1, 0)
    );
    let p = ini.recv().await.unwrap();
    assert_eq!((p.bhs.opcode(), p.bhs.itt()), (Some(Opcode::DataIn), 2));
    assert_eq!(p.data, data);
    let p = ini.recv().await.unwrap();
    assert_eq!(
        (p.bhs.opcode(), p.bhs.itt()),
        (Some(Opcode::ScsiResponse), 3)
    );
    drop(ini);
    server.stop().await;
}
