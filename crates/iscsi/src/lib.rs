//! iSCSI (RFC 7143) for stint: the PDU codec, login negotiation and session state as pure
//! state machines (sans-I/O), a tokio target ([`server`]) and a small initiator
//! ([`initiator`]) built on the same codec.
//!
//! Layout, bottom up:
//! - [`bhs`], [`pdu`], [`digest`], [`text`], [`lun`], [`tmf`], [`name`]: the wire format;
//! - [`negotiation`], [`login`]: operational parameters and the login phase;
//! - [`session`]: the CmdSN window; [`connection`]: the target side of one connection
//!   (bytes and time in, an [`output::Output`] batch out, completions back in), handing
//!   commands to the device through [`ScsiTarget`];
//! - [`portal`]: what connections share, including the router that delivers a task finished
//!   elsewhere to its nexus's connection;
//! - [`server`]: the tokio shell (accept, read, `writev`, timers), with [`throttle`] slowing
//!   repeated failed logins; [`clock`]: device time and the thread that drives each logical
//!   unit with a device queue; [`initiator`]: the client side; [`url`]:
//!   `iscsi://host:port/target/lun`.

pub mod bhs;
pub mod chap;
pub mod clock;
pub mod connection;
pub mod digest;
pub mod initiator;
pub mod login;
pub mod lun;
pub mod name;
pub mod negotiation;
pub mod node;
pub mod output;
pub mod pdu;
pub mod portal;
pub mod server;
pub mod session;
pub mod sessions;
pub mod text;
pub mod throttle;
pub mod tmf;
pub mod url;

pub use connection::Connection;
pub use node::{GatewayPortal, ScsiTarget, TargetNode};
pub use portal::Portal;
