//! What the test knows of every block, and what a block read back after a crash may hold.
//!
//! A write is durable-acknowledged when it got GOOD with the write cache off, or was a FUA
//! write that got GOOD (SBC-4 §4.15), or a SYNCHRONIZE CACHE sent after its GOOD arrived got
//! GOOD itself (SBC-4 §5.32: the cache is flushed of every write completed before). After the
//! crash a block must hold its last durable-acknowledged generation or a later one written to
//! it (acknowledged or still in flight), whole: never an older one, never zeroes, never a mix.

use crate::stamp::{self, Found};
use std::collections::VecDeque;

/// Generations of one block; 0 is the zeroes of a new file.
#[derive(Clone, Copy, Default)]
struct Block {
    durable: u64,
    acked: u64,
    issued: u64,
    /// Made durable since the last crash (not just carried over from before it).
    fresh: bool,
}

/// An acknowledged write no flush has covered yet.
struct Unflushed {
    acked_at: u64,
    lba: u64,
    count: u64,
    generation: u64,
}

pub struct Model {
    blocks: Vec<Block>,
    next_generation: u64,
    /// Orders acknowledgements and SYNCHRONIZE CACHE sends across sessions.
    clock: u64,
    /// In order of acknowledgement.
    unflushed: VecDeque<Unflushed>,
    pub acked_writes: u64,
}

/// What checks after the crashes found.
#[derive(Default)]
pub struct Tally {
    /// Blocks that held a durable-acknowledged write, each time one was read back.
    pub durable_checked: u64,
    /// Of those, blocks made durable by a write acknowledged since the crash before.
    pub durable_fresh: u64,
    /// Of those, blocks found older, zeroed, torn or misplaced.
    pub lost: u64,
    /// Blocks not whole (bad checksum, another LBA's stamp, garbage, a generation never
    /// written there), durable or not.
    pub torn: u64,
    /// Blocks back at a generation older than their last acknowledged write (allowed when
    /// that write was not durable: what a power loss takes).
    pub rolled_back: u64,
    /// Blocks holding a write that was still unacknowledged at the crash: the kill came
    /// in the middle of I/O.
    pub in_flight_landed: u64,
    /// The first few problems, for the report.
    pub problems: Vec<String>,
}

impl Tally {
    /// What every run of an unweakened server must show: no acknowledged-durable block lost
    /// or torn, and some block made durable since a crash checked (else it checked nothing).
    pub fn durability_failures(&self) -> Vec<String> {
        let mut failures = Vec::new();
        if self.lost > 0 || self.torn > 0 {
            failures.push(format!(
                "{} durable blocks lost, {} torn: {:#?}",
                self.lost, self.torn, self.problems
            ));
        }
        if self.durable_fresh == 0 {
            failures.push("no block made durable since a crash was checked".into());
        }
        failures
    }

    fn problem(&mut self, lba: u64, what: String) {
        if self.problems.len() < 10 {
            self.problems.push(format!("LBA {lba}: {what}"));
        }
    }
}

impl Model {
    pub fn new(blocks: u64) -> Model {
        Model {
            blocks: vec![Block::default(); blocks as usize],
            next_generation: 1,
            clock: 0,
            unflushed: VecDeque::new(),
            acked_writes: 0,
        }
    }

    fn range(&mut self, lba: u64, count: u64) -> &mut [Block] {
        &mut self.blocks[lba as usize..(lba + count) as usize]
    }

    /// A write of `count` blocks at `lba` is about to be sent: its generation.
    pub fn issue(&mut self, lba: u64, count: u64) -> u64 {
        let generation = self.next_generation;
        self.next_generation += 1;
        self.range(lba, count)
            .iter_mut()
            .for_each(|b| b.issued = generation);
        generation
    }

    /// The write got GOOD; `durable`: the GOOD itself promised stable storage.
    pub fn acknowledged(&mut self, lba: u64, count: u64, generation: u64, durable: bool) {
        self.acked_writes += 1;
        self.clock += 1;
        for b in self.range(lba, count) {
            b.acked = b.acked.max(generation);
            if durable {
                b.durable = b.durable.max(generation);
                b.fresh = true;
            }
        }
        if !durable {
            let acked_at = self.clock;
            self.unflushed.push_back(Unflushed {
                acked_at,
                lba,
                count,
                generation,
            });
        }
    }

