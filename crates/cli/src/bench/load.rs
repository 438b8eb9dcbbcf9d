//! The load: the experiment's points run one after the other, each with one iSCSI session per
//! job instance keeping its queue depth of READ(16)/WRITE(16) commands in flight.

use super::verify::Verifier;
use super::{parse_duration, BenchArgs};
use anyhow::{bail, Context};
use iscsi::initiator::{Initiator, LoginOptions};
use iscsi::url::IscsiUrl;
use qos::{CdlPageKind, CdlPages};
use rustc_hash::FxHashMap;
use scsi::command::{Command, ModeSense, PageControl};
use scsi::{form, Asc, Status};
use sim::meter::{Completed, Ended, Errors, Meter, Served};
use sim::report::{PointReport, Report, Run, SimSpeed};
use sim::{Experiment, PointResult, PointSetup};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use workload::{stream_seed, Generator, Io, Job, SECTOR};

/// The LUN under test, as probed once.
pub struct Target {
    url: IscsiUrl,
    initiator: String,
    /// Capacity in bytes and logical block size.
    pub capacity: u64,
    block: u64,
    /// The CDL pages, when the LUN has them: a command that outlives its descriptor's
    /// duration guideline counts as a miss.
    pages: Option<CdlPages>,
    /// `--verify`: what every session writes and reads is checked here.
    verifier: Option<Verifier>,
}

/// What a command in flight needs at its completion.
enum Check {
    None,
    /// A stamped write and its generation.
    Write(u64),
    /// A read and the versions of its blocks when it started.
    Read(Vec<u64>),
}

/// The big-endian 32-bit value at `at`.
fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

impl Target {
    pub async fn probe(url: &IscsiUrl, initiator: &str, verify: bool) -> anyhow::Result<Target> {
        let mut t = Target {
            url: url.clone(),
            initiator: initiator.to_owned(),
            capacity: 0,
            block: 512,
            pages: None,
            verifier: None,
        };
        let mut s = t.login(0).await?;
        let lun = url.lun;
        let read_capacity = Command::ReadCapacity16 {
            allocation_length: 32,
        }
        .emit(form::READ_CAPACITY_16)?;
        let cap = s.scsi_command(lun, &read_capacity, &[], 32).await?;
        let (Some(last), Some(block)) = (
            cap.data_in
                .get(..8)
                .and_then(|b| b.try_into().ok())
                .map(u64::from_be_bytes),
            be32(&cap.data_in, 8),
        ) else {
            bail!("READ CAPACITY(16) failed (status {:#04x})", cap.status);
        };
        t.block = u64::from(block);
        if t.block == 0 || !t.block.is_multiple_of(SECTOR) {
            bail!("the LUN's {block}-byte blocks are not a multiple of {SECTOR} bytes");
        }
        t.capacity = (last + 1) * t.block;
        let mut pages = CdlPages::default();
        let mut found = false;
        for kind in [CdlPageKind::T2A, CdlPageKind::T2B] {
            let cdb = Command::ModeSense(ModeSense {
                ten: true,
                dbd: true,
                llbaa: false,
                pc: PageControl::Current,
                page_code: scsi::mode::CONTROL,
                subpage_code: kind.subpage(),
                allocation_length: 256,
            })
            .emit(form::MODE_SENSE_10)?;
            let r = s.scsi_command(lun, &cdb, &[], 256).await?;
            // A LUN without the page refuses the request; some targets (istgt) answer GOOD
            // with another page or none: only the page asked for counts.
            let page = r.data_in.get(8..8 + scsi::cdl::T2_PAGE_LEN).unwrap_or(&[]);
            let is_page = page.len() == scsi::cdl::T2_PAGE_LEN
                && page[0] & 0x3F == 0x0A
                && page[1] == kind.subpage();
            if r.status != Status::Good as u8 || !is_page {
                continue;
            }
            let decoded = qos::CdlPage::decode(kind, page)
                .with_context(|| format!("the LUN's {kind:?} page"))?;
            match kind {
                CdlPageKind::T2A => pages.t2a = decoded,
                CdlPageKind::T2B => pages.t2b = decoded,
            }
            found = true;
        }
        t.pages = found.then_some(pages);
        t.verifier = verify.then(|| Verifier::new(t.block));
        s.logout().await?;
        Ok(t)
    }

