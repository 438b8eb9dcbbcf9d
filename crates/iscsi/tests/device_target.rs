//! The server in front of the real `device::Target` with a RAM store: a pattern written in
//! one session reads back in another, and device errors arrive as CHECK CONDITION with sense.

use std::sync::Arc;

use iscsi::initiator::{Initiator, LoginOptions};
use iscsi::pdu::Residual;
use iscsi::TargetNode;
use scsi::command::{Command, ReadWrite};
use scsi::encode::Cdb;
use scsi::{form, Asc, SenseKey, Status};
use tokio::sync::oneshot;

const TARGET: &str = "iqn.2026-01.org.stint:device";
const BLOCKS: u64 = 4096;

fn rw(lba: u64, blocks: u32) -> ReadWrite {
    ReadWrite {
        lba,
        transfer_length: blocks,
        ..ReadWrite::default()
    }
}

fn read16(lba: u64, blocks: u32) -> Cdb {
    Command::Read(rw(lba, blocks)).emit(form::READ_16).unwrap()
}

fn write16(lba: u64, blocks: u32) -> Cdb {
    Command::Write(rw(lba, blocks))
        .emit(form::WRITE_16)
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pattern_written_in_one_session_reads_back_in_another() {
    let store = Arc::new(store::RamStore::new(BLOCKS * 512).unwrap());
    let plane = Arc::new(store::InlinePlane::new(store));
    let lu =
        device::Unit::build(device::LuConfig::new(TARGET, 0, BLOCKS * 512), plane, None).unwrap();
    let node = TargetNode {
        retired: false,
        gateways: Vec::new(),
        name: TARGET.into(),
        alias: None,
        target: Arc::new(device::Target::new(vec![(0, Arc::new(lu))])),
        allowed_initiators: Vec::new(),
        initiator_classes: Vec::new(),
        chap: None,
        privileged_initiators: vec!["*".into()],
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(iscsi::server::serve(listener, vec![node], async {
        let _ = stopped.await;
    }));

    let mut writer = Initiator::connect(
        addr,
        &LoginOptions::new("iqn.2026-01.test:writer", Some(TARGET)),
    )
    .await
    .unwrap();
    // A fresh LU reports a unit attention (power on) first; clear it.
    let tur = Command::TestUnitReady.emit(form::TEST_UNIT_READY).unwrap();
    let _ = writer.scsi_command(0, &tur, &[], 0).await.unwrap();
    let data: Vec<u8> = (0..1024 * 1024u32)
        .map(|i| (i * 7 + i / 512) as u8)
        .collect();
    let w = writer
        .scsi_command(0, &write16(100, 2048), &data, 0)
        .await
        .unwrap();
    assert_eq!(w.status, Status::Good as u8, "{:?}", w.parsed_sense());

    let mut reader = Initiator::connect(
        addr,
        &LoginOptions::new("iqn.2026-01.test:reader", Some(TARGET)),
    )
    .await
    .unwrap();
    let _ = reader.scsi_command(0, &tur, &[], 0).await.unwrap();
    // Beyond the end: CHECK CONDITION, ILLEGAL REQUEST, LBA OUT OF RANGE.
    let r = reader
        .scsi_command(0, &read16(BLOCKS, 1), &[], 512)
        .await
        .unwrap();
    assert_eq!(r.status, Status::CheckCondition as u8);
    let sense = r.parsed_sense().unwrap();
    assert_eq!(
        (sense.key, sense.asc),
        (SenseKey::IllegalRequest, Asc::LBA_OUT_OF_RANGE)
    );
    let r = reader
        .scsi_command(0, &read16(100, 2048), &[], data.len() as u32)
        .await
        .unwrap();
    assert_eq!((r.status, r.residual), (Status::Good as u8, Residual::None));
    assert!(r.data_in == data);
    writer.logout().await.unwrap();
    reader.logout().await.unwrap();
    let _ = stop.send(());
    server.await.unwrap().unwrap();
}
