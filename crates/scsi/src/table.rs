//! The command table, the single source of truth (modelled on FreeBSD CTL's ctl_cmd_table.c):
//! every supported operation code / service action with its CDB usage mask, data direction,
//! CDL page, the [`Flags`] the prechecks read, and decoder. Decoding, REPORT SUPPORTED
//! OPERATION CODES, reserved-bit checks and the prechecks of the logical unit all read it.

use crate::cdb::{be16, u8_at};
use crate::cdl::CdlPageKind::{self, T2A, T2B};
use crate::command::Command;
use crate::decode as d;
use crate::encode::{self as e, Encoded};
use crate::sense::Sense;
use crate::third_party_copy as tpc;
use ReservationAccess::{Allowed, OwnRules, Read, Unrestricted, Write};

/// Direction of the data phase (SAM-5 §5.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    None,
    In,
    Out,
}

/// How a command fares when another I_T nexus holds a reservation on its logical unit: the
/// rows of SPC-4 table 65 (SPC commands allowed in the presence of various reservations) and
/// SBC-4 table 13 (the block commands), and for RESERVE (6)/(10) reservations SPC-2 §5.5.1.
/// The holder, and under a registrants only or all registrants type every registered I_T
/// nexus, may always run a command; these say what everyone else may.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReservationAccess {
    /// Allowed under every reservation, RESERVE (6)/(10) ones included: INQUIRY, REPORT LUNS,
    /// REQUEST SENSE.
    Unrestricted,
    /// Allowed under every persistent reservation type; conflicts with a RESERVE (6)/(10)
    /// reservation.
    Allowed,
    /// Allowed through the Write Exclusive types, conflicts under the Exclusive Access types
    /// (reads, and what ALLOW COMMANDS 011b lets through Write Exclusive: MODE SENSE, REPORT
    /// SUPPORTED OPERATION CODES and TASK MANAGEMENT FUNCTIONS, READ DEFECT DATA).
    Read,
    /// Conflicts under every type: writes and whatever changes the logical unit.
    Write,
    /// As [`ReservationAccess::Allowed`] when `cdb[byte] & mask == value`, else as
    /// [`ReservationAccess::Write`]: the rows of SBC-4 table 13 that depend on a CDB field.
    AllowedWhen { byte: u8, mask: u8, value: u8 },
    /// The command's own rules decide: PERSISTENT RESERVE OUT (SPC-4 table 66 is its
    /// reservation key checks), RESERVE and RELEASE (SPC-2 with the exceptions of SPC-4
    /// §5.13.3).
    OwnRules,
}

bitflags::bitflags! {
    /// Where a command may run, for the checks made before it does (SAM-5 §5.3.2 status
    /// precedence, then the logical unit's state). An entry that names none gets
    /// [`Flags::derived`].
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Flags: u16 {
        /// Runs on a LUN without a logical unit (SPC-5 §4.4.3: INQUIRY, REQUEST SENSE,
        /// REPORT LUNS).
        const NO_LUN = 1 << 0;
        /// Answered by the target for whichever LUN it names (REPORT LUNS, SPC-5 §6.33).
        const TARGET = 1 << 1;
        /// Neither reports nor clears a pending unit attention (SAM-5 §5.14: INQUIRY, REPORT
        /// LUNS, REQUEST SENSE).
        const NO_UNIT_ATTENTION = 1 << 2;
        /// Needs the medium present: NOT READY, MEDIUM NOT PRESENT once a removable medium
        /// is ejected (SBC-4 §4.20).
        const MEDIUM = 1 << 3;
        /// Accesses the medium: NOT READY, INITIALIZING COMMAND REQUIRED on a stopped unit
        /// (SBC-4 §4.20). Includes [`Flags::MEDIUM`].
        const READY = 1 << 4 | 1 << 3;
        /// Changes the medium: DATA PROTECT, WRITE PROTECTED on a write-protected unit
        /// (SBC-4 §4.13).
        const WRITES = 1 << 5;
        /// Runs while the target port group is in the standby state (SPC-4 §5.16.2.4.4);
        /// else NOT READY, LOGICAL UNIT NOT ACCESSIBLE, TARGET PORT IN STANDBY STATE.
        const STANDBY = 1 << 6;
        /// Runs while the target port group is in the unavailable state (SPC-4
        /// §5.16.2.4.5); else NOT READY, ... TARGET PORT IN UNAVAILABLE STATE.
        const UNAVAILABLE = 1 << 7;
        /// Runs while a SANITIZE is in progress; else NOT READY, SANITIZE IN PROGRESS (SBC-4
        /// sanitize operations: only commands that report on the device, not its medium).
        const DURING_SANITIZE = 1 << 8;
    }
}

impl Flags {
    /// The flags of an entry that names none, from the fields every entry has: the
    /// [`ReservationAccess::Unrestricted`] commands (INQUIRY, REQUEST SENSE, REPORT LUNS) run
    /// anywhere and leave unit attentions alone; a command with a protection field moves
    /// logical blocks (SBC-4 §4.22), so it accesses the medium, and changes it when it
    /// conflicts with reservations as a write. Anything else runs whatever the unit's state
    /// and only in the active ALUA states.
    pub const fn derived(access: ReservationAccess, protect_field: bool) -> Flags {
        match access {
            ReservationAccess::Unrestricted => Flags::NO_LUN
                .union(Flags::NO_UNIT_ATTENTION)
                .union(Flags::STANDBY)
                .union(Flags::UNAVAILABLE)
                .union(Flags::DURING_SANITIZE),
            ReservationAccess::Write if protect_field => Flags::READY.union(Flags::WRITES),
            _ if protect_field => Flags::READY,
            _ => Flags::empty(),
        }
    }
}

/// START STOP UNIT with START = 1 and POWER CONDITION = 0h (byte 4).
const START_STOP_UNIT: ReservationAccess = ReservationAccess::AllowedWhen {
    byte: 4,
    mask: 0xF1,
    value: 0x01,
};

/// PREVENT ALLOW MEDIUM REMOVAL with PREVENT = 00b (byte 4 bits 1:0).
const PREVENT_ALLOW: ReservationAccess = ReservationAccess::AllowedWhen {
    byte: 4,
    mask: 0x03,
    value: 0,
};

/// Operation code of the variable length CDBs (SPC-5 variable length CDB format): CONTROL in
/// byte 1, ADDITIONAL CDB LENGTH in byte 7, SERVICE ACTION in bytes 8–9.
pub const VARIABLE_LENGTH_CDB: u8 = 0x7F;

