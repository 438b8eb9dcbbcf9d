//! Tasks that cannot run the moment their SCSI Command arrives: writes collecting
//! unsolicited or solicited Data-Out (RFC 7143 §11.7, R2T §11.8) and commands held back by
//! task attributes (SAM-5 §8.6).

use super::*;

/// A command not executed yet: a write waiting for unsolicited Data-Out or solicited (R2T)
/// data (RFC 7143 §11.7, §11.8), or a command waiting behind an ORDERED task (SAM-5 §8.6).
pub(super) struct PendingTask {
    pub(super) itt: u32,
    pub(super) lun_raw: u64,
    pub(super) lun: u64,
    pub(super) cdb: Cdb,
    pub(super) attr: TaskAttribute,
    pub(super) edtl: u32,
    pub(super) transfer: Transfer,
    /// All data is here; the task runs when its task attribute allows.
    pub(super) ready: bool,
    /// Data-Out bytes to collect: min(CDB length, EDTL); 0 without Data-Out.
    pub(super) want: u32,
    pub(super) buf: Vec<u8>,
    /// Unsolicited Data-Out (TTT = 0xffffffff) still expected (InitialR2T=No, F=0).
    pub(super) unsolicited_open: bool,
    pub(super) unsolicited_datasn: u32,
    /// End of the data received so far in the unsolicited burst.
    pub(super) unsolicited_end: u32,
    pub(super) next_r2t_offset: u32,
    pub(super) r2tsn: u32,
    pub(super) r2ts: Vec<OutstandingR2t>,
    /// Task set generation when the command arrived (see [`Portal::task_set_generation`]).
    pub(super) generation: u64,
}

impl PendingTask {
    /// A task whose data (if any) is all here: nothing to collect.
    pub(super) fn new(
        cmd: &ScsiCommand,
        lun: u64,
        attr: TaskAttribute,
        edtl: u32,
        transfer: Transfer,
    ) -> PendingTask {
        PendingTask {
            itt: cmd.itt,
            lun_raw: cmd.lun,
            lun,
            cdb: cmd.cdb.clone(),
            attr,
            edtl,
            transfer,
            ready: true,
            want: 0,
            buf: Vec::new(),
            unsolicited_open: false,
            unsolicited_datasn: 0,
            unsolicited_end: 0,
            next_r2t_offset: 0,
            r2tsn: 0,
            r2ts: Vec::new(),
            generation: 0,
        }
    }
}

pub(super) struct OutstandingR2t {
    pub(super) ttt: u32,
    pub(super) offset: u32,
    pub(super) len: u32,
    pub(super) received: u32,
    pub(super) next_datasn: u32,
}

impl Session {
    /// Solicit the next bursts of a pending write (RFC 7143 §11.8), up to MaxOutstandingR2T.
    pub(super) fn issue_r2ts(&mut self, pw: &mut PendingTask, out: &mut Output) {
        while (pw.r2ts.len() as u32) < self.params.max_outstanding_r2t
            && pw.next_r2t_offset < pw.want
        {
            let len = (pw.want - pw.next_r2t_offset).min(self.params.max_burst_length);
            let ttt = self.allocate_ttt();
            let n = self.numbers_without_status();
            out.pdu(
                &pdu::r2t(
                    pw.itt,
                    pw.lun_raw,
                    ttt,
                    n,
                    pw.r2tsn,
                    pw.next_r2t_offset,
                    len,
                ),
                &[],
            );
            pw.r2ts.push(OutstandingR2t {
                ttt,
                offset: pw.next_r2t_offset,
                len,
                received: 0,
                next_datasn: 0,
            });
            pw.r2tsn += 1;
            pw.next_r2t_offset += len;
        }
    }

