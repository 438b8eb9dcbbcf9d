//! The target side of the login phase (RFC 7143 §6.3, Login Request/Response §11.12–11.13),
//! as a pure state machine: one Login Request in, one Login Response's fields out.
//!
//! As in rustls's handshake, each stage of the login is a type holding what that stage needs;
//! a request consumes it and yields the response and the next state:
//!
//! - `AwaitingFirstRequest` (first_request.rs, §6.3.1): the first request names the
//!   initiator, the session type and the target, which are authorized there; the rest of it
//!   goes to the stage its CSG names.
//! - `SecurityNegotiation` (security.rs, §6.3.2): AuthMethod and CHAP. It stays while CHAP
//!   is under way, then moves on to the operational stage or straight to the full feature
//!   phase.
//! - `OperationalNegotiation` (operational.rs, §6.3.3): operational keys until T = 1 and
//!   NSG = 3.
//!
//! [`Login::step`] checks what every request must keep whatever the stage (version, CSG,
//! ISID, TSIH), reassembles continued requests (C bit), and hands the whole request to the
//! stage.

mod first_request;
mod operational;
mod security;

use crate::bhs::Bhs;
use crate::chap::{self, Chap};
use crate::negotiation::{self, Parameters, SessionType, TargetLimits};
use crate::node::TargetNode;
use crate::text;
use first_request::{AwaitingFirstRequest, Declaration};
use operational::OperationalNegotiation;
use security::SecurityNegotiation;

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
    /// A refusal: the login ends (RFC 7143 §11.13.5).
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

    /// A response that accepts the request in `csg`, moving to `next` if given.
    fn success(csg: Stage, next: Option<Stage>, text: Vec<u8>) -> LoginReply {
        LoginReply {
            transit: next.is_some(),
            continues: false,
            csg: csg as u8,
            nsg: next.map_or(0, |s| s as u8),
            status: LoginStatus::SUCCESS,
            text,
            reason: String::new(),
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
    settings: Settings,
    state: State,
    /// The ISID of the first request, which every later one repeats (RFC 7143 §11.12.5).
    isid: Option<[u8; 6]>,
    /// The text of a request continued over several PDUs (C bit, RFC 7143 §11.12.2).
    assembler: text::Assembler,
    /// The stage a continued request began in, which all its parts name.
    continued: Option<Stage>,
    log: Log,
}

/// What the portal configured: the same for every login on it.
#[derive(Debug)]
struct Settings {
    limits: TargetLimits,
    portal_group_tag: u16,
    /// What discovery sessions must prove.
    discovery_chap: Option<Chap>,
}

/// What the caller logs about a login, whichever stage it ended in.
#[derive(Debug, Default)]
struct Log {
    /// The InitiatorName, once the first request declared it (a refusal names it too).
    initiator_name: Option<String>,
    /// The CHAP algorithm and whether the target proved its secret too, once CHAP succeeded.
    chap: Option<(chap::Algorithm, bool)>,
}

/// Where the login stands: the stage that takes the next request.
#[derive(Debug)]
enum State {
    AwaitingFirstRequest(AwaitingFirstRequest),
    Security(SecurityNegotiation),
    Operational(OperationalNegotiation),
    /// Completed or refused: no request is taken any more.
    Ended,
}

impl State {
    /// The stage every request must name as its CSG, once the first request chose one.
    fn stage(&self) -> Option<Stage> {
        match self {
            State::Security(_) => Some(Stage::SecurityNegotiation),
            State::Operational(_) => Some(Stage::LoginOperationalNegotiation),
            State::AwaitingFirstRequest(_) | State::Ended => None,
        }
    }
}

/// What a stage reads besides its own state, and what it leaves for the caller's log (like
/// rustls's `Context`).
struct Context<'a> {
    settings: &'a Settings,
    nodes: &'a [TargetNode],
    log: &'a mut Log,
}

/// A whole Login Request: the stage fields of its header and the keys of its text, in order.
struct Request {
    csg: Stage,
    transit: bool,
    nsg: u8,
    isid: [u8; 6],
    keys: Vec<(String, String)>,
}

