//! Operational parameter negotiation (RFC 7143 §6.2 and the key definitions of §13).
//!
//! Every key has a result function: list (first match in the offerer's list), numerical
//! minimum or maximum, boolean OR or AND, or declarative. The responder answers with the
//! result, never with its own limit (libiscsi assigns answers verbatim).

/// Session type (RFC 7143 §13.21).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SessionType {
    #[default]
    Normal,
    Discovery,
}

/// Operational parameters in force on a connection/session (RFC 7143 §13; RFC defaults).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parameters {
    pub header_digest: bool,
    pub data_digest: bool,
    /// MaxRecvDataSegmentLength declared by the initiator: limit for target → initiator PDUs.
    pub initiator_max_recv_data_segment_length: u32,
    /// MaxRecvDataSegmentLength declared by the target: limit for initiator → target PDUs.
    pub target_max_recv_data_segment_length: u32,
    pub max_burst_length: u32,
    pub first_burst_length: u32,
    pub initial_r2t: bool,
    pub immediate_data: bool,
    pub max_outstanding_r2t: u32,
    pub default_time2wait: u32,
    pub default_time2retain: u32,
    pub error_recovery_level: u32,
    pub max_connections: u32,
    pub data_pdu_in_order: bool,
    pub data_sequence_in_order: bool,
}

impl Default for Parameters {
    fn default() -> Self {
        Parameters {
            header_digest: false,
            data_digest: false,
            initiator_max_recv_data_segment_length: 8192,
            target_max_recv_data_segment_length: 8192,
            max_burst_length: 262_144,
            first_burst_length: 65_536,
            initial_r2t: true,
            immediate_data: true,
            max_outstanding_r2t: 1,
            default_time2wait: 2,
            default_time2retain: 20,
            error_recovery_level: 0,
            max_connections: 1,
            data_pdu_in_order: true,
            data_sequence_in_order: true,
        }
    }
}

impl Parameters {
    /// The keys in force by their RFC 7143 §13 names, as a session listing shows them.
    pub fn keys(&self) -> Vec<(&'static str, String)> {
        let digest = |on: bool| if on { "CRC32C" } else { "None" }.to_owned();
        vec![
            ("HeaderDigest", digest(self.header_digest)),
            ("DataDigest", digest(self.data_digest)),
            (
                "MaxRecvDataSegmentLength",
                self.initiator_max_recv_data_segment_length.to_string(),
            ),
            (
                "TargetMaxRecvDataSegmentLength",
                self.target_max_recv_data_segment_length.to_string(),
            ),
            ("MaxBurstLength", self.max_burst_length.to_string()),
            ("FirstBurstLength", self.first_burst_length.to_string()),
            ("InitialR2T", yes_no(self.initial_r2t).to_owned()),
            ("ImmediateData", yes_no(self.immediate_data).to_owned()),
            ("MaxOutstandingR2T", self.max_outstanding_r2t.to_string()),
            ("DefaultTime2Wait", self.default_time2wait.to_string()),
            ("DefaultTime2Retain", self.default_time2retain.to_string()),
            ("ErrorRecoveryLevel", self.error_recovery_level.to_string()),
            ("MaxConnections", self.max_connections.to_string()),
            ("DataPDUInOrder", yes_no(self.data_pdu_in_order).to_owned()),
            (
                "DataSequenceInOrder",
                yes_no(self.data_sequence_in_order).to_owned(),
            ),
        ]
    }
}

/// What this target supports; answers are the result function applied to the offer and
/// these values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetLimits {
    /// Our MaxRecvDataSegmentLength, declared in every login (262144 like libiscsi/open-iscsi).
    pub max_recv_data_segment_length: u32,
    pub max_burst_length: u32,
    pub first_burst_length: u32,
    pub max_outstanding_r2t: u32,
}

impl Default for TargetLimits {
    fn default() -> Self {
        TargetLimits {
            max_recv_data_segment_length: 262_144,
            max_burst_length: 16_776_192,
            first_burst_length: 16_776_192,
            max_outstanding_r2t: 16,
        }
    }
}

/// Range of the *-Length keys (RFC 7143 §13.12–13.14: 512 to 2^24 − 1).
const LENGTH_RANGE: (u32, u32) = (512, 16_777_215);

fn yes_no(v: bool) -> &'static str {
    if v {
        "Yes"
    } else {
        "No"
    }
}

