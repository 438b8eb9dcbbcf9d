//! Command Duration Limits as a device sees them: the T2A/T2B mode pages (SPC-6 §7.5.11,
//! §7.5.12), their descriptors, units and policies.

mod descriptor;
mod error;
mod page;
mod policy;
mod units;

pub use descriptor::CdlDescriptor;
pub use error::CdlError;
pub use page::{
    changeable_mask, CdlPage, CdlPageKind, CdlPages, PerfVsDurationGuideline, T2_PAGE_LEN,
};
pub use policy::{LimitKind, Policy};
pub use units::{Ns, T2CdlUnits};