/// What a stage makes of a request it accepts (a refusal is the `Err` of its `handle`).
enum Next {
    /// Send the reply; `State` takes the next request.
    Continue(LoginReply, State),
    /// Send the reply (T = 1, NSG = 3): the session is in full feature phase.
    Complete(LoginReply, Established),
}

impl Login {
    pub fn new(limits: TargetLimits, portal_group_tag: u16) -> Login {
        Login {
            settings: Settings {
                limits,
                portal_group_tag,
                discovery_chap: None,
            },
            state: State::AwaitingFirstRequest(AwaitingFirstRequest),
            isid: None,
            assembler: text::Assembler::default(),
            continued: None,
            log: Log::default(),
        }
    }

    /// Discovery sessions must authenticate with CHAP too.
    pub fn with_discovery_chap(mut self, chap: Option<Chap>) -> Login {
        self.settings.discovery_chap = chap;
        self
    }

    /// The InitiatorName the first Login Request declared, if it has come.
    pub fn initiator_name(&self) -> Option<&str> {
        self.log.initiator_name.as_deref()
    }

    /// How the initiator authenticated, for the log: "none" or e.g. "CHAP SHA-256, mutual".
    pub fn authentication(&self) -> String {
        match self.log.chap {
            Some((algorithm, mutual)) => {
                format!("CHAP {algorithm}{}", if mutual { ", mutual" } else { "" })
            }
            None => "none".to_owned(),
        }
    }

    /// Handle one Login Request with its data segment.
    pub fn step(&mut self, req: &LoginRequest, data: &[u8], nodes: &[TargetNode]) -> LoginStep {
        let request = match self.receive(req, data) {
            Ok(request) => request,
            Err(step) => return step,
        };
        let mut cx = Context {
            settings: &self.settings,
            nodes,
            log: &mut self.log,
        };
        let next = match std::mem::replace(&mut self.state, State::Ended) {
            State::AwaitingFirstRequest(s) => s.handle(&mut cx, &request),
            State::Security(s) => s.handle(&mut cx, &request),
            State::Operational(s) => s.handle(&mut cx, &request),
            State::Ended => Err(LoginReply::failure(
                LoginStatus::INITIATOR_ERROR,
                "the login has ended",
            )),
        };
        match next {
            Ok(Next::Continue(reply, state)) => {
                self.state = state;
                LoginStep::Continue(reply)
            }
            Ok(Next::Complete(reply, established)) => {
                LoginStep::Complete(reply, Box::new(established))
            }
            Err(reply) => LoginStep::Fail(reply),
        }
    }

    /// Checks what every request must keep, whatever the stage, and reassembles its text. The
    /// `Err` is answered at once: a refusal, or the empty response that acknowledges a part
    /// of a continued request.
    fn receive(&mut self, req: &LoginRequest, data: &[u8]) -> Result<Request, LoginStep> {
        let fail = |status, reason| Err(LoginStep::Fail(LoginReply::failure(status, reason)));
        // RFC 7143 §11.12.4: we speak version 0x00 only.
        if req.version_min > 0 {
            return fail(LoginStatus::UNSUPPORTED_VERSION, "Version-min above 0");
        }
        let Some(csg) = Stage::from_bits(req.csg).filter(|s| *s != Stage::FullFeaturePhase) else {
            return fail(LoginStatus::INITIATOR_ERROR, "CSG is not a login stage");
        };
        // The stage changes by a transit only (RFC 7143 §11.12.3); the first request may
        // begin in either, as we require no authentication unless the target does.
        if self
            .continued
            .or(self.state.stage())
            .is_some_and(|s| s != csg)
        {
            return fail(
                LoginStatus::INITIATOR_ERROR,
                "CSG changed without a stage transition",
            );
        }
        if *self.isid.get_or_insert(req.isid) != req.isid {
            return fail(LoginStatus::INITIATOR_ERROR, "ISID changed during login");
        }
        // One connection per session: a login that adds a connection to an existing
        // session (TSIH ≠ 0, RFC 7143 §6.3.1) names a session we cannot join.
        if req.tsih != 0 {
            return fail(
                LoginStatus::SESSION_DOES_NOT_EXIST,
                "TSIH names a session to join (one connection per session)",
            );
        }
        let text = match self.assembler.push(data, req.continues) {
            Ok(Some(text)) => text,
            // C bit: acknowledge with an empty response, stay in the stage (RFC 7143 §11.12.2).
            Ok(None) => {
                self.continued = Some(csg);
                return Err(LoginStep::Continue(LoginReply::success(
                    csg,
                    None,
                    Vec::new(),
                )));
            }
            Err(_) => {
                return fail(
                    LoginStatus::INITIATOR_ERROR,
                    "login text too long or badly continued",
                )
            }
        };
        self.continued = None;
        let Ok(keys) = text::parse(&text) else {
            return fail(
                LoginStatus::INITIATOR_ERROR,
                "login text is not key=value pairs",
            );
        };
        Ok(Request {
            csg,
            transit: req.transit,
            nsg: req.nsg,
            isid: req.isid,
            keys,
        })
    }
}

