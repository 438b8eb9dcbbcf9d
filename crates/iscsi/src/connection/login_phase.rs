//! The login phase on the target side (RFC 7143 §6.3): Login Requests go to the pure
//! [`Login`] machine; its verdict becomes a Login Response and, once login completes, the
//! session of the full feature phase.

use super::*;

impl Connection {
    pub(super) fn handle_login(&mut self, f: &Frame, pdu: &[u8], out: &mut Output) -> Flow {
        let Phase::Login {
            login,
            statsn,
            window,
        } = &mut self.phase
        else {
            return Flow::Close;
        };
        // RFC 7143 §6.3: only Login Requests are allowed before full feature phase.
        if f.bhs.opcode() != Some(Opcode::LoginRequest) {
            return Flow::Close;
        }
        let req = LoginRequest::parse(&f.bhs);
        let window = window.get_or_insert_with(|| {
            // The first response's StatSN is ours to choose; follow the initiator's guess.
            *statsn = req.exp_statsn;
            CmdWindow::new(req.cmdsn, self.portal.queue_depth)
        });
        let data = pdu.get(f.data.clone()).unwrap_or(&[]);
        let nodes = self.portal.nodes();
        let step = login.step(&req, data, &nodes);
        let (reply, tsih, established) = match step {
            LoginStep::Continue(r) => (r, 0, None),
            LoginStep::Complete(r, est) => {
                let tsih = self.portal.allocate_tsih();
                let target = est.node.and_then(|i| nodes.get(i));
                tracing::info!(
                    initiator = %est.initiator_name,
                    target = target.map_or("(discovery)", |n| n.name.as_str()),
                    tsih,
                    auth = %login.authentication(),
                    "login"
                );
                self.negotiated = Some(Negotiated {
                    tsih,
                    authentication: login.authentication(),
                    keys: est.params.keys(),
                });
                (r, tsih, Some(est))
            }
            LoginStep::Fail(r) => {
                tracing::warn!(
                    initiator = login.initiator_name().unwrap_or("(not yet named)"),
                    status = format_args!("{:02X}{:02X}h", r.status.0, r.status.1),
                    reason = %r.reason,
                    "login refused"
                );
                (r, 0, None)
            }
        };
        let mut b = Bhs::new(Opcode::LoginResponse);
        b.set_flags(reply.flags());
        b.0[2] = 0; // Version-max
        b.0[3] = 0; // Version-active
        b.0[8..14].copy_from_slice(&req.isid);
        b.set_u16_at(14, tsih);
        b.set_itt(req.itt);
        let max_cmdsn = if established.is_some() {
            window.max_cmdsn()
        } else {
            window.exp_cmdsn
        };
        Numbers {
            statsn: *statsn,
            exp_cmdsn: window.exp_cmdsn,
            max_cmdsn,
        }
        .write(&mut b);
        b.0[36] = reply.status.0;
        b.0[37] = reply.status.1;
        out.pdu(&b, &reply.text);
        *statsn = statsn.wrapping_add(1);
        if reply.status != crate::login::LoginStatus::SUCCESS {
            self.login_refused = true;
            return Flow::Close;
        }
        if let Some(est) = established {
            self.identity = Some(SessionIdentity {
                session_type: est.session_type,
                initiator_name: est.initiator_name.clone(),
                isid: est.isid,
                node: est.node,
            });
            let (statsn, window) = (*statsn, *window);
            let node = est.node.and_then(|i| nodes.get(i));
            let mut session = Session::new(
                &self.portal,
                node,
                &self.local_address,
                *est,
                statsn,
                window,
            );
            session.now = self.now;
            if let Some(m) = &self.mailbox {
                self.portal.router.register(session.nexus.id, m.clone());
            }
            out.set_digests(session.params.header_digest, session.params.data_digest);
            self.recv_limits.header_digest = session.params.header_digest;
            self.recv_limits.data_digest = session.params.data_digest;
            self.recv_limits.max_data_segment_length =
                session.params.target_max_recv_data_segment_length as usize;
            self.phase = Phase::FullFeature(Box::new(session));
        }
        Flow::Continue
    }
}
