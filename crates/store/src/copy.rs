//! EXTENDED COPY (SPC-4 §6.4) and WRITE USING TOKEN (SBC-4): bytes from a source store to
//! this one, a chunk at a time, never the whole range at once.

use crate::plane::{Done, Source};
use crate::run::{flush, read_failed, store_bytes, CHUNK};
use crate::{RangeLock, Store};

/// Copy `len` bytes from `source` at `from` to `destination` at `to` (both ranges checked),
/// `This` being `store`. Each chunk is read from the source (seeing its atomic writes whole),
/// then written holding its destination range; no range is held while waiting for another,
/// so copies crossing between logical units cannot deadlock. Overlapping ranges of one store
/// copy from the end, so no byte is read after it was overwritten.
#[allow(clippy::too_many_arguments)]
pub(crate) fn copy(
    store: &dyn Store,
    ranges: &RangeLock,
    source: &Source,
    destination: &Source,
    from: u64,
    to: u64,
    len: u64,
    durable: bool,
) -> Done {
    let same = match (source, destination) {
        (Source::This, Source::This) => true,
        (Source::Other(a), Source::Other(b)) => std::sync::Arc::ptr_eq(a, b),
        _ => false,
    };
    let backwards = same && to > from && to < from + len;
    let mut buf = vec![0u8; (CHUNK as u64).min(len) as usize];
    let mut done = 0;
    while done < len {
        let n = (len - done).min(CHUNK as u64);
        let at = if backwards { len - done - n } else { done };
        let chunk = &mut buf[..n as usize];
        let (src, dst) = (from + at, to + at);
        let read = match source {
            Source::This => ranges.read(src, n, || store.read_at(src, chunk)),
            Source::Other(plane) => plane.read_now(src, chunk),
        };
        if let Err(error) = read {
            return Done::Failed(read_failed(src)(error));
        }
        let written = match destination {
            Source::This => {
                let _held = ranges.lock(dst, n, false);
                store_bytes(store, dst, chunk, false)
            }
            // Each chunk durable by itself: the other unit's store is flushed by its own plane.
            Source::Other(plane) => plane
                .write_now(dst, chunk, durable)
                .map_err(crate::run::write_failed(dst)),
        };
        if let Err(failed) = written {
            return Done::Failed(failed);
        }
        done += n;
    }
    if durable && matches!(destination, Source::This) {
        return flush(store).unwrap_or_else(Done::Failed);
    }
    Done::Ok
}
