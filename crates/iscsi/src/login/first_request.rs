//! The first Login Request (RFC 7143 §6.3.1): it names the initiator (§13.5), the session
//! type (§13.21) and, for a normal session, the target (§13.4). They are authorized here and
//! fixed for the rest of the login; the rest of the request belongs to the stage its CSG
//! names.

use super::{
    read_keys, Context, Identity, LoginReply, LoginStatus, Negotiation, Next,
    OperationalNegotiation, Request, SecurityNegotiation, Stage,
};
use crate::chap::Chap;
use crate::negotiation::SessionType;
use crate::node::TargetNode;
use crate::text;

/// No request taken yet (the parts of a continued first request are only reassembled).
#[derive(Debug)]
pub(super) struct AwaitingFirstRequest;

impl AwaitingFirstRequest {
    pub(super) fn handle(self, cx: &mut Context, req: &Request) -> Result<Next, LoginReply> {
        let mut declaration = Declaration::default();
        let mut negotiation = Negotiation::default();
        let read = read_keys(
            &req.keys,
            req.csg,
            Some(&mut declaration),
            &mut negotiation,
            cx,
        );
        cx.log
            .initiator_name
            .clone_from(&declaration.initiator_name);
        let mut offer = read?;
        let (identity, required) =
            declaration.authorize(negotiation.session_type, cx, &mut offer.answers)?;
        match (req.csg, required) {
            (Stage::SecurityNegotiation, required) => {
                SecurityNegotiation::new(identity, negotiation, required).respond(cx, req, offer)
            }
            // RFC 7143 §6.3: a target that requires authentication refuses a login that
            // skips the security stage.
            (_, Some(_)) => Err(LoginReply::failure(
                LoginStatus::AUTHENTICATION_FAILURE,
                "CHAP required, security stage skipped",
            )),
            (_, None) => OperationalNegotiation::new(identity, negotiation).respond(cx, req, offer),
        }
    }
}

/// The leading keys as the first request declares them, in its order; the session type goes
/// to the [`Negotiation`], which answers the keys after it for that type.
#[derive(Default)]
pub(super) struct Declaration {
    initiator_name: Option<String>,
    node: Option<usize>,
}

impl Declaration {
    /// Takes one of the leading keys (`super::LEADING_KEYS`).
    pub(super) fn take(
        &mut self,
        key: &str,
        value: &str,
        negotiation: &mut Negotiation,
        nodes: &[TargetNode],
    ) -> Result<(), LoginReply> {
        match key {
            "InitiatorName" if value.is_empty() => Err(LoginReply::failure(
                LoginStatus::INITIATOR_ERROR,
                "empty InitiatorName",
            )),
            "InitiatorName" => {
                self.initiator_name = Some(value.to_owned());
                Ok(())
            }
            "SessionType" => {
                negotiation.session_type = match value {
                    "Normal" => SessionType::Normal,
                    "Discovery" => SessionType::Discovery,
                    _ => {
                        return Err(LoginReply::failure(
                            LoginStatus::SESSION_TYPE_NOT_SUPPORTED,
                            format!("SessionType={value}"),
                        ))
                    }
                };
                Ok(())
            }
            _ => match nodes.iter().position(|n| n.name == value && !n.retired) {
                Some(i) => {
                    self.node = Some(i);
                    Ok(())
                }
                None => Err(LoginReply::failure(
                    LoginStatus::NOT_FOUND,
                    format!("no target named {value:?}"),
                )),
            },
        }
    }

    /// Whether the initiator may log in to what it named, and what it must prove then (CHAP,
    /// or nothing); a normal session's target declares itself ahead of `answers`.
    fn authorize(
        self,
        session_type: SessionType,
        cx: &Context,
        answers: &mut Vec<u8>,
    ) -> Result<(Identity, Option<Chap>), LoginReply> {
        let Some(initiator_name) = self.initiator_name else {
            return Err(LoginReply::failure(
                LoginStatus::MISSING_PARAMETER,
                "no InitiatorName",
            ));
        };
        let (node, required) = match session_type {
            SessionType::Normal => {
                let Some(node) = self.node.and_then(|i| cx.nodes.get(i)) else {
                    return Err(LoginReply::failure(
                        LoginStatus::MISSING_PARAMETER,
                        "no TargetName for a normal session",
                    ));
                };
                // Answered like an unknown name, so that an initiator cannot probe which
                // protected targets exist.
                if !node.allows(&initiator_name) {
                    return Err(LoginReply::failure(
                        LoginStatus::NOT_FOUND,
                        format!(
                            "{initiator_name} is not in the allowed_initiators of {}",
                            node.name
                        ),
                    ));
                }
                *answers = declare_target(
                    node.portal_group_tag(cx.settings.portal_group_tag),
                    node,
                    answers,
                );
                (self.node, node.chap.clone())
            }
            SessionType::Discovery => (None, cx.settings.discovery_chap.clone()),
        };
        let identity = Identity {
            initiator_name,
            node,
        };
        Ok((identity, required))
    }
}

/// The answers to the first request naming `node`, headed by the target's declarations: the
/// portal group tag (RFC 7143 §13.9) and its alias (§13.6). Only the target sends these keys,
/// so the declarations replace an answer to the same keys offered by the initiator: one
/// response never holds a key twice.
fn declare_target(portal_group_tag: u16, node: &TargetNode, answers: &[u8]) -> Vec<u8> {
    let mut head = Vec::new();
    text::push(
        &mut head,
        "TargetPortalGroupTag",
        &portal_group_tag.to_string(),
    );
    let mut rest = without_key(answers, "TargetPortalGroupTag");
    if let Some(alias) = &node.alias {
        text::push(&mut head, "TargetAlias", alias);
        rest = without_key(&rest, "TargetAlias");
    }
    head.append(&mut rest);
    head
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
