//! `stint serve`: build the targets from flags or `stint.toml`, print one libiscsi URL per LUN,
//! serve until Ctrl-C or SIGTERM, then flush every store.

use crate::config::{
    Config, DhForm, LunConfig, StoreKind, TargetConfig, DEFAULT_LISTEN, DEFAULT_RAM_SIZE,
    DEFAULT_TARGET,
};
use anyhow::Context;
use scsi::alua::AccessState;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(clap::Args)]
pub struct ServeArgs {
    /// Address to listen on (port 0 picks a free port).
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,
    /// A logical unit: ram:SIZE, file:PATH[:SIZE], block:DEVICE[:SIZE], rbd:POOL/IMAGE[:CONF]
    /// (a Ceph RBD image, user admin), or hdd (a 22 TB CDL hard disk, as
    /// examples/hdd-cdl.toml); repeatable (LUN 0, 1, ...). Default: ram:1GiB and hdd.
    #[arg(long = "lun", value_name = "SPEC", value_parser = LunConfig::parse_flag, conflicts_with = "config")]
    luns: Vec<LunConfig>,
    /// An initiator (by iSCSI name, or "*" for all) that may stop or eject a LUN, switch its
    /// write cache or write protection, or reset the target; repeatable. Default: none.
    #[arg(long = "privileged", value_name = "IQN", conflicts_with = "config",
          value_parser = privileged_name)]
    privileged: Vec<String>,
    /// Name of the target node for --lun.
    #[arg(long, value_name = "IQN", default_value = DEFAULT_TARGET, conflicts_with = "config",
          value_parser = iscsi_name)]
    target_name: String,
    /// Full description of targets and LUNs (docs/configuration.md).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Serve Prometheus metrics at http://ADDR/metrics (docs/metrics.md; port 0 picks a
    /// free port). Default: the file's `metrics`, else none.
    #[arg(long, value_name = "ADDR")]
    metrics: Option<SocketAddr>,
    /// The admin socket for `stint ctl` (docs/ctl.md), mode 0600; "none" turns it off.
    /// Default: the file's `admin_socket`, else $RUNTIME_DIRECTORY/admin.sock, else
    /// $XDG_RUNTIME_DIR/stint/PORT.sock, else /tmp/stint-UID/PORT.sock.
    #[arg(long, value_name = "PATH")]
    admin_socket: Option<PathBuf>,
    /// Log lines on stderr as text or one JSON object per line; RUST_LOG filters them
    /// (default "info": logins, refused logins, rejected PDUs, resets; "debug" adds every
    /// connection).
    #[arg(long, value_enum, default_value = "text")]
    log_format: LogFormat,
    /// Print the SCSI commands a LUN runs (from the command table, as REPORT SUPPORTED
    /// OPERATION CODES reports them) and exit.
    #[arg(long, conflicts_with_all = ["config", "luns", "listen"])]
    list_commands: bool,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

