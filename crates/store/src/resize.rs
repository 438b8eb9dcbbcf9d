//! Changing a store's capacity while it is served (`stint ctl lun resize`, issue 22).
//!
//! The store changes holding the range lock from the lower of the old and new ends to the
//! end of the address space, as an atomic write: a change in flight to bytes a shrink cuts
//! off finishes first, one that asked later gets its range after the cut and finds it past
//! the end (every store, and every engine once it holds its range, checks again), and a read
//! the cut may have overlapped is done again holding its range and fails the same way
//! ([`crate::RangeLock::read`]). Bytes below both ends are never touched.

use crate::{RangeLock, Store};
use std::io;

/// [`crate::Plane::resize`] of a plane over `store` whose operations take `ranges`.
pub(crate) fn resize(store: &dyn Store, ranges: &RangeLock, bytes: Option<u64>) -> io::Result<u64> {
    let new = match bytes {
        Some(bytes) => bytes,
        None => store.medium_len()?,
    };
    loop {
        let from = store.len().min(new);
        let _held = ranges.lock(from, u64::MAX - from, true);
        // Another resize cut below `from` while this one waited: hold from there instead.
        if store.len() >= from {
            store.set_len(new)?;
            return Ok(new);
        }
    }
}
