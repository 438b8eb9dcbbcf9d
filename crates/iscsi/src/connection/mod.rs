//! The target side of one iSCSI connection (and its session: MaxConnections=1,
//! ErrorRecoveryLevel=0) as a sans-I/O state machine: bytes and the time in ([`Connection::
//! receive`]), an [`Output`] batch out; tasks that finish later come back through
//! [`Connection::complete`]; keepalive asks for a timer ([`Connection::poll_timeout`]).
//!
//! Files follow the protocol's phases: `login_phase` (§6.3), `command` (the SCSI command path),
//! `task` (Data-Out and R2T), `task_management`, `text_exchange`, `nop`, `logout`, `keepalive`.
//!
//! A command is handed to the device on the caller's thread (docs/architecture.md): immediate
//! data as a slice of the receive buffer, read data into pooled buffers. A command that ends
//! at once is answered at once; one the device keeps comes back later, delivered from
//! another connection's call, the logical unit's driver, or the data plane.

use std::sync::Arc;

use device::{
    Arrival, Completion, Finished, Next, Nexus, Ns, Sink, Submitted, TaskAttribute, TaskId,
    TaskManagement, TmfResponse, Transfer,
};
use scsi::{Asc, Sense, SenseKey, Status};

use crate::bhs::{Bhs, Opcode, RESERVED_TAG};
use crate::login::{Established, Login, LoginRequest, LoginStep};
use crate::negotiation::{Parameters, SessionType};
use crate::node::ScsiTarget;
use crate::output::{BufferPool, Output};
use crate::pdu::{self, Data, Frame, FrameLimits, Numbers, RejectReason, Residual, ScsiCommand};
use crate::portal::{Mailbox, Portal};
use crate::session::{Admission, CmdWindow};
use crate::text;
use crate::{lun, tmf};
use rustc_hash::FxHashMap;

mod command;
mod keepalive;
mod login_phase;
mod logout;
mod nop;
mod task;
mod task_management;
mod text_exchange;

use keepalive::Keepalive;
use task::{Collecting, SessionTask};
use text_exchange::TextExchange;

/// ABORTED COMMAND sense for Data-Out sequence errors (RFC 7143 §11.4.7.2 lists the
/// iSCSI-specific sense codes): DATA OFFSET ERROR (4Bh/05h) and PROTOCOL SERVICE CRC
/// ERROR (47h/05h).
const DATA_OFFSET_ERROR: Asc = Asc(0x4B, 0x05);
const PROTOCOL_SERVICE_CRC_ERROR: Asc = Asc(0x47, 0x05);

/// One connection.
pub struct Connection {
    portal: Arc<Portal>,
    /// "ip:port" of our end, for TargetAddress in SendTargets answers (RFC 7143 §13.8).
    local_address: String,
    recv_limits: FrameLimits,
    phase: Phase,
    identity: Option<SessionIdentity>,
    cold_reset: bool,
    /// The login was refused (the shell may hold the refusal back, see [`crate::throttle`]).
    login_refused: bool,
    /// Where tasks of this connection's nexus that finish elsewhere are delivered.
    mailbox: Option<Mailbox>,
    /// The time of the latest input.
    now: Ns,
    keepalive: Keepalive,
    /// What the login settled, once it completed.
    negotiated: Option<Negotiated>,
}

/// What a completed login settled, for an operator's list of sessions.
#[derive(Clone, Debug)]
pub struct Negotiated {
    pub tsih: u16,
    /// "none" or the CHAP algorithm, and whether it was mutual.
    pub authentication: String,
    /// The operational keys in force (RFC 7143 §13).
    pub keys: Vec<(&'static str, String)>,
}

enum Phase {
    Login {
        login: Box<Login>,
        statsn: u32,
        window: Option<CmdWindow>,
    },
    FullFeature(Box<Session>),
    Closed,
}

/// Full feature phase state of the session.
struct Session {
    portal: Arc<Portal>,
    local_address: String,
    session_type: SessionType,
    node: Option<usize>,
    target: Option<Arc<dyn ScsiTarget>>,
    initiator_name: String,
    nexus: Nexus,
    params: Parameters,
    statsn: u32,
    window: CmdWindow,
    /// The tasks the device has, by ITT: collecting Data-Out, or going on in the device
    /// (with a write's data) until they end.
    tasks: FxHashMap<u32, SessionTask>,
    /// This nexus's tasks the device delivered during the session's own calls.
    mine: Vec<Finished>,
    now: Ns,
    next_ttt: u32,
    text: TextExchange,
    pool: BufferPool,
    scratch: Vec<u8>,
    nexus_lost: bool,
}

/// Result of handling one PDU.
#[derive(PartialEq, Eq)]
enum Flow {
    Continue,
    Close,
    /// TARGET COLD RESET: close this connection and every other session of the node.
    ColdReset,
}

/// Who a logged-in session belongs to: the shell uses it for session reinstatement
/// (RFC 7143 §6.3.5) and to end all sessions of a node after TARGET COLD RESET.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionIdentity {
    pub session_type: SessionType,
    pub initiator_name: String,
    pub isid: [u8; 6],
    /// Index of the target node in the portal (Normal sessions).
    pub node: Option<usize>,
}

