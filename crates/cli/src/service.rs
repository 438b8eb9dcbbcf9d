//! `stint serve` under systemd (`Type=notify`, examples/stint.service): READY=1 once the portal
//! listens and every store is open, WATCHDOG=1 from the server's runtime while it runs (a
//! runtime that stops polling gets the service restarted), STOPPING=1 at shutdown, and log
//! lines without the timestamp journald adds itself. Outside systemd ($NOTIFY_SOCKET unset)
//! every call does nothing.

use sd_notify::NotifyState;
use std::time::Duration;

/// The server is up: `status` is what `systemctl status` shows.
pub fn ready(status: &str) {
    notify(&[NotifyState::Ready, NotifyState::Status(status)]);
}

/// The server is stopping (draining sessions, flushing stores).
pub fn stopping() {
    notify(&[NotifyState::Stopping, NotifyState::Status("stopping")]);
}

/// With the service's watchdog on (WatchdogSec=, which sets $WATCHDOG_USEC for this
/// process), a task of the runtime that pets it at half the period, as sd_watchdog_enabled(3)
/// advises.
pub fn watchdog() -> Option<tokio::task::JoinHandle<()>> {
    let mut usec = 0;
    if !sd_notify::watchdog_enabled(false, &mut usec) || usec == 0 {
        return None;
    }
    let period = Duration::from_micros(usec / 2);
    tracing::info!(period_ms = period.as_millis() as u64, "systemd watchdog");
    Some(tokio::spawn(async move {
        let mut tick = tokio::time::interval(period);
        loop {
            tick.tick().await;
            notify(&[NotifyState::Watchdog]);
        }
    }))
}

fn notify(states: &[NotifyState]) {
    if let Err(e) = sd_notify::notify(false, states) {
        tracing::warn!(error = %e, "notifying the service manager ($NOTIFY_SOCKET)");
    }
}

/// Whether stderr is connected to the journal: $JOURNAL_STREAM names its device and inode
/// (systemd.exec(5)), which must be stderr's own, not one inherited by a child.
pub fn journal_stderr() -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(stream) = std::env::var("JOURNAL_STREAM") else {
        return false;
    };
    let Some((dev, ino)) = stream.split_once(':') else {
        return false;
    };
    std::fs::metadata("/proc/self/fd/2")
        .is_ok_and(|m| dev.parse() == Ok(m.dev()) && ino.parse() == Ok(m.ino()))
}
