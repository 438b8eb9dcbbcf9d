//! The plane of a Ceph RBD image: asynchronous on librbd's C API, as the file plane is on
//! io_uring. Reads, writes, SYNCHRONIZE CACHE, UNMAP, WRITE SAME and COMPARE AND WRITE are
//! librbd requests (`rbd_aio_*`) whose completions come back on librbd's callback thread and
//! go straight to the plane's completion handler; everything else (ORWRITE, VERIFY, FORMAT
//! and SANITIZE steps, GET LBA STATUS, copies, kept files) runs as on any store, on the
//! plane's pool over [`RbdStore`], librbd's synchronous calls.
//!
//! The range lock works as on the other planes: a change holds its range from before its
//! request is handed to librbd until librbd has completed it (and, for a durable one, its
//! flush), so no later write or read of those bytes overtakes it.
//!
//! What maps to what:
//! - READ: `rbd_aio_read2`; WRITE: `rbd_aio_write2`; FUA or a write with the cache off:
//!   `rbd_aio_write2` with `LIBRADOS_OP_FLAG_FADVISE_FUA`, then `rbd_aio_flush`; SYNCHRONIZE
//!   CACHE: `rbd_aio_flush`.
//! - UNMAP (and WRITE SAME with UNMAP, SANITIZE's and FORMAT's zeros): `rbd_aio_write_zeroes`
//!   without the thick-provision flag, librbd's discard that deallocates whole objects and
//!   zeroes the rest of the range, so every unmapped block reads back as zeros (LBPRZ), which
//!   `rbd_aio_discard` does not promise (it skips partial ranges under
//!   `rbd_skip_partial_discard`). One request per range, once a command's ranges are merged
//!   where they overlap or touch, all in flight together.
//! - WRITE SAME: `rbd_aio_writesame`.
//! - COMPARE AND WRITE: `rbd_aio_compare_and_write` (a miscompare is `-EILSEQ` with the image
//!   offset of the first difference) for a range within one 512-byte sector, all librbd
//!   takes; a longer one, or one the OSD refuses (its cmpext over bytes never written), is a
//!   read, compare and write holding the range on the pool (atomic against this server's
//!   commands; the exclusive lock keeps every other client out).

mod ffi;

pub use ffi::{Gateway as RbdGateway, Target as RbdTarget};

use crate::plane::{
    Buffers, Complete, Done, Failure, Geometry, KeptFile, Op, Options, SharedState,
};
use crate::pool_plane::{Core, Owned};
use crate::run::write_failed;
use crate::{check_range, check_span, Held, Plane, Store};
use ffi::{Finished, Image, Refused, Request};
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

/// `EILSEQ` on Linux: librbd's answer to a compare-and-write whose data differ.
const EILSEQ: i32 = 84;
/// `EINVAL` on Linux.
const EINVAL: i32 = 22;
/// librbd's compare-and-write takes a range within one 512-byte sector and one object, else
/// answers `-EINVAL` (`ImageCompareAndWriteRequest::prune_object_extents`); the object size is
/// a multiple of it.
const CAW_SECTOR: u64 = 512;

/// librados options stint sets unless the configuration file sets them (option, its
/// default, stint's value): a dead or unreachable cluster answers with an error within
/// seconds instead of holding commands forever (librados waits without limit by default).
/// 30 s per OSD request is below a Linux host's 30 s command timeout plus its retry.
const TIMEOUTS: &[(&str, &str, &str)] = &[
    ("rados_osd_op_timeout", "0", "30"),
    ("rados_mon_op_timeout", "0", "30"),
    ("client_mount_timeout", "300", "10"),
];

/// An RBD image through librbd's synchronous calls: the store the plane's pool runs the
/// operations librbd has no request for on.
pub struct RbdStore {
    image: Arc<Image>,
    /// The image's size, which `rbd resize` changes while it is served.
    len: AtomicU64,
    object: u64,
}

impl RbdStore {
    /// The image's size when it changed since the last call (its header changed and
    /// `rbd_get_size` now answers another size).
    fn resized(&self) -> Option<u64> {
        if !self.image.header_changed() {
            return None;
        }
        let len = self
            .image
            .size()
            .inspect_err(|e| tracing::warn!(error = %e, "the image's size after a header change"))
            .ok()?;
        let was = self.len.swap(len, Ordering::Relaxed);
        (len != was).then(|| {
            tracing::info!(bytes = len, was, "image resized");
            len
        })
    }
}

impl Store for RbdStore {
    fn len(&self) -> u64 {
        self.len.load(Ordering::Relaxed)
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        check_range(self.len(), offset, buf.len())?;
        self.image.read(offset, buf)
    }

    fn write_at(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
        check_range(self.len(), offset, buf.len())?;
        self.image.write(offset, buf)
    }

    fn flush(&self) -> io::Result<()> {
        self.image.flush()
    }

    fn punch_hole(&self, offset: u64, len: u64) -> io::Result<()> {
        check_span(self.len(), offset, len)?;
        self.image.write_zeroes(offset, len)
    }

    fn unmap_granularity(&self) -> u64 {
        self.object
    }

