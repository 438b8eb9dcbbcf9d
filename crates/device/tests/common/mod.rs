//! Helpers the device integration tests share: a RAM-store target, nexuses past their
//! power-on unit attention, one command run through `Target::execute`, sense extraction and
//! the CDBs several files build.

// Each test file is its own crate and uses only some of these helpers.
#![allow(dead_code)]

use device::{Completion, LogicalUnit, LuConfig, Nexus, Request, Target, TaskAttribute};
use scsi::{Asc, SenseKey};
use std::sync::Arc;
use store::{RamStore, Store};

/// A logical unit over a RAM store of the configured size.
pub fn ram_lu(config: LuConfig) -> Arc<LogicalUnit> {
    let store = RamStore::new(config.size_bytes).unwrap();
    Arc::new(LogicalUnit::new(config, Box::new(store)).unwrap())
}

/// A target with one logical unit, LUN 0, over `store`.
pub fn target_with(config: LuConfig, store: Box<dyn Store>) -> Target {
    Target::new(vec![(
        0,
        Arc::new(LogicalUnit::new(config, store).unwrap()),
    )])
}

/// A target with one RAM logical unit, LUN 0.
pub fn ram_target(config: LuConfig) -> Target {
    Target::new(vec![(0, ram_lu(config))])
}

/// A target with one RAM logical unit of `blocks` 512-byte blocks, as `edit` sets it up.
pub fn edited_target(blocks: u64, edit: impl FnOnce(&mut LuConfig)) -> Target {
    let mut config = LuConfig::new("iqn.test:t", 0, blocks * 512);
    edit(&mut config);
    ram_target(config)
}

/// Privileged nexus `id` of initiator `iqn.test:i{id}` (ISID 1).
pub fn nexus(id: u64) -> Nexus {
    nexus_of(id, &format!("iqn.test:i{id},i,0x000000000001"), true)
}

pub fn nexus_of(id: u64, initiator_port: &str, privileged: bool) -> Nexus {
    Nexus {
        id,
        initiator_port: initiator_port.into(),
        class: None,
        privileged,
    }
}

/// A SIMPLE task, tag 0, with all of `data_out` sent.
pub fn request<'a>(n: &'a Nexus, lun: u64, cdb: &'a [u8], data_out: &'a [u8]) -> Request<'a> {
    Request {
        nexus: n,
        lun,
        tag: 0,
        cdb,
        attribute: TaskAttribute::Simple,
        data_out,
        data_out_buffer_size: data_out.len() as u32,
    }
}

/// Runs a command on `lun`; returns its completion and data-in.
pub fn run_on(
    t: &Target,
    n: &Nexus,
    lun: u64,
    cdb: &[u8],
    data_out: &[u8],
) -> (Completion, Vec<u8>) {
    let mut data_in = Vec::new();
    let c = t.execute(&request(n, lun, cdb, data_out), &mut data_in);
    (c, data_in)
}

/// Runs a command on LUN 0.
pub fn run(t: &Target, n: &Nexus, cdb: &[u8], data_out: &[u8]) -> (Completion, Vec<u8>) {
    run_on(t, n, 0, cdb, data_out)
}

/// `n` past its power-on unit attention on LUN 0: one TEST UNIT READY taken, the next GOOD.
pub fn ready_as(t: &Target, n: Nexus) -> Nexus {
    let _ua = run(t, &n, &[0; 6], &[]);
    assert_eq!(run(t, &n, &[0; 6], &[]).0, Completion::GOOD);
    n
}

/// `nexus(id)` past its power-on unit attention on LUN 0.
pub fn ready(t: &Target, id: u64) -> Nexus {
    ready_as(t, nexus(id))
}

/// Sense key and ASC of a completion that must carry sense data.
pub fn sense_of(c: &Completion) -> (SenseKey, Asc) {
    let s = c.sense.as_ref().expect("sense");
    (s.key, s.asc)
}

/// The sense-key specific field pointer (SPC-5 §4.4.2.3): byte and bit.
pub fn field_pointer(c: &Completion) -> (u16, Option<u8>) {
    let f = c
        .sense
        .as_ref()
        .and_then(|s| s.field)
        .expect("field pointer");
    (f.byte, f.bit)
}

/// READ (10).
pub fn read10(lba: u32, blocks: u16) -> [u8; 10] {
    let mut c = [0u8; 10];
    c[0] = 0x28;
    c[2..6].copy_from_slice(&lba.to_be_bytes());
    c[7..9].copy_from_slice(&blocks.to_be_bytes());
    c
}

/// READ (16) without a duration limit.
pub fn read16(lba: u64, blocks: u32) -> [u8; 16] {
    scsi::encode::rw16(false, lba, blocks, 0)
}

/// WRITE (16) without a duration limit.
pub fn write16(lba: u64, blocks: u32) -> [u8; 16] {
    scsi::encode::rw16(true, lba, blocks, 0)
}
