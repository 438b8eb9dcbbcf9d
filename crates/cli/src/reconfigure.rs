//! Changing a target while it serves (docs/ctl.md): `stint ctl reload` and SIGHUP re-read
//! stint.toml and apply the difference; `stint ctl lun add/remove` change one LUN.
//!
//! A change is planned in full before anything is applied: every new store is opened and
//! every new node built first, so a configuration that does not validate, a store that does
//! not open, or a change a running LUN cannot take is refused with its error and the running
//! configuration stays. Applying then cannot fail: nodes are swapped for new logins, units
//! are added to or removed from their targets (hosts get REPORTED LUNS DATA HAS CHANGED), a
//! removed unit's store closes once its last task ended.

use crate::config::{Config, LunConfig, TargetConfig};
use crate::serve::{build_lun, build_node, node_of, Built, BuiltNode};
use anyhow::{bail, Context};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

/// How often a removed unit is checked for its last task.
const LEAVING_POLL: Duration = Duration::from_millis(50);

/// The served configuration and what it built, as changes see them.
pub struct Live {
    portal: Arc<iscsi::Portal>,
    copy_manager: Arc<device::CopyManager>,
    /// Units added later keep latency histograms when a metrics endpoint serves them.
    keep_latencies: bool,
    /// Where `reload` reads the configuration; `None` for a server built from flags.
    source: Option<Source>,
    state: Mutex<State>,
}

struct State {
    /// The configuration as applied.
    config: Config,
    /// The SCSI target devices by node index (a retired node keeps its index).
    targets: Vec<Arc<device::Target>>,
}

/// The configuration file and the flags that override it.
pub struct Source {
    pub path: PathBuf,
    pub listen: Option<SocketAddr>,
    pub metrics: Option<SocketAddr>,
}

impl Source {
    pub fn load(&self) -> anyhow::Result<Config> {
        let mut config = Config::load(&self.path)?;
        if let Some(listen) = self.listen {
            config.listen = listen;
        }
        if let Some(metrics) = self.metrics {
            config.metrics = Some(metrics);
        }
        Ok(config)
    }
}

/// One planned change, ready to apply.
enum Step {
    AddTarget(Box<BuiltNode>),
    RetireTarget(usize),
    ReplaceNode(usize, Box<iscsi::TargetNode>),
    AddLun(usize, u64, Built, Vec<String>),
    RemoveLun(usize, u64),
    Mask(usize, u64, Vec<String>),
    Cdl(usize, u64, qos::CdlPages),
    Grow(usize, u64, u64),
}

impl Live {
    /// `targets` are the SCSI target devices of `portal`'s nodes, in their order.
    pub fn new(
        portal: Arc<iscsi::Portal>,
        targets: Vec<Arc<device::Target>>,
        copy_manager: Arc<device::CopyManager>,
        config: Config,
        source: Option<Source>,
        keep_latencies: bool,
    ) -> Live {
        Live {
            portal,
            copy_manager,
            keep_latencies,
            source,
            state: Mutex::new(State { config, targets }),
        }
    }

    /// The state; a reconfiguration that panicked left it as far as it got, which is what is
    /// served.
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The LUNs served now, in target then LUN order: target name, LUN, how the
    /// configuration describes it, and its unit.
    pub fn served(&self) -> Vec<(String, u64, LunConfig, Arc<device::Unit>)> {
        let state = self.lock();
        let nodes = self.portal.nodes();
        let mut served = Vec::new();
        for t in &state.config.targets {
            let Some(index) = served_index(&state.config, &nodes, &t.name) else {
                continue;
            };
            for (id, lun) in lun_ids(t) {
                if let Some(unit) = state.targets[index].lun(id) {
                    served.push((t.name.clone(), id, lun.clone(), unit));
                }
            }
        }
        served
    }

    /// Every logical unit that may hold data not yet durable: those served now, and removed
    /// ones still finishing their tasks (a stopping server flushes them all).
    pub fn units_to_flush(&self) -> Vec<Arc<device::Unit>> {
        let state = self.lock();
        let mut units: Vec<_> = state.targets.iter().flat_map(|t| t.leaving()).collect();
        drop(state);
        units.extend(self.units());
        units
    }

