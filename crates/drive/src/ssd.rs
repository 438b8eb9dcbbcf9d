//! Flash drive timing model: N parallel units with per-op read/program latency, LBA→unit
//! striping, per-unit queueing and one shared host interface (enough for the WRR and NCQ-depth
//! experiments, experiments/README.md, C1, C2, D1).

use serde::Deserialize;

use crate::error::{check_range, ProfileError};
use crate::{Drive, MediaOp, MediaOutcome, Ns, Service, NS_PER_US};

/// The checked-in default flash profile.
pub const DEFAULT_SSD_PROFILE: &str = include_str!("../profiles/ssd-nvme-tlc.toml");

/// A flash drive profile (TOML).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SsdProfile {
    pub name: String,
    pub capacity_sectors: u64,
    pub sector_bytes: u32,
    pub units: u32,
    pub stripe_sectors: u32,
    pub read_us: f64,
    pub program_us: f64,
    pub command_overhead_us: f64,
    pub transfer_mb_s: f64,
    pub queue_slots: u32,
}

impl SsdProfile {
    /// Parses and checks a profile; errors name the field.
    pub fn from_toml(text: &str) -> Result<Self, ProfileError> {
        let p: Self = toml::from_str(text).map_err(|e| ProfileError::Parse(e.to_string()))?;
        p.validate()?;
        Ok(p)
    }

    /// The default flash profile.
    pub fn default_nvme() -> Self {
        match Self::from_toml(DEFAULT_SSD_PROFILE) {
            Ok(p) => p,
            Err(e) => unreachable!("embedded default SSD profile is invalid: {e}"),
        }
    }

    pub fn validate(&self) -> Result<(), ProfileError> {
        if self.capacity_sectors == 0 {
            return Err(ProfileError::invalid(
                "capacity_sectors",
                "must be at least 1",
            ));
        }
        if !matches!(self.sector_bytes, 512 | 4096) {
            return Err(ProfileError::invalid("sector_bytes", "must be 512 or 4096"));
        }
        if !(1..=4096).contains(&self.units) {
            return Err(ProfileError::invalid("units", "must be between 1 and 4096"));
        }
        if self.stripe_sectors == 0 {
            return Err(ProfileError::invalid(
                "stripe_sectors",
                "must be at least 1",
            ));
        }
        check_range("read_us", self.read_us, 0.0, 1e6)?;
        check_range("program_us", self.program_us, 0.0, 1e6)?;
        check_range("command_overhead_us", self.command_overhead_us, 0.0, 1e6)?;
        check_range("transfer_mb_s", self.transfer_mb_s, 1.0, 1e6)?;
        if !(1..=65536).contains(&self.queue_slots) {
            return Err(ProfileError::invalid(
                "queue_slots",
                "must be between 1 and 65536",
            ));
        }
        Ok(())
    }
}

/// A modelled flash drive.
#[derive(Clone, Debug)]
pub struct Ssd {
    unit_free: Vec<Ns>,
    bus: Bus,
    stripe: u64,
    read: Ns,
    program: Ns,
    overhead: Ns,
    ns_per_byte: f64,
    sector_bytes: u32,
    slots: usize,
}

/// The host interface as a booking calendar: a transfer takes the earliest gap at or after
/// the moment its data is ready, so a read waiting on a busy unit does not hold up later reads
/// whose units are idle (transfers are booked in completion order, not issue order).
#[derive(Clone, Debug, Default)]
struct Bus {
    /// Booked transfers as (start, end), sorted and disjoint.
    busy: Vec<(Ns, Ns)>,
}

impl Bus {
    /// Book `len` ns at the earliest time at or after `ready`; returns the end of the transfer.
    fn book(&mut self, ready: Ns, len: Ns) -> Ns {
        let mut at = ready;
        let mut index = self.busy.len();
        for (i, &(start, end)) in self.busy.iter().enumerate() {
            if at + len <= start {
                index = i;
                break;
            }
            at = at.max(end);
        }
        self.busy.insert(index, (at, at + len));
        at + len
    }

