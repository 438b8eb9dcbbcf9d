//! Task Management Function Requests on the target side (RFC 7143 §11.5, §11.6).

use super::*;

impl Session {
    pub(super) fn task_management(&mut self, bhs: &Bhs, out: &mut Output) -> Flow {
        let req = tmf::TmfRequest::parse(bhs);
        if self.window.admit(req.cmdsn, bhs.immediate()) == Admission::Drop {
            return Flow::Continue;
        }
        let lun = lun::decode(req.lun);
        let mut close = false;
        let response = match req.function {
            Some(tmf::Function::AbortTask) => self.abort_task(req.referenced_task_tag),
            Some(tmf::Function::TaskReassign) => {
                tmf::Response::TaskAllegianceReassignmentNotSupported
            }
            Some(function) => {
                tracing::info!(?function, lun, "task management");
                let Some(target) = self.target.clone() else {
                    return self.tmf_reply(bhs, tmf::Response::FunctionRejected, out);
                };
                // Resetting the target disrupts every initiator's sessions (RFC 7143 §11.6.1:
                // response 6 when the initiator may not).
                let target_reset = matches!(
                    function,
                    tmf::Function::TargetWarmReset | tmf::Function::TargetColdReset
                );
                if target_reset && !self.nexus.privileged {
                    tracing::warn!(?function, "refused: the initiator is not privileged");
                    return self.tmf_reply(bhs, tmf::Response::FunctionAuthorizationFailed, out);
                }
                let all_luns = matches!(
                    function,
                    tmf::Function::TargetWarmReset | tmf::Function::TargetColdReset
                );
                // Pending tasks are part of the task set being cleared.
                let pool = &mut self.pool;
                self.pending.retain_mut(|p| {
                    let keep =
                        !(all_luns || p.lun == lun) || matches!(function, tmf::Function::ClearAca);
                    if !keep {
                        pool.put(std::mem::take(&mut p.buf));
                    }
                    keep
                });
                close = function == tmf::Function::TargetColdReset;
                let device_fn = match function {
                    tmf::Function::AbortTaskSet => TaskManagement::AbortTaskSet,
                    tmf::Function::ClearAca => TaskManagement::ClearAca,
                    tmf::Function::ClearTaskSet => TaskManagement::ClearTaskSet,
                    tmf::Function::LogicalUnitReset => TaskManagement::LogicalUnitReset,
                    tmf::Function::TargetWarmReset => TaskManagement::TargetWarmReset,
                    tmf::Function::TargetColdReset => TaskManagement::TargetColdReset,
                    tmf::Function::AbortTask | tmf::Function::TaskReassign => {
                        TaskManagement::AbortTask(u64::from(req.referenced_task_tag))
                    }
                };
                // The device aborts this nexus's tasks in the task sets it clears; their
                // data-out goes.
                let nexus_wide = matches!(
                    function,
                    tmf::Function::AbortTaskSet
                        | tmf::Function::ClearTaskSet
                        | tmf::Function::LogicalUnitReset
                        | tmf::Function::TargetWarmReset
                        | tmf::Function::TargetColdReset
                );
                if nexus_wide {
                    let pool = &mut self.pool;
                    self.in_device.retain(|_, t| {
                        let keep = !(all_luns || t.lun == lun);
                        if !keep {
                            pool.put(std::mem::take(&mut t.buf));
                        }
                        keep
                    });
                }
                // Writes of other sessions still waiting for data belong to the cleared
                // task sets too.
                if let Some(node) = self.node {
                    match function {
                        tmf::Function::ClearTaskSet | tmf::Function::LogicalUnitReset => {
                            self.portal.clear_task_sets(node, Some(lun))
                        }
                        tmf::Function::TargetWarmReset | tmf::Function::TargetColdReset => {
                            self.portal.clear_task_sets(node, None)
                        }
                        _ => {}
                    }
                }
                match target.task_management(self.now, &self.nexus, lun, device_fn) {
                    TmfResponse::FunctionComplete => tmf::Response::FunctionComplete,
                    TmfResponse::NoSuchTask => tmf::Response::TaskDoesNotExist,
                    TmfResponse::FunctionRejected => tmf::Response::FunctionRejected,
                    TmfResponse::IncorrectLun => tmf::Response::LunDoesNotExist,
                }
            }
            None => tmf::Response::FunctionNotSupported,
        };
        self.tmf_reply(bhs, response, out);
        // Removing tasks may let tasks behind them run.
        self.run_ready(out);
        // TARGET COLD RESET ends the connection after the response (RFC 7143 §11.5.1).
        if close {
            Flow::ColdReset
        } else {
            Flow::Continue
        }
    }

    /// ABORT TASK (RFC 7143 §11.5.1): a task still collecting Data-Out is dropped here; one
    /// in a device queue is aborted there. A task that already completed (or whose
    /// completion is on its way) "does not exist" (libiscsi's test_async_abort_simple accepts
    /// exactly that answer).
    fn abort_task(&mut self, itt: u32) -> tmf::Response {
        if let Some(i) = self.pending.iter().position(|p| p.itt == itt) {
            let pw = self.pending.remove(i);
            self.pool.put(pw.buf);
            return tmf::Response::FunctionComplete;
        }
        let (Some(task), Some(target)) = (self.in_device.get(&itt), self.target.clone()) else {
            return tmf::Response::TaskDoesNotExist;
        };
        let tmf = TaskManagement::AbortTask(u64::from(itt));
        match target.task_management(self.now, &self.nexus, task.lun, tmf) {
            TmfResponse::FunctionComplete => {
                if let Some(t) = self.in_device.remove(&itt) {
                    self.pool.put(t.buf);
                }
                tmf::Response::FunctionComplete
            }
            _ => tmf::Response::TaskDoesNotExist,
        }
    }

    fn tmf_reply(&mut self, bhs: &Bhs, response: tmf::Response, out: &mut Output) -> Flow {
        let n = self.numbers_with_status();
        out.pdu(&tmf::response(bhs.itt(), response, n), &[]);
        Flow::Continue
    }
}