/// One supported command.
#[derive(Clone, Copy)]
pub struct CommandInfo {
    pub name: &'static str,
    /// CDB USAGE DATA (SPC-5 table 258): byte 0 is the opcode and the service action sits
    /// where the CDB carries it (byte 1, or bytes 8–9 of a variable length CDB, whose byte 7
    /// holds the ADDITIONAL CDB LENGTH); every other set bit is a bit the device evaluates.
    /// Its length is the CDB length.
    pub usage: &'static [u8],
    pub service_action: Option<u16>,
    pub direction: Direction,
    /// What it may do under a reservation another I_T nexus holds.
    pub reservation_access: ReservationAccess,
    /// Where it may run: without a logical unit, under a unit attention, on a stopped or
    /// write-protected unit, in each ALUA state.
    pub flags: Flags,
    /// The CDL mode page whose descriptors the command's DLD field selects (SBC-5 READ(16),
    /// WRITE(16), READ(32), WRITE(32)); reported as CDLP only by a logical unit with CDL.
    pub cdl_page: Option<CdlPageKind>,
    /// Supported only by a thin-provisioned logical unit (LBPU, SBC-4 §4.7.3.2): UNMAP.
    pub thin_provisioning: bool,
    /// Supported only by a logical unit with explicit ALUA (TPGS 11b, SPC-4 §5.16.2.8): SET
    /// TARGET PORT GROUPS.
    pub explicit_alua: bool,
    /// RDPROTECT/WRPROTECT/VRPROTECT (bits 7:5 of [`CommandInfo::protect_byte`]) must be 0
    /// without protection information (SBC-4 §4.22.2, PROTECT = 0 in standard INQUIRY data).
    pub protect_field: bool,
    /// Nominal and recommended command timeouts in seconds (SPC-5 table 260).
    pub nominal_timeout: u32,
    pub recommended_timeout: u32,
    pub decode: fn(&[u8]) -> Result<Command, Sense>,
    /// The inverse of `decode`: writes a command's fields into a CDB that holds the
    /// operation code and service action ([`Command::emit`]).
    pub(crate) encode: fn(&Command, &mut [u8]) -> Encoded,
}

impl CommandInfo {
    pub fn opcode(&self) -> u8 {
        self.usage[0]
    }

    pub fn cdb_length(&self) -> usize {
        self.usage.len()
    }

    fn variable_length(&self) -> bool {
        self.opcode() == VARIABLE_LENGTH_CDB
    }

    /// Index of the CONTROL byte: the last byte, or byte 1 of a variable length CDB.
    pub fn control_byte(&self) -> usize {
        if self.variable_length() {
            1
        } else {
            self.cdb_length() - 1
        }
    }

    /// Index of the byte whose bits 7:5 hold RDPROTECT/WRPROTECT/VRPROTECT: byte 1, or byte 10
    /// of READ(32)/WRITE(32) (SBC-4 READ(32) and WRITE(32) tables).
    pub fn protect_byte(&self) -> usize {
        if self.variable_length() {
            10
        } else {
            1
        }
    }

    /// How the command in `cdb` fares under a reservation another I_T nexus holds, with the
    /// CDB-dependent rows resolved.
    pub fn reservation_access(&self, cdb: &[u8]) -> ReservationAccess {
        match self.reservation_access {
            ReservationAccess::AllowedWhen { byte, mask, value } => {
                if u8_at(cdb, usize::from(byte)) & mask == value {
                    ReservationAccess::Allowed
                } else {
                    ReservationAccess::Write
                }
            }
            access => access,
        }
    }

    /// Whether it moves logical blocks to or from the medium, and which way: READ, and the
    /// writes (WRITE, WRITE AND VERIFY, WRITE SAME, ORWRITE, COMPARE AND WRITE). Exactly the
    /// commands with a protection field (SBC-4 §4.22) that carry data that way; VERIFY only
    /// compares.
    pub fn moves_blocks(&self) -> Option<Direction> {
        match self.direction {
            Direction::In if self.protect_field => Some(Direction::In),
            Direction::Out if self.protect_field && self.flags.contains(Flags::WRITES) => {
                Some(Direction::Out)
            }
            _ => None,
        }
    }

    /// The bits of `byte` that hold values decoding checks on its own: the SERVICE ACTION and,
    /// in a variable length CDB, the ADDITIONAL CDB LENGTH.
    fn fixed_bits(&self, byte: usize) -> u8 {
        match ServiceActionField::of(self.opcode()) {
            Some(ServiceActionField::Byte1) if byte == 1 => 0x1F,
            Some(ServiceActionField::Bytes8To9) if (7..=9).contains(&byte) => 0xFF,
            _ => 0,
        }
    }
}

/// Where an operation code keeps its service action (SPC-5 §4.2.5.1 for fixed length CDBs;
/// SPC-5 variable length CDB format).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServiceActionField {
    /// Byte 1 bits 4:0: SANITIZE, PERSISTENT RESERVE IN/OUT, the third-party copy OUT/IN
    /// operation codes (83h, 84h), SERVICE ACTION IN/OUT (16), MAINTENANCE IN/OUT.
    Byte1,
    /// Bytes 8–9 of a variable length CDB (opcode 7Fh).
    Bytes8To9,
}

impl ServiceActionField {
    pub const fn of(opcode: u8) -> Option<Self> {
        match opcode {
            0x48 | 0x5E | 0x5F | 0x83 | 0x84 | 0x9E | 0x9F | 0xA3 | 0xA4 => Some(Self::Byte1),
            VARIABLE_LENGTH_CDB => Some(Self::Bytes8To9),
            _ => None,
        }
    }

    /// The service action of `cdb`; `None` if the CDB is too short to hold it.
    pub fn read(self, cdb: &[u8]) -> Option<u16> {
        match self {
            Self::Byte1 => cdb.get(1).map(|b| u16::from(b & 0x1F)),
            Self::Bytes8To9 => (cdb.len() >= 10).then(|| be16(cdb, 8)),
        }
    }

    /// INVALID FIELD IN CDB at the field (its most significant bit when narrower than a byte).
    fn invalid(self) -> Sense {
        match self {
            Self::Byte1 => Sense::invalid_field_in_cdb(1, Some(4)),
            Self::Bytes8To9 => Sense::invalid_field_in_cdb(8, None),
        }
    }
}

const NACA: u8 = 0x04;

/// A command as [`ENTRIES`] writes it: [`Entry::new`] names the command, its decoder and its
/// encoder, and
/// each further call sets one field of its [`CommandInfo`]. What an entry does not set is
/// absent: no data phase, no service action, no protection field, no CDL page, supported by
/// every logical unit, and [`Flags::derived`] for its flags. The CDB usage data, the
/// reservation access and the timeout have no default: [`Entry::info`] refuses, at compile
/// time, an entry without them.
struct Entry {
    name: &'static str,
    decode: fn(&[u8]) -> Result<Command, Sense>,
    encode: fn(&Command, &mut [u8]) -> Encoded,
    usage: &'static [u8],
    service_action: Option<u16>,
    direction: Direction,
    reservation_access: Option<ReservationAccess>,
    protect_field: bool,
    cdl_page: Option<CdlPageKind>,
    thin_provisioning: bool,
    explicit_alua: bool,
    flags: Option<Flags>,
    timeout: Option<u32>,
}

