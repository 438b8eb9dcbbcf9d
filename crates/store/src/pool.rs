//! The thread pool of an asynchronous plane: a fixed number of threads taking jobs from one
//! first-in, first-out channel. Its threads never wait for a range of the range lock (an
//! operation is sent here once it holds its range), so a job in the channel never waits for
//! one behind it.

use crossbeam_channel::Sender;
use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};

type Job = Box<dyn FnOnce() + Send>;

pub(crate) struct Pool {
    jobs: Sender<Job>,
}

impl Pool {
    /// `threads` threads (at least one), named `name`; they end when the pool is dropped and
    /// the jobs sent before are done.
    pub(crate) fn new(threads: usize, name: &str) -> io::Result<Self> {
        let (jobs, rx) = crossbeam_channel::unbounded::<Job>();
        for _ in 0..threads.max(1) {
            let rx = rx.clone();
            std::thread::Builder::new()
                .name(name.into())
                .spawn(move || {
                    for job in rx {
                        // A job that panics (a completion handler's bug) loses its own
                        // operation, not the thread.
                        if catch_unwind(AssertUnwindSafe(job)).is_err() {
                            tracing::error!("a data-plane job panicked");
                        }
                    }
                })?;
        }
        Ok(Pool { jobs })
    }

    /// Run `job` on a pool thread.
    pub(crate) fn spawn(&self, job: impl FnOnce() + Send + 'static) {
        // The threads live as long as the pool: the channel cannot be closed.
        if let Err(e) = self.jobs.send(Box::new(job)) {
            (e.into_inner())();
        }
    }
}
