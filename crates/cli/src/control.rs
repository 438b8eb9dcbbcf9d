//! What `stint serve` answers on its admin socket ([`crate::admin::Admin`]): the portal, the
//! configuration it was built from, and the logical units it serves.

use crate::admin::path::{Env, Setting};
use crate::admin::proto::{Applied, Listing, LunInfo, SessionInfo, Stats, TargetInfo};
use crate::admin::server::AdminServer;
use crate::admin::{Admin, Peer};
use crate::config::{Config, LunConfig, StoreKind};
use std::sync::{Arc, RwLock};

/// A LUN as served: where, how it was described, and its unit.
pub struct ServedLun {
    pub target: String,
    pub lun: u64,
    pub config: LunConfig,
    pub unit: Arc<device::Unit>,
}

pub struct Control {
    pub portal: Arc<iscsi::Portal>,
    /// The configuration the server was built from (its `base` resolves relative paths).
    #[allow(dead_code)] // lead: fills (reload and lun-add read it)
    pub config: Config,
    /// In target then LUN order, as configured.
    pub luns: RwLock<Vec<ServedLun>>,
}

impl Control {
    pub fn new(portal: Arc<iscsi::Portal>, config: Config, luns: Vec<ServedLun>) -> Control {
        Control {
            portal,
            config,
            luns: RwLock::new(luns),
        }
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

    fn luns(&self) -> std::sync::RwLockReadGuard<'_, Vec<ServedLun>> {
        // A panic while holding the lock left the list whole: it is only ever replaced.
        self.luns.read().unwrap_or_else(|e| e.into_inner())
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
            core.config().alua_state.name().to_owned(),
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
        let targets = self
            .portal
            .nodes
            .iter()
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
            let names: Vec<&str> = self.portal.nodes.iter().map(|n| n.name.as_str()).collect();
            return Err(format!(
                "no target {target:?}; the targets are {}",
                names.join(", ")
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

    // lead: fills (from the portal's sessions)
    fn sessions(&self) -> Result<Vec<SessionInfo>, String> {
        Err(not_yet("sessions"))
    }

    // lead: fills
    fn logout(&self, _session: u64, _by: &Peer) -> Result<Applied, String> {
        Err(not_yet("logout"))
    }

    // lead: fills
    fn reload(&self, _by: &Peer) -> Result<Applied, String> {
        Err(not_yet("reload"))
    }

    // lead: fills
    fn lun_add(
        &self,
        _target: &str,
        _lun: Option<u64>,
        _spec: &str,
        _by: &Peer,
    ) -> Result<Applied, String> {
        Err(not_yet("lun-add"))
    }

    // lead: fills
    fn lun_remove(&self, _target: &str, _lun: u64, _by: &Peer) -> Result<Applied, String> {
        Err(not_yet("lun-remove"))
    }

    // lead: fills
    fn lun_resize(
        &self,
        _target: &str,
        _lun: u64,
        _size: Option<u64>,
        _shrink: bool,
        _by: &Peer,
    ) -> Result<Applied, String> {
        Err(not_yet("lun-resize"))
    }
}

fn not_yet(verb: &str) -> String {
    format!("{verb} is not available yet in this build of stint serve")
}