    fn tells_allocation(&self) -> bool {
        true
    }

    fn is_mapped(&self, offset: u64, len: u64) -> bool {
        self.image
            .allocated(offset, len.min(self.len().saturating_sub(offset)))
            .map_or(true, |e| !e.is_empty())
    }

    /// `rbd_get_size`: the image's size now, `rbd resize` outside stint included.
    fn medium_len(&self) -> io::Result<u64> {
        self.image.size()
    }

    /// `rbd_resize`, unless the image is `len` bytes already (resized outside: adopted). A
    /// shrink stops accesses past the new end first.
    fn set_len(&self, len: u64) -> io::Result<()> {
        let old = self.len();
        if len < old {
            self.len.store(len, Ordering::Relaxed);
        }
        let changed = self.image.size().and_then(|size| match size == len {
            true => Ok(()),
            false => self.image.resize(len),
        });
        match changed {
            Ok(()) => {
                self.len.store(len, Ordering::Relaxed);
                tracing::info!(bytes = len, was = old, "image resized");
                Ok(())
            }
            Err(e) => {
                // What the image holds of the old size (a shrink librbd did in part).
                let kept = self.image.size().map_or(old, |now| now.min(old));
                self.len.store(kept, Ordering::Relaxed);
                Err(e)
            }
        }
    }

    /// The first run from `offset`, looked for within at most `EXTENT_WINDOW` bytes (a longer
    /// run is reported in pieces): allocated where librbd's diff since creation has data.
    fn extent(&self, offset: u64, len: u64) -> io::Result<(bool, u64)> {
        check_span(self.len(), offset, len)?;
        let end = offset + len.min(EXTENT_WINDOW);
        let mut run: Option<(bool, u64)> = None;
        let mut at = offset;
        for (start, n) in self.image.allocated(offset, end - offset)? {
            let (start, stop) = (start.max(at), (start + n).min(end));
            if stop <= start {
                continue;
            }
            match run {
                None if start > at => return Ok((false, start - offset)),
                None => run = Some((true, stop - offset)),
                Some(_) if start > at => break,
                Some((_, _)) => run = Some((true, stop - offset)),
            }
            at = stop;
        }
        Ok(run.unwrap_or((false, end - offset)))
    }
}

/// How far one GET LBA STATUS step asks librbd about (a whole image could be many objects).
const EXTENT_WINDOW: u64 = 1 << 30;

/// What the plane's requests share: the pool's core (range lock, kept files, completion
/// handler) and the image.
struct Shared {
    core: Arc<Core>,
    image: Arc<Image>,
    store: Arc<RbdStore>,
    /// This server among the gateways, when other gateways share the image.
    gateway: Option<RbdGateway>,
    /// The object the gateways of the image register and notify on.
    object: String,
    /// The target port group of the preferred gateway ([`preferred`]), as last seen; 0 while
    /// none is known.
    preferred: AtomicU32,
    /// The RADOS objects the gateways keep their shared state in.
    reservations: SharedObject,
    mode_pages: SharedObject,
    /// The last announcement waited out a watcher that did not answer.
    unanswered: AtomicBool,
}

/// A RADOS object, beside the image, that holds one state every gateway of the image reads
/// and writes (docs/gateways.md).
struct SharedObject {
    name: String,
    /// No other gateway had the image open when this one opened it; taken by the first
    /// [`Plane::load_shared`].
    first: AtomicBool,
    /// The newest version of the object this gateway read or wrote.
    seen: AtomicU64,
    /// A newer version is in the cluster than `seen` ([`Plane::shared_changed`]).
    changed: AtomicBool,
}

impl SharedObject {
    fn new(name: String) -> Self {
        SharedObject {
            name,
            first: AtomicBool::new(false),
            seen: AtomicU64::new(0),
            changed: AtomicBool::new(false),
        }
    }
}

/// How long an announcement waits for the other gateways to have it: a gateway that died
/// keeps its watch until the OSD drops it, and makes the announcement wait this long.
const ANNOUNCE_TIMEOUT_MS: u64 = 2000;

/// How often a gateway looks at which gateways are alive: a host learns of a change within
/// this much (and a few RADOS reads) of the OSD's noticing it.
const GATEWAYS_POLL: Duration = Duration::from_millis(250);

/// The RADOS object, beside the image in its pool and namespace, on which each gateway
/// writes its client's global id (extended attribute `gateway.GROUP`): the image's watchers
/// are named by that id, not by gateway.
fn gateways_object(image: &str) -> String {
    format!("stint.gateways.{image}")
}

/// The extended attribute of the gateways' object that keeps the explicit choice of SET
/// TARGET PORT GROUPS: the target port group of the gateway made preferred, in decimal.
const PREFERRED_XATTR: &str = "preferred";

/// The RADOS objects, beside the image, that hold its persistent reservations and its mode
/// parameters when gateways share it: every gateway reads and writes the one state
/// (docs/gateways.md).
fn reservations_object(image: &str) -> String {
    format!("stint.reservations.{image}")
}

fn mode_pages_object(image: &str) -> String {
    format!("stint.modes.{image}")
}

