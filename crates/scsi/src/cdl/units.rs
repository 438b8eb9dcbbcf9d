//! T2CDLUNITS (SPC-6 T2 descriptor: 0h none, 6h 500 ns, 8h 1 µs, Ah 10 ms, Eh 500 ms).

/// Nanoseconds (the unit every limit converts to).
pub type Ns = u64;

/// The unit of the three limits of a T2 descriptor (SPC-6, T2CDLUNITS).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum T2CdlUnits {
    /// 0h: no limit; all three times of the descriptor are ignored.
    #[default]
    None,
    /// 6h: 500 ns.
    Ns500,
    /// 8h: 1 µs.
    Us1,
    /// Ah: 10 ms.
    Ms10,
    /// Eh: 500 ms.
    Ms500,
}

impl T2CdlUnits {
    /// Decodes the 4-bit field; reserved codes give `None`.
    pub fn from_code(code: u8) -> Option<Self> {
        match code {
            0x0 => Some(Self::None),
            0x6 => Some(Self::Ns500),
            0x8 => Some(Self::Us1),
            0xA => Some(Self::Ms10),
            0xE => Some(Self::Ms500),
            _ => None,
        }
    }

    pub fn code(self) -> u8 {
        match self {
            Self::None => 0x0,
            Self::Ns500 => 0x6,
            Self::Us1 => 0x8,
            Self::Ms10 => 0xA,
            Self::Ms500 => 0xE,
        }
    }

    /// Length of one unit in ns (0 for `None`).
    pub fn unit_ns(self) -> Ns {
        match self {
            Self::None => 0,
            Self::Ns500 => 500,
            Self::Us1 => 1_000,
            Self::Ms10 => 10_000_000,
            Self::Ms500 => 500_000_000,
        }
    }

    /// A limit field's value as a duration; `None` when the field (0) or the units (0h) say
    /// "no limit".
    pub fn duration(self, value: u16) -> Option<Ns> {
        match (self, value) {
            (Self::None, _) | (_, 0) => None,
            (units, v) => Some(units.unit_ns() * Ns::from(v)),
        }
    }

    /// The coarsest units that express `ns` exactly in 16 bits, for building pages from
    /// durations (e.g. an experiment file in ms). `None` if no unit fits.
    pub fn exact(ns: Ns) -> Option<(Self, u16)> {
        [Self::Ms500, Self::Ms10, Self::Us1, Self::Ns500]
            .into_iter()
            .find_map(|units| {
                let unit = units.unit_ns();
                if ns.is_multiple_of(unit) {
                    u16::try_from(ns / unit)
                        .ok()
                        .filter(|v| *v != 0)
                        .map(|v| (units, v))
                } else {
                    None
                }
            })
    }
}