impl Entry {
    const fn new(
        name: &'static str,
        decode: fn(&[u8]) -> Result<Command, Sense>,
        encode: fn(&Command, &mut [u8]) -> Encoded,
    ) -> Entry {
        Entry {
            name,
            decode,
            encode,
            usage: &[],
            service_action: None,
            direction: Direction::None,
            reservation_access: None,
            protect_field: false,
            cdl_page: None,
            thin_provisioning: false,
            explicit_alua: false,
            flags: None,
            timeout: None,
        }
    }

    /// CDB USAGE DATA, as long as the CDB ([`CommandInfo::usage`]).
    const fn cdb(self, usage: &'static [u8]) -> Entry {
        Entry { usage, ..self }
    }

    const fn service_action(self, service_action: u16) -> Entry {
        Entry {
            service_action: Some(service_action),
            ..self
        }
    }

    /// Data-In: the device sends data.
    const fn data_in(self) -> Entry {
        Entry {
            direction: Direction::In,
            ..self
        }
    }

    /// Data-Out: the device receives data.
    const fn data_out(self) -> Entry {
        Entry {
            direction: Direction::Out,
            ..self
        }
    }

    const fn reservation_access(self, access: ReservationAccess) -> Entry {
        Entry {
            reservation_access: Some(access),
            ..self
        }
    }

    /// Has an RDPROTECT/WRPROTECT/VRPROTECT field ([`CommandInfo::protect_field`]).
    const fn protect_field(self) -> Entry {
        Entry {
            protect_field: true,
            ..self
        }
    }

    /// The CDL page its DLD field selects.
    const fn cdl_page(self, page: CdlPageKind) -> Entry {
        Entry {
            cdl_page: Some(page),
            ..self
        }
    }

    /// Supported only by a thin-provisioned logical unit.
    const fn thin_provisioning(self) -> Entry {
        Entry {
            thin_provisioning: true,
            ..self
        }
    }

    /// Supported only by a logical unit with explicit ALUA.
    const fn explicit_alua(self) -> Entry {
        Entry {
            explicit_alua: true,
            ..self
        }
    }

    /// Where it may run, instead of [`Flags::derived`].
    const fn flags(self, flags: Flags) -> Entry {
        Entry {
            flags: Some(flags),
            ..self
        }
    }

    /// Nominal timeout in seconds; the recommended one is twice that.
    const fn timeout(self, seconds: u32) -> Entry {
        Entry {
            timeout: Some(seconds),
            ..self
        }
    }

    const fn info(&self) -> CommandInfo {
        // The compile error names the entry that lacks its CDB usage data, reservation access
        // or timeout.
        let (false, Some(reservation_access), Some(timeout)) =
            (self.usage.is_empty(), self.reservation_access, self.timeout)
        else {
            panic!("{}", self.name)
        };
        CommandInfo {
            name: self.name,
            usage: self.usage,
            service_action: self.service_action,
            direction: self.direction,
            reservation_access,
            flags: match self.flags {
                Some(flags) => flags,
                None => Flags::derived(reservation_access, self.protect_field),
            },
            cdl_page: self.cdl_page,
            thin_provisioning: self.thin_provisioning,
            explicit_alua: self.explicit_alua,
            protect_field: self.protect_field,
            nominal_timeout: timeout,
            recommended_timeout: timeout * 2,
            decode: self.decode,
            encode: self.encode,
        }
    }
}

/// The [`CommandInfo`] of every entry.
const fn build<const N: usize>(entries: &[Entry]) -> [CommandInfo; N] {
    let mut table = [entries[0].info(); N];
    let mut i = 1;
    while i < N {
        table[i] = entries[i].info();
        i += 1;
    }
    table
}

const F: u8 = 0xFF;

/// Every supported command, sorted by opcode then service action (the RSOC all-commands order).
pub static COMMANDS: &[CommandInfo] = &TABLE;

pub(crate) const TABLE: [CommandInfo; ENTRIES.len()] = build(ENTRIES);

