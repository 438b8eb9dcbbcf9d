//! The tasks of a session as the transport keeps them, by Initiator Task Tag, from the moment
//! the device took them until their status is sent: collecting unsolicited or solicited
//! Data-Out (RFC 7143 §11.7, R2T §11.8), and keeping a write's data while the device has the
//! task. Which task may run when (task attributes, SAM-5 §8.6) is the device's business.

use super::*;

/// A task the device has.
pub(super) struct SessionTask {
    /// The device's name for it.
    pub(super) task: TaskId,
    pub(super) lun_raw: u64,
    pub(super) lun: u64,
    /// What its CDB transfers, for residuals.
    pub(super) transfer: Option<Transfer>,
    pub(super) edtl: u32,
    /// Its Data-Out: being collected, then kept for the device's operations.
    pub(super) buf: Vec<u8>,
    /// Data-Out still being collected.
    pub(super) collecting: Option<Collecting>,
    pub(super) r2tsn: u32,
}

/// The Data-Out collection of a task (RFC 7143 §11.7, §11.8).
pub(super) struct Collecting {
    /// Data-Out bytes to collect: what the device asked for.
    pub(super) want: u32,
    /// Unsolicited Data-Out (TTT = 0xffffffff) still expected (InitialR2T=No, F=0).
    pub(super) unsolicited_open: bool,
    pub(super) unsolicited_datasn: u32,
    /// End of the data received so far in the unsolicited burst.
    pub(super) unsolicited_end: u32,
    pub(super) next_r2t_offset: u32,
    pub(super) r2ts: Vec<OutstandingR2t>,
}

pub(super) struct OutstandingR2t {
    pub(super) ttt: u32,
    pub(super) offset: u32,
    pub(super) len: u32,
    pub(super) received: u32,
    pub(super) next_datasn: u32,
}

impl Collecting {
    fn done(&self) -> bool {
        !self.unsolicited_open && self.r2ts.is_empty() && self.next_r2t_offset >= self.want
    }
}

impl Session {
    /// Solicit the next bursts of a task's Data-Out (RFC 7143 §11.8), up to MaxOutstandingR2T.
    pub(super) fn issue_r2ts(&mut self, itt: u32, t: &mut SessionTask, out: &mut Output) {
        let Some(c) = t.collecting.as_mut() else {
            return;
        };
        while (c.r2ts.len() as u32) < self.params.max_outstanding_r2t && c.next_r2t_offset < c.want
        {
            let len = (c.want - c.next_r2t_offset).min(self.params.max_burst_length);
            let ttt = self.allocate_ttt();
            let n = self.numbers_without_status();
            out.pdu(
                &pdu::r2t(itt, t.lun_raw, ttt, n, t.r2tsn, c.next_r2t_offset, len),
                &[],
            );
            c.r2ts.push(OutstandingR2t {
                ttt,
                offset: c.next_r2t_offset,
                len,
                received: 0,
                next_datasn: 0,
            });
            t.r2tsn += 1;
            c.next_r2t_offset += len;
        }
    }

    pub(super) fn data_out(&mut self, bhs: &Bhs, data: &[u8], out: &mut Output) {
        let d = Data::parse(bhs);
        // Data for a task that already ended (failed early, aborted, or EDTL beyond the
        // CDB) is dropped quietly.
        let Some(mut t) = self.tasks.remove(&d.itt).filter(|t| t.collecting.is_some()) else {
            return;
        };
        let len = data.len() as u32;
        let Some(c) = t.collecting.as_mut() else {
            return;
        };
        let ok = if d.ttt == RESERVED_TAG {
            let ok = c.unsolicited_open
                && d.datasn == c.unsolicited_datasn
                && d.buffer_offset == c.unsolicited_end
                && u64::from(c.unsolicited_end) + u64::from(len)
                    <= u64::from(self.params.first_burst_length.min(t.edtl));
            if ok {
                c.unsolicited_datasn += 1;
                c.unsolicited_end += len;
                if d.final_bit {
                    c.unsolicited_open = false;
                    c.next_r2t_offset = c.next_r2t_offset.max(c.unsolicited_end);
                }
            }
            ok
        } else if let Some(r) = c.r2ts.iter_mut().find(|r| r.ttt == d.ttt) {
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
            return self.fail_collecting(d.itt, t, DATA_OFFSET_ERROR, out);
        }
        let want = c.want;
        store_at(&mut t.buf, d.buffer_offset, want, data);
        c.r2ts.retain(|r| r.received < r.len);
        let open = c.unsolicited_open;
        if !open {
            self.issue_r2ts(d.itt, &mut t, out);
        }
        if t.collecting.as_ref().is_some_and(Collecting::done) {
            t.collecting = None;
            t.buf.truncate(want as usize);
            return self.collected(d.itt, t, out);
        }
        self.tasks.insert(d.itt, t);
    }

    /// A task's Data-Out is all here: the device goes on with it.
    fn collected(&mut self, itt: u32, t: SessionTask, out: &mut Output) {
        let Some(target) = self.target.clone() else {
            return;
        };
        let mut data_in = self.pool.get();
        let mut mine = std::mem::take(&mut self.mine);
        let submitted = {
            let mut sink = self.sink(&mut mine);
            target.data_out(self.now, t.lun, t.task, &t.buf, &mut data_in, &mut sink)
        };
        self.mine = mine;
        self.submitted(itt, t, submitted, data_in, out);
    }

    /// A task's Data-Out could not be collected: it fails with ABORTED COMMAND and `asc`.
    pub(super) fn fail_collecting(&mut self, itt: u32, t: SessionTask, asc: Asc, out: &mut Output) {
        let c = Completion::check_condition(Sense::new(SenseKey::AbortedCommand, asc));
        if let Some(target) = self.target.clone() {
            let mut mine = std::mem::take(&mut self.mine);
            {
                let mut sink = self.sink(&mut mine);
                target.data_out_failed(self.now, t.lun, t.task, c.clone(), &mut sink);
            }
            self.mine = mine;
        }
        let data_in = self.pool.get();
        self.respond(itt, t.lun_raw, &c, data_in, 0, Residual::None, t.r2tsn, out);
        self.pool.put(t.buf);
        self.handle_mine(out);
    }

    /// A Data-Out PDU with a bad data digest: the task it belongs to fails (RFC 7143 §7.8: at
    /// ErrorRecoveryLevel 0 a write that lost data cannot finish).
    pub(super) fn fail_pending(&mut self, itt: u32, asc: Asc, out: &mut Output) {
        if let Some(t) = self.tasks.remove(&itt) {
            if t.collecting.is_some() {
                return self.fail_collecting(itt, t, asc, out);
            }
            self.tasks.insert(itt, t);
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
