//! The C API of librados and librbd, loaded at run time, and the only `unsafe` of the RBD
//! store. Loaded with `dlopen` (libloading), not linked, so that stint builds and runs on a
//! machine without Ceph's libraries: only an `store = "rbd"` LUN needs them, and without
//! them it gets one error naming the package.
//!
//! Every signature below is written by hand from Ceph 16's headers (`rados/librados.h`,
//! `rbd/librbd.h`, in Debian's `librados-dev` and `librbd-dev`); the C names are kept so each
//! can be checked against its declaration there. Types: `rados_t`, `rados_ioctx_t`,
//! `rbd_image_t` and `rbd_completion_t` are `void *`; `size_t` is `usize`, `ssize_t` is
//! `isize`, `int` is `c_int`; `rbd_callback_t` is `void (*)(rbd_completion_t, void *)`.

// The rest of the RBD store is safe code over the handles and requests below.
#![allow(unsafe_code)]

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

type RadosT = *mut c_void;
type IoctxT = *mut c_void;
type ImageT = *mut c_void;
type CompletionT = *mut c_void;
/// `rados_write_op_t`: `void *`.
type WriteOpT = *mut c_void;
type CallbackT = unsafe extern "C" fn(CompletionT, *mut c_void);
/// `rbd_update_callback_t`: `void (*)(void *arg)`.
type UpdateCallbackT = unsafe extern "C" fn(*mut c_void);
/// `rados_watchcb2_t`: `void (*)(void *arg, uint64_t notify_id, uint64_t handle,
/// uint64_t notifier_id, void *data, size_t data_len)`.
type WatchCallbackT = unsafe extern "C" fn(*mut c_void, u64, u64, u64, *mut c_void, usize);
/// `rados_watcherrcb_t`: `void (*)(void *pre, uint64_t cookie, int err)`.
type WatchErrorCallbackT = unsafe extern "C" fn(*mut c_void, u64, c_int);
/// `int (*cb)(uint64_t, size_t, int, void *)` of `rbd_diff_iterate2`.
type DiffCallbackT = unsafe extern "C" fn(u64, usize, c_int, *mut c_void) -> c_int;

/// `rbd_image_watcher_t`: one client watching the image's header (every client that has
/// the image open).
#[repr(C)]
struct Watcher {
    addr: *mut c_char,
    /// The client's global id, as `rados_get_instance_id` gives it to the client itself.
    id: i64,
    cookie: u64,
}

/// `RBD_LOCK_MODE_EXCLUSIVE` of `rbd_lock_mode_t`.
const RBD_LOCK_MODE_EXCLUSIVE: c_int = 0;
/// `RBD_FEATURE_EXCLUSIVE_LOCK` (`rbd/features.h`).
const RBD_FEATURE_EXCLUSIVE_LOCK: u64 = 1 << 2;
/// `LIBRADOS_CREATE_EXCLUSIVE` (`rados/librados.h`): a create fails with -EEXIST when the
/// object exists.
const LIBRADOS_CREATE_EXCLUSIVE: c_int = 1;
/// The largest shared state object read: persistent reservations are at most 128
/// registrations of a few hundred bytes each.
const SHARED_OBJECT_MAX: usize = 1 << 20;
/// `LIBRADOS_OP_FLAG_FADVISE_FUA` (`rados/librados.h`): a hint the OSD may honour; stint
/// still flushes for durability (see [`Request::Flush`]).
pub(crate) const FADVISE_FUA: c_int = 0x80;

/// The functions used, resolved once from `librados.so.2` and `librbd.so.1`.
struct Api {
    rados_create2: unsafe extern "C" fn(*mut RadosT, *const c_char, *const c_char, u64) -> c_int,
    rados_conf_read_file: unsafe extern "C" fn(RadosT, *const c_char) -> c_int,
    rados_conf_set: unsafe extern "C" fn(RadosT, *const c_char, *const c_char) -> c_int,
    rados_conf_get: unsafe extern "C" fn(RadosT, *const c_char, *mut c_char, usize) -> c_int,
    rados_connect: unsafe extern "C" fn(RadosT) -> c_int,
    rados_shutdown: unsafe extern "C" fn(RadosT),
    rados_ioctx_create: unsafe extern "C" fn(RadosT, *const c_char, *mut IoctxT) -> c_int,
    rados_ioctx_destroy: unsafe extern "C" fn(IoctxT),
    rados_ioctx_set_namespace: unsafe extern "C" fn(IoctxT, *const c_char),
    rbd_open: unsafe extern "C" fn(IoctxT, *const c_char, *mut ImageT, *const c_char) -> c_int,
    rbd_close: unsafe extern "C" fn(ImageT) -> c_int,
    rbd_get_size: unsafe extern "C" fn(ImageT, *mut u64) -> c_int,
    rbd_resize: unsafe extern "C" fn(ImageT, u64) -> c_int,
    rbd_get_stripe_unit: unsafe extern "C" fn(ImageT, *mut u64) -> c_int,
    rbd_get_features: unsafe extern "C" fn(ImageT, *mut u64) -> c_int,
    rbd_lock_acquire: unsafe extern "C" fn(ImageT, c_int) -> c_int,
    rbd_watchers_list: unsafe extern "C" fn(ImageT, *mut Watcher, *mut usize) -> c_int,
    rbd_watchers_list_cleanup: unsafe extern "C" fn(*mut Watcher, usize),
    rados_get_instance_id: unsafe extern "C" fn(RadosT) -> u64,
    rados_watch2: unsafe extern "C" fn(
        IoctxT,
        *const c_char,
        *mut u64,
        WatchCallbackT,
        WatchErrorCallbackT,
        *mut c_void,
    ) -> c_int,
    rados_unwatch2: unsafe extern "C" fn(IoctxT, u64) -> c_int,
    rados_watch_flush: unsafe extern "C" fn(RadosT) -> c_int,
    rados_notify2: unsafe extern "C" fn(
        IoctxT,
        *const c_char,
        *const c_char,
        c_int,
        u64,
        *mut *mut c_char,
        *mut usize,
    ) -> c_int,
    rados_notify_ack:
        unsafe extern "C" fn(IoctxT, *const c_char, u64, u64, *const c_char, c_int) -> c_int,
    rados_buffer_free: unsafe extern "C" fn(*mut c_char),
    rados_setxattr:
        unsafe extern "C" fn(IoctxT, *const c_char, *const c_char, *const c_char, usize) -> c_int,
    rados_getxattr:
        unsafe extern "C" fn(IoctxT, *const c_char, *const c_char, *mut c_char, usize) -> c_int,
    rados_read: unsafe extern "C" fn(IoctxT, *const c_char, *mut c_char, usize, u64) -> c_int,
    rados_get_last_version: unsafe extern "C" fn(IoctxT) -> u64,
    rados_create_write_op: unsafe extern "C" fn() -> WriteOpT,
    rados_release_write_op: unsafe extern "C" fn(WriteOpT),
    rados_write_op_assert_version: unsafe extern "C" fn(WriteOpT, u64),
    rados_write_op_create: unsafe extern "C" fn(WriteOpT, c_int, *const c_char),
    rados_write_op_write_full: unsafe extern "C" fn(WriteOpT, *const c_char, usize),
    /// `int rados_write_op_operate(rados_write_op_t, rados_ioctx_t, const char *oid,
    /// time_t *mtime, int flags)`; `time_t` is only passed as a null pointer.
    rados_write_op_operate:
        unsafe extern "C" fn(WriteOpT, IoctxT, *const c_char, *mut c_void, c_int) -> c_int,
    rbd_update_watch: unsafe extern "C" fn(ImageT, *mut u64, UpdateCallbackT, *mut c_void) -> c_int,
    rbd_update_unwatch: unsafe extern "C" fn(ImageT, u64) -> c_int,
    rbd_diff_iterate2: unsafe extern "C" fn(
        ImageT,
        *const c_char,
        u64,
        u64,
        u8,
        u8,
        DiffCallbackT,
        *mut c_void,
    ) -> c_int,
    rbd_read2: unsafe extern "C" fn(ImageT, u64, usize, *mut c_char, c_int) -> isize,
    rbd_write2: unsafe extern "C" fn(ImageT, u64, usize, *const c_char, c_int) -> isize,
    rbd_flush: unsafe extern "C" fn(ImageT) -> c_int,
    rbd_write_zeroes: unsafe extern "C" fn(ImageT, u64, usize, c_int, c_int) -> isize,
    rbd_aio_create_completion:
        unsafe extern "C" fn(*mut c_void, CallbackT, *mut CompletionT) -> c_int,
    rbd_aio_get_return_value: unsafe extern "C" fn(CompletionT) -> isize,
    rbd_aio_release: unsafe extern "C" fn(CompletionT),
    rbd_aio_read2:
        unsafe extern "C" fn(ImageT, u64, usize, *mut c_char, CompletionT, c_int) -> c_int,
    rbd_aio_write2:
        unsafe extern "C" fn(ImageT, u64, usize, *const c_char, CompletionT, c_int) -> c_int,
    rbd_aio_flush: unsafe extern "C" fn(ImageT, CompletionT) -> c_int,
    rbd_aio_write_zeroes:
        unsafe extern "C" fn(ImageT, u64, usize, CompletionT, c_int, c_int) -> c_int,
    rbd_aio_writesame:
        unsafe extern "C" fn(ImageT, u64, usize, *const c_char, usize, CompletionT, c_int) -> c_int,
    rbd_aio_compare_and_write: unsafe extern "C" fn(
        ImageT,
        u64,
        usize,
        *const c_char,
        *const c_char,
        CompletionT,
        *mut u64,
        c_int,
    ) -> isize,
}