impl Connection {
    /// A connection accepted at `now`.
    pub fn new(portal: Arc<Portal>, local_address: String, now: Ns) -> Connection {
        let keepalive = Keepalive::new(&portal, now);
        let login = Login::new(portal.limits.clone(), portal.portal_group_tag)
            .with_discovery_chap(portal.discovery_chap.clone());
        let recv_limits = FrameLimits {
            header_digest: false,
            data_digest: false,
            max_data_segment_length: portal.limits.max_recv_data_segment_length as usize,
        };
        Connection {
            portal,
            local_address,
            recv_limits,
            phase: Phase::Login {
                login: Box::new(login),
                statsn: 0,
                window: None,
            },
            identity: None,
            cold_reset: false,
            login_refused: false,
            mailbox: None,
            now,
            keepalive,
            negotiated: None,
        }
    }

    /// What the login settled, once it completed.
    pub fn negotiated(&self) -> Option<&Negotiated> {
        self.negotiated.as_ref()
    }

    /// Commands of the session in the device or collecting Data-Out.
    pub fn in_flight(&self) -> usize {
        match &self.phase {
            Phase::FullFeature(s) => s.tasks.len(),
            _ => 0,
        }
    }

    /// Where the real-time shell wants this connection's tasks delivered when they finish
    /// on a logical unit's clock or another connection: it calls [`Connection::complete`].
    pub fn set_mailbox(&mut self, mailbox: Mailbox) {
        self.mailbox = Some(mailbox);
    }

    /// The I_T nexus of the session, once in full feature phase.
    pub fn nexus_id(&self) -> Option<u64> {
        match &self.phase {
            Phase::FullFeature(s) => Some(s.nexus.id),
            _ => None,
        }
    }

    /// A task of this connection's nexus moved on in the device at `now`: run its
    /// operation, send its data and status, or forget it.
    pub fn complete(&mut self, now: Ns, f: Finished, out: &mut Output) {
        self.now = self.now.max(now);
        if let Phase::FullFeature(s) = &mut self.phase {
            s.now = self.now;
            s.finish(f, out);
            s.handle_mine(out);
        }
    }

    /// Limits for framing received PDUs (the shell sizes its receive buffer from them).
    pub fn frame_limits(&self) -> FrameLimits {
        self.recv_limits
    }

    pub fn is_closed(&self) -> bool {
        matches!(self.phase, Phase::Closed)
    }

    /// In full feature phase (login complete).
    pub fn is_full_feature(&self) -> bool {
        matches!(self.phase, Phase::FullFeature(_))
    }

    /// Handle the complete PDUs at the start of `buf`; returns the bytes consumed. Stops
    /// early when `out` [is full](Output::is_full): write it and call again. Responses are
    /// appended to `out`; `out.close` is set when the connection must close after `out` is
    /// written.
    pub fn receive(&mut self, now: Ns, buf: &[u8], out: &mut Output) -> usize {
        self.now = self.now.max(now);
        if !buf.is_empty() {
            self.keepalive.input(self.now);
        }
        if let Phase::FullFeature(s) = &mut self.phase {
            s.now = self.now;
        }
        let mut consumed = 0;
        while !self.is_closed() && !out.is_full() {
            let rest = buf.get(consumed..).unwrap_or(&[]);
            match pdu::frame(rest, &self.recv_limits) {
                Ok(None) => break,
                Ok(Some(f)) => {
                    let pdu = rest.get(..f.len).unwrap_or(&[]);
                    consumed += f.len;
                    match self.handle(&f, pdu, out) {
                        Flow::Continue => {}
                        Flow::Close => {
                            self.close();
                            out.close = true;
                        }
                        Flow::ColdReset => {
                            self.cold_reset = true;
                            self.close();
                            out.close = true;
                        }
                    }
                }
                Err(_) => {
                    // The stream can no longer be framed: drop the connection (RFC 7143 §7.8).
                    self.close();
                    out.close = true;
                }
            }
        }
        consumed
    }