/// The data plane of an RBD image.
pub struct RbdPlane {
    shared: Arc<Shared>,
}

/// What a request's continuation gets: librbd's result (bytes, or the error) and the
/// mismatch offset of a compare-and-write.
type Outcome = (io::Result<usize>, u64);

impl RbdPlane {
    /// Connects, opens `target`'s image with its exclusive lock held, and answers through
    /// `complete`. `options.threads` sizes the pool of the operations librbd has no request
    /// for; `options.kept` is where the logical unit's state files are kept.
    pub fn open(target: &RbdTarget, options: &Options, complete: Complete) -> io::Result<Self> {
        let mut image = Image::open(target, TIMEOUTS)?;
        if target.gateway.is_some() {
            image.listen(&gateways_object(&target.image))?;
        }
        let image = Arc::new(image);
        let len = image.size()?;
        let object = image.stripe_unit()?;
        let store = Arc::new(RbdStore {
            image: image.clone(),
            len: AtomicU64::new(len),
            object,
        });
        tracing::info!(
            pool = %target.pool,
            image = %target.image,
            bytes = len,
            object_bytes = object,
            "data plane: librbd, asynchronous"
        );
        let core = Core::new(store.clone(), options, complete)?;
        let shared = Arc::new(Shared {
            core,
            image,
            store,
            gateway: target.gateway.clone(),
            object: gateways_object(&target.image),
            preferred: AtomicU32::new(0),
            reservations: SharedObject::new(reservations_object(&target.image)),
            mode_pages: SharedObject::new(mode_pages_object(&target.image)),
            unanswered: AtomicBool::new(false),
        });
        if let Some(gateway) = target.gateway.clone() {
            let object = gateways_object(&target.image);
            // Before this gateway registers: whether any other is alive now.
            let others = alive_others(&shared.image, &gateway, &object)?;
            for file in [KeptFile::Reservations, KeptFile::ModePages] {
                shared.object(file).first.store(!others, Ordering::Relaxed);
            }
            let id = shared.image.instance_id().to_string();
            shared
                .image
                .set_xattr(&object, &format!("gateway.{}", gateway.own), id.as_bytes())?;
            let weak = Arc::downgrade(&shared);
            std::thread::Builder::new()
                .name(format!("rbd-gateways-{}", target.image))
                .spawn(move || watch_gateways(&weak, &gateway, &object))?;
        }
        Ok(RbdPlane { shared })
    }

    /// The plane's range lock (its waiting operations, for tests and metrics).
    pub fn range_lock(&self) -> &crate::RangeLock {
        &self.shared.core.ranges
    }
}

impl Plane for RbdPlane {
    fn is_inline(&self) -> bool {
        false
    }

    fn submit(&self, id: u64, op: Op, buffers: Buffers<'_>) -> Option<Done> {
        let shared = self.shared.clone();
        self.shared
            .core
            .submit(id, op, buffers, move |op, owned| shared.start(op, owned))
    }

    fn geometry(&self) -> Geometry {
        crate::inline::geometry(&*self.shared.core.store)
    }

    /// Raised by the image's header watch, the gateways' announcements and this plane's
    /// look at the gateways every [`GATEWAYS_POLL`].
    fn news(&self) -> bool {
        self.shared.image.take_news()
    }

    fn resized(&self) -> Option<u64> {
        self.shared.store.resized()
    }

    /// A message framed with this gateway's group, so that its own copy (it watches the
    /// object too) is told apart. A watcher that does not answer within
    /// [`ANNOUNCE_TIMEOUT_MS`] is a gateway that died and whose watch the OSD still keeps (the
    /// live ones have the message): the bounded wait the trait allows, told once per spell.
    fn announce(&self, message: &[u8]) -> io::Result<()> {
        let Some(own) = self.shared.own() else {
            return Ok(());
        };
        let framed = [&own.to_be_bytes()[..], message].concat();
        let sent = self
            .shared
            .image
            .notify(&self.shared.object, &framed, ANNOUNCE_TIMEOUT_MS);
        let unanswered = &self.shared.unanswered;
        match sent {
            Err(e) if e.kind() == io::ErrorKind::TimedOut => {
                if !unanswered.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        wait_ms = ANNOUNCE_TIMEOUT_MS,
                        "a gateway's watch does not answer announcements (one that died, until \
                         the OSD drops its watch): each waits this long"
                    );
                }
                Ok(())
            }
            Ok(()) if unanswered.swap(false, Ordering::Relaxed) => {
                tracing::info!("every gateway's watch answers announcements again");
                Ok(())
            }
            other => other,
        }
    }

    fn announced(&self) -> Vec<Vec<u8>> {
        let Some(own) = self.shared.own() else {
            return Vec::new();
        };
        let mut messages = self.shared.image.messages();
        messages.retain(|m| m.len() >= 2 && m[..2] != own.to_be_bytes());
        messages.into_iter().map(|m| m[2..].to_vec()).collect()
    }

    fn preferred_gateway(&self) -> Option<Option<u16>> {
        self.shared.gateway.as_ref().map(|_| {
            u16::try_from(self.shared.preferred.load(Ordering::Relaxed))
                .ok()
                .filter(|&g| g != 0)
        })
    }

    fn reload_preferred(&self) -> io::Result<()> {
        let Some(gateway) = &self.shared.gateway else {
            return Ok(());
        };
        let group = preferred(&self.shared.image, gateway, &self.shared.object)?;
        self.shared.set_preferred(group);
        Ok(())
    }

    fn resize(&self, bytes: Option<u64>) -> io::Result<u64> {
        crate::resize::resize(&*self.shared.store, &self.shared.core.ranges, bytes)
    }

    fn read_now(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.shared.core.read_now(offset, buf)
    }

    fn write_now(&self, offset: u64, buf: &[u8], durable: bool) -> io::Result<()> {
        self.shared.core.write_now(offset, buf, durable)
    }

    /// A gateway's persistent reservations and mode parameters are the cluster's
    /// ([`Plane::load_shared`]), never a local file's.
    fn load(&self, file: KeptFile) -> io::Result<Option<Vec<u8>>> {
        if self.shared.shares(file) {
            return Ok(None);
        }
        self.shared.core.kept.load(file)
    }

    fn load_shared(&self, file: KeptFile) -> Option<io::Result<SharedState>> {
        if !self.shared.shares(file) {
            return None;
        }
        Some(self.shared.load_shared(file))
    }

    /// A load, and a write only when it changed.
    fn shared_changed(&self, file: KeptFile) -> bool {
        let changed = &self.shared.object(file).changed;
        changed.load(Ordering::Relaxed) && changed.swap(false, Ordering::Relaxed)
    }

    fn share_now(&self, file: KeptFile, contents: &[u8], version: u64) -> io::Result<Done> {
        if !self.shared.shares(file) {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "a lone server's image shares no state",
            ));
        }
        self.shared.share(file, contents, version)
    }
}

