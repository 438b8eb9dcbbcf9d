//! `stint cdl`: cdladm (Western Digital's cdl-tools) for iSCSI LUNs. Reads and changes the
//! Command Duration Limits T2A/T2B mode pages (SPC-6) of a LUN through the crate's initiator,
//! in cdladm's page file format, and reads the CDL statistics log page (SPC-6 LOG SENSE page
//! 19h subpage 21h).

mod file;
mod lun;

use anyhow::{bail, Context};
use file::{page_name, PageFile, PERF_PERCENT};
use lun::{CdlCommand, CdlpPage, CommandSupport, Lun, Outcome};
use qos::cdl::{CdlDescriptor, CdlPage, CdlPageKind, LimitKind, T2CdlUnits, T2_PAGE_LEN};
use scsi::sense::FieldPointer;
use scsi::{Asc, SenseKey};
use std::path::{Path, PathBuf};

/// Writes a line to stdout. A closed stdout (`stint cdl show URL | head`) is not an error of
/// the command: what could not be written is dropped instead of panicking as `println!` does.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}

/// As [`say!`], without the newline.
macro_rules! say_raw {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout().lock(), $($arg)*);
    }};
}

const ABOUT: &str = "Inspect and change the Command Duration Limits of an iSCSI LUN (cdladm for \
iSCSI)";

const LONG_ABOUT: &str = "Inspect and change the Command Duration Limits (CDL) of an iSCSI LUN, \
as Western Digital's cdladm (cdl-tools) does for a local disk: what the LUN reports (info), its \
T2A (read) and T2B (write) descriptor pages (show), the pages as files in cdladm's format (save, \
upload), and the CDL statistics log page (stats).

URL is a libiscsi URL, iscsi://host[:port]/target-iqn/lun, as `stint serve` prints it.";

#[derive(clap::Args)]
#[command(about = ABOUT, long_about = LONG_ABOUT)]
pub struct CdlArgs {
    #[command(subcommand)]
    command: Sub,
}

#[derive(clap::Subcommand)]
enum Sub {
    /// What the LUN reports about CDL support.
    ///
    /// INQUIRY VERSION; the CDL page of READ(16), WRITE(16), READ(32) and WRITE(32) (REPORT
    /// SUPPORTED OPERATION CODES, one command with service action: RWCDLP, CDLP); which of the
    /// T2A and T2B mode pages exist (MODE SENSE 0Ah/07h, 0Ah/08h) and whether they can be
    /// saved; whether the CDL statistics log page is supported (LOG SENSE 19h/21h). Exits 0 for
    /// a LUN without CDL too, saying so.
    Info(Target),
    /// Show the descriptors of the T2A and T2B pages.
    ///
    /// Every descriptor in cdladm's `show` layout: its units, the three limits (max inactive
    /// time, max active time, duration guideline) with their policies by name, and the
    /// perf_vs_duration_guideline of T2A. A limit of 0 shows as "no limit".
    Show(ShowArgs),
    /// Write a page to a file in cdladm's page file format (cdladm reads it back).
    #[command(
        long_about = "Write a page's current values to a file in cdladm's page file \
format, byte for byte what `cdladm save` writes for the same page, so `cdladm upload` and \
`stint cdl upload` read it back.

With --page, FILE receives that page. Without it, both pages are saved, as cdladm saves every \
page: FILE names the pair, `disk.cdl` giving `disk-T2A.cdl` and `disk-T2B.cdl`."
    )]
    Save(SaveArgs),
    /// Load a page file in cdladm's format into the LUN (MODE SELECT).
    #[command(
        long_about = "Load a page file in cdladm's format into the LUN. The file is \
checked completely first (its syntax, and every value against what SPC-6 allows: units 0x0, \
0x6, 0x8, 0xa or 0xe; times 0..65535; inactive-time policies 0x0, 0xd, 0xf; active-time \
policies 0x0, 0xd, 0xe, 0xf; guideline policies 0x0, 0x1, 0x2, 0xd, 0xf; \
perf-vs-duration-guideline 0x0..0xc); a bad file is refused with its line and field and \
nothing is sent to the LUN.

