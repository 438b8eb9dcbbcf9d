//! The discrete-event loop of one sweep point: closed-loop host jobs feeding the logical unit
//! that `stint serve` exports (its device queue owns the drive model), through the same CDBs,
//! status and sense as on the wire: each I/O is a READ(16) or WRITE(16) with its DLD, sent on
//! the nexus of its priority class (like an NVMe submission queue). Single-threaded, u64 ns
//! clock, events in a `BinaryHeap` keyed by (time, sequence) so equal times run in insertion
//! order; every random draw comes from a seeded stream, so a point is a pure function of its
//! setup and seed.

use crate::error::{DeviceError, SimError};
use crate::host::{self as host_model, Eh};
use crate::meter::{Completed, Ended, Meter, Served};
use crate::replica::Replica;
use crate::sla::Scope;
use crate::unit::{Returned, SimUnit};
use device::{Arrival, Completion, Nexus, TaskAttribute};
use drive::Ns;
use qos::{Class, Outcome, CLASSES};
use scsi::command::{Command, ReadWrite};
use scsi::encode::{Cdb, EncodeError};
use scsi::form;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use workload::{stream_seed, Generator, Io, Job, LatencyStats, Rng, SECTOR};

/// When a point stops measuring.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Stop {
    /// After this many measured completions.
    Ios(u64),
    /// After this much simulated time past the ramp.
    Runtime(Ns),
}

/// Everything one point needs besides the queue.
#[derive(Clone, Debug)]
pub struct PointSetup {
    /// Job instances (numjobs already expanded), each with its iodepth.
    pub jobs: Vec<Job>,
    /// Host turnaround between a completion and the next submission on that slot.
    pub turnaround: Ns,
    /// Completions discarded before measuring.
    pub ramp: u64,
    pub stop: Stop,
    /// Where fast-failed reads are re-served from (experiments/README.md, A5, B4), if anywhere.
    pub replica: Option<Replica>,
    /// What the host's error handling costs on a CDL failure (SAS, SATA libata).
    pub host: host_model::Host,
    /// The commands the experiment's SLA covers, if it has one.
    pub sla: Option<Scope>,
    pub seed: u64,
}

/// What one point measured.
#[derive(Clone, Debug, Default)]
pub struct PointResult {
    pub total: LatencyStats,
    /// Per (class, DLD) group, indexed by [`group`]; created when the group's first command
    /// is submitted (a histogram is large, and most points use two or three groups).
    pub groups: Vec<Option<LatencyStats>>,
    /// The commands the experiment's SLA covers (empty without an SLA).
    pub sla: LatencyStats,
    /// Per job of the experiment, its instances together, in file order: name, statistics.
    pub jobs: Vec<(String, LatencyStats)>,
    /// Length of the measured interval.
    pub interval: Ns,
    /// Completions simulated, ramp included.
    pub commands: u64,
    /// An erasure-coded array's drive-side counts (crate::array); `None` for one drive.
    pub erasure: Option<crate::array::ArrayStats>,
}

/// Commands are reported per priority class and duration limit descriptor: class `c` with
/// DLD `d` is group `c * 8 + d`.
pub const GROUPS: usize = CLASSES * 8;

pub fn group(class: Class, dld: u8) -> usize {
    class.index() * 8 + usize::from(dld.min(7))
}

/// A group's name: the class name, plus `-dld<n>` for duration-limited commands
/// ("medium", "medium-dld1").
pub fn group_name(group: usize) -> String {
    let class = Class::from_index(group / 8).map_or("?", Class::name);
    match group % 8 {
        0 => class.to_owned(),
        dld => format!("{class}-dld{dld}"),
    }
}