    /// The logical units of the targets served now.
    pub fn units(&self) -> Vec<Arc<device::Unit>> {
        let state = self.lock();
        let nodes = self.portal.nodes();
        state
            .targets
            .iter()
            .zip(nodes.iter())
            .filter(|(_, n)| !n.retired)
            .flat_map(|(t, _)| t.units().into_iter().map(|(_, u)| u))
            .collect()
    }

    /// Re-reads the configuration file and applies the difference; returns what changed.
    pub fn reload(&self) -> anyhow::Result<Vec<String>> {
        let Some(source) = &self.source else {
            bail!(
                "this server was started from flags, not a configuration file: nothing to re-read"
            );
        };
        let new = source.load()?;
        let mut state = self.lock();
        let steps = self.plan(&state, &new)?;
        let changes = self.apply(&mut state, steps);
        state.config = new;
        Ok(changes)
    }

    /// Adds the LUN `spec` (as `stint serve --lun` takes it) to `target`, at `id` or the
    /// lowest free LUN. A reload brings the configuration file's LUNs back.
    pub fn add_lun(
        &self,
        target: &str,
        id: Option<u64>,
        spec: &str,
    ) -> anyhow::Result<Vec<String>> {
        let mut lun = LunConfig::parse_flag(spec)?;
        let mut state = self.lock();
        let mut new = state.config.clone();
        let t = find(&new, target)?;
        let target_config = &mut new.targets[t];
        let used: Vec<u64> = lun_ids(target_config).keys().copied().collect();
        let id = id.unwrap_or_else(|| (0..).find(|n| !used.contains(n)).unwrap_or_default());
        lun.id = Some(id);
        target_config.luns.push(lun);
        new.validate()?;
        let steps = self.plan(&state, &new)?;
        let changes = self.apply(&mut state, steps);
        state.config = new;
        Ok(changes)
    }

    /// Resizes LUN `id` of `target` to `size` bytes (`None`: to what its medium holds now);
    /// a shrink needs `shrink`. The configuration applied remembers the new size, so a reload
    /// of a file that still has the old one asks for that change (and refuses a shrink).
    pub fn resize_lun(
        &self,
        target: &str,
        id: u64,
        size: Option<u64>,
        shrink: bool,
    ) -> anyhow::Result<Vec<String>> {
        let mut state = self.lock();
        let t = find(&state.config, target)?;
        let nodes = self.portal.nodes();
        let index =
            served_index(&state.config, &nodes, target).context("the target is retiring")?;
        let unit = state.targets[index].lun(id).with_context(|| {
            let ids: Vec<String> = lun_ids(&state.config.targets[t])
                .keys()
                .map(u64::to_string)
                .collect();
            format!(
                "target {target} has no LUN {id}; its LUNs are {}",
                ids.join(", ")
            )
        })?;
        let bytes = unit.resize(size, shrink)?;
        let config = &mut state.config.targets[t];
        for (i, lun) in config.luns.iter_mut().enumerate() {
            if lun.id.unwrap_or(i as u64) == id && lun.size.is_some() {
                lun.size = Some(bytes);
            }
        }
        let change = format!("target {target} LUN {id} is now {bytes} bytes");
        tracing::info!(change = %change, "reconfigured");
        Ok(vec![change])
    }

    /// Removes LUN `id` of `target`; its tasks finish first.
    pub fn remove_lun(&self, target: &str, id: u64) -> anyhow::Result<Vec<String>> {
        let mut state = self.lock();
        let mut new = state.config.clone();
        let t = find(&new, target)?;
        let luns = &mut new.targets[t].luns;
        // The others keep their numbers though their places move.
        for (i, lun) in luns.iter_mut().enumerate() {
            lun.id.get_or_insert(i as u64);
        }
        let before = luns.len();
        luns.retain(|l| l.id != Some(id));
        if luns.len() == before {
            bail!("target {target} has no LUN {id}");
        }
        if luns.is_empty() {
            bail!("LUN {id} is the last of target {target}; a target needs one");
        }
        let steps = self.plan(&state, &new)?;
        let changes = self.apply(&mut state, steps);
        state.config = new;
        Ok(changes)
    }

