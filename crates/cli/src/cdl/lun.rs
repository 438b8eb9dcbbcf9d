//! One logical unit reached over iSCSI with the crate's initiator, and the SCSI commands
//! `stint cdl` sends it: INQUIRY, REPORT LUNS, REPORT SUPPORTED OPERATION CODES (one command),
//! MODE SENSE(10)/MODE SELECT(10) of the CDL T2A/T2B pages, LOG SENSE of the Command Duration
//! Limits statistics page.

use anyhow::{bail, Context};
use iscsi::initiator::{Error as IscsiError, Initiator, LoginOptions};
use iscsi::url::IscsiUrl;
use qos::cdl::CdlPageKind;
use std::fmt;
use std::time::Duration;

/// How long connecting and each command may take.
const TIMEOUT: Duration = Duration::from_secs(10);
/// CHECK CONDITION (SAM-5 status codes).
const CHECK_CONDITION: u8 = 0x02;
/// A new nexus first sees its power-on unit attention, and a MODE SELECT from another
/// nexus leaves a MODE PARAMETERS CHANGED one: a command is repeated this many times at most.
const UNIT_ATTENTION_RETRIES: usize = 8;

/// Sense keys (SPC-5 table 54).
pub const ILLEGAL_REQUEST: u8 = 0x05;
const UNIT_ATTENTION: u8 = 0x06;

/// The sense data of a CHECK CONDITION, fixed (70h/71h) or descriptor (72h/73h) format
/// (SPC-5 §4.4.2, §4.4.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SenseInfo {
    pub key: u8,
    pub asc: u8,
    pub ascq: u8,
    /// Sense-key specific field pointer: (C/D: true for the CDB, byte, bit when valid).
    pub field: Option<(bool, u16, Option<u8>)>,
}

impl SenseInfo {
    fn parse(s: &[u8]) -> Option<SenseInfo> {
        let at = |i: usize| s.get(i).copied().unwrap_or(0);
        let sksv = |b: &[u8]| -> Option<(bool, u16, Option<u8>)> {
            let b0 = *b.first()?;
            (b0 & 0x80 != 0).then(|| {
                (
                    b0 & 0x40 != 0,
                    u16::from_be_bytes([
                        b.get(1).copied().unwrap_or(0),
                        b.get(2).copied().unwrap_or(0),
                    ]),
                    (b0 & 0x08 != 0).then_some(b0 & 0x07),
                )
            })
        };
        match at(0) & 0x7F {
            0x70 | 0x71 => Some(SenseInfo {
                key: at(2) & 0x0F,
                asc: at(12),
                ascq: at(13),
                field: s.get(15..18).and_then(sksv),
            }),
            0x72 | 0x73 => {
                // Sense data descriptors from byte 8; sense key specific is type 02h.
                let mut field = None;
                let mut i = 8;
                while i + 2 <= s.len() {
                    let len = usize::from(at(i + 1));
                    if at(i) == 0x02 {
                        field = s.get(i + 4..i + 7).and_then(sksv);
                    }
                    i += 2 + len;
                }
                Some(SenseInfo {
                    key: at(1) & 0x0F,
                    asc: at(2),
                    ascq: at(3),
                    field,
                })
            }
            _ => None,
        }
    }

    pub fn is(&self, key: u8, asc: u8, ascq: u8) -> bool {
        (self.key, self.asc, self.ascq) == (key, asc, ascq)
    }
}

impl fmt::Display for SenseInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Sense key names (SPC-5 table 54) and the additional sense codes a target is likely
        // to give these commands (SPC-5 table 58).
        const KEYS: [&str; 16] = [
            "NO SENSE",
            "RECOVERED ERROR",
            "NOT READY",
            "MEDIUM ERROR",
            "HARDWARE ERROR",
            "ILLEGAL REQUEST",
            "UNIT ATTENTION",
            "DATA PROTECT",
            "BLANK CHECK",
            "VENDOR SPECIFIC",
            "COPY ABORTED",
            "ABORTED COMMAND",
            "RESERVED",
            "VOLUME OVERFLOW",
            "MISCOMPARE",
            "COMPLETED",
        ];
        let asc = match (self.asc, self.ascq) {
            (0x1A, 0x00) => "PARAMETER LIST LENGTH ERROR",
            (0x20, 0x00) => "INVALID COMMAND OPERATION CODE",
            (0x24, 0x00) => "INVALID FIELD IN CDB",
            (0x25, 0x00) => "LOGICAL UNIT NOT SUPPORTED",
            (0x26, 0x00) => "INVALID FIELD IN PARAMETER LIST",
            (0x27, 0x00) => "WRITE PROTECTED",
            (0x29, _) => "POWER ON, RESET, OR BUS DEVICE RESET OCCURRED",
            (0x2A, 0x01) => "MODE PARAMETERS CHANGED",
            (0x39, 0x00) => "SAVING PARAMETERS NOT SUPPORTED",
            (0x04, _) => "LOGICAL UNIT NOT READY",
            _ => "",
        };
        write!(f, "{}", KEYS[usize::from(self.key & 0x0F)])?;
        if asc.is_empty() {
            write!(f, ", ASC/ASCQ {:02X}h/{:02X}h", self.asc, self.ascq)?;
        } else {
            write!(f, ", {asc} ({:02X}h/{:02X}h)", self.asc, self.ascq)?;
        }
        if let Some((cdb, byte, bit)) = self.field {
            let what = if cdb { "CDB" } else { "parameter list" };
            write!(f, " at {what} byte {byte}")?;
            if let Some(bit) = bit {
                write!(f, " bit {bit}")?;
            }
        }
        Ok(())
    }
}