    /// A SYNCHRONIZE CACHE is about to be sent: its place among acknowledgements.
    pub fn sync_sent(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// The SYNCHRONIZE CACHE sent at `sent` got GOOD: every write acknowledged before is
    /// durable.
    pub fn sync_acknowledged(&mut self, sent: u64) {
        while self.unflushed.front().is_some_and(|u| u.acked_at < sent) {
            let u = self.unflushed.pop_front().expect("just seen");
            for b in self.range(u.lba, u.count) {
                b.durable = b.durable.max(u.generation);
                b.fresh = true;
            }
        }
    }

    /// Checks blocks read back from `lba` after a crash, then takes what they hold as the new
    /// starting point (the restarted server's image starts stable).
    pub fn check(&mut self, lba: u64, data: &[u8], block: usize, tally: &mut Tally) {
        for (i, bytes) in data.chunks(block).enumerate() {
            let at = lba + i as u64;
            let b = self.blocks[at as usize];
            if b.durable > 0 {
                tally.durable_checked += 1;
                tally.durable_fresh += u64::from(b.fresh);
            }
            let found = match stamp::read(bytes) {
                Found::Unstamped if bytes.iter().all(|&x| x == 0) => Ok(0),
                Found::Unstamped => Err("neither zeroes nor a stamp".to_string()),
                Found::Whole { lba, generation } if lba != at => Err(format!(
                    "holds the block of LBA {lba} (generation {generation})"
                )),
                Found::Whole { generation, .. } if generation > b.issued => Err(format!(
                    "generation {generation}, never written here (last issued {})",
                    b.issued
                )),
                Found::Whole { generation, .. } => Ok(generation),
                Found::Torn { generation, .. } => {
                    Err(format!("generation {generation} torn (checksum mismatch)"))
                }
            };
            let now = match found {
                Err(what) => {
                    tally.torn += 1;
                    if b.durable > 0 {
                        tally.lost += 1;
                    }
                    tally.problem(at, format!("{what}; durable generation {}", b.durable));
                    0
                }
                Ok(g) if g < b.durable => {
                    tally.lost += 1;
                    tally.rolled_back += 1;
                    tally.problem(
                        at,
                        format!(
                            "generation {g}, but generation {} was acknowledged durable",
                            b.durable
                        ),
                    );
                    g
                }
                Ok(g) => {
                    tally.rolled_back += u64::from(g < b.acked);
                    tally.in_flight_landed += u64::from(g > b.acked);
                    g
                }
            };
            self.blocks[at as usize] = Block {
                durable: now,
                acked: now,
                issued: now,
                fresh: false,
            };
        }
    }

    /// The crash ended every flush in flight: nothing acknowledged before it is pending.
    pub fn crashed(&mut self) {
        self.unflushed.clear();
    }
}

/// The checker's rules on hand-made cases (it must be able to fail).
pub fn self_check() {
    const BS: usize = 64;
    let block = |lba: u64, generation: u64| {
        let mut b = vec![0; BS];
        stamp::stamp(&mut b, lba, generation);
        b
    };
    let mut m = Model::new(4);
    let g1 = m.issue(0, 2);
    m.acknowledged(0, 2, g1, false);
    let sync = m.sync_sent();
    let g2 = m.issue(0, 1);
    m.acknowledged(0, 1, g2, false);
    m.sync_acknowledged(sync);
    let g3 = m.issue(2, 1);
    m.acknowledged(2, 1, g3, true);
    m.issue(3, 1);
    // Block 0: g1 durable, g2 only acknowledged; 1: g1 durable; 2: g3 durable (FUA);
    // 3: a write in flight. Rolling block 0 back to g1 and block 3 to zeroes is allowed.
    let good = [block(0, g1), block(1, g1), block(2, g3), vec![0; BS]].concat();
    let mut t = Tally::default();
    m.crashed();
    m.check(0, &good, BS, &mut t);
    assert_eq!(
        (t.durable_checked, t.lost, t.torn, t.rolled_back),
        (3, 0, 0, 1)
    );
    // Now every block is durable at what it held. Zeroes, an older generation, a torn block
    // and a misplaced one are each lost; a later in-flight generation is fine.
    let g5 = m.issue(3, 1);
    let mut torn = block(1, g1);
    torn[BS - 1] ^= 1;
    let bad = [vec![0; BS], torn, block(1, g1), block(3, g5)].concat();
    let mut t = Tally::default();
    m.check(0, &bad, BS, &mut t);
    assert_eq!(
        (t.durable_checked, t.lost, t.torn),
        (3, 3, 2),
        "{:?}",
        t.problems
    );
    assert!(t.problems[0].starts_with("LBA 0: generation 0, but generation"));
}