    /// What turns the running configuration into `new`, with every store opened; an error
    /// for a change a running server cannot make.
    fn plan(&self, state: &State, new: &Config) -> anyhow::Result<Vec<Step>> {
        let old = &state.config;
        restart_only(old, new)?;
        let nodes = self.portal.nodes();
        let mut steps = Vec::new();
        for t in &new.targets {
            let Some(index) = served_index(old, &nodes, &t.name) else {
                let built = build_node(t, &new.base, &self.copy_manager)?;
                steps.push(Step::AddTarget(Box::new(built)));
                continue;
            };
            let before = &old.targets[old_position(old, &t.name).unwrap_or(index)];
            if before.alua_state != t.alua_state {
                bail!("target {}: alua_state changes need a restart", t.name);
            }
            if (&before.gateway, &before.gateways, before.alua_explicit)
                != (&t.gateway, &t.gateways, t.alua_explicit)
            {
                bail!(
                    "target {}: gateway, gateways and alua_explicit changes need a restart",
                    t.name
                );
            }
            if node_changed(before, t) {
                let node = node_of(t, state.targets[index].clone(), &new.base)?;
                steps.push(Step::ReplaceNode(index, Box::new(node)));
            }
            let (was, is) = (lun_ids(before), lun_ids(t));
            for (id, lun) in &is {
                match was.get(id) {
                    None => {
                        if state.targets[index].is_leaving(*id) {
                            bail!(
                                "target {} LUN {id} was removed and is still finishing its tasks or closing its store; try again in a moment",
                                t.name
                            );
                        }
                        let built = build_lun(t, *id, lun, &new.base)?;
                        steps.push(Step::AddLun(
                            index,
                            *id,
                            built,
                            lun.allowed_initiators.clone(),
                        ));
                    }
                    Some(old_lun) => {
                        let changed = old_lun.changed_keys(lun);
                        // CDL descriptors change in place on a LU that has them.
                        let cdl_in_place = old_lun.cdl.is_some() && lun.cdl.is_some();
                        let in_place = |k: &str| match k {
                            "allowed_initiators" | "size" => true,
                            "cdl" => cdl_in_place,
                            _ => false,
                        };
                        let fixed: Vec<&str> =
                            changed.iter().copied().filter(|k| !in_place(k)).collect();
                        if !fixed.is_empty() {
                            bail!(
                                "target {} LUN {id}: {} cannot change while it serves; remove the \
                                 LUN (reload without it), then add it back",
                                t.name,
                                fixed.join(", ")
                            );
                        }
                        if let (true, Some(size)) = (changed.contains(&"size"), lun.size) {
                            let now = state.targets[index].lun(*id).map_or(0, |u| {
                                u.with(|core| core.blocks() * u64::from(core.block_size()))
                            });
                            if size < now {
                                bail!(
                                    "target {} LUN {id}: size {size} is less than its {now} bytes; a \
                                     reload does not shrink a LUN (the data past the new end would be \
                                     lost): `stint ctl lun resize {} {id} {size} --shrink` does",
                                    t.name,
                                    t.name
                                );
                            }
                            if size > now {
                                steps.push(Step::Grow(index, *id, size));
                            }
                        }
                        if changed.contains(&"allowed_initiators") {
                            steps.push(Step::Mask(index, *id, lun.allowed_initiators.clone()));
                        }
                        if changed.contains(&"cdl") {
                            let at = || format!("target {} LUN {id}", t.name);
                            let pages = lun
                                .device(&new.base)
                                .with_context(at)?
                                .with_context(at)?
                                .cdl;
                            pages
                                .validate()
                                .map_err(|e| anyhow::anyhow!("{}: cdl: {e}", at()))?;
                            steps.push(Step::Cdl(index, *id, pages));
                        }
                    }
                }
            }
            for id in was.keys().filter(|id| !is.contains_key(id)) {
                steps.push(Step::RemoveLun(index, *id));
            }
        }
        for t in &old.targets {
            if !new.targets.iter().any(|n| same_name(&n.name, &t.name)) {
                if let Some(index) = served_index(old, &nodes, &t.name) {
                    steps.push(Step::RetireTarget(index));
                }
            }
        }
        Ok(steps)
    }

