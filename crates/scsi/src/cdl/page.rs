//! The T2A and T2B mode pages (SPC-6 §7.5.11, §7.5.12: Control mode page 0Ah, subpages 07h/08h,
//! 232 bytes, PAGE LENGTH 00E4h, seven 32-byte descriptors from byte 8).

use super::descriptor::T2_DESCRIPTOR_LEN;
use super::{CdlDescriptor, CdlError};

/// Total size of a T2A/T2B page including its 4-byte header.
pub const T2_PAGE_LEN: usize = 232;
const PAGE_LENGTH_FIELD: u16 = (T2_PAGE_LEN - 4) as u16;
const DESCRIPTORS_AT: usize = 8;

/// Which of the two pages (the CDLP a command reports: READ(16)/(32) → T2A, WRITE(16)/(32) → T2B,
/// as Linux libata and cdl-tools pair them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CdlPageKind {
    T2A,
    T2B,
}

impl CdlPageKind {
    /// Subpage code of Control mode page 0Ah.
    pub fn subpage(self) -> u8 {
        match self {
            Self::T2A => 0x07,
            Self::T2B => 0x08,
        }
    }
}

/// PERF VS DURATION GUIDELINES (SPC-6 T2A mode page byte 7 bits 7:4, codes 0h..Ch = 0..20 %
/// maximum increase in average completion time the device may spend honouring guidelines).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct PerfVsDurationGuideline(u8);

impl PerfVsDurationGuideline {
    /// Allowed increase per code, in tenths of a percent (cdl-tools `cdl_perf_str`).
    const TENTHS_OF_PERCENT: [u16; 13] = [0, 5, 10, 15, 20, 25, 30, 40, 50, 80, 100, 150, 200];
    /// Ch: 20 %, the largest defined code (what WD drives use).
    pub const MAX: Self = Self(0xC);

    /// `None` for the reserved codes Dh..Fh.
    pub fn new(code: u8) -> Option<Self> {
        (usize::from(code) < Self::TENTHS_OF_PERCENT.len()).then_some(Self(code))
    }

    pub fn code(self) -> u8 {
        self.0
    }

    /// The allowed increase as a fraction (0.0 ..= 0.2).
    pub fn fraction(self) -> f64 {
        let tenths = Self::TENTHS_OF_PERCENT
            .get(usize::from(self.0))
            .copied()
            .unwrap_or(0);
        f64::from(tenths) / 1000.0
    }
}

/// One T2A or T2B page: descriptors 1..=7 are `descriptors[0..7]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CdlPage {
    /// Meaningful on T2A only; T2B byte 7 is reserved (encoded as 0, ignored on decode).
    pub perf_vs_duration_guideline: PerfVsDurationGuideline,
    pub descriptors: [CdlDescriptor; 7],
}

impl CdlPage {
    /// Descriptor for DLD `dld`; `None` for 0 (not duration-limited) or > 7.
    pub fn descriptor(&self, dld: u8) -> Option<&CdlDescriptor> {
        self.descriptors.get(usize::from(dld).checked_sub(1)?)
    }

    /// Checks every descriptor's policies (SPC-6 policy codes per limit).
    pub fn validate(&self) -> Result<(), CdlError> {
        (1u8..)
            .zip(&self.descriptors)
            .try_for_each(|(n, d)| d.validate(n))
    }

    /// Decodes a page as sent by MODE SELECT (PS bit ignored). Everything is checked: header,
    /// units and policy codes; the first bad field is reported.
    pub fn decode(kind: CdlPageKind, page: &[u8]) -> Result<Self, CdlError> {
        let page: &[u8; T2_PAGE_LEN] = page
            .try_into()
            .map_err(|_| CdlError::Length { len: page.len() })?;
        if page[0] & 0x7F != 0x4A {
            return Err(CdlError::PageCode { found: page[0] });
        }
        if page[1] != kind.subpage() {
            return Err(CdlError::Subpage {
                expected: kind.subpage(),
                found: page[1],
            });
        }
        let length = u16::from_be_bytes([page[2], page[3]]);
        if length != PAGE_LENGTH_FIELD {
            return Err(CdlError::PageLength { found: length });
        }
        let perf_vs_duration_guideline = match kind {
            CdlPageKind::T2A => PerfVsDurationGuideline::new(page[7] >> 4)
                .ok_or(CdlError::PerfVsDurationGuideline { code: page[7] >> 4 })?,
            CdlPageKind::T2B => PerfVsDurationGuideline::default(),
        };
        let mut descriptors = [CdlDescriptor::default(); 7];
        let chunks = page[DESCRIPTORS_AT..].chunks_exact(T2_DESCRIPTOR_LEN);
        for ((number, slot), chunk) in (1u8..).zip(descriptors.iter_mut()).zip(chunks) {
            let bytes: &[u8; T2_DESCRIPTOR_LEN] = chunk
                .try_into()
                .map_err(|_| CdlError::Length { len: T2_PAGE_LEN })?;
            *slot = CdlDescriptor::decode(number, bytes)?;
        }
        Ok(Self {
            perf_vs_duration_guideline,
            descriptors,
        })
    }

    /// Encodes the page as MODE SENSE returns it (PS=0, SPF=1).
    pub fn encode(&self, kind: CdlPageKind) -> [u8; T2_PAGE_LEN] {
        let mut page = [0u8; T2_PAGE_LEN];
        page[0] = 0x4A;
        page[1] = kind.subpage();
        page[2..4].copy_from_slice(&PAGE_LENGTH_FIELD.to_be_bytes());
        if kind == CdlPageKind::T2A {
            page[7] = self.perf_vs_duration_guideline.code() << 4;
        }
        for (chunk, d) in page[DESCRIPTORS_AT..]
            .chunks_exact_mut(T2_DESCRIPTOR_LEN)
            .zip(&self.descriptors)
        {
            chunk.copy_from_slice(&d.encode());
        }
        page
    }
}

/// The changeable-values mask MODE SENSE returns for PC=01b (SPC-5 §6.14.3): the header as
/// in [`CdlPage::encode`], and ones in every field MODE SELECT may change (T2A byte 7 bits 7:4;
/// per descriptor the units, the three limits and their policies; BYPASS SEQUESTRATION is
/// not supported and stays 0).
pub fn changeable_mask(kind: CdlPageKind) -> [u8; T2_PAGE_LEN] {
    let mut page = CdlPage::default().encode(kind);
    if kind == CdlPageKind::T2A {
        page[7] = 0xF0;
    }
    for d in page[DESCRIPTORS_AT..].chunks_exact_mut(T2_DESCRIPTOR_LEN) {
        d[0] = 0x0F;
        d[2..7].fill(0xFF);
        d[10..12].fill(0xFF);
        d[14] = 0x0F;
    }
    page
}

/// Both pages of a logical unit: T2A for reads, T2B for writes (the CDLP of READ and WRITE).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CdlPages {
    pub t2a: CdlPage,
    pub t2b: CdlPage,
}

impl CdlPages {
    /// The descriptor a command with `dld` selects: T2B for writes, T2A otherwise.
    pub fn descriptor(&self, dld: u8, write: bool) -> Option<&CdlDescriptor> {
        self.page(write).descriptor(dld)
    }

    pub fn page(&self, write: bool) -> &CdlPage {
        if write {
            &self.t2b
        } else {
            &self.t2a
        }
    }

    pub fn validate(&self) -> Result<(), CdlError> {
        self.t2a.validate()?;
        self.t2b.validate()
    }
}