/// The libraries, loaded on first use and never unloaded, so that the function pointers in
/// [`Api`] stay valid for the life of the process.
static API: OnceLock<Result<(Api, libloading::Library, libloading::Library), String>> =
    OnceLock::new();

fn api() -> io::Result<&'static Api> {
    let loaded = API.get_or_init(|| {
        // SAFETY: loading librados and librbd runs their initialisers, which only set up
        // static state of those libraries (no constructor of theirs depends on the process's
        // own state). Each symbol is read into a function pointer of the type declared in
        // the headers (see the module comment); the `Library` values are stored beside the
        // pointers in a static that is never dropped, so the code they point to stays mapped.
        unsafe {
            let rados = libloading::Library::new("librados.so.2").map_err(|e| e.to_string())?;
            let rbd = libloading::Library::new("librbd.so.1").map_err(|e| e.to_string())?;
            macro_rules! sym {
                ($lib:ident, $name:ident) => {
                    *$lib
                        .get(concat!(stringify!($name), "\0").as_bytes())
                        .map_err(|e| e.to_string())?
                };
            }
            let api = Api {
                rados_create2: sym!(rados, rados_create2),
                rados_conf_read_file: sym!(rados, rados_conf_read_file),
                rados_conf_set: sym!(rados, rados_conf_set),
                rados_conf_get: sym!(rados, rados_conf_get),
                rados_connect: sym!(rados, rados_connect),
                rados_shutdown: sym!(rados, rados_shutdown),
                rados_ioctx_create: sym!(rados, rados_ioctx_create),
                rados_ioctx_destroy: sym!(rados, rados_ioctx_destroy),
                rados_ioctx_set_namespace: sym!(rados, rados_ioctx_set_namespace),
                rbd_open: sym!(rbd, rbd_open),
                rbd_close: sym!(rbd, rbd_close),
                rbd_get_size: sym!(rbd, rbd_get_size),
                rbd_resize: sym!(rbd, rbd_resize),
                rbd_get_stripe_unit: sym!(rbd, rbd_get_stripe_unit),
                rbd_get_features: sym!(rbd, rbd_get_features),
                rbd_lock_acquire: sym!(rbd, rbd_lock_acquire),
                rbd_watchers_list: sym!(rbd, rbd_watchers_list),
                rbd_watchers_list_cleanup: sym!(rbd, rbd_watchers_list_cleanup),
                rados_get_instance_id: sym!(rados, rados_get_instance_id),
                rados_watch2: sym!(rados, rados_watch2),
                rados_unwatch2: sym!(rados, rados_unwatch2),
                rados_watch_flush: sym!(rados, rados_watch_flush),
                rados_notify2: sym!(rados, rados_notify2),
                rados_notify_ack: sym!(rados, rados_notify_ack),
                rados_buffer_free: sym!(rados, rados_buffer_free),
                rados_setxattr: sym!(rados, rados_setxattr),
                rados_getxattr: sym!(rados, rados_getxattr),
                rados_read: sym!(rados, rados_read),
                rados_get_last_version: sym!(rados, rados_get_last_version),
                rados_create_write_op: sym!(rados, rados_create_write_op),
                rados_release_write_op: sym!(rados, rados_release_write_op),
                rados_write_op_assert_version: sym!(rados, rados_write_op_assert_version),
                rados_write_op_create: sym!(rados, rados_write_op_create),
                rados_write_op_write_full: sym!(rados, rados_write_op_write_full),
                rados_write_op_operate: sym!(rados, rados_write_op_operate),
                rbd_update_watch: sym!(rbd, rbd_update_watch),
                rbd_update_unwatch: sym!(rbd, rbd_update_unwatch),
                rbd_diff_iterate2: sym!(rbd, rbd_diff_iterate2),
                rbd_read2: sym!(rbd, rbd_read2),
                rbd_write2: sym!(rbd, rbd_write2),
                rbd_flush: sym!(rbd, rbd_flush),
                rbd_write_zeroes: sym!(rbd, rbd_write_zeroes),
                rbd_aio_create_completion: sym!(rbd, rbd_aio_create_completion),
                rbd_aio_get_return_value: sym!(rbd, rbd_aio_get_return_value),
                rbd_aio_release: sym!(rbd, rbd_aio_release),
                rbd_aio_read2: sym!(rbd, rbd_aio_read2),
                rbd_aio_write2: sym!(rbd, rbd_aio_write2),
                rbd_aio_flush: sym!(rbd, rbd_aio_flush),
                rbd_aio_write_zeroes: sym!(rbd, rbd_aio_write_zeroes),
                rbd_aio_writesame: sym!(rbd, rbd_aio_writesame),
                rbd_aio_compare_and_write: sym!(rbd, rbd_aio_compare_and_write),
            };
            Ok((api, rados, rbd))
        }
    });
    match loaded {
        Ok((api, _, _)) => Ok(api),
        Err(e) => Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "an rbd store needs Ceph's client libraries librbd.so.1 and librados.so.2, \
                 which did not load ({e}); install the package librbd1 (apt-get install librbd1)"
            ),
        )),
    }
}

