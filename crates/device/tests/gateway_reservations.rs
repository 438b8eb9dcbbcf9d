//! Persistent reservations shared by gateways (docs/gateways.md), without a cluster: two
//! logical units over planes that share one versioned state and pass each other's
//! announcements, as RBD planes do through a RADOS object and its watch. The state a
//! REGISTER through one writes is what the other reads; a write that finds the state changed
//! by another gateway is prepared again on it, and gives up with ABORTED COMMAND after too
//! many such races; a gateway that starts alone drops a state whose APTPL is 0.

mod common;
use common::pr::{keys, pr_in, pr_out};
use common::{ready_as, run, sense_of};
use device::{Completion, LuConfig, Nexus, PortGroups, Target, Unit};
use parking_lot::Mutex;
use scsi::persistent_reserve::{basic, decode_read_full_status, PrOutParameters};
use scsi::persistent_reserve::{PrInAction::ReadFullStatus, PrOutAction::*, ReservationType::*};
use scsi::{Asc, SenseKey};
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use store::{Buffers, Done, Geometry, InlinePlane, KeptFile, Op, Plane, RamStore, SharedState};

/// What other gateways announced to one, oldest first.
type Mailbox = Arc<Mutex<Vec<Vec<u8>>>>;

/// The state the gateways share, and each gateway's mailbox.
#[derive(Default)]
struct Cluster {
    state: Mutex<(Option<Vec<u8>>, u64)>,
    mailboxes: Mutex<Vec<Mailbox>>,
    writes: AtomicU32,
}

/// A gateway's plane: RAM for the data, the cluster's state for the reservations.
struct Gateway {
    data: InlinePlane,
    cluster: Arc<Cluster>,
    mailbox: Mailbox,
    /// No other gateway was alive when this one opened the image.
    first: Mutex<bool>,
    /// Writes of "another gateway" that land just before each of this one's: its races lost.
    interfere: AtomicU32,
    /// Its announcements are lost, as a gateway's that dies between its write and its notify.
    mute: AtomicBool,
    /// The newest version of the state it read or wrote.
    seen: AtomicU64,
}

impl Gateway {
    fn join(cluster: &Arc<Cluster>, first: bool) -> Arc<Gateway> {
        let mailbox = Arc::new(Mutex::new(Vec::new()));
        cluster.mailboxes.lock().push(mailbox.clone());
        Arc::new(Gateway {
            data: InlinePlane::new(Arc::new(RamStore::new(1 << 20).unwrap())),
            cluster: cluster.clone(),
            mailbox,
            first: Mutex::new(first),
            interfere: AtomicU32::new(0),
            mute: AtomicBool::new(false),
            seen: AtomicU64::new(0),
        })
    }

    fn share(&self, contents: &[u8], version: u64) -> Done {
        let mut state = self.cluster.state.lock();
        if self
            .interfere
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
            .is_ok()
        {
            // Another gateway wrote the same state again: only the version moved.
            state.1 += 1;
        }
        self.seen.fetch_max(state.1, Ordering::Relaxed);
        if state.1 != version {
            return Done::Stale(SharedState {
                contents: state.0.clone(),
                version: state.1,
                first: false,
            });
        }
        *state = (Some(contents.to_vec()), version + 1);
        self.seen.fetch_max(version + 1, Ordering::Relaxed);
        self.cluster.writes.fetch_add(1, Ordering::Relaxed);
        Done::Shared(version + 1)
    }
}

impl Plane for Gateway {
    fn is_inline(&self) -> bool {
        true
    }

    fn submit(&self, id: u64, op: Op, buffers: Buffers<'_>) -> Option<Done> {
        match op {
            Op::Share {
                file: KeptFile::Reservations,
                contents,
                version,
            } => Some(self.share(&contents, version)),
            op => self.data.submit(id, op, buffers),
        }
    }

    fn geometry(&self) -> Geometry {
        self.data.geometry()
    }

