//! The device clock's parameter data (SPC-5 §5.2 timestamp; REPORT TIMESTAMP and SET
//! TIMESTAMP, SPC-5 tables 270 and 302).

use crate::sense::Sense;

/// TIMESTAMP ORIGIN (SPC-5 table 46).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// 000b: initialized to zero at power on or hard reset.
    PowerOn,
    /// 010b: set by SET TIMESTAMP.
    SetTimestamp,
}

/// The 48-bit milliseconds field holds at most this.
pub const MAX_MS: u64 = (1 << 48) - 1;

/// Append the 12-byte timestamp parameter data.
pub fn encode(origin: Origin, ms: u64, out: &mut Vec<u8>) {
    let origin = match origin {
        Origin::PowerOn => 0b000,
        Origin::SetTimestamp => 0b010,
    };
    out.extend_from_slice(&[0x00, 0x0A, origin, 0]);
    out.extend_from_slice(&(ms & MAX_MS).to_be_bytes()[2..]);
    out.extend_from_slice(&[0, 0]);
}

/// The milliseconds of SET TIMESTAMP parameter data (its bytes 0–3 and 10–11 are reserved).
pub fn decode_set(data: &[u8]) -> Result<u64, Sense> {
    if data.len() < 12 {
        return Err(Sense::new(
            crate::SenseKey::IllegalRequest,
            crate::Asc::PARAMETER_LIST_LENGTH_ERROR,
        ));
    }
    if let Some(i) = [0usize, 1, 2, 3, 10, 11]
        .into_iter()
        .find(|&i| data[i] != 0)
    {
        return Err(Sense::invalid_field_in_parameter_list(i as u16, None));
    }
    let mut ms = [0u8; 8];
    ms[2..].copy_from_slice(&data[4..10]);
    Ok(u64::from_be_bytes(ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let mut out = Vec::new();
        encode(Origin::SetTimestamp, 0x0123_4567_89AB, &mut out);
        assert_eq!(out.len(), 12);
        assert_eq!(&out[..4], &[0, 0x0A, 0x02, 0]);
        out[..4].fill(0);
        assert_eq!(decode_set(&out), Ok(0x0123_4567_89AB));
        out[11] = 1;
        assert_eq!(
            decode_set(&out),
            Err(Sense::invalid_field_in_parameter_list(11, None))
        );
        assert!(decode_set(&out[..11]).is_err());
    }
}
