//! The device command queue: CDL descriptors and policies, priority classes, arbitration of
//! submission queues into a device queue of bounded depth, and ordering inside it.
//! A pure state machine: commands in, time in, decisions out.

pub mod order;

pub use drive::{MediaOp, Ns};
