//! The target side of the login phase (RFC 7143 §6.3, Login Request/Response §11.12–11.13),
//! as a pure state machine: one Login Request in, one Login Response's fields out.

use crate::bhs::Bhs;
use crate::chap::{self, Chap};
use crate::negotiation::{self, Parameters, SessionType, TargetLimits};
use crate::node::TargetNode;
use crate::text;

/// Keys that name the initiator, the session type and the target: accepted in the first Login
/// Request only, where the initiator is authorized for the target.
const LEADING_KEYS: [&str; 3] = ["InitiatorName", "SessionType", "TargetName"];

/// Longest Login Response text: the MaxRecvDataSegmentLength every initiator accepts (its
/// default, RFC 7143 §13.12). Only a request of thousands of keys (each answered, unknown ones
/// with NotUnderstood) needs more, and such a login is refused rather than answered in pieces.
const ANSWER_LIMIT: usize = 8192;

/// Login stages (RFC 7143 §11.12.3, CSG/NSG).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stage {
    SecurityNegotiation = 0,
    LoginOperationalNegotiation = 1,
    FullFeaturePhase = 3,
}

impl Stage {
    fn from_bits(v: u8) -> Option<Stage> {
        match v & 3 {
            0 => Some(Stage::SecurityNegotiation),
            1 => Some(Stage::LoginOperationalNegotiation),
            3 => Some(Stage::FullFeaturePhase),
            _ => None,
        }
    }
}

/// Login Response Status-Class and Status-Detail (RFC 7143 §11.13.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoginStatus(pub u8, pub u8);

impl LoginStatus {
    pub const SUCCESS: LoginStatus = LoginStatus(0x00, 0x00);
    pub const INITIATOR_ERROR: LoginStatus = LoginStatus(0x02, 0x00);
    pub const AUTHENTICATION_FAILURE: LoginStatus = LoginStatus(0x02, 0x01);
    pub const NOT_FOUND: LoginStatus = LoginStatus(0x02, 0x03);
    pub const UNSUPPORTED_VERSION: LoginStatus = LoginStatus(0x02, 0x05);
    pub const MISSING_PARAMETER: LoginStatus = LoginStatus(0x02, 0x07);
    pub const SESSION_TYPE_NOT_SUPPORTED: LoginStatus = LoginStatus(0x02, 0x09);
    pub const SESSION_DOES_NOT_EXIST: LoginStatus = LoginStatus(0x02, 0x0A);
    pub const INVALID_DURING_LOGIN: LoginStatus = LoginStatus(0x02, 0x0B);

    /// What the status tells an initiator's user (RFC 7143 §11.13.5).
    pub fn meaning(self) -> &'static str {
        match (self.0, self.1) {
            (0x00, _) => "success",
            (0x01, _) => "the target moved (redirection)",
            (0x02, 0x01) => "authentication failure",
            (0x02, 0x02) => "this initiator is not allowed to log in (authorization failure)",
            (0x02, 0x03) => "no target of that name at this portal (not found)",
            (0x02, 0x04) => "the target was removed",
            (0x02, 0x07) => "a required key is missing",
            (0x02, _) => "initiator error",
            (0x03, _) => "target error",
            _ => "refused",
        }
    }
}

/// The fields of a Login Request this machine reads (RFC 7143 §11.12).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoginRequest {
    pub transit: bool,
    pub continues: bool,
    pub csg: u8,
    pub nsg: u8,
    pub version_max: u8,
    pub version_min: u8,
    pub isid: [u8; 6],
    pub tsih: u16,
    pub itt: u32,
    pub cid: u16,
    pub cmdsn: u32,
    pub exp_statsn: u32,
}

impl LoginRequest {
    pub fn parse(b: &Bhs) -> LoginRequest {
        let f = b.flags();
        let mut isid = [0u8; 6];
        isid.copy_from_slice(&b.0[8..14]);
        LoginRequest {
            transit: f & 0x80 != 0,
            continues: f & 0x40 != 0,
            csg: (f >> 2) & 3,
            nsg: f & 3,
            version_max: b.0[2],
            version_min: b.0[3],
            isid,
            tsih: b.u16_at(14),
            itt: b.itt(),
            cid: b.u16_at(20),
            cmdsn: b.u32_at(24),
            exp_statsn: b.u32_at(28),
        }
    }
}

/// What to send back: the Login Response's flags, status and text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoginReply {
    pub transit: bool,
    pub continues: bool,
    pub csg: u8,
    pub nsg: u8,
    pub status: LoginStatus,
    pub text: Vec<u8>,
    /// Why a login failed, for the target's log (not sent: the status is all an initiator
    /// learns, RFC 7143 §11.13.5).
    pub reason: String,
}

