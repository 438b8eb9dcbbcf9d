//! PERSISTENT RESERVE IN and OUT (SPC-4 §6.15, §6.16): reservation types and service actions,
//! the parameter lists a host sends, the parameter data a device returns, and iSCSI
//! TransportIDs (SPC-4 §7.6.4.6). Pure codecs: the rules live with the logical unit.

use crate::cdb::{be16, be32, be64, bit};
use crate::sense::{Asc, Sense, SenseKey};

/// A persistent reservation TYPE (SPC-4 §6.15.3.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ReservationType {
    WriteExclusive,
    ExclusiveAccess,
    WriteExclusiveRegistrantsOnly,
    ExclusiveAccessRegistrantsOnly,
    WriteExclusiveAllRegistrants,
    ExclusiveAccessAllRegistrants,
}

impl ReservationType {
    pub const ALL: [ReservationType; 6] = [
        Self::WriteExclusive,
        Self::ExclusiveAccess,
        Self::WriteExclusiveRegistrantsOnly,
        Self::ExclusiveAccessRegistrantsOnly,
        Self::WriteExclusiveAllRegistrants,
        Self::ExclusiveAccessAllRegistrants,
    ];

    /// The TYPE code: 1h, 3h, 5h, 6h, 7h, 8h; the others are reserved.
    pub fn code(self) -> u8 {
        match self {
            Self::WriteExclusive => 0x1,
            Self::ExclusiveAccess => 0x3,
            Self::WriteExclusiveRegistrantsOnly => 0x5,
            Self::ExclusiveAccessRegistrantsOnly => 0x6,
            Self::WriteExclusiveAllRegistrants => 0x7,
            Self::ExclusiveAccessAllRegistrants => 0x8,
        }
    }

    pub fn from_code(code: u8) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.code() == code)
    }

    /// A Write Exclusive type: every I_T nexus may read (SPC-4 table 65, SBC-4 table 13).
    pub fn write_exclusive(self) -> bool {
        matches!(
            self,
            Self::WriteExclusive
                | Self::WriteExclusiveRegistrantsOnly
                | Self::WriteExclusiveAllRegistrants
        )
    }

    /// A registrants only or all registrants type: every registered I_T nexus has access.
    pub fn registrants(self) -> bool {
        !matches!(self, Self::WriteExclusive | Self::ExclusiveAccess)
    }

    /// An all registrants type: every registered I_T nexus is a holder (SPC-4 §5.13.10).
    pub fn all_registrants(self) -> bool {
        matches!(
            self,
            Self::WriteExclusiveAllRegistrants | Self::ExclusiveAccessAllRegistrants
        )
    }

    /// Its bit in the PERSISTENT RESERVATION TYPE MASK (SPC-4 table 209), as a 16-bit value.
    fn mask_bit(self) -> u16 {
        match self {
            Self::WriteExclusiveAllRegistrants => 0x8000,
            Self::ExclusiveAccessRegistrantsOnly => 0x4000,
            Self::WriteExclusiveRegistrantsOnly => 0x2000,
            Self::ExclusiveAccess => 0x0800,
            Self::WriteExclusive => 0x0200,
            Self::ExclusiveAccessAllRegistrants => 0x0001,
        }
    }
}

/// SCOPE LU_SCOPE (SPC-4 §6.15.3.3), the only scope there is.
pub const LU_SCOPE: u8 = 0;

/// PERSISTENT RESERVE IN service actions (SPC-4 §6.15.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrInAction {
    ReadKeys,
    ReadReservation,
    ReportCapabilities,
    ReadFullStatus,
}

impl PrInAction {
    /// The SERVICE ACTION code (SPC-4 §6.15.1).
    pub fn code(self) -> u8 {
        match self {
            Self::ReadKeys => 0x00,
            Self::ReadReservation => 0x01,
            Self::ReportCapabilities => 0x02,
            Self::ReadFullStatus => 0x03,
        }
    }
}

/// PERSISTENT RESERVE OUT service actions (SPC-4 table 213); REPLACE LOST RESERVATION is not
/// supported (RLR_C = 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrOutAction {
    Register,
    Reserve,
    Release,
    Clear,
    Preempt,
    PreemptAndAbort,
    RegisterAndIgnoreExistingKey,
    RegisterAndMove,
}

