//! The checks made before a command runs, from the command table's flags: their order, each
//! state they read (unit attention, stopped unit, write protection, ALUA), and REPORT TARGET
//! PORT GROUPS.

mod common;

use common::{nexus, ram_target as target_with, run_on as run};
use device::{Completion, LuConfig, Nexus, Target};
use scsi::alua::AccessState;
use scsi::{Asc, Flags, SenseKey, Status, COMMANDS};

fn config() -> LuConfig {
    LuConfig::new("iqn.test:t", 0, 1 << 20)
}

fn sense_of(c: &Completion) -> Option<(SenseKey, Asc)> {
    c.sense.as_ref().map(|s| (s.key, s.asc))
}

const INQUIRY: [u8; 6] = [0x12, 0, 0, 0, 96, 0];
const TEST_UNIT_READY: [u8; 6] = [0; 6];
const REQUEST_SENSE: [u8; 6] = [0x03, 0, 0, 0, 18, 0];
const REPORT_LUNS: [u8; 12] = [0xA0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0];
const READ_10: [u8; 10] = [0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0];
const MODE_SENSE_6: [u8; 6] = [0x1A, 0, 0x3F, 0, 255, 0];
const SYNCHRONIZE_CACHE_10: [u8; 10] = [0x35, 0, 0, 0, 0, 0, 0, 0, 0, 0];
/// REPORT TARGET PORT GROUPS, length only header, 255 bytes.
const RTPG: [u8; 12] = [0xA3, 0x0A, 0, 0, 0, 0, 0, 0, 0, 255, 0, 0];
const RTPG_EXTENDED: [u8; 12] = [0xA3, 0x2A, 0, 0, 0, 0, 0, 0, 0, 255, 0, 0];

#[test]
fn the_flags_name_the_standards_sets() {
    let named = |flag: Flags| -> Vec<&str> {
        COMMANDS
            .iter()
            .filter(|c| c.flags.contains(flag))
            .map(|c| c.name)
            .collect()
    };
    let exempt = ["REQUEST SENSE", "INQUIRY", "REPORT LUNS"];
    assert_eq!(named(Flags::NO_UNIT_ATTENTION), exempt);
    assert_eq!(named(Flags::NO_LUN), exempt);
    assert_eq!(named(Flags::TARGET), ["REPORT LUNS"]);
    assert_eq!(
        named(Flags::UNAVAILABLE),
        [
            "REQUEST SENSE",
            "INQUIRY",
            "REPORT LUNS",
            "REPORT TARGET PORT GROUPS",
            "REPORT SUPPORTED OPERATION CODES",
            "REPORT SUPPORTED TASK MANAGEMENT FUNCTIONS",
            "SET TARGET PORT GROUPS",
        ]
    );
    for c in COMMANDS {
        // Whatever moves logical blocks needs a ready unit; whatever writes them is refused
        // under every reservation type.
        if c.protect_field {
            assert!(c.flags.contains(Flags::READY), "{}", c.name);
        }
        if c.flags.contains(Flags::WRITES) {
            assert!(c.flags.contains(Flags::READY), "{}", c.name);
            assert_eq!(
                c.reservation_access,
                scsi::table::ReservationAccess::Write,
                "{}",
                c.name
            );
        }
        // What runs in the unavailable state runs in standby too (SPC-4 §5.16.2.4).
        if c.flags.contains(Flags::UNAVAILABLE) {
            assert!(c.flags.contains(Flags::STANDBY), "{}", c.name);
        }
    }
}

#[test]
fn unit_attention_exempt_commands_leave_the_condition_pending() {
    let t = target_with(config());
    let n = nexus(1);
    for cdb in [&INQUIRY[..], &REPORT_LUNS[..]] {
        assert_eq!(run(&t, &n, 0, cdb, &[]).0, Completion::GOOD);
    }
    // REQUEST SENSE returns the condition as its data, and so clears it.
    let (c, data) = run(&t, &n, 0, &REQUEST_SENSE, &[]);
    assert_eq!(c, Completion::GOOD);
    assert_eq!((data[2] & 0x0F, data[12], data[13]), (0x06, 0x29, 0x00));
    assert_eq!(run(&t, &n, 0, &TEST_UNIT_READY, &[]).0, Completion::GOOD);
}

