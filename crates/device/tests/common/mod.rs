//! Helpers the device integration tests share: RAM-store targets whose units run on the
//! caller's thread (an inline data plane), nexuses past their power-on unit attention, one
//! command run through `Target::command` to its end, sense extraction and the CDBs several
//! files build.

// Each test file is its own crate and uses only some of these helpers.
#![allow(dead_code)]

pub mod gateway;
pub mod pr;

use device::{
    Arrival, Completion, Finished, LuConfig, Next, Nexus, Ns, Sink, Submitted, Target,
    TaskAttribute, TaskId, TaskManagement, Transfer, Unit,
};
use scsi::{Asc, Sense, SenseKey};
use std::sync::Arc;
use store::{InlinePlane, KeptFiles, RamStore, Store};

std::thread_local! {
    /// The time commands arrive at, on this test's thread.
    static CLOCK: std::cell::Cell<Ns> = const { std::cell::Cell::new(0) };
}

/// The time the next commands arrive at (0 until a test sets it).
pub fn now() -> Ns {
    CLOCK.with(|c| c.get())
}

/// Commands arrive at `at` from now on.
pub fn set_now(at: Ns) {
    CLOCK.with(|c| c.set(at));
}

/// Collects what the calls deliver for other tasks (a plain logical unit delivers nothing
/// unless ORDERED or task management holds or aborts tasks).
#[derive(Default)]
pub struct Collect {
    pub finished: Vec<Finished>,
    pub wakes: usize,
}

impl Sink for Collect {
    fn deliver(&mut self, f: Finished) {
        self.finished.push(f);
    }

    fn wake(&mut self, _lun: u64) {
        self.wakes += 1;
    }
}

/// A logical unit over `store`, its plane inline, keeping its state files where `config`
/// says (as `stint serve` places them beside a file LUN).
pub fn unit_over(config: LuConfig, store: Arc<dyn Store>) -> Arc<Unit> {
    Arc::new(Unit::build(config.clone(), plane_over(&config, store), None).unwrap())
}

/// The inline plane of `store` for a logical unit configured as `config`.
pub fn plane_over(config: &LuConfig, store: Arc<dyn Store>) -> Arc<InlinePlane> {
    let kept = KeptFiles {
        mode_pages: config.saved_mode_path.clone(),
        reservations: config.persistent_reservations_path.clone(),
    };
    Arc::new(InlinePlane::new(store).keeping(kept))
}

/// A logical unit over a RAM store of the configured size.
pub fn ram_lu(config: LuConfig) -> Arc<Unit> {
    let store = RamStore::new(config.size_bytes).unwrap();
    unit_over(config, Arc::new(store))
}

/// A target with one logical unit, LUN 0, over `store`.
pub fn target_with(config: LuConfig, store: Arc<dyn Store>) -> Target {
    Target::new(vec![(0, unit_over(config, store))])
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

/// One command as a test writes it: all its Data-Out sent with it.
#[derive(Debug)]
pub struct Request<'a> {
    pub nexus: &'a Nexus,
    pub lun: u64,
    pub tag: u64,
    pub cdb: &'a [u8],
    pub attribute: TaskAttribute,
    pub data_out: &'a [u8],
    /// Data-Out Buffer Size (SAM-5 §5.1).
    pub data_out_buffer_size: u32,
}

impl<'a> Request<'a> {
    pub fn arrival(&self) -> Arrival<'a> {
        Arrival {
            nexus: self.nexus,
            lun: self.lun,
            tag: self.tag,
            cdb: self.cdb,
            attribute: self.attribute,
            data_out_buffer_size: self.data_out_buffer_size,
            data_out: self.data_out,
        }
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

/// What the tests ask of a target besides its own calls.
pub trait TargetExt {
    /// Runs a command to its end, driving the units' time when it waits; read data goes to
    /// `data_in`. Panics when task management aborts it.
    fn execute(&self, req: &Request, data_in: &mut Vec<u8>) -> Completion;
    /// [`Self::execute`], `None` when task management aborted the command (TAS = 0: no
    /// status).
    fn try_execute(&self, req: &Request, data_in: &mut Vec<u8>) -> Option<Completion>;
    /// Direction and length `cdb` asks for, or the sense it is refused with before any of
    /// its data is asked for (the CDB's checks and a write's range): what an iSCSI target
    /// knows before it sends an R2T. Probed on a nexus of its own, which then goes.
    fn transfer(&self, nexus: &Nexus, lun: u64, cdb: &[u8]) -> Result<Transfer, Sense>;
}

impl TargetExt for Target {
    fn execute(&self, req: &Request, data_in: &mut Vec<u8>) -> Completion {
        self.try_execute(req, data_in)
            .unwrap_or_else(|| panic!("{:02X?} was aborted", req.cdb))
    }

