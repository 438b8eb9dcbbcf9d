//! Persistent reservations kept through power loss (APTPL = 1, SPC-4 §5.13.5.1), and, where
//! several gateways export the logical unit, in the cluster (docs/gateways.md): the contents
//! of the small file a logical unit's data plane keeps beside its data (`store::KeptFile`), or
//! of the RADOS object the gateways share, holding every registration (initiator port, target
//! port, key, ALL_TG_PT), the reservation (holder, type), PRgeneration and APTPL. A kept file
//! restarts PRgeneration at zero at power on (SPC-4 §6.15.2); the gateways' object keeps it,
//! since the logical unit lives on while any gateway does. The gateways' object also names
//! the holder of a RESERVE (6)/(10) reservation, which a kept file never holds: SPC-2
//! reservations do not survive power loss.

use crate::persistent_reservation::{
    ItNexus, PersistentReservations, Registration, Reservation, MAX_REGISTRATIONS,
};
use scsi::persistent_reserve::ReservationType;

/// The first version: no target ports (a lone server's one, 1), no PRgeneration, APTPL set.
const MAGIC_V1: &[u8] = b"stint persistent reservations v1\n";
const MAGIC: &[u8] = b"stint persistent reservations v2\n";

/// The target port of every registration of a version 1 file: a lone server's.
const V1_TARGET_PORT: u16 = 1;

/// The contents: MAGIC; PRgeneration (u32); flags (bit 0 APTPL); the number of
/// registrations (u16), each as its key (u64), flags (bit 0 ALL_TG_PT), relative target port
/// identifier (u16) and initiator port (u16 length, bytes); then 0, or 1 and the reservation's
/// TYPE code, its holder's relative target port identifier (u16) and initiator port (u16
/// length, bytes). Big-endian, no padding.
pub(crate) fn encode(state: &PersistentReservations) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&state.generation.to_be_bytes());
    out.push(u8::from(state.aptpl));
    out.extend_from_slice(&(state.registrations.len() as u16).to_be_bytes());
    for r in &state.registrations {
        out.extend_from_slice(&r.key.to_be_bytes());
        out.push(u8::from(r.all_tg_pt));
        out.extend_from_slice(&r.target_port.to_be_bytes());
        text(&r.initiator_port, &mut out);
    }
    match &state.reservation {
        None => out.push(0),
        Some(r) => {
            out.extend_from_slice(&[1, r.kind.code()]);
            out.extend_from_slice(&r.holder_target_port.to_be_bytes());
            text(&r.holder, &mut out);
        }
    }
    out
}

/// The gateways' object: the state as [`encode`] has it, then, while an I_T nexus holds a
/// RESERVE (6)/(10) reservation, its relative target port identifier (u16) and initiator port
/// (u16 length, bytes); nothing after the state otherwise, so an object without one is
/// what gateways of the previous version wrote and read.
pub(crate) fn encode_shared(state: &PersistentReservations, spc2: Option<&ItNexus>) -> Vec<u8> {
    let mut out = encode(state);
    if let Some(holder) = spc2 {
        out.extend_from_slice(&holder.target_port.to_be_bytes());
        text(&holder.initiator_port, &mut out);
    }
    out
}

/// An initiator port: u16 length, bytes.
fn text(s: &str, out: &mut Vec<u8>) {
    out.extend_from_slice(&(s.len() as u16).to_be_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// The state and the RESERVE (6)/(10) holder of the gateways' object ([`encode_shared`]).
pub(crate) fn decode_shared(
    bytes: &[u8],
) -> Result<(PersistentReservations, Option<ItNexus>), String> {
    let mut r = Reader(bytes);
    let state = r.state()?;
    let spc2 = if r.0.is_empty() {
        None
    } else {
        let target_port = r.u16()?;
        let initiator_port = r.text()?;
        Some(ItNexus {
            initiator_port,
            target_port,
        })
    };
    r.end()?;
    Ok((state, spc2))
}

/// Reads the fields in order; every shortfall is the same error.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let (head, rest) = self.0.split_at_checked(n).ok_or("truncated")?;
        self.0 = rest;
        Ok(head)
    }

    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, String> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    fn u32(&mut self) -> Result<u32, String> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Result<u64, String> {
        let mut b = [0; 8];
        b.copy_from_slice(self.take(8)?);
        Ok(u64::from_be_bytes(b))
    }

    fn text(&mut self) -> Result<String, String> {
        let n = usize::from(self.u16()?);
        String::from_utf8(self.take(n)?.to_vec())
            .map_err(|_| "an initiator port is not UTF-8".into())
    }
}

