//! Block traces a job replays instead of generating its I/Os: fio's iolog (versions 2 and 3),
//! `blkparse`'s default text output, and the SNIA IOTTA MSR Cambridge CSV.
//!
//! Only reads and writes are replayed. Everything else a trace may hold (fio's file actions
//! and syncs, trims and discards, blktrace's other events, flushes) is skipped and counted by
//! what it was. Offsets are rounded down and lengths up to whole 512-byte sectors.

use crate::SECTOR;
use serde::Deserialize;
use std::collections::BTreeMap;

/// The formats of `trace_format`.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum TraceFormat {
    /// fio `write_iolog`: "fio version 2 iolog" or "fio version 3 iolog", then one action a line.
    Iolog,
    /// `blkparse -i <trace>` with its default output format.
    Blkparse,
    /// SNIA IOTTA MSR Cambridge: Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime.
    Msr,
}

/// One read or write of a trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceIo {
    /// Since the trace's first I/O (0 throughout for an untimed trace).
    pub time_ns: u64,
    pub write: bool,
    /// Bytes, a multiple of 512.
    pub offset: u64,
    /// Bytes, a non-zero multiple of 512.
    pub len: u64,
    /// Its line in the file (1-based), for errors found later (an I/O too big for the region).
    pub line: usize,
}

/// A parsed trace.
#[derive(Clone, PartialEq, Eq)]
pub struct Trace {
    /// The file, as errors name it.
    pub origin: String,
    pub ios: Vec<TraceIo>,
    /// Whether the trace says when each I/O was issued (a fio iolog v2 without `wait` does not).
    pub timed: bool,
    /// Records skipped, by what they were ("trim", "sync", "blktrace C", …).
    pub skipped: BTreeMap<String, u64>,
}

/// Largest I/O accepted: what a READ(16)/WRITE(16) transfer length can say in 512-byte sectors.
const MAX_LEN: u64 = u32::MAX as u64 * SECTOR;

/// A read or write of `len` bytes at byte `offset` as whole sectors; `None` when empty.
fn sectors(
    origin: &str,
    line: usize,
    time_ns: u64,
    write: bool,
    offset: u64,
    len: u64,
) -> Result<Option<TraceIo>, String> {
    if len == 0 {
        return Ok(None);
    }
    let Some(end) = offset.checked_add(len).filter(|_| len <= MAX_LEN) else {
        return Err(at(
            origin,
            line,
            format!("{len} bytes at {offset} is more than one command can carry"),
        ));
    };
    let start = offset / SECTOR * SECTOR;
    Ok(Some(TraceIo {
        time_ns,
        write,
        offset: start,
        len: end.div_ceil(SECTOR) * SECTOR - start,
        line,
    }))
}

/// `origin:line: message`.
fn at(origin: &str, line: usize, message: impl std::fmt::Display) -> String {
    format!("{origin}:{line}: {message}")
}

fn number(origin: &str, line: usize, what: &str, text: &str) -> Result<u64, String> {
    text.parse().map_err(|_| {
        at(
            origin,
            line,
            format!("{what} {text:?} is not a whole number"),
        )
    })
}

/// Seconds with up to nine decimals ("12.000345678") as ns, exactly.
fn seconds_ns(origin: &str, line: usize, text: &str) -> Result<u64, String> {
    let bad = || at(origin, line, format!("timestamp {text:?} is not seconds"));
    let (whole, frac) = text.split_once('.').unwrap_or((text, ""));
    if whole.is_empty() || frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let s: u64 = whole.parse().map_err(|_| bad())?;
    let ns: u64 = if frac.is_empty() {
        0
    } else {
        format!("{frac:0<9}").parse().map_err(|_| bad())?
    };
    s.checked_mul(1_000_000_000)
        .and_then(|t| t.checked_add(ns))
        .ok_or_else(bad)
}

/// Short: a job's Debug would otherwise print every I/O.
impl std::fmt::Debug for Trace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Trace")
            .field("origin", &self.origin)
            .field("ios", &self.ios.len())
            .field("timed", &self.timed)
            .field("skipped", &self.skipped)
            .finish()
    }
}