    /// Applies planned steps; returns one line per change, each also logged.
    fn apply(&self, state: &mut State, steps: Vec<Step>) -> Vec<String> {
        let mut changes = Vec::new();
        let name = |index: usize| {
            self.portal
                .nodes()
                .get(index)
                .map(|n| n.name.clone())
                .unwrap_or_default()
        };
        for step in steps {
            let change = match step {
                Step::AddTarget(built) => {
                    let built = *built;
                    let index = state.targets.len();
                    let count = built.luns.len();
                    for (id, lun) in built.luns {
                        self.start(index, id, &lun);
                    }
                    let target_name = built.node.name.clone();
                    state.targets.push(built.target);
                    self.portal.update_nodes(|nodes| nodes.push(built.node));
                    format!("target {target_name} added with {count} LUNs")
                }
                Step::RetireTarget(index) => {
                    self.portal
                        .update_nodes(|nodes| nodes[index].retired = true);
                    let sessions = self.portal.sessions.logout_node(index);
                    let target = state.targets[index].clone();
                    for (id, _) in target.units() {
                        self.retire_lun(index, &target, id, name(index));
                    }
                    format!(
                        "target {} removed; {sessions} sessions asked to log out",
                        name(index)
                    )
                }
                Step::ReplaceNode(index, node) => {
                    self.portal.update_nodes(|nodes| nodes[index] = *node);
                    format!(
                        "target {}: access (initiators, CHAP, classes, alias) changed for new logins",
                        name(index)
                    )
                }
                Step::AddLun(index, id, lun, mask) => {
                    self.start(index, id, &lun);
                    match state.targets[index].insert(id, lun.unit, mask) {
                        Ok(()) => format!("target {} LUN {id} added", name(index)),
                        // Planned against the same state under the same lock: cannot happen.
                        Err(e) => format!("target {} LUN {id} not added: {e}", name(index)),
                    }
                }
                Step::RemoveLun(index, id) => {
                    let target = state.targets[index].clone();
                    self.retire_lun(index, &target, id, name(index));
                    format!(
                        "target {} LUN {id} removed (its store closes once its tasks end)",
                        name(index)
                    )
                }
                Step::Cdl(index, id, pages) => {
                    let unit = state.targets[index].lun(id);
                    let now = iscsi::clock::now();
                    match unit.map(|u| u.with(|core| core.set_cdl_defaults(now, pages))) {
                        Some(Ok(true)) => format!(
                            "target {} LUN {id}: new CDL descriptors for commands from now on",
                            name(index)
                        ),
                        Some(Ok(false)) => format!(
                            "target {} LUN {id}: new default CDL descriptors; the ones an \
                             initiator selected stay current",
                            name(index)
                        ),
                        // Validated when planned, on a LU that has CDL pages.
                        Some(Err(e)) => {
                            format!("target {} LUN {id}: CDL unchanged: {e}", name(index))
                        }
                        None => format!("target {} LUN {id} is gone", name(index)),
                    }
                }
                Step::Grow(index, id, size) => match state.targets[index].lun(id) {
                    Some(unit) => match unit.resize(Some(size), false) {
                        Ok(bytes) => {
                            format!("target {} LUN {id} grown to {bytes} bytes", name(index))
                        }
                        Err(e) => {
                            tracing::error!(lun = id, error = %e, "resize by reload failed");
                            format!("target {} LUN {id} not resized: {e}", name(index))
                        }
                    },
                    None => format!("target {} LUN {id} is gone", name(index)),
                },
                Step::Mask(index, id, initiators) => {
                    let who = if initiators.is_empty() {
                        "every initiator".to_owned()
                    } else {
                        initiators.join(", ")
                    };
                    state.targets[index].set_mask(id, initiators);
                    format!("target {} LUN {id} now visible to {who}", name(index))
                }
            };
            tracing::info!(change = %change, "reconfigured");
            changes.push(change);
        }
        if changes.is_empty() {
            changes.push("nothing changed".to_owned());
        }
        changes
    }