Then, as cdladm does: MODE SENSE(10) of the page, its descriptors replaced, MODE SELECT(10) \
with PF=1 (and SP=1 with --permanent), one page per MODE SELECT. The page is read back to \
confirm the LUN took it.

The file format (lines starting with '#' and blank lines are ignored):

  cdlp: T2A
  perf-vs-duration-guideline: 0xc      (T2A only)
  == descriptor: 1                      (1 to 7, in order)
  t2cdlunits: 0xa
  max-inactive-time: 0
  max-inactive-time-policy: 0x0
  max-active-time: 0
  max-active-time-policy: 0x0
  duration-guideline: 5
  duration-guideline-policy: 0x0
  ..."
    )]
    Upload(UploadArgs),
    /// Show (or reset) the CDL statistics log page.
    ///
    /// LOG SENSE page 19h subpage 21h, cumulative values: per descriptor of T2A (parameters
    /// 0021h-0027h) and of T2B (0041h-0047h), the commands that missed their inactive limit,
    /// their active limit, either of them, and the number of commands that used it. The
    /// counters start at 0 when `stint serve` starts; --reset sets them to 0.
    Stats(StatsArgs),
}

/// The LUN to talk to.
#[derive(clap::Args)]
struct Target {
    /// The LUN: iscsi://host[:port]/target-iqn/lun (as `stint serve` prints it).
    url: String,
    /// Initiator name to log in with (a target with allowed_initiators must list it).
    #[arg(long, value_name = "IQN", default_value = "iqn.2026-11.dev.stint:cdl")]
    initiator_name: String,
}

#[derive(clap::Args)]
struct StatsArgs {
    #[command(flatten)]
    target: Target,
    /// Set the counters to 0 first (LOG SELECT with PCR=1, PC=01b, page 19h subpage 21h:
    /// SPC's parameter code reset of cumulative values), then show them.
    #[arg(long)]
    reset: bool,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum PageArg {
    T2a,
    T2b,
}

impl PageArg {
    fn kind(self) -> CdlPageKind {
        match self {
            PageArg::T2a => CdlPageKind::T2A,
            PageArg::T2b => CdlPageKind::T2B,
        }
    }
}

#[derive(clap::Args)]
struct ShowArgs {
    #[command(flatten)]
    target: Target,
    /// Only this page.
    #[arg(long, value_enum, ignore_case = true)]
    page: Option<PageArg>,
    /// Raw field values (hexadecimal codes and counts in units), as `cdladm show --raw`.
    #[arg(long)]
    raw: bool,
}

#[derive(clap::Args)]
struct SaveArgs {
    #[command(flatten)]
    target: Target,
    /// The file to write (without --page: FILE-T2A.cdl and FILE-T2B.cdl, a .cdl suffix of
    /// FILE dropped).
    #[arg(long, value_name = "FILE")]
    file: PathBuf,
    /// The page to save (default: both).
    #[arg(long, value_enum, ignore_case = true)]
    page: Option<PageArg>,
}

#[derive(clap::Args)]
struct UploadArgs {
    #[command(flatten)]
    target: Target,
    /// The page file (cdladm's format; its `cdlp:` line names the page).
    #[arg(long, value_name = "FILE")]
    file: PathBuf,
    /// Make the page the saved values too (MODE SELECT SP=1), so it survives a restart of a
    /// LUN that keeps saved pages (a file LUN keeps them in PATH.modes).
    #[arg(long)]
    permanent: bool,
}

pub fn run(args: CdlArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        match args.command {
            Sub::Info(t) => info(t).await,
            Sub::Show(a) => show(a).await,
            Sub::Save(a) => save(a).await,
            Sub::Upload(a) => upload(a).await,
            Sub::Stats(t) => stats(t).await,
        }
    })
}