impl PrOutAction {
    /// The SERVICE ACTION code (SPC-4 table 213).
    pub fn code(self) -> u8 {
        match self {
            Self::Register => 0x00,
            Self::Reserve => 0x01,
            Self::Release => 0x02,
            Self::Clear => 0x03,
            Self::Preempt => 0x04,
            Self::PreemptAndAbort => 0x05,
            Self::RegisterAndIgnoreExistingKey => 0x06,
            Self::RegisterAndMove => 0x07,
        }
    }

    /// Whether a successful command increments PRgeneration (SPC-4 table 213).
    pub fn increments_generation(self) -> bool {
        !matches!(self, Self::Reserve | Self::Release)
    }
}

/// The length of the basic parameter list (SPC-4 table 214), and where REGISTER AND MOVE's
/// TransportID starts (table 217).
pub const BASIC_PARAMETER_LIST: usize = 24;
/// Where SPEC_I_PT's TransportIDs start, after their length (table 215).
const TRANSPORT_IDS_AT: usize = 28;

/// The longest parameter list accepted: SPEC_I_PT's header and 128 of the longest iSCSI
/// TransportIDs (228 bytes, SPC-4 §7.6.4.6 note 60). Longer lists get PARAMETER LIST LENGTH
/// ERROR before their data is asked for (SPC-4 §6.16.1).
pub const MAX_PARAMETER_LIST: u32 = (TRANSPORT_IDS_AT + 128 * 228) as u32;

fn parameter_list_length_error() -> Sense {
    Sense::new(SenseKey::IllegalRequest, Asc::PARAMETER_LIST_LENGTH_ERROR)
}

/// The basic PERSISTENT RESERVE OUT parameter list (SPC-4 table 214).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrOutParameters {
    pub reservation_key: u64,
    pub service_action_reservation_key: u64,
    pub spec_i_pt: bool,
    pub all_tg_pt: bool,
    pub aptpl: bool,
    /// With SPEC_I_PT: the initiator ports the TransportIDs name (table 215).
    pub transport_ids: Vec<TransportId>,
}

/// An initiator port a TransportID names, and where the TransportID starts in the parameter
/// list (for field pointers).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransportId {
    pub at: usize,
    pub initiator_port: String,
}

/// The basic parameter list (SPC-4 table 214) of `key` and `sa_key`, no flags, as a host sends
/// it: `PrOutParameters { aptpl: true, ..basic(key, sa_key) }` for others.
pub fn basic(key: u64, sa_key: u64) -> PrOutParameters {
    PrOutParameters {
        reservation_key: key,
        service_action_reservation_key: sa_key,
        spec_i_pt: false,
        all_tg_pt: false,
        aptpl: false,
        transport_ids: Vec::new(),
    }
}

impl PrOutParameters {
    /// Decodes `list`, the whole parameter list the CDB announced. It is 24 bytes unless
    /// SPEC_I_PT is set (SPC-4 §6.16.1); then TRANSPORTID PARAMETER DATA LENGTH must cover
    /// whole TransportIDs within it (§6.16.3).
    pub fn decode(list: &[u8]) -> Result<Self, Sense> {
        if list.len() < BASIC_PARAMETER_LIST {
            return Err(parameter_list_length_error());
        }
        let spec_i_pt = bit(list, 20, 3);
        let mut transport_ids = Vec::new();
        if spec_i_pt {
            if list.len() < TRANSPORT_IDS_AT {
                return Err(parameter_list_length_error());
            }
            let length = be32(list, 24) as usize;
            let end = TRANSPORT_IDS_AT.saturating_add(length);
            if end > list.len() {
                return Err(parameter_list_length_error());
            }
            let mut at = TRANSPORT_IDS_AT;
            while at < end {
                let (initiator_port, len) = decode_transport_id(&list[at..end], at)?;
                transport_ids.push(TransportId { at, initiator_port });
                at += len;
            }
        } else if list.len() != BASIC_PARAMETER_LIST {
            return Err(parameter_list_length_error());
        }
        Ok(PrOutParameters {
            reservation_key: be64(list, 0),
            service_action_reservation_key: be64(list, 8),
            spec_i_pt,
            all_tg_pt: bit(list, 20, 2),
            aptpl: bit(list, 20, 0),
            transport_ids,
        })
    }

