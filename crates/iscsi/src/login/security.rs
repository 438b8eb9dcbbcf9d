//! The security negotiation stage (RFC 7143 §6.3.2): the initiator offers authentication
//! methods (AuthMethod, §12.1) and, once CHAP is agreed, proves its secret (§12.1.3; the
//! exchange itself is [`chap::Exchange`]). The stage ends only authenticated, or where the
//! target requires nothing.

use super::{
    read_keys, Context, Identity, LoginReply, LoginStatus, Negotiation, Next, Offer,
    OperationalNegotiation, Request, Stage, State,
};
use crate::chap::{self, Chap};
use crate::text;

#[derive(Debug)]
pub(super) struct SecurityNegotiation {
    identity: Identity,
    /// Operational keys may come in this stage too; they are answered alike.
    negotiation: Negotiation,
    authentication: Authentication,
}

/// What the target requires and how far the initiator has come with it.
#[derive(Debug)]
enum Authentication {
    /// Nothing; `none_agreed` once AuthMethod=None was agreed.
    NotRequired { none_agreed: bool },
    /// CHAP, not agreed yet.
    ChapRequired(Chap),
    /// AuthMethod=CHAP agreed: the exchange runs.
    Chap(Chap, chap::Exchange),
}

impl SecurityNegotiation {
    pub(super) fn new(
        identity: Identity,
        negotiation: Negotiation,
        required: Option<Chap>,
    ) -> SecurityNegotiation {
        SecurityNegotiation {
            identity,
            negotiation,
            authentication: match required {
                Some(chap) => Authentication::ChapRequired(chap),
                None => Authentication::NotRequired { none_agreed: false },
            },
        }
    }

    pub(super) fn handle(mut self, cx: &mut Context, req: &Request) -> Result<Next, LoginReply> {
        let offer = read_keys(
            &req.keys,
            Stage::SecurityNegotiation,
            None,
            &mut self.negotiation,
            cx,
        )?;
        self.respond(cx, req, offer)
    }

    /// Answers the security keys of a request whose other keys are read into `offer`.
    pub(super) fn respond(
        mut self,
        cx: &mut Context,
        req: &Request,
        offer: Offer,
    ) -> Result<Next, LoginReply> {
        let mut answers = offer.answers;
        if let Some(methods) = offer.auth_method {
            let answer = self.authentication.agree(methods)?;
            text::push(&mut answers, "AuthMethod", answer);
        }
        if !offer.chap.is_empty() {
            cx.log.chap = self.authentication.chap(&offer.chap, &mut answers)?;
        }
        let next = match req.next_stage()? {
            Some(next) => self
                .authentication
                .may_leave(next, offer.auth_method.is_some())?,
            None => None,
        };
        match next {
            Some(Stage::FullFeaturePhase) => {
                Negotiation::declare(&cx.settings.limits, &mut answers);
                let reply = req.reply(next, answers)?;
                let established =
                    self.negotiation
                        .establish(self.identity, &cx.settings.limits, req.isid);
                Ok(Next::Complete(reply, established))
            }
            Some(_) => {
                let reply = req.reply(next, answers)?;
                let operational = OperationalNegotiation::new(self.identity, self.negotiation);
                Ok(Next::Continue(reply, State::Operational(operational)))
            }
            None => Ok(Next::Continue(
                req.reply(None, answers)?,
                State::Security(self),
            )),
        }
    }
}

impl Authentication {
    /// The answer to an AuthMethod list (RFC 7143 §12.1): the method the target requires, or
    /// None where it requires nothing, if offered; else Reject.
    fn agree(&mut self, methods: &str) -> Result<&'static str, LoginReply> {
        let offers = |m: &str| methods.split(',').any(|v| v == m);
        match self {
            Authentication::ChapRequired(chap) if offers("CHAP") => {
                *self = Authentication::Chap(chap.clone(), chap::Exchange::Algorithm);
                Ok("CHAP")
            }
            Authentication::NotRequired { none_agreed } if offers("None") => {
                *none_agreed = true;
                Ok("None")
            }
            Authentication::Chap(..) => Err(LoginReply::failure(
                LoginStatus::INITIATOR_ERROR,
                "AuthMethod offered again",
            )),
            _ => Ok("Reject"),
        }
    }

    /// One step of the agreed CHAP exchange, its answers to `out`; once the initiator proved
    /// its secret, the algorithm and whether the target proved its own too.
    fn chap(
        &mut self,
        keys: &[(String, String)],
        out: &mut Vec<u8>,
    ) -> Result<Option<(chap::Algorithm, bool)>, LoginReply> {
        let Authentication::Chap(chap, exchange) = self else {
            return Err(LoginReply::failure(
                LoginStatus::AUTHENTICATION_FAILURE,
                "CHAP keys without an agreed CHAP exchange",
            ));
        };
        let mut answers = Vec::new();
        exchange.step(chap, keys, &mut answers).map_err(|e| {
            LoginReply::failure(LoginStatus::AUTHENTICATION_FAILURE, format!("CHAP: {e}"))
        })?;
        for (k, v) in answers {
            text::push(out, k, &v);
        }
        Ok(match exchange {
            chap::Exchange::Authenticated { algorithm, mutual } => Some((*algorithm, *mutual)),
            _ => None,
        })
    }

    /// Whether the initiator may leave the stage for `next` as it asks: `Ok(None)` keeps it
    /// in the stage while CHAP is under way (the response clears T, RFC 7143 §6.3). A request
    /// that `offered` AuthMethod must have agreed one.
    fn may_leave(&self, next: Stage, offered: bool) -> Result<Option<Stage>, LoginReply> {
        match self {
            Authentication::Chap(_, chap::Exchange::Authenticated { .. }) => Ok(Some(next)),
            Authentication::Chap(..) => Ok(None),
            // With no method agreed the initiator cannot authenticate at all.
            Authentication::ChapRequired(_) => Err(LoginReply::failure(
                LoginStatus::AUTHENTICATION_FAILURE,
                "CHAP required, none agreed",
            )),
            Authentication::NotRequired { none_agreed: false } if offered => {
                Err(LoginReply::failure(
                    LoginStatus::AUTHENTICATION_FAILURE,
                    "no acceptable AuthMethod",
                ))
            }
            Authentication::NotRequired { .. } => Ok(Some(next)),
        }
    }
}
