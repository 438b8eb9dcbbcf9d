//! Command Duration Limits as a device sees them: the T2A/T2B mode pages (spec/cdl.md §2.1),
//! their descriptors, units and policies (spec/cdl.md §4).

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
