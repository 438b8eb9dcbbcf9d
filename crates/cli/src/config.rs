//! `stint.toml`: targets, their logical units and stores (README, `stint.toml`). Every field has a
//! working default; the README documents them. The quick-case CLI flags build the same structure.

use anyhow::{bail, Context};
use serde::{Deserialize, Deserializer};
use sim::cdl_spec::CdlSpec;
use sim::device::{DeviceSpec, DriveSetup, QueueSpec};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

pub const DEFAULT_LISTEN: &str = "127.0.0.1:3260";
pub const DEFAULT_TARGET: &str = "iqn.2026-11.dev.stint:target0";
pub const DEFAULT_RAM_SIZE: u64 = 1 << 30;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Address the iSCSI portal listens on.
    #[serde(default = "default_listen")]
    pub listen: SocketAddr,
    #[serde(default, rename = "target")]
    pub targets: Vec<TargetConfig>,
    /// CHAP that discovery sessions must pass, and the target's answer to mutual CHAP.
    pub discovery_chap: Option<ChapConfig>,
    pub discovery_mutual_chap: Option<ChapConfig>,
    /// Directory relative `profile` and `secret_file` paths are taken from: the config file's.
    #[serde(skip)]
    pub base: PathBuf,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetConfig {
    /// iSCSI qualified name of the target node (RFC 7143 §4.2.7).
    pub name: String,
    pub alias: Option<String>,
    /// Initiator names allowed to log in; empty means any.
    #[serde(default)]
    pub allowed_initiators: Vec<String>,
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
}

/// A CHAP name and its secret, given inline or in a file only its owner can read.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChapConfig {
    pub user: String,
    pub secret: Option<String>,
    pub secret_file: Option<PathBuf>,
}

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

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LunConfig {
    /// Logical unit number; defaults to the position in the list.
    pub id: Option<u64>,
    pub store: StoreKind,
    /// Backing file (store = "file"); created sparse when missing.
    pub path: Option<PathBuf>,
    /// Capacity, e.g. "1GiB" or a byte count; a file store defaults to the file's size.
    #[serde(default, deserialize_with = "size_opt")]
    pub size: Option<u64>,
    #[serde(default = "default_block_size")]
    pub block_size: u32,
    /// Logical blocks per physical block exponent (512e: 3 for 4 KiB physical blocks).
    #[serde(default)]
    pub physical_block_exponent: u8,
    /// INQUIRY PRODUCT IDENTIFICATION (16 ASCII characters at most).
    pub product: Option<String>,
    /// Unit serial number (VPD 80h); also seeds the device identifier (VPD 83h).
    pub serial: Option<String>,
    /// Caching mode page WCE: false makes every write durable before GOOD.
    #[serde(default = "yes")]
    pub write_cache: bool,
    #[serde(default)]
    pub read_only: bool,
    /// Removable medium (RMB): START STOP UNIT with LOEJ ejects and loads it.
    #[serde(default)]
    pub removable: bool,
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
}

fn default_listen() -> SocketAddr {
    DEFAULT_LISTEN.parse().expect("valid default address")
}
fn default_block_size() -> u32 {
    512
}
fn default_inquiry_version() -> u8 {
    0x0D
}
fn yes() -> bool {
    true
}

/// Parses "1GiB", "512MiB", "4096" (binary multiples: "1G" is 2^30 bytes).
pub fn parse_size(s: &str) -> anyhow::Result<u64> {
    parse_size::Config::new()
        .with_binary()
        .parse_size(s)
        .with_context(|| format!("invalid size {s:?} (examples: 1GiB, 512MiB, 1073741824)"))
}

fn size_opt<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Size {
        Bytes(u64),
        Text(String),
    }
    Ok(match Option::<Size>::deserialize(d)? {
        None => None,
        Some(Size::Bytes(n)) => Some(n),
        Some(Size::Text(s)) => Some(parse_size(&s).map_err(serde::de::Error::custom)?),
    })
}

/// The configuration `--lun hdd` and `stint serve` without arguments use for a CDL hard
/// disk: the same file the README documents.
const HDD_CDL_EXAMPLE: &str = include_str!("../../../examples/hdd-cdl.toml");

