//! Gateways without a cluster (docs/gateways.md): data planes over RAM that share, as RBD
//! planes do through RADOS objects and their watch, the versioned states of the logical unit
//! (persistent reservations, mode parameters), the explicit choice of the preferred gateway
//! and which gateways are alive, and pass each other's announcements.

use device::{LuConfig, PortGroups, Target, Unit};
use parking_lot::{Mutex, MutexGuard};
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use store::{
    Buffers, Done, Failure, Geometry, InlinePlane, KeptFile, Op, Plane, RamStore, SharedState,
};

/// What other gateways announced to one, oldest first.
type Mailbox = Arc<Mutex<Vec<Vec<u8>>>>;

/// One state the gateways share, as the cluster holds it.
#[derive(Default)]
pub struct Object {
    pub contents: Option<Vec<u8>>,
    pub version: u64,
    /// Writes that succeeded.
    pub writes: u32,
}

/// What the gateways share: the states, the explicit choice, which gateways are alive, each
/// one's mailbox.
pub struct Cluster {
    objects: [Mutex<Object>; 2],
    pub chosen: Mutex<Option<u16>>,
    pub alive: Mutex<Vec<u16>>,
    mailboxes: Mutex<Vec<Mailbox>>,
}

fn slot(file: KeptFile) -> usize {
    match file {
        KeptFile::Reservations => 0,
        KeptFile::ModePages => 1,
    }
}

impl Cluster {
    /// Gateways of port groups 1 and 2, both alive, nothing written yet.
    pub fn new() -> Arc<Cluster> {
        Arc::new(Cluster {
            objects: Default::default(),
            chosen: Mutex::new(None),
            alive: Mutex::new(vec![1, 2]),
            mailboxes: Mutex::new(Vec::new()),
        })
    }

    pub fn object(&self, file: KeptFile) -> MutexGuard<'_, Object> {
        self.objects[slot(file)].lock()
    }

    /// The rule of docs/gateways.md: the choice while it is alive, else the first alive.
    fn preferred(&self) -> u16 {
        let alive = self.alive.lock();
        self.chosen
            .lock()
            .filter(|g| alive.contains(g))
            .or(alive.first().copied())
            .unwrap_or(1)
    }
}

/// A gateway's plane: RAM for the data, the cluster's for the rest.
pub struct Gateway {
    data: InlinePlane,
    cluster: Arc<Cluster>,
    mailbox: Mailbox,
    /// No other gateway was alive when this one opened the image; taken by each state's
    /// first load.
    first: [AtomicBool; 2],
    /// Writes of "another gateway" that land just before each of this one's: its races lost.
    pub interfere: AtomicU32,
    /// Its announcements are lost, as a gateway's that dies between its write and its notify.
    pub mute: AtomicBool,
    /// The newest version of each state it read or wrote.
    seen: [AtomicU64; 2],
    /// Its view of the preferred gateway, as last read.
    preferred: AtomicU32,
    /// That view changed since the last [`Plane::news`].
    preferred_news: AtomicBool,
    /// Runs once, just before this gateway's next write of a state: another gateway's
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
            first: [AtomicBool::new(first), AtomicBool::new(first)],
            interfere: AtomicU32::new(0),
            mute: AtomicBool::new(false),
            seen: Default::default(),
            preferred: AtomicU32::new(u32::from(cluster.preferred())),
            preferred_news: AtomicBool::new(true),
            before_share: Mutex::new(None),
        })
    }

    fn share(&self, file: KeptFile, contents: &[u8], version: u64) -> Done {
        let first = self.before_share.lock().take();
        if let Some(other) = first {
            other();
        }
        let mut object = self.cluster.object(file);
        if self
            .interfere
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
            .is_ok()
        {
            // Another gateway wrote the same state again: only the version moved.
            object.version += 1;
        }
        let seen = &self.seen[slot(file)];
        seen.fetch_max(object.version, Ordering::Relaxed);
        if object.version != version {
            return Done::Stale(SharedState {
                contents: object.contents.clone(),
                version: object.version,
                first: false,
            });
        }
        object.contents = Some(contents.to_vec());
        object.version += 1;
        object.writes += 1;
        seen.fetch_max(object.version, Ordering::Relaxed);
        Done::Shared(object.version)
    }

    fn set_preferred(&self, group: u16) {
        self.preferred.store(u32::from(group), Ordering::Relaxed);
        self.preferred_news.store(true, Ordering::Relaxed);
    }

    fn prefer(&self, group: u16) -> Done {
        if !self.cluster.alive.lock().contains(&group) {
            return Done::Failed(Failure::Write {
                at: None,
                error: io::Error::new(io::ErrorKind::NotConnected, "not alive"),
            });
        }
        *self.cluster.chosen.lock() = Some(group);
        self.set_preferred(group);
        Done::Ok
    }
}

