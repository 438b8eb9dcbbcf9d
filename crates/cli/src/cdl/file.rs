//! cdladm's CDL page file format (cdl-tools, `cdladm save` / `cdladm upload`): one T2A or T2B
//! page per file, as text.
//!
//! ```text
//! # comment lines start with '#'; blank lines are ignored
//! cdlp: T2A
//! perf-vs-duration-guideline: 0xc        (T2A only: hexadecimal code 0x0..0xc)
//! == descriptor: 1                        (then 2, ..., 7, in order)
//! t2cdlunits: 0xa                         (hexadecimal: 0x0, 0x6, 0x8, 0xa, 0xe)
//! max-inactive-time: 0                    (decimal, 0..65535, in t2cdlunits)
//! max-inactive-time-policy: 0x0           (hexadecimal: 0x0, 0xd, 0xf)
//! max-active-time: 0                      (decimal)
//! max-active-time-policy: 0x0             (hexadecimal: 0x0, 0xd, 0xe, 0xf)
//! duration-guideline: 5                   (decimal)
//! duration-guideline-policy: 0x0          (hexadecimal: 0x0, 0x1, 0x2, 0xd, 0xf)
//! ```
//!
//! The fields come in exactly this order, one per line, `key:` then the value; leading and
//! trailing blanks and a CR before the newline are ignored, as cdladm does. [`render`] writes
//! what cdladm's `save` writes for the same page, legend comments included, so cdladm reads
//! stint's files. [`parse`] is stricter than cdladm's reader, never looser: it takes everything
//! cdladm writes, and refuses (with the line, the field and what is allowed) what cdladm would
//! misread (a number in the wrong base, a value beyond 16 bits, trailing text) or what the
//! device would refuse (reserved units, a policy a limit does not allow: SPC-6 T2 descriptor).

use qos::cdl::LimitKind;
use qos::cdl::{CdlDescriptor, CdlPage, CdlPageKind, PerfVsDurationGuideline, Policy, T2CdlUnits};
use std::fmt::{self, Write as _};

/// A parsed page file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageFile {
    pub kind: CdlPageKind,
    pub page: CdlPage,
    /// Valid but probably unintended settings (printed before an upload).
    pub warnings: Vec<String>,
}

/// Why a file was refused: the 1-based line and what is wrong there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileError {
    pub line: usize,
    pub message: String,
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for FileError {}

/// cdladm's page name.
pub fn page_name(kind: CdlPageKind) -> &'static str {
    match kind {
        CdlPageKind::T2A => "T2A",
        CdlPageKind::T2B => "T2B",
    }
}

/// PERF VS DURATION GUIDELINES codes 0h..Ch as cdladm prints them (percent).
pub const PERF_PERCENT: [&str; 13] = [
    "0", "0.5", "1.0", "1.5", "2.0", "2.5", "3", "4", "5", "8", "10", "15", "20",
];

/// T2CDLUNITS codes with cdladm's names.
const UNITS: [(T2CdlUnits, &str); 5] = [
    (T2CdlUnits::None, "none"),
    (T2CdlUnits::Ns500, "500ns"),
    (T2CdlUnits::Us1, "1us"),
    (T2CdlUnits::Ms10, "10ms"),
    (T2CdlUnits::Ms500, "500ms"),
];

/// The file keys of a limit and of its policy, and how messages name the limit.
fn limit_keys(kind: LimitKind) -> (&'static str, &'static str, &'static str) {
    match kind {
        LimitKind::Inactive => (
            "max-inactive-time",
            "max-inactive-time-policy",
            "max inactive time",
        ),
        LimitKind::Active => (
            "max-active-time",
            "max-active-time-policy",
            "max active time",
        ),
        LimitKind::Guideline => (
            "duration-guideline",
            "duration-guideline-policy",
            "command duration guideline",
        ),
    }
}

/// The policies a limit allows, in code order (SPC-6 T2 descriptor; `Policy::allowed_for`).
fn allowed_policies(kind: LimitKind) -> impl Iterator<Item = Policy> {
    Policy::ALL.into_iter().filter(move |p| p.allowed_for(kind))
}

