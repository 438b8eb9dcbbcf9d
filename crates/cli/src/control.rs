//! What `stint serve` answers on its admin socket ([`crate::admin::Admin`]): the portal, the
//! configuration it was built from, and the logical units it serves.

use crate::admin::path::{Env, Setting};
use crate::admin::proto::{Applied, Listing, LunInfo, SessionInfo, Stats, TargetInfo};
use crate::admin::server::AdminServer;
use crate::admin::{Admin, Peer};
use crate::config::{LunConfig, StoreKind};
use crate::reconfigure::Live;
use std::sync::Arc;

/// A LUN as served: where, how it was described, and its unit.
struct ServedLun {
    target: String,
    lun: u64,
    config: LunConfig,
    unit: Arc<device::Unit>,
}

pub struct Control {
    portal: Arc<iscsi::Portal>,
    live: Arc<Live>,
}

impl Control {
    pub fn new(portal: Arc<iscsi::Portal>, live: Arc<Live>) -> Control {
        Control { portal, live }
    }

    /// Serves the admin socket `setting` places for a portal on `port`; dropping the server
    /// stops it and removes the socket.
    pub fn serve(self, setting: &Setting, port: u16) -> anyhow::Result<Option<AdminServer>> {
        let Some(path) = setting.resolve(&Env::current(), port)? else {
            return Ok(None);
        };
        let server = AdminServer::start(&path, Arc::new(self))?;
        tracing::info!(path = %server.path().display(), "admin socket listening");
        Ok(Some(server))
    }

    /// The LUNs served now, in target then LUN order.
    fn luns(&self) -> Vec<ServedLun> {
        self.live
            .served()
            .into_iter()
            .map(|(target, lun, config, unit)| ServedLun {
                target,
                lun,
                config,
                unit,
            })
            .collect()
    }

    /// The names of the targets served now.
    fn target_names(&self) -> Vec<String> {
        let nodes = self.portal.nodes();
        nodes
            .iter()
            .filter(|n| !n.retired)
            .map(|n| n.name.clone())
            .collect()
    }
}

/// A short description of a LUN's store.
fn store(lun: &LunConfig) -> String {
    let path = || {
        lun.path
            .as_deref()
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    };
    match lun.store {
        StoreKind::Ram => "ram".to_owned(),
        StoreKind::File => format!("file {}", path()),
        StoreKind::Block => format!("block {}", path()),
        StoreKind::Rbd => {
            let ns = lun
                .namespace
                .as_deref()
                .map(|n| format!("{n}/"))
                .unwrap_or_default();
            format!(
                "rbd {}/{ns}{}",
                lun.pool.as_deref().unwrap_or_default(),
                lun.image.as_deref().unwrap_or_default()
            )
        }
    }
}

/// The drive model and device queue of a LUN with one ("hdd, depth 32, cdl-aware").
fn queue(lun: &LunConfig) -> Option<String> {
    if !lun.has_device_queue() {
        return None;
    }
    let model = lun.drive.as_ref().map_or("instant", |d| d.model.as_str());
    let q = lun.queue.clone().unwrap_or_default();
    Some(format!(
        "{model}, depth {}, {}, {} arbitration",
        q.depth, q.scheduler, q.arbitration
    ))
}

fn lun_info(served: &ServedLun) -> LunInfo {
    let (size, block_size, cdl, alua, read_only) = served.unit.with(|core| {
        (
            core.blocks() * u64::from(core.block_size()),
            core.block_size(),
            core.features().cdl,
            core.own_access_state().name().to_owned(),
            core.write_protected(),
        )
    });
    LunInfo {
        lun: served.lun,
        store: store(&served.config),
        size,
        block_size,
        queue: queue(&served.config),
        cdl,
        alua,
        read_only,
        allowed_initiators: served.config.allowed_initiators.clone(),
    }
}

