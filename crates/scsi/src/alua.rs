//! Asymmetric logical unit access (SPC-4 §5.16): the device server sets each target port
//! group's access state (implicit ALUA, TPGS bit 4 in standard INQUIRY) and, where gateways
//! share a logical unit, hosts set it too with SET TARGET PORT GROUPS (SPC-4 §6.45; explicit
//! ALUA, TPGS bit 5). Hosts read the states with REPORT TARGET PORT GROUPS (SPC-5 §6.37); they
//! decide what commands run (the table's [`Flags::STANDBY`] and [`Flags::UNAVAILABLE`]).

use crate::sense::{Asc, Sense, SenseKey};
use crate::table::Flags;
use std::fmt;
use std::str::FromStr;

/// ASYMMETRIC ACCESS STATE (SPC-4 table 39 of REPORT TARGET PORT GROUPS parameter data).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AccessState {
    #[default]
    ActiveOptimized = 0x0,
    ActiveNonOptimized = 0x1,
    Standby = 0x2,
    Unavailable = 0x3,
}

impl AccessState {
    pub const ALL: [AccessState; 4] = [
        AccessState::ActiveOptimized,
        AccessState::ActiveNonOptimized,
        AccessState::Standby,
        AccessState::Unavailable,
    ];

    /// The state an ASYMMETRIC ACCESS STATE field names, if it is one of these four
    /// (SPC-4 table 330: the others are LBA dependent, offline, transitioning or reserved).
    pub fn from_code(code: u8) -> Option<AccessState> {
        AccessState::ALL.into_iter().find(|&s| s as u8 == code)
    }

    /// Its bit among the SUPPORTED bits of a target port group descriptor (byte 1: AO_SUP
    /// bit 0, AN_SUP bit 1, S_SUP bit 2, U_SUP bit 3; SPC-5 §6.37).
    pub fn supported_bit(self) -> u8 {
        1 << self as u8
    }

    /// The name the configuration uses, as sg_rtpg prints the state.
    pub fn name(self) -> &'static str {
        match self {
            AccessState::ActiveOptimized => "active/optimized",
            AccessState::ActiveNonOptimized => "active/non-optimized",
            AccessState::Standby => "standby",
            AccessState::Unavailable => "unavailable",
        }
    }

    /// Whether a command with `flags` runs in this state; if not, the NOT READY sense it ends
    /// with (SPC-4 §5.16.2.4.4 and §5.16.2.4.5). Both active states run every command.
    pub fn admits(self, flags: Flags) -> Result<(), Sense> {
        let (needed, asc) = match self {
            AccessState::ActiveOptimized | AccessState::ActiveNonOptimized => return Ok(()),
            AccessState::Standby => (
                Flags::STANDBY,
                Asc::LOGICAL_UNIT_NOT_ACCESSIBLE_TARGET_PORT_IN_STANDBY_STATE,
            ),
            AccessState::Unavailable => (
                Flags::UNAVAILABLE,
                Asc::LOGICAL_UNIT_NOT_ACCESSIBLE_TARGET_PORT_IN_UNAVAILABLE_STATE,
            ),
        };
        if flags.contains(needed) {
            Ok(())
        } else {
            Err(Sense::new(SenseKey::NotReady, asc))
        }
    }
}

impl fmt::Display for AccessState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for AccessState {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        AccessState::ALL
            .into_iter()
            .find(|state| state.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = AccessState::ALL.iter().map(|s| s.name()).collect();
                format!(
                    "unknown ALUA state {s:?}; expected one of {}",
                    names.join(", ")
                )
            })
    }
}

/// One target port group as REPORT TARGET PORT GROUPS describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TargetPortGroup {
    /// TARGET PORT GROUP: the identifier VPD 83h also reports.
    pub id: u16,
    pub state: AccessState,
    /// PREF: the group hosts should prefer (SPC-4 §5.16.2.6).
    pub pref: bool,
    /// The SUPPORTED bits: the states the group may be in ([`AccessState::supported_bit`]).
    pub supported: u8,
    /// RELATIVE TARGET PORT IDENTIFIER of its one target port.
    pub relative_target_port: u16,
    /// What last changed its state.
    pub status: TransitionStatus,
}

