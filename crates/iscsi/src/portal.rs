//! A network portal and its portal group (RFC 7143 §4.4.1): the target nodes reachable
//! through it, the negotiation limits, and the session-wide identifiers it hands out.

use parking_lot::{Mutex, RwLock};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::sync::Arc;

use device::{Finished, Unit};
use std::time::Duration;

use crate::clock::UnitDriver;

use crate::negotiation::TargetLimits;
use crate::node::TargetNode;
use crate::sessions::Sessions;

/// Shared by every connection accepted on the portal.
#[derive(Debug)]
pub struct Portal {
    /// The target nodes, by index: a node keeps its index for as long as the portal serves
    /// (sessions, drivers and completions name it so); a removed one stays, retired.
    nodes: RwLock<Arc<Vec<TargetNode>>>,
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
    /// The sessions in full feature phase and the open connections.
    pub sessions: Sessions,
    /// How long each hand-off of a task back to its connection (from a logical unit's clock or
    /// its data plane: to run its store operation, or with its answer) waited until the
    /// connection wrote the batch it handled it in: the server's share of the time a host
    /// waits beyond the device's.
    pub delivery: Mutex<device::latency::Histogram>,
}

/// Wakes a logical unit's driver.
pub type Wake = Arc<dyn Fn() + Send + Sync>;

/// The drivers of the logical units, by node index and LUN, and their wake-ups.
#[derive(Default)]
pub struct Drivers {
    wakes: Mutex<BTreeMap<(usize, u64), Wake>>,
    running: Mutex<BTreeMap<(usize, u64), UnitDriver>>,
}

impl Drivers {
    /// Starts the driver of `unit`, served as `lun` of node `node`, on the wall clock.
    pub fn start(
        &self,
        node: usize,
        lun: u64,
        unit: Arc<Unit>,
        router: Arc<Router>,
    ) -> std::io::Result<()> {
        let (driver, wake) = UnitDriver::spawn(unit, router)?;
        self.wakes.lock().insert((node, lun), wake);
        // A driver it replaces stops as it is dropped, outside the lock.
        let _replaced = self.running.lock().insert((node, lun), driver);
        Ok(())
    }

    /// Stops the driver of `lun` on `node` (the unit left the target and has no tasks).
    pub fn stop(&self, node: usize, lun: u64) {
        self.wakes.lock().remove(&(node, lun));
        let _stopped = self.running.lock().remove(&(node, lun));
    }

    /// Stops every driver (the portal stops serving).
    pub fn stop_all(&self) {
        self.wakes.lock().clear();
        let _stopped = std::mem::take(&mut *self.running.lock());
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
            nodes: RwLock::new(Arc::new(nodes)),
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
            sessions: Sessions::default(),
            delivery: Mutex::default(),
        }
    }

    /// The target nodes now (a login or a SendTargets answer takes this snapshot).
    pub fn nodes(&self) -> Arc<Vec<TargetNode>> {
        self.nodes.read().clone()
    }

    /// Changes the nodes for logins from now on: `change` may alter nodes in place and
    /// append new ones; indices stay (a node that goes is [retired](TargetNode::retired)).
    pub fn update_nodes(&self, change: impl FnOnce(&mut Vec<TargetNode>)) {
        let mut nodes = self.nodes.write();
        let mut next = Vec::clone(&nodes);
        let before = next.len();
        change(&mut next);
        debug_assert!(
            next.len() >= before,
            "a node was removed instead of retired"
        );
        *nodes = Arc::new(next);
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