fn parse_bool(v: &str) -> Option<bool> {
    match v {
        "Yes" => Some(true),
        "No" => Some(false),
        _ => None,
    }
}

/// Numerical values are decimal or 0x-hex (RFC 7143 §6.1 "numerical-value").
fn parse_number(v: &str, (lo, hi): (u32, u32)) -> Option<u32> {
    let n = if let Some(hex) = v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        u64::from_str_radix(hex, 16).ok()?
    } else {
        if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        v.parse::<u64>().ok()?
    };
    let n = u32::try_from(n).ok()?;
    (lo..=hi).contains(&n).then_some(n)
}

/// Digest list (RFC 7143 §13.1): first value of the offer we support.
fn choose_digest(offer: &str) -> Option<bool> {
    offer.split(',').find_map(|v| match v {
        "None" => Some(false),
        "CRC32C" => Some(true),
        _ => None,
    })
}

/// Keys that only make sense in a Normal session (RFC 7143 §13: "Irrelevant when:
/// SessionType=Discovery").
fn normal_session_only(key: &str) -> bool {
    matches!(
        key,
        "MaxConnections"
            | "InitialR2T"
            | "ImmediateData"
            | "MaxBurstLength"
            | "FirstBurstLength"
            | "MaxOutstandingR2T"
            | "DataPDUInOrder"
            | "DataSequenceInOrder"
            | "TaskReporting"
    )
}

/// Answer one operational key offered by the initiator, updating `params`. Returns the value
/// to send back, or `None` when nothing is sent (our own declaration of
/// MaxRecvDataSegmentLength is made once by the login machine).
pub fn answer(
    key: &str,
    offer: &str,
    session: SessionType,
    limits: &TargetLimits,
    params: &mut Parameters,
) -> Option<String> {
    const REJECT: &str = "Reject";
    if session == SessionType::Discovery && normal_session_only(key) {
        return Some("Irrelevant".into());
    }
    let n = |v: &str, range| parse_number(v, range);
    let ans: String = match key {
        "HeaderDigest" | "DataDigest" => match choose_digest(offer) {
            Some(crc) => {
                if key == "HeaderDigest" {
                    params.header_digest = crc;
                } else {
                    params.data_digest = crc;
                }
                (if crc { "CRC32C" } else { "None" }).into()
            }
            None => REJECT.into(),
        },
        // Declarative (§13.12): the initiator's receive limit; nothing to answer.
        "MaxRecvDataSegmentLength" => match n(offer, LENGTH_RANGE) {
            Some(v) => {
                params.initiator_max_recv_data_segment_length = v;
                return None;
            }
            None => REJECT.into(),
        },
        "MaxBurstLength" => match n(offer, LENGTH_RANGE) {
            Some(v) => {
                params.max_burst_length = v.min(limits.max_burst_length);
                params.first_burst_length = params.first_burst_length.min(params.max_burst_length);
                params.max_burst_length.to_string()
            }
            None => REJECT.into(),
        },
        // Minimum (§13.14), never above MaxBurstLength.
        "FirstBurstLength" => match n(offer, LENGTH_RANGE) {
            Some(v) => {
                params.first_burst_length = v
                    .min(limits.first_burst_length)
                    .min(params.max_burst_length);
                params.first_burst_length.to_string()
            }
            None => REJECT.into(),
        },
        // OR with our "No": the result is the offer (§13.10).
        "InitialR2T" => match parse_bool(offer) {
            Some(v) => {
                params.initial_r2t = v;
                yes_no(v).into()
            }
            None => REJECT.into(),
        },
        // AND with our "Yes" (§13.11).
        "ImmediateData" => match parse_bool(offer) {
            Some(v) => {
                params.immediate_data = v;
                yes_no(v).into()
            }
            None => REJECT.into(),
        },
        "MaxOutstandingR2T" => match n(offer, (1, 65_535)) {
            Some(v) => {
                params.max_outstanding_r2t = v.min(limits.max_outstanding_r2t);
                params.max_outstanding_r2t.to_string()
            }
            None => REJECT.into(),
        },
        // Maximum with our 0: the offer (§13.15).
        "DefaultTime2Wait" => match n(offer, (0, 3600)) {
            Some(v) => {
                params.default_time2wait = v;
                v.to_string()
            }
            None => REJECT.into(),
        },
        // Minimum with our 0: no connection state is retained at ErrorRecoveryLevel 0 (§13.16).
        "DefaultTime2Retain" => match n(offer, (0, 3600)) {
            Some(_) => {
                params.default_time2retain = 0;
                "0".into()
            }
            None => REJECT.into(),
        },
        "ErrorRecoveryLevel" => match n(offer, (0, 2)) {
            Some(_) => {
                params.error_recovery_level = 0;
                "0".into()
            }
            None => REJECT.into(),
        },
        "MaxConnections" => match n(offer, (1, 65_535)) {
            Some(_) => {
                params.max_connections = 1;
                "1".into()
            }
            None => REJECT.into(),
        },
        // OR with our "Yes": always Yes (§13.18, §13.19).
        "DataPDUInOrder" | "DataSequenceInOrder" => match parse_bool(offer) {
            Some(_) => "Yes".into(),
            None => REJECT.into(),
        },
        // Markers (RFC 3720 §A.3, obsolete in RFC 7143): AND with our "No".
        "IFMarker" | "OFMarker" => match parse_bool(offer) {
            Some(_) => "No".into(),
            None => REJECT.into(),
        },
        "IFMarkInt" | "OFMarkInt" => "Irrelevant".into(),
        // RFC 7143 §13.23: we report tasks the RFC 3720 way.
        "TaskReporting" => {
            if offer.split(',').any(|v| v == "RFC3720") {
                "RFC3720".into()
            } else {
                REJECT.into()
            }
        }
        // RFC 7144 §2.1: minimum with our level 1 (RFC 7143).
        "iSCSIProtocolLevel" => match n(offer, (0, 31)) {
            Some(v) => v.min(1).to_string(),
            None => REJECT.into(),
        },
        // Target-declared or Text-only keys offered by the initiator during login.
        "SendTargets" | "TargetAddress" | "TargetPortalGroupTag" | "TargetAlias" => {
            "Irrelevant".into()
        }
        _ => "NotUnderstood".into(),
    };
    Some(ans)
}

