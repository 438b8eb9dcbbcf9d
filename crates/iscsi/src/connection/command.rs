//! The full feature phase's command path (RFC 7143 §11.3, §11.4, §11.7): a SCSI Command
//! becomes a task for the device; its Data-In and SCSI Response go out when it ends, at once
//! or when the device delivers it.

use super::*;

/// Where the device's calls from this session put what they did to other tasks: this
/// nexus's go to the session (handled when the call returns), the others' to their
/// connections; a driver that must wake sooner is woken.
pub(super) struct SessionSink<'a> {
    nexus: u64,
    node: Option<usize>,
    portal: &'a Portal,
    mine: &'a mut Vec<Finished>,
}

impl Sink for SessionSink<'_> {
    fn deliver(&mut self, f: Finished) {
        if f.nexus == self.nexus {
            self.mine.push(f);
        } else {
            self.portal.router.route(f);
        }
    }

    fn wake(&mut self, lun: u64) {
        self.portal.drivers.wake(self.node, lun);
    }
}

impl Session {
    pub(super) fn sink<'a>(&'a self, mine: &'a mut Vec<Finished>) -> SessionSink<'a> {
        SessionSink {
            nexus: self.nexus.id,
            node: self.node,
            portal: &self.portal,
            mine,
        }
    }

    pub(super) fn scsi_command(&mut self, bhs: &Bhs, ahs: &[u8], data: &[u8], out: &mut Output) {
        let cmd = match ScsiCommand::parse(bhs, ahs) {
            Ok(c) => c,
            Err(_) => return self.reject(RejectReason::InvalidPduField, bhs, out),
        };
        if self.window.admit(cmd.cmdsn, cmd.immediate) == Admission::Drop {
            return;
        }
        let Some(target) = self.target.clone() else {
            // Discovery sessions carry no SCSI commands (RFC 7143 §4.3).
            return self.reject(RejectReason::ProtocolError, bhs, out);
        };
        let lun = lun::decode(cmd.lun);
        if self.tasks.len() >= self.max_tasks() {
            // Immediate commands bypass the CmdSN window (RFC 7143 §3.2.2.1) and an initiator
            // may ignore MaxCmdSN: past this many tasks the session's task set is full
            // (SAM-5 TASK SET FULL; Linux lowers its queue depth and retries).
            let c = Completion {
                status: Status::TaskSetFull,
                sense: None,
            };
            let data_in = self.pool.get();
            return self.respond(cmd.itt, cmd.lun, &c, data_in, 0, Residual::None, 0, out);
        }
        // The Expected Data Transfer Length counts in the direction the R/W bits name
        // (RFC 7143 §11.3.1.1, §11.3.4): SAM-5's Data-Out Buffer Size of a write.
        let data_out_buffer_size = if cmd.write {
            cmd.expected_data_transfer_length
        } else {
            0
        };
        let data = data.get(..data_out_buffer_size as usize).unwrap_or(data);
        let a = Arrival {
            nexus: &self.nexus,
            lun,
            tag: u64::from(cmd.itt),
            cdb: cmd.cdb.as_slice(),
            attribute: task_attribute(cmd.attr),
            data_out_buffer_size,
            data_out: data,
        };
        let mut data_in = self.pool.get();
        let mut mine = std::mem::take(&mut self.mine);
        let (transfer, submitted) = {
            let mut sink = self.sink(&mut mine);
            target.command(self.now, &a, &mut data_in, &mut sink)
        };
        self.mine = mine;
        // The EDTL of a CDB that moves data the other way than the R/W bits say counts for
        // nothing (a CDB moving none: its EDTL is the residual).
        let edtl = match transfer {
            Some(Transfer::In(_)) if !cmd.read => 0,
            Some(Transfer::Out(_)) if !cmd.write => 0,
            _ => cmd.expected_data_transfer_length,
        };
        let t = SessionTask {
            task: match &submitted {
                Submitted::WantData(task, _) | Submitted::Queued(task) => *task,
                _ => TaskId::from_u64(0),
            },
            lun_raw: cmd.lun,
            lun,
            transfer,
            edtl,
            buf: Vec::new(),
            collecting: None,
            r2tsn: 0,
        };
        match submitted {
            Submitted::WantData(_, want) => {
                let mut t = t;
                t.buf = self.pool.get();
                t.buf
                    .extend_from_slice(data.get(..want as usize).unwrap_or(data));
                let have = t.buf.len() as u32;
                t.collecting = Some(Collecting {
                    want,
                    unsolicited_open: !self.params.initial_r2t && !cmd.final_bit,
                    unsolicited_datasn: 0,
                    unsolicited_end: have,
                    next_r2t_offset: have,
                    r2ts: Vec::new(),
                });
                // Unsolicited Data-Out comes first; R2Ts follow its final PDU.
                if self.params.initial_r2t || cmd.final_bit {
                    self.issue_r2ts(cmd.itt, &mut t, out);
                }
                self.pool.put(data_in);
                self.tasks.insert(cmd.itt, t);
            }
            Submitted::Queued(_) => {
                // A write's data stays with the transport while the device has the task.
                let mut t = t;
                if !data.is_empty() {
                    t.buf = self.pool.get();
                    t.buf.extend_from_slice(data);
                }
                self.pool.put(data_in);
                self.tasks.insert(cmd.itt, t);
            }
            other => self.submitted(cmd.itt, t, other, data_in, out),
        }
        self.handle_mine(out);
    }

