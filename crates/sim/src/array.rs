//! An erasure-coded array in virtual time (crate::erasure, docs/experiments.md `[erasure]`).
//! Each drive is a whole logical unit as `stint sim` runs one (device queue, drive model, its
//! own fault set and background job). A user read of stripe s goes out as k chunk reads,
//! READ(16) with the user read's DLD, to the drives holding the stripe's data chunks. A chunk
//! read that comes back without its data (ended by CDL policy Dh, Eh or Fh, or a MEDIUM ERROR)
//! is replaced by a read of the stripe's next chunk not yet asked for (parity first), with the
//! same DLD; when every chunk has been asked for, the failed one is read again without a limit.
//! The user read completes when k chunks are in, since any k of the k + m rebuild the data;
//! decoding is taken as free (a Reed–Solomon decode of a stripe takes microseconds on a core,
//! against milliseconds of disk).
//!
//! One thread runs every drive: the loop takes the earliest event of all drives and the host (a
//! drive before the host on ties, lower drive index first), so a point is a pure function of
//! its seed. Threads per drive would have to synchronise at every host turnaround (50 µs) and
//! the sweep already runs its points in parallel (experiments/README.md, E1, measures it).

use crate::engine::{open_nexuses, send, PointResult, PointSetup, Slot};
use crate::erasure::{Erasure, MAX_WIDTH};
use crate::error::{DeviceError, SimError};
use crate::meter::{Ended, Meter, Served};
use crate::unit::{Returned, SimUnit};
use device::Nexus;
use drive::Ns;
use qos::Outcome;
use serde::Serialize;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use workload::{stream_seed, Generator, Io, Job, SECTOR};

/// Tags of background commands have this bit; a chunk read's tag is slot × MAX_WIDTH + chunk.
const BACKGROUND_TAG: u64 = 1 << 62;
/// Random streams of drive d derive from stream DRIVE_STREAM + d of the point's seed (user
/// jobs are streams 0.., the replica u32::MAX, a single drive's faults u64::MAX).
const DRIVE_STREAM: u64 = 1 << 40;

/// The seed of drive `d`'s own streams (its fault set, its background job).
pub fn drive_seed(seed: u64, d: usize) -> u64 {
    stream_seed(seed, DRIVE_STREAM + d as u64)
}

/// What the drives did in the measured interval (after the ramp).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct ArrayStats {
    pub data: u32,
    pub parity: u32,
    pub drives: u32,
    pub chunk_bytes: u64,
    /// Completions on all drives: chunk reads, rebuilds, rereads, background commands.
    pub drive_commands: u64,
    /// Drive completions per second of the measured interval, over all drives.
    pub drive_iops: f64,
    /// Background commands completed.
    pub background: u64,
    /// Chunk reads a duration limit policy ended without data (Dh, Eh, Fh).
    pub fast_failed: u64,
    /// Chunk reads that failed otherwise (MEDIUM ERROR).
    pub errors: u64,
    /// Reads of another chunk of the stripe sent for a failed chunk read.
    pub rebuilds: u64,
    /// Failed chunk reads sent again without a limit (every chunk already asked for).
    pub rereads: u64,
    /// User reads that needed a rebuild or a reread.
    pub degraded: u64,
}

/// One user read in flight.
#[derive(Clone, Copy, Debug)]
struct UserRead {
    slot: Slot,
    stripe: u64,
    /// Bit c: chunk c has been asked for.
    asked: u64,
    /// Chunks in.
    done: u32,
    /// A chunk read exceeded a duration limit.
    missed: bool,
    degraded: bool,
}

/// One background command slot of a drive.
#[derive(Clone, Copy, Debug)]
struct Background {
    drive: usize,
    /// Its job instance: an index in `Array::background`.
    instance: usize,
}

/// A job instance's command stream and how many it has issued.
struct Instance {
    job: Job,
    generator: Generator,
    issued: u64,
}

impl Instance {
    fn new(job: Job, seed: u64) -> Self {
        Self {
            generator: Generator::new(job.clone(), seed),
            job,
            issued: 0,
        }
    }

    /// The next command at `now`; `Err(Some(t))` when the instance may issue only at `t`
    /// (rate_iops), `Err(None)` when it is done (number_ios, runtime).
    fn next(&mut self, now: Ns) -> Result<Io, Option<Ns>> {
        let job = &self.job;
        if job.number_ios.is_some_and(|n| self.issued >= n)
            || job.runtime_ns.is_some_and(|t| now >= t)
        {
            return Err(None);
        }
        let due = job.issue_time(self.issued);
        if now < due {
            return Err(Some(due));
        }
        self.issued += 1;
        Ok(self.generator.next_io())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// User slot `s` sends its next read.
    Submit(u32),
    /// User slot `s` reads chunk `c` with DLD `d` (a rebuild with the user read's, a reread
    /// with none).
    Chunk(u32, u32, u8),
    /// Background slot `b` sends its next command.
    Background(u32),
}

struct Drive {
    lu: SimUnit,
    nexuses: Vec<Nexus>,
    next: Option<Ns>,
}

struct Array<'a> {
    layout: &'a Erasure,
    setup: &'a PointSetup,
    drives: Vec<Drive>,
    users: Vec<UserRead>,
    /// User job instances, in `setup.jobs` order.
    instances: Vec<Instance>,
    background: Vec<Instance>,
    background_slots: Vec<Background>,
    events: BinaryHeap<Reverse<(Ns, u64, Event)>>,
    seq: u64,
    meter: Meter,
    stats: ArrayStats,
    /// Drive completions, the ramp included.
    commands: u64,
}

