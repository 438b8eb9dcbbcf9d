//! A network portal and its portal group (RFC 7143 §4.4.1): the target nodes reachable
//! through it, the negotiation limits, and the session-wide identifiers it hands out.

use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::sync::Arc;

use device::Finished;
use std::time::Duration;

use crate::negotiation::TargetLimits;
use crate::node::TargetNode;

/// Shared by every connection accepted on the portal.
#[derive(Debug)]
pub struct Portal {
    pub nodes: Vec<TargetNode>,
    /// TargetPortalGroupTag (RFC 7143 §13.9).
    pub portal_group_tag: u16,
    pub limits: TargetLimits,
    /// Commands a session may have outstanding: MaxCmdSN = ExpCmdSN + depth − 1.
    pub queue_depth: u32,
    /// Ping an idle initiator with a NOP-In after this long, and drop the connection when
    /// it stays silent for as long again (also bounds how long a login may stall).
    pub nop_in_interval: Option<Duration>,
    /// A connection not in full feature phase this long after it was accepted is closed,
    /// however it trickles its login.
    pub login_timeout: Duration,
    /// CHAP that discovery sessions must pass; `None`: discovery is open.
    pub discovery_chap: Option<crate::chap::Chap>,
    /// Connections served at once, in all and from one IP address: beyond them a new
    /// connection is closed as soon as it is accepted, so that no client can take every file
    /// descriptor or the memory of thousands of sessions (each session has one connection).
    pub max_connections: usize,
    pub max_connections_per_address: usize,
    next_tsih: AtomicU16,
    next_nexus: AtomicU64,
    /// Where tasks that moved on elsewhere (on a logical unit's driver, on another
    /// connection) go.
    pub router: Arc<Router>,
    /// The drivers of the logical units, by (node, LUN): a call that needs one sooner than it
    /// was told wakes it.
    pub drivers: Drivers,
}

/// Wakes a logical unit's driver.
pub type Wake = Arc<dyn Fn() + Send + Sync>;

/// The drivers' wake-ups, by node index and LUN.
#[derive(Default)]
pub struct Drivers {
    wakes: Mutex<BTreeMap<(usize, u64), Wake>>,
}

impl Drivers {
    pub fn register(&self, node: usize, lun: u64, wake: Wake) {
        self.wakes.lock().insert((node, lun), wake);
    }

    /// Wakes the driver of `lun` on `node`, if it has one.
    pub fn wake(&self, node: Option<usize>, lun: u64) {
        let Some(node) = node else { return };
        let wake = self.wakes.lock().get(&(node, lun)).cloned();
        if let Some(w) = wake {
            w();
        }
    }
}

impl std::fmt::Debug for Drivers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Drivers")
            .field("units", &self.wakes.lock().len())
            .finish()
    }
}

/// Delivers a finished task to the connection of its nexus.
pub type Mailbox = Arc<dyn Fn(Finished) + Send + Sync>;

/// The mailboxes of the nexuses in full feature phase, by nexus id.
#[derive(Default)]
pub struct Router {
    mailboxes: Mutex<HashMap<u64, Mailbox>>,
}

impl Router {
    pub fn register(&self, nexus: u64, mailbox: Mailbox) {
        self.mailboxes.lock().insert(nexus, mailbox);
    }

    pub fn unregister(&self, nexus: u64) {
        self.mailboxes.lock().remove(&nexus);
    }

    /// Hands `f` to its nexus's connection; a task of a nexus that is gone is dropped (the
    /// nexus loss aborted it already).
    pub fn route(&self, f: Finished) {
        let mailbox = self.mailboxes.lock().get(&f.nexus).cloned();
        if let Some(m) = mailbox {
            m(f);
        }
    }
}

impl std::fmt::Debug for Router {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Router")
            .field("nexuses", &self.mailboxes.lock().len())
            .finish()
    }
}

impl Portal {
    pub fn new(nodes: Vec<TargetNode>) -> Portal {
        Portal {
            nodes,
            portal_group_tag: 1,
            limits: TargetLimits::default(),
            queue_depth: 128,
            nop_in_interval: Some(Duration::from_secs(30)),
            // open-iscsi's own login timeout: an initiator that needs longer has given up.
            login_timeout: Duration::from_secs(15),
            discovery_chap: None,
            max_connections: 1024,
            max_connections_per_address: 256,
            next_tsih: AtomicU16::new(1),
            next_nexus: AtomicU64::new(1),
            router: Arc::new(Router::default()),
            drivers: Drivers::default(),
        }
    }

    /// A fresh TSIH (RFC 7143 §11.12.6: never 0).
    pub fn allocate_tsih(&self) -> u16 {
        loop {
            let t = self.next_tsih.fetch_add(1, Ordering::Relaxed);
            if t != 0 {
                return t;
            }
        }
    }

    /// A nexus identifier never used before in this process.
    pub fn allocate_nexus_id(&self) -> u64 {
        self.next_nexus.fetch_add(1, Ordering::Relaxed)
    }
}