impl Shared {
    /// This server's target port group, when other gateways share the image.
    fn own(&self) -> Option<u16> {
        self.gateway.as_ref().map(|g| g.own)
    }

    /// The preferred gateway is `group` now, which the next command hears of.
    fn set_preferred(&self, group: u16) {
        self.preferred.store(u32::from(group), Ordering::Relaxed);
        self.image.raise_news();
    }

    /// Whether `file` is the gateways' (in the cluster) rather than this server's.
    fn shares(&self, _file: KeptFile) -> bool {
        self.gateway.is_some()
    }

    fn object(&self, file: KeptFile) -> &SharedObject {
        match file {
            KeptFile::Reservations => &self.reservations,
            KeptFile::ModePages => &self.mode_pages,
        }
    }

    /// [`Op::Prefer`]: the choice written to the cluster, if that gateway is alive, and taken
    /// here at once (the other gateways read it when they hear of it, or at their next look).
    fn prefer(&self, group: u16) -> io::Result<()> {
        let Some(gateway) = &self.gateway else {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "a lone server has no gateway to prefer",
            ));
        };
        if !alive(&self.image, gateway, &self.object)?.contains(&group) {
            return Err(io::Error::new(
                io::ErrorKind::NotConnected,
                format!("the gateway of target port group {group} does not have the image open"),
            ));
        }
        self.image
            .set_xattr(&self.object, PREFERRED_XATTR, group.to_string().as_bytes())?;
        self.set_preferred(group);
        tracing::info!(preferred = group, "the preferred gateway set explicitly");
        Ok(())
    }

    fn load_shared(&self, file: KeptFile) -> io::Result<SharedState> {
        let object = self.object(file);
        let (contents, version) = self.image.read_versioned(&object.name)?;
        object.seen.fetch_max(version, Ordering::Relaxed);
        Ok(SharedState {
            contents,
            version,
            first: object.first.swap(false, Ordering::Relaxed),
        })
    }

    /// [`Op::Share`]: the versioned write; on a lost race, the state as it is now.
    fn share(&self, file: KeptFile, contents: &[u8], version: u64) -> io::Result<Done> {
        let object = self.object(file);
        match self
            .image
            .write_versioned(&object.name, contents, version)?
        {
            Ok(version) => {
                object.seen.fetch_max(version, Ordering::Relaxed);
                Ok(Done::Shared(version))
            }
            Err(ffi::Stale) => {
                let (contents, version) = self.image.read_versioned(&object.name)?;
                object.seen.fetch_max(version, Ordering::Relaxed);
                Ok(Done::Stale(SharedState {
                    contents,
                    version,
                    first: false,
                }))
            }
        }
    }
}

/// The groups of the gateways that have the image open now (their registered client id among
/// the image's watchers), in `gateway.all`'s order. This gateway counts as alive throughout.
fn alive(image: &Image, gateway: &RbdGateway, object: &str) -> io::Result<Vec<u16>> {
    let watchers = image.watchers()?;
    let mut alive = Vec::with_capacity(gateway.all.len());
    for &group in &gateway.all {
        let is = group == gateway.own
            || image
                .get_xattr(object, &format!("gateway.{group}"))?
                .and_then(|id| String::from_utf8(id).ok()?.parse::<u64>().ok())
                .is_some_and(|id| watchers.contains(&id));
        if is {
            alive.push(group);
        }
    }
    Ok(alive)
}

