//! `stint.toml`: targets, their logical units and stores (docs/configuration.md). Every field has a
//! working default; docs/configuration.md documents them. The quick-case CLI flags build the same structure.

use anyhow::{bail, Context};
use profile::{CdlSpec, DeviceSpec, DriveSetup, QueueSpec};
use scsi::alua::AccessState;
use serde::{Deserialize, Deserializer};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

pub const DEFAULT_LISTEN: &str = "127.0.0.1:3260";
pub const DEFAULT_TARGET: &str = "iqn.2026-11.dev.stint:target0";
pub const DEFAULT_RAM_SIZE: u64 = 1 << 30;

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Address the iSCSI portal listens on.
    #[serde(default = "default_listen")]
    pub listen: SocketAddr,
    /// Address of the Prometheus metrics endpoint (docs/metrics.md); none by default.
    pub metrics: Option<SocketAddr>,
    /// The admin socket `stint ctl` talks to (docs/ctl.md), relative to this file's
    /// directory; "" turns it off. Default: in the runtime directory, per portal port.
    pub admin_socket: Option<PathBuf>,
    /// Seconds a full-feature connection may stay silent before the target pings it with a
    /// NOP-In (RFC 7143 §11.19); one that does not answer within as long again is closed.
    /// 0: never ping.
    #[serde(default = "default_nop_in_interval_s")]
    pub nop_in_interval_s: u64,
    #[serde(default, rename = "target")]
    pub targets: Vec<TargetConfig>,
    /// CHAP that discovery sessions must pass, and the target's answer to mutual CHAP.
    pub discovery_chap: Option<ChapConfig>,
    pub discovery_mutual_chap: Option<ChapConfig>,
    /// Directory relative `profile` and `secret_file` paths are taken from: the config file's.
    #[serde(skip)]
    pub base: PathBuf,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetConfig {
    /// iSCSI qualified name of the target node (RFC 7143 §4.2.7).
    pub name: String,
    pub alias: Option<String>,
    /// Initiator names allowed to log in; empty means any.
    #[serde(default)]
    pub allowed_initiators: Vec<String>,
    /// Initiator names (or "*": all) that may stop or eject a LUN, switch its write cache or
    /// write protection, or reset the target; others are refused.
    #[serde(default)]
    pub privileged_initiators: Vec<String>,
    #[serde(default, rename = "lun")]
    pub luns: Vec<LunConfig>,
    /// Priority class of every command of an initiator on this target's LUNs with a device
    /// queue, e.g. `{ "iqn.1994-05.com.example:db" = "high" }`.
    #[serde(default)]
    pub initiator_classes: BTreeMap<String, String>,
    /// CHAP that initiators must pass to log in (RFC 7143 §12.1.3).
    pub chap: Option<ChapConfig>,
    /// What the target proves when an initiator asks for mutual CHAP.
    pub mutual_chap: Option<ChapConfig>,
    /// ALUA access state of the target's port group for its LUNs (implicit ALUA, SPC-4
    /// §5.16): "active/optimized" (default), "active/non-optimized", "standby" or
    /// "unavailable"; a LUN's own `alua_state` wins. With `gateways`, the state of the
    /// gateways that are not preferred: "active/non-optimized" (default) or "standby".
    pub alua_state: Option<AluaState>,
    /// This server's `name` among `gateways`, when several `stint serve` export the target's
    /// RBD images (docs/gateways.md).
    pub gateway: Option<String>,
    /// Every gateway exporting the target, this one included, the preferred one first.
    #[serde(default)]
    pub gateways: Vec<GatewayConfig>,
    /// Gateways accept SET TARGET PORT GROUPS: hosts choose the preferred gateway (explicit
    /// ALUA, TPGS 11b). Off by default: implicit ALUA only (docs/gateways.md says why).
    #[serde(default)]
    pub alua_explicit: bool,
}

/// One gateway of a target: a `stint serve` that exports the same RBD images.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct GatewayConfig {
    pub name: String,
    /// Its iSCSI portal, "address:port", as hosts reach it (SendTargets reports it).
    pub portal: std::net::SocketAddr,
    /// Its target port group (SPC-4 §5.16) and portal group tag (RFC 7143 §4.4.1), 1..=65535,
    /// one per gateway.
    pub port_group: u16,
}

impl TargetConfig {
    /// The target port groups its LUNs are reached through: every gateway's, or the lone
    /// server's.
    pub fn port_groups(&self) -> device::PortGroups {
        let own = self.gateway.as_ref().and_then(|me| {
            self.gateways
                .iter()
                .find(|g| &g.name == me)
                .map(|g| g.port_group)
        });
        match own {
            Some(own) => device::PortGroups {
                own,
                all: self.gateways.iter().map(|g| g.port_group).collect(),
                explicit: self.alua_explicit,
            },
            None => device::PortGroups::default(),
        }
    }

    /// The checks of `gateway` and `gateways` (`at` names the target).
    fn validate_gateways(&self, at: &str) -> anyhow::Result<()> {
        let Some(me) = &self.gateway else {
            if self.alua_explicit {
                bail!("{at}: alua_explicit applies to gateways only (SET TARGET PORT GROUPS chooses among them); this target has no gateway");
            }
            if !self.gateways.is_empty() {
                bail!("{at}: gateways lists this target's gateways but gateway does not say which one this server is");
            }
            return Ok(());
        };
        if self.gateways.len() < 2 {
            bail!("{at}: gateway {me:?} needs a gateways list of at least two (a target one server exports needs neither key)");
        }
        let mut names = std::collections::BTreeSet::new();
        let mut groups = std::collections::BTreeSet::new();
        let mut portals = std::collections::BTreeSet::new();
        for g in &self.gateways {
            if !names.insert(&g.name) {
                bail!("{at}: gateway name {:?} is listed twice", g.name);
            }
            if g.port_group == 0 {
                bail!("{at}: gateway {:?}: port_group must be 1..=65535", g.name);
            }
            if !groups.insert(g.port_group) {
                bail!(
                    "{at}: port_group {} is given to two gateways; each needs its own",
                    g.port_group
                );
            }
            if !portals.insert(g.portal) {
                bail!("{at}: portal {} is given to two gateways", g.portal);
            }
        }
        if !self.gateways.iter().any(|g| &g.name == me) {
            bail!("{at}: gateway {me:?} is not among the names in gateways");
        }
        // the preferred gateway is active/optimized; alua_state is the others' state, in
        // which they must still answer (docs/gateways.md)
        let states = std::iter::once(self.alua_state).chain(self.luns.iter().map(|l| l.alua_state));
        if let Some(AluaState(s)) = states.flatten().find(|AluaState(s)| {
            !matches!(s, AccessState::ActiveNonOptimized | AccessState::Standby)
        }) {
            bail!("{at}: alua_state {:?} does not apply to gateways: it is the state of the gateways that are not preferred, \"active/non-optimized\" (the default) or \"standby\"", s.name());
        }
        if let Some(i) = self.luns.iter().position(|l| l.store != StoreKind::Rbd) {
            bail!("{at}.lun[{i}]: a target with gateways exports rbd stores only (the image is what the gateways share)");
        }
        Ok(())
    }
}