#[test]
fn a_reservation_conflict_comes_before_a_unit_attention() {
    let t = target_with(config());
    let (holder, other) = (nexus(1), nexus(2));
    run(&t, &holder, 0, &TEST_UNIT_READY, &[]);
    assert_eq!(
        run(&t, &holder, 0, &[0x16, 0, 0, 0, 0, 0], &[]).0,
        Completion::GOOD,
        "RESERVE(6)"
    );
    // The other nexus still has its power-on unit attention pending (SAM-5 §5.3.2).
    let (c, _) = run(&t, &other, 0, &READ_10, &[]);
    assert_eq!((c.status, c.sense), (Status::ReservationConflict, None));
    // INQUIRY runs under a RESERVE reservation and leaves the condition for later.
    assert_eq!(run(&t, &other, 0, &INQUIRY, &[]).0, Completion::GOOD);
    assert_eq!(
        run(&t, &holder, 0, &[0x17, 0, 0, 0, 0, 0], &[]).0,
        Completion::GOOD,
        "RELEASE(6)"
    );
    let (c, _) = run(&t, &other, 0, &READ_10, &[]);
    assert_eq!(
        sense_of(&c),
        Some((
            SenseKey::UnitAttention,
            Asc::POWER_ON_RESET_OR_BUS_DEVICE_RESET
        ))
    );
}

#[test]
fn a_stopped_unit_refuses_only_the_medium_commands() {
    let t = target_with(config());
    let n = nexus(1);
    run(&t, &n, 0, &TEST_UNIT_READY, &[]);
    assert_eq!(
        run(&t, &n, 0, &[0x1B, 0, 0, 0, 0, 0], &[]).0,
        Completion::GOOD
    );
    let not_ready = Some((
        SenseKey::NotReady,
        Asc::LOGICAL_UNIT_NOT_READY_INITIALIZING_REQUIRED,
    ));
    for cdb in [&TEST_UNIT_READY[..], &READ_10, &SYNCHRONIZE_CACHE_10] {
        assert_eq!(
            sense_of(&run(&t, &n, 0, cdb, &[]).0),
            not_ready,
            "{cdb:02X?}"
        );
    }
    // READ CAPACITY needs the medium present, not the unit started.
    for cdb in [
        &INQUIRY[..],
        &MODE_SENSE_6,
        &[0x25, 0, 0, 0, 0, 0, 0, 0, 0, 0],
    ] {
        assert_eq!(run(&t, &n, 0, cdb, &[]).0, Completion::GOOD, "{cdb:02X?}");
    }
}

#[test]
fn write_protection_refuses_every_command_that_writes_blocks() {
    let mut cfg = config();
    cfg.read_only = true;
    let t = target_with(cfg);
    let n = nexus(1);
    run(&t, &n, 0, &TEST_UNIT_READY, &[]);
    let protected = Some((SenseKey::DataProtect, Asc::WRITE_PROTECTED));
    let block = [0u8; 512];
    // UNMAP with a valid one-descriptor list.
    let mut unmap_list = [0u8; 24];
    unmap_list[1] = 22;
    unmap_list[3] = 16;
    unmap_list[19] = 1;
    let writes: [(&[u8], &[u8]); 5] = [
        (&[0x2A, 0, 0, 0, 0, 0, 0, 0, 1, 0], &block),
        (&[0x41, 0, 0, 0, 0, 0, 0, 0, 1, 0], &block),
        (&[0x8B, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0], &block),
        (&[0x2E, 0, 0, 0, 0, 0, 0, 0, 1, 0], &block),
        (&[0x42, 0, 0, 0, 0, 0, 0, 0, 24, 0], &unmap_list),
    ];
    for (cdb, data) in writes {
        assert_eq!(
            sense_of(&run(&t, &n, 0, cdb, data).0),
            protected,
            "{cdb:02X?}"
        );
    }
    for cdb in [&READ_10[..], &SYNCHRONIZE_CACHE_10] {
        assert_eq!(run(&t, &n, 0, cdb, &[]).0, Completion::GOOD, "{cdb:02X?}");
    }
}

#[test]
fn absent_luns_run_only_the_no_lun_commands() {
    let t = target_with(config());
    let n = nexus(1);
    let (c, data) = run(&t, &n, 5, &INQUIRY, &[]);
    assert_eq!(c, Completion::GOOD);
    assert_eq!(data[0], 0x7F, "PERIPHERAL QUALIFIER 011b");
    assert_eq!(data[5], 0, "no TPGS without a logical unit");
    assert_eq!(run(&t, &n, 5, &REPORT_LUNS, &[]).0, Completion::GOOD);
    assert_eq!(run(&t, &n, 5, &REQUEST_SENSE, &[]).0, Completion::GOOD);
    for cdb in [&TEST_UNIT_READY[..], &READ_10, &RTPG] {
        assert_eq!(
            sense_of(&run(&t, &n, 5, cdb, &[]).0),
            Some((SenseKey::IllegalRequest, Asc::LOGICAL_UNIT_NOT_SUPPORTED))
        );
    }
    // A NO_LUN command with a bad CDB gets that CDB's sense.
    let (c, _) = run(&t, &n, 5, &[0x12, 0x02, 0, 0, 96, 0], &[]);
    assert_eq!(
        sense_of(&c),
        Some((SenseKey::IllegalRequest, Asc::INVALID_FIELD_IN_CDB))
    );
}

