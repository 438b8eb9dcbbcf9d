//! CHAP in the login's security stage (RFC 7143 §12.1.3 over RFC 1994): the initiator proves
//! it knows a secret by answering the target's challenge with a hash (CHAP_A: MD5, or SHA-256
//! and SHA3-256 from RFC 9140 when the initiator offers them), and may ask the target to prove
//! its own secret in turn (mutual CHAP). [`Exchange`] is the target's side, [`Answerer`] the
//! initiator's.

use md5::Md5;
use sha2::Sha256;
use sha3::Sha3_256;

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

/// The two secrets of a CHAP setup: on a target, what initiators must prove and what it answers
/// mutual CHAP with; on an initiator, what it proves and what it expects the target to prove.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chap {
    /// What an initiator must prove (CHAP_N, CHAP_R).
    pub initiator: Credentials,
    /// What the target proves when the initiator challenges it (mutual CHAP).
    pub target: Option<Credentials>,
}

/// The hash functions of CHAP_A (RFC 1994 §6, RFC 9140 §3 and the IANA PPP registry).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    /// 5: mandatory in RFC 7143 §12.1.3, the only one many initiators (libiscsi) speak.
    Md5,
    /// 7 (RFC 9140).
    Sha256,
    /// 8 (RFC 9140).
    Sha3_256,
}

impl Algorithm {
    /// What an initiator offers, strongest first.
    pub const PREFERENCE: [Algorithm; 3] = [Algorithm::Sha3_256, Algorithm::Sha256, Algorithm::Md5];

    pub fn code(self) -> u8 {
        match self {
            Algorithm::Md5 => 5,
            Algorithm::Sha256 => 7,
            Algorithm::Sha3_256 => 8,
        }
    }

    pub fn from_code(code: &str) -> Option<Algorithm> {
        Self::PREFERENCE
            .into_iter()
            .find(|a| a.code().to_string() == code)
    }

    /// The first of an initiator's CHAP_A list (in its order of preference, RFC 7143 §6.2)
    /// that stint speaks.
    pub fn choose(offered: &str) -> Option<Algorithm> {
        offered.split(',').find_map(Algorithm::from_code)
    }

    /// Digest length, which is also our challenge length: RFC 7143 §12.1.3 asks for a
    /// challenge at least as long as the hash (RFC 9140 §3 likewise).
    pub fn digest_len(self) -> usize {
        match self {
            Algorithm::Md5 => 16,
            Algorithm::Sha256 | Algorithm::Sha3_256 => 32,
        }
    }

    /// RFC 1994 §4.1: the response is the hash of the identifier, the secret and the challenge.
    pub fn response(self, id: u8, secret: &[u8], challenge: &[u8]) -> Vec<u8> {
        fn hash<D: digest::Digest>(id: u8, secret: &[u8], challenge: &[u8]) -> Vec<u8> {
            let mut h = D::new();
            h.update([id]);
            h.update(secret);
            h.update(challenge);
            h.finalize().to_vec()
        }
        match self {
            Algorithm::Md5 => hash::<Md5>(id, secret, challenge),
            Algorithm::Sha256 => hash::<Sha256>(id, secret, challenge),
            Algorithm::Sha3_256 => hash::<Sha3_256>(id, secret, challenge),
        }
    }
}

impl std::fmt::Display for Algorithm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Algorithm::Md5 => "MD5",
            Algorithm::Sha256 => "SHA-256",
            Algorithm::Sha3_256 => "SHA3-256",
        })
    }
}

/// An identifier and a challenge of `len` bytes from the operating system's randomness.
fn challenge(len: usize) -> Result<(u8, Vec<u8>), ChapError> {
    let mut random = vec![0u8; len + 1];
    getrandom::fill(&mut random).map_err(|_| ChapError::Random)?;
    let id = random.remove(0);
    Ok((id, random))
}

/// A binary value (RFC 7143 §6.1): hexadecimal `0x…` or base64 `0b…`.
pub fn decode_binary(value: &str) -> Option<Vec<u8>> {
    use base64::Engine;
    let (prefix, digits) = value.split_at_checked(2)?;
    match prefix {
        "0x" | "0X" => decode_hex_digits(digits),
        "0b" | "0B" => base64::engine::general_purpose::STANDARD
            .decode(digits)
            .ok()
            .filter(|b| !b.is_empty()),
        _ => None,
    }
}

