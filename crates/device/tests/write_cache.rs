//! WCE of the Caching mode page (SBC-4 §6.5.5) on a logical unit timed by the HDD model: the
//! page's default is the model's write cache setting, and MODE SELECT of WCE switches the
//! model's cache, so a write's time follows what MODE SENSE reports.

mod common;

use common::{Request, TargetExt};

use device::{
    Completion, DeviceQueue, DhCompletion, LuConfig, Nexus, Ns, Target, TaskManagement,
    TmfResponse, Unit,
};
use drive::{Hdd, HddProfile};
use qos::order::Fifo;
use qos::{QueueConfig, Scheduler};
use scsi::{Asc, SenseKey};
use std::path::PathBuf;
use std::sync::Arc;
use store::RamStore;

const MS: Ns = 1_000_000;
const SIZE: u64 = 1 << 30;

/// The default 22 TB drive model with its write cache on or off, FIFO ordered.
fn fifo_hdd(write_cache: bool) -> DeviceQueue {
    let mut profile = HddProfile::default_22tb();
    profile.cache.write_cache = write_cache;
    DeviceQueue {
        queue: QueueConfig::default(),
        scheduler: Scheduler::Policy(Box::new(Fifo)),
        drive: Box::new(Hdd::new(&profile).expect("profile")),
        dh: DhCompletion::CheckCondition,
        dld_classes: [None; 8],
    }
}

/// A unit over `queue`, configured as `config`.
fn timed(config: LuConfig, queue: DeviceQueue) -> Arc<Unit> {
    let store = Arc::new(RamStore::new(SIZE).expect("store"));
    let plane = common::plane_over(&config, store);
    Arc::new(Unit::build(config, plane, Some(queue)).expect("logical unit"))
}

/// A LU over `fifo_hdd(write_cache)`.
fn timed_lu(write_cache: bool, saved_mode_path: Option<PathBuf>) -> Arc<Unit> {
    let queue = fifo_hdd(write_cache);
    let mut config = LuConfig::new("iqn.test:t", 0, SIZE);
    // What LuConfig says is replaced by the model's setting.
    config.write_cache = !write_cache;
    config.saved_mode_path = saved_mode_path;
    timed(config, queue)
}

fn nexus() -> Nexus {
    common::nexus_of(1, "iqn.test:i,i,0x000000000001", true)
}

/// One host in virtual time: submits, and runs the clock until its command is done.
struct Host {
    target: Target,
    nexus: Nexus,
    now: Ns,
    tag: u64,
}

impl Host {
    fn new(lu: Arc<Unit>) -> Self {
        common::set_now(0);
        let mut h = Host {
            target: Target::new(vec![(0, lu)]),
            nexus: nexus(),
            now: 0,
            tag: 0,
        };
        // The power-on unit attention.
        let (c, _) = h.command(&[0; 6], &[]);
        assert_eq!(c.sense.map(|s| s.key), Some(SenseKey::UnitAttention));
        h
    }

    /// Runs `cdb` to its end; returns its completion and data-in, the clock at its end.
    fn command(&mut self, cdb: &[u8], data_out: &[u8]) -> (Completion, Vec<u8>) {
        self.tag += 1;
        let req = Request {
            tag: self.tag,
            ..common::request(&self.nexus, 0, cdb, data_out)
        };
        let mut data_in = Vec::new();
        common::set_now(self.now);
        let c = self.target.execute(&req, &mut data_in);
        self.now = common::now();
        (c, data_in)
    }

    /// A 4 KiB WRITE(16) at `lba`; returns how long it took.
    fn write(&mut self, lba: u64) -> Ns {
        let start = self.now;
        let (c, _) = self.command(&scsi::encode::rw16(true, lba, 8, 0), &[0x5A; 4096]);
        assert_eq!(c, Completion::GOOD);
        self.now - start
    }

    /// `n` 4 KiB writes, one after another, from `lba(first)` on; their mean time.
    fn mean_write(&mut self, first: u64, n: u64) -> Ns {
        (first..first + n).map(|i| self.write(lba(i))).sum::<Ns>() / n
    }

    /// The Caching mode page (MODE SENSE(10), DBD) with page control `pc`.
    fn caching_page(&mut self, pc: u8) -> Vec<u8> {
        let (c, data) = self.command(&[0x5A, 0x08, pc << 6 | 0x08, 0, 0, 0, 0, 0, 0xFF, 0], &[]);
        assert_eq!(c, Completion::GOOD);
        data[8..].to_vec()
    }

    fn wce(&mut self, pc: u8) -> bool {
        self.caching_page(pc)[2] & 0x04 != 0
    }