/// Runs one point on `luns`, the array's drives (fresh, each with a device queue); `setup`'s
/// jobs are the user reads, over the array's user capacity.
pub(crate) fn run(
    luns: Vec<SimUnit>,
    layout: &Erasure,
    drive_capacity: u64,
    setup: &PointSetup,
) -> Result<PointResult, SimError> {
    let drives = luns
        .into_iter()
        .map(|mut lu| Drive {
            nexuses: open_nexuses(&mut lu),
            next: lu.next_event(),
            lu,
        })
        .collect();
    let mut a = Array {
        layout,
        setup,
        drives,
        users: Vec::new(),
        instances: Vec::new(),
        background: Vec::new(),
        background_slots: Vec::new(),
        events: BinaryHeap::new(),
        seq: 0,
        meter: Meter::new(setup),
        stats: ArrayStats {
            data: layout.data,
            parity: layout.parity,
            drives: layout.drives,
            chunk_bytes: layout.chunk,
            ..ArrayStats::default()
        },
        commands: 0,
    };
    for (j, job) in setup.jobs.iter().enumerate() {
        // The same user streams as one drive's jobs would get (engine::run_point).
        a.instances.push(Instance::new(
            job.clone(),
            stream_seed(setup.seed, j as u64),
        ));
        for _ in 0..job.iodepth {
            let s = u32::try_from(a.users.len())
                .map_err(|_| SimError::field("qd", "too many outstanding commands"))?;
            a.users.push(UserRead {
                slot: Slot::new(j as u32),
                stripe: 0,
                asked: 0,
                done: 0,
                missed: false,
                degraded: false,
            });
            a.schedule(0, Event::Submit(s));
        }
    }
    if let Some(spec) = &layout.background {
        let job = spec.compile(drive_capacity)?;
        for d in 0..a.drives.len() {
            for i in 0..spec.numjobs {
                let instance = a.background.len();
                let seed = stream_seed(drive_seed(setup.seed, d), u64::from(i));
                a.background.push(Instance::new(job.clone(), seed));
                for _ in 0..job.iodepth {
                    let b = u32::try_from(a.background_slots.len()).map_err(|_| {
                        SimError::field("erasure.background", "too many outstanding commands")
                    })?;
                    a.background_slots.push(Background { drive: d, instance });
                    a.schedule(0, Event::Background(b));
                }
            }
        }
    }
    a.run()
}

