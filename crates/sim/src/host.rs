//! What the host's error handling costs when a duration limit fails a command (experiments.md,
//! `[host]`). On SAS a CDL completion is an ordinary command completion. On SATA, Linux libata
//! handles them through error handling (EH): a policy Fh abort comes back as an NCQ error, which
//! by SATA NCQ error semantics aborts every other queued command (EH reads log 10h, then
//! reissues them); a policy Dh completion is a success with sense available, which libata fetches
//! with a non-queued READ LOG of log 0Fh, so the queue must drain first. An improved host reads
//! that sense without stalling the queue (NCQ autosense, successful-command sense reporting).

use drive::Ns;
use serde::Deserialize;

/// How the host's transport handles CDL completions.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Interface {
    /// Each completion stands alone.
    #[default]
    Sas,
    /// Fh aborts and requeues the device queue; Dh stalls it for a READ LOG.
    SataLibata,
    /// Fh as libata; Dh's sense comes without a stall.
    SataImproved,
}

/// `[host]` in an experiment file.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct HostSpec {
    #[serde(default)]
    pub interface: Interface,
    /// One EH round trip in ms: quiescing the queue and reading a log page. An assumption
    /// (the libata patch series gives no figure; "several ms"), default 5.
    #[serde(default = "default_eh_ms")]
    pub eh_ms: f64,
}

fn default_eh_ms() -> f64 {
    5.0
}

impl Default for HostSpec {
    fn default() -> Self {
        Self {
            interface: Interface::default(),
            eh_ms: default_eh_ms(),
        }
    }
}

/// The validated host model.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Host {
    pub interface: Interface,
    /// EH round trip, ns.
    pub eh: Ns,
}

impl Default for Host {
    fn default() -> Self {
        Self::new(HostSpec::default()).unwrap_or(Self {
            interface: Interface::Sas,
            eh: 5_000_000,
        })
    }
}

impl Host {
    pub fn new(spec: HostSpec) -> Result<Self, crate::SimError> {
        if !(0.0..=10_000.0).contains(&spec.eh_ms) {
            return Err(crate::SimError::field(
                "host.eh_ms",
                format!("{} is outside 0..=10000", spec.eh_ms),
            ));
        }
        Ok(Self {
            interface: spec.interface,
            eh: (spec.eh_ms * 1e6) as Ns,
        })
    }

    /// An abort (policy Eh/Fh) fails every other queued command, which the host reissues.
    pub fn abort_fails_the_queue(&self) -> bool {
        self.interface != Interface::Sas
    }

    /// A Dh completion's sense needs a non-queued command: the queue drains first.
    pub fn sense_stalls_the_queue(&self) -> bool {
        self.interface == Interface::SataLibata
    }
}

/// Where the host's error handling stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Eh {
    /// Commands flow.
    Idle,
    /// No new command goes out until the device queue is empty; then EH runs.
    Draining,
    /// EH runs until this time; nothing goes out meanwhile.
    Until(Ns),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_defaults_and_errors() {
        let h: HostSpec = toml::from_str("interface = \"sata-libata\"").unwrap();
        let h = Host::new(h).unwrap();
        assert_eq!((h.interface, h.eh), (Interface::SataLibata, 5_000_000));
        assert!(h.abort_fails_the_queue() && h.sense_stalls_the_queue());
        let improved =
            Host::new(toml::from_str("interface = \"sata-improved\"\neh_ms = 2").unwrap()).unwrap();
        assert!(improved.abort_fails_the_queue() && !improved.sense_stalls_the_queue());
        assert!(!Host::default().abort_fails_the_queue());
        assert!(toml::from_str::<HostSpec>("interface = \"nvme\"").is_err());
        let e = Host::new(HostSpec {
            interface: Interface::Sas,
            eh_ms: -1.0,
        })
        .unwrap_err();
        assert!(e.to_string().contains("host.eh_ms"), "{e}");
    }
}