/// INQUIRY VERSION codes (SPC-6 standard INQUIRY data; 0Dh as Linux and libata use it).
fn version_name(v: u8) -> &'static str {
    match v {
        0x00 => "no standard claimed",
        0x03 => "SPC",
        0x04 => "SPC-2",
        0x05 => "SPC-3",
        0x06 => "SPC-4",
        0x07 => "SPC-5",
        0x0D => "SPC-6",
        _ => "unknown",
    }
}

/// Which page each CDL command reports (REPORT SUPPORTED OPERATION CODES).
struct Probe {
    commands: Vec<(CdlCommand, CommandSupport)>,
}

impl Probe {
    async fn run(lun: &mut Lun) -> anyhow::Result<Probe> {
        let mut commands = Vec::new();
        for c in CdlCommand::ALL {
            let s = lun.command_support(c).await?;
            commands.push((c, s));
            if s == CommandSupport::NoRsoc {
                break;
            }
        }
        Ok(Probe { commands })
    }

    fn no_rsoc(&self) -> bool {
        self.commands
            .iter()
            .any(|(_, s)| *s == CommandSupport::NoRsoc)
    }

    fn page_of(s: &CommandSupport) -> CdlpPage {
        match s {
            CommandSupport::Supported { page, .. } => *page,
            _ => CdlpPage::None,
        }
    }

    /// The T2 pages some command reports, in order T2A, T2B.
    fn t2_pages(&self) -> Vec<CdlPageKind> {
        [CdlPageKind::T2A, CdlPageKind::T2B]
            .into_iter()
            .filter(|k| {
                self.commands
                    .iter()
                    .any(|(_, s)| Self::page_of(s) == CdlpPage::T2(*k))
            })
            .collect()
    }

    /// "read", "write" or "read and write": the commands whose descriptors the page holds.
    fn role(&self, kind: CdlPageKind) -> &'static str {
        let users = self
            .commands
            .iter()
            .filter(|(_, s)| Self::page_of(s) == CdlpPage::T2(kind));
        let (mut read, mut write) = (false, false);
        for (c, _) in users {
            if c.is_write() {
                write = true;
            } else {
                read = true;
            }
        }
        match (read, write) {
            (true, true) => "read and write",
            (false, true) => "write",
            _ => "read",
        }
    }

    /// The T2 pages, or an error that says why the LUN has none.
    fn require_t2(&self, lun: &Lun) -> anyhow::Result<Vec<CdlPageKind>> {
        let pages = self.t2_pages();
        if !pages.is_empty() {
            return Ok(pages);
        }
        if self.no_rsoc() {
            bail!(
                "{}: not a CDL device: it does not implement REPORT SUPPORTED OPERATION CODES \
                 (INVALID COMMAND OPERATION CODE), through which a device reports CDL",
                lun.url
            );
        }
        if self
            .commands
            .iter()
            .any(|(_, s)| matches!(Self::page_of(s), CdlpPage::A | CdlpPage::B))
        {
            bail!(
                "{}: the LUN uses the SPC-5 CDL A/B pages, which stint cdl does not handle (it \
                 handles the SPC-6 T2A/T2B pages)",
                lun.url
            );
        }
        bail!(
            "{}: the LUN does not support command duration limits: none of READ(16), \
             WRITE(16), READ(32), WRITE(32) reports a CDL page (REPORT SUPPORTED OPERATION \
             CODES: CDLP 00b); `stint cdl info` shows what it reports",
            lun.url
        )
    }
}

/// Opens the LUN, with the URL in every error.
async fn open(t: &Target) -> anyhow::Result<Lun> {
    Lun::open(&t.url, &t.initiator_name)
        .await
        .with_context(|| format!("stint cdl: {}", iscsi::url::redacted(&t.url)))
}