/// A librados or librbd return value: negative errno values are errors.
fn check(r: isize, what: &str) -> io::Result<usize> {
    if r < 0 {
        let e = io::Error::from_raw_os_error(-r as i32);
        Err(io::Error::new(e.kind(), format!("{what}: {e}")))
    } else {
        Ok(r as usize)
    }
}

fn cstring(s: &str, what: &str) -> io::Result<CString> {
    CString::new(s).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{what} {s:?} contains a NUL byte"),
        )
    })
}

/// Where and as whom to connect, and what to open.
#[derive(Clone, Debug)]
pub struct Target {
    /// A ceph.conf; `None`: librados's default search (`$CEPH_CONF`, /etc/ceph/ceph.conf).
    pub conf: Option<String>,
    /// The cephx user without "client." ("admin").
    pub user: String,
    pub keyring: Option<String>,
    pub pool: String,
    pub namespace: Option<String>,
    pub image: String,
    /// Where several gateways export the image (docs/gateways.md): the exclusive lock is
    /// then librbd's cooperative one, handed to whichever gateway writes, and librbd's cache
    /// is off so that every gateway reads what any other acknowledged. `None`: this server
    /// alone holds the lock.
    pub gateway: Option<Gateway>,
}

/// This server among the gateways of an image, by target port group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gateway {
    pub own: u16,
    /// Every gateway's group, in the configuration's order (the preferred first).
    pub all: Vec<u16>,
}

/// A connected cluster handle and an I/O context on the pool; an open image with its
/// exclusive lock held (by a lone server) or taken as writes need it (by a gateway).
pub(crate) struct Image {
    api: &'static Api,
    cluster: RadosT,
    ioctx: IoctxT,
    image: ImageT,
    /// Operations handed to librbd whose callback has not run yet: `Drop` waits for none.
    in_flight: Arc<InFlight>,
    /// Raised by librbd's update watch when the image's header changed (a resize, a
    /// snapshot, a lock moving); boxed so that its address, given to librbd, stays put.
    header_changed: Box<Flag>,
    /// The plane's news ([`Image::take_news`]): raised with every flag of the image, and by
    /// the plane for what it learns itself.
    news: Arc<AtomicBool>,
    /// The update watch's handle, once registered.
    watch: Option<u64>,
    /// The watch on a RADOS object that other gateways notify (see [`Image::listen`]), and
    /// its mailbox, boxed so that its address, given to librados, stays put.
    listening: Option<(u64, Box<Mailbox>)>,
    /// An I/O context of its own for the objects the gateways share (null: none), used one
    /// call at a time under the lock: `rados_get_last_version` answers for the last
    /// operation of its context, which no other thread's may come between.
    objects: parking_lot::Mutex<IoctxT>,
}

/// What a versioned write found: the object was at another version (or, for version 0,
/// existed), and nothing was written.
pub(crate) struct Stale;

/// What other clients sent through notifies on the watched object, until taken.
pub(crate) struct Mailbox {
    api: &'static Api,
    ioctx: IoctxT,
    object: CString,
    messages: parking_lot::Mutex<Vec<Vec<u8>>>,
    /// Raised when `messages` holds any.
    any: Flag,
}

/// A flag a librbd or librados callback raises, and the plane's news with it
/// ([`Image::take_news`]), so that a command asks about it only then.
struct Flag {
    set: AtomicBool,
    news: Arc<AtomicBool>,
}

impl Flag {
    fn new(news: &Arc<AtomicBool>) -> Self {
        Flag {
            set: AtomicBool::new(false),
            news: news.clone(),
        }
    }

    /// The flag first, then the news: whoever takes the news sees the flag.
    fn raise(&self) {
        self.set.store(true, Ordering::Release);
        self.news.store(true, Ordering::Release);
    }

    /// Whether it was raised since the last call: a load, and a write only when it was.
    fn take(&self) -> bool {
        self.set.load(Ordering::Acquire) && self.set.swap(false, Ordering::AcqRel)
    }
}

#[derive(Default)]
struct InFlight {
    count: parking_lot::Mutex<u64>,
    zero: parking_lot::Condvar,
}

// SAFETY: librados and librbd handles may be used from any thread, concurrently: librbd's
// image functions take the image's own locks (librbd.h documents no thread affinity, and
// QEMU, tgt and tcmu-runner call them from several threads); `Image` only holds the handles.
unsafe impl Send for Image {}
// SAFETY: as above; every method takes `&self` and only passes the handles to librbd.
unsafe impl Sync for Image {}