impl LunConfig {
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
            size: Some(size),
            block_size: default_block_size(),
            physical_block_exponent: 0,
            product: None,
            serial: None,
            write_cache: true,
            read_only: false,
            removable: false,
            inquiry_version: default_inquiry_version(),
            drive: None,
            queue: None,
            cdl: None,
            dh_completion: DhForm::default(),
            seed: 0,
        }
    }

    /// `--lun ram:SIZE`, `--lun file:PATH[:SIZE]`, or `--lun hdd` (the CDL hard disk of
    /// examples/hdd-cdl.toml on a sparse RAM store).
    pub fn parse_flag(spec: &str) -> anyhow::Result<Self> {
        if spec == "hdd" {
            return Ok(LunConfig::hdd_cdl());
        }
        match spec.split_once(':') {
            Some(("ram", size)) => Ok(LunConfig::ram(parse_size(size)?)),
            Some(("file", rest)) => {
                // A trailing ":SIZE" is a size only if it parses as one, so paths may contain ':'.
                let (path, size) = match rest.rsplit_once(':') {
                    Some((p, s)) if parse_size(s).is_ok() => (p, Some(parse_size(s)?)),
                    _ => (rest, None),
                };
                if path.is_empty() {
                    bail!("--lun file:PATH[:SIZE] needs a path");
                }
                Ok(LunConfig {
                    store: StoreKind::File,
                    path: Some(path.into()),
                    size,
                    ..LunConfig::ram(0)
                })
            }
            _ => bail!("invalid --lun {spec:?}: expected ram:SIZE, file:PATH[:SIZE] or hdd"),
        }
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
        if self.targets.is_empty() {
            bail!("no [[target]] defined");
        }
        let mut names = std::collections::BTreeSet::new();
        for (t, target) in self.targets.iter().enumerate() {
            let at = format!("target[{t}] ({})", target.name);
            if !(target.name.starts_with("iqn.")
                || target.name.starts_with("eui.")
                || target.name.starts_with("naa."))
            {
                bail!("{at}: name must be an iSCSI name (iqn.*, eui.* or naa.*)");
            }
            if !names.insert(target.name.to_ascii_lowercase()) {
                bail!("{at}: duplicate target name");
            }
            if target.luns.is_empty() {
                bail!("{at}: no [[target.lun]] defined");
            }
            let mut ids = std::collections::BTreeSet::new();
            for (i, lun) in target.luns.iter().enumerate() {
                let id = lun.id.unwrap_or(i as u64);
                let at = format!("{at}.lun[{i}]");
                if id > 16383 {
                    bail!("{at}: id {id} is beyond the flat addressing range 0..=16383");
                }
                if !ids.insert(id) {
                    bail!("{at}: duplicate LUN {id}");
                }
                if lun.block_size != 512 && lun.block_size != 4096 {
                    bail!(
                        "{at}: block_size must be 512 or 4096, not {}",
                        lun.block_size
                    );
                }
                if lun.physical_block_exponent > 3 {
                    bail!("{at}: physical_block_exponent must be 0..=3 (physical block at most 8 logical blocks)");
                }
                if !matches!(lun.inquiry_version, 0x04..=0x07 | 0x0D) {
                    bail!("{at}: inquiry_version must be 4, 5, 6, 7 (SPC-2..SPC-5) or 13 (SPC-6)");
                }
                if let Some(p) = &lun.product {
                    if p.len() > 16 || !p.is_ascii() {
                        bail!("{at}: product must be at most 16 ASCII characters");
                    }
                }
                let device = lun.device(&self.base).with_context(|| at.clone())?;
                if let Some(d) = &device {
                    if lun.block_size != d.drive.block_size() {
                        bail!(
                            "{at}: block_size {} differs from the drive's {}-byte sectors",
                            lun.block_size,
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
                        bail!("{at}: initiator_classes.{initiator:?}: unknown class {class:?} (urgent, high, medium, low)");
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
                    _ => {}
                }
                if let Some(size) = lun.size {
                    if size == 0 || size % u64::from(lun.block_size) != 0 {
                        bail!(
                            "{at}: size {size} must be a non-zero multiple of the block size {}",
                            lun.block_size
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

    fn parse(text: &str) -> anyhow::Result<Config> {
        let c: Config = toml::from_str(text)?;
        c.validate()?;
        Ok(c)
    }

    #[test]
    fn full_config() {
        let c = parse(
            r#"
            listen = "127.0.0.1:3261"
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
            "#,
        )
        .unwrap();
        assert_eq!(c.listen.port(), 3261);
        assert_eq!(c.targets[0].luns[0].size, Some(64 << 20));
        assert_eq!(c.targets[0].luns[1].id, Some(7));
        assert!(!c.targets[0].luns[1].write_cache);
        assert!(c.targets[0].luns[1].removable);
        assert_eq!(c.targets[0].luns[1].inquiry_version, 6);
        assert_eq!(c.targets[0].luns[0].inquiry_version, 0x0D);
    }

    #[test]
    fn bad_configs_name_the_problem() {
        let cases = [
            ("[[target]]\nname = \"x\"\n[[target.lun]]\nstore = \"ram\"\nsize = 512", "iSCSI name"),
            ("bogus = 1", "unknown field `bogus`"),
            ("[[target]]\nname = \"iqn.a\"\n[[target.lun]]\nstore = \"ram\"\nsize = 1000", "multiple of the block size"),
            ("[[target]]\nname = \"iqn.a\"\n[[target.lun]]\nstore = \"ram\"\nsize = 512\nblock_size = 1024", "512 or 4096"),
            ("[[target]]\nname = \"iqn.a\"\n[[target.lun]]\nstore = \"file\"", "needs a path"),
            ("[[target]]\nname = \"iqn.a\"\n[[target.lun]]\nstore = \"tape\"", "unknown variant"),
            ("[[target]]\nname = \"iqn.a\"\n[[target.lun]]\nstore = \"ram\"\nsize = \"big\"", "invalid size"),
            ("", "no [[target]]"),
            ("[[target]]\nname = \"iqn.a\"\n[[target.lun]]\nstore = \"ram\"\nsize = 512\ninquiry_version = 9", "inquiry_version"),
            ("[[target]]\nname = \"iqn.a\"\n[[target.lun]]\nstore = \"ram\"\nsize = 512\n[[target.lun]]\nid = 0\nstore = \"ram\"\nsize = 512", "duplicate LUN 0"),
        ];
        for (text, want) in cases {
            let err = format!("{:#}", parse(text).unwrap_err());
            assert!(err.contains(want), "{text:?}: {err}");
        }
    }
}
