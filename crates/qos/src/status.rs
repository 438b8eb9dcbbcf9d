//! A queue [`Outcome`] as SCSI status and sense, both ways: what the device answers for a
//! medium command that left the queue (SBC-4 §4.18 for medium errors; SPC-6 CDL policies
//! Dh, Eh and Fh), and what a host (`stint bench`, the simulator) reads back from it.

use crate::completion::Outcome;
use drive::MediaOp;
use scsi::{Asc, Sense, SenseKey, Status};

/// How a CDL policy Dh completion (GOOD, COMPLETED, 55h/0Ah DATA CURRENTLY UNAVAILABLE, no
/// data) is sent. Linux's iSCSI initiator copies sense data only from a SCSI Response with
/// CHECK CONDITION status, so the standard GOOD form reaches a Linux host as plain success.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DhCompletion {
    /// CHECK CONDITION with the same sense: Linux maps it to -ETIME as the standard intends.
    #[default]
    CheckCondition,
    /// GOOD status with sense data, as SPC-6 defines it.
    GoodWithSense,
}

impl Outcome {
    /// The sense key and additional sense code of a duration-limit outcome (SPC-6 CDL
    /// policies); `None` for `Good` and `MediumError`, whose sense depends on the command.
    fn cdl_sense(self) -> Option<(SenseKey, Asc)> {
        match self {
            Self::Good | Self::MediumError => None,
            Self::CompletedUnavailable => {
                Some((SenseKey::Completed, Asc::DATA_CURRENTLY_UNAVAILABLE))
            }
            Self::AbortedBeforeProcessing => Some((
                SenseKey::AbortedCommand,
                Asc::COMMAND_TIMEOUT_BEFORE_PROCESSING,
            )),
            Self::AbortedDuringProcessing => Some((
                SenseKey::AbortedCommand,
                Asc::COMMAND_TIMEOUT_DURING_PROCESSING,
            )),
            Self::AbortedErrorRecovery => Some((
                SenseKey::AbortedCommand,
                Asc::COMMAND_TIMEOUT_DURING_PROCESSING_DUE_TO_ERROR_RECOVERY,
            )),
        }
    }

    /// The status and sense the device answers for `op` that ended so, with Dh completions
    /// in the `dh` form; `None` for `Good`: the command runs and its own status stands.
    /// A medium error is WRITE ERROR or UNRECOVERED READ ERROR with the LBA in INFORMATION.
    pub fn status(self, op: &MediaOp, dh: DhCompletion) -> Option<(Status, Sense)> {
        if self == Self::Good {
            return None;
        }
        let (key, asc) = match self.cdl_sense() {
            Some(cdl) => cdl,
            None if op.write => (SenseKey::MediumError, Asc::WRITE_ERROR),
            None => (SenseKey::MediumError, Asc::UNRECOVERED_READ_ERROR),
        };
        let mut sense = Sense::new(key, asc);
        if self == Self::MediumError {
            sense.information = Some(op.lba);
        }
        let status = match (self, dh) {
            (Self::CompletedUnavailable, DhCompletion::GoodWithSense) => Status::Good,
            _ => Status::CheckCondition,
        };
        Some((status, sense))
    }

    /// The outcome a host reads from a command's status byte and sense: the inverse of
    /// [`Outcome::status`]. The CDL completions by their sense whatever the status (Dh may
    /// come with GOOD), GOOD without sense as `Good`, anything else as `MediumError`.
    pub fn read(status: u8, sense: Option<&Sense>) -> Outcome {
        match sense {
            None if status == Status::Good as u8 => Self::Good,
            Some(s) => Self::ALL
                .into_iter()
                .find(|o| o.cdl_sense() == Some((s.key, s.asc)))
                .unwrap_or(Self::MediumError),
            None => Self::MediumError,
        }
    }

    /// Whether no data was transferred because a duration limit ended the command (the host
    /// sees -ETIME).
    pub fn is_duration_limit(self) -> bool {
        self.cdl_sense().is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_reads_back_what_the_device_answered() {
        for write in [false, true] {
            let op = MediaOp {
                lba: 1 << 40,
                blocks: 8,
                write,
                fua: false,
            };
            for dh in [DhCompletion::CheckCondition, DhCompletion::GoodWithSense] {
                for o in Outcome::ALL {
                    let answer = o.status(&op, dh);
                    let (status, sense) = match &answer {
                        Some((status, sense)) => (*status as u8, Some(sense)),
                        None => (Status::Good as u8, None),
                    };
                    assert_eq!(Outcome::read(status, sense), o, "{o:?} {dh:?}");
                }
            }
            let (status, sense) = Outcome::MediumError
                .status(&op, DhCompletion::default())
                .unwrap();
            let asc = if write {
                Asc::WRITE_ERROR
            } else {
                Asc::UNRECOVERED_READ_ERROR
            };
            assert_eq!(
                (status, sense.key, sense.asc, sense.information),
                (
                    Status::CheckCondition,
                    SenseKey::MediumError,
                    asc,
                    Some(1 << 40)
                )
            );
        }
        // A status without sense that is not GOOD, or sense of anything else, is an error.
        assert_eq!(
            Outcome::read(Status::TaskSetFull as u8, None),
            Outcome::MediumError
        );
        let other = Sense::invalid_field_in_cdb(1, None);
        assert_eq!(
            Outcome::read(Status::CheckCondition as u8, Some(&other)),
            Outcome::MediumError
        );
    }
}