/// The table as written: one entry per operation code and service action, in that order.
const ENTRIES: &[Entry] = &[
    Entry::new("TEST UNIT READY", d::test_unit_ready, e::test_unit_ready)
        .cdb(&[0x00, 0, 0, 0, 0, NACA])
        .reservation_access(Allowed)
        .flags(Flags::READY)
        .timeout(1),
    Entry::new("REQUEST SENSE", d::request_sense, e::request_sense)
        .cdb(&[0x03, 0x01, 0, 0, F, NACA])
        .data_in()
        .reservation_access(Unrestricted)
        .timeout(1),
    // FMTPINFO needs protection information (PROTECT = 0), so it is outside the mask.
    Entry::new("FORMAT UNIT", d::format_unit, e::format_unit)
        .cdb(&[0x04, 0x3F, 0, 0, 0, NACA])
        .data_out()
        .reservation_access(Write)
        .flags(Flags::READY.union(Flags::WRITES))
        .timeout(60),
    Entry::new("READ(6)", d::read6, e::read6)
        .cdb(&[0x08, 0x1F, F, F, F, NACA])
        .data_in()
        .reservation_access(Read)
        .timeout(30),
    Entry::new("WRITE(6)", d::write6, e::write6)
        .cdb(&[0x0A, 0x1F, F, F, F, NACA])
        .data_out()
        .reservation_access(Write)
        .timeout(30),
    Entry::new("INQUIRY", d::inquiry, e::inquiry)
        .cdb(&[0x12, 0x01, F, F, F, NACA])
        .data_in()
        .reservation_access(Unrestricted)
        .timeout(1),
    Entry::new("MODE SELECT(6)", d::mode_select6, e::mode_select6)
        .cdb(&[0x15, 0x11, 0, 0, F, NACA])
        .data_out()
        .reservation_access(Write)
        .flags(Flags::STANDBY)
        .timeout(1),
    Entry::new("RESERVE(6)", d::reserve, e::reserve)
        .cdb(&[0x16, 0, 0, 0, 0, NACA])
        .reservation_access(OwnRules)
        .timeout(1),
    Entry::new("RELEASE(6)", d::release, e::release)
        .cdb(&[0x17, 0, 0, 0, 0, NACA])
        .reservation_access(OwnRules)
        .timeout(1),
    Entry::new("MODE SENSE(6)", d::mode_sense6, e::mode_sense6)
        .cdb(&[0x1A, 0x08, F, F, F, NACA])
        .data_in()
        .reservation_access(Read)
        .flags(Flags::STANDBY)
        .timeout(1),
    Entry::new("START STOP UNIT", d::start_stop_unit, e::start_stop_unit)
        .cdb(&[0x1B, 0x01, 0, 0x0F, 0xF7, NACA])
        .reservation_access(START_STOP_UNIT)
        .timeout(30),
    Entry::new(
        "PREVENT ALLOW MEDIUM REMOVAL",
        d::prevent_allow_medium_removal,
        e::prevent_allow_medium_removal,
    )
    .cdb(&[0x1E, 0, 0, 0, 0x01, NACA])
    .reservation_access(PREVENT_ALLOW)
    .timeout(1),
    Entry::new(
        "READ CAPACITY(10)",
        d::read_capacity_10,
        e::read_capacity_10,
    )
    .cdb(&[0x25, 0, F, F, F, F, 0, 0, 0x01, NACA])
    .data_in()
    .reservation_access(Allowed)
    .flags(Flags::MEDIUM)
    .timeout(1),
    Entry::new("READ(10)", d::read10, e::read10)
        .cdb(&[0x28, 0x1E, F, F, F, F, 0x3F, F, F, NACA])
        .data_in()
        .reservation_access(Read)
        .protect_field()
        .timeout(30),
    Entry::new("WRITE(10)", d::write10, e::write10)
        .cdb(&[0x2A, 0x1A, F, F, F, F, 0x3F, F, F, NACA])
        .data_out()
        .reservation_access(Write)
        .protect_field()
        .timeout(30),
    Entry::new(
        "WRITE AND VERIFY(10)",
        d::write_and_verify10,
        e::write_and_verify10,
    )
    .cdb(&[0x2E, 0x12, F, F, F, F, 0x3F, F, F, NACA])
    .data_out()
    .reservation_access(Write)
    .protect_field()
    .timeout(30),
    Entry::new("VERIFY(10)", d::verify10, e::verify10)
        .cdb(&[0x2F, 0x16, F, F, F, F, 0x3F, F, F, NACA])
        .data_out()
        .reservation_access(Read)
        .protect_field()
        .timeout(30),
    Entry::new("PRE-FETCH(10)", d::pre_fetch10, e::pre_fetch10)
        .cdb(&[0x34, 0x02, F, F, F, F, 0x3F, F, F, NACA])
        .reservation_access(Read)
        .flags(Flags::READY)
        .timeout(30),
    Entry::new(
        "SYNCHRONIZE CACHE(10)",
        d::synchronize_cache10,
        e::synchronize_cache10,
    )
    .cdb(&[0x35, 0x06, F, F, F, F, 0x3F, F, F, NACA])
    .reservation_access(Write)
    .flags(Flags::READY)
    .timeout(60),
    Entry::new(
        "READ DEFECT DATA(10)",
        d::read_defect_data10,
        e::read_defect_data10,
    )
    .cdb(&[0x37, 0, 0x1F, 0, 0, 0, 0, F, F, NACA])
    .data_in()
    .reservation_access(Read)
    .timeout(1),
    Entry::new("READ LONG(10)", d::read_long10, e::read_long10)
        .cdb(&[0x3E, 0x02, F, F, F, F, 0, F, F, NACA])
        .data_in()
        .reservation_access(Read)
        .flags(Flags::READY)
        .timeout(30),
    Entry::new("WRITE LONG(10)", d::write_long10, e::write_long10)
        .cdb(&[0x3F, 0x40, F, F, F, F, 0, F, F, NACA])
        .data_out()
        .reservation_access(Write)
        .flags(Flags::READY.union(Flags::WRITES))
        .timeout(30),
    Entry::new("WRITE SAME(10)", d::write_same10, e::write_same10)
        .cdb(&[0x41, 0x08, F, F, F, F, 0x3F, F, F, NACA])
        .data_out()
        .reservation_access(Write)
        .protect_field()
        .timeout(60),
    Entry::new("UNMAP", d::unmap, e::unmap)
        .cdb(&[0x42, 0, 0, 0, 0, 0, 0x3F, F, F, NACA])
        .data_out()
        .reservation_access(Write)
        .thin_provisioning()
        .flags(Flags::READY.union(Flags::WRITES))
        .timeout(60),
    Entry::new("SANITIZE (OVERWRITE)", d::sanitize, e::sanitize)
        .cdb(&[0x48, 0xA1, 0, 0, 0, 0, 0, F, F, NACA])
        .service_action(0x01)
        .data_out()
        .reservation_access(Write)
        .flags(Flags::READY.union(Flags::WRITES))
        .timeout(60),
    Entry::new("SANITIZE (BLOCK ERASE)", d::sanitize, e::sanitize)
        .cdb(&[0x48, 0xA2, 0, 0, 0, 0, 0, F, F, NACA])
        .service_action(0x02)
        .data_out()
        .reservation_access(Write)
        .flags(Flags::READY.union(Flags::WRITES))
        .timeout(60),
    Entry::new("SANITIZE (CRYPTOGRAPHIC ERASE)", d::sanitize, e::sanitize)
        .cdb(&[0x48, 0xA3, 0, 0, 0, 0, 0, F, F, NACA])
        .service_action(0x03)
        .data_out()
        .reservation_access(Write)
        .flags(Flags::READY.union(Flags::WRITES))
        .timeout(60),
    Entry::new("SANITIZE (EXIT FAILURE MODE)", d::sanitize, e::sanitize)
        .cdb(&[0x48, 0xBF, 0, 0, 0, 0, 0, F, F, NACA])
        .service_action(0x1F)
        .data_out()
        .reservation_access(Write)
        .timeout(60),
    // No log parameter is changeable: PARAMETER LIST LENGTH is outside the usage mask, so
    // a parameter list is refused at byte 7 (and with PCR = 1 SPC requires that anyway).
    Entry::new("LOG SELECT", d::log_select, e::log_select)
        .cdb(&[0x4C, 0x02, F, F, 0, 0, 0, 0, 0, NACA])
        .reservation_access(Write)
        .flags(Flags::STANDBY)
        .timeout(1),
    Entry::new("LOG SENSE", d::log_sense, e::log_sense)
        .cdb(&[0x4D, 0, F, F, 0, F, F, F, F, NACA])
        .data_in()
        .reservation_access(Allowed)
        .flags(Flags::STANDBY.union(Flags::DURING_SANITIZE))
        .timeout(1),
    Entry::new("MODE SELECT(10)", d::mode_select10, e::mode_select10)
        .cdb(&[0x55, 0x11, 0, 0, 0, 0, 0, F, F, NACA])
        .data_out()
        .reservation_access(Write)
        .flags(Flags::STANDBY)
        .timeout(1),
    Entry::new("RESERVE(10)", d::reserve, e::reserve)
        .cdb(&[0x56, 0, 0, 0, 0, 0, 0, 0, 0, NACA])
        .reservation_access(OwnRules)
        .timeout(1),
    Entry::new("RELEASE(10)", d::release, e::release)
        .cdb(&[0x57, 0, 0, 0, 0, 0, 0, 0, 0, NACA])
        .reservation_access(OwnRules)
        .timeout(1),
    Entry::new("MODE SENSE(10)", d::mode_sense10, e::mode_sense10)
        .cdb(&[0x5A, 0x18, F, F, 0, 0, 0, F, F, NACA])
        .data_in()
        .reservation_access(Read)
        .flags(Flags::STANDBY)
        .timeout(1),
    Entry::new(
        "PERSISTENT RESERVE IN (READ KEYS)",
        d::persistent_reserve_in,
        e::persistent_reserve_in,
    )
    .cdb(&[0x5E, 0x00, 0, 0, 0, 0, 0, F, F, NACA])
    .service_action(0x00)
    .data_in()
    .reservation_access(Allowed)
    .flags(Flags::STANDBY)
    .timeout(1),
    Entry::new(
        "PERSISTENT RESERVE IN (READ RESERVATION)",
        d::persistent_reserve_in,
        e::persistent_reserve_in,
    )
    .cdb(&[0x5E, 0x01, 0, 0, 0, 0, 0, F, F, NACA])
    .service_action(0x01)
    .data_in()
    .reservation_access(Allowed)
    .flags(Flags::STANDBY)
    .timeout(1),
    Entry::new(
        "PERSISTENT RESERVE IN (REPORT CAPABILITIES)",
        d::persistent_reserve_in,
        e::persistent_reserve_in,
    )
    .cdb(&[0x5E, 0x02, 0, 0, 0, 0, 0, F, F, NACA])
    .service_action(0x02)
    .data_in()
    .reservation_access(Allowed)
    .flags(Flags::STANDBY)
    .timeout(1),
    Entry::new(
        "PERSISTENT RESERVE IN (READ FULL STATUS)",
        d::persistent_reserve_in,
        e::persistent_reserve_in,
    )
    .cdb(&[0x5E, 0x03, 0, 0, 0, 0, 0, F, F, NACA])
    .service_action(0x03)
    .data_in()
    .reservation_access(Allowed)
    .flags(Flags::STANDBY)
    .timeout(1),
    Entry::new(
        "PERSISTENT RESERVE OUT (REGISTER)",
        d::persistent_reserve_out,
        e::persistent_reserve_out,
    )
    .cdb(&[0x5F, 0x00, F, 0, 0, F, F, F, F, NACA])
    .service_action(0x00)
    .data_out()
    .reservation_access(OwnRules)
    .flags(Flags::STANDBY)
    .timeout(1),
    Entry::new(
        "PERSISTENT RESERVE OUT (RESERVE)",
        d::persistent_reserve_out,
        e::persistent_reserve_out,
    )
    .cdb(&[0x5F, 0x01, F, 0, 0, F, F, F, F, NACA])
    .service_action(0x01)
    .data_out()
    .reservation_access(OwnRules)
    .flags(Flags::STANDBY)
    .timeout(1),
    Entry::new(
        "PERSISTENT RESERVE OUT (RELEASE)",
        d::persistent_reserve_out,
        e::persistent_reserve_out,
    )
    .cdb(&[0x5F, 0x02, F, 0, 0, F, F, F, F, NACA])
    .service_action(0x02)
    .data_out()
    .reservation_access(OwnRules)
    .flags(Flags::STANDBY)
    .timeout(1),
    Entry::new(
        "PERSISTENT RESERVE OUT (CLEAR)",
        d::persistent_reserve_out,
        e::persistent_reserve_out,
    )
    .cdb(&[0x5F, 0x03, F, 0, 0, F, F, F, F, NACA])
    .service_action(0x03)
    .data_out()
    .reservation_access(OwnRules)
    .flags(Flags::STANDBY)
    .timeout(1),
    Entry::new(
        "PERSISTENT RESERVE OUT (PREEMPT)",
        d::persistent_reserve_out,
        e::persistent_reserve_out,
    )
    .cdb(&[0x5F, 0x04, F, 0, 0, F, F, F, F, NACA])
    .service_action(0x04)
    .data_out()
    .reservation_access(OwnRules)
    .flags(Flags::STANDBY)
    .timeout(1),
    Entry::new(
        "PERSISTENT RESERVE OUT (PREEMPT AND ABORT)",
        d::persistent_reserve_out,
        e::persistent_reserve_out,
    )
    .cdb(&[0x5F, 0x05, F, 0, 0, F, F, F, F, NACA])
    .service_action(0x05)
    .data_out()
    .reservation_access(OwnRules)
    .flags(Flags::STANDBY)
    .timeout(1),
    Entry::new(
        "PERSISTENT RESERVE OUT (REGISTER AND IGNORE EXISTING KEY)",
        d::persistent_reserve_out,
        e::persistent_reserve_out,
    )
    .cdb(&[0x5F, 0x06, F, 0, 0, F, F, F, F, NACA])
    .service_action(0x06)
    .data_out()
    .reservation_access(OwnRules)
    .flags(Flags::STANDBY)
    .timeout(1),
    Entry::new(
        "PERSISTENT RESERVE OUT (REGISTER AND MOVE)",
        d::persistent_reserve_out,
        e::persistent_reserve_out,
    )
    .cdb(&[0x5F, 0x07, F, 0, 0, F, F, F, F, NACA])
    .service_action(0x07)
    .data_out()
    .reservation_access(OwnRules)
    .flags(Flags::STANDBY)
    .timeout(1),
    Entry::new("READ(32)", d::read32, e::read32)
        .cdb(&[
            0x7F, NACA, 0, 0, 0, 0, 0x3F, 0x18, 0x00, 0x09, 0x1E, 0x07, F, F, F, F, F, F, F, F, F,
            F, F, F, F, F, F, F, F, F, F, F,
        ])
        .service_action(0x0009)
        .data_in()
        .reservation_access(Read)
        .protect_field()
        .cdl_page(T2A)
        .timeout(30),
    Entry::new("WRITE(32)", d::write32, e::write32)
        .cdb(&[
            0x7F, NACA, 0, 0, 0, 0, 0x3F, 0x18, 0x00, 0x0B, 0x1A, 0x07, F, F, F, F, F, F, F, F, F,
            F, F, F, F, F, F, F, F, F, F, F,
        ])
        .service_action(0x000B)
        .data_out()
        .reservation_access(Write)
        .protect_field()
        .cdl_page(T2B)
        .timeout(30),
    Entry::new("WRITE SAME(32)", d::write_same32, e::write_same32)
        .cdb(&[
            0x7F, NACA, 0, 0, 0, 0, 0x3F, 0x18, 0x00, 0x0D, 0x09, 0, F, F, F, F, F, F, F, F, F, F,
            F, F, F, F, F, F, F, F, F, F,
        ])
        .service_action(0x000D)
        .data_out()
        .reservation_access(Write)
        .protect_field()
        .timeout(60),
    Entry::new("WRITE ATOMIC(32)", d::write_atomic32, e::write_atomic32)
        .cdb(&[
            0x7F, NACA, 0, 0, F, F, 0x3F, 0x18, 0x00, 0x0F, 0x18, 0, F, F, F, F, F, F, F, F, F, F,
            F, F, F, F, F, F, F, F, F, F,
        ])
        .service_action(0x000F)
        .data_out()
        .reservation_access(Write)
        .protect_field()
        .timeout(30),
    Entry::new(
        "EXTENDED COPY(LID1)",
        tpc::decode_extended_copy,
        tpc::encode_extended_copy,
    )
    .cdb(&[0x83, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, F, F, F, F, 0, NACA])
    .service_action(0x00)
    .data_out()
    .reservation_access(Write)
    .flags(Flags::READY)
    .timeout(60),
    Entry::new(
        "EXTENDED COPY(LID4)",
        tpc::decode_extended_copy,
        tpc::encode_extended_copy,
    )
    .cdb(&[0x83, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, F, F, F, F, 0, NACA])
    .service_action(0x01)
    .data_out()
    .reservation_access(Write)
    .flags(Flags::READY)
    .timeout(60),
    Entry::new(
        "POPULATE TOKEN",
        tpc::decode_extended_copy,
        tpc::encode_extended_copy,
    )
    .cdb(&[0x83, 0x10, 0, 0, 0, 0, F, F, F, F, F, F, F, F, 0x1F, NACA])
    .service_action(0x10)
    .data_out()
    .reservation_access(Read)
    .flags(Flags::READY)
    .timeout(60),
    Entry::new(
        "WRITE USING TOKEN",
        tpc::decode_extended_copy,
        tpc::encode_extended_copy,
    )
    .cdb(&[0x83, 0x11, 0, 0, 0, 0, F, F, F, F, F, F, F, F, 0x1F, NACA])
    .service_action(0x11)
    .data_out()
    .reservation_access(Write)
    .flags(Flags::READY.union(Flags::WRITES))
    .timeout(60),
    Entry::new(
        "COPY OPERATION ABORT",
        tpc::decode_copy_operation_abort,
        tpc::encode_copy_operation_abort,
    )
    .cdb(&[0x83, 0x1C, F, F, F, F, 0, 0, 0, 0, 0, 0, 0, 0, 0, NACA])
    .service_action(0x1C)
    .reservation_access(Allowed)
    .timeout(1),
    Entry::new(
        "RECEIVE COPY STATUS(LID1)",
        tpc::decode_receive_copy_results,
        tpc::encode_receive_copy_results,
    )
    .cdb(&[0x84, 0x00, F, 0, 0, 0, 0, 0, 0, 0, F, F, F, F, 0, NACA])
    .service_action(0x00)
    .data_in()
    .reservation_access(Allowed)
    .timeout(1),
    Entry::new(
        "RECEIVE COPY DATA(LID1)",
        tpc::decode_receive_copy_results,
        tpc::encode_receive_copy_results,
    )
    .cdb(&[0x84, 0x01, F, 0, 0, 0, 0, 0, 0, 0, F, F, F, F, 0, NACA])
    .service_action(0x01)
    .data_in()
    .reservation_access(Allowed)
    .timeout(1),
    Entry::new(
        "RECEIVE COPY OPERATING PARAMETERS",
        tpc::decode_receive_copy_results,
        tpc::encode_receive_copy_results,
    )
    .cdb(&[0x84, 0x03, 0, 0, 0, 0, 0, 0, 0, 0, F, F, F, F, 0, NACA])
    .service_action(0x03)
    .data_in()
    .reservation_access(Allowed)
    .timeout(1),
    Entry::new(
        "RECEIVE COPY FAILURE DETAILS(LID1)",
        tpc::decode_receive_copy_results,
        tpc::encode_receive_copy_results,
    )
    .cdb(&[0x84, 0x04, F, 0, 0, 0, 0, 0, 0, 0, F, F, F, F, 0, NACA])
    .service_action(0x04)
    .data_in()
    .reservation_access(Allowed)
    .timeout(1),
    Entry::new(
        "RECEIVE COPY STATUS(LID4)",
        tpc::decode_receive_copy_results,
        tpc::encode_receive_copy_results,
    )
    .cdb(&[0x84, 0x05, F, F, F, F, 0, 0, 0, 0, F, F, F, F, 0, NACA])
    .service_action(0x05)
    .data_in()
    .reservation_access(Allowed)
    .timeout(1),
    Entry::new(
        "RECEIVE COPY DATA(LID4)",
        tpc::decode_receive_copy_results,
        tpc::encode_receive_copy_results,
    )
    .cdb(&[0x84, 0x06, F, F, F, F, 0, 0, 0, 0, F, F, F, F, 0, NACA])
    .service_action(0x06)
    .data_in()
    .reservation_access(Allowed)
    .timeout(1),
    Entry::new(
        "RECEIVE ROD TOKEN INFORMATION",
        tpc::decode_receive_copy_results,
        tpc::encode_receive_copy_results,
    )
    .cdb(&[0x84, 0x07, F, F, F, F, 0, 0, 0, 0, F, F, F, F, 0, NACA])
    .service_action(0x07)
    .data_in()
    .reservation_access(Allowed)
    .timeout(1),
    Entry::new(
        "REPORT ALL ROD TOKENS",
        tpc::decode_receive_copy_results,
        tpc::encode_receive_copy_results,
    )
    .cdb(&[0x84, 0x08, 0, 0, 0, 0, 0, 0, 0, 0, F, F, F, F, 0, NACA])
    .service_action(0x08)
    .data_in()
    .reservation_access(Allowed)
    .timeout(1),
    Entry::new("READ(16)", d::read16, e::read16)
        .cdb(&[0x88, 0x1F, F, F, F, F, F, F, F, F, F, F, F, F, F, NACA])
        .data_in()
        .reservation_access(Read)
        .protect_field()
        .cdl_page(T2A)
        .timeout(30),
    Entry::new(
        "COMPARE AND WRITE",
        d::compare_and_write,
        e::compare_and_write,
    )
    .cdb(&[0x89, 0x1A, F, F, F, F, F, F, F, F, 0, 0, 0, F, 0x3F, NACA])
    .data_out()
    .reservation_access(Write)
    .protect_field()
    .timeout(30),
    Entry::new("WRITE(16)", d::write16, e::write16)
        .cdb(&[0x8A, 0x1B, F, F, F, F, F, F, F, F, F, F, F, F, F, NACA])
        .data_out()
        .reservation_access(Write)
        .protect_field()
        .cdl_page(T2B)
        .timeout(30),
    Entry::new("ORWRITE(16)", d::orwrite16, e::orwrite16)
        .cdb(&[0x8B, 0x1A, F, F, F, F, F, F, F, F, F, F, F, F, 0x1F, NACA])
        .data_out()
        .reservation_access(Write)
        .protect_field()
        .timeout(30),
    Entry::new(
        "WRITE AND VERIFY(16)",
        d::write_and_verify16,
        e::write_and_verify16,
    )
    .cdb(&[0x8E, 0x12, F, F, F, F, F, F, F, F, F, F, F, F, 0x3F, NACA])
    .data_out()
    .reservation_access(Write)
    .protect_field()
    .timeout(30),
    Entry::new("VERIFY(16)", d::verify16, e::verify16)
        .cdb(&[0x8F, 0x16, F, F, F, F, F, F, F, F, F, F, F, F, 0x3F, NACA])
        .data_out()
        .reservation_access(Read)
        .protect_field()
        .timeout(30),
    Entry::new("PRE-FETCH(16)", d::pre_fetch16, e::pre_fetch16)
        .cdb(&[0x90, 0x02, F, F, F, F, F, F, F, F, F, F, F, F, 0x3F, NACA])
        .reservation_access(Read)
        .flags(Flags::READY)
        .timeout(30),
    Entry::new(
        "SYNCHRONIZE CACHE(16)",
        d::synchronize_cache16,
        e::synchronize_cache16,
    )
    .cdb(&[0x91, 0x06, F, F, F, F, F, F, F, F, F, F, F, F, 0x3F, NACA])
    .reservation_access(Write)
    .flags(Flags::READY)
    .timeout(60),
    Entry::new("WRITE SAME(16)", d::write_same16, e::write_same16)
        .cdb(&[0x93, 0x09, F, F, F, F, F, F, F, F, F, F, F, F, 0x3F, NACA])
        .data_out()
        .reservation_access(Write)
        .protect_field()
        .timeout(60),
    Entry::new("WRITE ATOMIC(16)", d::write_atomic16, e::write_atomic16)
        .cdb(&[0x9C, 0x18, F, F, F, F, F, F, F, F, F, F, F, F, 0x3F, NACA])
        .data_out()
        .reservation_access(Write)
        .protect_field()
        .timeout(30),
    Entry::new(
        "READ CAPACITY(16)",
        d::read_capacity_16,
        e::read_capacity_16,
    )
    .cdb(&[0x9E, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, F, F, F, F, 0, NACA])
    .service_action(0x10)
    .data_in()
    .reservation_access(Allowed)
    .flags(Flags::MEDIUM)
    .timeout(1),
    Entry::new("READ LONG(16)", d::read_long16, e::read_long16)
        .cdb(&[0x9E, 0x11, F, F, F, F, F, F, F, F, 0, 0, F, F, 0x01, NACA])
        .service_action(0x11)
        .data_in()
        .reservation_access(Read)
        .flags(Flags::READY)
        .timeout(30),
    Entry::new("GET LBA STATUS", d::get_lba_status, e::get_lba_status)
        .cdb(&[0x9E, 0x12, F, F, F, F, F, F, F, F, F, F, F, F, 0, NACA])
        .service_action(0x12)
        .data_in()
        .reservation_access(Read)
        .flags(Flags::READY)
        .timeout(1),
    Entry::new("WRITE LONG(16)", d::write_long16, e::write_long16)
        .cdb(&[0x9F, 0x51, F, F, F, F, F, F, F, F, 0, 0, F, F, 0, NACA])
        .service_action(0x11)
        .data_out()
        .reservation_access(Write)
        .flags(Flags::READY.union(Flags::WRITES))
        .timeout(30),
    Entry::new("REPORT LUNS", d::report_luns, e::report_luns)
        .cdb(&[0xA0, 0, F, 0, 0, 0, F, F, F, F, 0, NACA])
        .data_in()
        .reservation_access(Unrestricted)
        .flags(
            Flags::NO_LUN
                .union(Flags::TARGET)
                .union(Flags::NO_UNIT_ATTENTION)
                .union(Flags::STANDBY)
                .union(Flags::UNAVAILABLE)
                .union(Flags::DURING_SANITIZE),
        )
        .timeout(1),
    Entry::new(
        "REPORT TARGET PORT GROUPS",
        d::report_target_port_groups,
        e::report_target_port_groups,
    )
    .cdb(&[0xA3, 0xEA, 0, 0, 0, 0, F, F, F, F, 0, NACA])
    .service_action(0x0A)
    .data_in()
    .reservation_access(Allowed)
    .flags(Flags::STANDBY.union(Flags::UNAVAILABLE))
    .timeout(1),
    Entry::new(
        "REPORT SUPPORTED OPERATION CODES",
        d::report_supported_operation_codes,
        e::report_supported_operation_codes,
    )
    .cdb(&[0xA3, 0x0C, 0x87, F, F, F, F, F, F, F, 0, NACA])
    .service_action(0x0C)
    .data_in()
    .reservation_access(Read)
    .flags(
        Flags::STANDBY
            .union(Flags::UNAVAILABLE)
            .union(Flags::DURING_SANITIZE),
    )
    .timeout(1),
    Entry::new(
        "REPORT SUPPORTED TASK MANAGEMENT FUNCTIONS",
        d::report_supported_tmf,
        e::report_supported_tmf,
    )
    .cdb(&[0xA3, 0x0D, 0x80, 0, 0, 0, F, F, F, F, 0, NACA])
    .service_action(0x0D)
    .data_in()
    .reservation_access(Read)
    .flags(
        Flags::STANDBY
            .union(Flags::UNAVAILABLE)
            .union(Flags::DURING_SANITIZE),
    )
    .timeout(1),
    Entry::new("REPORT TIMESTAMP", d::report_timestamp, e::report_timestamp)
        .cdb(&[0xA3, 0x0F, 0, 0, 0, 0, F, F, F, F, 0, NACA])
        .service_action(0x0F)
        .data_in()
        .reservation_access(Allowed)
        .timeout(1),
    // Runs in the standby and unavailable states (SPC-4 §5.16.2.4.4, §5.16.2.4.5), and
    // conflicts with reservations as a change of the logical unit (SPC-4 table 65).
    Entry::new(
        "SET TARGET PORT GROUPS",
        d::set_target_port_groups,
        e::set_target_port_groups,
    )
    .cdb(&[0xA4, 0x0A, 0, 0, 0, 0, F, F, F, F, 0, NACA])
    .service_action(0x0A)
    .data_out()
    .reservation_access(Write)
    .flags(Flags::STANDBY.union(Flags::UNAVAILABLE))
    .explicit_alua()
    .timeout(5),
    Entry::new("SET TIMESTAMP", d::set_timestamp, e::set_timestamp)
        .cdb(&[0xA4, 0x0F, 0, 0, 0, 0, F, F, F, F, 0, NACA])
        .service_action(0x0F)
        .data_out()
        .reservation_access(Write)
        .timeout(1),
    Entry::new("READ(12)", d::read12, e::read12)
        .cdb(&[0xA8, 0x1E, F, F, F, F, F, F, F, F, 0x3F, NACA])
        .data_in()
        .reservation_access(Read)
        .protect_field()
        .timeout(30),
    Entry::new("WRITE(12)", d::write12, e::write12)
        .cdb(&[0xAA, 0x1A, F, F, F, F, F, F, F, F, 0x3F, NACA])
        .data_out()
        .reservation_access(Write)
        .protect_field()
        .timeout(30),
    Entry::new(
        "WRITE AND VERIFY(12)",
        d::write_and_verify12,
        e::write_and_verify12,
    )
    .cdb(&[0xAE, 0x12, F, F, F, F, F, F, F, F, 0x3F, NACA])
    .data_out()
    .reservation_access(Write)
    .protect_field()
    .timeout(30),
    Entry::new("VERIFY(12)", d::verify12, e::verify12)
        .cdb(&[0xAF, 0x16, F, F, F, F, F, F, F, F, 0x3F, NACA])
        .data_out()
        .reservation_access(Read)
        .protect_field()
        .timeout(30),
    Entry::new(
        "READ DEFECT DATA(12)",
        d::read_defect_data12,
        e::read_defect_data12,
    )
    .cdb(&[0xB7, 0x1F, F, F, F, F, F, F, F, F, 0, NACA])
    .data_in()
    .reservation_access(Read)
    .timeout(1),
];