impl PointResult {
    /// An empty result for `setup`, and the index in `jobs` of each job instance.
    pub fn new(setup: &PointSetup) -> (PointResult, Vec<usize>) {
        let mut jobs: Vec<(String, LatencyStats)> = Vec::new();
        let job_of = setup
            .jobs
            .iter()
            .map(|instance| {
                jobs.iter()
                    .position(|(name, _)| *name == instance.name)
                    .unwrap_or_else(|| {
                        jobs.push((instance.name.clone(), LatencyStats::new()));
                        jobs.len() - 1
                    })
            })
            .collect();
        let result = PointResult {
            groups: vec![None; GROUPS],
            jobs,
            ..PointResult::default()
        };
        (result, job_of)
    }

    /// Used groups in class order, then DLD order.
    pub fn used_groups(&self) -> impl Iterator<Item = (usize, &LatencyStats)> {
        self.groups
            .iter()
            .enumerate()
            .filter_map(|(g, stats)| Some((g, stats.as_ref()?)))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum HostEvent {
    /// The host slot submits its next command.
    Submit(u32),
    /// A fast-failed read's data arrived from the replica.
    Reserved(u32),
    /// The host's error handling is done: held and requeued commands go out.
    EhDone,
}

/// One host slot: a job instance's outstanding command (closed loop: one at a time).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Slot {
    pub(crate) job: u32,
    pub(crate) io: Io,
    pub(crate) submitted_at: Ns,
    /// What the device reported for a read now being re-served: its end, limit missed.
    device: (Ended, bool),
    /// The command is in the device.
    in_device: bool,
}

impl Slot {
    /// Job `job`'s slot, before its first command.
    pub(crate) fn new(job: u32) -> Self {
        Self {
            job,
            io: placeholder_io(),
            submitted_at: 0,
            device: (Ended::GOOD, false),
            in_device: false,
        }
    }

