//! A network portal and its portal group (RFC 7143 §4.4.1): the target nodes reachable
//! through it, the negotiation limits, and the session-wide identifiers it hands out.

use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
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
    next_tsih: AtomicU16,
    next_nexus: AtomicU64,
}

impl Portal {
    pub fn new(nodes: Vec<TargetNode>) -> Portal {
        Portal {
            nodes,
            portal_group_tag: 1,
            limits: TargetLimits::default(),
            queue_depth: 128,
            nop_in_interval: Some(Duration::from_secs(30)),
            next_tsih: AtomicU16::new(1),
            next_nexus: AtomicU64::new(1),
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
