//! The login operational negotiation stage (RFC 7143 §6.3.3): operational keys (§13) until the
//! initiator asks for the full feature phase.

use super::{
    read_keys, Context, Identity, LoginReply, Negotiation, Next, Offer, Request, Stage, State,
};

#[derive(Debug)]
pub(super) struct OperationalNegotiation {
    identity: Identity,
    negotiation: Negotiation,
    /// Whether our MaxRecvDataSegmentLength was declared, in an earlier response of the stage.
    declared: bool,
}

impl OperationalNegotiation {
    pub(super) fn new(identity: Identity, negotiation: Negotiation) -> OperationalNegotiation {
        OperationalNegotiation {
            identity,
            negotiation,
            declared: false,
        }
    }

    pub(super) fn handle(mut self, cx: &mut Context, req: &Request) -> Result<Next, LoginReply> {
        let offer = read_keys(
            &req.keys,
            Stage::LoginOperationalNegotiation,
            None,
            &mut self.negotiation,
            cx,
        )?;
        self.respond(cx, req, offer)
    }

    /// Answers a request whose keys are read into `offer` (which holds no security keys here).
    pub(super) fn respond(
        mut self,
        cx: &mut Context,
        req: &Request,
        offer: Offer,
    ) -> Result<Next, LoginReply> {
        let mut answers = offer.answers;
        // Only the full feature phase comes after this stage.
        let next = req.next_stage()?;
        if !self.declared {
            Negotiation::declare(&cx.settings.limits, &mut answers);
            self.declared = true;
        }
        let reply = req.reply(next, answers)?;
        if next.is_none() {
            return Ok(Next::Continue(reply, State::Operational(self)));
        }
        let established = self
            .negotiation
            .establish(self.identity, &cx.settings.limits, req.isid);
        Ok(Next::Complete(reply, established))
    }
}
