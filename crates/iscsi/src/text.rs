//! Text data segments: `key=value` pairs separated by NUL (RFC 7143 §6.1), and key lists
//! split over several Text/Login PDUs with the C bit (RFC 7143 §11.10.2, §11.12.2).

/// Longest key name (RFC 7143 §6.1: "standard-label ... no more than 63 characters").
pub const MAX_KEY_LEN: usize = 63;
/// Longest value accepted: RFC 7143 §6.1 bounds text values at 255 bytes except for
/// binary/large values (CHAP challenges), which stay under 8192.
pub const MAX_VALUE_LEN: usize = 8192;
/// Largest key list reassembled from continued PDUs (bounds memory per connection).
pub const MAX_TEXT_LEN: usize = 64 * 1024;

/// Malformed text (answered with a Reject or a login failure, never a panic).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TextError {
    NotUtf8,
    MissingEquals,
    EmptyKey,
    KeyTooLong,
    ValueTooLong,
    DuplicateKey(String),
    TooLong,
}

impl std::fmt::Display for TextError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TextError::NotUtf8 => write!(f, "key=value text is not UTF-8"),
            TextError::MissingEquals => write!(f, "key=value pair without '='"),
            TextError::EmptyKey => write!(f, "empty key name"),
            TextError::KeyTooLong => write!(f, "key name longer than {MAX_KEY_LEN} bytes"),
            TextError::ValueTooLong => write!(f, "value longer than {MAX_VALUE_LEN} bytes"),
            TextError::DuplicateKey(k) => write!(f, "key {k} sent twice"),
            TextError::TooLong => write!(f, "text longer than {MAX_TEXT_LEN} bytes"),
        }
    }
}

impl std::error::Error for TextError {}

/// Parse a (reassembled) data segment into pairs, in order; a key may appear once
/// (RFC 7143 §6.1: a key is not offered twice in one negotiation).
pub fn parse(data: &[u8]) -> Result<Vec<(String, String)>, TextError> {
    let pairs = parse_list(data)?;
    for (i, (k, _)) in pairs.iter().enumerate() {
        if pairs[..i].iter().any(|(prev, _)| prev == k) {
            return Err(TextError::DuplicateKey(k.clone()));
        }
    }
    Ok(pairs)
}

/// Parse pairs where keys may repeat (SendTargets answers list TargetName per target).
pub fn parse_list(data: &[u8]) -> Result<Vec<(String, String)>, TextError> {
    let mut out: Vec<(String, String)> = Vec::new();
    // Trailing NULs (and padding) end the list; empty records are skipped.
    for record in data.split(|&b| b == 0).filter(|r| !r.is_empty()) {
        let text = std::str::from_utf8(record).map_err(|_| TextError::NotUtf8)?;
        let (key, value) = text.split_once('=').ok_or(TextError::MissingEquals)?;
        if key.is_empty() {
            return Err(TextError::EmptyKey);
        }
        if key.len() > MAX_KEY_LEN {
            return Err(TextError::KeyTooLong);
        }
        if value.len() > MAX_VALUE_LEN {
            return Err(TextError::ValueTooLong);
        }
        out.push((key.to_string(), value.to_string()));
    }
    Ok(out)
}

/// Append `key=value\0`.
pub fn push(out: &mut Vec<u8>, key: &str, value: &str) {
    out.extend_from_slice(key.as_bytes());
    out.push(b'=');
    out.extend_from_slice(value.as_bytes());
    out.push(0);
}