fn decode_hex_digits(digits: &str) -> Option<Vec<u8>> {
    // Digits only: from_str_radix alone would take "+4" as a byte.
    if digits.is_empty()
        || !digits.len().is_multiple_of(2)
        || !digits.bytes().all(|b| b.is_ascii_hexdigit())
    {
        return None;
    }
    (0..digits.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(digits.get(i..i + 2)?, 16).ok())
        .collect()
}

/// A binary value in the hexadecimal form, which every initiator reads.
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
    /// The initiator offered no algorithm we speak.
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
            Self::NoAlgorithm => f.write_str(
                "no CHAP algorithm offered that stint speaks (5 MD5, 7 SHA-256, 8 SHA3-256)",
            ),
            Self::Protocol(what) | Self::Mutual(what) => f.write_str(what),
            Self::Refused => f.write_str("wrong name or wrong response"),
            Self::Random => f.write_str("no randomness for a challenge"),
        }
    }
}

/// The value of `k` among a request's keys.
fn get<'a>(keys: &'a [(String, String)], k: &str) -> Option<&'a str> {
    keys.iter()
        .find(|(key, _)| key == k)
        .map(|(_, v)| v.as_str())
}

/// CHAP_I: a number 0..=255 (RFC 7143 §12.1.3).
fn identifier(keys: &[(String, String)]) -> Result<Option<u8>, ChapError> {
    get(keys, "CHAP_I")
        .map(|i| {
            i.parse()
                .map_err(|_| ChapError::Protocol("CHAP_I is not 0..=255"))
        })
        .transpose()
}

/// The target's side of one CHAP exchange.
#[derive(Debug)]
pub enum Exchange {
    /// AuthMethod=CHAP agreed: the initiator names its algorithms next (CHAP_A).
    Algorithm,
    /// Challenge sent; the initiator answers with CHAP_N and CHAP_R.
    Challenged {
        algorithm: Algorithm,
        id: u8,
        challenge: Vec<u8>,
    },
    /// The initiator proved its secret (and the target its own, if asked).
    Authenticated { algorithm: Algorithm, mutual: bool },
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
        match self {
            Exchange::Algorithm => {
                let offered = get(keys, "CHAP_A").ok_or(ChapError::Protocol("CHAP_A expected"))?;
                let algorithm = Algorithm::choose(offered).ok_or(ChapError::NoAlgorithm)?;
                let (id, challenge) = challenge(algorithm.digest_len())?;
                out.push(("CHAP_A", algorithm.code().to_string()));
                out.push(("CHAP_I", id.to_string()));
                out.push(("CHAP_C", encode_hex(&challenge)));
                *self = Exchange::Challenged {
                    algorithm,
                    id,
                    challenge,
                };
                Ok(())
            }
            Exchange::Challenged {
                algorithm,
                id,
                challenge,
            } => {
                let name = get(keys, "CHAP_N").ok_or(ChapError::Protocol("CHAP_N expected"))?;
                let answer = get(keys, "CHAP_R")
                    .and_then(decode_binary)
                    .ok_or(ChapError::Protocol("CHAP_R expected in 0x form"))?;
                let expected = algorithm.response(*id, &chap.initiator.secret, challenge);
                if name != chap.initiator.user || !constant_time_eq(&answer, &expected) {
                    return Err(ChapError::Refused);
                }
                let mutual = match (identifier(keys)?, get(keys, "CHAP_C")) {
                    (None, None) => false,
                    (Some(their_id), Some(c)) => {
                        let theirs = decode_binary(c)
                            .ok_or(ChapError::Protocol("CHAP_C expected in 0x form"))?;
                        if theirs == *challenge {
                            return Err(ChapError::Mutual("the initiator sent our own challenge"));
                        }
                        let target = chap
                            .target
                            .as_ref()
                            .ok_or(ChapError::Mutual("no target secret for mutual CHAP"))?;
                        out.push(("CHAP_N", target.user.clone()));
                        let r = algorithm.response(their_id, &target.secret, &theirs);
                        out.push(("CHAP_R", encode_hex(&r)));
                        true
                    }
                    _ => return Err(ChapError::Protocol("CHAP_I and CHAP_C go together")),
                };
                *self = Exchange::Authenticated {
                    algorithm: *algorithm,
                    mutual,
                };
                Ok(())
            }
            Exchange::Authenticated { .. } => Err(ChapError::Protocol("CHAP is already done")),
        }
    }
}

