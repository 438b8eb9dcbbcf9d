//! A store resized while served (an RBD image's `rbd resize`): the unit takes the new capacity
//! before the next command, and every nexus gets CAPACITY DATA HAS CHANGED (SBC-4 §4.6); a unit
//! whose drive model sets its capacity keeps it.

mod common;
use common::*;
use device::{Completion, LuConfig, Target, Unit};
use scsi::{Asc, SenseKey};
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use store::{Buffers, Done, Geometry, InlinePlane, KeptFile, Op, Plane, RamStore};

/// An inline RAM plane that reports, once, the size set in `resize_to`.
struct Resizable {
    inner: Arc<InlinePlane>,
    resize_to: AtomicU64,
}

impl Plane for Resizable {
    fn is_inline(&self) -> bool {
        true
    }
    fn submit(&self, id: u64, op: Op, buffers: Buffers<'_>) -> Option<Done> {
        self.inner.submit(id, op, buffers)
    }
    fn geometry(&self) -> Geometry {
        self.inner.geometry()
    }
    fn news(&self) -> bool {
        self.resize_to.load(Ordering::Relaxed) > 0
    }
    fn resized(&self) -> Option<u64> {
        Some(self.resize_to.swap(0, Ordering::Relaxed)).filter(|&b| b > 0)
    }
    fn read_now(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.inner.read_now(offset, buf)
    }
    fn write_now(&self, offset: u64, buf: &[u8], durable: bool) -> io::Result<()> {
        self.inner.write_now(offset, buf, durable)
    }
    fn load(&self, file: KeptFile) -> io::Result<Option<Vec<u8>>> {
        self.inner.load(file)
    }
}

const BLOCKS: u64 = 2048;

fn target(fixed: bool) -> (Target, Arc<Resizable>) {
    let config = LuConfig::new("iqn.test:t", 0, BLOCKS * 512);
    let store = Arc::new(RamStore::new(config.size_bytes).unwrap());
    let plane = Arc::new(Resizable {
        inner: plane_over(&config, store),
        resize_to: AtomicU64::new(0),
    });
    let mut unit = Unit::build(config, plane.clone(), None).unwrap();
    if fixed {
        unit = unit.fixed_size();
    }
    (Target::new(vec![(0, Arc::new(unit))]), plane)
}

/// READ CAPACITY(10)'s capacity in blocks.
fn capacity(t: &Target, n: &device::Nexus) -> u64 {
    let (c, data) = run(t, n, &[0x25, 0, 0, 0, 0, 0, 0, 0, 0, 0], &[]);
    assert_eq!(c, Completion::GOOD);
    u64::from(u32::from_be_bytes(data[..4].try_into().unwrap())) + 1
}

#[test]
fn a_resized_store_changes_the_capacity_with_a_unit_attention_for_every_nexus() {
    let (t, plane) = target(false);
    let (a, b) = (ready(&t, 1), ready(&t, 2));
    assert_eq!(capacity(&t, &a), BLOCKS);
    // A part-block is not addressable.
    plane
        .resize_to
        .store(BLOCKS / 2 * 512 + 100, Ordering::Relaxed);
    for n in [&a, &b] {
        let (c, _) = run(&t, n, &[0; 6], &[]);
        assert_eq!(
            sense_of(&c),
            (SenseKey::UnitAttention, Asc::CAPACITY_DATA_HAS_CHANGED)
        );
        assert_eq!(capacity(&t, n), BLOCKS / 2);
    }
    let (c, _) = run(&t, &a, &read16(BLOCKS / 2, 1), &[]);
    assert_eq!(
        sense_of(&c),
        (SenseKey::IllegalRequest, Asc::LBA_OUT_OF_RANGE)
    );
    let (c, _) = run(&t, &b, &read16(BLOCKS / 2 - 1, 1), &[]);
    assert_eq!(c, Completion::GOOD);
    // The same size again changes nothing.
    plane.resize_to.store(BLOCKS / 2 * 512, Ordering::Relaxed);
    assert_eq!(run(&t, &a, &[0; 6], &[]).0, Completion::GOOD);
}

#[test]
fn a_unit_of_fixed_size_keeps_its_capacity() {
    let (t, plane) = target(true);
    let a = ready(&t, 1);
    plane.resize_to.store(BLOCKS / 2 * 512, Ordering::Relaxed);
    assert_eq!(run(&t, &a, &[0; 6], &[]).0, Completion::GOOD);
    assert_eq!(capacity(&t, &a), BLOCKS);
}