/// STATUS CODE of a target port group descriptor (SPC-4 §6.37, table 289): what last changed
/// the group's asymmetric access state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransitionStatus {
    /// 00h: no status available.
    None = 0,
    /// 01h: altered by a SET TARGET PORT GROUPS command.
    Explicit = 1,
    /// 02h: altered by implicit asymmetric logical unit access behaviour.
    Implicit = 2,
}

/// REPORT TARGET PORT GROUPS parameter data (SPC-5 §6.37: the length only header, or with
/// `extended` the extended header with an IMPLICIT TRANSITION TIME of 0; then a target port
/// group descriptor with its target port descriptor per group). Not truncated.
pub fn report_target_port_groups(groups: &[TargetPortGroup], extended: bool, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    if extended {
        // FORMAT TYPE 001b (byte 4 bits 6:4), IMPLICIT TRANSITION TIME 0 s.
        out.extend_from_slice(&[0x10, 0, 0, 0]);
    }
    for g in groups {
        // PREF (bit 7), ASYMMETRIC ACCESS STATE; SUPPORTED bits; TARGET PORT GROUP;
        // reserved; STATUS CODE; vendor specific; TARGET PORT COUNT 1.
        out.extend_from_slice(&[u8::from(g.pref) << 7 | g.state as u8, g.supported]);
        out.extend_from_slice(&g.id.to_be_bytes());
        out.extend_from_slice(&[0, g.status as u8, 0, 1]);
        // Target port descriptor: reserved, RELATIVE TARGET PORT IDENTIFIER.
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(&g.relative_target_port.to_be_bytes());
    }
    // RETURN DATA LENGTH: the bytes after the first four.
    let len = u32::try_from(out.len() - start - 4).unwrap_or(u32::MAX);
    out[start..start + 4].copy_from_slice(&len.to_be_bytes());
}

/// One set target port group descriptor of a SET TARGET PORT GROUPS parameter list (SPC-4
/// table 329).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SetTargetPortGroup {
    /// Where the descriptor starts in the parameter list, for a field pointer: its ASYMMETRIC
    /// ACCESS STATE is at `at` (bits 3:0), its TARGET PORT GROUP at `at + 2`.
    pub at: u16,
    /// The state asked for; `None` for a code none of [`AccessState`] has (SPC-4 table 330:
    /// LBA dependent, offline, transitioning, reserved), which no target port group here takes.
    pub state: Option<AccessState>,
    /// TARGET PORT GROUP OR TARGET PORT.
    pub group: u16,
}

