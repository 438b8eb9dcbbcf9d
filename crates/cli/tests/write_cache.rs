//! The write cache a host switches, as Linux does (`sdparm --set WCE`, `cache_type`): on
//! `stint serve --lun hdd` the Caching page shows the drive model's setting (off for the
//! shipped disk), and a privileged host's MODE SELECT of WCE makes the model cache writes
//! or write them through, in wall-clock time.

mod common;
use common::cdb::{mode_select10, mode_sense10, rw, test_unit_ready, write};
use common::Server;
use iscsi::initiator::{Initiator, LoginOptions};
use iscsi::url::IscsiUrl;
use scsi::command::PageControl;
use scsi::{form, Status};
use std::time::{Duration, Instant};

const HOST: &str = "iqn.2026-11.dev.stint:test";

async fn login(server: &Server) -> (Initiator, u64) {
    let url: IscsiUrl = server.urls[0].parse().unwrap();
    let opts = LoginOptions::new(HOST, Some(&url.target));
    let mut s = Initiator::connect_portal(&url.portal, &opts).await.unwrap();
    // The power-on unit attention.
    let r = s
        .scsi_command(url.lun, &test_unit_ready(), &[], 0)
        .await
        .unwrap();
    assert_eq!(r.status, Status::CheckCondition as u8);
    (s, url.lun)
}

/// The Caching mode page's current values (MODE SENSE(10), DBD).
async fn caching_page(s: &mut Initiator, lun: u64) -> Vec<u8> {
    let cdb = mode_sense10(PageControl::Current, scsi::mode::CACHING, 0, 255);
    let r = s.scsi_command(lun, &cdb, &[], 255).await.unwrap();
    assert_eq!(r.status, 0);
    r.data_in[8..].to_vec()
}

async fn wce(s: &mut Initiator, lun: u64) -> bool {
    caching_page(s, lun).await[2] & 0x04 != 0
}

/// MODE SELECT(10) of the current page with WCE = `on`, as sdparm sends it.
async fn select_wce(s: &mut Initiator, lun: u64, on: bool) {
    let mut page = caching_page(s, lun).await;
    page[0] &= 0x7F;
    page[2] = page[2] & !0x04 | u8::from(on) << 2;
    let mut data = vec![0u8; 8];
    data.extend_from_slice(&page);
    let cdb = mode_select10(data.len(), false);
    let r = s.scsi_command(lun, &cdb, &data, 0).await.unwrap();
    assert_eq!(r.status, 0, "MODE SELECT WCE={on}");
}

/// The mean wall-clock time of 16 random 4 KiB WRITE(16)s over the disk, one at a time.
async fn mean_write(s: &mut Initiator, lun: u64, seed: u64) -> Duration {
    let data = vec![0xA5u8; 4096];
    let start = Instant::now();
    for i in 0..16u64 {
        // Spread over the 22 TB so a write through seeks and waits for the platter.
        let lba = (seed * 16 + i).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 30;
        let cdb = write(form::WRITE_16, rw(lba, 8));
        let r = s.scsi_command(lun, &cdb, &data, 0).await.unwrap();
        assert_eq!(r.status, 0);
    }
    start.elapsed() / 16
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_switches_the_drive_models_write_cache() {
    let server = Server::start(&["--lun", "hdd", "--privileged", HOST], 1);
    let (mut s, lun) = login(&server).await;
    assert!(!wce(&mut s, lun).await, "the shipped disk's cache is off");
    let through = mean_write(&mut s, lun, 1).await;

    select_wce(&mut s, lun, true).await;
    assert!(wce(&mut s, lun).await);
    let cached = mean_write(&mut s, lun, 2).await;

    select_wce(&mut s, lun, false).await;
    assert!(!wce(&mut s, lun).await);
    let through_again = mean_write(&mut s, lun, 3).await;

    // A write through seeks and waits half a revolution (4.2 ms) on average, a cached one
    // does neither.
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    assert!(
        ms(through) > 5.0 && ms(through_again) > 5.0,
        "{through:?} {through_again:?}"
    );
    assert!(
        ms(cached) + 3.0 < ms(through).min(ms(through_again)),
        "cached {cached:?}, through {through:?} and {through_again:?}"
    );
    s.logout().await.unwrap();
    assert!(server.stop());
}