    /// The parameter list a host sends (SPC-4 tables 214, 215): the basic 24 bytes, and with
    /// SPEC_I_PT the TransportIDs after their length. The inverse of [`Self::decode`] but
    /// for each TransportID's `at`, which the list's layout gives.
    pub fn encode(&self) -> Vec<u8> {
        let mut list = Vec::with_capacity(BASIC_PARAMETER_LIST);
        list.extend_from_slice(&self.reservation_key.to_be_bytes());
        list.extend_from_slice(&self.service_action_reservation_key.to_be_bytes());
        list.extend_from_slice(&[0; 4]);
        let flags = u8::from(self.spec_i_pt) << 3 | u8::from(self.all_tg_pt) << 2;
        list.extend_from_slice(&[flags | u8::from(self.aptpl), 0, 0, 0]);
        if self.spec_i_pt {
            list.extend_from_slice(&[0; 4]);
            for id in &self.transport_ids {
                encode_transport_id(&id.initiator_port, &mut list);
            }
            let length = (list.len() - TRANSPORT_IDS_AT) as u32;
            list[BASIC_PARAMETER_LIST..TRANSPORT_IDS_AT].copy_from_slice(&length.to_be_bytes());
        }
        list
    }
}

/// The REGISTER AND MOVE parameter list (SPC-4 table 217).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegisterAndMoveParameters {
    pub reservation_key: u64,
    pub service_action_reservation_key: u64,
    pub unreg: bool,
    pub aptpl: bool,
    pub relative_target_port_identifier: u16,
    /// The initiator port the reservation moves to.
    pub transport_id: String,
}

impl RegisterAndMoveParameters {
    /// Decodes `list`: TRANSPORTID LENGTH (bytes 20–23) must lie within it and hold one whole
    /// TransportID (SPC-4 §6.16.4).
    pub fn decode(list: &[u8]) -> Result<Self, Sense> {
        if list.len() < BASIC_PARAMETER_LIST {
            return Err(parameter_list_length_error());
        }
        let length = be32(list, 20) as usize;
        let end = BASIC_PARAMETER_LIST.saturating_add(length);
        if end > list.len() {
            return Err(parameter_list_length_error());
        }
        let (transport_id, len) =
            decode_transport_id(&list[BASIC_PARAMETER_LIST..end], BASIC_PARAMETER_LIST)?;
        if len != length {
            return Err(Sense::invalid_field_in_parameter_list(20, None));
        }
        Ok(RegisterAndMoveParameters {
            reservation_key: be64(list, 0),
            service_action_reservation_key: be64(list, 8),
            unreg: bit(list, 17, 1),
            aptpl: bit(list, 17, 0),
            relative_target_port_identifier: be16(list, 18),
            transport_id,
        })
    }
}

/// FORMAT CODE 01b and PROTOCOL IDENTIFIER 5h: an iSCSI initiator port TransportID.
const ISCSI_INITIATOR_PORT: u8 = 0x45;
const SEPARATOR: &str = ",i,0x";

/// One iSCSI TransportID at the start of `data` (which begins at byte `at` of the parameter
/// list, for the field pointers): the initiator port name it names, as the iSCSI layer spells
/// it (`iqn...,i,0x` and 12 lower-case hex digits of ISID), and its length.
///
/// Only the initiator port format (01b, SPC-4 table 506) is taken; the initiator device format
/// (00b, table 505) names no single I_T nexus and "may be rejected" (§7.6.4.6).
pub fn decode_transport_id(data: &[u8], at: usize) -> Result<(String, usize), Sense> {
    let invalid = |offset: usize, bit: Option<u8>| {
        Sense::invalid_field_in_parameter_list(u16::try_from(at + offset).unwrap_or(u16::MAX), bit)
    };
    if data.len() < 4 {
        return Err(parameter_list_length_error());
    }
    if data[0] != ISCSI_INITIATOR_PORT {
        return Err(invalid(0, Some(7)));
    }
    // ADDITIONAL LENGTH: at least 20 and a multiple of four.
    let additional = usize::from(be16(data, 2));
    if additional < 20 || additional % 4 != 0 {
        return Err(invalid(2, None));
    }
    let Some(text) = data.get(4..4 + additional) else {
        return Err(parameter_list_length_error());
    };
    // Null-terminated and null-padded: the first null ends it.
    let text = text.split(|&b| b == 0).next().unwrap_or_default();
    let port = std::str::from_utf8(text).map_err(|_| invalid(4, None))?;
    let (name, isid) = port.split_once(SEPARATOR).ok_or_else(|| invalid(4, None))?;
    let name_ok = !name.is_empty()
        && name.len() <= 223
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b':'));
    if !name_ok {
        return Err(invalid(4, None));
    }
    let isid_at = 4 + name.len() + SEPARATOR.len();
    let isid = (!isid.is_empty() && isid.len() <= 12)
        .then(|| u64::from_str_radix(isid, 16).ok())
        .flatten()
        .ok_or_else(|| invalid(isid_at, None))?;
    Ok((
        format!("{}{SEPARATOR}{isid:012x}", name.to_ascii_lowercase()),
        4 + additional,
    ))
}

