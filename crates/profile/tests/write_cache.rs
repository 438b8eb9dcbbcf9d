//! `[drive] write_cache` is the Caching mode page's WCE of the logical unit it describes (the
//! one `stint sim` runs and `stint serve` exports): the same setting, not two.

use device::{
    Arrival, Backing, Completion, DhCompletion, Kept, LuConfig, Nexus, Step, TaskAttribute,
};
use profile::{DeviceParts, DeviceSpec, QueueSpec};
use scsi::command::{Command, ModeSense, PageControl};
use scsi::form;

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
    let mut config = LuConfig::new("iqn.test:profile", 0, size);
    // Whatever the LU's own default, the model decides.
    config.write_cache = write_cache != Some(true);
    let backing = Backing {
        len: size,
        unmap_granularity: 0,
        allocated: None,
    };
    let mut lu = parts
        .logical_unit(config, backing, Kept::default())
        .expect("lu");
    let nexus = Nexus {
        id: 1,
        initiator_port: "iqn.test:h,i,0x1".into(),
        class: None,
        privileged: false,
    };
    let mut sense = |cdb: &[u8]| {
        let a = Arrival {
            nexus: &nexus,
            lun: 0,
            tag: 1,
            cdb,
            attribute: TaskAttribute::Simple,
            data_out_buffer_size: 0,
            data_out: &[],
        };
        let mut data_in = Vec::new();
        match lu.command(0, &a, &mut data_in).step {
            Step::Done(c) => (c, data_in),
            other => panic!("{other:?}"),
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
