//! The simulator's plane: it moves no data. Every operation completes at once with success,
//! touching no buffer; the drive model, not a store, decides how long it took.

use crate::plane::{Buffers, Done, Geometry, Op, Plane};
use std::io;

pub struct NullPlane {
    capacity: u64,
}

impl NullPlane {
    /// A plane for a logical unit of `capacity` bytes.
    pub fn new(capacity: u64) -> Self {
        NullPlane { capacity }
    }
}

impl Plane for NullPlane {
    fn is_inline(&self) -> bool {
        true
    }

    /// GET LBA STATUS finds the whole range allocated; thin provisioning's usage is unknown.
    fn submit(&self, _id: u64, op: Op, _buffers: Buffers<'_>) -> Option<Done> {
        Some(match op {
            Op::Extents { len, .. } => Done::Extents(if len == 0 {
                Vec::new()
            } else {
                vec![(true, len)]
            }),
            Op::Usage => Done::Usage(None),
            _ => Done::Ok,
        })
    }

    fn geometry(&self) -> Geometry {
        Geometry {
            capacity: self.capacity,
            unmap_granularity: 0,
            tells_allocation: false,
        }
    }

    fn read_now(&self, _offset: u64, _buf: &mut [u8]) -> io::Result<()> {
        Ok(())
    }

    fn write_now(&self, _offset: u64, _buf: &[u8], _durable: bool) -> io::Result<()> {
        Ok(())
    }
}