    fn try_execute(&self, req: &Request, data_in: &mut Vec<u8>) -> Option<Completion> {
        let mut sink = Collect::default();
        let mut submitted = self.command(now(), &req.arrival(), data_in, &mut sink).1;
        if let Submitted::WantData(task, _) = submitted {
            // The Data-Out sent is all there is (less than the buffer size said).
            submitted = self.data_out(now(), req.lun, task, req.data_out, data_in, &mut sink);
        }
        match submitted {
            Submitted::Done(c) => Some(c),
            Submitted::Queued(task) => drive(self, req, task, data_in, sink),
            Submitted::Aborted => None,
            Submitted::WantData(..) => panic!("{:02X?} wants more data", req.cdb),
        }
    }

    fn transfer(&self, nexus: &Nexus, lun: u64, cdb: &[u8]) -> Result<Transfer, Sense> {
        let probe = Nexus {
            id: nexus.id + 1_000_000,
            ..nexus.clone()
        };
        let a = Arrival {
            nexus: &probe,
            lun,
            tag: 1,
            cdb,
            attribute: TaskAttribute::Simple,
            data_out_buffer_size: u32::MAX,
            data_out: &[],
        };
        let mut sink = Collect::default();
        let (transfer, submitted) = self.command(now(), &a, &mut Vec::new(), &mut sink);
        let refused = match &submitted {
            Submitted::Done(c) => c.sense.clone(),
            Submitted::WantData(..) | Submitted::Queued(_) => {
                let abort = TaskManagement::AbortTask(1);
                self.task_management(now(), &probe, lun, abort, &mut sink);
                None
            }
            Submitted::Aborted => None,
        };
        self.nexus_lost(now(), &probe, &mut sink);
        transfer.ok_or_else(|| refused.expect("a refusal carries sense"))
    }
}

/// Drives the units' time (virtual, from [`now`]) until `task` of `req` ends: what its unit's
/// driver would do in a server (deadlines, background work), and what its transport would do
/// with its delivered operations. The clock stays at the time it ended.
fn drive(
    t: &Target,
    req: &Request,
    task: TaskId,
    data_in: &mut Vec<u8>,
    mut sink: Collect,
) -> Option<Completion> {
    let mut now = now();
    for _ in 0..1_000_000 {
        let mut next: Option<Ns> = None;
        for (_, unit) in t.units() {
            if let Some(at) = unit.advance(now, &mut sink) {
                next = Some(next.map_or(at, |n| n.min(at)));
            }
        }
        for f in std::mem::take(&mut sink.finished) {
            if f.task != task || f.nexus != req.nexus.id {
                continue;
            }
            match f.then {
                Next::Done {
                    completion,
                    data_in: data,
                    ..
                } => {
                    data_in.extend_from_slice(&data);
                    set_now(now);
                    return Some(completion);
                }
                Next::Run(op) => {
                    set_now(now);
                    match t.run(now, req.lun, task, op, req.data_out, data_in, &mut sink) {
                        Submitted::Done(c) => return Some(c),
                        Submitted::Aborted => return None,
                        Submitted::Queued(_) => {}
                        other => panic!("{other:?}"),
                    }
                }
                Next::Aborted => {
                    set_now(now);
                    return None;
                }
            }
        }
        if let Some(at) = next {
            now = now.max(at);
        }
    }
    panic!("{:02X?} never ended", req.cdb)
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
