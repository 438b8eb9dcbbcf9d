//! `stint serve --metrics ADDR`: what every logical unit counts, in the Prometheus text
//! exposition format (version 0.0.4), over a small HTTP endpoint ([`http`]); the same
//! samples, one LUN's, answer `stint ctl stats`. The names and labels are documented in
//! docs/metrics.md.
//!
//! A series appears once it has counted something, except the per-LU totals (commands ended
//! GOOD or CHECK CONDITION by kind, bytes) and the gauges, which are always there.

pub mod http;

use crate::admin::proto::Sample;
use device::latency::Histogram;
use device::metrics::{Kind, ENDINGS};
use device::{Metrics, Unit};
use prometheus::proto::{self, LabelPair, MetricFamily, MetricType};
use qos::{Class, LimitKind, Outcome, Policy};
use scsi::{SenseKey, Status};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The text of one scrape of `units`.
pub fn encode(units: &[Arc<Unit>], delivery: &Histogram) -> String {
    let mut families = families(units);
    families.extend(Families::portal(delivery).0.into_values());
    let mut text = String::new();
    // Only a family without metrics or without a name fails, and none is built so.
    if let Err(e) = prometheus::TextEncoder::new().encode_utf8(&families, &mut text) {
        tracing::error!(error = %e, "encoding metrics");
    }
    text
}

/// What `units` count now, by family: the one source of the endpoint's scrape and of
/// `stint ctl stats`.
pub fn families(units: &[Arc<Unit>]) -> Vec<MetricFamily> {
    let mut families = Families::default();
    for unit in units {
        // Copied under the core's lock, encoded after it.
        let (target, lun, metrics) = unit.with(|core| {
            let config = core.config();
            (config.target_name.clone(), config.lun, core.metrics())
        });
        let lun = lun.to_string();
        let labels = [("target", target.as_str()), ("lun", &lun)];
        families.logical_unit(&labels, &metrics);
    }
    families.0.into_values().collect()
}

/// The samples of `families` as the text format writes them: a histogram is its
/// cumulative `_bucket` samples (label `le`), `_sum` and `_count`.
pub fn samples(families: &[MetricFamily]) -> Vec<Sample> {
    let mut out = Vec::new();
    for family in families {
        let name = family.name();
        for metric in family.get_metric() {
            let labels: BTreeMap<String, String> = metric
                .get_label()
                .iter()
                .map(|l| (l.name().to_owned(), l.value().to_owned()))
                .collect();
            let mut push = |suffix: &str, extra: Option<(&str, String)>, value: f64| {
                let mut labels = labels.clone();
                if let Some((k, v)) = extra {
                    labels.insert(k.to_owned(), v);
                }
                out.push(Sample {
                    name: format!("{name}{suffix}"),
                    labels,
                    value,
                });
            };
            match family.get_field_type() {
                MetricType::COUNTER => push("", None, metric.get_counter().get_value()),
                MetricType::GAUGE => push("", None, metric.get_gauge().get_value()),
                MetricType::HISTOGRAM => {
                    let h = metric.get_histogram();
                    // As prometheus::TextEncoder writes them, +Inf added when missing.
                    let mut inf_seen = false;
                    for b in h.get_bucket() {
                        let bound = b.upper_bound();
                        inf_seen |= bound == f64::INFINITY;
                        let le = match bound == f64::INFINITY {
                            true => "+Inf".to_owned(),
                            false => bound.to_string(),
                        };
                        push("_bucket", Some(("le", le)), b.cumulative_count() as f64);
                    }
                    let count = h.get_sample_count();
                    if !inf_seen {
                        push("_bucket", Some(("le", "+Inf".to_owned())), count as f64);
                    }
                    push("_sum", None, h.get_sample_sum());
                    push("_count", None, count as f64);
                }
                // Families are built of the three kinds above only.
                _ => {}
            }
        }
    }
    out
}

