//! `[erasure]`: user reads striped over an array of simulated drives with k data and m parity
//! chunks per stripe (a Reed–Solomon-style code: any k of the k + m chunks rebuild the data),
//! the layout that maps a user stripe to its drives, and the checks of the file's values.
//! The event loop over the drives is crate::array.

use crate::error::SimError;
use serde::Deserialize;
use toml::{Table, Value};
use workload::{Job, JobSpec};

/// Widest stripe: chunk reads of a user read are tagged `slot × MAX_WIDTH + chunk`.
pub const MAX_WIDTH: u32 = 64;
/// Most drives in an array.
pub const MAX_DRIVES: u32 = 256;

/// `[erasure]` in an experiment file.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ErasureSpec {
    /// Data chunks per stripe (k).
    pub data: u32,
    /// Parity chunks per stripe (m).
    pub parity: u32,
    /// Drives in the array; default data + parity.
    pub drives: Option<u32>,
    /// Bytes per chunk; default "128k".
    pub chunk: Option<String>,
    /// A job every drive runs besides the user reads (its own stream per drive), as a
    /// `[[job]]` without `name`; its `iodepth` is its own (the sweep's qd is the users').
    pub background: Option<Table>,
}

/// A validated `[erasure]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Erasure {
    pub data: u32,
    pub parity: u32,
    pub drives: u32,
    /// Bytes.
    pub chunk: u64,
    /// The background job of each drive, checked against one drive's capacity.
    pub background: Option<JobSpec>,
}

impl ErasureSpec {
    /// Checks the values against drives of `drive_capacity` bytes and `block` bytes per sector.
    pub fn validate(&self, drive_capacity: u64, block: u32) -> Result<Erasure, SimError> {
        if self.data == 0 {
            return Err(SimError::field(
                "erasure.data",
                "0: a stripe needs at least one data chunk",
            ));
        }
        let width = self.data.saturating_add(self.parity);
        if width > MAX_WIDTH {
            return Err(SimError::field(
                "erasure.parity",
                format!(
                    "data + parity = {} + {} = {width} chunks per stripe, more than {MAX_WIDTH}",
                    self.data, self.parity
                ),
            ));
        }
        let drives = self.drives.unwrap_or(width);
        if drives < width {
            return Err(SimError::field(
                "erasure.drives",
                format!(
                    "{drives} drives cannot hold a stripe of data + parity = {} + {} = {width} \
                     chunks on distinct drives",
                    self.data, self.parity
                ),
            ));
        }
        if drives > MAX_DRIVES {
            return Err(SimError::field(
                "erasure.drives",
                format!("{drives} is more than {MAX_DRIVES}"),
            ));
        }
        let text = self.chunk.as_deref().unwrap_or("128k");
        let chunk = workload::parse_size(text).map_err(|m| SimError::field("erasure.chunk", m))?;
        if chunk == 0 || !chunk.is_multiple_of(u64::from(block)) {
            return Err(SimError::field(
                "erasure.chunk",
                format!("{text} is not a non-zero multiple of the drive's {block}-byte blocks"),
            ));
        }
        if chunk > drive_capacity {
            return Err(SimError::field(
                "erasure.chunk",
                format!("{text} is larger than a drive ({drive_capacity} bytes)"),
            ));
        }
        let background = self
            .background
            .as_ref()
            .map(|t| background_job(t, drive_capacity))
            .transpose()?;
        Ok(Erasure {
            data: self.data,
            parity: self.parity,
            drives,
            chunk,
            background,
        })
    }
}

/// The background table as a job named "background", compiled against one drive.
fn background_job(table: &Table, drive_capacity: u64) -> Result<JobSpec, SimError> {
    let mut table = table.clone();
    if table.contains_key("name") {
        return Err(SimError::field(
            "erasure.background.name",
            "the background job is named \"background\"; leave name out",
        ));
    }
    table.insert("name".into(), Value::String("background".into()));
    let spec: JobSpec = Value::Table(table)
        .try_into()
        .map_err(|e: toml::de::Error| SimError::field("erasure.background", e.to_string()))?;
    spec.compile(drive_capacity)
        .map_err(|e| SimError::field(&format!("erasure.background.{}", e.field), e.message))?;
    Ok(spec)
}

impl Erasure {
    /// Chunks per stripe, k + m.
    pub fn width(&self) -> u32 {
        self.data + self.parity
    }

    /// User bytes per stripe: k chunks.
    pub fn stripe_bytes(&self) -> u64 {
        u64::from(self.data) * self.chunk
    }

    /// User bytes the array holds: every drive keeps stripe s at offset s × chunk, so there are
    /// as many stripes as a drive has chunks. (An array wider than the stripe leaves the
    /// other drives' chunk at that offset unused: the layout spends capacity, not time.)
    pub fn user_capacity(&self, drive_capacity: u64) -> u64 {
        drive_capacity / self.chunk * self.stripe_bytes()
    }

    /// The drive and byte offset of chunk `c` of stripe `s`: chunks 0..k are data, k..k+m
    /// parity, on consecutive drives from drive s mod drives, so data and parity rotate over
    /// the drives as in RAID 5's left-symmetric layout.
    pub fn place(&self, stripe: u64, c: u32) -> (usize, u64) {
        let drives = u64::from(self.drives);
        let drive = (stripe % drives + u64::from(c)) % drives;
        (drive as usize, stripe * self.chunk)
    }