/// Appends the iSCSI initiator port TransportID of `port` (SPC-4 table 506): the name as it
/// is, null-terminated and padded to a multiple of four, at least 20 bytes after the header.
pub fn encode_transport_id(port: &str, out: &mut Vec<u8>) {
    let additional = (port.len() + 1).next_multiple_of(4).max(20);
    out.extend_from_slice(&[ISCSI_INITIATOR_PORT, 0]);
    out.extend_from_slice(&(additional as u16).to_be_bytes());
    out.extend_from_slice(port.as_bytes());
    out.resize(out.len() + additional - port.len(), 0);
}

/// READ KEYS parameter data (SPC-4 §6.15.2): PRGENERATION, ADDITIONAL LENGTH, one key per
/// registered I_T nexus (duplicates included).
pub fn read_keys(generation: u32, keys: impl Iterator<Item = u64>, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&generation.to_be_bytes());
    out.extend_from_slice(&[0; 4]);
    for key in keys {
        out.extend_from_slice(&key.to_be_bytes());
    }
    let length = (out.len() - start - 8) as u32;
    out[start + 4..start + 8].copy_from_slice(&length.to_be_bytes());
}

/// READ RESERVATION parameter data (SPC-4 §6.15.3): with a reservation, its key (zero for an
/// all registrants type, §5.13.10), scope and type.
pub fn read_reservation(
    generation: u32,
    reservation: Option<(u64, ReservationType)>,
    out: &mut Vec<u8>,
) {
    out.extend_from_slice(&generation.to_be_bytes());
    match reservation {
        None => out.extend_from_slice(&0u32.to_be_bytes()),
        Some((key, kind)) => {
            out.extend_from_slice(&16u32.to_be_bytes());
            out.extend_from_slice(&key.to_be_bytes());
            // Obsolete (4), reserved (1), SCOPE and TYPE, obsolete (2).
            out.extend_from_slice(&[0, 0, 0, 0, 0, LU_SCOPE << 4 | kind.code(), 0, 0]);
        }
    }
}

/// What REPORT CAPABILITIES says besides the constants (SPC-4 table 207).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capabilities {
    /// PTPL_C: the logical unit can keep reservations through power loss.
    pub ptpl_c: bool,
    /// PTPL_A: the last APTPL received was one.
    pub ptpl_a: bool,
}

/// ALLOW COMMANDS 011b (SPC-4 table 208): TEST UNIT READY through every type; MODE SENSE,
/// REPORT SUPPORTED OPERATION CODES, REPORT SUPPORTED TASK MANAGEMENT FUNCTIONS and READ
/// DEFECT DATA through the Write Exclusive types, as the command table's `Read` entries.
const ALLOW_COMMANDS: u8 = 0b011;

/// REPORT CAPABILITIES parameter data (SPC-4 table 207): CRH (the SPC-2 exceptions of
/// §5.13.3), SIP_C, ATP_C (one target port: registering with all of them is registering with
/// it), TMV with every type in the mask.
pub fn report_capabilities(c: Capabilities, out: &mut Vec<u8>) {
    let crh = 0x10;
    let sip_c = 0x08;
    let atp_c = 0x04;
    let tmv = 0x80;
    let mask = ReservationType::ALL
        .into_iter()
        .fold(0u16, |m, t| m | t.mask_bit());
    out.extend_from_slice(&8u16.to_be_bytes());
    out.push(crh | sip_c | atp_c | u8::from(c.ptpl_c));
    out.push(tmv | ALLOW_COMMANDS << 4 | u8::from(c.ptpl_a));
    out.extend_from_slice(&mask.to_be_bytes());
    out.extend_from_slice(&[0, 0]);
}