impl Image {
    /// Connect to the cluster `target` names, open the image and take its exclusive lock, so
    /// that no other client (another stint, a kernel mapping) writes it meanwhile.
    /// `timeouts` are librados options set unless the configuration file sets them.
    pub(crate) fn open(target: &Target, timeouts: &[(&str, &str, &str)]) -> io::Result<Image> {
        let api = api()?;
        let name = cstring(&format!("client.{}", target.user), "user")?;
        let cluster_name = c"ceph";
        let mut cluster: RadosT = std::ptr::null_mut();
        // SAFETY: `cluster` is a valid out-pointer; the names are NUL-terminated and only read
        // during the call.
        check(
            unsafe { (api.rados_create2)(&mut cluster, cluster_name.as_ptr(), name.as_ptr(), 0) }
                as isize,
            "rados_create2",
        )?;
        // From here on the handles are released by `Drop`, whatever fails.
        let news = Arc::new(AtomicBool::new(false));
        let mut image = Image {
            api,
            cluster,
            ioctx: std::ptr::null_mut(),
            image: std::ptr::null_mut(),
            in_flight: Arc::default(),
            header_changed: Box::new(Flag::new(&news)),
            news,
            watch: None,
            listening: None,
            objects: parking_lot::Mutex::new(std::ptr::null_mut()),
        };
        let conf = target
            .conf
            .as_deref()
            .map(|c| cstring(c, "conf"))
            .transpose()?;
        // SAFETY: `cluster` was created above and not connected yet (rados_conf_read_file's
        // precondition); a null path asks for the default search.
        let r = unsafe {
            (api.rados_conf_read_file)(
                cluster,
                conf.as_ref().map_or(std::ptr::null(), |c| c.as_ptr()),
            )
        };
        check(
            r as isize,
            &format!(
                "reading the Ceph configuration {}",
                target.conf.as_deref().unwrap_or("(default search)")
            ),
        )?;
        if let Some(keyring) = &target.keyring {
            image.conf_set("keyring", keyring)?;
        }
        if target.gateway.is_some() {
            image.conf_set("rbd_cache", "false")?;
        }
        for (option, default, value) in timeouts {
            if image.conf_get(option)?.parse::<f64>().ok() == default.parse::<f64>().ok() {
                image.conf_set(option, value)?;
            }
        }
        // SAFETY: a configured, unconnected handle.
        check(
            unsafe { (api.rados_connect)(cluster) } as isize,
            "connecting to the Ceph cluster (rados_connect)",
        )?;
        let pool = cstring(&target.pool, "pool")?;
        // SAFETY: a connected handle, a NUL-terminated pool name, a valid out-pointer.
        check(
            unsafe { (api.rados_ioctx_create)(cluster, pool.as_ptr(), &mut image.ioctx) } as isize,
            &format!("opening pool {:?}", target.pool),
        )?;
        if target.gateway.is_some() {
            let objects = image.objects.get_mut();
            // SAFETY: a connected handle, a NUL-terminated pool name, a valid out-pointer.
            check(
                unsafe { (api.rados_ioctx_create)(cluster, pool.as_ptr(), objects) } as isize,
                &format!("opening pool {:?}", target.pool),
            )?;
        }
        if let Some(ns) = &target.namespace {
            let ns = cstring(ns, "namespace")?;
            // SAFETY: valid I/O contexts (the second only when created above); the string is
            // copied by librados.
            unsafe {
                (api.rados_ioctx_set_namespace)(image.ioctx, ns.as_ptr());
                let objects = *image.objects.get_mut();
                if !objects.is_null() {
                    (api.rados_ioctx_set_namespace)(objects, ns.as_ptr());
                }
            }
        }
        let name = cstring(&target.image, "image")?;
        // SAFETY: a valid I/O context, a NUL-terminated name, a valid out-pointer, no snapshot.
        check(
            unsafe {
                (api.rbd_open)(
                    image.ioctx,
                    name.as_ptr(),
                    &mut image.image,
                    std::ptr::null(),
                )
            } as isize,
            &format!("opening image {:?} in pool {:?}", target.image, target.pool),
        )?;
        let features = image.get_u64(api.rbd_get_features, "rbd_get_features")?;
        if features & RBD_FEATURE_EXCLUSIVE_LOCK == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "image {:?} lacks the exclusive-lock feature, which keeps a second server \
                     from writing it (rbd feature enable {}/{} exclusive-lock)",
                    target.image, target.pool, target.image
                ),
            ));
        }
        if target.gateway.is_none() {
            // SAFETY: an open image.
            let r = unsafe { (api.rbd_lock_acquire)(image.image, RBD_LOCK_MODE_EXCLUSIVE) };
            check(
                r as isize,
                &format!(
                    "taking the exclusive lock of image {:?} (another client holds it?)",
                    target.image
                ),
            )?;
        }
        let mut handle = 0u64;
        let flag: *const Flag = &*image.header_changed;
        // SAFETY: an open image and a valid out-pointer; `flag` points into a box the image
        // owns, which `Drop` frees only after `rbd_update_unwatch` has returned, and librbd
        // runs no callback of a watch after unwatching it returns.
        let r = unsafe {
            (api.rbd_update_watch)(
                image.image,
                &mut handle,
                header_updated,
                flag.cast_mut().cast(),
            )
        };
        check(r as isize, "watching the image's header (rbd_update_watch)")?;
        image.watch = Some(handle);
        Ok(image)
    }

    /// Whether the image's header changed since the last call: its size may have.
    pub(crate) fn header_changed(&self) -> bool {
        self.header_changed.take()
    }

    /// Raises the plane's news for what the plane learnt itself (raise what it concerns
    /// first, so that whoever takes the news sees it).
    pub(crate) fn raise_news(&self) {
        self.news.store(true, Ordering::Release);
    }

    /// Whether anything was raised since the last call (the header, a message, what the
    /// plane raised): asked before every command, so a load, and a write only when it was.
    pub(crate) fn take_news(&self) -> bool {
        self.news.load(Ordering::Acquire) && self.news.swap(false, Ordering::AcqRel)
    }

    /// This client's global id in the cluster (`rados_get_instance_id`), by which the
    /// image's watchers name it.
    pub(crate) fn instance_id(&self) -> u64 {
        // SAFETY: a connected cluster handle.
        unsafe { (self.api.rados_get_instance_id)(self.cluster) }
    }

    /// The global ids of the clients that have the image open now (`rbd_watchers_list`: the
    /// watches on its header object, which the OSD drops once a client stops renewing its
    /// own, `osd_client_watch_timeout` after it died).
    pub(crate) fn watchers(&self) -> io::Result<Vec<u64>> {
        const ERANGE: isize = 34;
        let mut room = 8usize;
        loop {
            let mut list: Vec<Watcher> = Vec::with_capacity(room);
            let mut n = room;
            // SAFETY: an open image; `list` has room for `n` watchers, the capacity passed,
            // and librbd writes at most that many (else it answers -ERANGE with the count
            // needed, writing none).
            let r = unsafe { (self.api.rbd_watchers_list)(self.image, list.as_mut_ptr(), &mut n) }
                as isize;
            if r == -ERANGE && n > room {
                room = n;
                continue;
            }
            check(r, "rbd_watchers_list")?;
            let n = n.min(room);
            // SAFETY: librbd initialised the first `n` entries (n ≤ capacity); they are read
            // once, then released once by rbd_watchers_list_cleanup (which frees their
            // strings), after which the vector's memory holds no live pointers and is freed
            // by Rust as plain bytes (`Watcher` has no Drop).
            let ids = unsafe {
                list.set_len(n);
                let ids = list
                    .iter()
                    .filter_map(|w| u64::try_from(w.id).ok())
                    .collect();
                (self.api.rbd_watchers_list_cleanup)(list.as_mut_ptr(), n);
                ids
            };
            return Ok(ids);
        }
    }

    /// Sets extended attribute `name` of RADOS object `object` in the image's pool (and
    /// namespace) to `value`, creating the object if need be (`rados_setxattr`).
    pub(crate) fn set_xattr(&self, object: &str, name: &str, value: &[u8]) -> io::Result<()> {
        let (o, n) = (cstring(object, "object")?, cstring(name, "attribute")?);
        // SAFETY: a valid I/O context; the names are NUL-terminated and `value` is readable
        // for its length, all only read during the (blocking) call.
        let r = unsafe {
            (self.api.rados_setxattr)(
                self.ioctx,
                o.as_ptr(),
                n.as_ptr(),
                value.as_ptr().cast(),
                value.len(),
            )
        };
        check(r as isize, &format!("setting {name} of {object}")).map(drop)
    }

    /// Extended attribute `name` of RADOS object `object` (`rados_getxattr`), at most 64
    /// bytes; `None` when the object or the attribute does not exist.
    pub(crate) fn get_xattr(&self, object: &str, name: &str) -> io::Result<Option<Vec<u8>>> {
        const ENOENT: isize = 2;
        const ENODATA: isize = 61;
        let (o, n) = (cstring(object, "object")?, cstring(name, "attribute")?);
        let mut buf = [0u8; 64];
        // SAFETY: a valid I/O context; the names are NUL-terminated; `buf` is writable for
        // the length passed, and librados writes at most that many bytes.
        let r = unsafe {
            (self.api.rados_getxattr)(
                self.ioctx,
                o.as_ptr(),
                n.as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        } as isize;
        if r == -ENOENT || r == -ENODATA {
            return Ok(None);
        }
        let n = check(r, &format!("reading {name} of {object}"))?;
        Ok(Some(buf[..n.min(buf.len())].to_vec()))
    }

    /// Watches RADOS object `object` (in the image's pool and namespace, created if need be):
    /// from now on what any client sends with [`Image::notify`] on it is kept for
    /// [`Image::messages`]. Once per image.
    pub(crate) fn listen(&mut self, object: &str) -> io::Result<()> {
        let o = cstring(object, "object")?;
        self.set_xattr(object, "created", b"")?;
        let mailbox = Box::new(Mailbox {
            api: self.api,
            ioctx: self.ioctx,
            object: o,
            messages: parking_lot::Mutex::default(),
            any: Flag::new(&self.news),
        });
        let mut cookie = 0u64;
        let arg: *const Mailbox = &*mailbox;
        // SAFETY: a valid I/O context, a NUL-terminated name, a valid out-pointer; `arg` points
        // into a box the image owns, which `Drop` frees only after rados_unwatch2 and
        // rados_watch_flush have returned, after which librados runs no callback of the watch.
        let r = unsafe {
            (self.api.rados_watch2)(
                self.ioctx,
                mailbox.object.as_ptr(),
                &mut cookie,
                notified,
                watch_failed,
                arg.cast_mut().cast(),
            )
        };
        check(r as isize, &format!("watching {object} (rados_watch2)"))?;
        self.listening = Some((cookie, mailbox));
        Ok(())
    }

    /// Sends `message` to every client watching `object`, waiting at most `timeout_ms` for
    /// them to have it (`rados_notify2`; a client that died but whose watch the OSD has not
    /// dropped yet makes it wait the whole timeout, and answer -ETIMEDOUT).
    pub(crate) fn notify(&self, object: &str, message: &[u8], timeout_ms: u64) -> io::Result<()> {
        let o = cstring(object, "object")?;
        let len =
            c_int::try_from(message.len()).map_err(|_| io::Error::other("message too long"))?;
        let mut reply: *mut c_char = std::ptr::null_mut();
        let mut reply_len = 0usize;
        // SAFETY: a valid I/O context; `o` and `message` are readable for the (blocking) call;
        // `reply` and `reply_len` are valid out-pointers; the reply buffer librados allocates
        // is freed once below with rados_buffer_free, as librados.h asks.
        let r = unsafe {
            let r = (self.api.rados_notify2)(
                self.ioctx,
                o.as_ptr(),
                message.as_ptr().cast(),
                len,
                timeout_ms,
                &mut reply,
                &mut reply_len,
            );
            if !reply.is_null() {
                (self.api.rados_buffer_free)(reply);
            }
            r
        };
        check(r as isize, &format!("notifying {object} (rados_notify2)")).map(drop)
    }

    /// RADOS object `object` (in the image's pool and namespace) whole, and its version
    /// (`rados_read`, `rados_get_last_version`); `(None, 0)` when it does not exist. Only on
    /// a gateway's image (the objects' I/O context).
    pub(crate) fn read_versioned(&self, object: &str) -> io::Result<(Option<Vec<u8>>, u64)> {
        const ENOENT: c_int = 2;
        let o = cstring(object, "object")?;
        let io = self.objects.lock();
        if io.is_null() {
            return Err(io::Error::other(
                "no shared objects on a lone server's image",
            ));
        }
        let mut buf = vec![0u8; SHARED_OBJECT_MAX];
        // SAFETY: a valid I/O context, held alone under the lock; a NUL-terminated name;
        // `buf` is writable for the length passed, and librados writes at most that many.
        let (r, version) = unsafe {
            let r = (self.api.rados_read)(*io, o.as_ptr(), buf.as_mut_ptr().cast(), buf.len(), 0);
            (r, (self.api.rados_get_last_version)(*io))
        };
        if r == -ENOENT {
            return Ok((None, 0));
        }
        let n = check(r as isize, &format!("reading {object} (rados_read)"))?;
        if n >= buf.len() {
            return Err(io::Error::other(format!(
                "{object} is larger than {SHARED_OBJECT_MAX} bytes"
            )));
        }
        buf.truncate(n);
        Ok((Some(buf), version))
    }

    /// Replaces RADOS object `object` with `data` if it is at `version` (0: creates it if it
    /// does not exist), in one write operation (`rados_write_op_assert_version` or an
    /// exclusive `rados_write_op_create`, then `rados_write_op_write_full`): the new version,
    /// or [`Stale`] when another client changed it since.
    pub(crate) fn write_versioned(
        &self,
        object: &str,
        data: &[u8],
        version: u64,
    ) -> io::Result<Result<u64, Stale>> {
        const EEXIST: c_int = 17;
        const ERANGE: c_int = 34;
        const EOVERFLOW: c_int = 75;
        let o = cstring(object, "object")?;
        let io = self.objects.lock();
        if io.is_null() {
            return Err(io::Error::other(
                "no shared objects on a lone server's image",
            ));
        }
        // SAFETY: a valid I/O context, held alone under the lock. The operation is created,
        // given its steps (which copy nothing: `data` and `o` stay alive and unchanged until
        // rados_write_op_operate, blocking, has returned), performed, and released once; a
        // null mtime asks for the current time, a null category is ignored by librados.
        let (r, new) = unsafe {
            let op = (self.api.rados_create_write_op)();
            if op.is_null() {
                return Err(io::Error::other("rados_create_write_op failed"));
            }
            if version == 0 {
                (self.api.rados_write_op_create)(op, LIBRADOS_CREATE_EXCLUSIVE, std::ptr::null());
            } else {
                (self.api.rados_write_op_assert_version)(op, version);
            }
            (self.api.rados_write_op_write_full)(op, data.as_ptr().cast(), data.len());
            let r = (self.api.rados_write_op_operate)(op, *io, o.as_ptr(), std::ptr::null_mut(), 0);
            (self.api.rados_release_write_op)(op);
            (r, (self.api.rados_get_last_version)(*io))
        };
        match -r {
            // -EEXIST: created meanwhile; -ERANGE: a newer version; -EOVERFLOW: an older
            // one (the object was removed and written again).
            EEXIST | ERANGE | EOVERFLOW => Ok(Err(Stale)),
            _ => {
                check(
                    r as isize,
                    &format!("writing {object} (rados_write_op_operate)"),
                )?;
                Ok(Ok(new))
            }
        }
    }

    /// What other clients sent since the last call (see [`Image::listen`]).
    pub(crate) fn messages(&self) -> Vec<Vec<u8>> {
        match &self.listening {
            Some((_, m)) if m.any.take() => std::mem::take(&mut *m.messages.lock()),
            _ => Vec::new(),
        }
    }

    fn conf_set(&self, option: &str, value: &str) -> io::Result<()> {
        let (o, v) = (cstring(option, "option")?, cstring(value, "value")?);
        // SAFETY: an unconnected handle; both strings NUL-terminated and copied by librados.
        let r = unsafe { (self.api.rados_conf_set)(self.cluster, o.as_ptr(), v.as_ptr()) };
        check(r as isize, &format!("setting {option} = {value}")).map(drop)
    }

    fn conf_get(&self, option: &str) -> io::Result<String> {
        let o = cstring(option, "option")?;
        let mut buf = [0u8; 128];
        // SAFETY: `buf` is writable for its length, which is passed; librados NUL-terminates
        // what it writes (or fails with -ENAMETOOLONG).
        let r = unsafe {
            (self.api.rados_conf_get)(self.cluster, o.as_ptr(), buf.as_mut_ptr().cast(), buf.len())
        };
        check(r as isize, &format!("reading option {option}"))?;
        Ok(CStr::from_bytes_until_nul(&buf)
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default())
    }

    fn get_u64(
        &self,
        f: unsafe extern "C" fn(ImageT, *mut u64) -> c_int,
        what: &str,
    ) -> io::Result<u64> {
        let mut v = 0u64;
        // SAFETY: an open image and a valid out-pointer (`f` is one of rbd_get_size,
        // rbd_get_stripe_unit, rbd_get_features, all `int f(rbd_image_t, uint64_t *)`).
        check(unsafe { f(self.image, &mut v) } as isize, what)?;
        Ok(v)
    }

    /// The image's size in bytes (`rbd_get_size`).
    pub(crate) fn size(&self) -> io::Result<u64> {
        self.get_u64(self.api.rbd_get_size, "rbd_get_size")
    }

    /// `rbd_resize`: the image becomes `size` bytes; a shrink removes the data past the new
    /// end. Blocks until librbd has changed the header (holding the exclusive lock, which
    /// this client holds) and, on a shrink, removed the objects past the end.
    pub(crate) fn resize(&self, size: u64) -> io::Result<()> {
        // SAFETY: an open image; `int rbd_resize(rbd_image_t image, uint64_t size)` takes no
        // pointer. librbd runs it beside this image's other requests from any thread (it
        // blocks the image's writes while it changes the size), as it does every call here.
        let r = unsafe { (self.api.rbd_resize)(self.image, size) };
        check(r as isize, &format!("rbd_resize to {size} bytes")).map(drop)
    }

    /// The image's object size for the default striping (`rbd_get_stripe_unit`).
    pub(crate) fn stripe_unit(&self) -> io::Result<u64> {
        self.get_u64(self.api.rbd_get_stripe_unit, "rbd_get_stripe_unit")
    }

    /// The allocated extents `(offset, len)` within `[offset, offset + len)`, in order, from
    /// `rbd_diff_iterate2` since the image's creation (no snapshot), this image's data only.
    pub(crate) fn allocated(&self, offset: u64, len: u64) -> io::Result<Vec<(u64, u64)>> {
        let mut extents: Vec<(u64, u64)> = Vec::new();
        // SAFETY: an open image; a null snapshot name means "from the beginning"; `extents`
        // outlives the (blocking) call, and `diff_extent` is its only user, called by librbd on
        // this thread's behalf within the call.
        let r = unsafe {
            (self.api.rbd_diff_iterate2)(
                self.image,
                std::ptr::null(),
                offset,
                len,
                0,
                0,
                diff_extent,
                (&mut extents as *mut Vec<(u64, u64)>).cast(),
            )
        };
        check(r as isize, "rbd_diff_iterate2")?;
        extents.sort_unstable();
        Ok(extents)
    }

    /// `rbd_read2`, the whole buffer.
    pub(crate) fn read(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        // SAFETY: `buf` is writable for `buf.len()` bytes for the whole (blocking) call.
        let r = unsafe {
            (self.api.rbd_read2)(self.image, offset, buf.len(), buf.as_mut_ptr().cast(), 0)
        };
        let n = check(r, "rbd_read2")?;
        if n != buf.len() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("rbd_read2 read {n} of {} bytes", buf.len()),
            ));
        }
        Ok(())
    }

    /// `rbd_write2`, the whole buffer.
    pub(crate) fn write(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
        // SAFETY: `buf` is readable for `buf.len()` bytes for the whole (blocking) call.
        let r =
            unsafe { (self.api.rbd_write2)(self.image, offset, buf.len(), buf.as_ptr().cast(), 0) };
        let n = check(r, "rbd_write2")?;
        if n != buf.len() {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                format!("rbd_write2 wrote {n} of {} bytes", buf.len()),
            ));
        }
        Ok(())
    }

    /// `rbd_flush`.
    pub(crate) fn flush(&self) -> io::Result<()> {
        // SAFETY: an open image.
        check(
            unsafe { (self.api.rbd_flush)(self.image) } as isize,
            "rbd_flush",
        )
        .map(drop)
    }

    /// `rbd_write_zeroes` without `RBD_WRITE_ZEROES_FLAG_THICK_PROVISION`: whole objects are
    /// deallocated, the rest of the range zeroed.
    pub(crate) fn write_zeroes(&self, offset: u64, len: u64) -> io::Result<()> {
        let len = usize::try_from(len).map_err(|_| io::Error::other("range too long"))?;
        // SAFETY: an open image; no buffer.
        let r = unsafe { (self.api.rbd_write_zeroes)(self.image, offset, len, 0, 0) };
        check(r, "rbd_write_zeroes").map(drop)
    }

    /// Start `request` on librbd's asynchronous API with the owned buffers; `then` runs on
    /// librbd's callback thread with the result and the buffers, unless librbd refuses the
    /// request at once: then the buffers and `then` come back in the `Err`, not called.
    pub(crate) fn aio(
        &self,
        request: Request,
        data_in: Vec<u8>,
        data_out: Vec<u8>,
        then: Then,
    ) -> Result<(), Refused> {
        // The buffer ranges librbd will touch, checked here so that no request can make it
        // read or write outside them.
        let fits = match request {
            Request::Read { at, len, .. } => {
                at.checked_add(len).is_some_and(|e| e <= data_in.len())
            }
            Request::Write { len, .. } => len <= data_out.len(),
            Request::WriteSame { block, len, .. } => {
                block > 0 && block <= data_out.len() && len % block == 0
            }
            Request::CompareAndWrite { len, .. } => {
                len.checked_mul(2).is_some_and(|n| n <= data_out.len())
            }
            Request::Flush | Request::WriteZeroes { .. } => true,
        };
        let mut pending = Box::new(Pending {
            data_in,
            data_out,
            mismatch: 0,
            then,
            api: self.api,
            in_flight: self.in_flight.clone(),
        });
        if !fits {
            return Err(Refused {
                error: io::Error::new(io::ErrorKind::InvalidInput, "buffers too short"),
                data_in: std::mem::take(&mut pending.data_in),
                data_out: std::mem::take(&mut pending.data_out),
                then: pending.then,
            });
        }
        // The pointers into the buffers are taken from the boxed `Pending`, which owns the
        // vectors until the callback: moving the box moves the `Vec` headers, never the heap
        // memory they point to.
        let inp = pending.data_in.as_mut_ptr();
        let out = pending.data_out.as_ptr();
        let mismatch: *mut u64 = &mut pending.mismatch;
        let raw = Box::into_raw(pending);
        let mut c: CompletionT = std::ptr::null_mut();
        // SAFETY: `raw` is a valid, leaked `Pending` that `callback` takes back exactly once
        // (librbd calls the callback once per completion); `c` is a valid out-pointer.
        let r = unsafe { (self.api.rbd_aio_create_completion)(raw.cast(), callback, &mut c) };
        if r < 0 {
            // SAFETY: no completion exists, so nothing else will take `raw` back.
            let pending = unsafe { Box::from_raw(raw) };
            return Err((*pending).refused(r as isize, "rbd_aio_create_completion"));
        }
        *self.in_flight.count.lock() += 1;
        // SAFETY (every arm): the image is open and stays open until every operation's
        // callback has run (`Drop` waits for `in_flight` to reach zero before rbd_close).
        // The buffer pointers point into heap memory owned by the `Pending` behind `raw`,
        // valid for the ranges checked by `fits` above, and neither freed nor moved until
        // the callback has run: librbd reads or writes them only until it completes the
        // request, and the callback runs after that. Read ranges start at `at` within
        // data_in; write ranges are within data_out. `mismatch` points into the same
        // `Pending`, written by librbd before it completes the request.
        let r = unsafe {
            match request {
                Request::Read { offset, at, len } => {
                    (self.api.rbd_aio_read2)(self.image, offset, len, inp.add(at).cast(), c, 0)
                        as isize
                }
                Request::Write { offset, len, flags } => {
                    (self.api.rbd_aio_write2)(self.image, offset, len, out.cast(), c, flags)
                        as isize
                }
                Request::Flush => (self.api.rbd_aio_flush)(self.image, c) as isize,
                Request::WriteZeroes { offset, len } => {
                    (self.api.rbd_aio_write_zeroes)(self.image, offset, len, c, 0, 0) as isize
                }
                Request::WriteSame { offset, len, block } => {
                    (self.api.rbd_aio_writesame)(self.image, offset, len, out.cast(), block, c, 0)
                        as isize
                }
                Request::CompareAndWrite { offset, len } => (self.api.rbd_aio_compare_and_write)(
                    self.image,
                    offset,
                    len,
                    out.cast(),
                    out.add(len).cast(),
                    c,
                    mismatch,
                    0,
                ),
            }
        };
        if r < 0 {
            // librbd's C functions return an error only before they hand the completion to
            // the request (argument checks); the callback will then never run.
            // SAFETY: as above, `raw` is taken back once, and `c` released once.
            let pending = unsafe {
                (self.api.rbd_aio_release)(c);
                Box::from_raw(raw)
            };
            pending.in_flight.done();
            return Err((*pending).refused(r, "the rbd_aio request"));
        }
        Ok(())
    }
}

