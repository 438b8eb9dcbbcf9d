//! CHAP in the login's security stage (RFC 7143 §12.1.3 over RFC 1994): the initiator proves
//! it knows a secret by answering the target's challenge with MD5 (CHAP_A=5), and may ask the
//! target to prove its own secret in turn (mutual CHAP).

use md5::{Digest, Md5};

/// A name and the secret its holder proves it knows.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub user: String,
    pub secret: Vec<u8>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print a secret.
        write!(
            f,
            "Credentials {{ user: {:?}, secret: <{} bytes> }}",
            self.user,
            self.secret.len()
        )
    }
}

/// What a target (or discovery) requires of initiators.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chap {
    /// What an initiator must prove (CHAP_N, CHAP_R).
    pub initiator: Credentials,
    /// What the target answers an initiator's own challenge with, if mutual CHAP is set up.
    pub target: Option<Credentials>,
}

/// CHAP_A value of MD5 (RFC 1994 §6; RFC 7143 §12.1.3 makes it mandatory).
pub const MD5_ALGORITHM: &str = "5";
/// Challenge length: RFC 7143 §12.1.3 asks for at least as long as the hash, 16 bytes.
const CHALLENGE_LEN: usize = 16;

/// RFC 1994 §4.1: the response is MD5 over the identifier, the secret and the challenge.
pub fn response(id: u8, secret: &[u8], challenge: &[u8]) -> [u8; 16] {
    let mut h = Md5::new();
    h.update([id]);
    h.update(secret);
    h.update(challenge);
    h.finalize().into()
}

/// A binary value in hexadecimal form, `0x…` (RFC 7143 §6.1); the base64 form is not taken.
pub fn decode_hex(value: &str) -> Option<Vec<u8>> {
    let digits = value
        .strip_prefix("0x")
        .or_else(|| value.strip_prefix("0X"))?;
    // from_str_radix alone would take a sign: "0x21+4" is no hex-constant (RFC 7143 §6.1).
    if digits.is_empty() || digits.len() % 2 != 0 || !digits.bytes().all(|b| b.is_ascii_hexdigit())
    {
        return None;
    }
    (0..digits.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(digits.get(i..i + 2)?, 16).ok())
        .collect()
}

pub fn encode_hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(2 + 2 * bytes.len());
    s.push_str("0x");
    for b in bytes {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// Why a CHAP exchange failed (the login ends with 0201h, authentication failure).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChapError {
    /// The initiator offered no algorithm we speak (we speak MD5).
    NoAlgorithm,
    /// A key out of turn, missing, or malformed.
    Protocol(&'static str),
    /// Wrong name or wrong response.
    Refused,
    /// The initiator asked the target to prove a secret it has none of, or reflected our
    /// challenge back (RFC 7143 §12.1.3 forbids answering the same challenge).
    Mutual(&'static str),
    /// No randomness for a challenge.
    Random,
}

impl std::fmt::Display for ChapError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NoAlgorithm => f.write_str("no algorithm offered that stint speaks (MD5)"),
            Self::Protocol(what) | Self::Mutual(what) => f.write_str(what),
            Self::Refused => f.write_str("wrong name or wrong response"),
            Self::Random => f.write_str("no randomness for a challenge"),
        }
    }
}

/// The target's side of one CHAP exchange.
#[derive(Debug)]
pub enum Exchange {
    /// AuthMethod=CHAP agreed: the initiator names its algorithms next (CHAP_A).
    Algorithm,
    /// Challenge sent; the initiator answers with CHAP_N and CHAP_R.
    Challenged {
        id: u8,
        challenge: [u8; CHALLENGE_LEN],
    },
    /// The initiator proved its secret (and the target its own, if asked).
    Authenticated,
}