/// One registered I_T nexus in READ FULL STATUS (SPC-4 table 211).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FullStatus<'a> {
    pub reservation_key: u64,
    pub all_tg_pt: bool,
    /// The reservation's type when this nexus holds it (R_HOLDER).
    pub holds: Option<ReservationType>,
    pub relative_target_port_identifier: u16,
    /// The initiator port, for its TransportID.
    pub initiator_port: &'a str,
}

/// READ FULL STATUS parameter data (SPC-4 table 210).
pub fn read_full_status<'a>(
    generation: u32,
    descriptors: impl Iterator<Item = FullStatus<'a>>,
    out: &mut Vec<u8>,
) {
    let start = out.len();
    out.extend_from_slice(&generation.to_be_bytes());
    out.extend_from_slice(&[0; 4]);
    for d in descriptors {
        out.extend_from_slice(&d.reservation_key.to_be_bytes());
        out.extend_from_slice(&[0; 4]);
        out.push(u8::from(d.all_tg_pt) << 1 | u8::from(d.holds.is_some()));
        out.push(d.holds.map_or(0, |t| LU_SCOPE << 4 | t.code()));
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&d.relative_target_port_identifier.to_be_bytes());
        let length_at = out.len();
        out.extend_from_slice(&[0; 4]);
        encode_transport_id(d.initiator_port, out);
        let length = (out.len() - length_at - 4) as u32;
        out[length_at..length_at + 4].copy_from_slice(&length.to_be_bytes());
    }
    let length = (out.len() - start - 8) as u32;
    out[start + 4..start + 8].copy_from_slice(&length.to_be_bytes());
}

/// READ KEYS parameter data as a host reads it (SPC-4 §6.15.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Keys {
    pub generation: u32,
    pub keys: Vec<u64>,
}

/// Decodes READ KEYS parameter data ([`read_keys`]); `None` when it is shorter than its
/// ADDITIONAL LENGTH says (an allocation length that cut it) or that length is not whole keys.
pub fn decode_read_keys(data: &[u8]) -> Option<Keys> {
    let list = data.get(8..8 + usize::try_from(be32(data.get(..8)?, 4)).ok()?)?;
    (list.len() % 8 == 0).then(|| Keys {
        generation: be32(data, 0),
        keys: list.chunks(8).map(|k| be64(k, 0)).collect(),
    })
}

/// READ RESERVATION parameter data as a host reads it (SPC-4 §6.15.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reservation {
    pub generation: u32,
    /// The reservation's key and type, when there is one.
    pub reservation: Option<(u64, ReservationType)>,
}

/// Decodes READ RESERVATION parameter data ([`read_reservation`]); `None` when it is cut
/// short, or its ADDITIONAL LENGTH is neither 0 nor 16, or the scope or type is not one.
pub fn decode_read_reservation(data: &[u8]) -> Option<Reservation> {
    let generation = be32(data.get(..8)?, 0);
    let reservation = match be32(data, 4) {
        0 => None,
        16 => {
            let d = data.get(8..24)?;
            Some((be64(d, 0), scope_and_type(d[13]).ok()?))
        }
        _ => return None,
    };
    Some(Reservation {
        generation,
        reservation,
    })
}

/// One READ FULL STATUS descriptor as a host reads it (SPC-4 table 211): [`FullStatus`] with
/// the initiator port decoded from its TransportID.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Registration {
    pub reservation_key: u64,
    pub all_tg_pt: bool,
    pub holds: Option<ReservationType>,
    pub relative_target_port_identifier: u16,
    pub initiator_port: String,
}

