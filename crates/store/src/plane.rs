//! The data plane's vocabulary: the operations the device core asks for, how they end, and
//! the plane that runs them. (Placeholder of the interface; the implementation lands from the
//! `plane` branch.)

use std::io;
use std::sync::Arc;

/// A data-plane operation on one logical unit's store. Offsets and lengths in bytes, already
/// checked against the capacity by the device.
#[derive(Clone, Debug)]
pub enum Op {
    Read {
        offset: u64,
        len: u32,
    },
    Write {
        offset: u64,
        len: u32,
        durable: bool,
        atomic: bool,
    },
    OrWrite {
        offset: u64,
        len: u32,
        durable: bool,
    },
    CompareAndWrite {
        offset: u64,
        len: u32,
        durable: bool,
    },
    Compare {
        offset: u64,
        len: u32,
        block: u32,
    },
    WriteSame {
        offset: u64,
        len: u64,
        block: u32,
        zeros: bool,
        durable: bool,
    },
    Unmap {
        ranges: Vec<(u64, u64)>,
        durable: bool,
    },
    Fill {
        offset: u64,
        len: u64,
        pattern: Arc<[u8]>,
        durable: bool,
    },
    Flush,
    Extents {
        offset: u64,
        len: u64,
        max: u32,
    },
    Usage,
    Copy {
        source: Source,
        destination: Source,
        from: u64,
        to: u64,
        len: u64,
        durable: bool,
    },
    /// Keep a small state file of the logical unit (saved mode parameters, persistent
    /// reservations under APTPL) so that a crash leaves the old contents or the new ones;
    /// `None` removes it.
    Keep {
        file: KeptFile,
        contents: Option<Vec<u8>>,
    },
}

/// The state files a logical unit keeps beside its data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeptFile {
    ModePages,
    Reservations,
}

#[derive(Clone)]
pub enum Source {
    This,
    Other(Arc<dyn Plane>),
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::This => f.write_str("This"),
            Source::Other(_) => f.write_str("Other"),
        }
    }
}

#[derive(Debug)]
pub enum Done {
    Ok,
    Miscompare(u64),
    Extents(Vec<(bool, u64)>),
    Usage(Option<u64>),
    Failed(Failure),
}

#[derive(Debug)]
pub struct Failure {
    pub error: io::Error,
    /// A Copy's source read failed (else its destination write).
    pub source: bool,
}

pub enum Buffers<'a> {
    Borrowed {
        data_in: &'a mut Vec<u8>,
        data_out: &'a [u8],
    },
    Owned {
        data_in: Vec<u8>,
        data_out: Vec<u8>,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    pub len: u64,
    pub unmap_granularity: u64,
    pub tells_allocation: bool,
}

pub trait Plane: Send + Sync {
    fn is_inline(&self) -> bool;
    fn submit(&self, id: u64, op: Op, buffers: Buffers<'_>) -> Option<Done>;
    fn geometry(&self) -> Geometry;
}