    /// Its command, ended so at `now`, for the meter.
    pub(crate) fn completed(
        &self,
        now: Ns,
        ended: Ended,
        missed: bool,
        served: Served,
    ) -> Completed {
        Completed {
            instance: self.job as usize,
            io: self.io,
            latency: now.saturating_sub(self.submitted_at),
            ended,
            missed,
            served,
        }
    }
}

struct Host {
    /// One nexus per priority class.
    nexuses: Vec<Nexus>,
    generators: Vec<Generator>,
    /// Commands each job instance has issued.
    issued: Vec<u64>,
    slots: Vec<Slot>,
    events: BinaryHeap<Reverse<(Ns, u64, HostEvent)>>,
    seq: u64,
    replica_rng: Rng,
    /// The host's error handling, and the slots waiting for it to end: those that were to
    /// submit (false) and those whose aborted command goes out again (true).
    eh: Eh,
    held: Vec<(u32, bool)>,
    /// Commands in the device.
    in_device: usize,
}

impl Host {
    fn schedule(&mut self, at: Ns, event: HostEvent) {
        self.seq += 1;
        self.events.push(Reverse((at, self.seq, event)));
    }
}

/// One nexus per priority class on `lu`, each past its power-on unit attention.
pub(crate) fn open_nexuses(lu: &mut SimUnit) -> Vec<Nexus> {
    let nexuses: Vec<Nexus> = (0u64..)
        .zip(Class::ALL)
        .map(|(id, class)| Nexus {
            id,
            initiator_port: format!("sim-{},i,0x000000000001", class.name()),
            class: Some(class),
            // The simulator's jobs own the device.
            privileged: true,
        })
        .collect();
    // Every nexus starts with the power-on unit attention: clear it as an initiator would.
    // TEST UNIT READY has no field a form could refuse.
    let cdb = Command::TestUnitReady.emit(form::TEST_UNIT_READY);
    for n in &nexuses {
        let tur = Arrival {
            nexus: n,
            lun: 0,
            tag: u64::MAX,
            cdb: cdb.as_deref().unwrap_or_default(),
            attribute: TaskAttribute::Simple,
            data_out_buffer_size: 0,
            data_out: &[],
        };
        lu.submit(0, &tur);
    }
    nexuses
}

/// Runs one point to its stop condition on `lu` (fresh, with a device queue), its only user.
pub(crate) fn run_point(lu: &mut SimUnit, setup: &PointSetup) -> Result<PointResult, SimError> {
    let nexuses = open_nexuses(lu);
    let mut host = Host {
        nexuses,
        generators: Vec::with_capacity(setup.jobs.len()),
        issued: vec![0; setup.jobs.len()],
        slots: Vec::new(),
        events: BinaryHeap::new(),
        seq: 0,
        replica_rng: Rng::new(stream_seed(setup.seed, u64::from(u32::MAX))),
        eh: Eh::Idle,
        held: Vec::new(),
        in_device: 0,
    };
    for (j, job) in setup.jobs.iter().enumerate() {
        // Streams depend on the job's position only, so every point and variant of an
        // experiment sees the same command sequence (common random numbers).
        host.generators.push(Generator::new(
            job.clone(),
            stream_seed(setup.seed, j as u64),
        ));
        for _ in 0..job.iodepth {
            let slot = u32::try_from(host.slots.len())
                .map_err(|_| SimError::field("qd", "too many outstanding commands"))?;
            host.slots.push(Slot::new(j as u32));
            host.schedule(0, HostEvent::Submit(slot));
        }
    }
    let mut meter = Meter::new(setup);
    let mut done: Vec<Returned> = Vec::with_capacity(64);
    let mut device_at = lu.next_event();
    while !meter.done() {
        let host_at = host.events.peek().map(|Reverse((t, _, _))| *t);
        match (device_at, host_at) {
            (None, None) => break,
            // Device first on ties: a command submitted at t is not visible to a pick at t.
            (Some(d), None) => {
                device_at = advance(lu, &mut host, &mut meter, setup, &mut done, d);
            }
            (Some(d), Some(h)) if d <= h => {
                device_at = advance(lu, &mut host, &mut meter, setup, &mut done, d);
            }
            _ => {
                let Some(Reverse((now, _, event))) = host.events.pop() else {
                    break;
                };
                match event {
                    // Error handling holds the queue: the slot waits for it.
                    HostEvent::Submit(s) if host.eh != Eh::Idle => host.held.push((s, false)),
                    // An EhDone that an extended EH outlived.
                    HostEvent::EhDone if matches!(host.eh, Eh::Until(t) if now < t) => {}
                    HostEvent::EhDone => {
                        host.eh = Eh::Idle;
                        for (s, again) in std::mem::take(&mut host.held) {
                            if again {
                                issue(lu, &mut host, now, s)?;
                                device_at = lu.next_event();
                            } else {
                                host.schedule(now, HostEvent::Submit(s));
                            }
                        }
                    }
                    HostEvent::Submit(s) => {
                        if let Some(io) = submit(lu, &mut host, setup, now, s)? {
                            device_at = lu.next_event();
                            meter.submitted(io.class, io.dld);
                        }
                    }
                    HostEvent::Reserved(s) => {
                        if let Some(slot) = host.slots.get(s as usize).copied() {
                            let (ended, missed) = slot.device;
                            meter.record(now, &slot.completed(now, ended, missed, Served::Replica));
                            host.schedule(now + setup.turnaround, HostEvent::Submit(s));
                        }
                    }
                }
            }
        }
    }
    // The simulator reports its CDL outcomes in the class counters, not by sense (report.rs).
    let (result, _errors) = meter.finish();
    Ok(result)
}

fn advance(
    lu: &mut SimUnit,
    host: &mut Host,
    meter: &mut Meter,
    setup: &PointSetup,
    done: &mut Vec<Returned>,
    now: Ns,
) -> Option<Ns> {
    let mut next = lu.advance(now, done);
    for e in done.drain(..) {
        let c = e.completion;
        if let Some(requeued) = complete(lu, host, meter, setup, e.tag, now, &c, e.missed) {
            next = requeued.or(lu.next_event());
        }
    }
    if host.eh == Eh::Draining && host.in_device == 0 {
        // The queue is empty: the non-queued READ LOG of the sense data runs now.
        host.eh = Eh::Until(now + setup.host.eh);
        host.schedule(now + setup.host.eh, HostEvent::EhDone);
    }
    next
}

fn placeholder_io() -> Io {
    Io {
        lba: 0,
        blocks: 0,
        write: false,
        class: Class::Medium,
        dld: 0,
    }
}

/// Issues the slot's next command, if its job is not finished; returns it.
fn submit(
    lu: &mut SimUnit,
    host: &mut Host,
    setup: &PointSetup,
    now: Ns,
    s: u32,
) -> Result<Option<Io>, SimError> {
    let Some(slot) = host.slots.get_mut(s as usize) else {
        return Ok(None);
    };
    let j = slot.job as usize;
    let (Some(job), Some(generator), Some(issued)) = (
        setup.jobs.get(j),
        host.generators.get_mut(j),
        host.issued.get_mut(j),
    ) else {
        return Ok(None);
    };
    if job.number_ios.is_some_and(|n| *issued >= n) || job.runtime_ns.is_some_and(|t| now >= t) {
        return Ok(None);
    }
    let due = job.issue_time(*issued);
    if now < due {
        // rate_iops: the slot waits for the job's next issue time.
        host.schedule(due, HostEvent::Submit(s));
        return Ok(None);
    }
    *issued += 1;
    let io = generator.next_io();
    *slot = Slot {
        io,
        submitted_at: now,
        ..*slot
    };
    issue(lu, host, now, s)?;
    Ok(Some(io))
}

/// Sends the slot's command to the device (again, for one the host requeued).
fn issue(lu: &mut SimUnit, host: &mut Host, now: Ns, s: u32) -> Result<(), SimError> {
    let Some(slot) = host.slots.get_mut(s as usize) else {
        return Ok(());
    };
    let io = slot.io;
    slot.in_device = true;
    host.in_device += 1;
    send(lu, &host.nexuses, u64::from(s), &io, now)
}

/// `io` as a READ(16) or WRITE(16) with its DLD to a logical unit of `block`-byte blocks, as
/// a host sends it (the simulator's and `stint bench`'s).
pub fn medium_cdb(io: &Io, block: u64) -> Result<Cdb, EncodeError> {
    let rw = ReadWrite {
        lba: io.lba * SECTOR / block,
        transfer_length: u32::try_from(u64::from(io.blocks) * SECTOR / block).unwrap_or(u32::MAX),
        dpo: false,
        fua: false,
        group_number: 0,
        dld: io.dld,
    };
    if io.write {
        Command::Write(rw).emit(form::WRITE_16)
    } else {
        Command::Read(rw).emit(form::READ_16)
    }
}

/// Submits `io` to `lu` as a READ(16) or WRITE(16) with its DLD, tagged `tag`, on the nexus of
/// its class.
pub(crate) fn send(
    lu: &mut SimUnit,
    nexuses: &[Nexus],
    tag: u64,
    io: &Io,
    now: Ns,
) -> Result<(), SimError> {
    let cdb = medium_cdb(io, u64::from(lu.block_size())).map_err(|error| {
        SimError::Device(DeviceError::Unencodable {
            io: format!("{io:?}"),
            error,
        })
    })?;
    // The error only built when there is one: `ok_or` would build and drop it every time.
    let Some(nexus) = nexuses.get(io.class.index()) else {
        return Err(SimError::Device(DeviceError::NoNexus(io.class)));
    };
    let req = Arrival {
        nexus,
        lun: 0,
        tag,
        cdb: &cdb,
        attribute: TaskAttribute::Simple,
        // The simulator times commands and moves no data.
        data_out_buffer_size: 0,
        data_out: &[],
    };
    if let Some(c) = lu.submit(now, &req) {
        // Refused at once (a CDB the LU cannot take): the workload does not fit the device.
        return Err(SimError::Device(DeviceError::Refused {
            cdb: cdb.to_vec(),
            sense: c.sense,
        }));
    }
    Ok(())
}

/// A command came back: its slot is measured (or its read re-served from the replica), and
/// the host's error handling starts if its transport needs it. Returns `Some` when commands
/// were aborted out of the device (with the device's next event after that).
#[allow(clippy::too_many_arguments)]
fn complete(
    lu: &mut SimUnit,
    host: &mut Host,
    meter: &mut Meter,
    setup: &PointSetup,
    tag: u64,
    at: Ns,
    c: &Completion,
    missed: bool,
) -> Option<Option<Ns>> {
    let s = u32::try_from(tag).ok()?;
    let slot = host.slots.get_mut(s as usize)?;
    slot.in_device = false;
    host.in_device -= 1;
    let ended = Ended::read(c.status as u8, c.sense.as_ref());
    let failed = ended.outcome != Outcome::Good;
    let requeued = handle_error(lu, host, &setup.host, s, ended.outcome, at);
    let slot = host.slots.get_mut(s as usize)?;
    // A read that came back without data is re-served from a replica (experiments/README.md, A5,
    // B4); its latency is counted when the replica answers, with the device's outcome.
    if let (true, false, Some(replica)) = (failed, slot.io.write, &setup.replica) {
        slot.device = (ended, missed);
        let at = at + replica.sample(&mut host.replica_rng);
        host.schedule(at, HostEvent::Reserved(s));
        return requeued;
    }
    let served = Served::by_drive(ended.outcome);
    meter.record(at, &slot.completed(at, ended, missed, served));
    host.schedule(at + setup.turnaround, HostEvent::Submit(s));
    requeued
}

/// The host's error handling of slot `s`'s outcome (crate::host). An abort on SATA fails every
/// other queued command: they are aborted in the device and go out again, with their first
/// submission time, when EH has read the error log. A Dh completion on libata holds the queue
/// until it drains, then reads the sense log. Returns `Some` when commands were aborted.
fn handle_error(
    lu: &mut SimUnit,
    host: &mut Host,
    model: &host_model::Host,
    s: u32,
    outcome: Outcome,
    now: Ns,
) -> Option<Option<Ns>> {
    if outcome.is_aborted() && model.abort_fails_the_queue() {
        for (other, slot) in (0u32..).zip(host.slots.iter_mut()) {
            if other == s || !slot.in_device {
                continue;
            }
            let nexus = host.nexuses.get(slot.io.class.index()).map_or(0, |n| n.id);
            if lu.abort_task(now, nexus, u64::from(other)) {
                slot.in_device = false;
                host.in_device -= 1;
                host.held.push((other, true));
            }
        }
        let until = match host.eh {
            Eh::Until(t) => t.max(now + model.eh),
            _ => now + model.eh,
        };
        host.eh = Eh::Until(until);
        host.schedule(until, HostEvent::EhDone);
        return Some(lu.next_event());
    }
    if outcome == Outcome::CompletedUnavailable
        && model.sense_stalls_the_queue()
        && host.eh == Eh::Idle
    {
        host.eh = Eh::Draining;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use device::{DeviceQueue, LuConfig};
    use drive::{Drive, Instant, MediaOp};
    use qos::order::Fifo;
    use qos::{CdlPages, QueueConfig, Scheduler};
    use workload::JobSpec;

    fn job(text: &str) -> Job {
        let spec: JobSpec = toml::from_str(&format!("name = \"j\"\n{text}")).unwrap();
        spec.compile(1 << 40).unwrap()
    }

    fn setup(jobs: Vec<Job>, stop: Stop) -> PointSetup {
        PointSetup {
            jobs,
            turnaround: 50_000,
            ramp: 0,
            stop,
            replica: None,
            host: host_model::Host::default(),
            sla: None,
            seed: 1,
        }
    }

    /// A 1 TiB logical unit timed by `drive`, FIFO ordered.
    fn lu(drive: Box<dyn Drive + Send>, cdl: CdlPages) -> SimUnit {
        let queue = DeviceQueue {
            queue: QueueConfig {
                cdl,
                ..QueueConfig::default()
            },
            scheduler: Scheduler::Policy(Box::new(Fifo)),
            drive,
            dh: device::DhCompletion::default(),
            dld_classes: [None; 8],
        };
        let backing = device::Backing {
            len: 1 << 40,
            unmap_granularity: 0,
            allocated: None,
        };
        let lu = device::LogicalUnit::new(
            LuConfig::new("iqn.t:sim", 0, 1 << 40),
            backing,
            device::Kept::default(),
            Some(queue),
        )
        .unwrap();
        SimUnit::new(lu)
    }

    fn instant_lu() -> SimUnit {
        lu(Box::new(Instant), CdlPages::default())
    }

    #[test]
    fn closed_loop_on_an_instant_drive_runs_at_the_turnaround_rate() {
        // Zero service time: each of the 4 slots cycles every 50 µs, so 80,000 IOPS, latency 0.
        let r = run_point(
            &mut instant_lu(),
            &setup(vec![job("iodepth = 4")], Stop::Ios(4000)),
        )
        .unwrap();
        assert_eq!(r.total.count(), 4000);
        let s = r.total.summary(r.interval);
        assert_eq!(s.lat_ms.max, 0.0);
        // 4000 completions after the first: 999 more cycles of 50 µs.
        assert_eq!(r.interval, 999 * 50_000);
        assert!(
            (s.iops - 4000.0 / (999.0 * 50e-6)).abs() < 1.0,
            "{}",
            s.iops
        );
        assert_eq!(r.commands, 4000);
    }

    #[test]
    fn ramp_is_discarded_and_groups_split_by_class_and_dld() {
        let jobs = vec![job(
            "iodepth = 2\ncmdprio_percentage = 50\ncmdprio_hint = 3\ncmdprio_class = \"rt\"",
        )];
        let mut s = setup(jobs, Stop::Ios(1000));
        s.ramp = 100;
        let r = run_point(&mut instant_lu(), &s).unwrap();
        assert_eq!(r.commands, 1100);
        assert_eq!(r.total.count(), 1000);
        let names: Vec<String> = r.used_groups().map(|(g, _)| group_name(g)).collect();
        assert_eq!(names, ["high-dld3", "medium"]);
        let counts: Vec<u64> = r.used_groups().map(|(_, s)| s.count()).collect();
        assert_eq!(counts.iter().sum::<u64>(), 1000);
        assert!(counts.iter().all(|c| (400..600).contains(c)), "{counts:?}");
    }

    /// One actuator, every command exactly 10 ms.
    struct TenMs;
    impl Drive for TenMs {
        fn parallelism(&self) -> usize {
            1
        }
        fn positioning_time(&self, _: Ns, _: &MediaOp) -> Ns {
            0
        }
        fn start(&mut self, now: Ns, _: &MediaOp) -> drive::Service {
            drive::Service {
                done_at: now + 10_000_000,
                outcome: drive::MediaOutcome::Ok,
                recovery: 0,
            }
        }
        fn flush(&mut self, now: Ns) -> Ns {
            now
        }
    }

    #[test]
    fn a_fast_failed_read_counts_its_replica_latency() {
        // QD 3 at t = 0 on a 10 ms drive, DLD 1 = 15 ms inactive limit, Fh: A runs 0–10 ms,
        // B 10–20 ms, C is aborted at 15 ms and re-served 1 ms later (latency 16 ms).
        let pages = profile::CdlSpec {
            read: vec![profile::DescriptorSpec {
                dld: 1,
                inactive_ms: Some(15.0),
                inactive_policy: Some("Fh".into()),
                ..Default::default()
            }],
            ..Default::default()
        }
        .pages()
        .unwrap();
        let mut lu = lu(Box::new(TenMs), pages);
        let mut s = setup(
            vec![job(
                "iodepth = 3\ncmdprio_percentage = 100\ncmdprio_hint = 1",
            )],
            Stop::Ios(3),
        );
        s.replica = Some(
            Replica::new(crate::replica::ReplicaSpec {
                base_ms: 1.0,
                mean_ms: 0.0,
            })
            .unwrap(),
        );
        s.sla = Some(Scope {
            reads_only: true,
            dld: Some(1),
        });
        let r = run_point(&mut lu, &s).unwrap();
        let sum = r.total.summary(r.interval);
        assert_eq!((sum.ios, sum.aborted, sum.limit_missed), (3, 1, 1));
        // The replica's answer is not data the drive transferred.
        assert_eq!((sum.data_ios, sum.replica_ios), (2, 1));
        assert!((sum.mib_s - sum.data_iops / 256.0).abs() < 1e-3, "{sum:?}");
        assert_eq!(sum.lat_ms.max, 20.0);
        assert!(
            (sum.lat_ms.mean - (10.0 + 16.0 + 20.0) / 3.0).abs() < 1e-3,
            "{:?}",
            sum.lat_ms
        );
        // The re-served read is a read like the others (for read SLAs).
        assert_eq!(r.sla.count(), 3);
    }

    /// One DLD 1 descriptor: a 15 ms inactive limit with `policy`.
    fn inactive_15ms(policy: &str) -> CdlPages {
        profile::CdlSpec {
            read: vec![profile::DescriptorSpec {
                dld: 1,
                inactive_ms: Some(15.0),
                inactive_policy: Some(policy.into()),
                ..Default::default()
            }],
            ..Default::default()
        }
        .pages()
        .unwrap()
    }

    /// `ios` completions at QD 3 on the 10 ms drive, every read limited by `policy`, with the
    /// host's `interface` and a 5 ms EH.
    fn with_host(policy: &str, interface: crate::host::Interface, ios: u64) -> PointResult {
        let mut lu = lu(Box::new(TenMs), inactive_15ms(policy));
        let mut s = setup(
            vec![job(
                "iodepth = 3\ncmdprio_percentage = 100\ncmdprio_hint = 1",
            )],
            Stop::Ios(ios),
        );
        s.host = host_model::Host::new(crate::host::HostSpec {
            interface,
            eh_ms: 5.0,
        })
        .unwrap();
        run_point(&mut lu, &s).unwrap()
    }

    /// Fh on SATA: the abort fails the queue. A runs 0–10 ms, B from 10 ms, D (A's slot again)
    /// waits from 10.05 ms; C is aborted at 15 ms (inactive limit). On SAS, B ends at 20 ms. On
    /// SATA, B (running) and D (queued) are aborted with C and go out again, in slot order,
    /// when EH is done at 20 ms: the third completion is D's, at 30 ms. Improved SATA is the
    /// same for Fh.
    #[test]
    fn an_abort_on_sata_requeues_the_device_queue() {
        use crate::host::Interface::*;
        let third = |i| with_host("Fh", i, 3).interval;
        assert_eq!(third(Sas), 20_000_000);
        assert_eq!(third(SataLibata), 30_000_000);
        assert_eq!(third(SataImproved), 30_000_000);
        let r = with_host("Fh", SataLibata, 3);
        let sum = r.total.summary(r.interval);
        assert_eq!(
            (sum.ios, sum.aborted),
            (3, 1),
            "requeued commands are not failures"
        );
        assert_eq!(sum.lat_ms.max, 19.95, "D waited from 10.05 ms");
    }

    /// Dh on libata: the sense needs a READ LOG, so the queue drains first, then EH runs 5 ms
    /// with nothing going out; an improved host pays nothing, as SAS.
    #[test]
    fn a_dh_completion_on_libata_stalls_the_queue() {
        use crate::host::Interface::*;
        let iops = |i| {
            let r = with_host("Dh", i, 200);
            r.total.summary(r.interval).iops
        };
        let (sas, libata, improved) = (iops(Sas), iops(SataLibata), iops(SataImproved));
        assert_eq!(sas, improved);
        assert!(libata < 0.95 * sas, "libata {libata} vs sas {sas}");
    }

    #[test]
    fn groups_kept_in_total_until_they_part_and_the_sla_its_own() {
        // One group of reads: its statistics are the total's.
        let r = run_point(
            &mut instant_lu(),
            &setup(vec![job("iodepth = 4")], Stop::Ios(500)),
        )
        .unwrap();
        let total = r.total.summary(r.interval);
        let (g, stats) = r.used_groups().next().unwrap();
        assert_eq!(group_name(g), "medium");
        assert_eq!(stats.summary(r.interval), total);
        assert_eq!(r.sla.count(), 0, "no SLA, nothing kept for it");
        // Reads and writes of two groups: each has its own, and they add up; the SLA keeps
        // the reads with DLD 2, 30 % of the reads.
        let mut s = setup(
            vec![job(
                "iodepth = 4\nrw = \"randrw\"\ncmdprio_percentage = 30\ncmdprio_hint = 2",
            )],
            Stop::Ios(2000),
        );
        s.sla = Some(Scope {
            reads_only: true,
            dld: Some(2),
        });
        let r = run_point(&mut instant_lu(), &s).unwrap();
        let counts: Vec<u64> = r.used_groups().map(|(_, s)| s.count()).collect();
        assert_eq!(counts.len(), 2);
        assert_eq!(counts.iter().sum::<u64>(), 2000);
        let n = r.sla.count();
        assert!((200..400).contains(&n), "{n}");
    }

    #[test]
    fn number_ios_ends_a_job_and_the_point() {
        let r = run_point(
            &mut instant_lu(),
            &setup(vec![job("iodepth = 3\nnumber_ios = 10")], Stop::Ios(1000)),
        )
        .unwrap();
        assert_eq!(r.total.count(), 10);
    }

    #[test]
    fn runtime_stop_measures_simulated_time() {
        let mut s = setup(vec![job("")], Stop::Runtime(10_000_000));
        // The measured interval starts at the ramp's last completion (t = 0 here).
        s.ramp = 1;
        let r = run_point(&mut instant_lu(), &s).unwrap();
        // One slot, 50 µs per cycle: 10 ms is 200 cycles.
        assert_eq!(r.interval, 10_000_000);
        assert_eq!(r.total.count(), 200);
    }

    #[test]
    fn rate_iops_holds_each_instance_to_its_rate() {
        // Alone the 4 slots would cycle every 50 µs (80,000 IOPS); at 1,000 commands/s per
        // instance, two instances complete 2,000 commands in a second, none ahead of time.
        let mut s = setup(
            vec![
                job("iodepth = 4
rate_iops = 1000");
                2
            ],
            Stop::Runtime(1_000_000_000),
        );
        s.ramp = 1;
        let r = run_point(&mut instant_lu(), &s).unwrap();
        assert_eq!(r.interval, 1_000_000_000);
        assert_eq!(r.total.count(), 2000);
    }

    #[test]
    fn jobs_are_reported_with_their_instances_together() {
        let named = |name: &str, text: &str| Job {
            name: name.to_owned(),
            ..job(text)
        };
        // Two instances of "a" at QD 1 and one of "b" at QD 2: a third each way, by slots.
        let jobs = vec![named("a", ""), named("b", "iodepth = 2"), named("a", "")];
        let r = run_point(&mut instant_lu(), &setup(jobs, Stop::Ios(4000))).unwrap();
        let names: Vec<&str> = r.jobs.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        let (a, b) = (r.jobs[0].1.count(), r.jobs[1].1.count());
        assert_eq!(a + b, r.total.count());
        assert!((1900..=2100).contains(&a), "{a} of {}", r.total.count());
        // One job: its statistics are the total's.
        let r = run_point(&mut instant_lu(), &setup(vec![job("")], Stop::Ios(10))).unwrap();
        assert_eq!(r.jobs[0].1.count(), 10);
    }
}
