//! Experiment files (`experiments/<id>.toml`): a workload, a device (drive model, queue, CDL
//! pages), a queue-depth sweep and variants, each variant a partial file merged over the base.
//!
//! ```toml
//! id = "b2"
//! qd = [1, 2, 4, 8, 16, 24, 32]   # sets `iodepth` of every job that does not set its own
//! ios = 20000                      # measured completions per point (or runtime = seconds)
//! [drive]                          # model, profile, faults (profile::DeviceSpec)
//! [queue]                          # depth, scheduler, arbitration, admission
//! [cdl]                            # T2A/T2B descriptors (profile::CdlSpec)
//! [replica]                        # re-serve fast-failed reads (crate::replica)
//! [host]                           # the host's error handling: sas, sata-* (crate::host)
//! [sla]                            # percentile + limit checked per point (crate::sla)
//! [erasure]                        # user reads striped over k + m drives (crate::erasure)
//! [[job]]                          # workload::JobSpec
//! [[variant]]                      # name + any of drive/queue/cdl/replica/host/erasure,
//! name = "cdl-aware"               # and job.<name> tables merged into that job
//! queue = { scheduler = "cdl-aware" }
//! ```

use crate::engine::{PointSetup, Stop};
use crate::erasure::{Erasure, ErasureSpec};
use crate::error::SimError;
use crate::host::{Host, HostSpec};
use crate::replica::{Replica, ReplicaSpec};
use crate::shipped;
use crate::sla::{Sla, SlaSpec};
use profile::{CdlSpec, DeviceSpec, DriveSetup, QueueSpec};
use serde::Deserialize;
use std::path::Path;
use toml::{Table, Value};
use workload::{Job, JobSpec};

/// Host turnaround default: 50 µs (a host that turns a completion into its next command at once).
const HOST_TURNAROUND_US: f64 = 50.0;
/// Largest queue depth a sweep may ask for.
pub const MAX_QD: u32 = workload::MAX_IODEPTH;
/// Most commands all jobs of a point may keep outstanding (each is a host slot in memory).
const MAX_OUTSTANDING: u64 = 1 << 20;
/// Most measured I/Os a point may ask for (about an hour of CPU at the engine's speed).
const MAX_IOS: u64 = 10_000_000_000;

/// The file as written.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExperimentFile {
    id: String,
    title: Option<String>,
    qd: Vec<u32>,
    ios: Option<u64>,
    /// Simulated seconds measured per point.
    runtime: Option<f64>,
    /// Completions discarded first; default 10·(outstanding commands) + 200.
    ramp_ios: Option<u64>,
    seed: Option<u64>,
    host_turnaround_us: Option<f64>,
    drive: DeviceSpec,
    #[serde(default)]
    queue: QueueSpec,
    #[serde(default)]
    cdl: CdlSpec,
    replica: Option<ReplicaSpec>,
    #[serde(default)]
    host: HostSpec,
    sla: Option<SlaSpec>,
    erasure: Option<ErasureSpec>,
    #[serde(rename = "job")]
    jobs: Vec<JobSpec>,
}

impl Variant {
    /// Runs the variant on another device (its jobs checked against that capacity): how
    /// `stint sim --device` runs the logical unit a `stint serve` configuration describes.
    pub fn set_device(
        &mut self,
        drive: DriveSetup,
        queue: QueueSpec,
        cdl: qos::CdlPages,
    ) -> Result<(), SimError> {
        if self.erasure.is_some() {
            return Err(SimError::field(
                "--device",
                "an erasure experiment runs its own array of drives, not one LUN",
            ));
        }
        for (job, _) in &self.jobs {
            job.compile(drive.capacity)?;
        }
        self.capacity = drive.capacity;
        self.drive = drive;
        self.queue = queue;
        self.cdl = cdl;
        Ok(())
    }
}

