//! The synchronous executor of every data-plane operation against any [`Store`]: what an
//! inline plane runs on the caller's thread and an asynchronous plane on its pool. Every
//! operation that changes bytes holds its range in the range lock while it does (the atomic
//! ones as atomic writes, so reads see them whole); reads take the lock only when an atomic
//! write may have overlapped them ([`RangeLock::read`]).

use crate::copy::copy;
use crate::plane::{invalid, Done, Failure, Op, Source};
use crate::{check_span, RangeLock, Store};
use std::io;

/// Bytes a Compare reads and compares at a time, and a Fill writes at most at once.
pub(crate) const CHUNK: usize = 1 << 20;

/// Bytes a WRITE SAME writes at a time.
const WRITE_SAME_BYTES: usize = 128 << 10;

/// Run `op` against `store` on this thread, waiting for its range when another operation
/// holds it. `data_in` is appended to; `data_out` is the operation's Data-Out.
pub fn run(
    store: &dyn Store,
    ranges: &RangeLock,
    op: &Op,
    data_in: &mut Vec<u8>,
    data_out: &[u8],
) -> Done {
    if let Err(failed) = check(store.len(), op, data_out.len()) {
        return Done::Failed(failed);
    }
    match *op {
        Op::Read { offset, len } => read(store, ranges, offset, len, data_in),
        Op::Copy {
            ref source,
            ref destination,
            from,
            to,
            len,
            durable,
        } => copy(store, ranges, source, destination, from, to, len, durable),
        _ => {
            let _held = changes(op).map(|(start, len, atomic)| ranges.lock(start, len, atomic));
            exec(store, op, data_out)
        }
    }
}

/// Whether `op` fits a store of `capacity` bytes and a Data-Out of `data_out` bytes: the
/// checks every plane makes before it starts an operation.
pub(crate) fn check(capacity: u64, op: &Op, data_out: usize) -> Result<(), Failure> {
    let span = |offset: u64, len: u64| check_span(capacity, offset, len);
    let out = |needed: u64| {
        if (data_out as u64) < needed {
            return Err(invalid(format!(
                "the operation needs {needed} bytes of Data-Out and has {data_out}"
            )));
        }
        Ok(())
    };
    let read = |r: io::Result<()>| r.map_err(|error| Failure::Read { at: None, error });
    let write = |r: io::Result<()>| r.map_err(|error| Failure::Write { at: None, error });
    match *op {
        Op::Read { offset, len } => read(span(offset, len.into())),
        Op::Write { offset, len, .. } | Op::OrWrite { offset, len, .. } => {
            write(span(offset, len.into()).and_then(|()| out(len.into())))
        }
        Op::CompareAndWrite { offset, len, .. } => {
            write(span(offset, len.into()).and_then(|()| out(2 * u64::from(len))))
        }
        Op::Compare { offset, len, block } => {
            let expected = if block == 0 { len } else { block.min(len) };
            read(span(offset, len.into()).and_then(|()| out(expected.into())))
        }
        Op::WriteSame {
            offset,
            len,
            block,
            zeros,
            ..
        } => write(span(offset, len).and_then(|()| match (len, block, zeros) {
            (0, _, _) => Ok(()),
            (_, 0, _) => Err(invalid("a WRITE SAME of blocks of 0 bytes".into())),
            (_, _, true) => Ok(()),
            (_, block, false) => out(block.into()),
        })),
        Op::Unmap { ref ranges, .. } => write(
            ranges
                .iter()
                .try_for_each(|&(offset, len)| span(offset, len)),
        ),
        Op::Fill { offset, len, .. } => write(span(offset, len)),
        Op::Extents { offset, len, .. } => read(span(offset, len)),
        Op::Copy {
            ref source,
            ref destination,
            from,
            to,
            len,
            ..
        } => {
            let len_of = |s: &Source| match s {
                Source::This => capacity,
                Source::Other(plane) => plane.geometry().capacity,
            };
            read(check_span(len_of(source), from, len))?;
            write(check_span(len_of(destination), to, len))
        }
        Op::Flush | Op::Usage | Op::Keep { .. } | Op::Share { .. } | Op::Prefer { .. } => Ok(()),
    }
}

/// The range `op` changes, and whether as an atomic write: what it holds in the range lock
/// while it runs. `None` for operations that change nothing, and for Copy, which holds its
/// destination chunk by chunk. UNMAP holds the span from its first range to its last.
pub(crate) fn changes(op: &Op) -> Option<(u64, u64, bool)> {
    match *op {
        Op::Write {
            offset,
            len,
            atomic,
            ..
        } => Some((offset, len.into(), atomic)),
        Op::OrWrite { offset, len, .. } | Op::CompareAndWrite { offset, len, .. } => {
            Some((offset, len.into(), true))
        }
        Op::WriteSame { offset, len, .. } | Op::Fill { offset, len, .. } => {
            Some((offset, len, false))
        }
        Op::Unmap { ref ranges, .. } => {
            let start = ranges.iter().map(|r| r.0).min()?;
            let end = ranges.iter().map(|r| r.0.saturating_add(r.1)).max()?;
            Some((start, end - start, false))
        }
        Op::Read { .. }
        | Op::Compare { .. }
        | Op::Flush
        | Op::Extents { .. }
        | Op::Usage
        | Op::Copy { .. }
        | Op::Keep { .. }
        | Op::Share { .. }
        | Op::Prefer { .. } => None,
    }
}

