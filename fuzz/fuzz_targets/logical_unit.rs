//! Commands through `device::Target` as the transport hands them over: the command with
//! part of its Data-Out, the rest when the target asks for it (or cut short, or failed),
//! delivered tasks run on their logical unit's data plane, and LUN 1's device queue advanced
//! as time passes; from two I_T nexuses (one privileged), with task management and nexus loss
//! in between. LUN 0 is a plain RAM logical unit, LUN 1 one with a device queue and CDL,
//! LUN 2 absent. Beyond "no panic":
//! - CHECK CONDITION always carries sense, well formed in the format the LU uses;
//! - a command never returns more data than the target announced;
//! - every task ends once: with a status, or aborted by task management;
//! - what a plain READ returns of LUN 0 is what plain WRITEs put there (zeros before).
#![no_main]

use std::collections::BTreeMap;

use device::{
    Arrival, Completion, Next, Nexus, Submitted, Target, TaskAttribute, TaskId, TaskManagement,
    Transfer,
};
use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use scsi::{Command, Status};
use stint_fuzz::Collect;

/// Most Data-Out handed over: longer transfers get what the input holds (cut short).
const MAX_DATA_OUT: usize = 1 << 16;

fuzz_target!(|input: &[u8]| {
    let _ = run(&mut Unstructured::new(input));
});

/// What LUN 0 holds, as far as plain WRITEs tell: blocks not in the map are zero, until a
/// write of another kind makes the contents unknown (`None`).
type Shadow = Option<BTreeMap<u64, Vec<u8>>>;

/// A task the target keeps, by tag (unique across both nexuses here).
struct Pending {
    nexus: usize,
    lun: u64,
    task: TaskId,
    cdb: Vec<u8>,
    data_out: Vec<u8>,
    expect: Option<Transfer>,
}

struct Harness {
    target: Target,
    nexuses: [Nexus; 2],
    shadow: Shadow,
    pending: BTreeMap<u64, Pending>,
    sink: Collect,
    now: u64,
}

fn run(u: &mut Unstructured) -> Result<()> {
    let mut h = Harness {
        target: stint_fuzz::target(),
        nexuses: [nexus(1, true), nexus(2, false)],
        shadow: Some(BTreeMap::new()),
        pending: BTreeMap::new(),
        sink: Collect::default(),
        now: 0,
    };
    let mut tag = 0u64;
    while !u.is_empty() {
        h.now += u64::from(u.arbitrary::<u16>()?) * 1000;
        let n = usize::from(u.arbitrary::<bool>()?);
        match u.choose_index(8)? {
            0 => {
                let lun = u64::from(u.int_in_range(0..=2u8)?);
                let tmf = match u.choose_index(7)? {
                    0 => TaskManagement::AbortTask(u.int_in_range(0..=tag)?),
                    1 => TaskManagement::AbortTaskSet,
                    2 => TaskManagement::ClearAca,
                    3 => TaskManagement::ClearTaskSet,
                    4 => TaskManagement::LogicalUnitReset,
                    5 => TaskManagement::TargetWarmReset,
                    _ => TaskManagement::TargetColdReset,
                };
                let nexus = &h.nexuses[n];
                h.target
                    .task_management(h.now, nexus, lun, tmf, &mut h.sink);
            }
            1 => h.target.nexus_lost(h.now, &h.nexuses[n], &mut h.sink),
            _ => {
                tag += 1;
                h.command(u, n, tag)?;
            }
        }
        // The clock of LUN 1: whatever is due moves on.
        if let Some(unit) = h.target.lun(1) {
            unit.advance(h.now, &mut h.sink);
        }
        h.deliveries()?;
    }
    Ok(())
}

impl Harness {
    /// One command from nexus `n`, with what the input says of its Data-Out.
    fn command(&mut self, u: &mut Unstructured, n: usize, tag: u64) -> Result<()> {
        let lun = u64::from(u.int_in_range(0..=2u8)?);
        let len = [6, 10, 12, 16, 32][u.choose_index(5)?];
        let mut cdb = u.bytes(len)?.to_vec();
        cdb.resize(len, 0);
        let attribute = match u.choose_index(4)? {
            0 => TaskAttribute::Simple,
            1 => TaskAttribute::Ordered,
            2 => TaskAttribute::HeadOfQueue,
            _ => TaskAttribute::Aca,
        };
        // The initiator's Data-Out buffer: usually what the CDB asks, sometimes another size.
        let data_out_buffer_size = if u.ratio(7, 8)? {
            match asked(&cdb) {
                Transfer::Out(n) => n,
                _ => 0,
            }
        } else {
            u.arbitrary()?
        };
        let first = u.int_in_range(0..=data_out_buffer_size.min(1 << 13) as usize)?;
        let immediate = u.bytes(first.min(u.len()))?.to_vec();
        let arrival = Arrival {
            nexus: &self.nexuses[n],
            lun,
            tag,
            cdb: &cdb,
            attribute,
            data_out_buffer_size,
            data_out: &immediate,
        };
        let mut data_in = Vec::new();
        let (expect, mut submitted) =
            self.target
                .command(self.now, &arrival, &mut data_in, &mut self.sink);
        let mut data_out = immediate;
        if let Submitted::WantData(task, want) = submitted {
            let want = want as usize;
            assert!(want >= data_out.len(), "asked for less than came with it");
            if u.ratio(1, 16)? {
                // What iSCSI ends a task with whose Data-Out it could not collect.
                let c = Completion::check_condition(scsi::Sense::new(
                    scsi::SenseKey::AbortedCommand,
                    scsi::Asc(0x0C, 0x0D),
                ));
                let target = &self.target;
                target.data_out_failed(self.now, lun, task, c.clone(), &mut self.sink);
                // The transport answers it with that status.
                submitted = Submitted::Done(c);
            } else {
                let more = u.bytes((want - data_out.len()).min(u.len()))?;
                data_out.extend_from_slice(more);
                if u.ratio(7, 8)? && want <= MAX_DATA_OUT {
                    data_out.resize(want, 0);
                }
                submitted = self.target.data_out(
                    self.now,
                    lun,
                    task,
                    &data_out,
                    &mut data_in,
                    &mut self.sink,
                );
            }
        }
        let p = Pending {
            nexus: n,
            lun,
            task: TaskId::from_u64(0),
            cdb,
            data_out,
            expect,
        };
        self.submitted(tag, p, submitted, &data_in);
        Ok(())
    }