    /// A user job must read whole stripes: reads only, every read one stripe, and a region
    /// that starts on a stripe.
    pub fn check_user_job(&self, job: &Job) -> Result<(), SimError> {
        let at = |field: &str| format!("job \"{}\".{field}", job.name);
        if job.replay.is_some() {
            return Err(SimError::field(
                &at("trace"),
                "an erasure experiment's user reads are whole stripes its jobs generate: \
                 replay a trace on one drive",
            ));
        }
        if job.read_probability < 1.0 {
            return Err(SimError::field(
                &at("rw"),
                "an erasure experiment's jobs read only (rw = \"randread\" or \"read\")",
            ));
        }
        let stripe = self.stripe_bytes();
        if let Some((bad, _)) = job.sizes.read.0.iter().find(|(b, _)| *b != stripe) {
            return Err(SimError::field(
                &at("bs"),
                format!(
                    "{bad} bytes is not a stripe: user reads are whole stripes of data × chunk \
                     = {} × {} = {stripe} bytes",
                    self.data, self.chunk
                ),
            ));
        }
        if !job.start.is_multiple_of(stripe) {
            return Err(SimError::field(
                &at("offset"),
                format!(
                    "{} is not a multiple of the stripe ({stripe} bytes)",
                    job.start
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(text: &str) -> ErasureSpec {
        toml::from_str(text).unwrap()
    }

    const DRIVE: u64 = 1 << 40;

    #[test]
    fn layout_rotates_data_and_parity_over_the_drives() {
        let e = spec("data = 4\nparity = 2").validate(DRIVE, 512).unwrap();
        assert_eq!((e.width(), e.drives, e.chunk), (6, 6, 128 << 10));
        assert_eq!(e.stripe_bytes(), 512 << 10);
        assert_eq!(e.user_capacity(DRIVE), DRIVE / (128 << 10) * (512 << 10));
        let drives = |s| (0..6).map(|c| e.place(s, c).0).collect::<Vec<_>>();
        assert_eq!(drives(0), [0, 1, 2, 3, 4, 5]);
        assert_eq!(drives(7), [1, 2, 3, 4, 5, 0]);
        assert_eq!(e.place(7, 3).1, 7 * (128 << 10));
        // Every drive holds one chunk of every stripe, a data chunk in 4 stripes out of 6.
        let data_on_0 = (0..6).filter(|s| (0..4).any(|c| e.place(*s, c).0 == 0));
        assert_eq!(data_on_0.count(), 4);
        // A pool wider than the stripe: distinct drives per stripe.
        let wide = spec("data = 8\nparity = 3\ndrives = 16\nchunk = \"64k\"")
            .validate(DRIVE, 512)
            .unwrap();
        let mut ds: Vec<usize> = (0..11).map(|c| wide.place(13, c).0).collect();
        ds.sort();
        ds.dedup();
        assert_eq!(ds.len(), 11);
    }

    #[test]
    fn bad_values_name_the_field() {
        for (text, start) in [
            ("data = 0\nparity = 2", "erasure.data: 0"),
            (
                "data = 4\nparity = 2\ndrives = 5",
                "erasure.drives: 5 drives cannot hold",
            ),
            (
                "data = 60\nparity = 5",
                "erasure.parity: data + parity = 60 + 5 = 65",
            ),
            (
                "data = 4\nparity = 2\ndrives = 300",
                "erasure.drives: 300 is more than",
            ),
            (
                "data = 4\nparity = 2\nchunk = \"100\"",
                "erasure.chunk: 100 is not",
            ),
            ("data = 4\nparity = 2\nchunk = \"4kB\"", "erasure.chunk"),
            (
                "data = 4\nparity = 2\nbackground = { name = \"x\" }",
                "erasure.background.name",
            ),
            (
                "data = 4\nparity = 2\nbackground = { iodepth = 0 }",
                "erasure.background.iodepth",
            ),
            (
                "data = 4\nparity = 2\nbackground = { depth = 2 }",
                "erasure.background: ",
            ),
        ] {
            let e = spec(text).validate(DRIVE, 512).unwrap_err().to_string();
            assert!(e.starts_with(start), "{text}: {e}");
        }
        let e = spec("data = 2\nparity = 1\nchunk = \"2TiB\"")
            .validate(DRIVE, 512)
            .unwrap_err();
        assert!(e.to_string().contains("larger than a drive"), "{e}");
    }

    #[test]
    fn user_jobs_read_whole_stripes() {
        let e = spec("data = 4\nparity = 2").validate(DRIVE, 512).unwrap();
        let job = |text: &str| {
            let s: JobSpec = toml::from_str(&format!("name = \"u\"\n{text}")).unwrap();
            s.compile(e.user_capacity(DRIVE)).unwrap()
        };
        e.check_user_job(&job("rw = \"randread\"\nbs = \"512k\""))
            .unwrap();
        for (text, start) in [
            ("rw = \"randrw\"\nbs = \"512k\"", "job \"u\".rw"),
            (
                "bs = \"128k\"",
                "job \"u\".bs: 131072 bytes is not a stripe",
            ),
            ("bs = \"512k\"\noffset = \"128k\"", "job \"u\".offset"),
        ] {
            let err = e.check_user_job(&job(text)).unwrap_err().to_string();
            assert!(err.starts_with(start), "{text}: {err}");
        }
    }
}
