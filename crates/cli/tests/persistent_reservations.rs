//! Persistent reservations through `stint serve` and its iSCSI sessions, from two initiators:
//! register, reserve, a conflicting write, preempt with its unit attention, and the
//! registrations and reservation kept through a restart on a file LUN (APTPL).

mod common;
use common::cdb::{
    persistent_reserve_in, persistent_reserve_out, read, rw, test_unit_ready, write,
};
use common::Server;
use iscsi::initiator::{Initiator, LoginOptions};
use iscsi::url::IscsiUrl;
use scsi::persistent_reserve::{
    basic, decode_read_keys, decode_read_reservation, PrInAction, PrOutAction, PrOutParameters,
    ReservationType,
};
use scsi::{form, Asc, Sense, SenseKey, Status};

const GOOD: u8 = Status::Good as u8;
const CHECK_CONDITION: u8 = Status::CheckCondition as u8;
const RESERVATION_CONFLICT: u8 = Status::ReservationConflict as u8;

const HOST_A: &str = "iqn.2026-11.dev.stint:host-a";
const HOST_B: &str = "iqn.2026-11.dev.stint:host-b";

use PrOutAction::{Clear, Preempt, Register, Reserve};
use ReservationType::{ExclusiveAccess, WriteExclusive};

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
            .scsi_command(url.lun, &test_unit_ready(), &[], 0)
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

    /// PERSISTENT RESERVE OUT with the basic parameter list, reservation type `kind` (LU
    /// scope).
    async fn prout(
        &mut self,
        action: PrOutAction,
        kind: Option<ReservationType>,
        key: u64,
        sa_key: u64,
        aptpl: bool,
    ) -> u8 {
        let list = PrOutParameters {
            aptpl,
            ..basic(key, sa_key)
        }
        .encode();
        let cdb = persistent_reserve_out(action, kind, list.len());
        self.command(&cdb, &list, 0).await.0
    }

    /// PERSISTENT RESERVE IN with `action`: its parameter data, which must come GOOD.
    async fn prin(&mut self, action: PrInAction, allocation: u16) -> Vec<u8> {
        let cdb = persistent_reserve_in(action, allocation);
        let (status, data) = self.command(&cdb, &[], allocation.into()).await;
        assert_eq!(status, GOOD, "PERSISTENT RESERVE IN {action:?}");
        data
    }

    /// PRgeneration and the keys of READ KEYS.
    async fn keys(&mut self) -> (u32, Vec<u64>) {
        let d = self.prin(PrInAction::ReadKeys, 256).await;
        let k = decode_read_keys(&d).expect("READ KEYS parameter data");
        (k.generation, k.keys)
    }

    /// The holder's key and the type, from READ RESERVATION.
    async fn reservation(&mut self) -> Option<(u64, ReservationType)> {
        let d = self.prin(PrInAction::ReadReservation, 24).await;
        decode_read_reservation(&d)
            .expect("READ RESERVATION parameter data")
            .reservation
    }

    /// READ(10) of block 8.
    async fn read(&mut self) -> u8 {
        let cdb = read(form::READ_10, rw(8, 1));
        self.command(&cdb, &[], 512).await.0
    }

    /// WRITE(10) of block 8.
    async fn write(&mut self) -> u8 {
        let block = [0xA5u8; 512];
        let cdb = write(form::WRITE_10, rw(8, 1));
        self.command(&cdb, &block, 0).await.0
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_initiators_register_reserve_conflict_preempt_and_keep_it_through_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let lun = format!("file:{}:16MiB", dir.path().join("disk.img").display());
    let server = Server::start(&["--lun", &lun], 1);
    let mut a = Host::login(&server, HOST_A).await;
    let mut b = Host::login(&server, HOST_B).await;
    assert_eq!(a.prout(Register, None, 0, 0xA, false).await, GOOD);
    // APTPL from the last registration counts: B's asks to persist through power loss.
    assert_eq!(b.prout(Register, None, 0, 0xB, true).await, GOOD);
    assert_eq!(a.keys().await, (2, vec![0xA, 0xB]));
    assert_eq!(
        a.prout(Reserve, Some(WriteExclusive), 0xA, 0, false).await,
        GOOD
    );
    assert_eq!(b.reservation().await, Some((0xA, WriteExclusive)));
    // Write Exclusive: B reads, B's write conflicts, A writes.
    assert_eq!(b.read().await, GOOD);
    assert_eq!(b.write().await, RESERVATION_CONFLICT);
    assert_eq!(a.write().await, GOOD);
    assert_eq!(
        b.prout(Reserve, Some(WriteExclusive), 0xB, 0, false).await,
        RESERVATION_CONFLICT
    );
    // B preempts A's reservation as Exclusive Access: A is told, and shut out.
    assert_eq!(
        b.prout(Preempt, Some(ExclusiveAccess), 0xB, 0xA, false)
            .await,
        GOOD
    );
    let (status, s) = a.command(&test_unit_ready(), &[], 0).await;
    assert_eq!(status, CHECK_CONDITION);
    let s = Sense::parse(&s).unwrap();
    assert_eq!(
        (s.key, s.asc),
        (SenseKey::UnitAttention, Asc::REGISTRATIONS_PREEMPTED)
    );
    assert_eq!(a.read().await, RESERVATION_CONFLICT);
    assert_eq!(b.write().await, GOOD);
    assert_eq!(a.keys().await, (3, vec![0xB]));
    assert_eq!(a.reservation().await, Some((0xB, ExclusiveAccess)));
    assert!(a.session.logout().await.is_ok());
    assert!(b.session.logout().await.is_ok());
    assert!(server.stop(), "stint serve stopped cleanly");
    assert!(dir.path().join("disk.img.pr").exists());

    // A restart of the server is a power on: PRgeneration is zero, the rest is kept.
    let server = Server::start(&["--lun", &lun], 1);
    let mut a = Host::login(&server, HOST_A).await;
    let mut b = Host::login(&server, HOST_B).await;
    assert_eq!(a.keys().await, (0, vec![0xB]));
    assert_eq!(a.reservation().await, Some((0xB, ExclusiveAccess)));
    assert_eq!(a.read().await, RESERVATION_CONFLICT);
    assert_eq!(b.read().await, GOOD);
    // CLEAR by the holder gives the LU back to everyone.
    assert_eq!(b.prout(Clear, None, 0xB, 0, false).await, GOOD);
    assert_eq!(a.read().await, GOOD);
    assert!(a.session.logout().await.is_ok());
    assert!(b.session.logout().await.is_ok());
    assert!(server.stop());
}