    fn announce(&self, message: &[u8]) -> io::Result<()> {
        if self.mute.load(Ordering::Relaxed) {
            return Ok(());
        }
        for m in self.cluster.mailboxes.lock().iter() {
            if !Arc::ptr_eq(m, &self.mailbox) {
                m.lock().push(message.to_vec());
            }
        }
        Ok(())
    }

    fn announced(&self) -> Vec<Vec<u8>> {
        std::mem::take(&mut *self.mailbox.lock())
    }

    fn preferred_gateway(&self) -> Option<Option<u16>> {
        Some(Some(1))
    }

    fn read_now(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.data.read_now(offset, buf)
    }

    fn write_now(&self, offset: u64, buf: &[u8], durable: bool) -> io::Result<()> {
        self.data.write_now(offset, buf, durable)
    }

    fn load_shared(&self, file: KeptFile) -> Option<io::Result<SharedState>> {
        (file == KeptFile::Reservations).then(|| {
            let state = self.cluster.state.lock();
            self.seen.fetch_max(state.1, Ordering::Relaxed);
            Ok(SharedState {
                contents: state.0.clone(),
                version: state.1,
                first: std::mem::take(&mut *self.first.lock()),
            })
        })
    }

    fn share_now(&self, _file: KeptFile, contents: &[u8], version: u64) -> io::Result<Done> {
        Ok(self.share(contents, version))
    }

    /// As an RBD plane's look at the object's version every 250 ms, at once.
    fn shared_changed(&self) -> bool {
        self.cluster.state.lock().1 > self.seen.load(Ordering::Relaxed)
    }
}

/// Gateway `own` (of port groups 1 and 2) as a target with LUN 0.
fn gateway(plane: Arc<Gateway>, own: u16) -> Target {
    let mut config = LuConfig::new("iqn.test:gateways", 0, 1 << 20);
    config.port_groups = PortGroups {
        own,
        all: vec![1, 2],
        explicit: false,
    };
    Target::new(vec![(
        0,
        Arc::new(Unit::build(config, plane, None).unwrap()),
    )])
}

fn host(id: u64, n: u8) -> Nexus {
    common::nexus_of(id, &format!("iqn.test:host{n},i,0x000000000001"), false)
}

#[test]
fn a_change_through_one_gateway_is_the_others_state() {
    let cluster = Arc::new(Cluster::default());
    let (pa, pb) = (
        Gateway::join(&cluster, true),
        Gateway::join(&cluster, false),
    );
    let (a, b) = (gateway(pa, 1), gateway(pb, 2));
    let h1a = ready_as(&a, host(1, 1));
    let h1b = ready_as(&b, host(2, 1));
    let h2b = ready_as(&b, host(3, 2));
    assert_eq!(
        pr_out(&a, &h1a, Register, None, basic(0, 0xA)),
        Completion::GOOD
    );
    assert_eq!(keys(&b, &h2b).1, [0xA], "B reads A's registration");
    // READ FULL STATUS through B: the registration is through target port 1.
    let d = pr_in(&b, &h2b, ReadFullStatus);
    let (_, status) = decode_read_full_status(&d).expect("READ FULL STATUS data");
    assert_eq!(status[0].relative_target_port_identifier, 1);
    // Host 1 through B is another I_T nexus: not registered, so its RESERVE conflicts.
    let c = pr_out(&b, &h1b, Reserve, Some(WriteExclusive), basic(0xA, 0));
    assert_eq!(c.status, scsi::Status::ReservationConflict);
    // Host 2 registers through B for every port and preempts host 1's registration: host 1's
    // nexus on A is told (the effects travel), its nexus on B (unregistered) is not.
    assert_eq!(
        pr_out(
            &b,
            &h2b,
            Register,
            None,
            PrOutParameters {
                all_tg_pt: true,
                ..basic(0, 0xB)
            }
        ),
        Completion::GOOD
    );
    assert_eq!(
        pr_out(&b, &h2b, Preempt, Some(WriteExclusive), basic(0xB, 0xA)),
        Completion::GOOD
    );
    let (c, _) = run(&a, &h1a, &[0; 6], &[]);
    assert_eq!(
        sense_of(&c),
        (SenseKey::UnitAttention, Asc::REGISTRATIONS_PREEMPTED)
    );
    assert_eq!(run(&b, &h1b, &[0; 6], &[]).0, Completion::GOOD);
    assert_eq!(keys(&a, &h1a).1, [0xB]);
    // Three changes, each written once; the refused RESERVE not at all.
    assert_eq!(cluster.writes.load(Ordering::Relaxed), 3);
}