impl InFlight {
    fn done(&self) {
        let mut n = self.count.lock();
        *n -= 1;
        if *n == 0 {
            self.zero.notify_all();
        }
    }
}

impl Drop for Image {
    fn drop(&mut self) {
        let mut n = self.in_flight.count.lock();
        while *n > 0 {
            self.in_flight.zero.wait(&mut n);
        }
        drop(n);
        // SAFETY: each handle is released once, the watch before its image, image before I/O
        // context before cluster, and no operation on them is in flight (waited for above).
        unsafe {
            if let Some((cookie, _)) = &self.listening {
                // After rados_unwatch2 no new callback starts; rados_watch_flush waits for
                // those under way, so the mailbox may be freed after it.
                (self.api.rados_unwatch2)(self.ioctx, *cookie);
                (self.api.rados_watch_flush)(self.cluster);
            }
            if let Some(handle) = self.watch {
                (self.api.rbd_update_unwatch)(self.image, handle);
            }
            if !self.image.is_null() {
                (self.api.rbd_close)(self.image);
            }
            if !self.ioctx.is_null() {
                (self.api.rados_ioctx_destroy)(self.ioctx);
            }
            let objects = *self.objects.get_mut();
            if !objects.is_null() {
                (self.api.rados_ioctx_destroy)(objects);
            }
            (self.api.rados_shutdown)(self.cluster);
        }
    }
}