impl Trace {
    /// The share of its I/Os that are reads.
    pub fn read_share(&self) -> f64 {
        let reads = self.ios.iter().filter(|io| !io.write).count();
        reads as f64 / self.ios.len().max(1) as f64
    }

    /// Parses `text` in `format`; `origin` names it in errors ("traces/x.iolog:12: …").
    pub fn parse(text: &str, format: TraceFormat, origin: &str) -> Result<Self, String> {
        let mut trace = Self {
            origin: origin.to_owned(),
            ios: Vec::new(),
            timed: true,
            skipped: BTreeMap::new(),
        };
        match format {
            TraceFormat::Iolog => trace.iolog(text, origin)?,
            TraceFormat::Blkparse => trace.blkparse(text, origin)?,
            TraceFormat::Msr => trace.msr(text, origin)?,
        }
        if trace.ios.is_empty() {
            return Err(format!("{origin}: no read or write to replay"));
        }
        // Times from the first I/O; one stamped earlier than the first (blktrace's CPUs are
        // merged slightly out of order) goes at 0.
        let first = trace.ios.first().map_or(0, |io| io.time_ns);
        for io in &mut trace.ios {
            io.time_ns = io.time_ns.saturating_sub(first);
        }
        Ok(trace)
    }

    fn skip(&mut self, what: &str) {
        *self.skipped.entry(what.to_owned()).or_default() += 1;
    }

    /// Adds a read or write of `len` bytes at byte `offset`, whole sectors.
    fn push(
        &mut self,
        origin: &str,
        line: usize,
        time_ns: u64,
        write: bool,
        offset: u64,
        len: u64,
    ) -> Result<(), String> {
        match sectors(origin, line, time_ns, write, offset, len)? {
            Some(io) => self.ios.push(io),
            None => self.skip(if write { "empty write" } else { "empty read" }),
        }
        Ok(())
    }