/// The descriptors of a SET TARGET PORT GROUPS parameter list (SPC-4 table 328: 4 reserved
/// bytes, then 4-byte descriptors), each group named at most once. A list that is not a
/// header and whole descriptors is PARAMETER LIST LENGTH ERROR (the CDB's length was checked
/// on decoding: this is Data-Out that ended early); a set reserved bit or a group named twice
/// is INVALID FIELD IN PARAMETER LIST at the field.
pub fn set_target_port_groups(list: &[u8]) -> Result<Vec<SetTargetPortGroup>, Sense> {
    if list.is_empty() {
        return Ok(Vec::new());
    }
    if list.len() < 4 || !list.len().is_multiple_of(4) {
        return Err(Sense::new(
            SenseKey::IllegalRequest,
            Asc::PARAMETER_LIST_LENGTH_ERROR,
        ));
    }
    if let Some(i) = list[..4].iter().position(|&b| b != 0) {
        return Err(Sense::invalid_field_in_parameter_list(i as u16, None));
    }
    let mut out: Vec<SetTargetPortGroup> = Vec::with_capacity(list.len() / 4 - 1);
    for (i, d) in list[4..].chunks_exact(4).enumerate() {
        let at = u16::try_from(4 + 4 * i).unwrap_or(u16::MAX);
        if d[0] & 0xF0 != 0 {
            return Err(Sense::invalid_field_in_parameter_list(at, Some(7)));
        }
        if d[1] != 0 {
            return Err(Sense::invalid_field_in_parameter_list(at + 1, None));
        }
        let group = u16::from_be_bytes([d[2], d[3]]);
        if out.iter().any(|o| o.group == group) {
            return Err(Sense::invalid_field_in_parameter_list(at + 2, None));
        }
        out.push(SetTargetPortGroup {
            at,
            state: AccessState::from_code(d[0]),
            group,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_parse_by_name_and_refuse_others() {
        for state in AccessState::ALL {
            assert_eq!(state.name().parse(), Ok(state));
        }
        let e = "active".parse::<AccessState>().unwrap_err();
        assert!(e.contains("active/optimized, active/non-optimized"), "{e}");
    }

    #[test]
    fn standby_and_unavailable_refuse_what_their_flags_leave_out() {
        use AccessState::*;
        let read = Flags::READY;
        for state in [ActiveOptimized, ActiveNonOptimized] {
            assert_eq!(state.admits(read), Ok(()));
        }
        assert_eq!(
            Standby.admits(read).unwrap_err(),
            Sense::new(SenseKey::NotReady, Asc(0x04, 0x0B))
        );
        assert_eq!(
            Unavailable.admits(read).unwrap_err(),
            Sense::new(SenseKey::NotReady, Asc(0x04, 0x0C))
        );
        assert_eq!(Standby.admits(Flags::STANDBY), Ok(()));
        assert!(Unavailable.admits(Flags::STANDBY).is_err());
        assert_eq!(Unavailable.admits(Flags::UNAVAILABLE), Ok(()));
    }

    #[test]
    fn parameter_data_in_both_formats() {
        let g = TargetPortGroup {
            id: 1,
            state: AccessState::Standby,
            pref: false,
            supported: 0x0F,
            relative_target_port: 1,
            status: TransitionStatus::Implicit,
        };
        let mut out = vec![];
        report_target_port_groups(&[g], false, &mut out);
        assert_eq!(
            out,
            [0, 0, 0, 12, 0x02, 0x0F, 0, 1, 0, 0x02, 0, 1, 0, 0, 0, 1]
        );
        let mut ext = vec![];
        let optimized = TargetPortGroup {
            state: AccessState::ActiveOptimized,
            pref: true,
            supported: AccessState::ActiveOptimized.supported_bit()
                | AccessState::Standby.supported_bit(),
            status: TransitionStatus::Explicit,
            ..g
        };
        report_target_port_groups(&[optimized], true, &mut ext);
        assert_eq!(&ext[..8], &[0, 0, 0, 16, 0x10, 0, 0, 0]);
        assert_eq!(&ext[8..], &[0x80, 0x05, 0, 1, 0, 0x01, 0, 1, 0, 0, 0, 1]);
    }

    #[test]
    fn state_codes_name_the_four_states_and_no_other() {
        for state in AccessState::ALL {
            assert_eq!(AccessState::from_code(state as u8), Some(state));
        }
        for code in 4..=0x0F {
            assert_eq!(AccessState::from_code(code), None, "{code:#x}");
        }
    }

    #[test]
    fn set_target_port_groups_lists_decode_and_point_at_what_is_wrong() {
        let list = [0, 0, 0, 0, 0x00, 0, 0, 2, 0x0E, 0, 0x01, 0x00];
        assert_eq!(
            set_target_port_groups(&list),
            Ok(vec![
                SetTargetPortGroup {
                    at: 4,
                    state: Some(AccessState::ActiveOptimized),
                    group: 2,
                },
                SetTargetPortGroup {
                    at: 8,
                    state: None,
                    group: 0x100,
                },
            ])
        );
        assert_eq!(set_target_port_groups(&[]), Ok(vec![]));
        assert_eq!(set_target_port_groups(&list[..4]), Ok(vec![]));
        let length = Sense::new(SenseKey::IllegalRequest, Asc::PARAMETER_LIST_LENGTH_ERROR);
        for n in [1, 3, 5, 7, 11] {
            assert_eq!(
                set_target_port_groups(&list[..n]),
                Err(length.clone()),
                "{n}"
            );
        }
        let at = |i: usize, v: u8| {
            let mut l = list;
            l[i] = v;
            set_target_port_groups(&l)
                .unwrap_err()
                .field
                .map(|f| (f.byte, f.bit))
        };
        assert_eq!(at(2, 1), Some((2, None)), "reserved header byte");
        assert_eq!(at(8, 0x1E), Some((8, Some(7))), "reserved bits 7:4");
        assert_eq!(at(9, 1), Some((9, None)), "reserved byte 1");
        // The second descriptor names group 2 again.
        assert_eq!(
            set_target_port_groups(&[0, 0, 0, 0, 0, 0, 0, 2, 1, 0, 0, 2]),
            Err(Sense::invalid_field_in_parameter_list(10, None))
        );
    }
}