fn alua_target(state: AccessState) -> (Target, Nexus) {
    let mut cfg = config();
    cfg.alua_state = state;
    let t = target_with(cfg);
    let n = nexus(1);
    let (c, _) = run(&t, &n, 0, &RTPG, &[]);
    assert_eq!(
        sense_of(&c),
        Some((
            SenseKey::UnitAttention,
            Asc::POWER_ON_RESET_OR_BUS_DEVICE_RESET
        ))
    );
    (t, n)
}

#[test]
fn inquiry_and_vpd_83h_announce_implicit_alua() {
    let (t, n) = alua_target(AccessState::ActiveOptimized);
    let (_, data) = run(&t, &n, 0, &INQUIRY, &[]);
    assert_eq!(data[5] & 0x30, 0x10, "TPGS 01b");
    let (c, page) = run(&t, &n, 0, &[0x12, 1, 0x83, 0, 255, 0], &[]);
    assert_eq!(c, Completion::GOOD);
    // Walk the designation descriptors: (ASSOCIATION, DESIGNATOR TYPE) → designator.
    let mut at = 4;
    let mut found = vec![];
    while at + 4 <= page.len() {
        let len = usize::from(page[at + 3]);
        found.push((
            (page[at + 1] >> 4) & 3,
            page[at + 1] & 0x0F,
            page[at + 4..at + 4 + len].to_vec(),
        ));
        at += 4 + len;
    }
    assert!(
        found.contains(&(1, 4, vec![0, 0, 0, 1])),
        "relative target port 1"
    );
    assert!(
        found.contains(&(1, 5, vec![0, 0, 0, 1])),
        "target port group 1"
    );
}

#[test]
fn report_target_port_groups_gives_the_configured_state() {
    for state in AccessState::ALL {
        let (t, n) = alua_target(state);
        let (c, data) = run(&t, &n, 0, &RTPG, &[]);
        assert_eq!(c, Completion::GOOD, "{state}");
        assert_eq!(&data[..4], &[0, 0, 0, 12]);
        assert_eq!(data[4] & 0x0F, state as u8, "{state}");
        assert_eq!(&data[6..8], &[0, 1], "TARGET PORT GROUP 1");
        assert_eq!(data[11], 1, "one target port");
        assert_eq!(&data[14..16], &[0, 1], "RELATIVE TARGET PORT IDENTIFIER 1");
        let (_, ext) = run(&t, &n, 0, &RTPG_EXTENDED, &[]);
        assert_eq!(ext[4], 0x10, "FORMAT TYPE 001b");
        assert_eq!(&ext[8..], &data[4..]);
        // Truncated to the allocation length.
        let mut short = RTPG;
        short[9] = 6;
        assert_eq!(run(&t, &n, 0, &short, &[]).1.len(), 6);
    }
}

/// Group id and ASYMMETRIC ACCESS STATE of each descriptor of REPORT TARGET PORT GROUPS
/// parameter data (length only header), with its relative target port.
fn groups_of(data: &[u8]) -> Vec<(u16, u8, u16)> {
    data[4..]
        .chunks(12)
        .map(|d| {
            (
                u16::from_be_bytes([d[2], d[3]]),
                d[0] & 0x0F,
                u16::from_be_bytes([d[10], d[11]]),
            )
        })
        .collect()
}

#[test]
fn gateways_report_every_group_with_the_preferred_optimized_and_announce_a_change() {
    let mut cfg = config();
    cfg.port_groups = device::PortGroups {
        own: 2,
        all: vec![3, 2],
        explicit: false,
    };
    cfg.alua_state = AccessState::ActiveNonOptimized;
    let t = target_with(cfg);
    let n = nexus(1);
    run(&t, &n, 0, &TEST_UNIT_READY, &[]);
    // While none is known alive, the first listed is the one to use.
    let (c, data) = run(&t, &n, 0, &RTPG, &[]);
    assert_eq!(c, Completion::GOOD);
    assert_eq!(groups_of(&data), [(3, 0, 3), (2, 1, 2)]);
    // VPD 83h names this gateway's group and port.
    let (_, page) = run(&t, &n, 0, &[0x12, 1, 0x83, 0, 255, 0], &[]);
    // Designation descriptors: ASSOCIATION 01b (target port), DESIGNATOR TYPE 4 (relative
    // target port) and 5 (target port group), each four bytes.
    for kind in [0x14, 0x15] {
        assert!(
            page.windows(8)
                .any(|w| w[1] & 0x3F == kind && w[2..] == [0, 4, 0, 0, 0, 2]),
            "designator {kind:#x} names 2"
        );
    }
    let unit = &t.units()[0].1;
    unit.with(|core| core.set_preferred_gateway(Some(2)));
    let (c, _) = run(&t, &n, 0, &TEST_UNIT_READY, &[]);
    assert_eq!(
        sense_of(&c),
        Some((
            SenseKey::UnitAttention,
            Asc::ASYMMETRIC_ACCESS_STATE_CHANGED
        ))
    );
    let (_, data) = run(&t, &n, 0, &RTPG, &[]);
    assert_eq!(groups_of(&data), [(3, 1, 3), (2, 0, 2)]);
    // The same holder again changes nothing: no condition.
    unit.with(|core| core.set_preferred_gateway(Some(2)));
    assert_eq!(run(&t, &n, 0, &TEST_UNIT_READY, &[]).0, Completion::GOOD);
    // Both active states run medium commands.
    unit.with(|core| core.set_preferred_gateway(Some(3)));
    run(&t, &n, 0, &TEST_UNIT_READY, &[]);
    assert_eq!(run(&t, &n, 0, &READ_10, &[]).0, Completion::GOOD);
}