impl Admin for Control {
    fn ls(&self) -> Listing {
        let luns = self.luns();
        let nodes = self.portal.nodes();
        let targets = nodes
            .iter()
            .filter(|node| !node.retired)
            .map(|node| TargetInfo {
                name: node.name.clone(),
                alias: node.alias.clone(),
                allowed_initiators: node.allowed_initiators.clone(),
                chap: node.chap.is_some(),
                mutual_chap: node.chap.as_ref().is_some_and(|c| c.target.is_some()),
                luns: luns
                    .iter()
                    .filter(|l| l.target == node.name)
                    .map(lun_info)
                    .collect(),
            })
            .collect();
        Listing { targets }
    }

    fn stats(&self, target: &str, lun: u64) -> Result<Stats, String> {
        let luns = self.luns();
        let on_target: Vec<&ServedLun> = luns.iter().filter(|l| l.target == target).collect();
        if on_target.is_empty() {
            return Err(format!(
                "no target {target:?}; the targets are {}",
                self.target_names().join(", ")
            ));
        }
        let Some(served) = on_target.iter().find(|l| l.lun == lun) else {
            let ids: Vec<String> = on_target.iter().map(|l| l.lun.to_string()).collect();
            return Err(format!(
                "target {target} has no LUN {lun}; its LUNs are {}",
                ids.join(", ")
            ));
        };
        let families = crate::metrics::families(std::slice::from_ref(&served.unit));
        Ok(Stats {
            target: target.to_owned(),
            lun,
            samples: crate::metrics::samples(&families),
        })
    }

    fn sessions(&self) -> Result<Vec<SessionInfo>, String> {
        let nodes = self.portal.nodes();
        let sessions = self.portal.sessions.list();
        Ok(sessions
            .into_iter()
            .map(|s| {
                let login = s.login;
                let isid = login.identity.isid;
                SessionInfo {
                    id: s.id,
                    initiator: login.identity.initiator_name,
                    address: login.peer.to_string(),
                    target: login
                        .identity
                        .node
                        .and_then(|i| nodes.get(i))
                        .map(|n| n.name.clone()),
                    isid: isid.iter().map(|b| format!("{b:02x}")).collect(),
                    tsih: login.tsih,
                    keys: login
                        .keys
                        .into_iter()
                        .map(|(k, v)| (k.to_owned(), v))
                        .collect(),
                    authentication: login.authentication,
                    in_flight: s.in_flight,
                    bytes_received: s.bytes_received,
                    bytes_sent: s.bytes_sent,
                }
            })
            .collect())
    }

    fn logout(&self, session: u64, _by: &Peer) -> Result<Applied, String> {
        if !self.portal.sessions.logout(session) {
            let ids: Vec<String> = self
                .portal
                .sessions
                .list()
                .iter()
                .map(|s| s.id.to_string())
                .collect();
            return Err(match ids.is_empty() {
                true => format!("no session {session}; there are none"),
                false => format!("no session {session}; the sessions are {}", ids.join(", ")),
            });
        }
        Ok(Applied {
            changes: vec![format!(
                "session {session} asked to log out (its connection closes after the Logout \
                 or 2 s)"
            )],
        })
    }

    fn reload(&self, _by: &Peer) -> Result<Applied, String> {
        applied(self.live.reload())
    }

    fn lun_add(
        &self,
        target: &str,
        lun: Option<u64>,
        spec: &str,
        _by: &Peer,
    ) -> Result<Applied, String> {
        applied(self.live.add_lun(target, lun, spec))
    }

    fn lun_remove(&self, target: &str, lun: u64, _by: &Peer) -> Result<Applied, String> {
        applied(self.live.remove_lun(target, lun))
    }

    fn lun_resize(
        &self,
        target: &str,
        lun: u64,
        size: Option<u64>,
        shrink: bool,
        _by: &Peer,
    ) -> Result<Applied, String> {
        applied(self.live.resize_lun(target, lun, size, shrink))
    }
}

/// A change's lines, or its error with its causes.
fn applied(result: anyhow::Result<Vec<String>>) -> Result<Applied, String> {
    result
        .map(|changes| Applied { changes })
        .map_err(|e| format!("{e:#}"))
}