/// Whether a gateway other than this one has the image open now.
fn alive_others(image: &Image, gateway: &RbdGateway, object: &str) -> io::Result<bool> {
    Ok(alive(image, gateway, object)?.len() > 1)
}

/// A gateway's watch of which gateways are alive, until its plane is dropped: the preferred
/// one is looked at again every [`GATEWAYS_POLL`].
fn watch_gateways(plane: &Weak<Shared>, gateway: &RbdGateway, object: &str) {
    while let Some(shared) = plane.upgrade() {
        let was = shared.preferred.load(Ordering::Relaxed);
        let now = match preferred(&shared.image, gateway, object) {
            Ok(group) => u32::from(group),
            Err(e) => {
                tracing::warn!(error = %e, "looking at which gateways have the image open");
                was
            }
        };
        // Unless an explicit choice ([`Shared::prefer`], [`Plane::reload_preferred`]) came
        // meanwhile: this look may have read the choice before it was written.
        let changed = now != was
            && shared
                .preferred
                .compare_exchange(was, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok();
        if changed {
            shared.image.raise_news();
            tracing::info!(
                preferred = now,
                this_gateway = gateway.own,
                "the preferred gateway changed"
            );
        }
        // A change another gateway wrote but died before announcing: its announcement, had
        // it come, would have made this gateway read it (docs/gateways.md).
        for object in [&shared.reservations, &shared.mode_pages] {
            match shared.image.read_versioned(&object.name) {
                Ok((_, version)) if version > object.seen.load(Ordering::Relaxed) => {
                    object.changed.store(true, Ordering::Relaxed);
                    shared.image.raise_news();
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %e, object = %object.name, "looking at a shared state's version")
                }
            }
        }
        drop(shared);
        std::thread::sleep(GATEWAYS_POLL);
    }
}

/// The preferred gateway's group: the one SET TARGET PORT GROUPS chose last (the
/// [`PREFERRED_XATTR`] of the gateways' object) while it is alive, else the first alive in
/// `gateway.all`'s order (docs/gateways.md).
fn preferred(image: &Image, gateway: &RbdGateway, object: &str) -> io::Result<u16> {
    let alive = alive(image, gateway, object)?;
    let chosen = image
        .get_xattr(object, PREFERRED_XATTR)?
        .and_then(|v| String::from_utf8(v).ok()?.parse::<u16>().ok())
        .filter(|g| alive.contains(g));
    Ok(chosen.or(alive.first().copied()).unwrap_or(gateway.own))
}

/// How many of one command's `rbd_aio_write_zeroes` requests librbd holds at once: all of an
/// UNMAP's (stint's MAXIMUM UNMAP BLOCK DESCRIPTOR COUNT is 256), since the OSD orders the
/// ones within one object anyway (256 one-block ranges apart in one object: about 30 ms at
/// once here, 110 ms 64 at a time, 230 ms 16 at a time, 900 ms one by one).
const ZEROES_IN_FLIGHT: usize = 256;

/// The zeroing of one command's ranges, shared by their completions.
struct Zeroing {
    /// Ranges not yet issued, last first.
    pending: Vec<(u64, u64)>,
    in_flight: usize,
    /// The first failure: the range's offset and librbd's error.
    failed: Option<(u64, io::Error)>,
    /// The command and its range, taken by whichever completion ends it.
    end: Option<(Owned, Held)>,
}

/// `ranges` (offset, length) sorted, empty ones dropped, and merged where they overlap or
/// touch: the same bytes, in as few ranges as there can be.
fn merged(mut ranges: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    ranges.retain(|&(_, len)| len > 0);
    ranges.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
    for (offset, len) in ranges {
        let end = offset.saturating_add(len);
        match out.last_mut() {
            Some((o, l)) if offset <= *o + *l => *l = (*l).max(end - *o),
            _ => out.push((offset, len)),
        }
    }
    out
}

/// A length librbd takes as `size_t`.
fn size(len: u64) -> usize {
    usize::try_from(len).unwrap_or(usize::MAX)
}