impl LoginReply {
    fn failure(status: LoginStatus, reason: impl Into<String>) -> LoginReply {
        LoginReply {
            transit: false,
            continues: false,
            csg: 0,
            nsg: 0,
            status,
            text: Vec::new(),
            reason: reason.into(),
        }
    }

    /// Byte 1 of the Login Response (RFC 7143 §11.13).
    pub fn flags(&self) -> u8 {
        let mut f = (self.csg & 3) << 2 | (self.nsg & 3);
        if self.transit {
            f |= 0x80;
        }
        if self.continues {
            f |= 0x40;
        }
        f
    }
}

/// A completed login: everything the full feature phase needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Established {
    pub session_type: SessionType,
    /// Index into the node list (Normal sessions).
    pub node: Option<usize>,
    pub initiator_name: String,
    pub isid: [u8; 6],
    pub params: Parameters,
}

/// Result of one Login Request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LoginStep {
    /// Send the reply and wait for the next Login Request.
    Continue(LoginReply),
    /// Send the reply (T=1, NSG=FullFeaturePhase); the session is in full feature phase.
    Complete(LoginReply, Box<Established>),
    /// Send the (failure) reply and close the connection (RFC 7143 §11.13.5).
    Fail(LoginReply),
}

/// Target-side login state of one connection.
#[derive(Debug)]
pub struct Login {
    limits: TargetLimits,
    portal_group_tag: u16,
    stage: Option<Stage>,
    assembler: text::Assembler,
    isid: Option<[u8; 6]>,
    initiator_name: Option<String>,
    session_type: SessionType,
    node: Option<usize>,
    params: Parameters,
    declared: bool,
    auth_none_agreed: bool,
    /// What discovery sessions must prove.
    discovery_chap: Option<Chap>,
    /// What this login must prove, known once the first request named its target.
    required: Option<Chap>,
    /// The CHAP exchange, once AuthMethod=CHAP is agreed.
    exchange: Option<chap::Exchange>,
}

impl Login {
    pub fn new(limits: TargetLimits, portal_group_tag: u16) -> Login {
        Login {
            limits,
            portal_group_tag,
            stage: None,
            assembler: text::Assembler::default(),
            isid: None,
            initiator_name: None,
            session_type: SessionType::Normal,
            node: None,
            params: Parameters::default(),
            declared: false,
            auth_none_agreed: false,
            discovery_chap: None,
            required: None,
            exchange: None,
        }
    }

    /// Discovery sessions must authenticate with CHAP too.
    pub fn with_discovery_chap(mut self, chap: Option<Chap>) -> Login {
        self.discovery_chap = chap;
        self
    }

    /// Whether the initiator has proved what this login requires.
    /// The InitiatorName the first Login Request declared, if it has come.
    pub fn initiator_name(&self) -> Option<&str> {
        self.initiator_name.as_deref()
    }

    /// How the initiator authenticated, for the log: "none" or e.g. "CHAP SHA-256, mutual".
    pub fn authentication(&self) -> String {
        match &self.exchange {
            Some(chap::Exchange::Authenticated { algorithm, mutual }) => {
                format!("CHAP {algorithm}{}", if *mutual { ", mutual" } else { "" })
            }
            _ => "none".to_owned(),
        }
    }

    fn authenticated(&self) -> bool {
        self.required.is_none()
            || matches!(self.exchange, Some(chap::Exchange::Authenticated { .. }))
    }