/// An ALUA access state by its name, as `alua_state` takes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AluaState(pub scsi::alua::AccessState);

impl<'de> Deserialize<'de> for AluaState {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        name.parse()
            .map(AluaState)
            .map_err(serde::de::Error::custom)
    }
}

/// A CHAP name and its secret, given inline or in a file only its owner can read.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ChapConfig {
    pub user: String,
    pub secret: Option<String>,
    pub secret_file: Option<PathBuf>,
}

/// Longest serial: what the T10 vendor ID designator of VPD 83h carries whole.
const MAX_SERIAL_LEN: usize = 64;

/// Shortest secret taken: 96 bits, as RFC 7143 §12.1.3 asks of CHAP secrets.
const MIN_SECRET_LEN: usize = 12;

impl ChapConfig {
    /// The name and secret; `at` names the table in errors.
    fn credentials(&self, base: &Path, at: &str) -> anyhow::Result<iscsi::chap::Credentials> {
        if self.user.is_empty() {
            bail!("{at}: user must not be empty");
        }
        let secret = match (&self.secret, &self.secret_file) {
            (Some(s), None) => s.clone().into_bytes(),
            (None, Some(file)) => {
                use std::os::unix::fs::PermissionsExt;
                let path = base.join(file);
                let mode = std::fs::metadata(&path)
                    .with_context(|| format!("{at}: secret_file {}", path.display()))?
                    .permissions()
                    .mode();
                if mode & 0o004 != 0 {
                    bail!(
                        "{at}: secret_file {} is readable by everyone (mode {:o}); \
                         `chmod o-r` it",
                        path.display(),
                        mode & 0o777
                    );
                }
                let text = std::fs::read_to_string(&path)
                    .with_context(|| format!("{at}: secret_file {}", path.display()))?;
                text.trim_end_matches(['\n', '\r']).as_bytes().to_vec()
            }
            _ => bail!("{at}: give exactly one of secret and secret_file"),
        };
        if secret.len() < MIN_SECRET_LEN {
            bail!(
                "{at}: the secret has {} bytes; CHAP secrets need at least {MIN_SECRET_LEN} \
                 (96 bits, RFC 7143 §12.1.3)",
                secret.len()
            );
        }
        Ok(iscsi::chap::Credentials {
            user: self.user.clone(),
            secret,
        })
    }
}

/// The CHAP a target (or discovery) requires, from its `chap` and `mutual_chap` tables.
pub fn chap(
    chap: Option<&ChapConfig>,
    mutual: Option<&ChapConfig>,
    base: &Path,
    at: &str,
) -> anyhow::Result<Option<iscsi::chap::Chap>> {
    let Some(c) = chap else {
        if mutual.is_some() {
            bail!("{at}: mutual_chap needs chap (the initiator authenticates first)");
        }
        return Ok(None);
    };
    let initiator = c.credentials(base, &format!("{at}.chap"))?;
    let target = match mutual {
        Some(m) => Some(m.credentials(base, &format!("{at}.mutual_chap"))?),
        None => None,
    };
    if target
        .as_ref()
        .is_some_and(|t| t.secret == initiator.secret)
    {
        bail!("{at}: mutual_chap must not use the initiator's secret (RFC 7143 §12.1.3)");
    }
    Ok(Some(iscsi::chap::Chap { initiator, target }))
}

/// The longest `store_delay_ms`: beyond it a host's command timeouts (30 s in Linux) and
/// stint's own would fire before a queue of commands drains.
const MAX_STORE_DELAY_MS: u64 = 10_000;

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LunConfig {
    /// Logical unit number; defaults to the position in the list.
    pub id: Option<u64>,
    pub store: StoreKind,
    /// Backing file (store = "file"; created sparse when missing) or block device (store =
    /// "block").
    pub path: Option<PathBuf>,
    /// Open the file with O_DIRECT: reads and writes bypass the page cache (store = "file";
    /// a block store always does).
    #[serde(default)]
    pub direct: bool,
    /// Hold every completion of the file store back until this long after its submission:
    /// a store slower than the CPU, for tests and benchmarks (store = "file" or "block").
    #[serde(default)]
    pub store_delay_ms: u64,
    /// Capacity, e.g. "1GiB" or a byte count; default: a drive model's capacity, else the
    /// store's (the file's length, the block device's size).
    #[serde(default, deserialize_with = "size_opt")]
    pub size: Option<u64>,
    /// Logical block length; default 512, or a block device's logical block size. Read it
    /// with [`LunConfig::block_size`].
    pub block_size: Option<u32>,
    /// Logical blocks per physical block exponent (512e: 3 for 4 KiB physical blocks);
    /// default 0, or what a block device's physical block makes it.
    pub physical_block_exponent: Option<u8>,
    /// INQUIRY PRODUCT IDENTIFICATION (16 ASCII characters at most).
    pub product: Option<String>,
    /// Unit serial number (VPD 80h); also seeds the device identifier (VPD 83h).
    pub serial: Option<String>,
    /// Caching mode page WCE at power on: false makes every write durable before GOOD. On a
    /// LUN whose drive model has a write cache (hdd) it is also the model's cache; default:
    /// the model's setting there, true elsewhere.
    pub write_cache: Option<bool>,
    /// Whether an initiator may change WCE with MODE SELECT; default: unless `write_cache` is
    /// false, so a LUN configured write-through stays so.
    pub write_cache_changeable: Option<bool>,
    /// LUN masking: the initiators that may see this LUN (REPORT LUNS) and use it; empty: all
    /// that may log in to the target.
    #[serde(default)]
    pub allowed_initiators: Vec<String>,
    #[serde(default)]
    pub read_only: bool,
    /// Removable medium (RMB): START STOP UNIT with LOEJ ejects and loads it.
    #[serde(default)]
    pub removable: bool,
    /// The least time in milliseconds a SANITIZE takes, so that a test can watch one in
    /// progress (libiscsi's Sanitize.Reset); 0: as fast as the store goes.
    #[serde(default)]
    pub sanitize_pace_ms: u64,
    /// Thin provisioning (UNMAP, WRITE SAME with UNMAP, LBPME): default on for a LUN without
    /// a drive model, off for a modelled drive (hard disks are fully provisioned).
    pub thin_provisioning: Option<bool>,
    /// INQUIRY VERSION: 0Dh (SPC-6) by default, which Linux requires before it probes CDL
    /// (it skips devices below SPC-5); 06h for initiators that reject later versions (libiscsi
    /// 1.19).
    #[serde(default = "default_inquiry_version")]
    pub inquiry_version: u8,
    /// A drive model times the LUN's medium commands (`[target.lun.drive]`, the vocabulary of
    /// an experiment file's `[drive]`). Its capacity is the LUN's default size.
    pub drive: Option<DeviceSpec>,
    /// The device queue (`[target.lun.queue]`, as an experiment's `[queue]`).
    pub queue: Option<QueueSpec>,
    /// Command Duration Limits descriptors (`[target.lun.cdl]`, as an experiment's `[cdl]`).
    pub cdl: Option<CdlSpec>,
    /// How a CDL policy Dh completion is sent: "check-condition" (Linux reports -ETIME) or
    /// "good" (GOOD with sense, as SPC-6 writes it; a Linux iSCSI host sees plain success).
    #[serde(default)]
    pub dh_completion: DhForm,
    /// Seed of the drive's fault set.
    #[serde(default)]
    pub seed: u64,
    /// ALUA access state of this LUN through the target's port group (as the target's
    /// `alua_state`, which it overrides).
    pub alua_state: Option<AluaState>,
    // --- store = "rbd" (a Ceph RBD image through librbd; docs/configuration.md) ---
    /// The image's pool.
    pub pool: Option<String>,
    /// The image (created beforehand with `rbd create`; its size is the LUN's).
    pub image: Option<String>,
    /// The ceph.conf to read; default: librados's search (`$CEPH_CONF`, /etc/ceph/ceph.conf).
    pub conf: Option<PathBuf>,
    /// The cephx user, without "client." (default "admin").
    pub user: Option<String>,
    /// The user's keyring; default: the one ceph.conf names.
    pub keyring: Option<PathBuf>,
    /// The RADOS namespace of the image within its pool.
    pub namespace: Option<String>,
    /// Where the LUN keeps its saved mode pages and APTPL reservations
    /// (`rbd.<pool>.<image>.modes`, `.pr`); default: the configuration file's directory.
    pub state_dir: Option<PathBuf>,
}