impl Shared {
    /// Start a checked operation: on librbd's asynchronous API where it has a request for it,
    /// else on the pool over the synchronous store.
    fn start(self: &Arc<Self>, op: Op, owned: Owned) {
        match op {
            Op::Share {
                file,
                ref contents,
                version,
            } if self.shares(file) => {
                let shared = self.clone();
                let contents = contents.clone();
                self.core.pool.spawn(move || {
                    let done = shared
                        .share(file, &contents, version)
                        .unwrap_or_else(|error| Done::Failed(Failure::Write { at: None, error }));
                    shared.core.complete(owned, done);
                });
            }
            Op::Prefer { group } if self.gateway.is_some() => {
                let shared = self.clone();
                self.core.pool.spawn(move || {
                    let done = match shared.prefer(group) {
                        Ok(()) => Done::Ok,
                        Err(error) => Done::Failed(Failure::Write { at: None, error }),
                    };
                    shared.core.complete(owned, done);
                });
            }
            Op::Read { offset, len } => self.read(offset, len, owned),
            Op::Write {
                offset,
                len,
                durable,
                atomic,
            } => {
                let shared = self.clone();
                let request = Request::Write {
                    offset,
                    len: len as usize,
                    flags: if durable { ffi::FADVISE_FUA } else { 0 },
                };
                self.core
                    .ranges
                    .lock_then(offset, len.into(), atomic, move |held| {
                        let Some((owned, held)) = shared.within(offset, len.into(), owned, held)
                        else {
                            return;
                        };
                        shared.change(request, owned, held, durable, offset)
                    });
            }
            Op::CompareAndWrite {
                offset,
                len,
                durable,
            } if offset % CAW_SECTOR + u64::from(len) <= CAW_SECTOR => {
                let shared = self.clone();
                self.core
                    .ranges
                    .lock_then(offset, len.into(), true, move |held| {
                        let Some((owned, held)) = shared.within(offset, len.into(), owned, held)
                        else {
                            return;
                        };
                        shared.compare_and_write(offset, len, durable, owned, held)
                    });
            }
            Op::Flush => self.issue(Request::Flush, owned, |shared, owned, (r, _)| {
                shared.finish(owned, r.map(|_| Done::Ok), |error| Failure::Write {
                    at: None,
                    error,
                })
            }),
            Op::WriteSame {
                offset,
                len,
                block,
                zeros,
                durable,
            } if len > 0 && len % u64::from(block) == 0 => {
                let mut owned = owned;
                if zeros {
                    owned.data_out.clear();
                    owned.data_out.resize(block as usize, 0);
                }
                let shared = self.clone();
                let request = Request::WriteSame {
                    offset,
                    len: size(len),
                    block: block as usize,
                };
                self.core.ranges.lock_then(offset, len, false, move |held| {
                    let Some((owned, held)) = shared.within(offset, len, owned, held) else {
                        return;
                    };
                    shared.change(request, owned, held, durable, offset)
                });
            }
            Op::Unmap { ranges, durable } => {
                let Some((start, len, _)) = crate::run::changes(&Op::Unmap {
                    ranges: ranges.clone(),
                    durable,
                }) else {
                    // No range: nothing to deallocate, answered off the caller's thread.
                    return self.core.answer(owned, Done::Ok);
                };
                let shared = self.clone();
                self.core.ranges.lock_then(start, len, false, move |held| {
                    let Some((owned, held)) = shared.within(start, len, owned, held) else {
                        return;
                    };
                    shared.zero(ranges, durable, owned, held)
                });
            }
            Op::Fill {
                offset,
                len,
                ref pattern,
                durable,
            } if pattern.iter().all(|&b| b == 0) => {
                let shared = self.clone();
                self.core.ranges.lock_then(offset, len, false, move |held| {
                    let Some((owned, held)) = shared.within(offset, len, owned, held) else {
                        return;
                    };
                    shared.zero(vec![(offset, len)], durable, owned, held)
                });
            }
            // ORWRITE, VERIFY, a patterned fill, GET LBA STATUS, usage, copies, kept files,
            // and a compare-and-write across objects: the synchronous path, on the pool.
            op => self.core.start(op, owned),
        }
    }

    /// A change's buffers and range once it holds the range, unless a shrink cut it while it
    /// waited (librbd would silently clip a write across the new end): then the change fails
    /// and its range goes.
    fn within(&self, offset: u64, len: u64, owned: Owned, held: Held) -> Option<(Owned, Held)> {
        let Err(error) = check_span(self.store.len(), offset, len) else {
            return Some((owned, held));
        };
        drop(held);
        let failed = Failure::Write {
            at: Some(offset),
            error,
        };
        self.core.answer(owned, Done::Failed(failed));
        None
    }

    /// Hand `request` to librbd with the operation's buffers; `next` runs with the outcome on
    /// librbd's callback thread, or on the pool when librbd refused the request at once (never
    /// on the caller's thread, which may be inside `Plane::submit`).
    fn issue(
        self: &Arc<Self>,
        request: Request,
        owned: Owned,
        next: impl FnOnce(&Arc<Self>, Owned, Outcome) + Send + 'static,
    ) {
        let Owned {
            id,
            data_in,
            data_out,
            submitted,
        } = owned;
        let shared = self.clone();
        let then = Box::new(move |f: Finished| {
            let owned = Owned {
                id,
                data_in: f.data_in,
                data_out: f.data_out,
                submitted,
            };
            let result = match f.result {
                r if r < 0 => Err(io::Error::from_raw_os_error(-r as i32)),
                r => Ok(r as usize),
            };
            next(&shared, owned, (result, f.mismatch));
        });
        if let Err(Refused {
            error,
            data_in,
            data_out,
            then,
        }) = self.image.aio(request, data_in, data_out, then)
        {
            self.core.pool.spawn(move || {
                then(Finished {
                    result: -(error.raw_os_error().unwrap_or(EINVAL) as isize),
                    data_in,
                    data_out,
                    mismatch: 0,
                })
            });
        }
    }

