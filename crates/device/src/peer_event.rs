//! What one gateway tells the others that export the same logical unit (docs/gateways.md),
//! through its data plane's announcements: events of the one logical unit that every gateway
//! applies to its own nexuses, as one device would.

use crate::persistent_reservation::{Effects, Whom};
use crate::TaskManagement;
use scsi::Asc;

/// The states the gateways share, as a gateway read them again from the cluster after the
/// other gateways' announcements (`None`: not read, or the read failed: the state here stays
/// as it was).
#[derive(Clone, Debug, Default)]
pub struct SharedStates {
    pub reservations: Option<store::SharedState>,
    pub mode_pages: Option<store::SharedState>,
}

/// An event of the logical unit on another gateway.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PeerEvent {
    /// A LOGICAL UNIT RESET or a target reset there, with the unit attention it raises: the
    /// logical unit is reset here too, every task aborted and every nexus told (SAM-5 §6.3).
    Reset(Asc),
    /// A PERSISTENT RESERVE OUT there changed the state the gateways share: each reads it
    /// again from the cluster and applies what the service action asks of the nexuses at
    /// its own target port (unit attentions, PREEMPT AND ABORT's aborts).
    Reservations(Effects),
    /// A MODE SELECT there changed the mode parameters the gateways share: each reads them
    /// again from the cluster, makes them current and tells its own nexuses (MODE
    /// PARAMETERS CHANGED, SPC-5 §7.5.2).
    ModeParameters,
    /// A SET TARGET PORT GROUPS there chose the preferred gateway: each reads the choice
    /// from the cluster through its data plane ([`store::Plane::reload_preferred`]) and
    /// tells its own nexuses of the states that changed.
    AccessStates,
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

    /// The bytes an announcement carries. Reset: `R`, ASC, ASCQ. Access states: `A` alone.
    /// Mode parameters: `M` alone. Reservations: `P`, the number of unit attentions (u16),
    /// each as ASC, ASCQ and its nexuses; the number of aborted (u16), each as its nexuses.
    /// Nexuses: the relative target port identifier (u16, 0: every target port) and the
    /// initiator port (u16 length, bytes). Big-endian.
    pub fn encode(&self) -> Vec<u8> {
        match self {
            PeerEvent::Reset(Asc(asc, ascq)) => vec![b'R', *asc, *ascq],
            PeerEvent::AccessStates => vec![b'A'],
            PeerEvent::ModeParameters => vec![b'M'],
            PeerEvent::Reservations(e) => {
                let whom = |w: &Whom, out: &mut Vec<u8>| {
                    out.extend_from_slice(&w.target_port.unwrap_or(0).to_be_bytes());
                    out.extend_from_slice(&(w.initiator_port.len() as u16).to_be_bytes());
                    out.extend_from_slice(w.initiator_port.as_bytes());
                };
                let mut out = vec![b'P'];
                out.extend_from_slice(&(e.unit_attentions.len() as u16).to_be_bytes());
                for (w, Asc(asc, ascq)) in &e.unit_attentions {
                    out.extend_from_slice(&[*asc, *ascq]);
                    whom(w, &mut out);
                }
                out.extend_from_slice(&(e.aborted.len() as u16).to_be_bytes());
                for w in &e.aborted {
                    whom(w, &mut out);
                }
                out
            }
        }
    }

    /// The event `bytes` carry; `None` for bytes no gateway of this version sends.
    pub fn decode(bytes: &[u8]) -> Option<PeerEvent> {
        match bytes {
            [b'R', asc, ascq] => Some(PeerEvent::Reset(Asc(*asc, *ascq))),
            [b'A'] => Some(PeerEvent::AccessStates),
            [b'M'] => Some(PeerEvent::ModeParameters),
            [b'P', rest @ ..] => decode_reservations(rest).map(PeerEvent::Reservations),
            _ => None,
        }
    }
}

fn decode_reservations(mut b: &[u8]) -> Option<Effects> {
    fn take<'a>(b: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
        let (head, rest) = b.split_at_checked(n)?;
        *b = rest;
        Some(head)
    }
    fn u16_(b: &mut &[u8]) -> Option<u16> {
        take(b, 2).map(|x| u16::from_be_bytes([x[0], x[1]]))
    }
    fn whom(b: &mut &[u8]) -> Option<Whom> {
        let target_port = Some(u16_(b)?).filter(|&t| t != 0);
        let n = usize::from(u16_(b)?);
        let initiator_port = String::from_utf8(take(b, n)?.to_vec()).ok()?;
        Some(Whom {
            initiator_port,
            target_port,
        })
    }
    let mut effects = Effects::default();
    for _ in 0..u16_(&mut b)? {
        let a = take(&mut b, 2)?;
        let (asc, ascq) = (a[0], a[1]);
        effects
            .unit_attentions
            .push((whom(&mut b)?, Asc(asc, ascq)));
    }
    for _ in 0..u16_(&mut b)? {
        effects.aborted.push(whom(&mut b)?);
    }
    b.is_empty().then_some(effects)
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
        for e in [PeerEvent::AccessStates, PeerEvent::ModeParameters] {
            assert_eq!(PeerEvent::decode(&e.encode()), Some(e));
        }
        assert_eq!(PeerEvent::decode(b"M\x00"), None);
        assert_eq!(PeerEvent::decode(b"A\x01"), None);
        assert_eq!(PeerEvent::decode(b"R\x29"), None);
        assert_eq!(PeerEvent::decode(b""), None);
    }

    #[test]
    fn reservation_effects_round_trip_with_their_target_ports() {
        let whom = |port: &str, target_port| Whom {
            initiator_port: port.to_owned(),
            target_port,
        };
        let e = PeerEvent::Reservations(Effects {
            unit_attentions: vec![
                (whom("iqn.x:a,i,0x1", Some(2)), Asc::REGISTRATIONS_PREEMPTED),
                (whom("iqn.x:b,i,0x2", None), Asc::RESERVATIONS_RELEASED),
            ],
            aborted: vec![whom("iqn.x:a,i,0x1", Some(2))],
        });
        let bytes = e.encode();
        assert_eq!(PeerEvent::decode(&bytes), Some(e.clone()));
        assert_eq!(
            PeerEvent::decode(&PeerEvent::Reservations(Effects::default()).encode()),
            Some(PeerEvent::Reservations(Effects::default()))
        );
        // Cut anywhere, or with a byte more, it is no event.
        for n in 1..bytes.len() {
            assert_eq!(PeerEvent::decode(&bytes[..n]), None, "cut at {n}");
        }
        assert_eq!(PeerEvent::decode(&[bytes.as_slice(), &[0]].concat()), None);
    }
}
