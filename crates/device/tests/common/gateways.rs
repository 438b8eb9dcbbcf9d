//! Two or more gateways of one logical unit without a cluster: planes that share one
//! versioned reservations state and pass each other's announcements, as RBD planes do
//! through a RADOS object and its watch (docs/gateways.md).

use super::nexus_of;
use device::{LuConfig, Nexus, PortGroups, Target, Unit};
use parking_lot::Mutex;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use store::{Buffers, Done, Geometry, InlinePlane, KeptFile, Op, Plane, RamStore, SharedState};

/// What other gateways announced to one, oldest first.
type Mailbox = Arc<Mutex<Vec<Vec<u8>>>>;

/// The state the gateways share, and each gateway's mailbox.
#[derive(Default)]
pub struct Cluster {
    state: Mutex<(Option<Vec<u8>>, u64)>,
    mailboxes: Mutex<Vec<Mailbox>>,
    /// The writes of the state that landed.
    pub writes: AtomicU32,
}

/// A gateway's plane: RAM for the data, the cluster's state for the reservations.
pub struct Gateway {
    data: InlinePlane,
    cluster: Arc<Cluster>,
    mailbox: Mailbox,
    /// No other gateway was alive when this one opened the image.
    first: Mutex<bool>,
    /// Writes of "another gateway" that land just before each of this one's: its races lost.
    pub interfere: AtomicU32,
    /// Its announcements are lost, as a gateway's that dies between its write and its notify.
    pub mute: AtomicBool,
    /// The newest version of the state it read or wrote.
    seen: AtomicU64,
    /// Runs once, just before this gateway's next write of the state: another gateway's
    /// command that lands first, a race this one loses.
    pub before_share: Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

impl Gateway {
    pub fn join(cluster: &Arc<Cluster>, first: bool) -> Arc<Gateway> {
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
            before_share: Mutex::new(None),
        })
    }

    fn share(&self, contents: &[u8], version: u64) -> Done {
        let first = self.before_share.lock().take();
        if let Some(other) = first {
            other();
        }
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
pub fn gateway(plane: Arc<Gateway>, own: u16) -> Target {
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

pub fn host(id: u64, n: u8) -> Nexus {
    nexus_of(id, &format!("iqn.test:host{n},i,0x000000000001"), false)
}
