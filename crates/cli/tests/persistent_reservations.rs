//! Persistent reservations through `stint serve` and its iSCSI sessions, from two initiators:
//! register, reserve, a conflicting write, preempt with its unit attention, and the
//! registrations and reservation kept through a restart on a file LUN (APTPL).

mod common;
use common::Server;
use iscsi::initiator::{Initiator, LoginOptions};
use iscsi::url::IscsiUrl;

const GOOD: u8 = 0x00;
const CHECK_CONDITION: u8 = 0x02;
const RESERVATION_CONFLICT: u8 = 0x18;

const HOST_A: &str = "iqn.2026-11.dev.stint:host-a";
const HOST_B: &str = "iqn.2026-11.dev.stint:host-b";

const REGISTER: u8 = 0x00;
const RESERVE: u8 = 0x01;
const PREEMPT: u8 = 0x04;
const CLEAR: u8 = 0x03;
const WRITE_EXCLUSIVE: u8 = 0x1;
const EXCLUSIVE_ACCESS: u8 = 0x3;
const APTPL: u8 = 0x01;

struct Host {
    session: Initiator,
    lun: u64,
}

impl Host {
    /// Logs in as `name` and takes the power-on unit attention.
    async fn login(server: &Server, name: &str) -> Host {
        let url: IscsiUrl = server.urls[0].parse().unwrap();
        let opts = LoginOptions::new(name, Some(&url.target));
        let mut session = Initiator::connect_portal(&url.portal, &opts).await.unwrap();
        let r = session
            .scsi_command(url.lun, &[0; 6], &[], 0)
            .await
            .unwrap();
        assert_eq!(r.status, CHECK_CONDITION);
        Host {
            session,
            lun: url.lun,
        }
    }

    async fn command(&mut self, cdb: &[u8], data_out: &[u8], expect_in: u32) -> (u8, Vec<u8>) {
        let r = self
            .session
            .scsi_command(self.lun, cdb, data_out, expect_in)
            .await
            .unwrap();
        let data = if r.status == CHECK_CONDITION {
            r.sense
        } else {
            r.data_in
        };
        (r.status, data)
    }

    /// PERSISTENT RESERVE OUT with the basic 24-byte parameter list.
    async fn prout(&mut self, sa: u8, kind: u8, key: u64, sa_key: u64, flags: u8) -> u8 {
        let mut list = [0u8; 24];
        list[0..8].copy_from_slice(&key.to_be_bytes());
        list[8..16].copy_from_slice(&sa_key.to_be_bytes());
        list[20] = flags;
        let cdb = [0x5F, sa, kind, 0, 0, 0, 0, 0, 24, 0];
        self.command(&cdb, &list, 0).await.0
    }

    /// PRgeneration and the keys of READ KEYS.
    async fn keys(&mut self) -> (u32, Vec<u64>) {
        let (status, d) = self
            .command(&[0x5E, 0, 0, 0, 0, 0, 0, 0x01, 0, 0], &[], 256)
            .await;
        assert_eq!(status, GOOD);
        let keys = d[8..]
            .chunks(8)
            .map(|k| u64::from_be_bytes(k.try_into().unwrap()))
            .collect();
        (u32::from_be_bytes(d[0..4].try_into().unwrap()), keys)
    }

    /// The holder's key and the type, from READ RESERVATION.
    async fn reservation(&mut self) -> Option<(u64, u8)> {
        let (status, d) = self
            .command(&[0x5E, 1, 0, 0, 0, 0, 0, 0, 24, 0], &[], 24)
            .await;
        assert_eq!(status, GOOD);
        (d[7] == 16).then(|| (u64::from_be_bytes(d[8..16].try_into().unwrap()), d[21]))
    }

    async fn read(&mut self) -> u8 {
        self.command(&[0x28, 0, 0, 0, 0, 8, 0, 0, 1, 0], &[], 512)
            .await
            .0
    }

    async fn write(&mut self) -> u8 {
        let block = [0xA5u8; 512];
        self.command(&[0x2A, 0, 0, 0, 0, 8, 0, 0, 1, 0], &block, 0)
            .await
            .0
    }
}

/// (sense key, ASC, ASCQ) of fixed-format sense data.
fn sense(s: &[u8]) -> (u8, u8, u8) {
    (s[2] & 0x0F, s[12], s[13])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_initiators_register_reserve_conflict_preempt_and_keep_it_through_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let lun = format!("file:{}:16MiB", dir.path().join("disk.img").display());
    let server = Server::start(&["--lun", &lun], 1);
    let mut a = Host::login(&server, HOST_A).await;
    let mut b = Host::login(&server, HOST_B).await;
    assert_eq!(a.prout(REGISTER, 0, 0, 0xA, 0).await, GOOD);
    // APTPL from the last registration counts: B's asks to persist through power loss.
    assert_eq!(b.prout(REGISTER, 0, 0, 0xB, APTPL).await, GOOD);
    assert_eq!(a.keys().await, (2, vec![0xA, 0xB]));
    assert_eq!(a.prout(RESERVE, WRITE_EXCLUSIVE, 0xA, 0, 0).await, GOOD);
    assert_eq!(b.reservation().await, Some((0xA, WRITE_EXCLUSIVE)));
    // Write Exclusive: B reads, B's write conflicts, A writes.
    assert_eq!(b.read().await, GOOD);
    assert_eq!(b.write().await, RESERVATION_CONFLICT);
    assert_eq!(a.write().await, GOOD);
    assert_eq!(
        b.prout(RESERVE, WRITE_EXCLUSIVE, 0xB, 0, 0).await,
        RESERVATION_CONFLICT
    );
    // B preempts A's reservation as Exclusive Access: A is told, and shut out.
    assert_eq!(b.prout(PREEMPT, EXCLUSIVE_ACCESS, 0xB, 0xA, 0).await, GOOD);
    let (status, s) = a.command(&[0; 6], &[], 0).await;
    assert_eq!(status, CHECK_CONDITION);
    assert_eq!(sense(&s), (0x6, 0x2A, 0x05), "REGISTRATIONS PREEMPTED");
    assert_eq!(a.read().await, RESERVATION_CONFLICT);
    assert_eq!(b.write().await, GOOD);
    assert_eq!(a.keys().await, (3, vec![0xB]));
    assert_eq!(a.reservation().await, Some((0xB, EXCLUSIVE_ACCESS)));
    assert!(a.session.logout().await.is_ok());
    assert!(b.session.logout().await.is_ok());
    assert!(server.stop(), "stint serve stopped cleanly");
    assert!(dir.path().join("disk.img.pr").exists());

    // A restart of the server is a power on: PRgeneration is zero, the rest is kept.
    let server = Server::start(&["--lun", &lun], 1);
    let mut a = Host::login(&server, HOST_A).await;
    let mut b = Host::login(&server, HOST_B).await;
    assert_eq!(a.keys().await, (0, vec![0xB]));
    assert_eq!(a.reservation().await, Some((0xB, EXCLUSIVE_ACCESS)));
    assert_eq!(a.read().await, RESERVATION_CONFLICT);
    assert_eq!(b.read().await, GOOD);
    // CLEAR by the holder gives the LU back to everyone.
    assert_eq!(b.prout(CLEAR, 0, 0xB, 0, 0).await, GOOD);
    assert_eq!(a.read().await, GOOD);
    assert!(a.session.logout().await.is_ok());
    assert!(b.session.logout().await.is_ok());
    assert!(server.stop());
}
