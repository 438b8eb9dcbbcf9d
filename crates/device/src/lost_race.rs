//! A command's write of a state the gateways share (docs/gateways.md: the persistent
//! reservations with the RESERVE (6)/(10) holder, the mode parameters) that lost its race:
//! the write found another version, so nothing was written. The state as the cluster holds
//! it becomes current here and the command is decided again on it, a bounded number of
//! times. PERSISTENT RESERVE OUT, RESERVE and RELEASE, and MODE SELECT follow this one rule.

use crate::logical_unit::{check, LogicalUnit, Ran};
use scsi::{Asc, Sense, SenseKey};

/// How many races with other gateways a command may lose before it gives up. A race lost
/// to a write of this gateway is not counted: the commands of one gateway run one after
/// the other in the end, and only the other gateways' could starve it.
pub(crate) const SHARE_ATTEMPTS: u32 = 16;

impl LogicalUnit {
    /// `command`'s write lost a race; `attempts`: the races counted so far. `reload` makes
    /// the state the write found current here. The race counts unless that state is the
    /// one this gateway wrote last (`own`). After [`SHARE_ATTEMPTS`] counted races, or when
    /// `reload` fails, the command ends: ABORTED COMMAND, which asks the host to send it
    /// again (SPC-6, sense key descriptions), or HARDWARE ERROR. Otherwise the races counted
    /// so far, for the command's next try.
    pub(crate) fn race_lost(
        &mut self,
        command: &str,
        own: bool,
        attempts: u32,
        reload: impl FnOnce(&mut Self) -> Result<(), String>,
    ) -> Result<u32, Ran> {
        let attempts = if own { attempts } else { attempts + 1 };
        if let Err(e) = reload(self) {
            tracing::error!(error = %e, command, "reading the state the gateways share");
            return Err(Ran::Done(check(Sense::new(
                SenseKey::HardwareError,
                Asc::INTERNAL_TARGET_FAILURE,
            ))));
        }
        if attempts >= SHARE_ATTEMPTS {
            tracing::warn!(attempts, command, "lost every race with other gateways");
            return Err(Ran::Done(check(Sense::new(
                SenseKey::AbortedCommand,
                Asc::NO_ADDITIONAL_SENSE,
            ))));
        }
        Ok(attempts)
    }
}
