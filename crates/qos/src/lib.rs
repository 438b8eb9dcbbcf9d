//! The device command queue: CDL descriptors and policies, priority classes, arbitration of
//! submission queues into a device queue of bounded depth, and ordering inside it.
//! A pure state machine: commands in, time in, decisions out.
//!
//! ```text
//! submit ─► class submission queues ─(admission order, arbitration)─► device queue (depth N)
//!        ─(ordering policy)─► drive ─► Completion
//! ```
//! CDL limits (SPC-6 CDL policies) run from submission (inactive, guideline) and from start
//! (active); each expiry applies its policy at that instant.
//!
//! Choices where SPC-6 leaves room, made here:
//! - a command completing exactly at a limit meets it; one started exactly at its inactive
//!   limit meets it;
//! - 1h switches to descriptor n+1 of the pages snapshotted at submission, whose limits count
//!   from the command's own clocks (already exceeded ones expire at once); at n = 7 it acts as
//!   2h; 2h drops every limit of the command;
//! - a fired 0h limit stays the command's (past) deadline, so the CDL-aware ordering serves it
//!   as soon as possible;
//! - Dh/Eh/Fh on a running command abandon its media operation: the unit is free at once;
//! - in front of real storage ([`Queue::await_store`]) a started command ends at the later of
//!   the model's time and the store's completion, and limits expire on the caller's clock;
//! - misses count against the descriptor in force, commands and completions against the
//!   descriptor submitted with;
//! - T2A's perf_vs_duration_guideline budgets reads and writes alike (T2B has none).
//!
//! Driving it (virtual or real time alike): `submit` commands as they arrive, then call
//! `advance(t)` for every `t = next_event()` that has come; completions come out in time order.
//!
//! ```
//! use qos::order::{Candidate, OrderingPolicy};
//! use qos::{Command, MediaOp, Ns, Queue, QueueConfig, Scheduler};
//! use drive::{Drive, MediaOutcome, Service};
//!
//! struct TenMs;
//! impl Drive for TenMs {
//!     fn parallelism(&self) -> usize { 1 }
//!     fn positioning_time(&self, _: Ns, _: &MediaOp) -> Ns { 0 }
//!     fn start(&mut self, now: Ns, _: &MediaOp) -> Service {
//!         Service { done_at: now + 10_000_000, outcome: MediaOutcome::Ok, recovery: 0 }
//!     }
//!     fn flush(&mut self, now: Ns) -> Ns { now }
//! }
//! struct Fifo;
//! impl OrderingPolicy for Fifo {
//!     fn pick(&mut self, _: Ns, _: &[Candidate], _: &dyn Drive) -> usize { 0 }
//! }
//!
//! let mut q = Queue::new(QueueConfig::default(), TenMs, Scheduler::Policy(Box::new(Fifo)))?;
//! let op = MediaOp { lba: 0, blocks: 256, write: false, fua: false };
//! q.submit(0, Command { id: 1, class: 2, op, dld: 0 })?;
//! let mut done = Vec::new();
//! while let Some(t) = q.next_event() {
//!     q.advance(t, &mut done);
//! }
//! assert_eq!((done[0].id, done[0].at), (1, 10_000_000));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

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
pub mod status;

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
pub use queue::{Command, Queue, Scheduler, Started, SubmitError};
pub use stats::{Counters, LimitMisses, OutcomeCounts, Stats};
pub use status::DhCompletion;