    /// What the target said of a command (or of a delivered task it ran).
    fn submitted(&mut self, tag: u64, mut p: Pending, s: Submitted, data_in: &[u8]) {
        match s {
            Submitted::Done(c) => self.finish(&p, &c, data_in),
            Submitted::Queued(task) => {
                p.task = task;
                assert!(
                    self.pending.insert(tag, p).is_none(),
                    "tag {tag} in the task set twice"
                );
            }
            Submitted::WantData(..) => panic!("a task asked for its Data-Out twice"),
            Submitted::Aborted => {}
        }
    }

    /// Handles what the calls delivered, until nothing more is.
    fn deliveries(&mut self) -> Result<()> {
        while !self.sink.0.is_empty() {
            for f in std::mem::take(&mut self.sink.0) {
                let p = self
                    .pending
                    .remove(&f.tag)
                    .unwrap_or_else(|| panic!("tag {} delivered but not pending", f.tag));
                assert_eq!(
                    f.nexus, self.nexuses[p.nexus].id,
                    "delivered to another nexus"
                );
                assert_eq!(f.task, p.task, "a delivery names its task");
                match f.then {
                    Next::Aborted => {}
                    Next::Done {
                        completion,
                        data_in,
                        ..
                    } => self.finish(&p, &completion, &data_in),
                    Next::Run(op) => {
                        let mut data_in = Vec::new();
                        let s = self.target.run(
                            self.now,
                            p.lun,
                            p.task,
                            op,
                            &p.data_out,
                            &mut data_in,
                            &mut self.sink,
                        );
                        self.submitted(f.tag, p, s, &data_in);
                    }
                }
            }
        }
        Ok(())
    }

    fn finish(&mut self, p: &Pending, c: &Completion, data_in: &[u8]) {
        match (&c.status, &c.sense) {
            (Status::CheckCondition, None) => panic!("CHECK CONDITION without sense: {c:?}"),
            (_, Some(sense)) => check_sense(&self.target, p.lun, sense),
            _ => {}
        }
        let most = match p.expect {
            Some(Transfer::In(n)) => n as usize,
            _ => 0,
        };
        assert!(
            data_in.len() <= most,
            "{} bytes of data-in where {most} were announced",
            data_in.len()
        );
        if p.lun == 0 && c.status == Status::Good {
            model(p, data_in, &mut self.shadow);
        }
    }
}

/// What the CDB asks to transfer, as a well-behaved initiator sizes its buffers.
fn asked(cdb: &[u8]) -> Transfer {
    scsi::table::find(cdb)
        .ok()
        .and_then(|i| scsi::table::decode_as(i, cdb).ok())
        .map_or(Transfer::None, |c| Transfer::of(c.data_length(), 512))
}

fn nexus(id: u64, privileged: bool) -> Nexus {
    Nexus {
        id,
        initiator_port: format!("iqn.2026-01.dev.stint:i{id},i,0x00023d000001"),
        class: None,
        privileged,
    }
}

fn check_sense(target: &device::Target, lun: u64, sense: &scsi::Sense) {
    let mut out = Vec::new();
    target.encode_sense(lun, sense, &mut out);
    stint_fuzz::check_sense(&out);
}

/// Checks a plain READ of LUN 0 against the shadow and records a plain WRITE into it.
fn model(p: &Pending, data_in: &[u8], shadow: &mut Shadow) {
    let Ok((_, command)) = scsi::decode(&p.cdb) else {
        return;
    };
    match command {
        Command::Write(rw) => {
            let len = rw.transfer_length as usize * 512;
            match (shadow.as_mut(), p.data_out.get(..len)) {
                (Some(blocks), Some(data)) => {
                    for (i, block) in data.chunks(512).enumerate() {
                        blocks.insert(rw.lba + i as u64, block.to_vec());
                    }
                }
                _ => *shadow = None,
            }
        }
        Command::Read(rw) => {
            let Some(blocks) = shadow else {
                return;
            };
            assert_eq!(data_in.len(), rw.transfer_length as usize * 512);
            for (i, got) in data_in.chunks(512).enumerate() {
                let lba = rw.lba + i as u64;
                let want = blocks.get(&lba).map_or(&[0u8; 512][..], |b| &b[..]);
                assert!(
                    got == want,
                    "block {lba} reads back other data than written"
                );
            }
        }
        Command::OrWrite(_)
        | Command::CompareAndWrite(_)
        | Command::WriteAndVerify(_)
        | Command::WriteSame(_) => *shadow = None,
        _ => {}
    }
}