/// Why an initiator's CHAP exchange failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AnswerError {
    /// The target broke the exchange (a key missing, malformed, or an algorithm not offered).
    Protocol(&'static str),
    /// Mutual CHAP: the target named another user or proved a wrong secret.
    TargetRefused,
    /// No randomness for our challenge.
    Random,
}

impl std::fmt::Display for AnswerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Protocol(what) => write!(f, "CHAP: {what}"),
            Self::TargetRefused => {
                f.write_str("mutual CHAP: the target did not prove the expected name and secret")
            }
            Self::Random => f.write_str("CHAP: no randomness for a challenge"),
        }
    }
}

/// The initiator's side of one CHAP exchange: offer the algorithms, answer the challenge (and
/// challenge the target for mutual CHAP), then check the target's answer.
#[derive(Debug)]
pub struct Answerer {
    /// Our own challenge to the target, once sent (mutual CHAP).
    sent: Option<(Algorithm, u8, Vec<u8>)>,
}

impl Answerer {
    /// The CHAP_A offer that opens the exchange.
    pub fn offer() -> (Answerer, String) {
        let codes: Vec<String> = Algorithm::PREFERENCE
            .iter()
            .map(|a| a.code().to_string())
            .collect();
        (Answerer { sent: None }, codes.join(","))
    }

    /// The keys answering the target's CHAP_A, CHAP_I and CHAP_C with `chap.initiator`'s
    /// secret; with `chap.target` set, our own CHAP_I and CHAP_C for the target to answer.
    pub fn answer(
        &mut self,
        chap: &Chap,
        keys: &[(String, String)],
    ) -> Result<Vec<(&'static str, String)>, AnswerError> {
        let algorithm =
            get(keys, "CHAP_A")
                .and_then(Algorithm::from_code)
                .ok_or(AnswerError::Protocol(
                    "the target chose no algorithm we offered",
                ))?;
        let id = identifier(keys)
            .ok()
            .flatten()
            .ok_or(AnswerError::Protocol("CHAP_I expected"))?;
        let challenge = get(keys, "CHAP_C")
            .and_then(decode_binary)
            .ok_or(AnswerError::Protocol("CHAP_C expected in 0x form"))?;
        let r = algorithm.response(id, &chap.initiator.secret, &challenge);
        let mut out = vec![
            ("CHAP_N", chap.initiator.user.clone()),
            ("CHAP_R", encode_hex(&r)),
        ];
        if chap.target.is_some() {
            let (our_id, ours) =
                self::challenge(algorithm.digest_len()).map_err(|_| AnswerError::Random)?;
            out.push(("CHAP_I", our_id.to_string()));
            out.push(("CHAP_C", encode_hex(&ours)));
            self.sent = Some((algorithm, our_id, ours));
        }
        Ok(out)
    }

    /// Checks the target's last security-stage answer: with mutual CHAP, its CHAP_N and CHAP_R.
    pub fn verify(&self, chap: &Chap, keys: &[(String, String)]) -> Result<(), AnswerError> {
        let (Some(target), Some((algorithm, id, challenge))) = (&chap.target, &self.sent) else {
            return Ok(());
        };
        let name = get(keys, "CHAP_N").ok_or(AnswerError::TargetRefused)?;
        let answer = get(keys, "CHAP_R")
            .and_then(decode_binary)
            .ok_or(AnswerError::TargetRefused)?;
        let expected = algorithm.response(*id, &target.secret, challenge);
        if name != target.user || !constant_time_eq(&answer, &expected) {
            return Err(AnswerError::TargetRefused);
        }
        Ok(())
    }
}

