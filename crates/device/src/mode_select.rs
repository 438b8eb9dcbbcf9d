//! MODE SELECT (SPC-5 §6.12) as it takes effect: the values checked against the current ones,
//! refused from a nexus that may not disrupt the others, kept (saved values, SP = 1) and, where
//! several gateways export the logical unit, written to the copy they share before they become
//! current, so that every gateway's nexuses see them and get MODE PARAMETERS CHANGED
//! (SPC-5 §7.5.2; docs/gateways.md).

use crate::block::share_failed;
use crate::logical_unit::{LogicalUnit, Ran};
use crate::mode_state::SharedSelect;
use crate::task::After;
use crate::{saved_mode, Ns, TaskId};
use scsi::command::ModeSelect;
use scsi::Asc;
use store::{Done, KeptFile, Op};

impl LogicalUnit {
    /// MODE SELECT from task `id` with its parameter list; `attempts`: races with other
    /// gateways' changes lost so far.
    pub(crate) fn mode_select(
        &mut self,
        now: Ns,
        id: TaskId,
        m: &ModeSelect,
        list: &[u8],
        attempts: u32,
    ) -> Ran {
        let nexus = match self.task_nexus(id) {
            Ok(n) => n,
            Err(ran) => return ran,
        };
        let selected = match self.mode.select(m, list, &self.mode_medium()) {
            Ok(s) => s,
            Err(c) => return Ran::Done(c),
        };
        if selected.disruptive && !nexus.privileged {
            return Ran::Done(self.refuse_unprivileged(nexus.id, "MODE SELECT"));
        }
        if let Some(version) = self.mode.shared() {
            let saved = self.mode.saved().map(|s| {
                if selected.save {
                    selected.parameters
                } else {
                    s
                }
            });
            let len = usize::from(m.parameter_list_length).min(list.len());
            return Ran::Io(
                Op::Share {
                    file: KeptFile::ModePages,
                    contents: saved_mode::encode_shared(&selected.parameters, saved.as_ref()),
                    version,
                },
                After::SharedMode(Box::new(SharedSelect {
                    selected,
                    cmd: *m,
                    list: list[..len].to_vec(),
                    attempts,
                })),
            );
        }
        if selected.save {
            if self.config().saved_mode_path.is_some() {
                return Ran::Io(
                    Op::Keep {
                        file: KeptFile::ModePages,
                        contents: Some(saved_mode::encode(&selected.parameters)),
                    },
                    After::ModeSave(Box::new(selected.parameters)),
                );
            }
            self.mode.save(selected.parameters);
        }
        self.mode_selected(now, nexus.id, selected.parameters)
    }

    /// The gateways' copy of the values, written or found changed by another gateway. On a
    /// lost race the list is checked again against the values as they are now, as long as
    /// [`LogicalUnit::race_lost`] allows.
    pub(crate) fn mode_select_shared(
        &mut self,
        now: Ns,
        id: TaskId,
        done: Done,
        select: SharedSelect,
    ) -> Ran {
        let SharedSelect {
            selected,
            cmd,
            list,
            attempts,
        } = select;
        match done {
            Done::Shared(version) => {
                self.mode.shared_as(version);
                if selected.save {
                    self.mode.save(selected.parameters);
                }
                // The other gateways hear of it before the command completes.
                self.announcements.push(crate::PeerEvent::ModeParameters);
                let nexus = self.tasks_owner(id).map_or(0, |(n, _)| n);
                self.mode_selected(now, nexus, selected.parameters)
            }
            Done::Stale(state) => {
                let own = self.mode.written_here(state.version);
                match self.race_lost("MODE SELECT", own, attempts, |lu| {
                    lu.reload_mode(now, &state)
                }) {
                    Ok(attempts) => self.mode_select(now, id, &cmd, &list, attempts),
                    Err(ran) => ran,
                }
            }
            other => Ran::Done(share_failed(&other)),
        }
    }

    /// The gateways' values as another gateway (or a lost race) left them: made current
    /// when newer than these, with MODE PARAMETERS CHANGED for every nexus here if they
    /// changed.
    pub(crate) fn reload_mode(
        &mut self,
        now: Ns,
        state: &store::SharedState,
    ) -> Result<(), String> {
        if let Some(current) = self.mode.adopt(state)? {
            if self.apply_mode(now, current) {
                self.unit_attentions
                    .raise(Asc::MODE_PARAMETERS_CHANGED, None);
            }
        }
        Ok(())
    }

    /// Where gateways share the mode parameters: the copy of this gateway's values to write
    /// to the cluster, and the version it must find there, after a change no command made
    /// (power on and reset make the saved values current).
    pub fn shared_mode(&self) -> Option<(Vec<u8>, u64)> {
        Some((self.mode.shared_contents(), self.mode.shared()?))
    }

    /// That copy's write ([`Self::shared_mode`]) ended: its version, or the newer values
    /// another gateway wrote meanwhile, which stand.
    pub fn shared_mode_written(&mut self, now: Ns, done: std::io::Result<Done>) {
        let result = match done {
            Ok(Done::Shared(version)) => {
                self.mode.shared_as(version);
                Ok(())
            }
            Ok(Done::Stale(state)) => self.reload_mode(now, &state),
            Ok(other) => Err(format!("{other:?}")),
            Err(e) => Err(e.to_string()),
        };
        if let Err(e) = result {
            tracing::warn!(error = %e, "writing the gateways' mode parameters");
        }
    }
}