/// One asynchronous request; offsets and lengths in bytes.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Request {
    /// `rbd_aio_read2` of `len` bytes into `data_in[at..at + len]`.
    Read { offset: u64, at: usize, len: usize },
    /// `rbd_aio_write2` of `data_out[..len]` with `LIBRADOS_OP_FLAG_*` flags.
    Write {
        offset: u64,
        len: usize,
        flags: c_int,
    },
    /// `rbd_aio_flush`.
    Flush,
    /// `rbd_aio_write_zeroes`, no flags: deallocate, zeroing what it cannot.
    WriteZeroes { offset: u64, len: usize },
    /// `rbd_aio_writesame`: `data_out[..block]` over `len` bytes (a multiple of `block`).
    WriteSame {
        offset: u64,
        len: usize,
        block: usize,
    },
    /// `rbd_aio_compare_and_write`: `data_out[..len]` compared, `data_out[len..2 * len]`
    /// written.
    CompareAndWrite { offset: u64, len: usize },
}

/// What runs when a request ends.
pub(crate) type Then = Box<dyn FnOnce(Finished) + Send>;

/// A request's end: librbd's return value (negative errno on failure), the buffers, and for
/// a compare-and-write that returned `-EILSEQ`, the image offset of the first difference.
pub(crate) struct Finished {
    pub(crate) result: isize,
    pub(crate) data_in: Vec<u8>,
    pub(crate) data_out: Vec<u8>,
    pub(crate) mismatch: u64,
}

