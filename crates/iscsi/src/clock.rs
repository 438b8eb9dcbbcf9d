//! Device time in the real-time shell, and the thread that drives each logical unit with a
//! device queue. The device and the connection are pure state machines; this is where the
//! wall clock comes in (README, Architecture: one device, two clocks).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use device::{LogicalUnit, Ns};
use parking_lot::{Condvar, Mutex};

use crate::portal::Router;

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// Nanoseconds on the monotonic clock since the process first asked.
pub fn now() -> Ns {
    u64::try_from(epoch().elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// The tokio instant of device time `at`.
pub fn instant(at: Ns) -> tokio::time::Instant {
    tokio::time::Instant::from_std(epoch() + Duration::from_nanos(at))
}

/// Below this, a wait spins instead of sleeping: a sleeping thread wakes up to the kernel's
/// timer slack (50 µs by default) late, and flash service times are tens of microseconds.
const SPIN: Ns = 80_000;

#[derive(Default)]
struct Signal {
    woken: AtomicBool,
    stop: AtomicBool,
    lock: Mutex<()>,
    cv: Condvar,
}

impl Signal {
    fn wake(&self) {
        self.woken.store(true, Ordering::Release);
        let _held = self.lock.lock();
        self.cv.notify_one();
    }
}

/// The real-time driver of one logical unit: a thread that advances its device queue when
/// something is due and routes what finished to the connections.
pub struct UnitClock {
    signal: Arc<Signal>,
    thread: Option<JoinHandle<()>>,
}

impl UnitClock {
    pub fn spawn(lu: Arc<LogicalUnit>, router: Arc<Router>) -> std::io::Result<UnitClock> {
        let signal = Arc::new(Signal::default());
        let waker = signal.clone();
        lu.set_waker(Box::new(move || waker.wake()));
        let s = signal.clone();
        let thread = std::thread::Builder::new()
            .name("stint-lu-clock".into())
            .spawn(move || run(&lu, &router, &s))?;
        Ok(UnitClock {
            signal,
            thread: Some(thread),
        })
    }
}

impl Drop for UnitClock {
    fn drop(&mut self) {
        self.signal.stop.store(true, Ordering::Release);
        self.signal.wake();
        if let Some(t) = self.thread.take() {
            // A panic in the clock thread has already been reported by the panic hook.
            let _joined = t.join();
        }
    }
}

fn run(lu: &LogicalUnit, router: &Router, signal: &Signal) {
    let mut out = Vec::new();
    while !signal.stop.load(Ordering::Acquire) {
        signal.woken.store(false, Ordering::Release);
        let next = lu.drive_clock(now(), &mut out);
        for f in out.drain(..) {
            router.route(f);
        }
        wait(signal, next);
    }
}

/// Returns at `until`, or when woken.
fn wait(signal: &Signal, until: Option<Ns>) {
    loop {
        if signal.woken.load(Ordering::Acquire) {
            return;
        }
        let left = match until {
            Some(at) => match at.checked_sub(now()) {
                Some(left) if left > 0 => left,
                _ => return,
            },
            None => Ns::MAX,
        };
        if left <= SPIN {
            std::hint::spin_loop();
            continue;
        }
        let mut held = signal.lock.lock();
        if signal.woken.load(Ordering::Acquire) {
            return;
        }
        if until.is_none() {
            signal.cv.wait(&mut held);
        } else {
            let _timed_out = signal
                .cv
                .wait_for(&mut held, Duration::from_nanos(left - SPIN));
        }
    }
}