impl Exchange {
    /// One request's CHAP keys (`key`, `value`), in order; the answer keys go to `out` as
    /// (key, value). Moves the exchange on or fails it.
    pub fn step(
        &mut self,
        chap: &Chap,
        keys: &[(String, String)],
        out: &mut Vec<(&'static str, String)>,
    ) -> Result<(), ChapError> {
        let get = |k: &str| {
            keys.iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.as_str())
        };
        match self {
            Exchange::Algorithm => {
                let offered = get("CHAP_A").ok_or(ChapError::Protocol("CHAP_A expected"))?;
                if !offered.split(',').any(|a| a == MD5_ALGORITHM) {
                    return Err(ChapError::NoAlgorithm);
                }
                let mut random = [0u8; CHALLENGE_LEN + 1];
                getrandom::fill(&mut random).map_err(|_| ChapError::Random)?;
                let id = random[0];
                let mut challenge = [0u8; CHALLENGE_LEN];
                challenge.copy_from_slice(&random[1..]);
                out.push(("CHAP_A", MD5_ALGORITHM.to_owned()));
                out.push(("CHAP_I", id.to_string()));
                out.push(("CHAP_C", encode_hex(&challenge)));
                *self = Exchange::Challenged { id, challenge };
                Ok(())
            }
            Exchange::Challenged { id, challenge } => {
                let name = get("CHAP_N").ok_or(ChapError::Protocol("CHAP_N expected"))?;
                let answer = get("CHAP_R")
                    .and_then(decode_hex)
                    .ok_or(ChapError::Protocol("CHAP_R expected in 0x form"))?;
                let expected = response(*id, &chap.initiator.secret, challenge);
                if name != chap.initiator.user || !constant_time_eq(&answer, &expected) {
                    return Err(ChapError::Refused);
                }
                match (get("CHAP_I"), get("CHAP_C")) {
                    (None, None) => {}
                    (Some(i), Some(c)) => {
                        let their_id: u8 = i
                            .parse()
                            .map_err(|_| ChapError::Protocol("CHAP_I is not 0..=255"))?;
                        let theirs = decode_hex(c)
                            .ok_or(ChapError::Protocol("CHAP_C expected in 0x form"))?;
                        if theirs == challenge.as_slice() {
                            return Err(ChapError::Mutual("the initiator sent our own challenge"));
                        }
                        let target = chap
                            .target
                            .as_ref()
                            .ok_or(ChapError::Mutual("no target secret for mutual CHAP"))?;
                        out.push(("CHAP_N", target.user.clone()));
                        let r = response(their_id, &target.secret, &theirs);
                        out.push(("CHAP_R", encode_hex(&r)));
                    }
                    _ => return Err(ChapError::Protocol("CHAP_I and CHAP_C go together")),
                }
                *self = Exchange::Authenticated;
                Ok(())
            }
            Exchange::Authenticated => Err(ChapError::Protocol("CHAP is already done")),
        }
    }
}

