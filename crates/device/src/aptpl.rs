//! Persistent reservations kept through power loss (APTPL = 1, SPC-4 §5.13.5.1): the contents
//! of the small file a logical unit's data plane keeps beside its data (`store::KeptFile`),
//! holding every registration (initiator port, key,
//! ALL_TG_PT) and the reservation (holder, type). PRgeneration is not kept: it is zero at
//! power on (SPC-4 §6.15.2).

use crate::persistent_reservation::{
    PersistentReservations, Registration, Reservation, MAX_REGISTRATIONS,
};
use scsi::persistent_reserve::ReservationType;

const MAGIC: &[u8] = b"stint persistent reservations v1\n";

/// The file's contents: MAGIC; the number of registrations (u16), each as its key (u64),
/// flags (bit 0 ALL_TG_PT) and initiator port (u16 length, bytes); then 0, or 1 and the
/// reservation's TYPE code and holder (u16 length, bytes). Big-endian, no padding.
pub(crate) fn encode(state: &PersistentReservations) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    let text = |s: &str, out: &mut Vec<u8>| {
        out.extend_from_slice(&(s.len() as u16).to_be_bytes());
        out.extend_from_slice(s.as_bytes());
    };
    out.extend_from_slice(&(state.registrations.len() as u16).to_be_bytes());
    for r in &state.registrations {
        out.extend_from_slice(&r.key.to_be_bytes());
        out.push(u8::from(r.all_tg_pt));
        text(&r.initiator_port, &mut out);
    }
    match &state.reservation {
        None => out.push(0),
        Some(r) => {
            out.extend_from_slice(&[1, r.kind.code()]);
            text(&r.holder, &mut out);
        }
    }
    out
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

pub(crate) fn decode(bytes: &[u8]) -> Result<PersistentReservations, String> {
    let rest = bytes
        .strip_prefix(MAGIC)
        .ok_or("not a persistent reservations file")?;
    let mut r = Reader(rest);
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
        let initiator_port = r.text()?;
        if key == 0
            || registrations
                .iter()
                .any(|x| x.initiator_port == initiator_port)
        {
            return Err(format!("a bad registration of {initiator_port}"));
        }
        registrations.push(Registration {
            initiator_port,
            key,
            all_tg_pt,
        });
    }
    let reservation = match r.u8()? {
        0 => None,
        1 => {
            let code = r.u8()?;
            let kind = ReservationType::from_code(code)
                .ok_or_else(|| format!("reservation type {code:X}h is not defined"))?;
            let holder = r.text()?;
            // A holder is registered; all registrants reservations need a registrant.
            let registered = |port: &str| registrations.iter().any(|x| x.initiator_port == port);
            let held = if kind.all_registrants() {
                !registrations.is_empty()
            } else {
                registered(&holder)
            };
            if !held {
                return Err(format!(
                    "the reservation's holder {holder} is not registered"
                ));
            }
            Some(Reservation { holder, kind })
        }
        _ => return Err("a bad reservation flag".into()),
    };
    if !r.0.is_empty() {
        return Err("trailing bytes".into());
    }
    Ok(PersistentReservations {
        generation: 0,
        registrations,
        reservation,
        aptpl: true,
    })
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
                    key: 0xA,
                    all_tg_pt: true,
                },
                Registration {
                    initiator_port: "iqn.2026-11.dev.stint:b,i,0x000000000002".into(),
                    key: 0xB,
                    all_tg_pt: false,
                },
            ],
            reservation: Some(Reservation {
                holder: "iqn.2026-11.dev.stint:b,i,0x000000000002".into(),
                kind: ReservationType::ExclusiveAccessRegistrantsOnly,
            }),
            aptpl: true,
        }
    }

    #[test]
    fn the_state_round_trips_and_prgeneration_restarts() {
        let loaded = decode(&encode(&state())).unwrap();
        assert_eq!(loaded.generation, 0, "PRgeneration restarts at power on");
        assert_eq!(
            loaded,
            PersistentReservations {
                generation: 0,
                ..state()
            }
        );
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