impl Request {
    /// With T = 1, the stage the initiator asks to move to, which must come after CSG (RFC
    /// 7143 §11.12.3).
    fn next_stage(&self) -> Result<Option<Stage>, LoginReply> {
        if !self.transit {
            return Ok(None);
        }
        match Stage::from_bits(self.nsg).filter(|n| *n > self.csg) {
            Some(next) => Ok(Some(next)),
            None => Err(LoginReply::failure(
                LoginStatus::INITIATOR_ERROR,
                "NSG is not after CSG",
            )),
        }
    }

    /// The response carrying `answers`, and moving to `next` if given; a refusal if the
    /// answers do not fit in [`ANSWER_LIMIT`].
    fn reply(&self, next: Option<Stage>, answers: Vec<u8>) -> Result<LoginReply, LoginReply> {
        if answers.len() > ANSWER_LIMIT {
            return Err(LoginReply::failure(
                LoginStatus::INITIATOR_ERROR,
                format!(
                    "the answer to {} keys takes {} bytes, more than {ANSWER_LIMIT}",
                    self.keys.len(),
                    answers.len()
                ),
            ));
        }
        Ok(LoginReply::success(self.csg, next, answers))
    }
}

/// Who logs in to what, as the first request declared and authorized it.
#[derive(Debug)]
struct Identity {
    initiator_name: String,
    /// Index into the node list (Normal sessions).
    node: Option<usize>,
}

/// The operational keys negotiated so far (RFC 7143 §6.2, §13), in either stage.
#[derive(Debug, Default)]
struct Negotiation {
    session_type: SessionType,
    params: Parameters,
}

impl Negotiation {
    /// Answers one operational key into `out` (nothing for a declaration we make ourselves).
    fn answer(
        &mut self,
        key: &str,
        value: &str,
        limits: &TargetLimits,
        out: &mut Vec<u8>,
    ) -> Result<(), LoginReply> {
        let Some(answer) =
            negotiation::answer(key, value, self.session_type, limits, &mut self.params)
        else {
            return Ok(());
        };
        // A Reject here would share its key with our own declaration (RFC 7143 §13.12): the
        // initiator could not tell which is which.
        if key == "MaxRecvDataSegmentLength" {
            return Err(LoginReply::failure(
                LoginStatus::INITIATOR_ERROR,
                format!("MaxRecvDataSegmentLength={value} is not 512..=16777215"),
            ));
        }
        text::push(out, key, &answer);
        Ok(())
    }

    /// Declares our receive limit (RFC 7143 §13.12): once, in the operational stage or the
    /// response that enters full feature phase, as open-iscsi refuses operational keys in a
    /// security-stage response (usr/login.c).
    fn declare(limits: &TargetLimits, out: &mut Vec<u8>) {
        text::push(
            out,
            "MaxRecvDataSegmentLength",
            &limits.max_recv_data_segment_length.to_string(),
        );
    }