    /// Drop bookings that ended before `now`: the calendar holds only in-flight transfers.
    fn forget_before(&mut self, now: Ns) {
        let done = self.busy.partition_point(|&(_, end)| end < now);
        self.busy.drain(..done);
    }

    fn last_end(&self) -> Ns {
        self.busy.last().map_or(0, |&(_, end)| end)
    }
}

impl Ssd {
    pub fn new(p: &SsdProfile) -> Result<Self, ProfileError> {
        p.validate()?;
        let us = |v: f64| (v * NS_PER_US).round() as Ns;
        Ok(Self {
            unit_free: vec![0; p.units as usize],
            bus: Bus::default(),
            stripe: p.stripe_sectors.into(),
            read: us(p.read_us),
            program: us(p.program_us),
            overhead: us(p.command_overhead_us),
            ns_per_byte: 1e9 / (p.transfer_mb_s * 1e6),
            sector_bytes: p.sector_bytes,
            slots: p.queue_slots as usize,
        })
    }

    fn unit_of(&self, lba: u64) -> usize {
        ((lba / self.stripe) % self.unit_free.len() as u64) as usize
    }

    fn transfer(&self, blocks: u64) -> Ns {
        (blocks as f64 * f64::from(self.sector_bytes) * self.ns_per_byte) as Ns
    }

    /// Stripes of `op`: (first unit, stripe count). Units are taken in order from the first; with
    /// more stripes than units, each unit gets `stripes / units` (+1 for the first remainder).
    fn stripes(&self, op: &MediaOp) -> (u64, u64) {
        let first = op.lba / self.stripe;
        let last = op.lba.saturating_add(u64::from(op.blocks.max(1)) - 1) / self.stripe;
        (first % self.unit_free.len() as u64, last - first + 1)
    }
}

impl Drive for Ssd {
    fn parallelism(&self) -> usize {
        self.slots
    }

    /// Time until the first unit the op needs is free: flash has no seek, only queueing.
    fn positioning_time(&self, now: Ns, op: &MediaOp) -> Ns {
        let u = self.unit_of(op.lba);
        self.unit_free.get(u).map_or(0, |&f| f.saturating_sub(now)) + self.overhead
    }

    /// Queueing on the first unit plus one page operation and the transfer (stripes on other
    /// units proceed in parallel).
    fn service_time(&self, now: Ns, op: &MediaOp) -> Ns {
        let media = if op.write { self.program } else { self.read };
        self.positioning_time(now, op) + media + self.transfer(op.blocks.into())
    }

    fn start(&mut self, now: Ns, op: &MediaOp) -> Service {
        let blocks = u64::from(op.blocks);
        let xfer = self.transfer(blocks);
        let begin = now + self.overhead;
        let units = self.unit_free.len() as u64;
        let (start_unit, stripes) = self.stripes(op);
        let pieces = (0..stripes.min(units)).map(|i| {
            let share = stripes / units + u64::from(i < stripes % units);
            (((start_unit + i) % units) as usize, share)
        });
        self.bus.forget_before(now);
        let done = if op.write {
            // Data crosses the interface first, then each unit programs its stripes.
            let xfer_end = self.bus.book(begin, xfer);
            let mut done = xfer_end;
            for (u, share) in pieces {
                if let Some(free) = self.unit_free.get_mut(u) {
                    *free = (*free).max(xfer_end) + share * self.program;
                    done = done.max(*free);
                }
            }
            done
        } else {
            let mut media_done = begin;
            for (u, share) in pieces {
                if let Some(free) = self.unit_free.get_mut(u) {
                    *free = (*free).max(begin) + share * self.read;
                    media_done = media_done.max(*free);
                }
            }
            self.bus.book(media_done, xfer)
        };
        Service {
            done_at: done,
            outcome: MediaOutcome::Ok,
            recovery: 0,
        }
    }

    fn flush(&mut self, now: Ns) -> Ns {
        self.unit_free
            .iter()
            .copied()
            .fold(self.bus.last_end().max(now), Ns::max)
    }
}