/// `dh_completion`.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum DhForm {
    #[default]
    CheckCondition,
    Good,
}

/// The device queue a LUN's description asks for, ready to build.
pub struct DeviceDescription {
    pub drive: DriveSetup,
    pub queue: QueueSpec,
    pub cdl: qos::CdlPages,
}

#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum StoreKind {
    Ram,
    File,
    /// A block device, opened O_DIRECT and O_EXCL (`store::FileStore::open_block`).
    Block,
    /// A Ceph RBD image through librbd (`store::RbdPlane`).
    Rbd,
}

pub fn default_nop_in_interval_s() -> u64 {
    30
}
fn default_listen() -> SocketAddr {
    DEFAULT_LISTEN.parse().expect("valid default address")
}
/// The logical block of a LUN that sets none and is not on a block device.
const DEFAULT_BLOCK_SIZE: u32 = 512;
fn default_inquiry_version() -> u8 {
    0x0D
}

/// Parses a capacity as `truncate -s` reads one: "1GiB" and "1G" are 2^30 bytes, "1GB" is
/// 10^9 (as disk vendors count), a plain number is bytes.
pub fn parse_size(s: &str) -> anyhow::Result<u64> {
    let text = s.trim();
    // A bare multiple letter ("1G") is binary; with a "B" ("1GB") it is decimal, "iB" binary.
    let config =
        if text.ends_with(|c: char| c.is_ascii_alphabetic() && !c.eq_ignore_ascii_case(&'b')) {
            parse_size::Config::new().with_binary()
        } else {
            parse_size::Config::new()
        };
    config.parse_size(text).map_err(|e| {
        anyhow::anyhow!(
            "invalid size {s:?}: {e} (a byte count or a number with a unit: 512MiB, 1GiB or 1G \
             = 2^30 bytes, 1GB = 10^9 bytes)"
        )
    })
}

/// A `size`: a non-negative byte count or a string for [`parse_size`].
fn size_opt<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    struct Size;
    impl serde::de::Visitor<'_> for Size {
        type Value = u64;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a byte count or a size such as \"1GiB\"")
        }
        fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<u64, E> {
            Ok(n)
        }
        fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<u64, E> {
            u64::try_from(n).map_err(|_| E::custom(format!("size must not be negative, not {n}")))
        }
        fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<u64, E> {
            parse_size(s).map_err(E::custom)
        }
    }
    d.deserialize_any(Size).map(Some)
}

/// The configuration `--lun hdd` and `stint serve` without arguments use for a CDL hard
/// disk: the same file docs/cdl.md documents.
const HDD_CDL_EXAMPLE: &str = include_str!("../../../examples/hdd-cdl.toml");

