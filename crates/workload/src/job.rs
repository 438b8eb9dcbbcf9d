//! Job descriptions: the fio options stint understands (fio HOWTO: `rw`, `rwmixread`, `bs`,
//! `bssplit`, `offset`, `size`, `iodepth`, `numjobs`, `number_ios`, `runtime`, `rate_iops`,
//! `cmdprio_percentage`, `cmdprio_class`, `cmdprio_hint`, `cmdprio_bssplit`), plus the
//! submission-queue class a job feeds (for WRR, NVMe weighted round robin arbitration), and
//! the `trace*` keys of a job that replays a block trace (crate::trace).

use crate::size::parse_size;
use crate::trace::{Trace, TraceFormat};
use crate::{WorkloadError, SECTOR};
use qos::Class;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::sync::Arc;

/// fio `rw`: direction and pattern.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Rw {
    Read,
    Write,
    #[default]
    RandRead,
    RandWrite,
    /// Sequential mixed (fio `rw`/`readwrite`).
    #[serde(alias = "readwrite")]
    Rw,
    RandRw,
}

impl Rw {
    fn random(self) -> bool {
        matches!(self, Self::RandRead | Self::RandWrite | Self::RandRw)
    }
    fn mixed(self) -> bool {
        matches!(self, Self::Rw | Self::RandRw)
    }
}

/// Whether `rwmixread` counts operations or bytes (experiments/README.md, A1–A4: the Seagate
/// study's 60/40 mix counts operations, and its step 3 keeps the byte ratio).
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum MixBy {
    #[default]
    Ops,
    Bytes,
}

/// One per-command priority rule (fio `cmdprio_*`; `bs` restricts it to one block size like
/// `cmdprio_bssplit`, `direction` to reads or writes).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CmdPrio {
    /// Share of the matching commands that get this priority, 0..=100.
    pub percentage: f64,
    /// Submission-queue class; defaults to the job's class.
    pub class: Option<String>,
    /// Duration limit descriptor index, 0..=7 (Linux `IOPRIO_HINT_DEV_DURATION_LIMIT_n`,
    /// Linux I/O priority classes).
    #[serde(default)]
    pub hint: u8,
    /// Only commands of this block size (e.g. "128k").
    pub bs: Option<String>,
    /// Only "read" or "write" commands.
    pub direction: Option<String>,
}

/// A job as written in a file (`[[job]]`).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct JobSpec {
    pub name: String,
    /// Identical copies of the job, each with its own queue depth and random stream.
    #[serde(default = "one")]
    pub numjobs: u32,
    /// Default randread. (The generator's keys are options so that a trace job can refuse them.)
    pub rw: Option<Rw>,
    /// Percentage of reads in a mixed job; default 50.
    pub rwmixread: Option<f64>,
    pub rwmix_by: Option<MixBy>,
    /// "4k", or "256k,512k" for reads,writes (fio `bs`). Default 4k.
    pub bs: Option<String>,
    /// "4k/50:64k/50", optionally ",<write split>" (fio `bssplit`); overrides `bs`.
    pub bssplit: Option<String>,
    /// Start of the region, bytes.
    #[serde(default)]
    pub offset: Option<String>,
    /// Length of the region, bytes; default the rest of the device.
    pub size: Option<String>,
    /// Commands kept outstanding (closed loop).
    #[serde(default = "one")]
    pub iodepth: u32,
    /// Submission-queue class: urgent, high, medium, low (or rt, be, idle). Default medium.
    pub class: Option<String>,
    /// Stop issuing after this many commands.
    pub number_ios: Option<u64>,
    /// Stop issuing after this many seconds.
    pub runtime: Option<f64>,
    /// fio `rate_iops` with one value: each job instance issues at most this many commands per
    /// second (fio's default `rate_process=linear`: command n is not issued before n / rate
    /// seconds), still keeping at most `iodepth` outstanding.
    pub rate_iops: Option<f64>,
    pub cmdprio_percentage: Option<f64>,
    pub cmdprio_class: Option<String>,
    pub cmdprio_hint: Option<u8>,
    /// fio `cmdprio_bssplit`: "bs/percentage:…" (each with `cmdprio_class`/`cmdprio_hint`) or
    /// "bs/percentage/class/level[/hint]:…" with a Linux ioprio class number (1 RT, 2 BE,
    /// 3 IDLE). The level (0..=7) is checked but has no effect: stint's classes have no levels.
    pub cmdprio_bssplit: Option<String>,
    /// Several priority rules; the shorthand `cmdprio_*` keys add more.
    #[serde(default)]
    pub cmdprio: Vec<CmdPrio>,
    /// Replay this block trace instead of generating I/Os (a path relative to the experiment
    /// file): its reads and writes, in its order, each once.
    pub trace: Option<String>,
    pub trace_format: Option<TraceFormat>,
    /// "closed" (default): each I/O as soon as the queue depth allows; "open": each at its
    /// timestamp (divided by `trace_speed`).
    pub trace_timing: Option<TraceTiming>,
    /// An open replay's speed-up: 2 issues the trace in half its time. Default 1.
    pub trace_speed: Option<f64>,
    /// The parsed `trace`, set by [`JobSpec::load_trace`] (whoever knows where the path is
    /// relative to reads the file).
    #[serde(skip)]
    pub loaded_trace: Option<Arc<Trace>>,
}

