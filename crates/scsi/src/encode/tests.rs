use super::*;
use crate::form;
use crate::persistent_reserve::{PrInAction, PrOutAction};
use crate::sanitize::SanitizeAction;
use crate::third_party_copy::{in_action, out_action, ExtendedCopy, ReceiveCopyResults};

fn rw(lba: u64, transfer_length: u32) -> ReadWrite {
    ReadWrite {
        lba,
        transfer_length,
        dpo: false,
        fua: false,
        group_number: 0,
        dld: 0,
    }
}

/// A value of each entry's command that uses every field its form has, with values no other
/// field could be mistaken for.
fn representative(info: &CommandInfo) -> Command {
    let sa = info.service_action.unwrap_or(0) as u8;
    let flagged = ReadWrite {
        dpo: true,
        fua: true,
        group_number: 0x15,
        ..rw(0x0102_0304, 0x0506_0708)
    };
    let verify = Verify {
        lba: 0x0102_0304,
        verification_length: 0x0506,
        dpo: true,
        bytchk: ByteCheck::Compare,
        group_number: 0x15,
    };
    let write_and_verify = WriteAndVerify {
        lba: 0x0102_0304,
        transfer_length: 0x0506,
        dpo: true,
        bytchk: ByteCheck::Compare,
        group_number: 0x15,
    };
    let cache = CacheRange {
        lba: 0x0102_0304,
        number_of_logical_blocks: 0x0506,
        immed: true,
    };
    let same = WriteSame {
        unmap: true,
        ndob: false,
        lba: 0x0102_0304,
        number_of_logical_blocks: 0x0506,
        group_number: 0x15,
    };
    match info.name {
        "TEST UNIT READY" => Command::TestUnitReady,
        "REQUEST SENSE" => Command::RequestSense {
            desc: true,
            allocation_length: 252,
        },
        "FORMAT UNIT" => Command::FormatUnit(FormatUnit {
            longlist: true,
            fmtdata: true,
        }),
        "READ(6)" => Command::Read(rw(0x1F_FFFF, 256)),
        "WRITE(6)" => Command::Write(rw(0x12_3456, 7)),
        "INQUIRY" => Command::Inquiry(Inquiry {
            evpd: true,
            page_code: 0x83,
            allocation_length: 0x0102,
        }),
        "MODE SELECT(6)" | "MODE SELECT(10)" => Command::ModeSelect(ModeSelect {
            ten: info.cdb_length() == 10,
            pf: true,
            sp: true,
            parameter_list_length: 0xF0,
        }),
        "RESERVE(6)" | "RESERVE(10)" => Command::Reserve,
        "RELEASE(6)" | "RELEASE(10)" => Command::Release,
        "MODE SENSE(6)" | "MODE SENSE(10)" => {
            let ten = info.cdb_length() == 10;
            Command::ModeSense(ModeSense {
                ten,
                dbd: true,
                llbaa: ten,
                pc: PageControl::Default,
                page_code: 0x0A,
                subpage_code: 0x07,
                allocation_length: 0xF0,
            })
        }
        "START STOP UNIT" => Command::StartStopUnit(StartStopUnit {
            immed: true,
            power_condition_modifier: 0x0A,
            power_condition: 0x05,
            no_flush: true,
            loej: true,
            start: true,
        }),
        "PREVENT ALLOW MEDIUM REMOVAL" => Command::PreventAllowMediumRemoval { prevent: true },
        "READ CAPACITY(10)" => Command::ReadCapacity10,
        "READ(10)" => Command::Read(rw(0xFFFF_FFFF, 0xFFFF)),
        "WRITE(10)" => Command::Write(ReadWrite {
            transfer_length: 0x0506,
            ..flagged
        }),
        "WRITE AND VERIFY(10)" | "WRITE AND VERIFY(12)" | "WRITE AND VERIFY(16)" => {
            Command::WriteAndVerify(write_and_verify)
        }
        "VERIFY(10)" | "VERIFY(12)" | "VERIFY(16)" => Command::Verify(verify),
        "PRE-FETCH(10)" | "PRE-FETCH(16)" => Command::PreFetch(cache),
        "SYNCHRONIZE CACHE(10)" | "SYNCHRONIZE CACHE(16)" => Command::SynchronizeCache(cache),
        "READ DEFECT DATA(10)" | "READ DEFECT DATA(12)" => {
            Command::ReadDefectData(ReadDefectData {
                long: info.cdb_length() == 12,
                req_plist: true,
                req_glist: true,
                defect_list_format: 5,
                allocation_length: 0x0102,
            })
        }
        "READ LONG(10)" | "READ LONG(16)" => Command::ReadLong {
            lba: 0x0102_0304,
            byte_transfer_length: 520,
        },
        "WRITE LONG(10)" | "WRITE LONG(16)" => Command::WriteLong {
            lba: 0x0102_0304,
            byte_transfer_length: 520,
            wr_uncor: true,
        },
        "WRITE SAME(10)" => Command::WriteSame(same),
        "WRITE SAME(16)" | "WRITE SAME(32)" => Command::WriteSame(WriteSame {
            ndob: true,
            lba: 1 << 40,
            number_of_logical_blocks: 1 << 20,
            ..same
        }),
        "UNMAP" => Command::Unmap(Unmap {
            group_number: 0x15,
            parameter_list_length: 24,
        }),
        "LOG SELECT" => Command::LogSelect(LogSelect {
            pcr: true,
            pc: LogPageControl::CumulativeValues,
            page_code: 0x19,
            subpage_code: 0x21,
        }),
        "LOG SENSE" => Command::LogSense(LogSense {
            pc: LogPageControl::DefaultCumulativeValues,
            page_code: 0x19,
            subpage_code: 0x21,
            parameter_pointer: 0x0102,
            allocation_length: 0x0304,
        }),
        "READ(32)" => Command::Read(ReadWrite {
            lba: 1 << 40,
            dld: 5,
            ..flagged
        }),
        "WRITE(32)" | "WRITE(16)" => Command::Write(ReadWrite {
            lba: 1 << 40,
            dld: 6,
            ..flagged
        }),
        "READ(16)" => Command::Read(ReadWrite {
            lba: 1 << 40,
            dld: 7,
            ..flagged
        }),
        "READ(12)" | "WRITE(12)" => {
            let r = ReadWrite {
                transfer_length: u32::MAX,
                ..flagged
            };
            if info.name.starts_with("READ") {
                Command::Read(r)
            } else {
                Command::Write(r)
            }
        }
        "WRITE ATOMIC(16)" | "WRITE ATOMIC(32)" => Command::WriteAtomic {
            rw: ReadWrite {
                lba: 1 << 40,
                transfer_length: 0x0506,
                ..flagged
            },
            atomic_boundary: 0x0708,
        },
        "COMPARE AND WRITE" => Command::CompareAndWrite(ReadWrite {
            lba: 1 << 40,
            transfer_length: 0xFF,
            ..flagged
        }),
        "ORWRITE(16)" => Command::OrWrite(ReadWrite {
            lba: 1 << 40,
            group_number: 0x1F,
            ..flagged
        }),
        "READ CAPACITY(16)" => Command::ReadCapacity16 {
            allocation_length: 32,
        },
        "GET LBA STATUS" => Command::GetLbaStatus {
            lba: 1 << 40,
            allocation_length: 0x0102_0304,
        },
        "REPORT LUNS" => Command::ReportLuns {
            select_report: 2,
            allocation_length: 0x0102_0304,
        },
        "REPORT TARGET PORT GROUPS" => Command::ReportTargetPortGroups {
            extended: true,
            allocation_length: 0x0102_0304,
        },
        "REPORT SUPPORTED OPERATION CODES" => {
            Command::ReportSupportedOperationCodes(ReportSupportedOperationCodes {
                rctd: true,
                reporting_options: 3,
                requested_operation_code: 0x7F,
                requested_service_action: 0x0009,
                allocation_length: 0x0102_0304,
            })
        }
        "REPORT SUPPORTED TASK MANAGEMENT FUNCTIONS" => {
            Command::ReportSupportedTaskManagementFunctions {
                repd: true,
                allocation_length: 0x0102_0304,
            }
        }
        "REPORT TIMESTAMP" => Command::ReportTimestamp {
            allocation_length: 0x0102_0304,
        },
        "SET TIMESTAMP" => Command::SetTimestamp {
            parameter_list_length: 12,
        },
        "SET TARGET PORT GROUPS" => Command::SetTargetPortGroups {
            parameter_list_length: 0x0001_0304,
        },
        "COPY OPERATION ABORT" => Command::ExtendedCopy(ExtendedCopy {
            service_action: out_action::COPY_OPERATION_ABORT,
            list_identifier: 0x0102_0304,
            parameter_list_length: 0,
        }),
        _ if info.opcode() == 0x83 => Command::ExtendedCopy(ExtendedCopy {
            service_action: sa,
            list_identifier: match sa {
                out_action::POPULATE_TOKEN | out_action::WRITE_USING_TOKEN => 0x0102_0304,
                _ => 0,
            },
            parameter_list_length: 0x0102,
        }),
        _ if info.opcode() == 0x84 => Command::ReceiveCopyResults(ReceiveCopyResults {
            service_action: sa,
            list_identifier: match sa {
                in_action::RECEIVE_COPY_STATUS_LID4
                | in_action::RECEIVE_COPY_DATA_LID4
                | in_action::RECEIVE_ROD_TOKEN_INFORMATION => 0x0102_0304,
                in_action::RECEIVE_COPY_OPERATING_PARAMETERS | in_action::REPORT_ALL_ROD_TOKENS => {
                    0
                }
                _ => 0x17,
            },
            allocation_length: 0x0102_0304,
        }),
        _ if info.opcode() == 0x48 => Command::Sanitize(Sanitize {
            immed: true,
            ause: true,
            action: SanitizeAction::of(sa).unwrap(),
            parameter_list_length: 0x0102,
        }),
        _ if info.opcode() == 0x5E => Command::PersistentReserveIn(PersistentReserveIn {
            service_action: [
                PrInAction::ReadKeys,
                PrInAction::ReadReservation,
                PrInAction::ReportCapabilities,
                PrInAction::ReadFullStatus,
            ][usize::from(sa)],
            allocation_length: 0x0102,
        }),
        _ if info.opcode() == 0x5F => Command::PersistentReserveOut(PersistentReserveOut {
            service_action: PR_OUT[usize::from(sa)],
            scope_type: 0x05,
            parameter_list_length: 24,
        }),
        other => panic!("no representative {other}"),
    }
}

