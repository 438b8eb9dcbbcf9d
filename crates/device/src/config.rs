//! How a logical unit is described: capacity, block geometry, identification, cache policy.

use std::{fmt, io};

/// Everything that shapes a logical unit except its store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LuConfig {
    /// The iSCSI target name the LU is served under; with `lun` it seeds the device identifier.
    pub target_name: String,
    pub lun: u64,
    /// Capacity in bytes; must be a whole number of logical blocks.
    pub size_bytes: u64,
    /// LOGICAL BLOCK LENGTH IN BYTES: 512 or 4096.
    pub block_size: u32,
    /// LOGICAL BLOCKS PER PHYSICAL BLOCK EXPONENT (SBC-4 table 66): 3 for 512e.
    pub physical_block_exponent: u8,
    /// T10 VENDOR IDENTIFICATION (8 ASCII), PRODUCT IDENTIFICATION (16), PRODUCT REVISION LEVEL
    /// (4).
    pub vendor: String,
    pub product: String,
    pub revision: String,
    /// Unit serial number (VPD 80h); also seeds the device identifier when given.
    pub serial: Option<String>,
    /// Default (and power-on) value of WCE in the Caching mode page. On a logical unit whose
    /// drive model has a write cache, the model's setting replaces it, and MODE SELECT of WCE
    /// switches the model's cache.
    pub write_cache: bool,
    /// Whether MODE SELECT may change WCE; false pins it at `write_cache`, whatever an
    /// initiator selects or a saved page says.
    pub write_cache_changeable: bool,
    /// Software write protect: every write answers DATA PROTECT / WRITE PROTECTED.
    pub read_only: bool,
    /// Removable medium (RMB in standard INQUIRY): START STOP UNIT with LOEJ ejects and loads
    /// it, PREVENT ALLOW MEDIUM REMOVAL locks it in.
    pub removable: bool,
    /// VERSION in standard INQUIRY data (SPC-5 table 148): 0Dh claims SPC-6, needed by Linux
    /// CDL probing (it skips devices below SPC-5); libiscsi 1.19's Inquiry.Standard accepts only
    /// 4–6.
    pub inquiry_version: u8,
    /// MEDIUM ROTATION RATE in VPD B1h: 1 = non-rotating, or the RPM of a modelled disk.
    pub medium_rotation_rate: u16,
    /// Thin provisioning (SBC-4 §4.7.3.2): LBPME and LBPRZ in READ CAPACITY (16), UNMAP and
    /// WRITE SAME with UNMAP deallocate what the store can free; otherwise fully provisioned
    /// (UNMAP is not supported).
    pub thin_provisioning: bool,
    /// MAXIMUM TRANSFER LENGTH in VPD B0h, in bytes (converted to blocks).
    pub max_transfer_bytes: u32,
    /// Where a logical unit that can save mode parameters (one with a device queue) keeps
    /// them across restarts; `None`: they live as long as the process.
    pub saved_mode_path: Option<std::path::PathBuf>,
    /// Where the logical unit keeps its persistent reservations while a host asks them to
    /// persist through power loss (APTPL = 1, SPC-4 §5.13.5); `None`: it cannot (PTPL_C = 0),
    /// and APTPL = 1 is refused.
    pub persistent_reservations_path: Option<std::path::PathBuf>,
    /// The least time a SANITIZE takes (it sleeps between steps), so that an initiator's test
    /// can watch one in progress; zero: as fast as the store goes.
    pub sanitize_pace: std::time::Duration,
    /// The access state of the logical unit's one target port group (implicit ALUA, SPC-4
    /// §5.16): standby and unavailable refuse what the command table does not let through.
    /// Where several gateways export the logical unit, the state of every gateway's group but
    /// the preferred one's (active/non-optimized or standby; docs/gateways.md).
    pub alua_state: scsi::alua::AccessState,
    /// The target port groups the logical unit is reached through.
    pub port_groups: PortGroups,
}

/// This server's target port group and, when several gateways export the logical unit
/// (docs/gateways.md), every gateway's. Each group has one target port, whose relative
/// identifier is the group's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortGroups {
    /// This server's group.
    pub own: u16,
    /// Every gateway's group, in the configuration's order: the first is the one a host is
    /// steered to while no gateway holds the store. `[own]` for a lone server.
    pub all: Vec<u16>,
    /// Hosts may choose the preferred gateway with SET TARGET PORT GROUPS (explicit ALUA,
    /// TPGS 11b; docs/gateways.md): the configuration's `alua_explicit`, for gateways only.
    pub explicit: bool,
}

impl Default for PortGroups {
    fn default() -> Self {
        PortGroups {
            own: crate::TARGET_PORT_GROUP,
            all: vec![crate::TARGET_PORT_GROUP],
            explicit: false,
        }
    }
}

impl PortGroups {
    /// Whether other gateways export the logical unit too.
    pub fn shared(&self) -> bool {
        self.all.len() > 1
    }

    /// Whether SET TARGET PORT GROUPS is supported (TPGS 11b): gateways that allow it.
    pub fn explicit(&self) -> bool {
        self.shared() && self.explicit
    }
}