    pub(super) fn data_out(&mut self, bhs: &Bhs, data: &[u8], out: &mut Output) {
        let d = Data::parse(bhs);
        // Data for a task that already ended (failed early, aborted, or EDTL beyond the
        // CDB) is dropped quietly.
        let Some(i) = self.pending.iter().position(|p| p.itt == d.itt && !p.ready) else {
            return;
        };
        let mut pw = self.pending.remove(i);
        let len = data.len() as u32;
        let ok = if d.ttt == RESERVED_TAG {
            let ok = pw.unsolicited_open
                && d.datasn == pw.unsolicited_datasn
                && d.buffer_offset == pw.unsolicited_end
                && u64::from(pw.unsolicited_end) + u64::from(len)
                    <= u64::from(self.params.first_burst_length.min(pw.edtl));
            if ok {
                pw.unsolicited_datasn += 1;
                pw.unsolicited_end += len;
                if d.final_bit {
                    pw.unsolicited_open = false;
                    pw.next_r2t_offset = pw.next_r2t_offset.max(pw.unsolicited_end);
                }
            }
            ok
        } else if let Some(r) = pw.r2ts.iter_mut().find(|r| r.ttt == d.ttt) {
            let ok = d.datasn == r.next_datasn
                && d.buffer_offset == r.offset + r.received
                && r.received + len <= r.len
                && (!d.final_bit || r.received + len == r.len);
            if ok {
                r.next_datasn += 1;
                r.received += len;
            }
            ok
        } else {
            false
        };
        if !ok {
            // RFC 7143 §11.7.4 (DataSN) / §11.7.5 (Buffer Offset): at ErrorRecoveryLevel 0
            // the command fails; the session stays up.
            let c = Completion::check_condition(Sense::new(
                SenseKey::AbortedCommand,
                DATA_OFFSET_ERROR,
            ));
            self.pool.put(std::mem::take(&mut pw.buf));
            let data_in = self.pool.get();
            self.respond(
                pw.itt,
                pw.lun_raw,
                &c,
                data_in,
                0,
                Residual::None,
                pw.r2tsn,
                out,
            );
            return self.run_ready(out);
        }
        store_at(&mut pw.buf, d.buffer_offset, pw.want, data);
        pw.r2ts.retain(|r| r.received < r.len);
        if !pw.unsolicited_open {
            self.issue_r2ts(&mut pw, out);
        }
        pw.ready = !pw.unsolicited_open && pw.r2ts.is_empty() && pw.next_r2t_offset >= pw.want;
        let ready = pw.ready;
        self.pending.insert(i, pw);
        if ready {
            self.run_ready(out);
        }
    }

    /// Whether a task with `attr` after the first `position` pending tasks must wait
    /// (SAM-5 §8.6: ORDERED waits for every older task; other tasks wait for older ORDERED
    /// ones; HEAD OF QUEUE never waits).
    pub(super) fn blocked(&self, position: usize, attr: TaskAttribute) -> bool {
        let older = self.pending.get(..position).unwrap_or(&self.pending);
        match attr {
            TaskAttribute::HeadOfQueue => false,
            TaskAttribute::Ordered => !older.is_empty(),
            TaskAttribute::Simple | TaskAttribute::Aca => {
                older.iter().any(|t| t.attr == TaskAttribute::Ordered)
            }
        }
    }

    /// Execute every pending task that has its data and that its task attribute lets run.
    pub(super) fn run_ready(&mut self, out: &mut Output) {
        let Some(target) = self.target.clone() else {
            return;
        };
        while let Some(i) = (0..self.pending.len())
            .find(|&i| self.pending[i].ready && !self.blocked(i, self.pending[i].attr))
        {
            let mut t = self.pending.remove(i);
            let mut buf = std::mem::take(&mut t.buf);
            if self.task_set_generation(t.lun) != t.generation {
                // Another session cleared the task set meanwhile: the task was aborted and
                // ends without a response (SAM-5 §5.6, TAS=0).
                self.pool.put(buf);
                continue;
            }
            buf.truncate(t.want as usize);
            self.execute(&*target, t, Cow::Owned(buf), out);
        }
    }

    pub(super) fn fail_pending(&mut self, itt: u32, asc: Asc, out: &mut Output) {
        if let Some(i) = self.pending.iter().position(|p| p.itt == itt && !p.ready) {
            let pw = self.pending.remove(i);
            let c = Completion::check_condition(Sense::new(SenseKey::AbortedCommand, asc));
            self.pool.put(pw.buf);
            let data_in = self.pool.get();
            self.respond(
                pw.itt,
                pw.lun_raw,
                &c,
                data_in,
                0,
                Residual::None,
                pw.r2tsn,
                out,
            );
            self.run_ready(out);
        }
    }
}

/// Keep the part of `data` (at `offset` of the initiator's buffer) that lies below `want`.
fn store_at(buf: &mut Vec<u8>, offset: u32, want: u32, data: &[u8]) {
    let (offset, want) = (offset as usize, want as usize);
    if offset >= want {
        return;
    }
    let take = data.len().min(want - offset);
    let end = offset + take;
    // In-order data (DataPDUInOrder=Yes) appends without zero-filling first.
    if offset == buf.len() {
        buf.extend_from_slice(data.get(..take).unwrap_or(&[]));
        return;
    }
    if buf.len() < end {
        buf.resize(end, 0);
    }
    if let (Some(dst), Some(src)) = (buf.get_mut(offset..end), data.get(..take)) {
        dst.copy_from_slice(src);
    }
}