async fn info(t: Target) -> anyhow::Result<()> {
    let mut lun = open(&t).await?;
    let inq = lun.inquiry().await?;
    say!("Device: {}", lun.url);
    say!("    Vendor: {}", inq.vendor);
    say!("    Product: {}", inq.product);
    say!("    Revision: {}", inq.revision);
    say!(
        "    Peripheral device type: {:02X}h{}",
        inq.device_type,
        if inq.device_type == 0 {
            " (direct access block device)"
        } else {
            " (not a direct access block device)"
        }
    );
    say!(
        "    INQUIRY VERSION: {:02X}h ({})",
        inq.version,
        version_name(inq.version)
    );
    let probe = Probe::run(&mut lun).await?;
    let pages = probe.t2_pages();
    let mut mode = Vec::new();
    for kind in [CdlPageKind::T2A, CdlPageKind::T2B] {
        mode.push((kind, lun.mode_sense(kind).await?));
    }
    let stats = lun.log_sense_cdl_statistics().await?;
    lun.close().await;

    if pages.is_empty() {
        let why = if probe.no_rsoc() {
            "the device does not implement REPORT SUPPORTED OPERATION CODES"
        } else {
            "no command reports a T2A or T2B page"
        };
        say!("    Command duration limits: not supported ({why})");
    } else {
        let names: Vec<_> = pages.iter().map(|k| page_name(*k)).collect();
        say!(
            "    Command duration limits: supported ({})",
            names.join(", ")
        );
    }
    say!("    Commands (REPORT SUPPORTED OPERATION CODES, one command):");
    for (c, s) in &probe.commands {
        let form = c.form();
        let code = match form.service_action {
            Some(sa) => format!("{:02X}h/{sa:04X}h", form.opcode()),
            None => format!("{:02X}h", form.opcode()),
        };
        let what = match s {
            CommandSupport::NoRsoc => {
                "REPORT SUPPORTED OPERATION CODES not supported (INVALID COMMAND OPERATION CODE)"
                    .to_string()
            }
            CommandSupport::NotSupported { support: Some(v) } => {
                format!("not supported (SUPPORT {v:03b}b)")
            }
            CommandSupport::NotSupported { support: None } => {
                "not supported (ILLEGAL REQUEST, INVALID FIELD IN CDB)".to_string()
            }
            CommandSupport::Supported { rwcdlp, cdlp, page } => {
                let page = match page {
                    CdlpPage::None => "not duration limited".to_string(),
                    CdlpPage::A => "CDL A mode page (SPC-5)".to_string(),
                    CdlpPage::B => "CDL B mode page (SPC-5)".to_string(),
                    CdlpPage::T2(k) => format!("{} mode page", page_name(*k)),
                    CdlpPage::Reserved => "reserved combination".to_string(),
                };
                format!("RWCDLP {rwcdlp}, CDLP {cdlp:02b}b: {page}")
            }
        };
        say!("        {:<10} {code:<10} {what}", c.name());
    }
    say!("    Mode pages (MODE SENSE(10)):");
    for (kind, outcome) in &mode {
        let code = format!("0Ah/{:02X}h", kind.subpage());
        let what = match outcome {
            Outcome::Good(d) => match page_bytes(*kind, d) {
                Ok(p) => {
                    let saved = if p[0] & 0x80 != 0 {
                        "savable (PS 1)"
                    } else {
                        "not savable (PS 0)"
                    };
                    let role = if pages.contains(kind) {
                        format!("{} descriptors, ", probe.role(*kind))
                    } else {
                        "no command reports it, ".to_string()
                    };
                    format!("present, {role}{saved}")
                }
                Err(e) => format!("malformed: {e}"),
            },
            other => format!("not present ({other})"),
        };
        say!("        {:<4} {code}: {what}", page_name(*kind));
    }
    let stats = match &stats {
        Outcome::Good(_) => "supported".to_string(),
        o if o.illegal(Asc::INVALID_FIELD_IN_CDB) => {
            "not supported (ILLEGAL REQUEST, INVALID FIELD IN CDB)".into()
        }
        other => format!("LOG SENSE failed ({other})"),
    };
    say!("    Statistics (LOG SENSE 19h/21h): {stats}");
    if !pages.is_empty() && inq.version < 0x07 {
        say!(
            "WARNING: INQUIRY VERSION {:02X}h is below 07h (SPC-5): Linux does not probe CDL on \
             such a device",
            inq.version
        );
    }
    for kind in &pages {
        if !matches!(
            mode.iter().find(|(k, _)| k == kind),
            Some((_, Outcome::Good(_)))
        ) {
            say!(
                "WARNING: commands report the {} page but MODE SENSE does not return it",
                page_name(*kind)
            );
        }
    }
    Ok(())
}