/// When a replayed trace's I/Os are issued.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum TraceTiming {
    /// Each as soon as one of the job's `iodepth` commands completes.
    #[default]
    Closed,
    /// Each at its timestamp; one due while `iodepth` commands are outstanding waits for one.
    Open,
}

/// A trace a job replays.
#[derive(Clone, Debug, PartialEq)]
pub struct Replay {
    pub trace: Arc<Trace>,
    pub timing: TraceTiming,
    pub speed: f64,
}

impl Replay {
    /// When an open replay issues its I/O number `i`, ns from the start.
    fn due(&self, i: u64) -> u64 {
        let at = usize::try_from(i).ok().and_then(|i| self.trace.ios.get(i));
        at.map_or(0, |io| (io.time_ns as f64 / self.speed) as u64)
    }
}

fn one() -> u32 {
    1
}

/// Block sizes with their shares of commands (percent, summing to 100).
#[derive(Clone, Debug, PartialEq)]
pub struct SizeSplit(pub Vec<(u64, f64)>);

impl SizeSplit {
    /// Mean size in bytes.
    pub fn mean(&self) -> f64 {
        self.0.iter().map(|(b, p)| *b as f64 * p / 100.0).sum()
    }
    pub fn max(&self) -> u64 {
        self.0.iter().map(|(b, _)| *b).max().unwrap_or(0)
    }
    fn parse(job: &str, field: &str, text: &str) -> Result<Self, WorkloadError> {
        let err = |m: String| WorkloadError::new(job, field, m);
        let mut parts = Vec::new();
        for entry in text.split(':').filter(|e| !e.trim().is_empty()) {
            let (size, pct) = match entry.split_once('/') {
                Some((s, p)) => {
                    let pct: f64 = p.trim().parse().map_err(|_| {
                        err(format!("percentage {p:?} in {entry:?} is not a number"))
                    })?;
                    (s, pct)
                }
                None => (entry, 100.0),
            };
            let bytes = parse_size(size).map_err(err)?;
            if bytes == 0 || bytes % SECTOR != 0 || bytes > u64::from(u32::MAX) * SECTOR {
                return Err(err(format!(
                    "block size {bytes} must be a non-zero multiple of {SECTOR} bytes"
                )));
            }
            if !(0.0..=100.0).contains(&pct) {
                return Err(err(format!("percentage {pct} is outside 0..=100")));
            }
            parts.push((bytes, pct));
        }
        let total: f64 = parts.iter().map(|(_, p)| p).sum();
        if parts.is_empty() || (total - 100.0).abs() > 1e-6 {
            return Err(err(format!(
                "shares must add up to 100 (got {total} in {text:?})"
            )));
        }
        Ok(Self(parts))
    }
}

/// Block sizes for reads and for writes.
#[derive(Clone, Debug, PartialEq)]
pub struct BlockSizes {
    pub read: SizeSplit,
    pub write: SizeSplit,
}

impl BlockSizes {
    /// "<read>[,<write>]" where each side is a size or a split; the write side defaults to the
    /// read side (fio semantics).
    fn parse(job: &str, field: &str, text: &str) -> Result<Self, WorkloadError> {
        let (r, w) = text.split_once(',').unwrap_or((text, text));
        let w = if w.trim().is_empty() { r } else { w };
        Ok(Self {
            read: SizeSplit::parse(job, field, r)?,
            write: SizeSplit::parse(job, field, w)?,
        })
    }
}

