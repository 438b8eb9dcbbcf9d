//! The mode parameters of a logical unit (SPC-5 §7.5): current, default and, on a logical unit
//! that can save them, saved values. The current values are the one place the write cache
//! (WCE), software write protect (SWP), D_SENSE and the CDL pages live; the core tells the
//! drive model and the data plane's operations what follows from them.

use crate::saved_mode;
use crate::Completion;
use scsi::command::{ModeSelect, ModeSense};
use scsi::mode::{self, ModeContext, ModeParameters};
use scsi::provisioning::Thresholds;
use scsi::{Asc, Sense, SenseKey};

pub(crate) struct ModeState {
    current: ModeParameters,
    default: ModeParameters,
    /// Saved values, on a logical unit that can save them (one with a device queue).
    saved: Option<ModeParameters>,
    /// MODE SELECT may change WCE; otherwise it stays at its default, whatever an initiator
    /// selects or a saved page says.
    wce_changeable: bool,
    thin_provisioning: bool,
    /// Where several gateways share the values (docs/gateways.md): the version of the
    /// cluster's copy these are, which a change must still find there to be written.
    shared: Option<u64>,
    /// The version this gateway wrote last.
    written: Option<u64>,
}

/// The facts of the logical unit that MODE SENSE and MODE SELECT report.
pub(crate) struct Medium {
    pub(crate) write_protected: bool,
    pub(crate) blocks: u64,
    pub(crate) block_size: u32,
}

/// A MODE SELECT that passed its checks, not yet in force.
pub(crate) struct Selected {
    pub(crate) parameters: ModeParameters,
    pub(crate) save: bool,
    /// It changes what every initiator relies on (WCE or SWP), now or as saved values: only
    /// a privileged nexus may.
    pub(crate) disruptive: bool,
}

/// A MODE SELECT whose values are being written to the gateways' copy: what it needs to be
/// checked again on a lost race (`attempts`: races lost so far).
pub(crate) struct SharedSelect {
    pub(crate) selected: Selected,
    pub(crate) cmd: ModeSelect,
    pub(crate) list: Vec<u8>,
    pub(crate) attempts: u32,
}

impl ModeState {
    /// The state at power on: `kept` holds the saved values of an earlier run, if any (on a
    /// logical unit that saves: `can_save`).
    pub(crate) fn new(
        default: ModeParameters,
        can_save: bool,
        kept: Option<&[u8]>,
        wce_changeable: bool,
        thin_provisioning: bool,
    ) -> Result<Self, String> {
        let saved = match (can_save, kept) {
            (false, _) => None,
            (true, None) => Some(default),
            (true, Some(bytes)) => {
                let saved = saved_mode::decode(bytes)?;
                // A file from another kind of LU (without CDL pages) does not apply.
                Some(if saved.cdl.is_some() { saved } else { default })
            }
        };
        let mut state = ModeState {
            current: default,
            default,
            saved,
            wce_changeable,
            thin_provisioning,
            shared: None,
            written: None,
        };
        state.current = state.pinned(state.power_on());
        Ok(state)
    }

    pub(crate) fn current(&self) -> &ModeParameters {
        &self.current
    }

    /// The values that become current at power on and reset: the saved ones if any.
    pub(crate) fn power_on(&self) -> ModeParameters {
        self.saved.unwrap_or(self.default)
    }

    /// `new` with what the configuration pins: WCE when it is not changeable (a saved page
    /// from before the pin does not turn the cache back on), and the Logical Block
    /// Provisioning page exactly when the unit is thin (a saved file from another
    /// provisioning neither adds nor drops it).
    fn pinned(&self, mut new: ModeParameters) -> ModeParameters {
        if !self.wce_changeable {
            new.wce = self.default.wce;
        }
        new.provisioning = match self.thin_provisioning {
            true => Some(new.provisioning.unwrap_or_default()),
            false => None,
        };
        new
    }

    /// Makes `new` current (pinned); returns the values it replaced.
    pub(crate) fn apply(&mut self, new: ModeParameters) -> ModeParameters {
        let pinned = self.pinned(new);
        std::mem::replace(&mut self.current, pinned)
    }

