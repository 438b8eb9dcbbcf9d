//! The SCSI codec both ways: what an initiator encodes is what the device decodes. Byte 0
//! picks what the rest is:
//! - a CDB: one that decodes, encoded again in its form (the table entry), decodes to the same
//!   entry and command (`Command::emit` inverts the decoders);
//! - a sense the device could send (a field pointer under ILLEGAL REQUEST or COPY ABORTED, a
//!   progress indication under NO SENSE or NOT READY, ILI, INFORMATION), written in descriptor
//!   format and, when its INFORMATION fits the 32 bits there, in fixed format: `Sense::parse`
//!   gives it back;
//! - sense data of any target: what `Sense::parse` reads of it, written in descriptor format,
//!   parses back the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use scsi::sense::FieldPointer;
use scsi::{Asc, Sense, SenseKey};

fuzz_target!(|input: &[u8]| {
    let Some((&knobs, data)) = input.split_first() else {
        return;
    };
    match knobs % 3 {
        0 => cdb(data),
        1 => {
            if let Some(sense) = device_sense(data) {
                round_trip(&sense);
            }
        }
        _ => {
            if let Some(sense) = Sense::parse(data) {
                let mut out = Vec::new();
                sense.write_descriptor(&mut out);
                assert_eq!(Sense::parse(&out), Some(sense), "{out:02x?}");
            }
        }
    }
});

fn cdb(cdb: &[u8]) {
    let Ok((info, command)) = scsi::decode(cdb) else {
        return;
    };
    let again = command
        .emit(info)
        .unwrap_or_else(|e| panic!("{command:?} decoded from {cdb:02x?}: {e}"));
    assert_eq!(again.len(), info.cdb_length());
    match scsi::decode(&again) {
        Ok((back, decoded)) => assert_eq!(
            (back.name, decoded),
            (info.name, command),
            "{cdb:02x?} re-encoded as {again:02x?}"
        ),
        Err(sense) => panic!("{cdb:02x?} re-encoded as {again:02x?}: {sense:?}"),
    }
}

/// A sense as the device builds one: the sense-key specific field SPC-5 table 62 gives its
/// key, if any. `None` for the obsolete key 0Ch.
fn device_sense(b: &[u8]) -> Option<Sense> {
    let at = |i: usize| b.get(i).copied().unwrap_or(0);
    let key = SenseKey::from_code(at(0))?;
    let mut sense = Sense::new(key, Asc(at(1), at(2)));
    let flags = at(3);
    let value = u16::from_be_bytes([at(4), at(5)]);
    match key {
        SenseKey::IllegalRequest | SenseKey::CopyAborted if flags & 1 != 0 => {
            sense.field = Some(FieldPointer {
                in_cdb: flags & 2 != 0,
                byte: value,
                bit: (flags & 4 != 0).then_some(flags >> 5),
            });
        }
        SenseKey::NoSense | SenseKey::NotReady if flags & 1 != 0 => sense.progress = Some(value),
        _ => {}
    }
    sense.ili = flags & 8 != 0;
    if flags & 16 != 0 {
        let info: [u8; 8] = std::array::from_fn(|i| at(6 + i));
        sense.information = Some(u64::from_be_bytes(info));
    }
    Some(sense)
}

fn round_trip(sense: &Sense) {
    // The fixed format has 32 bits of INFORMATION: a signed difference with ILI.
    let fits_fixed = sense.information.is_none_or(|info| {
        if sense.ili {
            i32::try_from(info as i64).is_ok()
        } else {
            u32::try_from(info).is_ok()
        }
    });
    for descriptor in [true, false] {
        if !descriptor && !fits_fixed {
            continue;
        }
        let mut out = Vec::new();
        sense.write(descriptor, &mut out);
        assert_eq!(Sense::parse(&out).as_ref(), Some(sense), "{out:02x?}");
    }
}
