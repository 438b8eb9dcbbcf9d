//! A small async iSCSI initiator on the same codec and negotiation as the target: login
//! (discovery or normal), SendTargets, SCSI commands with immediate/unsolicited data and
//! R2T handling (one at a time, or pipelined with `submit`/`complete`), NOP, task
//! management and logout.

use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::bhs::{Bhs, Opcode, RESERVED_TAG};
use crate::chap::{Answerer, Chap};
use crate::login::{LoginStatus, Stage};
use crate::negotiation::{self, Parameters, SessionType};
use crate::pdu::{self, Cdb, Data, FrameLimits, Residual, ScsiCommand};
use crate::text;
use crate::tmf;

/// Our MaxRecvDataSegmentLength, declared at login.
const INITIATOR_MRDSL: u32 = 262_144;

const SECURITY: u8 = Stage::SecurityNegotiation as u8;
const OPERATIONAL: u8 = Stage::LoginOperationalNegotiation as u8;
const FULL_FEATURE: u8 = Stage::FullFeaturePhase as u8;

/// Initiator errors.
#[derive(Debug)]
pub enum Error {
    Io(io::Error),
    /// The target refused the login (RFC 7143 §11.13.5).
    LoginFailed(LoginStatus),
    /// The target broke the protocol (unexpected PDU, bad framing, Reject).
    Protocol(String),
    /// No answer in time.
    Timeout,
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Io(e) => write!(f, "i/o error: {e}"),
            Error::LoginFailed(s) => write!(
                f,
                "login failed: {} (status class {:02X}h, detail {:02X}h)",
                s.meaning(),
                s.0,
                s.1
            ),
            Error::Protocol(m) => write!(f, "protocol error: {m}"),
            Error::Timeout => write!(f, "no response from the target"),
        }
    }
}

impl std::error::Error for Error {}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Self {
        Error::Io(e)
    }
}

/// How to log in.
#[derive(Clone, Debug)]
pub struct LoginOptions {
    pub initiator_name: String,
    /// `None` opens a discovery session.
    pub target_name: Option<String>,
    /// Initiator Session ID (RFC 7143 §11.12.5); the default is a random-format ISID.
    pub isid: [u8; 6],
    /// Offer CRC32C header and data digests.
    pub digests: bool,
    /// Extra keys sent in the first Login Request, replacing offered keys of the same name
    /// (tests use it to probe negotiation).
    pub extra_keys: Vec<(String, String)>,
    /// How long to wait for each response.
    pub timeout: Duration,
    /// Authenticate with CHAP: `initiator` is what we prove, `target` (mutual CHAP) what the
    /// target must prove.
    pub chap: Option<Chap>,
}

impl LoginOptions {
    pub fn new(initiator_name: &str, target_name: Option<&str>) -> LoginOptions {
        LoginOptions {
            initiator_name: initiator_name.into(),
            target_name: target_name.map(Into::into),
            isid: [0x80, 0x00, 0x00, 0x00, 0x12, 0x34],
            digests: false,
            extra_keys: Vec::new(),
            timeout: Duration::from_secs(10),
            chap: None,
        }
    }
}

/// A received PDU.
#[derive(Clone, Debug)]
pub struct Pdu {
    pub bhs: Bhs,
    pub data: Vec<u8>,
}

/// The outcome of a SCSI command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandResult {
    /// SCSI status byte (SAM-5 table 43).
    pub status: u8,
    /// Sense data (without the two-byte SenseLength).
    pub sense: Vec<u8>,
    pub data_in: Vec<u8>,
    pub residual: Residual,
}

impl CommandResult {
    /// The sense data, parsed ([`scsi::Sense::parse`]); `None` without any, or unreadable.
    pub fn parsed_sense(&self) -> Option<scsi::Sense> {
        scsi::Sense::parse(&self.sense)
    }
}

/// One logged-in session on one connection.
pub struct Initiator {
    stream: TcpStream,
    params: Parameters,
    limits: FrameLimits,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    next_itt: u32,
    cmdsn: u32,
    exp_statsn: u32,
    max_cmdsn: u32,
    tsih: u16,
    /// Keys the target sent during login, in order.
    pub login_keys: Vec<(String, String)>,
    timeout: Duration,
    in_flight: BTreeMap<u32, InFlight>,
    /// Results that arrived while [`Initiator::scsi_command`] waited for another command.
    finished: VecDeque<(u32, CommandResult)>,
    wbuf: Vec<u8>,
}