/// A request librbd refused at once, with what it was given back.
pub(crate) struct Refused {
    pub(crate) error: io::Error,
    pub(crate) data_in: Vec<u8>,
    pub(crate) data_out: Vec<u8>,
    pub(crate) then: Then,
}

/// A request's state while librbd holds it: owned here, pointed to by the completion's
/// argument.
struct Pending {
    data_in: Vec<u8>,
    data_out: Vec<u8>,
    mismatch: u64,
    then: Then,
    api: &'static Api,
    in_flight: Arc<InFlight>,
}

impl Pending {
    fn refused(self, r: isize, what: &str) -> Refused {
        let Pending {
            data_in,
            data_out,
            then,
            ..
        } = self;
        Refused {
            error: check(r, what)
                .err()
                .unwrap_or_else(|| io::Error::other(what.to_owned())),
            data_in,
            data_out,
            then,
        }
    }
}

/// The update watch's callback (`rbd_update_callback_t`), on a librbd thread: only marks the
/// header changed (a librbd call from here could wait for the thread that runs it).
unsafe extern "C" fn header_updated(arg: *mut c_void) {
    // SAFETY: `arg` is the `Flag` registered with the watch, alive until after it is
    // unwatched (see `Image::open`).
    let flag = unsafe { &*arg.cast::<Flag>() };
    flag.raise();
}