/// Whether an operation code selects its command by a service action.
pub const fn has_service_actions(opcode: u8) -> bool {
    ServiceActionField::of(opcode).is_some()
}

/// The entries of one operation code: `COMMANDS[start..start + len]`.
#[derive(Clone, Copy)]
struct Span {
    start: u8,
    len: u8,
}

/// COMMANDS indexed by operation code, built at compile time: decoding does one array access
/// instead of a scan of the table. Building it also checks the table's shape, so a misplaced
/// entry is a compile error.
static BY_OPCODE: [Span; 256] = index(&TABLE);

const fn index(table: &[CommandInfo]) -> [Span; 256] {
    assert!(
        table.len() <= u8::MAX as usize,
        "the index holds u8 positions"
    );
    let mut spans = [Span { start: 0, len: 0 }; 256];
    let mut i = 0;
    while i < table.len() {
        let info = &table[i];
        let opcode = info.usage[0];
        assert!(
            has_service_actions(opcode) == info.service_action.is_some(),
            "an entry has a service action exactly when its opcode selects by one"
        );
        if let Some(sa) = info.service_action {
            let usage = info.usage;
            let carried = match ServiceActionField::of(opcode) {
                Some(ServiceActionField::Bytes8To9) => (usage[8] as u16) << 8 | usage[9] as u16,
                _ => (usage[1] & 0x1F) as u16,
            };
            assert!(
                carried == sa,
                "the usage data holds the service action where the CDB does"
            );
        }
        let span = &mut spans[opcode as usize];
        if span.len == 0 {
            span.start = i as u8;
        } else {
            assert!(
                span.start as usize + span.len as usize == i,
                "the entries of one opcode are adjacent"
            );
            assert!(
                info.service_action.is_some(),
                "an opcode without service actions has one entry"
            );
        }
        span.len += 1;
        i += 1;
    }
    spans
}

