//! The plain-LUN fast path allocates nothing: READ and WRITE through an inline plane over a
//! RAM store, with the caller's buffers reused, make no heap allocation once the store's
//! chunks exist.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use store::{Buffers, Done, InlinePlane, Op, Plane, RamStore};

/// The system allocator, counting the allocations of threads that ask it to.
struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
}

// SAFETY: every call goes to the system allocator unchanged; counting touches no memory the
// allocator hands out.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.with(Cell::get) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn reads_and_writes_through_an_inline_plane_allocate_nothing() {
    let plane = InlinePlane::new(Arc::new(RamStore::new(8 << 20).unwrap()));
    let mut data_in = Vec::with_capacity(64 << 10);
    let data_out = vec![0x5A; 64 << 10];
    let mut round = |offset: u64, atomic: bool| {
        let write = Op::Write {
            offset,
            len: 64 << 10,
            durable: false,
            atomic,
        };
        let buffers = Buffers::Borrowed {
            data_in: &mut data_in,
            data_out: &data_out,
        };
        assert!(matches!(plane.submit(1, write, buffers), Some(Done::Ok)));
        data_in.clear();
        let read = Op::Read {
            offset,
            len: 64 << 10,
        };
        let buffers = Buffers::Borrowed {
            data_in: &mut data_in,
            data_out: &[],
        };
        assert!(matches!(plane.submit(2, read, buffers), Some(Done::Ok)));
        assert_eq!(data_in, data_out);
        data_in.clear();
    };
    // The store's chunks and the range lock's table are made once.
    for i in 0..128 {
        round(i * (64 << 10), i % 2 == 0);
    }
    COUNTING.with(|c| c.set(true));
    for i in 0..1000 {
        round((i % 128) * (64 << 10), i % 3 == 0);
    }
    COUNTING.with(|c| c.set(false));
    assert_eq!(ALLOCATIONS.load(Ordering::Relaxed), 0);
}