/// Compares without an early exit, so the time taken does not tell how much matched.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use digest::Digest;

    fn creds(user: &str, secret: &str) -> Credentials {
        Credentials {
            user: user.into(),
            secret: secret.as_bytes().to_vec(),
        }
    }

    fn keys(pairs: &[(&str, String)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect()
    }

    /// RFC 1994's construction, checked against an independent hash of the concatenation, and
    /// known digests of the empty string for each function.
    #[test]
    fn response_is_the_hash_of_id_secret_challenge() {
        let mut whole = vec![1u8];
        whole.extend_from_slice(b"secret");
        whole.extend_from_slice(&[0xAA, 0xBB]);
        let r = |a: Algorithm| a.response(1, b"secret", &[0xAA, 0xBB]);
        assert_eq!(r(Algorithm::Md5), Md5::digest(&whole).to_vec());
        assert_eq!(r(Algorithm::Sha256), Sha256::digest(&whole).to_vec());
        assert_eq!(r(Algorithm::Sha3_256), Sha3_256::digest(&whole).to_vec());
        assert_eq!(
            encode_hex(&Md5::digest(b"")),
            "0xd41d8cd98f00b204e9800998ecf8427e"
        );
        assert_eq!(
            encode_hex(&Sha256::digest(b"")),
            "0xe3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            encode_hex(&Sha3_256::digest(b"")),
            "0xa7ffc6f8bf1ed76651c14756a061d662f580ff4de43b49fa82d80a4b80f8434a"
        );
        for a in Algorithm::PREFERENCE {
            assert_eq!(r(a).len(), a.digest_len());
        }
    }

    #[test]
    fn binary_values() {
        assert_eq!(decode_binary("0x00ff10"), Some(vec![0, 255, 16]));
        assert_eq!(decode_binary("0XAB"), Some(vec![0xAB]));
        assert_eq!(decode_binary("0bAP8Q"), Some(vec![0, 255, 16]));
        for bad in [
            "00ff", "0x", "0x0", "0xzz", "0x21+4", "0x-1", "0b", "0b!!", "AAAA", "é",
        ] {
            assert_eq!(decode_binary(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_first_offered_algorithm_we_speak_is_chosen() {
        assert_eq!(Algorithm::choose("5"), Some(Algorithm::Md5));
        assert_eq!(Algorithm::choose("8,7,6,5"), Some(Algorithm::Sha3_256));
        assert_eq!(Algorithm::choose("6,7,5"), Some(Algorithm::Sha256));
        assert_eq!(Algorithm::choose("6"), None);
        assert_eq!(Answerer::offer().1, "8,7,5");
    }

    fn challenged(chap: &Chap, offer: &str) -> (Exchange, Algorithm, u8, Vec<u8>) {
        let mut x = Exchange::Algorithm;
        let mut out = Vec::new();
        x.step(chap, &keys(&[("CHAP_A", offer.into())]), &mut out)
            .unwrap();
        let algorithm = Algorithm::from_code(&out[0].1).unwrap();
        let id: u8 = out[1].1.parse().unwrap();
        let challenge = decode_binary(&out[2].1).unwrap();
        assert_eq!(challenge.len(), algorithm.digest_len());
        (x, algorithm, id, challenge)
    }

    #[test]
    fn one_way_and_mutual() {
        let chap = Chap {
            initiator: creds("alice", "initiator-secret"),
            target: Some(creds("target", "target-secret-x")),
        };
        let (mut x, a, id, c) = challenged(&chap, "7,5");
        assert_eq!(a, Algorithm::Sha256);
        let r = encode_hex(&a.response(id, b"initiator-secret", &c));
        let mut out = Vec::new();
        x.step(
            &chap,
            &keys(&[("CHAP_N", "alice".into()), ("CHAP_R", r)]),
            &mut out,
        )
        .unwrap();
        assert!(out.is_empty());
        assert!(matches!(
            x,
            Exchange::Authenticated {
                algorithm: Algorithm::Sha256,
                mutual: false
            }
        ));

        let (mut x, a, id, c) = challenged(&chap, "5");
        let r = encode_hex(&a.response(id, b"initiator-secret", &c));
        let mut out = Vec::new();
        let theirs = "0x0102030405060708090a0b0c0d0e0f10";
        let keys = keys(&[
            ("CHAP_N", "alice".into()),
            ("CHAP_R", r),
            ("CHAP_I", "77".into()),
            ("CHAP_C", theirs.into()),
        ]);
        x.step(&chap, &keys, &mut out).unwrap();
        assert_eq!(out[0], ("CHAP_N", "target".to_owned()));
        let theirs = decode_binary(theirs).unwrap();
        assert_eq!(
            out[1].1,
            encode_hex(&Algorithm::Md5.response(77, b"target-secret-x", &theirs))
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
            Exchange::Algorithm.step(&chap, &keys(&[("CHAP_A", "6".into())]), &mut out),
            Err(ChapError::NoAlgorithm)
        );
        let (mut x, a, id, c) = challenged(&chap, "8");
        let wrong = encode_hex(&a.response(id, b"guessed-secret!", &c));
        assert_eq!(
            x.step(
                &chap,
                &keys(&[("CHAP_N", "alice".into()), ("CHAP_R", wrong)]),
                &mut out
            ),
            Err(ChapError::Refused)
        );
        // The right secret hashed with another algorithm is a wrong answer.
        let (mut x, _, id, c) = challenged(&chap, "7");
        let other = encode_hex(&Algorithm::Md5.response(id, b"initiator-secret", &c));
        assert_eq!(
            x.step(
                &chap,
                &keys(&[("CHAP_N", "alice".into()), ("CHAP_R", other)]),
                &mut out
            ),
            Err(ChapError::Refused)
        );
        let (mut x, a, id, c) = challenged(&chap, "5");
        let right = encode_hex(&a.response(id, b"initiator-secret", &c));
        assert_eq!(
            x.step(
                &chap,
                &keys(&[("CHAP_N", "mallory".into()), ("CHAP_R", right)]),
                &mut out
            ),
            Err(ChapError::Refused)
        );
        // Mutual CHAP without a target secret, and a reflected challenge.
        let (mut x, a, id, c) = challenged(&chap, "5");
        let right = encode_hex(&a.response(id, b"initiator-secret", &c));
        let mutual = keys(&[
            ("CHAP_N", "alice".into()),
            ("CHAP_R", right),
            ("CHAP_I", "1".into()),
            ("CHAP_C", encode_hex(&c)),
        ]);
        assert!(matches!(
            x.step(&chap, &mutual, &mut out),
            Err(ChapError::Mutual(_))
        ));
    }

    /// The initiator's side against the target's, one-way and mutual, for every algorithm; a
    /// target that proves the wrong secret is refused.
    #[test]
    fn answerer_and_exchange_agree() {
        let target_side = Chap {
            initiator: creds("alice", "initiator-secret"),
            target: Some(creds("stint", "target-secret-x")),
        };
        for (offer, mutual) in [("5", false), ("7", true), ("8,7,5", true)] {
            let mut initiator_side = target_side.clone();
            if !mutual {
                initiator_side.target = None;
            }
            let mut x = Exchange::Algorithm;
            let mut challenge = Vec::new();
            x.step(
                &target_side,
                &keys(&[("CHAP_A", offer.into())]),
                &mut challenge,
            )
            .unwrap();
            let (mut answerer, _) = Answerer::offer();
            let challenge: Vec<(String, String)> = challenge
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect();
            let answer = answerer.answer(&initiator_side, &challenge).unwrap();
            assert_eq!(answer.len(), if mutual { 4 } else { 2 });
            let answer: Vec<(String, String)> =
                answer.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
            let mut proof = Vec::new();
            x.step(&target_side, &answer, &mut proof).unwrap();
            let proof: Vec<(String, String)> =
                proof.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
            assert_eq!(answerer.verify(&initiator_side, &proof), Ok(()));
            if mutual {
                let mut liar = initiator_side.clone();
                liar.target = Some(creds("stint", "another-secret"));
                assert_eq!(
                    answerer.verify(&liar, &proof),
                    Err(AnswerError::TargetRefused)
                );
                assert_eq!(
                    answerer.verify(&initiator_side, &[]),
                    Err(AnswerError::TargetRefused)
                );
            }
        }
    }
}