impl LunConfig {
    /// The keys whose values differ between `self` and `other`, the LUN number aside.
    pub fn changed_keys(&self, other: &LunConfig) -> Vec<&'static str> {
        // The pattern names every field (no `..`), so a new key cannot be missed here.
        macro_rules! changed {
            ($($key:ident),*) => {{
                let LunConfig { id: _, $($key),* } = self;
                let mut changed = Vec::new();
                $(if *$key != other.$key {
                    changed.push(stringify!($key));
                })*
                changed
            }};
        }
        changed!(
            store,
            path,
            direct,
            store_delay_ms,
            size,
            block_size,
            physical_block_exponent,
            product,
            serial,
            write_cache,
            write_cache_changeable,
            allowed_initiators,
            read_only,
            removable,
            sanitize_pace_ms,
            thin_provisioning,
            inquiry_version,
            drive,
            queue,
            cdl,
            dh_completion,
            seed,
            alua_state,
            pool,
            image,
            conf,
            user,
            keyring,
            namespace,
            state_dir
        )
    }

    /// The logical block length as configured, or the default (512); a block store without
    /// `block_size` takes the device's instead (`serve`).
    pub fn block_size(&self) -> u32 {
        self.block_size.unwrap_or(DEFAULT_BLOCK_SIZE)
    }

    /// Whether the LUN has a device queue (a drive model, a queue or CDL pages).
    pub fn has_device_queue(&self) -> bool {
        self.drive.is_some() || self.queue.is_some() || self.cdl.is_some()
    }

    /// The LUN's device queue, if it has one; relative profile paths are taken from `base`.
    pub fn device(&self, base: &Path) -> anyhow::Result<Option<DeviceDescription>> {
        if !self.has_device_queue() {
            return Ok(None);
        }
        let spec = self.drive.clone().unwrap_or_else(|| DeviceSpec {
            model: "instant".into(),
            profile: None,
            write_cache: None,
            capacity: None,
            faults: None,
        });
        let mut drive = spec.prepare(base)?;
        // WCE and the model's write cache are one setting: either key gives it.
        if let Some(wce) = self.write_cache {
            if let Some(model) = spec.write_cache.filter(|model| *model != wce) {
                bail!(
                    "write_cache = {wce} and drive.write_cache = {model} disagree (both are the \
                     Caching mode page's WCE): give one of them"
                );
            }
            drive.set_write_cache(wce);
        }
        // The LUN's weak sectors are where its own seed puts them, whoever runs the drive.
        drive.fault_seed = Some(self.seed);
        let queue = self.queue.clone().unwrap_or_default();
        let cdl = self.cdl.clone().unwrap_or_default().pages()?;
        queue.config(cdl)?;
        queue.dld_classes()?;
        Ok(Some(DeviceDescription { drive, queue, cdl }))
    }

    /// A CDL hard disk on a sparse RAM store of the drive's capacity: the LUN of
    /// examples/hdd-cdl.toml.
    pub fn hdd_cdl() -> Self {
        let example: Config =
            toml::from_str(HDD_CDL_EXAMPLE).expect("examples/hdd-cdl.toml parses");
        example
            .targets
            .into_iter()
            .flat_map(|t| t.luns)
            .next()
            .expect("examples/hdd-cdl.toml has a LUN")
    }

    pub fn ram(size: u64) -> Self {
        LunConfig {
            id: None,
            store: StoreKind::Ram,
            path: None,
            direct: false,
            store_delay_ms: 0,
            size: Some(size),
            block_size: None,
            physical_block_exponent: None,
            product: None,
            serial: None,
            write_cache: None,
            write_cache_changeable: None,
            allowed_initiators: Vec::new(),
            read_only: false,
            removable: false,
            sanitize_pace_ms: 0,
            thin_provisioning: None,
            inquiry_version: default_inquiry_version(),
            drive: None,
            queue: None,
            cdl: None,
            dh_completion: DhForm::default(),
            seed: 0,
            alua_state: None,
            pool: None,
            image: None,
            conf: None,
            user: None,
            keyring: None,
            namespace: None,
            state_dir: None,
        }
    }

    /// `--lun ram:SIZE`, `--lun file:PATH[:SIZE]`, `--lun block:DEVICE[:SIZE]`, or `--lun hdd`
    /// (the CDL hard disk of examples/hdd-cdl.toml on a sparse RAM store).
    pub fn parse_flag(spec: &str) -> anyhow::Result<Self> {
        if spec == "hdd" {
            return Ok(LunConfig::hdd_cdl());
        }
        match spec.split_once(':') {
            Some(("ram", size)) => Ok(LunConfig::ram(parse_size(size)?)),
            Some((kind @ ("file" | "block"), rest)) => {
                // A trailing ":SIZE" is a size only if it parses as one, so paths may contain ':'.
                let (path, size) = match rest.rsplit_once(':') {
                    Some((p, s)) if parse_size(s).is_ok() => (p, Some(parse_size(s)?)),
                    _ => (rest, None),
                };
                if path.is_empty() {
                    bail!("--lun {kind}:PATH[:SIZE] needs a path");
                }
                Ok(LunConfig {
                    store: match kind {
                        "file" => StoreKind::File,
                        _ => StoreKind::Block,
                    },
                    path: Some(path.into()),
                    size,
                    ..LunConfig::ram(0)
                })
            }
            Some(("rbd", rest)) => LunConfig::parse_rbd_flag(rest),
            _ => bail!(
                "invalid --lun {spec:?}: expected ram:SIZE, file:PATH[:SIZE], block:DEVICE[:SIZE], \
                 rbd:POOL/IMAGE[:CONF] or hdd"
            ),
        }
    }
}

/// store = "rbd": its flag, its checks and the plane's target, apart from the other stores.
impl LunConfig {
    /// `--lun rbd:POOL/IMAGE[:CONF]`, as the user "admin".
    fn parse_rbd_flag(rest: &str) -> anyhow::Result<Self> {
        let (image, conf) = match rest.split_once(':') {
            Some((image, conf)) => (image, Some(PathBuf::from(conf))),
            None => (rest, None),
        };
        match image.split_once('/') {
            Some((pool, image)) if !pool.is_empty() && !image.is_empty() => Ok(LunConfig {
                store: StoreKind::Rbd,
                size: None,
                pool: Some(pool.into()),
                image: Some(image.into()),
                conf,
                ..LunConfig::ram(0)
            }),
            _ => bail!("--lun rbd:POOL/IMAGE[:CONF] needs a pool and an image, not {rest:?}"),
        }
    }

    /// The rbd keys: all of pool and image on an rbd store, none of them elsewhere.
    fn validate_rbd(&self, at: &str) -> anyhow::Result<()> {
        let keys = [
            ("pool", self.pool.is_some()),
            ("image", self.image.is_some()),
            ("conf", self.conf.is_some()),
            ("user", self.user.is_some()),
            ("keyring", self.keyring.is_some()),
            ("namespace", self.namespace.is_some()),
            ("state_dir", self.state_dir.is_some()),
        ];
        if self.store != StoreKind::Rbd {
            if let Some((key, _)) = keys.iter().find(|k| k.1) {
                bail!("{at}: {key} applies to an rbd store only");
            }
            return Ok(());
        }
        let named = |what: &str, v: &Option<String>| match v.as_deref() {
            None | Some("") => bail!("{at}: an rbd store needs {what}"),
            Some(s) if s.contains(['/', '@', '\0']) => {
                bail!("{at}: {what} {s:?} must not contain '/', '@' or NUL")
            }
            Some(_) => Ok(()),
        };
        named("a pool", &self.pool)?;
        named("an image", &self.image)?;
        if self.path.is_some() {
            bail!("{at}: an rbd store has no path (it names pool and image)");
        }
        if self.size.is_some() {
            bail!("{at}: an rbd store takes its size from the image (rbd resize changes it)");
        }
        Ok(())
    }

