//! RESERVE and RELEASE (6)/(10) (SPC-2) as commands, and, where gateways share the
//! reservations (docs/gateways.md), the writes that make them every gateway's: a change is
//! written to the cluster guarded by the version it was decided on and current once written,
//! as a PERSISTENT RESERVE OUT's is; a race lost to another gateway reads the state again and
//! runs the command on it. The releases no command asks for (a logical unit reset here, the
//! holder's I_T nexus loss) are owed to the cluster and written by the unit's driver
//! ([`crate::Unit`]), outside any command.

use crate::event::TaskId;
use crate::logical_unit::{LogicalUnit, Ran};
use crate::reservations::{Spc2, Spc2Holder};
use crate::task::After;
use crate::{Completion, PeerEvent};
use store::Done;

impl LogicalUnit {
    /// RESERVE (`reserve`) or RELEASE (6)/(10) of task `id`; `attempts`: races lost to other
    /// gateways so far.
    pub(crate) fn reserve_or_release(&mut self, id: TaskId, reserve: bool, attempts: u32) -> Ran {
        let n = match self.task_nexus(id) {
            Ok(n) => n,
            Err(ran) => return ran,
        };
        match self.reservations.reserve_or_release(&n, reserve) {
            Spc2::Done(c) => {
                self.publish();
                Ran::Done(c)
            }
            Spc2::Share(op, holder) => Ran::Io(
                op,
                After::SharedReserve {
                    reserve,
                    holder,
                    attempts,
                },
            ),
        }
    }

    /// The gateways' state was written with the new RESERVE holder (`holder`), or the write
    /// lost a race (the command runs again on the state as it is), or failed.
    pub(crate) fn reserve_or_release_written(
        &mut self,
        id: TaskId,
        reserve: bool,
        holder: Option<Spc2Holder>,
        attempts: u32,
        done: Done,
    ) -> Ran {
        match done {
            Done::Shared(version) => {
                self.reservations.spc2_shared(holder, version);
                self.publish();
                // The other gateways hear of it before the command completes.
                self.announcements
                    .push(PeerEvent::Reservations(Default::default()));
                Ran::Done(Completion::GOOD)
            }
            Done::Stale(state) => {
                match self.reservations_race_lost(&state, attempts, "RESERVE or RELEASE") {
                    Ok(attempts) => self.reserve_or_release(id, reserve, attempts),
                    Err(ran) => ran,
                }
            }
            other => Ran::Done(crate::block::share_failed(&other)),
        }
    }

    /// A write of the gateways' reservations by `command` found another version
    /// (`state`): it becomes current here, and the race is counted as
    /// [`LogicalUnit::race_lost`] says (`attempts` so far).
    pub(crate) fn reservations_race_lost(
        &mut self,
        state: &store::SharedState,
        attempts: u32,
        command: &str,
    ) -> Result<u32, Ran> {
        let own = self.reservations.written_here(state.version);
        self.race_lost(command, own, attempts, |lu| {
            lu.reservations.reload(state)?;
            lu.publish();
            Ok(())
        })
    }

    /// Where gateways share the RESERVE (6)/(10) reservation: the write of a release this
    /// gateway owes (after a logical unit reset here, or the holder's I_T nexus loss), as
    /// contents and the version they replace, while it still has something to release.
    pub(crate) fn owed_release(&mut self) -> Option<(Vec<u8>, u64)> {
        self.reservations.owed()
    }

    /// The owed release was written at `version` (announced to the other gateways), lost a
    /// race to the state `Err(state)` (current here now; [`Self::owed_release`] again), or
    /// could not be written (`None`: no longer owed; the cluster's holder stays).
    pub(crate) fn owed_release_done(&mut self, done: Result<Option<u64>, &store::SharedState>) {
        match done {
            Ok(version) => {
                self.reservations.owed_written(version);
                if version.is_some() {
                    self.announcements
                        .push(PeerEvent::Reservations(Default::default()));
                }
            }
            Err(state) => {
                if let Err(e) = self.reservations.reload(state) {
                    tracing::error!(error = %e, "the gateways' persistent reservations");
                    self.reservations.owed_written(None);
                }
            }
        }
        self.publish();
    }
}