/// Keys the initiator side offers for a session (what `initiator.rs` sends).
pub fn initiator_offer(
    session: SessionType,
    our_mrdsl: u32,
    digests: bool,
) -> Vec<(String, String)> {
    let digest = if digests { "CRC32C,None" } else { "None" };
    let mut keys: Vec<(&str, String)> = vec![
        ("HeaderDigest", digest.into()),
        ("DataDigest", digest.into()),
        ("DefaultTime2Wait", "2".into()),
        ("DefaultTime2Retain", "0".into()),
        ("ErrorRecoveryLevel", "0".into()),
        ("MaxRecvDataSegmentLength", our_mrdsl.to_string()),
    ];
    if session == SessionType::Normal {
        keys.extend([
            ("InitialR2T", "No".into()),
            ("ImmediateData", "Yes".into()),
            ("MaxBurstLength", "16776192".into()),
            ("FirstBurstLength", "262144".into()),
            ("MaxOutstandingR2T", "1".into()),
            ("MaxConnections", "1".into()),
            ("DataPDUInOrder", "Yes".into()),
            ("DataSequenceInOrder", "Yes".into()),
        ]);
    }
    keys.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

/// Apply a target's answer to an offered key (initiator side). Unknown answers are ignored:
/// the initiator side keeps the RFC default.
pub fn apply_answer(key: &str, value: &str, params: &mut Parameters) {
    let num = |v: &str| parse_number(v, LENGTH_RANGE);
    match key {
        "HeaderDigest" => params.header_digest = value == "CRC32C",
        "DataDigest" => params.data_digest = value == "CRC32C",
        "MaxRecvDataSegmentLength" => {
            if let Some(v) = num(value) {
                params.target_max_recv_data_segment_length = v;
            }
        }
        "MaxBurstLength" => {
            if let Some(v) = num(value) {
                params.max_burst_length = v;
            }
        }
        "FirstBurstLength" => {
            if let Some(v) = num(value) {
                params.first_burst_length = v;
            }
        }
        "InitialR2T" => params.initial_r2t = value != "No",
        "ImmediateData" => params.immediate_data = value == "Yes",
        "MaxOutstandingR2T" => {
            if let Some(v) = parse_number(value, (1, 65_535)) {
                params.max_outstanding_r2t = v;
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ans(key: &str, offer: &str) -> (Option<String>, Parameters) {
        let mut p = Parameters::default();
        let a = answer(
            key,
            offer,
            SessionType::Normal,
            &TargetLimits::default(),
            &mut p,
        );
        (a, p)
    }

    #[test]
    fn result_functions() {
        assert_eq!(
            ans("HeaderDigest", "None,CRC32C").0.as_deref(),
            Some("None")
        );
        let (a, p) = ans("DataDigest", "CRC32C,None");
        assert_eq!((a.as_deref(), p.data_digest), (Some("CRC32C"), true));
        assert_eq!(ans("HeaderDigest", "MD5").0.as_deref(), Some("Reject"));
        assert_eq!(ans("MaxBurstLength", "262144").0.as_deref(), Some("262144"));
        assert_eq!(
            ans("MaxBurstLength", "16777215").0.as_deref(),
            Some("16776192")
        );
        assert_eq!(ans("FirstBurstLength", "65536").0.as_deref(), Some("65536"));
        // Not above MaxBurstLength (its default, 262144, when not negotiated).
        assert_eq!(
            ans("FirstBurstLength", "1048576").0.as_deref(),
            Some("262144")
        );
        assert_eq!(ans("InitialR2T", "No").0.as_deref(), Some("No"));
        assert_eq!(ans("InitialR2T", "Yes").0.as_deref(), Some("Yes"));
        assert_eq!(ans("ImmediateData", "No").0.as_deref(), Some("No"));
        assert_eq!(ans("MaxConnections", "8").0.as_deref(), Some("1"));
        assert_eq!(ans("ErrorRecoveryLevel", "2").0.as_deref(), Some("0"));
        assert_eq!(ans("DefaultTime2Wait", "5").0.as_deref(), Some("5"));
        assert_eq!(ans("DefaultTime2Retain", "20").0.as_deref(), Some("0"));
        assert_eq!(ans("DataPDUInOrder", "No").0.as_deref(), Some("Yes"));
        assert_eq!(ans("IFMarker", "Yes").0.as_deref(), Some("No"));
        assert_eq!(ans("MaxOutstandingR2T", "1").0.as_deref(), Some("1"));
    }

    #[test]
    fn declarative_mrdsl_is_recorded_not_echoed() {
        let (a, p) = ans("MaxRecvDataSegmentLength", "262144");
        assert_eq!(a, None);
        assert_eq!(p.initiator_max_recv_data_segment_length, 262_144);
        assert_eq!(
            ans("MaxRecvDataSegmentLength", "100").0.as_deref(),
            Some("Reject")
        );
    }

    #[test]
    fn bad_values_and_unknown_keys() {
        assert_eq!(ans("MaxBurstLength", "lots").0.as_deref(), Some("Reject"));
        assert_eq!(
            ans("MaxBurstLength", "99999999999999").0.as_deref(),
            Some("Reject")
        );
        assert_eq!(
            ans("MaxBurstLength", "0x40000").0.as_deref(),
            Some("262144")
        );
        assert_eq!(ans("InitialR2T", "maybe").0.as_deref(), Some("Reject"));
        assert_eq!(
            ans("X-com.example.Foo", "1").0.as_deref(),
            Some("NotUnderstood")
        );
        assert_eq!(ans("Bogus", "1").0.as_deref(), Some("NotUnderstood"));
    }

    #[test]
    fn session_keys_are_irrelevant_in_discovery() {
        let mut p = Parameters::default();
        let l = TargetLimits::default();
        let a = answer("InitialR2T", "No", SessionType::Discovery, &l, &mut p);
        assert_eq!(a.as_deref(), Some("Irrelevant"));
        assert!(p.initial_r2t);
        let a = answer("HeaderDigest", "None", SessionType::Discovery, &l, &mut p);
        assert_eq!(a.as_deref(), Some("None"));
    }

    #[test]
    fn initiator_applies_answers() {
        let mut p = Parameters::default();
        apply_answer("MaxRecvDataSegmentLength", "262144", &mut p);
        apply_answer("InitialR2T", "No", &mut p);
        apply_answer("FirstBurstLength", "65536", &mut p);
        assert_eq!(p.target_max_recv_data_segment_length, 262_144);
        assert!(!p.initial_r2t);
        assert_eq!(p.first_burst_length, 65_536);
    }
}