/// A compiled priority rule.
#[derive(Clone, Debug, PartialEq)]
pub struct Prio {
    /// Probability (0..=1) among matching commands.
    pub share: f64,
    pub class: Class,
    pub dld: u8,
    pub bs: Option<u64>,
    /// `Some(true)` writes only, `Some(false)` reads only.
    pub write: Option<bool>,
}

/// A validated job, ready for a [`crate::Generator`].
#[derive(Clone, Debug, PartialEq)]
pub struct Job {
    pub name: String,
    pub numjobs: u32,
    pub iodepth: u32,
    pub random: bool,
    /// Probability that a command is a read.
    pub read_probability: f64,
    pub sizes: BlockSizes,
    /// Region in bytes: `[start, start + len)`.
    pub start: u64,
    pub len: u64,
    pub class: Class,
    pub prios: Vec<Prio>,
    pub number_ios: Option<u64>,
    /// Stop issuing after this many ns.
    pub runtime_ns: Option<u64>,
    /// `rate_iops` as the time between issues, ns.
    pub rate_interval_ns: Option<u64>,
    /// The trace the job replays instead of generating (then `number_ios` is at most its
    /// length, and `sizes` and `read_probability` describe it).
    pub replay: Option<Replay>,
}

impl Job {
    /// The earliest time (ns from the start) the job instance may issue the command that
    /// follows `issued` others.
    pub fn issue_time(&self, issued: u64) -> u64 {
        match &self.replay {
            Some(r) if r.timing == TraceTiming::Open => r.due(issued),
            _ => self
                .rate_interval_ns
                .map_or(0, |interval| issued.saturating_mul(interval)),
        }
    }
}

/// Longest `runtime` accepted (a day), so that ns arithmetic cannot overflow.
const MAX_RUNTIME_S: f64 = 86_400.0;
/// Slowest `rate_iops` accepted (one command a day), so that ns arithmetic cannot overflow.
const MIN_RATE_IOPS: f64 = 1.0 / MAX_RUNTIME_S;
/// Deepest per-job queue accepted.
pub const MAX_IODEPTH: u32 = 65_536;

fn class_named(job: &str, field: &str, name: &str) -> Result<Class, WorkloadError> {
    Class::from_name(name).ok_or_else(|| {
        WorkloadError::new(
            job,
            field,
            format!("unknown class {name:?} (expected urgent, high, medium, low, rt, be or idle)"),
        )
    })
}

/// A trace's sizes by direction, with their shares of its reads (of its writes). A trace
/// without reads (writes) gets the other direction's, as fio's `bs` does.
fn trace_sizes(trace: &Trace) -> BlockSizes {
    let split = |write: bool| {
        let mut count: BTreeMap<u64, u64> = BTreeMap::new();
        for io in trace.ios.iter().filter(|io| io.write == write) {
            *count.entry(io.len).or_default() += 1;
        }
        let total: u64 = count.values().sum();
        SizeSplit(
            count
                .into_iter()
                .map(|(bytes, n)| (bytes, n as f64 * 100.0 / total as f64))
                .collect(),
        )
    };
    let (read, write) = (split(false), split(true));
    match (read.0.is_empty(), write.0.is_empty()) {
        (true, _) => BlockSizes {
            read: write.clone(),
            write,
        },
        (_, true) => BlockSizes {
            write: read.clone(),
            read,
        },
        _ => BlockSizes { read, write },
    }
}

impl JobSpec {
    /// Parses the trace `text` (read from the file `trace` names, which `origin` names in
    /// errors) for [`JobSpec::compile`]. A job without `trace` ignores it.
    pub fn load_trace(&mut self, text: &str, origin: &str) -> Result<(), WorkloadError> {
        if self.trace.is_none() {
            return Ok(());
        }
        let format = self.trace_format.ok_or_else(|| {
            WorkloadError::new(
                &self.name,
                "trace_format",
                "missing: \"iolog\", \"blkparse\" or \"msr\"",
            )
        })?;
        let trace = Trace::parse(text, format, origin)
            .map_err(|m| WorkloadError::new(&self.name, "trace", m))?;
        self.loaded_trace = Some(Arc::new(trace));
        Ok(())
    }