    /// Answer `owned` with `result`, a failure as `fail` says.
    fn finish(
        &self,
        owned: Owned,
        result: io::Result<Done>,
        fail: impl FnOnce(io::Error) -> Failure,
    ) {
        let done = result.unwrap_or_else(|e| Done::Failed(fail(e)));
        self.core.complete(owned, done);
    }

    /// A change holding its range: the request, then a flush when `durable`, then the range
    /// goes, then the answer.
    fn change(
        self: &Arc<Self>,
        request: Request,
        owned: Owned,
        held: Held,
        durable: bool,
        offset: u64,
    ) {
        self.issue(request, owned, move |shared, owned, (r, _)| match r {
            Ok(_) if durable => {
                shared.issue(Request::Flush, owned, move |shared, owned, (r, _)| {
                    shared.end_change(owned, held, r.map(|_| Done::Ok), offset)
                })
            }
            r => shared.end_change(owned, held, r.map(|_| Done::Ok), offset),
        });
    }

    /// librbd's compare-and-write, holding the range; where the OSD refuses it (`-EINVAL`:
    /// BlueStore's cmpext over bytes never written), the read, compare and write of any
    /// store, still holding the range, on the pool.
    fn compare_and_write(
        self: &Arc<Self>,
        offset: u64,
        len: u32,
        durable: bool,
        owned: Owned,
        held: Held,
    ) {
        let request = Request::CompareAndWrite {
            offset,
            len: len as usize,
        };
        self.issue(request, owned, move |shared, owned, (r, mismatch)| {
            let done = match r {
                Err(e) if e.raw_os_error() == Some(EILSEQ) => {
                    // librbd 16 reports the difference's index within the compared bytes plus
                    // its object's image offset (not the range's); later versions may report
                    // the image offset. Rather than guess, the miscompare (rare, and the range
                    // still held) reads the bytes back and finds the first difference itself.
                    let core = shared.core.clone();
                    return shared.core.pool.spawn(move || {
                        let n = len as usize;
                        let mut medium = vec![0u8; n];
                        let done = match core.store.read_at(offset, &mut medium) {
                            Ok(()) => Done::Miscompare(
                                medium
                                    .iter()
                                    .zip(&owned.data_out[..n])
                                    .position(|(a, b)| a != b)
                                    .map_or(mismatch % CAW_SECTOR, |i| i as u64),
                            ),
                            Err(error) => Done::Failed(Failure::Read {
                                at: Some(offset),
                                error,
                            }),
                        };
                        drop(held);
                        core.complete(owned, done);
                    });
                }
                Err(e) if e.raw_os_error() == Some(EINVAL) => {
                    let core = shared.core.clone();
                    return shared.core.pool.spawn(move || {
                        let op = Op::CompareAndWrite {
                            offset,
                            len,
                            durable,
                        };
                        let done = crate::run::exec(&*core.store, &op, &owned.data_out);
                        drop(held);
                        core.complete(owned, done);
                    });
                }
                Err(e) => Err(e),
                Ok(_) if durable => {
                    return shared.issue(Request::Flush, owned, move |shared, owned, (r, _)| {
                        shared.end_change(owned, held, r.map(|_| Done::Ok), offset)
                    });
                }
                Ok(_) => Ok(Done::Ok),
            };
            shared.end_change(owned, held, done, offset);
        });
    }

    /// The store has finished a change: its range goes before the answer.
    fn end_change(&self, owned: Owned, held: Held, result: io::Result<Done>, offset: u64) {
        drop(held);
        self.finish(owned, result, write_failed(offset));
    }

    /// Zero (deallocate) `ranges`, then flush when `durable`; the range held until the end.
    /// The ranges are first merged where they overlap or touch (an UNMAP of 256 one-block
    /// descriptors side by side is one librbd request, not 256), then handed to librbd as one
    /// `rbd_aio_write_zeroes` each, up to `ZEROES_IN_FLIGHT` at once: disjoint ranges may
    /// complete in any order, and a command's latency is not the sum of its ranges' round
    /// trips to the OSDs.
    fn zero(self: &Arc<Self>, ranges: Vec<(u64, u64)>, durable: bool, owned: Owned, held: Held) {
        let mut pending = merged(ranges);
        if pending.is_empty() {
            return self.zeroed(owned, held, durable, Ok(()));
        }
        pending.reverse();
        let batch = Arc::new(std::sync::Mutex::new(Zeroing {
            pending,
            in_flight: 0,
            failed: None,
            end: Some((owned, held)),
        }));
        self.zero_more(&batch, durable);
    }