/// The watch's notify callback (`rados_watchcb2_t`), on a librados thread: keeps the
/// message and acknowledges it, so that the notifier's `rados_notify2` returns.
unsafe extern "C" fn notified(
    arg: *mut c_void,
    notify_id: u64,
    cookie: u64,
    _notifier: u64,
    data: *mut c_void,
    len: usize,
) {
    // SAFETY: `arg` is the `Mailbox` registered with the watch, alive until after it is
    // unwatched and flushed (see `Image::listen`); `data` is readable for `len` bytes for the
    // duration of the callback (librados.h), or null with 0.
    let mailbox = unsafe { &*arg.cast::<Mailbox>() };
    let message = if data.is_null() || len == 0 {
        Vec::new()
    } else {
        unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) }.to_vec()
    };
    mailbox.messages.lock().push(message);
    mailbox.any.raise();
    // SAFETY: the mailbox's I/O context and object name, valid while the watch is; no reply
    // payload.
    let r = unsafe {
        (mailbox.api.rados_notify_ack)(
            mailbox.ioctx,
            mailbox.object.as_ptr(),
            notify_id,
            cookie,
            std::ptr::null(),
            0,
        )
    };
    if r < 0 {
        tracing::warn!(errno = -r, "acknowledging a gateway's notify");
    }
}

/// The watch's error callback (`rados_watcherrcb_t`): the watch is gone (the client lost
/// the OSD long enough); messages sent meanwhile are lost.
unsafe extern "C" fn watch_failed(_arg: *mut c_void, _cookie: u64, err: c_int) {
    tracing::error!(
        errno = -err,
        "the watch other gateways notify through failed"
    );
}

/// The completion callback (`rbd_callback_t`), on a librbd thread.
unsafe extern "C" fn callback(c: CompletionT, arg: *mut c_void) {
    // SAFETY: `arg` is the pointer `Image::aio` leaked with `Box::into_raw` for this
    // completion, and librbd calls the callback exactly once per completion, so the box is
    // taken back exactly once. Its `api` is the static table, valid for the process.
    let pending = unsafe { Box::from_raw(arg.cast::<Pending>()) };
    // SAFETY: `c` is the completion this callback was registered on; it is read, then
    // released once (the return value is read before the release).
    let result = unsafe {
        let r = (pending.api.rbd_aio_get_return_value)(c);
        (pending.api.rbd_aio_release)(c);
        r
    };
    let Pending {
        data_in,
        data_out,
        mismatch,
        then,
        in_flight,
        ..
    } = *pending;
    // The request is over for librbd: an image may close once `then` has started whatever
    // follows (a chained request counts itself in before this count goes down).
    let finished = Finished {
        result,
        data_in,
        data_out,
        mismatch,
    };
    // A panic must not unwind into C.
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| then(finished))).is_err() {
        tracing::error!("an rbd completion handler panicked");
    }
    in_flight.done();
}

/// `rbd_diff_iterate2`'s callback: one extent, allocated (`exists`) or not.
unsafe extern "C" fn diff_extent(
    offset: u64,
    len: usize,
    exists: c_int,
    arg: *mut c_void,
) -> c_int {
    // SAFETY: `arg` is the `&mut Vec` `Image::allocated` passed, alive and not otherwise
    // borrowed for the duration of the rbd_diff_iterate2 call this callback runs within.
    let extents = unsafe { &mut *arg.cast::<Vec<(u64, u64)>>() };
    if exists != 0 {
        extents.push((offset, len as u64));
    }
    0
}