/// One variant, validated.
#[derive(Clone, Debug)]
pub struct Variant {
    pub name: String,
    pub drive: DriveSetup,
    pub queue: QueueSpec,
    pub cdl: qos::CdlPages,
    pub replica: Option<Replica>,
    pub host: Host,
    /// User reads striped over an array of drives like `drive` (crate::array), if set.
    pub erasure: Option<Erasure>,
    /// Jobs, and whether each set its own iodepth (else the sweep's qd applies).
    jobs: Vec<(JobSpec, bool)>,
    capacity: u64,
}

/// A validated experiment.
#[derive(Clone, Debug)]
pub struct Experiment {
    pub id: String,
    pub title: String,
    pub qd: Vec<u32>,
    pub variants: Vec<Variant>,
    /// How many variants the file defines: `--variant` may keep fewer, and a figure of a
    /// subset says which it holds.
    pub variants_in_file: usize,
    pub stop: Stop,
    pub ramp_ios: Option<u64>,
    pub turnaround: u64,
    pub seed: u64,
    pub sla: Option<Sla>,
}

/// One sweep point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Point {
    pub variant: usize,
    pub qd: u32,
}

/// Where the files a job's `trace` names are read from.
#[derive(Clone, Copy, Debug)]
enum Traces<'a> {
    /// Relative to the experiment file's directory.
    Dir(&'a Path),
    /// Built into the binary (crate::shipped::TRACES), for the shipped experiments.
    Shipped,
}

