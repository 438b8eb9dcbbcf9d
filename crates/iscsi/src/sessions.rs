//! The sessions of a portal and its open connections: for session reinstatement (RFC 7143
//! §6.3.5), TARGET COLD RESET, the connection limits, and for an operator who lists the
//! sessions or logs one out. Its locks do not poison: a connection task that panics ends
//! alone, and the registry stays usable.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::Notify;

use crate::connection::SessionIdentity;
use crate::throttle::LoginThrottle;

#[derive(Default)]
pub struct Sessions {
    entries: Mutex<Vec<Entry>>,
    next_id: AtomicU64,
    pub(crate) throttle: Mutex<LoginThrottle>,
    /// Open connections by peer address (their sum is the total).
    open: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions")
            .field("sessions", &self.entries.lock().len())
            .finish()
    }
}

/// A connection's place under the portal's limits, given back when it is dropped.
pub(crate) struct Slot {
    open: Arc<Mutex<HashMap<IpAddr, usize>>>,
    ip: IpAddr,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.open.lock();
        if let Some(n) = open.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

/// What a session's connection counts as it runs, read by [`Sessions::list`].
#[derive(Debug, Default)]
pub struct Traffic {
    pub bytes_received: AtomicU64,
    pub bytes_sent: AtomicU64,
    /// Commands the session has in the device or collecting Data-Out.
    pub in_flight: AtomicUsize,
}

/// How a session logged in, as an operator sees it.
#[derive(Clone, Debug)]
pub struct Login {
    pub identity: SessionIdentity,
    pub peer: SocketAddr,
    pub tsih: u16,
    /// "none" or "CHAP SHA-256, mutual".
    pub authentication: String,
    /// The negotiated operational keys (RFC 7143 §13), as key and value.
    pub keys: Vec<(&'static str, String)>,
}

/// One session, listed.
#[derive(Clone, Debug)]
pub struct Summary {
    /// The session's number in this server (what [`Sessions::logout`] takes).
    pub id: u64,
    pub login: Login,
    pub bytes_received: u64,
    pub bytes_sent: u64,
    pub in_flight: usize,
}

/// The handles of one connection's session.
pub(crate) struct Handles {
    /// Ends the connection at once (reinstatement, cold reset).
    pub kill: Arc<Notify>,
    /// Asks the initiator to log out (an operator's request).
    pub logout: Arc<Notify>,
    pub traffic: Arc<Traffic>,
}

struct Entry {
    id: u64,
    login: Login,
    kill: Arc<Notify>,
    logout: Arc<Notify>,
    traffic: Arc<Traffic>,
}

impl Sessions {
    /// A slot for a new connection from `ip`, unless that would pass the limits `total` and
    /// `per_address`.
    pub(crate) fn admit(&self, ip: IpAddr, total: usize, per_address: usize) -> Option<Slot> {
        let mut open = self.open.lock();
        let all: usize = open.values().sum();
        let from_ip = open.get(&ip).copied().unwrap_or(0);
        if all >= total || from_ip >= per_address {
            return None;
        }
        open.insert(ip, from_ip + 1);
        Some(Slot {
            open: self.open.clone(),
            ip,
        })
    }

    pub(crate) fn id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Record a new session. An older session of the same initiator port (InitiatorName +
    /// ISID) to the same node is closed: session reinstatement at ErrorRecoveryLevel 0
    /// (RFC 7143 §6.3.5).
    pub(crate) fn register(&self, id: u64, login: Login, handles: &Handles) {
        let mut entries = self.entries.lock();
        entries.retain(|e| {
            let same = e.login.identity == login.identity;
            if same {
                tracing::info!(
                    initiator = %login.identity.initiator_name,
                    "session reinstated: the older one is closed (RFC 7143 §6.3.5)"
                );
                e.kill.notify_one();
            }
            !same
        });
        entries.push(Entry {
            id,
            login,
            kill: handles.kill.clone(),
            logout: handles.logout.clone(),
            traffic: handles.traffic.clone(),
        });
    }

    pub(crate) fn remove(&self, id: u64) {
        self.entries.lock().retain(|e| e.id != id);
    }

    /// Close every other session of `node` (TARGET COLD RESET, RFC 7143 §11.5.1).
    pub(crate) fn kill_node(&self, node: Option<usize>, except: u64) {
        let entries = self.entries.lock();
        let mut closed = 0;
        for e in entries
            .iter()
            .filter(|e| e.id != except && e.login.identity.node == node)
        {
            e.kill.notify_one();
            closed += 1;
        }
        tracing::info!(
            sessions = closed,
            "TARGET COLD RESET closes the node's other sessions"
        );
    }

    /// The sessions in full feature phase, oldest first.
    pub fn list(&self) -> Vec<Summary> {
        self.entries
            .lock()
            .iter()
            .map(|e| Summary {
                id: e.id,
                login: e.login.clone(),
                bytes_received: e.traffic.bytes_received.load(Ordering::Relaxed),
                bytes_sent: e.traffic.bytes_sent.load(Ordering::Relaxed),
                in_flight: e.traffic.in_flight.load(Ordering::Relaxed),
            })
            .collect()
    }

    /// Asks the initiator of session `id` to log out (RFC 7143 §11.9.1 AsyncEvent 1); its
    /// connection closes after the Logout or a short grace. False when there is no such
    /// session.
    pub fn logout(&self, id: u64) -> bool {
        let entries = self.entries.lock();
        let Some(e) = entries.iter().find(|e| e.id == id) else {
            return false;
        };
        e.logout.notify_one();
        true
    }

    /// Asks every session of `node` to log out (its target was removed); returns how many.
    pub fn logout_node(&self, node: usize) -> usize {
        let entries = self.entries.lock();
        let mut asked = 0;
        for e in entries
            .iter()
            .filter(|e| e.login.identity.node == Some(node))
        {
            e.logout.notify_one();
            asked += 1;
        }
        asked
    }
}
