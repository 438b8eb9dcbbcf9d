//! Duration limit descriptors as stint.toml and experiment files write them (milliseconds and
//! cdladm policy names), turned into SPC-6 T2A/T2B mode pages.

use crate::error::FieldError;
use qos::{CdlDescriptor, CdlPage, CdlPages, PerfVsDurationGuideline, Policy, T2CdlUnits};
use serde::Deserialize;

/// `[cdl]`: the pages in force for the whole run.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CdlSpec {
    /// PERF VS DURATION GUIDELINES in percent: one of 0, 0.5, 1, 1.5, 2, 2.5, 3, 4, 5, 8, 10,
    /// 15, 20 (SPC-6 T2A PERF_VS_DURATION_GUIDELINE).
    #[serde(default)]
    pub perf_vs_duration_guideline: f64,
    /// T2A descriptors (reads).
    #[serde(default)]
    pub read: Vec<DescriptorSpec>,
    /// T2B descriptors (writes).
    #[serde(default)]
    pub write: Vec<DescriptorSpec>,
}

/// One T2 descriptor (SPC-6 T2A/T2B mode pages); absent limits are unused.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DescriptorSpec {
    /// Descriptor index, 1..=7 (the DLD commands carry).
    pub dld: u8,
    pub inactive_ms: Option<f64>,
    pub inactive_policy: Option<String>,
    pub active_ms: Option<f64>,
    pub active_policy: Option<String>,
    pub guideline_ms: Option<f64>,
    pub guideline_policy: Option<String>,
}

/// A policy by cdladm name ("complete-earliest") or code ("0h", "dh", "0xf").
fn policy(at: &str, name: Option<&str>) -> Result<Policy, FieldError> {
    let Some(name) = name else {
        return Ok(Policy::CompleteEarliest);
    };
    let lower = name.to_ascii_lowercase();
    let code = lower.strip_suffix('h').or_else(|| lower.strip_prefix("0x"));
    Policy::ALL
        .into_iter()
        .find(|p| p.name() == lower || code.and_then(|c| u8::from_str_radix(c, 16).ok()) == Some(p.code()))
        .ok_or_else(|| {
            FieldError::new(
                at,
                format!(
                    "unknown policy {name:?} (complete-earliest, continue-next-limit, \
                     continue-no-limit, complete-unavailable, abort-recovery, abort; or 0h, 1h, 2h, Dh, Eh, Fh)"
                ),
            )
        })
}

/// Milliseconds to ns, rejecting what no T2 unit can hold.
fn limit_ns(at: &str, ms: Option<f64>) -> Result<Option<u64>, FieldError> {
    match ms {
        None => Ok(None),
        Some(ms) if ms > 0.0 && ms <= 65_535.0 * 500.0 * 1000.0 => {
            Ok(Some((ms * 1e6).round() as u64))
        }
        Some(ms) => Err(FieldError::new(
            at,
            format!("{ms} ms is outside (0, 32767500000]"),
        )),
    }
}

impl DescriptorSpec {
    fn build(&self, at: &str) -> Result<CdlDescriptor, FieldError> {
        let f = |name: &str| format!("{at}.{name}");
        let limits = [
            limit_ns(&f("inactive_ms"), self.inactive_ms)?,
            limit_ns(&f("active_ms"), self.active_ms)?,
            limit_ns(&f("guideline_ms"), self.guideline_ms)?,
        ];
        // All three limits share one T2CDLUNITS: the coarsest unit that holds each exactly.
        let units = [
            T2CdlUnits::Ms500,
            T2CdlUnits::Ms10,
            T2CdlUnits::Us1,
            T2CdlUnits::Ns500,
        ]
        .into_iter()
        .find(|u| {
            limits
                .iter()
                .flatten()
                .all(|ns| ns % u.unit_ns() == 0 && ns / u.unit_ns() <= 65_535)
        })
        .ok_or_else(|| {
            FieldError::new(
                at,
                "limits cannot share one T2CDLUNITS (use multiples of 500 ns that fit 16 bits)",
            )
        })?;
        let value = |ns: Option<u64>| ns.map_or(0, |ns| (ns / units.unit_ns()) as u16);
        let any = limits.iter().any(Option::is_some);
        Ok(CdlDescriptor {
            t2cdlunits: if any { units } else { T2CdlUnits::None },
            max_inactive_time: value(limits[0]),
            max_inactive_time_policy: policy(
                &f("inactive_policy"),
                self.inactive_policy.as_deref(),
            )?,
            max_active_time: value(limits[1]),
            max_active_time_policy: policy(&f("active_policy"), self.active_policy.as_deref())?,
            command_duration_guideline: value(limits[2]),
            command_duration_guideline_policy: policy(
                &f("guideline_policy"),
                self.guideline_policy.as_deref(),
            )?,
        })
    }
}