/// Decodes READ FULL STATUS parameter data ([`read_full_status`]): PRgeneration and the
/// descriptors; `None` when it is cut short or a descriptor is malformed.
pub fn decode_read_full_status(data: &[u8]) -> Option<(u32, Vec<Registration>)> {
    let end = 8 + usize::try_from(be32(data.get(..8)?, 4)).ok()?;
    let list = data.get(..end)?;
    let mut at = 8;
    let mut out = Vec::new();
    while at < end {
        let d = list.get(at..at + 24)?;
        let holds = match d[12] & 1 {
            0 => None,
            _ => Some(scope_and_type(d[13]).ok()?),
        };
        let length = usize::try_from(be32(d, 20)).ok()?;
        let tid = list.get(at + 24..at + 24 + length)?;
        let (initiator_port, used) = decode_transport_id(tid, 0).ok()?;
        if used != length {
            return None;
        }
        out.push(Registration {
            reservation_key: be64(d, 0),
            all_tg_pt: d[12] & 2 != 0,
            holds,
            relative_target_port_identifier: be16(d, 18),
            initiator_port,
        });
        at += 24 + length;
    }
    Some((be32(data, 0), out))
}

/// SCOPE and TYPE (byte 2 of a PERSISTENT RESERVE OUT CDB) for the service actions that use
/// them (SPC-4 table 216): LU_SCOPE and a defined type, else INVALID FIELD IN CDB (§6.16.1).
pub fn scope_and_type(byte: u8) -> Result<ReservationType, Sense> {
    if byte >> 4 != LU_SCOPE {
        return Err(Sense::invalid_field_in_cdb(2, Some(7)));
    }
    ReservationType::from_code(byte & 0x0F).ok_or_else(|| Sense::invalid_field_in_cdb(2, Some(3)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basic(key: u64, sa_key: u64, flags: u8) -> Vec<u8> {
        let mut p = vec![0u8; 24];
        p[0..8].copy_from_slice(&key.to_be_bytes());
        p[8..16].copy_from_slice(&sa_key.to_be_bytes());
        p[20] = flags;
        p
    }

    #[test]
    fn basic_parameter_list_round_trip_and_length_errors() {
        let p = PrOutParameters::decode(&basic(0x1122, 0x3344, 0x05)).unwrap();
        assert_eq!(p.reservation_key, 0x1122);
        assert_eq!(p.service_action_reservation_key, 0x3344);
        assert!(p.all_tg_pt && p.aptpl && !p.spec_i_pt);
        assert!(p.transport_ids.is_empty());
        for len in [0, 23, 25, 48] {
            let mut list = basic(1, 2, 0);
            list.resize(len, 0);
            let e = PrOutParameters::decode(&list).unwrap_err();
            assert_eq!(e.asc, Asc::PARAMETER_LIST_LENGTH_ERROR, "{len} bytes");
        }
    }

    #[test]
    fn transport_ids_round_trip_in_the_iscsi_layers_spelling() {
        let port = "iqn.2026-11.dev.stint:host,i,0x23d000001";
        let mut tid = Vec::new();
        encode_transport_id(port, &mut tid);
        assert_eq!(tid.len() % 4, 0);
        assert_eq!(
            usize::from(u16::from_be_bytes([tid[2], tid[3]])),
            tid.len() - 4
        );
        let (decoded, len) = decode_transport_id(&tid, 0).unwrap();
        assert_eq!(decoded, "iqn.2026-11.dev.stint:host,i,0x00023d000001");
        assert_eq!(len, tid.len());
        // Upper case names and ISIDs are the same port.
        let mut upper = Vec::new();
        encode_transport_id("IQN.2026-11.DEV.STINT:HOST,i,0x00023D000001", &mut upper);
        assert_eq!(decode_transport_id(&upper, 0).unwrap().0, decoded);
    }

    #[test]
    fn bad_transport_ids_point_at_their_field() {
        let mut tid = Vec::new();
        encode_transport_id("iqn.2026-11.dev.stint:host,i,0x1", &mut tid);
        let at = |mut t: Vec<u8>, f: fn(&mut Vec<u8>)| {
            f(&mut t);
            decode_transport_id(&t, 100).unwrap_err()
        };
        // The initiator device format (00b) is refused.
        let e = at(tid.clone(), |t| t[0] = 0x05);
        assert_eq!(e, Sense::invalid_field_in_parameter_list(100, Some(7)));
        let e = at(tid.clone(), |t| t[3] = 21);
        assert_eq!(e, Sense::invalid_field_in_parameter_list(102, None));
        let e = at(tid.clone(), |t| t[8] = b' ');
        assert_eq!(e, Sense::invalid_field_in_parameter_list(104, None));
        let e = at(tid.clone(), |t| t.truncate(10));
        assert_eq!(e.asc, Asc::PARAMETER_LIST_LENGTH_ERROR);
        let isid = 4 + "iqn.2026-11.dev.stint:host,i,0x".len();
        let e = at(tid, |t| {
            t[4 + "iqn.2026-11.dev.stint:host,i,0x".len()] = b'g'
        });
        assert_eq!(
            e,
            Sense::invalid_field_in_parameter_list(100 + isid as u16, None)
        );
    }

    #[test]
    fn spec_i_pt_lists_transport_ids_within_the_list() {
        let mut list = basic(0, 7, 0x08);
        let mut tids = Vec::new();
        encode_transport_id("iqn.2026-11.dev.stint:a,i,0x1", &mut tids);
        encode_transport_id("iqn.2026-11.dev.stint:b,i,0x2", &mut tids);
        list.extend_from_slice(&(tids.len() as u32).to_be_bytes());
        list.extend_from_slice(&tids);
        let p = PrOutParameters::decode(&list).unwrap();
        let ports: Vec<(usize, &str)> = p
            .transport_ids
            .iter()
            .map(|t| (t.at, t.initiator_port.as_str()))
            .collect();
        assert_eq!(
            ports,
            [
                (28, "iqn.2026-11.dev.stint:a,i,0x000000000001"),
                (64, "iqn.2026-11.dev.stint:b,i,0x000000000002")
            ]
        );
        // A TRANSPORTID PARAMETER DATA LENGTH beyond the list, or one that cuts a TransportID.
        let mut long = list.clone();
        long[27] += 4;
        let e = PrOutParameters::decode(&long).unwrap_err();
        assert_eq!(e.asc, Asc::PARAMETER_LIST_LENGTH_ERROR);
        let mut cut = list.clone();
        cut[27] -= 4;
        assert!(PrOutParameters::decode(&cut).is_err());
    }

    #[test]
    fn a_host_encodes_what_the_device_decodes() {
        let mut p = PrOutParameters {
            reservation_key: 0x1122,
            service_action_reservation_key: 0x3344,
            spec_i_pt: false,
            all_tg_pt: true,
            aptpl: true,
            transport_ids: Vec::new(),
        };
        assert_eq!(p.encode(), basic(0x1122, 0x3344, 0x05));
        assert_eq!(PrOutParameters::decode(&p.encode()), Ok(p.clone()));
        p.spec_i_pt = true;
        p.transport_ids = [
            (28, "iqn.2026-11.dev.stint:a"),
            (76, "iqn.2026-11.dev.stint:b"),
        ]
        .map(|(at, name)| TransportId {
            at,
            initiator_port: format!("{name},i,0x000000000001"),
        })
        .to_vec();
        assert_eq!(PrOutParameters::decode(&p.encode()), Ok(p));
    }

    #[test]
    fn register_and_move_parameter_list() {
        let mut list = vec![0u8; 24];
        list[0..8].copy_from_slice(&5u64.to_be_bytes());
        list[8..16].copy_from_slice(&6u64.to_be_bytes());
        list[17] = 0x03;
        list[18..20].copy_from_slice(&1u16.to_be_bytes());
        let mut tid = Vec::new();
        encode_transport_id("iqn.2026-11.dev.stint:b,i,0xab", &mut tid);
        list[20..24].copy_from_slice(&(tid.len() as u32).to_be_bytes());
        list.extend_from_slice(&tid);
        let m = RegisterAndMoveParameters::decode(&list).unwrap();
        assert_eq!(
            (m.reservation_key, m.service_action_reservation_key),
            (5, 6)
        );
        assert!(m.unreg && m.aptpl);
        assert_eq!(m.relative_target_port_identifier, 1);
        assert_eq!(m.transport_id, "iqn.2026-11.dev.stint:b,i,0x0000000000ab");
        list.truncate(list.len() - 4);
        let e = RegisterAndMoveParameters::decode(&list).unwrap_err();
        assert_eq!(e.asc, Asc::PARAMETER_LIST_LENGTH_ERROR);
    }

    #[test]
    fn parameter_data_layouts() {
        let mut out = Vec::new();
        read_keys(7, [1u64, 1].into_iter(), &mut out);
        assert_eq!(&out[..8], &[0, 0, 0, 7, 0, 0, 0, 16]);
        assert_eq!(out.len(), 24);
        out.clear();
        read_reservation(9, Some((0xAB, ReservationType::ExclusiveAccess)), &mut out);
        assert_eq!(out.len(), 24);
        assert_eq!(&out[4..8], &[0, 0, 0, 16]);
        assert_eq!(out[15], 0xAB);
        assert_eq!(out[21], 0x03);
        out.clear();
        read_reservation(9, None, &mut out);
        assert_eq!(out, [0, 0, 0, 9, 0, 0, 0, 0]);
        out.clear();
        report_capabilities(
            Capabilities {
                ptpl_c: true,
                ptpl_a: false,
            },
            &mut out,
        );
        assert_eq!(out, [0, 8, 0x1D, 0xB0, 0xEA, 0x01, 0, 0]);
        out.clear();
        let port = "iqn.2026-11.dev.stint:host,i,0x000000000001";
        read_full_status(
            3,
            [FullStatus {
                reservation_key: 0x42,
                all_tg_pt: true,
                holds: Some(ReservationType::WriteExclusiveRegistrantsOnly),
                relative_target_port_identifier: 1,
                initiator_port: port,
            }]
            .into_iter(),
            &mut out,
        );
        let descriptor = &out[8..];
        assert_eq!(be32(&out, 4) as usize, descriptor.len());
        assert_eq!(descriptor[7], 0x42);
        assert_eq!(descriptor[12], 0x03, "ALL_TG_PT and R_HOLDER");
        assert_eq!(descriptor[13], 0x05);
        assert_eq!(be16(descriptor, 18), 1);
        assert_eq!(be32(descriptor, 20) as usize, descriptor.len() - 24);
        assert_eq!(decode_transport_id(&descriptor[24..], 0).unwrap().0, port);
    }

    #[test]
    fn parameter_data_decodes_to_what_was_encoded() {
        let mut out = Vec::new();
        read_keys(7, [0xA, 0xA, u64::MAX].into_iter(), &mut out);
        let keys = decode_read_keys(&out).unwrap();
        assert_eq!((keys.generation, keys.keys), (7, vec![0xA, 0xA, u64::MAX]));
        // Cut by the allocation length: ADDITIONAL LENGTH says more than came.
        assert_eq!(decode_read_keys(&out[..out.len() - 8]), None);
        assert_eq!(decode_read_keys(&out[..6]), None);
        for reservation in [None, Some((0xB, ReservationType::ExclusiveAccess))] {
            out.clear();
            read_reservation(9, reservation, &mut out);
            let want = Reservation {
                generation: 9,
                reservation,
            };
            assert_eq!(decode_read_reservation(&out), Some(want));
        }
        assert_eq!(decode_read_reservation(&out[..20]), None);
        out[21] = 0x02;
        assert_eq!(decode_read_reservation(&out), None, "type 2h is reserved");
        let ports = [
            "iqn.2026-11.dev.stint:a,i,0x000000000001",
            "iqn.2026-11.dev.stint:long-name,i,0x800000001234",
        ];
        let status = [
            FullStatus {
                reservation_key: 0x42,
                all_tg_pt: true,
                holds: Some(ReservationType::WriteExclusiveRegistrantsOnly),
                relative_target_port_identifier: 1,
                initiator_port: ports[0],
            },
            FullStatus {
                reservation_key: 0x43,
                all_tg_pt: false,
                holds: None,
                relative_target_port_identifier: 2,
                initiator_port: ports[1],
            },
        ];
        out.clear();
        read_full_status(3, status.into_iter(), &mut out);
        let (generation, decoded) = decode_read_full_status(&out).unwrap();
        assert_eq!(generation, 3);
        let want: Vec<Registration> = status
            .iter()
            .map(|d| Registration {
                reservation_key: d.reservation_key,
                all_tg_pt: d.all_tg_pt,
                holds: d.holds,
                relative_target_port_identifier: d.relative_target_port_identifier,
                initiator_port: d.initiator_port.to_owned(),
            })
            .collect();
        assert_eq!(decoded, want);
        assert_eq!(decode_read_full_status(&out[..out.len() - 4]), None);
        // A descriptor's ADDITIONAL DESCRIPTOR LENGTH beyond its TransportID.
        let mut long = out.clone();
        long[8 + 23] += 4;
        long.extend_from_slice(&[0; 4]);
        long[7] += 4;
        assert_eq!(decode_read_full_status(&long), None);
    }
}
