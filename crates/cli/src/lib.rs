//! The parts of the `stint` command that other crates reach: `stint.toml` parsing and checks,
//! which the fuzz targets feed hostile files (docs/fuzzing.md).

pub mod config;