/// The 232 bytes of a T2 page in MODE SENSE(10) parameter data, after checking the header
/// and the page's codes (cdladm checks the same: no block descriptor, page 0Ah, subpage).
fn page_bytes(kind: CdlPageKind, data: &[u8]) -> anyhow::Result<[u8; T2_PAGE_LEN]> {
    if data.len() < 8 {
        bail!("MODE SENSE returned {} bytes, no header", data.len());
    }
    let bdl = usize::from(u16::from_be_bytes([data[6], data[7]]));
    if bdl != 0 {
        bail!("MODE SENSE with DBD=1 returned {bdl} bytes of block descriptors");
    }
    let Some(page) = data.get(8..8 + T2_PAGE_LEN) else {
        bail!(
            "MODE SENSE returned {} bytes of page data, expected {T2_PAGE_LEN}",
            data.len() - 8
        );
    };
    if page[0] & 0x3F != 0x0A || page[0] & 0x40 == 0 || page[1] != kind.subpage() {
        bail!(
            "MODE SENSE returned page {:02X}h/{:02X}h, expected 0Ah/{:02X}h",
            page[0] & 0x3F,
            page[1],
            kind.subpage()
        );
    }
    let mut out = [0u8; T2_PAGE_LEN];
    out.copy_from_slice(page);
    Ok(out)
}

/// MODE SENSE(10) of a page's current values: (parameter data, decoded page).
async fn read_page(lun: &mut Lun, kind: CdlPageKind) -> anyhow::Result<(Vec<u8>, CdlPage)> {
    let name = page_name(kind);
    let data = lun
        .mode_sense(kind)
        .await?
        .good(&format!(
            "MODE SENSE(10) of the {name} page (0Ah/{:02X}h)",
            kind.subpage()
        ))
        .with_context(|| lun.url.clone())?;
    let bytes = page_bytes(kind, &data).with_context(|| format!("{}: {name} page", lun.url))?;
    let page = CdlPage::decode(kind, &bytes)
        .with_context(|| format!("{}: the {name} page holds a value SPC-6 reserves", lun.url))?;
    Ok((data, page))
}

/// A limit as cdladm shows it (cdl-tools `cdl_t2time_str`): in ms, µs or ns, whichever is
/// exact and largest (cdladm truncates to whole ms; this does not).
fn time_text(units: T2CdlUnits, value: u16) -> String {
    let ns = units.unit_ns() * u64::from(value);
    if ns >= 1_000_000 && ns.is_multiple_of(1_000_000) {
        format!("{} ms", ns / 1_000_000)
    } else if ns >= 1_000 && ns.is_multiple_of(1_000) {
        format!("{} us", ns / 1_000)
    } else {
        format!("{ns} ns")
    }
}

fn units_text(units: T2CdlUnits) -> String {
    let name = match units {
        T2CdlUnits::None => "none",
        T2CdlUnits::Ns500 => "500 ns",
        T2CdlUnits::Us1 => "1 us",
        T2CdlUnits::Ms10 => "10 ms",
        T2CdlUnits::Ms500 => "500 ms",
    };
    format!("{name} (0x{:x})", units.code())
}