    /// The session's owner, once login completed (kept after the connection closes).
    pub fn identity(&self) -> Option<&SessionIdentity> {
        self.identity.as_ref()
    }

    /// True once, after this connection performed a TARGET COLD RESET (RFC 7143 §11.5.1:
    /// all sessions of the target end).
    pub fn take_cold_reset(&mut self) -> bool {
        std::mem::take(&mut self.cold_reset)
    }

    /// True once, after this connection's login was refused (its output holds the refusal).
    pub fn take_login_refused(&mut self) -> bool {
        std::mem::take(&mut self.login_refused)
    }

    /// Empty `out` after it was written, keeping its data buffers for reuse.
    pub fn recycle(&mut self, out: &mut Output) {
        match &mut self.phase {
            Phase::FullFeature(s) => out.clear(&mut s.pool),
            _ => out.clear(&mut BufferPool::default()),
        }
    }

    /// The connection is gone (closed by either side): I_T nexus loss for the device
    /// (SAM-5 §6.3.4). Idempotent.
    pub fn close(&mut self) {
        if let Phase::FullFeature(s) = &mut self.phase {
            s.lose_nexus();
        }
        self.phase = Phase::Closed;
    }

    fn handle(&mut self, f: &Frame, pdu: &[u8], out: &mut Output) -> Flow {
        match &mut self.phase {
            Phase::Login { .. } => self.handle_login(f, pdu, out),
            Phase::FullFeature(s) => s.handle(f, pdu, out),
            Phase::Closed => Flow::Close,
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.close();
    }
}

impl Session {
    /// The session `est` established with `node` (the node at `est.node` when the login
    /// completed).
    fn new(
        portal: &Arc<Portal>,
        node: Option<&crate::TargetNode>,
        local_address: &str,
        est: Established,
        statsn: u32,
        window: CmdWindow,
    ) -> Session {
        let isid = est
            .isid
            .iter()
            .fold(0u64, |acc, b| (acc << 8) | u64::from(*b));
        Session {
            portal: portal.clone(),
            local_address: local_address.to_string(),
            session_type: est.session_type,
            node: est.node,
            target: node.map(|n| n.target.clone()),
            nexus: Nexus {
                id: portal.allocate_nexus_id(),
                // RFC 7143 §4.2.7.1: SCSI initiator port name.
                initiator_port: format!("{},i,0x{isid:012x}", est.initiator_name),
                class: node.and_then(|n| {
                    n.initiator_classes
                        .iter()
                        .find(|(name, _)| *name == est.initiator_name)
                        .map(|(_, class)| *class)
                }),
                privileged: node.is_some_and(|n| n.privileged(&est.initiator_name)),
            },
            initiator_name: est.initiator_name,
            params: est.params,
            statsn,
            window,
            tasks: FxHashMap::default(),
            mine: Vec::new(),
            now: 0,
            next_ttt: 1,
            text: TextExchange::default(),
            pool: BufferPool::default(),
            scratch: Vec::new(),
            nexus_lost: false,
        }
    }

    fn lose_nexus(&mut self) {
        if !self.nexus_lost {
            self.nexus_lost = true;
            self.portal.router.unregister(self.nexus.id);
            if let Some(t) = self.target.clone() {
                let mut mine = Vec::new();
                let mut sink = self.sink(&mut mine);
                t.nexus_lost(self.now, &self.nexus, &mut sink);
            }
            self.tasks.clear();
        }
    }

    /// Numbers for a response that carries (and advances) StatSN.
    fn numbers_with_status(&mut self) -> Numbers {
        let n = Numbers {
            statsn: self.statsn,
            exp_cmdsn: self.window.exp_cmdsn,
            max_cmdsn: self.window.max_cmdsn(),
        };
        self.statsn = self.statsn.wrapping_add(1);
        n
    }

    fn numbers_without_status(&self) -> Numbers {
        Numbers {
            statsn: self.statsn,
            exp_cmdsn: self.window.exp_cmdsn,
            max_cmdsn: self.window.max_cmdsn(),
        }
    }

