//! Turns a [`Job`] and a seed into commands.

use crate::{Job, Rng, SizeSplit, TraceIo, SECTOR};
use qos::Class;

/// One command to issue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Io {
    /// In 512-byte sectors.
    pub lba: u64,
    pub blocks: u32,
    pub write: bool,
    pub class: Class,
    /// Duration limit descriptor index (0 = none).
    pub dld: u8,
}

impl Io {
    pub fn bytes(&self) -> u64 {
        u64::from(self.blocks) * SECTOR
    }
}

/// A seeded command stream for one job instance; for a job with a trace, the trace's I/Os in
/// its order (the seed then only draws their priorities).
#[derive(Clone, Debug)]
pub struct Generator {
    job: Job,
    rng: Rng,
    /// Sequential jobs: next byte offset relative to the region start. Replays: the index of
    /// the next trace I/O.
    cursor: u64,
}

impl Generator {
    pub fn new(job: Job, seed: u64) -> Self {
        Self {
            job,
            rng: Rng::new(seed),
            cursor: 0,
        }
    }

    pub fn job(&self) -> &Job {
        &self.job
    }

    fn size(rng: &mut Rng, split: &SizeSplit) -> u64 {
        match split.0.as_slice() {
            [(only, _)] => *only,
            parts => {
                let mut u = rng.unit() * 100.0;
                for (bytes, pct) in parts {
                    if u < *pct {
                        return *bytes;
                    }
                    u -= pct;
                }
                split.max()
            }
        }
    }

    /// The class and DLD of a command: one draw over the rules that match it (their shares
    /// are disjoint slices).
    fn prio(job: &Job, rng: &mut Rng, write: bool, bytes: u64) -> (Class, u8) {
        let (mut class, mut dld) = (job.class, 0);
        if !job.prios.is_empty() {
            let mut u = rng.unit();
            for p in &job.prios {
                if p.write.is_some_and(|w| w != write) || p.bs.is_some_and(|b| b != bytes) {
                    continue;
                }
                if u < p.share {
                    (class, dld) = (p.class, p.dld);
                    break;
                }
                u -= p.share;
            }
        }
        (class, dld)
    }

    /// The trace's next I/O (from its start again past its end: the job's `number_ios` stops
    /// it first). An offset past the region wraps into it: modulo (region − length + 1), so
    /// that an I/O that fits stays where the trace put it and any other lies wholly inside.
    fn replayed(&mut self, ios: &[TraceIo]) -> Io {
        let i = usize::try_from(self.cursor).unwrap_or(0) % ios.len().max(1);
        self.cursor += 1;
        let Some(t) = ios.get(i) else {
            return Io {
                lba: 0,
                blocks: 0,
                write: false,
                class: self.job.class,
                dld: 0,
            };
        };
        let job = &self.job;
        // compile() checked that every I/O fits the region.
        let span = job.len.saturating_sub(t.len) + 1;
        let offset = t.offset % span / SECTOR * SECTOR;
        let (class, dld) = Self::prio(job, &mut self.rng, t.write, t.len);
        Io {
            lba: (job.start + offset) / SECTOR,
            blocks: u32::try_from(t.len / SECTOR).unwrap_or(u32::MAX),
            write: t.write,
            class,
            dld,
        }
    }