/// A kept file's state at power on: PRgeneration zero (SPC-4 §6.15.2).
pub(crate) fn decode_kept(bytes: &[u8]) -> Result<PersistentReservations, String> {
    decode(bytes).map(|state| PersistentReservations {
        generation: 0,
        ..state
    })
}

/// The state `bytes` hold, either version.
pub(crate) fn decode(bytes: &[u8]) -> Result<PersistentReservations, String> {
    let mut r = Reader(bytes);
    let state = r.state()?;
    r.end()?;
    Ok(state)
}

impl Reader<'_> {
    fn end(&self) -> Result<(), String> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err("trailing bytes".into())
        }
    }

    /// The state, either version, up to its last field.
    fn state(&mut self) -> Result<PersistentReservations, String> {
        let (v1, rest) = match (self.0.strip_prefix(MAGIC), self.0.strip_prefix(MAGIC_V1)) {
            (Some(rest), _) => (false, rest),
            (None, Some(rest)) => (true, rest),
            (None, None) => return Err("not a persistent reservations file".into()),
        };
        self.0 = rest;
        let r = self;
        let (generation, aptpl) = if v1 {
            (0, true)
        } else {
            (r.u32()?, r.u8()? & 1 != 0)
        };
        let count = usize::from(r.u16()?);
        if count > MAX_REGISTRATIONS {
            return Err(format!(
                "{count} registrations; a logical unit keeps at most {MAX_REGISTRATIONS}"
            ));
        }
        let mut registrations: Vec<Registration> = Vec::with_capacity(count);
        for _ in 0..count {
            let key = r.u64()?;
            let all_tg_pt = r.u8()? & 1 != 0;
            let target_port = if v1 { V1_TARGET_PORT } else { r.u16()? };
            let initiator_port = r.text()?;
            let registration = Registration {
                initiator_port,
                target_port,
                key,
                all_tg_pt,
            };
            if key == 0 || registrations.iter().any(|x| x.overlaps(&registration)) {
                return Err(format!(
                    "a bad registration of {}",
                    registration.initiator_port
                ));
            }
            registrations.push(registration);
        }
        let reservation = match r.u8()? {
            0 => None,
            1 => {
                let code = r.u8()?;
                let kind = ReservationType::from_code(code)
                    .ok_or_else(|| format!("reservation type {code:X}h is not defined"))?;
                let holder_target_port = if v1 { V1_TARGET_PORT } else { r.u16()? };
                let holder = r.text()?;
                // A holder is registered; all registrants reservations need a registrant.
                let registered = registrations.iter().any(|x| {
                    x.initiator_port == holder
                        && (x.all_tg_pt || x.target_port == holder_target_port)
                });
                let held = if kind.all_registrants() {
                    !registrations.is_empty()
                } else {
                    registered
                };
                if !held {
                    return Err(format!(
                        "the reservation's holder {holder} is not registered"
                    ));
                }
                Some(Reservation {
                    holder,
                    holder_target_port,
                    kind,
                })
            }
            _ => return Err("a bad reservation flag".into()),
        };
        Ok(PersistentReservations {
            generation,
            registrations,
            reservation,
            aptpl,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> PersistentReservations {
        PersistentReservations {
            generation: 9,
            registrations: vec![
                Registration {
                    initiator_port: "iqn.2026-11.dev.stint:a,i,0x000000000001".into(),
                    target_port: 1,
                    key: 0xA,
                    all_tg_pt: true,
                },
                Registration {
                    initiator_port: "iqn.2026-11.dev.stint:b,i,0x000000000002".into(),
                    target_port: 2,
                    key: 0xB,
                    all_tg_pt: false,
                },
            ],
            reservation: Some(Reservation {
                holder: "iqn.2026-11.dev.stint:b,i,0x000000000002".into(),
                holder_target_port: 2,
                kind: ReservationType::ExclusiveAccessRegistrantsOnly,
            }),
            aptpl: true,
        }
    }

    #[test]
    fn the_state_round_trips_and_prgeneration_restarts_from_a_file() {
        assert_eq!(decode(&encode(&state())).unwrap(), state());
        let not_kept = PersistentReservations {
            aptpl: false,
            ..state()
        };
        assert_eq!(decode(&encode(&not_kept)).unwrap(), not_kept);
        let loaded = decode_kept(&encode(&state())).unwrap();
        assert_eq!(loaded.generation, 0, "PRgeneration restarts at power on");
        assert_eq!(
            loaded,
            PersistentReservations {
                generation: 0,
                ..state()
            }
        );
    }

    /// A file of the first version (no target ports, no PRgeneration): a lone server's, its
    /// registrations through target port 1.
    #[test]
    fn a_version_1_file_is_read_as_target_port_1() {
        let port = b"iqn.2026-11.dev.stint:a,i,0x000000000001";
        let mut v1 = MAGIC_V1.to_vec();
        v1.extend_from_slice(&1u16.to_be_bytes());
        v1.extend_from_slice(&0xAu64.to_be_bytes());
        v1.push(0);
        v1.extend_from_slice(&(port.len() as u16).to_be_bytes());
        v1.extend_from_slice(port);
        v1.extend_from_slice(&[1, ReservationType::WriteExclusive.code()]);
        v1.extend_from_slice(&(port.len() as u16).to_be_bytes());
        v1.extend_from_slice(port);
        let s = decode_kept(&v1).unwrap();
        assert!(s.aptpl);
        assert_eq!(s.registrations[0].target_port, 1);
        assert_eq!(s.reservation.unwrap().holder_target_port, 1);
    }

    #[test]
    fn the_gateways_object_names_a_reserve_holder_after_the_state() {
        let holder = ItNexus {
            initiator_port: "iqn.2026-11.dev.stint:c,i,0x000000000003".into(),
            target_port: 2,
        };
        let bytes = encode_shared(&state(), Some(&holder));
        assert_eq!(decode_shared(&bytes).unwrap(), (state(), Some(holder)));
        // Without one, the object is what the previous version wrote, read as none.
        assert_eq!(encode_shared(&state(), None), encode(&state()));
        assert_eq!(decode_shared(&encode(&state())).unwrap(), (state(), None));
        // A kept file never holds one.
        assert!(decode(&bytes).unwrap_err().contains("trailing bytes"));
        for n in encode(&state()).len() + 1..bytes.len() {
            let e = decode_shared(&bytes[..n]).unwrap_err();
            assert!(e.contains("truncated"), "cut at {n}: {e}");
        }
        let e = decode_shared(&[bytes.as_slice(), &[0]].concat()).unwrap_err();
        assert!(e.contains("trailing bytes"), "{e}");
    }

    #[test]
    fn overlapping_registrations_are_refused() {
        let mut twice = state();
        let mut second = twice.registrations[0].clone();
        second.all_tg_pt = false;
        second.target_port = 2;
        second.key = 7;
        // A is registered with ALL_TG_PT: also through port 2 would be one nexus twice.
        twice.registrations.push(second);
        let e = decode(&encode(&twice)).unwrap_err();
        assert!(e.contains("bad registration"), "{e}");
        // Through another target port alone it is another I_T nexus.
        twice.registrations[0].all_tg_pt = false;
        assert_eq!(decode(&encode(&twice)).unwrap(), twice);
    }

    #[test]
    fn the_holder_must_be_registered_through_its_target_port() {
        let mut s = state();
        s.reservation.as_mut().unwrap().holder_target_port = 1;
        let e = decode(&encode(&s)).unwrap_err();
        assert!(e.contains("not registered"), "{e}");
    }

    #[test]
    fn corrupt_contents_are_refused_with_the_reason() {
        let good = encode(&state());
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (
                b"something else".to_vec(),
                "not a persistent reservations file",
            ),
            (good[..good.len() - 1].to_vec(), "truncated"),
            ([good.as_slice(), &[0]].concat(), "trailing bytes"),
            (
                {
                    // The holder's registration (the second) given another port.
                    let mut b = good.clone();
                    let at = b.len() - 3;
                    b[at] = b'9';
                    b
                },
                "not registered",
            ),
        ];
        for (bytes, why) in cases {
            let e = decode(&bytes).unwrap_err();
            assert!(e.contains(why), "{e}");
        }
    }
}