/// "0x0 complete-earliest, 0xd complete-unavailable, 0xf abort".
fn allowed_policies_text(kind: LimitKind) -> String {
    allowed_policies(kind)
        .map(|p| format!("0x{:x} {}", p.code(), p.name()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The page as cdladm's `save` writes it (cdl-tools `cdl_page_save_t2`): a legend of the
/// allowed codes as comments, `cdlp`, PERF VS DURATION GUIDELINES for T2A, then the seven
/// descriptors, each followed by a blank line. Codes in lowercase hexadecimal with `0x`, times
/// in decimal.
pub fn render(kind: CdlPageKind, page: &CdlPage) -> String {
    let mut f = String::new();
    let name = page_name(kind);
    // `write!` to a String cannot fail.
    let _ = writeln!(f, "# {name} page format:");
    if kind == CdlPageKind::T2A {
        let _ = writeln!(f, "# perf-vs-duration-guideline can be one of:");
        for (code, percent) in PERF_PERCENT.iter().enumerate() {
            let label = format!("{percent}%");
            let _ = writeln!(f, "#   - {label:<6}: 0x{code:x}");
        }
    }
    let _ = writeln!(f, "# t2cdlunits can be one of:");
    for (units, label) in UNITS {
        let _ = writeln!(f, "#   - {label:<7}: 0x{:x}", units.code());
    }
    for kind in LimitKind::ALL {
        let (_, policy_key, _) = limit_keys(kind);
        let _ = writeln!(f, "# {policy_key} can be one of:");
        for p in allowed_policies(kind) {
            let _ = writeln!(f, "#   - {:<21}: 0x{:x}", p.name(), p.code());
        }
    }
    let _ = writeln!(f);
    let _ = writeln!(f, "cdlp: {name}\n");
    if kind == CdlPageKind::T2A {
        let _ = writeln!(
            f,
            "perf-vs-duration-guideline: 0x{:x}\n",
            page.perf_vs_duration_guideline.code()
        );
    }
    for (n, d) in (1..).zip(&page.descriptors) {
        let _ = writeln!(f, "== descriptor: {n}");
        let _ = writeln!(f, "t2cdlunits: 0x{:x}", d.t2cdlunits.code());
        for (kind, value, policy) in [
            (
                LimitKind::Inactive,
                d.max_inactive_time,
                d.max_inactive_time_policy,
            ),
            (
                LimitKind::Active,
                d.max_active_time,
                d.max_active_time_policy,
            ),
            (
                LimitKind::Guideline,
                d.command_duration_guideline,
                d.command_duration_guideline_policy,
            ),
        ] {
            let (key, policy_key, _) = limit_keys(kind);
            let _ = writeln!(f, "{key}: {value}");
            let _ = writeln!(f, "{policy_key}: 0x{:x}", policy.code());
        }
        let _ = writeln!(f);
    }
    f
}

/// The significant lines of a file: (line number, text without surrounding blanks), skipping
/// blank lines and comments (cdl-tools `cdl_get_line`).
struct Lines<'a> {
    lines: std::iter::Peekable<Box<dyn Iterator<Item = (usize, &'a str)> + 'a>>,
    /// Number of the last line of the file, for "end of file" errors.
    last: usize,
}

fn is_blank(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\r' | '\n')
}

impl<'a> Lines<'a> {
    fn new(text: &'a str) -> Self {
        let last = text.lines().count().max(1);
        let it: Box<dyn Iterator<Item = (usize, &'a str)> + 'a> = Box::new(
            text.lines()
                .enumerate()
                .map(|(i, l)| (i + 1, l.trim_matches(is_blank)))
                .filter(|(_, l)| !l.is_empty() && !l.starts_with('#')),
        );
        Lines {
            lines: it.peekable(),
            last,
        }
    }

    /// The next line, which must be `key:` and a value; returns (line, value).
    fn field(&mut self, key: &str, what: &str) -> Result<(usize, &'a str), FileError> {
        let Some((line, text)) = self.lines.next() else {
            return Err(FileError {
                line: self.last,
                message: format!("the file ends where `{key}:` {what} was expected"),
            });
        };
        let Some(value) = text
            .strip_prefix(key)
            .and_then(|rest| rest.strip_prefix(':'))
        else {
            return Err(FileError {
                line,
                message: format!("expected `{key}:` {what}, found `{text}`"),
            });
        };
        let value = value.trim_matches(is_blank);
        if value.is_empty() {
            return Err(FileError {
                line,
                message: format!("`{key}:` has no value"),
            });
        }
        Ok((line, value))
    }

    /// The next line, which must be exactly `header`.
    fn header(&mut self, header: &str) -> Result<(), FileError> {
        match self.lines.next() {
            Some((_, text)) if text == header => Ok(()),
            Some((line, text)) => Err(FileError {
                line,
                message: format!("expected `{header}`, found `{text}`"),
            }),
            None => Err(FileError {
                line: self.last,
                message: format!("the file ends where `{header}` was expected"),
            }),
        }
    }
}

/// A hexadecimal code as cdladm writes them (`0xa`; the `0x` is optional, as for cdladm);
/// values too large for any field saturate.
fn hex(value: &str) -> Option<u32> {
    let digits = value
        .strip_prefix("0x")
        .or_else(|| value.strip_prefix("0X"))
        .unwrap_or(value);
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    Some(u32::from_str_radix(digits, 16).unwrap_or(u32::MAX))
}

/// A 4-bit code field: `None` beyond 4 bits.
fn nibble(code: u32) -> Option<u8> {
    u8::try_from(code).ok().filter(|c| *c <= 0x0F)
}

/// A time as cdladm writes them: decimal, 0..65535.
fn decimal(value: &str) -> Result<u16, &'static str> {
    if !value.chars().all(|c| c.is_ascii_digit()) {
        return Err("is not a decimal number");
    }
    let significant = value.trim_start_matches('0');
    if significant.len() > 5 {
        return Err("does not fit the 16-bit field");
    }
    let v: u32 = significant.parse().unwrap_or(0);
    u16::try_from(v).map_err(|_| "does not fit the 16-bit field")
}

/// Parses and validates a whole page file; nothing about the file is left to the device.
pub fn parse(text: &str) -> Result<PageFile, FileError> {
    let mut lines = Lines::new(text);
    let mut warnings = Vec::new();
    let (line, name) = lines.field("cdlp", "(the page: T2A or T2B) as the first field")?;
    let kind = match name {
        "T2A" => CdlPageKind::T2A,
        "T2B" => CdlPageKind::T2B,
        "A" | "B" => {
            return Err(FileError {
                line,
                message: format!(
                    "cdlp: page {name} is an SPC-5 CDL page (A/B mode pages), which stint does \
                     not handle; allowed: T2A, T2B"
                ),
            })
        }
        other => {
            return Err(FileError {
                line,
                message: format!("cdlp: `{other}` is not a page name (allowed: T2A, T2B)"),
            })
        }
    };
    let mut page = CdlPage::default();
    if kind == CdlPageKind::T2A {
        let key = "perf-vs-duration-guideline";
        let (line, value) = lines.field(key, "(T2A only, after cdlp)")?;
        let allowed = "allowed: 0x0..0xc, i.e. 0x0 0%, 0x1 0.5%, 0x2 1.0%, 0x3 1.5%, 0x4 2.0%, \
                       0x5 2.5%, 0x6 3%, 0x7 4%, 0x8 5%, 0x9 8%, 0xa 10%, 0xb 15%, 0xc 20%";
        let code = hex(value).ok_or_else(|| FileError {
            line,
            message: format!("{key}: `{value}` is not a hexadecimal code ({allowed})"),
        })?;
        page.perf_vs_duration_guideline = nibble(code)
            .and_then(PerfVsDurationGuideline::new)
            .ok_or_else(|| FileError {
                line,
                message: format!("{key}: {value} is reserved ({allowed})"),
            })?;
        if code == 0 {
            warnings.push(format!(
                "line {line}: perf-vs-duration-guideline is 0x0 (0%): the device may not trade \
                 any throughput for the duration guidelines"
            ));
        }
    }
    let units_allowed = UNITS
        .iter()
        .map(|(u, label)| format!("0x{:x} {label}", u.code()))
        .collect::<Vec<_>>()
        .join(", ");
    for (number, slot) in (1u8..).zip(page.descriptors.iter_mut()) {
        lines.header(&format!("== descriptor: {number}"))?;
        let what = format!("(descriptor {number})");
        let (line, value) = lines.field("t2cdlunits", &what)?;
        let code = hex(value).ok_or_else(|| FileError {
            line,
            message: format!(
                "descriptor {number} t2cdlunits: `{value}` is not a hexadecimal code (allowed: \
                 {units_allowed})"
            ),
        })?;
        let t2cdlunits = nibble(code)
            .and_then(T2CdlUnits::from_code)
            .ok_or_else(|| FileError {
                line,
                message: format!(
                    "descriptor {number} t2cdlunits: {value} is reserved (allowed: \
                     {units_allowed})"
                ),
            })?;
        let mut d = CdlDescriptor {
            t2cdlunits,
            ..CdlDescriptor::default()
        };
        for kind in LimitKind::ALL {
            let (key, policy_key, limit_name) = limit_keys(kind);
            let (line, value) = lines.field(key, &what)?;
            let time = decimal(value).map_err(|why| FileError {
                line,
                message: format!(
                    "descriptor {number} {key}: `{value}` {why} (0..65535, in t2cdlunits)"
                ),
            })?;
            let (line, value) = lines.field(policy_key, &what)?;
            let allowed = allowed_policies_text(kind);
            let code = hex(value).ok_or_else(|| FileError {
                line,
                message: format!(
                    "descriptor {number} {policy_key}: `{value}` is not a hexadecimal code \
                     (allowed for a {limit_name}: {allowed})"
                ),
            })?;
            let policy = match nibble(code).and_then(Policy::from_code) {
                Some(p) if p.allowed_for(kind) => p,
                Some(p) => {
                    return Err(FileError {
                        line,
                        message: format!(
                            "descriptor {number} {policy_key}: {value} ({}) is not allowed for \
                             a {limit_name} (allowed: {allowed})",
                            p.name()
                        ),
                    })
                }
                None => {
                    return Err(FileError {
                        line,
                        message: format!(
                            "descriptor {number} {policy_key}: {value} is not a policy (allowed \
                             for a {limit_name}: {allowed})"
                        ),
                    })
                }
            };
            match kind {
                LimitKind::Inactive => {
                    d.max_inactive_time = time;
                    d.max_inactive_time_policy = policy;
                }
                LimitKind::Active => {
                    d.max_active_time = time;
                    d.max_active_time_policy = policy;
                }
                LimitKind::Guideline => {
                    d.command_duration_guideline = time;
                    d.command_duration_guideline_policy = policy;
                }
            }
        }
        let any_time =
            d.max_inactive_time != 0 || d.max_active_time != 0 || d.command_duration_guideline != 0;
        if d.t2cdlunits == T2CdlUnits::None && any_time {
            warnings.push(format!(
                "descriptor {number}: t2cdlunits is 0x0 (none), so its limits are ignored \
                 (SPC-6 T2 descriptor)"
            ));
        }
        // The codec's own check (SPC-6 policy codes per limit), so the device cannot refuse
        // what this parser accepted.
        d.validate(number).map_err(|e| FileError {
            line,
            message: e.to_string(),
        })?;
        *slot = d;
    }
    if let Some((line, text)) = lines.lines.next() {
        return Err(FileError {
            line,
            message: format!(
                "unexpected `{text}` after descriptor 7 (a file holds one page: cdlp, {}7 \
                 descriptors)",
                if kind == CdlPageKind::T2A {
                    "perf-vs-duration-guideline, "
                } else {
                    ""
                }
            ),
        });
    }
    Ok(PageFile {
        kind,
        page,
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A T2A page: 50/100 ms guidelines, an inactive limit with Fh, an active limit with Eh.
    fn sample() -> CdlPage {
        let mut page = CdlPage {
            perf_vs_duration_guideline: PerfVsDurationGuideline::MAX,
            ..CdlPage::default()
        };
        page.descriptors[0] =
            CdlDescriptor::guideline(50_000_000, Policy::CompleteEarliest).unwrap_or_default();
        page.descriptors[1] = CdlDescriptor {
            t2cdlunits: T2CdlUnits::Us1,
            max_inactive_time: 65535,
            max_inactive_time_policy: Policy::Abort,
            max_active_time: 1500,
            max_active_time_policy: Policy::AbortRecovery,
            command_duration_guideline: 100,
            command_duration_guideline_policy: Policy::ContinueNextLimit,
        };
        page
    }

    #[test]
    fn render_then_parse_is_the_identity() {
        for kind in [CdlPageKind::T2A, CdlPageKind::T2B] {
            let mut page = sample();
            if kind == CdlPageKind::T2B {
                page.perf_vs_duration_guideline = PerfVsDurationGuideline::default();
            }
            let text = render(kind, &page);
            let parsed = parse(&text).unwrap();
            assert_eq!((parsed.kind, parsed.page), (kind, page));
        }
    }

    #[test]
    fn render_writes_cdladms_layout() {
        let text = render(CdlPageKind::T2A, &sample());
        // The legend, as cdl-tools' cdl_page_save_t2 prints it.
        assert!(text.starts_with("# T2A page format:\n# perf-vs-duration-guideline can be one of:\n#   - 0%    : 0x0\n#   - 0.5%  : 0x1\n"));
        assert!(text.contains("#   - 20%   : 0xc\n# t2cdlunits can be one of:\n#   - none   : 0x0\n#   - 500ns  : 0x6\n"));
        assert!(text.contains("#   - 500ms  : 0xe\n# max-inactive-time-policy can be one of:\n#   - complete-earliest    : 0x0\n#   - complete-unavailable : 0xd\n#   - abort                : 0xf\n"));
        assert!(text.contains("#   - abort-recovery       : 0xe\n"));
        assert!(
            text.contains("#   - continue-next-limit  : 0x1\n#   - continue-no-limit    : 0x2\n")
        );
        assert!(text.contains("\n\ncdlp: T2A\n\nperf-vs-duration-guideline: 0xc\n\n== descriptor: 1\nt2cdlunits: 0xa\nmax-inactive-time: 0\nmax-inactive-time-policy: 0x0\nmax-active-time: 0\nmax-active-time-policy: 0x0\nduration-guideline: 5\nduration-guideline-policy: 0x0\n\n== descriptor: 2\nt2cdlunits: 0x8\nmax-inactive-time: 65535\nmax-inactive-time-policy: 0xf\nmax-active-time: 1500\nmax-active-time-policy: 0xe\nduration-guideline: 100\nduration-guideline-policy: 0x1\n\n"));
        assert!(text.ends_with("== descriptor: 7\nt2cdlunits: 0x0\nmax-inactive-time: 0\nmax-inactive-time-policy: 0x0\nmax-active-time: 0\nmax-active-time-policy: 0x0\nduration-guideline: 0\nduration-guideline-policy: 0x0\n\n"));
        let t2b = render(CdlPageKind::T2B, &CdlPage::default());
        assert!(!t2b.contains("perf-vs-duration-guideline"));
        assert!(t2b.contains("\ncdlp: T2B\n\n== descriptor: 1\n"));
    }

    #[test]
    fn takes_what_cdladm_tolerates() {
        // Indentation, CRLF, trailing blanks, no space after ':', upper-case hex, no 0x.
        let mut text = render(CdlPageKind::T2B, &CdlPage::default()).replace('\n', "\r\n");
        text = text.replace("t2cdlunits: 0x0", "  t2cdlunits:0XA  ");
        text = text.replacen("duration-guideline: 0", "duration-guideline:\t007", 1);
        text = text.replacen(
            "max-active-time-policy: 0x0",
            "max-active-time-policy: d",
            1,
        );
        let parsed = parse(&text).unwrap();
        let d = parsed.page.descriptors[0];
        assert_eq!(d.t2cdlunits, T2CdlUnits::Ms10);
        assert_eq!(d.command_duration_guideline, 7);
        assert_eq!(d.max_active_time_policy, Policy::CompleteUnavailable);
        assert!(parsed.warnings.is_empty());
    }

    fn error_of(text: &str) -> FileError {
        parse(text).unwrap_err()
    }

    /// The rendered sample with `from` replaced by `to` on the line that holds it.
    fn edited(from: &str, to: &str) -> (String, usize) {
        let text = render(CdlPageKind::T2A, &sample());
        let line = text
            .lines()
            .position(|l| l == from)
            .map(|i| i + 1)
            .unwrap_or_else(|| panic!("{from} not in the file"));
        (
            text.replacen(&format!("\n{from}\n"), &format!("\n{to}\n"), 1),
            line,
        )
    }

    #[test]
    fn names_the_line_the_field_and_what_is_allowed() {
        let cases = [
            ("max-inactive-time-policy: 0xf", "max-inactive-time-policy: 0xe", "descriptor 2 max-inactive-time-policy: 0xe (abort-recovery) is not allowed for a max inactive time (allowed: 0x0 complete-earliest, 0xd complete-unavailable, 0xf abort)"),
            ("duration-guideline-policy: 0x1", "duration-guideline-policy: 0x5", "descriptor 2 duration-guideline-policy: 0x5 is not a policy (allowed for a command duration guideline: 0x0 complete-earliest, 0x1 continue-next-limit, 0x2 continue-no-limit, 0xd complete-unavailable, 0xf abort)"),
            ("max-active-time: 1500", "max-active-time: 65536", "descriptor 2 max-active-time: `65536` does not fit the 16-bit field (0..65535, in t2cdlunits)"),
            ("max-active-time: 1500", "max-active-time: 0x10", "descriptor 2 max-active-time: `0x10` is not a decimal number (0..65535, in t2cdlunits)"),
            ("max-active-time: 1500", "max-active-time: -1", "`-1` is not a decimal number"),
            ("t2cdlunits: 0x8", "t2cdlunits: 0x7", "descriptor 2 t2cdlunits: 0x7 is reserved (allowed: 0x0 none, 0x6 500ns, 0x8 1us, 0xa 10ms, 0xe 500ms)"),
            ("t2cdlunits: 0x8", "t2cdlunits: 10ms", "descriptor 2 t2cdlunits: `10ms` is not a hexadecimal code"),
            ("perf-vs-duration-guideline: 0xc", "perf-vs-duration-guideline: 0xd", "perf-vs-duration-guideline: 0xd is reserved (allowed: 0x0..0xc"),
            ("perf-vs-duration-guideline: 0xc", "perf-vs-duration-guideline: 0x100", "perf-vs-duration-guideline: 0x100 is reserved"),
            ("cdlp: T2A", "cdlp: T2C", "cdlp: `T2C` is not a page name (allowed: T2A, T2B)"),
            ("cdlp: T2A", "cdlp: A", "SPC-5 CDL page"),
            ("== descriptor: 2", "== descriptor: 3", "expected `== descriptor: 2`, found `== descriptor: 3`"),
            ("max-active-time: 1500", "max-active-time-policy: 0xe", "expected `max-active-time:` (descriptor 2), found `max-active-time-policy: 0xe`"),
            ("duration-guideline: 100", "duration-guideline:", "`duration-guideline:` has no value"),
            ("duration-guideline: 100", "duration-guideline: 100 # 1 s", "`100 # 1 s` is not a decimal number"),
        ];
        for (from, to, message) in cases {
            let (text, line) = edited(from, to);
            let e = error_of(&text);
            assert_eq!(e.line, line, "{to}: {e}");
            assert!(e.message.contains(message), "{to}: {e}");
        }
    }

    #[test]
    fn refuses_missing_and_trailing_content() {
        let text = render(CdlPageKind::T2A, &sample());
        let cut = text.rfind("duration-guideline-policy").unwrap();
        let e = error_of(&text[..cut]);
        assert!(
            e.message
                .contains("the file ends where `duration-guideline-policy:` (descriptor 7)"),
            "{e}"
        );
        assert_eq!(e.line, text[..cut].lines().count());
        let e = error_of(&format!("{text}cdlp: T2B\n"));
        assert_eq!(e.line, text.lines().count() + 1);
        assert!(e
            .message
            .contains("unexpected `cdlp: T2B` after descriptor 7"));
        let e = error_of("# nothing\n\n");
        assert!(e.message.contains("`cdlp:`"), "{e}");
        let e = error_of("cdlp: T2B\nperf-vs-duration-guideline: 0xc\n");
        assert_eq!(e.line, 2);
        assert!(e.message.contains("expected `== descriptor: 1`"), "{e}");
    }

    #[test]
    fn warns_about_valid_but_inert_settings() {
        let mut page = sample();
        page.perf_vs_duration_guideline = PerfVsDurationGuideline::default();
        page.descriptors[3].max_active_time = 5;
        let parsed = parse(&render(CdlPageKind::T2A, &page)).unwrap();
        assert_eq!(parsed.warnings.len(), 2, "{:?}", parsed.warnings);
        assert!(parsed.warnings[1].contains("descriptor 4: t2cdlunits is 0x0"));
    }
}