impl Traces<'_> {
    /// The trace's text and its name for errors.
    fn read(self, path: &str) -> Result<(String, String), String> {
        match self {
            Self::Dir(base) => {
                let at = base.join(path);
                let origin = at.display().to_string();
                match std::fs::read_to_string(&at) {
                    Ok(text) => Ok((text, origin)),
                    Err(e) => Err(format!("reading {origin}: {e}")),
                }
            }
            Self::Shipped => match shipped::trace(path) {
                Some(text) => Ok((text.to_owned(), path.to_owned())),
                None => Err(format!(
                    "{path:?} is not a shipped trace ({})",
                    shipped::TRACES
                        .iter()
                        .map(|(p, _)| *p)
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
            },
        }
    }

    /// Reads and parses the trace of every job that has one.
    fn load(self, jobs: &mut [JobSpec]) -> Result<(), SimError> {
        for job in jobs {
            let Some(path) = job.trace.clone() else {
                continue;
            };
            let (text, origin) = self
                .read(&path)
                .map_err(|m| SimError::field(&format!("job \"{}\".trace", job.name), m))?;
            job.load_trace(&text, &origin)?;
        }
        Ok(())
    }
}

/// Keys a variant may set, besides `name` and `job`.
const VARIANT_TABLES: [&str; 6] = ["drive", "queue", "cdl", "replica", "host", "erasure"];

/// Merges `over` into `base`: tables key by key, anything else replaced.
fn merge(base: &mut Table, over: &Table) {
    for (k, v) in over {
        match (base.get_mut(k), v) {
            (Some(Value::Table(b)), Value::Table(o)) => merge(b, o),
            _ => {
                base.insert(k.clone(), v.clone());
            }
        }
    }
}

fn apply_variant(base: &Table, i: usize, variant: &Value) -> Result<(String, Table), SimError> {
    let at = format!("variant[{i}]");
    let Value::Table(v) = variant else {
        return Err(SimError::field(&at, "must be a table"));
    };
    let name = match v.get("name") {
        Some(Value::String(n)) if !n.is_empty() => n.clone(),
        _ => {
            return Err(SimError::field(
                &format!("{at}.name"),
                "missing or not a non-empty string",
            ))
        }
    };
    let mut doc = base.clone();
    for (k, value) in v {
        match (k.as_str(), value) {
            ("name", _) => {}
            ("job", Value::Table(jobs)) => {
                for (job_name, over) in jobs {
                    let Value::Table(over) = over else {
                        return Err(SimError::field(
                            &format!("{at}.job.{job_name}"),
                            "must be a table",
                        ));
                    };
                    let target = doc
                        .get_mut("job")
                        .and_then(Value::as_array_mut)
                        .and_then(|js| {
                            js.iter_mut()
                                .find(|j| j.get("name").and_then(Value::as_str) == Some(job_name))
                        })
                        .and_then(Value::as_table_mut)
                        .ok_or_else(|| {
                            SimError::field(
                                &format!("{at}.job.{job_name}"),
                                "no [[job]] has this name",
                            )
                        })?;
                    merge(target, over);
                }
            }
            (key, Value::Table(t)) if VARIANT_TABLES.contains(&key) => {
                let mut into = Table::new();
                into.insert(key.to_owned(), Value::Table(t.clone()));
                merge(&mut doc, &into);
            }
            (key, other) if VARIANT_TABLES.contains(&key) => {
                doc.insert(key.to_owned(), other.clone());
            }
            (key, _) => {
                return Err(SimError::field(
                    &format!("{at}.{key}"),
                    "unknown field (a variant may set name, drive, queue, cdl, replica, host, \
                 erasure, job.<name>)",
                ))
            }
        }
    }
    Ok((name, doc))
}

impl Experiment {
    /// Reads and validates a file; errors name the file and the field.
    pub fn load(path: &Path) -> Result<Self, SimError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| SimError::Parse(format!("reading {}: {e}", path.display())))?;
        Self::parse_in(&text, path.parent().unwrap_or(Path::new(".")))
    }

    /// Parses a file's text; relative profile paths are taken from the current directory.
    pub fn parse(text: &str) -> Result<Self, SimError> {
        Self::parse_in(text, Path::new("."))
    }

    /// Parses a file's text; relative profile and trace paths are taken from `base`.
    pub fn parse_in(text: &str, base: &Path) -> Result<Self, SimError> {
        Self::parse_with(text, Traces::Dir(base), base)
    }

    /// Parses a shipped experiment (crate::shipped): its traces are built in.
    pub fn parse_shipped(text: &str) -> Result<Self, SimError> {
        Self::parse_with(text, Traces::Shipped, Path::new("."))
    }

    fn parse_with(text: &str, traces: Traces<'_>, base: &Path) -> Result<Self, SimError> {
        let mut doc: Table = text
            .parse()
            .map_err(|e: toml::de::Error| SimError::Parse(e.to_string()))?;
        let variants = match doc.remove("variant") {
            None => Vec::new(),
            Some(Value::Array(vs)) => vs,
            Some(_) => {
                return Err(SimError::field(
                    "variant",
                    "must be an array of tables ([[variant]])",
                ))
            }
        };
        // Errors say which variant only when the file has variants.
        let has_variants = !variants.is_empty();
        let named = |e: SimError, name: &str| if has_variants { e.in_variant(name) } else { e };
        let docs: Vec<(String, Table)> = if variants.is_empty() {
            vec![("default".to_owned(), doc.clone())]
        } else {
            variants
                .iter()
                .enumerate()
                .map(|(i, v)| apply_variant(&doc, i, v))
                .collect::<Result<_, _>>()?
        };
        let mut first: Option<ExperimentFile> = None;
        let mut built = Vec::with_capacity(docs.len());
        for (name, d) in docs {
            let explicit: Vec<bool> = d
                .get("job")
                .and_then(Value::as_array)
                .map(|js| js.iter().map(|j| j.get("iodepth").is_some()).collect())
                .unwrap_or_default();
            let mut file: ExperimentFile = Value::Table(d)
                .try_into()
                .map_err(|e: toml::de::Error| named(SimError::Parse(e.to_string()), &name))?;
            traces.load(&mut file.jobs).map_err(|e| named(e, &name))?;
            let variant =
                Self::variant(&name, &file, explicit, base).map_err(|e| named(e, &name))?;
            if built.iter().any(|v: &Variant| v.name == name) {
                return Err(SimError::field(
                    "variant.name",
                    format!("duplicate variant {name:?}"),
                ));
            }
            built.push(variant);
            first.get_or_insert(file);
        }
        let Some(file) = first else {
            return Err(SimError::field("variant", "no variant"));
        };
        Self::common(file, built)
    }

    fn variant(
        name: &str,
        file: &ExperimentFile,
        explicit: Vec<bool>,
        base: &Path,
    ) -> Result<Variant, SimError> {
        if file.jobs.is_empty() {
            return Err(SimError::field("job", "at least one [[job]] is needed"));
        }
        let drive = file.drive.prepare(base)?;
        let cdl = file.cdl.pages()?;
        file.queue.config(cdl)?;
        let replica = file.replica.map(Replica::new).transpose()?;
        let host = Host::new(file.host)?;
        let erasure = file
            .erasure
            .as_ref()
            .map(|e| e.validate(drive.capacity, drive.block_size()))
            .transpose()?;
        if erasure.is_some() {
            if replica.is_some() {
                return Err(SimError::field(
                    "replica",
                    "an erasure experiment rebuilds a failed chunk from the other drives, \
                     not from a replica: leave [replica] out",
                ));
            }
            if host.abort_fails_the_queue() || host.sense_stalls_the_queue() {
                return Err(SimError::field(
                    "host.interface",
                    "an erasure experiment's drives are on SAS: leave [host] out",
                ));
            }
        }
        let capacity = erasure
            .as_ref()
            .map_or(drive.capacity, |e| e.user_capacity(drive.capacity));
        let mut names = std::collections::BTreeSet::new();
        for job in &file.jobs {
            if !names.insert(job.name.as_str()) {
                return Err(SimError::field(
                    "job.name",
                    format!("duplicate job {:?}", job.name),
                ));
            }
            let compiled = job.compile(capacity)?;
            if let Some(e) = &erasure {
                e.check_user_job(&compiled)?;
            }
        }
        Ok(Variant {
            name: name.to_owned(),
            drive,
            queue: file.queue.clone(),
            cdl,
            replica,
            host,
            erasure,
            jobs: file.jobs.iter().cloned().zip(explicit).collect(),
            capacity,
        })
    }

    fn common(file: ExperimentFile, variants: Vec<Variant>) -> Result<Self, SimError> {
        if file.id.is_empty()
            || !file
                .id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(SimError::field(
                "id",
                format!("{:?} must be letters, digits, - or _", file.id),
            ));
        }
        if file.qd.is_empty() {
            return Err(SimError::field("qd", "needs at least one queue depth"));
        }
        if let Some(bad) = file.qd.iter().find(|q| !(1..=MAX_QD).contains(*q)) {
            return Err(SimError::field(
                "qd",
                format!("{bad} is outside 1..={MAX_QD}"),
            ));
        }
        let stop = match (file.ios, file.runtime) {
            (Some(_), Some(_)) => {
                return Err(SimError::field("runtime", "give ios or runtime, not both"))
            }
            (Some(n), None) if (1..=MAX_IOS).contains(&n) => Stop::Ios(n),
            (Some(n), None) => {
                return Err(SimError::field(
                    "ios",
                    format!("{n} is outside 1..={MAX_IOS}"),
                ))
            }
            (None, Some(s)) if s > 0.0 && s <= 1e6 => Stop::Runtime((s * 1e9) as u64),
            (None, Some(s)) => {
                return Err(SimError::field(
                    "runtime",
                    format!("{s} s is outside (0, 1e6]"),
                ))
            }
            (None, None) => Stop::Ios(20_000),
        };
        let turnaround_us = file.host_turnaround_us.unwrap_or(HOST_TURNAROUND_US);
        if !(0.0..=1e6).contains(&turnaround_us) {
            return Err(SimError::field(
                "host_turnaround_us",
                format!("{turnaround_us} is outside 0..=1e6"),
            ));
        }
        let sla = file.sla.as_ref().map(Sla::new).transpose()?;
        let deepest = file.qd.iter().copied().max().unwrap_or(1);
        for v in &variants {
            let outstanding: u64 = v
                .jobs
                .iter()
                .map(|(j, explicit)| {
                    u64::from(j.numjobs) * u64::from(if *explicit { j.iodepth } else { deepest })
                })
                .sum();
            if outstanding > MAX_OUTSTANDING {
                return Err(SimError::field(
                    "qd",
                    format!("variant {:?} keeps {outstanding} commands outstanding (numjobs × iodepth), more than {MAX_OUTSTANDING}", v.name),
                ));
            }
        }
        Ok(Self {
            title: file.title.clone().unwrap_or_else(|| file.id.clone()),
            id: file.id,
            qd: file.qd,
            variants_in_file: variants.len(),
            variants,
            stop,
            ramp_ios: file.ramp_ios,
            turnaround: (turnaround_us * 1e3) as u64,
            seed: file.seed.unwrap_or(1),
            sla,
        })
    }

    /// Points in output order: variant by variant, queue depths as listed.
    pub fn points(&self) -> Vec<Point> {
        (0..self.variants.len())
            .flat_map(|variant| self.qd.iter().map(move |&qd| Point { variant, qd }))
            .collect()
    }

    /// Replaces the queue-depth sweep (command-line `--qd`).
    pub fn set_qd(&mut self, qd: Vec<u32>) -> Result<(), SimError> {
        if qd.is_empty() {
            return Err(SimError::field("--qd", "needs at least one queue depth"));
        }
        if let Some(bad) = qd.iter().find(|q| !(1..=MAX_QD).contains(*q)) {
            return Err(SimError::field(
                "--qd",
                format!("{bad} is outside 1..={MAX_QD}"),
            ));
        }
        self.qd = qd;
        Ok(())
    }

    /// Keeps only the named variants, in the file's order (command-line `--variant`).
    pub fn select_variants(&mut self, names: &[String]) -> Result<(), SimError> {
        if let Some(unknown) = names
            .iter()
            .find(|n| !self.variants.iter().any(|v| &v.name == *n))
        {
            let known: Vec<&str> = self.variants.iter().map(|v| v.name.as_str()).collect();
            return Err(SimError::field(
                "--variant",
                format!(
                    "no variant {unknown:?} (this file has: {})",
                    known.join(", ")
                ),
            ));
        }
        self.variants.retain(|v| names.contains(&v.name));
        Ok(())
    }

    /// Replaces the stop condition (command-line `--ios` / `--runtime`).
    pub fn set_stop(&mut self, stop: Stop) {
        self.stop = stop;
    }

    /// The host side of a point.
    pub fn setup(&self, point: Point, seed: u64) -> Result<PointSetup, SimError> {
        let capacity = self
            .variants
            .get(point.variant)
            .ok_or_else(|| SimError::field("variant", "no such variant"))?
            .capacity;
        self.setup_on(point, seed, capacity)
    }

    /// The host side of a point on a device of `capacity` bytes (`stint bench` against a LUN
    /// of its own size).
    pub fn setup_on(&self, point: Point, seed: u64, capacity: u64) -> Result<PointSetup, SimError> {
        let variant = self
            .variants
            .get(point.variant)
            .ok_or_else(|| SimError::field("variant", "no such variant"))?;
        let mut jobs: Vec<Job> = Vec::new();
        for (spec, explicit) in &variant.jobs {
            let mut spec = spec.clone();
            if !explicit {
                spec.iodepth = point.qd;
            }
            let job = spec.compile(capacity)?;
            for _ in 0..spec.numjobs {
                jobs.push(job.clone());
            }
        }
        let outstanding: u64 = jobs.iter().map(|j| u64::from(j.iodepth)).sum();
        Ok(PointSetup {
            jobs,
            turnaround: self.turnaround,
            ramp: self.ramp_ios.unwrap_or(10 * outstanding + 200),
            stop: self.stop,
            replica: variant.replica,
            host: variant.host,
            sla: self.sla.map(|s| s.scope),
            seed,
        })
    }
}