fn limits(d: &CdlDescriptor) -> [(LimitKind, u16, qos::cdl::Policy); 3] {
    [
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
    ]
}

/// The descriptors of a page in cdladm's `show` layout (cdl-tools `cdl_page_show_t2`), with
/// the units of each descriptor added; `raw` as `cdladm show --raw`.
fn page_text(kind: CdlPageKind, page: &CdlPage, raw: bool) -> String {
    let mut out = String::new();
    let pvsdg = page.perf_vs_duration_guideline.code();
    if kind == CdlPageKind::T2A {
        if raw {
            out += &format!("  perf_vs_duration_guideline : 0x{pvsdg:x}\n");
        } else {
            let percent = PERF_PERCENT.get(usize::from(pvsdg)).unwrap_or(&"?");
            out += &format!("  perf_vs_duration_guideline : {percent}%\n");
        }
    }
    for (n, d) in (1..).zip(&page.descriptors) {
        out += &format!("  Descriptor {n}:\n");
        if raw {
            out += &format!(
                "    T2 CDL units             : 0x{:x}\n",
                d.t2cdlunits.code()
            );
        } else {
            out += &format!(
                "    T2 CDL units             : {}\n",
                units_text(d.t2cdlunits)
            );
        }
        for (kind, value, policy) in limits(d) {
            let (time, pol) = match kind {
                LimitKind::Inactive => ("max inactive time", "max inactive policy"),
                LimitKind::Active => ("max active time", "max active policy"),
                LimitKind::Guideline => ("duration guideline", "duration guideline policy"),
            };
            if raw {
                out += &format!("    {time:<25}: 0x{value:04x}\n");
                out += &format!("    {pol:<25}: 0x{:x}\n", policy.code());
            } else if value != 0 && d.t2cdlunits != T2CdlUnits::None {
                out += &format!("    {time:<25}: {}\n", time_text(d.t2cdlunits, value));
                out += &format!("    {pol:<25}: {}\n", policy.name());
            } else {
                out += &format!("    {time:<25}: no limit\n");
            }
        }
    }
    out
}

async fn show(a: ShowArgs) -> anyhow::Result<()> {
    let mut lun = open(&a.target).await?;
    let probe = Probe::run(&mut lun).await?;
    let pages = probe.require_t2(&lun)?;
    let wanted: Vec<CdlPageKind> = match a.page {
        Some(p) if !pages.contains(&p.kind()) => bail!(
            "{}: the LUN has no {} page (no command reports it)",
            lun.url,
            page_name(p.kind())
        ),
        Some(p) => vec![p.kind()],
        None => pages,
    };
    let mut out = String::new();
    for kind in wanted {
        let (_, page) = read_page(&mut lun, kind).await?;
        out += &format!(
            "Page {}: {} descriptors\n",
            page_name(kind),
            probe.role(kind)
        );
        out += &page_text(kind, &page, a.raw);
    }
    lun.close().await;
    say_raw!("{out}");
    Ok(())
}

/// FILE-T2A.cdl / FILE-T2B.cdl for a save of both pages (cdladm names them
/// `<device>-<page>.cdl`).
fn pair_path(file: &Path, kind: CdlPageKind) -> PathBuf {
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = name.strip_suffix(".cdl").unwrap_or(&name);
    file.with_file_name(format!("{stem}-{}.cdl", page_name(kind)))
}