/// The metric families of a scrape, by name.
#[derive(Default)]
struct Families(BTreeMap<&'static str, MetricFamily>);

type Labels<'a> = [(&'a str, &'a str)];

impl Families {
    fn add(
        &mut self,
        name: &'static str,
        help: &str,
        kind: MetricType,
        labels: &[&Labels],
        mut metric: proto::Metric,
    ) {
        let family = self.0.entry(name).or_insert_with(|| {
            let mut f = MetricFamily::default();
            f.set_name(name.to_owned());
            f.set_help(help.to_owned());
            f.set_field_type(kind);
            f
        });
        let pairs = labels
            .iter()
            .flat_map(|l| l.iter())
            .map(|(name, value)| {
                let mut p = LabelPair::default();
                p.set_name((*name).to_owned());
                p.set_value((*value).to_owned());
                p
            })
            .collect();
        metric.set_label(pairs);
        family.mut_metric().push(metric);
    }

    fn counter(&mut self, name: &'static str, help: &str, labels: &[&Labels], value: u64) {
        let mut c = proto::Counter::default();
        c.set_value(value as f64);
        let mut m = proto::Metric::default();
        m.set_counter(c);
        self.add(name, help, MetricType::COUNTER, labels, m);
    }

    fn gauge(&mut self, name: &'static str, help: &str, labels: &[&Labels], value: usize) {
        let mut g = proto::Gauge::default();
        g.set_value(value as f64);
        self.add(
            name,
            help,
            MetricType::GAUGE,
            labels,
            proto::Metric::from_gauge(g),
        );
    }

    fn histogram(&mut self, name: &'static str, help: &str, labels: &[&Labels], h: &Histogram) {
        let buckets = h
            .cumulative()
            .map(|(bound, count)| {
                let mut b = proto::Bucket::default();
                b.set_upper_bound(seconds(bound));
                b.set_cumulative_count(count);
                b
            })
            .collect();
        let mut p = proto::Histogram::default();
        p.set_bucket(buckets);
        p.set_sample_count(h.count());
        p.set_sample_sum(seconds(h.sum_ns()));
        let mut m = proto::Metric::default();
        m.set_histogram(p);
        self.add(name, help, MetricType::HISTOGRAM, labels, m);
    }

    /// What the portal counts across its logical units.
    fn portal(delivery: &Histogram) -> Families {
        let mut families = Families::default();
        families.histogram(
            "stint_delivery_seconds",
            "Hand-offs of tasks back to their connection (from a logical unit's clock or data plane) until the connection wrote the batch it handled them in.",
            &[],
            delivery,
        );
        families
    }

    fn logical_unit(&mut self, lu: &Labels, m: &Metrics) {
        let c = &m.counts;
        for kind in Kind::ALL {
            for ending in ENDINGS {
                let n = c.commands(kind, ending);
                let always = matches!(ending, Some(Status::Good | Status::CheckCondition));
                if n > 0 || always {
                    let labels = [("kind", kind.name()), ("status", ending_name(ending))];
                    self.counter(
                        "stint_commands_total",
                        "Commands the logical unit ended, by kind and status (aborted: by task management, no status sent).",
                        &[lu, &labels],
                        n,
                    );
                }
            }
        }
        for s in &c.sense {
            let asc = format!("{:02X}h/{:02X}h", s.asc.0, s.asc.1);
            let labels = [
                ("kind", s.kind.name()),
                ("sense_key", sense_key_name(s.key)),
                ("asc", asc.as_str()),
            ];
            self.counter(
                "stint_sense_total",
                "Completions with sense data, by kind, sense key and ASC/ASCQ.",
                &[lu, &labels],
                s.count,
            );
        }
        self.counter(
            "stint_read_bytes_total",
            "Data-In bytes of read commands that ended GOOD.",
            &[lu],
            c.read_bytes,
        );
        self.counter(
            "stint_written_bytes_total",
            "Data-Out bytes of write commands that ended GOOD.",
            &[lu],
            c.written_bytes,
        );
        if let Some(q) = &m.queue {
            self.queue(lu, q);
        }
    }

    fn queue(&mut self, lu: &Labels, q: &device::metrics::QueueMetrics) {
        self.gauge(
            "stint_task_set_tasks",
            "Tasks in the task set: held, in a submission queue or in the device queue.",
            &[lu],
            q.tasks,
        );
        self.gauge(
            "stint_device_queue_commands",
            "Commands in the device queue, queued or in service.",
            &[lu],
            q.device_queue,
        );
        for class in Class::ALL {
            let labels = [("class", class.name())];
            let labels: &[&Labels] = &[lu, &labels];
            self.gauge(
                "stint_submission_queue_commands",
                "Commands waiting in the class's submission queue.",
                labels,
                q.waiting[class.index()],
            );
            let counters = &q.stats.classes[class.index()];
            if *counters == qos::Counters::default() {
                continue;
            }
            self.counter(
                "stint_class_commands_total",
                "Medium commands submitted to the device queue in the class.",
                labels,
                counters.commands,
            );
            self.outcomes("stint_class_completions_total", labels, counters);
            self.counter(
                "stint_class_missed_total",
                "Commands of the class that exceeded at least one duration limit.",
                labels,
                counters.commands_missed,
            );
            self.histogram(
                "stint_class_latency_seconds",
                "Arrival in the task set to completion, of the class's medium commands.",
                labels,
                &q.latencies.classes[class.index()],
            );
        }
        if q.latencies.late_ends.count() > 0 {
            self.histogram(
                "stint_cdl_end_lateness_seconds",
                "How long after its limit expired a command a CDL policy (Dh, Eh, Fh) ended left the task set.",
                &[lu],
                &q.latencies.late_ends,
            );
        }
        for (kind, page, histograms) in [
            (Kind::Read, &q.stats.t2a, &q.latencies.reads),
            (Kind::Write, &q.stats.t2b, &q.latencies.writes),
        ] {
            for (dld, h) in histograms.iter().enumerate() {
                let dld_name = dld.to_string();
                let labels = [("kind", kind.name()), ("dld", dld_name.as_str())];
                let labels: &[&Labels] = &[lu, &labels];
                if h.count() > 0 {
                    self.histogram(
                        "stint_descriptor_latency_seconds",
                        "Arrival in the task set to completion, by kind and DLD (reads: T2A descriptor, writes: T2B; 0: no limit).",
                        labels,
                        h,
                    );
                }
                // A descriptor may count misses without commands (a 1h chain ends in it).
                match dld.checked_sub(1).and_then(|i| page.get(i)) {
                    Some(c) if *c != qos::Counters::default() => self.descriptor(labels, c),
                    _ => {}
                }
            }
        }
    }

    /// The queue's counters of one CDL descriptor (LOG SENSE 19h/21h's and more).
    fn descriptor(&mut self, labels: &[&Labels], c: &qos::Counters) {
        self.counter(
            "stint_cdl_commands_total",
            "Commands submitted with the descriptor (LOG SENSE 19h/21h NUMBER OF COMMANDS).",
            labels,
            c.commands,
        );
        self.outcomes("stint_cdl_completions_total", labels, c);
        self.counter(
            "stint_cdl_met_total",
            "Commands of the descriptor that completed within all its limits.",
            labels,
            c.completions.total().saturating_sub(c.commands_missed),
        );
        self.counter(
            "stint_cdl_missed_total",
            "Commands of the descriptor that exceeded at least one of its limits.",
            labels,
            c.commands_missed,
        );
        for limit in LimitKind::ALL {
            for policy in Policy::ALL {
                let n = c.misses(limit).get(policy);
                if n > 0 {
                    let code = format!("{:X}h", policy.code());
                    let extra = [("limit", limit_name(limit)), ("policy", code.as_str())];
                    let mut all = labels.to_vec();
                    all.push(&extra);
                    self.counter(
                        "stint_cdl_limit_misses_total",
                        "Limits of the descriptor exceeded, by limit and the policy applied.",
                        &all,
                        n,
                    );
                }
            }
        }
    }

    /// How commands left the device queue: the queue's outcomes, and task management aborts.
    fn outcomes(&mut self, name: &'static str, labels: &[&Labels], c: &qos::Counters) {
        let help = "Commands that left the device queue, by outcome (CDL policies Dh: completed_unavailable, Eh: aborted_error_recovery, Fh: aborted_*).";
        let ended = Outcome::ALL
            .into_iter()
            .map(|o| (outcome_name(o), c.completions.get(o)))
            .chain([("task_management", c.aborted_tasks)]);
        for (outcome, n) in ended.filter(|(_, n)| *n > 0) {
            let extra = [("outcome", outcome)];
            let mut all = labels.to_vec();
            all.push(&extra);
            self.counter(name, help, &all, n);
        }
    }
}

fn seconds(ns: u64) -> f64 {
    ns as f64 / 1e9
}

fn ending_name(ending: Option<Status>) -> &'static str {
    match ending {
        Some(Status::Good) => "good",
        Some(Status::CheckCondition) => "check_condition",
        Some(Status::ConditionMet) => "condition_met",
        Some(Status::Busy) => "busy",
        Some(Status::ReservationConflict) => "reservation_conflict",
        Some(Status::TaskSetFull) => "task_set_full",
        Some(Status::AcaActive) => "aca_active",
        Some(Status::TaskAborted) => "task_aborted",
        None => "aborted",
    }
}

