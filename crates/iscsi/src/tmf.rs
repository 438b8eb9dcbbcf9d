//! Task Management Function Request/Response (RFC 7143 §11.5, §11.6).

use crate::bhs::{Bhs, Opcode};
use crate::pdu::Numbers;

/// Function codes (RFC 7143 §11.5.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Function {
    AbortTask = 1,
    AbortTaskSet = 2,
    ClearAca = 3,
    ClearTaskSet = 4,
    LogicalUnitReset = 5,
    TargetWarmReset = 6,
    TargetColdReset = 7,
    TaskReassign = 8,
}

impl Function {
    pub fn from_u8(v: u8) -> Option<Function> {
        Some(match v {
            1 => Function::AbortTask,
            2 => Function::AbortTaskSet,
            3 => Function::ClearAca,
            4 => Function::ClearTaskSet,
            5 => Function::LogicalUnitReset,
            6 => Function::TargetWarmReset,
            7 => Function::TargetColdReset,
            8 => Function::TaskReassign,
            _ => return None,
        })
    }
}

/// Response codes (RFC 7143 §11.6.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Response {
    FunctionComplete = 0,
    TaskDoesNotExist = 1,
    LunDoesNotExist = 2,
    TaskStillAllegiant = 3,
    TaskAllegianceReassignmentNotSupported = 4,
    FunctionNotSupported = 5,
    FunctionAuthorizationFailed = 6,
    FunctionRejected = 255,
}

impl Response {
    pub fn from_u8(v: u8) -> Option<Response> {
        Some(match v {
            0 => Response::FunctionComplete,
            1 => Response::TaskDoesNotExist,
            2 => Response::LunDoesNotExist,
            3 => Response::TaskStillAllegiant,
            4 => Response::TaskAllegianceReassignmentNotSupported,
            5 => Response::FunctionNotSupported,
            6 => Response::FunctionAuthorizationFailed,
            255 => Response::FunctionRejected,
            _ => return None,
        })
    }
}

/// Task Management Function Request fields (RFC 7143 §11.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TmfRequest {
    /// `None` for a function code this target does not know.
    pub function: Option<Function>,
    pub lun: u64,
    pub itt: u32,
    pub referenced_task_tag: u32,
    pub cmdsn: u32,
    pub exp_statsn: u32,
    pub ref_cmdsn: u32,
}

impl TmfRequest {
    pub fn parse(b: &Bhs) -> TmfRequest {
        TmfRequest {
            function: Function::from_u8(b.flags() & 0x7F),
            lun: b.lun_raw(),
            itt: b.itt(),
            referenced_task_tag: b.u32_at(20),
            cmdsn: b.u32_at(24),
            exp_statsn: b.u32_at(28),
            ref_cmdsn: b.u32_at(32),
        }
    }

    /// Header of a request (initiator side); TMF requests are sent for immediate delivery.
    pub fn to_bhs(&self, function: Function) -> Bhs {
        let mut b = Bhs::new(Opcode::TaskManagementRequest);
        b.set_immediate(true);
        b.set_flags(0x80 | function as u8);
        b.set_lun_raw(self.lun);
        b.set_itt(self.itt);
        b.set_u32_at(20, self.referenced_task_tag);
        b.set_u32_at(24, self.cmdsn);
        b.set_u32_at(28, self.exp_statsn);
        b.set_u32_at(32, self.ref_cmdsn);
        b
    }
}

/// Task Management Function Response header (RFC 7143 §11.6).
pub fn response(itt: u32, response: Response, n: Numbers) -> Bhs {
    let mut b = Bhs::new(Opcode::TaskManagementResponse);
    b.set_flags(0x80);
    b.0[2] = response as u8;
    b.set_itt(itt);
    n.write(&mut b);
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_round_trip() {
        let r = TmfRequest {
            function: Some(Function::LogicalUnitReset),
            lun: 1 << 48,
            itt: 9,
            referenced_task_tag: 0xFFFF_FFFF,
            cmdsn: 4,
            exp_statsn: 5,
            ref_cmdsn: 0,
        };
        let b = r.to_bhs(Function::LogicalUnitReset);
        assert_eq!(TmfRequest::parse(&b), r);
        assert!(b.immediate());
    }

    #[test]
    fn unknown_function_and_response_codes() {
        assert_eq!(Function::from_u8(0), None);
        assert_eq!(Function::from_u8(9), None);
        assert_eq!(Response::from_u8(7), None);
        assert_eq!(Response::from_u8(255), Some(Response::FunctionRejected));
    }
}
