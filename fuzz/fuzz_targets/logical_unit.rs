//! Commands through `device::Target` as the transport hands them over: the CDB checked by
//! `transfer`, Data-Out of the length it asked for (or cut short), `submit`, and for the
//! logical unit with a device queue `advance` and `complete`; from two I_T nexuses (one
//! privileged), with task management and nexus loss in between. LUN 0 is a plain RAM logical
//! unit, LUN 1 one with a device queue and CDL, LUN 2 absent. Beyond "no panic":
//! - CHECK CONDITION always carries sense, well formed in the format the LU uses;
//! - a command never returns more data than `transfer` announced;
//! - what a plain READ returns of LUN 0 is what plain WRITEs put there (zeros before).
#![no_main]

use std::collections::BTreeMap;

use device::{
    Completion, Nexus, Request, Submitted, TaskAttribute, TaskManagement, Transfer, Verdict,
};
use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use scsi::{Command, Status};

/// Most Data-Out handed over: longer transfers get what the input holds (cut short).
const MAX_DATA_OUT: usize = 1 << 16;

fuzz_target!(|input: &[u8]| {
    let _ = run(&mut Unstructured::new(input));
});

/// What LUN 0 holds, as far as plain WRITEs tell: blocks not in the map are zero, until a
/// write of another kind makes the contents unknown (`None`).
type Shadow = Option<BTreeMap<u64, Vec<u8>>>;

struct Pending {
    nexus: usize,
    cdb: Vec<u8>,
    data_out: Vec<u8>,
    /// The initiator's Data-Out buffer: usually what it sent, sometimes another size.
    data_out_buffer_size: u32,
    attribute: TaskAttribute,
    expect: Transfer,
}

fn run(u: &mut Unstructured) -> Result<()> {
    let target = stint_fuzz::target();
    let nexuses = [nexus(1, true), nexus(2, false)];
    let mut shadow: Shadow = Some(BTreeMap::new());
    let mut pending: BTreeMap<u64, Pending> = BTreeMap::new();
    let mut now = 0u64;
    let mut tag = 0u64;
    while !u.is_empty() {
        now += u64::from(u.arbitrary::<u16>()?) * 1000;
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
                target.task_management(now, &nexuses[n], lun, tmf);
            }
            1 => target.nexus_lost(now, &nexuses[n]),
            _ => {
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
                let expect = match target.transfer(&nexuses[n], lun, &cdb) {
                    Ok(t) => t,
                    Err(sense) => {
                        check_sense(&target, lun, &sense);
                        continue;
                    }
                };
                let data_out = match expect {
                    Transfer::Out(want) => {
                        let want = want as usize;
                        let given = u.bytes(want.min(u.len()))?;
                        let mut d = given.to_vec();
                        if u.ratio(7, 8)? && want <= MAX_DATA_OUT {
                            d.resize(want, 0);
                        }
                        d
                    }
                    _ => Vec::new(),
                };
                tag += 1;
                let data_out_buffer_size = if u.ratio(7, 8)? {
                    data_out.len() as u32
                } else {
                    u.arbitrary()?
                };
                let p = Pending {
                    nexus: n,
                    cdb,
                    data_out,
                    data_out_buffer_size,
                    attribute,
                    expect,
                };
                let mut data_in = Vec::new();
                match target.submit(now, &request(&nexuses, lun, tag, &p), &mut data_in) {
                    Submitted::Done(c) => {
                        finish(&target, lun, &p, &c, &data_in, &mut shadow);
                    }
                    Submitted::Queued => {
                        assert_eq!(lun, 1, "a plain logical unit queued a command");
                        pending.insert(tag, p);
                    }
                }
            }
        }
        // The clock of LUN 1: whatever is due completes.
        let mut finished = Vec::new();
        if let Some(lu) = target.lun(1) {
            lu.advance(now, &mut finished);
            for f in finished {
                let p = pending
                    .remove(&f.tag)
                    .expect("a task finished twice or unknown");
                assert_eq!(f.nexus, nexuses[p.nexus].id);
                let mut data_in = Vec::new();
                let c = match &f.verdict {
                    Verdict::Aborted => continue,
                    Verdict::Fail(c) => c.clone(),
                    Verdict::Run => lu.complete(&f, &request(&nexuses, 1, f.tag, &p), &mut data_in),
                };
                finish(&target, 1, &p, &c, &data_in, &mut shadow);
            }
        }
    }
    Ok(())
}

fn nexus(id: u64, privileged: bool) -> Nexus {
    Nexus {
        id,
        initiator_port: format!("iqn.2026-01.dev.stint:i{id},i,0x00023d000001"),
        class: None,
        privileged,
    }
}

fn request<'a>(nexuses: &'a [Nexus; 2], lun: u64, tag: u64, p: &'a Pending) -> Request<'a> {
    Request {
        nexus: &nexuses[p.nexus],
        lun,
        tag,
        cdb: &p.cdb,
        attribute: p.attribute,
        data_out: &p.data_out,
        data_out_buffer_size: p.data_out_buffer_size,
    }
}

fn check_sense(target: &device::Target, lun: u64, sense: &scsi::Sense) {
    let mut out = Vec::new();
    target.encode_sense(lun, sense, &mut out);
    stint_fuzz::check_sense(&out);
}

fn finish(
    target: &device::Target,
    lun: u64,
    p: &Pending,
    c: &Completion,
    data_in: &[u8],
    shadow: &mut Shadow,
) {
    match (&c.status, &c.sense) {
        (Status::CheckCondition, None) => panic!("CHECK CONDITION without sense: {c:?}"),
        (_, Some(sense)) => check_sense(target, lun, sense),
        _ => {}
    }
    let most = match p.expect {
        Transfer::In(n) => n as usize,
        _ => 0,
    };
    assert!(
        data_in.len() <= most,
        "{} bytes of data-in where {most} were announced",
        data_in.len()
    );
    if lun == 0 && c.status == Status::Good {
        model(p, data_in, shadow);
    }
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
