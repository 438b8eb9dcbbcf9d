//! Task Management Function Requests on the target side (RFC 7143 §11.5, §11.6). The device
//! aborts the tasks; the ones of this nexus come back as aborted before the response is sent,
//! so their state (and outstanding R2Ts) is gone first.

use super::*;

impl Session {
    pub(super) fn task_management(&mut self, bhs: &Bhs, out: &mut Output) -> Flow {
        let req = tmf::TmfRequest::parse(bhs);
        if self.window.admit(req.cmdsn, bhs.immediate()) == Admission::Drop {
            return Flow::Continue;
        }
        let lun = lun::decode(req.lun);
        let Some(function) = req.function else {
            return self.tmf_reply(bhs, tmf::Response::FunctionNotSupported, out);
        };
        let device_fn = match function {
            tmf::Function::TaskReassign => {
                return self.tmf_reply(
                    bhs,
                    tmf::Response::TaskAllegianceReassignmentNotSupported,
                    out,
                )
            }
            tmf::Function::AbortTask => {
                TaskManagement::AbortTask(u64::from(req.referenced_task_tag))
            }
            tmf::Function::AbortTaskSet => TaskManagement::AbortTaskSet,
            tmf::Function::ClearAca => TaskManagement::ClearAca,
            tmf::Function::ClearTaskSet => TaskManagement::ClearTaskSet,
            tmf::Function::LogicalUnitReset => TaskManagement::LogicalUnitReset,
            tmf::Function::TargetWarmReset => TaskManagement::TargetWarmReset,
            tmf::Function::TargetColdReset => TaskManagement::TargetColdReset,
        };
        let target_reset = matches!(
            function,
            tmf::Function::TargetWarmReset | tmf::Function::TargetColdReset
        );
        if function != tmf::Function::AbortTask {
            tracing::info!(?function, lun, "task management");
        }
        let Some(target) = self.target.clone() else {
            return self.tmf_reply(bhs, tmf::Response::FunctionRejected, out);
        };
        // Resetting the target disrupts every initiator's sessions (RFC 7143 §11.6.1:
        // response 6 when the initiator may not).
        if target_reset && !self.nexus.privileged {
            tracing::warn!(?function, "refused: the initiator is not privileged");
            return self.tmf_reply(bhs, tmf::Response::FunctionAuthorizationFailed, out);
        }
        let mut mine = std::mem::take(&mut self.mine);
        let response = {
            let mut sink = self.sink(&mut mine);
            target.task_management(self.now, &self.nexus, lun, device_fn, &mut sink)
        };
        self.mine = mine;
        // This nexus's aborted tasks go before the response (RFC 7143 §11.5.1).
        self.handle_mine(out);
        let response = match response {
            TmfResponse::FunctionComplete => tmf::Response::FunctionComplete,
            TmfResponse::NoSuchTask => tmf::Response::TaskDoesNotExist,
            TmfResponse::FunctionRejected => tmf::Response::FunctionRejected,
            TmfResponse::IncorrectLun => tmf::Response::LunDoesNotExist,
        };
        self.tmf_reply(bhs, response, out);
        // TARGET COLD RESET ends the connection after the response (RFC 7143 §11.5.1).
        if function == tmf::Function::TargetColdReset {
            Flow::ColdReset
        } else {
            Flow::Continue
        }
    }

    fn tmf_reply(&mut self, bhs: &Bhs, response: tmf::Response, out: &mut Output) -> Flow {
        let n = self.numbers_with_status();
        out.pdu(&tmf::response(bhs.itt(), response, n), &[]);
        Flow::Continue
    }
}