#[test]
fn gateways_in_standby_refuse_the_medium_until_preferred() {
    let mut cfg = config();
    cfg.port_groups = device::PortGroups {
        own: 2,
        all: vec![1, 2],
        explicit: false,
    };
    cfg.alua_state = AccessState::Standby;
    let t = target_with(cfg);
    let n = nexus(1);
    run(&t, &n, 0, &TEST_UNIT_READY, &[]);
    let standby = Some((
        SenseKey::NotReady,
        Asc::LOGICAL_UNIT_NOT_ACCESSIBLE_TARGET_PORT_IN_STANDBY_STATE,
    ));
    assert_eq!(sense_of(&run(&t, &n, 0, &READ_10, &[]).0), standby);
    let (c, data) = run(&t, &n, 0, &RTPG, &[]);
    assert_eq!(c, Completion::GOOD);
    assert_eq!(groups_of(&data), [(1, 0, 1), (2, 2, 2)]);
    // Gateway 1 died: this one is preferred, and says so before it serves.
    t.units()[0]
        .1
        .with(|core| core.set_preferred_gateway(Some(2)));
    assert_eq!(
        sense_of(&run(&t, &n, 0, &READ_10, &[]).0),
        Some((
            SenseKey::UnitAttention,
            Asc::ASYMMETRIC_ACCESS_STATE_CHANGED
        ))
    );
    assert_eq!(run(&t, &n, 0, &READ_10, &[]).0, Completion::GOOD);
    let (_, data) = run(&t, &n, 0, &RTPG, &[]);
    assert_eq!(groups_of(&data), [(1, 2, 1), (2, 0, 2)]);
}

#[test]
fn standby_runs_the_management_commands_and_refuses_the_medium() {
    let (t, n) = alua_target(AccessState::Standby);
    let standby = Some((
        SenseKey::NotReady,
        Asc::LOGICAL_UNIT_NOT_ACCESSIBLE_TARGET_PORT_IN_STANDBY_STATE,
    ));
    for cdb in [&TEST_UNIT_READY[..], &READ_10, &SYNCHRONIZE_CACHE_10] {
        assert_eq!(sense_of(&run(&t, &n, 0, cdb, &[]).0), standby, "{cdb:02X?}");
    }
    let pr_in_read_keys = [0x5E, 0, 0, 0, 0, 0, 0, 0, 8, 0];
    for cdb in [
        &INQUIRY[..],
        &REPORT_LUNS,
        &MODE_SENSE_6,
        &RTPG,
        &pr_in_read_keys,
    ] {
        assert_eq!(run(&t, &n, 0, cdb, &[]).0, Completion::GOOD, "{cdb:02X?}");
    }
}

#[test]
fn unavailable_runs_only_what_reports_the_state() {
    let (t, n) = alua_target(AccessState::Unavailable);
    let unavailable = Some((
        SenseKey::NotReady,
        Asc::LOGICAL_UNIT_NOT_ACCESSIBLE_TARGET_PORT_IN_UNAVAILABLE_STATE,
    ));
    for cdb in [&TEST_UNIT_READY[..], &READ_10, &MODE_SENSE_6] {
        assert_eq!(
            sense_of(&run(&t, &n, 0, cdb, &[]).0),
            unavailable,
            "{cdb:02X?}"
        );
    }
    for cdb in [&INQUIRY[..], &REPORT_LUNS, &RTPG, &REQUEST_SENSE] {
        assert_eq!(run(&t, &n, 0, cdb, &[]).0, Completion::GOOD, "{cdb:02X?}");
    }
}

#[test]
fn active_non_optimized_runs_everything() {
    let (t, n) = alua_target(AccessState::ActiveNonOptimized);
    for cdb in [&TEST_UNIT_READY[..], &READ_10, &MODE_SENSE_6] {
        assert_eq!(run(&t, &n, 0, cdb, &[]).0, Completion::GOOD, "{cdb:02X?}");
    }
}