/// Compares without an early exit, so the time taken does not tell how much matched.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn creds(user: &str, secret: &str) -> Credentials {
        Credentials {
            user: user.into(),
            secret: secret.as_bytes().to_vec(),
        }
    }

    fn keys(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    /// RFC 1994's construction, checked against an independent MD5 of the concatenation.
    #[test]
    fn response_is_md5_of_id_secret_challenge() {
        let r = response(1, b"secret", &[0xAA, 0xBB]);
        let mut whole = vec![1u8];
        whole.extend_from_slice(b"secret");
        whole.extend_from_slice(&[0xAA, 0xBB]);
        assert_eq!(r, <[u8; 16]>::from(Md5::digest(&whole)));
        // MD5("") is d41d8cd98f00b204e9800998ecf8427e: the hash itself is MD5.
        assert_eq!(
            encode_hex(&Md5::digest(b"")),
            "0xd41d8cd98f00b204e9800998ecf8427e"
        );
    }

    #[test]
    fn hex_values() {
        assert_eq!(decode_hex("0x00ff10"), Some(vec![0, 255, 16]));
        assert_eq!(decode_hex("0XAB"), Some(vec![0xAB]));
        for bad in ["00ff", "0x", "0x0", "0xzz", "0bAAAA"] {
            assert_eq!(decode_hex(bad), None, "{bad}");
        }
    }

    /// Found by the `text` fuzz target: a pair of digits read as a signed number let "+4"
    /// through as 04h, so a CHAP_R or CHAP_C with signs was taken as binary.
    #[test]
    fn hex_values_have_no_signs() {
        for bad in ["0x21+4", "0x+1+2", "0x-1", "0x+f"] {
            assert_eq!(decode_hex(bad), None, "{bad}");
        }
    }

    fn challenged(chap: &Chap) -> (Exchange, u8, Vec<u8>) {
        let mut x = Exchange::Algorithm;
        let mut out = Vec::new();
        x.step(chap, &keys(&[("CHAP_A", "7,5")]), &mut out).unwrap();
        assert_eq!(out[0], ("CHAP_A", "5".to_owned()));
        let id: u8 = out[1].1.parse().unwrap();
        let challenge = decode_hex(&out[2].1).unwrap();
        assert_eq!(challenge.len(), 16);
        (x, id, challenge)
    }

    #[test]
    fn one_way_and_mutual() {
        let chap = Chap {
            initiator: creds("alice", "initiator-secret"),
            target: Some(creds("target", "target-secret-x")),
        };
        let (mut x, id, c) = challenged(&chap);
        let r = encode_hex(&response(id, b"initiator-secret", &c));
        let mut out = Vec::new();
        x.step(
            &chap,
            &keys(&[("CHAP_N", "alice"), ("CHAP_R", &r)]),
            &mut out,
        )
        .unwrap();
        assert!(out.is_empty() && matches!(x, Exchange::Authenticated));

        let (mut x, id, c) = challenged(&chap);
        let r = encode_hex(&response(id, b"initiator-secret", &c));
        let mut out = Vec::new();
        let keys = keys(&[
            ("CHAP_N", "alice"),
            ("CHAP_R", &r),
            ("CHAP_I", "77"),
            ("CHAP_C", "0x0102030405060708090a0b0c0d0e0f10"),
        ]);
        x.step(&chap, &keys, &mut out).unwrap();
        let theirs = decode_hex("0x0102030405060708090a0b0c0d0e0f10").unwrap();
        assert_eq!(out[0], ("CHAP_N", "target".to_owned()));
        assert_eq!(
            out[1].1,
            encode_hex(&response(77, b"target-secret-x", &theirs))
        );
    }

    #[test]
    fn wrong_answers_fail() {
        let chap = Chap {
            initiator: creds("alice", "initiator-secret"),
            target: None,
        };
        let mut out = Vec::new();
        assert_eq!(
            Exchange::Algorithm.step(&chap, &keys(&[("CHAP_A", "7")]), &mut out),
            Err(ChapError::NoAlgorithm)
        );
        let (mut x, id, c) = challenged(&chap);
        let wrong = encode_hex(&response(id, b"guessed-secret!", &c));
        assert_eq!(
            x.step(
                &chap,
                &keys(&[("CHAP_N", "alice"), ("CHAP_R", &wrong)]),
                &mut out
            ),
            Err(ChapError::Refused)
        );
        let (mut x, id, c) = challenged(&chap);
        let right = encode_hex(&response(id, b"initiator-secret", &c));
        assert_eq!(
            x.step(
                &chap,
                &keys(&[("CHAP_N", "mallory"), ("CHAP_R", &right)]),
                &mut out
            ),
            Err(ChapError::Refused)
        );
        // Mutual CHAP without a target secret, and a reflected challenge.
        let (mut x, id, c) = challenged(&chap);
        let right = encode_hex(&response(id, b"initiator-secret", &c));
        let mutual = keys(&[
            ("CHAP_N", "alice"),
            ("CHAP_R", &right),
            ("CHAP_I", "1"),
            ("CHAP_C", &encode_hex(&c)),
        ]);
        assert!(matches!(
            x.step(&chap, &mutual, &mut out),
            Err(ChapError::Mutual(_))
        ));
    }
}