    /// Handle one Login Request with its data segment.
    pub fn step(&mut self, req: &LoginRequest, data: &[u8], nodes: &[TargetNode]) -> LoginStep {
        // RFC 7143 §11.12.4: we speak version 0x00 only.
        if req.version_min > 0 {
            return LoginStep::Fail(LoginReply::failure(
                LoginStatus::UNSUPPORTED_VERSION,
                "Version-min above 0",
            ));
        }
        let Some(csg) = Stage::from_bits(req.csg).filter(|s| *s != Stage::FullFeaturePhase) else {
            return LoginStep::Fail(LoginReply::failure(
                LoginStatus::INITIATOR_ERROR,
                "CSG is not a login stage",
            ));
        };
        match self.stage {
            // The first request may skip the security stage: we require no authentication.
            None => self.stage = Some(csg),
            Some(s) if s != csg => {
                return LoginStep::Fail(LoginReply::failure(
                    LoginStatus::INITIATOR_ERROR,
                    "CSG changed without a stage transition",
                ));
            }
            Some(_) => {}
        }
        match self.isid {
            None => self.isid = Some(req.isid),
            Some(isid) if isid != req.isid => {
                return LoginStep::Fail(LoginReply::failure(
                    LoginStatus::INITIATOR_ERROR,
                    "ISID changed during login",
                ));
            }
            Some(_) => {}
        }
        // One connection per session: a login that adds a connection to an existing
        // session (TSIH ≠ 0, RFC 7143 §6.3.1) names a session we cannot join.
        if req.tsih != 0 {
            return LoginStep::Fail(LoginReply::failure(
                LoginStatus::SESSION_DOES_NOT_EXIST,
                "TSIH names a session to join (one connection per session)",
            ));
        }
        let text = match self.assembler.push(data, req.continues) {
            Ok(Some(text)) => text,
            // C bit: acknowledge with an empty response, stay in the stage (RFC 7143 §11.12.2).
            Ok(None) => {
                return LoginStep::Continue(LoginReply {
                    transit: false,
                    continues: false,
                    csg: csg as u8,
                    nsg: 0,
                    status: LoginStatus::SUCCESS,
                    text: Vec::new(),
                    reason: String::new(),
                })
            }
            Err(_) => {
                return LoginStep::Fail(LoginReply::failure(
                    LoginStatus::INITIATOR_ERROR,
                    "login text too long or badly continued",
                ))
            }
        };
        let Ok(pairs) = text::parse(&text) else {
            return LoginStep::Fail(LoginReply::failure(
                LoginStatus::INITIATOR_ERROR,
                "login text is not key=value pairs",
            ));
        };
        let mut out = Vec::new();
        let first = self.initiator_name.is_none();
        let mut auth_offer = None;
        let mut chap_keys = Vec::new();
        for (key, value) in &pairs {
            // Who logs in to what is declared once, in the first Login Request (RFC 7143 §13.4,
            // §13.5, §13.21) and authorized there; a later request must not change it.
            if !first && LEADING_KEYS.contains(&key.as_str()) {
                return LoginStep::Fail(LoginReply::failure(
                    LoginStatus::INITIATOR_ERROR,
                    format!("{key} after the first Login Request"),
                ));
            }
            // Security keys belong to the security stage (RFC 7143 §6.3, §12).
            let security_key = key == "AuthMethod" || key.starts_with("CHAP_");
            if csg != Stage::SecurityNegotiation && security_key {
                return LoginStep::Fail(LoginReply::failure(
                    LoginStatus::INITIATOR_ERROR,
                    format!("{key} outside the security stage"),
                ));
            }
            match key.as_str() {
                "InitiatorName" => {
                    if value.is_empty() {
                        return LoginStep::Fail(LoginReply::failure(
                            LoginStatus::INITIATOR_ERROR,
                            "empty InitiatorName",
                        ));
                    }
                    self.initiator_name = Some(value.clone());
                }
                "SessionType" => match value.as_str() {
                    "Normal" => self.session_type = SessionType::Normal,
                    "Discovery" => self.session_type = SessionType::Discovery,
                    _ => {
                        return LoginStep::Fail(LoginReply::failure(
                            LoginStatus::SESSION_TYPE_NOT_SUPPORTED,
                            format!("SessionType={value}"),
                        ))
                    }
                },
                "TargetName" => match nodes.iter().position(|n| n.name == *value) {
                    Some(i) => self.node = Some(i),
                    None => {
                        return LoginStep::Fail(LoginReply::failure(
                            LoginStatus::NOT_FOUND,
                            format!("no target named {value:?}"),
                        ))
                    }
                },
                "InitiatorAlias" => {}
                // Answered below, once the target (and so what it requires) is known.
                "AuthMethod" => auth_offer = Some(value.as_str()),
                k if k.starts_with("CHAP_") => chap_keys.push((key.clone(), value.clone())),
                _ => {
                    if let Some(ans) = negotiation::answer(
                        key,
                        value,
                        self.session_type,
                        &self.limits,
                        &mut self.params,
                    ) {
                        // A Reject here would share its key with our own declaration (RFC
                        // 7143 §13.12): the initiator could not tell which is which.
                        if key == "MaxRecvDataSegmentLength" {
                            return LoginStep::Fail(LoginReply::failure(
                                LoginStatus::INITIATOR_ERROR,
                                format!("MaxRecvDataSegmentLength={value} is not 512..=16777215"),
                            ));
                        }
                        text::push(&mut out, key, &ans);
                    }
                }
            }
        }
        if first {
            let Some(initiator) = &self.initiator_name else {
                return LoginStep::Fail(LoginReply::failure(
                    LoginStatus::MISSING_PARAMETER,
                    "no InitiatorName",
                ));
            };
            if self.session_type == SessionType::Normal {
                let Some(node) = self.node.and_then(|i| nodes.get(i)) else {
                    return LoginStep::Fail(LoginReply::failure(
                        LoginStatus::MISSING_PARAMETER,
                        "no TargetName for a normal session",
                    ));
                };
                // Answered like an unknown name, so that an initiator cannot probe which
                // protected targets exist.
                if !node.allows(initiator) {
                    return LoginStep::Fail(LoginReply::failure(
                        LoginStatus::NOT_FOUND,
                        format!(
                            "{initiator} is not in the allowed_initiators of {}",
                            node.name
                        ),
                    ));
                }
                self.required = node.chap.clone();
                // RFC 7143 §13.9: the portal group tag answers the first request naming a target.
                // These declarations replace an answer to the same keys offered by the
                // initiator, which only the target sends (RFC 7143 §13.6, §13.9): one response
                // never holds a key twice.
                let mut head = Vec::new();
                text::push(
                    &mut head,
                    "TargetPortalGroupTag",
                    &self.portal_group_tag.to_string(),
                );
                out = without_key(&out, "TargetPortalGroupTag");
                if let Some(alias) = &node.alias {
                    text::push(&mut head, "TargetAlias", alias);
                    out = without_key(&out, "TargetAlias");
                }
                head.append(&mut out);
                out = head;
            } else {
                self.required = self.discovery_chap.clone();
            }
            // RFC 7143 §6.3: a target that requires authentication refuses a login that skips
            // the security stage.
            if self.required.is_some() && csg != Stage::SecurityNegotiation {
                return LoginStep::Fail(LoginReply::failure(
                    LoginStatus::AUTHENTICATION_FAILURE,
                    "CHAP required, security stage skipped",
                ));
            }
        }
        if let Some(offer) = auth_offer {
            let offers = |m: &str| offer.split(',').any(|v| v == m);
            let answer = match (&self.required, &self.exchange) {
                (Some(_), None) if offers("CHAP") => {
                    self.exchange = Some(chap::Exchange::Algorithm);
                    "CHAP"
                }
                (None, None) if offers("None") => {
                    self.auth_none_agreed = true;
                    "None"
                }
                (_, None) => "Reject",
                // AuthMethod was agreed already.
                (_, Some(_)) => {
                    return LoginStep::Fail(LoginReply::failure(
                        LoginStatus::INITIATOR_ERROR,
                        "AuthMethod offered again",
                    ))
                }
            };
            text::push(&mut out, "AuthMethod", answer);
        }
        if !chap_keys.is_empty() {
            let (Some(chap), Some(exchange)) = (&self.required, &mut self.exchange) else {
                return LoginStep::Fail(LoginReply::failure(
                    LoginStatus::AUTHENTICATION_FAILURE,
                    "CHAP keys without an agreed CHAP exchange",
                ));
            };
            let mut answers = Vec::new();
            if let Err(e) = exchange.step(chap, &chap_keys, &mut answers) {
                return LoginStep::Fail(LoginReply::failure(
                    LoginStatus::AUTHENTICATION_FAILURE,
                    format!("CHAP: {e}"),
                ));
            }
            for (k, v) in answers {
                text::push(&mut out, k, &v);
            }
        }
        let mut nsg = 0;
        let mut transit = false;
        if req.transit {
            let Some(next) = Stage::from_bits(req.nsg).filter(|n| *n > csg) else {
                return LoginStep::Fail(LoginReply::failure(
                    LoginStatus::INITIATOR_ERROR,
                    "NSG is not after CSG",
                ));
            };
            let security = csg == Stage::SecurityNegotiation;
            if security && self.required.is_some() && !self.authenticated() {
                // A CHAP exchange under way keeps the stage: the response clears T (RFC 7143
                // §6.3); with none agreed the initiator cannot authenticate at all.
                if self.exchange.is_none() {
                    return LoginStep::Fail(LoginReply::failure(
                        LoginStatus::AUTHENTICATION_FAILURE,
                        "CHAP required, none agreed",
                    ));
                }
            } else if security
                && self.required.is_none()
                && !self.auth_none_agreed
                && pairs.iter().any(|(k, _)| k == "AuthMethod")
            {
                return LoginStep::Fail(LoginReply::failure(
                    LoginStatus::AUTHENTICATION_FAILURE,
                    "no acceptable AuthMethod",
                ));
            } else {
                transit = true;
                nsg = next as u8;
            }
        }
        // Declare our receive limit in the operational stage (RFC 7143 §13.12); open-iscsi
        // refuses operational keys in a security-stage response (usr/login.c).
        let entering_full_feature = nsg == Stage::FullFeaturePhase as u8;
        if !self.declared && (csg == Stage::LoginOperationalNegotiation || entering_full_feature) {
            self.declared = true;
            text::push(
                &mut out,
                "MaxRecvDataSegmentLength",
                &self.limits.max_recv_data_segment_length.to_string(),
            );
        }
        if out.len() > ANSWER_LIMIT {
            return LoginStep::Fail(LoginReply::failure(
                LoginStatus::INITIATOR_ERROR,
                format!(
                    "the answer to {} keys takes {} bytes, more than {ANSWER_LIMIT}",
                    pairs.len(),
                    out.len()
                ),
            ));
        }
        let reply = LoginReply {
            transit,
            continues: false,
            csg: csg as u8,
            nsg,
            status: LoginStatus::SUCCESS,
            text: out,
            reason: String::new(),
        };
        if transit {
            self.stage = Stage::from_bits(nsg);
        }
        if transit && nsg == Stage::FullFeaturePhase as u8 {
            let mut params = self.params.clone();
            params.target_max_recv_data_segment_length = self.limits.max_recv_data_segment_length;
            let established = Established {
                session_type: self.session_type,
                node: self
                    .node
                    .filter(|_| self.session_type == SessionType::Normal),
                initiator_name: self.initiator_name.clone().unwrap_or_default(),
                isid: req.isid,
                params,
            };
            return LoginStep::Complete(reply, Box::new(established));
        }
        LoginStep::Continue(reply)
    }
}