    /// The image an rbd LUN names, with relative paths taken from `base`.
    /// `gateway`: this server among the gateways that export the image, if several do.
    pub fn rbd_target(
        &self,
        base: &Path,
        gateway: Option<store::RbdGateway>,
    ) -> anyhow::Result<store::RbdTarget> {
        let path = |p: &Option<PathBuf>| p.as_ref().map(|p| base.join(p).display().to_string());
        Ok(store::RbdTarget {
            conf: path(&self.conf),
            user: self.user.clone().unwrap_or_else(|| "admin".into()),
            keyring: path(&self.keyring),
            pool: self.pool.clone().context("an rbd store needs a pool")?,
            namespace: self.namespace.clone(),
            image: self.image.clone().context("an rbd store needs an image")?,
            gateway,
        })
    }
}

impl Config {
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let mut config: Config =
            toml::from_str(&text).with_context(|| format!("in {}", path.display()))?;
        config.base = path.parent().unwrap_or(Path::new(".")).to_path_buf();
        config
            .validate()
            .with_context(|| format!("in {}", path.display()))?;
        Ok(config)
    }

    /// The device queue of the first LUN that has one.
    pub fn device_description(&self) -> anyhow::Result<DeviceDescription> {
        for lun in self.targets.iter().flat_map(|t| &t.luns) {
            if let Some(d) = lun.device(&self.base)? {
                return Ok(d);
            }
        }
        bail!("no LUN has a [drive], [queue] or [cdl] table")
    }

    /// Checks what serde cannot: names, LUN numbering, block sizes, store paths.
    pub fn validate(&self) -> anyhow::Result<()> {
        if self.nop_in_interval_s > 3600 {
            bail!(
                "nop_in_interval_s: {} s is more than an hour; give 1..=3600, or 0 for no pings",
                self.nop_in_interval_s
            );
        }
        if self.targets.is_empty() {
            bail!("no [[target]] defined");
        }
        let mut names = std::collections::BTreeSet::new();
        // The device identifiers (VPD 83h) derive from the serial: two LUNs would be one to a host.
        let mut serials = BTreeMap::new();
        for (t, target) in self.targets.iter().enumerate() {
            let at = format!("target[{t}] ({})", target.name);
            iscsi::name::check(&target.name)
                .map_err(|e| anyhow::anyhow!("{at}: name {:?} {e}", target.name))?;
            let privileged = target.privileged_initiators.iter().filter(|i| *i != "*");
            for initiator in target
                .allowed_initiators
                .iter()
                .chain(target.initiator_classes.keys())
                .chain(privileged)
            {
                iscsi::name::check(initiator)
                    .map_err(|e| anyhow::anyhow!("{at}: initiator name {initiator:?} {e}"))?;
            }
            if !names.insert(target.name.to_ascii_lowercase()) {
                bail!("{at}: duplicate target name");
            }
            if target.luns.is_empty() {
                bail!("{at}: no [[target.lun]] defined");
            }
            target.validate_gateways(&at)?;
            let mut ids = std::collections::BTreeSet::new();
            for (i, lun) in target.luns.iter().enumerate() {
                let id = lun.id.unwrap_or(i as u64);
                let at = format!("{at}.lun[{i}]");
                for initiator in &lun.allowed_initiators {
                    iscsi::name::check(initiator)
                        .map_err(|e| anyhow::anyhow!("{at}: initiator name {initiator:?} {e}"))?;
                    // A LUN only initiators barred from the target may see is nobody's.
                    if !target.allowed_initiators.is_empty()
                        && !target.allowed_initiators.contains(initiator)
                    {
                        bail!("{at}: allowed_initiators names {initiator:?}, which the target's allowed_initiators does not let log in");
                    }
                }
                if id > 16383 {
                    bail!("{at}: id {id} is beyond the flat addressing range 0..=16383");
                }
                if !ids.insert(id) {
                    bail!("{at}: duplicate LUN {id}");
                }
                if lun.block_size.is_some_and(|b| b != 512 && b != 4096) {
                    bail!(
                        "{at}: block_size must be 512 or 4096, not {}",
                        lun.block_size()
                    );
                }
                if lun.physical_block_exponent.is_some_and(|e| e > 3) {
                    bail!("{at}: physical_block_exponent must be 0..=3 (physical block at most 8 logical blocks)");
                }
                if !matches!(lun.inquiry_version, 0x04..=0x07 | 0x0D) {
                    bail!("{at}: inquiry_version must be 4, 5, 6, 7 (SPC-2..SPC-5) or 13 (SPC-6)");
                }
                // INQUIRY and VPD 80h fields are ASCII data: 20h..7Eh (SPC-6 4.3.1).
                let printable = |s: &str| s.bytes().all(|b| (0x20..=0x7e).contains(&b));
                if let Some(p) = &lun.product {
                    if p.len() > 16 || !printable(p) {
                        bail!("{at}: product {p:?} must be at most 16 printable ASCII characters (SPC-6 INQUIRY PRODUCT IDENTIFICATION)");
                    }
                }
                if let Some(serial) = &lun.serial {
                    if serial.is_empty() || serial.len() > MAX_SERIAL_LEN || !printable(serial) {
                        bail!("{at}: serial {serial:?} must be 1 to {MAX_SERIAL_LEN} printable ASCII characters (SPC-6 Unit Serial Number VPD page)");
                    }
                    if let Some(first) = serials.insert(serial.clone(), at.clone()) {
                        bail!("{at}: serial {serial:?} is also {first}'s; a host would take both for one device (VPD 83h)");
                    }
                }
                let device = lun.device(&self.base).with_context(|| at.clone())?;
                // Only a drive model has sectors and a capacity: a [queue] or [cdl] table
                // alone times nothing (the instant model) and takes the store's blocks and size.
                if let Some(d) = device.as_ref().filter(|_| lun.drive.is_some()) {
                    if lun.block_size() != d.drive.block_size() {
                        bail!(
                            "{at}: block_size {} differs from the drive's {}-byte sectors",
                            lun.block_size(),
                            d.drive.block_size()
                        );
                    }
                    if lun.size.is_some_and(|s| s > d.drive.capacity) {
                        bail!(
                            "{at}: size is larger than the drive's capacity of {} bytes",
                            d.drive.capacity
                        );
                    }
                }
                for (initiator, class) in &target.initiator_classes {
                    if qos::Class::from_name(class).is_none() {
                        bail!("{at}: initiator_classes.{initiator:?}: unknown class {class:?} (urgent, high, medium, low; rt, be, idle)");
                    }
                }
                match (lun.store, &lun.path, lun.size) {
                    (StoreKind::Ram, Some(_), _) => bail!("{at}: a ram store has no path"),
                    (StoreKind::Ram, None, None) if device.is_none() => {
                        bail!(
                            "{at}: a ram store needs a size (or a drive, whose capacity it takes)"
                        )
                    }
                    (StoreKind::File, None, _) => bail!("{at}: a file store needs a path"),
                    (StoreKind::Block, None, _) => {
                        bail!("{at}: a block store needs a path (the device, e.g. /dev/sdb)")
                    }
                    _ => {}
                }
                lun.validate_rbd(&at)?;
                if lun.direct && matches!(lun.store, StoreKind::Ram | StoreKind::Rbd) {
                    bail!("{at}: direct applies to a file store only");
                }
                if lun.store_delay_ms > 0 && matches!(lun.store, StoreKind::Ram | StoreKind::Rbd) {
                    bail!("{at}: store_delay_ms applies to a file or block store only");
                }
                if lun.store_delay_ms > MAX_STORE_DELAY_MS {
                    bail!(
                        "{at}: store_delay_ms {} is more than {MAX_STORE_DELAY_MS} (10 s)",
                        lun.store_delay_ms
                    );
                }
                if let Some(size) = lun.size {
                    // A block store's block is the device's unless given: checked once open.
                    let block = match lun.store {
                        StoreKind::Block => lun.block_size.unwrap_or(512),
                        _ => lun.block_size(),
                    };
                    if size == 0 || size % u64::from(block) != 0 {
                        bail!(
                            "{at}: size {size} must be a non-zero multiple of the block size {block}"
                        );
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lun_flags() {
        assert_eq!(
            LunConfig::parse_flag("ram:1GiB").unwrap().size,
            Some(1 << 30)
        );
        assert_eq!(LunConfig::parse_flag("ram:1G").unwrap().size, Some(1 << 30));
        assert_eq!(
            LunConfig::parse_flag("ram:1GB").unwrap().size,
            Some(1_000_000_000)
        );
        assert_eq!(LunConfig::parse_flag("ram:4k").unwrap().size, Some(4096));
        let f = LunConfig::parse_flag("file:/tmp/a:b.img:64MiB").unwrap();
        assert_eq!(
            (f.path.unwrap(), f.size),
            (PathBuf::from("/tmp/a:b.img"), Some(64 << 20))
        );
        let f = LunConfig::parse_flag("file:/tmp/x.img").unwrap();
        assert_eq!(f.size, None);
        for bad in ["ram", "ram:", "ram:lots", "disk:1G", "file:", "file::1G"] {
            assert!(LunConfig::parse_flag(bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn changed_keys_name_what_differs_and_not_the_lun_number() {
        let a = LunConfig::parse_flag("file:/tmp/a.img:64MiB").unwrap();
        let mut b = LunConfig::parse_flag("file:/tmp/b.img:128MiB").unwrap();
        assert_eq!(a.changed_keys(&b), ["path", "size"]);
        b = a.clone();
        b.id = a.id.map_or(Some(7), |n| Some(n + 1));
        assert!(a.changed_keys(&b).is_empty());
        b.read_only = !a.read_only;
        assert_eq!(b.changed_keys(&a), ["read_only"]);
    }

    fn parse(text: &str) -> anyhow::Result<Config> {
        let c: Config = toml::from_str(text)?;
        c.validate()?;
        Ok(c)
    }

    #[test]
    fn nop_in_interval() {
        let lun =
            "[[target]]\nname = \"iqn.2026-11.dev.stint:a\"\n[[target.lun]]\nstore = \"ram\"\nsize = \"1MiB\"\n";
        assert_eq!(parse(lun).unwrap().nop_in_interval_s, 30);
        assert_eq!(
            parse(&format!("nop_in_interval_s = 0\n{lun}"))
                .unwrap()
                .nop_in_interval_s,
            0
        );
        let e = parse(&format!("nop_in_interval_s = 3601\n{lun}")).unwrap_err();
        assert!(
            e.to_string().starts_with("nop_in_interval_s: 3601 s"),
            "{e}"
        );
    }

    #[test]
    fn full_config() {
        let c = parse(
            r#"
            listen = "127.0.0.1:3261"
            metrics = "127.0.0.1:9100"
            [[target]]
            name = "iqn.2026-11.dev.stint:a"
            allowed_initiators = ["iqn.1994-05.com.redhat:x"]
            [[target.lun]]
            store = "ram"
            size = "64MiB"
            block_size = 4096
            [[target.lun]]
            id = 7
            store = "file"
            path = "/tmp/x.img"
            size = 1048576
            write_cache = false
            read_only = true
            removable = true
            inquiry_version = 6
            alua_state = "standby"
            "#,
        )
        .unwrap();
        assert_eq!(c.listen.port(), 3261);
        assert_eq!(c.metrics, Some("127.0.0.1:9100".parse().unwrap()));
        assert_eq!(c.targets[0].luns[0].size, Some(64 << 20));
        assert_eq!(c.targets[0].luns[1].id, Some(7));
        assert_eq!(c.targets[0].luns[1].write_cache, Some(false));
        assert!(c.targets[0].luns[1].removable);
        assert_eq!(c.targets[0].luns[1].inquiry_version, 6);
        assert_eq!(c.targets[0].luns[0].inquiry_version, 0x0D);
        use scsi::alua::AccessState;
        assert_eq!(c.targets[0].alua_state, None);
        assert_eq!(c.targets[0].luns[0].alua_state, None);
        assert_eq!(
            c.targets[0].luns[1].alua_state,
            Some(AluaState(AccessState::Standby))
        );
    }

    #[test]
    fn write_cache_and_the_drive_models_are_one_setting() {
        let lun = |keys: &str| {
            let text = format!(
                "[[target]]\nname = \"iqn.2026-11.dev.stint:a\"\n[[target.lun]]\nstore = \"ram\"\nsize = \"1GiB\"\n{keys}\n"
            );
            parse(&text).and_then(|c| c.targets[0].luns[0].device(Path::new(".")))
        };
        let wce = |keys: &str| lun(keys).unwrap().map(|d| d.drive.write_cache());
        // The profile's (off for the shipped disk), either key, or both when they agree.
        assert_eq!(
            wce("[target.lun.drive]\nmodel = \"hdd\""),
            Some(Some(false))
        );
        assert_eq!(
            wce("write_cache = true\n[target.lun.drive]\nmodel = \"hdd\""),
            Some(Some(true))
        );
        assert_eq!(
            wce("[target.lun.drive]\nmodel = \"hdd\"\nwrite_cache = true"),
            Some(Some(true))
        );
        assert_eq!(
            wce("write_cache = false\n[target.lun.drive]\nmodel = \"hdd\"\nwrite_cache = false"),
            Some(Some(false))
        );
        // A model without a write cache, and a LUN without a model.
        assert_eq!(
            wce("write_cache = false\n[target.lun.drive]\nmodel = \"ssd\""),
            Some(None)
        );
        assert_eq!(wce("write_cache = false"), None);
        let Err(e) =
            lun("write_cache = false\n[target.lun.drive]\nmodel = \"hdd\"\nwrite_cache = true")
        else {
            panic!("disagreeing keys accepted");
        };
        let e = format!("{e:#}");
        assert!(
            e.contains("write_cache = false and drive.write_cache = true disagree"),
            "{e}"
        );
    }

    #[test]
    fn bad_configs_name_the_problem() {
        let cases = [
            ("[[target]]\nname = \"x\"\n[[target.lun]]\nstore = \"ram\"\nsize = 512", "must start with iqn."),
            ("[[target]]\nname = \"iqn.bad name\"\n[[target.lun]]\nstore = \"ram\"\nsize = 512", "contains ' '"),
            ("[[target]]\nname = \"iqn.2026-11.dev.stint:a\"\nallowed_initiators = [\"host1\"]\n[[target.lun]]\nstore = \"ram\"\nsize = 512", "initiator name \"host1\""),
            ("[[target]]\nname = \"iqn.2026-11.dev.stint:a\"\n[[target.lun]]\nstore = \"ram\"\nsize = -5", "size must not be negative, not -5"),
            ("[[target]]\nname = \"iqn.2026-11.dev.stint:a\"\n[[target.lun]]\nstore = \"ram\"\nsize = 1.5", "a byte count or a size"),
            ("[[target]]\nname = \"iqn.2026-11.dev.stint:a\"\n[[target.lun]]\nstore = \"ram\"\nsize = 512\nserial = \"h\u{e9}llo\"", "printable ASCII"),
            ("bogus = 1", "unknown field `bogus`"),
            ("metrics = \"localhost:9100\"", "invalid socket address"),
            ("[[target]]\nname = \"iqn.2026-11.dev.stint:a\"\n[[target.lun]]\nstore = \"ram\"\nsize = 1000", "multiple of the block size"),
            ("[[target]]\nname = \"iqn.2026-11.dev.stint:a\"\n[[target.lun]]\nstore = \"ram\"\nsize = 512\nblock_size = 1024", "512 or 4096"),
            ("[[target]]\nname = \"iqn.2026-11.dev.stint:a\"\n[[target.lun]]\nstore = \"file\"", "needs a path"),
            ("[[target]]\nname = \"iqn.2026-11.dev.stint:a\"\n[[target.lun]]\nstore = \"tape\"", "unknown variant"),
            ("[[target]]\nname = \"iqn.2026-11.dev.stint:a\"\n[[target.lun]]\nstore = \"ram\"\nsize = \"big\"", "invalid size"),
            ("", "no [[target]]"),
            ("[[target]]\nname = \"iqn.2026-11.dev.stint:a\"\nallowed_initiators = [\"iqn.2026-11.x:a\"]\n[[target.lun]]\nstore = \"ram\"\nsize = 512\nallowed_initiators = [\"iqn.2026-11.x:b\"]", "which the target's allowed_initiators does not let log in"),
            ("[[target]]\nname = \"iqn.2026-11.dev.stint:a\"\nprivileged_initiators = [\"root\"]\n[[target.lun]]\nstore = \"ram\"\nsize = 512", "initiator name \"root\""),
            ("[[target]]\nname = \"iqn.2026-11.dev.stint:a\"\n[[target.lun]]\nstore = \"ram\"\nsize = 512\nserial = \"S1\"\n[[target.lun]]\nstore = \"ram\"\nsize = 512\nserial = \"S1\"", "serial \"S1\" is also target[0] (iqn.2026-11.dev.stint:a).lun[0]'s"),
            ("[[target]]\nname = \"iqn.2026-11.dev.stint:a\"\n[[target.lun]]\nstore = \"ram\"\nsize = 512\ninquiry_version = 9", "inquiry_version"),
            ("[[target]]\nname = \"iqn.2026-11.dev.stint:a\"\nalua_state = \"passive\"\n[[target.lun]]\nstore = \"ram\"\nsize = 512", "unknown ALUA state \"passive\"; expected one of active/optimized, active/non-optimized, standby, unavailable"),
            ("[[target]]\nname = \"iqn.2026-11.dev.stint:a\"\n[[target.lun]]\nstore = \"ram\"\nsize = 512\n[[target.lun]]\nid = 0\nstore = \"ram\"\nsize = 512", "duplicate LUN 0"),
            ("[[target]]\nname = \"iqn.2026-11.dev.stint:a\"\n[[target.lun]]\nstore = \"ram\"\nsize = 512\ndirect = true", "direct applies to a file store only"),
            ("[[target]]\nname = \"iqn.2026-11.dev.stint:a\"\n[[target.lun]]\nstore = \"ram\"\nsize = 512\nstore_delay_ms = 5", "store_delay_ms applies to a file or block store only"),
            ("[[target]]\nname = \"iqn.2026-11.dev.stint:a\"\n[[target.lun]]\nstore = \"file\"\npath = \"x.img\"\nstore_delay_ms = 20000", "store_delay_ms 20000 is more than 10000 (10 s)"),
        ];
        const GW: &str = "[[target]]\nname = \"iqn.2026-11.dev.stint:a\"\n";
        let rbd = "[[target.lun]]\nstore = \"rbd\"\npool = \"rbd\"\nimage = \"i\"\n";
        let pair = "[[target.gateways]]\nname = \"a\"\nportal = \"127.0.0.1:3261\"\nport_group = 1\n[[target.gateways]]\nname = \"b\"\nportal = \"127.0.0.1:3262\"\nport_group = 2\n";
        let ok = format!("{GW}gateway = \"b\"\n{rbd}{pair}");
        let c = parse(&ok).expect("two gateways");
        assert_eq!(
            c.targets[0].port_groups(),
            device::PortGroups {
                own: 2,
                all: vec![1, 2],
                explicit: false,
            }
        );
        let explicit = parse(&format!(
            "{GW}gateway = \"b\"\nalua_explicit = true\n{rbd}{pair}"
        ))
        .expect("explicit ALUA");
        assert!(explicit.targets[0].port_groups().explicit());
        let gateway_cases = [
            (format!("{GW}{rbd}{pair}"), "gateway does not say which one this server is"),
            (format!("{GW}alua_explicit = true\n{rbd}"), "alua_explicit applies to gateways only"),
            (format!("{GW}gateway = \"c\"\n{rbd}{pair}"), "gateway \"c\" is not among the names in gateways"),
            (format!("{GW}gateway = \"a\"\n{rbd}[[target.gateways]]\nname = \"a\"\nportal = \"127.0.0.1:1\"\nport_group = 1\n"), "needs a gateways list of at least two"),
            (ok.replace("port_group = 2", "port_group = 1"), "port_group 1 is given to two gateways"),
            (ok.replace("port_group = 2", "port_group = 0"), "port_group must be 1..=65535"),
            (ok.replace("3262", "3261"), "portal 127.0.0.1:3261 is given to two gateways"),
            (ok.replace("name = \"b\"", "name = \"a\""), "gateway name \"a\" is listed twice"),
            (ok.replace("store = \"rbd\"\npool = \"rbd\"\nimage = \"i\"", "store = \"ram\"\nsize = 512"), "a target with gateways exports rbd stores only"),
            (format!("{GW}gateway = \"b\"\nalua_state = \"unavailable\"\n{rbd}{pair}"), "alua_state \"unavailable\" does not apply to gateways"),
            (format!("{GW}gateway = \"b\"\n{}{pair}", rbd.replace("image", "alua_state = \"active/optimized\"\nimage")), "alua_state \"active/optimized\" does not apply to gateways"),
        ];
        for state in ["standby", "active/non-optimized"] {
            let c = parse(&format!(
                "{GW}gateway = \"b\"\nalua_state = \"{state}\"\n{rbd}{pair}"
            ))
            .expect("the others' state");
            assert_eq!(c.targets[0].alua_state.map(|s| s.0.name()), Some(state));
        }
        for (text, want) in gateway_cases {
            let err = format!("{:#}", parse(&text).unwrap_err());
            assert!(err.contains(want), "{text:?}: {err}");
        }
        for (text, want) in cases {
            let err = format!("{:#}", parse(text).unwrap_err());
            assert!(err.contains(want), "{text:?}: {err}");
        }
    }
}

#[cfg(test)]
#[path = "../../sim/tests/doc_blocks/mod.rs"]
mod doc_blocks;

/// The examples of the docs are real: every ```toml block of docs/configuration.md,
/// docs/cdl.md and docs/metrics.md is a complete stint.toml, every ```toml fragment block a part of one, merged over
/// a minimal file (tables key by key, arrays of tables element by element). Each must parse and
/// pass the checks `stint serve --config` makes, relative paths taken from the repository root.
#[cfg(test)]
mod doc_examples {
    use super::doc_blocks::{merge, repository, toml_blocks};
    use super::{chap, Config};
    use toml::Table;

    /// What a fragment is merged over: one target with one 1 MiB RAM LUN.
    const MINIMAL: &str = "[[target]]\nname = \"iqn.2026-11.dev.stint:docs\"\n\
                           [[target.lun]]\nstore = \"ram\"\nsize = \"1MiB\"\n";

    /// A block as `stint serve --config` would take it; CHAP tables with inline secrets are
    /// checked too (a `secret_file` of an example names no file in the repository).
    fn load(info: &str, body: &str) -> anyhow::Result<Config> {
        let text = match info {
            "toml" => body.to_owned(),
            "toml fragment" => {
                let mut doc: Table = MINIMAL.parse()?;
                merge(&mut doc, &body.parse::<Table>()?);
                toml::to_string(&doc)?
            }
            other => anyhow::bail!("unknown block kind ```{other} (toml or toml fragment)"),
        };
        let mut config: Config = toml::from_str(&text)?;
        config.base = repository();
        config.validate()?;
        let inline =
            |c: &[Option<&super::ChapConfig>]| c.iter().flatten().all(|c| c.secret_file.is_none());
        let discovery = [
            config.discovery_chap.as_ref(),
            config.discovery_mutual_chap.as_ref(),
        ];
        if inline(&discovery) {
            chap(discovery[0], discovery[1], &config.base, "discovery")?;
        }
        for t in &config.targets {
            let pair = [t.chap.as_ref(), t.mutual_chap.as_ref()];
            if inline(&pair) {
                chap(pair[0], pair[1], &config.base, &t.name)?;
            }
        }
        Ok(config)
    }

    /// Checks every toml block of `doc`; returns how many there are.
    fn check(doc: &str) -> usize {
        let path = repository().join(doc);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{doc}: {e}"));
        let blocks = toml_blocks(&text);
        for (line, info, body) in &blocks {
            if let Err(e) = load(info, body) {
                panic!("{doc}:{line}: the ```{info} block does not load: {e:#}");
            }
        }
        blocks.len()
    }

    #[test]
    fn configuration_md_examples_load() {
        assert!(check("docs/configuration.md") >= 8);
    }

    #[test]
    fn cdl_md_examples_load() {
        assert!(check("docs/cdl.md") >= 1);
    }

    #[test]
    fn gateways_md_examples_load() {
        assert_eq!(check("docs/gateways.md"), 1);
    }

    #[test]
    fn the_gateway_examples_load_and_pair() {
        let load = |name: &str| {
            Config::load(&repository().join("examples/gateways").join(name))
                .unwrap_or_else(|e| panic!("examples/gateways/{name}: {e:#}"))
        };
        let (a, b) = (load("gw-a.toml"), load("gw-b.toml"));
        let (a, b) = (&a.targets[0], &b.targets[0]);
        assert_eq!((&a.name, &a.gateways), (&b.name, &b.gateways));
        assert_eq!((a.port_groups().own, b.port_groups().own), (1, 2));
    }

    #[test]
    fn metrics_md_examples_load() {
        assert_eq!(check("docs/metrics.md"), 1);
    }

    #[test]
    fn a_bad_example_would_fail() {
        assert!(load("toml fragment", "[[target]]\n[[target.lun]]\nbogus = 1\n").is_err());
        assert!(load("toml fragment", "[[target]]\n[[target.lun]]\nsize = 1000\n").is_err());
        assert!(load("toml", "[[target]]\nname = \"iqn.2026-11.dev.stint:a\"\n").is_err());
        assert!(load(
            "toml fragment",
            "discovery_chap = { user = \"d\", secret = \"short\" }"
        )
        .is_err());
        assert!(load("toml fragment", "[[target]]\nalias = \"a\"\n").is_ok());
    }
}