    /// Issue what `batch` still has pending, up to `ZEROES_IN_FLIGHT` in flight; the last
    /// completion (or, after a failure, the last one in flight) ends the command.
    fn zero_more(self: &Arc<Self>, batch: &Arc<std::sync::Mutex<Zeroing>>, durable: bool) {
        let issue: Vec<(u64, u64)> = {
            let mut b = batch.lock().unwrap_or_else(|e| e.into_inner());
            let n = if b.failed.is_some() {
                0
            } else {
                ZEROES_IN_FLIGHT
                    .saturating_sub(b.in_flight)
                    .min(b.pending.len())
            };
            let at = b.pending.len() - n;
            let issue = b.pending.split_off(at);
            b.in_flight += issue.len();
            issue
        };
        for (offset, len) in issue {
            let shared = self.clone();
            let batch_then = batch.clone();
            let then: ffi::Then = Box::new(move |f: Finished| {
                let ended = {
                    let mut b = batch_then.lock().unwrap_or_else(|e| e.into_inner());
                    b.in_flight -= 1;
                    if f.result < 0 && b.failed.is_none() {
                        b.failed = Some((offset, io::Error::from_raw_os_error(-f.result as i32)));
                    }
                    if b.in_flight == 0 && (b.pending.is_empty() || b.failed.is_some()) {
                        b.end.take().map(|end| (end, b.failed.take()))
                    } else {
                        None
                    }
                };
                match ended {
                    Some(((owned, held), None)) => shared.zeroed(owned, held, durable, Ok(())),
                    Some(((owned, held), Some(failed))) => {
                        shared.zeroed(owned, held, durable, Err(failed))
                    }
                    None => shared.zero_more(&batch_then, durable),
                }
            });
            let request = Request::WriteZeroes {
                offset,
                len: size(len),
            };
            if let Err(Refused { error, then, .. }) =
                self.image.aio(request, Vec::new(), Vec::new(), then)
            {
                // Never on the caller's thread, which may be inside `Plane::submit`.
                self.core.pool.spawn(move || {
                    then(Finished {
                        result: -(error.raw_os_error().unwrap_or(EINVAL) as isize),
                        data_in: Vec::new(),
                        data_out: Vec::new(),
                        mismatch: 0,
                    })
                });
            }
        }
    }

    /// The zeroing of a command ended (`Err`: the offset of a range that failed, and why):
    /// its flush when `durable`, then the range goes, then the answer.
    fn zeroed(
        self: &Arc<Self>,
        owned: Owned,
        held: Held,
        durable: bool,
        result: Result<(), (u64, io::Error)>,
    ) {
        match result {
            Err((offset, e)) => self.end_change(owned, held, Err(e), offset),
            Ok(()) if durable => self.issue(Request::Flush, owned, move |shared, owned, (r, _)| {
                drop(held);
                shared.finish(owned, r.map(|_| Done::Ok), |error| Failure::Write {
                    at: None,
                    error,
                })
            }),
            Ok(()) => {
                drop(held);
                // Possibly still on the caller's thread (nothing was issued): answered from
                // the pool.
                self.core.answer(owned, Done::Ok);
            }
        }
    }

    /// A read, seeing atomic writes whole as the pool's reads do: issued at once, and if an
    /// atomic write may have overlapped it, issued again holding its range.
    fn read(self: &Arc<Self>, offset: u64, len: u32, mut owned: Owned) {
        let start = owned.data_in.len();
        owned.data_in.resize(start + len as usize, 0);
        let request = Request::Read {
            offset,
            at: start,
            len: len as usize,
        };
        let Some(noted) = self.core.ranges.read_start() else {
            return self.read_held(request, offset, len, start, owned);
        };
        self.issue(request, owned, move |shared, owned, (r, _)| {
            if r.is_ok() && !shared.core.ranges.read_stands(noted) {
                return shared.read_held(request, offset, len, start, owned);
            }
            shared.end_read(owned, start, offset, len, r);
        });
    }

    fn read_held(
        self: &Arc<Self>,
        request: Request,
        offset: u64,
        len: u32,
        start: usize,
        owned: Owned,
    ) {
        let shared = self.clone();
        self.core
            .ranges
            .lock_then(offset, len.into(), false, move |held| {
                shared.issue(request, owned, move |shared, owned, (r, _)| {
                    drop(held);
                    shared.end_read(owned, start, offset, len, r);
                })
            });
    }

    fn end_read(&self, owned: Owned, start: usize, offset: u64, len: u32, r: io::Result<usize>) {
        let r = match r {
            Ok(n) if n == len as usize => Ok(()),
            Ok(n) => Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("librbd read {n} of {len} bytes"),
            )),
            Err(e) => Err(e),
        };
        self.core.end_read(owned, start, offset, r);
    }
}

#[cfg(test)]
mod tests {
    use super::merged;

    #[test]
    fn ranges_merge_where_they_overlap_or_touch() {
        // libiscsi's Unmap.Simple: one descriptor per block, side by side, in any order.
        let blocks: Vec<(u64, u64)> = (0..256u64).rev().map(|i| (i * 512, 512)).collect();
        assert_eq!(merged(blocks), vec![(0, 256 * 512)]);
        // Overlapping, contained, empty and apart.
        assert_eq!(
            merged(vec![
                (4096, 0),
                (1000, 100),
                (0, 512),
                (512, 512),
                (100, 50),
                (1050, 10)
            ]),
            vec![(0, 1100)]
        );
        assert_eq!(
            merged(vec![(8192, 512), (0, 512), (2048, 0), (513, 1)]),
            vec![(0, 512), (513, 1), (8192, 512)]
        );
        assert_eq!(merged(vec![(7, 0)]), vec![]);
        assert_eq!(merged(vec![(0, 4096), (1024, 10)]), vec![(0, 4096)]);
    }
}