    /// A session whose unit attentions are cleared (session `n` gets its own ISID).
    async fn login(&self, n: usize) -> anyhow::Result<Initiator> {
        let mut opts = LoginOptions::new(&self.initiator, Some(&self.url.target));
        opts.chap = self.url.chap.clone();
        opts.isid[2..6].copy_from_slice(&u32::try_from(n).unwrap_or(u32::MAX).to_be_bytes());
        opts.timeout = Duration::from_secs(60);
        let mut s = Initiator::connect_portal(&self.url.portal, &opts)
            .await
            .with_context(|| format!("logging in to {}", self.url.portal))?;
        let tur = Command::TestUnitReady.emit(form::TEST_UNIT_READY)?;
        for _ in 0..8 {
            let r = s.scsi_command(self.url.lun, &tur, &[], 0).await?;
            if r.status == Status::Good as u8 {
                return Ok(s);
            }
        }
        bail!("TEST UNIT READY keeps failing on {}", self.url.target)
    }

    /// Whether a command with `dld` outlived its duration guideline.
    fn past_guideline(&self, io: &Io, latency: u64) -> bool {
        self.pages
            .as_ref()
            .and_then(|p| p.descriptor(io.dld, io.write))
            .and_then(|d| d.limit(qos::LimitKind::Guideline))
            .is_some_and(|(limit, _)| latency > limit)
    }
}

/// An experiment from the job flags: one job, the queue depth as its sweep.
pub fn flag_job(args: &BenchArgs) -> anyhow::Result<Experiment> {
    let mut job = format!(
        "name = \"job\"\nrw = {:?}\nbs = {:?}\nnumjobs = {}\n",
        args.rw, args.bs, args.numjobs
    );
    if let Some(m) = args.rwmixread {
        job += &format!("rwmixread = {m}\n");
    }
    if let Some(p) = args.cmdprio_percentage {
        job += &format!("cmdprio_percentage = {p}\n");
    }
    if let Some(h) = args.cmdprio_hint {
        job += &format!("cmdprio_hint = {h}\n");
    }
    if let Some(c) = &args.cmdprio_class {
        job += &format!("cmdprio_class = {c:?}\n");
    }
    if let Some(r) = args.rate_iops {
        job += &format!("rate_iops = {r:?}\n");
    }
    // The device tables are placeholders: the LUN is measured, not modelled.
    let text = format!(
        "id = \"bench\"\ntitle = \"{} {} QD{}\"\nqd = [{}]\nruntime = 10\n[drive]\nmodel = \"instant\"\n[[job]]\n{job}",
        args.rw, args.bs, args.iodepth, args.iodepth
    );
    Experiment::parse(&text).map_err(|e| anyhow::anyhow!("{e}"))
}

/// `--ios`, `--runtime`, `--qd`, `--variant`.
pub fn apply_overrides(exp: &mut Experiment, args: &BenchArgs) -> anyhow::Result<()> {
    match (args.ios, &args.runtime) {
        (Some(0), _) => bail!("--ios must be at least 1"),
        (Some(n), _) => exp.set_stop(sim::Stop::Ios(n)),
        (None, Some(t)) => {
            let s = parse_duration(t).context("--runtime")?;
            exp.set_stop(sim::Stop::Runtime((s * 1e9) as u64));
        }
        (None, None) => {}
    }
    if !args.qd.is_empty() {
        exp.set_qd(args.qd.clone())?;
    }
    if !args.variant.is_empty() {
        exp.select_variants(&args.variant)?;
    }
    Ok(())
}