    /// The session that the login completes.
    fn establish(self, identity: Identity, limits: &TargetLimits, isid: [u8; 6]) -> Established {
        let mut params = self.params;
        params.target_max_recv_data_segment_length = limits.max_recv_data_segment_length;
        Established {
            session_type: self.session_type,
            node: identity.node,
            initiator_name: identity.initiator_name,
            isid,
            params,
        }
    }
}

/// One request's keys, read in order (RFC 7143 §6.2): the answers to its operational keys, and
/// the security keys for the security stage to answer.
#[derive(Default)]
struct Offer<'k> {
    answers: Vec<u8>,
    /// The AuthMethod list (the last one offered).
    auth_method: Option<&'k str>,
    /// The CHAP_* keys, in order.
    chap: Vec<(String, String)>,
}

/// Reads the keys of a request in `stage`. Only the first request (`first`) may hold the
/// leading keys, and they change the session type that later keys are answered for.
fn read_keys<'k>(
    keys: &'k [(String, String)],
    stage: Stage,
    mut first: Option<&mut Declaration>,
    negotiation: &mut Negotiation,
    cx: &Context,
) -> Result<Offer<'k>, LoginReply> {
    let mut offer = Offer::default();
    for (key, value) in keys {
        if LEADING_KEYS.contains(&key.as_str()) {
            // Who logs in to what is declared once, in the first Login Request (RFC 7143
            // §13.4, §13.5, §13.21) and authorized there; a later request must not change it.
            let Some(first) = first.as_deref_mut() else {
                return Err(LoginReply::failure(
                    LoginStatus::INITIATOR_ERROR,
                    format!("{key} after the first Login Request"),
                ));
            };
            first.take(key, value, negotiation, cx.nodes)?;
            continue;
        }
        // Security keys belong to the security stage (RFC 7143 §6.3, §12).
        let security_key = key == "AuthMethod" || key.starts_with("CHAP_");
        if stage != Stage::SecurityNegotiation && security_key {
            return Err(LoginReply::failure(
                LoginStatus::INITIATOR_ERROR,
                format!("{key} outside the security stage"),
            ));
        }
        match key.as_str() {
            "InitiatorAlias" => {}
            "AuthMethod" => offer.auth_method = Some(value),
            k if k.starts_with("CHAP_") => offer.chap.push((key.clone(), value.clone())),
            _ => negotiation.answer(key, value, &cx.settings.limits, &mut offer.answers)?,
        }
    }
    Ok(offer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn nodes() -> Vec<TargetNode> {
        vec![TargetNode {
            retired: false,
            gateways: Vec::new(),
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

    /// CSG=0 with T=1 and NSG=3: the security stage may lead straight to the full feature
    /// phase, and its response then declares our MaxRecvDataSegmentLength.
    #[test]
    fn security_stage_straight_to_full_feature_phase() {
        let mut l = Login::new(TargetLimits::default(), 1);
        let step = l.step(
            &req(0, 3, true),
            b"InitiatorName=iqn.ok\0TargetName=iqn.2026-01.test:disk\0AuthMethod=None\0",
            &nodes(),
        );
        let LoginStep::Complete(r, est) = step else {
            panic!("{step:?}")
        };
        assert_eq!(r.flags(), 0x80 | 3);
        let k = keys(&r.text);
        assert!(k.contains(&("AuthMethod".into(), "None".into())));
        assert!(k.contains(&("MaxRecvDataSegmentLength".into(), "262144".into())));
        assert_eq!(est.node, Some(0));
        assert_eq!(l.authentication(), "none");
    }

    /// The operational stage may take several requests (T=0); our limit is declared in its
    /// first response only.
    #[test]
    fn operational_stage_declares_its_limit_once() {
        let mut l = Login::new(TargetLimits::default(), 1);
        let n = nodes();
        let declared = |r: &LoginReply| {
            keys(&r.text)
                .iter()
                .filter(|(k, _)| k == "MaxRecvDataSegmentLength")
                .count()
        };
        let first = b"InitiatorName=iqn.ok\0TargetName=iqn.2026-01.test:disk\0";
        let LoginStep::Continue(r) = l.step(&req(1, 0, false), first, &n) else {
            panic!()
        };
        assert!(!r.transit && r.csg == 1);
        assert_eq!(declared(&r), 1);
        let LoginStep::Continue(r) = l.step(&req(1, 0, false), b"InitialR2T=No\0", &n) else {
            panic!()
        };
        assert_eq!(declared(&r), 0);
        assert!(keys(&r.text).contains(&("InitialR2T".into(), "No".into())));
        let LoginStep::Complete(r, est) = l.step(&req(1, 3, true), b"", &n) else {
            panic!()
        };
        assert_eq!(declared(&r), 0);
        assert!(!est.params.initial_r2t);
    }

    fn mutual_chap_node() -> Vec<TargetNode> {
        let mut n = chap_node();
        n[0].chap.as_mut().unwrap().target = Some(chap::Credentials {
            user: "stint".into(),
            secret: b"the-target-secret".to_vec(),
        });
        n
    }

    /// While CHAP is under way the stage stays, whatever T the initiator sets: each response
    /// clears T (RFC 7143 §6.3), and a request that names the next stage before the
    /// exchange ends is refused.
    #[test]
    fn chap_under_way_keeps_the_security_stage() {
        let n = chap_node();
        let mut l = Login::new(TargetLimits::default(), 1);
        // AuthMethod and CHAP_A may come in one request.
        let LoginStep::Continue(r) = l.step(
            &req(0, 1, true),
            b"InitiatorName=iqn.ok\0TargetName=iqn.2026-01.test:disk\0AuthMethod=CHAP\0\
CHAP_A=7,5\0",
            &n,
        ) else {
            panic!()
        };
        assert!(!r.transit && r.nsg == 0);
        let k = keys(&r.text);
        assert!(k.contains(&("AuthMethod".into(), "CHAP".into())));
        assert!(k.contains(&("CHAP_A".into(), "7".into())));
        let step = l.step(&req(1, 3, true), b"", &n);
        assert!(fails_with(step, LoginStatus::INITIATOR_ERROR));

        // AuthMethod is agreed once.
        let mut l = Login::new(TargetLimits::default(), 1);
        let first = b"InitiatorName=iqn.ok\0TargetName=iqn.2026-01.test:disk\0AuthMethod=CHAP\0";
        assert!(matches!(
            l.step(&req(0, 1, false), first, &n),
            LoginStep::Continue(_)
        ));
        let step = l.step(&req(0, 1, false), b"AuthMethod=CHAP\0", &n);
        assert!(fails_with(step, LoginStatus::INITIATOR_ERROR));
    }

    /// Mutual CHAP: the target answers the initiator's challenge with its own secret, and the
    /// answering request may enter the full feature phase at once.
    #[test]
    fn mutual_chap_then_full_feature_phase() {
        let n = mutual_chap_node();
        let mut l = Login::new(TargetLimits::default(), 1);
        let first = b"InitiatorName=iqn.ok\0TargetName=iqn.2026-01.test:disk\0AuthMethod=CHAP\0";
        let LoginStep::Continue(_) = l.step(&req(0, 1, false), first, &n) else {
            panic!()
        };
        let LoginStep::Continue(r) = l.step(&req(0, 1, false), b"CHAP_A=5\0", &n) else {
            panic!()
        };
        let k = keys(&r.text);
        let get = |name: &str| k.iter().find(|(key, _)| key == name).unwrap().1.clone();
        let id: u8 = get("CHAP_I").parse().unwrap();
        let challenge = chap::decode_binary(&get("CHAP_C")).unwrap();
        let md5 = chap::Algorithm::Md5;
        let answer = chap::encode_hex(&md5.response(id, b"twelve-bytes-or-more", &challenge));
        let ours = [7u8; 16];
        let text = format!(
            "CHAP_N=alice\0CHAP_R={answer}\0CHAP_I=9\0CHAP_C={}\0",
            chap::encode_hex(&ours)
        );
        assert_eq!(l.authentication(), "none");
        let LoginStep::Complete(r, _) = l.step(&req(0, 3, true), text.as_bytes(), &n) else {
            panic!()
        };
        let k = keys(&r.text);
        assert!(k.contains(&("CHAP_N".into(), "stint".into())));
        let theirs = chap::encode_hex(&md5.response(9, b"the-target-secret", &ours));
        assert!(k.contains(&("CHAP_R".into(), theirs)));
        assert!(k.contains(&("MaxRecvDataSegmentLength".into(), "262144".into())));
        assert_eq!(l.authentication(), "CHAP MD5, mutual");
    }

    /// What every request must keep whatever the stage (RFC 7143 §11.12): CSG changes by a
    /// transit only, also across the parts of a continued request; NSG comes after CSG; the
    /// ISID stays; TSIH 0 (no connection joins a session).
    #[test]
    fn header_fields_follow_the_stage_transitions() {
        let n = nodes();
        let first = b"InitiatorName=iqn.ok\0TargetName=iqn.2026-01.test:disk\0";
        let after_first = |next: LoginRequest, text: &[u8]| {
            let mut l = Login::new(TargetLimits::default(), 1);
            assert!(matches!(
                l.step(&req(0, 1, false), first, &n),
                LoginStep::Continue(_)
            ));
            l.step(&next, text, &n)
        };
        let step = after_first(req(1, 3, true), b"");
        assert!(fails_with(step, LoginStatus::INITIATOR_ERROR));
        let step = after_first(req(0, 0, true), b"");
        assert!(fails_with(step, LoginStatus::INITIATOR_ERROR));
        let step = after_first(req(2, 3, true), b"");
        assert!(fails_with(step, LoginStatus::INITIATOR_ERROR));
        let mut other_isid = req(0, 1, true);
        other_isid.isid[5] = 2;
        let step = after_first(other_isid, b"");
        assert!(fails_with(step, LoginStatus::INITIATOR_ERROR));
        let mut join = req(0, 1, true);
        join.tsih = 1;
        let step = after_first(join, b"");
        assert!(fails_with(step, LoginStatus::SESSION_DOES_NOT_EXIST));

        let mut l = Login::new(TargetLimits::default(), 1);
        let mut part = req(1, 3, true);
        part.continues = true;
        assert!(matches!(
            l.step(&part, b"InitiatorName=iqn.ok\0", &n),
            LoginStep::Continue(_)
        ));
        let step = l.step(&req(0, 1, true), b"TargetName=iqn.2026-01.test:disk\0", &n);
        assert!(fails_with(step, LoginStatus::INITIATOR_ERROR));
    }

    /// A completed or refused login takes no more requests; a refusal still names the
    /// initiator for the log.
    #[test]
    fn a_login_that_ended_takes_no_more_requests() {
        let n = nodes();
        let mut l = Login::new(TargetLimits::default(), 1);
        let first = b"InitiatorName=iqn.ok\0TargetName=iqn.2026-01.test:disk\0";
        assert!(matches!(
            l.step(&req(1, 3, true), first, &n),
            LoginStep::Complete(..)
        ));
        let step = l.step(&req(1, 3, true), b"", &n);
        assert!(fails_with(step, LoginStatus::INITIATOR_ERROR));

        let mut l = Login::new(TargetLimits::default(), 1);
        let refused = b"InitiatorName=iqn.bad\0TargetName=iqn.2026-01.test:disk\0";
        let step = l.step(&req(1, 3, true), refused, &n);
        assert!(fails_with(step, LoginStatus::NOT_FOUND));
        assert_eq!(l.initiator_name(), Some("iqn.bad"));
        let step = l.step(&req(1, 3, true), first, &n);
        assert!(fails_with(step, LoginStatus::INITIATOR_ERROR));
    }
}