    /// The trace keys, checked against each other and against the generator's keys.
    fn replay(&self) -> Result<Option<Replay>, WorkloadError> {
        let err = |field: &str, m: String| WorkloadError::new(&self.name, field, m);
        let Some(path) = &self.trace else {
            let stray = [
                ("trace_format", self.trace_format.is_some()),
                ("trace_timing", self.trace_timing.is_some()),
                ("trace_speed", self.trace_speed.is_some()),
            ];
            return match stray.iter().find(|(_, set)| *set) {
                Some((key, _)) => Err(err(key, "applies only to a job with `trace`".into())),
                None => Ok(None),
            };
        };
        // The trace says each I/O's direction and size.
        let generator = [
            ("rw", self.rw.is_some()),
            ("rwmixread", self.rwmixread.is_some()),
            ("rwmix_by", self.rwmix_by.is_some()),
            ("bs", self.bs.is_some()),
            ("bssplit", self.bssplit.is_some()),
        ];
        if let Some((key, _)) = generator.iter().find(|(_, set)| *set) {
            return Err(err(
                key,
                "a job with `trace` takes each I/O's direction and size from the trace: \
                 leave it out"
                    .into(),
            ));
        }
        if self.trace_format.is_none() {
            return Err(err(
                "trace_format",
                "missing: \"iolog\", \"blkparse\" or \"msr\"".into(),
            ));
        }
        let Some(trace) = self.loaded_trace.clone() else {
            return Err(err(
                "trace",
                format!(
                    "{path:?} was not read (traces are read for [[job]]s of an experiment file)"
                ),
            ));
        };
        let timing = self.trace_timing.unwrap_or_default();
        if timing == TraceTiming::Open {
            if !trace.timed {
                return Err(err(
                    "trace_timing",
                    format!(
                        "\"open\" needs timestamps, and {} has none (a fio iolog v2 without \
                         `wait`): use \"closed\"",
                        trace.origin
                    ),
                ));
            }
            if self.rate_iops.is_some() {
                return Err(err(
                    "rate_iops",
                    "an open replay issues each I/O at its timestamp: leave it out".into(),
                ));
            }
        }
        let speed = match self.trace_speed {
            Some(_) if timing == TraceTiming::Closed => {
                return Err(err(
                    "trace_speed",
                    "scales an open replay's timestamps: set trace_timing = \"open\"".into(),
                ))
            }
            Some(s) if !(s > 0.0 && s <= 1e6) => {
                return Err(err("trace_speed", format!("{s} is outside (0, 1e6]")))
            }
            Some(s) => s,
            None => 1.0,
        };
        Ok(Some(Replay {
            trace,
            timing,
            speed,
        }))
    }

    /// The rules of `cmdprio_bssplit` (fio HOWTO, both formats).
    fn cmdprio_bssplit_rules(&self, text: &str) -> Result<Vec<(String, CmdPrio)>, WorkloadError> {
        let field = "cmdprio_bssplit";
        let err = |m: String| WorkloadError::new(&self.name, field, m);
        let mut rules = Vec::new();
        for entry in text.split(':').map(str::trim).filter(|e| !e.is_empty()) {
            let parts: Vec<&str> = entry.split('/').map(str::trim).collect();
            let number = |i: usize, what: &str| -> Result<u32, WorkloadError> {
                parts
                    .get(i)
                    .and_then(|p| p.parse().ok())
                    .ok_or_else(|| err(format!("{what} in {entry:?} is not a number")))
            };
            let (class, hint) = match parts.len() {
                2 => (self.cmdprio_class.clone(), self.cmdprio_hint.unwrap_or(0)),
                4 | 5 => {
                    let class = match number(2, "class")? {
                        1 => "rt",
                        2 => "be",
                        3 => "idle",
                        c => {
                            return Err(err(format!(
                                "class {c} in {entry:?} is not 1 (RT), 2 (BE) or 3 (IDLE)"
                            )))
                        }
                    };
                    if number(3, "level")? > 7 {
                        return Err(err(format!("level in {entry:?} is outside 0..=7")));
                    }
                    let hint = if parts.len() == 5 {
                        number(4, "hint")?
                    } else {
                        0
                    };
                    (
                        Some(class.to_owned()),
                        u8::try_from(hint).unwrap_or(u8::MAX),
                    )
                }
                _ => {
                    return Err(err(format!(
                        "{entry:?} is neither bs/percentage nor bs/percentage/class/level[/hint]"
                    )))
                }
            };
            let percentage: f64 = parts
                .get(1)
                .and_then(|p| p.parse().ok())
                .ok_or_else(|| err(format!("percentage in {entry:?} is not a number")))?;
            let bs = parts.first().map(|b| (*b).to_owned());
            rules.push((
                format!("{field}[{}].", rules.len()),
                CmdPrio {
                    percentage,
                    class,
                    hint,
                    bs,
                    direction: None,
                },
            ));
        }
        Ok(rules)
    }