    /// MODE SELECT(10) of the current Caching page with WCE set to `on`, as sdparm sends it.
    fn select_wce(&mut self, on: bool, save: bool) -> Completion {
        let mut page = self.caching_page(0);
        page[0] &= 0x7F; // PS is reserved in MODE SELECT
        page[2] = page[2] & !0x04 | u8::from(on) << 2;
        let mut data = vec![0u8; 8];
        data.extend_from_slice(&page);
        let len = u16::try_from(data.len()).expect("short list");
        let mut cdb = [0x55, 0x10 | u8::from(save), 0, 0, 0, 0, 0, 0, 0, 0];
        cdb[7..9].copy_from_slice(&len.to_be_bytes());
        self.command(&cdb, &data).0
    }
}

/// Spread over the LU so every write through the cache is a seek and a rotation.
fn lba(i: u64) -> u64 {
    (i * 7_919_993) % (SIZE / 512 - 8)
}

#[test]
fn the_caching_page_default_is_the_models_setting() {
    for on in [false, true] {
        let mut h = Host::new(timed_lu(on, None));
        assert_eq!((h.wce(0), h.wce(2), h.wce(3)), (on, on, on), "WCE {on}");
        // Changeable either way: the model can switch its cache.
        assert!(h.wce(1));
    }
}

#[test]
fn mode_select_of_wce_switches_the_models_write_cache() {
    let mut h = Host::new(timed_lu(true, None));
    let cached: Vec<Ns> = (0..8).map(|i| h.write(lba(i))).collect();
    assert!(
        cached.iter().all(|t| *t < MS),
        "cached writes took {cached:?}"
    );

    // WCE off: the dirty writes are destaged first, so the next write takes their media time
    // and its own; every write after it takes a media write's time.
    assert_eq!(h.select_wce(false, false), Completion::GOOD);
    assert!(!h.wce(0));
    let first = h.write(lba(100));
    assert!(
        first > 8 * MS,
        "the first write after WCE=0 took {first} ns"
    );
    // A rotation is 8.3 ms: half of one on average, and more than a cached write's 1 ms.
    let through = h.mean_write(101, 16);
    assert!(
        (3 * MS..20 * MS).contains(&through),
        "writes through took {through} ns on average"
    );

    // And back on.
    assert_eq!(h.select_wce(true, false), Completion::GOOD);
    assert!(h.wce(0));
    let again: Vec<Ns> = (200..204).map(|i| h.write(lba(i))).collect();
    assert!(
        again.iter().all(|t| *t < MS),
        "cached writes took {again:?}"
    );
}

#[test]
fn a_saved_wce_is_the_models_setting_after_a_restart_and_a_reset() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("lu.modes");
    let mut h = Host::new(timed_lu(true, Some(path.clone())));
    assert_eq!(h.select_wce(false, true), Completion::GOOD);
    assert_eq!((h.wce(0), h.wce(2), h.wce(3)), (false, true, false));

    // Restart: the saved WCE = 0 is current, and the model writes through.
    let mut h = Host::new(timed_lu(true, Some(path)));
    assert_eq!((h.wce(0), h.wce(2), h.wce(3)), (false, true, false));
    let t = h.mean_write(1, 16);
    assert!(t > 3 * MS, "a write took {t} ns on average with WCE = 0");

    // WCE on for now only; a LOGICAL UNIT RESET brings back the saved value, model included.
    assert_eq!(h.select_wce(true, false), Completion::GOOD);
    assert!(h.write(lba(20)) < MS);
    let r = h.target.task_management(
        h.now,
        &h.nexus,
        0,
        TaskManagement::LogicalUnitReset,
        &mut common::Collect::default(),
    );
    assert_eq!(r, TmfResponse::FunctionComplete);
    let (c, _) = h.command(&[0; 6], &[]);
    assert_eq!(
        c.sense.map(|s| (s.key, s.asc)),
        Some((
            SenseKey::UnitAttention,
            Asc::BUS_DEVICE_RESET_FUNCTION_OCCURRED
        ))
    );
    assert!(!h.wce(0));
    let t = h.mean_write(30, 16);
    assert!(t > 3 * MS, "a write took {t} ns on average after the reset");
}

#[test]
fn a_write_cache_pinned_off_refuses_wce_and_keeps_the_model_writing_through() {
    let queue = fifo_hdd(true);
    let mut config = LuConfig::new("iqn.test:t", 0, SIZE);
    config.write_cache_changeable = false;
    let mut h = Host::new(timed(config, queue));
    assert!(h.wce(0), "the model's setting, pinned");
    assert!(!h.wce(1), "not changeable");
    let c = h.select_wce(false, false);
    assert_eq!(
        c.sense.map(|s| (s.key, s.asc)),
        Some((
            SenseKey::IllegalRequest,
            Asc::INVALID_FIELD_IN_PARAMETER_LIST
        ))
    );
    assert!(h.write(lba(3)) < MS, "still cached");
}