/// A submitted command.
struct InFlight {
    lun_raw: u64,
    data_out: Vec<u8>,
    expected_in_len: u32,
    data_in: Vec<u8>,
}

impl Initiator {
    /// Connect to `addr` and log in.
    pub async fn connect(addr: SocketAddr, opts: &LoginOptions) -> Result<Initiator, Error> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let limits = FrameLimits {
            header_digest: false,
            data_digest: false,
            max_data_segment_length: INITIATOR_MRDSL as usize,
        };
        let mut ini = Initiator {
            stream,
            params: Parameters::default(),
            limits,
            buf: vec![0; 1 << 20],
            start: 0,
            end: 0,
            next_itt: 1,
            cmdsn: 1,
            exp_statsn: 0,
            max_cmdsn: 1,
            tsih: 0,
            login_keys: Vec::new(),
            timeout: opts.timeout,
            in_flight: BTreeMap::new(),
            finished: VecDeque::new(),
            wbuf: Vec::new(),
        };
        ini.login(opts).await?;
        Ok(ini)
    }

    /// Resolve `portal` ("host:port", e.g. [`crate::url::IscsiUrl::portal`]) and log in to
    /// the first address that accepts the connection.
    pub async fn connect_portal(portal: &str, opts: &LoginOptions) -> Result<Initiator, Error> {
        let mut last = Error::Io(io::Error::new(
            io::ErrorKind::NotFound,
            format!("{portal}: no address"),
        ));
        for addr in tokio::net::lookup_host(portal).await? {
            match Initiator::connect(addr, opts).await {
                Ok(i) => return Ok(i),
                Err(e @ Error::Io(_)) => last = e,
                Err(e) => return Err(e),
            }
        }
        Err(last)
    }

    /// Whether the target's CmdSN window admits another command now (RFC 7143 §4.2.2.1).
    pub fn window_open(&self) -> bool {
        crate::session::sn_le(self.cmdsn, self.max_cmdsn)
    }

    /// Parameters negotiated at login.
    pub fn params(&self) -> &Parameters {
        &self.params
    }

    /// TSIH the target gave the session.
    pub fn tsih(&self) -> u16 {
        self.tsih
    }

    /// The next CmdSN this initiator will use, and the target's MaxCmdSN.
    pub fn cmdsn(&self) -> (u32, u32) {
        (self.cmdsn, self.max_cmdsn)
    }

    /// Take the next CmdSN for a command the caller sends by hand with [`Self::send`].
    pub fn take_cmdsn(&mut self) -> u32 {
        let c = self.cmdsn;
        self.cmdsn = self.cmdsn.wrapping_add(1);
        c
    }

    fn take_itt(&mut self) -> u32 {
        let itt = self.next_itt;
        self.next_itt = self.next_itt.wrapping_add(1);
        if self.next_itt == RESERVED_TAG {
            self.next_itt = 1;
        }
        itt
    }

    async fn login(&mut self, opts: &LoginOptions) -> Result<(), Error> {
        let session = if opts.target_name.is_some() {
            SessionType::Normal
        } else {
            SessionType::Discovery
        };
        let mut keys = Vec::new();
        text::push(&mut keys, "InitiatorName", &opts.initiator_name);
        match &opts.target_name {
            Some(t) => {
                text::push(&mut keys, "SessionType", "Normal");
                text::push(&mut keys, "TargetName", t);
            }
            None => text::push(&mut keys, "SessionType", "Discovery"),
        }
        let itt = self.take_itt();
        if let Some(chap) = &opts.chap {
            self.authenticate(itt, &opts.isid, chap, &mut keys).await?;
        }
        // Extra keys replace offered keys of the same name, so each key is sent once.
        let mut offer = negotiation::initiator_offer(session, INITIATOR_MRDSL, opts.digests);
        offer.retain(|(k, _)| !opts.extra_keys.iter().any(|(e, _)| e == k));
        for (k, v) in offer.iter().chain(&opts.extra_keys) {
            text::push(&mut keys, k, v);
        }
        // Operational negotiation, then straight to full feature phase.
        loop {
            let (transit, pairs) = self
                .login_exchange(itt, &opts.isid, (OPERATIONAL, FULL_FEATURE), &keys)
                .await?;
            keys.clear();
            for (k, v) in &pairs {
                negotiation::apply_answer(k, v, &mut self.params);
            }
            self.login_keys.extend(pairs);
            if transit {
                break;
            }
        }
        self.limits.header_digest = self.params.header_digest;
        self.limits.data_digest = self.params.data_digest;
        Ok(())
    }

    /// The security stage with CHAP (RFC 7143 §12.1.3): offer AuthMethod=CHAP with the first
    /// keys, name our algorithms, answer the challenge (challenging the target in turn for
    /// mutual CHAP), check the target's proof, and leave `keys` empty for the operational stage.
    async fn authenticate(
        &mut self,
        itt: u32,
        isid: &[u8; 6],
        chap: &Chap,
        keys: &mut Vec<u8>,
    ) -> Result<(), Error> {
        let stages = (SECURITY, OPERATIONAL);
        text::push(keys, "AuthMethod", "CHAP");
        let (_, pairs) = self.login_exchange(itt, isid, stages, keys).await?;
        keys.clear();
        self.login_keys.extend(pairs.iter().cloned());
        let method = pairs.iter().find(|(k, _)| k == "AuthMethod");
        if method.map(|(_, v)| v.as_str()) != Some("CHAP") {
            return Err(Error::Protocol(format!(
                "CHAP credentials given but the target answered AuthMethod={}",
                method.map_or("(nothing)", |(_, v)| v.as_str())
            )));
        }
        let (mut answerer, algorithms) = Answerer::offer();
        text::push(keys, "CHAP_A", &algorithms);
        let (_, challenge) = self.login_exchange(itt, isid, stages, keys).await?;
        keys.clear();
        let answer = answerer
            .answer(chap, &challenge)
            .map_err(|e| Error::Protocol(e.to_string()))?;
        for (k, v) in &answer {
            text::push(keys, k, v);
        }
        // The target transits to the operational stage once it accepts our answer.
        let mut proof = Vec::new();
        loop {
            let (transit, pairs) = self.login_exchange(itt, isid, stages, keys).await?;
            keys.clear();
            proof.extend(pairs);
            if transit {
                break;
            }
        }
        answerer
            .verify(chap, &proof)
            .map_err(|e| Error::Protocol(e.to_string()))
    }

    /// One Login Request asking to go from stage `csg` to `nsg`, and the target's answer keys
    /// (continued responses reassembled); whether the target made the transition.
    async fn login_exchange(
        &mut self,
        itt: u32,
        isid: &[u8; 6],
        (csg, nsg): (u8, u8),
        keys: &[u8],
    ) -> Result<(bool, Vec<(String, String)>), Error> {
        let mut reassembled = Vec::new();
        let mut keys = keys;
        loop {
            let mut b = Bhs::new(Opcode::LoginRequest);
            b.set_immediate(true);
            b.set_flags(0x80 | (csg << 2) | nsg);
            b.0[8..14].copy_from_slice(isid);
            b.set_itt(itt);
            b.set_u32_at(24, self.cmdsn);
            b.set_u32_at(28, self.exp_statsn);
            self.send(&b, keys).await?;
            keys = &[];
            let p = self.recv().await?;
            if p.bhs.opcode() != Some(Opcode::LoginResponse) {
                return Err(Error::Protocol(format!(
                    "expected a Login Response, got {:?}",
                    p.bhs
                )));
            }
            let status = LoginStatus(p.bhs.0[36], p.bhs.0[37]);
            if status != LoginStatus::SUCCESS {
                return Err(Error::LoginFailed(status));
            }
            self.track(&p.bhs);
            reassembled.extend_from_slice(&p.data);
            if p.bhs.flags() & 0x40 != 0 {
                continue; // C bit: more text follows
            }
            let pairs = text::parse(&reassembled).map_err(|e| Error::Protocol(e.to_string()))?;
            let transit = p.bhs.flags() & 0x80 != 0;
            if transit && p.bhs.flags() & 3 == FULL_FEATURE {
                self.tsih = p.bhs.u16_at(14);
            }
            return Ok((transit, pairs));
        }
    }

    /// Update ExpStatSN/MaxCmdSN from a target PDU that carries them.
    fn track(&mut self, b: &Bhs) {
        let carries_status = match b.opcode() {
            Some(Opcode::DataIn) => b.flags() & 0x01 != 0,
            Some(Opcode::ReadyToTransfer) => false,
            Some(Opcode::NopIn) => b.itt() != RESERVED_TAG,
            Some(_) => true,
            None => false,
        };
        if carries_status {
            self.exp_statsn = b.u32_at(24).wrapping_add(1);
        }
        if b.opcode() != Some(Opcode::LoginResponse) || b.final_bit() {
            self.max_cmdsn = b.u32_at(32);
        }
    }

    /// Send one PDU (header and data) as is.
    pub async fn send(&mut self, bhs: &Bhs, data: &[u8]) -> Result<(), Error> {
        let mut bytes = Vec::with_capacity(48 + data.len() + 12);
        pdu::write_pdu(
            &mut bytes,
            bhs,
            data,
            self.limits.header_digest,
            self.limits.data_digest,
        );
        self.stream.write_all(&bytes).await?;
        Ok(())
    }

    /// Send raw bytes (tests of malformed input).
    pub async fn send_raw(&mut self, bytes: &[u8]) -> Result<(), Error> {
        self.stream.write_all(bytes).await?;
        Ok(())
    }

    /// Receive the next PDU (within the login timeout).
    pub async fn recv(&mut self) -> Result<Pdu, Error> {
        let t = self.timeout;
        self.recv_timeout(t).await?.ok_or(Error::Timeout)
    }

    /// Receive the next PDU, or `None` if nothing complete arrives within `wait`.
    pub async fn recv_timeout(&mut self, wait: Duration) -> Result<Option<Pdu>, Error> {
        let deadline = tokio::time::Instant::now() + wait;
        Ok(self.recv_frame(deadline).await?.map(|(bhs, data)| Pdu {
            bhs,
            data: self.buf.get(data).unwrap_or(&[]).to_vec(),
        }))
    }

    /// Frame the next PDU in the receive buffer, reading as needed until `deadline`. The
    /// returned data range stays valid until the next call.
    async fn recv_frame(
        &mut self,
        deadline: tokio::time::Instant,
    ) -> Result<Option<(Bhs, std::ops::Range<usize>)>, Error> {
        loop {
            let avail = self.buf.get(self.start..self.end).unwrap_or(&[]);
            match pdu::frame(avail, &self.limits) {
                Ok(Some(f)) => {
                    let data = self.start + f.data.start..self.start + f.data.end;
                    self.start += f.len;
                    if !f.data_digest_ok {
                        return Err(Error::Protocol("data digest mismatch".into()));
                    }
                    return Ok(Some((f.bhs, data)));
                }
                Ok(None) => {}
                Err(e) => return Err(Error::Protocol(e.to_string())),
            }
            if self.start == self.end {
                self.start = 0;
                self.end = 0;
            } else if self.end == self.buf.len() {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            let read =
                tokio::time::timeout_at(deadline, self.stream.read(&mut self.buf[self.end..]));
            match read.await {
                Err(_) => return Ok(None),
                Ok(Ok(0)) => {
                    return Err(Error::Io(io::ErrorKind::UnexpectedEof.into()));
                }
                Ok(Ok(n)) => self.end += n,
                Ok(Err(e)) => return Err(e.into()),
            }
        }
    }

    /// Answer a target ping (NOP-In with a TTT, RFC 7143 §11.19).
    async fn answer_ping(&mut self, ping: &Bhs) -> Result<(), Error> {
        let mut b = Bhs::new(Opcode::NopOut);
        b.set_immediate(true);
        b.set_flags(0x80);
        b.set_lun_raw(ping.lun_raw());
        b.set_itt(RESERVED_TAG);
        b.set_u32_at(20, ping.u32_at(20));
        b.set_u32_at(24, self.cmdsn);
        b.set_u32_at(28, self.exp_statsn);
        self.send(&b, &[]).await
    }

    /// Receive the next PDU, answering target pings (NOP-In with a TTT) on the way.
    async fn recv_response(&mut self) -> Result<Pdu, Error> {
        loop {
            let deadline = tokio::time::Instant::now() + self.timeout;
            let (bhs, range) = self.recv_frame(deadline).await?.ok_or(Error::Timeout)?;
            self.track(&bhs);
            match bhs.opcode() {
                Some(Opcode::NopIn) if bhs.itt() == RESERVED_TAG => {
                    self.answer_ping(&bhs).await?;
                }
                Some(Opcode::AsyncMessage) => {}
                Some(Opcode::Reject) => {
                    return Err(Error::Protocol(format!(
                        "target rejected a PDU, reason {:#x}",
                        bhs.0[2]
                    )))
                }
                // Commands in flight finish while we wait: keep their results for `complete`.
                Some(Opcode::DataIn | Opcode::ScsiResponse | Opcode::ReadyToTransfer)
                    if self.in_flight.contains_key(&bhs.itt()) =>
                {
                    if let Some(done) = self.command_pdu(&bhs, range).await? {
                        self.finished.push_back(done);
                    }
                }
                _ => {
                    let data = self.buf.get(range).unwrap_or(&[]).to_vec();
                    return Ok(Pdu { bhs, data });
                }
            }
        }
    }

    /// SendTargets=All in this session (RFC 7143 §12.3): (TargetName, TargetAddresses).
    pub async fn send_targets(&mut self) -> Result<Vec<(String, Vec<String>)>, Error> {
        let itt = self.take_itt();
        let mut ttt = RESERVED_TAG;
        let mut data = Vec::new();
        text::push(&mut data, "SendTargets", "All");
        let mut answer = Vec::new();
        loop {
            let mut b = Bhs::new(Opcode::TextRequest);
            b.set_flags(0x80);
            b.set_itt(itt);
            b.set_u32_at(20, ttt);
            b.set_u32_at(24, self.cmdsn);
            b.set_u32_at(28, self.exp_statsn);
            self.cmdsn = self.cmdsn.wrapping_add(1);
            self.send(&b, &data).await?;
            data.clear();
            let p = self.recv_response().await?;
            if p.bhs.opcode() != Some(Opcode::TextResponse) || p.bhs.itt() != itt {
                return Err(Error::Protocol(format!(
                    "expected a Text Response, got {:?}",
                    p.bhs
                )));
            }
            answer.extend_from_slice(&p.data);
            if p.bhs.flags() & 0x40 == 0 {
                break;
            }
            ttt = p.bhs.u32_at(20);
        }
        let mut targets: Vec<(String, Vec<String>)> = Vec::new();
        for (k, v) in text::parse_list(&answer).map_err(|e| Error::Protocol(e.to_string()))? {
            match (k.as_str(), targets.last_mut()) {
                ("TargetName", _) => targets.push((v, Vec::new())),
                ("TargetAddress", Some(t)) => t.1.push(v),
                _ => {}
            }
        }
        Ok(targets)
    }

    /// NOP-Out ping with `data`; returns the echoed data (RFC 7143 §11.18).
    pub async fn nop(&mut self, data: &[u8]) -> Result<Vec<u8>, Error> {
        let itt = self.take_itt();
        let mut b = Bhs::new(Opcode::NopOut);
        b.set_immediate(true);
        b.set_flags(0x80);
        b.set_itt(itt);
        b.set_u32_at(20, RESERVED_TAG);
        b.set_u32_at(24, self.cmdsn);
        b.set_u32_at(28, self.exp_statsn);
        self.send(&b, data).await?;
        let p = self.recv_response().await?;
        if p.bhs.opcode() != Some(Opcode::NopIn) || p.bhs.itt() != itt {
            return Err(Error::Protocol(format!(
                "expected a NOP-In, got {:?}",
                p.bhs
            )));
        }
        Ok(p.data)
    }

    /// A task management function (RFC 7143 §11.5).
    pub async fn task_management(
        &mut self,
        function: tmf::Function,
        lun: u64,
        referenced_task_tag: u32,
    ) -> Result<tmf::Response, Error> {
        let itt = self.take_itt();
        let req = tmf::TmfRequest {
            function: Some(function),
            lun: crate::lun::encode(lun),
            itt,
            referenced_task_tag,
            cmdsn: self.cmdsn,
            exp_statsn: self.exp_statsn,
            ref_cmdsn: self.cmdsn,
        };
        self.send(&req.to_bhs(function), &[]).await?;
        let p = self.recv_response().await?;
        if p.bhs.opcode() != Some(Opcode::TaskManagementResponse) || p.bhs.itt() != itt {
            return Err(Error::Protocol(format!(
                "expected a TMF Response, got {:?}",
                p.bhs
            )));
        }
        tmf::Response::from_u8(p.bhs.0[2])
            .ok_or_else(|| Error::Protocol(format!("unknown TMF response {}", p.bhs.0[2])))
    }

    /// Send a SCSI Command PDU without waiting (tests use it to send out-of-window CmdSNs);
    /// returns its ITT.
    pub async fn send_command_with_cmdsn(
        &mut self,
        lun: u64,
        cdb: &[u8],
        expected_in_len: u32,
        cmdsn: u32,
    ) -> Result<u32, Error> {
        let itt = self.take_itt();
        let cmd = ScsiCommand {
            immediate: false,
            final_bit: true,
            read: expected_in_len > 0,
            write: false,
            attr: 1,
            lun: crate::lun::encode(lun),
            itt,
            expected_data_transfer_length: expected_in_len,
            cmdsn,
            exp_statsn: self.exp_statsn,
            cdb: Cdb::new(cdb).ok_or_else(|| Error::Protocol("CDB too long".into()))?,
        };
        self.send(&cmd.to_bhs(), &[]).await?;
        Ok(itt)
    }

    /// Run one SCSI command: `data_out` is written (immediate data, unsolicited Data-Out and
    /// R2T-solicited Data-Out as negotiated); up to `expected_in_len` bytes are read.
    pub async fn scsi_command(
        &mut self,
        lun: u64,
        cdb: &[u8],
        data_out: &[u8],
        expected_in_len: u32,
    ) -> Result<CommandResult, Error> {
        let itt = self
            .submit(lun, cdb, data_out.to_vec(), expected_in_len)
            .await?;
        loop {
            let (done, result) = self.complete().await?;
            if done == itt {
                return Ok(result);
            }
            self.finished.push_back((done, result));
        }
    }

    /// Commands submitted and not yet returned by [`Self::complete`].
    pub fn in_flight(&self) -> usize {
        self.in_flight.len() + self.finished.len()
    }

    /// Send a SCSI command without waiting for it (pipelined use, e.g. a load generator);
    /// returns its ITT. The caller keeps at most `MaxCmdSN − ExpCmdSN + 1` commands in flight
    /// (see [`Self::cmdsn`]); results come from [`Self::complete`].
    pub async fn submit(
        &mut self,
        lun: u64,
        cdb: &[u8],
        data_out: Vec<u8>,
        expected_in_len: u32,
    ) -> Result<u32, Error> {
        let itt = self.take_itt();
        let edtl = if data_out.is_empty() {
            expected_in_len
        } else {
            data_out.len() as u32
        };
        let mrdsl = self.params.target_max_recv_data_segment_length as usize;
        let first_burst = (self.params.first_burst_length as usize).min(data_out.len());
        let immediate = if self.params.immediate_data {
            first_burst.min(mrdsl)
        } else {
            0
        };
        let unsolicited = if self.params.initial_r2t {
            immediate
        } else {
            first_burst
        };
        let lun_raw = crate::lun::encode(lun);
        let cmd = ScsiCommand {
            immediate: false,
            final_bit: unsolicited == immediate,
            read: expected_in_len > 0,
            write: !data_out.is_empty(),
            attr: 1,
            lun: lun_raw,
            itt,
            expected_data_transfer_length: edtl,
            cmdsn: self.cmdsn,
            exp_statsn: self.exp_statsn,
            cdb: Cdb::new(cdb).ok_or_else(|| Error::Protocol("CDB too long".into()))?,
        };
        self.cmdsn = self.cmdsn.wrapping_add(1);
        let mut bytes = std::mem::take(&mut self.wbuf);
        bytes.clear();
        pdu::write_pdu(
            &mut bytes,
            &cmd.to_bhs(),
            data_out.get(..immediate).unwrap_or(&[]),
            self.limits.header_digest,
            self.limits.data_digest,
        );
        if unsolicited > immediate {
            self.data_out_pdus(
                &mut bytes,
                itt,
                lun_raw,
                RESERVED_TAG,
                &data_out,
                immediate,
                unsolicited,
            );
        }
        let written = self.stream.write_all(&bytes).await;
        self.wbuf = bytes;
        written?;
        let data_in = Vec::with_capacity(expected_in_len.min(1 << 20) as usize);
        self.in_flight.insert(
            itt,
            InFlight {
                lun_raw,
                data_out,
                expected_in_len,
                data_in,
            },
        );
        Ok(itt)
    }

    /// Wait for the next submitted command to finish, sending solicited Data-Out and
    /// answering target pings meanwhile. Returns its ITT and result.
    pub async fn complete(&mut self) -> Result<(u32, CommandResult), Error> {
        self.complete_before(None).await?.ok_or(Error::Timeout)
    }

    /// [`Self::complete`], or `None` once `deadline` passes with no command finished. A PDU
    /// partly received by then stays buffered for the next call.
    pub async fn complete_before(
        &mut self,
        deadline: Option<tokio::time::Instant>,
    ) -> Result<Option<(u32, CommandResult)>, Error> {
        if let Some(done) = self.finished.pop_front() {
            return Ok(Some(done));
        }
        loop {
            let timeout = tokio::time::Instant::now() + self.timeout;
            let wait = deadline.map_or(timeout, |d| d.min(timeout));
            let Some((bhs, range)) = self.recv_frame(wait).await? else {
                return match deadline {
                    Some(d) if d <= timeout => Ok(None),
                    _ => Err(Error::Timeout),
                };
            };
            self.track(&bhs);
            let itt = bhs.itt();
            match bhs.opcode() {
                Some(Opcode::NopIn) if itt == RESERVED_TAG => self.answer_ping(&bhs).await?,
                Some(Opcode::AsyncMessage) => {}
                Some(Opcode::Reject) => {
                    return Err(Error::Protocol(format!(
                        "target rejected a PDU, reason {:#x}",
                        bhs.0[2]
                    )))
                }
                _ => {
                    if let Some(done) = self.command_pdu(&bhs, range).await? {
                        return Ok(Some(done));
                    }
                }
            }
        }
    }

    /// A PDU about a command in flight: solicited Data-Out goes out for an R2T, Data-In is
    /// gathered; returns the command's result once its status arrived.
    async fn command_pdu(
        &mut self,
        bhs: &Bhs,
        range: std::ops::Range<usize>,
    ) -> Result<Option<(u32, CommandResult)>, Error> {
        let itt = bhs.itt();
        match bhs.opcode() {
            Some(Opcode::ReadyToTransfer) => {
                let task = self
                    .in_flight
                    .get_mut(&itt)
                    .ok_or_else(|| Error::Protocol(format!("R2T for unknown ITT {itt:#x}")))?;
                let offset = bhs.u32_at(40) as usize;
                let end = offset.checked_add(bhs.u32_at(44) as usize);
                let Some(end) = end.filter(|e| *e <= task.data_out.len()) else {
                    return Err(Error::Protocol("R2T beyond the data".into()));
                };
                let data_out = std::mem::take(&mut task.data_out);
                let lun_raw = task.lun_raw;
                let mut bytes = std::mem::take(&mut self.wbuf);
                bytes.clear();
                self.data_out_pdus(
                    &mut bytes,
                    itt,
                    lun_raw,
                    bhs.u32_at(20),
                    &data_out,
                    offset,
                    end,
                );
                let written = self.stream.write_all(&bytes).await;
                self.wbuf = bytes;
                if let Some(task) = self.in_flight.get_mut(&itt) {
                    task.data_out = data_out;
                }
                written?;
            }
            Some(Opcode::DataIn) => {
                let task = self
                    .in_flight
                    .get_mut(&itt)
                    .ok_or_else(|| Error::Protocol(format!("Data-In for unknown ITT {itt:#x}")))?;
                let data = self.buf.get(range).unwrap_or(&[]);
                let offset = bhs.u32_at(40) as usize;
                let end = offset + data.len();
                if end > task.expected_in_len as usize {
                    return Err(Error::Protocol("Data-In beyond the expected length".into()));
                }
                if offset == task.data_in.len() {
                    task.data_in.extend_from_slice(data);
                } else {
                    if task.data_in.len() < end {
                        task.data_in.resize(end, 0);
                    }
                    task.data_in[offset..end].copy_from_slice(data);
                }
                if bhs.flags() & 0x01 != 0 {
                    let task = self
                        .in_flight
                        .remove(&itt)
                        .map(|t| t.data_in)
                        .unwrap_or_default();
                    let result = CommandResult {
                        status: bhs.0[3],
                        sense: Vec::new(),
                        data_in: task,
                        residual: Residual::decode(bhs.flags(), bhs.u32_at(44)),
                    };
                    return Ok(Some((itt, result)));
                }
            }
            Some(Opcode::ScsiResponse) => {
                let task = self
                    .in_flight
                    .remove(&itt)
                    .ok_or_else(|| Error::Protocol(format!("response for unknown ITT {itt:#x}")))?;
                let data = self.buf.get(range).unwrap_or(&[]);
                // SenseLength, then the sense data (RFC 7143 §11.4.7.2).
                let sense = match data.get(..2) {
                    Some(l) => {
                        let len = usize::from(u16::from_be_bytes([l[0], l[1]]));
                        data.get(2..2 + len).unwrap_or(&[]).to_vec()
                    }
                    None => Vec::new(),
                };
                let result = CommandResult {
                    status: bhs.0[3],
                    sense,
                    data_in: task.data_in,
                    residual: Residual::decode(bhs.flags(), bhs.u32_at(44)),
                };
                return Ok(Some((itt, result)));
            }
            _ => return Err(Error::Protocol(format!("unexpected PDU {bhs:?}"))),
        }
        Ok(None)
    }

    /// Data-Out PDUs for `data[from..to]`, split at the target's MaxRecvDataSegmentLength,
    /// DataSN from 0, F on the last (RFC 7143 §11.7), appended to `bytes`.
    #[allow(clippy::too_many_arguments)]
    fn data_out_pdus(
        &self,
        bytes: &mut Vec<u8>,
        itt: u32,
        lun: u64,
        ttt: u32,
        data: &[u8],
        from: usize,
        to: usize,
    ) {
        let mrdsl = (self.params.target_max_recv_data_segment_length as usize).max(512);
        let mut offset = from;
        let mut datasn = 0;
        while offset < to {
            let end = to.min(offset + mrdsl);
            let d = Data {
                final_bit: end == to,
                lun,
                itt,
                ttt,
                datasn,
                buffer_offset: offset as u32,
            };
            let chunk = data.get(offset..end).unwrap_or(&[]);
            let b = d.to_data_out(self.exp_statsn);
            pdu::write_pdu(
                bytes,
                &b,
                chunk,
                self.limits.header_digest,
                self.limits.data_digest,
            );
            datasn += 1;
            offset = end;
        }
    }

    /// Log out (close the session, RFC 7143 §11.14); returns the Logout Response code. A
    /// target that closes the connection instead of answering (istgt does, now and then) has
    /// closed the session as asked: code 0.
    pub async fn logout(mut self) -> Result<u8, Error> {
        let itt = self.take_itt();
        let mut b = Bhs::new(Opcode::LogoutRequest);
        b.set_immediate(true);
        b.set_flags(0x80);
        b.set_itt(itt);
        b.set_u32_at(24, self.cmdsn);
        b.set_u32_at(28, self.exp_statsn);
        self.send(&b, &[]).await?;
        let p = match self.recv_response().await {
            Err(Error::Io(e)) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
            r => r?,
        };
        if p.bhs.opcode() != Some(Opcode::LogoutResponse) {
            return Err(Error::Protocol(format!(
                "expected a Logout Response, got {:?}",
                p.bhs
            )));
        }
        Ok(p.bhs.0[2])
    }
}