    /// Checks every field against a device of `capacity` bytes and resolves names.
    pub fn compile(&self, capacity: u64) -> Result<Job, WorkloadError> {
        let job = self.name.as_str();
        let err = |field: &str, m: String| WorkloadError::new(job, field, m);
        if self.name.is_empty() {
            return Err(err("name", "must not be empty".into()));
        }
        if self.numjobs == 0 || self.numjobs > 4096 {
            return Err(err(
                "numjobs",
                format!("{} is outside 1..=4096", self.numjobs),
            ));
        }
        if self.iodepth == 0 || self.iodepth > MAX_IODEPTH {
            return Err(err(
                "iodepth",
                format!("{} is outside 1..={MAX_IODEPTH}", self.iodepth),
            ));
        }
        let rwmixread = self.rwmixread.unwrap_or(50.0);
        if !(0.0..=100.0).contains(&rwmixread) {
            return Err(err("rwmixread", format!("{rwmixread} is outside 0..=100")));
        }
        let replay = self.replay()?;
        let sizes = match (&replay, &self.bssplit, &self.bs) {
            (Some(r), _, _) => trace_sizes(&r.trace),
            (None, Some(split), _) => BlockSizes::parse(job, "bssplit", split)?,
            (None, None, Some(bs)) => BlockSizes::parse(job, "bs", bs)?,
            (None, None, None) => BlockSizes::parse(job, "bs", "4k")?,
        };
        let start = match &self.offset {
            Some(o) => parse_size(o).map_err(|m| err("offset", m))?,
            None => 0,
        };
        if start % SECTOR != 0 || start >= capacity {
            return Err(err(
                "offset",
                format!("{start} must be a multiple of {SECTOR} below the capacity {capacity}"),
            ));
        }
        let len = match &self.size {
            Some(s) => parse_size(s).map_err(|m| err("size", m))?,
            None => capacity - start,
        };
        if let Some(r) = &replay {
            let end = capacity - start;
            if let Some(io) = r.trace.ios.iter().find(|io| io.len > len.min(end)) {
                return Err(err(
                    "trace",
                    format!(
                        "{}:{}: a {}-byte I/O does not fit the job's {}-byte region",
                        r.trace.origin,
                        io.line,
                        io.len,
                        len.min(end)
                    ),
                ));
            }
        }
        let largest = sizes.read.max().max(sizes.write.max());
        if len < largest || !matches!(start.checked_add(len), Some(end) if end <= capacity) {
            return Err(err(
                "size",
                format!(
                    "{len} bytes from offset {start} must hold the largest block ({largest}) \
                     and end within the capacity {capacity}"
                ),
            ));
        }
        let rw = self.rw.unwrap_or_default();
        let read_share = match rw {
            Rw::Read | Rw::RandRead => 1.0,
            Rw::Write | Rw::RandWrite => 0.0,
            Rw::Rw | Rw::RandRw => rwmixread / 100.0,
        };
        let read_probability = match (self.rwmix_by.unwrap_or_default(), rw.mixed()) {
            _ if replay.is_some() => replay.as_ref().map_or(1.0, |r| r.trace.read_share()),
            // By bytes: reads carry `read_share` of the bytes, so their share of operations is
            // weighted by the inverse of their mean size.
            (MixBy::Bytes, true) if read_share > 0.0 && read_share < 1.0 => {
                let r = read_share / sizes.read.mean();
                let w = (1.0 - read_share) / sizes.write.mean();
                r / (r + w)
            }
            _ => read_share,
        };
        let class = match &self.class {
            Some(c) => class_named(job, "class", c)?,
            None => Class::Medium,
        };
        let runtime_ns = match self.runtime {
            Some(s) if !(s > 0.0 && s <= MAX_RUNTIME_S) => {
                return Err(err(
                    "runtime",
                    format!("{s} s is outside (0, {MAX_RUNTIME_S}]"),
                ))
            }
            Some(s) => Some((s * 1e9) as u64),
            None => None,
        };
        if self.number_ios == Some(0) {
            return Err(err("number_ios", "must be at least 1".into()));
        }
        // A replay ends with its trace.
        let number_ios = match &replay {
            Some(r) => {
                let len = r.trace.ios.len() as u64;
                Some(self.number_ios.map_or(len, |n| n.min(len)))
            }
            None => self.number_ios,
        };
        let rate_interval_ns = match self.rate_iops {
            Some(r) if !(MIN_RATE_IOPS..=1e9).contains(&r) => {
                return Err(err(
                    "rate_iops",
                    format!("{r} is outside [{MIN_RATE_IOPS}, 1e9] commands per second"),
                ))
            }
            Some(r) => Some((1e9 / r).round() as u64),
            None => None,
        };
        let mut rules: Vec<(String, CmdPrio)> = self
            .cmdprio
            .iter()
            .enumerate()
            .map(|(i, p)| (format!("cmdprio[{i}]."), p.clone()))
            .collect();
        if let Some(split) = &self.cmdprio_bssplit {
            rules.extend(self.cmdprio_bssplit_rules(split)?);
        }
        if let Some(percentage) = self.cmdprio_percentage {
            rules.push((
                "cmdprio_".into(),
                CmdPrio {
                    percentage,
                    class: self.cmdprio_class.clone(),
                    hint: self.cmdprio_hint.unwrap_or(0),
                    bs: None,
                    direction: None,
                },
            ));
        } else if self.cmdprio_bssplit.is_none()
            && (self.cmdprio_class.is_some() || self.cmdprio_hint.is_some())
        {
            return Err(err(
                "cmdprio_percentage",
                "missing: cmdprio_class and cmdprio_hint need a percentage".into(),
            ));
        }
        let mut prios = Vec::with_capacity(rules.len());
        for (at, rule) in &rules {
            if !(0.0..=100.0).contains(&rule.percentage) {
                return Err(err(
                    &format!("{at}percentage"),
                    format!("{} is outside 0..=100", rule.percentage),
                ));
            }
            if rule.hint > 7 {
                return Err(err(
                    &format!("{at}hint"),
                    format!(
                        "{} is outside 0..=7 (duration limit descriptor index)",
                        rule.hint
                    ),
                ));
            }
            let class = match &rule.class {
                Some(c) => class_named(job, &format!("{at}class"), c)?,
                None => class,
            };
            let bs = match &rule.bs {
                Some(b) => Some(parse_size(b).map_err(|m| err(&format!("{at}bs"), m))?),
                None => None,
            };
            let write = match rule.direction.as_deref() {
                None => None,
                Some("read") => Some(false),
                Some("write") => Some(true),
                Some(other) => {
                    return Err(err(
                        &format!("{at}direction"),
                        format!("{other:?} is neither \"read\" nor \"write\""),
                    ))
                }
            };
            prios.push(Prio {
                share: rule.percentage / 100.0,
                class,
                dld: rule.hint,
                bs,
                write,
            });
        }
        // Rules that can match the same command share one draw: their shares must fit in 100 %.
        let rule_sizes: Vec<Option<u64>> = prios
            .iter()
            .map(|p| p.bs)
            .chain(std::iter::once(None))
            .collect();
        for bs in rule_sizes {
            for write in [false, true] {
                let total: f64 = prios
                    .iter()
                    .filter(|p| !matches!(p.write, Some(w) if w != write))
                    .filter(|p| p.bs.is_none() || p.bs == bs)
                    .map(|p| p.share * 100.0)
                    .sum();
                if total > 100.0 + 1e-9 {
                    return Err(err(
                        "cmdprio",
                        format!(
                            "percentages of rules matching the same command add up to {total}, \
                             more than 100"
                        ),
                    ));
                }
            }
        }
        Ok(Job {
            name: self.name.clone(),
            numjobs: self.numjobs,
            iodepth: self.iodepth,
            random: replay.is_none() && rw.random(),
            read_probability,
            sizes,
            start,
            len,
            class,
            prios,
            number_ios,
            runtime_ns,
            rate_interval_ns,
            replay,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TB: u64 = 1 << 40;

    fn spec(text: &str) -> JobSpec {
        toml::from_str(&format!("name = \"j\"\n{text}")).unwrap()
    }

    #[test]
    fn defaults_are_4k_randread_qd1_medium() {
        let job = spec("").compile(TB).unwrap();
        assert_eq!(job.sizes.read, SizeSplit(vec![(4096, 100.0)]));
        assert!(job.random);
        assert_eq!(job.read_probability, 1.0);
        assert_eq!((job.iodepth, job.class), (1, Class::Medium));
        assert_eq!((job.start, job.len), (0, TB));
    }

    #[test]
    fn rate_iops_spaces_the_issues() {
        let job = spec("").compile(TB).unwrap();
        assert_eq!((job.rate_interval_ns, job.issue_time(1000)), (None, 0));
        let job = spec("rate_iops = 200").compile(TB).unwrap();
        assert_eq!(job.rate_interval_ns, Some(5_000_000));
        assert_eq!(job.issue_time(0), 0);
        assert_eq!(job.issue_time(3), 15_000_000);
    }

    #[test]
    fn read_and_write_sizes_and_splits() {
        let job = spec("rw = \"randrw\"\nbs = \"256k,512k\"")
            .compile(TB)
            .unwrap();
        assert_eq!(job.sizes.read.0, vec![(256 << 10, 100.0)]);
        assert_eq!(job.sizes.write.0, vec![(512 << 10, 100.0)]);
        let job = spec("bssplit = \"4k/25:64k/75\"").compile(TB).unwrap();
        assert_eq!(job.sizes.write.0, vec![(4096, 25.0), (65536, 75.0)]);
        assert_eq!(job.sizes.read.mean(), 1024.0 + 49152.0);
    }

    #[test]
    fn mix_by_bytes_weights_operations_by_size() {
        // 60 % of bytes in 256 KiB reads vs 40 % in 512 KiB writes: reads are 0.6/256 against
        // 0.4/512 per KiB, i.e. 3/4 of the operations.
        let job = spec("rw = \"randrw\"\nrwmixread = 60\nrwmix_by = \"bytes\"\nbs = \"256k,512k\"")
            .compile(TB)
            .unwrap();
        assert!((job.read_probability - 0.75).abs() < 1e-12);
        let by_ops = spec("rw = \"randrw\"\nrwmixread = 60\nbs = \"256k,512k\"")
            .compile(TB)
            .unwrap();
        assert!((by_ops.read_probability - 0.6).abs() < 1e-12);
    }

    #[test]
    fn cmdprio_shorthand_and_rules() {
        let job = spec(
            "cmdprio_percentage = 20\ncmdprio_class = \"rt\"\ncmdprio_hint = 1\n\
             [[cmdprio]]\npercentage = 10\nhint = 2\ndirection = \"read\"\nbs = \"128k\"",
        )
        .compile(TB)
        .unwrap();
        assert_eq!(job.prios.len(), 2);
        assert_eq!(job.prios[0].dld, 2);
        assert_eq!(job.prios[0].write, Some(false));
        assert_eq!(job.prios[0].bs, Some(128 << 10));
        assert_eq!(job.prios[1].class, Class::High);
        assert!((job.prios[1].share - 0.2).abs() < 1e-12);
    }

    #[test]
    fn cmdprio_bssplit_both_fio_formats() {
        // Per block size: 4 KiB commands 50 % RT with hint 2, 64 KiB commands 80 % with the
        // cmdprio_class / cmdprio_hint defaults. 50 + 80 > 100 is fine: no command matches both.
        let job = spec(
            "bssplit = \"4k/50:64k/50\"\ncmdprio_class = \"idle\"\ncmdprio_hint = 3\n\
             cmdprio_bssplit = \"4k/50/1/0/2:64k/80\"",
        )
        .compile(TB)
        .unwrap();
        assert_eq!(job.prios.len(), 2);
        assert_eq!(
            (job.prios[0].bs, job.prios[0].class, job.prios[0].dld),
            (Some(4096), Class::High, 2)
        );
        assert_eq!(
            (job.prios[1].bs, job.prios[1].class, job.prios[1].dld),
            (Some(65536), Class::Low, 3)
        );
        assert!((job.prios[1].share - 0.8).abs() < 1e-12);
    }

    const LOG: &str = "fio version 3 iolog\n0 f read 0 4096\n1000 f write 8192 131072\n\
                       3000 f read 4096 4096\n";

    /// A job replaying `trace` (an iolog) named t.log.
    fn traced(text: &str, trace: &str) -> Result<Job, WorkloadError> {
        let mut s = spec(&format!(
            "trace = \"t.log\"\ntrace_format = \"iolog\"\n{text}"
        ));
        s.load_trace(trace, "t.log")?;
        s.compile(TB)
    }

    #[test]
    fn a_trace_sets_the_count_the_sizes_and_open_times() {
        let job = traced(
            "trace_timing = \"open\"\ntrace_speed = 2\nnumber_ios = 100",
            LOG,
        )
        .unwrap();
        assert_eq!(job.number_ios, Some(3));
        assert_eq!(job.sizes.read.0, vec![(4096, 100.0)]);
        assert_eq!(job.sizes.write.0, vec![(131_072, 100.0)]);
        assert!((job.read_probability - 2.0 / 3.0).abs() < 1e-12);
        assert!(!job.random);
        // µs in the trace, halved.
        let due: Vec<u64> = (0..3).map(|i| job.issue_time(i)).collect();
        assert_eq!(due, vec![0, 500_000, 1_500_000]);
        let closed = traced("number_ios = 2", LOG).unwrap();
        assert_eq!((closed.number_ios, closed.issue_time(1)), (Some(2), 0));
        let paced = traced("rate_iops = 1000", LOG).unwrap();
        assert_eq!(paced.issue_time(2), 2_000_000);
    }

    #[test]
    fn trace_keys_are_checked() {
        let cases = [
            ("rw = \"randread\"", "rw"),
            ("rwmixread = 50", "rwmixread"),
            ("rwmix_by = \"bytes\"", "rwmix_by"),
            ("bs = \"4k\"", "bs"),
            ("bssplit = \"4k/100\"", "bssplit"),
            ("trace_speed = 2", "trace_speed"),
            ("trace_timing = \"open\"\ntrace_speed = 0", "trace_speed"),
            ("trace_timing = \"open\"\nrate_iops = 10", "rate_iops"),
        ];
        for (text, field) in cases {
            let e = traced(text, LOG).unwrap_err();
            assert_eq!(e.field, field, "{text}: {e}");
        }
        // The 128 KiB write of line 3 does not fit a 64 KiB region.
        let e = traced("size = \"64k\"", LOG).unwrap_err();
        assert_eq!(e.field, "trace");
        assert!(e.message.starts_with("t.log:3: a 131072-byte I/O"), "{e}");
        let e = traced("", "fio version 3 iolog\n0 f read 0 4096\n7 f read 4096\n").unwrap_err();
        assert_eq!(e.to_string(), "job \"j\": trace: t.log:3: expected \"timestamp filename action [offset length]\", got \"7 f read 4096\"");
        let v2 = "fio version 2 iolog\nf read 0 4096\n";
        assert_eq!(
            traced("trace_timing = \"open\"", v2).unwrap_err().field,
            "trace_timing"
        );
        assert!(traced("", v2).is_ok());
        let stray = spec("trace_timing = \"open\"").compile(TB).unwrap_err();
        assert_eq!(stray.field, "trace_timing");
        let unformatted = spec("trace = \"t.log\"").compile(TB).unwrap_err();
        assert_eq!(unformatted.field, "trace_format");
        let unread = spec("trace = \"t.log\"\ntrace_format = \"msr\"")
            .compile(TB)
            .unwrap_err();
        assert_eq!(unread.field, "trace");
        let bad = toml::from_str::<JobSpec>("name = \"j\"\ntrace_format = \"csv\"").unwrap_err();
        assert!(bad.to_string().contains("msr"), "{bad}");
    }

    #[test]
    fn bad_fields_are_named() {
        let cases = [
            ("iodepth = 0", "iodepth"),
            ("class = \"gold\"", "class"),
            ("bs = \"3000\"", "bs"),
            ("bssplit = \"4k/50:8k/20\"", "bssplit"),
            ("rwmixread = 101", "rwmixread"),
            ("size = \"2TiB\"", "size"),
            ("offset = \"513\"", "offset"),
            ("cmdprio_percentage = 120", "cmdprio_percentage"),
            ("cmdprio_hint = 1", "cmdprio_percentage"),
            ("cmdprio_percentage = 10\ncmdprio_hint = 9", "cmdprio_hint"),
            (
                "[[cmdprio]]\npercentage = 60\n[[cmdprio]]\npercentage = 50",
                "cmdprio",
            ),
            (
                "[[cmdprio]]\npercentage = 5\ndirection = \"up\"",
                "cmdprio[0].direction",
            ),
            ("runtime = -1", "runtime"),
            ("rate_iops = 0", "rate_iops"),
            ("rate_iops = -5.0", "rate_iops"),
            ("rate_iops = nan", "rate_iops"),
            ("number_ios = 0", "number_ios"),
        ];
        for (text, field) in cases {
            let e = spec(text).compile(TB).unwrap_err();
            assert_eq!(e.field, field, "{text}: {e}");
            assert!(e.to_string().contains(field));
        }
        let unknown = toml::from_str::<JobSpec>("name = \"j\"\nqdepth = 3").unwrap_err();
        assert!(unknown.to_string().contains("qdepth"), "{unknown}");
    }
}