/// How a command ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// GOOD, with the Data-In bytes.
    Good(Vec<u8>),
    /// CHECK CONDITION with decodable sense data.
    Check(SenseInfo),
    /// Any other status (or CHECK CONDITION without sense data).
    Status(u8),
}

impl Outcome {
    /// ILLEGAL REQUEST with `asc`/`ascq`.
    pub fn illegal(&self, asc: u8, ascq: u8) -> bool {
        matches!(self, Outcome::Check(s) if s.is(ILLEGAL_REQUEST, asc, ascq))
    }

    /// The data of a GOOD status, or an error naming the command and the failure.
    pub fn good(self, command: &str) -> anyhow::Result<Vec<u8>> {
        match self {
            Outcome::Good(data) => Ok(data),
            other => bail!("{command} failed: {other}"),
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Good(_) => write!(f, "GOOD"),
            Outcome::Check(s) => write!(f, "CHECK CONDITION, {s}"),
            Outcome::Status(s) => write!(f, "status {s:02X}h"),
        }
    }
}

/// The commands that can carry a duration limit descriptor index (SBC-5 READ/WRITE(16) and
/// (32); cdl-tools probes the same four).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CdlCommand {
    Read16,
    Write16,
    Read32,
    Write32,
}

impl CdlCommand {
    pub const ALL: [CdlCommand; 4] = [Self::Read16, Self::Write16, Self::Read32, Self::Write32];

    /// (operation code, service action).
    pub fn opcode(self) -> (u8, u16) {
        match self {
            Self::Read16 => (0x88, 0),
            Self::Write16 => (0x8A, 0),
            Self::Read32 => (0x7F, 0x0009),
            Self::Write32 => (0x7F, 0x000B),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Read16 => "READ(16)",
            Self::Write16 => "WRITE(16)",
            Self::Read32 => "READ(32)",
            Self::Write32 => "WRITE(32)",
        }
    }

    pub fn is_write(self) -> bool {
        matches!(self, Self::Write16 | Self::Write32)
    }
}

/// The mode page a command's CDLP and RWCDLP name (SPC-6 REPORT SUPPORTED OPERATION CODES,
/// one_command parameter data).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CdlpPage {
    /// CDLP 00b: the command is not duration limited.
    None,
    /// RWCDLP 0, CDLP 01b/10b: the SPC-5 CDL A/B pages (0Ah/03h, 0Ah/04h).
    A,
    B,
    /// RWCDLP 1, CDLP 01b/10b: the SPC-6 T2A/T2B pages.
    T2(CdlPageKind),
    /// A reserved combination.
    Reserved,
}

impl CdlpPage {
    fn from_fields(rwcdlp: u8, cdlp: u8) -> CdlpPage {
        match (rwcdlp, cdlp) {
            (_, 0) => CdlpPage::None,
            (0, 1) => CdlpPage::A,
            (0, 2) => CdlpPage::B,
            (1, 1) => CdlpPage::T2(CdlPageKind::T2A),
            (1, 2) => CdlpPage::T2(CdlPageKind::T2B),
            _ => CdlpPage::Reserved,
        }
    }
}

/// What REPORT SUPPORTED OPERATION CODES says about one command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommandSupport {
    /// SUPPORT 011b (supported as the standard defines), with RWCDLP and CDLP.
    Supported {
        rwcdlp: u8,
        cdlp: u8,
        page: CdlpPage,
    },
    /// Any other SUPPORT value, or ILLEGAL REQUEST for that operation code.
    NotSupported { support: Option<u8> },
    /// The device does not implement REPORT SUPPORTED OPERATION CODES.
    NoRsoc,
}