const PR_OUT: [PrOutAction; 8] = [
    PrOutAction::Register,
    PrOutAction::Reserve,
    PrOutAction::Release,
    PrOutAction::Clear,
    PrOutAction::Preempt,
    PrOutAction::PreemptAndAbort,
    PrOutAction::RegisterAndIgnoreExistingKey,
    PrOutAction::RegisterAndMove,
];

#[test]
fn every_form_encodes_what_it_decodes() {
    for info in crate::COMMANDS {
        let cmd = representative(info);
        let cdb = cmd
            .emit(info)
            .unwrap_or_else(|e| panic!("{}: {e}", info.name));
        assert_eq!(cdb.len(), info.cdb_length(), "{}", info.name);
        match crate::decode(&cdb) {
            Ok((back, decoded)) => {
                assert_eq!((back.name, decoded), (info.name, cmd), "{cdb:02x?}")
            }
            Err(sense) => panic!("{}: {cdb:02x?} refused: {sense:?}", info.name),
        }
    }
}

#[test]
fn cdl_commands_carry_their_dld_where_linux_sd_puts_it() {
    let read = Command::Read(ReadWrite {
        dld: 5,
        ..rw(1 << 40, 256)
    });
    let cdb = read.emit(form::READ_16).unwrap();
    assert_eq!(
        &*cdb,
        &[0x88, 0x01, 0, 0, 0x01, 0, 0, 0, 0, 0, 0, 0, 0x01, 0, 0x40, 0]
    );
    let cdb = read.emit(form::READ_32).unwrap();
    assert_eq!((cdb[7], cdb[9], cdb[11]), (0x18, 0x09, 5));
}

