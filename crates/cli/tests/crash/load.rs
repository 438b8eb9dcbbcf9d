//! The initiator side: sessions that write stamped blocks until the server is killed, and the
//! read-back of every block after the restart.

use crate::cdb::{emit, read, rw, test_unit_ready, write, Cdb};
use crate::model::{Model, Tally};
use crate::stamp;
use iscsi::initiator::{Initiator, LoginOptions};
use iscsi::url::IscsiUrl;
use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use scsi::command::{CacheRange, Command, ReadWrite};
use scsi::form;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub const BLOCK: usize = 4096;
pub const BLOCKS: u64 = 1024;
/// Writers, each on its own session and its own quarter of the LUN.
const SESSIONS: u64 = 4;
/// Commands each writer keeps in flight.
const DEPTH: usize = 4;
const MAX_WRITE_BLOCKS: u64 = 8;
/// Blocks per READ of the read-back.
const READ_BLOCKS: u64 = 16;

/// The cache mode a run exercises, and how its writes become durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// WCE = 1, plain writes, SYNCHRONIZE CACHE now and then.
    Sync,
    /// WCE = 1, half the writes FUA.
    Fua,
    /// WCE = 0 (`write_cache = false`): every write durable before GOOD.
    WriteThrough,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Sync => "WCE=1 + SYNCHRONIZE CACHE",
            Mode::Fua => "WCE=1 + FUA",
            Mode::WriteThrough => "WCE=0 (write-through)",
        }
    }

    pub fn write_cache(self) -> bool {
        self != Mode::WriteThrough
    }
}

/// One command in flight.
enum Op {
    Write {
        lba: u64,
        count: u64,
        generation: u64,
        fua: bool,
    },
    Sync {
        sent: u64,
    },
}

/// WRITE(10) or WRITE(16) of `count` blocks at `lba`.
fn write_cdb(lba: u64, count: u64, fua: bool, ten: bool) -> Cdb {
    let w = ReadWrite {
        fua,
        ..rw(lba, count as u32)
    };
    write(if ten { form::WRITE_10 } else { form::WRITE_16 }, w)
}

/// SYNCHRONIZE CACHE (10) or (16) of the whole LUN, IMMED = 0.
fn sync_cdb(ten: bool) -> Cdb {
    let whole = CacheRange {
        lba: 0,
        number_of_logical_blocks: 0,
        immed: false,
    };
    let form = if ten {
        form::SYNCHRONIZE_CACHE_10
    } else {
        form::SYNCHRONIZE_CACHE_16
    };
    emit(Command::SynchronizeCache(whole), form)
}

/// Logs in and consumes the restart's unit attention (POWER ON OCCURRED, SAM-6 §5.14).
async fn login(url: &IscsiUrl, isid: u8) -> Result<Initiator, String> {
    let mut opts = LoginOptions::new("iqn.2026-11.dev.stint:crash-test", Some(&url.target));
    opts.isid[5] = isid;
    let mut s = Initiator::connect_portal(&url.portal, &opts)
        .await
        .map_err(|e| format!("login: {e}"))?;
    for _ in 0..2 {
        let r = s
            .scsi_command(url.lun, &test_unit_ready(), &[], 0)
            .await
            .map_err(|e| format!("TEST UNIT READY: {e}"))?;
        if r.status == 0 {
            return Ok(s);
        }
    }
    Err("TEST UNIT READY keeps failing".into())
}

/// Writes from every session until `kill_after`, then calls `kill`; Err on anything that
/// went wrong before the kill.
pub async fn write_until_killed(
    url: &IscsiUrl,
    mode: Mode,
    model: &Arc<Mutex<Model>>,
    seed: u64,
    kill_after: Duration,
    kill: impl FnOnce(),
) -> Result<(), String> {
    let killed = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for i in 0..SESSIONS {
        let s = login(url, i as u8 + 1).await?;
        let region = i * BLOCKS / SESSIONS..(i + 1) * BLOCKS / SESSIONS;
        let rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ (i << 56));
        writers.push(tokio::spawn(writer(
            s,
            url.lun,
            region,
            mode,
            model.clone(),
            rng,
            killed.clone(),
        )));
    }
    tokio::time::sleep(kill_after).await;
    killed.store(true, Ordering::SeqCst);
    kill();
    for w in writers {
        w.await.map_err(|e| format!("writer panicked: {e}"))??;
    }
    model.lock().unwrap().crashed();
    Ok(())
}

