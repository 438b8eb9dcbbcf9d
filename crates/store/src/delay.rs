//! How an asynchronous plane hands completions to its handler: at once, or, with the latency
//! injector on, held back until a fixed delay after each operation's submission, so that a
//! test or a benchmark gets "a store slower than the CPU" deterministically. One timer thread
//! per plane holds the completions in order of their due time; nothing sleeps per operation.

use crate::plane::{Complete, Done};
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

pub(crate) struct Completer {
    complete: Complete,
    delay: Option<(Duration, Sender<Due>)>,
}

/// A completion waiting for its time.
struct Due {
    at: Instant,
    /// Arrival order, which breaks ties of `at`.
    seq: u64,
    id: u64,
    done: Done,
    data_in: Vec<u8>,
    data_out: Vec<u8>,
}

impl Completer {
    /// Hand completions to `complete`, each `delay` after its submission when given.
    pub(crate) fn new(complete: Complete, delay: Option<Duration>) -> io::Result<Self> {
        let delay = match delay {
            Some(delay) if !delay.is_zero() => {
                let (tx, rx) = crossbeam_channel::unbounded();
                let handler = complete.clone();
                std::thread::Builder::new()
                    .name("stint-delay".into())
                    .spawn(move || hold(rx, handler))?;
                Some((delay, tx))
            }
            _ => None,
        };
        Ok(Completer { complete, delay })
    }

    /// The submission time of an operation starting now, when completions wait for a delay.
    pub(crate) fn stamp(&self) -> Option<Instant> {
        self.delay.as_ref().map(|_| Instant::now())
    }

    /// The operation `id`, submitted at `submitted`, ended with `done`.
    pub(crate) fn complete(
        &self,
        id: u64,
        done: Done,
        data_in: Vec<u8>,
        data_out: Vec<u8>,
        submitted: Option<Instant>,
    ) {
        if let (Some((delay, timer)), Some(submitted)) = (&self.delay, submitted) {
            let due = Due {
                at: submitted + *delay,
                seq: 0,
                id,
                done,
                data_in,
                data_out,
            };
            match timer.send(due) {
                Ok(()) => return,
                // The timer thread could not be reached: answer now.
                Err(e) => {
                    let due = e.into_inner();
                    return (self.complete)(due.id, due.done, due.data_in, due.data_out);
                }
            }
        }
        (self.complete)(id, done, data_in, data_out)
    }
}

/// Earliest due first in a `BinaryHeap` (a max-heap), arrival order among equals.
impl Ord for Due {
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

impl PartialOrd for Due {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Due {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl Eq for Due {}

/// The timer thread: deliver each completion when it is due, in due order, until every
/// sender is gone and nothing is left.
fn hold(rx: Receiver<Due>, complete: Complete) {
    let mut waiting = BinaryHeap::new();
    let mut seq = 0;
    let mut open = true;
    loop {
        let next = waiting.peek().map(|due: &Due| due.at);
        let arrived = match (next, open) {
            (Some(at), true) => rx.recv_deadline(at),
            (None, true) => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
            (Some(at), false) => {
                std::thread::sleep(at.saturating_duration_since(Instant::now()));
                Err(RecvTimeoutError::Timeout)
            }
            (None, false) => return,
        };
        match arrived {
            Ok(mut due) => {
                due.seq = seq;
                seq += 1;
                waiting.push(due);
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => open = false,
        }
        let now = Instant::now();
        while waiting.peek().is_some_and(|due| due.at <= now) {
            if let Some(due) = waiting.pop() {
                let deliver = || complete(due.id, due.done, due.data_in, due.data_out);
                // A handler that panics loses its own answer, not those held here.
                if catch_unwind(AssertUnwindSafe(deliver)).is_err() {
                    tracing::error!("a delayed completion panicked");
                }
            }
        }
    }
}
