//! The full feature phase's command path (RFC 7143 §11.3, §11.4, §11.7): a SCSI Command
//! becomes a task for the device; its Data-In and SCSI Response go out when it completes, at
//! once or when its `Finished` comes back from the device queue.

use super::*;

impl Session {
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
        if self.pending.len() + self.in_device.len() >= self.max_tasks() {
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
        if self.in_device.contains_key(&cmd.itt) || self.pending.iter().any(|t| t.itt == cmd.itt) {
            // The tag of a task still in progress (SAM-5 §5.10, overlapped commands; issue 11:
            // duplicates were accepted). The new command ends; the older one goes on.
            let c = Completion::check_condition(Sense::new(
                SenseKey::AbortedCommand,
                Asc::OVERLAPPED_COMMANDS_ATTEMPTED,
            ));
            let data_in = self.pool.get();
            return self.respond(cmd.itt, cmd.lun, &c, data_in, 0, Residual::None, 0, out);
        }
        let attr = task_attribute(cmd.attr);
        let transfer = match target.transfer(&self.nexus, lun, cmd.cdb.as_slice()) {
            Ok(t) => t,
            Err(sense) => {
                let c = Completion::check_condition(sense);
                let data_in = self.pool.get();
                return self.respond(cmd.itt, cmd.lun, &c, data_in, 0, Residual::None, 0, out);
            }
        };
        // The Expected Data Transfer Length counts in the direction the R/W bits name
        // (RFC 7143 §11.3.1.1, §11.3.4): a CDB moving data the other way moves none.
        let matches = match transfer {
            Transfer::In(_) => cmd.read,
            Transfer::Out(_) => cmd.write,
            Transfer::None => true,
        };
        let edtl = if matches {
            cmd.expected_data_transfer_length
        } else {
            0
        };
        let blocked = self.blocked(self.pending.len(), attr);
        let mut task = PendingTask::new(&cmd, lun, attr, edtl, transfer);
        if let Transfer::Out(n) = transfer {
            let want = n.min(edtl);
            let complete = data.len() as u64 >= u64::from(want);
            let data = data.get(..want as usize).unwrap_or(data);
            if complete && !blocked {
                return self.execute(&*target, task, Cow::Borrowed(data), out);
            }
            task.buf = self.pool.get();
            task.buf.extend_from_slice(data);
            task.want = want;
            task.ready = complete;
            task.unsolicited_open = !complete && !self.params.initial_r2t && !cmd.final_bit;
            task.unsolicited_end = data.len() as u32;
            task.next_r2t_offset = data.len() as u32;
            task.generation = self.task_set_generation(lun);
            if !task.unsolicited_open && !complete {
                self.issue_r2ts(&mut task, out);
            }
            self.pending.push(task);
            return;
        }
        if blocked {
            task.generation = self.task_set_generation(lun);
            self.pending.push(task);
            return;
        }
        self.execute(&*target, task, Cow::Borrowed(&[]), out);
    }

    /// Tasks a session holds at most: its CmdSN window and as many immediate commands again.
    fn max_tasks(&self) -> usize {
        2 * self.window.depth as usize
    }

    /// Hands a task whose data is all here to the device: answers it if it completed at
    /// once, else keeps it (with its data-out) until its `Finished` comes.
    pub(super) fn execute(
        &mut self,
        target: &dyn ScsiTarget,
        mut task: PendingTask,
        data_out: Cow<'_, [u8]>,
        out: &mut Output,
    ) {
        let mut data_in = self.pool.get();
        let req = Request {
            nexus: &self.nexus,
            lun: task.lun,
            tag: u64::from(task.itt),
            cdb: task.cdb.as_slice(),
            attribute: task.attr,
            data_out: &data_out,
            data_out_buffer_size: task.edtl,
        };
        match target.submit(self.now, &req, &mut data_in) {
            Submitted::Done(c) => {
                self.answer(&task, &c, data_in, out);
                if let Cow::Owned(buf) = data_out {
                    self.pool.put(buf);
                }
            }
            Submitted::Queued => {
                self.pool.put(data_in);
                task.buf = match data_out {
                    Cow::Owned(buf) => buf,
                    // A read keeps no buffer while it waits: the pool's go to Data-In.
                    Cow::Borrowed([]) => Vec::new(),
                    Cow::Borrowed(data) => {
                        let mut buf = self.pool.get();
                        buf.extend_from_slice(data);
                        buf
                    }
                };
                let lun = task.lun;
                self.in_device.insert(task.itt, task);
                self.advance_lun(target, lun, out);
            }
        }
    }

    /// Whatever is due on `lun` now: this nexus's tasks are answered here, other nexuses'
    /// go to their connections.
    pub(super) fn advance_lun(&mut self, target: &dyn ScsiTarget, lun: u64, out: &mut Output) {
        let mut finished = std::mem::take(&mut self.finished);
        target.advance(self.now, lun, &mut finished);
        for f in finished.drain(..) {
            if f.nexus == self.nexus.id {
                self.finish(f, out);
            } else {
                self.portal.router.route(f);
            }
        }
        self.finished = finished;
    }

    /// A task of this nexus left its device queue: move its data and answer it.
    pub(super) fn finish(&mut self, f: Finished, out: &mut Output) {
        let Some(target) = self.target.clone() else {
            return;
        };
        let Some(mut task) = u32::try_from(f.tag)
            .ok()
            .and_then(|itt| self.in_device.remove(&itt))
        else {
            return;
        };
        let buf = std::mem::take(&mut task.buf);
        if f.verdict != Verdict::Aborted {
            let mut data_in = self.pool.get();
            let req = Request {
                nexus: &self.nexus,
                lun: task.lun,
                tag: f.tag,
                cdb: task.cdb.as_slice(),
                attribute: task.attr,
                data_out: &buf,
                data_out_buffer_size: task.edtl,
            };
            let c = target.complete(task.lun, &f, &req, &mut data_in);
            self.answer(&task, &c, data_in, out);
        }
        self.pool.put(buf);
    }

    /// Sends a task's data and status. Residuals (RFC 7143 §11.4.5.2) compare the Expected
    /// Data Transfer Length with what the command moves (reads: the data the device produced).
    pub(super) fn answer(
        &mut self,
        task: &PendingTask,
        c: &Completion,
        mut data_in: Vec<u8>,
        out: &mut Output,
    ) {
        let (send, residual) = match task.transfer {
            Transfer::Out(n) => {
                data_in.clear();
                (0, Residual::between(task.edtl, n))
            }
            Transfer::In(_) | Transfer::None => {
                let produced = u32::try_from(data_in.len()).unwrap_or(u32::MAX);
                (
                    produced.min(task.edtl),
                    Residual::between(task.edtl, produced),
                )
            }
        };
        self.respond(
            task.itt,
            task.lun_raw,
            c,
            data_in,
            send,
            residual,
            task.r2tsn,
            out,
        );
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