    fn allocate_ttt(&mut self) -> u32 {
        let t = self.next_ttt;
        self.next_ttt = self.next_ttt.wrapping_add(1);
        if self.next_ttt == RESERVED_TAG {
            self.next_ttt = 1;
        }
        t
    }

    fn reject(&mut self, reason: RejectReason, bhs: &Bhs, out: &mut Output) {
        tracing::warn!(
            ?reason,
            opcode = format_args!("{:02X}h", bhs.0[0] & 0x3F),
            "PDU rejected"
        );
        let n = self.numbers_with_status();
        out.pdu(&pdu::reject(reason, n), &bhs.0);
    }

    fn handle(&mut self, f: &Frame, pdu: &[u8], out: &mut Output) -> Flow {
        let flow = self.handle_pdu(f, pdu, out);
        // This nexus's tasks the device moved on while it handled the PDU.
        self.handle_mine(out);
        flow
    }

    fn handle_pdu(&mut self, f: &Frame, pdu: &[u8], out: &mut Output) -> Flow {
        let data = pdu.get(f.data.clone()).unwrap_or(&[]);
        if !f.data_digest_ok {
            // RFC 7143 §7.8: reject the PDU; at ErrorRecoveryLevel 0 a write that lost data
            // cannot finish, so it fails.
            if f.bhs.opcode() == Some(Opcode::DataOut) {
                self.fail_pending(f.bhs.itt(), PROTOCOL_SERVICE_CRC_ERROR, out);
            }
            self.reject(RejectReason::DataDigestError, &f.bhs, out);
            return Flow::Continue;
        }
        match f.bhs.opcode() {
            Some(Opcode::ScsiCommand) => {
                let ahs = pdu.get(f.ahs.clone()).unwrap_or(&[]);
                self.scsi_command(&f.bhs, ahs, data, out);
                Flow::Continue
            }
            Some(Opcode::DataOut) => {
                self.data_out(&f.bhs, data, out);
                Flow::Continue
            }
            Some(Opcode::NopOut) => {
                self.nop_out(&f.bhs, data, out);
                Flow::Continue
            }
            Some(Opcode::TaskManagementRequest) => self.task_management(&f.bhs, out),
            Some(Opcode::TextRequest) => {
                self.text_request(&f.bhs, data, out);
                Flow::Continue
            }
            Some(Opcode::LogoutRequest) => self.logout(&f.bhs, out),
            // SNACK needs ErrorRecoveryLevel ≥ 1 (RFC 7143 §11.16).
            Some(Opcode::Snack) => {
                self.reject(RejectReason::SnackReject, &f.bhs, out);
                Flow::Continue
            }
            Some(Opcode::LoginRequest) => {
                self.reject(RejectReason::ProtocolError, &f.bhs, out);
                Flow::Continue
            }
            _ => {
                self.reject(RejectReason::CommandNotSupported, &f.bhs, out);
                Flow::Continue
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::TargetNode;

    const PLAIN: FrameLimits = FrameLimits {
        header_digest: false,
        data_digest: false,
        max_data_segment_length: 1 << 20,
    };

    fn portal(nodes: usize) -> Arc<Portal> {
        let nodes = (0..nodes)
            .map(|i| TargetNode {
                retired: false,
                gateways: Vec::new(),
                name: format!("iqn.2026-01.org.stint.example:a-rather-long-target-name-{i:03}"),
                alias: None,
                target: Arc::new(device::Target::default()),
                allowed_initiators: Vec::new(),
                initiator_classes: Vec::new(),
                chap: None,
                privileged_initiators: vec!["*".into()],
            })
            .collect();
        Arc::new(Portal::new(nodes))
    }

    fn pdu_bytes(b: &Bhs, data: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        pdu::write_pdu(&mut v, b, data, false, false);
        v
    }

    fn login(keys: &[(&str, &str)]) -> Vec<u8> {
        let mut b = Bhs::new(Opcode::LoginRequest);
        b.set_immediate(true);
        b.set_flags(0x80 | (1 << 2) | 3);
        b.set_u32_at(24, 10); // CmdSN
        b.set_u32_at(28, 500); // ExpStatSN
        let mut text = Vec::new();
        for (k, v) in keys {
            text::push(&mut text, k, v);
        }
        pdu_bytes(&b, &text)
    }

    /// Every PDU in a batch, with its data segment.
    fn pdus(out: &Output) -> Vec<(Bhs, Vec<u8>)> {
        let bytes = out.to_bytes();
        let mut v = Vec::new();
        let mut pos = 0;
        while let Ok(Some(f)) = pdu::frame(&bytes[pos..], &PLAIN) {
            v.push((f.bhs, bytes[pos + f.data.start..pos + f.data.end].to_vec()));
            pos += f.len;
        }
        assert_eq!(pos, bytes.len());
        v
    }

    fn logged_in(portal: &Arc<Portal>, keys: &[(&str, &str)]) -> Connection {
        let mut c = Connection::new(portal.clone(), "192.0.2.1:3260".into(), 0);
        let mut out = Output::new();
        let l = login(keys);
        assert_eq!(c.receive(0, &l, &mut out), l.len());
        let resp = pdus(&out);
        assert_eq!(resp[0].0.opcode(), Some(Opcode::LoginResponse));
        assert_eq!(resp[0].0.u32_at(24), 500, "first StatSN follows ExpStatSN");
        assert_eq!(resp[0].0.u32_at(28), 10, "ExpCmdSN is the login's CmdSN");
        assert!(c.is_full_feature());
        c
    }

    #[test]
    fn only_login_requests_before_full_feature_phase() {
        let mut c = Connection::new(portal(1), "192.0.2.1:3260".into(), 0);
        let mut out = Output::new();
        let nop = pdu_bytes(&Bhs::new(Opcode::NopOut), &[]);
        assert_eq!(c.receive(0, &nop, &mut out), nop.len());
        assert!(out.close && c.is_closed());
        assert!(out.is_empty());
    }

    #[test]
    fn partial_pdus_wait_for_the_rest() {
        let p = portal(1);
        let mut c = logged_in(
            &p,
            &[("InitiatorName", "iqn.i"), ("SessionType", "Discovery")],
        );
        let mut nop = Bhs::new(Opcode::NopOut);
        nop.set_immediate(true);
        nop.set_itt(3);
        let bytes = pdu_bytes(&nop, b"abcde");
        let mut out = Output::new();
        assert_eq!(c.receive(0, &bytes[..50], &mut out), 0);
        assert!(out.is_empty());
        assert_eq!(c.receive(0, &bytes, &mut out), bytes.len());
        let resp = pdus(&out);
        assert_eq!(resp.len(), 1);
        assert_eq!(
            (resp[0].0.opcode(), resp[0].0.itt()),
            (Some(Opcode::NopIn), 3)
        );
        assert_eq!(resp[0].1, b"abcde");
        assert_eq!(
            resp[0].0.u32_at(24),
            501,
            "StatSN advanced past the login response"
        );
    }

    #[test]
    fn long_send_targets_answer_is_continued() {
        let p = portal(20);
        let mut c = logged_in(
            &p,
            &[
                ("InitiatorName", "iqn.i"),
                ("SessionType", "Discovery"),
                ("MaxRecvDataSegmentLength", "512"),
            ],
        );
        let mut req = Bhs::new(Opcode::TextRequest);
        req.set_flags(0x80);
        req.set_itt(7);
        req.set_u32_at(20, RESERVED_TAG);
        req.set_u32_at(24, 10);
        let mut text_bytes = Vec::new();
        text::push(&mut text_bytes, "SendTargets", "All");
        let mut out = Output::new();
        c.receive(0, &pdu_bytes(&req, &text_bytes), &mut out);
        let mut answer = Vec::new();
        let mut pieces = 0u32;
        loop {
            let resp = pdus(&out);
            c.recycle(&mut out);
            assert_eq!(resp.len(), 1);
            let (b, data) = &resp[0];
            assert_eq!((b.opcode(), b.itt()), (Some(Opcode::TextResponse), 7));
            assert!(data.len() <= 512);
            answer.extend_from_slice(data);
            pieces += 1;
            if b.flags() & 0x40 == 0 {
                assert!(b.final_bit());
                assert_eq!(b.u32_at(20), RESERVED_TAG);
                break;
            }
            // Continue with an empty request carrying the target's TTT (§11.10.4).
            let mut next = req;
            next.set_u32_at(20, b.u32_at(20));
            next.set_u32_at(24, 10 + pieces);
            c.receive(0, &pdu_bytes(&next, &[]), &mut out);
        }
        assert!(pieces > 1);
        let pairs = text::parse_list(&answer).unwrap();
        let names = pairs.iter().filter(|(k, _)| k == "TargetName").count();
        assert_eq!(names, 20);
        assert!(pairs
            .iter()
            .any(|(k, v)| k == "TargetAddress" && v == "192.0.2.1:3260,1"));
    }

    #[test]
    fn continued_text_request_is_acknowledged_then_answered() {
        let p = portal(1);
        let mut c = logged_in(
            &p,
            &[("InitiatorName", "iqn.i"), ("SessionType", "Discovery")],
        );
        let mut req = Bhs::new(Opcode::TextRequest);
        req.set_immediate(true);
        req.set_flags(0x40); // C bit, not final
        req.set_itt(9);
        req.set_u32_at(20, RESERVED_TAG);
        let mut out = Output::new();
        c.receive(0, &pdu_bytes(&req, b"SendTar"), &mut out);
        let ack = pdus(&out);
        c.recycle(&mut out);
        assert_eq!(ack.len(), 1);
        assert!(ack[0].1.is_empty());
        req.set_flags(0x80);
        c.receive(0, &pdu_bytes(&req, b"gets=All\0"), &mut out);
        let resp = pdus(&out);
        let pairs = text::parse_list(&resp[0].1).unwrap();
        assert_eq!(pairs[0].0, "TargetName");
    }

    /// Answers every command with 1 MiB of read data.
    struct Firehose;

    impl ScsiTarget for Firehose {
        fn command(
            &self,
            _: Ns,
            _: &Arrival,
            data_in: &mut Vec<u8>,
            _: &mut dyn Sink,
        ) -> (Option<Transfer>, Submitted) {
            data_in.resize(1 << 20, 0xEE);
            (
                Some(Transfer::In(1 << 20)),
                Submitted::Done(Completion::GOOD),
            )
        }
    }

    #[test]
    fn a_full_batch_stops_handling_until_written() {
        let portal = Arc::new(Portal::new(vec![TargetNode {
            retired: false,
            gateways: Vec::new(),
            name: "iqn.2026-01.org.stint:firehose".into(),
            alias: None,
            target: Arc::new(Firehose),
            allowed_initiators: Vec::new(),
            initiator_classes: Vec::new(),
            chap: None,
            privileged_initiators: vec!["*".into()],
        }]));
        let mut c = logged_in(
            &portal,
            &[
                ("InitiatorName", "iqn.i"),
                ("TargetName", "iqn.2026-01.org.stint:firehose"),
            ],
        );
        let mut bytes = Vec::new();
        let read = scsi::Command::Read(scsi::command::ReadWrite {
            transfer_length: 2048,
            ..Default::default()
        })
        .emit(scsi::form::READ_10)
        .unwrap();
        for i in 0..16u32 {
            let mut cmd = Bhs::new(Opcode::ScsiCommand);
            cmd.set_flags(0x80 | 0x40 | 1);
            cmd.set_itt(i);
            cmd.set_u32_at(20, 1 << 20);
            cmd.set_u32_at(24, 10 + i);
            cmd.0[32..32 + read.len()].copy_from_slice(&read);
            bytes.extend(pdu_bytes(&cmd, &[]));
        }
        let mut out = Output::new();
        let mut handled = 0;
        let mut batches = 0;
        while handled < bytes.len() {
            let used = c.receive(0, &bytes[handled..], &mut out);
            assert!(used > 0);
            handled += used;
            batches += 1;
            // Each batch stops soon after reaching the limit (one more 1 MiB read at most).
            assert!(out.len() < crate::output::SOFT_LIMIT + (1 << 20) + 4096);
            c.recycle(&mut out);
        }
        assert!(batches >= 2, "{batches}");
    }

    #[test]
    fn discovery_sessions_reject_scsi_commands() {
        let p = portal(1);
        let mut c = logged_in(
            &p,
            &[("InitiatorName", "iqn.i"), ("SessionType", "Discovery")],
        );
        let mut cmd = Bhs::new(Opcode::ScsiCommand);
        cmd.set_flags(0x80);
        cmd.set_itt(1);
        cmd.set_u32_at(24, 10);
        let mut out = Output::new();
        c.receive(0, &pdu_bytes(&cmd, &[]), &mut out);
        let resp = pdus(&out);
        assert_eq!(resp[0].0.opcode(), Some(Opcode::Reject));
        assert_eq!(resp[0].0 .0[2], RejectReason::ProtocolError as u8);
        assert_eq!(resp[0].1, cmd.0.to_vec());
    }
}