/// Every point of `exp`, one after the other, in real time.
pub async fn run_all(
    exp: &Experiment,
    seed: u64,
    target: &Arc<Target>,
    bar: &indicatif::ProgressBar,
) -> anyhow::Result<Report> {
    let started = Instant::now();
    let mut results = Vec::new();
    for point in exp.points() {
        let setup = exp.setup_on(point, seed, target.capacity)?;
        let name = exp
            .variants
            .get(point.variant)
            .map_or("", |v| v.name.as_str());
        bar.set_prefix(format!("{} {name} QD{}", exp.id, point.qd));
        let (r, errors) = run_point(&setup, target, bar).await?;
        results.push((point, r, errors));
    }
    let wall_s = started.elapsed().as_secs_f64();
    let commands: u64 = results.iter().map(|(_, r, _)| r.commands).sum();
    let points = results
        .iter()
        .map(|(p, r, errors)| {
            let mut report = PointReport::new(exp, *p, r);
            report.errors = errors
                .iter()
                .map(|((k, asc, ascq), n)| (format!("{k:02x}/{asc:02x}/{ascq:02x}"), *n))
                .collect();
            report
        })
        .collect();
    let results = results.into_iter().map(|(p, r, _)| (p, r)).collect();
    let verify = target.verifier.as_ref().map(|v| {
        let (blocks_checked, mismatches) = v.summary();
        sim::report::Verified {
            blocks_checked,
            mismatches: mismatches
                .into_iter()
                .map(|m| format!("LBA {}: {}", m.lba, m.what))
                .collect(),
        }
    });
    Ok(Report {
        experiment: exp.id.clone(),
        seed,
        points,
        verify,
        run: Run::Bench(SimSpeed {
            commands,
            wall_s,
            commands_per_s: (commands as f64 / wall_s.max(1e-9)).round(),
        }),
        results,
    })
}

/// What the sessions of a point share.
struct Shared {
    meter: Mutex<Meter>,
    stop: AtomicBool,
    t0: Instant,
}