/// Structured logs on stderr (stdout carries the URLs), filtered by RUST_LOG.
fn init_logging(format: LogFormat) -> anyhow::Result<()> {
    use tracing_subscriber::EnvFilter;
    let filter = match std::env::var("RUST_LOG") {
        Ok(spec) => {
            EnvFilter::try_new(&spec).map_err(|e| anyhow::anyhow!("RUST_LOG={spec:?}: {e}"))?
        }
        Err(_) => EnvFilter::new("info"),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    // journald stamps each line itself.
    match (format, crate::service::journal_stderr()) {
        (LogFormat::Text, false) => builder.init(),
        (LogFormat::Text, true) => builder.without_time().init(),
        (LogFormat::Json, _) => builder.json().init(),
    }
    Ok(())
}

/// An iSCSI name flag, checked as RFC 7143 §4.2.7 writes them.
fn iscsi_name(name: &str) -> Result<String, String> {
    iscsi::name::check(name).map(|()| name.to_owned())
}

/// `--privileged`: an iSCSI name or "*".
fn privileged_name(name: &str) -> Result<String, String> {
    if name == "*" {
        return Ok(name.to_owned());
    }
    iscsi_name(name)
}

impl ServeArgs {
    fn into_config(self) -> anyhow::Result<Config> {
        let mut config = match self.config {
            Some(path) => Config::load(&path)?,
            None => {
                // What stint is for: a fast RAM disk beside a CDL hard disk.
                let luns = if self.luns.is_empty() {
                    vec![LunConfig::ram(DEFAULT_RAM_SIZE), LunConfig::hdd_cdl()]
                } else {
                    self.luns
                };
                let target = TargetConfig {
                    name: self.target_name,
                    alias: None,
                    allowed_initiators: vec![],
                    privileged_initiators: self.privileged,
                    luns,
                    initiator_classes: Default::default(),
                    chap: None,
                    mutual_chap: None,
                    alua_state: None,
                    gateway: None,
                    gateways: Vec::new(),
                    alua_explicit: false,
                };
                let config = Config {
                    listen: DEFAULT_LISTEN.parse()?,
                    metrics: None,
                    admin_socket: None,
                    nop_in_interval_s: crate::config::default_nop_in_interval_s(),
                    targets: vec![target],
                    discovery_chap: None,
                    discovery_mutual_chap: None,
                    base: PathBuf::from("."),
                };
                config.validate()?;
                config
            }
        };
        if let Some(listen) = self.listen {
            config.listen = listen;
        }
        if let Some(metrics) = self.metrics {
            config.metrics = Some(metrics);
        }
        Ok(config)
    }
}

/// A LUN as the server builds it: its unit, and, for an asynchronous data plane, the
/// completions to bind to it once it is served.
pub(crate) struct Built {
    pub unit: Arc<device::Unit>,
    pub completions: Option<iscsi::clock::Completions>,
}

pub(crate) fn build_lun(
    t: &TargetConfig,
    id: u64,
    lun: &LunConfig,
    base: &Path,
) -> anyhow::Result<Built> {
    let target = t.name.as_str();
    let device = lun.device(base)?;
    // A drive model's capacity is the LUN's unless `size` says less; a [queue] or [cdl]
    // table alone (the instant model) leaves the size to the store: a file's length, a
    // device's size (a RAM store has none, and takes the instant model's).
    let capacity = device.as_ref().map(|d| d.drive.capacity);
    let modelled = lun.drive.as_ref().and(capacity);
    let size = match lun.store {
        StoreKind::Ram => lun.size.or(capacity),
        StoreKind::File => lun.size.or(modelled),
        StoreKind::Block => lun.size,
        // The image's size, always (`rbd resize` changes it; `size` is refused).
        StoreKind::Rbd => None,
    };
    let at = || format!("target {target} LUN {id}");
    let mut block_size = lun.block_size();
    let mut physical_block_exponent = lun.physical_block_exponent.unwrap_or(0);
    // A drive model is fully provisioned, as the disks it models; a [queue] or [cdl] table
    // alone schedules commands for whatever store is behind it, thin where it deallocates.
    let mut thin_provisioning = lun.thin_provisioning.unwrap_or(lun.drive.is_none());
    // Saved mode parameters (the CDL pages a host saved with MODE SELECT SP=1) live beside the
    // data, so they survive a restart like the data does; so do persistent reservations a
    // host asked to persist through power loss (APTPL). A RAM LUN keeps them only while it
    // runs (REPORT CAPABILITIES: PTPL_C = 0).
    let beside = |path: &Path, suffix: &str| {
        let mut file = path.as_os_str().to_owned();
        file.push(suffix);
        PathBuf::from(file)
    };
    let mut kept = store::KeptFiles::default();
    if let (StoreKind::File, Some(path)) = (lun.store, &lun.path) {
        if device.is_some() {
            kept.mode_pages = Some(beside(path, ".modes"));
        }
        kept.reservations = Some(beside(path, ".pr"));
    }
    // Saved mode pages and reservations are not kept beside a device node (/dev is no place
    // for them): a block LUN keeps them while it runs, as a RAM LUN does. An RBD image's
    // are kept on this machine, in `state_dir`.
    if lun.store == StoreKind::Rbd {
        // An image's state files live on this machine, in state_dir (default: the
        // configuration file's directory; none for a --lun flag).
        let dir = match (&lun.state_dir, base == Path::new(".")) {
            (Some(dir), _) => Some(base.join(dir)),
            (None, false) => Some(base.to_path_buf()),
            (None, true) => None,
        };
        if let Some(dir) = dir {
            let ns = lun
                .namespace
                .as_deref()
                .map(|n| format!("{n}."))
                .unwrap_or_default();
            let stem = format!(
                "rbd.{}.{ns}{}",
                lun.pool.as_deref().unwrap_or_default(),
                lun.image.as_deref().unwrap_or_default()
            );
            if device.is_some() {
                kept.mode_pages = Some(dir.join(format!("{stem}.modes")));
            }
            kept.reservations = Some(dir.join(format!("{stem}.pr")));
        }
    }
    let (plane, len, completions): (Arc<dyn store::Plane>, u64, _) = match lun.store {
        StoreKind::Ram => {
            let ram = store::RamStore::new(size.unwrap_or(DEFAULT_RAM_SIZE)).with_context(at)?;
            let len = store::Store::len(&ram);
            let plane = store::InlinePlane::new(Arc::new(ram)).keeping(kept.clone());
            (Arc::new(plane), len, None)
        }
        StoreKind::File | StoreKind::Block => {
            let path = lun.path.as_deref().context("file store without path")?;
            let file = match (lun.store, lun.direct) {
                (StoreKind::Block, _) => {
                    let opened = open_block(lun, path, size, modelled).with_context(at)?;
                    block_size = opened.block_size;
                    physical_block_exponent = opened.physical_block_exponent;
                    thin_provisioning = opened.thin_provisioning;
                    opened.store
                }
                (_, true) => {
                    store::FileStore::open_direct(path, size, block_size).with_context(at)?
                }
                (_, false) => store::FileStore::open(path, size).with_context(at)?,
            };
            let len = store::Store::len(&file);
            if file.in_memory() && lun.store_delay_ms == 0 {
                // A file in memory (tmpfs) never waits for a device: its operations run on
                // the connection's thread, as a RAM store's do.
                tracing::info!(file = %path.display(), engine = "inline (a memory file system)", "data plane");
                let plane = store::InlinePlane::new(Arc::new(file)).keeping(kept.clone());
                (Arc::new(plane), len, None)
            } else {
                let completions = iscsi::clock::Completions::default();
                let delay = std::time::Duration::from_millis(lun.store_delay_ms);
                let options = store::Options {
                    kept: kept.clone(),
                    delay: (!delay.is_zero()).then_some(delay),
                    ..store::Options::default()
                };
                let plane = store::FilePlane::new(Arc::new(file), &options, completions.handler())
                    .with_context(at)?;
                (Arc::new(plane), len, Some(completions))
            }
        }
        StoreKind::Rbd => {
            let groups = t.port_groups();
            let gateway = groups.shared().then(|| store::RbdGateway {
                own: groups.own,
                all: groups.all.clone(),
            });
            let image = lun.rbd_target(base, gateway).with_context(at)?;
            let completions = iscsi::clock::Completions::default();
            let options = store::Options {
                kept: kept.clone(),
                ..store::Options::default()
            };
            let plane = store::RbdPlane::open(&image, &options, completions.handler())
                .with_context(|| format!("{}: rbd image {}/{}", at(), image.pool, image.image))?;
            let len = store::Plane::geometry(&plane).capacity;
            (Arc::new(plane), len, Some(completions))
        }
    };
    let mut config = device::LuConfig::new(target, id, len);
    config.block_size = block_size;
    config.physical_block_exponent = physical_block_exponent;
    config.serial = lun.serial.clone();
    // A drive model with a write cache puts its own setting here (LogicalUnit::new).
    config.write_cache = lun.write_cache.unwrap_or(true);
    config.write_cache_changeable = lun
        .write_cache_changeable
        .unwrap_or(lun.write_cache.unwrap_or(true));
    config.read_only = lun.read_only;
    config.removable = lun.removable;
    config.sanitize_pace = std::time::Duration::from_millis(lun.sanitize_pace_ms);
    config.thin_provisioning = thin_provisioning;
    config.inquiry_version = lun.inquiry_version;
    config.port_groups = t.port_groups();
    if let Some(state) = lun.alua_state.or(t.alua_state) {
        config.alua_state = state.0;
    } else if config.port_groups.shared() {
        config.alua_state = AccessState::ActiveNonOptimized;
    }
    if let Some(product) = &lun.product {
        config.product = product.clone();
    }
    config.saved_mode_path = kept.mode_pages.clone();
    config.persistent_reservations_path = kept.reservations.clone();
    let err = |e: &dyn std::fmt::Display| anyhow::anyhow!("target {target} LUN {id}: {e}");
    let queue = match device {
        None => None,
        Some(d) => {
            let parts = profile::DeviceParts {
                drive: &d.drive,
                queue: &d.queue,
                cdl: d.cdl,
                dh: match lun.dh_completion {
                    DhForm::CheckCondition => device::DhCompletion::CheckCondition,
                    DhForm::Good => device::DhCompletion::GoodWithSense,
                },
                seed: lun.seed,
            };
            config.medium_rotation_rate = d.drive.medium_rotation_rate();
            Some(parts.device_queue().map_err(|e| err(&e))?)
        }
    };
    let mut unit = device::Unit::build(config, plane, queue).map_err(|e| err(&e))?;
    if modelled.is_some() {
        unit = unit.fixed_size();
    }
    Ok(Built {
        unit: Arc::new(unit),
        completions,
    })
}

/// A target node as the server builds it: the node, its SCSI target device, and its LUNs.
pub(crate) struct BuiltNode {
    pub node: iscsi::TargetNode,
    pub target: Arc<device::Target>,
    pub luns: Vec<(u64, Built)>,
}

/// Builds target `t`'s node and opens its LUNs' stores (relative paths from `base`); its
/// units join `copy_manager`.
pub(crate) fn build_node(
    t: &TargetConfig,
    base: &Path,
    copy_manager: &Arc<device::CopyManager>,
) -> anyhow::Result<BuiltNode> {
    let mut luns = Vec::new();
    let mut units = Vec::new();
    let mut masks = Vec::new();
    for (i, lun) in t.luns.iter().enumerate() {
        let id = lun.id.unwrap_or(i as u64);
        let built = build_lun(t, id, lun, base)?;
        units.push((id, built.unit.clone()));
        if !lun.allowed_initiators.is_empty() {
            masks.push((id, lun.allowed_initiators.clone()));
        }
        luns.push((id, built));
    }
    let target = masks.into_iter().fold(
        device::Target::with_copy_manager(units, copy_manager.clone()),
        |t, (lun, initiators)| t.with_mask(lun, initiators),
    );
    let target = Arc::new(target);
    Ok(BuiltNode {
        node: node_of(t, target.clone(), base)?,
        target,
        luns,
    })
}

/// The iSCSI node of target `t` over its SCSI target device.
pub(crate) fn node_of(
    t: &TargetConfig,
    target: Arc<device::Target>,
    base: &Path,
) -> anyhow::Result<iscsi::TargetNode> {
    Ok(iscsi::TargetNode {
        retired: false,
        gateways: t
            .gateways
            .iter()
            .map(|g| iscsi::GatewayPortal {
                address: g.portal.to_string(),
                portal_group_tag: g.port_group,
                own: t.gateway.as_ref() == Some(&g.name),
            })
            .collect(),
        name: t.name.clone(),
        alias: t.alias.clone(),
        target,
        allowed_initiators: t.allowed_initiators.clone(),
        privileged_initiators: t.privileged_initiators.clone(),
        initiator_classes: t
            .initiator_classes
            .iter()
            .filter_map(|(name, class)| Some((name.clone(), qos::Class::from_name(class)?)))
            .collect(),
        chap: crate::config::chap(
            t.chap.as_ref(),
            t.mutual_chap.as_ref(),
            base,
            &format!("target {}", t.name),
        )?,
    })
}

/// A block LUN's store, and what its device decides of the LUN.
struct OpenedBlock {
    store: store::FileStore,
    block_size: u32,
    physical_block_exponent: u8,
    thin_provisioning: bool,
}

/// Opens a block LUN's device: `size` as configured (else the device's, at most a drive
/// model's capacity `modelled`), its logical block unless `block_size` is given, the
/// physical block exponent from its physical block unless given, thin provisioning where it
/// deallocates unless told.
fn open_block(
    lun: &LunConfig,
    path: &Path,
    size: Option<u64>,
    modelled: Option<u64>,
) -> anyhow::Result<OpenedBlock> {
    let mut store = store::FileStore::open_block(path, size, lun.block_size)?;
    let device = store
        .block_device()
        .cloned()
        .context("not a block device")?;
    let block_size = store.direct_block().unwrap_or(device.logical_block);
    if !matches!(block_size, 512 | 4096) {
        anyhow::bail!(
            "block_size: {} has {}-byte logical blocks, which a LUN cannot have (512 or 4096); \
             set block_size = 4096",
            path.display(),
            device.logical_block
        );
    }
    if let (None, Some(capacity)) = (size, modelled) {
        store = store.at_most(capacity);
    }
    tracing::info!(
        device = %path.display(),
        bytes = device.size,
        logical_block = device.logical_block,
        physical_block = device.physical_block,
        write_zeroes = device.write_zeroes,
        "block device"
    );
    Ok(OpenedBlock {
        store,
        block_size,
        physical_block_exponent: lun
            .physical_block_exponent
            .unwrap_or_else(|| physical_exponent(device.physical_block, block_size)),
        // LBPRZ holds either way (store::block::zero), but UNMAP is only thin where the
        // device deallocates (WRITE ZEROES); elsewhere it writes zeros. A drive model is
        // fully provisioned, as on other stores.
        thin_provisioning: lun
            .thin_provisioning
            .unwrap_or(device.write_zeroes && lun.drive.is_none()),
    })
}

/// LOGICAL BLOCKS PER PHYSICAL BLOCK EXPONENT (SBC-4 §5.20.2) of a LUN of `block`-byte
/// blocks on a device of `physical`-byte physical blocks: 3 for 512-byte blocks on 4 KiB
/// ones, 0 when the physical block is no larger (or not a power-of-two multiple).
fn physical_exponent(physical: u32, block: u32) -> u8 {
    match physical / block.max(1) {
        ratio if ratio > 1 && ratio.is_power_of_two() && physical.is_multiple_of(block) => {
            (ratio.trailing_zeros() as u8).min(15)
        }
        _ => 0,
    }
}

pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    if args.list_commands {
        print!("{}", command_list());
        return Ok(());
    }
    init_logging(args.log_format)?;
    let source = args.config.clone().map(|path| crate::reconfigure::Source {
        path,
        listen: args.listen,
        metrics: args.metrics,
    });
    let admin_flag = args.admin_socket.clone();
    let config = args.into_config()?;
    let admin_socket = crate::admin::path::Setting::from(
        admin_flag.as_deref(),
        config.admin_socket.as_deref(),
        &config.base,
    );
    let mut nodes = Vec::new();
    let mut urls = Vec::new();
    let mut bindings = Vec::new();
    // One copy manager for the process: EXTENDED COPY and ROD tokens reach every LUN of
    // every target.
    let copy_manager = Arc::new(device::CopyManager::default());
    let mut targets = Vec::new();
    for (node, t) in config.targets.iter().enumerate() {
        let built = build_node(t, &config.base, &copy_manager)?;
        for (id, lun) in built.luns {
            if let Some(c) = lun.completions {
                bindings.push((c, lun.unit, node));
            }
            urls.push((t.name.clone(), id));
        }
        targets.push(built.target);
        nodes.push(built.node);
    }
    let mut portal = iscsi::Portal::new(nodes);
    portal.nop_in_interval = (config.nop_in_interval_s > 0)
        .then(|| std::time::Duration::from_secs(config.nop_in_interval_s));
    portal.discovery_chap = crate::config::chap(
        config.discovery_chap.as_ref(),
        config.discovery_mutual_chap.as_ref(),
        &config.base,
        "discovery",
    )?;
    let authenticated = portal.nodes().iter().all(|n| n.chap.is_some());
    if !config.listen.ip().is_loopback() && !authenticated {
        tracing::warn!(
            "listening on {} with targets any initiator can log in to (no chap); anyone who \
             can reach this address can read and write their LUNs",
            config.listen
        );
    }

    // The units at the end, served or still leaving, whose stores are flushed then.
    let mut units = Vec::new();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .with_context(|| format!("cannot listen on {}", config.listen))?;
        let addr = listener.local_addr()?;
        let portal = Arc::new(portal);
        for (completions, unit, node) in &bindings {
            completions.bind(unit, &portal, *node);
        }
        let luns = urls.len();
        let live = Arc::new(crate::reconfigure::Live::new(
            portal.clone(),
            targets,
            copy_manager,
            config.clone(),
            source,
            config.metrics.is_some(),
        ));
        let metrics = match config.metrics {
            Some(at) => {
                let listener = tokio::net::TcpListener::bind(at)
                    .await
                    .with_context(|| format!("cannot listen on {at} for metrics"))?;
                let addr = listener.local_addr()?;
                for unit in live.units() {
                    unit.with(|core| core.keep_latencies());
                }
                if !addr.ip().is_loopback() {
                    tracing::warn!(
                        "serving metrics on {addr} without authentication: anyone who can \
                         reach it sees the targets' names and traffic"
                    );
                }
                tracing::info!(%addr, "metrics listening");
                println!("http://{addr}/metrics");
                let (live, portal) = (live.clone(), portal.clone());
                let scrape: crate::metrics::http::Scrape = Arc::new(move || {
                    let delivery = *portal.delivery.lock();
                    crate::metrics::encode(&live.units(), &delivery)
                });
                Some(tokio::spawn(crate::metrics::http::serve(listener, scrape)))
            }
            None => None,
        };
        // After the portal listens, so that the default path can name its port; before the
        // URLs, so that whoever waits for them can connect.
        let control = crate::control::Control::new(portal.clone(), live.clone());
        let admin = control.serve(&admin_socket, addr.port())?;
        tracing::info!(%addr, luns, "listening");
        for (name, lun) in &urls {
            println!("iscsi://{addr}/{name}/{lun}");
        }
        let reloads = tokio::spawn(reload_on_hangup(live.clone()));
        crate::service::ready(&format!("serving {luns} LUNs on {addr}"));
        let watchdog = crate::service::watchdog();
        let stop = async {
            shutdown_signal().await;
            crate::service::stopping();
        };
        let served = iscsi::server::serve_portal(listener, portal, stop).await;
        for task in [metrics, watchdog, Some(reloads)].into_iter().flatten() {
            task.abort();
        }
        // Stops accepting and removes the socket file.
        drop(admin);
        units = live.units_to_flush();
        served?;
        anyhow::Ok(())
    })?;
    for unit in units {
        flush(&unit).context("flushing stores at shutdown")?;
    }
    Ok(())
}