async fn writer(
    mut s: Initiator,
    lun: u64,
    region: std::ops::Range<u64>,
    mode: Mode,
    model: Arc<Mutex<Model>>,
    mut rng: Xoshiro256PlusPlus,
    killed: Arc<AtomicBool>,
) -> Result<(), String> {
    // Errors after the kill are the crash itself.
    let gone = |what: String| {
        if killed.load(Ordering::SeqCst) {
            Ok(())
        } else {
            Err(format!("before the kill: {what}"))
        }
    };
    let mut in_flight: HashMap<u32, Op> = HashMap::new();
    let mut roll = move |n: u64| rng.next_u64() % n;
    loop {
        while in_flight.len() < DEPTH {
            let syncing = in_flight.values().any(|op| matches!(op, Op::Sync { .. }));
            let (cdb, data, op) = if mode == Mode::Sync && !syncing && roll(8) == 0 {
                let sent = model.lock().unwrap().sync_sent();
                (sync_cdb(roll(2) == 0), Vec::new(), Op::Sync { sent })
            } else {
                // A range no write of this session in flight overlaps.
                let (lba, count) = loop {
                    let lba = region.start + roll(region.end - region.start);
                    let count = (1 + roll(MAX_WRITE_BLOCKS)).min(region.end - lba);
                    let clear = in_flight.values().all(|op| match op {
                        Op::Write {
                            lba: l, count: c, ..
                        } => lba + count <= *l || l + c <= lba,
                        Op::Sync { .. } => true,
                    });
                    if clear {
                        break (lba, count);
                    }
                };
                let fua = match mode {
                    Mode::Sync => false,
                    Mode::Fua => roll(2) == 0,
                    Mode::WriteThrough => roll(4) == 0,
                };
                let generation = model.lock().unwrap().issue(lba, count);
                let mut data = vec![0; count as usize * BLOCK];
                for (i, b) in data.chunks_mut(BLOCK).enumerate() {
                    stamp::stamp(b, lba + i as u64, generation);
                }
                let op = Op::Write {
                    lba,
                    count,
                    generation,
                    fua,
                };
                (write_cdb(lba, count, fua, roll(2) == 0), data, op)
            };
            match s.submit(lun, &cdb, data, 0).await {
                Ok(itt) => in_flight.insert(itt, op),
                Err(e) => return gone(e.to_string()),
            };
        }
        let (itt, r) = match s.complete().await {
            Ok(done) => done,
            Err(e) => return gone(e.to_string()),
        };
        let op = in_flight.remove(&itt).ok_or("a response to no command")?;
        if r.status != 0 {
            return Err(format!("status {:#x}, {:?}", r.status, r.parsed_sense()));
        }
        let mut model = model.lock().unwrap();
        match op {
            Op::Write {
                lba,
                count,
                generation,
                fua,
            } => {
                let durable = mode == Mode::WriteThrough || fua;
                model.acknowledged(lba, count, generation, durable);
            }
            Op::Sync { sent } => model.sync_acknowledged(sent),
        }
    }
}

/// Reads every block of the restarted server's LUN and checks it against the model.
pub async fn read_back(
    url: &IscsiUrl,
    model: &Mutex<Model>,
    tally: &mut Tally,
) -> Result<(), String> {
    let mut s = login(url, 0x40).await?;
    for lba in (0..BLOCKS).step_by(READ_BLOCKS as usize) {
        let cdb = read(form::READ_16, rw(lba, READ_BLOCKS as u32));
        let len = (READ_BLOCKS as usize * BLOCK) as u32;
        let r = s
            .scsi_command(url.lun, &cdb, &[], len)
            .await
            .map_err(|e| format!("READ(16) at {lba}: {e}"))?;
        if r.status != 0 || r.data_in.len() != len as usize {
            return Err(format!(
                "READ(16) at {lba}: status {:#x}, {} bytes",
                r.status,
                r.data_in.len()
            ));
        }
        model.lock().unwrap().check(lba, &r.data_in, BLOCK, tally);
    }
    s.logout().await.map_err(|e| format!("logout: {e}"))?;
    Ok(())
}
