//! iSCSI (RFC 7143) for stint: the PDU codec, login negotiation and session state as pure
//! state machines (sans-I/O), a tokio target ([`server`]) and a small initiator
//! ([`initiator`]) built on the same codec.

pub mod bhs;
pub mod connection;
pub mod digest;
pub mod initiator;
pub mod login;
pub mod lun;
pub mod negotiation;
pub mod node;
pub mod output;
pub mod pdu;
pub mod portal;
pub mod server;
pub mod session;
pub mod text;
pub mod tmf;
pub mod url;

pub use connection::Connection;
pub use node::{ScsiTarget, TargetNode};
pub use portal::Portal;