    /// fio iolog v2 ("filename action [offset length]") or v3 ("timestamp filename action
    /// [offset length]", the timestamp in µs: fio writes it with `utime_since_now` and sleeps
    /// that many µs on replay). A v2 `wait` (its offset field the ms since the start, as fio's
    /// replay reads it) sets the time of the I/Os that follow.
    fn iolog(&mut self, text: &str, origin: &str) -> Result<(), String> {
        let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l));
        let version = match lines.next().map(|(_, l)| l.trim_end()) {
            Some("fio version 2 iolog") => 2,
            Some("fio version 3 iolog") => 3,
            other => {
                return Err(at(
                    origin,
                    1,
                    format!(
                        "{:?} is not \"fio version 2 iolog\" or \"fio version 3 iolog\"",
                        other.unwrap_or("")
                    ),
                ))
            }
        };
        self.timed = version == 3;
        let mut now_ns = 0u64;
        for (n, l) in lines {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.is_empty() {
                continue;
            }
            let (time, rest) = if version == 3 {
                let us = number(origin, n, "timestamp", f[0])?;
                let ns = us
                    .checked_mul(1000)
                    .ok_or_else(|| at(origin, n, "timestamp out of range"))?;
                (ns, &f[1..])
            } else {
                (now_ns, &f[..])
            };
            match rest {
                [_, action @ ("add" | "open" | "close")] => self.skip(action),
                [_, "wait", ms, _] if version == 2 => {
                    let ms = number(origin, n, "wait", ms)?;
                    now_ns = ms
                        .checked_mul(1_000_000)
                        .ok_or_else(|| at(origin, n, "wait out of range"))?;
                    self.timed = true;
                }
                [_, action @ ("read" | "write"), offset, len] => {
                    let offset = number(origin, n, "offset", offset)?;
                    let len = number(origin, n, "length", len)?;
                    self.push(origin, n, time, *action == "write", offset, len)?;
                }
                [_, action @ ("sync" | "datasync" | "trim" | "wait"), _, _] => self.skip(action),
                [_, action, ..] if rest.len() == 2 || rest.len() == 4 => {
                    return Err(at(
                        origin,
                        n,
                        format!(
                            "unknown action {action:?} (add, open, close, read, write, sync, \
                             datasync, trim{})",
                            if version == 2 { ", wait" } else { "" }
                        ),
                    ))
                }
                _ => {
                    return Err(at(
                        origin,
                        n,
                        format!(
                            "expected \"{}filename action [offset length]\", got {l:?}",
                            if version == 3 { "timestamp " } else { "" }
                        ),
                    ))
                }
            }
        }
        Ok(())
    }

    /// `blkparse`'s default output: "maj,min cpu seq seconds pid action rwbs sector + count
    /// [process]". The Q (queued) events are replayed: what the submitters asked for, before
    /// the host's scheduler merged or split anything. A trace without Q events (`blktrace -a
    /// issue`) is replayed from its D (issued) events. The summary blkparse prints at the end
    /// ("CPU0 (8,0):", "Total (8,0):") ends the events.
    fn blkparse(&mut self, text: &str, origin: &str) -> Result<(), String> {
        // D events (and those without data): replayed only when the trace has no Q event.
        let mut issued = Vec::new();
        let mut issued_skips = 0u64;
        for (i, l) in text.lines().enumerate() {
            let n = i + 1;
            let f: Vec<&str> = l.split_whitespace().collect();
            let Some(dev) = f.first() else { continue };
            if dev.starts_with("CPU") || dev.starts_with("Total") {
                break;
            }
            let is_dev = dev
                .split_once(',')
                .is_some_and(|(a, b)| a.parse::<u32>().is_ok() && b.parse::<u32>().is_ok());
            if !is_dev || f.len() < 6 {
                return Err(at(
                    origin,
                    n,
                    format!("expected \"maj,min cpu seq seconds pid action …\", got {l:?}"),
                ));
            }
            let time = seconds_ns(origin, n, f[3])?;
            let action = f[5];
            if action != "Q" && action != "D" {
                self.skip(&format!("blktrace {action}"));
                continue;
            }
            let rwbs = f.get(6).copied().unwrap_or("");
            // A flush or another request without data has no "sector + count".
            let extent = match (f.get(7), f.get(8), f.get(9)) {
                (Some(s), Some(&"+"), Some(c)) => Some((
                    number(origin, n, "sector", s)?,
                    number(origin, n, "sector count", c)?,
                )),
                (Some(s), _, _) if !s.starts_with('[') => {
                    return Err(at(
                        origin,
                        n,
                        format!("expected \"sector + count\" after {rwbs:?}, got {l:?}"),
                    ))
                }
                _ => None,
            };
            let what = if rwbs.contains('D') {
                Some("discard")
            } else if rwbs.contains('R') || rwbs.contains('W') {
                None
            } else {
                Some("no data")
            };
            let queued = action == "Q";
            match (what, extent) {
                (None, Some((sector, count))) => {
                    let (offset, len) = sector
                        .checked_mul(SECTOR)
                        .zip(count.checked_mul(SECTOR))
                        .ok_or_else(|| at(origin, n, "sector out of range"))?;
                    let write = rwbs.contains('W');
                    match sectors(origin, n, time, write, offset, len)? {
                        Some(io) if queued => self.ios.push(io),
                        Some(io) => issued.push(io),
                        None if queued => self.skip("blktrace Q no data"),
                        None => issued_skips += 1,
                    }
                }
                (what, _) if queued => {
                    self.skip(&format!("blktrace Q {}", what.unwrap_or("no data")));
                }
                _ => issued_skips += 1,
            }
        }
        let (used, unused) = if self.ios.is_empty() {
            self.ios = issued;
            ("D no data", issued_skips)
        } else {
            ("D", issued.len() as u64 + issued_skips)
        };
        if unused > 0 {
            *self.skipped.entry(format!("blktrace {used}")).or_default() += unused;
        }
        Ok(())
    }

    /// MSR Cambridge CSV: "Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime", the
    /// timestamp a Windows filetime (100 ns ticks), Type "Read" or "Write". A header line
    /// naming the columns is allowed.
    fn msr(&mut self, text: &str, origin: &str) -> Result<(), String> {
        for (i, l) in text.lines().enumerate() {
            let n = i + 1;
            if l.trim().is_empty() || (n == 1 && l.trim_start().starts_with("Timestamp")) {
                continue;
            }
            let f: Vec<&str> = l.split(',').map(str::trim).collect();
            let [ticks, _host, _disk, kind, offset, size, _response] = f.as_slice() else {
                return Err(at(
                    origin,
                    n,
                    format!(
                        "expected 7 fields (Timestamp,Hostname,DiskNumber,Type,Offset,Size,\
                         ResponseTime), got {}",
                        f.len()
                    ),
                ));
            };
            let ticks = number(origin, n, "timestamp", ticks)?;
            let write = match kind.to_ascii_lowercase().as_str() {
                "read" => false,
                "write" => true,
                _ => {
                    return Err(at(
                        origin,
                        n,
                        format!("type {kind:?} is neither Read nor Write"),
                    ))
                }
            };
            let offset = number(origin, n, "offset", offset)?;
            let size = number(origin, n, "size", size)?;
            let ns = ticks
                .checked_mul(100)
                .ok_or_else(|| at(origin, n, "timestamp out of range"))?;
            self.push(origin, n, ns, write, offset, size)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn io(time_ns: u64, write: bool, offset: u64, len: u64, line: usize) -> TraceIo {
        TraceIo {
            time_ns,
            write,
            offset,
            len,
            line,
        }
    }

    #[test]
    fn iolog_v2_skips_file_actions_and_times_by_wait() {
        let text = "fio version 2 iolog\n/dev/sdb add\n/dev/sdb open\n\
                    /dev/sdb write 4096 4096\n/dev/sdb wait 5 0\n/dev/sdb read 1000 100\n\
                    /dev/sdb trim 0 4096\n/dev/sdb sync 0 0\n/dev/sdb close\n";
        let t = Trace::parse(text, TraceFormat::Iolog, "a.log").unwrap();
        // 1000 + 100 bytes: sectors 1 and 2.
        assert_eq!(
            t.ios,
            vec![
                io(0, true, 4096, 4096, 4),
                io(5_000_000, false, 512, 1024, 6)
            ]
        );
        assert!(t.timed);
        assert_eq!(t.skipped.get("trim"), Some(&1));
        assert_eq!(t.skipped.get("open"), Some(&1));
        let untimed = Trace::parse(
            "fio version 2 iolog\nf read 0 512\n",
            TraceFormat::Iolog,
            "b",
        )
        .unwrap();
        assert!(!untimed.timed);
    }

    #[test]
    fn iolog_v3_times_are_microseconds_from_the_first_io() {
        let text = "fio version 3 iolog\n0 /dev/sdb add\n10 /dev/sdb open\n\
                    250 /dev/sdb read 131072 131072\n1250 /dev/sdb write 8192 4096\n\
                    1300 /dev/sdb close\n";
        let t = Trace::parse(text, TraceFormat::Iolog, "a.log").unwrap();
        assert_eq!(
            t.ios,
            vec![
                io(0, false, 131_072, 131_072, 4),
                io(1_000_000, true, 8192, 4096, 5)
            ]
        );
        assert!(t.timed);
    }

    #[test]
    fn iolog_bad_lines_name_their_number() {
        let cases = [
            ("fio version 9 iolog\n", "x:1: "),
            (
                "fio version 3 iolog\n0 f read 0 512\n5 f read zero 512\n",
                "x:3: offset",
            ),
            (
                "fio version 3 iolog\n0 f read 0 512\n5 f frob 0 512\n",
                "x:3: unknown action",
            ),
            ("fio version 2 iolog\nf read 0\n", "x:2: expected"),
            ("fio version 3 iolog\nf read 0 512\n", "x:2: timestamp"),
        ];
        for (text, want) in cases {
            let e = Trace::parse(text, TraceFormat::Iolog, "x").unwrap_err();
            assert!(e.starts_with(want), "{text:?}: {e}");
        }
    }

    const BLKPARSE: &str = "\
  8,16   1        1     0.000000000  4117  Q   R 2048 + 256 [fio]
  8,16   1        2     0.000001200  4117  G   R 2048 + 256 [fio]
  8,16   1        3     0.000004000  4117  D   R 2048 + 256 [fio]
  8,16   0        1     0.002500000  4118  Q  WS 999999 + 8 [fio]
  8,16   0        2     0.002600000  4118  Q FWS [kworker/0:1H]
  8,16   0        3     0.003000000  4118  Q  DS 0 + 2048 [fstrim]
  8,16   1        4     0.009100000     0  C   R 2048 + 256 [0]
CPU0 (8,16):
 Reads Queued:           1,      128KiB\t Writes Queued:           1,        4KiB
";

    #[test]
    fn blkparse_replays_queued_events() {
        let t = Trace::parse(BLKPARSE, TraceFormat::Blkparse, "b.txt").unwrap();
        assert_eq!(
            t.ios,
            vec![
                io(0, false, 2048 * 512, 128 << 10, 1),
                io(2_500_000, true, 999_999 * 512, 4096, 4)
            ]
        );
        assert_eq!(t.skipped.get("blktrace Q no data"), Some(&1));
        assert_eq!(t.skipped.get("blktrace Q discard"), Some(&1));
        assert_eq!(t.skipped.get("blktrace D"), Some(&1));
        // Only D events: those are replayed.
        let issued: String = BLKPARSE
            .lines()
            .filter(|l| l.contains(" D "))
            .map(|l| format!("{l}\n"))
            .collect();
        let t = Trace::parse(&issued, TraceFormat::Blkparse, "b.txt").unwrap();
        assert_eq!(t.ios, vec![io(0, false, 2048 * 512, 128 << 10, 1)]);
    }

    #[test]
    fn blkparse_bad_lines_name_their_number() {
        let cases = [
            (
                "  8,0 0 1 0.000000000 1 Q R 8 + 8 [a]\n8,0 0 2 0.5s 1 Q R 8 + 8 [a]\n",
                "x:2: timestamp",
            ),
            (
                "  8,0 0 1 0.1 1 Q R 8 + 8 [a]\nhello world\n",
                "x:2: expected",
            ),
            ("  8,0 0 1 0.1 1 Q W 8 + eight [a]\n", "x:1: sector count"),
            (
                "  8,0 0 1 0.1 1 Q W 8 8\n",
                "x:1: expected \"sector + count\"",
            ),
        ];
        for (text, want) in cases {
            let e = Trace::parse(text, TraceFormat::Blkparse, "x").unwrap_err();
            assert!(e.starts_with(want), "{text:?}: {e}");
        }
    }

    #[test]
    fn msr_times_are_filetime_ticks_from_the_first_record() {
        let text = "Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime\n\
                    128166372003061629,hm,1,Read,383496192,32768,1132\n\
                    128166372003161629,hm,1,Write,3071216,4096,4532\n";
        let t = Trace::parse(text, TraceFormat::Msr, "m.csv").unwrap();
        assert_eq!(
            t.ios,
            vec![
                io(0, false, 383_496_192, 32768, 2),
                io(10_000_000, true, 3_071_216 / 512 * 512, 4608, 3)
            ]
        );
    }

    #[test]
    fn msr_bad_lines_name_their_number() {
        let cases = [
            ("1,h,0,Read,0,512,1\n2,h,0,Erase,0,512,1\n", "x:2: type"),
            ("1,h,0,Read,0,512\n", "x:1: expected 7 fields"),
            ("1,h,0,Read,-4,512,1\n", "x:1: offset"),
            ("", "x: no read or write"),
        ];
        for (text, want) in cases {
            let e = Trace::parse(text, TraceFormat::Msr, "x").unwrap_err();
            assert!(e.starts_with(want), "{text:?}: {e}");
        }
    }
}