/// The entry for an opcode and, for opcodes that select by one, its service action (`None`
/// for the others).
pub fn lookup(opcode: u8, service_action: Option<u16>) -> Option<&'static CommandInfo> {
    let span = BY_OPCODE[usize::from(opcode)];
    let start = usize::from(span.start);
    // At most a handful of service actions share an opcode.
    COMMANDS
        .get(start..start + usize::from(span.len))?
        .iter()
        .find(|c| c.service_action == service_action)
}

/// The entry `cdb` names by its operation code and, where the opcode has them, service
/// action; or the sense for a CDB that names none. One array access for most opcodes.
pub fn find(cdb: &[u8]) -> Result<&'static CommandInfo, Sense> {
    let Some(&opcode) = cdb.first() else {
        return Err(Sense::invalid_command_operation_code());
    };
    let span = BY_OPCODE[usize::from(opcode)];
    let start = usize::from(span.start);
    let entries = COMMANDS
        .get(start..start + usize::from(span.len))
        .unwrap_or_default();
    match ServiceActionField::of(opcode) {
        // The index holds one entry for an opcode without service actions.
        None => entries
            .first()
            .ok_or_else(Sense::invalid_command_operation_code),
        Some(_) if entries.is_empty() => Err(Sense::invalid_command_operation_code()),
        Some(field) => {
            // Too short to hold the service action: the transport lost bytes.
            let sa = field
                .read(cdb)
                .ok_or_else(|| Sense::invalid_field_in_cdb(0, None))?;
            entries
                .iter()
                .find(|c| c.service_action == Some(sa))
                .ok_or_else(|| field.invalid())
        }
    }
}

