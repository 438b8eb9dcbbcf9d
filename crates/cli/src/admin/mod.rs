//! The admin interface of a running `stint serve`: a Unix socket speaking [`proto`], served
//! by [`server`] for what implements [`Admin`] (`crate::control::Control`), and the rules
//! that place the socket ([`path`]). `stint ctl` (`crate::ctl`) is its client.

pub mod path;
pub mod proto;
pub mod server;

use proto::{Applied, Listing, Request, Response, SessionInfo, Stats};

/// Who sent a request: the peer's credentials from SO_PEERCRED, as the kernel saw them when
/// it connected (they cannot be forged by the client).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Peer {
    pub uid: u32,
    pub pid: Option<i32>,
}

impl std::fmt::Display for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.pid {
            Some(pid) => write!(f, "uid {} pid {pid}", self.uid),
            None => write!(f, "uid {}", self.uid),
        }
    }
}

/// What the server does for each verb. Calls run on a blocking thread (a reload may take
/// seconds); an `Err` is the precise message the client prints.
pub trait Admin: Send + Sync + 'static {
    fn ls(&self) -> Listing;
    fn sessions(&self) -> Result<Vec<SessionInfo>, String>;
    fn stats(&self, target: &str, lun: u64) -> Result<Stats, String>;
    fn logout(&self, session: u64, by: &Peer) -> Result<Applied, String>;
    fn reload(&self, by: &Peer) -> Result<Applied, String>;
    fn lun_add(
        &self,
        target: &str,
        lun: Option<u64>,
        spec: &str,
        by: &Peer,
    ) -> Result<Applied, String>;
    fn lun_remove(&self, target: &str, lun: u64, by: &Peer) -> Result<Applied, String>;
    fn lun_resize(
        &self,
        target: &str,
        lun: u64,
        size: Option<u64>,
        shrink: bool,
        by: &Peer,
    ) -> Result<Applied, String>;
}

/// Runs `request` on `admin`; a change is logged with who asked and what came of it.
pub fn dispatch(admin: &dyn Admin, request: &Request, by: &Peer) -> Response {
    fn json<T: serde::Serialize>(result: Result<T, String>) -> Response {
        match result.and_then(|r| serde_json::to_value(r).map_err(|e| e.to_string())) {
            Ok(value) => Response::ok(value),
            Err(e) => Response::error(e),
        }
    }
    let response = match request {
        Request::Ls => json(Ok(admin.ls())),
        Request::Sessions => json(admin.sessions()),
        Request::Stats { target, lun } => json(admin.stats(target, *lun)),
        Request::Logout { session } => json(admin.logout(*session, by)),
        Request::Reload => json(admin.reload(by)),
        Request::LunAdd { target, lun, spec } => json(admin.lun_add(target, *lun, spec, by)),
        Request::LunRemove { target, lun } => json(admin.lun_remove(target, *lun, by)),
        Request::LunResize {
            target,
            lun,
            size,
            shrink,
        } => json(admin.lun_resize(target, *lun, *size, *shrink, by)),
    };
    if request.changes() {
        match &response.error {
            None => {
                let result = response.result.as_ref().map(|r| r.to_string());
                let result = result.unwrap_or_default();
                tracing::info!(uid = by.uid, pid = by.pid, ?request, %result, "admin change applied");
            }
            Some(e) => {
                tracing::info!(uid = by.uid, pid = by.pid, ?request, error = %e, "admin change refused");
            }
        }
    }
    response
}