impl Shared {
    fn now(&self) -> u64 {
        u64::try_from(self.t0.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

async fn run_point(
    setup: &PointSetup,
    target: &Arc<Target>,
    bar: &indicatif::ProgressBar,
) -> anyhow::Result<(PointResult, Errors)> {
    let shared = Arc::new(Shared {
        meter: Mutex::new(Meter::new(setup)),
        stop: AtomicBool::new(false),
        t0: Instant::now(),
    });
    let mut tasks = tokio::task::JoinSet::new();
    for (j, job) in setup.jobs.iter().enumerate() {
        let (target, shared, job) = (target.clone(), shared.clone(), job.clone());
        let seed = stream_seed(setup.seed, j as u64);
        tasks.spawn(async move { session(&target, job, seed, j, &shared).await });
    }
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    let failure = loop {
        tokio::select! {
            next = tasks.join_next() => match next {
                None => break None,
                Some(Ok(Ok(()))) => {}
                Some(Ok(Err(e))) => break Some(e),
                Some(Err(e)) => break Some(anyhow::anyhow!("a session task failed: {e}")),
            },
            _ = tick.tick() => {
                if let Ok(m) = shared.meter.lock() {
                    bar.set_message(m.live(shared.now()));
                }
                bar.tick();
            }
        }
    };
    if let Some(e) = failure {
        shared.stop.store(true, Ordering::Relaxed);
        tasks.shutdown().await;
        return Err(e);
    }
    let meter = Arc::try_unwrap(shared)
        .map_err(|_| anyhow::anyhow!("a session outlived its point"))?
        .meter
        .into_inner()
        .map_err(|_| anyhow::anyhow!("a session panicked"))?;
    Ok(meter.finish())
}

/// Sends `io` on `s`: its CDB, and a write's data (stamped when verifying); returns its ITT and
/// what to check when it completes.
async fn issue(s: &mut Initiator, target: &Target, io: &Io) -> anyhow::Result<(u32, Check)> {
    let bytes = io.bytes();
    let lba = io.lba * SECTOR / target.block;
    let blocks = u32::try_from(bytes / target.block).unwrap_or(u32::MAX);
    let cdb = sim::engine::medium_cdb(io, target.block)?;
    let len = u32::try_from(bytes).unwrap_or(u32::MAX);
    let count = u64::from(blocks);
    let (data_out, data_in, check) = match (&target.verifier, io.write) {
        (Some(v), true) => {
            let (data, generation) = v.write_data(lba, count);
            (data, 0, Check::Write(generation))
        }
        (Some(v), false) => (Vec::new(), len, Check::Read(v.read_started(lba, count))),
        (None, true) => (vec![0xA5; bytes as usize], 0, Check::None),
        (None, false) => (Vec::new(), len, Check::None),
    };
    let itt = s.submit(target.url.lun, &cdb, data_out, data_in).await?;
    Ok((itt, check))
}

/// One job instance: its own session, `iodepth` commands in flight until the point stops.
async fn session(
    target: &Target,
    job: Job,
    seed: u64,
    n: usize,
    shared: &Shared,
) -> anyhow::Result<()> {
    let mut s = target.login(n + 1).await?;
    let mut generator = Generator::new(job.clone(), seed);
    let mut in_flight: FxHashMap<u32, (Io, u64, Check)> = FxHashMap::default();
    // Commands a unit attention turned away (SAM-5 §5.14: not executed), to send again as a
    // host does, each with the time it was first sent.
    let mut again: Vec<(Io, u64)> = Vec::new();
    let mut issued = 0u64;
    // The (class, DLD) groups this session told the meter of, by bit.
    let mut groups = 0u64;
    loop {
        // Refill to the queue depth (within the target's CmdSN window), as rate_iops allows.
        let mut next_issue = None;
        while in_flight.len() < job.iodepth as usize && s.window_open() {
            if let Some((io, at)) = again.pop() {
                let (itt, check) = issue(&mut s, target, &io).await?;
                in_flight.insert(itt, (io, at, check));
                continue;
            }
            let now = shared.now();
            let open = !shared.stop.load(Ordering::Relaxed)
                && job.number_ios.is_none_or(|n| issued < n)
                && job.runtime_ns.is_none_or(|t| now < t);
            if !open {
                break;
            }
            let due = job.issue_time(issued);
            if now < due {
                next_issue = Some(due);
                break;
            }
            issued += 1;
            let io = generator.next_io();
            let (itt, check) = issue(&mut s, target, &io).await?;
            in_flight.insert(itt, (io, now, check));
            let group = 1 << sim::engine::group(io.class, io.dld);
            if groups & group == 0 {
                groups |= group;
                match shared.meter.lock() {
                    Ok(mut m) => m.submitted(io.class, io.dld),
                    Err(_) => bail!("the meter's lock is poisoned"),
                }
            }
        }
        if in_flight.is_empty() && next_issue.is_none() && again.is_empty() {
            break;
        }
        let deadline = next_issue.map(|due| (shared.t0 + Duration::from_nanos(due)).into());
        let Some((itt, r)) = s.complete_before(deadline).await? else {
            continue;
        };
        let now = shared.now();
        let Some((io, at, check)) = in_flight.remove(&itt) else {
            bail!("a response for a command never sent (ITT {itt:#x})");
        };
        if let Some(sense) = r.parsed_sense().filter(|s| {
            r.status == Status::CheckCondition as u8 && s.key == scsi::SenseKey::UnitAttention
        }) {
            // The LU told of a change (a LUN added, a capacity changed, a reset) instead of
            // running the command: nothing was read or written.
            if let (Some(v), Check::Write(generation)) = (&target.verifier, &check) {
                let lba = io.lba * SECTOR / target.block;
                v.write_done(lba, io.bytes() / target.block, *generation, false);
            }
            let Asc(asc, ascq) = sense.asc;
            eprintln!(
                "LUN {}: UNIT ATTENTION, {} ({asc:02X}h/{ascq:02X}h): the command is sent again",
                target.url.lun,
                sense.asc.name().unwrap_or("an additional sense code")
            );
            again.push((io, at));
            continue;
        }
        let latency = now.saturating_sub(at);
        let ended = Ended::read(r.status, r.parsed_sense().as_ref());
        if let Some(v) = &target.verifier {
            let lba = io.lba * SECTOR / target.block;
            let good = ended.outcome == qos::Outcome::Good;
            match check {
                Check::Write(generation) => {
                    v.write_done(lba, io.bytes() / target.block, generation, good);
                }
                Check::Read(started) if good => v.read_done(lba, &r.data_in, &started),
                Check::Read(_) | Check::None => {}
            }
        }
        let missed = ended.outcome.is_duration_limit() || target.past_guideline(&io, latency);
        let completed = Completed {
            instance: n,
            io,
            latency,
            ended,
            missed,
            served: Served::by_drive(ended.outcome),
        };
        let done = match shared.meter.lock() {
            Ok(mut m) => m.record(now, &completed),
            Err(_) => bail!("the meter's lock is poisoned"),
        };
        if done {
            shared.stop.store(true, Ordering::Relaxed);
        }
    }
    s.logout().await?;
    Ok(())
}