    /// Tasks a session holds at most: its CmdSN window and as many immediate commands again.
    fn max_tasks(&self) -> usize {
        2 * self.window.depth as usize
    }

    /// What the device did with a task the session gave it (its Data-Out, or a delivered
    /// operation): answer it if it ended, keep it if it goes on.
    pub(super) fn submitted(
        &mut self,
        itt: u32,
        t: SessionTask,
        submitted: Submitted,
        data_in: Vec<u8>,
        out: &mut Output,
    ) {
        match submitted {
            Submitted::Done(c) => {
                self.answer(itt, &t, &c, data_in, out);
                self.pool.put(t.buf);
            }
            Submitted::Queued(task) => {
                self.pool.put(data_in);
                self.tasks.insert(itt, SessionTask { task, ..t });
            }
            Submitted::WantData(..) | Submitted::Aborted => {
                self.pool.put(data_in);
                self.pool.put(t.buf);
            }
        }
    }

    /// Handles this nexus's tasks the device delivered during the session's own calls.
    pub(super) fn handle_mine(&mut self, out: &mut Output) {
        while !self.mine.is_empty() {
            let mut mine = std::mem::take(&mut self.mine);
            for f in mine.drain(..) {
                self.finish(f, out);
            }
            if self.mine.is_empty() {
                self.mine = mine;
            }
        }
    }

    /// A task of this nexus moved on in the device: run its operation, send its status, or
    /// forget it.
    pub(super) fn finish(&mut self, f: Finished, out: &mut Output) {
        let Ok(itt) = u32::try_from(f.tag) else {
            return;
        };
        // A stale delivery (of a task aborted whose tag was used again) names another task.
        if self.tasks.get(&itt).is_none_or(|t| t.task != f.task) {
            if let (Next::Run(_), Some(target)) = (&f.then, self.target.clone()) {
                // Answered before its operation came: the device learns it will not run.
                let mut mine = std::mem::take(&mut self.mine);
                target.dropped(self.now, f.lun, f.task, &mut self.sink(&mut mine));
                self.mine.append(&mut mine);
            }
            return;
        }
        let Some(t) = self.tasks.remove(&itt) else {
            return;
        };
        match f.then {
            Next::Run(op) => {
                let Some(target) = self.target.clone() else {
                    return;
                };
                let mut data_in = self.pool.get();
                let mut mine = std::mem::take(&mut self.mine);
                let submitted = {
                    let mut sink = self.sink(&mut mine);
                    target.run(self.now, t.lun, t.task, op, &t.buf, &mut data_in, &mut sink)
                };
                self.mine.append(&mut mine);
                self.submitted(itt, t, submitted, data_in, out);
            }
            Next::Done {
                completion,
                data_in,
                data_out,
            } => {
                self.answer(itt, &t, &completion, data_in, out);
                self.pool.put(t.buf);
                self.pool.put(data_out);
            }
            Next::Aborted => self.pool.put(t.buf),
        }
    }