    /// The configuration's CDL pages changed: they become the default values, and the
    /// current and saved ones where those still were the old defaults (an initiator's own
    /// selection stays). Returns whether the current values changed.
    pub(crate) fn set_default_cdl(&mut self, pages: scsi::cdl::CdlPages) -> bool {
        let old = self.default.cdl.replace(pages);
        if let Some(saved) = self.saved.as_mut().filter(|s| s.cdl == old) {
            saved.cdl = Some(pages);
        }
        let follows = self.current.cdl == old && old != Some(pages);
        if follows {
            self.current.cdl = Some(pages);
        }
        follows
    }

    /// The saved values, on a logical unit that saves them.
    pub(crate) fn saved(&self) -> Option<ModeParameters> {
        self.saved
    }

    /// Where gateways share the values: the version of the cluster's copy these are.
    pub(crate) fn shared(&self) -> Option<u64> {
        self.shared
    }

    /// The gateways' copy was written: this is its version now.
    pub(crate) fn shared_as(&mut self, version: u64) {
        self.shared = Some(version);
        self.written = Some(version);
    }

    /// Whether the gateways' copy at `version` is what this gateway wrote last: a race lost
    /// to it was lost to this gateway's own write.
    pub(crate) fn written_here(&self, version: u64) -> bool {
        self.written == Some(version)
    }

    /// The gateways' copy of the current and saved values.
    pub(crate) fn shared_contents(&self) -> Vec<u8> {
        saved_mode::encode_shared(&self.current, self.saved.as_ref())
    }

    /// The gateways' values as the cluster holds them (`state.first`: at this logical
    /// unit's power on, so the saved ones): the saved values are taken, and the values to
    /// make current returned; `None` when `state` is not newer than what this one has.
    pub(crate) fn adopt(
        &mut self,
        state: &store::SharedState,
    ) -> Result<Option<ModeParameters>, String> {
        if self.shared.is_some_and(|v| v >= state.version) {
            return Ok(None);
        }
        self.shared = Some(state.version);
        let Some(bytes) = state.contents.as_deref() else {
            return Ok(None);
        };
        let (current, saved) = saved_mode::decode_shared(bytes)?;
        // A copy from another kind of logical unit (without CDL pages) does not apply.
        if let (Some(s), Some(new)) = (&mut self.saved, saved.filter(|s| s.cdl.is_some())) {
            *s = new;
        }
        Ok(Some(if state.first {
            self.power_on()
        } else {
            current
        }))
    }

    /// The saved values become `new` (MODE SELECT with SP = 1, once they are kept).
    pub(crate) fn save(&mut self, new: ModeParameters) {
        if let Some(s) = &mut self.saved {
            *s = new;
        }
    }

    fn context<'a>(&'a self, m: &'a Medium) -> ModeContext<'a> {
        ModeContext {
            current: &self.current,
            default: &self.default,
            saved: self.saved.as_ref(),
            write_protected: m.write_protected,
            wce_changeable: self.wce_changeable,
            number_of_blocks: m.blocks,
            block_length: m.block_size,
        }
    }

    /// MODE SENSE (SPC-5 §6.14): the pages asked for, appended to `data_in` (not truncated).
    pub(crate) fn sense(
        &self,
        m: &ModeSense,
        medium: &Medium,
        data_in: &mut Vec<u8>,
    ) -> Result<(), Sense> {
        mode::mode_sense(m, &self.context(medium), data_in)
    }

    /// MODE SELECT (SPC-5 §6.12): the whole list validated against the current values.
    pub(crate) fn select(
        &self,
        m: &ModeSelect,
        data_out: &[u8],
        medium: &Medium,
    ) -> Result<Selected, Completion> {
        let len = usize::from(m.parameter_list_length);
        let Some(data) = data_out.get(..len) else {
            return Err(Completion::check_condition(Sense::new(
                SenseKey::IllegalRequest,
                Asc::PARAMETER_LIST_LENGTH_ERROR,
            )));
        };
        let selected = mode::mode_select(m, data, &self.context(medium))
            .map_err(Completion::check_condition)?;
        let new = selected.parameters;
        // The write cache and software write protect apply to every initiator.
        let shared = |p: &ModeParameters| (p.wce, p.swp);
        let disruptive = shared(&new) != shared(&self.current)
            || (selected.save && self.saved.is_some_and(|s| shared(&s) != shared(&new)));
        Ok(Selected {
            parameters: new,
            save: selected.save,
            disruptive,
        })
    }

    /// The provisioning thresholds in force.
    pub(crate) fn thresholds(&self) -> Option<Thresholds> {
        self.current.provisioning
    }
}
