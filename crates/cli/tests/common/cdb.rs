//! The CDBs the integration tests send, through the command table's encoders
//! (`Command::emit`), and the sense they read back (`Sense::parse`).

#![allow(dead_code)] // each test binary uses a different part

use iscsi::initiator::CommandResult;
use scsi::command::{
    Command, ModeSelect, ModeSense, PageControl, PersistentReserveIn, PersistentReserveOut,
    ReadWrite,
};
pub use scsi::encode::Cdb;
use scsi::form;
use scsi::persistent_reserve::{PrInAction, PrOutAction, ReservationType};
use scsi::table::CommandInfo;
use scsi::{Asc, SenseKey};

/// `command` in `form`; a value that does not fit is the test's own mistake.
pub fn emit(command: Command, form: &CommandInfo) -> Cdb {
    command.emit(form).unwrap_or_else(|e| panic!("{e}"))
}

/// `blocks` at `lba`, no flags, no DLD: `ReadWrite { fua: true, ..rw(lba, 8) }` for others.
pub fn rw(lba: u64, blocks: u32) -> ReadWrite {
    ReadWrite {
        lba,
        transfer_length: blocks,
        ..ReadWrite::default()
    }
}

/// A READ in `form` (`form::READ_10`, `form::READ_16`, ...).
pub fn read(form: &CommandInfo, r: ReadWrite) -> Cdb {
    emit(Command::Read(r), form)
}

/// A WRITE in `form`.
pub fn write(form: &CommandInfo, w: ReadWrite) -> Cdb {
    emit(Command::Write(w), form)
}

pub fn test_unit_ready() -> Cdb {
    emit(Command::TestUnitReady, form::TEST_UNIT_READY)
}

/// READ CAPACITY(16) of its 32-byte parameter data (SBC-4 §5.21).
pub fn read_capacity16() -> Cdb {
    emit(
        Command::ReadCapacity16 {
            allocation_length: 32,
        },
        form::READ_CAPACITY_16,
    )
}

/// MODE SENSE(10) with DBD of page `page_code`/`subpage_code`.
pub fn mode_sense10(pc: PageControl, page_code: u8, subpage_code: u8, allocation: u16) -> Cdb {
    let m = ModeSense {
        ten: true,
        dbd: true,
        llbaa: false,
        pc,
        page_code,
        subpage_code,
        allocation_length: allocation,
    };
    emit(Command::ModeSense(m), form::MODE_SENSE_10)
}

/// MODE SELECT(10) with PF of a `len`-byte list, saving the pages when `sp`.
pub fn mode_select10(len: usize, sp: bool) -> Cdb {
    let m = ModeSelect {
        ten: true,
        pf: true,
        sp,
        parameter_list_length: u16::try_from(len).unwrap(),
    };
    emit(Command::ModeSelect(m), form::MODE_SELECT_10)
}

/// PERSISTENT RESERVE OUT `action` with reservation type `kind` (LU scope, SPC-4 §6.16.1)
/// for a `len`-byte parameter list.
pub fn persistent_reserve_out(
    action: PrOutAction,
    kind: Option<ReservationType>,
    len: usize,
) -> Cdb {
    use PrOutAction::*;
    let form = match action {
        Register => form::PERSISTENT_RESERVE_OUT_REGISTER,
        Reserve => form::PERSISTENT_RESERVE_OUT_RESERVE,
        Release => form::PERSISTENT_RESERVE_OUT_RELEASE,
        Clear => form::PERSISTENT_RESERVE_OUT_CLEAR,
        Preempt => form::PERSISTENT_RESERVE_OUT_PREEMPT,
        PreemptAndAbort => form::PERSISTENT_RESERVE_OUT_PREEMPT_AND_ABORT,
        RegisterAndIgnoreExistingKey => {
            form::PERSISTENT_RESERVE_OUT_REGISTER_AND_IGNORE_EXISTING_KEY
        }
        RegisterAndMove => form::PERSISTENT_RESERVE_OUT_REGISTER_AND_MOVE,
    };
    let prout = PersistentReserveOut {
        service_action: action,
        scope_type: kind.map_or(0, ReservationType::code),
        parameter_list_length: u32::try_from(len).unwrap(),
    };
    emit(Command::PersistentReserveOut(prout), form)
}

/// PERSISTENT RESERVE IN `action` (SPC-4 §6.15.1).
pub fn persistent_reserve_in(action: PrInAction, allocation: u16) -> Cdb {
    let form = match action {
        PrInAction::ReadKeys => form::PERSISTENT_RESERVE_IN_READ_KEYS,
        PrInAction::ReadReservation => form::PERSISTENT_RESERVE_IN_READ_RESERVATION,
        PrInAction::ReportCapabilities => form::PERSISTENT_RESERVE_IN_REPORT_CAPABILITIES,
        PrInAction::ReadFullStatus => form::PERSISTENT_RESERVE_IN_READ_FULL_STATUS,
    };
    let prin = PersistentReserveIn {
        service_action: action,
        allocation_length: allocation,
    };
    emit(Command::PersistentReserveIn(prin), form)
}

/// The sense key and additional sense code a command ended with.
pub fn sense(r: &CommandResult) -> Option<(SenseKey, Asc)> {
    r.parsed_sense().map(|s| (s.key, s.asc))
}