/// Makes everything written to `unit`'s store durable.
pub(crate) fn flush(unit: &device::Unit) -> anyhow::Result<()> {
    let mut none = Vec::new();
    let buffers = store::Buffers::Borrowed {
        data_in: &mut none,
        data_out: &[],
    };
    match unit.plane().submit(0, store::Op::Flush, buffers) {
        Some(store::Done::Failed(f)) => Err(anyhow::anyhow!("{}", f.error())),
        _ => Ok(()),
    }
}

/// The command table as a Markdown table: opcode, service action, name, CDB length, data
/// direction, and what a LU needs for the command or reports with it.
pub fn command_list() -> String {
    use std::fmt::Write;
    let mut out = String::from(
        "| opcode | service action | command | CDB | data | notes |\n|---|---|---|---|---|---|\n",
    );
    for c in scsi::COMMANDS {
        let sa = match c.service_action {
            None => String::new(),
            Some(sa) if c.opcode() == scsi::table::VARIABLE_LENGTH_CDB => format!("{sa:04X}h"),
            Some(sa) => format!("{sa:02X}h"),
        };
        let data = match c.direction {
            scsi::Direction::None => "none",
            scsi::Direction::In => "in",
            scsi::Direction::Out => "out",
        };
        let notes = match (c.cdl_page, c.thin_provisioning, c.explicit_alua) {
            (Some(page), _, _) => format!("DLD selects a {page:?} descriptor on a LU with CDL"),
            (None, true, _) => "thin-provisioned LUs only".to_owned(),
            (None, false, true) => "gateways' LUs only".to_owned(),
            (None, false, false) => String::new(),
        };
        let _infallible = writeln!(
            out,
            "| {:02X}h | {sa} | {} | {} | {data} | {notes} |",
            c.opcode(),
            c.name,
            c.cdb_length()
        );
    }
    let _infallible = writeln!(
        out,
        "\n{} commands (FreeBSD CTL serves 69).",
        scsi::COMMANDS.len()
    );
    out
}