    /// Sends a task's data and status. Residuals (RFC 7143 §11.4.5.2) compare the Expected
    /// Data Transfer Length with what the command moves (reads: the data the device produced).
    pub(super) fn answer(
        &mut self,
        itt: u32,
        t: &SessionTask,
        c: &Completion,
        mut data_in: Vec<u8>,
        out: &mut Output,
    ) {
        let (send, residual) = match t.transfer {
            None => {
                data_in.clear();
                (0, Residual::None)
            }
            Some(Transfer::Out(n)) => {
                data_in.clear();
                (0, Residual::between(t.edtl, n))
            }
            Some(Transfer::In(_) | Transfer::None) => {
                let produced = u32::try_from(data_in.len()).unwrap_or(u32::MAX);
                (produced.min(t.edtl), Residual::between(t.edtl, produced))
            }
        };
        self.respond(itt, t.lun_raw, c, data_in, send, residual, t.r2tsn, out);
    }

    /// Send Data-In (if any) and the status: in the last Data-In when GOOD without sense
    /// (RFC 7143 §11.7.4), otherwise in a SCSI Response carrying the sense data (§11.4.7).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn respond(
        &mut self,
        itt: u32,
        lun_raw: u64,
        c: &Completion,
        data_in: Vec<u8>,
        send: u32,
        residual: Residual,
        r2ts: u32,
        out: &mut Output,
    ) {
        let status = c.status as u8;
        let collapse = c.status == Status::Good && c.sense.is_none();
        let mut datasn = 0u32;
        if send > 0 {
            let send = send as usize;
            let mrdsl = (self.params.initiator_max_recv_data_segment_length as usize).max(512);
            let mbl = (self.params.max_burst_length as usize).max(512);
            let index = out.add_buffer(data_in);
            let mut offset = 0usize;
            while offset < send {
                let burst_end = send.min((offset / mbl + 1) * mbl);
                let len = mrdsl.min(burst_end - offset);
                let end = offset + len;
                let last = end == send;
                let with_status = last && collapse;
                let n = if with_status {
                    self.numbers_with_status()
                } else {
                    self.numbers_without_status()
                };
                let b = pdu::data_in(
                    itt,
                    lun_raw,
                    end == burst_end,
                    with_status.then_some((status, residual)),
                    n,
                    datasn,
                    offset as u32,
                );
                out.pdu_from_buffer(&b, index, offset..end);
                datasn += 1;
                offset = end;
            }
            if collapse {
                return;
            }
        } else {
            self.pool.put(data_in);
        }
        let n = self.numbers_with_status();
        let b = pdu::scsi_response(itt, status, residual, n, datasn.max(r2ts));
        self.scratch.clear();
        if let Some(sense) = &c.sense {
            // SenseLength, then the sense data (RFC 7143 §11.4.7.2).
            self.scratch.extend_from_slice(&[0, 0]);
            match &self.target {
                Some(t) => t.encode_sense(lun::decode(lun_raw), sense, &mut self.scratch),
                None => sense.write_fixed(&mut self.scratch),
            }
            let len = (self.scratch.len() - 2) as u16;
            self.scratch[..2].copy_from_slice(&len.to_be_bytes());
        }
        out.pdu(&b, &self.scratch);
    }
}

/// Task attribute from the ATTR field (RFC 7143 §11.3.1.2); untagged is treated as simple.
pub(super) fn task_attribute(attr: u8) -> TaskAttribute {
    match attr {
        2 => TaskAttribute::Ordered,
        3 => TaskAttribute::HeadOfQueue,
        4 => TaskAttribute::Aca,
        _ => TaskAttribute::Simple,
    }
}