/// SPC-5 table 51's names.
fn sense_key_name(key: SenseKey) -> &'static str {
    match key {
        SenseKey::NoSense => "no_sense",
        SenseKey::RecoveredError => "recovered_error",
        SenseKey::NotReady => "not_ready",
        SenseKey::MediumError => "medium_error",
        SenseKey::HardwareError => "hardware_error",
        SenseKey::IllegalRequest => "illegal_request",
        SenseKey::UnitAttention => "unit_attention",
        SenseKey::DataProtect => "data_protect",
        SenseKey::BlankCheck => "blank_check",
        SenseKey::VendorSpecific => "vendor_specific",
        SenseKey::CopyAborted => "copy_aborted",
        SenseKey::AbortedCommand => "aborted_command",
        SenseKey::VolumeOverflow => "volume_overflow",
        SenseKey::Miscompare => "miscompare",
        SenseKey::Completed => "completed",
    }
}

fn outcome_name(o: Outcome) -> &'static str {
    match o {
        Outcome::Good => "good",
        Outcome::CompletedUnavailable => "completed_unavailable",
        Outcome::AbortedBeforeProcessing => "aborted_before_processing",
        Outcome::AbortedDuringProcessing => "aborted_during_processing",
        Outcome::AbortedErrorRecovery => "aborted_error_recovery",
        Outcome::MediumError => "medium_error",
    }
}

fn limit_name(limit: LimitKind) -> &'static str {
    match limit {
        LimitKind::Inactive => "inactive",
        LimitKind::Active => "active",
        LimitKind::Guideline => "guideline",
    }
}