/// Encode pairs.
pub fn encode(pairs: &[(String, String)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (k, v) in pairs {
        push(&mut out, k, v);
    }
    out
}

/// Reassembles a key list sent across PDUs with the C (continue) bit (RFC 7143 §11.10.2).
#[derive(Debug, Default)]
pub struct Assembler {
    buf: Vec<u8>,
}

impl Assembler {
    /// Add one PDU's data segment. Returns the complete text when `continues` is false.
    pub fn push(&mut self, data: &[u8], continues: bool) -> Result<Option<Vec<u8>>, TextError> {
        if self.buf.len() + data.len() > MAX_TEXT_LEN {
            self.buf.clear();
            return Err(TextError::TooLong);
        }
        self.buf.extend_from_slice(data);
        if continues {
            Ok(None)
        } else {
            Ok(Some(std::mem::take(&mut self.buf)))
        }
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
}

/// Splits an outgoing key list into pieces of at most `max` bytes: all but the last are
/// sent with the C bit (RFC 7143 §11.11.2: the initiator answers each with an empty request).
#[derive(Debug, Default)]
pub struct Splitter {
    pending: Vec<u8>,
    sent: usize,
}

impl Splitter {
    pub fn new(text: Vec<u8>) -> Splitter {
        Splitter {
            pending: text,
            sent: 0,
        }
    }

    /// Next piece and whether more follow (the C bit).
    pub fn next_piece(&mut self, max: usize) -> (&[u8], bool) {
        let start = self.sent;
        let end = self.pending.len().min(start + max.max(1));
        self.sent = end;
        (&self.pending[start..end], end < self.pending.len())
    }

    pub fn done(&self) -> bool {
        self.sent >= self.pending.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_pairs_and_keeps_order() {
        let got = parse(b"InitiatorName=iqn.x\0SessionType=Normal\0\0\0").unwrap();
        assert_eq!(got[0], ("InitiatorName".into(), "iqn.x".into()));
        assert_eq!(got[1], ("SessionType".into(), "Normal".into()));
        assert_eq!(parse(b"A=\0").unwrap(), vec![("A".into(), "".into())]);
        assert_eq!(parse(b"A=b=c\0").unwrap()[0].1, "b=c");
    }

    #[test]
    fn rejects_bad_text() {
        assert_eq!(parse(b"NoEquals\0"), Err(TextError::MissingEquals));
        assert_eq!(parse(b"=v\0"), Err(TextError::EmptyKey));
        assert_eq!(parse(b"K=\xff\xfe\0"), Err(TextError::NotUtf8));
        assert_eq!(
            parse(b"K=1\0K=2\0"),
            Err(TextError::DuplicateKey("K".into()))
        );
        let long_key = format!("{}=1", "k".repeat(64));
        assert_eq!(parse(long_key.as_bytes()), Err(TextError::KeyTooLong));
        let long_value = format!("K={}", "v".repeat(MAX_VALUE_LEN + 1));
        assert_eq!(parse(long_value.as_bytes()), Err(TextError::ValueTooLong));
    }

    #[test]
    fn continuation_reassembles_split_pairs() {
        let mut a = Assembler::default();
        assert_eq!(a.push(b"Max", true), Ok(None));
        assert_eq!(a.push(b"Connections=1\0Initial", true), Ok(None));
        let all = a.push(b"R2T=No\0", false).unwrap().unwrap();
        assert_eq!(parse(&all).unwrap()[1], ("InitialR2T".into(), "No".into()));
        assert!(a.is_empty());
    }

    #[test]
    fn continuation_is_bounded() {
        let mut a = Assembler::default();
        let chunk = vec![b'a'; 8192];
        let mut res = Ok(None);
        for _ in 0..9 {
            res = a.push(&chunk, true);
            if res.is_err() {
                break;
            }
        }
        assert_eq!(res, Err(TextError::TooLong));
    }

    #[test]
    fn splitter_pieces_cover_text() {
        let text: Vec<u8> = (0..100u8).collect();
        let mut s = Splitter::new(text.clone());
        let mut got = Vec::new();
        loop {
            let (piece, more) = s.next_piece(30);
            assert!(piece.len() <= 30);
            got.extend_from_slice(piece);
            if !more {
                break;
            }
        }
        assert_eq!(got, text);
        assert!(s.done());
    }
}