#[test]
fn a_change_whose_announcement_was_lost_is_read_all_the_same() {
    let cluster = Arc::new(Cluster::default());
    let (pa, pb) = (
        Gateway::join(&cluster, true),
        Gateway::join(&cluster, false),
    );
    pa.mute.store(true, Ordering::Relaxed);
    let (a, b) = (gateway(pa, 1), gateway(pb, 2));
    let (h1a, h2b) = (ready_as(&a, host(1, 1)), ready_as(&b, host(2, 2)));
    assert_eq!(keys(&b, &h2b).1, [0u64; 0]);
    assert_eq!(
        pr_out(&a, &h1a, Register, None, basic(0, 0xA)),
        Completion::GOOD
    );
    // A died before its notify went out: B sees the newer version in the cluster.
    assert_eq!(keys(&b, &h2b), (1, vec![0xA]), "B reads A's registration");
}

#[test]
fn a_race_lost_to_another_gateway_is_run_again_then_given_up() {
    let cluster = Arc::new(Cluster::default());
    let pa = Gateway::join(&cluster, true);
    let a = gateway(pa.clone(), 1);
    let h = ready_as(&a, host(1, 1));
    // Three races lost: the REGISTER is prepared again on the state each time, and lands.
    pa.interfere.store(3, Ordering::Relaxed);
    assert_eq!(
        pr_out(&a, &h, Register, None, basic(0, 0xA)),
        Completion::GOOD
    );
    assert_eq!(pa.interfere.load(Ordering::Relaxed), 0);
    assert_eq!(keys(&a, &h).1, [0xA]);
    // Every race lost: ABORTED COMMAND, and nothing changed.
    pa.interfere.store(1000, Ordering::Relaxed);
    let c = pr_out(&a, &h, Register, None, basic(0xA, 0xB));
    assert_eq!(
        sense_of(&c),
        (SenseKey::AbortedCommand, Asc::NO_ADDITIONAL_SENSE)
    );
    pa.interfere.store(0, Ordering::Relaxed);
    assert_eq!(keys(&a, &h).1, [0xA]);
}

#[test]
fn a_gateway_starting_alone_drops_a_state_without_aptpl() {
    let cluster = Arc::new(Cluster::default());
    {
        let a = gateway(Gateway::join(&cluster, true), 1);
        let h = ready_as(&a, host(1, 1));
        assert_eq!(
            pr_out(&a, &h, Register, None, basic(0, 0xA)),
            Completion::GOOD
        );
    }
    // Another gateway alive: the state stays.
    let b = gateway(Gateway::join(&cluster, false), 2);
    let h = ready_as(&b, host(2, 2));
    assert_eq!(keys(&b, &h).1, [0xA]);
    // None alive: APTPL = 0 is gone, written back for the gateways that start later.
    let a = gateway(Gateway::join(&cluster, true), 1);
    let h = ready_as(&a, host(3, 2));
    assert_eq!(keys(&a, &h).1, Vec::<u64>::new());
    let later = gateway(Gateway::join(&cluster, false), 2);
    let h2 = ready_as(&later, host(4, 2));
    assert_eq!(keys(&later, &h2).1, Vec::<u64>::new());
    // APTPL = 1 survives, PRgeneration restarting at zero.
    assert_eq!(
        pr_out(
            &a,
            &h,
            Register,
            None,
            PrOutParameters {
                aptpl: true,
                ..basic(0, 0xC)
            }
        ),
        Completion::GOOD
    );
    let again = gateway(Gateway::join(&cluster, true), 1);
    let h3 = ready_as(&again, host(5, 2));
    assert_eq!(keys(&again, &h3), (0, vec![0xC]), "PRgeneration, keys");
}
