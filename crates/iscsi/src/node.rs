//! iSCSI target nodes (RFC 7143 §4.2.7): a name, an optional alias, the SCSI target device
//! behind it and the initiators allowed to log in.

use std::sync::Arc;

/// One iSCSI target node served on a portal.
#[derive(Clone)]
pub struct TargetNode {
    /// iSCSI name (iqn./eui./naa. form, RFC 7143 §4.2.7.1).
    pub name: String,
    /// TargetAlias (RFC 7143 §13.6), declared at login when set.
    pub alias: Option<String>,
    pub target: Arc<device::Target>,
    /// Initiator names allowed to open a Normal session; empty allows any.
    pub allowed_initiators: Vec<String>,
}

impl TargetNode {
    /// Whether `initiator` may log in (and see this node in SendTargets).
    pub fn allows(&self, initiator: &str) -> bool {
        self.allowed_initiators.is_empty() || self.allowed_initiators.iter().any(|i| i == initiator)
    }
}

impl std::fmt::Debug for TargetNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TargetNode")
            .field("name", &self.name)
            .field("alias", &self.alias)
            .field("allowed_initiators", &self.allowed_initiators)
            .finish()
    }
}