/// How the command in `cdb` fares under a reservation another I_T nexus holds, with the
/// CDB-dependent rows resolved. The reservation is checked before the CDB is (in SAM-5's
/// order), so a CDB the table does not know conflicts like a write.
pub fn reservation_access(cdb: &[u8]) -> ReservationAccess {
    find(cdb).map_or(ReservationAccess::Write, |info| {
        info.reservation_access(cdb)
    })
}

/// Decode a CDB through the table. `cdb` may be longer than the command (iSCSI carries 16
/// bytes, or 32 with an extended CDB AHS); extra bytes are ignored.
pub fn decode(cdb: &[u8]) -> Result<(&'static CommandInfo, Command), Sense> {
    let info = find(cdb)?;
    decode_as(info, cdb).map(|cmd| (info, cmd))
}

/// Decode `cdb` as the command [`find`] found for it: its length, the bits outside its usage
/// mask, then its fields.
pub fn decode_as(info: &CommandInfo, cdb: &[u8]) -> Result<Command, Sense> {
    // ADDITIONAL CDB LENGTH: the bytes after byte 7 (18h for READ(32)/WRITE(32)).
    if info.variable_length() && usize::from(u8_at(cdb, 7)) + 8 != info.cdb_length() {
        return Err(Sense::invalid_field_in_cdb(7, None));
    }
    let Some(cdb) = cdb.get(..info.cdb_length()) else {
        // The transport delivered fewer bytes than the opcode's CDB length.
        return Err(Sense::invalid_field_in_cdb(0, None));
    };
    check_reserved(info, cdb)?;
    (info.decode)(cdb)
}