/// SIGHUP re-reads the configuration file and applies the difference, as `stint ctl reload`
/// does; a configuration that does not apply is logged and the running one stays.
async fn reload_on_hangup(live: Arc<crate::reconfigure::Live>) {
    use tokio::signal::unix::{signal, SignalKind};
    let mut hangups = match signal(SignalKind::hangup()) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "no SIGHUP handler; reload with `stint ctl reload`");
            return;
        }
    };
    while hangups.recv().await.is_some() {
        tracing::info!("SIGHUP: reloading the configuration");
        let live = live.clone();
        match tokio::task::spawn_blocking(move || live.reload()).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::error!("reload refused, the running configuration stays: {e:#}"),
            Err(e) => tracing::error!(error = %e, "reload failed"),
        }
    }
}

/// Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        },
        Err(e) => {
            tracing::warn!(error = %e, "no SIGTERM handler; only Ctrl-C stops the server");
            if let Err(e) = tokio::signal::ctrl_c().await {
                tracing::error!(error = %e, "no Ctrl-C handler either; serving until killed");
                std::future::pending::<()>().await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn physical_exponent_counts_logical_blocks_per_physical_block() {
        use super::physical_exponent;
        assert_eq!(physical_exponent(4096, 512), 3, "512e");
        assert_eq!(physical_exponent(4096, 4096), 0, "4Kn");
        assert_eq!(physical_exponent(512, 512), 0);
        assert_eq!(
            physical_exponent(512, 4096),
            0,
            "a LUN block above the physical one"
        );
        assert_eq!(physical_exponent(65536, 512), 7);
        assert_eq!(physical_exponent(3 * 4096, 4096), 0, "not a power of two");
    }
}
