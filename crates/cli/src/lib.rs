//! The parts of the `stint` command that other crates reach: `stint.toml` parsing and checks,
//! and the admin protocol's requests, which the fuzz targets feed hostile input
//! (docs/fuzzing.md).

pub mod admin_protocol;
pub mod config;