/// A checked read into `data_in`, seeing atomic writes whole.
pub(crate) fn read(
    store: &dyn Store,
    ranges: &RangeLock,
    offset: u64,
    len: u32,
    data_in: &mut Vec<u8>,
) -> Done {
    let start = data_in.len();
    let copy = || {
        // A copy the range lock makes again starts over.
        data_in.truncate(start);
        store.read_append(offset, len as usize, data_in)
    };
    match ranges.read(offset, len.into(), copy) {
        Ok(()) => Done::Ok,
        Err(error) => {
            data_in.truncate(start);
            Done::Failed(Failure::Read {
                at: Some(offset),
                error,
            })
        }
    }
}

/// Run a checked `op` other than Read and Copy, its [`changes`] range held by the caller.
pub(crate) fn exec(store: &dyn Store, op: &Op, data_out: &[u8]) -> Done {
    let done = match *op {
        Op::Write {
            offset,
            len,
            durable,
            ..
        } => write(store, offset, &data_out[..len as usize], durable),
        Op::OrWrite {
            offset,
            len,
            durable,
        } => or_write(store, offset, &data_out[..len as usize], durable),
        Op::CompareAndWrite {
            offset,
            len,
            durable,
        } => {
            let (verify, data) = data_out[..2 * len as usize].split_at(len as usize);
            compare_and_write(store, offset, verify, data, durable)
        }
        Op::Compare { offset, len, block } => compare(store, offset, len, block, data_out),
        Op::WriteSame {
            offset,
            len,
            block,
            zeros,
            durable,
        } => write_same(store, offset, len, block, zeros, data_out, durable),
        Op::Unmap {
            ref ranges,
            durable,
        } => unmap(store, ranges, durable),
        Op::Fill {
            offset,
            len,
            ref pattern,
            durable,
        } => fill(store, offset, len, pattern, durable),
        Op::Flush => flush(store),
        Op::Extents { offset, len, max } => extents(store, offset, len, max),
        Op::Usage => Ok(Done::Usage(store.allocated_bytes())),
        Op::Read { .. } | Op::Copy { .. } => Err(Failure::Read {
            at: None,
            error: invalid("reads and copies do not run holding a range".into()),
        }),
        Op::Keep { .. } | Op::Share { .. } | Op::Prefer { .. } => Err(Failure::Write {
            at: None,
            error: invalid("a kept file or gateway state is its plane's, not its store's".into()),
        }),
    };
    done.unwrap_or_else(Done::Failed)
}

/// A failed read of the medium at `at`.
pub(crate) fn read_failed(at: u64) -> impl FnOnce(io::Error) -> Failure {
    move |error| Failure::Read {
        at: Some(at),
        error,
    }
}

/// A failed change of the medium at `at`.
pub(crate) fn write_failed(at: u64) -> impl FnOnce(io::Error) -> Failure {
    move |error| Failure::Write {
        at: Some(at),
        error,
    }
}

/// Store `data` at `offset`, on stable storage before returning when `durable`.
pub(crate) fn store_bytes(
    store: &dyn Store,
    offset: u64,
    data: &[u8],
    durable: bool,
) -> Result<(), Failure> {
    if durable {
        store.write_durable(offset, data)
    } else {
        store.write_at(offset, data)
    }
    .map_err(write_failed(offset))
}

pub(crate) fn flush(store: &dyn Store) -> Result<Done, Failure> {
    store
        .flush()
        .map(|()| Done::Ok)
        .map_err(|error| Failure::Write { at: None, error })
}

fn write(store: &dyn Store, offset: u64, data: &[u8], durable: bool) -> Result<Done, Failure> {
    store_bytes(store, offset, data, durable).map(|()| Done::Ok)
}

/// The medium's current bytes for a read-modify-write, whose range the caller holds.
fn medium(store: &dyn Store, offset: u64, len: usize) -> Result<Vec<u8>, Failure> {
    let mut medium = vec![0u8; len];
    store
        .read_at(offset, &mut medium)
        .map_err(read_failed(offset))?;
    Ok(medium)
}

/// ORWRITE (SBC-4 §5.8): read the bytes, OR the Data-Out into them, write them back.
fn or_write(store: &dyn Store, offset: u64, data: &[u8], durable: bool) -> Result<Done, Failure> {
    let mut bytes = medium(store, offset, data.len())?;
    bytes.iter_mut().zip(data).for_each(|(m, d)| *m |= d);
    write(store, offset, &bytes, durable)
}

