//! Device time in the real-time shell, and the thread that drives each logical unit. The
//! device and the connection are pure state machines; this is where the wall clock comes in
//! (docs/architecture.md: one device, two clocks).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use device::{Finished, Ns, Sink, Unit};
use parking_lot::{Condvar, Mutex};

use crate::portal::{Portal, Router, Wake};

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

/// The real-time driver of one logical unit: a thread that calls its [`Unit::advance`] when
/// the core's next deadline comes (a device queue's next event, a paced sanitize's step,
/// background work waiting), and routes what moved on to the connections of its nexuses.
/// Calls that bring a deadline closer wake it through the portal's [`crate::portal::Drivers`].
pub struct UnitDriver {
    signal: Arc<Signal>,
    thread: Option<JoinHandle<()>>,
}

/// Routes what a driver's calls did to the nexuses' connections; its own wake-ups only
/// shorten its next wait.
struct Routed<'a> {
    router: &'a Router,
    signal: &'a Signal,
}

impl Sink for Routed<'_> {
    fn deliver(&mut self, f: Finished) {
        self.router.route(f);
    }

    fn wake(&mut self, _lun: u64) {
        self.signal.woken.store(true, Ordering::Release);
    }
}

impl UnitDriver {
    /// Starts the driver of `unit`; the returned wake-up is for the portal's registry.
    pub fn spawn(unit: Arc<Unit>, router: Arc<Router>) -> std::io::Result<(UnitDriver, Wake)> {
        let signal = Arc::new(Signal::default());
        let s = signal.clone();
        let thread = std::thread::Builder::new()
            .name("stint-lu-driver".into())
            .spawn(move || run(&unit, &router, &s))?;
        let waker = signal.clone();
        let wake: Wake = Arc::new(move || waker.wake());
        Ok((
            UnitDriver {
                signal,
                thread: Some(thread),
            },
            wake,
        ))
    }
}

impl Drop for UnitDriver {
    fn drop(&mut self) {
        self.signal.stop.store(true, Ordering::Release);
        self.signal.wake();
        if let Some(t) = self.thread.take() {
            // A panic in the driver thread has already been reported by the panic hook.
            let _joined = t.join();
        }
    }
}

fn run(unit: &Unit, router: &Router, signal: &Signal) {
    while !signal.stop.load(Ordering::Acquire) {
        signal.woken.store(false, Ordering::Release);
        let mut sink = Routed { router, signal };
        let next = unit.advance(now(), &mut sink);
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

/// The completions of an asynchronous data plane, bound to their logical unit once it is
/// served: each one goes back to the unit's core on the plane's thread (with the wall clock's
/// time), and what follows goes to the nexuses' connections, waking the unit's driver when it
/// must run sooner. Completions before the binding (none come before the first command) are
/// dropped.
#[derive(Clone, Default)]
pub struct Completions(Arc<OnceLock<Binding>>);

struct Binding {
    unit: Weak<Unit>,
    portal: Weak<Portal>,
    node: usize,
}

/// Routes to the portal's connections and wakes the unit's driver through its registry.
struct PortalSink<'a> {
    portal: &'a Portal,
    node: usize,
}

impl Sink for PortalSink<'_> {
    fn deliver(&mut self, f: Finished) {
        self.portal.router.route(f);
    }

    fn wake(&mut self, lun: u64) {
        self.portal.drivers.wake(Some(self.node), lun);
    }
}

impl Completions {
    /// The handler to build the plane with.
    pub fn handler(&self) -> device::Complete {
        let slot = self.0.clone();
        Arc::new(move |id, done, data_in, data_out| {
            let Some(b) = slot.get() else { return };
            let (Some(unit), Some(portal)) = (b.unit.upgrade(), b.portal.upgrade()) else {
                return;
            };
            let mut sink = PortalSink {
                portal: &portal,
                node: b.node,
            };
            unit.completed(now(), id, done, data_in, data_out, &mut sink);
        })
    }

    /// The plane is `unit`'s, served on `portal` under the node at index `node`.
    pub fn bind(&self, unit: &Arc<Unit>, portal: &Arc<Portal>, node: usize) {
        let _first = self.0.set(Binding {
            unit: Arc::downgrade(unit),
            portal: Arc::downgrade(portal),
            node,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A policy must never end a command before its limit (SPC-6 command duration limits;
    /// docs/cdl.md): the driver's timed wait, which sleeps and then spins the last stretch,
    /// returns at its deadline or after it, never before, whatever the distance.
    #[test]
    fn a_timed_wait_never_returns_before_its_deadline() {
        let signal = Signal::default();
        for left in [1_000, SPIN - 1, SPIN, SPIN + 1, 3 * SPIN, 2_000_000] {
            let until = now() + left;
            wait(&signal, Some(until));
            let woke = now();
            assert!(
                woke >= until,
                "woke {} ns early for a {left} ns wait",
                until - woke
            );
        }
    }

    /// A wake-up ends the wait at once, however far its deadline.
    #[test]
    fn a_wake_ends_a_timed_wait() {
        let signal = Signal::default();
        signal.wake();
        let until = now() + 2_000_000_000;
        wait(&signal, Some(until));
        assert!(now() < until);
    }
}
