//! The device command queue: CDL descriptors and policies, priority classes, arbitration of
//! submission queues into a device queue of bounded depth, and ordering inside it.
//! A pure state machine: commands in, time in, decisions out.
//!
//! ```text
//! submit ─► class submission queues ─(admission order, arbitration)─► device queue (depth N)
//!        ─(ordering policy)─► drive ─► Completion
//! ```
//! CDL limits (spec/cdl.md §4) run from submission (inactive, guideline) and from start
//! (active); each expiry applies its policy at that instant.

pub mod admission;
pub mod arbitration;
pub mod cdl;
pub mod class;
pub mod completion;
pub mod config;
pub mod deadline;
pub mod order;
pub mod queue;
pub mod stats;

pub use admission::Admission;
pub use arbitration::Arbitration;
pub use cdl::{
    CdlDescriptor, CdlError, CdlPage, CdlPageKind, CdlPages, LimitKind, PerfVsDurationGuideline,
    Policy, T2CdlUnits,
};
pub use class::{Class, CLASSES};
pub use completion::{Completion, Misses, Outcome};
pub use config::{ConfigError, QueueConfig, MAX_DEPTH};
pub use deadline::{DeadlineAware, DeadlineAwareConfig};
pub use drive::{MediaOp, Ns};
pub use queue::{Command, Queue, Scheduler, SubmitError};
pub use stats::{Counters, LimitMisses, OutcomeCounts, Stats};