#[test]
fn a_value_the_form_cannot_carry_is_refused() {
    let does_not_fit = |form: &CommandInfo, field| EncodeError::DoesNotFit {
        form: form.name,
        field,
    };
    let read = |r| Command::Read(r);
    assert_eq!(
        read(rw(1 << 21, 1)).emit(form::READ_6),
        Err(does_not_fit(form::READ_6, "LOGICAL BLOCK ADDRESS"))
    );
    assert_eq!(
        read(rw(0, 0)).emit(form::READ_6),
        Err(does_not_fit(form::READ_6, "TRANSFER LENGTH"))
    );
    assert_eq!(
        read(ReadWrite { dld: 1, ..rw(0, 1) }).emit(form::READ_10),
        Err(does_not_fit(form::READ_10, "DLD"))
    );
    assert_eq!(
        read(ReadWrite { dld: 8, ..rw(0, 1) }).emit(form::READ_16),
        Err(does_not_fit(form::READ_16, "DLD"))
    );
    assert_eq!(
        read(rw(1 << 32, 1)).emit(form::READ_12),
        Err(does_not_fit(form::READ_12, "LOGICAL BLOCK ADDRESS"))
    );
    assert_eq!(
        read(rw(0, 1 << 16)).emit(form::READ_10),
        Err(does_not_fit(form::READ_10, "TRANSFER LENGTH"))
    );
    assert_eq!(
        Command::OrWrite(ReadWrite {
            group_number: 0x20,
            ..rw(0, 1)
        })
        .emit(form::ORWRITE_16),
        Err(does_not_fit(form::ORWRITE_16, "GROUP NUMBER"))
    );
    assert_eq!(
        Command::Write(rw(0, 1)).emit(form::READ_16),
        Err(EncodeError::OtherCommand { form: "READ(16)" })
    );
    let reserve = Command::PersistentReserveOut(PersistentReserveOut {
        service_action: PrOutAction::Reserve,
        scope_type: 0x01,
        parameter_list_length: 24,
    });
    assert_eq!(
        reserve.emit(form::PERSISTENT_RESERVE_OUT_REGISTER),
        Err(EncodeError::OtherCommand {
            form: "PERSISTENT RESERVE OUT (REGISTER)"
        })
    );
    assert!(reserve.emit(form::PERSISTENT_RESERVE_OUT_RESERVE).is_ok());
    let inquiry = Command::Inquiry(Inquiry {
        evpd: false,
        page_code: 0x80,
        allocation_length: 96,
    });
    assert_eq!(
        inquiry.emit(form::INQUIRY),
        Err(does_not_fit(form::INQUIRY, "PAGE CODE"))
    );
    assert_eq!(
        does_not_fit(form::READ_6, "DLD").to_string(),
        "DLD does not fit READ(6)"
    );
}

#[test]
fn the_device_tests_shorthand_is_read_16_and_write_16() {
    for dld in 0..8 {
        let Ok((info, Command::Read(r))) = crate::decode(&rw16(false, 1 << 40, 256, dld)) else {
            panic!("READ(16) did not decode");
        };
        assert_eq!(
            (info.name, r.lba, r.transfer_length, r.dld),
            ("READ(16)", 1 << 40, 256, dld)
        );
        let Ok((info, Command::Write(r))) = crate::decode(&rw16(true, 7, 1, dld)) else {
            panic!("WRITE(16) did not decode");
        };
        assert_eq!(
            (info.name, r.lba, r.transfer_length, r.dld),
            ("WRITE(16)", 7, 1, dld)
        );
    }
}

#[test]
fn unmap_list_decodes_to_what_was_asked() {
    let list = unmap_parameter_list(&[(7, 3), (1 << 40, 0)]);
    let d = crate::provisioning::unmap_descriptors(&list).unwrap();
    let ranges: Vec<(u64, u32)> = d
        .iter()
        .map(|d| (d.lba, d.number_of_logical_blocks))
        .collect();
    assert_eq!(ranges, [(7, 3), (1 << 40, 0)]);
}