/// Standard INQUIRY data (SPC-5 §6.7.2), the fields `stint cdl` uses.
#[derive(Clone, Debug)]
pub struct Inquiry {
    pub qualifier: u8,
    pub device_type: u8,
    pub version: u8,
    pub vendor: String,
    pub product: String,
    pub revision: String,
}

/// A logged-in session to one LUN.
pub struct Lun {
    session: Initiator,
    pub lun: u64,
    pub url: String,
    pub target: String,
}

fn ascii(b: &[u8]) -> String {
    String::from_utf8_lossy(b).trim().to_string()
}

/// An Initiator Session ID of the random format (RFC 7143 §11.12.5: T = 10b) from the
/// process id, so that concurrent `stint cdl` runs open distinct sessions.
fn isid() -> [u8; 6] {
    let pid = std::process::id().to_be_bytes();
    [0x80, 0x00, pid[0], pid[1], pid[2], pid[3]]
}

impl Lun {
    /// Connects to the portal of `url`, logs in to its target as `initiator` and checks with
    /// INQUIRY that the LUN exists.
    pub async fn open(url: &str, initiator: &str) -> anyhow::Result<Lun> {
        let parsed: IscsiUrl = url.parse().map_err(|e| anyhow::anyhow!("{e}"))?;
        let mut opts = LoginOptions::new(initiator, Some(&parsed.target));
        opts.chap = parsed.chap.clone();
        opts.isid = isid();
        opts.timeout = TIMEOUT;
        let connect = Initiator::connect_portal(&parsed.portal, &opts);
        let session = match tokio::time::timeout(TIMEOUT, connect).await {
            Err(_) => bail!(
                "cannot reach {}: no answer in {} s",
                parsed.portal,
                TIMEOUT.as_secs()
            ),
            Ok(Err(IscsiError::Io(e))) => bail!(
                "cannot connect to {}: {e} (is an iSCSI target such as `stint serve` listening \
                 there?)",
                parsed.portal
            ),
            Ok(Err(IscsiError::LoginFailed(s))) => {
                let why = s.meaning();
                bail!(
                    "login to {} at {} as {initiator} failed: {why} (status class {:02X}h, detail \
                     {:02X}h)",
                    parsed.target,
                    parsed.portal,
                    s.0,
                    s.1
                )
            }
            Ok(Err(e)) => bail!(
                "login to {} at {} failed: {e}",
                parsed.target,
                parsed.portal
            ),
            Ok(Ok(s)) => s,
        };
        let mut lun = Lun {
            session,
            lun: parsed.lun,
            // What is shown of the LUN: without its secrets.
            url: iscsi::url::redacted(url),
            target: parsed.target,
        };
        let inquiry = lun.inquiry().await?;
        if inquiry.qualifier != 0 {
            let luns = lun.report_luns().await.unwrap_or_default();
            let list = if luns.is_empty() {
                String::from("none reported")
            } else {
                luns.iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            bail!(
                "LUN {} does not exist on {} (INQUIRY peripheral qualifier {:03b}b); REPORT LUNS \
                 lists: {list}",
                lun.lun,
                lun.target,
                inquiry.qualifier
            );
        }
        Ok(lun)
    }

    /// Logs out (errors are of no consequence once the work is done).
    pub async fn close(self) {
        let _ = self.session.logout().await;
    }

    /// Runs one command, repeating it after a unit attention.
    pub async fn run(
        &mut self,
        cdb: &[u8],
        data_out: &[u8],
        alloc: u32,
    ) -> anyhow::Result<Outcome> {
        for _ in 0..UNIT_ATTENTION_RETRIES {
            let r = self
                .session
                .scsi_command(self.lun, cdb, data_out, alloc)
                .await
                .with_context(|| format!("{}: the iSCSI session failed", self.url))?;
            match r.status {
                0 => return Ok(Outcome::Good(r.data_in)),
                CHECK_CONDITION => match SenseInfo::parse(&r.sense) {
                    Some(s) if s.key == UNIT_ATTENTION => continue,
                    Some(s) => return Ok(Outcome::Check(s)),
                    None => return Ok(Outcome::Status(r.status)),
                },
                other => return Ok(Outcome::Status(other)),
            }
        }
        bail!(
            "{}: every try of the command ended in UNIT ATTENTION ({UNIT_ATTENTION_RETRIES} tries)",
            self.url
        )
    }

    /// Standard INQUIRY.
    pub async fn inquiry(&mut self) -> anyhow::Result<Inquiry> {
        let d = self
            .run(&[0x12, 0, 0, 0, 96, 0], &[], 96)
            .await?
            .good("INQUIRY")?;
        if d.len() < 36 {
            bail!(
                "INQUIRY returned {} bytes, fewer than the 36 of standard data",
                d.len()
            );
        }
        Ok(Inquiry {
            qualifier: d[0] >> 5,
            device_type: d[0] & 0x1F,
            version: d[2],
            vendor: ascii(&d[8..16]),
            product: ascii(&d[16..32]),
            revision: ascii(&d[32..36]),
        })
    }

    /// REPORT LUNS (SELECT REPORT 00h): the LUN numbers.
    async fn report_luns(&mut self) -> anyhow::Result<Vec<u64>> {
        let d = self
            .run(&[0xA0, 0, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0], &[], 4096)
            .await?
            .good("REPORT LUNS")?;
        Ok(d.get(8..)
            .unwrap_or_default()
            .chunks_exact(8)
            .map(|c| iscsi::lun::decode(u64::from_be_bytes(c.try_into().unwrap_or([0; 8]))))
            .collect())
    }

    /// REPORT SUPPORTED OPERATION CODES, REPORTING OPTIONS 011b (one command, with service
    /// action, as cdladm asks; SPC-5 §6.35), for one of the four CDL commands.
    pub async fn command_support(&mut self, c: CdlCommand) -> anyhow::Result<CommandSupport> {
        let (opcode, sa) = c.opcode();
        let mut cdb = [0xA3, 0x0C, 0x03, opcode, 0, 0, 0, 0, 0x02, 0x00, 0, 0];
        cdb[4..6].copy_from_slice(&sa.to_be_bytes());
        let outcome = self.run(&cdb, &[], 512).await?;
        if outcome.illegal(0x20, 0x00) {
            return Ok(CommandSupport::NoRsoc);
        }
        if outcome.illegal(0x24, 0x00) {
            return Ok(CommandSupport::NotSupported { support: None });
        }
        let d = outcome.good(&format!(
            "REPORT SUPPORTED OPERATION CODES for {}",
            c.name()
        ))?;
        if d.len() < 2 {
            bail!(
                "REPORT SUPPORTED OPERATION CODES for {} returned {} bytes",
                c.name(),
                d.len()
            );
        }
        let support = d[1] & 0x07;
        if support != 0b011 {
            return Ok(CommandSupport::NotSupported {
                support: Some(support),
            });
        }
        let rwcdlp = d[0] & 0x01;
        let cdlp = (d[1] >> 3) & 0x03;
        Ok(CommandSupport::Supported {
            rwcdlp,
            cdlp,
            page: CdlpPage::from_fields(rwcdlp, cdlp),
        })
    }

    /// MODE SENSE(10) of a CDL page with DBD = 1, as cdladm reads it: `pc` is the PAGE
    /// CONTROL (0 current, 1 changeable, 2 default, 3 saved). The whole parameter data
    /// (8-byte header and the page).
    pub async fn mode_sense(&mut self, kind: CdlPageKind, pc: u8) -> anyhow::Result<Outcome> {
        let cdb = [
            0x5A,
            0x08,
            (pc << 6) | 0x0A,
            kind.subpage(),
            0,
            0,
            0,
            0x02,
            0x00,
            0,
        ];
        self.run(&cdb, &[], 512).await
    }

    /// MODE SELECT(10) with PF = 1 (and SP = 1 when `save`).
    pub async fn mode_select(&mut self, list: &[u8], save: bool) -> anyhow::Result<Outcome> {
        let len = u16::try_from(list.len()).context("MODE SELECT parameter list too long")?;
        let mut cdb = [0x55, 0x10 | u8::from(save), 0, 0, 0, 0, 0, 0, 0, 0];
        cdb[7..9].copy_from_slice(&len.to_be_bytes());
        self.run(&cdb, list, 0).await
    }

    /// LOG SELECT, PCR = 1, PC = 01b (cumulative values), page 19h subpage 21h, no
    /// parameter list: the page's counters to their defaults (SPC-5 §6.8).
    pub async fn log_select_reset_cdl_statistics(&mut self) -> anyhow::Result<Outcome> {
        self.run(&[0x4C, 0x02, 0x40 | 0x19, 0x21, 0, 0, 0, 0, 0, 0], &[], 0)
            .await
    }

    /// LOG SENSE(10), PC = 01b (cumulative values), page 19h subpage 21h.
    pub async fn log_sense_cdl_statistics(&mut self) -> anyhow::Result<Outcome> {
        self.run(
            &[0x4D, 0, 0x40 | 0x19, 0x21, 0, 0, 0, 0x08, 0x00, 0],
            &[],
            2048,
        )
        .await
    }
}
