//! CDB decoders on well-formed and malformed input: exact field pointers, lengths, and no
//! panic on anything.

use scsi::command::{
    ByteCheck, CacheRange, Command, LogPageControl, LogSense, PageControl, ReadWrite,
};
use scsi::table::{lookup, ServiceActionField, VARIABLE_LENGTH_CDB};
use scsi::{decode, Asc, CommandInfo, Sense, SenseKey, COMMANDS};

fn err(cdb: &[u8]) -> Sense {
    match decode(cdb) {
        Ok((info, cmd)) => panic!("{} decoded as {cmd:?}", info.name),
        Err(s) => s,
    }
}

fn ok(cdb: &[u8]) -> Command {
    decode(cdb).map(|(_, c)| c).expect("should decode")
}

fn field(byte: u16, bit: Option<u8>) -> Sense {
    Sense::invalid_field_in_cdb(byte, bit)
}

#[test]
fn unknown_opcodes_are_invalid_operation_code() {
    for cdb in [&[0x44u8, 0, 0, 0, 0, 0, 0, 0, 0, 0][..], &[0xC0; 16], &[]] {
        let s = err(cdb);
        assert_eq!(
            (s.key, s.asc),
            (
                SenseKey::IllegalRequest,
                Asc::INVALID_COMMAND_OPERATION_CODE
            )
        );
        assert_eq!(s.field, None);
    }
    // Known opcode, unknown service action: the SERVICE ACTION field.
    assert_eq!(
        err(&[0x9E, 0x13, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
        field(1, Some(4))
    );
}

#[test]
fn short_cdbs_are_rejected() {
    assert_eq!(err(&[0x28, 0, 0, 0, 0, 0, 0, 0, 1]), field(0, None));
    assert_eq!(err(&[0x88, 0, 0]), field(0, None));
    assert_eq!(err(&[0x12, 0, 0, 0]), field(0, None));
}

#[test]
fn longer_buffers_are_fine() {
    // iSCSI carries 16 CDB bytes; trailing bytes of a 10-byte CDB are ignored.
    let mut cdb = [0xAAu8; 16];
    cdb[..10].copy_from_slice(&[0x28, 0, 0, 0, 0, 5, 0, 0, 2, 0]);
    assert_eq!(
        ok(&cdb),
        Command::Read(ReadWrite {
            lba: 5,
            transfer_length: 2,
            dpo: false,
            fua: false,
            group_number: 0,
            dld: 0
        })
    );
}

#[test]
fn read_write_fields() {
    let c = ok(&[0x08, 0x1F, 0xFF, 0xFF, 0, 0]);
    assert_eq!(
        c,
        Command::Read(ReadWrite {
            lba: 0x1F_FFFF,
            transfer_length: 256,
            dpo: false,
            fua: false,
            group_number: 0,
            dld: 0
        })
    );
    let c = ok(&[0xAA, 0x18, 0, 0, 1, 0, 0, 0, 0, 9, 0x05, 0]);
    assert_eq!(
        c,
        Command::Write(ReadWrite {
            lba: 256,
            transfer_length: 9,
            dpo: true,
            fua: true,
            group_number: 5,
            dld: 0
        })
    );
    let mut c16 = [0u8; 16];
    c16[0] = 0x88;
    c16[1] = 0x01; // DLD2
    c16[2..10].copy_from_slice(&0x1234_5678_9ABCu64.to_be_bytes());
    c16[10..14].copy_from_slice(&77u32.to_be_bytes());
    c16[14] = 0x80 | 3; // DLD1, group 3
    assert_eq!(
        ok(&c16),
        Command::Read(ReadWrite {
            lba: 0x1234_5678_9ABC,
            transfer_length: 77,
            dpo: false,
            fua: false,
            group_number: 3,
            dld: 6
        })
    );
}

#[test]
fn reserved_bits_point_at_byte_and_bit() {
    // READ(6) byte 1 bits 7:5 reserved.
    assert_eq!(err(&[0x08, 0x20, 0, 0, 1, 0]), field(1, Some(5)));
    // READ(10) RDPROTECT (byte 1 bits 7:5): the field's most significant bit.
    assert_eq!(
        err(&[0x28, 0x20, 0, 0, 0, 0, 0, 0, 1, 0]),
        field(1, Some(7))
    );
    // WRITE(10) byte 1 bit 2 reserved.
    assert_eq!(
        err(&[0x2A, 0x04, 0, 0, 0, 0, 0, 0, 1, 0]),
        field(1, Some(2))
    );
    // READ(10) group byte bits 7:6 reserved.
    assert_eq!(
        err(&[0x28, 0, 0, 0, 0, 0, 0x40, 0, 1, 0]),
        field(6, Some(6))
    );
    // INQUIRY byte 1 bit 1 (obsolete CMDDT).
    assert_eq!(err(&[0x12, 0x02, 0, 0, 36, 0]), field(1, Some(1)));
    // TEST UNIT READY reserved byte 3.
    assert_eq!(err(&[0x00, 0, 0, 0x80, 0, 0]), field(3, Some(7)));
    // MODE SENSE(10) reserved byte 5.
    assert_eq!(
        err(&[0x5A, 0, 0x3F, 0, 0, 0x01, 0, 0, 255, 0]),
        field(5, Some(0))
    );
    // VERIFY(16) byte 1 bit 3 (no FUA in VERIFY).
    let mut v16 = [0u8; 16];
    v16[0] = 0x8F;
    v16[1] = 0x08;
    assert_eq!(err(&v16), field(1, Some(3)));
    // READ CAPACITY(16) byte 1 bits 7:5 beyond the service action.
    let mut rc = [0u8; 16];
    rc[0] = 0x9E;
    rc[1] = 0x30;
    assert_eq!(err(&rc), field(1, Some(5)));
}

#[test]
fn control_byte_naca_and_vendor_bits() {
    assert_eq!(err(&[0x00, 0, 0, 0, 0, 0x04]), field(5, Some(2)));
    assert_eq!(
        err(&[0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0x04]),
        field(9, Some(2))
    );
    assert_eq!(
        err(&[0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0x80]),
        field(9, Some(7))
    );
}

#[test]
fn field_values() {
    // INQUIRY page code without EVPD.
    assert_eq!(err(&[0x12, 0, 0x83, 0, 36, 0]), field(2, None));
    // VERIFY BYTCHK 10b reserved; WRITE AND VERIFY BYTCHK 11b reserved.
    assert_eq!(
        err(&[0x2F, 0x04, 0, 0, 0, 0, 0, 0, 1, 0]),
        field(1, Some(2))
    );
    assert_eq!(
        err(&[0x2E, 0x06, 0, 0, 0, 0, 0, 0, 1, 0]),
        field(1, Some(2))
    );
    match ok(&[0x2F, 0x06, 0, 0, 0, 0, 0, 0, 4, 0]) {
        Command::Verify(v) => assert_eq!(
            (v.bytchk, v.verification_length),
            (ByteCheck::CompareOneBlock, 4)
        ),
        c => panic!("{c:?}"),
    }
    // MODE SENSE saved values and MODE SELECT SP decode; whether the logical unit can save
    // decides in scsi::mode.
    match ok(&[0x1A, 0, 0xC0 | 0x08, 0, 255, 0]) {
        Command::ModeSense(m) => assert_eq!((m.pc, m.page_code), (PageControl::Saved, 0x08)),
        c => panic!("{c:?}"),
    }
    match ok(&[0x55, 0x11, 0, 0, 0, 0, 0, 0, 24, 0]) {
        Command::ModeSelect(m) => assert!(m.ten && m.pf && m.sp),
        c => panic!("{c:?}"),
    }
    match ok(&[0x5A, 0x18, 0x7F, 0xFF, 0, 0, 0, 1, 0, 0]) {
        Command::ModeSense(m) => {
            assert!(m.ten && m.dbd && m.llbaa);
            assert_eq!(
                (m.pc, m.page_code, m.subpage_code, m.allocation_length),
                (PageControl::Changeable, 0x3F, 0xFF, 256)
            );
        }
        c => panic!("{c:?}"),
    }
    // START STOP UNIT: any POWER CONDITION decodes (no power states are modelled).
    match ok(&[0x1B, 0x01, 0, 0, 0x43, 0]) {
        Command::StartStopUnit(s) => assert_eq!(
            (s.power_condition, s.immed, s.loej, s.start),
            (4, true, true, true)
        ),
        c => panic!("{c:?}"),
    }
    // READ CAPACITY(10) LBA without PMI.
    assert_eq!(err(&[0x25, 0, 0, 0, 0, 1, 0, 0, 0, 0]), field(2, None));
    assert_eq!(
        ok(&[0x25, 0, 0, 0, 0, 1, 0, 0, 1, 0]),
        Command::ReadCapacity10
    );
    // RSOC reporting options 4..7 are reserved.
    assert_eq!(
        err(&[0xA3, 0x0C, 0x04, 0, 0, 0, 0, 0, 1, 0, 0, 0]),
        field(2, Some(2))
    );
    // SYNCHRONIZE CACHE(10) IMMED.
    assert_eq!(
        ok(&[0x35, 0x02, 0, 0, 0, 9, 0, 0, 3, 0]),
        Command::SynchronizeCache(CacheRange {
            lba: 9,
            number_of_logical_blocks: 3,
            immed: true
        })
    );
}

#[test]
fn every_table_entry_accepts_its_own_zero_cdb_shape() {
    for info in COMMANDS {
        let (found, _) = decode(&minimal(info)).unwrap_or_else(|e| panic!("{}: {e:?}", info.name));
        assert_eq!(found.name, info.name);
    }
}

#[test]
fn lookup_finds_every_entry_and_nothing_else() {
    for info in COMMANDS {
        let found = lookup(info.opcode(), info.service_action).expect(info.name);
        assert!(std::ptr::eq(found, info), "{}", info.name);
    }
    for opcode in 0..=255u8 {
        let entries: Vec<&CommandInfo> = COMMANDS.iter().filter(|c| c.opcode() == opcode).collect();
        match ServiceActionField::of(opcode) {
            // An opcode that selects by service action has no entry without one, and only the
            // listed service actions are found.
            Some(_) => {
                assert!(lookup(opcode, None).is_none(), "{opcode:02X}h");
                for sa in 0..=0x1Fu16 {
                    let expected = entries.iter().find(|c| c.service_action == Some(sa));
                    assert_eq!(
                        lookup(opcode, Some(sa)).map(|c| c.name),
                        expected.map(|c| c.name),
                        "{opcode:02X}h/{sa:04X}h"
                    );
                }
            }
            None => {
                assert_eq!(
                    lookup(opcode, None).map(|c| c.name),
                    entries.first().map(|c| c.name)
                );
                assert!(lookup(opcode, Some(0)).is_none(), "{opcode:02X}h");
            }
        }
    }
}

#[test]
fn usage_mask_bits_are_accepted() {
    // Every bit the table advertises (except PROTECT fields and NACA, which are advertised
    // nowhere) decodes without a reserved-bit error.
    for info in COMMANDS {
        let mut cdb = info.usage.to_vec();
        cdb[info.control_byte()] &= !0x04;
        match decode(&cdb) {
            Ok((found, _)) => assert_eq!(found.name, info.name),
            // Field *values* may still be invalid (e.g. BYTCHK 11b); never a reserved bit.
            Err(s) => assert!(
                s.asc != Asc::INVALID_FIELD_IN_CDB || is_value_check(info.opcode(), &s),
                "{}: {s:?}",
                info.name
            ),
        }
    }
}

/// Decoders that reject a *value* of an advertised field when all its bits are set.
fn is_value_check(opcode: u8, s: &Sense) -> bool {
    let f = s.field.expect("field pointer");
    match opcode {
        0x2E | 0xAE | 0x8E => (f.byte, f.bit) == (1, Some(2)), // BYTCHK 11b
        // REPORTING OPTIONS 111b (RSOC), PARAMETER DATA FORMAT 111b (RTPG).
        0xA3 => [(2, Some(2)), (1, Some(7))].contains(&(f.byte, f.bit)),
        // SET TARGET PORT GROUPS' PARAMETER LIST LENGTH FFFFFFFFh: no header and descriptors.
        0xA4 => (f.byte, f.bit) == (6, None),
        _ => false,
    }
}

/// xorshift64*: a fixed-seed generator, so a failure replays exactly.
fn next(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_F491_4F6C_DD1D)
}

#[test]
fn random_cdbs_never_panic() {
    let mut state = 0x5EED_1234_ABCD_0001u64;
    let mut decoded = 0;
    for i in 0..200_000u32 {
        // Up to 34 bytes: iSCSI's 16, and 32 with an extended CDB AHS.
        let len = (next(&mut state) % 35) as usize;
        let mut cdb: Vec<u8> = (0..len).map(|_| next(&mut state) as u8).collect();
        // Half the time use a supported opcode so the decoders see real traffic, and clear
        // most bits so some inputs get past the reserved-bit checks.
        if i % 2 == 0 && !cdb.is_empty() {
            let info = &COMMANDS[(next(&mut state) as usize) % COMMANDS.len()];
            cdb[0] = info.opcode();
            if i % 8 != 0 {
                // Mostly a valid service action and ADDITIONAL CDB LENGTH.
                for (b, m) in cdb.iter_mut().zip(minimal(info)).skip(1).take(9) {
                    if m != 0 {
                        *b = m;
                    }
                }
            }
            if i % 4 == 0 {
                for (b, m) in cdb.iter_mut().zip(info.usage).skip(1) {
                    *b &= *m;
                }
            }
        }
        if let Ok((info, cmd)) = decode(&cdb) {
            decoded += 1;
            assert_eq!(info.opcode(), cdb[0]);
            let _ = cmd.data_length();
        }
    }
    assert!(
        decoded > 5_000,
        "only {decoded} random CDBs decoded; the generator is too hostile"
    );
}

/// A CDB for `info` that decodes: opcode, service action (and a variable length CDB's
/// ADDITIONAL CDB LENGTH), everything else zero.
fn minimal(info: &CommandInfo) -> Vec<u8> {
    let mut cdb = vec![0u8; info.cdb_length()];
    cdb[0] = info.opcode();
    if let Some(sa) = info.service_action {
        match ServiceActionField::of(info.opcode()) {
            Some(ServiceActionField::Byte1) => cdb[1] = sa as u8,
            Some(ServiceActionField::Bytes8To9) => {
                cdb[7] = (info.cdb_length() - 8) as u8;
                cdb[8..10].copy_from_slice(&sa.to_be_bytes());
            }
            None => panic!("{} has a service action", info.name),
        }
    }
    cdb
}

/// Bits of byte `byte` holding fixed values that the lookup checks, not the usage mask.
fn fixed(info: &CommandInfo, byte: usize) -> u8 {
    match ServiceActionField::of(info.opcode()) {
        Some(ServiceActionField::Byte1) if byte == 1 => 0x1F,
        Some(ServiceActionField::Bytes8To9) if (7..=9).contains(&byte) => 0xFF,
        _ => 0,
    }
}

#[test]
fn every_reserved_bit_of_every_command_is_pointed_at() {
    let mut checked = 0;
    for info in COMMANDS {
        for byte in 1..info.cdb_length() {
            for bit in 0..8u8 {
                let allowed = info.usage[byte] | fixed(info, byte);
                if allowed & (1 << bit) != 0 {
                    continue;
                }
                let mut cdb = minimal(info);
                cdb[byte] |= 1 << bit;
                // RDPROTECT/WRPROTECT/VRPROTECT are reported at the field's first bit.
                let expected_bit = if byte == info.protect_byte() && info.protect_field && bit >= 5
                {
                    7
                } else {
                    bit
                };
                assert_eq!(
                    err(&cdb),
                    field(byte as u16, Some(expected_bit)),
                    "{} byte {byte} bit {bit}",
                    info.name
                );
                checked += 1;
            }
        }
        // NACA in the CONTROL byte.
        let mut cdb = minimal(info);
        let control = info.control_byte();
        cdb[control] = 0x04;
        assert_eq!(
            err(&cdb),
            field(control as u16, Some(2)),
            "{} NACA",
            info.name
        );
    }
    assert!(checked > 300, "{checked}");
}

#[test]
fn every_command_rejects_a_short_cdb() {
    for info in COMMANDS {
        let cdb = minimal(info);
        for len in 1..cdb.len() {
            assert_eq!(
                err(&cdb[..len]),
                field(0, None),
                "{} truncated to {len}",
                info.name
            );
        }
    }
}

#[test]
fn lba_and_length_overflow_is_representable() {
    // Decoders keep the full 64-bit LBA and 32-bit length; the device checks the sum.
    let mut c16 = [0u8; 16];
    c16[0] = 0x8A;
    c16[2..10].copy_from_slice(&u64::MAX.to_be_bytes());
    c16[10..14].copy_from_slice(&u32::MAX.to_be_bytes());
    match ok(&c16) {
        Command::Write(rw) => {
            assert_eq!((rw.lba, rw.transfer_length), (u64::MAX, u32::MAX));
            assert_eq!(rw.lba.checked_add(rw.transfer_length.into()), None);
        }
        c => panic!("{c:?}"),
    }
}

#[test]
fn table_direction_matches_decoded_data_length() {
    use scsi::command::DataLength;
    use scsi::Direction;
    for info in COMMANDS {
        // Set every length-like field the usage mask allows so data-moving commands move data.
        let mut cdb = info.usage.to_vec();
        cdb[info.control_byte()] = 0;
        if matches!(info.opcode(), 0x2E | 0xAE | 0x8E) {
            cdb[1] &= !0x04; // BYTCHK 01b: WRITE AND VERIFY refuses 11b
        }
        if info.opcode() == 0xA3 {
            cdb[2] &= 0x80; // REPORTING OPTIONS 000b
            cdb[1] &= 0x3F; // PARAMETER DATA FORMAT 001b
        }
        if info.opcode() == 0x5F {
            cdb[5..9].copy_from_slice(&24u32.to_be_bytes()); // within the longest list taken
        }
        if info.opcode() == 0xA4 && info.service_action == Some(0x0A) {
            cdb[6..10].copy_from_slice(&8u32.to_be_bytes()); // a header and a descriptor
        }
        if info.opcode() == 0x83 && info.service_action != Some(0x1C) {
            cdb[10..14].copy_from_slice(&64u32.to_be_bytes()); // within the longest list taken
        }
        let (_, cmd) = decode(&cdb).unwrap_or_else(|e| panic!("{}: {e:?}", info.name));
        let direction = match cmd.data_length() {
            DataLength::None => Direction::None,
            DataLength::InBytes(_) | DataLength::InBlocks(_) => Direction::In,
            DataLength::OutBytes(_) | DataLength::OutBlocks(_) => Direction::Out,
        };
        assert_eq!(direction, info.direction, "{}", info.name);
    }
}

#[test]
fn table_is_sorted_and_unique() {
    // RSOC all-commands output follows the table, ordered by opcode then service action.
    for pair in COMMANDS.windows(2) {
        let key = |i: &scsi::CommandInfo| (i.opcode(), i.service_action.unwrap_or(0));
        assert!(
            key(&pair[0]) < key(&pair[1]),
            "{} before {}",
            pair[0].name,
            pair[1].name
        );
    }
}

/// READ(32)/WRITE(32) as Linux sd_setup_rw32_cmnd builds them: GROUP NUMBER in byte 6,
/// ADDITIONAL CDB LENGTH 18h, service action in bytes 8–9, flags in byte 10, DLD in byte 11,
/// the LBA's low 32 bits as EXPECTED INITIAL LOGICAL BLOCK REFERENCE TAG.
fn rw32(sa: u16, flags: u8, dld: u8, lba: u64, blocks: u32) -> [u8; 32] {
    let mut c = [0u8; 32];
    c[0] = VARIABLE_LENGTH_CDB;
    c[6] = 0x2A;
    c[7] = 0x18;
    c[8..10].copy_from_slice(&sa.to_be_bytes());
    c[10] = flags;
    c[11] = dld & 0x07;
    c[12..20].copy_from_slice(&lba.to_be_bytes());
    c[20..24].copy_from_slice(&(lba as u32).to_be_bytes());
    c[28..32].copy_from_slice(&blocks.to_be_bytes());
    c
}

/// WRITE SAME (32) and WRITE ATOMIC (32) (SBC-4): the (16) forms' fields at the
/// variable length CDB's offsets; ANCHOR refused in every WRITE SAME (ANC_SUP = 0).
#[test]
fn write_same32_and_write_atomic32_fields() {
    use scsi::command::WriteSame;
    let c = rw32(0x000D, 0x09, 0, 0x1_0000_0000, 70_000);
    assert_eq!(
        ok(&c),
        Command::WriteSame(WriteSame {
            unmap: true,
            ndob: true,
            lba: 0x1_0000_0000,
            number_of_logical_blocks: 70_000,
            group_number: 0x2A,
        })
    );
    assert_eq!(
        err(&rw32(0x000D, 0x10, 0, 0, 1)),
        field(10, Some(4)),
        "ANCHOR"
    );
    assert_eq!(
        err(&rw32(0x000D, 0x20, 0, 0, 1)),
        field(10, Some(7)),
        "WRPROTECT"
    );
    assert_eq!(
        err(&rw32(0x000D, 0, 1, 0, 1)),
        field(11, Some(0)),
        "reserved"
    );
    let mut ws10 = [0x41, 0x10, 0, 0, 0, 0, 0, 0, 1, 0];
    assert_eq!(err(&ws10), field(1, Some(4)), "WRITE SAME(10) ANCHOR");
    ws10[1] = 0x08;
    assert!(matches!(ok(&ws10), Command::WriteSame(w) if w.unmap && !w.ndob));
    let mut ws16 = [0u8; 16];
    ws16[0] = 0x93;
    ws16[1] = 0x10;
    assert_eq!(err(&ws16), field(1, Some(4)), "WRITE SAME(16) ANCHOR");

    let mut c = rw32(0x000F, 0x18, 0, 77, 100_000);
    c[4..6].copy_from_slice(&8u16.to_be_bytes());
    let Command::WriteAtomic {
        rw,
        atomic_boundary,
    } = ok(&c)
    else {
        panic!("not WRITE ATOMIC");
    };
    assert_eq!(
        (
            rw.lba,
            rw.transfer_length,
            rw.dpo,
            rw.fua,
            rw.dld,
            atomic_boundary
        ),
        (77, 100_000, true, true, 0, 8)
    );
    assert_eq!(err(&rw32(0x000F, 0, 1, 0, 1)), field(11, Some(0)), "no DLD");
    assert_eq!(err(&rw32(0x000F, 0x04, 0, 0, 1)), field(10, Some(2)));
}

#[test]
fn read32_and_write32_fields() {
    let expected = ReadWrite {
        lba: 0x0123_4567_89AB_CDEF,
        transfer_length: 0x0001_0002,
        dpo: true,
        fua: true,
        group_number: 0x2A,
        dld: 5,
    };
    let (info, cmd) = decode(&rw32(0x0009, 0x18, 5, expected.lba, 0x0001_0002)).unwrap();
    assert_eq!((info.name, cmd), ("READ(32)", Command::Read(expected)));
    let write = ReadWrite {
        dpo: false,
        dld: 7,
        ..expected
    };
    let (info, cmd) = decode(&rw32(0x000B, 0x08, 7, write.lba, write.transfer_length)).unwrap();
    assert_eq!((info.name, cmd), ("WRITE(32)", Command::Write(write)));
    // The application tag fields are accepted and ignored without protection information.
    let mut c = rw32(0x0009, 0, 1, 8, 1);
    c[24..28].copy_from_slice(&[0xDE, 0xAD, 0xFF, 0xFF]);
    match ok(&c) {
        Command::Read(rw) => assert_eq!((rw.lba, rw.transfer_length, rw.dld), (8, 1, 1)),
        c => panic!("{c:?}"),
    }
    // A longer buffer is cut at 32 bytes.
    let mut long = c.to_vec();
    long.extend_from_slice(&[0xFF; 8]);
    assert_eq!(ok(&long), ok(&c));
}

#[test]
fn variable_length_cdb_errors() {
    // ADDITIONAL CDB LENGTH other than 18h.
    for len in [0x00, 0x08, 0x10, 0x19, 0xFF] {
        let mut c = rw32(0x0009, 0, 0, 0, 1);
        c[7] = len;
        assert_eq!(err(&c), field(7, None), "additional length {len:02X}h");
    }
    // Unsupported service actions: the 16-bit SERVICE ACTION field.
    for sa in [0x0000, 0x0008, 0x000A, 0x000C, 0x0109, 0x0900, 0xFFFF] {
        assert_eq!(err(&rw32(sa, 0, 0, 0, 1)), field(8, None), "SA {sa:04X}h");
    }
    // Too short to hold the service action, or shorter than 32 bytes (16 bytes without the
    // extended CDB AHS).
    let c = rw32(0x000B, 0, 0, 0, 1);
    for len in [1, 2, 8, 9, 10, 16, 31] {
        assert_eq!(err(&c[..len]), field(0, None), "{len} bytes");
    }
    // WRPROTECT in byte 10, the obsolete bit 0 of byte 10 and DLD's neighbours in byte 11.
    assert_eq!(err(&rw32(0x000B, 0x20, 0, 0, 1)), field(10, Some(7)));
    assert_eq!(err(&rw32(0x000B, 0x01, 0, 0, 1)), field(10, Some(0)));
    // RARC (byte 10 bit 2) exists in READ(32) only.
    assert!(matches!(ok(&rw32(0x0009, 0x04, 0, 0, 1)), Command::Read(_)));
    assert_eq!(err(&rw32(0x000B, 0x04, 0, 0, 1)), field(10, Some(2)));
    let mut c = rw32(0x0009, 0, 0, 0, 1);
    c[11] = 0x08;
    assert_eq!(err(&c), field(11, Some(3)));
    // GROUP NUMBER is bits 5:0; bytes 2–5 are reserved.
    let mut c = rw32(0x0009, 0, 0, 0, 1);
    c[6] = 0x40;
    assert_eq!(err(&c), field(6, Some(6)));
    let mut c = rw32(0x0009, 0, 0, 0, 1);
    c[4] = 0x10;
    assert_eq!(err(&c), field(4, Some(4)));
    // CONTROL is byte 1: NACA and vendor bits.
    let mut c = rw32(0x0009, 0, 0, 0, 1);
    c[1] = 0x04;
    assert_eq!(err(&c), field(1, Some(2)));
    c[1] = 0x40;
    assert_eq!(err(&c), field(1, Some(6)));
}

#[test]
fn log_sense_fields() {
    let c = [0x4D, 0, 0x40 | 0x19, 0x21, 0, 0x00, 0x27, 0x08, 0x00, 0];
    assert_eq!(
        ok(&c),
        Command::LogSense(LogSense {
            pc: LogPageControl::CumulativeValues,
            page_code: 0x19,
            subpage_code: 0x21,
            parameter_pointer: 0x0027,
            allocation_length: 0x0800,
        })
    );
    // cdladm's probe: PC 00b, page 19h, subpage 21h, 2048 bytes.
    match ok(&[0x4D, 0, 0x19, 0x21, 0, 0, 0, 0x08, 0x00, 0]) {
        Command::LogSense(l) => assert_eq!(
            (l.pc, l.page_code, l.subpage_code, l.allocation_length),
            (LogPageControl::ThresholdValues, 0x19, 0x21, 2048)
        ),
        c => panic!("{c:?}"),
    }
    for (pc, expected) in [
        (2, LogPageControl::DefaultThresholdValues),
        (3, LogPageControl::DefaultCumulativeValues),
    ] {
        match ok(&[0x4D, 0, pc << 6, 0, 0, 0, 0, 0, 0xFF, 0]) {
            Command::LogSense(l) => assert_eq!(l.pc, expected),
            c => panic!("{c:?}"),
        }
    }
    // SP: no log parameters are saved. The obsolete PPC and reserved byte 4 are refused too.
    assert_eq!(
        err(&[0x4D, 0x01, 0, 0, 0, 0, 0, 0, 0xFF, 0]),
        field(1, Some(0))
    );
    assert_eq!(
        err(&[0x4D, 0x02, 0, 0, 0, 0, 0, 0, 0xFF, 0]),
        field(1, Some(1))
    );
    assert_eq!(
        err(&[0x4D, 0, 0, 0, 0x80, 0, 0, 0, 0xFF, 0]),
        field(4, Some(7))
    );
}

/// UNMAP and GET LBA STATUS (SBC-4 §5.30, §5.8): fields, and ANCHOR / REPORT TYPE refused
/// (ANC_SUP = 0, only "all LBAs").
#[test]
fn thin_provisioning_commands() {
    assert_eq!(
        ok(&[0x42, 0, 0, 0, 0, 0, 0x05, 0x01, 0x18, 0]),
        Command::Unmap(scsi::command::Unmap {
            group_number: 5,
            parameter_list_length: 0x118,
        })
    );
    assert_eq!(
        err(&[0x42, 0x01, 0, 0, 0, 0, 0, 0, 24, 0]),
        field(1, Some(0))
    );
    let mut get = [0u8; 16];
    get[0] = 0x9E;
    get[1] = 0x12;
    get[2..10].copy_from_slice(&77u64.to_be_bytes());
    get[10..14].copy_from_slice(&24u32.to_be_bytes());
    assert_eq!(
        ok(&get),
        Command::GetLbaStatus {
            lba: 77,
            allocation_length: 24
        }
    );
    get[14] = 0x01;
    assert_eq!(err(&get), field(14, Some(0)));
}

#[test]
fn reservation_access_follows_the_table_rows() {
    use scsi::table::{reservation_access, ReservationAccess::*};
    assert_eq!(reservation_access(&[0x12, 0, 0, 0, 36, 0]), Unrestricted);
    assert_eq!(reservation_access(&[0x00; 6]), Allowed, "TEST UNIT READY");
    assert_eq!(reservation_access(&[0x28; 10]), Read, "READ(10)");
    assert_eq!(reservation_access(&[0x2A; 10]), Write, "WRITE(10)");
    assert_eq!(
        reservation_access(&[0x5E, 0x00, 0, 0, 0, 0, 0, 0, 8, 0]),
        Allowed
    );
    assert_eq!(
        reservation_access(&[0x5F, 0x01, 0x01, 0, 0, 0, 0, 0, 24, 0]),
        OwnRules
    );
    // START STOP UNIT starting the unit is allowed, stopping it conflicts (SBC-4 table 13).
    assert_eq!(reservation_access(&[0x1B, 0, 0, 0, 0x01, 0]), Allowed);
    assert_eq!(reservation_access(&[0x1B, 0, 0, 0, 0x00, 0]), Write);
    assert_eq!(reservation_access(&[0x1B, 0, 0, 0, 0x11, 0]), Write);
    // PREVENT ALLOW MEDIUM REMOVAL allowing removal is allowed, preventing it conflicts.
    assert_eq!(reservation_access(&[0x1E, 0, 0, 0, 0, 0]), Allowed);
    assert_eq!(reservation_access(&[0x1E, 0, 0, 0, 1, 0]), Write);
    // Unknown opcodes and service actions, and an empty CDB, conflict.
    assert_eq!(reservation_access(&[0xC0; 6]), Write);
    assert_eq!(
        reservation_access(&[0x5E, 0x1F, 0, 0, 0, 0, 0, 0, 0, 0]),
        Write
    );
    assert_eq!(reservation_access(&[]), Write);
}

#[test]
fn sanitize_format_unit_write_atomic_and_timestamps_decode() {
    use scsi::command::{FormatUnit, Sanitize};
    use scsi::sanitize::SanitizeAction;
    let (_, cmd) = decode(&[0x48, 0xA1, 0, 0, 0, 0, 0, 0x02, 0x04, 0]).unwrap();
    assert_eq!(
        cmd,
        Command::Sanitize(Sanitize {
            immed: true,
            ause: true,
            action: SanitizeAction::Overwrite,
            parameter_list_length: 0x204,
        })
    );
    // The reserved bit of byte 1 and reserved bytes 2-6 (libiscsi's *Reserved tests).
    let e = decode(&[0x48, 0x42, 0, 0, 0, 0, 0, 0, 0, 0]).err().unwrap();
    assert_eq!(e, Sense::invalid_field_in_cdb(1, Some(6)));
    for byte in 2..7 {
        let mut cdb = [0x48, 0x02, 0, 0, 0, 0, 0, 0, 0, 0];
        cdb[byte] = byte as u8;
        let e = decode(&cdb).err().unwrap();
        assert_eq!(e.field.map(|f| f.byte), Some(byte as u16));
    }
    let e = decode(&[0x48, 0x04, 0, 0, 0, 0, 0, 0, 0, 0]).err().unwrap();
    assert_eq!(
        e,
        Sense::invalid_field_in_cdb(1, Some(4)),
        "no such service action"
    );

    let (_, cmd) = decode(&[0x04, 0x30, 0, 0, 0, 0]).unwrap();
    let f = FormatUnit {
        longlist: true,
        fmtdata: true,
    };
    assert_eq!(cmd, Command::FormatUnit(f));
    assert_eq!(f.header_length(), 8);

    let mut cdb = [0u8; 16];
    cdb[0] = 0x9C;
    cdb[1] = 0x18;
    cdb[2..10].copy_from_slice(&0x1234u64.to_be_bytes());
    cdb[10..12].copy_from_slice(&8u16.to_be_bytes());
    cdb[12..14].copy_from_slice(&16u16.to_be_bytes());
    let (_, cmd) = decode(&cdb).unwrap();
    let Command::WriteAtomic {
        rw,
        atomic_boundary,
    } = cmd
    else {
        panic!("{cmd:?}");
    };
    assert_eq!(
        (rw.lba, rw.transfer_length, rw.dpo, rw.fua),
        (0x1234, 16, true, true)
    );
    assert_eq!(atomic_boundary, 8);

    let (_, cmd) = decode(&[0xA3, 0x0F, 0, 0, 0, 0, 0, 0, 0, 12, 0, 0]).unwrap();
    assert_eq!(
        cmd,
        Command::ReportTimestamp {
            allocation_length: 12
        }
    );
    let (_, cmd) = decode(&[0xA4, 0x0F, 0, 0, 0, 0, 0, 0, 0, 12, 0, 0]).unwrap();
    assert_eq!(
        cmd,
        Command::SetTimestamp {
            parameter_list_length: 12
        }
    );
}

#[test]
fn set_target_port_groups_takes_a_header_and_whole_descriptors() {
    let cdb = |len: u32| {
        let mut cdb = [0xA4, 0x0A, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        cdb[6..10].copy_from_slice(&len.to_be_bytes());
        cdb
    };
    for len in [0, 4, 8, 4 + 4 * 65536] {
        let (info, cmd) = decode(&cdb(len)).unwrap_or_else(|e| panic!("{len}: {e:?}"));
        assert_eq!(info.name, "SET TARGET PORT GROUPS");
        assert_eq!(
            cmd,
            Command::SetTargetPortGroups {
                parameter_list_length: len
            }
        );
    }
    // Not a header and descriptors, or more descriptors than there are groups: INVALID
    // FIELD IN CDB at PARAMETER LIST LENGTH (SPC-4 §6.45).
    for len in [1, 3, 6, 9, 8 + 4 * 65536, u32::MAX] {
        assert_eq!(
            err(&cdb(len)),
            Sense::invalid_field_in_cdb(6, None),
            "{len}"
        );
    }
    // Reserved bytes 2-5 and 10, as every CDB's.
    let mut reserved = cdb(8);
    reserved[10] = 1;
    assert_eq!(err(&reserved).field.map(|f| f.byte), Some(10));
}