/// The generic checks every entry gets: protection field, bits outside the usage mask, NACA
/// (NormACA = 0 in standard INQUIRY data, so NACA = 1 is invalid: SAM-5 §5.11).
fn check_reserved(info: &CommandInfo, cdb: &[u8]) -> Result<(), Sense> {
    // Fast path: no bit outside the usage mask, NACA and the protection field clear. Anything
    // else (including service-action bits, which the mask leaves out) takes the exact walk
    // below, which names the first offending field.
    let outside = cdb
        .iter()
        .zip(info.usage)
        .skip(1)
        .fold(0u8, |acc, (&byte, &mask)| acc | byte & !mask);
    let protected = info.protect_field && u8_at(cdb, info.protect_byte()) & 0xE0 != 0;
    if outside == 0 && !protected && u8_at(cdb, info.control_byte()) & NACA == 0 {
        return Ok(());
    }
    let protect = info.protect_byte();
    if info.protect_field && u8_at(cdb, protect) & 0xE0 != 0 {
        return Err(Sense::invalid_field_in_cdb(protect as u16, Some(7)));
    }
    let control = info.control_byte();
    for (i, (&byte, &mask)) in cdb.iter().zip(info.usage).enumerate().skip(1) {
        let bad = byte & !(mask | info.fixed_bits(i));
        if bad != 0 {
            return Err(Sense::invalid_field_in_cdb(
                i as u16,
                Some(7 - bad.leading_zeros() as u8),
            ));
        }
        if i == control && byte & NACA != 0 {
            return Err(Sense::invalid_field_in_cdb(i as u16, Some(2)));
        }
    }
    Ok(())
}
