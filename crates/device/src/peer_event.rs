//! What one gateway tells the others that export the same logical unit (docs/gateways.md),
//! through its data plane's announcements: events of the one logical unit that every gateway
//! applies to its own nexuses, as one device would.

use crate::TaskManagement;
use scsi::Asc;

/// An event of the logical unit on another gateway.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerEvent {
    /// A LOGICAL UNIT RESET or a target reset there, with the unit attention it raises: the
    /// logical unit is reset here too, every task aborted and every nexus told (SAM-5 §6.3).
    Reset(Asc),
}

impl PeerEvent {
    /// The event a task management function that completed is for the other gateways.
    pub fn of(tmf: TaskManagement) -> Option<PeerEvent> {
        match tmf {
            TaskManagement::LogicalUnitReset => {
                Some(PeerEvent::Reset(Asc::BUS_DEVICE_RESET_FUNCTION_OCCURRED))
            }
            TaskManagement::TargetWarmReset => {
                Some(PeerEvent::Reset(Asc::POWER_ON_RESET_OR_BUS_DEVICE_RESET))
            }
            TaskManagement::TargetColdReset => Some(PeerEvent::Reset(Asc::POWER_ON_OCCURRED)),
            _ => None,
        }
    }

    /// The bytes an announcement carries.
    pub fn encode(self) -> Vec<u8> {
        match self {
            PeerEvent::Reset(Asc(asc, ascq)) => vec![b'R', asc, ascq],
        }
    }

    /// The event `bytes` carry; `None` for bytes no gateway of this version sends.
    pub fn decode(bytes: &[u8]) -> Option<PeerEvent> {
        match bytes {
            [b'R', asc, ascq] => Some(PeerEvent::Reset(Asc(*asc, *ascq))),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resets_round_trip_and_other_functions_are_no_event() {
        for tmf in [
            TaskManagement::LogicalUnitReset,
            TaskManagement::TargetWarmReset,
            TaskManagement::TargetColdReset,
        ] {
            let e = PeerEvent::of(tmf).unwrap();
            assert_eq!(PeerEvent::decode(&e.encode()), Some(e));
        }
        assert_eq!(PeerEvent::of(TaskManagement::AbortTaskSet), None);
        assert_eq!(PeerEvent::decode(b"R\x29"), None);
        assert_eq!(PeerEvent::decode(b""), None);
    }
}