impl Plane for Gateway {
    fn is_inline(&self) -> bool {
        true
    }

    fn submit(&self, id: u64, op: Op, buffers: Buffers<'_>) -> Option<Done> {
        match op {
            Op::Share {
                file,
                contents,
                version,
            } => Some(self.share(file, &contents, version)),
            Op::Prefer { group } => Some(self.prefer(group)),
            op => self.data.submit(id, op, buffers),
        }
    }

    fn geometry(&self) -> Geometry {
        self.data.geometry()
    }

    /// As an RBD plane's: its own changes of the preferred gateway, and, looked at now, what
    /// its mailbox holds and the cluster's newer versions (an RBD plane's watch and its look
    /// every 250 ms).
    fn news(&self) -> bool {
        self.preferred_news.swap(false, Ordering::Relaxed)
            | !self.mailbox.lock().is_empty()
            | self.shared_changed(KeptFile::Reservations)
            | self.shared_changed(KeptFile::ModePages)
    }

    fn preferred_gateway(&self) -> Option<Option<u16>> {
        Some(u16::try_from(self.preferred.load(Ordering::Relaxed)).ok())
    }

    fn reload_preferred(&self) -> io::Result<()> {
        self.set_preferred(self.cluster.preferred());
        Ok(())
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

    fn read_now(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.data.read_now(offset, buf)
    }

    fn write_now(&self, offset: u64, buf: &[u8], durable: bool) -> io::Result<()> {
        self.data.write_now(offset, buf, durable)
    }

    fn load_shared(&self, file: KeptFile) -> Option<io::Result<SharedState>> {
        let object = self.cluster.object(file);
        self.seen[slot(file)].fetch_max(object.version, Ordering::Relaxed);
        Some(Ok(SharedState {
            contents: object.contents.clone(),
            version: object.version,
            first: self.first[slot(file)].swap(false, Ordering::Relaxed),
        }))
    }

    fn share_now(&self, file: KeptFile, contents: &[u8], version: u64) -> io::Result<Done> {
        Ok(self.share(file, contents, version))
    }

    /// As an RBD plane's look at the objects' versions every 250 ms, at once.
    fn shared_changed(&self, file: KeptFile) -> bool {
        self.cluster.object(file).version > self.seen[slot(file)].load(Ordering::Relaxed)
    }
}

/// Gateway `own` (of port groups 1 and 2) over `plane` as a target with LUN 0; `config`
/// adds to the logical unit's configuration.
pub fn target(plane: Arc<Gateway>, own: u16, config: impl FnOnce(&mut LuConfig)) -> Target {
    let mut lu = LuConfig::new("iqn.test:gateways", 0, 1 << 20);
    lu.port_groups = PortGroups {
        own,
        all: vec![1, 2],
        explicit: false,
    };
    config(&mut lu);
    Target::new(vec![(0, Arc::new(Unit::build(lu, plane, None).unwrap()))])
}