fn page(field: &str, specs: &[DescriptorSpec]) -> Result<CdlPage, FieldError> {
    let mut page = CdlPage::default();
    for (i, spec) in specs.iter().enumerate() {
        let at = format!("cdl.{field}[{i}]");
        if let Some(j) = specs[..i].iter().position(|s| s.dld == spec.dld) {
            return Err(FieldError::new(
                &format!("{at}.dld"),
                format!("descriptor {} is already set by cdl.{field}[{j}]", spec.dld),
            ));
        }
        let slot = usize::from(spec.dld)
            .checked_sub(1)
            .and_then(|n| page.descriptors.get_mut(n))
            .ok_or_else(|| {
                FieldError::new(
                    &format!("{at}.dld"),
                    format!("{} is outside 1..=7", spec.dld),
                )
            })?;
        *slot = spec.build(&at)?;
        slot.validate(spec.dld)
            .map_err(|e| FieldError::new(&at, e.to_string()))?;
    }
    Ok(page)
}

impl CdlSpec {
    pub fn pages(&self) -> Result<CdlPages, FieldError> {
        let pct = self.perf_vs_duration_guideline;
        let perf = (0..=0xC)
            .filter_map(PerfVsDurationGuideline::new)
            .find(|p| (p.fraction() * 100.0 - pct).abs() < 1e-9)
            .ok_or_else(|| {
                FieldError::new(
                    "cdl.perf_vs_duration_guideline",
                    format!("{pct} is not one of 0, 0.5, 1, 1.5, 2, 2.5, 3, 4, 5, 8, 10, 15, 20 (percent)"),
                )
            })?;
        let mut t2a = page("read", &self.read)?;
        t2a.perf_vs_duration_guideline = perf;
        Ok(CdlPages {
            t2a,
            t2b: page("write", &self.write)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use qos::LimitKind;

    fn spec(text: &str) -> CdlSpec {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn guideline_and_inactive_share_units() {
        let pages = spec(
            "perf_vs_duration_guideline = 20\n[[read]]\ndld = 1\nguideline_ms = 50\n\
             inactive_ms = 50\ninactive_policy = \"Fh\"\nguideline_policy = \"complete-unavailable\"",
        )
        .pages()
        .unwrap();
        let d = pages.t2a.descriptor(1).unwrap();
        assert_eq!(d.t2cdlunits, T2CdlUnits::Ms10);
        assert_eq!(
            d.limit(LimitKind::Guideline),
            Some((50_000_000, Policy::CompleteUnavailable))
        );
        assert_eq!(
            d.limit(LimitKind::Inactive),
            Some((50_000_000, Policy::Abort))
        );
        assert_eq!(d.limit(LimitKind::Active), None);
        assert_eq!(
            pages.t2a.perf_vs_duration_guideline,
            PerfVsDurationGuideline::MAX
        );
        assert!(!pages.t2b.descriptor(1).unwrap().is_limited());
    }

    #[test]
    fn mixed_precision_falls_back_to_finer_units() {
        let pages = spec("[[write]]\ndld = 2\nguideline_ms = 0.5\nactive_ms = 50")
            .pages()
            .unwrap();
        let d = pages.t2b.descriptor(2).unwrap();
        assert_eq!(d.t2cdlunits, T2CdlUnits::Us1);
        assert_eq!(d.limit(LimitKind::Guideline).map(|l| l.0), Some(500_000));
        assert_eq!(d.limit(LimitKind::Active).map(|l| l.0), Some(50_000_000));
        // 0.5 ms and 1000 ms share no unit that holds both in 16 bits.
        let e = spec("[[read]]\ndld = 1\nguideline_ms = 0.5\nactive_ms = 1000")
            .pages()
            .unwrap_err();
        assert!(e.to_string().starts_with("cdl.read[0]"), "{e}");
    }

    #[test]
    fn errors_name_the_field() {
        for (text, field) in [
            (
                "perf_vs_duration_guideline = 7",
                "cdl.perf_vs_duration_guideline",
            ),
            ("[[read]]\ndld = 8\nguideline_ms = 5", "cdl.read[0].dld"),
            (
                "[[read]]\ndld = 2\nguideline_ms = 5\n[[read]]\ndld = 2\nguideline_ms = 9",
                "cdl.read[1].dld: descriptor 2 is already set by cdl.read[0]",
            ),
            (
                "[[read]]\ndld = 1\nguideline_ms = 5\nguideline_policy = \"Eh\"",
                "cdl.read[0]",
            ),
            (
                "[[write]]\ndld = 1\ninactive_ms = 5\ninactive_policy = \"sometimes\"",
                "cdl.write[0].inactive_policy",
            ),
            ("[[read]]\ndld = 1\nactive_ms = -5", "cdl.read[0].active_ms"),
        ] {
            let e = spec(text).pages().unwrap_err().to_string();
            assert!(e.starts_with(field), "{text}: {e}");
        }
    }
}
