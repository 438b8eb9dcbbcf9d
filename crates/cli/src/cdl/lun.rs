//! One logical unit reached over iSCSI with the crate's initiator, and the SCSI commands
//! `stint cdl` sends it: INQUIRY, REPORT LUNS, REPORT SUPPORTED OPERATION CODES (one command),
//! MODE SENSE(10)/MODE SELECT(10) of the CDL T2A/T2B pages, LOG SENSE of the Command Duration
//! Limits statistics page.

use anyhow::{bail, Context};
use iscsi::initiator::{Error as IscsiError, Initiator, LoginOptions};
use iscsi::url::IscsiUrl;
use qos::cdl::CdlPageKind;
use scsi::command::{
    Command, Inquiry as InquiryCommand, LogPageControl, LogSelect, LogSense, ModeSelect, ModeSense,
    PageControl, ReportSupportedOperationCodes,
};
use scsi::table::CommandInfo;
use scsi::{form, Asc, Sense, SenseKey, Status};
use std::fmt;
use std::time::Duration;

/// How long connecting and each command may take.
const TIMEOUT: Duration = Duration::from_secs(10);
/// A new nexus first sees its power-on unit attention, and a MODE SELECT from another
/// nexus leaves a MODE PARAMETERS CHANGED one: a command is repeated this many times at most.
const UNIT_ATTENTION_RETRIES: usize = 8;

/// How a command ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// GOOD, with the Data-In bytes.
    Good(Vec<u8>),
    /// CHECK CONDITION with decodable sense data.
    Check(Sense),
    /// Any other status (or CHECK CONDITION without sense data).
    Status(u8),
}

impl Outcome {
    /// ILLEGAL REQUEST with `asc`.
    pub fn illegal(&self, asc: Asc) -> bool {
        matches!(self, Outcome::Check(s) if (s.key, s.asc) == (SenseKey::IllegalRequest, asc))
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

    /// Its command table entry: name, operation code, service action.
    pub fn form(self) -> &'static CommandInfo {
        match self {
            Self::Read16 => form::READ_16,
            Self::Write16 => form::WRITE_16,
            Self::Read32 => form::READ_32,
            Self::Write32 => form::WRITE_32,
        }
    }

    pub fn name(self) -> &'static str {
        self.form().name
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

    /// Runs `command` in `form`, repeating it after a unit attention; `alloc` bytes of
    /// Data-In at most.
    pub async fn run(
        &mut self,
        command: Command,
        form: &CommandInfo,
        data_out: &[u8],
        alloc: u32,
    ) -> anyhow::Result<Outcome> {
        let cdb = command.emit(form)?;
        for _ in 0..UNIT_ATTENTION_RETRIES {
            let r = self
                .session
                .scsi_command(self.lun, &cdb, data_out, alloc)
                .await
                .with_context(|| format!("{}: the iSCSI session failed", self.url))?;
            const GOOD: u8 = Status::Good as u8;
            const CHECK_CONDITION: u8 = Status::CheckCondition as u8;
            match r.status {
                GOOD => return Ok(Outcome::Good(r.data_in)),
                CHECK_CONDITION => match r.parsed_sense() {
                    Some(s) if s.key == SenseKey::UnitAttention => continue,
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
        let inquiry = Command::Inquiry(InquiryCommand {
            evpd: false,
            page_code: 0,
            allocation_length: 96,
        });
        let d = self
            .run(inquiry, form::INQUIRY, &[], 96)
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
        let report_luns = Command::ReportLuns {
            select_report: 0,
            allocation_length: 4096,
        };
        let d = self
            .run(report_luns, form::REPORT_LUNS, &[], 4096)
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
        let rsoc = Command::ReportSupportedOperationCodes(ReportSupportedOperationCodes {
            rctd: false,
            reporting_options: 0b011,
            requested_operation_code: c.form().opcode(),
            requested_service_action: c.form().service_action.unwrap_or(0),
            allocation_length: 512,
        });
        let outcome = self
            .run(rsoc, form::REPORT_SUPPORTED_OPERATION_CODES, &[], 512)
            .await?;
        if outcome.illegal(Asc::INVALID_COMMAND_OPERATION_CODE) {
            return Ok(CommandSupport::NoRsoc);
        }
        if outcome.illegal(Asc::INVALID_FIELD_IN_CDB) {
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

    /// MODE SENSE(10) of a CDL page's current values with DBD = 1, as cdladm reads it. The
    /// whole parameter data (8-byte header and the page).
    pub async fn mode_sense(&mut self, kind: CdlPageKind) -> anyhow::Result<Outcome> {
        let mode_sense = Command::ModeSense(ModeSense {
            ten: true,
            dbd: true,
            llbaa: false,
            pc: PageControl::Current,
            page_code: scsi::mode::CONTROL,
            subpage_code: kind.subpage(),
            allocation_length: 512,
        });
        self.run(mode_sense, form::MODE_SENSE_10, &[], 512).await
    }

    /// MODE SELECT(10) with PF = 1 (and SP = 1 when `save`).
    pub async fn mode_select(&mut self, list: &[u8], save: bool) -> anyhow::Result<Outcome> {
        let mode_select = Command::ModeSelect(ModeSelect {
            ten: true,
            pf: true,
            sp: save,
            parameter_list_length: u16::try_from(list.len())
                .context("MODE SELECT parameter list too long")?,
        });
        self.run(mode_select, form::MODE_SELECT_10, list, 0).await
    }

    /// LOG SELECT, PCR = 1, PC = 01b (cumulative values), page 19h subpage 21h, no
    /// parameter list: the page's counters to their defaults (SPC-5 §6.8).
    pub async fn log_select_reset_cdl_statistics(&mut self) -> anyhow::Result<Outcome> {
        let (page_code, subpage_code) = scsi::log::COMMAND_DURATION_LIMITS_STATISTICS;
        let reset = Command::LogSelect(LogSelect {
            pcr: true,
            pc: LogPageControl::CumulativeValues,
            page_code,
            subpage_code,
        });
        self.run(reset, form::LOG_SELECT, &[], 0).await
    }

    /// LOG SENSE(10), PC = 01b (cumulative values), page 19h subpage 21h.
    pub async fn log_sense_cdl_statistics(&mut self) -> anyhow::Result<Outcome> {
        let (page_code, subpage_code) = scsi::log::COMMAND_DURATION_LIMITS_STATISTICS;
        let log_sense = Command::LogSense(LogSense {
            pc: LogPageControl::CumulativeValues,
            page_code,
            subpage_code,
            parameter_pointer: 0,
            allocation_length: 2048,
        });
        self.run(log_sense, form::LOG_SENSE, &[], 2048).await
    }
}
