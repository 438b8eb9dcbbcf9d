//! Priority classes: one submission queue each (NVMe queue priorities and WRR;
//! usable as Linux ioprio classes RT/BE/IDLE, §3.1).

/// Number of classes, and so of submission queues.
pub const CLASSES: usize = 4;

/// A priority class. Its index (`class as usize`) is what [`crate::Command::class`] carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Class {
    /// NVMe Urgent: strictly above the weighted classes under WRR.
    Urgent = 0,
    /// NVMe High; Linux RT (NVMe priorities to Linux I/O priority classes).
    High = 1,
    /// NVMe Medium; Linux BE (and NONE).
    Medium = 2,
    /// NVMe Low; Linux IDLE.
    Low = 3,
}

impl Class {
    pub const ALL: [Class; CLASSES] = [Class::Urgent, Class::High, Class::Medium, Class::Low];

    pub fn from_index(index: usize) -> Option<Self> {
        Self::ALL.get(index).copied()
    }

    pub fn index(self) -> usize {
        self as usize
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Urgent => "urgent",
            Self::High => "high",
            Self::Medium => "medium",
            Self::Low => "low",
        }
    }

    /// Parses a class name; Linux ioprio class names are accepted as aliases
    /// (rt → high, be → medium, idle → low).
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "urgent" => Some(Self::Urgent),
            "high" | "rt" => Some(Self::High),
            "medium" | "be" => Some(Self::Medium),
            "low" | "idle" => Some(Self::Low),
            _ => None,
        }
    }

    /// Class for a Linux ioprio class value (include/uapi/linux/ioprio.h: 0 NONE, 1 RT, 2 BE,
    /// 3 IDLE); NONE is treated as BE, unknown values as BE.
    pub fn from_ioprio_class(ioprio_class: u8) -> Self {
        match ioprio_class {
            1 => Self::High,
            3 => Self::Low,
            _ => Self::Medium,
        }
    }
}