/// COMPARE AND WRITE (SBC-4 §5.3): compare the verify instance with the medium and, only if
/// equal, write the write instance; a mismatch writes nothing.
fn compare_and_write(
    store: &dyn Store,
    offset: u64,
    verify: &[u8],
    data: &[u8],
    durable: bool,
) -> Result<Done, Failure> {
    let bytes = medium(store, offset, verify.len())?;
    if let Some(at) = bytes.iter().zip(verify).position(|(a, b)| a != b) {
        return Ok(Done::Miscompare(at as u64));
    }
    write(store, offset, data, durable)
}

/// VERIFY with BYTCHK 01b (`block` 0: the Data-Out against the medium) or 11b (Data-Out's
/// first block against every block), a chunk of the medium at a time (SBC-4 §5.35).
fn compare(
    store: &dyn Store,
    offset: u64,
    len: u32,
    block: u32,
    data_out: &[u8],
) -> Result<Done, Failure> {
    let len = len as usize;
    let block = block as usize;
    // A chunk holds whole blocks of the one-block comparison.
    let step = match block {
        0 => CHUNK,
        b => (CHUNK / b).max(1) * b,
    }
    .min(len);
    let mut buf = vec![0u8; step];
    let mut done = 0;
    while done < len {
        let n = step.min(len - done);
        let at = offset + done as u64;
        let chunk = &mut buf[..n];
        store.read_at(at, chunk).map_err(read_failed(at))?;
        let mismatch = match block {
            0 => chunk
                .iter()
                .zip(&data_out[done..])
                .position(|(a, b)| a != b)
                .map(|i| done + i),
            b => chunk.chunks(b).find_map(|medium| {
                medium
                    .iter()
                    .zip(&data_out[..b.min(len)])
                    .position(|(a, b)| a != b)
            }),
        };
        if let Some(at) = mismatch {
            return Ok(Done::Miscompare(at as u64));
        }
        done += n;
    }
    Ok(Done::Ok)
}

/// WRITE SAME (SBC-4): one block written to every block of the range, in writes of up to
/// 128 KiB; flushed once at the end when durable.
fn write_same(
    store: &dyn Store,
    offset: u64,
    len: u64,
    block: u32,
    zeros: bool,
    data_out: &[u8],
    durable: bool,
) -> Result<Done, Failure> {
    if len == 0 {
        return Ok(Done::Ok);
    }
    let block = block as usize;
    let per_write = (WRITE_SAME_BYTES / block).max(1) as u64;
    let blocks = per_write.min(len.div_ceil(block as u64)) as usize;
    let pattern = if zeros {
        vec![0u8; blocks * block]
    } else {
        data_out[..block].repeat(blocks)
    };
    write_repeated(store, offset, len, &pattern)?;
    if durable {
        flush(store)?;
    }
    Ok(Done::Ok)
}

/// `bytes` written again and again over `len` bytes from `offset` (the last copy cut short).
fn write_repeated(store: &dyn Store, offset: u64, len: u64, bytes: &[u8]) -> Result<(), Failure> {
    let end = offset + len;
    let mut at = offset;
    while at < end {
        let n = (bytes.len() as u64).min(end - at) as usize;
        store_bytes(store, at, &bytes[..n], false)?;
        at += n as u64;
    }
    Ok(())
}

/// Deallocate every range, then flush when durable.
fn unmap(store: &dyn Store, ranges: &[(u64, u64)], durable: bool) -> Result<Done, Failure> {
    for &(offset, len) in ranges.iter().filter(|r| r.1 > 0) {
        store
            .punch_hole(offset, len)
            .map_err(write_failed(offset))?;
    }
    if durable {
        flush(store)?;
    }
    Ok(Done::Ok)
}

/// One step of SANITIZE OVERWRITE or FORMAT UNIT: the pattern repeated over the range, or,
/// all zeros, a deallocation (unmapped bytes read as zeros, and a huge sparse store is not
/// made to allocate every block).
fn fill(
    store: &dyn Store,
    offset: u64,
    len: u64,
    pattern: &[u8],
    durable: bool,
) -> Result<Done, Failure> {
    if pattern.iter().all(|&b| b == 0) {
        store
            .punch_hole(offset, len)
            .map_err(write_failed(offset))?;
    } else {
        let copies = (CHUNK / pattern.len()).max(1);
        let whole = (copies as u64).min(len.div_ceil(pattern.len() as u64)) as usize;
        write_repeated(store, offset, len, &pattern.repeat(whole))?;
    }
    if durable {
        flush(store)?;
    }
    Ok(Done::Ok)
}

/// GET LBA STATUS: the store's runs from `offset`, at most `max` of them.
fn extents(store: &dyn Store, offset: u64, len: u64, max: u32) -> Result<Done, Failure> {
    let end = offset + len;
    let mut runs = Vec::new();
    let mut at = offset;
    while at < end && runs.len() < max as usize {
        let (allocated, n) = store.extent(at, end - at).map_err(read_failed(at))?;
        // A store that reports an empty run would never get on: what is left is unknown,
        // and unknown counts as allocated.
        let (allocated, n) = match n.min(end - at) {
            0 => (true, end - at),
            n => (allocated, n),
        };
        runs.push((allocated, n));
        at += n;
    }
    Ok(Done::Extents(runs))
}