    pub fn next_io(&mut self) -> Io {
        if let Some(r) = &self.job.replay {
            let trace = r.trace.clone();
            return self.replayed(&trace.ios);
        }
        let job = &self.job;
        let rng = &mut self.rng;
        let write = match job.read_probability {
            p if p >= 1.0 => false,
            p if p <= 0.0 => true,
            p => !rng.chance(p),
        };
        let bytes = Self::size(
            rng,
            if write {
                &job.sizes.write
            } else {
                &job.sizes.read
            },
        );
        let offset = if job.random {
            // Aligned to the block size, wholly inside the region (fio's default blockalign).
            rng.below(job.len / bytes) * bytes
        } else {
            if self.cursor + bytes > job.len {
                self.cursor = 0;
            }
            let at = self.cursor;
            self.cursor += bytes;
            at
        };
        let (class, dld) = Self::prio(job, rng, write, bytes);
        Io {
            lba: (job.start + offset) / SECTOR,
            blocks: u32::try_from(bytes / SECTOR).unwrap_or(u32::MAX),
            write,
            class,
            dld,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::JobSpec;

    fn job(text: &str) -> Job {
        let spec: JobSpec = toml::from_str(&format!("name = \"g\"\n{text}")).unwrap();
        spec.compile(1 << 30).unwrap()
    }

    #[test]
    fn random_reads_are_aligned_and_inside_the_region() {
        let mut g = Generator::new(job("bs = \"128k\"\noffset = \"1m\"\nsize = \"64m\""), 1);
        for _ in 0..2000 {
            let io = g.next_io();
            let byte = io.lba * SECTOR;
            assert!(!io.write);
            assert_eq!(io.blocks, 256);
            assert_eq!((byte - (1 << 20)) % (128 << 10), 0);
            assert!(byte >= 1 << 20 && byte + (128 << 10) <= (65 << 20));
        }
    }

    #[test]
    fn sequential_wraps_at_the_end() {
        let mut g = Generator::new(job("rw = \"read\"\nbs = \"1m\"\nsize = \"3m\""), 1);
        let lbas: Vec<u64> = (0..4).map(|_| g.next_io().lba).collect();
        assert_eq!(lbas, vec![0, 2048, 4096, 0]);
    }

    #[test]
    fn mixes_and_priorities_follow_their_shares() {
        let mut g = Generator::new(
            job("rw = \"randrw\"\nrwmixread = 70\n\
                 [[cmdprio]]\npercentage = 20\nhint = 1\nclass = \"high\"\ndirection = \"read\"\n\
                 [[cmdprio]]\npercentage = 10\nhint = 2\ndirection = \"read\""),
            9,
        );
        let n = 50_000;
        let (mut reads, mut d1, mut d2, mut wd) = (0, 0, 0, 0);
        for _ in 0..n {
            let io = g.next_io();
            if io.write {
                wd += u32::from(io.dld != 0);
                continue;
            }
            reads += 1;
            match io.dld {
                1 => {
                    assert_eq!(io.class, Class::High);
                    d1 += 1;
                }
                2 => {
                    assert_eq!(io.class, Class::Medium);
                    d2 += 1;
                }
                _ => {}
            }
        }
        let frac = |a: u32, b: u32| f64::from(a) / f64::from(b);
        assert!((frac(reads, n) - 0.7).abs() < 0.01);
        assert!((frac(d1, reads) - 0.2).abs() < 0.01);
        assert!((frac(d2, reads) - 0.1).abs() < 0.01);
        assert_eq!(wd, 0);
    }

    #[test]
    fn a_replay_follows_the_trace_and_wraps_offsets_into_the_region() {
        let mut spec: JobSpec = toml::from_str(
            "name = \"r\"\ntrace = \"t\"\ntrace_format = \"msr\"\noffset = \"1m\"\n\
             size = \"1m\"\n[[cmdprio]]\npercentage = 100\nhint = 3\ndirection = \"write\"",
        )
        .unwrap();
        spec.load_trace(
            "1,h,0,Read,4096,4096,0\n2,h,0,Write,1048576,8192,0\n3,h,0,Read,1044480,4096,0\n",
            "t",
        )
        .unwrap();
        let mut g = Generator::new(spec.compile(1 << 30).unwrap(), 1);
        let ios: Vec<Io> = (0..4).map(|_| g.next_io()).collect();
        let io = |lba: u64, blocks: u32, write: bool, dld: u8| Io {
            lba: 2048 + lba,
            blocks,
            write,
            class: Class::Medium,
            dld,
        };
        // The write at the region's end wraps: 1 MiB mod (1 MiB - 8 KiB + 1) = 8191 bytes, in
        // sector 15. The read that ends at the region's end stays. Past the end, the trace again.
        assert_eq!(
            ios,
            vec![
                io(8, 8, false, 0),
                io(15, 16, true, 3),
                io(2040, 8, false, 0),
                io(8, 8, false, 0)
            ]
        );
    }

    #[test]
    fn same_seed_same_stream() {
        let j = job("rw = \"randrw\"\nbssplit = \"4k/50:64k/50\"");
        let a: Vec<Io> = {
            let mut g = Generator::new(j.clone(), 5);
            (0..100).map(|_| g.next_io()).collect()
        };
        let mut g = Generator::new(j, 5);
        let b: Vec<Io> = (0..100).map(|_| g.next_io()).collect();
        assert_eq!(a, b);
    }
}
