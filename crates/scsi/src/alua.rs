//! Asymmetric logical unit access (SPC-4 §5.16), implicit only: the device server alone sets
//! each target port group's access state (TPGS = 01b in standard INQUIRY), which hosts read with
//! REPORT TARGET PORT GROUPS (SPC-5 §6.37) and which decides what commands run (the table's
//! [`Flags::STANDBY`] and [`Flags::UNAVAILABLE`]).

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
    /// RELATIVE TARGET PORT IDENTIFIER of its one target port.
    pub relative_target_port: u16,
}

/// SUPPORTED bits of a target port group descriptor (byte 1): U_SUP, S_SUP, AN_SUP, AO_SUP,
/// the states a configuration may give a group.
const SUPPORTED_STATES: u8 = 0x08 | 0x04 | 0x02 | 0x01;

/// STATUS CODE 02h: the state was changed by the device server (an implicit transition, here
/// the configuration's); 00h when the group is in its default state.
const STATUS_IMPLICIT_TRANSITION: u8 = 0x02;

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
        let status = if g.state == AccessState::default() {
            0
        } else {
            STATUS_IMPLICIT_TRANSITION
        };
        // PREF 0, ASYMMETRIC ACCESS STATE; SUPPORTED bits; TARGET PORT GROUP; reserved;
        // STATUS CODE; vendor specific; TARGET PORT COUNT 1.
        out.extend_from_slice(&[g.state as u8, SUPPORTED_STATES]);
        out.extend_from_slice(&g.id.to_be_bytes());
        out.extend_from_slice(&[0, status, 0, 1]);
        // Target port descriptor: reserved, RELATIVE TARGET PORT IDENTIFIER.
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(&g.relative_target_port.to_be_bytes());
    }
    // RETURN DATA LENGTH: the bytes after the first four.
    let len = u32::try_from(out.len() - start - 4).unwrap_or(u32::MAX);
    out[start..start + 4].copy_from_slice(&len.to_be_bytes());
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
            relative_target_port: 1,
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
            ..g
        };
        report_target_port_groups(&[optimized], true, &mut ext);
        assert_eq!(&ext[..8], &[0, 0, 0, 16, 0x10, 0, 0, 0]);
        assert_eq!(&ext[8..], &[0x00, 0x0F, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1]);
    }
}
