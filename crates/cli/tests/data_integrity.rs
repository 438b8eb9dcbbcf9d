//! Data written through one iSCSI session reads back identically through another, for a RAM and
//! a file LUN, and for the file LUN after a restart of `stint serve` (issue 2, item 2).

mod common;
use common::cdb::{read, rw, sense, test_unit_ready, write};
use common::Server;
use common::{pattern, runtime};
use iscsi::initiator::{Initiator, LoginOptions};
use iscsi::url::IscsiUrl;
use scsi::command::ReadWrite;
use scsi::{form, SenseKey};

const BLOCK: usize = 512;

/// (LBA, blocks): small, R2T-sized and unaligned extents, including the last block.
fn extents(capacity_blocks: u64) -> Vec<(u64, u32)> {
    vec![
        (0, 8),
        (8, 1),
        (1000, 2048),
        (5000, 3),
        (capacity_blocks - 1, 1),
        (capacity_blocks - 601, 600),
    ]
}

async fn session(url: &str, initiator: &str, isid_low: u8) -> (Initiator, u64) {
    let url: IscsiUrl = url.parse().expect("stint prints valid URLs");
    let lun = url.lun;
    let mut opts = LoginOptions::new(initiator, Some(&url.target));
    opts.isid[5] = isid_low;
    let mut s = Initiator::connect_portal(&url.portal, &opts)
        .await
        .expect("login");
    // A new I_T nexus first sees POWER ON, RESET OR BUS DEVICE RESET OCCURRED (SAM-5 §5.14);
    // TEST UNIT READY consumes it, as initiators do at attach.
    let tur = test_unit_ready();
    let r = s
        .scsi_command(lun, &tur, &[], 0)
        .await
        .expect("TEST UNIT READY");
    if r.status != 0 {
        let (key, asc) = sense(&r).expect("sense data");
        assert_eq!(
            (key, asc.0),
            (SenseKey::UnitAttention, 0x29),
            "{:?}",
            r.parsed_sense()
        );
        let r = s
            .scsi_command(lun, &tur, &[], 0)
            .await
            .expect("TEST UNIT READY");
        assert_eq!(
            r.status,
            0,
            "unit attention did not clear: {:?}",
            r.parsed_sense()
        );
    }
    (s, lun)
}

async fn write_all(url: &str, capacity_blocks: u64, fua: bool) {
    let (mut s, lun) = session(url, "iqn.2026-11.dev.stint:writer", 1).await;
    for (i, (lba, blocks)) in extents(capacity_blocks).into_iter().enumerate() {
        let data = pattern(i as u64, blocks as usize * BLOCK);
        let r = s
            .scsi_command(
                lun,
                &write(
                    form::WRITE_16,
                    ReadWrite {
                        fua,
                        ..rw(lba, blocks)
                    },
                ),
                &data,
                0,
            )
            .await
            .expect("write");
        assert_eq!(r.status, 0, "WRITE(16) at {lba}: {:?}", r.parsed_sense());
    }
    s.logout().await.expect("logout");
}

async fn verify_all(url: &str, capacity_blocks: u64) {
    let (mut s, lun) = session(url, "iqn.2026-11.dev.stint:reader", 2).await;
    for (i, (lba, blocks)) in extents(capacity_blocks).into_iter().enumerate() {
        let want = pattern(i as u64, blocks as usize * BLOCK);
        let cdb = read(form::READ_10, rw(lba, blocks));
        let r = s
            .scsi_command(lun, &cdb, &[], want.len() as u32)
            .await
            .expect("read");
        assert_eq!(r.status, 0, "READ(10) at {lba}: {:?}", r.parsed_sense());
        assert!(
            r.data_in == want,
            "data at LBA {lba} ({blocks} blocks) differs from what was written"
        );
    }
    s.logout().await.expect("logout");
}

#[test]
fn ram_lun_round_trip_across_sessions() {
    let capacity = 16 << 20;
    let server = Server::start(&["--lun", &format!("ram:{capacity}")], 1);
    let url = server.urls[0].clone();
    let blocks = capacity / BLOCK as u64;
    runtime().block_on(async {
        write_all(&url, blocks, false).await;
        verify_all(&url, blocks).await;
    });
}

#[test]
fn file_lun_round_trip_and_survives_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lun.img");
    let capacity: u64 = 16 << 20;
    let spec = format!("file:{}:{capacity}", path.display());
    let blocks = capacity / BLOCK as u64;

    let server = Server::start(&["--lun", &spec], 1);
    let url = server.urls[0].clone();
    runtime().block_on(async {
        write_all(&url, blocks, true).await;
        verify_all(&url, blocks).await;
    });
    assert!(server.stop(), "serve did not stop cleanly on SIGTERM");
    assert_eq!(std::fs::metadata(&path).unwrap().len(), capacity);

    // The existing file is reopened with its contents (size may be omitted).
    let server = Server::start(&["--lun", &format!("file:{}", path.display())], 1);
    let url = server.urls[0].clone();
    runtime().block_on(verify_all(&url, blocks));
}