/// `text` (key=value records built by this machine) without the record of `key`.
fn without_key(text: &[u8], key: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    for record in text.split(|&b| b == 0).filter(|r| !r.is_empty()) {
        let named = record.strip_prefix(key.as_bytes());
        if named.is_none_or(|rest| rest.first() != Some(&b'=')) {
            out.extend_from_slice(record);
            out.push(0);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn nodes() -> Vec<TargetNode> {
        vec![TargetNode {
            name: "iqn.2026-01.test:disk".into(),
            alias: None,
            target: Arc::new(device::Target::default()),
            allowed_initiators: vec!["iqn.ok".into()],
            initiator_classes: Vec::new(),
            chap: None,
            privileged_initiators: vec!["*".into()],
        }]
    }

    fn req(csg: u8, nsg: u8, transit: bool) -> LoginRequest {
        LoginRequest {
            transit,
            continues: false,
            csg,
            nsg,
            version_max: 0,
            version_min: 0,
            isid: [0x80, 0, 0, 0, 0, 1],
            tsih: 0,
            itt: 1,
            cid: 0,
            cmdsn: 1,
            exp_statsn: 0,
        }
    }

    fn keys(text: &[u8]) -> Vec<(String, String)> {
        text::parse(text).unwrap()
    }

    fn login(data: &[u8]) -> LoginStep {
        let mut l = Login::new(TargetLimits::default(), 1);
        l.step(&req(1, 3, true), data, &nodes())
    }

    #[test]
    fn one_step_operational_login() {
        let data = b"InitiatorName=iqn.ok\0TargetName=iqn.2026-01.test:disk\0SessionType=Normal\0\
HeaderDigest=None,CRC32C\0InitialR2T=No\0MaxRecvDataSegmentLength=262144\0X-foo=1\0";
        let LoginStep::Complete(reply, est) = login(data) else {
            panic!("not complete")
        };
        assert_eq!(reply.flags(), 0x80 | (1 << 2) | 3);
        let k = keys(&reply.text);
        assert_eq!(k[0], ("TargetPortalGroupTag".into(), "1".into()));
        assert!(k.contains(&("HeaderDigest".into(), "None".into())));
        assert!(k.contains(&("InitialR2T".into(), "No".into())));
        assert!(k.contains(&("X-foo".into(), "NotUnderstood".into())));
        assert!(k.contains(&("MaxRecvDataSegmentLength".into(), "262144".into())));
        // Un-offered keys are never echoed.
        assert!(!k
            .iter()
            .any(|(n, _)| n == "ImmediateData" || n == "MaxBurstLength"));
        assert_eq!(est.params.initiator_max_recv_data_segment_length, 262_144);
        assert!(!est.params.initial_r2t);
        assert_eq!(est.node, Some(0));
    }

    /// Found by the `login` fuzz target: an initiator offering TargetPortalGroupTag or
    /// TargetAlias got "Irrelevant" and the target's own declaration, the key twice in one
    /// response.
    #[test]
    fn target_declared_keys_are_answered_once() {
        let mut n = nodes();
        n[0].alias = Some("disk".into());
        let data = b"InitiatorName=iqn.ok\0TargetName=iqn.2026-01.test:disk\0\
TargetPortalGroupTag=7\0TargetAlias=x\0TargetAddress=a\0";
        let mut l = Login::new(TargetLimits::default(), 1);
        let LoginStep::Complete(reply, _) = l.step(&req(1, 3, true), data, &n) else {
            panic!("not complete")
        };
        let k = keys(&reply.text);
        assert_eq!(k[0], ("TargetPortalGroupTag".into(), "1".into()));
        assert_eq!(k[1], ("TargetAlias".into(), "disk".into()));
        assert!(k.contains(&("TargetAddress".into(), "Irrelevant".into())));
        for name in ["TargetPortalGroupTag", "TargetAlias"] {
            assert_eq!(k.iter().filter(|(key, _)| key == name).count(), 1, "{name}");
        }
    }

    /// Found by the `login` fuzz target: a MaxRecvDataSegmentLength out of range was answered
    /// Reject beside the target's own MaxRecvDataSegmentLength in the same response.
    #[test]
    fn an_invalid_max_recv_data_segment_length_fails_the_login() {
        for bad in ["0", "511", "16777216", "lots"] {
            let data = format!(
                "InitiatorName=iqn.ok\0TargetName=iqn.2026-01.test:disk\0\
                 MaxRecvDataSegmentLength={bad}\0"
            );
            let LoginStep::Fail(reply) = login(data.as_bytes()) else {
                panic!("{bad} accepted")
            };
            assert_eq!(reply.status, LoginStatus::INITIATOR_ERROR);
            assert!(
                reply.reason.contains("MaxRecvDataSegmentLength"),
                "{}",
                reply.reason
            );
        }
    }

    #[test]
    fn failures_have_precise_status() {
        let status = |step: LoginStep| match step {
            LoginStep::Fail(r) => r.status,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            status(login(b"TargetName=iqn.2026-01.test:disk\0")),
            LoginStatus::MISSING_PARAMETER
        );
        assert_eq!(
            status(login(b"InitiatorName=iqn.ok\0")),
            LoginStatus::MISSING_PARAMETER
        );
        assert_eq!(
            status(login(b"InitiatorName=iqn.ok\0TargetName=iqn.nope\0")),
            LoginStatus::NOT_FOUND
        );
        // Outside the ACL looks the same as a name that does not exist.
        assert_eq!(
            status(login(
                b"InitiatorName=iqn.bad\0TargetName=iqn.2026-01.test:disk\0"
            )),
            LoginStatus::NOT_FOUND
        );
        assert_eq!(
            status(login(b"InitiatorName\0")),
            LoginStatus::INITIATOR_ERROR
        );
        let mut l = Login::new(TargetLimits::default(), 1);
        let mut r = req(1, 3, true);
        r.version_min = 2;
        assert_eq!(
            status(l.step(&r, b"", &nodes())),
            LoginStatus::UNSUPPORTED_VERSION
        );
    }

    #[test]
    fn security_stage_then_operational() {
        let mut l = Login::new(TargetLimits::default(), 1);
        let n = nodes();
        let step = l.step(
            &req(0, 1, true),
            b"InitiatorName=iqn.ok\0TargetName=iqn.2026-01.test:disk\0AuthMethod=CHAP,None\0",
            &n,
        );
        let LoginStep::Continue(r) = step else {
            panic!()
        };
        assert!(r.transit);
        assert_eq!(r.nsg, 1);
        assert!(keys(&r.text).contains(&("AuthMethod".into(), "None".into())));
        assert!(!keys(&r.text)
            .iter()
            .any(|(k, _)| k == "MaxRecvDataSegmentLength"));
        let LoginStep::Complete(r, _) = l.step(&req(1, 3, true), b"ImmediateData=Yes\0", &n) else {
            panic!()
        };
        assert!(keys(&r.text).contains(&("ImmediateData".into(), "Yes".into())));
        assert!(keys(&r.text).contains(&("MaxRecvDataSegmentLength".into(), "262144".into())));
        // The portal group tag was given in the first response only.
        assert!(!keys(&r.text)
            .iter()
            .any(|(k, _)| k == "TargetPortalGroupTag"));
    }

    fn chap_node() -> Vec<TargetNode> {
        let mut n = nodes();
        n[0].chap = Some(Chap {
            initiator: chap::Credentials {
                user: "alice".into(),
                secret: b"twelve-bytes-or-more".to_vec(),
            },
            target: None,
        });
        n
    }

    /// Offers CHAP, takes the challenge and answers it with `secret`; the step of the answer.
    fn chap_login(l: &mut Login, n: &[TargetNode], secret: &[u8]) -> LoginStep {
        let LoginStep::Continue(r) = l.step(
            &req(0, 1, false),
            b"InitiatorName=iqn.ok\0TargetName=iqn.2026-01.test:disk\0AuthMethod=CHAP,None\0",
            n,
        ) else {
            panic!("AuthMethod")
        };
        assert!(keys(&r.text).contains(&("AuthMethod".into(), "CHAP".into())));
        let LoginStep::Continue(r) = l.step(&req(0, 1, false), b"CHAP_A=5\0", n) else {
            panic!("CHAP_A")
        };
        let k = keys(&r.text);
        let get = |name: &str| k.iter().find(|(key, _)| key == name).unwrap().1.clone();
        let id: u8 = get("CHAP_I").parse().unwrap();
        let challenge = chap::decode_binary(&get("CHAP_C")).unwrap();
        let answer = chap::encode_hex(&chap::Algorithm::Md5.response(id, secret, &challenge));
        let text = format!("CHAP_N=alice\0CHAP_R={answer}\0");
        l.step(&req(0, 1, true), text.as_bytes(), n)
    }

    #[test]
    fn chap_with_the_right_secret_logs_in() {
        let n = chap_node();
        let mut l = Login::new(TargetLimits::default(), 1);
        let LoginStep::Continue(r) = chap_login(&mut l, &n, b"twelve-bytes-or-more") else {
            panic!("CHAP_R")
        };
        assert!(r.transit && r.nsg == 1);
        assert!(matches!(
            l.step(&req(1, 3, true), b"", &n),
            LoginStep::Complete(..)
        ));
    }

    #[test]
    fn chap_with_a_wrong_secret_or_none_fails() {
        let n = chap_node();
        let mut l = Login::new(TargetLimits::default(), 1);
        let step = chap_login(&mut l, &n, b"a-wrong-secret!!");
        assert!(fails_with(step, LoginStatus::AUTHENTICATION_FAILURE));
        // Skipping the security stage, offering only None, or leaving it unauthenticated.
        let first = b"InitiatorName=iqn.ok\0TargetName=iqn.2026-01.test:disk\0";
        let mut l = Login::new(TargetLimits::default(), 1);
        let step = l.step(&req(1, 3, true), first, &n);
        assert!(fails_with(step, LoginStatus::AUTHENTICATION_FAILURE));
        let mut l = Login::new(TargetLimits::default(), 1);
        let mut text = first.to_vec();
        text.extend_from_slice(b"AuthMethod=None\0");
        let step = l.step(&req(0, 1, true), &text, &n);
        assert!(fails_with(step, LoginStatus::AUTHENTICATION_FAILURE));
        // CHAP keys before CHAP was agreed.
        let mut l = Login::new(TargetLimits::default(), 1);
        let mut text = first.to_vec();
        text.extend_from_slice(b"CHAP_A=5\0");
        let step = l.step(&req(0, 1, false), &text, &n);
        assert!(fails_with(step, LoginStatus::AUTHENTICATION_FAILURE));
    }

    #[test]
    fn discovery_can_require_chap() {
        let chap = chap_node()[0].chap.clone();
        let mut l = Login::new(TargetLimits::default(), 1).with_discovery_chap(chap);
        let step = l.step(
            &req(1, 3, true),
            b"InitiatorName=iqn.any\0SessionType=Discovery\0",
            &nodes(),
        );
        assert!(fails_with(step, LoginStatus::AUTHENTICATION_FAILURE));
    }

    /// Issue 11: 64,945 bytes were answered to an initiator that takes 8,192.
    #[test]
    fn an_answer_beyond_8192_bytes_is_refused_not_sent() {
        let mut text = b"InitiatorName=iqn.ok\0TargetName=iqn.2026-01.test:disk\0".to_vec();
        for i in 0..700 {
            text.extend_from_slice(format!("X-unknown-{i}=1\0").as_bytes());
        }
        let step = login(&text);
        assert!(
            matches!(&step, LoginStep::Fail(r) if r.status == LoginStatus::INITIATOR_ERROR
                && r.reason.contains("more than 8192")),
            "{step:?}"
        );
        // The same keys in a few hundreds fit.
        let mut text = b"InitiatorName=iqn.ok\0TargetName=iqn.2026-01.test:disk\0".to_vec();
        for i in 0..200 {
            text.extend_from_slice(format!("X-unknown-{i}=1\0").as_bytes());
        }
        assert!(!matches!(login(&text), LoginStep::Fail(_)));
    }

    fn fails_with(step: LoginStep, expected: LoginStatus) -> bool {
        matches!(step, LoginStep::Fail(r) if r.status == expected)
    }

    /// An initiator outside the ACL logged in as Discovery must not turn the login into a
    /// Normal session to the protected target in a later request.
    #[test]
    fn session_type_and_target_cannot_change_after_the_first_request() {
        let n = nodes();
        let mut l = Login::new(TargetLimits::default(), 1);
        let step = l.step(
            &req(0, 1, true),
            b"InitiatorName=iqn.bad\0SessionType=Discovery\0AuthMethod=None\0",
            &n,
        );
        assert!(matches!(step, LoginStep::Continue(_)));
        let step = l.step(
            &req(1, 3, true),
            b"SessionType=Normal\0TargetName=iqn.2026-01.test:disk\0",
            &n,
        );
        assert!(fails_with(step, LoginStatus::INITIATOR_ERROR));
        // Naming the target alone in a later request of a discovery login is refused too.
        let mut l = Login::new(TargetLimits::default(), 1);
        l.step(
            &req(0, 1, true),
            b"InitiatorName=iqn.bad\0SessionType=Discovery\0AuthMethod=None\0",
            &n,
        );
        let step = l.step(&req(1, 3, true), b"TargetName=iqn.2026-01.test:disk\0", &n);
        assert!(fails_with(step, LoginStatus::INITIATOR_ERROR));
    }

    /// The initiator name is authorized in the first request and cannot be swapped afterwards.
    #[test]
    fn initiator_name_cannot_change_after_authorization() {
        let n = nodes();
        let mut l = Login::new(TargetLimits::default(), 1);
        let step = l.step(
            &req(0, 1, true),
            b"InitiatorName=iqn.ok\0TargetName=iqn.2026-01.test:disk\0AuthMethod=None\0",
            &n,
        );
        assert!(matches!(step, LoginStep::Continue(_)));
        let step = l.step(&req(1, 3, true), b"InitiatorName=iqn.other\0", &n);
        assert!(fails_with(step, LoginStatus::INITIATOR_ERROR));
    }

    #[test]
    fn auth_method_outside_the_security_stage_fails_the_login() {
        let step =
            login(b"InitiatorName=iqn.ok\0TargetName=iqn.2026-01.test:disk\0AuthMethod=CHAP\0");
        assert!(fails_with(step, LoginStatus::INITIATOR_ERROR));
    }

    #[test]
    fn chap_only_fails_authentication() {
        let mut l = Login::new(TargetLimits::default(), 1);
        let step = l.step(
            &req(0, 1, true),
            b"InitiatorName=iqn.ok\0TargetName=iqn.2026-01.test:disk\0AuthMethod=CHAP\0",
            &nodes(),
        );
        assert!(
            matches!(step, LoginStep::Fail(r) if r.status == LoginStatus::AUTHENTICATION_FAILURE)
        );
    }

    #[test]
    fn continued_login_request_is_reassembled() {
        let mut l = Login::new(TargetLimits::default(), 1);
        let n = nodes();
        let mut r = req(1, 3, true);
        r.continues = true;
        let LoginStep::Continue(ack) = l.step(&r, b"InitiatorName=iqn.ok\0Target", &n) else {
            panic!()
        };
        assert!(ack.text.is_empty() && !ack.transit);
        r.continues = false;
        assert!(matches!(
            l.step(&r, b"Name=iqn.2026-01.test:disk\0", &n),
            LoginStep::Complete(..)
        ));
    }

    #[test]
    fn discovery_session_needs_no_target() {
        let mut l = Login::new(TargetLimits::default(), 1);
        let step = l.step(
            &req(1, 3, true),
            b"InitiatorName=iqn.any\0SessionType=Discovery\0MaxBurstLength=512\0",
            &nodes(),
        );
        let LoginStep::Complete(r, est) = step else {
            panic!()
        };
        assert_eq!(est.session_type, SessionType::Discovery);
        assert!(keys(&r.text).contains(&("MaxBurstLength".into(), "Irrelevant".into())));
    }
}