impl Array<'_> {
    fn schedule(&mut self, at: Ns, event: Event) {
        self.seq += 1;
        self.events.push(Reverse((at, self.seq, event)));
    }

    fn run(mut self) -> Result<PointResult, SimError> {
        let mut done: Vec<Returned> = Vec::with_capacity(64);
        while !self.meter.done() {
            let drive_at = self
                .drives
                .iter()
                .enumerate()
                .filter_map(|(i, d)| Some((d.next?, i)))
                .min();
            let host_at = self.events.peek().map(|Reverse((t, _, _))| *t);
            match (drive_at, host_at) {
                (None, None) => break,
                // A drive first on ties: a command submitted at t is not visible to a pick at t.
                (Some((t, d)), h) if h.is_none_or(|h| t <= h) => self.advance(d, t, &mut done)?,
                _ => {
                    let Some(Reverse((now, _, event))) = self.events.pop() else {
                        break;
                    };
                    match event {
                        Event::Submit(s) => self.submit(s, now)?,
                        Event::Chunk(s, c, d) => self.read_chunk(s, c, d, now)?,
                        Event::Background(b) => self.submit_background(b, now)?,
                    }
                }
            }
        }
        // Chunk reads that failed are in the array's counts, not by sense.
        let (mut result, _errors) = self.meter.finish();
        self.stats.drive_iops = if result.interval > 0 {
            (self.stats.drive_commands as f64 * 1e9 / result.interval as f64 * 1000.0).round()
                / 1000.0
        } else {
            0.0
        };
        result.commands = self.commands;
        result.erasure = Some(self.stats);
        Ok(result)
    }

    fn advance(&mut self, d: usize, now: Ns, done: &mut Vec<Returned>) -> Result<(), SimError> {
        let Some(drive) = self.drives.get_mut(d) else {
            return Ok(());
        };
        drive.next = drive.lu.advance(now, done);
        for f in done.drain(..) {
            let outcome =
                Ended::read(f.completion.status as u8, f.completion.sense.as_ref()).outcome;
            self.commands += 1;
            let measuring = self.meter.measuring();
            if measuring {
                self.stats.drive_commands += 1;
            }
            if f.tag & BACKGROUND_TAG != 0 {
                if measuring {
                    self.stats.background += 1;
                }
                let b = (f.tag & !BACKGROUND_TAG) as u32;
                self.schedule(now + self.setup.turnaround, Event::Background(b));
            } else {
                let (s, c) = (
                    (f.tag / u64::from(MAX_WIDTH)) as u32,
                    (f.tag % u64::from(MAX_WIDTH)) as u32,
                );
                self.chunk_done(s, c, outcome, f.missed, now);
            }
        }
        Ok(())
    }

    /// Chunk `c` of user slot `s` came back.
    fn chunk_done(&mut self, s: u32, c: u32, outcome: Outcome, missed: bool, now: Ns) {
        let (k, width) = (self.layout.data, self.layout.width());
        let measuring = self.meter.measuring();
        let Some(u) = self.users.get_mut(s as usize) else {
            return;
        };
        u.missed |= missed;
        if outcome != Outcome::Good {
            u.degraded = true;
            // The stripe's next chunk not yet asked for; else this one again.
            let spare = (k..width).find(|x| u.asked & (1 << x) == 0);
            // Taken now: another chunk failing before this read goes out needs another one.
            if let Some(x) = spare {
                u.asked |= 1 << x;
            }
            if measuring {
                if outcome == Outcome::MediumError {
                    self.stats.errors += 1;
                } else {
                    self.stats.fast_failed += 1;
                }
                if spare.is_some() {
                    self.stats.rebuilds += 1;
                } else {
                    self.stats.rereads += 1;
                }
            }
            let event = match spare {
                Some(x) => Event::Chunk(s, x, u.slot.io.dld),
                None => Event::Chunk(s, c, 0),
            };
            self.schedule(now + self.setup.turnaround, event);
            return;
        }
        u.done += 1;
        if u.done < k {
            return;
        }
        let u = *u;
        if measuring && u.degraded {
            self.stats.degraded += 1;
        }
        self.meter.record(
            now,
            &u.slot.completed(now, Ended::GOOD, u.missed, Served::Drive),
        );
        self.schedule(now + self.setup.turnaround, Event::Submit(s));
    }

    /// User slot `s` sends its next read: its k data chunks with its DLD.
    fn submit(&mut self, s: u32, now: Ns) -> Result<(), SimError> {
        let Some(u) = self.users.get(s as usize) else {
            return Ok(());
        };
        let Some(instance) = self.instances.get_mut(u.slot.job as usize) else {
            return Ok(());
        };
        let io = match instance.next(now) {
            Ok(io) => io,
            Err(Some(due)) => {
                self.schedule(due, Event::Submit(s));
                return Ok(());
            }
            Err(None) => return Ok(()),
        };
        self.meter.submitted(io.class, io.dld);
        let stripe = io.lba * SECTOR / self.layout.stripe_bytes();
        if let Some(u) = self.users.get_mut(s as usize) {
            u.slot.io = io;
            u.slot.submitted_at = now;
            *u = UserRead {
                stripe,
                asked: 0,
                done: 0,
                missed: false,
                degraded: false,
                ..*u
            };
        }
        for c in 0..self.layout.data {
            self.read_chunk(s, c, io.dld, now)?;
        }
        Ok(())
    }

    /// Sends chunk `c` of user slot `s`'s stripe to its drive with DLD `dld`.
    fn read_chunk(&mut self, s: u32, c: u32, dld: u8, now: Ns) -> Result<(), SimError> {
        let Some(u) = self.users.get_mut(s as usize) else {
            return Ok(());
        };
        u.asked |= 1 << c;
        let (d, offset) = self.layout.place(u.stripe, c);
        let io = Io {
            lba: offset / SECTOR,
            blocks: u32::try_from(self.layout.chunk / SECTOR).unwrap_or(u32::MAX),
            write: false,
            class: u.slot.io.class,
            dld,
        };
        let tag = u64::from(s) * u64::from(MAX_WIDTH) + u64::from(c);
        self.send_to(d, tag, &io, now)
    }

    fn submit_background(&mut self, b: u32, now: Ns) -> Result<(), SimError> {
        let Some(slot) = self.background_slots.get(b as usize).copied() else {
            return Ok(());
        };
        let Some(instance) = self.background.get_mut(slot.instance) else {
            return Ok(());
        };
        match instance.next(now) {
            Ok(io) => self.send_to(slot.drive, BACKGROUND_TAG | u64::from(b), &io, now),
            Err(Some(due)) => {
                self.schedule(due, Event::Background(b));
                Ok(())
            }
            Err(None) => Ok(()),
        }
    }

    fn send_to(&mut self, d: usize, tag: u64, io: &Io, now: Ns) -> Result<(), SimError> {
        let Some(drive) = self.drives.get_mut(d) else {
            return Err(SimError::Device(DeviceError::NoDrive(d)));
        };
        send(&mut drive.lu, &drive.nexuses, tag, io, now)?;
        drive.next = drive.lu.next_event();
        Ok(())
    }
}
