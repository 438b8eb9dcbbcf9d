//! An experiment's `[drive] write_cache` is the Caching mode page's WCE of the logical unit
//! `stint sim` runs (and `stint serve --device` exports): the same setting, not two.

use device::{Completion, DhCompletion, LuConfig, Nexus, Request, Submitted, TaskAttribute};
use scsi::command::{Command, ModeSense, PageControl};
use scsi::form;
use sim::device::{DeviceParts, DeviceSpec, QueueSpec};
use store::RamStore;

/// WCE in the current Caching page of the logical unit built from `[drive]` `write_cache`.
fn wce_of(write_cache: Option<bool>) -> bool {
    let spec = DeviceSpec {
        model: "hdd".into(),
        profile: None,
        write_cache,
        capacity: None,
        faults: None,
    };
    let drive = spec.prepare(std::path::Path::new(".")).expect("drive");
    let queue = QueueSpec::default();
    let parts = DeviceParts {
        drive: &drive,
        queue: &queue,
        cdl: qos::CdlPages::default(),
        dh: DhCompletion::default(),
        seed: 1,
    };
    let size = 1 << 30;
    let mut config = LuConfig::new("iqn.test:sim", 0, size);
    // Whatever the LU's own default, the model decides.
    config.write_cache = write_cache != Some(true);
    let store = RamStore::new(size).expect("store");
    let mut lu = parts.logical_unit(config, Box::new(store)).expect("lu");
    let nexus = Nexus {
        id: 1,
        initiator_port: "iqn.test:h,i,0x1".into(),
        class: None,
        privileged: false,
    };
    let mut sense = |cdb: &[u8]| {
        let req = Request {
            nexus: &nexus,
            lun: 0,
            tag: 1,
            cdb,
            attribute: TaskAttribute::Simple,
            data_out: &[],
            data_out_buffer_size: 0,
        };
        let mut data_in = Vec::new();
        match lu.submit_mut(0, &req, &mut data_in) {
            Submitted::Done(c) => (c, data_in),
            Submitted::Queued => panic!("queued"),
        }
    };
    let tur = Command::TestUnitReady.emit(form::TEST_UNIT_READY).unwrap();
    let _power_on = sense(&tur);
    let caching = Command::ModeSense(ModeSense {
        ten: true,
        dbd: true,
        llbaa: false,
        pc: PageControl::Current,
        page_code: scsi::mode::CACHING,
        subpage_code: 0,
        allocation_length: 255,
    })
    .emit(form::MODE_SENSE_10)
    .unwrap();
    let (c, data) = sense(&caching);
    assert_eq!(c, Completion::GOOD);
    data[8 + 2] & 0x04 != 0
}

#[test]
fn the_drives_write_cache_is_the_caching_pages_wce() {
    assert!(!wce_of(None), "the shipped profile's cache is off");
    assert!(wce_of(Some(true)));
    assert!(!wce_of(Some(false)));
}
