//! Arbitration between the per-class submission queues: which class the device fetches its next
//! command from when a device-queue slot is free (NVMe weighted round robin arbitration).

use crate::class::{Class, CLASSES};

/// How submission queues are arbitrated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Arbitration {
    /// Lowest class index first (urgent > high > medium > low); lower classes can starve.
    #[default]
    Strict,
    /// One command per non-empty class in turn.
    RoundRobin,
    /// NVMe weighted round robin with urgent priority class (NVMe 2.1 §3.4.4.2): Urgent is
    /// strictly first; High/Medium/Low share by weight, each turn fetching up to
    /// min(burst, remaining credits) commands.
    WeightedRoundRobin {
        /// Credits per round for High, Medium, Low (1..=256; NVMe HPW/MPW/LPW + 1).
        weights: [u32; 3],
        /// Arbitration burst: most commands per turn (1..=128; NVMe 2^AB; AB=7 means no limit,
        /// use `u32::MAX`).
        burst: u32,
    },
}

/// Arbiter state (pure; deterministic).
#[derive(Clone, Debug)]
pub(crate) struct Arbiter {
    kind: Arbitration,
    /// Round robin: next class to try. WRR: next weighted level (0 = High) to try.
    next: usize,
    /// WRR: credits left in this round for High, Medium, Low.
    credits: [u32; 3],
    /// WRR: the weighted level whose turn is running and how many it fetched in the turn.
    turn: Option<(usize, u32)>,
}

impl Arbiter {
    pub(crate) fn new(kind: Arbitration) -> Self {
        let credits = match kind {
            Arbitration::WeightedRoundRobin { weights, .. } => weights,
            _ => [0; 3],
        };
        Self {
            kind,
            next: 0,
            credits,
            turn: None,
        }
    }

    /// Picks the class to fetch one command from, given how many commands wait in each class.
    pub(crate) fn next(&mut self, waiting: &[usize; CLASSES]) -> Option<usize> {
        match self.kind {
            Arbitration::Strict => waiting.iter().position(|n| *n > 0),
            Arbitration::RoundRobin => {
                let class = (0..CLASSES)
                    .map(|i| (self.next + i) % CLASSES)
                    .find(|c| waiting[*c] > 0)?;
                self.next = (class + 1) % CLASSES;
                Some(class)
            }
            Arbitration::WeightedRoundRobin { weights, burst } => {
                if waiting[Class::Urgent.index()] > 0 {
                    return Some(Class::Urgent.index());
                }
                self.next_weighted(&waiting[1..], weights, burst)
                    .map(|level| level + 1)
            }
        }
    }

    fn next_weighted(&mut self, waiting: &[usize], weights: [u32; 3], burst: u32) -> Option<usize> {
        let has = |level: usize| waiting.get(level).is_some_and(|n| *n > 0);
        if let Some((level, taken)) = self.turn {
            if taken < burst && self.credits[level] > 0 && has(level) {
                self.credits[level] -= 1;
                self.turn = Some((level, taken + 1));
                return Some(level);
            }
            self.end_turn();
        }
        if !(0..3).any(has) {
            return None;
        }
        // A new round starts when no waiting level has credits left (NVMe: credits are
        // replenished once every queue has used its own or is empty).
        if !(0..3).any(|l| has(l) && self.credits[l] > 0) {
            self.credits = weights;
        }
        let level = (0..3)
            .map(|i| (self.next + i) % 3)
            .find(|l| has(*l) && self.credits[*l] > 0)?;
        self.credits[level] -= 1;
        self.turn = Some((level, 1));
        Some(level)
    }

    /// Ends the running WRR turn (the device queue is full or the level ran dry); the next
    /// fetch moves on to the next level.
    pub(crate) fn end_turn(&mut self) {
        if let Some((level, _)) = self.turn.take() {
            self.next = (level + 1) % 3;
        }
    }
}