    /// Serves a new unit: completions bound, latencies kept, its driver started.
    fn start(&self, index: usize, id: u64, lun: &Built) {
        if let Some(c) = &lun.completions {
            c.bind(&lun.unit, &self.portal, index);
        }
        if self.keep_latencies {
            lun.unit.with(|core| core.keep_latencies());
        }
        if let Err(e) =
            self.portal
                .drivers
                .start(index, id, lun.unit.clone(), self.portal.router.clone())
        {
            tracing::error!(error = %e, lun = id, "no driver thread for a new LUN: its timed commands wait");
        }
    }

    /// Takes LUN `id` out of `target` now; once its last task ended its driver stops and its
    /// store is flushed and closed.
    fn retire_lun(&self, index: usize, target: &Arc<device::Target>, id: u64, name: String) {
        let Some(unit) = target.remove(id) else {
            return;
        };
        let (portal, target) = (self.portal.clone(), target.clone());
        let spawned = std::thread::Builder::new()
            .name("stint-lun-leaving".into())
            .spawn(move || {
                while !target.leaving_idle(id) {
                    std::thread::sleep(LEAVING_POLL);
                }
                // Stopped before the LUN is forgotten: a LUN added again at this number
                // starts its own driver only after that.
                portal.drivers.stop(index, id);
                target.forget(id);
                if let Err(e) = crate::serve::flush(&unit) {
                    tracing::error!(target = %name, lun = id, error = %e, "flushing a removed LUN's store");
                }
                tracing::info!(target = %name, lun = id, "removed LUN closed");
            });
        if let Err(e) = spawned {
            tracing::error!(error = %e, lun = id, "no thread to close a removed LUN; it stays open");
        }
    }
}

/// Settings a running server keeps until it restarts.
fn restart_only(old: &Config, new: &Config) -> anyhow::Result<()> {
    let mut fixed = Vec::new();
    if old.listen != new.listen {
        fixed.push("listen");
    }
    if old.metrics != new.metrics {
        fixed.push("metrics");
    }
    if old.nop_in_interval_s != new.nop_in_interval_s {
        fixed.push("nop_in_interval_s");
    }
    if old.discovery_chap != new.discovery_chap
        || old.discovery_mutual_chap != new.discovery_mutual_chap
    {
        fixed.push("discovery_chap");
    }
    if !fixed.is_empty() {
        bail!(
            "{} cannot change while the server runs; restart it for that",
            fixed.join(", ")
        );
    }
    Ok(())
}

/// Whether what a node checks at login (initiators, CHAP, classes, alias) differs.
fn node_changed(a: &TargetConfig, b: &TargetConfig) -> bool {
    a.alias != b.alias
        || a.allowed_initiators != b.allowed_initiators
        || a.privileged_initiators != b.privileged_initiators
        || a.initiator_classes != b.initiator_classes
        || a.chap != b.chap
        || a.mutual_chap != b.mutual_chap
}

/// The LUNs of `t` by number.
fn lun_ids(t: &TargetConfig) -> BTreeMap<u64, &LunConfig> {
    t.luns
        .iter()
        .enumerate()
        .map(|(i, l)| (l.id.unwrap_or(i as u64), l))
        .collect()
}

fn same_name(a: &str, b: &str) -> bool {
    a.eq_ignore_ascii_case(b)
}

/// The position of target `name` in `config`.
fn old_position(config: &Config, name: &str) -> Option<usize> {
    config.targets.iter().position(|t| same_name(&t.name, name))
}

/// The node index of target `name` if it is served (not retired).
fn served_index(config: &Config, nodes: &[iscsi::TargetNode], name: &str) -> Option<usize> {
    old_position(config, name)?;
    nodes
        .iter()
        .position(|n| !n.retired && same_name(&n.name, name))
}

/// The position of target `name` in `config`, or an error naming the targets there are.
fn find(config: &Config, name: &str) -> anyhow::Result<usize> {
    old_position(config, name).with_context(|| {
        let names: Vec<_> = config.targets.iter().map(|t| t.name.as_str()).collect();
        format!("no target {name}; there are {}", names.join(", "))
    })
}