async fn save(a: SaveArgs) -> anyhow::Result<()> {
    let mut lun = open(&a.target).await?;
    let probe = Probe::run(&mut lun).await?;
    let pages = probe.require_t2(&lun)?;
    let targets: Vec<(CdlPageKind, PathBuf)> = match a.page {
        Some(p) if !pages.contains(&p.kind()) => bail!(
            "{}: the LUN has no {} page (no command reports it)",
            lun.url,
            page_name(p.kind())
        ),
        Some(p) => vec![(p.kind(), a.file.clone())],
        None => pages.iter().map(|k| (*k, pair_path(&a.file, *k))).collect(),
    };
    let mut texts = Vec::new();
    for (kind, path) in targets {
        let (_, page) = read_page(&mut lun, kind).await?;
        texts.push((kind, path, file::render(kind, &page)));
    }
    lun.close().await;
    for (kind, path, text) in texts {
        say!("Saving page {} to file {}", page_name(kind), path.display());
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

/// The MODE SELECT(10) parameter list cdladm sends (cdl-tools `cdl_scsi_write_page`): the
/// MODE SENSE data with MODE DATA LENGTH and the device-specific byte cleared, PS cleared, and
/// the page's changeable fields (scsi::cdl::changeable_mask) replaced by `page` encoded;
/// everything else as the device returned it.
fn select_list(kind: CdlPageKind, sensed: &[u8], page: &CdlPage) -> Vec<u8> {
    let mut list = sensed[..8 + T2_PAGE_LEN].to_vec();
    list[0] = 0;
    list[1] = 0;
    list[3] = 0;
    let p = &mut list[8..];
    p[0] &= 0x7F;
    let changeable = scsi::cdl::changeable_mask(kind);
    for ((b, new), mask) in p.iter_mut().zip(page.encode(kind)).zip(changeable) {
        *b = (*b & !mask) | (new & mask);
    }
    list
}

async fn upload(a: UploadArgs) -> anyhow::Result<()> {
    let path = a.file.display().to_string();
    let bytes = std::fs::read(&a.file).with_context(|| format!("cannot read {path}"))?;
    let text = String::from_utf8_lossy(&bytes);
    say!("Parsing file {path}...");
    let PageFile {
        kind,
        page,
        warnings,
    } = file::parse(&text)
        .map_err(|e| anyhow::anyhow!("{path}: {e}; nothing was sent to the LUN"))?;
    for w in &warnings {
        eprintln!("[WARNING] {path}: {w}");
    }
    let name = page_name(kind);
    let mut lun = open(&a.target).await?;
    let probe = Probe::run(&mut lun).await?;
    let pages = probe.require_t2(&lun)?;
    if !pages.contains(&kind) {
        bail!(
            "{}: the LUN has no {name} page (no command reports it); nothing was sent",
            lun.url
        );
    }
    let (sensed, _) = read_page(&mut lun, kind).await?;
    say!("Uploading page {name}:");
    say_raw!("{}", page_text(kind, &page, false));
    let list = select_list(kind, &sensed, &page);
    let outcome = lun.mode_select(&list, a.permanent).await?;
    match &outcome {
        Outcome::Good(_) => {}
        Outcome::Check(s)
            if a.permanent
                && s.key == SenseKey::IllegalRequest
                && (s.asc == Asc::SAVING_PARAMETERS_NOT_SUPPORTED
                    || (s.asc == Asc::INVALID_FIELD_IN_CDB
                        && matches!(
                            s.field,
                            Some(FieldPointer {
                                in_cdb: true,
                                byte: 1,
                                ..
                            })
                        ))) =>
        {
            bail!(
                "{}: the LUN cannot save mode pages: MODE SELECT(10) with SP=1 refused ({s}); \
                 upload without --permanent changes the current values only",
                lun.url
            )
        }
        other => bail!(
            "{}: MODE SELECT(10) of the {name} page refused: {other}",
            lun.url
        ),
    }
    let (_, now) = read_page(&mut lun, kind).await?;
    lun.close().await;
    if now != page {
        bail!(
            "{}: the LUN accepted MODE SELECT(10) but its {name} page reads back different \
             values",
            a.target.url
        );
    }
    say!(
        "Page {name} uploaded ({})",
        if a.permanent {
            "current and saved values"
        } else {
            "current values"
        }
    );
    Ok(())
}

/// One parameter of the CDL statistics page: the four counters (SPC-6; cdl-tools `struct
/// cdl_scsi_stats_desc`): inactive-miss, active-miss, inactive-or-active-miss, commands.
fn counters(value: &[u8]) -> Option<[u32; 4]> {
    let mut c = [0u32; 4];
    for (i, slot) in c.iter_mut().enumerate() {
        *slot = u32::from_be_bytes(value.get(i * 4..i * 4 + 4)?.try_into().ok()?);
    }
    Some(c)
}

async fn stats(a: StatsArgs) -> anyhow::Result<()> {
    let t = a.target;
    let mut lun = open(&t).await?;
    if a.reset {
        let outcome = lun.log_select_reset_cdl_statistics().await?;
        if !matches!(outcome, Outcome::Good(_)) {
            lun.close().await;
            bail!(
                "{}: resetting the CDL statistics (LOG SELECT, PCR=1, page 19h/21h) failed: \
                 {outcome}",
                t.url
            );
        }
    }
    let outcome = lun.log_sense_cdl_statistics().await?;
    lun.close().await;
    let data = match outcome {
        Outcome::Good(d) => d,
        o if o.illegal(Asc::INVALID_FIELD_IN_CDB) => bail!(
            "{}: the LUN has no CDL statistics: LOG SENSE page 19h subpage 21h is not supported \
             (ILLEGAL REQUEST, INVALID FIELD IN CDB)",
            t.url
        ),
        other => bail!("{}: LOG SENSE page 19h subpage 21h failed: {other}", t.url),
    };
    if data.len() < 4 || data[0] & 0x3F != 0x19 || data[1] != 0x21 {
        bail!(
            "{}: LOG SENSE returned page {:02X}h/{:02X}h, expected 19h/21h",
            t.url,
            data.first().map_or(0, |b| b & 0x3F),
            data.get(1).copied().unwrap_or(0)
        );
    }
    let end = (4 + usize::from(u16::from_be_bytes([data[2], data[3]]))).min(data.len());
    let mut params = std::collections::BTreeMap::new();
    let mut at = 4;
    while at + 4 <= end {
        let code = u16::from_be_bytes([data[at], data[at + 1]]);
        let len = usize::from(data[at + 3]);
        let value = data
            .get(at + 4..(at + 4 + len).min(end))
            .unwrap_or_default();
        params.insert(code, value.to_vec());
        at += 4 + len;
    }
    let mut out = String::new();
    for (kind, first) in [(CdlPageKind::T2A, 0x21u16), (CdlPageKind::T2B, 0x41)] {
        out += &format!(
            "Page {}: parameters {first:04X}h-{:04X}h\n",
            page_name(kind),
            first + 6
        );
        out += &format!(
            "  {:<11}{:>14}{:>13}{:>25}{:>10}\n",
            "descriptor", "inactive-miss", "active-miss", "inactive-or-active-miss", "commands"
        );
        for n in 0..7u16 {
            let row = match params.get(&(first + n)).and_then(|v| counters(v)) {
                Some([i, a, e, c]) => format!("{i:>14}{a:>13}{e:>25}{c:>10}"),
                None => format!("{:>14}", "not reported"),
            };
            out += &format!("  {:<11}{row}\n", n + 1);
        }
    }
    match params.get(&0x0001).and_then(|v| v.get(..4)) {
        Some(b) => {
            let us = u32::from_be_bytes(b.try_into().unwrap_or([0; 4]));
            if us == 0 {
                out += "Achievable latency target: none (0)\n";
            } else {
                out += &format!("Achievable latency target: {us} us\n");
            }
        }
        None => out += "Achievable latency target: not reported\n",
    }
    say_raw!("{out}");
    Ok(())
}