impl LuConfig {
    /// A RAM-like LU of `size_bytes` with 512-byte blocks and the defaults that work.
    pub fn new(target_name: &str, lun: u64, size_bytes: u64) -> Self {
        LuConfig {
            target_name: target_name.to_owned(),
            lun,
            size_bytes,
            block_size: 512,
            physical_block_exponent: 0,
            vendor: "STINT".into(),
            product: "stint disk".into(),
            revision: env!("CARGO_PKG_VERSION")
                .chars()
                .filter(|c| *c != '.')
                .take(4)
                .collect(),
            serial: None,
            write_cache: true,
            write_cache_changeable: true,
            read_only: false,
            removable: false,
            inquiry_version: 0x0D,
            medium_rotation_rate: 1,
            thin_provisioning: true,
            max_transfer_bytes: 8 << 20,
            saved_mode_path: None,
            persistent_reservations_path: None,
            sanitize_pace: std::time::Duration::ZERO,
            alua_state: scsi::alua::AccessState::ActiveOptimized,
            port_groups: PortGroups::default(),
        }
    }

    /// Number of logical blocks.
    pub fn blocks(&self) -> u64 {
        self.size_bytes / u64::from(self.block_size.max(1))
    }

    /// Check the values a user can get wrong.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !matches!(self.block_size, 512 | 4096) {
            return Err(ConfigError::BlockSize(self.block_size));
        }
        if self.blocks() == 0 || self.blocks() * u64::from(self.block_size) != self.size_bytes {
            return Err(ConfigError::Size {
                size_bytes: self.size_bytes,
                block_size: self.block_size,
            });
        }
        if self.physical_block_exponent > 15 {
            return Err(ConfigError::PhysicalBlockExponent(
                self.physical_block_exponent,
            ));
        }
        if self.max_transfer_bytes < self.block_size {
            return Err(ConfigError::MaxTransfer(self.max_transfer_bytes));
        }
        Ok(())
    }
}

/// A configuration value that cannot describe a logical unit, or a file of its state that
/// cannot be read.
#[derive(Debug)]
pub enum ConfigError {
    /// LOGICAL BLOCK LENGTH IN BYTES other than 512 or 4096.
    BlockSize(u32),
    /// A capacity that is not a positive whole number of logical blocks.
    Size { size_bytes: u64, block_size: u32 },
    /// LOGICAL BLOCKS PER PHYSICAL BLOCK EXPONENT beyond its 4 bits (SBC-4 table 66).
    PhysicalBlockExponent(u8),
    /// MAXIMUM TRANSFER LENGTH (VPD B0h) of fewer bytes than one block.
    MaxTransfer(u32),
    /// A store smaller than the capacity the logical unit reports.
    StoreTooSmall { store_bytes: u64, size_bytes: u64 },
    /// The persistent reservations kept through power loss (APTPL) cannot be read.
    PersistentReservations(io::Error),
    /// The saved mode parameters cannot be read.
    SavedMode(io::Error),
    /// The device queue refused its configuration.
    Queue(qos::ConfigError),
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BlockSize(b) => write!(f, "block size {b} is not 512 or 4096"),
            Self::Size {
                size_bytes,
                block_size,
            } => write!(
                f,
                "size {size_bytes} bytes is not a positive multiple of the {block_size}-byte \
                 block size"
            ),
            Self::PhysicalBlockExponent(e) => write!(
                f,
                "physical block exponent {e} does not fit the 4-bit LBPPBE field"
            ),
            Self::MaxTransfer(bytes) => write!(
                f,
                "maximum transfer of {bytes} bytes is smaller than one block"
            ),
            Self::StoreTooSmall {
                store_bytes,
                size_bytes,
            } => write!(
                f,
                "store holds {store_bytes} bytes but the LU is configured as {size_bytes} bytes"
            ),
            Self::PersistentReservations(e) => write!(f, "persistent reservations: {e}"),
            Self::SavedMode(e) => write!(f, "saved mode parameters: {e}"),
            Self::Queue(e) => write!(f, "queue: {e}"),
        }
    }
}

impl std::error::Error for ConfigError {}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each refusal names the value, in the words `stint serve` has always printed.
    #[test]
    fn refusals_name_the_value() {
        let refused = |change: fn(&mut LuConfig)| {
            let mut config = LuConfig::new("iqn.2026-11.dev.stint:t", 0, 1 << 20);
            change(&mut config);
            config.validate().map_err(|e| e.to_string()).unwrap_err()
        };
        assert_eq!(
            refused(|c| c.block_size = 1024),
            "block size 1024 is not 512 or 4096"
        );
        assert_eq!(
            refused(|c| c.size_bytes = 1000),
            "size 1000 bytes is not a positive multiple of the 512-byte block size"
        );
        assert_eq!(
            refused(|c| c.physical_block_exponent = 16),
            "physical block exponent 16 does not fit the 4-bit LBPPBE field"
        );
        assert_eq!(
            refused(|c| c.max_transfer_bytes = 256),
            "maximum transfer of 256 bytes is smaller than one block"
        );
    }
}
